package dag

import (
	"fmt"
	"math"
	"slices"
)

// BandwidthMatrix holds the bandwidth of the link from each location to each other,
// in GB/s, as GrCUDA's connection-graph matrix does (the host is location Host = -1).
// The caller fills it: from measurements, or from core/topology's link levels. A zero
// entry means no direct link.
type BandwidthMatrix struct {
	gpus int
	gbps []float64 // (gpus+1)^2, row = from+1, column = to+1
}

// NewBandwidthMatrix returns an all-zero matrix for the host and gpus GPUs.
func NewBandwidthMatrix(gpus int) *BandwidthMatrix {
	return &BandwidthMatrix{gpus: gpus, gbps: make([]float64, (gpus+1)*(gpus+1))}
}

// GPUs returns the number of GPUs the matrix covers.
func (m *BandwidthMatrix) GPUs() int { return m.gpus }

func (m *BandwidthMatrix) index(from, to int) int {
	if from < Host || from >= m.gpus || to < Host || to >= m.gpus {
		panic(fmt.Sprintf("dag: bandwidth from %d to %d outside a matrix of %d GPUs", from, to, m.gpus))
	}
	return (from+1)*(m.gpus+1) + to + 1
}

// Set records the bandwidth of the link from one location to another, in GB/s.
func (m *BandwidthMatrix) Set(from, to int, gbps float64) { m.gbps[m.index(from, to)] = gbps }

// Get returns the bandwidth from one location to another, in GB/s (0: no link).
func (m *BandwidthMatrix) Get(from, to int) float64 { return m.gbps[m.index(from, to)] }

// DevicePolicy names one of GrCUDA's device selection policies.
type DevicePolicy uint8

const (
	// RoundRobin rotates over the GPUs. The default.
	RoundRobin DevicePolicy = iota
	// StreamAware picks the GPU with the fewest busy streams (the lowest on ties).
	StreamAware
	// MinTransferSize picks the GPU already holding the most bytes the vertex reads,
	// if it holds more than DataThreshold of them; else round-robin.
	MinTransferSize
	// MinMinTransferTime picks, among the GPUs holding more than DataThreshold of the
	// bytes read, the one that would receive the rest soonest, each range copied over
	// the best link from a holder; else round-robin.
	MinMinTransferTime
	// MinMaxTransferTime is MinMinTransferTime with each range copied over the worst
	// link from a holder (a holder with no link to the GPU makes the time infinite):
	// the GPU whose slowest case is best.
	MinMaxTransferTime
)

var devicePolicyNames = [...]string{"round-robin", "stream-aware", "min-transfer-size", "minmin-transfer-time", "minmax-transfer-time"}

// String returns GrCUDA's name of the policy, e.g. "min-transfer-size".
func (p DevicePolicy) String() string {
	if int(p) < len(devicePolicyNames) {
		return devicePolicyNames[p]
	}
	return fmt.Sprintf("DevicePolicy(%d)", uint8(p))
}

// ParseDevicePolicy parses the names String returns.
func ParseDevicePolicy(s string) (DevicePolicy, error) {
	for i, n := range devicePolicyNames {
		if n == s {
			return DevicePolicy(i), nil
		}
	}
	return 0, fmt.Errorf("dag: unknown device selection policy %q", s)
}

// DefaultDataThreshold is GrCUDA's DataThreshold: a data-aware policy trusts
// locality only for a GPU holding more than this fraction of the bytes read.
const DefaultDataThreshold = 0.1

// DeviceLoad reports the load of each GPU; StreamManager implements it.
type DeviceLoad interface {
	Devices() int
	BusyStreams(dev int) int
}

// DeviceSelectionPolicy chooses the GPU a KindGPU vertex runs on, among the sorted
// devices among (nil: every device), from its accesses, the GPUs' load and where the
// bytes are. The parent-stream policy decides when it is asked (StreamManager.Place).
// Implementations keep state (the round-robin position) and are not safe for
// concurrent use: the Graph calls them under its lock.
type DeviceSelectionPolicy interface {
	SelectDevice(accesses []Access, among []int, load DeviceLoad, loc *LocationTracker) int
}

// candidates returns among, or every device of load when among is nil.
func candidates(among []int, load DeviceLoad, scratch *[]int) []int {
	if among != nil {
		return among
	}
	*scratch = (*scratch)[:0]
	for d := range load.Devices() {
		*scratch = append(*scratch, d)
	}
	return *scratch
}

