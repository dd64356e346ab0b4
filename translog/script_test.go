package translog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredd/shredd/translog"
)

// checkInclusion runs bundle/check-inclusion.py, the independent Python
// checker written from RFC 9162 §2.1.3.2, on entry and proof. It returns
// the script's output and exit code.
func checkInclusion(t *testing.T, python string, entry, proof []byte) (string, int) {
	t.Helper()
	dir := t.TempDir()
	ef, pf := filepath.Join(dir, "entry"), filepath.Join(dir, "proof.tlog-proof")
	if err := os.WriteFile(ef, entry, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pf, proof, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, filepath.Join("..", "bundle", "check-inclusion.py"), ef, pf).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("running check-inclusion.py: %v", err)
	return "", -1
}

// TestCheckInclusionScript checks real proofs of many indexes and tree
// sizes with the Python checker, which shares no code with x/mod's
// tlog, and checks that it rejects tampered ones.
func TestCheckInclusionScript(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not on PATH: this test runs the independent checker bundle/check-inclusion.py with it (CI must install python3): %v", err)
	}
	ctx := context.Background()
	db, l := newLog(t)
	all := entries(0, 1100)
	appendTx(t, db, l, all...)
	type pick struct{ index, size int64 }
	var picks []pick
	for _, size := range []int64{1, 2, 3, 5, 8, 17, 64, 255, 256, 257, 1000, 1024, 1025, 1100} {
		for _, i := range []int64{0, 1, size / 3, size / 2, size - 2, size - 1} {
			if i >= 0 && i < size {
				picks = append(picks, pick{i, size})
			}
		}
	}
	for _, p := range picks {
		proof, err := l.Prove(ctx, p.index, p.size)
		if err != nil {
			t.Fatal(err)
		}
		c, err := translog.CheckProof(proof, all[p.index], testVerifier(t, testVkey))
		if err != nil {
			t.Fatal(err)
		}
		out, code := checkInclusion(t, python, all[p.index], proof)
		want := fmt.Sprintf("ok: entry %d is in tree %d of %s with root %s\n", p.index, p.size, testOrigin, c.Hash)
		if code != 0 || out != want {
			t.Fatalf("entry %d in tree %d: exit %d, output %q, want %q", p.index, p.size, code, out, want)
		}
	}

	// Tampered inputs: the script must exit 1.
	proof := string(mustProve(t, l, 700, 0))
	lines := strings.Split(proof, "\n")
	edit := func(f func([]string) []string) []byte {
		return []byte(strings.Join(f(append([]string(nil), lines...)), "\n"))
	}
	hashLine := 3 // lines: header, index, hashes...
	rootLine := len(lines) - 4
	for _, tc := range []struct {
		name         string
		entry, proof []byte
	}{
		{"entry byte flipped", append([]byte{'E'}, all[700][1:]...), []byte(proof)},
		{"entry of another index", all[701], []byte(proof)},
		{"proof hash flipped", all[700], edit(func(ls []string) []string { ls[hashLine] = flipBase64(ls[hashLine], 7); return ls })},
		{"proof line dropped", all[700], edit(func(ls []string) []string { return append(ls[:hashLine], ls[hashLine+1:]...) })},
		{"proof line repeated", all[700], edit(func(ls []string) []string { return append(ls[:hashLine+1], ls[hashLine:]...) })},
		{"index changed", all[700], edit(func(ls []string) []string { ls[1] = "index 701"; return ls })},
		{"index beyond tree", all[700], edit(func(ls []string) []string { ls[1] = "index 1100"; return ls })},
		// A size of the same tree depth (1025..2048 here) leaves the audit
		// path of entry 700 valid: only the checkpoint's signature, which
		// the script leaves to openssl, binds the size (CheckProof catches
		// it, see TestTamperedProofsFail). A size of another depth fails.
		{"size of another depth", all[700], edit(func(ls []string) []string { ls[rootLine-1] = "2049"; return ls })},
		{"size below the index", all[700], edit(func(ls []string) []string { ls[rootLine-1] = "700"; return ls })},
		{"root flipped", all[700], edit(func(ls []string) []string { ls[rootLine] = flipBase64(ls[rootLine], 0); return ls })},
		{"not a proof", all[700], []byte("hello\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, code := checkInclusion(t, python, tc.entry, tc.proof); code != 1 || !strings.HasPrefix(out, "fail: ") {
				t.Errorf("exit %d, output %q; want exit 1 with a reason", code, out)
			}
		})
	}

	// The golden proof too.
	golden, err := os.ReadFile(goldenProof)
	if err != nil {
		t.Fatal(err)
	}
	e, err := os.ReadFile(goldenEntry)
	if err != nil {
		t.Fatal(err)
	}
	if out, code := checkInclusion(t, python, e, golden); code != 0 {
		t.Errorf("golden proof: exit %d: %s", code, out)
	}
}
