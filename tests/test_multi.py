"""Multi-buffer messages: send_multi and recv_multi.

A message is headers and then frames, each its own tag message on the endpoint's tag
with bit 63 set (core/multi.go, core/multiheader.go). These tests check round trips of
many shapes and buffer types, ordering under concurrency and beside plain sends, that
received frames are independent and freed when dropped, the limits on what a peer may
announce, peers that send malformed or hostile headers (played by a client sending
plain messages on the multi-buffer tag), cancellation, peers that die, and misuse.

Both endpoints of a pair live in this process and so share the one context: limits set
with init() apply to both sides, and only the receiving side checks them.
"""

import asyncio
import gc
import os
import signal
import struct
import time

import numpy as np
import pytest

import ucxx_go
from _support import (
    MiB,
    PROMPT,
    STARTUP,
    TIMEOUT,
    barrier,
    block_until,
    broken_by_peer,
    close_or_abort,
    in_flight,
    join,
    mp,
    queue_get,
    refuse_submissions,
    start,
    started,
    wait_in_flight,
)

import _multi_peers  # tests/ is on sys.path (conftest.py's directory)
from _multi_peers import FRAMES_PER_HEADER, GATHER_MAX_FRAME, HEADER_INLINE, HEADER_MORE, pack_header, raw_tag


# -- helpers -------------------------------------------------------------------------------


def rss_bytes():
    """This process's resident set size."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def transfer(sender, receiver, frames, tag=None):
    """send_multi `frames` from `sender`; return what `receiver`'s recv_multi got."""
    got, _ = await asyncio.wait_for(
        asyncio.gather(receiver.recv_multi(tag=tag), sender.send_multi(frames, tag=tag)), TIMEOUT
    )
    return got


def as_bytes(buf):
    """A buffer's raw memory, in memory order (what a send puts on the wire)."""
    mv = memoryview(buf)
    if mv.c_contiguous:
        return mv.tobytes()
    return np.asarray(buf).tobytes(order="A")  # Fortran-ordered: as it lies in memory


def check_frames(got, expected):
    """`got` is what recv_multi returned for a send_multi of `expected`."""
    assert isinstance(got, list)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert isinstance(g, np.ndarray), f"frame {i} is a {type(g).__name__}"
        assert g.dtype == np.uint8 and g.ndim == 1, f"frame {i}: {g.dtype}, {g.ndim}-D"
        assert g.flags.writeable and g.flags.c_contiguous, f"frame {i} flags: {g.flags}"
        want = as_bytes(e)
        assert g.nbytes == len(want), f"frame {i}: {g.nbytes} bytes, sent {len(want)}"
        assert g.tobytes() == want, f"frame {i}: contents differ"


