package envelope_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shredd/shredd/envelope"
)

const vectorDir = "testdata/vectors"

// testVector is one parsed vector file (docs/envelope.md, "Test vectors").
type testVector struct {
	name    string
	expect  string
	kind    string
	lineage []envelope.Ref
	keys    [][]byte
	context []byte
	// artifactKey is set for a client-sealed vector: the data key that
	// sealed it with the envelope's header bytes.
	artifactKey []byte
	plaintext   []byte
	text        string
}

// subjectKeys pairs keys[i] with lineage[i], as the format defines.
func (v *testVector) subjectKeys() []envelope.SubjectKey {
	sk := make([]envelope.SubjectKey, len(v.keys))
	for i, k := range v.keys {
		sk[i] = envelope.SubjectKey{Ref: v.lineage[i], Key: k}
	}
	return sk
}

// parseVector parses a vector file strictly: known keys in the documented
// order, a blank line, one line of text form and a final newline.
func parseVector(name string, data []byte) (*testVector, error) {
	v := &testVector{name: name}
	head, body, ok := strings.Cut(string(data), "\n\n")
	if !ok {
		return nil, errors.New("no blank line after the header")
	}
	text, ok := strings.CutSuffix(body, "\n")
	if !ok || strings.Contains(text, "\n") {
		return nil, errors.New("body is not exactly one line")
	}
	v.text = text
	order := []string{"expect", "kind", "lineage", "keys", "context", "artifact_key", "plaintext", "comment"}
	pos := 0
	seen := make(map[string]bool)
	for _, line := range strings.Split(head, "\n") {
		k, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("header line %q has no colon", line)
		}
		if val != "" {
			if val, ok = strings.CutPrefix(val, " "); !ok || val == "" {
				return nil, fmt.Errorf("header line %q: want \"key: value\" or \"key:\"", line)
			}
		}
		i := slices.Index(order, k)
		if i < pos {
			return nil, fmt.Errorf("header key %q unknown or out of order", k)
		}
		if seen[k] && k != "lineage" && k != "keys" && k != "comment" {
			return nil, fmt.Errorf("header key %q repeated", k)
		}
		seen[k] = true
		pos = i
		var err error
		switch k {
		case "expect":
			v.expect = val
		case "kind":
			v.kind = val
		case "lineage":
			sid, gen, ok := strings.Cut(val, ":")
			if !ok {
				return nil, fmt.Errorf("lineage %q: want <sid hex>:<gen>", val)
			}
			var r envelope.Ref
			b, err := hex.DecodeString(sid)
			if err != nil || len(b) != envelope.SIDSize {
				return nil, fmt.Errorf("lineage %q: bad sid", val)
			}
			copy(r.SID[:], b)
			g, err := strconv.ParseUint(gen, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("lineage %q: %v", val, err)
			}
			r.Gen = uint32(g)
			v.lineage = append(v.lineage, r)
		case "keys":
			var b []byte
			if b, err = hex.DecodeString(val); err != nil {
				return nil, fmt.Errorf("keys: %v", err)
			}
			v.keys = append(v.keys, b)
		case "context":
			if v.context, err = hex.DecodeString(val); err != nil {
				return nil, fmt.Errorf("context: %v", err)
			}
		case "artifact_key":
			if v.artifactKey, err = hex.DecodeString(val); err != nil || len(v.artifactKey) != envelope.KeySize {
				return nil, fmt.Errorf("artifact_key: not %d bytes of hex", envelope.KeySize)
			}
		case "plaintext":
			if v.plaintext, err = hex.DecodeString(val); err != nil {
				return nil, fmt.Errorf("plaintext: %v", err)
			}
		}
	}
	hasPlaintext := seen["plaintext"]
	if v.artifactKey != nil && v.expect != "success" {
		return nil, errors.New("artifact_key given for a failure")
	}
	switch v.expect {
	case "success":
		if !hasPlaintext {
			return nil, errors.New("success without plaintext")
		}
	case "open failure", "parse failure", "unsupported":
		if hasPlaintext {
			return nil, errors.New("plaintext given for a failure")
		}
	default:
		return nil, fmt.Errorf("unknown expect %q", v.expect)
	}
	if len(v.keys) > len(v.lineage) {
		return nil, errors.New("more keys than lineage refs")
	}
	return v, nil
}

// loadVectors reads and parses every vector file.
func loadVectors(tb testing.TB) []*testVector {
	tb.Helper()
	entries, err := os.ReadDir(vectorDir)
	if err != nil {
		tb.Fatal(err)
	}
	var vs []*testVector
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(vectorDir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		v, err := parseVector(e.Name(), data)
		if err != nil {
			tb.Fatalf("%s: %v", e.Name(), err)
		}
		vs = append(vs, v)
	}
	return vs
}

// refsMatch reports whether keys hold exactly one key per ref of lineage.
func refsMatch(lineage []envelope.Ref, keys []envelope.SubjectKey) bool {
	if len(lineage) != len(keys) {
		return false
	}
	want := make(map[envelope.Ref]bool)
	for _, r := range lineage {
		want[r] = true
	}
	for _, k := range keys {
		if !want[k.Ref] {
			return false
		}
		delete(want, k.Ref)
	}
	return true
}

