package core

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// One-sided transfers: put writes local memory into a range a remote key names, get
// reads it; the peer posts nothing. A transfer's completion means its local memory
// may be reused (a put) or holds the data (a get); Flush completes once every
// transfer issued before it on the endpoint has completed at the peer. Each transfer
// is checked against its key's range on the progress thread before anything moves.

// Transfer is one put or get: Size bytes of local memory at Addr (of memory type
// MemType, registered in Region, or 0 where it is not), and where they go in or come
// from the range of remote key Key: Offset bytes from its start.
type Transfer struct {
	Key     uint64
	Offset  uint64
	Addr    uintptr
	Size    uint64
	MemType uint8
	Region  uint64
}

// TransferDescriptorSize is the size of one Transfer in PutMany's array: its six
// fields in order, as little-endian u64 words.
const TransferDescriptorSize = 48

// rmaOp is one application transfer request: one or several transfers posted in one
// progress pass, completing once when the last ends, with the first failure's status.
type rmaOp struct {
	id        uint64
	get       bool
	transfers []Transfer
	remaining int
	status    ucxx.Status
	// A semaphore signal: the key, what it adds, and the new total it writes (C
	// memory, freed at the end).
	signalKey uint64
	signalBy  uint64
	operand   unsafe.Pointer
}

// Put writes t to its remote key's range on endpoint ep. For CUDA memory it starts
// once the work queued on stream before the call is done, as TagSend does.
//
// Errors: ErrOneSidedOff, ErrEngineClosed, ErrEndpointClosed, the endpoint's failure, CUDA errors.
// A transfer outside its key's range, or a key of another endpoint, completes with
// StatusInvalidParam before anything moves.
func (e *Engine) Put(ep uint64, t Transfer, stream uintptr) (uint64, error) {
	tk, err := e.transfer(ep, []Transfer{t}, false, stream, false, nil)
	return tk.ID, err
}

// Get reads t from its remote key's range on endpoint ep. Errors as Put.
func (e *Engine) Get(ep uint64, t Transfer, stream uintptr) (uint64, error) {
	tk, err := e.transfer(ep, []Transfer{t}, true, stream, false, nil)
	return tk.ID, err
}

// PutInline is Put, waiting up to Options.InlineWait for the put to end, as
// TagSendInline does: then the Ticket is Done and no completion is queued.
func (e *Engine) PutInline(ep uint64, t Transfer, stream uintptr) (Ticket, error) {
	return e.transfer(ep, []Transfer{t}, false, stream, true, nil)
}

// GetInline is Get, waiting as PutInline.
func (e *Engine) GetInline(ep uint64, t Transfer, stream uintptr) (Ticket, error) {
	return e.transfer(ep, []Transfer{t}, true, stream, true, nil)
}

// PutMany writes count transfers (TransferDescriptorSize bytes each at addr, read
// during the call) on endpoint ep, posted in one progress pass, with one completion.
//
// Errors: as Put, and ErrBadDescriptors.
func (e *Engine) PutMany(ep uint64, addr uintptr, count int) (uint64, error) {
	if count <= 0 || addr == 0 || count > 1<<20 {
		return 0, fmt.Errorf("PutMany: %w", ErrBadDescriptors)
	}
	raw := make([]byte, count*TransferDescriptorSize)
	ucxx.CopyFrom(raw, addr)
	ts := make([]Transfer, count)
	for i := range ts {
		w := raw[i*TransferDescriptorSize:]
		mem := binary.LittleEndian.Uint64(w[32:])
		if mem != uint64(MemHost) && mem != uint64(MemCUDA) {
			return 0, fmt.Errorf("PutMany: %w", ErrBadDescriptors)
		}
		ts[i] = Transfer{Key: binary.LittleEndian.Uint64(w), Offset: binary.LittleEndian.Uint64(w[8:]),
			Addr: uintptr(binary.LittleEndian.Uint64(w[16:])), Size: binary.LittleEndian.Uint64(w[24:]),
			MemType: uint8(mem), Region: binary.LittleEndian.Uint64(w[40:])}
	}
	tk, err := e.transfer(ep, ts, false, 0, false, nil)
	return tk.ID, err
}

