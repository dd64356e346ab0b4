package main

// End-to-end tests of witnessed checkpoints (C2SP tlog-witness), all real
// binaries on 127.0.0.1: `shredd witness` processes cosign the log of a
// `shredd serve --witness ...` as it grows; a forked log (the same log key,
// another history, the same tree size) is refused by the witnesses, which
// keep the evidence; `shredd verify --witness ... --witnesses-required K`
// passes and fails as the cosignatures say; a restarted witness keeps its
// state and never goes back.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/testkit/testbin"
	"github.com/shredd/shredd/translog"
)

// witnessProc is one running `shredd witness`.
type witnessProc struct {
	t     *testing.T
	name  string
	key   string // private key file; its verifier key is key + ".vkey"
	state string
	logs  *logBuffer
	base  string
	cmd   *exec.Cmd
	done  chan struct{}
}

// newWitnessKey runs `shredd witness keygen` and returns the key file.
func newWitnessKey(t *testing.T, dir, name string) string {
	t.Helper()
	key := filepath.Join(dir, name+".key")
	code, stdout, stderr := runShredd(t, "witness", "keygen", "--name", name, "--key", key)
	if code != 0 {
		t.Fatalf("witness keygen: %d %s%s", code, stdout, stderr)
	}
	vkey := mustRead(t, key+".vkey")
	if strings.TrimSpace(stdout) != strings.TrimSpace(string(vkey)) || !strings.HasPrefix(stdout, name+"+") {
		t.Fatalf("keygen printed %q, wrote %q", stdout, vkey)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v %v", fi.Mode(), err)
	}
	if code, _, _ := runShredd(t, "witness", "keygen", "--name", name, "--key", key); code == 0 {
		t.Fatal("keygen overwrote an existing key")
	}
	return key
}

// startWitnessProc starts `shredd witness` on 127.0.0.1:0 and waits for
// its "listening" line.
func startWitnessProc(t *testing.T, name, key, state string, logVKeys ...string) *witnessProc {
	t.Helper()
	args := []string{"witness", "--listen", "127.0.0.1:0", "--key", key, "--state", state}
	for _, v := range logVKeys {
		args = append(args, "--log", v)
	}
	cmd := exec.Command(shreddBinary(t), args...)
	if testbin.Race {
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=50")
	}
	w := &witnessProc{t: t, name: name, key: key, state: state, logs: &logBuffer{}, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.logs, w.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			cmd.Process.Kill()
			<-w.done
		}
		if strings.Contains(w.logs.String(), "WARNING: DATA RACE") {
			t.Errorf("data race in witness %s:\n%s", name, w.logs)
		}
		if t.Failed() {
			t.Logf("witness %s logs:\n%s", name, tail(w.logs.String(), 40))
		}
	})
	if w.base = awaitListening(t, "witness "+name, w.logs, w.done); w.base == "" {
		t.Fatalf("witness %s exited:\n%s", name, w.logs)
	}
	return w
}

func (w *witnessProc) stop() {
	w.t.Helper()
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(hang):
		w.t.Fatalf("witness %s did not stop on SIGTERM", w.name)
	}
	if !w.cmd.ProcessState.Success() {
		w.t.Fatalf("witness %s exited with %v:\n%s", w.name, w.cmd.ProcessState, w.logs)
	}
}

