package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCheckStrict covers the shapes checkStrict derives from Go types: the
// request structs, maps (keys are data: duplicates refused, never named),
// json.RawMessage and time.Time (their own syntax), embedded structs, and
// bodies it leaves to the decoder (syntax errors: nil).
func TestCheckStrict(t *testing.T) {
	type embedded struct {
		Inner string `json:"inner"`
	}
	type outer struct {
		embedded
		Name  string          `json:"name,omitempty"`
		Plain string          // no tag: the Go name
		Skip  string          `json:"-"`
		Raw   json.RawMessage `json:"raw"`
		When  time.Time       `json:"when"`
		Items []*outer        `json:"items"`
	}
	cases := []struct {
		name, body string
		v          any
		code       string // "" for nil
		detail     string
	}{
		{"valid", `{"inner":"a","name":"b","Plain":"c","raw":{"x":[1,{"y":"z"}]},"when":"2024-01-01T00:00:00Z"}`, &outer{}, "", ""},
		{"embedded field twice", `{"inner":"a","inner":"b"}`, &outer{}, "invalid_json", `"inner" is given twice`},
		{"untagged name in other case", `{"plain":"c"}`, &outer{}, "invalid_json", `write "Plain"`},
		{"skipped field", `{"Skip":"c"}`, &outer{}, "invalid_json", "unknown field"},
		{"nested item", `{"items":[{"name":"a","Name":"b"}]}`, &outer{}, "invalid_json", `write "items.name"`},
		{"raw message: key twice", `{"raw":{"x":1,"x":2}}`, &outer{}, "invalid_json", "same key twice"},
		{"raw message: bad text", `{"raw":["\udc00"]}`, &outer{}, "invalid_utf8", `field "raw"`},
		{"map: key twice, not named", `{"alice":1,"alice":2}`, &map[string]any{}, "invalid_json", "same key twice"},
		{"map: many keys, one twice", `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"n":1,"o":1,"p":1,"q":1,"r":1,"a":1}`, &map[string]any{}, "invalid_json", "twice"},
		{"map: many keys", `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"n":1,"o":1,"p":1,"q":1,"r":1}`, &map[string]any{}, "", ""},
		{"map: keys in other case", `{"a":1,"A":2}`, &map[string]any{}, "", ""},
		{"any: surrogate pair", `["\ud83d\ude00","\uD83D\uDE00"]`, new(any), "", ""},
		{"any: other escapes", `["\"\\\/\b\f\n\r\t\u0000"]`, new(any), "", ""},
		{"syntax: left to the decoder", `{"name":"a" "inner":"b"}`, &outer{}, "", ""},
		{"syntax: unterminated string", `{"name":"a`, &outer{}, "", ""},
		{"syntax: bad escape", `{"name":"\u12"}`, &outer{}, "", ""},
		{"syntax: control byte", "{\"name\":\"\x01\"}", &outer{}, "", ""},
		{"before a syntax error", `{"name":"\ud800" x`, &outer{}, "invalid_utf8", `field "name"`},
		{"depth", strings.Repeat("[", MaxDepth+1), new(any), "invalid_json", "nested deeper"},
		{"depth at the limit", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), new(any), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkStrict([]byte(c.body), c.v)
			if c.code == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var pe *problemError
			if !errors.As(err, &pe) || pe.code != c.code || !strings.Contains(pe.detail, c.detail) {
				t.Fatalf("got %v, want %s with %q", err, c.code, c.detail)
			}
		})
	}
}

// BenchmarkDecodeEncrypt measures what checkStrict adds to the decoding of
// an encrypt request of 1 MiB of plaintext (1.4 MB of base64): "strict" is
// decodeJSON as the handlers call it, "decoder" is encoding/json alone,
// "scan" is checkStrict alone.
func BenchmarkDecodeEncrypt(b *testing.B) {
	pt := base64.StdEncoding.EncodeToString(make([]byte, 1<<20))
	body := []byte(`{"subject":"alice@example.com","kind":"episodic","context":"Y3R4","plaintext":"` + pt + `"}`)
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req encryptRequest
			if err := decodeJSON(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req encryptRequest
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if err := checkStrict(body, &encryptRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
