// Command vectorgen writes the known-answer test vectors of the envelope
// format, version 1 (docs/envelope.md, "Test vectors"):
//
//	go run ./testkit/vectorgen -out envelope/testdata/vectors
//
// Vectors are append-only: once released, a vector never changes and is
// never removed. vectorgen writes the vectors that do not exist yet, leaves
// identical ones alone, and fails without writing anything if an existing
// file differs from what it would write, or if the directory holds a vector
// it no longer generates. To change the format, add new vectors (under a new
// version); never edit a generator case.
//
// Every vector is deterministic: keys, subject ids and artifact ids come
// from package testkeys, salts and nonces from testkeys.Rand seeded with the
// vector's name.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkeys"
)

func main() {
	out := flag.String("out", "envelope/testdata/vectors", "directory of the vector files")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: vectorgen [-out dir]")
		os.Exit(2)
	}
	if err := run(*out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vectorgen:", err)
		os.Exit(1)
	}
}

// run writes the vectors into dir, append-only: see the package doc.
func run(dir string, log io.Writer) error {
	files, err := generate()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	want := make(map[string][]byte, len(files))
	for _, f := range files {
		want[f.name] = f.data
	}
	var errs []error
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			errs = append(errs, fmt.Errorf("%s: not generated any more; released vectors are never removed: restore its generator case", filepath.Join(dir, e.Name())))
		}
	}
	var todo []file
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			todo = append(todo, f)
		case err != nil:
			errs = append(errs, err)
		case !bytes.Equal(old, f.data):
			errs = append(errs, fmt.Errorf("%s: refusing to overwrite a released vector with different content; vectors are append-only: add a new vector instead", path))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, f := range todo {
		if err := writeNew(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "vectorgen: %d vectors in %s, %d new\n", len(files), dir, len(todo))
	return nil
}

// writeNew creates path with data, failing if it exists.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// file is one rendered vector file.
type file struct {
	name string
	data []byte
}

// Expected outcomes, the values of the "expect:" line.
const (
	success      = "success"
	openFailure  = "open failure"
	parseFailure = "parse failure"
	unsupported  = "unsupported"
)

// vector is one test vector before rendering.
type vector struct {
	name   string
	expect string
	kind   string
	// lineage lists the refs whose keys are given, in the order a caller
	// would list them (not necessarily canonical); keys[i] is the key of
	// lineage[i], and keys may be shorter than lineage.
	lineage []envelope.Ref
	keys    [][]byte
	context []byte
	// artifactKey is the data key of a client-sealed vector: the envelope
	// is SealWithKey of its header bytes, this key, plaintext and context.
	artifactKey []byte
	plaintext   []byte // written for success only
	comments    []string
	text        string
}

// render returns the vector file: header lines, a blank line, the text form
// and a final newline.
func (v *vector) render() []byte {
	var b bytes.Buffer
	line := func(k, val string) {
		b.WriteString(k)
		b.WriteByte(':')
		if val != "" {
			b.WriteByte(' ')
			b.WriteString(val)
		}
		b.WriteByte('\n')
	}
	line("expect", v.expect)
	if v.kind != "" {
		line("kind", v.kind)
	}
	for _, r := range v.lineage {
		line("lineage", hex.EncodeToString(r.SID[:])+":"+strconv.FormatUint(uint64(r.Gen), 10))
	}
	for _, k := range v.keys {
		line("keys", hex.EncodeToString(k))
	}
	if len(v.context) > 0 {
		line("context", hex.EncodeToString(v.context))
	}
	if len(v.artifactKey) > 0 {
		line("artifact_key", hex.EncodeToString(v.artifactKey))
	}
	if v.expect == success {
		line("plaintext", hex.EncodeToString(v.plaintext))
	}
	for _, c := range v.comments {
		line("comment", c)
	}
	b.WriteByte('\n')
	b.WriteString(v.text)
	b.WriteByte('\n')
	return b.Bytes()
}

// generate returns every vector file, in a fixed order.
func generate() (files []file, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("generating vectors: %v", r)
		}
	}()
	vs := vectors()
	seen := make(map[string]bool)
	for i := range vs {
		v := &vs[i]
		if seen[v.name] {
			panic("duplicate vector name " + v.name)
		}
		seen[v.name] = true
		files = append(files, file{name: v.name, data: v.render()})
	}
	return files, nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func check(ok bool, msg string) {
	if !ok {
		panic(msg)
	}
}

