package main

import (
	"database/sql"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/shredd/shredd/testkit/pgtest"
)

// TestForgetDedupeUpgrade: a PostgreSQL database of schema 6 holding three
// forgets of one subject, as concurrent forgets through nodes of an
// earlier release made them (each id answered 202 to some caller, one of
// them in the node's forget ledger and its record in Vault), is taken by
// this release: migration 0007 keeps the forget committed first, the node
// starts, GET of every old id answers the kept forget, the subject stays
// refused (410), a forget of it again answers the kept one, and a restart
// is clean: the ledger line and record naming a merged id count as
// present, nothing is committed again.
func TestForgetDedupeUpgrade(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	v := newVault(t)
	opts := vaultOpts(v, "transit", "shredd-dedupe", "--store", dsn)
	a := clusterNode(t, "", opts)
	a.putKinds(t, "episodic")
	alice := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice likes tea", "m1")
	bob := a.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "bob likes coffee", "m2")
	first := a.forget(t, "alice@example.com") // in a's ledger and Vault record
	a.stop()

	// The database as an earlier release left it: schema 6 (no unique
	// index on forgets(sid), no aliases), and two more forgets of alice,
	// as two other nodes wrote them at the same time: one committed a
	// little earlier than first (so it is the one kept), one still
	// requested. Their commitment salts are not kept (sealed under their
	// own ids, which a copy of first's row cannot give).
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const kept, requested = "0190000000000000000000000000000a", "0190000000000000000000000000000b"
	firstID, _ := hex.DecodeString(first.Forget)
	keptID, _ := hex.DecodeString(kept)
	reqID, _ := hex.DecodeString(requested)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DELETE FROM migrations WHERE version >= 7`,
		`DROP TABLE reinstatements`, // migration 0012's
		`DROP INDEX forgets_one_per_life`,
		`ALTER TABLE forgets DROP COLUMN reinstated_at`,
		`DROP TABLE probes`, // migration 0011's
		`ALTER TABLE holders DROP COLUMN probe_compact`,
		`DROP TABLE read_links`, // migration 0010's
		`ALTER TABLE leases DROP COLUMN reader`,
		`ALTER TABLE leases DROP COLUMN unit`,
		`ALTER TABLE tokens DROP COLUMN reads`,
		`ALTER TABLE artifacts DROP COLUMN writer`,
		`DROP INDEX artifacts_facts`,          // migration 0009's
		`DROP INDEX forgets_by_state_rekeyed`, // migration 0008's, made after 0007's
		`DROP INDEX forgets_by_state_marker`,
		`DROP INDEX buckets_by_root_version`,
		`DROP TABLE IF EXISTS forget_aliases`,
		`CREATE INDEX forgets_by_sid ON forgets(sid)`,
		`CREATE TEMP TABLE dup ON COMMIT DROP AS SELECT * FROM forgets WHERE id = '` + `\x` + first.Forget + `'`,
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, step := range []struct {
		q    string
		args []any
	}{
		{`UPDATE dup SET id = $1, committed_at = committed_at - 1000000, salt_sealed = NULL`, []any{keptID}},
		{`INSERT INTO forgets SELECT * FROM dup`, nil},
		{`UPDATE dup SET id = $1, state = 'requested', committed_at = NULL, barrier = NULL, requested_at = requested_at + 2000000`, []any{reqID}},
		{`INSERT INTO forgets SELECT * FROM dup`, nil},
	} {
		if _, err := tx.Exec(step.q, step.args...); err != nil {
			t.Fatalf("%s: %v", step.q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM forgets WHERE sid = (SELECT sid FROM forgets WHERE id = $1)`, firstID); n != 3 {
		t.Fatalf("the schema-6 database holds %d forgets of alice, want 3", n)
	}

	check := func(s *server) {
		t.Helper()
		for _, id := range []string{first.Forget, kept, requested} {
			f := s.getForget(t, id)
			if f.Forget != kept || f.State != "committed" {
				t.Errorf("GET /v1/forgets/%s: forget %s state %s, want the kept forget %s committed", id, f.Forget, f.State, kept)
			}
		}
		var vf forgetView
		s.expect(t, http.StatusOK, http.MethodPost, "/v1/forgets/"+first.Forget+"/verify", nil).into(t, &vf)
		if vf.Forget != kept {
			t.Errorf("POST /v1/forgets/%s/verify: forget %s, want the kept forget %s", first.Forget, vf.Forget, kept)
		}
		s.shredded(t, alice)
		s.open(t, bob)
		r := s.do(t, http.MethodPost, "/v1/encrypt", sealReq{Subject: "alice@example.com", Kind: "episodic", Plaintext: b64("again"), Context: b64("x"), Unit: writeUnit})
		if r.Status != http.StatusGone {
			t.Errorf("encrypt for alice after the upgrade: %d %s, want 410", r.Status, r.Body)
		}
		if f := s.forget(t, "alice@example.com"); f.Forget != kept {
			t.Errorf("forget of alice again: %s, want the kept forget %s", f.Forget, kept)
		}
		if n := count(`SELECT count(*) FROM forgets WHERE sid = (SELECT sid FROM forgets WHERE id = $1)`, keptID); n != 1 {
			t.Errorf("%d forgets of alice in the database, want 1", n)
		}
		if n := count(`SELECT count(*) FROM forget_aliases WHERE forget = $1 AND id IN ($2, $3)`, keptID, firstID, reqID); n != 2 {
			t.Errorf("%d aliases of the kept forget, want 2 (the first and the requested one)", n)
		}
	}
	// a's data directory: its ledger and Vault record name first.
	s := startServer(t, a.dataDir, opts)
	check(s)
	s.stop()
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, "lacked forgets of the forget ledger") {
			t.Errorf("upgrade start: %s", l)
		}
	}
	// A restart of the upgraded node is clean.
	s = startServer(t, a.dataDir, opts)
	check(s)
	s.stop()
}
