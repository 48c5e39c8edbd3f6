#include "shim.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <arpa/inet.h>

static __thread ucxx_events_t *tls_events;

void ucxx_events_attach(ucxx_events_t *events) { tls_events = events; }

ucxx_events_t *ucxx_events_new(void) { return calloc(1, sizeof(ucxx_events_t)); }

void ucxx_events_free(ucxx_events_t *events) {
    if (events == NULL) return;
    free(events->items);
    free(events);
}

// push appends one event. If memory runs out the event is dropped and its waiter
// would hang, so abort loudly instead: there is no correct way to continue.
static void push(uint64_t kind, uint64_t id, ucs_status_t status, uint64_t length,
                 uint64_t tag, void *ptr) {
    ucxx_events_t *ev = tls_events;
    if (ev->len == ev->cap) {
        size_t cap = ev->cap ? ev->cap * 2 : 256;
        ucxx_event_t *items = realloc(ev->items, cap * sizeof(ucxx_event_t));
        if (items == NULL) {
            fprintf(stderr, "ucxx: out of memory growing the event buffer\n");
            abort();
        }
        ev->items = items;
        ev->cap = cap;
    }
    ucxx_event_t *e = &ev->items[ev->len++];
    e->kind = kind;
    e->id = id;
    e->status = status;
    e->length = length;
    e->tag = tag;
    e->ptr = ptr;
}

void ucxx_send_cb(void *req, ucs_status_t status, void *user_data) {
    push(UCXX_EVENT_COMPLETION, (uint64_t)(uintptr_t)user_data, status, 0, 0, req);
}

/* UCX fills a receive's info only when a message was matched: a cancelled or failed
 * receive's info holds whatever its request memory held before (an earlier receive's
 * length and tag), so those report 0 for both. */
static void tag_recv_cb(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info,
                        void *user_data) {
    uint64_t length = 0, tag = 0;
    if (info != NULL && (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED)) {
        length = info->length;
        tag = info->sender_tag;
    }
    push(UCXX_EVENT_COMPLETION, (uint64_t)(uintptr_t)user_data, status, length, tag, req);
}

static void stream_recv_cb(void *req, ucs_status_t status, size_t length, void *user_data) {
    push(UCXX_EVENT_COMPLETION, (uint64_t)(uintptr_t)user_data, status, length, 0, req);
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status) {
    (void)ep;
    push(UCXX_EVENT_EP_ERROR, (uint64_t)(uintptr_t)arg, status, 0, 0, NULL);
}

static void conn_cb(ucp_conn_request_h conn, void *arg) {
    push(UCXX_EVENT_CONN_REQUEST, (uint64_t)(uintptr_t)arg, UCS_OK, 0, 0, conn);
}

ucs_status_t ucxx_context_create(ucp_config_t *config, int rma, ucp_context_h *out) {
    ucp_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    if (rma) {
        p.features |= UCP_FEATURE_RMA;
    }
    p.mt_workers_shared = 0;
    return ucp_init(&p, config, out);
}

ucs_status_t ucxx_worker_create(ucp_context_h ctx, int multi_thread, ucp_worker_h *out) {
    ucp_worker_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    p.thread_mode = multi_thread ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
    return ucp_worker_create(ctx, &p, out);
}

ucs_status_t ucxx_listener_create(ucp_worker_h w, const struct sockaddr *addr, socklen_t len,
                                  uint64_t handle, ucp_listener_h *out) {
    ucp_listener_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    p.sockaddr.addr = addr;
    p.sockaddr.addrlen = len;
    p.conn_handler.cb = conn_cb;
    p.conn_handler.arg = (void *)(uintptr_t)handle;
    return ucp_listener_create(w, &p, out);
}

int ucxx_listener_port(ucp_listener_h l) {
    ucp_listener_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucp_listener_query(l, &a) != UCS_OK) return -1;
    if (a.sockaddr.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&a.sockaddr)->sin_port);
    if (a.sockaddr.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&a.sockaddr)->sin6_port);
    return -1;
}

// ep_params_common sets the error handling mode. PEER installs ep_error_cb with the
// endpoint's handle; NONE sets no handler (UCX would never call it) and lets UCX pick
// transports that cannot detect a failed peer, shared memory among them.
static void ep_params_common(ucp_ep_params_t *p, uint64_t handle, int err_mode) {
    p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    if (err_mode == UCP_ERR_HANDLING_MODE_NONE) {
        p->err_mode = UCP_ERR_HANDLING_MODE_NONE;
        return;
    }
    p->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p->err_handler.cb = ep_error_cb;
    p->err_handler.arg = (void *)(uintptr_t)handle;
}

