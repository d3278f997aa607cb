"""Module backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``)
against torch 2.13.

Each program is written once against a library (``aiograd`` or ``torch``) and run on
both; the tests compare what the hooks receive (grad_input, grad_output), the order
and number of calls, warnings, errors and the final ``.grad`` values.
"""

from __future__ import annotations

import contextvars
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(60)

W1 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
B1 = np.array([0.1, -0.2])
W2 = np.array([[1.0, -2.0], [0.5, 0.75], [-1.25, 0.3]])
B2 = np.array([0.0, 0.4, -0.6])
X = np.array([[-1.5, 0.5, 2.0], [0.25, -0.75, 1.0], [3.0, -2.0, -0.5], [0.0, 1.5, -1.0]])


def _run_both(program: Callable[[Any], Any]) -> None:
    """``program(lib)`` observes the same on aiograd as on torch."""
    _same(program(ag), program(torch))


def _same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), (ours, theirs)
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    else:
        assert ours == theirs


def _np(value: Any) -> Any:
    """Tensors (also inside tuples) as NumPy copies, for comparison (a gradient a hook
    sees may become a ``.grad`` that a later backward adds to in place)."""
    if isinstance(value, (tuple, list)):
        return tuple(_np(v) for v in value)
    if isinstance(value, (ag.Tensor, torch.Tensor)):
        return value.detach().numpy().copy()
    return value


def _backward(lib: Any, t: Any, gradient: Any = None, **kwargs: Any) -> None:
    if lib is torch:
        t.backward(gradient, **kwargs)
    else:
        t.backward_sync(gradient, **kwargs)


def _linear(lib: Any, w: np.ndarray, b: np.ndarray) -> Any:
    lin = lib.nn.Linear(w.shape[1], w.shape[0]).double()
    lin.load_state_dict({"weight": lib.tensor(w), "bias": lib.tensor(b)})
    return lin


def _logging_hooks(module: Any, name: str, log: list[Any]) -> None:
    """A pre-hook and a full hook on ``module`` that log what they get."""
    module.register_full_backward_pre_hook(
        lambda m, go: log.append(("pre", name, _np(go))))
    module.register_full_backward_hook(
        lambda m, gi, go: log.append(("full", name, _np(gi), _np(go))))


def _grads(*tensors: Any) -> tuple[Any, ...]:
    return tuple(_np(t.grad) for t in tensors)


class _Record(warnings.catch_warnings):
    """``catch_warnings(record=True)`` showing every warning."""

    def __init__(self) -> None:
        super().__init__(record=True)

    def __enter__(self) -> list[warnings.WarningMessage]:
        caught = super().__enter__()
        warnings.simplefilter("always")
        return caught  # type: ignore[return-value]


def _two_in_two_out(lib: Any) -> Any:
    """``forward(a, b, k, *, scale) -> (a * b * k * scale, a + b, "tag")``."""

    class TwoInTwoOut(lib.nn.Module):
        def forward(self, a: Any, b: Any, k: float, *, scale: Any) -> Any:
            return a * b * k * scale, a + b, "tag"

    return TwoInTwoOut()


# ---- what the hooks receive ----

def test_linear_hooks_get_torchs_grad_output_and_grad_input():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)
        _logging_hooks(lin, "lin", log)
        x = lib.tensor(X, requires_grad=True)
        y = lin(x)
        _backward(lib, (y * lib.tensor(X[:, :2])).sum())
        return log, _grads(x, lin.weight, lin.bias), y.grad_fn.name()

    _run_both(program)


def test_two_inputs_and_outputs_with_non_tensors_and_an_input_not_requiring_grad():
    def program(lib):
        log: list[Any] = []
        m = _two_in_two_out(lib)
        _logging_hooks(m, "m", log)
        a = lib.tensor(X, requires_grad=True)
        b = lib.tensor(X * 2 + 1)  # needs no grad: zeros in grad_input
        scale = lib.tensor(3.0, requires_grad=True)  # a keyword: not in grad_input
        p, q, tag = m(a, b, 5, scale=scale)
        _backward(lib, (p * q).sum())
        return log, tag, _grads(a, scale)

    _run_both(program)


