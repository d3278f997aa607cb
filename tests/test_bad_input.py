"""Bad input: every misuse of the public API gets a clear exception, never a hang or a crash.

Property-based (hypothesis): invalid arguments are thrown at ``backward``,
``grad`` (async and sync), ``Tensor.backward``, ``tensor()`` and the
factories, hook registration and hook results, ``Function.apply`` and
``requires_grad_``. Each must raise TypeError, ValueError or RuntimeError
(exactly that builtin type, or a builtin subclass such as
NotImplementedError; never an AttributeError, KeyError, IndexError,
AssertionError or an exception of NumPy's from inside), and the message
must name the offending argument or value.

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import aiograd as ag
from aiograd import engine

pytestmark = pytest.mark.timeout(120)

FEW = settings(max_examples=25, deadline=None)
FEWER = settings(max_examples=12, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


def check_error(error: BaseException | None, kind: type[BaseException], *words: str) -> None:
    """``error`` is a builtin ``kind`` whose message contains one of ``words``."""
    assert error is not None, f"expected {kind.__name__}, nothing was raised"
    assert isinstance(error, kind), f"expected {kind.__name__}, got {error!r}"
    assert type(error).__module__ == "builtins", f"an exception from inside: {error!r}"
    message = str(error)
    assert any(w in message for w in words), f"{words} not named in: {message!r}"


def rejected(call: Callable[[], Any], kind: type[BaseException], *words: str) -> None:
    """``call()`` raises a clear ``kind`` naming one of ``words``."""
    error = None
    try:
        call()
    except Exception as exc:  # noqa: BLE001  (checked below)
        error = exc
    check_error(error, kind, *words)


async def rejected_async(call: Callable[[], Any], kind: type[BaseException], *words: str) -> None:
    error = None
    try:
        await call()
    except Exception as exc:  # noqa: BLE001  (checked below)
        error = exc
    check_error(error, kind, *words)
    assert engine.stats().running_graph_tasks == 0


def leaf(shape: tuple[int, ...] = (2,)) -> ag.Tensor:
    return ag.tensor(np.arange(1.0, 1.0 + np.prod(shape), dtype="float32").reshape(shape),
                     requires_grad=True)


# ---- strategies ----

# Things that are not tensors (nor sequences of them).
junk = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=4),
    st.binary(max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sets(st.integers(), max_size=2),
    st.builds(object),
    st.builds(np.ones, st.integers(1, 3)),
)
# Sequences with at least one element that is not a tensor.
junk_list = st.lists(st.one_of(junk, st.just("<tensor>")), min_size=1, max_size=4).filter(
    lambda items: any(not isinstance(i, str) or i != "<tensor>" for i in items))
not_bool = junk.filter(lambda v: not isinstance(v, bool))
shapes = array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
non_numeric_dtypes = st.sampled_from(["complex64", "complex128", "<U2", "S2",
                                      "datetime64[s]", "timedelta64[s]", "object"])
not_float_dtypes = st.sampled_from(["int8", "int32", "int64", "uint8", "bool"])


def with_tensors(items: list[Any], make: Callable[[], ag.Tensor]) -> list[Any]:
    return [make() if isinstance(i, str) and i == "<tensor>" else i for i in items]


# ---- bad calls of backward() and grad() ----


@dataclass
class BadCall:
    """Arguments for ``backward``/``grad`` (built fresh for each call) and the error expected."""

    what: str
    build: Callable[[str], tuple[list[Any], dict[str, Any]]]
    kind: type[BaseException]
    words: Callable[[str], tuple[str, ...]]


def _names(api: str) -> tuple[str, str]:
    return ("tensors", "grad_tensors") if api == "backward" else ("outputs", "grad_outputs")


def _x_inputs(api: str) -> dict[str, Any]:
    return {} if api == "backward" else {"inputs": None}


@st.composite
def bad_calls(draw: st.DrawFn) -> BadCall:
    """A call of backward/grad with one invalid argument, everything else valid.

    ``build(api)`` returns ``(args, kwargs)``; for ``grad`` the ``inputs``
    argument (x) is filled in by the test when ``kwargs['inputs']`` is None.
    """
    case = draw(st.sampled_from([
        "roots", "mixed_roots", "grads_junk", "grads_count", "grads_element", "grads_shape",
        "grads_dtype", "non_scalar", "flag", "inputs_junk", "inputs_empty", "inputs_no_grad",
    ]))
    if case == "roots":
        value = draw(junk)
        return BadCall(case, lambda api: ([value], _x_inputs(api)), TypeError,
                       lambda api: (_names(api)[0],))
    if case == "mixed_roots":
        items = draw(junk_list)

        def build(api: str) -> tuple[list[Any], dict[str, Any]]:
            return [with_tensors(items, lambda: (leaf() * 2.0).sum())], _x_inputs(api)

        return BadCall(case, build, TypeError, lambda api: (_names(api)[0], "element"))
    if case == "grads_junk":
        value = draw(junk.filter(lambda v: v is not None))
        return BadCall(case, lambda api: ([(leaf() * 2.0).sum(), value], _x_inputs(api)),
                       TypeError, lambda api: (_names(api)[1],))
    if case == "grads_count":
        count = draw(st.sampled_from([0, 2, 3]))
        return BadCall(case, lambda api: ([[(leaf() * 2.0).sum()], [ag.ones(())] * count],
                                          _x_inputs(api)),
                       ValueError, lambda api: (f"{_names(api)[1]} has {count} element",))
    if case == "grads_element":
        value = draw(junk.filter(lambda v: v is not None))
        return BadCall(case, lambda api: ([[(leaf() * 2.0).sum()], [value]], _x_inputs(api)),
                       TypeError, lambda api: (f"{_names(api)[1]}[0]",))
    if case == "grads_shape":
        out_shape = draw(shapes)
        grad_shape = draw(shapes.filter(lambda s: s != out_shape))

        def build(api: str) -> tuple[list[Any], dict[str, Any]]:
            return [leaf(out_shape) * 2.0, ag.ones(grad_shape)], _x_inputs(api)

        return BadCall(case, build, RuntimeError,
                       lambda api: (f"Mismatch in shape: {_names(api)[1]}[0] has a shape of "
                                    f"{grad_shape} and output[0] has a shape of {out_shape}",))
    if case == "grads_dtype":
        dtype = draw(non_numeric_dtypes)

        def build(api: str) -> tuple[list[Any], dict[str, Any]]:
            return [leaf() * 2.0, ag.Tensor._wrap(np.zeros(2, dtype=dtype))], _x_inputs(api)

        return BadCall(case, build, TypeError,
                       lambda api: (f"{_names(api)[1]}[0] has unsupported dtype",))
    if case == "non_scalar":
        shape = draw(shapes.filter(lambda s: int(np.prod(s)) > 1))
        return BadCall(case, lambda api: ([leaf(shape) * 2.0], _x_inputs(api)), RuntimeError,
                       lambda api: ("grad can be implicitly created only for scalar outputs",))
    if case == "flag":
        flag = draw(st.sampled_from(["retain_graph", "create_graph", "allow_unused"]))
        value = draw(not_bool.filter(lambda v: v is not None or flag == "create_graph"))

        def name(api: str) -> str:  # backward has no allow_unused: retain_graph instead
            return "retain_graph" if flag == "allow_unused" and api == "backward" else flag

        def build(api: str) -> tuple[list[Any], dict[str, Any]]:
            kwargs = _x_inputs(api)
            kwargs[name(api)] = value
            return [(leaf() * 2.0).sum()], kwargs

        return BadCall(case, build, TypeError, lambda api: (name(api),))
    if case == "inputs_junk":
        value = draw(st.one_of(junk.filter(lambda v: v is not None), junk_list))

        def build(api: str) -> tuple[list[Any], dict[str, Any]]:
            inputs = with_tensors(value, leaf) if isinstance(value, list) else value
            return [(leaf() * 2.0).sum()], {"inputs": inputs}

        return BadCall(case, build, TypeError, lambda api: ("inputs",))
    if case == "inputs_empty":
        empty = draw(st.sampled_from([[], ()]))
        return BadCall(case, lambda api: ([(leaf() * 2.0).sum()], {"inputs": empty}),
                       RuntimeError,
                       lambda api: ("inputs", "non-empty"))
    # inputs_no_grad
    return BadCall(case, lambda api: ([(leaf() * 2.0).sum()], {"inputs": [ag.ones(2)]}),
                   RuntimeError, lambda api: ("does not require grad (input 0)",))


def _expected_kind(call: BadCall, api: str) -> type[BaseException]:
    if call.what == "inputs_empty" and api == "grad":
        return ValueError  # PyTorch: "grad requires non-empty inputs." is a ValueError
    return call.kind


def _grad_args(call: BadCall) -> tuple[list[Any], dict[str, Any]]:
    """``grad(outputs, inputs, grad_outputs, **flags)``: inputs default to a fresh leaf."""
    args, kwargs = call.build("grad")
    inputs = kwargs.pop("inputs", None)
    return [args[0], leaf() if inputs is None else inputs, *args[1:]], kwargs


def _backward_args(call: BadCall) -> tuple[list[Any], dict[str, Any]]:
    args, kwargs = call.build("backward")
    kwargs.pop("allow_unused", None)
    return args, kwargs


@FEW
@given(bad_calls())
def test_backward_sync_rejects_bad_arguments(call):
    args, kwargs = _backward_args(call)
    rejected(lambda: ag.backward_sync(*args, **kwargs), _expected_kind(call, "backward"),
             *call.words("backward"))


@FEW
@given(bad_calls())
def test_grad_sync_rejects_bad_arguments(call):
    args, kwargs = _grad_args(call)
    rejected(lambda: ag.grad_sync(*args, **kwargs), _expected_kind(call, "grad"),
             *call.words("grad"))


@pytest.mark.anyio
@FEW
@given(bad_calls())
async def test_backward_rejects_bad_arguments(call):
    args, kwargs = _backward_args(call)
    await rejected_async(lambda: ag.backward(*args, **kwargs), _expected_kind(call, "backward"),
                         *call.words("backward"))


@pytest.mark.anyio
@FEW
@given(bad_calls())
async def test_grad_rejects_bad_arguments(call):
    args, kwargs = _grad_args(call)
    await rejected_async(lambda: ag.grad(*args, **kwargs), _expected_kind(call, "grad"),
                         *call.words("grad"))


@pytest.mark.anyio
@FEW
@given(bad_calls().filter(lambda c: c.what not in ("roots", "mixed_roots", "grads_count",
                                                    "grads_element", "grads_junk")))
async def test_tensor_backward_rejects_bad_arguments(call):
    args, kwargs = _backward_args(call)
    root = args[0][0] if isinstance(args[0], list) else args[0]
    gradient = args[1] if len(args) > 1 else None
    await rejected_async(lambda: root.backward(gradient, **kwargs),
                         _expected_kind(call, "backward"), *call.words("backward"))
    rejected(lambda: root.backward_sync(gradient, **kwargs),
             _expected_kind(call, "backward"), *call.words("backward"))


@FEW
@given(shapes.filter(lambda s: int(np.prod(s)) == 1))
def test_any_single_element_root_needs_no_gradient(shape):
    x = leaf(shape)
    ag.backward_sync(x * 3.0)
    np.testing.assert_allclose(x.grad.numpy(), np.full(shape, 3.0))


@FEW
@given(not_float_dtypes, st.sampled_from(["float32", "float64", "float16"]))
def test_integer_and_other_float_gradients_are_cast_to_the_output_dtype(grad_dtype, dtype):
    x = ag.tensor([1.0, 2.0], dtype=dtype, requires_grad=True)
    ag.backward_sync(x * 2.0, ag.from_numpy(np.ones(2, dtype=grad_dtype)))
    assert x.grad.dtype == np.dtype(dtype)
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


@FEWER
@given(st.integers(0, 2), st.booleans())
def test_gradient_on_another_device_is_rejected(fake_backend, index, output_on_fake):
    out_device = f"fake:{index}" if output_on_fake else "cpu"
    grad_device = "cpu" if output_on_fake else f"fake:{index}"
    x = ag.tensor([1.0, 2.0], device=out_device, requires_grad=True)
    grad = ag.ones(2, device=grad_device)
    rejected(lambda: ag.backward_sync(x * 2.0, grad), RuntimeError,
             f"grad_tensors[0] is on {grad_device} but output[0] is on {out_device}")
    rejected(lambda: ag.grad_sync(x * 2.0, x, grad), RuntimeError,
             f"grad_outputs[0] is on {grad_device}")


@FEWER
@given(st.integers(0, 2))
def test_op_mixing_devices_names_both(fake_backend, index):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = ag.tensor([1.0, 2.0], device=f"fake:{index}")
    rejected(lambda: x * y, RuntimeError, f"cpu and fake:{index}")


# ---- graphs already freed ----

SAVING_OPS: dict[str, Callable[[ag.Tensor], ag.Tensor]] = {
    "mul": lambda t: t * t,
    "div": lambda t: t / (t + 1.0),
    "exp": lambda t: (t * 0.1).exp(),
    "log": lambda t: (t * t + 1.0).log(),
    "tanh": lambda t: t.tanh(),
    "sigmoid": lambda t: t.sigmoid(),
    "pow": lambda t: t ** 2,
}


@FEW
@given(st.lists(st.sampled_from(sorted(SAVING_OPS)), min_size=1, max_size=5),
       st.sampled_from(["backward", "grad"]), st.integers(0, 2))
def test_second_backward_through_a_freed_graph_raises(ops, api, retained):
    x = leaf()
    y = x * 1.0
    for op in ops:
        y = SAVING_OPS[op](y)
    loss = y.sum()

    def run(retain: bool | None = None) -> None:
        if api == "backward":
            ag.backward_sync(loss, retain_graph=retain)
        else:
            ag.grad_sync(loss, x, retain_graph=retain)

    for _ in range(retained):
        run(retain=True)  # kept: the next pass may go through again
    run()
    rejected(run, RuntimeError, "Trying to backward through the graph a second time")
    rejected(run, RuntimeError, "Trying to backward through the graph a second time")
    assert engine.stats().running_graph_tasks == 0


@pytest.mark.anyio
@FEW
@given(st.lists(st.sampled_from(sorted(SAVING_OPS)), min_size=1, max_size=4))
async def test_second_await_backward_through_a_freed_graph_raises(ops):
    x = leaf()
    y = x * 1.0
    for op in ops:
        y = SAVING_OPS[op](y)
    loss = y.sum()
    await ag.backward(loss)
    await rejected_async(lambda: ag.backward(loss), RuntimeError,
                         "Trying to backward through the graph a second time")
    await rejected_async(lambda: ag.grad(loss, x), RuntimeError,
                         "Trying to backward through the graph a second time")


# ---- tensor() and the factories ----

bad_data = st.one_of(
    st.none(),
    st.text(max_size=4),
    st.binary(max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sets(st.integers(), max_size=2),
    st.builds(object),
    st.lists(st.one_of(st.none(), st.builds(object)), min_size=1, max_size=3),
    # ragged nested lists
    st.integers(1, 3).map(lambda n: [[1.0] * n, [1.0] * (n + 1)]),
)


@FEW
@given(bad_data)
def test_tensor_rejects_data_that_is_not_numbers(data):
    rejected(lambda: ag.tensor(data), TypeError, "tensor()")


@FEW
@example(data=[1.0, "a"])
@given(st.one_of(
    st.lists(st.one_of(st.floats(allow_nan=False, width=32), st.text(max_size=2)),
             min_size=2, max_size=4).filter(lambda v: any(isinstance(i, str) for i in v)),
    non_numeric_dtypes.filter(lambda d: not d.startswith("complex")).map(
        lambda d: np.zeros(2, dtype=d)),
))
def test_tensor_rejects_strings_and_non_numeric_arrays(data):
    rejected(lambda: ag.tensor(data), TypeError, "tensor()", "dtype")


def numpy_dtype_error(spec: Any) -> type[BaseException] | None:
    """The type of the error ``numpy.dtype(spec)`` raises, or None if it parses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # aliases such as "a"
            np.dtype(spec)
    except Exception as exc:  # noqa: BLE001  (NumPy raises several kinds)
        return type(exc)
    return None


