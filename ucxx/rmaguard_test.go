package ucxx

import "testing"

// The guard is in place with the UCX this repository builds against, and its filters
// drop what they should and nothing else: every rendezvous opcode but tag (0) and
// active message (1), and a too-short request, for a registered worker; a peer's get
// (ready-to-receive without a send request) for it; nothing for an unregistered one.
func TestRMAGuard(t *testing.T) {
	if !RMAGuardActive() {
		t.Fatal("the RMA guard is not in place: this UCX's rendezvous handlers are not as rmaguard.c expects")
	}
	if n := rmaGuardSelfTest(); n != 0 {
		t.Fatalf("the guard's filter decided case %d wrongly (rmaguard.c, ucxx_rma_guard_selftest)", n)
	}
}

// TestRMAGuardSlots: with every slot of the guard taken, a worker of a context without
// FeatureRMA is refused with StatusNoResource rather than made unguarded; once slots
// are free again, one is made.
func TestRMAGuardSlots(t *testing.T) {
	if !RMAGuardActive() {
		t.Skip("the RMA guard is not in place")
	}
	ctx, err := NewContext(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	n := guardFillForTest()
	defer guardUnfillForTest()
	if n == 0 {
		t.Fatal("the guard had no free slot")
	}
	if w, err := ctx.NewWorker(false); StatusOf(err) != StatusNoResource {
		if w != nil {
			w.Close()
		}
		t.Fatalf("NewWorker with every guard slot taken (%d by the test): %v; want StatusNoResource", n, err)
	}
	guardUnfillForTest()
	w, err := ctx.NewWorker(false)
	if err != nil {
		t.Fatalf("NewWorker once the slots are free: %v", err)
	}
	w.Close()
}
