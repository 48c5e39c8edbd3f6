"""The communication shapes: two processes on one GPU, A (this process, the client)
and B (a spawned peer, the server), connected by ucxx_go over loopback.

Pipeline: A produces chunk i of a buffer with a kernel and sends it to B while it
computes chunk i+1 (``chunks`` chunks of ``chunk_bytes``); B receives each chunk and
runs a kernel on it. Forms:
  dag-async    A: ctx kernel + ctx.send per chunk, in program order; B: ctx.recv +
               ctx kernel per chunk; each side then awaits ctx.synchronize() once.
  dag-awaited  the same calls, each vertex awaited before the next (the DAG's own
               serial form).
  sequential   CuPy + Endpoint, each step awaited: kernel, stream synchronize,
               await ep.send (B: await ep.recv, kernel, synchronize).
Time: A's wall clock from its first launch to the arrival of B's "done" (sent once B
synchronized), median of the repetitions. The kernels' work (A's and B's kernels do
the same number of FMAs) is calibrated so that a chunk's two kernels together take
about one chunk's transfer time (or --comm-work): two processes on one GPU without
MPS time-slice it, so A's and B's kernels do not run at once, and the GPU time per
chunk is both kernels. There overlap gains the most: sequential costs about
2k + t per chunk, a perfect pipeline max(2k, t), hence "ideal" = (2k + t) / max(2k, t).
Correctness: B checks every received-and-consumed element exactly (the kernels
compute v = ((base + i) % 1000003) * 0.5 through a loop of fma(v, 1, 0), so the
expected value is exact), with the output poisoned before each repetition.

Halo exchange: a 1-D 3-point stencil over 2N cells split in halves (A left, B
right, zero Dirichlet ghosts at the outer ends); per step each side sends its
boundary cell and receives its neighbour's into its ghost cell, then updates its
interior (which needs no ghost) and its two boundary cells. dag-async: all steps in
program order (send, recv, interior, boundaries), the interior overlapping the
exchange; sequential: per step the exchange is awaited, then the kernels run and
are synchronized. Checked against a float64 numpy run of the whole domain.

Protocol (JSON control messages with send_obj/recv_obj on tag "ctl"): A sends a
command, B answers {"ready": true} once prepared, both run, B sends 8 bytes on tag
"done" when finished, then {"ok": ..., "error": ...} with its check. Every wait is
bounded (STEP_TIMEOUT); B exits by itself after its deadline.
"""

import asyncio
import faulthandler
import json
import os
import time
import traceback

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import numpy as np  # noqa: E402

from kernels import KERNELS, THREADS  # noqa: E402

STEP_TIMEOUT = 60.0  # any single await
STARTUP_TIMEOUT = 90.0  # the peer imports cupy and ucxx_go, starts CUDA, compiles
DATA_TAG = 1_000_000
HALO_TAG = 2_000_000
HALO_W = (0.25, 0.5, 0.25)
PIPE_FORMS = ("dag-async", "dag-awaited", "sequential")
HALO_FORMS = ("dag-async", "sequential")


def _w(aw, what, timeout=STEP_TIMEOUT):
    async def go():
        try:
            return await asyncio.wait_for(aw, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"comm: {what}: not within {timeout} s") from None
    return go()


class Side:
    """One process's kernels (DAG and CuPy) and stream."""

    def __init__(self, blocks, arch_options):
        import cupy as cp

        import ucxx_go

        self.cp = cp
        self.G, self.T = blocks, THREADS
        self.ctx = ucxx_go.ExecutionContext(policy="async")  # transfers=True: this engine's endpoints
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.dk, self.rk = {}, {}
        for name in ("produce", "consume", "stencil3"):
            spec = KERNELS[name]
            self.dk[name] = self.ctx.build_kernel(spec.source, name, spec.signature, options=arch_options)
            self.rk[name] = cp.RawKernel(spec.source, name)
            self.rk[name].compile()

    def raw(self, name, grid, block, *args):
        self.rk[name]((grid,), (block,), args, stream=self.stream)

    def close(self):
        self.ctx.close()


# -- pipeline ---------------------------------------------------------------------------------


def expected_chunks(chunks, elems):
    base = np.arange(chunks * elems, dtype=np.int64)
    return (base % 1000003).astype(np.float32) * np.float32(0.5) + np.float32(1.0)