def test_an_output_without_gradient_gives_none_in_grad_output():
    def program(lib):
        log: list[Any] = []
        m = _two_in_two_out(lib)
        _logging_hooks(m, "m", log)
        a = lib.tensor(X, requires_grad=True)
        p, q, _ = m(a, lib.tensor(X), 2.0, scale=lib.tensor(1.5, requires_grad=True))
        _backward(lib, q.sum())  # p gets no gradient
        return log, _grads(a)

    _run_both(program)


def test_no_input_requiring_grad_fires_full_hooks_from_the_outputs_with_a_warning():
    """Hooks on a Sequential and its layers, input data not requiring grad: the
    Sequential's and the first layer's full hooks fire at their outputs."""
    def program(lib):
        log: list[Any] = []
        first, second = _linear(lib, W1, B1), _linear(lib, W2, B2)
        model = lib.nn.Sequential(first, lib.nn.Tanh(), second)
        for name, module in [("model", model), *model.named_children()]:
            _logging_hooks(module, name, log)
        with _Record() as caught:
            y = model(lib.tensor(X))
            _backward(lib, (y * y).sum())
        messages = [(w.category.__name__, str(w.message)) for w in caught]
        return log, messages, _grads(first.weight, first.bias, second.weight, second.bias)

    _run_both(program)


def test_module_called_twice_in_one_graph_fires_once_per_call():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, np.array([[0.5, -1.0], [2.0, 0.25]]), np.array([0.1, -0.2]))
        _logging_hooks(lin, "lin", log)
        x = lib.tensor(X[:, :2], requires_grad=True)
        _backward(lib, (lin(lin(x)) ** 2).sum())
        return log, _grads(x, lin.weight)

    _run_both(program)


def test_outputs_not_requiring_grad_fire_no_hook_and_get_no_hook_node():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1).requires_grad_(False)
        _logging_hooks(lin, "lin", log)
        y = lin(lib.tensor(X))
        with lib.no_grad():
            z = _linear(lib, W1, B1)(lib.tensor(X, requires_grad=True))
        return log, y.requires_grad, y.grad_fn, z.grad_fn

    _run_both(program)


def test_grad_of_parameters_only_runs_the_pre_hooks():
    """``grad(loss, [weight])`` does not run the input node, so no full hook fires; the
    grad_output left for it is dropped when the pass ends."""
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)
        _logging_hooks(lin, "lin", log)
        y = lin(lib.tensor(X, requires_grad=True))
        grad = torch.autograd.grad if lib is torch else ag.grad_sync
        return log, _np(grad(y.sum(), [lin.weight])), y

    ours, theirs = program(ag), program(torch)
    _same(ours[:2], theirs[:2])
    assert ours[2].grad_fn.on_grads.__self__.grad_outputs == {}  # dropped at the end of the pass


# ---- replacing gradients ----

def test_full_hook_result_replaces_grad_input_and_a_gradient_for_a_non_grad_input_is_dropped():
    def program(lib):
        m = _two_in_two_out(lib)
        m.register_full_backward_hook(
            lambda mod, gi, go: (gi[0] * 10, lib.ones_like(gi[1]), None))
        a = lib.tensor(X, requires_grad=True)
        b = lib.tensor(X - 1)
        p, q, _ = m(a, b, 2.0, scale=lib.tensor(0.5))
        _backward(lib, (p + q).sum())
        return _grads(a, b)

    _run_both(program)


def test_pre_hook_result_replaces_grad_output_for_full_hooks_and_the_module():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)
        lin.register_full_backward_pre_hook(lambda mod, go: (go[0] * -3,))
        _logging_hooks(lin, "lin", log)
        x = lib.tensor(X, requires_grad=True)
        _backward(lib, lin(x).sum())
        return log, _grads(x, lin.weight, lin.bias)

    _run_both(program)


