"""Structural ops: ``diagonal diag diag_embed trace tril triu tril_ triu_``; ``outer inner kron
tensordot addmm baddbmm``; ``movedim moveaxis swapaxes swapdims unflatten roll rot90
repeat_interleave tensor_split diff``.

``diagonal``, ``movedim``/``moveaxis``, ``swapaxes``/``swapdims``, ``unflatten`` and the
pieces of ``tensor_split`` are views, written in place as any view (Note [In-place writes
to views] in :mod:`.views`): ``diagonal``'s array is a strided view of its input's.
The ops PyTorch composes of other ops (outer, inner, kron, tensordot, movedim, swapaxes,
unflatten, repeat_interleave, tensor_split, diff) are composed here of the same ops, so
they record the same nodes. The others record their own node with a dual formula (Note
[Dual backward formulas]). ``diagonal`` and ``diag_embed`` are each other's backward:
the gradient of a diagonal is embedded into zeros by :func:`diagonal_backward`, which
records DiagonalBackwardBackward0 under ``create_graph``, as PyTorch does.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from .._tensor import Tensor, cpp_type_name, scalar_type_name
from ..grad_mode import no_grad
from . import _dual
from ._promote import promote_types
from ._record import check_same_device, edges_of, plain, tensor_arg
from ._rule import Rule, Saved
from .indexing import index_select
from .inplace import check_inplace, clone, commit_inplace, copy_
from .joining import cat
from .linalg import bmm, matmul
from .nn_ops import _check_linear_dtypes
from .reductions import as_array
from .shape import (
    UnsafeViewBackward0,
    _infer_shape,
    _reshaped,
    expand,
    flatten,
    permute,
    reshape,
    size_args,
    transpose,
    unsqueeze,
    view,
    wrap_dim,
)
from .views import as_view

__all__ = ["diagonal", "diag", "diag_embed", "diagonal_backward", "trace", "tril", "triu",
           "tril_", "triu_", "outer", "inner", "kron", "tensordot", "addmm", "baddbmm",
           "movedim", "moveaxis", "swapaxes", "swapdims", "unflatten", "roll", "rot90",
           "repeat_interleave", "tensor_split", "diff"]


# ---- diagonals: the array helpers ----

def _diagonal_length(n1: int, n2: int, offset: int) -> int:
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


def _diagonal_view(x: Any, offset: int, d1: int, d2: int) -> Any:
    """The array view of ``x``'s diagonal over dims ``d1``, ``d2`` (last dim of the result),
    writable if ``x`` is: NumPy's own ``diagonal`` is read-only."""
    if not isinstance(x, numpy.ndarray):
        return _dual.xp_of(x).diagonal(x, offset, d1, d2)
    length = _diagonal_length(x.shape[d1], x.shape[d2], offset)
    start = x
    if length:
        corner = [slice(None)] * x.ndim
        if offset >= 0:
            corner[d2] = slice(offset, None)
        else:
            corner[d1] = slice(-offset, None)
        start = x[tuple(corner)]
    rest = [i for i in range(x.ndim) if i != d1 and i != d2]
    shape = tuple(x.shape[i] for i in rest) + (length,)
    strides = tuple(x.strides[i] for i in rest) + (x.strides[d1] + x.strides[d2],)
    return numpy.lib.stride_tricks.as_strided(start, shape, strides, subok=True,
                                              writeable=x.flags.writeable)


def _embed_diagonal(values: Any, shape: tuple[int, ...], offset: int, d1: int, d2: int) -> Any:
    """Zeros of ``shape`` with the array ``values`` on their diagonal over ``d1``, ``d2``."""
    out = _dual.xp_of(values).zeros(shape, dtype=values.dtype)
    _diagonal_view(out, offset, d1, d2)[...] = values
    return out


def _diagonal_of(x: Any, offset: int, d1: int, d2: int) -> Any:
    """Dual: the diagonal of ``x`` (a Tensor: :func:`diagonal`; an array: a copy)."""
    if type(x) is Tensor:
        return diagonal(x, offset, d1, d2)
    return _diagonal_view(x, offset, d1, d2).copy()


# ---- diagonal / diag / diag_embed / trace ----

DiagonalBackwardBackward0 = Rule(
    "DiagonalBackwardBackward0", _diagonal_of, keeps=("offset", "dim1", "dim2"),
    doc="``diagonal_backward`` (under create_graph): its gradient is the diagonal again.")
