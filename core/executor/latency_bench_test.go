package executor

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// BenchmarkAllReduceSmall: an 8-byte allreduce (the built-in all-pairs plan) between
// two in-process ranks, per call: the executor alone (no Python, no crossing).
func BenchmarkAllReduceSmall(b *testing.B) {
	_, p, err := builtin.AllReduceAllPairs(2, builtin.Options{InPlace: true})
	if err != nil {
		b.Fatal(err)
	}
	benchAllReduce(b, p, 2, 8, 8, 20*time.Second)
}

// BenchmarkAllReduceSmallRanks: small allreduces at 2, 4 and 8 in-process ranks (one
// goroutine each, so run it where the ranks have a core each), with the all-pairs
// plan and the direct one, from 8 bytes to 64 KiB: where the registry's threshold
// between them lies.
//
//	go test -run '^$' -bench AllReduceSmallRanks -benchtime 2000x ./core/executor
func BenchmarkAllReduceSmallRanks(b *testing.B) {
	plans := []struct {
		name string
		make func(int, builtin.Options) ([]byte, *plan.Plan, error)
	}{{"allpairs", builtin.AllReduceAllPairs}, {"direct", builtin.AllReduceDirect}}
	for _, n := range []int{2, 4, 8} {
		for _, size := range []int{8, 1 << 10, 16 << 10, 64 << 10} {
			for _, pl := range plans {
				b.Run(fmt.Sprintf("ranks=%d/bytes=%d/%s", n, size, pl.name), func(b *testing.B) {
					if pl.name == "allpairs" && size%(4*n) != 0 {
						b.Skipf("all-pairs takes whole float32 blocks per rank (the communicator pads the rest)")
					}
					_, p, err := pl.make(n, builtin.Options{InPlace: true})
					if err != nil {
						b.Fatal(err)
					}
					benchAllReduce(b, p, n, size, int64(size), 20*time.Second)
				})
			}
		}
	}
}

// BenchmarkAllReduceLargeLanes: the ring allreduce from 1 to 16 MiB at 2, 4 and 8
// in-process ranks with 1, 2 and 4 lanes (goroutines) per rank, and the chunks the
// registry pipelines large messages with (4 from 4 MiB): whether the registry should
// give large messages more lanes where the ranks have cores to spare. Bus bandwidth
// (nccl-tests': 2(n-1)/n of the bytes a rank moves per call) is the MB/s column.
//
//	go test -run '^$' -bench AllReduceLargeLanes -benchtime 20x ./core/executor
func BenchmarkAllReduceLargeLanes(b *testing.B) {
	for _, n := range []int{2, 4, 8} {
		for _, size := range []int{1 << 20, 4 << 20, 16 << 20} {
			for _, lanes := range []int{1, 2, 4} {
				b.Run(fmt.Sprintf("ranks=%d/bytes=%d/lanes=%d", n, size, lanes), func(b *testing.B) {
					o := builtin.Options{InPlace: true, Lanes: lanes}
					if size >= 4<<20 {
						o.Chunks = 4
					}
					_, p, err := builtin.AllReduceRing(n, o)
					if err != nil {
						b.Fatal(err)
					}
					benchAllReduce(b, p, n, size, int64(size)*int64(2*(n-1))/int64(n), 60*time.Second)
				})
			}
		}
	}
}

// benchAllReduce times in-place float32 sum allreduces of size bytes with plan p on n
// in-process ranks (one goroutine each), after two untimed calls (the first makes the
// plan's context), reporting setBytes a call.
func benchAllReduce(b *testing.B, p *plan.Plan, n, size int, setBytes int64, timeout time.Duration) {
	xs := newWorld(&testing.T{}, n, Options{Timeout: timeout})
	defer func() {
		for _, x := range xs {
			x.Close()
		}
	}()
	bufs := make([][]byte, n)
	for r := range bufs {
		bufs[r] = cbytes(size)
	}
	b.SetBytes(setBytes)
	calls := 2
	run := func(r int, x *Executor) error {
		for range calls {
			if err := x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), uint64(size)}, Recv: Buffer{addr(bufs[r]), uint64(size)},
				DType: reduce.Float32, Op: reduce.Sum}); err != nil {
				return err
			}
		}
		return nil
	}
	warm := onAll(xs, run)
	calls = b.N
	b.ResetTimer()
	for _, err := range append(warm, onAll(xs, run)...) {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLaneSync: calls whose lanes meet on the plan's semaphores and barriers,
// the paths of sem_acquire, sem_release and barrier. alltoall_ring: MSCCL++'s alltoall
// ring on 4 in-process ranks of 32 lanes (48 semaphores a rank, each released once and
// acquired once a call). handoff: 2 ranks of 2 lanes that hand a pair of semaphores
// back and forth 16 times a call (every acquire but the first waits for the other
// lane's release). barriers: 2 ranks of 2 lanes that meet at 16 barriers a call.
//
//	go test -run '^$' -bench LaneSync -benchtime 2000x ./core/executor
func BenchmarkLaneSync(b *testing.B) {
	b.Run("alltoall_ring", func(b *testing.B) {
		p := loadFixture(&testing.T{}, "single_node__alltoall__alltoall_ring.json")
		benchAllReduce(b, p, 4, 1024, 1024, 20*time.Second)
	})
	for _, c := range []struct{ name, text string }{{"handoff", handoffPlan(2, 16)}, {"barriers", barriersPlan(2, 16)}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := plan.Parse([]byte(c.text))
			if err != nil {
				b.Fatal(err)
			}
			benchAllReduce(b, p, 2, 64, 64, 20*time.Second)
		})
	}
}