@FEW
@given(st.text(max_size=6).filter(lambda s: numpy_dtype_error(s) is TypeError))
def test_unknown_dtype_is_named(dtype):
    rejected(lambda: ag.tensor([1.0], dtype=dtype), TypeError, "dtype")
    rejected(lambda: ag.zeros(2, dtype=dtype), TypeError, "dtype")


@FEW
@example(dtype=",")
@given(st.sampled_from([",", "f8,,", ",,", "i4,,"]))
def test_unparsable_dtype_string_is_a_type_error(dtype):
    assert numpy_dtype_error(dtype) is SyntaxError
    rejected(lambda: ag.zeros(2, dtype=dtype), TypeError, "dtype")


@FEW
@example(dtype=str)
@given(st.sampled_from([str, bytes, object, "U3", "datetime64[s]", "i4,", "f4,i4"]))
def test_non_numeric_dtype_is_rejected(dtype):
    rejected(lambda: ag.zeros(2, dtype=dtype), TypeError, "dtype")


@FEW
@given(st.one_of(st.integers(-5, 5).filter(lambda i: i not in (0,)),
                 st.text(min_size=1, max_size=5), st.builds(object), st.floats()))
def test_bad_device_is_named(device):
    if isinstance(device, str):
        try:
            ag.device(device)
        except (RuntimeError, ValueError):
            pass
        else:  # a valid device string
            return
        error = None
        try:
            ag.tensor([1.0], device=device)
        except Exception as exc:  # noqa: BLE001  (checked below)
            error = exc
        assert isinstance(error, (RuntimeError, ValueError)), error
        check_error(error, type(error), "device")
        return
    rejected(lambda: ag.tensor([1.0], device=device), TypeError, "device")
    rejected(lambda: ag.ones(2, device=device), TypeError, "device")


