"""Result dtypes of arithmetic are PyTorch's (Note [Type promotion] in aiograd._ops._promote)."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest

import aiograd as ag
from aiograd._ops._promote import result_type

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
NUMBERS = [True, 2, 2.5]


def make(lib, dtype: str, zero_dim: bool):
    values = np.array(3 if zero_dim else [1, 2]).astype(dtype)
    return torch.tensor(values) if lib is torch else ag.tensor(values)


def torch_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


@pytest.mark.parametrize(("a", "b"), list(itertools.product(DTYPES, DTYPES)))
def test_result_type_of_two_tensors_is_pytorchs(a, b):
    for za, zb in itertools.product([False, True], repeat=2):
        expected = torch.result_type(make(torch, a, za), make(torch, b, zb))
        assert str(result_type(make(ag, a, za), make(ag, b, zb))) == torch_name(expected), (
            za, zb)


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("number", NUMBERS, ids=repr)
def test_result_type_of_a_tensor_and_a_number_is_pytorchs(a, number):
    for zero_dim in (False, True):
        expected = torch.result_type(make(torch, a, zero_dim), number)
        assert str(result_type(make(ag, a, zero_dim), number)) == torch_name(expected)


OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
       "truediv": operator.truediv, "pow": operator.pow}


def _dtype_or_error(op, x, y) -> str:
    try:
        return torch_name(op(x, y).dtype)
    except (RuntimeError, TypeError):
        return "error"


@pytest.mark.parametrize("name", sorted(OPS))
def test_arithmetic_result_dtypes_are_pytorchs(name):
    op = OPS[name]
    mismatches = []
    operands = [(d, z) for d in DTYPES for z in (False, True)] + [(n, None) for n in NUMBERS]
    for (a, za), (b, zb) in itertools.product(operands, repeat=2):
        if za is None and zb is None:
            continue  # two numbers: not a tensor op
        if "bool" in (a, b) and name in ("sub", "pow"):
            continue  # PyTorch refuses or has a rule of its own for bool sub/pow
        if a is True or b is True:
            if name in ("sub", "pow"):
                continue

        def build(lib, d, z):
            return d if z is None else make(lib, d, z)

        expected = _dtype_or_error(op, build(torch, a, za), build(torch, b, zb))
        if expected == "error":
            continue
        got = _dtype_or_error(op, build(ag, a, za), build(ag, b, zb))
        if got != expected:
            mismatches.append((a, za, b, zb, expected, got))
    assert mismatches == []


def test_gradients_keep_their_inputs_dtypes_across_promotion():
    # a float32 parameter times a 0-d float64 tensor stays float32 (NumPy: float64), and
    # each gradient comes back in its own input's dtype, with torch's values
    results = []
    for lib in (torch, ag):
        w = lib.tensor(np.array([1.5, -2.0], dtype="float32"), requires_grad=True)
        s = lib.tensor(np.array(3.0, dtype="float64"), requires_grad=True)
        i = lib.tensor(np.array([2, 3], dtype="int64"))
        y = (w * s + i) / i
        y.sum().backward() if lib is torch else y.sum().backward_sync()
        results.append((torch_name(y.dtype), torch_name(w.grad.dtype), torch_name(s.grad.dtype),
                        w.grad.numpy().tolist(), float(s.grad.numpy())))
    assert results[1][:3] == results[0][:3] == ("float32", "float32", "float64")
    np.testing.assert_allclose(results[1][3], results[0][3], rtol=1e-6)
    assert results[1][4] == pytest.approx(results[0][4], rel=1e-6)


def test_true_division_of_integers_gives_the_default_float():
    assert (ag.tensor([1, 2]) / ag.tensor([2, 4])).dtype == ag.float32
    assert (ag.tensor([1, 2]) / 2).dtype == ag.float32
    assert (3 / ag.tensor([1, 2])).dtype == ag.float32
    np.testing.assert_allclose((ag.tensor([1, 2]) / 2).numpy(), [0.5, 1.0])


@pytest.mark.parametrize(("a", "b"), [("float32", "int64"), ("int64", 2.5), ("float16", "float64"),
                                      ("bool", 2), ("float32", "zero-d float64")])
def test_where_result_dtype_is_pytorchs(a, b):
    dtypes = []
    for lib in (torch, ag):
        x = make(lib, a, False)
        if isinstance(b, str):
            y = make(lib, b.split()[-1], b.startswith("zero-d"))
        else:
            y = b
        dtypes.append(torch_name(lib.where(make(lib, "bool", False), x, y).dtype))
    assert dtypes[1] == dtypes[0]
