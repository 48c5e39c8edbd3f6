// C side of package ucxx: UCX callbacks and the event buffer they fill.
//
// UCX invokes callbacks on the thread that calls ucp_worker_progress or a ucp_*_nbx
// function. In ucxx-go that is always the worker's progress thread, so every callback
// appends to that thread's event buffer without locking, and Go drains the buffer after
// each call. No callback enters Go: a cgo callback from C would cost more than the
// operation and would need the Go runtime on UCX's stack.
#ifndef UCXX_SHIM_H
#define UCXX_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <ucp/api/ucp.h>

enum ucxx_event_kind {
    UCXX_EVENT_COMPLETION = 1, // id: request id; status, length, tag: the result
    UCXX_EVENT_EP_ERROR = 2,   // id: endpoint handle; status: the error
    UCXX_EVENT_CONN_REQUEST = 3, // id: listener handle; ptr: ucp_conn_request_h
    // An active message arrived. id: the tag in its header (names the connection);
    // length: its size; status: 0 with ptr a block holding a copy of the data at
    // UCXX_AM_DATA_OFFSET, 1 with ptr a rendezvous descriptor to fetch with
    // ucxx_am_recv_data (or drop with ucxx_am_release), or an error (no memory).
    UCXX_EVENT_AM = 4,
};

// The active message id ucxx-go sends and listens on.
#define UCXX_AM_ID 0x7567
// Where an eagerly received active message's data starts in its block: room for a
// one-frame record ahead of it (core's multi-buffer block layout).
#define UCXX_AM_DATA_OFFSET 64

typedef struct ucxx_event {
    uint64_t kind;
    uint64_t id;
    int64_t status;
    uint64_t length;
    uint64_t tag;
    void *ptr; // the UCP request to free after draining, or the connection request
} ucxx_event_t;

// A growable array owned by one progress thread. It grows by doubling and never
// shrinks, so it stops allocating once it has seen the largest burst.
typedef struct ucxx_events {
    ucxx_event_t *items;
    size_t len;
    size_t cap;
} ucxx_events_t;

// ucxx_events_attach makes events the calling thread's event buffer. The progress
// thread calls it once, before any other call here.
void ucxx_events_attach(ucxx_events_t *events);
ucxx_events_t *ucxx_events_new(void);
void ucxx_events_free(ucxx_events_t *events);

// ucxx_context_create makes a context with tags, streams, active messages and wake-ups,
// and UCX's remote memory access (UCP_FEATURE_RMA) when rma is not 0.
ucs_status_t ucxx_context_create(ucp_config_t *config, int rma, ucp_context_h *out);
ucs_status_t ucxx_worker_create(ucp_context_h ctx, int multi_thread, ucp_worker_h *out);
// ucxx_worker_flush starts flushing every endpoint of the worker, and the transports
// of endpoints closed by force that UCX is still discarding; ucxx_request_done says
// whether a request has completed (its callback has run).
ucs_status_t ucxx_worker_flush(ucp_worker_h w, uint64_t id, void **req);
int ucxx_request_done(void *req);

ucs_status_t ucxx_listener_create(ucp_worker_h w, const struct sockaddr *addr, socklen_t len,
                                  uint64_t handle, ucp_listener_h *out);
// ucxx_listener_port returns the port the listener is bound to, or -1.
int ucxx_listener_port(ucp_listener_h l);

// err_mode is a ucp_err_handling_mode_t: UCP_ERR_HANDLING_MODE_PEER or
// UCP_ERR_HANDLING_MODE_NONE. With PEER, endpoints carry their handle as the error
// handler's argument, so an error event names the endpoint without a lookup by
// pointer; with NONE there is no handler and no error event, ever.
ucs_status_t ucxx_ep_create_from_conn(ucp_worker_h w, ucp_conn_request_h req, uint64_t handle,
                                      int err_mode, ucp_ep_h *out);
ucs_status_t ucxx_ep_create_to_sockaddr(ucp_worker_h w, const struct sockaddr *addr,
                                        socklen_t len, uint64_t handle, int err_mode,
                                        ucp_ep_h *out);
ucs_status_t ucxx_ep_create_to_address(ucp_worker_h w, const ucp_address_t *addr,
                                       uint64_t handle, int err_mode, ucp_ep_h *out);
// ucxx_ep_sockaddrs writes the local and remote "ip:port" of a sockaddr endpoint.
ucs_status_t ucxx_ep_sockaddrs(ucp_ep_h ep, char *local, size_t llen, char *remote, size_t rlen);

