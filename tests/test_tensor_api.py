"""The tensor API surface against PyTorch: factories, conversions, Tensor methods, clamp and
friends, mm/bmm/dot/mv, and the module-level functions.

Most programs are written once against a module ``m`` (torch or aiograd) and run on both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, run_both

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

Program = Callable[[Any], Any]


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def assert_same_tensor(a: ag.Tensor, t: Any, exact: bool = True) -> None:
    assert dtype_name(a.dtype) == dtype_name(t.dtype), (a.dtype, t.dtype)
    assert tuple(a.shape) == tuple(t.shape)
    if exact:
        np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())
    else:
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-6)
    assert a.requires_grad == t.requires_grad
    t_fn = None if t.grad_fn is None else type(t.grad_fn).__name__
    assert (None if a.grad_fn is None else a.grad_fn.name()) == t_fn


def norm(x: Any) -> Any:
    """A comparable form of a result: tensors by dtype, shape and values; dtypes by name."""
    if hasattr(x, "grad_fn"):
        return ("tensor", dtype_name(x.dtype), tuple(x.shape), x.detach().numpy().tolist(),
                x.requires_grad)
    if isinstance(x, tuple):
        return tuple(norm(e) for e in x)
    if isinstance(x, (bool, int, float, type(None))):
        return x
    return dtype_name(x)


def assert_same_error(program: Program, kind: type[BaseException] | None = None) -> None:
    """The program raises torch's message; with torch's type unless ``kind`` is given
    (where an existing test of this repository pins another type)."""
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as t_err:  # noqa: B017  (the type is torch's, checked below)
        program(torch)
    with pytest.raises(kind or type(t_err.value)) as a_err:
        program(ag)
    assert str(a_err.value).removeprefix("tensor(): ") == str(t_err.value)


# ---- tensor(): dtype inference ----

TENSOR_DATA = {
    "list of np.float64": [np.float64(1.5)],
    "list of np.float32": [np.float32(1.5), np.float32(2)],
    "list of np.int32": [np.int32(1), np.int32(2)],
    "np.int32 and int": [np.int32(1), 2],
    "np.int32 and float": [np.int32(1), 2.5],
    "np.float16 and int": [np.float16(1), 2],
    "np.float16 and float": [np.float16(1), 2.0],
    "np.float32 and np.int64": [np.float32(1), np.int64(2)],
    "np.int8 and np.uint8": [np.int8(1), np.uint8(2)],
    "nested np.float64": [[np.float64(1)], [2.0]],
    "bool and int": [True, 2],
    "bool and float": [True, 2.5],
    "np.bool_": [np.bool_(True)],
    "ints": [[1, 2], [3, 4]],
    "floats": [[1.0, 2.0], [3.0, 4.0]],
    "tuple": (1, 2.5),
    "empty": [],
    "empty rows": [[], []],
    "np.float64 scalar": np.float64(1.5),
    "np.int32 scalar": np.int32(3),
    "int": 3,
    "bool": True,
    "int64 max": 2**63 - 1,
    "int64 min": -(2**63),
    "big int among floats": [1.5, 2**63],
    "big int as float64": 2**70,
    "uint8 from -1": ([-1, 255, -129], "uint8"),
    "float32 from ints": ([1, 2], "float32"),
    "int64 from floats": ([1.7, -2.7], "int64"),
}


@pytest.mark.parametrize("name", sorted(TENSOR_DATA))
def test_tensor_infers_dtype_and_values_as_torch(name):
    data = TENSOR_DATA[name]
    dtype = None
    if isinstance(data, tuple) and isinstance(data[1], str):
        data, dtype = data

    def program(m: Any) -> Any:
        if name == "big int as float64":
            return m.tensor(data, dtype=m.float64)
        return m.tensor(data, dtype=None if dtype is None else getattr(m, dtype))

    assert_same_tensor(*run_both(program))


def test_tensor_of_a_list_of_tensors_takes_their_dtype():
    assert_same_tensor(*run_both(
        lambda m: m.tensor([m.tensor(1.0, dtype=m.float64), m.tensor(2.0, dtype=m.float64)])))


TENSOR_ERRORS = {
    "int beyond int64": lambda m: m.tensor(2**63),
    "int below int64": lambda m: m.tensor(-(2**63) - 1),
    "int beyond int64 in a list": lambda m: m.tensor([1, 2**63]),
    "int beyond int64 for int32": lambda m: m.tensor(2**63, dtype=m.int32),
    "int beyond int32": lambda m: m.tensor([2**31], dtype=m.int32),
    "int beyond uint8": lambda m: m.tensor([256], dtype=m.uint8),
    "int beyond int8": lambda m: m.tensor([128], dtype=m.int8),
}


@pytest.mark.parametrize("name", sorted(TENSOR_ERRORS))
def test_tensor_of_an_int_out_of_range_raises_as_torch(name):
    assert_same_error(TENSOR_ERRORS[name])


# test_bad_input.py pins TypeError naming "tensor()" for these; the text is torch's.
@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1, 2], [3, 4, 5]], [[[1, 2]], [[3]]],
                                  [[1, 2], [3, 4], [5]], None, [1.0, None]], ids=str)
def test_tensor_of_ragged_lists_or_none_says_what_torch_says(data):
    assert_same_error(lambda m: m.tensor(data), TypeError)


def test_tensor_rejects_strings_inside_lists():
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        ag.tensor([1.0, "1"])


# ---- other factories ----

FACTORIES = {
    "empty": lambda m: tuple(m.empty(2, 3).shape),
    "empty tuple": lambda m: m.empty((2,)).dtype,
    "empty dtype": lambda m: m.empty(2, dtype=m.int64).dtype,
    "empty 0-d": lambda m: tuple(m.empty(()).shape),
    "empty requires_grad": lambda m: m.empty(2, requires_grad=True).requires_grad,
    "empty_like": lambda m: m.empty_like(m.ones(2, 3, dtype=m.float64)).dtype,
    "arange 0-d tensor": lambda m: m.arange(m.tensor(3)),
    "arange 0-d float tensor": lambda m: m.arange(m.tensor(3.0)),
    "arange empty": lambda m: m.arange(0, 0, -1),
    "arange down": lambda m: m.arange(5, 0, -2),
    "is_tensor": lambda m: (m.is_tensor(m.ones(1)), m.is_tensor(np.ones(1)), m.is_tensor(1.0)),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_match_torch(name):
    ours, theirs = run_both(FACTORIES[name])
    assert norm(ours) == norm(theirs)


FACTORY_ERRORS = {
    "arange up with a negative step": lambda m: m.arange(0, 5, -1),
    "arange down with a positive step": lambda m: m.arange(5, 0, 1),
    "arange float step": lambda m: m.arange(0.0, 5.0, -0.5),
    "arange zero step": lambda m: m.arange(0, 5, 0),
    "randn int64": lambda m: m.randn(2, dtype=m.int64),
    "randn int32": lambda m: m.randn(2, dtype=m.int32),
    "randn bool": lambda m: m.randn(2, dtype=m.bool),
    "rand int64": lambda m: m.rand(2, dtype=m.int64),
    "rand uint8": lambda m: m.rand(2, 3, dtype=m.uint8),
    "randn_like int": lambda m: m.randn_like(m.tensor([1, 2])),
    "rand_like bool": lambda m: m.rand_like(m.tensor([True])),
    "linspace negative steps": lambda m: m.linspace(0, 1, -1),
    "linspace bool": lambda m: m.linspace(0, 1, 3, dtype=m.bool),
}


@pytest.mark.parametrize("name", sorted(FACTORY_ERRORS))
def test_factory_errors_match_torch(name):
    assert_same_error(FACTORY_ERRORS[name])


# test_bad_input.py pins ValueError for eye's sizes; the text is torch's.
@pytest.mark.parametrize("args", [(-1,), (2, -1)], ids=str)
def test_eye_with_a_negative_size_says_what_torch_says(args):
    assert_same_error(lambda m: m.eye(*args), ValueError)


def test_randn_in_float16_and_float64_keeps_the_dtype():
    assert ag.randn(2, dtype=ag.float16).dtype == ag.float16
    assert ag.rand(2, dtype=ag.float64).dtype == ag.float64


@pytest.mark.parametrize(
    "start, end, steps, dtype",
    [(0, 1, 5, None), (-1.3, 2.7, 7, None), (0, 1, 1, None), (0, 1, 0, None),
     (2.0, -3.0, 6, None), (0, 1, 3, "float64"), (0.1, 0.7, 9, "float64"),
     (0, 10, 4, "int64"), (-10, 0, 4, "int64"), (0, -10, 4, "int64"), (-7, 13, 6, "int32"),
     (0, 1, 5, "float16")],
)
def test_linspace_matches_torch(start, end, steps, dtype):
    """Up to the last bit: PyTorch's vectorized kernel steps from the start of each SIMD
    block, so its rounding depends on the CPU; the ends are exact."""
    ours, theirs = run_both(
        lambda m: m.linspace(start, end, steps, dtype=None if dtype is None else getattr(m, dtype)))
    assert_same_tensor(ours, theirs, exact=dtype is not None and dtype.startswith("int"))
    if steps:
        assert ours[0].item() == theirs[0].item() and ours[-1].item() == theirs[-1].item()


def test_linspace_accepts_0d_tensor_bounds():
    assert_same_tensor(*run_both(lambda m: m.linspace(m.tensor(0.0), m.tensor(1.0), 3)))


def test_as_tensor_shares_a_numpy_array_of_the_same_dtype():
    a = np.ones(2)
    t = ag.as_tensor(a)
    a[0] = 5.0
    assert t.dtype == ag.float64
    np.testing.assert_array_equal(t.numpy(), [5.0, 1.0])


def test_as_tensor_copies_a_numpy_array_of_another_dtype():
    a = np.ones(2, dtype=np.float32)
    t = ag.as_tensor(a, dtype=ag.float64)
    a[0] = 5.0
    np.testing.assert_array_equal(t.numpy(), [1.0, 1.0])


def test_as_tensor_returns_the_tensor_itself_when_nothing_changes():
    x = ag.ones(2, requires_grad=True)
    assert ag.as_tensor(x) is x
    assert ag.as_tensor(x, dtype=ag.float32) is x


@pytest.mark.parametrize("program", [
    lambda m: m.as_tensor([1, 2]),
    lambda m: m.as_tensor([1, 2], dtype=m.float64),
    lambda m: m.as_tensor(m.ones(2, requires_grad=True), dtype=m.float64),
])
def test_as_tensor_matches_torch(program):
    assert_same_tensor(*run_both(program))


def test_dtype_names_are_torchs():
    torch = pytest.importorskip("torch")
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
                 "float64", "double", "long", "half"):
        assert dtype_name(getattr(ag, name)) == dtype_name(getattr(torch, name)), name


# ---- conversions ----

CONVERSION_ERRORS = {
    "float of two": lambda m: float(m.ones(2)),
    "float of none": lambda m: float(m.ones(0)),
    "int of two": lambda m: int(m.tensor([1, 2])),
    "bool of two": lambda m: bool(m.ones(2)),
    "bool of none": lambda m: bool(m.ones(0)),
    "item of two": lambda m: m.ones(2).item(),
    "size out of range": lambda m: m.ones(2, 3).size(2),
    "size negative out of range": lambda m: m.ones(2).size(-2),
    "size of 0-d": lambda m: m.tensor(1.0).size(0),
    "stride out of range": lambda m: m.ones(2, 3).stride(-3),
    "stride of 0-d": lambda m: m.tensor(1.0).stride(-1),
}


@pytest.mark.parametrize("name", sorted(CONVERSION_ERRORS))
def test_conversion_errors_match_torch(name):
    assert_same_error(CONVERSION_ERRORS[name])


def test_float_int_bool_of_one_element_work_at_any_rank():
    x = ag.tensor([[2.7]])
    assert (float(x), int(x), bool(x)) == (pytest.approx(2.7), 2, True)


# ---- Tensor methods ----

METHODS = {
    "stride": lambda m: m.ones(2, 3).stride(),
    "stride dim": lambda m: (m.ones(2, 3).stride(0), m.ones(2, 3).stride(-1)),
    "stride transposed": lambda m: m.ones(2, 3).transpose(0, 1).stride(),
    "stride expanded": lambda m: m.ones(2, 1).expand(2, 3).stride(),
    "stride 0-d": lambda m: m.tensor(1.0).stride(),
    "stride float64 3-d": lambda m: m.ones(2, 3, 4, dtype=m.float64).stride(),
    "nelement": lambda m: m.ones(2, 3).nelement(),
    "element_size": lambda m: tuple(m.ones(1, dtype=d).element_size() for d in (
        m.float16, m.float32, m.float64, m.int64, m.int32, m.uint8, m.bool)),
    "is_floating_point": lambda m: tuple(m.ones(1, dtype=d).is_floating_point() for d in (
        m.float16, m.float64, m.int64, m.bool)),
    "dim": lambda m: (m.ones(2, 3).dim(), m.tensor(1.0).dim()),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_tensor_methods_match_torch(name):
    ours, theirs = run_both(METHODS[name])
    assert norm(ours) == norm(theirs)


NEW_TENSORS = {
    "type_as": lambda m: m.ones(2).type_as(m.ones(2, dtype=m.float64)),
    "type_as records the cast": lambda m: m.ones(2, requires_grad=True).type_as(
        m.ones(1, dtype=m.float64)),
    "type_as same dtype": lambda m: m.ones(2, requires_grad=True).type_as(m.ones(1)),
    "new_zeros": lambda m: m.ones(2, dtype=m.int64).new_zeros(3),
    "new_zeros tuple": lambda m: m.ones(2, dtype=m.int64).new_zeros((3, 2)),
    "new_zeros sizes": lambda m: m.ones(2, dtype=m.float64).new_zeros(3, 2),
    "new_ones dtype": lambda m: m.ones(2).new_ones(2, dtype=m.float64),
    "new_ones requires_grad": lambda m: m.ones(2).new_ones(2, requires_grad=True),
    "new_full truncates": lambda m: m.ones(2, dtype=m.int64).new_full((2,), 2.7),
    "new_full bool fill": lambda m: m.ones(2).new_full([2], True),
    "new_tensor ints": lambda m: m.ones(2, dtype=m.float64).new_tensor([1, 2]),
    "new_tensor array": lambda m: m.ones(2, dtype=m.int64).new_tensor(np.array([1.5])),
    "new_tensor tensor": lambda m: m.ones(2, dtype=m.float64).new_tensor(m.tensor([1, 2])),
    "new_tensor bool": lambda m: m.ones(2, dtype=m.int64).new_tensor(True),
}


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")  # torch's, for new_tensor
@pytest.mark.parametrize("name", sorted(NEW_TENSORS))
def test_new_tensors_match_torch(name):
    assert_same_tensor(*run_both(NEW_TENSORS[name]))


def test_new_empty_has_the_dtype_and_shape():
    x = ag.ones(2, dtype=ag.int32).new_empty(3, 2)
    assert (x.dtype, tuple(x.shape)) == (ag.int32, (3, 2))


# ---- clamp with tensor bounds, clamp_min/max, clip, clamp_ ----

X = np.array([[-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], [-2.0, -1.0, 0.0, 0.5, 1.0, 3.0]])
LO = np.array([[-1.0], [0.0]])            # broadcast along rows; ties at -1.0 and 0.0
HI = np.array([1.0, 1.0, 0.0, -0.5, 1.0, 2.0])  # ties at 1.0, hi < lo in places


@pytest.mark.parametrize("case", ["both", "min", "max", "lo equals hi"])
def test_clamp_with_tensor_bounds_matches_torch_values_and_grads(case):
    if case == "both":
        check_against_torch(lambda x, lo, hi: x.clamp(lo, hi),
                            lambda x, lo, hi: x.clamp(lo, hi), X, LO, HI)
    elif case == "min":
        check_against_torch(lambda x, lo: x.clamp(min=lo), lambda x, lo: x.clamp(min=lo), X, LO)
    elif case == "max":
        check_against_torch(lambda x, hi: x.clamp(max=hi), lambda x, hi: x.clamp(max=hi), X, HI)
    else:
        check_against_torch(lambda x, lo, hi: x.clamp(lo, hi),
                            lambda x, lo, hi: x.clamp(lo, hi), X, X * 0 + 0.5, X * 0 + 0.5)


def test_clamp_with_tensor_bounds_second_order_matches_torch():
    check_second_order(lambda x, lo, hi: x.clamp(lo, hi) * x * lo,
                       lambda x, lo, hi: x.clamp(lo, hi) * x * lo, X, LO, HI)


@pytest.mark.parametrize("fn", ["clamp_min", "clamp_max"])
@pytest.mark.parametrize("bound", ["tensor", "number"])
def test_clamp_min_and_max_match_torch(fn, bound):
    b = LO if bound == "tensor" else 0.25
    if bound == "tensor":
        check_against_torch(lambda x, lo: getattr(x, fn)(lo), lambda x, lo: getattr(x, fn)(lo),
                            X, b)
    else:
        check_against_torch(lambda x: getattr(x, fn)(b), lambda x: getattr(x, fn)(b), X)


CLAMP_RESULTS = {
    "node tensor bounds": lambda m: m.ones(2, requires_grad=True).clamp(m.zeros(2), m.ones(2)),
    "node tensor min": lambda m: m.ones(2, requires_grad=True).clamp(min=m.zeros(2)),
    "node tensor max": lambda m: m.ones(2, requires_grad=True).clamp(max=m.zeros(2)),
    "node clamp_min number": lambda m: m.ones(2, requires_grad=True).clamp_min(0.5),
    "node clamp_min tensor": lambda m: m.ones(2, requires_grad=True).clamp_min(m.zeros(1)),
    "node clamp_max number": lambda m: m.ones(2, requires_grad=True).clamp_max(0.5),
    "node clamp_max tensor": lambda m: m.ones(2, requires_grad=True).clamp_max(m.zeros(1)),
    "clip numbers": lambda m: m.tensor([1.0, 3.0], requires_grad=True).clip(0, 2),
    "clip tensors": lambda m: m.tensor([1.0, 3.0], requires_grad=True).clip(m.zeros(2), m.ones(2)),
    "module clamp": lambda m: m.clamp(m.tensor([1.0, 3.0]), max=2),
    "int with float bound": lambda m: m.tensor([1, 5]).clamp(min=2.5),
    "int with float max": lambda m: m.tensor([1, 5]).clamp(max=2.5),
    "int with int bounds": lambda m: m.tensor([1, 5]).clamp(2, 4),
    "bool with int bounds": lambda m: m.tensor([True, False]).clamp(0, 1),
    "int with float tensor": lambda m: m.tensor([1, 5]).clamp(m.tensor([2.0, 2.0])),
    "int with 0-d float64": lambda m: m.tensor([1, 5]).clamp(m.tensor(2.0, dtype=m.float64)),
    "float32 with 0-d float64": lambda m: m.ones(2).clamp(m.tensor(2.0, dtype=m.float64)),
    "float32 with float64": lambda m: m.ones(2).clamp(m.tensor([2.0, 0.0], dtype=m.float64)),
    "nan": lambda m: m.tensor([float("nan"), 1.0]).clamp(m.zeros(2), m.ones(2)),
}


@pytest.mark.parametrize("name", sorted(CLAMP_RESULTS))
def test_clamp_results_match_torch(name):
    assert_same_tensor(*run_both(CLAMP_RESULTS[name]))


CLAMP_ERRORS = {
    "shapes": lambda m: m.clamp(m.ones(2), min=m.ones(3)),
    "shapes of max": lambda m: m.ones(2, 3).clamp(m.ones(3), m.ones(2)),
    "in place int with float bound": lambda m: m.tensor([1, 2]).clamp_(max=2.5),
    "in place broadcast": lambda m: m.ones(2).clamp_(min=m.ones(2, 2)),
    "in place leaf": lambda m: m.ones(2, requires_grad=True).clamp_(0, 1),
    "maximum with a number": lambda m: m.maximum(m.ones(2), 2.0),
    "maximum shapes": lambda m: m.minimum(m.ones(2), m.ones(3)),
}


@pytest.mark.parametrize("name", sorted(CLAMP_ERRORS))
def test_clamp_errors_match_torch(name):
    assert_same_error(CLAMP_ERRORS[name])


@pytest.mark.parametrize("bounds", [(ag.ones(1), 2.0), (0.0, ag.ones(1))], ids=["min", "max"])
def test_clamp_with_a_tensor_and_a_number_raises_type_error(bounds):
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        ag.ones(2).clamp(*bounds)


@pytest.mark.parametrize("bounds", [{"max": 2.0}, {"min": "lo", "max": "hi"}], ids=str)
def test_clamp_in_place_matches_torch(bounds):
    torch = pytest.importorskip("torch")
    results = []
    for m in (ag, torch):
        x = m.tensor([1.0, 5.0, -3.0], dtype=m.float64, requires_grad=True)
        kw = {k: m.tensor([0.0, 2.0, -1.0], dtype=m.float64, requires_grad=True) if v == "lo"
              else m.tensor([1.5, 4.0, -2.0], dtype=m.float64, requires_grad=True) if v == "hi"
              else v for k, v in bounds.items()}
        y = x * 1
        out = y.clamp_(**kw)
        assert out is y
        backward = y.backward_sync if m is ag else y.backward
        backward(m.tensor([1.0, 2.0, 3.0], dtype=m.float64))
        results.append((y.detach().numpy().copy(), y.grad_fn.name() if m is ag else
                        type(y.grad_fn).__name__, x.grad.numpy().copy(),
                        [b.grad.numpy().copy() for b in kw.values() if isinstance(b, m.Tensor)]))
    (ours, theirs) = results
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1]
    np.testing.assert_array_equal(ours[2], theirs[2])
    for a, t in zip(ours[3], theirs[3], strict=True):
        np.testing.assert_array_equal(a, t)


def test_clamp_in_place_bumps_the_version_and_keeps_the_dtype():
    x = ag.tensor([1, 5, -3])
    x.clamp_(-1, 2)
    assert x._version == 1 and x.dtype == ag.int64
    np.testing.assert_array_equal(x.numpy(), [1, 2, -1])


# ---- maximum / minimum, where method, log1p / expm1 / sin / cos ----

A = np.array([[1.0, 2.0, -1.0, 0.5], [3.0, -2.0, 0.0, 0.5]])
B = np.array([1.0, 0.0, -1.0, 2.0])  # ties with A at 1.0, -1.0


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_maximum_and_minimum_split_ties_as_torch(fn):
    check_against_torch(lambda a, b: getattr(ag, fn)(a, b), lambda a, b: getattr(a, fn)(b), A, B)
    check_second_order(lambda a, b: getattr(a, fn)(b) * a * b,
                       lambda a, b: getattr(a, fn)(b) * a * b, A, B)


@pytest.mark.parametrize("program", [
    lambda m: m.maximum(m.ones(2, requires_grad=True), m.zeros(2)),
    lambda m: m.minimum(m.zeros(2), m.ones(2, requires_grad=True)),
    lambda m: m.maximum(m.tensor([1, 5]), m.tensor([2.5, 0.5])),
    lambda m: m.minimum(m.tensor([1.0]), m.tensor([2.0], dtype=m.float64)),
    lambda m: m.maximum(m.tensor([float("nan"), 1.0]), m.zeros(2)),
], ids=["max node", "min node", "int float", "float32 float64", "nan"])
def test_maximum_and_minimum_results_match_torch(program):
    assert_same_tensor(*run_both(program))


@pytest.mark.parametrize("program", [
    lambda m: m.tensor([1.0, 2.0], requires_grad=True).where(m.tensor([False, True]), 0.0),
    lambda m: m.tensor([1.0, 2.0]).where(m.tensor([True, False]), m.tensor([[5.0], [6.0]])),
], ids=["number", "broadcast"])
def test_where_method_matches_torch(program):
    assert_same_tensor(*run_both(program))


@pytest.mark.parametrize("cond", [[True, False, True], [[1, 0], [0, 2]]], ids=str)
def test_where_of_a_condition_alone_gives_nonzero_indices_as_torch(cond):
    ours, theirs = run_both(lambda m: m.where(m.tensor(cond)))
    assert len(ours) == len(theirs)
    for a, t in zip(ours, theirs):
        assert_same_tensor(a, t)


SMOOTH = {
    "log1p": np.array([[-0.5, 0.0, 0.5], [1.0, 2.0, 3.0]]),
    "expm1": np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, -3.0]]),
    "sin": np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, -3.0]]),
    "cos": np.array([[-1.0, 0.0, 0.5], [1.0, 2.0, -3.0]]),
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_smooth_extras_match_torch(name):
    values = SMOOTH[name]
    check_against_torch(lambda x: getattr(x, name)(), lambda t: getattr(t, name)(), values)
    check_second_order(lambda x: getattr(x, name)() * x, lambda t: getattr(t, name)() * t,
                       values)
    assert_same_tensor(*run_both(lambda m: getattr(m.tensor([0.5], requires_grad=True), name)()),
                       exact=False)
    assert_same_tensor(*run_both(lambda m: getattr(m, name)(m.tensor([1, 2]))), exact=False)


# ---- mm / bmm / dot / mv, and matmul of two dtypes ----

PRODUCTS = {
    "mm": ("mm", (np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4) / 7)),
    "bmm": ("bmm", (np.arange(12.0).reshape(2, 2, 3), np.arange(24.0).reshape(2, 3, 4) / 7)),
    "dot": ("dot", (np.arange(3.0), np.array([1.0, -2.0, 0.5]))),
    "mv": ("mv", (np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0, 0.5]))),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_match_torch(name):
    method, arrays = PRODUCTS[name]
    check_against_torch(lambda a, b: getattr(a, method)(b), lambda a, b: getattr(a, method)(b),
                        *arrays)
    check_second_order(lambda a, b: getattr(ag, method)(a * a, b),
                       lambda a, b: getattr(a * a, method)(b), *arrays)
    shapes = [a.shape for a in arrays]
    assert_same_tensor(*run_both(lambda m: getattr(m.ones(*shapes[0], requires_grad=True),
                                                   method)(m.ones(*shapes[1]))))


PRODUCT_ERRORS = {
    "mm 1-d other": lambda m: m.ones(2, 3).mm(m.ones(3)),
    "mm 1-d self": lambda m: m.ones(3).mm(m.ones(3, 2)),
    "mm shapes": lambda m: m.ones(2, 3).mm(m.ones(4, 2)),
    "mm shapes before dtypes": lambda m: m.ones(2, 3).mm(m.ones(4, 2, dtype=m.float64)),
    "mm dtypes": lambda m: m.ones(2, 3).mm(m.ones(3, 2, dtype=m.float64)),
    "mm number": lambda m: m.ones(2, 3).mm(2.0),
    "bmm 2-d self": lambda m: m.ones(2, 3).bmm(m.ones(2, 3, 4)),
    "bmm 2-d other": lambda m: m.ones(2, 2, 3).bmm(m.ones(3, 4)),
    "bmm inner": lambda m: m.ones(2, 2, 3).bmm(m.ones(2, 4, 4)),
    "bmm batch": lambda m: m.ones(2, 2, 3).bmm(m.ones(3, 3, 4)),
    "bmm dtypes": lambda m: m.ones(2, 2, 3, dtype=m.float64).bmm(m.ones(2, 3, 4)),
    "dot 2-d": lambda m: m.ones(2, 3).dot(m.ones(3)),
    "dot lengths": lambda m: m.ones(3).dot(m.ones(4)),
    "dot dtypes first": lambda m: m.ones(3).dot(m.ones(4, dtype=m.float64)),
    "dot int float": lambda m: m.ones(3, dtype=m.int64).dot(m.ones(3)),
    "dot number": lambda m: m.ones(3).dot(2.0),
    "mv 1-d": lambda m: m.ones(3).mv(m.ones(3)),
    "mv 2-d vec": lambda m: m.ones(2, 3).mv(m.ones(3, 1)),
    "mv sizes": lambda m: m.ones(2, 3).mv(m.ones(2)),
    "mv dtypes": lambda m: m.ones(2, 3).mv(m.ones(3, dtype=m.float64)),
}


@pytest.mark.parametrize("name", sorted(PRODUCT_ERRORS))
def test_product_errors_match_torch(name):
    assert_same_error(PRODUCT_ERRORS[name])


@pytest.mark.parametrize("a_shape, b_shape", [
    ((2,), (2,)), ((2, 2), (2,)), ((2,), (2, 2)), ((2, 2), (2, 2)), ((2, 2, 2), (2, 2)),
    ((2, 2), (2, 2, 2)), ((2, 2, 2), (2, 2, 2)), ((2, 2, 2), (2,)), ((2,), (2, 2, 2)),
], ids=str)
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32"),
                                    ("int64", "float32"), ("float16", "float32")], ids=str)
def test_matmul_of_two_dtypes_raises_as_torch(a_shape, b_shape, dtypes):
    assert_same_error(lambda m: m.ones(*a_shape, dtype=getattr(m, dtypes[0]))
                      @ m.ones(*b_shape, dtype=getattr(m, dtypes[1])))


# ---- module-level functions ----

FUNCTION_CALLS = {
    "abs": ((), {}), "exp": ((), {}), "sqrt": ((), {}), "tanh": ((), {}), "sigmoid": ((), {}),
    "relu": ((), {}), "sign": ((), {}), "neg": ((), {}), "sin": ((), {}), "log1p": ((), {}),
    "sum": ((), {"dim": 1}), "mean": ((0,), {"keepdim": True}), "amax": ((1,), {}),
    "prod": ((1,), {}), "cumsum": ((1,), {}), "logsumexp": ((1,), {}), "argmax": ((), {}),
    "reshape": (((3, 2),), {}), "transpose": ((0, 1), {}), "permute": (((1, 0),), {}),
    "unsqueeze": ((1,), {}), "flatten": ((), {}), "squeeze": ((), {}), "t": ((), {}),
    "flip": (((0,),), {}), "clamp": ((), {"min": 0.1}), "pow": ((2,), {}), "mul": ((3.0,), {}),
    "softmax": ((1,), {}), "gt": ((0.2,), {}), "logical_not": ((), {}),
}


@pytest.mark.parametrize("name", sorted(FUNCTION_CALLS))
def test_module_functions_match_torch(name):
    args, kwargs = FUNCTION_CALLS[name]
    x = np.abs(np.arange(6.0).reshape(2, 3) - 2.5) / 3
    assert_same_tensor(
        *run_both(lambda m: getattr(m, name)(m.tensor(x, requires_grad=True), *args, **kwargs)),
        exact=False)


def test_module_functions_return_what_the_method_returns():
    x = ag.tensor([[1.0, 5.0], [3.0, 2.0]])
    values, indices = ag.max(x, dim=1)
    np.testing.assert_array_equal(values.numpy(), [5.0, 3.0])
    np.testing.assert_array_equal(indices.numpy(), [1, 0])
    chunks = ag.split(x, 1, dim=0)
    assert len(chunks) == 2 and chunks[1].tolist() == [[3.0, 2.0]]


def test_module_functions_carry_the_method_name_docstring_and_signature():
    assert ag.clamp.__name__ == "clamp" and ag.clamp.__module__ == "aiograd"
    assert ag.clamp.__doc__ == ag.Tensor.clamp.__doc__
    assert list(inspect.signature(ag.clamp).parameters)[1:] == ["min", "max"]


def test_module_function_of_a_number_raises_as_torch():
    assert_same_error(lambda m: m.exp(2.0))


def test_every_name_in_all_exists():
    missing = [name for name in ag.__all__ if not hasattr(ag, name)]
    assert not missing


def test_tensors_nested_in_lists_are_read_as_their_one_element():
    # PyTorch: tensor([tensor([1.]), tensor([2.])]) is [1., 2.], not a (2, 1) stack
    torch = pytest.importorskip("torch")
    for program in (lambda m: m.tensor([m.tensor([1.0]), m.tensor([2.0])]),
                    lambda m: m.tensor([[m.tensor(1.0), 2.0]]),
                    lambda m: m.tensor([m.tensor(1), m.tensor(2.5)])):
        ours, theirs = program(ag), program(torch)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert dtype_name(ours.dtype) == dtype_name(theirs.dtype)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        ag.tensor([ag.tensor([1.0, 2.0]), ag.tensor([3.0, 4.0])])
