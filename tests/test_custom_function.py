"""Custom Functions against PyTorch's ``torch.autograd.Function``.

The same forward/backward pair is written once and run with either
library's ``Function``; what the pair sees (``needs_input_grad``, the
gradients ``backward`` receives, which outputs require grad) and the
gradients it produces must be PyTorch's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")


def _forward(case: str, ctx: Any, x: Any, y: Any, k: Any) -> Any:
    """The cases: each returns what its Function's forward returns."""
    if case == "non_tensor_output":
        return x * y, k
    if case == "non_differentiable_output":
        a, b = x * y, x + k
        ctx.mark_non_differentiable(b)
        return a, b
    if case == "unused_output_materialized":
        return x * y, x * k
    if case == "unused_output_not_materialized":
        ctx.set_materialize_grads(False)
        return x * y, x * k
    if case == "integer_output":
        return x * y, (x > 0).long()
    if case == "saved_output":
        out = x * y
        ctx.save_for_backward(x, out)
        return out
    if case == "input_returned_as_is":
        return x * y, x
    raise AssertionError(case)


def _backward(case: str, ctx: Any, grads: tuple[Any, ...]) -> tuple[Any, ...]:
    g = grads[0]
    if case == "saved_output":
        x, out = ctx.saved_tensors
        return g * out / x, g * x, None
    if case == "input_returned_as_is" and grads[1] is not None:
        return g * 2.0 + grads[1], g * 3.0, None
    return g * 2.0, g * 3.0, None


CASES = ["non_tensor_output", "non_differentiable_output", "unused_output_materialized",
         "unused_output_not_materialized", "integer_output", "saved_output",
         "input_returned_as_is"]


def _run(lib: Any, base: type, case: str, backward_of: str) -> list[Any]:
    """Apply the case's Function, backpropagate, and log what the pair saw."""
    log: list[Any] = []

    class Op(base):  # type: ignore[misc, valid-type]
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any, k: Any) -> Any:
            log.append(("needs_input_grad", tuple(ctx.needs_input_grad)))
            return _forward(case, ctx, x, y, k)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            log.append(("backward got", [None if g is None else g.detach().numpy().tolist()
                                         for g in grads]))
            return _backward(case, ctx, grads)

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = lib.tensor([3.0, 4.0])
    result = Op.apply(x, y, 7)
    outs = result if isinstance(result, tuple) else (result,)
    log.append(("requires_grad", [getattr(o, "requires_grad", None) for o in outs]))
    loss = outs[0].sum() if backward_of == "first" else outs[0].sum() + outs[-1].sum()
    if lib is torch:
        loss.backward()
    else:
        ag.backward_sync(loss)
    log.append(("x.grad", x.grad.numpy().tolist()))
    return log


@pytest.mark.parametrize(("case", "backward_of"),
                         [(case, "first") for case in CASES]
                         + [(case, "first_and_last") for case in CASES
                            if case != "non_tensor_output"])  # its last output is a number
def test_custom_function_sees_and_returns_what_pytorchs_does(case: str, backward_of: str) -> None:
    ours = _run(ag, ag.Function, case, backward_of)
    theirs = _run(torch, torch.autograd.Function, case, backward_of)
    assert ours == theirs


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_non_tensor_outputs_get_none_gradients_in_async_backward() -> None:
    got: list[Any] = []

    class Op(ag.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return "label", x * 2.0, 3

        @staticmethod
        async def backward(ctx: Any, g_label: Any, g: Any, g_three: Any) -> Any:
            got.extend([g_label, g_three])
            return g * 2.0

    x = ag.tensor([1.0, 2.0], requires_grad=True)
    _, out, _ = Op.apply(x)
    await ag.backward(out.sum())
    assert got == [None, None]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


@pytest.mark.parametrize("case", ["saved_output", "unused_output_materialized"])
def test_custom_function_backward_is_differentiable_like_pytorchs(case: str) -> None:
    def second_order(lib: Any, base: type, grad: Any) -> list[float]:
        class Op(base):  # type: ignore[misc, valid-type]
            @staticmethod
            def forward(ctx: Any, x: Any, y: Any, k: Any) -> Any:
                return _forward(case, ctx, x, y, k)

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                return _backward(case, ctx, grads)

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, 4.0], requires_grad=True)
        result = Op.apply(x, y, 7)
        out = result[0] if isinstance(result, tuple) else result
        gx, gy = grad((out * out).sum(), [x, y], create_graph=True)
        return [g.detach().numpy().tolist() for g in grad((gx * gy).sum(), [x, y])]

    ours = second_order(ag, ag.Function, ag.grad_sync)
    theirs = second_order(torch, torch.autograd.Function, torch.autograd.grad)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


