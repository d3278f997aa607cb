"""What the systematic sweep (tests/test_op_sweep.py) is made of: :class:`Case`, the
input domains and shapes, and helpers. Each family's cases live in a module
``tests/sweep_<family>.py`` defining ``CASES: dict[str, Case]`` keyed by RULES key;
tests/test_op_sweep.py collects every such module, and the cases written with the
rule table's first families."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import aiograd as ag

# Domains: (low, high) of uniform values, kept 0.1 away from the listed kinks.
ANY = (-2.0, 2.0)
POSITIVE = (0.3, 3.0)
UNIT = (-0.9, 0.9)
INTEGERS = (-2.0, -1.0, 0.0, 1.0, 2.0)
HALVES = (-1.5, -0.5, 0.5, 1.5)

UNARY_SHAPES: list[tuple[tuple[int, ...], ...]] = [((),), ((3,),), ((2, 3),)]
BINARY_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2,))]
CLAMP_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()), ((2, 3), (2, 1), (1,))]
MATRIX_SHAPES: list[tuple[tuple[int, ...], ...]] = [((3, 3),), ((2, 3, 3),)]
SOLVE_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)), ((2, 3, 3), (3, 2))]


class Case:
    """How to reach a rule: ``op(lib, *tensors)`` written once against aiograd and torch
    (``theirs`` when torch spells it differently), over ``shapes``, with inputs drawn
    from ``domains`` (one per input, or one for all) away from ``kinks``. ``linear``:
    the gradient is piecewise constant in the inputs, so PyTorch's first gradient has no
    graph to differentiate; second order is then gradgradcheck's alone. ``torch_node``:
    PyTorch's node where it records the op differently (the values and gradients are
    still compared)."""

    def __init__(self, op: Callable[..., Any], shapes: list[tuple[tuple[int, ...], ...]],
                 domains: tuple[float, float] | list[tuple[float, float]] = ANY,
                 kinks: tuple[float, ...] = (), theirs: Callable[..., Any] | None = None,
                 linear: bool = False, torch_node: str | None = None) -> None:
        self.op = op
        self.torch_node = torch_node
        self.linear = linear
        self.theirs = theirs or op
        self.shapes = shapes
        self.domains = domains
        self.kinks = kinks

    def arrays(self, shapes: tuple[tuple[int, ...], ...], seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out = []
        for i, shape in enumerate(shapes):
            low, high = self.domains[i] if isinstance(self.domains, list) else self.domains
            x = rng.uniform(low, high, size=shape)
            for p in self.kinks:
                near = np.abs(x - p) < 0.1
                x = np.where(near, p + 0.2 * np.sign(x - p + 1e-12), x)
            out.append(x)
        return out


def unary_case(name: str, domain: tuple[float, float] = ANY, kinks: tuple[float, ...] = (),
           linear: bool = False) -> Case:
    return Case(lambda lib, x: getattr(lib, name)(x), UNARY_SHAPES, domain, kinks,
                linear=linear)


def aten(name: str, ours: Callable[..., Any], *extra: Any) -> Callable[..., Any]:
    """``ours(g, y)`` for aiograd, ``torch.ops.aten.<name>(g, y, *extra)`` for torch."""

    def op(lib: Any, g: Any, y: Any) -> Any:
        if lib is ag:
            return ours(g, y)
        return getattr(lib.ops.aten, name)(g, y, *extra)

    return op


def conditioned(lib: Any, a: Any) -> Any:
    """``a + 3 I``: a matrix of ANY entries kept far from singular (n = 3)."""
    return a + 3 * lib.eye(a.shape[-1], dtype=a.dtype)


def backward_of(forward: Callable[[Any, Any], Any], x_shape: tuple[int, ...]) -> Case:
    """The case of ``g -> d forward(x) / d x . g`` at a fixed ``x``, taken with create_graph:
    its node is the create_graph gradient's (``...BackwardBackward0``). For a forward linear
    in x (a pad, a pooling) it is linear in g."""
    x_values = np.random.default_rng(7).uniform(-2.0, 2.0, size=x_shape)

    def op(lib: Any, g: Any) -> Any:
        if lib is ag:
            with ag.enable_grad():  # gradcheck perturbs g under no_grad
                x = ag.tensor(x_values, requires_grad=True)
                return ag.grad_sync(forward(ag, x), (x,), g, create_graph=True)[0]
        x = lib.tensor(x_values, requires_grad=True)
        return lib.autograd.grad(forward(lib, x), x, g, create_graph=True)[0]

    out_shape = tuple(forward(ag, ag.tensor(x_values)).shape)
    return Case(op, [(out_shape,)], linear=True)


def row_mask(lib: Any) -> Any:
    """A fixed boolean mask of 3 rows (masked_fill, masked_scatter, index by mask)."""
    return lib.tensor([True, False, True])
