package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdown sends SIGTERM while a large batch encrypt is in
// flight: the batch completes with every item sealed, the process exits
// cleanly, and after a restart every returned ciphertext decrypts — nothing
// half-written.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic")
	items := make([]sealReq, 1000)
	for i := range items {
		items[i] = sealReq{Subject: fmt.Sprint("subject-", i%50), Kind: "episodic",
			Plaintext: base64.StdEncoding.EncodeToString([]byte(fmt.Sprint("record ", i)))}
	}
	type result struct {
		r   reply
		err error
	}
	misses := keyCacheMisses(t, s)
	done := make(chan result, 1)
	go func() {
		r, err := s.call("POST", "/v1/encrypt", map[string]any{"batch_input": items})
		done <- result{r, err}
	}()
	// SIGTERM once the batch runs, which its first subject key lookups
	// show (a fixed sleep here could signal before the request arrived, on
	// a loaded machine). 1,000 registrations take far longer.
	deadline := time.Now().Add(hang)
	for keyCacheMisses(t, s) == misses {
		if time.Now().After(deadline) {
			t.Fatalf("the batch encrypt did not start within %v", hang)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	res := <-done
	if res.err != nil || res.r.Status != 200 {
		t.Fatalf("batch during shutdown: %v, status %d: %s", res.err, res.r.Status, res.r.Body)
	}
	var out struct {
		BatchResults []struct {
			Artifact   string          `json:"artifact"`
			Ciphertext string          `json:"ciphertext"`
			Error      json.RawMessage `json:"error"`
		} `json:"batch_results"`
	}
	if err := json.Unmarshal(res.r.Body, &out); err != nil || len(out.BatchResults) != len(items) {
		t.Fatalf("batch results: %v, %d items", err, len(out.BatchResults))
	}
	for i, it := range out.BatchResults {
		if it.Error != nil || it.Ciphertext == "" {
			t.Fatalf("item %d failed during graceful shutdown: %s", i, it.Error)
		}
	}
	s.stop() // waits for the exit and requires status 0

	s2 := startServer(t, dir, serverOpts{})
	for _, i := range []int{0, 499, 999} {
		s2.open(t, record{name: fmt.Sprint("item ", i), ciphertext: out.BatchResults[i].Ciphertext,
			plaintext: fmt.Sprint("record ", i), artifact: out.BatchResults[i].Artifact})
	}
}

// keyCacheMisses returns shredd_key_cache_misses_total from the server's
// /metrics.
func keyCacheMisses(t *testing.T, s *server) string {
	t.Helper()
	r := s.do(t, http.MethodGet, "/metrics", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.Status, r.Body)
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "shredd_key_cache_misses_total "); ok {
			return v
		}
	}
	t.Fatalf("no shredd_key_cache_misses_total in /metrics:\n%s", r.Body)
	return ""
}
