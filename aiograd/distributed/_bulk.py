"""The bulk lane: large message bodies on a raw TCP connection beside gRPC.

Note [Bulk lane]: gRPC's Python transport tops out below 1 GB/s on loopback
(every message is copied into and out of its buffers, in chunks under its
message limits), so a message above ``rpc.CHUNK`` bytes travels here instead:
the sender connects to the receiver's bulk port and writes
``[16-byte transfer id][8-byte length][body]`` straight from the tensors'
memory (``sock_sendall`` of memoryviews: no join), and the receiver reads it
with a ``BufferedProtocol`` straight into one NumPy buffer (huge pages), of
which the tensors are then views. The gRPC call (or reply) that refers to
the transfer carries its id and the body's Poly1305 tag (Note [Body MAC]),
and the body is only used after that tag verifies, so the lane needs no
authentication of its own: bytes sent by anyone else are never claimed, and
unclaimed bodies are dropped after ``keep`` seconds.
"""
from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Sequence
from typing import Any

import numpy

_HEAD = struct.Struct("<16sQ")
#: The largest body the lane accepts (a guard against a stray peer, not a format limit).
MAX_BODY = 1 << 40


class _Receiver(asyncio.BufferedProtocol):
    """Reads one transfer per connection into its final buffer."""

    def __init__(self, lane: BulkLane) -> None:
        self._lane = lane
        self._head = bytearray(_HEAD.size)
        self._body: numpy.ndarray | None = None
        self._got = 0
        self._id = b""
        self._transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is None:
            return memoryview(self._head)[self._got:]
        return memoryview(self._body)[self._got:]  # type: ignore[arg-type]

    def buffer_updated(self, nbytes: int) -> None:
        self._got += nbytes
        if self._body is None:
            if self._got < _HEAD.size:
                return
            self._id, length = _HEAD.unpack(self._head)
            if length > MAX_BODY:
                self._transport.close()
                return
            self._body, self._got = numpy.empty(length, numpy.uint8), 0
        if self._got == len(self._body):
            self._lane.arrived(self._id, self._body.data)
            self._transport.close()

    def eof_received(self) -> bool:
        return False


class BulkLane:
    """One process's bulk server, and the transfers it received but nobody claimed yet."""

    def __init__(self, keep: float) -> None:
        self._keep = keep
        self._bodies: dict[bytes, asyncio.Future[memoryview]] = {}
        self._server: asyncio.Server | None = None

    async def start(self, host: str) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Receiver(self), host, 0)
        return int(self._server.sockets[0].getsockname()[1])

    def _future(self, transfer: bytes) -> asyncio.Future[memoryview]:
        fut = self._bodies.get(transfer)
        if fut is None:
            fut = self._bodies[transfer] = asyncio.get_running_loop().create_future()
        return fut

    def arrived(self, transfer: bytes, body: memoryview) -> None:
        fut = self._future(transfer)
        if not fut.done():
            fut.set_result(body)
            asyncio.get_running_loop().call_later(self._keep, self._bodies.pop, transfer, None)

    async def take(self, transfer: bytes, timeout: float | None) -> memoryview:
        """The body of ``transfer``, once it has arrived (within ``timeout`` seconds)."""
        fut = self._future(transfer)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(fut)
        finally:
            self._bodies.pop(transfer, None)

    async def send(self, address: tuple[str, int], transfer: bytes,
                   bufs: Sequence[bytes | memoryview], size: int) -> None:
        """Write ``bufs`` (``size`` bytes in all) to the lane at ``address``."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            await loop.sock_sendall(sock, _HEAD.pack(transfer, size))
            for buf in bufs:
                await loop.sock_sendall(sock, buf)
        finally:
            sock.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for fut in self._bodies.values():
            fut.cancel()
