"""``aiograd.save``/``aiograd.load``: state dicts on disk, without pickle by default.

The default format is a NumPy ``.npz`` archive (a zip file): every tensor
and array is one ``.npy`` member, and ``__structure__.json`` describes the
object around them: dicts (keys ``str``, ``int``, ``float``, ``bool`` or
None; order kept), lists, tuples, numbers, strings, None, and tensors with
their dtype, device and ``requires_grad``. That covers what
``Module.state_dict()`` and ``Optimizer.state_dict()`` return. Loading it
runs no code from the file.

Anything else (a whole module, a custom class) needs ``pickle=True``,
which writes a pickle; ``load`` unpickles only with ``weights_only=False``,
because unpickling a file runs whatever code it names: load pickles only
from sources you trust.
"""

from __future__ import annotations

import io
import json
import os
import pickle as _pickle
import zipfile
from collections import OrderedDict
from typing import IO, Any

import numpy

from . import devices
from ._tensor import Tensor

__all__ = ["save", "load"]

_STRUCTURE = "__structure__.json"
_PICKLE_MAGIC = b"AIOGRAD-PICKLE\n"
_FORMAT = "aiograd-npz-1"
_KEY_TYPES = (str, int, float, bool, type(None))

PathOrFile = str | os.PathLike[str] | IO[bytes]


def _encode(obj: Any, arrays: dict[str, Any], path: str) -> Any:
    """``obj`` as JSON, its tensors and arrays moved into ``arrays``."""
    if isinstance(obj, Tensor):
        name = f"a{len(arrays)}"
        arrays[name] = obj.device.backend.to_host(obj.detach().data)
        return {"tensor": name, "device": str(obj.device), "requires_grad": obj.requires_grad}
    if isinstance(obj, numpy.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = obj
        return {"ndarray": name}
    if isinstance(obj, numpy.generic):
        return {"scalar": obj.item(), "dtype": obj.dtype.str}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, dict):
        items = []
        for key, value in obj.items():
            if not isinstance(key, _KEY_TYPES):
                raise TypeError(f"aiograd.save: the key {key!r} at {path} is a "
                                f"{type(key).__name__}; keys must be str, int, float, bool "
                                "or None (or pass pickle=True)")
            items.append([key, _encode(value, arrays, f"{path}[{key!r}]")])
        return {"ordered" if isinstance(obj, OrderedDict) else "dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]}
    raise TypeError(f"aiograd.save: cannot store a {type(obj).__name__} (at {path}) without "
                    "pickle; save its state_dict(), or pass pickle=True")


def _decode(node: Any, arrays: Any, map_location: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if "tensor" in node:
        device = devices.device(map_location if map_location is not None else node["device"])
        t = Tensor._wrap(numpy.array(arrays[node["tensor"]]))
        if device is not devices.CPU:
            t = t.to(device)
        return t.requires_grad_() if node["requires_grad"] else t
    if "ndarray" in node:
        return numpy.array(arrays[node["ndarray"]])
    if "scalar" in node:
        return numpy.dtype(node["dtype"]).type(node["scalar"])
    if "list" in node:
        return [_decode(v, arrays, map_location) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays, map_location) for v in node["tuple"])
    kind = OrderedDict if "ordered" in node else dict
    return kind((k, _decode(v, arrays, map_location))
                for k, v in node["ordered" if "ordered" in node else "dict"])


def _check_file(f: Any, fn: str) -> None:
    if not (isinstance(f, (str, os.PathLike)) or hasattr(f, "read" if fn == "load" else "write")):
        raise TypeError(f"{fn}(): argument 'f' must be a path or a binary file, not "
                        f"{type(f).__name__}")


def save(obj: Any, f: PathOrFile, *, pickle: bool = False) -> None:
    """Write ``obj`` (a state dict, or nested dicts/lists of tensors, arrays, numbers and
    strings) to the path or binary file ``f``; see the module's docstring for the
    format. ``pickle=True`` writes any picklable object as a pickle instead."""
    _check_file(f, "save")
    if pickle:
        payload = _PICKLE_MAGIC + _pickle.dumps(obj, protocol=_pickle.HIGHEST_PROTOCOL)
    else:
        arrays: dict[str, Any] = {}
        structure = {"format": _FORMAT, "object": _encode(obj, arrays, "obj")}
        buffer = io.BytesIO()
        numpy.savez(buffer, **arrays)
        with zipfile.ZipFile(buffer, "a") as archive:
            archive.writestr(_STRUCTURE, json.dumps(structure))
        payload = buffer.getvalue()
    if hasattr(f, "write"):
        f.write(payload)
    else:
        with open(f, "wb") as out:
            out.write(payload)


def load(f: PathOrFile, *, map_location: Any = None, weights_only: bool = True) -> Any:
    """Read what :func:`save` wrote. Tensors come back on their saved device, or on
    ``map_location``. A pickle is read only with ``weights_only=False``."""
    _check_file(f, "load")
    if hasattr(f, "read"):
        payload = f.read()
    else:
        with open(f, "rb") as src:
            payload = src.read()
    if payload.startswith(_PICKLE_MAGIC):
        if weights_only:
            raise RuntimeError(
                "aiograd.load: this file is a pickle (saved with pickle=True), and unpickling "
                "runs any code the file names. Load it with weights_only=False only if you "
                "trust where it came from.")
        return _pickle.loads(payload[len(_PICKLE_MAGIC):])
    try:
        archive = numpy.load(io.BytesIO(payload), allow_pickle=False)
        with zipfile.ZipFile(io.BytesIO(payload)) as zf:
            structure = json.loads(zf.read(_STRUCTURE))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise RuntimeError(f"aiograd.load: not a file written by aiograd.save ({exc})") from None
    if structure.get("format") != _FORMAT:
        raise RuntimeError(f"aiograd.load: unknown format {structure.get('format')!r}")
    with archive:
        return _decode(structure["object"], archive, map_location)
