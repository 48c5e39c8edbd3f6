package ucxx

// The RMA guard (rmaguard.h). A context without FeatureRMA refuses a peer's
// software-emulated puts and gets (their handlers are not installed), but UCX 1.22
// serves one-sided rendezvous in any context with tag or active messages: a peer's
// stock UCX with UCX_RMA_PPLN_ENABLE=y takes it for a put or get of GPU memory, and
// it writes into or reads from the address the peer names (seen on one H200:
// benchmarks/results/session42). Every worker of a context without FeatureRMA is
// registered with the guard, which drops those requests for it.

// #cgo LDFLAGS: -ldl
// #include "rmaguard.h"
// #include "shim.h"
import "C"

import (
	"sync"
	"unsafe"
)

var rmaGuard struct {
	once   sync.Once
	active bool
}

// RMAGuardActive puts the guard in place if it is not yet (once per process; NewWorker
// calls it before UCX reads its handlers for the worker's interfaces), and reports
// whether it is: true with UCX 1.19 to 1.22 whose handler objects are laid out and
// named as those versions have them. Workers of contexts without FeatureRMA made while
// it is are protected from a peer's one-sided rendezvous; with any other UCX they are
// not.
func RMAGuardActive() bool {
	rmaGuard.once.Do(func() { rmaGuard.active = C.ucxx_rma_guard_install() == 1 })
	return rmaGuard.active
}

// rmaGuardSelfTest runs the filters' decisions on made-up messages (rmaguard.h): 0, or
// the first case that failed.
func rmaGuardSelfTest() int { return int(C.ucxx_rma_guard_selftest()) }

// guardFillForTest takes every free slot of the guard and returns how many it took;
// guardUnfillForTest frees them (rmaguard_test.go).
func guardFillForTest() int { return int(C.ucxx_rma_guard_fill_for_test()) }
func guardUnfillForTest()   { C.ucxx_rma_guard_unfill_for_test() }

// RMAGuardDropped counts the one-sided rendezvous requests the guard dropped in this
// process (for tests and diagnostics).
func RMAGuardDropped() uint64 { return uint64(C.ucxx_rma_guard_dropped()) }

// guardWorker registers h with the guard, which is in place, and returns its slot.
// Errors: StatusNoResource when every slot is taken.
func guardWorker(h C.ucp_worker_h) (int, error) {
	slot := int(C.ucxx_rma_guard_add(unsafe.Pointer(h)))
	if slot < 0 {
		return -1, StatusNoResource.Err("the RMA guard's worker slots")
	}
	return slot, nil
}

// unguardWorker frees a slot of guardWorker (-1: none).
func unguardWorker(slot int) {
	if slot >= 0 {
		C.ucxx_rma_guard_remove(C.int(slot))
	}
}
