"""``matmul`` / ``@``: 1-D, 2-D and batched N-D with broadcast batch dims (as torch.matmul);
``mm``, ``bmm``, ``dot`` and ``mv``, its single cases with their own checks.

The node records the case, named as PyTorch names its grad_fn: DotBackward0
(1-D @ 1-D), MvBackward0 (2-D @ 1-D), MmBackward0 (2-D @ 2-D),
SqueezeBackward4 (1-D @ 2-D) and UnsafeViewBackward0 (any N-D case; bmm's
is BmmBackward0). The 2-D case is the hot path of an MLP: for ``x @ W.T`` its
backward is exactly ``g @ W`` and ``x.T @ g`` (transposes are views), and it
saves only the operand the other's gradient needs. Batch dims an operand was broadcast
along are summed away by the engine (Note [Broadcast gradients]).
"""

from __future__ import annotations

import math
from typing import Any

from .._tensor import Tensor, cpp_type_name, scalar_type_name
from . import _dual
from ._record import check_same_device, edges_of, plain, record, scalar_or_tensor, tensor_arg
from ._rule import Rule, Saved

# ---- matmul's nodes, one per case of its operands ----

# Each node saves ``self_`` (a) only for b's gradient and ``other`` (b) only for a's, in
# PyTorch's order of saving: dot and mv save a first, the other cases b first.
_A_FIRST = (Saved("self_", only_for=1), Saved("other", only_for=0))
_B_FIRST = (Saved("other", only_for=0), Saved("self_", only_for=1))

DotBackward0 = Rule("DotBackward0", lambda g, a, b: g * b, lambda g, a, b: g * a,
                    saves=_A_FIRST, doc="``(k,) @ (k,)``: d a = g b, d b = g a.")
MvBackward0 = Rule("MvBackward0", lambda g, a, b: _dual.unsqueeze(g, -1) * b,
                   lambda g, a, b: _dual.swap_last(a) @ g, saves=_A_FIRST,
                   doc="``(n, k) @ (k,)``: d a = g b^T (an outer product), d b = a^T g.")


# ---- trickier grads: mm (layout) and the N-D cases (vectors, folded batches) ----

def _mm_grad_b(g: Any, b: Any, a: Any, b_transposed: bool) -> Any:
    """d b = a^T g, in b's memory layout (PyTorch's): for a transposed (column-major) b
    such as ``W.T``, (g^T a)^T, so the gradient reaching ``W`` is row-major like ``W`` (its
    optimizer step then runs on contiguous memory) and is kept without a copy."""
    if b_transposed:
        return _dual.swap_last(_dual.swap_last(g) @ a)
    return _dual.swap_last(a) @ g


# Invariant: b_transposed == b was column-major but not row-major in the forward.
MmBackward0 = Rule("MmBackward0", lambda g, b, a, b_transposed: g @ _dual.swap_last(b),
                   _mm_grad_b, saves=_B_FIRST, keeps=("b_transposed",),
                   doc="``(n, k) @ (k, m)``: d a = g b^T, d b = a^T g (in b's layout).")


def _as_matrices(g: Any, a_vec: bool, b_vec: bool) -> Any:
    """The gradient with back the dims matmul dropped for a vector operand."""
    if a_vec:
        g = _dual.unsqueeze(g, -2)
    if b_vec:
        g = _dual.unsqueeze(g, -1)
    return g


def _nd_grad_a(g: Any, b: Any, a: Any, a_vec: bool, b_vec: bool, fold: bool) -> Any:
    """d a = g b^T, batched; a vector b is a column, a vector a's gradient drops its row."""
    if b_vec:
        b = _dual.unsqueeze(b, -1)
    ga = _as_matrices(g, a_vec, b_vec) @ _dual.swap_last(b)
    if a_vec:
        ga = _dual.reshape(ga, ga.shape[:-2] + ga.shape[-1:])
    return ga


def _nd_grad_b(g: Any, b: Any, a: Any, a_vec: bool, b_vec: bool, fold: bool) -> Any:
    """d b = a^T g, batched; ``fold``: b has no batch dims, so a's batch folds into rows
    (one (k, rows) @ (rows, m) product)."""
    g = _as_matrices(g, a_vec, b_vec)
    if a_vec:
        a = _dual.unsqueeze(a, 0)
    if fold:
        rows = math.prod(a.shape[:-1])
        a = _dual.reshape(a, (rows, a.shape[-1]))
        g = _dual.reshape(g, (rows, g.shape[-1]))
    gb = _dual.swap_last(a) @ g
    if b_vec:
        gb = _dual.reshape(gb, gb.shape[:-1])
    return gb


# Invariant: fold == (a.ndim > 2 and b.ndim <= 2): the batch dims are all a's.
_ND_KEEPS = ("a_vec", "b_vec", "fold")
UnsafeViewBackward0 = Rule(
    "UnsafeViewBackward0", _nd_grad_a, _nd_grad_b, saves=_B_FIRST, keeps=_ND_KEEPS,
    variant="matmul",
    doc="Any other matmul: a 1-D operand made a matrix (a row for a, a column for b).")
SqueezeBackward4 = Rule("SqueezeBackward4", _nd_grad_a, _nd_grad_b, saves=_B_FIRST,
                        keeps=_ND_KEEPS, variant="matmul", doc="``(k,) @ (k, m)``.")
