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

A group's ``lr`` may be a Tensor, as in PyTorch: schedulers then compute with
Tensors, write the new value into it in place (``fill_``), and hand out copies
(``base_lrs``, ``get_last_lr()``), never the group's own Tensor.
"""

from __future__ import annotations

import contextlib
import functools
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, SupportsFloat, TypedDict

from .._tensor import Tensor
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
    "ConstantLR",
    "MultiplicativeLR",
    "PolynomialLR",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
    "CyclicLR",
    "ChainedScheduler",
]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _callable_state(fn: Any) -> dict[str, Any] | None:
    """What a state dict keeps of a schedule function, as PyTorch's: a callable object's
    attributes; nothing (None) for a plain function or lambda."""
    return None if fn is None or isinstance(fn, types.FunctionType) else fn.__dict__.copy()


def _copy(value: Any) -> Any:
    return value.clone() if isinstance(value, Tensor) else value


def _lrs(optimizer: Optimizer, key: str = "lr") -> list[Any]:
    """Each group's ``key`` (a copy if a Tensor)."""
    return [_copy(group[key]) for group in optimizer.param_groups]


def _set_lr(group: dict[str, Any], value: Any) -> None:
    """Write ``value`` into ``group["lr"]``: in place if that is a Tensor, as PyTorch."""
    lr = group["lr"]
    if isinstance(lr, Tensor):
        lr.fill_(value.squeeze() if isinstance(value, Tensor) else value)
    else:
        group["lr"] = value


