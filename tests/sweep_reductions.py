"""Sweep cases of aiograd/_ops/reductions.py (see tests/sweep_base.py): sums, means,
extremes, products, moments, norms, cumsum and logsumexp, over all elements and over a
dim."""

from __future__ import annotations

from sweep_base import ANY, POSITIVE, UNARY_SHAPES, Case

# Shapes with a dim to reduce over (the last).
DIM_SHAPES: list[tuple[tuple[int, ...], ...]] = [((3,),), ((2, 3),), ((2, 3, 2),)]
# Shapes whose full moments have at least two elements (one gives dof == 0).
MOMENT_SHAPES: list[tuple[tuple[int, ...], ...]] = [((3,),), ((2, 3),)]

CASES: dict[str, Case] = {
    "SumBackward0": Case(lambda lib, x: x.sum(), UNARY_SHAPES, linear=True),
    "SumBackward1": Case(lambda lib, x: x.sum(dim=-1, keepdim=True), DIM_SHAPES,
                         linear=True),
    "MeanBackward0": Case(lambda lib, x: x.mean(), UNARY_SHAPES, linear=True),
    "MeanBackward1": Case(lambda lib, x: x.mean(dim=-1), DIM_SHAPES, linear=True),
    "NansumBackward0": Case(lambda lib, x: lib.nansum(x, dim=-1), DIM_SHAPES, linear=True),
    "MaxBackward1": Case(lambda lib, x: x.max(), UNARY_SHAPES, linear=True),
    "MinBackward1": Case(lambda lib, x: x.min(), UNARY_SHAPES, linear=True),
    "MaxBackward0": Case(lambda lib, x: x.max(dim=-1).values, DIM_SHAPES, linear=True),
    "MinBackward0": Case(lambda lib, x: x.min(dim=0, keepdim=True).values, DIM_SHAPES,
                         linear=True),
    "AmaxBackward0": Case(lambda lib, x: x.amax(dim=-1), DIM_SHAPES, linear=True),
    "AminBackward0": Case(lambda lib, x: x.amin(), UNARY_SHAPES, linear=True),
    "ProdBackward0": Case(lambda lib, x: x.prod(), DIM_SHAPES),
    "ProdBackward1": Case(lambda lib, x: x.prod(dim=-1), DIM_SHAPES),
    "VarBackward0": Case(lambda lib, x: x.var(), MOMENT_SHAPES),
    "StdBackward0": Case(lambda lib, x: x.std(dim=-1), MOMENT_SHAPES),
    "LinalgVectorNormBackward0": Case(lambda lib, x: x.norm(p=3, dim=-1), DIM_SHAPES,
                                      POSITIVE),
    "CumsumBackward0": Case(lambda lib, x: lib.cumsum(x, dim=-1), DIM_SHAPES, linear=True),
    "LogsumexpBackward0": Case(lambda lib, x: lib.logsumexp(x, dim=-1), DIM_SHAPES, ANY),
}