DiagEmbedBackward0 = Rule(
    "DiagEmbedBackward0", _diagonal_of, keeps=DiagonalBackwardBackward0.keeps,
    doc="``diag_embed`` (and ``diag`` of a vector): the gradient's diagonal.")


def _embedded(t: Tensor, in_shape: tuple[int, ...], offset: int, d1: int, d2: int,
              rule: Rule) -> Tensor:
    """Zeros of ``in_shape`` with ``t`` on the diagonal (``d1``, ``d2`` wrapped), recorded as
    ``rule``."""
    with t.device.backend.device_guard(t.device.index):  # zeros on t's device
        data = _embed_diagonal(t.data, in_shape, offset, d1, d2)
    return rule.record((t,), data, t.device, (), (offset, d1, d2))


def diagonal_backward(grad: Any, in_shape: tuple[int, ...], offset: int, d1: int,
                      d2: int) -> Any:
    """Dual: zeros of ``in_shape`` with ``grad`` on the diagonal (``d1``, ``d2`` wrapped), a
    Tensor recorded as DiagonalBackwardBackward0."""
    if type(grad) is not Tensor:
        return _embed_diagonal(grad, in_shape, offset, d1, d2)
    return _embedded(grad, in_shape, offset, d1, d2, DiagonalBackwardBackward0)


DiagonalBackward0 = Rule(
    "DiagonalBackward0", diagonal_backward, keeps=("in_shape", "offset", "dim1", "dim2"),
    doc="``diagonal(offset, dim1, dim2)``: the gradient embedded into zeros of the input's "
        "shape.")
DiagonalBackward0_copy = Rule(  # PyTorch's name for diag's 2-D case
    "DiagonalBackward0_copy", diagonal_backward, keeps=DiagonalBackward0.keeps,
    doc="``diag`` of a matrix: a copy of its diagonal.")


def _diagonal_dims(ndim: int, dim1: Any, dim2: Any) -> tuple[int, int]:
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _diagonal(t: Tensor, offset: int, d1: int, d2: int, rule: Rule, is_view: bool) -> Tensor:
    data = _diagonal_view(t.data, offset, d1, d2)
    if not is_view:
        data = data.copy()
    out = rule.record((t,), data, t.device, (), (t.shape, offset, d1, d2))
    return as_view(out, t) if is_view else out


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The diagonal of ``input`` over ``dim1``, ``dim2`` (above the main one by ``offset``), as
    the last dim of a view; the other dims keep their order."""
    d1, d2 = _diagonal_dims(input.ndim, dim1, dim2)
    return _diagonal(input, operator.index(offset), d1, d2, DiagonalBackward0, is_view=True)


def _diag_embed(t: Tensor, offset: int, d1: int, d2: int) -> Tensor:
    size = t.shape[-1] + abs(offset)
    shape = list(t.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, size)
    return _embedded(t, tuple(shape), offset, d1, d2, DiagEmbedBackward0)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """Matrices (over the new dims ``dim1``, ``dim2``) with the last dim of ``input`` on their
    diagonal ``offset``, zeros elsewhere (a copy)."""
    d1, d2 = _diagonal_dims(input.ndim + 1, dim1, dim2)
    return _diag_embed(input, operator.index(offset), d1, d2)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """A vector's square matrix with it on diagonal ``diagonal``; a matrix's diagonal (a copy)."""
    offset = operator.index(diagonal)
    if input.ndim == 1:
        return _diag_embed(input, offset, 0, 1)
    if input.ndim == 2:
        return _diagonal(input, offset, 0, 1, DiagonalBackward0_copy, is_view=False)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def _trace_grad(g: Any, in_shape: tuple[int, int]) -> Any:
    """The gradient (0-d) on the diagonal of zeros of the input's shape."""
    n, m = in_shape
    return diagonal_backward(_dual.expand(g, (min(n, m),)), in_shape, 0, 0, 1)


TraceBackward0 = Rule("TraceBackward0", _trace_grad, keeps=("in_shape",),
                      doc="``trace`` of a matrix.")


def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of a matrix's main diagonal; integer matrices give int64, as ``sum``."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    dtype = input.data.dtype
    if dtype.kind == "b":
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if dtype.kind in "iu":
        dtype = numpy.dtype(numpy.int64)
    data = as_array(input.device.xp.trace(input.data, dtype=dtype))
    return TraceBackward0.record((input,), data, input.device, (), (input.shape,))


