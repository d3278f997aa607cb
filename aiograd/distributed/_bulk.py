"""The bulk lane: large message bodies on a raw TCP connection beside gRPC.

Note [Bulk lane]: gRPC's Python transport tops out below 1 GB/s on loopback
(every message is copied into and out of its buffers, in chunks under its
message limits), so a message above ``rpc.CHUNK`` bytes travels here instead:
the sender connects to the receiver's bulk port and writes
``[16-byte transfer id][16-byte nonce][8-byte length][body]`` straight from the
tensors' memory (``sock_sendall`` of memoryviews: no join), and the receiver
reads it with a ``BufferedProtocol`` straight into one NumPy buffer (huge
pages), of which the tensors are then views. The gRPC call (or reply) that
refers to the transfer carries its id and the body's Poly1305 tag under the
nonce's one-time key (Note [Body MAC]), and the body is only used after that
tag verifies, so the lane needs no authentication of its own: bytes sent by
anyone else are never claimed, and unclaimed bodies are dropped after ``keep``
seconds.

Note [MAC while streaming]: the MAC is computed as the bytes move, not in a
pass of its own before sending or after receiving: the sender MACs each
``PIECE`` just before writing it, the receiver each read just after it lands
(both still in cache), so the receiver's MAC runs while the sender is still
writing, in the other process. The receiver MACs under the nonce of the
header; the claim (``rpc``) uses that tag only if the signed token vouches
for the same nonce, and recomputes it under the token's nonce otherwise. The
receiver never reveals a tag it computed, so MACing a stranger's bytes under
a nonce gives nothing away.

Note [Reused receive buffers]: a fresh 100 MB buffer costs its page faults
(zeroing every page the first time it is written) on top of the copy out of the
socket. So the lane keeps the buffers it received into, and reuses one once
nothing refers to the body any more: the body handed out is a view ``v`` of
the kept ``base``, every tensor made from it holds ``v``, and the lane holds
only a weak reference to ``v``, so ``v`` dead means ``base`` is free. A buffer
is reused for a body of at least half its size; at most ``KEEP_FREE`` free
buffers are kept, and none longer than ``keep`` seconds after it was last handed
out.
"""
from __future__ import annotations

import asyncio
import hmac
import socket
import struct
import time
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy

from . import _auth

_HEAD = struct.Struct("<16s16sQ")
#: The largest body the lane accepts (a guard against a stray peer, not a format limit).
MAX_BODY = 1 << 40
#: The sender MACs and writes a body in pieces of this many bytes (Note [MAC while streaming]).
PIECE = 1 << 20
#: The most free receive buffers a lane keeps (Note [Reused receive buffers]).
KEEP_FREE = 2


class Arrival(NamedTuple):
    """A received body, the nonce its header named, and its Poly1305 tag under that
    nonce's key (hex)."""

    body: memoryview
    nonce: str
    tag: str


