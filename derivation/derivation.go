// Package derivation is shredd's lineage registry and forget state machine.
//
// Every artifact shredd seals or registers is recorded with its kind, holder,
// direct subjects and parents; its lineage is the transitive closure of the
// subjects over its parents, stored flat so that a forget finds every
// artifact that depends on a subject in one index lookup. Sealing an artifact
// needs every subject key of its lineage (envelope's AND semantics), so
// forgetting any one subject makes every derivative and aggregate of it
// unreadable.
//
// A forget moves requested → committed → shredded (docs/design.md, "Forget"). The
// commit is the barrier: from then on every encrypt, decrypt or registration
// whose lineage contains the subject is refused with ErrShredded, also when it
// races the forget. Shredded means the subject's bucket was re-keyed and a
// root epoch completed after that.
package derivation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"

	"github.com/shredd/shredd/envelope"
)

// Errors of the registry. They wrap the underlying cause with %w; callers test
// with errors.Is.
var (
	// ErrInvalid means the request is malformed (bad kind name, no subject,
	// too many parents, bad id ...).
	ErrInvalid = errors.New("invalid request")
	// ErrUnknownKind means the artifact's kind was never registered.
	ErrUnknownKind = errors.New("unknown kind")
	// ErrUnknownParent means a named parent artifact is not in the registry.
	ErrUnknownParent = errors.New("unknown parent artifact")
	// ErrNotFound means the named forget or artifact does not exist.
	ErrNotFound = errors.New("not found")
	// ErrShredded means a subject of the lineage was forgotten: the data
	// existed and has been erased.
	ErrShredded = errors.New("shredded")
	// ErrTooLarge means a plaintext, context or lineage exceeds its limit.
	ErrTooLarge = errors.New("too large")
	// ErrEnvelope means a ciphertext is not a valid shredd envelope, or it
	// fails to open with its keys and the given context.
	ErrEnvelope = errors.New("invalid envelope")
	// ErrUnavailable means the root store cannot be reached; nothing was
	// encrypted or decrypted (fail closed).
	ErrUnavailable = errors.New("key backend unavailable")
	// ErrForbidden means the caller acts for another holder than the one
	// that owns the lease, artifact or ack.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict means the request contradicts what is registered (a
	// holder's key cannot be replaced).
	ErrConflict = errors.New("conflict")
	// ErrSignature means a holder's signature does not verify.
	ErrSignature = errors.New("invalid signature")
)

// Limits enforced on requests, on top of the envelope's own.
const (
	MaxSubjects  = envelope.MaxLineage // direct subjects of one artifact
	MaxParents   = 256                 // parents of one artifact
	MaxSubjectID = 1024                // bytes of a raw subject id
	MaxHolderLen = 128
)

// LabelSID is the domain-separation label of the keyed subject hash.
const LabelSID = "shredd/v1/sid"

var (
	kindRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	holderRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)
)

// ValidKind reports whether name is a well-formed kind name.
func ValidKind(name string) bool { return kindRe.MatchString(name) }

// ValidHolder reports whether id is a well-formed holder id.
func ValidHolder(id string) bool { return holderRe.MatchString(id) }

// Hasher turns raw subject ids into sids: HMAC-SHA256 under a per-installation
// secret, so that the database, logs and key names never hold the raw id, and
// nobody without the secret can test a guessed id against a sid.
type Hasher struct{ key []byte }

// NewHasher returns a Hasher with the given secret (at least 32 bytes).
func NewHasher(secret []byte) (*Hasher, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("derivation: subject secret of %d bytes, want >= 32: %w", len(secret), ErrInvalid)
	}
	return &Hasher{key: append([]byte(nil), secret...)}, nil
}

// SID returns the keyed hash of a raw subject id.
func (h *Hasher) SID(subject string) envelope.SID {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(LabelSID))
	m.Write([]byte{0})
	m.Write([]byte(subject))
	var s envelope.SID
	copy(s[:], m.Sum(nil))
	return s
}

// ID is a 16-byte identifier of an artifact or a forget, written as 32
// lowercase hex digits.
type ID [16]byte

// String returns the hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses the hex form of an ID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 32 {
		return id, fmt.Errorf("derivation: id %q: %w", truncate(s), ErrInvalid)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("derivation: id %q: %w", truncate(s), ErrInvalid)
	}
	return id, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
