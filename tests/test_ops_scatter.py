"""scatter, scatter_add, index_add, index_copy, index_fill, masked_select, masked_scatter and
take, with their in-place forms: values, node names, gradients of first and second order and
errors against PyTorch; gradcheck on float64."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pytest
from oracles import arr, check_against_torch, check_on_fake_device, check_second_order, leaf

import aiograd as ag
import aiograd._ops.scatter  # noqa: F401  (binds the Tensor methods)
from aiograd._ops.scatter import (
    index_add,
    index_add_,
    index_copy,
    index_copy_,
    index_fill,
    index_fill_,
    masked_scatter,
    masked_scatter_,
    masked_select,
    scatter,
    scatter_,
    scatter_add,
    scatter_add_,
    take,
)

pytestmark = pytest.mark.timeout(60)

# The names the cases spell as PyTorch's: `lib` is torch or this namespace.
AG = SimpleNamespace(tensor=ag.tensor, zeros=ag.zeros, bool=ag.bool_, int8=ag.int8,
                     int32=ag.int32, int64=ag.int64, float32=ag.float32, float64=ag.float64)


def torch_or_skip():
    return pytest.importorskip("torch")


def node_name(t):
    """The name of t's grad_fn (torch's type name: its ``name()`` prefixes CopySlices)."""
    fn = t.grad_fn
    if fn is None:
        return None
    return fn.name() if isinstance(t, ag.Tensor) else type(fn).__name__


def on(lib):
    """``lib``'s namespace as the cases use it."""
    return AG if lib is ag else lib


# A permutation-based index: distinct positions along dim 1 for every (i, k) (scatter with
# repeated positions is nondeterministic in PyTorch).
DISTINCT_3D = [[[2, 0, 1], [0, 1, 2]], [[1, 2, 0], [2, 0, 1]]]
MASK = [[True, False, True, True], [False, False, True, False], [True, True, False, False]]

