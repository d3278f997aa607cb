"""Layers, containers and activations built on :class:`Module`.

Each forward is a composition of differentiable tensor ops, so backward
needs nothing here: the graph the ops record is the whole story.
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, overload

import numpy

from .. import devices
from .._ops.nn_extra import _check_padding_idx
from .._tensor import Tensor, _resolve_dtype, ones, rand, randn, zeros
from . import functional as F
from ._module import Module, Parameter

__all__ = [
    "Identity",
    "Linear",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "ReLU",
    "Tanh",
    "Sigmoid",
    "Dropout",
    "Embedding",
    "LayerNorm",
    "Flatten",
    "Softmax",
    "LogSoftmax",
    "LeakyReLU",
    "GELU",
]


# ---- layers ----

class Identity(Module):
    """Returns its input unchanged; its arguments are ignored (as PyTorch's), so it can
    stand in for any layer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Initialised as PyTorch does: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)),
    drawn from the generator :func:`aiograd.manual_seed` seeds.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        shape = _weight_shape(out_features, in_features)
        self.in_features = in_features
        self.out_features = out_features
        dt = _resolve_dtype(dtype)
        bound = 1.0 / math.sqrt(shape[1]) if shape[1] > 0 else 0.0
        self.weight = Parameter(_uniform(shape, bound, dt, device))
        if bias:
            self.bias = Parameter(_uniform(shape[:1], bound, dt, device))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _weight_shape(out_features: Any, in_features: Any) -> tuple[int, int]:
    """``(out, in)`` as ints; PyTorch's TypeError for a non-integer size (``operator.index``
    fails: a float, None) and its RuntimeError for a negative one."""
    shape = []
    for name, value in (("out_features", out_features), ("in_features", in_features)):
        try:
            shape.append(operator.index(value))
        except TypeError:
            raise TypeError(
                f"Linear(): {name} must be an int, but got {type(value).__name__}"
            ) from None
    for n in shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {shape}")
    return shape[0], shape[1]


def _uniform(shape: tuple[int, ...], bound: float, dtype: numpy.dtype | None,
             device: Any) -> Tensor:
    """U(-bound, bound) of ``shape`` on ``device`` (float32 unless ``dtype``)."""
    r = rand(*shape, dtype=dtype)  # on the host: one generator for every device
    data = (r.data * 2.0 - 1.0) * r.data.dtype.type(bound)
    dev = devices.CPU if device is None else devices.device(device)
    if dev is not devices.CPU:
        data = dev.backend.from_host(data, dev.index)
    return Tensor._wrap(data, dev)


class Dropout(Module):
    """``F.dropout`` while ``training``; the identity after ``eval()``."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Embedding(Module):
    """A lookup table: ``weight`` of shape ``(num_embeddings, embedding_dim)``, one row per index.

    Initialised as PyTorch does: weight ~ N(0, 1), from the generator
    :func:`aiograd.manual_seed` seeds, with the ``padding_idx`` row zeroed (and never
    given a gradient).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        data = randn(num_embeddings, embedding_dim, dtype=_resolve_dtype(dtype)).data
        if self.padding_idx is not None:
            data[self.padding_idx] = 0
        dev = devices.CPU if device is None else devices.device(device)
        if dev is not devices.CPU:
            data = dev.backend.from_host(data, dev.index)
        self.weight = Parameter(Tensor._wrap(data, dev))

    def forward(self, x: Tensor) -> Tensor:
        return F.embedding(x, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else f"{s}, padding_idx={self.padding_idx}"


class LayerNorm(Module):
    """``F.layer_norm`` over the last ``len(normalized_shape)`` dims; with
    ``elementwise_affine``, a learned ``weight`` (ones) and ``bias`` (zeros, unless
    ``bias=False``) of ``normalized_shape``."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        dt = _resolve_dtype(dtype)
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dt, device=device))
        else:
            self.register_parameter("weight", None)
        if elementwise_affine and bias:
            self.bias = Parameter(zeros(*self.normalized_shape, dtype=dt, device=device))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class Flatten(Module):
    """``x.flatten(start_dim, end_dim)``: by default every dim but the batch dim."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"Flatten.forward(): argument 'input' (position 1) must be Tensor, "
                            f"not {type(x).__name__}")
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


# ---- containers ----

