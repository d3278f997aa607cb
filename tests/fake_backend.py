"""A device backend for tests: NumPy arrays on N logical devices, recorded streams.

Registered through the public API (``aiograd.devices.register_backend``), it
lets the suite run multi-device scheduling, cross-device gradients and
stream synchronisation on a machine without a GPU. It behaves like CUDA
where that matters to the engine:

- arrays are :class:`FakeArray`, an ``ndarray`` subclass that knows its
  device; NumPy math on them returns FakeArrays on the same device, and
  mixing two devices (or a device and a host array) in one operation raises,
  as CuPy does;
- ``xp`` creates new arrays on the calling thread's current device
  (:meth:`FakeBackend.device_guard`, default 0), as ``cupy.zeros`` does;
- each device has a default stream; :meth:`FakeBackend.new_stream` makes
  more. The current stream is per thread and per device
  (:meth:`FakeBackend.stream_guard`). ``record_event``/``wait_event`` do
  nothing but append to :attr:`FakeBackend.log`, with the calling thread's
  name, so a test can assert their order. ``record_event`` requires the
  stream's device to be current, as CUDA does.

One FakeBackend may be registered at a time under a name (FakeArrays do
not record which backend made them).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy

import aiograd
from aiograd.devices import DeviceBackend

__all__ = ["FakeArray", "FakeBackend", "FakeEvent", "FakeStream", "HostSyncs", "LogEntry",
           "ProbeCall", "host_syncs", "probe"]


# ---- arrays ----


class FakeArray(numpy.ndarray):
    """A NumPy array that lives on fake device ``fake_index``."""

    fake_index: int | None

    def __array_finalize__(self, obj: Any) -> None:
        # Views, slices, astype and copies keep the device of their source.
        self.fake_index = getattr(obj, "fake_index", None)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: Any = None,
                        **kwargs: Any) -> Any:
        checked = inputs if method != "at" else inputs[:1] + inputs[2:]  # at's indices
        index = _common_index(ufunc.__name__, checked + (out or ()))
        args = tuple(_host_view(x) for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(_host_view(o) for o in out)
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        if isinstance(result, tuple):
            return tuple(_on_device(r, index) for r in result)
        return _on_device(result, index)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        index = _common_index(func.__name__, _flatten(args) + _flatten(tuple(kwargs.values())))
        # NumPy's own implementation may mix in host temporaries: only the
        # caller's operands are checked (see _nested).
        _nested.depth += 1
        try:
            result = super().__array_function__(func, types, args, kwargs)
        finally:
            _nested.depth -= 1
        if isinstance(result, (tuple, list)):
            return type(result)(_on_device(r, index) for r in result)
        return _on_device(result, index)

    def __repr__(self) -> str:
        return f"FakeArray({numpy.asarray(self)!r}, fake_index={self.fake_index})"

    # Host synchronisations: what CuPy does with a device-to-host copy. See HostSyncs.

    def __bool__(self) -> bool:
        host_syncs.record(self, "bool")
        return bool(_host_view(self))

    def __int__(self) -> int:
        host_syncs.record(self, "int")
        return int(_host_view(self))

    def __float__(self) -> float:
        host_syncs.record(self, "float")
        return float(_host_view(self))

    def __index__(self) -> int:
        host_syncs.record(self, "index")
        return _host_view(self).__index__()

    def item(self, *args: Any) -> Any:
        host_syncs.record(self, "item")
        return _host_view(self).item(*args)

    def tolist(self) -> Any:
        host_syncs.record(self, "tolist")
        return _host_view(self).tolist()

    def get(self) -> numpy.ndarray:
        """CuPy's device-to-host copy."""
        host_syncs.record(self, "get")
        return numpy.array(_host_view(self), copy=True)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild, (numpy.asarray(self).copy(), self.fake_index))


class HostSyncs:
    """Counts the host synchronisations a CUDA array would cost: ``bool() int() float()
    operator.index() .item() .tolist() .get()`` of a device array, ``to_host`` and
    ``synchronize`` (issue 22: built-in ops must do none in forward or backward).
    Calls NumPy makes inside an array function (``_nested.depth > 0``) are its own
    host-side work and are not counted. ``events`` lists (kind, shape) per sync."""

    def __init__(self) -> None:
        # Invariant: appended to only under _lock (a worker and the loop both compute).
        self._lock = threading.Lock()
        self.events: list[tuple[str, tuple[int, ...]]] = []

    def record(self, array: Any, kind: str) -> None:
        if getattr(array, "fake_index", None) is None or _nested.depth:
            return
        self.add(kind, tuple(numpy.shape(array)))

    def add(self, kind: str, shape: tuple[int, ...] = ()) -> None:
        with self._lock:
            self.events.append((kind, shape))

    def count(self) -> int:
        return len(self.events)

    def clear(self) -> None:
        with self._lock:
            self.events.clear()


host_syncs = HostSyncs()


def _rebuild(host: numpy.ndarray, index: int) -> FakeArray:
    return _place(host, index)


