// Package notifier is the completion queue between the progress thread and its
// consumer, and the wake-up that tells the consumer to read it.
//
// The queue is a single-producer, single-consumer ring in memory that Go does not
// manage (an anonymous mapping), so a consumer in another language can read it in
// place at Address(): a Python event loop drains a whole batch of completions with no
// call into Go. The layout is fixed and little-endian (see the word* constants):
//
//	byte   0: head     producer's count of entries written (monotonic)
//	byte  64: tail     consumer's count of entries read (monotonic)
//	byte 128: wake     1 while a wake-up is pending on the eventfd
//	byte 192: closed   1 once Close was called
//	byte 256: capacity entries in the ring, a power of two
//	byte 320: log      1 while the producer has log records for the consumer
//	byte 512: entries  capacity × Completion (32 bytes each)
//
// Wake-ups are coalesced: the producer writes the eventfd only when it turns wake from
// 0 to 1. The consumer first empties the eventfd, then clears wake, then reads head.
// Both orders matter. Clearing wake before emptying the eventfd can consume a kick
// whose wake is then left set: no later push kicks again, and the consumer sleeps
// forever. And the clearing store must be ordered before the load of head (a full
// fence), or a push between them goes unseen and unkicked. Wait and ConsumeWake do
// both; a consumer in another language calls ConsumeWake rather than doing it itself.
package notifier

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Byte offsets of the ring's header words and first entry, and the size of an entry:
// the layout a consumer in another language reads (pybridge generates Python's copy).
const (
	HeadOffset     = 0
	TailOffset     = 64
	WakeOffset     = 128
	ClosedOffset   = 192
	CapacityOffset = 256
	LogOffset      = 320
	EntriesOffset  = 512
	CompletionSize = 32
)

// Completion's size is CompletionSize: either array length below is negative otherwise.
var (
	_ [CompletionSize - unsafe.Sizeof(Completion{})]byte
	_ [unsafe.Sizeof(Completion{}) - CompletionSize]byte
)

// Completion is one finished operation, as the consumer reads it.
type Completion struct {
	ID     uint64 // the request id, or an event id (see core)
	Status int64  // a UCS status: 0 is success
	Length uint64 // bytes transferred, or an event's value
	Tag    uint64 // the sender's tag of a tag receive
}

// WaitResult says why Wait returned.
type WaitResult int

const (
	Timeout WaitResult = iota // nothing arrived within the timeout
	Ready                     // completions may be waiting in the ring
	Closed                    // the queue was closed; drain it one last time
)

// Queue is the ring and its eventfd. Push and Notify belong to one producer goroutine;
// Pop to one consumer (or the consumer reads the ring in place); Wait, ConsumeWake and
// Close may be called from any goroutine, also while Free runs: Free wakes a Wait and
// unmaps the ring once none of them is reading it.
type Queue struct {
	mem     []byte
	head    *uint64
	tail    *uint64
	wake    *uint32
	closed  *uint32
	entries []Completion
	mask    uint64
	efd     EventFD
	epfd    int
	freed   atomic.Bool
	// reading is held shared by Wait, ConsumeWake and Close while they read the ring
	// or the file descriptors, and by Free alone while it releases them.
	reading  sync.RWMutex
	producer atomic.Int32 // race tripwire: Push is for one goroutine at a time
}

// ErrClosed is returned by Wait after the queue was freed, and by a second Close.
var ErrClosed = fmt.Errorf("notifier: queue closed: %w", os.ErrClosed)

// New maps a ring of capacity entries (rounded up to a power of two, at least 2)
// and creates its eventfd (non-blocking, so an event loop can read it too).
func New(capacity int) (q *Queue, err error) {
	if capacity < 2 {
		capacity = 2
	}
	c := 1
	for c < capacity {
		c <<= 1
	}
	size := EntriesOffset + c*CompletionSize
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("notifier: mmap ring: %w", err)
	}
	defer func() {
		if err != nil {
			syscall.Munmap(mem)
		}
	}()
	efd, err := NewEventFD()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			efd.Close()
		}
	}()
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("notifier: epoll create: %w", err)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(efd)}
	if err = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(efd), &ev); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("notifier: epoll add: %w", err)
	}
	base := unsafe.Pointer(&mem[0])
	q = &Queue{
		mem:     mem,
		head:    (*uint64)(unsafe.Add(base, HeadOffset)),
		tail:    (*uint64)(unsafe.Add(base, TailOffset)),
		wake:    (*uint32)(unsafe.Add(base, WakeOffset)),
		closed:  (*uint32)(unsafe.Add(base, ClosedOffset)),
		entries: unsafe.Slice((*Completion)(unsafe.Add(base, EntriesOffset)), c),
		mask:    uint64(c - 1),
		efd:     efd,
		epfd:    epfd,
	}
	*(*uint64)(unsafe.Add(base, CapacityOffset)) = uint64(c)
	return q, nil
}

// Address is where the ring starts, for a consumer that reads it in place.
func (q *Queue) Address() uintptr { return uintptr(unsafe.Pointer(&q.mem[0])) }

// Size is the ring's size in bytes, header included.
func (q *Queue) Size() int { return len(q.mem) }

// LogFlag is the ring's log word (LogOffset), for a producer that has log records: it
// sets it to 1, and the consumer, seeing it, asks for them.
func (q *Queue) LogFlag() *uint32 { return (*uint32)(unsafe.Pointer(&q.mem[LogOffset])) }

