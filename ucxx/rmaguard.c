#define _GNU_SOURCE
#include "rmaguard.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

// am_handler is UCX's ucp_am_handler_t (src/ucp/core/ucp_context.h, the same from 1.19
// to 1.22 and master): one exported object per active-message id,
// ucp_am_handler_<ID>, which ucp_worker_set_am_handlers reads at each interface's
// creation. The rendezvous handlers have a proxy (UCP_DEFINE_AM_WITH_PROXY) that UCX
// installs instead of cb on interfaces adaptive progress deactivated, and that calls
// the original handler directly.
typedef struct {
    uint64_t features;
    uct_am_callback_t cb;
    void *tracer;
    uint32_t flags;
    uct_am_callback_t proxy_cb;
} am_handler;

// Wire offsets (UCX 1.22, all headers packed): ucp_rndv_rts_hdr_t is hdr (8), sreq
// (ep_id 8, req_id 8), address (8), size (8), opcode (1); ucp_rndv_rtr_hdr_t starts
// with sreq_id, which is 0 (UCS_PTR_MAP_KEY_INVALID) in a request to send from an
// address (a peer's get).
enum { RTS_OPCODE_OFFSET = 40, RTS_OPCODE_RMA = 2, RTR_MIN_LENGTH = 8 };

enum { GUARD_SLOTS = 1024 };
static void *_Atomic guarded[GUARD_SLOTS];
static atomic_int guarded_high; // one past the highest slot ever taken
static atomic_ullong dropped;
static uct_am_callback_t rts_handler, rtr_handler;

static int is_guarded(void *worker) {
    int n = atomic_load_explicit(&guarded_high, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (atomic_load_explicit(&guarded[i], memory_order_relaxed) == worker) return 1;
    }
    return 0;
}

static ucs_status_t rts_filter(void *arg, void *data, size_t length, unsigned flags) {
    if (length > RTS_OPCODE_OFFSET && ((const uint8_t *)data)[RTS_OPCODE_OFFSET] == RTS_OPCODE_RMA &&
        is_guarded(arg)) {
        atomic_fetch_add(&dropped, 1);
        return UCS_OK; // UCX releases the message; the peer's put never completes
    }
    return rts_handler(arg, data, length, flags);
}

static ucs_status_t rtr_filter(void *arg, void *data, size_t length, unsigned flags) {
    uint64_t sreq_id = 1;
    if (length >= RTR_MIN_LENGTH) memcpy(&sreq_id, data, sizeof(sreq_id));
    if (sreq_id == 0 && is_guarded(arg)) {
        atomic_fetch_add(&dropped, 1);
        return UCS_OK;
    }
    return rtr_handler(arg, data, length, flags);
}

// plausible checks that h looks like a rendezvous handler of a context with tag and
// active messages: known feature bits only, TAG and AM among them, both callbacks set,
// no flags (synchronous).
static int plausible(const am_handler *h) {
    const uint64_t known = ((uint64_t)1 << 9) - 1;
    return h != NULL && (h->features & ~known) == 0 && (h->features & UCP_FEATURE_TAG) &&
           (h->features & UCP_FEATURE_AM) && h->cb != NULL && h->proxy_cb != NULL && h->flags == 0;
}

int ucxx_rma_guard_install(void) {
    if (rts_handler != NULL) return 1;
    void *lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD);
    am_handler *rts = lib ? dlsym(lib, "ucp_am_handler_UCP_AM_ID_RNDV_RTS") : NULL;
    am_handler *rtr = lib ? dlsym(lib, "ucp_am_handler_UCP_AM_ID_RNDV_RTR") : NULL;
    int ok = plausible(rts) && plausible(rtr);
    if (ok) {
        rts_handler = rts->cb;
        rtr_handler = rtr->cb;
        // Without its proxy UCX installs cb everywhere (the proxy only counts messages
        // for adaptive progress, which ucxx_go's defaults turn off).
        rts->proxy_cb = NULL;
        rtr->proxy_cb = NULL;
        rts->cb = rts_filter;
        rtr->cb = rtr_filter;
    }
    if (lib) dlclose(lib);
    return ok;
}

int ucxx_rma_guard_add(void *worker) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
        void *empty = NULL;
        if (atomic_compare_exchange_strong(&guarded[i], &empty, worker)) {
            int high = atomic_load(&guarded_high);
            while (high < i + 1 && !atomic_compare_exchange_weak(&guarded_high, &high, i + 1)) {
            }
            return i;
        }
    }
    return -1;
}

void ucxx_rma_guard_remove(int slot) {
    if (slot >= 0 && slot < GUARD_SLOTS) atomic_store(&guarded[slot], NULL);
}

uint64_t ucxx_rma_guard_dropped(void) { return atomic_load(&dropped); }
