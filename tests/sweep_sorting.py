"""Sweep cases of aiograd/_ops/sorting.py (see tests/sweep_base.py): the ops returning
``(values, indices)``, whose gradients are piecewise constant (``linear``), and the full
medians. ``cumprod`` and ``logcumsumexp`` are in tests/test_op_sweep.py."""

from __future__ import annotations

from sweep_base import UNARY_SHAPES, Case

# Shapes with a last dim of at least two (topk and kthvalue take the second).
DIM_SHAPES: list[tuple[tuple[int, ...], ...]] = [((4,),), ((2, 3),), ((2, 3, 2),)]

CASES: dict[str, Case] = {
    "SortBackward0": Case(lambda lib, x: lib.sort(x, dim=-1).values, DIM_SHAPES, linear=True),
    "SortBackward1": Case(lambda lib, x: lib.sort(x, dim=0, descending=True, stable=True)
                          .values, DIM_SHAPES, linear=True),
    "TopkBackward0": Case(lambda lib, x: lib.topk(x, 2, dim=-1).values, DIM_SHAPES,
                          linear=True),
    "KthvalueBackward0": Case(lambda lib, x: lib.kthvalue(x, 2, dim=-1).values, DIM_SHAPES,
                              linear=True),
    "MedianBackward1": Case(lambda lib, x: lib.median(x, dim=-1).values, DIM_SHAPES,
                            linear=True),
    "NanmedianBackward1": Case(lambda lib, x: lib.nanmedian(x, dim=0, keepdim=True).values,
                               DIM_SHAPES, linear=True),
    "MedianBackward0": Case(lambda lib, x: lib.median(x), UNARY_SHAPES, linear=True),
    "NanmedianBackward0": Case(lambda lib, x: lib.nanmedian(x), UNARY_SHAPES, linear=True),
    "CummaxBackward0": Case(lambda lib, x: lib.cummax(x, dim=-1).values, DIM_SHAPES,
                            linear=True),
    "CumminBackward0": Case(lambda lib, x: lib.cummin(x, dim=0).values, DIM_SHAPES,
                            linear=True),
}
