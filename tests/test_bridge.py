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

from aiograd.engine import _bridge
from aiograd.engine._bridge import Backlog, LoopSignal, running_loop_library

pytestmark = pytest.mark.timeout(30)


def set_from_thread(signal: LoopSignal) -> None:
    thread = threading.Thread(target=signal.set)
    thread.start()
    thread.join()


def in_thread(fn):
    """``fn()`` called on another thread (as a worker calls it); its result."""
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    return result[0]


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
    assert in_thread(signal.probe) is None


# ---- watching an asyncio loop for starvation (Note [Giving the loop its turn]) ----

@contextlib.contextmanager
def stopped_loop() -> Iterator[tuple[asyncio.AbstractEventLoop, LoopSignal, list[object]]]:
    """An asyncio loop that is not running (so it never takes a turn), a signal
    made on it, and the wake-ups sent to it from other threads."""
    loop = asyncio.new_event_loop()
    wakeups: list[object] = []
    call_soon_threadsafe = loop.call_soon_threadsafe

    def recording(callback, *args):
        wakeups.append(callback)
        return call_soon_threadsafe(callback, *args)

    async def make() -> LoopSignal:
        return LoopSignal()

    try:
        signal = loop.run_until_complete(make())
        loop.call_soon_threadsafe = recording  # type: ignore[method-assign]
        yield loop, signal, wakeups
    finally:
        loop.close()


def test_an_idle_asyncio_loop_is_watched_without_waking_it():
    with stopped_loop() as (loop, signal, wakeups):
        loop.call_later(3600.0, lambda: None)  # not due for an hour: the loop sleeps
        assert in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0)) is None
        assert in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0)) is None
        assert wakeups == []


def test_due_work_still_due_at_the_next_look_means_the_loop_is_starved():
    with stopped_loop() as (loop, signal, wakeups):
        loop.call_at(loop.time() - 1.0, lambda: None)  # due, and the loop does not run
        seen = in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0))
        assert isinstance(seen, Backlog)
        assert wakeups == []  # the first look only looks
        # The second look finds the same timer due: it probes and waits for the
        # probe (here until the timeout: this loop never runs it).
        assert in_thread(lambda: signal.watch_turn(seen, 3600.0, 0.01)) is None
        assert len(wakeups) == 1


def test_a_timer_later_than_allowed_means_the_loop_is_starved_at_the_first_look():
    with stopped_loop() as (loop, signal, wakeups):
        loop.call_at(loop.time() - 1.0, lambda: None)  # one second late
        assert isinstance(in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0)), Backlog)
        assert wakeups == []  # late, but less than allowed: only looked at
        assert in_thread(lambda: signal.watch_turn(None, 0.5, 0.01)) is None
        assert len(wakeups) == 1  # probed and waited for


def test_a_look_keeps_nothing_of_the_loop_alive():
    loop = asyncio.new_event_loop()
    try:
        handle = loop.call_soon(lambda: None)
        backlog = Backlog.of(loop)
        assert backlog is not None and backlog.ready is handle
        handle.cancel()
        loop.run_until_complete(asyncio.sleep(0))  # runs (drops) it
        del handle
        assert backlog.ready is None
    finally:
        loop.close()


def test_a_loop_that_ran_between_two_looks_is_not_starved():
    with stopped_loop() as (loop, signal, wakeups):
        loop.call_at(loop.time() - 1.0, lambda: None)
        seen = in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0))
        loop.run_until_complete(asyncio.sleep(0))  # a turn: the due timer runs
        loop.call_soon(lambda: None)  # new work, due now
        later = in_thread(lambda: signal.watch_turn(seen, 3600.0, 10.0))
        assert isinstance(later, Backlog) and later is not seen
        assert wakeups == []


