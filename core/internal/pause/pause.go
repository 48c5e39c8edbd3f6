// Package pause sleeps for short durations without the runtime's rounding.
//
// Go's time.Sleep and timers wait in the runtime's netpoller, which on Linux sleeps in
// whole milliseconds: time.Sleep(50 * time.Microsecond) in an otherwise idle process
// takes about 1.1 ms (measured on Go 1.26). A poller that pauses "a few microseconds"
// between looks therefore notices an end up to a millisecond late. For comes back after
// about d, at the cost of blocking its thread for that long (the runtime hands the
// thread's P to other goroutines meanwhile, as for any blocking system call).
package pause

import (
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK: how late the kernel may wake the
// calling thread from a timed sleep (50 µs by default, which would dominate short
// pauses).
const prSetTimerSlack = 29

// For sleeps for about d: at least d, and for d under a millisecond late by no more
// than the thread's timer slack, which For sets to a tenth of d (at least 1 µs) on the
// thread it runs on. From a millisecond on it is time.Sleep.
func For(d time.Duration) {
	if d <= 0 {
		return
	}
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	slack := max(d/10, time.Microsecond)
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, uintptr(slack), 0)
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for {
		var left syscall.Timespec
		if err := syscall.Nanosleep(&ts, &left); err != syscall.EINTR {
			return
		}
		ts = left // a signal (the runtime's preemption) cut it short
	}
}

// Yield gives the calling thread's CPU to another runnable thread of the machine, if
// any (sched_yield), and comes back at once otherwise: what a spinning wait calls now
// and then so that, on a machine with more busy threads than cores, the thread it
// waits for gets to run. Unlike runtime.Gosched it does not enter Go's scheduler,
// which on a thread locked to its goroutine (a call from C, such as Python's) hands
// the P to another thread and back, two futex wake-ups a yield.
func Yield() {
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
