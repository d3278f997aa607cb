"""The nodes of the arithmetic, reduction, sorting and pointwise rules save what PyTorch's
save, in PyTorch's order: pack hooks see the same tensors in the same order (the rule
table generates the saving; see aiograd/_ops/_rule.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

A = np.array([[0.5, 2.0, 1.5], [1.25, 0.75, 3.0]])
B = np.array([[1.5, 0.25, 2.5], [0.5, 1.75, 1.0]])
C = np.array([[0.3, 0.6, 0.9], [1.2, 1.4, 0.2]])

OPS: dict[str, Callable[..., Any]] = {
    "div": lambda lib, a, b, c: a / b,
    "maximum": lambda lib, a, b, c: lib.maximum(a, b),
    "pow": lambda lib, a, b, c: a ** b,
    "rpow": lambda lib, a, b, c: 2.5 ** a,
    "pow_number": lambda lib, a, b, c: a ** 3,
    "lerp": lambda lib, a, b, c: lib.lerp(a, b, c),
    "addcmul": lambda lib, a, b, c: lib.addcmul(a, b, c, value=0.5),
    "addcdiv": lambda lib, a, b, c: lib.addcdiv(a, b, c, value=0.5),
    "hypot": lambda lib, a, b, c: lib.hypot(a, b),
    "fmod": lambda lib, a, b, c: lib.fmod(a, b),
    "std": lambda lib, a, b, c: a.std(dim=1),
    "var": lambda lib, a, b, c: a.var(),
    "prod": lambda lib, a, b, c: a.prod(dim=0),
    "norm": lambda lib, a, b, c: a.norm(p=3, dim=1),
    "logsumexp": lambda lib, a, b, c: lib.logsumexp(a, dim=1),
    "amax": lambda lib, a, b, c: a.amax(dim=0),
    "max": lambda lib, a, b, c: a.max(),
    "max_dim": lambda lib, a, b, c: a.max(dim=1).values,
    "median": lambda lib, a, b, c: lib.median(a),
    "kthvalue": lambda lib, a, b, c: lib.kthvalue(a, 2, dim=1).values,
    "sort": lambda lib, a, b, c: lib.sort(a, dim=1).values,
    "cummax": lambda lib, a, b, c: lib.cummax(a, dim=1).values,
    "nansum": lambda lib, a, b, c: lib.nansum(a, dim=1),
}


def _packed(lib: Any, op: Callable[..., Any]) -> list[tuple[tuple[int, ...], list[float]]]:
    """The shape and values of each tensor the pack hook sees, in order."""
    seen: list[tuple[tuple[int, ...], list[float]]] = []

    def pack(t: Any) -> Any:
        seen.append((tuple(t.shape), np.asarray(t.detach().numpy(), dtype=float)
                     .reshape(-1).tolist()))
        return t

    tensors = [lib.tensor(x, requires_grad=True) for x in (A, B, C)]
    hooks = (ag.saved_tensors_hooks if lib is ag
             else lib.autograd.graph.saved_tensors_hooks)
    with hooks(pack, lambda t: t):
        op(lib, *tensors)
    return seen


@pytest.mark.parametrize("name", sorted(OPS))
def test_pack_hooks_see_pytorchs_saves_in_pytorchs_order(name: str) -> None:
    torch = pytest.importorskip("torch")
    ours, theirs = _packed(ag, OPS[name]), _packed(torch, OPS[name])
    assert [shape for shape, _ in ours] == [shape for shape, _ in theirs]
    for (_, got), (_, expected) in zip(ours, theirs):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
