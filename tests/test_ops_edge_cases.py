"""Op edge cases (zeros, NaNs, odd index dtypes, legacy rules), each run in both libraries."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")


def _grads(lib, loss, xs):
    if lib is torch:
        return [g.detach().numpy() for g in torch.autograd.grad(loss, xs)]
    return [g.numpy() for g in ag.grad_sync(loss, xs)]


def _pow_zero_exponent(lib):
    a = lib.tensor([0.0, -0.5, 2.0], requires_grad=True)
    return _grads(lib, (a ** lib.tensor([0.0, 0.0, 1.0])).sum(), [a])


def _rpow_negative_base(lib):
    a = lib.tensor([2.0, 3.0], requires_grad=True)
    return _grads(lib, ((-2.0) ** a).sum(), [a])


def _rpow_zero_base(lib):
    a = lib.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _grads(lib, (0.0 ** a).sum(), [a])


def _max_with_nan(lib):
    a = lib.tensor([1.0, float("nan"), 3.0], requires_grad=True)
    b = lib.tensor([1.0, float("nan"), float("nan")], requires_grad=True)
    return _grads(lib, a.max() + b.min(), [a, b])


def _cat_skips_1d_empty(lib):
    e = lib.tensor([], requires_grad=True)
    x = lib.ones(2, 3, requires_grad=True)
    c = lib.cat([e, x, e], 1)
    return [np.array(c.shape)] + _grads(lib, (c * c).sum(), [e, x])


CASES = {
    "pow_zero_exponent": _pow_zero_exponent,
    "rpow_negative_base": _rpow_negative_base,
    "rpow_zero_base": _rpow_zero_base,
    "max_with_nan": _max_with_nan,
    "cat_skips_1d_empty": _cat_skips_1d_empty,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_edge_case_matches_torch(name):
    ours, theirs = CASES[name](ag), CASES[name](torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_a_uint8_index_is_a_mask_with_torchs_warning():
    results = []
    for lib in (ag, torch):
        x = lib.tensor([10.0, 20.0, 30.0])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            picked = x[lib.tensor(np.array([1, 0, 1], np.uint8))]
        results.append((picked.numpy().tolist(), [str(w.message)[:40] for w in caught]))
    assert results[0] == results[1]


def test_equality_with_none_or_a_string_is_false():
    x = ag.tensor([1.0])
    assert (x == None) is False and (x != None) is True  # noqa: E711
    assert (x == "a") is False
    with pytest.raises(TypeError):
        x < None  # noqa: B015


def test_squeeze_with_a_dim_named_twice_raises():
    for lib in (ag, torch):
        with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
            lib.ones(1, 1, 3).squeeze((1, -2))


# ---- add/sub with alpha; shapes that do not broadcast ----


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1, 2, -0.5])
def test_add_and_sub_with_alpha_match_pytorchs_values_gradients_and_nodes(op, alpha):
    def run(lib):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([[3.0, 4.0], [5.0, 6.0]], requires_grad=True)
        as_function = getattr(lib, op)(a, b, alpha=alpha)
        as_method = getattr(a, op)(3.0, alpha=alpha)  # a number: alpha folded into it
        loss = (as_function * as_function).sum() + as_method.sum()
        nodes = [as_function.grad_fn.name(), len(as_function.grad_fn.next_functions)]
        return [as_function.detach().numpy(), *_grads(lib, loss, [a, b]), nodes]

    ours, theirs = run(ag), run(torch)
    for mine, expected in zip(ours[:-1], theirs[:-1]):
        np.testing.assert_allclose(mine, expected, rtol=1e-6)
    assert ours[-1] == theirs[-1]


def test_a_float_alpha_with_integer_tensors_raises_as_pytorchs():
    def message(lib):
        with pytest.raises(RuntimeError) as info:
            lib.add(lib.tensor([1, 2]), lib.tensor([3, 4]), alpha=0.5)
        return str(info.value)

    assert message(ag) == message(torch)


def test_add_post_hook_sees_none_for_an_input_that_needs_no_gradient_as_pytorchs():
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, 4.0]) + x
        seen = []
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(
            [g is None for g in grad_inputs]))
        (y * 2.0).sum().backward() if lib is torch else ag.backward_sync((y * 2.0).sum())
        return seen

    assert run(ag) == run(torch)


BROADCAST_CLASHES = [
    ("add", lambda lib, a, b: a + b),
    ("sub", lambda lib, a, b: a - b),
    ("mul", lambda lib, a, b: a * b),
    ("div", lambda lib, a, b: a / b),
    ("pow", lambda lib, a, b: a ** b),
    ("where, values", lambda lib, a, b: lib.where(a > 0, a, b)),
    ("where, condition", lambda lib, a, b: lib.where(b > 0, a, a)),
]


@pytest.mark.parametrize("name, op", BROADCAST_CLASHES, ids=[n for n, _ in BROADCAST_CLASHES])
def test_shapes_that_do_not_broadcast_raise_pytorchs_error(name, op):
    def error(lib):
        a, b = lib.ones(2, 2, requires_grad=True), lib.ones(3)
        with pytest.raises(Exception) as info:
            op(lib, a, b)
        return info.type, str(info.value)

    assert error(ag) == error(torch)


@pytest.mark.parametrize("op", ["clamp", "clamp_min", "clamp_max", "where"])
def test_a_float64_0d_gradient_through_clamp_and_where_as_pytorchs(op):
    # A 0-d float64 gradient is a NumPy scalar, a subclass of float: once read as a number.
    def run(lib):
        x = lib.tensor(np.array(0.3), requires_grad=True)
        y = {"clamp": lambda: x.clamp(-1, 1), "clamp_min": lambda: x.clamp_min(-1),
             "clamp_max": lambda: x.clamp_max(1),
             "where": lambda: lib.where(x > 0, x, x * 3.0)}[op]()
        return [g.tolist() for g in _grads(lib, y * 2.0, [x])]

    assert run(ag) == run(torch)
