package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Bootstrap: rank 0 listens at the root address; every other rank connects, sends a
// hello (its rank, the world size, the CPUs it may use and its engine's worker
// address); once all have, rank 0 sends each the table of everyone's worker address
// with the fewest CPUs any rank may use, and every rank makes an endpoint to every
// other from those addresses (no listener per rank). Records are little-endian:
//
//	hello: magic u32, version u16, cpus u16, rank u32, size u32, address length u32, nonce [32]u8, mac [32]u8, address
//	table: magic u32, version u16, status u16, size u32, cpus u32, mac [32]u8, then per rank: length u32, address
//
// A table with status other than 0 tells the ranks that bootstrap failed (a duplicate
// rank, sizes that disagree): every rank then fails with ErrBootstrap.
//
// Both records are authenticated by the world's secret (Options.Secret, the key of
// an HMAC-SHA256; worldkey.go): a hello's MAC covers the hello, whose nonce the rank
// draws afresh; the table the root sends a rank covers the table and that rank's
// nonce. The root drops a connection whose hello's MAC is wrong, as not one of ours
// (it does not count and fails nobody); a rank refuses a table whose MAC is wrong. So
// the secret never travels; a process that holds the root's port before the root
// cannot answer a rank's fresh nonce, and a hello read off the network cannot be
// replayed for another address. With no secret the MACs are public values: any engine
// that reaches the root may join.

const (
	bootstrapMagic   = 0x54425855 // "UXBT"
	bootstrapVersion = 4
	helloNonceAt     = 20 // the nonce's offset in a hello, after its fixed words
	helloMACAt       = helloNonceAt + nonceBytes
	tableMACAt       = 16 // the MAC's offset in a table, after its fixed words
	helloHeader      = helloMACAt + macBytes
	tableHeader      = tableMACAt + macBytes
	// maxCPUs bounds the CPUs a rank announces.
	maxCPUs = 1<<16 - 1
	// MaxRanks bounds a communicator's size.
	MaxRanks = 4096
	// maxWorkerAddress bounds a worker address a peer announces.
	maxWorkerAddress = 16 << 10
	// maxPendingHellos bounds the root's accepted connections whose hello has not
	// come (each holds a receive of a hello's most bytes).
	maxPendingHellos = 64
	tagHello         = 1
	tagTable         = 2
)

// Errors of bootstrap.
var (
	// ErrBootstrap: the ranks could not form a communicator (a record malformed, a
	// duplicate rank, sizes that disagree).
	ErrBootstrap = errors.New("collective: bootstrap failed")
	// ErrTimeout: a step did not complete within the communicator's timeout.
	ErrTimeout = errors.New("collective: timed out")
)

// bootstrapStatus is a table's status: why bootstrap failed.
const (
	tableOK            = 0
	tableDuplicateRank = 1
	tableSizeMismatch  = 2
)

// peers is the result of bootstrap: an endpoint to every other rank (0 at rank),
// and the fewest CPUs a rank may use.
type peers struct {
	eps  []uint64
	cpus int
	// sendIDs and recvIDs: the endpoint ids (tag bits) of this rank's messages to
	// each rank and of each rank's messages to this one (tagids.go).
	sendIDs, recvIDs []uint64
}

// hello is what a rank tells the root.
type hello struct {
	rank, size int
	// cpus is how many CPUs the rank may use (runtime.NumCPU: its affinity), 1..maxCPUs.
	cpus  int
	addr  []byte
	nonce nonce // drawn afresh by the rank (newNonce): the root's table answers it
}

// ownCPUs is how many CPUs this process may use (its affinity), as a hello says it.
func ownCPUs() int { return min(runtime.NumCPU(), maxCPUs) }

// encodeHello writes h with its MAC under k.
func encodeHello(h hello, k worldKey) []byte {
	rank, size, addr := h.rank, h.size, h.addr
	b := make([]byte, helloHeader+len(addr))
	binary.LittleEndian.PutUint32(b, bootstrapMagic)
	binary.LittleEndian.PutUint16(b[4:], bootstrapVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(min(max(h.cpus, 1), maxCPUs)))
	binary.LittleEndian.PutUint32(b[8:], uint32(rank))
	binary.LittleEndian.PutUint32(b[12:], uint32(size))
	binary.LittleEndian.PutUint32(b[16:], uint32(len(addr)))
	copy(b[helloNonceAt:helloMACAt], h.nonce[:])
	copy(b[helloHeader:], addr)
	k.sealHello(b)
	return b
}

