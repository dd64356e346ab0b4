package translog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/translog"
)

// Fixed note keys, so that the golden proof is deterministic (Ed25519
// signatures are).
const (
	testOrigin = "example.com/shredd-test-log"
	testSkey   = "PRIVATE+KEY+example.com/shredd-test-log+a94ece45+AbgUxR5RPZ19/1KPpeXhi8VXVJX6Zu57WK3I38L0rIwu"
	testVkey   = "example.com/shredd-test-log+a94ece45+ARF7XcFa2ufqxqDVp3cezLoC38KX3wr8pnn8HnShXM9V"
	otherSkey  = "PRIVATE+KEY+example.com/other-log+b13c9cd6+AUZdT77a4zJcEKio/OSDjwVarmf/qgg4GUvEr12id29Y"
	otherVkey  = "example.com/other-log+b13c9cd6+AYQi7kK2NtK4d/AFa15kz3dKCmol6kwhgpbMRPO4ldMU"
)

func testSigner(t testing.TB, skey string) note.Signer {
	t.Helper()
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testVerifier(t testing.TB, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newLog opens a log signed by the test key in a new SQLite file.
func newLog(t testing.TB) (*storage.DB, *translog.Log) {
	t.Helper()
	return newLogWith(t, testSkey)
}

func newLogWith(t testing.TB, skey string) (*storage.DB, *translog.Log) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := translog.Open(context.Background(), db, testSigner(t, skey))
	if err != nil {
		t.Fatal(err)
	}
	return db, l
}

// appendTx appends entries in one committed transaction, returning the
// index of the first.
func appendTx(t testing.TB, db *storage.DB, l *translog.Log, entries ...[]byte) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var first int64
	if len(entries) == 1 {
		first, err = l.Append(ctx, tx, entries[0])
	} else {
		first, err = l.AppendBatch(ctx, tx, entries)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return first
}

func entry(i int) []byte { return fmt.Appendf(nil, "entry %d: a lifecycle event", i) }

func entries(from, to int) [][]byte {
	var es [][]byte
	for i := from; i < to; i++ {
		es = append(es, entry(i))
	}
	return es
}

// refTree computes the Merkle Tree Hash and audit paths of RFC 6962 §2.1
// straight from their definitions (no x/mod code), to check the log
// independently. Subtree hashes are memoised by position.
type refTree struct {
	d    [][]byte
	memo map[[2]int]tlog.Hash
}

func newRefTree(d [][]byte) *refTree { return &refTree{d: d, memo: map[[2]int]tlog.Hash{}} }

// split returns the largest power of two smaller than n (n > 1).
func split(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// mth is MTH(D[lo:hi]).
func (r *refTree) mth(lo, hi int) tlog.Hash {
	if h, ok := r.memo[[2]int{lo, hi}]; ok {
		return h
	}
	var h tlog.Hash
	switch hi - lo {
	case 0:
		h = sha256.Sum256(nil)
	case 1:
		h = sha256.Sum256(append([]byte{0}, r.d[lo]...))
	default:
		k := split(hi - lo)
		a, b := r.mth(lo, lo+k), r.mth(lo+k, hi)
		h = sha256.Sum256(append(append([]byte{1}, a[:]...), b[:]...))
	}
	r.memo[[2]int{lo, hi}] = h
	return h
}

// path is PATH(m, D[lo:hi]): the audit path from the leaf's sibling up
// to the root's child.
func (r *refTree) path(m, lo, hi int) []tlog.Hash {
	if hi-lo <= 1 {
		return nil
	}
	k := split(hi - lo)
	if m < k {
		return append(r.path(m, lo, lo+k), r.mth(lo+k, hi))
	}
	return append(r.path(m-k, lo+k, hi), r.mth(lo, lo+k))
}

// mth is MTH(d).
func mth(d [][]byte) tlog.Hash { return newRefTree(d).mth(0, len(d)) }

func TestOpenRecordsOrigin(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	if l.Origin() != testOrigin {
		t.Errorf("Origin() = %q, want %q", l.Origin(), testOrigin)
	}
	if _, err := translog.Open(ctx, db, testSigner(t, testSkey)); err != nil {
		t.Errorf("reopening: %v", err)
	}
	if _, err := translog.Open(ctx, db, testSigner(t, otherSkey)); !errors.Is(err, translog.ErrOrigin) {
		t.Errorf("opening with another origin: %v, want ErrOrigin", err)
	}
}

func TestAppendAndEntry(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	if n, err := l.Size(ctx); err != nil || n != 0 {
		t.Fatalf("Size of a new log = %d, %v", n, err)
	}
	want := [][]byte{[]byte("a"), bytes.Repeat([]byte{0xff}, translog.MaxEntrySize), {0}}
	for i, e := range want {
		if got := appendTx(t, db, l, e); got != int64(i) {
			t.Fatalf("Append #%d returned index %d", i, got)
		}
	}
	if first := appendTx(t, db, l, entries(3, 10)...); first != 3 {
		t.Fatalf("AppendBatch returned first %d, want 3", first)
	}
	want = append(want, entries(3, 10)...)
	for i, e := range want {
		got, err := l.Entry(ctx, int64(i))
		if err != nil || !bytes.Equal(got, e) {
			t.Errorf("Entry(%d) = %q, %v", i, got, err)
		}
	}
	for _, i := range []int64{-1, 10, 1 << 40} {
		if _, err := l.Entry(ctx, i); !errors.Is(err, translog.ErrNotFound) {
			t.Errorf("Entry(%d): %v, want ErrNotFound", i, err)
		}
	}
	if n, _ := l.Size(ctx); n != 10 {
		t.Errorf("Size = %d, want 10", n)
	}
}

func TestAppendRejectsSizes(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, e := range [][]byte{nil, {}, make([]byte, translog.MaxEntrySize+1)} {
		if _, err := l.Append(ctx, tx, e); !errors.Is(err, translog.ErrTooLarge) {
			t.Errorf("Append(%d bytes): %v, want ErrTooLarge", len(e), err)
		}
	}
	// One bad entry in a batch: nothing of the batch is written.
	if _, err := l.AppendBatch(ctx, tx, [][]byte{[]byte("ok"), nil}); !errors.Is(err, translog.ErrTooLarge) {
		t.Errorf("AppendBatch with an empty entry: %v, want ErrTooLarge", err)
	}
	if i, err := l.Append(ctx, tx, []byte("first")); err != nil || i != 0 {
		t.Errorf("Append after rejected entries = %d, %v, want index 0", i, err)
	}
}

func TestRollbackLeavesLogUnchanged(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	appendTx(t, db, l, entries(0, 5)...)
	before, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][][]byte{entries(100, 101), entries(100, 400)} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendBatch(ctx, tx, batch); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n, _ := l.Size(ctx); n != 5 {
			t.Fatalf("Size after rollback = %d, want 5", n)
		}
		if _, err := l.Entry(ctx, 5); !errors.Is(err, translog.ErrNotFound) {
			t.Fatalf("Entry(5) after rollback: %v, want ErrNotFound", err)
		}
		if after, _ := l.Checkpoint(ctx); !bytes.Equal(after, before) {
			t.Fatalf("checkpoint changed by a rolled-back append:\n%s\n%s", before, after)
		}
	}
	// The next committed append takes the index the rolled-back one had,
	// and the tree is the one of the committed entries only.
	if i := appendTx(t, db, l, entry(5)); i != 5 {
		t.Fatalf("index after rollback = %d, want 5", i)
	}
	c, err := translog.OpenCheckpoint(mustCheckpoint(t, l), testVerifier(t, testVkey))
	if err != nil {
		t.Fatal(err)
	}
	if want := mth(entries(0, 6)); c.Size != 6 || c.Hash != want {
		t.Errorf("checkpoint after rollback = %d %s, want 6 %s", c.Size, c.Hash, want)
	}
}