# Each case: (fn(lib, *tensors), input shapes). All inputs are float leaves.
CASES = {
    # scatter with a src tensor (ScatterBackward0)
    "scatter_dim1": (lambda L, x, s: x.scatter(1, L.tensor([[0, 1], [2, 3]]), s),
                     [(3, 4), (2, 2)]),
    "scatter_dim0_negative": (lambda L, x, s: x.scatter(-2, L.tensor([[2, 0, 1, 0]]), s),
                              [(3, 4), (1, 4)]),
    "scatter_3d": (lambda L, x, s: x.scatter(1, L.tensor(DISTINCT_3D), s),
                   [(2, 3, 3), (2, 2, 3)]),
    "scatter_int32_index": (
        lambda L, x, s: x.scatter(1, L.tensor([[3], [0]], dtype=L.int32), s), [(2, 4), (2, 1)]),
    "scatter_0d": (lambda L, x, s: x.scatter(0, L.tensor(0), s), [(), ()]),
    "scatter_1d_from_0d_index": (lambda L, x, s: x.scatter(0, L.tensor(2), s), [(4,), ()]),
    "scatter_src_keyword": (lambda L, x, s: x.scatter(1, L.tensor([[1]]), src=s),
                            [(2, 2), (1, 1)]),
    "scatter_empty_index": (lambda L, x: x.scatter(1, L.zeros(0, 0, dtype=L.int64), 1.0),
                            [(2, 3)]),
    "scatter_add_empty_self": (
        lambda L, x, s: x.scatter_add(1, L.zeros(0, 3, dtype=L.int64), s), [(0, 3), (0, 3)]),
    # scatter with a number (ScatterBackward1)
    "scatter_value": (lambda L, x: x.scatter(1, L.tensor([[0, 1], [2, 0]]), 2.5), [(3, 4)]),
    "scatter_value_keyword": (lambda L, x: x.scatter(-1, L.tensor([[3]]), value=-1.0),
                              [(2, 4)]),
    "scatter_value_repeated": (lambda L, x: x.scatter(0, L.tensor([[1, 1], [1, 0]]), 0.0),
                               [(2, 3)]),
    "scatter_value_0d": (lambda L, x: x.scatter(0, L.tensor(0), 7), [()]),
    "scatter_value_0d_tensor": (lambda L, x: x.scatter(0, L.tensor([1]), value=L.tensor(2.0)),
                                [(3,)]),
    # scatter_add: repeated positions accumulate
    "scatter_add_repeated": (
        lambda L, x, s: x.scatter_add(1, L.tensor([[0, 0, 3], [1, 1, 1]]), s), [(2, 4), (2, 3)]),
    "scatter_add_dim0_negative": (
        lambda L, x, s: x.scatter_add(-2, L.tensor([[2, 2, 0], [2, 0, 0]]), s),
        [(3, 4), (2, 3)]),
    "scatter_add_3d": (lambda L, x, s: x.scatter_add(2, L.tensor([[[0, 0]], [[1, 0]]]), s),
                       [(2, 3, 2), (2, 1, 2)]),
    "scatter_add_0d": (lambda L, x, s: x.scatter_add(0, L.tensor(0), s), [(), ()]),
    # index_add
    "index_add_dim0": (lambda L, x, s: x.index_add(0, L.tensor([2, 0]), s), [(3, 4), (2, 4)]),
    "index_add_repeated_alpha": (
        lambda L, x, s: x.index_add(1, L.tensor([0, 3, 0]), s, alpha=-0.5), [(2, 4), (2, 3)]),
    "index_add_negative_dim_int32": (
        lambda L, x, s: x.index_add(-1, L.tensor([1, 1], dtype=L.int32), s, alpha=2),
        [(2, 3, 2), (2, 3, 2)]),
    "index_add_0d_index": (lambda L, x, s: x.index_add(0, L.tensor(1), s), [(3, 2), (1, 2)]),
    "index_add_0d": (lambda L, x, s: x.index_add(0, L.tensor([0]), s), [(), ()]),
    "index_add_empty_index": (lambda L, x, s: x.index_add(0, L.zeros(0, dtype=L.int64), s),
                              [(2, 3), (0, 3)]),
    # index_copy
    "index_copy_dim0": (lambda L, x, s: x.index_copy(0, L.tensor([2, 0]), s),
                        [(3, 4), (2, 4)]),
    "index_copy_negative_dim": (lambda L, x, s: x.index_copy(-1, L.tensor([3, 1]), s),
                                [(2, 3, 4), (2, 3, 2)]),
    "index_copy_0d_source": (lambda L, x, s: x.index_copy(0, L.tensor(1), s), [(4,), ()]),
    "index_copy_0d": (lambda L, x, s: x.index_copy(0, L.tensor([0]), s), [(), (1,)]),
    # index_fill
    "index_fill_number": (lambda L, x: x.index_fill(1, L.tensor([1, 3]), 2.0), [(3, 4)]),
    "index_fill_negative_repeated": (
        lambda L, x: x.index_fill(0, L.tensor([-1, 2, 0]), -3), [(3, 2)]),
    "index_fill_0d_self": (lambda L, x: x.index_fill(0, L.tensor([0, 0]), 1.0), [()]),
    "index_fill_tensor_value": (
        lambda L, x, v: x.index_fill(1, L.tensor([1, 1, 3]), v * v), [(3, 4), ()]),
    "index_fill_tensor_value_0d_index": (
        lambda L, x, v: x.index_fill(-1, L.tensor(0), v), [(2, 3), ()]),
    "index_fill_empty_index": (lambda L, x: x.index_fill(0, L.zeros(0, dtype=L.int64), 1.0),
                               [(2, 3)]),
    # masked_select
    "masked_select": (lambda L, x: x.masked_select(L.tensor(MASK)), [(3, 4)]),
    "masked_select_mask_broadcasts": (
        lambda L, x: x.masked_select(L.tensor([True, False, False, True])), [(3, 4)]),
    "masked_select_self_broadcasts": (lambda L, x: x.masked_select(L.tensor(MASK)), [(1, 4)]),
    "masked_select_none": (lambda L, x: x.masked_select(L.tensor([False, False])), [(2,)]),
    "masked_select_0d": (lambda L, x: x.masked_select(L.tensor(True)), [()]),
    # masked_scatter
    "masked_scatter": (lambda L, x, s: x.masked_scatter(L.tensor(MASK), s), [(3, 4), (3, 4)]),
    "masked_scatter_mask_broadcasts": (
        lambda L, x, s: x.masked_scatter(L.tensor([False, True, True, False]), s),
        [(3, 4), (7,)]),
    "masked_scatter_self_broadcasts": (
        lambda L, x, s: x.masked_scatter(L.tensor(MASK), s), [(4,), (2, 3)]),
    "masked_scatter_exact_source": (
        lambda L, x, s: x.masked_scatter(L.tensor([True, False, True]), s), [(3,), (2,)]),
    "masked_scatter_0d": (lambda L, x, s: x.masked_scatter(L.tensor(True), s), [(), ()]),
    "masked_scatter_empty_self": (
        lambda L, x, s: x.masked_scatter(L.zeros(0, 3, dtype=L.bool), s), [(0, 3), (2,)]),
    # take
    "take": (lambda L, x: x.take(L.tensor([[0, 11], [-1, 5]])), [(3, 4)]),
    "take_repeated": (lambda L, x: x.take(L.tensor([1, 1, -3, 0])), [(2, 2)]),
    "take_0d_index": (lambda L, x: x.take(L.tensor(3)), [(2, 3)]),
    "take_0d_self": (lambda L, x: x.take(L.tensor([0, -1, 0])), [()]),
    "take_empty_index": (lambda L, x: x.take(L.zeros(0, dtype=L.int64)), [(2, 2)]),
}