// decodeHello reads a hello; untrusted. It does not check the MAC (worldKey.checkHello).
func decodeHello(b []byte) (hello, error) {
	if len(b) < helloHeader || binary.LittleEndian.Uint32(b) != bootstrapMagic || binary.LittleEndian.Uint16(b[4:]) != bootstrapVersion {
		return hello{}, fmt.Errorf("%w: not a hello", ErrBootstrap)
	}
	r, s, n := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:])
	cpus := binary.LittleEndian.Uint16(b[6:])
	if s < 2 || s > MaxRanks || r == 0 || r >= s || n == 0 || n > maxWorkerAddress || int(n) != len(b)-helloHeader || cpus == 0 {
		return hello{}, fmt.Errorf("%w: hello of rank %d of %d with %d CPUs and a %d-byte address in %d bytes", ErrBootstrap, r, s, cpus, n, len(b))
	}
	h := hello{rank: int(r), size: int(s), cpus: int(cpus), addr: b[helloHeader:]}
	copy(h.nonce[:], b[helloNonceAt:helloMACAt])
	return h, nil
}

// encodeTable writes the table: status, the fewest CPUs a rank may use, every rank's
// address; its MAC is left zero (worldKey.sealTable writes it for each rank).
func encodeTable(status, cpus int, addrs [][]byte) []byte {
	n := tableHeader
	for _, a := range addrs {
		n += 4 + len(a)
	}
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, bootstrapMagic)
	binary.LittleEndian.PutUint16(b[4:], bootstrapVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(status))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(addrs)))
	binary.LittleEndian.PutUint32(b[12:], uint32(min(max(cpus, 1), maxCPUs)))
	off := tableHeader
	for _, a := range addrs {
		binary.LittleEndian.PutUint32(b[off:], uint32(len(a)))
		copy(b[off+4:], a)
		off += 4 + len(a)
	}
	return b
}

// decodeTable reads the table a rank of a world of size gets (the addresses and the
// fewest CPUs a rank may use); untrusted. It does not check the MAC
// (worldKey.checkTable).
func decodeTable(b []byte, size int) (addrs [][]byte, cpus int, err error) {
	if len(b) < tableHeader || binary.LittleEndian.Uint32(b) != bootstrapMagic || binary.LittleEndian.Uint16(b[4:]) != bootstrapVersion {
		return nil, 0, fmt.Errorf("%w: not a table", ErrBootstrap)
	}
	switch st := binary.LittleEndian.Uint16(b[6:]); st {
	case tableOK:
	case tableDuplicateRank:
		return nil, 0, fmt.Errorf("%w: two processes claimed one rank", ErrBootstrap)
	case tableSizeMismatch:
		return nil, 0, fmt.Errorf("%w: the ranks disagree on the world size", ErrBootstrap)
	default:
		return nil, 0, fmt.Errorf("%w: the root failed (status %d)", ErrBootstrap, st)
	}
	if int(binary.LittleEndian.Uint32(b[8:])) != size {
		return nil, 0, fmt.Errorf("%w: a table of %d ranks for a world of %d", ErrBootstrap, binary.LittleEndian.Uint32(b[8:]), size)
	}
	cpus = int(binary.LittleEndian.Uint32(b[12:]))
	if cpus < 1 || cpus > maxCPUs {
		return nil, 0, fmt.Errorf("%w: a table of %d CPUs", ErrBootstrap, cpus)
	}
	addrs = make([][]byte, size)
	off := tableHeader
	for i := range addrs {
		if off+4 > len(b) {
			return nil, 0, fmt.Errorf("%w: the table ends at rank %d", ErrBootstrap, i)
		}
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 || n > maxWorkerAddress || off+4+n > len(b) {
			return nil, 0, fmt.Errorf("%w: rank %d's address of %d bytes", ErrBootstrap, i, n)
		}
		addrs[i] = b[off+4 : off+4+n]
		off += 4 + n
	}
	if off != len(b) {
		return nil, 0, fmt.Errorf("%w: %d bytes after the table", ErrBootstrap, len(b)-off)
	}
	return addrs, cpus, nil
}

