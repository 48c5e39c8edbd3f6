package core

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// testFrames returns n frames of mixed sizes (0 bytes, 1 byte, odd sizes, maxFrame bytes)
// and mixed memory types.
func testFrames(n int, maxFrame uint64) (sizes []uint64, types []uint8) {
	sizes = make([]uint64, n)
	types = make([]uint8, n)
	for i := range n {
		switch i % 5 {
		case 0:
			sizes[i] = 0
		case 1:
			sizes[i] = 1
		case 2:
			sizes[i] = (uint64(i)*12345 + 7) % (maxFrame + 1)
		case 3:
			sizes[i] = maxFrame
		case 4:
			sizes[i] = 4096
		}
		if i%3 == 1 {
			types[i] = MemCUDA
		}
	}
	return sizes, types
}

// encode returns the headers of the message, each its own slice.
func encode(t testing.TB, sizes []uint64, types []uint8) [][]byte {
	t.Helper()
	dst := make([]byte, HeaderCount(len(sizes))*MaxHeaderSize)
	lens := EncodeHeaders(dst, sizes, types, nil)
	if len(lens) != HeaderCount(len(sizes)) {
		t.Fatalf("EncodeHeaders gave %d headers for %d frames, want %d",
			len(lens), len(sizes), HeaderCount(len(sizes)))
	}
	hs := make([][]byte, len(lens))
	for i, n := range lens {
		hs[i] = dst[i*MaxHeaderSize : i*MaxHeaderSize+n]
	}
	if hs[0][5]&HeaderInline != 0 { // the host frames (zeros here) ride in its message
		hs[0] = append(slices.Clone(hs[0]), make([]byte, inlineBytes(sizes, types))...)
	}
	return hs
}

// inlineBytes is the sum of the small host frames' sizes.
func inlineBytes(sizes []uint64, types []uint8) int {
	n := 0
	for i, s := range sizes {
		if gathers(s, types[i]) {
			n += int(s)
		}
	}
	return n
}

// feedAll feeds hs in turn, requiring every header but the last to be accepted without
// done, and returns the last Feed's result.
func feedAll(t *testing.T, d *MessageDecoder, hs [][]byte) (bool, error) {
	t.Helper()
	for i, h := range hs[:len(hs)-1] {
		done, err := d.Feed(h)
		if err != nil || done {
			t.Fatalf("header %d: Feed = %v, %v; want false, nil", i, done, err)
		}
	}
	return d.Feed(hs[len(hs)-1])
}

func TestHeaderConstants(t *testing.T) {
	if MaxHeaderSize != 1024 {
		t.Errorf("MaxHeaderSize = %d, want 1024", MaxHeaderSize)
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], headerMagic)
	if string(b[:]) != "UXGM" {
		t.Errorf("magic bytes %q, want UXGM", b[:])
	}
}

