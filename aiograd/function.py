"""Custom differentiable functions (PyTorch's ``torch.autograd.Function``).

    class Exp(aiograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):        # may be ``async def``
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

``forward`` runs with grad mode off. ``backward`` gets one Tensor gradient
per output and returns one gradient per ``forward`` argument (None for
arguments that are not tensors or need no gradient). A sync ``backward``
runs on a device worker; an ``async def backward`` runs on the event loop of
the backward's caller and may ``await`` (I/O, or a nested ``aiograd.grad``).
Both run with grad mode equal to ``create_graph`` and the caller's context.

The ``ctx`` is the graph node itself (``<Name>Backward``), as in PyTorch.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

import numpy

from ._ops.views import mark_forbidden_view
from ._tensor import Tensor
from .devices import CPU
from .grad_mode import _grad_enabled, no_grad
from .graph._node import InputMetadata, Node, gradient_edge
from .graph._saved import SavedTensor

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` of a custom Function: what forward leaves for backward."""

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save tensors for backward; version-checked when read via ``saved_tensors``."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save Tensors or None, got {type(t).__name__}"
                )
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        saved = self.__dict__.get("_saved")
        if saved is None:  # none saved, or still in forward: PyTorch's empty tuple
            return ()
        return tuple(None if s is None else s.unpack(self, True) for s in saved)

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Outputs that get no grad_fn (e.g. indices)."""
        self._non_differentiable = set(map(id, tensors))

    def set_materialize_grads(self, value: bool) -> None:
        """If False, backward gets None (not zeros) for outputs that got no gradient."""
        self._materialize_grads = bool(value)

    def mark_dirty(self, *tensors: Tensor) -> None:
        raise NotImplementedError("in-place custom Functions (mark_dirty) are not supported")


class _FunctionBackward(Node, FunctionCtx):
    """Base of the generated ``<Name>Backward`` node classes. Instances are the ctx."""

    runs_without_grads = True  # backward gets zeros (materialized) or Nones
    _function: type[Function]
    #: None if every output of forward is a Tensor; else (number of outputs,
    #: positions of the Tensor ones): backward gets None for the others
    _output_layout: tuple[int, tuple[int, ...]] | None = None

    def __init__(self) -> None:
        super().__init__()
        self._materialize_grads = True
        self._non_differentiable: set[int] = set()
        self.needs_input_grad: tuple[bool, ...] = ()
        self._tensor_positions: tuple[int, ...] = ()
        self._num_args = 0

    def name(self) -> str:
        return f"{self._function.__name__}Backward"

    def _grads_in(self, grads: list[Any], create_graph: bool) -> list[Any]:
        out: list[Tensor | None] = []
        for i, g in enumerate(grads):
            meta = self.input_metadata[i]
            if g is None:
                if not self._materialize_grads:
                    out.append(None)
                    continue
                g = numpy.zeros(meta.shape, dtype=meta.dtype)
                if meta.device is not CPU:
                    g = meta.device.backend.from_host(g, meta.device.index)
            out.append(g if isinstance(g, Tensor) else Tensor._wrap(g, meta.device))
        layout = self._output_layout
        if layout is not None:
            full: list[Any] = [None] * layout[0]
            for position, g in zip(layout[1], out):
                full[position] = g
            return full
        return out

    def _grads_out(self, result: Any, create_graph: bool) -> tuple[Any, ...]:
        if not isinstance(result, tuple):
            result = (result,)
        n = self._num_args
        if len(result) < n or any(r is not None for r in result[n:]):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {n}, got {len(result)})"
            )
        grads = []
        positions = set(self._tensor_positions)
        for i, r in enumerate(result[:n]):
            if i not in positions:
                if r is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at "
                        f"position {i + 1}, but the corresponding forward input was not a Tensor"
                    )
                continue
            if r is not None and not isinstance(r, Tensor):
                raise RuntimeError(  # PyTorch's type and words, and where it happened
                    f"expected Variable or None (got {type(r).__name__}): function "
                    f"{self.name()} returned it as gradient {i}"
                )
            if r is None or create_graph:
                grads.append(r)
            else:
                grads.append(r.data)
        return tuple(grads)

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        result = self._function.backward(self, *self._grads_in(grads, create_graph))
        if inspect.isawaitable(result):
            if isinstance(result, Coroutine):
                result.close()  # never awaited: close it without a "never awaited" warning
            raise RuntimeError(f"{self.name()} has an async backward; the engine must await it")
        return self._grads_out(result, create_graph)

    async def apply_async(self, grads: list[Any], create_graph: bool) -> Any:
        result = await self._function.backward(self, *self._grads_in(grads, create_graph))
        return self._grads_out(result, create_graph)

    def release_variables(self) -> None:
        saved = self.__dict__.get("_saved")
        if saved:
            for s in saved:
                if s is not None:
                    s.release()


class _FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> None:
        super().__init__(name, bases, attrs)
        backward = getattr(cls, "backward", None)  # its own or inherited
        is_async = inspect.iscoroutinefunction(getattr(backward, "__func__", backward))
        node_cls = type(f"{name}Backward", (_FunctionBackward,),
                        {"_function": cls, "is_async": is_async})
        cls._backward_cls = node_cls


class Function(FunctionCtx, metaclass=_FunctionMeta):
    """Base class for custom differentiable operations. Use ``F.apply(...)``."""

    _backward_cls: type[_FunctionBackward]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Function is not meant to be instantiated; call F.apply(...)")

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function must implement forward(ctx, ...)")

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise NotImplementedError("a Function must implement backward(ctx, *grads)")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        """Optional (PyTorch's second style): if a subclass defines it, ``forward``
        takes no ctx, ``forward(*inputs)``, and this fills the ctx from the
        inputs (keywords bound to positions, defaults applied) and the output."""
        raise NotImplementedError("setup_context is not defined")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Function:
            raise NotImplementedError(
                "You must implement the forward function for custom autograd.Function: "
                "call apply on a subclass of Function"
            )
        separate_ctx = cls.setup_context is not Function.setup_context
        if kwargs or separate_ctx:
            args, kwargs = _bind_to_positions(cls.forward, args, kwargs, separate_ctx)
        node = cls._backward_cls()
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        node._tensor_positions = positions
        node._num_args = len(args)
        node.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        record = _grad_enabled.get() and any(node.needs_input_grad)
        with no_grad():
            if separate_ctx:
                outputs = cls.forward(*args, **kwargs)  # kwargs: keyword-only parameters
                cls.setup_context(node, args, outputs)
            else:
                outputs = cls.forward(node, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if not record:  # nothing is recorded, not even history made inside forward
            node.__dict__.pop("_to_save", None)
            outs = tuple(_unrecorded(o, args) for o in outs)
            return outs[0] if single else outs
        node.next_edges = tuple(gradient_edge(args[i]) if args[i]._rg else None
                                for i in positions)
        topo = 0
        for edge in node.next_edges:
            if edge is not None and edge[0].topological_nr >= topo:
                topo = edge[0].topological_nr + 1
        node.topological_nr = topo
        results: list[Any] = []
        metadata = []
        from ._ops._record import _metadata
        from .grad_mode import _anomaly

        for out in outs:
            if not isinstance(out, Tensor):
                results.append(out)
                continue
            differentiable = out.dtype.kind == "f" and id(out) not in node._non_differentiable \
                and id(outputs if single else out) not in node._non_differentiable
            base = out._base  # a view made in forward
            if any(out is a for a in args):
                base = out  # an input returned as is: a new tensor with new history
                out = out.detach()
            metadata.append(_metadata(out.data, out.device))
            if differentiable:
                out.grad_fn = node
                out.output_nr = len(metadata) - 1
                out._rg = True
                if base is not None:  # PyTorch's CreationMeta::IN_CUSTOM_FUNCTION
                    mark_forbidden_view(out, base, "function")
            results.append(out)
        node.input_metadata = tuple(metadata)
        if len(metadata) < len(outs):
            node._output_layout = (len(outs), tuple(
                i for i, out in enumerate(outs) if isinstance(out, Tensor)))
        if _anomaly.get()[0]:
            node._capture_anomaly_trace()
        to_save = node.__dict__.pop("_to_save", ())
        node._saved = tuple(
            None if t is None else SavedTensor(t, t.grad_fn is node) for t in to_save
        )
        return results[0] if single else tuple(results)


def _unrecorded(out: Any, args: tuple[Any, ...]) -> Any:
    """An output of a Function whose call is not recorded, as PyTorch gives it back:
    an input returned as is becomes a new tensor without grad (a view of the input
    if that needs no grad, else detached), history made inside forward is cut."""
    if not isinstance(out, Tensor):
        return out
    if any(out is a for a in args):
        if out._rg:
            return out.detach()
        with no_grad():
            return out.view_as(out)
    return out.detach() if out.grad_fn is not None else out


@functools.lru_cache(maxsize=256)
def _signature(forward: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(forward)


def _bind_to_positions(forward: Callable[..., Any], args: tuple[Any, ...],
                       kwargs: dict[str, Any],
                       separate_ctx: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Keyword arguments of ``apply`` moved to the positions ``forward`` declares them at,
    as PyTorch's ``apply`` does, so a tensor passed by keyword is an input of the node.

    Keywords after the first parameter given neither way stay keywords. A
    ``forward`` without ctx (``separate_ctx``, see ``Function.setup_context``)
    gets its defaults applied too, so that ``setup_context`` sees every input.
    """
    try:
        if separate_ctx:
            bound = _signature(forward).bind(*args, **kwargs)
            bound.apply_defaults()
            return bound.args, bound.kwargs
        bound = _signature(forward).bind(None, *args, **kwargs)  # None: the ctx
    except TypeError as exc:
        raise TypeError(f"{forward.__qualname__}(): {exc}") from None
    return bound.args[1:], bound.kwargs


def once_differentiable(backward: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a ``backward`` as not differentiable: it runs with grad mode off, and
    differentiating its result again raises an error (only results computed from
    gradients that require grad are marked, as in PyTorch)."""

    def mark(result: Any, grads: tuple[Any, ...], ctx: Any) -> Any:
        if not _grad_enabled.get() or not any(
                isinstance(g, Tensor) and g.requires_grad for g in grads):
            return result
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        wrapped = tuple(_delayed_error(r, ctx) if isinstance(r, Tensor) else r for r in outs)
        return wrapped[0] if single else wrapped

    if inspect.iscoroutinefunction(backward):
        @functools.wraps(backward)
        async def async_wrapper(ctx: Any, *grads: Any) -> Any:
            with no_grad():
                result = await backward(ctx, *grads)
            return mark(result, grads, ctx)

        return async_wrapper

    @functools.wraps(backward)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with no_grad():
            result = backward(ctx, *grads)
        return mark(result, grads, ctx)

    return wrapper


class DelayedError(Node):
    """Raises when backpropagated: the gradient came from a once_differentiable backward."""

    __slots__ = ("message",)
    runs_without_grads = True
    message: str

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        raise RuntimeError(self.message)


def _delayed_error(t: Tensor, ctx: Any) -> Tensor:
    node = DelayedError(())
    node.message = (
        "trying to differentiate twice a function that was marked with @once_differentiable"
    )
    node.input_metadata = (InputMetadata(t.shape, t.dtype, t.device, None),)
    out = Tensor._wrap(t.data, t.device)
    out.grad_fn = node
    out._rg = True
    return out
