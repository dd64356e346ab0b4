package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/internal/netaddr"
)

// Operations of `shredd-bench`.
const (
	opEncrypt    = "encrypt"
	opDecrypt    = "decrypt"
	opBatch      = "batch"
	opForget     = "forget"
	opMixed      = "mixed"
	opRaw        = "raw"         // POST /v1/encrypt/raw
	opRawDecrypt = "raw-decrypt" // POST /v1/decrypt/raw
	opVerify     = "verify"      // forget the heavy subject, then time POST /v1/forgets/{id}/verify
	// Client-side sealing through the Go client (POST /v1/datakey, then
	// AES-GCM on the client): one --payload item per call (Seal), --batch
	// items per call (SealMany), one --raw-payload item per call. Vault and
	// the no-op handler get their encrypt, batch and raw calls.
	opSeal      = "seal"
	opSealBatch = "seal-batch"
	opSealRaw   = "seal-raw"
)

var benchOps = []string{opEncrypt, opDecrypt, opBatch, opForget, opMixed, opRaw, opRawDecrypt, opVerify, opSeal, opSealBatch, opSealRaw}

// The units of work of the load (docs/api.md, "What a read costs a
// writer"). Every write of the benchmark (encrypt, batch, raw, the data
// keys of seal) seals random bytes, derived from nothing any of its
// decrypts read: its writes are one unit of work and its decrypts another,
// so a write never answers for a decrypt's read (of this run, of a run
// before it within the lease TTL, or of the mixed load's other clients).
// Not a unit per client: the JSON request bodies are built once and shared
// by the clients, and a unit per client would not change what a write
// answers for. A decrypt of the token outside any unit (say, by hand) is
// still seen by every unit, and the load's writes would then be refused.
const (
	benchWriteUnit = "shredd-bench:write"
	benchReadUnit  = "shredd-bench:read"
)

// Targets of `shredd-bench`.
const (
	targetShredd = "shredd"
	targetVault  = "vault"
	targetNoop   = "noop"
)

// benchConfig is a parsed `shredd-bench`.
type benchConfig struct {
	Ops        []string
	Clients    int
	Duration   time.Duration
	MaxOps     int64
	Payload    int
	RawPayload int
	Batch      int
	RawBatch   int
	Subjects   int
	URL        string   // --url as given
	URLs       []string // --url's nodes: clients spread round-robin over them
	Token      string
	ServeSelf  bool
	ShreddBin  string
	DataDir    string
	VaultBin   string
	VaultAddr  string
	VaultToken string
	Noop       bool
	JSON       bool
	RSSEvery   time.Duration
	Verifies   int
	ServeArgs  []string
}

func parseBench(args []string, stderr io.Writer, getenv func(string) string) (*benchConfig, error) {
	c := &benchConfig{}
	fl := flag.NewFlagSet("shredd-bench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	ops := fl.String("ops", "encrypt,decrypt,batch", "operations to run, comma-separated: "+strings.Join(benchOps, ", "))
	fl.IntVar(&c.Clients, "clients", 32, "concurrent keep-alive clients")
	fl.DurationVar(&c.Duration, "duration", 10*time.Second, "duration of each operation against each target")
	fl.Int64Var(&c.MaxOps, "max-ops", 10_000_000, "at most this many requests per operation and target")
	fl.IntVar(&c.Payload, "payload", 1024, "plaintext bytes of encrypt, decrypt, batch and mixed")
	fl.IntVar(&c.RawPayload, "raw-payload", 1<<20, "plaintext bytes of raw, raw-decrypt and seal-raw")
	fl.IntVar(&c.Batch, "batch", 100, "items per batch")
	fl.IntVar(&c.RawBatch, "raw-batch", 1, "records of --raw-payload bytes per seal-raw call: 1 seals with SealTo, more with SealManyTo")
	fl.IntVar(&c.Subjects, "subjects", 1000, "subjects: encrypt and decrypt use the lower half ("+benchSubject(0)+" ...), forget the upper half from the top")
	fl.StringVar(&c.URL, "url", "", "shredd to drive (default: start one, --serve-self); several nodes of one cluster, comma-separated: clients spread round-robin over them")
	tokenFile := fl.String("token-file", "", "file holding the bearer token for --url (needs admin, or encrypt, decrypt and forget scopes and the kinds registered)")
	fl.BoolVar(&c.ServeSelf, "serve-self", false, "start `shredd serve` (--shredd-bin) on 127.0.0.1 with --data-dir, or a temporary data directory")
	fl.StringVar(&c.ShreddBin, "shredd-bin", getenv("SHREDD_BIN"), "the shredd binary of --serve-self (SHREDD_BIN); default: build ./cmd/shredd with the go command into a temporary directory")
	fl.StringVar(&c.DataDir, "data-dir", "", "data directory of --serve-self (a filled one: shredd-bench fill); default a temporary one")
	fl.StringVar(&c.VaultBin, "vault-bin", getenv("SHREDD_VAULT_BIN"), "Vault binary: start `vault server -dev` on 127.0.0.1 and compare with Transit (SHREDD_VAULT_BIN)")
	fl.BoolVar(&c.Noop, "noop", true, "compare with a no-op HTTP handler (this binary, `shredd-bench noop-server`, on 127.0.0.1)")
	fl.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fl.DurationVar(&c.RSSEvery, "rss-every", 0, "sample the resident memory of the --serve-self server this often (0: once per operation)")
	fl.IntVar(&c.Verifies, "verifies", 3, "verify: calls of POST /v1/forgets/{id}/verify to time")
	fl.Func("serve-arg", "a flag for `shredd serve` of --serve-self (repeatable), e.g. --serve-arg=--debug-addr=127.0.0.1:6060", func(v string) error {
		c.ServeArgs = append(c.ServeArgs, v)
		return nil
	})
	err := fl.Parse(args)
	if err != nil {
		return nil, err
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "shredd-bench: unexpected argument %q\n", fl.Arg(0))
		return nil, errors.New("unexpected argument")
	}
	if c.Ops, err = parseOps(*ops, stderr); err != nil {
		return nil, err
	}
	if !c.inRange() {
		fmt.Fprintln(stderr, "shredd-bench: needs --ops, 1 <= --clients <= 1024, 0 < --duration <= 1h, --max-ops >= 1, --payload <= 1 MiB, --raw-payload <= 64 MiB, 1 <= --batch <= 1000, 1 <= --raw-batch <= 64, --subjects >= 2")
		return nil, errors.New("bad flag value")
	}
	if c.URL == "" {
		c.ServeSelf = true
	}
	if c.URL != "" {
		if err := c.parseURL(*tokenFile, stderr); err != nil {
			return nil, err
		}
	}
	if c.VaultBin == "" && getenv("VAULT_ADDR") != "" && getenv("VAULT_TOKEN") != "" {
		c.VaultAddr, c.VaultToken = getenv("VAULT_ADDR"), getenv("VAULT_TOKEN")
		if !isLoopbackURL(c.VaultAddr) {
			fmt.Fprintln(stderr, "shredd-bench: VAULT_ADDR must be on the loopback interface")
			return nil, errors.New("bad vault addr")
		}
	}
	return c, nil
}

