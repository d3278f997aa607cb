"""The bulk lane on its own (Note [Bulk lane], Note [MAC while streaming]): one process,
its own loop, no RPC agent."""
from __future__ import annotations

import asyncio
import os

import numpy
import pytest

pytest.importorskip("grpc")
pytest.importorskip("cryptography")

from aiograd.distributed import _auth, _bulk  # noqa: E402

pytestmark = pytest.mark.timeout(60)

SECRET = b"bulk-test-secret"


def _bufs() -> list[bytes | memoryview]:
    """A body of several buffers, none a multiple of the piece size, one empty."""
    floats = numpy.random.default_rng(0).standard_normal(3 * _bulk.PIECE // 8 + 5)
    return [b"header", floats.data.cast("B"), b"", os.urandom(_bulk.PIECE + 3)]


async def _round(nonce: str) -> tuple[_bulk.BulkLane, _bulk.Arrival, str, bytes]:
    lane = _bulk.BulkLane(keep=30.0, secret=SECRET)
    try:
        port = await lane.start("127.0.0.1")
        bufs, transfer = _bufs(), os.urandom(16)
        size = sum(len(b) for b in bufs)
        tag = await lane.send(("127.0.0.1", port), transfer, bufs, size, nonce)
        arrival = await lane.take(transfer, 30.0)
    finally:
        await lane.close()
    return lane, arrival, tag, b"".join(bytes(b) for b in bufs)


def test_sender_and_receiver_mac_the_body_as_it_streams() -> None:
    nonce = _auth.new_nonce()
    lane, arrival, tag, body = asyncio.run(_round(nonce))
    assert bytes(arrival.body) == body
    want = _auth.body_tag(SECRET, nonce, [body])
    assert tag == want  # the sender's tag, MAC'd piece by piece
    assert (arrival.nonce, arrival.tag) == (nonce, want)  # the receiver's, read by read
    assert lane.vouched(arrival, nonce, want)
    assert not lane.vouched(arrival, nonce, _auth.body_tag(SECRET, nonce, [body + b"x"]))


def test_a_token_for_another_nonce_is_checked_afresh() -> None:
    """The streamed tag counts only for the nonce in the header; a token naming another
    nonce is checked by MACing the body under that nonce's key."""
    sent_under = _auth.new_nonce()
    lane, arrival, _, body = asyncio.run(_round(sent_under))
    other = _auth.new_nonce()
    assert lane.vouched(arrival, other, _auth.body_tag(SECRET, other, [body]))
    assert not lane.vouched(arrival, other, arrival.tag)  # right tag, wrong key
    assert not lane.vouched(arrival, other, _auth.body_tag(b"wrong", other, [body]))
    assert not lane.vouched(arrival, other, _auth.body_tag(SECRET, other, [b"forged"]))


def _address(buf: memoryview | numpy.ndarray) -> int:
    return int(numpy.asarray(buf).__array_interface__["data"][0])


def test_a_receive_buffer_is_reused_only_once_nothing_refers_to_it() -> None:
    """Note [Reused receive buffers]: a body, or any array made from it, keeps its
    buffer; once all are gone the next body of a fitting size lands in it."""
    size = 3 * _bulk.PIECE + 7

    async def go() -> None:
        lane = _bulk.BulkLane(keep=30.0, secret=SECRET)
        port = await lane.start("127.0.0.1")

        async def transfer(fill: int, n: int = size) -> memoryview:
            transfer = os.urandom(16)
            await lane.send(("127.0.0.1", port), transfer, [bytes([fill]) * n], n,
                            _auth.new_nonce())
            return (await lane.take(transfer, 30.0)).body

        try:
            first = await transfer(1)
            where = _address(first)
            tail = numpy.frombuffer(first, numpy.uint8)[-5:]  # a view that outlives `first`
            del first
            second = await transfer(2)
            assert _address(second) != where and bytes(second) == b"\x02" * size
            assert bytes(tail) == b"\x01" * 5  # still in use: not overwritten
            del tail
            third = await transfer(3, size - 100)  # fits the free buffer
            assert _address(third) == where and bytes(third) == b"\x03" * (size - 100)
            del second, third
            small = await transfer(4, 1000)  # under half the size: a buffer of its own
            assert _address(small) != where and bytes(small) == b"\x04" * 1000
        finally:
            await lane.close()

    asyncio.run(go())


def test_free_receive_buffers_are_bounded() -> None:
    buffers = _bulk._Buffers(keep=30.0)
    held = [buffers.get(1000 * (i + 1)) for i in range(_bulk.KEEP_FREE + 3)]
    assert len(buffers._kept) == _bulk.KEEP_FREE + 3  # all in use: all kept
    del held
    buffers.trim()
    assert len(buffers._kept) == _bulk.KEEP_FREE
    stale = _bulk._Buffers(keep=0.0)
    stale.get(1000)
    stale.trim()
    assert stale._kept == []
