package core

// FuzzMultiReceivePath drives the real multi-buffer receive path. A client engine plays
// a hostile peer that writes any sequence of tag messages on a server endpoint's
// multi-buffer tags: well-formed, corrupted, truncated and oversized headers, host
// frames inline in the header's tag message or gathered into one tag message after it
// (both are legal for a message of one header that fits, multiheader.go has the wire),
// frame messages shorter or longer than announced, frame messages never sent, extra
// ones, zero-frame messages, messages of several headers, eager and rendezvous sizes,
// plain messages beside them. The server posts and cancels RecvMulti receives, on two
// streams of the endpoint, under small limits. modelStream parses what was sent the
// way the receiver must: message after message, dropping what a rejected message
// leaves, stopping where the peer broke the stream.
// Per input:
//   - every receive completes exactly once: those the model says must, within 5 s; a
//     cancelled one within 1 s of its Cancel; the rest when cancelled at the end, or
//     when the endpoint closes with them pending (fzCloseFirst);
//   - each stream's completions, in posting order, are the model's outcomes in order:
//     an OK one carries exactly the frames the peer sent as that message, a failure
//     the status the model says (IOError, ExceedsLimit, MessageTruncated, then the
//     poison of a broken stream); only a failure may go unreported, at most one per
//     cancelled receive; Canceled only for those, and no failure carries a block;
//   - an honest message on a fresh tag of the same endpoint arrives whole;
//   - the input leaves the pair as idle as it found it (nothing in flight on either
//     side, no room or message held, no stream kept but a poisoned one), or else, once
//     the pair is closed, both engines are idle: no endpoint, nothing in flight, no
//     stream, no message waiting for room, all room given back.
//
// Connecting a pair costs about 20 ms of CPU, most of an input's time. So the engines
// (one client, two servers with different limits) are made once per process, an input
// reuses the pair the last one left idle, and each input has fresh tags (a counter in
// the tags' low bits): inputs never see each other's messages.
//
// Two bugs it found (a Cancel lost while its header was being reported, streams kept
// after their last receive) are checked last, once every other check has passed;
// seeds reproduce both.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The fuzz input: byte 0 is the configuration (fzTight: the server with small limits;
// fzGraceful: close the server's endpoint gracefully rather than abort it;
// fzCloseFirst, fzPeerAborts: how the input ends). Then up to fzMaxSteps steps, each
// an op byte (op = b&0x7f % fzOps; fzStream1 set: on the endpoint's second stream) and
// the parameter bytes the op reads; bytes past the end read as 0. A size is one byte:
// its top 3 bits pick a base of fzSizeBase, its low 5 bits are added to it (for the
// largest base, in steps of 16 KiB: fzSize). A message's frames (host frames, all of
// them) are one byte n: n&0x80 set, 16+2*(n&0x7f) frames of one small size (one byte s
// follows: the size is s&0x7f, s&0x80 is the form bit); else n&15 frames, a size byte
// each, and n&0x10 is the form bit. A message goes on the wire as a sender writes it
// (fzWire): its headers as EncodeHeaders encodes them, the host frames in the header's
// tag message where it set HeaderInline, unless the form bit says to send them gathered
// (HeaderInline cleared), as they are otherwise for a message of one header; the frames
// of a message of several headers one tag message each. The ops keep a list of the
// frame messages announced and not sent yet (the gathered frames of a message of one
// header as one entry, their summed size), per stream, for fzFrames, fzBadFrame and
// fzSkipFrame to take from; what the receiver makes of it all is modelStream's
// business.
const (
	fzHeader     = iota // n, sizes...: the header(s) of a well-formed message, inline frames included
	fzFrames            // k: the next k announced frame messages (0: all), as announced
	fzBadFrame          // d: the next announced frame message (16 bytes if none), int8(d) bytes longer, never right
	fzSkipFrame         // the next announced frame message is never sent
	fzRaw               // s: a tag message of size s on the multi-buffer tag
	fzBadHeader         // n, sizes..., kind, p, v: a one-header message (n&0x1f: frames, form), its header's tag message corrupted (fzCorrupt)
	fzBigTotal          // v: the first header of a message of fzTotals[v] frames
	fzPlain             // s: a message of size s on the stream's plain (non-multi) tag
	fzRecv              // post a RecvMulti on the stream
	fzCancel            // j: cancel receive j (in posting order) and wait for its completion
	fzBarrier           // a plain exchange: everything sent before has arrived
	fzRecvCancel        // post a RecvMulti and Cancel it, both dispatched in one progress pass
	fzOps

	fzStream1 = 0x80 // in an op byte: the step is on the second stream
	fzGather  = 0x10 // in a frame count byte of up to 15 frames: the form bit

	fzTight      = 1 << 0 // in the configuration byte
	fzGraceful   = 1 << 1
	fzCloseFirst = 1 << 2 // close the pair with receives pending, rather than cancel them
	fzPeerAborts = 1 << 3 // with fzCloseFirst: the client aborts first

	fzMaxSteps  = 16
	fzMaxFrame  = 1 << 20 // no message is longer
	fzByteQuota = 2 << 20 // bytes sent per input; a send past it is left out
)

