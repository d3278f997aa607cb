"""Neural-network ops: ``softmax log_softmax linear mse_loss cross_entropy nll_loss``.

Softmax and log_softmax subtract the max along ``dim`` before ``exp``, so
no exp overflows, and save their output, from which their gradient is
computed (as PyTorch).

Note [Fused cross entropy]
    ``cross_entropy(logits, target)`` with its default options records ONE
    node, ``CrossEntropyLossBackward0``, instead of PyTorch's
    NllLossBackward0 -> LogSoftmaxBackward0 pair: its gradient is
    ``(softmax - onehot) * g`` (``/ N`` for the mean), written in a single
    pass over the softmax the forward already computed and saved. With
    ``create_graph`` the softmax is recomputed from the saved logits so its
    dependence on them is recorded. Anything else (a weight, label
    smoothing, an ``ignore_index`` in ``[0, C)`` or present in the target,
    class probabilities, N-d logits) leaves the fused path after a few cheap
    tests and records PyTorch's own graph: log_softmax, nll_loss and, for
    the options, the ops PyTorch composes them with.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy

from .._tensor import Tensor, cpp_type_name, scalar_type_name
from .._warn import warn_user
from ..devices import CPU, device_of_array
from ..grad_mode import _grad_enabled
from ..graph._saved import SavedTensor
from . import _dual
from ._promote import promote_types
from ._record import check_same_device, edges_of, plain, record, tensor_arg
from ._rule import Rule, RuleNode, Saved
from .arithmetic import broadcast_error
from .reductions import as_array, normalize_dim
from .unary import where

_REDUCTIONS = ("mean", "sum", "none")
_max_reduce: Any = numpy.maximum.reduce
_NAN = float("nan")


def _max_dims(x: Any, dim: int | None, keepdim: bool = False) -> Any:
    """``x.max`` over ``dim`` for an array (NumPy's without its Python wrapper)."""
    if type(x) is numpy.ndarray:
        return _max_reduce(x, dim, keepdims=keepdim)
    return x.max(axis=dim, keepdims=keepdim)


def _reduction(reduction: Any) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"{reduction} is not a valid value for reduction"
        )
    return str(reduction)


def _reduce(losses: Any, reduction: str) -> Any:
    if reduction == "none":
        return losses
    total = _dual.sum_dims(losses, None)
    if reduction == "sum":
        return as_array(total)
    n = losses.size
    return as_array(total / n if n else total * _NAN)  # an empty mean is nan, without a warning


# ---- softmax / log_softmax ----

def _softmax_grad(g: Any, y: Any, dim: int | None) -> Any:
    return y * (g - _dual.sum_dims(g * y, dim, keepdim=True))


def _log_softmax_grad(g: Any, y: Any, dim: int | None) -> Any:
    return g - _dual.exp(y) * _dual.sum_dims(g, dim, keepdim=True)


SoftmaxBackward0 = Rule("SoftmaxBackward0", _softmax_grad, saves=("result",), keeps=("dim",),
                        doc="d x = y * (g - sum(g * y, dim)): saves the output y.")
LogSoftmaxBackward0 = Rule("LogSoftmaxBackward0", _log_softmax_grad, saves=("result",),
                           keeps=("dim",),
                           doc="d x = g - exp(y) * sum(g, dim): saves the output y.")


def _shifted(x: Any, dim: int | None) -> Any:
    """``x - max(x, dim)``: every entry <= 0, so its exp is at most 1."""
    return x - _max_dims(x, dim, keepdim=True)


def _softmax_like(rule: Rule, a: Tensor, dim: Any, log: bool) -> Tensor:
    d = normalize_dim(dim, a.ndim)
    axis = d if a.ndim else None  # a 0-d tensor is its own (only) slice
    xp = a.device.xp
    x = a.data
    if x.dtype.kind != "f" or not x.size:
        data = _softmax_off_float(x, axis, log)
    else:
        z = _shifted(x, axis)
        e = xp.exp(z)
        if log:
            data = z - xp.log(_dual.sum_dims(e, axis, keepdim=True))
        else:
            data = e / _dual.sum_dims(e, axis, keepdim=True)
        data = _dual.contiguous(data)  # PyTorch's layout, whatever the input's
    return rule.record((a,), data, a.device, (), (axis,))


