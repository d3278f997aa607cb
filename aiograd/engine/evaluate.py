"""The evaluation of a GraphTask slice: the per-node pipeline.

One slice: an executor runs ready nodes of one GraphTask from a private
heap (``Evaluator.run_slice``), each through one pipeline (seed
``evaluate_function``/``call_function``): captures for ``grad()`` inputs,
tensor pre-hooks, retains-grad hooks, pre-hooks, the function (on its
forward stream), release of saved tensors, validation, post-hooks, the
anomaly NaN check, then routing (``_route``): dependency counts, input
buffers, and dispatch of the nodes that became ready. A node without hooks,
stream or NaN check (``Node.has_hooks``, Note [Has-hooks flag] in
``graph/_node.py``) takes the fast path of that pipeline, inlined in
``_drain``; every other node goes through ``_evaluate``.

Thread rules: a slice runs on the executor that popped it (a device worker,
a pool thread, a thread in ``backward_sync``, or the loop thread for an
inline pass), inside a copy of the caller's context; ``_run_async_node``
runs on the driver's event loop. Several executors may run nodes of one
GraphTask at once (one per device): what they share of it (dependencies,
buffers, the counts of Note [Completion]) they touch under ``gt.lock`` or
through GraphTask's methods; the heap is the executor's own; a node's
hooks and function run without any engine lock held.

Note [Time slices]
    A worker runs the ready nodes of one GraphTask from a private heap,
    without locking its queue, for at most ``SLICE_SECONDS``; then, if
    what waits first on its queue outranks the task (Note [Fair scheduling]
    in ``graph_task.py``), it puts the rest back there, where the deeper or
    earlier-due task comes first (otherwise it goes on). A slice on an
    event loop always ends there (Note [Inline passes take turns] in
    ``drivers.py``). Before each node it
    checks the task's due time too (Note [Deadlines]).
    So per-node work takes no queue lock and no loop round-trip.
    The event loop gets the GIL back through CPython's forced switching: a
    thread that waits for the GIL longer than the switch interval makes the
    holder hand it over. A voluntary release (``time.sleep(0)``) does not
    hand it over reliably and, on a busy machine, gives the CPU away to other
    processes. The switch interval (the interpreter's 5 ms by default)
    bounds how long a worker running Python code keeps a waiting loop off
    the GIL, unless the worker drops the GIL for moments (Note [Giving the
    loop its turn]). The interval is process-wide, so the engine leaves it
    alone unless the user opts in: ``aiograd.engine.set_switch_interval``
    or ``AIOGRAD_SWITCH_INTERVAL`` (seconds, applied when the first worker
    starts); 1 ms (``SWITCH_INTERVAL``) is the value the service benchmark
    was tuned with (docs/async.md gives the trade-off).


Note [Direct accumulation]
    A leaf's AccumulateGrad sorts before every other node of its task (its
    sequence number is the largest), so when it becomes ready it would be
    popped next. When nothing runs around it (no hook on the node or the
    leaf, no ``inputs=``/``grad()`` captures, no ``create_graph``, a CPU
    gradient, no other gradient waiting in a buffer for it) and this thread
    is the task's CPU executor (where the node would run), ``_route`` adds
    the gradient into ``.grad`` right there instead, in edge order, without
    a heap push and pop and the per-node steps: the same order and result,
    less work per parameter. A gradient nobody else references still
    becomes ``.grad`` without a copy (``_ROUTED_REFS``, Note [Stealing
    gradients]).

Note [Device fast paths]
    A node of a device with streams pays, on the full path, for a stream guard,
    ``validate_outputs``, a device lookup per gradient and the general stream
    sync of ``accumulate`` (issue 22). Each has a fast path with the same
    result, taken only when it provably changes nothing:

    - the chain shortcut of ``_route`` (and the private heap) on every
      executor, device workers included: the node made ready is returned when
      its executor is this one (``_queue_of``) and it would be popped next;
    - no stream guard when the node's stream is already current on its
      device: on the device's own worker (``_tls.home``, which runs inside
      that device's guard for its life) outside nested drives (a node driving
      a nested backward may have made another device or stream current), if
      ``current_stream`` is the node's stream. Such a node without hooks or
      NaN check takes the inline path of ``_drain``;
    - ``plain_grads``: a gradient of exactly its backend's ``array_type``, of
      the expected shape, dtype and device index, needs no validation;
      anything else (a Tensor, a subclass, another shape, dtype or device)
      still goes through ``validate_outputs``;
    - ``device_of_array`` finds the backend of an array of exactly a
      backend's ``array_type`` with one dict lookup;
    - ``accumulate``: producer and consumer on one stream of the gradient's
      device (case 2 of Note [Streaming backwards] with nothing to wait for)
      skip ``_sync``.

    Every multi-stream case (another stream, another device, the caller's
    current stream) keeps its full path.

"""

