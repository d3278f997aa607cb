"""The drivers: the caller's side of a GraphTask.

A *driver* is the caller of ``backward``/``grad`` waiting for its
GraphTask: it completes and submits the task (``_start``, ``_submit_root``),
waits, then runs what follows the nodes (final callbacks, leaf streams,
warnings, the result or the error: seed ``exec_post_processing``). Three
kinds:

- ``run_async``: a coroutine on an event loop; the CPU nodes run on the
  CPU worker, and the driver (``AsyncDriver``) sleeps until woken, running
  ``async def`` backward functions and async final callbacks on its loop::

    event loop (driver)              CPU worker                 cuda:0 worker
    -------------------              ----------                 -------------
    submit root ------------------>  prepare (dependencies)
    await driver.signal              slice: run ready nodes
                                     of this task, lock-free
                                     local heap  ------------>  node on cuda:0
                                                 <------------  its CPU child
                                     last node: finished = True
    <----- LoopSignal.set()
    final callbacks, leaf streams,
    re-raise error or return grads

- ``_run_inline``: a coroutine running a small graph's nodes (or, with
  multithreading disabled, every graph's) on its own loop thread (Note
  [Inline small graphs]);
- ``run_sync``: a blocked thread (``backward_sync``) that is an executor
  for its own task's CPU nodes meanwhile (Note [Reentrant backward] in
  ``executors.py``); async nodes of a sync task go to its awaiting
  ancestor's loop, or to a background loop thread.

Thread rules: everything here runs on the caller's thread (its event loop,
or the blocked sync caller), except ``AsyncDriver.finished``/``submit`` and
the ports' ``submit`` (any executor: they only append and wake). These and
``_bridge.py`` are the only loop-aware code of the engine. A driver reads
its GraphTask's result only after the task is finished (Note
[Completion]), and cancelling it (``_cancel_tree``) goes through
GraphTask's methods, as executors do.

Note [Inline small graphs]
    Handing a GraphTask to a worker costs two thread wake-ups (worker, then
    loop): on a loaded machine more than the whole backward of a small
    graph. And while the worker runs it, the loop thread contends with the
    worker for the GIL: a thread waiting for the GIL waits up to the switch
    interval (5 ms) whenever the holder does not release it, so a service
    that runs its forward passes on the loop stalls behind the backward
    passes it handed over (measured on the service benchmark: 64 clients,
    forward on the loop, ``await grad()`` of an MLP: heartbeat lag p99
    10-41 ms, throughput 0.63-0.79x of PyTorch through an executor). So an
    ``await backward()`` of a small graph runs on the loop thread, like any
    other bit of CPU work a coroutine does: at most ``INLINE_MAX_NODES``
    nodes, all on the CPU, each with gradients of at most
    ``INLINE_MAX_ELEMENTS`` elements (the longest a slice can overrun its
    time is one node), and only aiograd's own backward formulas: no custom
    Function, no hook, no saved-tensor hooks, nothing that could block or
    take long. Everything else goes to the workers. The passes on one loop
    take turns (Note [Inline passes take turns]).

Note [Inline passes take turns]
    Passes run on a loop thread (small graphs, and every graph with
    multithreading disabled) take turns, one time slice (Note [Time slices]
    in ``evaluate.py``) per turn, and the loop runs its other ready
    callbacks (timers, I/O, other coroutines) after every slice: a slice
    that runs out of time with nodes left always ends there (its queue
    ``yields``), and its driver passes a checkpoint before the next one.
    A pass asking while no pass holds or awaits the turn runs at once, in
    the caller's step (a lone small backward costs no loop pass); otherwise
    it waits. When a slice ends, its pass keeps the turn if nothing waiting
    outranks it, else the first waiter gets it, in the order of the passes'
    keys: deeper nested passes first, then earliest due, then arrival (Note
    [Fair scheduling] and Note [Deadlines] in ``graph_task.py``; an expired
    pass starts no node when its turn comes). So on the loop too no pass
    waits behind one that arrived after it with the same kind of due time,
    and a pass with an earlier deadline waits for at most one slice. The
    waiter handed the turn runs on the loop's next pass. With nobody
    waiting, the turn is freed on the loop's next pass (``call_soon``), not
    at once: the coroutines resumed in this pass then wait for a turn
    instead of each running a slice in it. So the loop runs at most two
    slices per pass (one handed on or kept, one started at once), and a
    timer is late by at most those and the coroutines' own steps, whatever
    the number of passes. Running every pass in its caller's step instead
    made one loop pass run them all: on the service benchmark (64 requests,
    forward on the loop) heartbeat lag up to 187 ms.
    ``InlineTurns`` is per loop (``LoopLocal``) and touched only on
    its thread. ``stats().per_worker["loop"]`` reports these passes, of every
    loop together: waiting for their first turn, running, and the queue wait
    and run time of the latest finished ones.

Note [Admitting passes]
    Building a pass (checking the arguments, the root gradients, the
    GraphTask, the inline test, its start) costs about 0.1 ms of the loop
    thread. When many coroutines call ``await backward()``/``grad()`` in
    one loop pass (64 clients of a service that start together), building
    every pass in its caller's step made that loop pass run all of them
    after the callers' own forwards: 6 ms more that a timer waited. So an
    async top-level pass is first admitted: at most ``ADMIT_PER_PASS``
    passes are built per loop pass; later callers wait in arrival order,
    and each following loop pass admits the next ``ADMIT_PER_PASS`` of
    them (the loop's timers and I/O run in between). In steady use fewer
    passes than that arrive per loop pass and none waits. A waiting pass
    has no GraphTask yet: it waits behind at most the passes that called
    before it, for their building only (not their nodes), and cancelling
    it leaves nothing behind. Nested passes (called from a node) are not
    gated. ``PassAdmission`` is per loop (``LoopLocal``), loop thread only.

"""