BmmBackward0 = Rule("BmmBackward0", _nd_grad_a, _nd_grad_b, saves=_B_FIRST, keeps=_ND_KEEPS,
                    doc="``bmm``: ``(B, n, k) @ (B, k, m)``.")


def _dtype_error(a: Any, b: Any) -> RuntimeError:
    """PyTorch's error for operands of two dtypes, worded as the kernel matmul picks."""
    if b.ndim > 2:
        return RuntimeError(
            f"expected scalar type {scalar_type_name(a.dtype)} but found "
            f"{scalar_type_name(b.dtype)}"
        )
    if b.ndim == 2:
        return RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{cpp_type_name(a.dtype)} != {cpp_type_name(b.dtype)}"
        )
    if a.ndim == 1:
        return RuntimeError(
            "dot : expected both vectors to have same dtype, but found "
            f"{scalar_type_name(a.dtype)} and {scalar_type_name(b.dtype)}"
        )
    vec, mat = scalar_type_name(b.dtype), scalar_type_name(a.dtype)
    return RuntimeError(
        f"addmv input tensors must have the same dtype, but got {vec}, {mat}, and {vec}"
    )


def _shapes_error(a: Any, b: Any) -> RuntimeError:
    return RuntimeError(
        f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied: the last "
        "dim of the first must equal the "
        f"{'only' if b.ndim == 1 else 'second-to-last'} dim of the second, and batch dims "
        "must broadcast"
    )


def matmul(a: Tensor, b: Any) -> Tensor:
    """Matrix product with torch.matmul's rules for 1-D operands and batch broadcasting."""
    other = scalar_or_tensor(b, a)
    if type(other) is not Tensor:
        raise TypeError(
            f"matmul expects a Tensor or an array operand, got {type(b).__name__}; "
            "to scale by a number use *"
        )
    dev = check_same_device(a, other)
    ad, bd = a.data, other.data
    if ad.ndim == 0 or bd.ndim == 0:
        raise RuntimeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{ad.ndim}D and {bd.ndim}D; use * for a product with a 0-d tensor"
        )
    if ad.shape[-1] != bd.shape[0 if bd.ndim == 1 else -2]:
        raise _shapes_error(ad, bd)
    if ad.dtype != bd.dtype:
        raise _dtype_error(ad, bd)
    try:
        data = ad @ bd
    except ValueError:
        raise _shapes_error(ad, bd) from None
    edges = edges_of(a, other)
    if edges is None:
        return plain(data, dev)
    dims = (ad.ndim, bd.ndim)
    if dims == (2, 2):
        flags = bd.flags
        node = MmBackward0.make(edges, (other, a), (flags.f_contiguous and not flags.c_contiguous,))
    elif dims == (1, 1) or dims == (2, 1):
        node = (DotBackward0 if dims == (1, 1) else MvBackward0).make(edges, (a, other))
    else:
        rule = SqueezeBackward4 if dims == (1, 2) else UnsafeViewBackward0
        fold = ad.ndim > 2 and bd.ndim <= 2
        node = rule.make(edges, (other, a), (ad.ndim == 1, bd.ndim == 1, fold))
    return record(node, data, dev)


def rmatmul(a: Tensor, b: Any) -> Tensor:
    """``b @ a`` for an array ``b``."""
    other = scalar_or_tensor(b, a)
    if type(other) is not Tensor:
        raise TypeError(f"matmul expects a Tensor or an array operand, got {type(b).__name__}")
    return matmul(other, a)


# ---- mm / bmm / dot / mv: matmul for one case, with PyTorch's checks ----

def mm(a: Tensor, mat2: Tensor) -> Tensor:
    """``(n, k) @ (k, m)``; both must be matrices."""
    b = tensor_arg(mat2, "mm", "mat2", 1)
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})"
        )
    return matmul(a, b)


def bmm(a: Tensor, mat2: Tensor) -> Tensor:
    """``(B, n, k) @ (B, k, m)``; both must be 3-D with the same batch size (no broadcast)."""
    b = tensor_arg(mat2, "bmm", "mat2", 1)
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[:2] != (a.shape[0], a.shape[2]):
        raise RuntimeError(
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}]."
        )
    if a.dtype != b.dtype:
        raise _dtype_error(a, b)
    dev = check_same_device(a, b)
    data = a.data @ b.data
    edges = edges_of(a, b)
    if edges is None:
        return plain(data, dev)
    node = BmmBackward0.make(edges, (b, a), (False, False, False))
    return record(node, data, dev)


def dot(a: Tensor, tensor: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of one dtype and length."""
    b = tensor_arg(tensor, "dot", "tensor", 1)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype != b.dtype:
        raise _dtype_error(a, b)
    if a.shape != b.shape:
        n, m = a.shape[0], b.shape[0]
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
            f"number of elements, but got {n} and {m} elements respectively"
        )
    return matmul(a, b)


def mv(a: Tensor, vec: Tensor) -> Tensor:
    """``(n, k) @ (k,)``."""
    b = tensor_arg(vec, "mv", "vec", 1)
    if a.ndim != 2 or b.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
            f"vec ({b.shape[0]})"
        )
    return matmul(a, b)