# In-place forms, on a non-leaf (and through a view: the root records CopySlices).
INPLACE_CASES = {
    "scatter_": (lambda L, x, s: (x * 1).scatter_(1, L.tensor([[0, 2]]), s), [(2, 3), (1, 2)]),
    "scatter_value_": (lambda L, x: (x * 1).scatter_(0, L.tensor([[1, 0, 1]]), 5.0),
                       [(2, 3)]),
    "scatter_add_": (lambda L, x, s: (x * 1).scatter_add_(0, L.tensor([[1, 1, 0]]), s),
                     [(2, 3), (1, 3)]),
    "index_add_": (lambda L, x, s: (x * 1).index_add_(0, L.tensor([1, 1]), s, alpha=3),
                   [(2, 3), (2, 3)]),
    "index_copy_": (lambda L, x, s: (x * 1).index_copy_(1, L.tensor([2]), s), [(2, 3), (2, 1)]),
    "index_fill_": (lambda L, x: (x * 1).index_fill_(1, L.tensor([0, -1]), 0.5), [(2, 3)]),
    "index_fill_tensor_": (lambda L, x, v: (x * 1).index_fill_(0, L.tensor([1]), v),
                           [(2, 3), ()]),
    "masked_scatter_": (lambda L, x, s: (x * 1).masked_scatter_(L.tensor([True, False, True]), s),
                        [(2, 3), (2, 3)]),
    "masked_scatter_broadcast_mask_": (
        lambda L, x, s: (x * 1).masked_scatter_(L.tensor([[True], [False]]), s), [(2, 3), (4,)]),
}


def _through_view(write):
    """``write`` applied to the rows 1: of a copy of x; returns the copy (its root)."""

    def fn(L, x, *rest):
        y = x * 1
        write(L, y[1:], *rest)
        return y

    return fn


VIEW_CASES = {
    "scatter_": (_through_view(lambda L, v, s: v.scatter_(1, L.tensor([[1, 0]]), s)),
                 [(3, 2), (1, 2)]),
    "scatter_add_": (_through_view(lambda L, v, s: v.scatter_add_(0, L.tensor([[1, 1]]), s)),
                     [(3, 2), (1, 2)]),
    "index_add_": (_through_view(lambda L, v, s: v.index_add_(1, L.tensor([0, 0]), s)),
                   [(3, 2), (2, 2)]),
    "index_copy_": (_through_view(lambda L, v, s: v.index_copy_(0, L.tensor([1]), s)),
                    [(3, 2), (1, 2)]),
    "index_fill_": (_through_view(lambda L, v: v.index_fill_(1, L.tensor([1]), 9.0)), [(3, 2)]),
    "masked_scatter_": (_through_view(lambda L, v, s: v.masked_scatter_(
        L.tensor([[True, False], [True, True]]), s)), [(3, 2), (3,)]),
}

ALL_CASES = {**CASES, **{"inplace_" + k: v for k, v in INPLACE_CASES.items()},
             **{"view_" + k: v for k, v in VIEW_CASES.items()}}


