"""Custom Functions the engine tests use to watch (or hold) a backward from inside."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiograd as ag


def passthrough(on_backward: Callable[[], Any]) -> type[ag.Function]:
    """A custom Function ``y = x * 1`` whose backward calls ``on_backward()`` first."""

    class PassThrough(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            on_backward()
            return g

    return PassThrough
