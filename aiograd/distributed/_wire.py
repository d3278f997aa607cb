"""Message framing for the RPC agent: pickled structure, tensors as raw bytes.

A message is ``[8-byte header length][pickled header][tensor bytes ...]``. The
pickler replaces every Tensor by a persistent id (index, dtype, shape,
requires_grad, autograd message id), so tensor data is never pickled: it
travels as the array's raw bytes after the header. Note [Unpickle after auth]:
``loads`` is only ever called on bytes whose HMAC was verified (see
``_auth``), and it runs a restricted unpickler as a second layer.
"""
from __future__ import annotations

import io
import math
import pickle
import struct
from collections.abc import Callable
from typing import Any

import numpy

from aiograd._tensor import Tensor

_LEN = struct.Struct("<Q")

#: Modules an authenticated peer may name in a pickle (functions, exceptions, data).
_BLOCKED_MODULES = frozenset({"os", "posix", "nt", "subprocess", "sys", "shutil", "socket"})


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, on_tensor: Callable[[Tensor], Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._on_tensor = on_tensor

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is Tensor or isinstance(obj, Tensor):
            return self._on_tensor(obj)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, on_tensor: Callable[[Any], Tensor]) -> None:
        super().__init__(file)
        self._on_tensor = on_tensor

    def persistent_load(self, pid: Any) -> Any:
        return self._on_tensor(pid)

    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] in _BLOCKED_MODULES or (module == "builtins" and name in
                                                         {"eval", "exec", "compile", "open",
                                                          "__import__", "getattr"}):
            raise pickle.UnpicklingError(f"rpc: refusing to unpickle {module}.{name}")
        return super().find_class(module, name)


def dumps(obj: Any, on_tensor: Callable[[Tensor], Any] | None = None) -> list[bytes | memoryview]:
    """``obj`` as a list of buffers (header first); ``on_tensor(t)`` returns extra per-tensor
    metadata (an autograd message id, or None)."""
    blobs: list[memoryview] = []

    def tensor_id(t: Tensor) -> Any:
        data = t.data
        if not isinstance(data, numpy.ndarray):  # CuPy: bring it to the host for the wire
            data = data.get()
        shape = data.shape
        data = numpy.ascontiguousarray(data)  # (makes 0-d arrays 1-d: keep ``shape``)
        blobs.append(data.data.cast("B"))
        extra = on_tensor(t) if on_tensor is not None else None
        return (len(blobs) - 1, data.dtype.str, shape, extra)

    buf = io.BytesIO()
    _Pickler(buf, tensor_id).dump(obj)
    header = buf.getvalue()
    return [_LEN.pack(len(header)) + header, *blobs]


def loads(payload: bytes | memoryview,
          on_tensor: Callable[[numpy.ndarray, Any], Tensor] | None = None) -> Any:
    """Inverse of :func:`dumps` (``payload`` is the joined buffers; tensors are views of
    it when it is writable, copies otherwise)."""
    view = memoryview(payload)
    (n,) = _LEN.unpack_from(view, 0)
    header = bytes(view[_LEN.size:_LEN.size + n])
    offset = _LEN.size + n
    # Tensors are laid out in persistent-id order, which is the unpickling order too.
    def make(pid: Any) -> Tensor:
        nonlocal offset
        _, dtype, shape, extra = pid
        dt = numpy.dtype(dtype)
        nbytes = math.prod(shape) * dt.itemsize
        arr = numpy.frombuffer(view[offset:offset + nbytes], dtype=dt).reshape(shape)
        if view.readonly:
            arr = arr.copy()
        offset += nbytes
        if on_tensor is not None:
            return on_tensor(arr, extra)
        return Tensor._wrap(arr)

    return _Unpickler(io.BytesIO(header), make).load()
