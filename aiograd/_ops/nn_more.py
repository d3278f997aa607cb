"""More neural-network functions: losses (``binary_cross_entropy``,
``binary_cross_entropy_with_logits``, ``smooth_l1_loss``, ``huber_loss``, ``kl_div``),
activations (``silu elu softplus mish hardtanh relu6 logsigmoid softsign``) and
``one_hot normalize cosine_similarity pad``.

Each records the node PyTorch records (named as PyTorch's) or PyTorch's composition of
existing ops (softsign, kl_div, normalize, cosine_similarity). The create_graph backward
of hardtanh and of the constant, reflection and replication pads records PyTorch's nodes;
that of the other fused nodes records the ops of their formula (PyTorch records one
``...BackwardBackward0`` node, or for silu and mish the same kind of ops).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy

from .._tensor import Tensor, scalar_type_name
from .._warn import warn_user
from ..devices import device_of_array
from ..grad_mode import no_grad
from . import _dual
from ._promote import promote_types
from ._record import check_same_device, edges_of, plain, save, tensor_arg
from ._rule import SAVES_INPUT, SAVES_OUTPUT, Rule
from .arithmetic import broadcast_error
from .inplace import check_inplace, commit_inplace
from .nn_extra import _check_float as check_float_kernel
from .nn_extra import l1_loss
from .nn_ops import _reduce, _reduction, check_no_grad_arg, check_target_shape, loss_target

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_similarity",
           "elu", "hardtanh", "huber_loss", "kl_div", "logsigmoid", "mish", "normalize",
           "one_hot", "pad", "relu6", "silu", "smooth_l1_loss", "softplus", "softsign"]

# ---- dual helpers (Note [Dual backward formulas]) ----


def _sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))`` computed from ``exp(-|x|)``: no overflow."""
    if type(x) is Tensor:
        return x.sigmoid()
    xp = _dual.xp_of(x)
    e = xp.exp(-xp.abs(x))
    r = 1 / (1 + e)
    return xp.where(x >= 0, r, e * r)


def _softplus(x: Any) -> Any:
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))``: no overflow (a Tensor's as
    ``-logsigmoid(-x)``, whose gradient is smooth at 0)."""
    if type(x) is Tensor:
        return -logsigmoid(-x)
    xp = _dual.xp_of(x)
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


def _log_sigmoid(x: Any) -> Any:
    """``min(x, 0) - log1p(exp(-|x|))``: no overflow."""
    if type(x) is Tensor:
        return logsigmoid(x)
    xp = _dual.xp_of(x)
    return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))


def _clamp(x: Any, lo: float | None, hi: float | None) -> Any:
    if type(x) is Tensor:
        return x.clamp(lo, hi)
    return _dual.xp_of(x).clip(x, lo, hi)


def _size(shape: tuple[int, ...]) -> str:
    return f"torch.Size({list(shape)})"


def _check_float(kernel: str, t: Tensor) -> None:
    """PyTorch's NotImplementedError for a non-floating ``t``, naming ``kernel_<device>``."""
    check_float_kernel(f"{kernel}_{t.device.type}", t)


# ---- activations ----

def _chain(derivative: Callable[..., Any]) -> Callable[..., Any]:
    """The formula ``g * derivative(x, *params)`` of an activation whose node saves its input
    (or, for the in-place forms that say so, its result) and keeps its params."""

    @numpy.errstate(all="ignore")  # See Note [Silent singular points] in _dual.
    def formula(g: Any, x: Any, *params: Any) -> Any:
        return g * derivative(x, *params)

    return formula


def _silu_grad(x: Any) -> Any:
    s = _sigmoid(x)
    return s * (x * (1 - s) + 1)


def _mish_grad(x: Any) -> Any:
    t = _dual.tanh(_softplus(x))
    return t + x * _sigmoid(x) * (1 - t * t)


def _elu_grad(x: Any, alpha: float) -> Any:
    negative = _dual.exp(_dual.where(_dual.raw(x) < 0, x, 0.0)) * alpha
    return _dual.where(_dual.raw(x) > 0, 1.0, negative)