def _load_attrs(scheduler: Any, state_dict: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    """Set the saved attributes but ``skip``. ``_in_step``, the name older aiograd saved
    ``_get_lr_called_within_step`` under, is dropped: it is False outside ``step``."""
    for key, value in state_dict.items():
        if key not in skip and key != "_in_step":
            scheduler.__dict__[key] = value


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

    # Invariant: True exactly while step() computes the new lrs (PyTorch's name).
    _get_lr_called_within_step: bool = False
    # Invariant: _is_initial is True exactly during the step taken at construction.
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0; load the optimizer's "
                        "state_dict first, or use last_epoch=-1 for a fresh run"
                    )
        self.base_lrs: list[Any] = _lrs(optimizer, "initial_lr")
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
        _load_attrs(self, state_dict)

    def get_last_lr(self) -> list[float]:
        """The lrs the last :meth:`step` wrote, one per parameter group."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        """The next lrs, one per group; called by :meth:`step` (use :meth:`get_last_lr`)."""
        raise NotImplementedError

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
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
        with self._in_get_lr():
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        self._write_lrs(values)

    @contextlib.contextmanager
    def _in_get_lr(self) -> Iterator[None]:
        self._get_lr_called_within_step = True
        try:
            yield
        finally:
            self._get_lr_called_within_step = False

    def _write_lrs(self, values: list[Any]) -> None:
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            _set_lr(group, lr)
        self._last_lr = _lrs(self.optimizer)


class _LRScheduler(LRScheduler):
    """Old name of :class:`LRScheduler`, kept as PyTorch keeps it."""


class _LambdaScheduler(LRScheduler):
    """A scheduler driven by ``lr_lambda``: one function, or one per group.

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
        self._check_lambdas()
        super().__init__(optimizer, last_epoch)

    def _check_lambdas(self) -> None:
        """Raise if a lambda is unfit; LambdaLR takes any, as PyTorch's."""

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [_callable_state(fn) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes and callable objects' state; ``state_dict`` is not changed."""
        _load_attrs(self, state_dict, skip=("lr_lambdas",))
        for fn, saved in zip(self.lr_lambdas, state_dict["lr_lambdas"]):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``; one function, or one per group."""

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        return [
            base_lr * fn(self.last_epoch)
            for fn, base_lr in zip(self.lr_lambdas, self.base_lrs, strict=True)
        ]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply the lr by ``lr_lambda(last_epoch)`` every epoch (after the first)."""

    def _check_lambdas(self) -> None:
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(
                    f"lr_lambda should be a function, but got {type(fn).__name__}"
                )

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self._is_initial:
            return _lrs(self.optimizer)
        return [
            group["lr"] * fn(self.last_epoch)
            for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups, strict=True)
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


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from ``base_lr`` to ``eta_min`` over ``T_i`` epochs, then a restart
    at ``base_lr``; the first cycle lasts ``T_0`` epochs, each next one ``T_mult`` times
    longer. Computed in closed form from ``T_cur`` (epochs since the restart).

    ``step(epoch)`` jumps to ``epoch`` (which may be fractional) without a warning,
    and this scheduler's ``step`` never warns about the call order, as PyTorch's.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        cos = 1 + math.cos(math.pi * self.T_cur / self.T_i)
        return [self.eta_min + (base_lr - self.eta_min) * cos / 2 for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch (restarting at the end of a cycle), or jump to ``epoch``."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i = self.T_0
            self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        with self._in_get_lr():
            values = self.get_lr()
        self._write_lrs(values)


class ConstantLR(LRScheduler):
    """Scale the lr by ``factor`` until epoch ``total_iters``, then restore it."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [lr * self.factor for lr in _lrs(self.optimizer)]
        if self.last_epoch != self.total_iters:
            return _lrs(self.optimizer)
        return [lr * (1.0 / self.factor) for lr in _lrs(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        done = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + done * (1 - self.factor)) for base_lr in self.base_lrs]


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


class PolynomialLR(LRScheduler):
    """Decay the lr to 0 over ``total_iters`` epochs: ``base_lr * (1 - t / total_iters) **
    power``, computed from the current lr (Note [Chainable learning rates])."""

    def __init__(
        self,
        optimizer: Optimizer,
        total_iters: int = 5,
        power: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        decay = (
            (1.0 - self.last_epoch / self.total_iters)
            / (1.0 - (self.last_epoch - 1) / self.total_iters)
        ) ** self.power
        return [lr * decay for lr in _lrs(self.optimizer)]

    def _get_closed_form_lr(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * left**self.power for base_lr in self.base_lrs]


class _SchedulerList(LRScheduler):
    """A scheduler made of ``_schedulers`` on one optimizer, saved with their states."""

    _schedulers: list[LRScheduler]

    def _check_schedulers(self, optimizer: Optimizer, schedulers: Any) -> None:
        name = type(self).__name__
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

    def state_dict(self) -> dict[str, Any]:
        """Attributes except the optimizer, with each scheduler's own state_dict."""
        state = {
            k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")
        }
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes and each scheduler's state; ``state_dict`` is not changed."""
        _load_attrs(self, state_dict, skip=("_schedulers",))
        for scheduler, saved in zip(self._schedulers, state_dict["_schedulers"]):
            scheduler.load_state_dict(saved)


class SequentialLR(_SchedulerList):
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
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler, but got no scheduler."
            )
        self._check_schedulers(optimizer, schedulers)
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
            _set_lr(group, group["initial_lr"])
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


class ChainedScheduler(_SchedulerList):
    """Step every scheduler of ``schedulers`` (on one optimizer) at each step, in order,
    so their changes compose (Note [Chainable learning rates])."""

    def __init__(
        self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None
    ) -> None:
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler to be chained, but "
                "got no scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        self._check_schedulers(optimizer, schedulers)
        self._schedulers = schedulers  # type: ignore[assignment]
        self.optimizer = optimizer
        self._last_lr = _lrs(optimizer)

    def step(self) -> None:  # type: ignore[override]
        """Step each scheduler in turn."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _lrs(self._schedulers[-1].optimizer)


def _leaf_schedulers(scheduler: Any) -> Iterator[Any]:
    """The schedulers inside (nested) ``SequentialLR``s and ``ChainedScheduler``s,
    depth first."""
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
        _check_optimizer(optimizer)
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
                _set_lr(group, new_lr)

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
        _load_attrs(self, state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _format_param(name: str, optimizer: Optimizer, param: Any) -> list[Any]:
    """``param`` for each group: a list of one per group, or one value for all (copies)."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(param)} values, param_groups has "
                f"{len(optimizer.param_groups)}."
            )
    else:
        param = [param] * len(optimizer.param_groups)
    return [_copy(value) for value in param]