def check_independent(got, expected, sample=12):
    """No two frames share memory, and writing one leaves the others as they were."""
    nonempty = [i for i, g in enumerate(got) if g.nbytes]
    picked = nonempty[:sample // 2] + nonempty[-(sample // 2):]
    picked = sorted(set(picked))
    for a in picked:
        for b in picked:
            if a < b:
                assert not np.shares_memory(got[a], got[b]), f"frames {a} and {b} share memory"
    if not picked:
        return
    k = picked[len(picked) // 2]
    got[k] ^= 0xFF
    assert got[k].tobytes() == bytes(x ^ 0xFF for x in as_bytes(expected[k]))
    for i, (g, e) in enumerate(zip(got, expected)):
        if i != k:
            assert g.tobytes() == as_bytes(e), f"writing frame {k} changed frame {i}"


SIZES = (0, 1, 7, 64, 1000, 0, 4096, 70000)  # zero-length, eager and rendezvous frames


def make_frames(count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, SIZES[i % len(SIZES)], dtype=np.uint8) for i in range(count)]


async def echo_once(ep):
    """The echo handler's body: one message back as it came."""
    frames = await ep.recv_multi()
    await ep.send_multi(frames)


# -- 1: round trips ------------------------------------------------------------------------


# 112 frames fill one header exactly; 113 need a second; 250 need three.
@pytest.mark.parametrize("count", [0, 1, 3, 100, 101, 112, 113, 250])
async def test_round_trip(pair, count):
    client, srv = pair
    frames = make_frames(count, seed=count)
    back, _, _ = await asyncio.wait_for(
        asyncio.gather(client.recv_multi(), echo_once(srv), client.send_multi(frames)), TIMEOUT
    )
    check_frames(back, frames)
    check_independent(back, frames)
    await wait_in_flight(0)


async def test_many_round_trips_on_one_connection(pair):
    """Every shape in turn on one endpoint pair: each message starts where the last ended."""
    client, srv = pair
    for count in (0, 113, 1, 250, 0, 0, 112, 3):
        frames = make_frames(count, seed=1000 + count)
        back, _, _ = await asyncio.wait_for(
            asyncio.gather(client.recv_multi(), echo_once(srv), client.send_multi(frames)), TIMEOUT
        )
        check_frames(back, frames)
    await wait_in_flight(0)


async def test_zero_length_frames_only(pair):
    client, srv = pair
    frames = [b""] * 5
    got = await transfer(client, srv, frames)
    check_frames(got, frames)
    for a in range(5):
        for b in range(a + 1, 5):
            assert not np.shares_memory(got[a], got[b])


# -- 2: a large frame and every kind of input buffer -------------------------------------


async def test_large_frame_and_buffer_types(pair):
    client, srv = pair
    rng = np.random.default_rng(2)
    big = np.frombuffer(rng.bytes(64 * MiB), dtype=np.uint8)
    ba = bytearray(rng.bytes(3000))
    frames = [
        b"plain bytes",
        bytearray(b"a bytearray"),
        memoryview(b"a memoryview of bytes"),
        memoryview(ba)[100:2100],  # a contiguous slice of a bytearray
        big,
        b"",
        np.arange(24, dtype=np.float64).reshape(4, 6),  # 2-D, C-contiguous
        np.arange(-50, 50, dtype=np.int16),
        np.asfortranarray(np.arange(35, dtype=np.int32).reshape(5, 7)),  # sent as it lies in memory
        np.zeros((0, 4), dtype=np.float32),
        np.array([1.5], dtype=np.float64)[0:1],
    ]
    expected = [as_bytes(f) for f in frames]
    got = await transfer(client, srv, frames)
    check_frames(got, frames)
    assert got[4].nbytes == 64 * MiB
    assert np.array_equal(got[4], big)
    np.testing.assert_array_equal(got[6].view(np.float64).reshape(4, 6), frames[6])
    np.testing.assert_array_equal(got[7].view(np.int16), frames[7])
    assert [g.tobytes() for g in got] == expected
    # Nothing was written into the inputs.
    assert frames[1] == bytearray(b"a bytearray")
    assert np.array_equal(frames[6].ravel(), np.arange(24, dtype=np.float64))
    await wait_in_flight(0)


# -- 3: concurrent messages on one endpoint ----------------------------------------------


def tagged_message(i):
    """Message i: four frames, frame j filled with the byte i*4+j (its size tags it too)."""
    sizes = (1 + i, 100, 100_000 if i % 10 == 0 else 3, 0 if i % 2 else 5)
    return [np.full(n, i * 4 + j, dtype=np.uint8) for j, n in enumerate(sizes)]


async def test_concurrent_send_multi_arrive_whole_and_in_order(pair):
    client, srv = pair
    n = 50
    messages = [tagged_message(i) for i in range(n)]
    # Receives are posted in order, then the sends all at once.
    recvs = [asyncio.ensure_future(srv.recv_multi()) for _ in range(n)]
    sends = [client.send_multi(m) for m in messages]
    await asyncio.wait_for(asyncio.gather(*recvs, *sends), TIMEOUT)
    for i, r in enumerate(recvs):
        got = r.result()
        assert [g.nbytes for g in got] == [m.nbytes for m in messages[i]], f"message {i} has another's frames"
        for j, g in enumerate(got):
            assert (g == i * 4 + j).all(), f"message {i} frame {j} holds another's bytes"
    await wait_in_flight(0)


async def test_concurrent_recv_multi_posted_after_the_sends(pair):
    """The same with every message already waiting (UCX's unexpected queue) when the receives are posted."""
    client, srv = pair
    n = 50
    messages = [tagged_message(i) for i in range(n)]
    sends = await started(*(client.send_multi(m) for m in messages))
    await barrier(client, srv)  # every message is in: headers, eager frames, rendezvous announcements
    got = await asyncio.wait_for(asyncio.gather(*[srv.recv_multi() for _ in range(n)]), TIMEOUT)
    await asyncio.wait_for(asyncio.gather(*sends), TIMEOUT)
    for i, frames in enumerate(got):
        check_frames(frames, messages[i])
    await wait_in_flight(0)


# -- 4: beside plain sends on the same tag -------------------------------------------------


@pytest.mark.parametrize("tag", [None, "t"], ids=["default-tag", "user-tag"])
@pytest.mark.parametrize("order", ["recv-first", "send-first"])
async def test_interleaved_with_plain_send(pair, tag, order):
    client, srv = pair
    a = [b"A1", b"A22", np.arange(5000, dtype=np.uint16)]
    b = b"plain-B" * 10
    c = [b"C" * 1024]  # as long as a full header: a plain recv must not take one

    def receivers():
        return [srv.recv_multi(tag=tag), srv.recv(buf, tag=tag), srv.recv_multi(tag=tag)]

    def senders():
        return [client.send_multi(a, tag=tag), client.send(b, tag=tag), client.send_multi(c, tag=tag)]

    buf = bytearray(4096)
    first, second = (receivers, senders) if order == "recv-first" else (senders, receivers)
    early = await started(*first())  # posted before the others
    late = [asyncio.ensure_future(x) for x in second()]
    await asyncio.wait_for(asyncio.gather(*early, *late), TIMEOUT)
    results = [t.result() for t in (early if order == "recv-first" else late)]
    check_frames(results[0], a)
    assert results[1] == len(b) and bytes(buf[: len(b)]) == b
    check_frames(results[2], c)
    await wait_in_flight(0)


async def test_user_tags_are_separate_streams(pair):
    """Messages on two user tags, received in the opposite order from their sending."""
    client, srv = pair
    x, y = [b"on x", b"1"], [b"on y", b"22", b"333"]
    await asyncio.wait_for(asyncio.gather(client.send_multi(x, tag="x"), client.send_multi(y, tag="y")), TIMEOUT)
    check_frames(await asyncio.wait_for(srv.recv_multi(tag="y"), TIMEOUT), y)
    check_frames(await asyncio.wait_for(srv.recv_multi(tag="x"), TIMEOUT), x)
    await wait_in_flight(0)


# -- 5: frames are freed when dropped ------------------------------------------------------


async def test_dropped_frames_are_freed(pair):
    client, srv = pair
    msg = [np.full(4 * MiB, 7, dtype=np.uint8), b"tail"]

    async def once():
        frames = await transfer(client, srv, msg)
        assert frames[0][0] == 7 and frames[0][-1] == 7 and frames[1].tobytes() == b"tail"

    for _ in range(10):  # warm-up: allocator arenas, UCX's buffers
        await once()
    gc.collect()
    before = rss_bytes()
    for _ in range(200):
        await once()
    gc.collect()
    grown = rss_bytes() - before
    # Each message holds 4 MiB: 200 leaked would be 800 MiB.
    assert grown < 64 * MiB, f"RSS grew by {grown / MiB:.1f} MiB over 200 messages of 4 MiB"
    await wait_in_flight(0)


async def test_kept_frame_outlives_its_siblings(pair):
    client, srv = pair
    msg = [np.full(MiB, v, dtype=np.uint8) for v in (1, 2, 3)]
    frames = await transfer(client, srv, msg)
    kept = frames[1]
    del frames
    gc.collect()
    # Reuse the memory that was freed, if any was: more messages of other contents.
    for v in (4, 5, 6):
        other = await transfer(client, srv, [np.full(MiB, v, dtype=np.uint8)] * 3)
        del other
        gc.collect()
    junk = [np.full(MiB, 9, dtype=np.uint8) for _ in range(8)]
    assert kept.nbytes == MiB and (kept == 2).all()
    kept[:] = 42  # still writable memory of its own
    assert (kept == 42).all()
    del junk
    await wait_in_flight(0)


async def test_block_is_freed_with_its_last_frame(pair, monkeypatch):
    """One frame keeps its message's whole block; the last one dropped frees it.

    Frees are observed directly rather than through RSS: whether an allocator hands
    freed memory back to the kernel is its own business (glibc does for a block this
    big; on the GPU machine's Python, RSS did not move although the block was freed).
    """
    from ucxx_go import _frames

    freed = []
    real_free = _frames._free
    monkeypatch.setattr(_frames, "_free", lambda address: (freed.append(address), real_free(address)))
    client, srv = pair
    frames = await transfer(client, srv, [np.ones(48 * MiB, dtype=np.uint8), b"small"])
    await asyncio.sleep(0)  # the gather's callbacks still queued hold its result (Python 3.12)
    block = frames[0].__array_interface__["data"][0]
    small = frames[1]
    del frames
    gc.collect()
    assert small.tobytes() == b"small"
    assert freed == [], "the block was freed while a frame of it lives"
    del small
    gc.collect()
    assert len(freed) == 1 and 0 < block - freed[0] < 4096, "dropping the last frame did not free its block"
    await wait_in_flight(0)


async def test_own_host_min_frames_are_freed_alone(pair, monkeypatch):
    """With own_host_min, a frame of at least that many bytes is an allocation of its
    own, given back when it alone is dropped, whatever else of its message lives; the
    smaller frames share the block, freed with the last of them."""
    from ucxx_go import _frames

    freed = []  # blocks freed and own frames given back, in order
    real_free, real_release = _frames._free, _frames._release_host_frame
    monkeypatch.setattr(_frames, "_free", lambda address: (freed.append(address), real_free(address)))
    monkeypatch.setattr(_frames, "_release_host_frame",
                        lambda address: (freed.append(address), real_release(address)))
    client, srv = pair
    own = 64 << 10
    sent = [np.ones(48 * MiB, dtype=np.uint8), b"small", b"tiny", np.full(own, 9, dtype=np.uint8),
            np.full(own - 1, 8, dtype=np.uint8)]
    frames, _ = await asyncio.wait_for(
        asyncio.gather(srv.recv_multi(own_host_min=own), client.send_multi(sent)), TIMEOUT)
    await asyncio.sleep(0)  # the gather's callbacks still queued hold its result (Python 3.12)
    assert [bytes(f) for f in frames[1:3]] == [b"small", b"tiny"] and (frames[3] == 9).all() and (frames[4] == 8).all()
    large, small, tiny, edge, below = frames
    at = [f.__array_interface__["data"][0] for f in frames]
    assert 0 < at[2] - at[1] < 4096 and 0 < at[4] - at[2] < 8192, "the small frames are not in one block"
    del frames
    del large
    gc.collect()
    assert freed == [at[0]], "dropping the large frame did not free it alone"
    del edge
    gc.collect()
    assert freed == [at[0], at[3]], "dropping the frame of own_host_min bytes did not free it alone"
    del small, below
    gc.collect()
    assert tiny.tobytes() == b"tiny" and len(freed) == 2, "the block was freed while a frame of it lives"
    del tiny
    gc.collect()
    assert len(freed) == 3 and 0 < at[1] - freed[2] < 4096, "dropping the last frame did not free its block"
    with pytest.raises(ValueError):
        await srv.recv_multi(own_host_min=-1)
    await wait_in_flight(0)


async def test_own_host_frames_are_reused(pair):
    """A frame of its own given back serves the next message's frame of its size,
    its pages already mapped (core/hostframecache.go); one still held is never
    handed out again, and the reused frame holds the new message whole."""
    client, srv = pair
    own = 64 << 10

    async def receive(value, n=MiB):
        frames, _ = await asyncio.wait_for(
            asyncio.gather(srv.recv_multi(own_host_min=own), client.send_multi([np.full(n, value, np.uint8)])),
            TIMEOUT)
        await asyncio.sleep(0)  # the gather's callbacks still queued hold its result (Python 3.12)
        return frames[0]

    first = await receive(1)
    at = first.__array_interface__["data"][0]
    held = await receive(2)  # `first` is held: another frame
    assert held.__array_interface__["data"][0] != at and (first == 1).all() and (held == 2).all()
    del first
    gc.collect()
    again = await receive(3, MiB - 1000)  # the same size class
    assert again.__array_interface__["data"][0] == at, "the frame given back was not reused"
    assert again.nbytes == MiB - 1000 and (again == 3).all() and (held == 2).all()
    await wait_in_flight(0)


# -- 6: limits on what a peer announces ---------------------------------------------------


def _frames_with_big_one(count, at, big=2048):
    return [bytes(big) if i == at else bytes([i % 256]) for i in range(count)]


@pytest.mark.parametrize(
    "limits, frames",
    [
        pytest.param({"max_frames": 10}, [b"x"] * 11, id="max_frames"),
        # Three headers: the first is rejected, the other two and 300 frames are dropped,
        # more than the engine drops at once.
        pytest.param({"max_frames": 10}, [bytes([i % 256]) for i in range(300)], id="max_frames-300"),
        pytest.param({"max_frame_bytes": 1024}, [b"a", bytes(2048), b"c"], id="max_frame_bytes"),
        pytest.param({"max_frame_bytes": MiB}, [b"a", bytes(4 * MiB)], id="max_frame_bytes-rendezvous"),
        pytest.param({"max_frame_bytes": 1024}, _frames_with_big_one(150, 5),
                     id="max_frame_bytes-first-of-2-headers"),
        pytest.param({"max_frame_bytes": 1024}, _frames_with_big_one(250, 130),
                     id="max_frame_bytes-second-of-3-headers"),
        pytest.param({"max_message_bytes": 4096}, [bytes(2000)] * 3, id="max_message_bytes"),
        # 112 frames of 1000 bytes fit; the sum passes the limit in the second header.
        pytest.param({"max_message_bytes": 150_000}, [bytes(1000)] * 200, id="max_message_bytes-second-header"),
    ],
)
@pytest.mark.parametrize("queued", [False, True], ids=["next-posted-later", "next-queued-before"])
async def test_limit_rejects_message_and_stream_stays_in_step(server, limits, frames, queued):
    ucxx_go.init(multi_buffer_limits=limits)
    client, srv = await server.connect()
    [rejected] = await started(srv.recv_multi())
    # queued: the next receive waits behind the rejected one, and must not be posted
    # before the receives that drop the rejected message's frames.
    [following] = await started(srv.recv_multi()) if queued else [None]
    send = asyncio.ensure_future(client.send_multi(frames))
    with pytest.raises(ucxx_go.UCXExceedsLimitError, match="Endpoint.recv_multi"):
        await asyncio.wait_for(rejected, TIMEOUT)
    # The sender is not left waiting: the rejected frames were consumed.
    await asyncio.wait_for(send, TIMEOUT)
    assert client.alive and srv.alive
    # The rejected frames were discarded: the next message is read from its start.
    good = [b"one", b"two", b"three"]
    if queued:
        await asyncio.wait_for(client.send_multi(good), TIMEOUT)
        check_frames(await asyncio.wait_for(following, TIMEOUT), good)
    else:
        check_frames(await transfer(client, srv, good), good)
    check_frames(await transfer(client, srv, [b"again"]), [b"again"])
    await wait_in_flight(0)


async def test_rejected_frames_are_never_delivered_as_a_message(server):
    ucxx_go.init(multi_buffer_limits={"max_frames": 10})
    client, srv = await server.connect()
    # A message of 11 frames whose first frame looks like a header of a 1-frame message
    # and whose second frame like that frame.
    forged = [pack_header([6]), b"FORGED"] + [b"x"] * 9
    send = asyncio.ensure_future(client.send_multi(forged))
    with pytest.raises(ucxx_go.UCXExceedsLimitError):
        await asyncio.wait_for(srv.recv_multi(), TIMEOUT)
    await asyncio.wait_for(send, TIMEOUT)
    # The rejected message's frames were dropped, never read as headers: the next
    # message is the real one.
    got = await transfer(client, srv, [b"real"])
    assert [g.tobytes() for g in got] == [b"real"], f"got {[g.tobytes() for g in got]}"
    await wait_in_flight(0)


async def test_limits_are_validated():
    with pytest.raises(ValueError, match="unknown multi-buffer limit"):
        ucxx_go.init(multi_buffer_limits={"max_frame": 10})
    with pytest.raises(ValueError, match="positive"):
        ucxx_go.init(multi_buffer_limits={"max_frames": -1})


# -- 7: max_outstanding_bytes -------------------------------------------------------------


async def test_outstanding_bytes_make_messages_wait(server):
    ucxx_go.init(multi_buffer_limits={"max_outstanding_bytes": 8 * MiB, "max_endpoint_outstanding_bytes": 8 * MiB})
    pairs = [await server.connect(), await server.connect()]
    # Four 4 MiB messages, two per connection: at most one fits at a time (a block is a
    # little larger than its frames); the others wait for room rather than fail.
    messages = [[np.full(4 * MiB, k, dtype=np.uint8)] for k in range(4)]
    jobs = []
    for k, m in enumerate(messages):
        client, srv = pairs[k % 2]
        jobs += [srv.recv_multi(), client.send_multi(m)]
    results = await asyncio.wait_for(asyncio.gather(*jobs), TIMEOUT)
    for k in range(4):
        got = results[2 * k]
        assert len(got) == 1 and got[0].nbytes == 4 * MiB and (got[0] == k).all(), f"message {k}"
    await wait_in_flight(0)


async def _rejected_then_next(server, big):
    """With max_outstanding_bytes 8 MiB, the message big is rejected with
    UCXExceedsLimitError, its send still completes, and the next message arrives."""
    ucxx_go.init(multi_buffer_limits={"max_outstanding_bytes": 8 * MiB})
    client, srv = await server.connect()
    send = asyncio.ensure_future(client.send_multi(big))
    with pytest.raises(ucxx_go.UCXExceedsLimitError):
        await asyncio.wait_for(srv.recv_multi(), TIMEOUT)
    await asyncio.wait_for(send, TIMEOUT)
    nxt = [np.full(MiB, 3, dtype=np.uint8), b"next"]
    check_frames(await transfer(client, srv, nxt), nxt)
    await wait_in_flight(0)


async def test_message_over_endpoint_outstanding_bytes_is_rejected(server):
    """A message over the per-endpoint bound (default: half of max_outstanding_bytes)
    is rejected, though the worker's bound would hold it."""
    await _rejected_then_next(server, [np.ones(5 * MiB, dtype=np.uint8)])


@pytest.mark.parametrize("frames", [1, 4])
async def test_message_over_outstanding_bytes_is_rejected(server, frames):
    await _rejected_then_next(server, [np.ones(16 * MiB // frames, dtype=np.uint8)] * frames)


HOLD = 3 * MiB // 2


@pytest.mark.parametrize("how", ["peer-abort", "local-abort"])
async def test_message_waiting_for_room_fails_when_its_endpoint_breaks(server, how):
    ucxx_go.init(multi_buffer_limits={"max_outstanding_bytes": 8 * MiB, "max_endpoint_outstanding_bytes": 8 * MiB})
    (c1, s1), (c2, s2) = await server.connect(), await server.connect()
    # Connection 1 takes 1.5 MiB of the room and holds it: its frame never comes (room
    # is given on a header's word up to a quarter of each bound, 2 MiB here).
    [hold] = await started(s1.recv_multi())
    await asyncio.wait_for(c1.send(pack_header([HOLD]), tag=raw_tag(c1), force_tag=True), TIMEOUT)
    # Connection 2's 7 MiB message, its frame sent, waits for room.
    [waiting] = await started(s2.recv_multi())
    send = asyncio.ensure_future(c2.send_multi([np.ones(7 * MiB, dtype=np.uint8)]))
    await asyncio.gather(barrier(c1, s1), barrier(c2, s2))  # both headers are in
    assert not waiting.done()
    try:
        if how == "peer-abort":
            c2.abort()
            expected = ucxx_go.UCXError
        else:
            s2.abort()
            expected = ucxx_go.UCXCanceledError
        with pytest.raises(expected):
            await asyncio.wait_for(waiting, PROMPT)
    finally:
        c2.abort()
        s2.abort()
        # Give connection 1 its frame: the room frees and everything ends.
        await asyncio.wait_for(c1.send(bytes(HOLD), tag=raw_tag(c1), force_tag=True), TIMEOUT)
        assert (await asyncio.wait_for(hold, TIMEOUT))[0].nbytes == HOLD
        await asyncio.wait_for(asyncio.gather(send, waiting, return_exceptions=True), TIMEOUT)


# -- 8: malformed and hostile headers from a raw peer ---------------------------------------
#
# The client plays a peer that does not follow the format: plain sends with
# force_tag=True on client._send_tag | 1 << 63 land on the server's multi-buffer stream
# of the default tag.
#
# What a poisoned stream means: once a header cannot be parsed, where the peer's message
# ends is unknown, so every recv_multi on that endpoint and tag fails from then on (until
# the endpoint closes), whether it was queued already or comes later; the endpoint itself
# is fine, and plain send/recv on it (and multi-buffer messages on other tags, and other
# connections) still work. A well-formed header over a limit is not poisoning: its
# message is dropped by count and the stream stays in step, unless it announces more
# frames than can reasonably be drained (10**9 here), which poisons the stream too.


async def raw_send(client, payload):
    await asyncio.wait_for(client.send(payload, tag=raw_tag(client), force_tag=True), TIMEOUT)


async def healthy(server, client, srv, other_tags=True):
    """Plain messages still work both ways on the pair, a multi-buffer message on
    another tag too, and a new connection carries both kinds."""
    for a, b in ((client, srv), (srv, client)):
        out = bytearray(64)
        n, _ = await asyncio.wait_for(asyncio.gather(b.recv(out), a.send(b"still fine")), TIMEOUT)
        assert bytes(out[:n]) == b"still fine"
    if other_tags:
        check_frames(await transfer(client, srv, [b"other", b"tag"], tag="elsewhere"), [b"other", b"tag"])
    c2, s2 = await server.connect()
    check_frames(await transfer(c2, s2, [b"new", b"connection"]), [b"new", b"connection"])
    out = bytearray(8)
    await asyncio.wait_for(asyncio.gather(s2.recv(out), c2.send(b"plain ok")), TIMEOUT)
    assert out == b"plain ok"


RNG_BYTES = np.random.default_rng(8).bytes(16)
assert RNG_BYTES[:4] != struct.pack("<I", _multi_peers.HEADER_MAGIC)

POISONING = [
    pytest.param([b"hello world!"], ucxx_go.UCXIOError, id="a-short-garbage"),
    pytest.param([RNG_BYTES], ucxx_go.UCXIOError, id="a-random-16-bytes"),
    pytest.param([pack_header([1, 2], version=1)], ucxx_go.UCXIOError, id="a-old-version"),
    pytest.param([pack_header([1, 2], flags=HEADER_INLINE) + b"\0\0"], ucxx_go.UCXIOError, id="a-inline-bytes-short"),
    pytest.param([pack_header([1], flags=0x80)], ucxx_go.UCXIOError, id="a-unknown-flag"),
    pytest.param([pack_header([1], types=[7])], ucxx_go.UCXIOError, id="a-unknown-memory-type"),
    pytest.param([pack_header([1, 2])[:-1]], ucxx_go.UCXIOError, id="a-truncated"),
    pytest.param([pack_header([1, 2]) + b"\0"], ucxx_go.UCXIOError, id="a-trailing-byte"),
    pytest.param([bytes(range(256)) * 16], ucxx_go.UCXIOError, id="b-4096-bytes"),
    pytest.param([bytes(range(256)) * 33], ucxx_go.UCXIOError, id="b-8448-bytes"),
    pytest.param([pack_header([1] * FRAMES_PER_HEADER) + b"\0"], ucxx_go.UCXIOError, id="b-1025-bytes"),
    # 10**9 frames announced by a header that describes none: malformed (it would end
    # the message short of its total).
    pytest.param([pack_header([], total=10**9)], ucxx_go.UCXIOError, id="c-total-1e9-count-0"),
    # The same total in a well-formed first header: over max_frames, and too many to
    # drain, so the stream is poisoned with the limit's error.
    pytest.param([pack_header([1] * FRAMES_PER_HEADER, total=10**9, flags=HEADER_MORE)],
                 ucxx_go.UCXExceedsLimitError, id="c-total-1e9-full-header"),
    # A valid first header, then a second that contradicts it.
    pytest.param([pack_header([1] * FRAMES_PER_HEADER, total=200, flags=HEADER_MORE),
                  pack_header([1] * 88, total=201)], ucxx_go.UCXIOError, id="a-second-header-bad-total"),
]


@pytest.mark.parametrize("payloads, error", POISONING)
async def test_bad_header_poisons_the_stream(server, payloads, error):
    client, srv = await server.connect()
    # Two receives queued: the first takes the bad header, the second finds the stream poisoned.
    first, second = await started(srv.recv_multi(), srv.recv_multi())
    t0 = time.monotonic()
    for p in payloads:
        await raw_send(client, p)
    with pytest.raises(error, match="Endpoint.recv_multi"):
        await asyncio.wait_for(first, PROMPT)
    with pytest.raises(error):
        await asyncio.wait_for(second, PROMPT)
    assert time.monotonic() - t0 < PROMPT
    assert client.alive and srv.alive
    await healthy(server, client, srv)
    await wait_in_flight(0)


@pytest.mark.parametrize("payloads, error", POISONING)
async def test_poisoned_stream_stays_poisoned(server, payloads, error):
    client, srv = await server.connect()
    [first] = await started(srv.recv_multi())
    for p in payloads:
        await raw_send(client, p)
    with pytest.raises(error):
        await asyncio.wait_for(first, PROMPT)
    # Nothing queued on the stream now; a later receive still finds it poisoned, even
    # with a well-formed message on its way, and fails at once.
    await asyncio.wait_for(client.send_multi([b"after the poison"]), TIMEOUT)
    for _ in range(2):
        t0 = time.monotonic()
        with pytest.raises(error):
            await asyncio.wait_for(srv.recv_multi(), PROMPT)
        assert time.monotonic() - t0 < 1.0
    assert srv.alive
    await wait_in_flight(0)


async def test_hand_built_header_is_understood(pair):
    """The wire the raw-peer tests rely on is the one the receiver reads: a header with
    its small host frames inline, a header then its small host frames gathered into one
    message, then large frames one message each, and several headers then one message
    per frame."""
    client, srv = pair
    frames = [b"first", b"", b"third frame"]
    recv = asyncio.ensure_future(srv.recv_multi())
    await raw_send(client, pack_header([len(f) for f in frames], flags=HEADER_INLINE) + b"".join(frames))
    check_frames(await asyncio.wait_for(recv, TIMEOUT), frames)
    recv = asyncio.ensure_future(srv.recv_multi())
    await raw_send(client, pack_header([len(f) for f in frames]))
    await raw_send(client, b"".join(frames))
    check_frames(await asyncio.wait_for(recv, TIMEOUT), frames)
    mixed = [b"L" * GATHER_MAX_FRAME, b"small", b"M" * MiB, b"", b"tail"]
    recv = asyncio.ensure_future(srv.recv_multi())
    await raw_send(client, pack_header([len(f) for f in mixed], flags=HEADER_INLINE) + b"small" + b"tail")
    await raw_send(client, mixed[0])
    await raw_send(client, mixed[2])
    check_frames(await asyncio.wait_for(recv, TIMEOUT), mixed)
    # Two headers: 112 frames, then 1.
    many = [bytes([i]) for i in range(FRAMES_PER_HEADER + 1)]
    recv = asyncio.ensure_future(srv.recv_multi())
    await raw_send(client, pack_header([1] * FRAMES_PER_HEADER, total=len(many), flags=HEADER_MORE))
    await raw_send(client, pack_header([1], total=len(many)))
    for f in many:
        await raw_send(client, f)
    check_frames(await asyncio.wait_for(recv, TIMEOUT), many)
    await wait_in_flight(0)


@pytest.mark.parametrize("sent", [0, 1, 3999, 4001, 8000])
async def test_frame_not_as_announced_fails_the_message(pair, sent):
    """A peer announces a 4000-byte frame and sends another length: the message fails
    with UCXMessageTruncatedError, so no byte the peer did not write (the block's heap
    garbage, another client's message) reaches the application. The stream stays in
    step: the next message arrives whole."""
    client, srv = pair
    # A message that leaves its bytes in the heap a lying frame's block could reuse.
    secret = [b"s" * 4000]
    check_frames(await transfer(client, srv, secret), secret)
    recv = asyncio.ensure_future(srv.recv_multi())
    await raw_send(client, pack_header([4000]))
    await raw_send(client, b"x" * sent)
    with pytest.raises(ucxx_go.UCXMessageTruncatedError):
        await asyncio.wait_for(recv, TIMEOUT)
    real = [b"after", b"the lie"]
    check_frames(await transfer(client, srv, real), real)
    await wait_in_flight(0)


@pytest.mark.parametrize("size", [2**62, 2**64 - 1, (64 << 30) + 1], ids=["2^62", "2^64-1", "64GiB+1"])
async def test_huge_frame_is_rejected_and_stream_stays_in_step(server, size):
    """A frame over max_frame_bytes: the count is within limits, so the announced frame
    is received and dropped, and the stream stays usable."""
    client, srv = await server.connect()
    [recv] = await started(srv.recv_multi())
    t0 = time.monotonic()
    await raw_send(client, pack_header([size]))
    with pytest.raises(ucxx_go.UCXExceedsLimitError):
        await asyncio.wait_for(recv, PROMPT)
    assert time.monotonic() - t0 < PROMPT
    # The one announced "frame" (far smaller than announced): consumed and dropped.
    await raw_send(client, b"the announced frame")
    real = [b"a real", b"message"]
    check_frames(await transfer(client, srv, real), real)
    await healthy(server, client, srv)
    await wait_in_flight(0)


async def test_message_over_limit_in_sum_from_raw_peer(server):
    """Frames each within max_frame_bytes (64 GiB) whose sum passes max_message_bytes
    (128 GiB): rejected, the three announced frames (large: a tag message each) dropped,
    the stream in step."""
    client, srv = await server.connect()
    [recv] = await started(srv.recv_multi())
    await raw_send(client, pack_header([(64 << 30)] * 3))
    with pytest.raises(ucxx_go.UCXExceedsLimitError):
        await asyncio.wait_for(recv, PROMPT)
    for _ in range(3):
        await raw_send(client, b"f")
    check_frames(await transfer(client, srv, [b"ok"]), [b"ok"])
    await wait_in_flight(0)


# Rejected messages whose rest is to be dropped, with the number of tag messages that
# rest is: 200 host frames (two headers, then one message per frame: 1 + 200 to drop),
# and 30 CUDA frames (one message each; refused at the header, so no GPU is needed).
DROPS = {
    "held-back": (pack_header([1] * FRAMES_PER_HEADER, total=200, flags=HEADER_MORE), 201),
    "posted-behind": (pack_header([1] * 30, types=[1] * 30), 30),
}


async def receive_behind_a_drop(server, case):
    """With max_frames 10, a peer sends the header of DROPS[case] and 5 messages of its
    rest: the first recv_multi is rejected, and the second, returned with the pair as
    (client, srv, task), waits behind the drop (checked not done)."""
    ucxx_go.init(multi_buffer_limits={"max_frames": 10})
    client, srv = await server.connect()
    rejected, waiting = await started(srv.recv_multi(), srv.recv_multi())
    await raw_send(client, DROPS[case][0])
    with pytest.raises(ucxx_go.UCXExceedsLimitError):
        await asyncio.wait_for(rejected, PROMPT)
    for _ in range(5):
        await raw_send(client, b"f")
    await barrier(client, srv)  # the five are in
    assert not waiting.done()
    return client, srv, waiting


# The engine posts at most 64 drops at once: with 201 to drop, the next receive is held
# back (first in its stream, nothing of it posted); with 30, it is posted behind them.
@pytest.mark.parametrize("case", list(DROPS))
@pytest.mark.parametrize("how", ["local-abort", "local-close", "peer-abort"])
async def test_receive_behind_an_unfinished_drop_fails_when_the_endpoint_goes(server, how, case):
    """A peer announces more frames than max_frames (so they are to be dropped) and sends
    only 5 of them: the next recv_multi waits behind the drop, and fails promptly once the
    endpoint is closed or its peer goes away."""
    client, srv, following = await receive_behind_a_drop(server, case)
    if how == "local-abort":
        srv.abort()
        expected = ucxx_go.UCXCanceledError
    elif how == "local-close":
        await asyncio.wait_for(srv.close(), TIMEOUT)
        expected = ucxx_go.UCXCanceledError
    else:
        client.abort()
        expected = ucxx_go.UCXError
    t0 = time.monotonic()
    with pytest.raises(expected) as info:
        await asyncio.wait_for(following, PROMPT)
    assert time.monotonic() - t0 < PROMPT
    assert not isinstance(info.value, ucxx_go.UCXExceedsLimitError), "failed for the endpoint, not the limit"
    await wait_in_flight(0)


@pytest.mark.parametrize("case", list(DROPS))
async def test_cancelled_receive_behind_a_drop_takes_nothing(server, case):
    """A recv_multi cancelled while it waits behind the drop of a rejected message: the
    next recv_multi gets the next message, once the drop is done."""
    client, srv, cancelled = await receive_behind_a_drop(server, case)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(cancelled, PROMPT)
    # The rest of the rejected message, then a real one.
    for _ in range(DROPS[case][1] - 5):
        await raw_send(client, b"f")
    await wait_in_flight(0)
    real = [b"the real", b"message"]
    check_frames(await transfer(client, srv, real), real)
    await wait_in_flight(0)


# -- 9: cancellation -----------------------------------------------------------------------


async def test_cancelled_recv_multi_then_recv_multi(pair):
    client, srv = pair
    await wait_in_flight(0)
    task = asyncio.ensure_future(srv.recv_multi())
    await wait_in_flight(2)  # the whole receive and its header receive
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, PROMPT)
    assert task.cancelled()
    await wait_in_flight(0)
    frames = [b"after", b"the cancel"]
    check_frames(await transfer(client, srv, frames), frames)
    await wait_in_flight(0)


async def test_timed_out_recv_multi_then_recv_multi(pair):
    client, srv = pair
    for _ in range(3):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(srv.recv_multi(), 0.05)
    await wait_in_flight(0)
    frames = [b"x" * 100, b"y"]
    check_frames(await transfer(client, srv, frames), frames)


async def test_cancelled_queued_recv_multi(pair):
    """Cancelling the second of three queued receives: the others get the two messages."""
    client, srv = pair
    tasks = await started(*(srv.recv_multi() for _ in range(3)))
    tasks[1].cancel()
    a, b = [b"first"], [b"second", b"2"]
    await asyncio.wait_for(asyncio.gather(client.send_multi(a), client.send_multi(b)), TIMEOUT)
    check_frames(await asyncio.wait_for(tasks[0], TIMEOUT), a)
    check_frames(await asyncio.wait_for(tasks[2], TIMEOUT), b)
    with pytest.raises(asyncio.CancelledError):
        await tasks[1]
    await wait_in_flight(0)


async def test_cancel_mid_message_hands_it_to_the_next_receive(pair):
    """Cancelled after its header came: the cancel ends the await at once, the message
    is received on its behalf, whole, and the next recv_multi gets it; then the next
    message (never the rest of this one as a message of its own)."""
    client, srv = pair
    [task] = await started(srv.recv_multi())
    await raw_send(client, pack_header([3, 3]))
    await barrier(client, srv)  # the header was matched
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, PROMPT)
    await raw_send(client, b"onetwo")  # the rest of the cancelled message: its frames, gathered
    check_frames(await asyncio.wait_for(srv.recv_multi(), TIMEOUT), [b"one", b"two"])
    await wait_in_flight(0)
    frames = [b"the next", b"message"]
    check_frames(await transfer(client, srv, frames), frames)
    await wait_in_flight(0)


async def test_cancel_after_arrival_keeps_the_message_for_the_next_receive(pair):
    """A recv_multi cancelled after its message came (the completion was in the ring,
    not yet drained): the next recv_multi returns that message, and dropping it frees
    the memory."""
    client, srv = pair
    big = [np.ones(48 * MiB, dtype=np.uint8)]
    await transfer(client, srv, big)  # warm-up
    gc.collect()
    before = rss_bytes()
    for _ in range(4):
        task = asyncio.ensure_future(srv.recv_multi())
        await wait_in_flight(2)  # the receive is posted: in flight only goes to 0 once it completed
        [send] = await started(client.send_multi(big))
        # Wait, without running the event loop (so without draining completions), until
        # Go has completed both: the receive's block is then Python's to free.
        block_until(lambda: in_flight() == 0, "the transfer finishing in Go")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(send, TIMEOUT)
        got = await asyncio.wait_for(srv.recv_multi(), TIMEOUT)
        assert [g.nbytes for g in got] == [48 * MiB] and got[0][-1] == 1
        del got
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 64 * MiB, f"RSS grew by {grown / MiB:.0f} MiB: cancelled messages were not freed"


async def test_close_fails_pending_recv_multi(pair):
    client, srv = pair
    task = asyncio.ensure_future(srv.recv_multi())
    queued = asyncio.ensure_future(srv.recv_multi())
    await wait_in_flight(3)
    await asyncio.wait_for(srv.close(), TIMEOUT)
    for t in (task, queued):
        with pytest.raises(ucxx_go.UCXCanceledError):
            await asyncio.wait_for(t, PROMPT)
    await wait_in_flight(0)


# -- 10: the peer dies ---------------------------------------------------------------------


@pytest.mark.parametrize("partial", [False, True], ids=["before-anything", "mid-message"])
async def test_peer_killed_during_recv_multi(server, processes, partial):
    port = server.listener.port
    ready = mp.Queue()
    peer = start(processes, _multi_peers.connect_then_hang, port, ready, partial, MiB)
    ep = await server.accept()
    [recv] = await started(ep.recv_multi())
    assert await queue_get(ready)
    # The barrier: after it, the header (if sent) is in.
    out = bytearray(1)
    await asyncio.wait_for(ep.recv(out), STARTUP)
    assert not recv.done()
    t0 = time.monotonic()
    peer.kill()
    await broken_by_peer(recv, since=t0)
    assert not ep.alive
    with pytest.raises(ucxx_go.UCXError):
        await asyncio.wait_for(ep.recv_multi(), PROMPT)
    await join(peer, TIMEOUT)
    assert peer.exitcode == -signal.SIGKILL
    await asyncio.wait_for(ep.close(), TIMEOUT)
    await wait_in_flight(0)


# -- 11: buffers send_multi refuses --------------------------------------------------------


@pytest.fixture
def no_multi_submission(monkeypatch):
    """Fail the test if a send_multi reaches the Go engine."""
    refuse_submissions(monkeypatch, "pybridge_SendMulti")
    return monkeypatch


@pytest.mark.parametrize(
    "bad, error",
    [
        (np.arange(32, dtype=np.uint8)[::2], ValueError),
        (np.zeros((4, 8), dtype=np.uint8)[:, :4], ValueError),
        (object(), TypeError),
        ("text", TypeError),
        (None, TypeError),
        (12, TypeError),
    ],
    ids=["strided", "2-D-slice", "object", "str", "None", "int"],
)
async def test_bad_buffer_sends_nothing(pair, no_multi_submission, bad, error):
    client, srv = pair
    frames = [b"good before", bad, b"good after"]
    with pytest.raises(error):
        await asyncio.wait_for(client.send_multi(frames), TIMEOUT)
    with pytest.raises(error):
        await asyncio.wait_for(client.send_multi([bad]), TIMEOUT)
    no_multi_submission.undo()
    await wait_in_flight(0)
    # Nothing of the refused messages went out: the next message is the one received.
    good = [b"the", b"real", b"message"]
    check_frames(await transfer(client, srv, good), good)
    await wait_in_flight(0)


async def test_frames_not_a_sequence(pair):
    client, _ = pair
    with pytest.raises(TypeError):
        await asyncio.wait_for(client.send_multi(None), TIMEOUT)
    with pytest.raises(TypeError):
        await asyncio.wait_for(client.send_multi(42), TIMEOUT)


# -- 12: closed endpoints ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_multi_on_closed_endpoint(pair, how, monkeypatch):
    client, srv = pair
    await close_or_abort(client, how)
    refuse_submissions(monkeypatch, "pybridge_SendMulti", "pybridge_RecvMulti")
    with pytest.raises(ucxx_go.UCXCloseError, match="Endpoint.send_multi"):
        await asyncio.wait_for(client.send_multi([b"x"]), TIMEOUT)
    with pytest.raises(ucxx_go.UCXCloseError, match="Endpoint.send_multi"):
        await asyncio.wait_for(client.send_multi([]), TIMEOUT)
    with pytest.raises(ucxx_go.UCXCloseError, match="Endpoint.recv_multi"):
        await asyncio.wait_for(client.recv_multi(), TIMEOUT)
    with pytest.raises(ucxx_go.UCXCloseError):
        await asyncio.wait_for(client.recv_multi(tag="t"), TIMEOUT)


# -- frames the application allocates ------------------------------------------------------


async def test_host_allocator_receives_large_frames_into_its_memory(pair):
    """With host_allocator, host frames of at least host_allocator_min bytes arrive in
    what it allocated, without a copy (the object itself is returned); smaller ones
    in the message's block. A message of small frames only never asks."""
    client, server = pair
    allocated = []

    def allocator(n):
        allocated.append(np.empty(n, dtype="u1"))
        return allocated[-1]

    sizes = [10, 70_000, 0, 1 << 16, 1 << 20, 100]
    frames = [np.random.default_rng(i).integers(0, 256, n, dtype="u1") for i, n in enumerate(sizes)]
    got, _ = await asyncio.wait_for(
        asyncio.gather(server.recv_multi(host_allocator=allocator), client.send_multi(frames)), TIMEOUT)
    assert [a.nbytes for a in allocated] == [70_000, 1 << 16, 1 << 20]
    large = [f for f in got if any(f is a for a in allocated)]
    assert len(large) == 3 and [f.nbytes for f in large] == [70_000, 1 << 16, 1 << 20]
    for g, f in zip(got, frames):
        np.testing.assert_array_equal(np.asarray(g), f)

    allocated.clear()
    small = [b"a", b"bc" * 1000]
    got, _ = await asyncio.wait_for(
        asyncio.gather(server.recv_multi(host_allocator=allocator, host_allocator_min=4096),
                       client.send_multi(small)), TIMEOUT)
    assert allocated == [] and [bytes(g) for g in got] == small


async def test_host_allocator_runs_where_the_header_is_delivered(pair):
    """The allocator is called where the header's completion is delivered (the drain
    of completions), not once the awaiting task wakes: the frames' receives are posted
    a task switch sooner."""
    client, server = pair
    tasks = []

    def allocator(n):
        tasks.append(asyncio.current_task())
        return np.empty(n, dtype="u1")

    recv = asyncio.ensure_future(server.recv_multi(host_allocator=allocator))
    frames = [b"h", np.ones(1 << 20, dtype="u1")]
    got, _ = await asyncio.wait_for(asyncio.gather(recv, client.send_multi(frames)), TIMEOUT)
    assert (got[1] == 1).all() and len(tasks) == 1
    assert tasks[0] is not recv, "the allocator ran in the awaiting task"


async def test_cancel_after_the_allocator_ran_drops_that_message_only(pair):
    """A recv_multi cancelled once its allocator ran (the frames' receives posted into
    that memory) raises CancelledError; the message goes with it (its frames are in
    the cancelled caller's memory, kept until the receive ended in Go), and the next
    recv_multi gets the next message whole. (The cancelled message used to be handed
    to the next receive, its frames still pointing into the first caller's memory.)"""
    client, server = pair
    loop = asyncio.get_running_loop()
    allocated = []

    def allocator(n):
        allocated.append(np.empty(n, dtype="u1"))
        loop.call_soon(recv.cancel)  # after the frames' memory was handed over
        return allocated[-1]

    recv = asyncio.ensure_future(server.recv_multi(host_allocator=allocator))
    first = [b"1", np.full(16 << 20, 1, dtype="u1")]
    second = [b"2", np.full(1 << 20, 2, dtype="u1")]
    send = asyncio.ensure_future(client.send_multi(first))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(recv, TIMEOUT)
    assert len(allocated) == 1
    await asyncio.wait_for(send, TIMEOUT)
    got, _ = await asyncio.wait_for(asyncio.gather(server.recv_multi(), client.send_multi(second)), TIMEOUT)
    assert bytes(got[0]) == b"2" and (np.asarray(got[1]) == 2).all() and np.asarray(got[1]).nbytes == 1 << 20


async def test_host_allocator_memory_is_pinned_until_its_frame_arrived(pair):
    """What host_allocator gave stays exported (the buffer protocol's pin) until the
    message is in: a bytearray refuses to resize meanwhile, as it would to be freed,
    and resizes once recv_multi returned."""
    client, server = pair
    tries = []

    def allocator(n):
        ba = bytearray(n)

        def shrink():  # runs before the receiving task wakes: the frame may still be on its way
            try:
                del ba[-1]  # a minor downsize: frees no memory even where allowed
                tries.append("resized")
            except BufferError:
                tries.append("refused")

        asyncio.get_running_loop().call_soon(shrink)
        return ba

    frames = [b"h", np.full(1 << 20, 7, dtype="u1")]
    got, _ = await asyncio.wait_for(
        asyncio.gather(server.recv_multi(host_allocator=allocator), client.send_multi(frames)), TIMEOUT)
    assert tries == ["refused"]
    assert type(got[1]) is bytearray and got[1] == frames[1].tobytes()
    del got[1][-1]


async def test_host_allocator_min_is_checked(pair):
    _, server = pair
    with pytest.raises(ValueError):
        await server.recv_multi(host_allocator=bytearray, host_allocator_min=0)


@pytest.mark.parametrize("bad", [bytes, lambda n: np.empty(n // 2, dtype="u1")])
async def test_host_allocator_giving_bad_memory_drops_the_message(pair, bad):
    """An allocator that gives read-only or too little memory fails that receive with
    TypeError; the message is dropped and the next one arrives whole."""
    client, server = pair
    sent = asyncio.ensure_future(client.send_multi([b"x" * 100_000]))
    with pytest.raises(TypeError):
        await asyncio.wait_for(server.recv_multi(host_allocator=bad), TIMEOUT)
    await asyncio.wait_for(sent, TIMEOUT)
    nxt = [b"next", b"y" * 100_000]
    got, _ = await asyncio.wait_for(asyncio.gather(server.recv_multi(), client.send_multi(nxt)), TIMEOUT)
    assert [bytes(g) for g in got] == nxt