@FEW
@given(st.one_of(not_float_dtypes, st.just("complex64")),
       st.sampled_from(["tensor", "zeros", "ones", "full", "arange", "eye", "zeros_like",
                        "requires_grad_", "setter"]))
def test_non_float_tensors_cannot_require_grad(dtype, make):
    def call() -> Any:
        if make == "tensor":
            return ag.tensor([1, 0], dtype=dtype, requires_grad=True)
        if make == "zeros":
            return ag.zeros(2, dtype=dtype, requires_grad=True)
        if make == "ones":
            return ag.ones(2, 2, dtype=dtype, requires_grad=True)
        if make == "full":
            return ag.full((2,), 1, dtype=dtype, requires_grad=True)
        if make == "arange":
            return ag.arange(2, dtype=dtype, requires_grad=True)
        if make == "eye":
            return ag.eye(2, dtype=dtype, requires_grad=True)
        if make == "zeros_like":
            return ag.zeros_like(ag.zeros(2, dtype=dtype), requires_grad=True)
        t = ag.zeros(2, dtype=dtype)
        if make == "requires_grad_":
            return t.requires_grad_()
        t.requires_grad = True
        return t

    rejected(call, RuntimeError, f"got dtype {np.dtype(dtype)}")


@FEW
@given(not_bool)
def test_requires_grad_setter_rejects_non_bools(value):
    t = ag.zeros(2)
    rejected(lambda: t.requires_grad_(value), TypeError, "requires_grad")
    rejected(lambda: setattr(t, "requires_grad", value), TypeError, "requires_grad")
    assert not t.requires_grad


