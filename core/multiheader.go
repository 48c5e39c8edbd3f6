package core

// Multi-buffer message headers.
//
// A multi-buffer message is one or more headers followed by its frames, all tag messages
// on the endpoint's multi-buffer tag, in order. The receiver posts an InlineLimit
// (8 KiB) receive for each header, decodes it with a MessageDecoder, and once the last
// header is in posts the receives of the frames. Host frames smaller than
// GatherMaxFrame travel together; the others travel alone. The tag messages of one
// multi-buffer message, in order:
//
//   - a message of one header: the header's tag message, carrying after the header the
//     small host frames when they fit (InlineFits: HeaderInline is set); else, when it
//     has small host frames, they follow gathered into one tag message; then each
//     other frame (large host frames, CUDA frames) as a tag message of its own, in
//     frame order;
//   - a message of several headers (more than FramesPerHeader frames): the headers,
//     then each frame as a tag message of its own.
//
// MessageDecoder.FrameMessages counts the tag messages after the headers.
//
// Wire format of one header, all integers little-endian:
//
//	offset 0:  magic   u32         0x4d475855, the bytes "UXGM"
//	offset 4:  version u8          2
//	offset 5:  flags   u8          bit 0 (HeaderMore): another header follows;
//	                               bit 1 (HeaderInline): the small host frames follow
//	                               this header in its tag message; the other bits must be 0
//	offset 6:  count   u16         frames described by this header, 0..FramesPerHeader
//	offset 8:  total   u64         frames in the whole message, the same in every header
//	offset 16: sizes   [count]u64  each frame's size in bytes
//	then:      types   [count]u8   each frame's memory type: MemHost or MemCUDA
//	then:      with HeaderInline, the small host frames' bytes, in frame order
//
// A header is exactly HeaderFixedSize + 9*count bytes long, and its tag message that or,
// with HeaderInline, that plus the sum of its small host frames' sizes. A message of N frames
// has HeaderCount(N) = max(1, ceil(N/FramesPerHeader)) headers: every header but the
// last has HeaderMore set and describes exactly FramesPerHeader frames, the last
// describes the rest (1..FramesPerHeader frames). A message of no frames is a single
// header with count 0, total 0 and no HeaderMore. A sender sets HeaderInline where
// InlineFits says so (EncodeHeaders does); a receiver accepts it on any message of one
// header whose inline bytes are its small host frames. Nothing else is accepted: a decoded
// message re-encodes to the bytes received, but for that flag.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Frame memory types, as carried in a header's types array.
const (
	MemHost uint8 = 0 // host (CPU) memory
	MemCUDA uint8 = 1 // CUDA device memory
)

// Header layout constants.
const (
	// FramesPerHeader is the most frames one header describes.
	FramesPerHeader = 112
	// HeaderFixedSize is the length of the magic, version, flags, count and total.
	HeaderFixedSize = 16
	// MaxHeaderSize is the length of a full header, and of the receive a receiver posts
	// for each header: 16 + 9*112 = 1024 bytes.
	MaxHeaderSize = HeaderFixedSize + 9*FramesPerHeader

	// InlineLimit is the length of the receive a receiver posts for each header: the
	// longest tag message a header may come in, its inline frames included.
	InlineLimit = 8192

	// HeaderMore is the flags bit saying that another header follows this one.
	HeaderMore uint8 = 1 << 0
	// HeaderInline is the flags bit saying that the message's small host frames follow
	// the header in its tag message.
	HeaderInline uint8 = 1 << 1

	// GatherMaxFrame: host frames smaller than this travel together, inline or gathered
	// (small host frames); larger ones, sent by UCX's rendezvous on most transports,
	// travel one tag message each.
	GatherMaxFrame = 16 << 10

	headerMagic   uint32 = 0x4d475855 // "UXGM" in little-endian byte order
	headerVersion        = 2
)

// Limits bound what a peer may announce in a message's headers. Zero fields mean the
// defaults.
type Limits struct {
	MaxFrames       uint64 // frames per message; default 100000
	MaxFrameBytes   uint64 // bytes per frame; default 1<<36 (64 GiB)
	MaxMessageBytes uint64 // bytes per message (all frames together); default 1<<37
}

// Default limits.
const (
	defaultMaxFrames       = 100000
	defaultMaxFrameBytes   = 1 << 36
	defaultMaxMessageBytes = 1 << 37
)