def _elu_result_grad(y: Any, alpha: float) -> Any:
    return _dual.where(_dual.raw(y) > 0, 1.0, _dual.where(_dual.raw(y) < 0, y, 0.0) + alpha)


def _softplus_grad(x: Any, beta: float, threshold: float) -> Any:
    bx = x * beta
    return _dual.where(_dual.raw(bx) > threshold, 1.0, _sigmoid(bx))


SiluBackward0 = Rule("SiluBackward0", _chain(_silu_grad), saves=SAVES_INPUT,
                     doc="silu' = s (1 + x (1 - s)), s = sigmoid(x).")
MishBackward0 = Rule("MishBackward0", _chain(_mish_grad), saves=SAVES_INPUT,
                     doc="mish' = t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)).")
EluBackward0 = Rule("EluBackward0", _chain(_elu_grad), saves=SAVES_INPUT, keeps=("alpha",),
                    doc="elu' = 1 where x > 0, else alpha exp(x) (the exp of x only where x < 0: "
                        "no overflow, and a zero second derivative at 0, as PyTorch's).")
EluBackward1 = Rule("EluBackward1", _chain(_elu_result_grad), saves=SAVES_OUTPUT,
                    keeps=("alpha",),
                    doc="EluBackward0 of the in-place form, from the result y: 1 where y > 0, "
                        "else y + alpha (alpha >= 0, so y has the input's sign); y enters only "
                        "where y < 0, as PyTorch's.")
SoftplusBackward0 = Rule("SoftplusBackward0", _chain(_softplus_grad), saves=SAVES_INPUT,
                         keeps=("beta", "threshold"),
                         doc="softplus' = 1 where beta x > threshold, else sigmoid(beta x).")
LogSigmoidBackward0 = Rule("LogSigmoidBackward0", _chain(lambda x: _sigmoid(-x)),
                           saves=SAVES_INPUT, doc="logsigmoid' = sigmoid(-x).")


def hardtanh_backward(grad: Any, x: Any, min_val: float, max_val: float) -> Any:
    """``grad`` where ``min_val < x < max_val``, else 0: two arrays, or two Tensors (then
    recorded as a HardtanhBackwardBackward0)."""
    inside = (_dual.raw(x) > min_val) & (_dual.raw(x) < max_val)
    if type(grad) is not Tensor:
        return _dual.xp_of(grad).where(inside, grad, 0)
    data = grad.device.xp.where(inside, grad.data, 0).astype(grad.dtype, copy=False)
    return HardtanhBackwardBackward0.record((grad, x), data, grad.device, (x,),
                                            (min_val, max_val))


_HARDTANH_DOC = (
    "d x = g strictly between min_val and max_val, else 0 (never NaN from g * 0). ``saved`` is "
    "the input, or (variant 'in place') the result of the in-place form, inside the bounds "
    "exactly where the input is. With ``create_graph`` it records a "
    "HardtanhBackwardBackward0, as PyTorch's.")
HardtanhBackward0 = Rule("HardtanhBackward0", hardtanh_backward, saves=SAVES_INPUT,
                         keeps=("min_val", "max_val"), doc=_HARDTANH_DOC)
HardtanhBackward0InPlace = Rule("HardtanhBackward0", hardtanh_backward, saves=SAVES_OUTPUT,
                                keeps=("min_val", "max_val"), variant="in place",
                                doc=_HARDTANH_DOC)
HardtanhBackwardBackward0 = Rule(
    "HardtanhBackwardBackward0", hardtanh_backward, lambda g, x, lo, hi: _dual.zeros_of(g),
    saves=SAVES_INPUT, keeps=("min_val", "max_val"),
    doc="The node of ``hardtanh_backward(grad, x)``: piecewise constant in ``x``, so the "
        "gradient is ``hardtanh_backward(gg, x)`` for ``grad`` and zeros for ``x``.")


