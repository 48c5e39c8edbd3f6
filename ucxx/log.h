#ifndef UCXX_LOG_H
#define UCXX_LOG_H

#include <stddef.h>
#include <stdint.h>

// UCX's log, captured: a handler installed before the first UCP context keeps each
// enabled message (level, "file:line message") in a bounded buffer instead of letting
// UCX print it to stdout, sets *flag and signals fd (when set) so a consumer drains it.

void ucxx_log_capture(void);
void ucxx_log_notify(uint32_t *flag, int fd);
// ucxx_log_take copies the oldest record's text (NUL-terminated, truncated to cap)
// into buf and returns its UCS level, or -1 when the buffer is empty. *dropped gets how
// many records were dropped because the buffer was full since the last call.
int ucxx_log_take(char *buf, size_t cap, uint64_t *dropped);

#endif
