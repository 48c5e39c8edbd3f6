package core

import (
	"fmt"
	"sync/atomic"
	"syscall"
)

// threadOwner is a tripwire for state that belongs to one OS thread: the progress
// thread's request and endpoint tables. The thread claims it when it starts; while
// checks are on, every use from another thread panics, naming the state, so a
// component that reaches into the tables from the wrong thread fails its tests at the
// first such call instead of racing in production. Checks are on in this package's
// tests (threadowner_test.go) and off otherwise, where a check costs one branch.
type threadOwner struct {
	tid atomic.Int32 // the owning thread's id; 0 until claimed
}

// threadChecks turns the tripwires on. Only tests set it, before any engine starts.
var threadChecks bool

// claim makes the calling thread the owner. The caller is locked to its thread.
func (o *threadOwner) claim() {
	if threadChecks {
		o.tid.Store(int32(syscall.Gettid()))
	}
}

// check panics if checks are on, the state was claimed, and the calling thread is not
// its owner. what names the state.
func (o *threadOwner) check(what string) {
	if !threadChecks {
		return
	}
	if owner := o.tid.Load(); owner != 0 {
		if tid := int32(syscall.Gettid()); tid != owner {
			panic(fmt.Sprintf("core: %s used on thread %d; it belongs to the progress thread (%d)", what, tid, owner))
		}
	}
}
