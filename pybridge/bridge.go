// Package pybridge is the surface gopy turns into the CPython extension
// ucxx_go._pybridge: flat functions over integer handles and scalars.
//
// Rules every function here follows, because of how gopy binds them:
//   - it returns (T, error): a function returning only error leaks its message;
//   - it recovers panics into errors: a Go panic would abort the Python process;
//   - buffers cross as address + length: gopy copies []byte, we never copy payloads;
//   - errors carry a machine-readable prefix, "[ucs <status>] " or "[closed] ", that the
//     Python side maps to its UCXError classes (python/ucxx_go/exceptions.py);
//   - several small results travel as one space-separated string, since a Go struct or
//     slice returned through gopy costs a call per field or element.
//
// One engine per process, started by Start and stopped by Stop, as in UCXX's asyncio
// API (one context and worker).
package pybridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/topology"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

var engine atomic.Pointer[core.Engine]

// errNotStarted is returned by everything but Start and Version before Start.
var errNotStarted = fmt.Errorf("ucxx-go is not initialised: %w", ucxx.ErrClosed)

// The prefixes of the errors Python sees: ErrorPrefixClosed, or ErrorPrefixStatus,
// the UCS status in decimal and ErrorPrefixEnd. Python's copy is generated.
const (
	ErrorPrefixClosed = "[closed] "
	ErrorPrefixStatus = "[ucs "
	ErrorPrefixEnd    = "] "
)

// bridgeError gives err the prefix Python maps to an exception class.
func bridgeError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ucxx.ErrClosed) {
		return fmt.Errorf("%s%v", ErrorPrefixClosed, err)
	}
	return statusError(ucxx.StatusOf(err), err)
}

// statusError prefixes err with st.
func statusError(st ucxx.Status, err any) error {
	return fmt.Errorf("%s%d%s%v", ErrorPrefixStatus, int64(st), ErrorPrefixEnd, err)
}

// guard turns a panic into an error and prefixes whatever error is returned.
func guard(err *error) {
	if r := recover(); r != nil {
		*err = statusError(ucxx.StatusIOError, fmt.Sprintf("ucxx-go internal error: %v", r))
		return
	}
	*err = bridgeError(*err)
}

func current() (*core.Engine, error) {
	e := engine.Load()
	if e == nil {
		return nil, errNotStarted
	}
	return e, nil
}

