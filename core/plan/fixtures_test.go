package plan

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureOutcome is what Parse must do with a fixture of testdata/mscclpp-v0.9.0
// (plans the v0.9.0 DSL emits): load it when the real 0.9 parser does (checked
// with the parser harness, /work/notes/mscclpp-plan-notes.md section 4), else fail
// with the sentinel for the reason 0.9 fails.
var fixtureOutcome = map[string]struct {
	err  error  // nil: loads
	says string // part of the error message
}{
	// 0.9 divides by input_chunks or output_chunks 0 in checkMessageSize (SIGFPE):
	// emitter tests built on TestCollective with empty buffers.
	"unit_tests__barrier_test.json":                               {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__flush__flush_fuse_test.json":                     {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__flush__flush_test.json":                          {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__get__get_fuse_test.json":                         {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__get__get_test.json":                              {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__put__put_fuse_test.json":                         {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__put__put_test.json":                              {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__put__put_with_signal_and_flush_test.json":        {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__put__put_with_signal_fuse_test.json":             {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__put__put_with_signal_test.json":                  {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__put_packet_test.json":                            {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__read_put_packet_test.json":                       {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__reduce_copy_packet_test.json":                    {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__reduce_copy_send_packet_test.json":               {ErrOutOfRange, "output_chunks is 0"},
	"unit_tests__reduce_packet__reduce_packets_fuse_test.json":    {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__reduce_packet__reduce_packets_test.json":         {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__reduce_send_packet_test.json":                    {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__semaphore.json":                                  {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__signal_wait__relaxed_signal_wait_fuse_test.json": {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__signal_wait__relaxed_signal_wait_test.json":      {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__signal_wait__signal_wait_fuse_test.json":         {ErrOutOfRange, "input_chunks is 0"},
	"unit_tests__signal_wait__signal_wait_test.json":              {ErrOutOfRange, "input_chunks is 0"},
	// The 0.9 DSL emits res without channel_type; 0.9's parser then throws
	// "Invalid channel type" for its remote destination.
	"unit_tests__reduce_send_test.json":          {ErrMalformed, "res needs a channel_type"},
	"unit_tests__tbg__tbg_reduce_send_test.json": {ErrMalformed, "res needs a channel_type"},
	// Unfused switch ops: "Invalid operation type" in 0.9.
	"unit_tests__switch_broadcast_test.json": {ErrUnsupportedOp, `"gstore" is accepted by MSCCL++ only from v0.10.0`},
	"unit_tests__switch_reduce_test.json":    {ErrUnsupportedOp, `"glre"`},
}

// TestFixtures loads every fixture: the 34 that MSCCL++ 0.9 loads must load, the
// others must fail as fixtureOutcome says.
func TestFixtures(t *testing.T) {
	loaded := 0
	for _, path := range fixturePaths(t) {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			want, bad := fixtureOutcome[name]
			p, err := loadFile(path)
			if !bad {
				if err != nil {
					t.Fatalf("0.9 loads it, Parse: %v", err)
				}
				loaded++
				recheck(t, p)
				return
			}
			if p != nil {
				t.Fatal("a plan returned with an error")
			}
			wantErr(t, err, want.err, want.says)
		})
	}
	if want := len(fixturePaths(t)) - len(fixtureOutcome); loaded != want || loaded != 34 {
		t.Errorf("%d fixtures loaded, want %d (34)", loaded, want)
	}
}

// TestFixturesRepaired gives the fixtures that fail only for chunk counts of 0
// counts that cover their refs, and records what Parse says then: most load; the
// rest have synchronisation that would hang or stay unbalanced under 0.9's
// channel pairing, which 0.9 itself does not check.
func TestFixturesRepaired(t *testing.T) {
	unmatched := map[string]string{
		// Port channels from rank 0 to rank 1 only: nothing pairs them.
		"unit_tests__flush__flush_fuse_test.json": "rank 1 has only 0 port channels to rank 0",
		"unit_tests__flush__flush_test.json":      "rank 1 has only 0 port channels to rank 0",
		// A memory channel from rank 0 to rank 1 only.
		"unit_tests__reduce_copy_send_packet_test.json": "rank 1 has only 0 memory channels to rank 0",
		// Two pws (two signals) against one wait.
		"unit_tests__put__put_with_signal_fuse_test.json": "signalled 3 times",
		// Each rank signals channels 0 and 1 but waits on 2 and 3: by 0.9's
		// pairing the waits are never signalled.
		"unit_tests__signal_wait__relaxed_signal_wait_fuse_test.json": "signalled 1 times",
		"unit_tests__signal_wait__signal_wait_fuse_test.json":         "signalled 1 times",
	}
	n := 0
	for _, path := range fixturePaths(t) {
		name := filepath.Base(path)
		if o, ok := fixtureOutcome[name]; !ok || o.err != ErrOutOfRange {
			continue
		}
		n++
		text := repairChunks(t, path)
		p, err := Parse(text)
		if says, ok := unmatched[name]; ok {
			wantErr(t, err, ErrUnmatched, says)
			continue
		}
		if err != nil {
			t.Errorf("%s repaired: %v", name, err)
			continue
		}
		recheck(t, p)
	}
	if n != 22 {
		t.Errorf("%d zero-chunk fixtures, want 22", n)
	}
}

// TestFixtureLayouts lays out every loading fixture for every rank at a size
// inside its message-size window, and checks every span with recheckLayout.
func TestFixtureLayouts(t *testing.T) {
	for _, path := range fixturePaths(t) {
		if _, bad := fixtureOutcome[filepath.Base(path)]; bad {
			continue
		}
		p := mustLoad(t, path)
		for r := range p.Ranks {
			for _, c := range []uint64{p.BufferAlignment, 1 << 12, 1 << 16} {
				in, out := sizesFor(p, r, c)
				if !inWindow(p, in, out) {
					continue
				}
				l, err := p.Layout(r, in, out)
				if err != nil {
					t.Errorf("%s rank %d at %d/%d: %v", filepath.Base(path), r, in, out, err)
					continue
				}
				recheckLayout(t, p, l)
			}
		}
	}
}

func sizesFor(p *Plan, r int, chunk uint64) (in, out uint64) {
	rk := &p.Ranks[r]
	return uint64(rk.InputChunks) * chunk, uint64(rk.OutputChunks) * chunk
}

func inWindow(p *Plan, in, out uint64) bool {
	s := in
	if p.Collective == "allgather" {
		s = out
	}
	return s >= p.MinMessageBytes && s <= p.MaxMessageBytes
}

func loadFile(path string) (*Plan, error) {
	text, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(text)
}

// TestSentinelsDistinct keeps the sentinels apart: no sentinel wraps another.
func TestSentinelsDistinct(t *testing.T) {
	all := []error{ErrMalformed, ErrUnsupportedOp, ErrOutOfRange, ErrLimit, ErrUnmatched, ErrMessageSize, ErrBuffers}
	for i, a := range all {
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v wraps %v", a, b)
			}
		}
	}
}
