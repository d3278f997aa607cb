"""backward() and grad(): the public entry points (seed ``python_engine.cpp`` run_backward).

The awaitable forms are the primitive; the ``*_sync`` forms drive the same
GraphTask from a blocking call and are meant for scripts and for sync
backward functions (reentrant backward). Both validate their arguments here,
on the caller's thread, so bad input fails fast with a clear message.
"""

from __future__ import annotations

import contextvars
import functools
import numbers
from collections.abc import Awaitable, Callable
from typing import Any

import numpy

from ._await_check import Finished, FinishedGrads, track
from ._boundary import naming
from ._tensor import Tensor, zeros_like
from ._warn import warn_user
from .engine import engine as _engine_mod
from .engine._bridge import running_loop_library
from .engine.drivers import multithreading_enabled
from .engine.graph_task import GraphTask
from .engine.input_buffer import CURRENT_STREAM, accumulate
from .engine.validate import plain_grads, validate_outputs
from .graph._context import checkpoint_valid, current_graph_task
from .graph._node import GradientEdge, GraphRoot, Node, gradient_edge

__all__ = [
    "backward",
    "backward_sync",
    "grad",
    "grad_sync",
    "queue_callback",
    "is_checkpoint_valid",
    "set_multithreading_enabled",
    "current_graph_task_id",
    "current_graph_task_execution_order",
]

_Edge = tuple[Node, int]

_CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak."
)


_create_graph_warned = False  # the warning above is given once per process (PyTorch's)


def _warned_once() -> None:
    global _create_graph_warned
    _create_graph_warned = True


def _tensor_seq(value: Any, name: str, call: str) -> list[Tensor]:
    """The outputs to differentiate: Tensors, or GradientEdges (as stand-ins, ``_edge_output``)."""
    if isinstance(value, (Tensor, GradientEdge)):
        value = [value]
    if isinstance(value, (tuple, list)):
        items = list(value)
        for i, t in enumerate(items):
            if isinstance(t, GradientEdge):
                items[i] = _edge_output(t)
            elif not isinstance(t, Tensor):
                raise TypeError(
                    f"{call}(): {name} must be a Tensor, a GradientEdge or a sequence "
                    "of them; element "
                    f"{i} is a {type(t).__name__}"
                )
        return items
    raise TypeError(
        f"{call}(): {name} must be a Tensor, a GradientEdge or a sequence of them, got "
        f"{type(value).__name__}"
    )


def _edge_output(edge: GradientEdge) -> Tensor:
    """A tensor standing for the output whose gradient enters the graph at ``edge``:
    its history is the edge, its array a zero-strided broadcast of the node's input
    metadata (its shape, dtype and device, never read)."""
    node, nr = edge.node, edge.output_nr
    if not isinstance(node, Node) or not 0 <= nr < len(node.input_metadata):
        raise TypeError(f"{edge!r} does not point at an input of its node")
    meta = node.input_metadata[nr]
    xp = meta.device.xp
    out = Tensor._wrap(xp.broadcast_to(xp.zeros((), dtype=meta.dtype), meta.shape), meta.device)
    out.grad_fn, out.output_nr, out._rg = node, nr, True
    return out


def _grad_seq(value: Any, n: int, name: str) -> list[Any]:
    if value is None:
        return [None] * n
    if isinstance(value, Tensor):
        items: list[Any] = [value]
    elif isinstance(value, (tuple, list)):
        items = list(value)
    else:
        raise TypeError(
            f"{name} must be a Tensor, a sequence of Tensors (or None), or None; got "
            f"{type(value).__name__}"
        )
    if len(items) != n:
        raise ValueError(
            f"{name} has {len(items)} element(s) but there are {n} output tensor(s); "
            "pass one gradient (or None) per output"
        )
    return items


