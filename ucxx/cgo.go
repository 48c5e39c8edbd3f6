// Package ucxx is a thin Go layer over UCX's UCP API: context, worker, listener,
// endpoint, tag and stream operations, with typed errors carrying the UCS status.
//
// It is not safe for concurrent use: UCP objects of one worker belong to the thread
// that progresses that worker (core's progress engine). Completions are not Go
// callbacks; UCX's C callbacks append Events to the worker's event buffer, which the
// progress thread drains after each call (see shim.h).
//
// The UCX headers and libraries come from the libucx wheel; the repository's `.ucx`
// link points at it (setup.py and `make ucx` create it).
package ucxx

// #cgo CFLAGS: -I${SRCDIR}/../.ucx/include -O2 -Wall
// #cgo LDFLAGS: -L${SRCDIR}/../.ucx/lib -lucp -lucs
// #include "shim.h"
import "C"
