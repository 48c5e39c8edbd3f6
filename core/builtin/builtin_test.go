package builtin

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the generators")

// goldenCase is one plan kept in testdata.
type goldenCase struct {
	alg Algorithm
	n   int
	o   Options
}

// goldenNs are the rank counts every algorithm's goldens cover.
var goldenNs = []int{2, 3, 4, 5, 8, 10}

// goldenCases lists the plans kept in testdata: every algorithm and variant at
// every goldenNs with default options, and at some n the shapes the defaults do
// not reach there: pipelining, several lanes, other roots, several peer groups
// (PeersPerLane 2), segment lanes (many pieces).
func goldenCases() []goldenCase {
	var cs []goldenCase
	add := func(key string, n int, o Options) {
		c, name, _ := strings.Cut(key, ".")
		a, ok := Lookup(c, name)
		if !ok {
			panic("no algorithm " + key)
		}
		for _, ip := range []bool{false, true} {
			o.InPlace = ip
			cs = append(cs, goldenCase{a, n, o})
		}
	}
	for _, n := range goldenNs {
		for _, a := range algorithms {
			add(a.Key(), n, Options{})
		}
		add("allreduce.ring", n, Options{Chunks: 2})
		add("broadcast.chain", n, Options{Root: n - 1, Chunks: 3})
		add("broadcast.tree", n, Options{Root: 1, Chunks: 2})
		add("reduce.direct", n, Options{Root: n - 1})
		add("reduce.chain", n, Options{Root: n - 1, Chunks: 3})
		add("reduce.tree", n, Options{Root: 1, Chunks: 2})
	}
	for _, n := range []int{3, 4} {
		for _, key := range []string{"allreduce.allpairs", "allreduce.direct", "allreduce.ring", "allgather.allpairs",
			"reducescatter.allpairs", "alltoall.pairwise", "reduce.direct", "broadcast.tree", "reduce.tree"} {
			add(key, n, Options{Lanes: 2, Root: 1})
		}
	}
	for _, n := range []int{5, 8} {
		for _, key := range []string{"allreduce.allpairs", "allreduce.direct", "allgather.allpairs", "reducescatter.allpairs",
			"alltoall.pairwise", "reduce.direct"} {
			add(key, n, Options{PeersPerLane: 2, Root: 2})
		}
		add("allreduce.allpairs", n, Options{PeersPerLane: 3, Lanes: 2})
	}
	add("allreduce.ring", 2, Options{Chunks: 13}) // segments cut inside a step
	add("broadcast.chain", 3, Options{Chunks: 13, Root: 2})
	add("reduce.chain", 3, Options{Chunks: 13, Root: 1})
	return cs
}

func (c goldenCase) path() string {
	return filepath.Join("testdata", c.alg.PlanName(c.n, c.o)+".json")
}