def _softmax_off_float(x: Any, axis: int | None, log: bool) -> Any:
    """The result for an input that is empty or not floating point, as PyTorch's.

    Empty (of any dtype): an empty array of its shape and dtype. Otherwise
    PyTorch has no kernel for the dtype: NotImplementedError naming the
    kernel it would take (``lastdim`` for the last dim or a 0-d input).
    """
    if not x.size:
        return x.copy()
    kernel = "softmax_lastdim_kernel_impl" if axis in (None, x.ndim - 1) else "softmax_kernel_impl"
    raise NotImplementedError(
        f"\"{'log_' if log else ''}{kernel}\" not implemented for '{scalar_type_name(x.dtype)}'"
    )


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """``exp(x) / sum(exp(x), dim)``; each slice along ``dim`` sums to 1.

    With ``dtype`` the input is cast to it first (the way to take the
    softmax of an integer tensor, which has none of its own).
    """
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    return _softmax_like(SoftmaxBackward0, input, dim, log=False)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """``x - logsumexp(x, dim)``, computed without overflow (in ``dtype``, cast first, if given)."""
    if dtype is not None:
        input = input.to(dtype)  # noqa: A001
    return _softmax_like(LogSoftmaxBackward0, input, dim, log=True)


# ---- linear ----

def _linear_input_grad(g: Any, x: Any, w: Any) -> Any:
    return g @ w


def _linear_weight_grad(g: Any, x: Any, w: Any) -> Any:
    return _dual.swap_last(g) @ x


def _linear_bias_grad(g: Any, x: Any, w: Any) -> Any:
    return _dual.sum_dims(g, 0)


_LINEAR_SAVES = (Saved("input", only_for=1), Saved("weight", only_for=0))
_LINEAR_DOC = (
    "``x @ weight.T + bias`` for 2-D x, as one node (PyTorch's nn.Linear records the same). "
    "d x = g W, d W = g^T x (row-major, like W), d bias = sum of g over rows. Saves x only if "
    "W needs a gradient and W only if x does.")
# Variants: structure.py's addmm declares the plain AddmmBackward0.
AddmmBackward0 = Rule("AddmmBackward0", _linear_input_grad, _linear_weight_grad,
                      _linear_bias_grad, saves=_LINEAR_SAVES, variant="linear", doc=_LINEAR_DOC)
