"""Property tests of the fast convolution and pooling paths (issue 22, item 4).

Random shapes, strides, paddings and dilations against PyTorch: values and first-order
gradients in float32 and float64, second order in float64; and the col2im gather
(Note [col2im as a gather]) against its definition, a scatter-add over the windows.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import check_second_order

import aiograd as ag
from aiograd._ops.conv import (
    _col2im_array,
    _geometry,
    _im2col_array,
    avg_pool2d,
    conv2d,
    max_pool2d,
)

pytestmark = pytest.mark.timeout(120)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
TOLERANCE = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


@st.composite
def conv_cases(draw: st.DrawFn) -> tuple:
    """(input shape, weight shape, stride, padding, dilation) of a valid groups=1 conv2d."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    spatial = []
    for k, d, p in zip(kernel, dilation, padding):
        least = max(d * (k - 1) + 1 - 2 * p, 1)
        spatial.append(draw(st.integers(least, least + 5)))
    n, c, o = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    return (n, c) + tuple(spatial), (o, c) + kernel, stride, padding, dilation


def _pair(values: np.ndarray, dtype: type) -> tuple:
    a = values.astype(dtype)
    return ag.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check_grads(out, t_out, inputs, t_inputs, dtype) -> None:
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), **TOLERANCE[dtype])
    v = np.random.default_rng(3).standard_normal(tuple(t_out.shape)).astype(dtype)
    grads = ag.grad_sync(out, inputs, ag.tensor(v))
    t_grads = torch.autograd.grad(t_out, t_inputs, torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.numpy(), tg.numpy(), **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@SETTINGS
@given(case=conv_cases(), bias=st.booleans())
def test_conv2d_matches_torch(dtype, case, bias):
    x_shape, w_shape, stride, padding, dilation = case
    rng = np.random.default_rng(0)
    pairs = [_pair(rng.standard_normal(x_shape), dtype),
             _pair(rng.standard_normal(w_shape), dtype)]
    if bias:
        pairs.append(_pair(rng.standard_normal(w_shape[0]), dtype))
    opts = dict(stride=stride, padding=padding, dilation=dilation)
    out = conv2d(*[p[0] for p in pairs], **opts)
    t_out = TF.conv2d(*[p[1] for p in pairs], **opts)
    assert out.grad_fn.name() == t_out.grad_fn.name()
    _check_grads(out, t_out, [p[0] for p in pairs], [p[1] for p in pairs], dtype)


@SETTINGS
@given(case=conv_cases())
def test_conv2d_second_order_matches_torch(case):
    x_shape, w_shape, stride, padding, dilation = case
    rng = np.random.default_rng(1)
    opts = dict(stride=stride, padding=padding, dilation=dilation)
    check_second_order(lambda x, w: conv2d(x, w, **opts), lambda x, w: TF.conv2d(x, w, **opts),
                       rng.standard_normal(x_shape), rng.standard_normal(w_shape))


@st.composite
def pool_cases(draw: st.DrawFn, dilated: bool) -> tuple:
    """(input shape, kernel, stride, padding, dilation, ceil_mode) of a valid pooling."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilated else (1, 1)
    spatial = tuple(draw(st.integers(d * (k - 1) + 1, d * (k - 1) + 7))
                    for k, d in zip(kernel, dilation))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) + spatial
    return shape, kernel, stride, padding, dilation, draw(st.booleans())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@SETTINGS
@given(case=pool_cases(dilated=True))
def test_max_pool2d_matches_torch(dtype, case):
    shape, kernel, stride, padding, dilation, ceil_mode = case
    values = np.random.default_rng(0).permutation(np.prod(shape)).reshape(shape)  # no ties
    x, tx = _pair(values / 7.0, dtype)
    opts = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                ceil_mode=ceil_mode)
    (out, idx), (t_out, t_idx) = (max_pool2d(x, return_indices=True, **opts),
                                  TF.max_pool2d(tx, return_indices=True, **opts))
    np.testing.assert_array_equal(idx.numpy(), t_idx.numpy())
    _check_grads(out, t_out, [x], [tx], dtype)
    np.testing.assert_array_equal(max_pool2d(x.detach(), **opts).numpy(), t_out.detach().numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@SETTINGS
@given(case=pool_cases(dilated=False), count_include_pad=st.booleans())
def test_avg_pool2d_matches_torch(dtype, case, count_include_pad):
    shape, kernel, stride, padding, _, ceil_mode = case
    x, tx = _pair(np.random.default_rng(0).standard_normal(shape), dtype)
    opts = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                count_include_pad=count_include_pad)
    _check_grads(avg_pool2d(x, **opts), TF.avg_pool2d(tx, **opts), [x], [tx], dtype)


def _scatter_col2im(cols: np.ndarray, geo) -> np.ndarray:
    """The definition of col2im: each column entry added at its padded input position."""
    n, c, h, w = geo.input_shape
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = geo.kernel, geo.dilation, geo.stride, geo.out
    (top, bottom), (left, right) = geo.pads
    out = np.zeros((n, c, h + top + bottom, w + left + right))
    blocks = cols.reshape((n, c, kh, kw, oh, ow))
    i, j, y, x = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow),
                             indexing="ij")
    rows, columns = (y * sh + i * dh).ravel(), (x * sw + j * dw).ravel()
    np.add.at(out, (slice(None), slice(None), rows, columns),
              blocks.reshape((n, c, -1)))
    return out[:, :, top:top + h, left:left + w]


@SETTINGS
@given(case=conv_cases())
def test_col2im_gather_equals_scatter_and_is_im2col_adjoint(case):
    x_shape, w_shape, stride, padding, dilation = case
    geo = _geometry(x_shape, w_shape[2:], dilation, stride, tuple((p, p) for p in padding))
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape)
    cols = rng.standard_normal(_im2col_array(x, geo).shape)
    gathered = _col2im_array(cols, geo)
    np.testing.assert_allclose(gathered, _scatter_col2im(cols, geo), rtol=1e-12, atol=1e-12)
    # <im2col(x), cols> == <x, col2im(cols)>
    np.testing.assert_allclose(np.vdot(_im2col_array(x, geo), cols), np.vdot(x, gathered),
                               rtol=1e-10)
