package core

import (
	"encoding/binary"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The control channel: once the tag handshake is done, every endpoint with peer error
// handling keeps one 8-byte receive posted, and the two engines of a connection
// exchange control words on it: keepalives (keepalive.go), the goodbye of a graceful
// close (goodbye.go), and flow control's pings and pongs (flowcontrol.go). Through
// UCX's connection manager the words are stream messages, which travel on the lane
// that carries the tagged messages' eager data and rendezvous control; on a connection
// made from addresses (direct.go) they are tagged messages on the receiver's control
// tag, matched in the order sent. Either way a control word arrives after everything
// its sender sent before it. (UCX never ends a
// stream receive of an endpoint without error handling that it force-closes, and
// those endpoints are force-closed anyway.)

// controlSize is one control word.
const controlSize = 8

// controlWord is what a control message says.
type controlWord uint64

const (
	controlKeepalive  controlWord = 0x7563_7878_676f_6b61 // "ucxxgoka": I am alive
	controlGoodbye    controlWord = 0x7563_7878_676f_6279 // "ucxxgoby": I sent all I will send
	controlGoodbyeAck controlWord = 0x7563_7878_676f_6f6b // "ucxxgook": I have it all; close
	controlPing       controlWord = 0x7563_7878_676f_7069 // "ucxxgopi": a chunk of messages came before this
	controlPong       controlWord = 0x7563_7878_676f_706f // "ucxxgopo": I took in a chunk; send on
)

// controlWords are the words an endpoint sends, each from its own slot of the
// endpoint's C memory (its index here), so a send in flight never sees its word change.
var controlWords = [...]controlWord{controlKeepalive, controlGoodbye, controlGoodbyeAck, controlPing, controlPong}

// controlSlot is w's slot in the endpoint's C memory, or -1 for a word not sent.
func controlSlot(w controlWord) int {
	for i, cw := range controlWords {
		if cw == w {
			return i
		}
	}
	return -1
}

// controlMemorySize is the endpoint's C memory: the handshake's two messages, then
// one slot per control word it sends. The control receive reuses the peer's
// handshake message.
const controlMemorySize = 2*handshakeSize + len(controlWords)*controlSize

// startControl fills the send slots and posts the first control receive, once the
// handshake is done.
func (e *Engine) startControl(ep *endpoint) {
	for i, w := range controlWords {
		slot := unsafe.Slice((*byte)(unsafe.Add(ep.hs, 2*handshakeSize+i*controlSize)), controlSize)
		binary.LittleEndian.PutUint64(slot, uint64(w))
	}
	ep.controlOn = true
	if ep.peerChunkLog2 != 0 && !e.unpaced { // the peer answers pings, and pongs reach us here: paced
		ep.peerChunk = 1 << ep.peerChunkLog2
	}
	e.postControlRecv(ep)
}

func (e *Engine) postControlRecv(ep *endpoint) {
	r := e.requests.add(e.newID(), opControl, ep)
	r.internal = stepControlRecv
	in := unsafe.Add(ep.hs, handshakeSize)
	if ep.byAddress { // tagged, on our control tag (direct.go)
		e.postTagRecv(r, uintptr(in), controlSize, ep.ctlTag, ^uint64(0), ucxx.MemoryHost)
		return
	}
	r.track(ep.u.StreamRecv(in, controlSize, r.id))
}

// sendControl sends w, one of controlWords, to the peer.
func (e *Engine) sendControl(ep *endpoint, w controlWord) {
	r := e.requests.add(e.newID(), opControl, ep)
	r.internal, r.word = stepControlSend, w
	out := unsafe.Add(ep.hs, 2*handshakeSize+controlSlot(w)*controlSize)
	if ep.byAddress {
		r.track(ep.u.TagSend(uintptr(out), controlSize, ep.peerCtlTag, ucxx.MemoryHost, r.id))
		return
	}
	r.track(ep.u.StreamSend(out, controlSize, r.id))
}

// onControl handles the end of a control send or receive. A received word is acted
// on and the next receive posted, until UCX closes the endpoint; a receive that
// fails ends a close waiting for the peer's answer to its goodbye (goodbye.go). A
// tagged control message of another size breaks the protocol.
func (e *Engine) onControl(r *request, st ucxx.Status, length uint64) {
	ep := r.ep
	if r.internal == stepControlSend {
		switch r.word {
		case controlKeepalive:
			ep.kaSending = false
		case controlPong:
			e.pongSent(ep)
		}
		return
	}
	if st == ucxx.StatusOK && ep.byAddress && length != controlSize {
		st = ucxx.StatusMessageTruncated
	}
	if st == ucxx.StatusMessageTruncated && ep.phase == phaseReady {
		e.onEndpointError(ep.handle, ucxx.StatusIOError)
	}
	if st != ucxx.StatusOK {
		e.goodbyeLost(ep)
		return
	}
	if ep.phase > phaseClosing || ep.ucxClosing {
		return
	}
	w := controlWord(binary.LittleEndian.Uint64(unsafe.Slice((*byte)(unsafe.Add(ep.hs, handshakeSize)), controlSize)))
	if controlSlot(w) < 0 {
		// Only a peer breaking the protocol sends anything else.
		e.onEndpointError(ep.handle, ucxx.StatusIOError)
		return
	}
	e.heard(ep)
	switch w {
	case controlGoodbye:
		e.onGoodbye(ep)
	case controlGoodbyeAck:
		e.onGoodbyeAck(ep)
	case controlPing:
		e.onPing(ep)
	case controlPong:
		e.onPong(ep)
	}
	if !ep.ucxClosing { // the goodbye's answer closes it: UCX would never end another receive
		e.postControlRecv(ep)
	}
}