// Operations. Each returns UCS_INPROGRESS with *req set while the operation runs (its
// completion event comes from a callback), or appends the completion event itself and
// returns its status when the operation ended at once.
ucs_status_t ucxx_tag_send(ucp_ep_h ep, uintptr_t buf, size_t len, ucp_tag_t tag,
                           uint64_t id, int memtype, void **req);
ucs_status_t ucxx_tag_recv(ucp_worker_h w, uintptr_t buf, size_t len, ucp_tag_t tag,
                           ucp_tag_t mask, uint64_t id, int memtype, void **req);
// Gathered send and scattered receives: iov is an array of iovcnt ucp_dt_iov_t (host
// memory), kept valid with the memory it names until the completion; len is the sum
// of its lengths (reported by an immediate send completion).
ucs_status_t ucxx_tag_send_iov(ucp_ep_h ep, uintptr_t iov, size_t iovcnt, size_t len, ucp_tag_t tag,
                               uint64_t id, void **req);
ucs_status_t ucxx_tag_recv_iov(ucp_worker_h w, uintptr_t iov, size_t iovcnt, ucp_tag_t tag,
                               ucp_tag_t mask, uint64_t id, void **req);
ucs_status_t ucxx_tag_msg_recv_iov(ucp_worker_h w, void *msg, uintptr_t iov, size_t iovcnt, uint64_t id,
                                   void **req);
ucs_status_t ucxx_stream_send(ucp_ep_h ep, const void *buf, size_t len, uint64_t id, void **req);
ucs_status_t ucxx_stream_recv(ucp_ep_h ep, void *buf, size_t len, uint64_t id, void **req);
ucs_status_t ucxx_ep_close(ucp_ep_h ep, int force, uint64_t id, void **req);

// Active messages: the handler is registered once per worker; a message carries the
// 8-byte tag header_tag ahead of its data.
ucs_status_t ucxx_am_register(ucp_worker_h w);
ucs_status_t ucxx_am_send(ucp_ep_h ep, uint64_t header_tag, uintptr_t buf, size_t len, uint64_t id,
                          int memtype, void **req);
ucs_status_t ucxx_am_recv_data(ucp_worker_h w, void *desc, uintptr_t buf, size_t len, uint64_t id,
                               void **req);
void ucxx_am_release(ucp_worker_h w, void *desc);

// Tag probe: whether a message matching tag/mask waits, and its sender tag and length.
// With remove set, *msg receives the message handle for ucxx_tag_msg_recv.
int ucxx_tag_probe(ucp_worker_h w, ucp_tag_t tag, ucp_tag_t mask, int remove, uint64_t *sender_tag,
                   uint64_t *length, void **msg);
ucs_status_t ucxx_tag_msg_recv(ucp_worker_h w, void *msg, uintptr_t buf, size_t len, uint64_t id,
                               int memtype, void **req);

// ucxx_config_print writes a UCX configuration (UCX_KEY=VALUE lines) to a malloc'd
// string the caller frees.
char *ucxx_config_print(const ucp_config_t *cfg);

// ucxx_context_info and ucxx_worker_info return UCX's description of a context or
// worker (ucp_*_print_info) as a malloc'd string the caller frees.
char *ucxx_context_info(ucp_context_h ctx);
char *ucxx_worker_info(ucp_worker_h w);

// ucxx_context_memory_types returns the memory types a context supports, a bitmap of
// 1 << ucs_memory_type_t (ucp_context_query's memory_types), or 0 if the query fails.
uint64_t ucxx_context_memory_types(ucp_context_h ctx);



// ucxx_sockaddr_fill parses a numeric IPv4 or IPv6 address ("" is the IPv4 wildcard)
// and port into *ss. It returns 0, or -1 when ip is not a numeric address.
int ucxx_sockaddr_fill(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len);
// Shared with the shim's other files (rma.c): the completion callback of operations
// that report no length, the convention of a ucs_status_ptr_t's end (a pending request
// through *req, or the completion event pushed now), and a memory type setting (-1:
// UCX detects it).
void ucxx_send_cb(void *req, ucs_status_t status, void *user_data);
// ucxx_send_param sets up a send-like operation's parameters (a send, a flush, a
// close): ucxx_send_cb as its callback, id as its user data, nothing else.
static inline void ucxx_send_param(ucp_request_param_t *p, uint64_t id) {
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = ucxx_send_cb;
    p->user_data = (void *)(uintptr_t)id;
}
ucs_status_t ucxx_finish(ucs_status_ptr_t sp, uint64_t id, uint64_t length, uint64_t tag, void **req);
void ucxx_set_memtype(ucp_request_param_t *p, int memtype);

#endif
