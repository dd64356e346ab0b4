package keystore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
)

// forgetMany builds a tree of n subjects over buckets buckets in db (a
// SQLite file in dir when nil), forgets every seventh subject and returns
// the database, the live keys, the forgotten subjects and their buckets.
func forgetMany(t *testing.T, dir string, db *storage.DB, buckets, n int) (*keystore.Tree, *storage.DB, map[envelope.SID][]byte, []envelope.SID, []int) {
	t.Helper()
	var s *keystore.Tree
	if db == nil {
		s, db = openTreeOpts(t, dir, localRoot, keystore.Options{Buckets: buckets})
	} else {
		var err error
		if s, err = keystore.Open(context.Background(), db, localRoot(t, dir), keystore.Options{Buckets: buckets}); err != nil {
			t.Fatal(err)
		}
	}
	keys := createKeys(t, s, "subject-", n)
	var gone []envelope.SID
	var bs []int
	for i := 0; i < n; i += 7 {
		id := sid(fmt.Sprint("subject-", i))
		delete(keys, id)
		destroy(t, s, db, id)
		gone = append(gone, id)
		bs = append(bs, s.BucketOf(id))
	}
	return s, db, keys, gone, bs
}

// checkMany checks that every live key opens and no forgotten one does.
func checkMany(t *testing.T, s *keystore.Tree, keys map[envelope.SID][]byte, gone []envelope.SID) {
	t.Helper()
	ctx := context.Background()
	for id, want := range keys {
		got, err := s.KeyAt(ctx, envelope.Ref{SID: id, Gen: 1})
		if err != nil || !bytes.Equal(got.Key, want) {
			t.Fatalf("key of %x: %v", id[:4], err)
		}
	}
	for _, id := range gone {
		if _, err := s.KeyAt(ctx, envelope.Ref{SID: id, Gen: 1}); err == nil {
			t.Fatalf("the forgotten key of %x opens", id[:4])
		}
	}
}

// checkGens checks that each bucket of bs is at generation 2 with no re-key
// pending and no live key under another generation.
func checkGens(t *testing.T, db *storage.DB, bs []int) {
	t.Helper()
	for _, b := range bs {
		var g, pending, stale int
		if err := db.QueryRowContext(context.Background(), `SELECT gen, CASE WHEN next_wrapped IS NULL THEN 0 ELSE 1 END,
			(SELECT count(*) FROM subjects WHERE bucket=buckets.id AND wrapped IS NOT NULL AND bucket_gen<>buckets.gen)
			FROM buckets WHERE id=?`, b).Scan(&g, &pending, &stale); err != nil {
			t.Fatal(err)
		}
		if g != 2 || pending != 0 || stale != 0 {
			t.Fatalf("bucket %d at generation %d, re-key pending %d, %d keys under another generation", b, g, pending, stale)
		}
	}
}

// TestRekeyBuckets: one pass re-keys the buckets of many forgets, small
// ones in groups and large ones chunk by chunk; every forgotten key is
// gone after it and after the epoch, every other key still opens, under
// the buckets' next generation. On the database SHREDD_TEST_STORE names.
func TestRekeyBuckets(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		buckets, n int
	}{
		{"small buckets", 128, 700},   // about 5 keys a bucket: grouped
		{"large buckets", 4, 300},     // 75 keys a bucket: chunked
		{"both", 16, 16 * rekeyChunk}, // about 32 a bucket: some of each
		{"many groups", 1024, 3000},   // several groups of 128 buckets
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, db, keys, gone, bs := forgetMany(t, dir, envDB(t, dir), tc.buckets, tc.n)
			// then runs in each switch, which it sees done: the buckets at
			// their next generation, before the commit.
			seen := map[int]int64{}
			markers, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, func(ctx context.Context, tx *storage.Tx, switched []int, marker int64) error {
				for _, b := range switched {
					if _, ok := seen[b]; ok {
						return fmt.Errorf("bucket %d switched twice", b)
					}
					seen[b] = marker
					var g int
					if err := tx.QueryRowContext(ctx, `SELECT gen FROM buckets WHERE id=?`, b).Scan(&g); err != nil || g != 2 {
						return fmt.Errorf("bucket %d at generation %d in its switch: %v", b, g, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				if m, ok := markers[b]; !ok || seen[b] != m {
					t.Fatalf("bucket %d: marker %d (%v), switched with %d", b, m, ok, seen[b])
				}
			}
			if len(seen) != len(markers) {
				t.Fatalf("%d buckets switched, %d markers", len(seen), len(markers))
			}
			checkGens(t, db, bs)
			checkMany(t, s, keys, gone)
			checkMany(t, reopen(t, dir, db), keys, gone)
			if e, err := keystore.NewShredder(s).RunEpoch(ctx); err != nil || e.State != "done" {
				t.Fatalf("epoch: %+v, %v", e, err)
			}
			checkMany(t, reopen(t, dir, db), keys, gone)
		})
	}
}

