package pybridge

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// What the bridge promises Python without an engine running: error prefixes, panics
// turned into errors, the encoding of inline results, the parsing of Start's
// arguments. roundtrip_test.go drives a running engine through the same functions.

// errPrefix is python/ucxx_go/_bridge.py's _PREFIX: the Python side maps an error to
// its exception class by it.
var errPrefix = regexp.MustCompile(`^\[(?:ucs (-?\d+)|(closed))\] `)

// parseBridgeError splits an error returned by a bridge function the way _bridge.py's
// translate does: closed, or the UCS status, and the text after the prefix. It fails
// the test for an error Python could not classify.
func parseBridgeError(t *testing.T, err error) (closed bool, st ucxx.Status, text string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	m := errPrefix.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("error %q has no prefix Python recognises", msg)
	}
	text = msg[len(m[0]):]
	if m[2] != "" {
		return true, 0, text
	}
	n, perr := strconv.ParseInt(m[1], 10, 64)
	if perr != nil {
		t.Fatalf("error %q: status %q: %v", msg, m[1], perr)
	}
	return false, ucxx.Status(n), text
}

// wantStatusError checks that err carries "[ucs <want>] ".
func wantStatusError(t *testing.T, err error, want ucxx.Status) string {
	t.Helper()
	closed, st, text := parseBridgeError(t, err)
	if closed || st != want {
		t.Fatalf("error %q: want status %d (%v)", err, int64(want), want)
	}
	return text
}

// wantClosedError checks that err carries "[closed] ".
func wantClosedError(t *testing.T, err error) string {
	t.Helper()
	closed, _, text := parseBridgeError(t, err)
	if !closed {
		t.Fatalf("error %q: want the [closed] prefix", err)
	}
	return text
}

func TestBridgeErrorPrefixes(t *testing.T) {
	plain := errors.New("something broke")
	for _, c := range []struct {
		name   string
		err    error
		closed bool
		st     ucxx.Status
	}{
		{"UCX error", &ucxx.Error{Op: "Endpoint.TagSend", Status: ucxx.StatusConnectionReset}, false, ucxx.StatusConnectionReset},
		{"wrapped UCX error", fmt.Errorf("connect: %w", &ucxx.Error{Op: "x", Status: ucxx.StatusTimedOut}), false, ucxx.StatusTimedOut},
		{"bare status", ucxx.StatusBusy, false, ucxx.StatusBusy},
		{"no status", plain, false, ucxx.StatusIOError},
		{"closed", ucxx.ErrClosed, true, 0},
		{"engine closed", core.ErrEngineClosed, true, 0},
		{"endpoint closed", core.ErrEndpointClosed, true, 0},
		{"listener closed", core.ErrListenerClosed, true, 0},
		{"not started", errNotStarted, true, 0},
	} {
		got := bridgeError(c.err)
		closed, st, text := parseBridgeError(t, got)
		if closed != c.closed || st != c.st {
			t.Errorf("%s: %q parses as closed=%t status %d; want closed=%t status %d", c.name, got, closed, st, c.closed, c.st)
		}
		if text != c.err.Error() {
			t.Errorf("%s: text after the prefix %q; want the error's own %q", c.name, text, c.err.Error())
		}
	}
	if bridgeError(nil) != nil {
		t.Error("bridgeError(nil) is not nil")
	}
}

// guarded is how every bridge function is written: a deferred guard on its named
// error result.
func guarded(f func() (int, error)) (n int, err error) {
	defer guard(&err)
	return f()
}

func TestGuard(t *testing.T) {
	t.Run("panic", func(t *testing.T) {
		n, err := guarded(func() (int, error) { panic("index out of range, say") })
		text := wantStatusError(t, err, ucxx.StatusIOError)
		if n != 0 || text != "ucxx-go internal error: index out of range, say" {
			t.Fatalf("after a panic: %d, %q", n, text)
		}
	})
	t.Run("runtime panic", func(t *testing.T) {
		_, err := guarded(func() (int, error) {
			var s []int
			return s[len(s)], nil
		})
		wantStatusError(t, err, ucxx.StatusIOError)
	})
	t.Run("panic with an error", func(t *testing.T) {
		// A panic value that is a closed error is still an internal error, not a close.
		_, err := guarded(func() (int, error) { panic(ucxx.ErrClosed) })
		wantStatusError(t, err, ucxx.StatusIOError)
	})
	t.Run("error", func(t *testing.T) {
		n, err := guarded(func() (int, error) { return 7, &ucxx.Error{Op: "op", Status: ucxx.StatusNoResource} })
		wantStatusError(t, err, ucxx.StatusNoResource)
		if n != 7 {
			t.Fatalf("result %d; the guard must leave it", n)
		}
	})
	t.Run("success", func(t *testing.T) {
		if n, err := guarded(func() (int, error) { return 3, nil }); n != 3 || err != nil {
			t.Fatalf("= %d, %v; want 3, nil", n, err)
		}
	})
}

