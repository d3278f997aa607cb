"""Normalization over channels: ``batch_norm`` (NativeBatchNormBackward0),
``group_norm`` (NativeGroupNormBackward0) and ``instance_norm`` (composed, as PyTorch's:
a batch norm of the input viewed as one sample of N * C channels).

Note [Batch norm statistics]
    In training the input is normalized by the mean and biased variance of each channel
    over the batch and spatial dims, and the running stats (when given) are updated in
    place to ``momentum * batch + (1 - momentum) * running`` with the *unbiased* variance.
    As PyTorch's kernel does, the update writes the buffers' arrays without bumping their
    versions and records nothing. In evaluation the running stats normalize instead, and
    the input gradient is just ``g * weight * rstd``.

Each node's create_graph backward records the ops of its formula (PyTorch records one
``...BackwardBackward0`` node); both give the same second-order gradients.
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .._tensor import Tensor, scalar_type_name
from ..grad_mode import no_grad
from ..graph._saved import SavedTensor
from . import _dual
from ._record import check_same_device, edges_of, plain, record, tensor_arg
from ._rule import Rule, RuleNode
from .inplace import clone
from .nn_extra import norm_input_grad, norm_stats

__all__ = ["batch_norm", "group_norm", "instance_norm"]


def _channel_dims(ndim: int) -> tuple[int, ...]:
    """Every dim but the channel dim 1: those the statistics reduce."""
    return (0,) + tuple(range(2, ndim))


def _per_channel(x: Any, ndim: int) -> Any:
    """A (C,) array or Tensor shaped (1, C, 1, ...) to broadcast against the input."""
    return _dual.reshape(x, (1, -1) + (1,) * (ndim - 2))


# ---- trickier grads: batch norm and group norm (three gradients share xhat and rstd) ----

def _batch_norm_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                     saved_input: SavedTensor, saved_weight: SavedTensor | None, xhat: Any,
                     rstd: Any, mean: Any, training: bool, eps: float) -> Any:
    """With ``xhat`` the normalized input, ``gh = g * weight`` and means over the batch and
    spatial dims: in training d input = rstd (gh - mean(gh) - xhat mean(gh xhat)), in
    evaluation d input = gh rstd; d weight = sum of g xhat and d bias = sum of g over them.

    ``xhat`` and ``rstd`` are the forward's arrays for the plain backward; with
    ``create_graph`` they are recomputed from the input (in evaluation from the running
    ``mean`` and ``rstd``, constants) so their dependence on it is recorded.
    """
    g = grads[0]
    edges = node.next_edges
    dims = _channel_dims(g.ndim)
    if not create_graph:
        saved_input.unpack(node, False)  # its version check, as PyTorch's saved input
    else:
        x = saved_input.unpack(node, True)
        if training:
            xhat, rstd, _, _ = norm_stats(x, dims, eps)
        else:
            xhat = (x - mean) * rstd
    gx = gw = gb = None
    if edges[0] is not None:
        gh = g
        if saved_weight is not None:
            gh = g * _per_channel(saved_weight.unpack(node, create_graph), g.ndim)
        gx = norm_input_grad(gh, xhat, rstd, dims) if training else gh * rstd
    if edges[1] is not None:
        gw = _dual.sum_dims(g * xhat, dims)
    if edges[2] is not None:
        gb = _dual.sum_dims(g, dims)
    return (gx, gw, gb)


NativeBatchNormBackward0 = Rule(
    "NativeBatchNormBackward0", whole=_batch_norm_grad, saves=("input", "weight"),
    keeps=("xhat", "rstd", "mean", "training", "eps"), frees_keeps=True,
    doc="``batch_norm``: saves the input and weight, and keeps xhat, rstd and (in "
        "evaluation) the running mean (freed with them). See ``_batch_norm_grad``.")


def _group_norm_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                     saved_input: SavedTensor, saved_weight: SavedTensor | None, xhat: Any,
                     rstd: Any, grouped: tuple[int, int, int], eps: float) -> Any:
    """With ``xhat`` the input normalized per (sample, group), ``gh = g * weight`` and
    means over each group: d input = rstd (gh - mean(gh) - xhat mean(gh xhat)),
    d weight = sum of g xhat and d bias = sum of g over the batch and spatial dims.

    ``xhat`` (shaped ``grouped``: (N, groups, values per group)) and ``rstd`` are arrays
    for the plain backward; with ``create_graph`` they are recomputed from the saved input.
    """
    g = grads[0]
    edges = node.next_edges
    if create_graph:
        x = _dual.reshape(saved_input.unpack(node, True), grouped)
        xhat, rstd, _, _ = norm_stats(x, (2,), eps)
    else:
        saved_input.unpack(node, False)  # its version check, as PyTorch's saved input
    gx = gw = gb = None
    dims = _channel_dims(g.ndim)
    if edges[0] is not None:
        gh = g
        if saved_weight is not None:
            gh = g * _per_channel(saved_weight.unpack(node, create_graph), g.ndim)
        gx = _dual.reshape(norm_input_grad(_dual.reshape(gh, grouped), xhat, rstd, (2,)),
                           g.shape)
    if edges[1] is not None:
        gw = _dual.sum_dims(g * _dual.reshape(xhat, g.shape), dims)
    if edges[2] is not None:
        gb = _dual.sum_dims(g, dims)
    return (gx, gw, gb)


NativeGroupNormBackward0 = Rule(
    "NativeGroupNormBackward0", whole=_group_norm_grad, saves=("input", "weight"),
    keeps=("xhat", "rstd", "grouped", "eps"), frees_keeps=True,
    doc="``group_norm``: saves the input and weight, and keeps xhat and rstd (freed with "
        "them). See ``_group_norm_grad``.")


def _check_dtypes(input: Tensor, params: tuple[Tensor | None, ...],  # noqa: A002
                  kernel: str) -> None:
    """PyTorch's CPU dtype rules: a floating input, and parameters of its dtype (its
    mixed-dtype kernels, reduced-float inputs with float32 parameters, are not here)."""
    if input.dtype.kind != "f":
        raise NotImplementedError(
            f"\"{kernel}\" not implemented for '{scalar_type_name(input.dtype)}'")
    defined = [p for p in params if p is not None]
    if all(p.dtype == input.dtype for p in defined):
        return
    if any(p.dtype != numpy.float32 for p in defined):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    if input.dtype != numpy.float16:  # PyTorch's reduced floats (NumPy has no bfloat16)
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    raise NotImplementedError(f"{kernel} of a float16 input with float32 parameters")


def _check_args(input: Tensor, running_mean: Tensor | None,  # noqa: A002
                running_var: Tensor | None, weight: Tensor | None, bias: Tensor | None,
                training: bool) -> None:
    """PyTorch's checks of the channel counts and of the running stats' presence."""
    if input.ndim < 2 and running_mean is None and running_var is None:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [-{max(input.ndim, 1)}, "
            f"{max(input.ndim, 1) - 1}], but got 1)")
    channels = input.shape[1] if input.ndim >= 2 else 0
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is None:
            if not training and name.startswith("running"):
                raise RuntimeError(f"{name} must be defined in evaluation mode")
            continue
        tensor_arg(t, "batch_norm", name)
        check_same_device(input, t)
        if t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be "
                         "None")


def _verify_batch_size(shape: list[int], shown: str) -> None:
    """PyTorch's ValueError when ``shape`` leaves one value per channel (dims 0, 2, ...);
    ``shown`` is the input size its message shows."""
    if math.prod(shape[:1] + shape[2:]) == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input size "
                         f"{shown}")


def _empty_batch_norm(input: Tensor, weight: Tensor | None,  # noqa: A002
                      bias: Tensor | None) -> Tensor:
    """PyTorch's result for an input with no elements: ``input.clone() * weight[0] +
    bias[0]`` (CloneBackward0, MulBackward0, AddBackward0), stats untouched."""
    out = clone(input)
    if weight is not None:
        out = out * weight[0]
    if bias is not None:
        out = out + bias[0]
    return out


def batch_norm(input: Tensor, running_mean: Tensor | None,  # noqa: A002
               running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` per channel (dim 1) of an (N, C, *)
    input, as one NativeBatchNormBackward0: with the batch's mean and biased variance
    in ``training`` (updating the running stats in place when given, see Note [Batch norm
    statistics]), else with ``running_mean`` and ``running_var``."""
    tensor_arg(input, "batch_norm", "input")
    if training:
        _verify_batch_size(list(input.shape), f"torch.Size({list(input.shape)})")
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if not isinstance(momentum, (int, float)):
        raise TypeError("batch_norm(): argument 'momentum' (position 7) must be float, not "
                        f"{type(momentum).__name__}")
    return _native_batch_norm(input, running_mean, running_var, weight, bias, training,
                              momentum, eps)


