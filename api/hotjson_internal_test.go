package api

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// hotSeeds are bodies beyond FuzzSeeds that reach the corners of the
// hand-written decoder: escapes, surrogates, null, whitespace, lists, and
// near misses of each.
var hotSeeds = []string{
	` { "subject" : "a" , "kind" : "k" , "plaintext" : "" } `,
	"\t{\n\"subject\"\r:\"a\"}\n",
	`{"subject":"\"\\\/\b\f\n\r\t\u0000\u00e9\u20AC"}`,
	`{"subject":"\ud83d\ude00","kind":"\uD83D\uDE00x"}`,
	`{"subject":"\ud83d"}`, `{"subject":"\ude00"}`, `{"subject":"\ud83d\u0041"}`, `{"subject":"\ud83dx"}`,
	`{"subject":"\ud83d\ude0"}`, `{"subject":"\x"}`, `{"subject":"\u12G4"}`,
	"{\"subject\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", "{\"subject\":\"\xc3\"}", "{\"subject\":\"\xed\xa0\x80\"}",
	"{\"subject\":\"\xef\xbf\xbd\"}", "{\"subject\":\"a\x01\"}", "{\"subject\":\"a\x7f\"}",
	`{"subject":null,"subjects":null,"parents":null,"leases":null,"kind":null,"holder":null,"plaintext":null,"context":null}`,
	`{"subjects":[],"parents":[ ],"leases":["a" , "b"]}`, `{"subjects":["a",null]}`, `{"subjects":[null]}`,
	`{"subjects":["a",]}`, `{"subjects":["a"}`, `{"subjects":"a"}`, `{"subject":["a"]}`,
	`{"subject":nul}`, `{"subject":nullx}`, `{"subject":true}`, `{"subject":-1}`, `{"subject":1e3}`,
	`{"subj\u0065ct":"a"}`, `{"Subject":"a"}`, `{"subject":"a","subject":"a"}`, `{"subject":"a","subject":null}`,
	`{"subject":"a",}`, `{"subject":"a"`, `{"subject":"a"}x`, `{"subject":"a"} {}`, `{"subject":"a"}]`, `{,}`, `{"":1}`,
	"\xef\xbb\xbf{}", ``, ` `, `null`, `[]`, `"x"`, `{}`, `{"subject" "a"}`,
	`{"ciphertext":"shredd:v1:AAAA","context":"Y3R4","holder":"h"}`, `{"ciphertext":"x","ciphertext":"y"}`,
	`{"ciphertext":"\ud800\udc00"}`, `{"Ciphertext":"x"}`,
	`{"batch_input":[{}]}`, ` { "batch_input" : [ {"ciphertext":"a"} , {"ciphertext":"b"} ] } `,
	`{"batch_input":[{"subject":"a"},]}`, `{"batch_input":[{"subject":"a"}]`, `{"batch_input":[{"subject":"a"}]}x`,
	`{"batch_input":[{"subject":"a"}],}`, `{"batch_input":[{"subject":"batch_input"}]}`, `{"subject":"\"batch_input\""}`,
	`{"subject":"\"batch_input\"","subject":"a"}`, `{"subject":"\"batch_input\"","Subject":"a"}`,
	`{"batch_input":[{"subject":"a","subject":"b"}]}`, `{"batch_input":[{"subject":"\udc00"}]}`,
	`{"batch_input":[[]]}`, `{"batch_input":"x"}`, `{"batch_input":[{"subjects":[null]}]}`,
	`{"kind":"k","batch_input":[{"kind":"k"}]}`, `{"batch_input":[{"kind":"k"}],"batch_input":[{"kind":"k"}]}`,
	seedBatch(strings.Repeat(`{"ciphertext":"a"},`, MaxBatch-1) + `{"ciphertext":"a"}`),
	seedBatch(strings.Repeat(`{"ciphertext":"a"},`, MaxBatch) + `{"ciphertext":"a"}`),
	`{"subjects":` + strings.Repeat("[", MaxDepth+1) + `}`,
}

// corpus returns the seeds of the differential target: FuzzSeeds with
// their placeholders filled, hotSeeds, and the corpus files of the body
// fuzz targets under testdata/fuzz (the route targets' and this one's own
// are both read here, so that an input found by either is checked by
// both).
func corpus(t testing.TB) [][]byte {
	expand := strings.NewReplacer("{art}", "0123456789abcdef0123456789abcdef", "{ct}", "shredd:v1:AAECAwQFBgcICQ")
	var out [][]byte
	for _, route := range []string{"kind", "encrypt", "decrypt", "artifact", "forget"} {
		for _, s := range FuzzSeeds[route] {
			out = append(out, []byte(expand.Replace(s)))
		}
	}
	for _, s := range hotSeeds {
		out = append(out, []byte(s))
	}
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "Fuzz*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if !strings.HasPrefix(filepath.Base(filepath.Dir(name)), "FuzzDecode") {
			continue // FuzzDecoderDifferential's own: go test reads them
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		body, err := corpusBody(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, body)
	}
	return out
}

