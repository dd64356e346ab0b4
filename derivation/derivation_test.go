package derivation_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
)

func openGraph(t *testing.T) (*storage.DB, *derivation.Graph) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, derivation.New(db)
}

// inTx runs write in one committed transaction.
func inTx(t *testing.T, db *storage.DB, write func(tx *storage.Tx) error) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := write(tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func sid(b byte) envelope.SID { return envelope.SID{b} }

// Staged rows read by artifact alike before and after Settle, and by
// parent once settled; more artifacts than one settle chunk settle whole,
// through rows staged a few per statement (the fold's) and one each (a
// group commit's); a bulk import's rows are settled at once.
func TestStageSettleRead(t *testing.T) {
	ctx := context.Background()
	db, g := openGraph(t)
	root := derivation.Row{ID: shredd.ID{1}, Lineage: []envelope.Ref{{SID: sid(1), Gen: 1}}, Direct: map[envelope.SID]bool{sid(1): true}}
	var kids []derivation.Row
	for i := range 300 {
		kids = append(kids, derivation.Row{ID: shredd.ID{2, byte(i >> 8), byte(i)}, Parents: []shredd.ID{root.ID},
			Lineage: []envelope.Ref{{SID: sid(1), Gen: 1}, {SID: sid(2), Gen: 3}}, Direct: map[envelope.SID]bool{sid(2): true}})
	}
	inTx(t, db, func(tx *storage.Tx) error { return derivation.Stage(ctx, tx, []derivation.Row{root}, 1) })
	inTx(t, db, func(tx *storage.Tx) error { return derivation.Stage(ctx, tx, kids, derivation.FoldRowsPerInsert) })
	imported := shredd.ID{3}
	inTx(t, db, func(tx *storage.Tx) error {
		return derivation.Insert(ctx, tx, imported, []shredd.ID{root.ID}, []envelope.Ref{{SID: sid(1), Gen: 1}}, func(envelope.SID) bool { return false })
	})
	check := func(phase string) {
		t.Helper()
		last := kids[len(kids)-1]
		ps, err := g.Parents(ctx, last.ID)
		if err != nil || len(ps) != 1 || ps[0] != root.ID {
			t.Fatalf("%s: parents %v, %v", phase, ps, err)
		}
		l, err := g.LineageOf(ctx, last.ID)
		if err != nil || !slices.Equal(l, last.Lineage) {
			t.Fatalf("%s: lineage %v, %v; want %v", phase, l, err, last.Lineage)
		}
		out := map[shredd.ID][]envelope.Ref{}
		ids := []shredd.ID{root.ID, imported, {9}}
		for _, k := range kids {
			ids = append(ids, k.ID)
		}
		if err := g.LineagesOf(ctx, ids, out); err != nil || len(out) != 302 || len(out[root.ID]) != 1 || len(out[last.ID]) != 2 {
			t.Fatalf("%s: lineages of %d artifacts, %v", phase, len(out), err)
		}
	}
	check("staged")
	if c, err := g.Children(ctx, root.ID); err != nil || len(c) != 1 || c[0] != imported {
		t.Fatalf("children before settling: %v, %v; want only the imported one", c, err)
	}
	if err := g.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	check("settled")
	if c, err := g.Children(ctx, root.ID); err != nil || len(c) != 302-1 {
		t.Fatalf("children after settling: %d, %v; want 301", len(c), err)
	}
}
