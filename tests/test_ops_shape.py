"""Shape ops and cat/stack: gradcheck sweeps, PyTorch as oracle, views, errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import aiograd as ag
from aiograd._ops.joining import cat, stack

pytestmark = pytest.mark.timeout(60)

# The ops are spelled as PyTorch's, so one function runs on both: `lib` is
# torch or this namespace (for the module functions).
AG = SimpleNamespace(cat=cat, stack=stack)


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(a):
    return ag.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def check_against_torch(fn, *arrays, seed=1):
    """``fn(lib, *tensors)`` gives the same values and vector-Jacobian products as PyTorch."""
    torch = pytest.importorskip("torch")
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out, t_out = fn(AG, *xs), fn(torch, *ts)
    assert out.grad_fn.name() == type(t_out.grad_fn).__name__
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    out, t_out = out * out, t_out * t_out  # so that the gradients depend on the inputs
    v = np.random.default_rng(seed).standard_normal(tuple(t_out.shape))
    grads = ag.grad_sync(out, xs, ag.tensor(v))
    t_grads = torch.autograd.grad(t_out, ts, torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)


def check_second_order(fn, *arrays, seed=2):
    """Gradients of a vector-Jacobian product (create_graph=True) agree with PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out, t_out = fn(AG, *xs), fn(torch, *ts)
    v = rng.standard_normal(tuple(t_out.shape))
    ws = [rng.standard_normal(np.shape(a)) for a in arrays]
    firsts = ag.grad_sync(out, xs, ag.tensor(v), create_graph=True)
    t_firsts = torch.autograd.grad(t_out, ts, torch.tensor(v), create_graph=True)
    total = sum((g * g * ag.tensor(w)).sum() for g, w in zip(firsts, ws))
    t_total = sum((g * g * torch.tensor(w)).sum() for g, w in zip(t_firsts, ws))
    seconds = ag.grad_sync(total, xs, allow_unused=True)
    t_seconds = torch.autograd.grad(t_total, ts, allow_unused=True)
    for g, tg in zip(seconds, t_seconds):
        if tg is None:
            assert g is None or not np.any(g.numpy())
        else:
            np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


# Each case: (input shape, fn(lib, x)).
UNARY_CASES = {
    "reshape_ints": ((2, 3), lambda lib, x: x.reshape(3, 2)),
    "reshape_tuple_infer": ((2, 3), lambda lib, x: x.reshape((-1, 2))),
    "reshape_to_scalar": ((1, 1), lambda lib, x: x.reshape(())),
    "reshape_copy": ((2, 3), lambda lib, x: x.T.reshape(6)),
    "view": ((2, 3), lambda lib, x: x.view(3, 1, 2)),
    "flatten_all": ((2, 1, 3), lambda lib, x: x.flatten()),
    "flatten_middle": ((2, 2, 3), lambda lib, x: x.flatten(1, 2)),
    "flatten_scalar": ((), lambda lib, x: x.flatten()),
    "transpose": ((2, 3), lambda lib, x: x.transpose(0, 1)),
    "transpose_negative": ((2, 1, 3), lambda lib, x: x.transpose(-1, 0)),
    "permute": ((2, 1, 3), lambda lib, x: x.permute(2, 0, 1)),
    "permute_tuple": ((2, 1, 3), lambda lib, x: x.permute((1, 2, 0))),
    "T": ((2, 3), lambda lib, x: x.T),
    "expand_leading": ((3,), lambda lib, x: x.expand(2, 3)),
    "expand_singleton": ((2, 1), lambda lib, x: x.expand(-1, 3)),
    "expand_both": ((1, 3), lambda lib, x: x.expand((2, 2, 3))),
    "squeeze_all": ((1, 2, 1, 3), lambda lib, x: x.squeeze()),
    "squeeze_dim": ((2, 1, 3), lambda lib, x: x.squeeze(1)),
    "squeeze_dim_not_one": ((2, 1, 3), lambda lib, x: x.squeeze(0)),
    "squeeze_dims": ((1, 2, 1), lambda lib, x: x.squeeze((0, 2))),
    "unsqueeze": ((2, 3), lambda lib, x: x.unsqueeze(1)),
    "unsqueeze_end": ((2, 3), lambda lib, x: x.unsqueeze(-1)),
    "contiguous": ((2, 3), lambda lib, x: x.T.contiguous()),
    "chain": ((2, 3), lambda lib, x: x.T.unsqueeze(0).expand(2, 3, 2).permute(2, 0, 1)),
}


@pytest.mark.parametrize("name", sorted(UNARY_CASES))
def test_shape_op_matches_torch(name):
    shape, fn = UNARY_CASES[name]
    check_against_torch(fn, arr(shape))


@pytest.mark.parametrize("name", sorted(UNARY_CASES))
def test_shape_op_gradcheck(name):
    shape, fn = UNARY_CASES[name]
    assert ag.gradcheck(lambda x: fn(AG, x) ** 2, [leaf(arr(shape))])