from __future__ import annotations

import functools
import heapq
import math
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import numpy

from ..devices import CPU, Device
from ..graph._node import AccumulateGrad, Node
from . import _observe
from . import hooks as _hooks
from .drivers import AsyncDriver
from .executors import _tls
from .graph_task import GraphTask
from .input_buffer import _same, accumulate, node_stream
from .ready_queue import ReadyQueue, _ticket
from .validate import plain_grads, validate_outputs

SLICE_SECONDS = 0.002
_ndarray = numpy.ndarray
# References to a gradient only the engine holds while ``_accumulate_leaves``
# adds it (Note [Direct accumulation]): the slot of the node's outputs, the
# ``leaves`` entry, the loop's local, accumulate's argument and getrefcount's.
_ROUTED_REFS = 5
_heappop = heapq.heappop
_heappush = heapq.heappush
_perf_counter = time.perf_counter


class Evaluator:
    """The engine's per-node side (a mixin of ``Engine``): a slice of a GraphTask, its
    nodes, routing their outputs, and async nodes on the driver's loop."""

    # The executor side's methods this side calls (executors.py), for the type checker
    # only (at run time, Engine finds the real ones through its bases).
    if TYPE_CHECKING:
        def device_queue(self, device: Device) -> ReadyQueue: ...
        @staticmethod
        def _turn_if_due() -> None: ...

    def run_slice(self, queue: ReadyQueue | None, gt: GraphTask, heap: list[Any]) -> bool:
        """Run ready nodes of ``gt`` from ``heap`` for one time slice (Note [Time slices]).

        Returns True if the slice ran out of time with work left (then on the queue).
        """
        if not gt.enter(len(heap)):
            heap.clear()
            return False
        start = _perf_counter()
        if gt.started is None:
            gt.started = start
        previous = _tls.warnings
        _tls.warnings = gt.warnings
        if type(gt.port) is AsyncDriver:  # a coroutine awaits gt: its loop is served
            _tls.served = gt.port.signal
        expired = False
        context = gt.context
        assert context is not None  # set by GraphTask.start; released by _finish, after the nodes
        try:
            expired = context.copy().run(self._drain, queue, gt, heap)
        except BaseException as exc:  # noqa: BLE001  (an engine bug: fail the task, not the thread)
            gt.fail(exc)
        finally:
            _tls.warnings = previous
            gt.run_time += _perf_counter() - start
            gt.leave(len(heap))
            heap.clear()
        return expired

    def _drain(self, queue: ReadyQueue | None, gt: GraphTask, heap: list[Any]) -> bool:
        """Evaluate ready nodes of ``gt`` (seed ``evaluate_function``/``call_function``).

        Each node: captures, then ``_evaluate``, or its fast path right here for a
        node without hooks, stream or NaN check, then routing. Returns True if the
        slice ran out of time with work left (pushed back on ``queue``).
        """
        if gt.dependencies is None:
            gt.prepare()
        due = gt.due  # Note [Deadlines]
        limit = due if queue is None else min(due, _perf_counter() + SLICE_SECONDS)
        # One global read per slice: with no observer the check below costs nothing
        # more per node; with one, it runs before every node (Note in _observe.py).
        obs = _observe.observer
        deadline = limit if obs is None else -math.inf
        last: tuple[Node, float, float] | None = None  # observed: (node, ready, start)
        create_graph = gt.create_graph
        release = not gt.keep_graph
        check_nan = gt.check_nan
        instrumented = gt.exec_info is not None
        # Note [Device fast paths]: on its worker, outside nested drives, a device is
        # current; a node whose stream is current too needs no stream guard.
        home = _tls.home if _tls.depth == 0 else None
        current_stream: Any = None if home is None else home.backend.current_stream
        evaluate = self._evaluate
        route = self._route
        follow: tuple[Node, list[Any]] | None = None
        ran = False  # a slice that yields runs at least one node
        try:
            while heap or follow is not None:
                if gt.stopped:
                    if follow is not None:
                        gt.retire()
                    return False
                if _perf_counter() > deadline:  # the slice ended, the pass expired, observed
                    now = _perf_counter()
                    if last is not None:
                        _report_node(obs, gt, last, now)
                        last = None
                    upcoming = heap[0][3] if follow is None else follow[0]
                    if now >= due:
                        gt.fail(gt.expired_error(upcoming))
                        continue
                    if now > limit:
                        assert queue is not None
                        head = queue.head_key()
                        if queue.yields and ran or head is not None and head < (
                                heap[0][0] if follow is None
                                else gt.key_base - upcoming.sequence_nr):
                            if follow is not None:  # outranked: back to the queue
                                heap.append((gt.key_base - upcoming.sequence_nr, next(_ticket),
                                             gt, upcoming, follow[1]))
                                follow = None
                            del upcoming
                            queue.push_many(heap)
                            heap.clear()
                            return True
                        self._turn_if_due()  # nothing waiting outranks this pass: go on
                        limit = min(due, _perf_counter() + SLICE_SECONDS)
                        if obs is None:
                            deadline = limit
                    if obs is not None:
                        last = (upcoming, gt.ready_at.pop(upcoming, gt.arrival), _perf_counter())
                    del upcoming
                if follow is None:
                    task = _heappop(heap)
                    node = task[3]
                    inputs = task[4]
                    del task
                else:
                    node, inputs = follow
                    follow = None
                try:
                    if instrumented:
                        inputs = self._instrument(gt, node, inputs)
                    if inputs is None:  # only captured, not run
                        outputs = None
                    else:
                        meta = node.input_metadata
                        stream = meta[0].stream if meta else None
                        if (stream is not None and meta[0].device is home
                                and _same(current_stream(home.index), stream)):
                            stream = None  # already current: nothing to guard
                        if node.has_hooks or check_nan or stream is not None:
                            outputs = evaluate(gt, node, inputs, stream)
                        else:  # the fast path of _evaluate
                            if inputs and inputs[0] is None and _without_grads(node, inputs):
                                outputs = (None,) * len(node.next_edges)
                            else:
                                outputs = node.apply(inputs, create_graph)
                            if release:
                                node.release_variables()
                            if not plain_grads(node.next_edges, outputs):
                                outputs = validate_outputs(node, outputs)
                except BaseException as exc:  # noqa: BLE001  (user code: goes to the caller)
                    gt.node_failed(node, exc, 1)
                    return False
                inputs = None  # Note [Stealing gradients]: hold no extra references
                ran = True
                follow = route(gt, node, outputs, queue, heap)
                outputs = None
        finally:
            if last is not None:
                _report_node(obs, gt, last, _perf_counter())
        return False

    def _evaluate(self, gt: GraphTask, node: Node, inputs: list[Any], stream: Any) -> Any:
        """The per-node pipeline (seed ``call_function``), after the captures: pre-hooks,
        the function, then ``_finish_outputs``; all inside a guard that makes ``stream``
        current unless it is None: the node's forward stream, if it has one and it is
        not current already (Note [Streaming backwards]: all of a node's work is
        queued on the stream its forward used, seed: the stream guard in
        ``evaluate_function``; Note [Device fast paths])."""
        meta = node.input_metadata
        with nullcontext() if stream is None else meta[0].device.backend.stream_guard(stream):
            if node.has_hooks:
                inputs = _hooks.call_pre_hooks(node, inputs)
            outputs: Sequence[Any]
            if inputs and inputs[0] is None and _without_grads(node, inputs):
                outputs = (None,) * len(node.next_edges)
            else:
                outputs = node.apply(inputs, gt.create_graph)
            return self._finish_outputs(gt, node, inputs, outputs)

    def _finish_outputs(self, gt: GraphTask, node: Node, inputs: list[Any], outputs: Any) -> Any:
        """After the function: release saved tensors, validate ``outputs``, post-hooks
        (their results validated), the anomaly NaN check.

        With ``grad(inputs)``/``backward(inputs=)``, the hooks see None for the
        gradients of edges the task prunes, as PyTorch's (which does not compute them).
        """
        if not gt.keep_graph:
            node.release_variables()
        if not plain_grads(node.next_edges, outputs):
            outputs = validate_outputs(node, outputs)
        if node._post_hooks:
            exec_info = gt.exec_info
            if exec_info is not None:
                outputs = [None if edge is None or edge[0] not in exec_info else grad
                           for edge, grad in zip(node.next_edges, outputs)]
            outputs = validate_outputs(node, _hooks.call_post_hooks(node, outputs, inputs))
        if gt.check_nan:
            _hooks.check_nan(node, outputs)
        return outputs

    def _instrument(self, gt: GraphTask, node: Node, inputs: list[Any]) -> list[Any] | None:
        """Captures for ``grad()`` inputs; None if the node itself must not run."""
        needed = gt.exec_info.get(node)  # type: ignore[union-attr]
        if not needed:
            inputs = _hooks.call_tensor_pre_hooks(node, inputs)
        captures = gt.captures.get(node)
        if captures:
            with gt.lock:
                for input_nr, index in captures:
                    gt.captured[index] = inputs[input_nr]
            self._record_leaf_stream(gt, node)
        return inputs if needed else None

    def _record_leaf_stream(self, gt: GraphTask, node: Node) -> None:
        meta = node.input_metadata
        if meta and meta[0].stream is not None:
            with gt.lock:
                gt.leaf_streams.add((meta[0].stream, meta[0].device))

    def _route(self, gt: GraphTask, node: Node, outputs: Any, queue: ReadyQueue | None,
               heap: list[Any] | None) -> tuple[Node, list[Any]] | None:
        """Deliver ``outputs`` along ``node``'s edges; dispatch nodes that became ready.

        Ready CPU nodes for this executor go on its private ``heap`` (no queue
        lock); others are pushed to their device's queue (Note [Time slices]).
        If exactly one node became ready, it is for this executor and it comes
        before everything on the heap, it is returned instead: the caller runs
        it next, in the same order, without a heap push and pop (a chain, or
        each branch of a ladder, then never touches the heap).
        """
        edges = node.next_edges
        if outputs is None or not edges:
            if outputs is not None:
                self._record_leaf_stream(gt, node)  # a leaf: AccumulateGrad
            gt.retire()
            return None
        exec_info = gt.exec_info
        ready = None  # the first node made ready; ``more``: the others
        more = None
        leaves = None  # (AccumulateGrad, leaf, gradient) to accumulate right here
        with gt.lock:
            deps = gt.dependencies
            not_ready = gt.not_ready
            became_ready = 0
            i = -1
            for edge in edges:
                i += 1
                if edge is None:
                    continue
                nxt, pos = edge
                count = deps.get(nxt)  # type: ignore[union-attr]
                if count == 1:
                    del deps[nxt]  # type: ignore[union-attr]
                    buffer = not_ready.pop(nxt, None)
                    if (type(nxt) is AccumulateGrad and buffer is None and exec_info is None
                            and queue is gt.cpu_queue  # a CPU node: this is its executor
                            and gt.direct):  # Note [Direct accumulation]
                        leaf = _plain_leaf(nxt, outputs[i])
                        if leaf is not None:
                            if leaves is None:
                                leaves = [(nxt, leaf, outputs[i])]
                            else:
                                leaves.append((nxt, leaf, outputs[i]))
                            continue
                elif count is None:
                    raise RuntimeError(f"dependency not found for {nxt.name()}")
                else:
                    deps[nxt] = count - 1  # type: ignore[index]
                    buffer = not_ready.get(nxt)
                if buffer is None:
                    if exec_info is not None and nxt not in exec_info:
                        continue
                    buffer = [None] * len(nxt.input_metadata)
                    if count != 1:
                        not_ready[nxt] = buffer
                grad = outputs[i]
                if type(grad) is _ndarray:  # a CPU gradient: no stream to sync
                    old = buffer[pos]
                    buffer[pos] = grad if old is None else old + grad
                elif grad is not None:  # See Note [Streaming backwards]
                    accumulate(buffer, pos, grad, nxt, node_stream(node))
                if count == 1:
                    became_ready += 1
                    if ready is None:
                        ready = (nxt, buffer)
                    elif more is None:
                        more = [(nxt, buffer)]
                    else:
                        more.append((nxt, buffer))
            if became_ready != 1:  # one: it takes the place of the task that ran
                gt.add_ready_locked(became_ready)
        if leaves is not None and not gt.stopped:
            self._accumulate_leaves(gt, leaves)
        if ready is None:
            return None
        if more is None and heap is not None:
            nxt = ready[0]
            if (not nxt.is_async and self._queue_of(gt, nxt) is queue
                    and (not heap or gt.key_base - nxt.sequence_nr < heap[0][0])):
                return ready  # it would be popped next anyway
        self._dispatch(gt, ready, queue, heap)
        if more is not None:
            for task in more:
                self._dispatch(gt, task, queue, heap)
        return None

    def _accumulate_leaves(self, gt: GraphTask, leaves: list[Any]) -> None:
        """Run AccumulateGrad nodes that became ready with nothing to call around them
        (Note [Direct accumulation]), in edge order, as the queue would have."""
        for acc, leaf, grad in leaves:
            try:
                acc.accumulate(leaf, grad, False, _ROUTED_REFS)
            except BaseException as exc:  # noqa: BLE001  (goes to the caller)
                gt.node_failed(acc, exc, 0)
                return

    def _dispatch(self, gt: GraphTask, task: tuple[Node, list[Any]], queue: ReadyQueue | None,
                  heap: list[Any] | None) -> None:
        """Send a ready node to its executor: this one's ``heap``, a queue, or the loop."""
        nxt, buffer = task
        if nxt.is_async:
            gt.port.submit(functools.partial(self._run_async_node, gt, nxt, buffer))
            return
        key = gt.key_base - nxt.sequence_nr
        target = self._queue_of(gt, nxt)
        if target is queue and heap is not None:
            _heappush(heap, (key, next(_ticket), gt, nxt, buffer))
        else:
            target.push(key, gt, nxt, buffer)

    def _queue_of(self, gt: GraphTask, node: Node) -> ReadyQueue:
        """The queue of the executor that runs ``node`` (a sync node) of ``gt``."""
        meta = node.input_metadata
        if not meta or meta[0].device is CPU or gt.single_thread:
            queue = gt.cpu_queue
            assert queue is not None  # set by GraphTask.start, before any node
            return queue
        return self.device_queue(meta[0].device)

    async def _run_async_node(self, gt: GraphTask, node: Node, inputs: list[Any]) -> None:
        """Run an ``async def`` backward on the loop, then route its outputs."""
        if not gt.enter(1):
            self._signal_if_done(gt)
            return
        context = gt.context
        assert context is not None  # set by GraphTask.start; released by _finish, after the nodes
        for var, value in context.items():
            var.set(value)
        try:
            if gt.dependencies is None:  # an async root
                gt.prepare()
            ready: list[Any] | None = inputs
            if gt.exec_info is not None:
                ready = self._instrument(gt, node, inputs)
            if ready is None:
                outputs = None
            else:
                if node.has_hooks:
                    ready = _hooks.call_pre_hooks(node, ready)
                outputs = await node.apply_async(ready, gt.create_graph)
                outputs = self._finish_outputs(gt, node, ready, outputs)
        except BaseException as exc:
            if not isinstance(exc, anyio.get_cancelled_exc_class()):
                gt.node_failed(node, exc, 1)
                return
            gt.retire()
            gt.cancel()
            raise
        else:
            try:
                self._route(gt, node, outputs, None, None)
            except BaseException as exc:  # noqa: BLE001  (an engine bug: fail the task)
                gt.fail(exc)
        finally:
            gt.leave(0)
            self._signal_if_done(gt)

    def _claim_finish(self, gt: GraphTask) -> Callable[[], None] | None:
        """Where an executor completes ``gt``: its waker if it just finished, else None
        (``GraphTask.try_finish``)."""
        return gt.try_finish()

    def _signal_if_done(self, gt: GraphTask) -> None:
        waker = self._claim_finish(gt)
        if waker is not None:
            waker()


def _report_node(obs: Any, gt: GraphTask, last: tuple[Node, float, float], end: float) -> None:
    """Tell the observer a node ran (Note in ``_observe.py``); stamp the nodes it made
    ready. ``end`` is after its outputs were routed."""
    node, ready, start = last
    deps = gt.dependencies
    if deps is not None:
        for edge in node.next_edges:
            if edge is not None and edge[0] not in deps and edge[0] not in gt.ready_at:
                gt.ready_at[edge[0]] = end
    obs.node(gt.id, node.name(), threading.current_thread().name, ready, start, end)


def _without_grads(node: Node, inputs: list[Any]) -> bool:
    """True if ``node`` is not to be called: a built-in formula, and every gradient it
    received is None (see ``Node.runs_without_grads``)."""
    return not node.runs_without_grads and all(grad is None for grad in inputs)


def _plain_leaf(acc: AccumulateGrad, grad: Any) -> Any:
    """The leaf ``acc`` may add ``grad`` into directly (Note [Direct accumulation]), or None."""
    if type(grad) is not _ndarray or acc.has_hooks:  # its hooks cover the leaf's
        return None
    return acc._variable()