class _Receiver(asyncio.BufferedProtocol):
    """Reads one transfer per connection into its final buffer, MACing as it lands."""

    def __init__(self, lane: BulkLane) -> None:
        self._lane = lane
        self._head = bytearray(_HEAD.size)
        self._body: memoryview | None = None
        self._got = 0
        self._id = b""
        self._nonce = ""
        self._mac: Any = None
        self._transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is None:
            return memoryview(self._head)[self._got:]
        return self._body[self._got:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._body is None:
            self._got += nbytes
            if self._got < _HEAD.size:
                return
            self._id, nonce, length = _HEAD.unpack(self._head)
            if length > MAX_BODY:
                self._transport.close()
                return
            self._nonce = nonce.hex()
            self._mac = _auth.body_mac(self._lane.secret, self._nonce)
            self._body = self._lane.buffers.get(length)
            self._got = 0
        else:
            self._mac.update(self._body[self._got:self._got + nbytes])
            self._got += nbytes
        if self._got == len(self._body):
            self._lane.arrived(self._id, Arrival(self._body, self._nonce,
                                                 self._mac.finalize().hex()))
            self._transport.close()

    def eof_received(self) -> bool:
        return False


class _Buffers:
    """Receive buffers kept for reuse (Note [Reused receive buffers])."""

    def __init__(self, keep: float) -> None:
        self._keep = keep
        #: [base, weak reference to the view of it handed out, when it was handed out]
        self._kept: list[tuple[numpy.ndarray, weakref.ref[numpy.ndarray], float]] = []

    def get(self, size: int) -> memoryview:
        """A writable buffer of ``size`` bytes, reused when a free one fits."""
        base = None
        for i, (b, view, _) in enumerate(self._kept):
            if view() is None and size <= b.size <= 2 * size:
                base = b
                del self._kept[i]
                break
        if base is None:
            base = numpy.empty(size, numpy.uint8)
        v = base[:size]
        self._kept.append((base, weakref.ref(v), time.monotonic()))
        self.trim()
        return v.data

    def trim(self) -> None:
        """Drop the free buffers handed out ``keep`` or more seconds ago, and all but
        the ``KEEP_FREE`` most recently handed out free ones."""
        free = [k for k in self._kept if k[1]() is None]
        stale = time.monotonic() - self._keep
        drop = {id(k[0]) for k in free[:-KEEP_FREE]} | {
            id(k[0]) for k in free if k[2] <= stale}
        self._kept = [k for k in self._kept if id(k[0]) not in drop]


class BulkLane:
    """One process's bulk server, and the transfers it received but nobody claimed yet."""

    def __init__(self, keep: float, secret: bytes) -> None:
        self._keep = keep
        self.secret = secret
        self.buffers = _Buffers(keep)
        self._bodies: dict[bytes, asyncio.Future[Arrival]] = {}
        self._server: asyncio.Server | None = None

    async def start(self, host: str) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Receiver(self), host, 0)
        return int(self._server.sockets[0].getsockname()[1])

    def _future(self, transfer: bytes) -> asyncio.Future[Arrival]:
        fut = self._bodies.get(transfer)
        if fut is None:
            fut = self._bodies[transfer] = asyncio.get_running_loop().create_future()
        return fut

    def arrived(self, transfer: bytes, arrival: Arrival) -> None:
        fut = self._future(transfer)
        if not fut.done():
            fut.set_result(arrival)
            loop = asyncio.get_running_loop()
            loop.call_later(self._keep, self._bodies.pop, transfer, None)
            loop.call_later(self._keep, self.buffers.trim)

    async def take(self, transfer: bytes, timeout: float | None) -> Arrival:
        """The arrival of ``transfer``, once it is complete (within ``timeout`` seconds)."""
        fut = self._future(transfer)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(fut)
        finally:
            self._bodies.pop(transfer, None)

    def vouched(self, arrival: Arrival, nonce: str, tag: str) -> bool:
        """Whether a signed token's ``nonce`` and ``tag`` vouch for ``arrival``: its
        streamed tag if it was MAC'd under that nonce, else one computed now."""
        got = (arrival.tag if arrival.nonce == nonce
               else _auth.body_tag(self.secret, nonce, [arrival.body]))
        return hmac.compare_digest(got, tag)

    async def send(self, address: tuple[str, int], transfer: bytes,
                   bufs: Sequence[bytes | memoryview], size: int, nonce: str) -> str:
        """Write ``bufs`` (``size`` bytes in all) to the lane at ``address``; their tag
        under ``nonce``'s key, MAC'd as they go (Note [MAC while streaming])."""
        loop = asyncio.get_running_loop()
        mac = _auth.body_mac(self.secret, nonce)
        head = _HEAD.pack(transfer, bytes.fromhex(nonce), size)
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            await loop.sock_sendall(sock, head)
            for buf in bufs:
                view = memoryview(buf).cast("B")
                for at in range(0, len(view), PIECE):
                    piece = view[at:at + PIECE]
                    mac.update(piece)
                    await loop.sock_sendall(sock, piece)
        finally:
            sock.close()
        return mac.finalize().hex()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for fut in self._bodies.values():
            fut.cancel()
