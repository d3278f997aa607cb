"""``DistributedOptimizer``: step parameters on their owners from a context's gradients."""
from __future__ import annotations

import asyncio
from typing import Any

from aiograd._tensor import Tensor

from . import autograd as _dist_autograd
from . import rpc as _rpc

__all__ = ["DistributedOptimizer"]


def _create(optimizer_class: type, params: list[Tensor], args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:
    try:
        return optimizer_class(params, *args, **kwargs)
    except Exception as e:
        raise RuntimeError(f"Error creating optimizer: {type(e).__name__}: {e}") from e


def _local_values(rrefs: list[_rpc.RRef]) -> list[Tensor]:
    return [r.local_value() for r in rrefs]


def _step(opt_rref: _rpc.RRef, context_id: int) -> None:
    """On the owner: step with the context's gradients, leaving ``.grad`` as it was."""
    optimizer = opt_rref.local_value()
    grads = _dist_autograd.get_gradients(context_id)
    saved = []
    try:
        for group in optimizer.param_groups:
            for p in group["params"]:
                saved.append((p, p.grad))
                p.grad = grads.get(p)  # no gradient: the optimizer leaves p untouched
        optimizer.step()
    except Exception as e:
        raise RuntimeError(f"Error running optimizer: {type(e).__name__}: {e}") from e
    finally:
        for p, g in saved:
            p.grad = g


async def _make_local(rrefs: list[_rpc.RRef], optimizer_class: type, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    return _create(optimizer_class, _local_values(rrefs), args, kwargs)


class DistributedOptimizer:
    """Wraps any ``aiograd.optim`` optimizer class over parameters held as RRefs.

    Build it with ``await DistributedOptimizer.create(optim.SGD, param_rrefs, lr=0.1)``;
    ``await opt.step(context_id)`` steps every owner's parameters, concurrently,
    from that owner's gradients in the context.
    """

    def __init__(self, owners: list[_rpc.RRef]) -> None:
        self._optimizers = owners

    @classmethod
    async def create(cls, optimizer_class: type, params_rref: list[_rpc.RRef], *args: Any,
                     **kwargs: Any) -> DistributedOptimizer:
        if not isinstance(optimizer_class, type):
            raise TypeError("DistributedOptimizer: optimizer_class must be a class")
        by_owner: dict[int, list[_rpc.RRef]] = {}
        for r in params_rref:
            if not isinstance(r, _rpc.RRef):
                raise TypeError(f"DistributedOptimizer: expected RRefs, got {type(r).__name__}")
            by_owner.setdefault(r.owner().id, []).append(r)
        optimizers = await asyncio.gather(*(
            _rpc.remote(owner, _make_local, (rrefs, optimizer_class, args, kwargs))
            for owner, rrefs in by_owner.items()))
        return cls(list(optimizers))

    async def step(self, context_id: int) -> None:
        _dist_autograd._lookup(context_id)  # a clear error for a bad id, before any RPC
        await asyncio.gather(*(_rpc.rpc_async(o.owner().id, _step, (o, context_id))
                               for o in self._optimizers))
