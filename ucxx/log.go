package ucxx

// #include "log.h"
import "C"

import (
	"sync"
	"unsafe"
)

// UCX's log. By default UCX prints warnings and errors to stdout, which is the
// application's: a child whose stdout nobody reads blocks on it. CaptureLog, called
// before the first context is made (NewContext does), installs a handler that keeps
// each message UCX_LOG_LEVEL enables in a bounded buffer (1024 records; more are
// counted as dropped) for TakeLog, and prints nothing.

// LogRecord is one captured UCX log message.
type LogRecord struct {
	Level int    // the UCS log level: 0 fatal, 1 error, 2 warn, 3 diag, 4 info, 5 debug, ...
	Text  string // "file:line message"
}

var captureOnce sync.Once

// CaptureLog routes UCX's log into the buffer, once per process.
func CaptureLog() { captureOnce.Do(func() { C.ucxx_log_capture() }) }

// NotifyLog makes each captured message set *flag to 1 and signal eventfd fd (-1: no
// fd); TakeLog clears the flag once the buffer is empty. flag and fd must stay valid
// until NotifyLog(nil, -1) returns: after it, no message touches them.
func NotifyLog(flag *uint32, fd int) {
	C.ucxx_log_notify((*C.uint32_t)(unsafe.Pointer(flag)), C.int(fd))
}

// TakeLog removes and returns the captured messages, oldest first, and how many were
// dropped because the buffer was full.
func TakeLog() (records []LogRecord, dropped uint64) {
	var buf [512]C.char
	for {
		var lost C.uint64_t
		level := C.ucxx_log_take(&buf[0], C.size_t(len(buf)), &lost)
		dropped += uint64(lost)
		if level < 0 {
			return records, dropped
		}
		records = append(records, LogRecord{Level: int(level), Text: C.GoString(&buf[0])})
	}
}