// parseOps parses --ops: known operations, comma-separated, empty ones
// skipped.
func parseOps(ops string, stderr io.Writer) ([]string, error) {
	var out []string
	for _, op := range strings.Split(ops, ",") {
		if op = strings.TrimSpace(op); op == "" {
			continue
		}
		if !slices.Contains(benchOps, op) {
			fmt.Fprintf(stderr, "shredd-bench: unknown operation %q (want %s)\n", op, strings.Join(benchOps, ", "))
			return nil, errors.New("bad op")
		}
		out = append(out, op)
	}
	return out, nil
}

// inRange reports whether the numeric flags are within their bounds and
// there is an operation to run.
func (c *benchConfig) inRange() bool {
	return len(c.Ops) > 0 && c.Clients >= 1 && c.Clients <= 1024 && c.Duration > 0 && c.Duration <= time.Hour && c.MaxOps >= 1 &&
		c.Payload >= 0 && c.Payload <= 1<<20 && c.RawPayload >= 0 && c.RawPayload <= 64<<20 && c.Batch >= 1 && c.Batch <= 1000 &&
		c.RawBatch >= 1 && c.RawBatch <= 64 && c.Subjects >= 2
}

// parseURL checks --url (loopback addresses, 1 to 64 of them, not with
// --serve-self) and reads the token of --token-file.
func (c *benchConfig) parseURL(tokenFile string, stderr io.Writer) error {
	if c.ServeSelf {
		fmt.Fprintln(stderr, "shredd-bench: --url and --serve-self exclude each other")
		return errors.New("bad flags")
	}
	for _, u := range strings.Split(c.URL, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u == "" {
			continue
		}
		if !isLoopbackURL(u) {
			fmt.Fprintln(stderr, "shredd-bench: --url must be on the loopback interface: the tool sends load")
			return errors.New("bad url")
		}
		c.URLs = append(c.URLs, u)
	}
	if len(c.URLs) == 0 || len(c.URLs) > 64 {
		fmt.Fprintln(stderr, "shredd-bench: --url needs 1 to 64 addresses")
		return errors.New("bad url")
	}
	if tokenFile == "" {
		fmt.Fprintln(stderr, "shredd-bench: --url needs --token-file")
		return errors.New("no token")
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "shredd-bench:", err)
		return err
	}
	c.Token = strings.TrimSpace(string(b))
	return nil
}

func isLoopbackURL(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
	host, _, _ := strings.Cut(s, "/")
	if !strings.Contains(host, ":") {
		host += ":80"
	}
	return netaddr.IsLoopback(host)
}

// Main runs `shredd-bench`, `shredd-bench fill` or `shredd-bench
// noop-server` and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 {
		switch args[0] {
		case "fill":
			return fillCmd(ctx, args[1:], stdout, stderr, getenv)
		case "noop-server":
			return noopCmd(ctx, args[1:], stdout, stderr)
		}
	}
	c, err := parseBench(args, stderr, getenv)
	if err != nil {
		return 2
	}
	rep, err := c.run(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "shredd-bench:", err)
		return 1
	}
	if c.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(stdout)
	}
	return 0
}

// benchReport is what `shredd-bench` prints (--json: this, as JSON).
type benchReport struct {
	Machine machineInfo   `json:"machine"`
	Config  reportConfig  `json:"config"`
	Results []benchResult `json:"results"`
	AEAD    *aeadResult   `json:"aead,omitempty"`
	// AEADSpread is the same seal into seal-raw's set of output buffers
	// (--clients × --raw-batch records in flight, spread over the
	// workers), when seal-raw runs: what AES-GCM itself does once its
	// output leaves the core's cache. Shown beside the ratio, not in it.
	AEADSpread *aeadResult  `json:"aead_spread,omitempty"`
	Fsync      *fsyncResult `json:"fsync,omitempty"`
	Ratios     []benchRatio `json:"ratios"`
	RSS        []rssSample  `json:"rss_samples,omitempty"`
}

type machineInfo struct {
	NumCPU    int    `json:"nproc"`
	CPU       string `json:"cpu"`
	GoVersion string `json:"go"`
	OS        string `json:"os"`
}

type reportConfig struct {
	Ops        []string `json:"ops"`
	Clients    int      `json:"clients"`
	DurationS  float64  `json:"duration_s"`
	Payload    int      `json:"payload"`
	RawPayload int      `json:"raw_payload"`
	Batch      int      `json:"batch"`
	RawBatch   int      `json:"raw_batch"`
	Subjects   int      `json:"subjects"`
	ServeSelf  bool     `json:"serve_self"`
	Nodes      int      `json:"nodes"` // shredd nodes driven (--url's addresses)
	DataDir    string   `json:"data_dir,omitempty"`
}

// benchResult is one operation against one target.
type benchResult struct {
	Target    string  `json:"target"`
	Op        string  `json:"op"`
	Clients   int     `json:"clients"`
	Payload   int     `json:"payload"`
	Batch     int     `json:"batch,omitempty"`
	DurationS float64 `json:"duration_s"`
	Requests  int64   `json:"requests"`
	Items     int64   `json:"items"`
	Errors    int64   `json:"errors"`
	ErrorKind string  `json:"first_error,omitempty"` // status and problem code of the first error, never a subject
	OpsPerS   float64 `json:"ops_per_s"`             // requests per second
	ItemsPerS float64 `json:"items_per_s"`           // items per second (requests, or batch items)
	MBPerS    float64 `json:"mb_per_s"`              // plaintext MB (10^6 bytes) per second
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	P999ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
	// NodeRequests counts the answered requests per shredd node, in --url's
	// order, when there are several.
	NodeRequests []int64 `json:"node_requests,omitempty"`
}

// aeadResult is the raw AES-256-GCM throughput of this machine, sealing
// --raw-payload bytes on every core.
type aeadResult struct {
	Payload int `json:"payload"`
	Workers int `json:"workers"`
	// Buffers is the number of output buffers each worker seals into in
	// turn (1: the same one, which stays in the core's cache).
	Buffers int     `json:"buffers"`
	MBPerS  float64 `json:"mb_per_s"`
}

