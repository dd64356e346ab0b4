package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestCLIHelp: shredd -h, --help and help list every command and exit 0
// on stdout; every command (and the subcommands of token and backup)
// answers -h with its usage, exit 0, on stdout, and does nothing else (no
// data directory appears, no server is called); shredd help CMD is CMD -h;
// an unknown command is exit 2.
func TestCLIHelp(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		r := cli(t, dir, nil, nil, args...).want(t, 0)
		for _, c := range commands {
			if !regexp.MustCompile(`(?m)^  shredd ` + c.name + ` `).Match(r.stdout) {
				t.Fatalf("shredd %v does not list %s:\n%s", args, c.name, r.stdout)
			}
		}
		if len(r.stderr) != 0 {
			t.Fatalf("shredd %v wrote to stderr: %s", args, r.stderr)
		}
	}
	type helpCase struct {
		args  []string
		flags []string // flags its help must name
	}
	cases := []helpCase{
		{[]string{"serve"}, []string{"-data-dir", "-addr", "-cache-ttl", "-root"}},
		{[]string{"token"}, nil},
		{[]string{"token", "create"}, []string{"-scopes", "-holder"}},
		{[]string{"token", "list"}, []string{"-json"}},
		{[]string{"token", "revoke"}, []string{"-data-dir"}},
		{[]string{"encrypt"}, []string{"-kind", "-subject", "-field"}},
		{[]string{"decrypt"}, []string{"-ciphertext", "-keep-lease"}},
		{[]string{"forget"}, []string{"-subject", "-dry-run", "-yes", "-field"}},
		{[]string{"reinstate"}, []string{"-subject-file", "-subject", "-reason", "-field"}},
		{[]string{"status"}, []string{"-field"}},
		{[]string{"attestation"}, []string{"-out"}},
		{[]string{"export"}, []string{"-since"}},
		{[]string{"checkpoint"}, []string{"-out"}},
		{[]string{"keygen"}, []string{"-out"}},
		{[]string{"backup"}, []string{"-dir", "-out"}},
		{[]string{"backup", "list"}, []string{"-dir"}},
		{[]string{"restore"}, []string{"-data-dir"}},
		{[]string{"verify"}, []string{"-key", "-salt", "-witness", "-witnesses-required"}},
		{[]string{"witness"}, []string{"-key", "-log", "-state", "-listen"}},
		{[]string{"witness", "keygen"}, []string{"-name", "-key"}},
		{[]string{"ledger"}, nil},
		{[]string{"ledger", "check"}, nil},
		{[]string{"ledger", "repair"}, nil},
		{[]string{"wal"}, nil},
		{[]string{"wal", "check"}, nil},
		{[]string{"wal", "accept-loss"}, nil},
		{[]string{"reregister"}, []string{"-context", "-holder", "-addr"}},
		{[]string{"completion"}, nil},
		{[]string{"version"}, nil},
		{[]string{"help"}, nil},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.args[0]] = true
		for _, h := range []string{"-h", "--help"} {
			r := cli(t, dir, nil, nil, append(append([]string{}, c.args...), h)...).want(t, 0)
			if !bytes.HasPrefix(r.stdout, []byte("usage: shredd")) || len(r.stderr) != 0 {
				t.Fatalf("shredd %v %s: stdout %q, stderr %q", c.args, h, r.stdout, r.stderr)
			}
			for _, f := range c.flags {
				if !regexp.MustCompile(`(?m)^  ` + f + `\b`).Match(r.stdout) {
					t.Fatalf("shredd %v %s does not list %s:\n%s", c.args, h, f, r.stdout)
				}
			}
		}
		hr := cli(t, dir, nil, nil, append([]string{"help"}, c.args...)...).want(t, 0)
		hh := cli(t, dir, nil, nil, append(append([]string{}, c.args...), "-h")...)
		if !bytes.Equal(hr.stdout, hh.stdout) {
			t.Fatalf("shredd help %v differs from shredd %v -h", c.args, c.args)
		}
	}
	for _, c := range commands {
		if !covered[c.name] {
			t.Fatalf("command %s has no help case here", c.name)
		}
	}
	// Help wins: with -h anywhere, nothing runs (no server listens on the
	// address; a forget would fail with 1, a serve would create the
	// data directory and block).
	cli(t, dir, nil, nil, "forget", "--addr", "127.0.0.1:1", "--subject", "alice@example.com", "-h").want(t, 0)
	cli(t, dir, nil, nil, "--data-dir", filepath.Join(dir, "d"), "--help").want(t, 0)
	cli(t, dir, nil, nil, "serve", "--data-dir", filepath.Join(dir, "d"), "-h").want(t, 0)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("help runs left files in the working directory: %v", ents)
	}
	r := cli(t, dir, nil, nil, "frobnicate").want(t, 2, `unknown command "frobnicate"`, "commands:")
	if len(r.stdout) != 0 {
		t.Fatalf("an unknown command wrote to stdout: %s", r.stdout)
	}
	cli(t, dir, nil, nil, "help", "frobnicate").want(t, 2)
}

