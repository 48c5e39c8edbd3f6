package core

import (
	"errors"
	"strings"
	"testing"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestErrorsNameTheirOperation: each sentinel comes back wrapped by the method the
// caller made, still matching the sentinel and its UCS status, and one-sided objects
// of each kind have a sentinel of their own.
func TestErrorsNameTheirOperation(t *testing.T) {
	p := newRMAPair(t)
	e := p.client
	sem, err := p.server.NewSemaphore(p.sep)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.server.ReleaseSemaphore(sem); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 64)
	for i := range junk {
		junk[i] = 0xff
	}
	cases := []struct {
		op       string
		err      error
		sentinel error
		status   ucxx.Status
	}{
		{"PutMany", second(e.PutMany(p.cep, 0, 1)), ErrBadDescriptors, ucxx.StatusInvalidParam},
		{"SendMulti", second(e.SendMulti(p.cep, 0, 1, 1)), ErrBadDescriptors, ucxx.StatusInvalidParam},
		{"ProvideFrames", e.ProvideFrames(1, 0, 1), ErrBadDescriptors, ucxx.StatusInvalidParam},
		{"RegisterMemory", second(e.RegisterMemory(addr(junk), 0, MemHost)), ErrBadRange, ucxx.StatusInvalidParam},
		{"UnpackKey", second(e.UnpackKey(p.cep, addr(junk), len(junk))), ErrBadKey, ucxx.StatusInvalidParam},
		{"ReleaseMemory", e.ReleaseMemory(12345), ErrNoRegion, ucxx.StatusNoElem},
		{"PackRegion", second(e.PackRegion(12345, addr(junk), 8)), ErrNoRegion, ucxx.StatusNoElem},
		{"ReleaseKey", e.ReleaseKey(12345), ErrNoRemoteKey, ucxx.StatusNoElem},
		{"ReleaseSemaphore", p.server.ReleaseSemaphore(sem), ErrNoSemaphore, ucxx.StatusNoElem},
		{"SemaphoreValue", second(p.server.SemaphoreValue(sem)), ErrNoSemaphore, ucxx.StatusNoElem},
		{"PackSemaphore", second(p.server.PackSemaphore(sem)), ErrNoSemaphore, ucxx.StatusNoElem},
		{"WaitSemaphoreOnStream", p.server.WaitSemaphoreOnStream(sem, 1, 1), ErrNoSemaphore, ucxx.StatusNoElem},
	}
	for _, c := range cases {
		switch {
		case c.err == nil:
			t.Errorf("%s: no error", c.op)
		case !strings.HasPrefix(c.err.Error(), c.op+": "):
			t.Errorf("%s: the error does not name it: %q", c.op, c.err)
		case !errors.Is(c.err, c.sentinel):
			t.Errorf("%s: %v does not match %v", c.op, c.err, c.sentinel)
		case !errors.Is(c.err, c.status) || ucxx.StatusOf(c.err) != c.status:
			t.Errorf("%s: %v carries status %v, want %v", c.op, c.err, ucxx.StatusOf(c.err), c.status)
		}
	}
}

func second[T any](_ T, err error) error { return err }
