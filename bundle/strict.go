package bundle

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shredd/shredd/internal/jsonesc"
)

// This file is the strict reader of the evidence spec (docs/transparency.md,
// "Reading an export strictly"): gzip, tar, JSON and key files are read
// byte by byte here, before any library sees them, because compress/gzip
// reads further gzip members, archive/tar accepts PAX, GNU and base-256
// headers and signed checksums, and encoding/json keeps the last of
// duplicate keys. ui/static/verify.js and clients/python/shredd/verify.py
// implement the same rules in the same order, so that every reader gives
// the same reason code for the same bytes.

// MaxSafeInteger is the largest integer every reader (JavaScript included)
// holds exactly: 2^53-1. Any larger integer in evidence is refused.
const MaxSafeInteger = 1<<53 - 1

// Gunzip reads a gzip file of exactly one member (RFC 1952): header with
// no flag but FNAME, a deflate stream, CRC-32 and ISIZE checked, nothing
// after the trailer. It returns the data or an *Error with a gzip.* code.
func Gunzip(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return nil, formatError(ReasonGzipHeader, "not a gzip file")
	}
	if len(b) < 10 {
		return nil, formatError(ReasonGzipTruncated, "gzip header cut")
	}
	if b[2] != 8 || b[3]&^0x08 != 0 {
		return nil, formatError(ReasonGzipHeader, "gzip method or flags other than deflate and FNAME")
	}
	off := 10
	if b[3]&0x08 != 0 {
		i := bytes.IndexByte(b[off:], 0)
		if i < 0 {
			return nil, formatError(ReasonGzipTruncated, "gzip file name cut")
		}
		off += i + 1
	}
	// flate reads an io.ByteReader byte by byte, never past the end of the
	// deflate stream, so the reader's position is where the trailer starts.
	br := bytes.NewReader(b[off:])
	zr := flate.NewReader(br)
	data, err := io.ReadAll(io.LimitReader(zr, MaxTotalSize+1))
	if err != nil {
		return nil, formatError(ReasonGzipDeflate, "bad or cut deflate data")
	}
	if len(data) > MaxTotalSize {
		return nil, formatError(ReasonGzipTooLarge, "over %d bytes uncompressed", MaxTotalSize)
	}
	rest := b[len(b)-br.Len():]
	if len(rest) < 8 {
		return nil, formatError(ReasonGzipTruncated, "gzip trailer cut")
	}
	if binary.LittleEndian.Uint32(rest) != crc32.ChecksumIEEE(data) {
		return nil, formatError(ReasonGzipCRC, "gzip CRC-32 does not match")
	}
	if binary.LittleEndian.Uint32(rest[4:]) != uint32(len(data)) {
		return nil, formatError(ReasonGzipSize, "gzip ISIZE does not match")
	}
	if rest = rest[8:]; len(rest) > 0 {
		if len(rest) >= 2 && rest[0] == 0x1f && rest[1] == 0x8b {
			return nil, formatError(ReasonGzipMulti, "a second gzip member")
		}
		return nil, formatError(ReasonGzipTrailing, "data after the gzip member")
	}
	return data, nil
}

// Member is one member of a tar archive read by Untar.
type Member struct {
	Name  string
	Dir   bool
	Mtime int64
	Data  []byte
}

