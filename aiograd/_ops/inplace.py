"""In-place ops: ``add_ sub_ mul_ div_ zero_ copy_``, ``+= -= *= /=``; and ``clone``.

Note [In-place ops]
    An in-place op writes into ``t.data`` and bumps ``t._vc.value``, so a
    SavedTensor of ``t`` (or of a view sharing its memory) refuses to unpack
    afterwards: the backward that needed the old value raises instead of
    computing a wrong gradient. When autograd is involved (grad mode is on
    and ``t`` or the other operand requires grad) ``t``'s history is
    *rebased*: a new node, whose first next edge is ``t``'s old edge, becomes
    ``t.grad_fn`` (PyTorch's ``rebase_history``); when ``t`` is a view, the
    node goes into its root's ``CopySlices`` instead (Note [In-place writes
    to views] in :mod:`.views`). Refused, as in PyTorch: a leaf that requires
    grad, or a view of one (its ``.grad`` would belong to a value that no
    longer exists), and a view made in no_grad mode.

The formulas are those of the out-of-place ops (the nodes of
:mod:`.arithmetic` are reused); a value the formula needs from before the
write is saved as a copy carrying ``t``'s old history.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy

from .. import _defaults
from .._tensor import _INFERENCE, Tensor, checked_fill, scalar_type_name
from ..grad_mode import _grad_enabled, _inference
from ..graph._node import Node
from . import _dual
from ._promote import result_type
from ._record import (
    check_same_device,
    edges_of,
    edges_with_number,
    save,
    scalar_or_tensor,
)
from ._rule import Rule, identity
from .arithmetic import (
    AddAlphaBackward0,
    AddBackward0,
    DivBackward0,
    DivByNumberBackward0,
    MulBackward0,
    MulByNumberBackward0,
    SubAlphaBackward0,
    SubBackward0,
    check_sub_bool,
    combine_alpha,
    wrap_int,
)
from .arithmetic import pow as _pow
from .views import (
    forbidden_kind,
    forbidden_view_error,
    is_differentiable_view,
    rebase_view,
    refresh_views,
    set_history,
)

__all__ = ["check_inplace", "commit_inplace", "saved_result", "write_inplace"]

_Edges = tuple[Any, ...] | None


# ---- the rules every in-place write follows ----

def check_inplace(t: Tensor, edges: _Edges) -> None:
    """Raise if ``t`` may not be written in place; ``edges`` is ``edges_of(t, ...)``.

    See Note [In-place ops]. Called before anything is written.
    """
    if t._vc is _INFERENCE and not _inference.get():  # Note [Inference tensors]
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can "
            "make a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details.")
    base = t._base
    if base is not None and (edges is not None or base._rg) and _grad_enabled.get():
        kind = forbidden_kind(t)
        if kind is not None:
            raise forbidden_view_error(t, kind)
    if edges is not None and t.grad_fn is None and t._rg:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    # also a view made before its leaf began to require grad (PyTorch's view requires
    # grad), and a view with history whose base has become a leaf (``base.detach_()``)
    if base is not None and base.grad_fn is None and (
            base._rg and (edges is not None or _grad_enabled.get())
            or t._rg and edges is not None):
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an "
            "in-place operation."
        )
    if (base is not None and (edges is not None or base._rg) and _grad_enabled.get()
            and not is_differentiable_view(t)):
        raise RuntimeError(
            "A view was created in no_grad mode and is being modified inplace with grad mode "
            "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. "
            "You can clarify your code by moving both the view and the inplace either both "
            "inside the no_grad block (if you don't want the inplace to be tracked) or both "
            "outside (if you want the inplace to be tracked)."
        )
    data = t.data
    if not data.size:  # nothing is written (NumPy may give an empty array 0 strides)
        return
    for n, stride in zip(data.shape, data.strides):
        if stride == 0 and n > 1:
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation."
            )


def commit_inplace(t: Tensor, node: Node | None) -> Tensor:
    """After writing ``t.data``: bump the version and, if ``node``, rebase ``t``'s history
    (its root's, for a view); then renew the history of the root's live views."""
    t._vc.value += 1
    root = t._base
    if node is not None:
        if root is None:
            set_history(t, node)
        else:
            rebase_view(t, root, node)
    if root is None:
        root = t
    if root._views is not None:
        refresh_views(root, root._views)
    return t


def _old_value(t: Tensor) -> Tensor:
    """A copy of ``t``'s value before the write, with ``t``'s history before the write."""
    old = Tensor._wrap(t.data.copy(), t.device)
    old.grad_fn, old.output_nr, old._rg = t.grad_fn, t.output_nr, t._rg
    return old


def _can_cast(result: numpy.dtype, target: numpy.dtype) -> bool:
    """PyTorch's ``canCast`` for an in-place result: no float into an integer or bool
    tensor, nothing but bool into a bool one; integers of any kind and width wrap."""
    if target.kind == "b":
        return result.kind == "b"
    if target.kind in "iu":
        return result.kind in "biu"
    return True


def _prepare(t: Tensor, other: Any, true_div: bool = False) -> tuple[Any, Tensor | None, _Edges]:
    """Check ``t op= other``: returns (operand for the ufunc, other as a Tensor or None, edges)."""
    other = scalar_or_tensor(other, t)
    if type(other) is Tensor:
        check_same_device(t, other)
        operand, other_t, edges = other.data, other, edges_of(t, other)
    else:
        operand, other_t, edges = other, None, edges_with_number(t)
    check_inplace(t, edges)
    result = result_type(t, other)  # Note [Type promotion]
    if true_div and result.kind in "biu":
        result = _defaults.FLOAT
    if not _can_cast(result, t.dtype):
        raise RuntimeError(
            f"result type {scalar_type_name(result)} can't be cast to the desired output "
            f"type {scalar_type_name(t.dtype)}"
        )
    other_shape = getattr(operand, "shape", ())
    try:
        shape = numpy.broadcast_shapes(t.shape, other_shape)
    except ValueError:
        raise RuntimeError(
            f"the shape of the other operand {list(other_shape)} cannot be broadcast to the "
            f"tensor's shape {list(t.shape)}"
        ) from None
    if shape != t.shape:
        raise RuntimeError(
            f"output with shape {list(t.shape)} doesn't match the broadcast shape {list(shape)}"
        )
    return operand, other_t, edges


# ---- add_ / sub_ / mul_ / div_ ----

def add_(t: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """``t += alpha * other`` in place: one AddBackward0 (with its alpha), as PyTorch."""
    return _add_or_sub_(t, other, alpha, subtract=False)


def sub_(t: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """``t -= alpha * other`` in place: one SubBackward0 (with its alpha), as PyTorch."""
    check_sub_bool(t, scalar_or_tensor(other, t))
    return _add_or_sub_(t, other, alpha, subtract=True)


def _add_or_sub_(t: Tensor, other: Any, alpha: Any, subtract: bool) -> Tensor:
    """``t += alpha * other`` (``-=`` if ``subtract``); alpha 1 takes the plain ufunc."""
    operand, other_t, edges = _prepare(t, other)
    xp = t.device.xp
    if type(alpha) is int and alpha == 1:
        (xp.subtract if subtract else xp.add)(t.data, wrap_int(t.data, operand), out=t.data,
                                               casting="unsafe")
        rule = SubBackward0 if subtract else AddBackward0
        node = None if edges is None else rule.make(edges)
        return commit_inplace(t, node)
    # computed as out-of-place add(alpha=) computes it, then cast into t
    data = combine_alpha(t, operand if other_t is None else other_t, alpha, subtract)
    xp.copyto(t.data, data, casting="unsafe")
    rule = SubAlphaBackward0 if subtract else AddAlphaBackward0
    return commit_inplace(t, None if edges is None else rule.make(edges, (), (alpha,)))


def mul_(t: Tensor, other: Any) -> Tensor:
    """``t *= other`` in place; other's gradient needs t's old value (saved as a copy)."""
    operand, other_t, edges = _prepare(t, other)
    node = None
    if edges is not None:
        if other_t is None:
            node = MulByNumberBackward0.make(edges, (), (operand,))
        else:
            old = _old_value(t) if edges[1] is not None else None
            node = MulBackward0.make(edges, (other_t, old))
    t.device.xp.multiply(t.data, wrap_int(t.data, operand), out=t.data, casting="unsafe")
    return commit_inplace(t, node)


def div_(t: Tensor, other: Any) -> Tensor:
    """``t /= other`` (true division) in place; ``t`` must be floating point."""
    operand, other_t, edges = _prepare(t, other, true_div=True)
    node = None
    if edges is not None:
        if other_t is None:
            node = DivByNumberBackward0.make(edges, (), (operand,))
        else:
            old = _old_value(t) if edges[1] is not None else None
            node = DivBackward0.make(edges, (other_t, old))
    t.device.xp.divide(t.data, operand, out=t.data, casting="unsafe")
    return commit_inplace(t, node)


def pow_(t: Tensor, exponent: Any) -> Tensor:
    """``t **= exponent`` in place, with ``pow``'s values and node (which saves t's old
    value, and for a tensor exponent the result)."""
    return write_inplace(t, lambda s: _pow(s, exponent), (exponent,), copy_self=True,
                         result_slot="result" if isinstance(exponent, Tensor) else None)


def saved_result(t: Tensor, twin: Tensor | None) -> Any:
    """What a node written into ``t`` in place saves as its result: ``t`` itself, as the
    node's output. For a view, whose new history is the root's CopySlices, ``twin``: the
    op's result computed again from the old value, whose history is a twin of the node
    over the same inputs (so create_graph differentiates through it, as PyTorch's saved
    view result, without a reference cycle), sharing ``t``'s version counter so that a
    later write of ``t`` is caught. Call after ``commit_inplace``."""
    if twin is None:
        return save(t, is_output=True)
    twin._vc = t._vc
    return save(twin)


# ---- an op written into its input (Note [In-place pointwise ops] in pointwise.py) ----

def _alias(t: Tensor) -> Tensor:
    """A tensor over ``t``'s array with ``t``'s current history (no copy): the stand-in for
    ``t``'s old value in a node that does not save it."""
    alias = Tensor._wrap(t.data, t.device)
    alias.grad_fn, alias.output_nr, alias._rg = t.grad_fn, t.output_nr, t._rg
    return alias