// NewDeviceSelectionPolicy returns the policy p. The transfer-time policies need bw,
// which must cover at least the GPUs the policy will be asked about. threshold is the
// DataThreshold (DefaultDataThreshold when 0).
func NewDeviceSelectionPolicy(p DevicePolicy, bw *BandwidthMatrix, threshold float64) (DeviceSelectionPolicy, error) {
	if threshold == 0 {
		threshold = DefaultDataThreshold
	}
	if threshold < 0 || threshold >= 1 {
		return nil, fmt.Errorf("dag: data threshold %v outside [0, 1)", threshold)
	}
	switch p {
	case RoundRobin:
		return &roundRobin{}, nil
	case StreamAware:
		return &streamAware{}, nil
	case MinTransferSize:
		return &minTransferSize{threshold: threshold}, nil
	case MinMinTransferTime, MinMaxTransferTime:
		if bw == nil {
			return nil, fmt.Errorf("dag: %v needs a bandwidth matrix", p)
		}
		return &transferTime{threshold: threshold, bw: bw, worst: p == MinMaxTransferTime}, nil
	}
	return nil, fmt.Errorf("dag: unknown device selection policy %v", p)
}

// roundRobin rotates over the devices: GrCUDA's ROUND_ROBIN, and the fallback of the
// data-aware policies. As GrCUDA's, asked to choose among some devices it takes the
// one its position indexes modulo their number, and the position still counts over
// all devices.
type roundRobin struct{ next int }

func (r *roundRobin) SelectDevice(_ []Access, among []int, load DeviceLoad, _ *LocationTracker) int {
	n := load.Devices()
	d := r.next % n
	r.next = (d + 1) % n
	if among != nil {
		return among[d%len(among)]
	}
	return d
}

// streamAware is GrCUDA's STREAM_AWARE: the device with the fewest busy streams (the
// lowest-numbered on ties).
type streamAware struct{ all []int }

func (s *streamAware) SelectDevice(_ []Access, among []int, load DeviceLoad, _ *LocationTracker) int {
	among = candidates(among, load, &s.all)
	best := among[0]
	for _, d := range among[1:] {
		if load.BusyStreams(d) < load.BusyStreams(best) {
			best = d
		}
	}
	return best
}

// minTransferSize is GrCUDA's MIN_TRANSFER_SIZE over byte ranges. As GrCUDA's
// MinimizeTransferSizeDeviceSelectionPolicy.retrieveImpl: the GPU holding the most
// bytes read, the lowest-numbered on ties, if it holds more than the threshold of
// them; else (every byte on the host, or too few on any one GPU) the policy's own
// round-robin, whose position moves only when it is used. With block set, the
// fallback and the ties go to the block distribution's device first (blockTieBreak).
type minTransferSize struct {
	rr        roundRobin
	threshold float64
	all       []int
	block     bool // the fallback and the ties try the block distribution first
}

func (m *minTransferSize) SelectDevice(acc []Access, among []int, load DeviceLoad, loc *LocationTracker) int {
	present, total := loc.Present(acc, load.Devices())
	cands := candidates(among, load, &m.all)
	best := cands[0]
	for _, d := range cands[1:] {
		if present[d+1] > present[best+1] {
			best = d
		}
	}
	if total == 0 || float64(present[best+1]) <= m.threshold*float64(total) {
		return fallback(&m.rr, m.block, acc, among, load, loc)
	}
	if m.block {
		return blockTieBreak(best, cands, func(d int) bool { return present[d+1] == present[best+1] }, acc, load, loc)
	}
	return best
}

// blockTieBreak returns, among the candidates tied with best (tied reports it), the
// device the block distribution gives the accesses (LocationTracker.BlockDevice) when
// it is one of them; else best (the lowest-numbered). So ties such as a reduction
// reading one slot from each GPU go to the partition's own GPU, not all to GPU 0.
func blockTieBreak(best int, cands []int, tied func(d int) bool, acc []Access, load DeviceLoad, loc *LocationTracker) int {
	if !slices.ContainsFunc(cands, func(d int) bool { return d != best && tied(d) }) {
		return best // no tie: the block distribution is not asked
	}
	d, ok := loc.BlockDevice(acc, load.Devices())
	if !ok || d == best || !slices.Contains(cands, d) || !tied(d) {
		return best
	}
	return d
}

