"""One-sided transfers and semaphores: registered memory, the peer's memory, put, get,
flush, and semaphores (the Go core's regions.go, remotekeys.go, rma.go, semaphores.go).

    ucxx_go.init(one_sided=True)               # both processes; off by default
    region = ucxx_go.register(buffer)          # host or CUDA memory
    data = region.pack()                        # bytes for the peer
    remote = ep.unpack_remote(data)             # on the peer's side of the connection
    await ep.put(local, remote, offset=0)       # the target posts nothing
    await ep.flush()                            # everything put before is at the peer

A packed key is opaque bytes; one from a peer is checked (ValueError when malformed)
and every transfer is bounded by the range it names.
"""

import array
import binascii
import threading
import weakref

from . import _constants as C
from . import _context
from ._bridge import call, ext
from ._buffers import MEMORY_CUDA, MEMORY_HOST, buffer_info
from ._request import INLINE_DONE, Request, may_wait_inline, submit
from .exceptions import UCXInvalidParamError

__all__ = ["Region", "RemoteRegion", "Semaphore", "RemoteSemaphore", "register"]

# The core's memory type of a buffer of each UCS memory type.
_CORE_MEM = {MEMORY_HOST: C.MEM_HOST, MEMORY_CUDA: C.MEM_CUDA}
if C.TRANSFER_DESCRIPTOR_WORDS != 6:
    raise ImportError("ucxx_go._onesided: core.Transfer changed; update Endpoint.put_many's descriptors")


def _release(ctx, fn, oid):
    """Release a core object whose Python owner is gone (unless the context is)."""
    if not ctx.closed:
        try:
            fn(oid)
        except RuntimeError:
            pass  # the engine is going away


class _Registration:
    """One registration of the Go core (a region id), shared by every Region of the
    same buffer: it keeps the buffer's memory referenced, and releases the region
    when the last Region using it is gone."""

    __slots__ = ("ctx", "id", "buffer", "keep", "address", "nbytes", "mem", "__weakref__")

    def __init__(self, ctx, rid, buffer, keep, address, nbytes, mem):
        self.ctx, self.id, self.buffer, self.keep = ctx, rid, buffer, keep
        self.address, self.nbytes, self.mem = address, nbytes, mem
        weakref.finalize(self, _release, ctx, ext.pybridge_ReleaseMemory, rid)


# (context, address, nbytes, memory type) -> _Registration: register() of memory
# registered already is a dictionary lookup (the registration cache's fast path; the
# Go core's covers memory inside a registered range). _by_object: id(object) -> a weak
# reference to the Region register() returned for that very object, returned again
# while it lives, without reading the object's buffer again: the Region references the
# object, so its id() is not reused meanwhile. An entry leaves when its Region dies.
_registrations = weakref.WeakValueDictionary()
_by_object = {}
_registrations_lock = threading.Lock()


def _remember(buffer, region):
    key = id(buffer)

    def forget(ref):
        if _by_object.get(key) is ref:
            del _by_object[key]

    _by_object[key] = weakref.ref(region, forget)


class Region:
    """Registered memory (``ucxx_go.register``): a peer holding ``pack()``'s bytes may
    read and write it with ``put`` and ``get``; used as ``put``'s or ``get``'s local
    memory it moves without a copy. The registration lasts while a Region of it
    exists; the buffer stays referenced meanwhile.

    The whole registered range is reachable by a peer through UCX: when the buffer
    lies inside memory registered before, that larger registration is shared. Register
    only memory you share.
    """

    __slots__ = ("address", "nbytes", "mem", "buffer", "_reg", "__weakref__")

    def __init__(self, reg, address, nbytes, mem, buffer):
        self._reg, self.address, self.nbytes, self.mem, self.buffer = reg, address, nbytes, mem, buffer

    def pack(self):
        """The packed key of this memory, as bytes, for the peer's ``unpack_remote``.

        Raises
        ------
        TypeError
            The buffer is read-only: a peer holding the key could write into it.
        """
        buffer_info(self.buffer, writable=True)  # raises TypeError for read-only memory
        return binascii.unhexlify(call(ext.pybridge_PackRegion, self._reg.id, self.address, self.nbytes))

    def __repr__(self):
        kind = "CUDA" if self.mem == MEMORY_CUDA else "host"
        return f"<ucxx_go.Region {self.nbytes} bytes of {kind} memory at {self.address:#x}>"