func TestHeaderCount(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 1}, {1, 1}, {111, 1}, {112, 1}, {113, 2}, {224, 2}, {225, 3}, {1000, 9},
	} {
		if got := HeaderCount(c.n); got != c.want {
			t.Errorf("HeaderCount(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestEncodeHeadersWire pins the wire format down to the byte.
func TestEncodeHeadersWire(t *testing.T) {
	hs := encode(t, []uint64{5, 0x0102030405060708}, []uint8{MemHost, MemCUDA})
	want := "5558474d" + "02" + "02" + "0200" + "0200000000000000" +
		"0500000000000000" + "0807060504030201" + "00" + "01" + "0000000000"
	if got := hex.EncodeToString(hs[0]); got != want {
		t.Errorf("header with its host frame inline\n got %s\nwant %s", got, want)
	}
	hs = encode(t, []uint64{InlineLimit}, []uint8{MemHost})
	want = "5558474d" + "02" + "00" + "0100" + "0100000000000000" + "0020000000000000" + "00"
	if got := hex.EncodeToString(hs[0]); got != want {
		t.Errorf("header of a frame too large to ride inline\n got %s\nwant %s", got, want)
	}

	hs = encode(t, nil, nil)
	if got, want := hex.EncodeToString(hs[0]), "5558474d"+"02"+"00"+"0000"+"0000000000000000"; got != want {
		t.Errorf("empty message header\n got %s\nwant %s", got, want)
	}

	sizes, types := testFrames(113, 1<<20)
	hs = encode(t, sizes, types)
	if len(hs[0]) != MaxHeaderSize || hs[0][5] != HeaderMore || binary.LittleEndian.Uint16(hs[0][6:]) != 112 {
		t.Errorf("first of 2 headers: length %d, flags %#x, count %d; want 1024, 0x1, 112",
			len(hs[0]), hs[0][5], binary.LittleEndian.Uint16(hs[0][6:]))
	}
	if len(hs[1]) != HeaderFixedSize+9 || hs[1][5] != 0 || binary.LittleEndian.Uint64(hs[1][8:]) != 113 {
		t.Errorf("second of 2 headers: length %d, flags %#x, total %d; want 25, 0, 113",
			len(hs[1]), hs[1][5], binary.LittleEndian.Uint64(hs[1][8:]))
	}
}

func TestEncodeHeadersAppendsLens(t *testing.T) {
	sizes, types := testFrames(250, 1<<20)
	dst := make([]byte, 3*MaxHeaderSize)
	lens := EncodeHeaders(dst, sizes, types, []int{-1})
	if want := []int{-1, MaxHeaderSize, MaxHeaderSize, HeaderFixedSize + 9*26}; !slices.Equal(lens, want) {
		t.Errorf("lens = %v, want %v", lens, want)
	}
}

func TestEncodeHeadersPanics(t *testing.T) {
	for _, c := range []struct {
		name  string
		dst   []byte
		sizes []uint64
		types []uint8
	}{
		{"length mismatch", make([]byte, MaxHeaderSize), []uint64{1, 2}, []uint8{0}},
		{"dst too small", make([]byte, MaxHeaderSize-1), nil, nil},
		{"dst too small for 2 headers", make([]byte, 2*MaxHeaderSize-1), make([]uint64, 113), make([]uint8, 113)},
		{"bad memory type", make([]byte, MaxHeaderSize), []uint64{1}, []uint8{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "core: ") {
					t.Errorf("panic %#v, want a string starting with \"core: \"", r)
				}
			}()
			EncodeHeaders(c.dst, c.sizes, c.types, nil)
		})
	}
	t.Run("negative HeaderCount", func(t *testing.T) {
		defer func() {
			if s, _ := recover().(string); !strings.HasPrefix(s, "core: ") {
				t.Errorf("panic %q, want one starting with \"core: \"", s)
			}
		}()
		HeaderCount(-1)
	})
}

func TestHeaderRoundTrip(t *testing.T) {
	const maxFrame = 1 << 36
	lim := Limits{MaxFrames: 1000, MaxFrameBytes: maxFrame, MaxMessageBytes: 1 << 50}
	var d MessageDecoder
	d.Limits = lim
	for _, n := range []int{0, 1, 3, 100, 111, 112, 113, 224, 250, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			sizes, types := testFrames(n, maxFrame)
			hs := encode(t, sizes, types)
			for i, h := range hs {
				count := min(FramesPerHeader, n-i*FramesPerHeader)
				if len(h) != HeaderFixedSize+9*count {
					t.Fatalf("header %d is %d bytes, want %d", i, len(h), HeaderFixedSize+9*count)
				}
			}

			d.Reset()
			done, err := feedAll(t, &d, hs)
			if err != nil || !done {
				t.Fatalf("last Feed = %v, %v; want true, nil", done, err)
			}
			if !slices.Equal(d.Sizes, sizes) || !slices.Equal(d.Types, types) {
				t.Fatalf("decoded frames differ from encoded ones")
			}
			if d.Frames() != n || d.Total() != uint64(n) {
				t.Errorf("Frames() = %d, Total() = %d, want %d", d.Frames(), d.Total(), n)
			}
			if _, ok := d.Discardable(); ok {
				t.Errorf("Discardable ok after success")
			}

			again := encode(t, d.Sizes, d.Types)
			for i := range hs {
				if !bytes.Equal(again[i], hs[i]) {
					t.Errorf("header %d re-encodes differently", i)
				}
			}
		})
	}
}

// TestHeaderAtLimits: a message exactly at every limit is accepted.
func TestHeaderAtLimits(t *testing.T) {
	for _, lim := range []Limits{
		{MaxFrames: 3, MaxFrameBytes: 10, MaxMessageBytes: 30},
		{MaxFrames: 3, MaxFrameBytes: math.MaxUint64, MaxMessageBytes: math.MaxUint64},
	} {
		var d MessageDecoder
		d.Limits = lim
		s := lim.MaxMessageBytes / 3
		sizes := []uint64{s, s, lim.MaxMessageBytes - 2*s}
		done, err := d.Feed(encode(t, sizes, make([]uint8, 3))[0])
		if err != nil || !done {
			t.Errorf("%+v: Feed = %v, %v; want true, nil", lim, done, err)
		}
	}

	// Defaults: 100000 frames and 64 GiB frames are fine.
	var d MessageDecoder
	hs := encode(t, full(100000, 1<<20), make([]uint8, 100000))
	if done, err := feedAll(t, &d, hs); err != nil || !done {
		t.Errorf("100000 frames with default limits: Feed = %v, %v; want true, nil", done, err)
	}
	d.Reset()
	if done, err := d.Feed(encode(t, []uint64{1 << 36, 1 << 36}, []uint8{0, 1})[0]); err != nil || !done {
		t.Errorf("two 64 GiB frames with default limits: Feed = %v, %v; want true, nil", done, err)
	}
}

