// One-sided operations (RMA and atomics) of package ucxx: memory registration, remote
// keys, put, get and flush. As for the rest of the shim, the
// operations run on the worker's progress thread and report their end through the
// event buffer (shim.h).
#ifndef UCXX_RMA_H
#define UCXX_RMA_H

#include <stdint.h>
#include <stddef.h>
#include <ucp/api/ucp.h>

// ucxx_mem_map registers len bytes at addr of memory type mem_type (-1: UCX detects).
ucs_status_t ucxx_mem_map(ucp_context_h ctx, uintptr_t addr, size_t len, int mem_type, ucp_mem_h *out);

// ucxx_rkey_pack packs memh's remote key into a buffer UCX allocated (release it with
// ucp_rkey_buffer_release).
ucs_status_t ucxx_rkey_pack(ucp_context_h ctx, ucp_mem_h memh, void **buf, size_t *len);

// Each operation below returns UCS_INPROGRESS with *req set while it runs, or its
// final status with its completion event pushed (shim.h's convention). memh may be
// NULL (UCX registers the local buffer itself, or copies).
ucs_status_t ucxx_put(ucp_ep_h ep, uintptr_t buf, size_t len, uint64_t remote, ucp_rkey_h rkey,
                      ucp_mem_h memh, int mem_type, uint64_t id, void **req);
ucs_status_t ucxx_get(ucp_ep_h ep, uintptr_t buf, size_t len, uint64_t remote, ucp_rkey_h rkey,
                      ucp_mem_h memh, int mem_type, uint64_t id, void **req);
ucs_status_t ucxx_ep_flush(ucp_ep_h ep, uint64_t id, void **req);

#endif