AddmmBackward0NoBias = Rule("AddmmBackward0", _linear_input_grad, _linear_weight_grad,
                            saves=_LINEAR_SAVES, variant="linear, no bias",
                            doc="AddmmBackward0 of a linear without a bias: two edges.")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input @ weight.T + bias`` (``torch.nn.functional.linear``).

    A 2-D input records one AddmmBackward0 node and adds the bias (of shape (out,)
    or (1,)) in place into the fresh product; other inputs fall back to ``@`` and
    ``+``. A 1-D weight (in,) gives an output without the last dim; it takes a bias
    only with a 1-D input (PyTorch's rule). The dtypes must agree (no promotion):
    PyTorch's RuntimeError otherwise.
    """
    for name, value in (("input", input), ("weight", weight)):
        if not isinstance(value, Tensor):
            raise TypeError(f"linear: {name} must be a Tensor, got {type(value).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"linear: bias must be a Tensor or None, got {type(bias).__name__}")
    x, w, b = input.data, weight.data, None if bias is None else bias.data
    if x.ndim != 2 or w.ndim != 2 or (b is not None and b.ndim != 1):
        return _linear_unfused(input, weight, bias)
    if x.dtype is not w.dtype or (b is not None and b.dtype is not w.dtype):
        _check_linear_dtypes(x, w, b)
    dev = check_same_device(input, weight)
    if bias is not None:
        check_same_device(input, bias)
    if x.shape[1] != w.shape[1]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({x.shape[0]}x{x.shape[1]} and "
            f"{w.shape[1]}x{w.shape[0]}): linear: input {tuple(x.shape)} and weight "
            f"{tuple(w.shape)} do not fit; expected input (N, in) and weight (out, in)"
        )
    if b is not None and b.shape[0] != w.shape[0] and b.shape[0] != 1:
        raise RuntimeError(
            f"The expanded size of the tensor ({w.shape[0]}) must match the existing size "
            f"({b.shape[0]}) at non-singleton dimension 1.  Target sizes: "
            f"[{x.shape[0]}, {w.shape[0]}].  Tensor sizes: [{b.shape[0]}]"
        )
    data = x @ w.T
    if b is not None:
        data += b  # the product is fresh: nobody else sees it
    if bias is None:
        return AddmmBackward0NoBias.record((input, weight), data, dev, (input, weight))
    return AddmmBackward0.record((input, weight, bias), data, dev, (input, weight))


def _check_linear_dtypes(x: Any, w: Any, b: Any) -> None:
    """PyTorch's errors for the mixed dtypes of the arrays ``x``, ``w`` and the bias
    ``b`` (or None) in linear. With a bias (addmm) the bias is checked against the
    weight first (``self``), then the input (``mat1``); without one (mm) the input is
    checked (``m1``) only if the shapes fit, else the shape error comes first."""
    if b is not None and b.dtype != w.dtype:
        raise RuntimeError(
            "self and mat2 must have the same dtype, but got "
            f"{scalar_type_name(b.dtype)} and {scalar_type_name(w.dtype)}"
        )
    if x.dtype == w.dtype:
        return
    if b is not None:
        raise RuntimeError(
            "mat1 and mat2 must have the same dtype, but got "
            f"{scalar_type_name(x.dtype)} and {scalar_type_name(w.dtype)}"
        )
    if x.shape[-1] == w.shape[-1]:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{cpp_type_name(x.dtype)} != {cpp_type_name(w.dtype)}"
        )


def _linear_unfused(input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:  # noqa: A002
    """linear off the 2-D path, as ``@`` and ``+``, with PyTorch's checks of the ranks
    and dtypes; the bias must broadcast to the product's shape."""
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(
            "both arguments to linear need to be at least 1D, but they are "
            f"{input.ndim}D and {weight.ndim}D"
        )
    if weight.ndim > 2:
        raise RuntimeError(
            f"t() expects a tensor with <= 2 dimensions, but self is {weight.ndim}D: linear "
            "takes a weight of shape (out, in) or (in,)"
        )
    if weight.ndim == 1 and bias is not None and input.ndim != 1:
        raise RuntimeError(
            "mat2 must be a matrix, got 1-D tensor: linear takes a bias with a 1-D weight "
            "only for a 1-D input; give the weight shape (1, in) instead"
        )
    if bias is not None:
        _check_linear_dtypes(input.data, weight.data, bias.data)
    out = input @ (weight if weight.ndim == 1 else weight.transpose(0, 1))
    if bias is None:
        return out
    try:
        shape = numpy.broadcast_shapes(out.shape, bias.shape)
    except ValueError:
        shape = None
    if shape != out.shape:
        raise RuntimeError(
            f"linear: a bias of shape {list(bias.shape)} cannot be broadcast to the "
            f"output's shape {list(out.shape)}"
        )
    return out + bias


# ---- mse_loss ----

def check_target_shape(shape: tuple[int, ...], target_shape: tuple[int, ...]) -> None:
    """PyTorch's checks of a pointwise loss's target: a warning if its shape differs from
    the input's, the broadcast error if the two do not broadcast."""
    if target_shape == shape:
        return
    warn_user(
        f"Using a target size {tuple(target_shape)} that is different to the input size "
        f"{tuple(shape)}. This will likely lead to incorrect results due to "
        "broadcasting. Please ensure they have the same size.",
    )
    try:
        numpy.broadcast_shapes(shape, target_shape)
    except ValueError:
        raise broadcast_error(shape, target_shape) from None


def _mse_grad(g: Any, x: Any, t: Any, scale: float) -> Any:
    return (x - t) * (g * scale)


MseLossBackward0 = Rule(
    "MseLossBackward0", _mse_grad, lambda g, x, t, scale: -_mse_grad(g, x, t, scale),
    saves=("self_", "target"), keeps=("scale",),
    doc="d input = 2 (input - target) g / N for the mean (N elements); d target = -d input.")


def loss_target(target: Any, fn: str) -> Tensor:
    """A loss's ``target``: a Tensor, or an array (of any device) wrapped as one; anything
    else is a TypeError naming ``fn``. See Note [Tensor arguments of nn.functional]."""
    if isinstance(target, Tensor):
        return target
    if not hasattr(target, "shape") or not hasattr(target, "dtype"):
        raise TypeError(f"{fn}(): argument 'target' (position 2) must be a Tensor or an array, "
                        f"not {type(target).__name__}; for a constant use "
                        "aiograd.full_like(input, value)")
    return Tensor._wrap(target, device_of_array(target))


def mse_loss(input: Tensor, target: Any, *, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean (or sum, or elementwise with ``'none'``) of ``(input - target) ** 2``.

    ``reduction`` is keyword-only: PyTorch's third positional parameter is its
    deprecated ``size_average``. The two broadcast (with PyTorch's warning when their
    shapes differ) and compute in their promoted dtype: as both take the broadcast
    shape, neither is a 0-d tensor of lower priority (``float32`` with an ``int64`` or a
    0-d ``float64`` target gives ``float32`` and ``float64``, as PyTorch's).
    """
    reduction = _reduction(reduction)
    target = loss_target(target, "mse_loss")
    dev = check_same_device(input, target)
    check_target_shape(input.shape, target.shape)
    x, t = input.data, target.data
    if x.dtype is not t.dtype:
        dt = promote_types(x.dtype, t.dtype)
        x, t = x.astype(dt, copy=False), t.astype(dt, copy=False)
    if x.dtype.kind not in "fc":
        raise NotImplementedError(
            f'"mse_{dev.type}" not implemented for \'{scalar_type_name(x.dtype)}\'')
    diff = x - t
    losses = diff * diff
    data = _reduce(losses, reduction)
    # An empty input has an empty gradient whatever the scale (its mean is nan, as PyTorch's).
    scale = 2 / losses.size if reduction == "mean" and losses.size else 2
    return MseLossBackward0.record((input, target), data, dev, (input, target), (scale,))


# ---- cross_entropy ----

class _CheckedTargets(NamedTuple):
    """Targets checked on the device (Note [Device-side target checks]): ``classes`` (N,)
    with every out-of-range entry replaced by 0, ``rows`` (N, 1) of 1 (a class), 0 (the
    ignore index) or nan (out of range), and ``count``, the 0-d number of counted rows."""

    classes: Any
    rows: Any
    count: Any


# ---- trickier grads: the fused cross entropy ----

def _cross_entropy_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                        saved_self: SavedTensor, saved_probs: SavedTensor,
                        saved_target: SavedTensor, reduction: str,
                        checked: _CheckedTargets | None) -> tuple[Any]:
    """See Note [Fused cross entropy]: ``(probs - onehot(target)) * g`` (``/ N`` for the
    mean); ``probs`` is the (N, C) softmax of the logits, recomputed from them under
    ``create_graph``."""
    g = grads[0]
    target = saved_target.unpack(node, False).reshape(-1)  # (N,): a 1-D input's is ()
    n = target.shape[0]
    if checked is not None:  # on a device: see Note [Device-side target checks]
        target = checked.classes
    if reduction == "none":
        scale = _dual.reshape(g, (n, 1))
    elif checked is not None and reduction == "mean":
        scale = g / checked.count
    else:
        # An empty batch's gradient is empty: no ``/ 0`` (and its warning) for it.
        scale = g / n if reduction == "mean" and n else g
    if checked is not None:
        scale = scale * checked.rows
    rows = _dual.xp_of(target).arange(n)
    if create_graph:
        probs = softmax(saved_self.unpack(node, True), -1)
        onehot = probs.device.xp.zeros((n, probs.shape[-1]), dtype=probs.dtype)
        onehot[rows, target] = 1
        return ((probs - onehot) * scale,)
    grad = saved_probs.unpack(node, False) * scale
    grad[rows, target] -= scale[:, 0] if scale.ndim == 2 else scale
    return (grad,)


CrossEntropyLossBackward0 = Rule(
    "CrossEntropyLossBackward0", whole=_cross_entropy_grad,
    saves=("self_", "probs", "target"), keeps=("reduction", "checked"),
    doc="See Note [Fused cross entropy] and ``_cross_entropy_grad``.")


def _check_on_device(t: Any, c: int, ignore_index: int, dtype: Any) -> _CheckedTargets:
    """Note [Device-side target checks]
        A device's fused cross_entropy does not read its targets on the host (an
        ``int(max(target))`` would wait for the device). The rows are checked on the
        device instead: a target equal to ``ignore_index`` counts for nothing, as on
        the CPU; any other target outside ``[0, C)`` makes its loss and gradient nan
        (PyTorch's CUDA kernels fail such a target with a device-side assert, which is
        asynchronous too). The CPU keeps its exact check and error message.
    """
    xp = _dual.xp_of(t)
    inside = t.view(t.dtype.str.replace("i", "u")) < c  # a negative index is huge unsigned
    ignored = t == ignore_index
    rows = xp.where(inside, 1.0, xp.where(ignored, 0.0, _NAN)).astype(dtype)
    count = (~ignored).sum().astype(dtype)
    return _CheckedTargets(xp.where(inside, t, 0), rows[:, None], count)


def _fused_targets(target: Any, logits: Tensor, ignore_index: int) -> Any:
    """The (N,) class indices for the fused node, or None to leave them to the general path.

    None means the target is not what the fused node takes (not int64 or uint8, on
    another device, of another shape, or outside ``[0, C)``, as an ignored
    ``-100`` is) or ``ignore_index`` is a class: the general path then
    handles or rejects it.
    """
    t = target.data if isinstance(target, Tensor) else target
    dtype = getattr(t, "dtype", None)
    if dtype != numpy.int64 and dtype != numpy.uint8:  # others: the general path's error
        return None
    t_dev = target.device if isinstance(target, Tensor) else device_of_array(t)
    if t_dev is not logits.device:
        return None
    n, c = (1, logits.shape[0]) if logits.ndim == 1 else logits.shape
    if t.shape != (() if logits.ndim == 1 else (n,)) or 0 <= ignore_index < c:
        return None
    t = t.reshape((n,))
    if t_dev is not CPU:  # checked on the device: Note [Device-side target checks]
        return t
    # One pass: as unsigned, a negative index is huge (``uint`` view of the same bytes).
    if n and int(_max_dims(t.view(t.dtype.str.replace("i", "u")), None)) >= c:
        return None
    return t


def cross_entropy(
    input: Tensor,  # noqa: A002
    target: Any,
    weight: Any = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """``-log_softmax(input)[target]`` per sample (times ``weight[target]``), then ``reduction``.

    ``input``: logits of shape (N, C), (C,) or (N, C, d1, ...). ``target``:
    class indices of shape (N,), () or (N, d1, ...) (an integer Tensor or
    array; entries equal to ``ignore_index`` count for nothing), or class
    probabilities of the input's shape. The defaults take one fused node
    (see Note [Fused cross entropy]); the options take PyTorch's graph.
    """
    reduction = _reduction(reduction)
    t = None
    if (weight is None and label_smoothing == 0.0 and type(ignore_index) is int
            and type(input) is Tensor and input.ndim in (1, 2)):
        t = _fused_targets(target, input, ignore_index)
    if t is None:
        return _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)
    xp = input.device.xp
    x = input.data if input.ndim == 2 else input.data.reshape((1, -1))
    checked = None
    if input.device is not CPU:
        checked = _check_on_device(t, x.shape[1], ignore_index, x.dtype)
        t = checked.classes
    z = _shifted(x, 1)
    probs = xp.exp(z)
    sums = _dual.sum_dims(probs, 1, keepdim=True)
    losses = xp.log(sums[:, 0]) - z[xp.arange(t.shape[0]), t]
    if checked is not None:
        losses = losses * checked.rows[:, 0]
    if input.ndim == 1:
        losses = losses.reshape(())
    if checked is not None and reduction == "mean":
        data = as_array(_dual.sum_dims(losses, None) / checked.count)
    else:
        data = _reduce(losses, reduction)
    edges = edges_of(input)
    if edges is None:
        return plain(data, input.device)
    probs /= sums
    # the target tensor itself, as PyTorch saves it: writing it in place later is caught
    saved_target = target if isinstance(target, Tensor) else Tensor._wrap(t, input.device)
    node = CrossEntropyLossBackward0.make(
        edges, (input, Tensor._wrap(probs, input.device), saved_target), (reduction, checked))
    return record(node, data, input.device)


def _cross_entropy(input: Tensor, target: Any, weight: Any, ignore_index: Any,  # noqa: A002
                   reduction: str, label_smoothing: Any) -> Tensor:
    """cross_entropy off the fused path: PyTorch's log_softmax -> nll_loss graph and its terms."""
    _check_input("cross_entropy", input)
    check_arg_type("cross_entropy", "ignore_index", ignore_index, numbers.Integral, "int")
    check_arg_type("cross_entropy", "label_smoothing", label_smoothing, numbers.Real, "float")
    smoothing = label_smoothing > 0.0  # PyTorch ignores a negative one
    class_dim = 0 if input.ndim == 1 else 1
    if getattr(target, "shape", None) == input.shape:
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction,
                                    label_smoothing if smoothing else 0.0, class_dim)
    _check_smoothing(label_smoothing)
    t, w = _nll_checks("cross_entropy", input, target, weight, ignore_index)
    logp = log_softmax(input, class_dim)
    loss = _nll(logp, t, w, ignore_index, reduction)
    if not smoothing:
        return loss
    # PyTorch's smoothing term: the (weighted) sum of -log p over the classes,
    # 0 on ignored targets, reduced over the same targets as the nll term.
    n_classes = input.shape[class_dim]
    if w is None:
        smooth = -logp.sum(class_dim)
    else:
        # the weight tensor's own view (a later in-place write of it is caught)
        w_t = weight if isinstance(weight, Tensor) else Tensor._wrap(w, input.device)
        smooth = -(logp * w_t.reshape(_class_view_shape(n_classes, input.ndim))).sum(class_dim)
    valid = t != ignore_index
    smooth = where(valid, smooth, 0.0)
    if reduction == "mean":
        total = valid.sum() if w is None else w[t[valid]].sum()
        smooth = _div_or_nan(smooth.sum(), float(total))
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / n_classes)


