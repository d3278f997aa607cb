"""Convolutions and pooling: ``conv1d conv2d max_pool2d avg_pool2d adaptive_avg_pool2d``,
as ``torch.nn.functional``'s.

Note [Convolution as im2col and one matmul]
    A convolution of x (N, C, H, W) with a weight (O, C/G, kh, kw) in G groups is
    ``cols = im2col(x)``, the (N, C*kh*kw, Ho*Wo) windows of the padded input (one
    strided copy through ``as_strided``), then one batched matmul
    ``weight (G, O/G, C/G*kh*kw) @ cols (N, G, C/G*kh*kw, Ho*Wo)``; conv1d is conv2d
    with H = 1. Its one node, ``ConvolutionBackward0``, computes
    ``d weight = sum over N of g @ cols^T`` (cols recomputed from the saved input) and
    ``d input = col2im(weight^T @ g)``, col2im (the adjoint of im2col) adding the
    columns back in one strided slice per kernel position (no loop over pixels).
    im2col and col2im are dual helpers (Note [Dual backward formulas]): on Tensors they
    record ``Im2ColBackward0`` and ``Col2ImBackward0`` (PyTorch's nodes of ``unfold`` and
    ``fold``), each the other's gradient, so create_graph records the gradient's
    dependence on the input, the weight and g, and gradients of any order follow.
    PyTorch records one ``ConvolutionBackwardBackward0`` instead.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy

from .._tensor import Tensor, _is_int, cpp_type_name, legacy_type_name, scalar_type_name
from .._warn import warn_user
from ..devices import CPU, device_of_array
from ..graph._saved import SavedTensor
from . import _dual
from ._record import check_same_device, edges_of, plain, record, tensor_arg
from ._rule import Rule, RuleNode, Saved


class _Geometry(NamedTuple):
    """The 2-D windows of a convolution: the (unpadded) input shape (N, C, H, W), the
    kernel size, dilation, stride, padding per side ((top, bottom), (left, right)) and
    the output's spatial size. Invariant: input_shape has 4 elements, the others 2."""

    input_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    dilation: tuple[int, ...]
    stride: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    out: tuple[int, ...]


# ---- im2col / col2im on arrays ----

def _host_to(values: Any, like: Any) -> Any:
    """The host array ``values`` on the device of the array ``like``."""
    dev = device_of_array(like)
    return values if dev is CPU else dev.backend.from_host(values, dev.index)


@functools.lru_cache(maxsize=64)
def _positions_on(count: int, dev: Any) -> Any:
    positions = numpy.arange(count, dtype=numpy.int32)
    return positions if dev is CPU else dev.backend.from_host(positions, dev.index)


def _positions(count: int, like: Any) -> Any:
    """``arange(count)`` (int32) on the device of ``like``, copied there once per device
    and count, not per call."""
    return _positions_on(count, device_of_array(like))


