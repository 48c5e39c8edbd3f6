package core

import (
	"errors"
	"fmt"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The engine's error sentinels. Each says what is wrong, not where: the method that
// finds it wraps it with its own name ("PutMany: %w"), so the message names the
// operation the caller made, and errors.Is matches the sentinel through the wrap.
// Those that stand for a UCS status wrap it, so errors.Is(err, ucxx.StatusNoElem)
// holds and ucxx.StatusOf (and Python's exception class) see it.
var (
	// ErrEngineClosed: the engine was shut down.
	ErrEngineClosed = fmt.Errorf("core: engine closed: %w", ucxx.ErrClosed)
	// ErrEndpointClosed: the endpoint was closed or aborted, or never existed.
	ErrEndpointClosed = fmt.Errorf("core: endpoint closed: %w", ucxx.ErrClosed)
	// ErrListenerClosed: the listener was closed, or never existed.
	ErrListenerClosed = fmt.Errorf("core: listener closed: %w", ucxx.ErrClosed)

	// ErrBadDescriptors: an array of frame, transfer or provided-frame descriptors is
	// malformed (a count out of range, no address, an unknown memory type).
	ErrBadDescriptors = fmt.Errorf("malformed descriptors: %w", ucxx.StatusInvalidParam)
	// ErrBadRange: a memory range of length zero, one that wraps, or one outside its
	// region.
	ErrBadRange = fmt.Errorf("bad memory range: %w", ucxx.StatusInvalidParam)
	// ErrBadKey: a packed key is malformed, names a kind other than expected, or UCX
	// refuses it.
	ErrBadKey = fmt.Errorf("bad packed key: %w", ucxx.StatusInvalidParam)

	// ErrNoRegion: no memory region has this id (released, or never registered).
	ErrNoRegion = fmt.Errorf("no such memory region: %w", ucxx.StatusNoElem)
	// ErrNoRemoteKey: no unpacked remote key has this id (released, or never).
	ErrNoRemoteKey = fmt.Errorf("no such remote key: %w", ucxx.StatusNoElem)
	// ErrNoSemaphore: no semaphore has this id: released (also while the call was
	// under way), or never made.
	ErrNoSemaphore = fmt.Errorf("no such semaphore: %w", ucxx.StatusNoElem)

	// ErrNotCUDA: a buffer submitted as CUDA memory is not device memory the driver
	// knows.
	ErrNotCUDA = errors.New("core: buffer is not CUDA device memory")

	// ErrOneSidedOff: a one-sided operation on an engine started without
	// Options.OneSided.
	ErrOneSidedOff = fmt.Errorf("one-sided transfers are off in this engine: %w", ucxx.StatusUnsupported)
)
