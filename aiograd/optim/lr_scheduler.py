"""Learning-rate schedulers: ``torch.optim.lr_scheduler``'s, value for value.

A scheduler owns one job: after each ``optimizer.step()``, ``scheduler.step()``
writes the next learning rate into every ``group["lr"]`` of the optimizer. The
optimizer reads ``group["lr"]`` afresh on each step, so nothing else is shared.

Note [Chainable learning rates]
    As PyTorch's, most schedulers compute the next lr from the *current*
    ``group["lr"]`` (``StepLR`` multiplies it by ``gamma``; ``CosineAnnealingLR``
    applies the ratio of consecutive cosine terms), not from a closed form of
    ``base_lrs``. So two schedulers on one optimizer compose, and the float
    sequence matches PyTorch's to the last bit, rounding included.
    ``step(epoch)`` (deprecated in PyTorch too) and ``SequentialLR``'s milestones
    use the closed form ``_get_closed_form_lr`` where the scheduler has one.

Construction writes ``group["initial_lr"]`` (when ``last_epoch == -1``), sets
``base_lrs`` from it and takes the initial step (``last_epoch`` becomes 0); it
also wraps ``optimizer.step`` on the instance to record that it was called, so
that a ``scheduler.step()`` before any ``optimizer.step()`` warns as PyTorch's.
A scheduler is used from the training loop's thread only, like its optimizer.
"""

from __future__ import annotations

import functools
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, SupportsFloat

from ._optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR",
    "SequentialLR",
    "ReduceLROnPlateau",
]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _lrs(optimizer: Optimizer) -> list[float]:
    return [group["lr"] for group in optimizer.param_groups]