@FEW
@example(value="yes", make="tensor")
@given(not_bool, st.sampled_from(["tensor", "zeros", "randn", "full"]))
def test_factories_reject_non_bool_requires_grad(value, make):
    def call() -> Any:
        if make == "tensor":
            return ag.tensor([1.0], requires_grad=value)
        if make == "zeros":
            return ag.zeros(2, requires_grad=value)
        if make == "randn":
            return ag.randn(2, requires_grad=value)
        return ag.full((2,), 1.0, requires_grad=value)

    rejected(call, TypeError, "requires_grad")


@FEW
@given(st.sampled_from(["zeros", "ones", "rand", "randn", "full"]),
       st.lists(st.one_of(st.integers(-3, -1), st.floats(allow_nan=False), st.text(max_size=2),
                          st.none(), st.booleans()), min_size=1, max_size=3))
def test_factory_sizes_must_be_non_negative_ints(make, size):
    factory = getattr(ag, make)
    if make == "full":
        rejected(lambda: factory(tuple(size), 1.0), ValueError, "sizes")
    else:
        rejected(lambda: factory(*size), ValueError, "sizes")
        rejected(lambda: factory(tuple(size)), ValueError, "sizes")


@FEW
@given(st.one_of(st.integers(-4, -1), st.text(max_size=2), st.none(), st.floats(0.5, 2.5)))
def test_eye_rejects_bad_sizes(n):
    error = None
    try:
        ag.eye(n)
    except Exception as exc:  # noqa: BLE001  (checked below)
        error = exc
    assert isinstance(error, (TypeError, ValueError)), error
    assert type(error).__module__ == "builtins"


