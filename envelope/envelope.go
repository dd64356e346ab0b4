// Package envelope implements the shredd ciphertext format, version 1, as
// specified in docs/envelope.md.
//
// An envelope is a self-describing header (format version, algorithm,
// artifact id, kind, lineage references, salt and nonce) followed by an
// AES-256-GCM ciphertext. The artifact key is derived from the subject keys
// (DEKs) of every subject in the lineage, so destroying any one of them makes
// the envelope unreadable (AND semantics). The header is bound into both the
// key derivation and the associated data, and so is the caller's context.
//
// The package is pure functions: it does no I/O, keeps no state, and imports
// no other shredd package. The byte format (Parse, Marshal, ParseText,
// String, in format.go) is kept apart from the cryptography (NewHeader, Seal,
// Open, in envelope.go).
package envelope

//go:generate go run ../testkit/vectorgen -out testdata/vectors

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"golang.org/x/crypto/hkdf"
)

// Format constants of version 1. They are part of the wire format: changing
// any of them requires a new version (see docs/envelope.md, "Versioning").
const (
	// Version1 is the format version byte of this format.
	Version1 = 1
	// AlgAES256GCM is the algorithm byte for HKDF-SHA256 key derivation with
	// AES-256-GCM, the only algorithm of version 1.
	AlgAES256GCM = 1

	// SIDSize is the size of a subject id: a keyed hash of the caller's
	// subject id, never the raw id.
	SIDSize = 32
	// ArtifactIDSize is the size of an artifact id.
	ArtifactIDSize = 16
	// KeySize is the size of a subject key (DEK) and of the derived artifact
	// key: 256 bits, for AES-256.
	KeySize = 32
	// SaltSize is the size of the per-artifact HKDF salt. 256 random bits make
	// every artifact key unique (a collision is a 2^-128 birthday event even
	// after 2^64 artifacts under the same lineage keys).
	SaltSize = 32
	// NonceSize is the AES-GCM nonce size. 96 bits is GCM's native nonce size
	// (no GHASH of the nonce). Since every artifact key seals exactly one
	// message, the random nonce is defence in depth, not the uniqueness
	// guarantee.
	NonceSize = 12
	// TagSize is the AES-GCM authentication tag size: the full 128 bits.
	TagSize = 16

	// MaxKindLen is the longest kind, in bytes. A kind is 1 to MaxKindLen
	// bytes of [a-z0-9._-] and starts with [a-z0-9].
	MaxKindLen = 64
	// MaxLineage is the largest number of subjects in one envelope's lineage.
	MaxLineage = 1024
	// MaxPlaintext is the largest plaintext, in bytes (64 MiB).
	MaxPlaintext = 64 << 20
	// MaxContext is the largest caller context, in bytes.
	MaxContext = 4096

	// Prefix is the prefix of the text form: Prefix followed by the binary
	// form in unpadded base64url.
	Prefix = "shredd:v1:"

	// LabelArtifactKey is the domain-separation label that starts the HKDF
	// info of the artifact key.
	LabelArtifactKey = "shredd/v1/artifact-key"
	// LabelAAD is the domain-separation label that starts the AES-GCM
	// associated data.
	LabelAAD = "shredd/v1/aad"
)

// SID is a subject id: the keyed hash of a data subject's caller-side id.
type SID [SIDSize]byte

// ArtifactID is the id of a sealed artifact.
type ArtifactID [ArtifactIDSize]byte

// Ref is a lineage reference: a subject and the generation of its key. A
// subject that is forgotten and later reinstated gets a new generation, so
// envelopes sealed under an old generation stay unreadable.
type Ref struct {
	SID SID
	Gen uint32
}

// SubjectKey is the subject key (DEK) of one Ref. Key is KeySize bytes.
type SubjectKey struct {
	Ref Ref
	Key []byte
}