def _init_momentum(scheduler: Any, optimizer: Optimizer, max_momentums: list[Any],
                   base_momentums: list[Any], last_epoch: int) -> None:
    """Check that ``optimizer`` has a momentum (SGD) or beta1 (Adam) to cycle; on a fresh
    start, set it to the max momentum and record ``max_momentum`` and ``base_momentum``."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(
            "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
        )
    scheduler.use_beta1 = "betas" in optimizer.defaults
    if last_epoch == -1:
        for m_momentum, b_momentum, group in zip(
            max_momentums, base_momentums, optimizer.param_groups, strict=True
        ):
            _set_momentum(scheduler, group, m_momentum)
            group["max_momentum"] = m_momentum
            group["base_momentum"] = b_momentum


def _set_momentum(scheduler: Any, group: dict[str, Any], momentum: Any) -> None:
    if scheduler.use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


class _Phase(TypedDict):
    """One phase of OneCycleLR: it ends at ``end_step``; the other four name group keys."""

    end_step: float
    start_lr: str
    end_lr: str
    start_momentum: str
    end_momentum: str


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the lr rises from ``max_lr / div_factor`` to ``max_lr`` over
    the first ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then
    anneals (``"cos"`` or ``"linear"``) to ``initial_lr / final_div_factor``; the momentum
    (SGD's, or Adam's beta1) cycles the other way between ``max_momentum`` and
    ``base_momentum``. ``three_phase`` comes back to the initial lr before the final decay.
    Step it once per batch; a step past ``total_steps`` raises ValueError.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")

        # Each phase: (end_step, start_lr, end_lr, start_momentum, end_momentum), the
        # last four naming group keys.
        up = float(pct_start * self.total_steps) - 1
        self._schedule_phases: list[_Phase] = [
            {"end_step": up, "start_lr": "initial_lr", "end_lr": "max_lr",
             "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
        ]
        if three_phase:
            self._schedule_phases += [
                {"end_step": float(2 * pct_start * self.total_steps) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum",
                 "end_momentum": "max_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "initial_lr",
                 "end_lr": "min_lr", "start_momentum": "max_momentum",
                 "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases.append(
                {"end_step": self.total_steps - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"}
            )
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(
                "anneal_strategy must be one of 'cos' or 'linear', instead got "
                f"{anneal_strategy}"
            )
        self._anneal_func_type = anneal_strategy

        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for max_lr_i, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = max_lr_i / div_factor
                group["max_lr"] = max_lr_i
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _init_momentum(self, optimizer, _format_param("max_momentum", optimizer, max_momentum),
                           _format_param("base_momentum", optimizer, base_momentum), last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start: Any, end: Any, pct: float) -> Any:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal_func(group[phase["start_lr"]],
                                                 group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        _set_momentum(self, group, self._anneal_func(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start_step = phase["end_step"]
        return lrs


class CyclicLR(LRScheduler):
    """The lr cycles between ``base_lr`` and ``max_lr`` (up over ``step_size_up`` steps,
    down over ``step_size_down``, default the same), the amplitude scaled by ``mode``
    (``"triangular"``: constant; ``"triangular2"``: halved each cycle; ``"exp_range"``:
    ``gamma ** step``) or by ``scale_fn`` of the cycle or step (``scale_mode``). The
    momentum (SGD's, or Adam's beta1) cycles the other way. Step it once per batch.

    :meth:`state_dict` saves the ``__dict__`` of a callable-object ``scale_fn``, not a
    plain function or lambda, as PyTorch's.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float = 0.8,
        max_momentum: float = 0.9,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                _set_lr(group, lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ["triangular", "triangular2", "exp_range"] and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            _init_momentum(self, optimizer, self.max_momentums, self.base_momentums,
                           last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref: Callable[[float], float] = _triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = functools.partial(_exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle or step ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        x_scale = cycle if self.scale_mode == "cycle" else self.last_epoch
        # scale_fn is called once per value, as PyTorch's (a callable object may count).
        lrs = [
            base_lr + (max_lr - base_lr) * scale_factor * self.scale_fn(x_scale)
            for base_lr, max_lr in zip(self.base_lrs, self.max_lrs, strict=True)
        ]
        if self.cycle_momentum:
            momentums = [
                max_m - (max_m - base_m) * scale_factor * self.scale_fn(x_scale)
                for base_m, max_m in zip(self.base_momentums, self.max_momentums, strict=True)
            ]
            for group, momentum in zip(self.optimizer.param_groups, momentums, strict=True):
                _set_momentum(self, group, momentum)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """As :meth:`LRScheduler.state_dict`, without the built-in scale function."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = _callable_state(fn)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore attributes and a callable-object ``scale_fn``'s state."""
        _load_attrs(self, state_dict, skip=("_scale_fn_custom",))
        saved = state_dict["_scale_fn_custom"]
        if saved is not None:
            self._scale_fn_custom.__dict__.update(saved)
        self._init_scale_fn()


def _triangular_scale_fn(x: float) -> float:
    return 1.0


def _triangular2_scale_fn(x: float) -> float:
    halvings: float = 2.0 ** (x - 1)
    return 1 / halvings


def _exp_range_scale_fn(gamma: float, x: float) -> float:
    scale: float = gamma**x
    return scale