// TestGoldens compares each golden case's plan with its file in testdata, or with
// -update writes the files. Files no case makes fail the test: they would be
// stale.
func TestGoldens(t *testing.T) {
	want := map[string]bool{}
	for _, c := range goldenCases() {
		path := c.path()
		want[filepath.Base(path)] = true
		js, _, err := c.alg.Generate(c.n, c.o)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if *update {
			if err := os.WriteFile(path, js, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run go test -update to write it)", err)
			continue
		}
		if !bytes.Equal(old, js) {
			t.Errorf("%s differs from the generator's output (go test -update rewrites it)", path)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[filepath.Base(f)] {
			if *update {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s: no golden case makes it (go test -update removes it)", f)
		}
	}
}

// TestGoldensLoad loads every golden file as a plan.
func TestGoldensLoad(t *testing.T) {
	for _, c := range goldenCases() {
		f, err := os.Open(c.path())
		if err != nil {
			t.Fatal(err)
		}
		_, err = plan.Load(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", c.path(), err)
		}
	}
}

// checkPlan checks what a caller relies on: name, collective, in-place flag, the
// chunk counts Algorithm.Chunks gives on every rank, and byte layouts of every
// rank at the smallest sizes the counts allow and at a larger one.
func checkPlan(t *testing.T, a Algorithm, n int, o Options, p *plan.Plan) {
	t.Helper()
	if p.Name != a.PlanName(n, o) || p.Collective != a.Collective || p.InPlace != o.InPlace || len(p.Ranks) != n {
		t.Fatalf("%s: name %q collective %q in place %t, %d ranks", a.PlanName(n, o), p.Name, p.Collective, p.InPlace, len(p.Ranks))
	}
	if p.BufferAlignment != uint64(o.norm().Alignment) || p.MinMessageBytes != 0 || p.MaxMessageBytes != 1<<64-1 || p.Protocol != "Simple" {
		t.Fatalf("%s: alignment %d, sizes %d..%d, protocol %q", p.Name, p.BufferAlignment, p.MinMessageBytes, p.MaxMessageBytes, p.Protocol)
	}
	in, out := a.Chunks(n, o)
	lanes := 0
	for r := range p.Ranks {
		lanes = max(lanes, len(p.Ranks[r].Lanes))
	}
	if lanes != a.Lanes(n, o) {
		t.Fatalf("%s: %d lanes on the busiest rank, Lanes says %d", p.Name, lanes, a.Lanes(n, o))
	}
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		if rk.InputChunks != in || rk.OutputChunks != out {
			t.Fatalf("%s rank %d: chunks %d/%d, Chunks says %d/%d", p.Name, r, rk.InputChunks, rk.OutputChunks, in, out)
		}
		for _, unit := range []uint64{uint64(o.norm().Alignment), 12 * uint64(o.norm().Alignment)} {
			if _, err := p.Layout(r, uint64(in)*unit, uint64(out)*unit); err != nil {
				t.Fatalf("%s rank %d: layout at %d-byte chunks: %v", p.Name, r, unit, err)
			}
		}
	}
}

// TestAllShapes generates every algorithm for many rank counts and options and
// checks each plan (parsing is part of generating).
func TestAllShapes(t *testing.T) {
	ns := []int{2, 3, 4, 5, 6, 7, 9, 10, 17, 33, 64}
	if testing.Short() {
		ns = []int{2, 3, 9, 17}
	}
	for _, a := range algorithms {
		for _, n := range ns {
			opts := []Options{{InPlace: n%2 == 1}}
			if n <= 17 {
				opts = append(opts, Options{InPlace: n%2 == 0})
				opts = append(opts,
					Options{Lanes: 3, Chunks: 4, Root: n / 2, InPlace: true},
					Options{Lanes: 2, Chunks: 25, Root: n - 1, PeersPerLane: 3, Alignment: 16})
			}
			for _, o := range opts {
				_, p, err := a.Generate(n, o)
				if err != nil {
					t.Fatalf("%s n=%d %+v: %v", a.Key(), n, o, err)
				}
				checkPlan(t, a, n, o, p)
			}
		}
	}
}

// TestLaneLimits checks that the generators stay within MSCCL++ 0.9's per-lane
// limits where they bind at 64 ranks: 64 ops, 16 channels, 16 remote buffers.
func TestLaneLimits(t *testing.T) {
	for _, a := range algorithms {
		o := Options{Chunks: 13} // two segment lanes per broadcast lane
		if a.Name == "ring" {
			o.Chunks = 1 // 127 steps: eleven segment lanes
		}
		_, p, err := a.Generate(64, o)
		if err != nil {
			t.Fatalf("%s: %v", a.Key(), err)
		}
		most := [3]int{}
		for _, rk := range p.Ranks {
			for _, l := range rk.Lanes {
				ops := 0
				for _, op := range l.Ops {
					ops += 1 + len(op.Ops)
				}
				most = [3]int{max(most[0], ops), max(most[1], len(l.MemoryChannels)), max(most[2], len(l.MemoryBuffers))}
			}
		}
		if most[0] > plan.MaxOpsPerLane || most[1] > plan.MaxLaneChannels || most[2] > plan.MaxLaneBuffers {
			t.Errorf("%s: %v ops, channels, buffers per lane", a.Key(), most)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		key string
		n   int
		o   Options
	}{
		{"allreduce.ring", 1, Options{}},
		{"allreduce.ring", plan.MaxRanks + 1, Options{}},
		{"broadcast.chain", 4, Options{Root: 4}},
		{"reduce.direct", 4, Options{Root: -1}},
		{"allgather.allpairs", 4, Options{Lanes: -1}},
		{"allreduce.ring", 4, Options{Chunks: -2}},
		{"alltoall.pairwise", 4, Options{PeersPerLane: 9}},
		{"allreduce.allpairs", 4, Options{Alignment: -16}},
		{"allreduce.ring", 4, Options{Chunks: plan.MaxChunks}},
		{"allreduce.ring", 64, Options{Chunks: 40}}, // too big a plan: refused before it is built
		{"broadcast.tree", 4, Options{Lanes: plan.MaxLanes + 1}},
		{"allreduce.tree", 4, Options{}},
	} {
		c, name, _ := strings.Cut(tc.key, ".")
		js, p, err := Generate(c, name, tc.n, tc.o)
		if !errors.Is(err, ErrOptions) || js != nil || p != nil {
			t.Errorf("%s n=%d %+v: %v, want ErrOptions and nothing else", tc.key, tc.n, tc.o, err)
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"allreduce.allpairs", "allreduce.direct", "allreduce.ring", "allgather.allpairs", "reducescatter.allpairs",
		"alltoall.pairwise", "broadcast.chain", "broadcast.tree", "reduce.chain", "reduce.tree", "reduce.direct"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	a, _ := Lookup("allreduce", "ring")
	if got := a.PlanName(4, Options{Chunks: 2, InPlace: true}); got != "ucxxgo.allreduce.ring.n4.c2.inplace" {
		t.Errorf("PlanName = %q", got)
	}
	a, _ = Lookup("broadcast", "tree")
	if got := a.PlanName(8, Options{Root: 3, Lanes: 2, Alignment: 16}); got != "ucxxgo.broadcast.tree.n8.root3.c1.l2.a16.outofplace" {
		t.Errorf("PlanName = %q", got)
	}
	for _, a := range Algorithms() {
		for _, n := range []int{2, 5, 12} {
			in, out := a.Chunks(n, Options{})
			switch a.Collective {
			case "allgather":
				if out != n*in {
					t.Errorf("%s: %d, %d chunks", a.Key(), in, out)
				}
			case "reducescatter":
				if in != n*out {
					t.Errorf("%s: %d, %d chunks", a.Key(), in, out)
				}
			default:
				if in != out {
					t.Errorf("%s: %d, %d chunks", a.Key(), in, out)
				}
			}
		}
	}
}
