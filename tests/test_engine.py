"""The engine's semantics, one behaviour per test (seeds: engine.cpp, python_engine.cpp).

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import contextvars
import sys
import threading
import warnings

import numpy as np
import pytest
from probes import passthrough

import aiograd as ag

pytestmark = pytest.mark.timeout(60)


def leaf(values, dtype="float32"):
    return ag.tensor(np.array(values, dtype=dtype), requires_grad=True)


# ---- backward() and grad() ----


@pytest.mark.anyio
async def test_backward_accumulates_into_leaf_grad():
    x = leaf([1.0, 2.0, 3.0])
    await ag.backward(x * x, ag.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    await ag.backward(x * 3.0, ag.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])


@pytest.mark.anyio
async def test_tensor_backward_method_awaits():
    x = leaf([2.0])
    y = x * x
    await y.backward()
    assert x.grad.item() == pytest.approx(4.0)


@pytest.mark.anyio
async def test_grad_returns_gradients_and_leaves_grad_untouched():
    x = leaf([1.0, 2.0])
    (g,) = await ag.grad(x * x, x, ag.ones(2))
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert x.grad is None


def test_backward_sync_in_a_plain_thread():
    x = leaf([3.0])
    result = {}

    def run():
        ag.backward_sync(x * x)
        result["grad"] = x.grad.item()

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert result["grad"] == pytest.approx(6.0)


@pytest.mark.anyio
async def test_sync_api_raises_inside_running_loop():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="use 'await aiograd.backward"):
        ag.backward_sync(x * x)


def test_implicit_grad_requires_scalar_output():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        ag.backward_sync(x * x)


def test_element_without_grad_fn_is_an_error():
    x = ag.tensor([1.0])
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and "
                                           "does not have a grad_fn"):
        ag.backward_sync(x * 2.0)


def test_grad_tensors_count_must_match_outputs():
    x = leaf([1.0])
    with pytest.raises(ValueError, match="grad_tensors has 2 element"):
        ag.backward_sync([x * 2.0], [ag.ones(1), ag.ones(1)])


def test_grad_tensors_shape_must_match_output():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_tensors\[0\] has a shape "
                                           r"of \(3,\) and output\[0\] has a shape of \(2,\)"):
        ag.backward_sync(x * 2.0, ag.ones(3))


def test_grad_tensors_must_be_tensors():
    x = leaf([1.0])
    with pytest.raises(TypeError, match=r"grad_tensors\[0\] must be a Tensor or None"):
        ag.backward_sync([x * 2.0], [1.0])


def test_integer_grad_tensors_are_cast():
    x = leaf([1.0, 2.0])
    ag.backward_sync(x * 2.0, ag.tensor([1, 1]))
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_unused_input_error_names_the_input():
    x, y = leaf([1.0]), leaf([2.0])
    z = x * 2.0
    with pytest.raises(RuntimeError, match=r"^The differentiated Tensor at index 1 appears "
                                           r"to not have been used in the graph\."):
        ag.grad_sync(z, [x, y])


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.anyio
async def test_unused_input_gets_zeros_with_materialize_grads(create_graph):
    torch = pytest.importorskip("torch")
    tx, tz = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    expected = torch.autograd.grad((tx * 2).sum(), [tx, tz], materialize_grads=True,
                                   create_graph=create_graph)
    x, z = leaf([1.0, 1.0]), leaf([1.0, 1.0, 1.0])
    got = await ag.grad((x * 2.0).sum(), [x, z], materialize_grads=True,
                        create_graph=create_graph)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.detach().numpy(), e.detach().numpy())
        assert g.requires_grad == e.requires_grad
    assert got[1].dtype == z.dtype
    with pytest.raises(ValueError, match="allow_unused to be True or not passed"):
        await ag.grad((x * 2.0).sum(), [x, z], materialize_grads=True, allow_unused=False)
    with pytest.raises(RuntimeError, match="materialize_grads cannot be used when the given "
                                           "input is a GradientEdge"):
        await ag.grad((x * 2.0).sum(), [ag.graph.get_gradient_edge(z * 1.0)],
                      materialize_grads=True)


def test_unused_input_gets_none_with_allow_unused():
    x, y = leaf([1.0]), leaf([2.0])
    gx, gy = ag.grad_sync(x * 2.0, [x, y], allow_unused=True)
    assert gx.item() == pytest.approx(2.0)
    assert gy is None


def test_grad_inputs_may_be_gradient_edges():
    x = leaf([1.0, 2.0])
    y = x * x
    z = y * 3.0
    (gy,) = ag.grad_sync(z, ag.get_gradient_edge(y), ag.ones(2))
    np.testing.assert_allclose(gy.numpy(), [3.0, 3.0])


def test_outputs_may_be_gradient_edges_as_in_pytorch():
    torch = pytest.importorskip("torch")
    from torch.autograd.graph import get_gradient_edge as torch_edge

    seen = []
    for lib, edge_of, grad, backward in (
            (torch, torch_edge, torch.autograd.grad, torch.autograd.backward),
            (ag, ag.get_gradient_edge, ag.grad_sync, ag.backward_sync)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        (g,) = grad(edge_of(y), x, lib.ones(2))  # the gradient enters at y's edge
        (gs,) = grad(edge_of((x * 3.0).sum()), x)  # a scalar output: implicit ones
        backward([edge_of(x * x * 2.0)], [lib.ones(2)])
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for "
                                               "scalar outputs"):
            grad(edge_of(x * x), x)
        seen.append((g.numpy().tolist(), gs.numpy().tolist(), x.grad.numpy().tolist()))
    assert seen[1] == seen[0]


def test_grad_inputs_of_wrong_type_are_rejected():
    x = leaf([1.0])
    with pytest.raises(TypeError, match="all inputs have to be Tensors or GradientEdges"):
        ag.grad_sync(x * 2.0, [x, "y"])


def test_backward_inputs_restrict_accumulation():
    x, w = leaf([1.0]), leaf([2.0])
    ag.backward_sync(x * w, inputs=[x])
    assert x.grad.item() == pytest.approx(2.0)
    assert w.grad is None


def test_reading_grad_of_a_non_leaf_that_does_not_retain_it_warns():
    x = leaf([1.0, 2.0])
    h = x * 2.0
    with pytest.warns(UserWarning, match="not a leaf Tensor is being accessed"):
        assert h.grad is None
    h.retain_grad()
    ag.backward_sync(h * h, ag.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(h.grad.numpy(), [4.0, 8.0])  # retained: no warning
        np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])  # a leaf: no warning


def test_backward_inputs_write_grad_of_non_leaf():
    x = leaf([1.0, 2.0])
    h = x * 2.0
    out = h * h
    ag.backward_sync(out, ag.ones(2), inputs=[h])
    np.testing.assert_allclose(h.grad.numpy(), [4.0, 8.0])
    assert x.grad is None


def test_grad_of_non_leaf_input_does_not_run_its_node():
    x = leaf([1.0])
    h = x * 2.0
    ran = []
    h.grad_fn.register_prehook(lambda grads: ran.append("h"))
    (gh,) = ag.grad_sync(h * 5.0, h)
    assert gh.item() == pytest.approx(5.0)
    assert ran == []


def test_root_leading_to_no_input_does_not_run():
    # The input w was computed from the root y, so no path leads from y to it;
    # u, a leaf never used, has no node at all (seed init_to_execute: the root
    # is needed only if one of its children is).
    x, u = leaf([1.0]), leaf([2.0])
    y = x * x
    w = (y * 3.0) * y
    ran = []
    y.grad_fn.register_prehook(lambda grads: ran.append("y"))
    assert ag.grad_sync(y, [w, u], allow_unused=True) == (None, None)
    ag.backward_sync(y, inputs=[w])
    assert ran == []
    assert x.grad is None and w.grad is None


def test_grad_of_root_itself_does_not_run_its_freed_node():
    x = leaf([2.0])
    y = x * x
    ag.backward_sync(y)  # frees y's saved tensors
    (gy,) = ag.grad_sync(y, y)
    assert gy.item() == 1.0


def test_empty_backward_inputs_are_rejected():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="cannot be empty"):
        ag.backward_sync(x * 2.0, inputs=[])


# ---- retain_graph, create_graph ----


def test_second_backward_through_freed_graph_raises():
    x = leaf([2.0])
    y = x * x
    ag.backward_sync(y)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        ag.backward_sync(y)


def test_retain_graph_allows_a_second_backward():
    x = leaf([2.0])
    y = x * x
    ag.backward_sync(y, retain_graph=True)
    ag.backward_sync(y)
    assert x.grad.item() == pytest.approx(8.0)


def test_create_graph_gives_second_order_gradients():
    x = ag.tensor([2.0], dtype="float64", requires_grad=True)
    y = x * x * x
    (g,) = ag.grad_sync(y, x, create_graph=True)
    assert g.grad_fn is not None
    (gg,) = ag.grad_sync(g, x)
    assert gg.item() == pytest.approx(12.0)  # d2/dx2 x^3 = 6x


def test_backward_with_create_graph_warns_of_reference_cycle_once(monkeypatch):
    monkeypatch.setattr(sys.modules["aiograd.autograd"], "_create_graph_warned", False)
    x = leaf([1.0])
    with pytest.warns(UserWarning, match="reference cycle"):
        ag.backward_sync(x * x, create_graph=True)
    assert x.grad.grad_fn is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process, as PyTorch's TORCH_WARN_ONCE
        ag.backward_sync(x * x, create_graph=True)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_a_grad_with_history_is_added_to_in_place_by_a_plain_backward_as_pytorchs():
    torch = pytest.importorskip("torch")

    def run(lib, backward):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        backward((x ** 3).sum(), create_graph=True)
        first = x.grad
        made = (first.grad_fn.name().split("::")[-1], first.requires_grad, first._version)
        backward(first.sum())  # plain: into the same tensor, in place
        same = (x.grad is first, first.tolist(), first._version)
        x.grad = None
        backward((x ** 3).sum(), create_graph=True)
        held = x.grad
        backward((x ** 2).sum(), create_graph=True)  # with history: out of place
        return made, same, (x.grad is held, x.grad.grad_fn.name(), x.grad.tolist())

    ours = run(ag, lambda loss, **kw: ag.backward_sync(loss, **kw))
    assert ours == run(torch, lambda loss, **kw: loss.backward(**kw))


def test_grad_mode_inside_backward_equals_create_graph():
    seen = []

    Probe = passthrough(lambda: seen.append(ag.is_grad_enabled()))

    x = leaf([1.0])
    ag.backward_sync(Probe.apply(x))
    ag.grad_sync(Probe.apply(x), x, create_graph=True)
    assert seen == [False, True]


# ---- hooks ----


def test_hook_order_matches_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib, backward):
        events = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2.0
        y.retain_grad()
        y.register_hook(lambda g: events.append("tensor_pre_hook"))
        y.grad_fn.register_prehook(lambda go: events.append("node_pre_hook"))
        y.grad_fn.register_hook(lambda gi, go: events.append("node_post_hook"))
        z = y * y
        z.grad_fn.register_hook(lambda gi, go: events.append("consumer_post_hook"))
        x.register_post_accumulate_grad_hook(lambda t: events.append("post_accumulate"))
        backward(z, lib.ones(2))
        events.append(f"retained:{y.grad is not None}")
        return events

    ours = run(ag, lambda z, g: ag.backward_sync(z, g))
    theirs = run(torch, lambda z, g: z.backward(g))
    assert ours == theirs


def test_tensor_hook_replaces_gradient():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g * 10.0)
    ag.backward_sync(x * 1.0, ag.ones(2))
    np.testing.assert_allclose(x.grad.numpy(), [10.0, 10.0])


def test_removed_hook_does_not_run():
    x = leaf([1.0])
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    handle.remove()
    ag.backward_sync(x * 2.0)
    assert calls == []


def test_post_accumulate_grad_hook_sees_written_grad():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    ag.backward_sync(x * 3.0, ag.ones(2))
    np.testing.assert_allclose(seen[0], [3.0, 3.0])


def test_node_post_hook_may_replace_gradients():
    x = leaf([1.0])
    y = x * 2.0
    # x * 2.0: the number has a None edge, as in PyTorch, so two grad_inputs
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] * 0.0, None))
    ag.backward_sync(y)
    assert x.grad.item() == 0.0


def _node_hook_error(lib, register: str, result) -> BaseException:
    """The error of a backward of ``exp(x).sum()`` when ExpBackward0's hook returns ``result``."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    if register == "prehook":
        y.grad_fn.register_prehook(lambda grad_outputs: result(grad_outputs))
    else:
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: result(grad_inputs))
    with pytest.raises(Exception) as info:
        y.sum().backward() if lib.__name__ == "torch" else y.sum().backward_sync()
    return info.value