def _native_batch_norm(input: Tensor, running_mean: Tensor | None,  # noqa: A002
                       running_var: Tensor | None, weight: Tensor | None,
                       bias: Tensor | None, training: bool, momentum: float,
                       eps: float) -> Tensor:
    """``batch_norm`` after its Python-level checks (PyTorch's ``torch.batch_norm``)."""
    _check_args(input, running_mean, running_var, weight, bias, training)
    _check_dtypes(input, (weight, bias, running_mean, running_var), "batch_norm")
    if input.numel() == 0:
        return _empty_batch_norm(input, weight, bias)
    x = input.data
    ndim = input.ndim
    dims = _channel_dims(ndim)
    mean = None
    if training:
        xhat, rstd, batch_mean, var = norm_stats(x, dims, eps)
        if running_mean is not None and running_var is not None:  # both or neither
            n = x.size // x.shape[1]  # > 1: checked by the callers
            unbiased = var.reshape(-1) * (n / (n - 1))
            running_mean.data[...] = momentum * batch_mean.reshape(-1) + (
                1 - momentum) * running_mean.data
            running_var.data[...] = momentum * unbiased + (1 - momentum) * running_var.data
    else:
        assert running_mean is not None and running_var is not None  # by _check_args
        mean = _per_channel(running_mean.data, ndim)
        rstd = _per_channel((running_var.data + eps) ** -0.5, ndim)
        xhat = (x - mean) * rstd
    xhat = _dual.contiguous(xhat)  # PyTorch's layout, whatever the input's
    data = xhat
    if weight is not None:
        data = data * _per_channel(weight.data, ndim)
    if bias is not None:
        data = data + _per_channel(bias.data, ndim)
    edges = edges_of(input, weight, bias)
    if edges is None:
        return plain(data, input.device)
    if data is xhat:  # the node keeps xhat: an in-place write of the output must not reach it
        data = xhat.copy()
    node = NativeBatchNormBackward0.make(edges, (input, weight),
                                         (xhat, rstd, mean, training, eps))
    return record(node, data, input.device)


