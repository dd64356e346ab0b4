package keystore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/testkit/pgtest"
)

// TestRekeyTakesItsShards (PostgreSQL): a bucket's re-key declares the
// shard of the bucket's subjects, exclusively (storage.TxOptions), in each
// of its transactions: the group path (small buckets) and the chunked path
// (a bucket of rekeyChunk keys or more). It runs while another writer
// holds another shard, and waits while one holds the bucket's shard, even
// shared (a registration of one of its subjects).
func TestRekeyTakesItsShards(t *testing.T) {
	if !onPostgres() {
		t.Skipf("shard locks are PostgreSQL's (%s=postgres); on SQLite every writer is alone", storeEnv)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		buckets int
		keys    int
	}{
		{"group of small buckets", 64, 192},
		{"chunks of one large bucket", 2, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := envDB(t, dir)
			s, err := keystore.Open(ctx, db, localRoot(t, dir), keystore.Options{Buckets: tc.buckets})
			if err != nil {
				t.Fatal(err)
			}
			keys := createKeys(t, s, "subject-", tc.keys)
			// Two subjects, and their buckets, of different shards.
			a := sid("subject-0")
			b := a
			for i := 1; s.ShardOf(b) == s.ShardOf(a); i++ {
				b = sid(fmt.Sprint("subject-", i))
			}
			first, second := s.BucketOf(a), s.BucketOf(b)
			shredder := keystore.NewShredder(s)

			// Another shard held alone: the re-key runs beside it.
			other, err := db.BeginTouching(ctx, storage.TxOptions{Shards: []int{s.ShardOf(b)}, Exclusive: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := shredder.RekeyBuckets(ctx, []int{first}, nil); err != nil {
				t.Fatalf("re-key beside a writer of another shard: %v", err)
			}
			if err := other.Commit(); err != nil {
				t.Fatal(err)
			}

			// The bucket's shard held shared: the re-key waits for it.
			own, err := db.BeginTouching(ctx, storage.TxOptions{Shards: []int{s.ShardOf(b)}})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := shredder.RekeyBuckets(ctx, []int{second}, nil)
				done <- err
			}()
			pgtest.AwaitBlockedBy(t, db, "the re-key", own, done)
			checkGens(t, db, []int{first, second})
			checkMany(t, s, keys, nil)
		})
	}
}

// TestCreateKeyTakesItsShard (PostgreSQL): the creation of a subject's key
// declares the subject's shard, shared: it commits while another writer
// holds another shard alone, or the subject's shard shared (a
// registration), and waits while one holds the subject's shard alone (a
// forget, or a re-key of its bucket).
func TestCreateKeyTakesItsShard(t *testing.T) {
	if !onPostgres() {
		t.Skipf("shard locks are PostgreSQL's (%s=postgres); on SQLite every writer is alone", storeEnv)
	}
	ctx := context.Background()
	dir := t.TempDir()
	db := envDB(t, dir)
	s, err := keystore.Open(ctx, db, localRoot(t, dir), keystore.Options{Buckets: 64})
	if err != nil {
		t.Fatal(err)
	}
	var next int
	subject := func() envelope.SID {
		next++
		return sid(fmt.Sprint("create-", next))
	}
	hold := func(o storage.TxOptions) *storage.Tx {
		t.Helper()
		tx, err := db.BeginTouching(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}

	a := subject()
	b := subject()
	for s.ShardOf(b) == s.ShardOf(a) {
		b = subject()
	}
	other := hold(storage.TxOptions{Shards: []int{s.ShardOf(b)}, Exclusive: true})
	shared := hold(storage.TxOptions{Shards: []int{s.ShardOf(a)}})
	if _, err := s.Key(ctx, a); err != nil {
		t.Fatalf("key creation beside a writer of another shard and a registration of its own: %v", err)
	}
	for _, tx := range []*storage.Tx{other, shared} {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}

	c := subject()
	own := hold(storage.TxOptions{Shards: []int{s.ShardOf(c)}, Exclusive: true})
	done := make(chan error, 1)
	go func() {
		_, err := s.Key(ctx, c)
		done <- err
	}()
	pgtest.AwaitBlockedBy(t, db, "the key creation", own, done)
}
