package core

import (
	"errors"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The host frames a receive allocates outside its message's block (FramePolicy.OwnHostFrom:
// Dask's large frames) come from a bounded cache of frames released before, kept for a
// short while. A frame freshly allocated at this size is mapped anew by the C allocator
// (always from 128 KiB under a Dask nanny's MALLOC_TRIM_THRESHOLD_, which turns glibc's
// adaptive mmap threshold off) and receiving into it takes a page fault every 4 KiB:
// filling 1 MiB costs about 290 µs fresh against 33 reused on the dev VM. A frame
// released (ReleaseHostFrame) is kept, its pages mapped, for the next receive of a frame
// of its size class, within UCXGO_RECV_FRAME_CACHE bytes (default 64 MiB; 0: none) and
// for HostFrameCacheIdle at most: the process's memory grows by at most the bound, and
// not for long once receives stop.
//
// Every frame HostFrame allocates is lent until ReleaseHostFrame takes it back: the
// cache records what it lent, so a release of anything else is refused, not freed.

// HostFrameCacheIdle is how long a released frame stays cached unused.
const HostFrameCacheIdle = 2 * time.Second

// hostFrameCacheMin is the smallest frame the cache keeps: smaller ones come from the C
// allocator's heap, already mapped.
const hostFrameCacheMin = 64 << 10

// hostFrameCacheEntries bounds the frames kept, whatever their sizes.
const hostFrameCacheEntries = 256

// ErrUnknownHostFrame: ReleaseHostFrame was given an address HostFrame did not lend (or
// lent and took back already).
var ErrUnknownHostFrame = errors.New("core: not a host frame the engine lent")

// receivedHostFrames is the process's cache: frames outlive the engines that received them.
var receivedHostFrames = newHostFrameCache(hostFrameCacheBytes(os.Getenv("UCXGO_RECV_FRAME_CACHE")),
	HostFrameCacheIdle)

// hostFrameCacheBytes reads UCXGO_RECV_FRAME_CACHE: a byte count, 0 for no cache; unset or
// unreadable, 64 MiB.
func hostFrameCacheBytes(s string) uint64 {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n
	}
	return 64 << 20
}

// HostFrame allocates a host frame of at least n bytes (nil when memory runs out), from
// the cache when a frame of its size class is there. Give it back with ReleaseHostFrame.
func HostFrame(n uint64) uintptr { return receivedHostFrames.get(n) }

// ReleaseHostFrame takes back a frame HostFrame lent: cached, or freed. It returns
// ErrUnknownHostFrame, and frees nothing, for any other address.
func ReleaseHostFrame(at uintptr) error { return receivedHostFrames.put(at) }

// hostFrameCache is a bounded cache of released host frames. Safe for concurrent use.
type hostFrameCache struct {
	limit uint64        // most bytes kept
	idle  time.Duration // how long a frame is kept unused

	mu     sync.Mutex
	lent   map[uintptr]uint64 // every frame handed out: its capacity
	kept   []keptFrame        // released frames, oldest first
	bytes  uint64             // their capacities' sum
	armed  bool               // a trim is scheduled
	hits   uint64             // gets served from kept
	misses uint64             // gets of a cacheable size that were not
}

type keptFrame struct {
	at       uintptr
	capacity uint64
	since    time.Time
}

func newHostFrameCache(limit uint64, idle time.Duration) *hostFrameCache {
	return &hostFrameCache{limit: limit, idle: idle, lent: make(map[uintptr]uint64)}
}

// frameCapacity is the size class of a frame of n bytes: n rounded up to an eighth of
// its power of two (at most 12.5 % more), so that frames of nearly one size share one.
// Frames under the cache's minimum keep their size.
func frameCapacity(n uint64) uint64 {
	if n < hostFrameCacheMin {
		return max(n, 1)
	}
	step := uint64(1) << (bits.Len64(n) - 4)
	return (n + step - 1) &^ (step - 1)
}

func (c *hostFrameCache) cacheable(capacity uint64) bool {
	return capacity >= hostFrameCacheMin && capacity <= c.limit
}

func (c *hostFrameCache) get(n uint64) uintptr {
	capacity := frameCapacity(n)
	c.mu.Lock()
	if c.cacheable(capacity) {
		for i := len(c.kept) - 1; i >= 0; i-- { // the most recently released: its pages are warmest
			if f := c.kept[i]; f.capacity == capacity {
				c.kept = append(c.kept[:i], c.kept[i+1:]...)
				c.bytes -= capacity
				c.lent[f.at] = capacity
				c.hits++
				c.mu.Unlock()
				return f.at
			}
		}
		c.misses++
	}
	c.mu.Unlock()
	at := uintptr(ucxx.CMalloc(capacity))
	if at == 0 {
		return 0
	}
	c.mu.Lock()
	c.lent[at] = capacity
	c.mu.Unlock()
	return at
}

func (c *hostFrameCache) put(at uintptr) error {
	c.mu.Lock()
	capacity, ok := c.lent[at]
	if !ok {
		c.mu.Unlock()
		return ErrUnknownHostFrame
	}
	delete(c.lent, at)
	if !c.cacheable(capacity) {
		c.mu.Unlock()
		ucxx.CFreeAddr(at)
		return nil
	}
	// Room for it: the oldest kept frames go first.
	var evicted []uintptr
	for len(c.kept) > 0 && (c.bytes+capacity > c.limit || len(c.kept) >= hostFrameCacheEntries) {
		evicted = append(evicted, c.kept[0].at)
		c.bytes -= c.kept[0].capacity
		c.kept = c.kept[1:]
	}
	c.kept = append(c.kept, keptFrame{at: at, capacity: capacity, since: time.Now()})
	c.bytes += capacity
	if !c.armed {
		c.armed = true
		time.AfterFunc(c.idle, c.trim)
	}
	c.mu.Unlock()
	for _, p := range evicted {
		ucxx.CFreeAddr(p)
	}
	return nil
}

// trim frees the frames kept unused for idle or longer, and schedules itself again
// while frames are kept.
func (c *hostFrameCache) trim() {
	c.mu.Lock()
	now := time.Now()
	var stale []uintptr
	for len(c.kept) > 0 && now.Sub(c.kept[0].since) >= c.idle {
		stale = append(stale, c.kept[0].at)
		c.bytes -= c.kept[0].capacity
		c.kept = c.kept[1:]
	}
	if len(c.kept) > 0 {
		time.AfterFunc(c.kept[0].since.Add(c.idle).Sub(now), c.trim)
	} else {
		c.armed = false
	}
	c.mu.Unlock()
	for _, p := range stale {
		ucxx.CFreeAddr(p)
	}
}
