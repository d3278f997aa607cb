"""The loop bridge: LoopSignal, the event workers set to wake an awaiting coroutine.

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest
import trio

from aiograd.engine._bridge import LoopSignal

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


@pytest.mark.anyio
async def test_a_probe_is_released_once_the_loop_has_had_a_turn():
    signal = LoopSignal()
    assert signal.probe() is None  # on the loop's own thread there is nothing to learn
    probes: list[threading.Lock | None] = []
    await anyio.to_thread.run_sync(lambda: probes.append(signal.probe()))
    pending = probes[0]
    assert pending is not None
    # The thread that probed sees it released after the loop ran its passes.
    released = await anyio.to_thread.run_sync(lambda: pending.acquire(timeout=10))
    assert released


def test_a_probe_of_a_closed_loop_is_none():
    async def make() -> LoopSignal:
        return LoopSignal()

    signal = asyncio.run(make())
    probes: list[threading.Lock | None] = []
    thread = threading.Thread(target=lambda: probes.append(signal.probe()))
    thread.start()
    thread.join()
    assert probes == [None]