// withDefaults returns l with its zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxFrames == 0 {
		l.MaxFrames = defaultMaxFrames
	}
	if l.MaxFrameBytes == 0 {
		l.MaxFrameBytes = defaultMaxFrameBytes
	}
	if l.MaxMessageBytes == 0 {
		l.MaxMessageBytes = defaultMaxMessageBytes
	}
	return l
}

var (
	// ErrBadHeader is wrapped by every decoding error: the bytes are not a header of
	// this format, or contradict the headers before them. The error's text says what
	// was wrong.
	ErrBadHeader = errors.New("core: malformed multi-buffer header")
	// ErrLimit is wrapped by every limit violation: a well-formed header announced more
	// frames or bytes than the decoder's Limits allow. The error's text names the limit
	// and the values.
	ErrLimit = errors.New("core: multi-buffer message exceeds a limit")
)

// badHeader returns an error wrapping ErrBadHeader about header number idx.
func badHeader(idx int, format string, args ...any) error {
	return fmt.Errorf("%w: header %d: %s", ErrBadHeader, idx, fmt.Sprintf(format, args...))
}

// overLimit returns an error wrapping ErrLimit about header number idx.
func overLimit(idx int, format string, args ...any) error {
	return fmt.Errorf("%w: header %d: %s", ErrLimit, idx, fmt.Sprintf(format, args...))
}

// HeaderCount returns how many headers a message of n frames needs: 1 for n == 0,
// otherwise ceil(n/FramesPerHeader). It panics if n is negative.
func HeaderCount(n int) int {
	if n < 0 {
		panic(fmt.Sprintf("core: HeaderCount(%d): negative frame count", n))
	}
	if n == 0 {
		return 1
	}
	return (n + FramesPerHeader - 1) / FramesPerHeader
}

// gathers says whether a frame of this size and memory type is a small host frame: it
// travels with the message's other small host frames.
func gathers(size uint64, memType uint8) bool { return memType == MemHost && size < GatherMaxFrame }

// InlineFits says whether the small host frames of a message of these frames ride in
// its header's tag message: it has one header and at least one small host frame, and
// the header and the small host frames fit in InlineLimit bytes.
func InlineFits(sizes []uint64, types []uint8) bool {
	if len(sizes) > FramesPerHeader {
		return false
	}
	room := uint64(InlineLimit - HeaderFixedSize - 9*len(sizes))
	small := false
	for i, s := range sizes {
		if !gathers(s, types[i]) {
			continue
		}
		if s > room {
			return false
		}
		room -= s
		small = true
	}
	return small
}

// EncodeHeaders writes the headers of a message whose frames are (sizes[i], types[i])
// into dst, header i at dst[i*MaxHeaderSize:], and appends each header's length to
// lens, which it returns. It sets HeaderInline where InlineFits: the caller then sends
// the small host frames in the header's tag message, after its lens[0] bytes. dst must hold HeaderCount(len(sizes))*MaxHeaderSize bytes.
// Given the same dst and lens[:0] each time, it does not allocate.
//
// It panics if len(sizes) != len(types), if dst is too small, or if a type is neither
// MemHost nor MemCUDA: the caller, our own code, got it wrong.
func EncodeHeaders(dst []byte, sizes []uint64, types []uint8, lens []int) []int {
	n := len(sizes)
	if len(types) != n {
		panic(fmt.Sprintf("core: EncodeHeaders: %d sizes but %d types", n, len(types)))
	}
	hc := HeaderCount(n)
	if len(dst) < hc*MaxHeaderSize {
		panic(fmt.Sprintf("core: EncodeHeaders: dst has %d bytes, %d frames need %d",
			len(dst), n, hc*MaxHeaderSize))
	}
	le := binary.LittleEndian
	for i := range hc {
		lo := i * FramesPerHeader
		hi := min(lo+FramesPerHeader, n)
		count := hi - lo
		start := i * MaxHeaderSize
		h := dst[start : start+HeaderFixedSize+9*count]

		var flags uint8
		if i < hc-1 {
			flags = HeaderMore
		} else if hc == 1 && InlineFits(sizes, types) {
			flags = HeaderInline
		}
		le.PutUint32(h[0:], headerMagic)
		h[4] = headerVersion
		h[5] = flags
		le.PutUint16(h[6:], uint16(count))
		le.PutUint64(h[8:], uint64(n))
		sz := h[HeaderFixedSize : HeaderFixedSize+8*count]
		for j, s := range sizes[lo:hi] {
			le.PutUint64(sz[8*j:], s)
		}
		tp := h[HeaderFixedSize+8*count:]
		for j, t := range types[lo:hi] {
			if t > MemCUDA {
				panic(fmt.Sprintf("core: EncodeHeaders: frame %d has memory type %d", lo+j, t))
			}
			tp[j] = t
		}
		lens = append(lens, len(h))
	}
	return lens
}

