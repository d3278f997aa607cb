"""The Tensor: an array (NumPy or CuPy) with autograd metadata.

A tensor is a *leaf* when it has no ``grad_fn``: made by the user, or the
result of an operation on tensors that need no grad. Only leaves that
require grad get ``.grad`` written by backward (see AccumulateGrad), unless
``retain_grad()`` or ``backward(inputs=...)`` asks for a non-leaf's.

The version counter ``_vc`` is shared by a tensor and its views; in-place
operations bump it, and saved tensors check it when unpacked. Assigning
``.data`` does not bump it (PyTorch's rule). A view's ``_base`` is its root;
a root's ``_views`` holds its live views made in grad mode, or is None (see
Note [In-place writes to views] in ``_ops/views.py``).
"""

from __future__ import annotations

import itertools
import math
import numbers
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy

from . import _defaults, _random, devices
from ._handle import RemovableHandle
from .devices import CPU, Device
from .grad_mode import _grad_enabled, _inference

if TYPE_CHECKING:
    from ._ops.methods import OpMethods
    from ._ops.views import LiveViews
    from .graph._node import AccumulateGrad
else:
    OpMethods = object  # bound by aiograd._ops at run time: see _ops/methods.py

__all__ = [
    "Tensor",
    "tensor",
    "as_tensor",
    "from_numpy",
    "is_tensor",
    "zeros",
    "ones",
    "empty",
    "full",
    "arange",
    "linspace",
    "eye",
    "randn",
    "rand",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "randn_like",
    "rand_like",
    "float16",
    "float32",
    "float64",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool_",
    "scalar_type_name",
    "cpp_type_name",
]

float16 = numpy.dtype("float16")
float32 = numpy.dtype("float32")
float64 = numpy.dtype("float64")
uint8 = numpy.dtype("uint8")
int8 = numpy.dtype("int8")
int16 = numpy.dtype("int16")
int32 = numpy.dtype("int32")
int64 = numpy.dtype("int64")
bool_ = numpy.dtype("bool")

_SCALAR_TYPE_NAMES = {
    "float16": "Half", "float32": "Float", "float64": "Double", "uint8": "Byte", "int8": "Char",
    "int16": "Short", "int32": "Int", "int64": "Long", "bool": "Bool",
}
_CPP_TYPE_NAMES = {
    "float16": "c10::Half", "float32": "float", "float64": "double", "uint8": "unsigned char",
    "int8": "signed char", "int16": "short int", "int32": "int", "int64": "long int",
}


def scalar_type_name(dtype: numpy.dtype) -> str:
    """PyTorch's name of a dtype as its error messages print it (``Float`` for float32)."""
    return _SCALAR_TYPE_NAMES.get(dtype.name, dtype.name)


def legacy_type_name(dtype: numpy.dtype, device_type: str) -> str:
    """PyTorch's legacy tensor type name, as some messages print it (``torch.FloatTensor``,
    ``torch.cuda.LongTensor``)."""
    where = "torch." if device_type == "cpu" else f"torch.{device_type}."
    return f"{where}{scalar_type_name(dtype)}Tensor"


def cpp_type_name(dtype: numpy.dtype) -> str:
    """The C++ name of a dtype, as some PyTorch messages print it (``float``, ``long int``)."""
    return _CPP_TYPE_NAMES.get(dtype.name, dtype.name)


_FLOAT_KINDS = ("f",)
_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead."
)


