"""Attention from scratch: softmax, scaled dot-product attention, masks and multi-head attention.

Shapes use one vocabulary throughout:

- ``B`` batch, ``T`` / ``T_q`` positions that ask (queries), ``T_k`` positions that answer (keys
  and values), ``d_k`` query/key width, ``d_v`` value width;
- ``C`` = ``d_model``, ``n_heads`` heads of ``head_dim = d_model // n_heads`` each.

Masks are boolean and **True means "may attend"** (the same convention as the boolean
``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``; note that
``torch.nn.MultiheadAttention`` uses the opposite convention, True = "blocked").

A row of the mask with no True at all (a query that may attend to nothing, e.g. a padding
position asking over padding only) has no softmax distribution. Here such a row gets weights that
are all zero, and therefore an output of zero, instead of the NaN that a softmax over ``-inf``
alone produces; this keeps one empty row from spreading NaN through a batch (forward and backward).

Importing this module runs nothing.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn as nn

__all__ = ["softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask", "MultiHeadAttention"]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of `x` along `dim`.

    exp(x_i) / Σ_j exp(x_j) is unchanged when a constant is subtracted from every x_j, so we subtract
    the largest one: the biggest exponent becomes exp(0) = 1 and nothing can overflow (exp(1000) is
    inf in float32, and inf / inf is NaN). Entries of -inf get weight 0. A slice that is -inf
    everywhere has no distribution and gives NaN, like `torch.softmax`.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"softmax expects a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"softmax expects a floating-point tensor, got dtype {x.dtype}")
    if x.ndim == 0:
        raise ValueError("softmax expects at least 1 dimension, got a 0-dimensional tensor (a single number)")
    # The max carries no gradient worth keeping: the result does not depend on it mathematically.
    shift = x.amax(dim=dim, keepdim=True).detach()  # same shape as x, size 1 along dim
    e = torch.exp(x - shift)  # same shape as x, every entry in [0, 1]
    return e / e.sum(dim=dim, keepdim=True)  # same shape as x, sums to 1 along dim


def _check_tensor(name: str, t, layout: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor shaped {layout}, got {type(t).__name__}")
    if t.ndim < 2:
        raise ValueError(f"{name} must have at least 2 dimensions {layout}, got shape {tuple(t.shape)}")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v, returning ``(output, weights)``.

    q: ``(..., T_q, d_k)``, k: ``(..., T_k, d_k)``, v: ``(..., T_k, d_v)``; the leading ``...`` axes
    (batch, heads) broadcast. mask: optional boolean tensor broadcastable to ``(..., T_q, T_k)``,
    True = "query i may attend to key j". Masked scores are set to -inf *before* the softmax, so
    they get exactly zero weight and the remaining weights still sum to 1.

    Returns output ``(..., T_q, d_v)``, where row i is Σ_j weights[i, j] · v[j], and weights
    ``(..., T_q, T_k)``, whose rows sum to 1 (rows with no allowed key are all zero, see the module
    docstring).
    """
    _check_tensor("q", q, "(..., T_q, d_k)")
    _check_tensor("k", k, "(..., T_k, d_k)")
    _check_tensor("v", v, "(..., T_k, d_v)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k (a query is compared with a key by a dot "
            f"product): q has shape {tuple(q.shape)} (d_k={q.shape[-1]}), k has shape {tuple(k.shape)} "
            f"(d_k={k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions T_k (one value per key): k has shape "
            f"{tuple(k.shape)} (T_k={k.shape[-2]}), v has shape {tuple(v.shape)} (T_k={v.shape[-2]})"
        )
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch/head) dimensions of q, k and v must broadcast: got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        ) from None

    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)

    empty_rows = None
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a boolean torch.Tensor (True = may attend), got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            raise TypeError(
                f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
                "for a 0/1 mask use `mask.bool()`"
            )
        target = (*batch, q.shape[-2], k.shape[-2])
        try:
            ok = torch.broadcast_shapes(mask.shape, target) == torch.Size(target)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} cannot be broadcast to the attention scores' shape "
                f"{target} (..., T_q, T_k)"
            )
        mask = mask.to(scores.device)
        scores = scores.masked_fill(~mask, float("-inf"))  # (..., T_q, T_k), -inf where not allowed
        # A row with nothing allowed would be softmax(all -inf) = NaN. Give it finite scores for the
        # softmax (any value works) and zero its weights afterwards: no NaN forward or backward.
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
        scores = scores.masked_fill(empty_rows, 0.0)  # (..., T_q, T_k)

    weights = softmax(scores, dim=-1)  # (..., T_q, T_k), each row sums to 1 over the keys
    if empty_rows is not None:
        weights = weights.masked_fill(empty_rows, 0.0)  # (..., T_q, T_k), empty rows all zero
    output = weights @ v  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v): row i = Σ_j w_ij v_j
    return output, weights


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """A ``(T, T)`` boolean mask, True on and below the diagonal: position i may attend to j ≤ i."""
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be a positive int (the number of positions), got {T!r}")
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)


