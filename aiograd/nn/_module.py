"""Module and Parameter: the containers a training loop is built from.

A :class:`Module` owns parameters, buffers and child modules, registered by
attribute assignment as in PyTorch::

    class Net(aiograd.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = aiograd.nn.Linear(4, 2)                  # a child module
            self.scale = aiograd.nn.Parameter(aiograd.ones(2))  # a parameter

        def forward(self, x):
            return self.fc(x) * self.scale

Note [Parameters are plain tensors]
    The engine and the ops test ``type(t) is Tensor`` on their hot paths, so
    a parameter cannot be a subclass of Tensor. ``Parameter(data)`` returns a
    plain leaf Tensor (a copy of ``data``) and records its identity in a weak
    registry; ``isinstance(t, Parameter)`` consults that registry. The
    registry holds weak references only, so a parameter is freed as soon as
    the last strong reference goes (the engine keeps no reference cycles).
    ``copy.deepcopy`` and ``pickle`` of a parameter (alone or inside a module)
    give a new registered parameter, as PyTorch's: a copy of the data with the
    same ``requires_grad``, and no grad or hooks. A reducer for Tensor
    registered with :mod:`copyreg` does this; other tensors reduce as before.

Note [Module hooks]
    ``register_forward_pre_hook``, ``register_forward_hook``,
    ``register_full_backward_pre_hook``, ``register_full_backward_hook`` and
    the deprecated ``register_backward_hook`` add to one list per module,
    ``_call_hooks``, holding all five kinds in registration order
    (``prepend`` inserts at the front, so before the hooks of its kind), so
    ``__call__`` pays a single emptiness test when no hook is registered.
    Each registration is a fresh ``_ModuleHook`` compared by identity, so a
    handle removes exactly its own entry even when the same function is
    registered twice. A call works on a snapshot of the list: a hook added
    or removed during the call (even by a hook) takes effect from the next
    call, and the backward hooks of a call are those of its snapshot (See
    Note [Module backward hooks] in ``_backward_hooks``). List append,
    insert, remove and copy are atomic under the GIL, so hooks may be
    registered from any thread.

Module methods run on whatever thread or task calls them; a module is not
locked. Do not change a module's parameters (``to``, ``load_state_dict``,
an optimizer step) while a backward through them is running.
"""

from __future__ import annotations

import copyreg
import inspect
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard

import numpy

from .. import devices
from .._await_check import check_awaited
from .._tensor import Tensor, tensor
from ..graph import RemovableHandle
from ._backward_hooks import BackwardHooks

__all__ = ["Module", "Parameter"]


# ---- parameters ----

# Invariant: id(t) in _parameter_refs  <=>  t is alive and was made by Parameter().
# Plain dict operations are atomic under the GIL; the weakref callback runs
# when the tensor dies, before its id can be reused, and removes only its own entry.
_parameter_refs: dict[int, weakref.ref[Tensor]] = {}


def _forget(key: int, ref: weakref.ref[Tensor]) -> None:
    if _parameter_refs.get(key) is ref:
        del _parameter_refs[key]


def _mark_parameter(t: Tensor) -> Tensor:
    key = id(t)
    ref = weakref.ref(t, lambda r: _forget(key, r))
    _parameter_refs[key] = ref
    return t


def _is_parameter(obj: object) -> TypeGuard[Tensor]:
    ref = _parameter_refs.get(id(obj))
    return ref is not None and ref() is obj


def _rebuild_parameter(data: Any, device: devices.Device, requires_grad: bool) -> Tensor:
    """A parameter around ``data``, which copy and pickle have already made private."""
    return _mark_parameter(Tensor._wrap(data, device).requires_grad_(requires_grad))


def _reduce_tensor(t: Tensor) -> str | tuple[Any, ...]:
    """Tensor's reducer for copy and pickle: a parameter is rebuilt as a parameter."""
    if _is_parameter(t):
        return _rebuild_parameter, (t.data, t.device, t.requires_grad)
    return t.__reduce_ex__(4)  # what copy and pickle do without a reducer (protocol >= 2)


copyreg.pickle(Tensor, _reduce_tensor)


class _ParameterMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return _is_parameter(obj)


