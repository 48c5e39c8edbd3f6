#include "transports.h"

#include <string.h>

ucs_status_t ucxx_ep_transports(ucp_ep_h ep, ucp_transport_entry_t *entries, unsigned *n) {
    ucp_ep_attr_t a;
    memset(&a, 0, sizeof(a));
    a.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
    a.transports.entries = entries;
    a.transports.num_entries = *n;
    a.transports.entry_size = sizeof(ucp_transport_entry_t);
    ucs_status_t st = ucp_ep_query(ep, &a);
    *n = st == UCS_OK ? a.transports.num_entries : 0;
    return st;
}