ucs_status_t ucxx_ep_create_from_conn(ucp_worker_h w, ucp_conn_request_h req, uint64_t handle,
                                      int err_mode, ucp_ep_h *out) {
    ucp_ep_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = req;
    ep_params_common(&p, handle, err_mode);
    return ucp_ep_create(w, &p, out);
}

ucs_status_t ucxx_ep_create_to_sockaddr(ucp_worker_h w, const struct sockaddr *addr,
                                        socklen_t len, uint64_t handle, int err_mode,
                                        ucp_ep_h *out) {
    ucp_ep_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = addr;
    p.sockaddr.addrlen = len;
    ep_params_common(&p, handle, err_mode);
    return ucp_ep_create(w, &p, out);
}

ucs_status_t ucxx_ep_create_to_address(ucp_worker_h w, const ucp_address_t *addr,
                                       uint64_t handle, int err_mode, ucp_ep_h *out) {
    ucp_ep_params_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address = addr;
    ep_params_common(&p, handle, err_mode);
    return ucp_ep_create(w, &p, out);
}

static void format_sockaddr(const struct sockaddr_storage *sa, char *out, size_t len) {
    char ip[INET6_ADDRSTRLEN] = "";
    int port = 0;
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        port = ntohs(in->sin_port);
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        port = ntohs(in6->sin6_port);
    }
    snprintf(out, len, "%s:%d", ip, port);
}

ucs_status_t ucxx_ep_sockaddrs(ucp_ep_h ep, char *local, size_t llen, char *remote, size_t rlen) {
    ucp_ep_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    ucs_status_t st = ucp_ep_query(ep, &a);
    if (st != UCS_OK) return st;
    format_sockaddr(&a.local_sockaddr, local, llen);
    format_sockaddr(&a.remote_sockaddr, remote, rlen);
    return UCS_OK;
}

// finish turns a ucs_status_ptr_t into the shim's convention: a pending request is
// returned through *req; an immediate result is pushed as its completion event here.
ucs_status_t ucxx_finish(ucs_status_ptr_t sp, uint64_t id, uint64_t length, uint64_t tag,
                         void **req) {
    *req = NULL;
    if (UCS_PTR_IS_PTR(sp)) {
        *req = sp;
        return UCS_INPROGRESS;
    }
    ucs_status_t st = UCS_PTR_STATUS(sp);
    push(UCXX_EVENT_COMPLETION, id, st, st == UCS_OK ? length : 0, tag, NULL);
    return st;
}

void ucxx_set_memtype(ucp_request_param_t *p, int memtype) {
    if (memtype >= 0) {
        p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p->memory_type = (ucs_memory_type_t)memtype;
    }
}

ucs_status_t ucxx_tag_send(ucp_ep_h ep, uintptr_t buf, size_t len, ucp_tag_t tag,
                           uint64_t id, int memtype, void **req) {
    ucp_request_param_t p;
    ucxx_send_param(&p, id);
    ucxx_set_memtype(&p, memtype);
    return ucxx_finish(ucp_tag_send_nbx(ep, (const void *)buf, len, tag, &p), id, len, tag, req);
}

// tag_recv_param sets up a tag receive's parameters: its callback, its id, where an
// immediate completion's info goes, its memory type.
static void tag_recv_param(ucp_request_param_t *p, ucp_tag_recv_info_t *info, uint64_t id,
                           int memtype) {
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_RECV_INFO;
    p->cb.recv = tag_recv_cb;
    p->user_data = (void *)(uintptr_t)id;
    p->recv_info.tag_info = info;
    ucxx_set_memtype(p, memtype);
}

// tag_recv_finish reports a tag receive's outcome: an immediate success with its info.
static ucs_status_t tag_recv_finish(ucs_status_ptr_t sp, ucp_tag_recv_info_t *info, uint64_t id,
                                    void **req) {
    if (!UCS_PTR_IS_PTR(sp) && UCS_PTR_STATUS(sp) == UCS_OK)
        return ucxx_finish(sp, id, info->length, info->sender_tag, req);
    return ucxx_finish(sp, id, 0, 0, req);
}

