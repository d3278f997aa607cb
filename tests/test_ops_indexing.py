"""Indexing ``t[idx]`` and ``t[idx] = v``: gradcheck sweeps, PyTorch as oracle, views, errors."""

from __future__ import annotations

import numpy as np
import oracles
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(a):
    return ag.tensor(np.array(a, dtype=np.float64), requires_grad=True)


# How an index array is given to aiograd: a list, a NumPy array or an aiograd tensor.
KINDS = {"list": list, "numpy": np.array, "tensor": ag.tensor}

# Each case: (input shape, index(mk)), where mk turns a nested list into an index array.
INDEX_CASES = {
    "int": ((3, 4), lambda mk: 1),
    "negative_int": ((3, 4), lambda mk: -1),
    "all_ints": ((3, 4), lambda mk: (0, 2)),
    "slice": ((3, 4), lambda mk: slice(1, None)),
    "full_slice_then_int": ((3, 4), lambda mk: (slice(None), 1)),
    "slice_step": ((3, 4), lambda mk: (slice(None), slice(None, None, 2))),
    "negative_step_free_slice": ((3, 4), lambda mk: (slice(-2, None), slice(1, 3))),
    "none": ((3, 4), lambda mk: (None, 0)),
    "none_last": ((3, 4), lambda mk: (0, None)),
    "ellipsis": ((2, 3, 2), lambda mk: (Ellipsis, 1)),
    "ellipsis_only": ((3, 4), lambda mk: Ellipsis),
    "empty_tuple": ((3, 4), lambda mk: ()),
    "mixed_basic": ((3, 4), lambda mk: (1, None, slice(0, 3))),
    "int_list": ((3, 4), lambda mk: mk([2, 0])),
    "repeated": ((3, 4), lambda mk: mk([1, 1, 1, 0])),
    "int_array_2d": ((3, 4), lambda mk: mk([[0, 1], [2, 2]])),
    "bool_mask": ((3, 4), lambda mk: mk([True, False, True])),
    "bool_mask_2d": ((3, 4), lambda mk: mk([[True, False, True, False]] * 2
                                            + [[False, False, True, True]])),
    "slice_and_advanced": ((3, 4), lambda mk: (slice(None), mk([3, 0, 3]))),
    "two_advanced": ((3, 4), lambda mk: (mk([0, 2, 2]), mk([1, 1, 3]))),
    "advanced_separated": ((2, 3, 2), lambda mk: (mk([0, 1, 1]), slice(None), mk([1, 0, 1]))),
    "int_and_advanced": ((3, 4), lambda mk: (1, mk([0, 0, 2]))),
    "bool_mask_and_slice": ((3, 4), lambda mk: (mk([False, True, True]), slice(1, 3))),
}


def torch_mk(torch):
    return lambda values: torch.tensor(values)


def check_against_torch(shape, index_fn, mk, seed=1):
    """Forward, gradient and node name of ``x[index]`` agree with PyTorch."""
    torch = pytest.importorskip("torch")
    a = arr(shape)
    x = leaf(a)
    t = torch.tensor(a, requires_grad=True)
    out, t_out = x[index_fn(mk)], t[index_fn(torch_mk(torch))]
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    assert out.grad_fn.name() == type(t_out.grad_fn).__name__
    v = np.random.default_rng(seed).standard_normal(tuple(t_out.shape))
    (g,) = ag.grad_sync(out * out, [x], ag.tensor(v))
    (tg,) = torch.autograd.grad(t_out * t_out, [t], torch.tensor(v))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_getitem_matches_torch(name, kind):
    shape, index_fn = INDEX_CASES[name]
    check_against_torch(shape, index_fn, KINDS[kind])


@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_getitem_gradcheck(name):
    shape, index_fn = INDEX_CASES[name]
    index = index_fn(np.array)
    assert ag.gradcheck(lambda x: x[index] ** 2, [leaf(arr(shape))])


@pytest.mark.parametrize("name", ["int", "slice_step", "repeated", "bool_mask_2d",
                                  "two_advanced", "advanced_separated"])
def test_getitem_second_order_matches_torch(name):
    torch = pytest.importorskip("torch")
    shape, index_fn = INDEX_CASES[name]
    rng = np.random.default_rng(3)
    a = arr(shape)
    x = leaf(a)
    t = torch.tensor(a, requires_grad=True)
    out, t_out = x[index_fn(np.array)] ** 3, t[index_fn(torch_mk(torch))] ** 3
    v = rng.standard_normal(tuple(t_out.shape))
    w = rng.standard_normal(shape)
    (g,) = ag.grad_sync(out, [x], ag.tensor(v), create_graph=True)
    (tg,) = torch.autograd.grad(t_out, [t], torch.tensor(v), create_graph=True)
    (gg,) = ag.grad_sync(g, [x], ag.tensor(w))
    (tgg,) = torch.autograd.grad(tg, [t], torch.tensor(w))
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_node_is_named_as_pytorch_names_it():
    x = leaf(arr((3, 4)))
    (g,) = ag.grad_sync(x[[0, 0]], [x], ag.ones(2, 4, dtype=ag.float64).requires_grad_(),
                        create_graph=True)
    assert g.grad_fn.name() == "IndexPutImplBackward0"
    (g,) = ag.grad_sync(x[0], [x], ag.ones(4, dtype=ag.float64).requires_grad_(),
                        create_graph=True)
    assert g.grad_fn.name() == "SelectBackwardBackward0"