var (
	fzSizeBase = [8]int{0, 1, 16, 100, 1000, 4000, 16000, 60000}
	fzTotals   = []uint64{5, 9, 113, 200, 301, 4096, 4097, 1_500_000, 1 << 63}
)

// fzSize decodes a size byte: up to 567,904 bytes. Over loopback TCP, UCX sends a
// message of more than about 256 KiB by rendezvous, the rest eagerly.
func fzSize(s byte) int {
	if s>>5 == 7 {
		return fzSizeBase[7] + int(s&31)<<14
	}
	return fzSizeBase[s>>5] + int(s&31)
}

// The servers' configurations: roomy lets messages of up to 300 frames (several
// headers) and rendezvous frames through, and refuses messages over 768 KiB by
// admission; tight makes nearly every message break a limit.
var (
	fzRoomy = Options{Limits: Limits{MaxFrames: 300, MaxFrameBytes: 512 << 10, MaxMessageBytes: 1 << 20},
		MaxOutstandingBytes: 2 << 20, MaxEndpointOutstandingBytes: 768 << 10}
	fzTightOpts = Options{Limits: Limits{MaxFrames: 4, MaxFrameBytes: 4096, MaxMessageBytes: 8192},
		MaxOutstandingBytes: 32 << 10, MaxEndpointOutstandingBytes: 12 << 10}
)

// Plan: what an input asks for, decoded before anything is sent.

type fzStepKind uint8

const (
	fzDoSend fzStepKind = iota
	fzDoPlain
	fzDoRecv
	fzDoCancel
	fzDoBarrier
	fzDoRecvCancel
)

type fzStep struct {
	kind   fzStepKind
	stream int
	msg    []byte // fzDoSend, fzDoPlain
	recv   int    // fzDoCancel: the receive's index in posting order
}

type fzPlan struct {
	tight, graceful        bool
	closeFirst, peerAborts bool
	steps                  []fzStep
	sent                   [2][][]byte // per stream, the multi-buffer tag messages in order
	recvStream             []int       // per receive, its stream
}

func (p *fzPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tight=%t graceful=%t closeFirst=%t peerAborts=%t:", p.tight, p.graceful, p.closeFirst, p.peerAborts)
	for _, s := range p.steps {
		switch s.kind {
		case fzDoSend:
			fmt.Fprintf(&b, " send%d(%d)", s.stream, len(s.msg))
		case fzDoPlain:
			fmt.Fprintf(&b, " plain%d(%d)", s.stream, len(s.msg))
		case fzDoRecv:
			fmt.Fprintf(&b, " recv%d", s.stream)
		case fzDoCancel:
			fmt.Fprintf(&b, " cancel(r%d)", s.recv)
		case fzDoBarrier:
			b.WriteString(" barrier")
		case fzDoRecvCancel:
			fmt.Fprintf(&b, " recv%d+cancel", s.stream)
		}
	}
	return b.String()
}