// TestRekeyBucketsThenFails: a switch whose then fails commits nothing of
// either: the pass returns that error, its buckets stay at their
// generation with every key opening, and the next pass re-keys them.
func TestRekeyBucketsThenFails(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		buckets, n int
	}{
		{"grouped", 128, 700},
		{"chunked", 4, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, db, keys, gone, bs := forgetMany(t, dir, envDB(t, dir), tc.buckets, tc.n)
			refused := errors.New("refused")
			markers, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, func(ctx context.Context, tx *storage.Tx, _ []int, _ int64) error {
				if _, err := tx.ExecContext(ctx, `UPDATE subjects SET wrapped=NULL`); err != nil {
					return err
				}
				return refused
			})
			if !errors.Is(err, refused) || len(markers) != 0 {
				t.Fatalf("RekeyBuckets with a failing then: %v, %d markers", err, len(markers))
			}
			var switched int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM buckets WHERE gen<>1`).Scan(&switched); err != nil || switched != 0 {
				t.Fatalf("%d buckets switched: %v", switched, err)
			}
			checkMany(t, s, keys, gone)
			checkMany(t, reopen(t, dir, db), keys, gone)
			if _, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, nil); err != nil {
				t.Fatal(err)
			}
			checkGens(t, db, bs)
			checkMany(t, reopen(t, dir, db), keys, gone)
		})
	}
}

// rekeyChunk is keystore's: 32 subject keys a chunk.
const rekeyChunk = 32

// TestRekeyBucketsInterrupted: a pass cut between its transactions (a
// trigger aborts one, as a crash there would lose it) keeps every live key
// opening, returns the markers of the buckets it finished, and the next
// pass, or an epoch, converges.
func TestRekeyBucketsInterrupted(t *testing.T) {
	ctx := context.Background()
	cuts := []struct {
		name, trigger string
	}{
		{"next keys", `CREATE TRIGGER cut BEFORE UPDATE OF next_wrapped ON buckets
			WHEN NEW.next_wrapped IS NOT NULL AND NEW.id >= 500 BEGIN SELECT RAISE(ABORT, 'cut'); END`},
		{"switch", `CREATE TRIGGER cut BEFORE UPDATE OF gen ON buckets
			WHEN NEW.id >= 500 BEGIN SELECT RAISE(ABORT, 'cut'); END`},
	}
	for _, c := range cuts {
		for _, resume := range []string{"next pass", "epoch"} {
			t.Run(c.name+"/"+resume, func(t *testing.T) {
				dir := t.TempDir()
				s, db, keys, gone, bs := forgetMany(t, dir, nil, 1024, 3000) // the triggers are SQLite's
				if _, err := db.ExecContext(ctx, c.trigger); err != nil {
					t.Fatal(err)
				}
				markers, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, nil)
				if err == nil {
					t.Fatal("the pass was not cut")
				}
				if len(markers) == 0 {
					t.Fatal("no bucket re-keyed before the cut")
				}
				var done []int
				for b := range markers {
					if b >= 500 {
						t.Fatalf("bucket %d reported re-keyed past the cut", b)
					}
					done = append(done, b)
				}
				checkGens(t, db, done)
				if _, err := db.ExecContext(ctx, `DROP TRIGGER cut`); err != nil {
					t.Fatal(err)
				}
				var pending int
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM buckets WHERE next_wrapped IS NOT NULL`).Scan(&pending); err != nil {
					t.Fatal(err)
				}
				if want := c.name == "switch"; (pending > 0) != want {
					t.Fatalf("%d re-keys under way after a cut at the %s", pending, c.name)
				}
				r := reopen(t, dir, db)
				checkMany(t, r, keys, gone)
				if resume == "next pass" {
					// The forgets of the buckets done are marked re-keyed:
					// the next pass takes the others.
					var rest []int
					for _, b := range bs {
						if _, ok := markers[b]; !ok {
							rest = append(rest, b)
						}
					}
					if _, err := keystore.NewShredder(r).RekeyBuckets(ctx, rest, nil); err != nil {
						t.Fatal(err)
					}
					checkGens(t, db, bs)
				} else {
					if e, err := keystore.NewShredder(r).RunEpoch(ctx); err != nil || e.State != "done" {
						t.Fatalf("epoch: %+v, %v", e, err)
					}
					if err := db.QueryRowContext(ctx, `SELECT count(*) FROM buckets WHERE next_wrapped IS NOT NULL`).Scan(&pending); err != nil || pending != 0 {
						t.Fatalf("%d re-keys under way after the epoch (%v)", pending, err)
					}
				}
				checkMany(t, r, keys, gone)
				checkMany(t, reopen(t, dir, db), keys, gone)
			})
		}
	}
}