# ---- tril / triu ----

def _triangle(x: Any, k: int, upper: bool) -> Any:
    """Dual: the upper (``triu``) or lower (``tril``) triangle of the last two dims of ``x``."""
    if type(x) is Tensor:
        return _triangular(x, k, upper)
    xp = _dual.xp_of(x)
    return xp.triu(x, k) if upper else xp.tril(x, k)


TrilBackward0 = Rule("TrilBackward0", lambda g, k: _triangle(g, k, upper=False),
                     keeps=("diagonal",),
                     doc="``tril(diagonal)`` (also in place): the gradient's lower triangle.")
TriuBackward0 = Rule("TriuBackward0", lambda g, k: _triangle(g, k, upper=True),
                     keeps=("diagonal",),
                     doc="``triu(diagonal)`` (also in place): the gradient's upper triangle.")


def _triangle_args(t: Tensor, diagonal: Any, upper: bool) -> tuple[int, Rule]:
    if t.ndim < 2:
        raise RuntimeError(
            f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    return operator.index(diagonal), TriuBackward0 if upper else TrilBackward0


def _triangular(t: Tensor, diagonal: Any, upper: bool) -> Tensor:
    k, rule = _triangle_args(t, diagonal, upper)
    return rule.record((t,), _triangle(t.data, k, upper), t.device, (), (k,))


def _triangular_(t: Tensor, diagonal: Any, upper: bool) -> Tensor:
    k, rule = _triangle_args(t, diagonal, upper)
    edges = edges_of(t)
    check_inplace(t, edges)
    node = None if edges is None else rule.make(edges, (), (k,))
    t.data[...] = _triangle(t.data, k, upper)
    return commit_inplace(t, node)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The lower triangle (on and below diagonal ``diagonal``) of the last two dims; zeros above."""
    return _triangular(input, diagonal, upper=False)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The upper triangle (on and above diagonal ``diagonal``) of the last two dims; zeros below."""
    return _triangular(input, diagonal, upper=True)


def tril_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """:func:`tril` in place."""
    return _triangular_(input, diagonal, upper=False)


def triu_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """:func:`triu` in place."""
    return _triangular_(input, diagonal, upper=True)


# ---- products: outer / inner / kron / tensordot ----

def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    """``input[i] * vec2[j]`` for two vectors (types promote, as ``*``; MulBackward0)."""
    vec2 = tensor_arg(vec2, "outer", "vec2", 1)
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return reshape(input, input.shape[0], 1) * vec2


def _dim_list(dims: Any) -> list[int]:
    if not isinstance(dims, (list, tuple)):
        raise TypeError("tensordot(): argument 'dims_self' (position 3) must be tuple of ints, "
                        f"not {type(dims).__name__}")
    return [operator.index(d) for d in dims]


def _contracted_dims(a: Tensor, b: Tensor, dims: Any) -> tuple[list[int], list[int]]:
    """tensordot's ``dims`` (a count, a pair of lists, or a tensor of either) as two lists."""
    if isinstance(dims, Tensor):
        dims = dims.item() if dims.numel() == 1 else dims.tolist()
    if isinstance(dims, (list, tuple)):
        dims_a, dims_b = dims
        return _dim_list(dims_a), _dim_list(dims_b)
    if isinstance(dims, bool) or not isinstance(dims, int):
        raise RuntimeError(
            "tensordot expects dims to be int or tuple[list[int], list[int]] or "
            f"list[list[int]] containing two lists, but got dims={dims}"
        )
    if dims < 0:
        raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
    if dims > min(a.ndim, b.ndim):
        raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
    return list(range(-dims, 0)), list(range(dims))


def _unique_dims(dims: list[int], ndim: int) -> list[int]:
    wrapped = [wrap_dim(d, ndim) for d in dims]
    for i, d in enumerate(wrapped):
        if d in wrapped[:i]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return wrapped


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """The sum of ``a * b`` over the paired dims ``dims`` (the last ``dims`` of a with the
    first of b, or two lists): a's other dims, then b's. Made, as PyTorch does, of permute,
    reshape and one matrix product (a size-1 dim against a larger one is summed first)."""
    a = tensor_arg(a, "tensordot", "a")
    b = tensor_arg(b, "tensordot", "b", 1)
    dims_a, dims_b = _contracted_dims(a, b, dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    check_same_device(a, b)
    wa, wb = _unique_dims(dims_a, a.ndim), _unique_dims(dims_b, b.ndim)
    left, right = a, b
    for i, (da, db) in enumerate(zip(wa, wb)):
        sa, sb = a.shape[da], b.shape[db]
        if sb == 1:
            left = left.sum(da, keepdim=True)
        elif sa == 1:
            right = right.sum(db, keepdim=True)
        elif sa != sb:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {sa} in dim "
                f"{dims_a[i]} and second has size {sb} in dim {dims_b[i]}"
            )
    free_a = [d for d in range(a.ndim) if d not in wa]
    free_b = [d for d in range(b.ndim) if d not in wb]
    kept_a = [a.shape[d] for d in free_a]
    kept_b = [b.shape[d] for d in free_b]
    size = math.prod(left.shape[d] for d in wa)
    left = reshape(permute(left, free_a + wa), math.prod(kept_a), size)
    right = reshape(permute(right, wb + free_b), size, math.prod(kept_b))
    return reshape(matmul(left, right), kept_a + kept_b)


def inner(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The sum of products over the last dims of both (``tensordot`` of them); a 0-d
    operand multiplies."""
    other = tensor_arg(other, "inner", "other", 1)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            "inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}"
        )
    return tensordot(input, other, ([-1], [-1]))


def kron(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The Kronecker product: block ``i`` of the result is ``input[i] * other`` (the fewer dims
    are padded with leading 1s; types promote, as ``*``; UnsafeViewBackward0)."""
    other = tensor_arg(other, "kron", "other", 1)
    ndim = max(input.ndim, other.ndim)
    a_shape = (1,) * (ndim - input.ndim) + input.shape
    b_shape = (1,) * (ndim - other.ndim) + other.shape
    spread_a: list[int] = []
    spread_b: list[int] = []
    for n, m in zip(a_shape, b_shape):
        spread_a += (n, 1)
        spread_b += (1, m)
    product = reshape(input, spread_a) * reshape(other, spread_b)
    shape = tuple(n * m for n, m in zip(a_shape, b_shape))
    # the product is fresh, seen by nobody: the result may share its memory (PyTorch's
    # _unsafe_view)
    return _reshaped(product, product.data.reshape(shape), UnsafeViewBackward0, view=False)


# ---- addmm / baddbmm ----

def _scaled(g: Any, alpha: Any) -> Any:
    return g if alpha == 1 else g * alpha


def _addmm_rule(name: str, doc: str, variant: str | None = None) -> Rule:
    """The rule of ``beta * input + alpha * (mat1 @ mat2)``, batched or not: d input = beta g
    (summed to its shape by the engine), d mat1 = alpha g mat2^T, d mat2 = alpha mat1^T g.
    Saves mat1 if mat2 needs a gradient and mat2 if mat1 does (in that order)."""
    return Rule(
        name,
        lambda g, mat1, mat2, alpha, beta: _scaled(g, beta),
        lambda g, mat1, mat2, alpha, beta: _scaled(g, alpha) @ _dual.swap_last(mat2),
        lambda g, mat1, mat2, alpha, beta: _dual.swap_last(mat1) @ _scaled(g, alpha),
        saves=(Saved("mat1", only_for=2), Saved("mat2", only_for=1)), keeps=("alpha", "beta"),
        doc=doc, variant=variant)


# nn_ops' node of this name is linear's, whose weight is mat2 transposed
AddmmBackward0 = _addmm_rule("AddmmBackward0", "``beta * input + alpha * (mat1 @ mat2)``.",
                             variant="addmm")
BaddbmmBackward0 = _addmm_rule("BaddbmmBackward0", "``baddbmm``: addmm's formulas, batched.")


def _add_scaled(input: Tensor, product: Any, beta: Any, alpha: Any) -> Any:
    """``beta * input + alpha * product`` in the product's dtype; ``input`` must expand to
    its shape and is not read when ``beta`` is 0 (its NaNs do not propagate)."""
    with no_grad():
        bias = expand(input, product.shape).data
    dtype = product.dtype
    if alpha != 1:
        product = product * alpha
    if beta != 0:
        product = product + (bias if beta == 1 else bias * beta)
    return product.astype(dtype, copy=False)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1,  # noqa: A002
          alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to the product's shape
    and all three share one dtype."""
    input = tensor_arg(input, "addmm", "input")  # noqa: A001
    mat1 = tensor_arg(mat1, "addmm", "mat1", 1)
    mat2 = tensor_arg(mat2, "addmm", "mat2", 2)
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})"
        )
    _check_linear_dtypes(mat1.data, mat2.data, input.data)
    check_same_device(input, mat1)
    check_same_device(mat1, mat2)
    data = _add_scaled(input, mat1.data @ mat2.data, beta, alpha)
    return AddmmBackward0.record((input, mat1, mat2), data, mat1.device, (mat1, mat2),
                                 (alpha, beta))


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,  # noqa: A002
            alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``; ``input`` broadcasts to the product's
    shape and all three share one dtype."""
    input = tensor_arg(input, "baddbmm", "input")  # noqa: A001
    batch1 = tensor_arg(batch1, "baddbmm", "batch1", 1)
    batch2 = tensor_arg(batch2, "baddbmm", "batch2", 2)
    with no_grad():
        product = bmm(batch1, batch2).data  # bmm's checks of the batches
    if input.dtype != batch1.dtype:
        names = (cpp_type_name(t.data.dtype) for t in (input, batch1, batch2))
        raise RuntimeError("Input dtypes must be the same, got: input {}, batch1: {}, "
                           "batch2: {}".format(*names))
    check_same_device(input, batch1)
    data = _add_scaled(input, product, beta, alpha)
    return BaddbmmBackward0.record((input, batch1, batch2), data, batch1.device,
                                   (batch1, batch2), (alpha, beta))


# ---- dims: movedim / swapaxes / unflatten ----

def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints as a tuple."""
    return size_args((value,), what)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:  # noqa: A002
    """``input`` with its dims ``source`` moved to the places ``destination``, the others
    keeping their order (a view; PermuteBackward0)."""
    src = list(_int_tuple(source, "movedim"))
    dst = list(_int_tuple(destination, "movedim"))
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
            f"the same number of dims as destination ({dst} dims)"
        )
    ws = [wrap_dim(d, input.ndim) for d in src]
    wd = [wrap_dim(d, input.ndim) for d in dst]
    for name, given, wrapped in (("source", src, ws), ("destination", dst, wd)):
        if len(set(wrapped)) != len(wrapped):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({given})")
    if input.ndim == 0:  # PyTorch's alias of the tensor
        return input[...]
    order = [d for d in range(input.ndim) if d not in ws]
    for d, s in sorted(zip(wd, ws)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:  # noqa: A002
    """``transpose(axis0, axis1)`` (a view; TransposeBackward0)."""
    return transpose(input, axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    """``transpose(dim0, dim1)`` (a view; TransposeBackward0)."""
    return transpose(input, dim0, dim1)


def _unflattened_sizes(sizes: tuple[int, ...], size: int, d: int) -> tuple[int, ...]:
    """``sizes`` with its -1 (if any) filled in so they multiply up to ``size``: PyTorch's
    ``infer_size`` over the one dim (``shape._infer_shape``), with unflatten's errors."""
    try:
        return _infer_shape(sizes, size)
    except RuntimeError as exc:
        if "is invalid for input of size" in str(exc):
            raise RuntimeError(
                f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
                f"{d} ({size}) in the input tensor"
            ) from None
        raise RuntimeError(f"unflatten got an unexpected error:\n{exc}") from None


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:  # noqa: A002
    """Dim ``dim`` split into dims of ``sizes`` (one may be -1), a view (ViewBackward0)."""
    sizes = size_args((tuple(sizes),), "unflatten")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if input.ndim == 0:
        raise RuntimeError("unflatten got an unexpected error:\nDimension specified as "
                           f"{dim} but tensor has no dimensions")
    d = wrap_dim(dim, input.ndim)
    sizes = _unflattened_sizes(sizes, input.shape[d], d)
    return view(input, input.shape[:d] + sizes + input.shape[d + 1:])


# ---- roll / rot90 ----

def _rolled(x: Any, shifts: tuple[int, ...], dims: tuple[int, ...]) -> Any:
    """Dual: ``x`` rolled by ``shifts`` along ``dims`` (none: flattened and back)."""
    if type(x) is Tensor:
        return roll(x, shifts, dims)
    xp = _dual.xp_of(x)
    return xp.roll(x, shifts, dims) if dims else xp.roll(x, shifts[0])


RollBackward0 = Rule(
    "RollBackward0", lambda g, shifts, dims: _rolled(g, tuple(-s for s in shifts), dims),
    keeps=("shifts", "dims"), doc="``roll(shifts, dims)``: the gradient rolled back.")


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:  # noqa: A002
    """Elements shifted by ``shifts[i]`` along ``dims[i]``, wrapping around; with no ``dims``
    the flattened tensor is rolled and reshaped back (a copy)."""
    shift = _int_tuple(shifts, "roll")
    axes = () if dims is None else _int_tuple(dims, "roll")
    if not shift:
        raise RuntimeError("`shifts` required")
    if len(shift) != len(axes) and (axes or len(shift) != 1):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shift)}, dims:{len(axes)}")
    if input.ndim == 0 and axes:
        raise IndexError(f"Dimension specified as {axes[0]} but tensor has no dimensions")
    axes = tuple(wrap_dim(d, input.ndim) for d in axes)
    data = _dual.contiguous(_rolled(input.data, shift, axes))
    return RollBackward0.record((input,), data, input.device, (), (shift, axes))