def _track_step_calls(optimizer: Optimizer) -> None:
    """Wrap ``optimizer.step`` (once) to set ``optimizer._opt_called`` when it runs.

    The wrapper holds the optimizer weakly, so it makes no reference cycle.
    """
    if getattr(optimizer.step, "_wrapped_by_lr_sched", False):
        return
    step = optimizer.step.__func__  # type: ignore[attr-defined]
    opt_ref = weakref.ref(optimizer)

    @functools.wraps(step)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opt = opt_ref()
        opt._opt_called = True  # type: ignore[union-attr]
        return step(opt, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = wrapper  # type: ignore[method-assign]


class LRScheduler:
    """Base class of schedulers: subclasses implement :meth:`get_lr`.

    ``last_epoch`` is the index of the last step taken (0 right after
    construction); pass a saved ``last_epoch`` only to resume, once the
    optimizer's groups hold ``"initial_lr"``.
    """

    # Invariant: _in_step is True exactly while step() computes the new lrs.
    _in_step: bool = False
    # Invariant: _is_initial is True exactly during the step taken at construction.
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0; load the optimizer's "
                        "state_dict first, or use last_epoch=-1 for a fresh run"
                    )
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _track_step_calls(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes saved by :meth:`state_dict`."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[float]:
        """The lrs the last :meth:`step` wrote, one per parameter group."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        """The next lrs, one per group; called by :meth:`step` (use :meth:`get_last_lr`)."""
        raise NotImplementedError

    def _warn_outside_step(self) -> None:
        if not self._in_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use "
                "`get_last_lr()`.",
                UserWarning,
                stacklevel=3,
            )

    def step(self, epoch: int | None = None) -> None:
        """Advance ``last_epoch`` by one and write the next lrs; call after
        ``optimizer.step()``. ``epoch`` (deprecated) jumps to that epoch instead."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    "before `lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning,
                    stacklevel=2,
                )
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                    "In PyTorch 1.1.0 and later, you should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
                    "will result in PyTorch skipping the first value of the learning rate "
                    "schedule. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning,
                    stacklevel=2,
                )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Write the lrs of the next epoch, or (closed form if any) of ``epoch``."""
        self._in_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        finally:
            self._in_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)


class _LRScheduler(LRScheduler):
    """Old name of :class:`LRScheduler`, kept as PyTorch keeps it."""


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``; one function, or one per group.

    :meth:`state_dict` saves the ``__dict__`` of callable objects, not of plain
    functions or lambdas (which cannot be saved), as PyTorch's.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(
                    f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                    f"{len(lr_lambda)}"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
            for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes and callable objects' state; ``state_dict`` is not changed."""
        for key, value in state_dict.items():
            if key != "lr_lambdas":
                self.__dict__[key] = value
        for fn, saved in zip(self.lr_lambdas, state_dict["lr_lambdas"]):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        return [
            base_lr * fn(self.last_epoch)
            for fn, base_lr in zip(self.lr_lambdas, self.base_lrs, strict=True)
        ]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [lr * self.gamma for lr in _lrs(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            base_lr * self.gamma ** (self.last_epoch // self.step_size)
            for base_lr in self.base_lrs
        ]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (a repeated milestone
    multiplies by ``gamma`` as many times)."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in _lrs(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        passed = bisect_right(milestones, self.last_epoch)
        return [base_lr * self.gamma**passed for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        # The construction step of a resumed scheduler must not decay once more.
        if self._is_initial:
            return _lrs(self.optimizer)
        return [lr * self.gamma for lr in _lrs(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneal the lr from ``base_lr`` to ``eta_min`` over ``T_max`` epochs along half a
    cosine, and back up over the next ``T_max`` (no restarts).

    Computed recursively from the current lr, as PyTorch's (Note [Chainable
    learning rates]): ``lr_t = eta_min + (lr_{t-1} - eta_min) * (1 + cos(pi t / T_max))
    / (1 + cos(pi (t - 1) / T_max))``, with the step leaving the minimum
    (where the ratio is 0/0) adding ``(base_lr - eta_min) * (1 - cos(pi / T_max)) / 2``.
    """

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        lrs = _lrs(self.optimizer)
        if self._is_initial:
            return lrs
        t, t_max, eta_min = self.last_epoch, self.T_max, self.eta_min
        if (t - 1 - t_max) % (2 * t_max) == 0:
            rise = (1 - math.cos(math.pi / t_max)) / 2
            return [lr + (base_lr - eta_min) * rise for lr, base_lr in zip(lrs, self.base_lrs)]
        ratio = (1 + math.cos(math.pi * t / t_max)) / (1 + math.cos(math.pi * (t - 1) / t_max))
        return [ratio * (lr - eta_min) + eta_min for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        cos = math.cos(math.pi * self.last_epoch / self.T_max)
        return [
            self.eta_min + (base_lr - self.eta_min) * (1 + cos) / 2 for base_lr in self.base_lrs
        ]


class LinearLR(LRScheduler):
    """Scale the lr by a factor going linearly from ``start_factor`` (epoch 0) to
    ``end_factor`` (epoch ``total_iters``), then constant."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or "
                "equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        lrs = _lrs(self.optimizer)
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        # factor(t) / factor(t - 1), with factor(t) = start + (end - start) * t / total_iters.
        delta = self.end_factor - self.start_factor
        ratio = 1.0 + delta / (
            self.total_iters * self.start_factor + (self.last_epoch - 1) * delta
        )
        return [lr * ratio for lr in lrs]

    def _get_closed_form_lr(self) -> list[float]:
        done = min(self.total_iters, self.last_epoch)
        delta = self.end_factor - self.start_factor
        return [
            base_lr * (self.start_factor + delta * done / self.total_iters)
            for base_lr in self.base_lrs
        ]


class SequentialLR(LRScheduler):
    """Run ``schedulers[i]`` from epoch ``milestones[i - 1]`` on; each later scheduler
    starts from its closed form at its epoch 0 (Note [Chainable learning rates]).

    The schedulers must share ``optimizer``; their construction steps are undone.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: list[LRScheduler],
        milestones: list[int],
        last_epoch: int = -1,
    ) -> None:
        name = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{name} expects at least one scheduler, but got no scheduler.")
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(
                    f"{name} at index {i} should have `optimizer` as its attribute."
                )
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(
                    f"{name} does not support `ReduceLROnPlateau` scheduler as it requires "
                    "additional kwargs to be specified when calling `step`, but got one at "
                    f"index {i} in the given schedulers sequence."
                )
            if optimizer != scheduler.optimizer:
                raise ValueError(
                    f"{name} expects all schedulers to belong to the same optimizer, but got "
                    f"scheduler {type(scheduler).__name__} at index {i} has "
                    f"{scheduler.optimizer}, which is different from "
                    f"{type(optimizer).__name__}."
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}"
            )
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in _leaf_schedulers(self):
            scheduler.last_epoch -= 1
        first = schedulers[bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        """Step the scheduler in charge of the next epoch (restarted at a milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        """Attributes except the optimizer, with each scheduler's own state_dict."""
        state = {
            k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")
        }
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes and each scheduler's state; ``state_dict`` is not changed."""
        for key, value in state_dict.items():
            if key != "_schedulers":
                self.__dict__[key] = value
        for scheduler, saved in zip(self._schedulers, state_dict["_schedulers"]):
            scheduler.load_state_dict(saved)


def _leaf_schedulers(scheduler: Any) -> Iterator[Any]:
    """The schedulers inside (nested) ``SequentialLR``s, depth first."""
    if hasattr(scheduler, "_schedulers"):
        for inner in scheduler._schedulers:
            yield from _leaf_schedulers(inner)
    elif hasattr(scheduler, "last_epoch"):
        yield scheduler


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once the metric passed to ``step(metrics)`` has not
    improved for more than ``patience`` epochs (then wait ``cooldown`` epochs).

    ``mode`` "min"/"max": the metric should fall/rise; it improves when it beats the
    best by ``threshold`` (relative in "rel" ``threshold_mode``, absolute in "abs").
    No lr goes below its ``min_lr``; a decrease smaller than ``eps`` is skipped.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: list[float] | float = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        self.default_min_lr: float | None
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}"
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _lrs(optimizer)
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics: SupportsFloat, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record ``metrics`` (a number or one-element Tensor) for the next epoch."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _lrs(self.optimizer)

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` "
                    "param groups."
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes saved by :meth:`state_dict`, re-checking the modes."""
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
