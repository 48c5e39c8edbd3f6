package dag

import "fmt"

// ExecutionPolicy says whether independent vertices may run concurrently.
type ExecutionPolicy uint8

const (
	// Async runs every vertex as soon as its dependencies allow. The default.
	Async ExecutionPolicy = iota
	// Sync makes every vertex also wait for the one added before it to finish: the
	// serialized baseline (GrCUDA's "sync"), for debugging and for measuring what the
	// DAG gains. The ordering edges it adds carry no failure.
	Sync
)

// String returns "async" or "sync".
func (p ExecutionPolicy) String() string {
	switch p {
	case Async:
		return "async"
	case Sync:
		return "sync"
	}
	return fmt.Sprintf("ExecutionPolicy(%d)", uint8(p))
}

// ParseExecutionPolicy parses the names String returns.
func ParseExecutionPolicy(s string) (ExecutionPolicy, error) {
	for p := Async; p <= Sync; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("dag: unknown execution policy %q", s)
}

// Options configures a Graph. The zero value is a host-only graph with async
// execution, with-const dependencies, FIFO stream reuse, same-as-parent streams and
// round-robin devices (GrCUDA's defaults but with-const, where GrCUDA's is no-const,
// and round-robin, where GrCUDA runs on one GPU unless told).
type Options struct {
	Execution       ExecutionPolicy
	Dependency      DependencyPolicy
	NewStream       NewStreamPolicy
	ParentStream    ParentStreamPolicy
	DeviceSelection DevicePolicy

	// DataThreshold is GrCUDA's DataThreshold for the data-aware device policies
	// (DefaultDataThreshold when 0).
	DataThreshold float64
	// RoundRobinFallback makes the data-aware device policies fall back to
	// round-robin where the data says nothing (every byte read on the host), as
	// GrCUDA's do. Off (the default), they first try the device a block distribution
	// of the arrays gives the ranges a vertex touches (LocationTracker.BlockDevice):
	// partition q of arrays split into byte ranges goes to GPU q, its kernels'
	// inputs together; and that device breaks the policies' ties where it is one of
	// the tied devices (GrCUDA's: the lowest-numbered).
	RoundRobinFallback bool
	// Bandwidth is the link matrix of the transfer-time device policies, and of the
	// choice of a source for Vertex.Moves. It must cover GPUs GPUs.
	Bandwidth *BandwidthMatrix

	// GPUs is the number of GPUs KindGPU vertices are placed on (0: none may be
	// added), at most MaxGPUs.
	GPUs int
	// MaxStreamsPerDevice bounds the streams of each GPU (DefaultMaxStreams when 0).
	MaxStreamsPerDevice int
	// GPULanes runs KindGPU vertices, one lane per GPU by device number; a lane that
	// is a ChainingLane orders GPU work after GPU work on the device.
	GPULanes []Lane
	// StreamPool makes the streams the StreamManager assigns; nil: streams are only
	// numbered (handle 0), for a GPU lane that makes its own.
	StreamPool StreamPool
	// TransferLane runs KindTransfer vertices.
	TransferLane Lane

	// HostLanes is the number of workers of the graph's own HostLane, which runs
	// KindHost vertices whose Task names no lane (GOMAXPROCS when 0).
	HostLanes int

	// Timings records when each vertex started and ended (Vertex.Times).
	Timings bool
	// DOT keeps every vertex and edge, with the byte ranges behind each edge, for
	// WriteDOT. The record grows with every vertex added: for debugging.
	DOT bool
}

// validate checks what New cannot fix up.
func (o *Options) validate() error {
	if o.GPUs < 0 || o.GPUs > MaxGPUs {
		return fmt.Errorf("dag: %d GPUs: at most %d", o.GPUs, MaxGPUs)
	}
	if len(o.GPULanes) != 0 && len(o.GPULanes) != o.GPUs {
		return fmt.Errorf("dag: %d GPU lanes for %d GPUs", len(o.GPULanes), o.GPUs)
	}
	if o.Bandwidth != nil && o.Bandwidth.GPUs() < o.GPUs {
		return fmt.Errorf("dag: bandwidth matrix of %d GPUs for %d GPUs", o.Bandwidth.GPUs(), o.GPUs)
	}
	return nil
}