async def pipeline_a(side, ep, form, buf, dbuf, chunks, E, work):
    """A's part of one repetition (launches and sends)."""
    cp, i32, f32 = side.cp, np.int32, np.float32
    G, T = side.G, side.T
    if form == "dag-async":
        k = side.dk["produce"](G, T)
        for i in range(chunks):
            k(dbuf[i * E:(i + 1) * E], i * E, E, work, 1.0, 0.0)
            side.ctx.send(ep, dbuf[i * E:(i + 1) * E], tag=DATA_TAG + i)
        await _w(side.ctx.synchronize(), "A: ctx.synchronize")
    elif form == "dag-awaited":
        k = side.dk["produce"](G, T)
        for i in range(chunks):
            await _w(k(dbuf[i * E:(i + 1) * E], i * E, E, work, 1.0, 0.0), f"A: produce {i}")
            await _w(side.ctx.send(ep, dbuf[i * E:(i + 1) * E], tag=DATA_TAG + i), f"A: send {i}")
        await _w(side.ctx.synchronize(), "A: ctx.synchronize")
    elif form == "sequential":
        for i in range(chunks):
            side.raw("produce", G, T, buf[i * E:(i + 1) * E], i32(i * E), i32(E), i32(work), f32(1.0), f32(0.0))
            side.stream.synchronize()
            await _w(ep.send(buf[i * E:(i + 1) * E], tag=DATA_TAG + i), f"A: send {i}")
    elif form == "transfer":
        for i in range(chunks):
            await _w(ep.send(buf[i * E:(i + 1) * E], tag=DATA_TAG + i), f"A: send {i}")
    else:
        raise ValueError(form)
    cp.cuda.Device().synchronize()


async def pipeline_b(side, ep, form, rbuf, drbuf, out, dout, chunks, E, work):
    cp, i32, f32 = side.cp, np.int32, np.float32
    G, T = side.G, side.T
    if form == "dag-async":
        k = side.dk["consume"](G, T)
        for i in range(chunks):
            side.ctx.recv(ep, drbuf[i * E:(i + 1) * E], tag=DATA_TAG + i)
            k(dout[i * E:(i + 1) * E], drbuf[i * E:(i + 1) * E], E, work, 1.0, 0.0)
        await _w(side.ctx.synchronize(), "B: ctx.synchronize")
    elif form == "dag-awaited":
        k = side.dk["consume"](G, T)
        for i in range(chunks):
            await _w(side.ctx.recv(ep, drbuf[i * E:(i + 1) * E], tag=DATA_TAG + i), f"B: recv {i}")
            await _w(k(dout[i * E:(i + 1) * E], drbuf[i * E:(i + 1) * E], E, work, 1.0, 0.0), f"B: consume {i}")
        await _w(side.ctx.synchronize(), "B: ctx.synchronize")
    elif form == "sequential":
        for i in range(chunks):
            await _w(ep.recv(rbuf[i * E:(i + 1) * E], tag=DATA_TAG + i), f"B: recv {i}")
            side.raw("consume", G, T, out[i * E:(i + 1) * E], rbuf[i * E:(i + 1) * E], i32(E), i32(work), f32(1.0), f32(0.0))
            side.stream.synchronize()
    elif form == "transfer":
        for i in range(chunks):
            await _w(ep.recv(rbuf[i * E:(i + 1) * E], tag=DATA_TAG + i), f"B: recv {i}")
    else:
        raise ValueError(form)
    cp.cuda.Device().synchronize()


# -- halo -----------------------------------------------------------------------------------------


def halo_initial(n, seed):
    return np.random.default_rng(seed).uniform(0.0, 1.0, 2 * n).astype(np.float32)


def halo_reference(n, steps, seed):
    u = np.zeros(2 * n + 2)
    u[1:-1] = halo_initial(n, seed)
    w0, w1, w2 = HALO_W
    for _ in range(steps):
        new = np.zeros_like(u)
        new[1:-1] = w0 * u[:-2] + w1 * u[1:-1] + w2 * u[2:]
        u = new
    return u[1:-1]