def _make_grads(outputs: list[Tensor], grads: list[Any], create_graph: bool,
                name: str) -> list[Any]:
    """The root gradients (seed ``_make_grads``): given, or ones for scalar outputs."""
    result = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if out._rg:
                data = out.data
                if data.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if data.dtype.kind != "f":
                    raise RuntimeError(
                        "grad can be implicitly created only for real scalar outputs but got "
                        f"{data.dtype}"
                    )
                if type(data) is numpy.ndarray:  # numpy.ones_like, without its Python code
                    ones = numpy.empty(data.shape, data.dtype)
                    ones.fill(1)
                else:
                    ones = out.device.xp.ones_like(data)
                g = Tensor._wrap(ones, out.device) if create_graph else ones
            result.append(g)
            continue
        if isinstance(g, numbers.Number) or not isinstance(g, Tensor):
            raise TypeError(
                f"{name}[{i}] must be a Tensor or None, got {type(g).__name__}"
            )
        if g.shape != out.shape:
            raise RuntimeError(
                f"Mismatch in shape: {name}[{i}] has a shape of {tuple(g.shape)} and "
                f"output[{i}] has a shape of {tuple(out.shape)}."
            )
        if g.device is not out.device:
            raise RuntimeError(
                f"{name}[{i}] is on {g.device} but output[{i}] is on {out.device}; "
                "move the gradient to the output's device"
            )
        if g.dtype.kind not in "fiub":
            raise TypeError(f"{name}[{i}] has unsupported dtype {g.dtype}")
        result.append(g if create_graph else g.data)
    return result


def _input_edges(inputs: Any, *, for_backward: bool) -> list[_Edge | None]:
    if isinstance(inputs, (Tensor, GradientEdge)):
        inputs = [inputs]
    elif not isinstance(inputs, (tuple, list)):
        raise TypeError(
            f"inputs must be a Tensor, a GradientEdge or a sequence of them, got "
            f"{type(inputs).__name__}"
        )
    if not inputs:
        if for_backward:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        raise ValueError("grad requires non-empty inputs.")
    edges: list[_Edge | None] = []
    for i, t in enumerate(inputs):
        if isinstance(t, GradientEdge):
            edges.append((t.node, t.output_nr))
            continue
        if not isinstance(t, Tensor):
            raise TypeError(
                "all inputs have to be Tensors or GradientEdges, but got "
                f"{type(t).__name__} at index {i}"
            )
        if not t._rg:
            raise RuntimeError(
                f"One of the differentiated Tensors does not require grad (input {i})"
            )
        if t.grad_fn is not None:
            if for_backward:
                t.retain_grad()
            edges.append((t.grad_fn, t.output_nr))
        else:
            acc = t._accumulator  # None: the leaf was never used in a graph
            edges.append(None if acc is None else (acc, 0))
    return edges


