package builtin

import "testing"

// TestAllToAllVPlans: the alltoallv plan parses with per-call blocks for 2..9 ranks.
func TestAllToAllVPlans(t *testing.T) {
	for n := 2; n <= 9; n++ {
		_, p, err := AllToAllV(n)
		if err != nil {
			t.Fatalf("%d ranks: %v", n, err)
		}
		if !p.VariableBlocks || p.InPlace || p.Collective != "alltoallv" {
			t.Fatalf("%d ranks: %+v", n, p)
		}
	}
}