def _rotated(x: Any, k: int, dims: tuple[int, int]) -> Any:
    """Dual: ``x`` turned ``k`` quarter turns from dim ``dims[0]`` towards ``dims[1]``."""
    if type(x) is Tensor:
        return rot90(x, k, dims)
    return _dual.xp_of(x).rot90(x, k, dims)


Rot90Backward0 = Rule("Rot90Backward0", lambda g, k, dims: _rotated(g, -k, dims),
                      keeps=("k", "dims"), doc="``rot90(k, dims)``: the gradient turned back.")


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:  # noqa: A002
    """``input`` turned ``k`` quarter turns in the plane ``dims``, from the first towards the
    second (a copy; an odd ``k`` gives PyTorch's transposed layout)."""
    dims = _int_tuple(dims, "rot90")
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = wrap_dim(dims[0], input.ndim), wrap_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {dims[0]} and "
            f"dim1 = {dims[1]}")
    turns = operator.index(k) % 4
    xp = input.device.xp
    if turns == 1:
        data = xp.flip(input.data, d1).copy().swapaxes(d0, d1)
    elif turns == 3:
        data = xp.flip(input.data, d0).copy().swapaxes(d0, d1)
    elif turns == 2:
        data = xp.flip(input.data, (d0, d1)).copy()
    else:
        data = input.data.copy()
    return Rot90Backward0.record((input,), data, input.device, (), (turns, (d0, d1)))