def arrays_of(shapes):
    return [arr(shape, seed=i) for i, shape in enumerate(shapes)]


def run(case, lib, dtype=None):
    """The case's output and inputs in ``lib`` (float64 leaves unless ``dtype``)."""
    fn, shapes = ALL_CASES[case]
    arrays = arrays_of(shapes)
    if lib is ag:
        xs = [ag.tensor(a, dtype=dtype or ag.float64, requires_grad=True) for a in arrays]
    else:
        xs = [lib.tensor(a, dtype=dtype or lib.float64, requires_grad=True) for a in arrays]
    return fn(on(lib), *xs), xs


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_values_gradients_and_node_match_torch(case):
    torch = torch_or_skip()
    fn, shapes = ALL_CASES[case]
    check_against_torch(lambda *xs: fn(AG, *xs), lambda *ts: fn(torch, *ts), *arrays_of(shapes))
    assert node_name(run(case, ag)[0]) == node_name(run(case, torch)[0])


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_second_order_matches_torch(case):
    """Differentiates the gradient graph that every backward formula records on Tensors."""
    torch = torch_or_skip()
    fn, shapes = ALL_CASES[case]
    check_second_order(lambda *xs: fn(AG, *xs) ** 2, lambda *ts: fn(torch, *ts) ** 2,
                       *arrays_of(shapes))


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_float32_keeps_its_dtype_and_matches_torch(case):
    torch = torch_or_skip()
    out, xs = run(case, ag, ag.float32)
    t_out, ts = run(case, torch, torch.float32)
    assert out.dtype == ag.float32
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-6)
    w = np.random.default_rng(4).standard_normal(tuple(t_out.shape)).astype(np.float32)
    grads = ag.grad_sync(out, xs, ag.tensor(w))
    t_grads = torch.autograd.grad(t_out, ts, torch.tensor(w))
    for g, tg in zip(grads, t_grads):
        assert g.dtype == ag.float32
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_gradcheck(case):
    fn, shapes = ALL_CASES[case]
    assert ag.gradcheck(lambda *xs: fn(AG, *xs) ** 2, [leaf(a) for a in arrays_of(shapes)])


# ---- exact accumulation, integers, bookkeeping ----

def test_scatter_add_accumulates_repeated_indices_exactly():
    x = ag.tensor(np.zeros((2, 3)))
    src = ag.tensor(np.arange(1.0, 9.0).reshape(2, 4))
    out = x.scatter_add(1, ag.tensor([[0, 0, 0, 2], [1, 1, 1, 1]]), src)
    np.testing.assert_array_equal(out.numpy(), [[6.0, 0.0, 4.0], [0.0, 26.0, 0.0]])


def test_index_add_accumulates_repeated_indices_exactly():
    x = ag.tensor(np.ones((3, 2)))
    source = ag.tensor(np.arange(8.0).reshape(4, 2))
    out = x.index_add(0, ag.tensor([2, 2, 0, 2]), source, alpha=2)
    np.testing.assert_array_equal(out.numpy(), [[9.0, 11.0], [1.0, 1.0], [17.0, 23.0]])


def test_gradient_of_repeated_take_accumulates():
    x = leaf(np.zeros(3))
    (g,) = ag.grad_sync(x.take(ag.tensor([1, 1, -2, 0])), [x], ag.tensor([1.0, 2.0, 4.0, 8.0]))
    np.testing.assert_array_equal(g.numpy(), [8.0, 7.0, 0.0])


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_and_bool_tensors_match_torch_and_record_nothing(dtype):
    torch = torch_or_skip()
    results = []
    ag_dtype = ag.bool_ if dtype == "bool" else getattr(ag, dtype)
    for lib, dt in ((torch, getattr(torch, dtype)), (ag, ag_dtype)):
        L = on(lib)
        x = lib.tensor([[1, 0, 3], [0, 5, 0]], dtype=dt)
        index = L.tensor([[1, 0]])
        outs = [x.scatter(1, index, 1), x.scatter_add(1, index, x[:1, :2]),
                x.index_fill(0, L.tensor([1]), 1), x.index_copy(1, L.tensor([0]), x[:, 2:]),
                x.masked_select(x > 0), x.masked_scatter(x > 0, x), x.take(L.tensor([5, 0]))]
        if dtype != "bool":
            outs.append(x.index_add(0, L.tensor([0, 0]), x, alpha=2))
        assert all(o.grad_fn is None and not o.requires_grad for o in outs)
        results.append([o.numpy() for o in outs])
    for got, expected in zip(results[1], results[0]):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_number_values_are_cast_to_the_tensors_dtype_as_in_torch():
    torch = torch_or_skip()
    for lib in (torch, AG):
        x = lib.tensor([1, 2, 3])
        got = [x.scatter(0, lib.tensor([0]), 5.7), x.index_fill(0, lib.tensor([1]), 2.7),
               x.index_fill(0, lib.tensor([2]), lib.tensor(-1.9)),
               x.index_add(0, lib.tensor([0]), lib.tensor([2]), alpha=2.5)]
        values = [g.numpy().tolist() for g in got]
        if lib is torch:
            expected = values
    assert values == expected