func TestDecoderMalformed(t *testing.T) {
	fullMore := okHeader(HeaderMore, 200, full(112, 1)) // first of a 200-frame message
	valid3 := okHeader(0, 3, []uint64{1, 2, 3})
	cases := []struct {
		name    string
		headers [][]byte // all but the last are accepted
		text    string   // in the error
	}{
		{"empty", [][]byte{{}}, "truncated"},
		{"fixed part truncated", [][]byte{valid3[:15]}, "truncated"},
		{"sizes truncated", [][]byte{valid3[:HeaderFixedSize+4]}, "length"},
		{"types truncated", [][]byte{valid3[:len(valid3)-1]}, "length"},
		{"trailing byte", [][]byte{append(slices.Clone(valid3), 0)}, "length"},
		{"padded to 1024", [][]byte{append(slices.Clone(valid3), make([]byte, MaxHeaderSize-len(valid3))...)}, "length"},
		{"bad magic", [][]byte{header(0x4d475856, headerVersion, 0, 0, 0, nil, nil)}, "magic"},
		{"byte-swapped magic", [][]byte{header(0x5558474d, headerVersion, 0, 0, 0, nil, nil)}, "magic"},
		{"version 0", [][]byte{header(headerMagic, 0, 0, 0, 0, nil, nil)}, "version"},
		{"version 1", [][]byte{header(headerMagic, 1, 0, 0, 0, nil, nil)}, "version"},
		{"version 3", [][]byte{header(headerMagic, 3, 0, 0, 0, nil, nil)}, "version"},
		{"flag bit 2", [][]byte{header(headerMagic, headerVersion, 4, 0, 0, nil, nil)}, "flags"},
		{"inline bytes short", [][]byte{append(okHeader(HeaderInline, 3, []uint64{1, 2, 3}), 1, 2, 3, 4, 5)}, "5 inline bytes, the small host frames are 6"},
		{"inline bytes long", [][]byte{append(okHeader(HeaderInline, 1, []uint64{1}), 1, 2)}, "2 inline bytes"},
		{"inline bytes missing", [][]byte{okHeader(HeaderInline, 1, []uint64{1})}, "0 inline bytes"},
		{"inline on a first of several headers", [][]byte{okHeader(HeaderMore|HeaderInline, 200, full(112, 1))}, "HeaderInline"},
		{"inline on a second header", [][]byte{fullMore, append(okHeader(HeaderInline, 200, full(88, 1)), make([]byte, 88)...)}, "HeaderInline"},
		{"flag bit 7 with more", [][]byte{header(headerMagic, headerVersion, 0x81, 112, 200, full(112, 1), make([]uint8, 112))}, "flags"},
		{"count 113", [][]byte{header(headerMagic, headerVersion, 0, 113, 113, full(113, 1), make([]uint8, 113))}, "count"},
		{"count 65535", [][]byte{header(headerMagic, headerVersion, 0, 65535, 65535, nil, nil)}, "count"},
		{"count beyond length", [][]byte{header(headerMagic, headerVersion, 0, 4, 4, full(3, 1), make([]uint8, 3))}, "length"},
		{"memory type 2", [][]byte{header(headerMagic, headerVersion, 0, 3, 3, full(3, 1), []uint8{0, 2, 1})}, "memory type"},
		{"memory type 255", [][]byte{header(headerMagic, headerVersion, 0, 1, 1, full(1, 1), []uint8{255})}, "memory type"},
		{"more frames than total", [][]byte{okHeader(0, 2, full(3, 1))}, "total"},
		{"empty header of non-empty message", [][]byte{okHeader(0, 1, nil)}, "total"},
		{"last header short of total", [][]byte{okHeader(0, 5, full(3, 1))}, "ends at frame 3"},
		{"HeaderMore on a short header", [][]byte{okHeader(HeaderMore, 200, full(3, 1))}, "HeaderMore"},
		{"HeaderMore on an empty message", [][]byte{okHeader(HeaderMore, 0, nil)}, "HeaderMore"},
		{"HeaderMore reaching the total", [][]byte{okHeader(HeaderMore, 112, full(112, 1))}, "HeaderMore"},
		{"HeaderMore past the total", [][]byte{okHeader(HeaderMore, 100, full(112, 1))}, "total"},
		{"second header's total differs", [][]byte{fullMore, okHeader(0, 201, full(88, 1))}, "first header said 200"},
		{"second header's total smaller", [][]byte{fullMore, okHeader(0, 199, full(87, 1))}, "first header said 200"},
		{"second header past the total", [][]byte{fullMore, okHeader(0, 200, full(89, 1))}, "total"},
		{"second header short of the total", [][]byte{fullMore, okHeader(0, 200, full(87, 1))}, "ends at frame 199"},
		{"second header empty", [][]byte{fullMore, okHeader(0, 200, nil)}, "ends at frame 112"},
		{"second header HeaderMore past the total", [][]byte{fullMore, okHeader(HeaderMore, 200, full(112, 1))}, "total"},
		{"second header bad magic", [][]byte{fullMore, header(1, headerVersion, 0, 88, 200, full(88, 1), make([]uint8, 88))}, "header 1: bad magic"},
		{"second header HeaderMore but short", [][]byte{fullMore, okHeader(HeaderMore, 200, full(88, 1))}, "HeaderMore"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := MessageDecoder{Limits: Limits{MaxFrames: 1000}}
			done, err := feedAll(t, &d, c.headers)
			if done || !errors.Is(err, ErrBadHeader) || errors.Is(err, ErrLimit) {
				t.Fatalf("Feed = %v, %v; want false and an error wrapping ErrBadHeader only", done, err)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q does not mention %q", err, c.text)
			}
			if _, ok := d.Discardable(); ok {
				t.Errorf("Discardable ok after a malformed header")
			}
			if len(d.Sizes) != (len(c.headers)-1)*FramesPerHeader {
				t.Errorf("%d frames recorded, the failing header's frames must not be", len(d.Sizes))
			}
		})
	}
}