// Header is the authenticated header of an envelope.
//
// A valid Header has a valid Kind and a canonical Lineage: 1 to MaxLineage
// refs, sorted by SID bytes ascending, no SID twice. NewHeader makes one.
type Header struct {
	Artifact ArtifactID
	Kind     string
	Lineage  []Ref
	Salt     [SaltSize]byte
	Nonce    [NonceSize]byte
}

// Subjects returns the subject ids of h's lineage, in lineage order.
func (h Header) Subjects() []SID {
	s := make([]SID, len(h.Lineage))
	for i, r := range h.Lineage {
		s[i] = r.SID
	}
	return s
}

// Envelope is a sealed artifact: its header and the AES-GCM output.
//
// Envelopes returned by Seal and Parse remember the exact header bytes they
// were sealed or parsed with; Open authenticates those bytes and refuses to
// open an Envelope whose Header was changed since.
type Envelope struct {
	Header Header
	// Ciphertext is the AES-GCM output: the encrypted plaintext followed by
	// the TagSize-byte tag.
	Ciphertext []byte

	raw []byte // header bytes as sealed or parsed; nil for hand-built values
}

// Errors returned by this package, wrapped with the operation and detail;
// test for them with errors.Is. An error may match more than one of them
// (Parse of an oversized lineage is both ErrMalformed and ErrLineageTooLarge).
var (
	// ErrMalformed means the bytes or text do not parse as a version 1
	// envelope: bad magic or prefix, truncation, a bad kind, a non-canonical
	// lineage, a ciphertext shorter than a tag, bad base64 ...
	ErrMalformed = errors.New("malformed envelope")
	// ErrUnsupported means an unknown format version or algorithm.
	ErrUnsupported = errors.New("unsupported envelope version or algorithm")
	// ErrTooLarge means a plaintext larger than MaxPlaintext or a context
	// larger than MaxContext.
	ErrTooLarge = errors.New("too large")
	// ErrLineageTooLarge means a lineage of more than MaxLineage refs.
	ErrLineageTooLarge = errors.New("lineage too large")
	// ErrInvalid means invalid arguments: an empty lineage, a duplicate SID,
	// a bad kind, a key of the wrong size, keys that do not exactly match the
	// lineage, a Header not made by NewHeader or changed after Parse. It is a
	// programming error of the caller, distinct from ErrOpen.
	ErrInvalid = errors.New("invalid argument")
	// ErrOpen means authentication failed: a wrong key, a wrong context or
	// tampered bytes. It never says which.
	ErrOpen = errors.New("message authentication failed")
)

// NewHeader returns a header for a new artifact: it copies lineage, sorts it
// into canonical order and validates it and kind, then fills Salt and Nonce
// from rand (crypto/rand.Reader if rand is nil).
//
// NewHeader returns an error wrapping ErrInvalid for a bad kind, an empty
// lineage or a SID listed twice, and ErrLineageTooLarge for more than
// MaxLineage refs.
//
// A Header is for exactly one call to Seal. Sealing two plaintexts with the
// same Header and keys reuses the artifact key and the nonce, which breaks
// AES-GCM: always make a fresh Header.
func NewHeader(rand io.Reader, artifact ArtifactID, kind string, lineage []Ref) (Header, error) {
	if rand == nil {
		rand = crand.Reader
	}
	if p := kindProblem(kind); p != "" {
		return Header{}, fmt.Errorf("envelope: new header: %w: %s", ErrInvalid, p)
	}
	switch {
	case len(lineage) == 0:
		return Header{}, fmt.Errorf("envelope: new header: %w: empty lineage", ErrInvalid)
	case len(lineage) > MaxLineage:
		return Header{}, fmt.Errorf("envelope: new header: %w: %d refs, at most %d", ErrLineageTooLarge, len(lineage), MaxLineage)
	}
	h := Header{Artifact: artifact, Kind: kind, Lineage: slices.Clone(lineage)}
	slices.SortFunc(h.Lineage, compareRefs)
	for i := 1; i < len(h.Lineage); i++ {
		if h.Lineage[i-1].SID == h.Lineage[i].SID {
			return Header{}, fmt.Errorf("envelope: new header: %w: a subject is listed twice in the lineage", ErrInvalid)
		}
	}
	var r [SaltSize + NonceSize]byte // one read: salt, then nonce
	if _, err := io.ReadFull(rand, r[:]); err != nil {
		return Header{}, fmt.Errorf("envelope: new header: reading salt and nonce: %w", err)
	}
	copy(h.Salt[:], r[:SaltSize])
	copy(h.Nonce[:], r[SaltSize:])
	return h, nil
}