// fsyncResult is the latency of making an append durable on the file
// system of the data directory (a 4 KiB write and an fsync), and the
// requests per second it allows when every request needs its own durable
// commit and groups are at most the number of clients large: the ceiling of
// a single encrypt or decrypt at that concurrency, whatever the CPU.
type fsyncResult struct {
	Dir         string  `json:"dir"`
	Samples     int     `json:"samples"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	CeilingPerS float64 `json:"ceiling_per_s"` // clients / p50
}

// fsyncBaseline measures fsync latency in dir for d.
func fsyncBaseline(dir string, d time.Duration, clients int) (*fsyncResult, error) {
	f, err := os.CreateTemp(dir, "shredd-bench-fsync-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	var lat []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end) && len(lat) < 10_000; {
		t0 := time.Now()
		if _, err := f.Write(page); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	ms := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	r := &fsyncResult{Dir: dir, Samples: len(lat), P50ms: ms(0.5), P99ms: ms(0.99)}
	if r.P50ms > 0 {
		r.CeilingPerS = float64(clients) / (r.P50ms / 1000)
	}
	return r, nil
}

// benchRatio compares shredd with a baseline on one operation.
type benchRatio struct {
	Op       string  `json:"op"`
	Baseline string  `json:"baseline"` // vault, noop or aead
	Ratio    float64 `json:"ratio"`    // shredd items/s (MB/s against aead) over the baseline's
}

type rssSample struct {
	At     float64 `json:"at_s"`
	Op     string  `json:"op"`
	RSSMiB float64 `json:"rss_mib"`
}

func machine() machineInfo {
	m := machineInfo{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// benchTarget is a server the tool drives.
type benchTarget struct {
	name    string
	dataDir string // --serve-self
	url     string // the server, or the first of nodes
	token   string // bearer token (shredd, noop) or X-Vault-Token (vault)
	// nodes are the servers load spreads its clients over, each with a
	// keep-alive client of its own (shredd); none: url with the shared one.
	nodes []benchNode
	proc  *exec.Cmd
	done  chan struct{}
}

// benchNode is one node of a target and its keep-alive HTTP client.
type benchNode struct {
	url string
	hc  *http.Client
}

// newHTTPClient is a keep-alive client for clients concurrent requests.
func newHTTPClient(clients int) *http.Client {
	tr := &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients, IdleConnTimeout: time.Minute,
		DisableCompression: true, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

func (t *benchTarget) stop() {
	if t == nil || t.proc == nil {
		return
	}
	_ = t.proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-t.done:
	case <-time.After(15 * time.Second):
		_ = t.proc.Process.Kill()
		<-t.done
	}
}

// start runs cmd, reads its output line by line until ready returns an
// address, and keeps draining it afterwards.
func startProc(ctx context.Context, name string, cmd *exec.Cmd, fromStderr bool, ready func(line string) string) (*benchTarget, error) {
	var r io.ReadCloser
	var err error
	if fromStderr {
		cmd.Stdout = io.Discard
		r, err = cmd.StderrPipe()
	} else {
		cmd.Stderr = io.Discard
		r, err = cmd.StdoutPipe()
	}
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	t := &benchTarget{name: name, proc: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	var tail []string
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			if !found {
				if a := ready(sc.Text()); a != "" {
					found = true
					addr <- a
				} else if len(tail) < 20 {
					tail = append(tail, sc.Text())
				}
			}
		}
		_, _ = io.Copy(io.Discard, r)
		close(addr)
	}()
	go func() { _ = cmd.Wait(); close(t.done) }()
	select {
	case a, ok := <-addr:
		if !ok {
			<-t.done
			return nil, fmt.Errorf("%s exited before it listened: %s", name, strings.Join(tail, " | "))
		}
		t.url = "http://" + a
		return t, nil
	case <-time.After(60 * time.Second):
		t.stop()
		return nil, fmt.Errorf("%s did not listen within 60s", name)
	case <-ctx.Done():
		t.stop()
		return nil, ctx.Err()
	}
}

// startShredd starts `shredd serve` (bin) on 127.0.0.1.
func startShredd(ctx context.Context, bin, dataDir string, extra []string) (*benchTarget, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0"}, extra...)...)
	cmd.Env = cleanEnv()
	t, err := startProc(ctx, targetShredd, cmd, true, func(line string) string {
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
			return l.Addr
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dataDir, node.TokenFile))
	if err != nil {
		t.stop()
		return nil, err
	}
	t.token = strings.TrimSpace(string(b))
	t.dataDir = dataDir
	return t, nil
}

// buildShredd builds the server, github.com/shredd/shredd/cmd/shredd, into
// dir with the go command (run from within the module, as `go run
// ./cmd/shredd-bench` is) and returns the binary's path.
func buildShredd(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "shredd")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/shredd/shredd/cmd/shredd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build shredd (or give --shredd-bin): %w\n%s", err, out)
	}
	return bin, nil
}

// cleanEnv is the environment of the servers the tool starts: its own,
// without SHREDD_ settings that would change the server under test.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			out = append(out, kv)
		}
	}
	return out
}

// startNoop starts `shredd-bench noop-server` (this binary) on 127.0.0.1.
func startNoop(ctx context.Context) (*benchTarget, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "noop-server", "--addr", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	return startProc(ctx, targetNoop, cmd, false, func(line string) string {
		a, _ := strings.CutPrefix(line, "listening ")
		if a == line {
			return ""
		}
		return a
	})
}

// startVault starts `vault server -dev` on 127.0.0.1 with a random root
// token, mounts Transit and creates the key "bench".
func startVault(ctx context.Context, bin string) (*benchTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	token := "bench-" + hex.EncodeToString(randomBytes(12))
	cmd := exec.Command(bin, "server", "-dev", "-dev-root-token-id="+token, "-dev-listen-address="+addr, "-log-level=error")
	cmd.Env = append(cleanEnv(), "VAULT_DISABLE_MLOCK=true", "HOME="+os.TempDir())
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start vault: %w", err)
	}
	t := &benchTarget{name: targetVault, url: "http://" + addr, token: token, proc: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(t.done) }()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(t.url + "/v1/sys/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-t.done:
			return nil, errors.New("vault exited at start-up")
		case <-ctx.Done():
			t.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.stop()
			return nil, errors.New("vault did not answer within 60s")
		}
	}
	for _, step := range []struct{ path, body string }{
		{"/v1/sys/mounts/transit", `{"type":"transit"}`},
		{"/v1/transit/keys/bench", `{"type":"aes256-gcm96"}`},
	} {
		if _, err := t.post(ctx, hc, step.path, []byte(step.body), nil); err != nil {
			t.stop()
			return nil, fmt.Errorf("vault setup %s: %w", step.path, err)
		}
	}
	return t, nil
}

// noopCmd runs `shredd-bench noop-server`: an HTTP server on 127.0.0.1 that
// reads each request's body and answers a small JSON, the floor of what
// any HTTP service on this machine can do. It prints "listening ADDR".
func noopCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shredd-bench noop-server", flag.ContinueOnError)
	fl.SetOutput(stderr)
	addr := fl.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if !netaddr.IsLoopback(*addr) {
		fmt.Fprintln(stderr, "shredd-bench noop-server: --addr must be a loopback address")
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "shredd-bench noop-server:", err)
		return 1
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
	}
	fmt.Fprintln(stdout, "listening", ln.Addr().String())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "shredd-bench noop-server:", err)
		return 1
	}
	return 0
}