class Sequential(Module):
    """Calls its modules in order, each on the previous one's output.

    ``Sequential(m0, m1, ...)`` names the children ``"0"``, ``"1"``, ...;
    ``Sequential(OrderedDict(name=module, ...))`` keeps the given names. As
    PyTorch's, deleting or inserting renumbers every child ``"0"``, ``"1"``, ...
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _key(self, idx: int) -> str:
        keys = list(self._modules)
        return keys[_index(idx, len(keys))]

    @overload
    def __getitem__(self, idx: int) -> Module: ...

    @overload
    def __getitem__(self, idx: slice) -> Sequential: ...

    def __getitem__(self, idx: int | slice) -> Module:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]  # type: ignore[return-value]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx: int | slice) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules)[idx]:
                del self._modules[key]
        else:
            del self._modules[self._key(idx)]
        _renumber(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())  # type: ignore[arg-type]

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, "
                             f"but {type(other)} is given.")
        return Sequential().extend(self).extend(other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, "
                             f"but {type(other)} is given.")
        return self.extend(other)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Put ``module`` before position ``index`` (``-len <= index <= len``), renumbering."""
        _insert(self._modules, index, module)
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        for module in list(sequential):  # a copy: ``s.extend(s)`` doubles s once
            self.append(module)
        return self

    def pop(self, key: int | slice) -> Module:
        v = self[key]
        del self[key]
        return v

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            if module is not None:
                x = module(x)
        return x


class ModuleList(Module):
    """A list of modules, registered as children ``"0"``, ``"1"``, ...

    Invariant: ``list(self._modules) == [str(i) for i in range(len(self))]``;
    deleting and inserting renumber (as PyTorch's).
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    @overload
    def __getitem__(self, idx: int) -> Module: ...

    @overload
    def __getitem__(self, idx: slice) -> ModuleList: ...

    def __getitem__(self, idx: int | slice) -> Module:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])  # type: ignore[arg-type]
        return self._modules[str(_index(idx, len(self)))]  # type: ignore[return-value]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self))), module)

    def __delitem__(self, idx: int | slice) -> None:
        if isinstance(idx, slice):
            for i in range(len(self))[idx]:
                del self._modules[str(i)]
        else:
            del self._modules[str(_index(idx, len(self)))]
        _renumber(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())  # type: ignore[arg-type]

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList(self).extend(other)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Put ``module`` before position ``index`` (``-len <= index <= len``), renumbering."""
        _insert(self._modules, index, module)

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, "
                            f"but got {type(modules).__name__}")
        for module in list(modules):  # a copy: ``l.extend(l)`` doubles l once
            self.append(module)
        return self

    def pop(self, key: int | slice) -> Module:
        v = self[key]
        del self[key]
        return v

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward; iterate over it instead")


class ModuleDict(Module):
    """A dict of modules: each key is the child's name, in insertion order.

    ``update`` (and the constructor) take a mapping or an iterable of
    ``(key, module)`` pairs; keys must be valid module names.
    """

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]  # type: ignore[return-value]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> KeysView[str]:
        return self._modules.keys()

    def items(self) -> ItemsView[str, Module | None]:
        return self._modules.items()

    def values(self) -> ValuesView[Module | None]:
        return self._modules.values()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        v = self[key]
        del self[key]
        return v

    def update(self, modules: Any) -> None:
        """Add or replace children from a mapping (in its order) or ``(key, module)`` pairs."""
        if isinstance(modules, (Mapping, ModuleDict)):
            pairs: Iterable[tuple[Any, Any]] = list(modules.items())
        else:
            pairs = _pairs(modules, "ModuleDict")
        for key, module in pairs:
            self[key] = module


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ... (names in ``state_dict``).

    A Tensor that is not a parameter is stored as ``Parameter(t)``: a copy
    (see Note [Parameters are plain tensors]) that requires grad. Other
    objects are kept as they are, as PyTorch's.
    """

    _size: int  # Invariant: entries are the attributes "0" .. str(_size - 1)

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    @overload
    def __getitem__(self, idx: int) -> Any: ...

    @overload
    def __getitem__(self, idx: slice) -> ParameterList: ...

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(len(self))[idx]:
                out.append(self[i])
            return out
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx: int, value: Any) -> None:
        setattr(self, str(_index(idx, len(self))), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)

    def append(self, value: Any) -> ParameterList:
        setattr(self, str(self._size), _as_parameter(value))
        self._size += 1
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, "
                            f"but got {type(values).__name__}")
        for value in list(values):
            self.append(value)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(str(i), v) for i, v in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters: each key (a str) is the parameter's name, in insertion order.

    Values are converted as :class:`ParameterList`'s. As PyTorch's, ``update``
    with a plain dict or other unordered mapping adds its items sorted by key;
    an ``OrderedDict`` or ``ParameterDict`` keeps its order.
    """

    _keys: dict[str, None]  # the keys in order; values live in _parameters or __dict__

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        if _dict_key(key) not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, _dict_key(key), _as_parameter(value))
        self._keys[key] = None

    def __delitem__(self, key: str) -> None:
        del self._keys[_dict_key(key)]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> KeysView[str]:
        return self._keys.keys()

    def items(self) -> Iterator[tuple[str, Any]]:
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterator[Any]:
        return (self[k] for k in self._keys)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str) -> Any:
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple[str, Any]:
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters (not copies), in the same order."""
        return ParameterDict(OrderedDict(self.items()))

    def update(self, parameters: Any) -> None:
        """Add or replace entries; see the class docstring for the order."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs: Iterable[tuple[Any, Any]] = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = _pairs(parameters, "ParameterDict")
        for key, value in pairs:
            self[key] = value

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, v) for k, v in self.items())


