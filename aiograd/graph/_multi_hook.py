"""One hook over the gradients of several tensors (PyTorch's ``register_multi_grad_hook``).

A multi-grad hook is an ordinary tensor hook on each of its tensors. Those run
on whichever executor runs the consuming node: several backward passes
(GraphTasks) may call them at once, and one pass may call them from several
threads (one per device). So what a pass has brought so far is kept per
GraphTask, under the hook's ``lock``, and keyed weakly: it goes when ``fn`` has
been called, else when the GraphTask is freed (a pass stopped by an error or a
cancellation). Nothing outlives its pass.

Note [Which gradients a pass computes]
    In mode "all", the first gradient of a pass asks its GraphTask at which of
    the tensors' nodes (a leaf's AccumulateGrad, else its ``grad_fn``) it calls
    tensor hooks (``GraphTask.will_execute``): a node out of reach, or pruned by
    ``inputs=``, computes no gradient. ``fn`` runs, on the thread of the last
    one, as soon as that many hook calls have been seen; the others get None.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from .._boundary import AssertionValueError
from .._tensor import Tensor
from ._context import current_graph_task
from ._node import Node, RemovableHandle, gradient_edge

if TYPE_CHECKING:
    from ..engine.graph_task import GraphTask

__all__ = ["register_multi_grad_hook"]


class _MultiHandle(RemovableHandle):
    """Returned by ``register_multi_grad_hook``: ``remove()`` removes its hook from
    every tensor (idempotent)."""

    __slots__ = ("handles",)

    def __init__(self, handles: tuple[RemovableHandle, ...]) -> None:
        self.handles = handles

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class _Pass:
    """What one pass has brought a mode-"all" hook."""

    __slots__ = ("grads", "seen", "expected")

    def __init__(self, size: int, expected: int) -> None:
        self.grads: list[Tensor | None] = [None] * size
        # Invariant: seen < expected == hook calls this pass will make (Note [Which
        #            gradients a pass computes]); at seen == expected, fn runs.
        self.seen = 0
        self.expected = expected


class _AllGrads:
    """Mode "all": ``fn(grads)`` once per pass, after the last gradient it computes."""

    __slots__ = ("fn", "nodes", "lock", "passes")

    def __init__(self, fn: Callable[[Sequence[Tensor | None]], None], nodes: list[Node]) -> None:
        self.fn = fn
        # Weak: the hooks live on these nodes (See Note [No reference cycles]); a node
        # that is gone runs in no pass.
        self.nodes = [weakref.ref(node) for node in nodes]
        self.lock = threading.Lock()
        # Guarded by lock. Invariant: passes holds the GraphTasks that brought some but
        # not all of their gradients and have not been freed.
        self.passes: weakref.WeakKeyDictionary[GraphTask, _Pass] = weakref.WeakKeyDictionary()

    def on_grad(self, index: int, grad: Tensor) -> None:
        gt = current_graph_task.get()
        assert gt is not None, "a multi-grad hook runs only inside a backward pass"
        with self.lock:
            state = self.passes.get(gt)
            if state is None:
                expected = 0
                for ref in self.nodes:
                    node = ref()
                    if node is not None and gt.will_execute(node):
                        expected += 1
                state = self.passes[gt] = _Pass(len(self.nodes), expected)
            state.grads[index] = grad
            state.seen += 1
            if state.seen < state.expected:
                return
            del self.passes[gt]
        self.fn(state.grads)


class _AnyGrad:
    """Mode "any": ``fn(grad)`` once per pass, with the first gradient it computes."""

    __slots__ = ("fn", "lock", "passes")

    def __init__(self, fn: Callable[[Tensor], None]) -> None:
        self.fn = fn
        self.lock = threading.Lock()
        # Guarded by lock. Invariant: passes holds the GraphTasks that called fn and have
        # not been freed.
        self.passes: weakref.WeakSet[GraphTask] = weakref.WeakSet()

    def on_grad(self, grad: Tensor) -> None:
        gt = current_graph_task.get()
        assert gt is not None, "a multi-grad hook runs only inside a backward pass"
        with self.lock:
            if gt in self.passes:
                return
            self.passes.add(gt)
        self.fn(grad)


def register_multi_grad_hook(
    tensors: Sequence[Tensor],
    fn: Callable[[Sequence[Tensor | None]], None] | Callable[[Tensor], None],
    *,
    mode: Literal["all", "any"] = "all",
) -> RemovableHandle:
    """Call ``fn`` once per backward pass that computes a gradient for any of ``tensors``.

    Mode "all": ``fn(grads)``, after every gradient of ``tensors`` the pass
    computes, with a list of one gradient per tensor, None for those the pass
    does not compute (not reached, or not needed for its ``inputs``). Mode
    "any": ``fn(grad)`` with the first of them. ``fn`` must not modify its
    arguments; it runs as a tensor hook, on the thread running the node
    whose gradient completes it, in the caller's context. The handle's
    ``remove()`` removes the hook from every tensor.
    """
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"register_multi_grad_hook(): tensors must be a sequence of "
                            f"Tensors; element {i} is a {type(t).__name__}")
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("register_multi_grad_hook(): expected a sequence of Tensors, got "
                            f"an element of type {type(t).__name__}")
    hooks: list[Any]
    # ``mode`` says which of the two kinds of callable ``fn`` is: the casts below.
    if mode == "all":
        nodes = []
        for t in tensors:
            edge = gradient_edge(t)
            if edge is None:
                raise AssertionValueError("Expected gradient function to be set")
            nodes.append(edge[0])
        all_grads = _AllGrads(cast("Callable[[Sequence[Tensor | None]], None]", fn), nodes)
        hooks = [functools.partial(all_grads.on_grad, i) for i in range(len(tensors))]
    else:
        tensors = [t for t in tensors if t.requires_grad]
        hooks = [_AnyGrad(cast("Callable[[Tensor], None]", fn)).on_grad] * len(tensors)
    return _MultiHandle(tuple(t.register_hook(h) for t, h in zip(tensors, hooks)))
