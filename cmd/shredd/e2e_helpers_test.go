package main

// Helpers of the end-to-end tests: build the real binary once, start it on
// 127.0.0.1:0 with a data directory, talk to it over HTTP, stop or watch it
// die.

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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/testkit/testbin"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// scratchDir holds what outlives one test (the export story's data dir);
// TestMain creates and removes it.
var scratchDir string

// hang bounds a wait on a state (a process listening or stopping, a forget
// settling, a node serving again): long enough that only a hang reaches it,
// even on a loaded machine. A bound on a wait, never a timing assertion.
const hang = 3 * time.Minute

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shredd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	scratchDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	testbin.Cleanup()
	pgtest.Cleanup()
	os.Exit(code)
}

// shreddBinary builds the server once per test binary (with -race when the
// tests run with -race, so the race detector also watches the server; with
// the build tag crashpoints, so that SHREDD_TEST_CRASH_AT and
// SHREDD_TEST_CRASH_RANDOM can kill it at a durable step: see
// internal/crashpoint) and returns its path. The build is lazy so that unit
// tests of this package that never start a server do not pay for it.
func shreddBinary(t *testing.T) string {
	t.Helper()
	path, err := testbin.Build("github.com/shredd/shredd/cmd/shredd", "crashpoints")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// logBuffer collects what the server writes to stderr and stdout.
type logBuffer = vaulttest.SyncBuffer

// starts numbers the servers started by this test binary.
var starts atomic.Int64

// serverOpts configures one start of the server.
type serverOpts struct {
	Buckets int      // --buckets; 16 when 0
	Env     []string // extra environment, such as SHREDD_TEST_CRASH_AT=step
	Args    []string // extra flags
	// Token is the admin token the test calls with; "" reads the data
	// directory's admin.token (a node of a cluster whose first node made
	// the token has none of its own).
	Token string
}

// server is one running shredd process.
type server struct {
	t       *testing.T
	name    string // for messages: each start has its own
	dataDir string
	base    string // http://127.0.0.1:PORT
	token   string
	logs    *logBuffer
	client  *http.Client

	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed

	ring *ring // when set, each request goes to the next node of a cluster instead
}

// startServer starts the real binary on 127.0.0.1:0 with dataDir and waits
// for its "listening" log line. The process is killed at the end of the test
// if it is still running.
func startServer(t *testing.T, dataDir string, o serverOpts) *server {
	t.Helper()
	s := startProcess(t, dataDir, o)
	if !s.waitListening() {
		t.Fatalf("shredd exited before listening (%v):\n%s", s.waitErr, s.logs.String())
	}
	return s
}

// startProcess starts the real binary like startServer but does not wait
// for it to listen: a crash test may kill it during its start.
func startProcess(t *testing.T, dataDir string, o serverOpts) *server {
	t.Helper()
	bin := shreddBinary(t)
	if o.Buckets == 0 {
		o.Buckets = 16
	}
	args := []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0",
		"--buckets", strconv.Itoa(o.Buckets), "--epoch-interval", "1h"}
	args = append(args, o.Args...)
	cmd := exec.Command(bin, args...)
	// The tests own the configuration: no SHREDD_* from the caller's
	// environment leaks into the server.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A -race server sleeps 1s at exit (GORACE atexit_sleep_ms) so late race
	// reports get out; 50ms is plenty here and keeps restarts quick.
	if testbin.Race && os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=50")
	}
	cmd.Env = append(cmd.Env, o.Env...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start shredd: %v", err)
	}
	s := &server{t: t, name: fmt.Sprintf("server #%d", starts.Add(1)), dataDir: dataDir, token: o.Token, logs: logs, cmd: cmd, done: make(chan struct{}),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		s.client.CloseIdleConnections()
		s.checkNoRace()
		if t.Failed() {
			t.Logf("%s logs (%s), without the access lines of successful requests:\n%s", s.name, dataDir, tail(notableLogs(logs.String()), 150))
		}
	})

	return s
}

// waitListening waits for the "listening" log line and reads the admin
// token. It reports false when the process exited before listening.
func (s *server) waitListening() bool {
	t := s.t
	t.Helper()
	if s.base == "" {
		if s.base = awaitListening(t, "shredd", s.logs, s.done); s.base == "" {
			return false
		}
	}
	if s.token != "" {
		return true
	}
	tok, err := os.ReadFile(filepath.Join(s.dataDir, "admin.token"))
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	s.token = strings.TrimSpace(string(tok))
	return true
}

