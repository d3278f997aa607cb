"""Structural ops (aiograd/_ops/structure.py): diagonals and triangles, products (outer inner
kron tensordot addmm baddbmm) and dim moves (movedim swapaxes unflatten roll rot90
repeat_interleave tensor_split diff). PyTorch is the oracle: values, gradients (first and
second order), node names, which results are views, in-place writes through the diagonal
view, and errors."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import (
    arr,
    check_against_torch,
    check_on_fake_device,
    check_second_order,
    leaf,
    run_both,
)

import aiograd as ag
import aiograd._ops.structure  # noqa: F401  (binds the Tensor methods)
from aiograd._ops.structure import (
    addmm,
    baddbmm,
    diag,
    diag_embed,
    diagonal,
    diff,
    inner,
    kron,
    moveaxis,
    movedim,
    outer,
    repeat_interleave,
    rot90,
    swapaxes,
    swapdims,
    tensor_split,
    tensordot,
    trace,
    tril,
    triu,
)

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")


def case(ours, theirs, *shapes):
    """A test case: the aiograd and torch callables over leaves of ``shapes``."""
    return ours, theirs, shapes


# name -> (aiograd fn, torch fn, input shapes); inputs are float64 leaves
CASES = {
    "diagonal": case(lambda x: diagonal(x), lambda x: torch.diagonal(x), (3, 4)),
    "diagonal_offset_3d": case(lambda x: x.diagonal(1, 2, 0),
                               lambda x: x.diagonal(1, 2, 0), (3, 4, 5)),
    "diagonal_negative": case(lambda x: x.diagonal(-2, -1, 0),
                              lambda x: x.diagonal(-2, -1, 0), (3, 4, 5)),
    "diagonal_past_end": case(lambda x: x.diagonal(7), lambda x: x.diagonal(7), (3, 4)),
    "diagonal_empty": case(lambda x: x.diagonal(), lambda x: x.diagonal(), (0, 3)),
    "diag_vector": case(lambda x: diag(x, 1), lambda x: torch.diag(x, 1), (4,)),
    "diag_vector_below": case(lambda x: x.diag(-2), lambda x: x.diag(-2), (3,)),
    "diag_matrix": case(lambda x: diag(x, -1), lambda x: torch.diag(x, -1), (4, 3)),
    "diag_embed": case(lambda x: diag_embed(x), lambda x: torch.diag_embed(x), (2, 3)),
    "diag_embed_dims": case(lambda x: x.diag_embed(1, 0, 2),
                            lambda x: x.diag_embed(1, 0, 2), (2, 3)),
    "diag_embed_swapped": case(lambda x: x.diag_embed(-1, -1, 0),
                               lambda x: x.diag_embed(-1, -1, 0), (3,)),
    "trace": case(lambda x: trace(x), lambda x: torch.trace(x), (3, 4)),
    "trace_wide": case(lambda x: x.trace(), lambda x: x.trace(), (4, 2)),
    "trace_empty": case(lambda x: x.trace(), lambda x: x.trace(), (0, 0)),
    "tril": case(lambda x: tril(x), lambda x: torch.tril(x), (3, 4)),
    "tril_batched": case(lambda x: x.tril(1), lambda x: x.tril(1), (2, 3, 4)),
    "triu": case(lambda x: triu(x, -1), lambda x: torch.triu(x, -1), (4, 3)),
    "triu_empty": case(lambda x: x.triu(), lambda x: x.triu(), (0, 3)),
    "tril_inplace": case(lambda x: (x * 1).tril_(-1), lambda x: (x * 1).tril_(-1), (3, 3)),
    "triu_inplace": case(lambda x: (x * 1).triu_(2), lambda x: (x * 1).triu_(2), (2, 3, 4)),
    "outer": case(lambda a, b: outer(a, b), lambda a, b: torch.outer(a, b), (3,), (4,)),
    "inner": case(lambda a, b: inner(a, b), lambda a, b: torch.inner(a, b), (2, 3, 4), (5, 4)),
    "inner_vectors": case(lambda a, b: a.inner(b), lambda a, b: a.inner(b), (4,), (4,)),
    "inner_scalar": case(lambda a, b: a.inner(b), lambda a, b: a.inner(b), (2, 3), ()),
    "kron": case(lambda a, b: kron(a, b), lambda a, b: torch.kron(a, b), (2, 3), (3, 2, 2)),
    "kron_scalars": case(lambda a, b: a.kron(b), lambda a, b: a.kron(b), (), ()),
    "tensordot_int": case(lambda a, b: tensordot(a, b),
                          lambda a, b: torch.tensordot(a, b), (2, 3, 4), (3, 4, 5)),
    "tensordot_zero": case(lambda a, b: tensordot(a, b, 0),
                           lambda a, b: torch.tensordot(a, b, 0), (2,), (3,)),
    "tensordot_lists": case(lambda a, b: tensordot(a, b, ([0, 2], [2, 0])),
                            lambda a, b: torch.tensordot(a, b, ([0, 2], [2, 0])),
                            (2, 3, 4), (4, 5, 2)),
    "tensordot_broadcast_dim": case(lambda a, b: tensordot(a, b, ([1, 0], [0, 1])),
                                    lambda a, b: torch.tensordot(a, b, ([1, 0], [0, 1])),
                                    (2, 1), (3, 2, 4)),
    "tensordot_full": case(lambda a, b: tensordot(a, b, ([-1, 0], [0, 1])),
                           lambda a, b: torch.tensordot(a, b, ([-1, 0], [0, 1])), (2, 3), (3, 2)),
    "addmm": case(lambda i, a, b: addmm(i, a, b),
                  lambda i, a, b: torch.addmm(i, a, b), (3, 4), (3, 5), (5, 4)),
    "addmm_scaled_broadcast": case(lambda i, a, b: i.addmm(a, b, beta=0.5, alpha=-2),
                                   lambda i, a, b: i.addmm(a, b, beta=0.5, alpha=-2),
                                   (4,), (3, 5), (5, 4)),
    "addmm_beta_zero": case(lambda i, a, b: addmm(i, a, b, beta=0),
                            lambda i, a, b: torch.addmm(i, a, b, beta=0), (3, 1), (3, 2), (2, 4)),
    "addmm_empty_inner": case(lambda i, a, b: addmm(i, a, b),
                              lambda i, a, b: torch.addmm(i, a, b), (2, 3), (2, 0), (0, 3)),
    "baddbmm": case(lambda i, a, b: baddbmm(i, a, b),
                    lambda i, a, b: torch.baddbmm(i, a, b), (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    "baddbmm_scaled_broadcast": case(lambda i, a, b: i.baddbmm(a, b, beta=2, alpha=0.5),
                                     lambda i, a, b: i.baddbmm(a, b, beta=2, alpha=0.5),
                                     (3, 1), (2, 3, 5), (2, 5, 4)),
    "movedim": case(lambda x: movedim(x, 0, 2), lambda x: torch.movedim(x, 0, 2), (2, 3, 4)),
    "movedim_lists": case(lambda x: x.movedim([0, -2], [2, 0]),
                          lambda x: x.movedim([0, -2], [2, 0]), (2, 3, 4)),
    "movedim_identity": case(lambda x: x.movedim(1, 1), lambda x: x.movedim(1, 1), (2, 3)),
    "movedim_0d": case(lambda x: x.movedim(0, -1), lambda x: x.movedim(0, -1), ()),
    "moveaxis": case(lambda x: moveaxis(x, (1,), (0,)),
                     lambda x: torch.moveaxis(x, (1,), (0,)), (2, 3, 4)),
    "swapaxes": case(lambda x: swapaxes(x, 0, -1), lambda x: torch.swapaxes(x, 0, -1), (2, 3, 4)),
    "swapdims": case(lambda x: swapdims(x, 1, 0), lambda x: torch.swapdims(x, 1, 0), (2, 3)),
    "swapaxes_0d": case(lambda x: x.swapaxes(0, -1), lambda x: x.swapaxes(0, -1), ()),
    "unflatten": case(lambda x: x.unflatten(1, (3, 1)), lambda x: x.unflatten(1,
    (3, 1)), (2, 3, 4)),
    "unflatten_inferred": case(lambda x: x.unflatten(-1, [2, -1]),
                               lambda x: x.unflatten(-1, [2, -1]), (2, 3, 4)),
    "unflatten_inferred_empty": case(lambda x: x.unflatten(0, (2, -1)),
                                     lambda x: x.unflatten(0, (2, -1)), (2, 0)),
    "unflatten_inferred_empty_other": case(lambda x: x.unflatten(0, (-1, 1, 3)),
                                           lambda x: x.unflatten(0, (-1, 1, 3)), (3, 0)),
    "unflatten_transposed": case(lambda x: x.t().unflatten(0, (2, 2)),
                                 lambda x: x.t().unflatten(0, (2, 2)), (3, 4)),
    "roll": case(lambda x: x.roll(1, 0), lambda x: x.roll(1, 0), (3, 4)),
    "roll_dims": case(lambda x: x.roll((1, -5), (0, -1)), lambda x: x.roll((1, -5), (0, -1)),
    (2, 3, 4)),
    "roll_flat": case(lambda x: x.roll(5), lambda x: x.roll(5), (2, 3, 4)),
    "roll_0d": case(lambda x: x.roll(3), lambda x: x.roll(3), ()),
    "roll_empty": case(lambda x: x.roll(2, 1), lambda x: x.roll(2, 1), (0, 3)),
    "rot90": case(lambda x: rot90(x), lambda x: torch.rot90(x), (3, 4)),
    "repeat_interleave": case(lambda x: repeat_interleave(x, 2),
                              lambda x: torch.repeat_interleave(x, 2), (2, 3)),
    "repeat_interleave_dim": case(lambda x: x.repeat_interleave(3, dim=-1),
                                  lambda x: x.repeat_interleave(3, dim=-1), (2, 3)),
    "repeat_interleave_zero": case(lambda x: x.repeat_interleave(0, dim=0),
                                   lambda x: x.repeat_interleave(0, dim=0), (2, 3)),
    "repeat_interleave_empty": case(lambda x: x.repeat_interleave(2, dim=0),
                                    lambda x: x.repeat_interleave(2, dim=0), (3, 0)),
    "repeat_interleave_empty_zero": case(lambda x: x.repeat_interleave(0, dim=-1),
                                         lambda x: x.repeat_interleave(0, dim=-1), (0, 2, 3)),
    "repeat_interleave_0d": case(lambda x: x.repeat_interleave(3),
                                 lambda x: x.repeat_interleave(3), ()),
    "repeat_interleave_counts": case(
        lambda x: x.repeat_interleave(ag.tensor(np.array([1, 0, 2])), dim=1),
        lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), dim=1), (2, 3)),
    "repeat_interleave_one_count": case(
        lambda x: x.repeat_interleave(ag.tensor(np.array(2)), dim=0),
        lambda x: x.repeat_interleave(torch.tensor(2), dim=0), (2, 3)),
    "repeat_interleave_counts_flat": case(
        lambda x: x.repeat_interleave(ag.tensor(np.array([1, 0, 2, 1]))),
        lambda x: x.repeat_interleave(torch.tensor([1, 0, 2, 1])), (2, 2)),
    "tensor_split_sections": case(lambda x: tensor_split(x, 3, 1)[0],
                                  lambda x: torch.tensor_split(x, 3, 1)[0], (2, 7)),
    "tensor_split_last": case(lambda x: x.tensor_split(3, -1)[2],
                              lambda x: x.tensor_split(3, -1)[2], (2, 7)),
    "tensor_split_indices": case(lambda x: x.tensor_split([1, -1])[1],
                                 lambda x: x.tensor_split([1, -1])[1], (5, 2)),
    "tensor_split_tensor": case(lambda x: x.tensor_split(ag.tensor(np.array([2])))[1],
                                lambda x: x.tensor_split(torch.tensor([2]))[1], (5, 2)),
    "tensor_split_empty_piece": case(lambda x: x.tensor_split(4)[3],
                                     lambda x: x.tensor_split(4)[3], (3,)),
    "diff": case(lambda x: diff(x), lambda x: torch.diff(x), (3, 4)),
    "diff_order_dim": case(lambda x: x.diff(2, 0), lambda x: x.diff(2, 0), (5, 3)),
    "diff_order_past_size": case(lambda x: x.diff(9, 0), lambda x: x.diff(9, 0), (5, 3)),
    "diff_zero_order": case(lambda x: x.diff(0), lambda x: x.diff(0), (5, 3)),
    "diff_empty": case(lambda x: x.diff(0), lambda x: x.diff(0), (0,)),
    "diff_empty_dim": case(lambda x: x.diff(1, 0), lambda x: x.diff(1, 0), (2, 0)),
    "diff_prepend_append": case(lambda x, p, a: x.diff(3, 0, p, a),
                                lambda x, p, a: x.diff(3, 0, p, a), (5, 3), (1, 3), (2, 3)),
}
CASES.update({
    f"rot90_{k}_{dims}": case(lambda x, k=k, d=dims: x.rot90(k, d),
                              lambda x, k=k, d=dims: x.rot90(k, d), (2, 3, 4))
    for k, dims in ((-1, (0, 1)), (0, (2, 0)), (2, (-1, 1)), (3, (2, 0)), (4, (0, 1)),
                    (5, (-1, 1)))
})
# the ops whose second derivative is not zero, on a product that makes it so
SECOND_ORDER = ["diagonal_offset_3d", "diag_vector", "diag_matrix", "diag_embed_dims", "trace",
                "tril_batched", "triu_inplace", "outer", "inner", "kron", "tensordot_lists",
                "tensordot_broadcast_dim", "addmm_scaled_broadcast", "baddbmm_scaled_broadcast",
                "movedim_lists", "unflatten_inferred", "roll_dims", "roll_flat", "rot90",
                "rot90_3_(2, 0)", "repeat_interleave_dim", "repeat_interleave_counts",
                "tensor_split_indices", "diff_prepend_append"]


def _inputs(shapes):
    return [arr(s, seed=i + 3) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_match_torch(name):
    fn, torch_fn, shapes = CASES[name]
    check_against_torch(fn, torch_fn, *_inputs(shapes))


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_order_matches_torch(name):
    fn, torch_fn, shapes = CASES[name]
    check_second_order(lambda *xs: fn(*(x * x for x in xs)),
                       lambda *ts: torch_fn(*(t * t for t in ts)), *_inputs(shapes))


@pytest.mark.parametrize("name", CASES)
def test_node_name_and_view_match_torch(name):
    fn, torch_fn, shapes = CASES[name]
    values = _inputs(shapes)
    out = fn(*[leaf(v) for v in values])
    ts = [torch.tensor(v, requires_grad=True) for v in values]
    t_out = torch_fn(*ts)
    assert out.grad_fn.name() == t_out.grad_fn.name().replace("torch::autograd::", "")
    assert (out._base is not None) == (t_out._base is not None)
    assert out.is_contiguous() == t_out.is_contiguous() or out.numel() <= 1


@pytest.mark.parametrize("name", ["diagonal", "diag_matrix", "diag_embed", "trace", "tril",
                                  "kron", "tensordot_lists", "addmm_scaled_broadcast",
                                  "baddbmm", "movedim_lists", "roll_dims", "rot90",
                                  "repeat_interleave_counts", "diff_order_dim"])
def test_float32_values_and_dtype_match_torch(name):
    fn, torch_fn, shapes = CASES[name]
    values = [v.astype(np.float32) for v in _inputs(shapes)]
    out = fn(*[ag.tensor(v) for v in values])
    expected = torch_fn(*[torch.tensor(v) for v in values])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["diag_embed_dims", "trace_wide", "triu", "kron",
                                  "addmm_scaled_broadcast", "roll_dims", "rot90_3_(2, 0)",
                                  "diff_prepend_append"])
def test_gradcheck(name):
    fn, _, shapes = CASES[name]
    assert ag.gradcheck(fn, [leaf(v) for v in _inputs(shapes)])


@pytest.mark.parametrize("op", [
    lambda x: x.diagonal(1),
    lambda x: diag(x),
    lambda x: diag_embed(x, 1),
    lambda x: x.trace() * x,
    lambda x: x.tril(1) * (x * 1).triu_(0),
    lambda x: kron(x, x),
    lambda x: inner(x, x),
    lambda x: addmm(x[:, :2], x, x.t(), beta=2),
    lambda x: x.roll(1) + x.rot90(1, (1, 0)).t(),
    lambda x: x.repeat_interleave(ag.tensor(np.array([2, 0, 1]), device="fake:1"), dim=1),
    lambda x: x.diff(2) + x.movedim(0, 1).t() + x.unflatten(1, (3, 1)).squeeze(-1),
], ids=["diagonal", "diag", "diag_embed", "trace", "tril_triu_", "kron", "inner", "addmm",
        "roll_rot90", "repeat_interleave", "diff_movedim_unflatten"])
def test_ops_stay_on_the_tensors_device(fake_backend, op):
    check_on_fake_device(fake_backend, op)


def test_second_order_node_of_diagonal():
    x = leaf(arr((3, 4)))
    (g,) = ag.grad_sync((x.diagonal(1) ** 2).sum(), x, create_graph=True)
    t = torch.tensor(arr((3, 4)), requires_grad=True)
    (tg,) = torch.autograd.grad((t.diagonal(1) ** 2).sum(), t, create_graph=True)
    assert g.grad_fn.name() == tg.grad_fn.name() == "DiagonalBackwardBackward0"


# ---- integer and bool inputs ----

@pytest.mark.parametrize("name, op", [
    ("trace_int32", lambda m, x: m.trace(x.int())),
    ("tril_bool", lambda m, x: m.tril(x > 0, 1)),
    ("triu_int", lambda m, x: m.triu(x.long(), -1)),
    ("diag_embed_bool", lambda m, x: m.diag_embed(x > 0)),
    ("diagonal_int", lambda m, x: m.diagonal(x.long(), 1)),
    ("roll_int", lambda m, x: m.roll(x.long(), 2)),
    ("diff_int", lambda m, x: m.diff(x.long(), dim=0)),
    ("diff_bool", lambda m, x: m.diff(x > 0)),
    ("kron_promotes", lambda m, x: m.kron(x.long(), x.float())),
    ("outer_promotes", lambda m, x: m.outer(x[0].int(), x[1])),
    ("addmm_long", lambda m, x: m.addmm(x.long(), x.long(), x.long().t(), beta=2, alpha=3)),
    ("repeat_interleave_bool", lambda m, x: m.repeat_interleave(x > 0, 2, dim=1)),
    ("repeat_interleave_indices", lambda m, x: m.repeat_interleave(
        m.tensor(np.array([2, 0, 3])))),
])
def test_integer_and_bool_inputs_match_torch(name, op):
    from aiograd._ops import structure

    values = arr((3, 3)) * 4

    def run(m, module):
        return op(module, m.tensor(values))

    ours = run(ag, _Namespace(structure, ag))
    theirs = run(torch, torch)
    assert ours.dtype == theirs.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


class _Namespace:
    """The structure module's functions, falling back to aiograd's (``tensor``)."""

    def __init__(self, *modules):
        self.modules = modules

    def __getattr__(self, name):
        for module in self.modules:
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(name)


# ---- in-place writes through the diagonal view (Note [In-place writes to views]) ----

def _diagonal_mul(y, w):
    y.diagonal().mul_(w[0, :3])
    return y * w


def _diagonal_offset_add(y, w):
    y.diagonal(1, 1, 0).add_(w[0, :2])
    return y * y


def _diagonal_copy_then_read(y, w):
    d = y.diagonal()
    d.copy_(w[1, :3])
    return d * y[0, 0] + y.sum()


def _base_written_view_read(y, w):
    d = y.diagonal(-1)
    y.mul_(w)  # d's grad_fn becomes AsStridedBackward0
    return d * 2


def _diagonal_zero(y, w):
    y.diagonal().zero_()
    return y * w


def _tril_on_slice(y, w):
    y[1:].tril_()
    return y * w


def _diagonal_of_transpose(y, w):
    y.t().diagonal(1).mul_(3.0)
    return y * w


WRITES = {
    "diagonal_mul": _diagonal_mul,
    "diagonal_offset_add": _diagonal_offset_add,
    "diagonal_copy_then_read": _diagonal_copy_then_read,
    "base_written_view_read": _base_written_view_read,
    "diagonal_zero": _diagonal_zero,
    "tril_on_slice": _tril_on_slice,
    "diagonal_of_transpose": _diagonal_of_transpose,
}


@pytest.mark.parametrize("name", WRITES)
def test_write_through_view_matches_torch(name):
    program = WRITES[name]
    check_against_torch(lambda x, w: program(x * 1, w), lambda x, w: program(x * 1, w),
                        arr((3, 4)), arr((3, 4), seed=5))


@pytest.mark.parametrize("name", ["diagonal_mul", "diagonal_copy_then_read",
                                  "base_written_view_read"])
def test_write_through_view_second_order_matches_torch(name):
    program = WRITES[name]
    check_second_order(lambda x, w: program(x * x, w), lambda x, w: program(x * x, w),
                       arr((3, 4)), arr((3, 4), seed=5))


def test_write_through_view_records_copyslices():
    def program(m):
        x = m.tensor(arr((3, 3)), requires_grad=True)
        y = x * 1
        d = y.diagonal()
        d.mul_(2.0)
        return y.grad_fn.name().replace("torch::autograd::", ""), d.grad_fn.name()

    ours, theirs = run_both(program)
    assert ours == theirs == ("CopySlices", "AsStridedBackward0")


def test_write_with_grad_to_diagonal_made_in_no_grad_raises():
    y = leaf(arr((3, 3))) * 1
    with ag.no_grad():
        d = y.diagonal()
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        d.mul_(2.0)


def test_zero_diagonal_of_leaf_under_no_grad_matches_torch():
    values, w = arr((3, 4)), arr((3, 4), seed=5)
    x = leaf(values)
    with ag.no_grad():
        x.diagonal().zero_()
    (g,) = ag.grad_sync((x * ag.tensor(w)).sum(), x)
    t = torch.tensor(values, requires_grad=True)
    with torch.no_grad():
        t.diagonal().zero_()
    (tg,) = torch.autograd.grad((t * torch.tensor(w)).sum(), t)
    np.testing.assert_array_equal(x.detach().numpy(), t.detach().numpy())
    np.testing.assert_allclose(g.numpy(), tg.numpy())
    assert x._version == t._version


def test_write_to_diagonal_of_leaf_raises():
    x = leaf(arr((3, 3)))
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x.diagonal().mul_(2.0)


def test_diagonal_shares_version_with_base():
    y = leaf(arr((3, 3))) * 1
    d = y.diagonal()
    y.add_(1.0)
    assert d._version == y._version == 1
    assert d._base is y


def test_saved_diagonal_refuses_after_write():
    y = leaf(arr((3, 3))) * 1
    d = y.diagonal()
    out = (d * d).sum()
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward_sync()


def test_diff_along_empty_dim_returns_input():
    x = leaf(np.zeros((2, 0)))
    assert diff(x, 3) is x


def test_diff_zero_order_ignores_prepend_and_append():
    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        p = m.tensor([[0.0]], requires_grad=True)
        out = m.diff(x, 0, 0, p[0], m.tensor([5.0]))
        node = out.grad_fn.name().removeprefix("torch::autograd::")
        return out, node, m.diff(x.detach(), 0, prepend=p[0]).requires_grad

    (ours, ours_node, ours_rg), (theirs, theirs_node, theirs_rg) = run_both(program)
    assert ours.tolist() == theirs.tolist() == [1.0, 2.0]
    assert ours_node == theirs_node == "CopyBackwards"
    assert ours_rg is theirs_rg is False


@pytest.mark.parametrize("dtypes", [("float32", "int64", None), ("float32", None, "bool"),
                                    ("float16", "int64", "float32"), ("int64", "float32", None),
                                    ("bool", None, "int64"), ("uint8", "int8", None)])
def test_diff_prepend_append_promote_as_torch(dtypes):
    def program(m):
        x, p, a = (None if d is None else m.tensor([1, 0]).to(getattr(m, d)) for d in dtypes)
        return m.diff(x, prepend=p, append=a)

    ours, theirs = run_both(program)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert ours.tolist() == theirs.tolist()


def test_tril_inplace_of_leaf_raises():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf(arr((3, 3))).tril_()


def test_tril_inplace_bumps_version_and_returns_self():
    y = leaf(arr((3, 3))) * 1
    assert y.triu_(1) is y
    assert y._version == 1
    np.testing.assert_array_equal(y.detach().numpy(), np.triu(arr((3, 3)), 1))


def test_tensor_split_pieces_are_writable_views():
    check_against_torch(lambda x: _split_write(x * 1), lambda x: _split_write(x * 1),
                        arr((4, 3)))


def _split_write(y):
    first, _ = y.tensor_split(2)
    first.mul_(3.0)
    return y * y


def test_tensor_split_returns_tuple_of_views():
    x = ag.tensor(arr((5, 2)))
    pieces = tensor_split(x, 3)
    assert isinstance(pieces, tuple)
    assert [p.shape for p in pieces] == [(2, 2), (2, 2), (1, 2)]
    assert all(p._base is x for p in pieces)


# ---- errors: PyTorch's type and message ----

def _errors():
    z = np.zeros
    a, t = ag.tensor, torch.tensor
    cases = {
        "diagonal_same_dims": (lambda m, x: m.diagonal(x(z((2, 2))), 0, 0, -2), None),
        "diagonal_1d": (lambda m, x: m.diagonal(x(z(3))), None),
        "diag_3d": (lambda m, x: m.diag(x(z((2, 2, 2)))), None),
        "diag_0d": (lambda m, x: m.diag(x(z(()))), None),
        "diag_embed_0d": (lambda m, x: m.diag_embed(x(z(()))), None),
        "diag_embed_same_dims": (lambda m, x: m.diag_embed(x(z(3)), 0, 0, 0), None),
        "trace_vector": (lambda m, x: m.trace(x(z(3))), None),
        "trace_bool": (lambda m, x: m.trace(x(z((2, 2), dtype=bool))), None),
        "tril_vector": (lambda m, x: m.tril(x(z(3))), None),
        "triu_0d": (lambda m, x: m.triu(x(z(()))), None),
        "outer_matrix": (lambda m, x: m.outer(x(z((3, 2))), x(z(3))), None),
        "inner_sizes": (lambda m, x: m.inner(x(z(3)), x(z(4))), None),
        "inner_dtypes": (lambda m, x: m.inner(x(z(3)), x(z(3, dtype=np.float32))), None),
        "tensordot_sizes": (lambda m, x: m.tensordot(x(z((3, 4))), x(z((4, 5)))), None),
        "tensordot_negative": (lambda m, x: m.tensordot(x(z((3, 4))), x(z((4, 5))), -1), None),
        "tensordot_too_many": (lambda m, x: m.tensordot(x(z((3, 4))), x(z(4)), 2), None),
        "tensordot_lengths": (lambda m, x: m.tensordot(x(z((3, 4))), x(z((4, 5))),
                                                       ([1], [0, 1])), None),
        "tensordot_repeated": (lambda m, x: m.tensordot(x(z((3, 4))), x(z((4, 5))),
                                                        ([1, 1], [0, 0])), None),
        "tensordot_int_pair": (lambda m, x: m.tensordot(x(z((3, 4))), x(z((4, 5))), (1, 0)),
                               None),
        "tensordot_bad_dims": (lambda m, x: m.tensordot(x(z((3, 4))), x(z((4, 5))), 1.5),
                               None),
        "addmm_vector": (lambda m, x: m.addmm(x(z((3, 4))), x(z(3)), x(z((5, 4)))), None),
        "addmm_shapes": (lambda m, x: m.addmm(x(z((3, 4))), x(z((3, 5))), x(z((4, 4)))), None),
        "addmm_input_shape": (lambda m, x: m.addmm(x(z((2, 4))), x(z((3, 5))), x(z((5, 4)))),
                              None),
        "addmm_dtype_self": (lambda m, x: m.addmm(x(z((3, 4), dtype=np.float32)), x(z((3, 5))),
                                                  x(z((5, 4)))), None),
        "addmm_dtype_mat1": (lambda m, x: m.addmm(x(z((3, 4))), x(z((3, 5), dtype=np.float32)),
                                                  x(z((5, 4)))), None),
        "baddbmm_batch": (lambda m, x: m.baddbmm(x(z((2, 3, 4))), x(z((2, 3, 5))),
                                                 x(z((3, 5, 4)))), None),
        "baddbmm_input_shape": (lambda m, x: m.baddbmm(x(z((2, 2, 4))), x(z((2, 3, 5))),
                                                       x(z((2, 5, 4)))), None),
        "baddbmm_dtype_input": (lambda m, x: m.baddbmm(x(z((2, 3, 4), dtype=np.float32)),
                                                       x(z((2, 3, 5))), x(z((2, 5, 4)))), None),
        "baddbmm_dtype_batch": (lambda m, x: m.baddbmm(x(z((2, 3, 4))), x(z((2, 3, 5))),
                                                       x(z((2, 5, 4), dtype=np.float32))), None),
        "movedim_lengths": (lambda m, x: m.movedim(x(z((2, 3, 4))), [0, 1], [2]), None),
        "movedim_repeated_source": (lambda m, x: m.movedim(x(z((2, 3, 4))), [0, 0], [1, 2]),
                                    None),
        "movedim_repeated_destination": (lambda m, x: m.movedim(x(z((2, 3, 4))), [0, 1],
                                                                [2, -1]), None),
        "movedim_range": (lambda m, x: m.movedim(x(z((2, 3, 4))), 3, 0), None),
        "unflatten_empty": (lambda m, x: x(z((2, 3))).unflatten(1, ()), None),
        "unflatten_product": (lambda m, x: x(z((2, 3))).unflatten(1, (2, 2)), None),
        "unflatten_two_inferred": (lambda m, x: x(z((2, 4))).unflatten(1, (-1, -1)), None),
        "unflatten_ambiguous": (lambda m, x: x(z((0, 3))).unflatten(0, (0, -1)), None),
        "unflatten_zero_size_inferred": (lambda m, x: x(z((6, 2))).unflatten(0, (0, -1)), None),
        "unflatten_negative_size": (lambda m, x: x(z((6, 2))).unflatten(0, (2, -3)), None),
        "unflatten_0d": (lambda m, x: x(z(())).unflatten(0, (1,)), None),
        "roll_align": (lambda m, x: m.roll(x(z((2, 3))), (1, 2), (0,)), None),
        "roll_align_no_dims": (lambda m, x: m.roll(x(z((2, 3))), (1, 2)), None),
        "roll_no_shifts": (lambda m, x: m.roll(x(z((2, 3))), ()), None),
        "roll_range": (lambda m, x: m.roll(x(z((2, 3))), 1, 2), None),
        "rot90_three_dims": (lambda m, x: m.rot90(x(z((2, 3, 4))), 1, [0, 1, 2]), None),
        "rot90_vector": (lambda m, x: m.rot90(x(z(3))), None),
        "rot90_same_dims": (lambda m, x: m.rot90(x(z((2, 3, 4))), 1, [0, -3]), None),
        "rot90_range": (lambda m, x: m.rot90(x(z((2, 3, 4))), 1, [0, 5]), None),
        "rot90_range_before_same": (lambda m, x: m.rot90(x(z((2, 2))), 1, [0, 2]), None),
        "rot90_range_both": (lambda m, x: m.rot90(x(z((2, 2))), 1, [5, 5]), None),
        "repeat_interleave_negative": (lambda m, x: m.repeat_interleave(x(z((2, 3))), -1),
                                       None),
        "repeat_interleave_counts_size": (lambda m, x: m.repeat_interleave(
            x(z((3, 2))), x(np.array([1, 2])), dim=0), None),
        "repeat_interleave_counts_negative": (lambda m, x: m.repeat_interleave(
            x(z((3, 2))), x(np.array([1, -2, 1])), dim=0), None),
        "repeat_interleave_counts_2d": (lambda m, x: m.repeat_interleave(
            x(z((3, 2))), x(np.array([[1, 2, 1]])), dim=0), None),
        "repeat_interleave_counts_float": (lambda m, x: m.repeat_interleave(
            x(z((3, 2))), x(np.array([1.0, 2.0, 1.0])), dim=0), None),
        "repeat_interleave_output_size": (lambda m, x: m.repeat_interleave(
            x(z((3, 2))), 2, dim=0, output_size=5), None),
        "repeat_interleave_counts_output_size": (lambda m, x: m.repeat_interleave(
            x(z((3, 2))), x(np.array([1, 2, 1])), dim=0, output_size=5), None),
        "repeat_interleave_dim": (lambda m, x: m.repeat_interleave(x(z((3, 2))), 2, dim=2),
                                  None),
        "tensor_split_zero": (lambda m, x: m.tensor_split(x(z((3, 2))), 0), None),
        "tensor_split_0d": (lambda m, x: m.tensor_split(x(z(())), 2), None),
        "tensor_split_2d_tensor": (lambda m, x: m.tensor_split(x(z((3, 2))),
                                                               x(np.array([[1, 2]]))), None),
        "tensor_split_float_tensor": (lambda m, x: m.tensor_split(x(z((3, 2))),
                                                                  x(np.array([1.0]))), None),
        "diff_0d": (lambda m, x: m.diff(x(z(()))), None),
        "diff_negative": (lambda m, x: m.diff(x(z(3)), -1), None),
        "diff_prepend_ndim": (lambda m, x: m.diff(x(z((3, 4))), prepend=x(z(3))), None),
        "diff_prepend_shape": (lambda m, x: m.diff(x(z((3, 4))), prepend=x(z((2, 1)))), None),
        "diff_append_number": (lambda m, x: m.diff(x(z((3, 4))), append=1), None),
    }
    return cases, a, t


ERRORS, _AG_TENSOR, _TORCH_TENSOR = _errors()


@pytest.mark.parametrize("name", ERRORS)
def test_error_matches_torch(name):
    from aiograd._ops import structure

    op, _ = ERRORS[name]
    with pytest.raises(Exception) as theirs:
        op(torch, _TORCH_TENSOR)
    with pytest.raises(Exception) as ours:
        op(_Namespace(structure, ag), _AG_TENSOR)
    assert ours.type is theirs.type
    ours_text, theirs_text = str(ours.value), str(theirs.value)
    if ours.type is not TypeError:  # TypeError texts are Python's or the binding's
        assert theirs_text.startswith(ours_text), (ours_text, theirs_text)