# ---- keyword arguments and once_differentiable ----

def _scale_function(lib: Any) -> Any:
    """``x * w * k``, with ``w`` and ``k`` declared with defaults (so passable by keyword)."""

    class Scale(lib.autograd.Function if lib is torch else lib.Function):
        @staticmethod
        def forward(ctx, x, w=None, k=2.0):
            ctx.save_for_backward(x, w)
            ctx.k = k
            ctx.seen = ctx.needs_input_grad
            return x * w * k

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return (g * w * ctx.k, g * x * ctx.k) + (None,) * (len(ctx.seen) - 2)

    return Scale


@pytest.mark.parametrize("keywords", ["w", "w_and_k"])
def test_a_tensor_passed_by_keyword_is_an_input_of_the_node(keywords: str) -> None:
    seen = []
    for lib in (torch, ag):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        extra = {"k": 3.0} if keywords == "w_and_k" else {}
        y = _scale_function(lib).apply(x, w=w, **extra)
        y.sum().backward() if lib is torch else y.sum().backward_sync()
        seen.append((y.grad_fn.seen, len(y.grad_fn.next_functions),
                     x.grad.numpy().tolist(), w.grad.numpy().tolist()))
    assert seen[1] == seen[0]


def test_apply_with_an_unknown_keyword_names_the_forward() -> None:
    with pytest.raises(TypeError, match="forward.*unexpected keyword argument 'z'"):
        _scale_function(ag).apply(ag.ones(2), z=1)