func TestTicketResult(t *testing.T) {
	if InlineDone != 1<<63 {
		t.Fatalf("InlineDone = %#x; Python tests bit 63 (_endpoint.py _INLINE_DONE)", uint64(InlineDone))
	}
	fail := errors.New("refused")
	for _, c := range []struct {
		name   string
		ticket core.Ticket
		err    error
		want   uint64
		status ucxx.Status // of the error returned; StatusOK: none
	}{
		{"queued", core.Ticket{ID: 42}, nil, 42, ucxx.StatusOK},
		{"done", core.Ticket{ID: 42, Done: true, Length: 1000}, nil, InlineDone | 1000, ucxx.StatusOK},
		{"done, empty", core.Ticket{ID: 42, Done: true}, nil, InlineDone, ucxx.StatusOK},
		{"done, long", core.Ticket{ID: 42, Done: true, Length: 1<<40 + 3}, nil, InlineDone | (1<<40 + 3), ucxx.StatusOK},
		{"failed inline", core.Ticket{ID: 42, Done: true, Status: ucxx.StatusMessageTruncated, Length: 9}, nil, 0, ucxx.StatusMessageTruncated},
		{"refused", core.Ticket{}, fail, 0, ucxx.StatusIOError},
	} {
		got, err := ticketResult(c.ticket, c.err)
		if got != c.want {
			t.Errorf("%s: result %#x; want %#x", c.name, got, c.want)
		}
		switch {
		case c.status == ucxx.StatusOK && err != nil:
			t.Errorf("%s: error %v", c.name, err)
		case c.status != ucxx.StatusOK && ucxx.StatusOf(err) != c.status:
			t.Errorf("%s: error %v; want status %v", c.name, err, c.status)
		}
		if c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("%s: error %v does not wrap the submission's %v", c.name, err, c.err)
		}
	}
}

func TestMicrosecondsFromEnv(t *testing.T) {
	const name, def = "UCXGO_TEST_MICROSECONDS", 123 * time.Microsecond
	for _, c := range []struct {
		value string
		set   bool
		want  time.Duration
	}{
		{"", false, def},
		{"", true, def},
		{"250", true, 250 * time.Microsecond},
		{"0", true, 0},
		{"-5", true, 0},
		{"1e3", true, def},
		{"fast", true, def},
	} {
		if c.set {
			t.Setenv(name, c.value)
		}
		if got := microsecondsFromEnv(name, def); got != c.want {
			t.Errorf("%s=%q (set %t): %v; want %v", name, c.value, c.set, got, c.want)
		}
	}
}

