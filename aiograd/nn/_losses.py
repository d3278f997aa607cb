"""Loss modules: thin wrappers over ``aiograd.nn.functional``'s losses."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from . import functional as F
from ._module import Module

__all__ = ["CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss"]


class _Loss(Module):
    """A loss keeping ``reduction``, checked when called, as PyTorch's; its repr shows
    no options, as PyTorch's."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction


class MSELoss(_Loss):
    """Mean squared error between ``input`` and ``target`` (see ``F.mse_loss``)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error between ``input`` and ``target`` (see ``F.l1_loss``)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class _WeightedLoss(_Loss):
    """A loss with a per-class ``weight``, registered as a buffer (None when not given)."""

    weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities ``input`` (N, C) and class indices (N,).

    See ``F.nll_loss``: targets equal to ``ignore_index`` count for nothing.
    """

    def __init__(self, weight: Tensor | None = None, *, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits ``input`` (N, C) and class indices (N,) or probabilities (N, C).

    See ``F.cross_entropy``; with the default options it takes the fused path.
    """

    def __init__(self, weight: Tensor | None = None, *, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)