def register(buffer):
    """Register a contiguous host or CUDA buffer for one-sided access and return its
    Region. Registering the same buffer again, or memory inside a registered buffer,
    reuses the registration; registering the same object again while its Region lives
    returns that Region.

    Raises
    ------
    TypeError, ValueError
        ``buffer`` is not a contiguous buffer, or is empty.
    UCXError
        UCX could not register it.
    """
    ref = _by_object.get(id(buffer))
    if ref is not None:
        region = ref()
        if region is not None and region.buffer is buffer and not region._reg.ctx.closed:
            return region
    addr, n, keep, mem, _ = buffer_info(buffer, writable=False)
    if n == 0:
        raise ValueError("register: an empty buffer")
    ctx = _context.get()
    key = (id(ctx), addr, n, mem)
    with _registrations_lock:
        reg = _registrations.get(key)
        if reg is None or reg.ctx is not ctx:
            rid = call(ext.pybridge_RegisterMemory, addr, n, _CORE_MEM[mem])
            reg = _Registration(ctx, rid, buffer, keep, addr, n, mem)
            _registrations[key] = reg
        region = Region(reg, addr, n, mem, buffer)
        _remember(buffer, region)
    return region


class RemoteRegion:
    """A range of the peer's registered memory (``Endpoint.unpack_remote``): ``nbytes``
    bytes, for this endpoint's ``put`` and ``get``."""

    __slots__ = ("nbytes", "mem", "address", "_id", "_ep", "__weakref__")

    def __init__(self, ep, kid, mem, address, nbytes):
        self._ep, self._id, self.mem, self.address, self.nbytes = ep, kid, mem, address, nbytes
        weakref.finalize(self, _release, ep._ctx, ext.pybridge_ReleaseKey, kid)

    def __repr__(self):
        return f"<ucxx_go.RemoteRegion {self.nbytes} bytes at the peer's {self.address:#x}>"


def unpack(ep, data, want):
    """Unpack a peer's packed key on endpoint ep: a RemoteRegion or a RemoteSemaphore
    (`want`)."""
    mv = memoryview(data).cast("B")
    if mv.nbytes == 0:
        raise ValueError(f"Endpoint.unpack_{want}: empty packed key")
    buf = bytes(mv)
    addr = buffer_info(buf, writable=False)[0]
    try:
        res = call(ext.pybridge_UnpackKey, ep._handle, addr, len(buf))
    except UCXInvalidParamError as e:  # the one status a malformed key gives (core.ErrBadKey)
        raise ValueError(f"Endpoint.unpack_{want}: not a packed key of ours ({e})") from None
    kid, kind, mem, address, nbytes = res.split()
    kid = int(kid)
    if kind != want:
        call(ext.pybridge_ReleaseKey, kid)
        raise ValueError(f"Endpoint.unpack_{want}: the packed key is a {kind}'s")
    if want == "semaphore":
        return RemoteSemaphore(ep, kid)
    umem = MEMORY_CUDA if int(mem) == C.MEM_CUDA else MEMORY_HOST
    return RemoteRegion(ep, kid, umem, int(address), int(nbytes))


def _local(local, where):
    """(address, nbytes, keep, core memory type, stream, region id) of put's or get's
    local memory: a Region, or any contiguous buffer."""
    if isinstance(local, Region):
        if where == "get":
            buffer_info(local.buffer, writable=True)  # raises TypeError for read-only memory
        return local.address, local.nbytes, local, _CORE_MEM[local.mem], 0, local._reg.id
    addr, n, keep, mem, stream = buffer_info(local, writable=where == "get")
    return addr, n, keep, _CORE_MEM[mem], stream, 0


def _check_range(remote, offset, n, where):
    if not isinstance(remote, RemoteRegion):
        raise TypeError(f"Endpoint.{where}: remote must be a RemoteRegion, not {type(remote).__name__}")
    if offset < 0 or n == 0 or offset + n > remote.nbytes:
        raise ValueError(f"Endpoint.{where}: {n} bytes at offset {offset} do not fit the remote "
                         f"region of {remote.nbytes} bytes")