// TestCLIVersion builds the binary from this checkout with VCS stamping
// (the machine's go env may turn it off) and checks that shredd version,
// shredd --version and the build_info metric of the running server name
// the commit git reports, and the Go version.
func TestCLIVersion(t *testing.T) {
	gitHead := func() string {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatalf("git rev-parse HEAD: %v (the test needs git and a checkout: it checks the commit the binary reports)", err)
		}
		return strings.TrimSpace(string(out))
	}
	before := gitHead()
	bin := filepath.Join(t.TempDir(), "shredd")
	args := []string{"build", "-buildvcs=true", "-o", bin, "."}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	after := gitHead() // other commits may land during the build
	run := func(args ...string) string {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("shredd %v: %v", args, err)
		}
		return string(out)
	}
	v := run("version")
	if v != run("--version") {
		t.Fatalf("shredd version and shredd --version differ")
	}
	m := regexp.MustCompile(`^shredd (\S+)\ncommit: ([0-9a-f]{40})( \(modified\))?\ncommit time: \S+\ngo: (go\S+) \S+/\S+\n$`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("shredd version:\n%s", v)
	}
	if m[2] != before && m[2] != after {
		t.Fatalf("shredd version says commit %s; git says %s (or %s)", m[2], after, before)
	}
	// Go stamps a pseudo-version that names the commit.
	if !strings.Contains(m[1], m[2][:12]) {
		t.Fatalf("version %q does not name commit %s", m[1], m[2][:12])
	}
	goOut, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil || m[4] != strings.TrimSpace(string(goOut)) {
		t.Fatalf("shredd version says %s, go env GOVERSION %s (%v)", m[4], goOut, err)
	}

	// The metric of the server started from that binary says the same.
	dataDir := t.TempDir()
	srv := exec.Command(bin, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	logs := &logBuffer{}
	srv.Stderr = logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		addr = listeningAddr(logs.Bytes())
	}
	if addr == "" {
		t.Fatalf("the server did not listen:\n%s", logs.String())
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	modified := "false"
	if m[3] != "" {
		modified = "true"
	}
	want := `shredd_build_info{version="` + m[1] + `",commit="` + m[2] + `",modified="` + modified + `",goversion="` + m[4] + `"} 1`
	if !strings.Contains(string(body), want+"\n") {
		t.Fatalf("/metrics lacks %s:\n%s", want, body)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if !regexp.MustCompile(`(?m)^` + name + ` [0-9.e+]+$`).Match(body) {
			t.Fatalf("/metrics of the real server lacks %s", name)
		}
	}
}