def _place(host: Any, index: int) -> FakeArray:
    """A FakeArray view of ``host`` on device ``index`` (no copy)."""
    arr = numpy.asarray(host).view(FakeArray)
    arr.fake_index = index
    return arr


def _host_view(x: Any) -> Any:
    return x.view(numpy.ndarray) if isinstance(x, FakeArray) else x


class _Nesting(threading.local):
    depth = 0


# Calls made by NumPy inside an array function of a FakeArray (depth > 0).
_nested = _Nesting()


def _on_device(result: Any, index: int | None) -> Any:
    if index is None:
        return result
    if isinstance(result, FakeArray):
        if result.fake_index is None:
            result.fake_index = index
        return result
    if isinstance(result, (numpy.ndarray, numpy.generic)):
        # Results stay on the device, reductions included (0-d, as in CuPy).
        return _place(result, index)
    return result


def _flatten(values: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flatten(tuple(v)))
        else:
            out.append(v)
    return tuple(out)


def _common_index(what: str, values: tuple[Any, ...]) -> int | None:
    """The one device of the FakeArrays in ``values``; raise if they disagree.

    Host arrays (other than 0-d) among them raise too, unless NumPy itself is
    the caller (inside an array function).
    """
    index = None
    for v in values:
        if isinstance(v, FakeArray):
            if v.fake_index is None:
                continue
            if index is not None and v.fake_index != index:
                raise RuntimeError(
                    f"{what}: arrays on different fake devices ({index} and {v.fake_index}); "
                    "copy one with .to() first"
                )
            index = v.fake_index
        elif isinstance(v, numpy.ndarray) and v.ndim > 0 and not _nested.depth:
            raise TypeError(
                f"{what}: a fake-device array mixed with a host NumPy array of shape "
                f"{v.shape}; move it with from_host/.to() first"
            )
    return index


