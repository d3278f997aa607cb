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

Note [Batched wake-ups]
    A worker that finishes one of many offloaded requests while others wait
    in its queue would wake the loop for each: the loop then takes the GIL
    from the worker in the middle of the next request, and again for each
    pass it makes (the resumed coroutine's next ``await``), every time a
    GIL hand-off between cores. So when a second coroutine of an asyncio
    loop starts waiting for aiograd, the loop starts its collector: a timer
    that every ``COLLECT_SECONDS`` sets the wake-ups workers handed it
    meanwhile (``set(batch=True)``: the worker has more work queued), and
    stops after a period in which nothing was handed over (then wake-ups go
    out at once until the next wait starts it again: waiters of long jobs
    do not cost the loop a wake-up every period). A worker that runs out of
    work sends what it handed over at once (``send_held``): the loop has
    the GIL to itself then. A wake-up therefore waits at most
    ``COLLECT_SECONDS`` (plus the loop's own delay), however long the
    worker's next task; with one coroutine waiting, or under Trio, it is
    sent at once. Measured on the service benchmark, unpinned, interleaved
    A/B runs: loop passes per request about 3.1 -> 1.4-2.0, process CPU
    time per request down by up to 12%, throughput up by 0-11%.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

COLLECT_SECONDS = 0.002
T = TypeVar("T")


class LocalEvent:
    """An event set and awaited on one loop's thread only (a turn handed on between
    passes run on the loop: Note [Inline passes take turns] in ``drivers.py``). Setting it
    resumes the waiter on the loop's next pass. ``clear`` re-arms it; ``wait`` may be
    awaited again after a cancelled wait."""

    __slots__ = ("is_set", "_waiter", "_asyncio")

    def __init__(self) -> None:
        self.is_set = False
        self._waiter: Any = None
        self._asyncio = running_loop_library() == "asyncio"

    def set(self) -> None:
        self._fire()

    def _fire(self) -> None:
        self.is_set = True
        waiter = self._waiter
        if waiter is None:
            return
        if self._asyncio:
            if not waiter.done():  # done: its wait was cancelled
                waiter.set_result(None)
        else:
            waiter.set()

    async def wait(self) -> None:
        if self.is_set:
            return
        if self._asyncio:
            await self._future(asyncio.get_running_loop())
        else:
            await self._trio_wait()

    def _future(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """The asyncio waiter, made anew if there is none or its wait was cancelled."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = loop.create_future()
        return waiter

    async def _trio_wait(self) -> None:
        import trio

        if self._waiter is None:
            self._waiter = trio.Event()
        await self._waiter.wait()

    def clear(self) -> None:
        self.is_set = False
        self._waiter = None


class LoopSignal(LocalEvent):
    """An event set from any thread and awaited on the loop that made it.

    Make it on the loop's thread, inside a task. ``set`` never blocks and
    never runs a waiter on the caller's thread: from another thread it
    schedules the wake-up with the loop's thread-safe entry, or hands it to
    the loop's collector (Note [Batched wake-ups]), and is dropped if the
    loop has closed: nobody is left to wake. ``wait`` returns at once once
    set, and may be awaited again after a cancelled wait; ``clear`` re-arms
    it. Invariant: ``is_set`` and the waiter change on the loop's thread only.
    """

    __slots__ = ("_loop", "_token", "_thread", "_collector")

    def __init__(self) -> None:
        self.is_set = False
        self._waiter = None
        self._thread = threading.get_ident()
        library = running_loop_library()
        self._asyncio = library == "asyncio"
        self._collector: _Collector | None = None
        if self._asyncio:
            self._loop = asyncio.get_running_loop()
            self._collector = _collector_of(self._loop)
        elif library == "trio":
            import trio

            self._token = trio.lowlevel.current_trio_token()
        else:
            raise RuntimeError(
                "await aiograd.backward() needs a running asyncio or trio event loop")

    def set(self, batch: bool = False) -> None:
        """Wake the waiter, from any thread. ``batch``: the caller has more work queued
        and lets the wake-up wait for the loop's collector, if it has one running."""
        if threading.get_ident() == self._thread:
            self._fire()
        elif self._asyncio:
            if batch and self._collector.hold(self):  # type: ignore[union-attr]
                return
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

    async def wait(self) -> None:
        if self.is_set:
            return
        if self._asyncio:
            waiter = self._future(self._loop)
            collector = self._collector
            collector.waiting += 1  # type: ignore[union-attr]
            if collector.waiting > 1:  # type: ignore[union-attr]
                collector.start()  # type: ignore[union-attr]
            try:
                await waiter
            finally:
                collector.waiting -= 1  # type: ignore[union-attr]
        else:
            await self._trio_wait()

    def watch_turn(self, seen: Any, late: float, timeout: float) -> Any:
        """From a worker that has run a while without going idle: if this loop is
        starved, wait until it has had a turn (without the GIL, at most ``timeout``).

        ``seen`` is what the previous call returned (None at first, or from a
        signal of another loop: then ignored); the result is for the next
        call. An asyncio selector loop is watched without waking it
        (``Backlog``): it is starved if its first due timer is more than
        ``late`` seconds late, or if work it had due at the previous call is
        still due. Other loops are probed: starved if the probe sent at the
        previous call has not run yet. See Note [Giving the loop its turn]
        in ``executors.py``.
        """
        if threading.get_ident() == self._thread:
            return None
        owner = self._loop if self._asyncio else self._token
        backlog = Backlog.of(owner) if isinstance(owner, _SelectorLoop) else UNREADABLE
        if backlog is not UNREADABLE:
            starved = isinstance(backlog, Backlog) and (
                backlog.late > late or (isinstance(seen, Backlog) and seen.still_due(backlog)))
            if not starved:
                return backlog
            _await_turn(self.probe(), timeout)
            return None
        if isinstance(seen, _SentProbe) and seen.owner is owner:
            _await_turn(seen.lock, timeout)
        probe = self.probe()
        return None if probe is None else _SentProbe(owner, probe)

    def probe(self) -> threading.Lock | None:
        """From another thread: a lock, held until the loop has had a turn.

        The loop releases it after two passes of its ready callbacks (the
        first runs what was due, such as timers, and the second the tasks they
        woke); ``locked()`` tells whether it has, ``acquire(timeout=...)``
        waits for it without the GIL, and no Python code runs on the loop for
        it. None on the loop's own thread or if the loop is gone.
        """
        if threading.get_ident() == self._thread:
            return None
        pending = threading.Lock()
        pending.acquire()
        if self._asyncio:
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


class LoopLocal(Generic[T]):
    """A value per running event loop, made by ``factory`` on first use there (what
    anyio's ``RunVar`` does, without its backend lookup: this is read once per pass).
    Read it on the loop's thread; a finished loop's value is freed with the loop."""

    def __init__(self, name: str, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._asyncio: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary())
        self._trio: Any = None
        self._name = name

    def get(self) -> T:
        loop = asyncio._get_running_loop()
        if loop is not None:
            value = self._asyncio.get(loop)
            if value is None:
                value = self._asyncio[loop] = self._factory()
            return value
        import trio

        if self._trio is None:
            self._trio = trio.lowlevel.RunVar(self._name)
        try:
            return self._trio.get()
        except LookupError:
            value = self._factory()
            self._trio.set(value)
            return value


def call_soon(callback: Callable[[], None]) -> None:
    """On a loop's thread: run ``callback`` there on a later pass of the loop (after the
    callbacks and tasks that are ready now)."""
    if running_loop_library() == "asyncio":
        asyncio.get_running_loop().call_soon(callback)
    else:
        import trio

        trio.lowlevel.current_trio_token().run_sync_soon(callback)


def _await_turn(probe: threading.Lock | None, timeout: float) -> None:
    """Wait, without the GIL, until the loop has run ``probe`` (if it has not yet)."""
    if probe is not None and probe.locked():
        probe.acquire(timeout=timeout)


_SelectorLoop = asyncio.selector_events.BaseSelectorEventLoop


#: ``Backlog.of`` for a loop whose internals it cannot read
UNREADABLE = object()


class _SentProbe(NamedTuple):
    """A probe sent to a loop that cannot be read from another thread (``watch_turn``)."""

    owner: Any  # the loop's Trio token, or the loop
    lock: threading.Lock


class Backlog:
    """What an asyncio selector loop had due at one look from another thread.

    ``ready``: the head of its ready queue; ``timer``: its first timer, if due,
    and ``late``: how long past due (seconds); neither: I/O was ready. A loop
    that runs a pass takes all three (it runs every ready callback and due
    timer, and reads its ready I/O), so work still due at a later look, or a
    timer long past due, means the loop has not run meanwhile: it is waiting
    for the GIL. The handles are held weakly: a look keeps nothing of the
    loop's alive.
    """

    __slots__ = ("loop", "_ready", "_timer", "late")

    def __init__(self, loop: asyncio.AbstractEventLoop, ready: Any, timer: Any,
                 late: float) -> None:
        self.loop = loop
        self._ready = None if ready is None else weakref.ref(ready)
        self._timer = None if timer is None else weakref.ref(timer)
        self.late = late

    @property
    def ready(self) -> Any:
        return None if self._ready is None else self._ready()

    @property
    def timer(self) -> Any:
        return None if self._timer is None else self._timer()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Backlog | None | object:
        """The loop's backlog now; None if it has nothing due (it sleeps in its
        selector, or is closed); ``UNREADABLE`` if this loop's internals are not
        the ones read here: the caller then uses the public API (a probe sent
        with ``call_soon_threadsafe``) instead.

        The only code that reads asyncio internals: ``_ready``, ``_scheduled``
        and ``_selector`` of a ``BaseSelectorEventLoop`` (the same since Python
        3.4), under the GIL; ``select(0)`` on the level-triggered selector
        consumes nothing.
        """
        try:
            ready = loop._ready  # type: ignore[attr-defined]
            timers = loop._scheduled  # type: ignore[attr-defined]
            selector = loop._selector  # type: ignore[attr-defined]
        except AttributeError:
            return UNREADABLE
        if selector is None:  # closed
            return None
        try:
            head = ready[0] if ready else None
            timer = timers[0] if timers else None
            late = loop.time() - timer.when() if timer is not None else 0.0
            if late < 0.0:  # not due yet
                timer, late = None, 0.0
            if head is None and timer is None and not selector.select(0):
                return None
        except (AttributeError, IndexError, OSError, ValueError):  # changed meanwhile, or closed
            return None
        return cls(loop, head, timer, late)

    def still_due(self, later: Backlog) -> bool:
        """True if work due at this look is still due at ``later`` (of the same loop)."""
        if self.loop is not later.loop:
            return False
        if self._ready is None and self._timer is None:  # I/O only: still unread?
            return later._ready is None and later._timer is None
        ready, timer = self.ready, self.timer
        return ((ready is not None and ready is later.ready)
                or (timer is not None and timer is later.timer))


class _Collector:
    """The wake-ups held for one asyncio loop (Note [Batched wake-ups]).

    ``waiting`` (coroutines in ``LoopSignal.wait``) and the timer belong to the
    loop's thread. Invariant (under ``_lock``): wake-ups are held only while
    ``running``, and a running collector has its timer scheduled, so each
    held wake-up is set by the next ``_collect`` or ``send`` at the latest.
    It holds no reference to its loop (the registry's key): a finished loop
    is freed with its collector.
    """

    __slots__ = ("_lock", "_held", "running", "waiting", "__weakref__")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[LoopSignal] = []
        self.running = False
        self.waiting = 0

    def start(self) -> None:
        """On the loop's thread: run the timer, unless it runs."""
        with self._lock:
            if self.running:
                return
            self.running = True
        asyncio.get_running_loop().call_later(COLLECT_SECONDS, self._collect)

    def hold(self, signal: LoopSignal) -> bool:
        """From a worker: keep ``signal`` for the next collection. False if not running."""
        with self._lock:
            if not self.running:
                return False
            self._held.append(signal)
        _holding.collectors.add(self)
        return True

    def _collect(self) -> None:
        """The timer: set what is held; run again only if something was (a loop whose
        waiters all wait long is not woken for nothing: the next ``wait`` restarts it)."""
        with self._lock:
            held, self._held = self._held, []
            self.running = bool(held)
        if self.running:
            asyncio.get_running_loop().call_later(COLLECT_SECONDS, self._collect)
        _fire_all(held)

    def send(self) -> None:
        """From a worker: set what is held now, through the loop's thread-safe entry."""
        with self._lock:
            held, self._held = self._held, []
        if held:
            try:
                held[0]._loop.call_soon_threadsafe(_fire_all, held)
            except RuntimeError:  # loop closed
                pass


def _fire_all(signals: list[LoopSignal]) -> None:
    for signal in signals:
        signal._fire()


class _Holding(threading.local):
    #: the collectors this thread handed wake-ups to since its last ``send_held``
    collectors: set[_Collector]

    def __init__(self) -> None:
        self.collectors = set()


_holding = _Holding()
_collectors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Collector] = (
    weakref.WeakKeyDictionary())


def _collector_of(loop: asyncio.AbstractEventLoop) -> _Collector:
    """The loop's collector (made on the loop's thread, the only one that makes them)."""
    collector = _collectors.get(loop)
    if collector is None:
        collector = _collectors[loop] = _Collector()
    return collector


def send_held() -> None:
    """From a worker going idle: send every wake-up it handed to a collector."""
    collectors = _holding.collectors
    if collectors:
        _holding.collectors = set()
        for collector in collectors:
            collector.send()


def running_loop_library() -> str | None:
    """``"asyncio"`` or ``"trio"`` if that library's loop runs on this thread, else None."""
    if asyncio._get_running_loop() is not None:  # the no-exception form (asyncio.events)
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
            return "trio"
        # AttributeError: trio is being imported by another thread, so not running here
        except (RuntimeError, AttributeError):
            pass
    return None