// Untar reads a POSIX ustar archive strictly: regular files and
// directories only, no PAX or GNU header, octal numeric fields, unsigned
// checksum, no NUL inside a name, no absolute path or "..", no name twice,
// two zero blocks at the end followed by zero bytes only. Sizes above
// MaxFileSize, and more than MaxFiles members, are refused.
func Untar(t []byte) ([]Member, error) {
	var out []Member
	seen := map[string]bool{}
	off := 0
	for {
		if off == len(t) {
			return nil, formatError(ReasonTarEnd, "no end-of-archive blocks")
		}
		if off+512 > len(t) {
			return nil, formatError(ReasonTarTruncated, "tar header cut")
		}
		h := t[off : off+512]
		if allZero(h) {
			if err := tarEnd(t[off:]); err != nil {
				return nil, err
			}
			return out, nil
		}
		typ, nums, err := tarHeader(h)
		if err != nil {
			return nil, err
		}
		size := nums[3]
		name, err := tarName(h)
		if err != nil {
			return nil, err
		}
		if typ == '5' && size != 0 {
			return nil, formatError(ReasonTarHeader, "a directory with data")
		}
		if size > MaxFileSize {
			return nil, formatError(ReasonFileSize, "a file over %d bytes", MaxFileSize)
		}
		end := off + 512 + int(size)
		if end+(512-int(size)%512)%512 > len(t) {
			return nil, formatError(ReasonTarTruncated, "tar data cut")
		}
		if typ != '5' && strings.HasSuffix(name, "/") {
			return nil, formatError(ReasonTarPath, "a file path ending in /")
		}
		// A directory's path may end in "/" or not: both spellings name
		// one path (§10a.3).
		if key := strings.TrimSuffix(name, "/"); seen[key] {
			return nil, formatError(ReasonTarDuplicate, "a path twice")
		} else {
			seen[key] = true
		}
		if len(out) == MaxFiles {
			return nil, formatError(ReasonFileSize, "more than %d members", MaxFiles)
		}
		out = append(out, Member{Name: name, Dir: typ == '5', Mtime: nums[4], Data: t[off+512 : end]})
		off = end + (512-int(size)%512)%512
	}
}

// tarEnd checks the end of an archive, t from its first zero block: a
// second zero block, then zero bytes only.
func tarEnd(t []byte) error {
	if 1024 > len(t) || !allZero(t[512:1024]) {
		return formatError(ReasonTarEnd, "one end-of-archive block, not two")
	}
	if !allZero(t[1024:]) {
		return formatError(ReasonTarTrailing, "data after the end-of-archive blocks")
	}
	return nil
}

// tarHeader checks a member's header h: its checksum, the ustar magic, a
// regular file or directory, octal numeric fields. It returns the type
// flag and the numeric fields: mode, uid, gid, size and mtime.
func tarHeader(h []byte) (typ byte, nums [5]int64, err error) {
	sum, ok := octalField(h[148:156])
	if !ok || sum != headerSum(h) {
		return 0, nums, formatError(ReasonTarChecksum, "tar header checksum")
	}
	switch {
	case string(h[257:263]) == "ustar\x00" && string(h[263:265]) == "00":
	case string(h[257:265]) == "ustar  \x00":
		return 0, nums, formatError(ReasonTarGNU, "a GNU tar header")
	default:
		return 0, nums, formatError(ReasonTarMagic, "not a POSIX ustar header")
	}
	typ = h[156]
	switch typ {
	case '0', 0, '5':
	case 'x', 'g':
		return 0, nums, formatError(ReasonTarPAX, "a PAX extended header")
	case 'L', 'K', 'S', 'D', 'M', 'N', 'V':
		return 0, nums, formatError(ReasonTarGNU, "a GNU extension header")
	default:
		return 0, nums, formatError(ReasonTarType, "a member that is not a regular file or directory")
	}
	for i, f := range [5][2]int{{100, 8}, {108, 8}, {116, 8}, {124, 12}, {136, 12}} {
		field := h[f[0] : f[0]+f[1]]
		if field[0]&0x80 != 0 {
			return 0, nums, formatError(ReasonTarBase256, "a base-256 numeric field")
		}
		n, ok := octalField(field)
		if !ok {
			return 0, nums, formatError(ReasonTarHeader, "a malformed numeric field")
		}
		nums[i] = n
	}
	return typ, nums, nil
}

// tarName returns the name of the member of header h, its prefix joined:
// no link name, no NUL inside, a valid path.
func tarName(h []byte) (string, error) {
	if !allZero(h[157:257]) {
		return "", formatError(ReasonTarHeader, "a link name on a file")
	}
	name, ok1 := cField(h[0:100])
	prefix, ok2 := cField(h[345:500])
	if !ok1 || !ok2 {
		return "", formatError(ReasonTarPath, "a NUL inside a name")
	}
	if prefix != "" {
		name = prefix + "/" + name
	}
	if !validPath(name) {
		return "", formatError(ReasonTarPath, "an empty, absolute, non-UTF-8 or .. path")
	}
	return name, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// headerSum is the unsigned sum of the header's bytes, the checksum field
// counted as spaces.
func headerSum(h []byte) int64 {
	var s int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		s += int64(c)
	}
	return s
}

