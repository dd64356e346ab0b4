package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/testkit/testbin"
)

// cliRun is one run of a client subcommand of the real binary.
type cliRun struct {
	code           int
	stdout, stderr []byte
}

// cli runs the binary with args in dir (the test's temp dir when ""), with
// stdin, and with env as its only SHREDD_* environment.
func cli(t *testing.T, dir string, env []string, stdin []byte, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shreddBinary(t), args...)
	if dir == "" {
		dir = t.TempDir()
	}
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if testbin.Race && os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliRun{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("shredd %v: %v", args, err)
	}
	if bytes.Contains(r.stderr, []byte("WARNING: DATA RACE")) {
		t.Errorf("shredd %v: data race:\n%s", args, r.stderr)
	}
	return r
}

// want checks the exit code of a run, and that stderr mentions each of
// msgs.
func (r cliRun) want(t *testing.T, code int, msgs ...string) cliRun {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, m := range msgs {
		if !bytes.Contains(r.stderr, []byte(m)) {
			t.Fatalf("stderr does not mention %q:\n%s", m, r.stderr)
		}
	}
	return r
}

// TestClientCLI drives shredd encrypt, decrypt, forget and status against a
// running server: the round trip, derivatives, the ways to find the server
// and the token, erased data (exit 3), server errors (1) and usage (2).
func TestClientCLI(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir, serverOpts{})
	s.putKinds(t, "episodic", "summary")
	tokFile := filepath.Join(dataDir, "admin.token")
	flags := []string{"--addr", s.base, "--token-file", tokFile}
	// The test's encrypts seal its own plaintexts, never what a decrypt
	// wrote: every encrypt runs in the write unit and every decrypt that
	// checks one in the check unit (docs/api.md, "What a read costs a
	// writer"), so the checks are no reads the encrypts must declare.
	unit := map[string][]string{"encrypt": {"--unit", writeUnit}, "decrypt": {"--unit", checkUnit}}
	check := unit["decrypt"]
	run := func(t *testing.T, stdin []byte, cmd string, args ...string) cliRun {
		t.Helper()
		return cli(t, "", nil, stdin, append(append(append([]string{cmd}, flags...), unit[cmd]...), args...)...)
	}
	seal := func(t *testing.T, stdin []byte, args ...string) sealed {
		t.Helper()
		var out sealed
		r := run(t, stdin, "encrypt", args...).want(t, 0)
		if err := json.Unmarshal(r.stdout, &out); err != nil || !strings.HasPrefix(out.Ciphertext, "shredd:v1:") || len(out.Artifact) != 32 {
			t.Fatalf("encrypt printed %q (%v)", r.stdout, err)
		}
		return out
	}

	pt := []byte("Alice prefers green tea.\n")
	rec := seal(t, pt, "--subject", "alice@example.com", "--kind", "episodic", "--context", "tenant=acme")
	if rec.LineageSize != 1 {
		t.Fatalf("lineage %d", rec.LineageSize)
	}
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	bob := seal(t, binary, "--subject", "bob@example.com", "--kind", "episodic")
	sum := seal(t, []byte("Alice and Bob drink tea."), "--subject", "bob@example.com", "--subject", "carol@example.com",
		"--parent", rec.Artifact, "--kind", "summary")
	if sum.LineageSize != 3 {
		t.Fatalf("a summary of Bob and Carol derived from Alice's record: lineage %d, want 3", sum.LineageSize)
	}

	t.Run("decrypt", func(t *testing.T) {
		// From standard input, as `jq -r .ciphertext` writes it.
		r := run(t, []byte(rec.Ciphertext+"\n"), "decrypt", "--context", "tenant=acme").want(t, 0)
		if !bytes.Equal(r.stdout, pt) {
			t.Fatalf("decrypt wrote %q, want %q", r.stdout, pt)
		}
		r = run(t, nil, "decrypt", "--ciphertext", bob.Ciphertext).want(t, 0)
		if !bytes.Equal(r.stdout, binary) {
			t.Fatalf("decrypt of binary plaintext wrote %x", r.stdout)
		}
		run(t, nil, "decrypt", "--ciphertext", rec.Ciphertext, "--context", "other").want(t, 1, "422", "invalid_envelope")
		run(t, []byte("shredd:v1:AAAA"), "decrypt").want(t, 1, "invalid_envelope")
	})

	t.Run("environment", func(t *testing.T) {
		// SHREDD_URL and SHREDD_TOKEN, no flags.
		env := []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=" + s.token}
		r := cli(t, "", env, []byte(bob.Ciphertext), append([]string{"decrypt"}, check...)...).want(t, 0)
		if !bytes.Equal(r.stdout, binary) {
			t.Fatalf("decrypt wrote %x", r.stdout)
		}
		// --addr without a scheme means http.
		cli(t, "", []string{"SHREDD_TOKEN=" + s.token}, []byte(bob.Ciphertext), append([]string{"decrypt", "--addr", strings.TrimPrefix(s.base, "http://")}, check...)...).want(t, 0)
		// The default token: ./shredd-data/admin.token, or under SHREDD_DATA_DIR.
		work := t.TempDir()
		if err := os.MkdirAll(filepath.Join(work, "shredd-data"), 0o700); err != nil {
			t.Fatal(err)
		}
		tok, _ := os.ReadFile(tokFile)
		if err := os.WriteFile(filepath.Join(work, "shredd-data", "admin.token"), tok, 0o600); err != nil {
			t.Fatal(err)
		}
		cli(t, work, []string{"SHREDD_URL=" + s.base}, []byte(bob.Ciphertext), append([]string{"decrypt"}, check...)...).want(t, 0)
		cli(t, "", []string{"SHREDD_URL=" + s.base, "SHREDD_DATA_DIR=" + dataDir}, []byte(bob.Ciphertext), append([]string{"decrypt"}, check...)...).want(t, 0)
		// --token-file wins over SHREDD_TOKEN.
		cli(t, "", []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=shredd_wrong"}, []byte(bob.Ciphertext), append([]string{"decrypt", "--token-file", tokFile}, check...)...).want(t, 0)
	})

	t.Run("server errors", func(t *testing.T) {
		cli(t, "", []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=shredd_wrong"}, []byte(bob.Ciphertext), "decrypt").want(t, 1, "401", "invalid_token")
		run(t, []byte("x"), "encrypt", "--subject", "a", "--kind", "nokind").want(t, 1, "400", "unknown_kind")
		run(t, nil, "status", "00000000000000000000000000000000").want(t, 1, "404", "not_found")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		ln.Close()
		cli(t, "", []string{"SHREDD_TOKEN=" + s.token}, nil, "status", "--addr", "http://"+dead, "00000000000000000000000000000000").want(t, 1, "GET /v1/forgets/")
		// A token that lacks the scope.
		out := cli(t, "", nil, nil, "token", "create", "--data-dir", dataDir, "--name", "reader", "--scopes", "decrypt").want(t, 0)
		reader := strings.TrimSpace(string(out.stdout))
		cli(t, "", []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=" + reader}, nil, "forget", "--subject", "bob@example.com").want(t, 1, "403", "forbidden")
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"encrypt", "--subject", "a"},     // no kind
			{"encrypt", "--kind", "episodic"}, // no subject or parent
			{"encrypt", "--kind", "episodic", "--subject", "a", "extra"},
			{"encrypt", "--bogus"},
			{"decrypt"}, // nothing on stdin
			{"forget"},  // no subject
			{"forget", "--subject", "a", "--subject", "b"},
			{"status"}, // no id
			{"status", "a", "b"},
			{"decrypt", "--ciphertext", "x", "--cacert", "/nonexistent.pem"},
			{"decrypt", "--ciphertext", "x", "--token-file", "/nonexistent.token"},
			{"decrypt", "--ciphertext", "x", "--addr", "ftp://host"},
		} {
			cli(t, "", []string{"SHREDD_TOKEN=" + s.token}, nil, args...).want(t, 2)
		}
		// No token anywhere.
		cli(t, "", []string{"SHREDD_URL=" + s.base}, nil, "status", "00000000000000000000000000000000").want(t, 2, "no token")
		if r := cli(t, "", nil, nil, "help"); r.code != 0 || !bytes.Contains(r.stdout, []byte("shredd encrypt")) {
			t.Fatalf("help: %d %s", r.code, r.stdout)
		}
	})

	t.Run("forget", func(t *testing.T) {
		var f forgetView
		r := run(t, nil, "forget", "--subject", "alice@example.com").want(t, 0)
		if err := json.Unmarshal(r.stdout, &f); err != nil || len(f.Forget) != 32 || f.State != "committed" || f.CommittedAt == nil || len(f.Conditions) == 0 {
			t.Fatalf("forget printed %s (%v)", r.stdout, err)
		}
		if bytes.Contains(r.stdout, []byte("alice")) {
			t.Fatalf("the token names the subject: %s", r.stdout)
		}
		var again forgetView
		r = run(t, nil, "forget", "--subject", "alice@example.com").want(t, 0)
		if err := json.Unmarshal(r.stdout, &again); err != nil || again.Forget != f.Forget {
			t.Fatalf("forget again: %s, want forget %s", r.stdout, f.Forget)
		}
		var st forgetView
		r = run(t, nil, "status", f.Forget).want(t, 0)
		if err := json.Unmarshal(r.stdout, &st); err != nil || st.Forget != f.Forget || st.State != "committed" {
			t.Fatalf("status printed %s (%v)", r.stdout, err)
		}

		// Erased data exits 3: the record, the derivative, a re-ingestion.
		r = run(t, []byte(rec.Ciphertext), "decrypt", "--context", "tenant=acme").want(t, 3, "410", "shredded")
		if len(r.stdout) != 0 || bytes.Contains(r.stderr, []byte("alice")) {
			t.Fatalf("decrypt of erased data wrote %q, stderr %q", r.stdout, r.stderr)
		}
		run(t, nil, "decrypt", "--ciphertext", sum.Ciphertext).want(t, 3, "shredded")
		run(t, []byte("back"), "encrypt", "--subject", "alice@example.com", "--kind", "episodic").want(t, 3, "shredded")
		// Bob's own record is untouched.
		if r := run(t, nil, "decrypt", "--ciphertext", bob.Ciphertext).want(t, 0); !bytes.Equal(r.stdout, binary) {
			t.Fatalf("Bob's record after Alice's forget: %x", r.stdout)
		}

		s.runEpoch(t)
		r = run(t, nil, "status", f.Forget).want(t, 0)
		if err := json.Unmarshal(r.stdout, &st); err != nil {
			t.Fatal(err)
		}
		checkShreddedView(t, st)
	})
}