def _cross_entropy_probs(input: Tensor, target: Any, weight: Any,  # noqa: A002
                         ignore_index: int, reduction: str, label_smoothing: float,
                         class_dim: int) -> Tensor:
    """Cross entropy against class probabilities (``target`` has the input's shape).

    Built from differentiable ops, as PyTorch does: the target and the weight
    get gradients too.
    """
    target = _as_tensor("cross_entropy", target, input, "target")
    if target.dtype.kind != "f":
        raise RuntimeError(
            "Expected floating point type for target with class probabilities, got "
            f"{scalar_type_name(target.dtype)}"
        )
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    n_classes = input.shape[class_dim]
    if label_smoothing:
        _check_smoothing(label_smoothing)
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    terms = log_softmax(input, class_dim) * target
    if weight is not None:
        w = _as_tensor("cross_entropy", weight, input, "weight")
        if w.shape != (n_classes,):
            raise RuntimeError(
                f"cross_entropy: weight tensor should be defined either for all {n_classes} "
                f"classes or no classes but got weight tensor of shape: {list(w.shape)}"
            )
        terms = terms * w.reshape(_class_view_shape(n_classes, input.ndim))
    if reduction == "none":
        return -terms.sum(class_dim)
    total = -terms.sum()
    if reduction == "sum":
        return total
    return _div_or_nan(total, input.data.size // n_classes if input.data.size else 0)


# ---- nll_loss ----

def _nll_grad(g: Any, t: Any, w: Any, scale: float, n_classes: int) -> Any:
    """d input = -w[t] g (times ``1 / total_weight`` for the mean) at [i, t_i, ...], else 0.
    ``t``: the class indices with every ignored entry -1 (ignored rows get nothing);
    ``w``: ``w[t]`` (of the target's shape), or None for unit weights. Linear in g."""
    xp = _dual.xp_of(t)
    values = g * scale
    if w is not None:
        values = values * w
    classes = xp.arange(n_classes)
    if t.ndim:
        classes = classes.reshape((n_classes,) + (1,) * (t.ndim - 1))
        t = t.reshape((t.shape[0], 1) + t.shape[1:])
        if getattr(values, "ndim", 0):
            values = _dual.unsqueeze(values, 1)
    if type(values) is Tensor:
        return where(classes == t, values, 0.0)
    return xp.where(classes == t, values, 0)


_NLL_SAVES = (Saved("target", raw=True), Saved("weight", raw=True))
NllLossBackward0 = Rule("NllLossBackward0", _nll_grad, saves=_NLL_SAVES,
                        keeps=("scale", "n_classes"), doc="See ``_nll_grad``.")
NllLoss2DBackward0 = Rule("NllLoss2DBackward0", _nll_grad, saves=_NLL_SAVES,
                          keeps=("scale", "n_classes"),
                          doc="NllLossBackward0 for inputs of 3 or more dimensions (PyTorch's "
                              "name for them).")


def check_no_grad_arg(fn: str, name: str, value: Any) -> None:
    """PyTorch's error for a tensor argument that takes no gradient (a loss's ``weight``)
    but requires grad while grad mode is on."""
    if isinstance(value, Tensor) and value.requires_grad and _grad_enabled.get():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument '{name}'. "
            "This input cannot have requires_grad True."
        )