func mustCheckpoint(t testing.TB, l *translog.Log) []byte {
	t.Helper()
	cp, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestProveEverySize grows a log one transaction at a time to 300 entries
// and, at every size, proves every index and compares its audit path and
// root with RFC 6962's definitions. CheckProof (signature included) runs
// on the first and last index of each size; the other proofs carry the
// same checkpoint bytes, so the inclusion check alone stands for it and
// keeps the test fast (Ed25519 verification dominates it otherwise).
func TestProveEverySize(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	v := testVerifier(t, testVkey)
	all := entries(0, 300)
	ref := newRefTree(all)
	for n := 1; n <= len(all); n++ {
		appendTx(t, db, l, all[n-1])
		root := ref.mth(0, n)
		var signed []byte
		for i := 0; i < n; i++ {
			proof, err := l.Prove(ctx, int64(i), 0)
			if err != nil {
				t.Fatalf("Prove(%d) in tree %d: %v", i, n, err)
			}
			p, err := translog.ParseProof(proof)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 || i == n-1 {
				c, err := translog.CheckProof(proof, all[i], v)
				if err != nil {
					t.Fatalf("CheckProof(%d) in tree %d: %v\n%s", i, n, err, proof)
				}
				if c.Size != int64(n) || c.Hash != root || c.Origin != testOrigin {
					t.Fatalf("checkpoint %+v, want size %d root %s", c, n, root)
				}
				signed = p.Checkpoint
			} else if !bytes.Equal(p.Checkpoint, signed) {
				t.Fatalf("proof %d in tree %d has another checkpoint", i, n)
			}
			if err := tlog.CheckRecord(p.Hashes, int64(n), root, int64(i), tlog.RecordHash(all[i])); err != nil {
				t.Fatalf("inclusion of %d in tree %d: %v", i, n, err)
			}
			if want := ref.path(i, 0, n); !slices.Equal(p.Hashes, want) {
				t.Fatalf("audit path of %d in tree %d:\n got %v\nwant %v (RFC 6962 PATH order)", i, n, p.Hashes, want)
			}
		}
	}
}

// TestProveLargerTree proves every index of a tree of a few thousand
// entries, and indexes against older tree sizes.
func TestProveLargerTree(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	v := testVerifier(t, testVkey)
	const n = 3000
	all := entries(0, n)
	appendTx(t, db, l, all[:1234]...)
	for i := 1234; i < n; i += 500 {
		appendTx(t, db, l, all[i:min(i+500, n)]...)
	}
	for i := 0; i < n; i++ {
		proof, err := l.Prove(ctx, int64(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := translog.CheckProof(proof, all[i], v); err != nil {
			t.Fatalf("CheckProof(%d): %v", i, err)
		}
	}
	for _, size := range []int64{1, 2, 255, 256, 257, 1234, 2047, 2048, 2999} {
		for _, i := range []int64{0, size / 2, size - 1} {
			proof, err := l.Prove(ctx, i, size)
			if err != nil {
				t.Fatal(err)
			}
			c, err := translog.CheckProof(proof, all[i], v)
			if err != nil {
				t.Fatalf("CheckProof(%d) in tree %d: %v", i, size, err)
			}
			if c.Size != size || c.Hash != mth(all[:size]) {
				t.Fatalf("checkpoint %v, want tree %d", c, size)
			}
		}
	}
	for _, args := range [][2]int64{{-1, 0}, {n, 0}, {5, 5}, {0, n + 1}, {0, -1}} {
		if _, err := l.Prove(ctx, args[0], args[1]); !errors.Is(err, translog.ErrNotFound) {
			t.Errorf("Prove(%d, %d): %v, want ErrNotFound", args[0], args[1], err)
		}
	}
}

func TestConsistency(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	v := testVerifier(t, testVkey)
	const n = 300
	checkpoints := []translog.Checkpoint{{Origin: testOrigin, Size: 0, Hash: mth(nil)}}
	for i := 0; i < n; i++ {
		appendTx(t, db, l, entry(i))
		c, err := translog.OpenCheckpoint(mustCheckpoint(t, l), v)
		if err != nil {
			t.Fatal(err)
		}
		checkpoints = append(checkpoints, c)
	}
	check := func(a, b int) {
		t.Helper()
		proof, err := l.ProveConsistency(ctx, int64(a), int64(b))
		if err != nil {
			t.Fatalf("ProveConsistency(%d, %d): %v", a, b, err)
		}
		if err := translog.CheckConsistency(checkpoints[a], checkpoints[b], proof); err != nil {
			t.Fatalf("CheckConsistency(%d, %d): %v", a, b, err)
		}
		// Through the text form.
		text := (&translog.ConsistencyProof{Old: int64(a), New: int64(b), Hashes: proof}).Marshal()
		p, err := translog.ParseConsistencyProof(text)
		if err != nil || !bytes.Equal(p.Marshal(), text) {
			t.Fatalf("consistency text %q: %v", text, err)
		}
		if err := translog.CheckConsistency(checkpoints[p.Old], checkpoints[p.New], p.Hashes); err != nil {
			t.Fatal(err)
		}
		// The same proof does not tie other trees together.
		if a > 0 && a < b {
			if err := translog.CheckConsistency(checkpoints[a-1], checkpoints[b], proof); !errors.Is(err, translog.ErrVerify) {
				t.Fatalf("proof %d..%d accepted for %d..%d: %v", a, b, a-1, b, err)
			}
			if err := translog.CheckConsistency(checkpoints[b], checkpoints[a], proof); !errors.Is(err, translog.ErrVerify) {
				t.Fatalf("proof %d..%d accepted backwards: %v", a, b, err)
			}
		}
	}
	for a := 0; a <= 64; a++ {
		for b := a; b <= 64; b++ {
			check(a, b)
		}
	}
	for a := 0; a <= n; a += 7 {
		for b := a; b <= n; b += 13 {
			check(a, b)
		}
		check(a, n)
	}
	for _, args := range [][2]int64{{-1, 5}, {6, 5}, {0, n + 1}} {
		if _, err := l.ProveConsistency(ctx, args[0], args[1]); !errors.Is(err, translog.ErrNotFound) {
			t.Errorf("ProveConsistency(%d, %d): %v, want ErrNotFound", args[0], args[1], err)
		}
	}
}

func TestCheckpointCachedAndStable(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	empty := mustCheckpoint(t, l)
	c, err := translog.OpenCheckpoint(empty, testVerifier(t, testVkey))
	if err != nil || c.Size != 0 || c.Hash != mth(nil) {
		t.Fatalf("empty tree checkpoint %v, %v", c, err)
	}
	appendTx(t, db, l, entries(0, 3)...)
	a, b := mustCheckpoint(t, l), mustCheckpoint(t, l)
	if !bytes.Equal(a, b) {
		t.Errorf("two checkpoints of one size differ:\n%s\n%s", a, b)
	}
	// A proof against an older size signs that size without disturbing
	// the cached checkpoint of the current one.
	if _, err := l.Prove(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if c := mustCheckpoint(t, l); !bytes.Equal(a, c) {
		t.Errorf("checkpoint changed after an older proof")
	}
}

// TestConcurrentAppends appends from several goroutines, each in its own
// immediate transaction: every entry gets its own index and the tree is
// the one of the entries in index order.
func TestConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if _, err := l.Append(ctx, tx, fmt.Appendf(nil, "worker %d entry %d", w, i)); err != nil {
					tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all [][]byte
	for i := int64(0); i < workers*each; i++ {
		e, err := l.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	c, err := translog.OpenCheckpoint(mustCheckpoint(t, l), testVerifier(t, testVkey))
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != workers*each || c.Hash != mth(all) {
		t.Errorf("checkpoint %v, want the tree of the %d entries", c, workers*each)
	}
}

// TestAppendBatchAtEverySize appends batches of 1 to 9 entries onto trees
// of every size up to a few hundred: the hashes a batch combines with
// before its own (the subtrees that end the tree, one per bit set in its
// size, read in one statement) give the reference tree's root after each
// batch, and an entry from before the batch still proves its inclusion.
func TestAppendBatchAtEverySize(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	v := testVerifier(t, testVkey)
	all := entries(0, 400)
	ref := newRefTree(all)
	n := 0
	for k := 1; n+k <= len(all); k = k%9 + 1 {
		appendTx(t, db, l, all[n:n+k]...)
		n += k
		proof, err := l.Prove(ctx, int64(n-1), 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := translog.CheckProof(proof, all[n-1], v)
		if err != nil {
			t.Fatalf("the last entry of a tree of %d: %v", n, err)
		}
		if c.Size != int64(n) || c.Hash != ref.mth(0, n) {
			t.Fatalf("after a batch of %d: size %d root %s, want %d %s", k, c.Size, c.Hash, n, ref.mth(0, n))
		}
		if i := (n - k) / 2; n > k {
			p, err := l.Prove(ctx, int64(i), 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := translog.CheckProof(p, all[i], v); err != nil {
				t.Fatalf("entry %d in a tree of %d: %v", i, n, err)
			}
		}
	}
}
