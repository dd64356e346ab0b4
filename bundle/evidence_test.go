package bundle_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkit/evidence"
)

const corpusDir = "../testdata/evidence"

// corpusCase is a case of the corpus with its files read.
type corpusCase = evidence.OnDisk

func readCorpus(t testing.TB) []corpusCase { return evidence.MustRead(t, corpusDir) }

// checkCase runs one case through the Go reader (evidence.Check: the
// code paths of `shredd verify`).
func checkCase(c corpusCase) (string, error) { return evidence.Check(c) }

// TestEvidenceCorpus runs every case of the shared corpus through the Go
// reader: the verdict and the reason code must be the corpus's.
func TestEvidenceCorpus(t *testing.T) {
	cases := readCorpus(t)
	if len(cases) < 150 {
		t.Fatalf("the corpus holds %d cases, want at least 150", len(cases))
	}
	valid := 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			reason, err := checkCase(c)
			if reason != c.Reason {
				t.Errorf("%s: reason %q, want %q (%v)", c.About, reason, c.Reason, err)
			}
			if (err == nil) != (c.Verdict == "verified") || (c.Verdict == "usage") != errors.Is(err, bundle.ErrUsage) {
				t.Errorf("verdict: error %v, want %s", err, c.Verdict)
			}
		})
		if c.Verdict == "verified" {
			valid++
		}
	}
	if valid < 10 || valid > len(cases)/2 {
		t.Errorf("%d valid cases of %d", valid, len(cases))
	}
}

// TestEvidenceCorpusGenerated checks that the checked-in corpus is what
// the generator writes, file for file: no case was edited by hand, and
// the generator still gives the published bytes (append-only).
func TestEvidenceCorpusGenerated(t *testing.T) {
	files := evidence.Files()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(corpusDir, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v (run go run ./testkit/evidence/gen)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes", name)
		}
	}
	onDisk, _ := filepath.Glob(filepath.Join(corpusDir, "files", "*"))
	for _, p := range onDisk {
		if _, ok := files["files/"+filepath.Base(p)]; !ok {
			t.Errorf("%s is not generated", p)
		}
	}
	names := map[string]bool{}
	for _, c := range evidence.Cases() {
		slug := c.Name[strings.Index(c.Name, "-")+1:]
		if names[slug] {
			t.Errorf("two cases named %s", slug)
		}
		names[slug] = true
	}
}
