"""Nodes of the autograd graph.

A :class:`Node` is one backward function. It owns its ``next_edges`` (where
the gradients it returns go), the metadata of the gradients it receives
(``input_metadata``: shape, dtype, device and stream, used by
``validate_outputs``), its hooks, and its saved tensors.

Ownership runs one way, so reference counting alone frees a graph (see
Note [No reference cycles]):

    Tensor --grad_fn--> Node --next_edges--> Node --> ... --> AccumulateGrad --> leaf
      leaf ....weak....> AccumulateGrad

Note [No reference cycles]
    Tensors own their ``grad_fn``; nodes own the nodes they send gradients
    to and the inputs they saved. Nothing points back: a node that saves its
    own output keeps only the output's array (the tensor is rebuilt on
    unpack), an AccumulateGrad refers to its leaf weakly, and a retains-grad
    hook refers to its tensor weakly. So the last reference to a loss frees
    the whole graph at once and the cyclic collector has nothing to walk.

Note [Sequence numbers]
    Every node takes the next number of one process-wide counter when it is
    created, so numbers increase in creation order on every thread. The
    engine runs ready nodes of a GraphTask highest ``sequence_nr`` first, i.e.
    in reverse order of creation. AccumulateGrad takes ``ACCUMULATE_GRAD_NR``,
    larger than any, so a leaf's gradient is written as soon as it is ready.

Note [Has-hooks flag]
    ``Node.has_hooks`` is True whenever the node has a hook the engine must
    call around it: a tensor pre-hook, a retains-grad hook, a pre- or
    post-hook, and for an AccumulateGrad its leaf's hooks and
    post-accumulate-grad hooks. The engine reads only this flag per node, so
    a node without hooks takes the fast path of the per-node pipeline (Note
    [Time slices] in ``engine/evaluate.py``). The ``register_*`` methods set
    it; removing a hook through its handle recomputes it
    (``_hooks_removed``). It may be True with no hook left (a retains-grad
    hook moved to a new grad_fn): then the hooked path finds nothing to
    call, at a small cost; it is never False while a hook exists.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._handle import RemovableHandle
from .._tensor import Tensor

if TYPE_CHECKING:
    from ..devices import Device

__all__ = [
    "Node",
    "AccumulateGrad",
    "GraphRoot",
    "InputMetadata",
    "GradientEdge",
    "RemovableHandle",
    "get_gradient_edge",
    "gradient_edge",
    "grad_accumulator",
]

_sequence_nr = itertools.count()
ACCUMULATE_GRAD_NR = (1 << 63) - 1


class InputMetadata:
    """What a node expects of the gradient at one of its inputs.

    ``stream`` is the stream current on ``device`` when the forward output
    was created (None for devices without streams).
    """

    __slots__ = ("shape", "dtype", "device", "stream")

    def __init__(self, shape: tuple[int, ...], dtype: Any, device: Device, stream: Any) -> None:
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.stream = stream

    def __repr__(self) -> str:
        return f"InputMetadata(shape={self.shape}, dtype={self.dtype}, device={self.device})"


def _check_callable(fn: Any, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {type(fn).__name__}")


class Node:
    """A backward function in the graph.

    Subclasses implement :meth:`apply`. The engine calls, for one node and in
    this order (seed ``call_function``): tensor pre-hooks, retains-grad hooks,
    node pre-hooks, :meth:`apply`, node post-hooks.
    """

    __slots__ = (
        "next_edges",
        "sequence_nr",
        "topological_nr",
        "input_metadata",
        "_pre_hooks",
        "_post_hooks",
        "_tensor_pre_hooks",
        "_retains_grad_hooks",
        "_metadata",
        "_anomaly_trace",
        "has_hooks",
        "__weakref__",
    )

    #: True for nodes whose backward is a coroutine (run on the event loop).
    is_async = False
    #: False for built-in formulas: when every gradient a node receives is None, the
    #: engine sends None along each next edge instead of calling ``apply`` (PyTorch's
    #: generated code does the same: ``any_grad_defined``). True for nodes that run
    #: anyway: custom Functions, nodes that raise, and AccumulateGrad (its hooks).
    runs_without_grads = False

    # Invariant: next_edges[i] is None or (node, input_nr) with
    #            0 <= input_nr < len(node.input_metadata).
    next_edges: tuple[tuple[Node, int] | None, ...]
    # Invariant: topological_nr == 0 if no next edge, else 1 + max over next nodes.
    topological_nr: int
    input_metadata: tuple[InputMetadata, ...]
    sequence_nr: int
    # the hooks and metadata stay None until first registered (most nodes have none)
    _pre_hooks: list[Callable[[tuple[Any, ...]], Any]] | None
    _post_hooks: list[Callable[[tuple[Any, ...], tuple[Any, ...]], Any]] | None
    _tensor_pre_hooks: dict[int, list[Callable[[Any], Any]]] | None
    _retains_grad_hooks: dict[int, Callable[[Any], None]] | None
    _metadata: dict[str, Any] | None
    _anomaly_trace: str | None

    def __init__(
        self,
        next_edges: tuple[tuple[Node, int] | None, ...] = (),
        input_metadata: tuple[InputMetadata, ...] = (),
    ) -> None:
        self.next_edges = next_edges
        self.sequence_nr = next(_sequence_nr)
        topo = 0
        for edge in next_edges:
            if edge is not None and edge[0].topological_nr >= topo:
                topo = edge[0].topological_nr + 1
        self.topological_nr = topo
        self.input_metadata = input_metadata
        self._pre_hooks = None
        self._post_hooks = None
        self._tensor_pre_hooks = None
        self._retains_grad_hooks = None
        self._metadata = None
        self._anomaly_trace = None
        #: Note [Has-hooks flag]
        self.has_hooks = False

    # ---- the backward function ----

    def apply(self, grads: list[Any], create_graph: bool) -> Sequence[Any]:
        """Return one gradient per next edge (None where there is nothing to send).

        ``grads`` holds one gradient per input of this node. Without
        ``create_graph`` gradients are raw arrays (NumPy/CuPy); with it they
        are Tensors and the computation is recorded. See Note [Dual backward
        formulas] in ``aiograd._ops``.
        """
        raise NotImplementedError(f"{self.name()} does not implement apply")

    async def apply_async(self, grads: list[Any], create_graph: bool) -> Sequence[Any]:
        """``apply`` of a node whose ``is_async`` is True: awaited on the event loop that
        drives its GraphTask (see ``aiograd.engine.drivers``)."""
        raise NotImplementedError(f"{self.name()} does not implement apply_async")

    def release_variables(self) -> None:
        """Free saved tensors (called after apply when retain_graph is false)."""

    def name(self) -> str:
        return type(self).__name__

    # ---- introspection (PyTorch's names) ----

    def _sequence_nr(self) -> int:
        """The creation order the engine runs ready nodes by (later first), as PyTorch's."""
        return self.sequence_nr

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return tuple((None, 0) if e is None else e for e in self.next_edges)

    @property
    def num_inputs(self) -> int:
        return len(self.input_metadata)

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def anomaly_trace(self) -> str | None:
        """The forward traceback, captured when the node was made in anomaly mode."""
        return self._anomaly_trace

    def _capture_anomaly_trace(self) -> None:
        self._anomaly_trace = "".join(traceback.format_stack()[:-1])

    # ---- hooks ----

    def register_hook(
        self, fn: Callable[[tuple[Any, ...], tuple[Any, ...]], Any]
    ) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs) -> new grad_inputs or None``, after the node runs.

        In PyTorch's naming ``grad_inputs`` are the gradients this node
        returns (one per next edge) and ``grad_outputs`` those it received.
        Runs on the thread that ran the node (a device worker), in the
        caller's context.
        """
        _check_callable(fn, "hook")
        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(fn)
        self.has_hooks = True
        return RemovableHandle(self._post_hooks, fn, self)

    def register_prehook(self, fn: Callable[[tuple[Any, ...]], Any]) -> RemovableHandle:
        """``fn(grad_outputs) -> new grad_outputs or None``, before the node runs."""
        _check_callable(fn, "prehook")
        if self._pre_hooks is None:
            self._pre_hooks = []
        self._pre_hooks.append(fn)
        self.has_hooks = True
        return RemovableHandle(self._pre_hooks, fn, self)

    def _register_tensor_pre_hook(
        self, output_nr: int, fn: Callable[[Any], Any]
    ) -> RemovableHandle:
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        hooks = self._tensor_pre_hooks.setdefault(output_nr, [])
        hooks.append(fn)
        self.has_hooks = True
        return RemovableHandle(hooks, fn, self)

    def _set_retains_grad_hook(self, output_nr: int, fn: Callable[[Any], None]) -> None:
        if self._retains_grad_hooks is None:
            self._retains_grad_hooks = {}
        self._retains_grad_hooks[output_nr] = fn
        self.has_hooks = True

    def _hooks_removed(self) -> None:
        """A hook's handle removed it: recompute ``has_hooks`` (Note [Has-hooks flag])."""
        tensor_hooks = self._tensor_pre_hooks
        self.has_hooks = bool(self._pre_hooks or self._post_hooks or self._retains_grad_hooks
                              or (tensor_hooks and any(tensor_hooks.values())))

    def tensor_pre_hooks(self) -> Mapping[int, Sequence[Callable[[Any], Any]]] | None:
        return self._tensor_pre_hooks

    def __call__(self, *grads: Any) -> tuple[Any, ...]:
        """Apply the node to Tensor gradients outside the engine (no hooks)."""
        from ..grad_mode import is_grad_enabled

        create = is_grad_enabled()
        args = [g if create else g.data for g in grads]
        out = self.apply(args, create)
        return tuple(
            None if o is None else (o if isinstance(o, Tensor) else Tensor._wrap(o)) for o in out
        )

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """Writes gradients into a leaf's ``.grad``: the only writer of ``.grad``.

    A leaf owns its AccumulateGrad (``leaf._accumulator``) and the node refers
    back to the leaf weakly (See Note [No reference cycles]); so every graph
    built on the leaf shares one node, and accumulation into the leaf is
    serialised by its ``lock``: two workers (or two threads running backward
    passes) adding into the same leaf never lose an update. If the leaf is
    gone when its gradient arrives, there is nobody to give it to.

    Note [Stealing gradients]
        The first gradient a leaf gets is stored without a copy when nothing
        else can see it: the only references to it (and, for a view, to its
        base) are the engine's own, and it is writeable dense memory (C- or
        F-ordered). Otherwise, e.g. when AddBackward passed one array to two
        leaves, the caller passed it as ``grad_tensors``, or it is the
        read-only broadcast view ``sum()``'s backward makes, it is copied, so
        ``.grad`` never aliases anything and can be added to in place. Later
        gradients are added in place, into a ``.grad`` with history too. With
        create_graph the first gradient is copied into a new tensor (recorded
        as CopyBackwards, so it keeps its history) and later ones are added
        out of place, as PyTorch does.
    """

    __slots__ = ("_variable", "lock")
    runs_without_grads = True  # its post-accumulate-grad hooks run even then

    def __init__(self, variable: Tensor) -> None:
        from ..devices import CPU

        stream = None
        dev = variable.device
        if dev is not CPU and dev.backend.has_streams:
            stream = dev.backend.current_stream(dev.index)
        super().__init__((), (InputMetadata(variable.shape, variable.data.dtype, dev, stream),))
        self.sequence_nr = ACCUMULATE_GRAD_NR
        self._variable = weakref.ref(variable)
        self.lock = threading.Lock()
        self.has_hooks = bool(variable._hooks or variable._post_acc_hooks)
        _accumulators.add(self)

    @property
    def variable(self) -> Tensor | None:
        """The leaf (None if it no longer exists)."""
        return self._variable()

    def has_tensor_hooks(self) -> bool:
        var = self._variable()
        return var is not None and bool(var._hooks)

    def _hooks_removed(self) -> None:
        """Its own hooks or its leaf's changed: recompute ``has_hooks``."""
        super()._hooks_removed()
        var = self._variable()
        if var is not None and (var._hooks or var._post_acc_hooks):
            self.has_hooks = True

    def tensor_pre_hooks(self) -> Mapping[int, Sequence[Callable[[Any], Any]]] | None:
        var = self._variable()
        hooks = None if var is None else var._hooks
        return {0: hooks} if hooks else None

    def apply(self, grads: list[Any], create_graph: bool) -> Sequence[Any]:
        """Add the gradient (if any: None leaves ``.grad`` as it is) into the leaf, then
        run its post-accumulate-grad hooks, as PyTorch does in either case."""
        grad = grads[0]
        var = self._variable()
        if var is None:
            return ()
        if grad is not None:
            self.accumulate(var, grad, create_graph, _APPLY_REFS)
        hooks = var._post_acc_hooks
        if hooks:
            for hook in list(hooks):
                if hook(var) is not None:
                    raise RuntimeError("post accumulate grad hooks should return None")
        return ()

    def accumulate(self, var: Tensor, grad: Any, create_graph: bool, owned_refs: int) -> None:
        """Add ``grad`` into ``var.grad``. ``owned_refs``: the references to ``grad``
        when only the callers hold it (See Note [Stealing gradients])."""
        with self.lock:
            old = var._grad
            if create_graph:
                new = grad if isinstance(grad, Tensor) else Tensor._wrap(grad)
                if old is None:  # a copy into a new tensor, recorded (CopyBackwards)
                    old = Tensor._wrap(new.device.xp.empty_like(new.data), new.device)
                    var._grad = old.copy_(new)
                else:
                    var._grad = old + new
            elif old is None:
                base = grad.base
                if (sys.getrefcount(grad) > owned_refs
                        or (base is not None and sys.getrefcount(base) > _BASE_REFS)
                        or not _dense_writeable(grad)):
                    grad = grad.copy()
                var._grad = Tensor._wrap(grad, var.device)
            else:  # in place, even a .grad with history (from create_graph), as PyTorch
                old.data += grad
                old._vc.value += 1

    def name(self) -> str:
        return "AccumulateGrad"

    def _sequence_nr(self) -> int:
        """PyTorch's value for a leaf's node: the largest uint64 (it runs first)."""
        return (1 << 64) - 1