// Start creates the engine. options is a JSON object of UCX settings without the UCX_
// prefix; mode is "blocking" or "polling" (a progress thread), or "loop" (the calling
// thread owns the worker and its event loop calls Progress when PollFD is readable); limits is a JSON object with any of
// max_frames, max_frame_bytes, max_message_bytes, max_outstanding_bytes,
// max_endpoint_outstanding_bytes, max_unexpected_bytes and keepalive_timeout_ms (0 or
// absent: the default; a negative keepalive_timeout_ms turns keepalive off); warmUp,
// a local IP address or "", is core.Options.WarmUp: the engine warms up through it
// in the background. It returns "ring_address ring_size eventfd queue_id" for the
// completion queue that Python reads in place; queue_id names the queue to
// NotifierWait, ConsumeWake and FreeQueue. oneSided is core.Options.OneSided.
func Start(options string, mode string, delayedSubmission bool, limits string, warmUp string, oneSided bool) (res string, err error) {
	defer guard(&err)
	opts := core.Options{
		WarmUp:              warmUp,
		OneSided:            oneSided,
		NoDelayedSubmission: !delayedSubmission,
		CaptureUCXLog:       true, // Python logs it (the "ucx" logger): TakeUCXLog
		SpinBeforeSleep:     microsecondsFromEnv("UCXGO_SPIN_US", defaultSpin),
		InlineWait:          microsecondsFromEnv("UCXGO_INLINE_WAIT_US", defaultInlineWait),
		QuietAfter:          defaultQuietAfter,
	}
	if limits != "" {
		var l struct {
			MaxFrames           uint64 `json:"max_frames"`
			MaxFrameBytes       uint64 `json:"max_frame_bytes"`
			MaxMessageBytes     uint64 `json:"max_message_bytes"`
			MaxOutstandingBytes int64  `json:"max_outstanding_bytes"`
			MaxEndpointBytes    int64  `json:"max_endpoint_outstanding_bytes"`
			MaxUnexpectedBytes  int64  `json:"max_unexpected_bytes"`
			KeepaliveTimeoutMs  int64  `json:"keepalive_timeout_ms"`
		}
		if err := json.Unmarshal([]byte(limits), &l); err != nil {
			return "", fmt.Errorf("Start: limits are not a JSON object of integers: %w", ucxx.StatusInvalidParam)
		}
		opts.Limits = core.Limits{MaxFrames: l.MaxFrames, MaxFrameBytes: l.MaxFrameBytes, MaxMessageBytes: l.MaxMessageBytes}
		opts.MaxOutstandingBytes = l.MaxOutstandingBytes
		opts.MaxEndpointOutstandingBytes = l.MaxEndpointBytes
		opts.MaxUnexpectedBytes = l.MaxUnexpectedBytes
		opts.KeepaliveTimeout = time.Duration(l.KeepaliveTimeoutMs) * time.Millisecond
	}
	if options != "" {
		if err := json.Unmarshal([]byte(options), &opts.UCXOptions); err != nil {
			return "", fmt.Errorf("Start: options are not a JSON object of strings: %w", ucxx.StatusInvalidParam)
		}
	}
	switch mode {
	case "blocking", "":
		opts.Mode = core.Blocking
	case "polling":
		opts.Mode = core.Polling
	case "loop":
		opts.Mode = core.Loop
	default:
		return "", fmt.Errorf("Start: unknown progress mode %q: %w", mode, ucxx.StatusInvalidParam)
	}
	if engine.Load() != nil {
		return "", fmt.Errorf("Start: already started: %w", ucxx.StatusAlreadyExists)
	}
	e, err := core.New(opts)
	if err != nil {
		return "", err
	}
	if !engine.CompareAndSwap(nil, e) {
		e.Shutdown(time.Second)
		e.FreeQueue()
		return "", fmt.Errorf("Start: already started: %w", ucxx.StatusAlreadyExists)
	}
	q := e.Queue()
	id := queues.add(e)
	return fmt.Sprintf("%d %d %d %d", q.Address(), q.Size(), q.FD(), id), nil
}

// Defaults for the progress thread's polling before it sleeps, a submitting call's
// wait for an inline completion and the quiet time before a blocking sleep
// (benchmarks/design-notes.md).
const (
	defaultSpin       = 200 * time.Microsecond
	defaultInlineWait = 50 * time.Microsecond
	// defaultQuietAfter: after 50 ms instead, an 8-byte echo after 100 ms of quiet
	// took 540 us instead of 390 (taking the P back).
	defaultQuietAfter = time.Second
)

// microsecondsFromEnv reads a duration in microseconds from the environment variable
// name; unset or not a number gives def, and 0 or less turns the feature off.
func microsecondsFromEnv(name string, def time.Duration) time.Duration {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	us, err := strconv.Atoi(v)
	if err != nil {
		return def
	}
	return time.Duration(max(us, 0)) * time.Microsecond
}

// Stop shuts the engine down within timeoutMs: endpoints are aborted, requests
// cancelled, the queue closed (its waiters wake). The queue's memory stays mapped
// until FreeQueue, so a reader still draining it is safe.
func Stop(timeoutMs int64) (ok bool, err error) {
	defer guard(&err)
	e := engine.Load()
	if e == nil {
		return false, nil
	}
	err = e.Shutdown(time.Duration(timeoutMs) * time.Millisecond)
	engine.CompareAndSwap(e, nil)
	return err == nil, err
}

// queueTable maps each completion queue's id (Start's fourth word) to its engine, from
// Start until FreeQueue. The reader of a queue names it by that id, never used again,
// so a reader of an engine that stopped never waits on, or frees, the queue of an
// engine started since, even one whose queue was mapped where the freed one was.
type queueTable struct {
	mu      sync.Mutex
	last    uint64
	engines map[uint64]*core.Engine
}

var queues = queueTable{engines: make(map[uint64]*core.Engine)}

// add names e's queue by a new id (1 and up) and returns it.
func (t *queueTable) add(e *core.Engine) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	t.engines[t.last] = e
	return t.last
}

// get returns the engine of queue id, or nil once it was freed.
func (t *queueTable) get(id uint64) *core.Engine {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.engines[id]
}

// take removes and returns the engine of queue id, or nil.
func (t *queueTable) take(id uint64) *core.Engine {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.engines[id]
	delete(t.engines, id)
	return e
}

