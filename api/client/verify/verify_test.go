package verify_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/api/client/verify"
	"github.com/shredd/shredd/attest"
)

// TestVerifyExportCorpus runs every case of the shared corpus
// (testdata/evidence) through verify.Export: the verdict and the
// reason code must be the corpus's.
func TestVerifyExportCorpus(t *testing.T) {
	dir := "../../../testdata/evidence"
	data, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Cases []struct {
			Name, About, Export, Key, Verdict, Reason string
			LogKey                                    string  `json:"log_key"`
			Subject, Salt, Saved                      *string `json:",omitempty"`
		}
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) < 150 {
		t.Fatalf("%d cases", len(m.Cases))
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range m.Cases {
		var opts verify.Options
		if c.Subject != nil {
			opts.Subject = *c.Subject
			if opts.Salt, err = attest.ParseSalt(*c.Salt); err != nil {
				t.Fatal(err)
			}
		}
		if c.Saved != nil {
			opts.Saved = read(*c.Saved)
		}
		_, err := verify.Export(read(c.Export), read(c.Key), read(c.LogKey), opts)
		verdict := map[bool]string{true: "verified", false: "refused"}[err == nil]
		if verdict != c.Verdict || verify.Reason(err) != c.Reason {
			t.Errorf("%s (%s): %s %s, want %s %s (%v)", c.Name, c.About, verdict, verify.Reason(err), c.Verdict, c.Reason, err)
		}
	}
}
