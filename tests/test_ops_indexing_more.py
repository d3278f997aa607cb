"""More indexing: ints mixed with advanced indices (PyTorch's order of dims), 0-d integer
tensors as ints, writes into integer tensors, and gather, index_select, masked_fill,
masked_fill_ and nonzero. PyTorch is the oracle; gradcheck on float64."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

# The names the tests spell as PyTorch's: `lib` is torch or this namespace.
AG = SimpleNamespace(tensor=ag.tensor, bool=ag.bool_, int64=ag.int64)


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(a):
    return ag.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def libs():
    torch = pytest.importorskip("torch")
    return torch, AG


def chain(t):
    """The names of the nodes along the first next edges from ``t.grad_fn``."""
    names = []
    fn = t.grad_fn
    while fn is not None:
        names.append(fn.name() if isinstance(t, ag.Tensor) else type(fn).__name__)
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return names


def check_against_torch(fn, *arrays, seed=1, depth=1):
    """``fn(lib, *tensors)`` agrees with PyTorch: values, the names of the first ``depth``
    nodes along the first next edges, the first-order gradients (create_graph) and the
    second-order ones.

    A basic index records one node, named after its last step, where PyTorch records
    one per step: ``depth`` 2 compares the node before an advanced index with the last
    basic step's.
    """
    torch, ag_lib = libs()
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out, t_out = fn(ag_lib, *xs), fn(torch, *ts)
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    assert chain(out)[:depth] == chain(t_out)[:depth]
    w = np.random.default_rng(seed).standard_normal(tuple(t_out.shape))
    grads = ag.grad_sync((out * out * ag.tensor(w)).sum(), xs, create_graph=True)
    t_grads = torch.autograd.grad((t_out * t_out * torch.tensor(w)).sum(), ts, create_graph=True)
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    seconds = ag.grad_sync(sum((g * g * g).sum() for g in grads), xs)
    t_seconds = torch.autograd.grad(sum((g * g * g).sum() for g in t_grads), ts)
    for g, tg in zip(seconds, t_seconds):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


def check_error(fn, *arrays):
    """``fn(lib, *tensors)`` raises the same exception type and message in both libraries."""
    torch, ag_lib = libs()
    with pytest.raises(Exception) as t_exc:  # noqa: PT011  (compared below)
        fn(torch, *(torch.tensor(a) for a in arrays))
    with pytest.raises(type(t_exc.value)) as exc:
        fn(ag_lib, *(ag.tensor(a) for a in arrays))
    assert str(exc.value) == str(t_exc.value)


# ---- ints with advanced indices: PyTorch's order of dims ----

# Each case: index(lib) for a (2, 3, 4) tensor.
INT_AND_ADVANCED = {
    "int_slice_list": lambda lib: (0, slice(None), [1, 3]),
    "int_ellipsis_list": lambda lib: (1, Ellipsis, [0, 2]),
    "list_int_list": lambda lib: ([1, 0, 1], 0, [0, 2, 3]),
    "int_list": lambda lib: (0, [2, 0]),
    "slice_int_list": lambda lib: (slice(1, None), 0, [0, 1]),
    "none_int_slice_list": lambda lib: (None, 0, slice(None), [1, 2]),
    "int_none_list": lambda lib: (0, None, [1, 2]),
    "int_mask": lambda lib: (1, lib.tensor([True, False, True])),
    "list_slice_int": lambda lib: ([1, 0], slice(None), 2),
    "int_tensor_2d": lambda lib: (1, slice(None, None, 2), lib.tensor([[0, 3], [3, 1]])),
    "0d_tensor_slice_list": lambda lib: (lib.tensor(1), slice(None), [0, 1]),
}


@pytest.mark.parametrize("case", sorted(INT_AND_ADVANCED))
def test_int_and_advanced_index_matches_torch(case):
    index = INT_AND_ADVANCED[case]
    check_against_torch(lambda lib, x: x[index(lib)], arr((2, 3, 4)), depth=2)


def test_int_and_advanced_index_shape_is_torchs_not_numpys():
    x = ag.tensor(np.arange(24.0).reshape(2, 3, 4))
    assert x[0, :, [1, 3]].shape == (3, 2)
    np.testing.assert_array_equal(x[0, :, [1, 3]].numpy(), x.numpy()[0][:, [1, 3]])
    assert x[1, ..., [0, 2]].shape == (3, 2)
    assert x[0, None, [1, 2]].shape == (1, 2, 4)


@pytest.mark.parametrize("case", sorted(INT_AND_ADVANCED))
def test_gradcheck_int_and_advanced_index(case):
    index = INT_AND_ADVANCED[case](AG)
    assert ag.gradcheck(lambda x: x[index] ** 2, [leaf(arr((2, 3, 4)))])


# Each case: (index(lib), value shape) for a (2, 3, 4) tensor.
SET_INT_AND_ADVANCED = {
    "int_slice_list": (lambda lib: (0, slice(None), [0, 1, 2]), (3, 3)),
    "int_ellipsis_list": (lambda lib: (1, Ellipsis, [0, 2]), (3, 2)),
    "broadcast_value": (lambda lib: (0, slice(None), [1, 3]), (2,)),
    "list_slice_int": (lambda lib: ([1, 0], slice(None), 2), (2, 3)),
    "0d_tensor_list": (lambda lib: (lib.tensor(1), [2, 0]), (2, 4)),
}


def _set(x, v, index):
    y = x * 2
    y[index] = v * v
    return y


@pytest.mark.parametrize("case", sorted(SET_INT_AND_ADVANCED))
def test_setitem_int_and_advanced_matches_torch(case):
    index, vshape = SET_INT_AND_ADVANCED[case]
    check_against_torch(lambda lib, x, v: _set(x, v, index(lib)), arr((2, 3, 4)),
                        arr(vshape, seed=2), depth=2)


@pytest.mark.parametrize("case", sorted(SET_INT_AND_ADVANCED))
def test_gradcheck_setitem_int_and_advanced(case):
    index, vshape = SET_INT_AND_ADVANCED[case]
    index = index(AG)
    inputs = [leaf(arr((2, 3, 4))), leaf(arr(vshape, seed=2))]
    assert ag.gradcheck(lambda x, v: _set(x, v, index) ** 2, inputs)


def test_setitem_int_and_advanced_without_grad_writes_torchs_positions():
    torch, _ = libs()
    v = np.arange(9.0).reshape(3, 3)
    z, tz = ag.zeros(2, 3, 4, dtype=ag.float64), torch.zeros(2, 3, 4, dtype=torch.float64)
    z[0, :, [0, 1, 2]] = ag.tensor(v)
    tz[0, :, [0, 1, 2]] = torch.tensor(v)
    np.testing.assert_array_equal(z.numpy(), tz.numpy())
    assert z._version == 1


# ---- a 0-d integer tensor is an int ----

def test_0d_int_tensor_index_is_a_select_view():
    x = leaf(arr((3, 4)))
    y = x[ag.tensor(1)]
    assert y.grad_fn.name() == "SelectBackward0"
    assert y._base is x and np.shares_memory(y.data, x.data)
    assert x[ag.tensor(1, dtype=ag.int32), ag.tensor(2)].shape == ()


@pytest.mark.parametrize(
    "index",
    [
        lambda lib: lib.tensor(1),
        lambda lib: (lib.tensor(-1), 2),
        lambda lib: (slice(None), lib.tensor(2)),
        lambda lib: lib.tensor(True),
        lambda lib: lib.tensor(False),
    ],
)
def test_0d_tensor_index_matches_torch(index):
    check_against_torch(lambda lib, x: x[index(lib)], arr((3, 4)))


def test_0d_int_tensor_setitem_writes_through_a_view():
    torch, _ = libs()
    x, v = leaf(arr((3, 4))), leaf(arr((4,), seed=3))
    y = _set(x, v, ag.tensor(2))
    ty = _set(torch.tensor(x.detach().numpy(), requires_grad=True),
              torch.tensor(v.detach().numpy(), requires_grad=True), torch.tensor(2))
    assert y.grad_fn.name() == type(ty.grad_fn).__name__ == "CopySlices"
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())


# ---- writes into integer and bool tensors record nothing ----

@pytest.mark.parametrize("dtype", ["int64", "bool"])
@pytest.mark.parametrize(
    "write",
    [
        lambda a, v: a.__setitem__(slice(0, 1), v),
        lambda a, v: a.__setitem__(0, v[0]),
        lambda a, v: a.__setitem__(Ellipsis, v),
        lambda a, v: a.copy_(v),
    ],
)
def test_writing_a_float_that_requires_grad_into_an_integer_tensor_records_nothing(dtype,
                                                                                    write):
    torch, _ = libs()
    a = ag.zeros(2, dtype=getattr(AG, dtype))
    ta = torch.zeros(2, dtype=getattr(torch, dtype))
    write(a, ag.tensor([2.7], requires_grad=True))
    write(ta, torch.tensor([2.7], requires_grad=True))
    assert a.requires_grad is ta.requires_grad is False
    assert a.grad_fn is None and a.is_leaf
    np.testing.assert_array_equal(a.numpy(), ta.numpy())


# ---- gather ----

GATHER_CASES = {
    "dim1": ((3, 4), 1, [[0, 0], [1, 0], [3, 3]]),
    "dim0": ((3, 4), 0, [[2, 1, 0, 0]]),
    "negative_dim": ((3, 4), -1, [[3], [2], [1]]),
    "repeated": ((2, 3), 1, [[1, 1, 1, 1], [0, 2, 0, 2]]),
    "3d": ((2, 3, 2), 1, [[[2, 0], [1, 1]], [[0, 0], [2, 1]]]),
    "0d": ((), 0, 0),
    "vector_from_0d_index": ((4,), 0, 2),
}


@pytest.mark.parametrize("case", sorted(GATHER_CASES))
def test_gather_matches_torch(case):
    shape, dim, index = GATHER_CASES[case]
    check_against_torch(lambda lib, x: x.gather(dim, lib.tensor(index)), arr(shape))


@pytest.mark.parametrize("case", sorted(GATHER_CASES))
def test_gradcheck_gather(case):
    shape, dim, index = GATHER_CASES[case]
    index = ag.tensor(index)
    assert ag.gradcheck(lambda x: x.gather(dim, index) ** 2, [leaf(arr(shape))])


def test_gather_gradient_node_is_scatter_add():
    x = leaf(arr((3, 4)))
    (g,) = ag.grad_sync(x.gather(1, ag.tensor([[0, 0]] * 3)), [x],
                        ag.ones(3, 2, dtype=ag.float64).requires_grad_(), create_graph=True)
    assert g.grad_fn.name() == "ScatterAddBackward0"
    np.testing.assert_array_equal(g.detach().numpy(), [[2, 0, 0, 0]] * 3)


def test_gather_accepts_int32_index_and_keeps_its_own_copy():
    x = leaf(np.arange(4.0))
    index = ag.tensor([1, 1], dtype=ag.int32)
    y = x.gather(0, index)
    index.data[:] = 3
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 1.0])
    (g,) = ag.grad_sync(y, [x], ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [0.0, 2.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: x.gather(1, lib.tensor([0])),
        lambda lib, x: x.gather(0, lib.tensor([[0, 1, 2, 3, 0]])),
        lambda lib, x: x.gather(1, lib.tensor([[4]])),
        lambda lib, x: x.gather(1, lib.tensor([[-1]])),
        lambda lib, x: x.gather(1, lib.tensor([[0.0]])),
        lambda lib, x: x.gather(2, lib.tensor([[0]])),
        lambda lib, x: x.gather(1, [[0]]),
    ],
)
def test_gather_errors_match_torch(fn):
    check_error(fn, arr((3, 4)))


# ---- index_select ----

INDEX_SELECT_CASES = {
    "dim0": ((3, 4), 0, [2, 0, 2]),
    "dim1": ((3, 4), 1, [3]),
    "negative_dim": ((2, 3, 2), -2, [1, 1, 0, 2]),
    "empty": ((3, 4), 0, np.zeros(0, dtype=np.int64)),
    "0d_index": ((3, 4), 1, 2),
    "0d_input": ((), 0, [0]),
}


@pytest.mark.parametrize("case", sorted(INDEX_SELECT_CASES))
def test_index_select_matches_torch(case):
    shape, dim, index = INDEX_SELECT_CASES[case]
    check_against_torch(lambda lib, x: x.index_select(dim, lib.tensor(index)), arr(shape))


@pytest.mark.parametrize("case", sorted(INDEX_SELECT_CASES))
def test_gradcheck_index_select(case):
    shape, dim, index = INDEX_SELECT_CASES[case]
    index = ag.tensor(index)
    assert ag.gradcheck(lambda x: x.index_select(dim, index) ** 2, [leaf(arr(shape))])


def test_index_select_gradient_node_is_index_add():
    x = leaf(arr((3, 4)))
    (g,) = ag.grad_sync(x.index_select(0, ag.tensor([1, 1])), [x],
                        ag.ones(2, 4, dtype=ag.float64).requires_grad_(), create_graph=True)
    assert g.grad_fn.name() == "IndexAddBackward0"
    np.testing.assert_array_equal(g.detach().numpy()[1], [2.0] * 4)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: x.index_select(0, lib.tensor([[0]])),
        lambda lib, x: x.index_select(0, lib.tensor([1.0])),
        lambda lib, x: x.index_select(0, lib.tensor([True])),
        lambda lib, x: x.index_select(0, lib.tensor([3])),
        lambda lib, x: x.index_select(0, lib.tensor([-1])),
        lambda lib, x: x.index_select(0, [1]),
        lambda lib, x: x[0, 0].index_select(0, lib.tensor([0, 0])),
    ],
)
def test_index_select_errors_match_torch(fn):
    check_error(fn, arr((3, 4)))


# ---- masked_fill / masked_fill_ ----

MASK = [[True, False, False, True], [False, False, True, False], [True, True, False, False]]

MASKED_FILL_CASES = {
    "number": lambda lib, x: x.masked_fill(lib.tensor(MASK), 1.5),
    "int_number": lambda lib, x: x.masked_fill(lib.tensor(MASK), 2),
    "broadcast_mask": lambda lib, x: x.masked_fill(lib.tensor([True, False, True, False]), 0.0),
    "0d_tensor_value": lambda lib, x: x.masked_fill(lib.tensor(MASK), lib.tensor(-3.0)),
    "mask_broadcasts_self": lambda lib, x: x[0].masked_fill(lib.tensor(MASK), 1.0),
    "keyword_arguments": lambda lib, x: x.masked_fill(mask=x > 0, value=0.0),
}


@pytest.mark.parametrize("case", sorted(MASKED_FILL_CASES))
def test_masked_fill_matches_torch(case):
    check_against_torch(MASKED_FILL_CASES[case], arr((3, 4)))


def test_masked_fill_value_tensor_that_requires_grad_matches_torch():
    check_against_torch(lambda lib, x, v: x.masked_fill(lib.tensor(MASK), v * v),
                        arr((3, 4)), arr((), seed=4))


def test_gradcheck_masked_fill():
    mask = ag.tensor(MASK)
    inputs = [leaf(arr((3, 4))), leaf(arr((), seed=4))]
    assert ag.gradcheck(lambda x, v: x.masked_fill(mask, v) ** 2, inputs)
    assert ag.gradcheck(lambda x: x[:1].masked_fill(mask, 2.0) ** 2, [leaf(arr((3, 4)))])


def test_masked_fill_keeps_its_own_copy_of_the_mask():
    x = leaf(np.ones(3))
    mask = ag.tensor([True, False, False])
    y = x.masked_fill(mask, 0.0)
    mask.data[:] = True
    (g,) = ag.grad_sync(y, [x], ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 1.0])


def test_masked_fill_of_an_integer_tensor_casts_the_value():
    torch, _ = libs()
    for lib in (torch, AG):
        out = lib.tensor([0, 1]).masked_fill(lib.tensor([True, False]), 3.7)
        assert out.tolist() == [3, 1]


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: x.masked_fill(lib.tensor(MASK) * 1.0, 0),
        lambda lib, x: x.masked_fill(lib.tensor([[True], [False]]), 0),
        lambda lib, x: x.masked_fill(lib.tensor(MASK), lib.tensor([1.0])),
        lambda lib, x: x[0].masked_fill_(lib.tensor(MASK), 1.0),
    ],
)
def test_masked_fill_errors_match_torch(fn):
    check_error(fn, arr((3, 4)))


def _fill_in_place(lib, x, v):
    y = x * 1
    y.masked_fill_(lib.tensor(MASK), v * v)
    z = y[1:]
    z.masked_fill_(lib.tensor([True, True, False, False]), 5.0)
    return y


def test_masked_fill_in_place_matches_torch():
    check_against_torch(_fill_in_place, arr((3, 4)), arr((), seed=4))


def test_masked_fill_in_place_returns_the_tensor_and_bumps_its_version():
    y = ag.zeros(3)
    assert y.masked_fill_(ag.tensor([False, True, False]), 2.0) is y
    assert y._version == 1
    np.testing.assert_array_equal(y.numpy(), [0.0, 2.0, 0.0])


def test_masked_fill_in_place_on_a_leaf_that_requires_grad_raises():
    x = leaf(np.ones(3))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.masked_fill_(ag.tensor([True, False, False]), 0.0)


def test_gradcheck_masked_fill_in_place():
    assert ag.gradcheck(lambda x, v: _fill_in_place(AG, x, v) ** 2,
                        [leaf(arr((3, 4))), leaf(arr((), seed=4))])


# ---- nonzero ----

@pytest.mark.parametrize(
    "values",
    [
        [[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]],
        [0, 3, 0, 0, 7],
        [[True, False], [True, True]],
        0.0,
        2.0,
        np.zeros((2, 0)),
    ],
)
def test_nonzero_matches_torch(values):
    torch, _ = libs()
    x = ag.tensor(values, requires_grad=False)
    t = torch.tensor(values)
    out, t_out = x.nonzero(), t.nonzero()
    assert out.dtype == ag.int64 and out.shape == tuple(t_out.shape)
    np.testing.assert_array_equal(out.numpy(), t_out.numpy())
    parts, t_parts = x.nonzero(as_tuple=True), t.nonzero(as_tuple=True)
    assert len(parts) == len(t_parts)
    for p, tp in zip(parts, t_parts):
        assert p.dtype == ag.int64
        np.testing.assert_array_equal(p.numpy(), tp.numpy())


def test_nonzero_of_a_tensor_that_requires_grad_records_nothing():
    out = leaf([0.0, 1.0]).nonzero()
    assert not out.requires_grad and out.grad_fn is None


# ---- another device ----

def test_new_indexing_ops_stay_on_the_tensors_device(fake_backend):
    dev = "fake:1"
    a = arr((3, 4))
    x = ag.tensor(a, device=dev, requires_grad=True)
    mask = ag.tensor(np.array(MASK), device=dev)
    outs = [
        x.gather(1, ag.tensor([[0, 0], [1, 3], [2, 2]], device=dev)),
        x.index_select(0, ag.tensor([2, 2], device=dev)),
        x.masked_fill(mask, 0.5),
        x[0, :, None][[1, 1]],
        x[ag.tensor(1)],
    ]
    for out in outs:
        assert out.device == ag.device(dev)
    loss = sum((out * out).sum() for out in outs)
    (g,) = ag.grad_sync(loss, [x])
    assert g.device == ag.device(dev)
    expected = 2 * a * (np.array([[2, 0, 0, 0], [0, 1, 0, 1], [0, 0, 2, 0]])
                        + np.where(np.array(MASK), 0, 1))
    expected[2] += 4 * a[2]
    expected[0, 1] += 4 * a[0, 1]
    expected[1] += 2 * a[1]
    np.testing.assert_allclose(g.cpu().numpy(), expected, rtol=1e-12)
    nz = mask.nonzero()
    assert nz.device == ag.device(dev) and nz.shape == (5, 2)
