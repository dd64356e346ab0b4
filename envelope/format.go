package envelope

// This file is the byte format only: encoding, parsing and validation of
// headers and envelopes, with no cryptography.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/cryptobyte"
)

const (
	magic = "SHRD"
	// refSize is the encoded size of one Ref: sid, then gen as uint32.
	refSize = SIDSize + 4
	// fixedHeaderSize is the header size without the kind and ref bytes:
	// magic, version, alg, artifact, kindLen, count, salt, nonce.
	fixedHeaderSize = len(magic) + 1 + 1 + ArtifactIDSize + 1 + 2 + SaltSize + NonceSize
	maxHeaderSize   = fixedHeaderSize + MaxKindLen + MaxLineage*refSize
	maxEnvelopeSize = maxHeaderSize + MaxPlaintext + TagSize
)

// textEncoding is unpadded base64url that rejects non-zero trailing bits, so
// every envelope has exactly one text form.
var textEncoding = base64.RawURLEncoding.Strict()

// Parse parses the binary form of an envelope. It accepts only the canonical
// encoding, so e.Marshal() returns exactly b for every b that Parse accepts.
// Parse does not retain b.
//
// Parse returns an error wrapping ErrUnsupported for an unknown version or
// algorithm, and ErrMalformed for anything else that is not a version 1
// envelope (along with ErrLineageTooLarge or ErrTooLarge if a limit is
// exceeded). Parse does no cryptography: a parsed envelope is not yet
// authenticated, Open does that.
func Parse(b []byte) (*Envelope, error) {
	if len(b) > maxEnvelopeSize {
		return nil, fmt.Errorf("envelope: parse: %w: %w: %d bytes, at most %d", ErrMalformed, ErrTooLarge, len(b), maxEnvelopeSize)
	}
	s := cryptobyte.String(b)
	h, err := readHeader(&s)
	if err != nil {
		return nil, fmt.Errorf("envelope: parse: %w", err)
	}

	switch {
	case len(s) < TagSize:
		return nil, fmt.Errorf("envelope: parse: %w: ciphertext shorter than the tag", ErrMalformed)
	case len(s)-TagSize > MaxPlaintext:
		return nil, fmt.Errorf("envelope: parse: %w: %w: ciphertext over %d bytes", ErrMalformed, ErrTooLarge, MaxPlaintext+TagSize)
	}
	n := len(b) - len(s) // header length
	buf := bytes.Clone(b)
	return &Envelope{Header: h, Ciphertext: buf[n:], raw: buf[:n:n]}, nil
}

// readHeader reads a canonical version 1 header from the front of s: magic
// to nonce. Its errors are Parse's, without the "envelope: parse" prefix.
func readHeader(s *cryptobyte.String) (Header, error) {
	truncated := func(field string) error {
		return fmt.Errorf("%w: truncated at %s", ErrMalformed, field)
	}
	var m []byte
	var h Header
	if !s.ReadBytes(&m, len(magic)) {
		return Header{}, truncated("magic")
	}
	if string(m) != magic {
		return Header{}, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	var version, alg uint8
	if !s.ReadUint8(&version) {
		return Header{}, truncated("version")
	}
	if version != Version1 {
		return Header{}, fmt.Errorf("%w: version %d", ErrUnsupported, version)
	}
	if !s.ReadUint8(&alg) {
		return Header{}, truncated("algorithm")
	}
	if alg != AlgAES256GCM {
		return Header{}, fmt.Errorf("%w: algorithm %d", ErrUnsupported, alg)
	}

	if !s.CopyBytes(h.Artifact[:]) {
		return Header{}, truncated("artifact")
	}
	var kind cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&kind) {
		return Header{}, truncated("kind")
	}
	if p := kindProblem(string(kind)); p != "" {
		return Header{}, fmt.Errorf("%w: %s", ErrMalformed, p)
	}
	h.Kind = string(kind)

	var count uint16
	if !s.ReadUint16(&count) {
		return Header{}, truncated("lineage count")
	}
	switch {
	case count == 0:
		return Header{}, fmt.Errorf("%w: empty lineage", ErrMalformed)
	case count > MaxLineage:
		return Header{}, fmt.Errorf("%w: %w: %d refs, at most %d", ErrMalformed, ErrLineageTooLarge, count, MaxLineage)
	}
	h.Lineage = make([]Ref, count)
	for i := range h.Lineage {
		r := &h.Lineage[i]
		if !s.CopyBytes(r.SID[:]) || !s.ReadUint32(&r.Gen) {
			return Header{}, truncated("lineage")
		}
		if i > 0 {
			switch c := compareRefs(h.Lineage[i-1], *r); {
			case c == 0:
				return Header{}, fmt.Errorf("%w: lineage refs %d and %d have the same subject", ErrMalformed, i-1, i)
			case c > 0:
				return Header{}, fmt.Errorf("%w: lineage not sorted at ref %d", ErrMalformed, i)
			}
		}
	}
	if !s.CopyBytes(h.Salt[:]) {
		return Header{}, truncated("salt")
	}
	if !s.CopyBytes(h.Nonce[:]) {
		return Header{}, truncated("nonce")
	}
	return h, nil
}