// TestCLIPipes: the JSON of shredd encrypt feeds shredd decrypt as it is;
// --field prints one field (the ciphertext for decrypt, the forget's id and
// state); an unknown field is refused before anything is sealed.
func TestCLIPipes(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir, serverOpts{})
	s.putKinds(t, "episodic")
	env := []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=" + s.token}
	pt := []byte("Alice prefers green tea.")
	// The encrypts seal the test's own plaintext, not what a decrypt
	// wrote: they run in the write unit, the decrypts that check them in
	// the check unit (docs/api.md, "What a read costs a writer").
	write, check := []string{"--unit", writeUnit}, []string{"--unit", checkUnit}
	encrypt := func(args ...string) []string { return append(append([]string{"encrypt"}, write...), args...) }
	decrypt := append([]string{"decrypt"}, check...)

	js := cli(t, "", env, pt, encrypt("--subject", "alice@example.com", "--kind", "episodic")...).want(t, 0)
	r := cli(t, "", env, js.stdout, decrypt...).want(t, 0)
	if !bytes.Equal(r.stdout, pt) {
		t.Fatalf("encrypt | decrypt wrote %q", r.stdout)
	}
	ct := cli(t, "", env, pt, encrypt("--subject", "alice@example.com", "--kind", "episodic", "--field", "ciphertext")...).want(t, 0)
	if !regexp.MustCompile(`^shredd:v1:[A-Za-z0-9_-]+\n$`).Match(ct.stdout) {
		t.Fatalf("encrypt --field ciphertext printed %q", ct.stdout)
	}
	if r := cli(t, "", env, ct.stdout, decrypt...).want(t, 0); !bytes.Equal(r.stdout, pt) {
		t.Fatalf("encrypt --field ciphertext | decrypt wrote %q", r.stdout)
	}
	if r := cli(t, "", env, pt, encrypt("--subject", "alice@example.com", "--kind", "episodic", "--field", "lineage_size")...).want(t, 0); string(r.stdout) != "1\n" {
		t.Fatalf("--field lineage_size printed %q", r.stdout)
	}
	before := s.do(t, http.MethodGet, "/v1/log/checkpoint", nil).Body
	cli(t, "", env, pt, encrypt("--subject", "zed@example.com", "--kind", "episodic", "--field", "nope")...).
		want(t, 2, `--field "nope"`, "artifact, ciphertext, lineage_size")
	if after := s.do(t, http.MethodGet, "/v1/log/checkpoint", nil).Body; !bytes.Equal(before, after) {
		t.Fatal("an encrypt with a bad --field reached the server (the log grew)")
	}
	cli(t, "", env, []byte(`{"artifact":"x"}`), "decrypt").want(t, 2, "no ciphertext field")
	cli(t, "", env, []byte(`{"ciphertext":`), "decrypt").want(t, 2, "not JSON")

	// Standard input is not a terminal here: no prompt, the forget runs.
	id := cli(t, "", env, nil, "forget", "--subject", "alice@example.com", "--field", "forget").want(t, 0)
	fid := strings.TrimSpace(string(id.stdout))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(fid) {
		t.Fatalf("forget --field forget printed %q", id.stdout)
	}
	if r := cli(t, "", env, nil, "status", fid, "--field", "state").want(t, 0); string(r.stdout) != "committed\n" {
		t.Fatalf("status --field state printed %q", r.stdout)
	}
	cli(t, "", env, js.stdout, "decrypt").want(t, 3, "410")
}

