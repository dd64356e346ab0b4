package keystore_test

// Benchmarks of the key tree (docs/design.md, "Keys"). They only run with
// -bench; nothing in them asserts on timings. Epochs take seconds, key
// lookups microseconds, so run them with different -benchtime values:
//
//	go test -run '^$' -bench 'Epoch|BulkCreateKeys' -benchtime 3x ./keystore/
//	go test -run '^$' -bench SubjectKey -benchtime 1s ./keystore/
//
// The Vault cases run against a real Vault dev server (testkit/vaulttest).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// countingRoot passes every call through to a real root store and counts the
// unwraps, so that a benchmark can prove that each of its operations really
// went to the root store (it is not a fake: every call reaches Vault).
type countingRoot struct {
	keystore.RootStore
	unwraps atomic.Int64
}

func (c *countingRoot) Unwrap(ctx context.Context, blobs [][]byte) ([][]byte, error) {
	c.unwraps.Add(1)
	return c.RootStore.Unwrap(ctx, blobs)
}

// benchSID is the sid of subject i of a generated data directory.
func benchSID(i int) envelope.SID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return envelope.SID(sha256.Sum256(b[:]))
}

var benchKeySeq atomic.Int64

func benchKeyName() string { return fmt.Sprintf("shredd-bench-%d", benchKeySeq.Add(1)) }

// benchRoot opens a root store of the given kind: a local root file in dir,
// or a fresh Transit key on srv.
func benchRoot(b *testing.B, kind, dir string, srv *vaulttest.Server) keystore.RootStore {
	b.Helper()
	switch kind {
	case "local":
		r, err := local.Open(filepath.Join(dir, "root.key"))
		if err != nil {
			b.Fatal(err)
		}
		return r
	case "vault":
		r, err := vault.Open(context.Background(), vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: benchKeyName()})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	b.Fatalf("unknown root kind %q", kind)
	return nil
}

