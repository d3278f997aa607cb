"""Tensor API at its edges, against torch 2.13 (found by a differential probe).

``&=``, ``|=``, ``^=`` and ``**=`` write in place (aliases and views see it, the
dtype stays, PyTorch's cast rules apply), a 0-d tensor formats as its number,
``arange`` computes its values as PyTorch does, and a 0-d tensor's ``flatten``
checks its dims.
"""

from __future__ import annotations

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")


def outcome(run):
    """``run()``'s value and dtype name, or the builtin type and message of its error (an
    aiograd error may subclass two builtins: ``aiograd._boundary.OutOfRangeError``)."""
    try:
        value = run()
    except Exception as exc:  # noqa: BLE001  (compared between the libraries)
        builtin = next(c for c in type(exc).__mro__ if c.__module__ == "builtins")
        return builtin.__name__, str(exc)
    return value.tolist(), str(value.dtype).replace("torch.", "")


def both(program):
    return outcome(lambda: program(torch)), outcome(lambda: program(ag))


IN_PLACE = {
    "and of bools": ("bool", [True, True, False], lambda t, lib: t.__iand__(
        lib.tensor([True, False, False]))),
    "or of uint8 with int64": ("uint8", [1, 2, 3], lambda t, lib: t.__ior__(lib.tensor([4, 4, 4]))),
    "xor of int32 with a number": ("int32", [1, 2, 3], lambda t, lib: t.__ixor__(1)),
    "or of a bool with int64": ("bool", [True, False, True], lambda t, lib: t.__ior__(
        lib.tensor([1, 0, 1]))),
    "and of a float": ("float32", [1.0, 2.0, 3.0], lambda t, lib: t.__iand__(
        lib.tensor([1, 0, 1]))),
    "power of floats": ("float64", [1.0, 2.0, 3.0], lambda t, lib: t.__ipow__(2)),
    "power of ints": ("int64", [1, 2, 3], lambda t, lib: t.__ipow__(2)),
    "fractional power of ints": ("int64", [1, 2, 3], lambda t, lib: t.__ipow__(0.5)),
    "power by a tensor": ("float64", [1.0, 2.0, 3.0], lambda t, lib: t.__ipow__(
        lib.tensor([2.0, 0.5, -1.0], dtype=lib.float64))),
}


@pytest.mark.parametrize("case", list(IN_PLACE))
def test_augmented_bitwise_and_power_write_in_place(case):
    dtype, values, write = IN_PLACE[case]

    def program(lib):
        t = lib.tensor(values, dtype=getattr(lib, dtype))
        alias, view = t, t[1:]
        result = write(t, lib)
        assert result is alias  # the same tensor: Python rebinds the name to it
        return lib.stack([alias[1:].to(lib.float64), view.to(lib.float64)])

    expected, got = both(program)
    assert got == expected


def test_power_in_place_records_pytorchs_node_and_gradients():
    def program(lib):
        w = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        e = lib.tensor([3.0, 0.5], dtype=lib.float64, requires_grad=True)
        a, b = w * 1, w * 1
        a **= 2
        b **= e
        assert type(a.grad_fn).__name__ == "PowBackward0"
        assert type(b.grad_fn).__name__ == "PowBackward1"
        loss = (a + b).sum()
        grads = (torch.autograd.grad(loss, [w, e]) if lib is torch
                 else ag.grad_sync(loss, [w, e]))
        return lib.cat(list(grads))

    expected, got = both(program)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)


def test_a_zero_dim_tensor_formats_as_its_number():
    for lib in (torch, ag):
        loss = (lib.tensor([1.0, 2.0], requires_grad=True) * 2).sum()
        assert f"{loss:.4f}" == "6.0000"
        assert f"{loss}" == "6.0"
        assert f"{lib.tensor(3):>4}" == "   3"
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{lib.tensor([1.0, 2.0]):.2f}"


