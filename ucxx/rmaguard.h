#ifndef UCXX_RMAGUARD_H
#define UCXX_RMAGUARD_H

#include <stdint.h>

// The RMA guard: UCX (1.22) serves a peer's one-sided rendezvous, a put into or a get
// from whatever address the peer names, in every context with tag or active-message
// features, remote memory access or not. ucxx_rma_guard_install puts a filter in
// front of the two active-message handlers that start them (RNDV_RTS with an opcode
// other than tag or active message, RNDV_RTR without a send request: src/ucp/rndv/rndv.c ucp_rndv_rts_handler,
// src/ucp/rndv/proto_rndv.c ucp_proto_rndv_handle_rtr); the filter drops them for the
// workers registered with ucxx_rma_guard_add and hands everything else to UCX's own
// handler. UCX reads the handlers when it creates a worker's interfaces, so the
// filter covers workers created after the install. It returns 1 when the filter is
// in place (now or before), 0 when this UCX's handlers are not laid out as the filter
// expects, or the UCX version is not one whose wire it was written for (1.19 to 1.22):
// it then changes nothing. Not safe for concurrent calls: rmaguard.go makes it once.
int ucxx_rma_guard_install(void);

// ucxx_rma_guard_add registers a worker (ucp_worker_h) whose peers may not start
// one-sided transfers, before its address is given to anyone; it returns the slot to
// pass to ucxx_rma_guard_remove, or -1 when every slot is taken. Safe from any thread,
// as are the filter's lookups.
int ucxx_rma_guard_add(void *worker);

// ucxx_rma_guard_remove frees a slot of ucxx_rma_guard_add, after the worker's
// destroy (UCX may still run its handlers while destroying it). A worker made at the
// same address in between counts as guarded until this call: it has no peers yet.
void ucxx_rma_guard_remove(int slot);

// ucxx_rma_guard_selftest runs the filters' decisions on made-up messages for a
// registered and an unregistered address: 0 when each is as it should be, else the
// number of the first case that is not (rmaguard_test.go).
int ucxx_rma_guard_selftest(void);

// ucxx_rma_guard_dropped counts the requests the filter dropped since the process
// started.
uint64_t ucxx_rma_guard_dropped(void);

// ucxx_rma_guard_fill_for_test takes every free slot with an address standing in for a
// worker and returns how many it took; ucxx_rma_guard_unfill_for_test frees those
// (rmaguard_test.go: what a worker made with no slot left gets).
int ucxx_rma_guard_fill_for_test(void);
void ucxx_rma_guard_unfill_for_test(void);

#endif
