"""In-place ops and clone: gradients against PyTorch and gradcheck, versions, the in-place rules."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import arr, away_from_zero, leaf

import aiograd as ag

pytestmark = pytest.mark.timeout(60)


def _iadd(y, w):
    y += w
    return y


def _isub(y, w):
    y -= w
    return y


def _imul(y, w):
    y *= w
    return y


def _itruediv(y, w):
    y /= w
    return y


# Each case: (shape of w, fn(y, w)) where y = x * 1 is a non-leaf of shape (2, 3).
CASES = {
    "add_": ((2, 3), lambda y, w: y.add_(w)),
    "add_alpha": ((2, 3), lambda y, w: y.add_(w, alpha=2.5)),
    "add_number": ((2, 3), lambda y, w: y.add_(3.0) * w),
    "add_broadcast": ((3,), lambda y, w: y.add_(w)),
    "sub_": ((2, 3), lambda y, w: y.sub_(w)),
    "sub_alpha": ((1, 3), lambda y, w: y.sub_(w, alpha=-0.5)),
    "mul_": ((2, 3), lambda y, w: y.mul_(w)),
    "mul_number": ((2, 3), lambda y, w: y.mul_(-2.0) * w),
    "mul_broadcast": ((2, 1), lambda y, w: y.mul_(w)),
    "div_": ((2, 3), lambda y, w: y.div_(w)),
    "div_number": ((2, 3), lambda y, w: y.div_(4.0) * w),
    "div_broadcast": ((3,), lambda y, w: y.div_(w)),
    "iadd": ((2, 3), _iadd),
    "isub": ((3,), _isub),
    "imul": ((2, 3), _imul),
    "itruediv": ((2, 3), _itruediv),
    "zero_": ((2, 3), lambda y, w: y.zero_() + w),
    "copy_": ((2, 3), lambda y, w: y.copy_(w)),
    "copy_broadcast": ((3,), lambda y, w: y.copy_(w)),
    "chain": ((2, 3), lambda y, w: y.mul_(w).add_(y * 1).div_(w)),
}


def _run(fn, x, w):
    y = x * 1
    out = fn(y, w)
    return y, out * x  # the gradients then depend on the inputs


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_op_matches_torch(name):
    torch = pytest.importorskip("torch")
    wshape, fn = CASES[name]
    a, b = arr((2, 3)), away_from_zero(wshape)
    x, w = leaf(a), leaf(b)
    t, tw = (torch.tensor(z, requires_grad=True) for z in (a, b))
    y, out = _run(fn, x, w)
    ty, t_out = _run(fn, t, tw)
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    assert y.grad_fn.name() == type(ty.grad_fn).__name__
    v = np.random.default_rng(2).standard_normal((2, 3))
    grads = ag.grad_sync(out, [x, w], ag.tensor(v))
    t_grads = torch.autograd.grad(t_out, [t, tw], torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_op_gradcheck(name):
    wshape, fn = CASES[name]
    inputs = [leaf(arr((2, 3))), leaf(away_from_zero(wshape))]
    assert ag.gradcheck(lambda x, w: _run(fn, x, w)[1], inputs)


@pytest.mark.parametrize("name", ["mul_", "div_broadcast", "copy_", "chain"])
def test_inplace_op_second_order_matches_torch(name):
    torch = pytest.importorskip("torch")
    wshape, fn = CASES[name]
    rng = np.random.default_rng(3)
    a, b = arr((2, 3)), away_from_zero(wshape)
    x, w = leaf(a), leaf(b)
    t, tw = (torch.tensor(z, requires_grad=True) for z in (a, b))
    out, t_out = _run(fn, x, w)[1] ** 2, _run(fn, t, tw)[1] ** 2
    v = rng.standard_normal((2, 3))
    gx, gw = ag.grad_sync(out, [x, w], ag.tensor(v), create_graph=True)
    tgx, tgw = torch.autograd.grad(t_out, [t, tw], torch.tensor(v), create_graph=True)
    seconds = ag.grad_sync((gx * gx).sum() + (gw * gw).sum(), [x, w])
    t_seconds = torch.autograd.grad((tgx * tgx).sum() + (tgw * tgw).sum(), [t, tw])
    for g, tg in zip(seconds, t_seconds):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


# ---- versions and saved tensors ----

@pytest.mark.parametrize(
    "op",
    [
        lambda y: y.add_(1.0),
        lambda y: y.sub_(ag.ones(3)),
        lambda y: y.mul_(2.0),
        lambda y: y.div_(2.0),
        lambda y: y.zero_(),
        lambda y: y.copy_(ag.ones(3)),
        lambda y: y.__iadd__(1.0),
    ],
)
def test_inplace_op_bumps_the_version_counter(op):
    y = ag.zeros(3)
    op(y)
    assert y._version == 1


def test_inplace_op_returns_the_tensor_itself():
    y = ag.zeros(3)
    assert y.add_(1.0) is y
    assert y.mul_(ag.ones(3)) is y


def test_writing_data_directly_does_not_bump_the_version():
    y = ag.zeros(3)
    y.data = np.ones(3, dtype=np.float32)
    assert y._version == 0


def test_modifying_a_saved_input_makes_backward_raise():
    a = leaf(np.ones(3))
    b = a * 2
    y = a * b  # saves b for a's gradient
    b.mul_(2)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: .* is at version "
                                           r"1; expected version 0"):
        ag.grad_sync(y, [a], ag.ones(3, dtype=ag.float64))


def _version_error(lib, program) -> str:
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = program(lib, x)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward() if lib.__name__ == "torch" else y.sum().backward_sync()
    return str(info.value)


def _saved_non_leaf(lib, x):
    a = x * 1
    y = a * a
    a.mul_(2)
    return y


def _saved_leaf(lib, x):
    y = x * x
    with lib.no_grad():
        x.mul_(2)
    return y


@pytest.mark.parametrize("program", [_saved_non_leaf, _saved_leaf])
def test_version_error_reads_like_pytorchs(program):
    torch = pytest.importorskip("torch")
    expected = _version_error(torch, program)
    message = _version_error(ag, program)
    # the same words, with aiograd's dtype and hint: "[torch.FloatTensor [2]]" is "[float32 [2]]"
    assert message.replace("[float32 [2]]", "[torch.FloatTensor [2]]").replace(
        "aiograd.set_detect_anomaly", "torch.autograd.set_detect_anomaly") == expected


def test_tensors_saved_through_hooks_are_not_version_checked():
    # as PyTorch: the pack hook decided what is kept, so the saved copy is what backward uses
    torch = pytest.importorskip("torch")
    grads = []
    for lib, hooks in ((torch, torch.autograd.graph.saved_tensors_hooks),
                       (ag, ag.saved_tensors_hooks)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with hooks(lambda t: t.detach() * 1, lambda t: t):
            a = x * 1
            y = (a * a).sum()
        a.add_(1)
        y.backward() if lib is torch else y.backward_sync()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0])
    np.testing.assert_allclose(grads[1], [2.0, 4.0])


def test_modifying_a_saved_output_makes_backward_raise():
    x = leaf(np.ones(3))
    y = x.exp()  # saves its output
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(y, [x], ag.ones(3, dtype=ag.float64))


def test_modifying_a_view_of_a_saved_tensor_makes_backward_raise():
    a = leaf(np.ones((2, 3)))
    b = a * 2
    y = a * b
    with ag.no_grad():
        b[0].zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(y, [a], ag.ones(2, 3, dtype=ag.float64))


def test_mul_with_itself_raises_like_pytorch():
    x = leaf(np.ones(3))
    y = x * 1
    y.mul_(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(y, [x], ag.ones(3, dtype=ag.float64))


def test_mul_uses_the_old_value_for_the_other_gradient():
    x = leaf(np.array([1.0, 2.0]))
    w = leaf(np.array([3.0, 4.0]))
    y = x * 1
    y.mul_(w)
    y.add_(10.0)
    gx, gw = ag.grad_sync(y, [x, w], ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(gw.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])


# ---- history ----

def test_inplace_op_rebases_history_onto_the_old_node():
    x = leaf(np.ones(3))
    y = x * 2
    old = y.grad_fn
    y.add_(1.0)
    assert y.grad_fn.name() == "AddBackward0"
    assert y.grad_fn.next_functions[0] == (old, 0)
    assert y.output_nr == 0


def test_inplace_with_grad_operand_makes_a_plain_tensor_require_grad():
    w = leaf(np.ones(3))
    y = ag.zeros(3, dtype=ag.float64)
    y.add_(w, alpha=2)
    assert y.requires_grad and not y.is_leaf
    (g,) = ag.grad_sync(y, [w], ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0, 2.0])


def test_inplace_without_grad_mode_records_nothing():
    x = leaf(np.ones(3))
    y = x * 2
    old = y.grad_fn
    with ag.no_grad():
        y.mul_(3.0)
    assert y.grad_fn is old
    assert y._version == 1


def test_retain_grad_follows_the_tensor_through_an_inplace_op():
    x = leaf(np.ones(2))
    y = x * 1
    y.retain_grad()
    y.mul_(3.0)
    (y * 2).backward_sync(ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_copy_casts_to_the_destination_dtype_and_back_for_the_gradient():
    src = ag.tensor(np.array([1.5, 2.5], dtype=np.float64), requires_grad=True)
    y = ag.zeros(2)  # float32
    y.copy_(src)
    assert y.dtype == ag.float32
    (g,) = ag.grad_sync(y, [src], ag.ones(2))
    assert g.dtype == ag.float64
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])


def test_copy_from_another_device_sends_the_gradient_back(fake_backend):
    src = ag.tensor(np.array([1.0, 2.0]), device="fake:1", requires_grad=True)
    y = ag.zeros(2, dtype=ag.float64)
    y.copy_(src)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 2.0])
    (g,) = ag.grad_sync(y * 3, [src], ag.ones(2, dtype=ag.float64))
    assert g.device == ag.device("fake:1")
    np.testing.assert_array_equal(g.cpu().numpy(), [3.0, 3.0])


@pytest.mark.anyio
async def test_inplace_gradient_through_awaited_backward():
    x = leaf(np.array([1.0, 2.0]))
    y = x * x
    y.sub_(x, alpha=3)
    await y.backward(ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0, 1.0])


# ---- the rules (errors) ----

def test_inplace_on_a_leaf_requiring_grad_raises():
    x = leaf(np.ones(3))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation."):
        x.add_(1.0)
    assert x._version == 0


def test_inplace_on_a_leaf_requiring_grad_is_allowed_under_no_grad():
    x = leaf(np.ones(3))
    with ag.no_grad():
        x.sub_(0.5)
    assert x.is_leaf and x.requires_grad
    np.testing.assert_array_equal(x.detach().numpy(), [0.5, 0.5, 0.5])


def test_inplace_on_a_view_of_a_leaf_requiring_grad_raises():
    x = leaf(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2.0)


def test_integer_tensor_cannot_take_a_float_result():
    y = ag.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        y.add_(1.5)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        y.div_(2)


def test_inplace_operand_must_broadcast_to_the_tensor_shape():
    y = ag.zeros(3)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                                           r"broadcast shape \[2, 3\]"):
        y.add_(ag.ones(2, 3))
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        y.mul_(ag.ones(2))


def test_copy_requires_a_tensor_source():
    with pytest.raises(TypeError, match="argument 'src' must be a Tensor, not list"):
        ag.zeros(2).copy_([1.0, 2.0])


def test_copy_source_must_broadcast():
    with pytest.raises(RuntimeError, match=r"src of shape \[2\] cannot be broadcast"):
        ag.zeros(3).copy_(ag.ones(2))


# ---- clone ----

def test_clone_is_a_copy_with_identity_gradient():
    x = leaf(np.ones((2, 3)))
    c = x.T.clone()
    assert c.grad_fn.name() == "CloneBackward0"
    assert c._base is None and c._vc is not x._vc
    assert c.data.flags.c_contiguous
    (g,) = ag.grad_sync(c, [x], ag.tensor(np.arange(6.0).reshape(3, 2)))
    np.testing.assert_array_equal(g.numpy(), np.arange(6.0).reshape(3, 2).T)


def test_clone_can_be_written_in_place_without_touching_the_source():
    x = leaf(np.ones(3))
    c = x.clone()
    c.add_(1.0)
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 1.0, 1.0])
    (g,) = ag.grad_sync(c, [x], ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("leaf_input", [True, False])
def test_backward_reads_a_saved_inputs_assigned_data_as_pytorch(leaf_input):
    # PyTorch keeps a saved input itself, so assigning .data after the forward is seen
    # (no version bump: .data is not an in-place op)
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (torch, ag):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a = x if leaf_input else x * 1.0
        y = (a * a).sum()
        new = np.array([10.0, 20.0], dtype=np.float32)
        a.data = torch.tensor(new) if lib is torch else new
        y.backward() if lib is torch else y.backward_sync()
        grads.append(x.grad.numpy().tolist())
    assert grads[1] == grads[0] == [20.0, 40.0]


def test_a_view_taken_before_its_leaf_required_grad_may_not_be_written():
    # the view requires grad through its base in PyTorch, so the write is refused with grad
    # mode on (before, aiograd wrote the leaf without a word)
    torch = pytest.importorskip("torch")
    messages = []
    for lib in (torch, ag):
        y = lib.zeros(3)
        v = y[1:]
        y.requires_grad_()
        with pytest.raises(RuntimeError) as info:
            v.add_(1.0)
        messages.append(str(info.value))
        with lib.no_grad():
            v.add_(1.0)  # allowed without grad mode, as in PyTorch
        assert y.detach().numpy().tolist() == [0.0, 1.0, 1.0]
    assert messages[1] == messages[0]


_INT_PROGRAMS = {
    "add_negative": lambda v: v + (-1),
    "mul_beyond_range": lambda v: v * 300,
    "sub_beyond_range": lambda v: v - 300,
    "rsub_beyond_range": lambda v: 1000 - v,
    "add_huge": lambda v: v + (2**40 + 7),
    "iadd_negative": lambda v: v.add_(-1),
    "isub_negative": lambda v: v.sub_(-1),
    "imul_beyond_range": lambda v: v.mul_(300),
    "iand_beyond_range": lambda v: v.__iand__(511),
    "fill_negative": lambda v: v.fill_(-1),
    "fill_beyond_range": lambda v: v.fill_(300),
    "setitem_negative": lambda v: v.__setitem__(0, -1),
    "setitem_beyond_range": lambda v: v.__setitem__(0, 300),
    "masked_fill_negative": lambda v: v.masked_fill_(v > 1, -1),
    "masked_fill_beyond_range": lambda v: v.masked_fill_(v > 1, 300),
}


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("name", sorted(_INT_PROGRAMS))
def test_python_ints_beyond_an_integer_dtype_wrap_or_raise_as_pytorchs(name, dtype):
    torch = pytest.importorskip("torch")

    def run(lib):
        v = lib.tensor(np.array([0, 5, 120], dtype=dtype))
        try:
            out = _INT_PROGRAMS[name](v)
        except RuntimeError as exc:
            return "RuntimeError", str(exc)
        return (v if out is None else out).tolist()

    assert run(ag) == run(torch)


def test_writing_a_view_whose_base_was_detached_in_place_raises_as_pytorchs():
    x = ag.ones(3, requires_grad=True)
    a = x * 2
    v = a[0]
    a.detach_()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        v.mul_(ag.ones((), requires_grad=True))


def test_in_place_write_of_an_empty_non_leaf_is_allowed_as_in_torch():
    """NumPy may give an empty array zero strides: that is no overlap, nothing is written."""
    torch = pytest.importorskip("torch")
    results = []
    for lib in (ag, torch):
        x = lib.tensor(np.ones((0, 2)), requires_grad=True)
        y = x * 1
        y.mul_(2)
        y.add_(1)
        y.sum().backward() if lib is torch else y.sum().backward_sync()
        results.append((tuple(y.shape), y.grad_fn.name(), tuple(x.grad.shape)))
    assert results[0] == results[1] == ((0, 2), "AddBackward0", (0, 2))


def _pow_through_a_view(lib, write_again: bool = False):
    """``b[0].pow_(e)`` on a clone of a leaf, then first and second-order gradients."""
    a = lib.tensor(np.array([[0.8, 3.1], [2.2, 0.6]]), requires_grad=True)
    e = lib.tensor(np.array([1.1, 1.5]), requires_grad=True)
    b = a.clone()
    b[0].pow_(e)
    if write_again:
        b[0].add_(1.0)
    grad = (lambda *args, **kw: lib.autograd.grad(*args, **kw)) if lib is not ag else ag.grad_sync
    firsts = grad((b * b).sum(), [a, e], create_graph=True)
    seconds = grad(sum((g * g).sum() for g in firsts), [a, e])
    return [g.detach().numpy() for g in (*firsts, *seconds)]


def test_pow_with_a_tensor_exponent_through_a_view_has_torchs_second_order_gradients():
    torch = pytest.importorskip("torch")
    for ours, theirs in zip(_pow_through_a_view(ag), _pow_through_a_view(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_pow_through_a_view_written_again_raises_at_backward_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (ag, torch):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _pow_through_a_view(lib, write_again=True)


@pytest.mark.parametrize("op", ["add_", "sub_"])
def test_inplace_alpha_records_one_node_holding_alpha_as_torch(op):
    torch = pytest.importorskip("torch")
    shapes = []
    for lib in (ag, torch):
        x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
        w = lib.tensor(np.array([3.0, 4.0]), requires_grad=True)
        y = x * 1
        getattr(y, op)(w, alpha=2.5)
        grad = ag.grad_sync if lib is ag else torch.autograd.grad
        gx, gw = grad(y.sum(), [x, w])
        shapes.append((y.grad_fn.name(),
                       [f.name().split("::")[-1] for f, _ in y.grad_fn.next_functions],
                       gx.detach().numpy().tolist(), gw.detach().numpy().tolist()))
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("op", ["add_", "sub_"])
@pytest.mark.parametrize("a, b, alpha", [
    (np.array([True, False]), np.array([True, True]), -1),
    (np.array([1, 2], np.int8), np.array([1, 1], np.int8), 300),
    (np.array([1, 2]), np.array([1, 1]), 2.5),
    (np.array([1.0, 2.0]), np.array([1.0, 1.0]), True),
    (np.array([1.0, 2.0]), 3, 2),
], ids=["bool", "int8-overflow", "int-float-alpha", "float-bool-alpha", "number"])
def test_inplace_alpha_values_and_errors_as_torch(op, a, b, alpha):
    torch = pytest.importorskip("torch")
    seen = []
    for lib in (ag, torch):
        x = lib.tensor(a.copy())
        other = lib.tensor(b) if isinstance(b, np.ndarray) else b
        try:
            getattr(x, op)(other, alpha=alpha)
            seen.append(x.numpy().tolist())
        except RuntimeError as exc:
            seen.append(str(exc))
    assert seen[0] == seen[1]


def test_clamp_and_pow_in_place_follow_torchs_cast_and_shape_rules():
    """Both go through the one in-place writer: PyTorch's canCast (uint8 takes an int64
    bound) and its broadcast error."""
    torch = pytest.importorskip("torch")
    seen = []
    for lib in (ag, torch):
        x = lib.tensor(np.array([1, 2, 3], np.uint8))
        x.clamp_(lib.tensor(np.array([2, 2, 2])), None)
        y = lib.tensor(np.array([1.0, 2.0, 3.0]))
        with pytest.raises(RuntimeError) as info:
            y.pow_(lib.tensor(np.array([1.0, 2.0])))
        seen.append((x.numpy().tolist(), str(x.dtype).replace("torch.", ""), str(info.value)))
    assert seen[0] == seen[1]
