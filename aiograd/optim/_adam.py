"""Adam and AdamW, with PyTorch's update formulas (bias correction, eps outside the square
root; AdamW's weight decay applied to the parameter, not folded into the gradient)."""

from __future__ import annotations

import math
from typing import Any

from .._tensor import Tensor
from ._optimizer import (
    Optimizer,
    ParamsT,
    _check_fused,
    _hyper,
    _state_tensor,
    _step_tensor,
    _unsupported,
)

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
    *, foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
    decoupled_weight_decay=False)``, as ``torch.optim.Adam``::

        t += 1
        g = grad (negated if maximize) + weight_decay * p
        m = m + (1 - beta1) * (g - m)                 (lerp)
        v = beta2 * v + (1 - beta2) * g * g
        v_hat = max(v_hat, v) if amsgrad else v
        denom = sqrt(v_hat) / sqrt(1 - beta2 ** t) + eps
        p = p - lr / (1 - beta1 ** t) * m / denom

    With ``decoupled_weight_decay`` (AdamW) g leaves out the decay term and each
    step first shrinks the parameter: ``p = p * (1 - lr * weight_decay)``.

    ``lr`` may be a 1-element Tensor (the group keeps it; ``lr / (1 - beta1 ** t)`` is
    then computed in its dtype, as PyTorch). ``foreach`` and ``fused`` are recorded and
    change nothing; ``capturable=True`` and ``differentiable=True`` are not supported.
    State per parameter: ``step`` (a 0-d float32 CPU Tensor), ``exp_avg``,
    ``exp_avg_sq`` (and ``max_exp_avg_sq`` with amsgrad).
    See Note [Optimizer steps write .data in place].
    """

    _group_fallbacks = {"amsgrad": False, "maximize": False, "foreach": None,
                        "capturable": False, "differentiable": False,
                        "decoupled_weight_decay": False, "fused": None}

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor):
            if foreach and not capturable:
                raise ValueError(
                    "lr as a Tensor is not supported for capturable=False and foreach=True"
                )
            if lr.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:  # NaN too, as PyTorch's Adam (its SGD lets NaN through)
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        _unsupported(type(self).__name__, capturable=capturable,
                     differentiable=differentiable)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = _hyper(group["lr"])
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        weight_decay = group["weight_decay"]
        amsgrad = group["amsgrad"]
        maximize = group["maximize"]
        # Weight decay goes into g (coupled_decay), or shrinks the parameter (shrink).
        decoupled = group["decoupled_weight_decay"]
        coupled_decay = 0.0 if decoupled else weight_decay
        shrink = float(1.0 - lr * weight_decay) if decoupled and weight_decay != 0 else None
        for p, xp, w, grad in self._with_grads(group):
            state = self.state[p]
            if not state:
                state["step"] = _step_tensor()
                state["exp_avg"] = _state_tensor(p, xp.zeros_like(w))
                state["exp_avg_sq"] = _state_tensor(p, xp.zeros_like(w))
                if amsgrad:
                    state["max_exp_avg_sq"] = _state_tensor(p, xp.zeros_like(w))
            exp_avg = state["exp_avg"].data
            exp_avg_sq = state["exp_avg_sq"].data
            step_t = state["step"].data
            step_t += 1
            step = float(step_t)

            # scratch[-1] is a temporary, then the denominator; scratch[0] holds g
            # when it differs from grad.
            need_g = coupled_decay != 0 or maximize
            scratch = self._scratch_for(p, 2 if need_g else 1)
            tmp = scratch[-1]
            g = grad
            if coupled_decay != 0:
                g = scratch[0]
                xp.multiply(w, coupled_decay, out=g)
                if maximize:
                    xp.subtract(g, grad, out=g)
                else:
                    xp.add(g, grad, out=g)
            elif maximize:
                g = scratch[0]
                xp.negative(grad, out=g)
            if shrink is not None:
                w *= shrink

            xp.subtract(g, exp_avg, out=tmp)
            tmp *= 1.0 - beta1
            exp_avg += tmp
            xp.multiply(g, g, out=tmp)
            tmp *= 1.0 - beta2
            exp_avg_sq *= beta2
            exp_avg_sq += tmp

            bias_correction1 = 1.0 - beta1 ** step
            bias_correction2 = 1.0 - beta2 ** step
            step_size = float(lr / bias_correction1)
            v_hat = exp_avg_sq
            if amsgrad:
                v_hat = state["max_exp_avg_sq"].data
                xp.maximum(v_hat, exp_avg_sq, out=v_hat)
            denom = tmp
            xp.sqrt(v_hat, out=denom)
            denom /= math.sqrt(bias_correction2)
            denom += eps
            xp.divide(exp_avg, denom, out=denom)
            denom *= step_size
            w -= denom


class AdamW(Adam):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
    amsgrad=False, *, maximize=False, foreach=None, capturable=False,
    differentiable=False, fused=None)``, as ``torch.optim.AdamW``: Adam with
    ``decoupled_weight_decay=True``, so each step first shrinks the parameter,
    ``p = p * (1 - lr * weight_decay)``, and the moments see the plain gradient.
    Options and state per parameter: as :class:`Adam`'s.
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As :meth:`Optimizer.load_state_dict`; the decay stays decoupled whatever the
        saved groups say (a state dict from ``Adam`` loads into ``AdamW``, as in PyTorch)."""
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
