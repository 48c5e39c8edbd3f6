package ucxx

import (
	"errors"
	"runtime"
	"testing"
	"time"
)

// checkWorkerAddress is parseWorkerAddress's verdict alone.
func checkWorkerAddress(address []byte, unified bool) error {
	_, err := parseWorkerAddress(address, unified)
	return err
}

// wantInvalidAddr fails t unless err is an *Error with StatusInvalidAddr.
func wantInvalidAddr(t *testing.T, err error, what string) {
	t.Helper()
	var ue *Error
	if !errors.As(err, &ue) || ue.Status != StatusInvalidAddr {
		t.Errorf("%s: %v, want StatusInvalidAddr", what, err)
	}
}

// TestCheckWorkerAddress: the addresses UCX packs here, whole and network-only, in
// address versions 2 (UCX's default) and 1, pass the check; every shorter prefix of
// them, and every header version UCX does not know, is refused with StatusInvalidAddr,
// and ConnectAddress refuses them before UCX reads them (an unknown version made UCX
// abort the process).
func TestCheckWorkerAddress(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, version := range []string{"v2", "v1"} {
		w := newContextWorker(t, map[string]string{"ADDRESS_VERSION": version})
		w.AttachEvents()
		whole, err := w.Address()
		if err != nil {
			t.Fatal(err)
		}
		network, err := w.NetworkAddress()
		if err != nil {
			t.Fatal(err)
		}
		for name, addr := range map[string][]byte{"whole": whole, "network": network} {
			if err := checkWorkerAddress(addr, false); err != nil {
				t.Errorf("%s %s address (%d bytes): %v", version, name, len(addr), err)
			}
			for n := range len(addr) {
				wantInvalidAddr(t, checkWorkerAddress(addr[:n], false), version+" "+name+" address cut short")
			}
			for v := byte(2); v < 16; v++ {
				bad := append([]byte(nil), addr...)
				bad[0] = bad[0]&^addrHeaderVersionMask | v
				wantInvalidAddr(t, checkWorkerAddress(bad, false), "an address of version nibble "+string('0'+rune(v%10)))
				_, err := w.ConnectAddressWith(bad, 1, ErrHandlingPeer)
				wantInvalidAddr(t, err, "ConnectAddress of an unknown version")
			}
		}
	}
}

// TestCheckWorkerAddressBounds: lengths, counts and indices UCX would follow out of
// the bytes or use unchecked are refused; an address of no devices passes (UCX reads
// it, and the endpoint finds nothing to reach).
func TestCheckWorkerAddressBounds(t *testing.T) {
	const v2 = addrVersion2
	cases := map[string]struct {
		addr []byte
		ok   bool
	}{
		"no devices":                  {[]byte{v2, 0, addrNullResource}, true},
		"ends after the header":       {[]byte{v2, 0}, false},
		"a uuid cut short":            {[]byte{v2, addrFlagWorkerUUID, 1, 2, 3}, false},
		"a name longer than the rest": {[]byte{v2, addrFlagDebugInfo, 200, 'a'}, false},
		"an md index past 63":         {[]byte{v2, 0, addrMDMask, 64, addrFlagLast}, false},
		"a device address too long":   {[]byte{v2, 0, 0, addrFlagLast | 4, 1, 2}, false},
		"an empty device, last":       {[]byte{v2, 0, addrMDEmptyDev, addrFlagLast}, true},
		// One device with one interface: md 0, last device with no device address;
		// checksum, 8 bytes of attributes, a last interface of a 1-byte address.
		"one interface": {[]byte{v2, 0, 0, addrFlagLast, 0xaa, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, addrFlagLast | 1, 9}, true},
		"an ep address past the end": {
			[]byte{v2, 0, 0, addrFlagLast, 0xaa, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, addrFlagLast | addrFlagHasEPAddr | 1, 9, 30, 1}, false},
	}
	for name, c := range cases {
		err := checkWorkerAddress(c.addr, false)
		if c.ok && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !c.ok {
			wantInvalidAddr(t, err, name)
		}
	}
	many := []byte{v2, 0}
	for range addrMaxResources + 1 {
		many = append(many, addrMDEmptyDev, 0) // empty devices, none last
	}
	wantInvalidAddr(t, checkWorkerAddress(many, false), "more devices than UCX lists")
	if err := checkWorkerAddress([]byte{v2, 0}, true); err != nil {
		t.Errorf("unified mode checks the header only: %v", err)
	}
}

// FuzzCheckWorkerAddress: whatever bytes come as a worker address, the check returns
// nil or StatusInvalidAddr, never reading past them (a read past them panics here);
// seeded with the addresses UCX packs here.
func FuzzCheckWorkerAddress(f *testing.F) {
	runtime.LockOSThread()
	for _, version := range []string{"v2", "v1"} {
		w := newContextWorker(f, map[string]string{"ADDRESS_VERSION": version})
		for _, get := range []func() ([]byte, error){w.Address, w.NetworkAddress} {
			addr, err := get()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(addr)
		}
	}
	runtime.UnlockOSThread()
	f.Add([]byte{addrVersion2, 0, addrNullResource})
	f.Fuzz(func(t *testing.T, addr []byte) {
		for _, unified := range []bool{false, true} {
			if err := checkWorkerAddress(addr, unified); err != nil {
				wantInvalidAddr(t, err, "a fuzzed address")
			}
		}
	})
}

// FuzzConnectAddress: whatever bytes come as a worker address, ConnectAddress returns
// an endpoint or an error, and the process survives (UCX aborted or crashed on some
// before connectable). The seeds are another worker's addresses (UCX's transports
// here: shared memory, TCP, self); an endpoint made is closed at once. One goroutine,
// locked to its thread, owns the workers (their events are the thread's).
func FuzzConnectAddress(f *testing.F) {
	type attempt struct {
		addr []byte
		err  chan error
	}
	attempts := make(chan attempt)
	seeds := make(chan [][]byte, 1)
	go func() {
		runtime.LockOSThread()
		w := newContextWorker(f, nil)
		w.AttachEvents()
		peer := newContextWorker(f, nil)
		var addrs [][]byte
		for _, get := range []func() ([]byte, error){peer.Address, peer.NetworkAddress} {
			addr, err := get()
			if err != nil {
				panic(err)
			}
			addrs = append(addrs, addr)
		}
		seeds <- addrs
		for id := uint64(1); ; id++ {
			a, ok := <-attempts
			if !ok {
				return
			}
			a.err <- connectAndClose(w, a.addr, id)
		}
	}()
	for _, s := range <-seeds {
		f.Add(s)
	}
	f.Cleanup(func() { close(attempts) })
	f.Fuzz(func(t *testing.T, addr []byte) {
		a := attempt{addr, make(chan error)}
		attempts <- a
		if err := <-a.err; err != nil {
			t.Fatal(err)
		}
	})
}

// connectAndClose makes an endpoint to addr from w and closes it, forced; an address
// ConnectAddress refuses is no failure. It fails if the close does not end within 5 s.
func connectAndClose(w *Worker, addr []byte, id uint64) error {
	ep, err := w.ConnectAddressWith(addr, id, ErrHandlingPeer)
	if err != nil {
		return nil
	}
	if _, st := ep.Close(true, id); st != StatusInProgress {
		return nil
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		w.Progress()
		done := false
		for _, ev := range w.Events() {
			if ev.Kind == EventCompletion {
				FreeRequest(ev.Ptr)
				done = done || ev.ID == id
			}
		}
		w.ResetEvents()
		if done {
			return nil
		}
	}
	return errors.New("the endpoint to a fuzzed address did not close")
}