// post sends one request and returns the body of a 2xx answer.
func (t *benchTarget) post(ctx context.Context, hc *http.Client, path string, body []byte, hdr map[string]string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	t.auth(req)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s", path, resp.Status, problemCode(b))
	}
	return b, nil
}

func (t *benchTarget) auth(req *http.Request) {
	if t.name == targetVault {
		req.Header.Set("X-Vault-Token", t.token)
	} else if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
}

// problemCode returns the stable code of a problem body (or Vault's first
// error), never anything else of it.
func problemCode(b []byte) string {
	var p struct {
		Code   string   `json:"code"`
		Errors []string `json:"errors"`
	}
	_ = json.Unmarshal(b, &p)
	if p.Code != "" {
		return p.Code
	}
	if len(p.Errors) > 0 && len(p.Errors[0]) < 200 {
		return p.Errors[0]
	}
	return "no problem code"
}

// call is one prepared request of a workload.
type call struct {
	path  string
	body  []byte
	hdr   [][2]string
	ctype string
	items int // batch items
	bytes int // plaintext bytes
	want  int // expected status
	// seal, when set, replaces the HTTP call: it runs the Go client's
	// client-side sealing and returns the items that failed.
	seal func(ctx context.Context, gc *client.Client) (failed int, err error)
}

// workload makes the calls of one operation against one target; next is
// called concurrently.
type workload struct {
	next func(rng *mrand.Rand) call
}

// run runs the benchmark: it starts the servers, prepares data, and runs
// each operation against each target in turn.
func (c *benchConfig) run(ctx context.Context, stderr io.Writer) (*benchReport, error) {
	rep := &benchReport{Machine: machine(), Ratios: []benchRatio{},
		Config: reportConfig{Ops: c.Ops, Clients: c.Clients, DurationS: c.Duration.Seconds(), Payload: c.Payload, RawPayload: c.RawPayload,
			Batch: c.Batch, RawBatch: c.RawBatch, Subjects: c.Subjects, ServeSelf: c.ServeSelf, Nodes: max(1, len(c.URLs)), DataDir: c.DataDir}}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "shredd-bench: "+format+"\n", a...) }
	var undo cleanups
	defer undo.run()

	sh, err := c.shreddTarget(ctx, logf, &undo)
	if err != nil {
		return nil, err
	}
	vt, err := c.vaultTarget(ctx, logf, &undo)
	if err != nil {
		return nil, err
	}
	var nt *benchTarget
	if c.Noop {
		if nt, err = startNoop(ctx); err != nil {
			return nil, err
		}
		undo.add(nt.stop)
	}

	hc := newHTTPClient(c.Clients)
	undo.add(hc.CloseIdleConnections)

	d, err := prepare(ctx, c, hc, sh, vt)
	if err != nil {
		return nil, err
	}
	if c.ServeSelf {
		if rep.Fsync, err = fsyncBaseline(sh.dataDir, 2*time.Second, c.Clients); err != nil {
			return nil, err
		}
		logf("fsync: p50 %.2f ms, p99 %.2f ms: at most %.0f durable commits of one request per client per second",
			rep.Fsync.P50ms, rep.Fsync.P99ms, rep.Fsync.CeilingPerS)
	}
	rss := &rssSampler{target: sh, start: time.Now()}
	rss.sample("start")
	for _, op := range c.Ops {
		if op == opVerify {
			r, err := c.verify(ctx, hc, sh)
			if err != nil {
				return nil, err
			}
			rep.Results = append(rep.Results, r)
			continue
		}
		if (op == opRaw || op == opRawDecrypt || op == opSealRaw) && rep.AEAD == nil {
			a := aeadBaseline(c.RawPayload, min(c.Duration, 3*time.Second), 1)
			rep.AEAD = &a
			logf("aead: AES-256-GCM seal of %d bytes on %d cores: %.0f MB/s", a.Payload, a.Workers, a.MBPerS)
		}
		if op == opSealRaw && rep.AEADSpread == nil {
			n := max(1, c.Clients*c.RawBatch/runtime.GOMAXPROCS(0))
			a := aeadBaseline(c.RawPayload, min(c.Duration, 3*time.Second), n)
			rep.AEADSpread = &a
			logf("aead: the same into %d output buffers a core in turn: %.0f MB/s", a.Buffers, a.MBPerS)
		}
		for _, t := range []*benchTarget{sh, vt, nt} {
			if t == nil {
				continue
			}
			w := d.workload(c, t.name, op)
			if w == nil {
				continue
			}
			r := c.measure(ctx, hc, t, op, w, rss)
			logf("%-7s %-11s %9.0f items/s %8.1f MB/s  p50 %7.2f ms  p99 %7.2f ms  p999 %7.2f ms  errors %d %s",
				r.Target, r.Op, r.ItemsPerS, r.MBPerS, r.P50ms, r.P99ms, r.P999ms, r.Errors, r.ErrorKind)
			rep.Results = append(rep.Results, r)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	rep.RSS = rss.samples
	rep.ratios()
	return rep, nil
}

// cleanups are what run undoes as it returns, the last added first, as
// its defers would.
type cleanups []func()

func (cs *cleanups) add(f func()) { *cs = append(*cs, f) }

func (cs *cleanups) run() {
	for i := len(*cs) - 1; i >= 0; i-- {
		(*cs)[i]()
	}
}

// shreddTarget returns the shredd to drive: one started (--serve-self) or
// --url's, with one keep-alive client per node.
func (c *benchConfig) shreddTarget(ctx context.Context, logf func(string, ...any), undo *cleanups) (*benchTarget, error) {
	var sh *benchTarget
	if c.ServeSelf {
		var err error
		if sh, err = c.serveSelf(ctx, logf, undo); err != nil {
			return nil, err
		}
	} else {
		sh = &benchTarget{name: targetShredd, url: c.URLs[0], token: c.Token}
	}
	// One keep-alive client per shredd node.
	urls := c.URLs
	if len(urls) == 0 {
		urls = []string{sh.url}
	}
	for _, u := range urls {
		nc := newHTTPClient(c.Clients)
		undo.add(nc.CloseIdleConnections)
		sh.nodes = append(sh.nodes, benchNode{url: u, hc: nc})
	}
	return sh, nil
}

// serveSelf starts `shredd serve` on --data-dir (default a temporary
// directory) with --shredd-bin (default one built into a temporary
// directory).
func (c *benchConfig) serveSelf(ctx context.Context, logf func(string, ...any), undo *cleanups) (*benchTarget, error) {
	dir := c.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "shredd-bench-")
		if err != nil {
			return nil, err
		}
		undo.add(func() { os.RemoveAll(tmp) })
		dir = tmp
	}
	bin := c.ShreddBin
	if bin == "" {
		tmp, err := os.MkdirTemp("", "shredd-bench-bin-")
		if err != nil {
			return nil, err
		}
		undo.add(func() { os.RemoveAll(tmp) })
		if bin, err = buildShredd(ctx, tmp); err != nil {
			return nil, err
		}
		logf("built %s", bin)
	}
	sh, err := startShredd(ctx, bin, dir, c.ServeArgs)
	if err != nil {
		return nil, err
	}
	undo.add(sh.stop)
	logf("shredd serving %s at %s", dir, sh.url)
	return sh, nil
}