@FEW
@given(junk.filter(lambda v: not isinstance(v, ag.Tensor)),
       st.sampled_from(["zeros_like", "ones_like", "full_like", "rand_like", "randn_like"]))
def test_like_factories_need_a_tensor(value, make):
    args = (1.0,) if make == "full_like" else ()
    rejected(lambda: getattr(ag, make)(value, *args), TypeError, make, "Tensor")


@FEW
@example(start=0, end=5, step=0)
@given(st.integers(-3, 3), st.integers(-3, 3), st.sampled_from([0, 0.0]))
def test_arange_rejects_zero_step(start, end, step):
    rejected(lambda: ag.arange(start, end, step), RuntimeError, "step")


@FEW
@example(value="a")
@given(st.one_of(st.none(), st.text(max_size=3), st.builds(object), st.dictionaries(
    st.text(max_size=1), st.integers(), max_size=1)))
def test_full_rejects_a_fill_value_that_is_not_a_number(value):
    rejected(lambda: ag.full((2,), value), TypeError, "fill_value")


@FEW
@given(junk)
def test_from_numpy_needs_an_ndarray(value):
    if isinstance(value, np.ndarray):
        return
    rejected(lambda: ag.from_numpy(value), TypeError, "from_numpy")


# ---- registering hooks and callbacks ----


