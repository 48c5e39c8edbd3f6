package executor

import (
	"fmt"
	"sync"
)

// World is what the executor needs of a communicator: its rank and size, and
// ordered, bounded point-to-point messages (used only to set up segments; a call's
// data and synchronisation never pass through it).
type World interface {
	Rank() int
	Size() int
	// Send sends b to rank dst under tag and returns once it left.
	Send(dst int, tag uint16, b []byte) error
	// Recv receives the next message from rank src under tag into b and returns its
	// length; a longer message is an error.
	Recv(src int, tag uint16, b []byte) (int, error)
}

// exchange sends mine to every peer and receives one record of kind from each, in
// parallel; check vets each (it may map the peer's segment) before the acks: every
// rank acks only once it mapped everything announced to it, so after exchange
// returns nobody needs our segment's file and the caller unlinks it.
//
// Errors: the world's, decodeRecord's, check's, each naming the peer.
func exchange(w World, peers []int, mine *record, check func(peer int, r *record) error) error {
	out := mine.encode()
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = exchangeWith(w, p, out, mine.kind, check)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return &RankError{Rank: peers[i], Op: "segment setup", Err: err}
		}
	}
	return nil
}

func exchangeWith(w World, p int, out []byte, kind uint16, check func(peer int, r *record) error) error {
	sent := make(chan error, 1)
	go func() { sent <- w.Send(p, tagRecord, out) }()
	buf := make([]byte, maxRecord)
	n, err := w.Recv(p, tagRecord, buf)
	if err != nil {
		<-sent
		return err
	}
	if err := <-sent; err != nil {
		return err
	}
	r, err := decodeRecord(buf[:n], kind)
	if err == nil {
		err = check(p, r)
	}
	if err != nil {
		// Tell the peer nothing more: it fails on its own (our ack never comes, or
		// its records were fine and ours not). Send a broken ack so it fails now.
		w.Send(p, tagAck, []byte{0})
		return err
	}
	go func() { sent <- w.Send(p, tagAck, encodeAck()) }()
	ack := make([]byte, ackBytes+1)
	n, err = w.Recv(p, tagAck, ack)
	if serr := <-sent; err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if err := checkAck(ack[:n]); err != nil {
		return fmt.Errorf("the peer could not map our segment: %w", err)
	}
	return nil
}
