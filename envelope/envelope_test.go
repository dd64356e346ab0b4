package envelope_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkeys"
)

// seal seals plaintext for test subjects idx (generation 1) with
// deterministic randomness, and returns the envelope and its keys.
func seal(t testing.TB, kind string, idx []int, plaintext, context []byte) (*envelope.Envelope, []envelope.SubjectKey) {
	t.Helper()
	refs := make([]envelope.Ref, len(idx))
	keys := make([]envelope.SubjectKey, len(idx))
	for i, j := range idx {
		refs[i] = testkeys.Ref(j)
		keys[i] = testkeys.Key(j)
	}
	h, err := envelope.NewHeader(testkeys.Rand(t.Name()+kind+fmt.Sprint(idx)), testkeys.Artifact(len(idx)), kind, refs)
	if err != nil {
		t.Fatalf("NewHeader: %v", err)
	}
	e, err := envelope.Seal(h, keys, plaintext, context)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return e, keys
}

func seq(from, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = from + i
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		kind      string
		subjects  []int
		plaintext []byte
		context   []byte
	}{
		{"single", "episodic", []int{0}, []byte("hello"), nil},
		{"single with context", "episodic", []int{0}, []byte("hello"), []byte("tenant=acme")},
		{"empty plaintext", "kv-cache", []int{1}, nil, nil},
		{"empty plaintext with context", "kv-cache", []int{1}, []byte{}, []byte("c")},
		{"three subjects", "summary", []int{2, 3, 4}, []byte("aggregate"), []byte("x")},
		{"max kind", strings.Repeat("k", envelope.MaxKindLen), []int{5}, []byte("k"), nil},
		{"max context", "episodic", []int{6}, []byte("m"), bytes.Repeat([]byte{7}, envelope.MaxContext)},
		{"large plaintext", "embedding", []int{7}, bytes.Repeat([]byte("0123456789abcdef"), 4097), nil},
		{"max lineage", "embedding-index", seq(100, envelope.MaxLineage), []byte("index"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, keys := seal(t, tt.kind, tt.subjects, tt.plaintext, tt.context)
			if len(e.Ciphertext) != len(tt.plaintext)+envelope.TagSize {
				t.Errorf("ciphertext is %d bytes, want %d", len(e.Ciphertext), len(tt.plaintext)+envelope.TagSize)
			}
			check := func(how string, e *envelope.Envelope) {
				t.Helper()
				pt, err := envelope.Open(e, keys, tt.context)
				if err != nil {
					t.Fatalf("%s: Open: %v", how, err)
				}
				if !bytes.Equal(pt, tt.plaintext) {
					t.Fatalf("%s: Open: got %q, want %q", how, pt, tt.plaintext)
				}
			}
			check("sealed", e)

			b := e.Marshal()
			p, err := envelope.Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !bytes.Equal(p.Marshal(), b) {
				t.Error("Parse(b).Marshal() != b")
			}
			check("parsed", p)

			s := e.String()
			if !strings.HasPrefix(s, envelope.Prefix) {
				t.Errorf("String: missing prefix: %.20s", s)
			}
			q, err := envelope.ParseText(s)
			if err != nil {
				t.Fatalf("ParseText: %v", err)
			}
			if q.String() != s {
				t.Error("ParseText(s).String() != s")
			}
			check("parsed text", q)

			if got := e.Header.Subjects(); len(got) != len(tt.subjects) {
				t.Errorf("Subjects: %d, want %d", len(got), len(tt.subjects))
			}
		})
	}
}

func TestNilAndEmptyContextAreEqual(t *testing.T) {
	e, keys := seal(t, "episodic", []int{0}, []byte("x"), nil)
	if _, err := envelope.Open(e, keys, []byte{}); err != nil {
		t.Errorf("Open with empty context of an envelope sealed with nil: %v", err)
	}
}

// permutations returns every ordering of s.
func permutations[T any](s []T) [][]T {
	if len(s) <= 1 {
		return [][]T{slices.Clone(s)}
	}
	var out [][]T
	for i := range s {
		rest := slices.Concat(s[:i:i], s[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]T{s[i]}, p...))
		}
	}
	return out
}

