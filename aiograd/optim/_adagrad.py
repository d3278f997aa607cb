"""Adagrad, with PyTorch's update formula (learning-rate decay per step, eps added after
the square root, state made at construction)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._optimizer import (
    Optimizer,
    ParamsT,
    _check_fused,
    _effective_grad,
    _hyper,
    _state_tensor,
    _step_tensor,
    _unsupported,
)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None)``, as
    ``torch.optim.Adagrad``::

        t += 1
        g = grad (negated if maximize) + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g * g
        p = p - clr * g / (sqrt(sum) + eps)

    As PyTorch's, the state of every parameter (``step``, a 0-d float32 CPU Tensor, and
    ``sum``, filled with ``initial_accumulator_value``) is made by the constructor, so
    a parameter without a gradient still has state. ``lr`` may be a 1-element Tensor.
    ``foreach`` and ``fused`` are recorded and change nothing; ``differentiable=True``
    is not supported. Sparse gradients do not exist in aiograd.
    See Note [Optimizer steps write .data in place].
    """

    _group_fallbacks = {"foreach": None, "maximize": False, "differentiable": False,
                        "fused": None}

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}"
            )
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        _unsupported(type(self).__name__, differentiable=differentiable)
        for group in self.param_groups:
            for p in group["params"]:
                xp = p.device.xp
                state = self.state[p]
                state["step"] = _step_tensor()
                state["sum"] = _state_tensor(
                    p, xp.full_like(p.data, group["initial_accumulator_value"]))

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = _hyper(group["lr"])
        eps = group["eps"]
        for p, xp, w, grad in self._with_grads(group):
            state = self.state[p]
            step_t = state["step"].data
            step_t += 1
            clr = float(lr / (1 + (float(step_t) - 1) * group["lr_decay"]))
            # scratch[0]: g when it differs from grad; scratch[1]: a temporary, then std.
            g_buf, std = self._scratch_for(p, 2)
            g = _effective_grad(xp, w, grad, group["weight_decay"], group["maximize"], g_buf)
            state_sum = state["sum"].data
            xp.multiply(g, g, out=std)
            state_sum += std
            xp.sqrt(state_sum, out=std)
            std += eps
            xp.divide(g, std, out=std)
            std *= clr
            w -= std
