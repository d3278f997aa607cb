"""Sweep cases of the convolution and pooling family (aiograd/_ops/conv.py): see
tests/sweep_base.py."""

from __future__ import annotations

from typing import Any

from sweep_base import Case, backward_of

import aiograd as ag
from aiograd._ops import conv

# unfold/fold: a 2x2 kernel, padding 1, stride (1, 2), over (N, C, H, W) inputs
KERNEL, PADDING, STRIDE = 2, 1, (1, 2)
IMAGES = [(1, 2, 3, 4), (2, 1, 4, 4)]
# (input, weight, bias): conv2d, grouped conv2d (groups 2), conv1d
CONV_SHAPES = [((2, 2, 4, 4), (3, 2, 3, 3), (3,)), ((1, 4, 5, 4), (2, 2, 2, 3), (2,)),
               ((2, 3, 5), (2, 3, 3), (2,))]
POOL_SHAPES = [((1, 2, 5, 5),), ((2, 4, 6),)]


def _geometry(shape: tuple[int, ...]) -> Any:
    return conv._geometry(shape, (KERNEL,) * 2, (1, 1), STRIDE, ((PADDING, PADDING),) * 2)


def _unfold(lib: Any, x: Any) -> Any:
    if lib is ag:
        return conv._im2col(x, _geometry(tuple(x.shape)))
    return lib.nn.functional.unfold(x, KERNEL, padding=PADDING, stride=STRIDE)


def _fold_case() -> Case:
    """col2im of the columns of each of IMAGES (fold's inverse shape)."""
    by_cols = {}
    for shape in IMAGES:
        geo = _geometry(shape)
        n, c = shape[:2]
        by_cols[n, c * KERNEL * KERNEL, geo.out[0] * geo.out[1]] = shape

    def fold(lib: Any, cols: Any) -> Any:
        shape = by_cols[tuple(cols.shape)]
        if lib is ag:
            return conv._col2im(cols, _geometry(shape))
        return lib.nn.functional.fold(cols, shape[2:], KERNEL, padding=PADDING, stride=STRIDE)

    return Case(fold, [(cols,) for cols in by_cols], linear=True)


def _conv(lib: Any, x: Any, w: Any, b: Any) -> Any:
    f = lib.nn.functional
    convolve = f.conv2d if x.ndim == 4 else f.conv1d
    return convolve(x, w, b, padding=1, groups=x.shape[1] // w.shape[1])


def _max_pool(lib: Any, x: Any) -> Any:
    return lib.nn.functional.max_pool2d(x, 3, stride=2, padding=1)


def _avg_pool(lib: Any, x: Any) -> Any:
    return lib.nn.functional.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)


def _adaptive_avg_pool(lib: Any, x: Any) -> Any:
    return lib.nn.functional.adaptive_avg_pool2d(x, (2, 3))


CASES: dict[str, Case] = {
    "Im2ColBackward0": Case(_unfold, [(s,) for s in IMAGES], linear=True),
    "Col2ImBackward0": _fold_case(),
    "ConvolutionBackward0": Case(_conv, CONV_SHAPES),
    "MaxPool2DWithIndicesBackward0": Case(_max_pool, POOL_SHAPES, linear=True),
    "MaxPool2DWithIndicesBackwardBackward0": backward_of(_max_pool, (1, 2, 5, 5)),
    "AvgPool2DBackward0": Case(_avg_pool, POOL_SHAPES, linear=True),
    "AvgPool2DBackwardBackward0": backward_of(_avg_pool, (1, 2, 5, 5)),
    "AdaptiveAvgPool2DBackward0": Case(_adaptive_avg_pool, [((1, 2, 4, 6),), ((3, 2, 3),)],
                                       linear=True),
    "AdaptiveAvgPool2DBackwardBackward0": backward_of(_adaptive_avg_pool, (1, 2, 4, 6)),
}
