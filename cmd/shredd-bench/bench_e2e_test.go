package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/testkit/testbin"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// hang bounds a wait on a state: long enough that only a hang reaches it,
// even on a loaded machine. A bound on a wait, never a timing assertion.
const hang = 3 * time.Minute

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Cleanup()
	testbin.Cleanup()
	os.Exit(code)
}

// binaries builds this command and the real server, ./cmd/shredd, once per
// test binary (with -race when the tests run with -race, so the race
// detector also watches them) and returns their paths.
func binaries(t *testing.T) (bench, shredd string) {
	t.Helper()
	bench, err := testbin.Build("github.com/shredd/shredd/cmd/shredd-bench")
	if err != nil {
		t.Fatal(err)
	}
	if shredd, err = testbin.Build("github.com/shredd/shredd/cmd/shredd"); err != nil {
		t.Fatal(err)
	}
	return bench, shredd
}

// runBench runs the real binary's `shredd-bench` with args and env (and
// SHREDD_BIN, the real shredd binary) and returns its stdout.
func runBench(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	bench, shredd := binaries(t)
	cmd := exec.Command(bench, args...)
	cmd.Env = append(append(cleanEnv(), "SHREDD_BIN="+shredd), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("shredd-bench %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	if strings.Contains(stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("the race detector reported a data race in shredd-bench:\n%s", stderr.String())
	}
	return stdout.Bytes()
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("... (%d lines left off)", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

// server is the real shredd binary serving a data directory on 127.0.0.1.
type server struct {
	base, token string
	cmd         *exec.Cmd
	logs        *vaulttest.SyncBuffer
	done        chan struct{}
	waitErr     error
	client      *http.Client
}

// startServer starts `shredd serve` on dir (with more flags, and env in
// its environment) and waits for its "listening" log line; at the end of
// the test it checks the server's output for data races.
func startServer(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	_, bin := binaries(t)
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "16", "--epoch-interval", "1h"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	if testbin.Race && os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=50")
	}
	s := &server{cmd: cmd, logs: &vaulttest.SyncBuffer{}, done: make(chan struct{}), client: &http.Client{Timeout: 30 * time.Second}}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.waitErr = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
		if strings.Contains(s.logs.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector reported a data race in the server:\n%s", s.logs.String())
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", tail(s.logs.String(), 100))
		}
	})
	deadline := time.Now().Add(hang)
	for s.base == "" {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Addr != "" {
				s.base = "http://" + l.Addr
			}
		}
		select {
		case <-s.done:
			t.Fatalf("shredd exited before listening (%v):\n%s", s.waitErr, s.logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("shredd did not log \"listening\" within %v:\n%s", hang, s.logs.String())
		}
	}
	tok, err := os.ReadFile(filepath.Join(dir, node.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(tok))
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.client.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(hang):
		t.Fatalf("shredd did not stop within %v of SIGTERM", hang)
	}
	if s.waitErr != nil {
		t.Fatalf("shredd exited with %v after SIGTERM, want a clean exit", s.waitErr)
	}
}

// expect sends a JSON request, checks the status and decodes the answer
// into out (when not nil).
func (s *server) expect(t *testing.T, want int, method, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, rb)
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, rb)
		}
	}
}