@FEW
@given(junk.filter(lambda v: not callable(v)),
       st.sampled_from(["tensor", "leaf", "post_accumulate", "node", "node_pre", "callback",
                        "saved_pack", "saved_unpack"]))
def test_hooks_must_be_callable(value, where):
    x = leaf()
    y = x * 2.0
    if where == "tensor":
        rejected(lambda: y.register_hook(value), TypeError, "callable")
    elif where == "leaf":
        rejected(lambda: x.register_hook(value), TypeError, "callable")
    elif where == "post_accumulate":
        rejected(lambda: x.register_post_accumulate_grad_hook(value), TypeError, "callable")
    elif where == "node":
        rejected(lambda: y.grad_fn.register_hook(value), TypeError, "callable")
    elif where == "node_pre":
        rejected(lambda: y.grad_fn.register_prehook(value), TypeError, "callable")
    elif where == "callback":
        rejected(lambda: ag.queue_callback(value), TypeError, "callable")
    elif where == "saved_pack":
        rejected(lambda: ag.saved_tensors_hooks(value, lambda p: p), TypeError, "callable")
    else:
        rejected(lambda: ag.saved_tensors_hooks(lambda t: t, value), TypeError, "callable")


@FEW
@given(st.sampled_from(["float32", "int64", "bool"]))
def test_hooks_need_a_tensor_that_requires_grad(dtype):
    t = ag.zeros(2, dtype=dtype)
    rejected(lambda: t.register_hook(lambda g: g), RuntimeError, "require")
    rejected(lambda: t.register_post_accumulate_grad_hook(lambda v: None), RuntimeError,
             "require")
    rejected(lambda: (leaf() * 2.0).register_post_accumulate_grad_hook(lambda v: None),
             RuntimeError, "non-leaf")


