"""The loop bridge: the one place where worker threads reach an event loop.

A coroutine awaiting a GraphTask is woken from a worker thread through the
loop's own thread-safe entry: ``loop.call_soon_threadsafe`` under asyncio,
``TrioToken.run_sync_soon`` under Trio. Waking never blocks the worker and
never runs user code on the worker's behalf; it only schedules a callback
that sets an event on the loop thread.

    worker thread                       event-loop thread
    -------------                       -----------------
    last node done
    gt.finish() --> waker() ----------> callback: event.set()
                                        awaiting coroutine resumes
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable


def loop_waker(callback: Callable[[], None]) -> Callable[[], None]:
    """Return a thread-safe function that runs ``callback`` on the current loop.

    Must be called on the event-loop thread, inside a task. If the loop has
    already closed when the waker fires, the call is dropped: nobody is left
    to wake.
    """
    library = running_loop_library()
    if library == "asyncio":
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()

        def wake_asyncio() -> None:
            if threading.get_ident() == loop_thread:
                callback()
                return
            try:
                loop.call_soon_threadsafe(callback)
            except RuntimeError:  # loop closed
                pass

        return wake_asyncio
    if library == "trio":
        import trio

        token = trio.lowlevel.current_trio_token()
        loop_thread = threading.get_ident()

        def wake_trio() -> None:
            if threading.get_ident() == loop_thread:
                callback()
                return
            try:
                token.run_sync_soon(callback)
            except trio.RunFinishedError:
                pass

        return wake_trio
    raise RuntimeError("await aiograd.backward() needs a running asyncio or trio event loop")


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