def check_arg_type(fn: str, name: str, value: object, kind: type, expected: str) -> None:
    """PyTorch's TypeError for the argument ``name`` of ``fn`` when ``value`` is not a
    ``kind`` (a numbers ABC, ``expected`` in the message)."""
    if not isinstance(value, kind):
        raise TypeError(
            f"{fn}(): argument '{name}' must be {expected}, not {type(value).__name__}")


def _check_input(name: str, input: Any) -> None:  # noqa: A002
    tensor_arg(input, name, "input")
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")


def _check_smoothing(label_smoothing: float) -> None:
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")


def _as_tensor(name: str, x: Any, like: Tensor, what: str) -> Tensor:
    """``x`` (a Tensor or an array) as a Tensor on ``like``'s device."""
    if not isinstance(x, Tensor):
        if not hasattr(x, "dtype") or not hasattr(x, "shape"):
            raise TypeError(
                f"{name}(): argument '{what}' must be Tensor (or an array), not "
                f"{type(x).__name__}"
            )
        x = Tensor._wrap(x, device_of_array(x))
    check_same_device(like, x)
    return x


def _class_view_shape(n_classes: int, ndim: int) -> tuple[int, ...]:
    """The shape that lays a (C,) vector along dim 1 of an N-d input (dim 0 of a 1-D one)."""
    return (n_classes,) if ndim == 1 else (1, n_classes) + (1,) * (ndim - 2)