// minDiscardFrames keeps a small Limits.MaxFrames from breaking a stream for a modest
// excess: a message of up to this many frames is dropped rather than the stream broken.
const minDiscardFrames = 4096

// decoderState is where a MessageDecoder is in its message.
type decoderState uint8

const (
	decIdle   decoderState = iota // no header fed since the last Reset
	decMore                       // some headers fed, more to come
	decDone                       // the last header was fed
	decFailed                     // Feed returned an error
)

// MessageDecoder accumulates the headers of one incoming message. The zero value, with
// Limits set if the defaults do not suit, is ready to use; Reset makes it ready for the
// next message, keeping Sizes' and Types' storage. A MessageDecoder is for one goroutine
// (the progress thread).
type MessageDecoder struct {
	// Limits bound the message; zero fields mean the defaults. They are read when the
	// first header of a message is fed.
	Limits Limits

	// Sizes and Types describe the frames of all headers fed so far: once Feed returns
	// done, every frame of the message, in order.
	Sizes []uint64
	Types []uint8

	lim     Limits // Limits.withDefaults(), fixed at the first header
	state   decoderState
	headers int    // headers accepted
	total   uint64 // the first header's announced total
	bytes   uint64 // sum of Sizes, at most lim.MaxMessageBytes

	// inlineAt: where the inline frames start in the last header's tag message, 0 for
	// none; wireLeft: the tag messages of the message still to come after the last
	// header fed, known once that header's structure was checked.
	inlineAt int
	wireLeft uint64
	// Set by an ErrLimit error the stream can recover from by dropping the wireLeft
	// tag messages still to come (see Discardable).
	discardOK bool
}

// Reset readies d for a new message, keeping Limits and the storage of Sizes and Types.
func (d *MessageDecoder) Reset() {
	d.Sizes = d.Sizes[:0]
	d.Types = d.Types[:0]
	d.lim = Limits{}
	d.state = decIdle
	d.headers = 0
	d.total = 0
	d.bytes = 0
	d.inlineAt = 0
	d.wireLeft = 0
	d.discardOK = false
}

// Feed decodes one received header, header being exactly the bytes of its tag message
// (with HeaderInline, the inline frames after the header: see Inline). It returns
// done=true when that header was the message's last; Sizes and Types then describe all
// of its frames. Sizes and Types grow by at most FramesPerHeader per header, and only
// after the header has been checked in full, the announced total against
// Limits.MaxFrames included.
//
// Errors (the message must be failed, and d Reset before it is used again):
//   - wrapping ErrBadHeader: the header is truncated or of the wrong length, has a bad
//     magic, version, flags, count or memory type, announces a total different from the
//     first header's, describes frames past the total, ends the message short of the
//     total, sets HeaderMore on a header that is not full or that reaches the total,
//     sets HeaderInline on a message of several headers, or carries inline bytes other
//     than its host frames' sizes add up to;
//   - wrapping ErrLimit: a well-formed header announces more than Limits.MaxFrames
//     frames, a frame of more than Limits.MaxFrameBytes, or frames whose sum passes
//     Limits.MaxMessageBytes. Discardable then says whether the frames can be drained.
//
// Feed panics if called after it returned done or an error, without a Reset between.
func (d *MessageDecoder) Feed(header []byte) (done bool, err error) {
	switch d.state {
	case decDone:
		panic("core: MessageDecoder.Feed after the message's last header, without Reset")
	case decFailed:
		panic("core: MessageDecoder.Feed after an error, without Reset")
	case decIdle:
		d.lim = d.Limits.withDefaults()
	}
	done, err = d.feed(header)
	if err != nil {
		d.state = decFailed
		return false, err
	}
	d.headers++
	if done {
		d.state = decDone
	} else {
		d.state = decMore
	}
	return done, nil
}