func TestDecoderLimits(t *testing.T) {
	small := Limits{MaxFrames: 300, MaxFrameBytes: 1000, MaxMessageBytes: 5000}
	huge := Limits{MaxFrames: 300, MaxFrameBytes: math.MaxUint64, MaxMessageBytes: math.MaxUint64}
	cases := []struct {
		name      string
		lim       Limits
		headers   [][]byte
		text      string
		discardOK bool
		discardN  uint64
	}{
		{"total over MaxFrames", small, [][]byte{okHeader(HeaderMore, 301, full(112, 1))}, "total 301 frames > MaxFrames 300", true, 2 + 301},
		{"total over the drop cap", small, [][]byte{okHeader(HeaderMore, minDiscardFrames+1, full(112, 1))}, "MaxFrames 300", false, 0},
		{"total 2^64-1", small, [][]byte{okHeader(HeaderMore, math.MaxUint64, full(112, 1))}, "MaxFrames", false, 0},
		{"total over default MaxFrames", Limits{}, [][]byte{okHeader(HeaderMore, 100001, full(112, 1))}, "MaxFrames 100000", false, 0},
		{"frame over MaxFrameBytes", small, [][]byte{okHeader(0, 3, []uint64{1, 1001, 1})}, "frame 1 is 1001 bytes > MaxFrameBytes 1000", true, 1},
		{"frame over default MaxFrameBytes", Limits{}, [][]byte{okHeader(0, 1, []uint64{1<<36 + 1})}, "MaxFrameBytes 68719476736", true, 1},
		{"frame 2^64-1", small, [][]byte{okHeader(0, 1, []uint64{math.MaxUint64})}, "MaxFrameBytes", true, 1},
		{"sum over MaxMessageBytes", small, [][]byte{okHeader(0, 6, full(6, 1000))}, "MaxMessageBytes 5000", true, 1},
		{"sum over default MaxMessageBytes", Limits{}, [][]byte{okHeader(0, 3, full(3, 1<<36))}, "MaxMessageBytes 137438953472", true, 3},
		{"sum over in the second header", small, [][]byte{okHeader(HeaderMore, 150, full(112, 40)), okHeader(0, 150, full(38, 40))}, "MaxMessageBytes", true, 150},
		// sum+s would wrap to a small number: a check written as sum+s > max misses these.
		{"sum wraps 2^63+2^63", huge, [][]byte{okHeader(0, 2, []uint64{1 << 63, 1 << 63})}, "MaxMessageBytes", true, 2},
		{"sum wraps (2^64-6)+10", huge, [][]byte{okHeader(0, 2, []uint64{math.MaxUint64 - 5, 10})}, "MaxMessageBytes", true, 2},
		{"sum wraps (2^64-1)+1", huge, [][]byte{okHeader(0, 3, []uint64{0, math.MaxUint64, 1})}, "MaxMessageBytes", true, 2},
		{"sum wraps across headers", huge, [][]byte{okHeader(HeaderMore, 113, append(full(111, 0), math.MaxUint64-1)), okHeader(0, 113, []uint64{2})}, "MaxMessageBytes", true, 113},
		{"sum wraps under default limits", Limits{}, [][]byte{okHeader(0, 2, []uint64{1 << 36, math.MaxUint64 - 1<<35})}, "MaxFrameBytes", true, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := MessageDecoder{Limits: c.lim}
			done, err := feedAll(t, &d, c.headers)
			if done || !errors.Is(err, ErrLimit) || errors.Is(err, ErrBadHeader) {
				t.Fatalf("Feed = %v, %v; want false and an error wrapping ErrLimit only", done, err)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q does not mention %q", err, c.text)
			}
			n, ok := d.Discardable()
			if ok != c.discardOK || n != c.discardN {
				t.Errorf("Discardable() = %d, %v; want %d, %v", n, ok, c.discardN, c.discardOK)
			}
			if !c.discardOK && d.Total() != 0 {
				t.Errorf("Total() = %d after the total was refused, want 0", d.Total())
			}
			if len(d.Sizes) != (len(c.headers)-1)*FramesPerHeader {
				t.Errorf("%d frames recorded, the failing header's frames must not be", len(d.Sizes))
			}
		})
	}
}

// TestDecoderTotalOverLimitDoesNotGrow: an announced total over MaxFrames is refused
// before Sizes or Types grow, however large it is.
func TestDecoderTotalOverLimitDoesNotGrow(t *testing.T) {
	for _, total := range []uint64{113, 1 << 32, 1 << 62, math.MaxUint64} {
		d := MessageDecoder{Limits: Limits{MaxFrames: 112}}
		_, err := d.Feed(okHeader(HeaderMore, total, full(112, 1)))
		if !errors.Is(err, ErrLimit) {
			t.Errorf("total %d: err = %v, want ErrLimit", total, err)
		}
		if cap(d.Sizes) != 0 || cap(d.Types) != 0 {
			t.Errorf("total %d: cap(Sizes) = %d, cap(Types) = %d, want 0", total, cap(d.Sizes), cap(d.Types))
		}
	}

	// A total within the limit grows the slices with the headers actually received,
	// not with the announcement.
	d := MessageDecoder{Limits: Limits{MaxFrames: 100000}}
	if _, err := d.Feed(okHeader(HeaderMore, 100000, full(112, 1))); err != nil {
		t.Fatal(err)
	}
	if cap(d.Sizes) > 4*FramesPerHeader || cap(d.Types) > 4*FramesPerHeader {
		t.Errorf("after one header: cap(Sizes) = %d, cap(Types) = %d, want a few hundred at most",
			cap(d.Sizes), cap(d.Types))
	}
}

