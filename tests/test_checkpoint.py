"""aiograd.checkpoint: recompute activations in backward (reentrant and hook-based)."""

from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(120)


def make_params(seed=0, width=8, depth=3, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [ag.tensor(rng.standard_normal((width, width)).astype(dtype) * 0.3,
                      requires_grad=True) for _ in range(depth)]


def block(h, ws):
    for w in ws:
        h = (h @ w).tanh()
    return h


def grads_of(params, x, use_checkpoint, use_reentrant=True):
    for p in params:
        p.grad = None
    x = x.detach().requires_grad_()
    if use_checkpoint:
        h = ag.checkpoint(lambda inp: block(inp, params[:2]), x, use_reentrant=use_reentrant)
    else:
        h = block(x, params[:2])
    loss = (block(h, params[2:]) * 1.5).sum()
    ag.backward_sync(loss)
    return [p.grad.numpy().copy() for p in params] + [x.grad.numpy().copy()]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gives_the_same_gradients_as_no_checkpoint(use_reentrant):
    params = make_params()
    x = ag.tensor(np.random.default_rng(1).standard_normal((4, 8)))
    plain = grads_of(params, x, False)
    ckpt = grads_of(params, x, True, use_reentrant)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_matches_torch_utils_checkpoint(use_reentrant):
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tckpt

    params = make_params(seed=3)
    x = ag.tensor(np.random.default_rng(4).standard_normal((4, 8)))
    ours = grads_of(params, x, True, use_reentrant)
    tparams = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    tx = torch.tensor(x.numpy(), requires_grad=True)

    def tblock(h, ws):
        for w in ws:
            h = (h @ w).tanh()
        return h

    h = tckpt.checkpoint(lambda inp: tblock(inp, tparams[:2]), tx, use_reentrant=use_reentrant)
    (tblock(h, tparams[2:]) * 1.5).sum().backward()
    theirs = [p.grad.numpy() for p in tparams] + [tx.grad.numpy()]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.anyio
@pytest.mark.parametrize("use_reentrant", [True, False])
async def test_checkpoint_under_await_backward(use_reentrant):
    params = make_params(seed=5)
    x = ag.tensor(np.random.default_rng(6).standard_normal((2, 8)), requires_grad=True)
    await block(x, params).sum().backward()
    expected = params[0].grad.numpy().copy()
    params[0].grad = None
    h = ag.checkpoint(lambda inp: block(inp, params), x, use_reentrant=use_reentrant)
    await h.sum().backward()
    np.testing.assert_allclose(params[0].grad.numpy(), expected, rtol=1e-12)


def test_reentrant_checkpoint_refuses_grad_with_inputs():
    params = make_params()
    x = ag.tensor(np.ones((2, 8)), requires_grad=True)
    h = ag.checkpoint(lambda inp: block(inp, params), x)
    with pytest.raises(RuntimeError, match="use_reentrant=True, aiograd.checkpoint is "
                                           "incompatible with .grad()"):
        ag.grad_sync(h.sum(), x)


def test_non_reentrant_checkpoint_works_with_grad():
    params = make_params()
    x = ag.tensor(np.ones((2, 8)), requires_grad=True)
    h = ag.checkpoint(lambda inp: block(inp, params), x, use_reentrant=False)
    (gx,) = ag.grad_sync(h.sum(), x)
    (expected,) = ag.grad_sync(block(x, params).sum(), x)
    np.testing.assert_allclose(gx.numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_replays_the_random_generator(use_reentrant):
    ag.manual_seed(0)
    w = ag.tensor(np.ones((4, 4)), requires_grad=True)

    def noisy(inp):
        mask = (ag.rand(2, 4, dtype="float64") > 0.5) * 1.0
        return (inp @ w) * mask

    x = ag.tensor(np.ones((2, 4)), requires_grad=True)
    ag.manual_seed(7)
    out = ag.checkpoint(noisy, x, use_reentrant=use_reentrant)
    ag.backward_sync(out.sum())
    ckpt = w.grad.numpy().copy()
    w.grad = None
    ag.manual_seed(7)
    ag.backward_sync(noisy(x).sum())
    np.testing.assert_array_equal(ckpt, w.grad.numpy())


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_keeps_fewer_activations(use_reentrant):
    params = make_params(width=256, depth=8, dtype="float32")
    x = ag.tensor(np.ones((256, 256), dtype="float32"), requires_grad=True)

    def held(fn):
        tracemalloc.start()
        try:
            out = fn()
            size = tracemalloc.get_traced_memory()[0]
            del out
        finally:
            tracemalloc.stop()
        return size

    plain = held(lambda: block(x, params))
    ckpt = held(lambda: ag.checkpoint(lambda inp: block(inp, params), x,
                                      use_reentrant=use_reentrant))
    assert ckpt < plain / 3


def test_reentrant_checkpoint_warns_when_no_input_requires_grad():
    w = ag.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        ag.checkpoint(lambda inp: inp @ w, ag.tensor(np.ones((2, 2))))
    with pytest.warns(UserWarning, match="None of the inputs"), ag.no_grad():  # as PyTorch
        ag.checkpoint(lambda inp: inp @ w, ag.tensor(np.ones((2, 2))))


def test_checkpoint_rejects_a_non_callable():
    with pytest.raises(TypeError, match="checkpoint expects a callable"):
        ag.checkpoint(3, ag.ones(2))


# ---- non-reentrant: what PyTorch's checks and counts are ----

def _run_checkpointed(lib, program):
    """``program(lib, checkpoint, backward)`` with the library's own functions."""
    if lib is ag:
        return program(ag, ag.checkpoint, lambda t, **kw: t.backward_sync(**kw))
    import torch.utils.checkpoint as tckpt

    return program(lib, tckpt.checkpoint, lambda t, **kw: t.backward(**kw))


def _modified_input(lib, checkpoint, backward):
    x = lib.tensor([0.5, 1.0], requires_grad=True)
    y = checkpoint(lambda a: a.exp(), x, use_reentrant=False)
    with lib.no_grad():
        x.mul_(3)
    backward(y.sum())


def test_non_reentrant_checkpoint_version_checks_its_inputs():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as expected:
        _run_checkpointed(torch, _modified_input)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
        _run_checkpointed(ag, _modified_input)
    # the same words, with aiograd's name of the tensor ("[float32 [2]]")
    ours = str(info.value).replace("[float32 [2]]", "[torch.FloatTensor [2]]")
    assert ours.split(" Hint:")[0] == str(expected.value).split(" Hint:")[0]


def _counted_passes(lib, checkpoint, backward):
    """Forward runs for: the forward, a retained backward, a last backward; and the grads."""
    runs = []
    w = lib.tensor([2.0, 3.0], requires_grad=True)

    def fn(a):
        runs.append(1)
        return (a * w).exp()

    x = lib.tensor([0.5, 1.0], requires_grad=True)
    loss = checkpoint(fn, x, use_reentrant=False).sum()
    backward(loss, retain_graph=True)
    backward(loss)
    return len(runs), x.grad.numpy().tolist(), w.grad.numpy().tolist()


def test_non_reentrant_checkpoint_recomputes_once_per_backward_pass():
    torch = pytest.importorskip("torch")
    expected = _run_checkpointed(torch, _counted_passes)
    runs, x_grad, w_grad = _run_checkpointed(ag, _counted_passes)
    assert runs == expected[0] == 3
    np.testing.assert_allclose(x_grad, expected[1], rtol=1e-6)
    np.testing.assert_allclose(w_grad, expected[2], rtol=1e-6)


def _outer_hooks(lib, checkpoint, backward):
    hooks = ag.saved_tensors_hooks if lib is ag else lib.autograd.graph.saved_tensors_hooks
    calls = []

    def pack(t):
        calls.append("pack")
        return t

    def unpack(t):
        calls.append("unpack")
        return t

    x = lib.tensor([0.5, 1.0], requires_grad=True)
    with hooks(pack, unpack):
        y = checkpoint(lambda a: (a * a).exp(), x, use_reentrant=False)
    backward(y.sum())
    return calls, x.grad.numpy().tolist()


def test_outer_saved_tensor_hooks_see_the_checkpoint_inputs_only():
    torch = pytest.importorskip("torch")
    expected = _run_checkpointed(torch, _outer_hooks)
    calls, grad = _run_checkpointed(ag, _outer_hooks)
    assert calls == expected[0] == ["pack", "unpack"]
    np.testing.assert_allclose(grad, expected[1], rtol=1e-6)


def test_non_reentrant_checkpoint_drops_recomputed_tensors_as_backward_uses_them(monkeypatch):
    module = sys.modules["aiograd.utils.checkpoint"]
    handed_out = []  # each recomputation's list of tensors
    original = module._Recomputation._recompute

    def recompute(self):
        handed_out.append(original(self))
        return handed_out[-1]

    monkeypatch.setattr(module._Recomputation, "_recompute", recompute)
    x = ag.tensor(np.ones((64, 64)), requires_grad=True)
    ws = make_params(width=64, depth=4)
    loss = ag.checkpoint(lambda a: block(a, ws), x, use_reentrant=False).sum()
    loss.backward_sync(retain_graph=True)
    (tensors,) = handed_out
    assert len(tensors) >= 8  # two saves per layer at least
    assert all(t is None for t in tensors)  # each handed out once, then let go


def _changing(first, later):
    """A function that computes ``first`` on its first call and ``later`` afterwards."""
    calls = []

    def fn(a):
        calls.append(1)
        return first(a) if len(calls) == 1 else later(a)

    return fn


@pytest.mark.parametrize("change", ["shapes", "fewer"])
def test_a_recomputation_that_saves_other_tensors_raises_checkpoint_error(change):
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tckpt

    later = (lambda a: (a[:1] * a[:1]).exp()) if change == "shapes" else (lambda a: a.exp())
    messages = []
    for lib, ckpt, error in ((torch, tckpt.checkpoint, tckpt.CheckpointError),
                             (ag, ag.checkpoint, ag.utils.CheckpointError)):
        x = lib.ones(2, requires_grad=True)
        y = ckpt(_changing(lambda a: (a * a).exp(), later), x, use_reentrant=False)
        with pytest.raises(error) as info:
            y.sum().backward() if lib is torch else y.sum().backward_sync()
        assert isinstance(info.value, RuntimeError)
        messages.append(str(info.value).split("checkpoint: ", 1)[1].splitlines())
    # the same report, line for line, but for how each library prints shapes and dtypes
    assert messages[1][0] == messages[0][0]
    assert len([m for m in messages[1] if m.startswith("tensor at position")]) == len(
        [m for m in messages[0] if m.startswith("tensor at position")])
    if change == "fewer":  # the counts too
        assert messages[1][:3] == messages[0][:3]


def test_a_recomputation_stops_once_it_saved_what_backward_needs():
    reached = []

    def fn(a):
        h = (a * a).exp()  # the forward saves a (twice) and exp's output
        reached.append("end")
        return h

    x = ag.ones(2, requires_grad=True)
    y = ag.checkpoint(fn, x, use_reentrant=False)
    y.sum().backward_sync()
    assert reached == ["end"]  # the recomputation stopped at its last save, before the end
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.e * np.ones(2), rtol=1e-6)
    reached.clear()
    z = ag.checkpoint(fn, x, use_reentrant=False, early_stop=False)
    z.sum().backward_sync()
    assert reached == ["end", "end"]


def test_checkpoint_rejects_an_unknown_determinism_check():
    with pytest.raises(ValueError, match=r"determinism_check should be one of \['default', "
                                         r"'none'\], but got strict"):
        ag.checkpoint(lambda a: a * 2, ag.ones(2, requires_grad=True), use_reentrant=False,
                      determinism_check="strict")


# ---- found by a differential probe of checkpointing (471 programs against torch 2.13) ----


def _outcome(call):
    """The result of ``call()`` as a comparable value, or its error's type and message."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call()
    except Exception as exc:  # noqa: BLE001  (compared with the other library's)
        return type(exc).__name__, str(exc)
    if hasattr(result, "detach"):
        return np.round(result.detach().numpy(), 5).tolist()  # float32: 6 digits
    return result


def _hooks_of(lib):
    return ag.graph if lib is ag else lib.autograd.graph


def _unpack_hook_value_for_a_leaf(lib, checkpoint, backward):
    x = lib.tensor([0.5, 1.0], requires_grad=True)
    with _hooks_of(lib).saved_tensors_hooks(lambda s: s, lambda s: s * 2):
        out = checkpoint(lambda p: p.sin(), x, use_reentrant=True)
    backward(out.sum())
    return x.grad  # cos(2x): the recomputation runs on the unpacked value


def _enable_grad_inside_under_no_grad(lib, checkpoint, backward):
    x = lib.tensor([1.0, 2.0], requires_grad=True)

    def f(p):
        with lib.enable_grad():
            return p.exp()

    with lib.no_grad():
        out = checkpoint(f, x, use_reentrant=True)
    return out.requires_grad, out.grad_fn is None


def _no_recomputed_output_requires_grad(lib, checkpoint, backward):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    backward(checkpoint(lambda p: p.detach() * 2, x, use_reentrant=True).sum())


def _disable_saved_tensors_hooks_inside(lib, checkpoint, backward):
    def f(p):
        with _hooks_of(lib).disable_saved_tensors_hooks("no hooks here"):
            return p.exp()

    return checkpoint(f, lib.tensor([1.0, 2.0], requires_grad=True), use_reentrant=False)


def _non_reentrant_under_no_grad(lib, checkpoint, backward):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1

    def f(p):
        with lib.enable_grad():
            return (p + 1).exp()

    with lib.no_grad():
        out = checkpoint(f, a, use_reentrant=False)  # just a call: nothing saved
        a.add_(1)
    backward(out.sum())
    return x.grad


def _use_reentrant_forms(lib, checkpoint, backward):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    return [checkpoint(lambda p: p.exp(), x, use_reentrant=flag).grad_fn.name()
            for flag in (None, 0, 1)]


def _determinism_check_is_the_non_reentrant_forms(lib, checkpoint, backward):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    return checkpoint(lambda p: p.exp(), x, use_reentrant=True,
                      determinism_check="bogus").requires_grad


@pytest.mark.parametrize("program", [
    _unpack_hook_value_for_a_leaf, _enable_grad_inside_under_no_grad,
    _no_recomputed_output_requires_grad, _disable_saved_tensors_hooks_inside,
    _non_reentrant_under_no_grad, _use_reentrant_forms,
    _determinism_check_is_the_non_reentrant_forms,
], ids=lambda f: f.__name__.strip("_"))
def test_checkpoint_usage_matches_pytorchs(program):
    torch = pytest.importorskip("torch")
    ours = _outcome(lambda: _run_checkpointed(ag, program))
    assert ours == _outcome(lambda: _run_checkpointed(torch, program))


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_an_unpack_hook_value_for_a_leaf_saved_by_a_function_is_used_as_pytorchs():
    torch = pytest.importorskip("torch")

    def program(lib, backward):
        class SavesInput(lib.autograd.Function if lib is torch else lib.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with _hooks_of(lib).saved_tensors_hooks(lambda s: s, lambda s: s * 10):
            y = SavesInput.apply(x)
        backward(y.sum(), create_graph=True)
        return x.grad

    ours = program(ag, lambda t, **kw: ag.backward_sync(t, **kw))
    theirs = program(torch, lambda t, **kw: t.backward(**kw))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy())


@pytest.mark.parametrize("keyword", ["context_fn", "debug"])
def test_pytorchs_own_checkpoint_keywords_are_refused_not_passed_to_fn(keyword):
    with pytest.raises(NotImplementedError, match=f"does not support {keyword}="):
        ag.checkpoint(lambda p, **kw: p.exp(), ag.ones(2, requires_grad=True),
                      use_reentrant=False, **{keyword: None})
