"""More neural-network ops: ``dropout embedding layer_norm leaky_relu erf gelu l1_loss``.

Dropout multiplies by a constant mask, so it records PyTorch's own
``MulBackward0`` (the mask takes no gradient). Embedding picks rows of a
weight and scatter-adds its gradient back into them (``EmbeddingBackward0``).
layer_norm, leaky_relu, erf and gelu are one node each, named as PyTorch's; their
create_graph backward records the ops of their formula (PyTorch records one
``...BackwardBackward0`` node). l1_loss is composed of existing ops, as PyTorch's.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy

from .. import _defaults, _random
from .._boundary import AssertionValueError
from .._tensor import Tensor, scalar_type_name
from ..graph._saved import SavedTensor
from . import _dual
from ._index_scatter import index_scatter_add
from ._record import check_same_device, edges_of, plain, record, save, tensor_arg
from ._rule import SAVES_INPUT, SAVES_OUTPUT, Rule, RuleNode, Saved
from .inplace import check_inplace, commit_inplace
from .nn_ops import _reduction, check_arg_type, check_target_shape, loss_target

# ---- dropout ----


def _dropout_mask(input: Tensor, p: float) -> Tensor:  # noqa: A002
    """``keep / (1 - p)`` with ``keep ~ Bernoulli(1 - p)`` drawn from the generator that
    :func:`aiograd.manual_seed` seeds (on the host, then moved to the input's device)."""
    dt = input.dtype
    if p == 1:
        mask = numpy.zeros(input.shape, dtype=dt)
    else:
        keep = _random.draw(None, lambda g: g.random(input.shape), "dropout") >= p
        mask = keep.astype(dt) * dt.type(1 / (1 - p))
    dev = input.device
    if dev.backend.owns(mask):
        return plain(mask, dev)
    return plain(dev.backend.from_host(mask, dev.index), dev)


def dropout(input: Tensor, p: float = 0.5, training: bool = True,  # noqa: A002
            inplace: bool = False) -> Tensor:
    """Zero each entry with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The input itself is returned when not ``training`` or ``p == 0`` (as PyTorch);
    otherwise ``input * mask`` (``MulBackward0``), or ``input.mul_(mask)`` in place.
    """
    check_arg_type("dropout", "p", p, numbers.Real, "float")
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if input.dtype.kind not in "fc":
        raise RuntimeError(
            "result type Float can't be cast to the desired output type "
            f"{scalar_type_name(input.dtype)}"
        )
    mask = _dropout_mask(input, p)
    if inplace:
        return input.mul_(mask)
    return input * mask


# ---- embedding ----

def _embedding_grad(g: Any, indices: Any, rows: Any, keep: Any,
                    weight_shape: tuple[int, ...]) -> Any:
    """d weight[i] = sum of g over the positions whose index is i; the padding row gets
    nothing. ``rows``: the flat indices that count; ``keep``: the flat positions that
    count (None for all of them). ``indices`` (None for an array input) is saved as
    PyTorch saves it, unpacked only so that a later write to it is caught."""
    g = _dual.reshape(g, (-1, weight_shape[1]))
    if keep is not None:
        g = g[keep]
    return index_scatter_add(g, weight_shape, (rows,), False, "EmbeddingDenseBackwardBackward0")


EmbeddingBackward0 = Rule("EmbeddingBackward0", _embedding_grad,
                          saves=(Saved("indices", raw=True),),
                          keeps=("rows", "keep", "weight_shape"),
                          doc="``embedding``'s node: see ``_embedding_grad``.")


def _check_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` made non-negative; PyTorch's AssertionError (also a ValueError) when
    out of range."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionValueError("Padding_idx must be within num_embeddings")
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:  # noqa: A002
    """``weight[input]``: a row of the 2-D ``weight`` per integer index, of shape
    ``input.shape + (embedding_dim,)``. Rows at ``padding_idx`` get no gradient."""
    tensor_arg(weight, "embedding", "weight")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    pad = _check_padding_idx(padding_idx, weight.shape[0])
    if isinstance(input, Tensor):
        check_same_device(input, weight)
        idx = input.data
    else:  # an array; a host one is moved to the weight's device
        idx = input
        dev = weight.device
        if isinstance(idx, numpy.ndarray) and not dev.backend.owns(idx):
            idx = dev.backend.from_host(idx, dev.index)
    kind = getattr(getattr(idx, "dtype", None), "kind", None)
    if kind not in ("i", "u"):
        got = f"torch.{scalar_type_name(idx.dtype)}Tensor" if kind else type(idx).__name__
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {got} instead (while checking arguments for embedding)"
        )
    n = weight.shape[0]
    if idx.size and (bool((idx < 0).any()) or bool((idx >= n).any())):
        raise IndexError("index out of range in self")
    flat = idx.reshape(-1).astype(numpy.int64, copy=False)
    data = weight.device.xp.take(weight.data, flat, axis=0).reshape(idx.shape + (weight.shape[1],))
    edges = edges_of(weight)
    if edges is None:
        return plain(data, weight.device)
    keep = None if pad is None else weight.device.xp.nonzero(flat != pad)[0]
    rows = flat if keep is None else flat[keep]
    node = EmbeddingBackward0.make(edges, (input if isinstance(input, Tensor) else None,),
                                   (rows, keep, weight.shape))
    return record(node, data, weight.device)


# ---- layer_norm ----

def norm_stats(x: Any, dims: tuple[int, ...], eps: float) -> tuple[Any, Any, Any, Any]:
    """``xhat = (x - mean) * rstd``, ``rstd = 1 / sqrt(var + eps)``, ``mean`` and the biased
    ``var`` over ``dims`` (kept as size-1 dims), for an array or a Tensor (see Note [Dual
    backward formulas]): the statistics of layer, batch and group norm."""
    n = math.prod(x.shape[d] for d in dims)
    mean = _dual.sum_dims(x, dims, keepdim=True) / n
    xc = x - mean
    var = _dual.sum_dims(xc * xc, dims, keepdim=True) / n
    rstd = (var + eps) ** -0.5
    return xc * rstd, rstd, mean, var


def norm_input_grad(gh: Any, xhat: Any, rstd: Any, dims: tuple[int, ...]) -> Any:
    """A normalization's input gradient from ``gh`` (the output's gradient times the
    weight): ``rstd (gh - mean(gh) - xhat mean(gh xhat))``, the means over ``dims``."""
    n = math.prod(gh.shape[d] for d in dims)
    mean_gh = _dual.sum_dims(gh, dims, keepdim=True) / n
    mean_ghx = _dual.sum_dims(gh * xhat, dims, keepdim=True) / n
    return rstd * (gh - mean_gh - xhat * mean_ghx)


# ---- trickier grads: layer_norm (three gradients share xhat and rstd) ----

def _layer_norm_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                     saved_input: SavedTensor, saved_weight: SavedTensor | None, xhat: Any,
                     rstd: Any, dims: tuple[int, ...], eps: float) -> Any:
    """With ``xhat`` the normalized input, ``gh = g * weight`` and means over the
    normalized dims: d input = rstd (gh - mean(gh) - xhat mean(gh xhat)),
    d weight = sum of g xhat over the batch dims, d bias = sum of g over them.

    ``xhat`` and ``rstd`` are the forward's arrays for the plain backward; with
    ``create_graph`` they are recomputed from the input so their dependence on it is
    recorded.
    """
    g = grads[0]
    edges = node.next_edges
    if create_graph:
        xhat, rstd, _, _ = norm_stats(saved_input.unpack(node, True), dims, eps)
    else:
        saved_input.unpack(node, False)  # its version check, as PyTorch's saved input
    gx = gw = gb = None
    if edges[0] is not None:
        gh = g if saved_weight is None else g * saved_weight.unpack(node, create_graph)
        gx = norm_input_grad(gh, xhat, rstd, dims)
    batch = tuple(range(g.ndim - len(dims)))
    if edges[1] is not None:
        gw = g * xhat
        gw = _dual.sum_dims(gw, batch) if batch else gw
    if edges[2] is not None:
        gb = _dual.sum_dims(g, batch) if batch else g
    return (gx, gw, gb)


NativeLayerNormBackward0 = Rule(
    "NativeLayerNormBackward0", whole=_layer_norm_grad, saves=("input", "weight"),
    keeps=("xhat", "rstd", "dims", "eps"), frees_keeps=True,
    doc="``layer_norm``: saves the input and weight, and keeps xhat and rstd (freed with "
        "them). See ``_layer_norm_grad``.")


def _check_affine(name: str, t: Tensor | None, shape: tuple[int, ...]) -> None:
    if t is not None and tuple(t.shape) != shape:
        raise RuntimeError(
            f"Expected {name} to be of same shape as normalized_shape, but got {name} of "
            f"shape {list(t.shape)} and normalized_shape = {list(shape)}"
        )


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last
    ``len(normalized_shape)`` dims (the biased variance), as one NativeLayerNormBackward0."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(
            "layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, "
            f"not {type(normalized_shape).__name__}"
        )
    shape = tuple(int(s) for s in normalized_shape)
    if not shape:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
            "least one element, but got normalized_shape = []")
    k = len(shape)
    if k > input.ndim or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(str(s) for s in shape)}], but got input of size"
            f"{list(input.shape)}"
        )
    _check_affine("weight", weight, shape)
    _check_affine("bias", bias, shape)
    dims = tuple(range(input.ndim - k, input.ndim))
    xhat, rstd, _, _ = norm_stats(input.data, dims, eps)
    xhat = _dual.contiguous(xhat)  # PyTorch's layout, whatever the input's
    data = xhat
    if weight is not None:
        check_same_device(input, weight)
        data = data * weight.data
    if bias is not None:
        check_same_device(input, bias)
        data = data + bias.data
    edges = edges_of(input, weight, bias)
    if edges is None:
        return plain(data, input.device)
    if data is xhat:  # the node keeps xhat: an in-place write of the output must not reach it
        data = xhat.copy()
    node = NativeLayerNormBackward0.make(edges, (input, weight), (xhat, rstd, dims, eps))
    return record(node, data, input.device)


# ---- leaky_relu ----

def _leaky_relu_grad(g: Any, x: Any, negative_slope: float) -> Any:
    return leaky_relu_backward(g, x, negative_slope)


_LEAKY_RELU_DOC = (
    "d x = g where x > 0, else ``negative_slope * g``. ``saved``: the input (or, for "
    "LeakyReluBackward1, the result of the in-place op: of the input's sign, as the slope "
    "is >= 0 there). With ``create_graph`` it records a LeakyReluBackwardBackward0, as "
    "PyTorch's.")
LeakyReluBackward0 = Rule("LeakyReluBackward0", _leaky_relu_grad, saves=SAVES_INPUT,
                          keeps=("negative_slope",), doc=_LEAKY_RELU_DOC)
LeakyReluBackward1 = Rule("LeakyReluBackward1", _leaky_relu_grad, saves=SAVES_OUTPUT,
                          keeps=("negative_slope",),
                          doc="LeakyReluBackward0 of the in-place ``leaky_relu(..., "
                              "inplace=True)``.")
# The slope is piecewise constant in ``x``: the gradient is ``leaky_relu_backward(gg, x)``
# for ``grad`` and zeros for ``x``, as PyTorch's.
LeakyReluBackwardBackward0 = Rule(
    "LeakyReluBackwardBackward0", _leaky_relu_grad,
    lambda g, x, negative_slope: _dual.zeros_of(g),
    saves=SAVES_INPUT, keeps=("negative_slope",),
    doc="The node of leaky_relu's create_graph gradient ``leaky_relu_backward(grad, x)``.")


def leaky_relu_backward(grad: Any, x: Any, negative_slope: float) -> Any:
    """``grad`` where ``x > 0``, else ``negative_slope * grad``: two arrays, or two
    Tensors (then recorded as a LeakyReluBackwardBackward0)."""
    if type(grad) is not Tensor:
        return _dual.where(_dual.raw(x) > 0, grad, grad * negative_slope)
    g = grad.data
    data = grad.device.xp.where(x.data > 0, g, g * negative_slope)
    return LeakyReluBackwardBackward0.record((grad, x), data, grad.device, (x,),
                                             (negative_slope,))


def _check_float(name: str, t: Tensor) -> None:
    if t.dtype.kind not in "fc":
        raise NotImplementedError(
            f"\"{name}\" not implemented for '{scalar_type_name(t.dtype)}'"
        )


def leaky_relu(input: Tensor, negative_slope: float = 0.01,  # noqa: A002
               inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``; with ``inplace``, written into
    ``input`` (PyTorch refuses the in-place backward for a negative slope)."""
    _check_float("leaky_relu_cpu", input)
    x = input.data
    xp = input.device.xp
    if inplace:
        edges = edges_of(input)
        if edges is not None and negative_slope < 0:
            raise RuntimeError(
                "In-place leakyReLu backward calculation is triggered with a negative slope "
                "which is not supported. This is caused by calling in-place forward function "
                "with a negative slope, please call out-of-place version instead."
            )
        check_inplace(input, edges)
        xp.copyto(x, x * negative_slope, where=x <= 0)
        if edges is None:
            return commit_inplace(input, None)
        node = LeakyReluBackward1.make(edges, (), (negative_slope,))
        commit_inplace(input, node)
        LeakyReluBackward1.set_output(
            node, save(input, is_output=True) if input._base is None else save(input.detach()))
        return input
    data = xp.where(x > 0, x, x * negative_slope)
    return LeakyReluBackward0.record((input,), data, input.device, (input,), (negative_slope,))


# ---- erf and gelu ----

# erfc(|z|) ~= t exp(-z^2 + P(t)), t = 1 / (1 + |z| / 2): Chebyshev fit with relative
# error < 1.2e-7 everywhere (Numerical Recipes' erfcc), enough for float32. NumPy
# float64 arrays take libm's erf element by element instead (exact, ~0.1 us each).
_math_erf = numpy.frompyfunc(math.erf, 1, 1)
_ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _erf_array(z: Any) -> Any:
    """erf of an array: exact for a NumPy float64 array, else float32-accurate
    (absolute error < 1.2e-7)."""
    if type(z) is numpy.ndarray and z.dtype == numpy.float64:
        return numpy.asarray(_math_erf(z), dtype=numpy.float64)
    xp = _dual.xp_of(z)
    a = xp.abs(z)
    t = 1 / (1 + 0.5 * a)
    poly = _ERFC_COEFFS[-1]
    for c in reversed(_ERFC_COEFFS[:-1]):
        poly = poly * t + c
    erfc = t * xp.exp(poly - a * a)
    return xp.copysign(1 - erfc, z).astype(z.dtype, copy=False)


ErfBackward0 = Rule("ErfBackward0", lambda g, x: g * (_dual.exp(-(x * x)) * _TWO_OVER_SQRT_PI),
                    saves=SAVES_INPUT,
                    doc="d x = 2 / sqrt(pi) exp(-x^2) g (the exact derivative): saves the input.")


def erf(input: Tensor) -> Tensor:  # noqa: A002
    """The error function: exact in float64 on the CPU, else to float32 precision
    (see ``_erf_array``)."""
    x = input.data
    data = _erf_array(x if x.dtype.kind == "f" else x.astype(_defaults.FLOAT))
    return ErfBackward0.unary(input, data)


def _dual_erf(x: Any) -> Any:
    return erf(x) if type(x) is Tensor else _erf_array(x)


_INV_SQRT2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_GELU_CUBIC = 0.044715


def _gelu_grad(x: Any, approximate: str) -> Any:
    """d gelu / d x for an array or a Tensor."""
    if approximate == "none":
        cdf = (_dual_erf(x * _INV_SQRT2) + 1) * 0.5
        return cdf + x * (_dual.exp(x * x * -0.5) * _INV_SQRT_2PI)
    x2 = x * x
    th = _dual.tanh((x + x2 * x * _GELU_CUBIC) * _SQRT_2_OVER_PI)
    inner = (x2 * (3 * _GELU_CUBIC) + 1) * _SQRT_2_OVER_PI
    return (th + 1) * 0.5 + x * (1 - th * th) * inner * 0.5


GeluBackward0 = Rule("GeluBackward0", lambda g, x, approximate: g * _gelu_grad(x, approximate),
                     saves=SAVES_INPUT, keeps=("approximate",),
                     doc="d x = g gelu'(x) (``_gelu_grad``): saves the input. With "
                         "``create_graph`` it records the formula's ops (PyTorch records "
                         "GeluBackwardBackward0).")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    """``x * Phi(x)`` (Phi: the standard normal CDF), or with ``approximate='tanh'``
    ``x / 2 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    _check_float("GeluKernelImpl", input)
    x = input.data
    if approximate == "none":
        data = x * ((_erf_array(x * _INV_SQRT2) + 1) * 0.5)
    else:
        th = input.device.xp.tanh((x + x * x * x * _GELU_CUBIC) * _SQRT_2_OVER_PI)
        data = x * ((th + 1) * 0.5)
    return GeluBackward0.record((input,), data, input.device, (input,), (approximate,))


# ---- l1_loss ----

def l1_loss(input: Tensor, target: Tensor, *, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean (or sum, or elementwise with ``'none'``) of ``|input - target|``, composed of
    PyTorch's own nodes (SubBackward0, AbsBackward0, MeanBackward0 or SumBackward0)."""
    reduction = _reduction(reduction)
    target = loss_target(target, "l1_loss")
    check_target_shape(input.shape, target.shape)
    losses = (input - target).abs()  # in the promoted dtype
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if losses.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {scalar_type_name(losses.dtype)}"
        )
    return losses.mean()
