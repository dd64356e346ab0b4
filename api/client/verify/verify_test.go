package verify_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/api/client/verify"
	"github.com/shredd/shredd/attest"
)

// corpusCase is a case of testdata/evidence/cases.json, read here on its
// own (not through testkit), as a program using the Go client would.
type corpusCase struct {
	Name, About, Export, Attestation, Key, Verdict, Reason string
	LogKey                                                 string `json:"log_key"`
	Subject, Salt, Saved                                   *string
	Witnesses                                              []string
	WitnessesRequired                                      *int `json:"witnesses_required"`
}

// TestVerifyExportCorpus runs every case of the shared corpus
// (testdata/evidence) through verify.Export or verify.Attestation: the
// verdict and the reason code must be the corpus's.
func TestVerifyExportCorpus(t *testing.T) {
	dir := "../../../testdata/evidence"
	data, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Cases []corpusCase }
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
	// check runs a case; the program's own inputs (the salt's hex, a
	// subject without a salt, zero witnesses required) are its usage
	// errors.
	check := func(c corpusCase) error {
		var opts verify.Options
		if (c.Subject == nil) != (c.Salt == nil) {
			return verify.ErrUsage
		}
		if c.Salt != nil {
			salt, err := attest.ParseSalt(*c.Salt)
			if err != nil {
				return verify.ErrUsage
			}
			opts.Subject, opts.Salt = *c.Subject, salt
		}
		if c.Attestation != "" {
			_, err := verify.Attestation(read(c.Attestation), read(c.Key), opts.Subject, opts.Salt)
			return err
		}
		if c.Saved != nil {
			opts.Saved = read(*c.Saved)
		}
		for _, w := range c.Witnesses {
			opts.WitnessKeys = append(opts.WitnessKeys, read(w))
		}
		if r := c.WitnessesRequired; r != nil {
			if *r < 1 {
				return verify.ErrUsage
			}
			opts.WitnessesRequired = *r
		}
		_, err := verify.Export(read(c.Export), read(c.Key), read(c.LogKey), opts)
		return err
	}
	for _, c := range m.Cases {
		err := check(c)
		verdict := map[bool]string{true: "verified", false: "refused"}[err == nil]
		if errors.Is(err, verify.ErrUsage) {
			verdict = "usage"
		}
		if verdict != c.Verdict || verify.Reason(err) != c.Reason {
			t.Errorf("%s (%s): %s %s, want %s %s (%v)", c.Name, c.About, verdict, verify.Reason(err), c.Verdict, c.Reason, err)
		}
	}
}
