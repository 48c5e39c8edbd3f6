"""Worker addresses and network interface addresses."""

import fcntl
import os
import socket
import struct

from ._bridge import call, ext


class UCXAddress(bytes):
    """A UCX worker address: bytes (so picklable, and a buffer), with UCXX's ``length``."""

    @property
    def length(self):
        return len(self)

    @classmethod
    def from_buffer(cls, buffer):
        return cls(bytes(memoryview(buffer)))

    def __repr__(self):
        return f"<UCXAddress {len(self)} bytes>"


def get_worker_address():
    """This process's worker address, for ``create_endpoint_from_worker_address``."""
    from . import _context

    _context.get()
    return UCXAddress(bytes.fromhex(call(ext.pybridge_WorkerAddress)))


def get_ucx_address_from_buffer(buffer):
    """A UCXAddress from the bytes of one (e.g. received from the peer)."""
    return UCXAddress.from_buffer(buffer)


_SIOCGIFADDR = 0x8915


def _ipv4_of(ifname):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", ifname.encode()[:15]))
    return socket.inet_ntoa(packed[20:24])


def _ipv6_of(ifname):
    with open("/proc/net/if_inet6") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 6 and parts[5] == ifname:
                raw = bytes.fromhex(parts[0])
                return socket.inet_ntop(socket.AF_INET6, raw)
    raise OSError(f"interface {ifname!r} has no IPv6 address")


def get_address(ifname=None, use_ipv6=False):
    """The IP address of a network interface, as UCXX's ``get_address``.

    ``ifname`` defaults to ``UCXPY_IFNAME``; without either, the first interface with
    an address among those named ib*, then eth*, then en* (each group in name order),
    as UCXX chooses.

    Raises
    ------
    OSError
        The interface does not exist or has no address of that family, or (no
        ``ifname``) no ib*, eth* or en* interface has one.
    """
    lookup = _ipv6_of if use_ipv6 else _ipv4_of
    ifname = ifname or os.environ.get("UCXPY_IFNAME")
    if ifname:
        return lookup(ifname)
    names = _interface_names()
    for prefix in ("ib", "eth", "en"):
        for name in sorted(n for n in names if n.startswith(prefix)):
            try:
                return lookup(name)
            except OSError:
                continue
    raise OSError("No devices found")


def _interface_names():
    return [n for _, n in socket.if_nameindex()]
