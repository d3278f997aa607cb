"""Activation checkpointing: trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` without keeping its intermediate
activations and recomputes them during backward.

- ``use_reentrant=True`` (PyTorch's classic form): ``fn`` runs under
  ``no_grad`` inside a custom Function; its backward re-runs ``fn`` with grad
  enabled and drives a nested backward through it (``backward_sync`` on the
  worker: see Note [Reentrant backward] in ``aiograd.engine.executors``).
  Incompatible with ``grad()`` / ``backward(inputs=...)``, as in PyTorch.
- ``use_reentrant=False``: ``fn`` runs normally under ``saved_tensors_hooks``
  whose pack hook keeps only an index; the first unpack of each backward
  pass recomputes ``fn`` and hands out the recomputed tensors, each once.
  No nested backward, works with ``grad()``.

Both restore the state of aiograd's random generator before recomputing, so
``randn`` inside ``fn`` gives the same values twice.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from .. import _random
from .._tensor import Tensor
from ..autograd import backward_sync, is_checkpoint_valid
from ..function import Function
from ..grad_mode import enable_grad, is_grad_enabled
from ..graph._context import current_graph_task
from ..graph._saved import SavedTensor, saved_tensors_hooks

__all__ = ["CheckpointError", "checkpoint"]


class CheckpointError(RuntimeError):
    """The recomputed forward of a non-reentrant checkpoint saved other tensors than the
    original one (a function that is not deterministic)."""

_USE_REENTRANT_WARNING = (
    "aiograd.checkpoint: the use_reentrant parameter should be passed explicitly; "
    "use_reentrant=None means True here, as in PyTorch 2.13. Note that "
    "use_reentrant=False is the recommended form."
)
_REENTRANT_INPUTS_ERROR = (
    "When use_reentrant=True, aiograd.checkpoint is incompatible with .grad() or passing an "
    "`inputs` parameter to .backward(). To resolve this error, you can either set "
    "use_reentrant=False, or call .backward() without passing the `inputs` argument."
)


def checkpoint(fn: Callable[..., Any], *args: Any, use_reentrant: bool | None = True,
               preserve_rng_state: bool = True, determinism_check: str = "default",
               early_stop: bool = True, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` without storing its activations; recompute them in backward.

    Non-reentrant only, as PyTorch's: ``determinism_check="default"`` raises
    :class:`CheckpointError` if the recomputation saves tensors of other
    shapes, dtypes or devices, or fewer of them (``"none"``: no check);
    ``early_stop`` stops the recomputation once it has saved as many tensors as
    the forward did. ``use_reentrant=None`` warns and means True, as PyTorch's;
    with grad mode off the non-reentrant form just calls ``fn``.
    """
    if not callable(fn):
        raise TypeError(f"checkpoint expects a callable, got {type(fn).__name__}")
    unsupported = [k for k in ("context_fn", "debug") if k in kwargs]
    if unsupported:  # PyTorch's own keywords: never passed on to fn
        raise NotImplementedError(f"aiograd.checkpoint does not support {unsupported[0]}=")
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    if use_reentrant:
        if kwargs:
            raise ValueError("keyword arguments are only supported with use_reentrant=False")
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          UserWarning, stacklevel=2)
        return CheckpointFunction.apply(fn, preserve_rng_state, *args)
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if not is_grad_enabled():  # nothing will be backpropagated: nothing to save
        return fn(*args, **kwargs)
    return _checkpoint_with_hooks(fn, args, kwargs, preserve_rng_state,
                                  determinism_check == "default", early_stop)


def _rng_state(preserve: bool) -> Any:
    return _random.get_rng_state() if preserve else None


def _restore_rng(state: Any) -> None:
    if state is not None:
        _random.set_rng_state(state)


class CheckpointFunction(Function):
    """The reentrant checkpoint (PyTorch's name): recomputes ``fn`` in its backward and
    runs a nested backward through the recomputed graph."""

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
        if not roots:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary")
        backward_sync(roots, root_grads)
        grad_inputs = [None, None] + [None] * len(args)
        for pos, inp in zip(ctx.positions, inputs):
            grad_inputs[2 + pos] = inp.grad
        return tuple(grad_inputs)


