package pybridge

import (
	"strings"
	"testing"
)

// TestCommCancelNewKeepsFewTombstones: cancels of calls that never begin (or came
// after their call returned) leave at most maxTombstones closed channels; a call
// cancelled before it begins fails at once as cancelled, without listening.
func TestCommCancelNewKeepsFewTombstones(t *testing.T) {
	const base = 1 << 40 // tokens no other test uses
	for i := range uint64(10 * maxTombstones) {
		if found, err := CommCancelNew(base + i); found || err != nil {
			t.Fatalf("CommCancelNew of a call not under way: %v %v", found, err)
		}
	}
	comms.Lock()
	kept := len(comms.forming)
	comms.Unlock()
	if kept > maxTombstones {
		t.Fatalf("%d tombstones kept after %d late cancels; at most %d", kept, 10*maxTombstones, maxTombstones)
	}
	last := uint64(base + 10*maxTombstones - 1)
	_, err := CommNew(0, 2, "127.0.0.1:1", "", 60_000, last)
	if err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("CommNew after its cancel: %v", err)
	}
	comms.Lock()
	_, left := comms.forming[last]
	comms.Unlock()
	if left {
		t.Fatal("the call left its token behind")
	}
}
