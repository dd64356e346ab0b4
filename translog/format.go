package translog

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// This file holds the byte formats (checkpoint text, tlog-proof, the
// consistency proof text, tile paths): parsing and marshalling only, no
// signatures and no database. Every parser is strict so that a successful
// parse followed by a marshal gives back the exact input: there is one
// encoding of each value, and a verifier never accepts two spellings of
// the same proof.

// ProofHeader is the first line of a c2sp.org/tlog-proof@v1 proof.
const ProofHeader = "c2sp.org/tlog-proof@v1"

// ConsistencyHeader is the first line of the consistency proof text form
// (see [ConsistencyProof]).
const ConsistencyHeader = "shredd/tlog-consistency@v1"

// TileHeight is the height of the tiles served by [Log.ReadTile]: C2SP
// tlog-tiles fixes it at 8, so a full tile holds 256 hashes or entries.
const TileHeight = 8

// TileWidth is the number of hashes or entries in a full tile.
const TileWidth = 1 << TileHeight

// A Checkpoint is the text of a C2SP tlog-checkpoint note: the log's
// origin, the size of the tree and its RFC 6962 root hash.
type Checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
	// Extension holds the optional extension lines that follow the root
	// hash, verbatim, each ending in a newline; empty for none (shredd
	// writes none). A string rather than a slice keeps Checkpoint
	// comparable with ==.
	Extension string
}

// ParseCheckpoint parses the text of a checkpoint note (without its
// signatures): the origin line, the tree size in decimal without leading
// zeros, the base64 root hash, then optional non-empty extension lines,
// each line ending in a newline. It returns an error wrapping [ErrFormat]
// for anything else.
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return Checkpoint{}, fmt.Errorf("translog: parse checkpoint: %w: no final newline", ErrFormat)
	}
	lines := strings.SplitN(s, "\n", 4)
	if len(lines) < 4 {
		return Checkpoint{}, fmt.Errorf("translog: parse checkpoint: %w: fewer than three lines", ErrFormat)
	}
	var c Checkpoint
	if c.Origin = lines[0]; c.Origin == "" {
		return Checkpoint{}, fmt.Errorf("translog: parse checkpoint: %w: empty origin", ErrFormat)
	}
	size, err := parseDecimal(lines[1])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("translog: parse checkpoint: %w: size: %v", ErrFormat, err)
	}
	c.Size = size
	if c.Hash, err = parseHash(lines[2]); err != nil {
		return Checkpoint{}, fmt.Errorf("translog: parse checkpoint: %w: root hash: %v", ErrFormat, err)
	}
	c.Extension = lines[3]
	if c.Extension != "" {
		for _, line := range strings.Split(strings.TrimSuffix(c.Extension, "\n"), "\n") {
			if line == "" {
				return Checkpoint{}, fmt.Errorf("translog: parse checkpoint: %w: empty extension line", ErrFormat)
			}
		}
	}
	return c, nil
}

// String returns the note text of c, the inverse of [ParseCheckpoint].
func (c Checkpoint) String() string {
	return fmt.Sprintf("%s\n%d\n%s\n%s", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]), c.Extension)
}

// A Proof is a c2sp.org/tlog-proof@v1 inclusion proof: the index of an
// entry, its RFC 6962 §2.1.1 audit path (from the leaf's sibling up to the
// root's child, the order of [tlog.RecordProof]) and the signed checkpoint
// of the tree the path leads to.
type Proof struct {
	// Extra is optional opaque data; it is not authenticated. Empty
	// means no extra line.
	Extra  []byte
	Index  int64
	Hashes []tlog.Hash
	// Checkpoint is the signed checkpoint note, verbatim.
	Checkpoint []byte
}