// corpusBody parses a corpus file of a fuzz target with one []byte
// argument.
func corpusBody(file []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimSpace(string(file)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, strconv.ErrSyntax
	}
	arg, ok := strings.CutPrefix(lines[1], "[]byte(")
	if !ok || !strings.HasSuffix(arg, ")") {
		return nil, strconv.ErrSyntax
	}
	s, err := strconv.Unquote(strings.TrimSuffix(arg, ")"))
	return []byte(s), err
}

// FuzzDecoderDifferential feeds each body to the hand-written decoder of
// the hot routes and to the reflective one, as each route calls them, and
// fails on any difference: accepted by one and refused by the other, a
// different value, or a different problem (status, code, title, detail).
// The hot decoder reads a copy of the body that is cleared before the
// comparison, so a value that aliases the body (the pooled buffer) shows
// as a difference.
//
//	go test -run '^$' -fuzz FuzzDecoderDifferential -fuzztime 3m -parallel 2 ./api
func FuzzDecoderDifferential(f *testing.F) {
	for _, b := range corpus(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		diffCall[encryptRequest](t, "encrypt", body)
		diffCall[decryptRequest](t, "decrypt", body)
		diffCall[sourceBody](t, "datakey", body)
		diffBody(t, "artifacts", body)
	})
}

// TestDecoderDifferential runs the differential check over the corpus in
// every go test run, and checks that the hot decoder accepts the bodies
// it is for without the reflective path.
func TestDecoderDifferential(t *testing.T) {
	for _, body := range corpus(t) {
		diffCall[encryptRequest](t, "encrypt", body)
		diffCall[decryptRequest](t, "decrypt", body)
		diffCall[sourceBody](t, "datakey", body)
		diffBody(t, "artifacts", body)
	}
	hot := []string{
		FuzzSeeds["encrypt"][0], FuzzSeeds["encrypt"][1], hotSeeds[0], hotSeeds[1], hotSeeds[2], hotSeeds[3],
		"{\"subject\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", "{\"subject\":\"\xef\xbf\xbd\"}",
		`{"subject":null,"subjects":null,"parents":null,"leases":null,"kind":null,"holder":null,"plaintext":null,"context":null}`,
		`{"subjects":[],"parents":[ ],"leases":["a" , "b"]}`, `{}`, `{"batch_input":[{}]}`,
		seedBatch(FuzzSeeds["encrypt"][0], FuzzSeeds["encrypt"][1]), `{"batch_input":[{"subject":"batch_input"}]}`,
	}
	for _, s := range hot {
		var req encryptRequest
		if _, ok := decodeCallHot([]byte(s), &req); !ok {
			t.Errorf("the hot decoder defers %s", s)
		}
	}
}

// diffCall compares decodeCall with decodeCallReflect on body for Req.
func diffCall[Req any](t *testing.T, route string, body []byte) {
	t.Helper()
	copied := bytes.Clone(body)
	var hotSingle, refSingle Req
	hotItems, hotErr := decodeCall(copied, &hotSingle)
	clear(copied)
	refItems, refErr := decodeCallReflect(bytes.Clone(body), &refSingle)
	if !sameErr(hotErr, refErr) {
		t.Fatalf("%s %q: hot %v, reflect %v", route, body, hotErr, refErr)
	}
	if hotErr != nil {
		return
	}
	// The hot path decodes a plaintext's base64 itself (encryptRequest.plain):
	// the same value as the reflective path's text once encoded again,
	// strict base64 having one text per value.
	asText(&hotSingle)
	for _, it := range hotItems {
		asText(it)
	}
	if (hotItems == nil) != (refItems == nil) || !reflect.DeepEqual(hotItems, refItems) || !reflect.DeepEqual(hotSingle, refSingle) {
		t.Fatalf("%s %q:\nhot     %s %s\nreflect %s %s", route, body, show(hotSingle), show(hotItems), show(refSingle), show(refItems))
	}
}

// asText puts the plaintext the hot decoder decoded back into its text,
// as the reflective path leaves it.
func asText(v any) {
	if r, ok := v.(*encryptRequest); ok && r.plain != nil {
		if r.Plaintext != "" {
			panic("a plaintext both decoded and as text")
		}
		r.Plaintext, r.plain = strictBase64.EncodeToString(r.plain), nil
	}
}

