"""One-sided put and get of CUDA memory between two processes, beside the device copy.

    python benchmarks/onesided_gpu_bench.py [--gpus 0,0] [--sizes 1MiB,...,1GiB] [--windows 1,4]
        [--backends ucxx_go,nixl] [--json FILE]

A target process on GPU `gpus[1]` allocates and registers a cupy buffer of the largest
size and hands its packed key to the client process on GPU `gpus[0]`, which for each
size and window puts (then gets) `iters` buffers from its own registered cupy memory,
`window` in flight (one awaited directly, more through asyncio.gather; puts also as
one `put_many` of the window), and flushes: bandwidth = iters * size / time (MB/s, 1e6
bytes). The baseline is the copy between the same devices in one process: cudaMemcpyPeerAsync
(cudaMemcpyAsync device to device on one GPU), timed with events.

NIXL (the `nixl_cu13` package, its UCX backend and the UCX it bundles), when importable,
runs the same transfers in two processes of its own: torch buffers registered with
`register_memory`, its agent metadata and descriptors handed over by a queue, `WRITE`
and `READ` requests made once per window slot with `initialize_xfer`, posted with
`transfer` and polled with `check_xfer_state` until done, as NIXL's users do.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time

from _bench_common import await_window, device_copy_MBps, parse_bytes, serve_one_client

os.environ.setdefault("UCX_NET_DEVICES", "lo")
os.environ.setdefault("UCXGO_ONE_SIDED", "1")  # one-sided transfers are off by default

DEFAULT_SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]


def _iters(size):
    return max(4, min(200, (4 << 30) // size))


def _target(gpu, nbytes, q, done):
    import cupy as cp

    import ucxx_go

    cp.cuda.Device(gpu).use()

    async def handler(ep):
        buf = cp.zeros(nbytes, dtype=cp.uint8)
        region = ucxx_go.register(buf)
        await ep.send_obj(region.pack())
        try:
            await ep.recv(bytearray(8))  # the client is done
        except ucxx_go.UCXError:
            pass

    asyncio.run(serve_one_client(ucxx_go, handler, q))
    done.set()


async def _client(gpu, port, sizes, windows):
    import cupy as cp

    import ucxx_go

    cp.cuda.Device(gpu).use()
    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    remote = ep.unpack_remote(await ep.recv_obj())
    src = cp.ones(max(sizes), dtype=cp.uint8)
    cp.cuda.get_current_stream().synchronize()
    local = ucxx_go.register(src)
    out = {}
    for size in sizes:
        view = ucxx_go.register(src[:size])  # inside the registration: the cache
        iters = _iters(size)
        for op_name in ("put", "get"):
            op = ep.put if op_name == "put" else ep.get
            for w in windows:
                await op(view, remote)  # warm-up: the first use sets up the transfer
                await ep.flush()
                t0 = time.perf_counter()
                for i in range(0, iters, w):
                    await await_window(lambda _: op(view, remote), min(w, iters - i))
                await ep.flush()
                out[f"{op_name} w{w} {size}"] = size * iters / (time.perf_counter() - t0) / 1e6
        for w in [w for w in windows if w > 1]:
            # w puts in flight as one put_many: one call, one completion
            batch = [(view, remote)] * w
            await ep.put_many(batch)
            await ep.flush()
            t0 = time.perf_counter()
            for i in range(0, iters, w):
                await ep.put_many(batch[:min(w, iters - i)])
            await ep.flush()
            out[f"put_many w{w} {size}"] = size * iters / (time.perf_counter() - t0) / 1e6
    transports = sorted(ep.get_active_transports())
    await ep.send(bytearray(8))
    await ep.close()
    del local
    return out, transports


def _nixl_target(gpu, nbytes, sizes, q_out, q_in):
    import torch
    from nixl_cu13 import nixl_agent, nixl_agent_config

    buf = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{gpu}")
    agent = nixl_agent("target", nixl_agent_config(backends=["UCX"]))
    agent.register_memory([buf])
    descs = {size: agent.get_serialized_descs(agent.get_xfer_descs(buf[:size])) for size in sizes}
    q_out.put((agent.get_agent_metadata(), descs))
    q_in.get(timeout=600)  # the client is done


def _nixl_client(gpu, sizes, windows, q_in, q_out, result):
    import torch
    from nixl_cu13 import nixl_agent, nixl_agent_config

    src = torch.ones(max(sizes), dtype=torch.uint8, device=f"cuda:{gpu}")
    torch.cuda.synchronize()
    agent = nixl_agent("client", nixl_agent_config(backends=["UCX"]))
    agent.register_memory([src])
    meta, descs = q_in.get(timeout=120)
    peer = agent.add_remote_agent(meta)
    out = {}

    def run(handles):
        for h in handles:
            if agent.transfer(h) == "ERR":
                raise RuntimeError("NIXL transfer failed to post")
        pending = list(handles)
        while pending:
            states = [agent.check_xfer_state(h) for h in pending]
            if "ERR" in states:
                raise RuntimeError("NIXL transfer failed")
            pending = [h for h, st in zip(pending, states) if st != "DONE"]

    for size in sizes:
        local = agent.get_xfer_descs(src[:size])
        remote = agent.deserialize_descs(descs[size])
        iters = _iters(size)
        for op_name, op in (("put", "WRITE"), ("get", "READ")):
            for w in windows:
                handles = [agent.initialize_xfer(op, local, remote, peer) for _ in range(w)]
                run(handles[:1])  # warm-up
                t0 = time.perf_counter()
                for i in range(0, iters, w):
                    run(handles[:min(w, iters - i)])
                out[f"{op_name} w{w} {size}"] = size * iters / (time.perf_counter() - t0) / 1e6
                for h in handles:
                    agent.release_xfer_handle(h)
    q_out.put("done")
    result.put(out)


def _run_nixl(client_gpu, target_gpu, sizes, windows):
    ctx = multiprocessing.get_context("spawn")
    to_client, to_target, result = ctx.Queue(), ctx.Queue(), ctx.Queue()
    target = ctx.Process(target=_nixl_target, args=(target_gpu, max(sizes), sizes, to_client, to_target), daemon=True)
    client = ctx.Process(target=_nixl_client, args=(client_gpu, sizes, windows, to_client, to_target, result),
                         daemon=True)
    target.start()
    client.start()
    out = result.get(timeout=600)
    client.join(60)
    target.join(60)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0,0", help="client GPU, target GPU")
    ap.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    ap.add_argument("--windows", default="1,4")
    ap.add_argument("--backends", default="ucxx_go,nixl", help="nixl is skipped where nixl_cu13 is missing")
    ap.add_argument("--json")
    args = ap.parse_args()
    client_gpu, target_gpu = (int(x) for x in args.gpus.split(","))
    sizes = [parse_bytes(s) for s in args.sizes.split(",")]
    windows = [int(w) for w in args.windows.split(",")]
    ctx = multiprocessing.get_context("spawn")
    q, done = ctx.Queue(), ctx.Event()
    target = ctx.Process(target=_target, args=(target_gpu, max(sizes), q, done), daemon=True)
    target.start()
    port = q.get(timeout=120)
    results, transports = asyncio.run(_client(client_gpu, port, sizes, windows))
    target.join(60)
    nixl = None
    if "nixl" in args.backends.split(","):
        try:
            import importlib.util

            if importlib.util.find_spec("nixl_cu13") is not None:
                nixl = _run_nixl(client_gpu, target_gpu, sizes, windows)
        except Exception as e:  # reported, not fatal: ours were measured
            print(f"NIXL failed: {e!r}", file=sys.stderr)
    copies = {size: device_copy_MBps(client_gpu, target_gpu, size, _iters(size)) for size in sizes}
    import cupy as cp

    name = cp.cuda.runtime.getDeviceProperties(client_gpu)["name"].decode()
    print(f"Device: {name}; client GPU {client_gpu}, target GPU {target_gpu}; transports {transports}")
    print(f"`python benchmarks/onesided_gpu_bench.py --gpus {args.gpus}`\n")
    cols = [f"{op} w{w}" for op in ("put", "get") for w in windows]
    print("| size | copy MB/s | " + " | ".join(f"{c} MB/s" for c in cols) + " | put w1 / copy |")
    print("|---:|---:|" + "---:|" * len(cols) + "---:|")
    for size in sizes:
        row = [f"{results[f'{c} {size}']:,.0f}" for c in cols]
        ratio = results[f"put w{windows[0]} {size}"] / copies[size]
        print(f"| {size >> 20} MiB | {copies[size]:,.0f} | " + " | ".join(row) + f" | {ratio:.2f} |")
    if nixl:
        print("\nNIXL (nixl_cu13, UCX backend), same transfers:\n")
        print("| size | " + " | ".join(f"{c} MB/s" for c in cols) + " | ours / NIXL, " +
              " | ".join(cols) + " |")
        print("|---:|" + "---:|" * (2 * len(cols)))
        for size in sizes:
            row = [f"{nixl[f'{c} {size}']:,.0f}" for c in cols]
            ratios = [f"{results[f'{c} {size}'] / nixl[f'{c} {size}']:.2f}" for c in cols]
            print(f"| {size >> 20} MiB | " + " | ".join(row) + " | " + " | ".join(ratios) + " |")
    many = [w for w in windows if f"put_many w{w} {sizes[0]}" in results]
    if many:
        print("\nOurs with the window's puts as one `put_many` (one call, one completion):\n")
        print("| size | " + " | ".join(f"put_many w{w} MB/s" for w in many) +
              (" | " + " | ".join(f"/ NIXL put w{w}" for w in many) if nixl else "") + " |")
        print("|---:|" + "---:|" * (len(many) * (2 if nixl else 1)))
        for size in sizes:
            row = [f"{results[f'put_many w{w} {size}']:,.0f}" for w in many]
            if nixl:
                row += [f"{results[f'put_many w{w} {size}'] / nixl[f'put w{w} {size}']:.2f}" for w in many]
            print(f"| {size >> 20} MiB | " + " | ".join(row) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "nixl": nixl, "copy": copies, "transports": transports,
                       "gpus": args.gpus, "device": name}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
