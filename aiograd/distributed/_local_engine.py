"""The one place the distributed engine touches aiograd's local autograd.

Note [Distributed engine adapter]: everything the distributed backward needs
from the local engine goes through this module, so an engine refactor changes
this module only. A local pass runs the graph from some outputs (the roots,
send nodes' outputs, boundary nodes of an earlier pass) and returns the
gradients that reach the leaves (AccumulateGrad nodes), the recv nodes and the
*stop* nodes it meets; it never writes ``.grad`` (seed
``DistAccumulateGradCaptureHook``: gradients go to the context). A stop node
only captures its input: the pass neither runs it nor follows its edges (the
GraphTask's ``stop_at``), so it can run later, once, with every gradient it
will get (Note [Distributed pass] in ``autograd``). The graph is always
retained here; ``autograd.backward`` applies ``retain_graph`` to the whole
distributed pass.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from aiograd import autograd as _autograd
from aiograd._tensor import Tensor
from aiograd.engine import engine as _engine
from aiograd.graph._node import AccumulateGrad, GradientEdge, Node, grad_accumulator

Output = Tensor | GradientEdge


def _start_nodes(outputs: Iterable[Output]) -> list[Node]:
    nodes: list[Node] = []
    for out in outputs:
        if isinstance(out, GradientEdge):
            nodes.append(out.node)
        elif out.grad_fn is not None:
            nodes.append(out.grad_fn)
        elif out.requires_grad:
            nodes.append(grad_accumulator(out))
    return nodes


def reachable(outputs: Iterable[Output]) -> set[Node]:
    """The nodes a pass from ``outputs`` could run, leaves (AccumulateGrad) excluded:
    accumulating is additive, so a leaf never has to wait for anything."""
    seen: set[Node] = set()
    stack = _start_nodes(outputs)
    while stack:
        node = stack.pop()
        if node in seen or isinstance(node, AccumulateGrad):
            continue
        seen.add(node)
        stack.extend(e[0] for e in node.next_edges if e is not None)
    return seen


#: the recv node class of a pass
R = TypeVar("R", bound=Node)


def _sinks(outputs: list[Output], stop_at: frozenset[Node], recv_type: type[R]
           ) -> tuple[list[Tensor], list[R], list[GradientEdge]]:
    """The leaves, recv nodes and stop-node inputs a pass from ``outputs`` reaches
    without going through a stop node."""
    leaves: list[Tensor] = []
    recvs: list[R] = []
    stops: set[tuple[Node, int]] = set()
    seen: set[Node] = set()
    stack = _start_nodes(outputs)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, AccumulateGrad):
            if node.variable is not None:
                leaves.append(node.variable)
            continue
        if isinstance(node, recv_type):
            recvs.append(node)
            continue
        for edge in node.next_edges:
            if edge is None:
                continue
            if edge[0] in stop_at and not isinstance(edge[0], (AccumulateGrad, recv_type)):
                stops.add((edge[0], edge[1]))
            else:
                stack.append(edge[0])
    return leaves, recvs, [GradientEdge(n, nr) for n, nr in stops]


async def local_pass(outputs: list[Output], grads: list[Any] | None, recv_type: type[R],
                     stop_at: frozenset[Node] = frozenset()
                     ) -> tuple[list[tuple[Tensor, Tensor]], list[tuple[R, Tensor | None]],
                                list[tuple[GradientEdge, Tensor]]]:
    """Run the local graph from ``outputs`` with ``grads`` (None: ones for scalar
    outputs), stopping at ``stop_at``. Returns ``(leaf, grad)`` pairs for the leaves
    that received a gradient, ``(recv node, grad or None)`` for every recv node
    reached and ``(stop edge, grad)`` for the stop-node inputs that received one."""
    leaves, recvs, stops = _sinks(outputs, stop_at, recv_type)
    inputs: list[Any] = [*leaves, *(GradientEdge(r, 0) for r in recvs), *stops]
    if not inputs:
        return [], [], []
    (gt, context), results = _autograd._grad_task(outputs, inputs, grads, True, False, True,
                                                  False, "distributed.autograd.backward", None)
    gt.stop_at = stop_at
    await _engine.get_engine().run_async(gt, context)
    got = results(gt)
    n, m = len(leaves), len(leaves) + len(recvs)
    return ([(t, g) for t, g in zip(leaves, got[:n]) if g is not None],
            list(zip(recvs, got[n:m])),
            [(e, g) for e, g in zip(stops, got[m:]) if g is not None])
