// Package execution runs a dependency DAG (core/dag) on real lanes: CUDA streams of
// the process's GPUs, worker goroutines for host work, and the engine's transfers to
// peers. A Context is what Python's ExecutionContext drives: each call (a kernel, a
// copy, a reduction, a host function, a put or a receive) adds one vertex with the
// byte ranges it reads and writes and returns at once; the DAG orders it after the
// vertices it conflicts with, and the lanes run it as soon as that allows.
//
// How each kind of edge is honoured, without a host block where a device wait serves:
//   - GPU after GPU on the same stream: stream order; on another stream or device:
//     cuStreamWaitEvent on the parent's stop event.
//   - GPU after a transfer: the kernel is launched at once behind a
//     cuStreamWaitValue64 on the transfer's done word, a pinned host word the
//     transfer lane stores when the engine reports the completion (so a kernel that
//     reads a received buffer waits on the GPU, not on the host).
//   - host or transfer after GPU: a poller queries the parent's stop event and ends
//     the parent the moment it is done; its children start then (a put starts when
//     the kernel that wrote its source ends).
//   - anything after host or transfer work: the lane ends the vertex when the work
//     returns or the engine's completion arrives.
//
// Completion is learned as it happens, so finished vertices leave the DAG, and their
// streams and events go back to their pools, while the GPU runs on. Close waits for
// or cancels what is pending and releases every stream, event, module and word it
// made; Resources counts them, for leak tests.
package execution
