package core

import (
	"fmt"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Remote keys: a peer's packed key (packedkey.go) unpacked on the endpoint to that
// peer, naming a range of its memory (a region) or one of its semaphores. Every
// operation on one is bounded by the range the key names. A key lives until the
// application releases it or its endpoint closes.

// remoteKey is an unpacked packed key.
type remoteKey struct {
	id     uint64
	ep     *endpoint
	kind   keyKind
	mem    uint8
	addr   uint64 // the range in the peer's address space
	length uint64
	key    *ucxx.RKey
	// signalled: for a semaphore, the total this side has signalled so far; each
	// signal writes the new total into the peer's counter (semaphores.go).
	signalled uint64
}

// rkeyReadSlack is readable zeroed memory after an unpacked key's bytes: UCX reads a
// packed remote key without knowing its length, so a short one from a peer must not
// send it past the end of our copy. It covers UCX's largest key (a byte of size per
// memory domain, 64 domains).
const rkeyReadSlack = 64 << 10

// RemoteKeyInfo describes an unpacked key.
type RemoteKeyInfo struct {
	ID        uint64
	Semaphore bool   // a semaphore's key, not a region's
	MemType   uint8  // MemHost or MemCUDA
	Address   uint64 // the range in the peer's address space
	Length    uint64
}

// UnpackKey unpacks a packed key from the peer of endpoint ep: n bytes at addr, read
// during the call. The endpoint must be connected (its handshake done).
//
// Errors: ErrOneSidedOff, ErrEngineClosed, ErrEndpointClosed, the endpoint's failure,
// ErrBadKey (a malformed key, or one UCX refuses).
func (e *Engine) UnpackKey(ep uint64, addr uintptr, n int) (info RemoteKeyInfo, err error) {
	if err := e.oneSided("UnpackKey"); err != nil {
		return info, err
	}
	if n < packedKeyHeader || n > MaxPackedKey || addr == 0 {
		return info, fmt.Errorf("UnpackKey: %w", ErrBadKey)
	}
	raw := make([]byte, n)
	ucxx.CopyFrom(raw, addr)
	k, err := parsePackedKey(raw)
	if err != nil {
		return info, fmt.Errorf("UnpackKey: %w", err)
	}
	if ferr := e.onThread(func() { info, err = e.rma.unpack(ep, k) }); ferr != nil {
		return info, ferr
	}
	return info, err
}

// ReleaseKey destroys an unpacked key. Operations using it must have ended.
//
// Errors: ErrEngineClosed, ErrNoRemoteKey.
func (e *Engine) ReleaseKey(id uint64) (err error) {
	if ferr := e.onThread(func() { err = e.rma.releaseKey(id) }); ferr != nil {
		return ferr
	}
	return err
}

func (o *oneSided) unpack(h uint64, k packedKey) (RemoteKeyInfo, error) {
	ep := o.eps.get(h)
	if ep == nil || ep.phase != phaseReady || ep.u == nil {
		return RemoteKeyInfo{}, endpointError(ep)
	}
	// UCX reads the key from zero-padded C memory (see rkeyReadSlack).
	buf := ucxx.CAlloc(len(k.rkey) + rkeyReadSlack)
	defer ucxx.CFree(buf)
	copy(unsafe.Slice((*byte)(buf), len(k.rkey)), k.rkey)
	key, err := ep.u.UnpackRKey(buf)
	if err != nil {
		return RemoteKeyInfo{}, fmt.Errorf("UnpackKey: ucp_ep_rkey_unpack: %w", ErrBadKey)
	}
	r := &remoteKey{id: o.newID(), ep: ep, kind: k.kind, mem: k.memType, addr: k.addr, length: k.length, key: key}
	o.remotes[r.id] = r
	ep.remoteKeys++
	return RemoteKeyInfo{ID: r.id, Semaphore: k.kind == keySemaphore, MemType: k.memType, Address: k.addr, Length: k.length}, nil
}

func (o *oneSided) releaseKey(id uint64) error {
	r := o.remotes[id]
	if r == nil {
		return fmt.Errorf("ReleaseKey: %w", ErrNoRemoteKey)
	}
	o.destroyKey(r)
	return nil
}

func (o *oneSided) destroyKey(r *remoteKey) {
	delete(o.remotes, r.id)
	r.ep.remoteKeys--
	r.key.Destroy()
}

// endpointClosed destroys the keys unpacked on ep and frees its semaphores, once
// UCX closed it.
func (o *oneSided) endpointClosed(ep *endpoint) {
	for _, r := range o.remotes {
		if ep.remoteKeys == 0 {
			break
		}
		if r.ep == ep {
			o.destroyKey(r)
		}
	}
	for _, s := range o.sems {
		if ep.semaphores == 0 {
			break
		}
		if s.ep == ep {
			o.freeSemaphore(s, ucxx.StatusCanceled)
		}
	}
}

// endpointError is the error for work on an endpoint that is gone or not ready.
func endpointError(ep *endpoint) error {
	if ep == nil {
		return ErrEndpointClosed
	}
	if st := ucxx.Status(ep.failed.Load()); st != ucxx.StatusOK {
		return st.Err("endpoint")
	}
	return ErrEndpointClosed
}