func (w *witnessProc) verifier(t *testing.T) note.Verifier {
	t.Helper()
	v, err := translog.NewCosignatureVerifier(string(mustRead(t, w.key+".vkey")))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// flag is serve's --witness value for w.
func (w *witnessProc) flag() string { return w.base + "=" + w.key + ".vkey" }

// post sends an add-checkpoint body to w.
func (w *witnessProc) post(t *testing.T, body []byte) (int, string, string) {
	t.Helper()
	resp, err := http.Post(w.base+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// evidence lists the files of w's evidence directory.
func (w *witnessProc) evidence(t *testing.T) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(w.state, "evidence"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// waitCosigned polls the server's checkpoint until it is of the log's
// current tree and carries valid cosignatures of every witness in ws,
// and returns it.
func waitCosigned(t *testing.T, s *server, logKey note.Verifier, ws ...*witnessProc) []byte {
	t.Helper()
	var keys []note.Verifier
	for _, w := range ws {
		keys = append(keys, w.verifier(t))
	}
	limit := time.Now().Add(hang)
	for {
		size := s.treeSize(t)
		cp := s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil).Body
		c, _, err := translog.CheckCosignatures(cp, logKey, keys, len(keys))
		if err == nil && c.Size == size {
			return cp
		}
		if time.Now().After(limit) {
			t.Fatalf("the checkpoint of tree %d is not cosigned by all %d witnesses within 30s (%v):\n%s", size, len(ws), err, cp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeLogKey puts a log key pair in a new data directory, as a log
// whose key was copied elsewhere (a fork) would have.
func writeLogKey(t *testing.T, dir, skey, vkey string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, node.LogKeyFile), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, node.LogVKeyFile), []byte(vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWitnessE2E is the whole story of witnessed checkpoints.
func TestWitnessE2E(t *testing.T) {
	dir := t.TempDir()
	skey, vkey, err := translog.GenerateKey("shredd/witness-e2e")
	if err != nil {
		t.Fatal(err)
	}
	logKey, _ := note.NewVerifier(vkey)
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "fork")
	writeLogKey(t, dirA, skey, vkey)
	writeLogKey(t, dirB, skey, vkey) // the fork: the same key, another history
	logVKey := filepath.Join(dirA, node.LogVKeyFile)

	w1 := startWitnessProc(t, "w1.example", newWitnessKey(t, dir, "w1.example"), filepath.Join(dir, "w1-state"), logVKey)
	w2 := startWitnessProc(t, "w2.example", newWitnessKey(t, dir, "w2.example"), filepath.Join(dir, "w2-state"), vkey)
	// w3 is trusted by verifiers but never runs: the log cannot reach it,
	// and that must never block a write.
	w3 := &witnessProc{t: t, name: "w3.example", key: newWitnessKey(t, dir, "w3.example"), base: "http://127.0.0.1:1"}

	args := []string{"--cache-ttl", "1ns", "--witness-interval", "50ms", "--witness", w1.flag(), "--witness", w2.flag(), "--witness", w3.flag()}
	a := startServer(t, dirA, serverOpts{Args: args})

	// 1. A growing log, cosigned by both running witnesses at each size.
	a.putKinds(t, "episodic")
	grow := func(s *server, tag string, from, to int) {
		for i := from; i < to; i++ {
			s.seal(t, sealReq{Subject: fmt.Sprintf("%s-%d@example.com", tag, i), Kind: "episodic"}, "a record", "")
		}
	}
	grow(a, "a", 0, 3)
	first := waitCosigned(t, a, logKey, w1, w2)
	firstSize := a.treeSize(t)
	saved := filepath.Join(dir, "first.checkpoint")
	if err := os.WriteFile(saved, first, 0o644); err != nil {
		t.Fatal(err)
	}
	grow(a, "a", 3, 5)
	second := waitCosigned(t, a, logKey, w1, w2)
	size := a.treeSize(t)
	if size <= firstSize {
		t.Fatalf("the log did not grow: %d then %d", firstSize, size)
	}
	// `shredd checkpoint` hands out the cosigned checkpoint, and note.Open
	// verifies it with the log's and both witnesses' keys.
	out := filepath.Join(dir, "cli.checkpoint")
	a.cli(t, "checkpoint", "--out", out)
	n, err := note.Open(mustRead(t, out), note.VerifierList(logKey, w1.verifier(t), w2.verifier(t)))
	if err != nil || len(n.Sigs) != 3 {
		t.Fatalf("shredd checkpoint: note.Open %v, %d signatures:\n%s", err, len(n.Sigs), mustRead(t, out))
	}
	if !bytes.Equal(mustRead(t, out), second) {
		t.Fatalf("shredd checkpoint differs from GET /v1/log/checkpoint")
	}
	if !strings.Contains(a.logs.String(), `"witness":"w3.example"`) {
		t.Fatalf("the unreachable witness's failure is not logged:\n%s", tail(a.logs.String(), 20))
	}

	// 2. The fork reaches the same tree size with another root: both
	// witnesses refuse it and keep the evidence; it gets no cosignature.
	b := startServer(t, dirB, serverOpts{Args: []string{"--cache-ttl", "1ns", "--witness-interval", "50ms", "--witness", w1.flag(), "--witness", w2.flag()}})
	b.putKinds(t, "episodic")
	grow(b, "fork", 0, 5)
	if bs := b.treeSize(t); bs != size {
		t.Fatalf("the fork has %d entries, the log %d: the same operations should log as many", bs, size)
	}
	limit := time.Now().Add(hang)
	logged := func(w *witnessProc) bool { return strings.Contains(w.logs.String(), "split view") }
	for len(w1.evidence(t)) == 0 || len(w2.evidence(t)) == 0 || !logged(w1) || !logged(w2) || !strings.Contains(b.logs.String(), "split view") {
		if time.Now().After(limit) {
			t.Fatalf("the split view was not refused, logged (by both witnesses and the fork) and kept as evidence within %v: w1 %v, w2 %v\n%s", hang, w1.evidence(t), w2.evidence(t), tail(b.logs.String(), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range []*witnessProc{w1, w2} {
		ev := w.evidence(t)
		if !strings.Contains(ev[0], "split-view") {
			t.Fatalf("witness %s kept %v, want split-view evidence", w.name, ev)
		}
		data := mustRead(t, filepath.Join(w.state, "evidence", ev[0]))
		if !bytes.Contains(data, noteText(second)) || !bytes.Contains(data, noteText(b.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil).Body)) {
			t.Fatalf("witness %s's evidence does not hold both checkpoints of size %d:\n%s", w.name, size, data)
		}
	}
	forkCP := b.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil).Body
	if _, rep, err := translog.CheckCosignatures(forkCP, logKey, []note.Verifier{w1.verifier(t), w2.verifier(t)}, 1); err == nil || len(rep.Valid) != 0 {
		t.Fatalf("the fork's checkpoint carries cosignatures: %v\n%s", err, forkCP)
	}
	b.stop()

	// 3. An erased forget's export, verified with k of n witnesses.
	subject := "a-0@example.com"
	f := a.forget(t, subject)
	a.shred(t, f.Forget)
	a.waitErased(t, f.Forget, time.Time{})
	waitCosigned(t, a, logKey, w1, w2)
	export := filepath.Join(dir, "export.tar.gz")
	a.cli(t, "export", "--out", export, f.Forget)
	pub := filepath.Join(dirA, node.AttestationPubFile)
	verify := func(extra ...string) (int, string) {
		args := append([]string{"verify", export, "--key", pub, "--log-key", logVKey, "--subject", subject, "--salt", f.CommitmentSalt}, extra...)
		code, stdout, stderr := runShredd(t, args...)
		return code, stdout + stderr
	}
	k1, k2, k3 := w1.key+".vkey", w2.key+".vkey", w3.key+".vkey"
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 0, "VERIFIED"},
		{[]string{"--witness", k1, "--witness", k2}, 0, "ok    witnesses    2 of 2 required cosignatures valid: w1.example"},
		{[]string{"--witness", k1, "--witness", k2, "--witness", k3, "--witnesses-required", "2"}, 0, "2 of 2 required cosignatures valid"},
		{[]string{"--witness", string(mustRead(t, k2))}, 0, "1 of 1 required"}, // the key itself, not its file
		{[]string{"--witness", k1, "--witness", k2, "--witness", k3}, 1, "2 valid of the 3 required (none from w3.example)"},
		{[]string{"--witness", k3, "--witnesses-required", "1"}, 1, "0 valid of the 1 required"},
		{[]string{"--witness", k1, "--witnesses-required", "2"}, 2, "--witnesses-required 2"},
		{[]string{"--witness", k1, "--witness", k1}, 1, "NOT VERIFIED: witness.duplicate"},
		{[]string{"--witnesses-required", "1"}, 2, "needs the trusted witnesses' keys"},
		{[]string{"--witness", logVKey}, 1, "NOT VERIFIED: witness.format"},
	} {
		code, out := verify(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("verify %v: exit %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
		if tc.code == 1 && !strings.Contains(out, "NOT VERIFIED") {
			t.Errorf("verify %v: no NOT VERIFIED:\n%s", tc.args, out)
		}
	}

	// 4. A restarted witness keeps its state: it answers its size to a log
	// starting over, refuses the older checkpoint, and goes on.
	held, _ := translog.ParseCheckpoint(noteText(waitCosigned(t, a, logKey, w1, w2)))
	w1.stop()
	w1 = startWitnessProc(t, "w1.example", w1.key, w1.state, logVKey)
	for _, tc := range []struct {
		old    int64
		status int
		answer string
	}{
		{0, http.StatusConflict, fmt.Sprintf("%d\n", held.Size)},
		{firstSize, http.StatusConflict, fmt.Sprintf("%d\n", held.Size)},
		{held.Size, http.StatusBadRequest, ""}, // old above the checkpoint's size
	} {
		status, ctype, answer := w1.post(t, append([]byte(fmt.Sprintf("old %d\n\n", tc.old)), mustRead(t, saved)...))
		if status != tc.status || (tc.answer != "" && (answer != tc.answer || ctype != "text/x.tlog.size")) {
			t.Fatalf("restarted witness, old %d with the checkpoint of size %d: %d %s %q, want %d %q", tc.old, firstSize, status, ctype, answer, tc.status, tc.answer)
		}
	}
	// The log's sender finds the restarted witness on its new address
	// only through its flag; restart the log with it, and grow.
	a.stop()
	args[5] = w1.flag()
	a = startServer(t, dirA, serverOpts{Args: args})
	grow(a, "c", 0, 2)
	waitCosigned(t, a, logKey, w1, w2)
	if strings.Contains(w1.logs.String(), "refused a checkpoint") {
		t.Fatalf("the restarted witness refused the log's own growth:\n%s", w1.logs)
	}
}
