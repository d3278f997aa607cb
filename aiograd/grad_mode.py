"""Grad mode and anomaly mode.

Both live in :mod:`contextvars`, so every asyncio task (and every Trio task)
sees its own mode: ``with no_grad():`` in one request handler does not leak
into another handler running on the same thread. The engine copies the
caller's context into each node's execution, so hooks and backward functions
see the mode of the code that called ``backward``.
"""

from __future__ import annotations

import contextvars
import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])

_grad_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiograd_grad_enabled", default=True
)
# (enabled, check_nan)
_anomaly: contextvars.ContextVar[tuple[bool, bool]] = contextvars.ContextVar(
    "aiograd_anomaly", default=(False, True)
)


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad record a graph."""
    return _grad_enabled.get()


def is_anomaly_enabled() -> bool:
    return _anomaly.get()[0]


def is_anomaly_check_nan_enabled() -> bool:
    return _anomaly.get()[1]


class _ModeContext:
    """A context manager that is also a decorator (sync and async functions).

    Entering sets the context variable; exiting resets it with the token, so
    nesting and interleaving tasks behave like PyTorch's thread-local guards.
    """

    _var: contextvars.ContextVar[Any]

    def __init__(self) -> None:
        self._tokens: list[contextvars.Token[Any]] = []

    def _value(self) -> Any:
        raise NotImplementedError

    def __enter__(self) -> None:
        self._tokens.append(self._var.set(self._value()))

    def __exit__(self, *exc: object) -> None:
        self._var.reset(self._tokens.pop())

    def clone(self) -> _ModeContext:
        return self.__class__()

    def __call__(self, fn: F) -> F:
        import inspect

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.clone():
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_ModeContext):
    """Disable graph recording inside the block or decorated function."""

    _var = _grad_enabled

    def _value(self) -> bool:
        return False


class enable_grad(_ModeContext):
    """Enable graph recording inside the block or decorated function."""

    _var = _grad_enabled

    def _value(self) -> bool:
        return True


class set_grad_enabled(_ModeContext):
    """Set grad mode to ``mode``.

    Like PyTorch's, it takes effect immediately when called as a function and
    is undone when used as a context manager and the block exits.
    """

    _var = _grad_enabled

    def __init__(self, mode: bool) -> None:
        super().__init__()
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {type(mode).__name__}")
        self.mode = mode
        self._prev = _grad_enabled.get()
        _grad_enabled.set(mode)

    def _value(self) -> bool:
        return self.mode

    def __enter__(self) -> None:
        # Already set by __init__; remember how to undo it.
        self._tokens.append(None)  # type: ignore[arg-type]

    def __exit__(self, *exc: object) -> None:
        self._tokens.pop()
        _grad_enabled.set(self._prev)

    def clone(self) -> _ModeContext:
        return _FixedGradMode(self.mode)

    def __call__(self, fn: F) -> F:
        # As a decorator it must not change the mode of the defining scope.
        _grad_enabled.set(self._prev)
        return super().__call__(fn)


_inference: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiograd_inference_mode", default=False
)


def is_inference_mode_enabled() -> bool:
    return _inference.get()


class inference_mode(_ModeContext):
    """``torch.inference_mode(mode=True)``: inside the block (or decorated function) no graph
    is recorded, as under :class:`no_grad`, and :func:`is_inference_mode_enabled` is True;
    ``mode=False`` turns both off inside (grad mode on), as PyTorch's.

    Tensors made inside are inference tensors (``is_inference()``), as PyTorch's: outside
    inference mode they may not be saved for backward, written in place or made to
    require grad (Note [Inference tensors] in ``_tensor.py``).
    """

    _var = _inference

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode expects a bool, got {type(mode).__name__}")
        self.mode = mode
        self._grad_tokens: list[contextvars.Token[bool]] = []

    def _value(self) -> bool:
        return self.mode

    def __enter__(self) -> None:
        super().__enter__()
        self._grad_tokens.append(_grad_enabled.set(not self.mode))

    def __exit__(self, *exc: object) -> None:
        _grad_enabled.reset(self._grad_tokens.pop())
        super().__exit__(*exc)

    def clone(self) -> _ModeContext:
        return inference_mode(self.mode)

    def __new__(cls, mode: Any = True) -> Any:
        # ``@inference_mode`` without parentheses: PyTorch takes the function as ``mode``
        if callable(mode):
            return cls()(mode)
        return super().__new__(cls)


class _FixedGradMode(_ModeContext):
    _var = _grad_enabled

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = mode

    def _value(self) -> bool:
        return self.mode


class detect_anomaly(_ModeContext):
    """Anomaly mode: record forward tracebacks and check gradients for NaN.

    A failing backward node gets the traceback of the forward operation that
    created it attached as a note; with ``check_nan`` a node returning NaN
    raises ``RuntimeError("Function 'X' returned nan values in its Nth output.")``.
    """

    _var = _anomaly

    def __init__(self, check_nan: bool = True) -> None:
        super().__init__()
        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and "
            "should only be enabled for debugging.", UserWarning, stacklevel=2)

    def _value(self) -> tuple[bool, bool]:
        return (True, self.check_nan)

    def clone(self) -> _ModeContext:
        return detect_anomaly(self.check_nan)


class set_detect_anomaly(_ModeContext):
    """Set anomaly mode; immediate as a call, scoped as a context manager."""

    _var = _anomaly

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        super().__init__()
        self.value = (bool(mode), check_nan)
        self._prev = _anomaly.get()
        _anomaly.set(self.value)

    def _value(self) -> tuple[bool, bool]:
        return self.value

    def __enter__(self) -> None:
        self._tokens.append(None)  # type: ignore[arg-type]

    def __exit__(self, *exc: object) -> None:
        self._tokens.pop()
        _anomaly.set(self._prev)