func TestDecoderDiscardable(t *testing.T) {
	var d MessageDecoder
	if n, ok := d.Discardable(); ok || n != 0 {
		t.Errorf("fresh decoder: Discardable() = %d, %v; want 0, false", n, ok)
	}
	d.Limits = Limits{MaxFrames: 300, MaxFrameBytes: 100}
	if _, err := d.Feed(okHeader(HeaderMore, 200, full(112, 1))); err != nil {
		t.Fatal(err)
	}
	if n, ok := d.Discardable(); ok || n != 0 {
		t.Errorf("mid-message: Discardable() = %d, %v; want 0, false", n, ok)
	}
	if _, err := d.Feed(okHeader(0, 200, append(full(87, 1), 101))); !errors.Is(err, ErrLimit) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	if n, ok := d.Discardable(); !ok || n != 200 {
		t.Errorf("after a size limit: Discardable() = %d, %v; want 200, true", n, ok)
	}
	d.Reset()
	if n, ok := d.Discardable(); ok || n != 0 {
		t.Errorf("after Reset: Discardable() = %d, %v; want 0, false", n, ok)
	}
	// A size over the limit in a header that is also malformed: not discardable.
	if _, err := d.Feed(header(headerMagic, headerVersion, 0, 1, 1, []uint64{101}, []uint8{7})); !errors.Is(err, ErrBadHeader) {
		t.Fatalf("err = %v, want ErrBadHeader", err)
	}
	if _, ok := d.Discardable(); ok {
		t.Errorf("malformed header with a size over the limit is Discardable")
	}
}

func TestDecoderReset(t *testing.T) {
	d := MessageDecoder{Limits: Limits{MaxFrames: 1000}}
	sizes, types := testFrames(250, 1<<20)
	if done, err := feedAll(t, &d, encode(t, sizes, types)); err != nil || !done {
		t.Fatalf("250 frames: Feed = %v, %v", done, err)
	}

	// After done, a smaller message reuses the storage.
	d.Reset()
	if d.Frames() != 0 || d.Total() != 0 || len(d.Types) != 0 {
		t.Fatalf("after Reset: Frames %d, Total %d, %d types; want zeros", d.Frames(), d.Total(), len(d.Types))
	}
	before := &d.Sizes[:1][0]
	sizes, types = testFrames(3, 1<<20)
	if done, err := d.Feed(encode(t, sizes, types)[0]); err != nil || !done {
		t.Fatalf("3 frames after Reset: Feed = %v, %v", done, err)
	}
	if &d.Sizes[0] != before || !slices.Equal(d.Sizes, sizes) || !slices.Equal(d.Types, types) {
		t.Errorf("3 frames after Reset: storage not reused or frames wrong")
	}

	// After an error, Reset makes it usable again, with fresh totals and sums.
	d.Reset()
	if _, err := d.Feed(okHeader(HeaderMore, 200, full(112, 1000))); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Feed(okHeader(0, 999, full(87, 1))); !errors.Is(err, ErrBadHeader) {
		t.Fatalf("err = %v, want ErrBadHeader", err)
	}
	d.Reset()
	if done, err := d.Feed(okHeader(0, 2, []uint64{1000, 1000})); err != nil || !done {
		t.Fatalf("after error and Reset: Feed = %v, %v", done, err)
	}
	if d.Total() != 2 || !slices.Equal(d.Sizes, []uint64{1000, 1000}) {
		t.Errorf("after error and Reset: Total %d, Sizes %v", d.Total(), d.Sizes)
	}

	// Limits are read at the first header of each message.
	d.Reset()
	d.Limits.MaxFrameBytes = 10
	if _, err := d.Feed(okHeader(0, 1, []uint64{11})); !errors.Is(err, ErrLimit) {
		t.Errorf("new Limits not applied after Reset: err = %v", err)
	}
}

func TestDecoderMisusePanics(t *testing.T) {
	for _, c := range []struct {
		name  string
		first []byte
	}{
		{"after done", okHeader(0, 0, nil)},
		{"after error", okHeader(0, 1, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d MessageDecoder
			d.Feed(c.first)
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "core: ") {
					t.Errorf("panic %q, want one starting with \"core: \"", s)
				}
			}()
			d.Feed(okHeader(0, 0, nil))
		})
	}
}

// TestHeaderCodecAllocs: encoding into a reused buffer and decoding with a reused
// decoder allocate nothing.
func TestHeaderCodecAllocs(t *testing.T) {
	sizes, types := testFrames(250, 1<<20)
	dst := make([]byte, HeaderCount(250)*MaxHeaderSize)
	lens := make([]int, 0, 8)
	var d MessageDecoder
	run := func() {
		lens = EncodeHeaders(dst, sizes, types, lens[:0])
		d.Reset()
		for i, n := range lens {
			if _, err := d.Feed(dst[i*MaxHeaderSize : i*MaxHeaderSize+n]); err != nil {
				t.Fatal(err)
			}
		}
	}
	run()
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("%v allocations per encode and decode of 250 frames, want 0", a)
	}
}