// sealed seals plaintext for a lineage, with salt, nonce and artifact id
// from testkeys.Rand(seed). keys[i] is the key of lineage[i].
func sealed(seed, kind string, lineage []envelope.Ref, keys [][]byte, plaintext, context []byte) *envelope.Envelope {
	h, sk := vectorHeader(seed, kind, lineage, keys)
	return must(envelope.Seal(h, sk, plaintext, context))
}

// vectorHeader makes the header of a vector (its artifact id, salt and nonce
// from the vector's seed) and pairs keys with lineage.
func vectorHeader(seed, kind string, lineage []envelope.Ref, keys [][]byte) (envelope.Header, []envelope.SubjectKey) {
	r := testkeys.Rand("envelope/v1/vectors/" + seed)
	var artifact envelope.ArtifactID
	must(io.ReadFull(r, artifact[:]))
	h := must(envelope.NewHeader(r, artifact, kind, lineage))
	sk := make([]envelope.SubjectKey, len(lineage))
	for i := range lineage {
		sk[i] = envelope.SubjectKey{Ref: lineage[i], Key: keys[i]}
	}
	return h, sk
}

// dataKeySealed makes the data key of a vector (NewDataKey) and seals with
// it (SealWithKey), and checks that the envelope is the one Seal gives.
func dataKeySealed(seed, kind string, lineage []envelope.Ref, keys [][]byte, plaintext, context []byte) (envelope.DataKey, string) {
	h, sk := vectorHeader(seed, kind, lineage, keys)
	dk := must(envelope.NewDataKey(h, sk))
	b := must(envelope.SealWithKey(nil, dk, plaintext, context))
	if want := must(envelope.Seal(h, sk, plaintext, context)).Marshal(); !bytes.Equal(b, want) {
		panic("client-sealed envelope " + seed + " differs from Seal's")
	}
	return dk, envelope.Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// keysOf returns the test keys of test subjects idx.
func keysOf(idx ...int) [][]byte {
	k := make([][]byte, len(idx))
	for i, j := range idx {
		k[i] = testkeys.SubjectKey(j)
	}
	return k
}

// refsOf returns the refs (generation 1) of test subjects idx.
func refsOf(idx ...int) []envelope.Ref {
	r := make([]envelope.Ref, len(idx))
	for i, j := range idx {
		r[i] = testkeys.Ref(j)
	}
	return r
}

// unsorted reorders the refs of test subjects idx so they are not in
// canonical order (descending by SID), and returns their indices.
func unsorted(idx ...int) []int {
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int {
		sa, sb := testkeys.SID(a), testkeys.SID(b)
		return -bytes.Compare(sa[:], sb[:])
	})
	return idx
}

// canonicalIdx sorts the indices of test subjects into canonical order.
func canonicalIdx(idx ...int) []int {
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int {
		sa, sb := testkeys.SID(a), testkeys.SID(b)
		return bytes.Compare(sa[:], sb[:])
	})
	return idx
}

// stream returns n deterministic bytes for seed.
func stream(seed string, n int) []byte {
	b := make([]byte, n)
	must(io.ReadFull(testkeys.Rand("envelope/v1/vectors/data/"+seed), b))
	return b
}

// layout gives the offsets of the fields of a binary envelope.
type layout struct {
	kindLen, kind, count, refs, salt, nonce, ciphertext int
}

func layoutOf(e *envelope.Envelope) layout {
	var l layout
	l.kindLen = 4 + 1 + 1 + envelope.ArtifactIDSize
	l.kind = l.kindLen + 1
	l.count = l.kind + len(e.Header.Kind)
	l.refs = l.count + 2
	l.salt = l.refs + len(e.Header.Lineage)*(envelope.SIDSize+4)
	l.nonce = l.salt + envelope.SaltSize
	l.ciphertext = l.nonce + envelope.NonceSize
	return l
}