// barriersPlan is an n-rank plan whose two lanes a rank meet at barrier 0 k times.
func barriersPlan(n, k int) string {
	var ops []string
	for range k {
		ops = append(ops, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`)
	}
	return semPlan("barriers", n, nil, ops, ops)
}

// handoffPlan is an n-rank plan whose two lanes a rank hand semaphores 0 and 1 back
// and forth k times: lane 0 releases 0 and acquires 1, lane 1 acquires 0 and releases
// 1. Both start at 0, and every call leaves them there.
func handoffPlan(n, k int) string {
	var l0, l1 []string
	for range k {
		l0 = append(l0, `{"name":"sem_release","semaphore_ids":[0]}`, `{"name":"sem_acquire","semaphore_ids":[1]}`)
		l1 = append(l1, `{"name":"sem_acquire","semaphore_ids":[0]}`, `{"name":"sem_release","semaphore_ids":[1]}`)
	}
	return semPlan("handoff", n, []int{0, 0}, l0, l1)
}

// semPlan is an n-rank allreduce-shaped plan without channels whose every rank has
// semaphores of the given initial values and one lane per list of ops.
func semPlan(name string, n int, inits []int, lanes ...[]string) string {
	sems := make([]string, len(inits))
	for i, v := range inits {
		sems[i] = fmt.Sprintf(`{"init_value":%d}`, v)
	}
	tbs := make([]string, len(lanes))
	for i, ops := range lanes {
		tbs[i] = fmt.Sprintf(`{"id":%d,"channels":[],"remote_buffer_refs":[],"ops":[%s]}`, i, strings.Join(ops, ","))
	}
	ranks := make([]string, n)
	for r := range ranks {
		ranks[r] = fmt.Sprintf(`{"id":%d,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,"channels":[],"remote_buffers":[],"semaphores":[%s],"threadblocks":[%s]}`,
			r, strings.Join(sems, ","), strings.Join(tbs, ","))
	}
	return fmt.Sprintf(`{"name":%q,"collective":"allreduce","protocol":"Simple","inplace":true,"gpus":[%s]}`, name, strings.Join(ranks, ","))
}

// BenchmarkLaneSemaphore: a plan semaphore alone, without a call: handoff, two
// goroutines handing two semaphores back and forth (each round two acquires that
// block); uncontended, an acquire and a release on one goroutine (the count lets it
// through).
func BenchmarkLaneSemaphore(b *testing.B) {
	newRun := func(sems int) *callRun {
		c := &planContext{sems: make([]rankSemaphore, sems)}
		for i := range c.sems {
			c.sems[i].init(0)
		}
		b.Cleanup(func() {
			if c.syncTimer != nil {
				c.syncTimer.Stop()
			}
		})
		return &callRun{ctx: c, flag: 1, scope: &waitScope{deadline: time.Now().Add(time.Hour), timeout: time.Hour, aborted: new(atomic.Bool)}}
	}
	b.Run("handoff", func(b *testing.B) {
		r := newRun(2)
		s := r.ctx.sems
		done := make(chan error, 1)
		go func() {
			for range b.N {
				if err := s[0].acquire(r, 0); err != nil {
					done <- err
					return
				}
				s[1].release()
			}
			done <- nil
		}()
		for range b.N {
			s[0].release()
			if err := s[1].acquire(r, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
	b.Run("uncontended", func(b *testing.B) {
		r := newRun(1)
		s := &r.ctx.sems[0]
		s.release()
		for range b.N {
			if err := s.acquire(r, 0); err != nil {
				b.Fatal(err)
			}
			s.release()
		}
	})
}
