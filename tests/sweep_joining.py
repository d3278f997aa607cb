"""Sweep cases of aiograd/_ops/joining.py's rules (see tests/sweep_base.py)."""

from __future__ import annotations

from sweep_base import Case

CASES: dict[str, Case] = {
    "CatBackward0": Case(lambda lib, a, b: lib.cat([a, b], -1),
                         [((2, 3), (2, 2)), ((3,), (1,)), ((2, 1, 2), (2, 1, 3))],
                         linear=True),
    "StackBackward0": Case(lambda lib, a, b: lib.stack([a, b], -1),
                           [((), ()), ((3,), (3,)), ((2, 3), (2, 3))], linear=True),
}
