// Package datadir reads and writes the files of shredd's data directory
// (root key, subject secret, admin token, log and attestation keys) so that
// a crash, a hostile local user or a failing disk can neither lose one nor
// redirect a write.
//
//   - Files are opened with O_NOFOLLOW and must be regular files: a symlink
//     or a FIFO planted in the data directory is refused, never followed.
//   - A directory or key file that group or others may write is refused,
//     with the chmod that fixes it; secret files must not be readable by
//     them either.
//   - New contents go to a fresh file (O_EXCL, a random name), which is
//     fsynced, renamed into place, and the directory fsynced: the live file
//     never has a second name, and every failure is returned, never dropped.
package datadir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Errors of the data directory. Operations wrap them with %w and the path.
var (
	// ErrUnsafe means a file or directory is a symlink, not a regular file
	// or directory, or has permissions that let others write (or, for a
	// secret, read) it.
	ErrUnsafe = errors.New("unsafe file in the data directory")
	// ErrTooLarge means a file is larger than the caller's bound.
	ErrTooLarge = errors.New("file too large")
)

// TempInfix marks the fresh files Replace writes before renaming them into
// place: "<name>" + TempInfix + 16 hex digits. A crash may leave one behind;
// Leftovers finds them.
const TempInfix = ".tmp-"

// Prepare creates dir (mode 0700) when it does not exist and checks that it
// is a directory that neither group nor others can write.
func Prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return CheckDir(dir)
}

// CheckDir checks that dir is a directory (it may be reached through a
// symlink: the operator names it) that neither group nor others can write.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s: %w: not a directory", dir, ErrUnsafe)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("data dir %s: %w: mode %v lets other users replace its files; fix it with: chmod go-w %s",
			dir, ErrUnsafe, fi.Mode().Perm(), dir)
	}
	return nil
}

// Mode says who may read a file: Secret files (keys, tokens) only their
// owner; Public files (verifier keys) anyone. Nobody but the owner may
// write either.
type Mode int

// The file modes.
const (
	Secret Mode = iota
	Public
)

func (m Mode) perm() fs.FileMode {
	if m == Public {
		return 0o644
	}
	return 0o600
}

func (m Mode) check(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w: not a regular file (%v)", path, ErrUnsafe, fi.Mode().Type())
	}
	bad := fs.FileMode(0o022)
	if m == Secret {
		bad = 0o077
	}
	if p := fi.Mode().Perm(); p&bad != 0 {
		return fmt.Errorf("%s: %w: mode %v; fix it with: chmod %o %s", path, ErrUnsafe, p, m.perm(), path)
	}
	return nil
}

// Check checks, without opening it or following a symlink, that path is a
// regular file with the permissions of m (a symlink, a FIFO, a device or
// loose permissions give ErrUnsafe with the fix). A missing file gives an
// error wrapping fs.ErrNotExist.
func Check(path string, m Mode) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: %w: a symlink; replace it with the file itself", path, ErrUnsafe)
	}
	return m.check(path, fi)
}

// open opens path without following a symlink and without blocking on a
// FIFO, and checks what it opened.
func open(path string, flag int, m Mode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w: a symlink", path, ErrUnsafe)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = m.check(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Read returns the contents of path, at most max bytes. A missing file
// gives an error wrapping fs.ErrNotExist; a symlink, a non-regular file or
// unsafe permissions give ErrUnsafe.
func Read(path string, m Mode, max int64) ([]byte, error) {
	f, err := open(path, os.O_RDONLY, m)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}

// Create writes b to path, which must not exist (O_EXCL: of two processes
// creating the same file only one wins), fsyncs it and its directory. On
// any failure the partial file is removed and the error returned.
func Create(path string, b []byte, m Mode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, m.perm())
	if err != nil {
		return err
	}
	if err := writeSync(f, b); err != nil {
		os.Remove(path)
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeSync writes b, fsyncs and closes f, returning the first error.
func writeSync(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteTemp writes b to a fresh file beside path (path + TempInfix + 16
// random hex digits, O_EXCL, mode of m) and fsyncs it. It returns the fresh
// file's name; the caller renames it into place with Commit.
func WriteTemp(path string, b []byte, m Mode) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	tmp := path + TempInfix + hex.EncodeToString(r[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, m.perm())
	if err != nil {
		return "", err
	}
	if err := writeSync(f, b); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("%s: %w", tmp, err)
	}
	return tmp, nil
}

// Commit renames tmp (from WriteTemp) over path and fsyncs the directory,
// so that the rename is durable when Commit returns.
func Commit(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Replace atomically replaces path with b: WriteTemp, then Commit.
func Replace(path string, b []byte, m Mode) error {
	tmp, err := WriteTemp(path, b, m)
	if err != nil {
		return err
	}
	return Commit(tmp, path)
}

// Leftovers lists the fresh files WriteTemp made for path that a crash left
// behind, by name.
func Leftovers(path string) ([]string, error) {
	return filepath.Glob(globQuote(path) + TempInfix + "*")
}

func globQuote(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Overwrite overwrites the whole of an open file with zeros and fsyncs it:
// the bytes of an old root key go before its blocks are freed.
func Overwrite(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, fi.Size()), 0); err != nil {
		return err
	}
	return f.Sync()
}

// OpenForDestroy opens an existing regular file for Overwrite, refusing a
// symlink or anything else that is not a regular file.
func OpenForDestroy(path string, m Mode) (*os.File, error) {
	return open(path, os.O_RDWR, m)
}

// Destroy overwrites path's bytes with zeros, fsyncs, removes it and fsyncs
// its directory. A symlink is removed without touching its target; any
// other non-regular file is refused. A missing file is not an error.
func Destroy(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: %w: a symlink", path, ErrUnsafe)
	}
	f, err := open(path, os.O_RDWR, Public)
	if err != nil {
		return err
	}
	err = Overwrite(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, so that the names created, renamed or removed
// in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