from __future__ import annotations

import contextvars
import functools
import heapq
import inspect
import math
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import anyio

from ..devices import CPU
from ..grad_mode import _anomaly, _grad_enabled
from ..graph._node import AccumulateGrad, GraphRoot, Node
from . import _observe
from ._bridge import LocalEvent, LoopLocal, LoopSignal, call_soon, running_loop_library
from .executors import _route_worker_warnings, _tls, has_queued_work, replay_warnings
from .graph_task import GraphTask, checkpoint_valid, current_graph_task
from .input_buffer import stash_current_streams, sync_leaf_streams
from .ready_queue import ReadyQueue, _ticket

if TYPE_CHECKING:
    import weakref

    from ..devices import Device
    from .executors import ReentrantPool, Worker

INLINE_MAX_NODES = 64
INLINE_MAX_ELEMENTS = 1 << 15
NO_DEADLINE_HORIZON = 1.0
#: Top-level async passes built per loop pass (Note [Admitting passes]).
ADMIT_PER_PASS = 8
_heappush = heapq.heappush
_perf_counter = time.perf_counter

multithreading_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiograd_multithreading_enabled", default=True
)


class AsyncDriver:
    """The awaiting side of a GraphTask: sleeps on an event, runs async jobs.

    ``submit`` may be called from any thread; jobs (async callables) run in
    a task group on the driver's loop. A job submitted by a nested sync
    GraphTask (an ``async def`` backward inside a ``backward_sync``) runs
    here too: the driver is the ``port`` of every task it started.
    """

    def __init__(self) -> None:
        self.inbox: deque[Callable[[], Any]] = deque()
        self.signal = LoopSignal()
        #: thread-safe: wakes ``serve``
        self.wake = self.signal.set

    def finished(self) -> None:
        """The GraphTask's waker (thread-safe). Note [Batched wake-ups]."""
        self.signal.set(batch=has_queued_work())

    def submit(self, job: Callable[[], Any]) -> None:
        self.inbox.append(job)
        self.wake()

    async def serve(self, gt: GraphTask) -> None:
        """Run submitted jobs until ``gt`` is finished (Note [Completion]).

        The task group for the jobs is opened only when the first one arrives:
        most backward passes have no async node and just sleep until woken.
        """
        while not self.inbox:
            if gt.finished:
                return
            await self._sleep()
        async with anyio.create_task_group() as tg:
            while True:
                while self.inbox:
                    tg.start_soon(self.inbox.popleft())
                if gt.finished:
                    break
                await self._sleep()

    async def _sleep(self) -> None:
        await self.signal.wait()
        self.signal.clear()