// TestCLIReads: a decrypt of shredd decrypt is a read of its token until
// the lease expires, released or not (docs/api.md, "What a read costs a
// writer"). An encrypt that neither names it nor declares it independent
// exits 1 with 409 undeclared_derivation; --lease names it (the data gets
// its lineage, and a forget of its subject erases it), --independent-of
// and --independent declare it, and each write records how it closed the
// read.
func TestCLIReads(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir, serverOpts{})
	s.putKinds(t, "episodic", "summary")
	env := []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=" + s.token}
	sealedBy := func(r cliRun) sealed {
		t.Helper()
		var out sealed
		if err := json.Unmarshal(r.stdout, &out); err != nil || len(out.Artifact) != 32 {
			t.Fatalf("encrypt printed %q (%v)", r.stdout, err)
		}
		return out
	}
	readsOf := func(id string) []string {
		t.Helper()
		var a struct {
			Reads []struct {
				Lease, How string
			} `json:"reads"`
		}
		s.expect(t, http.StatusOK, http.MethodGet, "/v1/artifacts/"+id, nil).into(t, &a)
		var out []string
		for _, r := range a.Reads {
			out = append(out, r.Lease+" "+r.How)
		}
		return out
	}

	ct := cli(t, "", env, []byte("Alice prefers green tea."), "encrypt", "--subject", "alice@example.com", "--kind", "episodic", "--field", "ciphertext").want(t, 0).stdout
	r := cli(t, "", env, ct, "decrypt", "--keep-lease").want(t, 0)
	m := regexp.MustCompile(`lease ([0-9a-f]{32}) kept until`).FindSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("decrypt --keep-lease does not name the lease on stderr: %q", r.stderr)
	}
	lease := string(m[1])
	summary := []byte("Someone prefers tea.")

	// Undeclared: refused, nothing sealed.
	cli(t, "", env, summary, "encrypt", "--subject", "bob@example.com", "--kind", "summary").want(t, 1, "409", "undeclared_derivation")
	// Named: the summary is made from the read, in alice's lineage.
	named := sealedBy(cli(t, "", env, summary, "encrypt", "--lease", lease, "--kind", "summary").want(t, 0))
	if named.LineageSize != 1 {
		t.Fatalf("a summary made from a read of alice's record has a lineage of %d subjects, want 1", named.LineageSize)
	}
	if got := readsOf(named.Artifact); !slices.Equal(got, []string{lease + " named"}) {
		t.Fatalf("the encrypt with --lease recorded the reads %v, want %s named", got, lease)
	}
	// Declared independent, of that read or of every unnamed one.
	var bobs []sealed
	for _, decl := range [][]string{{"--independent-of", lease}, {"--independent"}} {
		args := append([]string{"encrypt", "--subject", "bob@example.com", "--kind", "episodic"}, decl...)
		bob := sealedBy(cli(t, "", env, []byte("Bob walks to work."), args...).want(t, 0))
		if got := readsOf(bob.Artifact); !slices.Equal(got, []string{lease + " independent"}) {
			t.Fatalf("the encrypt with %v recorded the reads %v, want %s independent", decl, got, lease)
		}
		bobs = append(bobs, bob)
	}

	// The forget of alice erases what was made from her record, and only that.
	s.forget(t, "alice@example.com")
	cli(t, "", env, nil, "decrypt", "--ciphertext", named.Ciphertext).want(t, 3, "410", "shredded")
	for _, bob := range bobs {
		if r := cli(t, "", env, nil, "decrypt", "--ciphertext", bob.Ciphertext).want(t, 0); string(r.stdout) != "Bob walks to work." {
			t.Fatalf("bob's record declared independent of the read of alice's: decrypt wrote %q", r.stdout)
		}
	}
}

