package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shredd/shredd/testkit/evidence"
)

const evidenceDir = "../../testdata/evidence"

// corpusArgs returns the arguments of `shredd verify` for c, a case of
// the shared corpus (testdata/evidence/cases.json); the subject goes
// through --subject-file, so that one with a line break is given exactly.
func corpusArgs(t *testing.T, c evidence.OnDisk) []string {
	p := func(rel string) string { return filepath.Join(evidenceDir, rel) }
	args := []string{p(c.Export), "--key", p(c.Key), "--log-key", p(c.LogKey)}
	if c.Attestation != "" {
		args = []string{p(c.Attestation), "--key", p(c.Key)}
	}
	for _, w := range c.Witnesses {
		args = append(args, "--witness", p(w))
	}
	if c.WitnessesRequired != nil {
		args = append(args, "--witnesses-required", strconv.Itoa(*c.WitnessesRequired))
	}
	if c.Subject != nil {
		f := filepath.Join(t.TempDir(), "subject")
		// --subject-file drops one final line break: add one, so that a
		// subject ending in one keeps it.
		if err := os.WriteFile(f, []byte(*c.Subject+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--subject-file", f)
	}
	if c.Salt != nil {
		args = append(args, "--salt", *c.Salt)
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
	if code == exitUsage {
		return "usage", "usage"
	}
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
	for _, c := range evidence.MustRead(t, evidenceDir) {
		t.Run(c.Name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := verifyCmd(append([]string{}, corpusArgs(t, c)...), &stdout, &stderr)
			verdict, reason := verdictOf(code, stdout.String())
			if verdict != c.Verdict || reason != c.Reason {
				t.Errorf("%s: %s %s (exit %d), want %s %s\n%s%s", c.About, verdict, reason, code, c.Verdict, c.Reason, stdout.String(), stderr.String())
			}
			want := map[string]int{"verified": exitOK, "refused": exitFailed, "usage": exitUsage}[c.Verdict]
			if code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
		})
	}
}

// TestVerifyEvidenceBinary runs a sample of the corpus (every tenth case,
// and every valid one) through the real binary.
func TestVerifyEvidenceBinary(t *testing.T) {
	bin := shreddBinary(t)
	for i, c := range evidence.MustRead(t, evidenceDir) {
		if i%10 != 0 && c.Verdict != "verified" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"verify"}, corpusArgs(t, c)...)...)
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
