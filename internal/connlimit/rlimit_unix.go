//go:build unix

package connlimit

import "syscall"

// openFileLimit returns the process's RLIMIT_NOFILE, or 0 when it cannot be
// read. An unlimited one reads as a huge number, which Ceiling caps.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