ucs_status_t ucxx_tag_recv(ucp_worker_h w, uintptr_t buf, size_t len, ucp_tag_t tag,
                           ucp_tag_t mask, uint64_t id, int memtype, void **req) {
    ucp_tag_recv_info_t info;
    ucp_request_param_t p;
    tag_recv_param(&p, &info, id, memtype);
    return tag_recv_finish(ucp_tag_recv_nbx(w, (void *)buf, len, tag, mask, &p), &info, id, req);
}

ucs_status_t ucxx_worker_flush(ucp_worker_h w, uint64_t id, void **req) {
    ucp_request_param_t p;
    ucxx_send_param(&p, id);
    return ucxx_finish(ucp_worker_flush_nbx(w, &p), id, 0, 0, req);
}

int ucxx_request_done(void *req) { return ucp_request_check_status(req) != UCS_INPROGRESS; }

ucs_status_t ucxx_stream_send(ucp_ep_h ep, const void *buf, size_t len, uint64_t id, void **req) {
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_DATATYPE;
    p.cb.send = ucxx_send_cb;
    p.user_data = (void *)(uintptr_t)id;
    p.datatype = ucp_dt_make_contig(1);
    return ucxx_finish(ucp_stream_send_nbx(ep, buf, len, &p), id, len, 0, req);
}

ucs_status_t ucxx_stream_recv(ucp_ep_h ep, void *buf, size_t len, uint64_t id, void **req) {
    size_t got = 0;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.recv_stream = stream_recv_cb;
    p.user_data = (void *)(uintptr_t)id;
    p.datatype = ucp_dt_make_contig(1);
    p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    ucs_status_ptr_t sp = ucp_stream_recv_nbx(ep, buf, len, &got, &p);
    return ucxx_finish(sp, id, got, 0, req);
}

ucs_status_t ucxx_ep_close(ucp_ep_h ep, int force, uint64_t id, void **req) {
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = ucxx_send_cb;
    p.user_data = (void *)(uintptr_t)id;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    return ucxx_finish(ucp_ep_close_nbx(ep, &p), id, 0, 0, req);
}

int ucxx_sockaddr_fill(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len) {
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (ip == NULL || ip[0] == '\0') {
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_ANY);
        in->sin_port = htons((uint16_t)port);
        *len = sizeof(*in);
        return 0;
    }
    if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *len = sizeof(*in);
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*in6);
        return 0;
    }
    return -1;
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param) {
    (void)arg;
    uint64_t tag = 0;
    if (header != NULL && header_length >= sizeof(tag)) memcpy(&tag, header, sizeof(tag));
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        push(UCXX_EVENT_AM, tag, 1, length, 0, data);
        return UCS_INPROGRESS; // the descriptor stays valid until fetched or released
    }
    void *block = malloc(UCXX_AM_DATA_OFFSET + length);
    if (block == NULL) {
        push(UCXX_EVENT_AM, tag, UCS_ERR_NO_MEMORY, length, 0, NULL);
        return UCS_OK;
    }
    memcpy((char *)block + UCXX_AM_DATA_OFFSET, data, length);
    push(UCXX_EVENT_AM, tag, 0, length, 0, block);
    return UCS_OK;
}

ucs_status_t ucxx_am_register(ucp_worker_h w) {
    ucp_am_handler_param_t p;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                   UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    p.id = UCXX_AM_ID;
    p.cb = am_cb;
    p.flags = UCP_AM_FLAG_WHOLE_MSG;
    return ucp_worker_set_am_recv_handler(w, &p);
}

ucs_status_t ucxx_am_send(ucp_ep_h ep, uint64_t header_tag, uintptr_t buf, size_t len, uint64_t id,
                          int memtype, void **req) {
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = ucxx_send_cb;
    p.user_data = (void *)(uintptr_t)id;
    // The header lives on this stack frame: UCX must copy it.
    p.flags = UCP_AM_SEND_FLAG_COPY_HEADER | UCP_AM_SEND_FLAG_REPLY;
    ucxx_set_memtype(&p, memtype);
    return ucxx_finish(ucp_am_send_nbx(ep, UCXX_AM_ID, &header_tag, sizeof(header_tag), (const void *)buf,
                                  len, &p),
                  id, len, 0, req);
}

ucs_status_t ucxx_am_recv_data(ucp_worker_h w, void *desc, uintptr_t buf, size_t len, uint64_t id,
                               void **req) {
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = stream_recv_cb;
    p.user_data = (void *)(uintptr_t)id;
    return ucxx_finish(ucp_am_recv_data_nbx(w, desc, (void *)buf, len, &p), id, len, 0, req);
}

