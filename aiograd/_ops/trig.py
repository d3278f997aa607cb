"""Inverse trigonometric, hyperbolic and inverse-error-function ops:
``atan asin acos sinh cosh erfinv``, their in-place forms, and ``erf_``.

Each node saves its input, as PyTorch's do. Outside the domain (``asin(2)``,
``erfinv(1.5)``) the result is NaN without a warning, and so is the
gradient at the domain's edge where PyTorch's is infinite or NaN. See Note
[Silent singular points] and Note [Dual backward formulas].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy

from .._tensor import Tensor
from . import _dual
from ._rule import SAVES_INPUT, Rule
from .nn_extra import _erf_array, erf
from .pointwise import _unary_
from .unary import _floating

__all__ = ["atan", "asin", "acos", "sinh", "cosh", "erfinv",
           "atan_", "asin_", "acos_", "sinh_", "cosh_", "erfinv_", "erf_"]


def _dual_call(x: Any, op: Callable[[Tensor], Tensor], xp_name: str) -> Any:
    """``op(x)`` for a Tensor (create_graph), the array module's ``xp_name`` for an array."""
    return op(x) if type(x) is Tensor else getattr(_dual.xp_of(x), xp_name)(x)


def _forward(rule: Rule, a: Tensor, xp_name: str) -> Tensor:
    return rule.unary(a, _dual.quietly(getattr(a.device.xp, xp_name), _floating(a)))


# ---- atan / asin / acos ----

@numpy.errstate(all="ignore")  # |x| >= 1. See Note [Silent singular points].
def _asin_grad(g: Any, x: Any) -> Any:
    return g / _dual_call(1 - x * x, Tensor.sqrt, "sqrt")


@numpy.errstate(all="ignore")  # |x| >= 1. See Note [Silent singular points].
def _acos_grad(g: Any, x: Any) -> Any:
    return -g / _dual_call(1 - x * x, Tensor.sqrt, "sqrt")


AtanBackward0 = Rule("AtanBackward0", lambda g, x: g / (x * x + 1), saves=SAVES_INPUT,
                     doc="d atan(x) = 1 / (1 + x^2): saves the input.")
AsinBackward0 = Rule("AsinBackward0", _asin_grad, saves=SAVES_INPUT,
                     doc="d asin(x) = 1 / sqrt(1 - x^2): saves the input.")
AcosBackward0 = Rule("AcosBackward0", _acos_grad, saves=SAVES_INPUT,
                     doc="d acos(x) = -1 / sqrt(1 - x^2): saves the input.")


def atan(input: Tensor) -> Tensor:  # noqa: A002
    return _forward(AtanBackward0, input, "arctan")


def asin(input: Tensor) -> Tensor:  # noqa: A002
    return _forward(AsinBackward0, input, "arcsin")


def acos(input: Tensor) -> Tensor:  # noqa: A002
    return _forward(AcosBackward0, input, "arccos")


# ---- sinh / cosh ----

@numpy.errstate(over="ignore")  # cosh overflows to inf, as the forward does
def _sinh_grad(g: Any, x: Any) -> Any:
    return g * _dual_call(x, cosh, "cosh")


@numpy.errstate(over="ignore")  # sinh overflows to +-inf, as the forward does
def _cosh_grad(g: Any, x: Any) -> Any:
    return g * _dual_call(x, sinh, "sinh")


SinhBackward0 = Rule("SinhBackward0", _sinh_grad, saves=SAVES_INPUT,
                     doc="d sinh(x) = cosh(x): saves the input.")
CoshBackward0 = Rule("CoshBackward0", _cosh_grad, saves=SAVES_INPUT,
                     doc="d cosh(x) = sinh(x): saves the input.")


def sinh(input: Tensor) -> Tensor:  # noqa: A002
    return _forward(SinhBackward0, input, "sinh")


def cosh(input: Tensor) -> Tensor:  # noqa: A002
    return _forward(CoshBackward0, input, "cosh")


# ---- erfinv (trickier: no array module has it) ----

_WINITZKI_A = 0.147
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2


def _erfinv_array(y: Any) -> Any:
    """erfinv of an array, computed in float64: Winitzki's closed form (relative error
    about 2e-3) refined by Newton steps on ``erf(x) = y``, each of which squares the
    error; ``+-1`` give ``+-inf``, ``|y| > 1`` and NaN give NaN."""
    xp = _dual.xp_of(y)
    z = y.astype(numpy.float64)
    with numpy.errstate(all="ignore"):
        log_term = xp.log((1 - z) * (1 + z))
        first = 2 / (math.pi * _WINITZKI_A) + log_term / 2
        x = xp.copysign(xp.sqrt(xp.sqrt(first * first - log_term / _WINITZKI_A) - first), z)
        inside = xp.abs(z) < 1
        x = xp.where(inside, x, 0.0)
        for _ in range(4):
            step = (_erf_array(x) - z) * _SQRT_PI_OVER_2 * xp.exp(x * x)
            x = xp.where(inside & xp.isfinite(step), x - step, x)
        out = xp.where(inside, x, xp.where(xp.abs(z) == 1, xp.copysign(xp.inf, z), xp.nan))
    return out.astype(y.dtype, copy=False)


@numpy.errstate(all="ignore")  # |x| >= 1. See Note [Silent singular points].
def _erfinv_grad(g: Any, x: Any) -> Any:
    root = erfinv(x) if type(x) is Tensor else _erfinv_array(x)
    return g * _dual.exp(root * root) * _SQRT_PI_OVER_2


ErfinvBackward0 = Rule("ErfinvBackward0", _erfinv_grad, saves=SAVES_INPUT,
                       doc="d erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x)^2): saves the input.")


def erfinv(input: Tensor) -> Tensor:  # noqa: A002
    """The inverse error function, to float64 precision (``_erfinv_array``)."""
    return ErfinvBackward0.unary(input, _erfinv_array(_floating(input)))


# ---- in place ----

atan_ = _unary_(atan, "input")
asin_ = _unary_(asin, "input")
acos_ = _unary_(acos, "input")
sinh_ = _unary_(sinh, "input")
cosh_ = _unary_(cosh, "input")
erfinv_ = _unary_(erfinv, "input")
erf_ = _unary_(erf, "input")