def _dense_writeable(array: Any) -> bool:
    """True if ``array`` may become a ``.grad``: writeable, and C- or F-ordered.

    Called after the reference counts are read: a ``flags`` object holds a
    reference to its array. CuPy's flags have no ``writeable``: its arrays are.
    """
    flags = array.flags
    return getattr(flags, "writeable", True) and (flags.c_contiguous or flags.f_contiguous)


# References to a gradient that nothing else holds, seen inside
# AccumulateGrad.accumulate called from apply: the `grads` list slot, apply's
# local `grad`, accumulate's argument and getrefcount's own argument. For a
# view (e.g. the transposed weight gradient of ``x @ W.T``) its base must be
# held only by the view (``grad.base``), the local ``base`` and getrefcount's
# argument. Checked by tests/test_memory.py.
_APPLY_REFS = 4
_BASE_REFS = 3


class GraphRoot(Node):
    """The root of a backward with several roots: passes the root gradients on."""

    __slots__ = ("outputs",)

    def __init__(self, edges: tuple[tuple[Node, int] | None, ...], outputs: list[Any]) -> None:
        super().__init__(edges, ())
        self.outputs = outputs

    def apply(self, grads: list[Any], create_graph: bool) -> Sequence[Any]:
        return self.outputs


class GradientEdge:
    """An edge ``(node, output_nr)``: where the gradient of a tensor enters the graph."""

    __slots__ = ("node", "output_nr")

    def __init__(self, node: Node, output_nr: int) -> None:
        self.node = node
        self.output_nr = output_nr

    def __iter__(self) -> Iterator[Any]:
        """``node, output_nr = edge`` (two types: an iterator can only say Any)."""
        return iter((self.node, self.output_nr))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GradientEdge)
            and self.node is other.node
            and self.output_nr == other.output_nr
        )

    def __hash__(self) -> int:
        return hash((id(self.node), self.output_nr))

    def __repr__(self) -> str:
        return f"GradientEdge(node={self.node!r}, output_nr={self.output_nr})"


