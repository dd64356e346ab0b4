package registry

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"unicode/utf8"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
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

// LabelForgetSalt is the domain-separation label of the key that seals a
// forget's commitment salt (Hasher.SealSalt).
const LabelForgetSalt = "shredd/v1/forget-salt"

// ValidKind reports whether name is a well-formed kind name
// (shredd.ValidKind).
func ValidKind(name string) bool { return shredd.ValidKind(name) }

// ValidHolder reports whether id is a well-formed holder id
// (shredd.ValidHolder).
func ValidHolder(id string) bool { return shredd.ValidHolder(id) }

// Hasher turns raw subject ids into sids: HMAC-SHA256 under a per-installation
// secret, so that the database, logs and key names never hold the raw id, and
// nobody without the secret can test a guessed id against a sid.
type Hasher struct{ key []byte }

// NewHasher returns a Hasher with the given secret (at least 32 bytes).
func NewHasher(secret []byte) (*Hasher, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("registry: subject secret of %d bytes, want >= 32: %w", len(secret), shredd.ErrInvalid)
	}
	return &Hasher{key: append([]byte(nil), secret...)}, nil
}

// saltAEAD is the AEAD that seals the commitment salt of a forget of
// subject: AES-256-GCM under HMAC-SHA256(secret, label ‖ 0 ‖ subject), so
// that only whoever holds the secret and names the raw subject id again
// (the caller of a repeated forget) can open it.
func (h *Hasher) saltAEAD(subject string) cipher.AEAD {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(LabelForgetSalt))
	m.Write([]byte{0})
	m.Write([]byte(subject))
	k := m.Sum(nil)
	defer clear(k)
	b, err := aes.NewCipher(k)
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return a
}

// SealSalt seals a forget's commitment salt for subject, bound to the
// forget's id: the database keeps it so that a repeated forget returns
// the salt the first answer carried.
func (h *Hasher) SealSalt(subject string, forget []byte, salt []byte) []byte {
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return h.saltAEAD(subject).Seal(nonce, nonce, salt, forget)
}

// OpenSalt opens a salt SealSalt sealed for subject and forget.
func (h *Hasher) OpenSalt(subject string, forget []byte, sealed []byte) ([]byte, error) {
	if len(sealed) < 12 {
		return nil, fmt.Errorf("registry: sealed salt too short: %w", shredd.ErrInvalid)
	}
	return h.saltAEAD(subject).Open(nil, sealed[:12], sealed[12:], forget)
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

// CheckSubject refuses a raw subject id that is empty, longer than
// MaxSubjectID or not valid UTF-8: ids are compared as bytes, and an
// invalid one could alias another after any later normalisation.
func CheckSubject(subject string) error {
	if subject == "" || len(subject) > MaxSubjectID {
		return fmt.Errorf("registry: subject empty or over %d bytes: %w", MaxSubjectID, shredd.ErrInvalid)
	}
	if !utf8.ValidString(subject) {
		return fmt.Errorf("registry: subject is not valid UTF-8: %w", shredd.ErrInvalid)
	}
	return nil
}
