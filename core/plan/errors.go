package plan

import (
	"errors"
	"fmt"
	"strings"
)

// The package's error sentinels. Each says what kind of thing is wrong; a
// *PlanError says where (rank, lane, op, JSON path) and wraps one of them, so
// callers match with errors.Is and locate with errors.As. Errors about a call's
// sizes or buffers (CheckMessageSize, Layout, CheckBuffers) wrap ErrMessageSize or
// ErrBuffers the same way, with the rank set, and for a span Layout rejects the
// lane, op and path of its ref.
var (
	// ErrMalformed: not JSON, a required field missing, a field of the wrong type
	// or with an unknown value, an id that does not match its position, or an op
	// whose fields do not fit its kind (a put without a remote destination...).
	ErrMalformed = errors.New("malformed plan")
	// ErrUnsupportedOp: an op name MSCCL++ 0.9 does not accept (unknown, or one
	// only later versions accept), or an op form whose 0.9 behaviour differs from
	// what the plan asks for (pws on a memory channel drops its signal).
	ErrUnsupportedOp = errors.New("unsupported operation")
	// ErrOutOfRange: an index, id or chunk range outside what it refers to, or a
	// count that makes 0.9 divide by zero (input_chunks or output_chunks 0).
	ErrOutOfRange = errors.New("out of range")
	// ErrLimit: a count or size above one of the documented limits (limits.go).
	ErrLimit = errors.New("limit exceeded")
	// ErrUnmatched: synchronisation that cannot complete or pair up: a channel
	// with no reverse channel, signals and waits that do not balance, a barrier
	// whose count its thread blocks cannot reach, a semaphore acquired more often
	// than it starts at and never released, switch groups the ranks disagree on.
	ErrUnmatched = errors.New("unmatched synchronisation")
	// ErrMessageSize: the call's input and output sizes are not ones the plan can
	// run (alignment, chunk divisibility, min/max, a buffer reference or pipeline
	// window they would put outside its buffer, arithmetic overflow).
	ErrMessageSize = errors.New("message size not accepted")
	// ErrBuffers: the call's send and receive buffers do not follow the plan's
	// in-place or out-of-place convention.
	ErrBuffers = errors.New("buffers do not follow the plan's convention")
)

// PlanError is a validation failure: where it is and why. Rank, Lane and Op are -1
// when the failure is not inside one; Inner is the index inside a pipeline op, or
// -1. Path is the JSON path of the offending value ("gpus[1].threadblocks[0].ops[3]
// .src_buff[0].index"), empty when there is none (a call's sizes).
type PlanError struct {
	Rank, Lane, Op, Inner int
	Path                  string
	Msg                   string
	Err                   error
}

// Error says where and what: "plan: rank 1 lane 0 op 3 (gpus[1]...): out of range:
// index 4 + size 1 exceeds input_chunks 4".
func (e *PlanError) Error() string {
	var b strings.Builder
	b.WriteString("plan:")
	if e.Rank >= 0 {
		fmt.Fprintf(&b, " rank %d", e.Rank)
	}
	if e.Lane >= 0 {
		fmt.Fprintf(&b, " lane %d", e.Lane)
	}
	if e.Op >= 0 {
		fmt.Fprintf(&b, " op %d", e.Op)
		if e.Inner >= 0 {
			fmt.Fprintf(&b, ".%d", e.Inner)
		}
	}
	if e.Path != "" {
		fmt.Fprintf(&b, " (%s)", e.Path)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel.
func (e *PlanError) Unwrap() error { return e.Err }

// where is the position an error is reported at: the rank, lane and op indices
// and the JSON path. The path is a chain of elements, rendered only when an error
// is made, so that decoding does not build a string per field.
type where struct {
	rank, lane, op, inner int
	path                  *pathElem
}

type pathElem struct {
	parent *pathElem
	key    string // a field name, or "" for an array index
	index  int
}

func (p *pathElem) render(b *strings.Builder) {
	if p == nil {
		return
	}
	p.parent.render(b)
	switch {
	case p.key == "":
		fmt.Fprintf(b, "[%d]", p.index)
	case p.parent != nil:
		b.WriteByte('.')
		fallthrough
	default:
		b.WriteString(p.key)
	}
}

// nowhere is the position of errors about the whole plan.
var nowhere = where{rank: -1, lane: -1, op: -1, inner: -1}

func (w where) errf(sentinel error, format string, args ...any) *PlanError {
	var b strings.Builder
	w.path.render(&b)
	return &PlanError{
		Rank: w.rank, Lane: w.lane, Op: w.op, Inner: w.inner,
		Path: b.String(), Msg: fmt.Sprintf(format, args...), Err: sentinel,
	}
}

// at returns w with its path extended by a field name.
func (w where) at(key string) where {
	w.path = &pathElem{parent: w.path, key: key}
	return w
}

// idx returns w with its path extended by an array index.
func (w where) idx(i int) where {
	w.path = &pathElem{parent: w.path, index: i}
	return w
}