func TestLineageOrderIndependence(t *testing.T) {
	refs := testkeys.Lineage(4)
	keys := testkeys.Keys(4)
	kperms := permutations(keys)
	var first *envelope.Envelope
	for i, perm := range permutations(refs) {
		h, err := envelope.NewHeader(testkeys.Rand("order"), testkeys.Artifact(0), "summary", perm)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(h.Lineage, func(a, b envelope.Ref) int { return bytes.Compare(a.SID[:], b.SID[:]) }) {
			t.Fatalf("permutation %d: header lineage not sorted", i)
		}
		e, err := envelope.Seal(h, kperms[i], []byte("same"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = e
		} else if !bytes.Equal(e.Marshal(), first.Marshal()) {
			t.Fatalf("permutation %d: a different envelope for the same lineage", i)
		}
	}
	for i, kp := range kperms {
		if _, err := envelope.Open(first, kp, nil); err != nil {
			t.Errorf("Open with key permutation %d: %v", i, err)
		}
	}
}

func TestANDSemantics(t *testing.T) {
	e, keys := seal(t, "summary", []int{0, 1, 2}, []byte("needs all three"), nil)
	for i := range keys {
		others := slices.Concat(keys[:i:i], keys[i+1:])
		tests := []struct {
			name string
			keys []envelope.SubjectKey
			want error
		}{
			{"dropped", others, envelope.ErrInvalid},
			{"substituted bytes", append(slices.Clone(others), envelope.SubjectKey{Ref: keys[i].Ref, Key: testkeys.SubjectKey(99)}), envelope.ErrOpen},
			{"one bit off", append(slices.Clone(others), envelope.SubjectKey{Ref: keys[i].Ref, Key: flipped(keys[i].Key, 31, 0x01)}), envelope.ErrOpen},
			{"other generation", append(slices.Clone(others), envelope.SubjectKey{Ref: envelope.Ref{SID: keys[i].Ref.SID, Gen: 2}, Key: keys[i].Key}), envelope.ErrInvalid},
			{"other subject", append(slices.Clone(others), testkeys.Key(99)), envelope.ErrInvalid},
			{"duplicate of another", append(slices.Clone(others), others[0]), envelope.ErrInvalid},
			{"short key", append(slices.Clone(others), envelope.SubjectKey{Ref: keys[i].Ref, Key: keys[i].Key[:31]}), envelope.ErrInvalid},
			{"long key", append(slices.Clone(others), envelope.SubjectKey{Ref: keys[i].Ref, Key: append(slices.Clone(keys[i].Key), 0)}), envelope.ErrInvalid},
			{"extra key", append(slices.Clone(keys), testkeys.Key(99)), envelope.ErrInvalid},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("key%d/%s", i, tt.name), func(t *testing.T) {
				pt, err := envelope.Open(e, tt.keys, nil)
				if !errors.Is(err, tt.want) || pt != nil {
					t.Fatalf("Open: got %q, %v; want %v", pt, err, tt.want)
				}
			})
		}
	}
	t.Run("no keys", func(t *testing.T) {
		if _, err := envelope.Open(e, nil, nil); !errors.Is(err, envelope.ErrInvalid) {
			t.Fatalf("Open: %v, want ErrInvalid", err)
		}
	})
}

func flipped(b []byte, i int, mask byte) []byte {
	b = slices.Clone(b)
	b[i] ^= mask
	return b
}

// TestOpenErrorSaysNothing checks that a wrong key and a wrong context give
// the very same error.
func TestOpenErrorSaysNothing(t *testing.T) {
	e, keys := seal(t, "episodic", []int{0}, []byte("x"), []byte("ctx"))
	_, errKey := envelope.Open(e, []envelope.SubjectKey{{Ref: keys[0].Ref, Key: testkeys.SubjectKey(1)}}, []byte("ctx"))
	_, errCtx := envelope.Open(e, keys, []byte("cty"))
	tampered := *e
	tampered.Ciphertext = flipped(e.Ciphertext, 0, 1)
	_, errBytes := envelope.Open(&tampered, keys, []byte("ctx"))
	for _, err := range []error{errKey, errCtx, errBytes} {
		if !errors.Is(err, envelope.ErrOpen) || err.Error() != errKey.Error() {
			t.Errorf("got %v, want the same ErrOpen error for every cause", err)
		}
	}
}

