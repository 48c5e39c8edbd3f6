package collective

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
)

// Tag ids. A communicator's point-to-point messages (p2pTag) name their receiving
// endpoint as a connection's messages do (core's tags.go): rank i's endpoint to rank
// j owns a random id of i's engine (core.EndpointOptions.OwnTag), which only i and j
// learn: i tells it to j over that endpoint once the ranks are connected
// (exchangeTagIDs). j's messages to i carry it, so i's engine charges what j sent and
// i has not received yet to i's endpoint to j (a rank that floods i fails its own
// endpoint there, not the others': core's unexpected.go), and a rank that does not
// know it cannot pass messages off as j's.

// tagTagID is the user tag (p2pTag's 16 bits) of the exchange; its messages carry no
// id.
const tagTagID = 0xC1D0

// tagIDBits are the bits of a tag that carry an endpoint id (core's tags.go).
const tagIDBits = uint64(1<<63-1) &^ (1<<core.UserTagBits - 1)

// isEndpointID reports whether id is an endpoint id in place in a tag: some of
// tagIDBits set, no other bit.
func isEndpointID(id uint64) bool { return id != 0 && id&^tagIDBits == 0 }

// exchangeTagIDs tells every other rank the id of this rank's endpoint to it and
// learns theirs: p.recvIDs[j] is what j's messages to this rank carry, p.sendIDs[j]
// what this rank's messages to j carry.
//
// Errors: ErrBootstrap for an id that is no endpoint id; ErrTimeout; the engine's.
func exchangeTagIDs(e *core.Engine, r *completionReader, p *peers, me int, deadline time.Time) error {
	n := len(p.eps)
	p.sendIDs, p.recvIDs = make([]uint64, n), make([]uint64, n)
	for j, ep := range p.eps {
		if j == me {
			continue
		}
		info, err := e.EndpointInfo(ep)
		if err != nil {
			return err
		}
		if !isEndpointID(info.RecvTag) {
			return fmt.Errorf("collective: the endpoint to rank %d has receive tag %#x", j, info.RecvTag)
		}
		p.recvIDs[j] = info.RecvTag
		if err := sendTagged(e, r, ep, p2pTag(me, tagTagID), binary.LittleEndian.AppendUint64(nil, info.RecvTag), deadline); err != nil {
			return fmt.Errorf("collective: tell rank %d its tag: %w", j, err)
		}
	}
	buf := make([]byte, 8)
	for j, ep := range p.eps {
		if j == me {
			continue
		}
		msg, err := recvTagged(e, r, ep, p2pTag(j, tagTagID), buf, deadline)
		if err != nil {
			return fmt.Errorf("collective: learn rank %d's tag: %w", j, err)
		}
		if len(msg) != 8 {
			return fmt.Errorf("%w: rank %d's tag in %d bytes", ErrBootstrap, j, len(msg))
		}
		id := binary.LittleEndian.Uint64(msg)
		if !isEndpointID(id) {
			return fmt.Errorf("%w: rank %d's tag %#x names no endpoint", ErrBootstrap, j, id)
		}
		p.sendIDs[j] = id
	}
	return nil
}
