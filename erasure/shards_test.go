package erasure_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestForgetTakesItsShards (PostgreSQL, where nodes share the database):
// a forget's transaction declares its subject's shard, exclusively, and
// takes the sequence lock for its evictions and log entries
// (storage.Tx.Sequence). So it commits while another writer (a re-key of
// another bucket, another node's forget group) holds another shard; it
// waits while one holds its own shard, or the sequence lock, and its
// eviction is numbered after the holder's.
func TestForgetTakesItsShards(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Log: true})
	if !st.DB.Shared() {
		t.Skipf("shard locks are PostgreSQL's (%s=postgres); on SQLite every writer is alone", shreddtest.StoreEnv)
	}
	s := st.Both()
	// Subjects of four different shards.
	var subjects []string
	seen := map[int]bool{}
	for i := 0; len(subjects) < 4; i++ {
		subject := fmt.Sprintf("shard-subject-%d", i)
		sh := st.Keys.ShardOf(st.Hasher.SID(subject))
		if seen[sh] {
			continue
		}
		seen[sh] = true
		subjects = append(subjects, subject)
		shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{subject}}, "record of "+subject)
	}
	shard := func(subject string) int { return st.Keys.ShardOf(st.Hasher.SID(subject)) }
	forget := func(subject string) <-chan error {
		done := make(chan error, 1)
		go func() {
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			f, err := s.Forget(fctx, subject)
			if err == nil && f.State != shredd.StateCommitted {
				err = fmt.Errorf("forget of %s is %s, want committed", subject, f.State)
			}
			done <- err
		}()
		return done
	}

	// Another shard held alone: the forget commits beside it.
	other, err := st.DB.BeginTouching(ctx, storage.TxOptions{Shards: []int{shard(subjects[1])}, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-forget(subjects[0]); err != nil {
		t.Fatalf("forget beside a writer of another shard: %v", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}

	// Its own shard held (shared, as a registration of the subject holds
	// it): the forget waits for it.
	own, err := st.DB.BeginTouching(ctx, storage.TxOptions{Shards: []int{shard(subjects[2])}})
	if err != nil {
		t.Fatal(err)
	}
	pgtest.AwaitBlockedBy(t, st.DB, "the forget", own, forget(subjects[2]))

	// The sequence lock held by a writer of another shard that numbered an
	// eviction: the forget waits, and its eviction comes after.
	seq, err := st.DB.BeginTouching(ctx, storage.TxOptions{Shards: []int{shard(subjects[1])}, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := seq.Sequence(ctx); err != nil {
		t.Fatal(err)
	}
	var held int64
	if err := seq.QueryRowContext(ctx, `INSERT INTO evictions(sid, at) VALUES (?, ?) RETURNING seq`, make([]byte, 32), time.Now().UnixNano()).Scan(&held); err != nil {
		t.Fatal(err)
	}
	pgtest.AwaitBlockedBy(t, st.DB, "the forget", seq, forget(subjects[3]))
	sid := st.Hasher.SID(subjects[3])
	var got int64
	if err := st.DB.QueryRowContext(ctx, `SELECT max(seq) FROM evictions WHERE sid=?`, sid[:]).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got <= held {
		t.Errorf("the forget's eviction is numbered %d, before the %d of the transaction that committed before it", got, held)
	}
}
