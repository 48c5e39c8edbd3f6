"""Endpoint: one connection, with UCXX's asyncio API."""

import array
import asyncio
import collections
import ctypes
import functools
import logging
import struct
import weakref

import numpy

from . import _constants as C
from . import _onesided, _tags
from ._bridge import call, ext
from ._buffers import MEMORY_CUDA, MEMORY_HOST, buffer_info, host_buffer
from ._frames import frames_from_block, frames_to_provide, free_block
from ._request import INLINE_DONE, INLINE_LENGTH, Completed, Request, may_wait_inline, submit
from .exceptions import UCXCloseError, UCXError, UCXMessageTruncatedError, exception_for_status

logger = logging.getLogger("ucxx_go")

_FULL_MASK = _tags.MASK64

ProbeInfo = collections.namedtuple("ProbeInfo", "matched sender_tag length handle")
ProbeInfo.__doc__ = "What tag_probe found: ``matched``, and the message's ``sender_tag``, ``length`` and ``handle``."

# send_multi's frame descriptors (core.Frame): the Go core's memory type of a buffer
# of each UCS memory type, and the words in the order send_multi writes them.
_FRAME_MEM_TYPE = {C.UCS_MEMORY_TYPE_HOST: C.MEM_HOST, C.UCS_MEMORY_TYPE_CUDA: C.MEM_CUDA}
if (C.FRAME_ADDR_WORD, C.FRAME_SIZE_WORD, C.FRAME_MEM_TYPE_WORD, C.FRAME_STREAM_WORD) != (0, 1, 2, 3) \
        or C.FRAME_DESCRIPTOR_WORDS != 4:
    raise ImportError("ucxx_go._endpoint: core.Frame changed; update Endpoint.send_multi's descriptors")
# ProvideFrames' entries (core.ProvidedFrameSize): address, then core memory type.
if C.PROVIDED_FRAME_WORDS != 2:
    raise ImportError("ucxx_go._endpoint: core.ProvidedFrameSize changed; update Endpoint._recv_multi_allocated")

# recv_multi's default: host frames of at least this many bytes go to host_allocator.
HOST_ALLOCATOR_MIN = 64 << 10


def _abort_handle(ctx, handle):
    """Abort an endpoint nobody took (a connection whose create_endpoint was cancelled)."""
    if not ctx.closed:
        try:
            ext.pybridge_AbortEndpoint(handle)
        except RuntimeError:
            pass


# How long the Go core gives a dropped endpoint's sends to finish before it closes it.
_RELEASE_TIMEOUT_MS = 10_000


def _release_handle(ctx, handle):
    """The finalizer of an Endpoint dropped without close(): the Go core closes it
    gracefully in the background, so what was sent is still delivered."""
    if not ctx.closed:
        try:
            ext.pybridge_ReleaseEndpoint(handle, _RELEASE_TIMEOUT_MS)
        except RuntimeError:
            pass


# UCXX's default close/abort period, in nanoseconds: our graceful close's deadline.
_CLOSE_PERIOD_NS = 10**10

