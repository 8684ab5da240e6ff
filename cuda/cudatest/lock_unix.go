//go:build unix

package cudatest

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path, returning its release. Locking
// failures are ignored: the build is also safe without (atomic renames).
func lockFile(path string) func() {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
