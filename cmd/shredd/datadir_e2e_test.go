package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// TestDataDirSafety drives the real binary through the data-directory
// hazards of issue 12: a second name on the live root (the kill inside an
// old trim) must not zero it; a symlink planted in the data dir is refused
// and its target untouched; a data dir or secret others can write or read
// is refused with the chmod that fixes it; a missing root file beside a
// database is refused instead of replaced.
func TestDataDirSafety(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serve := []string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "16"}
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	s.runEpoch(t) // versions move: the root file was replaced once
	s.stop()
	root := filepath.Join(dir, node.RootFile)

	// 1. Two names on the live root.
	if err := os.Link(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir, serverOpts{})
	s.open(t, bob)
	s.stop()
	if _, err := os.Lstat(root + ".old"); !os.IsNotExist(err) {
		t.Fatalf("root.key.old still there after the start: %v", err)
	}

	// 2. A symlink planted as a leftover.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("precious"), 0o600)
	if err := os.Symlink(victim, root+".old"); err != nil {
		t.Fatal(err)
	}
	cli(t, "", nil, nil, serve...).want(t, 1, "not a regular file", "rm "+root+".old")
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the symlink's target was changed: %q", b)
	}
	os.Remove(root + ".old")

	// 3. Permissions.
	os.Chmod(dir, 0o777)
	cli(t, "", nil, nil, serve...).want(t, 1, "chmod go-w "+dir)
	os.Chmod(dir, 0o700)
	secret := filepath.Join(dir, node.SecretFile)
	os.Chmod(secret, 0o644)
	cli(t, "", nil, nil, serve...).want(t, 1, "chmod 600 "+secret)
	os.Chmod(secret, 0o600)
	os.Chmod(root, 0o660)
	cli(t, "", nil, nil, serve...).want(t, 1, "chmod 600 "+root)
	os.Chmod(root, 0o600)

	// 4. The root file missing beside the database.
	away := filepath.Join(t.TempDir(), "root.key")
	if err := os.Rename(root, away); err != nil {
		t.Fatal(err)
	}
	cli(t, "", nil, nil, serve...).want(t, 1, "is missing but the database")
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Fatal("a new root file was created beside the database")
	}
	os.Rename(away, root)
	s = startServer(t, dir, serverOpts{})
	s.open(t, bob)
	s.stop()
}
