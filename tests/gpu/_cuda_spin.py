"""A kernel that keeps a CUDA stream busy: what the stream-ordering tests queue
before the work whose ordering they check."""

import cupy as cp
import numpy as np

_SPIN = cp.RawKernel(
    r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
""",
    "spin",
)


def spin_on(stream, seconds):
    """Queue a kernel that keeps `stream` busy for about `seconds`."""
    khz = cp.cuda.Device().attributes["ClockRate"]
    with stream:
        _SPIN((1,), (1,), (np.int64(seconds * khz * 1000),))
