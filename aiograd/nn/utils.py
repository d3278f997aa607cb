"""Gradient clipping and parameter/vector conversion (``torch.nn.utils``'s training helpers).

The clipping functions work under ``no_grad`` and write gradients in place (bumping
their version counters), as PyTorch's do. ``foreach`` is accepted for PyTorch's
signatures: aiograd has one implementation, so it changes nothing.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable
from typing import Any

import numpy

from .._ops.joining import cat, stack
from .._tensor import Tensor, tensor
from ..grad_mode import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters"]

TensorOrTensors = Tensor | Iterable[Tensor]


def _as_list(tensors: TensorOrTensors) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(tensors: TensorOrTensors, norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` taken as one vector (0-d; ``tensor(0.)``
    for none): the norm of their norms, in the first tensor's device and PyTorch's dtype.

    ``error_if_nonfinite``: raise PyTorch's RuntimeError if that norm is nan or inf.
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        first = tensors[0].device
        total = stack([t.norm(norm_type).to(first) for t in tensors]).norm(norm_type)
    if error_if_nonfinite and not first.xp.isfinite(total.data):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    return total


def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale every ``.grad`` in place by ``min(max_norm / (total_norm + 1e-6), 1)``."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    # A non-finite norm gives nan gradients, as PyTorch's, without NumPy's warnings.
    with no_grad(), numpy.errstate(invalid="ignore", over="ignore"):
        coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.device))


def clip_grad_norm_(parameters: TensorOrTensors, max_norm: float,
                    norm_type: float | str = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total norm is at most
    ``max_norm`` (``get_total_norm``, then ``clip_grads_with_norm_``); return the total
    norm they had."""
    is_generator = isinstance(parameters, types.GeneratorType)
    parameters = _as_list(parameters)
    if is_generator and not parameters:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every ``.grad`` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All ``parameters`` flattened and joined into one 1-D tensor (recorded, as PyTorch's)."""
    params = list(parameters)
    _check_one_device(params)
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Any, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (their ``.data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    _check_one_device(params)
    pointer = 0
    for p in params:
        n = p.numel()
        p.data = vec.data[pointer:pointer + n].reshape(p.shape)
        pointer += n


def _check_one_device(params: list[Tensor]) -> None:
    if len({p.device for p in params}) > 1:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