def test_several_hooks_run_in_registration_order_with_prepend_and_see_replacements():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)

        def pre(name: str, factor: float) -> Callable[..., Any]:
            def hook(mod: Any, go: Any) -> Any:
                log.append((name, _np(go)))
                return (go[0] * factor,)
            return hook

        def full(name: str, factor: float) -> Callable[..., Any]:
            def hook(mod: Any, gi: Any, go: Any) -> Any:
                log.append((name, _np(gi), _np(go)))
                return (gi[0] * factor,)
            return hook

        lin.register_full_backward_hook(full("full1", 2.0))
        lin.register_full_backward_pre_hook(pre("pre1", 3.0))
        lin.register_full_backward_hook(full("full2", 5.0), prepend=True)
        lin.register_full_backward_pre_hook(pre("pre2", 7.0), True)
        lin.register_full_backward_hook(full("full3", -1.0))
        x = lib.tensor(X, requires_grad=True)
        _backward(lib, lin(x).sum())
        return log, _grads(x, lin.weight)

    _run_both(program)


def test_removed_hooks_are_not_called_except_by_graphs_built_before_the_removal():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)
        before = lin.register_full_backward_hook(lambda m, gi, go: log.append("before"))
        lin.register_full_backward_hook(lambda m, gi, go: log.append("kept"))
        after = lin.register_full_backward_pre_hook(lambda m, go: log.append("after"))
        before.remove()
        x = lib.tensor(X, requires_grad=True)
        y = lin(x)
        after.remove()  # y's graph keeps it (the hooks of a call are fixed at the call)
        _backward(lib, y.sum())
        log.append("second")
        _backward(lib, lin(x).sum())
        return log, _grads(x)

    _run_both(program)


def test_removing_every_hook_restores_the_plain_call():
    def program(lib):
        lin = _linear(lib, W1, B1)
        handles = [lin.register_full_backward_hook(lambda m, gi, go: None),
                   lin.register_full_backward_pre_hook(lambda m, go: None)]
        hooked = lin(lib.tensor(X, requires_grad=True)).grad_fn.name()
        for h in handles:
            h.remove()
        return hooked, lin(lib.tensor(X, requires_grad=True)).grad_fn.name()

    _run_both(program)
    lin = ag.nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda m, gi, go: None).remove()
    assert lin._call_hooks == []


# ---- errors and warnings ----