// openTampered opens b, supplying for each ref of the parsed lineage the
// key at the same position of keys (sorted like the original lineage), so
// that a header change that keeps the envelope parseable still reaches the
// AEAD. It reports whether b parsed and opened.
func openTampered(b []byte, keys []envelope.SubjectKey, context []byte) (parsed, opened bool, err error) {
	e, err := envelope.Parse(b)
	if err != nil {
		return false, false, err
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, func(a, b envelope.SubjectKey) int { return bytes.Compare(a.Ref.SID[:], b.Ref.SID[:]) })
	if len(e.Header.Lineage) == len(sorted) {
		for i, r := range e.Header.Lineage {
			sorted[i].Ref = r
		}
	}
	if _, err := envelope.Open(e, keys, context); err == nil {
		return true, true, nil
	}
	_, err = envelope.Open(e, sorted, context)
	return true, err == nil, err
}

// TestEverySingleByteChange changes every byte of a small sealed envelope
// (xor 0x01 and xor 0xff): each change must make Parse or Open fail.
func TestEverySingleByteChange(t *testing.T) {
	for _, subjects := range [][]int{{0}, {1, 2}} {
		e, keys := seal(t, "kv", subjects, []byte("tiny"), []byte("ctx"))
		b := e.Marshal()
		t.Run(fmt.Sprintf("%d subjects, %d bytes", len(subjects), len(b)), func(t *testing.T) {
			if _, opened, err := openTampered(b, keys, []byte("ctx")); !opened {
				t.Fatalf("unchanged envelope does not open: %v", err)
			}
			for i := range b {
				for _, mask := range []byte{0x01, 0xff} {
					parsed, opened, err := openTampered(flipped(b, i, mask), keys, []byte("ctx"))
					if opened {
						t.Errorf("byte %d xor %#02x: opened", i, mask)
					}
					if parsed && !errors.Is(err, envelope.ErrOpen) && !errors.Is(err, envelope.ErrInvalid) {
						t.Errorf("byte %d xor %#02x: Open error %v", i, mask, err)
					}
				}
			}
			for n := range len(b) {
				if _, opened, _ := openTampered(b[:n], keys, []byte("ctx")); opened {
					t.Errorf("truncated to %d bytes: opened", n)
				}
			}
			for _, extra := range [][]byte{{0}, {0xff}, b[len(b)-16:]} {
				if _, opened, _ := openTampered(slices.Concat(b, extra), keys, []byte("ctx")); opened {
					t.Errorf("extended by %x: opened", extra)
				}
			}
		})
	}
}

// TestEveryTextChange replaces every character of a small envelope's text
// form by every other character of the alphabet and a few outside it: each
// change must make ParseText or Open fail. This checks that the text form
// is strict (no second spelling through unused trailing bits).
func TestEveryTextChange(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, pt := range []string{"", "a", "ab"} { // three lengths mod 3
		e, keys := seal(t, "kv", []int{0}, []byte(pt), nil)
		s := e.String()
		t.Run(fmt.Sprintf("len %d", len(e.Marshal())), func(t *testing.T) {
			for i := range len(s) {
				for _, c := range []byte(alphabet + "+/= \n\r.") {
					if c == s[i] {
						continue
					}
					m := s[:i] + string(c) + s[i+1:]
					p, err := envelope.ParseText(m)
					if err != nil {
						continue
					}
					if _, err := envelope.Open(p, keys, nil); err == nil {
						t.Errorf("text with offset %d changed to %q opened", i, c)
					}
				}
			}
		})
	}
}

