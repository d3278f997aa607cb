"""The Optimizer base: parameter groups, per-parameter state, ``zero_grad``.

Note [Optimizer steps write .data in place]
    ``step()`` updates each parameter's array (``p.data``) in place, under
    ``no_grad()``, with ufuncs writing into existing buffers (``out=``,
    ``+=``). So:

    - the parameter keeps its identity and its array, and views of it stay views;
    - the state (``opt.state[p]``) holds Tensors, as PyTorch's: each update reads
      their ``.data`` and writes it in place, so a Tensor taken from the state
      follows the training; Adam's ``step`` is a 0-d float32 CPU Tensor, +1 in place;
    - the version counter is bumped once per updated parameter, as PyTorch's
      in-place updates under ``no_grad`` bump it: a graph recorded before the
      step that saved the parameter raises the version error on a later
      backward instead of silently using the new values;
    - a step allocates nothing after the first: state buffers (momentum,
      moments) and scratch buffers are made once per parameter, lazily;
    - NumPy's floating-point warnings are off during the update: a NaN or inf
      gradient (or ``eps=0`` with a zero gradient) gives PyTorch's NaNs silently.

    Parameters and their grads must be on one device; the math uses that
    device's array module (``p.device.xp``), so CuPy parameters update on the GPU.

Thread and task safety: an optimizer belongs to one training loop. ``step()``
runs on the caller's thread (the event loop in async code; it is short and
never awaits). Do not step while a backward through the same parameters is
running: ``await loss.backward()`` first, then ``step()``.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy

from .._await_check import check_awaited
from .._tensor import Tensor
from ..grad_mode import enable_grad, no_grad
from ..nn._module import _zero_grad

__all__ = ["Optimizer"]

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """Base class of optimizers.

    ``params`` is an iterable of Tensors or of ``(name, Tensor)`` pairs
    (``model.named_parameters()``), or of dicts (parameter groups) each with a
    ``"params"`` list of either kind and optional per-group hyperparameters that
    override ``defaults``. Named parameters give each group a ``"param_names"``
    list (saved by :meth:`state_dict`), as PyTorch's; all groups are named or none.
    Subclasses implement :meth:`_update_group`.
    """

    defaults: dict[str, Any]
    param_groups: list[dict[str, Any]]
    # Per-parameter state, keyed by the parameter itself (Tensors hash by identity) in
    # the order parameters first got state; a defaultdict(dict) as PyTorch's, so
    # state[p] is {} for a parameter without state. load_state_dict keeps an entry
    # whose index matches no parameter under that index, as PyTorch.
    state: defaultdict[Any, dict[str, Any]]
    # Keys that load_state_dict sets in each group when the saved group lacks them
    # (PyTorch's __setstate__), in that order.
    _group_fallbacks: dict[str, Any] = {}

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        # Scratch arrays: not state (not saved), made once per parameter, reused each step.
        self._scratch: dict[Tensor, list[Any]] = {}
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got a Tensor; pass [tensor] or model.parameters()"
            )
        groups: list[Any] = list(params)  # Tensors, or param-group dicts (checked per group)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (e.g. a different lr)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs; use a list instead"
            )
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        if names:
            if len(names) != len(params):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names are "
                    "missing"
                )
            params = [p[1] for p in params]
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but parameter {i} of the group is "
                    f"a {type(p).__name__}"
                )
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError("a parameter group contains the same parameter twice")
        group = dict(param_group)
        group["params"] = params
        if names:
            group["param_names"] = names
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        named = "param_names" in group
        for g in self.param_groups:
            if ("param_names" in g) != named:
                raise ValueError(
                    "all optimizer param groups should be with/without names. cannot add param "
                    f"group {'with' if named else 'without'} names to the optimizer"
                )
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # ---- gradients ----

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None, or to zeros in place.

        Raises if a backward of this thread was never awaited (Note [Forgotten await]).
        """
        check_awaited()
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    # ---- stepping ----

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a ``.grad``; return ``closure()``'s loss if given.

        ``closure`` (sync) recomputes the loss and its gradients, e.g. with
        ``backward_sync``; in async code call ``await loss.backward()`` before
        ``step()`` instead. See Note [Optimizer steps write .data in place].
        """
        check_awaited()  # Note [Forgotten await]
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad(), numpy.errstate(all="ignore"):
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    @staticmethod
    def _with_grads(group: dict[str, Any]) -> Iterator[tuple[Tensor, Any, Any, Any]]:
        """``(param, array module, param array, grad array)`` for each param with a grad,
        whose version counter is bumped: the caller writes the array in place."""
        for p in group["params"]:
            if p.grad is not None:
                p._vc.value += 1
                yield p, p.device.xp, p.data, p.grad.data

    def _scratch_for(self, p: Tensor, count: int) -> list[Any]:
        """``count`` scratch arrays shaped like ``p``, made on first use and then reused."""
        bufs = self._scratch.get(p)
        if bufs is None:
            bufs = []
            self._scratch[p] = bufs
        while len(bufs) < count:
            bufs.append(p.device.xp.empty_like(p.data))
        return bufs

    # ---- saving ----

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [...]}`` with Tensors and arrays
        copied to NumPy.

        Parameters are referred to by their position across the groups, and the state
        is in the order of ``self.state``, as in PyTorch.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {
            index[id(key)] if isinstance(key, Tensor) else key: {
                k: _host_copy(v) for k, v in entry.items()
            }
            for key, entry in self.state.items()
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state saved by :meth:`state_dict` onto this optimizer's parameters.

        As PyTorch's: each group becomes a copy of the saved one (keeping its params,
        and its ``param_names`` if the saved one has none); Tensors and arrays become
        Tensors on the parameter's device, floating ones of its dtype, except ``step``,
        which keeps its dtype on the CPU; an entry whose index matches no parameter is
        kept under that index.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups, but the "
                f"optimizer has {len(self.param_groups)}"
            )
        by_index: dict[int, Tensor] = {}
        for i, (mine, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group {i} of "
                    f"{len(saved['params'])} parameters that doesn't match the size of the "
                    f"optimizer's group ({len(mine['params'])})"
                )
            for idx, p in zip(saved["params"], mine["params"]):
                by_index[idx] = p
        groups = []
        for mine, saved in zip(self.param_groups, saved_groups):
            group = copy.deepcopy({k: v for k, v in saved.items() if k != "params"})
            group["params"] = mine["params"]
            if "param_names" in mine and "param_names" not in group:
                group["param_names"] = mine["param_names"]
            for k, v in self._group_fallbacks.items():
                group.setdefault(k, v)
            groups.append(group)
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for idx, entry in state_dict["state"].items():
            p = by_index.get(idx)
            if p is None:
                state[idx] = entry
            else:
                state[p] = {k: _to_param_device(p, k, v) for k, v in entry.items()}
        self.param_groups = groups
        self.state = state
        self._scratch = {}

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


def _check_fused(fused: bool | None, foreach: bool | None, differentiable: bool) -> None:
    """PyTorch's construction checks of ``fused``."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def _unsupported(name: str, **flags: bool) -> None:
    """Refuse the PyTorch options aiograd does not implement (``differentiable``,
    ``capturable``) when true."""
    for flag, value in flags.items():
        if value:
            raise NotImplementedError(
                f"aiograd's {name} does not support {flag}=True; pass {flag}=False"
            )


