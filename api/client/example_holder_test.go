package client_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/translog"
)

// The examples of docs/clients.md ("Go"), run by go test against the real
// shredd binary on 127.0.0.1 (exampleServer, below), each on a server of
// its own. What the docs show is the body of each example from its first
// line after exampleServer (TestDocsGo checks it).

// Example_connect seals and opens a record, and tells erased data from
// every other failure.
func Example_connect() {
	base, token, _ := exampleServer()
	ctx := context.Background()
	c, err := client.New(base, token) // options: client.WithHTTPClient(hc), WithUserAgent, WithMaxResponse
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.PutKind(ctx, "episodic", "memory rows"); err != nil {
		log.Fatal(err)
	}
	rec, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"carol@example.com"}, Kind: "episodic",
		Plaintext: []byte("Carol prefers green tea.")})
	if err != nil {
		log.Fatal(err)
	}
	opened, err := c.Decrypt(ctx, client.DecryptRequest{Ciphertext: rec.Ciphertext})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(opened.Plaintext))

	if _, err := c.Forget(ctx, "carol@example.com"); err != nil {
		log.Fatal(err)
	}
	_, err = c.Decrypt(ctx, client.DecryptRequest{Ciphertext: rec.Ciphertext})
	switch {
	case client.IsShredded(err): // 410: a subject of the lineage was forgotten; the data is erased
		fmt.Println("shredded")
	case err != nil: // *client.Error: Status, Code, Detail, RequestID; or a transport error
		log.Fatal(err)
	}
	// Output:
	// Carol prefers green tea.
	// shredded
}

// Example_holder is a holder written in Go: an embedding index that keeps
// plaintext vectors outside shredd, purges them when a forget asks, and
// signs its ack, which closes the forget's cascade.
func Example_holder() {
	base, adminToken, holderToken := exampleServer() // a real shredd; its tokens
	ctx := context.Background()

	admin, err := client.New(base, adminToken)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"episodic", "embedding"} {
		if _, _, err := admin.PutKind(ctx, k, ""); err != nil {
			log.Fatal(err)
		}
	}

	// The holder: its own Ed25519 key, and a token with the register scope
	// bound to it (shredd token create --scopes register --holder ann-index-1).
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		log.Fatal(err)
	}
	hc, err := client.New(base, holderToken)
	if err != nil {
		log.Fatal(err)
	}
	h, err := client.NewHolder(hc, "ann-index-1", key)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := h.Register(ctx, admin); err != nil { // registering is the admin's call
		log.Fatal(err)
	}

	// A sealed memory record, and its embedding kept in plaintext by the
	// index, registered with the record as its parent.
	rec, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic",
		Plaintext: []byte("Alice prefers green tea.")})
	if err != nil {
		log.Fatal(err)
	}
	emb, err := hc.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding"})
	if err != nil {
		log.Fatal(err)
	}
	vectors := map[string][]float32{emb.ID: {0.12, -0.40, 0.33}}

	f, err := admin.Forget(ctx, "alice@example.com")
	if err != nil {
		log.Fatal(err)
	}

	// One purge round: fetch the work, delete, sign and send the ack. A
	// long-running holder calls h.Run(ctx, interval, purge, report) instead.
	round, err := h.PurgeOnce(ctx, func(ctx context.Context, forget string, ids []string) ([]string, error) {
		var purged []string
		for _, id := range ids {
			if _, ok := vectors[id]; ok {
				delete(vectors, id)
				purged = append(purged, id)
			}
		}
		return purged, nil
	})
	if err != nil || round.Err() != nil {
		log.Fatal(err, round.Err())
	}
	fmt.Println("acked:", len(round.Acked[0].Closed), "still open:", len(round.Acked[0].Missing))

	// The inventory: everything the index still holds (here, nothing).
	inv := []client.InventoryItem{}
	for id := range vectors {
		inv = append(inv, client.InventoryItem{ID: id, Kind: "embedding"})
	}
	rep, err := h.ReportInventory(ctx, inv)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inventory clean:", rep.Clean())

	// The epoch destroys the old root versions; once the key cache TTL
	// has passed, every condition of erasure holds.
	if _, err := admin.Epoch(ctx); err != nil {
		log.Fatal(err)
	}
	for i := 0; f.State != client.StateErased && i < 100; i++ {
		time.Sleep(200 * time.Millisecond)
		if f, err = admin.Verify(ctx, f.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("forget:", f.State)
	// Output:
	// acked: 1 still open: 0
	// inventory clean: true
	// forget: erased
}

// Example_logConsistency checks, with package translog, that the
// transparency log still extends a checkpoint saved earlier, and that an
// entry is in it.
func Example_logConsistency() {
	base, adminToken, _ := exampleServer()
	ctx := context.Background()
	c, err := client.New(base, adminToken) // any token with the audit scope
	if err != nil {
		log.Fatal(err)
	}

	// Trust the key the operator published (log.vkey), not the server's
	// word: here they are compared.
	vkey, err := c.LogKey(ctx)
	if err != nil {
		log.Fatal(err)
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		log.Fatal(err)
	}
	saved, err := c.Checkpoint(ctx) // keep it
	if err != nil {
		log.Fatal(err)
	}
	old, err := translog.OpenCheckpoint(saved, verifier)
	if err != nil {
		log.Fatal(err)
	}

	// ... later (here: a new subject's key is created, and logged), is the
	// current log an extension of the saved one?
	if _, _, err := c.PutKind(ctx, "episodic", ""); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "episodic", Plaintext: []byte("hi")}); err != nil {
		log.Fatal(err)
	}
	cur, err := c.Checkpoint(ctx)
	if err != nil {
		log.Fatal(err)
	}
	now, err := translog.OpenCheckpoint(cur, verifier)
	if err != nil {
		log.Fatal(err)
	}
	raw, err := c.ConsistencyProof(ctx, old.Size, now.Size)
	if err != nil {
		log.Fatal(err)
	}
	proof, err := translog.ParseConsistencyProof(raw)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("grew:", now.Size > old.Size, "consistent:", translog.CheckConsistency(old, now, proof.Hashes) == nil)

	// An inclusion proof of entry 0 (the first subject key's creation),
	// which carries its own signed checkpoint. The entry's bytes come from
	// the log's tiles or an export; here the proof's checkpoint is checked.
	p, err := c.InclusionProof(ctx, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	parsed, err := translog.ParseProof(p)
	if err != nil {
		log.Fatal(err)
	}
	_, err = translog.OpenCheckpoint(parsed.Checkpoint, verifier)
	fmt.Println("proof of entry", parsed.Index, "signed by the log:", err == nil)
	// Output:
	// grew: true consistent: true
	// proof of entry 0 signed by the log: true
}