def _div_or_nan(x: Any, total: float) -> Any:
    """``x / total``; nan for a zero total (as PyTorch's 0 / 0), without NumPy's warning."""
    return x / total if total else x * _NAN


def _nll_checks(name: str, input: Tensor, target: Any, weight: Any,  # noqa: A002
                ignore_index: int) -> tuple[Any, Any]:
    """The class-index array (the input's shape without its class dim) and the weight array.

    Raises PyTorch's errors for targets and weights that do not fit ``input``.
    """
    t = target.data if isinstance(target, Tensor) else target
    dtype = getattr(t, "dtype", None)
    if dtype is None:
        raise TypeError(
            f"{name} expects target to hold class indices (an integer Tensor or array), got "
            f"{type(t).__name__}; class probabilities need a float target of the input's "
            f"shape {tuple(input.shape)}"
        )
    t_dev = target.device if isinstance(target, Tensor) else device_of_array(t)
    if t_dev is not input.device:
        raise RuntimeError(
            f"{name}: target is on {t_dev} but input is on {input.device}; move the target "
            "with .to(device)"
        )
    shape, tshape = tuple(input.shape), tuple(t.shape)
    if input.ndim == 1:
        if len(tshape) > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if tshape not in ((), (1,)):
            raise ValueError(
                f"For 1D input, 1D target must have size 1, but got target size: {tshape[0]}"
            )
        t = t.reshape(())
    else:
        expected = shape[:1] + shape[2:]
        if not tshape or tshape[0] != shape[0]:
            raise ValueError(
                f"Expected input batch_size ({shape[0]}) to match target batch_size "
                f"({tshape[0] if tshape else 0}): expected a target of shape {expected} "
                f"for input of shape {shape}, got {tshape}"
            )
        if input.ndim > 2 and len(tshape) == 1:
            raise ValueError(
                f"Expected target size {list(expected)}, got {list(tshape)}: a 1-D target "
                f"takes logits of shape (N, C) or (C,), got {shape}; give logits of shape "
                "(N, C, d1, ...) a target of shape (N, d1, ...)"
            )
        if input.ndim == 2 and len(tshape) != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if tshape != expected:
            raise RuntimeError(f"Expected target size {list(expected)}, got {list(tshape)}")
    if dtype != numpy.int64 and dtype != numpy.uint8:  # after the shapes, as PyTorch
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {scalar_type_name(dtype)}")
    n_classes = shape[0 if input.ndim == 1 else 1]
    w = None
    if weight is not None:
        check_no_grad_arg("nll_loss_forward", "weight", weight)
        w = _as_tensor(name, weight, input, "weight").data
        if w.shape != (n_classes,):
            raise RuntimeError(
                f"weight tensor should be defined either for all {n_classes} classes or no "
                f"classes but got weight tensor of shape: {list(w.shape)}"
            )
        if w.dtype != input.dtype:
            raise RuntimeError(
                f"expected scalar type {scalar_type_name(input.dtype)} but found "
                f"{scalar_type_name(w.dtype)}"
            )
    if t.size:
        bad = ((t < 0) | (t >= n_classes)) & (t != ignore_index)
        if bad.any():
            raise IndexError(
                f"Target {int(t[bad].ravel()[0])} is out of bounds: class indices must be in "
                f"[0, {n_classes}) or equal ignore_index ({ignore_index})"
            )
    return t, w


