"""Sweep cases of aiograd/_ops/shape.py's rules (see tests/sweep_base.py). Every op here
re-shapes its gradient, so each case is ``linear``."""

from __future__ import annotations

from sweep_base import UNARY_SHAPES, Case

MATRIX: list[tuple[tuple[int, ...], ...]] = [((2, 3),), ((2, 3, 4),)]

CASES: dict[str, Case] = {
    "ViewBackward0": Case(lambda lib, x: x.view(-1, 2), [((2, 3),), ((4,),)], linear=True),
    # a reshape that must copy: PyTorch's clone then _unsafe_view
    "UnsafeViewBackward0 (reshape)": Case(lambda lib, x: x.transpose(0, 1).reshape(-1), MATRIX,
                                          linear=True),
    "SqueezeBackward0": Case(lambda lib, x: x.squeeze(), [((2, 1, 3),), ((1,),)], linear=True),
    "SqueezeBackward1": Case(lambda lib, x: x.squeeze(1), [((2, 1, 3),), ((2, 3),)],
                             linear=True),
    "SqueezeBackward2": Case(lambda lib, x: x.squeeze((0, 2)), [((1, 3, 1),), ((2, 3, 1),)],
                             linear=True),
    "UnsqueezeBackward0": Case(lambda lib, x: x.unsqueeze(-1), UNARY_SHAPES, linear=True),
    "TransposeBackward0": Case(lambda lib, x: x.transpose(0, -1), MATRIX, linear=True),
    "TBackward0": Case(lambda lib, x: x.t(), UNARY_SHAPES, linear=True),
    "PermuteBackward0": Case(lambda lib, x: x.permute(2, 0, 1), [((2, 3, 4),), ((1, 3, 2),)],
                             linear=True),
    "ExpandBackward0": Case(lambda lib, x: x.expand(2, 2, 3), [((),), ((3,),), ((2, 1),)],
                            linear=True),
    "RepeatBackward0": Case(lambda lib, x: x.repeat(2, 1, 3), UNARY_SHAPES, linear=True),
    "FlipBackward0": Case(lambda lib, x: x.flip(0, -1), [((2, 3),), ((2, 3, 4),)],
                          linear=True),
}