@pytest.mark.parametrize("args, dtype", [
    ((-2.5, 2, 1), "int64"), ((3.7,), "int64"), ((0.5,), "int64"), ((0.5, 5, 1.5), "int64"),
    ((0, 1, 0.1), "int64"), ((-3, 3), "uint8"), ((0, 1, 0), None), ((1, 0, 1), None),
    ((0, 10, 3), None), ((5,), "float32"), ((0.0, 1.0, 0.3), "float64"),
], ids=str)
def test_arange_truncates_integer_bounds_and_checks_as_pytorch(args, dtype):
    def program(lib):
        return lib.arange(*args, **({} if dtype is None else {"dtype": getattr(lib, dtype)}))

    expected, got = both(program)
    assert got == expected


@pytest.mark.parametrize("args", [(1000, 1001, 0.01), (10, 0, -0.3), (1, 0, -0.1), (0, 1, 0.1)],
                         ids=str)
def test_float_arange_does_not_drift(args):
    # PyTorch steps in float32 within each vector of its kernel: equal to its last bit
    expected = torch.arange(*args).numpy()
    got = ag.arange(*args).numpy()
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_array_max_ulp(got, expected, maxulp=1)


@pytest.mark.parametrize("dims", [(1,), (0, 1), (-2,), (0, -1), ()], ids=str)
def test_flatten_of_a_zero_dim_tensor_checks_its_dims(dims):
    expected, got = both(lambda lib: lib.tensor(3.0).flatten(*dims))
    assert got == expected


CONTIGUOUS_RESULTS = {
    "cat": lambda lib, t: lib.cat([t, t]),
    "stack": lambda lib, t: lib.stack([t, t]),
    "cumsum": lambda lib, t: t.cumsum(0),
    "softmax": lambda lib, t: t.softmax(-1),
    "log_softmax": lambda lib, t: t.log_softmax(-1),
    "masked_fill": lambda lib, t: t.masked_fill(t > 2, 0.0),
    "sum along a dim": lambda lib, t: t.sum(0),
    "amax along a dim": lambda lib, t: t.amax(1, keepdim=True),
    "var along a dim": lambda lib, t: t.var(0),
    "logsumexp along a dim": lambda lib, t: t.logsumexp(0),
    "repeat": lambda lib, t: t.repeat(1, 2),
    "exp (keeps the input's layout)": lambda lib, t: t.exp(),
}


@pytest.mark.parametrize("op", list(CONTIGUOUS_RESULTS))
def test_results_of_a_transposed_input_have_pytorchs_layout(op):
    # a contiguous result can be viewed: t.softmax(-1).view(-1) must not raise
    def program(lib):
        t = lib.tensor([[1.0, 2.0, 5.0], [3.0, 4.0, 0.0]]).t()
        out = CONTIGUOUS_RESULTS[op](lib, t)
        return lib.tensor([out.is_contiguous()])

    expected, got = both(program)
    assert got == expected


@pytest.mark.parametrize("value, dtype", [
    (-1, "uint8"), (-129, "uint8"), (-256, "uint8"), (256, "uint8"), (1e10, "int32"),
    (2.0**31, "int32"), (2**31 - 1, "int32"), (70000, "float16"), (65504, "float16"),
    (1e40, "float32"), (float("inf"), "float32"), (float("nan"), "int64"), (1.5, "int64"),
    (-1.5, "uint8"), (float("inf"), "int64"), (True, "uint8"), (-1, "bool"),
], ids=str)
def test_full_checks_that_its_value_fits_as_pytorch(value, dtype):
    expected, got = both(lambda lib: lib.full((2,), value, dtype=getattr(lib, dtype)))
    assert got == expected


def test_full_like_of_an_integer_tensor_refuses_nan():
    expected, got = both(lambda lib: lib.full_like(lib.tensor([1, 2]), float("nan")))
    assert got == expected and got[0] == "RuntimeError"


@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor(range(0)),
    lambda lib: lib.tensor(range(2, 10, 3)),
    lambda lib: lib.full((2,), np.int32(4)),
    lambda lib: lib.full((2,), np.float64(4.5)),
    lambda lib: lib.full((2,), np.bool_(True)),
    lambda lib: lib.full((2,), np.uint8(3)),
], ids=["empty range", "range", "numpy int32", "numpy float64", "numpy bool", "numpy uint8"])
def test_creation_infers_pytorchs_dtype_from_ranges_and_numpy_scalars(make):
    expected, got = both(make)
    assert got == expected