func (d *MessageDecoder) feed(h []byte) (done bool, err error) {
	le := binary.LittleEndian
	idx := d.headers

	// The header's own structure.
	if len(h) < HeaderFixedSize {
		return false, badHeader(idx, "truncated: %d bytes, the fixed part alone is %d",
			len(h), HeaderFixedSize)
	}
	if m := le.Uint32(h[0:]); m != headerMagic {
		return false, badHeader(idx, "bad magic %#08x, want %#08x", m, headerMagic)
	}
	if v := h[4]; v != headerVersion {
		return false, badHeader(idx, "unsupported version %d, want %d", v, headerVersion)
	}
	flags := h[5]
	if flags&^(HeaderMore|HeaderInline) != 0 {
		return false, badHeader(idx, "unknown flags %#02x", flags&^(HeaderMore|HeaderInline))
	}
	count := int(le.Uint16(h[6:]))
	if count > FramesPerHeader {
		return false, badHeader(idx, "count %d, at most %d", count, FramesPerHeader)
	}
	want := HeaderFixedSize + 9*count
	inline := flags&HeaderInline != 0
	if len(h) < want || (!inline && len(h) != want) {
		return false, badHeader(idx, "length %d bytes, count %d needs exactly %d",
			len(h), count, want)
	}
	sizes := h[HeaderFixedSize : HeaderFixedSize+8*count]
	types := h[HeaderFixedSize+8*count : want]
	for j, t := range types {
		if t > MemCUDA {
			return false, badHeader(idx, "frame %d has unknown memory type %d", j, t)
		}
	}

	// Its place in the message.
	total := le.Uint64(h[8:])
	if idx > 0 && total != d.total {
		return false, badHeader(idx, "total %d frames, the first header said %d", total, d.total)
	}
	more := flags&HeaderMore != 0
	seen := uint64(len(d.Sizes)) // idx*FramesPerHeader: earlier headers were full
	end := seen + uint64(count)  // cannot overflow: seen frames are held in memory
	switch {
	case end > total:
		return false, badHeader(idx, "describes frames up to %d of a total of %d", end, total)
	case more && count != FramesPerHeader:
		return false, badHeader(idx, "HeaderMore set on a header of %d frames, want %d",
			count, FramesPerHeader)
	case more && end == total:
		return false, badHeader(idx, "HeaderMore set but the header ends at the total, %d frames", total)
	case !more && end != total:
		return false, badHeader(idx, "last header ends at frame %d of a total of %d", end, total)
	case inline && (more || idx > 0):
		return false, badHeader(idx, "HeaderInline set on a message of several headers")
	}
	if idx == 0 && !more {
		d.wireLeft = frameMessages(sizes, types, inline)
	} else {
		d.wireLeft = headersLeft(total, idx+1) + total
	}

	// The header is well formed; now the limits. The total first, before anything grows.
	if idx == 0 {
		if total > d.lim.MaxFrames {
			d.discardOK = total <= max(d.lim.MaxFrames, minDiscardFrames)
			return false, overLimit(idx, "total %d frames > MaxFrames %d", total, d.lim.MaxFrames)
		}
		d.total = total
	}
	// The sizes are written past Sizes' length as they are checked; the length moves
	// only once the whole header is accepted. Storage grows only for frames this
	// header carries, never for the announced total.
	d.Sizes = slices.Grow(d.Sizes, count)
	out := d.Sizes[len(d.Sizes) : len(d.Sizes)+count]
	sum, small := d.bytes, uint64(0)
	for j := range out {
		s := le.Uint64(sizes[8*j:])
		if s > d.lim.MaxFrameBytes {
			d.discardOK = true
			return false, overLimit(idx, "frame %d is %d bytes > MaxFrameBytes %d",
				seen+uint64(j), s, d.lim.MaxFrameBytes)
		}
		// sum <= MaxMessageBytes always, so the subtraction cannot wrap.
		if s > d.lim.MaxMessageBytes-sum {
			d.discardOK = true
			return false, overLimit(idx, "frame %d takes the message past MaxMessageBytes %d (%d + %d bytes)",
				seen+uint64(j), d.lim.MaxMessageBytes, sum, s)
		}
		sum += s
		if gathers(s, types[j]) {
			small += s // at most sum: no overflow
		}
		out[j] = s
	}

	// Within the limits; with HeaderInline, the inline bytes must be the small host frames.
	if inline {
		if got := uint64(len(h) - want); got != small {
			return false, badHeader(idx, "%d inline bytes, the small host frames are %d", got, small)
		}
		d.inlineAt = want
	}

	// Accepted: record the frames.
	d.bytes = sum
	d.Sizes = d.Sizes[:len(d.Sizes)+count]
	d.Types = append(d.Types, types...)
	return !more, nil
}