// awaitListening waits for the "listening" line in logs, those of the
// process what that closes done when it exits, and returns the base URL it
// names, or "" when the process exited first. It fails t when hang passes.
func awaitListening(t *testing.T, what string, logs *logBuffer, done <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		if addr := listeningAddr(logs.Bytes()); addr != "" {
			return "http://" + addr
		}
		select {
		case <-done:
			return ""
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log \"listening\" within %v:\n%s", what, hang, logs.String())
		}
	}
}

// listeningAddr returns the address of the "listening" log line, if any.
func listeningAddr(logs []byte) string {
	for _, line := range bytes.Split(logs, []byte("\n")) {
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "listening" && l.Addr != "" {
			return l.Addr
		}
	}
	return ""
}

// notableLogs drops the access log lines of requests that succeeded.
func notableLogs(logs string) string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Status < 400 {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("... (%d lines left off)", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

func (s *server) checkNoRace() {
	s.t.Helper()
	if strings.Contains(s.logs.String(), "WARNING: DATA RACE") {
		s.t.Errorf("the race detector reported a data race in the server:\n%s", s.logs.String())
	}
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (s *server) stop() {
	s.t.Helper()
	// Close the client's idle connections first: the server's graceful
	// shutdown waits up to 5s for a connection that never sent a request
	// (http.Transport may leave such spare connections in its pool).
	s.client.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(hang):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Fatalf("shredd did not stop within %v of SIGTERM", hang)
	}
	s.client.CloseIdleConnections()
	if s.waitErr != nil {
		s.t.Fatalf("shredd exited with %v after SIGTERM, want a clean exit:\n%s", s.waitErr, tail(s.logs.String(), 50))
	}
}

// waitKilled waits for the process to die and checks that SIGKILL killed it.
func (s *server) waitKilled() {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(hang):
		s.t.Fatalf("shredd still running %v after the crash step should have been reached", hang)
	}
	s.client.CloseIdleConnections()
	ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		s.t.Fatalf("shredd ended with %v, want death by SIGKILL", s.cmd.ProcessState)
	}
}

// reply is one HTTP response.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// into decodes the body as JSON into v.
func (r reply) into(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %d response %q: %v", r.Status, r.Body, err)
	}
}

// problem is an RFC 9457 body of the API.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
	RequestID string `json:"request_id"`
}

// problem decodes the body as a problem and checks its content type.
func (r reply) problem(t *testing.T) problem {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("error response content type %q, want application/problem+json (body %q)", ct, r.Body)
	}
	var p problem
	r.into(t, &p)
	if p.Status != r.Status {
		t.Errorf("problem status %d in a %d response", p.Status, r.Status)
	}
	return p
}

