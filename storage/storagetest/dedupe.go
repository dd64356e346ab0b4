package storagetest

import (
	"bytes"
	"database/sql"
	"fmt"
	"testing"
)

// ForgetDedupe checks migration 0007 (one forget per subject) on a
// database made by an earlier release, which may hold several forgets of
// one subject: migrate(6) brings db to schema 6, the test fills it with
// duplicates and the rows naming them, then migrate(0) brings it to the
// newest schema. Per subject the most advanced forget is kept (erased >
// shredded > committed > requested; ties by committed_at, requested_at,
// id), every other id becomes an alias of it, their acked rows go (their
// log indexes and signed holder_acks stay, naming them), and the database
// then refuses a second forget of a subject. rebind turns ? placeholders into the engine's.
func ForgetDedupe(t *testing.T, db *sql.DB, rebind func(string) string, migrate func(upTo int) error) {
	t.Helper()
	if err := migrate(6); err != nil {
		t.Fatalf("migrate to schema 6: %v", err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(rebind(q), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	id := func(b byte) []byte { return bytes.Repeat([]byte{b}, 16) }
	sid := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	null := sql.NullInt64{}
	at := func(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }
	forget := func(f byte, s byte, state string, requested int64, committed, shredded sql.NullInt64) {
		t.Helper()
		exec(`INSERT INTO forgets(id, sid, state, requested_at, deadline, committed_at, shredded_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id(f), sid(s), state, requested, int64(1e12), committed, shredded)
	}
	// Subject 1: three forgets, requested, committed and shredded: the
	// shredded one (C) is kept though it was committed last.
	forget('A', 1, "requested", 100, null, null)
	forget('B', 1, "committed", 200, at(300), null)
	forget('C', 1, "shredded", 150, at(400), at(500))
	// Subject 2: two shredded forgets committed at once: the one
	// requested first (F) is kept.
	forget('E', 2, "shredded", 60, at(50), at(70))
	forget('F', 2, "shredded", 40, at(50), at(80))
	// Subject 3: one forget, left as it is.
	forget('G', 3, "committed", 10, at(20), null)
	exec(`INSERT INTO holder_acks(forget, holder, artifacts, payload, signature, received_at) VALUES (?, 'h1', 'x', ?, ?, 1)`, id('B'), []byte("p"), []byte("s"))
	var ack int64
	if err := db.QueryRow(`SELECT max(id) FROM holder_acks`).Scan(&ack); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO acked(forget, artifact, holder, ack) VALUES (?, ?, 'h1', ?)`, id('B'), id('x'), ack)
	exec(`INSERT INTO acked(forget, artifact, holder, ack) VALUES (?, ?, 'h1', ?)`, id('C'), id('y'), ack)
	exec(`INSERT INTO forget_log(forget, idx) VALUES (?, 7)`, id('B'))
	exec(`INSERT INTO forget_log(forget, idx) VALUES (?, 9)`, id('C'))
	exec(`INSERT INTO forget_log(forget, idx) VALUES (?, 11)`, id('E'))

	if err := migrate(0); err != nil {
		t.Fatalf("migration 0007 on duplicate forgets: %v", err)
	}
	pairs := func(q string) map[string]string {
		t.Helper()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var a, b []byte
			if err := rows.Scan(&a, &b); err != nil {
				t.Fatal(err)
			}
			out[string(a[:1])+"/"+string(b[:1])] = string(b[:1])
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, got map[string]string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
			return
		}
		for _, w := range want {
			if _, ok := got[w]; !ok {
				t.Errorf("%s: got %v, want %v", what, got, want)
				return
			}
		}
	}
	check("forgets (id/state initial)", pairs(`SELECT id, state FROM forgets`), "C/s", "F/s", "G/c")
	check("aliases (id/kept)", pairs(`SELECT id, forget FROM forget_aliases`), "A/C", "B/C", "E/F")
	check("acked (forget/artifact)", pairs(`SELECT forget, artifact FROM acked`), "C/y")
	check("holder_acks (forget/holder)", pairs(`SELECT forget, holder FROM holder_acks`), "B/h")
	rows := map[string]bool{}
	r, err := db.Query(`SELECT forget, idx FROM forget_log`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var f []byte
		var idx int64
		if err := r.Scan(&f, &idx); err != nil {
			t.Fatal(err)
		}
		rows[fmt.Sprintf("%c/%d", f[0], idx)] = true
	}
	r.Close()
	if want := map[string]bool{"B/7": true, "C/9": true, "E/11": true}; len(rows) != len(want) || !rows["B/7"] || !rows["C/9"] || !rows["E/11"] {
		t.Errorf("forget_log: got %v, want %v", rows, want)
	}
	// The unique index now holds: a second forget of subject 3 is refused.
	if _, err := db.Exec(rebind(`INSERT INTO forgets(id, sid, state, requested_at, deadline) VALUES (?, ?, 'requested', 1, 1)`), id('H'), sid(3)); err == nil {
		t.Error("a second forget of one subject was inserted after migration 0007: no unique index on forgets(sid)")
	}
}
