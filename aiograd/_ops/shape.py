"""Shape ops: ``reshape view view_as reshape_as flatten transpose permute t T mT expand
squeeze unsqueeze contiguous is_contiguous flip repeat``.

Results that are NumPy/CuPy views of their input are *views* in PyTorch's
sense too: see Note [Views share the version counter]. Every backward here
is a pure re-shaping of the gradient (``expand``'s and ``repeat``'s sums), so
it records the inverse shape op under ``create_graph``. ``flip`` and
``repeat`` copy, as in PyTorch.

Note [Views share the version counter]
    A view ``v`` of ``t`` writes the same memory, so an in-place change
    through either is a change of both: ``v._vc is t._vc`` and ``v._base``
    is the root tensor whose memory they share (never another view). An
    in-place write to either rewrites the history of the root and of its
    views: see Note [In-place writes to views] in :mod:`.views`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy

from .._broadcast import sum_dims, sum_to_shape
from .._tensor import Tensor
from .._warn import warn_user
from . import _dual
from ._record import tensor_arg
from ._rule import Rule
from .inplace import clone
from .views import as_view

__all__ = ["wrap_dim", "size_args", "t", "flip", "repeat"]


# ---- helpers shared with indexing and joining ----

def wrap_dim(dim: Any, ndim: int) -> int:
    """``dim`` as an index in ``range(max(ndim, 1))``; negative dims count from the end."""
    if isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {dim!r}")
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"dim must be an int, got {type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})"
        )
    return d % n


def size_args(args: Sequence[Any], what: str) -> tuple[int, ...]:
    """Sizes given as ints or as one tuple/list (``reshape(2, 3)`` or ``reshape((2, 3))``)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    sizes = []
    for s in args:
        if isinstance(s, bool):
            raise TypeError(f"{what}(): sizes must be ints, got {tuple(args)!r}")
        try:
            sizes.append(operator.index(s))
        except TypeError:
            raise TypeError(f"{what}(): sizes must be ints, got {tuple(args)!r}") from None
    return tuple(sizes)