def halo_buffers(cp, n, seed, left):
    init = halo_initial(n, seed)
    own = init[:n] if left else init[n:]
    u0 = np.zeros(n + 2, np.float32)
    u0[1:n + 1] = own
    return [cp.asarray(u0), cp.zeros(n + 2, np.float32)]


def halo_ops(n, t, left):
    """Step t of one side: (send (buf, lo, hi), recv (buf, lo, hi), kernels), where buf
    0/1 is U[0]/U[1] and each kernel is (kind, out (buf, lo, hi), in (buf, lo, hi),
    n_out) of stencil3. The left side sends its last owned cell and receives into its
    right ghost; the right side the reverse. The interior needs no ghost."""
    old, new = t % 2, (t + 1) % 2
    if left:
        snd, rcv = (old, n, n + 1), (old, n + 1, n + 2)
    else:
        snd, rcv = (old, 1, 2), (old, 0, 1)
    kernels = [("interior", (new, 2, n), (old, 1, n + 1), n - 2),
               ("boundary", (new, 1, 2), (old, 0, 3), 1),
               ("boundary", (new, n, n + 1), (old, n - 1, n + 2), 1)]
    return snd, rcv, kernels


async def halo_run(side, ep, form, U, DU, n, steps, left):
    """One side's steps; the result is in U[steps % 2][1:n+1]."""
    cp, i32, f32 = side.cp, np.int32, np.float32
    G, T = side.G, side.T
    w0, w1, w2 = HALO_W
    if form == "dag-async":
        k = {"interior": side.dk["stencil3"](G, T), "boundary": side.dk["stencil3"](1, 32)}
        for t in range(steps):
            (sb, slo, shi), (rb, rlo, rhi), kernels = halo_ops(n, t, left)
            side.ctx.send(ep, DU[sb][slo:shi], tag=HALO_TAG + t)
            side.ctx.recv(ep, DU[rb][rlo:rhi], tag=HALO_TAG + t)
            for kind, (ob, olo, ohi), (ib, ilo, ihi), nout in kernels:
                k[kind](DU[ob][olo:ohi], DU[ib][ilo:ihi], nout, w0, w1, w2)
        await _w(side.ctx.synchronize(), "halo: ctx.synchronize", timeout=STEP_TIMEOUT * 2)
    elif form == "sequential":
        shape = {"interior": (G, T), "boundary": (1, 32)}
        ww = (f32(w0), f32(w1), f32(w2))
        for t in range(steps):
            (sb, slo, shi), (rb, rlo, rhi), kernels = halo_ops(n, t, left)
            side.stream.synchronize()
            await _w(asyncio.gather(ep.send(U[sb][slo:shi], tag=HALO_TAG + t), ep.recv(U[rb][rlo:rhi], tag=HALO_TAG + t)),
                     f"halo step {t}")
            for kind, (ob, olo, ohi), (ib, ilo, ihi), nout in kernels:
                side.raw("stencil3", *shape[kind], U[ob][olo:ohi], U[ib][ilo:ihi], i32(nout), *ww)
        side.stream.synchronize()
    else:
        raise ValueError(form)
    cp.cuda.Device().synchronize()


# -- B, the peer process ---------------------------------------------------------------------


def peer_main(port_queue, cfg):
    """The spawned peer: serves one client, runs what it asks, exits."""
    faulthandler.dump_traceback_later(cfg["deadline_s"], exit=True)
    try:
        asyncio.run(_peer(port_queue, cfg))
    except BaseException:
        traceback.print_exc()
        raise


async def _peer(port_queue, cfg):
    import cupy as cp

    import ucxx_go

    cp.cuda.Device(0).use()
    side = Side(cfg["blocks"], tuple(cfg["arch_options"]))
    finished = asyncio.get_running_loop().create_future()

    async def handler(ep):
        try:
            await _serve(side, ep, cfg)
            if not finished.done():
                finished.set_result(None)
        except BaseException as e:  # noqa: BLE001
            traceback.print_exc()
            try:
                await _w(ep.send_obj(json.dumps({"ok": False, "error": f"B: {type(e).__name__}: {e}"}).encode(),
                                     tag="ctl"), "B: error report", timeout=5)
            except BaseException:  # noqa: BLE001
                pass
            if not finished.done():
                finished.set_exception(e)

    listener = ucxx_go.create_listener(handler)
    port_queue.put(listener.port)
    try:
        await _w(finished, "B: the session", timeout=cfg["deadline_s"])
    finally:
        listener.close()
        side.close()