def test_what_a_look_at_another_loop_saw_does_not_count():
    # A worker serves one loop's job, then another's: only the same loop's
    # earlier look can show it starved (here both have had I/O due since).
    with stopped_loop() as (loop_a, signal_a, wakeups_a), \
            stopped_loop() as (loop_b, signal_b, wakeups_b):
        pairs = [socket.socketpair() for _ in range(2)]
        try:
            for loop, (reader, writer) in zip((loop_a, loop_b), pairs):
                loop.add_reader(reader, lambda: None)
                writer.send(b"x")
            seen_a = in_thread(lambda: signal_a.watch_turn(None, 3600.0, 10.0))
            seen_b = in_thread(lambda: signal_b.watch_turn(seen_a, 3600.0, 10.0))
            assert isinstance(seen_b, Backlog) and wakeups_b == []
            assert in_thread(lambda: signal_b.watch_turn(seen_b, 3600.0, 0.01)) is None
            assert len(wakeups_b) == 1 and wakeups_a == []  # the same loop's look: starved
        finally:
            for loop, (reader, writer) in zip((loop_a, loop_b), pairs):
                loop.remove_reader(reader)
                reader.close()
                writer.close()


def test_a_trio_loop_is_probed_at_each_look():
    # Trio's run state cannot be read from another thread: a look sends a probe,
    # and the next look waits for it if the loop has not run it yet.
    async def main() -> None:
        signal = LoopSignal()
        first = await trio.to_thread.run_sync(lambda: signal.watch_turn(None, 3600.0, 10.0))
        second = await trio.to_thread.run_sync(lambda: signal.watch_turn(first, 3600.0, 10.0))
        assert not first.lock.locked()  # run by the loop before the second look returned
        assert second.lock is not first.lock

    trio.run(main)


def test_a_backlog_is_the_work_a_loop_has_due():
    loop = asyncio.new_event_loop()
    reader, writer = socket.socketpair()
    try:
        assert Backlog.of(loop) is None
        handle = loop.call_soon(lambda: None)  # a ready callback
        backlog = Backlog.of(loop)
        assert backlog is not None and backlog.ready is handle and backlog.timer is None
        handle.cancel()
        loop.run_until_complete(asyncio.sleep(0))  # runs (drops) it
        assert Backlog.of(loop) is None
        timer = loop.call_at(loop.time() - 1.0, lambda: None)  # a timer already due
        backlog = Backlog.of(loop)
        assert backlog is not None and backlog.ready is None and backlog.timer is timer
        assert backlog.late >= 1.0
        timer.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.call_later(3600.0, lambda: None)  # a timer far off: nothing due
        assert Backlog.of(loop) is None
        loop.add_reader(reader, lambda: None)
        assert Backlog.of(loop) is None
        writer.send(b"x")  # I/O ready
        io = Backlog.of(loop)
        assert io is not None and io.ready is io.timer is None
        assert io.still_due(Backlog.of(loop))  # unread at the next look
        loop.remove_reader(reader)
    finally:
        reader.close()
        writer.close()
        loop.close()
    assert Backlog.of(loop) is None  # closed: nothing it could run


def test_a_trio_module_half_imported_by_another_thread_means_no_trio_run_here(monkeypatch):
    # While one thread imports trio, sys.modules holds the module without ``lowlevel``:
    # a worker asking which loop runs on its thread must get None, not AttributeError.
    import types

    monkeypatch.setitem(sys.modules, "trio", types.ModuleType("trio"))
    assert running_loop_library() is None


def test_a_loop_whose_internals_are_not_asyncios_is_probed_instead(monkeypatch):
    """Note [Reading loop internals]: no ``_ready``/``_scheduled``/``_selector``, no look."""
    with stopped_loop() as (loop, signal, wakeups):
        opaque = type("Opaque", (), {"time": loop.time})()
        assert Backlog.of(opaque) is _bridge.UNREADABLE
        monkeypatch.setattr(Backlog, "of", classmethod(lambda cls, lp: _bridge.UNREADABLE))
        seen = in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0))
        assert len(wakeups) == 1  # the public way: a probe sent through the loop's entry
        # The next look waits for that probe (until the timeout: this loop never runs).
        assert in_thread(lambda: signal.watch_turn(seen, 3600.0, 0.01)) is not None
        assert len(wakeups) == 2
