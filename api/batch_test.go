package api_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/shredd/shredd/api"
)

// batch returns a batch_input body of the given items.
func batch(items ...string) string { return `{"batch_input":[` + strings.Join(items, ",") + `]}` }

// results returns the batch_results of a 200 reply.
func results(t testing.TB, r reply) []map[string]any {
	t.Helper()
	if r.status != 200 || r.ctype != "application/json" {
		t.Fatalf("batch: %d %s %v", r.status, r.ctype, r.body)
	}
	raw, ok := r.body["batch_results"].([]any)
	if !ok || len(r.body) != 1 {
		t.Fatalf("batch: no batch_results alone: %v", r.body)
	}
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		if out[i], ok = v.(map[string]any); !ok {
			t.Fatalf("batch result %d is not an object: %v", i, v)
		}
	}
	return out
}

// itemErr returns the error of a batch result (nil on success).
func itemErr(res map[string]any) map[string]any {
	e, _ := res["error"].(map[string]any)
	return e
}

// itemCode returns the error code of a batch result, "" on success.
func itemCode(res map[string]any) string { c, _ := itemErr(res)["code"].(string); return c }

// checkCodes checks the outcome of each batch result: "" for success, else
// the error code; a failed result holds only its error.
func checkCodes(t testing.TB, res []map[string]any, want ...string) {
	t.Helper()
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d: %v", len(res), len(want), res)
	}
	for i, w := range want {
		if got := itemCode(res[i]); got != w {
			t.Fatalf("result %d: code %q, want %q: %v", i, got, w, res[i])
		}
		if e := itemErr(res[i]); e != nil {
			if len(res[i]) != 1 {
				t.Fatalf("result %d: a failure holds fields besides error: %v", i, res[i])
			}
			if st, _ := e["status"].(float64); st < 400 || st > 599 || nonEmpty(e, "code", "title") != nil {
				t.Fatalf("result %d: error without status or title: %v", i, e)
			}
		}
	}
}