async def _serve(side, ep, cfg):
    cp = side.cp
    done = np.zeros(1, "<u8")
    while True:
        cmd = json.loads(bytes(await _w(ep.recv_obj(tag="ctl"), "B: command", timeout=cfg["deadline_s"])))
        what = cmd["cmd"]
        if what == "quit":
            await _w(ep.send_obj(json.dumps({"ok": True}).encode(), tag="ctl"), "B: bye")
            await _w(ep.close(), "B: close")
            return
        if what == "pipeline":
            C, E, work, form = cmd["chunks"], cmd["elems"], cmd["work"], cmd["form"]
            if getattr(side, "_pipe_size", None) != C * E:
                side.rbuf = cp.empty(C * E, np.float32)
                side.out = cp.empty(C * E, np.float32)
                side.drbuf, side.dout = side.ctx.wrap(side.rbuf), side.ctx.wrap(side.out)
                side._pipe_size = C * E
                side._expect = expected_chunks(C, E)
            side.rbuf.fill(np.nan)
            side.out.fill(np.nan)
            cp.cuda.Device().synchronize()
            await _w(ep.send_obj(json.dumps({"ready": True}).encode(), tag="ctl"), "B: ready")
            await pipeline_b(side, ep, form, side.rbuf, side.drbuf, side.out, side.dout, C, E, work)
            await _w(ep.send(done, tag="done"), "B: done")
            if form == "transfer":
                got = cp.asnumpy(side.rbuf)
                want = side._expect - np.float32(1.0)
            else:
                got = cp.asnumpy(side.out)
                want = side._expect
            bad = np.flatnonzero(got != want)
            if bad.size:
                i = int(bad[0])
                reply = {"ok": False, "error": f"B ({form}): {bad.size} of {got.size} elements wrong, first [{i}] = "
                                                f"{got[i]} (chunk {i // E}), expected {want[i]}"}
            else:
                reply = {"ok": True}
            await _w(ep.send_obj(json.dumps(reply).encode(), tag="ctl"), "B: check")
        elif what == "halo":
            n, steps, form = cmd["n"], cmd["steps"], cmd["form"]
            U = halo_buffers(cp, n, cmd["seed"], left=False)
            DU = [side.ctx.wrap(u) for u in U]
            cp.cuda.Device().synchronize()
            await _w(ep.send_obj(json.dumps({"ready": True}).encode(), tag="ctl"), "B: ready")
            await halo_run(side, ep, form, U, DU, n, steps, left=False)
            await _w(ep.send(done, tag="done"), "B: done")
            await _w(ep.send(U[steps % 2][1:n + 1], tag="halo_result"), "B: halo result")
            await _w(ep.send_obj(json.dumps({"ok": True}).encode(), tag="ctl"), "B: check")
        else:
            raise ValueError(f"B: unknown command {what!r}")


# -- A, this process ----------------------------------------------------------------------------


async def _command(ep, cmd):
    await _w(ep.send_obj(json.dumps(cmd).encode(), tag="ctl"), f"A: command {cmd['cmd']}")
    reply = json.loads(bytes(await _w(ep.recv_obj(tag="ctl"), f"A: B's answer to {cmd['cmd']}", timeout=STARTUP_TIMEOUT)))
    if not reply.get("ready"):
        raise RuntimeError(f"B refused {cmd}: {reply.get('error')}")


async def _check_reply(ep, what):
    reply = json.loads(bytes(await _w(ep.recv_obj(tag="ctl"), f"A: B's check of {what}")))
    if not reply.get("ok"):
        raise RuntimeError(f"comm {what}: {reply.get('error')}")


