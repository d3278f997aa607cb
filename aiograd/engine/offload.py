"""``await aiograd.offload(fn, ...)``: run blocking model code on the CPU worker.

Note [Offloading]
    Python code holds the GIL, so a forward pass written with aiograd
    tensors blocks the event loop while it runs; an async service with many
    requests in flight would spend whole loop iterations in forward passes.
    ``offload`` runs ``fn`` on the CPU worker, the thread that also runs CPU
    backward nodes: the loop only queues the job and is woken once, when it
    is done. The loop gets the GIL back within the switch interval (Note
    [Time slices]), so its other coroutines keep their schedule.

    A job waits in the worker's ReadyQueue behind every node task (its key
    sorts last), so backward passes already in flight finish before new
    forward passes start. Inside ``fn``, ``backward_sync`` runs the backward
    right there, driven by the worker (as in Note [Reentrant backward]).
    Jobs run only from the worker's own loop, never inside a nested drive,
    so one job never runs inside another.

    ``fn`` runs in a copy of the caller's contextvars (grad mode, anomaly
    mode, saved-tensor hooks); warnings it raises are replayed to the
    caller. Cancellation: a job cancelled before it starts never runs; a
    running job cannot be interrupted, so the caller waits for its end,
    shielded, and then sees the cancellation. A job that can never run
    (the engine shut down, its worker died) fails with a RuntimeError.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ..devices import CPU
from . import engine as _engine
from ._bridge import LoopSignal
from .drivers import multithreading_enabled
from .executors import _tls, has_queued_work, replay_warnings

T = TypeVar("T")


class OffloadJob:
    """One call of ``fn`` for a coroutine awaiting ``signal``.

    Exactly one of running, cancelling and failing takes the job (``_claim``).
    """

    __slots__ = ("_call", "_signal", "_lock", "_claimed", "result", "error", "warnings")

    def __init__(self, call: Callable[[], Any], signal: LoopSignal) -> None:
        self._call: Callable[[], Any] | None = call
        self._signal: LoopSignal | None = signal
        self._lock = threading.Lock()
        self._claimed = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.warnings: list[Any] = []

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def __call__(self) -> None:
        """Run the call (on the worker), unless it was cancelled first."""
        if not self._claim():
            return
        _tls.served = self._signal  # Note [Giving the loop its turn]
        previous, _tls.warnings = _tls.warnings, self.warnings
        try:
            self.result = self._call()  # type: ignore[misc]
        except BaseException as exc:  # noqa: BLE001  (handed to the awaiting coroutine)
            self.error = exc
        finally:
            _tls.warnings = previous
            self._finish()

    def cancel(self) -> bool:
        """Keep the job from starting. False if it already started (or ended)."""
        if not self._claim():
            return False
        self._call = self._signal = None
        return True

    def fail(self, error: BaseException) -> None:
        """The job can never run: end it with ``error``."""
        if self._claim():
            self.error = error
            self._finish()

    def _finish(self) -> None:
        signal = self._signal
        self._call = self._signal = None  # hold no user objects once done
        signal.set(batch=has_queued_work())  # type: ignore[union-attr]


class PendingOffload:
    """``fn(*args, **kwargs)`` queued on the CPU worker now, its result awaited later.

    The two halves of :func:`offload`, for a caller that works while ``fn`` runs (the
    DataLoader's prefetch). Make it on the loop's thread, inside a task. ``result()``
    is awaited at most once; ``cancel()`` instead ends it without the result. Both
    follow Note [Offloading]: a job not yet started never runs; a running one is
    waited for, shielded. ``discard()`` (sync, any thread) keeps a job that has not
    started from starting and leaves a running one to end on its own, its result
    dropped. With multithreading disabled ``fn`` runs in ``result()``, on the
    caller's thread.
    """

    __slots__ = ("_job", "_done", "_inline")

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        if not callable(fn):
            raise TypeError(f"offload() expects a callable, got {type(fn).__name__}")
        context = contextvars.copy_context()
        call: Callable[[], Any] = lambda: context.run(fn, *args, **kwargs)  # noqa: E731
        self._job: OffloadJob | None = None
        self._inline: Callable[[], Any] | None = None
        if not context.run(multithreading_enabled.get):
            self._inline = call
            return
        self._done = LoopSignal()
        self._job = OffloadJob(call, self._done)
        _engine.get_engine().device_queue(CPU).push_job(self._job)

    async def result(self) -> Any:
        """``fn``'s result (or its exception), once it has run."""
        job = self._job
        if job is None:
            call, self._inline = self._inline, None
            if call is None:
                raise RuntimeError("PendingOffload.result() awaited twice, or after cancel()")
            return call()
        self._job = None
        try:
            await self._done.wait()
        except BaseException:
            if not job.cancel():
                with anyio.CancelScope(shield=True):
                    await self._done.wait()
            raise
        replay_warnings(job.warnings)
        error = job.error
        if error is not None:
            job.error = None  # the traceback's frames stay with the raise only
            raise error
        return job.result

    async def cancel(self) -> None:
        """End the call without its result: keep it from starting, or wait for its end."""
        job, self._job, self._inline = self._job, None, None
        if job is not None and not job.cancel():
            with anyio.CancelScope(shield=True):
                await self._done.wait()

    def discard(self) -> None:
        """Keep the call from starting, without waiting; a running call ends on its own."""
        job, self._job, self._inline = self._job, None, None
        if job is not None:
            job.cancel()


async def offload(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on aiograd's CPU worker and return its result.

    For the model code of an async service: a forward pass, or a whole step
    (forward and ``backward_sync``), without holding the event loop. See
    Note [Offloading]. With multithreading disabled (``set_multithreading_enabled(False)``)
    ``fn`` runs right here, on the caller's thread.
    """
    result: T = await PendingOffload(fn, *args, **kwargs).result()
    return result