def _infer_shape(shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """``shape`` with a -1 filled in so it holds ``numel`` elements (c10's ``infer_size``:
    the sizes are checked in order, the -1 is solved only from a nonzero product)."""
    unknown = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            if unknown is not None:
                raise RuntimeError("only one dimension can be inferred")
            unknown = i
        elif s >= 0:
            known *= s
        else:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
    if numel == known or (unknown is not None and known > 0 and numel % known == 0):
        if unknown is None:
            return shape
        if known == 0:
            raise RuntimeError(
                f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                "unspecified dimension size -1 can be any value and is ambiguous"
            )
        return shape[:unknown] + (numel // known,) + shape[unknown + 1:]
    raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")


# ---- reshape / view / flatten / squeeze / unsqueeze ----

def _reshape_rule(name: str, doc: str, variant: str | None = None) -> Rule:
    """The rule of an op that only changes the shape: the gradient is reshaped back."""
    return Rule(name, _dual.reshape, keeps=("in_shape",), doc=doc, variant=variant)


ViewBackward0 = _reshape_rule("ViewBackward0", "``t.view(shape)``: a view.")
# linalg's matmul records a node of this name too, with its own formula
UnsafeViewBackward0 = _reshape_rule(
    "UnsafeViewBackward0", "A reshape that had to copy (the result is not a view).",
    variant="reshape")
SqueezeBackward0 = _reshape_rule("SqueezeBackward0", "``squeeze()``: all size-1 dims.")
SqueezeBackward1 = _reshape_rule("SqueezeBackward1", "``squeeze(dim)``.")
SqueezeBackward2 = _reshape_rule("SqueezeBackward2", "``squeeze((d0, d1, ...))``.")
UnsqueezeBackward0 = _reshape_rule("UnsqueezeBackward0", "``unsqueeze(dim)``.")


def _reshaped(t: Tensor, data: Any, rule: Rule, view: bool) -> Tensor:
    out = rule.record((t,), data, t.device, (), (t.shape,))
    return as_view(out, t) if view else out


def _reshape(t: Tensor, shape: tuple[int, ...], view_only: bool) -> Tensor:
    shape = _infer_shape(shape, t.numel())
    data = t.data.reshape(shape)
    # A copy never overlaps its source; a view always does (unless empty).
    is_view = data.size == 0 or t.device.xp.may_share_memory(data, t.data)
    if view_only and not is_view:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return _reshaped(t, data, ViewBackward0 if is_view else UnsafeViewBackward0, is_view)


def reshape(t: Tensor, *shape: Any) -> Tensor:
    """A tensor with ``t``'s elements in ``shape`` (one size may be -1): a view when possible."""
    return _reshape(t, size_args(shape, "reshape"), view_only=False)


def view(t: Tensor, *shape: Any) -> Tensor:
    """Like :func:`reshape`, but raises instead of copying."""
    return _reshape(t, size_args(shape, "view"), view_only=True)


def view_as(t: Tensor, other: Tensor) -> Tensor:
    """``t.view(other.shape)``."""
    return _reshape(t, tensor_arg(other, "view_as", "other", 1).shape, view_only=True)


def reshape_as(t: Tensor, other: Tensor) -> Tensor:
    """``t.reshape(other.shape)``."""
    return _reshape(t, tensor_arg(other, "reshape_as", "other", 1).shape, view_only=False)


def flatten(t: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` (inclusive) into one; ``t`` itself if they are one."""
    if t.ndim == 0:  # its dims are -1 and 0, as PyTorch's (a 0-d tensor takes one dim)
        wrap_dim(start_dim, 0)
        wrap_dim(end_dim, 0)
        return _reshape(t, (1,), view_only=False)
    start = wrap_dim(start_dim, t.ndim)
    end = wrap_dim(end_dim, t.ndim)
    if start > end:
        raise RuntimeError(
            f"flatten() has invalid args: start_dim ({start_dim}) cannot come after "
            f"end_dim ({end_dim})"
        )
    if start == end:
        return t
    shape = t.shape
    merged = math.prod(shape[start:end + 1])  # not -1: ambiguous when another dim is 0
    return _reshape(t, shape[:start] + (merged,) + shape[end + 1:], view_only=False)


def squeeze(t: Tensor, dim: Any = None) -> Tensor:
    """Remove size-1 dims: all of them, ``dim``, or the dims in a tuple (others are kept)."""
    if dim is None:
        axes = tuple(i for i, n in enumerate(t.shape) if n == 1)
        rule = SqueezeBackward0
    elif isinstance(dim, (tuple, list)):
        dims = [wrap_dim(d, t.ndim) for d in dim]
        for i, d in enumerate(dims):
            if d in dims[:i]:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        axes = tuple(d for d in sorted(dims) if t.ndim and t.shape[d] == 1)
        rule = SqueezeBackward2
    else:
        d = wrap_dim(dim, t.ndim)
        axes = (d,) if t.ndim and t.shape[d] == 1 else ()
        rule = SqueezeBackward1
    return _reshaped(t, t.device.xp.squeeze(t.data, axis=axes), rule, view=True)


def unsqueeze(t: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (in ``[-ndim - 1, ndim]``)."""
    d = wrap_dim(dim, t.ndim + 1)
    return _reshaped(t, t.device.xp.expand_dims(t.data, d), UnsqueezeBackward0, view=True)


# ---- transpose / permute ----

def _transpose_grad(g: Any, dim0: int, dim1: int) -> Any:
    if dim0 == dim1:  # also a 0-d input, whose gradient has no dim to swap
        return g
    return _dual.transpose(g, dim0, dim1)


TransposeBackward0 = Rule("TransposeBackward0", _transpose_grad, keeps=("dim0", "dim1"),
                          doc="``t.transpose(dim0, dim1)`` (dims wrapped): its own inverse.")
TBackward0 = Rule("TBackward0", lambda g: t(g) if type(g) is Tensor else g.T,
                  doc="``t.t()`` of a tensor with at most 2 dims: its own inverse.")
PermuteBackward0 = Rule("PermuteBackward0", _dual.permute, keeps=("inverse",),
                        doc="Invariant: ``inverse[dims[i]] == i`` for the forward's ``dims``.")


def transpose(t: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dims ``dim0`` and ``dim1`` (a view)."""
    d0 = wrap_dim(dim0, t.ndim)
    d1 = wrap_dim(dim1, t.ndim)
    data = t.data.swapaxes(d0, d1) if t.ndim else t.data[...]
    return as_view(TransposeBackward0.record((t,), data, t.device, (), (d0, d1)), t)


def permute(t: Tensor, *dims: Any) -> Tensor:
    """Reorder the dims: dim ``i`` of the result is dim ``dims[i]`` of ``t`` (a view)."""
    order = size_args(dims, "permute")
    if len(order) != t.ndim:
        raise RuntimeError(
            "permute(): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {t.ndim} is not equal "
            f"to len(dims) = {len(order)}"
        )
    wrapped = tuple(wrap_dim(d, t.ndim) for d in order)
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"permute(): duplicate dims are not allowed, got {list(order)}")
    data = t.data.transpose(wrapped)
    inverse = [0] * len(wrapped)
    for i, d in enumerate(wrapped):
        inverse[d] = i
    return as_view(PermuteBackward0.record((t,), data, t.device, (), (tuple(inverse),)), t)


def reversed_dims(t: Tensor) -> Tensor:
    """All dims reversed (PyTorch's ``.T``)."""
    return permute(t, *range(t.ndim - 1, -1, -1))


def t(x: Tensor) -> Tensor:  # the name PyTorch gives the method
    """The transpose of a tensor of at most 2 dims (a view; 0-d and 1-d: the same values)."""
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return as_view(TBackward0.unary(x, x.data.T), x)


def matrix_transpose(x: Tensor) -> Tensor:
    """The last two dims swapped (PyTorch's ``.mT``); a 0-d tensor is itself (deprecated)."""
    if x.ndim < 2:
        if x.ndim == 1:
            raise RuntimeError(
                "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor."
            )
        warn_user("Tensor.mT is deprecated on 0-D tensors. This function is the identity "
                  "in these cases.")
        return x
    return transpose(x, -2, -1)


# ---- expand ----

ExpandBackward0 = Rule(
    "ExpandBackward0", sum_to_shape, keeps=("in_shape",),
    doc="The gradient is summed over the expanded dims (new leading dims and size-1 dims).")


def _expanded(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` broadcast to ``shape``, a view. A NumPy one stays writable, as PyTorch's: a
    write through it is refused only where it would hit one element twice (see
    ``check_inplace``); NumPy's ``broadcast_to`` would make it read-only."""
    if type(x) is not numpy.ndarray:
        return _dual.xp_of(x).broadcast_to(x, shape)
    lead = len(shape) - x.ndim
    strides = (0,) * lead + tuple(
        0 if have == 1 and want != 1 else stride
        for have, want, stride in zip(x.shape, shape[lead:], x.strides))
    return numpy.lib.stride_tricks.as_strided(x, shape, strides,
                                              writeable=x.flags.writeable)


def expand(t: Tensor, *sizes: Any) -> Tensor:
    """``t`` broadcast to ``sizes`` without copying (-1 keeps a dim); a view."""
    target = size_args(sizes, "expand")
    lead = len(target) - t.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand(): the number of sizes provided ({len(target)}) must be greater or equal "
            f"to the number of dimensions in the tensor ({t.ndim})"
        )
    shape = []
    for i, s in enumerate(target):
        have = t.shape[i - lead] if i >= lead else None
        if s == -1 and have is not None:
            s = have
        if s < 0:
            if have is None:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                    f"non-existing dimension {i}"
                )
            raise RuntimeError(f"expand(): invalid size {s} at dimension {i}; sizes must be "
                               "non-negative, or -1 to keep the existing size")
        if have is not None and s != have and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({have}) "
                f"at non-singleton dimension {i}.  Target sizes: {list(target)}.  Tensor "
                f"sizes: {list(t.shape)}"
            )
        shape.append(s)
    data = _expanded(t.data, tuple(shape))
    return as_view(ExpandBackward0.record((t,), data, t.device, (), (t.shape,)), t)