@pytest.mark.parametrize("name", ["expand_both", "chain", "reshape_copy", "squeeze_dims"])
def test_shape_op_second_order_matches_torch(name):
    shape, fn = UNARY_CASES[name]
    check_second_order(lambda lib, x: fn(lib, x) ** 3, arr(shape))


# ---- views ----

VIEW_OPS = {
    "reshape": lambda x: x.reshape(3, 2),
    "view": lambda x: x.view(6),
    "flatten": lambda x: x.flatten(),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.permute(1, 0),
    "T": lambda x: x.T,
    "expand": lambda x: x.expand(4, 2, 3),
    "squeeze": lambda x: x.squeeze(),
    "unsqueeze": lambda x: x.unsqueeze(0),
}


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_view_result_shares_version_counter_and_memory(name, requires_grad):
    x = ag.tensor(arr((2, 3)), requires_grad=requires_grad)
    v = VIEW_OPS[name](x)
    assert v._vc is x._vc
    assert v._base is x
    assert np.shares_memory(v.data, x.data)


def test_view_of_view_has_the_root_as_base():
    x = ag.tensor(arr((2, 3)), requires_grad=True)
    v = x.T.unsqueeze(0).squeeze(0).reshape(3, 1, 2)
    assert v._base is x
    assert v._vc is x._vc


def test_reshape_that_must_copy_is_not_a_view():
    x = ag.tensor(arr((2, 3)), requires_grad=True)
    y = x.T.reshape(6)
    assert y.grad_fn.name() == "UnsafeViewBackward0"
    assert y._base is None
    assert y._vc is not x._vc
    assert not np.shares_memory(y.data, x.data)


def test_in_place_write_through_a_view_changes_the_base_and_its_version():
    x = ag.zeros(2, 3)
    v = x.T
    with ag.no_grad():
        v.add_(1.0)
    assert x._version == 1
    np.testing.assert_array_equal(x.numpy(), np.ones((2, 3)))


def test_view_raises_when_the_result_would_need_a_copy():
    x = ag.tensor(arr((2, 3)))
    with pytest.raises(RuntimeError, match=r"view size is not compatible.*Use \.reshape"):
        x.T.view(6)


def test_contiguous_returns_self_when_already_contiguous():
    x = ag.tensor(arr((2, 3)), requires_grad=True)
    assert x.contiguous() is x


def test_contiguous_copies_a_transposed_tensor():
    x = ag.tensor(arr((2, 3)), requires_grad=True)
    y = x.T.contiguous()
    assert y.grad_fn.name() == "CloneBackward0"
    assert y.data.flags.c_contiguous
    assert y._base is None


def test_flatten_of_a_single_dim_returns_the_tensor_itself():
    x = ag.tensor(arr((2, 3)), requires_grad=True)
    assert x.flatten(1, 1) is x


def test_expand_gradient_sums_over_expanded_dims():
    x = ag.tensor(np.ones((2, 1)), requires_grad=True)
    (g,) = ag.grad_sync(x.expand(4, 2, 3), [x], ag.ones(4, 2, 3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), np.full((2, 1), 12.0))


def test_expand_as_takes_the_shape_of_the_other_tensor():
    x = ag.tensor(arr((3,)), requires_grad=True)
    y = x.expand_as(ag.zeros(2, 3))
    assert y.shape == (2, 3)
    assert y.grad_fn.name() == "ExpandBackward0"