class _VersionCounter:
    """Shared by a tensor and its views. Invariant: bumped by every in-place write."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


INFERENCE_SAVE_ERROR = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `aiograd.no_grad()` instead "
    "of `aiograd.inference_mode()`."
)


class _InferenceCounter(_VersionCounter):
    """Note [Inference tensors]: the counter of every tensor made under ``inference_mode``
    (and of its views), which marks it an inference tensor, as PyTorch's are.

    It tracks no version. Inside inference mode an in-place write's bump is a no-op;
    outside it, ``check_inplace`` and ``requires_grad_`` refuse first, ``_version``
    refuses, and the only other reader is a save for backward, which this refuses.
    """

    __slots__ = ()

    @property
    def value(self) -> int:
        if _inference.get():
            return 0
        raise RuntimeError(INFERENCE_SAVE_ERROR)

    @value.setter
    def value(self, version: int) -> None:
        pass


_INFERENCE = _InferenceCounter()


class Tensor(OpMethods):
    """An n-dimensional array that records the operations done on it.

    Do not construct directly; use :func:`aiograd.tensor` and the factories. The op
    methods and operators (``t.exp()``, ``a @ b``) are declared in ``_ops/methods.py``.
    """

    __slots__ = (
        "data",
        "device",
        "_rg",
        "grad_fn",
        "output_nr",
        "_grad",
        "_vc",
        "_base",
        "_views",
        "_accumulator",
        "_hooks",
        "_post_acc_hooks",
        "_retains_grad",
        "__weakref__",
    )

    # NumPy must defer to Tensor's reflected operators: ndarray * Tensor -> Tensor.__rmul__.
    __array_ufunc__ = None

    data: Any
    device: Device
    grad_fn: Any
    output_nr: int
    _rg: bool
    _grad: Tensor | None
    _vc: _VersionCounter
    _base: Tensor | None
    _views: LiveViews | None
    _accumulator: AccumulateGrad | None
    _hooks: list[_TensorHook] | None
    _post_acc_hooks: list[Callable[[Tensor], None]] | None
    _retains_grad: bool

    @classmethod
    def _wrap(cls, data: Any, device: Device | None = None) -> Tensor:
        """A leaf around ``data`` (no copy). ``device`` defaults to the array's."""
        if isinstance(data, numpy.generic):  # NumPy reductions return scalars: keep arrays
            data = numpy.asarray(data)
        t = object.__new__(cls)
        t.data = data
        t.device = devices.device_of_array(data) if device is None else device
        t._rg = False
        t.grad_fn = None
        t.output_nr = 0
        t._grad = None
        t._vc = _INFERENCE if _inference.get() else _VersionCounter()
        t._base = None
        t._views = None
        t._accumulator = None
        t._hooks = None
        t._post_acc_hooks = None
        t._retains_grad = False
        return t

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use aiograd.tensor(data, ...) to make a Tensor")

    # ---- basic properties ----

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    def size(self, dim: int | None = None) -> Any:
        """The shape (PyTorch's ``size()``), or the length of ``dim``."""
        if dim is None:
            return self.data.shape
        try:
            return self.data.shape[dim]
        except IndexError:
            raise IndexError(_dim_out_of_range(dim, self.data.ndim)) from None

    def stride(self, dim: int | None = None) -> Any:
        """The strides in elements (PyTorch's), not in bytes (NumPy's); or that of ``dim``."""
        data = self.data
        item = data.itemsize
        strides = tuple(s // item for s in data.strides)
        if dim is None:
            return strides
        try:
            return strides[dim]
        except IndexError:
            raise IndexError(_dim_out_of_range(dim, data.ndim)) from None

    @property
    def dtype(self) -> numpy.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def dim(self) -> int:
        return self.data.ndim

    def numel(self) -> int:
        return int(self.data.size)

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element."""
        return int(self.data.itemsize)

    def is_floating_point(self) -> bool:
        return self.data.dtype.kind == "f"

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if not isinstance(requires_grad, bool):
            raise TypeError(f"requires_grad must be a bool, got {type(requires_grad).__name__}")
        if requires_grad and self._vc is _INFERENCE and not _inference.get():
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to "
                "use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach()."
            )
        if requires_grad and self.data.dtype.kind not in _FLOAT_KINDS:
            raise RuntimeError(
                "only Tensors of floating point dtype can require gradients, "
                f"got dtype {self.data.dtype}"
            )
        self._rg = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        grad = self._grad
        if grad is None and self.grad_fn is not None and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad must be a Tensor or None, got {type(value).__name__}"
                )
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size"
                )
            if value.dtype != self.dtype:
                raise RuntimeError(
                    f"assigned grad has data of a different type: {value.dtype} vs {self.dtype}"
                )
            if value.device is not self.device:
                raise RuntimeError(
                    f"assigned grad has data located on a different device: {value.device} "
                    f"vs {self.device}"
                )
        self._grad = value

    @property
    def _version(self) -> int:
        if self._vc is _INFERENCE:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._vc.value

    def is_inference(self) -> bool:
        """Whether this tensor was made under ``inference_mode`` (Note [Inference tensors])."""
        return self._vc is _INFERENCE

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def retain_grad(self) -> None:
        """Make backward write ``.grad`` for this non-leaf tensor too."""
        if self.grad_fn is None:
            if not self._rg:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return  # leaves always keep .grad
        if self._retains_grad:
            return
        ref = weakref.ref(self)

        def retains_grad_hook(grad: Any) -> None:
            t = ref()
            if t is None:
                return
            if t._grad is None:
                g = grad if isinstance(grad, Tensor) else Tensor._wrap(grad, t.device)
                t._grad = Tensor._wrap(g.data.copy(), t.device) if g.grad_fn is None else g
            else:
                t._grad = t._grad + grad

        self.grad_fn._set_retains_grad_hook(self.output_nr, retains_grad_hook)
        self._retains_grad = True

    # ---- hooks ----

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """``hook(grad) -> Tensor or None``, called with the gradient of this tensor.

        A returned tensor replaces the gradient. Runs on the worker that runs
        the consuming node, in the context of the backward's caller. Must not
        modify ``grad`` in place.
        """
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        wrapped = _TensorHook(hook, self.device)
        if self.grad_fn is not None:
            return self.grad_fn._register_tensor_pre_hook(self.output_nr, wrapped)
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(wrapped)
        self._hooks_added()
        return RemovableHandle(self._hooks, wrapped, self)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Any:
        """``hook(tensor) -> None``, called after backward wrote this leaf's ``.grad``."""
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = []
        self._post_acc_hooks.append(hook)
        self._hooks_added()
        return RemovableHandle(self._post_acc_hooks, hook, self)

    def _hooks_added(self) -> None:
        """A leaf got a hook: its AccumulateGrad (if made yet) must call it (Note
        [Has-hooks flag] in ``graph/_node.py``; a new one reads the hooks itself)."""
        acc = self._accumulator
        if acc is not None:
            acc.has_hooks = True

    def _hooks_removed(self) -> None:
        """A leaf's hook was removed through its handle: its AccumulateGrad recomputes."""
        acc = self._accumulator
        if acc is not None:
            acc._hooks_removed()

    # ---- conversion ----

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """For copy and pickle: every slot but ``_views`` (a copy has no views yet)."""
        _, slots = cast("tuple[None, dict[str, Any]]", super().__getstate__())
        return None, {**slots, "_views": None}

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's array and version counter."""
        t = Tensor._wrap(self.data, self.device)
        t._vc = self._vc
        return t

    def detach_(self) -> Tensor:
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self.output_nr = 0
        self._rg = False
        return self

    def numpy(self) -> Any:  # a numpy.ndarray (``numpy`` here is this method)
        """The array itself (no copy); refused for a tensor that requires grad while grad
        mode is on (so allowed in a custom Function's forward and backward), as PyTorch."""
        if self._rg and _grad_enabled.get():
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        if self.device is not CPU:
            raise TypeError(
                f"can't convert {self.device} tensor to numpy. Use Tensor.cpu() to copy the "
                "tensor to host memory first."
            )
        return self.data

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def item(self) -> Any:
        if self.data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self.data.size} elements cannot be converted to Scalar"
            )
        return self.data.reshape(()).item()

    def tolist(self) -> Any:
        return self.device.backend.to_host(self.data).tolist()

    def _scalar(self) -> Any:
        """The one element, for ``float()``/``int()`` (ValueError otherwise, as PyTorch)."""
        if self.data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.data.reshape(()).item()

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __index__(self) -> int:
        if self.data.dtype.kind not in "iu" or self.data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.data.size != 1:
            many = "more than one value" if self.data.size else "no values"
            raise RuntimeError(f"Boolean value of Tensor with {many} is ambiguous")
        return bool(self.item())

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.data.shape[0])

    def __iter__(self) -> Iterator[Tensor]:
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self.data.shape[0]):
            yield self[i]

    __hash__ = object.__hash__

    # ---- new tensors like this one ----

    def type_as(self, other: Tensor) -> Tensor:
        """This tensor with ``other``'s dtype and device (``self`` if they match)."""
        if not isinstance(other, Tensor):
            raise TypeError("type_as(): argument 'other' (position 1) must be Tensor, not "
                            f"{type(other).__name__}")
        return self.to(other.device, other.dtype)

    def _new_defaults(self, dtype: Any, device: Any) -> dict[str, Any]:
        """The ``new_*`` factories' dtype and device: this tensor's unless given."""
        return {"dtype": self.dtype if dtype is None else dtype,
                "device": self.device if device is None else device}

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None,
                   requires_grad: bool = False) -> Tensor:
        """:func:`tensor` with this tensor's dtype and device as the defaults."""
        return tensor(data, **self._new_defaults(dtype, device), requires_grad=requires_grad)

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
        """:func:`zeros` with this tensor's dtype and device as the defaults."""
        return zeros(*size, **self._new_defaults(dtype, device), requires_grad=requires_grad)

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """:func:`ones` with this tensor's dtype and device as the defaults."""
        return ones(*size, **self._new_defaults(dtype, device), requires_grad=requires_grad)

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
        """:func:`empty` with this tensor's dtype and device as the defaults."""
        return empty(*size, **self._new_defaults(dtype, device), requires_grad=requires_grad)

    def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """:func:`full` with this tensor's dtype and device as the defaults (a float
        ``fill_value`` is truncated into an integer tensor, as PyTorch)."""
        return full(size, fill_value, **self._new_defaults(dtype, device),
                    requires_grad=requires_grad)

    def __format__(self, format_spec: str) -> str:
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``), as PyTorch's; others
        (and subclasses) as objects do."""
        if self.data.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __repr__(self) -> str:
        body = numpy.array2string(
            self.device.backend.to_host(self.data), separator=", ", prefix="tensor("
        )
        extras = []
        if self.device is not CPU:
            extras.append(f"device='{self.device}'")
        if self.data.dtype not in (float32, int64, bool_):
            extras.append(f"dtype={self.data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._rg:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body, *extras]) + ")"

    # ---- differentiation ----

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
        *,
        deadline: float | None = None,
    ) -> Awaitable[None]:
        """``await t.backward()``: see :func:`aiograd.backward` and Note [Forgotten await]."""
        from .autograd import backward

        return backward(self, gradient, retain_graph, create_graph, inputs, deadline=deadline)

    def backward_sync(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Blocking form of :meth:`backward` for scripts and sync backward functions."""
        from .autograd import backward_sync

        backward_sync(self, gradient, retain_graph=retain_graph, create_graph=create_graph,
                      inputs=inputs)


