"""Communicator: ranks started by python -m ucxx_go.launch form a world and pass
barriers; a rank that dies makes the others' barrier fail with a UCXError (today
within the communicator's timeout: the endpoints between ranks of one host are on
shared memory, whose peer failure this does not yet see at once). A cancelled init or
split, with rank 1 on a thread of the test's process, closes the communicator that Go
forms for nobody."""

import asyncio
import concurrent.futures
import socket
import subprocess

import pytest

import ucxx_go
from _support import LAUNCH, PROMPT, TIMEOUT, rank_script


def test_ranks_pass_barriers(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    s = rank_script(tmp_path, f"""
        import asyncio, os, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            for _ in range(5):
                await comm.barrier()
            open(os.path.join({str(out)!r}, str(comm.rank)), "w").write(f"{{comm.rank}} {{comm.size}}")
            comm.close()
            comm.close()
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "3", "--timeout", "90", s], timeout=120)
    assert r.returncode == 0
    assert sorted((out / f).read_text() for f in ("0", "1", "2")) == ["0 3", "1 3", "2 3"]


def test_a_dead_rank_fails_the_barrier(tmp_path):
    s = rank_script(tmp_path, """
        import asyncio, os, sys, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=20)
            await comm.barrier()
            if comm.rank == 2:
                os._exit(0)  # dies without a word
            try:
                await comm.barrier()
            except ucxx_go.UCXError as e:
                print(f"rank {comm.rank}: {type(e).__name__}: {e}", flush=True)
                sys.exit(7)
            sys.exit(1)  # the barrier passed without rank 2
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "3", "--timeout", "90", s], timeout=120, capture_output=True, text=True)
    assert r.returncode == 7, (r.returncode, r.stdout, r.stderr)
    assert "barrier" in r.stdout


