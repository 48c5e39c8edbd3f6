package ucxx

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestCaptureLog: with the log captured, a UCX warning (an unknown device in
// UCX_NET_DEVICES) goes to TakeLog, with its level, not to stdout.
func TestCaptureLog(t *testing.T) {
	CaptureLog()
	TakeLog() // whatever earlier tests logged
	var flag uint32
	NotifyLog(&flag, -1)
	defer NotifyLog(nil, -1)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// UCX writes to file descriptor 1 itself: point it at the pipe meanwhile.
	saved, err := syscall.Dup(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(w.Fd()), 1); err != nil {
		t.Fatal(err)
	}
	ctx, err := NewContext(map[string]string{"NET_DEVICES": "no_such_device0", "TLS": "tcp"}, 0)
	if err == nil {
		if wk, werr := ctx.NewWorker(false); werr == nil {
			wk.Close()
		}
		ctx.Close()
	}
	syscall.Dup2(saved, 1)
	syscall.Close(saved)
	w.Close()
	out := make([]byte, 4096)
	n, _ := r.Read(out)
	if flag != 1 {
		t.Fatalf("log flag %d after UCX logged; want 1", flag)
	}
	records, _ := TakeLog()
	found := false
	for _, rec := range records {
		if strings.Contains(rec.Text, "no_such_device0") && rec.Level <= 2 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no captured warning naming the device in %+v", records)
	}
	if flag != 0 {
		t.Fatalf("log flag %d after TakeLog emptied the buffer; want 0", flag)
	}
	if n > 0 && strings.Contains(string(out[:n]), "no_such_device0") {
		t.Fatalf("UCX printed to stdout: %q", out[:n])
	}
}
