"""Arithmetic: broadcasting ``+ - * / **``, negation; comparisons and logical ops.

A Python number operand stays a number (weak dtype, NEP 50); its next edge
is None, as in PyTorch: ``y * 2.0`` records a MulBackward0 whose next edges
are ``y``'s and None, so hooks see two gradients, the second None. Result
dtypes are PyTorch's (Note [Type promotion]): operands of two dtypes are cast
to their result type first (``_promoted``), an integer tensor with a float
number computes in float32 (``_with_number``), and true division of
integers gives float32.
See Note [Dual backward formulas], Note [Broadcast gradients] and
Note [Silent singular points].
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy

from .. import _defaults
from .._tensor import Tensor, checked_fill, scalar_type_name
from . import _dual
from ._promote import result_type
from ._record import (
    check_same_device,
    edges_of,
    edges_with_number,
    plain,
    record,
    scalar_or_tensor,
    tensor_arg,
)
from ._rule import Rule, Saved, identity, negated

# ---- type promotion ----

_FLOAT16 = numpy.dtype(numpy.float16)
_FLOAT32 = numpy.dtype(numpy.float32)


def _promoted(a: Tensor, b: Tensor, true_divide: bool = False) -> tuple[Any, Any]:
    """``a``'s and ``b``'s arrays cast to their result type (for ``/``: a float one).
    See Note [Type promotion]."""
    rt = result_type(a, b)
    if true_divide and rt.kind in "biu":
        rt = _defaults.FLOAT
    x, y = a.data, b.data
    return (x if x.dtype == rt else x.astype(rt)), (y if y.dtype == rt else y.astype(rt))


def _with_number(x: Any, number: Any) -> Any:
    """``x``, in float32 if it is a bool or integer array meeting a float number
    (NumPy would compute in float64; PyTorch's default dtype is float32)."""
    if type(number) is float and x.dtype.kind in "biu":
        return x.astype(_defaults.FLOAT)
    return x


def wrap_int(x: Any, number: Any) -> Any:
    """``number`` as PyTorch converts a Python int meeting an integer array ``x``: into
    ``x``'s dtype, wrapping (NumPy 2 refuses an int out of the dtype's range)."""
    if type(number) is int and x.dtype.kind in "iu":
        info = numpy.iinfo(x.dtype)
        if not info.min <= number <= info.max:
            bits = 8 * x.dtype.itemsize
            number &= (1 << bits) - 1
            if number > info.max:
                number -= 1 << bits
    return number


def check_sub_bool(a: Any, b: Any) -> None:
    """PyTorch's refusal to subtract with a bool tensor (``a``, ``b``: Tensors or
    numbers; a bool number counts as a bool tensor, as PyTorch wraps it as one)."""
    a_bool = type(a) is bool or type(a) is Tensor and a.data.dtype.kind == "b"
    b_bool = type(b) is bool or type(b) is Tensor and b.data.dtype.kind == "b"
    if a_bool and b_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead.")
    if a_bool or b_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you "
            "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


# ---- add / sub ----

# A None gradient for an input that needs none (what post-hooks see).
AddBackward0 = Rule("AddBackward0", identity, identity, doc="``a + b``.")
SubBackward0 = Rule("SubBackward0", identity, negated, doc="``a - b``.")
RsubBackward1 = Rule("RsubBackward1", negated, doc="``number - tensor``.")
# ``add(a, b, alpha=...)``, ``sub(a, b, alpha=...)``: PyTorch's nodes, keeping the alpha.
AddAlphaBackward0 = Rule("AddBackward0", lambda g, alpha: g, lambda g, alpha: g * alpha,
                         keeps=("alpha",), variant="alpha", doc="``a + alpha * b``.")
SubAlphaBackward0 = Rule("SubBackward0", lambda g, alpha: g, lambda g, alpha: -g * alpha,
                         keeps=("alpha",), variant="alpha", doc="``a - alpha * b``.")


def add(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        x, y = a.data, b.data
        if x.dtype is not y.dtype:
            x, y = _promoted(a, b)
        try:
            data = x + y
        except ValueError:
            raise broadcast_error(a.shape, b.shape) from None
        edges = edges_of(a, b)
    else:
        dev = a.device
        data = _with_number(a.data, b) + wrap_int(a.data, b)
        edges = edges_with_number(a)
    if edges is None:
        return plain(data, dev)
    return record(AddBackward0.node_cls(edges), data, dev)


def sub(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if (a.data.dtype.kind == "b" or type(b) is bool
            or type(b) is Tensor and b.data.dtype.kind == "b"):
        check_sub_bool(a, b)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        x, y = a.data, b.data
        if x.dtype is not y.dtype:
            x, y = _promoted(a, b)
        try:
            data = x - y
        except ValueError:
            raise broadcast_error(a.shape, b.shape) from None
        edges = edges_of(a, b)
    else:
        dev = a.device
        data = _with_number(a.data, b) - wrap_int(a.data, b)
        edges = edges_with_number(a)
    if edges is None:
        return plain(data, dev)
    return record(SubBackward0.node_cls(edges), data, dev)


def add_alpha(a: Tensor, b: Any, *, alpha: Any = 1) -> Tensor:
    """``a + alpha * b`` (``torch.add``): one AddBackward0 node, its ``b`` gradient scaled."""
    if type(alpha) is int and alpha == 1:
        return add(a, b)
    return _with_alpha(AddAlphaBackward0, a, b, alpha, subtract=False)


def sub_alpha(a: Tensor, b: Any, *, alpha: Any = 1) -> Tensor:
    """``a - alpha * b`` (``torch.sub``): one SubBackward0 node, its ``b`` gradient scaled."""
    if type(alpha) is int and alpha == 1:
        return sub(a, b)
    check_sub_bool(a, scalar_or_tensor(b, a))
    return _with_alpha(SubAlphaBackward0, a, b, alpha, subtract=True)


def opmath(dtype: numpy.dtype) -> numpy.dtype:
    """The dtype PyTorch's CPU kernels compute ``dtype`` in: float32 for float16."""
    return _FLOAT32 if dtype == _FLOAT16 else dtype


def combine_alpha(a: Tensor, b: Any, alpha: Any, subtract: bool) -> Any:
    """The array of ``a + alpha * b`` (``a - alpha * b`` if ``subtract``; ``b`` a Tensor or
    a number) as PyTorch's kernel computes it: in the result type (float32 for float16),
    ``alpha`` converted to it with PyTorch's checks; for a bool result ``alpha`` is a bool
    (so ``b`` is added or not)."""
    rt = result_type(a, b)
    is_bool = isinstance(alpha, (bool, numpy.bool_))
    if rt.kind in "biu" and not is_bool and not isinstance(alpha, numbers.Integral):
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number.")
    if is_bool and rt.kind != "b":
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    ot = opmath(rt)
    x = a.data.astype(ot, copy=False)
    if type(b) is Tensor:
        y = b.data.astype(ot, copy=False)
    else:  # a number becomes a tensor of the result type first
        y = _dual.quietly(a.device.xp.asarray, wrap_int(x, b), rt)  # 1e40 into float32: inf
        y = y.astype(ot, copy=False)
    scaled = y * ot.type(checked_fill(alpha, rt))
    try:
        data = x - scaled if subtract else x + scaled
    except ValueError:
        raise broadcast_error(a.shape, b.shape) from None
    return data.astype(rt, copy=False)


def _with_alpha(rule: Rule, a: Tensor, b: Any, alpha: Any, subtract: bool) -> Tensor:
    """``a + alpha * b`` (``a - alpha * b``) recorded as one ``rule`` node over ``a``
    and ``b``."""
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        edges = edges_of(a, b)
    else:
        dev = a.device
        edges = edges_with_number(a)
    data = combine_alpha(a, b, alpha, subtract)
    if edges is None:
        return plain(data, dev)
    return record(rule.make(edges, (), (alpha,)), data, dev)


def rsub(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        return sub(b, a)
    check_sub_bool(a, b)
    data = wrap_int(a.data, b) - _with_number(a.data, b)
    return RsubBackward1.unary(a, data)


# ---- mul / div ----

MulBackward0 = Rule(
    "MulBackward0", lambda g, other, self_: g * other, lambda g, other, self_: g * self_,
    saves=(Saved("other", only_for=0), Saved("self_", only_for=1)), doc="``a * b``.")
# With a number ``b`` only the number is kept; PyTorch saves it as a tensor and frees it
# with the graph, so a second backward through ``x * 2`` or ``x / 2`` raises there too.
MulByNumberBackward0 = Rule("MulBackward0", operator.mul, None,
                            keeps=("scalar",), variant="number", frees_keeps=True,
                            doc="``a * number``.")


def mul(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        x, y = a.data, b.data
        if x.dtype is not y.dtype:
            x, y = _promoted(a, b)
        try:
            data = x * y
        except ValueError:
            raise broadcast_error(a.shape, b.shape) from None
        edges = edges_of(a, b)
        if edges is None:
            return plain(data, dev)
        return record(MulBackward0.make(edges, (b, a)), data, dev)
    data = _with_number(a.data, b) * wrap_int(a.data, b)
    edges = edges_with_number(a)
    if edges is None:
        return plain(data, a.device)
    return record(MulByNumberBackward0.make(edges, (), (b,)), data, a.device)


# ---- trickier grads: division ----
# ``g / b`` and ``-g * ((a / b) / b)``, PyTorch's formulas (``b * b`` would make the second
# derivative NaN at ``b == 0``, where PyTorch's is inf). See Note [Silent singular points].

@numpy.errstate(all="ignore")  # b == 0
def _div_grad_self(g: Any, other: Any, self_: Any) -> Any:
    return g / other


@numpy.errstate(all="ignore")  # b == 0
def _div_grad_other(g: Any, other: Any, self_: Any) -> Any:
    return -g * ((self_ / other) / other)


@numpy.errstate(all="ignore")  # b == 0
def _rdiv_grad(g: Any, other: Any, numer: Any) -> Any:
    return -g * ((numer / other) / other)


@numpy.errstate(all="ignore")
def _divide(x: Any, y: Any) -> Any:
    """``x / y`` where ``y`` may hold zeros. See Note [Silent singular points]."""
    return x / y


def _div_by_number_grad(g: Any, scalar: Any) -> Any:
    return g / scalar if scalar != 0 else _divide(g, scalar)


DivBackward0 = Rule("DivBackward0", _div_grad_self, _div_grad_other,
                    saves=("other", Saved("self_", only_for=1)), doc="``a / b``.")
DivByNumberBackward0 = Rule("DivBackward0", _div_by_number_grad, None, keeps=("scalar",),
                            variant="number", frees_keeps=True, doc="``a / number``.")
RdivBackward0 = Rule("DivBackward0", _rdiv_grad, saves=("other",), keeps=("numer",),
                     variant="number dividend", doc="``number / a``.")


def div(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        x, y = a.data, b.data
        if x.dtype is not y.dtype or x.dtype.kind in "biu":
            x, y = _promoted(a, b, true_divide=True)
        try:
            data = _divide(x, y)
        except ValueError:
            raise broadcast_error(a.shape, b.shape) from None
        edges = edges_of(a, b)
        if edges is None:
            return plain(data, dev)
        return record(DivBackward0.make(edges, (b, a)), data, dev)  # PyTorch's order of saving
    x = a.data if a.data.dtype.kind not in "biu" else a.data.astype(_defaults.FLOAT)
    data = x / b if b != 0 else _divide(x, b)
    edges = edges_with_number(a)
    if edges is None:
        return plain(data, a.device)
    return record(DivByNumberBackward0.make(edges, (), (b,)), data, a.device)


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a number ``b``."""
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        return div(b, a)
    x = a.data
    data = _divide(b, x if x.dtype.kind not in "biu" else x.astype(_defaults.FLOAT))
    return RdivBackward0.record((a,), data, a.device, (a,), (b,))


# ---- neg / pow ----

NegBackward0 = Rule("NegBackward0", negated, doc="``-a``.")


def neg(a: Tensor) -> Tensor:
    if a.data.dtype.kind == "b":
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return NegBackward0.unary(a, -a.data)


def _whole(e: int | float, low: int) -> bool:
    """True if ``e`` is a whole number >= ``low``: then ``x ** e`` has no singular point
    (only overflow), and needs no errstate. See Note [Silent singular points]."""
    return e >= low and e % 1 == 0


def _power(a: Any, e: Any) -> Any:
    """``a ** e``; an array to the number 0.5 or -0.5 as PyTorch's ``sqrt`` and
    ``rsqrt`` (which keep -0.0's sign and give NaN at -inf, unlike ``pow``)."""
    if type(e) is float and (e == 0.5 or e == -0.5) and type(a) is not Tensor:
        root = _dual.xp_of(a).sqrt(a)
        return root if e > 0 else 1 / root
    return a ** e


def _pow_grad(g: Any, a: Any, e: int | float) -> Any:
    return g * (e * _power(a, e - 1))


def _pow_number_grad(g: Any, a: Any, e: int | float) -> Any:
    """``tensor ** number``: ``g * (e * a ** (e - 1))``, and zeros (whatever ``g``) when
    ``e == 0``, as PyTorch's ``pow_backward``."""
    if e == 0:
        return _dual.zeros_of(g)
    if _whole(e, 1):
        return _pow_grad(g, a, e)
    return _dual.quietly(_pow_grad, g, a, e)  # 0 ** -0.5, (-1) ** -0.5


@numpy.errstate(all="ignore")  # 0 ** -1. See Note [Silent singular points].
def _pow_self_grad(g: Any, e: Any, a: Any, result: Any) -> Any:
    """d/da = e a^(e-1), 0 where e == 0 (PyTorch's ``pow_backward_self``)."""
    return _dual.where(_dual.raw(e) == 0, 0.0, _pow_grad(g, a, e))


@numpy.errstate(all="ignore")  # log(0). See Note [Silent singular points].
def _pow_exponent_grad(g: Any, e: Any, a: Any, result: Any) -> Any:
    """d/de = a^e log a, 0 where a == 0 and e >= 0 (PyTorch's ``pow_backward_exponent``:
    ``g * where(mask, 0, ...)``, so a NaN ``g`` stays NaN)."""
    mask = (_dual.raw(a) == 0) & (_dual.raw(e) >= 0)
    if a.dtype != result.dtype:  # log of a narrower base at the result's precision
        a = a.to(result.dtype) if type(a) is Tensor else a.astype(result.dtype)
    return g * _dual.where(mask, 0.0, result * _dual.log(a))


def _pow_base_grad(g: Any, exponent: Any, result: Any, base: int | float) -> Any:
    """``number ** tensor``: d/de = b^e log b (NaN for b < 0; for b == 0: 0 where e >= 0,
    that is where ``|0 ** e| <= 1``, and ``0 ** e * -inf`` elsewhere), as PyTorch. The
    exponent is saved as PyTorch saves it (pack hooks see it), though the formula reads
    only the result."""
    if base == 0:
        return _dual.quietly(_zero_base_grad, g, result)
    return g * (result * (math.log(base) if base > 0 else math.nan))


PowBackward0 = Rule("PowBackward0", _pow_number_grad, saves=("self_",), keeps=("exponent",),
                    doc="``tensor ** number``: see ``_pow_number_grad``.")
PowBackward1 = Rule("PowBackward1", _pow_self_grad, _pow_exponent_grad,
                    saves=("exponent", "self_", "result"),  # PyTorch's order of saving
                    doc="``tensor ** tensor``: see ``_pow_self_grad``, ``_pow_exponent_grad``.")
PowBackward2 = Rule("PowBackward2", _pow_base_grad, saves=("exponent", "result"),
                    keeps=("base",),
                    doc="``number ** tensor``: see ``_pow_base_grad``.")


def _zero_base_grad(g: Any, out: Any) -> Any:
    """``g * where(e >= 0, 0, 0 ** e * log(0))``; ``e >= 0`` where ``|0 ** e| <= 1``. Its
    masked ``0 * -inf`` is NaN: the caller silences NumPy."""
    return g * _dual.where(abs(_dual.raw(out)) <= 1, 0.0, out * -math.inf)


_NEGATIVE_INTEGER_POWER = "Integers to negative integer powers are not allowed."
_BOOL_POW = "\"pow\" not implemented for 'Bool'"


def _integer_power(base: Any, exponent: Any) -> Any:
    """Integer ``base ** exponent`` (an array exponent) with PyTorch's rule where NumPy
    raises: to a negative power, 1 gives 1, -1 gives +-1 by parity, any other base 0."""
    out = base ** abs(exponent)
    wiped = (exponent < 0) & (abs(base) != 1)
    return _dual.xp_of(exponent).where(wiped, 0, out).astype(out.dtype, copy=False)


def _tensor_power(x: Any, e: Any) -> Any:
    """``x ** e`` for two arrays."""
    if e.dtype.kind in "iu" and x.dtype.kind in "iub":
        return _integer_power(x, e)
    return _dual.quietly(operator.pow, x, e)  # 0 ** -1, (-1) ** 0.5


def _number_power(x: Any, e: int | float) -> Any:
    """``x ** e`` for a number ``e`` that is negative or fractional."""
    if type(e) is int and x.dtype.kind in "iub":
        raise RuntimeError(_NEGATIVE_INTEGER_POWER)
    return _dual.quietly(_power, x, e)


def pow(a: Any, e: Any) -> Tensor:  # noqa: A001
    """``a ** e``; ``a`` may be a number when ``e`` is a Tensor (``torch.pow(2, t)``).
    Integer tensors follow PyTorch: a negative number exponent raises RuntimeError, a
    negative tensor exponent gives 0 (or +-1 for bases +-1)."""
    if not isinstance(a, Tensor):
        tensor_arg(e, "pow", "exponent", 2)
        return rpow(e, a)
    e = scalar_or_tensor(e, a)
    if type(e) is Tensor:
        dev = check_same_device(a, e)
        x, y = a.data, e.data
        if x.dtype is not y.dtype:
            x, y = _promoted(a, e)
        if x.dtype.kind == "b":
            raise NotImplementedError(_BOOL_POW)
        try:
            data = _tensor_power(x, y)
        except ValueError:
            raise broadcast_error(a.shape, e.shape) from None
        return PowBackward1.record((a, e), data, dev, (e, a))
    x = _with_number(a.data, e)
    if x.dtype.kind == "b" and type(e) is int:  # PyTorch: a bool tensor to an int is int64
        x = x.astype(numpy.int64)
    if x.dtype.kind == "b" and type(e) is bool:  # PyTorch's kernel is not run for 0 and 1
        data = x.copy() if e else a.device.xp.ones_like(x)
    else:
        data = x ** e if _whole(e, 0) else _number_power(x, e)
    return PowBackward0.record((a,), data, a.device, (a,), (e,))


def rpow(a: Tensor, b: Any) -> Tensor:
    """``b ** a`` for a number ``b``."""
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        return pow(b, a)
    x = _with_number(a.data, b)
    if type(b) is bool and x.dtype.kind == "b":
        raise NotImplementedError(_BOOL_POW)
    if type(b) is int and x.dtype.kind in "iub":
        data = _integer_power(b, x)
    elif b > 0:
        data = b ** x
    else:
        data = _dual.quietly(operator.pow, b, x)  # 0 ** -1, (-1) ** 0.5
    return PowBackward2.record((a,), data, a.device, (a,), (b,))


# ---- comparisons and logical ops (no gradient) ----

def broadcast_error(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> RuntimeError:
    """PyTorch's error for shapes that do not broadcast (NumPy raised ValueError): their
    first clash from the right, numbered as a dim of the broadcast result."""
    n = max(len(a_shape), len(b_shape))
    for dim in range(n - 1, -1, -1):
        i, j = dim - n + len(a_shape), dim - n + len(b_shape)
        sa = a_shape[i] if i >= 0 else 1
        sb = b_shape[j] if j >= 0 else 1
        if sa != sb and sa != 1 and sb != 1:
            return RuntimeError(
                f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at "
                f"non-singleton dimension {dim}"
            )
    return RuntimeError(f"shapes {list(a_shape)} and {list(b_shape)} do not broadcast")


def broadcast_error_among(*shapes: tuple[int, ...]) -> RuntimeError:
    """``broadcast_error`` for the first of ``shapes`` that does not broadcast with the
    broadcast of those before it."""
    done = shapes[0]
    for shape in shapes[1:]:
        try:
            done = numpy.broadcast_shapes(done, shape)
        except ValueError:
            return broadcast_error(done, shape)
    raise AssertionError(f"the shapes {shapes} broadcast")


def _compare(name: str) -> Any:
    def compare(a: Tensor, b: Any) -> Tensor:
        if b is None or isinstance(b, str):
            return NotImplemented  # ``t == None`` is False, as in PyTorch; ``t < None`` raises
        b = scalar_or_tensor(b, a)
        if type(b) is not Tensor:
            return plain(getattr(a.data, name)(b), a.device)
        check_same_device(a, b)
        try:
            return plain(getattr(a.data, name)(b.data), a.device)
        except ValueError:
            raise broadcast_error(a.shape, b.shape) from None

    compare.__name__ = name.strip("_")
    return compare


def _bitwise(name: str) -> Any:
    """``&``, ``|`` or ``^`` (``name``: ``bitwise_and`` ...): bool and integer tensors only,
    with the operands' result type (Note [Type promotion])."""

    def bitwise(a: Tensor, b: Any) -> Tensor:
        if b is None or isinstance(b, str):
            return NotImplemented
        b = scalar_or_tensor(b, a)
        rt = result_type(a, b)
        if rt.kind not in "biu":
            raise NotImplementedError(
                f"\"{name}_cpu\" not implemented for '{scalar_type_name(rt)}'"
            )
        ufunc = getattr(a.device.xp, name)
        x = a.data if a.data.dtype == rt else a.data.astype(rt)
        if type(b) is not Tensor:
            return plain(ufunc(x, b), a.device)
        dev = check_same_device(a, b)
        y = b.data if b.data.dtype == rt else b.data.astype(rt)
        try:
            return plain(ufunc(x, y), dev)
        except ValueError:
            raise broadcast_error(a.shape, b.shape) from None

    bitwise.__name__ = name
    return bitwise


def bitwise_not(a: Tensor) -> Tensor:
    """``~a``: logical not of a bool tensor, bitwise not of an integer one."""
    if a.data.dtype.kind not in "biu":
        raise TypeError(
            "~ (operator.invert) is only implemented on integer and Boolean-type tensors"
        )
    return plain(a.device.xp.invert(a.data), a.device)


def _logical(name: str) -> Any:
    """``logical_and``/``or``/``xor``: a bool tensor, nonzero counting as True."""

    def logical(a: Tensor, other: Tensor) -> Tensor:
        tensor_arg(other, name, "other", 1)
        dev = check_same_device(a, other)
        try:
            return plain(getattr(dev.xp, name)(a.data, other.data), dev)
        except ValueError:
            raise broadcast_error(a.shape, other.shape) from None

    logical.__name__ = name
    return logical


def logical_not(a: Tensor) -> Tensor:
    """A bool tensor: True where ``a`` is zero."""
    return plain(a.device.xp.logical_not(a.data), a.device)


def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """True if both have the same shape and the same values (dtypes may differ; NaN is
    equal to nothing)."""
    other = tensor_arg(other, "equal", "other", 2)
    dev = check_same_device(input, other)
    if input.shape != other.shape:
        return False
    return bool(dev.xp.all(input.data == other.data))


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """True if ``|input - other| <= atol + rtol * |other|`` everywhere (broadcasting);
    both must have one dtype, as in PyTorch."""
    other = tensor_arg(other, "allclose", "other", 2)
    dev = check_same_device(input, other)
    if input.dtype != other.dtype:
        raise RuntimeError(
            f"{scalar_type_name(input.dtype)} did not match {scalar_type_name(other.dtype)}"
        )
    try:
        return bool(dev.xp.allclose(input.data, other.data, rtol, atol, equal_nan))
    except ValueError:
        raise broadcast_error(input.shape, other.shape) from None


def isclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (broadcasting), a bool
    tensor; both must have one dtype, as in PyTorch. Infinities are close to themselves."""
    other = tensor_arg(other, "isclose", "other", 2)
    dev = check_same_device(input, other)
    if input.dtype != other.dtype:
        raise RuntimeError(
            f"{scalar_type_name(input.dtype)} did not match {scalar_type_name(other.dtype)}"
        )
    if rtol < 0 or atol < 0:
        name, value = ("rtol", rtol) if rtol < 0 else ("atol", atol)
        raise RuntimeError(f"{name} must be greater than or equal to zero, but got {value}")
    try:
        with numpy.errstate(all="ignore"):  # inf - inf
            data = dev.xp.isclose(input.data, other.data, rtol, atol, equal_nan)
    except ValueError:
        raise broadcast_error(input.shape, other.shape) from None
    return plain(data, dev)


lt, le, gt = _compare("__lt__"), _compare("__le__"), _compare("__gt__")
ge, eq, ne = _compare("__ge__"), _compare("__eq__"), _compare("__ne__")
bitwise_and, bitwise_or = _bitwise("bitwise_and"), _bitwise("bitwise_or")
bitwise_xor = _bitwise("bitwise_xor")
logical_and, logical_or = _logical("logical_and"), _logical("logical_or")
logical_xor = _logical("logical_xor")