def _square_once_differentiable(lib: Any) -> Any:
    once = torch.autograd.function.once_differentiable if lib is torch else ag.once_differentiable

    class Square(lib.autograd.Function if lib is torch else lib.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    return Square


def test_once_differentiable_marks_only_results_of_gradients_that_require_grad() -> None:
    seen = []
    for lib in (torch, ag):
        grad = torch.autograd.grad if lib is torch else ag.grad_sync
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = _square_once_differentiable(lib).apply(x)
        (gx,) = grad(y.sum(), x, create_graph=True)  # the incoming gradient needs no grad
        (gx * x).sum().backward() if lib is torch else (gx * x).sum().backward_sync()
        seen.append((gx.requires_grad, x.grad.numpy().tolist()))
        v = lib.tensor([1.0, 1.0], requires_grad=True)  # now it does: marked
        (gx2,) = grad(_square_once_differentiable(lib).apply(x), x, v, create_graph=True)
        assert gx2.requires_grad
        with pytest.raises(RuntimeError, match="trying to differentiate twice"):
            gx2.sum().backward() if lib is torch else gx2.sum().backward_sync()
    assert seen[1] == seen[0]


def _mul_with_setup_context(lib: Any) -> Any:
    """PyTorch's second style: forward without ctx, then setup_context."""

    class Mul(lib.autograd.Function if lib is torch else lib.Function):
        @staticmethod
        def forward(x, w, k=2.0):
            return x * w * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w, k = inputs
            ctx.save_for_backward(x, w)
            ctx.k = k
            ctx.seen = (len(inputs), ctx.needs_input_grad, output.shape)

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w * ctx.k, g * x * ctx.k, None

    return Mul


@pytest.mark.parametrize("call", ["positional", "keyword"])
def test_setup_context_style_function_matches_pytorchs(call: str) -> None:
    seen = []
    for lib in (torch, ag):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        y = (_mul_with_setup_context(lib).apply(x, w) if call == "positional"
             else _mul_with_setup_context(lib).apply(x, w=w, k=3.0))
        y.sum().backward() if lib is torch else y.sum().backward_sync()
        count, needs, shape = y.grad_fn.seen
        seen.append((count, needs, tuple(shape), len(y.grad_fn.next_functions),
                     x.grad.numpy().tolist(), w.grad.numpy().tolist()))
    assert seen[1] == seen[0]


# ---- gradients that are None ----


def _drops_its_gradient(lib: Any) -> Any:
    class DropGrad(lib.autograd.Function if lib is torch else lib.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return None

    return DropGrad


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
@pytest.mark.parametrize("create_graph", [False, True])
def test_a_none_gradient_into_a_built_in_node_sends_none_on_as_pytorchs(create_graph: bool):
    # MulBackward0 gets only None: PyTorch's formulas then send None along every edge.
    def run(lib: Any, backward: Any) -> list[float]:
        a = lib.ones(2, requires_grad=True)
        loss = (_drops_its_gradient(lib).apply(a * 3.0).exp() + a * a).sum()
        backward(loss, create_graph=create_graph)
        return a.grad.detach().numpy().tolist()

    ours = run(ag, lambda loss, **kw: ag.backward_sync(loss, **kw))
    assert ours == run(torch, lambda loss, **kw: loss.backward(**kw))


def test_a_tensor_hook_on_an_output_without_gradient_sees_none_as_pytorchs():
    def run(lib: Any, backward: Any) -> tuple[list[Any], str]:
        seen: list[Any] = []
        x = lib.ones(2, 3, requires_grad=True)
        first, second = x.unbind(0)
        first.register_hook(lambda g: seen.append(g.numpy().tolist()))
        second.register_hook(lambda g: seen.append(g))
        backward((first * 2.0).sum())
        first, second = x.unbind(0)
        second.register_hook(lambda g: lib.ones(3))  # may not fill in a None gradient
        with pytest.raises(RuntimeError) as info:
            backward((first * 2.0).sum())
        return seen, str(info.value)

    assert run(ag, ag.backward_sync) == run(torch, lambda loss: loss.backward())


def test_a_leaf_given_only_none_still_runs_its_post_accumulate_grad_hooks_as_pytorchs():
    def run(lib: Any, backward: Any) -> list[Any]:
        class NoGradForZ(lib.autograd.Function if lib is torch else lib.Function):
            @staticmethod
            def forward(ctx, a, z):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, None

        a, z = lib.ones(2, requires_grad=True), lib.ones(2, requires_grad=True)
        calls: list[Any] = []
        z.register_hook(lambda g: calls.append(("pre", g)))
        z.register_post_accumulate_grad_hook(
            lambda t: calls.append(("post", None if t.grad is None else t.grad.tolist())))
        backward(NoGradForZ.apply(a, z).sum())
        z.grad = lib.full((2,), 9.0)
        backward(NoGradForZ.apply(a, z).sum())  # .grad stays as it was
        return calls

    assert run(ag, ag.backward_sync) == run(torch, lambda loss: loss.backward())


def test_an_input_returned_as_is_and_marked_non_differentiable_is_not_differentiable():
    def run(lib: Any, backward: Any) -> tuple[Any, ...]:
        class Twice(lib.autograd.Function if lib is torch else lib.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.mark_non_differentiable(a)
                return a * 2, a

            @staticmethod
            def backward(ctx, g, g_unused):
                return g * 2

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        u, v = Twice.apply(x)
        flags = (v is x, v.requires_grad, v.grad_fn is None, v.is_leaf)
        backward((u + v * 10).sum())
        return flags, x.grad.tolist()

    assert run(ag, ag.backward_sync) == run(torch, lambda loss: loss.backward())


def test_a_backward_returning_a_non_tensor_raises_pytorchs_error():
    def error(lib: Any, backward: Any) -> tuple[type, str]:
        class ReturnsInt(lib.autograd.Function if lib is torch else lib.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return 3

        with pytest.raises(Exception) as info:
            backward(ReturnsInt.apply(lib.ones(2, requires_grad=True)).sum())
        return info.type, str(info.value).split(":")[0]

    assert error(ag, ag.backward_sync) == error(torch, lambda loss: loss.backward())


def _fn_base(lib: Any) -> Any:
    return lib.autograd.Function if lib is torch else lib.Function


def _backward_of(lib: Any) -> Any:
    return (lambda loss: loss.backward()) if lib is torch else ag.backward_sync


def test_numpy_of_inputs_works_in_forward_and_backward_where_grad_mode_is_off():
    def run(lib: Any) -> list[float]:
        class NumpySin(_fn_base(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return lib.tensor(np.sin(x.numpy()))

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * lib.tensor(np.cos(np.asarray(x)))

        x = lib.tensor([0.5, 1.0], requires_grad=True)
        _backward_of(lib)(NumpySin.apply(x).sum())
        return x.grad.tolist()

    assert run(ag) == pytest.approx(run(torch))
    with pytest.raises(RuntimeError, match="Can't call numpy"):  # grad mode on: refused
        ag.ones(2, requires_grad=True).numpy()


@pytest.mark.parametrize("requires_grad", [True, False])
def test_an_input_returned_as_is_without_recording_is_a_new_tensor_without_grad(requires_grad):
    def run(lib: Any) -> tuple[Any, ...]:
        class Identity(_fn_base(lib)):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        x = lib.tensor([1.0, 2.0], requires_grad=requires_grad)
        with lib.no_grad():
            y = Identity.apply(x)
        y.add_(1) if not requires_grad else None  # shares the input's memory
        return y is x, y.requires_grad, y.is_leaf, x.tolist(), y._base is x

    assert run(ag) == run(torch)


def test_outputs_that_share_memory_but_are_not_views_may_be_written_in_place():
    def run(lib: Any) -> tuple[Any, ...]:
        class Detached(_fn_base(lib)):
            @staticmethod
            def forward(ctx, x):
                return x.detach()

            @staticmethod
            def backward(ctx, g):
                return g * 3

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Detached.apply(x * 1)
        y.mul_(2)
        _backward_of(lib)(y.sum())
        return y.grad_fn.name(), x.grad.tolist()

    assert run(ag) == run(torch)


def test_a_view_made_in_forward_may_not_be_written_in_place():
    def error(lib: Any) -> tuple[type, str]:
        class FirstTwo(_fn_base(lib)):
            @staticmethod
            def forward(ctx, x):
                return (x * 1)[:2]

            @staticmethod
            def backward(ctx, g):
                return lib.cat([g, lib.zeros(1)])

        y = FirstTwo.apply(lib.ones(3, requires_grad=True))
        with pytest.raises(RuntimeError) as info:
            y.mul_(2)
        return info.type, str(info.value).split("is a view")[1][:40]

    assert error(ag) == error(torch)


def test_saved_tensors_read_in_forward_are_empty():
    def run(lib: Any) -> Any:
        seen = []

        class Saves(_fn_base(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                seen.append(ctx.saved_tensors)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        Saves.apply(lib.ones(1, requires_grad=True))
        return seen

    assert run(ag) == run(torch) == [()]


@pytest.mark.anyio
async def test_an_inherited_async_backward_is_awaited():
    class Base(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        async def backward(ctx, g):
            return g * 2

    class Derived(Base):
        pass

    x = ag.ones(2, requires_grad=True)
    await ag.backward(Derived.apply(x).sum())
    assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.anyio
async def test_once_differentiable_wraps_an_async_backward():
    class Doubled(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @ag.once_differentiable
        async def backward(ctx, g):
            assert not ag.is_grad_enabled()
            return g * 2

    x = ag.ones(2, requires_grad=True)
    await ag.backward(Doubled.apply(x).sum())
    assert x.grad.tolist() == [2.0, 2.0]
    (g,) = await ag.grad((Doubled.apply(x) ** 2).sum(), [x], create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        await ag.backward(g.sum())