def test_index_fill_float64_value_into_float32_gets_a_float64_gradient():
    torch = torch_or_skip()
    for lib in (torch, ag):
        x = lib.zeros(2, 3, dtype=lib.float32, requires_grad=True)
        v = lib.tensor(2.0, dtype=lib.float64, requires_grad=True)
        out = x.index_fill(1, lib.tensor([0, 2]), v)
        assert str(out.dtype).endswith("float32")
        (g,) = (ag.grad_sync if lib is ag else torch.autograd.grad)(out.sum(), [v])
        assert str(g.dtype).endswith("float64") and g.item() == 4.0


@pytest.mark.parametrize("op", ["scatter_", "scatter_add_", "index_add_", "index_copy_",
                                "index_fill_", "masked_scatter_"])
def test_in_place_returns_the_tensor_and_bumps_its_version(op):
    y = ag.zeros(2, 3)
    before = y._version
    out = {
        "scatter_": lambda: y.scatter_(1, ag.tensor([[0]]), 1.0),
        "scatter_add_": lambda: y.scatter_add_(1, ag.tensor([[0]]), ag.tensor([[1.0]])),
        "index_add_": lambda: y.index_add_(0, ag.tensor([1]), ag.tensor([[1.0, 2.0, 3.0]])),
        "index_copy_": lambda: y.index_copy_(0, ag.tensor([1]), ag.tensor([[1.0, 2.0, 3.0]])),
        "index_fill_": lambda: y.index_fill_(0, ag.tensor([1]), 1.0),
        "masked_scatter_": lambda: y.masked_scatter_(ag.tensor([True, False, False]),
                                                     ag.tensor([1.0, 2.0])),
    }[op]()
    assert out is y
    assert y._version == before + 1
    assert y.numpy().sum() > 0


@pytest.mark.parametrize("op", ["scatter_", "scatter_add_", "index_add_", "index_copy_",
                                "index_fill_", "masked_scatter_"])
def test_in_place_on_a_leaf_that_requires_grad_raises_as_torch(op):
    torch = torch_or_skip()
    calls = {
        "scatter_": lambda L, y, s: y.scatter_(1, L.tensor([[0]]), s),
        "scatter_add_": lambda L, y, s: y.scatter_add_(1, L.tensor([[0]]), s),
        "index_add_": lambda L, y, s: y.index_add_(1, L.tensor([0]), s),
        "index_copy_": lambda L, y, s: y.index_copy_(1, L.tensor([0]), s),
        "index_fill_": lambda L, y, s: y.index_fill_(1, L.tensor([0]), 1.0),
        "masked_scatter_": lambda L, y, s: y.masked_scatter_(L.tensor([[True]]), s),
    }
    messages = []
    for lib in (torch, ag):
        y = lib.zeros(1, 1, dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError) as exc:
            calls[op](on(lib), y, lib.ones(1, 1, dtype=lib.float64))
        messages.append(str(exc.value))
    assert messages[0] == messages[1]