# ---- repeat_interleave / tensor_split / diff ----

def _repeat_counts(repeats: Tensor) -> Any:
    """The counts of a tensor of repeats (0-d or 1-d, integer, non-negative) as a vector."""
    r = repeats.data
    if r.dtype.kind not in "iu":
        raise NotImplementedError(f"\"repeat_interleave_{repeats.device.type}\" not "
                                  f"implemented for '{scalar_type_name(r.dtype)}'")
    if r.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if (r < 0).any():
        raise RuntimeError("repeats can not be negative")
    # CuPy's repeat takes the counts as a list
    return r.reshape(-1) if isinstance(r, numpy.ndarray) else r.reshape(-1).tolist()


def repeat_interleave(input: Tensor, repeats: Any = None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Tensor:
    """Each element (slice along ``dim``; none: of the flattened tensor) repeated
    ``repeats`` times (a number, or a tensor of counts, one per element or one for all):
    a number records PyTorch's unsqueeze-expand-clone-view, counts IndexSelectBackward0.
    ``repeat_interleave(counts)`` alone gives ``arange(len(counts))`` so repeated."""
    xp, device = input.device.xp, input.device
    if repeats is None:
        counts = _repeat_counts(input)
        with device.backend.device_guard(device.index):  # the indices are made on the device
            index = xp.repeat(xp.arange(len(counts), dtype=numpy.int64), counts)
        return plain(index, device)
    src = flatten(input) if dim is None else input
    d = wrap_dim(0 if dim is None else dim, src.ndim)
    if isinstance(repeats, Tensor):
        n = src.shape[d] if src.ndim else 1
        counts = _repeat_counts(repeats)
        if len(counts) != n and len(counts) != 1:
            raise RuntimeError(
                "repeats must have the same size as input along dim, but got "
                f"repeats.size(0) = {len(counts)} and input.size({d}) = {n}")
        with device.backend.device_guard(device.index):
            index = xp.repeat(xp.arange(n, dtype=numpy.int64),
                              counts if len(counts) == n else int(counts[0]))
        if output_size is not None and output_size != index.size:
            raise RuntimeError("allocated size does not match required size")
        return index_select(src, d, plain(index, device))
    times = operator.index(repeats)
    if times < 0:
        raise RuntimeError("Repeats must be non-negative")
    spread = unsqueeze(src, d + 1)
    if output_size is not None and output_size != src.shape[d] * times:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected "
                           f"{src.shape[d] * times} but got {output_size}")
    shape = spread.shape[:d + 1] + (times,) + spread.shape[d + 2:]
    # flatten(d, d + 1), the merged size given: a -1 would be ambiguous if another dim is 0
    return reshape(clone(expand(spread, shape)),
                   src.shape[:d] + (src.shape[d] * times,) + src.shape[d + 1:])