// TestCLIForgetDryRunAndConfirm: --dry-run prints the preview and changes
// nothing; on a terminal (a real pseudo-terminal) a forget shows the
// preview's counts and asks; "no" forgets nothing, "yes" forgets, and
// --yes asks nothing.
func TestCLIForgetDryRunAndConfirm(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir, serverOpts{})
	s.putKinds(t, "episodic", "summary")
	env := []string{"SHREDD_URL=" + s.base, "SHREDD_TOKEN=" + s.token}
	rec := cli(t, "", env, []byte("Alice prefers green tea."), "encrypt", "--subject", "alice@example.com", "--kind", "episodic", "--field", "artifact").want(t, 0)
	recID := strings.TrimSpace(string(rec.stdout))
	cli(t, "", env, []byte("Alice and Bob drink tea."), "encrypt", "--subject", "bob@example.com", "--parent", recID, "--kind", "summary").want(t, 0)
	ct := cli(t, "", env, []byte("x"), "encrypt", "--subject", "alice@example.com", "--kind", "episodic", "--field", "ciphertext").want(t, 0).stdout

	r := cli(t, "", env, nil, "forget", "--subject", "alice@example.com", "--dry-run").want(t, 0)
	var p struct {
		DryRun bool `json:"dry_run"`
		Counts struct {
			Total, Direct, Derived, Collateral int
		} `json:"counts"`
	}
	if err := json.Unmarshal(r.stdout, &p); err != nil || !p.DryRun || p.Counts.Total != 3 || p.Counts.Direct != 2 || p.Counts.Derived != 1 || p.Counts.Collateral != 1 {
		t.Fatalf("forget --dry-run printed %s (%v)", r.stdout, err)
	}
	if r := cli(t, "", env, nil, "forget", "--subject", "alice@example.com", "--dry-run", "--field", "counts").want(t, 0); !bytes.HasPrefix(r.stdout, []byte(`{"total":3,`)) {
		t.Fatalf("--dry-run --field counts printed %q", r.stdout)
	}
	cli(t, "", env, nil, "forget", "--subject", "alice@example.com", "--dry-run", "--yes").want(t, 2)
	cli(t, "", env, ct, "decrypt").want(t, 0) // the dry run changed nothing

	// On a terminal: "no" keeps the subject.
	r = onTerminal(t, env, "no\n", "forget", "--subject", "alice@example.com")
	r.want(t, 1, "3 artifacts become unreadable", "2 direct, 1 derived, 1 shared with other subjects", "Type yes to confirm", "nothing was forgotten")
	if len(r.stdout) != 0 {
		t.Fatalf("an unconfirmed forget printed %s", r.stdout)
	}
	cli(t, "", env, ct, "decrypt").want(t, 0)
	// An empty answer (end of input) is no too.
	onTerminal(t, env, "\n", "forget", "--subject", "alice@example.com").want(t, 1, "nothing was forgotten")
	cli(t, "", env, ct, "decrypt").want(t, 0)

	r = onTerminal(t, env, "yes\n", "forget", "--subject", "alice@example.com", "--field", "state").want(t, 0, "Type yes to confirm")
	if string(r.stdout) != "committed\n" {
		t.Fatalf("a confirmed forget printed %q", r.stdout)
	}
	cli(t, "", env, ct, "decrypt").want(t, 3)

	// --yes: no question, even on a terminal.
	r = onTerminal(t, env, "", "forget", "--subject", "bob@example.com", "--yes", "--field", "state").want(t, 0)
	if bytes.Contains(r.stderr, []byte("confirm")) || string(r.stdout) != "committed\n" {
		t.Fatalf("forget --yes on a terminal: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// onTerminal runs the binary with a pseudo-terminal as its standard input,
// to which it writes input; stdout and stderr are captured apart.
func onTerminal(t *testing.T, env []string, input string, args ...string) cliRun {
	t.Helper()
	master, slave := openPTY(t)
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shreddBinary(t), args...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	// Keep the echo flowing: the terminal echoes the input back to the
	// master, which must be read or the writes block.
	go io.Copy(io.Discard, master)
	if input != "" {
		if _, err := master.Write([]byte(input)); err != nil {
			t.Fatal(err)
		}
	} else {
		master.Write([]byte{4}) // ^D: end of input for a terminal
	}
	err := cmd.Wait()
	r := cliRun{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// openPTY opens a pseudo-terminal pair (Linux: /dev/ptmx, unlocked, and its
// /dev/pts/N).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v (the test needs a pseudo-terminal)", err)
	}
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatalf("unlock the pty: %v", errno)
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("pty number: %v", errno)
	}
	slave, err = os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty's slave: %v", err)
	}
	if !isTerminal(slave) {
		t.Fatal("isTerminal says the pty's slave is not a terminal")
	}
	if f, err := os.Open(os.DevNull); err == nil {
		if isTerminal(f) {
			t.Fatal("isTerminal says /dev/null is a terminal")
		}
		f.Close()
	}
	return master, slave
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// TestCompletion: the bash and zsh scripts, run by the real shells against
// the real binary, complete subcommands, flags read from each command's
// own flag set, fixed flag values, and fall back to file names.
func TestCompletion(t *testing.T) {
	bin := shreddBinary(t)
	dir := t.TempDir()
	bashScript := filepath.Join(dir, "shredd.bash")
	zshScript := filepath.Join(dir, "_shredd")
	if err := os.WriteFile(bashScript, cli(t, dir, nil, nil, "completion", "bash").want(t, 0).stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zshScript, cli(t, dir, nil, nil, "completion", "zsh").want(t, 0).stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, dir, nil, nil, "completion", "fish").want(t, 2, "no completion")
	cli(t, dir, nil, nil, "completion").want(t, 2)

	cases := []struct {
		words []string // after "shredd"; the last is under the cursor
		want  []string // exactly these, in any order; nil: file names (the shell's default)
	}{
		{[]string{"enc"}, []string{"encrypt"}},
		{[]string{"ver"}, []string{"verify", "version"}},
		{[]string{"token", ""}, []string{"create", "list", "revoke"}},
		{[]string{"token", "create", "--sc"}, []string{"--scopes"}},
		{[]string{"token", "create", "--scopes", "a"}, []string{"audit", "admin"}},
		{[]string{"encrypt", "--k"}, []string{"--kind"}},
		{[]string{"forget", "--d"}, []string{"--dry-run"}},
		{[]string{"forget", "--subject", "x", "--y"}, []string{"--yes"}},
		{[]string{"serve", "--root", ""}, []string{"local", "vault"}},
		{[]string{"serve", "--root", "=", "v"}, []string{"vault"}}, // bash splits --root=v at the =
		{[]string{"--subject-keys=t"}, []string{"--subject-keys=tree", "--subject-keys=transit"}},
		{[]string{"completion", ""}, []string{"bash", "zsh"}},
		{[]string{"backup", "l"}, []string{"list"}},
		{[]string{"help", "ba"}, []string{"backup"}},
		{[]string{"verify", "att"}, nil},
	}
	if err := os.WriteFile(filepath.Join(dir, "attestation.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	quote := func(ws []string) string {
		var b strings.Builder
		for _, w := range ws {
			b.WriteString(" '" + w + "'")
		}
		return b.String()
	}
	check := func(shell string, got []byte, want []string) {
		t.Helper()
		lines := strings.Fields(string(got))
		if want == nil {
			want = []string{"FILES"}
		}
		if !slices.Equal(slices.Sorted(slices.Values(lines)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: got %q, want %q", shell, lines, want)
		}
	}
	for _, c := range cases {
		// bash: the function that complete -F calls, with the words bash
		// would set; -o default (file names) is bash's when it offers
		// nothing, which the stub stands for here.
		script := `source ` + bashScript + `
COMP_WORDS=('` + bin + `'` + quote(c.words) + `); COMP_CWORD=${#c}
_shredd
if [ ${#COMPREPLY[@]} -eq 0 ]; then echo FILES; else printf '%s\n' "${COMPREPLY[@]}"; fi`
		script = strings.Replace(script, "${#c}", itoa(uint32(len(c.words))), 1)
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		check("bash "+strings.Join(c.words, " "), out, c.want)

		// zsh: the completion function with zsh's words and CURRENT;
		// compadd and _files (zsh's completion system) print what they
		// are given.
		script = `compadd() { [[ $1 == -- ]] && shift; print -l -- "$@" }
_files() { print FILES }
compdef() { }
source ` + zshScript + `
words=('` + bin + `'` + quote(c.words) + `); CURRENT=` + itoa(uint32(len(c.words)+1)) + `
_shredd`
		out, err = exec.Command("zsh", "-f", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s (the test needs zsh: scripts/test.sh installs it)", err, out)
		}
		check("zsh "+strings.Join(c.words, " "), out, c.want)
	}
	// Every command's flags complete, from its own flag set.
	for _, c := range []struct{ cmd, flag string }{{"serve", "--vault-addr"}, {"restore", "--data-dir"}, {"export", "--since"}, {"keygen", "--out"}} {
		r := cli(t, dir, nil, nil, "__complete", c.cmd, "--").want(t, 0)
		if !bytes.Contains(r.stdout, []byte(c.flag+"\n")) || !bytes.Contains(r.stdout, []byte("--help\n")) {
			t.Errorf("__complete %s --: %s", c.cmd, r.stdout)
		}
	}
}