def _dim_out_of_range(dim: Any, ndim: int) -> str:
    if ndim == 0:
        return f"Dimension specified as {dim} but tensor has no dimensions"
    return (
        f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})"
    )


class _TensorHook:
    """Adapts a user tensor hook to the engine, which passes raw arrays.

    Contract: ``hook(grad: Tensor) -> Tensor | None``, and ``hook(None)`` for an output
    that gets no gradient (PyTorch's). Called on the thread running the consuming node.
    """

    __slots__ = ("fn", "device")

    def __init__(self, fn: Callable[[Any], Any], device: Device) -> None:
        self.fn = fn
        self.device = device

    def __call__(self, grad: Any) -> Any:
        if grad is None:  # an output that gets no gradient: the hook sees None (PyTorch's)
            if self.fn(None) is not None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
            return None
        is_tensor = isinstance(grad, Tensor)
        result = self.fn(grad if is_tensor else Tensor._wrap(grad, self.device))
        if result is None:
            return grad
        if not isinstance(result, Tensor):
            raise TypeError(
                f"a tensor hook must return a Tensor or None, got {type(result).__name__}"
            )
        if result.shape != grad.shape:
            raise RuntimeError(
                f"a tensor hook returned a gradient of shape {tuple(result.shape)} for a "
                f"gradient of shape {tuple(grad.shape)}; hooks must keep the shape"
            )
        if result.dtype != grad.dtype:
            raise RuntimeError(
                f"a tensor hook changed the dtype of the gradient from {grad.dtype} to "
                f"{result.dtype}; hooks must keep the dtype"
            )
        expected = grad.device if is_tensor else self.device
        if result.device is not expected:
            raise RuntimeError(
                f"a tensor hook moved the gradient from {expected} to {result.device}; "
                "hooks must keep the device"
            )
        return result if is_tensor else result.data

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _TensorHook) and other.fn is self.fn)

    __hash__ = object.__hash__