def _nll(input: Tensor, t: Any, w: Any, ignore_index: int, reduction: str) -> Tensor:  # noqa: A002
    """nll_loss of checked arrays: ``t`` from :func:`_nll_checks`, ``w`` the weight or None."""
    xp = input.device.xp
    x = input.data
    valid = t != ignore_index
    safe = xp.where(valid, t, 0)
    if input.ndim == 1:
        picked = x[safe]
    else:
        picked = xp.take_along_axis(x, xp.expand_dims(safe, 1), 1).squeeze(1)
    wt = None if w is None else w[safe]
    losses = xp.where(valid, -picked if wt is None else -picked * wt, 0)
    scale = 1.0
    if reduction == "none":
        data = losses
    else:
        data = _dual.sum_dims(losses, None)
        if reduction == "mean":
            total = float(valid.sum() if wt is None else wt[valid].sum())
            scale = 1 / total if total else _NAN
            data = data / total if total else data * scale
        data = as_array(data)
    edges = edges_of(input)
    if edges is None:
        return plain(data, input.device)
    hits = Tensor._wrap(xp.where(valid, t.astype(numpy.int64, copy=False), -1), input.device)
    rule = NllLossBackward0 if input.ndim < 3 else NllLoss2DBackward0
    node = rule.make(edges, (hits, None if wt is None else Tensor._wrap(wt, input.device)),
                     (-scale, x.shape[0 if input.ndim == 1 else 1]))
    return record(node, data, input.device)


def nll_loss(
    input: Tensor,  # noqa: A002
    target: Any,
    weight: Any = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """``-input[target]`` per sample (times ``weight[target]``), then ``reduction``.

    ``input``: log-probabilities of shape (N, C), (C,) or (N, C, d1, ...);
    ``target``: class indices of shape (N,), () or (N, d1, ...); entries equal
    to ``ignore_index`` give 0 loss and 0 gradient, and the mean divides by
    the sum of the weights of the other targets.
    """
    reduction = _reduction(reduction)
    _check_input("nll_loss", input)
    check_arg_type("nll_loss", "ignore_index", ignore_index, numbers.Integral, "int")
    t, w = _nll_checks("nll_loss", input, target, weight, ignore_index)
    return _nll(input, t, w, ignore_index, reduction)