// Seal encrypts plaintext for h and binds context to it. keys may be in any
// order but must hold exactly one key for each Ref of h.Lineage (same SID and
// Gen). Seal does not modify or retain keys, plaintext or context.
//
// Seal returns an error wrapping ErrTooLarge for a plaintext over
// MaxPlaintext or a context over MaxContext, ErrLineageTooLarge for an
// oversized lineage, and ErrInvalid for an invalid h (including an all-zero
// Salt, the mark of a Header not made by NewHeader) or keys that do not
// match the lineage.
func Seal(h Header, keys []SubjectKey, plaintext, context []byte) (*Envelope, error) {
	out, hdrLen, err := appendSeal(nil, &h, keys, plaintext, context)
	if err != nil {
		return nil, err
	}
	h.Lineage = slices.Clone(h.Lineage)
	return &Envelope{Header: h, Ciphertext: out[hdrLen:], raw: out[:hdrLen:hdrLen]}, nil
}

// AppendSeal seals like Seal and appends the binary form of the envelope
// (what Marshal returns) to dst. It lets a caller that only needs the bytes
// reuse one buffer across calls, so the hot path allocates no output slice.
// It returns the same errors as Seal.
func AppendSeal(dst []byte, h Header, keys []SubjectKey, plaintext, context []byte) ([]byte, error) {
	out, _, err := appendSeal(dst, &h, keys, plaintext, context)
	return out, err
}

// appendSeal appends header and ciphertext to dst and returns them with the
// header's length.
func appendSeal(dst []byte, h *Header, keys []SubjectKey, plaintext, context []byte) ([]byte, int, error) {
	if err := CheckSizes(plaintext, context); err != nil {
		return dst, 0, fmt.Errorf("envelope: seal: %w", err)
	}
	if err := validateHeader(h); err != nil {
		return dst, 0, fmt.Errorf("envelope: seal: %w", err)
	}
	if h.Salt == [SaltSize]byte{} {
		return dst, 0, fmt.Errorf("envelope: seal: %w: all-zero salt (make headers with NewHeader)", ErrInvalid)
	}
	hs := headerSize(h)
	start := len(dst)
	dst = slices.Grow(dst, hs+len(plaintext)+TagSize)
	dst = appendHeader(dst, h)
	hdr := dst[start : start+hs]
	aead, err := artifactAEAD(hdr, h, keys)
	if err != nil {
		return dst[:start], 0, fmt.Errorf("envelope: seal: %w", err)
	}
	dst = aead.Seal(dst, h.Nonce[:], plaintext, additionalData(hdr, context))
	return dst, hs, nil
}

// CheckSizes returns an error wrapping ErrTooLarge for a plaintext over
// MaxPlaintext or a context over MaxContext: what Seal and SealWithKey
// refuse, for a caller to check before it asks for a data key.
func CheckSizes(plaintext, context []byte) error {
	if len(plaintext) > MaxPlaintext {
		return fmt.Errorf("%w: plaintext is %d bytes, at most %d", ErrTooLarge, len(plaintext), MaxPlaintext)
	}
	if len(context) > MaxContext {
		return fmt.Errorf("%w: context is %d bytes, at most %d", ErrTooLarge, len(context), MaxContext)
	}
	return nil
}

