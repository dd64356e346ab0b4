package main

// End-to-end tests of reinstatement (docs/api.md, "Reinstating a
// subject"): forget, reinstate, write, read, forget again, with the real
// binary over HTTP, on SQLite and on PostgreSQL, a restart in between.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/cmd/shredd/node"
)

// reinstatementView is the answer of POST /v1/subjects/reinstate.
type reinstatementView struct {
	Generation         uint32 `json:"generation"`
	PreviousGeneration uint32 `json:"previous_generation"`
	Forget             string `json:"forget"`
	LogIndex           int64  `json:"log_index"`
	ReinstatedAt       string `json:"reinstated_at"`
}

func TestReinstateSQLite(t *testing.T) {
	dir := t.TempDir()
	reinstateStory(t, dir, serverOpts{Args: []string{"--cache-ttl", "1ns", "--lease-ttl", "3s"}})
}

func TestReinstatePostgres(t *testing.T) {
	_, dsn, dir, _, s := startOnPostgres(t)
	s.stop()
	reinstateStory(t, dir, serverOpts{Args: []string{"--store", dsn, "--cache-ttl", "1ns", "--lease-ttl", "3s"}})
}

// attestedArtifacts opens an attestation under the service's key and
// returns the ids of the artifacts it lists.
func attestedArtifacts(t *testing.T, att []byte, pubPath string) []string {
	t.Helper()
	pub, err := attest.ParsePublicKey(mustRead(t, pubPath))
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.Open(att, pub)
	if err != nil {
		t.Fatalf("attestation: %v", err)
	}
	var ids []string
	for _, a := range st.Predicate.Artifacts {
		ids = append(ids, a.ID)
	}
	return ids
}