// transferTime is GrCUDA's MINMIN_TRANSFER_TIME (worst false) and
// MINMAX_TRANSFER_TIME (worst true) over byte ranges: the estimated time to bring
// every range read to a device is the sum of its bytes over the bandwidth of the best
// (or worst) link from a holder of its newest copy, zero when the device holds it.
// As GrCUDA's TransferTimeDeviceSelectionPolicy.retrieveImpl: only devices holding
// more than the threshold are candidates, the lowest-numbered wins ties (equal times,
// infinite ones included), and with no candidate (no GPU holds enough, e.g. every
// byte on the host) the choice is the policy's own round-robin. With block set, the
// fallback and the ties go to the block distribution's device first (blockTieBreak).
type transferTime struct {
	rr        roundRobin
	threshold float64
	bw        *BandwidthMatrix
	worst     bool
	cost      []float64 // scratch, per device
	all       []int
	block     bool // the fallback and the ties try the block distribution first
}

func (t *transferTime) SelectDevice(acc []Access, among []int, load DeviceLoad, loc *LocationTracker) int {
	n := load.Devices()
	present, total := loc.Present(acc, n)
	if total == 0 {
		return fallback(&t.rr, t.block, acc, among, load, loc)
	}
	t.cost = append(t.cost[:0], make([]float64, n)...)
	for _, a := range acc {
		if !a.Mode.reads() {
			continue
		}
		loc.Holders(a.Array, a.Off, a.Len, func(_, bytes uint64, s LocationSet) {
			for d := range n {
				if s.Has(d) {
					continue
				}
				t.cost[d] += float64(bytes) / t.link(s, d)
			}
		})
	}
	best := -1
	cands := candidates(among, load, &t.all)
	for _, d := range cands {
		if float64(present[d+1]) <= t.threshold*float64(total) {
			continue // GrCUDA considers only devices with enough of the data
		}
		if best < 0 || t.cost[d] < t.cost[best] {
			best = d
		}
	}
	if best < 0 {
		return fallback(&t.rr, t.block, acc, among, load, loc)
	}
	if t.block {
		return blockTieBreak(best, cands, func(d int) bool {
			return float64(present[d+1]) > t.threshold*float64(total) && t.cost[d] == t.cost[best]
		}, acc, load, loc)
	}
	return best
}

// fallback is a data-aware policy's choice where the data says nothing (every byte
// read on the host, or too few on any one GPU). GrCUDA's is its round-robin (a FIXME
// there says a better one is wanted): so the readers of x[0:n/2) and y[0:n/2) go to
// two GPUs, and the kernel reading both moves one of them across. With block set,
// where the ranges touched are parts of arrays of known size, the device a block
// distribution of those arrays gives them (LocationTracker.BlockDevice) if it is
// among the candidates, as hand-partitioned code places partition q on GPU q; else
// the round-robin.
func fallback(rr *roundRobin, block bool, acc []Access, among []int, load DeviceLoad, loc *LocationTracker) int {
	if block {
		if d, ok := loc.BlockDevice(acc, load.Devices()); ok && (among == nil || slices.Contains(among, d)) {
			return d
		}
	}
	return rr.SelectDevice(acc, among, load, loc)
}

// withBlockFallback turns on the block distribution in a data-aware policy's
// fallback (Options.RoundRobinFallback off); other policies are returned as they are.
func withBlockFallback(p DeviceSelectionPolicy) DeviceSelectionPolicy {
	switch q := p.(type) {
	case *minTransferSize:
		q.block = true
	case *transferTime:
		q.block = true
	}
	return p
}

// link returns the bandwidth a copy from the holders s to d is assumed to get: the
// best (or, worst set, the worst) link from one of them, a missing link counting as
// 0 GB/s, as GrCUDA's computeBandwidth reduces the matrix row with max (or min). So
// the best link ignores missing ones unless all are missing, and the worst link is 0
// when any is; 0 means an infinite time.
func (t *transferTime) link(s LocationSet, d int) float64 {
	bw := math.NaN()
	s.Each(func(l int) {
		b := max(t.bw.Get(l, d), 0)
		if math.IsNaN(bw) || (t.worst && b < bw) || (!t.worst && b > bw) {
			bw = b
		}
	})
	if math.IsNaN(bw) {
		return 0
	}
	return bw
}
