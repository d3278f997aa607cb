"""In-place writes through views (Note [In-place writes to views]): CopySlices and the
views' new AsStridedBackward0, against PyTorch and gradcheck."""

from __future__ import annotations

import copy
import gc
import pickle

import numpy as np
import pytest
from oracles import arr, away_from_zero, check_against_torch, check_second_order, leaf

import aiograd as ag

pytestmark = pytest.mark.timeout(60)


def _iadd_column(y, w):
    y[:, 0] += w  # getitem, __iadd__ on the view, then setitem of the view itself
    return y


def _stale_view(y, w):
    a = y[1]
    y[0].mul_(w)  # a's memory is not written, but its history is renewed
    return a * 2


def _base_written(y, w):
    a = y[0]
    y.mul_(w)  # the base itself: a now holds w * x
    return a * 3


def _two_writes(y, w):
    v = y[1:]
    v.mul_(w[1:])
    v.add_(w[1:])
    return y


def _view_written_then_read(y, w):
    v = y.T[1:3]
    v.mul_(w[:, 1:3].T)
    return v * y.T[1:3] + y.sum()


# name -> (shape of x, shape of w, program over y = x * 1 returning a tensor)
PROGRAMS = {
    "select_mul_number": ((3, 4), (4,), lambda y, w: (y[0].mul_(2.0), y * w)[1]),
    "slice_add_tensor": ((3, 4), (3, 2), lambda y, w: (y[:, 1:3].add_(w), y)[1]),
    "slice_add_broadcast": ((3, 4), (2,), lambda y, w: (y[:, 1:3].add_(w), y)[1]),
    "transpose_slice_mul": ((3, 4), (2, 3), lambda y, w: (y.T[1:3].mul_(w), y)[1]),
    "strided_slice_div": ((3, 4), (3, 2), lambda y, w: (y[:, ::2].div_(w), y)[1]),
    "view_copy": ((3, 4), (4,), lambda y, w: (y.view(12)[2:6].copy_(w), y * y)[1]),
    "unsqueeze_zero": ((3, 4), (3, 4), lambda y, w: (y.unsqueeze(0)[0, 1].zero_(), y * w)[1]),
    "view_of_view": ((3, 4), (2,), lambda y, w: (y.T[1:3][:, 0].sub_(w), y)[1]),
    "permute_3d": ((2, 3, 4), (2, 3), lambda y, w: (y.permute(2, 0, 1)[1].mul_(w), y)[1]),
    "iadd_column_setitem": ((3, 4), (3,), _iadd_column),
    "stale_view": ((3, 4), (4,), _stale_view),
    "base_written": ((3, 4), (3, 4), _base_written),
    "two_writes": ((3, 4), (3, 4), _two_writes),
    "view_written_then_read": ((3, 4), (3, 4), _view_written_then_read),
}


def _program(name):
    xshape, wshape, body = PROGRAMS[name]

    def run(x, w):
        return body(x * 1, w) * x.sum()  # the gradients then depend on x everywhere

    return xshape, wshape, run


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_write_through_a_view_matches_torch(name):
    xshape, wshape, run = _program(name)
    check_against_torch(run, run, arr(xshape), away_from_zero(wshape))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_write_through_a_view_second_order_matches_torch(name):
    xshape, wshape, run = _program(name)
    check_second_order(run, run, arr(xshape), away_from_zero(wshape))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_write_through_a_view_gradcheck(name):
    xshape, wshape, run = _program(name)
    assert ag.gradcheck(run, [leaf(arr(xshape)), leaf(away_from_zero(wshape))])


def _name(fn):
    return fn.name() if isinstance(fn, ag.graph.Node) else type(fn).__name__


def _names(fn, depth=2):
    """grad_fn names down ``depth`` levels: (name, (children...))."""
    if fn is None or depth == 0:
        return fn and _name(fn)
    return _name(fn), tuple(_names(n, depth - 1) for n, _ in fn.next_functions)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_root_and_view_histories_are_named_as_in_torch(name):
    torch = pytest.importorskip("torch")
    xshape, wshape, body = PROGRAMS[name]
    a, b = arr(xshape), away_from_zero(wshape)
    y = leaf(a) * 1
    ty = torch.tensor(a, requires_grad=True) * 1
    body(y, leaf(b))
    body(ty, torch.tensor(b, requires_grad=True))
    assert _names(y.grad_fn) == _names(ty.grad_fn)


def test_the_written_view_and_the_other_views_get_as_strided_histories():
    y = leaf(arr((3, 4))) * 1
    other, v = y[1], y[0]
    v.mul_(2.0)
    assert y.grad_fn.name() == "CopySlices"
    assert y.grad_fn.next_functions[0][0].name() == "MulBackward0"
    for view in (v, other):
        assert view.grad_fn.name() == "AsStridedBackward0"
        assert view.grad_fn.next_functions == ((y.grad_fn, 0),)


