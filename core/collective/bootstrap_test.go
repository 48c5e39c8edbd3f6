package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

func TestMain(m *testing.M) {
	os.Setenv("UCX_NET_DEVICES", "lo")
	os.Exit(m.Run())
}

// freeRoot returns a loopback address with a port nothing listens on now.
func freeRoot(t *testing.T) string {
	t.Helper()
	// Below the kernel's ephemeral range: a port picked from it (listening on port 0)
	// and closed again could be handed to another test's outgoing connection before
	// the root listens there ("address already in use", once in CI).
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	for i := 0; i < 64 && lo > 10001; i++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+rand.IntN(lo-10000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// world forms size communicators in this process, one goroutine per rank, with the
// sizes each rank claims (nil: all size); it returns each rank's communicator or error.
func world(t *testing.T, size int, claims []int, root string) ([]*Communicator, []error) {
	t.Helper()
	comms, errs := make([]*Communicator, size), make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		claim := size
		if claims != nil {
			claim = claims[r]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = New(Options{Rank: r, Size: claim, Root: root, Timeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	return comms, errs
}

// formed is world for size ranks that must all form it: it fails the test with the
// first rank's error.
func formed(t *testing.T, size int) []*Communicator {
	t.Helper()
	comms, errs := world(t, size, nil, freeRoot(t))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}

// twoRanks starts the ranks of a world of 2 at root with secret, each in a goroutine
// of its own as start(rank) asks; wait waits for those started and returns each
// rank's error. The communicators formed are closed at cleanup.
func twoRanks(t *testing.T, root string, secret []byte) (start func(rank int), wait func() []error) {
	comms, errs := make([]*Communicator, 2), make([]error, 2)
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	var wg sync.WaitGroup
	start = func(rank int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[rank], errs[rank] = New(Options{Rank: rank, Size: 2, Root: root, Secret: secret, Timeout: 10 * time.Second})
		}()
	}
	return start, func() []error { wg.Wait(); return errs }
}

// TestBootstrapWorld: 2 and 4 ranks form a world in which every rank reaches every
// other through the endpoints made from worker addresses.
func TestBootstrapWorld(t *testing.T) {
	for _, size := range []int{2, 4} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			comms := formed(t, size)
			var wg sync.WaitGroup
			fail := make(chan error, size*size)
			for _, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for peer := range size {
						if peer == c.Rank() {
							continue
						}
						go func() { fail <- c.Send(peer, 7, []byte(fmt.Sprintf("%d->%d", c.Rank(), peer))) }()
					}
					for peer := range size {
						if peer == c.Rank() {
							continue
						}
						buf := make([]byte, 16)
						n, err := c.Recv(peer, 7, buf)
						if want := fmt.Sprintf("%d->%d", peer, c.Rank()); err != nil || string(buf[:n]) != want {
							fail <- fmt.Errorf("rank %d from %d: %q, %v; want %q", c.Rank(), peer, buf[:n], err, want)
						}
					}
				}()
			}
			wg.Wait()
			for range size * (size - 1) {
				if err := <-fail; err != nil {
					t.Error(err)
				}
			}
			select {
			case err := <-fail:
				t.Error(err)
			default:
			}
			if err := comms[0].Send(0, 1, nil); !errors.Is(err, ucxx.StatusInvalidParam) {
				t.Errorf("a send to itself: %v", err)
			}
			for _, c := range comms { // every rank learns the world's fewest CPUs (here all alike)
				if c.peers.cpus != runtime.NumCPU() || c.coresPerRank() != max(runtime.NumCPU()/size, 1) {
					t.Errorf("rank %d: %d CPUs, %d a rank; this process may use %d", c.Rank(), c.peers.cpus, c.coresPerRank(), runtime.NumCPU())
				}
			}
		})
	}
}