// benchTree opens (creating) a key tree in dir under root. The database is
// closed when tb's benchmark ends.
func benchTree(tb testing.TB, dir string, root keystore.RootStore, opts keystore.Options) *keystore.Tree {
	tb.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	s, err := keystore.Open(context.Background(), db, root, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// fillSubjects creates subjects [from, to) with BulkCreateKeys, chunk sids per call.
func fillSubjects(tb testing.TB, s *keystore.Tree, from, to, chunk int) {
	tb.Helper()
	ctx := context.Background()
	sids := make([]envelope.SID, 0, chunk)
	for i := from; i < to; i += chunk {
		sids = sids[:0]
		for j := i; j < min(i+chunk, to); j++ {
			sids = append(sids, benchSID(j))
		}
		if err := s.BulkCreateKeys(ctx, sids, nil); err != nil {
			tb.Fatal(err)
		}
	}
}

const (
	benchBuckets = 4096
	// bigSubjects is the size of the large tree; bigChunk the sids per
	// BulkCreateKeys call that fill it.
	bigSubjects = 1_000_000
	bigChunk    = 50_000
)

// bigTree is the 1M-subject data directory under a Vault root. It is built
// once per BenchmarkEpoch run (the Transit key lives in that run's Vault dev
// server) and shared by the iterations: an epoch never touches subject rows.
type bigTree struct {
	once  sync.Once
	err   error
	dir   string
	root  *countingRoot
	setup time.Duration // BulkCreateKeys of every subject
	// unwraps is the number of root-store Unwrap calls (Vault round trips
	// for bucket keys) the fill made.
	unwraps int64
	ckpt    time.Duration // WAL checkpoint after the fill
}

func (t *bigTree) build(b *testing.B, srv *vaulttest.Server) {
	t.once.Do(func() {
		t.root = &countingRoot{RootStore: benchRoot(b, "vault", t.dir, srv)}
		db, err := sqlite.Open(filepath.Join(t.dir, "shredd.db"))
		if err != nil {
			t.err = err
			return
		}
		defer db.Close()
		s, err := keystore.Open(context.Background(), db, t.root, keystore.Options{Buckets: benchBuckets})
		if err != nil {
			t.err = err
			return
		}
		start := time.Now()
		fillSubjects(b, s, 0, bigSubjects, bigChunk)
		t.setup = time.Since(start)
		t.unwraps = t.root.unwraps.Load()
		start = time.Now()
		if err := db.Sync(context.Background()); err != nil {
			t.err = err
			return
		}
		t.ckpt = time.Since(start)
		var n int
		if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM subjects WHERE wrapped IS NOT NULL`).Scan(&n); err != nil {
			t.err = err
			return
		}
		if n != bigSubjects {
			t.err = fmt.Errorf("big tree has %d live subjects, want %d", n, bigSubjects)
		}
	})
	if t.err != nil {
		b.Fatal(t.err)
	}
}

// BenchmarkEpoch measures one Store.RunEpoch: rotate the root, rewrap every
// bucket key under the new version, trim the old versions, checkpoint the WAL.
func BenchmarkEpoch(b *testing.B) {
	srv := vaulttest.Dev(b) // shared by the Vault cases; stopped when BenchmarkEpoch ends
	big := &bigTree{dir: b.TempDir()}

	run := func(b *testing.B, s *keystore.Tree, check []envelope.Ref) {
		ctx := context.Background()
		e0, err := keystore.NewShredder(s).LastEpoch(ctx)
		if err != nil && !errors.Is(err, keystore.ErrNotFound) {
			b.Fatal(err)
		}
		for b.Loop() {
			e, err := keystore.NewShredder(s).RunEpoch(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if e.State != "done" || len(e.Retired) == 0 || e.ToVersion <= e.FromVersion {
				b.Fatalf("epoch %+v did not rotate and retire", e)
			}
		}
		b.ReportMetric(float64(benchBuckets)*float64(b.N)/b.Elapsed().Seconds(), "buckets/s")
		// Outside the timer: the epochs really ran, and the keys still open.
		e, err := keystore.NewShredder(s).LastEpoch(ctx)
		if err != nil || e.ID != e0.ID+int64(b.N) {
			b.Fatalf("last epoch %+v (%v) after %d epochs from %d", e, err, b.N, e0.ID)
		}
		v, err := s.Root().Versions(ctx)
		if err != nil || v.MinAvailable != v.Latest || v.Latest != e.ToVersion {
			b.Fatalf("root versions %+v (%v) after epoch to %d", v, err, e.ToVersion)
		}
		for _, ref := range check {
			if _, err := s.KeyAt(ctx, ref); err != nil {
				b.Fatalf("subject key after %d epochs: %v", b.N, err)
			}
		}
	}

	for _, kind := range []string{"local", "vault"} {
		b.Run("root="+kind+"/buckets=4096", func(b *testing.B) {
			dir := b.TempDir()
			s := benchTree(b, dir, benchRoot(b, kind, dir, srv), keystore.Options{Buckets: benchBuckets})
			k, err := s.Key(context.Background(), benchSID(0))
			if err != nil {
				b.Fatal(err)
			}
			run(b, s, []envelope.Ref{k.Ref})
		})
	}

	b.Run("root=vault/buckets=4096/subjects=1M", func(b *testing.B) {
		big.build(b, srv)
		b.Logf("setup: %d subjects with BulkCreateKeys (%d per call) in %v (%.0f subjects/s, %d bucket-key unwraps through Vault), WAL checkpoint %v",
			bigSubjects, bigChunk, big.setup.Round(time.Millisecond), bigSubjects/big.setup.Seconds(), big.unwraps, big.ckpt.Round(time.Millisecond))
		s := benchTree(b, big.dir, big.root, keystore.Options{Buckets: benchBuckets})
		var check []envelope.Ref
		for _, i := range []int{0, bigSubjects / 2, bigSubjects - 1} {
			check = append(check, envelope.Ref{SID: benchSID(i), Gen: 1})
		}
		run(b, s, check)
		b.ReportMetric(big.setup.Seconds(), "setup-s")
	})
}

// BenchmarkSubjectKey measures getting a subject key with KeyAt: from the
// cache, and cold (the bucket key unwrapped through the root store, the
// wrapped DEK read from SQLite and opened).
func BenchmarkSubjectKey(b *testing.B) {
	const subjects = 1024
	ctx := context.Background()

	// tree opens a tree with subjects created through Key and returns their refs.
	tree := func(b *testing.B, root keystore.RootStore, opts keystore.Options) (*keystore.Tree, []envelope.Ref) {
		s := benchTree(b, b.TempDir(), root, opts)
		refs := make([]envelope.Ref, subjects)
		for i := range refs {
			k, err := s.Key(ctx, benchSID(i))
			if err != nil {
				b.Fatal(err)
			}
			refs[i] = k.Ref
		}
		return s, refs
	}
	lookups := func(b *testing.B, s *keystore.Tree, refs []envelope.Ref) {
		i := 0
		for b.Loop() {
			k, err := s.KeyAt(ctx, refs[i%len(refs)])
			if err != nil {
				b.Fatal(err)
			}
			if len(k.Key) != envelope.KeySize {
				b.Fatalf("key of %d bytes", len(k.Key))
			}
			i++
		}
	}

	b.Run("cache=hit", func(b *testing.B) {
		dir := b.TempDir()
		s, refs := tree(b, benchRoot(b, "local", dir, nil), keystore.Options{Buckets: benchBuckets})
		h0, m0 := keystore.NewStats(s).Cache()
		lookups(b, s, refs)
		h, m := keystore.NewStats(s).Cache()
		if m != m0 || h-h0 != uint64(b.N) {
			b.Fatalf("cache=hit: %d hits and %d misses in %d lookups", h-h0, m-m0, b.N)
		}
	})

	// A miss: CacheTTL of 1ns expires every cached DEK and bucket key before
	// the next lookup, so each KeyAt reads the subject and bucket rows and
	// unwraps the bucket key through the root store.
	miss := func(b *testing.B, s *keystore.Tree, refs []envelope.Ref, root *countingRoot) {
		h0, m0 := keystore.NewStats(s).Cache()
		u0 := root.unwraps.Load()
		lookups(b, s, refs)
		h, m := keystore.NewStats(s).Cache()
		if u := root.unwraps.Load() - u0; h != h0 || m-m0 != uint64(b.N) || u != int64(b.N) {
			b.Fatalf("cache=miss: %d hits, %d misses, %d root unwraps in %d lookups", h-h0, m-m0, u, b.N)
		}
	}

	b.Run("cache=miss/root=local", func(b *testing.B) {
		dir := b.TempDir()
		root := &countingRoot{RootStore: benchRoot(b, "local", dir, nil)}
		s, refs := tree(b, root, keystore.Options{Buckets: benchBuckets, CacheTTL: time.Nanosecond})
		miss(b, s, refs, root)
	})

	b.Run("cache=miss/root=vault", func(b *testing.B) {
		srv := vaulttest.Dev(b)
		root := &countingRoot{RootStore: benchRoot(b, "vault", "", srv)}
		s, refs := tree(b, root, keystore.Options{Buckets: benchBuckets, CacheTTL: time.Nanosecond})
		// Sanity check before timing: a miss gives the key that was created.
		k0, err := s.Key(ctx, benchSID(0))
		if err != nil {
			b.Fatal(err)
		}
		want := bytes.Clone(k0.Key)
		if k, err := s.KeyAt(ctx, refs[0]); err != nil || !bytes.Equal(k.Key, want) {
			b.Fatalf("cold KeyAt: %v", err)
		}
		miss(b, s, refs, root)
		// Outside the timer: with Vault stopped, the same lookup fails closed,
		// so the timed lookups were Vault round trips, not cache hits.
		srv.Stop()
		if _, err := s.KeyAt(ctx, refs[0]); !errors.Is(err, keystore.ErrRootUnavailable) {
			b.Fatalf("KeyAt with Vault stopped: %v, want ErrRootUnavailable", err)
		}
	})
}

// BenchmarkCreateKeys measures the bulk creation path (BulkCreateKeys) that
// fills large data directories: one op is one BulkCreateKeys call of chunk new
// subjects on a growing tree of 4096 buckets under a local root.
func BenchmarkCreateKeys(b *testing.B) {
	for _, chunk := range []int{1_000, 50_000, 250_000} {
		b.Run(fmt.Sprintf("root=local/chunk=%dk", chunk/1000), func(b *testing.B) {
			dir := b.TempDir()
			s := benchTree(b, dir, benchRoot(b, "local", dir, nil), keystore.Options{Buckets: benchBuckets})
			next := 0
			for b.Loop() {
				fillSubjects(b, s, next, next+chunk, chunk)
				next += chunk
			}
			b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "subjects/s")
		})
	}
}
