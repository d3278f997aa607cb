"""Calling hooks from the engine, in PyTorch's order (seed ``call_function``).

For one node: tensor pre-hooks, retains-grad hooks, node pre-hooks, the
function, node post-hooks. Users' hooks see Tensors; the engine passes raw
arrays when ``create_graph`` is off, so arrays are wrapped on the way in and
unwrapped on the way out. All of this runs on the thread running the node
(a worker, or the loop for async nodes), in the caller's context.
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ..devices import device_of_array
from ..graph._node import Node


def _wrap(grad: Any) -> Any:
    if grad is None or isinstance(grad, Tensor):
        return grad
    return Tensor._wrap(grad, device_of_array(grad))


def _unwrap_like(new: Any, old: Any, node: Node, what: str, i: int) -> Any:
    """A node hook's replacement for gradient ``old``: None, or a Tensor of its shape and
    dtype (PyTorch's ``check_single_result``)."""
    if new is None:
        return None
    if not isinstance(new, Tensor):
        raise TypeError(
            f"{what} of {node.name()} returned a {type(new).__name__} at index {i}; "
            "expected a Tensor or None"
        )
    if old is None:
        raise RuntimeError(
            f"{what} of {node.name()} returned a gradient at index {i}, where there was "
            "none: can't replace a None gradient with a non-None value"
        )
    if new.shape != old.shape:
        raise RuntimeError(
            f"{what} of {node.name()} returned a gradient of shape {tuple(new.shape)} at "
            f"index {i}; expected {tuple(old.shape)}"
        )
    if new.dtype != old.dtype:
        raise RuntimeError(
            f"{what} of {node.name()} returned a gradient of dtype {new.dtype} at index "
            f"{i}; expected {old.dtype}"
        )
    return new if isinstance(old, Tensor) else new.data


def call_tensor_pre_hooks(node: Node, inputs: list[Any]) -> list[Any]:
    """Tensor hooks (``t.register_hook``), then retains-grad hooks."""
    hook_map = node.tensor_pre_hooks()
    if hook_map:
        inputs = list(inputs)
        for nr, hooks in hook_map.items():
            for hook in list(hooks):
                inputs[nr] = hook(inputs[nr])
    retains = node._retains_grad_hooks
    if retains:
        for nr, hook in list(retains.items()):
            if inputs[nr] is not None:
                hook(inputs[nr])
    return inputs


def call_pre_hooks(node: Node, inputs: list[Any]) -> list[Any]:
    """Tensor pre-hooks, retains-grad hooks, then node pre-hooks."""
    inputs = call_tensor_pre_hooks(node, inputs)
    pre = node._pre_hooks
    if pre:
        for hook in list(pre):
            wrapped = tuple(_wrap(g) for g in inputs)
            result = hook(wrapped)
            if result is None:
                continue
            _check_hook_result(hook, result, len(inputs), f"prehook of {node.name()}")
            inputs = [_unwrap_like(n, o, node, "prehook", i)
                      for i, (n, o) in enumerate(zip(result, inputs))]
    return inputs


def call_post_hooks(node: Node, outputs: Any, inputs: list[Any]) -> list[Any]:
    """Node post-hooks: ``hook(grad_inputs, grad_outputs)`` may replace grad_inputs."""
    grads = list(outputs)
    for hook in list(node._post_hooks or ()):
        result = hook(tuple(_wrap(g) for g in grads), tuple(_wrap(g) for g in inputs))
        if result is None:
            continue
        _check_hook_result(hook, result, len(grads), f"hook of {node.name()}")
        grads = [_unwrap_like(n, o, node, "hook", i)
                 for i, (n, o) in enumerate(zip(result, grads))]
    return grads


def _check_hook_result(hook: Any, result: Any, expected: int, what: str) -> None:
    """A node hook or prehook returns None or a tuple of one gradient per slot
    (PyTorch's checks and messages; ``what`` names the hook's node)."""
    if type(result) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}' ({what})")
    if len(result) != expected:
        name = getattr(hook, "__name__", type(hook).__name__)
        raise RuntimeError(
            f"hook '{name}' has returned an incorrect number of values (got {len(result)}, "
            f"but expected {expected}) ({what})"
        )


def check_nan(node: Node, outputs: Any) -> None:
    """Anomaly mode: raise if any gradient returned by ``node`` has NaN."""
    for i, grad in enumerate(outputs):
        if grad is None:
            continue
        data = grad.data if isinstance(grad, Tensor) else grad
        xp = device_of_array(data).xp
        if bool(xp.isnan(data).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def node_stream(node: Node) -> Any:
    """The stream ``node``'s forward ran on (None without streams)."""
    meta = node.input_metadata
    return meta[0].stream if meta else None
