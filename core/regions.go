package core

import (
	"fmt"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Registered memory (regions): memory a peer may read and write one-sidedly once it
// holds a packed key for a range of it. Registration is cached: registering memory
// that lies within a region already registered, of the same memory type, takes a
// reference on that region instead of registering again; the last reference
// unregisters it. The component belongs to the progress thread (ucp_mem_map and the
// rest run there: the context is not thread-safe); the exported calls run their work
// there and wait for it.

// region is one registration.
type region struct {
	id      uint64
	addr    uintptr
	length  uint64
	memType uint8
	mh      *ucxx.MemHandle
	refs    int
	rkey    []byte // UCX's packed remote key, packed once
}

func (r *region) contains(addr uintptr, length uint64, memType uint8) bool {
	return r.memType == memType && addr >= r.addr && uint64(addr-r.addr)+length <= r.length
}

// RegisterMemory registers length bytes at addr of memory type memType (MemHost or
// MemCUDA), or takes a reference on a region that already covers them, and returns
// the region's id. The caller keeps the memory allocated until it releases the
// reference.
//
// Errors: ErrEngineClosed, ErrBadRange, UCX's status for ucp_mem_map.
func (e *Engine) RegisterMemory(addr uintptr, length uint64, memType uint8) (id uint64, err error) {
	if length == 0 || uint64(addr)+length < uint64(addr) || (memType != MemHost && memType != MemCUDA) {
		return 0, fmt.Errorf("RegisterMemory: %w", ErrBadRange)
	}
	if memType == MemCUDA {
		if err := primeCUDA(addr, length); err != nil {
			return 0, fmt.Errorf("RegisterMemory: %w", err)
		}
	}
	if ferr := e.onThread(func() { id, err = e.rma.register(addr, length, memType) }); ferr != nil {
		return 0, ferr
	}
	return id, err
}

// ReleaseMemory drops one reference on region id; the last one unregisters it.
// Operations using it must have ended.
//
// Errors: ErrEngineClosed, ErrNoRegion.
func (e *Engine) ReleaseMemory(id uint64) (err error) {
	if ferr := e.onThread(func() { err = e.rma.release(id) }); ferr != nil {
		return ferr
	}
	return err
}

// PackRegion returns the packed key (packedkey.go) of length bytes at addr, which
// must lie within region id, for a peer to pass to UnpackKey.
//
// Errors: ErrOneSidedOff, ErrEngineClosed, ErrNoRegion, ErrBadRange, UCX's status for
// ucp_rkey_pack.
func (e *Engine) PackRegion(id uint64, addr uintptr, length uint64) (packed []byte, err error) {
	if err := e.oneSided("PackRegion"); err != nil {
		return nil, err
	}
	if ferr := e.onThread(func() { packed, err = e.rma.pack(id, addr, length) }); ferr != nil {
		return nil, ferr
	}
	return packed, err
}

// RegionCount is the number of regions registered, for tests of the cache.
func (e *Engine) RegionCount() (n int, err error) {
	err = e.onThread(func() { n = len(e.rma.regions) })
	return n, err
}

func (o *oneSided) register(addr uintptr, length uint64, memType uint8) (uint64, error) {
	if r := o.index.covering(addr, length, memType); r != nil {
		r.refs++
		return r.id, nil
	}
	mh, err := o.ctx.MemMap(addr, length, ucsMemType(uint64(memType)))
	if err != nil {
		return 0, err
	}
	r := &region{id: o.newID(), addr: addr, length: length, memType: memType, mh: mh, refs: 1}
	o.regions[r.id] = r
	o.index.add(r)
	return r.id, nil
}

func (o *oneSided) release(id uint64) error {
	r := o.regions[id]
	if r == nil {
		return fmt.Errorf("ReleaseMemory: %w", ErrNoRegion)
	}
	if r.refs--; r.refs > 0 {
		return nil
	}
	delete(o.regions, id)
	o.index.remove(r)
	return r.mh.Unmap()
}

func (o *oneSided) pack(id uint64, addr uintptr, length uint64) ([]byte, error) {
	r := o.regions[id]
	if r == nil {
		return nil, fmt.Errorf("PackRegion: %w", ErrNoRegion)
	}
	if length == 0 || !r.contains(addr, length, r.memType) {
		return nil, fmt.Errorf("PackRegion: %w", ErrBadRange)
	}
	return packKey(r.mh, &r.rkey, packedKey{kind: keyRegion, memType: r.memType, addr: uint64(addr), length: length})
}

// packKey returns k, with the remote key of registration mh (packed on first use into
// *rkey), in the packed format.
func packKey(mh *ucxx.MemHandle, rkey *[]byte, k packedKey) ([]byte, error) {
	if *rkey == nil {
		b, err := mh.PackRKey()
		if err != nil {
			return nil, err
		}
		*rkey = b
	}
	k.rkey = *rkey
	return appendPackedKey(nil, k), nil
}

// unmapAll unregisters every region (shutdown).
func (o *oneSided) unmapAll() {
	for id, r := range o.regions {
		r.mh.Unmap()
		delete(o.regions, id)
	}
	o.index = regionIndex{}
}
