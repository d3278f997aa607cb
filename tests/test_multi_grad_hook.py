"""register_multi_grad_hook, with PyTorch as the oracle.

Each program below runs once against PyTorch and once against aiograd, under
``backward_sync`` and under ``await backward()``, each with multithreading on and
off; what ``fn`` receives, and how often, must be the same.
"""

from __future__ import annotations

import contextvars
import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest
from probes import passthrough

import aiograd as ag


class Api(NamedTuple):
    """What a program needs of one library."""

    lib: Any
    backward: Callable[..., Any]
    grad: Callable[..., Any]
    register: Callable[..., Any]


def torch_api() -> Api:
    torch = pytest.importorskip("torch")
    return Api(torch, torch.autograd.backward, torch.autograd.grad,
               torch.autograd.graph.register_multi_grad_hook)


def aiograd_api(*, awaited: bool, threads: bool) -> Api:
    """aiograd's functions; ``awaited``: each call is awaited on the test's loop (the
    program runs in a thread of ``anyio.to_thread``)."""

    def call(sync_fn: Callable[..., Any], async_fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if not awaited:
                with ag.set_multithreading_enabled(threads):
                    return sync_fn(*args, **kwargs)

            async def on_the_loop() -> Any:
                with ag.set_multithreading_enabled(threads):
                    return await async_fn(*args, **kwargs)

            return anyio.from_thread.run(on_the_loop)

        return run

    return Api(ag, call(ag.backward_sync, ag.backward), call(ag.grad_sync, ag.grad),
               ag.graph.register_multi_grad_hook)


def values(grads: Any) -> Any:
    """Gradients as lists of floats (None stays None), to compare across libraries."""
    if grads is None:
        return None
    if isinstance(grads, (tuple, list)):
        return [values(g) for g in grads]
    return grads.tolist()


def recorder(calls: list[Any], tag: str) -> Callable[[Any], None]:
    return lambda grads: calls.append((tag, values(grads)))


def leaves(api: Api, *rows: list[float]) -> list[Any]:
    return [api.lib.tensor(row, dtype=api.lib.float64, requires_grad=True) for row in rows]


# ---- the programs (gradients are exact in float64 in both libraries) ----


def all_mode_waits_for_every_computed_gradient(api: Api) -> list[Any]:
    """PyTorch's docstring example, and a pass that reaches all four tensors."""
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    c, d = a * b, a + b
    api.register((a, b, c, d), recorder(calls, "all"))
    api.backward(c.sum(), retain_graph=True)
    api.backward(c.sum(), inputs=(a,), retain_graph=True)
    api.backward((c * d).sum())
    return calls


def unused_tensors_get_none(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b, unused = leaves(api, [1.0, 2.0], [3.0, 4.0], [5.0, 6.0])
    never_used = unused * 2.0
    api.register((a, unused, b, never_used), recorder(calls, "all"))
    api.register((unused, never_used), recorder(calls, "not reached"))
    api.backward((a * b).sum())
    return calls


def backward_inputs_restrict_the_gradients(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    c = a * b
    loss = (c * c).sum()
    api.register((a, b, c), recorder(calls, "all"))
    api.backward(loss, inputs=(b,), retain_graph=True)
    api.backward(loss, inputs=(c,), retain_graph=True)
    api.backward(loss, inputs=(a, c))
    return calls


def grad_of_non_leaves(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    c, d = a * b, a + b
    loss = (c * d).sum()
    api.register((a, c, d), recorder(calls, "all"))
    api.register((a, c, d), recorder(calls, "any"), mode="any")
    calls.append(("grad", values(api.grad(loss, (c,), retain_graph=True))))
    calls.append(("grad", values(api.grad(loss, (d, c), retain_graph=True))))
    api.backward(loss)
    return calls


def retain_graph_calls_once_per_pass(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    loss = (a * b * b).sum()
    api.register((a, b), recorder(calls, "all"))
    api.register((a, b), recorder(calls, "any"), mode="any")
    api.backward(loss, retain_graph=True)
    api.backward(loss)
    return calls


def removed_hook_is_not_called(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    c = a * b
    loss = c.sum()
    kept = api.register((a, c), recorder(calls, "kept"))
    removed = api.register((a, b, c), recorder(calls, "removed"))
    removed_any = api.register((a, b, c), recorder(calls, "removed any"), mode="any")
    api.backward(loss, retain_graph=True)
    removed.remove()
    removed_any.remove()
    api.backward(loss, retain_graph=True)
    removed.remove()
    kept.remove()
    api.backward(loss)
    return calls


def non_leaf_tensors(api: Api) -> list[Any]:
    calls: list[Any] = []
    (x,) = leaves(api, [1.0, -2.0, 0.5])
    y = x * 3.0
    p, q = y * y, y + x
    loss = (p * q).sum()
    api.register((q, y, p), recorder(calls, "all"))
    api.register((q, y, p), recorder(calls, "any"), mode="any")
    api.backward(loss)
    return calls


def two_losses_in_separate_passes(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    first, second = (a * 2.0).sum(), (b * b).sum()
    api.register((a, b), recorder(calls, "all"))
    api.register((a, b), recorder(calls, "any"), mode="any")
    api.backward(first, retain_graph=True)
    api.backward(second, retain_graph=True)
    api.register((first, second, a), recorder(calls, "roots"))  # two roots: See
    api.backward((first, second))  # test_hook_on_the_root_counts_its_gradient for one
    return calls


def tensor_listed_twice(api: Api) -> list[Any]:
    calls: list[Any] = []
    a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
    c = a * b
    api.register((a, c, a), recorder(calls, "all"))
    api.register((c, b, c), recorder(calls, "any"), mode="any")
    api.backward((c * b).sum())
    return calls


def any_mode_skips_tensors_that_do_not_require_grad(api: Api) -> list[Any]:
    calls: list[Any] = []
    (a,) = leaves(api, [1.0, 2.0])
    constant = api.lib.tensor([3.0, 4.0], dtype=api.lib.float64)
    api.register((constant, a), recorder(calls, "any"), mode="any")
    api.backward((a * constant).sum())
    return calls


PROGRAMS = [
    all_mode_waits_for_every_computed_gradient,
    unused_tensors_get_none,
    backward_inputs_restrict_the_gradients,
    grad_of_non_leaves,
    retain_graph_calls_once_per_pass,
    removed_hook_is_not_called,
    non_leaf_tensors,
    two_losses_in_separate_passes,
    tensor_listed_twice,
    any_mode_skips_tensors_that_do_not_require_grad,
]


@pytest.mark.parametrize("threads", [True, False], ids=["threads", "single_thread"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_backward_sync_calls_fn_as_pytorch(program: Any, threads: bool) -> None:
    theirs = program(torch_api())
    assert theirs  # every program calls fn
    assert program(aiograd_api(awaited=False, threads=threads)) == theirs


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("threads", [True, False], ids=["threads", "single_thread"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
async def test_awaited_backward_calls_fn_as_pytorch(program: Any, threads: bool) -> None:
    theirs = program(torch_api())
    ours = await anyio.to_thread.run_sync(program, aiograd_api(awaited=True, threads=threads))
    assert ours == theirs


# ---- where aiograd does what PyTorch means, not what it does ----


def test_hook_on_the_root_counts_its_gradient():
    # PyTorch does not count the single root (its grad_fn is not among the task's
    # nodes in graph): it calls fn twice, with one gradient each. Its answer with the
    # root one node further down is the oracle.
    def run(api: Api, root: Callable[[Any], Any]) -> list[Any]:
        calls: list[Any] = []
        a, b = leaves(api, [1.0, 2.0], [3.0, 4.0])
        loss = (a * b).sum()
        api.register((loss, a, b), recorder(calls, "all"))
        api.backward(root(loss), inputs=(a,))
        return calls

    theirs = run(torch_api(), lambda loss: loss * 1.0)
    ours = run(aiograd_api(awaited=False, threads=True), lambda loss: loss)
    assert ours == theirs
    assert len(ours) == 1


def test_grad_of_leaves_calls_fn_as_backward_with_inputs():
    # PyTorch raises "A leaf node was passed to _will_engine_execute_node but we are
    # currently running autograd.grad()": its engine cannot tell yet. The leaves'
    # hooks run all the same, so fn gets what backward(inputs=...) gives it.
    def run(api: Api, differentiate: Callable[[Any, Any], Any]) -> list[Any]:
        calls: list[Any] = []
        a, b, c = leaves(api, [1.0, 2.0], [3.0, 4.0], [5.0, 6.0])
        loss = (a * b * c).sum()
        api.register((a, b, c), recorder(calls, "all"))
        api.register((c, b, a), recorder(calls, "any"), mode="any")
        differentiate(loss, (a, c))
        return calls

    theirs = run(torch_api(), lambda loss, inputs: torch_api().backward(loss, inputs=inputs))
    ours = run(aiograd_api(awaited=False, threads=True), ag.grad_sync)
    assert ours == theirs


def test_output_that_gets_no_gradient_is_none():
    def run(api: Api) -> list[Any]:
        calls: list[Any] = []
        (a,) = leaves(api, [1.0, 2.0])
        first, second = (a * 2.0).unbind()
        api.register((first, second), lambda grads: calls.append([g is None for g in grads]))
        api.backward(first * 3.0)
        return calls

    assert run(aiograd_api(awaited=False, threads=True)) == run(torch_api())


# ---- errors ----


def errors(api: Api, call: Callable[[Api], Any]) -> tuple[type, str]:
    """The builtin type (aiograd's may subclass two: see ``aiograd._boundary``) and message."""
    with pytest.raises(Exception) as info:
        call(api)
    return next(c for c in info.type.__mro__ if c.__module__ == "builtins"), str(info.value)


def test_unknown_mode_is_a_value_error_as_pytorchs():
    def call(api: Api) -> Any:
        (a,) = leaves(api, [1.0])
        return api.register((a,), print, mode="every")

    theirs = errors(torch_api(), call)
    assert errors(aiograd_api(awaited=False, threads=True), call) == theirs
    assert theirs[0] is ValueError


def test_all_mode_refuses_a_tensor_that_does_not_require_grad_as_pytorch():
    def call(api: Api) -> Any:
        (a,) = leaves(api, [1.0])
        return api.register((a, api.lib.ones(1)), print)

    theirs = errors(torch_api(), call)
    assert errors(aiograd_api(awaited=False, threads=True), call) == theirs


def test_refused_registration_leaves_no_hook_behind():
    calls: list[Any] = []
    (a,) = leaves(aiograd_api(awaited=False, threads=True), [1.0])
    with pytest.raises(AssertionError):
        ag.graph.register_multi_grad_hook((a, ag.ones(1)), calls.append)
    ag.backward_sync(a * 2.0)
    assert calls == []


# ---- many passes at once, and what they leave behind ----


def pending_passes(handle: Any) -> int:
    """The passes a multi-grad hook keeps state for (white box: through the tensor
    hook it registered first)."""
    fn = handle.handles[0]._hook.fn
    return len(getattr(fn, "func", fn).__self__.passes)


pass_number: contextvars.ContextVar[int] = contextvars.ContextVar("pass_number")


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_concurrent_passes_each_call_fn_once_with_their_own_gradients():
    passes = 48
    reached = 0
    all_reached = anyio.Event()
    pending_at_gate: list[int] = []

    class Gate(ag.Function):
        """``y = x``; its (async) backward waits until every pass is inside it."""

        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        async def backward(ctx, g):
            nonlocal reached
            reached += 1
            if reached == passes:
                pending_at_gate.append(pending_passes(handle))
                all_reached.set()
            await all_reached.wait()
            return g

    calls: list[Any] = []
    firsts: list[Any] = []
    a, b = leaves(aiograd_api(awaited=True, threads=True), [1.0, 2.0], [3.0, 4.0])
    y = Gate.apply(a * b)
    handle = ag.graph.register_multi_grad_hook(
        (a, b, y), lambda grads: calls.append((pass_number.get(), values(grads))))
    any_handle = ag.graph.register_multi_grad_hook(
        (a, b, y), lambda grad: firsts.append((pass_number.get(), values(grad))), mode="any")

    async def one_pass(k: int) -> None:
        pass_number.set(k)
        inputs = (a,) if k % 2 else None
        await ag.backward((y * float(k)).sum(), inputs=inputs, retain_graph=True)

    async with anyio.create_task_group() as tg:
        for k in range(1, passes + 1):
            tg.start_soon(one_pass, k)

    assert pending_at_gate == [passes]  # y's gradient was in for every pass at once
    expected = [(k, [[3.0 * k, 4.0 * k], None if k % 2 else [1.0 * k, 2.0 * k], [k, k]])
                for k in range(1, passes + 1)]
    assert sorted(calls) == expected
    assert sorted(firsts) == [(k, [k, k]) for k in range(1, passes + 1)]
    assert pending_passes(handle) == pending_passes(any_handle) == 0


@pytest.mark.timeout(60)
def test_sync_passes_on_many_threads_each_call_fn_once_with_their_own_gradients():
    passes = 8
    pending_at_gate: list[int] = []
    gate = threading.Barrier(passes, action=lambda: pending_at_gate.append(
        pending_passes(handle)), timeout=30)
    Gate = passthrough(gate.wait)  # each thread runs the nodes of its own pass
    calls: list[Any] = []
    a, b = leaves(aiograd_api(awaited=False, threads=True), [1.0, 2.0], [3.0, 4.0])
    y = Gate.apply(a * b)
    handle = ag.graph.register_multi_grad_hook(
        (a, b, y), lambda grads: calls.append((pass_number.get(), values(grads))))

    def one_pass(k: int) -> None:
        pass_number.set(k)
        inputs = (a,) if k % 2 else None
        ag.backward_sync((y * float(k)).sum(), inputs=inputs, retain_graph=True)

    threads = [threading.Thread(target=one_pass, args=(k,)) for k in range(1, passes + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pending_at_gate == [passes]
    assert sorted(calls) == [
        (k, [[3.0 * k, 4.0 * k], None if k % 2 else [1.0 * k, 2.0 * k], [k, k]])
        for k in range(1, passes + 1)]
    assert pending_passes(handle) == 0


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_state_of_a_pass_goes_with_it():
    calls: list[Any] = []

    class Boom(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    a, b = leaves(aiograd_api(awaited=True, threads=True), [1.0, 2.0], [3.0, 4.0])
    c, failing = a * b, Boom.apply(a) * b
    handles = [ag.graph.register_multi_grad_hook((a, b, c, failing), calls.append, mode=mode)
               for mode in ("all", "any")]
    for _ in range(300):
        await ag.backward(c.sum(), retain_graph=True)
    with ag.set_multithreading_enabled(False):
        for _ in range(300):
            await ag.backward(c.sum(), retain_graph=True)
    assert len(calls) == 2 * 600
    assert [pending_passes(h) for h in handles] == [0, 0]
    for _ in range(20):  # the hook of failing runs, a's never does
        with pytest.raises(ValueError, match="boom"):
            await ag.backward(failing.sum(), retain_graph=True)
    gc.collect()  # a failed pass is kept by its exception's traceback until then
    assert [pending_passes(h) for h in handles] == [0, 0]


def test_state_of_a_sync_pass_goes_with_it():
    calls: list[Any] = []
    a, b = leaves(aiograd_api(awaited=False, threads=True), [1.0, 2.0], [3.0, 4.0])
    c = a * b
    handles = [ag.graph.register_multi_grad_hook((a, b, c), calls.append, mode=mode)
               for mode in ("all", "any")]
    for threads in (True, False):
        with ag.set_multithreading_enabled(threads):
            for _ in range(300):
                ag.backward_sync(c.sum(), retain_graph=True)
    assert len(calls) == 2 * 600
    assert [pending_passes(h) for h in handles] == [0, 0]


def test_hook_keeps_no_graph_alive(no_cyclic_gc):
    (a,) = leaves(aiograd_api(awaited=False, threads=True), [1.0, 2.0])
    c = a * 2.0
    d = c * c
    handle = ag.graph.register_multi_grad_hook((a, c, d), print)
    node = weakref.ref(d.grad_fn)
    del c, d
    assert node() is None
    handle.remove()


def test_handle_is_a_removable_handle():
    (a,) = leaves(aiograd_api(awaited=False, threads=True), [1.0])
    calls: list[Any] = []
    with ag.graph.register_multi_grad_hook((a,), calls.append) as handle:
        assert isinstance(handle, ag.graph.RemovableHandle)
    ag.backward_sync(a * 2.0)
    assert calls == []


@pytest.mark.parametrize("mode", ["all", "any"])
def test_non_tensors_are_a_type_error(mode):
    with pytest.raises(TypeError, match="register_multi_grad_hook.*float"):
        ag.register_multi_grad_hook([ag.ones(2), 1.5], lambda g: None, mode=mode)
