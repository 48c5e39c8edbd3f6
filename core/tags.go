package core

// Tags. A message's 64-bit UCX tag says who it is for:
//
//	bit 63      MultiTagBit: multi-buffer traffic
//	bits 32-62  the receiving endpoint's id, chosen by the receiver (unique among its
//	            endpoints, never 0) and told to the sender in the tag handshake
//	bits 0-31   the application's tag, mixed into 32 bits by the application
//
// An endpoint's receive tag is its id in place with the low bits 0. So the engine
// knows which endpoint a message it holds belongs to (unexpected.go), and a message for
// one endpoint can never match another's receives. Tags the application forces are
// taken as they are; where their id bits name no endpoint, nobody owns them.

// UserTagBits is how many low bits of a tag are the application's.
const UserTagBits = 32

// tagEndpointIDMask is the endpoint id's width: bits 32-62.
const tagEndpointIDMask = 1<<(63-UserTagBits) - 1

// tagEndpointID returns the endpoint id a tag carries (0: none).
func tagEndpointID(tag uint64) uint32 {
	return uint32(tag>>UserTagBits) & tagEndpointIDMask
}