def test_builtin_choice_names_the_registrys_plan(tmp_path):
    """builtin_choice answers from the registry: direct, then all-pairs, then the
    ring for host allreduces (pipelined only where the message has the pieces),
    direct then all-pairs on device memory; an unknown collective is an error."""
    s = rank_script(tmp_path, """
        import asyncio, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            pick = lambda *a, **k: comm.builtin_choice(*a, **k)["algorithm"]
            assert pick("allreduce", 8, in_place=True) == "direct"
            assert pick("allreduce", 256 << 10) == "allpairs"
            ring = comm.builtin_choice("allreduce", 16 << 20, in_place=True)
            assert ring["algorithm"] == "ring" and ring["chunks"] == 4, ring
            tail = comm.builtin_choice("allreduce", (16 << 20) + 4)
            assert tail["chunks"] == 1 and tail["uneven"] == "tail", tail
            padded = comm.builtin_choice("allreduce", 100004)  # 25,001 float32: all-pairs needs an even count
            assert padded == {"algorithm": "allpairs", "lanes": 1, "chunks": 1, "uneven": "padded"}, padded
            assert ring["uneven"] == ""
            assert pick("allreduce", 4 << 20, device=True) == "direct"
            assert pick("allreduce", 16 << 20, device=True) == "allpairs"
            assert pick("alltoall", 64) == "pairwise"
            try:
                comm.builtin_choice("allscatter", 8)
                raise SystemExit("an unknown collective was named")
            except ucxx_go.UCXError:
                pass
            await comm.barrier()
            comm.close()
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "2", "--timeout", "60", s], timeout=90)
    assert r.returncode == 0


class _FormingCall:
    """The test's view of the Go call that forms one communicator (pybridge_CommNew or
    pybridge_CommSplit, the call `mine(args)` picks), from whichever thread makes it:
    `entered` once it is called, `formed` its handle once it returns, `failed` its
    exception once it raises, `closed` once pybridge_CommClose closes that handle
    (concurrent futures)."""

    def __init__(self, monkeypatch, name, mine, handle_of):
        from ucxx_go._bridge import ext

        self.entered, self.formed, self.failed, self.closed = (concurrent.futures.Future() for _ in range(4))
        form, close = getattr(ext, name), ext.pybridge_CommClose

        def watched_form(*args):
            if not mine(args):
                return form(*args)
            self.entered.set_result(None)
            try:
                res = form(*args)
            except BaseException as e:
                self.failed.set_result(e)
                raise
            self.formed.set_result(handle_of(res))
            return res

        def watched_close(h):
            if self.formed.done() and self.formed.result() == h:
                self.closed.set_result(None)
            return close(h)

        monkeypatch.setattr(ext, name, watched_form)
        monkeypatch.setattr(ext, "pybridge_CommClose", watched_close)


def _free_root():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def _unless_rank_0_left(forming):
    """The communicator `forming` gives rank 1, or None where rank 0's side, which
    nobody took, was closed before rank 1 reached it."""
    try:
        return await forming
    except ucxx_go.UCXError:
        return None


async def test_a_cancelled_init_abandons_its_bootstrap(monkeypatch):
    """Rank 0's init is cancelled while it waits in the bootstrap for rank 1: the Go call
    ends at once, forming nothing, and lets go of the root's port, where a world then
    forms (rank 1 on a thread of this process). Before, the bootstrap went on, and a
    retry at the same root failed (address in use)."""
    call = _FormingCall(monkeypatch, "pybridge_CommNew", lambda args: args[0] == 0, int)
    root = _free_root()
    task = asyncio.ensure_future(ucxx_go.Communicator.init(rank=0, size=2, root=root, timeout=TIMEOUT))
    await asyncio.wait_for(asyncio.wrap_future(call.entered), TIMEOUT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    err = await asyncio.wait_for(asyncio.wrap_future(call.failed), PROMPT)
    assert "cancelled" in str(err), err
    assert not call.formed.done()
    monkeypatch.undo()
    comm0, comm1 = await asyncio.wait_for(asyncio.gather(
        ucxx_go.Communicator.init(rank=0, size=2, root=root, timeout=TIMEOUT),
        asyncio.to_thread(asyncio.run, ucxx_go.Communicator.init(rank=1, size=2, root=root, timeout=TIMEOUT))),
        TIMEOUT)
    try:
        assert (comm0.rank, comm1.rank) == (0, 1)
    finally:
        comm1.close()
        comm0.close()


async def test_a_cancelled_split_closes_the_communicator_it_forms(monkeypatch):
    """As for init: rank 0's split is cancelled while it waits for rank 1's, and the
    sub-communicator formed once rank 1 splits too is closed."""
    root = _free_root()
    comm0, comm1 = await asyncio.gather(
        ucxx_go.Communicator.init(rank=0, size=2, root=root, timeout=TIMEOUT),
        asyncio.to_thread(asyncio.run, ucxx_go.Communicator.init(rank=1, size=2, root=root, timeout=TIMEOUT)))
    subs = []
    try:
        call = _FormingCall(monkeypatch, "pybridge_CommSplit", lambda args: args[0] == comm0._h,
                            lambda res: int(res.split()[0]))
        task = asyncio.ensure_future(comm0.split(0))
        await asyncio.wait_for(asyncio.wrap_future(call.entered), TIMEOUT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        sub1 = await asyncio.to_thread(asyncio.run, _unless_rank_0_left(comm1.split(0)))
        if sub1 is not None:
            subs.append(sub1)
        await asyncio.wait_for(asyncio.wrap_future(call.formed), TIMEOUT)
        await asyncio.wait_for(asyncio.wrap_future(call.closed), PROMPT)
    finally:
        for c in subs + [comm1, comm0]:
            c.close()


@pytest.mark.parametrize("kwargs", [dict(rank=2, size=2), dict(rank=-1, size=2), dict(rank=0, size=2, timeout=0),
                                    dict(rank=0, size=2, timeout=-1), dict(rank=0, size=2, timeout=1e9)],
                         ids=["rank past size", "negative rank", "no timeout", "negative timeout", "huge timeout"])
async def test_init_refuses_bad_arguments(kwargs):
    """Arguments that cannot form a world are refused before anything starts (a timeout
    of 0 once meant the default 60 s; 1e9 s overflowed Go's durations)."""
    with pytest.raises(ValueError):
        await ucxx_go.Communicator.init(root=_free_root(), **kwargs)


def test_aclose_leaves_the_event_loop_running(tmp_path):
    """A rank closing while its collective waits for a peer that never joins: close()
    would block the loop until the call's timeout; aclose() waits on a thread while
    the loop's other tasks run, and the pending call fails."""
    s = rank_script(tmp_path, """
        import asyncio, os, time, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=3)
            await comm.barrier()
            if comm.rank == 1:
                await asyncio.sleep(6)  # never joins the allreduce; outlives rank 0's close
                return
            x = np.ones(1024, np.float32)
            pending = asyncio.ensure_future(comm.allreduce(x))
            await asyncio.sleep(0.2)
            ticks = 0
            async def tick():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.05)
                    ticks += 1
            ticker = asyncio.ensure_future(tick())
            t0 = time.monotonic()
            await comm.aclose()
            took = time.monotonic() - t0
            ticker.cancel()
            try:
                await pending
                raise SystemExit("the allreduce passed without rank 1")
            except ucxx_go.UCXError:
                pass
            assert ticks >= took / 0.05 / 4, (ticks, took)
            os.write(1, f"aclose took {took:.2f} s, {ticks} ticks\\n".encode())
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "2", "--timeout", "60", s], timeout=90, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    assert "aclose took" in r.stdout