// rawEnvelope encodes an envelope field by field, without any validation,
// for vectors that must not parse.
func rawEnvelope(seed string, version, alg byte, kind string, refs []envelope.Ref, ctLen int) []byte {
	r := testkeys.Rand("envelope/v1/vectors/raw/" + seed)
	b := []byte("SHRD")
	b = append(b, version, alg)
	artifact := make([]byte, envelope.ArtifactIDSize)
	must(io.ReadFull(r, artifact))
	b = append(b, artifact...)
	b = append(b, byte(len(kind)))
	b = append(b, kind...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(refs)))
	for _, ref := range refs {
		b = append(b, ref.SID[:]...)
		b = binary.BigEndian.AppendUint32(b, ref.Gen)
	}
	rest := make([]byte, envelope.SaltSize+envelope.NonceSize+ctLen)
	must(io.ReadFull(r, rest))
	return append(b, rest...)
}

func text(b []byte) string {
	return envelope.Prefix + base64.RawURLEncoding.EncodeToString(b)
}

func flip(b []byte, i int, mask byte) []byte {
	b = slices.Clone(b)
	b[i] ^= mask
	return b
}

// vectors returns every vector. Append new cases at the end; never change
// or remove one (see the package doc).
func vectors() []vector {
	var vs []vector
	add := func(v vector) { vs = append(vs, v) }

	// successOf seals a vector that must open.
	successOf := func(name, kind string, lineage []envelope.Ref, keys [][]byte, pt, ctx []byte, comments ...string) *envelope.Envelope {
		e := sealed(name, kind, lineage, keys, pt, ctx)
		add(vector{name: name, expect: success, kind: kind, lineage: lineage, keys: keys,
			context: ctx, plaintext: pt, comments: comments, text: e.String()})
		return e
	}

	// Successes.
	single := successOf("single_subject", "episodic", refsOf(0), keysOf(0),
		[]byte("The user's cat is called Miso."), nil,
		"one subject, no context")
	successOf("single_subject_context", "episodic", refsOf(1), keysOf(1),
		[]byte("Prefers tea over coffee."), []byte("tenant=acme;record=42"),
		"one subject, with a caller context")
	successOf("empty_plaintext", "kv-cache", refsOf(2), keysOf(2), []byte{}, nil,
		"empty plaintext: the ciphertext is the 16-byte tag only")
	agg := unsorted(3, 4, 5)
	successOf("aggregate_3", "summary", refsOf(agg...), keysOf(agg...),
		[]byte("Weekly summary: three users asked about refunds."), []byte("summary:weekly"),
		"three subjects (AND: every key is needed)",
		"lineage and keys are listed in descending SID order, not canonical order:",
		"an implementation must sort them by SID (the header holds them ascending)")
	gens := []envelope.Ref{
		{SID: testkeys.SID(6), Gen: 0},
		{SID: testkeys.SID(7), Gen: 2},
		{SID: testkeys.SID(8), Gen: 0xffffffff},
	}
	successOf("generations", "embedding", gens, keysOf(6, 7, 8),
		[]byte{0x3d, 0xcc, 0xcc, 0xcd, 0xbe, 0x4c, 0xcc, 0xcd},
		nil, "key generations 0, 2 and 2^32-1 (a reinstated subject has a new generation)")
	successOf("kind_max_length", "k"+strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789._-", 2)[:envelope.MaxKindLen-1],
		refsOf(9), keysOf(9), []byte("kind of 64 bytes"), nil,
		"the longest kind, using every allowed character")
	successOf("context_max", "episodic", refsOf(10), keysOf(10), []byte("bound to a 4096-byte context"),
		stream("context_max", envelope.MaxContext),
		"the largest context")
	successOf("plaintext_multiblock", "episodic", refsOf(11), keysOf(11),
		stream("plaintext_multiblock", 1000), []byte("ctx"),
		"1000-byte plaintext: many AES blocks, a partial last block")
	maxIdx := make([]int, envelope.MaxLineage)
	for i := range maxIdx {
		maxIdx[i] = 100 + i
	}
	successOf("lineage_max", "embedding-index", refsOf(maxIdx...), keysOf(maxIdx...),
		[]byte("an index built from 1024 subjects"), nil,
		"the largest lineage, 1024 subjects, listed in subject index order (not canonical)")

	// Client-sealed: the key service hands the writer the header bytes and
	// the artifact key (POST /v1/datakey); the writer seals with them. The
	// envelope is the one Seal makes with the same header and subject keys.
	clientSealed := func(name, kind string, lineage []envelope.Ref, keys [][]byte, pt, ctx []byte, comments ...string) {
		dk, e := dataKeySealed(name, kind, lineage, keys, pt, ctx)
		add(vector{name: name, expect: success, kind: kind, lineage: lineage, keys: keys,
			context: ctx, artifactKey: dk.Key, plaintext: pt, comments: comments, text: e})
	}
	clientSealed("client_sealed_single", "episodic", refsOf(12), keysOf(12),
		[]byte("Sealed by the writer with a data key."), []byte("tenant=acme;record=7"),
		"client-side sealing: artifact_key is K_a of this header (section 3);",
		"AES-256-GCM with it, the header's nonce and the AAD of section 4 gives this envelope")
	cs := unsorted(13, 14, 15)
	clientSealed("client_sealed_aggregate_3", "summary", refsOf(cs...), keysOf(cs...),
		stream("client_sealed_aggregate_3", 300), nil,
		"client-side sealing over three subjects, no context: the data key needs every subject key")

	// Open failures: the envelope parses, opening it must fail.
	openFail := func(name, kind string, lineage []envelope.Ref, keys [][]byte, ctx []byte, text string, comments ...string) {
		add(vector{name: name, expect: openFailure, kind: kind, lineage: lineage, keys: keys,
			context: ctx, comments: comments, text: text})
	}
	// Vectors whose bytes are sealed correctly but must not open with what
	// they list use subjects of their own (50 and up), never those of a
	// success vector: FuzzOpen relies on it.
	e := sealed("wrong_key", "episodic", refsOf(50), keysOf(50), []byte("secret"), nil)
	openFail("wrong_key", "episodic", refsOf(50), keysOf(999), nil, e.String(),
		"the key given for the subject is not the one it was sealed with")

	aggIdx := unsorted(20, 21, 22)
	e = sealed("aggregate_3_wrong_key", "summary", refsOf(aggIdx...), keysOf(aggIdx...), []byte("aggregate"), nil)
	openFail("aggregate_3_wrong_key", "summary", refsOf(aggIdx...), keysOf(aggIdx[0], 998, aggIdx[2]), nil, e.String(),
		"two of three keys are right, the second is wrong: AND semantics")
	e = sealed("aggregate_3_missing_key", "summary", refsOf(aggIdx...), keysOf(aggIdx...), []byte("aggregate"), nil)
	openFail("aggregate_3_missing_key", "summary", refsOf(aggIdx...), keysOf(aggIdx[:2]...), nil, e.String(),
		"the key of the third lineage subject is missing (forgotten): AND semantics",
		"(in the Go implementation this is ErrInvalid: keys must match the lineage exactly)")

	ctx := []byte("tenant=acme")
	e = sealed("wrong_context", "episodic", refsOf(51), keysOf(51), []byte("secret"), ctx)
	openFail("wrong_context", "episodic", refsOf(51), keysOf(51), []byte("tenant=acmf"), e.String(),
		"sealed with context \"tenant=acme\", opened with \"tenant=acmf\"")
	e = sealed("missing_context", "episodic", refsOf(52), keysOf(52), []byte("secret"), ctx)
	openFail("missing_context", "episodic", refsOf(52), keysOf(52), nil, e.String(),
		"sealed with context \"tenant=acme\", opened with an empty context")
	e = sealed("unexpected_context", "episodic", refsOf(53), keysOf(53), []byte("secret"), nil)
	openFail("unexpected_context", "episodic", refsOf(53), keysOf(53), []byte{0}, e.String(),
		"sealed with an empty context, opened with the one-byte context 00")

	// Tampered bytes: each parses, none may open.
	tamper := func(name, comment string, f func(b []byte, l layout) []byte) {
		e := sealed(name, "episodic", refsOf(0), keysOf(0), []byte("tamper with me"), nil)
		b := f(e.Marshal(), layoutOf(e))
		openFail(name, "episodic", refsOf(0), keysOf(0), nil, text(b), comment)
	}
	tamper("tag_flipped", "last byte of the tag xor 0x01", func(b []byte, l layout) []byte {
		return flip(b, len(b)-1, 0x01)
	})
	tamper("ciphertext_flipped", "first ciphertext byte xor 0x80", func(b []byte, l layout) []byte {
		return flip(b, l.ciphertext, 0x80)
	})
	tamper("ciphertext_truncated", "last byte of the tag removed", func(b []byte, l layout) []byte {
		return b[:len(b)-1]
	})
	tamper("ciphertext_extended", "a zero byte appended", func(b []byte, l layout) []byte {
		return append(b, 0)
	})
	tamper("header_artifact_flipped", "first artifact id byte xor 0x01", func(b []byte, l layout) []byte {
		return flip(b, 6, 0x01)
	})
	tamper("header_kind_changed", "kind changed from \"episodic\" to \"episodia\"", func(b []byte, l layout) []byte {
		b = slices.Clone(b)
		b[l.kind+len("episodic")-1] = 'a'
		return b
	})
	tamper("header_generation_changed", "the generation in the header changed from 1 to 2",
		func(b []byte, l layout) []byte {
			return flip(b, l.refs+envelope.SIDSize+3, 0x03)
		})
	tamper("header_sid_flipped", "last SID byte xor 0x01 (the keys no longer match the header)",
		func(b []byte, l layout) []byte {
			return flip(b, l.refs+envelope.SIDSize-1, 0x01)
		})
	tamper("header_salt_flipped", "first salt byte xor 0x01", func(b []byte, l layout) []byte {
		return flip(b, l.salt, 0x01)
	})
	tamper("header_nonce_flipped", "last nonce byte xor 0x01", func(b []byte, l layout) []byte {
		return flip(b, l.ciphertext-1, 0x01)
	})

	// A subject removed from, or added to, the lineage: the keys given are
	// exactly those of the tampered header, yet it must not open.
	two := canonicalIdx(30, 31)
	e = sealed("header_subject_removed", "summary", refsOf(two...), keysOf(two...), []byte("two subjects"), nil)
	b := e.Marshal()
	l := layoutOf(e)
	removed := slices.Concat(b[:l.count], []byte{0, 1}, b[l.refs:l.refs+envelope.SIDSize+4], b[l.salt:])
	openFail("header_subject_removed", "summary", refsOf(two[0]), keysOf(two[0]), nil, text(removed),
		"sealed for two subjects; the second ref was removed from the header and its key is not given")
	e = sealed("header_subject_added", "summary", refsOf(32), keysOf(32), []byte("one subject"), nil)
	b = e.Marshal()
	l = layoutOf(e)
	both := canonicalIdx(32, 33)
	var refs []byte
	for _, i := range both {
		sid := testkeys.SID(i)
		refs = append(refs, sid[:]...)
		refs = binary.BigEndian.AppendUint32(refs, 1)
	}
	added := slices.Concat(b[:l.count], []byte{0, 2}, refs, b[l.salt:])
	openFail("header_subject_added", "summary", refsOf(both...), keysOf(both...), nil, text(added),
		"sealed for one subject; a second ref was added to the header and both keys are given")

	// Parse failures: the text or bytes are not a version 1 envelope.
	parseFail := func(name, text string, comments ...string) {
		add(vector{name: name, expect: parseFailure, comments: comments, text: text})
	}
	// rawFail adds a parse failure encoded field by field, with a 16-byte
	// ciphertext.
	rawFail := func(name, kind string, refs []envelope.Ref, comment string) {
		parseFail(name, text(rawEnvelope(name, 1, 1, kind, refs, 16)), comment)
	}
	sb := single.Marshal()
	sl := layoutOf(single)
	parseFail("bad_magic", text(flip(sb, 3, 'D'^'E')), "magic \"SHRE\" instead of \"SHRD\"")
	parseFail("empty", envelope.Prefix, "the prefix alone: zero bytes")
	parseFail("truncated_magic", text(sb[:3]), "three bytes of magic")
	parseFail("truncated_header", text(sb[:sl.refs+10]), "the header ends inside the lineage")
	parseFail("truncated_nonce", text(sb[:sl.ciphertext-1]), "the header ends one byte before the end of the nonce")
	parseFail("truncated_tag", text(sb[:sl.ciphertext+envelope.TagSize-1]),
		"a 15-byte ciphertext: shorter than the tag")
	rawFail("kind_empty", "", refsOf(0), "kind of length 0")
	rawFail("kind_uppercase", "Episodic", refsOf(0), "kind with an upper-case letter")
	rawFail("kind_leading_dot", ".episodic", refsOf(0), "kind starting with '.'")
	rawFail("kind_leading_dash", "-episodic", refsOf(0), "kind starting with '-'")
	rawFail("kind_space", "kv cache", refsOf(0), "kind with a space")
	rawFail("kind_too_long", strings.Repeat("k", envelope.MaxKindLen+1), refsOf(0),
		"kind of 65 bytes")
	rawFail("lineage_empty", "episodic", nil, "lineage count 0")
	rawFail("lineage_unsorted", "summary", refsOf(unsorted(40, 41)...),
		"two refs in descending SID order")
	d := testkeys.SID(42)
	rawFail("lineage_duplicate_ref", "summary", []envelope.Ref{{SID: d, Gen: 1}, {SID: d, Gen: 1}},
		"the same ref twice")
	rawFail("lineage_duplicate_sid", "summary", []envelope.Ref{{SID: d, Gen: 1}, {SID: d, Gen: 2}},
		"the same SID twice, with generations 1 and 2")
	over := make([]int, envelope.MaxLineage+1)
	for i := range over {
		over[i] = 2000 + i
	}
	rawFail("lineage_over_max", "embedding-index", refsOf(canonicalIdx(over...)...),
		"1025 refs in canonical order: one more than the limit")

	// Text form failures.
	// pad is a small envelope whose length is not a multiple of 3.
	var pad *envelope.Envelope
	for n := 0; pad == nil || len(pad.Marshal())%3 == 0; n++ {
		pad = sealed("text_padding", "episodic", refsOf(54), keysOf(54), []byte(strings.Repeat("p", n)), nil)
	}
	pb := pad.Marshal()
	padded := envelope.Prefix + base64.URLEncoding.EncodeToString(pb)
	check(strings.HasSuffix(padded, "="), "no padding")
	parseFail("text_padding", padded, "base64url with '=' padding")
	tail := []byte(pad.String())
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", tail[len(tail)-1])
	check(last >= 0 && last&1 == 0, "trailing bits")
	tail[len(tail)-1] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1]
	parseFail("text_noncanonical_bits", string(tail),
		"the last character has a non-zero unused low bit (a lax decoder gets the same bytes)")
	st := single.String()
	i := strings.IndexAny(st[len(envelope.Prefix):], "-_")
	check(i >= 0, "no - or _ in text")
	i += len(envelope.Prefix)
	std := st[:i] + map[byte]string{'-': "+", '_': "/"}[st[i]] + st[i+1:]
	parseFail("text_std_alphabet", std, "a character of the standard base64 alphabet ('+' or '/') in place of '-' or '_'")
	parseFail("text_space", st[:len(st)/2]+" "+st[len(st)/2:], "a space in the middle of the base64")
	parseFail("text_no_prefix", st[len(envelope.Prefix):], "base64url without the prefix")
	parseFail("text_prefix_uppercase", "SHREDD:V1:"+st[len(envelope.Prefix):], "the prefix in upper case")
	parseFail("text_standard_base64", envelope.Prefix+base64.StdEncoding.EncodeToString(pb),
		"standard base64 with padding instead of base64url")

	// Unsupported: another version or algorithm.
	unsup := func(name, text string, comments ...string) {
		add(vector{name: name, expect: unsupported, comments: comments, text: text})
	}
	unsup("unsupported_version", text(flip(sb, 4, 0x01^0x02)), "version byte 2")
	unsup("unsupported_version_0", text(flip(sb, 4, 0x01)), "version byte 0")
	unsup("unsupported_alg", text(flip(sb, 5, 0x01^0x02)), "algorithm byte 2")
	unsup("unsupported_alg_0", text(flip(sb, 5, 0x01)), "algorithm byte 0")
	unsup("text_prefix_v2", "shredd:v2:"+st[len(envelope.Prefix):], "the text prefix of version 2")

	// Append new vectors here.
	return vs
}
