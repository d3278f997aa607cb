"""Stochastic gradient descent, with PyTorch's momentum, dampening and Nesterov formulas."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._optimizer import Optimizer, ParamsT, _check_fused, _hyper, _state_tensor, _unsupported

__all__ = ["SGD"]


class SGD(Optimizer):
    """``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
    maximize=False, foreach=None, differentiable=False, fused=None)``, as
    ``torch.optim.SGD``::

        g = grad (negated if maximize) + weight_decay * p
        buf = g                                  on the first step with momentum
        buf = momentum * buf + (1 - dampening) * g   afterwards
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g

    ``lr`` may be a 1-element Tensor (the group keeps it). ``foreach`` and ``fused``
    are recorded, as PyTorch's, and change nothing; ``differentiable=True`` is not
    supported. State per parameter: ``momentum_buffer`` (only when ``momentum != 0``).
    See Note [Optimizer steps write .data in place].
    """

    _group_fallbacks = {"nesterov": False, "maximize": False, "foreach": None,
                        "differentiable": False, "fused": False}

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False,
                 *, maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        _unsupported(type(self).__name__, differentiable=differentiable)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = _hyper(group["lr"])
        momentum = group["momentum"]
        dampening = group["dampening"]
        weight_decay = group["weight_decay"]
        nesterov = group["nesterov"]
        maximize = group["maximize"]
        for p, xp, w, grad in self._with_grads(group):
            # scratch[0] holds d_p; scratch[1] a temporary for dampening and nesterov.
            need_tmp = momentum != 0 and (nesterov or dampening != 0)
            scratch = self._scratch_for(p, 2 if need_tmp else 1)
            d_p = scratch[0]
            # d_p = (-grad if maximize else grad) + weight_decay * w
            if weight_decay != 0:
                xp.multiply(w, weight_decay, out=d_p)
                if maximize:
                    xp.subtract(d_p, grad, out=d_p)
                else:
                    xp.add(d_p, grad, out=d_p)
            elif maximize:
                xp.negative(grad, out=d_p)
            else:
                xp.copyto(d_p, grad)
            if momentum != 0:
                state = self.state[p]
                buf_t = state.get("momentum_buffer")
                if buf_t is None:
                    buf = d_p.copy()
                    state["momentum_buffer"] = _state_tensor(p, buf)
                else:
                    buf = buf_t.data
                    buf *= momentum
                    if dampening != 0:
                        # A param group may set dampening with nesterov: keep d_p.
                        xp.multiply(d_p, 1.0 - dampening, out=scratch[1])
                        buf += scratch[1]
                    else:
                        buf += d_p
                if nesterov:
                    xp.multiply(buf, momentum, out=scratch[1])
                    d_p += scratch[1]
                else:
                    xp.multiply(buf, lr, out=d_p)
                    w -= d_p
                    continue
            d_p *= lr
            w -= d_p
