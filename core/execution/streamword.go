package execution

import (
	"os"
	"sync/atomic"
)

// streamWord is a GPU lane stream's progress word: 64 bits of pinned host memory,
// mapped for every device at its host address, that the stream sets to each vertex's
// number once the vertex's work is done (cuStreamWriteValue64, which fences the
// work's memory writes before the store). The lane's poller learns an end by reading
// the word, and a child on another stream waits for it on the device
// (cuStreamWaitValue64, GEQ), so no thread asks the driver while kernels are being
// launched: a poller spinning on cuEventQuery held the driver's lock against the
// launching thread (on the lent H200, a 3.7 µs cuLaunchKernel took 15-25 µs beside one
// such poller: BenchmarkLaunchRawPolled).
type streamWord struct {
	host *uint64
	dev  uintptr       // the address devices see it at (= host)
	next atomic.Uint64 // the number of the stream's last queued vertex
}

// reached reports whether the stream has finished the work of the vertex numbered
// seq: the word is at least seq, compared cyclically as the device's GEQ wait does.
func (w *streamWord) reached(seq uint64) bool {
	return int64(atomic.LoadUint64(w.host)-seq) >= 0
}

// useStreamWords gives each GPU lane stream a word (UCXGO_DAG_STREAM_WORDS=0: stop
// events mark every end, as before the words; the tests run both).
var useStreamWords = os.Getenv("UCXGO_DAG_STREAM_WORDS") != "0"