// fuzzLimits are small enough for the fuzzer to reach every limit.
var fuzzLimits = Limits{MaxFrames: 400, MaxFrameBytes: 1 << 20, MaxMessageBytes: 1 << 24}

// checkDecoded checks what a decoder holds against its limits.
func checkDecoded(t *testing.T, d *MessageDecoder) {
	t.Helper()
	lim := d.Limits.withDefaults()
	if len(d.Sizes) != len(d.Types) {
		t.Fatalf("%d sizes but %d types", len(d.Sizes), len(d.Types))
	}
	if d.Total() > lim.MaxFrames || uint64(d.Frames()) > d.Total() {
		t.Fatalf("Total %d, Frames %d, MaxFrames %d", d.Total(), d.Frames(), lim.MaxFrames)
	}
	var sum uint64
	for i, s := range d.Sizes {
		if s > lim.MaxFrameBytes {
			t.Fatalf("frame %d: %d bytes > MaxFrameBytes %d", i, s, lim.MaxFrameBytes)
		}
		sum += s // cannot wrap: each s <= 1<<20, at most 400 of them
		if d.Types[i] > MemCUDA {
			t.Fatalf("frame %d: memory type %d", i, d.Types[i])
		}
	}
	if sum > lim.MaxMessageBytes {
		t.Fatalf("%d bytes in all > MaxMessageBytes %d", sum, lim.MaxMessageBytes)
	}
}

// checkFailed checks a Feed error: no done, one of the two sentinels, and a
// Discardable that agrees.
func checkFailed(t *testing.T, d *MessageDecoder, done bool, err error) {
	t.Helper()
	if done {
		t.Fatalf("Feed returned done with error %v", err)
	}
	bad, limit := errors.Is(err, ErrBadHeader), errors.Is(err, ErrLimit)
	if bad == limit {
		t.Fatalf("error %v wraps ErrBadHeader %v, ErrLimit %v; want exactly one", err, bad, limit)
	}
	// Only a limit can be recovered from, and only for a total the decoder accepted or
	// one within the drop cap.
	// What is left to drop is at most the frames and headers of the drop cap.
	n, ok := d.Discardable()
	dropCap := max(d.Limits.withDefaults().MaxFrames, minDiscardFrames)
	if ok && (!limit || n > dropCap+uint64(HeaderCount(int(dropCap)))) {
		t.Fatalf("Discardable() = %d, true after %v (Total %d)", n, err, d.Total())
	}
}

// gatheredForm returns header h, which d accepted, as a sender that does not send
// inline would have: HeaderInline clear, no inline bytes.
func gatheredForm(h []byte, d *MessageDecoder) []byte {
	h = slices.Clone(h)
	if h[5]&HeaderInline != 0 {
		at, ok := d.Inline()
		if !ok {
			panic("a header with HeaderInline accepted without inline frames")
		}
		h = h[:at]
		h[5] &^= HeaderInline
	}
	return h
}

// reencode returns the headers of a message whose first frames are the decoder's and
// the rest, up to Total, zero-sized host frames, none of them inline.
func reencode(d *MessageDecoder) [][]byte {
	sizes := append(slices.Clone(d.Sizes), make([]uint64, d.Total()-uint64(d.Frames()))...)
	types := append(slices.Clone(d.Types), make([]uint8, d.Total()-uint64(d.Frames()))...)
	dst := make([]byte, HeaderCount(len(sizes))*MaxHeaderSize)
	lens := EncodeHeaders(dst, sizes, types, nil)
	hs := make([][]byte, len(lens))
	for i, n := range lens {
		hs[i] = dst[i*MaxHeaderSize : i*MaxHeaderSize+n]
	}
	hs[0][5] &^= HeaderInline
	return hs
}

// fuzzSeeds are headers to start from: valid ones and near misses.
func fuzzSeeds(t testing.TB) [][]byte {
	sizes, types := testFrames(250, 1<<15)
	var seeds [][]byte
	seeds = append(seeds, encode(t, nil, nil)[0])
	seeds = append(seeds, encode(t, sizes[:1], types[:1])[0])
	seeds = append(seeds, encode(t, sizes[:3], types[:3])[0])
	seeds = append(seeds, encode(t, sizes[:112], types[:112])[0])
	seeds = append(seeds, encode(t, sizes[:113], types[:113])...)
	seeds = append(seeds,
		header(headerMagic, 1, 0, 0, 0, nil, nil),
		append(okHeader(HeaderInline, 2, []uint64{3, 1}), 1, 2, 3, 4),
		header(headerMagic, headerVersion, 0, 1, 1, []uint64{1}, []uint8{2}),
		okHeader(HeaderMore, 200, full(3, 1)),
		okHeader(0, 2, []uint64{1 << 63, 1 << 63}),
		okHeader(0, 5, full(5, 1<<20)),
	)
	return seeds
}

// FuzzDecodeHeader feeds one header to a fresh decoder.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := MessageDecoder{Limits: fuzzLimits}
		done, err := d.Feed(data)
		if err != nil {
			checkFailed(t, &d, done, err)
			if d.Frames() != 0 {
				t.Fatalf("%d frames recorded after an error in the first header", d.Frames())
			}
			return
		}
		checkDecoded(t, &d)
		if done != (d.Total() == uint64(d.Frames())) {
			t.Fatalf("done %v with %d of %d frames", done, d.Frames(), d.Total())
		}
		// The header must be the first of the message it describes, byte for byte.
		if got := reencode(&d)[0]; !bytes.Equal(got, gatheredForm(data, &d)) {
			t.Fatalf("re-encoded header differs:\n got %x\nwant %x", got, data)
		}
	})
}

