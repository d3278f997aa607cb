"""The index arithmetic of aiograd/_ops/_cuda_kernels.py, mirrored in NumPy on the CPU.

Each reference below computes, for every thread of a kernel at once, exactly the indices
and conditions its CUDA source does (the same names: ``hp t y u xo``), and is checked
against the NumPy path of aiograd/_ops/conv.py, the reference of the kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_conv_pool_properties import conv_cases

import aiograd as ag
from aiograd._ops.conv import _col2im_array, _geometry, _im2col_array, max_pool2d

pytestmark = pytest.mark.timeout(120)


def _geo(case):
    x_shape, w_shape, stride, padding, dilation = case
    return _geometry(x_shape, w_shape[2:], dilation, stride, tuple((p, p) for p in padding))


def im2col_formula(x: np.ndarray, geo, fill: float) -> np.ndarray:
    n_, c_, h_, w_ = x.shape
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = geo.kernel, geo.dilation, geo.stride, geo.out
    top, left = geo.pads[0][0], geo.pads[1][0]
    k = np.arange(n_ * c_ * kh * kw * oh * ow)
    rest = k
    xo = rest % ow; rest = rest // ow  # noqa: E702 - one line per kernel statement
    y = rest % oh; rest = rest // oh  # noqa: E702
    j = rest % kw; rest = rest // kw  # noqa: E702
    i = rest % kh; rest = rest // kh  # noqa: E702
    c = rest % c_; n = rest // c_  # noqa: E702
    h = y * sh + i * dh - top
    w = xo * sw + j * dw - left
    inside = (h >= 0) & (h < h_) & (w >= 0) & (w < w_)
    flat = ((n * c_ + c) * h_ + np.clip(h, 0, h_ - 1)) * w_ + np.clip(w, 0, w_ - 1)
    return np.where(inside, x.ravel()[flat], fill).reshape((n_, c_ * kh * kw, oh * ow))


def col2im_formula(cols: np.ndarray, geo) -> np.ndarray:
    n_, c_, h_, w_ = geo.input_shape
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = geo.kernel, geo.dilation, geo.stride, geo.out
    top, left = geo.pads[0][0], geo.pads[1][0]
    n, c, h, w = np.meshgrid(*(np.arange(s) for s in geo.input_shape), indexing="ij")
    hp, wp = h + top, w + left
    total = np.zeros(geo.input_shape, dtype=cols.dtype)
    flat_cols = cols.ravel()
    for i in range(kh):  # the kernel's two loops, per pixel
        t = hp - i * dh
        y = t // sh
        row_ok = (t >= 0) & (t % sh == 0) & (y < oh)
        for j in range(kw):
            u = wp - j * dw
            xo = u // sw
            ok = row_ok & (u >= 0) & (u % sw == 0) & (xo < ow)
            index = ((n * c_ + c) * kh * kw + i * kw + j) * (oh * ow) + y * ow + xo
            total += np.where(ok, flat_cols[np.where(ok, index, 0)], 0)
    return total


def max_pool_formula(x: np.ndarray, geo) -> tuple[np.ndarray, np.ndarray]:
    windows = im2col_formula(x, geo, -np.inf)
    n, c = x.shape[:2]
    windows = windows.reshape((n, c, geo.kernel[0] * geo.kernel[1], -1))
    where = windows.argmax(axis=2)  # the kernel keeps the first maximum
    return np.take_along_axis(windows, where[:, :, None], 2)[:, :, 0], where


@settings(max_examples=30, deadline=None)
@given(case=conv_cases(), fill=st.sampled_from([0.0, -np.inf]))
def test_im2col_formula_is_the_numpy_path(case, fill):
    geo = _geo(case)
    x = np.random.default_rng(0).standard_normal(case[0])
    np.testing.assert_array_equal(im2col_formula(x, geo, fill), _im2col_array(x, geo, fill))


@settings(max_examples=30, deadline=None)
@given(case=conv_cases())
def test_col2im_gather_formula_is_the_numpy_path(case):
    geo = _geo(case)
    cols = np.random.default_rng(1).standard_normal(
        _im2col_array(np.zeros(case[0]), geo).shape)
    np.testing.assert_allclose(col2im_formula(cols, geo), _col2im_array(cols, geo),
                               rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(3, 9), kernel=st.integers(1, 3), stride=st.integers(1, 3),
       dilation=st.integers(1, 2))
def test_max_pool_formula_is_the_numpy_path(size, kernel, stride, dilation):
    padding = kernel // 2
    x = np.random.default_rng(2).permutation(2 * 3 * size * size).reshape(
        (2, 3, size, size)).astype(np.float64)
    xs = ag.tensor(x, requires_grad=True)
    out = max_pool2d(xs, kernel, stride, padding, dilation)
    geo = out.grad_fn.geometry
    values, where = max_pool_formula(x, geo)
    np.testing.assert_array_equal(values.reshape(out.shape), out.detach().numpy())
    np.testing.assert_array_equal(where, out.grad_fn.argmax)
