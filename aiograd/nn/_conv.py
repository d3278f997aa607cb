"""Convolution and pooling modules ``Conv1d Conv2d MaxPool2d AvgPool2d AdaptiveAvgPool2d``,
as ``torch.nn``'s (attributes, repr, state_dict keys, initialisation), over
:mod:`aiograd._ops.conv`."""

from __future__ import annotations

import math
import numbers
from typing import Any

from .._ops.conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, max_pool2d
from .._tensor import Tensor, _resolve_dtype, empty
from . import init
from ._module import Module, Parameter

__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "Conv1d", "Conv2d", "MaxPool2d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value: Any, n: int) -> tuple[Any, ...]:
    """``value`` repeated ``n`` times, or a sequence as a tuple (as ``torch.nn``'s ``_ntuple``)."""
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """The shared part of Conv1d and Conv2d: PyTorch's checks, attributes and init
    (weight ~ kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and
    bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from the ``aiograd.manual_seed`` generator).
    Only ``padding_mode='zeros'`` is implemented."""

    _spatial = 0
    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]
    stride: Any
    padding: Any
    dilation: tuple[int, ...]
    groups: int
    weight: Tensor
    bias: Tensor | None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: Any = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        n = self._spatial
        if not isinstance(groups, numbers.Integral) or groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        stride = _ntuple(stride, n)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, n)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                "padding_mode must be one of {'reflect', 'zeros', 'circular', 'replicate'}, "
                f"but got padding_mode={padding_mode!r}")
        if padding_mode != "zeros":
            raise NotImplementedError(
                f"{type(self).__name__}: padding_mode={padding_mode!r} is not implemented; "
                "only 'zeros' is")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = stride
        self.padding = padding
        self.dilation = _ntuple(dilation, n)
        self.transposed = False
        self.output_padding = (0,) * n
        self.groups = int(groups)
        self.padding_mode = padding_mode
        dt = _resolve_dtype(dtype)
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(empty(*shape, dtype=dt, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dt, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's init: kaiming_uniform_(a=sqrt(5)) for the weight, U(+-1/sqrt(fan_in))
        for the bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = math.prod(self.weight.shape[1:])
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        n = self._spatial
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv1d(_ConvNd):
    """``F.conv1d`` with a learned ``weight`` (out, in/groups, k) and ``bias`` (out,)."""

    _spatial = 1

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                      self.groups)


class Conv2d(_ConvNd):
    """``F.conv2d`` with a learned ``weight`` (out, in/groups, kh, kw) and ``bias`` (out,)."""

    _spatial = 2

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                      self.groups)


class MaxPool2d(Module):
    """``F.max_pool2d``; ``stride`` defaults to ``kernel_size``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:  # noqa: A002
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
                f", dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """``F.avg_pool2d``; ``stride`` defaults to ``kernel_size``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """``F.adaptive_avg_pool2d`` to ``output_size`` (sizes that divide the input's)."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
