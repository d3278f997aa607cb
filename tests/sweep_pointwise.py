"""Sweep cases of aiograd/_ops/pointwise.py (see tests/sweep_base.py): the binary and
ternary pointwise ops (``atan2 hypot fmod remainder fmax fmin lerp addcmul addcdiv``), and
``pow`` (its nodes live in aiograd/_ops/arithmetic.py). The unary ones are in
tests/test_op_sweep.py."""

from __future__ import annotations

from sweep_base import ANY, BINARY_SHAPES, CLAMP_SHAPES, POSITIVE, UNARY_SHAPES, Case

CASES: dict[str, Case] = {
    "Atan2Backward0": Case(lambda lib, a, b: lib.atan2(a, b), BINARY_SHAPES),
    "HypotBackward0": Case(lambda lib, a, b: lib.hypot(a, b), BINARY_SHAPES),
    "FmodBackward1": Case(lambda lib, a, b: lib.fmod(a, b), BINARY_SHAPES, [ANY, POSITIVE],
                          linear=True),
    "RemainderBackward1": Case(lambda lib, a, b: lib.remainder(a, b), BINARY_SHAPES,
                               [ANY, POSITIVE], linear=True),
    "FmaxBackward0": Case(lambda lib, a, b: lib.fmax(a, b), BINARY_SHAPES, linear=True),
    "FminBackward0": Case(lambda lib, a, b: lib.fmin(a, b), BINARY_SHAPES, linear=True),
    "LerpBackward0": Case(lambda lib, a, b: lib.lerp(a, b, 0.3), BINARY_SHAPES, linear=True),
    "LerpBackward1": Case(lambda lib, a, b, w: lib.lerp(a, b, w), CLAMP_SHAPES),
    "AddcmulBackward0": Case(lambda lib, a, b, c: lib.addcmul(a, b, c, value=0.5),
                             CLAMP_SHAPES),
    "AddcdivBackward0": Case(lambda lib, a, b, c: lib.addcdiv(a, b, c, value=0.5),
                             CLAMP_SHAPES, [ANY, ANY, POSITIVE]),
    "PowBackward0": Case(lambda lib, x: x ** 3, UNARY_SHAPES),
    "PowBackward1": Case(lambda lib, a, b: a ** b, BINARY_SHAPES, [POSITIVE, ANY]),
    "PowBackward2": Case(lambda lib, x: 2.5 ** x, UNARY_SHAPES),
}
