"""A kernel that keeps a CUDA stream busy: what the stream-ordering tests queue
before the work whose ordering they check."""

import asyncio
import faulthandler
import sys
import threading

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


class Gate:
    """A pinned host word that streams wait on (cuStreamWaitValue32, greater or
    equal): a stream closed by close_on is busy until open() is called on the host,
    whatever the GPU does meanwhile.

    A test that waits on the host for a stream it closed never ends: with watchdog_s,
    the gate turns that into a failure with a post-mortem. After watchdog_s seconds
    the Python stacks go to stderr (from faulthandler's own thread, which needs no
    GIL), and a second later, where a Python thread can run, the Go stacks too and
    the gate opens, setting `rescued` (the test then fails on it)."""

    _WAIT_GEQ = 0  # CU_STREAM_WAIT_VALUE_GEQ

    def __init__(self, watchdog_s=None):
        import ctypes
        self._cuda = ctypes.CDLL("libcuda.so.1")
        self._mem = cp.cuda.alloc_pinned_memory(8)
        self._word = ctypes.c_uint32.from_address(self._mem.ptr)
        self._word.value = 0
        self._closed = 0
        dev = ctypes.c_uint64()
        r = self._cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), ctypes.c_void_p(self._mem.ptr), 0)
        assert r == 0, ("cuMemHostGetDevicePointer", r)
        self._dev = dev.value
        self._wait = self._cuda.cuStreamWaitValue32_v2
        self._wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self.rescued = False
        self._watchdog = None
        if watchdog_s is not None:
            faulthandler.dump_traceback_later(watchdog_s, exit=False)
            self._watchdog = threading.Timer(watchdog_s + 1, self._rescue)
            self._watchdog.daemon = True
            self._watchdog.start()

    def _rescue(self):
        try:
            from ucxx_go.debug import go_stacks

            print("Gate: still in use at the watchdog's deadline; the Go stacks:", file=sys.stderr)
            print(go_stacks(), file=sys.stderr, flush=True)
        finally:
            self.rescued = True
            self.open()

    def disarm(self):
        """Stop the watchdog (call it once the gate's test is done with the gate); a
        rescue already under way ends first, so `rescued` is final. faulthandler's
        later dump is one per process: one gate with a watchdog at a time."""
        if self._watchdog is not None:
            faulthandler.cancel_dump_traceback_later()
            self._watchdog.cancel()
            self._watchdog.join(timeout=5)

    def close_on(self, stream):
        """Queue on `stream` a wait for the next open()."""
        self._closed += 1
        r = self._wait(stream.ptr, self._dev, self._closed, self._WAIT_GEQ)
        assert r == 0, ("cuStreamWaitValue32", r)

    def open(self):
        """Let every stream waiting on this gate go on."""
        self._word.value = self._closed

    async def open_after(self, seconds):
        """open() from a task on the running event loop after `seconds`: it opens the
        gate only if the loop runs meanwhile."""
        await asyncio.sleep(seconds)
        self.open()
