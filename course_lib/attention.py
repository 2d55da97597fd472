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
from course_lib.positional import RopeScaling, rope_frequencies, rotary_angles

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "sliding_window_mask",
    "padding_mask",
    "KVCache",
    "MultiHeadAttention",
    "repeat_kv_heads",
    "tiled_attention",
    "quantize_int8",
    "dequantize_int8",
]


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


def sliding_window_mask(
    T: int, window: int, device: torch.device | str | None = None, *, past: int = 0
) -> torch.Tensor:
    """A banded causal mask ``(T, past + T)``: position i may attend to j when i - window < j <= i.

    Each token sees itself and the ``window - 1`` tokens before it, never more: the attention of
    Mistral's sliding window. With ``window >= past + T`` it is `causal_mask`. ``past`` counts cached
    positions before the T new ones, as in `causal_mask`.
    """
    check_int("T", T, what="the number of positions")
    check_int("window", window, what="the number of positions a token may see, itself included")
    check_int("past", past, minimum=0, what="the number of cached positions")
    i = torch.arange(past, past + T, device=device)[:, None]  # (T, 1): the queries' positions
    j = torch.arange(past + T, device=device)[None, :]  # (1, past + T): the keys' positions
    return (j <= i) & (j > i - window)  # (T, past + T): causal, and at most window - 1 back


def padding_mask(
    lengths: Sequence[int] | torch.Tensor, T: int, device: torch.device | str | None = None
) -> torch.Tensor:
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
    ``(B, n_kv_heads, T_cached, head_dim)``: with grouped-query attention only the key/value heads
    are stored, not the query heads' copies of them.

    ``max_len`` (optional) makes the cache *roll*: after each append only the last ``max_len``
    positions are kept, so its memory is bounded however long the generation runs (a model whose
    attention sees a window of W positions needs the last W - 1). ``seen`` counts every position
    ever appended: with rotary positions, the next token's position (the cache's length stops
    growing at max_len, the positions do not).

    ``sinks`` (rolling caches only; StreamingLLM, Xiao et al. 2023): the first ``sinks`` positions
    are never evicted; the cache keeps them and the last ``max_len - sinks``. A model trained with
    full attention leans on the first tokens of every sequence (they collect attention that has
    nowhere better to go) and degrades once they are evicted. With sinks, the keys are stored
    *before* rotation and rotated by their place in the cache (`MultiHeadAttention` does it), so
    no offset exceeds the window, as in the paper.
    """

    def __init__(self, max_len: int | None = None, sinks: int = 0) -> None:
        if max_len is not None:
            check_int("max_len", max_len, minimum=0, what="the number of positions a rolling cache keeps")
        check_int("sinks", sinks, minimum=0, what="the number of first positions a rolling cache never evicts")
        if sinks and (max_len is None or sinks >= max_len):
            raise ValueError(
                f"sinks are kept by a rolling cache beside its recent positions, so 0 < sinks < max_len; "
                f"got sinks={sinks} and max_len={max_len}"
            )
        self.max_len = max_len  # None: keep everything; else keep the last max_len positions
        self.sinks = sinks  # the first positions, kept for ever (0: none)
        self.k: torch.Tensor | None = None  # (B, n_kv_heads, T_cached, head_dim)
        self.v: torch.Tensor | None = None  # (B, n_kv_heads, T_cached, head_dim)
        self.seen = 0  # positions appended so far (the absolute position of the next one)

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' keys and values; return all of them (the cached ones first).

        A rolling cache returns every key the new positions may need, then keeps only its last
        ``max_len``."""
        if self.k is None:
            all_k, all_v = k, v
        else:
            if k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]:
                raise ValueError(
                    f"new keys {tuple(k.shape)} do not match the cached ones {tuple(self.k.shape)} "
                    "(B, n_kv_heads, T, head_dim): reset() the cache before a new batch"
                )
            all_k = torch.cat([self.k, k], dim=-2)  # (B, n_kv_heads, T_cached + T, head_dim)
            all_v = torch.cat([self.v, v], dim=-2)
        self.seen += k.shape[-2]
        drop = 0 if self.max_len is None else max(0, all_k.shape[-2] - self.max_len)  # the oldest positions
        if drop and self.sinks:  # keep the sinks, drop the oldest of the others
            keep = torch.cat([torch.arange(self.sinks), torch.arange(self.sinks + drop, all_k.shape[-2])])
            self.k, self.v = all_k[..., keep.to(all_k.device), :], all_v[..., keep.to(all_v.device), :]
        else:
            self.k, self.v = all_k[..., drop:, :], all_v[..., drop:, :]  # (B, n_kv_heads, <= max_len, head_dim)
        return all_k, all_v

    def nbytes(self) -> int:
        """The memory the cached keys and values take, in bytes."""
        return 0 if self.k is None else self.k.numel() * self.k.element_size() * 2

    def reset(self) -> None:
        self.k = self.v = None
        self.seen = 0

    def __repr__(self) -> str:
        roll = "" if self.max_len is None else f", max_len={self.max_len}"
        roll += f", sinks={self.sinks}" if self.sinks else ""
        return f"KVCache(cached={len(self)}{roll})"


