"""UCX's own log, routed to Python's ``logging`` (the ``ucx`` logger, as RAPIDS UCXX).

The Go core captures what UCX would print to stdout (ucxx/log.c) and sets the
completion ring's log word; the completion drain then calls ``forward``.
"""

import logging

from ._bridge import ext

logger = logging.getLogger("ucx")

# UCS log levels (ucs_log_level_t) to logging's.
_LEVELS = {0: logging.CRITICAL, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.INFO}


def forward():
    """Log every UCX record the Go core captured since the last call."""
    try:
        lines = ext.pybridge_TakeUCXLog()
    except RuntimeError:
        return
    for line in lines.splitlines():
        level, _, text = line.partition("\t")
        if level == "dropped":
            logger.warning("%s UCX log records were dropped (the capture buffer was full)", text)
        else:
            logger.log(_LEVELS.get(int(level), logging.DEBUG), "%s", text)
