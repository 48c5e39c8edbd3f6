/* Session 42 (issue 26 / one-sided, README "What UCX itself trusts"): does a peer's stock UCX reach an address of a
 * process whose UCX context has no remote memory access (as ucxx_go's engine without one_sided: no UCP_FEATURE_RMA,
 * TCP_PUT_ENABLE=n) through UCX's RMA rendezvous (RMA_PPLN_ENABLE=y, a put or get of GPU memory)? Both contexts live in
 * this process; the "victim" holds a 1 MiB secret at an address it never registered; the "peer" puts 64 KiB of 'W' there
 * (or gets from there) with a key to its own memory, then prints whether the write landed or the secret was read.
 *   rma_rndv_probe p|g PPLN(y|n) c|h VICTIM_TLS [PEER_TLS]     (c: the peer's buffer in GPU memory)
 * Written by a helper in session 41, run on one H200 in session 42 (device_study.sh rma). */
#include <ucp/api/ucp.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define _GNU_SOURCE
void *memmem(const void *, size_t, const void *, size_t);
static ucp_context_h mk(int rma, const char *tls, const char *ppln) {
    ucp_config_t *c; ucp_context_h h; ucp_params_t p = {0};
    ucp_config_read(NULL, NULL, &c);
    ucp_config_modify(c, "TLS", tls);
    if (rma) { ucp_config_modify(c, "RMA_PPLN_ENABLE", ppln); ucp_config_modify(c, "PROTO_INFO", "y"); }
    else ucp_config_modify(c, "TCP_PUT_ENABLE", "n");
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | (rma ? UCP_FEATURE_RMA : 0);
    if (ucp_init(&p, c, &h) != UCS_OK) exit(2);
    return h;
}
static ucp_worker_h wk(ucp_context_h c) {
    ucp_worker_params_t p = {0}; ucp_worker_h w;
    ucp_worker_create(c, &p, &w); return w;
}
typedef int (*F)();
int main(int argc, char **argv) {
    int get = argv[1][0] == 'g', cuda = argv[3][0] == 'c', i;
    size_t n = 65536, vl, rl;
    ucp_context_h vc = mk(0, argv[4], "n"), ac = mk(1, argc > 5 ? argv[5] : cuda ? "tcp,cuda_copy" : "tcp", argv[2]);
    ucp_worker_h vw = wk(vc), aw = wk(ac);
    ucp_address_t *va; ucp_ep_h ae; ucp_mem_h mh; ucp_rkey_h key; void *rk, *local;
    ucp_worker_get_address(vw, &va, &vl);
    ucp_ep_params_t ep = {0};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER; ep.address = va;
    if (ucp_ep_create(aw, &ep, &ae) != UCS_OK) return 3;
    char *secret = malloc(1 << 20), kb[4096], *host = malloc(n);
    memset(secret, 's', 1 << 20); memcpy(secret + 4096, "TOPSECRET", 9); memset(host, 'W', n);
    void *cu = NULL; unsigned long long d = 0; void *cx;
    if (cuda) {
        cu = dlopen("libcuda.so.1", RTLD_NOW);
        ((F)dlsym(cu, "cuInit"))(0);
        ((F)dlsym(cu, "cuDevicePrimaryCtxRetain"))(&cx, 0);
        ((F)dlsym(cu, "cuCtxSetCurrent"))(cx);
        ((F)dlsym(cu, "cuMemAlloc_v2"))(&d, n);
        ((F)dlsym(cu, "cuMemcpyHtoD_v2"))(d, host, n);
        local = (void *)d;
    } else local = host;
    ucp_mem_map_params_t mp = {0};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = kb; mp.length = sizeof(kb);
    ucp_mem_map(ac, &mp, &mh); ucp_rkey_pack(ac, mh, &rk, &rl);
    for (i = 0; i < 2000; i++) { ucp_worker_progress(aw); ucp_worker_progress(vw); usleep(200); }
    if (ucp_ep_rkey_unpack(ae, rk, &key) != UCS_OK) return 4;
    ucp_request_param_t rp = {0};
    if (cuda) { rp.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE; rp.memory_type = UCS_MEMORY_TYPE_CUDA; }
    uint64_t t = (uint64_t)(uintptr_t)(secret + 4096);
    void *r = get ? ucp_get_nbx(ae, local, n, t, key, &rp) : ucp_put_nbx(ae, local, n, t, key, &rp);
    ucp_request_param_t fp = {0};
    void *f = ucp_ep_flush_nbx(ae, &fp);
    for (i = 0; i < 15000; i++) { ucp_worker_progress(aw); ucp_worker_progress(vw); usleep(200); }
    if (cuda) ((F)dlsym(cu, "cuMemcpyDtoH_v2"))(host, d, n);
    printf("RESULT %s ppln=%s mem=%s victimTLS=%s peerTLS=%s: op %s, flush %s, landed=%d, secret_read=%d\n", argv[1], argv[2], argv[3], argv[4], argc > 5 ? argv[5] : "default",
           UCS_PTR_IS_PTR(r) ? ucs_status_string(ucp_request_check_status(r)) : ucs_status_string(UCS_PTR_STATUS(r)),
           UCS_PTR_IS_PTR(f) ? ucs_status_string(ucp_request_check_status(f)) : ucs_status_string(UCS_PTR_STATUS(f)),
           memmem(secret, 1 << 20, "WWWWWWWW", 8) != NULL, memmem(host, n, "TOPSECRET", 9) != NULL);
    fflush(stdout); _exit(0);
}
