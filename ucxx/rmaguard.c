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
// (ep_id 8, req_id 8), address (8), size (8), opcode (1). ucp_rndv_rts_handler takes
// opcode 0 for a tag message, 1 for an active message and any other for a one-sided
// put (the check that it is 2 is an assertion, compiled out of release builds).
// ucp_rndv_rtr_hdr_t starts with sreq_id, which is 0 (UCS_PTR_MAP_KEY_INVALID) in a
// request to send from an address (a peer's get).
enum { RTS_OPCODE_OFFSET = 40, RTS_OPCODE_TAG = 0, RTS_OPCODE_AM = 1, RTR_MIN_LENGTH = 8 };

enum { GUARD_SLOTS = 1024 };
static void *_Atomic guarded[GUARD_SLOTS];
static atomic_int guarded_high; // one past the highest slot ever taken
static atomic_ullong dropped;
static uct_am_callback_t rts_handler, rtr_handler; // UCX's, set before the filters go in

static int is_guarded(void *worker) {
    int n = atomic_load_explicit(&guarded_high, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (atomic_load_explicit(&guarded[i], memory_order_relaxed) == worker) return 1;
    }
    return 0;
}

// rts_drops decides for a rendezvous request to worker: 1 drops it. For a guarded
// worker everything but a tag or active-message rendezvous goes, as does a message too
// short to hold the opcode (UCX would read past it).
static int rts_drops(void *worker, const void *data, size_t length) {
    if (length <= RTS_OPCODE_OFFSET) return is_guarded(worker);
    uint8_t op = ((const uint8_t *)data)[RTS_OPCODE_OFFSET];
    return op != RTS_OPCODE_TAG && op != RTS_OPCODE_AM && is_guarded(worker);
}

// rtr_drops decides for a ready-to-receive to worker: 1 drops a request to send from
// an address (sreq_id 0) to a guarded worker. A message shorter than sreq_id goes to
// UCX, which refuses it.
static int rtr_drops(void *worker, const void *data, size_t length) {
    uint64_t sreq_id;
    if (length < RTR_MIN_LENGTH) return 0;
    memcpy(&sreq_id, data, sizeof(sreq_id));
    return sreq_id == 0 && is_guarded(worker);
}

static ucs_status_t rts_filter(void *arg, void *data, size_t length, unsigned flags) {
    if (rts_drops(arg, data, length)) {
        atomic_fetch_add(&dropped, 1);
        return UCS_OK; // UCX releases the message; the peer's put never completes
    }
    return rts_handler(arg, data, length, flags);
}

static ucs_status_t rtr_filter(void *arg, void *data, size_t length, unsigned flags) {
    if (rtr_drops(arg, data, length)) {
        atomic_fetch_add(&dropped, 1);
        return UCS_OK;
    }
    return rtr_handler(arg, data, length, flags);
}

// plausible checks that h is the handler object it is taken for: known feature bits
// only, TAG and AM among them, no flags (synchronous), a proxy, and cb the function
// named want (exported by the same library).
static int plausible(void *lib, const am_handler *h, const char *want) {
    const uint64_t known = ((uint64_t)1 << 9) - 1;
    return h != NULL && (h->features & ~known) == 0 && (h->features & UCP_FEATURE_TAG) &&
           (h->features & UCP_FEATURE_AM) && h->flags == 0 && h->proxy_cb != NULL && h->cb != NULL &&
           (void *)h->cb == dlsym(lib, want);
}

int ucxx_rma_guard_install(void) {
    if (rts_handler != NULL) return 1;
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    if (major != 1 || minor < 19 || minor > 22) return 0; // wire and layout read in 1.19-1.22
    // The libucp this code is linked to, found by one of its functions.
    Dl_info where;
    if (!dladdr((void *)&ucp_worker_create, &where) || where.dli_fname == NULL) return 0;
    void *lib = dlopen(where.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) return 0;
    am_handler *rts = dlsym(lib, "ucp_am_handler_UCP_AM_ID_RNDV_RTS");
    am_handler *rtr = dlsym(lib, "ucp_am_handler_UCP_AM_ID_RNDV_RTR");
    int ok = plausible(lib, rts, "ucp_rndv_rts_handler") && plausible(lib, rtr, "ucp_rndv_rtr_handler");
    if (ok) {
        rts_handler = rts->cb;
        rtr_handler = rtr->cb;
        // The filters first, published after the handlers they call; then the proxies
        // go: without one UCX installs cb everywhere (the proxy only counts messages for
        // adaptive progress, which ucxx_go's defaults turn off, and calls UCX's handler
        // directly).
        __atomic_store_n(&rts->cb, rts_filter, __ATOMIC_RELEASE);
        __atomic_store_n(&rtr->cb, rtr_filter, __ATOMIC_RELEASE);
        __atomic_store_n(&rts->proxy_cb, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&rtr->proxy_cb, NULL, __ATOMIC_RELEASE);
    }
    dlclose(lib);
    return ok;
}

int ucxx_rma_guard_selftest(void) {
    static char worker, stranger; // two addresses standing in for workers
    uint8_t rts[64] = {0}, rtr[40] = {0};
    int slot = ucxx_rma_guard_add(&worker), failed = 0, n = 0;
    if (slot < 0) return -1;
#define EXPECT(cond) (n++, failed = failed ? failed : ((cond) ? 0 : n))
    for (int op = 0; op < 256; op++) {
        rts[RTS_OPCODE_OFFSET] = (uint8_t)op;
        EXPECT(rts_drops(&worker, rts, sizeof(rts)) == (op > 1));
        EXPECT(!rts_drops(&stranger, rts, sizeof(rts)));
    }
    EXPECT(rts_drops(&worker, rts, RTS_OPCODE_OFFSET));
    EXPECT(!rts_drops(&stranger, rts, RTS_OPCODE_OFFSET));
    EXPECT(rtr_drops(&worker, rtr, sizeof(rtr)));
    EXPECT(!rtr_drops(&stranger, rtr, sizeof(rtr)));
    EXPECT(!rtr_drops(&worker, rtr, RTR_MIN_LENGTH - 1));
    rtr[3] = 1; // a ready-to-receive for one of the worker's own sends
    EXPECT(!rtr_drops(&worker, rtr, sizeof(rtr)));
#undef EXPECT
    ucxx_rma_guard_remove(slot);
    rts[RTS_OPCODE_OFFSET] = 2;
    return failed ? failed : (rts_drops(&worker, rts, sizeof(rts)) ? n + 1 : 0);
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

static char stand_ins[GUARD_SLOTS]; // addresses standing in for workers (TestRMAGuardSlots)

int ucxx_rma_guard_fill_for_test(void) {
    int n = 0;
    while (n < GUARD_SLOTS && ucxx_rma_guard_add(&stand_ins[n]) >= 0) n++;
    return n;
}

void ucxx_rma_guard_unfill_for_test(void) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
        char *p = atomic_load(&guarded[i]);
        if (p >= stand_ins && p < stand_ins + GUARD_SLOTS) atomic_store(&guarded[i], NULL);
    }
}
