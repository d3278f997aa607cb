"""RMSprop, with PyTorch's update formula (eps added after the square root; optional
centering and momentum)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._optimizer import (
    Optimizer,
    ParamsT,
    _effective_grad,
    _hyper,
    _state_tensor,
    _step_tensor,
    _unsupported,
)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, capturable=False, foreach=None, maximize=False, differentiable=False)``,
    as ``torch.optim.RMSprop``::

        t += 1
        g = grad (negated if maximize) + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - m * m) + eps     with m = m + (1 - alpha) * (g - m)   (centered)
        avg = sqrt(v) + eps                                                  (otherwise)
        buf = momentum * buf + g / avg;  p = p - lr * buf      (momentum > 0)
        p = p - lr * g / avg                                  (otherwise)

    ``lr`` may be a 1-element Tensor. ``foreach`` is recorded and changes nothing;
    ``capturable=True`` and ``differentiable=True`` are not supported. State per
    parameter: ``step`` (a 0-d float32 CPU Tensor), ``square_avg``, and
    ``momentum_buffer`` (momentum > 0) and ``grad_avg`` (centered).
    See Note [Optimizer steps write .data in place].
    """

    _group_fallbacks = {"momentum": 0, "centered": False, "foreach": None, "maximize": False,
                        "differentiable": False, "capturable": False}

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)
        _unsupported(type(self).__name__, capturable=capturable,
                     differentiable=differentiable)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = float(_hyper(group["lr"]))
        alpha = group["alpha"]
        eps = group["eps"]
        momentum = group["momentum"]
        centered = group["centered"]
        for p, xp, w, grad in self._with_grads(group):
            state = self.state[p]
            if not state:
                state["step"] = _step_tensor()
                state["square_avg"] = _state_tensor(p, xp.zeros_like(w))
                if momentum > 0:
                    state["momentum_buffer"] = _state_tensor(p, xp.zeros_like(w))
                if centered:
                    state["grad_avg"] = _state_tensor(p, xp.zeros_like(w))
            state["step"].data += 1
            # scratch[0]: g when it differs from grad; scratch[1]: a temporary, then avg.
            g_buf, avg = self._scratch_for(p, 2)
            g = _effective_grad(xp, w, grad, group["weight_decay"], group["maximize"], g_buf)
            square_avg = state["square_avg"].data
            square_avg *= alpha
            xp.multiply(g, 1.0 - alpha, out=avg)
            avg *= g
            square_avg += avg
            if centered:
                grad_avg = state["grad_avg"].data
                xp.subtract(g, grad_avg, out=avg)
                avg *= 1.0 - alpha
                grad_avg += avg
                xp.multiply(grad_avg, grad_avg, out=avg)
                xp.subtract(square_avg, avg, out=avg)
                xp.sqrt(avg, out=avg)
            else:
                xp.sqrt(square_avg, out=avg)
            avg += eps
            xp.divide(g, avg, out=avg)
            if momentum > 0:
                buf = state["momentum_buffer"].data
                buf *= momentum
                buf += avg
                xp.multiply(buf, lr, out=avg)
            else:
                avg *= lr
            w -= avg