def _split_bounds(t: Tensor, spec: Any, d: int) -> list[int]:
    """The inner boundaries of tensor_split's pieces along ``d``."""
    if isinstance(spec, Tensor):
        if spec.ndim > 1:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                f"one-dimensional tensor, but got a tensor with {spec.ndim} dims")
        if spec.data.dtype != numpy.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have "
                               f"dtype of long, but got {scalar_type_name(spec.data.dtype)}")
        spec = spec.item() if spec.ndim == 0 else spec.tolist()
    if isinstance(spec, (list, tuple)):
        return list(size_args((tuple(spec),), "tensor_split"))
    sections = operator.index(spec)
    if sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
    base, extra = divmod(t.shape[d], sections)
    bounds, end = [], 0
    for i in range(sections - 1):
        end += base + (i < extra)
        bounds.append(end)
    return bounds


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """``input`` cut along ``dim`` into ``sections`` near-equal pieces (the first ones one
    longer) or at ``indices`` (as Python slices): views (SliceBackward0) that may be written."""
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = wrap_dim(dim, input.ndim)
    bounds = _split_bounds(input, indices_or_sections, d)
    lead = (slice(None),) * d
    return tuple(input[lead + (slice(start, end),)]
                 for start, end in zip([0] + bounds, bounds + [None]))


