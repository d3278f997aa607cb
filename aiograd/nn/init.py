"""``torch.nn.init``: fill a tensor in place with a constant, a pattern or random values.

Each function writes ``tensor.data`` in place as PyTorch's in-place writes under
``no_grad()`` do: nothing is recorded, the tensor (a ``Parameter`` too) keeps its
identity and ``requires_grad``, its version is bumped, and it is returned.
Random values come from ``generator`` (an ``aiograd.Generator``) or the default generator
:func:`aiograd.manual_seed` seeds, drawn on the host and then moved to the tensor's
device: reproducible, but not PyTorch's stream.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy

from .._ops.inplace import commit_inplace
from .._random import draw
from .._tensor import Tensor, _random_dtype
from ..devices import CPU
from ..grad_mode import no_grad

__all__ = [
    "calculate_gain",
    "constant_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

_LINEAR_FNS = frozenset({
    "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid",
})


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity``; ``param`` is leaky_relu's slope."""
    if nonlinearity in _LINEAR_FNS:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


# ---- writing into the tensor ----

def _write(tensor: Tensor, host: numpy.ndarray | None = None, value: Any = None) -> Tensor:
    """Store ``host`` (an array of ``tensor``'s shape) or the scalar ``value`` into
    ``tensor.data`` and bump its version, recording nothing."""
    with no_grad():
        if host is None:
            tensor.data[...] = value
        else:
            dev = tensor.device
            if dev is not CPU:
                host = dev.backend.from_host(numpy.ascontiguousarray(host), dev.index)
            tensor.data[...] = host
        return commit_inplace(tensor, None)


def _host_uniform(tensor: Tensor, a: float, b: float,
                  gen: numpy.random.Generator) -> numpy.ndarray:
    """U(a, b) of ``tensor``'s shape and dtype; a complex dtype gets independent real and
    imaginary parts, as PyTorch."""
    dt = _random_dtype(tensor.dtype, "check_uniform_bounds")
    shape = tensor.shape + ((2,) if dt.kind == "c" else ())
    arr = a + (b - a) * gen.random(shape)
    return _complex_or_cast(arr, dt)


def _host_normal(tensor: Tensor, mean: float, std: float,
                 gen: numpy.random.Generator) -> numpy.ndarray:
    """N(mean, std²) of ``tensor``'s shape and dtype; for a complex dtype the real and
    imaginary parts are each N(mean, std²/2), as PyTorch."""
    dt = _random_dtype(tensor.dtype, "normal_kernel_cpu")
    if dt.kind == "c":
        arr = mean + (std / math.sqrt(2.0)) * gen.standard_normal(tensor.shape + (2,))
    else:
        arr = mean + std * gen.standard_normal(tensor.shape)
    return _complex_or_cast(arr, dt)


def _complex_or_cast(arr: numpy.ndarray, dt: numpy.dtype) -> numpy.ndarray:
    if dt.kind == "c":
        return (arr[..., 0] + 1j * arr[..., 1]).astype(dt)
    return arr.astype(dt)


# ---- constants and patterns ----

def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val`` (cast to its dtype)."""
    return _write(tensor, value=val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 1."""
    return _write(tensor, value=1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 0."""
    return _write(tensor, value=0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill the 2-D ``tensor`` with the identity matrix (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    return _write(tensor, numpy.eye(rows, cols, dtype=tensor.dtype))


# ---- random fills ----

def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, *,
             generator: Any = None) -> Tensor:
    """Fill ``tensor`` with values from U(a, b)."""
    return _write(tensor, draw(generator, lambda g: _host_uniform(tensor, a, b, g), "uniform_"))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Any = None) -> Tensor:
    """Fill ``tensor`` with values from N(mean, std²)."""
    return _write(tensor, draw(generator, lambda g: _host_normal(tensor, mean, std, g),
                               "normal_"))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, *,
                  generator: Any = None) -> Tensor:
    """Fill ``tensor`` with values from N(mean, std²) restricted to [a, b].

    Exact by rejection: values outside [a, b] are redrawn from the normal while the
    window holds more than 30% of its mass (PyTorch's threshold); otherwise candidates
    are drawn from U(a, b) and accepted with probability pdf(x) / pdf(mode), which stays
    fast for a narrow or far-off window. Warns, as PyTorch, when ``mean`` is more than
    two ``std`` outside [a, b].
    """
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    mass = _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std)
    return _write(tensor, draw(generator, lambda g: _host_trunc_normal(tensor, mean, std, a, b,
                                                                       mass, g),
                               "trunc_normal_"))


def _host_trunc_normal(tensor: Tensor, mean: float, std: float, a: float, b: float,
                       mass: float, gen: numpy.random.Generator) -> numpy.ndarray:
    if mass > 0.3:
        out = _host_normal(tensor, mean, std, gen)
        # compare in the tensor's precision, as the stored values are
        lo, hi = out.dtype.type(a), out.dtype.type(b)
        bad = (out < lo) | (out > hi)
        while bad.any():
            out[bad] = _host_normal(tensor, mean, std, gen)[bad]
            bad = (out < lo) | (out > hi)
        return out
    mode = max(a, min(mean, b))
    out = _host_uniform(tensor, a, b, gen)
    pending = numpy.ones(out.shape, dtype=bool)
    while True:
        log_ratio = -0.5 * (((out - mean) / std) ** 2 - ((mode - mean) / std) ** 2)
        pending &= numpy.log(gen.random(out.shape)) > log_ratio
        if not pending.any():
            return out
        out[pending] = _host_uniform(tensor, a, b, gen)[pending]


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


# ---- scaled by the fans ----

def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(size(1) * receptive field, size(0) * receptive field)``, the receptive field
    being the product of the sizes after the first two."""
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, *,
                    generator: Any = None) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator=generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, *,
                   generator: Any = None) -> Tensor:
    """N(0, std²) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator=generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    """gain / sqrt(fan); None (after PyTorch's warning) for a zero-element tensor."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", *,
                     generator: Any = None) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan), fan chosen by ``mode``."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator=generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", *,
                    generator: Any = None) -> Tensor:
    """N(0, std²) with std = gain / sqrt(fan), fan chosen by ``mode``."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator=generator)