// FreeQueue unmaps the completion queue whose id is queue (Start's fourth word), once
// its engine stopped and Python stopped reading it; a queue freed already, or none,
// is nothing to do.
func FreeQueue(queue uint64) (ok bool, err error) {
	defer guard(&err)
	if e := queues.take(queue); e != nil {
		e.FreeQueue()
	}
	return true, nil
}

// Version returns the version of the loaded UCX library.
func Version() (v string, err error) {
	defer guard(&err)
	return ucxx.Version(), nil
}

// RMAGuard reports whether UCX's one-sided rendezvous is filtered for workers without
// one-sided transfers (ucxx.RMAGuardActive; false with a UCX the guard does not know).
func RMAGuard() (active bool, err error) {
	defer guard(&err)
	return ucxx.RMAGuardActive(), nil
}

// Settings returns "progress_mode delayed_submission" of the running engine.
func Settings() (s string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	mode := "blocking"
	switch e.Mode() {
	case core.Polling:
		mode = "polling"
	case core.Loop:
		mode = "loop"
	}
	return fmt.Sprintf("%s %t", mode, e.DelayedSubmission()), nil
}

// gpuJSON is how Python sees a GPU (ucxx_go.info()["gpus"]).
type gpuJSON struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	BusID       string `json:"bus_id"`
	MemoryBytes uint64 `json:"memory_bytes"`
	NUMANode    int    `json:"numa_node"`
	CPUAffinity []int  `json:"cpu_affinity"`
}

// GPUInfo returns a JSON object: "gpus", the machine's NVIDIA GPUs, and "topology",
// for each pair the link between them (NVML's common ancestor level: "NVLINK", "PIX",
// "PHB", "SYS", ...), with whether peer reads work. Both are empty when there is no
// GPU (no driver included).
func GPUInfo() (res string, err error) {
	defer guard(&err)
	out := struct {
		GPUs     []gpuJSON  `json:"gpus"`
		Topology [][]string `json:"topology"`
	}{GPUs: []gpuJSON{}, Topology: [][]string{}}
	gpus, err := topology.GPUs()
	if err != nil && !errors.Is(err, topology.ErrNoGPU) {
		return "", err
	}
	for _, g := range gpus {
		out.GPUs = append(out.GPUs, gpuJSON{g.Index, g.Name, g.UUID, g.BusID, g.MemoryBytes, g.NUMANode, g.CPUAffinity})
	}
	if len(gpus) > 0 {
		links, err := topology.GPUTopology()
		if err == nil {
			for _, row := range links {
				r := make([]string, len(row))
				for j, l := range row {
					r[j] = l.Level
					if l.P2PRead && l.Level != "X" {
						r[j] += "+p2p"
					}
				}
				out.Topology = append(out.Topology, r)
			}
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// EndpointTransports returns endpoint h's transports as "name:device" words ("tcp:lo",
// "posix:memory", "cuda_ipc:cuda"), space-separated.
func EndpointTransports(h uint64) (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	ts, err := e.EndpointTransports(h)
	if err != nil {
		return "", err
	}
	words := make([]string, 0, len(ts))
	for _, t := range ts {
		words = append(words, t.Name+":"+t.Device)
	}
	return strings.Join(words, " "), nil
}

// ProgressCPUs returns a JSON object: "cpus", the CPUs the progress thread may run on,
// and "pinned_near_gpu".
func ProgressCPUs() (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	cpus, pinned, err := e.ProgressCPUs()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]any{"cpus": cpus, "pinned_near_gpu": pinned})
	return string(b), err
}

// TakeUCXLog returns UCX's captured log records, oldest first, one per line as
// "level<TAB>file:line message" (level: UCS's, 0 fatal ... 5 debug), and first a line
// "dropped<TAB>n" when n records were lost to the full buffer. Python calls it when the
// queue's log word is set, and after Stop.
func TakeUCXLog() (lines string, err error) {
	defer guard(&err)
	records, dropped := ucxx.TakeLog()
	var b strings.Builder
	if dropped > 0 {
		fmt.Fprintf(&b, "dropped\t%d\n", dropped)
	}
	for _, r := range records {
		fmt.Fprintf(&b, "%d\t%s\n", r.Level, strings.ReplaceAll(r.Text, "\n", " "))
	}
	return b.String(), nil
}