_accumulator_lock = threading.Lock()
# Every live AccumulateGrad, so a forked child can replace locks held at fork time.
_accumulators: weakref.WeakSet[AccumulateGrad] = weakref.WeakSet()


def _reset_locks_after_fork() -> None:
    """In a forked child: locks another parent thread held at fork time stay held
    forever; give every AccumulateGrad and the creation lock a fresh one."""
    global _accumulator_lock
    _accumulator_lock = threading.Lock()
    for acc in list(_accumulators):
        acc.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_locks_after_fork)


def grad_accumulator(leaf: Tensor) -> AccumulateGrad:
    """The AccumulateGrad of a leaf, created on first use and owned by the leaf."""
    acc = leaf._accumulator
    if acc is None:
        with _accumulator_lock:
            acc = leaf._accumulator
            if acc is None:
                acc = leaf._accumulator = AccumulateGrad(leaf)
    return acc


def gradient_edge(t: Tensor) -> tuple[Node, int] | None:
    """The edge a gradient for ``t`` flows along, or None if ``t`` needs no grad."""
    fn = t.grad_fn
    if fn is not None:
        return (fn, t.output_nr)
    if t._rg:
        return (grad_accumulator(t), 0)
    return None


def get_gradient_edge(t: Tensor) -> GradientEdge:
    """The :class:`GradientEdge` of ``t``: its grad_fn, or its leaf's AccumulateGrad."""
    if not isinstance(t, Tensor):
        raise TypeError(f"get_gradient_edge expects a Tensor, got {type(t).__name__}")
    edge = gradient_edge(t)
    if edge is None:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not "
            "require gradients"
        )
    return GradientEdge(*edge)