def test_repeated_indices_accumulate_gradients():
    x = leaf(np.zeros(3))
    (g,) = ag.grad_sync(x[[2, 0, 2, 2]], [x], ag.ones(4, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0, 3.0])


def test_basic_index_result_is_a_view():
    x = leaf(arr((3, 4)))
    v = x[1, ::2]
    assert v._base is x
    assert v._vc is x._vc
    assert np.shares_memory(v.data, x.data)


def test_index_by_ints_gives_a_0d_view_not_a_scalar():
    x = ag.tensor(arr((3, 4)))
    v = x[1, 2]
    assert v.shape == ()
    assert isinstance(v.data, np.ndarray)
    assert v._base is x


def test_advanced_index_result_is_a_copy():
    x = leaf(arr((3, 4)))
    y = x[[0, 1]]
    assert y._base is None
    assert y._vc is not x._vc
    assert not np.shares_memory(y.data, x.data)


def test_changing_an_index_array_after_forward_does_not_change_the_gradient():
    x = leaf(np.zeros(3))
    index = np.array([0, 0])
    y = x[index]
    index[:] = 2
    (g,) = ag.grad_sync(y, [x], ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [2.0, 0.0, 0.0])


def test_empty_list_index_selects_nothing():
    x = leaf(arr((3, 4)))
    y = x[[]]
    assert y.shape == (0, 4)
    (g,) = ag.grad_sync(y, [x], ag.zeros(0, 4, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), np.zeros((3, 4)))


def test_iterating_a_tensor_yields_differentiable_rows():
    x = leaf(arr((3, 2)))
    rows = list(x)
    (g,) = ag.grad_sync(rows[2], [x], ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [[0, 0], [0, 0], [1, 1]])


@pytest.mark.parametrize(
    ("index", "exc", "match"),
    [
        (5, IndexError, "out of bounds"),
        ((0, 0, 0), IndexError, "too many indices"),
        (1.5, IndexError, r"only integers, slices .* are valid indices \(got float\)"),
        ("a", IndexError, "are valid indices"),
        (slice(0.5, 2), IndexError, "slice indices must be integers or None"),
        (np.array([0.5]), IndexError, "must be long, int or bool tensors, got dtype float64"),
        (ag.tensor([1.0]), IndexError, "must be long, int or bool tensors, got dtype float32"),
        (np.array([True, False]), IndexError, "boolean index did not match"),
        ([0, 7], IndexError, "out of bounds"),
    ],
)
def test_getitem_error(index, exc, match):
    x = ag.tensor(arr((3, 4)))
    with pytest.raises(exc, match=match):
        x[index]


def test_index_on_another_device_accepts_host_indices(fake_backend):
    x = ag.tensor(arr((3, 4)), device="fake:2", requires_grad=True)
    y = x[np.array([0, 0]), ag.tensor([1, 3])]
    assert y.device == ag.device("fake:2")
    (g,) = ag.grad_sync(y, [x], ag.ones(2, dtype=ag.float64, device="fake:2"))
    expected = np.zeros((3, 4))
    expected[0, 1] = expected[0, 3] = 1
    np.testing.assert_array_equal(g.cpu().numpy(), expected)


def test_index_tensor_on_another_non_cpu_device_raises(fake_backend):
    x = ag.tensor(arr((3, 4)), device="fake:0")
    with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same"):
        x[ag.tensor([0], device="fake:1")]


# ---- t[idx] = v ----

# Each case: (index(mk), shape of the value); the indexed tensor has shape (3, 4).
SET_CASES = {
    "int": (lambda mk: 1, (4,)),
    "slice": (lambda mk: slice(0, 2), (2, 4)),
    "broadcast_scalar": (lambda mk: (slice(None), 1), ()),
    "broadcast_row": (lambda mk: slice(1, None), (1, 4)),
    "leading_one": (lambda mk: 0, (1, 4)),
    "int_list": (lambda mk: mk([2, 0]), (2, 4)),
    "bool_mask": (lambda mk: mk([True, False, True]), (4,)),
    "two_advanced": (lambda mk: (mk([0, 2]), mk([1, 3])), (2,)),
    "element": (lambda mk: (2, 3), ()),
}


def _set(x, v, index):
    y = x * 2
    y[index] = v * 3
    return y