// vaultTarget returns the Vault to compare with: a dev server started
// (--vault-bin), or VAULT_ADDR's, or nil for none.
func (c *benchConfig) vaultTarget(ctx context.Context, logf func(string, ...any), undo *cleanups) (*benchTarget, error) {
	switch {
	case c.VaultBin != "":
		vt, err := startVault(ctx, c.VaultBin)
		if err != nil {
			return nil, err
		}
		undo.add(vt.stop)
		logf("vault dev server at %s", vt.url)
		return vt, nil
	case c.VaultAddr != "":
		vt := &benchTarget{name: targetVault, url: strings.TrimRight(c.VaultAddr, "/"), token: c.VaultToken}
		hc := &http.Client{Timeout: 10 * time.Second}
		// Mount Transit and create the key when they are missing; errors
		// (already mounted, existing key) are fine.
		_, _ = vt.post(ctx, hc, "/v1/sys/mounts/transit", []byte(`{"type":"transit"}`), nil)
		_, _ = vt.post(ctx, hc, "/v1/transit/keys/bench", []byte(`{"type":"aes256-gcm96"}`), nil)
		return vt, nil
	}
	return nil, nil
}

// rssSampler samples the resident memory of a started shredd (target).
type rssSampler struct {
	target  *benchTarget
	start   time.Time
	samples []rssSample
}

// sample records the resident memory now, during op; nothing when the
// target was not started here.
func (s *rssSampler) sample(op string) {
	if s.target.proc == nil {
		return
	}
	if mib, ok := procRSS(s.target.proc.Process.Pid); ok {
		s.samples = append(s.samples, rssSample{At: time.Since(s.start).Seconds(), Op: op, RSSMiB: mib})
	}
}

// measure runs the load of op against t (load), sampling shredd's
// resident memory every --rss-every meanwhile and once at its end.
func (c *benchConfig) measure(ctx context.Context, hc *http.Client, t *benchTarget, op string, w *workload, rss *rssSampler) benchResult {
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		if c.RSSEvery <= 0 || t != rss.target {
			return
		}
		tk := time.NewTicker(c.RSSEvery)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				rss.sample(op)
			case <-stopRSS:
				return
			}
		}
	}()
	r := c.load(ctx, hc, t, op, w)
	close(stopRSS)
	<-rssDone
	if t == rss.target {
		rss.sample(op)
	}
	return r
}

// ratios compares shredd with every baseline measured on the same
// operation.
func (rep *benchReport) ratios() {
	for _, r := range rep.Results {
		if r.Target != targetShredd || r.ItemsPerS == 0 {
			continue
		}
		for _, b := range rep.Results {
			if b.Op == r.Op && b.Target != targetShredd && b.ItemsPerS > 0 {
				rep.Ratios = append(rep.Ratios, benchRatio{Op: r.Op, Baseline: b.Target, Ratio: r.ItemsPerS / b.ItemsPerS})
			}
		}
		if (r.Op == opRaw || r.Op == opRawDecrypt || r.Op == opSealRaw) && rep.AEAD != nil && rep.AEAD.MBPerS > 0 {
			rep.Ratios = append(rep.Ratios, benchRatio{Op: r.Op, Baseline: "aead", Ratio: r.MBPerS / rep.AEAD.MBPerS})
		}
	}
}

func (rep *benchReport) print(w io.Writer) {
	fmt.Fprintf(w, "machine: %d cores, %s, %s\n", rep.Machine.NumCPU, rep.Machine.CPU, rep.Machine.GoVersion)
	fmt.Fprintf(w, "clients %d, payload %d B (raw %d B), batch %d, subjects %d, shredd nodes %d\n\n", rep.Config.Clients, rep.Config.Payload,
		rep.Config.RawPayload, rep.Config.Batch, rep.Config.Subjects, rep.Config.Nodes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\top\trequests\titems\terrors\treq/s\titems/s\tMB/s\tp50 ms\tp99 ms\tp999 ms\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%.0f\t%.1f\t%.2f\t%.2f\t%.2f\t\n", r.Target, r.Op, r.Requests, r.Items, r.Errors,
			r.OpsPerS, r.ItemsPerS, r.MBPerS, r.P50ms, r.P99ms, r.P999ms)
	}
	tw.Flush()
	if rep.Fsync != nil {
		fmt.Fprintf(w, "\nfsync in the data dir: p50 %.2f ms, p99 %.2f ms: at most %.0f durable one-request commits per second at %d clients\n",
			rep.Fsync.P50ms, rep.Fsync.P99ms, rep.Fsync.CeilingPerS, rep.Config.Clients)
	}
	if rep.AEAD != nil {
		fmt.Fprintf(w, "\naead: AES-256-GCM, %d B per seal, %d workers: %.0f MB/s\n", rep.AEAD.Payload, rep.AEAD.Workers, rep.AEAD.MBPerS)
	}
	if a := rep.AEADSpread; a != nil {
		fmt.Fprintf(w, "aead: the same into %d output buffers per worker in turn (seal-raw's records in flight): %.0f MB/s\n", a.Buffers, a.MBPerS)
		for _, r := range rep.Results {
			if r.Op == opSealRaw && r.Target == targetShredd && a.MBPerS > 0 {
				fmt.Fprintf(w, "  seal-raw against it: %.2f (not a ratio of the report)\n", r.MBPerS/a.MBPerS)
			}
		}
	}
	if len(rep.Ratios) > 0 {
		fmt.Fprintln(w, "\nratios (shredd / baseline; items/s, MB/s against aead):")
		for _, r := range rep.Ratios {
			fmt.Fprintf(w, "  %-11s shredd/%-5s %6.2f\n", r.Op, r.Baseline, r.Ratio)
		}
	}
	for _, s := range rep.RSS {
		fmt.Fprintf(w, "rss %7.1fs %-11s %8.1f MiB\n", s.At, s.Op, s.RSSMiB)
	}
}

// procRSS returns the resident memory of a process in MiB.
func procRSS(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err == nil
			}
		}
	}
	return 0, false
}