func reinstateStory(t *testing.T, dir string, opts serverOpts) {
	const alice, bob, carol = "alice@example.com", "bob@example.com", "carol@example.com"
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic", "summary")
	pub := filepath.Join(dir, node.AttestationPubFile)
	vkey := filepath.Join(dir, node.LogVKeyFile)

	// The first life of alice: a record, a summary derived from it (with
	// bob), bob's own record.
	old := s.seal(t, sealReq{Subject: alice, Kind: "episodic"}, "alice, first life", "c1")
	oldSummary := s.seal(t, sealReq{Subjects: []string{bob}, Parents: []string{old.artifact}, Kind: "summary"}, "summary of alice's first life", "c1")
	bobRec := s.seal(t, sealReq{Subject: bob, Kind: "episodic"}, "bob's record", "c1")

	// Nothing to follow: a subject never seen, and a live one.
	s.expectProblem(t, http.StatusConflict, "not_forgotten", http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": "dave@example.com"})
	s.expectProblem(t, http.StatusConflict, "not_forgotten", http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": bob})

	f1 := s.forget(t, alice)
	fc := s.forget(t, carol) // a subject never seen: a tombstone of generation 0
	s.shredded(t, old)
	s.shredded(t, oldSummary)
	// Not before the forget is erased.
	p := s.expectProblem(t, http.StatusConflict, "not_erased", http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": alice})
	if strings.Contains(p.Detail, alice) {
		t.Fatalf("the problem names the subject: %+v", p)
	}
	s.shred(t, f1.Forget, fc.Forget)
	s.waitErased(t, f1.Forget, time.Time{})
	s.waitErased(t, fc.Forget, time.Time{})
	att1 := s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+f1.Forget+"/attestation", nil).Body
	export1 := filepath.Join(t.TempDir(), "f1.tar.gz")
	s.cli(t, "export", "--out", export1, f1.Forget)
	verify := func(export, salt string) {
		t.Helper()
		if code, out := (verifyArgs{export: export, key: pub, logKey: vkey, subject: alice, salt: salt}).run(t); code != 0 || !strings.Contains(out, "VERIFIED") {
			t.Fatalf("shredd verify %s: exit %d\n%s", export, code, out)
		}
	}
	verify(export1, f1.CommitmentSalt)

	// Nothing reinstates implicitly: a write of alice stays refused.
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: alice, Kind: "episodic", Plaintext: b64("x"), Unit: writeUnit})

	// The reinstatement, through the CLI with the id in a file.
	subjectFile := filepath.Join(t.TempDir(), "subject")
	if err := os.WriteFile(subjectFile, []byte(alice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rs reinstatementView
	if err := json.Unmarshal([]byte(s.cli(t, "reinstate", "--subject-file", subjectFile, "--reason", "returned with fresh consent")), &rs); err != nil {
		t.Fatal(err)
	}
	if rs.Generation != 2 || rs.PreviousGeneration != 1 || rs.Forget != f1.Forget || rs.LogIndex < 0 {
		t.Fatalf("reinstatement %+v, want generation 2 after 1, forget %s, logged", rs, f1.Forget)
	}
	var rc reinstatementView
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": carol}).into(t, &rc)
	if rc.Generation != 1 || rc.PreviousGeneration != 0 || rc.Forget != fc.Forget {
		t.Fatalf("reinstatement of a subject forgotten before it had a key: %+v, want generation 1 after 0", rc)
	}
	// A retried reinstatement starts no third generation.
	s.expectProblem(t, http.StatusConflict, "not_forgotten", http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": alice})
	if logs := s.logs.String(); !strings.Contains(logs, "subject reinstated") || strings.Contains(logs, alice) || strings.Contains(logs, carol) {
		t.Fatalf("the log has no reinstatement line, or names a subject:\n%s", tail(logs, 40))
	}

	// Durable across a restart.
	s.stop()
	s = startServer(t, dir, opts)

	// The old generation stays refused, its derivatives too; the new one
	// serves.
	s.shredded(t, old)
	s.shredded(t, oldSummary)
	s.open(t, bobRec)
	fresh := s.seal(t, sealReq{Subject: alice, Kind: "episodic"}, "alice, second life", "c2")
	s.open(t, fresh)
	carolRec := s.seal(t, sealReq{Subject: carol, Kind: "episodic"}, "carol, first key", "c2")
	s.open(t, carolRec)
	for name, req := range map[string]sealReq{
		"a derivative of an old-generation parent":       {Subjects: []string{bob}, Parents: []string{old.artifact}, Kind: "summary"},
		"a derivative of an old and a new parent":        {Parents: []string{old.artifact, fresh.artifact}, Kind: "summary"},
		"a derivative of an old-generation derivative":   {Parents: []string{oldSummary.artifact}, Kind: "summary"},
		"a registration naming an old-generation parent": {Parents: []string{old.artifact}, Kind: "summary", Holder: "indexer"},
	} {
		path := "/v1/encrypt"
		if req.Holder != "" {
			path = "/v1/artifacts"
		} else {
			req.Plaintext = b64(name)
		}
		req.Unit = writeUnit
		s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, path, req)
	}
	freshSummary := s.seal(t, sealReq{Parents: []string{fresh.artifact}, Kind: "summary"}, "summary of alice's second life", "c2")
	s.open(t, freshSummary)

	// The first forget is unchanged: erased, the same attestation, its
	// export (old and new) verifies.
	if f := s.getForget(t, f1.Forget); f.State != "erased" {
		t.Fatalf("the first forget after the reinstatement: %+v", f)
	}
	if again := s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+f1.Forget+"/attestation", nil).Body; !bytes.Equal(again, att1) {
		t.Fatal("the first forget's attestation changed after the reinstatement")
	}
	verify(export1, f1.CommitmentSalt)
	export1b := filepath.Join(t.TempDir(), "f1-after.tar.gz")
	s.cli(t, "export", "--out", export1b, f1.Forget)
	verify(export1b, f1.CommitmentSalt)

	// A second forget is a new forget of the new generation only.
	f2 := s.forget(t, alice)
	if f2.Forget == f1.Forget || f2.CommitmentSalt == "" || f2.CommitmentSalt == f1.CommitmentSalt {
		t.Fatalf("the second forget %+v is not a new forget (first %s)", f2, f1.Forget)
	}
	if again := s.forget(t, alice); again.Forget != f2.Forget {
		t.Fatalf("a repeated forget of the reinstated subject: %s, want %s", again.Forget, f2.Forget)
	}
	s.shredded(t, fresh)
	s.shredded(t, freshSummary)
	s.shredded(t, old)
	s.open(t, bobRec)
	s.open(t, carolRec)
	s.stop()
	s = startServer(t, dir, opts)
	s.shred(t, f2.Forget)
	s.waitErased(t, f2.Forget, time.Time{})
	att2 := s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+f2.Forget+"/attestation", nil).Body
	got := attestedArtifacts(t, att2, pub)
	slices.Sort(got)
	want := []string{fresh.artifact, freshSummary.artifact}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the second forget attests artifacts %v, want the new generation's only %v (old: %s, %s)", got, want, old.artifact, oldSummary.artifact)
	}
	if got := attestedArtifacts(t, att1, pub); !slices.Contains(got, old.artifact) || !slices.Contains(got, oldSummary.artifact) || slices.Contains(got, fresh.artifact) {
		t.Fatalf("the first forget attests %v", got)
	}
	export2 := filepath.Join(t.TempDir(), "f2.tar.gz")
	s.cli(t, "export", "--out", export2, f2.Forget)
	verify(export2, f2.CommitmentSalt)
	verify(export1, f1.CommitmentSalt)
	if f := s.getForget(t, f1.Forget); f.State != "erased" {
		t.Fatalf("the first forget after the second: %+v", f)
	}

	// The log: one subject_reinstated event per reinstatement, naming the
	// generations and the forget, never the subject.
	w := &exportWorld{pub: pub, vkey: vkey}
	w.readLogFromTiles(t, s)
	var seen []attest.ReinstatedEvent
	for i, ev := range w.logEvents {
		if ev.Event == attest.EventSubjectReinstated {
			seen = append(seen, *ev.Reinstated)
			if bytes.Contains(w.logEntries[i], []byte("example.com")) {
				t.Fatalf("log entry %d names a subject: %s", i, w.logEntries[i])
			}
		}
	}
	if len(seen) != 2 || seen[0].Forget != f1.Forget || seen[0].Generation != 2 || seen[0].Previous != 1 ||
		seen[1].Forget != fc.Forget || seen[1].Generation != 1 || seen[1].Previous != 0 {
		t.Fatalf("subject_reinstated events %+v", seen)
	}
	// The new generation's commitment is its key_created event's.
	if w.logEvents[rs.LogIndex].Reinstated == nil || w.logEvents[rs.LogIndex-1].Key == nil ||
		w.logEvents[rs.LogIndex-1].Key.Subject != w.logEvents[rs.LogIndex].Reinstated.Subject || w.logEvents[rs.LogIndex-1].Key.Generation != 2 {
		t.Fatalf("entries %d and %d: %+v %+v", rs.LogIndex-1, rs.LogIndex, w.logEvents[rs.LogIndex-1], w.logEvents[rs.LogIndex])
	}
}