@pytest.mark.parametrize("register", ["prehook", "hook"])
@pytest.mark.parametrize("result", [list, lambda grads: grads[0], lambda grads: grads * 2],
                         ids=["list", "tensor", "two_values"])
def test_node_hook_must_return_a_tuple_of_one_gradient_per_slot(register, result):
    torch = pytest.importorskip("torch")
    expected = _node_hook_error(torch, register, result)
    error = _node_hook_error(ag, register, result)
    assert type(error) is type(expected)
    assert str(error).startswith(str(expected))  # then aiograd names the node
    assert str(error).endswith(f"({register} of ExpBackward0)")


@pytest.mark.parametrize("call", ["grad", "backward_inputs"])
def test_node_post_hooks_see_none_for_edges_the_task_prunes(call):
    torch = pytest.importorskip("torch")

    def seen(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        y = x * w
        log = []
        y.grad_fn.register_hook(
            lambda gi, go: log.append([None if g is None else g.tolist() for g in gi]))
        if call == "grad":
            (ag.grad_sync if lib is ag else torch.autograd.grad)(y.sum(), [w])
        elif lib is ag:
            y.sum().backward_sync(inputs=[w])
        else:
            y.sum().backward(inputs=[w])
        return log

    assert seen(ag) == seen(torch) == [[None, [1.0, 2.0]]]


def test_hook_returning_wrong_shape_is_an_error():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.grad_fn.register_hook(lambda gi, go: (ag.ones(3), None))
    with pytest.raises(RuntimeError, match=r"hook of MulBackward0 returned a gradient of shape "
                                           r"\(3,\) at index 0; expected \(2,\)"):
        ag.backward_sync(y, ag.ones(2))


@pytest.mark.parametrize(("kind", "replacement"), [
    (kind, replacement)
    for kind in ("prehook", "hook")
    for replacement in ("broadcastable_shape", "other_dtype", "fills_none", "same_shape_and_dtype")
    if (kind, replacement) != ("prehook", "fills_none")  # MulBackward0 has one grad_output
])
def test_node_hook_replacements_are_checked_like_pytorchs(kind, replacement):
    # PyTorch's check_single_result: a node hook may return None or a gradient
    # of the same shape and dtype, and may not fill in a gradient that was None.
    torch = pytest.importorskip("torch")

    def run(lib, backward):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2.0  # grad_inputs: (x's, None for the number)
        new = {"broadcastable_shape": lambda: (lib.ones(1), None),
               "other_dtype": lambda: (lib.ones(2, dtype=lib.float64), None),
               "fills_none": lambda: (lib.ones(2), lib.ones(2)),
               "same_shape_and_dtype": lambda: (lib.ones(2) * 5.0, None)}[replacement]
        if kind == "prehook":
            y.grad_fn.register_prehook(lambda go: new()[:1])
        else:
            y.grad_fn.register_hook(lambda gi, go: new())
        try:
            backward(y, lib.ones(2))
        except RuntimeError:
            return "error"
        return x.grad.tolist()

    ours = run(ag, ag.backward_sync)
    assert ours == run(torch, torch.autograd.backward)
    if replacement == "same_shape_and_dtype":
        assert ours == ([5.0, 5.0] if kind == "hook" else [10.0, 10.0])
    else:
        assert ours == "error"


# ---- execution order ----


def _diamond(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    a = x * 2.0
    b = x * 3.0
    c = a * b
    d = c + a
    e = d * b
    return x, e


def test_node_order_equals_pytorch_with_multithreading_disabled():
    torch = pytest.importorskip("torch")

    def order(lib, run):
        x, e = _diamond(lib)
        names = []
        stack, seen = [e.grad_fn], set()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            node.register_prehook(lambda go, n=node: names.append(n.name()))
            stack.extend(fn for fn, _ in node.next_functions)
        run(e, lib.ones(2))
        return [name.replace("torch::autograd::", "") for name in names]

    with ag.set_multithreading_enabled(False):
        ours = order(ag, lambda e, g: ag.backward_sync(e, g))
    with torch.autograd.set_multithreading_enabled(False):
        theirs = order(torch, lambda e, g: e.backward(g))
    assert ours == theirs


def test_execution_order_is_predicted_by_current_graph_task():
    predicted, actual = [], []
    x = leaf([1.0, 2.0])
    a = x * 1.0
    y = (a * 2.0) * (a * 3.0)
    y.grad_fn.register_prehook(
        lambda go: predicted.extend(n.name() for n in ag.current_graph_task_execution_order())
    )
    stack, seen = [y.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda go, n=node: actual.append(n.name()))
        stack.extend(fn for fn, _ in node.next_functions)
    with ag.set_multithreading_enabled(False):
        ag.backward_sync(y, ag.ones(2))
    assert len(actual) == 5
    assert predicted == actual


def test_execution_order_requires_multithreading_disabled():
    errors = []

    class Spy(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            try:
                ag.current_graph_task_execution_order()
            except RuntimeError as exc:
                errors.append(str(exc))
            return g

    ag.backward_sync(Spy.apply(leaf([1.0])))
    assert "multithreading disabled" in errors[0]


def test_current_graph_task_id_inside_and_outside_backward():
    ids = []

    Spy = passthrough(lambda: ids.append(ag.current_graph_task_id()))

    x = leaf([1.0])
    ag.backward_sync(Spy.apply(x))
    ag.backward_sync(Spy.apply(x))
    assert ag.current_graph_task_id() == -1
    assert ids[0] > 0 and ids[1] > ids[0]


# ---- validate_outputs ----


def test_custom_function_wrong_gradient_count_is_an_error():
    class Bad(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        ag.backward_sync(Bad.apply(leaf([1.0])))


def test_gradient_of_other_dtype_is_cast():
    class Wide(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return ag.tensor(g.numpy().astype("float64") * 2)

    x = leaf([1.0])
    ag.backward_sync(Wide.apply(x))
    assert x.grad.dtype == np.float32 and x.grad.item() == 2.0


def test_broadcast_gradient_is_summed_to_input_shape():
    x = leaf([1.0, 2.0])
    w = ag.tensor(np.ones((3, 2), dtype="float32"), requires_grad=True)
    ag.backward_sync(x * w, ag.ones(3, 2))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


# ---- errors, anomaly mode, warnings ----


class Boom(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise KeyError("boom in backward")


@pytest.mark.anyio
async def test_error_in_node_reaches_caller_with_type_and_traceback():
    x = leaf([1.0])
    with pytest.raises(KeyError, match="boom in backward") as info:
        await ag.backward(Boom.apply(x) * 2.0)
    frames = [f.name for f in info.traceback]
    assert "backward" in frames  # the user's backward frame is kept


def test_first_error_stops_the_graph_task():
    ran = []
    x = leaf([1.0])
    before = x * 2.0
    before.grad_fn.register_prehook(lambda go: ran.append("after-error"))
    with pytest.raises(KeyError):
        ag.backward_sync(Boom.apply(before))
    assert ran == []


def test_engine_serves_next_backward_after_an_error():
    x = leaf([1.0])
    with pytest.raises(KeyError):
        ag.backward_sync(Boom.apply(x))
    ag.backward_sync(x * 4.0)
    assert x.grad.item() == pytest.approx(4.0)


def test_anomaly_mode_attaches_forward_traceback():
    x = leaf([1.0])
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"), \
            ag.detect_anomaly():
        y = Boom.apply(x)
        with pytest.raises(KeyError) as info:
            ag.backward_sync(y)
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "Traceback of forward call" in notes
    assert "test_anomaly_mode_attaches_forward_traceback" in notes


def test_anomaly_mode_reports_nan_gradients():
    class NaNGrad(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = leaf([1.0])
    with pytest.warns(UserWarning, match="Anomaly Detection"), ag.detect_anomaly():
        with pytest.raises(RuntimeError, match="Function 'NaNGradBackward' returned nan values "
                                               "in its 0th output."):
            ag.backward_sync(NaNGrad.apply(x))


@pytest.mark.anyio
async def test_warnings_in_workers_are_replayed_to_the_caller():
    Warns = passthrough(lambda: warnings.warn("careful in backward", RuntimeWarning,
                                              stacklevel=2))

    with pytest.warns(RuntimeWarning, match="careful in backward"):
        await ag.backward(Warns.apply(leaf([1.0])))


# ---- final callbacks ----


@pytest.mark.anyio
async def test_final_callbacks_run_in_order_and_may_queue_more():
    order = []

    def queue_two() -> None:
        ag.queue_callback(lambda: (order.append("first"),
                                   ag.queue_callback(lambda: order.append("third"))))
        ag.queue_callback(lambda: order.append("second"))

    Queues = passthrough(queue_two)
    x = leaf([1.0])
    await ag.backward(Queues.apply(x))
    assert order == ["first", "second", "third"]


@pytest.mark.anyio
async def test_async_final_callback_is_awaited_before_backward_returns():
    order = []

    async def flush() -> None:
        import anyio

        await anyio.lowlevel.checkpoint()
        order.append("async-callback")

    Queues = passthrough(lambda: ag.queue_callback(flush))
    await ag.backward(Queues.apply(leaf([1.0])))
    order.append("returned")
    assert order == ["async-callback", "returned"]


def test_error_in_final_callback_fails_the_backward():
    Queues = passthrough(lambda: ag.queue_callback(lambda: 1 / 0))
    with pytest.raises(ZeroDivisionError):
        ag.backward_sync(Queues.apply(leaf([1.0])))


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during "
                                           "backward pass."):
        ag.queue_callback(lambda: None)


# ---- context ----

user_var: contextvars.ContextVar[str] = contextvars.ContextVar("user_var", default="unset")


@pytest.mark.anyio
async def test_caller_contextvars_are_visible_in_hooks_on_workers():
    seen = []
    x = leaf([1.0])
    x.register_hook(lambda g: seen.append((user_var.get(), threading.current_thread().name)))
    token = user_var.set("request-42")
    try:
        await ag.backward(x * 2.0)
    finally:
        user_var.reset(token)
    assert seen == [("request-42", "aiograd-worker-cpu")]


def test_anomaly_mode_of_caller_is_visible_in_backward():
    seen = []

    Probe = passthrough(lambda: seen.append(ag.is_anomaly_enabled()))

    with pytest.warns(UserWarning, match="Anomaly Detection"), ag.detect_anomaly():
        ag.backward_sync(Probe.apply(leaf([1.0])))
    assert seen == [True]


def test_detect_anomaly_warns_that_it_slows_down_as_pytorchs_does():
    torch = pytest.importorskip("torch")
    caught = []
    for lib in (torch.autograd, ag):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with lib.detect_anomaly(check_nan=False):
                pass
            lib.set_detect_anomaly(True)
            lib.set_detect_anomaly(False)
        caught.append([(w.category, str(w.message)) for w in seen])
    assert caught[1] == caught[0] and len(caught[0]) == 1


# ---- async backward functions and the loop bridge ----


@pytest.mark.anyio
async def test_async_backward_function_runs_on_the_loop_thread():
    loop_thread = threading.current_thread().name
    seen = []

    class Remote(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        async def backward(ctx, g):
            import anyio

            await anyio.lowlevel.checkpoint()  # e.g. a remote call
            seen.append(threading.current_thread().name)
            return g * 2.0

    x = leaf([1.0])
    await ag.backward(Remote.apply(x) * 3.0)
    assert seen == [loop_thread]
    assert x.grad.item() == pytest.approx(6.0)


@pytest.mark.anyio
async def test_loop_is_woken_once_per_graph_task(loop_wakes):
    x = leaf([1.0, 2.0])
    y = x
    for _ in range(500):
        y = y * 1.0001 + 0.0001
    await ag.backward(y, ag.ones(2))
    assert len(loop_wakes) == 1


@pytest.mark.anyio
async def test_deep_chain_runs_without_recursion_error():
    x = leaf([1.0])
    y = x
    for _ in range(20_000):
        y = y * 1.0
    await ag.backward(y)
    assert x.grad.item() == pytest.approx(1.0)


# ---- the shape a user writes with pytest-asyncio ----


@pytest.mark.asyncio
async def test_user_style_await_loss_backward():
    w = leaf([0.5, -1.0])
    x = ag.tensor([2.0, 3.0])
    loss = (w * x) * (w * x)
    await loss.backward(ag.ones(2))
    np.testing.assert_allclose(w.grad.numpy(), 2 * (w.data * x.data) * x.data, rtol=1e-6)


# ---- PyTorch as the oracle for gradients ----


def test_gradients_of_a_dag_match_pytorch():
    torch = pytest.importorskip("torch")
    x, e = _diamond(ag)
    ag.backward_sync(e, ag.ones(2))
    tx, te = _diamond(torch)
    te.backward(torch.ones(2))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_second_order_gradients_match_pytorch():
    torch = pytest.importorskip("torch")

    def f(lib, x):
        return (x * x * x) / (x + 2.0) - x * 0.5

    x = ag.tensor([0.5, 1.5, -2.5], dtype="float64", requires_grad=True)
    (g,) = ag.grad_sync(f(ag, x), x, ag.ones(3, dtype="float64"), create_graph=True)
    (gg,) = ag.grad_sync(g, x, ag.ones(3, dtype="float64"))
    tx = torch.tensor([0.5, 1.5, -2.5], dtype=torch.float64, requires_grad=True)
    (tg,) = torch.autograd.grad(f(torch, tx), tx, torch.ones(3, dtype=torch.float64),
                                create_graph=True)
    (tgg,) = torch.autograd.grad(tg, tx, torch.ones(3, dtype=torch.float64))
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-10)


# ---- Note [Inline small graphs] ----


@pytest.mark.anyio
async def test_small_builtin_graph_runs_inline_without_a_thread_handoff(loop_wakes):
    x = leaf([1.0, 2.0])
    await ag.backward((x * x).sum())
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    assert loop_wakes == []


@pytest.mark.anyio
async def test_graph_with_user_code_never_runs_on_the_loop():
    seen = []

    Probe = passthrough(lambda: seen.append(threading.current_thread().name))

    await ag.backward(Probe.apply(leaf([1.0])))
    assert seen == ["aiograd-worker-cpu"]


@pytest.mark.anyio
async def test_inline_limits_can_send_every_graph_to_the_workers(workers_only, loop_wakes):
    x = leaf([1.0, 2.0])
    await ag.backward((x * x).sum())
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    assert loop_wakes == [1]
    with pytest.raises(ValueError, match="max_nodes must be a non-negative int"):
        ag.engine.set_inline_limits(max_nodes=-1)


_SAVING_OPS = {
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "mm": lambda a, b: a @ b,
    "bmm": lambda a, b: a[None].bmm(b[None]),
    "dot": lambda a, b: a[0].dot(b[0]),
    "mv": lambda a, b: a.mv(b[0]),
    "maximum": lambda a, b: a.maximum(b),
    "clamp": lambda a, b: a.clamp(min=b, max=b + 1),
}


@pytest.mark.parametrize("op", sorted(_SAVING_OPS))
def test_saved_tensor_pack_hooks_see_the_tensors_in_pytorchs_order(op):
    torch = pytest.importorskip("torch")

    def packed(lib, hooks):
        a = lib.tensor(np.full((2, 2), 1.5), requires_grad=True)
        b = lib.tensor(np.full((2, 2), 2.5), requires_grad=True)
        order = []
        with hooks(lambda t: order.append(float(t.detach().numpy().flat[0])) or t, lambda t: t):
            _SAVING_OPS[op](a, b)
        return order

    assert packed(ag, ag.saved_tensors_hooks) == packed(
        torch, torch.autograd.graph.saved_tensors_hooks)


@pytest.mark.parametrize("op", ["mul", "div", "mul_"])
def test_a_second_backward_through_a_product_with_a_number_raises_as_pytorchs(op):
    x = ag.ones(2, requires_grad=True)
    make = {"mul": lambda: x * 3, "div": lambda: x / 3, "mul_": lambda: (x * 1).mul_(3)}[op]
    loss = make().sum()
    loss.backward_sync()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward_sync()
    kept = make().sum()
    kept.backward_sync(retain_graph=True)
    kept.backward_sync()  # retained: the number is still there


def test_sequence_nr_orders_nodes_by_creation_and_leaves_last_as_pytorch():
    torch = pytest.importorskip("torch")

    def numbers(lib):
        x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
        y = (x * 2).exp()
        z = y.sum()
        mul = y.grad_fn.next_functions[0][0]
        acc = mul.next_functions[0][0]
        return (mul._sequence_nr() < y.grad_fn._sequence_nr() < z.grad_fn._sequence_nr(),
                acc._sequence_nr())

    assert numbers(ag) == numbers(torch) == (True, 2**64 - 1)