def repeat_kv_heads(t: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, n_kv_heads, T, head_dim)`` -> ``(B, n_kv_heads * n_rep, T, head_dim)``: each key/value head
    repeated for the ``n_rep`` query heads of its group, next to each other.

    Query head h uses key/value head ``h // n_rep``: heads 0 … n_rep-1 share kv head 0, and so on
    (what ``F.scaled_dot_product_attention(..., enable_gqa=True)`` and Llama's ``repeat_kv`` do).
    ``t.repeat(1, n_rep, 1, 1)`` would tile the heads instead (0, 1, 0, 1, ...), pairing query
    heads with the wrong keys: the same shapes, a different model.
    """
    if n_rep == 1:
        return t
    return t.repeat_interleave(n_rep, dim=1)  # (B, n_kv_heads * n_rep, T, head_dim)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with batch-first inputs.

    Four ``nn.Linear(d_model, d_model)`` maps: ``w_q``, ``w_k``, ``w_v`` project the inputs to queries,
    keys and values for all heads at once; ``w_o`` mixes the concatenated head outputs. The
    projections are what make attention learnable: `scaled_dot_product_attention` itself has no
    parameters.

    ``n_kv_heads`` (default ``n_heads``; lesson 12): grouped-query attention. Only ``n_kv_heads``
    key/value heads are computed (``w_k`` and ``w_v`` map ``d_model -> n_kv_heads * head_dim``) and
    each serves a group of ``n_heads // n_kv_heads`` query heads: query head h uses key/value head
    ``h // (n_heads // n_kv_heads)`` (see `repeat_kv_heads`). ``n_kv_heads = 1`` is multi-query
    attention. A KV cache then stores ``n_kv_heads`` heads, not ``n_heads``.

    ``rope_base`` (default None; lesson 12): rotary positions (`positional.apply_rotary`) applied to
    the queries and keys of self-attention inside the module, after their projections and before the
    scores; the values are left alone. Positions count from 0, or from ``cache.seen`` with a cache,
    so a key is stored already rotated to its own position (with a cache that keeps attention sinks,
    keys are stored unrotated and turned by their place in the cache, see `KVCache`).
    ``rope_scaling`` (a `positional.RopeScaling`) stretches the rotary frequencies to run past the
    training length.

    ``qk_norm`` (default False; lesson 12): an RMSNorm with its own gain over each head's queries and
    keys (``q_norm``, ``k_norm``, width head_dim), before the rotation, as in Qwen3 and Gemma 3 (OLMo 2
    normalises the whole projection instead). The scores can no longer grow by the queries' and
    keys' lengths, which keeps training stable at high learning rates.

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

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        keep_weights: bool = True,
        n_kv_heads: int | None = None,
        rope_base: float | None = None,
        *,
        rope_scaling: RopeScaling | None = None,
        qk_norm: bool = False,
        norm_eps: float = 1e-5,
    ):
        super().__init__()
        if d_model < 1 or n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(
                f"d_model must be a positive multiple of n_heads (each head gets d_model // n_heads "
                f"features), got d_model={d_model} and n_heads={n_heads}"
            )
        n_kv_heads = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads)
        if n_heads % n_kv_heads != 0:
            raise ValueError(
                f"n_heads must be a multiple of n_kv_heads (each key/value head serves an equal group "
                f"of query heads), got n_heads={n_heads} and n_kv_heads={n_kv_heads}"
            )
        if rope_base is not None and (d_model // n_heads) % 2:
            raise ValueError(
                f"rotary positions turn pairs of features, so head_dim = d_model // n_heads must be even, "
                f"got {d_model} // {n_heads} = {d_model // n_heads}"
            )
        self.d_model = d_model  # width of the residual stream, C
        self.n_heads = n_heads  # number of query heads
        self.n_kv_heads = n_kv_heads  # number of key/value heads (n_heads: plain multi-head attention)
        self.head_dim = d_model // n_heads  # width of one head's queries, keys and values
        self.rope_base = rope_base  # None: no rotary positions; else RoPE's base (10000 in most models)
        if rope_scaling is not None and rope_base is None:
            raise ValueError("rope_scaling stretches rotary positions: give rope_base too")
        if rope_scaling is not None and not isinstance(rope_scaling, RopeScaling):
            raise TypeError(f"rope_scaling must be a positional.RopeScaling or None, got {type(rope_scaling).__name__}")
        self.rope_scaling = rope_scaling  # None: RoPE's own frequencies
        if not isinstance(qk_norm, bool):
            raise TypeError(f"qk_norm must be True or False, got {qk_norm!r}")
        # QK-norm: one RMSNorm gain of head_dim shared by the heads (torch's built-in module, as in Qwen3).
        self.q_norm = nn.RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        kv_dim = n_kv_heads * self.head_dim  # width of all key (or value) heads together
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, kv_dim, bias=bias)
        self.w_v = nn.Linear(d_model, kv_dim, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)  # on the attention weights, active only in training
        self.keep_weights = keep_weights  # False: torch's fused kernel, no weights kept
        self.last_weights: torch.Tensor | None = None  # (B, n_heads, T, T_ctx) after a forward pass

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, width = t.shape
        t = t.view(B, T, width // self.head_dim, self.head_dim)  # (B, T, heads, head_dim)
        return t.transpose(1, 2)  # (B, heads, T, head_dim): heads behave like a batch axis

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
        accepted = (
            f"(T, T_ctx) = ({T}, {T_ctx}), (B, T_ctx) = ({B}, {T_ctx}), (B, 1, T_ctx), (B, T, T_ctx) = "
            f"({B}, {T}, {T_ctx}), or 4-D broadcastable to (B, n_heads, T, T_ctx) = ({B}, {self.n_heads}, {T}, {T_ctx})"
        )
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
                raise ValueError(
                    "a KV cache is for self-attention: pass either context or cache, not both "
                    "(for cross-attention, reuse the context's keys and values with context_kv=)"
                )
            self._check_input("context", context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    (
                        "x and context must have the same batch size, got x "
                        f"{tuple(x.shape)} and context {tuple(context.shape)}"
                    )
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
        if self.q_norm is not None:  # QK-norm: every head's queries and keys to a root mean square of 1, times a gain
            q, k = self.q_norm(q), self.k_norm(k)  # (B, heads, T, head_dim)
        if self.rope_base is not None and context is None and cache is not None and cache.sinks:
            # Attention sinks: keys are cached unrotated and turned by their place in the cache, so the
            # sinks sit just before the recent keys and no offset exceeds the window (StreamingLLM).
            k, v = cache.append(k, v)  # (B, n_kv_heads, T_cached + T, head_dim)
            q, k = self._rotate(q, k.shape[-2] - T), self._rotate(k, 0)
        elif self.rope_base is not None and context is None:  # rotary: turn q and k by their positions
            start = 0 if cache is None else cache.seen
            q, k = self._rotate(q, start), self._rotate(k, start)  # = apply_rotary(q, positions start..start+T-1)
        if cache is not None and not cache.sinks:
            k, v = cache.append(k, v)  # (B, n_kv_heads, T_cached + T, head_dim): past keys are reused, not recomputed
        elif cache is not None and self.rope_base is None:
            raise ValueError("a cache with attention sinks repositions rotary keys: it needs rope_base")
        group = self.n_heads // self.n_kv_heads
        k, v = repeat_kv_heads(k, group), repeat_kv_heads(v, group)  # (B, n_heads, T_ctx, head_dim)
        mask = self._mask_for_heads(mask, B, T, k.shape[-2])

        if self.keep_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask
            )  # (B, n_heads, T, head_dim), (B, n_heads, T, T_ctx)
            if self.training and self.attn_dropout.p > 0:
                out = self.attn_dropout(weights) @ v  # (B, n_heads, T, head_dim), with some weights dropped
            self.last_weights = weights.detach()  # (B, n_heads, T, T_ctx)
        else:
            out = self._fused_attention(q, k, v, mask)  # (B, n_heads, T, head_dim)
            self.last_weights = None

        out = (
            out.transpose(1, 2).contiguous().view(B, T, C)
        )  # (B, T, n_heads, head_dim) -> (B, T, C): heads side by side
        return self.w_o(out)  # (B, T, C)

    def context_keys_values(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of ``context`` ``(B, T_ctx, d_model)``: two ``(B, n_kv_heads, T_ctx, head_dim)``.

        For cross-attention during decoding: compute them once per source and pass them to every step
        as ``forward(..., context_kv=...)`` (see `models.Seq2SeqTransformer.memory_keys_values`).
        """
        self._check_input("context", context)
        return self._split_heads(self.w_k(context)), self._split_heads(self.w_v(context))

    def _check_context_kv(self, context_kv, x: torch.Tensor, context: torch.Tensor | None) -> None:
        if context is None:
            raise ValueError("context_kv is for cross-attention: pass the context too (it sets the shapes)")
        want = (x.shape[0], self.n_kv_heads, context.shape[1], self.head_dim)
        if (
            not isinstance(context_kv, (tuple, list))
            or len(context_kv) != 2
            or any(not isinstance(t, torch.Tensor) or tuple(t.shape) != want for t in context_kv)
        ):
            got = (
                [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in context_kv]
                if isinstance(context_kv, (tuple, list))
                else type(context_kv).__name__
            )
            raise ValueError(
                f"context_kv must be the pair (k, v) from context_keys_values(context), each shaped "
                f"(B, n_kv_heads, T_ctx, head_dim) = {want}, got {got}"
            )

    def _rotate(self, t: torch.Tensor, start: int) -> torch.Tensor:
        """`positional.apply_rotary` of t ``(B, heads, T, head_dim)`` at positions start, start + 1, ...,
        with its cos/sin table computed once (float64, as apply_rotary) and kept, not at every call.
        With ``rope_scaling`` the frequencies are stretched, and YaRN's attention factor multiplies
        the table (so q and k are each scaled by it)."""
        end = start + t.shape[-2]
        table = getattr(self, "_rope_table", None)
        key = (self.rope_base, self.rope_scaling)  # a changed base or scaling rebuilds the table
        if (
            table is None
            or table[0].shape[0] < end
            or table[0].device != t.device
            or table[0].dtype != t.dtype
            or table[2] != key
        ):
            size = max(64, 1 << (end - 1).bit_length())  # room to grow: a power of two >= end
            positions = torch.arange(size, device=t.device)
            angles = rotary_angles(positions, self.head_dim, self.rope_base, self.rope_scaling)  # (size, hd/2)
            factor = rope_frequencies(self.head_dim, self.rope_base, self.rope_scaling)[1]
            table = ((factor * torch.cos(angles)).to(t.dtype), (factor * torch.sin(angles)).to(t.dtype), key)
            self._rope_table = table  # a cache, not state: rebuilt whenever it is too short or elsewhere
        cos, sin = table[0][start:end], table[1][start:end]  # (T, head_dim/2)
        t0, t1 = t[..., 0::2], t[..., 1::2]  # (B, heads, T, head_dim/2): the pairs (2i, 2i+1)
        return torch.stack([t0 * cos - t1 * sin, t0 * sin + t1 * cos], dim=-1).flatten(-2)  # (B, heads, T, head_dim)

    def _fused_projections(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of self-attention from one (C, 3C) product instead of three (C, C)
        ones: fewer, larger matrix products run faster (lesson 08 shows this fused QKV form)."""
        weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])  # (3C, C)
        bias = None if self.w_q.bias is None else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])  # (3C,)
        kv_dim = self.n_kv_heads * self.head_dim
        q, k, v = nn.functional.linear(x, weight, bias).split([self.d_model, kv_dim, kv_dim], dim=-1)  # (B, T, C), ...
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)  # (B, heads, T, head_dim) each

    def _fused_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
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
        out = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p
        )  # (B, n_heads, T, head_dim)
        if empty_rows is not None:
            out = out.masked_fill(empty_rows, 0.0)
        return out

    def extra_repr(self) -> str:
        extra = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        extra += f", rope_base={self.rope_base}" if self.rope_base is not None else ""
        extra += f", rope_scaling={self.rope_scaling}" if self.rope_scaling is not None else ""
        extra += ", qk_norm=True" if self.q_norm is not None else ""
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, "
            f"keep_weights={self.keep_weights}{extra}"
        )


# ================================================================================================
# Attention without the T×T matrix (lesson 12)
# ================================================================================================
#
# softmax(s)·v for one query row needs the maximum of all its scores (to subtract) and their sum
# (to divide by) before any weight is known. The online softmax keeps, per query row, a running
# maximum m, a running sum l of exp(s - m) and a running weighted sum acc of the values. When a new
# block of keys arrives with a larger maximum m_new, everything so far was computed against m_old:
# multiplying l and acc by exp(m_old - m_new) puts them on the new scale. After the last block,
# acc / l is exactly softmax(s)·v: nothing is approximated, and no (T_q, T_k) matrix ever exists,
# only (query block, key block) tiles.
#
# FlashAttention is this double loop written as one GPU kernel: the outer loop over blocks of
# queries, the inner one over blocks of keys. Tiling the queries is what lets a causal mask save
# work: a key block that starts after a query block's last position is in the future of every
# query in it, so it is never computed (about half the tiles at long T). And, as FlashAttention
# does, m, l and acc stay in float32 when the inputs are float16 or bfloat16: a running sum
# rounded to 8 bits of mantissa at every block would lose the accuracy the exact algorithm promises.


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision inputs (FlashAttention's rule), else the inputs' own dtype."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    block_size: int = 128,
    *,
    query_block_size: int | None = None,
) -> torch.Tensor:
    """softmax(q kᵀ / √d_k) v computed tile by tile with an online softmax.

    q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``, as in
    `scaled_dot_product_attention`, whose output ``(..., T_q, d_v)`` it returns (and not the
    weights: never holding them is the point). The queries are taken ``query_block_size`` at a time
    (default ``block_size``), the keys ``block_size`` at a time. ``mask``: boolean (True = may
    attend) or additive float, broadcastable to ``(..., T_q, T_k)``.

    ``causal=True`` aligns the mask **bottom-right**: the queries are the LAST T_q of the T_k
    positions, as when T_q new tokens follow T_k - T_q cached ones, so query i may attend to key j
    when j <= i + T_k - T_q (with T_q = T_k, the usual causal mask). PyTorch's
    ``F.scaled_dot_product_attention(..., is_causal=True)`` aligns it top-left instead (j <= i), which
    differs whenever T_q != T_k. Key blocks wholly in the future of a query block are skipped, not
    computed and masked. A query with no key allowed gets an output of zero, as in the rest of the
    module.

    Precision: with float16 or bfloat16 inputs, the scores, the running maximum and sum and the
    accumulator are float32 (as in FlashAttention); the result is cast back to the inputs' dtype.

    Memory: the largest intermediate is one ``(..., query block, key block)`` tile, never
    ``(..., T_q, T_k)``. That holds for the forward pass; autograd still saves every tile's weights
    for the backward pass (FlashAttention writes its own backward, which recomputes them instead).
    """
    _check_tensor("q", q, "(..., T_q, d_k)")
    _check_tensor("k", k, "(..., T_k, d_k)")
    _check_tensor("v", v, "(..., T_k, d_v)")
    check_int("block_size", block_size, what="the number of keys per block")
    q_block = block_size if query_block_size is None else query_block_size
    check_int("query_block_size", q_block, what="the number of queries per block")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    T_q, T_k = q.shape[-2], k.shape[-2]
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"expected q (..., T_q, d_k), k (..., T_k, d_k) and v (..., T_k, d_v), got q "
            f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if causal and T_q > T_k:
        raise ValueError(
            f"causal=True takes the queries to be the last T_q of the T_k positions (bottom-right "
            f"alignment), so T_q <= T_k; got T_q={T_q} and T_k={T_k}"
        )
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.ndim < 2:
            got = f"shape {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(f"mask must be a tensor broadcastable to (..., T_q, T_k) = (..., {T_q}, {T_k}), got {got}")
        if mask.shape[-1] not in (1, T_k) or mask.shape[-2] not in (1, T_q):
            raise ValueError(
                f"mask's last two axes must be the T_q={T_q} queries and the T_k={T_k} keys (or 1), "
                f"got mask shape {tuple(mask.shape)}"
            )
    acc_dtype = _accumulation_dtype(q.dtype)
    scale = 1.0 / math.sqrt(q.shape[-1])
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    offset = T_k - T_q  # bottom-right alignment: query i sits at position i + offset
    outputs = []
    for q_start in range(0, T_q, q_block):
        q_end = min(q_start + q_block, T_q)
        q_blk = q[..., q_start:q_end, :].to(acc_dtype)  # (..., Bq, d_k)
        rows = torch.arange(q_start, q_end, device=q.device)[:, None] + offset  # (Bq, 1): the queries' positions
        m = q_blk.new_full((*lead, q_end - q_start, 1), float("-inf"))  # running maximum of each query's scores
        l = q_blk.new_zeros((*lead, q_end - q_start, 1))  # running sum of exp(score - m)  # noqa: E741
        acc = q_blk.new_zeros((*lead, q_end - q_start, v.shape[-1]))  # running sum of exp(score - m) · v
        for start in range(0, T_k, block_size):
            if causal and start > q_end - 1 + offset:
                break  # this key block and every later one lie in the future of the whole query block
            end = min(start + block_size, T_k)
            k_blk, v_blk = k[..., start:end, :].to(acc_dtype), v[..., start:end, :].to(acc_dtype)  # (..., Bk, d)
            s = (q_blk @ k_blk.transpose(-2, -1)) * scale  # (..., Bq, Bk): one tile of scores
            if mask is not None:
                tile = mask[..., q_start:q_end, :] if mask.shape[-2] == T_q else mask
                tile = tile[..., start:end] if mask.shape[-1] == T_k else tile
                s = s.masked_fill(~tile, float("-inf")) if tile.dtype == torch.bool else s + tile.to(acc_dtype)
            if causal and end - 1 > q_start + offset:  # only tiles that cross the diagonal need the mask
                cols = torch.arange(start, end, device=q.device)[None, :]  # (1, Bk): the keys' positions
                s = s.masked_fill(cols > rows, float("-inf"))  # (..., Bq, Bk)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., Bq, 1)
            m_safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)  # a row with nothing allowed yet: no inf - inf
            p = torch.exp(s - m_safe)  # (..., Bq, Bk), 0 where masked
            rescale = torch.exp(m - m_safe)  # (..., Bq, 1): exp(m_old - m_new), puts the old sums on the new scale
            l = l * rescale + p.sum(dim=-1, keepdim=True)  # noqa: E741
            acc = acc * rescale + p @ v_blk  # (..., Bq, d_v)
            m = m_new
        empty = l == 0  # (..., Bq, 1): queries that could attend to nothing
        outputs.append(torch.where(empty, 0.0, acc / l.masked_fill(empty, 1.0)))  # (..., Bq, d_v)
    return torch.cat(outputs, dim=-2).to(q.dtype)  # (..., T_q, d_v)


# ================================================================================================
# A KV cache in 8 bits (lesson 12)
# ================================================================================================
#
# A cached key or value is read at every later step, so its size, not the arithmetic, limits long
# contexts and large batches. Stored as int8 with one float scale per group (symmetric: the
# largest |x| of a group maps to 127), it takes a quarter of float32's bytes and half of bf16's.
# Which groups matters: keys have a few channels with large values in every token (outlier
# channels), so they get one scale per channel, shared by the tokens; values have no such
# channels and get one scale per token, shared by its channels (KIVI, Liu et al. 2024).


def quantize_int8(t: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantisation of ``t`` with one scale per slice along ``dim``: the entries that
    share a scale are those along ``dim``. Returns ``(q, scale)``: q int8 shaped like t, and scale
    (float32, size 1 along ``dim``) such that ``q * scale`` approximates t, with |error| <= scale / 2.

    Keys ``(B, heads, T, head_dim)``: ``dim=-2``, one scale per channel (shared by the tokens);
    values: ``dim=-1``, one scale per token (shared by the channels)."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"quantize_int8 expects a floating-point tensor, got {type(t).__name__}")
    scale = t.detach().abs().amax(dim=dim, keepdim=True).float() / 127.0  # (..., 1 along dim, ...)
    scale = scale.masked_fill(scale == 0, 1.0)  # an all-zero slice: any scale gives zeros
    q = torch.round(t.float() / scale).clamp(-127, 127).to(torch.int8)  # same shape as t
    return q, scale


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The floats that `quantize_int8` stored: ``q * scale`` in ``dtype``."""
    return (q.float() * scale).to(dtype)
