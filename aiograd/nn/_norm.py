"""Normalization modules, as PyTorch's: ``BatchNorm1d``, ``BatchNorm2d``, ``InstanceNorm1d``,
``InstanceNorm2d`` and ``GroupNorm``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy

from .._ops.batch_norm import batch_norm, group_norm, instance_norm
from .._tensor import Tensor, _resolve_dtype, ones, tensor, zeros
from . import init
from ._module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d"]


class _NormBase(Module):
    """``num_features`` channels; with ``affine``, a learned ``weight`` (ones) and ``bias``
    (zeros, unless ``bias=False``); with ``track_running_stats``, the buffers
    ``running_mean`` (zeros), ``running_var`` (ones) and the int64 ``num_batches_tracked``
    (0), else those three are None. ``_expected_ranks``: the input ranks taken."""

    _expected_ranks: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        dt = _resolve_dtype(dtype)
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dt, device=device))
        else:
            self.register_parameter("weight", None)
        if affine and bias:
            self.bias = Parameter(zeros(num_features, dtype=dt, device=device))
        else:
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dt, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dt, device=device))
            self.register_buffer("num_batches_tracked",
                                 tensor(0, dtype=numpy.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Running mean 0, variance 1 and no batch tracked (in place)."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """The running stats reset, ``weight`` ones and ``bias`` zeros (in place)."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _state_dict_defaults(self) -> dict[str, Any]:
        """A state dict without ``num_batches_tracked`` (older PyTorch) keeps the current
        count, as PyTorch's ``_BatchNorm`` does."""
        if self.num_batches_tracked is None:
            return {}
        return {"num_batches_tracked": self.num_batches_tracked.detach().clone()}

    def _check_input_dim(self, input: Tensor) -> None:  # noqa: A002
        if input.ndim not in self._expected_ranks:
            ranks = " or ".join(f"{r}D" for r in self._expected_ranks)
            raise ValueError(f"expected {ranks} input (got {input.ndim}D input)")

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """``batch_norm`` over the channel dim 1. Training counts each call in
    ``num_batches_tracked`` and updates the running stats by ``momentum`` (``None``: the
    cumulative average, factor ``1 / num_batches_tracked``); evaluation normalizes with
    them. Without running stats, every call normalizes with the batch's own stats.
    """

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or self.running_mean is None
        tracked = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if tracked else None,
                          self.running_var if tracked else None, self.weight, self.bias,
                          use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of an (N, C) or (N, C, L) input."""

    _expected_ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of an (N, C, H, W) input."""

    _expected_ranks = (4,)


class _InstanceNorm(_NormBase):
    """``instance_norm``: each sample's channels normalized over their spatial dims, an
    unbatched input taken as a batch of one. By default ``affine`` and
    ``track_running_stats`` are off; with the stats, training updates them by ``momentum``
    (``None``: 0, so never, as PyTorch) and evaluation normalizes with them.
    ``num_batches_tracked`` is never counted.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _apply_instance_norm(self, input: Tensor) -> Tensor:  # noqa: A002
        return instance_norm(input, self.running_mean, self.running_var, self.weight,
                             self.bias, self.training or not self.track_running_stats,
                             0.0 if self.momentum is None else self.momentum, self.eps)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        self._check_input_dim(input)
        unbatched = self._expected_ranks[0]
        feature_dim = input.ndim - unbatched
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features"
                    f" ({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can "
                "silence this warning by not passing in num_features, which is not used "
                "because affine=False", stacklevel=2)
        if input.ndim == unbatched:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of an (N, C, L) input, or an unbatched (C, L) one."""

    _expected_ranks = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of an (N, C, H, W) input, or an unbatched (C, H, W) one."""

    _expected_ranks = (3, 4)


class GroupNorm(Module):
    """``group_norm`` of an (N, C, *) input in ``num_groups`` groups of its
    ``num_channels`` channels; with ``affine``, a learned per-channel ``weight`` (ones)
    and ``bias`` (zeros, unless ``bias=False``). No buffers: training and evaluation agree.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        dt = _resolve_dtype(dtype)
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dt, device=device))
        else:
            self.register_parameter("weight", None)
        if affine and bias:
            self.bias = Parameter(zeros(num_channels, dtype=dt, device=device))
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """``weight`` ones and ``bias`` zeros (in place)."""
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")