def _check_writable(t: Tensor, out: Tensor) -> None:
    """Raise, as PyTorch, unless ``out`` may be written into ``t``."""
    if not _can_cast(out.dtype, t.dtype):
        raise RuntimeError(
            f"result type {scalar_type_name(out.dtype)} can't be cast to the desired output "
            f"type {scalar_type_name(t.dtype)}"
        )
    if out.shape != t.shape:
        raise RuntimeError(
            f"output with shape {list(t.shape)} doesn't match the broadcast shape "
            f"{list(out.shape)}"
        )


def write_inplace(t: Tensor, op: Callable[[Tensor], Tensor], others: tuple[Any, ...],
             copy_self: bool, result_slot: str | None = None) -> Tensor:
    """Write ``op(t)`` into ``t``. ``others``: the other operands (the Tensors among them
    are edges); ``copy_self``: ``op``'s node saves its input; ``result_slot``: the node's
    slot that saves its result. See Note [In-place pointwise ops] in pointwise.py."""
    edges = edges_of(t, *(x for x in others if isinstance(x, Tensor)))
    check_inplace(t, edges)
    node = twin = None
    if edges is None:
        out = op(t)
    else:
        old = _old_value(t) if copy_self else _alias(t)
        out = op(old)
        node = out.grad_fn
        if result_slot is not None and t._base is not None:
            twin = op(old)
    _check_writable(t, out)
    t.device.xp.copyto(t.data, out.data, casting="unsafe")
    commit_inplace(t, node)
    if result_slot is not None and node is not None:
        setattr(node, result_slot, saved_result(t, twin))
    return t


