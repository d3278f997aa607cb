"""The loop bridge: the one place where worker threads reach an event loop.

A coroutine awaiting a GraphTask is woken from a worker thread through the
loop's own thread-safe entry: ``loop.call_soon_threadsafe`` under asyncio,
``TrioToken.run_sync_soon`` under Trio. Waking never blocks the worker and
never runs user code on the worker's behalf; it only schedules a callback
that sets an event on the loop thread.

    worker thread                       event-loop thread
    -------------                       -----------------
    last node done
    gt.finish() --> signal.set() -----> callback: resolve the waiter
                                        awaiting coroutine resumes

A :class:`LoopSignal` is that event. Under asyncio it is a bare future
(no anyio ``Event`` and its backend lookup on every wait): the awaiting side
of every ``await backward()`` and every ``offload`` pays for it once per
call, on the loop, which is also where a service spends its GIL time.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any


class LoopSignal:
    """An event set from any thread and awaited on the loop that made it.

    Make it on the loop's thread, inside a task. ``set`` never blocks and
    never runs a waiter on the caller's thread: from another thread it
    schedules the wake-up with the loop's thread-safe entry (and is dropped if
    the loop has closed: nobody is left to wake). ``wait`` returns at once
    once set, and may be awaited again after a cancelled wait; ``clear``
    re-arms it. Invariant: ``is_set`` and the waiter change on the loop's
    thread only.
    """

    __slots__ = ("is_set", "_waiter", "_loop", "_token", "_thread", "_library")

    def __init__(self) -> None:
        self.is_set = False
        self._waiter: Any = None
        self._thread = threading.get_ident()
        self._library = running_loop_library()
        if self._library == "asyncio":
            self._loop = asyncio.get_running_loop()
        elif self._library == "trio":
            import trio

            self._token = trio.lowlevel.current_trio_token()
        else:
            raise RuntimeError(
                "await aiograd.backward() needs a running asyncio or trio event loop")

    def set(self) -> None:
        if threading.get_ident() == self._thread:
            self._fire()
        elif self._library == "asyncio":
            try:
                self._loop.call_soon_threadsafe(self._fire)
            except RuntimeError:  # loop closed
                pass
        else:
            import trio

            try:
                self._token.run_sync_soon(self._fire)
            except trio.RunFinishedError:
                pass

    def _fire(self) -> None:
        self.is_set = True
        waiter = self._waiter
        if waiter is None:
            return
        if self._library == "asyncio":
            if not waiter.done():  # done: its wait was cancelled
                waiter.set_result(None)
        else:
            waiter.set()

    async def wait(self) -> None:
        if self.is_set:
            return
        if self._library == "asyncio":
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = self._waiter = self._loop.create_future()
            await waiter
        else:
            import trio

            if self._waiter is None:
                self._waiter = trio.Event()
            await self._waiter.wait()

    def clear(self) -> None:
        self.is_set = False
        self._waiter = None

    def probe(self, horizon: float = 0.0) -> threading.Lock | None:
        """From another thread: a lock, held until the loop has had a turn.

        The loop releases it after two passes of its ready callbacks (the
        first runs what was due, such as timers, and the second the tasks they
        woke); ``locked()`` tells whether it has, ``acquire(timeout=...)``
        waits for it without the GIL, and no Python code runs on the loop for
        it. None on the loop's own thread, if the loop is gone, or if it is idle
        until ``horizon`` seconds from now (``asyncio_loop_idle``): asleep in
        its selector, it does not wait for the GIL, and a probe would only wake
        it. See Note [Giving the loop its turn] in ``engine.py``.
        """
        if threading.get_ident() == self._thread:
            return None
        if self._library == "asyncio" and asyncio_loop_idle(self._loop, horizon):
            return None
        pending = threading.Lock()
        pending.acquire()
        if self._library == "asyncio":
            try:
                self._loop.call_soon_threadsafe(self._loop.call_soon, pending.release)
            except RuntimeError:  # loop closed
                return None
        else:
            import trio

            try:
                self._token.run_sync_soon(self._token.run_sync_soon, pending.release)
            except trio.RunFinishedError:
                return None
        return pending


def asyncio_loop_idle(loop: asyncio.AbstractEventLoop, horizon: float = 0.0) -> bool:
    """True if ``loop`` would sleep in its selector if it ran now, and until
    ``horizon`` seconds from now: no callback ready, no timer due by then, no
    I/O ready (its wake-up pipe included).

    It reads the state of asyncio's selector loops (``_ready``, ``_scheduled``,
    ``_selector``; the same since Python 3.4), from any thread, under the
    GIL: ``select(0)`` on their level-triggered selector consumes nothing.
    False when unknown (another kind of loop, or a closed one).
    """
    if not isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop):
        return False
    try:
        if loop._ready:  # type: ignore[attr-defined]
            return False
        timers = loop._scheduled  # type: ignore[attr-defined]
        if timers and timers[0].when() <= loop.time() + horizon:
            return False
        return not loop._selector.select(0)  # type: ignore[attr-defined]
    except (AttributeError, IndexError, OSError, ValueError):  # changed meanwhile, or closed
        return False


def running_loop_library() -> str | None:
    """``"asyncio"`` or ``"trio"`` if that library's loop runs on this thread, else None."""
    if asyncio._get_running_loop() is not None:  # the no-exception form (asyncio.events)
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
            return "trio"
        except RuntimeError:
            pass
    return None
