"""Custom Functions the engine tests use to watch (or hold) a backward from inside."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiograd as ag


def passthrough(on_backward: Callable[[], Any] = lambda: None,
                gradient: Callable[[Any], Any] = lambda g: g) -> type[ag.Function]:
    """A custom Function ``y = x * 1`` whose backward calls ``on_backward()`` first,
    then returns ``gradient(g)`` (``g`` itself by default)."""

    class PassThrough(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            on_backward()
            return gradient(g)

    return PassThrough
