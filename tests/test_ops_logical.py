"""Bitwise and logical ops, comparisons' broadcast errors, equal and allclose: PyTorch as oracle.

Each program is written once against a module ``m`` (torch or aiograd) and run on both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from oracles import run_both

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

Program = Callable[[Any], Any]


def assert_same_tensor(a: ag.Tensor, t: Any) -> None:
    assert str(a.dtype) == str(t.dtype).removeprefix("torch."), (a.dtype, t.dtype)
    assert tuple(a.shape) == tuple(t.shape)
    np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())
    assert a.requires_grad == t.requires_grad


def assert_same_error(program: Program) -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as t_err:  # noqa: B017  (the type is torch's, checked below)
        program(torch)
    with pytest.raises(type(t_err.value)) as a_err:
        program(ag)
    assert str(a_err.value) == str(t_err.value)


def bools(m: Any) -> Any:
    return m.tensor([True, False, True, False])


def ints(m: Any, dtype: str = "int64") -> Any:
    return m.tensor([0, 1, 6, -3], dtype=getattr(m, dtype))


# ---- & | ^ ~ ----

BITWISE = {
    "bool & bool": lambda m: bools(m) & m.tensor([True, True, False, False]),
    "bool | bool": lambda m: bools(m) | m.tensor([True, True, False, False]),
    "bool ^ bool": lambda m: bools(m) ^ m.tensor([True, True, False, False]),
    "int & int": lambda m: ints(m) & m.tensor([3, 3, 5, 5]),
    "int | int": lambda m: ints(m) | m.tensor([3, 3, 5, 5]),
    "int ^ int": lambda m: ints(m) ^ m.tensor([3, 3, 5, 5]),
    "bool & number int": lambda m: bools(m) & 1,
    "bool | number bool": lambda m: bools(m) | True,
    "number bool ^ bool": lambda m: True ^ bools(m),
    "number int & int": lambda m: 6 & ints(m),
    "int32 & int64": lambda m: ints(m, "int32") & ints(m),
    "int32 | number": lambda m: ints(m, "int32") | 8,
    "uint8 ^ int8": lambda m: ints(m, "uint8") ^ ints(m, "int8"),
    "int | bool": lambda m: ints(m) | bools(m),
    "broadcast": lambda m: m.tensor([[1], [2]]) & m.tensor([3, 6, 7]),
    "0-d int64 & int32": lambda m: m.tensor(7) & ints(m, "int32"),
    "method": lambda m: ints(m).bitwise_xor(m.tensor(5)),
    "~bool": lambda m: ~bools(m),
    "~int": lambda m: ~ints(m),
    "~int32": lambda m: ~ints(m, "int32"),
    "~uint8": lambda m: ~ints(m, "uint8"),
    "bitwise_not": lambda m: ints(m).bitwise_not(),
}


@pytest.mark.parametrize("name", sorted(BITWISE))
def test_bitwise_ops_match_torch(name):
    assert_same_tensor(*run_both(BITWISE[name]))


BITWISE_ERRORS = {
    "float & float": lambda m: m.ones(2) & m.ones(2),
    "bool | float": lambda m: bools(m) | m.ones(4),
    "float64 ^ int": lambda m: m.ones(4, dtype=m.float64) ^ ints(m),
    "int & float number": lambda m: ints(m) & 1.5,
    "float16 & bool number": lambda m: m.ones(2, dtype=m.float16) & True,
    "~float": lambda m: ~m.ones(2),
    "~float64": lambda m: ~m.ones(2, dtype=m.float64),
    "& None": lambda m: ints(m) & None,
    "shapes": lambda m: m.tensor([1, 2]) & m.tensor([1, 2, 3]),
}


@pytest.mark.parametrize("name", sorted(BITWISE_ERRORS))
def test_bitwise_errors_match_torch(name):
    assert_same_error(BITWISE_ERRORS[name])


def test_bitwise_result_of_tensors_that_require_grad_has_no_history():
    x = ag.ones(2, requires_grad=True)
    y = (x > 0) & (x < 2)
    assert not y.requires_grad and y.grad_fn is None
    np.testing.assert_array_equal(y.numpy(), [True, True])


# ---- logical_and / or / xor / not ----

LOGICAL = {
    "and bool": lambda m: bools(m).logical_and(m.tensor([True, True, False, False])),
    "or int float": lambda m: ints(m).logical_or(m.tensor([0.0, 0.0, 2.5, 0.0])),
    "xor float float": lambda m: m.logical_xor(m.tensor([0.0, 1.0, -0.0, 3.0]),
                                               m.tensor([0.0, 0.0, 1.0, 1.0])),
    "and nan": lambda m: m.logical_and(m.tensor([float("nan"), 0.0]), m.ones(2)),
    "and broadcast": lambda m: m.tensor([[1], [0]]).logical_and(m.tensor([1.0, 0.0, 2.0])),
    "not float": lambda m: m.tensor([0.0, -1.5, float("nan")]).logical_not(),
    "not int": lambda m: m.logical_not(ints(m)),
    "not bool": lambda m: bools(m).logical_not(),
    "and of a tensor that requires grad": lambda m: m.logical_and(
        m.ones(2, requires_grad=True), m.zeros(2)),
}


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_ops_match_torch(name):
    assert_same_tensor(*run_both(LOGICAL[name]))


LOGICAL_ERRORS = {
    "number other": lambda m: bools(m).logical_and(True),
    "shapes": lambda m: m.logical_or(m.ones(2), m.ones(3)),
}


@pytest.mark.parametrize("name", sorted(LOGICAL_ERRORS))
def test_logical_errors_match_torch(name):
    assert_same_error(LOGICAL_ERRORS[name])


# ---- comparisons that do not broadcast ----

@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((2,), (3,)), ((2, 3), (4, 3)), ((2, 3), (3, 2)), ((3,), (2, 2)), ((2, 2), (3,)),
     ((2, 1, 3), (4, 2))],
    ids=str,
)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_comparison_of_shapes_that_do_not_broadcast_raises_as_torch(op, a_shape, b_shape):
    def program(m: Any) -> Any:
        return eval(f"a {op} b", {"a": m.ones(*a_shape), "b": m.ones(*b_shape)})

    assert_same_error(program)


def test_comparison_methods_raise_as_torch_for_shapes_that_do_not_broadcast():
    assert_same_error(lambda m: m.ones(2).lt(m.ones(3)))


# ---- equal / allclose ----

EQUAL = {
    "same": lambda m: m.equal(m.ones(2), m.ones(2)),
    "other dtype": lambda m: m.equal(m.ones(2), m.ones(2, dtype=m.int64)),
    "other values": lambda m: m.equal(m.ones(2), m.tensor([1.0, 2.0])),
    "other shape": lambda m: m.equal(m.ones(2), m.ones(1)),
    "same numel other shape": lambda m: m.equal(m.ones(1, 2), m.ones(2)),
    "nan": lambda m: m.equal(m.tensor([float("nan")]), m.tensor([float("nan")])),
    "method": lambda m: m.ones(2).equal(m.ones(2)),
    "allclose same": lambda m: m.allclose(m.ones(2), m.ones(2)),
    "allclose rtol": lambda m: m.allclose(m.tensor([1.0]), m.tensor([1.00001])),
    "allclose atol": lambda m: m.allclose(m.tensor([0.0]), m.tensor([1e-9])),
    "allclose loose": lambda m: m.allclose(m.tensor([1.0]), m.tensor([1.1]), rtol=0.2),
    "allclose inf": lambda m: m.allclose(m.tensor([float("inf")]), m.tensor([float("inf")])),
    "allclose nan": lambda m: m.allclose(m.tensor([float("nan")]), m.tensor([float("nan")])),
    "allclose equal_nan": lambda m: m.allclose(m.tensor([float("nan")]),
                                               m.tensor([float("nan")]), equal_nan=True),
    "allclose broadcast": lambda m: m.allclose(m.ones(2), m.ones(2, 2)),
    "allclose ints": lambda m: m.allclose(m.tensor([1, 2]), m.tensor([1, 2])),
    "allclose method": lambda m: m.ones(2).allclose(m.ones(2) + 1e-9),
}


@pytest.mark.parametrize("name", sorted(EQUAL))
def test_equal_and_allclose_match_torch(name):
    ours, theirs = run_both(EQUAL[name])
    assert type(ours) is bool
    assert ours == theirs


EQUAL_ERRORS = {
    "equal number": lambda m: m.equal(m.ones(2), 1),
    "allclose number": lambda m: m.allclose(m.ones(2), 1.0),
    "allclose dtypes": lambda m: m.allclose(m.ones(2), m.ones(2, dtype=m.float64)),
    "allclose shapes": lambda m: m.allclose(m.ones(2), m.ones(3)),
}


@pytest.mark.parametrize("name", sorted(EQUAL_ERRORS))
def test_equal_and_allclose_errors_match_torch(name):
    assert_same_error(EQUAL_ERRORS[name])