// fzReader reads an input byte by byte, zeros past its end.
type fzReader struct{ b []byte }

func (r *fzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// fzFill returns n bytes particular to message idx of stream s.
func fzFill(n, s, idx int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(s)+1, uint64(idx)))
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// fzHeaders encodes the headers of a message of host frames, as EncodeHeaders does
// (HeaderInline set where InlineFits).
func fzHeaders(sizes []uint64) [][]byte {
	dst := make([]byte, HeaderCount(len(sizes))*MaxHeaderSize)
	lens := EncodeHeaders(dst, sizes, make([]uint8, len(sizes)), nil)
	hs := make([][]byte, len(lens))
	for i, n := range lens {
		hs[i] = dst[i*MaxHeaderSize : i*MaxHeaderSize+n : i*MaxHeaderSize+n]
	}
	return hs
}

// fzWire returns the tag messages a sender writes for the headers of a message of host
// frames of these sizes, and the sizes of the tag messages that carry its frames after
// them (multiheader.go has the wire). Where EncodeHeaders set HeaderInline, the small
// frames' bytes, body(their sum), follow the header in its tag message, unless gather
// is set: then the flag is cleared and the small frames gathered into one tag message
// after the header, as they are for any other message of one header; the other frames
// follow, a tag message each. Every frame of a message of several headers is a tag
// message of its own.
func fzWire(sizes []uint64, gather bool, body func(n int) []byte) (headers [][]byte, frames []uint64) {
	hs := fzHeaders(sizes)
	if len(hs) > 1 {
		return hs, slices.Clone(sizes)
	}
	var small uint64
	var hasSmall bool
	var alone []uint64
	for _, s := range sizes {
		if gathers(s, MemHost) {
			small, hasSmall = small+s, true
		} else {
			alone = append(alone, s)
		}
	}
	switch {
	case hs[0][5]&HeaderInline != 0 && !gather:
		hs[0] = append(hs[0], body(int(small))...)
	case hasSmall:
		hs[0][5] &^= HeaderInline
		frames = []uint64{small}
	}
	return hs, append(frames, alone...)
}

