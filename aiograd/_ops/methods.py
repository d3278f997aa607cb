"""The Tensor's op methods: one declaration of every method and operator the ops give a
Tensor, bound onto :class:`~aiograd._tensor.Tensor` once, by :func:`bind`.

``OpMethods`` is what a reader and a type checker see: under ``TYPE_CHECKING`` the
Tensor derives from it (``_tensor.py``), so mypy knows ``t.exp()`` and ``a @ b``
with the op functions' own signatures. At run time the Tensor cannot derive from it
(the ops import the Tensor), so :func:`bind` copies its attributes into the Tensor's
class dict (an attribute lookup stays one dict hit, no wrapper). The ``aiograd._ops``
package calls it when it is first imported, before any op can run.

Invariant: a name is declared once here and never also in the Tensor's own body
(:func:`bind` refuses to overwrite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import (
    arithmetic,
    device,
    indexing,
    inplace,
    joining,
    linalg,
    matrix,
    nn_extra,
    nn_ops,
    pointwise,
    reductions,
    shape,
    sorting,
    structure,
    trig,
    unary,
)
from . import scatter as scatters  # ``scatter`` is also a method name

if TYPE_CHECKING:
    from .._tensor import Tensor

__all__ = ["OpMethods", "bind"]


class OpMethods:
    """Every op method of the Tensor, by family; the value is the op's function, whose
    first parameter is the tensor (``self``)."""

    __slots__ = ()

    # ---- arithmetic ----
    isclose = arithmetic.isclose
    __add__ = __radd__ = arithmetic.add
    __sub__ = arithmetic.sub
    __rsub__ = arithmetic.rsub
    __mul__ = __rmul__ = mul = arithmetic.mul
    __truediv__ = div = arithmetic.div
    __rtruediv__ = arithmetic.rdiv
    __neg__ = arithmetic.neg
    neg = arithmetic.neg
    __pow__ = pow = arithmetic.pow
    __rpow__ = arithmetic.rpow
    add = arithmetic.add_alpha
    sub = arithmetic.sub_alpha
    __lt__ = lt = arithmetic.lt
    __le__ = le = arithmetic.le
    __gt__ = gt = arithmetic.gt
    __ge__ = ge = arithmetic.ge
    __eq__ = eq = arithmetic.eq
    __ne__ = ne = arithmetic.ne
    bitwise_and = __and__ = __rand__ = arithmetic.bitwise_and
    bitwise_or = __or__ = __ror__ = arithmetic.bitwise_or
    bitwise_xor = __xor__ = __rxor__ = arithmetic.bitwise_xor
    bitwise_not = __invert__ = arithmetic.bitwise_not
    logical_and = arithmetic.logical_and
    logical_or = arithmetic.logical_or
    logical_xor = arithmetic.logical_xor
    logical_not = arithmetic.logical_not
    equal = arithmetic.equal
    allclose = arithmetic.allclose

    # ---- device ----
    to = device.to
    cpu = device.cpu
    cuda = device.cuda
    half = device.as_half
    float = device.as_float
    double = device.as_double
    int = device.as_int
    long = device.as_long
    bool = device.as_bool

    # ---- indexing ----
    __getitem__ = indexing.getitem
    __setitem__ = indexing.setitem
    gather = indexing.gather
    index_select = indexing.index_select
    masked_fill = indexing.masked_fill
    masked_fill_ = indexing.masked_fill_
    nonzero = indexing.nonzero

    # ---- inplace ----
    add_ = __iadd__ = inplace.add_
    sub_ = __isub__ = inplace.sub_
    mul_ = __imul__ = inplace.mul_
    div_ = __itruediv__ = inplace.div_
    zero_ = inplace.zero_
    fill_ = inplace.fill_
    copy_ = inplace.copy_
    clone = inplace.clone
    pow_ = __ipow__ = inplace.pow_
    bitwise_and_ = __iand__ = inplace.bitwise_and_
    bitwise_or_ = __ior__ = inplace.bitwise_or_
    bitwise_xor_ = __ixor__ = inplace.bitwise_xor_

    # ---- joining ----
    chunk = joining.chunk
    split = joining.split
    unbind = joining.unbind

    # ---- linalg ----
    matmul = __matmul__ = linalg.matmul
    mm = linalg.mm
    bmm = linalg.bmm
    dot = linalg.dot
    mv = linalg.mv
    __rmatmul__ = linalg.rmatmul

    # ---- matrix ----
    inverse = matrix.inv
    det = matrix.det

    # ---- nn_ops ----
    softmax = nn_ops.softmax
    log_softmax = nn_ops.log_softmax

    # ---- pointwise ----
    exp_ = pointwise.exp_
    log_ = pointwise.log_
    sqrt_ = pointwise.sqrt_
    sigmoid_ = pointwise.sigmoid_
    tanh_ = pointwise.tanh_
    sin_ = pointwise.sin_
    cos_ = pointwise.cos_
    abs_ = pointwise.abs_
    neg_ = pointwise.neg_
    sign_ = pointwise.sign_
    log1p_ = pointwise.log1p_
    expm1_ = pointwise.expm1_
    clamp_ = clip_ = pointwise.clamp_
    clamp_min_ = pointwise.clamp_min_
    clamp_max_ = pointwise.clamp_max_
    cumsum_ = pointwise.cumsum_
    logical_not_ = pointwise.logical_not_
    bitwise_not_ = pointwise.bitwise_not_
    reciprocal = pointwise.reciprocal
    reciprocal_ = pointwise.reciprocal_
    rsqrt = pointwise.rsqrt
    rsqrt_ = pointwise.rsqrt_
    square = pointwise.square
    square_ = pointwise.square_
    floor = pointwise.floor
    floor_ = pointwise.floor_
    ceil = pointwise.ceil
    ceil_ = pointwise.ceil_
    round = pointwise.round
    round_ = pointwise.round_
    trunc = pointwise.trunc
    trunc_ = pointwise.trunc_
    frac = pointwise.frac
    frac_ = pointwise.frac_
    log2 = pointwise.log2
    log2_ = pointwise.log2_
    log10 = pointwise.log10
    log10_ = pointwise.log10_
    exp2 = pointwise.exp2
    exp2_ = pointwise.exp2_
    isnan = pointwise.isnan
    isinf = pointwise.isinf
    isfinite = pointwise.isfinite
    nan_to_num = pointwise.nan_to_num
    nan_to_num_ = pointwise.nan_to_num_
    atan2 = pointwise.atan2
    atan2_ = pointwise.atan2_
    hypot = pointwise.hypot
    hypot_ = pointwise.hypot_
    fmod = pointwise.fmod
    fmod_ = pointwise.fmod_
    remainder = __mod__ = pointwise.remainder
    remainder_ = __imod__ = pointwise.remainder_
    __rmod__ = pointwise._rmod
    fmax = pointwise.fmax
    fmin = pointwise.fmin
    lerp = pointwise.lerp
    lerp_ = pointwise.lerp_
    addcmul = pointwise.addcmul
    addcmul_ = pointwise.addcmul_
    addcdiv = pointwise.addcdiv
    addcdiv_ = pointwise.addcdiv_

    # ---- reductions ----
    sum = reductions.sum
    nansum = reductions.nansum
    mean = reductions.mean
    max = reductions.max
    min = reductions.min
    prod = reductions.prod
    std = reductions.std
    var = reductions.var
    amax = reductions.amax
    amin = reductions.amin
    argmax = reductions.argmax
    argmin = reductions.argmin
    any = reductions.any
    all = reductions.all
    norm = reductions.norm
    cumsum = reductions.cumsum
    logsumexp = reductions.logsumexp

    # ---- scatter (scatters) ----
    scatter = scatters.scatter
    scatter_ = scatters.scatter_
    scatter_add = scatters.scatter_add
    scatter_add_ = scatters.scatter_add_
    index_add = scatters.index_add
    index_add_ = scatters.index_add_
    index_copy = scatters.index_copy
    index_copy_ = scatters.index_copy_
    index_fill = scatters.index_fill
    index_fill_ = scatters.index_fill_
    masked_select = scatters.masked_select
    masked_scatter = scatters.masked_scatter
    masked_scatter_ = scatters.masked_scatter_
    take = scatters.take

    # ---- shape ----
    reshape = shape.reshape
    view = shape.view
    flatten = shape.flatten
    squeeze = shape.squeeze
    unsqueeze = shape.unsqueeze
    transpose = shape.transpose
    permute = shape.permute

    @property
    def T(self) -> Tensor:
        """All dims reversed."""
        return shape.reversed_dims(cast("Tensor", self))

    t = shape.t

    @property
    def mT(self) -> Tensor:
        """The last two dims swapped."""
        return shape.matrix_transpose(cast("Tensor", self))

    view_as = shape.view_as
    reshape_as = shape.reshape_as
    expand = shape.expand
    expand_as = shape.expand_as
    select = shape.select
    narrow = shape.narrow
    contiguous = shape.contiguous
    is_contiguous = shape.is_contiguous
    flip = shape.flip
    repeat = shape.repeat

    # ---- sorting ----
    sort = sorting.sort
    unique = sorting.unique
    argsort = sorting.argsort
    topk = sorting.topk
    kthvalue = sorting.kthvalue
    median = sorting.median
    nanmedian = sorting.nanmedian
    cumprod = sorting.cumprod
    cummax = sorting.cummax
    cummin = sorting.cummin
    logcumsumexp = sorting.logcumsumexp

    # ---- structure ----
    diagonal = structure.diagonal
    diag = structure.diag
    diag_embed = structure.diag_embed
    trace = structure.trace
    tril = structure.tril
    triu = structure.triu
    tril_ = structure.tril_
    triu_ = structure.triu_
    outer = structure.outer
    inner = structure.inner
    kron = structure.kron
    addmm = structure.addmm
    baddbmm = structure.baddbmm
    movedim = structure.movedim
    moveaxis = structure.moveaxis
    swapaxes = structure.swapaxes
    swapdims = structure.swapdims
    unflatten = structure.unflatten
    roll = structure.roll
    rot90 = structure.rot90
    repeat_interleave = structure.repeat_interleave
    tensor_split = structure.tensor_split
    diff = structure.diff

    # ---- trig ----
    atan = arctan = trig.atan
    asin = arcsin = trig.asin
    acos = arccos = trig.acos
    sinh = trig.sinh
    cosh = trig.cosh
    erfinv = trig.erfinv
    erf = nn_extra.erf
    atan_ = trig.atan_
    asin_ = trig.asin_
    acos_ = trig.acos_
    sinh_ = trig.sinh_
    cosh_ = trig.cosh_
    erfinv_ = trig.erfinv_
    erf_ = trig.erf_

    # ---- unary ----
    exp = unary.exp
    log = unary.log
    sqrt = unary.sqrt
    tanh = unary.tanh
    sigmoid = unary.sigmoid
    abs = __abs__ = unary.abs
    sign = unary.sign
    relu = unary.relu
    relu_ = unary.relu_
    log1p = unary.log1p
    expm1 = unary.expm1
    sin = unary.sin
    cos = unary.cos
    clamp = clip = unary.clamp
    clamp_min = unary.clamp_min
    clamp_max = unary.clamp_max
    maximum = unary.maximum
    minimum = unary.minimum
    where = unary._where_method


# What a class body defines besides its attributes; not copied.
_CLASS_MACHINERY = frozenset({"__module__", "__qualname__", "__doc__", "__slots__", "__hash__",
                              "__firstlineno__", "__static_attributes__"})


def bind(cls: type) -> None:
    """Copy ``OpMethods``' declarations into ``cls`` (the Tensor)."""
    for name, value in vars(OpMethods).items():
        if name in _CLASS_MACHINERY:
            continue
        if name in vars(cls):
            raise TypeError(f"Tensor.{name} is declared twice: in its class and in OpMethods")
        setattr(cls, name, value)