// TestClientCLITLS: the client subcommands reach an HTTPS server whose CA
// --cacert names, and refuse it without.
func TestClientCLITLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, _ := writeSelfSigned(t, dir)
	s := startServer(t, dir, serverOpts{Args: []string{"--tls-cert", certPath, "--tls-key", keyPath}})
	base := "https://" + strings.TrimPrefix(s.base, "http://")
	env := []string{"SHREDD_URL=" + base, "SHREDD_TOKEN=" + s.token}
	r := cli(t, "", env, nil, "forget", "--cacert", certPath, "--subject", "alice@example.com").want(t, 0)
	var f forgetView
	if err := json.Unmarshal(r.stdout, &f); err != nil || f.State != "committed" {
		t.Fatalf("forget over TLS printed %s (%v)", r.stdout, err)
	}
	cli(t, "", append(env, "SHREDD_CACERT="+certPath), nil, "status", f.Forget).want(t, 0)
	cli(t, "", env, nil, "status", f.Forget).want(t, 1, "certificate")
}

// TestClientDecryptReleasesLease: shredd decrypt releases the lease its
// decrypt took once the plaintext is written, so a forget of the subject
// has no live lease to wait for; with --keep-lease the lease stays live,
// its id is on stderr, and releasing it by that id lets the forget go on.
func TestClientDecryptReleasesLease(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir, serverOpts{})
	s.putKinds(t, "episodic")
	flags := []string{"--addr", s.base, "--token-file", filepath.Join(dataDir, "admin.token")}
	run := func(t *testing.T, stdin []byte, cmd string, args ...string) cliRun {
		t.Helper()
		return cli(t, "", nil, stdin, append(append([]string{cmd}, flags...), args...)...)
	}
	quiesced := func(t *testing.T, forget string) condition {
		t.Helper()
		var f forgetView
		s.expect(t, http.StatusOK, http.MethodPost, "/v1/forgets/"+forget+"/verify", nil).into(t, &f)
		for _, c := range f.Verification {
			if c.Name == "workers_quiesced" {
				return c
			}
		}
		t.Fatalf("forget %s has no workers_quiesced condition: %+v", forget, f.Verification)
		return condition{}
	}
	// open seals a fresh record and decrypts it. A released lease is still
	// a read of the token until it expires: the encrypts (fresh data, in
	// the write unit) and the decrypts (checks, in the check unit) are
	// separate units of work, so the next subject's encrypt need not
	// declare the last one's decrypt.
	open := func(t *testing.T, subject string, args ...string) cliRun {
		t.Helper()
		var rec sealed
		r := run(t, []byte("about "+subject), "encrypt", "--unit", writeUnit, "--subject", subject, "--kind", "episodic").want(t, 0)
		if err := json.Unmarshal(r.stdout, &rec); err != nil {
			t.Fatalf("encrypt printed %q (%v)", r.stdout, err)
		}
		r = run(t, []byte(rec.Ciphertext), "decrypt", append([]string{"--unit", checkUnit}, args...)...).want(t, 0)
		if string(r.stdout) != "about "+subject {
			t.Fatalf("decrypt wrote %q", r.stdout)
		}
		return r
	}

	t.Run("released", func(t *testing.T) {
		if r := open(t, "alice@example.com"); len(r.stderr) != 0 {
			t.Fatalf("decrypt wrote on stderr: %s", r.stderr)
		}
		f := s.forget(t, "alice@example.com")
		if c := quiesced(t, f.Forget); c.Status != "ok" {
			t.Fatalf("after shredd decrypt, workers_quiesced is %s: %s", c.Status, c.Reason)
		}
	})

	t.Run("kept", func(t *testing.T) {
		r := open(t, "bob@example.com", "--keep-lease")
		m := regexp.MustCompile(`lease ([0-9a-f]{32}) kept until`).FindSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("decrypt --keep-lease does not name the lease on stderr: %q", r.stderr)
		}
		lease := string(m[1])
		f := s.forget(t, "bob@example.com")
		if c := quiesced(t, f.Forget); c.Status != "pending" || !strings.Contains(c.Reason, lease) {
			t.Fatalf("with the lease kept, workers_quiesced is %s: %s; want pending on lease %s", c.Status, c.Reason, lease)
		}
		s.expect(t, http.StatusOK, http.MethodPost, "/v1/leases/"+lease+"/release", nil)
		if c := quiesced(t, f.Forget); c.Status != "ok" {
			t.Fatalf("after the release, workers_quiesced is %s: %s", c.Status, c.Reason)
		}
	})
}