// fzDecode turns an input into a plan.
func fzDecode(in []byte) *fzPlan {
	r := &fzReader{b: in}
	cfg := r.byte()
	p := &fzPlan{tight: cfg&fzTight != 0, graceful: cfg&fzGraceful != 0,
		closeFirst: cfg&fzCloseFirst != 0, peerAborts: cfg&(fzCloseFirst|fzPeerAborts) == fzCloseFirst|fzPeerAborts}
	var pending [2][]uint64 // sizes of the frame messages announced and not sent yet, per stream
	quota := fzByteQuota
	send := func(s int, msg []byte) {
		if len(msg) > quota {
			return
		}
		quota -= len(msg)
		p.sent[s] = append(p.sent[s], msg)
		p.steps = append(p.steps, fzStep{kind: fzDoSend, stream: s, msg: msg})
	}
	fill := func(s, n int) []byte { return fzFill(n, s, len(p.sent[s])+1000*len(p.steps)) }
	pop := func(s int) (uint64, bool) {
		if len(pending[s]) == 0 {
			return 0, false
		}
		v := pending[s][0]
		pending[s] = pending[s][1:]
		return v, true
	}
	// message reads the rest of a message's frames, after their first byte n (see
	// above), returns its headers' tag messages (inline frames included) and queues the
	// sizes of its frame messages in pending[s].
	message := func(s int, n byte) [][]byte {
		var ss []uint64
		var gather bool
		if n&0x80 != 0 { // many small frames (past FramesPerHeader: several headers)
			b := r.byte()
			ss, gather = full(16+int(n&0x7f)*2, uint64(fzSize(b&0x7f))), b&0x80 != 0
		} else {
			ss, gather = make([]uint64, n&0x0f), n&fzGather != 0
			for i := range ss {
				ss[i] = uint64(fzSize(r.byte()))
			}
		}
		hs, frames := fzWire(ss, gather, func(n int) []byte { return fill(s, n) })
		pending[s] = append(pending[s], frames...)
		return hs
	}
	for step := 0; step < fzMaxSteps && len(r.b) > 0; step++ {
		b := r.byte()
		s := 0
		if b&fzStream1 != 0 {
			s = 1
		}
		switch int(b&0x7f) % fzOps {
		case fzHeader:
			for _, h := range message(s, r.byte()) {
				send(s, h)
			}
		case fzFrames:
			k := int(r.byte() & 0x0f)
			if k == 0 || k > len(pending[s]) {
				k = len(pending[s])
			}
			for range k {
				size, _ := pop(s)
				send(s, fill(s, int(size)))
			}
		case fzBadFrame:
			d := int(int8(r.byte()))
			size, ok := pop(s)
			if !ok {
				size = 16
			}
			n := min(max(int(size)+d, 0), fzMaxFrame)
			if n == int(size) {
				n++
			}
			send(s, fill(s, n))
		case fzSkipFrame:
			pop(s)
		case fzRaw:
			send(s, fill(s, fzSize(r.byte())))
		case fzBadHeader:
			h := message(s, r.byte()&0x1f)[0]
			kind, at, v := r.byte(), int(r.byte()), r.byte()
			send(s, fzCorrupt(h, kind, at, v, fill(s, at+1+InlineLimit)))
		case fzBigTotal:
			total := fzTotals[int(r.byte())%len(fzTotals)]
			if total <= FramesPerHeader { // its host frames gathered
				send(s, okHeader(0, total, full(int(total), 1)))
				pending[s] = append(pending[s], total)
			} else {
				send(s, okHeader(HeaderMore, total, full(FramesPerHeader, 1)))
				pending[s] = append(pending[s], full(FramesPerHeader, 1)...)
			}
		case fzPlain:
			msg := fill(s, fzSize(r.byte()))
			if len(msg) <= quota {
				quota -= len(msg)
				p.steps = append(p.steps, fzStep{kind: fzDoPlain, stream: s, msg: msg})
			}
		case fzRecv:
			p.recvStream = append(p.recvStream, s)
			p.steps = append(p.steps, fzStep{kind: fzDoRecv, stream: s})
		case fzCancel:
			j := int(r.byte())
			if len(p.recvStream) > 0 {
				p.steps = append(p.steps, fzStep{kind: fzDoCancel, recv: j % len(p.recvStream)})
			}
		case fzBarrier:
			p.steps = append(p.steps, fzStep{kind: fzDoBarrier})
		case fzRecvCancel:
			p.recvStream = append(p.recvStream, s)
			p.steps = append(p.steps, fzStep{kind: fzDoRecvCancel, stream: s})
		}
	}
	return p
}

// fzCorrupt makes h, a header's tag message (its inline frames included), wrong in
// one of six ways; extra supplies appended bytes (InlineLimit+64 are enough).
func fzCorrupt(h []byte, kind byte, at int, v byte, extra []byte) []byte {
	switch kind % 6 {
	case 0: // one byte flipped
		h[at%len(h)] ^= v | 1
	case 1: // truncated to at%len(h) bytes; with v's top bit, its last at%len(h)+1 cut off
		if v&0x80 != 0 {
			h = h[:len(h)-1-at%len(h)]
		} else {
			h = h[:at%len(h)]
		}
	case 2: // longer than its count says; with v's top bit, InlineLimit+at%64 bytes in
		// all (at%64 == 0: as long as the receive posted for a header), past it else
		n := at%64 + 1
		if v&0x80 != 0 {
			n = max(InlineLimit+n-1-len(h), 1)
		}
		h = append(h, extra[:n]...)
	case 3: // another total
		binary.LittleEndian.PutUint64(h[8:], fzTotals[int(v)%len(fzTotals)])
	case 4: // other flags (HeaderInline set or cleared among them)
		h[5] = v
	case 5: // another count
		binary.LittleEndian.PutUint16(h[6:], uint16(v)|uint16(at)<<8)
	}
	return h
}

