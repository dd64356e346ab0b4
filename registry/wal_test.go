package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// A restore of a backup registers again, from the registration WAL, what
// was sealed and registered after the backup: artifacts, holders,
// parents and lineage, before the registry answers anything.
func TestWALRestoreReplays(t *testing.T) {
	if os.Getenv(shreddtest.StoreEnv) == "postgres" {
		t.Skip("the registration WAL is SQLite's; PostgreSQL writes registrations in transactions (TestQueue covers both)")
	}
	ctx := context.Background()
	// A segment per group: the folded segments a backup covers go, the
	// ones after it stay (RecordBackup).
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds, Registry: registry.Options{SegmentBytes: 1}})
	before := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "before")
	// The backup: the point first, then the copy, then the record. (The
	// fold first, so that the point is exact: a point read while the fold
	// lags is lower than the copy, and keeps more.)
	if err := st.Registry.Fold(ctx); err != nil {
		t.Fatal(err)
	}
	point, err := registry.BackupPoint(ctx, st.DB)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := st.DB.ExecContext(ctx, `VACUUM INTO ?`, backup); err != nil {
		t.Fatal(err)
	}
	if err := registry.RecordBackup(ctx, st.DB, point); err != nil {
		t.Fatal(err)
	}
	after := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "summary", Subjects: []string{"bob"}, Parents: []shredd.ID{before.Artifact}}, "after")
	held, err := st.Sealer.Register(ctx, shredd.Source{Kind: "embedding", Holder: "ann-1", Parents: []shredd.ID{after.Artifact}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.Registry.GetArtifact(ctx, held.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantRefs, err := st.Registry.LineageOf(ctx, held.ID)
	if err != nil {
		t.Fatal(err)
	}
	st.Registry.Close()
	segs, _ := filepath.Glob(filepath.Join(st.Dir, registry.WALDir, "*.seg"))
	if len(segs) != 2 {
		t.Fatalf("%d segments kept, want the two after the backup", len(segs))
	}

	// The backup in place of the database, the WAL as it is.
	db, err := sqlite.Open(backup)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg, err := registry.Open(ctx, db, st.Keys, registry.Options{WALDir: filepath.Join(st.Dir, registry.WALDir), WALKey: registry.WALKey(shreddtest.Secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, id := range []shredd.ID{before.Artifact, after.Artifact, held.ID} {
		if ok, err := reg.Registered(ctx, id); err != nil || !ok {
			t.Fatalf("artifact %s after the restore: registered %v, %v", id, ok, err)
		}
	}
	got, gotRefs := readArtifact(t, reg, held.ID)
	if got.Holder != "ann-1" || got.Kind != "embedding" || got.Sealed || !slices.Equal(got.Parents, want.Parents) || got.Lineage != want.Lineage || !slices.Equal(gotRefs, wantRefs) {
		t.Fatalf("replayed artifact %+v, want %+v", got, want)
	}
	// Settled and read by subject: the cascade of bob's forget finds it.
	bob := st.Hasher.SID("bob")
	if err := reg.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if deps, err := reg.SubjectArtifacts(ctx, bob); err != nil || len(deps) != 2 {
		t.Fatalf("bob's artifacts after the restore: %d, %v; want the summary and the embedding", len(deps), err)
	}
}

// What a registration writer acknowledged and Close could not fold (the
// process died) is folded by the next Open, before it answers.
func TestWALFoldsAtOpen(t *testing.T) {
	if os.Getenv(shreddtest.StoreEnv) == "postgres" {
		t.Skip("the registration WAL is SQLite's")
	}
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: shreddtest.Kinds})
	rec := shreddtest.Seal(t, st.Sealer, shredd.Source{Kind: "episodic", Subjects: []string{"carol"}}, "x")
	// Forget the fold: the tables as a crash right after the
	// acknowledgement would leave them (the WAL holds the registration).
	st.Registry.Close()
	if _, err := st.DB.ExecContext(ctx, `DELETE FROM artifacts WHERE id=?`, rec.Artifact[:]); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM lineage_staged WHERE artifact=?`, `DELETE FROM lineage WHERE artifact=?`} {
		if _, err := st.DB.ExecContext(ctx, q, rec.Artifact[:]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DB.ExecContext(ctx, `UPDATE registry_wal SET folded = folded - 1`); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, st.DB, st.Keys, registry.Options{WALDir: filepath.Join(st.Dir, registry.WALDir), WALKey: registry.WALKey(shreddtest.Secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if ok, err := reg.Registered(ctx, rec.Artifact); err != nil || !ok {
		t.Fatalf("registered after the restart: %v, %v", ok, err)
	}
	if f, err := lineageFacts(ctx, reg, st.Hasher.SID("carol"), 0, 0); err != nil || f.Total != 1 {
		t.Fatalf("carol's lineage after the restart: %+v, %v", f, err)
	}
}
