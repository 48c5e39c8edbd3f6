package plan

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds Parse arbitrary text, seeded with every fixture and synthetic
// plan. Any input must either fail with a *PlanError wrapping one of the
// sentinels, and no plan, or give a plan that passes recheck (every id and chunk
// range inside what it names) and whose layouts, where Layout accepts the sizes,
// pass recheckLayout (every byte an op touches inside its buffer). No input may
// panic.
func FuzzParse(f *testing.F) {
	paths := fixturePaths(f)
	more, _ := filepath.Glob(filepath.Join("testdata", "golden", "synthetic", "*.json"))
	for _, path := range append(paths, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(onePlan(chunks1, copyOp)))
	f.Add([]byte(twoRanks(sigMem+","+waitMem, sigMem+","+waitMem)))
	f.Add([]byte(`{"name":"t","collective":"allgather","protocol":"LL","inplace":true,"gpus":[]}`))
	sentinels := []error{ErrMalformed, ErrUnsupportedOp, ErrOutOfRange, ErrLimit, ErrUnmatched}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatal("a plan returned with an error")
			}
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Fatalf("%v (%T) is not a *PlanError", err, err)
			}
			n := 0
			for _, s := range sentinels {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%v wraps %d sentinels", err, n)
			}
			_ = err.Error()
			return
		}
		if !json.Valid(data) {
			t.Fatal("Parse accepted text encoding/json finds invalid")
		}
		recheck(t, p)
		for r := range min(len(p.Ranks), 4) {
			for _, c := range []uint64{p.BufferAlignment, 3 * p.BufferAlignment, 1 << 16} {
				in, out := sizesFor(p, r, c)
				l, err := p.Layout(r, in, out)
				if err != nil {
					if !errors.Is(err, ErrMessageSize) {
						t.Fatalf("rank %d at %d/%d: %v", r, in, out, err)
					}
					continue
				}
				recheckLayout(t, p, l)
			}
			_ = p.CheckBuffers(r, CallBuffers{SendAddr: 1 << 20, SendBytes: 4096, RecvAddr: 1 << 20, RecvBytes: 4096 * uint64(len(p.Ranks))})
		}
	})
}