class InlineTurns:
    """The turns of the passes run on one loop thread (Note [Inline passes take turns]).

    Invariant: ``holder`` is None (free), the signal of the pass whose turn it
    is, or ``_FREEING`` (free from the loop's next pass on); waiters are queued
    only while it is not None. Loop thread only.
    """

    __slots__ = ("holder", "_waiting")

    def __init__(self) -> None:
        self.holder: LocalEvent | object | None = None
        #: [key, ticket, signal or None once its waiter left]
        self._waiting: list[list[Any]] = []

    async def acquire(self, key: int, signal: LocalEvent) -> bool:
        """Return when it is ``signal``'s pass's turn (``key``: its ReadyQueue key base):
        True if it waited for it (the loop ran meanwhile), False if it had it at once."""
        if self.holder is None:
            self.holder = signal
            return False
        entry = [key, next(_ticket), signal]
        _heappush(self._waiting, entry)
        try:
            while self.holder is not signal:
                await signal.wait()
                signal.clear()
        except BaseException:
            if self.holder is signal:  # handed over, then cancelled: hand it on
                self.release(signal, key, False)
            else:
                entry[2] = None
            raise
        return True

    def release(self, signal: LocalEvent, key: int, more: bool) -> bool:
        """The holder's slice ended. True if its pass (``more``: it has nodes ready) keeps
        the turn: nothing waiting outranks ``key``. Else the next waiter's turn, or
        (nobody waiting) a free turn, from the loop's next pass on."""
        waiting = self._waiting
        while waiting and waiting[0][2] is None:  # waiters that left
            heapq.heappop(waiting)
        if more and (not waiting or key < waiting[0][0]):
            return True
        if not self._hand_on():
            self.holder = _FREEING
            call_soon(self._free)
        return False

    def _hand_on(self) -> bool:
        """Give the turn to the first waiter still waiting (it runs on the loop's next
        pass); False if there is none."""
        waiting = self._waiting
        while waiting:
            signal = heapq.heappop(waiting)[2]
            if signal is not None:
                self.holder = signal
                signal.set()
                return True
        return False

    def _free(self) -> None:
        if self.holder is _FREEING:
            self.holder = None
            self._hand_on()


_FREEING = object()
#: the turns of each loop thread's passes
inline_turns = LoopLocal("aiograd_inline_turns", InlineTurns).get


class PassAdmission:
    """How many passes one loop thread builds per loop pass (Note [Admitting passes]).

    Invariant: ``admitted`` counts the passes let in since the last ``_next_pass``,
    and a ``_next_pass`` is queued on the loop (``scheduled``) whenever passes were
    let in since or callers wait; an admitted waiter queues it when it resumes, so a
    ``_next_pass`` never queues the next itself (Trio runs callbacks queued by a
    callback in the same loop pass). Loop thread only.
    """

    __slots__ = ("admitted", "scheduled", "_waiting")

    def __init__(self) -> None:
        self.admitted = 0
        self.scheduled = False
        self._waiting: deque[LocalEvent] = deque()

    async def enter(self) -> None:
        """Return when the caller may build its pass: at once, or on a later loop pass."""
        self._schedule()
        if self.admitted < ADMIT_PER_PASS and not self._waiting:
            self.admitted += 1
            return
        signal = LocalEvent()
        self._waiting.append(signal)
        try:
            await signal.wait()
        except BaseException:
            if signal.is_set:  # admitted, then cancelled: its place goes to the next
                self._admit(1)
            else:
                self._waiting.remove(signal)
            self._schedule()
            raise
        self._schedule()

    def _schedule(self) -> None:
        if not self.scheduled:
            self.scheduled = True
            call_soon(self._next_pass)

    def _next_pass(self) -> None:
        self.scheduled = False
        self.admitted = 0
        self._admit(ADMIT_PER_PASS)

    def _admit(self, n: int) -> None:
        waiting = self._waiting
        for _ in range(min(n, len(waiting))):
            self.admitted += 1
            waiting.popleft().set()


