package datadir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shredd/shredd/internal/datadir"
)

func TestPrepareRefusesWritableByOthers(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702} {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, mode)
		err := datadir.Prepare(dir)
		if !errors.Is(err, datadir.ErrUnsafe) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Fatalf("mode %v: %v, want ErrUnsafe with the chmod", mode, err)
		}
	}
	dir := filepath.Join(t.TempDir(), "new")
	if err := datadir.Prepare(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("new data dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestReadRefusesSymlinksFIFOsAndModes(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("x"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if _, err := datadir.Read(link, datadir.Secret, 10); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("symlink: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := datadir.Read(fifo, datadir.Secret, 10); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("fifo: %v", err) // and it did not block
	}
	os.Chmod(target, 0o640)
	if _, err := datadir.Read(target, datadir.Secret, 10); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("secret of mode 0640: %v", err)
	}
	if _, err := datadir.Read(target, datadir.Public, 10); err != nil {
		t.Fatalf("public of mode 0640: %v", err)
	}
	os.Chmod(target, 0o600)
	if _, err := datadir.Read(target, datadir.Secret, 0); !errors.Is(err, datadir.ErrTooLarge) {
		t.Fatalf("over the bound: %v", err)
	}
	if _, err := datadir.Read(filepath.Join(dir, "none"), datadir.Secret, 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

func TestCreateReplaceDestroy(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := datadir.Create(p, []byte("one"), datadir.Secret); err != nil {
		t.Fatal(err)
	}
	if err := datadir.Create(p, []byte("two"), datadir.Secret); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over an existing file: %v", err)
	}
	if err := datadir.Replace(p, []byte("three"), datadir.Secret); err != nil {
		t.Fatal(err)
	}
	if b, _ := datadir.Read(p, datadir.Secret, 10); string(b) != "three" {
		t.Fatalf("after replace: %q", b)
	}
	if left, _ := datadir.Leftovers(p); len(left) != 0 {
		t.Fatalf("leftovers after a replace: %v", left)
	}
	// Destroy never follows a symlink.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	os.Symlink(victim, filepath.Join(dir, "s"))
	if err := datadir.Destroy(filepath.Join(dir, "s")); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("destroy of a symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatal("destroy changed a symlink's target")
	}
	if err := datadir.Destroy(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("destroyed file still there")
	}
}

// LockFor names who holds a locked directory as its caller says, and the
// directory is free again once the holder unlocks.
func TestLockForNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	held, err := datadir.LockFor(dir, "a test: stop it first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := datadir.LockFor(dir, "a test: stop it first"); err == nil || err.Error() != "data dir "+dir+" is in use by a test: stop it first" {
		t.Fatalf("second lock: %v", err)
	}
	held.Unlock()
	again, err := datadir.LockFor(dir, "a test")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again.Unlock()
}
