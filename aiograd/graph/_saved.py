"""Saved tensors: what a node keeps from the forward pass for its backward.

A :class:`SavedTensor` records the tensor's array and the version of its
version counter at save time; unpacking checks the version, so an in-place
change after saving raises instead of silently giving a wrong gradient.
``release`` frees the array (``retain_graph=False``); unpacking afterwards
raises the "backward through the graph a second time" error.

A node that saves its own output keeps only the array, never the output
tensor, and rebuilds it on unpack (see Note [No reference cycles]).

``saved_tensors_hooks(pack, unpack)`` replaces what is kept by
``pack(tensor)`` and gives it back through ``unpack(packed) -> Tensor``.
The hooks are taken from the context of the forward call; ``pack`` runs in
the forward (caller's thread), ``unpack`` in the backward (on a device worker
or on the loop), once per use. Neither may modify the tensor it is given.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._tensor import Tensor
    from ._node import Node

__all__ = ["SavedTensor", "disable_saved_tensors_hooks", "save_on_cpu", "saved_tensors_hooks"]

_hooks: contextvars.ContextVar[tuple[tuple[Callable[..., Any], Callable[..., Any]], ...]] = (
    contextvars.ContextVar("aiograd_saved_tensors_hooks", default=())
)
_hooks_disabled: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aiograd_saved_tensors_hooks_disabled", default=None
)

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the "
    "graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)


class saved_tensors_hooks:
    """Context manager: pack/unpack hooks for tensors saved inside the block.

    ``pack(tensor) -> Any`` is called when an operation saves ``tensor``;
    ``unpack(packed) -> Tensor`` when the backward needs it and must return a
    tensor with the same shape, dtype and values. Hooks nest; the innermost
    applies.
    """

    def __init__(self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks expects two callables: pack_hook, unpack_hook")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook
        self._token: contextvars.Token[Any] | None = None

    def __enter__(self) -> saved_tensors_hooks:
        message = _hooks_disabled.get()
        if message is not None:
            raise RuntimeError(message)
        self._token = _hooks.set(_hooks.get() + ((self.pack_hook, self.unpack_hook),))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _hooks.reset(self._token)


class save_on_cpu(saved_tensors_hooks):
    """Context manager: tensors saved inside the block are kept in host memory.

    Each one is copied to the CPU when saved (a CPU tensor is kept as it is)
    and copied back to its device when the backward unpacks it, as PyTorch's
    ``torch.autograd.graph.save_on_cpu``: device memory is traded for copies.
    ``pin_memory`` and ``device_type`` are accepted for PyTorch's signature;
    aiograd's backends copy through plain host memory, and every device's
    tensors are moved, so they change nothing.
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor: Tensor) -> tuple[Any, Tensor]:
            return tensor.device, tensor.cpu()

        def unpack_from_cpu(packed: tuple[Any, Tensor]) -> Tensor:
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:
    """Context manager that makes entering ``saved_tensors_hooks`` an error."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> None:
        if _hooks.get():  # inside saved_tensors_hooks (a checkpoint's too), as PyTorch
            raise RuntimeError(self.error_message)
        self._token = _hooks_disabled.set(self.error_message)
        self._hooks_token = _hooks.set(())

    def __exit__(self, *exc: object) -> None:
        _hooks.reset(self._hooks_token)
        _hooks_disabled.reset(self._token)


class SavedTensor:
    """One saved tensor of a node.

    ``data`` is the array (None once released, or when packed by a hook);
    ``vc``/``version`` are the version counter and its value at save time.
    For ``create_graph`` the tensor is rebuilt with its history: an input is
    kept as ``tensor`` (None for the node's own output, whose grad_fn is the
    owner), and unpacking reads the input's current ``.data``, as PyTorch
    keeps the input itself: an assigned ``.data`` is seen (in-place writes
    are caught by the version check). With a pack hook only the history is kept (``grad_fn`` and
    ``output_nr``, or the leaf itself), so the hook decides where the array
    lives.
    """

    __slots__ = ("data", "tensor", "grad_fn", "output_nr", "is_output", "vc", "version",
                 "packed", "unpack_hook", "device")

    data: Any
    tensor: Tensor | None
    grad_fn: Node | None
    output_nr: int
    is_output: bool
    vc: Any  # the tensor's _VersionCounter
    version: int
    packed: Any
    unpack_hook: Callable[[Any], Any] | None
    device: Any

    def __init__(self, t: Tensor, is_output: bool) -> None:
        self.vc = t._vc
        self.version = t._vc.value
        self.output_nr = t.output_nr
        self.device = t.device
        self.is_output = is_output
        self.grad_fn = None
        hooks = _hooks.get()
        if hooks:
            pack, self.unpack_hook = hooks[-1]
            self.data = None
            self.packed = pack(t)
            if is_output and self.packed is t:
                # Holding our own output would be a cycle node -> saved -> t -> node.
                self.packed = t.detach()
            if is_output:
                self.tensor = None
            elif t.grad_fn is None:
                self.tensor = t if t._rg else None  # a leaf: keep it, it is the grad target
            else:
                self.tensor = None
                self.grad_fn = t.grad_fn
        else:
            self.data = t.data
            self.packed = None
            self.unpack_hook = None
            self.tensor = None if is_output else t

    def unpack(self, owner: Node | None, create_graph: bool) -> Any:
        """The saved value: an array, or a Tensor with history when ``create_graph``.
        ``owner`` is the node that saved it; None only for a saved input (not an
        output), where it is never read."""
        data = self.data
        t = self.tensor
        if data is None:  # not version-checked: the hooks decide what is kept (as PyTorch)
            data = self._unpack_hooked()
        else:
            if t is not None:  # the input itself, as PyTorch keeps it: a new .data is seen
                data = t.data
            if self.vc.value != self.version:
                self._raise_modified(owner)
        if not create_graph:
            return data
        if t is not None and t.data is data:
            return t
        from .._tensor import Tensor

        out = Tensor._wrap(data, self.device)
        grad_fn = owner if self.is_output else self.grad_fn
        if t is not None:  # a leaf, or an input whose .data was replaced
            grad_fn = t.grad_fn
            if grad_fn is None:
                if not t._rg:
                    return out
                # an unpack hook's value for a leaf: its gradient goes to the leaf
                from ._node import grad_accumulator

                out.grad_fn, out.output_nr = grad_accumulator(t), 0
                out._rg = True
                return out
        if grad_fn is not None:
            out.grad_fn = grad_fn
            out.output_nr = self.output_nr
            out._rg = True
        return out

    def _unpack_hooked(self) -> Any:
        if self.unpack_hook is None:  # released: neither the array nor a hook is left
            raise RuntimeError(ERR_BACKWARD_TWICE)
        from .._tensor import Tensor

        t = self.unpack_hook(self.packed)
        if not isinstance(t, Tensor):
            raise TypeError(
                "the unpack hook of saved_tensors_hooks must return a Tensor, "
                f"got {type(t).__name__}"
            )
        return t.data

    def _raise_modified(self, owner: Node | None) -> None:
        """PyTorch's message: the producer is named without its ``Backward<N>`` suffix,
        and not at all for a leaf; the tensor as aiograd names it (``[float32 [2]]``
        where PyTorch prints ``[torch.FloatTensor [2]]``)."""
        data = self.data
        producer = owner if self.is_output else self.grad_fn
        if producer is None and self.tensor is not None:
            producer = self.tensor.grad_fn
        output = ""
        if producer is not None:
            name = re.sub(r"Backward\d*$", "", producer.name())
            output = f", which is output {self.output_nr} of {name},"
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by "
            f"an inplace operation: [{_described(data, self.device)}]{output} is at "
            f"version {self.vc.value}; expected version {self.version} instead. Hint: "
            "enable anomaly detection to find the operation that failed to compute its "
            "gradient, with aiograd.set_detect_anomaly(True, check_nan=False)."
        )

    def release(self) -> None:
        self.data = None
        self.packed = None
        self.unpack_hook = None
        self.tensor = None
        self.grad_fn = None


def _described(data: Any, device: Any) -> str:
    """A saved array as the version-counter error names it: ``float32 [2]``, with
    `` on cuda:0`` off the CPU."""
    where = "" if device.type == "cpu" else f" on {device}"
    return f"{data.dtype} {list(data.shape)}{where}"
