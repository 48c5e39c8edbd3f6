package collective

import (
	"hash/fnv"
	"strconv"

	"github.com/ucxx-go/ucxx-go/core/executor"
)

// Execute runs call's plan with the other ranks, which make the same call (MSCCL++'s
// Executor::execute): send and recv as the plan's in-place convention says,
// reductions over elements of type DType with Op (0: each op's reduce_op).
//
// Errors: the executor's (executor.Execute).
func (c *Communicator) Execute(call executor.Call) error {
	return runHere(c.StartExecute(call))
}

// StartExecute is Execute as StartCollective is Collective.
func (c *Communicator) StartExecute(call executor.Call) (rest func() error, err error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	call.Describe = describe("execute", -1)
	return c.x.Start(call)
}

// Synchronize waits until every stream-ordered call (executor.Call.Ordered) this
// communicator made has ended on the device, and returns the first failure one met
// (the communicator's calls fail after it).
//
// Errors: ErrClosed; the executor's (executor.Synchronize).
func (c *Communicator) Synchronize() error {
	if err := c.open(); err != nil {
		return err
	}
	return c.x.Synchronize()
}

// StartSynchronize is Synchronize for a caller that must not wait: it takes its
// place after the calls made so far and returns the wait, to be run exactly once
// (executor.StartSynchronize).
func (c *Communicator) StartSynchronize() (rest func() error, err error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	return c.x.StartSynchronize(), nil
}

// describe is a call's description for the executor's fingerprint: the collective
// and its root, so that ranks calling different collectives with one plan, or
// different roots, fail with ErrMismatch.
func describe(kind string, root int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte(strconv.Itoa(root)))
	return h.Sum64()
}