// Model: what the receiver must make of one stream.

// fzOutcome is one message of a stream as the receiver must end it: OK with these
// frames, or failed with st. foot is the room it took to receive its frames (0: it
// was refused before).
type fzOutcome struct {
	st     ucxx.Status
	frames [][]byte
	foot   uint64
}

// fzModel is what a stream's receives must get, in order: outs, then, when poison is
// set, poison for every receive after them.
type fzModel struct {
	outs   []fzOutcome
	poison ucxx.Status
	held   uint64 // room an admitted message whose frames did not all come may hold
	// partial: MessageTruncated when that message already had a frame of the wrong
	// length, which a receive of it still pending when the endpoint closes may end with.
	partial  ucxx.Status
	usesCUDA bool
}

// modelStream parses msgs, the tag messages of one stream in order, as a receiver with
// these limits and bounds on room must. Each message is its headers, then the tag
// messages of its frames (multiheader.go has the wire): for a message of one header,
// its host frames inline in the header's tag message (HeaderInline) or else gathered
// into one tag message after it; each frame a tag message of its own for a message of
// several headers (MessageDecoder.FrameMessages counts them). A message whose headers
// break the format or a limit fails, and the rest of it is dropped (as many tag
// messages as the decoder says are still to come) when the decoder says the stream can
// recover so, or the stream is poisoned; a tag message longer than InlineLimit where a
// header is due poisons it with IOError; a message that can never fit the room fails
// with ExceedsLimit, its frame messages dropped; a frame message of another length than
// announced (for gathered frames, than their sum) fails its message with
// MessageTruncated.
func modelStream(msgs [][]byte, lim Limits, maxWorker, maxEP int64) fzModel {
	var m fzModel
	var dec MessageDecoder
	i := 0
	var drop uint64
	for {
		for ; drop > 0 && i < len(msgs); drop-- {
			i++
		}
		if drop > 0 || i == len(msgs) {
			return m
		}
		dec.Reset()
		dec.Limits = lim
		done := false
		for !done {
			if i == len(msgs) {
				return m
			}
			h := msgs[i]
			i++
			if len(h) > InlineLimit {
				m.poison = ucxx.StatusIOError
				return m
			}
			var err error
			if done, err = dec.Feed(h); err != nil {
				st := ucxx.StatusIOError
				if errors.Is(err, ErrLimit) {
					st = ucxx.StatusExceedsLimit
				}
				n, ok := dec.Discardable()
				if !ok {
					m.poison = st
					return m
				}
				drop = n
				m.outs = append(m.outs, fzOutcome{st: st})
				break
			}
		}
		if !done {
			continue
		}
		sizes, types := dec.Sizes, dec.Types
		foot := footprint(sizes)
		if int64(foot) < 0 || int64(foot) > maxWorker || int64(foot) > maxEP {
			m.outs = append(m.outs, fzOutcome{st: ucxx.StatusExceedsLimit})
			drop = dec.FrameMessages()
			continue
		}
		if slices.ContainsFunc(types, func(t uint8) bool { return t != MemHost }) { // no CUDA here (the fuzz target skips otherwise)
			m.usesCUDA = true
			m.outs = append(m.outs, fzOutcome{st: ucxx.StatusNoMemory, foot: foot})
			drop = dec.FrameMessages()
			continue
		}
		// Every frame is a host frame from here on. The small ones come inline or
		// gathered (a message of one header), then each other frame alone.
		out := fzOutcome{st: ucxx.StatusOK, foot: foot, frames: make([][]byte, len(sizes))}
		var small, alone []int // frame indices
		var smallBytes uint64
		for j, size := range sizes {
			if HeaderCount(len(sizes)) == 1 && gathers(size, MemHost) {
				small, smallBytes = append(small, j), smallBytes+size
			} else {
				alone = append(alone, j)
			}
		}
		split := func(b []byte) { // b holds the small frames, in order
			for _, j := range small {
				out.frames[j], b = b[:sizes[j]:sizes[j]], b[sizes[j]:]
			}
		}
		switch at, inline := dec.Inline(); {
		case inline:
			split(msgs[i-1][at:]) // Feed checked their length
		case dec.Gathered():
			if i == len(msgs) {
				m.held = foot
				return m
			}
			if uint64(len(msgs[i])) == smallBytes {
				split(msgs[i])
			} else {
				out.st = ucxx.StatusMessageTruncated
			}
			i++
		}
		for _, j := range alone {
			if i == len(msgs) {
				m.held, m.partial = foot, out.st
				return m
			}
			if uint64(len(msgs[i])) != sizes[j] {
				out.st = ucxx.StatusMessageTruncated
			}
			out.frames[j] = msgs[i]
			i++
		}
		if out.st != ucxx.StatusOK {
			out.frames = nil
		}
		m.outs = append(m.outs, out)
	}
}

