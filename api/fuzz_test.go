package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shredd/shredd/api"
)

// The fuzz targets feed arbitrary bodies to the real handler of one route,
// over a real service and SQLite database shared by the inputs of a
// process, and check that the answer is never a 5xx, always one JSON
// object with a JSON content type, and a well-formed problem when it is an
// error. A panic would show as a 500 (the recoverer) or crash the target.
// Seeds are valid and near-valid bodies (api.FuzzSeeds, shared with the
// decoder's differential target); {art} and {ct} stand for an artifact id
// and a ciphertext of the target's service.
//
//	go test -run '^$' -fuzz FuzzDecodeEncrypt -fuzztime 15s ./api

func FuzzDecodeKind(f *testing.F) { fuzzRoute(f, "PUT", "/v1/kinds/fuzz", api.FuzzSeeds["kind"]...) }
func FuzzDecodeEncrypt(f *testing.F) {
	fuzzRoute(f, "POST", "/v1/encrypt", api.FuzzSeeds["encrypt"]...)
}
func FuzzDecodeDecrypt(f *testing.F) {
	fuzzRoute(f, "POST", "/v1/decrypt", api.FuzzSeeds["decrypt"]...)
}
func FuzzDecodeArtifact(f *testing.F) {
	fuzzRoute(f, "POST", "/v1/artifacts", api.FuzzSeeds["artifact"]...)
}
func FuzzDecodeForget(f *testing.F) { fuzzRoute(f, "POST", "/v1/forget", api.FuzzSeeds["forget"]...) }

// fuzzRoute fuzzes the body of one route; see the comment above.
func fuzzRoute(f *testing.F, method, path string, seeds ...string) {
	e := newEnv(f, 0)
	art, ct := e.setup()
	if r := e.do("PUT", "/v1/kinds/summary", ""); r.status != 201 {
		f.Fatalf("put kind: %d %v", r.status, r.body)
	}
	expand := strings.NewReplacer("{art}", art, "{ct}", ct)
	for _, s := range seeds {
		f.Add([]byte(expand.Replace(s)))
	}
	h := e.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, rec)
	})
}

// checkAnswer checks an answer of the API to any body.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	mt, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	if err != nil || (mt != "application/json" && mt != "application/problem+json") {
		t.Fatalf("content type %q: %s", rec.Header().Get("Content-Type"), rec.Body)
	}
	var body map[string]any
	dec := json.NewDecoder(rec.Body)
	if err := dec.Decode(&body); err != nil || dec.More() {
		t.Fatalf("the body is not one JSON object (%v): %s", err, rec.Body)
	}
	if rec.Code >= 400 || mt == "application/problem+json" {
		if mt != "application/problem+json" || rec.Code < 400 || body["status"] != float64(rec.Code) || nonEmpty(body, "code", "title", "type", "request_id") != nil {
			t.Fatalf("status %d without a problem: %v", rec.Code, body)
		}
		return
	}
	results, ok := body["batch_results"]
	if !ok {
		return
	}
	items, ok := results.([]any)
	if !ok || len(items) == 0 || len(body) != 1 {
		t.Fatalf("batch_results malformed: %v", body)
	}
	for i, it := range items {
		res, _ := it.(map[string]any)
		if res == nil {
			t.Fatalf("batch result %d is not an object: %v", i, it)
		}
		e, failed := res["error"].(map[string]any)
		if !failed {
			continue
		}
		if st, _ := e["status"].(float64); st < 400 || st >= 500 || nonEmpty(e, "code", "title") != nil || len(res) != 1 {
			t.Fatalf("batch result %d: %v", i, res)
		}
	}
}

// nonEmpty returns the first of keys that is not a non-empty string in m,
// as an error.
func nonEmpty(m map[string]any, keys ...string) error {
	for _, k := range keys {
		if s, _ := m[k].(string); s == "" {
			return fmt.Errorf("%s is missing", k)
		}
	}
	return nil
}