void ucxx_am_release(ucp_worker_h w, void *desc) { ucp_am_data_release(w, desc); }

int ucxx_tag_probe(ucp_worker_h w, ucp_tag_t tag, ucp_tag_t mask, int remove, uint64_t *sender_tag,
                   uint64_t *length, void **msg) {
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m = ucp_tag_probe_nb(w, tag, mask, remove, &info);
    if (m == NULL) return 0;
    *sender_tag = info.sender_tag;
    *length = info.length;
    *msg = remove ? (void *)m : NULL;
    return 1;
}

ucs_status_t ucxx_tag_msg_recv(ucp_worker_h w, void *msg, uintptr_t buf, size_t len, uint64_t id,
                               int memtype, void **req) {
    ucp_tag_recv_info_t info;
    ucp_request_param_t p;
    tag_recv_param(&p, &info, id, memtype);
    return tag_recv_finish(ucp_tag_msg_recv_nbx(w, (void *)buf, len, (ucp_tag_message_h)msg, &p),
                           &info, id, req);
}


// The iov variants: buf is an array of iovcnt ucp_dt_iov_t entries (host memory), which
// must stay valid, like the memory it names, until the operation completes. A receive
// reports the bytes received over all entries.
static void set_iov(ucp_request_param_t *p) {
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p->datatype = ucp_dt_make_iov();
}

ucs_status_t ucxx_tag_send_iov(ucp_ep_h ep, uintptr_t iov, size_t iovcnt, size_t len, ucp_tag_t tag,
                               uint64_t id, void **req) {
    ucp_request_param_t p;
    ucxx_send_param(&p, id);
    set_iov(&p);
    ucxx_set_memtype(&p, UCS_MEMORY_TYPE_HOST);
    return ucxx_finish(ucp_tag_send_nbx(ep, (const void *)iov, iovcnt, tag, &p), id, len, tag, req);
}

ucs_status_t ucxx_tag_recv_iov(ucp_worker_h w, uintptr_t iov, size_t iovcnt, ucp_tag_t tag,
                               ucp_tag_t mask, uint64_t id, void **req) {
    ucp_tag_recv_info_t info;
    ucp_request_param_t p;
    tag_recv_param(&p, &info, id, UCS_MEMORY_TYPE_HOST);
    set_iov(&p);
    return tag_recv_finish(ucp_tag_recv_nbx(w, (void *)iov, iovcnt, tag, mask, &p), &info, id, req);
}

ucs_status_t ucxx_tag_msg_recv_iov(ucp_worker_h w, void *msg, uintptr_t iov, size_t iovcnt, uint64_t id,
                                   void **req) {
    ucp_tag_recv_info_t info;
    ucp_request_param_t p;
    tag_recv_param(&p, &info, id, UCS_MEMORY_TYPE_HOST);
    set_iov(&p);
    return tag_recv_finish(ucp_tag_msg_recv_nbx(w, (void *)iov, iovcnt, (ucp_tag_message_h)msg, &p),
                           &info, id, req);
}

// print_to_string runs one of UCX's print functions into a malloc'd string.
enum print_what { PRINT_CONFIG, PRINT_CONTEXT, PRINT_WORKER };

static char *print_to_string(enum print_what what, const void *obj) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (f == NULL) return NULL;
    switch (what) {
    case PRINT_CONFIG:
        ucp_config_print((const ucp_config_t *)obj, f, NULL, UCS_CONFIG_PRINT_CONFIG);
        break;
    case PRINT_CONTEXT:
        ucp_context_print_info((ucp_context_h)obj, f);
        break;
    case PRINT_WORKER:
        ucp_worker_print_info((ucp_worker_h)obj, f);
        break;
    }
    fclose(f);
    return buf;
}

char *ucxx_config_print(const ucp_config_t *cfg) { return print_to_string(PRINT_CONFIG, cfg); }
char *ucxx_context_info(ucp_context_h ctx) { return print_to_string(PRINT_CONTEXT, ctx); }
char *ucxx_worker_info(ucp_worker_h w) { return print_to_string(PRINT_WORKER, w); }

uint64_t ucxx_context_memory_types(ucp_context_h ctx) {
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(ctx, &attr) != UCS_OK) {
        return 0;
    }
    return attr.memory_types;
}
