package execution

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TransferWork is the payload of a transfer vertex: an engine operation posted
// through the lane's sink.
type TransferWork interface {
	post(e *core.Engine, s *core.Sink) (uint64, error)
}

// Put writes T to the peer of endpoint EP (Engine.Put).
type Put struct {
	EP uint64
	T  core.Transfer
}

func (p *Put) post(e *core.Engine, s *core.Sink) (uint64, error) { return s.Put(e, p.EP, p.T, 0) }

// Get reads T from the peer of endpoint EP (Engine.Get).
type Get struct {
	EP uint64
	T  core.Transfer
}

func (g *Get) post(e *core.Engine, s *core.Sink) (uint64, error) { return s.Get(e, g.EP, g.T, 0) }

// Send sends Size bytes at Addr on endpoint EP with Tag (Engine.TagSend).
type Send struct {
	EP      uint64
	Addr    uintptr
	Size    uint64
	Tag     uint64
	MemType int
}

func (m *Send) post(e *core.Engine, s *core.Sink) (uint64, error) {
	return s.TagSend(e, m.EP, m.Addr, m.Size, m.Tag, m.MemType, 0)
}

// Recv receives the next message matching Tag under Mask from endpoint EP (0: any)
// into Size bytes at Addr (Engine.TagRecv).
type Recv struct {
	EP        uint64
	Addr      uintptr
	Size      uint64
	Tag, Mask uint64
	MemType   int
}

func (m *Recv) post(e *core.Engine, s *core.Sink) (uint64, error) {
	return s.TagRecv(e, m.EP, m.Addr, m.Size, m.Tag, m.Mask, m.MemType, 0)
}

// TransferError is a transfer the engine completed with a failure.
type TransferError struct {
	Status ucxx.Status
}

func (e *TransferError) Error() string {
	return fmt.Sprintf("execution: transfer failed: %v", e.Status)
}

// Unwrap lets errors.Is match the status.
func (e *TransferError) Unwrap() error { return e.Status }

// doneWord is a transfer's word in pinned host memory that GPU children wait on: it
// reaches target once the transfer has completed (either way). Words are reused by
// later transfers with higher targets: a stream still waiting on an older target of
// the same word passes (cuStreamWaitValue64 compares cyclically, GEQ).
type doneWord struct {
	host   *uint64
	dev    uintptr
	target uint64
}

func (w *doneWord) queueWait(drv *ucxx.CUDADriver, stream uintptr) error {
	return drv.StreamWaitAtLeast(stream, w.dev, w.target)
}

func (w *doneWord) set() { atomic.StoreUint64(w.host, w.target) }

// wordsPerPage is how many done words one pinned page holds.
const wordsPerPage = 512

// transferLane posts transfer vertices through the engine, on a sink of its own, and
// ends them from their completions. With GPUs, each transfer also gets a done word.
type transferLane struct {
	e    *core.Engine
	sink *core.Sink
	drv  *ucxx.CUDADriver // nil: no GPU lane will wait on done words
	cu   ucxx.CUDAContext
	res  *resources

	mu       sync.Mutex
	byID     map[uint64]*dag.Vertex
	pages    []unsafe.Pointer
	words    []*doneWord // free
	closing  bool        // transfers that start now end Canceled at once
	quit     chan struct{}
	finished chan struct{}
}

func newTransferLane(e *core.Engine, drv *ucxx.CUDADriver, cu ucxx.CUDAContext, res *resources) *transferLane {
	l := &transferLane{e: e, sink: core.NewSink(), drv: drv, cu: cu, res: res, byID: make(map[uint64]*dag.Vertex),
		quit: make(chan struct{}), finished: make(chan struct{})}
	go l.drain()
	return l
}

func (l *transferLane) Name() string { return "ucx" }

// word takes a free done word, mapping a new page of them when none is free.
func (l *transferLane) word() (*doneWord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.words) == 0 {
		page := ucxx.CAllocPage(8 * wordsPerPage)
		if page == nil {
			return nil, ucxx.StatusNoMemory.Err("done words")
		}
		var dev uintptr
		err := l.cu.Use(func() (err error) { dev, err = l.drv.MapHost(uintptr(page), 8*wordsPerPage); return err })
		if err != nil {
			ucxx.CFree(page)
			return nil, err
		}
		l.pages = append(l.pages, page)
		l.res.wordPages.Add(1)
		for i := range wordsPerPage {
			l.words = append(l.words, &doneWord{host: (*uint64)(unsafe.Add(page, 8*i)), dev: dev + uintptr(8*i)})
		}
	}
	w := l.words[len(l.words)-1]
	l.words = l.words[:len(l.words)-1]
	w.target++
	return w, nil
}

// Start posts v's transfer; its completion ends v (drain).
func (l *transferLane) Start(v *dag.Vertex) {
	work, ok := v.Payload().(TransferWork)
	if !ok {
		v.End(fmt.Errorf("execution: transfer vertex %q has no transfer (%T)", v.Name(), v.Payload()))
		return
	}
	if l.drv != nil {
		w, err := l.word()
		if err != nil {
			v.End(err)
			return
		}
		v.SetLaneData(w)
	}
	l.mu.Lock() // held across the post: the completion cannot be matched before byID has it
	var id uint64
	var err error = &TransferError{Status: ucxx.StatusCanceled}
	if !l.closing {
		if id, err = work.post(l.e, l.sink); err == nil {
			l.byID[id] = v
		}
	}
	l.mu.Unlock()
	if err != nil {
		l.end(v, err)
	}
}

// end sets v's done word, for GPU children already waiting on it, and ends v.
func (l *transferLane) end(v *dag.Vertex, err error) {
	if w, ok := v.LaneData().(*doneWord); ok {
		w.set()
	}
	v.End(err)
}

// Release takes back v's done word: every child that waits on it has queued its wait.
func (l *transferLane) Release(v *dag.Vertex) {
	if w, ok := v.LaneData().(*doneWord); ok {
		l.mu.Lock()
		l.words = append(l.words, w)
		l.mu.Unlock()
	}
}

// drain ends the lane's vertices as their completions arrive.
func (l *transferLane) drain() {
	defer close(l.finished)
	var got []notifier.Completion
	for {
		select {
		case <-l.sink.Ready():
		case <-l.quit:
			return
		}
		got = l.sink.Take(got[:0])
		for _, c := range got {
			l.mu.Lock()
			v := l.byID[c.ID]
			delete(l.byID, c.ID)
			l.mu.Unlock()
			if v == nil {
				continue
			}
			var err error
			if st := ucxx.Status(c.Status); st != ucxx.StatusOK {
				err = &TransferError{Status: st}
			}
			l.end(v, err)
		}
	}
}

// inFlight is how many transfers wait for their completion.
func (l *transferLane) inFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byID)
}

// cancelAll asks the engine to cancel every transfer in flight, and ends those that
// start from now on as cancelled (Close).
func (l *transferLane) cancelAll() {
	l.mu.Lock()
	l.closing = true
	ids := make([]uint64, 0, len(l.byID))
	for id := range l.byID {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	for _, id := range ids {
		l.e.Cancel(id)
	}
}

// close stops the drain (nothing is in flight: the caller waited for the graph) and
// unmaps and frees the pages of done words.
func (l *transferLane) close() error {
	close(l.quit)
	<-l.finished
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, p := range l.pages {
		errs = append(errs, l.cu.Use(func() error { return l.drv.UnmapHost(uintptr(p)) }))
		ucxx.CFree(p)
		l.res.wordPages.Add(-1)
	}
	l.pages, l.words = nil, nil
	return errors.Join(errs...)
}
