package executor

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A segment is a file in /dev/shm that one rank creates and the ranks of its host
// map: the words peers signal (semaphore counters, call slots) and the scratch
// buffer peers write into. The creator unlinks the file once every peer has mapped
// it, so nothing is left behind when processes die; the memory lives while anyone
// maps it.

const (
	shmDir    = "/dev/shm"
	shmPrefix = "ucxxgo-"
	// maxSegmentName bounds the name a peer announces.
	maxSegmentName = 64
	// slotBytes is the room of one shared word (a cache line, so that words peers
	// write do not share lines).
	slotBytes = 64
	pageBytes = 4096
)

// segment is a mapping of a segment file: our own (created) or a peer's (opened).
type segment struct {
	name string
	mem  []byte
	own  bool
	// linked: the file is still in /dev/shm (ours only).
	linked bool
}

// createSegment creates and maps a segment of size bytes (zeroed), readable and
// writable by this user only.
func createSegment(size uint64) (*segment, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("executor: segment name: %w", err)
	}
	name := fmt.Sprintf("%s%d-%s", shmPrefix, os.Getpid(), hex.EncodeToString(r[:]))
	path := shmDir + "/" + name
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("executor: create %s: %w", path, err)
	}
	defer syscall.Close(fd)
	if err := syscall.Ftruncate(fd, int64(size)); err != nil {
		syscall.Unlink(path)
		return nil, fmt.Errorf("executor: size %s to %d bytes: %w", path, size, err)
	}
	mem, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		syscall.Unlink(path)
		return nil, fmt.Errorf("executor: map %s: %w", path, err)
	}
	return &segment{name: name, mem: mem, own: true, linked: true}, nil
}

// validSegmentName reports whether a name a peer announced is one createSegment
// makes: no path, no surprises.
func validSegmentName(name string) bool {
	if len(name) <= len(shmPrefix) || len(name) > maxSegmentName || !strings.HasPrefix(name, shmPrefix) {
		return false
	}
	for _, c := range name[len(shmPrefix):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// openSegment maps a peer's segment, which must be a regular file of this user of
// exactly size bytes.
func openSegment(name string, size uint64) (*segment, error) {
	if !validSegmentName(name) {
		return nil, fmt.Errorf("executor: a peer announced segment %q: %w", name, ErrPeerProtocol)
	}
	path := shmDir + "/" + name
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("executor: open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("executor: stat %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != os.Getuid() || uint64(st.Size) != size {
		return nil, fmt.Errorf("executor: segment %s is not a %d-byte file of this user: %w", path, size, ErrPeerProtocol)
	}
	mem, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("executor: map %s: %w", path, err)
	}
	return &segment{name: name, mem: mem}, nil
}

// unlink removes our segment's file (its mappings stay).
func (s *segment) unlink() {
	if s.own && s.linked {
		syscall.Unlink(shmDir + "/" + s.name)
		s.linked = false
	}
}

// close unmaps the segment (and unlinks it if ours and still linked).
func (s *segment) close() {
	if s == nil || s.mem == nil {
		return
	}
	s.unlink()
	syscall.Munmap(s.mem)
	s.mem = nil
}

// base is the mapping's address in this process.
func (s *segment) base() uintptr { return uintptr(unsafe.Pointer(&s.mem[0])) }

// word returns the shared word at off (a multiple of slotBytes).
func (s *segment) word(off uint64) sharedWord {
	return sharedWord{v: (*uint64)(unsafe.Pointer(&s.mem[off])), waiters: (*uint32)(unsafe.Pointer(&s.mem[off+8]))}
}

// u64 returns the plain 8-byte field at off.
func (s *segment) u64(off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

// sharedWord is a 64-bit value in a segment that other processes change, with a
// count of the processes sleeping on it (futex on its low half).
type sharedWord struct {
	v       *uint64
	waiters *uint32
}

func (w sharedWord) load() uint64 { return atomic.LoadUint64(w.v) }

// add adds n and wakes the sleepers. The add is a full barrier: every store before
// it is visible to whoever sees the new value.
func (w sharedWord) add(n uint64) {
	atomic.AddUint64(w.v, n)
	if atomic.LoadUint32(w.waiters) != 0 {
		futexWake(uintptr(unsafe.Pointer(w.v)))
	}
}

// store sets the value and wakes the sleepers (a full barrier, as add).
func (w sharedWord) store(v uint64) {
	atomic.StoreUint64(w.v, v)
	if atomic.LoadUint32(w.waiters) != 0 {
		futexWake(uintptr(unsafe.Pointer(w.v)))
	}
}

// roundUp rounds v up to a multiple of a (a power of two).
func roundUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }
