"""The public boundary: what an error looks like when it leaves a public function.

Note [Errors at the public boundary]
    Every public function of ``aiograd``, every public Tensor method and every
    ``nn.functional`` function is wrapped once by ``public`` (when the package
    is imported; the package's own modules call the bare functions, but a
    Tensor method called inside the package is the wrapped one), so that an
    error raised by aiograd's own code or by NumPy reaches the user as

    - a TypeError, ValueError or RuntimeError (NotImplementedError is one)
      and nothing else: an IndexError (PyTorch's type for a dim or an index
      out of range) leaves as ``OutOfRangeError``, both an IndexError, for
      code written against PyTorch, and a ValueError (where PyTorch asserts,
      aiograd raises ``AssertionValueError``, in the same spirit); an
      AttributeError of library code (an argument of a type it cannot use)
      leaves as a TypeError; NumPy's own exception
      types (``UFuncTypeError``, ``AxisError``, ...) leave as a plain TypeError
      or ValueError with NumPy's text as the detail;
    - with a message that names the function: ``sum(): dim must be an int,
      got ndarray``. A message that already names it is left as it is; a
      wrong-arity call names the public function, not an internal closure.

    An exception raised by user code called back from inside (a hook, a
    custom Function, a module's forward) is the user's and passes through
    untouched: only errors whose innermost frame lies in aiograd, NumPy, CuPy
    or a registered device backend are rewritten. The wrapper costs one Python
    call on the way in and nothing more when nothing fails.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar

from . import devices
from ._tensor import Tensor

__all__ = ["AssertionValueError", "OutOfRangeError", "guard_functions", "guard_methods",
           "naming", "public"]

P = ParamSpec("P")
R = TypeVar("R")

_MISSING = object()
_ARRAY_LIBRARIES = frozenset({"numpy", "cupy", "cupyx", "cupy_backends"})
_LIBRARIES = _ARRAY_LIBRARIES | {"aiograd"}
_HANDLED = (TypeError, ValueError, RuntimeError, IndexError, AttributeError)
_LEADING_NAME = re.compile(r"^\w+\(\): ")  # "abs(): ..." raised inside softsign
_ARITY = re.compile(r"^[\w.<>]+\(\) ")  # "_unary.<locals>.op() takes 1 positional argument..."


# Their errors are mostly the graph's (a node's, a hook's): see ``naming``.
RUN_A_PASS = frozenset({"backward", "backward_sync", "grad", "grad_sync"})


class OutOfRangeError(IndexError, ValueError):
    """A dim or an index out of range: an IndexError, as PyTorch raises, and a ValueError."""


class AssertionValueError(AssertionError, ValueError):
    """A bad argument PyTorch refuses with an ``assert``: an AssertionError, and a ValueError."""


def public(fn: Callable[P, R], name: str | None = None, *,
           tensor_args: tuple[tuple[str, int], ...] = ()) -> Callable[P, R]:
    """``fn`` with its errors shaped for users (Note [Errors at the public boundary]).

    ``tensor_args``: the (name, position) of the parameters that must be
    Tensors; anything else there is PyTorch's TypeError naming the function,
    the argument and its position.
    """
    label = name or fn.__name__

    @functools.wraps(fn)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        for param, i in tensor_args:
            value = args[i] if i < len(args) else kwargs.get(param, _MISSING)
            if not isinstance(value, Tensor) and value is not _MISSING:
                raise TypeError(f"{label}(): argument '{param}' (position {i + 1}) must be "
                                f"Tensor, not {type(value).__name__}")
        try:
            return fn(*args, **kwargs)
        except _HANDLED as exc:
            tb = exc.__traceback__
            if isinstance(exc, TypeError) and tb is not None and tb.tb_next is None:
                # the call itself failed: wrong arity or keywords
                _rename(exc, _named(_ARITY.sub(f"{label}() ", str(exc), count=1), label))
                raise
            if not _raised_by_us(tb):
                raise
            shaped = _shaped(exc, label)
            if shaped is exc:
                raise
            raise shaped.with_traceback(tb) from None

    return guarded


class naming:
    """``with naming("backward"):`` shapes the errors raised inside as ``public`` does, for
    a function that validates its arguments and then runs code whose errors are not its
    own (a backward pass: the graph's errors name their node)."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if isinstance(exc, _HANDLED) and _raised_by_us(tb):
            shaped = _shaped(exc, self.label)
            if shaped is not exc:
                raise shaped.with_traceback(tb) from None
        return False


def _raised_by_us(tb: TracebackType | None) -> bool:
    """Whether the innermost frame of ``tb`` is library code (aiograd's, NumPy's, CuPy's
    or a registered device backend's), not the user's."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return False
    module = last.tb_frame.f_globals.get("__name__", "")
    return (module.partition(".")[0] in _LIBRARIES
            or module in devices.backend_modules())


def _shaped(exc: Exception, label: str) -> Exception:
    """``exc`` as the user should see it: the same object with a note, or a new one."""
    if type(exc).__module__.partition(".")[0] in _ARRAY_LIBRARIES:  # UFuncTypeError, ...
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        return kind(_named(str(exc), label))
    if isinstance(exc, AttributeError):  # library code met an argument of a type it can't use
        return TypeError(f"{label}(): an argument has a type it does not take ({exc})")
    if isinstance(exc, IndexError) and not isinstance(exc, ValueError):
        exc = OutOfRangeError(*exc.args)
    notes = getattr(exc, "__notes__", ())
    if not (_names(str(exc), label) or any(_names(note, label) for note in notes)):
        exc.add_note(f"(raised by aiograd's {label}())")
    return exc


def _names(text: str, label: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(label)}\b", text) is not None


def _named(text: str, label: str) -> str:
    """``text`` naming ``label``: as it is if it does, else with ``label(): `` in front, in
    place of the name of the internal function it may start with."""
    if _names(text, label):
        return text
    return f"{label}(): {_LEADING_NAME.sub('', text, count=1)}"


def _rename(exc: BaseException, text: str) -> None:
    """Give ``exc`` the message ``text`` (its other args kept), when its str comes from args."""
    if exc.args and isinstance(exc.args[0], str) and str(exc) == exc.args[0]:
        exc.args = (text, *exc.args[1:])


def guard_methods(cls: type) -> None:
    """Wrap every public method defined in ``cls`` with ``public``, but those that run a
    backward pass (they shape their own argument errors with ``naming``)."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value) and name not in RUN_A_PASS:
            setattr(cls, name, public(value, name))


def guard_functions(namespace: dict[str, Any], names: Iterable[str]) -> None:
    """Wrap the plain functions among ``namespace[name]`` with ``public``, in place, but
    those that run a backward pass."""
    for name in names:
        if inspect.isfunction(value := namespace[name]) and name not in RUN_A_PASS:
            namespace[name] = public(value, name)
