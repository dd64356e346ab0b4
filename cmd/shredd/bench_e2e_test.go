package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/internal/vaulttest"
)

// runBench runs the real binary's `shredd bench` with args and env and
// returns its stdout.
func runBench(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(shreddBinary(t), append([]string{"bench"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("shredd bench %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	return stdout.Bytes()
}

// TestBench runs the load tool briefly, in one run, against shredd (which it
// starts), a Vault dev server and the no-op handler, and checks the
// report's structure: every operation ran against every target that has
// it, without errors, and the ratios are there. No timing is asserted.
func TestBench(t *testing.T) {
	v := vaulttest.Dev(t)
	ops := []string{opEncrypt, opDecrypt, opBatch, opForget, opMixed, opRaw, opRawDecrypt}
	out := runBench(t, []string{"VAULT_ADDR=" + v.Addr, "VAULT_TOKEN=" + v.RootToken},
		"--ops", strings.Join(ops, ","), "--duration", "300ms", "--clients", "4", "--subjects", "200",
		"--batch", "10", "--raw-payload", "65536", "--json")
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
	want = append(want, targetVault+"/"+opEncrypt, targetVault+"/"+opDecrypt, targetVault+"/"+opBatch)
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("no result for %s", k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d results, want %d: %v", len(got), len(want), rep.Results)
	}
	if b := got[targetShredd+"/"+opBatch]; b.Items != 10*b.Requests || b.Batch != 10 {
		t.Errorf("batch: %d items in %d requests of %d", b.Items, b.Requests, b.Batch)
	}
	if rep.Fsync == nil || rep.Fsync.Samples < 1 || rep.Fsync.CeilingPerS <= 0 {
		t.Errorf("fsync baseline %+v", rep.Fsync)
	}
	if rep.AEAD == nil || rep.AEAD.MBPerS <= 0 || rep.AEAD.Payload != 65536 {
		t.Errorf("aead baseline %+v", rep.AEAD)
	}
	ratios := map[string]bool{}
	for _, r := range rep.Ratios {
		if r.Ratio <= 0 {
			t.Errorf("ratio %+v", r)
		}
		ratios[r.Op+"/"+r.Baseline] = true
	}
	for _, k := range []string{"encrypt/vault", "encrypt/noop", "decrypt/vault", "batch/vault", "forget/noop", "raw/aead", "raw-decrypt/aead"} {
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
	s := startServer(t, dir, serverOpts{})
	defer s.stop()
	subj := benchSubject(999) // the upper half: the load tool's encrypts use the lower one
	rec := s.seal(t, sealReq{Subject: subj, Kind: "episodic"}, "from the filled store", "")
	s.open(t, rec)

	// The fill's lineage is there: the dry run of a forget finds artifacts.
	var p struct {
		Counts struct {
			Total int `json:"total"`
		} `json:"counts"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/forget", map[string]any{"subject": subj, "dry_run": true}).into(t, &p)
	if p.Counts.Total < 2 {
		t.Fatalf("the dry run of a filled subject finds %d artifacts", p.Counts.Total)
	}
	f := s.forget(t, subj)
	if f.State != "committed" {
		t.Fatalf("forget: %+v", f)
	}
	s.shredded(t, rec)

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
