"""GPU collectives: ucxx_go against NCCL (torch.distributed), the same process layout.

Run one rank per process with the launcher (which sets RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT, as torchrun does):

    python -m ucxx_go.launch -n 2 benchmarks/gpu/collectives_bench.py --lib ucxx --out ours.json
    python -m ucxx_go.launch -n 2 benchmarks/gpu/collectives_bench.py --lib nccl --out nccl.json

Rank r uses GPU r % (visible GPUs): with CUDA_VISIBLE_DEVICES=0 every rank shares one
GPU. Times are nccl-tests': per size the median over iterations of the slowest rank's
time per call (each call followed by a device synchronize: "per call"), and the time
of `--inflight` calls issued back to back then one synchronize, per call ("in
flight", the median of `--inflight-rounds` such batches; "queued": the same calls' time
before the synchronize, the host's part). Bus bandwidth = bytes / time x factor: allreduce 2(n-1)/n, allgather and
reduce_scatter (n-1)/n, broadcast 1, alltoall (n-1)/n; bytes are the per-rank buffer
nccl-tests counts (allgather: the output, reduce_scatter: the input). Rank 0 writes
JSON; `--copy` adds the device-to-device copy rate each rank gets with all copying at
once (the ceiling for ranks sharing a GPU). NCCL's torch tensors over the CuPy arrays
are made once a size, outside the timed calls (`--nccl-wrap-each-call`: in every call,
as the tables of sessions 17-19 were measured).
"""

import argparse
import asyncio
import json
import os
import statistics
import time

import cupy as cp
import numpy as np

FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "alltoall": lambda n: (n - 1) / n}


def sizes(lo, hi):
    s, out = lo, []
    while s <= hi:
        out.append(s)
        s *= 4
    return out


class Ucxx:
    async def start(self):
        import ucxx_go
        self.comm = await ucxx_go.Communicator.init(timeout=300)
        return self.comm.rank, self.comm.size

    ordered = False  # --ordered: every call stream-ordered (returns once queued, as NCCL's)

    async def run(self, name, x, out):
        c, o = self.comm, self.ordered
        if name == "allreduce":
            await c.allreduce(x, out, stream_ordered=o)
        elif name == "allgather":
            await c.allgather(x, out, stream_ordered=o)
        elif name == "reduce_scatter":
            await c.reduce_scatter(x, out, stream_ordered=o)
        elif name == "broadcast":
            await c.broadcast(x, root=0, stream_ordered=o)
        elif name == "alltoall":
            await c.alltoall(x, out, stream_ordered=o)

    async def barrier(self):
        await self.comm.barrier()

    def sync(self):
        cp.cuda.Device().synchronize()


