"""A built-in's options against the default call and NCCL, in the same processes.

Times in-place broadcasts or allreduces, or out-of-place reduce-scatters (the output
one n-th of the input), on GPU buffers, one rank per GPU: NCCL
(torch.distributed), the communicator's own call (the built-in and options it
picks), and each variant given, a plan the DSL's built-ins write
(``ucxx_go.language.builtins``: byte for byte core/builtin's) run with
``Communicator.execute``. Per size and variant: the slowest rank's median over
`--iters` calls, each after a barrier and followed by a device synchronize, in
`--rounds` interleaved rounds, after one checked call of each (the values it
leaves); rank 0 prints rows and writes JSON.

    python -m ucxx_go.launch -n 4 benchmarks/gpu/plan_variants.py --collective broadcast \\
        --variants chain:c4,chain:c8,chain:c16,chain:c8l2 --sizes-mib 24,96,384,768 --out sweep.json

A variant is ``name:c<chunks>[l<lanes>]`` (reduce_scatter: ``allpairs:c1l2`` and the
like, ``read``, ``read1`` or ``pipelined:c<pieces>``: read_reduce_scatter and
pipelined_reduce_scatter below; sizes are the input's). Sizes must divide into every variant's
pieces (a plan is cut evenly; the communicator's own call takes fewer pieces instead,
or for an allreduce pads a tail).
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import time

import cupy as cp
import numpy as np
from collectives_bench import Nccl


def read_reduce_scatter(n, one_op=False):
    """An out-of-place reduce-scatter that pulls: after a handshake, rank r reduces
    block r of its input with block r of each peer's input, read over the peer's
    memory channel (rre, one peer an op, into the output; the DSL fuses the ops after
    the first into one), then tells each peer it is done reading (the peer returns
    only then); every op on one lane (a lane a peer would order the reductions through
    semaphores, which the host takes). Not a built-in: 1.6x the built-in's time at 1
    GiB on 4 x H100 (RESULTS.md, session 21). one_op (variant "read1"): the plan's
    reductions merged into one rre reading every peer at once (one kernel pass)."""
    from ucxx_go._plan import ExecutionPlan
    from ucxx_go.language.builtins_common import signal_all, wait_all
    from ucxx_go.language.channel import MemoryChannel
    from ucxx_go.language.collectives import ReduceScatter
    from ucxx_go.language.program import CollectiveProgram
    from ucxx_go.language.rank import Rank
    from ucxx_go.language.types import SyncType
    prog = CollectiveProgram(f"bench.reducescatter.read.n{n}", ReduceScatter(n, 1, False), n, prune_syncs=True)
    with prog:
        chans = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        signal_all(list(chans.values()), 0, relaxed=True)
        wait_all(list(chans.values()), 0, relaxed=True, data_sync=SyncType.after)
        for r in range(n):
            own, out = Rank(r).get_input_buffer()[r:r + 1], Rank(r).get_output_buffer()[0:1]
            for i, p in enumerate(q for q in range(n) if q != r):
                chans[(r, p)].reduce(own if i == 0 else out, [Rank(p).get_input_buffer()[r:r + 1]],
                                     tb=0, local_dst_chunk=out, op=None)
        signal_all(list(chans.values()), 0, data_sync=SyncType.before)
        wait_all(list(chans.values()), 0, data_sync=SyncType.after)
    text = prog.to_json()
    if one_op:
        text = json.dumps(_merge_reductions(json.loads(text)))
    return ExecutionPlan.from_json(text)


def _merge_reductions(plan):
    """Each lane's rre, nop, rre whose second accumulates into the first's output, as
    one rre over all their sources."""
    for gpu in plan["gpus"]:
        for tb in gpu["threadblocks"]:
            ops, out = tb["ops"], []
            for op in ops:
                if (op["name"] == "rre" and len(out) >= 2 and out[-1]["name"] == "nop" and out[-2]["name"] == "rre"
                        and op["dst_buff"] == out[-2]["dst_buff"] and op["src_buff"][0] == op["dst_buff"][0]):
                    out.pop()
                    out[-1] = dict(out[-1], src_buff=out[-1]["src_buff"] + op["src_buff"][1:])
                else:
                    out.append(op)
            tb["ops"] = out
    return plan


def pipelined_reduce_scatter(n, c):
    """An out-of-place all-pairs reduce-scatter in c pieces on two lanes a rank: lane
    0 puts piece j of each peer's block into the peer's scratch slot and signals the
    peer's lane 1; lane 1 waits for piece j from every peer and reduces it into the
    output, while lane 0 moves piece j + 1 (on a GPU: copy engines on one stream,
    reduction kernels on another). Not a built-in: slower than the built-in in all but
    one launch on 4 x H200, its reduce lane's stream waits noticing signals late
    (RESULTS.md, session 21); with program waits (UCXGO_PROGRAM_* knobs) not yet run."""
    from ucxx_go._plan import ExecutionPlan
    from ucxx_go.language.builtins_common import Wiring, peer_of, signal_all, slot, wait_all
    from ucxx_go.language.collectives import ReduceScatter
    from ucxx_go.language.program import CollectiveProgram
    from ucxx_go.language.rank import Buffer, Rank
    from ucxx_go.language.types import SyncType
    prog = CollectiveProgram(f"bench.reducescatter.pipelined.n{n}.c{c}", ReduceScatter(n, c, False), n)
    with prog:
        w, put_end, red_end = Wiring(), {}, {}
        for r in range(n):
            for p in range(r + 1, n):
                put_end[(r, p)], red_end[(p, r)] = w.connect(r, 0, p, 1)
                put_end[(p, r)], red_end[(r, p)] = w.connect(p, 0, r, 1)
        w.handshake()
        scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
        peers = {r: [peer_of(r, i, n) for i in range(n - 1)] for r in range(n)}
        for j in range(c):
            for r in range(n):
                inp = Rank(r).get_input_buffer()
                for p in peers[r]:
                    s = slot(r, p, n) * c + j
                    put_end[(r, p)].put(scratch[p][s:s + 1], inp[p * c + j:p * c + j + 1], tb=0)
                signal_all([put_end[(r, p)] for p in peers[r]], 0, data_sync=SyncType.before)
            for r in range(n):
                wait_all([red_end[(r, p)] for p in peers[r]], 1, data_sync=SyncType.after)
                own = Rank(r).get_input_buffer()[r * c + j:r * c + j + 1]
                slots = [scratch[r][s * c + j:s * c + j + 1] for s in range(n - 1)]
                Rank(r).reduce(own, slots, tb=1, dst_chunk=Rank(r).get_output_buffer()[j:j + 1], reduce_op=None)
    return ExecutionPlan.from_json(prog.to_json())


def variant_plan(collective, spec, n, inplace=True):
    from ucxx_go._plan import ExecutionPlan
    from ucxx_go.language.builtins import Options, builtin_plan
    if collective == "reduce_scatter" and spec in ("read", "read1"):
        return read_reduce_scatter(n, one_op=spec == "read1")
    if collective == "reduce_scatter" and spec.startswith("pipelined:c"):
        return pipelined_reduce_scatter(n, int(spec.split(":c")[1]))
    name, opts = spec.split(":")
    m = re.fullmatch(r"c(\d+)(?:l(\d+))?", opts)
    if not m:
        raise SystemExit(f"variant {spec!r}: want name:c<chunks>[l<lanes>]")
    o = Options(inplace=inplace, chunks=int(m[1]), lanes=int(m[2] or 1))
    key = "reducescatter" if collective == "reduce_scatter" else collective
    return ExecutionPlan.from_json(builtin_plan(f"{key}.{name}", n, o))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--collective", choices=["broadcast", "allreduce", "reduce_scatter"], required=True)
    ap.add_argument("--variants", required=True, help="comma-separated name:c<chunks>[l<lanes>]")
    ap.add_argument("--sizes-mib", default="24,96,384,768")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()
    nccl = Nccl()  # collectives_bench's, tensors made once a size
    await nccl.start(port_offset=7)  # the launcher's port is the communicator's
    import ucxx_go
    comm = await ucxx_go.Communicator.init(timeout=300)
    n, coll = comm.size, a.collective
    scatter = coll == "reduce_scatter"
    plans = {v: variant_plan(coll, v, n, inplace=not scatter) for v in a.variants.split(",")}

    async def run(variant, x, out):
        if variant == "nccl":
            await nccl.run(coll, x, out)
        elif variant == "default":
            if coll == "broadcast":
                await comm.broadcast(x, root=0)
            elif scatter:
                await comm.reduce_scatter(x, out)
            else:
                await comm.allreduce(x)
        else:
            await comm.execute(plans[variant], x, out if scatter else None)

    async def check(variant, x, out):
        """Each variant's result once a size, before it is timed: a wrong plan must not
        pass for a fast one (broadcast: rank 0's values everywhere; allreduce and
        reduce_scatter of rank + 1 everywhere: n(n+1)/2)."""
        x[:] = rank + 1
        if scatter:
            out[:] = 0  # (a broadcast's out is x: the root's values stay)
        await run(variant, x, out)
        cp.cuda.Device().synchronize()
        want = 1 if coll == "broadcast" else n * (n + 1) // 2
        got = out if scatter else x
        if not bool((got == want).all()):
            raise SystemExit(f"rank {rank}: {variant} at {x.nbytes} bytes gave {got[:4]}..., want {want}")
        x[:] = 1

    rows = []
    for nbytes in [int(s) << 20 for s in a.sizes_mib.split(",")]:
        x = cp.ones(nbytes // 4, cp.float32)
        out = cp.zeros(nbytes // 4 // n, cp.float32) if scatter else x
        for variant in ["nccl", "default", *plans]:
            await check(variant, x, out)
        for rnd in range(a.rounds):
            for variant in ["nccl", "default", *plans]:
                for _ in range(2):
                    await run(variant, x, out)
                cp.cuda.Device().synchronize()
                ts = []
                for _ in range(a.iters):
                    await comm.barrier()
                    t0 = time.perf_counter()
                    await run(variant, x, out)
                    cp.cuda.Device().synchronize()
                    ts.append(time.perf_counter() - t0)
                m = np.array([statistics.median(ts)])
                await comm.allreduce(m, op="max")
                rows.append({"variant": variant, "bytes": nbytes, "round": rnd, "us": m[0] * 1e6})
                if rank == 0:
                    print(f"{variant:16s} {nbytes >> 20:5d} MiB round {rnd} {m[0] * 1e6:9.1f} us", flush=True)
        del x, out
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"collective": coll, "ranks": n, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                       "rows": rows}, f, indent=1)
    await comm.barrier()
    nccl.dist.destroy_process_group()


if __name__ == "__main__":
    asyncio.run(main())