def _make_task(
    tensors: Any,
    grad_tensors: Any,
    retain_graph: bool | None,
    create_graph: bool,
    inputs: Any,
    *,
    accumulate_grad: bool,
    names: tuple[str, str],
    call: str,
    deadline: float | None,
) -> tuple[GraphTask, contextvars.Context]:
    """The GraphTask of a ``call`` (backward, grad, ...) and its context, its arguments
    checked. Called inside ``naming(call)`` (Note [Errors at the public boundary])."""
    if not isinstance(create_graph, bool):
        raise TypeError(f"create_graph must be a bool, got {type(create_graph).__name__}")
    if retain_graph is not None and not isinstance(retain_graph, bool):
        raise TypeError(f"retain_graph must be a bool or None, got {type(retain_graph).__name__}")
    outputs = _tensor_seq(tensors, names[0], call)
    grads = _make_grads(outputs, _grad_seq(grad_tensors, len(outputs), names[1]),
                        create_graph, names[1])
    keep_graph = create_graph if retain_graph is None else retain_graph
    root_edges: list[_Edge] = []
    for i, out in enumerate(outputs):
        edge = gradient_edge(out)
        if edge is None:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        root_edges.append(edge)
    output_edges = None
    if inputs is not None:
        output_edges = _input_edges(inputs, for_backward=accumulate_grad)
    if accumulate_grad and create_graph and not _create_graph_warned:
        _warned_once()
        warn_user(_CREATE_GRAPH_WARNING)
    edges = tuple(root_edges)
    if not plain_grads(edges, grads):  # else there is nothing to check or fix
        grads = validate_outputs(GraphRoot(edges, grads), grads)
    if len(edges) == 1:
        node, input_nr = edges[0]
        buffer: list[Any] = [None] * len(node.input_metadata)
        # The root gradient was made on the caller's current stream: See Note
        # [Streaming backwards].
        accumulate(buffer, input_nr, grads[0], node, CURRENT_STREAM)
        root_node: Node = node
    else:
        root_node, buffer = GraphRoot(edges, grads), []
    parent = current_graph_task.get()
    gt = GraphTask(
        keep_graph=keep_graph,
        create_graph=create_graph,
        depth=0 if parent is None else parent.depth + 1,
        root_node=root_node,
        root_inputs=buffer,
        roots=[e[0] for e in root_edges],
        outputs=output_edges,
        accumulate_grad=accumulate_grad,
        parent=parent,
    )
    _set_deadline(gt, deadline, call)
    return gt, contextvars.copy_context()


def _results(gt: GraphTask, *, allow_unused: bool, zeros_for: list[Any] | None,
             create_graph: bool) -> tuple[Tensor | None, ...]:
    """``grad()``'s results: the captured gradients; for an unused input None, or
    zeros like it with ``materialize_grads`` (``zeros_for`` lists the inputs)."""
    out: list[Tensor | None] = []
    for i, g in enumerate(gt.captured):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior."
                )
            if zeros_for is None:
                out.append(None)
                continue
            like = zeros_for[i]
            if isinstance(like, GradientEdge):
                raise RuntimeError(
                    "materialize_grads cannot be used when the given input is a GradientEdge")
            out.append(zeros_like(like, requires_grad=create_graph))
        else:
            out.append(g if isinstance(g, Tensor) else Tensor._wrap(g))
    return tuple(out)


# ---- backward ----

def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
    *,
    deadline: float | None = None,
) -> Awaitable[None]:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves.

    ``await aiograd.backward(loss)``. Runs the graph on the device workers
    (a small graph inline: Note [Inline small graphs]); the event loop stays
    free. Cancelling the awaiting task stops the backward (see
    docs/cancellation.md). ``inputs`` restricts accumulation to those
    tensors (non-leaf inputs get ``.grad`` too). With no event loop running,
    the pass runs to completion before this returns (Note [Forgotten await]).
    ``deadline`` (a ``time.monotonic()`` time; aiograd only) orders the pass
    among others and raises TimeoutError if it passes first, as does the
    deadline of the caller's cancel scope (docs/async.md, Note [Deadlines]).
    """
    args = (tensors, grad_tensors, retain_graph, create_graph, inputs)
    if running_loop_library() is None:
        _blocking_backward("backward", *args, deadline)
        return Finished(None)
    return track(_backward_async, "backward()", *args,
                 deadline)


async def _backward_async(
    started: Callable[[], None],
    tensors: Any,
    grad_tensors: Any,
    retain_graph: bool | None,
    create_graph: bool,
    inputs: Any,
    deadline: float | None,
) -> None:
    started()
    await _engine_mod.get_engine().admit()
    with naming("backward"):
        made = _make_task(tensors, grad_tensors, retain_graph, create_graph, inputs,
                          accumulate_grad=True, names=("tensors", "grad_tensors"),
                          call="backward", deadline=deadline)
    await _engine_mod.get_engine().run_async(*made)


def backward_sync(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
    *,
    deadline: float | None = None,
) -> None:
    """Blocking :func:`backward`, for scripts and sync backward functions."""
    _blocking_backward("backward_sync", tensors, grad_tensors, retain_graph, create_graph,
                       inputs, deadline)


def _blocking_backward(call: str, tensors: Any, grad_tensors: Any, retain_graph: bool | None,
                       create_graph: bool, inputs: Any, deadline: float | None) -> None:
    """``backward_sync``, its errors naming ``call``."""
    with naming(call):
        made = _make_task(tensors, grad_tensors, retain_graph, create_graph, inputs,
                          accumulate_grad=True, names=("tensors", "grad_tensors"), call=call,
                          deadline=deadline)
    _engine_mod.get_engine().run_sync(*made)


def _set_deadline(gt: GraphTask, deadline: float | None, name: str) -> None:
    """Give ``gt`` the caller's ``deadline=`` (Note [Deadlines])."""
    if deadline is not None:
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) \
                or deadline != deadline:
            raise TypeError(f"{name}(): deadline must be a time.monotonic() time (a float) "
                            f"or None, got {deadline!r}")
        gt.deadline = float(deadline)