// Marshal returns the binary form of e: the encoding of e.Header followed by
// e.Ciphertext. For an envelope from Parse or Seal whose Header was not
// changed, the header bytes are exactly those parsed or sealed.
//
// Marshal panics if e.Header is not valid, which can only happen if the
// caller changed it or built the Envelope by hand; Open reports that case
// as ErrInvalid instead.
func (e *Envelope) Marshal() []byte {
	if err := validateHeader(&e.Header); err != nil {
		panic("envelope: Marshal: " + err.Error())
	}
	b := make([]byte, 0, headerSize(&e.Header)+len(e.Ciphertext))
	b = appendHeader(b, &e.Header)
	return append(b, e.Ciphertext...)
}

// ParseText parses the text form of an envelope: Prefix followed by the
// binary form in base64url without padding (RFC 4648, section 5). It is
// strict: padding, whitespace, line breaks, characters of the standard
// alphabet and non-zero trailing bits are all rejected, so e.String()
// returns exactly s for every s that ParseText accepts.
//
// ParseText returns the errors of Parse, plus ErrMalformed for bad text and
// ErrUnsupported for the text form of another version, 0 to 255
// ("shredd:v2:...", whatever follows the prefix).
func ParseText(s string) (*Envelope, error) {
	body, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		if v, ok := otherVersionPrefix(s); ok {
			return nil, fmt.Errorf("envelope: parse text: %w: version %s", ErrUnsupported, v)
		}
		return nil, fmt.Errorf("envelope: parse text: %w: missing %q prefix", ErrMalformed, Prefix)
	}
	if len(body) > textEncoding.EncodedLen(maxEnvelopeSize) {
		return nil, fmt.Errorf("envelope: parse text: %w: %w: %d characters", ErrMalformed, ErrTooLarge, len(s))
	}
	// The decoder skips '\r' and '\n'; the text form has exactly one
	// spelling, so check the alphabet first.
	for i := 0; i < len(body); i++ {
		if !isBase64URL(body[i]) {
			return nil, fmt.Errorf("envelope: parse text: %w: byte %#02x at offset %d is not unpadded base64url", ErrMalformed, body[i], len(Prefix)+i)
		}
	}
	b, err := textEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("envelope: parse text: %w: %v", ErrMalformed, err)
	}
	return Parse(b)
}

// String returns the text form of e: Prefix followed by e.Marshal() in
// base64url without padding. Like Marshal, it panics if e.Header is invalid.
func (e *Envelope) String() string {
	return Text(e.Marshal())
}