class Parameter(metaclass=_ParameterMeta):
    """``Parameter(data, requires_grad=True)``: a new leaf Tensor registered as a parameter.

    ``data`` (a Tensor, NumPy array or nested sequence) is copied: the result
    shares neither memory nor version counter with it. The result is a plain
    :class:`aiograd.Tensor` (see Note [Parameters are plain tensors]);
    ``isinstance(p, Parameter)`` is True for it, and assigning it to a
    :class:`Module` attribute registers it.
    """

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = numpy.empty((0,), dtype=numpy.float32)
        if isinstance(data, Tensor):
            p = Tensor._wrap(data.data.copy(), data.device)
        else:
            p = tensor(data)
        if requires_grad:
            p.requires_grad_(True)
        return _mark_parameter(p)


# ---- module ----

class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """``load_state_dict``'s result, printed as PyTorch's."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


# The kinds of module hooks (_ModuleHook.kind).
_FORWARD_PRE = "forward_pre"
_FORWARD = "forward"
_BACKWARD_PRE = "backward_pre"
_BACKWARD = "backward"
_BACKWARD_LEGACY = "backward_legacy"  # register_backward_hook: a post-hook on one node


class _ModuleHook:
    """One registration of a module hook of one of the five kinds.

    Compared by identity (see Note [Module hooks]); ``with_kwargs`` is only
    ever True for forward pre-hooks and forward hooks, ``always_call`` only
    for forward hooks.
    """

    __slots__ = ("fn", "kind", "with_kwargs", "always_call")

    def __init__(self, fn: Callable[..., Any], kind: str, with_kwargs: bool = False,
                 always_call: bool = False) -> None:
        self.fn = fn
        self.kind = kind
        self.with_kwargs = with_kwargs
        self.always_call = always_call


class Module:
    """Base class of layers and models. Subclasses define :meth:`forward`.

    Calling a module calls ``forward``, between its forward pre-hooks and
    forward hooks if any are registered (and, with backward hooks, through
    hook nodes; See Note [Module backward hooks]); ``forward`` may be
    ``async def``, and the call then returns a coroutine.
    """

    training: bool
    _parameters: dict[str, Tensor | None]
    _buffers: dict[str, Tensor | None]
    _non_persistent_buffers: set[str]
    _modules: dict[str, Module | None]
    # Invariant: _call_hooks == [] <=> no hook of any kind is registered.
    # See Note [Module hooks].
    _call_hooks: list[_ModuleHook]

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_call_hooks", [])
        # True once a full backward hook was registered, False once a legacy one was:
        # the two kinds never mix on one module (PyTorch's rule, kept after removal).
        object.__setattr__(self, "_is_full_backward_hook", None)

    forward: Callable[..., Any]

    def forward(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._call_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    # ---- forward hooks ----

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before each ``forward``; returns a removable handle.

        With ``with_kwargs``, ``hook(module, args, kwargs)``, which may return
        None or a pair ``(new_args, new_kwargs)``. Otherwise the hook may return
        None or new positional args (a non-tuple is wrapped into a 1-tuple).
        Pre-hooks run on the calling thread, in registration order (``prepend``
        puts this one first), each seeing the previous one's replacements; a
        ``kwargs`` dict mutated in place reaches ``forward`` too, as in PyTorch.
        """
        entry = _ModuleHook(hook, _FORWARD_PRE, with_kwargs=with_kwargs)
        return self._add_call_hook(entry, prepend)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after each ``forward``; returns a removable handle.

        With ``with_kwargs``, ``hook(module, args, kwargs, output)``. ``args``
        and ``kwargs`` are those forward received (after any pre-hook). A hook
        may return None or a replacement output, which later hooks then see.
        With ``always_call`` the hook also runs (with ``output`` None, or the
        output so far) when a pre-hook, forward or an earlier forward hook
        raises; its own error then becomes a warning and the first error
        propagates. If ``forward`` is ``async def``, forward hooks run when its
        coroutine is awaited, on the awaiting task.
        """
        entry = _ModuleHook(hook, _FORWARD, with_kwargs=with_kwargs, always_call=always_call)
        return self._add_call_hook(entry, prepend)

    # ---- backward hooks ----

    def register_full_backward_pre_hook(self, hook: Callable[..., Any],
                                        prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` when the gradients w.r.t. the module's
        outputs are computed; returns a removable handle.

        ``grad_output`` has one entry per output (a lone Tensor output counts as
        one), None for non-Tensors and outputs that got no gradient. The hook must
        not modify it; it may return None or a sequence of the same length that
        replaces it, for later pre-hooks, the full backward hooks and the gradient
        sent into the module. Runs on the thread running the backward pass, in the
        caller's context. See Note [Module backward hooks].
        """
        return self._add_call_hook(_ModuleHook(hook, _BACKWARD_PRE), prepend)

    def register_full_backward_hook(self, hook: Callable[..., Any],
                                    prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` when the gradients w.r.t. the
        module's positional inputs are computed; returns a removable handle.

        ``grad_input`` has one entry per positional arg: None for non-Tensors, zeros
        for a Tensor that needs no grad. The hook must not modify its arguments; it
        may return None or a sequence of the same length that replaces
        ``grad_input`` for later hooks and the gradients sent on. If no input
        requires grad, the hook runs when the gradients w.r.t. the outputs are
        computed, with ``grad_input`` all None (and a warning), and may only return
        None. Runs on the thread running the backward pass, in the caller's context.
        See Note [Module backward hooks].
        """
        self._backward_hook_kind(full=True)
        return self._add_call_hook(_ModuleHook(hook, _BACKWARD), prepend)

    def register_backward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Deprecated (as in PyTorch): use :meth:`register_full_backward_hook`.

        At each call, ``hook(module, grad_input, grad_output)`` becomes a post-hook
        of the ``grad_fn`` of the module's first output Tensor: ``grad_input`` are
        the gradients that one node returns and ``grad_output`` those it receives,
        so they describe the module only when its forward is a single node (a
        FutureWarning says when it is not). A non-None result replaces
        ``grad_input``. A module takes either these hooks or full backward hooks.
        """
        self._backward_hook_kind(full=False)
        return self._add_call_hook(_ModuleHook(hook, _BACKWARD_LEGACY), False)

    def _backward_hook_kind(self, full: bool) -> None:
        """Record that ``full`` (or legacy) backward hooks are used; the other kind raises."""
        self._check_init("hooks")
        if self.__dict__.get("_is_full_backward_hook") is (not full):
            raise RuntimeError(
                "Cannot use both regular backward hooks and full backward hooks on a "
                "single Module. Please use only one of them."
            )
        object.__setattr__(self, "_is_full_backward_hook", full)

    def _add_call_hook(self, entry: _ModuleHook, prepend: bool) -> RemovableHandle:
        self._check_init("hooks")
        if not callable(entry.fn):
            raise TypeError(f"hook must be callable, got {type(entry.fn).__name__}")
        hooks = self._call_hooks
        if prepend:
            hooks.insert(0, entry)
        else:
            hooks.append(entry)
        return RemovableHandle(hooks, entry)

    def _call_with_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``__call__`` when hooks are registered: pre-hooks, the args' hook node,
        forward, forward hooks, the output's hook node."""
        hooks = list(self._call_hooks)  # the snapshot; see Note [Module hooks]
        backward = _backward_hooks_of(self, hooks)
        try:
            for h in hooks:
                if h.kind != _FORWARD_PRE:
                    continue
                if h.with_kwargs:
                    result = h.fn(self, args, kwargs)
                    if result is not None:
                        if not (isinstance(result, tuple) and len(result) == 2):
                            raise RuntimeError(
                                "forward pre-hook must return None or a tuple of "
                                f"(new_args, new_kwargs), but got {result}."
                            )
                        args, kwargs = result
                else:
                    result = h.fn(self, args)
                    if result is not None:
                        args = result if isinstance(result, tuple) else (result,)
            if backward is not None:
                args = backward.wrap_inputs(args)
            output = self.forward(*args, **kwargs)
        except Exception:
            _run_always_call_hooks(self, hooks, args, kwargs, None, set())
            raise
        if inspect.iscoroutine(output):
            return _forward_hooks_after(self, hooks, args, kwargs, output, backward)
        return _run_forward_hooks(self, hooks, args, kwargs, output, backward)

    # ---- registration ----

    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Register ``param`` (made by :class:`Parameter`, or None) under ``name``."""
        self._check_init("parameter")
        _check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not _is_parameter(param):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(aiograd.nn.Parameter or None required); wrap it: aiograd.nn.Parameter(t)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"cannot assign a non-leaf Tensor to parameter '{name}'. Model parameters "
                "must be created explicitly; use aiograd.nn.Parameter(t.detach())"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, buffer: Tensor | None, persistent: bool = True) -> None:
        """Register a tensor that is state but not a parameter (in ``state_dict`` if persistent)."""
        self._check_init("buffer")
        _check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if buffer is not None and not isinstance(buffer, Tensor):
            raise TypeError(
                f"cannot assign '{type(buffer).__name__}' object to buffer '{name}' "
                "(aiograd.Tensor or None required)"
            )
        self._buffers[name] = buffer
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` (or None) as a child under ``name``."""
        self._check_init("child module")
        _check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        """PyTorch's rules: a Parameter or a Module registers under ``name`` (dropping an
        entry of another kind there, except that only a Parameter or None may replace a
        parameter); a registered name takes only values of its kind or None."""
        d = self.__dict__
        params = d.get("_parameters")
        if _is_parameter(value):
            self._check_init("parameters")
            _remove_from(self, name, "_buffers", "_modules")
            d.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(aiograd.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._check_init("module")
            _remove_from(self, name, "_buffers")
            d.pop(name, None)
            self._modules[name] = value
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(aiograd.nn.Module or None expected)"
                )
            self._modules[name] = None
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(aiograd.Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in ("_parameters", "_buffers", "_modules"):
            table = self.__dict__.get(registry)
            if table is not None and name in table:
                del table[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        extra = [*self._parameters, *self._buffers, *self._modules]
        return sorted(set(super().__dir__()) | set(extra))

    # ---- traversal ----

    def named_modules(self, memo: set[Module] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for this module and all below it, depth first, each once.

        ``memo`` (modules to skip, grown as modules are visited) and
        ``remove_duplicate=False`` (every path to a shared module) as PyTorch's.
        """
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from child.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, child)`` for the direct children; a child held twice appears once."""
        seen: set[Module] = set()
        for name, child in self._modules.items():
            if child is not None and child not in seen:
                seen.add(child)
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """``child.apply(fn)`` for each child, then ``fn(self)``; returns self.

        As PyTorch's, a module held by several parents is visited once per
        parent (``children`` lists it once per parent).
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        if recurse:
            mods = list(self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate))
        else:
            mods = [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, t in getattr(mod, registry).items():
                if t is None:
                    continue
                if remove_duplicate:
                    if id(t) in seen:
                        continue
                    seen.add(id(t))
                yield mod_prefix + ("." if mod_prefix else "") + name, t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, parameter)`` pairs; a shared parameter appears once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` (``""`` is this module); AttributeError,
        as PyTorch's, for a missing name or one that is not a Module."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at dotted path ``target``; AttributeError as PyTorch's."""
        mod, name = self._owner_of(target)
        value = getattr(mod, name)
        if not _is_parameter(value):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return value

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``; AttributeError as PyTorch's."""
        mod, name = self._owner_of(target)
        value: Tensor = getattr(mod, name)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return value

    def _owner_of(self, target: str) -> tuple[Module, str]:
        """The module holding the last name of dotted ``target``, and that name."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{type(mod).__name__} has no attribute `{name}`")
        return mod, name

    # ---- modes and gradients ----

    def train(self, mode: bool = True) -> Module:
        """Set ``training`` here, then ``child.train(mode)`` for each child; returns self.

        Children are reached through their own ``train``, so an override in a
        subclass is honoured (as PyTorch's).
        """
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        object.__setattr__(self, "training", mode)
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the ``.grad`` of every parameter: to None, or to zeros in place.

        Raises if a backward of this thread was never awaited (Note [Forgotten await]).
        """
        check_awaited()
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    # ---- state ----

    def state_dict(self, *args: Any, destination: Any = None, prefix: str = "",
                   keep_vars: bool = False) -> Any:
        """Parameters and persistent buffers by ``prefix`` + dotted name (``prefix`` is
        prepended as given: ``"p."`` gives ``"p.weight"``), into ``destination`` (a new
        OrderedDict if None), which is returned.

        The values are host NumPy arrays (copies), or with ``keep_vars`` the parameters
        and buffers themselves. As PyTorch, a module reached by several paths
        (``Sequential(l, l)``) appears under each of its names; :meth:`load_state_dict`
        expects them all. ``args`` is PyTorch's deprecated positional form
        ``(destination, prefix, keep_vars)``, with a FutureWarning.
        """
        if args:
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead: "
                "state_dict(destination=..., prefix=..., keep_vars=...)",
                FutureWarning,
                stacklevel=2,
            )
            if len(args) > 3:
                raise TypeError(
                    f"state_dict() takes at most 3 positional arguments ({len(args)} given)"
                )
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        out = OrderedDict() if destination is None else destination
        for mod_path, mod in self.named_modules(remove_duplicate=False):
            dot = prefix + mod_path + ("." if mod_path else "")
            for name, p in mod._parameters.items():
                if p is not None:
                    out[dot + name] = p if keep_vars else _to_host_copy(p)
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent_buffers:
                    out[dot + name] = b if keep_vars else _to_host_copy(b)
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> _IncompatibleKeys:
        """Copy arrays from ``state_dict`` into the parameters and buffers, in place.

        Values may be NumPy arrays, Tensors or nested sequences; they are cast
        to the destination's dtype and copied to its device. Tensors keep their
        identity, so an optimizer built on ``parameters()`` stays valid. The
        version counter of each written tensor is bumped (as PyTorch's
        ``copy_`` does), so a graph saved before the load refuses to backward.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        state_dict = dict(state_dict)  # the defaults below go into a copy
        targets: dict[str, Tensor] = {}
        for mod_prefix, mod in self.named_modules(remove_duplicate=False):
            dot = mod_prefix + ("." if mod_prefix else "")
            for name, value in mod._state_dict_defaults().items():
                state_dict.setdefault(dot + name, value)
            for name, p in mod._parameters.items():
                if p is not None:
                    targets[dot + name] = p
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent_buffers:
                    targets[dot + name] = b
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors: list[str] = []
        sources: list[tuple[Tensor, numpy.ndarray]] = []
        for key, t in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if isinstance(value, Tensor):
                src = value.device.backend.to_host(value.data)
            else:
                src = numpy.asarray(value)
            if t.ndim == 0 and src.shape == (1,):  # PyTorch's rule for old 0-d entries
                src = src[0]
            if src.shape != t.shape:
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {src.shape} from "
                    f"checkpoint, the shape in current model is {tuple(t.shape)}."
                )
                continue
            sources.append((t, src))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        for t, src in sources:
            _copy_into(t, src)
        return _IncompatibleKeys(missing, unexpected)

    def _state_dict_defaults(self) -> dict[str, Any]:
        """Entries (by local name) that ``load_state_dict`` takes when a loaded dict lacks
        them, as PyTorch's per-module load hooks do; none unless a subclass says."""
        return {}

    # ---- devices and dtypes ----

    def to(self, device: Any = None, dtype: Any = None) -> Module:
        """Move parameters, their grads and buffers to ``device`` and/or cast floats to ``dtype``
        (``to(tensor)``: that tensor's device and dtype).

        Works in place (as PyTorch's ``Module.to``): each tensor keeps its
        identity and gets a new array, so optimizers keep working.
        """
        if isinstance(device, Tensor):  # to(tensor): that tensor's device, and its dtype
            device, dtype = device.device, device.dtype
        elif isinstance(device, (numpy.dtype, type)) and dtype is None:
            device, dtype = None, device
        dev = None if device is None else devices.device(device)
        dt = None if dtype is None else numpy.dtype(dtype)
        if dt is not None and dt.kind != "f":
            raise TypeError(
                f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dt}"
            )
        for t in [*self.parameters(), *self.buffers()]:
            _retarget(t, dev, dt)
            if t._grad is not None:
                _retarget(t._grad, dev, dt)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: int = 0) -> Module:
        return self.to(devices.device("cuda", device))

    def double(self) -> Module:
        return self.to(dtype=numpy.float64)

    def float(self) -> Module:
        return self.to(dtype=numpy.float32)

    def half(self) -> Module:
        return self.to(dtype=numpy.float16)

    # ---- printing ----

    def extra_repr(self) -> str:
        """Extra text inside this module's repr; override in subclasses."""
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        head = type(self).__name__ + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


# ---- helpers ----

def _backward_hooks_of(module: Module, hooks: list[_ModuleHook]) -> BackwardHooks | None:
    """The backward hooks of a call with the snapshot ``hooks``; None if there are none."""
    full = [h.fn for h in hooks if h.kind == _BACKWARD]
    pre = [h.fn for h in hooks if h.kind == _BACKWARD_PRE]
    if not (full or pre):
        return None
    return BackwardHooks(module, full, pre)


def _call_hook(h: _ModuleHook, module: Module, args: tuple[Any, ...],
               kwargs: dict[str, Any], output: Any) -> Any:
    if h.with_kwargs:
        return h.fn(module, args, kwargs, output)
    return h.fn(module, args, output)


def _run_forward_hooks(module: Module, hooks: list[_ModuleHook], args: tuple[Any, ...],
                       kwargs: dict[str, Any], output: Any,
                       backward: BackwardHooks | None) -> Any:
    """The forward hooks of ``hooks`` in order, each seeing the latest output; then
    the output sent through its hook node if there are ``backward`` hooks."""
    started: set[_ModuleHook] = set()  # always_call hooks already run (or running)
    try:
        for h in hooks:
            if h.kind != _FORWARD:
                continue
            if h.always_call:
                started.add(h)
            result = _call_hook(h, module, args, kwargs, output)
            if result is not None:
                output = result
    except Exception:
        _run_always_call_hooks(module, hooks, args, kwargs, output, started)
        raise
    if backward is not None:
        output = backward.wrap_outputs(output)
    legacy = [h.fn for h in hooks if h.kind == _BACKWARD_LEGACY]
    if legacy:
        _register_legacy_backward_hooks(module, legacy, args, output)
    return output


def _register_legacy_backward_hooks(module: Module, legacy: list[Callable[..., Any]],
                                    args: tuple[Any, ...], output: Any) -> None:
    """``register_backward_hook``'s hooks as post-hooks of the grad_fn of ``output``'s
    first Tensor (found as PyTorch does: a dict's first Tensor value, else item 0),
    with PyTorch's FutureWarnings where that node does not cover the module."""
    var = output
    while not isinstance(var, Tensor):
        if isinstance(var, dict):
            var = next(v for v in var.values() if isinstance(v, Tensor))
        else:
            var = var[0]
    grad_fn = var.grad_fn
    if grad_fn is None:
        return
    for fn in legacy:
        grad_fn.register_hook(
            lambda grad_input, grad_output, fn=fn: fn(module, grad_input, grad_output))
    _warn_partial_legacy_hooks(args, output, grad_fn)


_LEGACY_REMOVAL = "is deprecated and will be removed in future versions. This hook will be missing"
_USE_FULL = "Please use register_full_backward_hook to get the documented behavior."


def _warn_partial_legacy_hooks(args: tuple[Any, ...], output: Any, grad_fn: Any) -> None:
    """PyTorch's FutureWarnings for a legacy backward hook that will not see all of the
    module's gradients (``_maybe_warn_non_full_backward_hook``)."""
    if isinstance(output, Tensor):
        output = (output,)
    elif not (isinstance(output, tuple) and all(isinstance(r, Tensor) for r in output)):
        message = ("Using non-full backward hooks on a Module that does not return a single "
                   f"Tensor or a tuple of Tensors {_LEGACY_REMOVAL} some of the grad_output. "
                   f"{_USE_FULL}")
        warnings.warn(message, FutureWarning, stacklevel=4)
        return
    if not all(isinstance(a, Tensor) for a in args):
        message = ("Using non-full backward hooks on a Module that does not take as input a "
                   f"single Tensor or a tuple of Tensors {_LEGACY_REMOVAL} some of the "
                   f"grad_input. {_USE_FULL}")
        warnings.warn(message, FutureWarning, stacklevel=4)
        return
    out_fns = {r.grad_fn for r in output if r.grad_fn is not None}
    if not out_fns or (len(out_fns) == 1 and grad_fn not in out_fns):
        message = ("Using a non-full backward hook when outputs are nested in python data "
                   f"structure {_LEGACY_REMOVAL} some grad_output.")
    elif len(out_fns) > 1:
        message = ("Using a non-full backward hook when outputs are generated by different "
                   f"autograd Nodes {_LEGACY_REMOVAL} some grad_output. {_USE_FULL}")
    elif {a.grad_fn for a in args if a.grad_fn is not None} != {
            fn for fn, _ in grad_fn.next_functions}:
        message = ("Using a non-full backward hook when the forward contains multiple "
                   f"autograd Nodes {_LEGACY_REMOVAL} some grad_input. {_USE_FULL}")
    else:
        return
    warnings.warn(message, FutureWarning, stacklevel=4)


def _run_always_call_hooks(module: Module, hooks: list[_ModuleHook], args: tuple[Any, ...],
                           kwargs: dict[str, Any], output: Any,
                           started: set[_ModuleHook]) -> None:
    """After an error: the ``always_call`` hooks not in ``started``; their errors warn."""
    for h in hooks:
        if not h.always_call or h in started:
            continue
        try:
            result = _call_hook(h, module, args, kwargs, output)
        except Exception as e:
            warnings.warn(
                "module forward hook with ``always_call=True`` raised an exception that "
                f"was silenced as another error was raised in forward: {e}",
                stacklevel=2,
            )
            continue
        if result is not None:
            output = result


async def _forward_hooks_after(module: Module, hooks: list[_ModuleHook],
                               args: tuple[Any, ...], kwargs: dict[str, Any],
                               pending: Any, backward: BackwardHooks | None) -> Any:
    """An async ``forward``'s coroutine, awaited, then the forward hooks."""
    try:
        output = await pending
    except Exception:
        _run_always_call_hooks(module, hooks, args, kwargs, None, set())
        raise
    return _run_forward_hooks(module, hooks, args, kwargs, output, backward)


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
    if not name or "." in name:
        raise KeyError(f'{what} name can\'t be empty or contain ".", got: {name!r}')


def _remove_from(module: Module, name: str, *registries: str) -> None:
    """Drop ``name`` from ``module``'s ``registries`` (a buffer's persistence with it)."""
    d = module.__dict__
    for registry in registries:
        table = d.get(registry)
        if table is not None and name in table:
            del table[name]
            if registry == "_buffers":
                module._non_persistent_buffers.discard(name)


def _typename(value: Any) -> str:
    """A value's type as PyTorch's messages name it (``torch.typename``): a builtin's bare
    name, ``module.QualName`` otherwise, and ``aiograd.Tensor`` for a tensor."""
    if isinstance(value, Tensor):
        return "aiograd.Tensor"
    cls = type(value)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _zero_grad(p: Tensor, set_to_none: bool) -> None:
    """PyTorch's rule: drop the grad, or zero the same grad tensor in place.

    Before zeroing, a grad with history is detached in place and a leaf grad
    stops requiring grad; ``zero_()`` bumps its version counter.
    """
    g = p._grad
    if g is None:
        return
    if set_to_none:
        p._grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    g.zero_()


def _to_host_copy(t: Tensor) -> numpy.ndarray:
    host = t.device.backend.to_host(t.data)
    return numpy.array(host, copy=True)


def _copy_into(t: Tensor, src: numpy.ndarray) -> None:
    src = numpy.asarray(src, dtype=t.dtype)
    if t.device is devices.CPU:
        numpy.copyto(t.data, src)
    else:
        t.data[...] = t.device.backend.from_host(src, t.device.index)
    t._vc.value += 1


def _retarget(t: Tensor, dev: devices.Device | None, dt: numpy.dtype | None) -> None:
    data = t.data
    if dt is not None and data.dtype.kind == "f" and data.dtype != dt:
        data = data.astype(dt)
    if dev is not None and dev is not t.device:
        src = t.device
        if src.backend is dev.backend:
            data = dev.backend.copy_to(data, dev.index)
        else:
            data = dev.backend.from_host(src.backend.to_host(data), dev.index)
    t.data = data
    if dev is not None:
        t.device = dev
