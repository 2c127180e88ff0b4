//go:build !unix

package connlimit

// openFileLimit returns 0: this system has no RLIMIT_NOFILE.
func openFileLimit() uint64 { return 0 }