def _state_tensor(p: Tensor, array: Any) -> Tensor:
    """A state Tensor around ``array`` (no copy), on ``p``'s device."""
    return Tensor._wrap(array, p.device)


def _step_tensor(value: Any = 0.0) -> Tensor:
    """A new ``step`` of ``value``: a 0-d float32 Tensor on the CPU, as PyTorch's."""
    return Tensor._wrap(numpy.array(float(value), dtype=numpy.float32))


def _hyper(value: Any) -> Any:
    """A hyperparameter given as a 1-element Tensor as a NumPy scalar of its dtype;
    anything else unchanged."""
    if isinstance(value, Tensor):
        return numpy.asarray(value.item(), dtype=value.dtype)[()]
    return value


def _host_copy(value: Any) -> Any:
    if isinstance(value, Tensor):
        return numpy.array(value.device.backend.to_host(value.data), copy=True)
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return numpy.array(value, copy=True)
    return copy.deepcopy(value)


def _to_param_device(p: Tensor, key: Any, value: Any) -> Any:
    """A copy of a saved state value: arrays and Tensors as Tensors on ``p``'s device (of
    its dtype if floating), except ``step``, which keeps its dtype and stays on the CPU (a
    number, as older state dicts hold, becomes a 0-d float32 Tensor, as PyTorch's)."""
    if key == "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return _step_tensor(value)
    if isinstance(value, Tensor):
        value = value.device.backend.to_host(value.data)
    elif hasattr(value, "__array__") and not isinstance(value, (numpy.ndarray, numpy.generic)):
        value = numpy.asarray(value)  # another library's tensor (a PyTorch checkpoint)
    if not isinstance(value, (numpy.ndarray, numpy.generic)):
        return copy.deepcopy(value)
    if key == "step":
        return Tensor._wrap(numpy.array(value, copy=True))
    arr = numpy.array(value, dtype=p.dtype if value.dtype.kind == "f" else value.dtype)
    if p.device.type != "cpu":
        arr = p.device.backend.from_host(arr, p.device.index)
    return _state_tensor(p, arr)


def _effective_grad(xp: Any, w: Any, grad: Any, weight_decay: float, maximize: bool,
                    out: Any) -> Any:
    """``(-grad if maximize else grad) + weight_decay * w``, written into ``out`` when it
    differs from ``grad`` (``grad`` itself is returned when it does not)."""
    if weight_decay != 0:
        xp.multiply(w, weight_decay, out=out)
        if maximize:
            xp.subtract(out, grad, out=out)
        else:
            xp.add(out, grad, out=out)
        return out
    if maximize:
        xp.negative(grad, out=out)
        return out
    return grad
