"""Elementwise ops at their edges, against torch 2.13 (found by a differential probe).

relu selects its gradient (inf or NaN gradients give 0 where the output is 0),
``x ** 0.5`` and ``x ** -0.5`` are PyTorch's sqrt and rsqrt, a narrow base's log
is taken at the result's precision, and bool tensors are refused where PyTorch
refuses them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")

SPECIAL = [-0.0, 0.0, -np.inf, np.inf, -2.0, 4.0, np.nan, 1e-300]


def same(torch_value, aiograd_value) -> None:
    """Equal, NaN where NaN, and the same sign of every zero."""
    expected = torch_value.detach().numpy()
    got = aiograd_value.detach().numpy()
    np.testing.assert_array_equal(got, expected)
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))


def first_and_second(lib, grad, x, f):
    """``f(x)``, its gradient and the gradient of that gradient's sum."""
    y = f(x)
    (g,) = grad(y.sum(), x, create_graph=True)
    (gg,) = grad(g.sum(), x)
    return y, g, gg


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_gives_zero_where_its_output_is_zero_even_for_inf_and_nan_gradients(dtype):
    values = [-1.0, 0.0, 4.0, -3.0]
    incoming = [np.inf, np.nan, 2.0, -np.inf]
    t = torch.tensor(values, dtype=getattr(torch, dtype), requires_grad=True)
    t.relu().backward(torch.tensor(incoming, dtype=getattr(torch, dtype)))
    a = ag.tensor(values, dtype=getattr(ag, dtype), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf * 0 must not leak NumPy's warning
        a.relu().backward_sync(ag.tensor(incoming, dtype=getattr(ag, dtype)))
    same(t.grad, a.grad)


def test_sqrt_of_relu_has_pytorchs_gradient_at_zero():
    # sqrt's gradient at 0 is inf; relu turns it into 0 where its output is 0
    values = [-1.0, 0.0, 4.0]
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    t.relu().sqrt().sum().backward()
    a = ag.tensor(values, dtype=ag.float64, requires_grad=True)
    a.relu().sqrt().sum().backward_sync()
    same(t.grad, a.grad)


def test_relus_second_order_gradient_selects_too():
    values = [-1.0, -2.0]
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    (tg,) = torch.autograd.grad(t.relu().norm(), t, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), t)
    a = ag.tensor(values, dtype=ag.float64, requires_grad=True)
    (ag1,) = ag.grad_sync(a.relu().norm(), a, create_graph=True)
    (agg,) = ag.grad_sync(ag1.sum(), a)
    same(tgg, agg)


def test_relu_of_a_huge_gradient_is_still_exact():
    # the finiteness check squares the gradient: an overflow there takes the exact path
    values = [-1.0, 2.0]
    t = torch.tensor(values, requires_grad=True)
    (t.relu() * 1e30).sum().backward()
    a = ag.tensor(values, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (a.relu() * 1e30).sum().backward_sync()
    same(t.grad, a.grad)


@pytest.mark.parametrize("exponent", [0.5, -0.5, 1.5, 2.5, -1.5, 2, 3, -1, -2])
def test_power_of_a_number_matches_at_signed_zeros_and_infinities(exponent):
    t = torch.tensor(SPECIAL, dtype=torch.float64, requires_grad=True)
    a = ag.tensor(SPECIAL, dtype=ag.float64, requires_grad=True)
    expected = first_and_second(torch, torch.autograd.grad, t, lambda x: x ** exponent)
    got = first_and_second(ag, ag.grad_sync, a, lambda x: x ** exponent)
    for e, g in zip(expected, got):
        same(e, g)


@pytest.mark.parametrize("base_dtype", ["float16", "float32"])
def test_a_wide_exponents_gradient_takes_the_narrow_bases_log_at_full_precision(base_dtype):
    t = torch.tensor([1.5, 3.0], dtype=getattr(torch, base_dtype), requires_grad=True)
    te = torch.tensor([2.0, 1.0], dtype=torch.float64, requires_grad=True)
    a = ag.tensor([1.5, 3.0], dtype=getattr(ag, base_dtype), requires_grad=True)
    ae = ag.tensor([2.0, 1.0], dtype=ag.float64, requires_grad=True)
    expected = torch.autograd.grad((t ** te).sum(), [t, te])
    got = ag.grad_sync((a ** ae).sum(), [a, ae])
    for e, g in zip(expected, got):
        assert g.dtype == getattr(ag, str(e.dtype).replace("torch.", ""))
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-15)


def test_a_bool_tensor_to_an_int_power_is_int64():
    expected = torch.tensor([True, False]) ** 2
    got = ag.tensor([True, False]) ** 2
    assert got.dtype == ag.int64
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


BOOL_REFUSALS = {
    "relu": lambda lib, b, f: b.relu(),
    "relu_": lambda lib, b, f: b.clone().relu_(),
    "abs": lambda lib, b, f: b.abs(),
    "neg": lambda lib, b, f: -b,
    "bool minus float": lambda lib, b, f: b - f,
    "float minus bool": lambda lib, b, f: f - b,
    "bool minus bool": lambda lib, b, f: b - b,
    "bool minus number": lambda lib, b, f: b - 1,
    "number minus bool": lambda lib, b, f: 1 - b,
    "sub_ of a bool": lambda lib, b, f: f.clone().sub_(b),
    "sub with alpha": lambda lib, b, f: lib.sub(f, b, alpha=2),
}


@pytest.mark.parametrize("case", list(BOOL_REFUSALS))
def test_bool_tensors_are_refused_as_pytorch_refuses_them(case):
    run = BOOL_REFUSALS[case]
    with pytest.raises(Exception) as expected:
        run(torch, torch.tensor([True, False]), torch.tensor([1.5, 2.5], dtype=torch.float64))
    with pytest.raises(type(expected.value)) as got:
        run(ag, ag.tensor([True, False]), ag.tensor([1.5, 2.5], dtype=ag.float64))
    assert str(got.value) == str(expected.value)
