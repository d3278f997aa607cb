"""Loss modules: thin wrappers over ``aiograd.nn.functional``'s losses."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from . import functional as F
from ._module import Module

__all__ = ["CrossEntropyLoss", "MSELoss"]


_REDUCTIONS = ("none", "mean", "sum")


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{reduction!r} is not a valid value for reduction; "
                             f"use one of {', '.join(_REDUCTIONS)}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """Mean squared error between ``input`` and ``target`` (see ``F.mse_loss``)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross entropy of logits ``input`` (N, C) and class indices ``target`` (N,)."""

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.cross_entropy(input, target, reduction=self.reduction)