async def transfer(ep, local, remote, offset, stream, where):
    """put or get one buffer."""
    addr, n, keep, mem, own_stream, region = _local(local, where)
    _check_range(remote, offset, n, where)
    if remote._ep is not ep:
        raise ValueError(f"Endpoint.{where}: the remote region belongs to another endpoint")
    fn = ext.pybridge_Put if where == "put" else ext.pybridge_Get
    s = own_stream if stream is None else _stream_handle(stream)
    rid = submit(fn, ep._handle, remote._id, offset, addr, n, mem, region, s, may_wait_inline(n, mem))
    if rid & INLINE_DONE:
        return  # it ended within the call
    await Request(ep._ctx, rid, f"Endpoint.{where}", local, (keep, remote))


def _stream_handle(stream):
    ptr = getattr(stream, "ptr", stream)
    return int(ptr or 0)


async def put_many(ep, transfers):
    """Several puts posted at once, one completion."""
    desc = array.array("Q")
    keep = []
    for t in transfers:
        local, remote, offset = (*t, 0) if len(t) == 2 else t
        addr, n, k, mem, _, region = _local(local, "put_many")
        _check_range(remote, offset, n, "put_many")
        if remote._ep is not ep:
            raise ValueError("Endpoint.put_many: a remote region belongs to another endpoint")
        desc.extend((remote._id, offset, addr, n, mem, region))  # a core.Transfer
        keep.append((local, k, remote))
    if not keep:
        return
    rid = submit(ext.pybridge_PutMany, ep._handle, desc.buffer_info()[0], len(keep))
    await Request(ep._ctx, rid, "Endpoint.put_many", None, keep)


class Semaphore:
    """A 64-bit counter the peer of its endpoint signals (``Endpoint.semaphore``):
    ``pack()`` gives the bytes the peer's ``unpack_semaphore`` takes, ``await
    wait(value)`` returns once the counter reaches ``value``. A signal lands after
    every put the peer issued before it. Waits fail when the endpoint fails."""

    __slots__ = ("_ep", "_id", "_finalizer", "__weakref__")

    def __init__(self, ep, sid):
        self._ep, self._id = ep, sid
        self._finalizer = weakref.finalize(self, _release, ep._ctx, ext.pybridge_ReleaseSemaphore, sid)

    def pack(self):
        """The packed key of this semaphore, as bytes, for the peer."""
        return binascii.unhexlify(call(ext.pybridge_PackSemaphore, self._id))

    @property
    def value(self):
        """The counter now."""
        return call(ext.pybridge_SemaphoreValue, self._id)

    async def wait(self, value, timeout=None, stream=None):
        """Return the counter once it is at least ``value`` (watched by the progress
        thread). With ``timeout`` (seconds), raise TimeoutError when it passes; a
        cancelled wait takes nothing.

        With ``stream`` (a CUDA stream: a cupy or torch stream, or its handle), return
        at once instead, having queued on the stream a wait, on the device, until the
        counter reaches ``value`` (``cuStreamWaitValue64``): work queued on the stream
        after it starts once the peer signalled, without blocking the host. Call it on
        a thread where the stream's device is current; release the semaphore only once
        the stream passed the wait."""
        import asyncio

        value = int(value)
        if not 0 <= value < 1 << 64:
            raise ValueError(f"Semaphore.wait: value must be in [0, 2**64), not {value}")
        if stream is not None:
            call(ext.pybridge_WaitSemaphoreOnStream, self._id, value, _stream_handle(stream))
            return None
        rid = submit(ext.pybridge_WaitSemaphore, self._id, value)
        req = Request(self._ep._ctx, rid, "Semaphore.wait")
        if timeout is None:
            return await req
        return await asyncio.wait_for(req, timeout)

    def release(self):
        """Free the counter now; pending waits end with UCXCanceledError."""
        self._finalizer()


class RemoteSemaphore:
    """The peer's semaphore (``Endpoint.unpack_semaphore``): ``await signal(n)`` adds
    ``n`` to it, after every put this side issued before."""

    __slots__ = ("_ep", "_id", "__weakref__")

    def __init__(self, ep, kid):
        self._ep, self._id = ep, kid
        weakref.finalize(self, _release, ep._ctx, ext.pybridge_ReleaseKey, kid)

    async def signal(self, n=1):
        """Add ``n`` (at least 1) to the peer's counter."""
        if not 1 <= n < 1 << 64:
            raise ValueError(f"RemoteSemaphore.signal: n must be in [1, 2**64), not {n}")
        rid = submit(ext.pybridge_Signal, self._ep._handle, self._id, int(n))
        await Request(self._ep._ctx, rid, "RemoteSemaphore.signal", None, self)
