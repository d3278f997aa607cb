"""Loss and activation modules over ``aiograd._ops.nn_more``, with PyTorch's attributes,
reprs and buffers (a loss's ``weight`` and ``pos_weight``; None when not given)."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from ._layers import _inplace_repr, _InplaceActivation
from ._losses import _Loss, _WeightedLoss
from ._module import Module

__all__ = ["BCELoss", "BCEWithLogitsLoss", "ELU", "Hardtanh", "HuberLoss", "KLDivLoss",
           "LogSigmoid", "Mish", "ReLU6", "SiLU", "SmoothL1Loss", "Softplus", "Softsign"]


class BCELoss(_WeightedLoss):
    """``F.binary_cross_entropy`` of probabilities ``input`` and ``target``."""

    def __init__(self, weight: Tensor | None = None, *, reduction: str = "mean") -> None:
        super().__init__(weight, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """``F.binary_cross_entropy_with_logits`` of logits ``input`` and ``target``."""

    pos_weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, *, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class SmoothL1Loss(_Loss):
    """``F.smooth_l1_loss(input, target, beta=beta)``."""

    def __init__(self, *, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``F.huber_loss(input, target, delta=delta)``."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    """``F.kl_div`` of log-probabilities ``input`` and probabilities (or, with
    ``log_target``, log-probabilities) ``target``."""

    def __init__(self, *, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SiLU(_InplaceActivation):
    """``x * sigmoid(x)``; with ``inplace``, written into the input."""

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x, self.inplace)


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``; with ``inplace``, written into the input."""

    def forward(self, x: Tensor) -> Tensor:
        return F.mish(x, self.inplace)


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if max_val <= min_val:
            raise AssertionError
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace}"


class ReLU6(Hardtanh):
    """``Hardtanh(0.0, 6.0)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, without overflow."""

    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(x)


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softsign(x)
