package demo

import (
	"runtime"
	"syscall"
)

// lowerPriority makes the calling goroutine's thread the machine's last
// choice for CPU (nice 19), so that a simulation in virtual time, which
// runs flat out on one goroutine, takes only the time the live demo leaves.
// The goroutine stays locked to its thread, and the runtime ends the thread
// when the goroutine returns, so no other goroutine ever runs at this
// priority. Linux gives each thread its own nice value.
func lowerPriority() error {
	runtime.LockOSThread()
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}