// TestBootstrapSizesDisagree: a rank that claims another world size fails bootstrap,
// and so does the root, each with ErrBootstrap, promptly.
func TestBootstrapSizesDisagree(t *testing.T) {
	start := time.Now()
	_, errs := world(t, 2, []int{2, 3}, freeRoot(t))
	for r, err := range errs {
		if !errors.Is(err, ErrBootstrap) {
			t.Errorf("rank %d: %v, want ErrBootstrap", r, err)
		}
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("took %v", took)
	}
}

// TestBootstrapIgnoresStrangers: a connection to the root that sends something other
// than a hello, or a hello whose worker address UCX cannot take, is dropped and does
// not count, and one that sends nothing holds up no other; the world still forms,
// well within the timeout. Rank 1 starts only once the strangers are in, so the root
// must have dropped or passed them to count rank 1.
func TestBootstrapIgnoresStrangers(t *testing.T) {
	root := freeRoot(t)
	host, port, _ := net.SplitHostPort(root)
	var p int
	fmt.Sscan(port, &p)
	stranger, err := core.New(core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newCompletionReader(stranger)
	defer func() { stranger.Shutdown(time.Second); <-r.done; stranger.FreeQueue() }()
	start, wait := twoRanks(t, root, nil)
	start(0)
	deadline := time.Now().Add(10 * time.Second)
	// A worker address of a version UCX does not know: ucp_ep_create aborted the
	// process on it.
	garbageAddress := append([]byte{7, 0}, make([]byte, 70)...)
	// Connections that say nothing (the first held up the hellos behind it), more than
	// the root keeps waiting: the oldest are dropped.
	msgs := make([][]byte, maxPendingHellos+2)
	msgs = append(msgs, []byte("GET / HTTP/1.1\r\n\r\n"), encodeHello(hello{rank: 1, size: 2, cpus: 1, addr: garbageAddress}, nil))
	for _, msg := range msgs {
		if ep := connectToRoot(t, stranger, r, host, p, deadline); msg != nil {
			send(stranger, r, ep, tagHello, msg, deadline)
		}
	}
	start(1)
	for rank, err := range wait() {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
}

// connectToRoot connects e to the root at host:port, trying again until the root
// listens, and returns the endpoint.
func connectToRoot(t *testing.T, e *core.Engine, r *completionReader, host string, port int, deadline time.Time) uint64 {
	t.Helper()
	for {
		id, err := e.Connect(host, port, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.wait(id, deadline)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status == 0 {
			return c.Length
		}
		time.Sleep(20 * time.Millisecond) // the root may not listen yet
	}
}

// TestBootstrapSecret: with a secret, the root drops a rank that claims a place
// without its proof (even the first to claim it, which would have failed the world
// as a duplicate), and the world forms from the ranks that share it; a rank with
// another secret fails alone.
func TestBootstrapSecret(t *testing.T) {
	root := freeRoot(t)
	secret := []byte("the world's secret")
	start, wait := twoRanks(t, root, secret)
	start(0)
	// Impostors claim rank 1 first, one with another secret and one with none; each
	// is dropped by the root and fails, and the world does not.
	for _, guess := range [][]byte{[]byte("a guess"), nil} {
		c, err := New(Options{Rank: 1, Size: 2, Root: root, Secret: guess, Timeout: 3 * time.Second})
		if err == nil {
			c.Close()
			t.Fatalf("a rank with secret %q joined", guess)
		}
		t.Logf("impostor with secret %q: %v", guess, err)
	}
	start(1)
	for rank, err := range wait() {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
}

// TestBootstrapImpostorRoot: a process that holds the root's port before the root
// reads a rank's hello and answers with a table carrying everything the hello had
// (its MAC in the table's place): the rank refuses it, as it does not answer the
// rank's nonce under the world's secret. The impostor then takes the hello to the
// real root with its own address in it: the root drops it, and the world forms.
func TestBootstrapImpostorRoot(t *testing.T) {
	root := freeRoot(t)
	host, port, _ := net.SplitHostPort(root)
	p, _ := strconv.Atoi(port)
	secret := []byte("the world's secret")
	impostor, err := core.New(core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newCompletionReader(impostor)
	defer func() { impostor.Shutdown(time.Second); <-r.done; impostor.FreeQueue() }()
	lh, _, err := impostor.Listen(host, p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	start, wait := twoRanks(t, root, secret)
	start(1)
	c, err := r.wait(core.EventListenerAccept|lh, deadline)
	if err != nil {
		t.Fatal(err)
	}
	ep := c.Length
	captured, err := recv(impostor, r, ep, tagHello, make([]byte, helloHeader+maxWorkerAddress), deadline)
	if err != nil {
		t.Fatal(err)
	}
	captured = append([]byte(nil), captured...)
	h, err := decodeHello(captured)
	if err != nil {
		t.Fatal(err)
	}
	own, err := impostor.WorkerAddress()
	if err != nil {
		t.Fatal(err)
	}
	table := encodeTable(tableOK, 1, [][]byte{own, h.addr})
	copy(table[tableMACAt:tableHeader], captured[helloMACAt:helloHeader])
	if err := send(impostor, r, ep, tagTable, table, deadline); err != nil {
		t.Fatal(err)
	}
	if errs := wait(); !errors.Is(errs[1], ErrBootstrap) {
		t.Fatalf("rank 1 took the impostor's table: %v", errs[1])
	}
	impostor.CloseListener(lh)

	start, wait = twoRanks(t, root, secret)
	start(0)
	forged := append(captured[:helloHeader:helloHeader], own...)
	binary.LittleEndian.PutUint32(forged[16:], uint32(len(own)))
	if err := send(impostor, r, connectToRoot(t, impostor, r, host, p, deadline), tagHello, forged, deadline); err != nil {
		t.Fatal(err)
	}
	start(1)
	for rank, err := range wait() {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
}

// TestBootstrapRecords: hellos and tables that are not what a rank sends are refused.
func TestBootstrapRecords(t *testing.T) {
	addr := []byte("worker-address")
	h := func(rank, size, cpus int, addr []byte) []byte {
		return encodeHello(hello{rank: rank, size: size, cpus: cpus, addr: addr}, nil)
	}
	key, n := worldKey("s"), newNonce()
	good := encodeHello(hello{rank: 1, size: 2, cpus: 12, addr: addr, nonce: n}, key)
	if got, err := decodeHello(good); err != nil || got.rank != 1 || got.size != 2 || got.cpus != 12 ||
		string(got.addr) != string(addr) || got.nonce != n || key.checkHello(good) != nil {
		t.Fatalf("a good hello: %+v %v %v", got, err, key.checkHello(good))
	}
	// A hello's MAC holds for that hello only: another hello given it is refused.
	for name, other := range map[string]hello{
		"another nonce":   {rank: 1, size: 2, cpus: 12, addr: addr, nonce: newNonce()},
		"another rank":    {rank: 2, size: 3, cpus: 12, addr: addr, nonce: n},
		"another address": {rank: 1, size: 2, cpus: 12, addr: []byte("another-address"), nonce: n},
	} {
		forged := encodeHello(other, nil)
		copy(forged[helloMACAt:helloHeader], good[helloMACAt:helloHeader])
		if err := key.checkHello(forged); !errors.Is(err, ErrBootstrap) {
			t.Errorf("%s with the good hello's MAC: %v", name, err)
		}
	}
	if err := worldKey("t").checkHello(good); !errors.Is(err, ErrBootstrap) {
		t.Errorf("another key: %v", err)
	}
	noCPUs := append([]byte(nil), good...)
	noCPUs[6], noCPUs[7] = 0, 0
	oldVersion := append([]byte(nil), good...)
	oldVersion[4] = 2
	for name, b := range map[string][]byte{
		"short":         good[:10],
		"truncated":     good[:len(good)-1],
		"rank 0":        h(0, 2, 1, addr),
		"rank >= size":  h(2, 2, 1, addr),
		"huge world":    h(1, MaxRanks+1, 1, addr),
		"empty address": h(1, 2, 1, nil),
		"no CPUs":       noCPUs,
		"version 2":     oldVersion,
	} {
		if _, err := decodeHello(b); !errors.Is(err, ErrBootstrap) {
			t.Errorf("%s hello: %v", name, err)
		}
	}
	table := encodeTable(tableOK, 6, [][]byte{[]byte("a"), []byte("bb")})
	key.sealTable(table, tableDigest(table), n)
	if got, cpus, err := decodeTable(table, 2); err != nil || string(got[1]) != "bb" || cpus != 6 || key.checkTable(table, n) != nil {
		t.Fatalf("a good table: %q %d %v %v", got, cpus, err, key.checkTable(table, n))
	}
	// A table's MAC holds for its rank's nonce, under its key, for its bytes only.
	changed := append([]byte(nil), table...)
	changed[len(changed)-1] = 'c'
	for name, err := range map[string]error{
		"another nonce": key.checkTable(table, newNonce()),
		"another key":   worldKey("t").checkTable(table, n),
		"changed":       key.checkTable(changed, n),
		"short":         key.checkTable(table[:tableHeader-1], n),
	} {
		if !errors.Is(err, ErrBootstrap) {
			t.Errorf("%s table: %v", name, err)
		}
	}
	zeroCPUs := append([]byte(nil), table...)
	clear(zeroCPUs[12:16])
	for name, c := range map[string]struct {
		b    []byte
		size int
	}{
		"wrong size": {table, 3},
		"truncated":  {table[:len(table)-1], 2},
		"trailing":   {append(append([]byte(nil), table...), 0), 2},
		"failed":     {encodeTable(tableDuplicateRank, 1, nil), 2},
		"no CPUs":    {zeroCPUs, 2},
	} {
		if _, _, err := decodeTable(c.b, c.size); !errors.Is(err, ErrBootstrap) {
			t.Errorf("%s table: %v", name, err)
		}
	}
}

// TestBarrier: 3 and 5 ranks pass several barriers; none returns before the last rank
// arrived; a closed communicator refuses.
func TestBarrier(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			comms := formed(t, size)
			var arrived sync.WaitGroup
			arrived.Add(size - 1)
			last := make(chan struct{})
			early := make(chan int, size)
			var wg sync.WaitGroup
			for _, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if c.Rank() == size-1 {
						arrived.Wait() // everyone else is in the barrier already
						close(last)
					} else {
						arrived.Done()
					}
					if err := c.Barrier(); err != nil {
						t.Errorf("rank %d: %v", c.Rank(), err)
					}
					select {
					case <-last:
					default:
						early <- c.Rank()
					}
					for range 3 {
						if err := c.Barrier(); err != nil {
							t.Errorf("rank %d, again: %v", c.Rank(), err)
						}
					}
				}()
			}
			wg.Wait()
			close(early)
			for r := range early {
				t.Errorf("rank %d left the barrier before the last rank came", r)
			}
		})
	}
}

// TestMessageBarrierDropsWhatATimedOutOneLeft: rank 0's barrier by messages gives up
// on rank 1 (ErrTimeout); rank 1's message of that barrier comes later. Rank 0's next
// barrier must not take it for its own: it returns only once rank 1 entered that one
// too. Rank 1 enters it once rank 0 returned or 500 ms passed.
func TestMessageBarrierDropsWhatATimedOutOneLeft(t *testing.T) {
	comms := formed(t, 2)
	comms[0].timeout = 200 * time.Millisecond
	if err := comms[0].barrierMessages(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("rank 0's barrier without rank 1: %v, want ErrTimeout", err)
	}
	if err := comms[1].barrierMessages(); err != nil { // rank 0's message of it is there
		t.Fatalf("rank 1's late barrier: %v", err)
	}
	comms[0].timeout = 10 * time.Second
	left := make(chan error, 1)
	go func() { left <- comms[0].barrierMessages() }()
	select {
	case err := <-left:
		t.Fatalf("rank 0 left its barrier (%v) before rank 1 entered it", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := comms[1].barrierMessages(); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if err := <-left; err != nil {
		t.Fatalf("rank 0: %v", err)
	}
}

// TestBootstrapCancelled: a root whose bootstrap is cancelled (Options.Cancel) while
// it waits for the other ranks returns ErrCanceled at once and lets go of its port: a
// world then forms at the same root.
func TestBootstrapCancelled(t *testing.T) {
	root := freeRoot(t)
	cancel := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		c, err := New(Options{Rank: 0, Size: 2, Root: root, Timeout: 30 * time.Second, Cancel: cancel})
		if c != nil {
			c.Close()
		}
		ended <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if conn, err := net.Dial("tcp", root); err == nil { // the root listens
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the root never listened")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	close(cancel)
	if err := <-ended; !errors.Is(err, ErrCanceled) {
		t.Fatalf("the cancelled root's New: %v, want ErrCanceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the cancelled New took %v to return", took)
	}
	for r, err := range func() []error { _, errs := world(t, 2, nil, root); return errs }() {
		if err != nil {
			t.Errorf("rank %d at the cancelled root's address: %v", r, err)
		}
	}
}

// TestBootstrapCancelledBeforeItBegins: a New whose Cancel is closed already returns
// ErrCanceled without listening: at a root it could not listen at either, the cancel,
// not the bind, is the error.
func TestBootstrapCancelledBeforeItBegins(t *testing.T) {
	cancel := make(chan struct{})
	close(cancel)
	for range 20 {
		c, err := New(Options{Rank: 0, Size: 2, Root: "192.0.2.1:1", Timeout: 30 * time.Second, Cancel: cancel})
		if c != nil || !errors.Is(err, ErrCanceled) {
			t.Fatalf("New with its Cancel closed: %v, %v; want ErrCanceled", c, err)
		}
	}
}

// TestMessageBarrierOutOfStep: a rank whose barrier meets a later barrier's message
// fails with ErrBarrierOutOfStep, not a barrier passed; the other drops the earlier
// message and times out.
func TestMessageBarrierOutOfStep(t *testing.T) {
	comms := formed(t, 2)
	comms[1].messageBarriers = 5 // as if rank 1 had met 5 barriers rank 0 never did
	comms[1].timeout = 300 * time.Millisecond
	ahead := make(chan error, 1)
	go func() { ahead <- comms[1].barrierMessages() }()
	if err := comms[0].barrierMessages(); !errors.Is(err, ErrBarrierOutOfStep) {
		t.Errorf("rank 0 met barrier 6's message in its barrier 1: %v, want ErrBarrierOutOfStep", err)
	}
	if err := <-ahead; !errors.Is(err, ErrTimeout) {
		t.Errorf("rank 1, with only barrier 1's message: %v, want ErrTimeout", err)
	}
}

// TestMessageBarrierRefusesRepeatedNumbers: a rank that sends a barrier number it sent
// before (or 0, which no barrier has) is out of step: the barrier fails at once, not
// dropping such messages for as long as they keep coming, each one restarting the
// wait's timeout.
func TestMessageBarrierRefusesRepeatedNumbers(t *testing.T) {
	comms := formed(t, 2)
	comms[0].timeout = 10 * time.Second
	ended := make(chan error, 1)
	go func() { ended <- comms[0].barrierMessages() }()
	stale := binary.LittleEndian.AppendUint64(nil, 0)
	for range 3 {
		if err := comms[1].Send(0, barrierTag, stale); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-ended:
		if !errors.Is(err, ErrBarrierOutOfStep) {
			t.Fatalf("barrier fed barrier number 0: %v, want ErrBarrierOutOfStep", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the barrier still waits, dropping repeated old numbers")
	}
}