def expand_as(t: Tensor, other: Tensor) -> Tensor:
    return expand(t, *tensor_arg(other, "expand_as", "other", 1).shape)


# ---- select / narrow ----

def select(t: Tensor, dim: int, index: int) -> Tensor:
    """``t`` indexed by ``index`` along ``dim``, which goes (a view; SelectBackward0)."""
    if t.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, t.ndim)
    i = operator.index(index)
    size = t.shape[d]
    if not -size <= i < size:
        raise IndexError(
            f"select(): index {i} out of range for tensor of size {list(t.shape)} at "
            f"dimension {d}"
        )
    return t[(slice(None),) * d + (i,)]


def narrow(t: Tensor, dim: int, start: int, length: int) -> Tensor:
    """Elements ``start`` to ``start + length`` along ``dim`` (a view; SliceBackward0)."""
    if t.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, t.ndim)
    size = t.shape[d]
    begin = operator.index(start)
    if not -size <= begin <= size:
        raise IndexError(
            f"start out of range (expected to be in range of [{-size}, {size}], but got "
            f"{begin})"
        )
    begin %= size if size else 1
    n = operator.index(length)
    if n < 0 or begin + n > size:
        raise RuntimeError(f"start ({begin}) + length ({n}) exceeds dimension size ({size}).")
    return t[(slice(None),) * d + (slice(begin, begin + n),)]