func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			e, err := envelope.ParseText(v.text)
			if err != nil {
				t.Logf("ParseText: %v", err)
			}
			switch v.expect {
			case "parse failure":
				if !errors.Is(err, envelope.ErrMalformed) {
					t.Fatalf("ParseText: got %v, want ErrMalformed", err)
				}
				return
			case "unsupported":
				if !errors.Is(err, envelope.ErrUnsupported) {
					t.Fatalf("ParseText: got %v, want ErrUnsupported", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseText: %v", err)
			}
			if got := e.String(); got != v.text {
				t.Errorf("String does not round-trip:\n got %s\nwant %s", got, v.text)
			}
			keys := v.subjectKeys()
			pt, err := envelope.Open(e, keys, v.context)
			switch v.expect {
			case "success":
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if !bytes.Equal(pt, v.plaintext) {
					t.Errorf("Open: got plaintext %x, want %x", pt, v.plaintext)
				}
				if e.Header.Kind != v.kind {
					t.Errorf("kind %q, want %q", e.Header.Kind, v.kind)
				}
				if !refsMatch(e.Header.Lineage, keys) {
					t.Errorf("header lineage does not match the vector's")
				}
				if !slices.IsSortedFunc(e.Header.Lineage, func(a, b envelope.Ref) int {
					return bytes.Compare(a.SID[:], b.SID[:])
				}) {
					t.Errorf("header lineage not in canonical order")
				}
				if v.artifactKey != nil {
					checkClientSealed(t, v, e, keys)
				}
			case "open failure":
				// Keys that cover the header's lineage exactly reach the
				// AEAD and must fail authentication; any other set of keys
				// is a caller error, ErrInvalid.
				want := envelope.ErrInvalid
				if refsMatch(e.Header.Lineage, keys) {
					want = envelope.ErrOpen
				}
				t.Logf("Open: %v", err)
				if !errors.Is(err, want) || pt != nil {
					t.Fatalf("Open: got %x, %v; want error %v", pt, err, want)
				}
			}
		})
	}
}

// checkClientSealed checks a client-sealed vector: the data key derived
// from the parsed header and the subject keys is the vector's, and sealing
// with it (header bytes, key, plaintext, context) gives the vector's bytes.
func checkClientSealed(t *testing.T, v *testVector, e *envelope.Envelope, keys []envelope.SubjectKey) {
	t.Helper()
	dk, err := envelope.NewDataKey(e.Header, keys)
	if err != nil {
		t.Fatalf("NewDataKey: %v", err)
	}
	if !bytes.Equal(dk.Key, v.artifactKey) {
		t.Errorf("NewDataKey: key %x, want %x", dk.Key, v.artifactKey)
	}
	raw := e.Marshal()
	if !bytes.Equal(dk.Header, raw[:len(dk.Header)]) {
		t.Errorf("NewDataKey: header bytes differ from the envelope's")
	}
	b, err := envelope.SealWithKey(nil, envelope.DataKey{Header: raw[:len(dk.Header)], Key: v.artifactKey}, v.plaintext, v.context)
	if err != nil {
		t.Fatalf("SealWithKey: %v", err)
	}
	if !bytes.Equal(b, raw) {
		t.Errorf("SealWithKey does not give the vector's envelope")
	}
}

// TestVectorsCoverage checks that the vectors required by the spec exist and
// that every outcome is represented.
func TestVectorsCoverage(t *testing.T) {
	vs := loadVectors(t)
	byName := make(map[string]*testVector)
	count := make(map[string]int)
	for _, v := range vs {
		byName[v.name] = v
		count[v.expect]++
	}
	required := map[string]string{
		"single_subject":          "success",
		"single_subject_context":  "success",
		"empty_plaintext":         "success",
		"aggregate_3":             "success",
		"lineage_max":             "success",
		"wrong_key":               "open failure",
		"wrong_context":           "open failure",
		"aggregate_3_missing_key": "open failure",
		"aggregate_3_wrong_key":   "open failure",
		"tag_flipped":             "open failure",
		"header_subject_removed":  "open failure",
		"truncated_header":        "parse failure",
		"unsupported_version":     "unsupported",
		"unsupported_alg":         "unsupported",
		"lineage_unsorted":        "parse failure",
		"lineage_duplicate_sid":   "parse failure",
		"text_padding":            "parse failure",
		"client_sealed_single":    "success",
	}
	for name, expect := range required {
		v, ok := byName[name]
		if !ok {
			t.Errorf("vector %s missing", name)
			continue
		}
		if v.expect != expect {
			t.Errorf("vector %s expects %q, want %q", name, v.expect, expect)
		}
	}
	for _, e := range []string{"success", "open failure", "parse failure", "unsupported"} {
		if count[e] == 0 {
			t.Errorf("no %q vector", e)
		}
	}
	if v := byName["aggregate_3"]; v != nil {
		if slices.IsSortedFunc(v.lineage, func(a, b envelope.Ref) int { return bytes.Compare(a.SID[:], b.SID[:]) }) {
			t.Errorf("aggregate_3 lists its lineage in canonical order; it must test out-of-order keys")
		}
	}
	if v := byName["lineage_max"]; v != nil && len(v.lineage) != envelope.MaxLineage {
		t.Errorf("lineage_max has %d refs", len(v.lineage))
	}
}

// TestVectorsDocumented checks that docs/envelope.md lists every vector.
func TestVectorsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/envelope.md")
	if err != nil {
		t.Fatalf("spec not found: %v", err)
	}
	for _, v := range loadVectors(t) {
		if !strings.Contains(string(doc), "`"+v.name+"`") {
			t.Errorf("vector %s is not listed in docs/envelope.md", v.name)
		}
	}
}
