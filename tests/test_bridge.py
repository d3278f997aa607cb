"""The loop bridge: LoopSignal, the event workers set to wake an awaiting coroutine.

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from collections.abc import Iterator

import anyio
import pytest
import trio

from aiograd.engine._bridge import LoopSignal, asyncio_loop_idle, running_loop_library

pytestmark = pytest.mark.timeout(30)


def set_from_thread(signal: LoopSignal) -> None:
    thread = threading.Thread(target=signal.set)
    thread.start()
    thread.join()


@pytest.mark.anyio
async def test_set_from_another_thread_wakes_the_waiter():
    signal = LoopSignal()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, set_from_thread, signal)
        await signal.wait()
    assert signal.is_set


@pytest.mark.anyio
async def test_a_set_signal_is_waited_for_at_once_until_cleared():
    signal = LoopSignal()
    signal.set()  # on the loop's own thread: at once
    await signal.wait()
    signal.clear()
    assert not signal.is_set
    with anyio.move_on_after(0.05) as scope:
        await signal.wait()
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_wait_after_a_cancelled_wait_sees_a_later_set():
    signal = LoopSignal()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await signal.wait()
    assert scope.cancelled_caught
    await anyio.to_thread.run_sync(set_from_thread, signal)
    with anyio.fail_after(10):
        await signal.wait()


def test_set_after_the_asyncio_loop_closed_is_dropped():
    async def make() -> LoopSignal:
        return LoopSignal()

    signal = asyncio.run(make())
    set_from_thread(signal)  # nobody is left to wake: no error
    assert not signal.is_set


def test_set_after_the_trio_run_finished_is_dropped():
    async def make() -> LoopSignal:
        return LoopSignal()

    signal = trio.run(make)
    set_from_thread(signal)
    assert not signal.is_set


def test_making_a_signal_needs_a_running_loop():
    with pytest.raises(RuntimeError, match="running asyncio or trio event loop"):
        LoopSignal()


@contextlib.contextmanager
def loop_kept_busy() -> Iterator[None]:
    """Under asyncio: a socket that stays readable, so the loop never sleeps (never idle)."""
    if running_loop_library() != "asyncio":
        yield
        return
    loop = asyncio.get_running_loop()
    reader, writer = socket.socketpair()
    writer.send(b"x")
    loop.add_reader(reader, lambda: None)
    try:
        yield
    finally:
        loop.remove_reader(reader)
        reader.close()
        writer.close()


@pytest.mark.anyio
async def test_a_probe_is_released_once_the_loop_has_had_a_turn():
    signal = LoopSignal()
    assert signal.probe() is None  # on the loop's own thread there is nothing to learn
    probes: list[threading.Lock | None] = []
    with loop_kept_busy():
        await anyio.to_thread.run_sync(lambda: probes.append(signal.probe()))
    pending = probes[0]
    assert pending is not None
    # The thread that probed sees it released after the loop ran its passes.
    released = await anyio.to_thread.run_sync(lambda: pending.acquire(timeout=10))
    assert released


def test_an_idle_asyncio_loop_is_not_probed():
    # asleep in its selector, the loop waits for I/O, not for the GIL: nothing to learn
    async def make() -> LoopSignal:
        return LoopSignal()

    loop = asyncio.new_event_loop()
    try:
        signal = loop.run_until_complete(make())
        probes: list[threading.Lock | None] = []
        thread = threading.Thread(target=lambda: probes.append(signal.probe()))
        thread.start()
        thread.join()
        assert probes == [None]
    finally:
        loop.close()


def test_a_loop_with_work_due_is_not_idle():
    loop = asyncio.new_event_loop()
    reader, writer = socket.socketpair()
    try:
        assert asyncio_loop_idle(loop)
        handle = loop.call_soon(lambda: None)  # a ready callback
        assert not asyncio_loop_idle(loop)
        handle.cancel()
        loop.run_until_complete(asyncio.sleep(0))  # runs (drops) it
        assert asyncio_loop_idle(loop)
        timer = loop.call_at(loop.time() - 1.0, lambda: None)  # a timer already due
        assert not asyncio_loop_idle(loop)
        timer.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.call_later(3600.0, lambda: None)  # a timer far off: idle till then
        assert asyncio_loop_idle(loop)
        assert asyncio_loop_idle(loop, horizon=60.0)
        assert not asyncio_loop_idle(loop, horizon=7200.0)
        loop.add_reader(reader, lambda: None)
        assert asyncio_loop_idle(loop)
        writer.send(b"x")  # I/O ready
        assert not asyncio_loop_idle(loop)
        loop.remove_reader(reader)
    finally:
        reader.close()
        writer.close()
        loop.close()
    assert not asyncio_loop_idle(loop)  # closed: unknown, so not idle


def test_a_probe_of_a_closed_loop_is_none():
    async def make() -> LoopSignal:
        return LoopSignal()

    signal = asyncio.run(make())
    probes: list[threading.Lock | None] = []
    thread = threading.Thread(target=lambda: probes.append(signal.probe()))
    thread.start()
    thread.join()
    assert probes == [None]


def test_a_trio_module_half_imported_by_another_thread_means_no_trio_run_here(monkeypatch):
    # While one thread imports trio, sys.modules holds the module without ``lowlevel``:
    # a worker asking which loop runs on its thread must get None, not AttributeError.
    import types

    monkeypatch.setitem(sys.modules, "trio", types.ModuleType("trio"))
    assert running_loop_library() is None