// tableBytes bounds the table a rank receives for a world of size.
func tableBytes(size int) uint64 { return uint64(tableHeader + size*(4+maxWorkerAddress)) }

// ptr is b's address for the engine. The address does not keep b alive: a request
// given it must hold b (completionReader.hold) until its completion.
func ptr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// send sends b on ep with the user tag tag and waits for the send to end.
func send(e *core.Engine, r *completionReader, ep uint64, tag uint64, b []byte, deadline time.Time) error {
	info, err := e.EndpointInfo(ep)
	if err != nil {
		return err
	}
	return sendTagged(e, r, ep, info.SendTag|tag, b, deadline)
}

// sendTagged sends b on ep with the whole tag tag and waits for the send to end.
func sendTagged(e *core.Engine, r *completionReader, ep uint64, tag uint64, b []byte, deadline time.Time) error {
	id, err := e.TagSend(ep, ptr(b), uint64(len(b)), tag, ucxx.MemoryHost, 0)
	if err != nil {
		return err
	}
	r.hold(id, b)
	c, err := r.wait(id, deadline)
	if err != nil {
		return err
	}
	return ucxx.Status(c.Status).Err("bootstrap send")
}

// postRecv posts a receive into b on ep with the user tag tag and returns its id.
func postRecv(e *core.Engine, r *completionReader, ep uint64, tag uint64, b []byte) (uint64, error) {
	info, err := e.EndpointInfo(ep)
	if err != nil {
		return 0, err
	}
	return postRecvTagged(e, r, ep, info.RecvTag|tag, b)
}

// postRecvTagged posts a receive into b on ep of the whole tag tag and returns its id.
func postRecvTagged(e *core.Engine, r *completionReader, ep uint64, tag uint64, b []byte) (uint64, error) {
	id, err := e.TagRecv(ep, ptr(b), uint64(len(b)), tag, ^uint64(0), ucxx.MemoryHost, 0)
	if err != nil {
		return 0, err
	}
	r.hold(id, b)
	return id, nil
}

// recv receives into b on ep with the user tag tag and returns the bytes received.
func recv(e *core.Engine, r *completionReader, ep uint64, tag uint64, b []byte, deadline time.Time) ([]byte, error) {
	info, err := e.EndpointInfo(ep)
	if err != nil {
		return nil, err
	}
	return recvTagged(e, r, ep, info.RecvTag|tag, b, deadline)
}

// recvTagged receives into b on ep a message of the whole tag tag and returns the
// bytes received.
func recvTagged(e *core.Engine, r *completionReader, ep uint64, tag uint64, b []byte, deadline time.Time) ([]byte, error) {
	id, err := postRecvTagged(e, r, ep, tag, b)
	if err != nil {
		return nil, err
	}
	c, err := r.wait(id, deadline)
	if err != nil {
		e.Cancel(id)
		r.wait(id, time.Now().Add(time.Second))
		return nil, err
	}
	if err := ucxx.Status(c.Status).Err("bootstrap receive"); err != nil {
		return nil, err
	}
	return b[:c.Length], nil
}