// TestBench runs the load tool briefly, in one run, against shredd (which it
// starts), a Vault dev server and the no-op handler, and checks the
// report's structure: every operation ran against every target that has
// it, without errors, and the ratios are there. No timing is asserted.
func TestBench(t *testing.T) {
	v := vaulttest.Dev(t)
	ops := []string{opEncrypt, opDecrypt, opBatch, opForget, opMixed, opRaw, opRawDecrypt, opSeal, opSealBatch, opSealRaw}
	out := runBench(t, []string{"VAULT_ADDR=" + v.Addr, "VAULT_TOKEN=" + v.RootToken},
		"--ops", strings.Join(ops, ","), "--duration", "300ms", "--clients", "4", "--subjects", "200",
		"--batch", "10", "--raw-payload", "65536", "--raw-batch", "3", "--json")
	var rep benchReport
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("the report is not the documented JSON: %v\n%s", err, out)
	}
	if rep.Machine.NumCPU < 1 || rep.Machine.GoVersion == "" || !slices.Equal(rep.Config.Ops, ops) || rep.Config.Clients != 4 {
		t.Errorf("machine %+v, config %+v", rep.Machine, rep.Config)
	}
	got := map[string]benchResult{}
	for _, r := range rep.Results {
		got[r.Target+"/"+r.Op] = r
		if r.Requests < 1 || r.Items < r.Requests || r.Errors != 0 || r.ErrorKind != "" {
			t.Errorf("%s %s: %d requests, %d items, %d errors (%s)", r.Target, r.Op, r.Requests, r.Items, r.Errors, r.ErrorKind)
		}
		if r.ItemsPerS <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.P999ms < r.P99ms {
			t.Errorf("%s %s: %.0f items/s, p50 %.3f p99 %.3f p999 %.3f ms", r.Target, r.Op, r.ItemsPerS, r.P50ms, r.P99ms, r.P999ms)
		}
	}
	var want []string
	for _, op := range ops {
		want = append(want, targetShredd+"/"+op, targetNoop+"/"+op)
	}
	want = append(want, targetVault+"/"+opEncrypt, targetVault+"/"+opDecrypt, targetVault+"/"+opBatch,
		targetVault+"/"+opSeal, targetVault+"/"+opSealBatch) // client-side sealing against Vault's encrypts
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("no result for %s", k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d results, want %d: %v", len(got), len(want), rep.Results)
	}
	for _, op := range []string{opBatch, opSealBatch} {
		if b := got[targetShredd+"/"+op]; b.Items != 10*b.Requests || b.Batch != 10 {
			t.Errorf("%s: %d items in %d requests of %d", op, b.Items, b.Requests, b.Batch)
		}
	}
	if b := got[targetShredd+"/"+opSealRaw]; b.Items != 3*b.Requests || b.Batch != 3 || rep.Config.RawBatch != 3 {
		t.Errorf("seal-raw: %d records in %d requests of %d (--raw-batch %d)", b.Items, b.Requests, b.Batch, rep.Config.RawBatch)
	}
	if rep.Fsync == nil || rep.Fsync.Samples < 1 || rep.Fsync.CeilingPerS <= 0 {
		t.Errorf("fsync baseline %+v", rep.Fsync)
	}
	if rep.AEAD == nil || rep.AEAD.MBPerS <= 0 || rep.AEAD.Payload != 65536 || rep.AEAD.Buffers != 1 {
		t.Errorf("aead baseline %+v", rep.AEAD)
	}
	// seal-raw's records in flight (clients × --raw-batch), spread over
	// the workers.
	if a := rep.AEADSpread; a == nil || a.MBPerS <= 0 || a.Payload != 65536 || a.Buffers != max(1, rep.Config.Clients*3/a.Workers) {
		t.Errorf("aead baseline over seal-raw's buffers %+v", a)
	}
	ratios := map[string]bool{}
	for _, r := range rep.Ratios {
		if r.Ratio <= 0 {
			t.Errorf("ratio %+v", r)
		}
		ratios[r.Op+"/"+r.Baseline] = true
	}
	for _, k := range []string{"encrypt/vault", "encrypt/noop", "decrypt/vault", "batch/vault", "forget/noop", "raw/aead", "raw-decrypt/aead",
		"seal/vault", "seal/noop", "seal-batch/vault", "seal-raw/aead"} {
		if !ratios[k] {
			t.Errorf("no ratio %s: %v", k, rep.Ratios)
		}
	}
	if len(rep.RSS) == 0 || rep.RSS[0].RSSMiB <= 0 {
		t.Errorf("no resident memory samples of the server: %v", rep.RSS)
	}

	// The text report has the same rows.
	text := string(runBench(t, nil, "--ops", "encrypt", "--duration", "100ms", "--clients", "2", "--subjects", "10", "--noop=false"))
	for _, s := range []string{"target", "p999 ms", "shredd", "encrypt"} {
		if !strings.Contains(text, s) {
			t.Errorf("the text report has no %q:\n%s", s, text)
		}
	}
}