class _Recomputation:
    """Shared by the pack/unpack hooks of one non-reentrant checkpoint call.

    The tensor arguments are saved as a node saves its inputs (``inputs``,
    made outside the checkpoint's own hooks, so a caller's outer hooks see
    them): recomputing unpacks them, so an argument changed in place since
    the forward raises the version error, as in PyTorch.

    Each backward pass recomputes on its first unpack and hands every
    recomputed tensor out once, then drops it, so memory goes as the pass
    proceeds and a second pass (``retain_graph``) recomputes again.
    Invariant: ``by_task[gt][i]`` is the i-th tensor saved by the forward
    recomputed for GraphTask ``gt``, or None once handed out; index i is the
    one ``pack`` returned for the i-th tensor the original forward saved,
    whose shape, dtype and device are ``metadata[i]`` (kept for the check).
    ``lock`` guards ``by_task`` (unpack may run on any worker).
    """

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 rng: Any, check: bool, early_stop: bool) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.inputs = [SavedTensor(a, False) if isinstance(a, Tensor) else None for a in args]
        self.rng = rng
        self.check = check
        self.early_stop = early_stop
        self.metadata: list[tuple[Any, ...]] = []
        self.by_task: weakref.WeakKeyDictionary[Any, list[Tensor | None]] = (
            weakref.WeakKeyDictionary())
        self.lock = threading.Lock()

    @property
    def count(self) -> int:
        return len(self.metadata)

    def pack(self, t: Tensor) -> int:
        self.metadata.append(_metadata(t) if self.check else ())
        return len(self.metadata) - 1

    def unpack(self, index: int) -> Tensor:
        task = current_graph_task.get()
        with self.lock:
            tensors = self.by_task.get(task) if task is not None else None
            if tensors is None or tensors[index] is None:  # new pass, or unpacked again
                tensors = self._recompute()
                if task is not None:
                    self.by_task[task] = tensors
            t = tensors[index]
            tensors[index] = None
        assert t is not None  # recomputed, or not handed out yet: the test above
        return t

    def _recompute(self) -> list[Tensor | None]:
        saved: list[Tensor] = []
        count = self.count

        def keep(t: Tensor) -> None:
            saved.append(t.detach())
            if self.early_stop and len(saved) == count:
                raise _StopRecomputation

        def refuse(x: Any) -> Tensor:
            raise RuntimeError("aiograd.checkpoint: the recomputed graph is never backpropagated")

        args = [a if s is None else _detached_like(s.unpack(None, False), a)
                for a, s in zip(self.args, self.inputs)]
        state = _rng_state(self.rng is not None)
        _restore_rng(self.rng)
        try:
            with enable_grad(), saved_tensors_hooks(keep, refuse):
                self.fn(*args, **self.kwargs)
        except _StopRecomputation:
            pass
        finally:
            _restore_rng(state)
        if len(saved) < count:
            raise CheckpointError(
                "aiograd.checkpoint: A different number of tensors was saved during the "
                f"original forward and recomputation.\nNumber of tensors saved during forward: "
                f"{count}\nNumber of tensors saved during recomputation: {len(saved)}."
            )
        if self.check:
            self._check_metadata(saved)
        recomputed: list[Tensor | None] = list(saved[:count])
        return recomputed

    def _check_metadata(self, saved: list[Tensor]) -> None:
        """PyTorch's determinism check: each recomputed tensor as the one saved in forward."""
        lines = []
        for i, (before, t) in enumerate(zip(self.metadata, saved)):
            after = _metadata(t)
            if after != before:
                lines.append(f"tensor at position {i}:\nsaved metadata: {_describe(before)}\n"
                             f"recomputed metadata: {_describe(after)}\n")
        if lines:
            raise CheckpointError(
                "aiograd.checkpoint: Recomputed values for the following tensors have "
                "different metadata than during the forward pass.\n" + "".join(lines)
            )


class _StopRecomputation(Exception):  # noqa: N818  (a signal, not an error)
    """Raised from the recomputation's pack hook once every needed tensor is saved."""


def _metadata(t: Tensor) -> tuple[Any, ...]:
    return (tuple(t.shape), t.dtype, t.device)


def _describe(meta: tuple[Any, ...]) -> str:
    shape, dtype, device = meta
    return f"{{'shape': {shape}, 'dtype': {dtype}, 'device': {device}}}"


def _detached_like(data: Any, t: Tensor) -> Tensor:
    """A new leaf over ``data`` with ``t``'s device and ``requires_grad``."""
    out = Tensor._wrap(data, t.device)
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def _checkpoint_with_hooks(fn: Callable[..., Any], args: tuple[Any, ...],
                           kwargs: dict[str, Any], preserve: bool, check: bool,
                           early_stop: bool) -> Any:
    frame = _Recomputation(fn, args, kwargs, _rng_state(preserve), check, early_stop)
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return fn(*args, **kwargs)