// aeadBaseline measures AES-256-GCM sealing payload bytes on every core
// for d: the ceiling of any service that encrypts large payloads here.
func aeadBaseline(payload int, d time.Duration, buffers int) aeadResult {
	workers := runtime.GOMAXPROCS(0)
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := randomBytes(32)
			blk, _ := aes.NewCipher(key)
			g, _ := cipher.NewGCM(blk)
			pt := randomBytes(payload)
			outs := make([][]byte, buffers)
			for i := range outs {
				outs[i] = make([]byte, 0, payload+g.Overhead())
			}
			nonce := make([]byte, g.NonceSize())
			for i := 0; time.Now().Before(deadline); i++ {
				nonce[0]++ // a benchmark: the output is discarded
				out := outs[i%buffers]
				outs[i%buffers] = g.Seal(out[:0], nonce, pt, nil)
				total.Add(int64(payload))
			}
		}()
	}
	wg.Wait()
	return aeadResult{Payload: payload, Workers: workers, Buffers: buffers, MBPerS: float64(total.Load()) / d.Seconds() / 1e6}
}

// benchData is what the workloads need from the preparation: a pool of
// plaintexts and ciphertexts per target.
type benchData struct {
	pt         []byte // Payload bytes
	rawPT      []byte // RawPayload bytes
	pool       []int  // subject indexes of the encrypt pool
	shreddCT   []string
	vaultCT    []string
	rawEnv     []byte
	forgetNext atomic.Int64 // next forget counts down from Subjects-1
	forgetFrom int
}

// poolSize bounds the distinct subjects and ciphertexts the workloads
// cycle through (their request bodies are built once).
const poolSize = 1024

// prepare registers the kinds, creates the keys of the encrypt pool and
// seals the ciphertexts that decrypts open, on shredd and Vault.
func prepare(ctx context.Context, c *benchConfig, hc *http.Client, sh, vt *benchTarget) (*benchData, error) {
	d := &benchData{pt: randomBytes(c.Payload), rawPT: randomBytes(c.RawPayload)}
	half := c.Subjects / 2
	d.forgetFrom = c.Subjects - 1
	d.forgetNext.Store(int64(d.forgetFrom))
	rng := mrand.New(mrand.NewPCG(1, 2))
	for range min(poolSize, half) {
		d.pool = append(d.pool, rng.IntN(half))
	}
	for _, k := range benchKinds {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, sh.url+"/v1/kinds/"+k, nil)
		sh.auth(req)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("register kind: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusForbidden {
			return nil, fmt.Errorf("register kind %s: %s", k, resp.Status)
		}
	}
	b64 := base64.StdEncoding.EncodeToString(d.pt)
	for i := 0; i < len(d.pool); i += 100 {
		var items []map[string]string
		for _, s := range d.pool[i:min(i+100, len(d.pool))] {
			items = append(items, map[string]string{"subject": benchSubject(s), "kind": "episodic", "plaintext": b64, "unit": benchWriteUnit})
		}
		body, _ := json.Marshal(map[string]any{"batch_input": items})
		b, err := sh.post(ctx, hc, "/v1/encrypt", body, nil)
		if err != nil {
			return nil, fmt.Errorf("prepare shredd: %w", err)
		}
		var out struct {
			Results []struct {
				Ciphertext string `json:"ciphertext"`
				Error      *struct {
					Code string `json:"code"`
				} `json:"error"`
			} `json:"batch_results"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("prepare shredd: %w", err)
		}
		for _, r := range out.Results {
			if r.Error != nil {
				return nil, fmt.Errorf("prepare shredd: an item failed: %s", r.Error.Code)
			}
			d.shreddCT = append(d.shreddCT, r.Ciphertext)
		}
	}
	if slices.Contains(c.Ops, opRawDecrypt) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sh.url+"/v1/encrypt/raw", bytes.NewReader(d.rawPT))
		sh.auth(req)
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Shredd-Kind", "episodic")
		req.Header.Set("Shredd-Subject", benchSubject(d.pool[0]))
		req.Header.Set("Shredd-Unit", benchWriteUnit)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("prepare raw: %w", err)
		}
		d.rawEnv, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return nil, fmt.Errorf("prepare raw: %s %v", resp.Status, err)
		}
	}
	if vt != nil {
		for i := 0; i < poolSize; i += 100 {
			var items []map[string]string
			for range min(100, poolSize-i) {
				items = append(items, map[string]string{"plaintext": b64})
			}
			body, _ := json.Marshal(map[string]any{"batch_input": items})
			b, err := vt.post(ctx, hc, "/v1/transit/encrypt/bench", body, nil)
			if err != nil {
				return nil, fmt.Errorf("prepare vault: %w", err)
			}
			var out struct {
				Data struct {
					Results []struct {
						Ciphertext string `json:"ciphertext"`
					} `json:"batch_results"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				return nil, fmt.Errorf("prepare vault: %w", err)
			}
			for _, r := range out.Data.Results {
				d.vaultCT = append(d.vaultCT, r.Ciphertext)
			}
		}
	}
	return d, nil
}

// workload returns the calls of op against the target, or nil when the
// target has no such operation (Vault has no forget and no raw body).
func (d *benchData) workload(c *benchConfig, target, op string) *workload {
	b64 := base64.StdEncoding.EncodeToString(d.pt)
	if target != targetShredd {
		op = baselineOp(op)
	}
	switch target {
	case targetVault:
		return d.vaultWorkload(c, op, b64)
	case targetShredd, targetNoop:
		return d.shreddWorkload(c, op, b64)
	}
	return nil
}

// baselineOp returns the operation a baseline runs for op: the baselines
// of client-side sealing are the server-side calls.
func baselineOp(op string) string {
	switch op {
	case opSeal:
		return opEncrypt
	case opSealBatch:
		return opBatch
	case opSealRaw:
		return opRaw
	}
	return op
}

// jsonCall is a call with a JSON body.
func jsonCall(path string, body any, items, bytes int, want int) call {
	b, _ := json.Marshal(body)
	return call{path: path, body: b, ctype: "application/json", items: items, bytes: bytes, want: want}
}

// pick is a workload of calls built beforehand (a body per pool entry):
// each next is one of them, at random.
func pick(calls []call) *workload {
	return &workload{next: func(rng *mrand.Rand) call { return calls[rng.IntN(len(calls))] }}
}

// vaultWorkload returns the calls of op against Vault's Transit, or nil.
func (d *benchData) vaultWorkload(c *benchConfig, op, b64 string) *workload {
	switch op {
	case opEncrypt:
		return pick([]call{jsonCall("/v1/transit/encrypt/bench", map[string]string{"plaintext": b64}, 1, c.Payload, 200)})
	case opDecrypt:
		var calls []call
		for _, ct := range d.vaultCT {
			calls = append(calls, jsonCall("/v1/transit/decrypt/bench", map[string]string{"ciphertext": ct}, 1, c.Payload, 200))
		}
		return pick(calls)
	case opBatch:
		items := make([]map[string]string, c.Batch)
		for i := range items {
			items[i] = map[string]string{"plaintext": b64}
		}
		return pick([]call{jsonCall("/v1/transit/encrypt/bench", map[string]any{"batch_input": items}, c.Batch, c.Batch*c.Payload, 200)})
	}
	return nil
}