func TestBatchEncryptDecrypt(t *testing.T) {
	e := newEnv(t, 0)
	_, alice := e.setup()
	if r := e.do("POST", "/v1/forget", `{"subject":"gone@example.com"}`); r.status != 202 {
		t.Fatalf("forget: %d %v", r.status, r.body)
	}
	enc := results(t, e.do("POST", "/v1/encrypt", batch(
		`{"subject":"bob@example.com","kind":"episodic","plaintext":"`+b64("one")+`"}`,
		`{"subject":"gone@example.com","kind":"episodic","plaintext":"`+b64("two")+`"}`,
		`{"subject":"bob@example.com","kind":"episodic","plaintext":"%%%"}`,
		`{"subjects":["bob@example.com","carol@example.com"],"kind":"episodic","plaintext":"`+b64("three")+`","context":"`+b64("ctx")+`"}`,
		`{"subject":"bob@example.com","kind":"nokind","plaintext":""}`,
		`{"subject":"bob@example.com","plaintext":""}`,
	)))
	checkCodes(t, enc, "", "shredded", "invalid_base64", "", "unknown_kind", "missing_field")
	for i, n := range map[int]float64{0: 1, 3: 2} {
		if len(enc[i]) != 3 || len(enc[i]["artifact"].(string)) != 32 || !strings.HasPrefix(enc[i]["ciphertext"].(string), "shredd:v1:") || enc[i]["lineage_size"] != n {
			t.Fatalf("result %d is not an encrypt response: %v", i, enc[i])
		}
	}
	if e := itemErr(enc[1]); e["status"] != 410.0 || e["title"] != "A subject of this data was forgotten: the data is cryptographically erased" {
		t.Fatalf("shredded item: %v", e)
	}

	if r := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`); r.status != 202 {
		t.Fatalf("forget: %d %v", r.status, r.body)
	}
	one, three := enc[0]["ciphertext"].(string), enc[3]["ciphertext"].(string)
	dec := results(t, e.do("POST", "/v1/decrypt", batch(
		`{"ciphertext":"`+one+`"}`,
		`{"ciphertext":"`+three+`","context":"`+b64("ctx")+`"}`,
		`{"ciphertext":"`+three+`"}`,
		`{"ciphertext":"`+alice+`"}`,
		`{"ciphertext":"shredd:v1:AAAA"}`,
		`{}`,
		`{"ciphertext":"`+three+`","context":"!"}`,
	)))
	checkCodes(t, dec, "", "", "invalid_envelope", "shredded", "invalid_envelope", "missing_field", "invalid_base64")
	for _, w := range []struct {
		dec, enc  int
		plaintext string
	}{{0, 0, "one"}, {1, 3, "three"}} {
		pt, _ := base64.StdEncoding.DecodeString(dec[w.dec]["plaintext"].(string))
		if string(pt) != w.plaintext || dec[w.dec]["artifact"] != enc[w.enc]["artifact"] || dec[w.dec]["kind"] != "episodic" || len(dec[w.dec]) != 4 {
			t.Fatalf("result %d: %v, want plaintext %q of artifact %v", w.dec, dec[w.dec], w.plaintext, enc[w.enc]["artifact"])
		}
		if l, _ := dec[w.dec]["lease"].(map[string]any); l == nil || l["artifact"] != enc[w.enc]["artifact"] || l["id"] == "" {
			t.Fatalf("result %d: no lease on the artifact: %v", w.dec, dec[w.dec])
		}
	}

	// Each failed item is logged with the request id, like a failed request;
	// neither logs nor results name a subject or hold its plaintext.
	logs := e.log.String()
	if n := strings.Count(logs, `"msg":"batch item failed"`); n != 4+5 {
		t.Fatalf("%d batch item failures logged, want 9:\n%s", n, logs)
	}
	for _, secret := range []string{"gone@example.com", "alice@example.com", b64("two")} {
		if strings.Contains(logs, secret) {
			t.Fatalf("log holds %q:\n%s", secret, logs)
		}
		for _, res := range append(enc, dec...) {
			if b, _ := json.Marshal(res); strings.Contains(string(b), secret) {
				t.Fatalf("result holds %q: %s", secret, b)
			}
		}
	}
}

// TestBatchItemErrorsMatchSingle checks that a failed batch item carries the
// status, code, title and detail of the problem the same item answers alone.
func TestBatchItemErrorsMatchSingle(t *testing.T) {
	e := newEnv(t, 0)
	art, ct := e.setup()
	if r := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`); r.status != 202 {
		t.Fatalf("forget: %d %v", r.status, r.body)
	}
	parents := make([]string, 257)
	for i := range parents {
		parents[i] = fmt.Sprintf(`"%032x"`, i+1)
	}
	cases := []struct{ path, item string }{
		{"/v1/encrypt", `{"subject":"alice@example.com","kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"parents":["` + art + `"],"kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"subject":"a","kind":"nokind","plaintext":""}`},
		{"/v1/encrypt", `{"subject":"a","kind":"Bad Kind","plaintext":""}`},
		{"/v1/encrypt", `{"parents":["00000000000000000000000000000001"],"kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"parents":["xyz"],"kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"parents":[` + strings.Join(parents, ",") + `],"kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"subject":"a","kind":"episodic","plaintext":"YQ"}`},
		{"/v1/encrypt", `{"subject":"a","kind":"episodic","plaintext":"","context":"-_"}`},
		{"/v1/encrypt", `{"subject":"a","kind":"episodic","plaintext":"","context":"` + b64(strings.Repeat("c", 4097)) + `"}`},
		{"/v1/encrypt", `{"subject":"","kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"kind":"episodic","plaintext":""}`},
		{"/v1/encrypt", `{"subject":"a","plaintext":""}`},
		{"/v1/decrypt", `{"ciphertext":"` + ct + `"}`},
		{"/v1/decrypt", `{"ciphertext":"shredd:v1:AAAA"}`},
		{"/v1/decrypt", `{"ciphertext":"not an envelope"}`},
		{"/v1/decrypt", `{"ciphertext":""}`},
		{"/v1/decrypt", `{"ciphertext":"x","context":"%"}`},
	}
	for _, c := range cases {
		single := e.do("POST", c.path, c.item)
		if single.status < 400 || single.ctype != "application/problem+json" {
			t.Fatalf("%s %s: %d %v, want a problem", c.path, c.item, single.status, single.body)
		}
		res := results(t, e.do("POST", c.path, batch(c.item, c.item)))
		want := map[string]any{"status": float64(single.status), "code": single.body["code"], "title": single.body["title"]}
		if d, ok := single.body["detail"]; ok {
			want["detail"] = d
		}
		for i := range res {
			if got := itemErr(res[i]); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: item %d error %v, want %v (single: %v)", c.path, c.item, i, got, want, single.body)
			}
		}
	}
}

// TestBatchMax runs a batch of MaxBatch items both ways and checks that the
// results keep the order of the items.
func TestBatchMax(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	items := make([]string, api.MaxBatch)
	for i := range items {
		items[i] = fmt.Sprintf(`{"subject":"u%d@example.com","kind":"episodic","plaintext":"%s"}`, i%7, b64(fmt.Sprint("record ", i)))
	}
	enc := results(t, e.do("POST", "/v1/encrypt", batch(items...)))
	for i, res := range enc {
		ct, ok := res["ciphertext"].(string)
		if !ok {
			t.Fatalf("item %d: %v", i, res)
		}
		items[i] = `{"ciphertext":"` + ct + `"}`
	}
	dec := results(t, e.do("POST", "/v1/decrypt", batch(items...)))
	for i, res := range dec {
		if pt, _ := base64.StdEncoding.DecodeString(res["plaintext"].(string)); string(pt) != fmt.Sprint("record ", i) || res["artifact"] != enc[i]["artifact"] {
			t.Fatalf("item %d: %v, want record %d of artifact %v", i, res, i, enc[i]["artifact"])
		}
	}
}