// headersLeft is how many headers of a message of total frames are still to come after
// fed of them, computed without converting total to int (it may be near 2^64).
func headersLeft(total uint64, fed int) uint64 {
	n := (total + FramesPerHeader - 1) / FramesPerHeader
	if n == 0 {
		n = 1
	}
	if n < uint64(fed) {
		return 0
	}
	return n - uint64(fed)
}

// frameMessages is how many tag messages follow the one header of a message whose
// frames have these sizes (little-endian u64 each, as in the header) and types: the
// small host frames gathered, unless they rode inline, then each other frame.
func frameMessages(sizes []byte, types []uint8, inline bool) uint64 {
	var n uint64
	small := false
	for j, t := range types {
		if gathers(binary.LittleEndian.Uint64(sizes[8*j:]), t) {
			small = true
		} else {
			n++
		}
	}
	if small && !inline {
		n++
	}
	return n
}

// Inline reports, once Feed returned done, whether the message's small host frames
// came inline, and where they start in the last header's tag message.
func (d *MessageDecoder) Inline() (at int, ok bool) { return d.inlineAt, d.inlineAt != 0 }

// FrameMessages returns, once Feed returned done, how many tag messages carry the
// message's frames after its headers (see the wire at the top of this file).
func (d *MessageDecoder) FrameMessages() uint64 { return d.wireLeft }

// Gathered reports, once Feed returned done, whether the message's small host frames
// come as one tag message after its header.
func (d *MessageDecoder) Gathered() bool {
	if d.headers != 1 || d.inlineAt != 0 {
		return false
	}
	for i, s := range d.Sizes {
		if gathers(s, d.Types[i]) {
			return true
		}
	}
	return false
}

// FrameRoute is how one frame of a received message travels (the wire at the top of
// this file).
type FrameRoute uint8

const (
	// RouteInline: in the header's tag message, after the header.
	RouteInline FrameRoute = iota
	// RouteGathered: with the message's other small host frames, in one tag message
	// after its header.
	RouteGathered
	// RouteAlone: in a tag message of its own, after those.
	RouteAlone
)

// Route returns, once Feed returned done, how frame i travels: the one rule the
// receiver's frame receives (postFrames) and its evidence (wireOf) follow.
func (d *MessageDecoder) Route(i int) FrameRoute {
	switch {
	case !gathers(d.Sizes[i], d.Types[i]) || d.headers != 1:
		return RouteAlone
	case d.inlineAt != 0:
		return RouteInline
	default:
		return RouteGathered
	}
}

// Frames returns how many frames the headers fed so far describe: after Feed returned
// done, the message's frame count.
func (d *MessageDecoder) Frames() int { return len(d.Sizes) }

// Total returns the frame count the message's first header announced, once that header
// was found well formed and within Limits.MaxFrames; 0 before.
func (d *MessageDecoder) Total() uint64 { return d.total }

// Discardable reports, after Feed returned an error wrapping ErrLimit, whether the rest
// of the sender's message can be received and dropped to keep the stream usable: ok is
// true and n is the number of its tag messages still to come (headers after the failing
// one, then the frames' messages: see the wire at the top of this file) when every
// header so far was well formed and the total is at most max(Limits.MaxFrames,
// minDiscardFrames). ok is false in every other case: a header was malformed, no error
// happened, or the total is beyond that: dropping that many would silently swallow as
// many of the peer's later messages (a header announcing 1.5 million frames would eat
// 1.5 million), so the stream must break instead.
func (d *MessageDecoder) Discardable() (n uint64, ok bool) {
	if d.state != decFailed || !d.discardOK {
		return 0, false
	}
	return d.wireLeft, true
}
