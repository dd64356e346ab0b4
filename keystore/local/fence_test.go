package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
)

// A root file another process claimed is never written from this one's
// memory: the write is refused (ErrFenced, wrapping ErrUnavailable), and
// every later one too; the file stays the other's.
func TestSecondWriterFenced(t *testing.T) {
	ctx := context.Background()
	a, path := freshRoot(t)
	if err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, path)
	if err := b.Claim(); err != nil {
		t.Fatal(err)
	}
	if a.Instance() == "" || a.Instance() != b.Instance() || b.Generation() != a.Generation()+1 {
		t.Fatalf("instance %q/%q, generations %d/%d", a.Instance(), b.Instance(), a.Generation(), b.Generation())
	}
	before, _ := os.ReadFile(path)
	if _, err := a.Rotate(ctx); !errors.Is(err, local.ErrFenced) || !errors.Is(err, shredd.ErrUnavailable) {
		t.Fatalf("rotate by the earlier writer: %v, want ErrFenced", err)
	}
	if err := a.KeepMark(ctx, "s", []byte(`{"seq":1}`)); !errors.Is(err, local.ErrFenced) {
		t.Fatalf("a later write by the earlier writer: %v, want ErrFenced", err)
	}
	if a.WriteErr() == nil || a.CheckFence() == nil {
		t.Fatal("the fenced writer does not report it")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a fenced writer changed the root file")
	}
	if _, err := b.Rotate(ctx); err != nil {
		t.Fatalf("rotate by the claiming writer: %v", err)
	}
	if b.CheckFence() != nil {
		t.Fatal("the claiming writer fenced itself")
	}
}

// Versions an epoch destroyed are remembered as destroyed: a file that
// names one as available again does not open.
func TestDestroyedVersionsRemembered(t *testing.T) {
	ctx := context.Background()
	r, path := freshRoot(t)
	if _, err := r.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Trim(ctx, 2); err != nil {
		t.Fatal(err)
	}
	f := rootFields(t, path)
	if d, _ := f["destroyed"].([]any); len(d) != 1 || d[0].(float64) != 1 {
		t.Fatalf("destroyed: %v", f["destroyed"])
	}
	f["min_version"] = 1 // the destroyed version named available again
	writeFields(t, path, f)
	if _, err := local.Open(path); !errors.Is(err, keystore.ErrCorrupt) {
		t.Fatalf("open of a file that names a destroyed version available: %v", err)
	}
}

// Marks come back as kept, across opens, and an unknown one is
// ErrNotFound.
func TestMarks(t *testing.T) {
	ctx := context.Background()
	r, path := freshRoot(t)
	if _, err := r.Mark(ctx, "registrations"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("no mark: %v", err)
	}
	if err := r.KeepMark(ctx, "registrations", []byte(`{"seq": 7}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.KeepMark(ctx, "registrations", []byte(`not json`)); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("a mark that is no JSON: %v", err)
	}
	r2 := mustOpen(t, path)
	m, err := r2.Mark(ctx, "registrations")
	if err != nil || string(m) != `{"seq":7}` {
		t.Fatalf("mark read back: %s %v", m, err)
	}
	if m, err := local.ReadMark(path, "registrations"); err != nil || string(m) != `{"seq":7}` {
		t.Fatalf("ReadMark: %s %v", m, err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