def _bitwise_(name: str) -> Any:
    """``&=``, ``|=`` or ``^=`` in place (``name``: ``bitwise_and`` ...): bool and integer
    tensors only, never recorded (they have no gradient)."""

    def bitwise_(t: Tensor, other: Any) -> Tensor:
        if other is None or isinstance(other, str):
            return NotImplemented
        operand, other_t, _ = _prepare(t, other)
        rt = result_type(t, operand if other_t is None else other_t)
        if rt.kind not in "biu":
            raise NotImplementedError(
                f"\"{name}_{t.device.type}\" not implemented for '{scalar_type_name(rt)}'")
        getattr(t.device.xp, name)(t.data, wrap_int(t.data, operand), out=t.data,
                                   casting="unsafe")
        return commit_inplace(t, None)

    bitwise_.__name__ = name + "_"
    return bitwise_


# ---- zero_ / copy_ ----

ZeroBackward0 = Rule("ZeroBackward0", _dual.zeros_of, doc="``t.zero_()``: zeros for t's old value.")
FillBackward2 = Rule("FillBackward2", _dual.zeros_of,
                     doc="``t.fill_(number)``: t's old value gets zeros.")
FillBackward3 = Rule("FillBackward3", _dual.zeros_of, lambda g: _dual.sum_dims(g, None),
                     doc="``t.fill_(value)`` with a 0-d tensor ``value``: t's old value gets "
                         "zeros, ``value`` the sum of the gradient.")
