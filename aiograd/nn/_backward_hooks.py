"""Module backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``).

A call of a module with backward hooks sends its tensor inputs and its
tensor outputs each through one identity node, ``BackwardHookFunctionBackward``
(as PyTorch: ``forward`` gets views of the input tensors, the caller views
of the output tensors). In backward the gradient meets the output node
first and the input node last::

    args --[input node]--> forward's ops --> [output node]--> caller's graph
            full hooks:                        pre-hooks see grad_output;
            hook(module, grad_input,           the result is left for the
                 grad_output)                  input node of the same pass

Note [Module backward hooks]
    One :class:`BackwardHooks` per call holds the hooks registered when the
    call started (removing a hook later does not stop it for graphs already
    built, as in PyTorch) and the layout of the call: how many positional
    args and outputs, and where the tensors among them are. The hooks see
    full-length tuples with None for non-tensors.

    The output node's backward runs the pre-hooks on grad_output (None for
    an output that got no gradient), sends the result on into the module's
    graph and leaves it in ``grad_outputs`` for the input node, whose backward
    calls the full hooks with grad_input (zeros for a tensor arg that needs
    no grad, as PyTorch's) and that grad_output. ``grad_outputs`` is keyed by
    the id of the backward pass, so concurrent passes through one graph
    (``retain_graph``) never see each other's gradients (PyTorch keeps one
    slot). If the input node of a pass runs without its output node having
    run (the gradient reached the inputs another way), no hook is called. An
    entry lives until the input node takes it or, at the latest, until the
    final callbacks of its pass (one drops it): the input node need not run
    (``grad(loss, [weight])`` does not reach it).

    If no tensor arg requires grad there is no input node: the output node
    calls the full hooks with grad_input all None, after PyTorch's warning,
    and they may only return None. If no output requires grad (or grad mode
    is off) there is no output node and no hook runs.

    Both nodes run on the thread that runs the backward pass (a device
    worker, or the thread blocked in ``backward_sync``), in the caller's
    context, and so do the hooks. ``grad_outputs`` is written by the output
    node and popped by the input node of the same pass, which runs after it
    (it is downstream); dict set and pop are atomic under the GIL.

    Between backward passes nothing here refers to a graph node or tensor:
    the nodes own their BackwardHooks (through ``ctx.on_grads``), which owns
    the module and the hooks, so the graph stays free of reference cycles
    (a pass that fails before its final callbacks may leave an entry behind,
    freed with the graph unless its gradients have history into it).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .._tensor import Tensor, legacy_type_name
from ..autograd import current_graph_task_id, queue_callback
from ..function import Function
from ..grad_mode import is_grad_enabled

__all__ = ["BackwardHooks"]

#: ``hook(module, grad_input, grad_output) -> new grad_input or None``
FullBackwardHook = Callable[[Any, Sequence[Any], Sequence[Any]], Any]
#: ``hook(module, grad_output) -> new grad_output or None``
BackwardPreHook = Callable[[Any, Sequence[Any]], Any]


class BackwardHookFunction(Function):
    """The identity on tensors (as views); its backward returns ``on_grads(grads)``.

    ``materialize_grads`` False gives ``on_grads`` None for an output that got
    no gradient. Outputs whose input needs no grad are non-differentiable.
    """

    @staticmethod
    def forward(ctx: Any, on_grads: Callable[[tuple[Any, ...]], tuple[Any, ...]],
                materialize_grads: bool, *tensors: Tensor) -> tuple[Tensor, ...]:
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(materialize_grads)
        views = tuple(t.view_as(t) for t in tensors)
        ctx.mark_non_differentiable(
            *(v for v, t in zip(views, tensors) if not t.requires_grad))
        return views

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return (None, None, *ctx.on_grads(grads))


class BackwardHooks:
    """The backward hooks of one module call. See Note [Module backward hooks]."""

    def __init__(self, module: Any, full_hooks: list[FullBackwardHook],
                 pre_hooks: list[BackwardPreHook]) -> None:
        self.module = module
        self.full_hooks = full_hooks
        self.pre_hooks = pre_hooks
        self.num_inputs = 0
        # None <=> no input node (no tensor arg requires grad, or grad mode was off).
        self.input_positions: tuple[int, ...] | None = None
        self.num_outputs = 0
        self.output_positions: tuple[int, ...] = ()
        # Invariant: grad_outputs[i] is the grad_output of backward pass i from the end of
        # its output node's backward to the start of its input node's or its final callbacks.
        self.grad_outputs: dict[int, Sequence[Any]] = {}

    def wrap_inputs(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args`` with their tensors sent through the input node (if one is needed)."""
        self.num_inputs = len(args)
        wrapped = _through_hook_node(args, self._grads_for_inputs, materialize_grads=True)
        if wrapped is None:
            return args
        self.input_positions, args = wrapped
        return args

    def wrap_outputs(self, output: Any) -> Any:
        """``output`` (a Tensor or a tuple) with its tensors sent through the output node."""
        if not isinstance(output, (Tensor, tuple)):
            warnings.warn(
                "For backward hooks to be called, module output should be a Tensor or a "
                f"tuple of Tensors but received {type(output)}",
                stacklevel=5,  # the caller of Module.__call__ (sync forward)
            )
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        self.num_outputs = len(outputs)
        wrapped = _through_hook_node(outputs, self._grads_for_outputs, materialize_grads=False)
        if wrapped is None:
            return output
        self.output_positions, outputs = wrapped
        return outputs[0] if single else outputs

    def _grads_for_outputs(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        """The output node's backward: pre-hooks, then the full hooks or a hand-over."""
        grad_output = _through_hooks(
            self.pre_hooks, lambda hook, g: hook(self.module, g),
            _spread(grads, self.output_positions, self.num_outputs), "pre hook", "grad_output")
        if self.input_positions is None:
            self._call_full_hooks_without_input_grads(grad_output)
        else:
            key = current_graph_task_id()
            self.grad_outputs[key] = grad_output
            queue_callback(functools.partial(self.grad_outputs.pop, key, None))
        return tuple(grad_output[i] for i in self.output_positions)

    def _grads_for_inputs(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        """The input node's backward: the full hooks, each seeing the last replacement."""
        grad_output = self.grad_outputs.pop(current_graph_task_id(), None)
        if grad_output is None:
            return grads
        positions = self.input_positions
        assert positions is not None  # an input node exists
        grad_input = _through_hooks(
            self.full_hooks, lambda hook, g: hook(self.module, g, grad_output),
            _spread(grads, positions, self.num_inputs), "hook", "grad_input")
        return tuple(grad_input[i] for i in positions)

    def _call_full_hooks_without_input_grads(self, grad_output: Sequence[Any]) -> None:
        warnings.warn(
            "Full backward hook is firing when gradients are computed with respect to module "
            "outputs since no inputs require gradients. See "
            "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
            "#torch.nn.Module.register_full_backward_hook for more details.",
            stacklevel=2,
        )
        grad_input = (None,) * self.num_inputs
        for hook in self.full_hooks:
            result = hook(self.module, grad_input, grad_output)
            if result is not None and not (
                    isinstance(result, tuple) and all(g is None for g in result)):
                raise RuntimeError(
                    "Backward hook for Modules where no input requires gradient should always "
                    "return None or None for all gradients."
                )


def _through_hook_node(values: tuple[Any, ...], on_grads: Callable[..., tuple[Any, ...]],
                       materialize_grads: bool) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
    """The positions of the tensors in ``values``, and ``values`` with those tensors
    replaced by the outputs of one new hook node; None (no node) if grad mode is off
    or no tensor requires grad. A namedtuple keeps its type."""
    positions = tuple(i for i, v in enumerate(values) if isinstance(v, Tensor))
    if not (is_grad_enabled() and any(values[i].requires_grad for i in positions)):
        return None
    views = BackwardHookFunction.apply(
        on_grads, materialize_grads, *(values[i] for i in positions))
    new = list(values)
    for i, view in zip(positions, views):
        new[i] = view
    return positions, tuple(new) if type(values) is tuple else type(values)(*new)


def _through_hooks(hooks: list[Any], call: Callable[[Any, Sequence[Any]], Any],
                   grads: Sequence[Any], kind: str, what: str) -> Sequence[Any]:
    """``grads`` through ``hooks`` in order (``call(hook, grads)``), each seeing the last
    replacement; a hook returns None or a replacement of the same length whose
    gradients keep their slots' shapes and dtypes (PyTorch's errors otherwise)."""
    for hook in hooks:
        result = call(hook, grads)
        if result is None:
            continue
        if len(result) != len(grads):
            raise RuntimeError(
                f"Backward {kind} returned an invalid number of {what}, "
                f"got {len(result)}, but expected {len(grads)}"
            )
        for new, old in zip(result, grads):
            _check_replacement(new, old)
        grads = result
    return grads


def _check_replacement(new: Any, old: Any) -> None:
    """PyTorch's ``check_single_result`` for a module hook's replacement of ``old``
    (PyTorch runs module hooks inside a node hook named ``hook``: its messages say so)."""
    if new is None:
        return
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if new.shape != old.shape:
        raise RuntimeError("hook 'hook' has changed the size of value")
    if new.dtype != old.dtype or new.device is not old.device:
        raise RuntimeError(
            "hook 'hook' has changed the type of value (was "
            f"{legacy_type_name(old.dtype, old.device.type)} got "
            f"{legacy_type_name(new.dtype, new.device.type)})"
        )


def _spread(grads: Sequence[Any], positions: tuple[int, ...], size: int) -> tuple[Any, ...]:
    """A tuple of ``size`` with ``grads`` at ``positions`` and None elsewhere."""
    full: list[Any] = [None] * size
    for i, g in zip(positions, grads):
        full[i] = g
    return tuple(full)
