"""Devices and device backends.

A backend supplies what the engine needs of a kind of device: the array
module, how many devices there are, which device an array lives on, copies to
and from the host, and streams and events. ``cpu`` (NumPy) and ``cuda`` (CuPy,
imported only when first used) are built in; :func:`register_backend` adds
others, the way PyTorch's PrivateUse1 does. The test suite registers a
NumPy-backed backend with several logical devices and recorded streams to run
multi-device scheduling on a machine without a GPU.

Streams follow Note [Streaming backwards] (seed ``engine.cpp``): a backend
without streams returns ``None`` from :meth:`DeviceBackend.current_stream`
and the engine then skips every stream step.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy

__all__ = [
    "Device",
    "DeviceBackend",
    "CPUBackend",
    "CUDABackend",
    "device",
    "device_of_array",
    "register_backend",
    "unregister_backend",
    "get_backend",
    "backends",
]


class DeviceBackend:
    """The interface of a device backend. Subclass it and register an instance.

    Methods that take ``index`` get the device index within this backend.
    Every method may be called from any thread (device workers, the event
    loop, user threads); implementations keep their own state thread-safe.
    """

    #: the device type string, e.g. ``"cuda"``
    name: str = ""
    #: the array module (``numpy``, ``cupy``, ...)
    xp: Any = numpy
    #: whether this backend has streams (the engine skips stream work if not)
    has_streams: bool = False
    #: the exact type of this backend's arrays, if every array of that type is one
    #: of its arrays (then ``owns`` is True for it); None if there is no such type
    #: (yet). :func:`device_of_array` finds the backend of such an array with one dict
    #: lookup (Note [Device fast paths] in ``engine/evaluate.py``).
    array_type: type | None = None

    def device_count(self) -> int:
        raise NotImplementedError

    def is_initialized(self) -> bool:
        """False while the backend has not been used (the engine then skips it)."""
        return True

    def owns(self, array: Any) -> bool:
        """True if ``array`` is an array of this backend."""
        raise NotImplementedError

    def device_index(self, array: Any) -> int:
        """The index of the device ``array`` lives on."""
        raise NotImplementedError

    def from_host(self, array: numpy.ndarray, index: int) -> Any:
        """Copy a NumPy array onto device ``index``."""
        raise NotImplementedError

    def to_host(self, array: Any) -> numpy.ndarray:
        """Copy an array of this backend into a NumPy array."""
        raise NotImplementedError

    def copy_to(self, array: Any, index: int) -> Any:
        """Copy an array of this backend onto device ``index`` of this backend."""
        return self.from_host(self.to_host(array), index)

    @contextlib.contextmanager
    def device_guard(self, index: int) -> Iterator[None]:
        """Make ``index`` the current device of this thread inside the block."""
        yield

    # ---- streams and events (only called when has_streams) ----

    def current_stream(self, index: int) -> Any:
        """The stream current on device ``index`` for the calling thread."""
        return None

    def default_stream(self, index: int) -> Any:
        """The default stream of device ``index`` (seed: ``getDefaultStream``).

        Used when a gradient is produced or consumed off its own device; see
        Note [Streaming backwards] in ``engine/input_buffer.py``.
        """
        return None

    @contextlib.contextmanager
    def stream_guard(self, stream: Any) -> Iterator[None]:
        """Make ``stream`` current on its device inside the block."""
        yield

    def record_event(self, stream: Any) -> Any:
        """Record an event on ``stream`` and return it.

        Called with the stream's device current (the engine enters
        :meth:`device_guard` first), as CUDA requires.
        """
        raise NotImplementedError

    def wait_event(self, stream: Any, event: Any) -> None:
        """Make ``stream`` wait for ``event`` (no host blocking)."""
        raise NotImplementedError

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        """Make stream ``waiter`` wait for all work queued so far on ``producer``."""
        self.wait_event(waiter, self.record_event(producer))


class CPUBackend(DeviceBackend):
    """NumPy arrays on the host. There is one CPU device and no streams."""

    name = "cpu"
    xp = numpy

    def device_count(self) -> int:
        return 1

    def owns(self, array: Any) -> bool:
        return isinstance(array, (numpy.ndarray, numpy.generic))

    def device_index(self, array: Any) -> int:
        return 0

    def from_host(self, array: numpy.ndarray, index: int) -> Any:
        return array

    def to_host(self, array: Any) -> numpy.ndarray:
        return numpy.asarray(array)


class CUDABackend(DeviceBackend):
    """CuPy arrays on CUDA devices, with CuPy's streams and events.

    CuPy is imported on first use, so ``import aiograd`` works without it.
    """

    name = "cuda"
    has_streams = True

    def __init__(self) -> None:
        self._cupy: Any = None

    @property
    def xp(self) -> Any:
        if self._cupy is None:
            try:
                import cupy
            except ImportError as exc:
                raise RuntimeError(
                    "CUDA tensors need CuPy: install aiograd with the [cuda] extra "
                    "(pip install 'aiograd[cuda]')"
                ) from exc
            self._cupy = cupy
        return self._cupy

    def device_count(self) -> int:
        try:
            return int(self.xp.cuda.runtime.getDeviceCount())
        except Exception:
            return 0

    def is_initialized(self) -> bool:
        return self._cupy is not None

    @property
    def array_type(self) -> type | None:  # type: ignore[override]
        return None if self._cupy is None else self._cupy.ndarray

    def owns(self, array: Any) -> bool:
        return self._cupy is not None and isinstance(array, self._cupy.ndarray)

    def device_index(self, array: Any) -> int:
        return int(array.device.id)

    def from_host(self, array: numpy.ndarray, index: int) -> Any:
        with self.xp.cuda.Device(index):
            return self.xp.asarray(array)

    def to_host(self, array: Any) -> numpy.ndarray:
        host: numpy.ndarray = self.xp.asnumpy(array)
        return host

    def copy_to(self, array: Any, index: int) -> Any:
        # ndarray.copy() copies into the *current* device, from any device.
        with self.xp.cuda.Device(index):
            return array.copy()

    @contextlib.contextmanager
    def device_guard(self, index: int) -> Iterator[None]:
        with self.xp.cuda.Device(index):
            yield

    def current_stream(self, index: int) -> Any:
        return self.xp.cuda.get_current_stream(index)

    def default_stream(self, index: int) -> Any:
        # The legacy default stream; its handle is the same on every device,
        # so callers always pair it with a Device.
        return self.xp.cuda.Stream.null

    @contextlib.contextmanager
    def stream_guard(self, stream: Any) -> Iterator[None]:
        # CuPy refuses to make a stream current while another device is
        # current; the null stream (device_id -1) belongs to the current one.
        index = getattr(stream, "device_id", -1)
        if index >= 0:
            with self.xp.cuda.Device(index), stream:
                yield
        else:
            with stream:
                yield

    def record_event(self, stream: Any) -> Any:
        # The event is created on the current device and must match the stream's.
        index = getattr(stream, "device_id", -1)
        if index >= 0:
            with self.xp.cuda.Device(index):
                return stream.record()
        return stream.record()

    def wait_event(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)


class Device:
    """A device: a backend name and an index (``cpu``, ``cuda:0``, ``fake:1``).

    Devices are interned: ``device("cuda:0") is device("cuda", 0)``, so the
    engine compares them with ``is``.
    """

    __slots__ = ("type", "index", "backend", "_str")

    type: str
    index: int
    backend: DeviceBackend
    _str: str

    def __new__(cls, type: str, index: int | None = None) -> Device:  # noqa: A002
        return device(type, index)

    @property
    def xp(self) -> Any:
        return self.backend.xp

    def __repr__(self) -> str:
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self._str

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, RuntimeError):
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self) -> tuple[Any, ...]:
        return (device, (self.type, self.index))


_lock = threading.Lock()
# Invariant (under _lock for writers): _devices[(t, i)].backend is _backends[t].
_backends: dict[str, DeviceBackend] = {}
_devices: dict[tuple[str, int], Device] = {}
# The backend of arrays of exactly a type (its ``array_type``): filled by
# device_of_array, under _lock, with registered backends only; cleared whenever
# the registry changes. Read without the lock (one dict lookup).
_by_type: dict[type, DeviceBackend] = {}
# Devices of unregistered backends, kept by name with their backend, so that
# registering the same backend object again gives back the same (interned)
# Device objects, and with them the engine's workers for those devices.
_retired: dict[str, tuple[DeviceBackend, dict[tuple[str, int], Device]]] = {}


def register_backend(backend: DeviceBackend) -> None:
    """Register a device backend under ``backend.name``.

    Tensors on its devices can then be created with ``device="NAME:i"``; the
    engine starts one worker per device of the backend on first use.
    Registering again the backend object that :func:`unregister_backend`
    removed restores its devices as they were (``device("NAME:0")`` is the
    same object as before); another object under that name starts afresh.
    """
    if not isinstance(backend, DeviceBackend):
        raise TypeError(f"expected a DeviceBackend, got {type(backend).__name__}")
    name = backend.name
    if not name or not name.isidentifier():
        raise ValueError(f"a backend needs a name that is an identifier, got {name!r}")
    with _lock:
        if name in _backends and name in ("cpu", "cuda"):
            raise ValueError(f"the built-in backend {name!r} cannot be replaced")
        _backends[name] = backend
        _by_type.clear()
        for key in [k for k in _devices if k[0] == name]:
            del _devices[key]
        retired = _retired.pop(name, None)
        if retired is not None and retired[0] is backend:
            _devices.update(retired[1])


def backend_modules() -> frozenset[str]:
    """The modules defining the registered backends' classes (their code is library code,
    not the user's, to ``aiograd._boundary``)."""
    return frozenset(type(b).__module__ for b in list(_backends.values()))