// octalField reads a numeric field: one or more octal digits, then one or
// more NULs or spaces to the end of the field.
func octalField(f []byte) (int64, bool) {
	i := 0
	for i < len(f) && f[i] >= '0' && f[i] <= '7' {
		i++
	}
	if i == 0 || i == len(f) {
		return 0, false
	}
	for _, c := range f[i:] {
		if c != 0 && c != ' ' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(f[:i]), 8, 64)
	return n, err == nil
}

// cField reads a NUL-terminated name field: after the first NUL, only NULs.
func cField(f []byte) (string, bool) {
	i := bytes.IndexByte(f, 0)
	if i < 0 {
		return string(f), true
	}
	return string(f[:i]), allZero(f[i:])
}

// validPath is the spec's one spelling of a member's path (§10a.3): not
// empty, UTF-8, not absolute, no empty, "." or ".." segment; one final
// "/" is allowed (Untar allows it on a directory only).
func validPath(p string) bool {
	if p == "" || p[0] == '/' || !utf8.ValidString(p) {
		return false
	}
	for _, c := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// CheckJSON checks the JSON rules of the spec on one document, before any
// decoder reads it: UTF-8 without a BOM, RFC 8259 grammar, no lone
// surrogate escape, no duplicate key in any object, every number an
// integer within ±(2^53-1) (no fraction, no exponent), nothing after the
// value but whitespace. It returns nil or an *Error with a json.* code.
func CheckJSON(b []byte) error {
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		return formatError(ReasonJSONBOM, "a UTF-8 BOM before JSON")
	}
	if !utf8.Valid(b) {
		return formatError(ReasonJSONUTF8, "JSON is not UTF-8")
	}
	s := &jsonScan{b: b}
	s.ws()
	if err := s.value(0); err != nil {
		return err
	}
	s.ws()
	if s.i != len(b) {
		return formatError(ReasonJSONTrailing, "data after the JSON value")
	}
	return nil
}

// maxJSONDepth bounds nesting; evidence nests 5 deep.
const maxJSONDepth = 64

type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) syntax() error {
	return formatError(ReasonJSONSyntax, "JSON syntax error at byte %d", s.i)
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *jsonScan) lit(w string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		return s.syntax()
	}
	s.i += len(w)
	return nil
}

func (s *jsonScan) value(depth int) error {
	if s.i >= len(s.b) {
		return s.syntax()
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.syntax()
}

// at reports whether the next byte is c.
func (s *jsonScan) at(c byte) bool {
	return s.i < len(s.b) && s.b[s.i] == c
}

// object scans an object, at its '{', refusing duplicate keys.
func (s *jsonScan) object(depth int) error {
	if depth >= maxJSONDepth {
		return s.syntax()
	}
	s.i++
	s.ws()
	if s.at('}') {
		s.i++
		return nil
	}
	keys := map[string]bool{}
	for {
		if !s.at('"') {
			return s.syntax()
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		if keys[k] {
			return formatError(ReasonJSONDuplicate, "a duplicate JSON key")
		}
		keys[k] = true
		s.ws()
		if !s.at(':') {
			return s.syntax()
		}
		s.i++
		s.ws()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if more, err := s.next('}'); !more {
			return err
		}
	}
}

// array scans an array, at its '['.
func (s *jsonScan) array(depth int) error {
	if depth >= maxJSONDepth {
		return s.syntax()
	}
	s.i++
	s.ws()
	if s.at(']') {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if more, err := s.next(']'); !more {
			return err
		}
	}
}

// next scans what follows a member or element: a ',' (more follow), or
// the closing byte (none follow, and a nil error), or else a syntax error.
func (s *jsonScan) next(closing byte) (more bool, err error) {
	s.ws()
	if s.at(',') {
		s.i++
		s.ws()
		return true, nil
	}
	if s.at(closing) {
		s.i++
		return false, nil
	}
	return false, s.syntax()
}

func (s *jsonScan) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *jsonScan) number() error {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	ds := s.i
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.syntax()
	}
	intPart := string(s.b[ds:s.i])
	frac := false
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.syntax()
		}
		frac = true
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.syntax()
		}
		frac = true
	}
	if frac {
		return formatError(ReasonJSONNumber, "a number that is not an integer at byte %d", start)
	}
	if len(intPart) > 16 {
		return formatError(ReasonJSONNumber, "an integer beyond 2^53-1 at byte %d", start)
	}
	if n, _ := strconv.ParseInt(intPart, 10, 64); n > MaxSafeInteger {
		return formatError(ReasonJSONNumber, "an integer beyond 2^53-1 at byte %d", start)
	}
	return nil
}