class Endpoint:
    """A connection to a peer, made by create_endpoint() or given to a listener's handler.

    Messages are matched by tag: each side picked a random tag at connection time and
    told it to the other; ``send`` uses the peer's, ``recv`` our own. A user ``tag``
    is mixed into those (see ``send``).
    """

    def __init__(self, ctx, handle, info):
        send_tag, recv_tag, local, remote, ucp_handle = info.split()
        self._ucp_handle = int(ucp_handle)
        self._ctx = ctx
        self._handle = handle
        self._send_tag = int(send_tag)
        self._recv_tag = int(recv_tag)
        self._local = None if local == "-" else local
        self._remote = None if remote == "-" else remote
        self._closed = False
        self._error = None  # the UCS status that broke the connection
        self._close_cb = None
        self._close_task = None
        self._recv_count = 0  # receives completed, for close_after_n_recv
        self._close_after = None
        ctx.endpoints[handle] = self
        # Messages whose receive was cancelled after they came, for the next receive of
        # their kind and tag: (kind, tag) -> deque, oldest first (message-preserving
        # cancellation; see _keep).
        self._kept = {}
        # Receives cancelled while still in Go, (kind, tag) -> deque of Requests: the
        # next receive of that kind and tag waits for them to settle first, so a message
        # one of them still gets comes before any later one.
        self._cancelling = {}
        self._finalizer = weakref.finalize(self, _release_handle, ctx, handle)

    @classmethod
    def _from_handle(cls, ctx, handle):
        return cls(ctx, handle, call(ext.pybridge_EndpointInfo, handle))

    # -- state -------------------------------------------------------------------------

    @property
    def uid(self):
        """An id unique among this process's endpoints."""
        return self._handle

    @property
    def closed(self):
        """True once close() or abort() was called, or the peer closed or went away."""
        return self._closed or self._error is not None

    @property
    def alive(self):
        """True while the endpoint is open and its peer has not gone away: as soon as
        the progress thread learnt of it, whether or not an event loop ran since."""
        if self._closed or self._error is not None or self._ctx.closed:
            return False
        try:
            return ext.pybridge_EndpointStatus(self._handle) == 0
        except RuntimeError:
            return False

    @property
    def ucp_endpoint(self):
        """UCX's ucp_ep_h of this endpoint, as an int (UCXX's accessor; for diagnostics)."""
        return self._ucp_handle

    @property
    def ucxx_endpoint(self):
        """As ``ucp_endpoint``: ucxx_go has no C++ UCXX endpoint object (UCXX's accessor)."""
        return self._ucp_handle

    @property
    def ucp_worker(self):
        """UCX's ucp_worker_h of the worker this endpoint belongs to, as an int."""
        return int(call(ext.pybridge_WorkerHandle))

    @property
    def ucxx_worker(self):
        """As ``ucp_worker``: ucxx_go has no C++ UCXX worker object (UCXX's accessor)."""
        return self.ucp_worker

    @property
    def local_address(self):
        """"ip:port" of our end of the connection, when UCX knows it."""
        return self._local

    @property
    def peer_address(self):
        """"ip:port" of the peer's end of the connection, when UCX knows it."""
        return self._remote

    def get_active_transports(self):
        """The transports UCX uses for this endpoint, as "name:device" strings (e.g.
        "tcp:lo", "posix:memory", "cuda_ipc:cuda")."""
        self._check("get_active_transports")
        return call(ext.pybridge_EndpointTransports, self._handle).split()

    def __repr__(self):
        state = "closed" if self._closed else ("broken" if self._error is not None else "open")
        return f"<ucxx_go.Endpoint {self._handle} {state} {self._local}->{self._remote}>"

    def _check(self, op):
        if self._closed:
            raise UCXCloseError(f"Endpoint.{op}: the endpoint is closed")
        if self._error is not None:
            raise exception_for_status(self._error, f"Endpoint.{op}: the connection failed")

    # -- transfers ---------------------------------------------------------------------

    async def send(self, buffer, tag=None, force_tag=False):
        """Send a host or CUDA buffer to the peer.

        Parameters
        ----------
        buffer : buffer-protocol object or CUDA array
            Contiguous; not copied, and kept referenced until the send ends. A CUDA
            array (``__cuda_array_interface__``) is sent once the work its ``stream``
            had queued when send was called is done: that stream only, never the device.
        tag : int, str, bytes or tuple, optional
            Mixed into the endpoint's tag; the peer's ``recv`` must pass the same tag.
        force_tag : bool
            Use ``tag`` (an int) as the UCX tag itself.

        Raises
        ------
        TypeError, ValueError
            ``buffer`` has no buffer protocol or is not contiguous (nothing is sent).
        UCXCloseError
            The endpoint is closed.
        UCXError
            A subclass for the UCS status the send failed with, e.g.
            UCXConnectionResetError when the peer went away, UCXCanceledError when the
            endpoint was closed meanwhile.
        """
        self._check("send")
        addr, n, keep, mem, stream = buffer_info(buffer, writable=False)
        t = self._send_tag if tag is None else _tags.mix(self._send_tag, tag, force_tag)
        rid = submit(ext.pybridge_TagSend, self._handle, addr, n, t, mem, stream, may_wait_inline(n, mem))
        if rid & INLINE_DONE:
            return
        await Request(self._ctx, rid, "Endpoint.send", buffer, keep)

    async def recv(self, buffer, tag=None, force_tag=False):
        """Receive the next message with this tag into a writable host or CUDA buffer
        (a CUDA array is written once the work its ``stream`` had queued is done).

        A message shorter than the buffer fills its start; the return value is the
        number of bytes received.

        Raises
        ------
        TypeError, ValueError
            ``buffer`` is read-only, has no buffer protocol or is not contiguous.
        UCXMessageTruncatedError
            The message was larger than the buffer.
        UCXCloseError, UCXError
            As for ``send``; a peer that dies fails a pending ``recv`` promptly.
        """
        addr, n, keep, mem, stream = buffer_info(buffer, writable=True)
        t = self._recv_tag if tag is None else _tags.mix(self._recv_tag, tag, force_tag)
        if self._closed:
            raise UCXCloseError("Endpoint.recv: the endpoint is closed")
        if (self._kept or self._cancelling) and (msg := await self._earlier("recv", t)) is not None:
            return self._deliver_kept(msg, buffer, addr, n, mem)
        # On an endpoint the peer broke, the progress thread still posts the receive
        # when a message it sent before is waiting (Engine.drainable), else fails it.
        rid = submit(ext.pybridge_TagRecv, self._handle, addr, n, t, _FULL_MASK, mem, stream, may_wait_inline(n, mem))
        if rid & INLINE_DONE:
            n = rid & INLINE_LENGTH
        else:
            # A host message that comes after the receive was cancelled is copied out of
            # the buffer and kept for the next recv (a CUDA one is lost).
            keeper = functools.partial(self._keep_bytes, t, addr) if mem == MEMORY_HOST else None
            n = await self._await_receive(Request(self._ctx, rid, "Endpoint.recv", buffer, keep, release=keeper), "recv", t)
        self._received()
        return n

    def _received(self):
        self._recv_count += 1
        if self._close_after is not None and self._recv_count >= self._close_after:
            self._start_close()

    def close_after_n_recv(self, n, count_from_ep_creation=False):
        """Close the endpoint once ``n`` receives have completed on it: counted from now,
        or from its creation with ``count_from_ep_creation``. As UCXX's, the endpoint
        is ``closed`` as soon as the n-th receive returns (ours then closes gracefully,
        in the background, where UCXX aborts).

        Raises
        ------
        UCXError
            It was set already, or ``count_from_ep_creation`` and more than ``n``
            receives already completed.
        """
        if self._close_after is not None:
            raise UCXError(f"close_after_n_recv has already been set to: {self._close_after} (abs)")
        target = n if count_from_ep_creation else self._recv_count + n
        if target < self._recv_count:
            raise UCXError(f"`n` cannot be less than current recv_count: {target} (abs) < {self._recv_count} (abs)")
        self._close_after = target
        if target == self._recv_count:
            self._start_close()

    def tag_probe(self, tag=None, force_tag=False, remove=False):
        """Look for an unreceived message with this tag, without waiting (also after the
        peer closed, to drain what it sent).

        Returns a ProbeInfo ``(matched, sender_tag, length, handle)``; with ``remove`` a
        matched message is taken off UCX's queue, to receive with ``recv_with_handle``.
        """
        if self._closed:
            raise UCXCloseError("Endpoint.tag_probe: the endpoint is closed")
        t = self._recv_tag if tag is None else _tags.mix(self._recv_tag, tag, force_tag)
        found, sender_tag, length, handle = (int(x) for x in call(ext.pybridge_TagProbe, t, _FULL_MASK, bool(remove)).split())
        return ProbeInfo(bool(found), sender_tag, length, handle or None)

    async def recv_with_handle(self, buffer, probe_result):
        """Receive into ``buffer`` the message ``tag_probe(remove=True)`` took: pass the
        ProbeInfo it returned (or its ``handle``)."""
        handle = probe_result
        if isinstance(handle, ProbeInfo):
            handle = handle.handle
        if not handle:
            raise UCXError("recv_with_handle needs the handle of a tag_probe(remove=True) that matched")
        addr, n, keep = host_buffer(buffer, writable=True)
        rid = submit(ext.pybridge_RecvProbed, handle, addr, n)
        n = await Request(self._ctx, rid, "Endpoint.recv_with_handle", buffer, keep)
        self._received()
        return n

    async def am_send(self, buffer):
        """Send a host or CUDA buffer as a UCX active message, for the peer's ``am_recv``."""
        self._check("am_send")
        addr, n, keep, mem, stream = buffer_info(buffer, writable=False)
        rid = submit(ext.pybridge_AMSend, self._handle, addr, n, mem, stream)
        await Request(self._ctx, rid, "Endpoint.am_send", buffer, keep)

    async def am_recv(self):
        """Receive the next active message from the peer: a writable numpy uint8 array
        allocated here (messages that arrived earlier are queued)."""
        self._check("am_recv")
        if (self._kept or self._cancelling) and (msg := await self._earlier("am", None)) is not None:
            self._received()
            return msg[0]
        rid = submit(ext.pybridge_AMRecv, self._handle)
        # The message's block is the request's until it is delivered, and kept for the
        # next am_recv if this one was cancelled meanwhile.
        keeper = functools.partial(self._keep_block, "am", None)
        address = await self._await_receive(Request(self._ctx, rid, "Endpoint.am_recv", release=keeper), "am", None)
        self._received()
        return frames_from_block(address)[0]

    async def send_multi(self, buffers, tag=None, force_tag=False):
        """Send several host or CUDA buffers as one message, for the peer's ``recv_multi``
        (which gets host frames as numpy arrays and CUDA frames as CUDA arrays).

        One call into the Go core and one completion for the whole message, however
        many frames (none included). A ``send`` on the same tag never interleaves with it.

        Raises
        ------
        TypeError, ValueError
            A buffer has no buffer protocol or is not contiguous (nothing is sent).
        UCXCloseError, UCXError
            As for ``send``.
        """
        await self._start_send_multi(buffers, tag, force_tag)

    def _start_send_multi(self, buffers, tag=None, force_tag=False):
        """Start ``send_multi`` at once and return its request: UCX holds the message
        (and the request keeps ``buffers`` alive) until the request completes. Awaiting
        the request gives send_multi's outcome. For callers that return before the
        peer receives, as the Dask backend's ``write`` does.
        """
        self._check("send_multi")
        keep = []
        desc = array.array("Q")
        for b in buffers:
            addr, n, mv, mem, stream = buffer_info(b, writable=False)
            desc.extend((addr, n, _FRAME_MEM_TYPE[mem], stream))  # a core.Frame
            keep.append((b, mv))
        t = self._send_tag if tag is None else _tags.mix(self._send_tag, tag, force_tag)
        count = len(keep)
        rid = submit(ext.pybridge_SendMulti, self._handle, desc.buffer_info()[0] if count else 0, count, t)
        if rid & INLINE_DONE:
            return Completed(self._ctx.loop())
        return Request(self._ctx, rid, "Endpoint.send_multi", keep=keep)

    async def recv_multi(self, tag=None, force_tag=False, cuda_allocator=None, host_allocator=None,
                         host_allocator_min=HOST_ALLOCATOR_MIN, own_host_min=0):
        """Receive a message sent with ``send_multi``: a list of frames, one per frame
        sent. Host frames are writable numpy uint8 arrays; CUDA frames are
        ``CudaFrame`` objects (``__cuda_array_interface__``), or, with
        ``cuda_allocator``, what ``cuda_allocator(nbytes)`` returned for them (e.g.
        ``lambda n: cupy.empty(n, "u1")`` from cupy's pool, ``rmm.DeviceBuffer(size=n)``).
        Memory allocated here is freed when dropped.

        Host frames share one allocation per message (a frame kept alive keeps the
        others' memory). With ``own_host_min``, host frames of at least that many
        bytes are received into allocations of their own, which the engine makes the
        moment the header is in, each given back when its frame is dropped (and kept a
        while for the next receive of its size: ``UCXGO_RECV_FRAME_CACHE``); a small
        frame kept alive then keeps only the block of small frames. With
        ``host_allocator``, host frames of at least
        ``host_allocator_min`` bytes (default 64 KiB) are received, without a copy,
        into what ``host_allocator(nbytes)`` returned for them (e.g.
        ``lambda n: numpy.empty(n, "u1")``: memory each frame owns), which is returned
        in their place. A message with such frames takes one more trip between the
        engine and the event loop, once its header arrived.

        Raises
        ------
        UCXExceedsLimitError
            The peer announced more frames or bytes than this process's limits allow
            (``init(multi_buffer_limits=...)``); the message is dropped, the
            connection stays usable, the next recv_multi gets the next message.
        UCXIOError
            The peer sent a malformed header. Where its message ends is then unknown:
            later recv_multi on this endpoint and tag fail too (plain send/recv work).
        UCXCloseError, UCXError
            As for ``recv``.
        """
        t = self._recv_tag if tag is None else _tags.mix(self._recv_tag, tag, force_tag)
        if self._closed:
            raise UCXCloseError("Endpoint.recv_multi: the endpoint is closed")
        if (self._kept or self._cancelling) and (msg := await self._earlier("multi", t)) is not None:
            self._received()
            return msg
        # On an endpoint the peer broke, the progress thread decides: it drains a
        # message the peer sent before, or fails the receive (Engine.drainable).
        own_min = int(own_host_min)
        if own_min < 0:
            raise ValueError(f"recv_multi: own_host_min must be 0 or more, not {own_host_min}")
        if cuda_allocator is not None or host_allocator is not None:
            host_min = int(host_allocator_min) if host_allocator is not None else 0
            if host_allocator is not None and host_min < 1:
                raise ValueError(f"recv_multi: host_allocator_min must be at least 1, not {host_allocator_min}")
            address, provided = await self._recv_multi_allocated(self._handle, t, cuda_allocator, host_allocator,
                                                                 host_min, own_min)
            self._received()
            return frames_from_block(address, provided)
        rid = submit(ext.pybridge_RecvMulti, self._handle, t, own_min)
        if rid & INLINE_DONE:  # the message was there: its block's address
            address = rid & INLINE_LENGTH
        else:
            # The message's block is the request's until it is delivered, and kept for
            # the next recv_multi if this one was cancelled meanwhile.
            keeper = functools.partial(self._keep_block, "multi", t)
            address = await self._await_receive(Request(self._ctx, rid, "Endpoint.recv_multi", release=keeper),
                                                "multi", t)
        self._received()
        return frames_from_block(address)

    # -- message-preserving cancellation -----------------------------------------------
    #
    # A receive cancelled in Go before its message came takes nothing (core); one whose
    # message was already on its way completes anyway, after the awaiting task gave up.
    # Its message is then kept here, and the next receive of the same kind and tag on
    # this endpoint returns it before asking Go, so cancelling loses no message.

    async def _await_receive(self, req, kind, tag):
        """Await a receive's request; if the awaiting task is cancelled while the request
        is still in Go, later receives of its kind and tag wait for it (_earlier)."""
        try:
            return await req
        except asyncio.CancelledError:
            if req.settled is not None and not req.settled.done():
                self._cancelling.setdefault((kind, tag), collections.deque()).append(req)
            raise

    async def _earlier(self, kind, tag):
        """A message of this kind and tag that a cancelled receive left, after waiting
        for the receives cancelled while in Go to settle, oldest first; or None."""
        key = (kind, tag)
        q = self._cancelling.get(key)
        while q:
            req = q[0]
            await asyncio.shield(req.settled)
            if q and q[0] is req:
                q.popleft()
        if q is not None and not q and self._cancelling.get(key) is q:
            del self._cancelling[key]
        return self._take(kind, tag)

    def _keep(self, kind, tag, msg):
        self._kept.setdefault((kind, tag), collections.deque()).append(msg)

    def _take(self, kind, tag):
        q = self._kept.get((kind, tag))
        if not q:
            return None
        msg = q.popleft()
        if not q:
            del self._kept[(kind, tag)]
        return msg

    def _keep_bytes(self, tag, addr, n):
        """Keep the n bytes a cancelled recv got at addr (its buffer's, which its
        request pins until this release)."""
        self._keep("recv", tag, ctypes.string_at(addr, n))

    def _keep_block(self, kind, tag, address):
        self._keep(kind, tag, frames_from_block(address))

    def _deliver_kept(self, msg, buffer, addr, n, mem):
        """A kept plain message, for a recv into `buffer` (n bytes at addr)."""
        if len(msg) > n:
            raise UCXMessageTruncatedError(f"Endpoint.recv: a {len(msg)}-byte message into a {n}-byte buffer")
        if mem == MEMORY_HOST:
            if msg:
                ctypes.memmove(addr, msg, len(msg))
        else:
            import cupy  # a CUDA buffer: copy to the device

            dst = cupy.asarray(buffer).view(cupy.uint8).ravel()
            dst[: len(msg)].set(numpy.frombuffer(msg, numpy.uint8))
        self._received()
        return len(msg)

    async def _recv_multi_allocated(self, handle, tag, cuda_allocator, host_allocator, host_min, own_min):
        """recv_multi whose CUDA frames `cuda_allocator` allocates (if given) and host
        frames of at least `host_min` bytes (0: none) `host_allocator`: the Go core
        reports the header (the `need` request) and waits for the frames' memory
        before it posts their receives (core/frames.go). The frames are allocated and
        handed over where that report is delivered (Request.on_result), not once this
        task wakes: the frames' receives follow the header within the same drain.
        Returns the block's address and the allocated objects, in frame order."""
        ctx = self._ctx
        where = "Endpoint.recv_multi"
        res = call(ext.pybridge_RecvMultiAllocated, handle, tag, cuda_allocator is not None, host_min, own_min)
        rid, need = (int(x) for x in res.split())
        # The message's block is the final request's result, and the final request's
        # until it is delivered; the `need` request reports the same block early, for
        # the sizes of the frames to allocate, and owns nothing.
        final = Request(ctx, rid, where, release=free_block)
        provided = []
        exports = []  # buffer_info's keep-alive of each (a bytearray's memoryview export pins it)

        def provide(block):
            # On error the task wakes to the exception, and drops the message.
            desc = array.array("Q")
            for n, frame_mem in frames_to_provide(block):
                cuda = frame_mem == C.MEM_CUDA
                name, allocator, want = ("cuda_allocator", cuda_allocator, MEMORY_CUDA) if cuda else \
                    ("host_allocator", host_allocator, MEMORY_HOST)
                obj = allocator(n)
                addr, nbytes, export, mem, _ = buffer_info(obj, writable=True)
                if mem != want or nbytes < n:
                    kind = "CUDA" if cuda else "host"
                    raise TypeError(f"recv_multi: {name}({n}) gave {type(obj).__name__} of "
                                    f"{nbytes} bytes, not writable {kind} memory of at least {n}")
                provided.append(obj)
                exports.append(export)
                desc.extend((addr, frame_mem))  # a core.ProvidedFrameSize entry
            # UCX may write into them until the message's completion: keep them alive
            # and unresizable.
            final.keep = provided, exports
            call(ext.pybridge_ProvideFrames, need, desc.buffer_info()[0] if desc else 0, len(provided))

        asked = Request(ctx, need, where, on_result=provide)
        try:
            await asyncio.wait((final.future, asked.future), return_when=asyncio.FIRST_COMPLETED)
            if not asked.future.done():
                asked.forget()  # no frame to allocate: nobody asks
                return final.future.result(), provided
            asked.future.result()  # the allocation's error, if it failed
        except BaseException:
            asked.forget()
            final.cancel()  # drops the message in Go, frees its block
            raise
        return await final, provided

    # -- one-sided transfers and semaphores (_onesided) ----------------------------------

    def unpack_remote(self, data):
        """The peer's memory named by ``data``, the bytes its ``Region.pack()`` gave:
        a RemoteRegion for this endpoint's ``put`` and ``get``.

        Raises
        ------
        ValueError
            ``data`` is not a well-formed packed key of a region.
        """
        self._check("unpack_remote")
        return _onesided.unpack(self, data, "region")

    async def put(self, local, remote, offset=0, stream=None):
        """Write ``local`` (a Region, or any contiguous host or CUDA buffer) into the
        peer's ``remote`` region at ``offset``; the peer posts nothing. Returns once
        ``local`` may be reused; ``flush()`` says when the data is at the peer. A
        CUDA buffer is written once the work queued on ``stream`` (default: its own
        ``__cuda_array_interface__`` stream) is done.

        Raises
        ------
        ValueError
            The bytes do not fit ``remote`` at ``offset`` (nothing moves).
        UCXError
            As for ``send``. A cancelled put still runs to its end (UCX cannot stop
            it); its buffers stay referenced until then.
        """
        self._check("put")
        await _onesided.transfer(self, local, remote, offset, stream, "put")

    async def get(self, local, remote, offset=0, stream=None):
        """Read the peer's ``remote`` region at ``offset`` into ``local`` (a Region or
        a writable contiguous buffer), as many bytes as ``local`` holds. As ``put``."""
        self._check("get")
        await _onesided.transfer(self, local, remote, offset, stream, "get")

    async def put_many(self, transfers):
        """Several puts, ``(local, remote, offset)`` or ``(local, remote)`` each,
        posted at once; returns once every one has ended. If one does not fit its
        region, nothing moves (ValueError)."""
        self._check("put_many")
        await _onesided.put_many(self, transfers)

    async def flush(self):
        """Return once every put and get issued on this endpoint before has completed
        at the peer."""
        self._check("flush")
        await Request(self._ctx, submit(ext.pybridge_Flush, self._handle), "Endpoint.flush")

    def semaphore(self):
        """A new Semaphore at 0, for this endpoint's peer to signal."""
        self._check("semaphore")
        return _onesided.Semaphore(self, call(ext.pybridge_NewSemaphore, self._handle))

    def unpack_semaphore(self, data):
        """The peer's semaphore named by ``data`` (its ``Semaphore.pack()``), to
        signal.

        Raises
        ------
        ValueError
            ``data`` is not a well-formed packed key of a semaphore.
        """
        self._check("unpack_semaphore")
        return _onesided.unpack(self, data, "semaphore")

    async def send_obj(self, obj, tag=None):
        """Send a bytes-like object with its size first, for ``recv_obj``."""
        mv = memoryview(obj)
        await asyncio.gather(self.send(struct.pack("<Q", mv.nbytes), tag=tag), self.send(mv, tag=tag))

    async def recv_obj(self, tag=None, allocator=bytearray):
        """Receive an object sent with ``send_obj``, into ``allocator(size)``."""
        size = bytearray(8)
        await self.recv(size, tag=tag)
        (n,) = struct.unpack("<Q", size)
        obj = allocator(n)
        await self.recv(obj, tag=tag)
        return obj

    # -- closing -----------------------------------------------------------------------

    def set_close_callback(self, callback_func, cb_args=None, cb_kwargs=None):
        """Call ``callback_func(*cb_args, **cb_kwargs)`` once, when the endpoint closes
        or breaks.

        Raises
        ------
        RuntimeError
            The endpoint is closing or closed already, as UCXX's.
        """
        if self.closed:
            raise RuntimeError("Endpoint.set_close_callback: the endpoint is closing or closed")
        self._close_cb = (callback_func, tuple(cb_args or ()), dict(cb_kwargs or {}))

    def _run_close_callback(self):
        cb, self._close_cb = self._close_cb, None
        if cb is not None:
            try:
                cb[0](*cb[1], **cb[2])
            except Exception:
                logger.exception("ucxx_go: endpoint close callback raised")

    def _on_error(self, status):
        if self._error is None:
            self._error = status
        self._run_close_callback()

    def abort(self, period=_CLOSE_PERIOD_NS, max_attempts=1):
        """Close at once: everything in flight fails with UCXCanceledError. Idempotent.
        ``period`` and ``max_attempts`` are UCXX's and unused: this never waits."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        if not self._ctx.closed:
            try:
                ext.pybridge_AbortEndpoint(self._handle)
            except RuntimeError:
                pass
        self._run_close_callback()

    async def close(self, period=_CLOSE_PERIOD_NS, max_attempts=1, timeout=None):
        """Close gracefully: pending receives are cancelled, sends flushed to the peer.

        Finishes within ``timeout`` seconds whatever the peer does, by default UCXX's
        ``period * max_attempts`` nanoseconds (10 s); a second call waits for the
        first; cancelling the caller does not stop the close.
        """
        if self._close_task is None:
            if self._closed:
                return
            self._start_close(period * max_attempts / 1e9 if timeout is None else timeout)
        await asyncio.shield(self._close_task)

    def _start_close(self, timeout=_CLOSE_PERIOD_NS / 1e9):
        """Mark the endpoint closed now and close it gracefully in the background."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self._close_task = asyncio.ensure_future(self._close(timeout))

    async def _close(self, timeout):
        ctx = self._ctx
        try:
            if not ctx.closed:
                rid = submit(ext.pybridge_CloseEndpoint, self._handle, int(timeout * 1000))
                await Request(ctx, rid, "Endpoint.close")
        except UCXError:
            pass  # the connection is gone either way
        finally:
            self._run_close_callback()
