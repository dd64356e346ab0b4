package translog

import (
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// GenerateKey returns a new Ed25519 note key pair named origin, in the
// encodings of [note.NewSigner] (skey, secret) and [note.NewVerifier]
// (vkey, to publish). The name of a log's key is its origin.
func GenerateKey(origin string) (skey, vkey string, err error) {
	skey, vkey, err = note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", "", fmt.Errorf("translog: generate key: %w", err)
	}
	return skey, vkey, nil
}

// OpenCheckpoint checks that signed is a note signed by v and that its
// text is a checkpoint whose origin is v.Name(), and returns the
// checkpoint. Signatures by other keys (witness cosignatures) are ignored.
// A bad or missing signature by v, or another origin, is an error
// wrapping [ErrVerify]; a malformed note or checkpoint one wrapping
// [ErrFormat].
func OpenCheckpoint(signed []byte, v note.Verifier) (Checkpoint, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return Checkpoint{}, fmt.Errorf("translog: open checkpoint: %w: %v", ErrVerify, err)
		}
		return Checkpoint{}, fmt.Errorf("translog: open checkpoint: %w: %v", ErrFormat, err)
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("translog: open checkpoint: %w", err)
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, fmt.Errorf("translog: open checkpoint: %w: origin %q signed by key %q", ErrVerify, c.Origin, v.Name())
	}
	return c, nil
}

// CheckProof checks a c2sp.org/tlog-proof@v1 proof that entry is in the
// log whose key is v: the checkpoint's signature by v and origin (see
// [OpenCheckpoint]), then the inclusion of [tlog.RecordHash](entry) at the
// proof's index in the checkpoint's tree. It returns the checkpoint. A
// malformed proof is an error wrapping [ErrFormat]; a failed check one
// wrapping [ErrVerify].
func CheckProof(proof, entry []byte, v note.Verifier) (Checkpoint, error) {
	p, err := ParseProof(proof)
	if err != nil {
		return Checkpoint{}, err
	}
	c, err := OpenCheckpoint(p.Checkpoint, v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("translog: check proof: %w", err)
	}
	if p.Index >= c.Size {
		return Checkpoint{}, fmt.Errorf("translog: check proof: %w: index %d beyond tree size %d", ErrVerify, p.Index, c.Size)
	}
	if err := tlog.CheckRecord(p.Hashes, c.Size, c.Hash, p.Index, tlog.RecordHash(entry)); err != nil {
		return Checkpoint{}, fmt.Errorf("translog: check proof: %w: entry %d not in tree %d: %v", ErrVerify, p.Index, c.Size, err)
	}
	return c, nil
}

// CheckConsistency checks that proof shows the tree of checkpoint new to
// be an append-only extension of the tree of checkpoint old (RFC 6962
// §2.1.2): same origin, old.Size <= new.Size, and the proof leads to both
// root hashes. Both checkpoints must have been authenticated already (see
// [OpenCheckpoint]). A failed check is an error wrapping [ErrVerify].
func CheckConsistency(old, new Checkpoint, proof tlog.TreeProof) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("translog: check consistency: %w: %s", ErrVerify, fmt.Sprintf(format, args...))
	}
	switch {
	case old.Origin != new.Origin:
		return fail("origins %q and %q differ", old.Origin, new.Origin)
	case old.Size < 0 || old.Size > new.Size:
		return fail("old size %d above new size %d", old.Size, new.Size)
	case old.Size == 0:
		// Every tree extends the empty one, whose hash is fixed.
		empty, _ := tlog.TreeHash(0, nil)
		if old.Hash != empty || len(proof) != 0 {
			return fail("bad proof from the empty tree")
		}
		return nil
	case old.Size == new.Size:
		if old.Hash != new.Hash || len(proof) != 0 {
			return fail("two trees of size %d: %s and %s", old.Size, old.Hash, new.Hash)
		}
		return nil
	}
	if err := tlog.CheckTree(proof, new.Size, new.Hash, old.Size, old.Hash); err != nil {
		return fail("tree %d is not an extension of tree %d: %v", new.Size, old.Size, err)
	}
	return nil
}
