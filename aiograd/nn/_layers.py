"""Layers, containers and activations built on :class:`Module`.

Each forward is a composition of differentiable tensor ops, so backward
needs nothing here: the graph the ops record is the whole story.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, overload

import numpy

from .. import devices
from .._tensor import Tensor, _resolve_dtype, rand
from . import functional as F
from ._module import Module, Parameter

__all__ = [
    "Identity",
    "Linear",
    "Sequential",
    "ModuleList",
    "ReLU",
    "Tanh",
    "Sigmoid",
]


# ---- layers ----

class Identity(Module):
    """Returns its input unchanged."""

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
        for name, value in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Linear {name} must be a non-negative int, got {value!r}")
        self.in_features = in_features
        self.out_features = out_features
        dt = _resolve_dtype(dtype)
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound, dt, device))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound, dt, device))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _uniform(shape: tuple[int, ...], bound: float, dtype: numpy.dtype | None,
             device: Any) -> Tensor:
    """U(-bound, bound) of ``shape`` on ``device`` (float32 unless ``dtype``)."""
    r = rand(*shape, dtype=dtype)  # on the host: one generator for every device
    data = (r.data * 2.0 - 1.0) * r.data.dtype.type(bound)
    dev = devices.CPU if device is None else devices.device(device)
    if dev is not devices.CPU:
        data = dev.backend.from_host(data, dev.index)
    return Tensor._wrap(data, dev)


# ---- containers ----

class Sequential(Module):
    """Calls its modules in order, each on the previous one's output.

    ``Sequential(m0, m1, ...)`` names the children ``"0"``, ``"1"``, ...;
    ``Sequential(OrderedDict(name=module, ...))`` keeps the given names.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    @overload
    def __getitem__(self, idx: int) -> Module: ...

    @overload
    def __getitem__(self, idx: slice) -> Sequential: ...

    def __getitem__(self, idx: int | slice) -> Module:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index(idx, len(items))][1]  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(m for m in self._modules.values() if m is not None)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x: Any) -> Any:
        for module in self:
            x = module(x)
        return x


class ModuleList(Module):
    """A list of modules, registered as children ``"0"``, ``"1"``, ..."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            for module in modules:
                self.append(module)

    def __getitem__(self, idx: int) -> Module:
        items = list(self._modules.values())
        return items[_index(idx, len(items))]  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(m for m in self._modules.values() if m is not None)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward; iterate over it instead")


def _index(idx: int, n: int) -> int:
    if not isinstance(idx, int):
        raise TypeError(f"indices must be integers or slices, not {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of {n} modules")
    return idx % n


# ---- activations ----

class ReLU(Module):
    """``max(x, 0)`` elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()