# ---- factories ----

_NUMERIC_KINDS = "biufc"


def _resolve_dtype(dtype: Any) -> numpy.dtype | None:
    if dtype is None:
        return None
    try:
        resolved = numpy.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):
        raise TypeError(f"unknown dtype {dtype!r}") from None
    if resolved.kind not in _NUMERIC_KINDS:
        raise TypeError(f"dtype must be numeric (bool, integer, float, complex), got {resolved}")
    return resolved


def _check_numeric(arr: numpy.ndarray) -> numpy.ndarray:
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"tensor() needs numbers (bool, int, float or complex), got data of dtype {arr.dtype}"
        )
    return arr


def _place(array: numpy.ndarray, device: Any) -> tuple[Any, Device]:
    dev = devices.device(device) if device is not None else CPU
    if dev is CPU:
        return array, dev
    return dev.backend.from_host(array, dev.index), dev


def _finish(data: Any, dev: Device, requires_grad: bool) -> Tensor:
    if not isinstance(requires_grad, bool):
        raise TypeError(
            f"argument 'requires_grad' must be bool, not {type(requires_grad).__name__}"
        )
    t = Tensor._wrap(data, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(
    data: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A new leaf tensor holding a copy of ``data``.

    The dtype is PyTorch's: each number brings its own (a Python float gives
    float32, the default dtype; an int gives int64, a bool bool; NumPy
    scalars, arrays and tensors keep theirs) and they are promoted together:
    ``[np.float64(1.5)]`` gives float64, ``[np.int32(1), 2]`` int64.
    """
    dt = _resolve_dtype(dtype)
    if isinstance(data, Tensor):
        src = data.device.backend.to_host(data.data)
        arr = numpy.array(src, dtype=dt, copy=True)
        return _finish(*_place(arr, device if device is not None else data.device), requires_grad)
    if isinstance(data, numpy.ndarray) or isinstance(data, numpy.generic):
        arr = _check_numeric(numpy.array(data, dtype=dt, copy=True))
    else:
        dev = devices.device(device) if device is not None else CPU
        if dev is not CPU and dev.backend.owns(data):
            arr = dev.xp.array(data, dtype=dt, copy=True)
            return _finish(arr, dev, requires_grad)
        for backend in devices.backends().values():
            if backend.name != "cpu" and backend.owns(data):
                src_dev = devices.device(backend.name, backend.device_index(data))
                arr = numpy.array(backend.to_host(data), dtype=dt)
                return _finish(*_place(arr, device if device is not None else src_dev),
                               requires_grad)
        if type(data) is range:  # a sequence of ints, as PyTorch reads it (empty: float32)
            data = list(data)
        arr = _from_python(data, dt)
    return _finish(*_place(arr, device), requires_grad)


def set_default_dtype(d: Any) -> None:
    """Make ``d`` (float32, float64 or float16) the default floating dtype, as PyTorch's
    ``set_default_dtype``: what Python floats, float promotions of integer tensors and
    the factories without ``dtype=`` give (``aiograd/_defaults.py``). Process-wide."""
    try:
        dt = _resolve_dtype(d)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.kind != "f":
        raise TypeError(f"set_default_dtype(): only floating-point types are supported as "
                        f"the default type, got {d!r}")
    _defaults.FLOAT = dt


def get_default_dtype() -> numpy.dtype:
    """The default floating dtype (float32 unless ``set_default_dtype`` changed it)."""
    return _defaults.FLOAT


# A Python int's and bool's dtype in tensor() (a float's is the default: _python_dtype).
_PYTHON_DTYPES: dict[type, numpy.dtype] = {int: int64, bool: bool_}


def _python_dtype(kind: type) -> numpy.dtype | None:
    """PyTorch's dtype for a Python number of type ``kind``; None for other types."""
    return _defaults.FLOAT if kind is float else _PYTHON_DTYPES.get(kind)
_SEQUENCES = frozenset((list, tuple))


def _leaf_dtype(kind: type, level: list[Any]) -> numpy.dtype:
    """The promoted dtype of the elements of type ``kind`` (not a list or tuple) in the
    sequences ``level``."""
    dt = _python_dtype(kind)
    if dt is not None:
        return dt
    if issubclass(kind, (str, bytes)):
        raise TypeError(f"tensor(): invalid data type '{kind.__name__}'")
    if issubclass(kind, numpy.generic):
        return numpy.dtype(kind)
    if kind is type(None):
        raise TypeError("tensor(): Could not infer dtype of NoneType")
    found = [x.dtype if hasattr(x, "dtype") else numpy.asarray(x).dtype
             for x in itertools.chain.from_iterable(level) if type(x) is kind]
    return _promoted(found)


def _promoted(dtypes: Sequence[numpy.dtype]) -> numpy.dtype:
    from ._ops._promote import promote_types  # ops import this module: import when used

    result = dtypes[0]
    for dt in dtypes[1:]:
        result = promote_types(result, dt)
    return result


def _inferred_dtype(data: Any) -> numpy.dtype:
    """PyTorch's dtype for ``data``, Python numbers or (nested) lists and tuples of
    numbers, NumPy scalars, arrays and tensors. Empty data is float32.

    Reads the types one nesting level at a time, each level's elements chained
    (``set(map(type, ...))`` runs in C), which costs less than the NumPy
    conversion that follows.
    """
    if type(data) not in _SEQUENCES:
        return _leaf_dtype(type(data), [(data,)])
    kinds = set(map(type, data))
    if len(kinds) == 1:  # the common case: a flat list of one kind of Python number
        dt = _python_dtype(next(iter(kinds)))
        if dt is not None:
            return dt
    level: list[Any] = [data]
    found: list[numpy.dtype] = []
    while level:
        kinds = set(map(type, itertools.chain.from_iterable(level)))
        nested = kinds & _SEQUENCES
        for kind in kinds - nested:
            dt = _leaf_dtype(kind, level)
            if dt not in found:
                found.append(dt)
        if not nested:
            break
        if nested == kinds:
            level = list(itertools.chain.from_iterable(level))
        else:
            level = [x for x in itertools.chain.from_iterable(level) if type(x) in nested]
    if not found:
        return _defaults.FLOAT
    return found[0] if len(found) == 1 else _promoted(found)


def _ragged_message(data: Any) -> str | None:
    """PyTorch's complaint about nested lists of unequal lengths, or None if there is none.

    The expected shape is read along the first elements, as PyTorch does.
    """
    shape = []
    x = data
    while isinstance(x, (list, tuple)):
        shape.append(len(x))
        if not x:
            break
        x = x[0]

    def check(seq: Any, dim: int) -> str | None:
        if len(seq) != shape[dim]:
            return f"expected sequence of length {shape[dim]} at dim {dim} (got {len(seq)})"
        if dim + 1 < len(shape):
            for item in seq:
                if not isinstance(item, (list, tuple)):
                    return "not a sequence"
                message = check(item, dim + 1)
                if message is not None:
                    return message
        return None

    return check(data, 0) if shape else None


def _leaves(data: Any) -> Iterator[Any]:
    if isinstance(data, (list, tuple)):
        for x in data:
            yield from _leaves(x)
    else:
        yield data


def _out_of_range(data: Any, dt: numpy.dtype) -> numpy.ndarray:
    """``data`` as ``dt`` when NumPy found an integer out of its range: PyTorch raises,
    ValueError beyond int64 (``2**63``), RuntimeError beyond ``dt``, except that uint8
    takes negative values modulo 256 (``-1`` is 255)."""
    ints = [x for x in _leaves(data) if type(x) is int]
    if any(not -(2**63) <= x < 2**63 for x in ints):
        raise ValueError("Overflow when unpacking long long")
    if dt == uint8 and all(x <= 255 for x in ints):
        return numpy.array(data, dtype=int64).astype(uint8)
    raise RuntimeError(f"value cannot be converted to type {dt} without overflow")


def _holds_tensors(data: Any) -> bool:
    """True if the nested lists and tuples ``data`` hold a Tensor (one level at a time)."""
    level = [data]
    while level:
        kinds = set(map(type, itertools.chain.from_iterable(level)))
        if Tensor in kinds:
            return True
        level = [x for x in itertools.chain.from_iterable(level) if type(x) in _SEQUENCES]
    return False


def _tensors_as_scalars(data: Any) -> Any:
    """``data`` with each Tensor replaced by its one element (a 0-d array keeping its
    dtype), as PyTorch reads tensors nested in lists."""
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return numpy.asarray(data.device.backend.to_host(data.data)).reshape(())
    if type(data) in _SEQUENCES:
        return [_tensors_as_scalars(x) for x in data]
    return data


def _from_python(data: Any, dt: numpy.dtype | None) -> numpy.ndarray:
    if isinstance(data, (str, bytes)):
        raise TypeError(f"tensor(): invalid data type '{type(data).__name__}'")
    if type(data) in _SEQUENCES and _holds_tensors(data):
        data = _tensors_as_scalars(data)
    if dt is None:
        dt = _inferred_dtype(data)
    try:
        arr = numpy.array(data, dtype=dt)
    except OverflowError:
        arr = _out_of_range(data, dt)
    except (ValueError, TypeError) as exc:
        ragged = _ragged_message(data)
        if ragged is not None:
            raise TypeError(f"tensor(): {ragged}") from None
        raise TypeError(f"tensor() cannot make a tensor from this data: {exc}") from None
    if arr.dtype == object:
        raise TypeError("tensor() needs numbers or nested sequences of numbers of equal length")
    return _check_numeric(arr)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, without a copy when it can be.

    A Tensor of the asked dtype and device is returned itself (else converted
    with ``to``, which records the conversion); a NumPy array of the asked
    dtype for the CPU is shared, as :func:`from_numpy`; anything else is
    copied, as :func:`tensor`.
    """
    if isinstance(data, Tensor):
        return data.to(data.device if device is None else device, dtype)
    if isinstance(data, numpy.ndarray):
        dt = _resolve_dtype(dtype)
        dev = CPU if device is None else devices.device(device)
        if dev is CPU and (dt is None or dt == data.dtype):
            return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def from_numpy(array: numpy.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array`` (no copy)."""
    if not isinstance(array, numpy.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    return Tensor._wrap(_check_numeric(array), CPU)


def _is_int(value: object) -> bool:
    """An integer argument: a Python or NumPy int, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _shape_arg(size: Sequence[Any], fn: str) -> tuple[int, ...]:
    """The shape ``fn`` was given, as one sequence or as separate ints."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not _is_int(s) or s < 0:
            raise ValueError(f"{fn}(): sizes must be non-negative ints, got {tuple(size)!r}")
    return tuple(int(s) for s in size)


def _default_float(dtype: Any) -> numpy.dtype:
    dt = _resolve_dtype(dtype)
    return _defaults.FLOAT if dt is None else dt


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    arr = numpy.zeros(_shape_arg(size, "zeros"), dtype=_default_float(dtype))
    return _finish(*_place(arr, device), requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    arr = numpy.ones(_shape_arg(size, "ones"), dtype=_default_float(dtype))
    return _finish(*_place(arr, device), requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor whose values are whatever the memory held (as PyTorch's)."""
    arr = numpy.empty(_shape_arg(size, "empty"), dtype=_default_float(dtype))
    return _finish(*_place(arr, device), requires_grad)


def full(size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    shape = _shape_arg((size,) if not isinstance(size, (tuple, list)) else (tuple(size),), "full")
    if isinstance(fill_value, numpy.bool_):  # PyTorch reads NumPy's bool as a float
        fill_value = float(fill_value)
    if not isinstance(fill_value, (bool, numbers.Real)):
        raise TypeError(
            f"argument 'fill_value' must be a real number, not {type(fill_value).__name__}"
        )
    dt = _resolve_dtype(dtype)
    if dt is None:  # PyTorch's: bool, int64 for any integer (NumPy's too), else the default
        if isinstance(fill_value, bool):
            dt = bool_
        elif isinstance(fill_value, numbers.Integral):
            dt = int64
        else:
            dt = _defaults.FLOAT
    arr = numpy.full(shape, checked_fill(fill_value, numpy.dtype(dt)), dtype=dt)
    return _finish(*_place(arr, device), requires_grad)


_FILL_TYPE_NAMES = {"int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t",
                    "uint8": "uint8_t", "float16": "c10::Half", "float32": "float"}


def checked_fill(value: Any, dt: numpy.dtype) -> Any:
    """``value`` to write into ``dt``, with PyTorch's overflow check (c10's ``overflows``):
    an integer must fit, an unsigned type also taking a negative one down to ``-max``
    (it wraps); a float into an integer type must be finite and in range; a float type
    takes inf and NaN but no finite value beyond its largest. Bool takes anything."""
    if dt.kind == "b" or isinstance(value, bool):
        return value
    if dt.kind in "iu":
        info = numpy.iinfo(dt)
        if isinstance(value, numbers.Integral):
            v = int(value)
            if v <= info.max and (v >= info.min if dt.kind == "i" else -v <= info.max):
                return v % (info.max + 1) if v < 0 and dt.kind == "u" else value
        elif math.isfinite(value) and info.min <= value <= info.max:
            return value
    elif dt.kind != "f" or not math.isfinite(value) or abs(value) <= float(numpy.finfo(dt).max):
        return value
    name = _FILL_TYPE_NAMES.get(dt.name, dt.name)
    raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def _real_arg(fn: str, name: str, value: Any) -> Any:
    """A number argument of ``arange``/``linspace``; a 0-d tensor gives its value."""
    if isinstance(value, Tensor) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}")
    return value


def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` below ``end``, as PyTorch computes them: an integer
    dtype truncates the bounds and the step first (and wraps, as a cast); a float one
    takes each value as ``start + i * step`` in float64, then rounds it (NumPy adds a
    rounded step again and again, drifting by several ulps; PyTorch's vectorised kernel
    steps in the result's precision inside each vector: within its last bit)."""
    if end is None:
        start, end = 0, start
    start = _real_arg("arange", "start", start)
    end = _real_arg("arange", "end", end)
    step = _real_arg("arange", "step", step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    dt = _resolve_dtype(dtype)
    if dt is None:
        is_int = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dt = int64 if is_int else _defaults.FLOAT
    integral = dt.kind in "iu"
    if integral:
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            raise ValueError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if integral:
        arr = numpy.arange(start, end, step, dtype=int64).astype(dt, copy=False)
    else:
        count = math.ceil((end - start) / step)
        arr = (start + numpy.arange(count, dtype=float64) * step).astype(dt)
    return _finish(*_place(arr, device), requires_grad)


def linspace(start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` values evenly spaced from ``start`` to ``end`` (both included).

    As PyTorch's: computed in the result's dtype (float32 by default), the
    first half stepping up from ``start`` and the second down from ``end``
    (the ends are exact; inner values may differ from PyTorch's in the last
    bit, as its SIMD kernel's do between CPUs); an integer dtype truncates
    the float values.
    """
    start = _real_arg("linspace", "start", start)
    end = _real_arg("linspace", "end", end)
    if not _is_int(steps):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = _default_float(dtype)
    if dt.kind == "b":
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    work = dt if dt.kind == "f" else float64
    arr = numpy.empty(int(steps), dtype=work)
    if steps == 1:
        arr[0] = start
    elif steps > 1:
        first, last = work.type(start), work.type(end)
        step = (last - first) / work.type(steps - 1)
        index = numpy.arange(steps, dtype=work)
        half = steps // 2
        arr[:half] = first + step * index[:half]
        arr[half:] = last - step * (work.type(steps - 1) - index[half:])
    if work is not dt:
        arr = numpy.trunc(arr).astype(dt)
    return _finish(*_place(arr, device), requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    for name, value in (("n", n), ("m", m)):
        if (value is not None or name == "n") and not _is_int(value):
            raise TypeError(f"eye(): argument '{name}' must be int, not {type(value).__name__}")
        if value is not None and value < 0:
            raise ValueError(f"{name} must be greater or equal to 0, got {value}")
    arr = numpy.eye(n, m, dtype=_default_float(dtype))
    return _finish(*_place(arr, device), requires_grad)


def _random_dtype(dtype: Any, kernel: str) -> numpy.dtype:
    """float32 by default; a bool or integer dtype raises, as in PyTorch."""
    dt = _default_float(dtype)
    if dt.kind not in "fc":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_type_name(dt)}'")
    return dt


def randn(*size: Any, generator: Any = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Draws from N(0, 1), from ``generator`` or the default one (aiograd._random)."""
    dt = _random_dtype(dtype, "normal_kernel_cpu")
    shape = _shape_arg(size, "randn")
    arr = _random.draw(generator, lambda g: g.standard_normal(shape), "randn").astype(dt)
    return _finish(*_place(arr, device), requires_grad)


def rand(*size: Any, generator: Any = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Draws from U(0, 1), from ``generator`` or the default one (aiograd._random)."""
    dt = _random_dtype(dtype, "check_uniform_bounds")
    shape = _shape_arg(size, "rand")
    arr = _random.draw(generator, lambda g: g.random(shape), "rand").astype(dt)
    return _finish(*_place(arr, device), requires_grad)


def randint(low: int, high: Any = None, size: Any = None, *, generator: Any = None,
            dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from ``[low, high)`` (``randint(high, size)``: from 0),
    int64 unless ``dtype`` says otherwise, as PyTorch's."""
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if size is None or high is None:
        raise TypeError("randint() missing required arguments: 'high' and 'size'")
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"randint(): argument '{name}' must be int, not "
                            f"{type(value).__name__}")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    dt = _resolve_dtype(dtype) or numpy.dtype(numpy.int64)
    shape = _shape_arg((tuple(size),) if isinstance(size, (tuple, list)) else (size,), "randint")
    arr = _random.draw(generator, lambda g: g.integers(low, high, shape), "randint").astype(dt)
    return _finish(*_place(arr, device), requires_grad)


def _like(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def like(t: Tensor, *args: Any, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn.__name__}_like expects a Tensor, got {type(t).__name__}")
        return fn(t.shape, *args, dtype=t.dtype if dtype is None else dtype,
                  device=t.device if device is None else device, requires_grad=requires_grad)

    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = f"Like :func:`{fn.__name__}` with the shape, dtype and device of ``t``."
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
full_like = _like(full)
randn_like = _like(randn)
rand_like = _like(rand)
