"""The one place the distributed engine touches aiograd's local autograd.

Note [Distributed engine adapter]: everything the distributed backward needs
from the local engine goes through :func:`local_backward`, so an engine
refactor changes this module only. A local pass runs the graph from some
outputs (the roots, or a send node's output) and returns the gradients that
reach the leaves (AccumulateGrad nodes) and the recv nodes it meets; it never
writes ``.grad`` (seed ``DistAccumulateGradCaptureHook``: gradients go to the
context). The graph is always retained here; ``autograd.backward`` applies
``retain_graph`` at the level of the whole distributed pass.
"""
from __future__ import annotations

from typing import Any

import aiograd
from aiograd._tensor import Tensor
from aiograd.graph._node import AccumulateGrad, GradientEdge, Node, grad_accumulator


def _sinks(outputs: list[Tensor], recv_type: type[Node]) -> tuple[list[Tensor], list[Node]]:
    """The leaves and the recv nodes reachable from ``outputs``."""
    leaves: list[Tensor] = []
    recvs: list[Node] = []
    seen: set[int] = set()
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    stack += [grad_accumulator(t) for t in outputs
              if t.grad_fn is None and t.requires_grad]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            var = node.variable
            if var is not None:
                leaves.append(var)
        elif isinstance(node, recv_type):
            recvs.append(node)
        stack.extend(e[0] for e in node.next_edges if e is not None)
    return leaves, recvs


async def local_backward(outputs: list[Tensor], grads: list[Any] | None, recv_type: type[Node]
                         ) -> tuple[list[tuple[Tensor, Tensor]], list[tuple[Node, Tensor]]]:
    """Run the local graph from ``outputs`` with ``grads``; ``(leaf, grad)`` and
    ``(recv node, grad)`` pairs for every sink that received a gradient (``grads``
    None: ones for scalar outputs)."""
    leaves, recvs = _sinks(outputs, recv_type)
    inputs: list[Any] = [*leaves, *(GradientEdge(r, 0) for r in recvs)]
    if not inputs:
        return [], []
    results = await aiograd.autograd.grad(outputs, inputs, grad_outputs=grads,
                                          retain_graph=True, allow_unused=True)
    n = len(leaves)
    return ([(t, g) for t, g in zip(leaves, results[:n]) if g is not None],
            [(r, g) for r, g in zip(recvs, results[n:]) if g is not None])