// callToken sends one request with token as the bearer token (none when
// token is "-") and returns the response or a transport error.
func (s *server) callToken(method, path, token string, body any) (reply, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(b)
	}
	base, client := s.base, s.client
	if s.ring != nil {
		n := s.ring.next()
		base, client = n.base, n.client
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "-" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// call sends one request with the admin token.
func (s *server) call(method, path string, body any) (reply, error) {
	return s.callToken(method, path, s.token, body)
}

// do is call that fails the test on a transport error.
func (s *server) do(t *testing.T, method, path string, body any) reply {
	t.Helper()
	r, err := s.call(method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// expect is do that also checks the status.
func (s *server) expect(t *testing.T, want int, method, path string, body any) reply {
	t.Helper()
	r := s.do(t, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// expectProblem checks that a request fails with status and code.
func (s *server) expectProblem(t *testing.T, status int, code, method, path string, body any) problem {
	t.Helper()
	r := s.expect(t, status, method, path, body)
	p := r.problem(t)
	if p.Code != code {
		t.Fatalf("%s %s: code %q, want %q: %s", method, path, p.Code, code, r.Body)
	}
	if p.Type != "urn:shredd:problem:"+code || p.Title == "" || p.RequestID == "" {
		t.Errorf("%s %s: incomplete problem %+v", method, path, p)
	}
	return p
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// sealReq is the body of POST /v1/encrypt and (without Plaintext and
// Context) of POST /v1/artifacts.
type sealReq struct {
	Subject   string   `json:"subject,omitempty"`
	Subjects  []string `json:"subjects,omitempty"`
	Parents   []string `json:"parents,omitempty"`
	Kind      string   `json:"kind"`
	Holder    string   `json:"holder,omitempty"`
	Plaintext string   `json:"plaintext,omitempty"`
	Context   string   `json:"context,omitempty"`
	// Unit is the write's unit of work (docs/api.md "What a read costs a
	// writer"); seal writes in writeUnit unless told otherwise.
	Unit string `json:"unit,omitempty"`
}

// The e2e tests' units of work: their writes of fresh data (seal) and
// their reads that check what a record decrypts to (open, shredded) are
// separate units of one token, so a check is not a read the next write
// would have to declare. A test that derives data from a read names it.
const (
	writeUnit = "e2e-write"
	checkUnit = "e2e-check"
)

type sealed struct {
	Artifact    string `json:"artifact"`
	Ciphertext  string `json:"ciphertext"`
	LineageSize int    `json:"lineage_size"`
}

type opened struct {
	Plaintext string `json:"plaintext"`
	Artifact  string `json:"artifact"`
	Kind      string `json:"kind"`
}

type condition struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

type forgetView struct {
	Forget       string      `json:"forget"`
	State        string      `json:"state"`
	Overdue      bool        `json:"overdue"`
	Barrier      int64       `json:"barrier"`
	TPropSeconds float64     `json:"t_prop_seconds"`
	Deadline     time.Time   `json:"deadline"`
	RequestedAt  time.Time   `json:"requested_at"`
	CommittedAt  *time.Time  `json:"committed_at"`
	RekeyedAt    *time.Time  `json:"rekeyed_at"`
	ShreddedAt   *time.Time  `json:"shredded_at"`
	ErasedAt     *time.Time  `json:"erased_at"`
	Epoch        int64       `json:"epoch"`
	Conditions   []condition `json:"conditions"`
	Verification []condition `json:"verification"`
	// CommitmentSalt is in the answer of the call that created the forget
	// only.
	CommitmentSalt string `json:"commitment_salt"`
}

// condition is the condition name of the forget's Conditions.
func (f forgetView) condition(name string) condition { return conditionIn(f.Conditions, name) }

// conditionIn is the condition called name among cs; one of status
// "missing" when there is none.
func conditionIn(cs []condition, name string) condition {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return condition{Name: name, Status: "missing"}
}

type epochView struct {
	Epoch       int64     `json:"epoch"`
	RootVersion int       `json:"root_version"`
	Retired     []int     `json:"retired_versions"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

// record is one sealed record the tests keep to decrypt later.
type record struct {
	name       string // for messages
	ciphertext string
	context    string
	plaintext  string
	artifact   string
}

// putKinds registers kinds.
func (s *server) putKinds(t *testing.T, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		r := s.do(t, http.MethodPut, "/v1/kinds/"+k, map[string]string{"description": "e2e " + k})
		if r.Status != http.StatusCreated && r.Status != http.StatusOK {
			t.Fatalf("PUT /v1/kinds/%s: %d %s", k, r.Status, r.Body)
		}
	}
}

// seal encrypts plaintext with context and returns the record.
func (s *server) seal(t *testing.T, req sealReq, plaintext, context string) record {
	t.Helper()
	req.Plaintext, req.Context = b64(plaintext), b64(context)
	if req.Unit == "" {
		req.Unit = writeUnit
	}
	var out sealed
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/encrypt", req).into(t, &out)
	if !strings.HasPrefix(out.Ciphertext, "shredd:v1:") || len(out.Artifact) != 32 {
		t.Fatalf("encrypt gave %+v", out)
	}
	return record{name: plaintext, ciphertext: out.Ciphertext, context: context, plaintext: plaintext, artifact: out.Artifact}
}

// decryptReq is the decrypt of rec that checks it, in checkUnit.
func decryptReq(rec record) map[string]string {
	return map[string]string{"ciphertext": rec.ciphertext, "context": b64(rec.context), "unit": checkUnit}
}

// open decrypts a record and checks the plaintext and artifact id.
func (s *server) open(t *testing.T, rec record) {
	t.Helper()
	var out opened
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/decrypt", decryptReq(rec)).into(t, &out)
	pt, err := base64.StdEncoding.DecodeString(out.Plaintext)
	if err != nil || string(pt) != rec.plaintext {
		t.Fatalf("decrypt %s: plaintext %q (%v), want %q", rec.name, pt, err, rec.plaintext)
	}
	if out.Artifact != rec.artifact {
		t.Fatalf("decrypt %s: artifact %s, want %s", rec.name, out.Artifact, rec.artifact)
	}
}

// shredded checks that a record no longer decrypts: 410 shredded.
func (s *server) shredded(t *testing.T, rec record) {
	t.Helper()
	r := s.do(t, http.MethodPost, "/v1/decrypt", decryptReq(rec))
	if r.Status != http.StatusGone {
		t.Fatalf("decrypt %s after the forget: status %d, want 410: %s", rec.name, r.Status, r.Body)
	}
	if p := r.problem(t); p.Code != "shredded" {
		t.Fatalf("decrypt %s after the forget: code %q, want shredded", rec.name, p.Code)
	}
}

func (s *server) forget(t *testing.T, subject string) forgetView {
	t.Helper()
	var f forgetView
	s.expect(t, http.StatusAccepted, http.MethodPost, "/v1/forget", map[string]string{"subject": subject}).into(t, &f)
	return f
}

func (s *server) getForget(t *testing.T, id string) forgetView {
	t.Helper()
	var f forgetView
	s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+id, nil).into(t, &f)
	return f
}

func (s *server) listForgets(t *testing.T, state string) []forgetView {
	t.Helper()
	path := "/v1/forgets"
	if state != "" {
		path += "?state=" + state
	}
	var out struct {
		Forgets []forgetView `json:"forgets"`
	}
	s.expect(t, http.StatusOK, http.MethodGet, path, nil).into(t, &out)
	return out.Forgets
}

func (s *server) runEpoch(t *testing.T) epochView {
	t.Helper()
	var e epochView
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/epoch", nil).into(t, &e)
	return e
}

// rootVersion returns the latest root key version /healthz reports.
func (s *server) rootVersion(t *testing.T) int {
	t.Helper()
	r, err := s.callToken(http.MethodGet, "/healthz", "-", nil)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /healthz: %v %d %s", err, r.Status, r.Body)
	}
	var h struct {
		Status      string `json:"status"`
		RootVersion int    `json:"root_version"`
	}
	r.into(t, &h)
	return h.RootVersion
}

// waitForget polls a forget until ok reports true (at most hang).
func (s *server) waitForget(t *testing.T, id string, what string, ok func(forgetView) bool) forgetView {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		f := s.getForget(t, id)
		if ok(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("forget %s: not %s within %v: %+v", id, what, hang, f)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shreddedOrLater reports whether a forget is shredded, or already erased
// (the verifier erases a shredded forget once every condition holds).
func shreddedOrLater(state string) bool { return state == "shredded" || state == "erased" }

// checkShreddedView checks a forget that an epoch completed.
func checkShreddedView(t *testing.T, f forgetView) {
	t.Helper()
	if !shreddedOrLater(f.State) || f.ShreddedAt == nil || f.RekeyedAt == nil || f.CommittedAt == nil || f.Epoch == 0 {
		t.Fatalf("forget not shredded: %+v", f)
	}
	if len(f.Conditions) == 0 {
		t.Fatalf("forget %s has no conditions", f.Forget)
	}
	for _, c := range f.Conditions {
		if c.Status != "ok" {
			t.Errorf("forget %s: condition %s is %s (%s), want ok", f.Forget, c.Name, c.Status, c.Reason)
		}
	}
}

// startAlice starts a server on dir with o, registers kinds and seals
// alice's episodic record ("alice's record", context "a"): the opening of
// most durability tests.
func startAlice(t *testing.T, dir string, o serverOpts, kinds ...string) (*server, record) {
	t.Helper()
	s := startServer(t, dir, o)
	s.putKinds(t, kinds...)
	return s, s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's record", "a")
}

// backupTo takes a backup of the data directory dir with shredd backup
// into a fresh temporary file named name, and returns its path.
func backupTo(t *testing.T, dir, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cli(t, "", nil, nil, "backup", "--data-dir", dir, "--out", out).want(t, 0)
	return out
}

// startOnPostgres starts a server on a fresh data directory and a fresh
// database of the shared PostgreSQL server, with the kind episodic: the
// opening of the restore drills on PostgreSQL. It returns the server of
// the database, its DSN, the data directory and the options to start the
// server there again.
func startOnPostgres(t *testing.T) (srv *pgtest.Server, dsn, dir string, opts serverOpts, s *server) {
	t.Helper()
	srv = pgtest.Shared(t)
	dsn = srv.NewDatabase(t)
	dir = t.TempDir()
	opts = serverOpts{Args: []string{"--store", dsn}}
	s = startServer(t, dir, opts)
	s.putKinds(t, "episodic")
	return srv, dsn, dir, opts, s
}
