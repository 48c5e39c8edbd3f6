package ucxx

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestGatheredMessage: a message gathered from several buffers (an empty one among
// them, sizes spanning eager and rendezvous) arrives in one piece through a receive
// scattered over a different split, over TCP and over shared memory; a scattered
// receive shorter than the message reports it truncated.
func TestGatheredMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts map[string]string
	}{
		{"tcp", map[string]string{"TLS": "tcp,self"}},
		{"shared-memory", map[string]string{"MM_ERROR_HANDLING": "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newModePair(t, tc.opts, ErrHandlingPeer, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, total := range []int{9, 5000, 3<<20 + 7} {
				parts := []int{3, 0, total / 2, total - 3 - total/2}
				want := make([]byte, total)
				for i := range want {
					want[i] = byte(i*7 + total)
				}
				src := CMalloc(uint64(total))
				copy(unsafe.Slice((*byte)(src), total), want)
				sendIOV := CMalloc(uint64(len(parts) * IOVEntrySize))
				off := 0
				for i, n := range parts {
					PutIOV(sendIOV, i, uintptr(src)+uintptr(off), uint64(n))
					off += n
				}
				dst := CMalloc(uint64(total))
				recvIOV := CMalloc(uint64(2 * IOVEntrySize))
				PutIOV(recvIOV, 0, uintptr(dst), 5)
				PutIOV(recvIOV, 1, uintptr(dst)+5, uint64(total-5))

				p.server.TagRecvIOV(recvIOV, 2, 9, ^uint64(0), 1)
				if _, st := p.cep.TagSendIOV(sendIOV, len(parts), uint64(total), 9, 2); st != StatusOK && st != StatusInProgress {
					t.Fatalf("TagSendIOV: %v", st)
				}
				for range 2 {
					ev := p.await(func(ev Event) bool { return ev.Kind == EventCompletion && (ev.ID == 1 || ev.ID == 2) })
					FreeRequest(ev.Ptr)
					if ev.Status != StatusOK || (ev.ID == 1 && ev.Length != uint64(total)) {
						t.Fatalf("%d bytes: completion %+v", total, ev)
					}
				}
				if got := unsafe.Slice((*byte)(dst), total); !bytes.Equal(got, want) {
					t.Fatalf("%d bytes: received data differs from what was sent", total)
				}

				// The same message into a receive of total-1 bytes: truncated.
				PutIOV(recvIOV, 1, uintptr(dst)+5, uint64(total-6))
				p.server.TagRecvIOV(recvIOV, 2, 9, ^uint64(0), 3)
				p.cep.TagSendIOV(sendIOV, len(parts), uint64(total), 9, 4)
				for range 2 {
					ev := p.await(func(ev Event) bool { return ev.Kind == EventCompletion && (ev.ID == 3 || ev.ID == 4) })
					FreeRequest(ev.Ptr)
					if ev.ID == 3 && ev.Status != StatusMessageTruncated {
						t.Fatalf("%d bytes into %d: status %v, want truncated", total, total-1, ev.Status)
					}
				}
				for _, b := range []unsafe.Pointer{src, sendIOV, dst, recvIOV} {
					CFree(b)
				}
			}
		})
	}
}