// FuzzMultiReceivePath: see the top of the file.
func FuzzMultiReceivePath(f *testing.F) {
	for _, s := range fzSeeds {
		f.Add(s)
	}
	fe := &fzEngines{client: newTestEngine(f, Options{})}
	for i, o := range []Options{fzRoomy, fzTightOpts} {
		fe.servers[i] = newTestEngine(f, o)
		lh, port, err := fe.servers[i].Listen("127.0.0.1", 0)
		if err != nil {
			f.Fatalf("Listen: %v", err)
		}
		fe.lh[i], fe.port[i] = lh, port
	}
	_, err := ucxx.CUDA()
	fe.cudaOK = err == nil
	f.Fuzz(func(t *testing.T, in []byte) { fzOne(t, fe, in) })
}

// fzOne runs one input.
func fzOne(t *testing.T, fe *fzEngines, in []byte) {
	plan := fzDecode(in)
	idx := 0
	if plan.tight {
		idx = 1
	}
	server := fe.servers[idx]
	opts := server.opts
	var models [2]fzModel
	for s := range models {
		models[s] = modelStream(plan.sent[s], opts.Limits, opts.MaxOutstandingBytes, opts.MaxEndpointOutstandingBytes)
		if models[s].usesCUDA && fe.cudaOK {
			t.Skip("a header announces CUDA frames; the model assumes no CUDA")
		}
	}
	r := &fzRun{t: t, plan: plan, fe: fe, client: fe.client, server: server,
		cb: newFzInbox(t, fe.client), sb: newFzInbox(t, server), barrierBuf: make([]byte, 64)}
	r.connect(idx)
	t.Cleanup(r.abandon)
	r.play()
	r.awaitExpected(models)
	r.barrier()
	r.honest()
	kept := 0
	if !plan.closeFirst {
		r.cancelRest()
	}
	switch {
	case plan.closeFirst:
		r.closeWithPending()
		r.checkOutcomes(models)
	case r.anyStuck():
		r.close()
		r.checkOutcomes(models)
	default:
		r.checkOutcomes(models)
		r.drain()
		if kept = r.leftovers(); r.fe.pair != r.pair {
			r.close()
		}
	}
	runtime.KeepAlive(plan)
	// Known bugs, checked last so that every other check has run.
	if r.lostCancel != "" {
		t.Fatal("a Cancel dispatched while the receive's header receive has matched its message but " +
			"not reported it yet is lost (cancelMulti cancels a UCX request that can no longer be cancelled, " +
			"onMultiHeader ignores that the receive was cancelled, and a second Cancel is ignored): " +
			"the receive waits for its frames, or the endpoint's close. " + r.lostCancel)
	}
	if kept > 0 {
		t.Fatal("a multi-buffer stream whose last receive completed is kept until its endpoint closes " +
			"(finishMulti never forgets it): one entry in multiRecv per tag ever received on")
	}
}

