"""Functional forms of the neural-network ops (as ``torch.nn.functional``).

``cross_entropy`` with its default options records one fused node; see
Note [Fused cross entropy] in ``aiograd._ops.nn_ops``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .._boundary import public
from .._ops import nn_ops, unary
from .._ops.batch_norm import batch_norm, group_norm, instance_norm
from .._ops.conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, max_pool2d
from .._ops.nn_extra import dropout, embedding, gelu, l1_loss, layer_norm, leaky_relu
from .._ops.nn_more import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_similarity,
    elu,
    hardtanh,
    huber_loss,
    kl_div,
    logsigmoid,
    mish,
    normalize,
    one_hot,
    pad,
    relu6,
    silu,
    smooth_l1_loss,
    softplus,
    softsign,
)
from .._ops.nn_ops import cross_entropy, linear, mse_loss, nll_loss
from .._ops.unary import relu_, sigmoid, tanh
from .._tensor import Tensor
from .._warn import warn_user
from ._attention import scaled_dot_product_attention

__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "conv1d", "conv2d", "cosine_similarity",
           "cross_entropy", "dropout", "elu", "elu_", "embedding", "gelu", "group_norm",
           "hardtanh", "hardtanh_", "huber_loss", "instance_norm", "kl_div", "l1_loss",
           "layer_norm", "leaky_relu", "linear", "log_softmax", "logsigmoid", "max_pool2d",
           "max_pool2d_with_indices", "mish", "mse_loss", "nll_loss", "normalize", "one_hot",
           "pad", "relu", "relu6", "relu_", "scaled_dot_product_attention", "sigmoid", "silu",
           "smooth_l1_loss", "softmax", "softplus", "softsign", "tanh"]


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    """``elu`` written into ``input``."""
    return elu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    """``hardtanh`` written into ``input``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> Any:
    """``max_pool2d`` returning ``(values, indices)`` (``return_indices`` is always True)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``max(x, 0)`` elementwise; with ``inplace``, written into ``input`` (``relu_``)."""
    if inplace:
        return relu_(input)
    return unary.relu(input)


def _implicit_dim(name: str, ndim: int) -> int:
    """PyTorch's deprecated choice of ``dim`` when none is given: 0 for 0-, 1- and 3-D inputs."""
    warn_user(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``exp(x) / sum(exp(x), dim)``, computed in ``dtype`` (the input cast first) if given."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return nn_ops.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """``x - logsumexp(x, dim)``, computed in ``dtype`` (the input cast first) if given."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return nn_ops.log_softmax(input, dim, dtype)


# ---- the boundary: Note [Tensor arguments of nn.functional] ----

_TENSOR_PARAMETERS = ("key", "value")  # besides the first


def _checks_tensor_arguments(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` refusing a non-Tensor first argument (``input``), ``key`` or ``value`` with
    PyTorch's TypeError, its errors shaped by Note [Errors at the public boundary].

    Note [Tensor arguments of nn.functional]
        As PyTorch's, these functions take a Tensor as ``input`` (a NumPy
        array, a list or a number there is a TypeError naming the function,
        the argument and its position), never an internal error from deep
        inside an op. A loss's ``target`` may also be an array (class
        indices, or values): it carries no gradient, and is converted to
        the input's device; ``embedding`` takes an index array too.
    """
    params = list(inspect.signature(fn).parameters)
    checked = ((params[0], 0),) + tuple((name, params.index(name))
                                        for name in _TENSOR_PARAMETERS if name in params)
    return public(fn, tensor_args=checked)


# embedding also takes an index array for ``input`` (moved to the weight's device)
globals().update({name: public(globals()[name]) if name == "embedding"
                  else _checks_tensor_arguments(globals()[name]) for name in __all__})
