"""Sweep cases of aiograd/_ops/indexing.py: ``t[key]`` (basic and advanced), ``t[key] =
value``, gather, index_select and masked_fill. See tests/sweep_base.py. Every gradient is
constant in the inputs (``linear``)."""

from __future__ import annotations

from typing import Any

from sweep_base import UNARY_SHAPES, Case, row_mask

_ROWS = ((3,),), ((3, 2),)  # tensors indexed along a first dim of 3


def _index(lib: Any, x: Any) -> Any:
    return x[lib.tensor([0, 2, 0])]


def _put(key: Any) -> Any:
    """``y[key] = value`` on a copy ``y`` of x, the value a tensor or (none given) 2.0."""

    def op(lib: Any, x: Any, *value: Any) -> Any:
        y = x * 1.0
        k = lib.tensor(key) if isinstance(key, list) else key
        y[k] = value[0] if value else 2.0
        return y

    return op


def _gather(lib: Any, x: Any) -> Any:
    if x.ndim == 1:
        return x.gather(0, lib.tensor([2, 0, 2]))
    return x.gather(1, lib.tensor([[0, 2], [1, 0]]))


CASES: dict[str, Case] = {
    "IndexBackward0": Case(_index, list(_ROWS), linear=True),
    "SelectBackward0 (index)": Case(lambda lib, x: x[1], list(_ROWS), linear=True),
    "SliceBackward0 (index)": Case(lambda lib, x: x[1:], list(_ROWS), linear=True),
    "UnsqueezeBackward0 (index)": Case(lambda lib, x: x[None], UNARY_SHAPES, linear=True),
    "AliasBackward0 (index)": Case(lambda lib, x: x[...], UNARY_SHAPES, linear=True),
    "IndexPutBackward0": Case(_put([0, 2]), [((3,), (2,)), ((3, 2), (2, 2)), ((3, 2), (2,)),
                                             ((3, 2), ()), ((3,),)], linear=True),
    "CopySlices (basic key)": Case(_put(0), [((2, 3), (3,)), ((2, 3), ()), ((2, 3),)],
                                   linear=True),
    "GatherBackward0": Case(_gather, [((3,),), ((2, 3),)], linear=True),
    "IndexSelectBackward0": Case(
        lambda lib, x: x.index_select(-1, lib.tensor([2, 0, 2])), [((3,),), ((2, 3),)],
        linear=True),
    "MaskedFillBackward0": Case(lambda lib, x: x.masked_fill(row_mask(lib), 0.5),
                                [((3,),), ((2, 3),)], linear=True),
    "MaskedFillBackward1": Case(lambda lib, x, v: x.masked_fill(row_mask(lib), v),
                                [((3,), ()), ((2, 3), ())], linear=True),
}
