package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOldDataDirOpens starts this release's binary on a data directory made
// by the release before recorded migrations (testdata/release-08637c3): the
// schema migrates in place, the forget ledger is filled from the database,
// every record opens or answers 410 as it did, the forgets are kept, and
// the service goes on (a new record, an epoch).
func TestOldDataDirOpens(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "testdata", "release-08637c3")
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// git keeps no modes: the data dir's secrets get theirs back.
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var want struct {
		Records []struct {
			Name, Plaintext, Ciphertext, Artifact string
			Forgotten                             bool
		}
		Forgets []string
	}
	b, err := os.ReadFile(filepath.Join(dir, "records.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}

	s := startServer(t, dir, serverOpts{Buckets: 16})
	if !strings.Contains(s.logs.String(), `"recorded":2`) {
		t.Errorf("the start did not record the old forgets in the ledger:\n%s", tail(s.logs.String(), 20))
	}
	for _, r := range want.Records {
		rec := record{name: r.Name, ciphertext: r.Ciphertext, plaintext: r.Plaintext, artifact: r.Artifact}
		if r.Forgotten {
			s.shredded(t, rec)
		} else {
			s.open(t, rec)
		}
	}
	all := s.listForgets(t, "")
	if len(all) != len(want.Forgets) {
		t.Fatalf("%d forgets after the upgrade, want %d", len(all), len(want.Forgets))
	}
	for _, id := range want.Forgets {
		if f := s.getForget(t, id); f.CommittedAt == nil {
			t.Fatalf("forget %s not committed after the upgrade: %+v", id, f)
		}
	}
	s.putKinds(t, "episodic")
	dave := s.seal(t, sealReq{Subject: "dave@example.com", Kind: "episodic"}, "record of dave", "d")
	s.runEpoch(t)
	s.open(t, dave)
	s.stop()
}