// Open authenticates and decrypts e with keys and context, and returns the
// plaintext. keys may be in any order but must hold exactly one key for each
// Ref of e.Header.Lineage (same SID and Gen). The context must be the one
// given to Seal; nil and empty are the same context.
//
// Open returns an error wrapping ErrInvalid if keys do not match the lineage
// or e.Header was changed after Parse or Seal, ErrUnsupported for an unknown
// version or algorithm, ErrTooLarge for an oversized context or ciphertext,
// and ErrOpen if authentication fails, whatever the reason: wrong key, wrong
// context or tampered bytes. Open does not modify e, so one Envelope may be
// opened from many goroutines at once.
func Open(e *Envelope, keys []SubjectKey, context []byte) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("envelope: open: %w: nil envelope", ErrInvalid)
	}
	if len(context) > MaxContext {
		return nil, fmt.Errorf("envelope: open: %w: context is %d bytes, at most %d", ErrTooLarge, len(context), MaxContext)
	}
	hdr, err := e.headerBytes()
	if err != nil {
		return nil, fmt.Errorf("envelope: open: %w", err)
	}
	switch {
	case len(e.Ciphertext) < TagSize:
		return nil, fmt.Errorf("envelope: open: %w: ciphertext shorter than the tag", ErrMalformed)
	case len(e.Ciphertext)-TagSize > MaxPlaintext:
		return nil, fmt.Errorf("envelope: open: %w: ciphertext over %d bytes", ErrTooLarge, MaxPlaintext+TagSize)
	}
	aead, err := artifactAEAD(hdr, &e.Header, keys)
	if err != nil {
		return nil, fmt.Errorf("envelope: open: %w", err)
	}
	pt, err := aead.Open(nil, e.Header.Nonce[:], e.Ciphertext, additionalData(hdr, context))
	if err != nil {
		// Deliberately no detail: which of key, context or bytes was wrong
		// must not be told apart.
		return nil, fmt.Errorf("envelope: open: %w", ErrOpen)
	}
	return pt, nil
}

// headerBytes returns the header bytes that Open authenticates: the raw bytes
// as parsed or sealed, after checking that e.Header still encodes to exactly
// them, or the encoding of a hand-built e.Header.
func (e *Envelope) headerBytes() ([]byte, error) {
	if err := validateHeader(&e.Header); err != nil {
		return nil, err
	}
	enc := appendHeader(make([]byte, 0, headerSize(&e.Header)), &e.Header)
	if e.raw == nil {
		return enc, nil
	}
	if len(e.raw) < len(magic)+2 || e.raw[len(magic)] != Version1 || e.raw[len(magic)+1] != AlgAES256GCM {
		return nil, fmt.Errorf("%w: not a version %d, algorithm %d header", ErrUnsupported, Version1, AlgAES256GCM)
	}
	if !bytes.Equal(enc, e.raw) {
		return nil, fmt.Errorf("%w: header changed after Parse or Seal", ErrInvalid)
	}
	return e.raw, nil
}

// artifactAEAD derives the artifact key of header hdr (the encoding of h)
// from keys and returns its AES-256-GCM instance.
//
// K_a = HKDF-SHA256(IKM = K_1 ‖ … ‖ K_n, salt = h.Salt,
// info = LabelArtifactKey ‖ 0x00 ‖ hdr). Why HKDF: the salted extract step
// turns the concatenated DEKs into one pseudorandom key that every DEK
// contributes to (AND: without any one of them the IKM is unpredictable),
// and the info binds the key to this exact header, so a header changed in
// any byte derives an unrelated key as well as failing the AAD check.
func artifactAEAD(hdr []byte, h *Header, keys []SubjectKey) (cipher.AEAD, error) {
	key, err := deriveKey(hdr, h, keys)
	if err != nil {
		return nil, err
	}
	defer clear(key[:])
	return newAEAD(key[:]), nil
}