// TestRekeyGroupReadBack: a database that silently skips the update of one
// row of a group re-key (a planted trigger: a bucket's switch, or one
// subject key's rewrap) fails the group's transaction with ErrReadBack
// naming the bucket, reports none of the group re-keyed, and loses no
// key; once the fault is gone the next pass re-keys them all.
func TestRekeyGroupReadBack(t *testing.T) {
	ctx := context.Background()
	for table, col := range map[string]string{"buckets": "gen", "subjects": "wrapped"} {
		t.Run(table, func(t *testing.T) {
			dir := t.TempDir()
			s, db, keys, gone, bs := forgetMany(t, dir, envDB(t, dir), 64, 200)
			var victim int // the bucket whose row (or one of whose keys) is skipped
			var where string
			if table == "buckets" {
				victim = bs[len(bs)/2]
				where = fmt.Sprint("id = ", victim)
			} else {
				for id := range keys {
					victim, where = s.BucketOf(id), fmt.Sprintf("sid = X'%x'", id[:])
					if db.Shared() {
						where = fmt.Sprintf(`sid = '\x%x'::bytea`, id[:])
					}
					bs = append(bs, victim)
					break
				}
			}
			drop := plantSkip(t, db, table, col, where)
			markers, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, nil)
			if !errors.Is(err, keystore.ErrReadBack) || !strings.Contains(err.Error(), fmt.Sprintf("bucket %d", victim)) {
				t.Fatalf("re-key with a skipped %s row: %v, want ErrReadBack naming bucket %d", table, err, victim)
			}
			if len(markers) != 0 {
				t.Fatalf("%d buckets reported re-keyed by a failed group", len(markers))
			}
			checkMany(t, s, keys, gone)
			checkMany(t, reopen(t, dir, db), keys, gone)
			drop()
			if _, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, nil); err != nil {
				t.Fatal(err)
			}
			checkGens(t, db, bs)
			checkMany(t, reopen(t, dir, db), keys, gone)
		})
	}
}

// plantSkip plants a trigger that silently skips the updates of column
// col of the rows of table where cond holds (SQL of the database's
// engine), and returns the function that drops it.
func plantSkip(t *testing.T, db *storage.DB, table, col, cond string) func() {
	t.Helper()
	ctx := context.Background()
	stmts := []string{`CREATE TRIGGER skip BEFORE UPDATE OF ` + col + ` ON ` + table + ` WHEN old.` + cond + ` BEGIN SELECT RAISE(IGNORE); END`}
	drop := `DROP TRIGGER skip`
	if db.Shared() { // PostgreSQL: a BEFORE row trigger that returns NULL skips the row
		stmts = []string{
			`CREATE FUNCTION skip_row() RETURNS trigger AS $$ BEGIN RETURN NULL; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER skip BEFORE UPDATE OF ` + col + ` ON ` + table + ` FOR EACH ROW WHEN (OLD.` + cond + `) EXECUTE FUNCTION skip_row()`,
		}
		drop = `DROP TRIGGER skip ON ` + table
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return func() {
		if _, err := db.ExecContext(ctx, drop); err != nil {
			t.Fatal(err)
		}
	}
}
