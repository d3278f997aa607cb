"""aiograd: PyTorch's autograd engine, rebuilt for async Python.

``await aiograd.backward(loss)`` inside asyncio or Trio; the sync forms
(``backward_sync``) for scripts. See docs/ for a guide.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import metadata as _metadata
from pathlib import Path
from typing import Any

from . import (
    _boundary,
    _ops,  # noqa: F401  (binds the Tensor operators and methods)
    cuda,
    devices,
    graph,
    linalg,
    nn,
    optim,
    profiler,
    viz,
)
from ._ops.arithmetic import allclose, equal, pow
from ._ops.einsum import einsum
from ._ops.joining import cat, stack
from ._ops.linalg import matmul
from ._ops.pointwise import remainder
from ._ops.structure import tensordot
from ._ops.unary import where
from ._random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from ._tensor import (
    Tensor,
    arange,
    as_tensor,
    bool_,
    empty,
    empty_like,
    eye,
    float16,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    is_tensor,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    set_default_dtype,
    tensor,
    uint8,
    zeros,
    zeros_like,
)
from .autograd import (
    backward,
    backward_sync,
    current_graph_task_execution_order,
    current_graph_task_id,
    grad,
    grad_sync,
    is_checkpoint_valid,
    queue_callback,
    set_multithreading_enabled,
)
from .devices import Device, device
from .engine.offload import offload
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_anomaly_enabled,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_detect_anomaly,
    set_grad_enabled,
)
from .gradcheck import (
    GradcheckError,
    gradcheck,
    gradcheck_async,
    gradgradcheck,
    gradgradcheck_async,
)
from .graph import get_gradient_edge, register_multi_grad_hook, saved_tensors_hooks
from .serialization import load, save
from .utils.checkpoint import checkpoint

# ---- torch-style functions: aiograd.exp(t) is t.exp() ----

# The Tensor methods PyTorch also offers as functions (torch.exp, torch.sum, ...).
_METHOD_FUNCTIONS = (
    "abs", "exp", "log", "sqrt", "log1p", "expm1", "sin", "cos", "tanh", "sigmoid", "relu",
    "relu_",
    "sign", "neg", "add", "sub", "mul", "div",
    "clamp", "clip", "clamp_min", "clamp_max", "maximum", "minimum",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "sum", "mean", "max", "min", "prod", "std", "var", "amax", "amin", "argmax", "argmin",
    "norm", "cumsum", "logsumexp", "any", "all", "softmax", "log_softmax",
    "reshape", "transpose", "permute", "squeeze", "unsqueeze", "flatten", "t", "select",
    "narrow", "chunk",
    "split", "unbind", "flip", "gather", "index_select", "masked_fill", "nonzero",
    "mm", "bmm", "dot", "mv", "numel", "clone", "detach", "is_floating_point",
    # more pointwise math, and in-place forms
    "exp_", "log_", "sqrt_", "sigmoid_", "tanh_", "sin_", "cos_", "abs_", "neg_", "log1p_",
    "expm1_", "clamp_min_", "clamp_max_",
    "reciprocal", "reciprocal_", "rsqrt", "rsqrt_", "square", "square_", "floor", "floor_",
    "ceil", "ceil_", "round", "trunc", "trunc_", "frac", "frac_", "log2", "log10", "exp2",
    "isnan", "isinf", "isfinite", "nan_to_num", "nan_to_num_", "atan2", "hypot", "fmod",
    "fmax", "fmin", "lerp", "addcmul", "addcdiv",
    # sorting and scans
    "sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "cumprod", "cummax",
    "cummin", "logcumsumexp",
    # scatter and index writes
    "scatter", "scatter_add", "index_add", "index_copy", "index_fill", "masked_select",
    "masked_scatter", "take",
    # structure: diagonals, triangles, products, dim shuffles
    "diagonal", "diag", "diag_embed", "trace", "tril", "triu", "outer", "inner", "kron",
    "addmm", "baddbmm", "movedim", "moveaxis", "swapaxes", "swapdims", "unflatten", "roll",
    "rot90", "repeat_interleave", "tensor_split", "diff",
    # inverse trigonometric, hyperbolic and error functions
    "atan", "asin", "acos", "arctan", "arcsin", "arccos", "sinh", "cosh", "erf", "erfinv",
    "atan_", "asin_", "acos_", "sinh_", "cosh_", "erf_", "erfinv_",
    # comparisons, NaN-aware sums, distinct values
    "isclose", "nansum", "unique",
    # matrix functions (also in aiograd.linalg)
    "inverse", "det",
)


def _method_function(name: str) -> Any:
    """``aiograd.<name>(input, *args, **kwargs)``: ``input.<name>(*args, **kwargs)``, with the
    method's name, docstring and signature."""
    method = getattr(Tensor, name)

    def function(input: Tensor, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        if not isinstance(input, Tensor):
            raise TypeError(
                f"{name}(): argument 'input' (position 1) must be Tensor, not "
                f"{type(input).__name__}"
            )
        return method(input, *args, **kwargs)

    functools.update_wrapper(function, method)
    function.__module__ = __name__
    function.__name__ = function.__qualname__ = name
    return function


globals().update({name: _method_function(name) for name in _METHOD_FUNCTIONS})

# Note [Errors at the public boundary]: every public method (after the functions above took
# the bare ones: one wrapper per call), and at the end every public function.
_boundary.guard_methods(Tensor)

def _version() -> str:
    """The installed distribution's version; from a source tree, pyproject.toml's."""
    try:
        return _metadata.version("aiograd")
    except _metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()

# PyTorch's dtype names. Bound last: they shadow builtins in this module.
bool = bool_  # noqa: A001
double = float64
half = float16
long = int64


__all__ = [
    "__version__",
    "Generator",
    "default_generator",
    "cuda",
    "einsum",
    "load",
    "save",
    "linalg",
    "get_rng_state",
    "initial_seed",
    "randint",
    "seed",
    "set_rng_state",
    "Device",
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "Tensor",
    "allclose",
    "arange",
    "as_tensor",
    "backward",
    "backward_sync",
    "bool",
    "bool_",
    "cat",
    "checkpoint",
    "current_graph_task_execution_order",
    "current_graph_task_id",
    "detect_anomaly",
    "device",
    "devices",
    "double",
    "empty",
    "empty_like",
    "enable_grad",
    "equal",
    "eye",
    "float16",
    "float32",
    "float64",
    "from_numpy",
    "get_default_dtype",
    "full",
    "full_like",
    "get_gradient_edge",
    "grad",
    "grad_sync",
    "gradcheck",
    "gradcheck_async",
    "gradgradcheck",
    "gradgradcheck_async",
    "graph",
    "half",
    "inference_mode",
    "int16",
    "int32",
    "int64",
    "int8",
    "is_anomaly_enabled",
    "is_checkpoint_valid",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "is_tensor",
    "linspace",
    "long",
    "manual_seed",
    "matmul",
    "nn",
    "no_grad",
    "offload",
    "once_differentiable",
    "ones",
    "ones_like",
    "optim",
    "profiler",
    "pow",
    "queue_callback",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "register_multi_grad_hook",
    "remainder",
    "saved_tensors_hooks",
    "set_default_dtype",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
    "stack",
    "tensor",
    "tensordot",
    "uint8",
    "viz",
    "where",
    "zeros",
    "zeros_like",
    *_METHOD_FUNCTIONS,
]

_boundary.guard_functions(globals(), __all__)
