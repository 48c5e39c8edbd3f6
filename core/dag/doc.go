// Package dag is a run-time dependency DAG in the manner of GrCUDA's scheduler: the
// caller adds computations one at a time, each with the byte ranges it reads and
// writes, and the graph orders each one after the earlier computations it conflicts
// with, so that independent ones run concurrently.
//
// A computation is a Vertex, made by Graph.Add from a Task. Its Accesses name
// (array, [off, off+len), mode) triples; dependencies are found per byte range
// (intervals.go), so disjoint slices of one array never wait for each other, reads
// never wait for reads (unless the no-const policy says otherwise) and reductions into
// one range never wait for each other. Each array's history is an interval map that
// holds, per segment, the last writer and the readers or reducers since: adding an
// access costs O(log n + segments touched), and finished vertices drop out of it.
//
// A vertex runs on a Lane. The graph hands a vertex to its lane once the parents the
// lane cannot wait for by itself have finished (a host lane: all of them; a GPU stream
// lane: its host parents, while GPU parents are waited for on the device through their
// stop events), and the lane reports the vertex's end with Vertex.End from whichever
// goroutine learns it: a host worker, an event poller, the UCX progress thread.
// Completion is therefore learned when it happens, not when the host next synchronizes:
// a finished vertex frees its place in the interval maps and its stream at once.
//
// GPU vertices are placed on a device by a DeviceSelectionPolicy (GrCUDA's five, made
// byte-range aware by a LocationTracker) and on a stream by a StreamManager (GrCUDA's
// parent-stream and new-stream policies over a StreamPool). The CUDA binding itself
// lives behind the Lane and StreamPool interfaces: this package has no cgo.
//
// A failed vertex fails its descendants with a *VertexError whose Unwrap chain reaches
// the root failure; vertices that do not descend from it complete. A descendant is a
// vertex ordered after it while it was active: one added after the failed vertex has
// finished finds no edge to it (finished vertices leave the interval maps) and runs.
// A vertex never finishes before its parents, failed or not, so the interval maps can
// forget finished vertices without losing an order.
//
// Lock order: Graph.mu, then a lane's own lock. Lanes are called without Graph.mu held
// (Start, Release), except ChainingLane.Chains, which must not call back into the graph.
package dag