// shreddWorkload returns the calls of op against shredd (or the no-op
// handler, which answers shredd's calls), or nil.
func (d *benchData) shreddWorkload(c *benchConfig, op, b64 string) *workload {
	enc, dec, batch := d.jsonCalls(c, b64)
	forget := func() call { return d.forgetCall(c) }
	switch op {
	case opEncrypt:
		return pick(enc)
	case opDecrypt:
		return pick(dec)
	case opBatch:
		return pick(batch)
	case opForget:
		return &workload{next: func(*mrand.Rand) call { return forget() }}
	case opMixed:
		// 60% encrypt, 35% decrypt, 5% forget.
		return &workload{next: func(rng *mrand.Rand) call {
			switch x := rng.IntN(100); {
			case x < 60:
				return enc[rng.IntN(len(enc))]
			case x < 95:
				return dec[rng.IntN(len(dec))]
			}
			return forget()
		}}
	case opRaw:
		var calls []call
		for _, s := range d.pool[:min(64, len(d.pool))] {
			calls = append(calls, call{path: "/v1/encrypt/raw", body: d.rawPT, ctype: "application/octet-stream", items: 1, bytes: c.RawPayload, want: 200,
				hdr: [][2]string{{"Shredd-Kind", "episodic"}, {"Shredd-Subject", benchSubject(s)}, {"Shredd-Unit", benchWriteUnit}}})
		}
		return pick(calls)
	case opSeal, opSealBatch, opSealRaw:
		return d.sealWorkload(c, op)
	case opRawDecrypt:
		return pick([]call{{path: "/v1/decrypt/raw", body: d.rawEnv, ctype: "application/octet-stream", items: 1, bytes: c.RawPayload, want: 200,
			hdr: [][2]string{{"Shredd-Holder", "bench"}, {"Shredd-Unit", benchReadUnit}}}})
	}
	return nil
}

// jsonCalls builds shredd's JSON calls: an encrypt and a decrypt per pool
// entry, and 16 batches of encrypts.
func (d *benchData) jsonCalls(c *benchConfig, b64 string) (enc, dec, batch []call) {
	for i, s := range d.pool {
		enc = append(enc, jsonCall("/v1/encrypt", map[string]string{"subject": benchSubject(s), "kind": "episodic", "plaintext": b64, "unit": benchWriteUnit}, 1, c.Payload, 200))
		dec = append(dec, jsonCall("/v1/decrypt", map[string]string{"ciphertext": d.shreddCT[i], "holder": "bench", "unit": benchReadUnit}, 1, c.Payload, 200))
	}
	for i := 0; i < 16; i++ {
		items := make([]map[string]string, c.Batch)
		for j := range items {
			items[j] = map[string]string{"subject": benchSubject(d.pool[(i*c.Batch+j)%len(d.pool)]), "kind": "episodic", "plaintext": b64, "unit": benchWriteUnit}
		}
		batch = append(batch, jsonCall("/v1/encrypt", map[string]any{"batch_input": items}, c.Batch, c.Batch*c.Payload, 200))
	}
	return enc, dec, batch
}

// forgetCall is the forget of the next subject of the upper half, from
// the top.
func (d *benchData) forgetCall(c *benchConfig) call {
	n := d.forgetNext.Add(-1) + 1
	if n < int64(c.Subjects/2) {
		// Out of subjects to forget: forgetting one again answers the
		// same forget.
		n = int64(d.forgetFrom)
	}
	return jsonCall("/v1/forget", map[string]string{"subject": benchSubject(int(n))}, 1, 0, 202)
}

// sealWorkload returns the client-side sealing calls of op (seal,
// seal-batch, seal-raw): 16 requests, each of one item or a batch
// (--batch items of seal-batch, --raw-batch records of seal-raw).
func (d *benchData) sealWorkload(c *benchConfig, op string) *workload {
	pt, size := d.pt, 1
	switch op {
	case opSealBatch:
		size = c.Batch
	case opSealRaw:
		pt, size = d.rawPT, c.RawBatch
	}
	// seal-raw's records are sealed into buffers reused from call to call
	// (client.SealTo, SealManyTo), as the AES-GCM baseline reuses its
	// output: a set of size buffers per call in flight.
	bufs := &sync.Pool{New: func() any { return new([][]byte) }}
	var calls []call
	for i := range 16 {
		reqs := make([]client.EncryptRequest, size)
		for j := range reqs {
			reqs[j] = client.EncryptRequest{Subjects: []string{benchSubject(d.pool[(i*size+j)%len(d.pool)])}, Kind: "episodic", Plaintext: pt, Unit: benchWriteUnit}
		}
		calls = append(calls, call{items: size, bytes: size * len(pt), want: 200, seal: func(ctx context.Context, gc *client.Client) (int, error) {
			if op == opSealRaw {
				b := bufs.Get().(*[][]byte)
				defer bufs.Put(b)
				if len(*b) != size {
					*b = make([][]byte, size)
				}
				if size == 1 {
					res, err := gc.SealTo(ctx, (*b)[0], reqs[0])
					if err == nil {
						(*b)[0] = res.Envelope
					}
					return 0, err
				}
				res, err := gc.SealManyTo(ctx, *b, reqs)
				failed := 0
				for j, r := range res {
					if r.Err != nil {
						failed++
					} else {
						(*b)[j] = r.Envelope
					}
				}
				return failed, err
			}
			if size == 1 {
				_, err := gc.Seal(ctx, reqs[0])
				return 0, err
			}
			res, err := gc.SealMany(ctx, reqs)
			failed := 0
			for _, r := range res {
				if r.Err != nil {
					failed++
				}
			}
			return failed, err
		}})
	}
	return pick(calls)
}

// load runs w against t with c.Clients concurrent clients for c.Duration
// (or c.MaxOps requests) and measures it.
func (c *benchConfig) load(ctx context.Context, hc *http.Client, t *benchTarget, op string, w *workload) benchResult {
	lr := &loadRun{c: c, t: t, w: w, lat: make([][]time.Duration, c.Clients)}
	nodes := t.nodes
	if len(nodes) == 0 {
		nodes = []benchNode{{url: t.url, hc: hc}}
	}
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Round-robin: client i stays on node i mod n.
			lr.client(ctx, i, nodes[i%len(nodes)], start)
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	return lr.result(op, len(nodes), el)
}

// loadRun is one load: its counters, shared by its clients, and each
// client's latencies.
type loadRun struct {
	c *benchConfig
	t *benchTarget
	w *workload

	issued, items, errs, bytesDone atomic.Int64
	firstErr                       atomic.Value
	lat                            [][]time.Duration
}

