// Package ledger holds shredd's append-only, authenticated logs and
// their heads kept beside the root (docs/design.md §2). The forget ledger
// (forgets.ledger: one chained JSON line per committed forget, Lines) and
// the registration WAL (wal/*.seg: numbered frames of registrations in
// segments, Segments) are its two formats; erasure and registry use them
// and keep what a forget or a registration means. What both need is
// written here once: the MAC key of a log derived from the subject secret
// (MACKey), the head kept with the root (Head, ReadHead, KeepHead) against
// which a start tells a whole log from one rolled back, cut or copied, the
// check of a log against it (Check, Assess for Lines; the WAL's mark in
// registry), the refusal of a damaged tail or frame that names the file
// and the fix, and the file primitives (Fdatasync, CutFile). Each format
// reserves its space its own way, for the reason its comments give: Lines
// with fallocate ahead of a forget's commit (a full disk refuses the
// forget), Segments by writing zeros ahead (so a group's fdatasync
// commits no file-system journal). Both on-disk formats are byte-identical
// to those of earlier releases.
//
// Lines knows the fields of a forget's line, not what a forget does;
// Segments' records are opaque (Config.Check parses them).
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shredd/shredd/keystore"
)

// Keeper is a root store that keeps heads (keystore.MarkKeeper): Vault's
// KV beside the Transit key, or the local root file.
type Keeper = keystore.MarkKeeper

// ErrNoKeeper is returned by KeepHead when the root store keeps no heads.
var ErrNoKeeper = errors.New("ledger: the root store keeps no heads")

// ReadHead reads into v the head kept for stream in root (a JSON value
// the root store does not interpret): found false, and no error, when
// none was kept or root keeps none. Any other failure is returned as it
// came (it wraps keystore.ErrRootUnavailable when the store did not
// answer), for the caller to name the stream and the fix.
func ReadHead(ctx context.Context, root keystore.RootStore, stream string, v any) (found bool, err error) {
	k, ok := root.(Keeper)
	if !ok || stream == "" {
		return false, nil
	}
	b, err := k.Mark(ctx, stream)
	if errors.Is(err, keystore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("ledger: the head of %s kept with the root is unreadable: %w: %v", stream, keystore.ErrCorrupt, err)
	}
	return true, nil
}

// Keeps reports whether root keeps heads.
func Keeps(root keystore.RootStore) bool {
	_, ok := root.(Keeper)
	return ok
}

// KeepHead durably records v (marshalled as JSON) as stream's head in
// root, replacing the one kept before, before it returns; ErrNoKeeper
// when root keeps none.
func KeepHead(ctx context.Context, root keystore.RootStore, stream string, v any) error {
	k, ok := root.(Keeper)
	if !ok || stream == "" {
		return ErrNoKeeper
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return k.KeepMark(ctx, stream, b)
}

// Head is the position of a Lines log (the forget ledger), kept with the
// root so that a log rolled back, truncated or replaced is told apart
// from one that is whole: the log's instance, the sequence number and
// hash of its last line, and how many lines it held then. It holds no key
// and no subject. Its JSON is what root files of earlier releases kept in
// their ledger_head field.
type Head struct {
	Instance string `json:"instance"` // the log's random identity, from its header
	Seq      uint64 `json:"seq"`      // the last line's sequence number (0: the header alone)
	Hash     string `json:"hash"`     // the last line's hash (hex)
	Lines    uint64 `json:"lines"`    // lines in the file, compacted ones left out
}

// UnmarshalJSON reads a head as it is kept, refusing one that names no
// instance: every head shredd keeps names its log's, so one without is
// an edited or damaged root, never a head to check a log against.
func (h *Head) UnmarshalJSON(b []byte) error {
	type plain Head
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Instance == "" {
		return errors.New("a head that names no instance")
	}
	*h = Head(p)
	return nil
}