def _activation(input: Tensor, data: Any, rule: Rule, params: tuple[Any, ...],  # noqa: A002
                inplace: bool) -> Tensor:
    """``data`` (computed from ``input``) as the result of ``rule``'s node, or written into
    ``input`` when ``inplace``; the node saves the input (in place: a clone of it made
    before the write, or the result if the rule saves its output)."""
    dev = input.device
    if not inplace:
        return rule.record((input,), data, dev, (input,), params)
    edges = edges_of(input)
    check_inplace(input, edges)
    saves_result = rule.output_save is not None
    # PyTorch's original_self: a clone, recorded, so a create_graph backward reaches input
    original = None if edges is None or saves_result else input.clone()
    dev.xp.copyto(input.data, data, casting="unsafe")
    if edges is None:
        return commit_inplace(input, None)
    node = rule.make(edges, () if saves_result else (original,), params)
    commit_inplace(input, node)
    if saves_result:
        rule.set_output(
            node, save(input, is_output=True) if input._base is None else save(input.detach()))
    return input


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``x * sigmoid(x)`` (SiluBackward0)."""
    _check_float("silu", input)
    x = input.data
    return _activation(input, x * _sigmoid(x), SiluBackward0, (), inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``x * tanh(softplus(x))`` (MishBackward0)."""
    _check_float("mish", input)
    x = input.data
    return _activation(input, x * _dual.tanh(_softplus(x)), MishBackward0, (), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (EluBackward0; in place
    EluBackward1, which PyTorch refuses for a negative alpha)."""
    _check_float("elu", input)
    x = input.data
    xp = input.device.xp
    data = xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0)) * alpha).astype(x.dtype, copy=False)
    if inplace:
        if alpha < 0 and edges_of(input) is not None:
            raise RuntimeError(
                "In-place elu backward calculation is triggered with a negative slope which is "
                "not supported. This is caused by calling in-place forward function with a "
                "negative slope, please call out-of-place version instead."
            )
        return _activation(input, data, EluBackward1, (alpha,), True)
    return _activation(input, data, EluBackward0, (alpha,), False)


@numpy.errstate(all="ignore")  # exp(beta x) overflows (to inf, as PyTorch) only past ~709
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``
    (SoftplusBackward0)."""
    _check_float("softplus", input)
    x = input.data
    xp = input.device.xp
    bx = x * beta
    linear = bx > threshold
    smooth = xp.log1p(xp.exp(xp.where(linear, 0, bx))) / beta
    data = xp.where(linear, x, smooth).astype(x.dtype, copy=False)
    return _activation(input, data, SoftplusBackward0, (beta, threshold), False)


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002
    """``log(sigmoid(x))`` computed without overflow (LogSigmoidBackward0)."""
    _check_float("log_sigmoid", input)
    return _activation(input, _log_sigmoid(input.data), LogSigmoidBackward0, (), False)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]`` (HardtanhBackward0, in place too)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    x = input.data
    data = input.device.xp.clip(x, min_val, max_val).astype(x.dtype, copy=False)
    rule = HardtanhBackward0InPlace if inplace else HardtanhBackward0
    return _activation(input, data, rule, (min_val, max_val), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``hardtanh(x, 0, 6)``, as PyTorch's (HardtanhBackward0)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def softsign(input: Tensor) -> Tensor:  # noqa: A002
    """``x / (1 + |x|)``, composed as PyTorch's (AbsBackward0, AddBackward0, DivBackward0)."""
    return input / (input.abs() + 1)


# ---- losses ----

def _mean_scale(n: int, reduction: str) -> float:
    """The factor of a pointwise loss's gradient: 1 / n for the mean (1 when empty)."""
    return 1 / n if reduction == "mean" and n else 1


def _weighted(g: Any, weight: Any, scale: float) -> Any:
    """A pointwise loss's ``g``: times ``scale`` (1 / N for the mean) and the weight, if any."""
    g = g * scale
    return g if weight is None else g * weight


@numpy.errstate(all="ignore")
def _bce_input_grad(g: Any, x: Any, t: Any, w: Any, scale: float) -> Any:
    return _weighted(g, w, scale) * ((x - t) / _clamp((1 - x) * x, 1e-12, None))


@numpy.errstate(all="ignore")
def _bce_target_grad(g: Any, x: Any, t: Any, w: Any, scale: float) -> Any:
    return _weighted(g, w, scale) * (_dual.log(1 - x) - _dual.log(x))


def _bce_logits_input_grad(g: Any, pos_weight: Any, x: Any, t: Any, w: Any,
                           scale: float) -> Any:
    if pos_weight is None:
        return _weighted(g, w, scale) * (_sigmoid(x) - t)
    pt = t * pos_weight
    return _weighted(g, w, scale) * ((pt + 1 - t) * _sigmoid(x) - pt)


def _bce_logits_target_grad(g: Any, pos_weight: Any, x: Any, t: Any, w: Any,
                            scale: float) -> Any:
    if pos_weight is None:
        return _weighted(g, w, scale) * -x
    return _weighted(g, w, scale) * (-x - (pos_weight - 1) * _log_sigmoid(x))


def _smooth_l1_grad(g: Any, x: Any, t: Any, w: Any, scale: float, beta: float) -> Any:
    return _weighted(g, w, scale) * _clamp((x - t) / beta, -1.0, 1.0)


def _huber_grad(g: Any, x: Any, t: Any, w: Any, scale: float, delta: float) -> Any:
    return _weighted(g, w, scale) * _clamp(x - t, -delta, delta)


# The nodes of pointwise losses of (input, target) with an optional weight (which takes no
# gradient), saved as PyTorch saves them; ``scale`` is 1 / N for the mean.
_LOSS_SAVES = ("self_", "target", "weight")
BinaryCrossEntropyBackward0 = Rule(
    "BinaryCrossEntropyBackward0", _bce_input_grad, _bce_target_grad, saves=_LOSS_SAVES,
    keeps=("scale",), doc="d x = (x - t) / max(x (1 - x), 1e-12); d t = log(1 - x) - log(x).")
BinaryCrossEntropyWithLogitsBackward0 = Rule(
    "BinaryCrossEntropyWithLogitsBackward0", _bce_logits_input_grad, _bce_logits_target_grad,
    saves=("pos_weight",) + _LOSS_SAVES, keeps=("scale",),
    doc="With p = pos_weight (None: 1): d x = (p t + 1 - t) sigmoid(x) - p t; "
        "d t = -x - (p - 1) logsigmoid(x).")
SmoothL1LossBackward0 = Rule(
    "SmoothL1LossBackward0", _smooth_l1_grad,
    lambda g, x, t, w, scale, beta: -_smooth_l1_grad(g, x, t, w, scale, beta),
    saves=_LOSS_SAVES, keeps=("scale", "beta"),
    doc="d x = clamp((x - t) / beta, -1, 1); d t = -d x.")
HuberLossBackward0 = Rule(
    "HuberLossBackward0", _huber_grad,
    lambda g, x, t, w, scale, delta: -_huber_grad(g, x, t, w, scale, delta),
    saves=_LOSS_SAVES, keeps=("scale", "delta"),
    doc="d x = clamp(x - t, -delta, delta); d t = -d x.")


def _record_loss(rule: Rule, input: Tensor, target: Tensor,  # noqa: A002
                 saved: tuple[Tensor | None, ...], params: tuple[Any, ...], losses: Any,
                 reduction: str) -> Tensor:
    """``losses`` reduced, recorded as ``rule`` over (input, target), saving ``saved``."""
    data = _reduce(losses, reduction)
    return rule.record((input, target), data, input.device, saved,
                       (_mean_scale(losses.size, reduction),) + params)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,  # noqa: A002
                         *, reduction: str = "mean") -> Tensor:
    """``-weight (t log x + (1 - t) log(1 - x))`` with each log clamped at -100, reduced.

    The input must lie in [0, 1] and the target have its shape and dtype; ``weight``
    broadcasts to it and takes no gradient (BinaryCrossEntropyBackward0). The options
    are keyword-only after ``weight``, whose place PyTorch's deprecated ``size_average``
    and ``reduce`` follow.
    """
    reduction = _reduction(reduction)
    tensor_arg(input, "binary_cross_entropy", "input", 1)
    tensor_arg(target, "binary_cross_entropy", "target", 2)
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({_size(target.shape)}) that is different to the input size "
            f"({_size(input.shape)}) is deprecated. Please ensure they have the same size."
        )
    dev = check_same_device(input, target)
    x, t = input.data, target.data
    if x.dtype != t.dtype:
        raise RuntimeError(f"Found dtype {scalar_type_name(t.dtype)} but expected "
                           f"{scalar_type_name(x.dtype)}")
    _check_float("binary_cross_entropy", input)
    if x.size and bool(((x < 0) | (x > 1)).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    xp = dev.xp
    with numpy.errstate(all="ignore"):
        losses = ((t - 1) * xp.maximum(xp.log1p(-x), -100)
                  - t * xp.maximum(xp.log(x), -100))
    if weight is not None:
        check_no_grad_arg("binary_cross_entropy", "weight", weight)
        check_same_device(input, weight)
        weight = weight.expand(*numpy.broadcast_shapes(weight.shape, target.shape))
        losses = losses * weight.data
    return _record_loss(BinaryCrossEntropyBackward0, input, target, (input, target, weight),
                        (), losses.astype(x.dtype, copy=False), reduction)


def binary_cross_entropy_with_logits(
    input: Tensor, target: Tensor, weight: Tensor | None = None, *,  # noqa: A002
    reduction: str = "mean", pos_weight: Tensor | None = None,
) -> Tensor:
    """``weight ((1 - t) x - (1 + (pos_weight - 1) t) logsigmoid(x))``, reduced: the binary
    cross entropy of ``sigmoid(x)`` without overflow (BinaryCrossEntropyWithLogitsBackward0).

    ``weight`` and ``pos_weight`` broadcast to the target and take no gradient. The result
    has the target's (floating) dtype, as PyTorch's.
    """
    reduction = _reduction(reduction)
    tensor_arg(input, "binary_cross_entropy_with_logits", "input", 1)
    tensor_arg(target, "binary_cross_entropy_with_logits", "target", 2)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({_size(target.shape)}) must be the same as input size "
                         f"({_size(input.shape)})")
    check_same_device(input, target)
    _check_float("binary_cross_entropy_with_logits", input)
    x, t = input.data, target.data
    if t.dtype.kind != "f":  # PyTorch computes in place in (1 - target)'s dtype
        raise RuntimeError(f"result type {scalar_type_name(x.dtype)} can't be cast to the "
                           f"desired output type {scalar_type_name(t.dtype)}")
    for name, w in (("weight", weight), ("pos_weight", pos_weight)):
        check_no_grad_arg("binary_cross_entropy_with_logits", name, w)
        if w is not None:
            check_same_device(input, w)
    log_sig = _log_sigmoid(x)
    if pos_weight is None:
        losses = (1 - t) * x - log_sig
    else:
        losses = (1 - t) * x - ((pos_weight.data - 1) * t + 1) * log_sig
    if weight is not None:
        losses = losses * weight.data
    shape = losses.shape
    if weight is not None and weight.shape != shape:
        weight = weight.expand(*shape)
    return _record_loss(BinaryCrossEntropyWithLogitsBackward0, input, target,
                        (pos_weight, input, target, weight), (),
                        losses.astype(t.dtype, copy=False), reduction)