pass_admission = LoopLocal("aiograd_pass_admission", PassAdmission).get


class _InlinePort:
    """Collects async jobs of a GraphTask driven inline (multithreading disabled)."""

    def __init__(self) -> None:
        self.jobs: deque[Callable[[], Any]] = deque()

    def submit(self, job: Callable[[], Any]) -> None:
        self.jobs.append(job)


class _BackgroundLoop:
    """An event loop thread for async nodes of tasks that no loop awaits."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever,
                                       name="aiograd-async", daemon=True)
        self.thread.start()

    def submit(self, job: Callable[[], Any]) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(job(), self.loop)

    def stop(self, timeout: float) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)


class Drivers:
    """The engine's caller side (a mixin of ``Engine``, whose ``_lock``, ``_live`` and
    ``_workers`` it uses): starting a GraphTask, waiting for it, what follows its
    nodes, and cancelling it with the passes nested in it."""

    # Engine's state this side uses (set by Engine.__init__; thread rules in engine.py).
    _lock: threading.Lock
    _workers: dict[Device, Worker]
    _pool: ReentrantPool
    _live: weakref.WeakSet[GraphTask]
    completed: int
    max_depth: int
    inline_max_nodes: int
    inline_max_elements: int
    no_deadline_horizon: float
    #: (queue wait, run time) of the latest finished passes run on event loops
    inline_finished: deque[tuple[float, float]]

    # The methods of Engine and of its other sides (evaluate.py, executors.py) this side
    # calls, for the type checker only (at run time, Engine finds the real ones).
    if TYPE_CHECKING:
        def _background_port(self) -> _BackgroundLoop: ...
        def device_queue(self, device: Device) -> ReadyQueue: ...
        def run_queue(self, queue: ReadyQueue, until: GraphTask | None) -> None: ...
        def _run_heap(self, queue: ReadyQueue, gt: GraphTask, heap: list[Any],
                      until: GraphTask | None) -> None: ...
        def run_slice(self, queue: ReadyQueue | None, gt: GraphTask, heap: list[Any]) -> bool: ...
        def _claim_finish(self, gt: GraphTask) -> Callable[[], None] | None: ...
        def _signal_if_done(self, gt: GraphTask) -> None: ...
        async def _run_async_node(self, gt: GraphTask, node: Node, inputs: list[Any]) -> None: ...

    def _start(self, gt: GraphTask, cpu_queue: ReadyQueue, context: contextvars.Context,
               scope_due: float = math.inf) -> None:
        now = _perf_counter()
        gt.schedule(now, scope_due, self.no_deadline_horizon)
        obs = _observe.observer
        if obs is not None:
            obs.task_start(gt.id, now)
        if not getattr(warnings.showwarning, "_aiograd_routes_jobs", False):
            _route_worker_warnings()  # again if a catch_warnings() block swapped it out
        # An observed pass runs every node through the pipeline, leaves too.
        gt.start(cpu_queue, context, check_nan=context.run(_enter_task_context, gt),
                 direct=not gt.create_graph and obs is None)
        stash_current_streams(gt)
        with self._lock:
            self._live.add(gt)

    def _submit_root(self, gt: GraphTask, queue: ReadyQueue | None,
                     heap: list[Any] | None) -> None:
        """Queue the root task: the single root node, or a GraphRoot over several roots."""
        root = gt.root_node
        inputs = gt.root_inputs
        gt.root_inputs = []
        if root.is_async:
            gt.port.submit(functools.partial(self._run_async_node, gt, root, inputs))
            return
        key = gt.key_base - root.sequence_nr
        meta = root.input_metadata
        if meta and meta[0].device is not CPU and not gt.single_thread:
            queue = self.device_queue(meta[0].device)
        elif heap is not None:
            _heappush(heap, (key, next(_ticket), gt, root, inputs))
            return
        else:
            queue = gt.cpu_queue
            assert queue is not None  # set by GraphTask.start, in _start
        queue.push(key, gt, root, inputs)

    async def admit(self) -> None:
        """Wait, if need be, until a top-level async pass may be built on this loop
        (Note [Admitting passes]); nested passes go on at once."""
        if current_graph_task.get() is None:
            await pass_admission().enter()

    async def run_async(self, gt: GraphTask, context: contextvars.Context) -> None:
        """Drive ``gt`` from a coroutine; returns when all nodes ran or raises."""
        if not context.run(multithreading_enabled.get) or _fits_inline(
                gt.root_node, self.inline_max_nodes, self.inline_max_elements):
            await self._run_inline(gt, context)
            return
        driver = AsyncDriver()
        gt.port = driver
        gt.waker = driver.finished
        self._start(gt, self.device_queue(CPU), context, _scope_due(gt))
        self._submit_root(gt, None, None)
        try:
            await driver.serve(gt)
            await _end_if_expired_by_scope(gt)
        except BaseException:
            self._cancel_tree(gt)
            with anyio.CancelScope(shield=True):
                await driver.serve(gt)
            self._finish(gt)
            raise
        await self._finalize_async(gt)

    async def _run_inline(self, gt: GraphTask, context: contextvars.Context) -> None:
        """Run every node of ``gt`` on this (loop) thread, in order, taking turns with the
        loop's other passes (Note [Inline passes take turns])."""
        port = _InlinePort()
        gt.port = port
        gt.single_thread = True
        queue = ReadyQueue("inline")
        queue.yields = True
        queue.finished = self.inline_finished  # for stats(): Note [Inline passes take turns]
        self._start(gt, queue, context, _scope_due(gt))
        heap: list[Any] = []
        self._submit_root(gt, queue, heap)
        turns = inline_turns()
        signal: LocalEvent | None = None
        holding = False  # this pass has the turn (Note [Inline passes take turns])
        waited = False  # it waited for a turn: the caller's await was a checkpoint
        try:
            while not gt.finished:
                await _end_if_expired_by_scope(gt)
                if heap or len(queue):
                    if signal is None:
                        signal = LocalEvent()
                    if not holding:
                        waited |= await turns.acquire(gt.key_base, signal)
                        holding = True
                    if len(queue):  # the leftovers of its last slice: the same order
                        heap.extend(queue.drain())
                        heapq.heapify(heap)
                    self.run_slice(queue, gt, heap)
                    self._claim_finish(gt)
                    holding = turns.release(signal, gt.key_base,
                                            not gt.finished and bool(heap or len(queue)))
                elif port.jobs:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(port.jobs.popleft())
                else:  # pragma: no cover - would be an engine bug
                    raise RuntimeError("aiograd: inline graph task stalled")
                if waited and cast(bool, gt.finished):  # (the slice may have set it)
                    break  # no loop pass more: the loop ran while it waited
                await anyio.lowlevel.checkpoint()
            await _end_if_expired_by_scope(gt)  # its last slice found it expired
        except BaseException:
            if holding and signal is not None:
                turns.release(signal, gt.key_base, False)
            self._cancel_tree(gt)
            heap.clear()
            self._finish(gt)
            raise
        await self._finalize_async(gt)

    def run_sync(self, gt: GraphTask, context: contextvars.Context) -> None:
        """Drive ``gt`` from a blocking call (see Note [Reentrant backward])."""
        if not _tls.engine_thread and running_loop_library() is not None:
            raise RuntimeError(
                "backward_sync()/grad_sync() would block the running event loop; "
                "use 'await aiograd.backward(...)' / 'await aiograd.grad(...)' instead"
            )
        if _tls.depth >= self.max_depth:
            done = threading.Event()
            outcome: list[BaseException] = []

            def job() -> None:
                _tls.depth = 0
                try:
                    self.run_sync(gt, context)
                except BaseException as exc:  # noqa: BLE001  (handed to the waiting thread)
                    outcome.append(exc)
                finally:
                    _tls.queue = None
                    done.set()

            self._pool.run(job)
            done.wait()
            if outcome:
                raise outcome[0]
            return
        queue = _tls.queue
        if queue is None:
            queue = _tls.queue = ReadyQueue(threading.current_thread().name)
        gt.single_thread = not context.run(multithreading_enabled.get)
        parent = gt.parent
        gt.port = parent.port if parent is not None and parent.port is not None else None
        gt.waker = queue.wake
        self._start(gt, queue, context)
        if gt.port is None:
            gt.port = _LazyBackgroundPort(self)
        heap: list[Any] = []
        self._submit_root(gt, queue, heap)
        _tls.depth += 1
        try:
            if heap:  # a CPU root: its first slice runs right away, without queueing it
                self._run_heap(queue, gt, heap, gt)
            self.run_queue(queue, gt)
        except BaseException:
            self._cancel_tree(gt)
            self.run_queue(queue, gt)
            self._finish(gt)
            raise
        finally:
            _tls.depth -= 1
        self._finalize_sync(gt)

    # ---- after the nodes: callbacks, streams, result (seed exec_post_processing) ----

    def _post_processing(self, gt: GraphTask) -> Iterator[Any]:
        """After the nodes (seed ``exec_post_processing``): checks, leaf streams, then the
        final callbacks in order (they may queue more). Yields each awaitable a callback
        returns, for the driver to wait on; stops at the first error (kept on ``gt``)."""
        if gt.error is None and not gt.cancelled and gt.not_ready:
            gt.fail(RuntimeError("could not compute gradients for some functions"))
        if gt.error is None:
            sync_leaf_streams(gt)  # before the callbacks: they may read the gradients
        context = gt.context
        assert context is not None  # set by GraphTask.start; released by _finish, after this
        while gt.error is None and gt.final_callbacks:
            with gt.lock:
                callback = gt.final_callbacks.pop(0)
            try:
                result = context.copy().run(callback)
            except BaseException as exc:  # noqa: BLE001  (raised by _raise_or_return)
                gt.fail(exc)
                return
            if inspect.isawaitable(result):
                yield result

    def _finalize_sync(self, gt: GraphTask) -> None:
        try:
            for awaitable in self._post_processing(gt):
                try:
                    _run_coroutine_blocking(self, gt, awaitable)
                except BaseException as exc:  # noqa: BLE001  (raised by _raise_or_return)
                    gt.fail(exc)
        finally:
            self._finish(gt)
        self._raise_or_return(gt)

    async def _finalize_async(self, gt: GraphTask) -> None:
        try:
            for awaitable in self._post_processing(gt):
                try:
                    await _await_in_context(gt, awaitable)
                except anyio.get_cancelled_exc_class():
                    raise
                except BaseException as exc:  # noqa: BLE001  (raised by _raise_or_return)
                    gt.fail(exc)
        finally:
            self._finish(gt)
        self._raise_or_return(gt)

    def _finish(self, gt: GraphTask) -> None:
        """Release the task's buffers and state; count it as completed."""
        gt.not_ready = {}
        gt.dependencies = {}
        gt.final_callbacks = []
        gt.root_node = None  # type: ignore[assignment]
        gt.roots = []
        gt.context = None
        gt.waker = None
        with self._lock:
            if gt in self._live:
                self._live.discard(gt)
                self.completed += 1
        queue = gt.cpu_queue
        if gt.started is not None and queue is not None:  # a pass that ran on an executor
            queue.finished.append((gt.started - gt.arrival, gt.run_time))
        obs = _observe.observer
        if obs is not None:
            obs.task_end(gt.id, _perf_counter(), gt.error)
        replay_warnings(gt.warnings)
        gt.warnings = []

    def _raise_or_return(self, gt: GraphTask) -> None:
        error = gt.error
        if error is not None:
            gt.error = None  # do not keep the traceback (and its frames) alive via gt
            raise error

    def _cancel_tree(self, gt: GraphTask) -> None:
        """Cancel ``gt`` and every live GraphTask nested in it; drop their queued tasks."""
        tasks = [gt]
        with self._lock:
            live = list(self._live)
        for other in live:
            parent = other.parent
            while parent is not None:
                if parent is gt:
                    tasks.append(other)
                    break
                parent = parent.parent
        queues = [w.queue for w in list(self._workers.values())]
        for task in tasks:
            task.cancel()
            for q in {*queues, task.cpu_queue}:
                if q is not None:
                    dropped = q.discard(task)
                    if dropped:
                        task.retire(dropped)
            self._signal_if_done(task)


