//go:build !linux

package ledger

import (
	"os"
	"syscall"
)

// fallocate is not available here: the ledger reserves nothing ahead
// (docs/operations.md, "The forget ledger").
func fallocate(*os.File, int64, int64) error { return syscall.EOPNOTSUPP }
