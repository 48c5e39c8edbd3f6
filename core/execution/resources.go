package execution

import "sync/atomic"

// resources counts what a Context made and has not released yet, for tests that
// check a closed context leaks nothing.
type resources struct {
	streams, events, modules, wordPages atomic.Int64
}

// Resources is a snapshot of what a Context holds: CUDA streams and events, loaded
// modules, and pages of transfer done words.
type Resources struct {
	Streams, Events, Modules, WordPages int64
}

func (r *resources) snapshot() Resources {
	return Resources{Streams: r.streams.Load(), Events: r.events.Load(), Modules: r.modules.Load(), WordPages: r.wordPages.Load()}
}
