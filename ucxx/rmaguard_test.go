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