class _ArrayModule:
    """``numpy`` for one backend: functions that make new arrays put them on the
    current device of the calling thread; others pass through unchanged."""

    def __init__(self, backend: FakeBackend) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        attr = getattr(numpy, name)
        if isinstance(attr, (type, numpy.ufunc)) or not callable(attr):
            return attr
        backend = self._backend

        def on_current_device(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if type(result) is numpy.ndarray:
                return _place(result, backend.current_device())
            return result

        on_current_device.__name__ = name
        return on_current_device


# ---- streams and the log ----


@dataclass(frozen=True, eq=False)
class FakeStream:
    """A stream of fake device ``index``; ``number`` 0 is the default stream."""

    index: int
    number: int
    label: str

    def __repr__(self) -> str:
        return f"<FakeStream {self.label}>"


@dataclass(frozen=True, eq=False)
class FakeEvent:
    """An event recorded on ``stream``."""

    number: int
    stream: FakeStream

    def __repr__(self) -> str:
        return f"<FakeEvent {self.number} on {self.stream.label}>"


@dataclass(frozen=True)
class LogEntry:
    """One entry of :attr:`FakeBackend.log`.

    ``kind`` is ``"record"`` (``event`` recorded on ``stream``), ``"wait"``
    (``stream`` waits for ``event``) or ``"note"`` (a test's marker ``text``).
    ``thread`` is the name of the thread that made the call.
    """

    kind: str
    stream: FakeStream | None
    event: FakeEvent | None
    thread: str
    text: str = ""


class _ThreadState(threading.local):
    def __init__(self) -> None:
        #: device index -> stack of streams made current by stream_guard
        self.streams: dict[int, list[FakeStream]] = {}
        #: stack of device indices made current by device_guard
        self.devices: list[int] = []


class FakeBackend(DeviceBackend):
    """``count`` logical devices named ``name:0`` ... backed by host memory."""

    has_streams = True
    array_type = FakeArray

    def __init__(self, count: int = 3, name: str = "fake") -> None:
        self.name = name
        self.count = count
        self.xp = _ArrayModule(self)
        # Current devices and streams are per thread, like CUDA's; each thread
        # only ever touches its own _ThreadState.
        self._state = _ThreadState()
        self._lock = threading.Lock()
        # next() on an itertools.count is atomic in CPython (one C call under the GIL).
        self._numbers = itertools.count(1)
        # Invariant: appended to only under _lock (workers and the loop both log).
        self.log: list[LogEntry] = []
        self._defaults = [FakeStream(i, 0, f"{name}:{i}/default") for i in range(count)]

    # ---- devices and arrays ----

    def device_count(self) -> int:
        return self.count

    def owns(self, array: Any) -> bool:
        return isinstance(array, FakeArray)

    def device_index(self, array: Any) -> int:
        return int(array.fake_index)

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.count:
            raise RuntimeError(
                f"invalid device ordinal {index}: {self.name} has {self.count} devices"
            )

    def from_host(self, array: numpy.ndarray, index: int) -> FakeArray:
        self._check_index(index)
        return _place(numpy.array(array, copy=True), index)

    def to_host(self, array: Any) -> numpy.ndarray:
        host_syncs.record(array, "to_host")
        return numpy.array(_host_view(array), copy=True)

    def synchronize(self, index: int) -> None:
        """Wait for device ``index`` (a no-op here, counted as a host sync)."""
        self._check_index(index)
        host_syncs.add("synchronize")

    def copy_to(self, array: Any, index: int) -> FakeArray:
        self._check_index(index)
        return _place(numpy.array(_host_view(array), copy=True), index)

    @contextlib.contextmanager
    def device_guard(self, index: int) -> Iterator[None]:
        self._check_index(index)
        stack = self._state.devices
        stack.append(index)
        try:
            yield
        finally:
            stack.pop()

    def current_device(self) -> int:
        """The calling thread's current device (0 outside every ``device_guard``)."""
        stack = self._state.devices
        return stack[-1] if stack else 0

    # ---- streams and events ----

    def new_stream(self, index: int, label: str | None = None) -> FakeStream:
        """A new (side) stream on device ``index``."""
        self._check_index(index)
        number = next(self._numbers)
        return FakeStream(index, number, label or f"{self.name}:{index}/s{number}")

    def default_stream(self, index: int) -> FakeStream:
        return self._defaults[index]

    def current_stream(self, index: int) -> FakeStream:
        stack = self._state.streams.get(index)
        return stack[-1] if stack else self._defaults[index]

    @contextlib.contextmanager
    def stream_guard(self, stream: Any) -> Iterator[None]:
        """Make ``stream`` current on its device, and its device current (as
        PyTorch's StreamGuard and aiograd's CUDA backend do)."""
        if not isinstance(stream, FakeStream):
            raise TypeError(f"not a stream of the {self.name} backend: {stream!r}")
        stack = self._state.streams.setdefault(stream.index, [])
        stack.append(stream)
        try:
            with self.device_guard(stream.index):
                yield
        finally:
            stack.pop()

    def record_event(self, stream: Any) -> FakeEvent:
        if stream.index != self.current_device():
            raise RuntimeError(
                f"record_event on {stream!r} while {self.name}:{self.current_device()} is "
                "current (CUDA requires the stream's device to be current)"
            )
        event = FakeEvent(next(self._numbers), stream)
        self._append(LogEntry("record", stream, event, threading.current_thread().name))
        return event

    def wait_event(self, stream: Any, event: Any) -> None:
        self._append(LogEntry("wait", stream, event, threading.current_thread().name))

    # ---- the log, for tests ----

    def note(self, text: str) -> None:
        """Append a marker to the log (e.g. "node X ran") to order it among stream calls."""
        self._append(LogEntry("note", None, None, threading.current_thread().name, text))

    def _append(self, entry: LogEntry) -> None:
        with self._lock:
            self.log.append(entry)

    def entries(self) -> list[LogEntry]:
        """A snapshot of the log."""
        with self._lock:
            return list(self.log)

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    def waits(self) -> list[tuple[FakeStream, FakeStream]]:
        """``(waiter, producer)`` for every wait in the log, in order."""
        return [(e.stream, e.event.stream) for e in self.entries()  # type: ignore[union-attr,misc]
                if e.kind == "wait"]

    def position(self, kind: str, **match: Any) -> int:
        """The index in the log of the first entry of ``kind`` matching ``match``; -1 if none.

        ``waiter=``/``producer=`` match a wait's streams, ``stream=`` a record's,
        ``text=`` a note's.
        """
        for i, e in enumerate(self.entries()):
            if e.kind != kind:
                continue
            if "waiter" in match and e.stream is not match["waiter"]:
                continue
            if "producer" in match and (e.event is None or e.event.stream is not match["producer"]):
                continue
            if "stream" in match and e.stream is not match["stream"]:
                continue
            if "text" in match and e.text != match["text"]:
                continue
            return i
        return -1


# ---- probes: identity ops that record where their backward ran ----


@dataclass(frozen=True)
class ProbeCall:
    """One run of a probe's backward: its label, thread, device and current stream."""

    label: str
    thread: str
    device: str
    stream: Any


class _Probe(aiograd.Function):
    @staticmethod
    def forward(ctx: Any, t: Any, label: str, calls: list[ProbeCall], after: Any) -> Any:
        ctx.label = label
        ctx.calls = calls
        ctx.after = after
        return t * 1.0

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        dev = grad.device
        stream = None
        if dev.backend.has_streams:
            stream = dev.backend.current_stream(dev.index)
        note = getattr(dev.backend, "note", None)
        if note is not None:
            note(f"{ctx.label} ran")
        # list.append is atomic under the GIL: probes on several workers may append.
        ctx.calls.append(ProbeCall(ctx.label, threading.current_thread().name, str(dev), stream))
        if ctx.after is not None:
            ctx.after()
        return grad, None, None, None


def probe(t: Any, label: str, calls: list[ProbeCall], after: Any = None) -> Any:
    """``t * 1`` whose backward appends a :class:`ProbeCall` to ``calls``, then calls
    ``after()`` (e.g. to queue a final callback), and notes "``label`` ran" in the
    log of ``t``'s backend when it has streams. The node is ``_ProbeBackward``."""
    return _Probe.apply(t, label, calls, after)
