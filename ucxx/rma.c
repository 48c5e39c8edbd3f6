// One-sided operations: see rma.h.
#include "rma.h"

#include <string.h>

#include "shim.h"

ucs_status_t ucxx_mem_map(ucp_context_h ctx, uintptr_t addr, size_t len, int mem_type, ucp_mem_h *out) {
    ucp_mem_map_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = (void *)addr;
    p.length = len;
    if (mem_type >= 0) {
        p.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
        p.memory_type = (ucs_memory_type_t)mem_type;
    }
    return ucp_mem_map(ctx, &p, out);
}

ucs_status_t ucxx_rkey_pack(ucp_context_h ctx, ucp_mem_h memh, void **buf, size_t *len) {
    return ucp_rkey_pack(ctx, memh, buf, len);
}

static void rma_param(ucp_request_param_t *p, ucp_mem_h memh, int mem_type, uint64_t id) {
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = ucxx_send_cb;
    p->user_data = (void *)(uintptr_t)id;
    if (memh != NULL) {
        p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        p->memh = memh;
    }
    ucxx_set_memtype(p, mem_type);
}

ucs_status_t ucxx_put(ucp_ep_h ep, uintptr_t buf, size_t len, uint64_t remote, ucp_rkey_h rkey,
                      ucp_mem_h memh, int mem_type, uint64_t id, void **req) {
    ucp_request_param_t p;
    rma_param(&p, memh, mem_type, id);
    return ucxx_finish(ucp_put_nbx(ep, (const void *)buf, len, remote, rkey, &p), id, len, 0, req);
}

ucs_status_t ucxx_get(ucp_ep_h ep, uintptr_t buf, size_t len, uint64_t remote, ucp_rkey_h rkey,
                      ucp_mem_h memh, int mem_type, uint64_t id, void **req) {
    ucp_request_param_t p;
    rma_param(&p, memh, mem_type, id);
    return ucxx_finish(ucp_get_nbx(ep, (void *)buf, len, remote, rkey, &p), id, len, 0, req);
}

ucs_status_t ucxx_ep_flush(ucp_ep_h ep, uint64_t id, void **req) {
    ucp_request_param_t p;
    ucxx_send_param(&p, id);
    return ucxx_finish(ucp_ep_flush_nbx(ep, &p), id, 0, 0, req);
}