def _index(idx: int, n: int) -> int:
    """``idx`` (any integer-like, negative from the end) as a position in ``range(n)``."""
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range for length {n}")
    return i % n


def _renumber(modules: dict[str, Module | None]) -> None:
    """Rename the children ``"0"``, ``"1"``, ... in their current order, in place."""
    entries = list(modules.values())
    modules.clear()
    modules.update((str(i), m) for i, m in enumerate(entries))


def _insert(modules: dict[str, Module | None], index: int, module: Module) -> None:
    if not isinstance(module, Module):
        raise TypeError(f"{type(module).__name__} is not a Module subclass")
    n = len(modules)
    i = operator.index(index)
    if not -n <= i <= n:
        raise IndexError(f"Index out of range: {index}")
    entries = list(modules.values())
    entries.insert(i, module)
    modules.clear()
    modules.update((str(j), m) for j, m in enumerate(entries))


def _pairs(values: Any, owner: str) -> Iterator[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of an ``update`` argument that is not a mapping."""
    if not isinstance(values, Iterable):
        raise TypeError(f"{owner}.update should be called with an iterable of key/value "
                        f"pairs, but got {type(values).__name__}")
    for j, pair in enumerate(values):
        if not isinstance(pair, Iterable):
            raise TypeError(f"{owner} update sequence element #{j} should be Iterable; "
                            f"is {type(pair).__name__}")
        pair = tuple(pair)
        if len(pair) != 2:
            raise ValueError(f"{owner} update sequence element #{j} has length "
                             f"{len(pair)}; 2 is required")
        yield pair[0], pair[1]


def _as_parameter(value: Any) -> Any:
    """A Tensor that is not a parameter becomes ``Parameter(value)``; others pass through."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _dict_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(
            "Index given to ParameterDict cannot be used as a key as it is not a string "
            f"(type is '{type(key).__name__}'). Open an issue on github if you need "
            "non-string keys."
        )
    return key


def _entry_repr(key: str, value: Any) -> str:
    """One line of ParameterList/ParameterDict's repr, in PyTorch's layout."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(d) for d in value.shape)
    where = "" if value.device is devices.CPU else f" ({value.device})"
    return f"  ({key}): {kind} containing: [{value.dtype} of size {size}{where}]"


# ---- activations ----

def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class _InplaceActivation(Module):
    """An activation whose only option is ``inplace`` (shown in the repr when True)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU(_InplaceActivation):
    """``max(x, 0)`` elementwise; with ``inplace``, written into the input (``relu_``)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x, self.inplace)


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Softmax(Module):
    """``F.softmax(x, dim)``; ``dim=None`` takes PyTorch's deprecated implicit choice."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``F.log_softmax(x, dim)``; ``dim=None`` takes PyTorch's deprecated implicit choice."""

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``negative_slope * x``; with ``inplace``, written into the
    input."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"negative_slope={self.negative_slope}{inplace}"


class GELU(Module):
    """``F.gelu(x, approximate)``: ``x * Phi(x)``, or its tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"
