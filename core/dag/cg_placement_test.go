package dag

import (
	"fmt"
	"testing"
)

// TestPartitionedCGStaysHome: the multi-GPU benchmark's conjugate gradient
// (benchmarks/dag/shapes_multi.py make_cg), scaled down, with the accesses its
// kernels declare (outputs read-write, copies reading their source and writing their
// destination), the context's arrays handed to the host first and the state reset
// there every repetition. With each data-aware policy and the default parent-stream
// policy, every vertex of partition q runs on GPU q, as hand-partitioned code places
// it, and after the first repetition no byte of the matrix moves; the same with the
// copies written in place (Task.WritesInPlace, as into mapped managed memory). (Before the block
// tie-break every partition's reduction of its partial sums, a slot from each GPU,
// and its scalar step after it ran on GPU 0.)
func TestPartitionedCGStaysHome(t *testing.T) {
	const P, rn, nzq, pad, G, iters, reps = 4, 4096, 16384, 1024, 64, 3, 2
	const n = P * rn
	for _, c := range []struct {
		pol     DevicePolicy
		inPlace bool
	}{{MinTransferSize, false}, {MinMinTransferTime, false}, {MinMaxTransferTime, false}, {MinMinTransferTime, true}} {
		pol, inPlace := c.pol, c.inPlace
		t.Run(fmt.Sprintf("%v in place %v", pol, inPlace), func(t *testing.T) {
			lanes := make([]Lane, P)
			for i := range lanes {
				lanes[i] = &manualLane{name: fmt.Sprint("gpu", i)}
			}
			g := newGraph(t, Options{GPUs: P, GPULanes: lanes, DeviceSelection: pol, ParentStream: MultiGPUEarlyDisjoint,
				Bandwidth: uniformMatrix(P)})
			sizes := map[string]uint64{"rowptr": n + P, "col": P * nzq, "val": P * nzq, "x": n, "r": n, "Ap": n, "pg": P * n,
				"part1": pad*(P-1) + G, "part2": pad*(P-1) + G, "gath1": pad*(P-1) + P, "gath2": pad*(P-1) + P}
			for _, s := range []string{"rr", "pAp", "rr_new", "alpha", "beta"} {
				sizes[s] = pad*(P-1) + 1
			}
			arrays := map[string]ArrayID{}
			var all []Access
			for _, name := range []string{"rowptr", "col", "val", "x", "r", "Ap", "pg", "part1", "part2", "gath1", "gath2",
				"rr", "pAp", "rr_new", "alpha", "beta"} {
				arrays[name] = ArrayID(len(arrays) + 1)
				g.Describe(arrays[name], 4*sizes[name], 0, true)
				all = append(all, acc(arrays[name], 0, 4*sizes[name], ReadWrite))
			}
			a := func(name string, off, elems uint64, m Mode) Access { return acc(arrays[name], 4*off, 4*elems, m) }
			piece := func(name string, q uint64, m Mode) Access {
				switch name {
				case "rowptr":
					return a(name, q*rn+q, rn+1, m)
				case "col", "val":
					return a(name, q*nzq, nzq, m)
				case "x", "r", "Ap":
					return a(name, q*rn, rn, m)
				case "part1", "part2":
					return a(name, q*pad, G, m)
				case "gath1", "gath2":
					return a(name, q*pad, P, m)
				}
				return a(name, q*pad, 1, m)
			}
			ownP := func(q, replica uint64, m Mode) Access { return a("pg", replica*n+q*rn, rn, m) }
			slot := func(name string, owner, q uint64, m Mode) Access { return a(name, owner*pad+q, 1, m) }
			add := func(kind Kind, acc ...Access) *Vertex {
				v, err := g.Add(Task{Kind: kind, Accesses: acc})
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			copyTask := func(acc ...Access) *Vertex { // the copies, written in place where mapped
				v, err := g.Add(Task{Kind: KindGPU, Accesses: acc, WritesInPlace: inPlace})
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			endAll := func() { // until no lane has a started vertex: an end starts vertices on other lanes
				for ended := true; ended; {
					ended = false
					for _, l := range lanes {
						for _, v := range l.(*manualLane).take() {
							v.End(nil)
							ended = true
						}
					}
				}
				waitIdle(t, g)
			}
			add(KindHost, all...) // the arrays handed to the host, as the benchmark's
			waitIdle(t, g)
			R, W, RW := Read, Write, ReadWrite
			for rep := range reps {
				add(KindHost, a("x", 0, n, RW), a("r", 0, n, RW), a("pg", 0, P*n, RW), a("rr", 0, sizes["rr"], RW))
				waitIdle(t, g)
				var vs [P][]*Vertex
				gpu := func(q uint64, acc ...Access) { vs[q] = append(vs[q], add(KindGPU, acc...)) }
				copyOn := func(q uint64, acc ...Access) { vs[q] = append(vs[q], copyTask(acc...)) }
				exchange := func(name string, q uint64) {
					for o := range uint64(P) {
						if o != q {
							copyOn(q, slot(name, q, q, R), slot(name, o, q, W))
						}
					}
				}
				for range iters {
					for q := range uint64(P) {
						gpu(q, piece("Ap", q, RW), piece("rowptr", q, R), piece("col", q, R), piece("val", q, R), a("pg", q*n, n, R))
						gpu(q, piece("part1", q, RW), ownP(q, q, R), piece("Ap", q, R))
						gpu(q, slot("gath1", q, q, RW), piece("part1", q, R))
						exchange("gath1", q)
					}
					for q := range uint64(P) {
						gpu(q, piece("pAp", q, RW), piece("gath1", q, R))
						gpu(q, piece("alpha", q, RW), piece("rr", q, R), piece("pAp", q, R))
						gpu(q, piece("x", q, RW), ownP(q, q, R), piece("alpha", q, R))
						gpu(q, piece("r", q, RW), piece("Ap", q, R), piece("alpha", q, R))
						gpu(q, piece("part2", q, RW), piece("r", q, R))
						gpu(q, slot("gath2", q, q, RW), piece("part2", q, R))
						exchange("gath2", q)
					}
					for q := range uint64(P) {
						gpu(q, piece("rr_new", q, RW), piece("gath2", q, R))
						gpu(q, piece("beta", q, RW), piece("rr", q, RW), piece("rr_new", q, R))
						gpu(q, ownP(q, q, RW), piece("r", q, R), piece("beta", q, R))
						for o := range uint64(P) {
							if o != q {
								copyOn(q, ownP(q, q, R), ownP(q, o, W))
							}
						}
					}
				}
				matrixMoved, betweenGPUs := uint64(0), uint64(0)
				for q, list := range vs {
					away := 0
					for _, v := range list {
						if v.Device() != q {
							away++
						}
						for _, m := range v.Moves() {
							if m.Array == arrays["rowptr"] || m.Array == arrays["col"] || m.Array == arrays["val"] {
								matrixMoved += m.Len
							}
							if m.From != Host {
								betweenGPUs += m.Len
							}
						}
					}
					if away > 0 {
						t.Errorf("repetition %d: %d of partition %d's %d vertices off GPU %d", rep, away, q, len(list), q)
					}
				}
				if rep > 0 && matrixMoved > 0 {
					t.Errorf("repetition %d moved %d bytes of the matrix", rep, matrixMoved)
				}
				// In place, what a partition sends is where its reader wants it: nothing
				// moves from GPU to GPU (the partial sums and p's rows cross by the copies).
				if inPlace && betweenGPUs > 0 {
					t.Errorf("repetition %d, copies in place: %d bytes move between GPUs", rep, betweenGPUs)
				}
				t.Logf("repetition %d: %d bytes move between GPUs", rep, betweenGPUs)
				endAll()
			}
		})
	}
}
