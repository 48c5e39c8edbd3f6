package ucxx

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
)

// Status is a UCS status code (ucs_status_t): 0 is success, negative values are errors.
type Status int64

// The statuses that callers test for by name.
const (
	StatusOK               = Status(C.UCS_OK)
	StatusInProgress       = Status(C.UCS_INPROGRESS)
	StatusNoMessage        = Status(C.UCS_ERR_NO_MESSAGE)
	StatusNoResource       = Status(C.UCS_ERR_NO_RESOURCE)
	StatusIOError          = Status(C.UCS_ERR_IO_ERROR)
	StatusNoMemory         = Status(C.UCS_ERR_NO_MEMORY)
	StatusNoElem           = Status(C.UCS_ERR_NO_ELEM)
	StatusInvalidParam     = Status(C.UCS_ERR_INVALID_PARAM)
	StatusInvalidAddr      = Status(C.UCS_ERR_INVALID_ADDR)
	StatusUnreachable      = Status(C.UCS_ERR_UNREACHABLE)
	StatusMessageTruncated = Status(C.UCS_ERR_MESSAGE_TRUNCATED)
	StatusBusy             = Status(C.UCS_ERR_BUSY)
	StatusCanceled         = Status(C.UCS_ERR_CANCELED)
	StatusTimedOut         = Status(C.UCS_ERR_TIMED_OUT)
	StatusExceedsLimit     = Status(C.UCS_ERR_EXCEEDS_LIMIT)
	StatusUnsupported      = Status(C.UCS_ERR_UNSUPPORTED)
	StatusRejected         = Status(C.UCS_ERR_REJECTED)
	StatusNotConnected     = Status(C.UCS_ERR_NOT_CONNECTED)
	StatusConnectionReset  = Status(C.UCS_ERR_CONNECTION_RESET)
	StatusEndpointTimeout  = Status(C.UCS_ERR_ENDPOINT_TIMEOUT)
	StatusAlreadyExists    = Status(C.UCS_ERR_ALREADY_EXISTS)
	StatusOutOfRange       = Status(C.UCS_ERR_OUT_OF_RANGE)
)

// String returns UCX's own description of the status.
func (s Status) String() string { return C.GoString(C.ucs_status_string(C.ucs_status_t(s))) }

// Err returns nil for StatusOK and an *Error naming op otherwise.
func (s Status) Err(op string) error {
	if s == StatusOK {
		return nil
	}
	return &Error{Op: op, Status: s}
}

// Error is a failed UCX call: which operation, and the UCS status it returned.
type Error struct {
	Op     string // where it happened, e.g. "Endpoint.TagSend"
	Status Status
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (UCS status %d)", e.Op, e.Status, int64(e.Status))
}

// Is lets errors.Is(err, ucxx.StatusCanceled) match on the status alone.
func (e *Error) Is(target error) bool {
	var s Status
	switch t := target.(type) {
	case Status:
		s = t
	default:
		return false
	}
	return e.Status == s
}

// Error makes Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

// ErrClosed is returned for any use of an object after its Close. It is also
// os.ErrClosed (errors.Is), whose text ("file already closed") it does not repeat:
// what was closed is not a file.
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string        { return "ucxx: use of closed object" }
func (closedError) Is(target error) bool { return target == os.ErrClosed }

// StatusOf returns the UCS status an error carries: the Error's status, or
// StatusIOError for an error that carries none, and StatusOK for nil.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var s Status
	if errors.As(err, &s) {
		return s
	}
	return StatusIOError
}
