//go:build !linux

package kvevents

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not Linux's:
// keepalive alone bounds a silent connection there.
func setUserTimeout(network, address string, c syscall.RawConn) error { return nil }