// str reads a string at s.i (its opening quote) and returns its value.
func (s *jsonScan) str() (string, error) {
	s.i++
	var out []byte
	for {
		if s.i >= len(s.b) {
			return "", s.syntax()
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), nil
		case c < 0x20:
			return "", s.syntax()
		case c == '\\':
			r, n, err := jsonesc.Escape(s.b, s.i)
			if errors.Is(err, jsonesc.ErrSurrogate) {
				return "", formatError(ReasonJSONUTF8, "a lone surrogate escape")
			}
			if err != nil {
				return "", s.syntax()
			}
			out = utf8.AppendRune(out, r)
			s.i += n
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			out = utf8.AppendRune(out, r)
			s.i += n
		}
	}
}

// checkText checks the rule of every text file (keys, checkpoints,
// proofs): UTF-8 without a BOM.
func checkText(b []byte) error {
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		return formatError(ReasonTextBOM, "a UTF-8 BOM")
	}
	if !utf8.Valid(b) {
		return formatError(ReasonTextUTF8, "not UTF-8")
	}
	return nil
}

const (
	pemBegin = "-----BEGIN PUBLIC KEY-----\n"
	pemEnd   = "-----END PUBLIC KEY-----\n"
)

// spkiEd25519 is the DER prefix of an Ed25519 SubjectPublicKeyInfo.
var spkiEd25519 = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}

// CheckPublicKeyFile checks the one form of an attestation key file
// (attest.MarshalPublicKey): "-----BEGIN PUBLIC KEY-----", the 44-byte
// Ed25519 SubjectPublicKeyInfo in base64 in lines of 64, "-----END PUBLIC
// KEY-----", each line ending in LF, nothing before or after. It returns
// the raw key.
func CheckPublicKeyFile(b []byte) ([]byte, error) {
	if err := checkText(b); err != nil {
		return nil, err
	}
	s := string(b)
	if !strings.HasPrefix(s, pemBegin) {
		if strings.Index(s, "-----BEGIN PUBLIC KEY-----") > 0 {
			return nil, formatError(ReasonKeyLeading, "data before the PEM block")
		}
		return nil, formatError(ReasonKeyFormat, "not a PEM PUBLIC KEY")
	}
	body, rest, ok := strings.Cut(s[len(pemBegin):], "-----END PUBLIC KEY-----")
	if !ok || !strings.HasSuffix(body, "\n") {
		return nil, formatError(ReasonKeyFormat, "no PEM end line")
	}
	if rest != "\n" {
		if rest == "" {
			return nil, formatError(ReasonKeyFormat, "no newline after the PEM end line")
		}
		return nil, formatError(ReasonKeyTrailing, "data after the PEM block")
	}
	der, err := base64.StdEncoding.Strict().DecodeString(strings.ReplaceAll(body, "\n", ""))
	if err != nil || len(der) != 44 || !bytes.Equal(der[:12], spkiEd25519) || wrap64(base64.StdEncoding.EncodeToString(der)) != body {
		return nil, formatError(ReasonKeyFormat, "not an Ed25519 public key in canonical PEM")
	}
	return der[12:], nil
}

func wrap64(s string) string {
	var b strings.Builder
	for len(s) > 64 {
		b.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	return b.String() + s + "\n"
}

// CheckLogKeyFile checks the form of a log verifier key file (§10a.1):
// UTF-8 without BOM, one line "<name>+<key hash>+<base64 key>" of a
// signed-note Ed25519 key whose hash is its own, optionally followed by
// one LF, and nothing else: no space, CR or other byte around it. It
// returns the line.
func CheckLogKeyFile(b []byte) (string, error) {
	if err := checkText(b); err != nil {
		return "", err
	}
	s, ok := oneLine(b)
	if _, ok2 := parseKeyLine(s, noteAlgEd25519); !ok || !ok2 {
		return "", formatError(ReasonLogKey, "not one signed-note Ed25519 verifier key line")
	}
	return s, nil
}
