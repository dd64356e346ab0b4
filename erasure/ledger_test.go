package erasure_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/shreddtest"
)

func openLedger(t *testing.T, path string) *erasure.Ledger {
	t.Helper()
	l, err := erasure.OpenLedger(path, erasure.LedgerKey(bytes.Repeat([]byte{1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLedger: a forget is in the ledger when it is answered; a database
// that lacks it (a fresh one here, a restored backup in
// TestRestoreDrill) gets it committed again, with the same id, and refuses
// the subject; a torn last line is cut; a changed line stops the start;
// compaction drops entries of destroyed root versions.
func TestLedger(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	l := openLedger(t, path)
	b := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l}})
	if _, err := b.Service.Encrypt(ctx, shredd.Source{Subjects: []string{"alice"}, Kind: "episodic"}, []byte("hi"), nil); err != nil {
		t.Fatal(err)
	}
	f, err := b.Service.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 || !l.Has(f.ID) {
		t.Fatalf("the ledger holds %d forgets after the forget was answered, want it", l.Len())
	}
	if _, err := b.Service.Forget(ctx, "alice"); err != nil || l.Len() != 1 {
		t.Fatalf("a second forget of alice: %v, ledger %d lines", err, l.Len())
	}
	l.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("alice")) {
		t.Fatal("the ledger names the raw subject id")
	}

	// A write torn by a crash (no newline yet: never answered) is cut off.
	if err := os.WriteFile(path, append(bytes.Clone(raw), `{"forget":"01`...), 0o600); err != nil {
		t.Fatal(err)
	}
	l2 := openLedger(t, path)
	if l2.Len() != 1 {
		t.Fatalf("after a torn line: %d forgets, want 1", l2.Len())
	}
	l2.Close()
	if got, _ := os.ReadFile(path); !bytes.Equal(got, raw) {
		t.Fatal("the torn line was not cut off")
	}

	// Another database (a restore) lacks the forget: committed again.
	l3 := openLedger(t, path)
	other := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l3}})
	rep, err := other.Service.ReconcileLedger(ctx)
	if err != nil || rep.Reapplied != 1 || rep.Recorded != 0 {
		t.Fatalf("reconcile: %+v, %v; want 1 re-applied", rep, err)
	}
	if _, err := other.Service.Encrypt(ctx, shredd.Source{Subjects: []string{"alice"}, Kind: "episodic"}, []byte("back"), nil); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("encrypt for alice after the re-applied forget: %v, want ErrShredded", err)
	}
	again, err := other.Service.Forget(ctx, "alice")
	if err != nil || again.ID != f.ID || !again.Deadline.Equal(f.Deadline) {
		t.Fatalf("the re-applied forget: %v %v (deadline %v), want %v (%v)", err, again.ID, again.Deadline, f.ID, f.Deadline)
	}
	if rep, err := other.Service.ReconcileLedger(ctx); err != nil || rep != (erasure.LedgerReport{}) {
		t.Fatalf("a second reconcile: %+v, %v; want nothing to do", rep, err)
	}
	// Compaction: every entry is under a version below 1000.
	if n, err := other.Service.CompactLedger(ctx, 1000); err != nil || n != 1 || l3.Len() != 0 {
		t.Fatalf("compaction: dropped %d, %v, %d left", n, err, l3.Len())
	}
	l3.Close()

	// A changed line stops the start.
	bad := bytes.Replace(raw, []byte(`"gen":`), []byte(`"gen":1`), 1)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := erasure.OpenLedger(path, erasure.LedgerKey(bytes.Repeat([]byte{1}, 32))); !errors.Is(err, shredd.ErrLedger) {
		t.Fatalf("a changed ledger line: %v, want ErrLedger", err)
	}
	// A ledger others can read or write is refused.
	os.WriteFile(path, raw, 0o600)
	os.Chmod(path, 0o644)
	if _, err := erasure.OpenLedger(path, erasure.LedgerKey(bytes.Repeat([]byte{1}, 32))); !errors.Is(err, shredd.ErrLedger) {
		t.Fatalf("a ledger of mode 0644: %v, want ErrLedger", err)
	}
}

// TestLedgerConcurrentForgets: forgets answered at the same time share
// fsyncs, and every one of them is in the ledger when it is answered and
// after a reopen.
func TestLedgerConcurrentForgets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	l := openLedger(t, path)
	b := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l}})
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			f, err := b.Service.Forget(ctx, "subject-"+string(rune('A'+i)))
			if err == nil && !l.Has(f.ID) {
				err = errors.New("answered before it was in the ledger")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if again := openLedger(t, path); again.Len() != n {
		t.Fatalf("the reopened ledger holds %d forgets, want %d", again.Len(), n)
	}
}
