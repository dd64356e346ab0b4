package keystore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// rootFunc opens the root store for a data directory.
type rootFunc func(t *testing.T, dir string) keystore.RootStore

func localRoot(t *testing.T, dir string) keystore.RootStore {
	t.Helper()
	root, err := local.Open(filepath.Join(dir, "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func openTree(t *testing.T, dir string, buckets int) (*keystore.Tree, *storage.DB) {
	t.Helper()
	return openTreeWith(t, dir, buckets, localRoot)
}

func openTreeWith(t *testing.T, dir string, buckets int, rootOf rootFunc) (*keystore.Tree, *storage.DB) {
	t.Helper()
	return openTreeOpts(t, dir, rootOf, keystore.Options{Buckets: buckets})
}

func openTreeOpts(t *testing.T, dir string, rootOf rootFunc, opts keystore.Options) (*keystore.Tree, *storage.DB) {
	t.Helper()
	root := rootOf(t, dir)
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := keystore.Open(context.Background(), db, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// createKeys creates the keys of n subjects named prefix0, prefix1, ... and
// returns copies of them.
func createKeys(t *testing.T, s *keystore.Tree, prefix string, n int) map[envelope.SID][]byte {
	t.Helper()
	keys := map[envelope.SID][]byte{}
	for i := range n {
		k, err := s.Key(context.Background(), sid(fmt.Sprint(prefix, i)))
		if err != nil {
			t.Fatal(err)
		}
		keys[k.Ref.SID] = bytes.Clone(k.Key)
	}
	return keys
}

func sid(name string) envelope.SID { return envelope.SID(sha256.Sum256([]byte(name))) }

func forget(t *testing.T, s *keystore.Tree, db *storage.DB, id envelope.SID) {
	t.Helper()
	destroy(t, s, db, id)
	if _, err := keystore.NewShredder(s).RekeyBucket(context.Background(), s.BucketOf(id)); err != nil {
		t.Fatal(err)
	}
}

// destroy commits a subject's forget (ForgetTx) and purges its key, leaving
// the bucket re-key to the caller.
func destroy(t *testing.T, s *keystore.Tree, db *storage.DB, id envelope.SID) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetTx(ctx, tx, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s.Purge(id)
}

func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	s, db := openTree(t, t.TempDir(), 8)
	a, b := sid("alice"), sid("bob")
	ka, err := s.Key(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if ka.Ref.Gen != 1 || len(ka.Key) != envelope.KeySize {
		t.Fatalf("new key: gen %d len %d", ka.Ref.Gen, len(ka.Key))
	}
	again, err := s.KeyAt(ctx, ka.Ref)
	if err != nil || !bytes.Equal(again.Key, ka.Key) {
		t.Fatalf("KeyAt: %v", err)
	}
	kb, err := s.Key(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeyAt(ctx, envelope.Ref{SID: sid("nobody"), Gen: 1}); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("unknown subject: %v, want ErrNotFound", err)
	}
	if _, err := s.KeyAt(ctx, envelope.Ref{SID: a, Gen: 2}); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("future generation: %v, want ErrNotFound", err)
	}
	forget(t, s, db, a)
	if _, err := s.KeyAt(ctx, ka.Ref); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("forgotten KeyAt: %v, want ErrShredded", err)
	}
	if _, err := s.Key(ctx, a); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("forgotten Key: %v, want ErrShredded", err)
	}
	if err := s.CheckLive(ctx, db, []envelope.Ref{kb.Ref, ka.Ref}); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("CheckLive with a forgotten ref: %v", err)
	}
	if err := s.CheckLive(ctx, db, []envelope.Ref{kb.Ref}); err != nil {
		t.Fatalf("CheckLive of a live ref: %v", err)
	}
	// A subject forgotten before it was ever seen is refused too.
	forget(t, s, db, sid("never-seen"))
	if _, err := s.Key(ctx, sid("never-seen")); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("tombstoned subject: %v, want ErrShredded", err)
	}
	// Bob survives alice's forget, the re-keys and an epoch.
	e, err := keystore.NewShredder(s).RunEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != "done" || e.ToVersion != 2 || len(e.Retired) != 1 || e.Retired[0] != 1 {
		t.Fatalf("epoch = %+v", e)
	}
	kb2, err := s.KeyAt(ctx, kb.Ref)
	if err != nil || !bytes.Equal(kb2.Key, kb.Key) {
		t.Fatalf("bob after epoch: %v", err)
	}
}