// ParseProof parses a c2sp.org/tlog-proof@v1 proof. It checks the format
// only, including that the checkpoint's note text parses, not the
// signature nor the inclusion (see [CheckProof]). It returns an error
// wrapping [ErrFormat] when data is not a well-formed proof.
func ParseProof(data []byte) (*Proof, error) {
	rest := data
	next := func() (string, bool) {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return "", false
		}
		line := string(rest[:i])
		rest = rest[i+1:]
		return line, true
	}
	bad := func(format string, args ...any) (*Proof, error) {
		return nil, fmt.Errorf("translog: parse proof: %w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	line, ok := next()
	if !ok || line != ProofHeader {
		return bad("first line is not %q", ProofHeader)
	}
	p := new(Proof)
	if line, ok = next(); !ok {
		return bad("truncated")
	}
	if v, found := strings.CutPrefix(line, "extra "); found {
		extra, err := decodeBase64(v)
		if err != nil || len(extra) == 0 {
			return bad("extra: not non-empty base64")
		}
		p.Extra = extra
		if line, ok = next(); !ok {
			return bad("truncated")
		}
	}
	v, found := strings.CutPrefix(line, "index ")
	if !found {
		return bad("no index line")
	}
	index, err := parseDecimal(v)
	if err != nil {
		return bad("index: %v", err)
	}
	p.Index = index
	for {
		if line, ok = next(); !ok {
			return bad("truncated")
		}
		if line == "" {
			break
		}
		h, err := parseHash(line)
		if err != nil {
			return bad("hash %d: %v", len(p.Hashes), err)
		}
		if len(p.Hashes) == 63 {
			return bad("more than 63 hashes")
		}
		p.Hashes = append(p.Hashes, h)
	}
	text, _, found := bytes.Cut(rest, []byte("\n\n"))
	if !found {
		return bad("checkpoint has no signature block")
	}
	if _, err := ParseCheckpoint(append(text[:len(text):len(text)], '\n')); err != nil {
		return nil, fmt.Errorf("translog: parse proof: %w", err)
	}
	p.Checkpoint = bytes.Clone(rest)
	return p, nil
}

// Marshal returns the c2sp.org/tlog-proof@v1 text of p, the inverse of
// [ParseProof].
func (p *Proof) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(ProofHeader + "\n")
	if len(p.Extra) > 0 {
		b.WriteString("extra " + base64.StdEncoding.EncodeToString(p.Extra) + "\n")
	}
	fmt.Fprintf(&b, "index %d\n", p.Index)
	for _, h := range p.Hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	b.WriteString("\n")
	b.Write(p.Checkpoint)
	return b.Bytes()
}

// A ConsistencyProof is an RFC 6962 §2.1.2 consistency proof between the
// trees of sizes Old and New of one log. There is no C2SP format for it;
// its text form is
//
//	shredd/tlog-consistency@v1
//	old <Old>
//	new <New>
//	<base64 hash>
//	...
//
// with sizes in decimal without leading zeros, one standard (padded)
// base64 hash a line in the order of [tlog.TreeProof], and every line,
// the last included, ending in a newline.
type ConsistencyProof struct {
	Old, New int64
	Hashes   tlog.TreeProof
}

