"""Random number generators: ``aiograd.Generator`` and the default one ``manual_seed`` seeds.

Every random op (``rand``, ``randn``, ``randint``, ``*_like``, dropout,
``nn.init``, the data loader's shuffling) draws on the host from a
``Generator``: the one passed as ``generator=``, or ``default_generator``.
Draws then move to the tensor's device.

Note [Generators across tasks and threads]
    ``default_generator`` is one per process, shared by every task and
    thread, as PyTorch's CPU default generator is. Each draw takes the
    generator's lock, so concurrent draws never corrupt its state, but
    *which* numbers a task gets depends on how its draws interleave with
    other tasks' draws. For results that repeat under concurrency, give each
    task (each request, each model) its own ``aiograd.Generator(seed)`` and
    pass it as ``generator=``. ``manual_seed`` reseeds the default generator
    in place, so code holding ``aiograd.default_generator`` sees it.

A Generator wraps NumPy's PCG64; seeding it gives a reproducible stream,
but not PyTorch's numbers (PyTorch uses a Mersenne Twister and its own
transformations).
"""

from __future__ import annotations

import json
import numbers
import secrets
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state"]

T = TypeVar("T")

_SEED_MIN = -0x8000_0000_0000_0000
_SEED_MAX = 0xFFFF_FFFF_FFFF_FFFF


def _check_seed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"manual_seed(): seed must be an int, not {type(value).__name__}")
    seed = int(value)
    if not _SEED_MIN <= seed <= _SEED_MAX:
        raise ValueError(
            f"Overflow when unpacking long long: seed must be within [{_SEED_MIN}, "
            f"{_SEED_MAX}], got {seed}")
    return seed % (1 << 64)  # negative seeds wrap, as PyTorch's


class Generator:
    """A seeded stream of random numbers (PyTorch's ``torch.Generator`` API).

    ``Generator()`` starts from a nondeterministic seed; ``manual_seed(s)``
    restarts it from ``s``. ``get_state``/``set_state`` save and restore the
    stream as a uint8 tensor. Thread-safe: see Note [Generators across tasks
    and threads].
    """

    __slots__ = ("_lock", "_seed", "_numpy", "device")

    def __init__(self, device: Any = "cpu") -> None:
        from .devices import device as as_device

        self.device = as_device(device)
        self._lock = threading.Lock()
        self._seed = 0
        self._numpy = numpy.random.Generator(numpy.random.PCG64(0))
        self.seed()

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream from ``seed``; returns this generator."""
        value = _check_seed(seed)
        with self._lock:
            self._seed = value
            self._numpy = numpy.random.Generator(numpy.random.PCG64(value))
        return self

    def seed(self) -> int:
        """Restart the stream from a nondeterministic seed, and return that seed."""
        value = secrets.randbits(63)
        self.manual_seed(value)
        return value

    def initial_seed(self) -> int:
        """The seed the stream last started from."""
        return self._seed

    def get_state(self) -> Any:
        """The stream's state as a uint8 Tensor (for ``set_state``)."""
        from ._tensor import Tensor

        with self._lock:
            state = {"seed": self._seed, "bit_generator": self._numpy.bit_generator.state}
        raw = json.dumps(state, sort_keys=True).encode()
        return Tensor._wrap(numpy.frombuffer(raw, dtype=numpy.uint8).copy())

    def set_state(self, new_state: Any) -> Generator:
        """Restore a state ``get_state`` returned; returns this generator."""
        from ._tensor import Tensor

        if not isinstance(new_state, Tensor) or new_state.dtype != numpy.uint8:
            raise TypeError("set_state(): expected a uint8 Tensor from get_state(), got "
                            f"{type(new_state).__name__}")
        try:
            state = json.loads(new_state.numpy().tobytes())
            bit_generator = numpy.random.PCG64()
            bit_generator.state = state["bit_generator"]
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError("set_state(): not a state of an aiograd Generator") from exc
        with self._lock:
            self._seed = int(state["seed"])
            self._numpy = numpy.random.Generator(bit_generator)
        return self

    def draw(self, sample: Callable[[numpy.random.Generator], T]) -> T:
        """``sample(numpy_generator)`` under this generator's lock."""
        with self._lock:
            return sample(self._numpy)

    def __repr__(self) -> str:
        return f"<aiograd.Generator object at {id(self):#x}>"


default_generator = Generator()


def draw(generator: Any, sample: Callable[[numpy.random.Generator], T], fn: str) -> T:
    """``sample`` on ``generator``: an aiograd Generator, a ``numpy.random.Generator``
    (used as it is), or None (``default_generator``); ``fn`` names the caller in errors."""
    if generator is None:
        return default_generator.draw(sample)
    if isinstance(generator, Generator):
        return generator.draw(sample)
    if isinstance(generator, numpy.random.Generator):
        return sample(generator)
    raise TypeError(f"{fn}(): argument 'generator' must be an aiograd.Generator, not "
                    f"{type(generator).__name__}")


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (process-wide); returns it, as PyTorch's."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator nondeterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator last started from."""
    return default_generator.initial_seed()


def get_rng_state() -> Any:
    """The default generator's state (a uint8 Tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state: Any) -> None:
    """Restore the default generator's state from ``get_rng_state()``."""
    from ._tensor import Tensor

    if not isinstance(new_state, Tensor):
        raise TypeError("set_rng_state(): expected a uint8 Tensor from get_rng_state(), got "
                        f"{type(new_state).__name__}")
    default_generator.set_state(new_state)