func (e *Engine) transfer(ep uint64, ts []Transfer, get bool, stream uintptr, inline bool, sink *Sink) (Ticket, error) {
	if !e.opts.OneSided {
		name := "Put"
		if get {
			name = "Get"
		}
		return Ticket{}, e.oneSided(name)
	}
	live, err := e.eps.live(ep)
	if err != nil {
		return Ticket{}, err
	}
	op := &rmaOp{id: e.newID(), get: get, transfers: ts}
	s := submission{op: opRMA, id: op.id, ep: ep, rma: op, sink: sink}
	if len(ts) == 1 && ts[0].MemType == MemCUDA {
		s.addr, s.memType = ts[0].Addr, ucxx.MemoryCUDA
		if err := s.addCUDA(stream); err != nil {
			return Ticket{}, err
		}
	}
	return e.submitTransfer(s, live.sendBudget(inline))
}

// Flush completes once every one-sided operation issued on endpoint ep before it has
// completed at the peer.
//
// Errors: ErrEngineClosed, ErrEndpointClosed, the endpoint's failure.
func (e *Engine) Flush(ep uint64) (uint64, error) { return e.flushEndpoint(ep, nil) }

func (e *Engine) flushEndpoint(ep uint64, sink *Sink) (uint64, error) {
	if _, err := e.eps.live(ep); err != nil {
		return 0, err
	}
	id := e.newID()
	return id, e.submit(submission{op: opFlush, id: id, ep: ep, sink: sink})
}

// post issues op's transfers on endpoint s.ep, once every one passed resolve (nothing
// moves otherwise). Progress thread.
func (o *oneSided) post(s *submission) {
	op := s.rma
	ep := o.readyEndpoint(s)
	if ep == nil {
		return
	}
	for _, t := range op.transfers {
		if _, _, ok := o.resolve(ep, t); !ok {
			o.completeNow(op.id, ucxx.StatusInvalidParam, 0)
			return
		}
	}
	if len(op.transfers) == 1 {
		// One transfer is the application's request itself: its completion may go
		// straight back to a submitting call still waiting (s.slot).
		r := o.requests.add(op.id, opRMA, ep)
		r.slot = s.slot
		o.postTransfer(r, op.get, op.transfers[0])
		return
	}
	op.remaining = len(op.transfers)
	for _, t := range op.transfers {
		r := o.requests.add(o.newID(), opRMA, ep)
		r.internal, r.rma = stepRMAPart, op
		o.postTransfer(r, op.get, t)
	}
}

// resolve returns t's remote key and local registration (nil for memory not
// registered), or false when t does not fit its key's range, names a key that is not
// a region's of ep, or a local region that does not cover its memory.
func (o *oneSided) resolve(ep *endpoint, t Transfer) (*remoteKey, *ucxx.MemHandle, bool) {
	k := o.remotes[t.Key]
	if k == nil || k.ep != ep || k.kind != keyRegion || t.Size == 0 || t.Offset > k.length || t.Size > k.length-t.Offset {
		return nil, nil, false
	}
	if t.Region == 0 {
		return k, nil, true
	}
	r := o.regions[t.Region]
	if r == nil || !r.contains(t.Addr, t.Size, t.MemType) {
		return nil, nil, false
	}
	return k, r.mh, true
}

// postTransfer posts one put or get, which resolve accepted, as request r.
func (o *oneSided) postTransfer(r *request, get bool, t Transfer) {
	k, local, _ := o.resolve(r.ep, t)
	mem := ucsMemType(uint64(t.MemType))
	o.requests.markCUDA(r, mem)
	o.requests.markCUDA(r, ucsMemType(uint64(k.mem))) // the peer's CUDA memory too
	if get {
		r.track(r.ep.u.Get(t.Addr, t.Size, local, mem, k.addr+t.Offset, k.key, r.id))
	} else {
		r.track(r.ep.u.Put(t.Addr, t.Size, local, mem, k.addr+t.Offset, k.key, r.id))
	}
}

// onPart handles the end of one transfer of op.
func (o *oneSided) onPart(r *request, st ucxx.Status) {
	op := r.rma
	if st != ucxx.StatusOK && op.status == ucxx.StatusOK {
		op.status = st
	}
	if op.remaining--; op.remaining == 0 {
		o.completeNow(op.id, op.status, 0)
		o.finish(op)
	}
}

// finish releases what op holds: a semaphore signal's value.
func (o *oneSided) finish(op *rmaOp) {
	if op.operand != nil {
		ucxx.CFree(op.operand)
		op.operand = nil
	}
}

// flush posts a flush of endpoint s.ep.
func (o *oneSided) flush(s *submission) {
	ep := o.readyEndpoint(s)
	if ep == nil {
		return
	}
	r := o.requests.add(s.id, opFlush, ep)
	r.track(ep.u.Flush(s.id))
}