def test_nodes_keep_their_own_copy_of_index_and_mask():
    x = leaf(np.arange(4.0))
    index = ag.tensor([1])
    mask = ag.tensor([True, False, False, False])
    y = x.scatter(0, index, 0.0) * 1 + x.index_fill(0, index, 0.0) + x.masked_select(mask).sum()
    index.data[:] = 3
    mask.data[:] = True
    (g,) = ag.grad_sync(y, [x], ag.ones(4, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [6.0, 0.0, 2.0, 2.0])


def test_scatter_src_larger_than_index_cannot_be_differentiated_as_in_torch():
    torch = torch_or_skip()
    messages = []
    for lib in (torch, ag):
        x = lib.zeros(2, 3, dtype=lib.float64)
        src = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        out = x.scatter(1, on(lib).tensor([[2]]), src)
        np.testing.assert_array_equal(out.detach().numpy(), [[0, 0, 1], [0, 0, 0]])
        with pytest.raises(RuntimeError) as exc:
            (ag.grad_sync if lib is ag else torch.autograd.grad)(out.sum(), [src])
        messages.append(str(exc.value))
    assert messages[0] == messages[1]


# Each case: (fn(L, x, s) for x and s of shape (2, 3), how many of x, s it uses).
GRAPH_CASES = {
    "scatter": (lambda L, x, s: x.scatter(1, L.tensor([[0, 1], [2, 0]]), s[:, :2]), 2),
    "scatter_value": (lambda L, x, s: x.scatter(1, L.tensor([[0, 1]]), 1.0), 1),
    "scatter_add": (lambda L, x, s: x.scatter_add(1, L.tensor([[0, 0, 2]]), s[:1]), 2),
    "index_add": (lambda L, x, s: x.index_add(1, L.tensor([2, 2, 0]), s, alpha=2), 2),
    "index_copy": (lambda L, x, s: x.index_copy(1, L.tensor([0, 2]), s[:, 1:]), 2),
    "index_fill": (lambda L, x, s: x.index_fill(1, L.tensor([0, 2]), s[0, 0]), 2),
    "masked_select": (lambda L, x, s: x.masked_select(L.tensor([True, False, True])), 1),
    "masked_scatter": (lambda L, x, s: x.masked_scatter(L.tensor([True, False, True]), s), 2),
    "take": (lambda L, x, s: x.take(L.tensor([[0, 4, 0]])), 1),
}


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
def test_create_graph_records_torchs_nodes(case):
    torch = torch_or_skip()
    fn, used = GRAPH_CASES[case]
    names = []
    for lib, grad in ((torch, torch.autograd.grad), (ag, ag.grad_sync)):
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        s = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        out = fn(on(lib), x, s)
        v = lib.ones(*out.shape, dtype=lib.float64, requires_grad=True)
        firsts = grad(out, [x, s][:used], v, create_graph=True)
        names.append([node_name(f) for f in firsts])
    assert names[1] == names[0]


@pytest.mark.parametrize("name, fn", [
    ("scatter", scatter), ("scatter_", scatter_), ("scatter_add", scatter_add),
    ("scatter_add_", scatter_add_), ("index_add", index_add), ("index_add_", index_add_),
    ("index_copy", index_copy), ("index_copy_", index_copy_), ("index_fill", index_fill),
    ("index_fill_", index_fill_), ("masked_select", masked_select),
    ("masked_scatter", masked_scatter), ("masked_scatter_", masked_scatter_), ("take", take)])
def test_tensor_methods_are_the_module_functions(name, fn):
    assert inspect.unwrap(getattr(ag.Tensor, name)) is fn  # behind the public boundary


# Each case: op(x) for x of shape (2, 3) on another device; its index and mask go there too.
DEVICE_CASES = {
    "scatter": lambda x: x.scatter(1, ag.tensor([[2, 0]], device=x.device), x[:1, :2] * 2),
    "scatter_value": lambda x: x.scatter(0, ag.tensor([[1, 0, 1]], device=x.device), 0.5),
    "scatter_add": lambda x: x.scatter_add(1, ag.tensor([[0, 0]], device=x.device), x[:1, :2] * 3),
    "index_add": lambda x: x.index_add(1, ag.tensor([2, 2], device=x.device), x[:, :2] * 2),
    "index_copy": lambda x: x.index_copy(0, ag.tensor([1], device=x.device), x[:1] * 2),
    "index_fill": lambda x: x.index_fill(1, ag.tensor([-1], device=x.device), x[0, 0] * 2),
    "masked_select": lambda x: x.masked_select(x > 0) * 2,
    "masked_scatter": lambda x: x.masked_scatter(x > 0, x.flip(0) * 3),
    "take": lambda x: x.take(ag.tensor([[5, 5, -6]], device=x.device)) * 2,
}


@pytest.mark.parametrize("case", sorted(DEVICE_CASES))
def test_forward_and_backward_stay_on_the_tensors_device(fake_backend, case):
    check_on_fake_device(fake_backend, DEVICE_CASES[case])


# ---- errors ----

def X(L):
    return L.tensor(np.arange(12.0).reshape(3, 4))


def S(L):
    return L.tensor(-np.arange(12.0).reshape(3, 4))


ERRORS = {
    "scatter_float_index": lambda L: X(L).scatter(1, L.tensor([[0.0]]), S(L)),
    "scatter_src_dtype": lambda L: X(L).scatter(1, L.tensor([[0]]), S(L).to(L.float32)),
    "scatter_index_too_large": lambda L: X(L).scatter(1, L.tensor([[0, 1, 2, 3, 0]]), S(L)),
    "scatter_index_larger_than_self": lambda L: X(L).scatter(1, L.tensor([[0]] * 4), S(L)),
    "scatter_index_larger_than_src": lambda L: X(L).scatter(1, L.tensor([[0, 1]]), S(L)[:, :1]),
    "scatter_value_index_too_large": lambda L: X(L).scatter(1, L.tensor([[0]] * 4), 1.0),
    "scatter_index_out_of_bounds": lambda L: X(L).scatter(1, L.tensor([[4]]), S(L)),
    "scatter_negative_index": lambda L: X(L).scatter(1, L.tensor([[-1]]), S(L)),
    "scatter_bad_dim": lambda L: X(L).scatter(2, L.tensor([[0]]), S(L)),
    "scatter_index_dims": lambda L: X(L).scatter(1, L.tensor([0]), S(L)),
    "scatter_src_dims": lambda L: X(L).scatter(1, L.tensor([[0]]), L.tensor([1.0, 2.0])),
    "scatter_0d_tensor_src": lambda L: X(L).scatter(1, L.tensor([[0]]), L.tensor(2.0)),
    "scatter_add_number": lambda L: X(L).scatter_add(1, L.tensor([[0]]), 1.0),
    "scatter_add_out_of_bounds": lambda L: X(L).scatter_add(0, L.tensor([[3]]), S(L)),
    "scatter_add_src_dtype": lambda L: X(L).scatter_add(1, L.tensor([[0]]), S(L).to(L.float32)),
    "scatter_in_place_expanded": lambda L: L.zeros(1, 4).expand(3, 4).scatter_(
        1, L.tensor([[0]]), 1.0),
    "index_add_index_dims": lambda L: X(L).index_add(0, L.tensor([[2, 0]]), S(L)[:2]),
    "index_add_float_index": lambda L: X(L).index_add(0, L.tensor([1.0]), S(L)[:1]),
    "index_add_dtype": lambda L: X(L).index_add(0, L.tensor([1]), S(L)[:1].to(L.float32)),
    "index_add_out_of_bounds": lambda L: X(L).index_add(0, L.tensor([3, 0]), S(L)[:2]),
    "index_add_negative_index": lambda L: X(L).index_add(0, L.tensor([-1, 0]), S(L)[:2]),
    "index_add_count": lambda L: X(L).index_add(0, L.tensor([1]), S(L)[:2]),
    "index_add_shape": lambda L: X(L).index_add(0, L.tensor([1, 2]), S(L)[:2, :3]),
    "index_add_source_dims": lambda L: X(L).index_add(1, L.tensor([1]), L.tensor([1.0])),
    "index_add_number": lambda L: X(L).index_add(0, L.tensor([1]), 2.0),
    "index_copy_int32_index": lambda L: X(L).index_copy(0, L.tensor([1], dtype=L.int32),
                                                        S(L)[:1]),
    "index_copy_dtype": lambda L: X(L).index_copy(0, L.tensor([1]), S(L)[:1].to(L.float32)),
    "index_copy_out_of_bounds": lambda L: X(L).index_copy(0, L.tensor([3]), S(L)[:1]),
    "index_copy_negative_index": lambda L: X(L).index_copy(0, L.tensor([-1]), S(L)[:1]),
    "index_copy_count": lambda L: X(L).index_copy(0, L.tensor([1]), S(L)[:2]),
    "index_copy_slice_shape": lambda L: X(L).index_copy(0, L.tensor([1, 2]), S(L)[:2, :3]),
    "index_copy_slice_shape_3d": lambda L: L.zeros(2, 3, 4).index_copy(
        1, L.tensor([0]), L.zeros(2, 2, 5)),
    "index_copy_index_dims": lambda L: X(L).index_copy(0, L.tensor([[1, 2]]), S(L)[:2]),
    "index_copy_source_dims": lambda L: X(L).index_copy(0, L.tensor([1, 2]), S(L)[0]),
    "index_copy_0d_source_count": lambda L: X(L).index_copy(0, L.tensor([1, 2]), L.tensor(0.0)),
    "index_fill_1d_value": lambda L: X(L).index_fill(1, L.tensor([1]), L.tensor([7.0])),
    "index_fill_out_of_bounds": lambda L: X(L).index_fill(1, L.tensor([4]), 1.0),
    "index_fill_negative_out_of_bounds": lambda L: X(L).index_fill(1, L.tensor([-5]), 1.0),
    "index_fill_index_dims": lambda L: X(L).index_fill(1, L.tensor([[1]]), 1.0),
    "index_fill_int32_index": lambda L: X(L).index_fill(1, L.tensor([1], dtype=L.int32), 1.0),
    "index_fill_bad_dim": lambda L: X(L).index_fill(2, L.tensor([1]), 1.0),
    "index_fill_overflow": lambda L: L.zeros(2, dtype=L.int8).index_fill(0, L.tensor([0]), 300),
    "masked_select_shapes": lambda L: X(L).masked_select(L.tensor([True, False])),
    "masked_select_int_mask": lambda L: X(L).masked_select(L.tensor([1, 0, 0, 1])),
    "masked_select_list_mask": lambda L: X(L).masked_select([True]),
    "masked_scatter_shapes": lambda L: X(L).masked_scatter(L.tensor([True, False]), S(L)),
    "masked_scatter_short_source": lambda L: X(L).masked_scatter(
        L.tensor([True] * 4), S(L)[0, :3]),
    "masked_scatter_dtype": lambda L: X(L).masked_scatter(L.tensor([True]), S(L).to(L.float32)),
    "masked_scatter_int_mask": lambda L: X(L).masked_scatter(L.tensor([1, 0, 0, 1]), S(L)),
    "masked_scatter_number": lambda L: X(L).masked_scatter(L.tensor([True]), 1.0),
    "masked_scatter_in_place_mask_shape": lambda L: X(L).masked_scatter_(
        L.tensor([True, False, False]), S(L)),
    "take_out_of_bounds": lambda L: X(L).take(L.tensor([12])),
    "take_negative_out_of_bounds": lambda L: X(L).take(L.tensor([-13])),
    "take_int32_index": lambda L: X(L).take(L.tensor([1], dtype=L.int32)),
    "take_from_empty": lambda L: L.zeros(0).take(L.tensor([0])),
    "take_list_index": lambda L: X(L).take([3]),
}

# Same exception type, a different message (see the report's differences).
ERRORS_TYPE_ONLY = {
    "scatter_list_index": lambda L: X(L).scatter(1, [[0]], S(L)),
    "scatter_list_src": lambda L: X(L).scatter(1, L.tensor([[0]]), [1.0]),
    "masked_scatter_in_place_mask_dims": lambda L: X(L)[0].masked_scatter_(
        L.tensor([[True] * 4] * 2), S(L)),
}


def _raised(fn, lib):
    with pytest.raises(Exception) as exc:  # noqa: PT011  (compared by the caller)
        fn(on(lib))
    return exc


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_torch(case):
    torch = torch_or_skip()
    expected = _raised(ERRORS[case], torch)
    with pytest.raises(expected.type) as exc:
        ERRORS[case](AG)
    assert str(exc.value) == str(expected.value)


@pytest.mark.parametrize("case", sorted(ERRORS_TYPE_ONLY))
def test_errors_have_torchs_type(case):
    torch = torch_or_skip()
    expected = _raised(ERRORS_TYPE_ONLY[case], torch)
    with pytest.raises(expected.type):
        ERRORS_TYPE_ONLY[case](AG)
