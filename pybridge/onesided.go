package pybridge

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ucxx-go/ucxx-go/core"
)

// One-sided transfers and semaphores (core/regions.go, remotekeys.go, rma.go,
// semaphores.go). Packed keys travel to and from Python hex-encoded; memory types are
// core's (core.MemHost, core.MemCUDA).

// oneSidedHint adds to an ErrOneSidedOff how a Python program turns one-sided
// transfers on. Deferred after guard, so that it runs first, on core's error
// (guard's makes it the bridge's status error).
func oneSidedHint(err *error) {
	if *err != nil && errors.Is(*err, core.ErrOneSidedOff) {
		*err = fmt.Errorf("%w; turn them on before ucxx_go's first call: ucxx_go.init(one_sided=True) or UCXGO_ONE_SIDED=1", *err)
	}
}

// RegisterMemory registers n bytes at addr (or takes a reference on a region that
// covers them) and returns the region's id.
func RegisterMemory(addr uintptr, n uint64, memType int) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.RegisterMemory(addr, n, uint8(memType))
}

// ReleaseMemory drops one reference on region id.
func ReleaseMemory(id uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.ReleaseMemory(id)
}

// PackRegion returns the packed key, hex-encoded, of n bytes at addr in region id.
func PackRegion(id uint64, addr uintptr, n uint64) (packed string, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	b, err := e.PackRegion(id, addr, n)
	return hex.EncodeToString(b), err
}

// UnpackKey unpacks a peer's packed key (n bytes at addr) on endpoint ep and returns
// "id kind memtype address length", kind being "region" or "semaphore".
func UnpackKey(ep uint64, addr uintptr, n int) (res string, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	info, err := e.UnpackKey(ep, addr, n)
	if err != nil {
		return "", err
	}
	kind := "region"
	if info.Semaphore {
		kind = "semaphore"
	}
	return fmt.Sprintf("%d %s %d %d %d", info.ID, kind, info.MemType, info.Address, info.Length), nil
}

// ReleaseKey destroys an unpacked key.
func ReleaseKey(id uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.ReleaseKey(id)
}

// Put writes n bytes at addr (memory type memType, in region, or 0) to offset of
// remote key key on endpoint ep; for CUDA memory after the work queued on stream.
// It returns the request id, or InlineDone|n when the put ended within the call (as
// TagSend). With wait 0 the call does not wait for the put to end (the caller has
// other work ready): the completion always comes through the queue.
func Put(ep uint64, key uint64, offset uint64, addr uintptr, n uint64, memType int, region uint64, stream uint64, wait int) (res uint64, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	return rma(ep, core.Transfer{Key: key, Offset: offset, Addr: addr, Size: n, MemType: uint8(memType), Region: region}, false, stream, wait != 0)
}

// Get reads into n bytes at addr from offset of remote key key; as Put.
func Get(ep uint64, key uint64, offset uint64, addr uintptr, n uint64, memType int, region uint64, stream uint64, wait int) (res uint64, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	return rma(ep, core.Transfer{Key: key, Offset: offset, Addr: addr, Size: n, MemType: uint8(memType), Region: region}, true, stream, wait != 0)
}

// rma is Put and Get.
func rma(ep uint64, t core.Transfer, get bool, stream uint64, wait bool) (uint64, error) {
	e, err := current()
	if err != nil {
		return 0, err
	}
	switch {
	case wait && get:
		return ticketResult(e.GetInline(ep, t, uintptr(stream)))
	case wait:
		return ticketResult(e.PutInline(ep, t, uintptr(stream)))
	case get:
		return queued(e.Get(ep, t, uintptr(stream)))
	default:
		return queued(e.Put(ep, t, uintptr(stream)))
	}
}

// PutMany writes count transfers (core.TransferDescriptorSize bytes each at desc, read
// during the call) on endpoint ep with one request.
func PutMany(ep uint64, desc uintptr, count int) (id uint64, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.PutMany(ep, desc, count)
}

// Flush returns the id of a request that completes once every one-sided operation
// issued on endpoint ep before it has completed at the peer.
func Flush(ep uint64) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.Flush(ep)
}

// NewSemaphore makes a semaphore on endpoint ep and returns its id.
func NewSemaphore(ep uint64) (id uint64, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.NewSemaphore(ep)
}

// PackSemaphore returns semaphore id's packed key, hex-encoded.
func PackSemaphore(id uint64) (packed string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	b, err := e.PackSemaphore(id)
	return hex.EncodeToString(b), err
}

// SemaphoreValue returns semaphore id's counter.
func SemaphoreValue(id uint64) (v uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.SemaphoreValue(id)
}

// WaitSemaphore returns the id of a request that completes once semaphore id's
// counter reaches value.
func WaitSemaphore(id uint64, value uint64) (rid uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.WaitSemaphore(id, value)
}

// Signal adds n to the peer's semaphore of remote key key on endpoint ep and returns
// the request id.
func Signal(ep uint64, key uint64, n uint64) (id uint64, err error) {
	defer guard(&err)
	defer oneSidedHint(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.Signal(ep, key, n)
}

// ReleaseSemaphore frees semaphore id.
func ReleaseSemaphore(id uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.ReleaseSemaphore(id)
}

// WaitSemaphoreOnStream queues on CUDA stream a wait until semaphore id's counter
// reaches value, in the calling thread's current context.
func WaitSemaphoreOnStream(id uint64, value uint64, stream uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.WaitSemaphoreOnStream(id, value, uintptr(stream))
}
