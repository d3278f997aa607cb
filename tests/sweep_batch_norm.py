"""Sweep cases of the normalization family (aiograd/_ops/batch_norm.py): see
tests/sweep_base.py."""

from __future__ import annotations

from typing import Any

from sweep_base import Case

# (N, C, *) inputs with a weight and a bias of C elements
NORM_SHAPES = [((3, 2), (2,), (2,)), ((2, 4, 3), (4,), (4,))]


def _batch_norm(lib: Any, x: Any, w: Any, b: Any) -> Any:
    return lib.nn.functional.batch_norm(x, None, None, w, b, training=True)


def _group_norm(lib: Any, x: Any, w: Any, b: Any) -> Any:
    return lib.nn.functional.group_norm(x, 2, w, b)


CASES: dict[str, Case] = {
    "NativeBatchNormBackward0": Case(_batch_norm, NORM_SHAPES),
    "NativeGroupNormBackward0": Case(_group_norm, NORM_SHAPES),
}
