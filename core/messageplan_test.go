package core

import (
	"math/rand/v2"
	"testing"
)

// TestMessagePlan: for random messages and frame policies, host frames the engine
// allocates lie in the block after the record, aligned, in frame order and without
// overlap, or from OwnHostFrom bytes in allocations of their own; the block holds
// nothing else; the footprint is the model's; every other frame is the application's
// or an engine CUDA frame as the policy says.
func TestMessagePlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var p messagePlan
	for range 2000 {
		n := rng.IntN(12)
		sizes, types := make([]uint64, n), make([]uint8, n)
		for i := range sizes {
			sizes[i] = uint64(rng.IntN(3)) * uint64(rng.IntN(1<<uint(rng.IntN(20))))
			if rng.IntN(4) == 0 {
				types[i] = MemCUDA
			}
		}
		policy := FramePolicy{CUDA: rng.IntN(2) == 0, HostFrom: uint64(rng.IntN(3)) * 1000,
			OwnHostFrom: uint64(rng.IntN(3)) * 700}
		p.plan(sizes, types, policy)

		if len(p.frames) != n || p.footprint != footprint(sizes) {
			t.Fatalf("%v %v %+v: %d frames, footprint %d (model %d)", sizes, types, policy, len(p.frames), p.footprint, footprint(sizes))
		}
		end := alignUp(recordSize(n))
		var apps, cuda, own int
		for i, f := range p.frames {
			if f.size != sizes[i] || f.memType != types[i] {
				t.Fatalf("frame %d: %+v for size %d type %d", i, f, sizes[i], types[i])
			}
			switch {
			case policy.provides(sizes[i], types[i]):
				if f.home != byApplication {
					t.Fatalf("frame %d (%d B, type %d) under %+v: home %d, want the application", i, sizes[i], types[i], policy, f.home)
				}
				apps++
			case types[i] == MemHost && policy.OwnHostFrom != 0 && sizes[i] >= policy.OwnHostFrom:
				if f.home != ownHost {
					t.Fatalf("host frame %d: %+v, want an allocation of its own", i, f)
				}
				own++
			case types[i] == MemHost:
				if f.home != inBlock || f.offset != end || f.offset%BlockAlign != 0 {
					t.Fatalf("host frame %d: %+v, want in the block at %d", i, f, end)
				}
				end = alignUp(f.offset + f.size)
			default:
				if f.home != engineCUDA {
					t.Fatalf("CUDA frame %d: home %d", i, f.home)
				}
				cuda++
			}
		}
		if p.blockSize != end || p.byApplication != apps || p.engineCUDA != cuda || p.ownHost != own {
			t.Fatalf("block %d (want %d), %d by application (want %d), %d engine CUDA (want %d), %d own host (want %d)",
				p.blockSize, end, p.byApplication, apps, p.engineCUDA, cuda, p.ownHost, own)
		}
	}
}
