package datadir

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrLocked means another process holds the data directory's lock.
var ErrLocked = errors.New("data directory in use by another shredd process")

// Lock is the lock of one data directory, held until Unlock.
type Lock struct{ f *os.File }

// LockDir takes the exclusive lock of the data directory dir: an flock on
// the directory itself, not on a file in it. A file can be deleted out
// from under its holder (a cleanup script, a careless rm) and a second
// process then locks a new file of the same name beside the first; the
// directory cannot be replaced while the holder has it open, and every
// path to it (a symlink, a bind mount) names the same inode. A directory
// another process holds gives an error wrapping ErrLocked, at once.
//
// Every command that writes the data directory (serve, restore, ledger
// repair) takes it through this function, most through LockFor.
func LockDir(dir string) (*Lock, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("data dir %s: lock: %w", dir, err)
	}
	return &Lock{f: f}, nil
}

// LockFor is LockDir for a command: when another process holds dir, the
// error says "data dir DIR is in use by " and then inUse, which names the
// holder and what to do.
func LockFor(dir, inUse string) (*Lock, error) {
	l, err := LockDir(dir)
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("data dir %s is in use by %s", dir, inUse)
	}
	return l, err
}

// Unlock releases the lock. It is safe to call on a nil Lock and twice.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Close() // closing the descriptor releases the flock
	l.f = nil
}
