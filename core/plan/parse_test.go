package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// sub replaces the one occurrence of old in s; it panics if there is none, so a
// test cannot silently test the unmodified text.
func sub(s, old, new string) string {
	if strings.Count(s, old) < 1 {
		panic(fmt.Sprintf("sub: %q not in %s", old, s))
	}
	return strings.Replace(s, old, new, 1)
}

const (
	chunks1   = `"input_chunks":1,"output_chunks":1,"scratch_chunks":0`
	chunks2s2 = `"input_chunks":2,"output_chunks":2,"scratch_chunks":2`
	copyOp    = `{"name":"copy","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`
	sigMem    = `{"name":"signal","channel_ids":[0],"channel_type":"memory"}`
	waitMem   = `{"name":"wait","channel_ids":[0],"channel_type":"memory"}`
)

// TestParseExample checks every field of the example plan of docs/plan-format.md
// section 13.
func TestParseExample(t *testing.T) {
	p := mustLoad(t, "testdata/mscclpp-v0.9.0/allreduce_2r_example.json")
	if p.Name != "allreduce_2r_example" || p.Collective != "allreduce" || p.Protocol != "Simple" || p.UsesPackets() ||
		p.InPlace || p.ReuseResources || p.ThreadsPerBlock != 1024 || p.DoubleScratch || p.BufferAlignment != 16 ||
		p.MinMessageBytes != 0 || p.MaxMessageBytes != math.MaxUint64 || len(p.Ranks) != 2 {
		t.Fatalf("top level: %+v", p)
	}
	for r, rk := range p.Ranks {
		peer := 1 - r
		if rk.ID != r || rk.InputChunks != 2 || rk.OutputChunks != 2 || rk.ScratchChunks != 0 {
			t.Errorf("rank %d: %+v", r, rk)
		}
		if fmt.Sprint(rk.MemoryChannels) != fmt.Sprint([]Channel{{Peer: peer, Ordinal: 0, Reverse: 0}}) || len(rk.PortChannels) != 0 {
			t.Errorf("rank %d channels %+v %+v", r, rk.MemoryChannels, rk.PortChannels)
		}
		want := []RemoteBuffer{
			{Rank: peer, Buffer: BufferInput, Memory: true, MemoryIndex: 0, PortIndex: -1},
			{Rank: peer, Buffer: BufferOutput, Memory: true, MemoryIndex: 1, PortIndex: -1},
		}
		if fmt.Sprint(rk.RemoteBuffers) != fmt.Sprint(want) {
			t.Errorf("rank %d remote buffers %+v", r, rk.RemoteBuffers)
		}
		if fmt.Sprint(p.ConnectedPeers(r)) != fmt.Sprint([]int{peer}) {
			t.Errorf("rank %d peers %v", r, p.ConnectedPeers(r))
		}
		l := rk.Lanes[0]
		if len(rk.Lanes) != 1 || fmt.Sprint(l.MemoryChannels, l.MemoryBuffers) != "[0] [0 1]" || len(l.Ops) != 11 {
			t.Fatalf("rank %d lane %+v", r, l)
		}
		var codes []string
		for _, op := range l.Ops {
			codes = append(codes, op.Code.String())
		}
		if strings.Join(codes, " ") != "nop rlxsignal nop rlxwait nop rres nop signal nop wait nop" {
			t.Errorf("rank %d ops %v", r, codes)
		}
		rres := l.Ops[5]
		if rres.Channel != ChannelMemory || rres.Reduce != ReduceSum || rres.Group != (TBGroup{0, 1}) || len(rres.Src) != 2 || len(rres.Dst) != 2 {
			t.Fatalf("rank %d rres %+v", r, rres)
		}
		wantSrc := []BufferRef{
			{Kind: RefLocal, ID: -1, Index: r, Size: 1, Buffer: BufferInput, Rank: r, RemoteBuffer: -1, SwitchChannel: -1},
			{Kind: RefRemote, ID: 0, Index: r, Size: 1, Buffer: BufferInput, Rank: peer, RemoteBuffer: 0, SwitchChannel: -1},
		}
		wantDst := []BufferRef{
			{Kind: RefLocal, ID: -1, Index: r, Size: 1, Buffer: BufferOutput, Rank: r, RemoteBuffer: -1, SwitchChannel: -1},
			{Kind: RefRemote, ID: 1, Index: r, Size: 1, Buffer: BufferOutput, Rank: peer, RemoteBuffer: 1, SwitchChannel: -1},
		}
		if fmt.Sprint(rres.Src) != fmt.Sprint(wantSrc) || fmt.Sprint(rres.Dst) != fmt.Sprint(wantDst) {
			t.Errorf("rank %d rres refs\n%+v\n%+v", r, rres.Src, rres.Dst)
		}
	}
	// Section 8.7 (e): rank 1 at 1 MiB runs its rres on chunk 1, bytes 524288..
	l, err := p.Layout(1, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Lanes[0][5]; fmt.Sprint(got.Src, got.Dst) != "[{524288 524288} {524288 524288}] [{524288 524288} {524288 524288}]" {
		t.Errorf("rres layout %+v", got)
	}
}

// TestOpCodes checks the op-name table: every name 0.9 accepts, in 0.9's enum
// order, and the three later or DSL-only names that it rejects.
func TestOpCodes(t *testing.T) {
	accepted := "nop barrier put ppkt rppkt pws pwsf get copy cpkt upkt signal wait flush re repkt recpkt res respkt " +
		"recspkt rre rres glres rlxsignal rlxwait pipeline sem_release sem_acquire"
	var got, rejected []string
	for c := OpNop; c < opCodeEnd; c++ {
		back, ok := ParseOpCode(c.String())
		if !ok || back != c {
			t.Errorf("%v does not round-trip", c)
		}
		if c.Accepted() {
			got = append(got, c.String())
		} else {
			rejected = append(rejected, c.String())
		}
	}
	if strings.Join(got, " ") != accepted {
		t.Errorf("accepted %v", got)
	}
	if strings.Join(rejected, " ") != "gstore gstorepkt glre" {
		t.Errorf("rejected %v", rejected)
	}
	if _, ok := ParseOpCode("start"); ok {
		t.Error("start parses")
	}
}

// TestParseTolerance: what MSCCL++'s parser tolerates, Parse tolerates too.
func TestParseTolerance(t *testing.T) {
	base := onePlan(chunks1, copyOp)
	for _, c := range []struct{ name, text string }{
		{"unknown fields at every level", strings.NewReplacer(
			`"name":"t",`, `"name":"t","x_future":{"a":[1,{"b":null}],"c":"d"},`,
			`"id":0,"input`, `"id":0,"x":[[[]]],"input`,
			`"threadblocks":[{"id":0,`, `"threadblocks":[{"id":0,"x":true,`,
			`{"name":"copy",`, `{"name":"copy","reduce_op":"sum","x":1.5,`,
			`{"type":"i",`, `{"type":"i","x":"y",`,
		).Replace(base)},
		{"integral floats", sub(base, `"index":0,"size":1}],"dst`, `"index":0.0,"size":1e0}],"dst`)},
		{"a repeated key's last value wins", sub(base, `"id":0,"input`, `"id":7,"id":0,"input`)},
		{"optional fields absent", strings.NewReplacer(`"reuse_resources":false,`, ``, `"semaphores":[{"init_value":0}],`, ``,
			`"remote_buffer_refs":[],`, ``).Replace(base)},
		{"escapes in keys and strings", sub(base, `"name":"t",`, `"n\u0061me":"t\ud83d\ude00\n\"\/",`)},
		{"a key in another case is just unknown", sub(base, `"name":"t",`, `"name":"t","NAME":5,`)},
		{"ops on a non-pipeline op are ignored, as 0.9 does", sub(base, `{"name":"copy",`, `{"ops":[{"bogus":1}],"name":"copy",`)},
		{"buff on a lane channel list", sub(twoRanks(sigMem+","+waitMem, sigMem+","+waitMem),
			`{"channel_type":"memory","channel_ids":[0]}`, `{"channel_type":"memory","channel_ids":[0],"buff":"o"}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustParse(t, c.text)
			recheck(t, p)
		})
	}
	p := mustParse(t, strings.NewReplacer(`"reuse_resources":false,`, ``).Replace(base))
	if p.ThreadsPerBlock != 1024 || p.BufferAlignment != 16 || p.MaxMessageBytes != math.MaxUint64 || p.ReuseResources {
		t.Errorf("defaults: %+v", p)
	}
}

// threeRanks: rank 0 has a port channel to rank 1 and a memory channel to rank 2,
// and port access to rank 2's scratch; op is rank 0's only op.
func threeRanks(op string) string {
	return `{"name":"t3","collective":"test","protocol":"Simple","inplace":false,"gpus":[
	{"id":0,"input_chunks":1,"output_chunks":1,"scratch_chunks":1,
	 "channels":[{"channel_type":"port","connected_to":[1]},{"channel_type":"memory","connected_to":[2]}],
	 "remote_buffers":[{"rank":2,"type":"s","access_channel_types":["port"]}],
	 "threadblocks":[{"id":0,"channels":[{"channel_type":"port","channel_ids":[0]}],
	   "remote_buffer_refs":[{"access_channel_type":"port","remote_buffer_ids":[0]}],"ops":[` + op + `]}]},
	{"id":1,"input_chunks":1,"output_chunks":1,"scratch_chunks":1,"channels":[{"channel_type":"port","connected_to":[0]}],
	 "remote_buffers":[],"threadblocks":[]},
	{"id":2,"input_chunks":1,"output_chunks":1,"scratch_chunks":1,"channels":[{"channel_type":"memory","connected_to":[0]}],
	 "remote_buffers":[],"threadblocks":[]}]}`
}

// switchPlan: three ranks with NVLS groups; rank 0 and rank 1 list groups0 and
// groups1 (JSON arrays of rank groups), rank 2 the group of all three.
func switchPlan(groups0, groups1 string) string {
	rank := func(r int, groups string) string {
		return `{"id":` + fmt.Sprint(r) + `,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,
		"channels":[{"channel_type":"switch","buffer_type":"o","rank_groups":` + groups + `}],"remote_buffers":[],"threadblocks":[]}`
	}
	return `{"name":"s","collective":"allreduce","protocol":"Simple","inplace":true,"gpus":[` +
		rank(0, groups0) + "," + rank(1, groups1) + "," + rank(2, `[{"size":3,"ranks":[2,1,0]}]`) + `]}`
}

// TestParseRejects: each kind of malformed or dangerous plan fails with its
// sentinel and a message that names the problem.
func TestParseRejects(t *testing.T) {
	one := onePlan(chunks1, copyOp)
	two := func(op0, op1 string) string { return twoRanks(op0, op1) }
	pair := sigMem + "," + waitMem
	cases := []struct {
		name, text string
		err        error
		says       string
	}{
		// JSON.
		{"not JSON", `{"name":`, ErrMalformed, "end of the text"},
		{"unterminated string", `{"name":"t`, ErrMalformed, "end of JSON in a string"},
		{"raw control character", "{\"name\":\"a\tb\"}", ErrMalformed, "control character"},
		{"lone surrogate", `{"name":"\ud800"}`, ErrMalformed, "lone surrogate"},
		{"leading zero", `{"name":"t","buffer_alignment":016}`, ErrMalformed, "leading zero"},
		{"syntax error", `{"name" "t"}`, ErrMalformed, "syntax"},
		{"data after the plan", one + `{}`, ErrMalformed, "after the top-level"},
		{"not UTF-8", sub(one, `"name":"t"`, "\"name\":\"\xff\""), ErrMalformed, "UTF-8"},
		{"an array", `[]`, ErrMalformed, "want an object"},
		{"nested too deep", sub(one, `"name":"t",`, `"x":`+strings.Repeat("[", MaxDepth)+strings.Repeat("]", MaxDepth)+`,"name":"t",`), ErrLimit, "nested deeper"},
		// Top level.
		{"no name", sub(one, `"name":"t",`, ``), ErrMalformed, `missing required field "name"`},
		{"only a Name", sub(one, `"name":"t",`, `"Name":"t",`), ErrMalformed, `missing required field "name"`},
		{"no gpus", `{"name":"t","collective":"c","protocol":"p","inplace":true}`, ErrMalformed, `"gpus"`},
		{"no ranks", `{"name":"t","collective":"c","protocol":"p","inplace":true,"gpus":[]}`, ErrMalformed, "no ranks"},
		{"inplace a string", sub(one, `"inplace":false`, `"inplace":"no"`), ErrMalformed, "want true or false"},
		{"alignment 0", sub(one, `"name":"t",`, `"name":"t","buffer_alignment":0,`), ErrOutOfRange, "divides by it"},
		{"alignment huge", sub(one, `"name":"t",`, `"name":"t","buffer_alignment":2097152,`), ErrOutOfRange, "outside 0..1048576"},
		{"threads 0", sub(one, `"name":"t",`, `"name":"t","num_threads_per_block":0,`), ErrOutOfRange, "outside 1..1024"},
		{"min above max", sub(one, `"name":"t",`, `"name":"t","min_message_size":2,"max_message_size":1,`), ErrOutOfRange, "no size"},
		{"size beyond 64 bits", sub(one, `"name":"t",`, `"name":"t","max_message_size":18446744073709551616,`), ErrOutOfRange, "64 bits"},
		{"a fractional number", sub(one, `"index":0,"size":1}],"dst`, `"index":0.5,"size":1}],"dst`), ErrMalformed, "want an integer"},
		{"a boolean as a number", sub(one, `"index":0,"size":1}],"dst`, `"index":true,"size":1}],"dst`), ErrMalformed, "want an integer"},
		// Ranks.
		{"rank id not its position", sub(one, `"id":0,"input`, `"id":1,"input`), ErrMalformed, "gpus[r].id == r"},
		{"negative id", sub(one, `"id":0,"input`, `"id":-1,"input`), ErrOutOfRange, "-1 is outside"},
		{"input chunks 0", sub(one, `"input_chunks":1`, `"input_chunks":0`), ErrOutOfRange, "input_chunks is 0"},
		{"output chunks 0", sub(one, `"output_chunks":1`, `"output_chunks":0`), ErrOutOfRange, "output_chunks is 0"},
		{"too many chunks", sub(one, `"input_chunks":1`, `"input_chunks":1048577`), ErrLimit, "more than 1048576"},
		{"no threadblocks", sub(one, `"threadblocks":`, `"x":`), ErrMalformed, `"threadblocks"`},
		{"peer out of range", sub(two(pair, pair), `"connected_to":[1]},{"channel_type":"port"`, `"connected_to":[2]},{"channel_type":"port"`), ErrOutOfRange, "rank 2 of 2"},
		{"channel to itself", sub(two(pair, pair), `"connected_to":[1]},{"channel_type":"port"`, `"connected_to":[0]},{"channel_type":"port"`), ErrOutOfRange, "to itself"},
		{"rank-level channel none", sub(one, `"channels":[],"remote`, `"channels":[{"channel_type":"none","connected_to":[]}],"remote`), ErrMalformed, `"none"`},
		{"unknown channel type", sub(one, `"channels":[],"remote`, `"channels":[{"channel_type":"nvlink","connected_to":[]}],"remote`), ErrMalformed, "nvlink"},
		{"a channel with no reverse", sub(two(pair, pair), `"connected_to":[1]},{"channel_type":"port","connected_to":[1]}`, `"connected_to":[1,1]},{"channel_type":"port","connected_to":[1]}`), ErrUnmatched, "rank 1 has only 1 memory channels to rank 0"},
		{"switch group without self", sub(one, `"channels":[],"remote`, `"channels":[{"channel_type":"switch","buffer_type":"o","rank_groups":[{"size":0,"ranks":[]}]}],"remote`), ErrMalformed, "empty rank group"},
		{"remote buffer of a missing rank", sub(two(pair, pair), `{"rank":1,"type":"i"`, `{"rank":5,"type":"i"`), ErrOutOfRange, "owner rank 5 of 2"},
		{"remote buffer of itself", sub(two(pair, pair), `{"rank":1,"type":"i"`, `{"rank":0,"type":"i"`), ErrOutOfRange, "its own buffer"},
		{"remote scratch of a rank without", sub(sub(two(pair, pair), `"scratch_chunks":2`, `"scratch_chunks":0`), `"scratch_chunks":2`, `"scratch_chunks":0`), ErrOutOfRange, "no scratch buffer"},
		{"remote buffer without access", sub(two(pair, pair), `"type":"i","access_channel_types":["memory"]`, `"type":"i","access_channel_types":[]`), ErrMalformed, "no access channel type"},
		{"remote buffer access twice", sub(two(pair, pair), `"type":"i","access_channel_types":["memory"]`, `"type":"i","access_channel_types":["memory","memory"]`), ErrMalformed, "twice"},
		{"remote buffer of an unknown type", sub(two(pair, pair), `"type":"i","access`, `"type":"x","access`), ErrMalformed, `"x"`},
		// Lanes.
		{"lane id not its position", sub(one, `"threadblocks":[{"id":0`, `"threadblocks":[{"id":1`), ErrMalformed, "ops by position"},
		{"lane channel out of range", sub(two(pair, pair), `{"channel_type":"memory","channel_ids":[0]}`, `{"channel_type":"memory","channel_ids":[1]}`), ErrOutOfRange, "memory channel 1: rank 0 has 1"},
		{"lane channels over the limit", sub(two(pair, pair), `{"channel_type":"memory","channel_ids":[0]}`, `{"channel_type":"memory","channel_ids":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`), ErrLimit, "more than 16"},
		{"lane remote buffer out of range", sub(two(pair, pair), `"remote_buffer_ids":[0,1]`, `"remote_buffer_ids":[0,2]`), ErrOutOfRange, "remote buffer 2: rank 0 has 2"},
		{"lane buffer without that access", sub(two(pair, pair), `"access_channel_type":"port","remote_buffer_ids":[1]`, `"access_channel_type":"port","remote_buffer_ids":[0]`), ErrMalformed, "lack it"},
		{"too many ops", onePlan(chunks1, strings.Repeat(`{"name":"nop"},`, 64)+`{"name":"nop"}`), ErrLimit, "more than 64 ops"},
		{"too many ops with a pipeline's", onePlan(chunks1, strings.Repeat(`{"name":"nop"},`, 62)+
			`{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[{"name":"nop"},{"name":"nop"}]}`), ErrLimit, "65 ops counting"},
		// Ops.
		{"unknown op", onePlan(chunks1, `{"name":"frobnicate"}`), ErrUnsupportedOp, `unknown op "frobnicate"`},
		{"gstorepkt", onePlan(chunks1, `{"name":"gstorepkt"}`), ErrUnsupportedOp, "v0.10.0"},
		{"op without a name", onePlan(chunks1, `{"channel_type":"memory"}`), ErrMalformed, `"name"`},
		{"unknown reduce_op", sub(one, `{"name":"copy",`, `{"name":"copy","reduce_op":"prod",`), ErrUnsupportedOp, "prod"},
		{"op channel id out of range", two(`{"name":"signal","channel_ids":[1],"channel_type":"memory"},`+waitMem, pair), ErrOutOfRange, "memory channel 1: the lane has 1"},
		{"channel ids over the limit", two(`{"name":"signal","channel_ids":[0,0,0,0,0,0,0,0,0],"channel_type":"memory"}`, pair), ErrLimit, "more than 8"},
		{"channel ids without a type", onePlan(chunks1, `{"name":"nop","channel_ids":[0]}`), ErrMalformed, "without a channel_type"},
		{"signal without channels", onePlan(chunks1, `{"name":"signal","channel_type":"memory"}`), ErrMalformed, "needs channel_ids"},
		{"a wait listing a channel twice", two(sigMem+","+sigMem+`,{"name":"wait","channel_ids":[0,0],"channel_type":"memory"}`, pair), ErrMalformed, "twice"},
		{"more signals than waits", two(sigMem+","+pair, pair), ErrUnmatched, "signalled 2 times at lane level, but rank 1 waits 1 times"},
		{"a wait nobody signals", two(pair+","+waitMem, pair), ErrUnmatched, "waits 2 times"},
		{"signals in a pipeline, waits outside", two(`{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[`+sigMem+`]},`+waitMem, pair), ErrUnmatched, "in pipelines"},
		{"flush on memory", two(pair+`,{"name":"flush","channel_ids":[0],"channel_type":"memory"}`, pair), ErrMalformed, "flush on channel type"},
		{"pws on memory", two(`{"name":"pws","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1}],"channel_type":"memory"},`+waitMem, pair), ErrUnsupportedOp, "drops the signal"},
		{"get on port", two(`{"name":"get","src_buff":[{"buffer_id":0,"index":0,"size":1}],"dst_buff":[{"type":"s","index":0,"size":1}],"channel_ids":[0],"channel_type":"port"}`, ``), ErrUnsupportedOp, "only over memory"},
		{"port put without a channel per destination", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1}],"channel_type":"port"}`, ``), ErrMalformed, "one channel id each"},
		{"port put to another rank than its channel's", threeRanks(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1}],"channel_ids":[0],"channel_type":"port"}`), ErrMalformed, "destination on rank 2 sent over port channel 0 to rank 1"},
		{"res without channel_type (0.9 DSL)", two(`{"name":"res","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1},{"buffer_id":0,"index":0,"size":1}]}`, ``), ErrMalformed, "needs a channel_type"},
		{"put on a switch channel", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1}],"channel_type":"switch"}`, ``), ErrMalformed, "want one of [memory port]"},
		{"put to a local buffer", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}],"channel_type":"memory"}`, ``), ErrMalformed, "needs a remote reference here, has local buffer o"},
		{"put with fewer sources", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":1},{"buffer_id":0,"index":1,"size":1}],"channel_type":"memory"}`, ``), ErrMalformed, "1 sources and 2 destinations"},
		{"put of different sizes", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":0,"index":0,"size":2}],"channel_type":"memory"}`, ``), ErrMalformed, "its source has 1"},
		{"reduce of different sizes", onePlan(`"input_chunks":2,"output_chunks":2,"scratch_chunks":0`, `{"name":"re","src_buff":[{"type":"i","index":0,"size":1},{"type":"i","index":1,"size":1}],"dst_buff":[{"type":"o","index":0,"size":2}]}`), ErrMalformed, "mixes references of 1 and 2 chunks"},
		{"copy with two sources", onePlan(`"input_chunks":2,"output_chunks":2,"scratch_chunks":0`, `{"name":"copy","src_buff":[{"type":"i","index":0,"size":1},{"type":"i","index":1,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`), ErrMalformed, "takes 1 references"},
		{"refs on a nop", onePlan(chunks1, `{"name":"nop","src_buff":[{"type":"i","index":0,"size":1}]}`), ErrMalformed, "takes 0 references"},
		{"local ref past its buffer", onePlan(chunks1, `{"name":"copy","src_buff":[{"type":"i","index":1,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`), ErrOutOfRange, "chunks 1..2 of rank 0's i buffer, which has input_chunks 1"},
		{"remote ref past the owner's buffer", two(`{"name":"put","src_buff":[{"type":"i","index":1,"size":1}],"dst_buff":[{"buffer_id":0,"index":2,"size":1}],"channel_type":"memory"}`, ``), ErrOutOfRange, "of rank 1's i buffer"},
		{"remote ref outside the lane list", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"buffer_id":2,"index":0,"size":1}],"channel_type":"memory"}`, ``), ErrOutOfRange, "buffer_id 2: the lane has 2 memory remote buffers"},
		{"switch ref without a switch channel", onePlan(chunks1, `{"name":"glres","src_buff":[{"switch_channel_id":0,"index":0,"size":1}],"dst_buff":[{"switch_channel_id":0,"index":0,"size":1}],"channel_type":"switch"}`), ErrOutOfRange, "the lane has 0 switch channels"},
		{"a ref with type and buffer_id", two(`{"name":"put","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","buffer_id":0,"index":0,"size":1}],"channel_type":"memory"}`, ``), ErrMalformed, "exactly one of"},
		{"a ref naming no buffer", onePlan(chunks1, `{"name":"copy","src_buff":[{"index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`), ErrMalformed, "exactly one of"},
		{"a ref of size 0", onePlan(chunks1, `{"name":"copy","src_buff":[{"type":"i","index":0,"size":0}],"dst_buff":[{"type":"o","index":0,"size":0}]}`), ErrOutOfRange, "size 0"},
		{"too many refs", onePlan(chunks1, `{"name":"re","src_buff":[`+strings.Repeat(`{"type":"i","index":0,"size":1},`, 10)+`{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`), ErrLimit, "more than 10"},
		{"tb_id not below tbg_size", sub(one, `{"name":"copy",`, `{"name":"copy","tbg_info":{"tb_id":2,"tbg_size":2},`), ErrOutOfRange, "tb_id 2 not below tbg_size 2"},
		{"tbg_size 0", sub(one, `{"name":"copy",`, `{"name":"copy","tbg_info":{"tb_id":0,"tbg_size":0},`), ErrOutOfRange, "outside 1..1024"},
		{"packet op in a Simple plan", onePlan(`"input_chunks":1,"output_chunks":1,"scratch_chunks":1`, `{"name":"cpkt","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"s","index":0,"size":1}]}`), ErrMalformed, `not "LL"`},
		{"packets outside scratch", sub(onePlan(`"input_chunks":1,"output_chunks":1,"scratch_chunks":1`, `{"name":"cpkt","src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`), `"protocol":"Simple"`, `"protocol":"LL"`), ErrMalformed, "needs a local scratch reference (packets) here"},
		// Barriers, semaphores, pipelines.
		{"barrier without a count", onePlan(chunks1, `{"name":"barrier","barrier_id":0}`), ErrMalformed, "barrier needs"},
		{"barrier id 16", onePlan(chunks1, `{"name":"barrier","barrier_id":16,"num_threadblocks":1}`), ErrOutOfRange, "outside 0..15"},
		{"barrier count 0", onePlan(chunks1, `{"name":"barrier","barrier_id":0,"num_threadblocks":0}`), ErrOutOfRange, "outside 1..1024"},
		{"barrier nobody else reaches", onePlan(chunks1, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`), ErrUnmatched, "waits for 2 thread blocks, but 1 lanes use it"},
		{"barrier counts differ", lanesPlan(chunks1, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`, `{"name":"barrier","barrier_id":0,"num_threadblocks":1}`), ErrUnmatched, "num_threadblocks 1, elsewhere 2"},
		{"barrier reached unequally", lanesPlan(chunks1, `{"name":"barrier","barrier_id":3,"num_threadblocks":2},{"name":"barrier","barrier_id":3,"num_threadblocks":2}`, `{"name":"barrier","barrier_id":3,"num_threadblocks":2}`), ErrUnmatched, "lane 1 reaches it a different number of times"},
		{"barrier with too many lanes", lanesPlan(chunks1, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`), ErrUnmatched, "but 3 lanes use it"},
		{"more per-thread items than threads", sub(onePlan(chunks1, `{"name":"sem_release","semaphore_ids":[0,0]}`), `"name":"t",`, `"name":"t","num_threads_per_block":1,`), ErrOutOfRange, "needs 2 threads"},
		{"switch groups in different orders", switchPlan(`[{"size":3,"ranks":[0,1,2]},{"size":2,"ranks":[0,1]}]`, `[{"size":2,"ranks":[0,1]},{"size":3,"ranks":[0,1,2]}]`), ErrUnmatched, "ranks 0 and 1 list different switch groups"},
		{"switch group missing on a member", switchPlan(`[{"size":3,"ranks":[0,1,2]}]`, `[]`), ErrUnmatched, "ranks 0 and 1"},
		{"barrier_id on a put", sub(one, `{"name":"copy",`, `{"name":"copy","barrier_id":0,`), ErrMalformed, "barrier_id on a copy op"},
		{"semaphore ids on a copy", sub(one, `{"name":"copy",`, `{"name":"copy","semaphore_ids":[0],`), ErrMalformed, "semaphore_ids on a copy"},
		{"semaphore out of range", onePlan(chunks1, `{"name":"sem_release","semaphore_ids":[1]}`), ErrOutOfRange, "semaphore 1: rank 0 has 1"},
		{"semaphore op without ids", onePlan(chunks1, `{"name":"sem_acquire"}`), ErrMalformed, "needs semaphore_ids"},
		{"semaphore acquired, never released", onePlan(chunks1, `{"name":"sem_acquire","semaphore_ids":[0]}`), ErrUnmatched,
			"semaphore 0 starts at 0 and no op of the rank releases it, but its lanes acquire it 1 times a call: acquires past the first 0 never return"},
		{"semaphore acquired more often than it starts at", sub(lanesPlan(chunks1, `{"name":"sem_acquire","semaphore_ids":[0]}`, `{"name":"nop"},{"name":"sem_acquire","semaphore_ids":[0,0]}`), `"init_value":0`, `"init_value":2`),
			ErrUnmatched, "rank 0 lane 1 op 1 (gpus[0].threadblocks[1].ops[1]): unmatched synchronisation: semaphore 0 starts at 2 and no op of the rank releases it, but its lanes acquire it 3 times"},
		{"semaphore starting below 0, never released", sub(onePlan(chunks1, `{"name":"sem_acquire","semaphore_ids":[0]}`), `"init_value":0`, `"init_value":-1`), ErrUnmatched, "starts at -1"},
		{"semaphore acquired on one rank, released on another", twoRanks(`{"name":"sem_release","semaphore_ids":[0]},`+sigMem+","+waitMem, `{"name":"sem_acquire","semaphore_ids":[0]},{"name":"sem_acquire","semaphore_ids":[0]},`+sigMem+","+waitMem),
			ErrUnmatched, "rank 1 lane 0 op 1 (gpus[1].threadblocks[0].ops[1]): unmatched synchronisation: semaphore 0 starts at 1"},
		{"nested pipeline", onePlan(chunks1, `{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[{"name":"nop"}]}]}`), ErrMalformed, "pipeline inside a pipeline"},
		{"empty pipeline", onePlan(chunks1, `{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[]}`), ErrMalformed, "without inner ops"},
		{"pipeline without iter_context", onePlan(chunks1, `{"name":"pipeline","ops":[{"name":"nop"}]}`), ErrMalformed, "needs iter_context"},
		{"pipeline unit 0", onePlan(chunks1, `{"name":"pipeline","iter_context":{"unit_size":0,"num_chunks":1},"ops":[{"name":"nop"}]}`), ErrOutOfRange, "unit_size 0"},
		{"iter_context on a copy", sub(one, `{"name":"copy",`, `{"name":"copy","iter_context":{"unit_size":16,"num_chunks":1},`), ErrMalformed, "iter_context on a copy"},
		{"pipeline ref shorter than its chunks", onePlan(`"input_chunks":2,"output_chunks":2,"scratch_chunks":0`, `{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":2},"ops":[`+copyOp+`]}`), ErrOutOfRange, "reference of 1 chunks in a pipeline over 2 chunks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.text))
			if p != nil {
				t.Error("a plan returned with an error")
			}
			wantErr(t, err, c.err, c.says)
		})
	}
}

// TestParseSemaphoresThatMayRun: semaphores Parse cannot prove stuck load, as in
// MSCCL++: acquired no more often than they start at (each call takes some; the
// calls after they ran out would hang, but MSCCL++ runs the first ones), released
// only inside a pipeline, starting below 0 and released to above it.
func TestParseSemaphoresThatMayRun(t *testing.T) {
	acquire := `{"name":"sem_acquire","semaphore_ids":[0]}`
	release := `{"name":"sem_release","semaphore_ids":[0]}`
	for _, c := range []struct{ name, text string }{
		{"acquired as often as it starts at", sub(lanesPlan(chunks1, acquire, acquire+","+acquire), `"init_value":0`, `"init_value":3`)},
		{"released inside a pipeline", lanesPlan(chunks1, `{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[`+release+`]}`, acquire)},
		{"starting below 0", sub(lanesPlan(chunks1, release+","+release, acquire), `"init_value":0`, `"init_value":-1`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			recheck(t, mustParse(t, c.text))
		})
	}
}

// TestParseLimits checks the limits on sizes that need big inputs.
func TestParseLimits(t *testing.T) {
	// More ranks than MaxRanks.
	var b strings.Builder
	b.WriteString(`{"name":"t","collective":"c","protocol":"p","inplace":false,"gpus":[`)
	for r := 0; r <= MaxRanks; r++ {
		if r > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,"channels":[],"remote_buffers":[],"threadblocks":[]}`, r)
	}
	b.WriteString(`]}`)
	_, err := Parse([]byte(b.String()))
	wantErr(t, err, ErrLimit, "more than 1024 ranks")

	// A text longer than MaxPlanBytes, through Load.
	_, err = Load(io.MultiReader(strings.NewReader(onePlan(chunks1, copyOp)), bytes.NewReader(make([]byte, MaxPlanBytes))))
	wantErr(t, err, ErrLimit, "longer than")

	// A read error is wrapped, not a *PlanError.
	_, err = Load(io.MultiReader(strings.NewReader(`{"na`), errReader{}))
	if !errors.Is(err, errRead) {
		t.Errorf("read error: %v", err)
	}
}

var errRead = errors.New("boom")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errRead }

// TestPlanErrorFormat pins the error text's layout.
func TestPlanErrorFormat(t *testing.T) {
	_, err := Parse([]byte(onePlan(chunks1, `{"name":"copy","src_buff":[{"type":"i","index":3,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}`)))
	var pe *PlanError
	if !errors.As(err, &pe) || pe.Rank != 0 || pe.Lane != 0 || pe.Op != 0 || pe.Inner != -1 ||
		pe.Path != "gpus[0].threadblocks[0].ops[0].src_buff[0]" {
		t.Fatalf("%#v", err)
	}
	want := "plan: rank 0 lane 0 op 0 (gpus[0].threadblocks[0].ops[0].src_buff[0]): out of range: chunks 3..4 of rank 0's i buffer, which has input_chunks 1"
	if err.Error() != want {
		t.Errorf("%q\nwant %q", err.Error(), want)
	}
	_, err = Parse([]byte(onePlan(chunks1, `{"name":"pipeline","iter_context":{"unit_size":16,"num_chunks":1},"ops":[{"name":"nop"},{"name":"bad"}]}`)))
	if !errors.As(err, &pe) || pe.Op != 0 || pe.Inner != 1 || !strings.Contains(err.Error(), "op 0.1 (gpus[0].threadblocks[0].ops[0].ops[1].name)") {
		t.Errorf("inner op error: %v", err)
	}
}
