package ledger

import (
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h), which package
// syscall does not name.
const fallocKeepSize = 0x1

// fallocate allocates the blocks of f from off for n bytes without
// changing its size (FALLOC_FL_KEEP_SIZE): later writes there need no new
// block.
func fallocate(f *os.File, off, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), fallocKeepSize, off, n)
		if err != syscall.EINTR {
			return err
		}
	}
}