class _LazyBackgroundPort:
    """The port of a sync task with no awaiting ancestor: the background loop."""

    def __init__(self, engine: Drivers) -> None:
        self.engine = engine

    def submit(self, job: Callable[[], Any]) -> None:
        self.engine._background_port().submit(job)


def _fits_inline(root: Node, max_nodes: int, max_elements: int) -> bool:
    """True if the graph below ``root`` may run on the loop (Note [Inline small graphs]).

    A graph deeper than the node limit is turned down without a walk: its
    longest path alone has ``topological_nr + 1`` nodes."""
    if root.topological_nr >= max_nodes:
        return False
    seen = {root}
    stack = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        safe = _INLINE_SAFE_TYPES.get(kind)
        if safe is None:
            safe = _INLINE_SAFE_TYPES[kind] = (
                kind.__module__.startswith("aiograd._ops.") or kind in (AccumulateGrad, GraphRoot)
            )
        if not safe or node.has_hooks or node._metadata:  # an AccumulateGrad's: its leaf's too
            return False
        if type(node) is AccumulateGrad and node.variable is None:
            return False
        elements = 0
        for meta in node.input_metadata:
            if meta.device is not CPU:
                return False
            elements += math.prod(meta.shape)
        if elements > max_elements:
            return False
        for edge in node.next_edges:
            if edge is not None and edge[0] not in seen:
                if len(seen) >= max_nodes:
                    return False
                seen.add(edge[0])
                stack.append(edge[0])
    return True


