// Package executor runs MSCCL++ execution plans (core/plan) among the ranks of a
// communicator: every rank runs its lanes' ops in order, with no interpreter
// between the call and the bytes, one call in and one result out.
//
// A call goes in three steps. Every rank announces it on its board (a shared
// segment every rank maps): a fingerprint of plan, sizes, element type, operator
// and the caller's description, and where its buffers are; each reads everyone's
// and fails with ErrMismatch, before any byte moves, when they differ. The plan's
// context is found or made (per rank a segment with a counter per channel and the
// scratch buffer, mapped by the rank's peers). Then the lanes run, less their
// opening handshakes, which the announcements make redundant (handshakes.go):
// puts, gets, copies and reductions move bytes with memmove in mapped memory and with
// process_vm_readv/writev into peers' own buffers (one copy, no staging); signals
// add to the peer's counter, waits spin briefly and then sleep on it, checking the
// peer's process is alive and the call's deadline.
//
// Device memory runs the same plans on GPU lanes (gpu.go); a stream-ordered device
// call (Call.Ordered, ordered.go) returns once its lanes are queued on the GPU, the
// caller's streams waiting there for their end.
//
// Ranks of one host today; the lane runner (runner.go) is where one persistent
// kernel per rank and port channels over UCX between hosts fit, with the same plans
// and calls.
package executor
