//go:build !linux

package demo

// lowerPriority does nothing where threads have no priority of their own:
// the simulation shares the CPU with the live demo.
func lowerPriority() error { return nil }
