"""run.py --dry: everything that can be checked without CUDA (see emulate.py).

1. kernels.py: every signature parses with ucxx_go's parser and matches its C
   declaration (count, pointer/scalar, const-ness, scalar types).
2. With --nvrtc (or an NVRTC ucxx_go finds): every kernel compiles with NVRTC
   through ucxx_go's own compile path (build_kernel's), with the suite's options.
3. Each shape at the dry and quick sizes: its program runs on the numpy emulator and
   matches its float64 reference within the GPU run's tolerances; its hand-written
   lane structure orders every conflicting pair of launches (no race in the
   cupy-streams / cuda-graph backends); with its waits removed, the race check does
   report races (the check itself works); the output check rejects a perturbed and a
   poisoned output; every launch passes ucxx_go's pack_arguments.
4. The full sizes: inputs build, fit int indexing, and every launch passes the
   argument and length checks (no emulation).
5. comm.py: the halo program of both sides, emulated step by step, matches the
   numpy reference; the pipeline's chunks match the expected values.
6. multigpu.py (run.py --multi-gpu): see multigpu.dry_checks.
"""

import ctypes
import os
import time
import traceback

import numpy as np


def _section(title):
    print(f"\n== {title}", flush=True)


class _NoWaits:
    """A Program wrapper that drops every wait (to see the race check fire)."""

    def __init__(self, inner):
        self.inner = inner

    def launch(self, *a, **k):
        return self.inner.launch(*a, **k)

    def mark(self, lane):
        return self.inner.mark(lane)

    def wait(self, lane, token):
        pass