// splitHeaders is FuzzMessageDecoder's input format: byte 0 gives the number of
// headers k (1 + b&3), then k-1 little-endian u16 lengths, then the headers'
// bytes, the last header taking what is left. Lengths past the end are cut short.
func splitHeaders(data []byte) [][]byte {
	if len(data) == 0 {
		return [][]byte{{}}
	}
	k := 1 + int(data[0]&3)
	data = data[1:]
	lens := make([]int, k-1)
	for i := range lens {
		if len(data) >= 2 {
			lens[i] = int(binary.LittleEndian.Uint16(data))
			data = data[2:]
		}
	}
	hs := make([][]byte, 0, k)
	for _, n := range lens {
		n = min(n, len(data))
		hs = append(hs, data[:n])
		data = data[n:]
	}
	return append(hs, data)
}

// joinHeaders is splitHeaders' inverse, for seeds; up to 4 headers.
func joinHeaders(hs ...[]byte) []byte {
	data := []byte{byte(len(hs) - 1)}
	for _, h := range hs[:len(hs)-1] {
		data = binary.LittleEndian.AppendUint16(data, uint16(len(h)))
	}
	for _, h := range hs {
		data = append(data, h...)
	}
	return data
}

func TestSplitHeaders(t *testing.T) {
	hs := [][]byte{{1, 2, 3}, {}, {4}, {5, 6}}
	for k := 1; k <= 4; k++ {
		got := splitHeaders(joinHeaders(hs[:k]...))
		if len(got) != k {
			t.Fatalf("%d headers: split into %d", k, len(got))
		}
		for i := range got {
			if !bytes.Equal(got[i], hs[i]) {
				t.Errorf("%d headers: header %d = %v, want %v", k, i, got[i], hs[i])
			}
		}
	}
}

// fuzzMessageSeeds are whole messages in splitHeaders' format.
func fuzzMessageSeeds(t testing.TB) [][]byte {
	sizes, types := testFrames(400, 1<<15)
	var seeds [][]byte
	for _, n := range []int{0, 1, 3, 112, 113, 250, 400} {
		seeds = append(seeds, joinHeaders(encode(t, sizes[:n], types[:n])...))
	}
	two := encode(t, sizes[:200], types[:200])
	seeds = append(seeds,
		joinHeaders(two[0], okHeader(0, 201, full(89, 1))),              // totals differ
		joinHeaders(two[0], okHeader(0, 200, full(89, 1))),              // past the total
		joinHeaders(two[0], two[0]),                                     // HeaderMore past the total
		joinHeaders(encode(t, full(250, 1<<17), make([]uint8, 250))...), // sum over MaxMessageBytes
	)
	return seeds
}

// FuzzMessageDecoder feeds up to 4 headers to one decoder.
func FuzzMessageDecoder(f *testing.F) {
	for _, s := range fuzzMessageSeeds(f) {
		f.Add(s)
	}
	for _, s := range fuzzSeeds(f) {
		f.Add(joinHeaders(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := MessageDecoder{Limits: fuzzLimits}
		hs := splitHeaders(data)
		for i, h := range hs {
			done, err := d.Feed(h)
			if err != nil {
				checkFailed(t, &d, done, err)
				if d.Frames() != i*FramesPerHeader {
					t.Fatalf("%d frames recorded after an error in header %d", d.Frames(), i)
				}
				return
			}
			checkDecoded(t, &d)
			if d.Frames() != min(int(d.Total()), (i+1)*FramesPerHeader) {
				t.Fatalf("%d frames after %d headers of a %d-frame message", d.Frames(), i+1, d.Total())
			}
			if done != (d.Total() == uint64(d.Frames())) {
				t.Fatalf("done %v with %d of %d frames", done, d.Frames(), d.Total())
			}
			// Everything fed so far is the start of the message re-encoded, byte for byte.
			again := reencode(&d)
			if !done && len(again) <= i+1 {
				t.Fatalf("not done after %d headers, but the message has %d", i+1, len(again))
			}
			if done && len(again) != i+1 {
				t.Fatalf("done after %d headers, but the message has %d", i+1, len(again))
			}
			for j := range i + 1 {
				if !bytes.Equal(again[j], gatheredForm(hs[j], &d)) {
					t.Fatalf("header %d re-encodes differently:\n got %x\nwant %x", j, again[j], hs[j])
				}
			}
			if done {
				return
			}
		}
	})
}

// Benchmarks. With reuse, the per-frame work dominates: encoding is one 8-byte store and
// a type check, decoding one 8-byte load, two limit compares and a store, about 2 ns a
// frame each way (250 frames: ~0.5 µs; 4 frames: ~30 ns). The "alloc" variants are the
// naive use, a new buffer or decoder per message: for few frames the allocation (and,
// when encoding, zeroing the 1 KiB buffer) costs several times the coding itself.

func BenchmarkEncodeHeaders(b *testing.B) {
	for _, n := range []int{4, 250} {
		sizes, types := testFrames(n, 1<<20)
		b.Run(fmt.Sprintf("frames=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, HeaderCount(n)*MaxHeaderSize)
			lens := make([]int, 0, HeaderCount(n))
			for b.Loop() {
				lens = EncodeHeaders(dst, sizes, types, lens[:0])
			}
		})
		b.Run(fmt.Sprintf("frames=%d/alloc", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dst := make([]byte, HeaderCount(n)*MaxHeaderSize)
				EncodeHeaders(dst, sizes, types, nil)
			}
		})
	}
}