def test_expand_result_is_read_only_for_in_place_ops():
    x = ag.zeros(3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.expand(2, 3).add_(1.0)


def test_shape_ops_without_grad_record_nothing():
    x = ag.tensor(arr((2, 3)), requires_grad=True)
    with ag.no_grad():
        y = x.reshape(6).T.unsqueeze(0).expand(2, 6)
    assert y.grad_fn is None
    assert not y.requires_grad


# ---- errors ----

@pytest.mark.parametrize(
    ("fn", "exc", "match"),
    [
        (lambda x: x.reshape(4), RuntimeError, r"shape '\[4\]' is invalid for input of size 6"),
        (lambda x: x.reshape(-1, -1), RuntimeError, "only one dimension can be inferred"),
        (lambda x: x.reshape(2.0, 3), TypeError, "sizes must be ints"),
        (lambda x: x.view(4, -1), RuntimeError, r"shape '\[4, -1\]' is invalid"),
        (lambda x: x.transpose(0, 2), IndexError,
         r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
        (lambda x: x.permute(0), RuntimeError, r"input.dim\(\) = 2 is not equal to len\(dims\)"),
        (lambda x: x.permute(0, 0), RuntimeError, "duplicate dims are not allowed"),
        (lambda x: x.expand(2, 4), RuntimeError,
         r"expanded size of the tensor \(4\) must match the existing size \(3\) at "
         r"non-singleton dimension 1"),
        (lambda x: x.expand(-1, 2, 3), RuntimeError, "isn't allowed in a leading"),
        (lambda x: x.expand(3), RuntimeError, "must be greater or equal"),
        (lambda x: x.expand(2, -2, 3), RuntimeError, "invalid size -2 at dimension 1"),
        (lambda x: x.unsqueeze(3), IndexError, r"range of \[-3, 2\], but got 3"),
        (lambda x: x.squeeze(2), IndexError, "Dimension out of range"),
        (lambda x: x.flatten(1, 0), RuntimeError, "start_dim .* cannot come after end_dim"),
    ],
)
def test_shape_op_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(ag.tensor(arr((2, 3))))


# ---- cat / stack ----

JOIN_CASES = {
    "cat_dim0": (((2, 3), (1, 3)), lambda lib, a, b: lib.cat([a, b])),
    "cat_dim1": (((2, 3), (2, 1)), lambda lib, a, b: lib.cat((a, b, a), dim=1)),
    "cat_negative_dim": (((2, 3), (2, 2)), lambda lib, a, b: lib.cat([b, a], -1)),
    "stack_dim0": (((2, 3), (2, 3)), lambda lib, a, b: lib.stack([a, b])),
    "stack_last": (((2, 3), (2, 3)), lambda lib, a, b: lib.stack([a, b, a], dim=-1)),
    "stack_scalars": (((), ()), lambda lib, a, b: lib.stack([a, b])),
}


@pytest.mark.parametrize("name", sorted(JOIN_CASES))
def test_join_matches_torch(name):
    shapes, fn = JOIN_CASES[name]
    check_against_torch(fn, *(arr(s, seed=i) for i, s in enumerate(shapes)))


@pytest.mark.parametrize("name", sorted(JOIN_CASES))
def test_join_gradcheck(name):
    shapes, fn = JOIN_CASES[name]
    inputs = [leaf(arr(s, seed=i)) for i, s in enumerate(shapes)]
    assert ag.gradcheck(lambda *xs: fn(AG, *xs), inputs)


@pytest.mark.parametrize("name", ["cat_dim1", "stack_last"])
def test_join_second_order_matches_torch(name):
    shapes, fn = JOIN_CASES[name]
    check_second_order(lambda lib, a, b: fn(lib, a, b) ** 3,
                       *(arr(s, seed=i) for i, s in enumerate(shapes)))


def test_cat_input_without_grad_gets_no_gradient():
    a = leaf(arr((2,)))
    b = ag.tensor(arr((3,)))
    out = cat([a, b])
    assert out.grad_fn.next_functions[1] == (None, 0)
    (g,) = ag.grad_sync(out, [a], ag.ones(5, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), np.ones(2))


def test_cat_promotes_dtypes_and_casts_gradients_back():
    a = ag.tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    b = leaf(arr((1,)))
    out = cat([a, b])
    assert out.dtype == ag.float64
    ga, gb = ag.grad_sync(out, [a, b], ag.ones(3, dtype=ag.float64))
    assert ga.dtype == ag.float32
    assert gb.dtype == ag.float64


@pytest.mark.parametrize(
    ("fn", "exc", "match"),
    [
        (lambda: cat([]), ValueError, "expected a non-empty list of Tensors"),
        (lambda: cat(ag.ones(2)), TypeError, "expected a list or tuple of Tensors"),
        (lambda: cat([ag.ones(2), np.ones(2)]), TypeError, "expected Tensor as element 1"),
        (lambda: cat([ag.ones(())]), RuntimeError,
         r"zero-dimensional tensor \(at position 0\) cannot be concatenated"),
        (lambda: cat([ag.ones(2, 3), ag.ones(2)]), RuntimeError,
         "Tensors must have same number of dimensions: got 2 and 1"),
        (lambda: cat([ag.ones(2, 3), ag.ones(3, 3)], dim=1), RuntimeError,
         "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 "
         "for tensor number 1"),
        (lambda: cat([ag.ones(2)], dim=1), IndexError, "Dimension out of range"),
        (lambda: stack([ag.ones(2, 3), ag.ones(3, 3)]), RuntimeError,
         r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and "
         r"\[3, 3\] at entry 1"),
        (lambda: stack([ag.ones(2)], dim=2), IndexError, r"range of \[-2, 1\], but got 2"),
    ],
)
def test_join_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_cat_on_two_devices_raises(fake_backend):
    a = ag.ones(2)
    b = ag.ones(2, device="fake:0")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        cat([a, b])


def test_cat_and_stack_on_another_device_keep_gradients_there(fake_backend):
    a = ag.tensor(arr((2,)), device="fake:1", requires_grad=True)
    b = ag.tensor(arr((2,)), device="fake:1", requires_grad=True)
    out = cat([stack([a, b]), a[None]])
    assert out.device == ag.device("fake:1")
    ga, gb = ag.grad_sync(out, [a, b], ag.ones(3, 2, dtype=ag.float64, device="fake:1"))
    assert ga.device == ag.device("fake:1")
    np.testing.assert_array_equal(ga.cpu().numpy(), np.full(2, 2.0))
    np.testing.assert_array_equal(gb.cpu().numpy(), np.ones(2))