def test_a_write_without_grad_renews_the_views_histories_too():
    y = leaf(arr((3, 4))) * 1
    a = y[0]
    with ag.no_grad():
        y[1].mul_(2.0)
    assert a.grad_fn.name() == "AsStridedBackward0"
    assert a.grad_fn.next_functions == ((y.grad_fn, 0),)


def test_writing_a_requires_grad_value_into_a_plain_tensor_makes_it_require_grad():
    z = ag.zeros(3, 4, dtype=ag.float64)
    w = leaf(arr((4,)))
    z[1].add_(w)
    assert z.requires_grad and z.grad_fn.name() == "CopySlices"
    assert z.grad_fn.next_functions[0] == (None, 0)
    ag.backward_sync((z * 2).sum())
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 2.0))


def test_a_view_made_in_no_grad_mode_may_not_be_written_with_grad():
    y = leaf(arr((3, 4))) * 1
    with ag.no_grad():
        v = y[0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being "
                                           "modified inplace with grad mode enabled"):
        v.mul_(2.0)
    assert y._version == 0


def test_a_view_made_in_no_grad_mode_may_be_written_in_no_grad_mode():
    y = leaf(arr((3, 4))) * 1
    with ag.no_grad():
        y[0].zero_()
    ag.backward_sync(y.sum())  # y's own history did not change: MulBackward0 of the leaf


def test_backward_twice_through_a_write_needs_retain_graph():
    x = leaf(arr((3, 4)))
    y = x * 1
    y[0].mul_(2.0)
    s = y.sum()
    ag.backward_sync(s, retain_graph=True)
    ag.backward_sync(s)
    np.testing.assert_array_equal(x.grad.numpy()[0], np.full(4, 4.0))
    y = x * 1
    y[0].mul_(2.0)
    s = y.sum()
    ag.backward_sync(s)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ag.backward_sync(s)


def test_negative_strides_gradcheck():
    # NumPy views may step backwards (PyTorch has no negative steps): checked numerically.
    def run(x, w):
        y = x * 1
        y[::-1][0:2].mul_(w)
        y[:, ::-2].add_(w[0, :2])
        return y * x

    assert ag.gradcheck(run, [leaf(arr((3, 4))), leaf(away_from_zero((2, 4)))])


def test_a_root_that_is_not_c_contiguous_gradcheck():
    def run(x, w):
        y = x.T * 1  # NumPy keeps the transposed (Fortran) order: the root is not C-ordered
        assert not y.data.flags.c_contiguous
        y[1:3].mul_(w)
        a = y[:, 1]
        y.T[:, 0].add_(w[0])
        return y * a.sum()

    assert ag.gradcheck(run, [leaf(arr((3, 4))), leaf(away_from_zero((2, 3)))])


def test_a_plain_root_from_numpy_with_gaps_gradcheck():
    def run(w):
        z = ag.from_numpy(np.zeros((6, 8))[::2, ::-2])  # a root with gaps, stepping back
        z[1].add_(w)
        return z * 2

    assert ag.gradcheck(run, [leaf(arr((4,)))])


def test_an_expanded_view_is_renewed_with_the_summing_scatter():
    torch = pytest.importorskip("torch")
    a = arr((3, 4))
    weights = np.arange(8.0).reshape(2, 4)
    grads = []
    for lib, make in ((ag, leaf), (torch, lambda v: torch.tensor(v, requires_grad=True))):
        x = make(a)
        z = x * 1
        e = z[0].expand(2, 4)
        z.mul_(2.0)
        loss = (e * lib.tensor(weights)).sum()
        grads.append(lib.autograd.grad(loss, [x])[0] if lib is torch
                     else ag.grad_sync(loss, [x])[0])
    np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy())


def _written_view_hooks(make, backward):
    """Whether a written view's retained grad stays None, and which of its hooks ran."""
    calls = []
    y = make(arr((3, 4))) * 1
    v = y[0]
    v.retain_grad()
    v.register_hook(lambda g: calls.append("before"))
    v.mul_(2.0)
    v.register_hook(lambda g: calls.append("after"))
    backward(y.sum())
    return v.grad is None, calls


def test_retain_grad_and_hooks_of_a_written_view_follow_pytorch():
    torch = pytest.importorskip("torch")
    # Neither the view's old nor its new grad_fn is on y's path: no grad, no hook call.
    assert _written_view_hooks(leaf, ag.backward_sync) == _written_view_hooks(
        lambda a: torch.tensor(a, requires_grad=True), lambda t: t.backward())


