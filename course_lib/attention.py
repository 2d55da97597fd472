"""Attention from scratch: softmax, scaled dot-product attention, masks and multi-head attention.

Shapes use one vocabulary throughout:

- ``B`` batch, ``T`` / ``T_q`` positions that ask (queries), ``T_k`` positions that answer (keys
  and values), ``d_k`` query/key width, ``d_v`` value width;
- ``C`` = ``d_model``, ``n_heads`` heads of ``head_dim = d_model // n_heads`` each.

Masks are boolean and **True means "may attend"** (the same convention as the boolean
``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``; note that
``torch.nn.MultiheadAttention`` uses the opposite convention, True = "blocked"). A floating-point
mask is *added* to the scores instead (0 where allowed, -inf where not), as in
``F.scaled_dot_product_attention``: the two forms give the same weights.

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

from course_lib._validate import check_int

__all__ = ["softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask", "KVCache", "MultiHeadAttention"]


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
    they get exactly zero weight and the remaining weights still sum to 1. A floating-point mask
    is added to the scores (0 = allowed, -inf = blocked, or any bias in between).

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
        if mask.dtype != torch.bool and not mask.is_floating_point():
            raise TypeError(
                f"mask must be a boolean tensor (True = may attend) or a floating-point one (added to the "
                f"scores), got dtype {mask.dtype}; for a 0/1 mask use `mask.bool()`"
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
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))  # (..., T_q, T_k), -inf where not allowed
        else:
            scores = scores + mask.to(scores.dtype)  # (..., T_q, T_k), an additive mask or bias
        # A row with nothing allowed would be softmax(all -inf) = NaN. Give it finite scores for the
        # softmax (any value works) and zero its weights afterwards: no NaN forward or backward.
        empty_rows = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., T_q, 1)
        scores = scores.masked_fill(empty_rows, 0.0)  # (..., T_q, T_k)

    weights = softmax(scores, dim=-1)  # (..., T_q, T_k), each row sums to 1 over the keys
    if empty_rows is not None:
        weights = weights.masked_fill(empty_rows, 0.0)  # (..., T_q, T_k), empty rows all zero
    output = weights @ v  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v): row i = Σ_j w_ij v_j
    return output, weights


def causal_mask(T: int, device: torch.device | str | None = None, *, past: int = 0) -> torch.Tensor:
    """A ``(T, T)`` boolean mask, True on and below the diagonal: position i may attend to j ≤ i.

    With ``past`` > 0 (generation with a KV cache: T new tokens after ``past`` cached ones) the mask
    is ``(T, past + T)``: new token i sits at position past + i and may attend to every cached
    position and to the new ones up to itself.
    """
    check_int("T", T, what="the number of positions")
    check_int("past", past, minimum=0, what="the number of cached positions")
    return torch.ones(T, past + T, dtype=torch.bool, device=device).tril(diagonal=past)  # (T, past + T)


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
    check_int("T", T, what="the padded length")
    if len(lengths) and (int(lengths.min()) < 0 or int(lengths.max()) > T):
        raise ValueError(f"every length must be between 0 and T={T}, got {lengths.tolist()}")
    positions = torch.arange(T, device=lengths.device)  # (T,)
    keep = positions[None, :] < lengths[:, None]  # (B, T)
    return keep[:, None, None, :]  # (B, 1, 1, T)


class KVCache:
    """The keys and values one attention layer has computed so far, for generation.

    When a decoder generates token t, the keys and values of tokens 0 … t-1 are the same as at the
    previous step (causal attention: later tokens never change earlier ones), so they are kept here
    and only the new token's key and value are computed and appended. ``k`` and ``v`` are shaped
    ``(B, n_heads, T_cached, head_dim)``.
    """

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None  # (B, n_heads, T_cached, head_dim)
        self.v: torch.Tensor | None = None  # (B, n_heads, T_cached, head_dim)

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' keys and values; return all of them."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            if k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]:
                raise ValueError(f"new keys {tuple(k.shape)} do not match the cached ones {tuple(self.k.shape)} "
                                 "(B, n_heads, T, head_dim): reset() the cache before a new batch")
            self.k = torch.cat([self.k, k], dim=-2)  # (B, n_heads, T_cached + T, head_dim)
            self.v = torch.cat([self.v, v], dim=-2)
        return self.k, self.v

    def reset(self) -> None:
        self.k = self.v = None

    def __repr__(self) -> str:
        return f"KVCache(cached={len(self)})"


class MultiHeadAttention(nn.Module):
    """Multi-head attention with batch-first inputs.

    Four ``nn.Linear(d_model, d_model)`` maps: ``w_q``, ``w_k``, ``w_v`` project the inputs to queries,
    keys and values for all heads at once; ``w_o`` mixes the concatenated head outputs. The
    projections are what make attention learnable: `scaled_dot_product_attention` itself has no
    parameters.

    ``forward(x, context=None, mask=None, *, cache=None)``: x ``(B, T, d_model)`` supplies the
    queries; ``context`` ``(B, T_ctx, d_model)`` supplies keys and values (defaults to ``x``:
    self-attention; otherwise cross-attention). Returns ``(B, T, d_model)``.

    ``mask`` (True = may attend; a float mask is added to the scores) may be shaped
    ``(T, T_ctx)`` (the same for every sequence, e.g. ``causal_mask(T)``), ``(B, T_ctx)`` (key
    padding: which keys of each sequence are real tokens), ``(B, 1, T_ctx)`` or ``(B, T, T_ctx)``
    (per sequence; the head axis is inserted), or 4-D broadcastable to ``(B, n_heads, T, T_ctx)``
    (e.g. ``padding_mask(lengths, T_ctx)``). A shape that would broadcast wrongly (a batch axis
    landing on the head axis) raises ValueError. A 2-D mask that fits both readings (when B == T)
    is read as ``(T, T_ctx)``; give key padding as ``(B, 1, T_ctx)`` to be unambiguous. A mask whose
    last (key) axis has size 1 while its query axis does not, such as ``(B, T, 1)`` or
    ``(B, 1, T, 1)``, is refused: it would hide whole query rows and let every query attend to the
    padded keys, which is key padding put on the wrong axis.

    ``keep_weights`` (default True) keeps the weights ``(B, n_heads, T, T_ctx)``, detached, on
    ``.last_weights`` for plotting. With ``keep_weights=False`` the module calls
    ``torch.nn.functional.scaled_dot_product_attention`` instead of the course's own function: the
    same numbers (tests check it), faster, and ``.last_weights`` is None.

    ``cache`` (a `KVCache`, self-attention only): the keys and values of x are appended to the
    cache and x's queries attend to every cached position; pass ``causal_mask(T, past=len(cache))``
    as the mask when x holds several new tokens.

    ``context_kv`` (cross-attention only): the context's keys and values, computed once by
    `context_keys_values` and reused. While a decoder writes a target one token at a time, the
    encoder's output does not change, so neither do its keys and values: projecting it again at
    every step would only repeat work.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True, dropout: float = 0.0, keep_weights: bool = True):
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
        self.keep_weights = keep_weights  # False: torch's fused kernel, no weights kept
        self.last_weights: torch.Tensor | None = None  # (B, n_heads, T, T_ctx) after a forward pass

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        t = t.view(B, T, self.n_heads, self.head_dim)  # (B, T, n_heads, head_dim)
        return t.transpose(1, 2)  # (B, n_heads, T, head_dim): heads behave like a batch axis

    def _check_input(self, name: str, t) -> None:
        if not isinstance(t, torch.Tensor) or t.ndim != 3 or t.shape[-1] != self.d_model:
            got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be shaped (B, T, d_model={self.d_model}), got {got}")

    def _mask_for_heads(self, mask: torch.Tensor | None, B: int, T: int, T_ctx: int) -> torch.Tensor | None:
        """Bring `mask` to a shape that broadcasts against the scores (B, n_heads, T, T_ctx) the right way."""
        if mask is None:
            return None
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor (boolean, True = may attend), got {type(mask).__name__}")
        accepted = (f"(T, T_ctx) = ({T}, {T_ctx}), (B, T_ctx) = ({B}, {T_ctx}), (B, 1, T_ctx), (B, T, T_ctx) = "
                    f"({B}, {T}, {T_ctx}), or 4-D broadcastable to (B, n_heads, T, T_ctx) = ({B}, {self.n_heads}, {T}, {T_ctx})")
        fits = lambda got, want: len(got) == len(want) and all(g in (1, w) for g, w in zip(got, want))  # noqa: E731
        shape = tuple(mask.shape)
        if mask.ndim >= 2 and shape[-1] == 1 < T_ctx and shape[-2] > 1:
            # (B, T, 1) or (B, 1, T, 1) would broadcast over the keys: whole query rows hidden, padded keys seen.
            raise ValueError(
                f"mask of shape {shape} is a mask on the queries (rows): its last axis, the keys, has size 1. "
                f"Key padding must hide keys (columns): expected (B, T_ctx) = ({B}, {T_ctx}), (B, 1, T_ctx) or "
                f"(B, 1, 1, T_ctx), e.g. (ids != pad_id)[:, None, :]"
            )
        if mask.ndim == 2 and fits(shape, (T, T_ctx)):
            return mask  # (T, T_ctx): broadcasts over batch and heads
        if mask.ndim == 2 and shape == (B, T_ctx):
            return mask[:, None, None, :]  # key padding (B, T_ctx) -> (B, 1, 1, T_ctx)
        if mask.ndim == 3 and fits(shape, (B, T, T_ctx)):
            return mask[:, None]  # (B, T, T_ctx) -> (B, 1, T, T_ctx): the same for every head
        if mask.ndim == 4 and fits(shape, (B, self.n_heads, T, T_ctx)):
            return mask
        raise ValueError(f"mask of shape {shape} does not fit this attention; expected {accepted}")

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        cache: KVCache | None = None,
        context_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check_input("x", x)
        if context is not None:
            if cache is not None:
                raise ValueError("a KV cache is for self-attention: pass either context or cache, not both "
                                 "(for cross-attention, reuse the context's keys and values with context_kv=)")
            self._check_input("context", context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    f"x and context must have the same batch size, got x {tuple(x.shape)} and context {tuple(context.shape)}"
                )
        if context_kv is not None:
            self._check_context_kv(context_kv, x, context)
        source = x if context is None else context  # self-attention: the sequence attends to itself
        B, T, C = x.shape

        if context is None and not self.keep_weights:
            q, k, v = self._fused_projections(x)  # the same numbers as below, in one matrix product
        else:
            q = self._split_heads(self.w_q(x))  # (B, T, C) -> (B, n_heads, T, head_dim)
            if context_kv is not None:
                k, v = context_kv  # (B, n_heads, T_ctx, head_dim) each, projected once for the whole decoding
            else:
                k, v = self.context_keys_values(source)  # (B, n_heads, T_ctx, head_dim) each
        if cache is not None:
            k, v = cache.append(k, v)  # (B, n_heads, T_cached + T, head_dim): past keys are reused, not recomputed
        mask = self._mask_for_heads(mask, B, T, k.shape[-2])

        if self.keep_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, n_heads, T, head_dim), (B, n_heads, T, T_ctx)
            if self.training and self.attn_dropout.p > 0:
                out = self.attn_dropout(weights) @ v  # (B, n_heads, T, head_dim), with some weights dropped
            self.last_weights = weights.detach()  # (B, n_heads, T, T_ctx)
        else:
            out = self._fused_attention(q, k, v, mask)  # (B, n_heads, T, head_dim)
            self.last_weights = None

        out = out.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, n_heads, head_dim) -> (B, T, C): heads side by side
        return self.w_o(out)  # (B, T, C)

    def context_keys_values(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of ``context`` ``(B, T_ctx, d_model)``: two ``(B, n_heads, T_ctx, head_dim)``.

        For cross-attention during decoding: compute them once per source and pass them to every step
        as ``forward(..., context_kv=...)`` (see `models.Seq2SeqTransformer.memory_keys_values`).
        """
        self._check_input("context", context)
        return self._split_heads(self.w_k(context)), self._split_heads(self.w_v(context))

    def _check_context_kv(self, context_kv, x: torch.Tensor, context: torch.Tensor | None) -> None:
        if context is None:
            raise ValueError("context_kv is for cross-attention: pass the context too (it sets the shapes)")
        want = (x.shape[0], self.n_heads, context.shape[1], self.head_dim)
        if (not isinstance(context_kv, (tuple, list)) or len(context_kv) != 2
                or any(not isinstance(t, torch.Tensor) or tuple(t.shape) != want for t in context_kv)):
            got = ([tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in context_kv]
                   if isinstance(context_kv, (tuple, list)) else type(context_kv).__name__)
            raise ValueError(f"context_kv must be the pair (k, v) from context_keys_values(context), each shaped "
                             f"(B, n_heads, T_ctx, head_dim) = {want}, got {got}")

    def _fused_projections(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of self-attention from one (C, 3C) product instead of three (C, C)
        ones: fewer, larger matrix products run faster (lesson 08 shows this fused QKV form)."""
        weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])  # (3C, C)
        bias = None if self.w_q.bias is None else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])  # (3C,)
        q, k, v = nn.functional.linear(x, weight, bias).split(self.d_model, dim=-1)  # 3 x (B, T, C)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)  # 3 x (B, n_heads, T, head_dim)

    def _fused_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """torch's fused attention, with the course's rule for queries that may attend to nothing."""
        empty_rows = None
        if mask is not None:
            mask = mask.to(q.device)
            blocked = ~mask if mask.dtype == torch.bool else torch.isneginf(mask)
            empty_rows = blocked.all(dim=-1, keepdim=True)  # (..., T, 1)
            # Let such a row attend everywhere (finite, no NaN in either pass), then zero its output.
            # No `if empty_rows.any()`: that would wait for the GPU on every call.
            mask = mask | empty_rows if mask.dtype == torch.bool else mask.masked_fill(empty_rows, 0.0)
        p = self.attn_dropout.p if self.training else 0.0
        out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, n_heads, T, head_dim)
        if empty_rows is not None:
            out = out.masked_fill(empty_rows, 0.0)
        return out

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, keep_weights={self.keep_weights}"