// FD is the eventfd that becomes readable when a wake-up is pending.
func (q *Queue) FD() int { return int(q.efd) }

// Capacity is the number of entries the ring holds.
func (q *Queue) Capacity() int { return len(q.entries) }

// Push appends as many of batch as fit and returns how many it wrote. It does not
// wake the consumer: call Notify once after the pushes of one pass.
func (q *Queue) Push(batch []Completion) int {
	if q.producer.Add(1) != 1 {
		panic("notifier: concurrent Push")
	}
	defer q.producer.Add(-1)
	head := atomic.LoadUint64(q.head)
	free := uint64(len(q.entries)) - (head - atomic.LoadUint64(q.tail))
	n := uint64(len(batch))
	if n > free {
		n = free
	}
	for i := uint64(0); i < n; i++ {
		q.entries[(head+i)&q.mask] = batch[i]
	}
	// The store of head publishes the entries (a release store on every platform Go
	// supports; on amd64 a plain store already is one).
	atomic.StoreUint64(q.head, head+n)
	return int(n)
}

// Pending reports how many entries are written but not yet read.
func (q *Queue) Pending() int { return int(atomic.LoadUint64(q.head) - atomic.LoadUint64(q.tail)) }

// Notify wakes the consumer if entries are pending and no wake-up is already on its
// way. Many Notify calls before the consumer runs cost one eventfd write.
func (q *Queue) Notify() {
	if q.Pending() == 0 {
		return
	}
	if atomic.CompareAndSwapUint32(q.wake, 0, 1) {
		q.kick()
	}
}

// kick wakes the consumer.
func (q *Queue) kick() { q.efd.Signal() }

// Pop moves up to len(dst) entries into dst and returns how many, for a consumer in Go.
func (q *Queue) Pop(dst []Completion) int {
	tail := atomic.LoadUint64(q.tail)
	n := atomic.LoadUint64(q.head) - tail
	if n > uint64(len(dst)) {
		n = uint64(len(dst))
	}
	for i := uint64(0); i < n; i++ {
		dst[i] = q.entries[(tail+i)&q.mask]
	}
	atomic.StoreUint64(q.tail, tail+n)
	return int(n)
}

// Wait blocks until a wake-up is pending, the queue is closed, or timeout passes (a
// negative timeout waits forever). On Ready it has consumed the wake-up: the caller
// must then drain the ring. It blocks in the kernel, so a caller that released the
// GIL lets Python run meanwhile.
//
// Errors: ErrClosed after Free; a wrapped errno from epoll_wait otherwise.
func (q *Queue) Wait(timeout time.Duration) (WaitResult, error) {
	q.reading.RLock()
	defer q.reading.RUnlock()
	if q.freed.Load() {
		return Closed, ErrClosed
	}
	if atomic.LoadUint32(q.closed) != 0 {
		return Closed, nil
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	var events [1]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(q.epfd, events[:], ms)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return Timeout, fmt.Errorf("notifier: epoll wait: %w", err)
		}
		if q.freed.Load() { // Free woke us, and waits for us to leave
			return Closed, ErrClosed
		}
		if atomic.LoadUint32(q.closed) != 0 {
			return Closed, nil
		}
		if n == 0 {
			return Timeout, nil
		}
		q.efd.Drain()
		if q.freed.Load() {
			q.kick() // the drain may have taken Free's kick from another waiter
			return Closed, ErrClosed
		}
		// A swap, not a plain store: it orders the clear before the caller's load of head.
		atomic.SwapUint32(q.wake, 0)
		return Ready, nil
	}
}

// ConsumeWake empties the eventfd and clears the pending wake-up, in the order the
// protocol needs, for a consumer that watches FD() itself (an event loop). It reports
// whether a wake-up was pending. Call it before draining.
func (q *Queue) ConsumeWake() bool {
	q.reading.RLock()
	defer q.reading.RUnlock()
	if q.freed.Load() {
		return false
	}
	pending := q.efd.Drain()
	if q.freed.Load() {
		q.kick() // the drain may have taken Free's kick from a waiter
		return false
	}
	// A swap, not a plain store: it orders the clear before the caller's load of head.
	atomic.SwapUint32(q.wake, 0)
	return pending
}

// Close marks the queue closed and wakes every waiter; entries already pushed stay
// readable. A second Close returns ErrClosed.
func (q *Queue) Close() error {
	q.reading.RLock()
	defer q.reading.RUnlock()
	if q.freed.Load() {
		return ErrClosed
	}
	if !atomic.CompareAndSwapUint32(q.closed, 0, 1) {
		return ErrClosed
	}
	q.kick()
	return nil
}

// Free releases the ring and the eventfd. A Wait in progress wakes and returns
// ErrClosed; Free returns once it has left, and Wait, ConsumeWake and Close are safe
// after it. Nobody may read the ring in place (Address, Pop) after Free: call it once
// that consumer has stopped.
func (q *Queue) Free() {
	if !q.freed.CompareAndSwap(false, true) {
		return
	}
	q.kick()
	q.reading.Lock()
	defer q.reading.Unlock()
	atomic.CompareAndSwapUint32(q.closed, 0, 1)
	syscall.Close(q.epfd)
	q.efd.Close()
	syscall.Munmap(q.mem)
}
