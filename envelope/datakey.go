package envelope

// Client-side sealing: the artifact key and header that a key service hands
// to a writer, and the seal the writer runs with them (docs/envelope.md,
// "Client-side sealing").

import (
	"fmt"
	"slices"

	"golang.org/x/crypto/cryptobyte"
)

// DataKey is what a writer needs to seal one artifact itself: the header
// bytes of its envelope and its artifact key K_a (section 3 of the
// specification). SealWithKey with them produces exactly the envelope that
// Seal with the same header and the subject keys produces, and that Open
// opens with the subject keys.
//
// Key opens this one envelope and no other: it is derived from the header,
// whose salt is fresh per artifact. It is as sensitive as the plaintext it
// seals, and it is for exactly one plaintext: sealing two plaintexts with
// one DataKey reuses the AES-GCM nonce.
type DataKey struct {
	Header []byte
	Key    []byte
}

// NewDataKey derives the data key of h from the subject keys of its
// lineage: h's header bytes and its artifact key. h must come from
// NewHeader and serve no other seal. It returns the errors of Seal for an
// invalid h or keys that do not match the lineage.
func NewDataKey(h Header, keys []SubjectKey) (DataKey, error) {
	if err := validateHeader(&h); err != nil {
		return DataKey{}, fmt.Errorf("envelope: data key: %w", err)
	}
	if h.Salt == [SaltSize]byte{} {
		return DataKey{}, fmt.Errorf("envelope: data key: %w: all-zero salt (make headers with NewHeader)", ErrInvalid)
	}
	hdr := appendHeader(make([]byte, 0, headerSize(&h)), &h)
	key, err := deriveKey(hdr, &h, keys)
	if err != nil {
		return DataKey{}, fmt.Errorf("envelope: data key: %w", err)
	}
	return DataKey{Header: hdr, Key: key[:]}, nil
}

// ParseHeader parses the header bytes of an envelope (magic to nonce, no
// ciphertext), canonically, as Parse does. It does not retain b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) > maxHeaderSize {
		return Header{}, fmt.Errorf("envelope: parse header: %w: %d bytes, at most %d", ErrMalformed, len(b), maxHeaderSize)
	}
	s := cryptobyte.String(b)
	h, err := readHeader(&s)
	if err != nil {
		return Header{}, fmt.Errorf("envelope: parse header: %w", err)
	}
	if len(s) != 0 {
		return Header{}, fmt.Errorf("envelope: parse header: %w: %d bytes after the nonce", ErrMalformed, len(s))
	}
	return h, nil
}

// SealWithKey seals plaintext with a data key and binds context to it, as
// Seal does with the subject keys, and appends the binary form of the
// envelope (header, then AES-GCM output) to dst, which may be nil. The
// header must parse (ParseHeader) and the key be KeySize bytes.
//
// SealWithKey returns an error wrapping ErrTooLarge for a plaintext over
// MaxPlaintext or a context over MaxContext, ErrMalformed or ErrUnsupported
// for header bytes that do not parse, and ErrInvalid for a key of the wrong
// size or an all-zero salt. It cannot tell a key of another header from the
// right one: the envelope would then fail to open. Each data key seals one
// plaintext only.
func SealWithKey(dst []byte, dk DataKey, plaintext, context []byte) ([]byte, error) {
	if err := CheckSizes(plaintext, context); err != nil {
		return dst, fmt.Errorf("envelope: seal with key: %w", err)
	}
	if len(dk.Key) != KeySize {
		return dst, fmt.Errorf("envelope: seal with key: %w: key is %d bytes, want %d", ErrInvalid, len(dk.Key), KeySize)
	}
	h, err := ParseHeader(dk.Header)
	if err != nil {
		return dst, fmt.Errorf("envelope: seal with key: %w", err)
	}
	if h.Salt == [SaltSize]byte{} {
		return dst, fmt.Errorf("envelope: seal with key: %w: all-zero salt", ErrInvalid)
	}
	start := len(dst)
	dst = slices.Grow(dst, len(dk.Header)+len(plaintext)+TagSize)
	dst = append(dst, dk.Header...)
	hdr := dst[start:]
	return newAEAD(dk.Key).Seal(dst, h.Nonce[:], plaintext, additionalData(hdr, context)), nil
}

// Clear zeroes the key. Call it once the plaintext is sealed.
func (dk *DataKey) Clear() { clear(dk.Key) }