def _diff_operand(t: Tensor, value: Any, d: int, name: str) -> Tensor:
    """Check ``prepend``/``append`` against ``t`` (all sizes but ``d``'s must match)."""
    other = tensor_arg(value, "diff", name)
    if other.ndim != t.ndim:
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    for i, (n, m) in enumerate(zip(t.shape, other.shape)):
        if i != d and n != m:
            raise RuntimeError(
                "diff expects the shape of tensor to prepend or append to match that of input "
                f"except along the differencing dimension; input.size({i}) = {n}, but got "
                f"tensor.size({i}) = {m}")
    return other


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,  # noqa: A002
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``x[i + 1] - x[i]``, xor for bool),
    after ``prepend`` and ``append`` are joined on (types promote as PyTorch's ``cat``); each
    step is one element shorter. ``n=0`` gives a copy of ``input`` alone."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    order = operator.index(n)
    if order < 0:
        raise RuntimeError(f"order must be non-negative but got {order}")
    d = wrap_dim(dim, input.ndim)
    parts = [input]
    if prepend is not None:
        parts.insert(0, _diff_operand(input, prepend, d, "prepend"))
    if append is not None:
        parts.append(_diff_operand(input, append, d, "append"))
    if order == 0:  # PyTorch's zeros_like(input).copy_(input), prepend and append unused
        return copy_(plain(input.device.xp.zeros_like(input.data), input.device), input)
    if len(parts) > 1:
        # NumPy's concatenate promotes as PyTorch but for an integer or bool part among
        # floats (Note [Type promotion]): a part of another kind than the result (so never
        # requiring grad) is cast to it first
        dtype = functools.reduce(promote_types, (t.dtype for t in parts))
        input = cat([t if t.dtype.kind == dtype.kind else t.to(dtype) for t in parts], d)
    if input.shape[d] == 0:  # PyTorch returns the (empty) input itself
        return input
    result = input
    length = input.shape[d] - 1
    lead = (slice(None),) * d
    for _ in range(min(order, input.shape[d])):
        later = result[lead + (slice(1, 1 + length),)]
        earlier = result[lead + (slice(0, length),)]
        result = later.logical_xor(earlier) if later.dtype == bool else later - earlier
        length -= 1
    return result
