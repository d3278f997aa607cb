"""Attention: ``scaled_dot_product_attention``, ``MultiheadAttention`` and the
Transformer encoder built on them.

Everything here composes differentiable tensor ops (matmul, softmax, masked_fill,
dropout, linear, layer_norm), so backward needs nothing of its own; the node names
are those of the composed ops, not PyTorch's fused kernels'
(``ScaledDotProductFlashAttentionForCpuBackward0``). MultiheadAttention follows
PyTorch's layout (sequence first, heads folded into the batch dim) and its last ops,
so its results carry PyTorch's nodes.

Note [Attention masks]
    Two conventions meet here, as in PyTorch. ``scaled_dot_product_attention``'s
    boolean ``attn_mask`` says which positions *take part* (True: attend), while
    ``MultiheadAttention``'s boolean ``attn_mask`` and ``key_padding_mask`` say which
    positions are *masked out* (True: ignore). Float masks are added to the scores
    in both. Internally every mask becomes one additive float mask (0 or -inf for a
    boolean one) broadcast against the ``(..., L, S)`` scores. A query row whose keys
    are all masked out gives zeros (and zero attention weights), as PyTorch's CPU
    attention kernel gives, instead of the NaNs a plain softmax would.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy

from .._ops.nn_extra import dropout, gelu
from .._ops.nn_ops import linear, softmax
from .._ops.unary import relu
from .._tensor import Tensor, _resolve_dtype, empty, ones, zeros
from . import init
from ._layers import Dropout, LayerNorm, Linear, ModuleList
from ._module import Module, Parameter

__all__ = [
    "MultiheadAttention",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "scaled_dot_product_attention",
]


# ---- the attention core ----

def _check_tensors(fn: str, **args: Any) -> None:
    """TypeError naming ``fn`` and the argument for any of ``args`` that is neither a
    Tensor nor None."""
    for name, value in args.items():
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(
                f"{fn}: argument '{name}' must be Tensor, not {type(value).__name__}")


def _additive(mask: Tensor, dtype: Any, attend_when_true: bool, fn: str, name: str) -> Tensor:
    """A boolean or float mask as an additive float mask of ``dtype``; ``fn`` and ``name``
    (the function and argument) for the error. See Note [Attention masks]."""
    if mask.dtype.kind == "b":
        blocked = mask.logical_not() if attend_when_true else mask
        return zeros(*mask.shape, dtype=dtype, device=mask.device).masked_fill(
            blocked, float("-inf"))
    if mask.dtype.kind != "f":
        raise TypeError(
            f"{fn}: expected {name} of dtype bool or float, but got {mask.dtype}")
    return mask.to(dtype)


def _attend(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None,
            dropout_p: float, scale: float) -> tuple[Tensor, Tensor]:
    """``(softmax(q k^T * scale + mask) @ v, the attention weights)``, the weights after
    dropout (as PyTorch returns them); ``mask`` additive or None."""
    scores = (query * scale).matmul(key.transpose(-2, -1))
    dead = None
    if mask is not None:
        scores = scores + mask
        # See Note [Attention masks]: rows with every key masked out give zeros.
        row_max = scores.detach().amax(dim=-1, keepdim=True)
        dead = row_max.isinf() & (row_max < 0)
        if bool(dead.any()):
            scores = scores.masked_fill(dead, 0.0)
        else:
            dead = None
    weights = softmax(scores, -1, None)
    if dead is not None:
        weights = weights.masked_fill(dead, 0.0)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return weights.matmul(value), weights


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims, as
    ``torch.nn.functional.scaled_dot_product_attention``.

    ``query`` is ``(..., L, E)``, ``key`` ``(..., S, E)``, ``value`` ``(..., S, Ev)``;
    the leading dims broadcast. ``scale`` defaults to ``1 / sqrt(E)``. ``attn_mask``
    broadcasts to ``(..., L, S)``: boolean (True: attend) or float (added).
    ``is_causal`` masks key ``j > i`` for query ``i`` (the upper-left triangle) and
    excludes ``attn_mask``. ``dropout_p`` drops attention weights, always (as
    PyTorch: pass 0 in evaluation). ``enable_gqa``: ``key``/``value`` with fewer heads
    (dim -3) than ``query`` are shared by groups of query heads. See Note [Attention
    masks] for fully masked rows.
    """
    _check_tensors("scaled_dot_product_attention()", query=query, key=key, value=value,
                   attn_mask=attn_mask)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim < 2:
            raise ValueError(
                f"scaled_dot_product_attention(): {name} must have at least 2 dims, got "
                f"shape {tuple(t.shape)}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if is_causal and attn_mask is not None:
        raise RuntimeError(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
            "is_causal=True")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        groups, rest = divmod(query.shape[-3], key.shape[-3])
        if rest:
            raise RuntimeError(
                f"scaled_dot_product_attention(): number of heads in key/value "
                f"({key.shape[-3]}) must divide the number of heads in query "
                f"({query.shape[-3]})")
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    length, source = query.shape[-2], key.shape[-2]
    if is_causal:
        attn_mask = ones(length, source, dtype=numpy.bool_, device=query.device).tril()
    mask = None
    if attn_mask is not None:
        mask = _additive(attn_mask, query.dtype, True, "scaled_dot_product_attention()",
                         "attn_mask")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return _attend(query, key, value, mask, dropout_p, scale)[0]


# ---- multi-head attention ----

_MHA_FORWARD = "MultiheadAttention.forward()"

class MultiheadAttention(Module):
    """``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
    add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None, batch_first=False)``,
    as ``torch.nn.MultiheadAttention``.

    Parameters carry PyTorch's names and shapes, so a PyTorch state_dict loads:
    ``in_proj_weight (3E, E)`` (or ``q_proj_weight``, ``k_proj_weight (E, kdim)``,
    ``v_proj_weight (E, vdim)`` when ``kdim``/``vdim`` differ from ``embed_dim``),
    ``in_proj_bias (3E)``, and ``out_proj`` (a Linear). Initialised as PyTorch's:
    Xavier-uniform projections, zero biases. ``add_bias_kv`` and ``add_zero_attn``
    are not supported.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError(
                "aiograd's MultiheadAttention does not support add_bias_kv or add_zero_attn; "
                "pass False")
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        dt = _resolve_dtype(dtype)

        def weight(*shape: int) -> Tensor:
            return Parameter(init.xavier_uniform_(empty(*shape, dtype=dt, device=device)))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = weight(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = weight(embed_dim, embed_dim)
            self.k_proj_weight = weight(embed_dim, self.kdim)
            self.v_proj_weight = weight(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim, dtype=dt, device=device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if bias:
            init.zeros_(self.out_proj.bias)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> list[Tensor]:
        """The input projections of ``query``, ``key`` and ``value`` (any layout)."""
        biases: list[Tensor | None] = [None, None, None]
        if self.in_proj_bias is not None:
            biases = list(self.in_proj_bias.chunk(3))
        if not self._qkv_same_embed_dim:
            weights = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
            return [linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases)]
        if query is key and key is value:  # self-attention: one matmul
            return list(linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, -1))
        parts = self.in_proj_weight.chunk(3)
        return [linear(x, w, b) for x, w, b in zip((query, key, value), parts, biases)]

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """``(attn_output, attn_weights)`` as PyTorch's.

        Inputs are ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``) or unbatched
        ``(L, E)``. ``key_padding_mask`` ``(N, S)`` and ``attn_mask`` ``(L, S)`` or
        ``(N * num_heads, L, S)``: boolean (True: masked out) or float (added); see
        Note [Attention masks]. ``is_causal`` is a hint that ``attn_mask`` is causal
        and needs ``attn_mask``. The weights are ``(N, L, S)`` averaged over the heads,
        ``(N, num_heads, L, S)`` without ``average_attn_weights``, or None without
        ``need_weights`` (unbatched: without the N dim).
        """
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint: pass the causal mask too, "
                "e.g. attn_mask=aiograd.full((L, L), float('-inf')).triu(1)")
        _check_tensors(_MHA_FORWARD, query=query, key=key, value=value,
                       key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(
                "MultiheadAttention: query, key and value must all be 3-D (batched) or 2-D "
                f"(unbatched), got shapes {tuple(query.shape)}, {tuple(key.shape)} and "
                f"{tuple(value.shape)}")
        # PyTorch's layout, so the outputs' nodes are PyTorch's: sequence first inside,
        # (N * heads) folded into the batch dim of the attention.
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            same_kv = key is value
            same_qk = query is key
            query = query.transpose(1, 0)
            key = query if same_qk else key.transpose(1, 0)
            value = key if same_kv else value.transpose(1, 0)
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(
                f"was expecting embedding dimension of {self.embed_dim}, but got "
                f"{query.shape[-1]}")
        length, batch = query.shape[0], query.shape[1]
        source = key.shape[0]
        folded = batch * self.num_heads
        q, k, v = [x.reshape(x.shape[0], folded, self.head_dim).transpose(0, 1)
                   for x in self._project(query, key, value)]
        mask = self._merged_mask(attn_mask, key_padding_mask, q.dtype, batch, length, source)
        out, weights = _attend(q, k, v, mask, self.dropout if self.training else 0.0,
                               1.0 / math.sqrt(self.head_dim))
        out = out.transpose(0, 1).reshape(length * batch, self.embed_dim)
        out = self.out_proj(out).view(length, batch, self.embed_dim)
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(1, 0)
        if not need_weights:
            return out, None
        weights = weights.view(batch, self.num_heads, length, source)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, weights if batched else weights.squeeze(0)

    def _merged_mask(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                     dtype: Any, batch: int, length: int, source: int) -> Tensor | None:
        """One additive mask broadcasting to ``(N * heads, L, S)``, or None."""
        mask = None
        if attn_mask is not None:
            mask = _additive(attn_mask, dtype, False, _MHA_FORWARD, "attn_mask")
            if mask.ndim == 2:
                expected: tuple[int, ...] = (length, source)
            else:
                expected = (batch * self.num_heads, length, source)
            if tuple(mask.shape) != expected:
                raise RuntimeError(
                    f"The shape of the {mask.ndim}D attn_mask is {tuple(mask.shape)}, but "
                    f"should be {expected}.")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (batch, source):
                raise AssertionError(
                    f"expecting key_padding_mask shape of {(batch, source)}, but got "
                    f"{tuple(key_padding_mask.shape)}")
            padding = _additive(key_padding_mask, dtype, False, _MHA_FORWARD, "key_padding_mask")
            padding = padding.view(batch, 1, 1, source)
            padding = padding.expand(batch, self.num_heads, 1, source).reshape(
                batch * self.num_heads, 1, source)
            mask = padding if mask is None else mask + padding
        return mask

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


# ---- the Transformer encoder ----

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": relu, "gelu": gelu}


class TransformerEncoderLayer(Module):
    """``TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False,
    bias=True)``, as ``torch.nn.TransformerEncoderLayer``: self-attention and a
    feed-forward block, each with a residual connection and a LayerNorm (after the
    sum, or before the block with ``norm_first``). Submodules and parameters carry
    PyTorch's names (``self_attn``, ``linear1``, ``linear2``, ``norm1``, ``norm2``).
    ``activation`` is ``"relu"``, ``"gelu"`` or a callable.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable[[Tensor], Tensor] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **factory)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = _ACTIVATIONS[activation]
        self.activation = activation

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """The layer applied to ``src``; the masks as :class:`MultiheadAttention`'s
        ``attn_mask`` and ``key_padding_mask``."""
        x: Tensor = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None,
                  key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        x = self.dropout1(x)
        return x

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        x = self.dropout2(x)
        return x


class TransformerEncoder(Module):
    """``TransformerEncoder(encoder_layer, num_layers, norm=None)``, as
    ``torch.nn.TransformerEncoder``: ``num_layers`` deep copies of ``encoder_layer``
    (``layers.0``, ``layers.1``, ...), then ``norm`` if given. PyTorch's
    ``enable_nested_tensor`` and ``mask_check`` are accepted and change nothing
    (aiograd has no nested tensors: padded positions are computed, not skipped).
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        """Each layer applied in turn with the same masks, then ``norm``."""
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        if self.norm is not None:
            out = self.norm(out)
        return out