# ---- grad ----

def _grad_task(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool | None,
               create_graph: bool, allow_unused: bool | None, materialize_grads: bool,
               call: str, deadline: float | None
               ) -> tuple[tuple[GraphTask, contextvars.Context],
                          Callable[[GraphTask], tuple[Tensor | None, ...]]]:
    """The GraphTask of a ``grad()`` call, its context, and how to give out its results."""
    with naming(call):
        return _checked_grad_task(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                  allow_unused, materialize_grads, call, deadline)


def _checked_grad_task(outputs: Any, inputs: Any, grad_outputs: Any,
                       retain_graph: bool | None, create_graph: bool,
                       allow_unused: bool | None, materialize_grads: bool, call: str,
                       deadline: float | None
                       ) -> tuple[tuple[GraphTask, contextvars.Context],
                                  Callable[[GraphTask], tuple[Tensor | None, ...]]]:
    if allow_unused is not None and not isinstance(allow_unused, bool):
        raise TypeError(f"allow_unused must be a bool, got {type(allow_unused).__name__}")
    if not isinstance(materialize_grads, bool):
        raise TypeError(
            f"materialize_grads must be a bool, got {type(materialize_grads).__name__}")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if inputs is None:
        raise TypeError(f"{call}() missing required argument 'inputs'")
    made = _make_task(outputs, grad_outputs, retain_graph, create_graph, inputs,
                      accumulate_grad=False, names=("outputs", "grad_outputs"), call=call,
                      deadline=deadline)
    zeros_for = None
    if materialize_grads:  # the zeros of unused inputs stand for their gradients
        zeros_for = [inputs] if isinstance(inputs, (Tensor, GradientEdge)) else list(inputs)
    unused_ok = bool(allow_unused or materialize_grads)
    return made, functools.partial(_results, allow_unused=unused_ok, zeros_for=zeros_for,
                                   create_graph=create_graph)


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
    *,
    deadline: float | None = None,
) -> Awaitable[tuple[Tensor | None, ...]]:
    """The gradients of ``outputs`` with respect to ``inputs`` (``.grad`` is not touched).

    ``await aiograd.grad(...)``. An input the outputs do not depend on
    raises, or with ``allow_unused`` gets None, or with ``materialize_grads``
    zeros (requiring grad under ``create_graph``), as in PyTorch. With no
    event loop running, the pass runs before this returns, and the result is
    the tuple of gradients itself, also awaitable (Note [Forgotten await]).
    ``deadline``: as :func:`backward`'s.
    """
    args = (outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
            materialize_grads)
    if running_loop_library() is None:
        return FinishedGrads(_blocking_grad("grad", *args, deadline))
    return track(_grad_async, "grad()", *args, deadline)