def check_shape(name, mode, seed):
    from backends import BenchError
    from emulate import DagDry, Emulator
    from shapes import SHAPES, config

    cfg = config(mode)
    inst = SHAPES[name](cfg, np.random.default_rng(seed))
    t = time.perf_counter()
    emu = Emulator(inst.lanes)
    A = emu.alloc(inst.arrays, inst.state)
    emu.begin()
    inst.build(emu, A)
    if emu.races:
        raise AssertionError(f"{name}/{mode}: the hand-written lane structure races:\n  " + "\n  ".join(emu.races[:10]))
    outs = {k: emu.read(k) for k in inst.outputs}
    errs = inst.check(outs, "emulate")
    # The checker rejects wrong outputs.
    k0 = next(iter(inst.outputs))
    bad = {k: v.copy() for k, v in outs.items()}
    bad[k0][len(bad[k0]) // 2] = np.nan
    try:
        inst.check(bad, "poisoned")
        raise AssertionError(f"{name}: check() accepted a NaN in {k0}")
    except BenchError:
        pass
    bad = {k: v.copy() for k, v in outs.items()}
    if inst.outputs[k0][0] == "argmax":
        bad[k0] = (bad[k0] + 1) % 16
    else:
        bad[k0] = bad[k0] * np.float32(1.01)
    try:
        inst.check(bad, "perturbed")
        raise AssertionError(f"{name}: check() accepted {k0} off by 1%")
    except BenchError:
        pass
    # Without its waits, a shape with cross-lane dependencies must race.
    nw = Emulator(inst.lanes)
    A2 = nw.alloc(inst.arrays, inst.state)
    nw.begin()
    inst.build(_NoWaits(nw), A2)
    cross = name != "bs"
    if cross and not nw.races:
        raise AssertionError(f"{name}: dropping every wait reported no race: the race check is blind")
    if not cross and nw.races:
        raise AssertionError(f"{name}: independent lanes reported races: {nw.races[:3]}")
    # ucxx_go's own argument packing.
    dd = DagDry()
    try:
        A3 = dd.alloc(inst.arrays, inst.state)
        inst.build(dd, A3)
    finally:
        dd.close()
    print(f"  {name:5s} {mode:6s} ok: {len(emu.history)} launches, {inst.lanes} lanes, errors "
          + ", ".join(f"{k} {v:.1e}" for k, v in list(errs.items())[:4])
          + f"; no-wait variant: {len(nw.races)} races found; {time.perf_counter() - t:.1f} s", flush=True)


def check_full_sizes(name, seed):
    from emulate import DagDry
    from shapes import SHAPES, config

    t = time.perf_counter()
    inst = SHAPES[name](config("full"), np.random.default_rng(seed))
    dd = DagDry()
    try:
        A = dd.alloc(inst.arrays, inst.state)
        inst.build(dd, A)
    finally:
        dd.close()
    print(f"  {name:5s} full   ok: {dd.launches} launches, {inst.nbytes() / 2**20:.0f} MiB of arrays, sizes {inst.sizes}; "
          f"{time.perf_counter() - t:.1f} s", flush=True)


def check_comm():
    import comm
    from backends import check_launch
    from emulate import k_consume, k_produce, k_stencil3

    # Pipeline: produce + consume per chunk == expected.
    C, E = 6, 1000
    a = np.full(C * E, np.nan, np.float32)
    b = np.full(C * E, np.nan, np.float32)
    for i in range(C):
        k_produce(64, 256, a[i * E:(i + 1) * E], i * E, E, 7, 1.0, 0.0)
        k_consume(64, 256, b[i * E:(i + 1) * E], a[i * E:(i + 1) * E], E, 7, 1.0, 0.0)
    if not np.array_equal(b, comm.expected_chunks(C, E)):
        raise AssertionError("comm: emulated pipeline != expected_chunks")
    # Halo: both sides' programs (halo_ops), exchanged per step, == the reference.
    n, steps, seed = 50, 7, 3
    w0, w1, w2 = comm.HALO_W
    U = {True: comm.halo_buffers(np, n, seed, left=True), False: comm.halo_buffers(np, n, seed, left=False)}
    for t in range(steps):
        ops = {side: comm.halo_ops(n, t, side) for side in (True, False)}
        sent = {side: U[side][ops[side][0][0]][ops[side][0][1]:ops[side][0][2]].copy() for side in (True, False)}
        for side in (True, False):
            rb, lo, hi = ops[side][1]
            U[side][rb][lo:hi] = sent[not side]
            for kind, (ob, olo, ohi), (ib, ilo, ihi), nout in ops[side][2]:
                out, x = U[side][ob][olo:ohi], U[side][ib][ilo:ihi]
                grid, block = (64, 256) if kind == "interior" else (1, 32)
                check_launch("stencil3", grid, block, (out, x, nout, w0, w1, w2), len, lambda v: v.dtype)
                k_stencil3(grid, block, out, x, nout, w0, w1, w2)
    got = np.concatenate([U[True][steps % 2][1:n + 1], U[False][steps % 2][1:n + 1]])
    ref = comm.halo_reference(n, steps, seed)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    if not err <= 1e-6:
        raise AssertionError(f"comm: emulated halo differs from the reference by {err:.3g}")
    print(f"  comm ok: pipeline {C} chunks exact; halo {steps} steps, error {err:.1e}", flush=True)


def compile_all(nvrtc_path, arch_options):
    from kernels import KERNELS
    from ucxx_go import _execution, _kernels

    try:
        _kernels._load_nvrtc()
    except RuntimeError:
        if not nvrtc_path:
            print("  skipped: no NVRTC (pass --nvrtc /path/to/libnvrtc.so.13; its directory must also hold "
                  "libnvrtc-builtins, e.g. LD_LIBRARY_PATH=that directory)")
            return False
        lib = ctypes.CDLL(nvrtc_path)
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _kernels._nvrtc = lib
    # build_kernel's own compile function (it moved once while the API was written).
    compile_fn = getattr(_kernels, "compile_kernel", None) or getattr(_execution, "_compile")
    for name, spec in KERNELS.items():
        ptx, lowered = compile_fn(spec.source, name, arch_options)
        if lowered != name or f".entry {name}(" not in ptx.decode(errors="replace"):
            raise AssertionError(f"kernel {name}: NVRTC lowered it to {lowered!r}")
    print(f"  {len(KERNELS)} kernels compile with NVRTC ({' '.join(arch_options)})")
    return True


def stepper(failures, prefix=""):
    """step(what, fn, *args): call fn(*args); a failure is printed and appended to
    failures as "<prefix><what>: <error>", and the next step still runs."""

    def step(what, fn, *a):
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            failures.append(f"{prefix}{what}: {type(e).__name__}: {e}")

    return step


def main(args):
    import kernels
    from shapes import SHAPES

    failures = []
    step = stepper(failures)

    _section("kernel signatures")
    step("signatures", lambda: print(f"  {kernels.check_specs()} kernels: signatures match their C declarations"))
    _section("NVRTC")
    step("nvrtc", compile_all, args.nvrtc, ("--std=c++17", "--gpu-architecture=compute_90"))
    _section("shapes (numpy emulation, lane structure, pack_arguments)")
    for name in args.shapes:
        seed = args.seed + sorted(SHAPES).index(name)
        for mode in ("dry", "quick"):
            step(f"{name}/{mode}", check_shape, name, mode, seed)
    if os.environ.get("DAG_DRY_FULL", "1") != "0":
        _section("full sizes (inputs and argument checks only; DAG_DRY_FULL=0 skips)")
        for name in args.shapes:
            step(f"{name}/full", check_full_sizes, name, args.seed)
    _section("comm")
    step("comm", check_comm)
    _section("multi-GPU mode (multigpu.py: sizes, lanes -> GPUs, cross-GPU events, numpy emulation)")
    import multigpu

    failures.extend(multigpu.dry_checks(args.shapes, args.seed))
    print()
    if failures:
        print("DRY RUN FAILED:")
        for f in failures:
            print("  " + f)
        return 1
    print("dry run: all checks passed")
    return 0