// exampleServer starts, for one example, the real shredd binary on
// 127.0.0.1 with a fresh data directory (the cache TTL at 1s so that a
// forget can reach erased within the example), and returns its URL, the
// admin token and a register token bound to holder ann-index-1. Each
// example has a server of its own, as each program would: a token's reads
// are what its writes answer for until the leases expire, and one example
// must not answer for another's. It exits the test binary on failure
// (examples have no *testing.T); the processes and their directories go
// when the test binary ends (TestMain).
func exampleServer() (base, adminToken, holderToken string) {
	base, adminToken, holderToken, err := startExampleServer()
	if err != nil {
		log.Fatalf("example server: %v", err)
	}
	return base, adminToken, holderToken
}

var (
	examplesMu  sync.Mutex
	exampleCmds []*exec.Cmd
	exampleDirs []string
)

func startExampleServer() (base, admin, holder string, err error) {
	dir, err := os.MkdirTemp("", "shredd-client-example-")
	if err != nil {
		return "", "", "", err
	}
	examplesMu.Lock()
	exampleDirs = append(exampleDirs, dir)
	examplesMu.Unlock()
	bin, err := shreddBinary()
	if err != nil {
		return "", "", "", err
	}
	data := filepath.Join(dir, "data")
	cmd, base, err := serveBinary(bin, data, "--cache-ttl", "1s")
	if cmd != nil {
		examplesMu.Lock()
		exampleCmds = append(exampleCmds, cmd)
		examplesMu.Unlock()
	}
	if err != nil {
		return "", "", "", err
	}
	tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		return "", "", "", err
	}
	admin = strings.TrimSpace(string(tok))
	out, err := exec.Command(bin, "token", "create", "--data-dir", data, "--name", "ann-index-1",
		"--scopes", "register", "--holder", "ann-index-1").Output()
	if err != nil {
		return "", "", "", fmt.Errorf("shredd token create: %w", err)
	}
	holder = strings.TrimSpace(string(out)) // the secret alone on stdout
	if !strings.HasPrefix(holder, "shredd_") {
		return "", "", "", fmt.Errorf("no token in the output of shredd token create: %q", out)
	}
	return base, admin, holder, nil
}

// shreddBinary returns the shredd binary the tests run: $SHREDD_BIN when
// set (as scripts/test-python.sh passes it), else one built once for the
// test binary into a directory removed by TestMain.
func shreddBinary() (string, error) {
	if b := os.Getenv("SHREDD_BIN"); b != "" {
		return b, nil
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shredd-client-bin-")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		bin := filepath.Join(dir, "shredd")
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			binErr = fmt.Errorf("go list -m: %w", err)
			return
		}
		build := exec.Command("go", "build", "-o", bin, "./cmd/shredd")
		build.Dir = strings.TrimSpace(string(root))
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		binPath = bin
	})
	return binPath, binErr
}

var (
	binOnce         sync.Once
	binPath, binDir string
	binErr          error
)

// serveBinary starts bin serve on 127.0.0.1:0 over the data directory
// data (16 buckets, an hourly epoch, and args) and returns the process
// and its URL once it logs that it listens. The process is returned, to
// be killed, also with an error.
func serveBinary(bin, data string, args ...string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", data, "--addr", "127.0.0.1:0", "--buckets", "16",
		"--epoch-interval", "1h"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" && l.Addr != "" {
				addr <- l.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		return cmd, "http://" + a, nil
	case <-time.After(60 * time.Second):
		return cmd, "", fmt.Errorf("shredd did not listen within 60s")
	}
}

// TestMain stops the examples' servers once every test and example ran,
// and removes the binary.
func TestMain(m *testing.M) {
	code := m.Run()
	stopExampleServers()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// stopExampleServers ends the example servers and removes their
// directories.
func stopExampleServers() {
	examplesMu.Lock()
	defer examplesMu.Unlock()
	for _, cmd := range exampleCmds {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	for _, dir := range exampleDirs {
		_ = os.RemoveAll(dir)
	}
}