func fzModelString(models [2]fzModel) string {
	var b strings.Builder
	for s, m := range models {
		fmt.Fprintf(&b, "[stream %d:", s)
		for _, o := range m.outs {
			if o.st == ucxx.StatusOK {
				fmt.Fprintf(&b, " OK(%d frames)", len(o.frames))
			} else {
				fmt.Fprintf(&b, " %v", o.st)
			}
		}
		if m.poison != ucxx.StatusOK {
			fmt.Fprintf(&b, " then %v for ever", m.poison)
		}
		if m.held > 0 {
			fmt.Fprintf(&b, ", holds %d", m.held)
		}
		if m.partial != ucxx.StatusOK {
			fmt.Fprintf(&b, ", then %v if closed", m.partial)
		}
		b.WriteString("]")
	}
	return b.String()
}

// Seeds. sz returns the size byte of n bytes for n < 32, else of the size at or below
// n that is closest.
func sz(n int) byte {
	for c := len(fzSizeBase) - 1; c >= 0; c-- {
		switch {
		case n < fzSizeBase[c]:
		case c == 7:
			return byte(c<<5) | byte(min((n-fzSizeBase[c])>>14, 31))
		default:
			return byte(c<<5) | byte(min(n-fzSizeBase[c], 31))
		}
	}
	return 0
}

