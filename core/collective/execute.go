package collective

import (
	"hash/fnv"
	"strconv"

	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// Execute runs plan p with the other ranks, which make the same call (MSCCL++'s
// Executor::execute): send and recv as the plan's in-place convention says,
// reductions over elements of type t with op (0: each op's reduce_op).
//
// Errors: the executor's (executor.Execute).
func (c *Communicator) Execute(p *plan.Plan, send, recv executor.Buffer, t reduce.DType, op reduce.Op) error {
	if err := c.open(); err != nil {
		return err
	}
	return c.x.Execute(executor.Call{Plan: p, Send: send, Recv: recv, DType: t, Op: op, Describe: describe("execute", -1)})
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
