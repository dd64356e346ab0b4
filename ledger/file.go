package ledger

import (
	"errors"
	"os"
	"syscall"
)

// Fdatasync flushes f's data (and the metadata needed to read it back,
// such as its size) to the disk.
func Fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// CutFile truncates the file at path (never through a symlink) to size
// and syncs it.
func CutFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}