@pytest.mark.parametrize("name", sorted(SET_CASES))
def test_setitem_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    index_fn, vshape = SET_CASES[name]
    a, b = arr((3, 4)), arr(vshape, seed=1)
    x, v = leaf(a), leaf(b)
    t, tv = (torch.tensor(z, requires_grad=True) for z in (a, b))
    out, t_out = _set(x, v, index_fn(np.array)), _set(t, tv, index_fn(torch_mk(torch)))
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    assert out.grad_fn.name() == type(t_out.grad_fn).__name__
    w = np.random.default_rng(2).standard_normal((3, 4))
    grads = ag.grad_sync(out * out, [x, v], ag.tensor(w))
    t_grads = torch.autograd.grad(t_out * t_out, [t, tv], torch.tensor(w))
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(SET_CASES))
def test_setitem_gradcheck(name):
    index_fn, vshape = SET_CASES[name]
    index = index_fn(np.array)
    inputs = [leaf(arr((3, 4))), leaf(arr(vshape, seed=1))]
    assert ag.gradcheck(lambda x, v: _set(x, v, index) ** 2, inputs)


@pytest.mark.parametrize("name", ["slice", "two_advanced"])
def test_setitem_second_order_matches_torch(name):
    torch = pytest.importorskip("torch")
    index_fn, vshape = SET_CASES[name]
    rng = np.random.default_rng(4)
    a, b = arr((3, 4)), arr(vshape, seed=1)
    x, v = leaf(a), leaf(b)
    t, tv = (torch.tensor(z, requires_grad=True) for z in (a, b))
    out = _set(x, v, index_fn(np.array)) ** 3
    t_out = _set(t, tv, index_fn(torch_mk(torch))) ** 3
    w = rng.standard_normal((3, 4))
    gx, gv = ag.grad_sync(out, [x, v], ag.tensor(w), create_graph=True)
    tgx, tgv = torch.autograd.grad(t_out, [t, tv], torch.tensor(w), create_graph=True)
    seconds = ag.grad_sync((gx * gx).sum() + (gv * gv).sum(), [x, v])
    t_seconds = torch.autograd.grad((tgx * tgx).sum() + (tgv * tgv).sum(), [t, tv])
    for g, tg in zip(seconds, t_seconds):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


def test_setitem_number_sends_gradient_only_to_the_old_value():
    x = leaf(np.ones(3))
    y = x * 1
    y[1] = 5.0
    assert len(y.grad_fn.next_functions) == 1
    (g,) = ag.grad_sync(y, [x], ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 5.0, 1.0])


def test_setitem_list_value_is_converted():
    y = ag.zeros(3)
    y[[0, 2]] = [1.0, 2.0]
    np.testing.assert_array_equal(y.numpy(), [1.0, 0.0, 2.0])


def test_setitem_makes_a_tensor_without_grad_require_grad():
    v = leaf(np.array(2.0))
    y = ag.zeros(3, dtype=ag.float64)
    y[0] = v
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.next_functions[0] == (None, 0)
    (g,) = ag.grad_sync(y, [v], ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64))
    assert g.item() == 1.0


def test_setitem_bumps_the_version_counter():
    y = ag.zeros(3)
    y[0] = 1.0
    y[[1]] = 2.0
    assert y._version == 2


def test_setitem_on_a_tensor_saved_for_backward_makes_backward_raise():
    x = leaf(np.ones(3))
    w = leaf(np.ones(3))
    y = x * 1
    z = y * w  # saves y for w's gradient
    y[0] = 3.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(z, [w], ag.ones(3, dtype=ag.float64))


def test_setitem_on_a_leaf_requiring_grad_raises():
    x = leaf(np.ones(3))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation."):
        x[0] = 2.0


def test_setitem_on_a_leaf_requiring_grad_is_allowed_without_grad_mode():
    x = leaf(np.ones(3))
    with ag.no_grad():
        x[0] = 2.0
    assert x.is_leaf
    assert x._version == 1
    np.testing.assert_array_equal(x.detach().numpy(), [2.0, 1.0, 1.0])


def test_setitem_on_a_view_with_grad_matches_torch():
    # Note [In-place writes to views]: the base's history becomes CopySlices.
    def run(x, w):
        y = x * 1
        row = y[0]
        row[1] = 5.0
        row[::2] = w
        return y * x

    oracles.check_against_torch(run, run, np.ones((2, 3)), np.array([2.0, 3.0]))


def test_setitem_on_a_view_without_grad_writes_through_to_the_base():
    base = ag.zeros(2, 3)
    row = base[1]
    row[2] = 7.0
    assert base._version == 1
    assert base.numpy()[1, 2] == 7.0


def test_setitem_shape_mismatch_raises():
    y = ag.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value of shape \[3\]"):
        y[0] = ag.ones(3)


def test_setitem_value_on_another_device_raises(fake_backend):
    y = ag.zeros(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        y[0] = ag.ones((), device="fake:0")


@pytest.mark.anyio
async def test_setitem_gradient_through_awaited_backward():
    x = leaf(np.arange(4.0))
    v = leaf(np.array([10.0, 20.0]))
    y = x * x
    y[1:3] = v
    await y.backward(ag.ones(4, dtype=ag.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0, 6.0])
    np.testing.assert_array_equal(v.grad.numpy(), [1.0, 1.0])