// TestBenchFill fills a small data directory and checks that a server on
// it serves a real encrypt, decrypt and forget of its subjects, sees their
// lineage, and that the load tool's verify runs on its heavy subject.
func TestBenchFill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	out := runBench(t, nil, "fill", "--dir", dir, "--subjects", "1000", "--artifacts", "10000", "--heavy", "200", "--buckets", "16", "--cache-mib", "16")
	if !strings.Contains(string(out), "filled") {
		t.Fatalf("fill said %s", out)
	}
	s := startServer(t, dir, nil)
	defer s.stop(t)
	subj := benchSubject(999) // the upper half: the load tool's encrypts use the lower one
	b64 := base64.StdEncoding.EncodeToString
	plaintext := "from the filled store"
	var sealed struct {
		Artifact   string `json:"artifact"`
		Ciphertext string `json:"ciphertext"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/encrypt", map[string]string{"subject": subj, "kind": "episodic",
		"plaintext": b64([]byte(plaintext))}, &sealed)
	if !strings.HasPrefix(sealed.Ciphertext, "shredd:v1:") || len(sealed.Artifact) != 32 {
		t.Fatalf("encrypt gave %+v", sealed)
	}
	// The decrypt checks the record, in a unit of work of its own: a read
	// outside any unit would be seen by the load tool's writes below, which
	// derive nothing from it (docs/api.md, "What a read costs a writer").
	dec := map[string]string{"ciphertext": sealed.Ciphertext, "context": b64(nil), "unit": "bench-test-check"}
	var opened struct {
		Plaintext string `json:"plaintext"`
		Artifact  string `json:"artifact"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/decrypt", dec, &opened)
	if pt, err := base64.StdEncoding.DecodeString(opened.Plaintext); err != nil || string(pt) != plaintext || opened.Artifact != sealed.Artifact {
		t.Fatalf("decrypt: plaintext %q (%v), artifact %s; want %q, %s", pt, err, opened.Artifact, plaintext, sealed.Artifact)
	}

	// The fill's lineage is there: the dry run of a forget finds artifacts.
	var p struct {
		Counts struct {
			Total int `json:"total"`
		} `json:"counts"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/forget", map[string]any{"subject": subj, "dry_run": true}, &p)
	if p.Counts.Total < 2 {
		t.Fatalf("the dry run of a filled subject finds %d artifacts", p.Counts.Total)
	}
	var f struct {
		State string `json:"state"`
	}
	s.expect(t, http.StatusAccepted, http.MethodPost, "/v1/forget", map[string]string{"subject": subj}, &f)
	if f.State != "committed" {
		t.Fatalf("forget: %+v", f)
	}
	var prob struct {
		Code string `json:"code"`
	}
	s.expect(t, http.StatusGone, http.MethodPost, "/v1/decrypt", dec, &prob)
	if prob.Code != "shredded" {
		t.Fatalf("decrypt after the forget: code %q, want shredded", prob.Code)
	}

	// The load tool against this server: forget and verify the heavy subject.
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(s.token), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal(runBench(t, nil, "--url", s.base, "--token-file", tok, "--ops", "verify", "--verifies", "2",
		"--subjects", "1000", "--noop=false", "--json"), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Op != opVerify || rep.Results[0].Requests != 2 || rep.Results[0].Errors != 0 {
		t.Fatalf("verify: %+v", rep.Results)
	}
}

// TestBenchCluster fills a PostgreSQL database (fill --store, its bucket
// keys under a Vault Transit root) and drives two real nodes on it, which
// share the fill's secrets as the nodes of a cluster do, with one run of
// the load tool given both in --url: every operation runs without errors,
// the clients are spread over both nodes (the report's count per node, and
// each node's own request counter), and the filled subjects are served.
func TestBenchCluster(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	v := vaulttest.Dev(t)
	venv := []string{"VAULT_TOKEN=" + v.RootToken, "VAULT_ADDR=", "VAULT_NAMESPACE=", "VAULT_CACERT="}
	vargs := []string{"--root", "vault", "--vault-addr", v.Addr, "--vault-key", "bench-cluster"}
	first := filepath.Join(t.TempDir(), "a")
	out := runBench(t, venv, append([]string{"fill", "--dir", first, "--store", dsn, "--subjects", "300", "--artifacts", "2000",
		"--buckets", "16"}, vargs...)...)
	if !strings.Contains(string(out), "filled the --store database: 300 subjects, 2000 artifacts") || strings.Contains(string(out), "postgres://") {
		t.Fatalf("fill said %s", out)
	}
	if _, err := os.Stat(filepath.Join(first, node.DBFile)); err == nil {
		t.Fatalf("fill --store created a SQLite database in %s", first)
	}
	a := startServer(t, first, venv, append([]string{"--store", dsn}, vargs...)...)
	defer a.stop(t)
	second := filepath.Join(t.TempDir(), "b")
	if err := os.Mkdir(second, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{node.SecretFile, node.AttestationKeyFile, node.AttestationPubFile, node.LogKeyFile, node.LogVKeyFile, node.TokenFile} {
		b, err := os.ReadFile(filepath.Join(first, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(second, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := startServer(t, second, venv, append([]string{"--store", dsn}, vargs...)...)
	defer b.stop(t)

	// A filled subject, seen through the second node: its lineage is there.
	var p struct {
		Counts struct {
			Total int `json:"total"`
		} `json:"counts"`
	}
	b.expect(t, http.StatusOK, http.MethodPost, "/v1/forget", map[string]any{"subject": benchSubject(299), "dry_run": true}, &p)
	if p.Counts.Total < 2 {
		t.Fatalf("the dry run of a filled subject on node b finds %d artifacts", p.Counts.Total)
	}

	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(a.token), 0o600); err != nil {
		t.Fatal(err)
	}
	ops := []string{opEncrypt, opDecrypt, opBatch, opForget}
	var rep benchReport
	out = runBench(t, nil, "--url", a.base+","+b.base+"/", "--token-file", tok, "--ops", strings.Join(ops, ","),
		"--duration", "300ms", "--clients", "4", "--subjects", "300", "--batch", "10", "--noop=false", "--json")
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("the report is not the documented JSON: %v\n%s", err, out)
	}
	if rep.Config.Nodes != 2 || len(rep.Results) != len(ops) {
		t.Fatalf("config %+v, %d results", rep.Config, len(rep.Results))
	}
	for i, r := range rep.Results {
		if r.Op != ops[i] || r.Requests < 2 || r.Errors != 0 || r.ErrorKind != "" {
			t.Errorf("%s: %d requests, %d errors (%s)", r.Op, r.Requests, r.Errors, r.ErrorKind)
		}
		if len(r.NodeRequests) != 2 || r.NodeRequests[0] < 1 || r.NodeRequests[1] < 1 || r.NodeRequests[0]+r.NodeRequests[1] != r.Requests {
			t.Errorf("%s: requests per node %v of %d", r.Op, r.NodeRequests, r.Requests)
		}
	}
	// Each node counted load of its own (its /metrics, by route and status).
	for _, s := range []*server{a, b} {
		m := s.metrics(t)
		for _, want := range []string{`route="/v1/encrypt",method="POST",code="200"`, `route="/v1/decrypt",method="POST",code="200"`,
			`route="/v1/forget",method="POST",code="202"`} {
			if !strings.Contains(m, want) {
				t.Errorf("node %s served no %s:\n%s", s.base, want, m)
			}
		}
	}

	// Several --url addresses must all be on loopback.
	bench, _ := binaries(t)
	cmd := exec.Command(bench, "--url", a.base+",http://192.0.2.1:8080", "--token-file", tok)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "loopback") {
		t.Errorf("a non-loopback node in --url: %v %s", err, out)
	}
}

// metrics returns the server's /metrics text.
func (s *server) metrics(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %s %s", resp.Status, b)
	}
	return string(b)
}
