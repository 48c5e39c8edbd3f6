package executor

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestHandshakeSkipLeavesOutTheBuiltinsHandshakes: every lane of the built-in plans
// that has channels opens with its handshake, and the executor leaves exactly those
// ops out.
func TestHandshakeSkipLeavesOutTheBuiltinsHandshakes(t *testing.T) {
	for _, key := range builtin.Names() {
		c, name, _ := strings.Cut(key, ".")
		for _, n := range []int{2, 3, 5} {
			_, p, err := builtin.Generate(c, name, n, builtin.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for r := range n {
				skip := handshakeSkip(p, r)
				for li, lane := range p.Ranks[r].Lanes {
					want := 0
					for want < len(lane.Ops) && slices.Contains([]plan.OpCode{plan.OpRelaxedSignal, plan.OpRelaxedWait}, lane.Ops[want].Code) {
						want++
					}
					if skip[li] != want || (want == 0 && hasChannels(&lane)) {
						t.Fatalf("%s n=%d rank %d lane %d: skips %d ops, its handshake is %d", key, n, r, li, skip[li], want)
					}
				}
			}
		}
	}
}

func hasChannels(l *plan.Lane) bool {
	return len(l.ChannelList(plan.ChannelMemory)) > 0 || len(l.ChannelList(plan.ChannelPort)) > 0
}

// TestUnbalancedHandshakesAreKept: when one rank's handshake is not at the head of
// its lane (a nop before it), the other rank's signal into it would go unanswered:
// no rank skips anything, and the plan still gives the right sums, call after call.
func TestUnbalancedHandshakesAreKept(t *testing.T) {
	_, p, err := builtin.AllReduceDirect(2, builtin.Options{InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	lane := &p.Ranks[1].Lanes[0]
	lane.Ops = append([]plan.Op{{Code: plan.OpNop}}, lane.Ops...)
	for r := range 2 {
		if s := handshakeSkip(p, r); s[0] != 0 {
			t.Fatalf("rank %d skips %d ops of an unbalanced plan", r, s[0])
		}
	}
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	bufs := [2][]byte{cbytes(16), cbytes(16)}
	for call := range 5 {
		for r, b := range bufs {
			for i := range 4 {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r+1+call+i)))
			}
		}
		errs := onAll(xs, func(r int, x *Executor) error {
			return x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), 16}, Recv: Buffer{addr(bufs[r]), 16},
				DType: reduce.Float32, Op: reduce.Sum})
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("call %d rank %d: %v", call, r, err)
			}
		}
		for r, b := range bufs {
			for i := range 4 {
				if got, want := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])), float32(2*call+2*i+3); got != want {
					t.Fatalf("call %d rank %d element %d: %v, want %v", call, r, i, got, want)
				}
			}
		}
	}
}

// TestCallerWorkFenced: the built-ins (every lane opens with its handshake) let lanes
// wait for the caller's work on the device; so do MSCCL++'s plans that open with one;
// a plan whose lane puts into a peer before any wait on it, or reaches all ranks
// through NVLS without waiting, keeps the host's wait.
func TestCallerWorkFenced(t *testing.T) {
	for _, key := range builtin.Names() {
		c, name, _ := strings.Cut(key, ".")
		for _, n := range []int{2, 3, 5, 10} {
			for _, o := range []builtin.Options{{}, {InPlace: true}, {Lanes: 2}, {Chunks: 2}} {
				_, p, err := builtin.Generate(c, name, n, o)
				if err != nil {
					continue // an option the algorithm does not take
				}
				if !callerWorkFenced(p) {
					t.Errorf("%s n=%d %+v: not fenced", key, n, o)
				}
			}
		}
	}
	for name, want := range map[string]bool{
		"single_node__allreduce.json":                true,
		"single_node__allgather.json":                true,
		"single_node__allreduce_nvls_zero_copy.json": true,
	} {
		if got := callerWorkFenced(loadFixture(t, name)); got != want {
			t.Errorf("%s: fenced %v, want %v", name, got, want)
		}
	}
	// The built-in direct allreduce without its opening handshake: its first put
	// reaches the peer before any wait on it.
	_, p, err := builtin.Generate("allreduce", "direct", 2, builtin.Options{InPlace: true})
	if err != nil {
		t.Fatal(err)
	}
	for r := range p.Ranks {
		for li := range p.Ranks[r].Lanes {
			lane := &p.Ranks[r].Lanes[li]
			lane.Ops = slices.DeleteFunc(lane.Ops, func(op plan.Op) bool {
				return op.Code == plan.OpRelaxedSignal || op.Code == plan.OpRelaxedWait
			})
		}
	}
	if callerWorkFenced(p) {
		t.Error("a plan whose puts come before any wait is fenced")
	}
}
