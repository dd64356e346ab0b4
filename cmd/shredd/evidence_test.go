package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shredd/shredd/testkit/evidence"
)

// evidenceCase is a case of the shared corpus (testdata/evidence/cases.json).
type evidenceCase struct{ evidence.ManifestEntry }

const evidenceDir = "../../testdata/evidence"

func readEvidence(t *testing.T) []evidenceCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(evidenceDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Cases []evidenceCase }
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) < 150 {
		t.Fatalf("%d cases in the corpus, want at least 150", len(m.Cases))
	}
	return m.Cases
}

// args returns the arguments of `shredd verify` for c; the subject goes
// through --subject-file, so that one with a line break is given exactly.
func (c evidenceCase) args(t *testing.T) []string {
	p := func(rel string) string { return filepath.Join(evidenceDir, rel) }
	args := []string{p(c.Export), "--key", p(c.Key), "--log-key", p(c.LogKey)}
	if c.Subject != nil {
		f := filepath.Join(t.TempDir(), "subject")
		// --subject-file drops one final line break: add one, so that a
		// subject ending in one keeps it.
		if err := os.WriteFile(f, []byte(*c.Subject+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--subject-file", f, "--salt", *c.Salt)
	}
	if c.Saved != nil {
		args = append(args, "--checkpoint", p(*c.Saved))
	}
	return args
}

var notVerifiedRe = regexp.MustCompile(`(?m)^NOT VERIFIED: (\S+)$`)

// verdictOf reads the verdict and the reason code from the output of
// shredd verify.
func verdictOf(code int, out string) (verdict, reason string) {
	if code == exitOK && strings.Contains(out, "\nVERIFIED: ") {
		return "verified", "ok"
	}
	if m := notVerifiedRe.FindStringSubmatch(out); m != nil {
		return "refused", m[1]
	}
	return "refused", ""
}

// TestVerifyEvidenceCorpus runs every case of the shared corpus through
// `shredd verify` (verifyCmd, the code path of the binary): exit status,
// verdict and reason code must be the corpus's.
func TestVerifyEvidenceCorpus(t *testing.T) {
	for _, c := range readEvidence(t) {
		t.Run(c.Name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := verifyCmd(append([]string{}, c.args(t)...), &stdout, &stderr)
			verdict, reason := verdictOf(code, stdout.String())
			if verdict != c.Verdict || reason != c.Reason {
				t.Errorf("%s: %s %s (exit %d), want %s %s\n%s%s", c.About, verdict, reason, code, c.Verdict, c.Reason, stdout.String(), stderr.String())
			}
			if want := exitOK; c.Verdict == "refused" {
				if code != exitFailed {
					t.Errorf("exit %d, want %d", code, exitFailed)
				}
			} else if code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
		})
	}
}

// TestVerifyEvidenceBinary runs a sample of the corpus (every tenth case,
// and every valid one) through the real binary.
func TestVerifyEvidenceBinary(t *testing.T) {
	bin := shreddBinary(t)
	for i, c := range readEvidence(t) {
		if i%10 != 0 && c.Verdict != "verified" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"verify"}, c.args(t)...)...)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			verdict, reason := verdictOf(code, stdout.String())
			if verdict != c.Verdict || reason != c.Reason {
				t.Errorf("%s: %s %s (exit %d), want %s %s\n%s", c.About, verdict, reason, code, c.Verdict, c.Reason, stdout.String())
			}
		})
	}
}