// TestNotStarted: before Start, every function that needs the engine fails as closed,
// and the ones Python calls while shutting down are harmless.
func TestNotStarted(t *testing.T) {
	if engine.Load() != nil {
		t.Fatal("an engine is running")
	}
	for name, call := range map[string]func() error{
		"Settings":           func() error { _, err := Settings(); return err },
		"Listen":             func() error { _, err := Listen("127.0.0.1", 0, true); return err },
		"CloseListener":      func() error { _, err := CloseListener(1); return err },
		"Connect":            func() error { _, err := Connect("127.0.0.1", 1, 100, true); return err },
		"EndpointInfo":       func() error { _, err := EndpointInfo(1); return err },
		"CloseEndpoint":      func() error { _, err := CloseEndpoint(1, 100); return err },
		"AbortEndpoint":      func() error { _, err := AbortEndpoint(1); return err },
		"WorkerAddress":      func() error { _, err := WorkerAddress(); return err },
		"Stats":              func() error { _, err := Stats(); return err },
		"TagSend":            func() error { _, err := TagSend(1, 0, 0, 0, 0, 0, 1); return err },
		"TagRecv":            func() error { _, err := TagRecv(1, 0, 0, 0, 0, 0, 0, 1); return err },
		"SendMulti":          func() error { _, err := SendMulti(1, 0, 0, 0); return err },
		"RecvMulti":          func() error { _, err := RecvMulti(1, 0, 0); return err },
		"RecvMultiAllocated": func() error { _, err := RecvMultiAllocated(1, 0, true, 0, 0); return err },
		"ProvideFrames":      func() error { _, err := ProvideFrames(0, 0, 0); return err },
		"Cancel":             func() error { _, err := Cancel(1); return err },
		"AMSend":             func() error { _, err := AMSend(1, 0, 0, 0, 0); return err },
		"AMRecv":             func() error { _, err := AMRecv(1); return err },
		"TagProbe":           func() error { _, err := TagProbe(0, 0, false); return err },
		"RecvProbed":         func() error { _, err := RecvProbed(1, 0, 0); return err },
		"ConnectWorkerAddress": func() error {
			_, err := ConnectWorkerAddress("00", true)
			return err
		},
		"Config":             func() error { _, err := Config(); return err },
		"UCXInfo":            func() error { _, err := UCXInfo("context"); return err },
		"EndpointTransports": func() error { _, err := EndpointTransports(1); return err },
		"ProgressCPUs":       func() error { _, err := ProgressCPUs(); return err },
		"RegisterMemory":     func() error { _, err := RegisterMemory(0x1000, 8, 0); return err },
		"ReleaseMemory":      func() error { _, err := ReleaseMemory(1); return err },
		"PackRegion":         func() error { _, err := PackRegion(1, 0x1000, 8); return err },
		"UnpackKey":          func() error { _, err := UnpackKey(1, 0, 0); return err },
		"ReleaseKey":         func() error { _, err := ReleaseKey(1); return err },
		"Put":                func() error { _, err := Put(1, 1, 0, 0, 0, 0, 0, 0, 1); return err },
		"Get":                func() error { _, err := Get(1, 1, 0, 0, 0, 0, 0, 0, 1); return err },
		"PutMany":            func() error { _, err := PutMany(1, 0, 0); return err },
		"Flush":              func() error { _, err := Flush(1); return err },
		"NewSemaphore":       func() error { _, err := NewSemaphore(1); return err },
		"PackSemaphore":      func() error { _, err := PackSemaphore(1); return err },
		"SemaphoreValue":     func() error { _, err := SemaphoreValue(1); return err },
		"WaitSemaphore":      func() error { _, err := WaitSemaphore(1, 1); return err },
		"Signal":             func() error { _, err := Signal(1, 1, 1); return err },
		"ReleaseSemaphore":   func() error { _, err := ReleaseSemaphore(1); return err },
		"WaitSemaphoreOnStream": func() error {
			_, err := WaitSemaphoreOnStream(1, 1, 0)
			return err
		},
	} {
		err := call()
		if err == nil {
			t.Errorf("%s before Start succeeded", name)
			continue
		}
		if closed, _, _ := parseBridgeError(t, err); !closed {
			t.Errorf("%s before Start: %q; want the [closed] prefix", name, err)
		}
	}
	if ok, err := Stop(100); ok || err != nil {
		t.Errorf("Stop before Start = %t, %v; want false, nil", ok, err)
	}
	if ok, err := FreeQueue(0); !ok || err != nil {
		t.Errorf("FreeQueue before Start = %t, %v; want true, nil", ok, err)
	}
	if r, err := NotifierWait(0, 10); r != int(2) || err != nil {
		t.Errorf("NotifierWait before Start = %d, %v; want 2 (stopped), nil", r, err)
	}
	if pending, err := ConsumeWake(0); pending || err != nil {
		t.Errorf("ConsumeWake before Start = %t, %v; want false, nil", pending, err)
	}
	if v, err := Version(); v == "" || err != nil {
		t.Errorf("Version = %q, %v", v, err)
	}
}

// TestStartRejectsBadArguments: Start refuses what it cannot parse with
// InvalidParam, and an option UCX does not know with the status of ucp_config_modify,
// whose name Python looks for to raise UCXConfigError. No engine is left running.
func TestStartRejectsBadArguments(t *testing.T) {
	t.Setenv("UCX_NET_DEVICES", "lo")
	for _, c := range []struct {
		name, options, mode, limits string
	}{
		{"limits not JSON", "", "blocking", "max_frames=3"},
		{"limits not an object", "", "blocking", "[3]"},
		{"negative limit", "", "blocking", `{"max_frames": -1}`},
		{"limit not an integer", "", "blocking", `{"max_frame_bytes": "1k"}`},
		{"options not JSON", "TLS=tcp", "blocking", ""},
		{"option not a string", `{"TLS": 5}`, "blocking", ""},
		{"unknown mode", "", "turbo", ""},
	} {
		_, err := Start(c.options, c.mode, true, c.limits, "", false)
		wantStatusError(t, err, ucxx.StatusInvalidParam)
		if engine.Load() != nil {
			t.Fatalf("%s: Start failed but left an engine", c.name)
		}
	}

	_, err := Start(`{"NO_SUCH_OPTION": "1"}`, "blocking", true, "", "", false)
	closed, st, text := parseBridgeError(t, err)
	if closed || st == ucxx.StatusOK || !regexp.MustCompile(`ucp_config_modify`).MatchString(text) {
		t.Fatalf("Start with an unknown UCX option: %q; want a UCS status and ucp_config_modify in the text", err)
	}
	if engine.Load() != nil {
		t.Fatal("Start failed but left an engine")
	}
}