def _pointwise_operands(name: str, input: Tensor, target: Tensor) -> tuple[Any, Any]:  # noqa: A002
    """The arrays of ``input`` and ``target``, in their promoted dtype, after PyTorch's
    checks of a pointwise loss."""
    tensor_arg(input, name, "input", 1)
    tensor_arg(target, name, "target", 2)
    check_same_device(input, target)
    check_target_shape(input.shape, target.shape)
    _check_float(name, input)
    x, t = input.data, target.data
    dtype = promote_types(x.dtype, t.dtype)
    return x.astype(dtype, copy=False), t.astype(dtype, copy=False)


def smooth_l1_loss(input: Tensor, target: Tensor, *, reduction: str = "mean",  # noqa: A002
                   beta: float = 1.0) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - beta / 2`` (d = x - t), reduced
    (SmoothL1LossBackward0); ``beta == 0`` is ``l1_loss``, composed as PyTorch's."""
    reduction = _reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    x, t = _pointwise_operands("smooth_l1_loss", input, target)
    z = input.device.xp.abs(x - t)
    losses = input.device.xp.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)
    return _record_loss(SmoothL1LossBackward0, input, target, (input, target, None), (beta,),
                        losses.astype(z.dtype, copy=False), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0, weight: Tensor | None = None) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - delta / 2)`` (d = x - t),
    reduced (HuberLossBackward0). A ``weight`` of the input's shape multiplies the
    elementwise losses before the reduction, composed as PyTorch's (MulBackward0, then
    MeanBackward0 or SumBackward0)."""
    reduction = _reduction(reduction)
    target = loss_target(target, "huber_loss")
    if weight is not None:
        tensor_arg(weight, "huber_loss", "weight")
        check_target_shape(input.shape, target.shape)
        if weight.shape != input.shape:
            raise ValueError("Weights and input must have the same size.")
        with warnings.catch_warnings():  # warned above, as PyTorch warns once
            warnings.simplefilter("ignore")
            weighted = huber_loss(input, target, "none", delta) * weight
        if reduction == "none":
            return weighted
        return weighted.sum() if reduction == "sum" else weighted.mean()
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {scalar_type_name(target.dtype)} but expected "
                           f"{scalar_type_name(input.dtype)}")
    x, t = _pointwise_operands("huber_loss", input, target)
    z = input.device.xp.abs(x - t)
    losses = input.device.xp.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
    return _record_loss(HuberLossBackward0, input, target, (input, target, None), (delta,),
                        losses.astype(z.dtype, copy=False), reduction)


@numpy.errstate(all="ignore")
def _xlogy_self_grad(g: Any, t: Any) -> Any:
    return _dual.where(_dual.raw(t) != 0, g * _dual.log(t), 0.0)


@numpy.errstate(all="ignore")
def _xlogy_other_grad(g: Any, t: Any) -> Any:
    return g * t / t


XlogyBackward0 = Rule("XlogyBackward0", _xlogy_self_grad, _xlogy_other_grad, saves=SAVES_INPUT,
                      doc="Of ``xlogy(t, t)`` (both edges to t): d self = g log(t) where t != 0 "
                          "(else 0); d other = g t / t.")


@numpy.errstate(all="ignore")
def _xlogy_self(t: Tensor) -> Tensor:
    """``t log t``, 0 where t == 0 (NaN stays NaN): ``xlogy(t, t)`` (XlogyBackward0)."""
    x = t.data
    data = t.device.xp.where(x == 0, 0, x * t.device.xp.log(x)).astype(x.dtype, copy=False)
    return XlogyBackward0.record((t, t), data, t.device, (t,))


def kl_div(input: Tensor, target: Tensor, *, reduction: str = "mean",  # noqa: A002
           log_target: bool = False) -> Tensor:
    """``t (log t - x)`` (``exp(t) (t - x)`` with ``log_target``) of log-probabilities ``x``,
    reduced; ``'batchmean'`` divides the sum by ``input.size(0)``. Composed as PyTorch's
    (XlogyBackward0, MulBackward0, SubBackward0, then the reduction's nodes); ``'mean'``
    warns as PyTorch does."""
    if reduction == "mean":
        warn_user(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
        )
    if reduction != "batchmean":
        reduction = _reduction(reduction)
    tensor_arg(input, "kl_div", "input", 1)
    tensor_arg(target, "kl_div", "target", 2)
    check_same_device(input, target)
    if input.dtype.kind != "f" or target.dtype.kind != "f":
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        losses = target.exp() * (target - input)
    else:
        losses = _xlogy_self(target) - target * input
    if reduction == "none":
        return losses
    if reduction == "mean":
        return losses.mean()
    total = losses.sum()
    if reduction == "batchmean" and input.ndim != 0:
        return total / input.shape[0]
    return total


# ---- one_hot, normalize, cosine_similarity, pad ----

def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 ``(*tensor.shape, num_classes)``: 1 at each index, 0 elsewhere;
    ``num_classes=-1`` takes ``max + 1``."""
    tensor_arg(tensor, "one_hot", "tensor", 1)
    idx = tensor.data
    if idx.dtype != numpy.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if idx.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(idx.max()) + 1
    if idx.size:
        if int(idx.min()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        if int(idx.max()) >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes < 0:
        raise RuntimeError("Class values must be smaller than num_classes.")
    dev = tensor.device
    with dev.backend.device_guard(dev.index):  # the classes are made on the tensor's device
        classes = dev.xp.arange(num_classes)
    data = (idx[..., None] == classes).astype(numpy.int64)
    return plain(data, tensor.device)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:  # noqa: A002
    """``x / max(||x||_p, eps)`` along ``dim``, composed as PyTorch's (DivBackward0 over
    the norm and ClampMinBackward0)."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denom


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps), dim)`` of the broadcast inputs.

    As PyTorch's, the norms are clamped in place outside the graph, so a gradient flows
    through a clamped norm as through the norm (SumBackward1, MulBackward0, DivBackward0,
    CloneBackward0).
    """
    tensor_arg(x1, "cosine_similarity", "x1", 1)
    tensor_arg(x2, "cosine_similarity", "x2", 2)
    try:
        shape = numpy.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise broadcast_error(x1.shape, x2.shape) from None
    if x1.shape != shape:
        x1 = x1.expand(*shape)
    if x2.shape != shape:
        x2 = x2.expand(*shape)
    norms = []
    for x in (x1, x2):
        n = x.norm(2, dim, keepdim=True).clone()
        with no_grad():
            n.clamp_min_(eps)
        norms.append(n)
    return ((x1 / norms[0]) * (x2 / norms[1])).sum(dim)


def _constant_pad_grad(g: Any, pad: tuple[int, ...]) -> Any:
    """The gradient with the padding cut off: ``pad(g, -pad)``."""
    cut = tuple(-p for p in pad)
    if type(g) is Tensor:
        return constant_pad(g, cut, 0)
    return _pad_array(g, cut, 0)


ConstantPadNdBackward0 = Rule("ConstantPadNdBackward0", _constant_pad_grad, keeps=("pad",),
                              doc="See ``_constant_pad_grad``.")


def _pad_array(x: Any, pad: tuple[int, ...], value: Any) -> Any:
    """``x`` with ``pad[2i], pad[2i + 1]`` elements before and after its ``i``-th last dim
    (negative: cropped), new elements ``value``."""
    shape = list(x.shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if shape[d] + min(before, 0) + min(after, 0) < 0:  # cropped past its end
            raise RuntimeError("narrow(): length must be non-negative.")
        size = shape[d] + before + after
        src[d] = slice(max(-before, 0), shape[d] - max(-after, 0))
        dst[d] = slice(max(before, 0), size - max(after, 0))
        shape[d] = size
    device = device_of_array(x)
    with device.backend.device_guard(device.index):  # made on x's device
        out = device.xp.full(shape, value, dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out


def constant_pad(input: Tensor, pad: tuple[int, ...], value: Any) -> Tensor:  # noqa: A002
    """``pad(input, pad, 'constant', value)``, one ConstantPadNdBackward0."""
    return ConstantPadNdBackward0.record((input,), _pad_array(input.data, pad, value),
                                         input.device, (), (pad,))


# ---- trickier grads: reflection and replication pads ----

PadAxes = tuple[tuple[int, Any, Any], ...]


def _index_pad(x: Any, axes: PadAxes, scatters: bool, rule: Rule) -> Any:
    """``x`` gathered by the indices of ``axes`` ((axis, output-to-input index, one-hot
    matrix) per padded dim), or, if ``scatters``, summed back by their one-hot matrices:
    an array, or a Tensor whose result records ``rule``."""
    data = _dual.raw(x)
    xp = _dual.xp_of(data)
    for axis, index, one_hot_matrix in axes:
        if scatters:
            moved = xp.moveaxis(data, axis, -1) @ one_hot_matrix.astype(data.dtype, copy=False)
            data = xp.moveaxis(moved, -1, axis)
        else:
            data = xp.take(data, index, axis=axis)
    data = _dual.contiguous(data)
    if type(x) is not Tensor:
        return data
    return rule.record((x,), data, x.device, (), (axes,))


def _index_pad_grad(rules: dict[tuple[str, int, bool], Rule], partner: tuple[str, int, bool],
                    scatters: bool) -> Callable[[Any, PadAxes], Any]:
    def formula(g: Any, axes: PadAxes) -> Any:
        return _index_pad(g, axes, scatters, rules[partner])

    return formula


def _pad_rules() -> dict[tuple[str, int], Rule]:
    """PyTorch's nodes of ``pad`` in 'reflect' and 'replicate' mode, by (mode, dims). The
    gradient of the pad (a gather) sums the output positions into the input's, recording
    the ``...BackwardBackward0`` node, whose gradient gathers again, recording the pad's."""
    rules: dict[tuple[str, int, bool], Rule] = {}
    for mode, kind in (("reflect", "Reflection"), ("replicate", "Replication")):
        for k in (1, 2, 3):
            for scatters in (True, False):
                name = f"{kind}Pad{k}DBackward{'' if scatters else 'Backward'}0"
                grad = _index_pad_grad(rules, (mode, k, not scatters), scatters)
                rules[mode, k, scatters] = Rule(
                    name, grad, keeps=("axes",),
                    doc=f"The node of a {mode} pad of {k} dims" if scatters else
                        f"The node of the gradient of a {mode} pad of {k} dims")
    return {(mode, k): rule for (mode, k, scatters), rule in rules.items() if scatters}


_PAD_RULES = _pad_rules()


def _index_pad_axes(input: Tensor, pad: tuple[int, ...], mode: str) -> PadAxes:  # noqa: A002
    """Per padded dim: (axis, the input index of each output position, its one-hot
    matrix), on the input's device, after PyTorch's checks of ``mode``'s padding."""
    k = len(pad) // 2
    shape = tuple(input.shape)
    if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    if 0 in shape[input.ndim - k - 1:]:
        raise RuntimeError(
            f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and "
            f"other non-zero dimensions for input, but got: {list(shape)}"
        )
    dev = input.device
    axes = []
    for i in range(k):
        axis = input.ndim - 1 - i
        n, before, after = shape[axis], pad[2 * i], pad[2 * i + 1]
        if mode == "reflect" and (before >= n or after >= n):
            raise RuntimeError(
                "Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({before}, {after}) at dimension {axis} of input "
                f"{list(shape)}"
            )
        index = numpy.arange(-before, n + after)
        if mode == "reflect":
            index = numpy.abs(index)
            index = numpy.where(index >= n, 2 * (n - 1) - index, index)
        else:
            index = numpy.clip(index, 0, n - 1)
        matrix = (index[:, None] == numpy.arange(n)).astype(numpy.float64)
        if not dev.backend.owns(index):
            index = dev.backend.from_host(index, dev.index)
            matrix = dev.backend.from_host(matrix, dev.index)
        axes.append((axis, index, matrix))
    return tuple(axes)


def pad(input: Tensor, pad: Any, mode: str = "constant",  # noqa: A002
        value: float | None = None) -> Tensor:
    """``input`` padded on its last ``len(pad) // 2`` dims: ``pad`` lists (before, after)
    counts from the last dim backwards; negative counts crop. ``mode``: 'constant' (with
    ``value``; ConstantPadNdBackward0), 'reflect' (mirrored without repeating the edge) or
    'replicate' (the edge repeated) for 1 to 3 dims of a (batched) input
    (ReflectionPad{1,2,3}DBackward0, ReplicationPad{1,2,3}DBackward0); not 'circular'."""
    tensor_arg(input, "pad", "input", 1)
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * input.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension "
            f"but got padding length {len(pad)} and input of dimension {input.ndim}"
        )
    if mode == "constant":
        return constant_pad(input, pad, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if mode == "circular":
        raise NotImplementedError("pad: mode 'circular' is not supported by aiograd")
    axes = _index_pad_axes(input, pad, mode)
    return _index_pad(input, axes, False, _PAD_RULES[mode, len(axes)])