// TestReinstateRestore: a database restored from after a reinstatement and
// before the subject's second forget gets that forget committed again from
// the ledger (the restored database's current life of the subject has no
// forget): the new generation stays destroyed, nothing is resurrected, and
// the first forget is as it was.
func TestReinstateRestore(t *testing.T) {
	const alice = "alice@example.com"
	dir := t.TempDir()
	opts := serverOpts{Args: []string{"--cache-ttl", "1ns", "--lease-ttl", "3s"}}
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic")
	old := s.seal(t, sealReq{Subject: alice, Kind: "episodic"}, "alice, first life", "c1")
	f1 := s.forget(t, alice)
	s.shred(t, f1.Forget)
	s.waitErased(t, f1.Forget, time.Time{})
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": alice})
	fresh := s.seal(t, sealReq{Subject: alice, Kind: "episodic"}, "alice, second life", "c2")
	backup := backupTo(t, dir, "after-reinstate.db")
	f2 := s.forget(t, alice)
	s.shredded(t, fresh)
	s.stop()

	loseDatabase(t, dir)
	cli(t, "", nil, nil, "restore", "--data-dir", dir, backup).want(t, 0)
	s = startServer(t, dir, opts)
	if !strings.Contains(s.logs.String(), `"reapplied":1`) {
		t.Errorf("the start after the restore did not report the re-applied second forget:\n%s", tail(s.logs.String(), 20))
	}
	s.shredded(t, fresh)
	s.shredded(t, old)
	if again := s.forget(t, alice); again.Forget != f2.Forget {
		t.Fatalf("after the restore the forget of alice is %s, want the second forget %s", again.Forget, f2.Forget)
	}
	if f := s.getForget(t, f1.Forget); f.State != "erased" {
		t.Fatalf("the first forget after the restore: %+v", f)
	}
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: alice, Kind: "episodic", Plaintext: b64("back"), Unit: writeUnit})
}

// TestReinstatePerSubjectKeys: with per-subject Transit keys a
// reinstatement is refused (409 unsupported): the subject's key is named
// by its keyed hash, and its forget's proof reads back that it is gone.
func TestReinstatePerSubjectKeys(t *testing.T) {
	opts := vaultOpts(newVault(t), "transit", "shredd-root", "--subject-keys", "transit")
	s := startServer(t, t.TempDir(), opts)
	s.putKinds(t, "episodic")
	rec := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's record", "a")
	s.forget(t, "alice")
	s.expectProblem(t, http.StatusConflict, "unsupported", http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": "alice"})
	s.shredded(t, rec)
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: "alice", Kind: "episodic", Plaintext: b64("back"), Unit: writeUnit})
}