// ParseConsistencyProof parses the text form of a consistency proof. It
// returns an error wrapping [ErrFormat] when data is not well formed or
// when Old > New.
func ParseConsistencyProof(data []byte) (*ConsistencyProof, error) {
	bad := func(format string, args ...any) (*ConsistencyProof, error) {
		return nil, fmt.Errorf("translog: parse consistency proof: %w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	s := string(data)
	if !strings.HasSuffix(s, "\n") {
		return bad("no final newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 || lines[0] != ConsistencyHeader {
		return bad("no %q header with old and new lines", ConsistencyHeader)
	}
	p := new(ConsistencyProof)
	var err error
	v, ok := strings.CutPrefix(lines[1], "old ")
	if !ok {
		return bad("no old line")
	}
	if p.Old, err = parseDecimal(v); err != nil {
		return bad("old: %v", err)
	}
	if v, ok = strings.CutPrefix(lines[2], "new "); !ok {
		return bad("no new line")
	}
	if p.New, err = parseDecimal(v); err != nil {
		return bad("new: %v", err)
	}
	if p.Old > p.New {
		return bad("old size %d above new size %d", p.Old, p.New)
	}
	if len(lines)-3 > 126 {
		return bad("too many hashes")
	}
	for i, line := range lines[3:] {
		h, err := parseHash(line)
		if err != nil {
			return bad("hash %d: %v", i, err)
		}
		p.Hashes = append(p.Hashes, h)
	}
	return p, nil
}

// Marshal returns the text form of p, the inverse of
// [ParseConsistencyProof].
func (p *ConsistencyProof) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nold %d\nnew %d\n", ConsistencyHeader, p.Old, p.New)
	for _, h := range p.Hashes {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
	}
	return b.Bytes()
}

// TilePath returns the C2SP tlog-tiles path of t relative to the log's
// prefix: "tile/<L>/<N>[.p/<W>]" for a hash tile and
// "tile/entries/<N>[.p/<W>]" for an entry bundle (t.L == -1). t.H must be
// [TileHeight]; t.W is the width, [TileWidth] for a full tile.
func TilePath(t tlog.Tile) string {
	level := strconv.Itoa(t.L)
	if t.L == -1 {
		level = "entries"
	}
	p := "tile/" + level + "/" + tileIndexPath(t.N)
	if t.W != TileWidth {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

// tileIndexPath encodes n as zero-padded 3-digit path elements, all but
// the last prefixed with "x": 1234067 is "x001/x234/067".
func tileIndexPath(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// ParseTilePath parses a C2SP tlog-tiles path such as "tile/0/x001/234"
// or "tile/entries/005.p/17" into a tile of height [TileHeight], with L
// set to -1 for entry bundles. Only the canonical spelling that [TilePath]
// produces is accepted; anything else is an error wrapping [ErrFormat].
func ParseTilePath(path string) (tlog.Tile, error) {
	bad := fmt.Errorf("translog: tile path %q: %w", path, ErrFormat)
	rest, ok := strings.CutPrefix(path, "tile/")
	if !ok {
		return tlog.Tile{}, bad
	}
	levelStr, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return tlog.Tile{}, bad
	}
	t := tlog.Tile{H: TileHeight, W: TileWidth}
	if levelStr == "entries" {
		t.L = -1
	} else {
		l, err := parseDecimal(levelStr)
		if err != nil || l > 63 {
			return tlog.Tile{}, bad
		}
		t.L = int(l)
	}
	if nStr, wStr, partial := strings.Cut(rest, ".p/"); partial {
		w, err := parseDecimal(wStr)
		if err != nil || w < 1 || w >= TileWidth {
			return tlog.Tile{}, bad
		}
		t.W = int(w)
		rest = nStr
	}
	elems := strings.Split(rest, "/")
	if len(elems) > 7 { // 7 elements already exceed 2^63
		return tlog.Tile{}, bad
	}
	for i, e := range elems {
		if i < len(elems)-1 {
			if e, ok = strings.CutPrefix(e, "x"); !ok {
				return tlog.Tile{}, bad
			}
		}
		if len(e) != 3 || !digits(e) {
			return tlog.Tile{}, bad
		}
		d, _ := strconv.ParseInt(e, 10, 64)
		if t.N > (1<<63-1-d)/1000 {
			return tlog.Tile{}, bad
		}
		t.N = t.N*1000 + d
	}
	if TilePath(t) != path {
		return tlog.Tile{}, bad
	}
	return t, nil
}

// digits reports whether s is ASCII digits only.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDecimal parses a non-negative decimal int64 with no sign and no
// leading zeros (other than "0" itself).
func parseDecimal(s string) (int64, error) {
	if s == "" || !digits(s) || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal without leading zeros", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

// decodeBase64 decodes standard padded base64, rejecting non-canonical
// encodings (non-zero padding bits, embedded newlines).
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("non-canonical base64")
	}
	return b, nil
}

// parseHash decodes one base64 SHA-256 hash.
func parseHash(s string) (tlog.Hash, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return tlog.Hash{}, err
	}
	if len(b) != tlog.HashSize {
		return tlog.Hash{}, fmt.Errorf("hash of %d bytes, want %d", len(b), tlog.HashSize)
	}
	return tlog.Hash(b), nil
}
