package kvevents

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on a socket about to dial or
// listen (a listener's accepted connections inherit it) to
// deadPeerTimeout: data sent and unacknowledged for that long ends the
// connection, where Linux would retransmit for some 15 minutes, and
// keepalive ends a silent one within it.
func setUserTimeout(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(deadPeerTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