def _error(fn: Callable[[], Any]) -> tuple[type, str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - compared against torch's below
        fn()
    return type(info.value), str(info.value)


_BAD_HOOKS = {
    "pre_hook_wrong_length": (True, "pre", lambda m, go: (go[0], go[0])),
    "full_hook_wrong_length": (True, "full", lambda m, gi, go: ()),
    "full_hook_returns_grads_without_input_grads": (False, "full", lambda m, gi, go: (go[0],)),
    "full_hook_changes_the_shape": (True, "full", lambda m, gi, go: (gi[0][:, :1],)),
    "full_hook_changes_the_dtype": (True, "full", lambda m, gi, go: (gi[0].float(),)),
    "full_hook_returns_a_number": (True, "full", lambda m, gi, go: (3,)),
    "pre_hook_changes_the_shape": (True, "pre", lambda m, go: (go[0][:, :1],)),
    "pre_hook_changes_the_dtype": (True, "pre", lambda m, go: (go[0].float(),)),
    "pre_hook_returns_a_list": (True, "pre", lambda m, go: ([1.0],)),
}


@pytest.mark.parametrize("case", sorted(_BAD_HOOKS))
def test_bad_hook_results_raise_torchs_errors(case):
    input_requires_grad, kind, hook = _BAD_HOOKS[case]

    def program(lib):
        lin = _linear(lib, W1, B1)
        if kind == "pre":
            lin.register_full_backward_pre_hook(hook)
        else:
            lin.register_full_backward_hook(hook)
        y = lin(lib.tensor(X, requires_grad=input_requires_grad))
        with _Record():
            return _error(lambda: _backward(lib, y.sum()))

    _run_both(program)


def test_writing_a_hooked_output_in_place_raises_torchs_error():
    def program(lib):
        lin = _linear(lib, W1, B1)
        lin.register_full_backward_hook(lambda m, gi, go: None)
        y = lin(lib.tensor(X, requires_grad=True))
        return _error(lambda: y.add_(1))

    _run_both(program)


def test_writing_a_hooked_input_in_place_inside_forward_raises_torchs_error():
    def program(lib):
        class Scale(lib.nn.Module):
            def forward(self, x: Any) -> Any:
                x.mul_(2)
                return x * 3

        m = Scale()
        m.register_full_backward_pre_hook(lambda mod, go: None)
        return _error(lambda: m(lib.tensor(X, requires_grad=True) * 1))

    _run_both(program)


def test_an_output_that_is_not_a_tensor_or_tuple_warns_and_gets_no_hook():
    def program(lib):
        class Listing(lib.nn.Module):
            def forward(self, x: Any) -> Any:
                return [x * 2]

        log: list[Any] = []
        m = Listing()
        _logging_hooks(m, "m", log)
        x = lib.tensor(X, requires_grad=True)
        with _Record() as caught:
            (y,) = m(x)
        _backward(lib, y.sum())
        return log, [str(w.message) for w in caught], y.grad_fn.name(), _grads(x)

    _run_both(program)


# ---- threads and the event loop ----

_caller = contextvars.ContextVar("caller", default="none")


@pytest.mark.anyio
async def test_await_backward_runs_hooks_on_a_worker_in_the_callers_context(workers_only):
    def program(lib, seen=None):
        log: list[Any] = []
        first, second = _linear(lib, W1, B1), _linear(lib, W2, B2)
        model = lib.nn.Sequential(first, lib.nn.ReLU(), second)
        for name, module in model.named_children():
            _logging_hooks(module, name, log)
        if seen is not None:
            first.register_full_backward_hook(
                lambda m, gi, go: seen.append((threading.get_ident(), _caller.get())))
        x = lib.tensor(X, requires_grad=True)
        return log, (model(x) ** 2).sum(), (x, first.weight, second.bias)

    seen: list[Any] = []
    log, loss, leaves = program(ag, seen)
    _caller.set("test")
    await loss.backward()
    t_log, t_loss, t_leaves = program(torch)
    t_loss.backward()
    _same((log, _grads(*leaves)), (t_log, _grads(*t_leaves)))
    assert seen == [(seen[0][0], "test")]
    assert seen[0][0] != threading.get_ident()


@pytest.mark.anyio
async def test_async_forward_sends_its_awaited_output_through_the_hook_node():
    def program(lib):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)
        _logging_hooks(lin, "lin", log)
        return log, lin, lib.tensor(X, requires_grad=True)

    class AsyncLinear(ag.nn.Module):
        def __init__(self, lin: Any) -> None:
            super().__init__()
            self.lin = lin

        async def forward(self, x: Any) -> Any:
            return self.lin(x)

    log, lin, x = program(ag)
    outer = AsyncLinear(lin)
    _logging_hooks(outer, "outer", log)
    await (await outer(x)).sum().backward()
    t_log, t_lin, t_x = program(torch)
    t_outer = torch.nn.Sequential(t_lin)
    _logging_hooks(t_outer, "outer", t_log)
    t_outer(t_x).sum().backward()
    _same((log, _grads(x, lin.weight)), (t_log, _grads(t_x, t_lin.weight)))


def test_concurrent_passes_through_one_graph_keep_their_own_grad_output():
    """Two threads run ``backward_sync`` through one graph at once; both output nodes
    run before either input node (a barrier between them), and each full hook still
    pairs its own pass's grad_input and grad_output (PyTorch keeps one slot)."""
    seeds = [np.full((4, 2), 1.0), np.full((4, 2), -2.0)]

    def program(lib, barrier=None):
        log: list[Any] = []
        lin = _linear(lib, W1, B1)
        if barrier is not None:
            def meet(grad: Any) -> None:
                barrier.wait()

            def hook_input(m: Any, args: Any, out: Any) -> None:
                # args are what forward got: the input node's outputs, whose tensor
                # hooks run between the output node and the input node of a pass
                args[0].register_hook(meet)

            lin.register_forward_hook(hook_input)
        lin.register_full_backward_hook(lambda m, gi, go: log.append((_np(gi), _np(go))))
        return log, lin(lib.tensor(X, requires_grad=True))

    t_log, t_y = program(torch)
    for seed in seeds:
        t_y.backward(torch.tensor(seed), retain_graph=True)
    log, y = program(ag, threading.Barrier(2, timeout=30))
    errors: list[BaseException] = []

    def run(seed: np.ndarray) -> None:
        try:
            y.backward_sync(ag.tensor(seed), retain_graph=True)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    order = sorted(range(2), key=lambda i: float(log[i][1][0][0, 0]))
    _same([log[i] for i in order], sorted(t_log, key=lambda e: float(e[1][0][0, 0])))



