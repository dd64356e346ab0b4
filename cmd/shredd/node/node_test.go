package node

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredd/shredd/keystore/local"
)

// localRoot opens the data directory's local root file, as cmd/shredd
// does with --root local.
func localRoot(_ context.Context, dir string, _ *slog.Logger) (Root, error) {
	ls, err := local.OpenBeside(filepath.Join(dir, RootFile), filepath.Join(dir, DBFile))
	if err != nil {
		return Root{}, err
	}
	return Root{Store: ls}, nil
}

// TestOpenClose opens a new data directory as serve does, checks what the
// first start creates and that the lock keeps a second node out, then
// reopens it after Close, and opens it with the lighter entry points.
func TestOpenClose(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := OpenDB(context.Background(), dir, ""); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenDB without a database: %v, want fs.ErrNotExist", err)
	}
	c := Config{DataDir: dir, OpenRoot: localRoot, Buckets: 4}
	n, err := Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{DBFile, RootFile, SecretFile, TokenFile, LedgerFile, AttestationKeyFile, AttestationPubFile, LogKeyFile, LogVKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after the first Open: %v", err)
		}
	}
	if count, err := n.Tokens.Count(ctx); err != nil || count != 1 {
		t.Errorf("tokens after the first Open: %d, %v; want the admin token", count, err)
	}
	if _, err := Open(ctx, c); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second Open of a locked directory: %v", err)
	}
	if _, err := OpenBulk(ctx, c); err == nil {
		t.Fatal("OpenBulk of a locked directory succeeded")
	}
	n.Close()

	n, err = Open(ctx, c)
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	n.Close()
	b, err := OpenBulk(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if b.Tokens != nil {
		t.Error("OpenBulk opened the token store")
	}
	b.Close()
	db, err := OpenDB(context.Background(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	// A missing root file beside the database is never replaced.
	if err := os.Remove(filepath.Join(dir, RootFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, c); err == nil || !strings.Contains(err.Error(), "is missing but the database") {
		t.Fatalf("Open without the root file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RootFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a new root file was created: %v", err)
	}
}