// Text returns the text form of the binary envelope b: Prefix followed by
// b in base64url without padding. It does not parse b. The string is the
// one allocation: the encrypt path answers one per request, and
// concatenating Prefix to EncodeToString's result would copy it twice more.
func Text(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(Prefix) + textEncoding.EncodedLen(len(b)))
	sb.WriteString(Prefix)
	// Whole groups of 3 bytes encode to whole groups of 4 characters, so
	// the chunks' encodings joined are the encoding of b.
	var chunk [1024]byte
	const in = len(chunk) / 4 * 3
	for len(b) > 0 {
		n := min(len(b), in)
		m := textEncoding.EncodedLen(n)
		textEncoding.Encode(chunk[:m], b[:n])
		sb.Write(chunk[:m])
		b = b[n:]
	}
	return sb.String()
}

// otherVersionPrefix reports whether s starts with the text prefix of a
// version other than 1: "shredd:v<n>:" with n a version the binary form's
// version byte can carry (0 to 255), in decimal without leading zeros, and
// returns n. Such a text is a format this parser does not know
// (ErrUnsupported), as the binary form with that version byte is; a prefix
// whose n is not such a number (v01, v256, v1x) names no version at all
// (ErrMalformed).
func otherVersionPrefix(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, "shredd:v")
	if !ok {
		return "", false
	}
	v, _, ok := strings.Cut(rest, ":")
	if !ok || v == "1" || len(v) > 1 && v[0] == '0' {
		return "", false
	}
	// ParseUint takes no sign and no underscores in base 10, and bitSize 8
	// bounds n to the version byte.
	if _, err := strconv.ParseUint(v, 10, 8); err != nil {
		return "", false
	}
	return v, true
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// headerSize returns the encoded size of h.
func headerSize(h *Header) int {
	return fixedHeaderSize + len(h.Kind) + len(h.Lineage)*refSize
}

// appendHeader appends the binary encoding of the valid header h to b.
func appendHeader(b []byte, h *Header) []byte {
	b = append(b, magic...)
	b = append(b, Version1, AlgAES256GCM)
	b = append(b, h.Artifact[:]...)
	b = append(b, byte(len(h.Kind)))
	b = append(b, h.Kind...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Lineage)))
	for _, r := range h.Lineage {
		b = append(b, r.SID[:]...)
		b = binary.BigEndian.AppendUint32(b, r.Gen)
	}
	b = append(b, h.Salt[:]...)
	return append(b, h.Nonce[:]...)
}

// validateHeader checks that h has a valid kind and a canonical lineage. It
// returns an error wrapping ErrInvalid or ErrLineageTooLarge.
func validateHeader(h *Header) error {
	if p := kindProblem(h.Kind); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, p)
	}
	switch {
	case len(h.Lineage) == 0:
		return fmt.Errorf("%w: empty lineage", ErrInvalid)
	case len(h.Lineage) > MaxLineage:
		return fmt.Errorf("%w: %d refs, at most %d", ErrLineageTooLarge, len(h.Lineage), MaxLineage)
	}
	for i := 1; i < len(h.Lineage); i++ {
		if compareRefs(h.Lineage[i-1], h.Lineage[i]) >= 0 {
			return fmt.Errorf("%w: lineage not canonical at ref %d (sorted by SID, no SID twice; make headers with NewHeader)", ErrInvalid, i)
		}
	}
	return nil
}

// kindProblem describes what is wrong with kind, or returns "" if it is a
// valid kind: 1 to MaxKindLen bytes of [a-z0-9._-], starting with [a-z0-9].
// The description gives offsets, never the kind itself.
func kindProblem(kind string) string {
	if kind == "" {
		return "empty kind"
	}
	if len(kind) > MaxKindLen {
		return fmt.Sprintf("kind is %d bytes, at most %d", len(kind), MaxKindLen)
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Sprintf("kind has byte %#02x at offset %d, want [a-z0-9._-] starting with [a-z0-9]", c, i)
		}
	}
	return ""
}