# ---- register_backward_hook (deprecated): a post-hook on the output's grad_fn ----

def _legacy_program(forward: Callable[[Any, Any, Any], Any], replace: bool = False,
                    weight: Callable[[Any], Any] | None = None) -> Callable[[Any], Any]:
    """A module running ``forward(lib, x, y)`` on non-leaf inputs, with one legacy hook
    that logs (and with ``replace`` doubles) grad_input; the program returns the log,
    the warnings of the call and the leaves' gradients."""

    def program(lib: Any) -> Any:
        class M(lib.nn.Module):
            def forward(self, x: Any, y: Any) -> Any:
                return forward(lib, x, y)

        m, log = M(), []

        def hook(module: Any, grad_input: Any, grad_output: Any) -> Any:
            log.append((module is m, _np(grad_input), _np(grad_output)))
            return tuple(None if g is None else g * 2 for g in grad_input) if replace else None

        m.register_backward_hook(hook)
        a = lib.tensor(X[0], requires_grad=True)
        b = lib.tensor(X[1], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = m(a * 1, b * 1)
        first = out["out"] if isinstance(out, dict) else out[0] if isinstance(out, tuple) else out
        loss = (first * (lib.tensor(W1[0]) if first.ndim else 1.0)).sum()
        _backward(lib, loss)
        messages = [(w.category, str(w.message)) for w in caught]
        return log, messages, _np(a.grad), _np(b.grad)

    return program


@pytest.mark.parametrize("replace", [False, True], ids=["observe", "replace"])
def test_legacy_backward_hook_sees_the_output_node(replace: bool) -> None:
    _run_both(_legacy_program(lambda lib, x, y: x * y, replace))


@pytest.mark.parametrize("forward", [
    lambda lib, x, y: (x * y).sum(0),  # several nodes: grad_input misses the inputs
    lambda lib, x, y: {"out": x * y},  # not a Tensor or a tuple of Tensors
    lambda lib, x, y: (x * y, x + y),  # outputs of different nodes
], ids=["several_nodes", "dict_output", "two_nodes_out"])
def test_legacy_backward_hook_warns_where_it_misses_gradients(forward: Any) -> None:
    _run_both(_legacy_program(forward))


def test_legacy_backward_hook_warns_for_a_non_tensor_input() -> None:
    def program(lib: Any) -> Any:
        class Scale(lib.nn.Module):
            def forward(self, x: Any, factor: float) -> Any:
                return x * factor

        m = Scale()
        m.register_backward_hook(lambda module, gi, go: None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m(lib.tensor(X[0], requires_grad=True) * 1, 2.0)
        return [(w.category, str(w.message)) for w in caught]

    _run_both(program)


def test_legacy_backward_hook_removed_is_not_called() -> None:
    def program(lib: Any) -> Any:
        lin, log = _linear(lib, W1, B1), []
        handle = lin.register_backward_hook(lambda m, gi, go: log.append(1))
        handle.remove()
        _backward(lib, lin(lib.tensor(X)).sum())
        return log, _np(lin.weight.grad)

    _run_both(program)


@pytest.mark.parametrize("first", ["legacy", "full"])
def test_legacy_and_full_backward_hooks_do_not_mix(first: str) -> None:
    """PyTorch's rule holds even after the first kind's hook was removed."""

    def program(lib: Any) -> Any:
        lin = _linear(lib, W1, B1)
        kinds = {"legacy": lin.register_backward_hook, "full": lin.register_full_backward_hook}
        kinds[first](lambda m, gi, go: None).remove()
        other = kinds["full" if first == "legacy" else "legacy"]
        with pytest.raises(RuntimeError) as info:
            other(lambda m, gi, go: None)
        return str(info.value)

    _run_both(program)