async def _timed_pipeline(side, ep, form, buf, dbuf, C, E, work):
    cp = side.cp
    if form == "transfer":  # the bytes B expects, made before the clock starts
        for i in range(C):
            side.raw("produce", side.G, side.T, buf[i * E:(i + 1) * E], np.int32(i * E), np.int32(E), np.int32(0),
                     np.float32(1), np.float32(0))
        side.stream.synchronize()
    else:  # poison: a chunk sent before its kernel wrote it fails B's check
        buf.fill(np.nan)
    cp.cuda.Device().synchronize()
    await _command(ep, {"cmd": "pipeline", "form": form, "chunks": C, "elems": E, "work": work})
    done = np.zeros(1, "<u8")
    done_task = asyncio.ensure_future(ep.recv(done, tag="done"))
    t0 = time.perf_counter()
    await pipeline_a(side, ep, form, buf, dbuf, C, E, work)
    await _w(done_task, "A: B's done")
    t1 = time.perf_counter()
    await _check_reply(ep, f"pipeline {form}")
    return t1 - t0


async def _timed_halo(side, ep, form, n, steps, seed):
    cp = side.cp
    U = halo_buffers(cp, n, seed, left=True)
    DU = [side.ctx.wrap(u) for u in U]
    cp.cuda.Device().synchronize()
    await _command(ep, {"cmd": "halo", "form": form, "n": n, "steps": steps, "seed": seed})
    done = np.zeros(1, "<u8")
    done_task = asyncio.ensure_future(ep.recv(done, tag="done"))
    t0 = time.perf_counter()
    await halo_run(side, ep, form, U, DU, n, steps, left=True)
    await _w(done_task, "A: B's halo done")
    t1 = time.perf_counter()
    right = cp.empty(n, np.float32)
    await _w(ep.recv(right, tag="halo_result"), "A: B's halo result")
    await _check_reply(ep, f"halo {form}")
    got = np.concatenate([cp.asnumpy(U[steps % 2][1:n + 1]), cp.asnumpy(right)]).astype(np.float64)
    return t1 - t0, got


def _kernel_time_per_chunk(side, buf, C, E, work, reps=3):
    """Seconds per chunk of the produce kernel alone (CuPy, one stream, back to back)."""
    cp, i32, f32 = side.cp, np.int32, np.float32
    best = float("inf")
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i in range(C):
            side.raw("produce", side.G, side.T, buf[i * E:(i + 1) * E], i32(i * E), i32(E), i32(work), f32(1), f32(0))
        side.stream.synchronize()
        best = min(best, (time.perf_counter() - t0) / C)
    return best