def _strided(x: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """``as_strided`` of the array module of ``x``; a NumPy subclass (a device's array)
    stays one."""
    if isinstance(x, numpy.ndarray):
        return numpy.lib.stride_tricks.as_strided(x, shape, strides, subok=True)
    return _dual.xp_of(x).lib.stride_tricks.as_strided(x, shape, strides)


def _window_view(x: Any, geo: _Geometry, fill: Any = 0) -> Any:
    """The windows of the 4-D array ``x`` padded with ``fill``, as a strided view of
    shape (N, C, kh, kw, Ho, Wo): element [n, c, i, j, y, x'] is the padded input at
    (y * sh + i * dh, x' * sw + j * dw). Only the padding copies."""
    if any(geo.pads[0]) or any(geo.pads[1]):
        x = _dual.xp_of(x).pad(x, ((0, 0), (0, 0)) + geo.pads, constant_values=fill)
    n, c = x.shape[:2]
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = geo.kernel, geo.dilation, geo.stride, geo.out
    s_n, s_c, s_h, s_w = x.strides
    return _strided(x, (n, c, kh, kw, oh, ow),
                    (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw))


def _im2col_array(x: Any, geo: _Geometry, fill: Any = 0) -> Any:
    """The (N, C*kh*kw, Ho*Wo) windows of the 4-D array ``x`` (channel-major, then kernel
    row and column, as ``unfold``), padded with ``fill``, copied once."""
    n, c = x.shape[:2]
    kh, kw = geo.kernel
    return _window_view(x, geo, fill).reshape((n, c * kh * kw, geo.out[0] * geo.out[1]))


def _im2col_rows(x: Any, geo: _Geometry) -> Any:
    """The windows of the 4-D array ``x`` as one (C*kh*kw, N*Ho*Wo) matrix, the operand
    of the single GEMM of a convolution with groups=1 (copied once)."""
    n, c = x.shape[:2]
    kh, kw = geo.kernel
    view = _window_view(x, geo).transpose((1, 2, 3, 0, 4, 5))
    return view.reshape((c * kh * kw, n * geo.out[0] * geo.out[1]))


def _col2im_blocks(blocks: Any, geo: _Geometry) -> Any:
    """The adjoint of :func:`_window_view`: ``blocks`` (N, C, kh, kw, Ho, Wo), of any
    strides, added back at their input positions (padding dropped), as a gather.

    Note [col2im as a gather]
        Each block row y of kernel row i lands on padded row ``p = y sh + i dh``. Place
        the blocks on a zero grid ``P`` with rows ``e + y sh`` (``e = dh (kh - 1)``, the
        zero margin); then padded row p receives ``sum over i of P[i, e + p - i dh]``
        (zero where no block lands). That is one strided view of P with the i axis
        stepping ``-dh`` rows (and likewise for columns), summed over (i, j): each pixel
        sums its contributions; no scatter, no loop over kernel positions. The CUDA
        kernel of :mod:`._cuda_kernels` computes the same sum per pixel without P.
    """
    n, c, h, w = geo.input_shape
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = geo.kernel, geo.dilation, geo.stride, geo.out
    if (dh, dw) == (1, 1) and (sh, sw) == (kh, kw):  # windows tile the input: no sums
        tiled = blocks.transpose((0, 1, 4, 2, 5, 3)).reshape((n, c, oh * kh, ow * kw))
        return _cropped(tiled, geo, (oh * kh, ow * kw))
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    span_h, span_w = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    grid = _dual.xp_of(blocks).empty_like(
        blocks, shape=(kh, kw, n, c, span_h + 2 * eh, span_w + 2 * ew), order="C")
    if sh > 1 or sw > 1:  # zeros between the placed rows or columns
        grid[...] = 0
    else:  # the blocks cover the inside: zero the margins only
        grid[:, :, :, :, :eh] = 0
        grid[:, :, :, :, eh + span_h:] = 0
        grid[:, :, :, :, eh:eh + span_h, :ew] = 0
        grid[:, :, :, :, eh:eh + span_h, ew + span_w:] = 0
    grid[:, :, :, :, eh:eh + span_h:sh, ew:ew + span_w:sw] = blocks.transpose(
        (2, 3, 0, 1, 4, 5))
    s_i, s_j, s_n, s_c, s_h, s_w = grid.strides
    covered_h, covered_w = span_h + eh, span_w + ew
    view = _strided(grid[:, :, :, :, eh:, ew:], (kh, kw, n, c, covered_h, covered_w),
                    (s_i - dh * s_h, s_j - dw * s_w, s_n, s_c, s_h, s_w))
    return _cropped(view.sum(axis=(0, 1)), geo, (covered_h, covered_w))


def _cropped(padded: Any, geo: _Geometry, covered: tuple[int, int]) -> Any:
    """The input's part of ``padded`` (N, C, *covered), the sums over the top-left
    ``covered`` part of the padded input: zeros where no window reaches, padding dropped."""
    n, c, h, w = geo.input_shape
    (top, _), (left, _) = geo.pads
    short_h, short_w = top + h - covered[0], left + w - covered[1]
    if short_h > 0 or short_w > 0:  # rows or columns no window reaches
        padded = _dual.xp_of(padded).pad(
            padded, ((0, 0), (0, 0), (0, max(short_h, 0)), (0, max(short_w, 0))))
    if top or left or padded.shape[2] != h or padded.shape[3] != w:
        padded = _dual.contiguous(padded[:, :, top:top + h, left:left + w])
    return padded


def _col2im_array(cols: Any, geo: _Geometry) -> Any:
    """The adjoint of :func:`_im2col_array`; see Note [col2im as a gather]."""
    n, c = geo.input_shape[:2]
    return _col2im_blocks(cols.reshape((n, c) + geo.kernel + geo.out), geo)


def _batch_first(out_rows: Any, n: int) -> Any:
    """The (O, N*L) result of a GEMM as a C-contiguous (N, O, L) array."""
    rows = out_rows.reshape((out_rows.shape[0], n, out_rows.shape[1] // max(n, 1)))
    return _dual.contiguous(rows.transpose((1, 0, 2)))


# ---- im2col / col2im as dual helpers ----

def _linear_op(rule: Rule, array_fn: Callable[[Any, _Geometry], Any], x: Any,
               geo: _Geometry) -> Any:
    """``array_fn(x, geo)`` for an array; for a Tensor, its result recorded by ``rule``."""
    if type(x) is not Tensor:
        return array_fn(x, geo)
    return rule.record((x,), array_fn(x.data, geo), x.device, (), (geo,))


def _im2col(x: Any, geo: _Geometry) -> Any:
    return _linear_op(Im2ColBackward0, _im2col_array, x, geo)


def _col2im(cols: Any, geo: _Geometry) -> Any:
    return _linear_op(Col2ImBackward0, _col2im_array, cols, geo)


Im2ColBackward0 = Rule("Im2ColBackward0", _col2im, keeps=("geometry",),
                       doc="d x = col2im(g): im2col is linear, its gradient its adjoint.")
Col2ImBackward0 = Rule("Col2ImBackward0", _im2col, keeps=("geometry",),
                       doc="d cols = im2col(g): col2im is linear, its gradient its adjoint.")


# ---- trickier grads: the convolution ----

def _convolution_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                      saved_input: SavedTensor, saved_weight: SavedTensor | None,
                      geo: _Geometry, groups: int, spatial: int) -> tuple[Any, ...]:
    """See Note [Convolution as im2col and one matmul]: d weight = sum over N of
    g @ cols^T, d input = col2im(weight^T @ g), d bias = the sum of g over all but the
    channels. ``spatial`` is 1 for conv1d (whose arrays get a unit H) and 2 for conv2d."""
    n, c = geo.input_shape[:2]
    edges = node.next_edges
    g = grads[0]
    if groups == 1 and type(g) is not Tensor:
        return _convolution_gemm_grad(node, g, saved_input, saved_weight, geo, spatial)
    out_channels = g.shape[1]
    g4 = _dual.reshape(g, (n, groups, out_channels // groups, geo.out[0] * geo.out[1]))
    gx = gw = gb = None
    if edges[1] is not None:
        x = saved_input.unpack(node, create_graph)
        cols = _im2col(_dual.reshape(x, geo.input_shape), geo)
        cols = _dual.reshape(cols, (n, groups, cols.shape[1] // groups, cols.shape[2]))
        gw = _dual.sum_dims(g4 @ _dual.swap_last(cols), 0)
        kernel = geo.kernel[2 - spatial:]
        gw = _dual.reshape(gw, (gw.shape[0] * gw.shape[1], c // groups) + kernel)
    if edges[0] is not None and saved_weight is not None:
        w = saved_weight.unpack(node, create_graph)
        per_group = math.prod(w.shape[1:])
        wm = _dual.reshape(w, (groups, out_channels // groups, per_group))
        gcols = _dual.reshape(_dual.swap_last(wm) @ g4, (n, per_group * groups, g4.shape[-1]))
        gx = _col2im(gcols, geo)
        gx = _dual.reshape(gx, (n, c) + tuple(geo.input_shape[4 - spatial:]))
    if len(edges) == 3 and edges[2] is not None:
        gb = _dual.sum_dims(g, (0,) + tuple(range(2, 2 + spatial)))
    return (gx, gw, gb) if len(edges) == 3 else (gx, gw)


def _convolution_gemm_grad(node: RuleNode, g: Any, saved_input: SavedTensor,
                           saved_weight: SavedTensor | None, geo: _Geometry,
                           spatial: int) -> tuple[Any, ...]:
    """The gradients as arrays when groups == 1: one GEMM each for d weight and for
    the columns of d input, whose col2im is a gather (Note [col2im as a gather])."""
    edges = node.next_edges
    n, out_channels = g.shape[:2]
    length = geo.out[0] * geo.out[1]
    g_rows = _dual.contiguous(g.reshape((n, out_channels, length)).transpose((1, 0, 2)))
    g_rows = g_rows.reshape((out_channels, n * length))
    gx = gw = gb = None
    if edges[1] is not None:
        x = saved_input.unpack(node, False)
        gw = g_rows @ _im2col_rows(x.reshape(geo.input_shape), geo).T
        gw = gw.reshape((out_channels, geo.input_shape[1]) + geo.kernel[2 - spatial:])
    if edges[0] is not None and saved_weight is not None:
        w = saved_weight.unpack(node, False)
        gcols = w.reshape((out_channels, math.prod(w.shape[1:]))).T @ g_rows
        blocks = gcols.reshape((geo.input_shape[1],) + geo.kernel + (n,) + geo.out)
        gx = _col2im_blocks(blocks.transpose((3, 0, 1, 2, 4, 5)), geo)
        gx = gx.reshape((n, geo.input_shape[1]) + geo.input_shape[4 - spatial:])
    if len(edges) == 3 and edges[2] is not None:
        gb = g.sum(axis=(0,) + tuple(range(2, 2 + spatial)))
    return (gx, gw, gb) if len(edges) == 3 else (gx, gw)


ConvolutionBackward0 = Rule(
    "ConvolutionBackward0", whole=_convolution_grad,
    saves=("input", Saved("weight", only_for=0)), keeps=("geometry", "groups", "spatial"),
    doc="See Note [Convolution as im2col and one matmul] and ``_convolution_grad``. Saves "
        "the input (for d weight and its version check) and, if the input needs a gradient, "
        "the weight.")


# ---- argument checks ----

def _int_tuple(value: Any, spatial: int, fn: str, name: str) -> tuple[int, ...]:
    """An int or a sequence of ``spatial`` ints (or of one, repeated) as a tuple."""
    if _is_int(value):
        return (int(value),) * spatial
    if isinstance(value, (tuple, list)) and all(_is_int(v) for v in value):
        if len(value) == 1:
            return (int(value[0]),) * spatial
        return tuple(int(v) for v in value)
    raise TypeError(
        f"{fn}(): argument '{name}' must be tuple of ints, not {type(value).__name__}")


def _is_positive(groups: object) -> bool:
    """``groups`` is a positive integer (a bool counts, as in PyTorch)."""
    return isinstance(groups, numbers.Integral) and int(groups) > 0


def _check_sizes(name: str, values: tuple[int, ...], spatial: int) -> None:
    if len(values) != spatial:
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {spatial} values to "
            f"match the convolution dimensions, but got {name}={list(values)}")


def _same_pads(kernel: tuple[int, ...], dilation: tuple[int, ...],
               stride: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """PyTorch's ``'same'`` padding: ``d (k - 1)`` in all, the odd one on the high side
    (with its warning, as the input then needs a padded copy)."""
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    pads = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    if any(lo != hi for lo, hi in pads):
        warn_user(
            "Using padding='same' with even kernel lengths and odd dilation may require a "
            "zero-padded copy of the input be created")
    return tuple(pads)


def _check_dtypes(input: Tensor, weight: Tensor, bias: Tensor | None) -> None:  # noqa: A002
    """PyTorch's errors for a weight or bias whose dtype is not the input's."""
    x_dt, w_dt = input.dtype, weight.dtype
    if x_dt != w_dt:
        if x_dt.name == "float32":
            raise RuntimeError(
                f"Input type ({legacy_type_name(x_dt, input.device.type)}) and weight type "
                f"({legacy_type_name(w_dt, weight.device.type)}) should be the same or input "
                "should be a MKLDNN tensor and weight is a dense tensor")
        raise RuntimeError(
            f"expected scalar type {scalar_type_name(x_dt)} but found {scalar_type_name(w_dt)}")
    if bias is not None and bias.dtype != x_dt:
        raise RuntimeError(
            f"Input type ({cpp_type_name(x_dt)}) and bias type ({cpp_type_name(bias.dtype)}) "
            "should be the same")
    if x_dt.kind not in "fiu":  # complex convolutions are not implemented
        raise NotImplementedError(
            f"\"slow_conv2d_cpu\" not implemented for '{scalar_type_name(x_dt)}'")


def _check_shapes(input: Tensor, weight: Tensor, bias: Tensor | None,  # noqa: A002
                  groups: int) -> None:
    """PyTorch's checks of the weight and bias against the (batched) input, in its order."""
    w_shape, x_shape = list(weight.shape), list(input.shape)
    out_channels = w_shape[0]
    if out_channels < groups or out_channels % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
            f"0, but got weight of size [{w_shape}] instead")
    if x_shape[1] != w_shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {w_shape}, expected input{x_shape} to have "
            f"{w_shape[1] * groups} channels, but got {x_shape[1]} channels instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(
            f"Given weight of size {w_shape}, expected bias to be 1-dimensional with "
            f"{out_channels} elements, but got bias of size {list(bias.shape)} instead")


def _geometry(input_shape: tuple[int, ...], kernel: tuple[int, ...],
              dilation: tuple[int, ...], stride: tuple[int, ...],
              pads: tuple[tuple[int, int], ...]) -> _Geometry:
    """The 2-D geometry (conv1d's with a unit H); PyTorch's error when a dilated kernel
    exceeds the padded input."""
    spatial = input_shape[2:]
    padded = [s + lo + hi for s, (lo, hi) in zip(spatial, pads)]
    extent = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(e > p for e, p in zip(extent, padded)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, extent))}). Kernel size can't be greater "
            "than actual input size")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, extent, stride))
    fill = 2 - len(spatial)  # conv1d: a unit H with no padding
    return _Geometry(
        tuple(input_shape[:2]) + (1,) * fill + tuple(spatial), (1,) * fill + tuple(kernel),
        (1,) * fill + tuple(dilation), (1,) * fill + tuple(stride),
        ((0, 0),) * fill + tuple(pads), (1,) * fill + out)


# ---- conv1d / conv2d ----

def _conv(fn: str, spatial: int, input: Tensor, weight: Tensor,  # noqa: A002
          bias: Tensor | None, stride: Any, padding: Any, dilation: Any, groups: int) -> Tensor:
    tensor_arg(input, fn, "input", 0)
    tensor_arg(weight, fn, "weight", 1)
    if bias is not None:
        tensor_arg(bias, fn, "bias", 2)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(
            f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to {fn}, "
            f"but got input of size: {list(input.shape)}")
    kernel_dims = max(weight.ndim - 2, 0)
    stride = _int_tuple(stride, spatial, fn, "stride")
    dilation = _int_tuple(dilation, spatial, fn, "dilation")
    _check_sizes("stride", stride, kernel_dims)
    _check_sizes("dilation", dilation, kernel_dims)
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _int_tuple(padding, spatial, fn, "padding")
        _check_sizes("padding", padding, kernel_dims)
        if any(p < 0 for p in padding):
            raise RuntimeError("negative padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        if input.dtype.name == "float32":  # PyTorch's float32 (mkldnn) path words it so
            raise RuntimeError("non-positive dilation is not supported")
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if not _is_positive(groups):
        raise RuntimeError("non-positive groups is not supported")
    kernel = tuple(weight.shape[2:])
    if padding == "valid":
        pads = ((0, 0),) * spatial
    elif padding == "same":
        pads = _same_pads(kernel, dilation, stride)
    else:
        pads = tuple((p, p) for p in padding)
    if input.ndim == spatial + 1:  # unbatched, as PyTorch: unsqueeze, convolve, squeeze
        batched = input.unsqueeze(0)
        return _convolution(batched, weight, bias, stride, pads, dilation, groups).squeeze(0)
    return _convolution(input, weight, bias, stride, pads, dilation, groups)


def _convolution(input: Tensor, weight: Tensor, bias: Tensor | None,  # noqa: A002
                 stride: tuple[int, ...], pads: tuple[tuple[int, int], ...],
                 dilation: tuple[int, ...], groups: int) -> Tensor:
    """The checked, batched convolution: one ConvolutionBackward0."""
    dev = check_same_device(input, weight)
    if bias is not None:
        check_same_device(input, bias)
    _check_dtypes(input, weight, bias)
    _check_shapes(input, weight, bias, groups)
    spatial = input.ndim - 2
    geo = _geometry(tuple(input.shape), tuple(weight.shape[2:]), dilation, stride, pads)
    n = input.shape[0]
    out_channels = weight.shape[0]
    x = input.data.reshape(geo.input_shape)
    if groups == 1:
        rows = _im2col_rows(x, geo)
        data = _batch_first(weight.data.reshape((out_channels, rows.shape[0])) @ rows, n)
    else:
        cols = _im2col_array(x, geo)
        wm = weight.data.reshape((groups, out_channels // groups, cols.shape[1] // groups))
        data = wm @ cols.reshape((n, groups, cols.shape[1] // groups, cols.shape[2]))
    data = data.reshape((n, out_channels) + geo.out[2 - spatial:])
    if bias is not None:
        data += bias.data.reshape((out_channels,) + (1,) * spatial)
    edges = edges_of(input, weight) if bias is None else edges_of(input, weight, bias)
    if edges is None:
        return plain(data, dev)
    node = ConvolutionBackward0.make(edges, (input, weight), (geo, groups, spatial))
    return record(node, data, dev)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,  # noqa: A002
           stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) or (C, H, W) with
    ``weight`` (O, C/groups, kh, kw), plus ``bias`` (O,); ``padding`` is ints or
    ``'valid'``/``'same'``. See Note [Convolution as im2col and one matmul]."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,  # noqa: A002
           stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution of ``input`` (N, C, L) or (C, L) with ``weight`` (O, C/groups, k),
    plus ``bias`` (O,); ``padding`` is ints or ``'valid'``/``'same'``."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


# ---- pooling ----

def _pool_pair(value: Any, fn: str, name: str, what: str) -> tuple[int, int]:
    """An int or a sequence of one or two ints as a pair; PyTorch's error otherwise."""
    if _is_int(value):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) in (1, 2) and all(
            _is_int(v) for v in value):
        return int(value[0]), int(value[-1])
    raise RuntimeError(f"{fn}: {name} must {what}")


def _pool_out_size(size: int, kernel: int, pad: int, stride: int, dilation: int,
                   ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``, with its checks of stride and padding."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > ((kernel - 1) * dilation + 1) // 2:
        raise RuntimeError(
            f"pad should be at most half of effective kernel size, but got pad={pad}, "
            f"kernel_size={kernel} and dilation={dilation}")
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_geometry(fn: str, input: Tensor, kernel_size: Any, stride: Any,  # noqa: A002
                   padding: Any, dilation: Any, ceil_mode: bool) -> _Geometry:
    """The windows of a 2-D pooling of the (N, C, H, W) or (C, H, W) ``input`` (as a
    batch of one), with PyTorch's checks in its order. The high padding is extended so
    that ``ceil_mode``'s last windows fit."""
    tensor_arg(input, fn, "input", 0)
    kernel = _pool_pair(kernel_size, fn, "kernel_size",
                        "either be a single int, or a tuple of two ints")
    stride = kernel if stride is None or stride == [] or stride == () else _pool_pair(
        stride, fn, "stride", "either be omitted, a single int, or a tuple of two ints")
    pad = _pool_pair(padding, fn, "padding", "either be a single int, or a tuple of two ints")
    dilation = _pool_pair(dilation, fn, "dilation",
                          "be either a single int, or a tuple of two ints")
    if input.ndim not in (3, 4) or 0 in input.shape[-3:]:
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    shape = (1,) * (4 - input.ndim) + tuple(input.shape)
    out = tuple(_pool_out_size(shape[2 + i], kernel[i], pad[i], stride[i], dilation[i],
                               ceil_mode) for i in range(2))
    if kernel[0] <= 0 or kernel[1] <= 0:
        raise RuntimeError(
            f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if stride[0] <= 0 or stride[1] <= 0:
        raise RuntimeError(
            f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if dilation[0] <= 0 or dilation[1] <= 0:
        raise RuntimeError(
            "dilation should be greater than zero, but got dilationH: "
            f"{dilation[0]} dilationW: {dilation[1]}")
    if kernel[1] // 2 < pad[1] or kernel[0] // 2 < pad[0]:
        raise RuntimeError(
            "pad should be smaller than or equal to half of kernel size, but got "
            f"padW = {pad[1]}, padH = {pad[0]}, kW = {kernel[1]}, kH = {kernel[0]}")
    if out[0] < 1 or out[1] < 1:
        c, h, w = shape[1:]
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: "
            f"({c}x{out[0]}x{out[1]}). Output size is too small")
    pads = []
    for i in range(2):
        needed = (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
        pads.append((pad[i], max(pad[i], needed - shape[2 + i] - pad[i])))
    return _Geometry(shape, kernel, dilation, stride, tuple(pads), out)


def _windows(x: Any, geo: _Geometry, fill: Any) -> Any:
    """The (N, C, kh*kw, Ho*Wo) windows of the array ``x`` (of any shape with
    ``geo.input_shape``'s elements), padded with ``fill``."""
    n, c = geo.input_shape[:2]
    cols = _im2col_array(x.reshape(geo.input_shape), geo, fill)
    return cols.reshape((n, c, geo.kernel[0] * geo.kernel[1], geo.out[0] * geo.out[1]))


# ---- trickier grads: pooling ----
# A pooling's gradient ``spread(g)`` is linear in g and independent of the input. With
# ``create_graph`` it records a ``...BackwardBackward0`` node over (g, input), as PyTorch's:
# its gradients are ``gather(gg)`` (the adjoint of ``spread``: the pooling with the windows
# fixed) and zeros for the input. Both take the node's keeps: (argmax or divisor,
# geometry, input shape).

def _windows_of(gg: Any, geo: _Geometry) -> Any:
    """The (N, C, kh*kw, Ho*Wo) windows of ``gg`` (of the input's shape), zero-padded."""
    n, c = geo.input_shape[:2]
    windows = (n, c, geo.kernel[0] * geo.kernel[1], geo.out[0] * geo.out[1])
    return _dual.reshape(_im2col(_dual.reshape(gg, geo.input_shape), geo), windows)


def _picked(argmax: Any, geo: _Geometry) -> Any:
    """True at each window's maximum, (N, C, kh*kw, Ho*Wo)."""
    k = geo.kernel[0] * geo.kernel[1]
    return _positions(k, argmax).reshape((1, 1, k, 1)) == argmax[:, :, None]


def _max_pool_spread(g: Any, argmax: Any, geo: _Geometry, input_shape: tuple[int, ...]) -> Any:
    """Each output's g (an array) routed to its window's (first) maximum, summed where
    windows overlap: the windows' gradient built window-last, then gathered."""
    k = geo.kernel[0] * geo.kernel[1]
    routed = _positions(k, argmax) == argmax[..., None]
    g = g.reshape(argmax.shape + (1,))
    blocks = (routed * g).reshape(geo.input_shape[:2] + geo.out + geo.kernel)
    return _col2im_blocks(blocks.transpose((0, 1, 4, 5, 2, 3)), geo).reshape(input_shape)


def _max_pool_gather(gg: Any, argmax: Any, geo: _Geometry, input_shape: tuple[int, ...]) -> Any:
    picked = _dual.where(_picked(argmax, geo), _windows_of(gg, geo), 0)
    return _dual.reshape(_dual.sum_dims(picked, 2), input_shape[:-2] + geo.out)


def _avg_pool_spread(g: Any, divisor: Any, geo: _Geometry, input_shape: tuple[int, ...]) -> Any:
    """Each output's g (an array) divided by its ``divisor`` (Ho*Wo,) and spread over its
    window, summed where windows overlap: one broadcast block per window, gathered."""
    g = g.reshape(geo.input_shape[:2] + (1, 1) + geo.out) / divisor.reshape(
        (1, 1, 1, 1) + geo.out)
    blocks = _dual.expand(g, geo.input_shape[:2] + geo.kernel + geo.out)
    return _col2im_blocks(blocks, geo).reshape(input_shape)


def _avg_pool_gather(gg: Any, divisor: Any, geo: _Geometry, input_shape: tuple[int, ...]) -> Any:
    pooled = _dual.sum_dims(_windows_of(gg, geo), 2) / divisor
    return _dual.reshape(pooled, input_shape[:-2] + geo.out)


def _pool_rule(base: str, spread: Callable[..., Any], gather: Callable[..., Any], keep: str,
               doc: str) -> Rule:
    """The rule ``{base}Backward0`` of a pooling (d input = ``spread(g, *keeps)``) and that of
    its create_graph gradient, ``{base}BackwardBackward0``."""
    keeps = (keep, "geometry", "input_shape")
    twice = Rule(f"{base}BackwardBackward0", gather, lambda gg, *kept: _dual.zeros_of(gg),
                 keeps=keeps, doc=f"d g = the {base} pooling of gg with the windows fixed; "
                                  "d input = 0.")

    def grad(g: Any, x: Any, *kept: Any) -> Any:
        if type(g) is not Tensor:
            return spread(g, *kept)
        return twice.record((g, x), spread(g.data, *kept), g.device, (), kept)

    return Rule(f"{base}Backward0", grad, saves=("self_",), keeps=keeps, doc=doc)


MaxPool2DWithIndicesBackward0 = _pool_rule(
    "MaxPool2DWithIndices", _max_pool_spread, _max_pool_gather, "argmax",
    doc="Each output's g routed to its window's (first) maximum, summed where windows "
        "overlap. ``argmax``: the maximum's position in its window (row-major), (N, C, "
        "Ho*Wo), int8 (int32 for windows of over 127 elements). Saves the input (its version "
        "check, as PyTorch's).")
AvgPool2DBackward0 = _pool_rule(
    "AvgPool2D", _avg_pool_spread, _avg_pool_gather, "divisor",
    doc="Each output's g divided by its ``divisor`` (Ho*Wo,) and spread over its window, "
        "summed where windows overlap. Saves the input (its version check, as PyTorch's).")
AdaptiveAvgPool2DBackward0 = _pool_rule(
    "AdaptiveAvgPool2D", _avg_pool_spread, _avg_pool_gather, "divisor",
    doc="AvgPool2DBackward0 of adaptive_avg_pool2d (PyTorch's name for it).")


def _lowest(dtype: Any, xp: Any) -> Any:
    """The value below every other of ``dtype``: -inf, or an integer type's minimum."""
    return -xp.inf if dtype.kind == "f" else xp.iinfo(dtype).min


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None,  # noqa: A002
               padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """The maximum of each (dilated) window of ``input`` (N, C, H, W) or (C, H, W), padded
    with -inf; the first maximum of a window in row-major order wins ties and takes the
    gradient. With ``return_indices``, also the int64 flat (H*W) index of each maximum."""
    geo = _pool_geometry("max_pool2d", input, kernel_size, stride, padding, dilation,
                         ceil_mode)
    x = input.data
    xp = input.device.xp
    if x.dtype.kind not in "fiu":
        raise NotImplementedError(
            f"\"max_pool2d\" not implemented for '{scalar_type_name(x.dtype)}'")
    out_shape = tuple(input.shape[:-2]) + geo.out
    edges = edges_of(input)
    view = _window_view(x.reshape(geo.input_shape), geo, _lowest(x.dtype, xp))
    if edges is None and not return_indices:  # values only: no window copy
        return plain(view.max(axis=(2, 3)).reshape(out_shape), input.device)
    k = geo.kernel[0] * geo.kernel[1]
    n, c = geo.input_shape[:2]
    windows = view.transpose((0, 1, 4, 5, 2, 3)).reshape((n, c, geo.out[0] * geo.out[1], k))
    wide = windows.argmax(axis=3)
    data = xp.take_along_axis(windows, wide[..., None], 3).reshape(out_shape)
    argmax = wide.astype(numpy.int8 if k <= 127 else numpy.int32)
    if edges is None:
        result = plain(data, input.device)
    else:
        node = MaxPool2DWithIndicesBackward0.make(edges, (input,),
                                                  (argmax, geo, tuple(input.shape)))
        result = record(node, data, input.device)
    if not return_indices:
        return result
    return result, plain(_flat_indices(argmax, geo).reshape(out_shape), input.device)


def _flat_indices(argmax: Any, geo: _Geometry) -> Any:
    """The flat (H*W) input index of each window position in ``argmax``."""
    kw, (dh, dw), (sh, sw) = geo.kernel[1], geo.dilation, geo.stride
    (top, _), (left, _) = geo.pads
    oh, ow = geo.out
    starts = (numpy.repeat(numpy.arange(oh) * sh - top, ow) * geo.input_shape[3]
              + numpy.tile(numpy.arange(ow) * sw - left, oh))
    argmax = argmax.astype(numpy.int64)
    offsets = argmax // kw * (dh * geo.input_shape[3]) + argmax % kw * dw
    return (_host_to(starts, argmax) + offsets).astype(numpy.int64)


def _avg_divisor(geo: _Geometry, count_include_pad: bool) -> Any:
    """Each window's divisor, (Ho*Wo,) on the host: its size within the padded input, or
    with ``count_include_pad=False`` its number of input elements (PyTorch's rule)."""
    sizes = []
    for i in range(2):
        size, pad = geo.input_shape[2 + i], geo.pads[i][0]
        start = numpy.arange(geo.out[i]) * geo.stride[i] - pad
        end = numpy.minimum(start + geo.kernel[i], size + pad)
        if not count_include_pad:
            start, end = numpy.maximum(start, 0), numpy.minimum(end, size)
        sizes.append(end - start)
    return (sizes[0][:, None] * sizes[1][None, :]).reshape(-1)


def _avg_pool(rule: Rule, input: Tensor, geo: _Geometry, divisor: Any) -> Tensor:  # noqa: A002
    """The mean over each window (sum / ``divisor``), recorded by ``rule``."""
    x = input.data
    xp = input.device.xp
    total = _dual.sum_dims(_windows(x, geo, 0), 2)  # in window order, as PyTorch's
    divisor = _host_to(divisor.astype(x.dtype) if x.dtype.kind == "f" else divisor, x)
    if x.dtype.kind == "f":
        data = total / divisor
    else:  # PyTorch's integer division, toward zero
        data = xp.trunc(total / divisor).astype(x.dtype)
    data = data.reshape(tuple(input.shape[:-2]) + geo.out)
    return rule.record((input,), data, input.device, (input,),
                       (divisor, geo, tuple(input.shape)))


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None,  # noqa: A002
               padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window of ``input`` (N, C, H, W) or (C, H, W), zero-padded; see
    :func:`_avg_divisor` for what it divides by (``divisor_override`` if given)."""
    geo = _pool_geometry("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    if input.dtype.kind not in "fiu":
        raise NotImplementedError(
            f"\"avg_pool2d\" not implemented for '{scalar_type_name(input.dtype)}'")
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        divisor = numpy.full(geo.out[0] * geo.out[1], divisor_override)
    else:
        divisor = _avg_divisor(geo, count_include_pad)
    return _avg_pool(AvgPool2DBackward0, input, geo, divisor)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean over each of ``output_size`` equal windows of ``input`` (N, C, H, W) or
    (C, H, W); a None size keeps the input's. Only sizes that divide the input's are
    implemented (NotImplementedError otherwise); (1, 1) is ``mean``, as PyTorch's."""
    tensor_arg(input, "adaptive_avg_pool2d", "input", 0)
    if input.ndim < 3:
        raise ValueError("Input dimension should be at least 3")
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(sizes) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if input.ndim > 4:
        raise RuntimeError(
            "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
            f"{list(input.shape)}")
    in_size = tuple(input.shape[-2:])
    out = tuple(s if o is None else int(o) for o, s in zip(sizes, in_size))
    if input.dtype.kind != "f":
        raise NotImplementedError(
            f"\"adaptive_avg_pool2d\" not implemented for '{scalar_type_name(input.dtype)}'")
    if out == (1, 1):
        return input.mean((-1, -2), keepdim=True)
    if any(o <= 0 or s % o for o, s in zip(out, in_size)):
        raise NotImplementedError(
            f"adaptive_avg_pool2d: output size {list(out)} must divide the input size "
            f"{list(in_size)} (other sizes are not implemented)")
    kernel = tuple(s // o for o, s in zip(out, in_size))
    geo = _pool_geometry("adaptive_avg_pool2d", input, kernel, kernel, 0, 1, False)
    divisor = numpy.full(out[0] * out[1], kernel[0] * kernel[1])
    return _avg_pool(AdaptiveAvgPool2DBackward0, input, geo, divisor)
