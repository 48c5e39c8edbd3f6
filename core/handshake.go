package core

import (
	"encoding/binary"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The tag handshake: once UCX has connected two endpoints, each side sends the other
// the tag it receives on (a stream message), so tagged messages of one connection can
// never match another's receives.

// handshakeSize is one side's handshake message: its receive tag and a check word.
const handshakeSize = 16

// handshakeMagic makes the check word: a peer that is not ucxx-go (or a corrupted
// message) fails the handshake instead of yielding a garbage tag.
const handshakeMagic = 0x7563_7878_676f_2d31 // "ucxxgo-1"

// handshakeKeepalive, set in the check word, says the side keeps the connection alive
// (keepalive.go): keepalive runs only where both sides do.
const handshakeKeepalive = 1 << 63

// handshakeChunkShift: bits 56-61 of the check word hold the base-2 logarithm of the
// side's flow-control chunk (flowcontrol.go), 0 when it answers no pings.
const (
	handshakeChunkShift = 56
	handshakeChunkMask  = 0x3f << handshakeChunkShift
)

// startHandshake sends our receive tag and receives the peer's, both at once, so the
// exchange costs one one-way latency.
func (e *Engine) startHandshake(ep *endpoint) {
	ep.hs = ucxx.CAlloc(controlMemorySize)
	out := unsafe.Slice((*byte)(ep.hs), handshakeSize)
	binary.LittleEndian.PutUint64(out[0:], ep.recvTag)
	check := ep.recvTag ^ handshakeMagic
	if e.keepaliveWanted(ep) {
		check ^= handshakeKeepalive
	}
	check ^= uint64(e.chunkNamed(ep.u.ErrHandling())) << handshakeChunkShift
	binary.LittleEndian.PutUint64(out[8:], check)
	e.eps.schedule(ep, ep.deadline)

	send := e.requests.add(e.newID(), opTagSend, ep)
	send.internal = stepHandshakeSend
	send.track(ep.u.StreamSend(ep.hs, handshakeSize, send.id))
	recv := e.requests.add(e.newID(), opTagRecv, ep)
	recv.internal = stepHandshakeRecv
	recv.track(ep.u.StreamRecv(unsafe.Add(ep.hs, handshakeSize), handshakeSize, recv.id))
}

// onHandshakeStep handles the end of one half of the handshake.
func (e *Engine) onHandshakeStep(r *request, st ucxx.Status) {
	ep := r.ep
	if ep.phase != phaseHandshake {
		return
	}
	if st != ucxx.StatusOK {
		e.failHandshake(ep, st)
		return
	}
	if r.internal == stepHandshakeSend {
		ep.hsSent = true
	} else {
		in := unsafe.Slice((*byte)(unsafe.Add(ep.hs, handshakeSize)), handshakeSize)
		tag := binary.LittleEndian.Uint64(in[0:])
		flags := binary.LittleEndian.Uint64(in[8:]) ^ tag ^ handshakeMagic
		chunk := uint8((flags & handshakeChunkMask) >> handshakeChunkShift)
		if flags&^(handshakeKeepalive|handshakeChunkMask) != 0 || (chunk != 0 && !validChunkLog2(chunk)) {
			e.failHandshake(ep, ucxx.StatusIOError)
			return
		}
		ep.peerKeepalive = flags&handshakeKeepalive != 0
		ep.peerChunkLog2 = chunk
		ep.sendTag = tag
		ep.hsRecvd = true
	}
	if ep.hsSent && ep.hsRecvd {
		e.handshakeDone(ep)
	}
}

func (e *Engine) handshakeDone(ep *endpoint) {
	ep.phase = phaseReady
	if ep.warmUp {
		e.warmUpReady()
		return
	}
	ep.known = true
	e.eps.publish(ep, true)
	if ep.u.ErrHandling() == ucxx.ErrHandlingPeer {
		e.startControl(ep)
		e.startKeepalive(ep)
	}
	if ep.connectID != 0 {
		e.completeNow(ep.connectID, ucxx.StatusOK, ep.handle)
		ep.connectID = 0
	} else {
		e.completeNow(EventListenerAccept|ep.listener, ucxx.StatusOK, ep.handle)
	}
}

func (e *Engine) failHandshake(ep *endpoint, st ucxx.Status) {
	e.dropDialing(ep)
	if ep.warmUp {
		e.teardown(ep, st, true)
		e.warmUpFailed(st)
		return
	}
	if ep.connectID != 0 {
		e.completeNow(ep.connectID, st, 0)
		ep.connectID = 0
	}
	e.teardown(ep, st, true)
}