func BenchmarkDecodeHeaders(b *testing.B) {
	for _, n := range []int{4, 250} {
		sizes, types := testFrames(n, 1<<20)
		hs := encode(b, sizes, types)
		feed := func(b *testing.B, d *MessageDecoder) {
			for _, h := range hs {
				if _, err := d.Feed(h); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("frames=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var d MessageDecoder
			for b.Loop() {
				d.Reset()
				feed(b, &d)
			}
		})
		b.Run(fmt.Sprintf("frames=%d/alloc", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var d MessageDecoder
				feed(b, &d)
			}
		})
	}
}

// TestInlineFits: small host frames ride inline when the message has one header and a
// small host frame, and the header and the small host frames fit in InlineLimit bytes.
func TestInlineFits(t *testing.T) {
	room := uint64(InlineLimit - HeaderFixedSize - 9*3)
	for _, c := range []struct {
		name  string
		sizes []uint64
		types []uint8
		want  bool
	}{
		{"no frames", nil, nil, false},
		{"CUDA only", []uint64{8}, []uint8{MemCUDA}, false},
		{"one empty host frame", []uint64{0}, []uint8{MemHost}, true},
		{"exactly the limit", []uint64{room - 100, 100, 0}, []uint8{MemHost, MemHost, MemHost}, true},
		{"a byte past it", []uint64{room - 100, 101, 0}, []uint8{MemHost, MemHost, MemHost}, false},
		{"large frames beside", []uint64{1 << 30, room, GatherMaxFrame}, []uint8{MemCUDA, MemHost, MemHost}, true},
		{"large host frames only", []uint64{GatherMaxFrame, 1 << 20}, []uint8{MemHost, MemHost}, false},
		{"several headers", full(FramesPerHeader+1, 0), make([]uint8, FramesPerHeader+1), false},
	} {
		if got := InlineFits(c.sizes, c.types); got != c.want {
			t.Errorf("%s: InlineFits = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDecoderWireOfFrames: what the decoder says of the tag messages carrying a
// message's frames, inline, gathered and with several headers.
func TestDecoderWireOfFrames(t *testing.T) {
	for _, c := range []struct {
		name          string
		headers       [][]byte
		inlineAt      int // 0: not inline
		gathered      bool
		frameMessages uint64
	}{
		{"inline with a CUDA frame", encode(t, []uint64{10, 20, 5}, []uint8{MemHost, MemHost, MemCUDA}), HeaderFixedSize + 27, false, 1},
		{"the same gathered", [][]byte{okHeader(0, 3, []uint64{10, 20, 5})}, 0, true, 1},
		{"inline beside large host frames", encode(t, []uint64{1 << 20, 3, GatherMaxFrame}, []uint8{MemHost, MemHost, MemHost}), HeaderFixedSize + 27, false, 2},
		{"gathered beside large frames", encode(t, []uint64{InlineLimit, 1 << 20, 4}, []uint8{MemHost, MemHost, MemCUDA}), 0, true, 3},
		{"large frames only", encode(t, []uint64{1 << 20, 1 << 20}, []uint8{MemHost, MemCUDA}), 0, false, 2},
		{"CUDA only", encode(t, []uint64{1, 2}, []uint8{MemCUDA, MemCUDA}), 0, false, 2},
		{"no frames", encode(t, nil, nil), 0, false, 0},
		{"several headers", encode(t, full(200, 1), make([]uint8, 200)), 0, false, 200},
	} {
		var d MessageDecoder
		if done, err := feedAll(t, &d, c.headers); err != nil || !done {
			t.Fatalf("%s: Feed = %v, %v", c.name, done, err)
		}
		at, ok := d.Inline()
		if at != c.inlineAt || ok != (c.inlineAt != 0) || d.Gathered() != c.gathered || d.FrameMessages() != c.frameMessages {
			t.Errorf("%s: Inline() = %d, %v, Gathered() = %v, FrameMessages() = %d; want %d, %v, %d",
				c.name, at, ok, d.Gathered(), d.FrameMessages(), c.inlineAt, c.gathered, c.frameMessages)
		}
		// Route agrees: a frame message per frame alone, one for the gathered frames.
		routes := map[FrameRoute]int{}
		for i := range d.Frames() {
			routes[d.Route(i)]++
		}
		gathered := 0
		if routes[RouteGathered] > 0 {
			gathered = 1
		}
		if uint64(routes[RouteAlone]+gathered) != d.FrameMessages() || (routes[RouteInline] > 0) != ok || (gathered == 1) != d.Gathered() {
			t.Errorf("%s: routes %v against Inline %v, Gathered %v, FrameMessages %d", c.name, routes, ok, d.Gathered(), d.FrameMessages())
		}
	}
}