// deriveKey derives the artifact key K_a of header hdr (the encoding of h)
// from keys. The caller clears it after use.
func deriveKey(hdr []byte, h *Header, keys []SubjectKey) ([KeySize]byte, error) {
	var key [KeySize]byte
	ikm, err := lineageIKM(h.Lineage, keys)
	if err != nil {
		return key, err
	}
	// Best effort: the HMAC states inside the libraries keep copies that
	// cannot be cleared from here.
	defer clear(ikm)
	prk := hkdf.Extract(sha256.New, ikm, h.Salt[:])
	defer clear(prk)

	info := make([]byte, 0, len(LabelArtifactKey)+1+len(hdr))
	info = append(info, LabelArtifactKey...)
	info = append(info, 0)
	info = append(info, hdr...)
	if _, err := io.ReadFull(hkdf.Expand(sha256.New, prk, info), key[:]); err != nil {
		panic("envelope: hkdf: " + err.Error()) // 32 bytes never exceed HKDF's limit
	}
	return key, nil
}

// newAEAD returns the AES-256-GCM instance of a KeySize-byte artifact key.
//
// Why AES-256-GCM: AES-NI and carry-less multiply make it the fastest AEAD
// on servers, and the key is used for one message only (fresh salt per
// artifact), which removes GCM's nonce-collision and data limits.
func newAEAD(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic("envelope: aes: " + err.Error()) // key is always 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("envelope: gcm: " + err.Error())
	}
	return aead
}

// lineageIKM checks that keys hold exactly one key of KeySize bytes for each
// ref of the canonical lineage, and returns the keys concatenated in lineage
// order: the IKM. The caller clears it after use.
func lineageIKM(lineage []Ref, keys []SubjectKey) ([]byte, error) {
	if len(keys) != len(lineage) {
		return nil, fmt.Errorf("%w: %d keys for a lineage of %d refs", ErrInvalid, len(keys), len(lineage))
	}
	var small [8]int
	order := small[:0]
	if len(keys) > len(small) {
		order = make([]int, 0, len(keys))
	}
	order = order[:len(keys)]
	for i := range order {
		order[i] = i
	}
	if len(order) > 1 {
		slices.SortFunc(order, func(a, b int) int {
			return bytes.Compare(keys[a].Ref.SID[:], keys[b].Ref.SID[:])
		})
	}
	ikm := make([]byte, 0, len(lineage)*KeySize)
	for i, ref := range lineage {
		k := &keys[order[i]]
		var p string
		switch {
		case k.Ref.SID != ref.SID:
			p = fmt.Sprintf("keys do not match the lineage at ref %d", i)
		case k.Ref.Gen != ref.Gen:
			p = fmt.Sprintf("key for lineage ref %d is generation %d, the header has %d", i, k.Ref.Gen, ref.Gen)
		case len(k.Key) != KeySize:
			p = fmt.Sprintf("key for lineage ref %d is %d bytes, want %d", i, len(k.Key), KeySize)
		}
		if p != "" {
			clear(ikm)
			return nil, fmt.Errorf("%w: %s", ErrInvalid, p)
		}
		ikm = append(ikm, k.Key...)
	}
	return ikm, nil
}

// additionalData returns the AES-GCM associated data:
// LabelAAD ‖ 0x00 ‖ hdr ‖ uint32(len(context)) ‖ context. The length prefix
// keeps the encoding unambiguous; the label separates it from the HKDF info.
func additionalData(hdr, context []byte) []byte {
	ad := make([]byte, 0, len(LabelAAD)+1+len(hdr)+4+len(context))
	ad = append(ad, LabelAAD...)
	ad = append(ad, 0)
	ad = append(ad, hdr...)
	ad = binary.BigEndian.AppendUint32(ad, uint32(len(context)))
	return append(ad, context...)
}

// compareRefs orders refs by SID bytes: the canonical lineage order.
func compareRefs(a, b Ref) int {
	return bytes.Compare(a.SID[:], b.SID[:])
}
