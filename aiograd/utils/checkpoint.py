"""Activation checkpointing: trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` without keeping its intermediate
activations and recomputes them during backward.

- ``use_reentrant=True`` (PyTorch's classic form): ``fn`` runs under
  ``no_grad`` inside a custom Function; its backward re-runs ``fn`` with grad
  enabled and drives a nested backward through it (``backward_sync`` on the
  worker: see Note [Reentrant backward] in ``aiograd.engine.engine``).
  Incompatible with ``grad()`` / ``backward(inputs=...)``, as in PyTorch.
- ``use_reentrant=False``: ``fn`` runs normally under ``saved_tensors_hooks``
  whose pack hook keeps only an index; the first unpack during backward
  recomputes ``fn`` once and hands out the recomputed tensors. No nested
  backward, works with ``grad()``.

Both restore the state of aiograd's random generator before recomputing, so
``randn`` inside ``fn`` gives the same values twice.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from .. import _tensor
from .._tensor import Tensor
from ..autograd import backward_sync, is_checkpoint_valid
from ..function import Function
from ..grad_mode import enable_grad, is_grad_enabled
from ..graph._saved import saved_tensors_hooks

__all__ = ["checkpoint"]

_REENTRANT_INPUTS_ERROR = (
    "When use_reentrant=True, aiograd.checkpoint is incompatible with .grad() or passing an "
    "`inputs` parameter to .backward(). To resolve this error, you can either set "
    "use_reentrant=False, or call .backward() without passing the `inputs` argument."
)


def checkpoint(fn: Callable[..., Any], *args: Any, use_reentrant: bool = True,
               preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` without storing its activations; recompute them in backward."""
    if not callable(fn):
        raise TypeError(f"checkpoint expects a callable, got {type(fn).__name__}")
    if not isinstance(use_reentrant, bool):
        raise TypeError("use_reentrant must be a bool")
    if use_reentrant:
        if kwargs:
            raise ValueError("keyword arguments are only supported with use_reentrant=False")
        if is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad
                                         for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          UserWarning, stacklevel=2)
        return _ReentrantCheckpoint.apply(fn, preserve_rng_state, *args)
    return _checkpoint_with_hooks(fn, args, kwargs, preserve_rng_state)


def _rng_state(preserve: bool) -> Any:
    return _tensor._rng.bit_generator.state if preserve else None


def _restore_rng(state: Any) -> None:
    if state is not None:
        _tensor._rng.bit_generator.state = state


class _ReentrantCheckpoint(Function):
    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], preserve: bool, *args: Any) -> Any:
        ctx.fn = fn
        ctx.rng = _rng_state(preserve)
        ctx.positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        outputs = fn(*args)
        return outputs

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if not is_checkpoint_valid():
            raise RuntimeError(_REENTRANT_INPUTS_ERROR)
        args = list(ctx.others)
        inputs = []
        for pos, saved in zip(ctx.positions, ctx.saved_tensors):
            detached = saved.detach()
            detached.requires_grad_(saved.requires_grad)
            args[pos] = detached
            inputs.append(detached)
        state = _rng_state(ctx.rng is not None)
        _restore_rng(ctx.rng)
        try:
            with enable_grad():
                outputs = ctx.fn(*args)
        finally:
            _restore_rng(state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        roots, root_grads = [], []
        for out, g in zip(outputs, grads):
            if isinstance(out, Tensor) and out.requires_grad:
                roots.append(out)
                root_grads.append(g)
        if roots:
            backward_sync(roots, root_grads)
        grad_inputs = [None, None] + [None] * len(args)
        for pos, inp in zip(ctx.positions, inputs):
            grad_inputs[2 + pos] = inp.grad
        return tuple(grad_inputs)


class _Recomputation:
    """Shared by the pack/unpack hooks of one non-reentrant checkpoint call.

    Invariant: after ``recompute``, ``tensors[i]`` is the i-th tensor saved
    by the recomputed forward, matching index i handed out by ``pack``.
    ``lock`` serialises the one recomputation (unpack may run on any worker).
    """

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 rng: Any) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.rng = rng
        self.count = 0
        self.tensors: list[Tensor] | None = None
        self.lock = threading.Lock()

    def pack(self, t: Tensor) -> int:
        index = self.count
        self.count += 1
        return index

    def unpack(self, index: int) -> Tensor:
        with self.lock:
            if self.tensors is None:
                self.tensors = self._recompute()
            tensors = self.tensors
        if index >= len(tensors):
            raise RuntimeError(
                "aiograd.checkpoint: the recomputed forward saved fewer tensors than the "
                "original one; the checkpointed function must be deterministic"
            )
        return tensors[index]

    def _recompute(self) -> list[Tensor]:
        saved: list[Tensor] = []

        def keep(t: Tensor) -> None:
            saved.append(t.detach())

        def refuse(x: Any) -> Tensor:
            raise RuntimeError("aiograd.checkpoint: the recomputed graph is never backpropagated")

        state = _rng_state(self.rng is not None)
        _restore_rng(self.rng)
        try:
            with enable_grad(), saved_tensors_hooks(keep, refuse):
                self.fn(*self.args, **self.kwargs)
        finally:
            _restore_rng(state)
        return saved


def _checkpoint_with_hooks(fn: Callable[..., Any], args: tuple[Any, ...],
                           kwargs: dict[str, Any], preserve: bool) -> Any:
    frame = _Recomputation(fn, args, kwargs, _rng_state(preserve))
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return fn(*args, **kwargs)


