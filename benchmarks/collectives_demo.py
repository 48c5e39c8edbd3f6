"""A first collective: every rank adds its numbers, on host memory (numpy) and, where
CuPy and a GPU are present, on device memory. Run it with the launcher:

    python -m ucxx_go.launch -n 4 benchmarks/collectives_demo.py
"""

import asyncio

import numpy as np

import ucxx_go


async def main():
    comm = await ucxx_go.Communicator.init()
    r, n = comm.rank, comm.size
    x = np.full(1 << 20, r + 1, dtype=np.float32)
    await comm.allreduce(x)  # in place: every rank gets the sum
    assert (x == n * (n + 1) / 2).all()
    blocks = np.empty(n * 4, dtype=np.int64)
    await comm.allgather(np.full(4, r, dtype=np.int64), blocks)
    if r == 0:
        print(f"{n} ranks: allreduce gave {x[0]:.0f} everywhere; allgather gave {blocks.tolist()}")
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() > 0:
            cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
            y = cp.full(1 << 20, r + 1, dtype=cp.float32)
            await comm.allreduce(y)
            if r == 0:
                print(f"on the GPU: {float(y[0]):.0f}")
    except ImportError:
        pass
    comm.close()


asyncio.run(main())
