// Endpoint transport query (ucp_ep_query with UCP_EP_ATTR_FIELD_TRANSPORTS, UCX 1.14+).
#ifndef UCXX_TRANSPORTS_H
#define UCXX_TRANSPORTS_H

#include <ucp/api/ucp.h>

// ucxx_ep_transports fills entries (room for *n) with the transport and device names of
// the endpoint's lanes and sets *n to the number filled. The names are UCX's strings,
// valid until the endpoint is closed. When *n comes back equal to the room given, the
// list may have been cut short: call again with more room.
ucs_status_t ucxx_ep_transports(ucp_ep_h ep, ucp_transport_entry_t *entries, unsigned *n);

#endif
