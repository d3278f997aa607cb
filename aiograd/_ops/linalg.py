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
from ..graph._node import Node
from . import _dual
from ._record import check_same_device, edges_of, plain, record, save, scalar_or_tensor, tensor_arg


class _MatmulNode(Node):
    """Saves ``self_`` (a) when b needs a gradient and ``other`` (b) when a does."""

    __slots__ = ("self_", "other")

    def release_variables(self) -> None:
        for saved in (self.self_, self.other):
            if saved is not None:
                saved.release()


class DotBackward0(_MatmulNode):
    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        ga = g * self.other.unpack(self, create_graph) if edges[0] is not None else None
        gb = g * self.self_.unpack(self, create_graph) if edges[1] is not None else None
        return (ga, gb)


class MvBackward0(_MatmulNode):
    """``(n, k) @ (k,)``: d a = g b^T (an outer product), d b = a^T g."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        ga = gb = None
        if edges[0] is not None:
            ga = _dual.unsqueeze(g, -1) * self.other.unpack(self, create_graph)
        if edges[1] is not None:
            gb = _dual.swap_last(self.self_.unpack(self, create_graph)) @ g
        return (ga, gb)


class MmBackward0(_MatmulNode):
    """``(n, k) @ (k, m)``: d a = g b^T, d b = a^T g.

    d b is produced in b's memory layout, as PyTorch does: when b is a
    transposed (column-major) view such as ``W.T``, d b = (g^T a)^T, so the
    gradient reaching ``W`` is row-major like ``W`` (its optimizer step then
    runs on contiguous memory) and can be kept without a copy.
    """

    # Invariant: b_transposed == b was column-major but not row-major in the forward.
    __slots__ = ("b_transposed",)

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        ga = gb = None
        if edges[0] is not None:
            ga = g @ _dual.swap_last(self.other.unpack(self, create_graph))
        if edges[1] is not None:
            a = self.self_.unpack(self, create_graph)
            if self.b_transposed:
                gb = _dual.swap_last(_dual.swap_last(g) @ a)
            else:
                gb = _dual.swap_last(a) @ g
        return (ga, gb)


class UnsafeViewBackward0(_MatmulNode):
    """Any other case: a 1-D operand is made a matrix (a row for a, a column for b).

    The gradient gets back the dims matmul dropped, the matrix formulas run
    batched, and a 1-D operand's gradient drops its dim again. When b has no
    batch dims, d b folds a's batch into rows: one (k, rows) @ (rows, m) product.
    """

    # Invariant: fold == (a.ndim > 2 and b.ndim <= 2): the batch dims are all a's.
    __slots__ = ("a_vec", "b_vec", "fold")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        if self.a_vec:
            g = _dual.unsqueeze(g, -2)
        if self.b_vec:
            g = _dual.unsqueeze(g, -1)
        ga = gb = None
        if self.next_edges[0] is not None:
            b = self.other.unpack(self, create_graph)
            if self.b_vec:
                b = _dual.unsqueeze(b, -1)
            ga = g @ _dual.swap_last(b)
            if self.a_vec:
                ga = _dual.reshape(ga, ga.shape[:-2] + ga.shape[-1:])
        if self.next_edges[1] is not None:
            a = self.self_.unpack(self, create_graph)
            if self.a_vec:
                a = _dual.unsqueeze(a, 0)
            if self.fold:
                rows = math.prod(a.shape[:-1])
                a = _dual.reshape(a, (rows, a.shape[-1]))
                g = _dual.reshape(g, (rows, g.shape[-1]))
            gb = _dual.swap_last(a) @ g
            if self.b_vec:
                gb = _dual.reshape(gb, gb.shape[:-1])
        return (ga, gb)


class SqueezeBackward4(UnsafeViewBackward0):
    """``(k,) @ (k, m)``."""

    __slots__ = ()


# The node of each (a.ndim, b.ndim); any other case is UnsafeViewBackward0.
_NODES: dict[tuple[int, int], type[_MatmulNode]] = {
    (1, 1): DotBackward0, (2, 1): MvBackward0, (2, 2): MmBackward0, (1, 2): SqueezeBackward4,
}


class BmmBackward0(UnsafeViewBackward0):
    """``bmm``: ``(B, n, k) @ (B, k, m)``."""

    __slots__ = ()


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
    node_cls = _NODES.get((ad.ndim, bd.ndim), UnsafeViewBackward0)
    node = node_cls(edges)
    if node_cls is DotBackward0 or node_cls is MvBackward0:  # PyTorch's order of saving
        node.self_ = save(a) if edges[1] is not None else None
        node.other = save(other) if edges[0] is not None else None
    else:
        node.other = save(other) if edges[0] is not None else None
        node.self_ = save(a) if edges[1] is not None else None
    if node_cls is MmBackward0:
        flags = bd.flags
        node.b_transposed = flags.f_contiguous and not flags.c_contiguous
    elif node_cls is UnsafeViewBackward0 or node_cls is SqueezeBackward4:
        node.a_vec = ad.ndim == 1
        node.b_vec = bd.ndim == 1
        node.fold = ad.ndim > 2 and bd.ndim <= 2
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
    node = BmmBackward0(edges)
    node.other = save(b) if edges[0] is not None else None  # PyTorch's order of saving
    node.self_ = save(a) if edges[1] is not None else None
    node.a_vec = node.b_vec = node.fold = False
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