# ---- group_norm ----

def _check_group_args(input: Tensor, num_groups: int, weight: Tensor | None,  # noqa: A002
                      bias: Tensor | None) -> None:
    channels = input.shape[1]
    if channels % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {list(input.shape)} and num_groups={num_groups}")
    # PyTorch's message about the bias shows the weight's shape ([0] when there is none)
    shown = [0] if weight is None else list(weight.shape)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        tensor_arg(t, "group_norm", name)
        check_same_device(input, t)
        if t.ndim != 1 or t.shape[0] != channels:
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in "
                f"input, but got {name} of shape {shown} and input of shape "
                f"{list(input.shape)}")


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` with the mean and biased variance
    of each sample's ``num_groups`` groups of consecutive channels (dim 1), and ``weight``
    and ``bias`` per channel; one NativeGroupNormBackward0."""
    tensor_arg(input, "group_norm", "input")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int):
        raise TypeError(f"group_norm(): argument 'num_groups' (position 2) must be int, not "
                        f"{type(num_groups).__name__}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            tensor_arg(t, "group_norm", name)
    if input.ndim < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    shape = list(input.shape)
    size = [shape[0] * shape[1] // num_groups, num_groups] + shape[2:]
    _verify_batch_size(size, str(size))
    _check_group_args(input, num_groups, weight, bias)
    _check_dtypes(input, (weight, bias), "GroupNormKernelImpl")
    per_group = shape[1] // num_groups * math.prod(shape[2:])
    grouped = (shape[0], num_groups, per_group)
    x = input.data
    xhat, rstd, _, _ = norm_stats(x.reshape(grouped), (2,), eps)
    ndim = input.ndim
    data = xhat.reshape(x.shape)
    if weight is not None:
        data = data * _per_channel(weight.data, ndim)
    if bias is not None:
        data = data + _per_channel(bias.data, ndim)
    edges = edges_of(input, weight, bias)
    if edges is None:
        return plain(data, input.device)
    if weight is None and bias is None:  # the node keeps xhat: a write of the output must not
        data = data.copy()               # reach it
    node = NativeGroupNormBackward0.make(edges, (input, weight), (xhat, rstd, grouped, eps))
    return record(node, data, input.device)


# ---- instance_norm ----

def _repeated(t: Tensor | None, times: int) -> Tensor | None:
    return None if t is None else t.repeat(times)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,  # noqa: A002
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """``batch_norm`` of each sample's channels over their spatial dims, as PyTorch's: the
    (N, C, *) input viewed as (1, N * C, *), the per-channel tensors repeated N times
    (ViewBackward0 over NativeBatchNormBackward0 over RepeatBackward0). With
    ``use_input_stats`` the running stats, when given, become the mean over the samples
    of their updates (written by ``copy_``, bumping their versions as PyTorch's)."""
    tensor_arg(input, "instance_norm", "input")
    shape = list(input.shape)
    if use_input_stats:
        if math.prod(shape[2:]) == 1:
            raise ValueError("Expected more than 1 spatial element when training, got input "
                             f"size torch.Size({shape})")
    elif running_mean is None or running_var is None:
        raise RuntimeError(
            "Expected running_mean and running_var to be defined when use_input_stats is false")
    b, c = shape[0], shape[1]
    stats = _repeated(running_mean, b), _repeated(running_var, b)
    out = _native_batch_norm(input.contiguous().view(1, b * c, *shape[2:]), *stats,
                             _repeated(weight, b), _repeated(bias, b), use_input_stats,
                             momentum, eps)
    with no_grad():
        for running, updated in zip((running_mean, running_var), stats):
            if running is not None and updated is not None:  # updated: running repeated
                running.copy_(updated.view(b, c).mean(0))
    return out.view(*shape)