# ---- trickier grads: repeat (a sum over the repeats) ----

def _repeat_grad(g: Any, in_shape: tuple[int, ...], padded: tuple[int, ...],
                 repeats: tuple[int, ...]) -> Any:
    """The gradient, split into (repeat, size) pairs of dims, summed over the repeats."""
    if not repeats:  # a 0-d input repeated by ()
        return g
    pairs: list[int] = []
    for r, n in zip(repeats, padded):
        pairs += (r, n)
    g = sum_dims(_dual.reshape(g, pairs), tuple(range(0, len(pairs), 2)))
    return _dual.reshape(g, in_shape)


RepeatBackward0 = Rule(
    "RepeatBackward0", _repeat_grad, keeps=("in_shape", "padded", "repeats"),
    doc="``t.repeat(*repeats)``. Invariant: ``len(padded) == len(repeats)``, ``padded`` is "
        "the input's shape with leading 1s.")


def repeat(t: Tensor, *sizes: Any) -> Tensor:
    """``t`` tiled ``sizes[i]`` times along dim ``i`` (a copy); extra leading sizes add dims."""
    if not sizes:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    repeats = size_args(sizes, "repeat")
    lead = len(repeats) - t.ndim
    if lead < 0:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    padded = (1,) * lead + t.shape
    if any(r < 0 for r in repeats):
        shape = [r * n for r, n in zip(repeats, padded)]
        bad = next(n for n in shape if n < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {shape}")
    data = (_dual.contiguous(t.device.xp.tile(t.data.reshape(padded), repeats)) if repeats
            else t.data.copy())
    return RepeatBackward0.record((t,), data, t.device, (), (t.shape, padded, repeats))


# ---- flip ----

def _flip_grad(g: Any, dims: tuple[int, ...]) -> Any:
    if not dims:
        return g
    if type(g) is Tensor:
        return flip(g, dims)
    return _dual.xp_of(g).flip(g, dims)


FlipBackward0 = Rule("FlipBackward0", _flip_grad, keeps=("dims",),
                     doc="``t.flip(dims)``: the gradient flipped back (``dims`` wrapped, "
                         "possibly empty).")


def flip(t: Tensor, dims: Any, *more: Any) -> Tensor:
    """``t`` with the order of its elements reversed along ``dims`` (a copy)."""
    if more or not isinstance(dims, (tuple, list)):
        dims = (dims, *more)
    axes = tuple(wrap_dim(d, t.ndim) for d in dims)
    for i, d in enumerate(axes):
        if d in axes[:i]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    if not t.ndim:
        axes = ()
    data = t.device.xp.flip(t.data, axes).copy() if axes else t.data.copy()
    return FlipBackward0.record((t,), data, t.device, (), (axes,))


# ---- contiguous ----

def contiguous(t: Tensor) -> Tensor:
    """``t`` itself if its array is C-contiguous, else a C-contiguous copy (CloneBackward0)."""
    if t.data.flags.c_contiguous:
        return t
    return clone(t)


def is_contiguous(t: Tensor) -> bool:
    """True if ``t``'s elements are in C order in memory (size-1 dims' strides aside)."""
    return bool(t.data.flags.c_contiguous)