async def _grad_async(
    started: Callable[[], None],
    outputs: Any,
    inputs: Any,
    grad_outputs: Any,
    retain_graph: bool | None,
    create_graph: bool,
    allow_unused: bool | None,
    materialize_grads: bool,
    deadline: float | None,
) -> tuple[Tensor | None, ...]:
    started()
    await _engine_mod.get_engine().admit()
    (gt, ctx), results = _grad_task(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                    allow_unused, materialize_grads, "grad", deadline)
    await _engine_mod.get_engine().run_async(gt, ctx)
    return results(gt)


def grad_sync(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
    *,
    deadline: float | None = None,
) -> tuple[Tensor | None, ...]:
    """Blocking :func:`grad`."""
    return _blocking_grad("grad_sync", outputs, inputs, grad_outputs, retain_graph,
                          create_graph, allow_unused, materialize_grads, deadline)


def _blocking_grad(call: str, outputs: Any, inputs: Any, grad_outputs: Any,
                   retain_graph: bool | None, create_graph: bool, allow_unused: bool | None,
                   materialize_grads: bool, deadline: float | None) -> tuple[Tensor | None, ...]:
    """``grad_sync``, its errors naming ``call``."""
    (gt, ctx), results = _grad_task(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                    allow_unused, materialize_grads, call, deadline)
    _engine_mod.get_engine().run_sync(gt, ctx)
    return results(gt)


# ---- engine hooks ----

def queue_callback(callback: Any) -> None:
    """Run ``callback()`` after all nodes of the current backward, before it returns.

    Only valid inside a backward (a hook or a backward function). Callbacks
    run in the order queued; they may queue more; an ``async def`` callback
    is awaited on the caller's loop. An exception in one fails the backward.
    """
    if not callable(callback):
        raise TypeError(
            f"queue_callback(): callback must be callable, got {type(callback).__name__}")
    gt = current_graph_task.get()
    if gt is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    with gt.lock:
        gt.final_callbacks.append(callback)


def is_checkpoint_valid() -> bool:
    """False inside a backward started by ``grad()``-style calls with ``inputs``."""
    return checkpoint_valid.get()


def current_graph_task_id() -> int:
    """The id of the GraphTask running the current node, or -1 outside backward."""
    gt = current_graph_task.get()
    return -1 if gt is None else gt.id


def current_graph_task_execution_order() -> list[Node]:
    """The order in which the current GraphTask runs its nodes (multithreading disabled).

    As the seed's ``get_current_graph_task_execution_order``: simulated from
    the dependencies, highest sequence_nr first.
    """
    import heapq

    gt = current_graph_task.get()
    if gt is None:
        return []
    if not gt.single_thread:
        raise RuntimeError(
            "current_graph_task_execution_order expects the current backward to be executed "
            "with multithreading disabled, e.g. by running:\n\n"
            "    with aiograd.set_multithreading_enabled(False):\n"
            "        await aiograd.grad(...)"
        )
    deps = dict(gt.dependencies or {})
    info = gt.exec_info
    heap = [(-n.sequence_nr, i, n) for i, n in enumerate(gt.roots)]
    heapq.heapify(heap)
    out: list[Node] = []
    tie = len(heap)
    while heap:
        _, _, fn = heapq.heappop(heap)
        out.append(fn)
        for edge in fn.next_edges:
            if edge is None:
                continue
            child = edge[0]
            if info is not None and not info.get(child):
                continue
            if child not in deps:
                continue
            deps[child] -= 1
            if deps[child] == 0:
                del deps[child]
                tie += 1
                heapq.heappush(heap, (-child.sequence_nr, tie, child))
    return out


class set_multithreading_enabled:
    """Enable/disable running backward on device workers (callable and context manager).

    Disabled, a backward runs every node on the calling thread in PyTorch's
    deterministic order; ``await backward()`` then runs them on the loop thread.
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_multithreading_enabled expects a bool, got {type(mode).__name__}")
        self.mode = mode
        self._prev = multithreading_enabled.get()
        multithreading_enabled.set(mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        multithreading_enabled.set(self._prev)
