package main

// End-to-end test of the logs: a scripted session against the real binary,
// successes and failures, then every line the server wrote is checked: JSON,
// request lines complete, and nothing of the data in any of them.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shredd/shredd/registry"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// rawCall sends body as it is (not re-encoded) with the given content type
// and bearer token (none when "-"), and returns the response and its request
// id.
func (s *server) rawCall(t *testing.T, method, path, ctype, token, body string) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "-" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b.Bytes()}, resp.Header.Get("X-Request-Id")
}

// logLine is one JSON line of the server's log, with the fields the test
// reads.
type logLine struct {
	raw    map[string]any
	Msg    string `json:"msg"`
	Level  string `json:"level"`
	Time   string `json:"time"`
	ReqID  string `json:"request_id"`
	Route  string `json:"route"`
	Method string `json:"method"`
}

func TestLogsHoldNoData(t *testing.T) {
	s := startServer(t, t.TempDir(), serverOpts{})
	s.putKinds(t, "episodic", "summary")

	// Distinctive subjects, plaintexts and contexts, to look for afterwards.
	const (
		subjA = "logs-subject-quokka-4417@example.org"
		subjB = "logs-subject-narwhal-9902@example.org"
		ptA   = "PLAINTEXT-A quokka diary entry 4417 with a medical detail"
		ptB   = "PLAINTEXT-B narwhal diary entry 9902 with a home address"
		ptSum = "PLAINTEXT-SUMMARY of the quokka and the narwhal"
		ctxA  = "context-quokka-4417"
		ctxB  = "context-narwhal-9902"
	)
	recA := s.seal(t, sealReq{Subject: subjA, Kind: "episodic"}, ptA, ctxA)
	recB := s.seal(t, sealReq{Subject: subjB, Kind: "episodic"}, ptB, ctxB)
	recAB := s.seal(t, sealReq{Subjects: []string{subjA, subjB}, Kind: "summary"}, ptA+" and "+ptB, ctxB)
	s.open(t, recA)
	s.open(t, recB)
	s.open(t, recAB)
	recSum := s.seal(t, sealReq{Parents: []string{recA.artifact, recB.artifact}, Kind: "summary"}, ptSum, ctxA)
	s.open(t, recSum)
	var held struct {
		Artifact string `json:"artifact"`
	}
	s.expect(t, http.StatusCreated, http.MethodPost, "/v1/artifacts",
		sealReq{Parents: []string{recA.artifact}, Kind: "summary", Holder: "ann-index-1", Unit: writeUnit}).into(t, &held)
	s.expect(t, http.StatusOK, http.MethodGet, "/v1/artifacts/"+recSum.artifact, nil)

	// Failures, each with what its access line must say. Several carry the
	// subject, the plaintext or the ciphertext where a careless log would
	// pick them up: in a malformed body, in the path, in the query.
	type failure struct {
		name, method, path, ctype, token, body string
		status                                 int
		route                                  string
	}
	jsonCT := "application/json"
	// The writes below are of the test's own data, in the write unit: the
	// decrypts (in the check unit) are no reads they derive from.
	encBody := func(subject, kind, pt string) string {
		b, _ := json.Marshal(sealReq{Subject: subject, Kind: kind, Plaintext: b64(pt), Context: b64(ctxA), Unit: writeUnit})
		return string(b)
	}
	decBody := func(rec record, ctx string) string {
		b, _ := json.Marshal(decryptReq(record{ciphertext: rec.ciphertext, context: ctx}))
		return string(b)
	}
	wrongToken := "shredd_" + strings.Repeat("Zq", 21) + "x"
	failures := []failure{
		{"wrong context", "POST", "/v1/decrypt", jsonCT, "", decBody(recA, "context-wrong"), 422, "/v1/decrypt"},
		{"truncated JSON", "POST", "/v1/encrypt", jsonCT, "", strings.TrimSuffix(encBody(subjA, "episodic", ptA), "}"), 400, "/v1/encrypt"},
		{"JSON syntax error", "POST", "/v1/encrypt", jsonCT, "", `{"subject":"` + subjA + `","plaintext":"` + b64(ptA) + `",,}`, 400, "/v1/encrypt"},
		{"wrong type", "POST", "/v1/encrypt", jsonCT, "", `{"subject":["` + subjA + `"],"kind":"episodic","plaintext":"` + b64(ptA) + `"}`, 400, "/v1/encrypt"},
		{"unknown field", "POST", "/v1/encrypt", jsonCT, "", `{"subject":"` + subjA + `","kind":"episodic","plaintext":"` + b64(ptA) + `","note":"` + ptA + `"}`, 400, "/v1/encrypt"},
		{"two objects", "POST", "/v1/decrypt", jsonCT, "", decBody(recA, ctxA) + decBody(recB, ctxB), 400, "/v1/decrypt"},
		{"bad base64", "POST", "/v1/encrypt", jsonCT, "", `{"subject":"` + subjA + `","kind":"episodic","plaintext":"` + ptA + `"}`, 400, "/v1/encrypt"},
		{"wrong content type", "POST", "/v1/encrypt", "text/plain", "", encBody(subjA, "episodic", ptA), 415, "/v1/encrypt"},
		{"unknown kind", "POST", "/v1/encrypt", jsonCT, "", encBody(subjA, "nokind", ptA), 400, "/v1/encrypt"},
		{"garbled ciphertext", "POST", "/v1/decrypt", jsonCT, "", `{"ciphertext":"` + recA.ciphertext[:len(recA.ciphertext)-12] + `"}`, 422, "/v1/decrypt"},
		{"no token", "POST", "/v1/encrypt", jsonCT, "-", encBody(subjA, "episodic", ptA), 401, "/v1/*"},
		{"wrong token", "POST", "/v1/decrypt", jsonCT, wrongToken, decBody(recA, ctxA), 401, "/v1/*"},
		{"unknown artifact", "GET", "/v1/artifacts/00000000000000000000000000000000", "", "", "", 404, "/v1/artifacts/{id}"},
		{"subject in the path", "GET", "/v1/subjects/" + url.PathEscape(subjA), "", "", "", 404, "/v1/*"},
		{"subject in the query", "GET", "/v1/forgets?state=" + url.QueryEscape(subjA), "", "", "", 400, "/v1/forgets"},
		{"wrong method", "DELETE", "/v1/artifacts/" + recA.artifact, "", "", "", 405, "/v1/*"},
	}
	run := func(f failure) string {
		t.Helper()
		tok := f.token
		if tok == "" {
			tok = s.token
		}
		r, id := s.rawCall(t, f.method, f.path, f.ctype, tok, f.body)
		if r.Status != f.status {
			t.Fatalf("%s: status %d, want %d: %s", f.name, r.Status, f.status, r.Body)
		}
		if id == "" {
			t.Fatalf("%s: no X-Request-Id", f.name)
		}
		return id
	}
	want := map[string]failure{} // by request id
	for _, f := range failures {
		want[run(f)] = f
	}

	// The forget, and the 410s that follow it.
	fg := s.forget(t, subjA)
	for _, rec := range []record{recA, recAB, recSum} {
		s.shredded(t, rec)
	}
	gone := []failure{
		{"encrypt for the forgotten subject", "POST", "/v1/encrypt", jsonCT, "", encBody(subjA, "episodic", ptA), 410, "/v1/encrypt"},
		{"aggregate with the forgotten subject", "POST", "/v1/encrypt", jsonCT, "", `{"subjects":["` + subjB + `","` + subjA + `"],"kind":"summary","plaintext":"` + b64(ptSum) + `","unit":"` + writeUnit + `"}`, 410, "/v1/encrypt"},
		{"derivative of a shredded parent", "POST", "/v1/artifacts", jsonCT, "", `{"parents":["` + recA.artifact + `"],"kind":"summary","holder":"ann-index-2","unit":"` + writeUnit + `"}`, 410, "/v1/artifacts"},
		{"decrypt of the aggregate", "POST", "/v1/decrypt", jsonCT, "", decBody(recAB, ctxB), 410, "/v1/decrypt"},
	}
	for _, f := range gone {
		want[run(f)] = f
	}
	if again := s.forget(t, subjA); again.Forget != fg.Forget {
		t.Fatalf("second forget gave %s, want %s", again.Forget, fg.Forget)
	}
	s.open(t, recB) // the other subject is untouched
	s.runEpoch(t)
	checkShreddedView(t, s.getForget(t, fg.Forget))
	s.listForgets(t, "shredded")

	// /metrics, where the router mounts it, must hold none of the data
	// either (checked below with the logs).
	var metrics []byte
	if r := s.do(t, http.MethodGet, "/metrics", nil); r.Status == http.StatusOK {
		metrics = r.Body
	} else if r.Status != http.StatusNotFound {
		t.Fatalf("GET /metrics: %d %s", r.Status, r.Body)
	} else {
		t.Log("GET /metrics: 404, not mounted in this build; only the logs are checked")
	}

	s.stop()
	logs := s.logs.String()

	// Every line is a JSON object with time, level and msg; every access
	// line has the request id, the route pattern, the status and the
	// duration.
	idRe := regexp.MustCompile(`^[0-9a-f]{16}$`)
	byID := map[string][]logLine{}
	requests := 0
	for i, line := range strings.Split(strings.TrimSuffix(logs, "\n"), "\n") {
		var l logLine
		if err := json.Unmarshal([]byte(line), &l.raw); err != nil {
			t.Fatalf("log line %d is not JSON: %q", i+1, line)
		}
		_ = json.Unmarshal([]byte(line), &l)
		if l.Msg == "" || l.Level == "" || l.Time == "" {
			t.Errorf("log line %d lacks time, level or msg: %s", i+1, line)
		}
		if l.ReqID != "" {
			byID[l.ReqID] = append(byID[l.ReqID], l)
		}
		if l.Msg != "request" {
			continue
		}
		requests++
		status, okStatus := l.raw["status"].(float64)
		dur, okDur := l.raw["duration_ms"].(float64)
		if !idRe.MatchString(l.ReqID) || l.Route == "" || l.Method == "" || !okStatus || status < 100 || status > 599 || !okDur || dur < 0 {
			t.Errorf("incomplete access line %d: %s", i+1, line)
		}
		if l.Route != "unmatched" && !strings.HasPrefix(l.Route, "/") {
			t.Errorf("access line %d: route %q is not a pattern", i+1, l.Route)
		}
	}
	if requests < 40 {
		t.Errorf("%d access lines, want one per request (at least 40)", requests)
	}
	for id, f := range want {
		var access, failed *logLine
		for i, l := range byID[id] {
			switch l.Msg {
			case "request":
				access = &byID[id][i]
			case "request failed":
				failed = &byID[id][i]
			}
		}
		if access == nil || failed == nil {
			t.Errorf("%s: want an access line and a failure line with request id %s, got %+v", f.name, id, byID[id])
			continue
		}
		if access.Route != f.route || access.raw["status"] != float64(f.status) || access.Method != f.method {
			t.Errorf("%s: access line %v, want route %s, method %s, status %d", f.name, access.raw, f.route, f.method, f.status)
		}
	}

	// Nothing of the data, in any encoding, in any line.
	secret, err := os.ReadFile(filepath.Join(s.dataDir, node.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := registry.NewHasher(secret)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]string{
		"admin token":             s.token,
		"admin token secret part": strings.TrimPrefix(s.token, "shredd_"),
		"wrong token":             wrongToken,
	}
	for _, subj := range []string{subjA, subjB} {
		sid := hasher.SID(subj)
		forbidden["subject "+subj] = subj
		forbidden["subject local part of "+subj] = strings.TrimPrefix(strings.Split(subj, "@")[0], "logs-subject-")
		forbidden["subject, path-escaped "+subj] = url.PathEscape(subj)
		forbidden["subject, query-escaped "+subj] = url.QueryEscape(subj)
		forbidden["sid hex of "+subj] = hex.EncodeToString(sid[:])
		forbidden["sid HEX of "+subj] = strings.ToUpper(hex.EncodeToString(sid[:]))
		forbidden["sid base64 of "+subj] = base64.StdEncoding.EncodeToString(sid[:])
		forbidden["sid base64url of "+subj] = base64.RawURLEncoding.EncodeToString(sid[:])
		forbidden["sid hex prefix of "+subj] = hex.EncodeToString(sid[:8])
	}
	for _, v := range []string{ptA, ptB, ptSum, ctxA, ctxB} {
		forbidden["plaintext "+v] = v
		forbidden["plaintext, base64 "+v] = b64(v)
		forbidden["plaintext, base64url "+v] = base64.RawURLEncoding.EncodeToString([]byte(v))
		forbidden["plaintext, hex "+v] = hex.EncodeToString([]byte(v))
		forbidden["plaintext start "+v] = v[:16]
	}
	for _, rec := range []record{recA, recB, recAB, recSum} {
		body := strings.TrimPrefix(rec.ciphertext, "shredd:v1:")
		forbidden["ciphertext of "+rec.name] = rec.ciphertext
		forbidden["ciphertext middle of "+rec.name] = body[len(body)/2-16 : len(body)/2+16]
		forbidden["ciphertext end of "+rec.name] = body[len(body)-24:]
	}
	forbidden["quokka"] = "quokka"
	forbidden["narwhal"] = "narwhal"
	for what, v := range forbidden {
		if strings.Contains(logs, v) {
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, v) {
					t.Errorf("the log holds the %s: %s", what, line)
					break
				}
			}
		}
		if metrics != nil && strings.Contains(string(metrics), v) {
			t.Errorf("/metrics holds the %s", what)
		}
	}
}