var fzSeeds = [][]byte{
	// An honest message of three frames, inline in its header's tag message, receive
	// posted first.
	{0, fzRecv, fzHeader, 3, sz(5), sz(0), sz(100), fzFrames, 0},
	// The same message gathered (its frames one tag message after the header, HeaderInline
	// cleared), sent before the receive, then a zero-frame message.
	{0, fzHeader, fzGather | 3, sz(5), sz(0), sz(100), fzFrames, 0, fzRecv, fzHeader, 0, fzRecv},
	// A rendezvous frame (gathered with a small one: too big to go inline) and a
	// multi-header message of 150 small frames.
	{0, fzRecv, fzRecv, fzHeader, 2, sz(300 << 10), sz(1), fzFrames, 0, fzHeader, 0x80 | 67, sz(7), fzFrames, 0},
	// A message of one header exactly InlineLimit bytes long, its frames inline; then one
	// a byte longer, whose frames go gathered.
	{0, fzRecv, fzRecv, fzHeader, 4, sz(4031), sz(4031), sz(47), sz(31),
		fzHeader, 4, sz(4031), sz(4031), sz(47), sz(32), fzFrames, 0},
	// 56 small frames gathered though they would fit inline (form bit in the size byte),
	// and a full header of 112 frames too big to go inline.
	{0, fzRecv, fzRecv, fzHeader, 0x80 | 20, 0x80 | sz(9), fzFrames, 0, fzHeader, 0x80 | 48, sz(100), fzFrames, 0},
	// Gathered frames one byte short of their sum, then an honest message:
	// MessageTruncated, then OK.
	{0, fzRecv, fzRecv, fzHeader, fzGather | 2, sz(1000), sz(7), fzBadFrame, 0xff, fzHeader, 1, sz(3), fzFrames, 0},
	// A frame message longer than announced.
	{0, fzRecv, fzHeader, fzGather | 1, sz(16), fzBadFrame, 5, fzRecv, fzHeader, 0},
	// Gathered frames never sent: the receive waits, and is cancelled at the end.
	{0, fzRecv, fzHeader, fzGather | 2, sz(3), sz(4), fzSkipFrame},
	// One frame of a message of several headers comes, the others never do.
	{0, fzRecv, fzHeader, 0x80 | 49, sz(3), fzFrames, 1},
	// A header with too many frames for the tight server: ExceedsLimit, its gathered
	// frames dropped; the next message comes whole.
	{fzTight, fzRecv, fzRecv, fzHeader, fzGather | 6, 1, 1, 1, 1, 1, 1, fzFrames, 0, fzHeader, 1, sz(2), fzFrames, 0},
	// The same with the frames inline: nothing to drop.
	{fzTight, fzRecv, fzRecv, fzHeader, 6, 1, 1, 1, 1, 1, 1, fzHeader, 1, sz(2)},
	// A first header announcing 1.5 million frames: the stream is poisoned.
	{0, fzRecv, fzBigTotal, 7, fzRecv, fzHeader, 1, sz(1), fzFrames, 0},
	// Cancel after the header came (barrier first), the frames after; the next receive
	// gets the message.
	{0, fzRecv, fzHeader, fzGather | 1, sz(5), fzBarrier, fzCancel, 0, fzRecv, fzFrames, 0},
	// A header truncated to 10 bytes: IOError, the stream poisoned.
	{fzGraceful, fzRecv, fzBadHeader, 1, sz(4), 1, 10, 0, fzRecv},
	// A header's tag message one inline byte short: IOError, the stream poisoned.
	{0, fzRecv, fzBadHeader, 1, sz(4), 1, 0, 0x80, fzRecv},
	// A header's tag message longer than InlineLimit.
	{0, fzRecv, fzBadHeader, 1, sz(4), 2, 3, 0x80, fzRecv},
	// One exactly InlineLimit bytes long, too many inline bytes.
	{0, fzRecv, fzBadHeader, 1, sz(4), 2, 0, 0x80, fzRecv},
	// HeaderInline set on gathered frames of no bytes: legal, nothing follows; the
	// gathered message announced is not sent.
	{0, fzRecv, fzBadHeader, fzGather | 2, sz(0), sz(0), 4, 0, HeaderInline, fzRecv, fzHeader, 1, sz(3)},
	// Plain messages on the stream's plain tag do not disturb it; the second stream
	// fails while the first goes on.
	{0, fzPlain, sz(10), fzRecv, fzRecv | fzStream1, fzRaw | fzStream1, sz(0), fzHeader, 1, sz(8), fzFrames, 0},
	// Room: an admitted message of the tight server whose gathered frames never come
	// holds most of the endpoint's room; the second stream's message (frames inline)
	// waits for it.
	{fzTight, fzRecv, fzRecv | fzStream1, fzHeader, fzGather | 2, sz(4000), sz(4000),
		fzHeader | fzStream1, 2, sz(4000), sz(3000)},
	// Cancel a queued receive and one waiting for its header.
	{0, fzRecv, fzRecv, fzCancel, 1, fzCancel, 0, fzRecv, fzHeader, 1, sz(9), fzFrames, 0},
	// BUG (found by the fuzzer, minimized): the header has arrived when a receive is
	// posted and cancelled in the same progress pass; the Cancel is lost and the receive
	// waits for a frame that never comes.
	{0, fzHeader, fzGather | 1, sz(5), fzBarrier, fzRecvCancel},
	// The server closes the endpoint with a receive waiting for its frames (too big to
	// go inline, never sent) and one queued behind it.
	{fzCloseFirst, fzRecv, fzRecv, fzHeader, 2, sz(5), sz(16000)},
	// The same, gracefully, on the tight server with a message waiting for room.
	{fzTight | fzCloseFirst | fzGraceful, fzRecv, fzRecv | fzStream1, fzHeader, fzGather | 2, sz(4000), sz(4000),
		fzHeader | fzStream1, 2, sz(4000), sz(3000)},
	// Found by the fuzzer (a gap in the model, not a bug): a receive whose message (of
	// several headers) had a frame of the wrong length and waits for the rest ends with
	// MessageTruncated when the endpoint closes. (The next header, 25 bytes, comes as
	// its first frame, of 1 byte.)
	{fzCloseFirst, fzRecv, fzRecv, fzHeader, 0x80 | 49, sz(1), fzHeader, fzGather | 1},
	// A rendezvous frame over the tight server's limit is dropped; the next message
	// comes whole.
	{fzTight, fzRecv, fzRecv, fzHeader, 1, sz(300 << 10), fzFrames, 0, fzHeader, 1, sz(3), fzFrames, 0},
	// The peer aborts with a receive waiting for its frames and a drop in flight.
	{fzCloseFirst | fzPeerAborts, fzRecv, fzHeader, fzGather | 1, sz(100), fzRecv | fzStream1, fzBigTotal | fzStream1, 5, fzRecv},
}