async def client(port, cfg, log):
    import cupy as cp

    import ucxx_go

    cp.cuda.Device(0).use()
    side = Side(cfg["blocks"], tuple(cfg["arch_options"]))
    ep = None
    out = {"chunk_bytes": cfg["chunk_bytes"], "chunks": cfg["chunks"], "reps": cfg["reps"], "warmup": cfg["warmup"]}
    try:
        ep = await _w(ucxx_go.create_endpoint("127.0.0.1", port), "A: connect", timeout=STARTUP_TIMEOUT)
        C, E = cfg["chunks"], cfg["chunk_bytes"] // 4
        buf = cp.empty(C * E, np.float32)
        dbuf = side.ctx.wrap(buf)
        try:
            out["transports"] = ucxx_go.info()["transports"].get(ep.uid)
        except Exception as e:  # noqa: BLE001 (informative only)
            out["transports"] = f"? ({e})"
        # 1. Transfer alone (Endpoint, each send awaited): the time a kernel should match.
        ts = []
        for r in range(cfg["warmup"] + max(1, cfg["reps"])):
            t = await _timed_pipeline(side, ep, "transfer", buf, dbuf, C, E, 0)
            if r >= cfg["warmup"]:
                ts.append(t)
        transfer = float(np.median(ts)) / C
        out["transfer_us_per_chunk"] = transfer * 1e6
        # 2. Kernel work: A's and B's kernels together about one transfer per chunk (or --comm-work).
        if cfg.get("work"):
            work = int(cfg["work"])
        else:
            w1, w2 = 64, 4096
            t1 = _kernel_time_per_chunk(side, buf, C, E, w1)
            t2 = _kernel_time_per_chunk(side, buf, C, E, w2)
            slope = max((t2 - t1) / (w2 - w1), 1e-12)
            target = min(max(transfer / 2, 10e-6), 2e-3)
            work = int(min(max(round(w1 + (target - t1) / slope), 1), 1_000_000))
        out["work"] = work
        out["kernel_us_per_chunk"] = _kernel_time_per_chunk(side, buf, C, E, work) * 1e6
        log(f"comm: {C} chunks of {cfg['chunk_bytes']} B, transfer {out['transfer_us_per_chunk']:.1f} us/chunk, "
            f"kernel work {work}: {out['kernel_us_per_chunk']:.1f} us/chunk")
        # 3. The pipeline's forms, interleaved per repetition.
        times = {f: [] for f in PIPE_FORMS}
        for r in range(cfg["warmup"] + cfg["reps"]):
            for form in PIPE_FORMS:
                t = await _timed_pipeline(side, ep, form, buf, dbuf, C, E, work)
                if r >= cfg["warmup"]:
                    times[form].append(t)
        out["forms"] = {f: {"median_ms": float(np.median(v)) * 1e3, "per_chunk_us": float(np.median(v)) / C * 1e6,
                            "times_ms": [x * 1e3 for x in v]} for f, v in times.items()}
        seq, dag = out["forms"]["sequential"]["median_ms"], out["forms"]["dag-async"]["median_ms"]
        out["speedup_vs_sequential"] = seq / dag
        out["speedup_vs_dag_awaited"] = out["forms"]["dag-awaited"]["median_ms"] / dag
        k, x = out["kernel_us_per_chunk"], out["transfer_us_per_chunk"]
        out["ideal_speedup"] = (2 * k + x) / max(2 * k, x)  # see the module doc
        log("comm pipeline: " + ", ".join(f"{f} {v['per_chunk_us']:.1f} us/chunk" for f, v in out["forms"].items())
            + f"; dag-async vs sequential {out['speedup_vs_sequential']:.2f}x")
        # 4. Halo exchange.
        n, steps, seed = cfg["halo_n"], cfg["halo_steps"], cfg["seed"]
        ref = halo_reference(n, steps, seed)
        htimes = {f: [] for f in HALO_FORMS}
        errors = {}
        for r in range(cfg["warmup"] + cfg["reps"]):
            for form in HALO_FORMS:
                t, got = await _timed_halo(side, ep, form, n, steps, seed)
                err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
                errors[form] = max(errors.get(form, 0.0), err)
                if not err <= 1e-5 or not np.all(np.isfinite(got)):
                    raise RuntimeError(f"comm halo {form}: |u - ref| / |ref| = {err:.3g} > 1e-5")
                if r >= cfg["warmup"]:
                    htimes[form].append(t)
        out["halo"] = {"n_per_rank": n, "steps": steps, "errors": errors,
                       "forms": {f: {"median_ms": float(np.median(v)) * 1e3, "per_step_us": float(np.median(v)) / steps * 1e6,
                                     "times_ms": [x * 1e3 for x in v]} for f, v in htimes.items()}}
        out["halo"]["speedup_vs_sequential"] = (out["halo"]["forms"]["sequential"]["median_ms"]
                                                / out["halo"]["forms"]["dag-async"]["median_ms"])
        log("comm halo: " + ", ".join(f"{f} {v['per_step_us']:.1f} us/step" for f, v in out["halo"]["forms"].items()))
        await _w(ep.send_obj(json.dumps({"cmd": "quit"}).encode(), tag="ctl"), "A: quit")
        await _check_reply(ep, "quit")
    finally:
        if ep is not None and not ep.closed:
            ep.abort()
        side.close()
    return out


def run(cfg, log=print):
    """Spawn B, run everything as A, return the results dict. Raises on any failure."""
    import multiprocessing

    mp = multiprocessing.get_context("spawn")
    port_queue = mp.Queue()
    peer_cfg = dict(cfg, deadline_s=cfg["deadline_s"])
    peer = mp.Process(target=peer_main, args=(port_queue, peer_cfg), daemon=True, name="dag-comm-peer")
    peer.start()
    try:
        try:
            port = port_queue.get(timeout=STARTUP_TIMEOUT)
        except Exception:  # noqa: BLE001 (queue.Empty)
            raise RuntimeError(f"comm: the peer gave no port within {STARTUP_TIMEOUT} s (exit code {peer.exitcode})") from None
        return asyncio.run(client(port, cfg, log))
    finally:
        peer.join(timeout=15)
        if peer.is_alive():
            peer.terminate()
            peer.join(timeout=5)
            if peer.is_alive():
                peer.kill()
                peer.join(timeout=5)