func TestTextStrict(t *testing.T) {
	e, _ := seal(t, "kv", []int{0}, []byte("ab"), nil) // an unpadded length
	s := e.String()
	body := s[len(envelope.Prefix):]
	if _, err := envelope.ParseText(s); err != nil {
		t.Fatalf("ParseText of String: %v", err)
	}
	tests := []struct {
		name string
		text string
		want error
	}{
		{"trailing newline", s + "\n", envelope.ErrMalformed},
		{"trailing CRLF", s + "\r\n", envelope.ErrMalformed},
		{"inner newline", s[:20] + "\n" + s[20:], envelope.ErrMalformed},
		{"leading space", " " + s, envelope.ErrMalformed},
		{"trailing space", s + " ", envelope.ErrMalformed},
		{"padding", s + "=", envelope.ErrMalformed},
		{"no prefix", body, envelope.ErrMalformed},
		{"upper-case prefix", "SHREDD:V1:" + body, envelope.ErrMalformed},
		{"prefix without colon", "shredd:v1" + body, envelope.ErrMalformed},
		{"v01 prefix", "shredd:v01:" + body, envelope.ErrMalformed},
		{"empty", "", envelope.ErrMalformed},
		{"prefix only", envelope.Prefix, envelope.ErrMalformed},
		{"v2 prefix", "shredd:v2:" + body, envelope.ErrUnsupported},
		{"v10 prefix", "shredd:v10:" + body, envelope.ErrUnsupported},
		{"one char short", s[:len(s)-1], envelope.ErrMalformed},
		{"impossible length", s + strings.Repeat("A", (5-len(body)%4)%4), envelope.ErrMalformed},
		{"std alphabet", envelope.Prefix + strings.NewReplacer("-", "+", "_", "/").Replace(body) + "+", envelope.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := envelope.ParseText(tt.text); !errors.Is(err, tt.want) {
				t.Fatalf("ParseText: got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestTextVersionPrefix: a text prefix "shredd:v<n>:" with n another
// version the version byte can carry (0 to 255, canonical decimal) is
// unsupported, whatever follows it; one whose n is not such a number is
// malformed (docs/envelope.md, section 1).
func TestTextVersionPrefix(t *testing.T) {
	e, _ := seal(t, "kv", []int{0}, []byte("ab"), nil)
	body := e.String()[len(envelope.Prefix):]
	tests := []struct {
		prefix string
		want   error
	}{
		{"shredd:v0:", envelope.ErrUnsupported},
		{"shredd:v2:", envelope.ErrUnsupported},
		{"shredd:v9:", envelope.ErrUnsupported},
		{"shredd:v10:", envelope.ErrUnsupported},
		{"shredd:v255:", envelope.ErrUnsupported},
		{"shredd:v256:", envelope.ErrMalformed},
		{"shredd:v1000:", envelope.ErrMalformed},
		{"shredd:v4294967297:", envelope.ErrMalformed},
		{"shredd:v" + strings.Repeat("9", 100) + ":", envelope.ErrMalformed},
		{"shredd:v00:", envelope.ErrMalformed},
		{"shredd:v01:", envelope.ErrMalformed},
		{"shredd:v02:", envelope.ErrMalformed},
		{"shredd:v:", envelope.ErrMalformed},
		{"shredd:v+2:", envelope.ErrMalformed},
		{"shredd:v-1:", envelope.ErrMalformed},
		{"shredd:v2_0:", envelope.ErrMalformed},
		{"shredd:v 2:", envelope.ErrMalformed},
		{"shredd:v2a:", envelope.ErrMalformed},
		{"shredd:v0x2:", envelope.ErrMalformed},
		{"shredd:v2", envelope.ErrMalformed},
		{"shredd:V2:", envelope.ErrMalformed},
		{"Shredd:v2:", envelope.ErrMalformed},
		{"shredd:2:", envelope.ErrMalformed},
		{"shredd:v١:", envelope.ErrMalformed}, // a non-ASCII digit
	}
	for _, tt := range tests {
		for _, rest := range []string{body, "", "not base64 at all!"} {
			t.Run(tt.prefix+rest, func(t *testing.T) {
				_, err := envelope.ParseText(tt.prefix + rest)
				if !errors.Is(err, tt.want) {
					t.Fatalf("ParseText: got %v, want %v", err, tt.want)
				}
				if tt.want == envelope.ErrUnsupported && errors.Is(err, envelope.ErrMalformed) {
					t.Fatalf("ParseText: %v is both unsupported and malformed", err)
				}
			})
		}
	}
}

func TestKinds(t *testing.T) {
	tests := []struct {
		kind string
		ok   bool
	}{
		{"episodic", true},
		{"kv-cache", true},
		{"a", true},
		{"0", true},
		{"summary.v2_weekly-x", true},
		{strings.Repeat("z", envelope.MaxKindLen), true},
		{"", false},
		{strings.Repeat("z", envelope.MaxKindLen+1), false},
		{"Episodic", false},
		{".hidden", false},
		{"-dash", false},
		{"_under", false},
		{"kv cache", false},
		{"kv/cache", false},
		{"kv:cache", false},
		{"caf\u00e9", false},
		{"kv\x00", false},
		{"tab\t", false},
	}
	refs := testkeys.Lineage(1)
	keys := testkeys.Keys(1)
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.kind), func(t *testing.T) {
			h, err := envelope.NewHeader(testkeys.Rand("kinds"), testkeys.Artifact(0), tt.kind, refs)
			if !tt.ok {
				if !errors.Is(err, envelope.ErrInvalid) {
					t.Fatalf("NewHeader: got %v, want ErrInvalid", err)
				}
				// Seal refuses a hand-made header with the bad kind too.
				h, err := envelope.NewHeader(testkeys.Rand("kinds"), testkeys.Artifact(0), "ok", refs)
				if err != nil {
					t.Fatal(err)
				}
				h.Kind = tt.kind
				if _, err := envelope.Seal(h, keys, nil, nil); !errors.Is(err, envelope.ErrInvalid) {
					t.Fatalf("Seal: got %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewHeader: %v", err)
			}
			e, err := envelope.Seal(h, keys, []byte("k"), nil)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			p, err := envelope.ParseText(e.String())
			if err != nil || p.Header.Kind != tt.kind {
				t.Fatalf("ParseText: %v, kind %q", err, p.Header.Kind)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	refs := testkeys.Lineage(1)
	keys := testkeys.Keys(1)
	header := func(t *testing.T) envelope.Header {
		h, err := envelope.NewHeader(testkeys.Rand(t.Name()), testkeys.Artifact(0), "episodic", refs)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	t.Run("plaintext", func(t *testing.T) {
		big := make([]byte, envelope.MaxPlaintext+1)
		if _, err := envelope.Seal(header(t), keys, big, nil); !errors.Is(err, envelope.ErrTooLarge) {
			t.Errorf("Seal of MaxPlaintext+1: got %v, want ErrTooLarge", err)
		}
		if testing.Short() {
			t.Skip("skipping the 64 MiB seal in short mode")
		}
		e, err := envelope.Seal(header(t), keys, big[:envelope.MaxPlaintext], nil)
		if err != nil {
			t.Fatalf("Seal of MaxPlaintext: %v", err)
		}
		b := e.Marshal()
		p, err := envelope.Parse(b)
		if err != nil {
			t.Fatalf("Parse of MaxPlaintext: %v", err)
		}
		if pt, err := envelope.Open(p, keys, nil); err != nil || len(pt) != envelope.MaxPlaintext {
			t.Fatalf("Open of MaxPlaintext: %d bytes, %v", len(pt), err)
		}
		over := append(b, 0)
		if _, err := envelope.Parse(over); !errors.Is(err, envelope.ErrTooLarge) || !errors.Is(err, envelope.ErrMalformed) {
			t.Errorf("Parse of a ciphertext over the limit: got %v, want ErrTooLarge and ErrMalformed", err)
		}
		hand := &envelope.Envelope{Header: e.Header, Ciphertext: over[len(b)-len(e.Ciphertext):]}
		if _, err := envelope.Open(hand, keys, nil); !errors.Is(err, envelope.ErrTooLarge) {
			t.Errorf("Open of a ciphertext over the limit: got %v, want ErrTooLarge", err)
		}
	})

	t.Run("context", func(t *testing.T) {
		ctx := make([]byte, envelope.MaxContext+1)
		if _, err := envelope.Seal(header(t), keys, nil, ctx); !errors.Is(err, envelope.ErrTooLarge) {
			t.Errorf("Seal: got %v, want ErrTooLarge", err)
		}
		e, err := envelope.Seal(header(t), keys, nil, ctx[:envelope.MaxContext])
		if err != nil {
			t.Fatalf("Seal of MaxContext: %v", err)
		}
		if _, err := envelope.Open(e, keys, ctx); !errors.Is(err, envelope.ErrTooLarge) {
			t.Errorf("Open: got %v, want ErrTooLarge", err)
		}
		if _, err := envelope.Open(e, keys, ctx[:envelope.MaxContext]); err != nil {
			t.Errorf("Open with MaxContext: %v", err)
		}
	})

	t.Run("lineage", func(t *testing.T) {
		over := testkeys.Lineage(envelope.MaxLineage + 1)
		if _, err := envelope.NewHeader(nil, testkeys.Artifact(0), "embedding", over); !errors.Is(err, envelope.ErrLineageTooLarge) {
			t.Errorf("NewHeader: got %v, want ErrLineageTooLarge", err)
		}
		h, err := envelope.NewHeader(nil, testkeys.Artifact(0), "embedding", over[:envelope.MaxLineage])
		if err != nil {
			t.Fatalf("NewHeader of MaxLineage: %v", err)
		}
		// A hand-made header one ref over the limit, still canonical.
		extra := envelope.Ref{SID: envelope.SID(bytes.Repeat([]byte{0xff}, envelope.SIDSize))}
		h.Lineage = append(h.Lineage, extra)
		hkeys := append(testkeys.Keys(envelope.MaxLineage), envelope.SubjectKey{Ref: extra, Key: make([]byte, envelope.KeySize)})
		if _, err := envelope.Seal(h, hkeys, nil, nil); !errors.Is(err, envelope.ErrLineageTooLarge) {
			t.Errorf("Seal: got %v, want ErrLineageTooLarge", err)
		}
		if _, err := envelope.Open(&envelope.Envelope{Header: h, Ciphertext: make([]byte, 16)}, hkeys, nil); !errors.Is(err, envelope.ErrLineageTooLarge) {
			t.Errorf("Open: got %v, want ErrLineageTooLarge", err)
		}
	})

	t.Run("text", func(t *testing.T) {
		huge := envelope.Prefix + strings.Repeat("A", 4*(envelope.MaxPlaintext/3+20000))
		if _, err := envelope.ParseText(huge); !errors.Is(err, envelope.ErrTooLarge) {
			t.Errorf("ParseText: got %v, want ErrTooLarge", err)
		}
	})
}

func TestNewHeader(t *testing.T) {
	refs := testkeys.Lineage(3)
	t.Run("copies and sorts", func(t *testing.T) {
		in := slices.Clone(refs)
		h, err := envelope.NewHeader(testkeys.Rand("nh"), testkeys.Artifact(1), "summary", in)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(h.Lineage)
		in[0].Gen = 77
		slices.Reverse(in)
		if !slices.Equal(h.Lineage, want) {
			t.Error("header shares the caller's lineage slice")
		}
		if h.Artifact != testkeys.Artifact(1) || h.Kind != "summary" {
			t.Errorf("header %+v", h)
		}
		subjects := h.Subjects()
		for i, r := range h.Lineage {
			if subjects[i] != r.SID {
				t.Errorf("Subjects()[%d] != Lineage[%d].SID", i, i)
			}
		}
	})
	t.Run("fresh randomness", func(t *testing.T) {
		a, err := envelope.NewHeader(nil, testkeys.Artifact(1), "summary", refs)
		if err != nil {
			t.Fatal(err)
		}
		b, err := envelope.NewHeader(nil, testkeys.Artifact(1), "summary", refs)
		if err != nil {
			t.Fatal(err)
		}
		if a.Salt == b.Salt || a.Nonce == b.Nonce || a.Salt == [envelope.SaltSize]byte{} {
			t.Error("crypto/rand headers repeat salt or nonce")
		}
	})
	tests := []struct {
		name    string
		lineage []envelope.Ref
		rand    io.Reader
		want    error
	}{
		{"nil lineage", nil, nil, envelope.ErrInvalid},
		{"empty lineage", []envelope.Ref{}, nil, envelope.ErrInvalid},
		{"duplicate ref", []envelope.Ref{refs[0], refs[1], refs[0]}, nil, envelope.ErrInvalid},
		{"duplicate SID, other generation", []envelope.Ref{refs[0], {SID: refs[0].SID, Gen: 2}}, nil, envelope.ErrInvalid},
		{"short randomness", refs, bytes.NewReader(make([]byte, envelope.SaltSize+envelope.NonceSize-1)), io.ErrUnexpectedEOF},
		{"no randomness", refs, bytes.NewReader(nil), io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := envelope.NewHeader(tt.rand, testkeys.Artifact(1), "summary", tt.lineage)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if h.Lineage != nil || h.Kind != "" {
				t.Errorf("header not zero on error: %+v", h)
			}
		})
	}
}

func TestSealInvalid(t *testing.T) {
	refs := testkeys.Lineage(2)
	keys := testkeys.Keys(2)
	good, err := envelope.NewHeader(testkeys.Rand("seal"), testkeys.Artifact(0), "summary", refs)
	if err != nil {
		t.Fatal(err)
	}
	zeroSalt := good
	zeroSalt.Salt = [envelope.SaltSize]byte{}
	unsorted := good
	unsorted.Lineage = []envelope.Ref{good.Lineage[1], good.Lineage[0]}
	dup := good
	dup.Lineage = []envelope.Ref{good.Lineage[0], good.Lineage[0]}
	empty := good
	empty.Lineage = nil
	tests := []struct {
		name string
		h    envelope.Header
		keys []envelope.SubjectKey
		want error
	}{
		{"zero salt", zeroSalt, keys, envelope.ErrInvalid},
		{"unsorted lineage", unsorted, keys, envelope.ErrInvalid},
		{"duplicate lineage", dup, keys, envelope.ErrInvalid},
		{"empty lineage", empty, nil, envelope.ErrInvalid},
		{"zero header", envelope.Header{}, nil, envelope.ErrInvalid},
		{"missing key", good, keys[:1], envelope.ErrInvalid},
		{"wrong generation", good, []envelope.SubjectKey{keys[0], {Ref: envelope.Ref{SID: keys[1].Ref.SID, Gen: 9}, Key: keys[1].Key}}, envelope.ErrInvalid},
		{"short key", good, []envelope.SubjectKey{keys[0], {Ref: keys[1].Ref, Key: keys[1].Key[:16]}}, envelope.ErrInvalid},
		{"nil key", good, []envelope.SubjectKey{keys[0], {Ref: keys[1].Ref}}, envelope.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if e, err := envelope.Seal(tt.h, tt.keys, []byte("x"), nil); !errors.Is(err, tt.want) || e != nil {
				t.Fatalf("Seal: got %v, %v; want %v", e, err, tt.want)
			}
		})
	}
}

// TestInputsUntouched checks that Seal and Open neither modify the caller's
// keys, plaintext and context (the package clears its own copies) nor keep
// references to the header's lineage.
func TestInputsUntouched(t *testing.T) {
	keys := testkeys.Keys(3)
	orig := make([][]byte, len(keys))
	for i, k := range keys {
		orig[i] = slices.Clone(k.Key)
	}
	h, err := envelope.NewHeader(testkeys.Rand("untouched"), testkeys.Artifact(0), "summary", testkeys.Lineage(3))
	if err != nil {
		t.Fatal(err)
	}
	pt, ctx := []byte("plaintext"), []byte("context")
	e, err := envelope.Seal(h, keys, pt, ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.Lineage[0].Gen = 42 // must not reach the envelope
	if e.Header.Lineage[0].Gen != 1 {
		t.Error("envelope shares the header's lineage slice")
	}
	if _, err := envelope.Open(e, keys, ctx); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if !bytes.Equal(k.Key, orig[i]) {
			t.Errorf("key %d modified", i)
		}
	}
	if string(pt) != "plaintext" || string(ctx) != "context" {
		t.Error("plaintext or context modified")
	}
}

func TestParseDoesNotRetain(t *testing.T) {
	e, keys := seal(t, "kv", []int{0}, []byte("x"), nil)
	b := e.Marshal()
	p, err := envelope.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if _, err := envelope.Open(p, keys, nil); err != nil {
		t.Fatalf("Open after clearing the parsed buffer: %v", err)
	}
}

func TestOpenHeaderChanged(t *testing.T) {
	e, keys := seal(t, "episodic", []int{0}, []byte("x"), nil)
	p, err := envelope.Parse(e.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []*envelope.Envelope{e, p} {
		env.Header.Kind = "summary"
		if _, err := envelope.Open(env, keys, nil); !errors.Is(err, envelope.ErrInvalid) {
			t.Errorf("Open after changing the header: got %v, want ErrInvalid", err)
		}
		env.Header.Kind = "episodic"
		if _, err := envelope.Open(env, keys, nil); err != nil {
			t.Errorf("Open after restoring the header: %v", err)
		}
	}
	hand := &envelope.Envelope{Header: e.Header, Ciphertext: e.Ciphertext}
	if _, err := envelope.Open(hand, keys, nil); err != nil {
		t.Errorf("Open of a hand-built envelope: %v", err)
	}
	if !bytes.Equal(hand.Marshal(), e.Marshal()) {
		t.Error("hand-built envelope marshals differently")
	}
	hand.Ciphertext = hand.Ciphertext[:envelope.TagSize-1]
	if _, err := envelope.Open(hand, keys, nil); !errors.Is(err, envelope.ErrMalformed) {
		t.Errorf("Open of a short ciphertext: got %v, want ErrMalformed", err)
	}
	if _, err := envelope.Open(nil, keys, nil); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("Open(nil): got %v, want ErrInvalid", err)
	}
	if _, err := envelope.Open(&envelope.Envelope{}, keys, nil); !errors.Is(err, envelope.ErrInvalid) {
		t.Errorf("Open(&Envelope{}): got %v, want ErrInvalid", err)
	}
}

func TestMarshalInvalidHeaderPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Marshal of an invalid header did not panic")
		}
	}()
	(&envelope.Envelope{}).Marshal()
}

func TestParseErrors(t *testing.T) {
	e, _ := seal(t, "kv", []int{0}, []byte("x"), nil)
	b := e.Marshal()
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, envelope.ErrMalformed},
		{"magic only", b[:4], envelope.ErrMalformed},
		{"bad magic", flipped(b, 0, 0x20), envelope.ErrMalformed},
		{"version 2", flipped(b, 4, 3), envelope.ErrUnsupported},
		{"version 2 truncated", append(slices.Clone(b[:4]), 2), envelope.ErrUnsupported},
		{"alg 2", flipped(b, 5, 3), envelope.ErrUnsupported},
		{"kind length 0", flipped(b, 22, 2), envelope.ErrMalformed},
		{"kind length 255", flipped(b, 22, 0xfd), envelope.ErrMalformed},
		{"lineage count 0", flipped(b, 26, 1), envelope.ErrMalformed},
		{"lineage count 2, truncated", flipped(b, 26, 3), envelope.ErrMalformed},
		{"lineage count 1025", append(append(slices.Clone(b[:25]), 0x04, 0x01), make([]byte, 1025*36+44+16)...), envelope.ErrLineageTooLarge},
		{"tag only 15 bytes", b[:len(b)-2], envelope.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := envelope.Parse(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("Parse: got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestConcurrentOpen(t *testing.T) {
	e, keys := seal(t, "summary", []int{0, 1}, []byte("shared"), nil)
	p, err := envelope.Parse(e.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for range 50 {
				if _, err = envelope.Open(p, keys, nil); err != nil {
					break
				}
				_ = p.String()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestAppendSeal checks that AppendSeal appends exactly Seal's binary form,
// keeps what dst held, and that the result parses and opens.
func TestAppendSeal(t *testing.T) {
	keys, refs := testkeys.Keys(3), testkeys.Lineage(3)
	h, err := envelope.NewHeader(testkeys.Rand("append-seal"), testkeys.Artifact(1), "summary", refs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := envelope.Seal(h, keys, []byte("payload"), []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("prefix")
	out, err := envelope.AppendSeal(append([]byte(nil), prefix...), h, keys, []byte("payload"), []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, append(prefix, e.Marshal()...)) {
		t.Fatal("AppendSeal output differs from prefix + Seal().Marshal()")
	}
	p, err := envelope.Parse(out[len(prefix):])
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := envelope.Open(p, keys, []byte("ctx")); err != nil || string(pt) != "payload" {
		t.Fatalf("open: %q, %v", pt, err)
	}
	if _, err := envelope.AppendSeal(nil, h, keys[:2], nil, nil); !errors.Is(err, envelope.ErrInvalid) {
		t.Fatalf("missing key: %v, want ErrInvalid", err)
	}
}
