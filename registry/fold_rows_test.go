package registry_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestFoldWritesEveryRow: registrations queued together, more than a
// statement's rows of lineage and parents, are in the tables once folded,
// every row of them and no other, on either store (the fold's statements
// on SQLite, the group's on PostgreSQL).
func TestFoldWritesEveryRow(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	refs := subjectRefs(t, st, "fold-", 50)
	mk := func(n int, parents []shredd.ID) registry.Registration {
		var id shredd.ID
		binary.BigEndian.PutUint64(id[:], uint64(time.Now().UnixMilli())<<16)
		binary.BigEndian.PutUint64(id[8:], uint64(n))
		r := registry.Registration{ID: id, Kind: "episodic", Sealed: true, At: time.Now(), Direct: map[envelope.SID]bool{}, Parents: parents}
		for j := range 1 + n%3 {
			ref := refs[(n*7+j*13)%len(refs)]
			r.Lineage = append(r.Lineage, ref)
			r.Direct[ref.SID] = j == 0
		}
		return r
	}
	registerAll := func(rs []registry.Registration) {
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := register(ctx, st, r); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	// Ten parents first, then 300 children of one or two of them.
	var first []registry.Registration
	for n := range 10 {
		first = append(first, mk(n, nil))
	}
	registerAll(first)
	want := map[string]int{"artifacts": 10}
	for _, r := range first {
		want["lineage"] += len(r.Lineage)
	}
	var rest []registry.Registration
	for n := 10; n < 310; n++ {
		parents := []shredd.ID{first[n%10].ID}
		if n%2 == 0 {
			parents = append(parents, first[(n+3)%10].ID)
		}
		r := mk(n, parents)
		rest = append(rest, r)
		want["artifacts"]++
		want["lineage"] += len(r.Lineage)
		want["parents"] += len(parents)
	}
	registerAll(rest)
	if err := st.Registry.Fold(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for name, q := range map[string]string{
		"artifacts": `SELECT count(*) FROM artifacts`,
		"lineage":   `SELECT (SELECT count(*) FROM lineage) + (SELECT count(*) FROM lineage_staged)`,
		"parents":   `SELECT (SELECT count(*) FROM artifact_parents) + (SELECT count(*) FROM parents_staged)`,
	} {
		var n int
		if err := st.DB.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		got[name] = n
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows after the fold: %v, want %v", got, want)
	}
	// Each artifact's own rows: its lineage at its generations, its parents.
	for _, r := range append(first, rest...) {
		var lineage, parents int
		if err := st.DB.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM lineage WHERE artifact=?) + (SELECT count(*) FROM lineage_staged WHERE artifact=?),
			(SELECT count(*) FROM artifact_parents WHERE artifact=?) + (SELECT count(*) FROM parents_staged WHERE artifact=?)`,
			r.ID[:], r.ID[:], r.ID[:], r.ID[:]).Scan(&lineage, &parents); err != nil {
			t.Fatal(err)
		}
		if lineage != len(r.Lineage) || parents != len(r.Parents) {
			t.Fatalf("artifact %x: %d lineage rows and %d parents, want %d and %d", r.ID[:4], lineage, parents, len(r.Lineage), len(r.Parents))
		}
	}
}
