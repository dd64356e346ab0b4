package keystore_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/storage"
)

// interruptedRekey builds a one-bucket tree of 300 subjects, forgets the
// first, and cuts its bucket re-key after the first chunk: a trigger aborts
// the second chunk's transaction, as a crash there would lose it. (The
// process-level crash at "rekey:chunk" is cmd/shredd's TestCrashRecovery.)
// It returns the database and the live subjects' keys.
func interruptedRekey(t *testing.T) (string, *storage.DB, map[envelope.SID][]byte) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, db := openTreeOpts(t, dir, localRoot, keystore.Options{Buckets: 1})
	keys := createKeys(t, s, "subject-", 300)
	gone := sid("subject-0")
	delete(keys, gone)
	destroy(t, s, db, gone)
	if _, err := db.ExecContext(ctx, `CREATE TRIGGER cut_rekey BEFORE UPDATE OF bucket_gen ON subjects
		WHEN (SELECT count(*) FROM subjects WHERE bucket_gen=NEW.bucket_gen) >= 32
		BEGIN SELECT RAISE(ABORT, 'cut after the first chunk'); END`); err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.NewShredder(s).RekeyBucket(ctx, 0); err == nil {
		t.Fatal("the re-key was not cut after its first chunk")
	}
	if _, err := db.ExecContext(ctx, `DROP TRIGGER cut_rekey`); err != nil {
		t.Fatal(err)
	}
	// Half done: the next key is committed, the first chunk rewrapped.
	var pending, moved, left int
	if err := db.QueryRowContext(ctx, `SELECT next_wrapped IS NOT NULL FROM buckets WHERE id=0`).Scan(&pending); err != nil || pending != 1 {
		t.Fatalf("next key after the crash: %d, %v", pending, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE bucket_gen=2), count(*) FILTER (WHERE bucket_gen=1)
		FROM subjects WHERE wrapped IS NOT NULL`).Scan(&moved, &left); err != nil || moved == 0 || left == 0 {
		t.Fatalf("after the crash %d keys rewrapped, %d not (%v): want a part of each", moved, left, err)
	}
	return dir, db, keys
}

// reopen opens a second store on the same files: no cache from before.
func reopen(t *testing.T, dir string, db *storage.DB) *keystore.Tree {
	t.Helper()
	root, err := local.Open(filepath.Join(dir, "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := keystore.Open(context.Background(), db, root, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkKeys(t *testing.T, s *keystore.Tree, keys map[envelope.SID][]byte) {
	t.Helper()
	for sid, want := range keys {
		got, err := s.KeyAt(context.Background(), envelope.Ref{SID: sid, Gen: 1})
		if err != nil || !bytes.Equal(got.Key, want) {
			t.Fatalf("key of %x: %v", sid[:4], err)
		}
	}
	if _, err := s.KeyAt(context.Background(), envelope.Ref{SID: sid("subject-0"), Gen: 1}); err == nil {
		t.Fatal("the forgotten subject's key opens")
	}
}

func checkRekeyed(t *testing.T, db *storage.DB, gen int) {
	t.Helper()
	var g, pending, stale int
	if err := db.QueryRowContext(context.Background(), `SELECT gen, next_wrapped IS NOT NULL FROM buckets WHERE id=0`).Scan(&g, &pending); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM subjects WHERE wrapped IS NOT NULL AND bucket_gen<>?`, g).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if g != gen || pending != 0 || stale != 0 {
		t.Fatalf("bucket at generation %d (want %d), re-key pending %d, %d keys under another generation", g, gen, pending, stale)
	}
}

// TestRekeyResumesAfterCrash: a bucket re-key cut after its first chunk
// leaves every live key readable, new keys creatable, and the next call
// finishes it; an epoch finishes it too, before it rewraps the bucket keys.
func TestRekeyResumesAfterCrash(t *testing.T) {
	ctx := context.Background()
	t.Run("next call", func(t *testing.T) {
		dir, db, keys := interruptedRekey(t)
		s := reopen(t, dir, db)
		checkKeys(t, s, keys)
		k, err := s.Key(ctx, sid("created meanwhile"))
		if err != nil {
			t.Fatal(err)
		}
		keys[k.Ref.SID] = bytes.Clone(k.Key)
		if _, err := keystore.NewShredder(s).RekeyBucket(ctx, 0); err != nil {
			t.Fatal(err)
		}
		checkRekeyed(t, db, 2)
		checkKeys(t, s, keys)
		checkKeys(t, reopen(t, dir, db), keys)
	})
	t.Run("epoch", func(t *testing.T) {
		dir, db, keys := interruptedRekey(t)
		s := reopen(t, dir, db)
		e, err := keystore.NewShredder(s).RunEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.State != "done" || len(e.Retired) != 1 {
			t.Fatalf("epoch: %+v", e)
		}
		checkRekeyed(t, db, 2)
		checkKeys(t, reopen(t, dir, db), keys)
	})
}