def unregister_backend(name: str) -> None:
    """Remove a registered backend (for tests). Built-in backends stay.

    Its devices stop resolving (``device("NAME:0")`` raises) until the same
    backend object is registered again.
    """
    if name in ("cpu", "cuda"):
        raise ValueError(f"the built-in backend {name!r} cannot be removed")
    with _lock:
        backend = _backends.pop(name, None)
        _by_type.clear()
        found = {k: d for k, d in _devices.items() if k[0] == name}
        for key in found:
            del _devices[key]
        if backend is not None:
            _retired[name] = (backend, found)


def get_backend(name: str) -> DeviceBackend:
    try:
        return _backends[name]
    except KeyError:
        known = ", ".join(sorted(_backends))
        raise RuntimeError(
            f"unknown device type {name!r}; known types: {known} "
            "(register others with aiograd.devices.register_backend)"
        ) from None


def backends() -> dict[str, DeviceBackend]:
    """The registered backends by name (a copy)."""
    return dict(_backends)


def device(spec: str | Device | None = None, index: int | None = None) -> Device:
    """Return the interned :class:`Device` for ``"cpu"``, ``"cuda:1"``, ``("cuda", 1)``."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        spec = "cpu"
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string or a Device, got {type(spec).__name__}")
    kind = spec
    if ":" in spec:
        kind, _, idx = spec.partition(":")
        if index is not None:
            raise ValueError(f"device {spec!r} already has an index; got index={index} too")
        try:
            index = int(idx)
        except ValueError:
            raise ValueError(f"invalid device string {spec!r}: expected 'type:index'") from None
    if index is None:
        index = 0
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError(f"device index must be a non-negative int, got {index!r}")
    key = (kind, index)
    found = _devices.get(key)
    if found is not None:
        return found
    get_backend(kind)  # raises the "unknown device type" error
    if kind == "cpu" and index != 0:
        raise ValueError(f"there is one CPU device, cpu:0; got cpu:{index}")
    with _lock:
        found = _devices.get(key)
        if found is None:
            backend = get_backend(kind)  # again under the lock: see the invariant at _backends
            found = object.__new__(Device)
            found.type = kind
            found.index = index
            found.backend = backend
            found._str = kind if kind == "cpu" else f"{kind}:{index}"
            _devices[key] = found
    return found


def device_of_array(array: Any) -> Device:
    """The device of an array of any registered backend.

    An array of exactly a backend's ``array_type`` is found by its type alone
    (``_by_type``); any other goes through every backend's ``owns``.
    """
    kind = type(array)
    if kind is numpy.ndarray:
        return CPU
    backend = _by_type.get(kind)
    if backend is not None:
        index = backend.device_index(array)
        found = _devices.get((backend.name, index))
        return found if found is not None else device(backend.name, index)
    for name, backend in list(_backends.items()):
        if name != "cpu" and backend.owns(array):
            if backend.array_type is kind:
                _remember_type(kind, backend)
            return device(name, backend.device_index(array))
    if isinstance(array, (numpy.ndarray, numpy.generic)):
        return CPU
    raise TypeError(f"not an array of any registered device backend: {type(array).__name__}")


def _remember_type(kind: type, backend: DeviceBackend) -> None:
    """Map ``kind`` to ``backend`` in ``_by_type``, if it is still registered."""
    with _lock:
        if _backends.get(backend.name) is backend:
            _by_type[kind] = backend


_backends["cpu"] = CPUBackend()
_backends["cuda"] = CUDABackend()
CPU = device("cpu")
