//go:build linux

package fifo

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	futexWaitOp = 0 // FUTEX_WAIT, not private: the word may live in memory shared between processes
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *addr == val, at most timeout.
func futexWait(addr *uint32, val uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(int64(timeout))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes the waiters on addr.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, 1<<30, 0, 0, 0)
}
