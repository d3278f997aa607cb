"""Matrix functions: ``inv``, ``det`` and ``solve`` (``aiograd.linalg``), over the last two
dims of a batch of square matrices.

Each is one node named as PyTorch's (``LinalgInvExBackward0``,
``LinalgDetBackward0``, ``LinalgSolveExBackward0``), whose formula is written
with matrix ops (``@``, ``.mT``, ``inv``, ``solve``), so it records its own
graph under ``create_graph`` (Note [Dual backward formulas]). Gradients of
batch dims that broadcast are summed down by the engine (Note [Broadcast
gradients]).

Singular input: ``inv`` and ``solve`` raise a RuntimeError (PyTorch's also names
the zero pivot of its LU factorization); ``det`` is 0
and its gradient is the cofactor matrix, computed from an SVD, so it stays
finite (PyTorch's too); its second order at a singular matrix is not.
"""

from __future__ import annotations

from typing import Any

import numpy

from .._tensor import Tensor, scalar_type_name
from ..graph._saved import SavedTensor
from . import _dual
from ._record import check_same_device, tensor_arg
from ._rule import Rule, RuleNode, Saved

__all__ = ["inv", "det", "solve"]


def _square(a: Tensor, fn: str, name: str = "A") -> None:
    if a.ndim < 2:
        raise RuntimeError(f"linalg.{fn}: The input tensor {name} must have at least 2 "
                           f"dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.{fn}: {name} must be batches of square matrices, but "
                           f"they are {a.shape[-2]} by {a.shape[-1]} matrices")
    if a.dtype.kind != "f":
        raise RuntimeError(f"linalg.{fn}: Expected a floating point or complex tensor as "
                           f"input. Got {scalar_type_name(a.dtype)}")


def _singular(fn: str) -> RuntimeError:
    return RuntimeError(f"linalg.{fn}: The input matrix is singular: the "
                        f"{'inversion' if fn == 'inv' else 'solve'} could not be completed.")


def _mT(x: Any) -> Any:
    return x.mT if type(x) is Tensor else _dual.swap_last(x)


# ---- inv ----

def _inv_grad(g: Any, inverse: Any) -> Any:
    inv_t = _mT(inverse)
    return -(inv_t @ g @ inv_t)


LinalgInvExBackward0 = Rule("LinalgInvExBackward0", _inv_grad,
                            saves=(Saved("inverse", output=True),),
                            doc="d inv(A) = -inv(A)^T g inv(A)^T: saves the result.")


def inv(A: Tensor) -> Tensor:  # noqa: N803  (PyTorch's argument name)
    """The inverse of each square matrix of ``A`` (``...``, n, n)."""
    A = tensor_arg(A, "linalg.inv", "A", 1)
    _square(A, "inv")
    try:
        data = A.device.xp.linalg.inv(A.data)
    except numpy.linalg.LinAlgError:
        raise _singular("inv") from None
    return LinalgInvExBackward0.unary(A, data)


# ---- det ----

def _cofactor(a: Any) -> Any:
    """``adj(a)^T`` of arrays, from the SVD ``a = U S V^T``: ``det(U) det(V) U
    diag(prod_{j != i} s_j) V^T``, finite for singular matrices too."""
    xp = _dual.xp_of(a)
    u, s, vt = xp.linalg.svd(a)
    n = s.shape[-1]
    others = xp.stack([xp.prod(xp.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = xp.linalg.det(u) * xp.linalg.det(vt)
    return (u * others[..., None, :]) @ vt * sign[..., None, None]


@numpy.errstate(all="ignore")
def _det_grad(g: Any, a: Any, d: Any) -> Any:
    if type(a) is Tensor:  # differentiable again: det(A) inv(A)^T
        return (g * d).unsqueeze(-1).unsqueeze(-1) * inv(a).mT
    return g[..., None, None] * _cofactor(a)


LinalgDetBackward0 = Rule("LinalgDetBackward0", _det_grad, saves=("A", "result"),
                          doc="d det(A) = g cofactor(A) = g det(A) inv(A)^T: saves the input "
                              "and the result.")


def det(A: Tensor) -> Tensor:  # noqa: N803
    """The determinant of each square matrix of ``A`` (``...``, n, n)."""
    A = tensor_arg(A, "linalg.det", "A", 1)
    _square(A, "det")
    data = _dual.contiguous(A.device.xp.asarray(A.device.xp.linalg.det(A.data)))
    return LinalgDetBackward0.record((A,), data, A.device, saved=(A,))


# ---- solve ----

def _is_vector_rhs(A: Tensor, B: Tensor) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) if it is 1-D, or one dim short of A
    with A's batch shape."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


# ---- trickier grads: solve (both gradients share one solve) ----

def _solve_grad(node: RuleNode, grads: list[Any], create_graph: bool, saved_a: SavedTensor,
                saved_x: SavedTensor, vector: bool) -> Any:
    """X = A^-1 B: gB = A^-T g, gA = -gB X^T. ``vector``: B (and X) are vectors, made
    columns for the matrix formulas."""
    a = saved_a.unpack(node, create_graph)
    x = saved_x.unpack(node, create_graph)
    g = grads[0]
    if vector:
        g, x = _dual.unsqueeze(g, -1), _dual.unsqueeze(x, -1)
    gb: Any  # an array, or a Tensor under create_graph (Note [Dual backward formulas])
    if type(a) is Tensor:
        gb = solve(a.mT, g)
    else:
        gb = _dual.xp_of(a).linalg.solve(_mT(a), g)
    ga = -(gb @ _mT(x)) if node.next_edges[0] is not None else None
    if vector:
        gb = gb.squeeze(-1) if type(gb) is Tensor else gb[..., 0]
    return ga, (gb if node.next_edges[1] is not None else None)


LinalgSolveExBackward0 = Rule("LinalgSolveExBackward0", whole=_solve_grad,
                              saves=("A", "result"), keeps=("vector",),
                              doc="``linalg.solve(A, B)``: saves A and the result.")


def solve(A: Tensor, B: Any) -> Tensor:  # noqa: N803
    """X with ``A @ X = B`` for each square matrix of ``A``; ``B`` a matrix or a vector
    per matrix (PyTorch's rule, ``_is_vector_rhs``); batch dims broadcast."""
    A = tensor_arg(A, "linalg.solve", "A", 1)
    B = tensor_arg(B, "linalg.solve", "B", 2)
    dev = check_same_device(A, B)
    _square(A, "solve")
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {scalar_type_name(A.dtype)} and B of type "
                           f"{scalar_type_name(B.dtype)} instead")
    vector = _is_vector_rhs(A, B)
    b = B.data[..., None] if vector else B.data
    if b.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"AX = B ({A.shape[-2]}x{A.shape[-1]} and {b.shape[-2]}x"
                           f"{b.shape[-1]})")
    xp = dev.xp
    try:
        data = xp.linalg.solve(xp.broadcast_to(A.data, xp.broadcast_shapes(
            A.shape[:-2], b.shape[:-2]) + A.shape[-2:]), b)
    except numpy.linalg.LinAlgError:
        raise _singular("solve") from None
    except ValueError:
        raise RuntimeError(f"linalg.solve: the batch dims of A {A.shape[:-2]} and B "
                           f"{b.shape[:-2]} do not broadcast") from None
    if vector:
        data = data[..., 0]
    data = _dual.contiguous(data)
    return LinalgSolveExBackward0.record((A, B), data, dev, saved=(A,), keeps=(vector,))