def test_queue_callback_outside_backward_is_named():
    rejected(lambda: ag.queue_callback(lambda: None), RuntimeError, "during backward")


# ---- hooks returning the wrong thing ----


def run_with_hook(where: str, result: Any) -> ag.Tensor:
    """Backward of ``(x * x).sum()`` with a hook at ``where`` that returns ``result``."""
    x = leaf()
    h = x * 1.0
    y = h * h
    if where == "tensor_hook":
        h.register_hook(lambda g: result)
    elif where == "leaf_hook":
        x.register_hook(lambda g: result)
    elif where == "prehook":
        y.grad_fn.register_prehook(lambda grads: result)
    elif where == "posthook":
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: result)
    else:  # a custom Function's backward
        class Returns(ag.Function):
            @staticmethod
            def forward(ctx, t):
                return t * 1.0

            @staticmethod
            def backward(ctx, g):
                return result

        y = Returns.apply(h) * 1.0
    ag.backward_sync(y.sum())
    return x


HOOK_NAMES = {
    "tensor_hook": ("tensor hook",),
    "leaf_hook": ("tensor hook",),
    "prehook": ("prehook of MulBackward0",),
    "posthook": ("hook of MulBackward0",),
    "function": ("ReturnsBackward",),
}


@FEW
@given(st.one_of(junk.filter(lambda v: v is not None and not isinstance(v, np.ndarray)),
                 st.lists(st.floats(width=32), min_size=1, max_size=3)),
       st.sampled_from(sorted(HOOK_NAMES)))
def test_hook_returning_something_not_a_tensor_is_named(result, where):
    error = None
    try:
        run_with_hook(where, result)
    except Exception as exc:  # noqa: BLE001  (checked below)
        error = exc
    assert isinstance(error, (TypeError, RuntimeError)), error
    check_error(error, type(error), *HOOK_NAMES[where])
    assert engine.stats().running_graph_tasks == 0


@FEW
@given(shapes.filter(lambda s: s != (2,)), st.sampled_from(sorted(HOOK_NAMES)))
def test_hook_returning_a_wrong_shape_is_named(shape, where):
    if where == "function" and (len(shape) >= 1 and shape[-1] in (1, 2)):
        return  # broadcastable: summed to the input's shape (validate_outputs)
    result = {"posthook": (ag.ones(shape), ag.ones(shape)),
              "prehook": (ag.ones(shape),)}.get(where, ag.ones(shape))
    words = HOOK_NAMES[where] + ("returned an invalid gradient",)
    rejected(lambda: run_with_hook(where, result), RuntimeError, *words)


@FEW
@given(st.sampled_from(["posthook", "function"]), non_numeric_dtypes)
def test_gradient_of_a_non_numeric_dtype_from_a_node_is_named(where, dtype):
    grad = ag.Tensor._wrap(np.zeros(2, dtype=dtype))
    result = grad if where == "function" else (grad, grad)
    message = ("Function ReturnsBackward returned an invalid gradient at index 0"
               if where == "function"  # a node hook must keep the dtype (check_single_result)
               else "hook of MulBackward0 returned a gradient of dtype")
    rejected(lambda: run_with_hook(where, result), RuntimeError, message)


@FEW
@example(where="leaf_hook", dtype="int64")
@given(st.sampled_from(["leaf_hook", "tensor_hook", "prehook"]),
       st.sampled_from(["int64", "bool", "float64", "complex128", "<U1"]))
