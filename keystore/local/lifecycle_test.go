package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore/local"
)

// freshRoot opens a new root file in its own directory and returns it and
// its path.
func freshRoot(t *testing.T) (*local.Root, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "root.key")
	return mustOpen(t, path), path
}

// mustOpen opens the root file at path.
func mustOpen(t *testing.T, path string) *local.Root {
	t.Helper()
	r, err := local.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rootWith opens a fresh root file in its own directory, wraps a key under
// version 1 and returns the store, its path and the wrapped blob.
func rootWith(t *testing.T) (*local.Root, string, []byte) {
	t.Helper()
	s, path := freshRoot(t)
	w, err := s.Wrap(context.Background(), [][]byte{bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return s, path, w[0].Blob
}

// mustUnwrap checks that the root file at path still opens blob.
func mustUnwrap(t *testing.T, path string, blob []byte) {
	t.Helper()
	s, err := local.Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	k, err := s.Unwrap(context.Background(), [][]byte{blob})
	if err != nil || !bytes.Equal(k[0], bytes.Repeat([]byte{7}, 32)) {
		t.Fatalf("the live root no longer opens its key: %v", err)
	}
}

func onlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("files %v, want %v", got, want)
		}
	}
}

// TestHardLinkedOldIsNotDestroyed is the crash of issue 12: a trim of an
// earlier release killed between linking root.key to root.key.old and the
// rename left two names on the live root; its clean-up then zeroed the live
// root. The second name must only be unlinked.
func TestHardLinkedOldIsNotDestroyed(t *testing.T) {
	_, path, blob := rootWith(t)
	if err := os.Link(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	mustUnwrap(t, path, blob)
	onlyFiles(t, filepath.Dir(path), "root.key")
}

// TestSymlinkLeftoverRefused: a symlink planted as root.key.old must stop
// the start and leave its target untouched (the clean-up of earlier
// releases zeroed it).
func TestSymlinkLeftoverRefused(t *testing.T) {
	_, path, blob := rootWith(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path+".old"); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Open(path); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("open with a symlinked leftover: %v, want ErrUnsafe", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the symlink's target was changed: %q", b)
	}
	os.Remove(path + ".old")
	mustUnwrap(t, path, blob)
}

// TestSymlinkRootRefused: the root file itself is never followed.
func TestSymlinkRootRefused(t *testing.T) {
	_, path, _ := rootWith(t)
	link := filepath.Join(t.TempDir(), "root.key")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Open(link); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("open through a symlink: %v, want ErrUnsafe", err)
	}
}

// TestUnsafeModeRefused: a root file others can read or write is refused,
// with the chmod that fixes it.
func TestUnsafeModeRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o666} {
		_, path, blob := rootWith(t)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := local.Open(path)
		if !errors.Is(err, datadir.ErrUnsafe) || !bytes.Contains([]byte(err.Error()), []byte("chmod 600")) {
			t.Fatalf("mode %v: %v, want ErrUnsafe naming chmod 600", mode, err)
		}
		os.Chmod(path, 0o600)
		mustUnwrap(t, path, blob)
	}
}

// TestLeftoversJudgedByContents: fresh files a crash left beside the root
// are removed when they hold nothing the live root lacks (a trim that did
// not reach its rename, a rotation that never returned, a partial write),
// and stop the start when they disagree with it.
func TestLeftoversJudgedByContents(t *testing.T) {
	ctx := context.Background()
	t.Run("unfinished trim and rotation", func(t *testing.T) {
		s, path, blob := rootWith(t)
		if _, err := s.Rotate(ctx); err != nil { // live: versions 1 and 2
			t.Fatal(err)
		}
		live, _ := os.ReadFile(path)
		// What a trim to 2 writes (version 2 only), made on a copy.
		cp := filepath.Join(t.TempDir(), "root.key")
		os.WriteFile(cp, live, 0o600)
		c := mustOpen(t, cp)
		if _, err := c.Rotate(ctx); err != nil { // what a rotation to 3 writes
			t.Fatal(err)
		}
		rotated, _ := os.ReadFile(cp)
		if _, err := c.Trim(ctx, 3); err != nil {
			t.Fatal(err)
		}
		trimmed, _ := os.ReadFile(cp)
		for name, b := range map[string][]byte{
			path + datadir.TempInfix + "0000000000000001": rotated, // rotation that never returned
			path + datadir.TempInfix + "0000000000000002": trimmed, // ... then trimmed
			path + ".tmp": []byte(`{"format":"shredd-root/v1","min`),                // partial write
			path + ".old": append(bytes.Clone(live[:len(live)-1]), []byte(" }")...), // an old copy
		} {
			if err := os.WriteFile(name, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mustUnwrap(t, path, blob)
		onlyFiles(t, filepath.Dir(path), "root.key")
		if got, _ := os.ReadFile(path); !bytes.Equal(got, live) {
			t.Fatal("the live root changed")
		}
	})
	t.Run("disagreeing leftover", func(t *testing.T) {
		_, path, blob := rootWith(t)
		_, other, _ := rootWith(t) // another root: its version 1 differs
		b, _ := os.ReadFile(other)
		left := path + datadir.TempInfix + "00000000000000ff"
		os.WriteFile(left, b, 0o600)
		if _, err := local.Open(path); !errors.Is(err, local.ErrConflict) {
			t.Fatalf("open with a disagreeing leftover: %v, want ErrConflict", err)
		}
		if got, _ := os.ReadFile(left); !bytes.Equal(got, b) {
			t.Fatal("a disagreeing leftover was changed")
		}
		os.Remove(left)
		mustUnwrap(t, path, blob)
	})
	t.Run("root missing beside a leftover", func(t *testing.T) {
		_, path, _ := rootWith(t)
		os.Rename(path, path+".old")
		if _, err := local.Open(path); !errors.Is(err, local.ErrConflict) {
			t.Fatalf("open with only a leftover: %v, want ErrConflict", err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatal("a new root was created beside the leftover of the old one")
		}
	})
}
