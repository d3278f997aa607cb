"""aiograd.set_default_dtype/get_default_dtype: the same dtypes as PyTorch's, everywhere a
default floating dtype is chosen."""

from __future__ import annotations

import pytest

import aiograd as ag

torch = pytest.importorskip("torch")

EXPRESSIONS = {
    "tensor(1.5)": lambda L: L.tensor(1.5),
    "tensor([1, 2.5])": lambda L: L.tensor([1, 2.5]),
    "tensor([])": lambda L: L.tensor([]),
    "zeros": lambda L: L.zeros(2),
    "ones": lambda L: L.ones(2),
    "empty": lambda L: L.empty(2),
    "full(1.5)": lambda L: L.full((2,), 1.5),
    "randn": lambda L: L.randn(2),
    "rand": lambda L: L.rand(2),
    "arange(0., 1., .5)": lambda L: L.arange(0.0, 1.0, 0.5),
    "linspace": lambda L: L.linspace(0, 1, 3),
    "eye": lambda L: L.eye(2),
    "int tensor * 2.5": lambda L: L.tensor([1, 2]) * 2.5,
    "0-d int + 1.5": lambda L: L.tensor(3) + 1.5,
    "int / 2": lambda L: L.tensor([1, 2]) / 2,
    "int / int": lambda L: L.tensor([1, 2]) / L.tensor([3, 4]),
    "sqrt(int)": lambda L: L.tensor([1, 4]).sqrt(),
    "exp(int)": lambda L: L.tensor([1]).exp(),
    "erf(int)": lambda L: L.erf(L.tensor([1, 2])),
    "clamp(int, 0, 1.5)": lambda L: L.tensor([1, 3]).clamp(0, 1.5),
    "float32 + 1.5": lambda L: L.ones(2, dtype=L.float32) + 1.5,
    "Linear weight": lambda L: L.nn.Linear(2, 2).weight,
}


@pytest.fixture(params=["float64", "float32", "float16"])
def default(request):
    ag.set_default_dtype(getattr(ag, request.param))
    torch.set_default_dtype(getattr(torch, request.param))
    try:
        yield request.param
    finally:
        ag.set_default_dtype(ag.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_dtypes_follow_the_default_as_in_torch(default, name):
    if default == "float16" and name in ("randn", "rand", "Linear weight", "erf(int)"):
        pytest.skip("PyTorch's CPU kernels for these refuse float16 defaults differently")
    ours, theirs = EXPRESSIONS[name](ag), EXPRESSIONS[name](torch)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert str(ag.get_default_dtype()) == default


def test_the_default_is_float32_and_integers_are_refused():
    assert ag.get_default_dtype() == ag.float32
    for bad in (ag.int64, "x", None):
        with pytest.raises(TypeError, match="floating-point"):
            ag.set_default_dtype(bad)
    assert ag.get_default_dtype() == ag.float32