// bootstrap forms the world: rank 0 at root ("host:port") gathers and scatters the
// worker addresses; then every rank connects to every other.
func bootstrap(e *core.Engine, r *completionReader, rank, size int, root string, secret []byte, timeout time.Duration) (*peers, error) {
	if size < 1 || size > MaxRanks || rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBootstrap, rank, size)
	}
	self, err := e.WorkerAddress()
	if err != nil {
		return nil, err
	}
	cpus := ownCPUs()
	if size == 1 {
		return &peers{eps: []uint64{0}, cpus: cpus, sendIDs: []uint64{0}, recvIDs: []uint64{0}}, nil
	}
	host, portText, err := net.SplitHostPort(root)
	if err != nil {
		return nil, fmt.Errorf("%w: root address %q: %v", ErrBootstrap, root, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("%w: root port %q", ErrBootstrap, portText)
	}
	deadline := time.Now().Add(timeout)
	me := hello{rank: rank, size: size, cpus: cpus, addr: self, nonce: newNonce()}
	key := worldKey(secret)
	var p *peers
	if rank == 0 {
		eps, cpus, err := gather(e, r, host, port, me, key, deadline)
		if err != nil {
			return nil, err
		}
		p = &peers{eps: eps, cpus: cpus}
	} else {
		addrs, cpus, err := join(e, r, host, port, me, key, deadline)
		if err != nil {
			return nil, err
		}
		if p, err = connectRanks(e, addrs, rank, cpus); err != nil {
			return nil, err
		}
	}
	if err := exchangeTagIDs(e, r, p, rank, deadline); err != nil {
		return nil, err
	}
	return p, nil
}

// rankEndpoint is how a rank's endpoint to another is made: from its worker address,
// with a receive tag of its own (tagids.go).
var rankEndpoint = core.EndpointOptions{OwnTag: true}

// connectRanks makes an endpoint to every rank but me from their addresses.
func connectRanks(e *core.Engine, addrs [][]byte, me, cpus int) (*peers, error) {
	p := &peers{eps: make([]uint64, len(addrs)), cpus: cpus}
	for i, a := range addrs {
		if i == me {
			continue
		}
		var err error
		if p.eps[i], err = e.ConnectAddressWith(a, rankEndpoint); err != nil {
			return nil, fmt.Errorf("collective: connect to rank %d: %w", i, err)
		}
	}
	return p, nil
}

// gather is rank 0's part (me): accept size-1 ranks' hellos, answer with the table,
// and return an endpoint to every rank (0 at its own) and the fewest CPUs a rank may
// use. The root connects to each rank's address as its hello comes, so that only
// addresses UCX takes go into the table: a connection whose hello is malformed, or
// whose address UCX refuses, is dropped and does not count; so is one whose hello's
// MAC under k is wrong.
func gather(e *core.Engine, r *completionReader, host string, port int, me hello, k worldKey, deadline time.Time) (eps []uint64, cpus int, err error) {
	size, self := me.size, me.addr
	cpus = me.cpus
	lh, _, err := e.Listen(host, port)
	if err != nil {
		return nil, 0, fmt.Errorf("collective: listen at the root %s:%d: %w", host, port, err)
	}
	defer e.CloseListener(lh)
	addrs := make([][]byte, size)
	addrs[0] = self
	eps = make([]uint64, size)
	defer func() {
		if err != nil {
			for _, ep := range eps {
				if ep != 0 {
					e.AbortEndpoint(ep)
				}
			}
		}
	}()
	byRank := make([]uint64, size)
	type joinedRank struct {
		ep    uint64
		nonce nonce
	}
	var joined []joinedRank
	status := tableOK
	// Every accepted connection's hello is awaited at once, so that one that says
	// nothing holds up none of the others; at most maxPendingHellos wait, the oldest
	// dropped for a newer one. Hellos that came are taken before new connections, so
	// that a burst of connections drops only ones that have said nothing yet.
	type pendingHello struct {
		ep  uint64
		buf []byte
	}
	pending := make(map[uint64]pendingHello) // by receive id
	var order []uint64                       // their receive ids, oldest first
	forget := func(id uint64) pendingHello {
		p := pending[id]
		delete(pending, id)
		order = slices.DeleteFunc(order, func(x uint64) bool { return x == id })
		return p
	}
	drop := func(id uint64) {
		p := forget(id)
		e.Cancel(id)
		r.forget(id)
		e.AbortEndpoint(p.ep)
	}
	defer func() {
		for id := range pending {
			drop(id)
		}
	}()
	accepted := core.EventListenerAccept | lh
	var ids []uint64
	for have := 1; have < size && status == tableOK; {
		ids = append(append(ids[:0], order...), accepted)
		c, err := r.waitAny(ids, deadline)
		if err != nil {
			return nil, 0, err
		}
		if c.ID == accepted {
			if len(order) == maxPendingHellos {
				drop(order[0])
			}
			ep, buf := c.Length, make([]byte, helloHeader+maxWorkerAddress)
			id, err := postRecv(e, r, ep, tagHello, buf)
			if err != nil {
				e.AbortEndpoint(ep)
				continue
			}
			pending[id] = pendingHello{ep: ep, buf: buf}
			order = append(order, id)
			continue
		}
		p := forget(c.ID)
		ep := p.ep
		var h hello
		err = ucxx.Status(c.Status).Err("bootstrap receive")
		if err == nil {
			h, err = decodeHello(p.buf[:c.Length])
		}
		rk, sz, addr := h.rank, h.size, h.addr
		if err == nil {
			err = k.checkHello(p.buf[:c.Length])
		}
		if err != nil {
			e.AbortEndpoint(ep) // not one of ours: it does not count
			continue
		}
		var peer uint64
		if sz == size && byRank[rk] == 0 {
			if peer, err = e.ConnectAddressWith(addr, rankEndpoint); err != nil {
				e.AbortEndpoint(ep) // an address UCX cannot take: not one of ours
				continue
			}
		}
		joined = append(joined, joinedRank{ep, h.nonce})
		switch {
		case sz != size:
			status = tableSizeMismatch
		case byRank[rk] != 0:
			status = tableDuplicateRank
		default:
			byRank[rk], addrs[rk], eps[rk] = ep, append([]byte(nil), addr...), peer
			cpus = min(cpus, h.cpus)
			have++
		}
	}
	table := encodeTable(status, cpus, addrs)
	if status != tableOK {
		table = encodeTable(status, cpus, nil)
	}
	// One table, sealed for each rank in turn: send returns once its send ended.
	digest := tableDigest(table)
	var errs []error
	for _, j := range joined {
		k.sealTable(table, digest, j.nonce)
		errs = append(errs, send(e, r, j.ep, tagTable, table, deadline))
	}
	if status != tableOK {
		// Close the ranks' connections gracefully (the table flushed first), so that
		// they read the refusal rather than a connection reset by the root's exit.
		for _, j := range joined {
			if id, err := e.CloseEndpoint(j.ep, time.Second); err == nil {
				r.wait(id, time.Now().Add(2*time.Second))
			}
		}
		_, _, err = decodeTable(table, 0)
		return nil, 0, err
	}
	if err = errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("collective: send the table: %w", err)
	}
	return eps, cpus, nil
}