func TestBucketsFixedAtCreation(t *testing.T) {
	dir := t.TempDir()
	openTree(t, dir, 16)
	root, _ := local.Open(filepath.Join(dir, "root.key"))
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := keystore.Open(context.Background(), db, root, keystore.Options{Buckets: 32}); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("reopen with other bucket count: %v, want ErrInvalid", err)
	}
}

// TestConcurrentCreateAndRekey creates keys in one bucket while it is re-keyed
// over and over: every key created must still open afterwards.
func TestConcurrentCreateAndRekey(t *testing.T) {
	ctx := context.Background()
	s, _ := openTree(t, t.TempDir(), 1)
	var wg sync.WaitGroup
	refs := make(chan envelope.SubjectKey, 400)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				k, err := s.Key(ctx, sid(string(rune('a'+g))+string(rune(i))))
				if err != nil {
					t.Error(err)
					return
				}
				refs <- envelope.SubjectKey{Ref: k.Ref, Key: bytes.Clone(k.Key)}
			}
		}(g)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			if _, err := keystore.NewShredder(s).RekeyBucket(ctx, 0); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	<-done
	close(refs)
	// A fresh store on the same files (no cache) must open every key.
	for k := range refs {
		got, err := s.KeyAt(ctx, k.Ref)
		if err != nil || !bytes.Equal(got.Key, k.Key) {
			t.Fatalf("key lost after concurrent re-key: %v", err)
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(filepath.Join(dst, e.Name()), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // modes kept, as a backup tool does
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackupCannotRecoverForgottenKey is the backup test of docs/design.md: a copy
// of the whole data directory taken before a forget, combined with the root
// file as it is after the epoch, cannot recover the forgotten subject's key —
// neither through its own bucket keys (their root version is destroyed) nor
// through the live database's bucket key (it was re-keyed). A copy taken
// after the epoch still serves the live subjects.
//
// It runs against the local root file and against a real Vault Transit key.
func TestBackupCannotRecoverForgottenKey(t *testing.T) {
	t.Run("root=local", func(t *testing.T) { backupTest(t, localRoot, true) })
	t.Run("root=vault", func(t *testing.T) {
		srv := vaulttest.Dev(t)
		key := fmt.Sprintf("shredd-backup-%d", time.Now().UnixNano())
		backupTest(t, func(t *testing.T, _ string) keystore.RootStore {
			r, err := vault.Open(context.Background(), vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, false)
	})
}

// backupTest runs the backup test with root stores from rootOf. rootFile says
// the root lives in the data directory (the local store), so the attacker's
// copy is given the current root file; a Vault root is simply the same key.
func backupTest(t *testing.T, rootOf rootFunc, rootFile bool) {
	ctx := context.Background()
	live := t.TempDir()
	s, db := openTreeWith(t, live, 4, rootOf)
	alice := sid("alice@example.com")
	var bob envelope.SID
	ka, err := s.Key(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	// Bob shares alice's bucket, so the re-key must carry him over.
	var bobRef envelope.SubjectKey
	for i := 0; ; i++ {
		cand := sid("bob" + string(rune('0'+i)) + "@example.com")
		if s.BucketOf(cand) == s.BucketOf(alice) {
			bob = cand
			break
		}
	}
	if bobRef, err = s.Key(ctx, bob); err != nil {
		t.Fatal(err)
	}
	bobRef = envelope.SubjectKey{Ref: bobRef.Ref, Key: bytes.Clone(bobRef.Key)}
	aliceKey := bytes.Clone(ka.Key)

	before := t.TempDir()
	copyDir(t, live, before) // db, -wal, -shm and root.key, as a file-level backup would

	forget(t, s, db, alice)
	if _, err := keystore.NewShredder(s).RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}

	// 1. The old copy with the current root (file).
	if rootFile {
		copyFile(t, filepath.Join(live, "root.key"), filepath.Join(before, "root.key"))
	}
	old, oldDB := openTreeWith(t, before, 4, rootOf)
	if _, err := old.KeyAt(ctx, ka.Ref); !errors.Is(err, keystore.ErrVersionDestroyed) {
		t.Fatalf("backup + current root opened alice's key: err=%v, want ErrVersionDestroyed", err)
	}
	// Every bucket key of the backup is now unopenable.
	rows, err := oldDB.QueryContext(ctx, `SELECT wrapped FROM buckets`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Root().Unwrap(ctx, [][]byte{b}); !errors.Is(err, keystore.ErrVersionDestroyed) {
			t.Fatalf("a backed-up bucket key still unwraps: %v", err)
		}
	}
	rows.Close()

	// 2. The old copy's wrapped DEK with the live database's bucket keys.
	if _, err := oldDB.ExecContext(ctx, `ATTACH DATABASE ? AS cur`, filepath.Join(live, "shredd.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := oldDB.ExecContext(ctx, `DELETE FROM buckets`); err != nil {
		t.Fatal(err)
	}
	if _, err := oldDB.ExecContext(ctx, `INSERT INTO buckets SELECT * FROM cur.buckets`); err != nil {
		t.Fatal(err)
	}
	// Pretend the old row were at the live bucket generation, to try the key itself.
	if _, err := oldDB.ExecContext(ctx, `UPDATE subjects SET bucket_gen=(SELECT gen FROM buckets WHERE id=subjects.bucket)`); err != nil {
		t.Fatal(err)
	}
	hybrid, err := keystore.Open(ctx, oldDB, old.Root(), keystore.Options{Buckets: 4})
	if err != nil {
		t.Fatal(err)
	}
	k, err := hybrid.KeyAt(ctx, ka.Ref)
	if err == nil {
		t.Fatalf("backup DEK + live bucket key recovered a key (equal to alice's: %v)", bytes.Equal(k.Key, aliceKey))
	}
	if !errors.Is(err, keystore.ErrCorrupt) {
		t.Fatalf("backup DEK + live bucket key: %v, want ErrCorrupt", err)
	}
	// Bob's old row fails the same way: the old DEK wraps are dead weight.

	// 3. A copy taken after the epoch serves live subjects.
	after := t.TempDir()
	if err := db.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	copyDir(t, live, after)
	restored, _ := openTreeWith(t, after, 4, rootOf)
	got, err := restored.KeyAt(ctx, bobRef.Ref)
	if err != nil || !bytes.Equal(got.Key, bobRef.Key) {
		t.Fatalf("restored copy lost bob's key: %v", err)
	}
	if _, err := restored.KeyAt(ctx, ka.Ref); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("restored copy: alice %v, want ErrShredded", err)
	}
}

// TestCreateKeys checks the bulk path: every subject gets a key that opens,
// a second call changes nothing, and a forgotten subject is not brought back.
func TestCreateKeys(t *testing.T) {
	ctx := context.Background()
	s, db := openTree(t, t.TempDir(), 8)
	var sids []envelope.SID
	for i := 0; i < 25_000; i++ {
		sids = append(sids, sid(fmt.Sprint("bulk-", i)))
	}
	forget(t, s, db, sids[7])
	if err := s.BulkCreateKeys(ctx, sids, nil); err != nil {
		t.Fatal(err)
	}
	k0, err := s.KeyAt(ctx, envelope.Ref{SID: sids[0], Gen: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.Clone(k0.Key)
	if err := s.BulkCreateKeys(ctx, sids[:100], nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 9_999, 10_000, 24_999} {
		if _, err := s.KeyAt(ctx, envelope.Ref{SID: sids[i], Gen: 1}); err != nil {
			t.Fatalf("subject %d: %v", i, err)
		}
	}
	if k, _ := s.KeyAt(ctx, envelope.Ref{SID: sids[0], Gen: 1}); !bytes.Equal(k.Key, first) {
		t.Fatal("a second BulkCreateKeys replaced an existing key")
	}
	if _, err := s.Key(ctx, sids[7]); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("forgotten subject after BulkCreateKeys: %v, want ErrShredded", err)
	}
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM subjects WHERE state=1`).Scan(&n); err != nil || n != len(sids)-1 {
		t.Fatalf("%d live subjects, want %d (%v)", n, len(sids)-1, err)
	}
}