def test_hook_returning_another_dtype_is_an_error_or_cast(where, dtype):
    if where != "leaf_hook" and dtype in ("int64", "bool", "float64", "complex128"):
        dtype = "<U1"  # cast (or named by validate_outputs) on a non-leaf: pick the bad one
    error = None
    try:
        # Tensor._wrap: a tensor of any dtype, as a buggy hook might build one
        bad = ag.Tensor._wrap(np.ones(2, dtype=dtype))
        x = run_with_hook(where, (bad,) if where == "prehook" else bad)
    except Exception as exc:  # noqa: BLE001  (checked below)
        error = exc
    if error is None:
        assert x.grad.dtype == x.dtype
    else:
        check_error(error, RuntimeError, "hook")


def test_leaf_hook_returning_another_device_is_an_error(fake_backend):
    x = leaf()
    x.register_hook(lambda g: g.to("fake:1"))
    error = None
    try:
        ag.backward_sync((x * x).sum())
    except Exception as exc:  # noqa: BLE001  (checked below)
        error = exc
    if error is None:
        assert x.grad.device == x.device and type(x.grad.data) is np.ndarray
    else:
        check_error(error, RuntimeError, "hook", "device")


@FEW
@example(result="a")
@given(junk.filter(lambda v: v is not None))
def test_post_accumulate_grad_hook_returning_a_value_is_an_error(result):
    x = leaf()
    x.register_post_accumulate_grad_hook(lambda t: result)
    rejected(lambda: ag.backward_sync((x * x).sum()), RuntimeError, "return None")


# ---- custom Functions ----


class Double(ag.Function):
    @staticmethod
    def forward(ctx, *args):
        ctx.positions = [i for i, a in enumerate(args) if isinstance(a, ag.Tensor)]
        ctx.n = len(args)
        return args[ctx.positions[0]] * 2.0

    @staticmethod
    def backward(ctx, g):
        grads: list[Any] = [None] * ctx.n
        grads[ctx.positions[0]] = g * 2.0
        return tuple(grads)


@FEW
@given(st.lists(junk, max_size=3), st.lists(junk, max_size=3))
def test_function_apply_with_other_arguments_around_a_tensor(before, after):
    x = leaf()
    y = Double.apply(*before, x, *after)
    ag.backward_sync(y.sum())
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


@FEW
@given(st.lists(junk, min_size=1, max_size=3), st.data())
def test_function_returning_a_gradient_for_a_non_tensor_argument_is_named(others, data):
    position = data.draw(st.integers(0, len(others) - 1))
    bad_grad = data.draw(st.one_of(junk.filter(lambda v: v is not None), st.just(ag.ones(2))))

    class Meddles(ag.Function):
        @staticmethod
        def forward(ctx, t, *rest):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            grads: list[Any] = [g] + [None] * len(others)
            grads[1 + position] = bad_grad
            return tuple(grads)

    x = leaf()
    y = Meddles.apply(x, *others)
    rejected(lambda: ag.backward_sync(y.sum()), RuntimeError,
             f"MeddlesBackward returned a gradient different than None at position "
             f"{position + 2}")


@FEW
@given(st.integers(0, 4).filter(lambda n: n != 1))
def test_function_returning_a_wrong_number_of_gradients_is_named(count):
    class Counts(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            return tuple(g for _ in range(count))

    rejected(lambda: ag.backward_sync(Counts.apply(leaf()).sum()), RuntimeError,
             "CountsBackward returned an incorrect number of gradients", "CountsBackward")


@FEW
@given(junk.filter(lambda v: v is not None))
def test_save_for_backward_needs_tensors(value):
    class Saves(ag.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t, value)
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            return g

    rejected(lambda: Saves.apply(leaf()), TypeError, "save_for_backward",
             type(value).__name__)


def test_function_base_class_and_instances_are_rejected():
    rejected(lambda: ag.Function.apply(leaf()), RuntimeError, "subclass of Function")
    rejected(lambda: Double(), RuntimeError, "apply")

    class NoBackward(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

    rejected(lambda: ag.backward_sync(NoBackward.apply(leaf()).sum()), NotImplementedError,
             "backward")
