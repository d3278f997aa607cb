"""Device copies and dtype casts: ``to``, ``cpu``, ``cuda``, ``float``, ``double``...

Arrays move between devices only through their backends: ``copy_to``
within one backend, ``to_host`` then ``from_host`` between two. The
backward of a copy (``ToCopyBackward0``) copies the gradient back to the
source device and casts it back to the source dtype. Its node is recorded
on the *destination* device, with that device's current stream
(``record``), so the engine runs it on the destination's worker and stream,
as PyTorch does (See Note [Streaming backwards]).

A cast to a non-floating dtype records nothing: its result needs no grad.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import devices
from .._tensor import Tensor, _resolve_dtype, bool_, float16, float32, float64, int32, int64
from ..devices import CPU, Device
from ._record import edges_of, plain, record
from ._rule import Rule, RuleNode

# ---- moving arrays ----


def _convert(data: Any, src: Device, dst: Device, dtype: numpy.dtype) -> Any:
    """``data`` (on ``src``) as an array on ``dst`` with ``dtype``. Copies only if needed."""
    if src is not dst:
        if src.backend is dst.backend:
            data = dst.backend.copy_to(data, dst.index)
        else:
            host = src.backend.to_host(data)
            data = dst.backend.from_host(host, dst.index)
    if data.dtype != dtype:
        data = data.astype(dtype)
    return data


def _check_available(dst: Device) -> None:
    if dst is CPU:
        return
    backend = dst.backend
    count = backend.device_count()
    if dst.index < count:
        return
    _ = backend.xp  # a backend that cannot load at all (no CuPy) says so here
    raise RuntimeError(
        f"device {dst} is not available: the {backend.name!r} backend has {count} "
        f"device(s); use an index below {count}"
    )


# ---- to / ToCopyBackward0 ----


def _to_copy_grad(node: RuleNode, grads: list[Any], create_graph: bool, src_device: Device,
                  src_dtype: Any) -> Any:
    """The gradient goes back to ``a``'s device and dtype (from the device of the node's
    input metadata: where the result, and so the gradient, lives)."""
    g = grads[0]
    if type(g) is Tensor:
        return (g.to(src_device, src_dtype),)
    here = node.input_metadata[0].device
    return (_convert(g, here, src_device, src_dtype),)


ToCopyBackward0 = Rule("ToCopyBackward0", whole=_to_copy_grad, keeps=("src_device", "src_dtype"),
                       doc="``a.to(device, dtype)``.")


def _is_dtype_like(x: Any) -> bool:
    if isinstance(x, numpy.dtype):
        return True
    return isinstance(x, type) and (issubclass(x, numpy.generic) or x in (float, int, bool))


def _target(a: Tensor, device: Any, dtype: Any) -> tuple[Device, numpy.dtype]:
    """Parse ``to``'s arguments: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(t)``."""
    if isinstance(device, Tensor):
        if dtype is not None:
            raise TypeError("to(other, dtype) is not supported: to(other) takes other's dtype")
        return device.device, device.dtype
    if _is_dtype_like(device):
        if dtype is not None:
            raise TypeError(f"to() got two dtypes: {device!r} and {dtype!r}")
        device, dtype = None, device
    if device is None:
        dst = a.device
    elif isinstance(device, (str, Device)):
        dst = devices.device(device)
    else:
        raise TypeError(
            "to() expects a device ('cpu', 'cuda:0', aiograd.device(...)), a dtype "
            f"(aiograd.float64) or a Tensor, got {type(device).__name__}"
        )
    resolved = _resolve_dtype(dtype)  # None exactly when dtype is
    return dst, a.dtype if resolved is None else resolved


def to(self: Tensor, device: Any = None, dtype: Any = None, non_blocking: bool = False,
       copy: bool = False) -> Tensor:
    """This tensor on ``device`` with ``dtype``; ``self`` when both already match.

    ``to("cuda:0")``, ``to(aiograd.device("fake", 1))``, ``to(aiograd.float64)``,
    ``to(device, dtype)``, ``to(other_tensor)`` (other's device and dtype).
    ``copy=True`` always returns a new tensor. ``non_blocking`` is accepted
    for PyTorch compatibility; copies are ordered on the current streams.
    """
    dst, dt = _target(self, device, dtype)
    if dst is self.device and dt == self.dtype and not copy:
        return self
    _check_available(dst)
    data = _convert(self.data, self.device, dst, dt)
    if data is self.data:
        data = data.copy()
    edges = edges_of(self) if dt.kind == "f" else None
    if edges is None:
        return plain(data, dst)
    return record(ToCopyBackward0.make(edges, (), (self.device, self.dtype)), data, dst)


# ---- shorthands ----


def cpu(self: Tensor) -> Tensor:
    """This tensor in host memory (``self`` if it is there already)."""
    return to(self, CPU)


def cuda(self: Tensor, device: int | str | Device | None = None,
         non_blocking: bool = False) -> Tensor:
    """This tensor on a CUDA device: ``cuda()`` is ``cuda:0``, ``cuda(1)`` is ``cuda:1``."""
    if device is None:
        dst = devices.device("cuda", 0)
    elif isinstance(device, int) and not isinstance(device, bool):
        dst = devices.device("cuda", device)
    elif isinstance(device, (str, Device)):
        dst = devices.device(device)
        if dst.type != "cuda":
            raise ValueError(f"cuda() expects a CUDA device, got {dst}; use to({str(dst)!r})")
    else:
        raise TypeError(
            f"cuda(): device must be an int, a string or a Device, got {type(device).__name__}")
    return to(self, dst)


def _cast(dtype: numpy.dtype, name: str) -> Any:
    def cast(self: Tensor) -> Tensor:
        return to(self, dtype=dtype)

    cast.__name__ = name
    cast.__doc__ = f"``self.to({dtype.name})``."
    return cast


as_half, as_float = _cast(float16, "half"), _cast(float32, "float")
as_double, as_int = _cast(float64, "double"), _cast(int32, "int")
as_long, as_bool = _cast(int64, "long"), _cast(bool_, "bool")