// The hot decoder decodes an encrypt's plaintext from the body's bytes
// into a buffer of its own, leaving no copy of the base64 text; a value
// with an escape or not strict base64 stays text, for the handler to
// decode or refuse; and a body it then leaves to the reflective path has
// what it decoded cleared.
func TestHotPlaintext(t *testing.T) {
	for _, tc := range []struct {
		body     string
		plain    string // decoded by the lexer
		text     string // left as text
		accepted bool
	}{
		{`{"kind":"k","plaintext":"dGVh"}`, "tea", "", true},
		{`{"kind":"k","plaintext":""}`, "", "", true},
		{`{"kind":"k","plaintext":"dGV\u0068"}`, "", "dGVh", true},
		{`{"kind":"k","plaintext":"dGVh="}`, "", "dGVh=", true},
		{`{"kind":"k","plaintext":"dGV="}`, "", "dGV=", true}, // non-zero padding bits: not strict
		{`{"kind":"k","plaintext":null}`, "", "", true},
	} {
		var req encryptRequest
		_, ok := decodeCallHot([]byte(tc.body), &req)
		if ok != tc.accepted || string(req.plain) != tc.plain || req.Plaintext != tc.text || (tc.plain != "" && req.plain == nil) {
			t.Errorf("%s: accepted %v, decoded %q, text %q", tc.body, ok, req.plain, req.Plaintext)
		}
	}
	var req encryptRequest
	if _, ok := decodeCallHot([]byte(`{"plaintext":"c2VjcmV0","subject":1}`), &req); ok {
		t.Fatal("the hot decoder accepted a number for a string")
	}
	if len(req.plain) != 6 || !bytes.Equal(req.plain, make([]byte, 6)) {
		t.Fatalf("the plaintext decoded from a body left to the reflective path: %q, want it cleared", req.plain)
	}
	var single encryptRequest
	items, err := decodeCall([]byte(`{"batch_input":[{"kind":"k","plaintext":"dGVh"},{"kind":"k","plaintext":"Y29mZmVl"}]}`), &single)
	if err != nil || len(items) != 2 || string(items[0].plain) != "tea" || string(items[1].plain) != "coffee" {
		t.Fatalf("a batch: %v, %d items", err, len(items))
	}
}

// diffBody compares decodeBody with decodeJSON on body for the register
// request.
func diffBody(t *testing.T, route string, body []byte) {
	t.Helper()
	copied := bytes.Clone(body)
	var hot, ref sourceBody
	hotErr := decodeBody(copied, &hot)
	clear(copied)
	refErr := decodeJSON(bytes.Clone(body), &ref)
	if !sameErr(hotErr, refErr) {
		t.Fatalf("%s %q: hot %v, reflect %v", route, body, hotErr, refErr)
	}
	if hotErr == nil && !reflect.DeepEqual(hot, ref) {
		t.Fatalf("%s %q:\nhot     %s\nreflect %s", route, body, show(hot), show(ref))
	}
}

// sameErr reports whether two decoding errors answer the client alike.
func sameErr(a, b error) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return a == nil || reflect.DeepEqual((&codec{}).describe(a), (&codec{}).describe(b))
}

// show prints a decoded value for a failure, nil and empty lists apart.
func show(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return fmt.Sprintf("%#v", v)
	}
	if rv.IsNil() {
		return "nil"
	}
	parts := make([]string, rv.Len())
	for i := range parts {
		if e := rv.Index(i); !e.IsNil() {
			parts[i] = show(e.Elem().Interface())
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// BenchmarkDecodeHot compares the hand-written decoder with the reflective
// one (checkStrict and encoding/json), as decodeCall runs them, on an
// encrypt of 1 KiB of plaintext (1368 bytes of base64) for one subject,
// and on a batch of 100 such encrypts.
//
//	go test -run '^$' -bench DecodeHot -benchmem ./api
func BenchmarkDecodeHot(b *testing.B) {
	pt := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, 1024))
	one := `{"subject":"alice@example.com","kind":"episodic","context":"Y3R4","plaintext":"` + pt + `"}`
	bodies := []struct {
		name string
		body []byte
		n    int
	}{
		{"encrypt", []byte(one), 0},
		{"batch100", []byte(seedBatch(strings.TrimSuffix(strings.Repeat(one+",", 100), ","))), 100},
	}
	for _, c := range bodies {
		for _, dec := range []struct {
			name string
			fn   func([]byte, *encryptRequest) ([]*encryptRequest, error)
		}{
			{"reflect", decodeCallReflect[encryptRequest]},
			{"hot", decodeCall[encryptRequest]},
		} {
			b.Run(c.name+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				for b.Loop() {
					var req encryptRequest
					items, err := dec.fn(c.body, &req)
					if err != nil || len(items) != c.n {
						b.Fatal(err, len(items))
					}
				}
			})
		}
	}
}

// TestPutBody checks that a body buffer is cleared before it goes back to
// the pool, and that a buffer grown beyond maxPooledBody is not kept.
func TestPutBody(t *testing.T) {
	for _, n := range []int{64, maxPooledBody + 1} {
		buf := bodyPool.Get().(*bytes.Buffer)
		buf.Write(bytes.Repeat([]byte{'s'}, n))
		b := buf.Bytes()
		putBody(buf)
		if bytes.IndexByte(b, 's') >= 0 {
			t.Errorf("%d bytes: the body is left in the buffer", n)
		}
		if buf.Len() != 0 {
			t.Errorf("%d bytes: the buffer is not reset", n)
		}
	}
}