@pytest.mark.anyio
async def test_await_backward_through_a_write_to_a_view():
    x = leaf(arr((3, 4)))
    y = x * 1
    y[:, 1:3] *= 3.0
    await ag.backward(y.sum())
    expected = np.ones((3, 4))
    expected[:, 1:3] = 3.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_views_are_held_weakly():
    y = leaf(arr((3, 4))) * 1
    for i in range(100):
        y[i % 3].sum()
    gc.collect()
    assert len(y._views.refs) == 0
    keep = y[0]
    y[1].mul_(2.0)
    assert len(y._views.refs) == 1 and keep.grad_fn.name() == "AsStridedBackward0"


def test_a_view_whose_base_data_was_replaced_is_not_rebased():
    y = leaf(arr((3, 4))) * 1
    v = y[0]
    y.data = np.zeros((3, 4))
    with pytest.raises(RuntimeError, match="no longer part of its base's"):
        v.mul_(2.0)


def test_a_base_with_views_can_be_copied_and_pickled():
    z = ag.zeros(2, 3)
    row = z[0]
    for copied in (copy.deepcopy(z), pickle.loads(pickle.dumps(z))):
        assert copied._views is None
        np.testing.assert_array_equal(copied.numpy(), z.numpy())
    row.add_(1.0)
    assert z.numpy()[0].tolist() == [1.0, 1.0, 1.0]


# ---- outputs of custom Functions that share their inputs' memory ----

def _alias_functions(lib):
    """An identity that returns its input as is, and a Function returning a view of it."""
    base = lib.autograd.Function if lib.__name__ == "torch" else lib.Function

    class Id(base):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    class Row(base):
        @staticmethod
        def forward(ctx, x):
            return x[1]

        @staticmethod
        def backward(ctx, g):
            out = g.new_zeros((2, 3))
            out[1] = g
            return out

    return Id, Row


def _written_output_of_leaf(lib):
    Id, _ = _alias_functions(lib)
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    Id.apply(x).mul_(2)


def _written_output_of_non_leaf(lib):
    Id, _ = _alias_functions(lib)
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True) * 1.0
    Id.apply(a).mul_(10)


def _base_of_view_output_written(lib):
    _, Row = _alias_functions(lib)
    a = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True) * 1.0
    y = Row.apply(a)
    a.mul_(2)
    loss = y.sum()
    loss.backward() if lib.__name__ == "torch" else loss.backward_sync()


@pytest.mark.parametrize("program", [_written_output_of_leaf, _written_output_of_non_leaf,
                                     _base_of_view_output_written])
def test_a_custom_function_output_sharing_its_input_may_not_be_written(program):
    # PyTorch's rule: the Function's backward cannot describe a write, so it is refused
    # (before, aiograd wrote the leaf, or kept a stale history: wrong gradients, silently)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as expected:
        program(torch)
    with pytest.raises(RuntimeError) as info:
        program(ag)
    assert str(info.value) == str(expected.value)


def test_a_custom_function_output_sharing_its_input_may_be_read_and_cloned():
    Id, Row = _alias_functions(ag)
    x = ag.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = Row.apply(x * 1.0).clone()
    y.mul_(3)  # a clone is free to be written
    z = Id.apply(x * 2.0)
    (y.sum() + z.sum()).backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 2.0, 2.0], [5.0, 5.0, 5.0]])


def _write_row_of_expanded(lib):
    x = lib.tensor([[1.0, 2.0]], requires_grad=True)
    e = (x * 1.0).expand(3, 2)
    e[0].mul_(5.0)  # one row: no element written twice
    return x, e.sum()


def test_a_write_into_an_expanded_view_works_where_no_element_is_hit_twice():
    torch = pytest.importorskip("torch")
    seen = []
    for lib in (torch, ag):
        x, loss = _write_row_of_expanded(lib)
        loss.backward() if lib is torch else loss.backward_sync()
        seen.append(x.grad.numpy().tolist())
        z = lib.tensor([1.0, 2.0])
        z.expand_as(z).mul_(3.0)  # an expand that broadcasts nothing
        assert z.numpy().tolist() == [3.0, 6.0]
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            lib.tensor([[1.0, 2.0]]).expand(3, 2).mul_(2.0)
    assert seen[1] == seen[0] == [[15.0, 15.0]]


def test_rows_of_one_root_written_in_turn_give_torchs_gradients():
    """Each write renews every live row's history (their geometry is worked out once)."""
    torch = pytest.importorskip("torch")

    def grads(lib, backward):
        x = lib.tensor(np.arange(24.0).reshape(6, 4), requires_grad=True)
        a = x * 1
        rows = [a[i] for i in range(6)]
        for i, r in enumerate(rows):
            r.mul_(i + 1.5)
        backward((rows[2] * rows[5]).sum() + (a * a).sum())
        return x.grad.numpy()

    np.testing.assert_allclose(grads(ag, ag.backward_sync), grads(torch, lambda t: t.backward()))
