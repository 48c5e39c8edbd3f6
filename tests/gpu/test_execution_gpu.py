"""ExecutionContext on a GPU: kernels built with NVRTC and bound from PTX, launched on
disjoint halves and then on the whole array; a kernel reading what a receive fills
(the peer sends after the kernel was submitted); device element access and copies;
timings; resources released by close. Skipped where cupy or a GPU is missing."""

import asyncio

import numpy as np
import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

from _support import GPU_TIMEOUT  # noqa: E402
from ucxx_go import ExecutionContext, UCXCloseError  # noqa: E402
from ucxx_go._kernels import compile_ptx  # noqa: E402

SQUARE = r"""
extern "C" __global__ void square(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
"""

# No extern "C": found through NVRTC's name expression (a mangled name).
INC = r"""
__global__ void inc(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1.0f;
}
"""

THREADS = 256


def blocks(n):
    return (n + THREADS - 1) // THREADS


@pytest.fixture
def nvrtc():
    from ucxx_go._kernels import _load_nvrtc

    try:
        _load_nvrtc()
    except RuntimeError as e:
        pytest.skip(str(e))


def test_kernels_on_halves_then_whole(nvrtc):
    n, h = 1 << 20, (1 << 20) // 2 + 3
    xs = np.random.default_rng(0).random(n, dtype=np.float32)
    with ExecutionContext(gpus=[0], transfers=False, timings=True) as ctx:
        x, y = ctx.array(n, "float32"), ctx.array(n, "float32")
        assert x.device == 0 and y.device == 0
        x[:] = xs
        sq = ctx.build_kernel(SQUARE, "square", "pointer, const pointer, sint32")
        inc = ctx.build_kernel(INC, "inc", "y: inout pointer float, n: sint32")
        lo = sq(blocks(h), THREADS)(y[:h], x[:h], h)
        hi = sq(blocks(n - h), THREADS)(y[h:], x[h:], n - h)
        whole = inc(blocks(n), (THREADS, 1, 1))(y, n)
        want = xs * xs + np.float32(1)
        np.testing.assert_allclose(np.asarray(y), want, rtol=1e-6)
        for v in (lo, hi, whole):
            v.wait(timeout=GPU_TIMEOUT)
        res = ctx.resources()
        assert res["modules"] == 2 and res["streams"] >= 1, res
        _, _, gpu_ns = whole.times()
        assert gpu_ns > 0, f"the GPU time of a kernel with timings on: {whole.times()}"
        # Element access and export of device arrays.
        assert float(y[5]) == pytest.approx(float(want[5]), rel=1e-6)
        y[5] = 2.0
        assert float(y[5]) == 2.0
        assert bool(cp.allclose(cp.asarray(y)[6:10], cp.asarray(want[6:10]), rtol=1e-6))
        # A device-to-host copy on a GPU stream, then a host read.
        back = ctx.array(n, "float32", device="cpu")
        ctx.copy(back[:8], y[:8])
        assert back[5] == 2.0


def test_bind_kernel_from_ptx(nvrtc, tmp_path):
    ptx = compile_ptx(SQUARE, "square.cu")
    path = tmp_path / "square.ptx"
    path.write_bytes(ptx)
    n = 4096
    xs = np.arange(n, dtype=np.float32) / 7
    ctx = ExecutionContext(gpus=[0], transfers=False)
    try:
        x = ctx.wrap(cp.asarray(xs))
        outs = []
        for code in (ptx, ptx.decode(), str(path)):
            k = ctx.bind_kernel(code, "square", "y: out pointer float, x: in pointer float, n: sint32")
            y = ctx.array(n, "float32")
            k(blocks(n), THREADS)(y, x, n)
            outs.append(y)
        for y in outs:
            np.testing.assert_allclose(np.asarray(y), xs * xs, rtol=1e-6)
        res = ctx.resources()
        assert res["modules"] == 3 and res["streams"] >= 1 and res["events"] >= 1, res
        with pytest.raises(TypeError):  # host memory for a GPU kernel: refused before scheduling
            k(1, 1)(ctx.array(n, "float32", device="cpu"), x, n)
    finally:
        ctx.close()
    assert ctx.resources() == {"streams": 0, "events": 0, "modules": 0, "word_pages": 0}
    with pytest.raises(UCXCloseError):
        k(1, 1)(outs[0], x, n)


async def test_kernel_reads_what_a_receive_fills(nvrtc, pair):
    client, srv = pair
    n = 1 << 16
    data = np.random.default_rng(1).random(n, dtype=np.float32)
    async with ExecutionContext(gpus=[0]) as ctx:
        sq = ctx.build_kernel(SQUARE, "square", "pointer, const pointer, sint32")
        w, y = ctx.array(n, "float32"), ctx.array(n, "float32")
        rv = ctx.recv(srv, w, tag="kernel")
        kv = sq(blocks(n), THREADS)(y, w, n)  # launched now, waits on the device for the receive
        await asyncio.wait_for(client.send(data, tag="kernel"), GPU_TIMEOUT)
        await asyncio.wait_for(kv, GPU_TIMEOUT)
        await asyncio.wait_for(rv, GPU_TIMEOUT)
        np.testing.assert_allclose(np.asarray(y), data * data, rtol=1e-6)
        # And back: a send of device memory after a kernel wrote it.
        out = np.zeros(n, np.float32)
        sv = ctx.send(srv, y, tag="back")
        await asyncio.wait_for(client.recv(out, tag="back"), GPU_TIMEOUT)
        await asyncio.wait_for(sv, GPU_TIMEOUT)
        np.testing.assert_allclose(out, data * data, rtol=1e-6)
        assert ctx.resources()["word_pages"] >= 1
    assert ctx.resources() == {"streams": 0, "events": 0, "modules": 0, "word_pages": 0}


def test_one_gpu_arrays_are_device_memory(nvrtc):
    """With one GPU, ctx.array is plain device memory (managed memory is for several)."""
    with ExecutionContext(gpus=[0], transfers=False) as ctx:
        x = ctx.array(1024, "float32")
        attrs = cp.cuda.runtime.pointerGetAttributes(x.__cuda_array_interface__["data"][0])
        assert attrs.type == cp.cuda.runtime.memoryTypeDevice, attrs.type


@pytest.mark.skipif(_GPUS < 2, reason="needs two GPUs")
def test_managed_arrays_follow_kernels_across_gpus(nvrtc):
    """Two GPUs, round robin: the arrays are managed memory, each kernel runs after the
    one before on the other GPU (its ranges prefetched there: core/execution's
    TestMovesBetweenGPUs checks where), and the values are what running in order gives."""
    n = 1 << 20
    xs = np.arange(n, dtype=np.float32)
    with ExecutionContext(gpus=[0, 1], transfers=False, device_policy="round-robin") as ctx:
        y = ctx.array(n, "float32")
        attrs = cp.cuda.runtime.pointerGetAttributes(y.__cuda_array_interface__["data"][0])
        assert attrs.type == cp.cuda.runtime.memoryTypeManaged, attrs.type
        y[:] = xs
        inc = ctx.build_kernel(INC, "inc", "y: inout pointer float, n: sint32")
        for _ in range(4):  # GPUs 0, 1, 0, 1: each kernel after the other
            inc(blocks(n), THREADS)(y, n)
        np.testing.assert_array_equal(np.asarray(y), xs + np.float32(4))
