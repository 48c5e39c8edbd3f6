"""Processes for the fork tests (test_fork.py).

Run as a script (``python _fork_peers.py SCENARIO``), a scenario starts in a fresh
interpreter, where nothing has loaded ucxx_go's extension yet, and prints one JSON line
for the test to check. The ``after_use_child`` target runs in a child that
multiprocessing's "fork" start method forked from the test process, after the test
used ucxx_go. Everything a peer waits for is bounded by DEADLINE.
"""

import os

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import queue  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import weakref  # noqa: E402

DEADLINE = 20.0

fork = multiprocessing.get_context("fork")


def threads():
    """The OS threads of this process (the Go runtime starts several when loaded)."""
    with open("/proc/self/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def extension_loaded():
    """Whether ucxx_go's extension is imported, and whether its library is mapped."""
    with open("/proc/self/maps") as f:
        mapped = "_pybridge" in f.read()
    return "ucxx_go._pybridge" in sys.modules, mapped


def import_only():
    """Import ucxx_go (its dependencies first, so that their threads are counted
    before), report the threads and whether the extension is loaded; then use it
    once and report again, to show what loading looks like."""
    import numpy  # noqa: F401 (OpenBLAS starts its threads at import)

    before = threads()
    import ucxx_go

    after_import = threads()
    loaded_after_import = extension_loaded()
    ucxx_go.get_ucx_version()
    return {
        "threads_before": before, "threads_after_import": after_import,
        "loaded_after_import": loaded_after_import,
        "threads_after_use": threads(), "loaded_after_use": extension_loaded(),
    }


async def _echo(ep, count):
    """Echo `count` messages, each announced by its 8-byte little-endian size."""
    import numpy as np

    for _ in range(count):
        size = np.empty(1, dtype="<u8")
        await asyncio.wait_for(ep.recv(size), DEADLINE)
        buf = np.empty(int(size[0]), dtype="u1")
        await asyncio.wait_for(ep.recv(buf), DEADLINE)
        await asyncio.wait_for(ep.send(buf), DEADLINE)
    await asyncio.wait_for(ep.close(), DEADLINE)


def _echo_server_child(ports, messages):
    """Target of the child forked after import: listen, put the port on `ports`, echo
    `messages` messages on one connection, exit 0."""
    loaded_at_start = extension_loaded()[0]
    import ucxx_go

    async def main():
        done = asyncio.get_running_loop().create_future()

        async def handler(ep):
            try:
                await _echo(ep, messages)
                done.set_result(None)
            except BaseException as e:
                ep.abort()
                done.set_exception(e)

        listener = ucxx_go.create_listener(handler)
        ports.put((loaded_at_start, listener.port))
        try:
            await asyncio.wait_for(done, DEADLINE)
        finally:
            listener.close()

    asyncio.run(main())
    ucxx_go.reset()


async def _echo_client(port, sizes):
    import numpy as np

    import ucxx_go

    ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), DEADLINE)
    rng = np.random.default_rng(11)
    try:
        for size in sizes:
            msg = rng.integers(0, 256, size, dtype="u1")
            out = np.zeros_like(msg)
            await asyncio.wait_for(ep.send(np.array([size], dtype="<u8")), DEADLINE)
            await asyncio.wait_for(ep.send(msg), DEADLINE)
            n = await asyncio.wait_for(ep.recv(out), DEADLINE)
            if n != size or not np.array_equal(out, msg):
                raise AssertionError(f"echo of {size} bytes came back wrong ({n} bytes)")
    finally:
        await asyncio.wait_for(ep.close(), DEADLINE)


def fork_after_import():
    """Import ucxx_go, fork a child before any use; the child listens and echoes, this
    process (whose first use comes after the fork) connects and checks the echo."""
    import ucxx_go

    sizes = (1 << 10, 4 << 20)
    ports = fork.Queue()
    child = fork.Process(target=_echo_server_child, args=(ports, len(sizes)), daemon=True)
    child.start()
    report = {"echo": None}
    try:
        try:
            report["child_found_extension_loaded"], port = ports.get(timeout=DEADLINE)
        except queue.Empty:
            report["echo"] = f"the child sent no port within {DEADLINE} s"
        else:
            asyncio.run(_echo_client(port, sizes))
            ucxx_go.reset()
            report["echo"] = "ok"
        child.join(DEADLINE)
    finally:
        if child.is_alive():
            child.kill()
            child.join(DEADLINE)
    report["child_exitcode"] = child.exitcode
    return report


def _try_uses(ep, port):
    """Use ucxx_go in each way, the inherited endpoint `ep` among them; return what each
    raised (its type and message: the exception itself would keep `ep` alive through its
    traceback) and how long it took."""
    import numpy as np

    import ucxx_go

    buf = np.zeros(16, dtype="u1")
    uses = {
        "get_ucx_version": ucxx_go.get_ucx_version,
        "init": ucxx_go.init,
        "create_listener": lambda: ucxx_go.create_listener(lambda ep: None),
        "get_worker_address": ucxx_go.get_worker_address,
        "create_endpoint": lambda: asyncio.run(ucxx_go.create_endpoint("127.0.0.1", port)),
        "inherited Endpoint.send": lambda: asyncio.run(ep.send(buf)),
        "inherited Endpoint.recv": lambda: asyncio.run(ep.recv(buf)),
        "inherited Endpoint.get_active_transports": ep.get_active_transports,
    }
    outcomes = {}
    for name, use in uses.items():
        start = time.monotonic()
        outcome = {"type": None, "is_ucx_error": False, "message": ""}
        try:
            use()
        except Exception as e:
            outcome = {"type": type(e).__name__, "is_ucx_error": isinstance(e, ucxx_go.UCXError), "message": str(e)}
        outcomes[name] = {"seconds": time.monotonic() - start, **outcome}
    return outcomes


def after_use_child(inherited, port, results, release):
    """Target of a child forked after the parent used ucxx_go. `inherited` is a dict
    holding the parent's "endpoint", "listener" and a received "frame", the only
    references to them this child keeps once it takes them out; `port` is the
    listener's. Try each kind of use and put on `results` what each raised and how
    long it took; then close and drop
    the inherited objects, and report exceptions raised in their finalizers. Waits for
    `release` (when given) before exiting."""
    import ucxx_go

    unraisable = []
    sys.unraisablehook = lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}")
    ep, listener = inherited.pop("endpoint"), inherited.pop("listener")
    frame = inherited.pop("frame")
    outcomes = _try_uses(ep, port)
    # Closing what was inherited, and dropping it, touch nothing of the parent's.
    ep.abort()
    listener.close()
    ucxx_go.reset()
    gone = weakref.ref(ep)
    del ep, listener, frame  # the frame's finalizer gives it back to a Go core this child cannot use
    gc.collect()
    results.put({"uses": outcomes, "endpoint_collected": gone() is None, "unraisable": unraisable})
    if release is not None:
        release.wait(DEADLINE)


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()), flush=True)