// join is the part of every other rank: connect to the root, say hello, get the table
// (refused unless its MAC under k answers me's nonce).
func join(e *core.Engine, r *completionReader, host string, port int, me hello, k worldKey, deadline time.Time) ([][]byte, int, error) {
	rank, size, self := me.rank, me.size, me.addr
	var ep uint64
	for {
		id, err := e.Connect(host, port, time.Until(deadline))
		if err != nil {
			return nil, 0, err
		}
		c, err := r.wait(id, deadline)
		if err != nil {
			return nil, 0, err
		}
		if c.Status == 0 {
			ep = c.Length
			break
		}
		// The root may not listen yet: try again until the deadline.
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("collective: connect to the root %s:%d: %v: %w", host, port, ucxx.Status(c.Status), ErrTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer e.CloseEndpoint(ep, time.Second)
	if err := send(e, r, ep, tagHello, encodeHello(me, k), deadline); err != nil {
		return nil, 0, err
	}
	msg, err := recv(e, r, ep, tagTable, make([]byte, tableBytes(size)), deadline)
	var ue *ucxx.Error
	if errors.As(err, &ue) {
		// The root went away without a table for us: it refused the world.
		return nil, 0, fmt.Errorf("%w: the root closed the connection before sending the table: %w", ErrBootstrap, err)
	}
	if err != nil {
		return nil, 0, err
	}
	if err := k.checkTable(msg, me.nonce); err != nil {
		return nil, 0, err
	}
	addrs, cpus, err := decodeTable(msg, size)
	if err != nil {
		return nil, 0, err
	}
	if string(addrs[rank]) != string(self) {
		return nil, 0, fmt.Errorf("%w: the table gives rank %d another address", ErrBootstrap, rank)
	}
	return addrs, cpus, nil
}
