#!/usr/bin/env python3
"""The harness on a simulated GPU, for machines without one: checks run.py, the
backends, micro.py and comm.py (two processes, real ucxx_go endpoints) end to end.
It measures nothing about GPUs.

    python benchmarks/dag/selftest.py [run.py arguments, default --quick]

What is simulated:
  * ``cupy``: numpy arrays in host memory; RawKernel runs the numpy version of the
    kernel (emulate.py) at once; streams, events and graph capture record and replay.
  * ``ucxx_go.ExecutionContext``: the real one (gpus=[], host memory), except that a
    kernel launch becomes a real DAG host vertex that runs the numpy kernel, reading
    and writing the byte ranges its signature says. So the real dependency engine
    orders the shapes' and the comm programs' kernels, sends and receives, on
    concurrent host workers.
"""

import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402


# -- fake cupy ------------------------------------------------------------------------------------

_capturing = []  # the stream capturing now, if any


class _Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.ptr = id(self)

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class _Graph:
    def __init__(self, calls):
        self.calls = calls

    def launch(self, stream=None):
        for fn, args in self.calls:
            fn(*args)


class _Stream:
    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr = id(self)
        self.calls = None

    def synchronize(self):
        pass

    def wait_event(self, ev):
        pass

    def record(self, ev=None):
        return ev or _Event()

    def begin_capture(self, mode=None):
        if _capturing:
            raise RuntimeError("fake cupy: nested capture")
        self.calls = []
        _capturing.append(self)

    def end_capture(self):
        _capturing.remove(self)
        g, self.calls = _Graph(self.calls), None
        return g

    def is_capturing(self):
        return self.calls is not None


class _RawKernel:
    def __init__(self, code, name, options=(), backend="nvrtc", **kw):
        from kernels import KERNELS

        if name not in KERNELS or code != KERNELS[name].source:
            raise ValueError(f"fake cupy: unknown kernel source for {name}")
        if not isinstance(options, tuple):
            raise TypeError("RawKernel options must be a tuple")
        self.name = name

    def compile(self, log_stream=None):
        pass

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        from emulate import EMULATED

        if not (isinstance(grid, tuple) and isinstance(block, tuple) and isinstance(args, tuple)):
            raise TypeError("fake cupy: RawKernel takes tuples for grid, block and args (as cupy does)")
        for a in args:
            if isinstance(a, (int, float)) and not isinstance(a, np.number):
                raise TypeError(f"fake cupy: Python scalar {a!r} as a kernel argument (cupy would pass 64 bits)")
        call = (EMULATED[self.name], (grid[0], block[0], *args))
        cap = _capturing[0] if _capturing else None
        if cap is not None:
            if stream is None:
                raise RuntimeError("fake cupy: a launch on the legacy stream during a capture")
            cap.calls.append(call)
        else:
            call[0](*call[1])


class _Device:
    compute_capability = "90"

    def __init__(self, i=0):
        self.id = i

    def use(self):
        pass

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        pass


def _make_fake_cupy():
    cp = types.ModuleType("cupy")
    cp.__version__ = "fake-numpy"
    cp.float32, cp.uint8, cp.int32, cp.nan = np.float32, np.uint8, np.int32, np.nan
    cp.asarray = lambda a, dtype=None: np.array(a, dtype=dtype, copy=True)
    cp.zeros, cp.empty, cp.full, cp.arange = np.zeros, np.empty, np.full, np.arange
    cp.asnumpy = lambda a: np.array(a, copy=True)
    cp.RawKernel = _RawKernel
    pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    cp.get_default_memory_pool = lambda: pool
    cuda = types.ModuleType("cupy.cuda")
    cuda.Stream, cuda.Event, cuda.Device = _Stream, _Event, _Device
    cuda.runtime = types.SimpleNamespace(
        getDeviceProperties=lambda i: {"name": b"simulated GPU (numpy)", "multiProcessorCount": 132},
        runtimeGetVersion=lambda: 13000, driverGetVersion=lambda: 13000)
    cp.cuda = cuda
    return cp


# -- fake GPU kernels in the real ExecutionContext -----------------------------------------


def install():
    """Put the fakes in place (this process). Idempotent."""
    if getattr(sys.modules.get("cupy"), "__version__", None) == "fake-numpy":
        return
    sys.modules["cupy"] = _make_fake_cupy()
    try:
        import ucxx_go
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
        import ucxx_go
    from ucxx_go import _execution, _kernels

    real = _execution.ExecutionContext

    class SimulatedKernel:
        def __init__(self, ctx, name, signature):
            self.ctx, self.name, self.params = ctx, name, _kernels.parse_signature(signature)

        def __call__(self, grid, block, shared_mem=0):
            def launch(*args):
                from emulate import EMULATED

                if len(args) != len(self.params):
                    raise TypeError(f"kernel {self.name!r} takes {len(self.params)} arguments, got {len(args)}")
                reads, writes = [], []
                for i, (p, a) in enumerate(zip(self.params, args)):
                    if p.pointer:
                        if not isinstance(a, _execution.DeviceArray):
                            raise TypeError(f"kernel {self.name}: a pointer parameter takes a DeviceArray")
                        (reads if p.access == _kernels.READ else writes).append(a)
                    else:
                        p.slot(a, i)  # the range check a real launch makes
                g = grid if isinstance(grid, int) else grid[0]
                b = block if isinstance(block, int) else block[0]
                fn = EMULATED[self.name]

                def run():
                    fn(g, b, *[np.asarray(a) if isinstance(a, _execution.DeviceArray) else a for a in args])

                run.__name__ = self.name
                return self.ctx.host(run, reads=reads, writes=writes)

            return launch

    class SimulatedGpuContext(real):
        def __init__(self, *a, **kw):
            kw["gpus"] = []
            kw.setdefault("python_workers", 4)
            super().__init__(*a, **kw)

        @property
        def gpus(self):
            return [0]

        def build_kernel(self, source, name, signature, options=()):
            from kernels import KERNELS

            _kernels.parse_signature(signature)
            if source != KERNELS[name].source or not isinstance(options, tuple):
                raise ValueError("simulated build_kernel: unexpected source or options")
            return SimulatedKernel(self, name, signature)

    ucxx_go.ExecutionContext = SimulatedGpuContext


def fake_peer_main(port_queue, cfg):
    """comm's peer, in a spawned process with the fakes installed first (there comm is
    freshly imported, so comm.peer_main is the real one)."""
    install()
    import comm

    return getattr(comm, "_original_peer_main", comm.peer_main)(port_queue, cfg)


def main(argv):
    install()
    import comm
    import run

    comm._original_peer_main = comm.peer_main
    comm.peer_main = fake_peer_main
    if not argv:
        argv = ["--quick"]
    return run.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