def padding_mask(lengths: Sequence[int] | torch.Tensor, T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """A ``(B, 1, 1, T)`` boolean mask, True where key position j < lengths[b] (a real token).

    The shape broadcasts against multi-head scores ``(B, n_heads, T_q, T)``. For scores without a
    head axis, ``(B, T_q, T)``, use ``padding_mask(lengths, T)[:, 0]``, shaped ``(B, 1, T)``.
    Combine with a causal mask by ``&``: ``padding_mask(lengths, T) & causal_mask(T)``.
    """
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.ndim != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D sequence of ints (one length per sequence), got dtype {lengths.dtype} "
            f"and shape {tuple(lengths.shape)}"
        )
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be a positive int (the padded length), got {T!r}")
    if len(lengths) and (int(lengths.min()) < 0 or int(lengths.max()) > T):
        raise ValueError(f"every length must be between 0 and T={T}, got {lengths.tolist()}")
    positions = torch.arange(T, device=lengths.device)  # (T,)
    keep = positions[None, :] < lengths[:, None]  # (B, T)
    return keep[:, None, None, :]  # (B, 1, 1, T)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with batch-first inputs.

    Four ``nn.Linear(d_model, d_model)`` maps: ``w_q``, ``w_k``, ``w_v`` project the inputs to queries,
    keys and values for all heads at once; ``w_o`` mixes the concatenated head outputs. The
    projections are what make attention learnable: `scaled_dot_product_attention` itself has no
    parameters.

    ``forward(x, context=None, mask=None)``: x ``(B, T, d_model)`` supplies the queries; ``context``
    ``(B, T_ctx, d_model)`` supplies keys and values (defaults to ``x``: self-attention; otherwise
    cross-attention). ``mask`` is boolean, True = may attend, broadcastable to
    ``(B, n_heads, T, T_ctx)``: e.g. ``causal_mask(T)`` or ``padding_mask(lengths, T_ctx)``.
    Returns ``(B, T, d_model)`` and keeps the weights ``(B, n_heads, T, T_ctx)``, detached, on
    ``.last_weights`` for plotting.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        if d_model < 1 or n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(
                f"d_model must be a positive multiple of n_heads (each head gets d_model // n_heads "
                f"features), got d_model={d_model} and n_heads={n_heads}"
            )
        self.d_model = d_model  # width of the residual stream, C
        self.n_heads = n_heads  # number of heads
        self.head_dim = d_model // n_heads  # width of one head's queries, keys and values
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)  # on the attention weights, active only in training
        self.last_weights: torch.Tensor | None = None  # (B, n_heads, T, T_ctx) after a forward pass

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        t = t.view(B, T, self.n_heads, self.head_dim)  # (B, T, n_heads, head_dim)
        return t.transpose(1, 2)  # (B, n_heads, T, head_dim): heads behave like a batch axis

    def _check_input(self, name: str, t) -> None:
        if not isinstance(t, torch.Tensor) or t.ndim != 3 or t.shape[-1] != self.d_model:
            got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be shaped (B, T, d_model={self.d_model}), got {got}")

    def forward(
        self, x: torch.Tensor, context: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        self._check_input("x", x)
        if context is None:
            context = x  # self-attention: the sequence attends to itself
        else:
            self._check_input("context", context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    f"x and context must have the same batch size, got x {tuple(x.shape)} and context {tuple(context.shape)}"
                )
        B, T, C = x.shape

        q = self._split_heads(self.w_q(x))  # (B, T, C) -> (B, n_heads, T, head_dim)
        k = self._split_heads(self.w_k(context))  # (B, T_ctx, C) -> (B, n_heads, T_ctx, head_dim)
        v = self._split_heads(self.w_v(context))  # (B, T_ctx, C) -> (B, n_heads, T_ctx, head_dim)

        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, n_heads, T, head_dim), (B, n_heads, T, T_ctx)
        if self.training and self.attn_dropout.p > 0:
            out = self.attn_dropout(weights) @ v  # (B, n_heads, T, head_dim), with some weights dropped
        self.last_weights = weights.detach()  # (B, n_heads, T, T_ctx)

        out = out.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, n_heads, head_dim) -> (B, T, C): heads side by side
        return self.w_o(out)  # (B, T, C)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}"