// client is client i of the load: it makes calls against node nd until
// the load's time is up or its requests are issued.
func (lr *loadRun) client(ctx context.Context, i int, nd benchNode, start time.Time) {
	rng := mrand.New(mrand.NewPCG(uint64(i), uint64(start.UnixNano())))
	buf := make([]byte, 0, 64<<10)
	var gc *client.Client
	for ctx.Err() == nil && lr.issued.Add(1) <= lr.c.MaxOps {
		cl := lr.w.next(rng)
		if cl.seal == nil {
			buf = lr.post(ctx, i, nd, cl, buf)
			continue
		}
		if gc == nil {
			var err error
			if gc, err = client.New(nd.url, lr.t.token, client.WithHTTPClient(nd.hc)); err != nil {
				lr.fail(1, "client")
				continue
			}
		}
		lr.seal(ctx, i, gc, cl)
	}
}

// fail counts n errors, and names the load's first error kind.
func (lr *loadRun) fail(n int64, kind string) {
	lr.errs.Add(n)
	lr.firstErr.CompareAndSwap(nil, kind)
}

// done records a call of client i that took el and did ok of its items.
func (lr *loadRun) done(i int, el time.Duration, ok int64, cl call) {
	lr.lat[i] = append(lr.lat[i], el)
	lr.items.Add(ok)
	lr.bytesDone.Add(ok * int64(cl.bytes/max(cl.items, 1)))
}

// seal makes the client-side sealing call cl of client i with gc.
func (lr *loadRun) seal(ctx context.Context, i int, gc *client.Client, cl call) {
	t0 := time.Now()
	failed, err := cl.seal(ctx, gc)
	el := time.Since(t0)
	if err != nil {
		if ctx.Err() == nil {
			kind := "seal"
			if e, ok := client.AsError(err); ok {
				kind = e.Code
			}
			lr.fail(1, kind)
		}
		return
	}
	if failed > 0 {
		lr.fail(int64(failed), "batch item failed")
	}
	lr.done(i, el, int64(cl.items-failed), cl)
}

// post makes the HTTP call cl of client i against node nd, reading the
// answer into buf, which it returns for the next call.
func (lr *loadRun) post(ctx context.Context, i int, nd benchNode, cl call, buf []byte) []byte {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, nd.url+cl.path, bytes.NewReader(cl.body))
	if err != nil {
		lr.errs.Add(1)
		return buf
	}
	lr.t.auth(req)
	req.Header.Set("Content-Type", cl.ctype)
	for _, h := range cl.hdr {
		req.Header.Set(h[0], h[1])
	}
	t0 := time.Now()
	resp, err := nd.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			lr.fail(1, "transport")
		}
		return buf
	}
	buf = buf[:0]
	bb := bytes.NewBuffer(buf)
	_, err = io.Copy(bb, resp.Body)
	resp.Body.Close()
	el := time.Since(t0)
	buf = bb.Bytes()
	if err != nil {
		if ctx.Err() == nil {
			lr.fail(1, "reading the response")
		}
		return buf
	}
	want := cl.want
	if lr.t.name != targetShredd {
		want = 200 // Vault and the no-op answer 200 (Vault: 204 for none of these)
	}
	if resp.StatusCode != want {
		lr.fail(1, resp.Status+" "+problemCode(buf))
		return buf
	}
	ok := int64(cl.items)
	if cl.items > 1 && lr.t.name != targetNoop {
		failed := int64(bytes.Count(buf, []byte(`"error":`)))
		if failed > 0 {
			lr.fail(failed, "batch item failed")
			ok -= failed
		}
	}
	lr.done(i, el, ok, cl)
	return buf
}

// result measures the load of op, over nodes nodes, that took el seconds.
func (lr *loadRun) result(op string, nodes int, el float64) benchResult {
	c := lr.c
	var all []time.Duration
	for _, l := range lr.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	q := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	r := benchResult{Target: lr.t.name, Op: op, Clients: c.Clients, Payload: c.Payload, DurationS: el,
		Requests: int64(len(all)), Items: lr.items.Load(), Errors: lr.errs.Load(),
		OpsPerS: float64(len(all)) / el, ItemsPerS: float64(lr.items.Load()) / el, MBPerS: float64(lr.bytesDone.Load()) / el / 1e6,
		P50ms: q(0.50), P99ms: q(0.99), P999ms: q(0.999), MaxMs: q(1)}
	if op == opBatch || op == opSealBatch {
		r.Batch = c.Batch
	}
	if op == opSealRaw && c.RawBatch > 1 {
		r.Batch = c.RawBatch
	}
	if op == opRaw || op == opRawDecrypt || op == opSealRaw {
		r.Payload = c.RawPayload
	}
	if op == opForget {
		r.Payload = 0
	}
	if s, ok := lr.firstErr.Load().(string); ok {
		r.ErrorKind = s
	}
	if nodes > 1 {
		r.NodeRequests = make([]int64, nodes)
		for i, l := range lr.lat {
			r.NodeRequests[i%nodes] += int64(len(l))
		}
	}
	return r
}

// verify forgets the heavy subject of a filled data directory (shredd
// bench fill --heavy) and times c.Verifies calls of POST
// /v1/forgets/{id}/verify: the erasure verification of a subject with that
// many artifacts.
func (c *benchConfig) verify(ctx context.Context, hc *http.Client, sh *benchTarget) (benchResult, error) {
	b, err := sh.post(ctx, hc, "/v1/forget", []byte(`{"subject":"`+benchHeavySubject+`"}`), nil)
	if err != nil {
		return benchResult{}, fmt.Errorf("verify: %w", err)
	}
	var f struct {
		Forget string `json:"forget"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return benchResult{}, fmt.Errorf("verify: %w", err)
	}
	var lat []time.Duration
	var errs int64
	start := time.Now()
	for range c.Verifies {
		t0 := time.Now()
		if _, err := sh.post(ctx, hc, "/v1/forgets/"+f.Forget+"/verify", nil, nil); err != nil {
			errs++
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	el := time.Since(start).Seconds()
	slices.Sort(lat)
	ms := func(i int) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(i, len(lat)-1)].Microseconds()) / 1000
	}
	return benchResult{Target: targetShredd, Op: opVerify, Clients: 1, DurationS: el, Requests: int64(len(lat)), Items: int64(len(lat)),
		Errors: errs, OpsPerS: float64(len(lat)) / el, ItemsPerS: float64(len(lat)) / el,
		P50ms: ms(len(lat) / 2), P99ms: ms(len(lat) - 1), P999ms: ms(len(lat) - 1), MaxMs: ms(len(lat) - 1)}, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := crand.Read(b); err != nil {
		panic(err)
	}
	return b
}
