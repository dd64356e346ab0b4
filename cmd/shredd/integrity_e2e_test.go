package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// dirState is every file of a data directory (but its lock) with its
// mode and a digest of its content: what a refused start must leave as it
// found it.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", strings.TrimPrefix(p, dir), fi.Mode())
		// SQLite's -shm file is its WAL's shared-memory index, no data: a
		// reader (a refused start reads the database) may rewrite its read
		// marks, and SQLite rebuilds it from the WAL whenever it must.
		if fi.Mode().IsRegular() && !strings.HasSuffix(p, "-shm") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			line += " " + hex.EncodeToString(h[:8])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// refusedUnchanged runs serve on dir, wants it refused (exit 1) with msgs,
// and the data directory exactly as it was.
func refusedUnchanged(t *testing.T, dir string, msgs ...string) {
	t.Helper()
	before := dirState(t, dir)
	cli(t, "", nil, nil, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "16").want(t, 1, msgs...)
	if after := dirState(t, dir); after != before {
		t.Fatalf("a refused start changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestLostSecretRefused is route 1 of the integrity issue and its
// neighbours: a data directory whose secret files are lost or swapped
// next to a database (or a forget ledger) that needs them is a refused
// start that names the file and the fix and writes nothing, never a new
// secret that would make every subject id hash to a sid with no key (and
// forgets of old subjects erased while their data opens).
func TestLostSecretRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic")
	alice := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice's record", "a")
	f := s.forget(t, "carol") // a forget, so that the epoch compacts the ledger
	s.runEpoch(t)
	s.waitForget(t, f.Forget, "shredded", func(v forgetView) bool { return shreddedOrLater(v.State) })
	s.stop()

	for _, name := range []string{node.SecretFile, node.AttestationKeyFile, node.LogKeyFile} {
		t.Run("missing "+name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.Rename(p, p+".away"); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(p+".away", p)
			// A private key whose public half is still there has its own
			// refusal; both name the file and say to restore it.
			refusedUnchanged(t, dir, p, "estore")
		})
	}
	t.Run("missing subject.key, no public half to tell", func(t *testing.T) {
		p := filepath.Join(dir, node.SecretFile)
		if err := os.Rename(p, p+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(p+".away", p)
		refusedUnchanged(t, dir, p+" missing", "nothing was written", "Restore it")
	})
	t.Run("swapped subject.key", func(t *testing.T) {
		p := filepath.Join(dir, node.SecretFile)
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		other := make([]byte, 32)
		rand.Read(other)
		if err := os.WriteFile(p, other, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(p, orig, 0o600)
		refusedUnchanged(t, dir, p+" is not the one this database was made with", "Put back the subject.key")
	})
	t.Run("another instance's log key", func(t *testing.T) {
		other := t.TempDir()
		o := startServer(t, other, serverOpts{})
		o.stop()
		for _, n := range []string{node.LogKeyFile, node.LogVKeyFile} {
			b, _ := os.ReadFile(filepath.Join(dir, n))
			defer os.WriteFile(filepath.Join(dir, n), b, 0o600)
			ob, _ := os.ReadFile(filepath.Join(other, n))
			os.WriteFile(filepath.Join(dir, n), ob, 0o600)
		}
		os.Chmod(filepath.Join(dir, node.LogVKeyFile), 0o644)
		refusedUnchanged(t, dir, "log.key is not the one this database was made with")
	})

	// Everything back: the same data opens, alice still decrypts, and a
	// forget of alice is a destroyed key, not a subject never seen.
	s = startServer(t, dir, serverOpts{})
	s.open(t, alice)
	fa := s.forget(t, "alice@example.com")
	s.shredded(t, alice)
	if c := fa.condition("key_destroyed"); c.Status != "ok" || strings.Contains(c.Reason, "no key was ever issued") {
		t.Fatalf("alice's forget after the secrets came back: %+v", c)
	}
}

// TestFileHygiene: the admin token and the database are refused, with the
// fix, when they are symlinks, not regular files, or readable by others;
// the refusal writes nothing.
func TestFileHygiene(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.stop()
	tok, db := filepath.Join(dir, node.TokenFile), filepath.Join(dir, node.DBFile)

	os.Chmod(tok, 0o644)
	refusedUnchanged(t, dir, "chmod 600 "+tok)
	os.Chmod(tok, 0o600)

	os.Chmod(db, 0o666)
	refusedUnchanged(t, dir, "chmod 600 "+db)
	os.Chmod(db, 0o600)

	for _, p := range []string{tok, db} {
		real := filepath.Join(t.TempDir(), "real")
		if err := os.Rename(p, real); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, p); err != nil {
			t.Fatal(err)
		}
		refusedUnchanged(t, dir, p, "a symlink")
		os.Remove(p)
		if err := os.Rename(real, p); err != nil {
			t.Fatal(err)
		}
	}

	b, err := os.ReadFile(tok)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(tok)
	if err := syscall.Mkfifo(tok, 0o600); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, dir, tok, "not a regular file")
	os.Remove(tok)
	os.WriteFile(tok, b, 0o600)
	startServer(t, dir, serverOpts{}).stop()
}