_INLINE_SAFE_TYPES: dict[type, bool] = {}


def _scope_due(gt: GraphTask) -> float:
    """The deadline of the caller's cancel scopes on the ``perf_counter`` clock, or inf
    (Note [Deadlines]). anyio's clock may be offset (Trio's is): only the time left
    counts. A nested pass is due with its parent (asking the scopes of a deeply
    nested await costs a walk of them all)."""
    if gt.parent is not None:
        return gt.parent.due
    deadline = anyio.current_effective_deadline()
    if deadline == math.inf:
        return deadline
    return _perf_counter() + (deadline - anyio.current_time())


async def _end_if_expired_by_scope(gt: GraphTask) -> None:
    """If ``gt`` was stopped by its cancel scope's deadline (Note [Deadlines]): end as the
    scope says. The scope cancels this wait when its own clock reaches the deadline: at
    once, or as soon as that clock catches up with the engine's."""
    if gt.due_by_scope and isinstance(gt.error, TimeoutError) and gt.due <= _perf_counter():
        gt.error = None
        await anyio.sleep_forever()


def _enter_task_context(gt: GraphTask) -> bool:
    """Set, inside the task's context, what its nodes see. Returns True if anomaly
    mode checks gradients for NaN there."""
    parent_valid = checkpoint_valid.get()
    current_graph_task.set(gt)
    _grad_enabled.set(gt.create_graph)
    checkpoint_valid.set(parent_valid and gt.outputs is None)
    return _anomaly.get() == (True, True)


async def _await_in_context(gt: GraphTask, awaitable: Any) -> None:
    """Await an async final callback in a child task that sees the task's context.

    Its exception is re-raised as is (not wrapped in an exception group).
    """
    errors: list[BaseException] = []
    context = gt.context
    assert context is not None  # set by GraphTask.start; released by _finish, after this

    async def run() -> None:
        for var, value in context.items():
            var.set(value)
        try:
            await awaitable
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # noqa: BLE001  (re-raised below, unwrapped)
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
    if errors:
        raise errors[0]


def _run_coroutine_blocking(engine: Drivers, gt: GraphTask, awaitable: Any) -> None:
    """Run an async final callback of a sync task on its port and wait for it."""
    done = threading.Event()
    errors: list[BaseException] = []
    context = gt.context
    assert context is not None  # set by GraphTask.start; released by _finish, after this

    async def job() -> None:
        try:
            for var, value in context.items():
                var.set(value)
            await awaitable
        except BaseException as exc:  # noqa: BLE001  (handed to the waiting thread)
            errors.append(exc)
        finally:
            done.set()

    port = gt.port if gt.port is not None else engine._background_port()
    port.submit(job)
    done.wait()
    if errors:
        raise errors[0]


