"""The CuPy kernels of aiograd/_ops/_cuda_kernels.py on a real device, against the NumPy
path of aiograd/_ops/conv.py and against torch on CUDA. Skipped cleanly without CuPy or
without a CUDA device (their index arithmetic is checked on the CPU by
test_cuda_kernel_formulas.py)."""

from __future__ import annotations

import numpy as np
import pytest

import aiograd as ag

cupy = pytest.importorskip("cupy")
if ag.cuda.device_count() < 1:  # no driver or no device
    pytest.skip("CuPy finds no CUDA device", allow_module_level=True)

from aiograd._ops import _cuda_kernels  # noqa: E402
from aiograd._ops.conv import _col2im_array, _geometry, _im2col_array  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.timeout(120)]

CASES = [  # input shape, kernel, stride, padding, dilation
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2, 9, 8), (2, 3), (2, 1), (1, 0), (1, 2)),
    ((1, 4, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1)),
    ((2, 2, 11, 5), (3, 2), (3, 2), (2, 1), (2, 1)),
]


def _geo(case):
    shape, kernel, stride, padding, dilation = case
    return _geometry(shape, kernel, dilation, stride, tuple((p, p) for p in padding))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_im2col_and_col2im_kernels_match_the_numpy_path(case, dtype):
    geo = _geo(case)
    x = np.random.default_rng(0).standard_normal(case[0]).astype(dtype)
    cols = _cuda_kernels.im2col(cupy.asarray(x), geo)
    np.testing.assert_array_equal(cols.get(), _im2col_array(x, geo))
    g = np.random.default_rng(1).standard_normal(cols.shape).astype(dtype)
    tol = dict(rtol=1e-5) if dtype == np.float32 else dict(rtol=1e-12)
    np.testing.assert_allclose(_cuda_kernels.col2im(cupy.asarray(g), geo).get(),
                               _col2im_array(g, geo), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_col2im_kernel_matches_torch_fold(case, dtype):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    shape, kernel, stride, padding, dilation = case
    geo = _geo(case)
    g = np.random.default_rng(2).standard_normal(
        (shape[0], shape[1] * kernel[0] * kernel[1], geo.out[0] * geo.out[1])).astype(dtype)
    expected = torch.nn.functional.fold(torch.tensor(g, device="cuda"), shape[2:], kernel,
                                        dilation=dilation, padding=padding, stride=stride)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12)
    np.testing.assert_allclose(_cuda_kernels.col2im(cupy.asarray(g), geo).get(),
                               expected.cpu().numpy(), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_max_pool_kernel_matches_torch(case, dtype):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    shape, kernel, stride, _, dilation = case
    padding = (kernel[0] // 2, kernel[1] // 2)
    geo = _geo((shape, kernel, stride, padding, dilation))
    x = np.random.default_rng(3).permutation(np.prod(shape)).reshape(shape).astype(dtype)
    values, argmax = _cuda_kernels.max_pool(cupy.asarray(x), geo)
    expected = torch.nn.functional.max_pool2d(torch.tensor(x, device="cuda"), kernel, stride,
                                              padding, dilation)
    np.testing.assert_array_equal(values.get(), expected.cpu().numpy())
    assert argmax.dtype == np.int8
