package pybridge

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// AMSend queues an active message of n bytes at addr on endpoint ep; memType and
// stream as TagSend's.
func AMSend(ep uint64, addr uintptr, n uint64, memType int, stream uint64) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.AMSend(ep, addr, n, memType, uintptr(stream))
}

// AMRecv queues a receive of ep's next active message; the completion's length is the
// address of a one-frame block (see RecvMulti) the caller frees with free().
func AMRecv(ep uint64) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.AMRecv(ep)
}

// TagProbe returns "found sender_tag length handle" (found is 0 or 1; handle is non-zero
// when remove took the message).
func TagProbe(tag uint64, mask uint64, remove bool) (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	p, err := e.TagProbe(tag, mask, remove)
	if err != nil {
		return "", err
	}
	found := 0
	if p.Found {
		found = 1
	}
	return fmt.Sprintf("%d %d %d %d", found, p.SenderTag, p.Length, p.Handle), nil
}

// RecvProbed receives into n bytes at addr the message TagProbe removed as handle.
func RecvProbed(handle uint64, addr uintptr, n uint64) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.RecvProbed(handle, addr, n)
}

// minWorkerAddress is shorter than any worker address UCX packs (a header and one
// device): shorter input is refused before UCX parses it.
const minWorkerAddress = 16

// ConnectWorkerAddress creates an endpoint to a hex-encoded worker address and returns
// its handle. The endpoint has UCX's peer error handling when errorHandling is set.
func ConnectWorkerAddress(address string, errorHandling bool) (h uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	b, derr := hex.DecodeString(address)
	// UCX asserts, aborting the process, on an address whose first byte's low nibble is
	// not a version it knows (0 or 1): refuse those here.
	if derr != nil || len(b) < minWorkerAddress || b[0]&0x0f > 1 {
		return 0, fmt.Errorf("ConnectWorkerAddress: not a worker address: %w", ucxx.StatusInvalidAddr)
	}
	return e.ConnectAddressWith(b, endpointOptions(errorHandling))
}

// Config returns the UCX configuration of the running context as a JSON object.
func Config() (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	cfg, err := e.Config()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}

// UCXInfo returns UCX's description of the context ("context") or of the worker
// (anything else).
func UCXInfo(which string) (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	c, w, err := e.Info()
	if which == "context" {
		return c, err
	}
	return w, err
}