CopyBackwards = Rule("CopyBackwards", _dual.zeros_of, identity,
                     doc="``t.copy_(src)``: t's old value gets zeros; src the gradient (the "
                         "engine casts and sums).")


def zero_(t: Tensor) -> Tensor:
    """Fill ``t`` with zeros in place."""
    edges = edges_of(t)
    check_inplace(t, edges)
    t.data.fill(0)
    return commit_inplace(t, None if edges is None else ZeroBackward0.make(edges))


def fill_(t: Tensor, value: Any) -> Tensor:
    """Fill ``t`` with ``value`` in place: a number, or a 0-d tensor (which gets a gradient)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.ndim} dimensions."
            )
        check_same_device(t, value)
        edges = edges_of(t, value) if t.data.dtype.kind == "f" else None
        check_inplace(t, edges)
        t.data[...] = value.data
        return commit_inplace(t, None if edges is None else FillBackward3.make(edges))
    if not isinstance(value, numbers.Real):
        raise TypeError(f"fill_(): argument 'value' must be a number, not {type(value).__name__}")
    edges = edges_of(t)
    check_inplace(t, edges)
    t.data.fill(checked_fill(value, t.data.dtype))
    return commit_inplace(t, None if edges is None else FillBackward2.make(edges))


def copy_(t: Tensor, src: Tensor) -> Tensor:
    """Copy ``src`` (broadcast, cast to ``t``'s dtype) into ``t`` in place; into an integer
    or bool ``t`` this records nothing (such tensors cannot require grad)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be a Tensor, not {type(src).__name__}")
    if src.device is not t.device:
        src = src.to(t.device)
    edges = edges_of(t, src) if t.data.dtype.kind == "f" else None
    check_inplace(t, edges)
    try:
        shape = numpy.broadcast_shapes(t.shape, src.shape)
    except ValueError:
        shape = None
    if shape != t.shape:
        raise RuntimeError(
            f"copy_(): src of shape {list(src.shape)} cannot be broadcast to the tensor's "
            f"shape {list(t.shape)}"
        )
    t.device.xp.copyto(t.data, src.data, casting="unsafe")
    return commit_inplace(t, None if edges is None else CopyBackwards.make(edges))


# ---- clone ----

CloneBackward0 = Rule("CloneBackward0", identity, doc="The identity gradient of a copy.")


def clone(t: Tensor) -> Tensor:
    """A C-contiguous copy of ``t`` (not a view) that records the identity gradient."""
    return CloneBackward0.unary(t, t.data.copy())


bitwise_and_, bitwise_or_ = _bitwise_("bitwise_and"), _bitwise_("bitwise_or")
bitwise_xor_ = _bitwise_("bitwise_xor")