class Nccl:
    async def start(self, port_offset=0):
        """port_offset: torch's store listens that far above the launcher's port (a
        process that also starts a Communicator, which takes the launcher's own)."""
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        r = int(os.environ["RANK"])
        dev = torch.device("cuda", r % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        if port_offset:
            dist.init_process_group("nccl", init_method=f"tcp://{os.environ['MASTER_ADDR']}:"
                                    f"{int(os.environ['MASTER_PORT']) + port_offset}",
                                    rank=r, world_size=int(os.environ["WORLD_SIZE"]), device_id=dev)
        else:
            dist.init_process_group("nccl", device_id=dev)
        return dist.get_rank(), dist.get_world_size()

    # The torch tensors over the current size's CuPy arrays, made once (torch.as_tensor
    # reads __cuda_array_interface__, microseconds a call that NCCL's own time should
    # not carry); --nccl-wrap-each-call makes them in every call, as sessions 17-19 did.
    wrap_each_call = False
    _wrapped = (None, None, None, None)

    async def run(self, name, x, out):
        d = self.dist
        if self.wrap_each_call:
            tx, tout = self.torch.as_tensor(x), self.torch.as_tensor(out)
        else:
            if self._wrapped[0] is not x or self._wrapped[1] is not out:
                self._wrapped = (x, out, self.torch.as_tensor(x), self.torch.as_tensor(out))
            tx, tout = self._wrapped[2], self._wrapped[3]
        if name == "allreduce":
            d.all_reduce(tx)
        elif name == "allgather":
            d.all_gather_into_tensor(tout, tx)
        elif name == "reduce_scatter":
            d.reduce_scatter_tensor(tout, tx)
        elif name == "broadcast":
            d.broadcast(tx, src=0)
        elif name == "alltoall":
            d.all_to_all_single(tout, tx)

    async def barrier(self):
        self.dist.barrier()

    def sync(self):
        self.torch.cuda.synchronize()


def buffers(name, nbytes, n):
    count = max(nbytes // 4, 1)
    if name == "allgather":
        count = max(count // n, 1)
        return cp.ones(count, cp.float32), cp.empty(count * n, cp.float32), count * n * 4
    if name == "reduce_scatter":
        count = max(count // n * n, n)
        return cp.ones(count, cp.float32), cp.empty(count // n, cp.float32), count * 4
    if name == "alltoall":
        count = max(count // n * n, n)
    return cp.ones(count, cp.float32), cp.empty(count, cp.float32), count * 4


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=["ucxx", "nccl"], required=True)
    ap.add_argument("--ops", default="allreduce,allgather,reduce_scatter,broadcast,alltoall")
    ap.add_argument("--min-bytes", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--inflight", type=int, default=10)
    ap.add_argument("--inflight-rounds", type=int, default=5, help="batches of --inflight calls (the median counts)")
    ap.add_argument("--budget-s", type=float, default=120, help="stop growing sizes after this much time per op")
    ap.add_argument("--copy", action="store_true")
    ap.add_argument("--nccl-wrap-each-call", action="store_true",
                    help="make NCCL's torch tensors in every call (sessions 17-19's timing) instead of once a size")
    ap.add_argument("--ordered", action="store_true",
                    help="ucxx: stream-ordered calls (queued on CuPy's current stream, the await returns once queued)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()
    lib = Ucxx() if a.lib == "ucxx" else Nccl()
    lib.wrap_each_call = a.nccl_wrap_each_call
    lib.ordered = a.ordered
    rank, n = await lib.start()
    rows = []
    for name in a.ops.split(","):
        t_op = time.monotonic()
        for nbytes in sizes(a.min_bytes, a.max_bytes):
            x, out, counted = buffers(name, nbytes, n)
            iters = a.iters if nbytes < (64 << 20) else max(3, a.iters // 4)
            for _ in range(3):
                await lib.run(name, x, out)
            lib.sync()
            per_call = []
            for _ in range(iters):
                await lib.barrier()
                t0 = time.perf_counter()
                await lib.run(name, x, out)
                lib.sync()
                per_call.append(time.perf_counter() - t0)
            batches, queued = [], []
            for _ in range(a.inflight_rounds):
                await lib.barrier()
                t0 = time.perf_counter()
                for _ in range(a.inflight):
                    await lib.run(name, x, out)
                queued.append((time.perf_counter() - t0) / a.inflight)  # the host's time a call, before the sync
                lib.sync()
                batches.append((time.perf_counter() - t0) / a.inflight)
            # the slowest rank's medians (rank 0 takes the maximum over the ranks' files)
            med = np.array([statistics.median(per_call), statistics.median(batches), statistics.median(queued)], np.float64)
            rows.append((name, counted, med))
            if time.monotonic() - t_op > a.budget_s:
                break
    # max over ranks, by files: every rank writes its own, rank 0 merges
    path = f"{a.out}.rank{rank}"
    json.dump([[nm, b, m.tolist()] for nm, b, m in rows], open(path, "w"))
    await lib.barrier()
    result = {"lib": a.lib + ("-ordered" if a.ordered and a.lib == "ucxx" else ""), "ranks": n, "gpus": cp.cuda.runtime.getDeviceCount(),
              "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": []}
    if rank == 0:
        per_rank = [json.load(open(f"{a.out}.rank{q}")) for q in range(n)]
        for i, (nm, b, _) in enumerate(per_rank[0]):
            t_call = max(pr[i][2][0] for pr in per_rank)
            t_fl = max(pr[i][2][1] for pr in per_rank)
            t_q = max(pr[i][2][2] for pr in per_rank)
            f = FACTORS[nm](n)
            result["rows"].append({"op": nm, "bytes": b, "us_per_call": t_call * 1e6, "us_inflight": t_fl * 1e6, "us_queued": t_q * 1e6,
                                   "busbw_per_call": b / t_call * f / 1e9, "busbw_inflight": b / t_fl * f / 1e9})
    if a.copy:
        cps = []
        for nbytes in sizes(1 << 20, min(a.max_bytes, 1 << 30)):
            src, dst = cp.ones(nbytes // 4, cp.float32), cp.empty(nbytes // 4, cp.float32)
            await lib.barrier()
            ts = []
            for _ in range(5):
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                dst[...] = src
                cp.cuda.Device().synchronize()
                ts.append(time.perf_counter() - t0)
            cps.append({"bytes": nbytes, "GBps": nbytes / statistics.median(ts) / 1e9})
        if rank == 0:
            result["copy_per_rank"] = cps
    if rank == 0:
        json.dump(result, open(a.out, "w"), indent=1)
        for row in result["rows"]:
            print(f"{a.lib} {row['op']:15s} {row['bytes']:>11d} B {row['us_per_call']:10.1f} us "
                  f"{row['busbw_per_call']:8.2f} GB/s  inflight {row['us_inflight']:10.1f} us {row['busbw_inflight']:8.2f} GB/s"
                  f"  queued {row['us_queued']:8.1f} us",
                  flush=True)


if __name__ == "__main__":
    asyncio.run(main())
