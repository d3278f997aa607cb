"""Sweep cases of aiograd/_ops/views.py's rules (see tests/sweep_base.py)."""

from __future__ import annotations

from typing import Any

from sweep_base import Case


def _written_view(lib: Any, a: Any) -> Any:
    """A view of ``a * 1`` whose base is then multiplied by ``a`` in place: the view's history
    becomes AsStridedBackward0 over the base's (its value ``a ** 2`` sliced)."""
    base = a * 1.0
    view = base[1:]
    base.mul_(a)
    return view


CASES: dict[str, Case] = {
    "AsStridedBackward0": Case(_written_view, [((3,),), ((3, 2),)]),
}
