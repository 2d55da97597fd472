"""The pieces of a transformer block: LayerNorm, RMSNorm, the feed-forward network, the block.

Shapes use the vocabulary of `course_lib.attention`: ``B`` batch, ``T`` positions, ``C`` =
``d_model`` features per position (the width of the residual stream), ``d_ff`` hidden width of
the feed-forward network.

- `LayerNorm(d)` normalises each position's ``d`` features on their own: subtract their mean,
  divide by √(variance + eps) with the *biased* variance (mean squared deviation, 1/d), then apply
  a learned gain and bias. It matches `torch.nn.LayerNorm(d)` forward and backward.
- `RMSNorm(d)` skips the centring and the bias: divide by √(mean of squares + eps), apply a gain.
  It matches `torch.nn.RMSNorm(d, eps=eps)`.
- `FeedForward(d_model)` is the position-wise network d_model -> d_ff -> d_model with ReLU or GELU
  in between, applied to every position separately with the same weights.
- `SwiGLU(d_model, d_ff)` (lesson 12) is the gated feed-forward network of Llama-style models:
  w2(silu(w1(x)) * w3(x)), three bias-free maps.
- `EncoderBlock` wires self-attention and the feed-forward network with residual connections,
  pre-norm (``x + f(norm(x))``) or post-norm (``norm(x + f(x))``); it is also GPT's block (with a
  causal mask). `DecoderBlock` adds cross-attention into an encoder's output between the two. With
  the same weights they compute exactly what `torch.nn.TransformerEncoderLayer` and
  `torch.nn.TransformerDecoderLayer` compute with ``batch_first=True``; `copy_torch_weights` copies
  such a layer's weights into a block.
- `ModernBlock` (lesson 12) is the block of Llama, Mistral and Qwen: pre-norm RMSNorm, rotary,
  grouped-query self-attention without biases, a SwiGLU feed-forward network.

Masks follow the course's convention: boolean, **True = may attend** (torch's transformer layers
use the opposite, True = blocked).

Importing this module runs nothing.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib._validate import check_int
from course_lib.attention import MultiHeadAttention
from course_lib.positional import rotate_half_permutation

__all__ = [
    "LayerNorm",
    "RMSNorm",
    "FeedForward",
    "SwiGLU",
    "EncoderBlock",
    "DecoderBlock",
    "ModernBlock",
    "swiglu_hidden",
    "copy_torch_weights",
    "copy_llama_weights",
]


def _check_last_dim(name: str, x, d: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor whose last dimension is {d}, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != d:
        raise ValueError(
            f"{name} normalises the last dimension, which must have size {d}; got a tensor of shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} expects a floating-point tensor, got dtype {x.dtype}")


class LayerNorm(nn.Module):
    """Layer normalisation over the last dimension (each position's ``d`` features).

    y = (x − μ) / √(σ² + eps) · weight + bias, where μ is the mean of the ``d`` features and σ² their
    mean squared deviation from μ (divided by d, not d − 1). eps sits inside the square root: it keeps
    the division finite for a constant vector (σ² = 0) and is what `torch.nn.LayerNorm` does.
    ``bias=False`` drops the learned bias, but the mean is still subtracted.

    ``fused=True`` computes the same numbers with torch's one-kernel ``F.layer_norm`` (faster, and what
    lesson 11's GPT uses; tests check the two agree, forward and backward).
    """

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True, fused: bool = False):
        super().__init__()
        self.d = check_int("d", d, what="the number of features to normalise")  # features normalised together
        self.eps = eps  # added to the variance inside the square root
        self.weight = nn.Parameter(torch.ones(d))  # (d,) gain, starts at 1
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None  # (d,) shift, starts at 0
        self.fused = fused  # True: torch's F.layer_norm, the same function in one kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim("LayerNorm", x, self.d)
        if self.fused:
            return F.layer_norm(x, (self.d,), self.weight, self.bias, self.eps)  # (..., d)
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased: divided by d
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # (..., d): zero mean, variance ≈ 1
        y = x_hat * self.weight  # (..., d)
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension.

    y = x / √(mean(x²) + eps) · weight. No mean is subtracted and there is no bias: the vector keeps
    its direction, only its size is fixed. Cheaper than LayerNorm and what LLaMA-style models use.
    ``fused=True`` computes the same numbers with torch's ``F.rms_norm`` (lesson 12's model uses it).
    """

    def __init__(self, d: int, eps: float = 1e-6, fused: bool = False):
        super().__init__()
        self.d = check_int("d", d, what="the number of features to normalise")  # features normalised together
        self.eps = eps  # added to the mean square inside the square root
        self.weight = nn.Parameter(torch.ones(d))  # (d,) gain, starts at 1
        self.fused = fused  # True: torch's F.rms_norm, the same function in fewer kernels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim("RMSNorm", x, self.d)
        if self.fused:
            return F.rms_norm(x, (self.d,), self.weight, self.eps)  # (..., d)
        rms = torch.sqrt((x**2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return x / rms * self.weight  # (..., d)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}"


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}  # GELU here is the exact (erf) one, as in torch


class FeedForward(nn.Module):
    """The position-wise feed-forward network: linear2(dropout(activation(linear1(x)))).

    Every position goes through the same two linear maps, d_model -> d_ff -> d_model, on its own:
    positions do not mix here (attention does that). The element-wise activation in the middle is
    the non-linearity that attention's value path lacks. d_ff defaults to 4 · d_model, as in the
    original transformer (512 -> 2048 -> 512). The two maps are named ``linear1`` and ``linear2``, as
    in torch's transformer layers.
    """

    def __init__(
        self, d_model: int, d_ff: int | None = None, dropout: float = 0.0, activation: str = "relu", bias: bool = True
    ):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.d_model = d_model  # input and output width
        self.d_ff = d_ff  # hidden width
        self.activation = activation  # name of the element-wise non-linearity
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)  # on the hidden activations, as in torch's layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim("FeedForward", x, self.d_model)
        h = _ACTIVATIONS[self.activation](self.linear1(x))  # (..., d_model) -> (..., d_ff)
        return self.linear2(self.dropout(h))  # (..., d_ff) -> (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"


class SwiGLU(nn.Module):
    """The gated feed-forward network of Llama-style models: ``w2(silu(w1(x)) * w3(x))``.

    Two maps d_model -> d_ff run side by side: ``w1`` (the gate) goes through SiLU, silu(z) = z·σ(z),
    and multiplies ``w3`` (the "up" projection) feature by feature, so each hidden feature is a
    value that another linear function of x switches on or off; ``w2`` (down) maps back, d_ff ->
    d_model. Three matrices instead of two: ``d_ff ≈ 8/3 · d_model`` gives the 8·d_model² weights of
    a 4·d_model GELU network (3 · d · 8d/3 = 8d²). No biases, as in Llama. Names as in Llama's
    checkpoints (Hugging Face calls them gate_proj, up_proj and down_proj).
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.d_model = check_int("d_model", d_model, what="the input and output width")  # input and output width
        self.d_ff = check_int("d_ff", d_ff, what="the hidden width")  # hidden width
        self.w1 = nn.Linear(d_model, d_ff, bias=False)  # gate
        self.w3 = nn.Linear(d_model, d_ff, bias=False)  # up
        self.w2 = nn.Linear(d_ff, d_model, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim("SwiGLU", x, self.d_model)
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_model) -> (..., d_ff) -> (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}"


class _Block(nn.Module):
    """What an encoder's and a decoder's block share: their settings, and their parts built in
    torch's order and under torch's names. Self-attention ``self_attn``, the decoder's
    cross-attention ``cross_attn``, the feed-forward network ``ff``, then one LayerNorm and one
    dropout per sub-layer (``norm1``, ``norm2``, ...; ``dropout1``, ``dropout2``, ...).
    `EncoderBlock` and `DecoderBlock` wire them in their ``forward``."""

    cross_attention = False  # True for a decoder's block: a third sub-layer, attention to the memory

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        *,
        norm_first: bool = True,
        activation: str = "relu",
        bias: bool = True,
        norm_eps: float = 1e-5,
        keep_weights: bool = True,
        fused_norm: bool = False,
    ):
        super().__init__()
        self.d_model = d_model  # width of the residual stream, C
        self.norm_first = norm_first  # True: pre-norm, False: post-norm (Add & Norm)
        attention = dict(bias=bias, dropout=dropout, keep_weights=keep_weights)
        self.self_attn = MultiHeadAttention(d_model, n_heads, **attention)
        if self.cross_attention:  # queries from the block's input, keys and values from the memory
            self.cross_attn = MultiHeadAttention(d_model, n_heads, **attention)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation, bias=bias)
        n_sublayers = 3 if self.cross_attention else 2
        for i in range(1, n_sublayers + 1):  # norm1, norm2 (, norm3): one per sub-layer, in the order they run
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=norm_eps, bias=bias, fused=fused_norm))
        for i in range(1, n_sublayers + 1):  # dropout1, dropout2 (, dropout3): on each sub-layer's output
            setattr(self, f"dropout{i}", nn.Dropout(dropout))

    def _sa_block(self, x: torch.Tensor, mask: torch.Tensor | None, cache) -> torch.Tensor:
        return self.dropout1(self.self_attn(x, mask=mask, cache=cache))  # (B, T, C)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class EncoderBlock(_Block):
    """One encoder layer: self-attention, then the feed-forward network (`nn.TransformerEncoderLayer`).

    ``EncoderBlock(d_model, n_heads, d_ff=None, dropout=0.0, *, norm_first=True, activation="relu",
    bias=True, norm_eps=1e-5, keep_weights=True, fused_norm=False)``.

    It is also the block of a decoder-only model such as GPT: the same two sub-layers, with a causal
    mask (and a KV cache when generating). Each sub-layer is wrapped in a residual connection and a
    LayerNorm, in one of two ways:

    - pre-norm (``norm_first=True``, GPT-2 and most modern models): ``x = x + dropout(f(norm(x)))``;
    - post-norm (``norm_first=False``, the 2017 paper's "Add & Norm"): ``x = norm(x + dropout(f(x)))``.

    Submodules: ``self_attn`` with ``norm1`` and ``dropout1``; ``ff`` (whose ``linear1`` and
    ``linear2`` are torch's) with ``norm2`` and ``dropout2``: torch's names, so `copy_torch_weights`
    maps weights one to one. ``dropout`` is used on each sub-layer's output (before the residual add),
    on the attention weights and inside the feed-forward network, as torch does; it is active only in
    training mode. ``d_ff`` (torch's ``dim_feedforward``) defaults to 4 · d_model.

    Fast paths, chosen once when the block is built: ``keep_weights=False`` runs torch's fused
    attention kernel (the same numbers, no weights kept on ``self_attn.last_weights``) and
    ``fused_norm=True`` torch's one-kernel ``F.layer_norm``; lesson 11's GPT uses both.

    ``forward(x, mask=None, *, cache=None)``: x ``(B, T, d_model)``; ``mask`` (True = may attend) for
    the self-attention, e.g. ``causal_mask(T)`` or a key-padding mask; ``cache``, an
    ``attention.KVCache`` for the self-attention (generation). Returns ``(B, T, d_model)``.
    """

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, cache=None) -> torch.Tensor:
        _check_stream("x", x, self.d_model)
        if self.norm_first:  # pre-norm: x + f(norm(x)), the residual stream itself is never normalised
            x = x + self._sa_block(self.norm1(x), mask, cache)  # (B, T, C)
            x = x + self._ff_block(self.norm2(x))  # (B, T, C)
        else:  # post-norm ("Add & Norm"): norm(x + f(x)), every residual sum is normalised
            x = self.norm1(x + self._sa_block(x, mask, cache))  # (B, T, C)
            x = self.norm2(x + self._ff_block(x))  # (B, T, C)
        return x

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout2(self.ff(x))  # (B, T, C)


class DecoderBlock(_Block):
    """One decoder layer of an encoder-decoder: causal self-attention, cross-attention into the
    encoder's output (the "memory"), then the feed-forward network (`nn.TransformerDecoderLayer`).

    Built with `EncoderBlock`'s arguments. The wiring is `EncoderBlock`'s (pre- or post-norm, dropout
    on each sub-layer's output) with one more sub-layer in the middle: the target's positions ask
    (queries) and the memory's positions answer (keys and values). Submodules, as torch names them:
    ``self_attn`` with ``norm1`` / ``dropout1``; ``cross_attn`` (torch's ``multihead_attn``) with
    ``norm2`` / ``dropout2``; ``ff`` with ``norm3`` / ``dropout3``. The fast paths ``keep_weights``
    and ``fused_norm`` are `EncoderBlock`'s.

    ``forward(x, memory, mask=None, memory_mask=None, *, cache=None, memory_kv=None)``: x
    ``(B, T, d_model)`` the target so far; memory ``(B, S, d_model)``; ``mask`` (True = may attend)
    for the self-attention, e.g. ``causal_mask(T)``; ``memory_mask`` for the cross-attention, e.g. the
    source's key padding ``(B, 1, 1, S)``; ``cache``, an ``attention.KVCache`` for the self-attention;
    ``memory_kv``, the memory's keys and values computed once by
    ``cross_attn.context_keys_values(memory)`` (the memory stays the same at every decoding step).
    Returns ``(B, T, d_model)``.
    """

    cross_attention = True  # self-attention, cross-attention, the feed-forward network

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        *,
        cache=None,
        memory_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        _check_stream("x", x, self.d_model)
        if self.norm_first:  # pre-norm: x + f(norm(x))
            x = x + self._sa_block(self.norm1(x), mask, cache)  # (B, T, C)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_kv)  # (B, T, C)
            x = x + self._ff_block(self.norm3(x))  # (B, T, C)
        else:  # post-norm ("Add & Norm"): norm(x + f(x))
            x = self.norm1(x + self._sa_block(x, mask, cache))  # (B, T, C)
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_kv))  # (B, T, C)
            x = self.norm3(x + self._ff_block(x))  # (B, T, C)
        return x

    def _mha_block(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None, memory_kv
    ) -> torch.Tensor:
        # the target asks, the memory answers: (B, T, C) queries against (B, S, C) keys and values
        return self.dropout2(self.cross_attn(x, memory, memory_mask, context_kv=memory_kv))  # (B, T, C)

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout3(self.ff(x))  # (B, T, C)


class ModernBlock(nn.Module):
    """The block of Llama 2 and 3 and Mistral (Hugging Face's ``LlamaDecoderLayer``), lesson 12.

    ``ModernBlock(d_model, n_heads, n_kv_heads=None, d_ff=None, *, rope_base=10000.0, norm_eps=1e-5,
    rope_scaling=None, qk_norm=False)``. Pre-norm like GPT's block, with four changes: RMSNorm instead
    of LayerNorm, a `SwiGLU` feed-forward network (``d_ff`` defaults to 8/3 · d_model rounded up to a
    multiple of 8), rotary positions applied to q and k inside the attention (no position table
    anywhere), and no biases (Qwen 2 keeps biases on q, k and v; Qwen3 drops them and adds QK-norm,
    ``qk_norm=True`` here); the attention may share key/value heads (``n_kv_heads``). Always torch's
    fused attention kernel. Submodules named as in the course's other blocks: ``norm1``,
    ``self_attn``, ``norm2``, ``ff``.

    ``forward(x, mask=None, *, cache=None)``: x ``(B, T, d_model)``; mask (True = may attend), e.g.
    ``causal_mask(T)`` or ``sliding_window_mask(T, W)``; cache an ``attention.KVCache``. Returns
    ``(B, T, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        d_ff: int | None = None,
        *,
        rope_base: float = 10000.0,
        norm_eps: float = 1e-5,
        rope_scaling=None,
        qk_norm: bool = False,
    ):
        super().__init__()
        self.d_model = d_model  # width of the residual stream, C
        d_ff = swiglu_hidden(d_model) if d_ff is None else d_ff
        self.norm1 = RMSNorm(d_model, eps=norm_eps, fused=True)
        self.self_attn = MultiHeadAttention(
            d_model,
            n_heads,
            bias=False,
            keep_weights=False,
            n_kv_heads=n_kv_heads,
            rope_base=rope_base,
            rope_scaling=rope_scaling,
            qk_norm=qk_norm,
            norm_eps=norm_eps,
        )
        self.norm2 = RMSNorm(d_model, eps=norm_eps, fused=True)
        self.ff = SwiGLU(d_model, d_ff)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, cache=None) -> torch.Tensor:
        _check_stream("x", x, self.d_model)
        x = x + self.self_attn(self.norm1(x), mask=mask, cache=cache)  # (B, T, C)
        return x + self.ff(self.norm2(x))  # (B, T, C)


def swiglu_hidden(d_model: int, multiple_of: int = 8) -> int:
    """The SwiGLU hidden width with the weights of a 4·d_model MLP: 8/3 · d_model rounded up to a
    multiple of ``multiple_of`` (Llama 2 rounds to 256: 11,008 at d_model = 4,096; 8 suits the
    course's sizes). Llama 3 8B and Mistral 7B chose a wider 14,336 = 3.5 · d_model instead."""
    d = int(8 * d_model / 3)
    return multiple_of * ((d + multiple_of - 1) // multiple_of)


def _check_stream(name: str, x, d_model: int) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != d_model:
        got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be shaped (B, T, d_model={d_model}), got {got}")


def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    d = ours.d_model
    w = theirs.in_proj_weight  # (3C, C): query, key and value projections stacked row-wise
    ours.w_q.weight.copy_(w[:d])
    ours.w_k.weight.copy_(w[d : 2 * d])
    ours.w_v.weight.copy_(w[2 * d :])
    ours.w_o.weight.copy_(theirs.out_proj.weight)
    if theirs.in_proj_bias is not None:
        b = theirs.in_proj_bias  # (3C,)
        ours.w_q.bias.copy_(b[:d])
        ours.w_k.bias.copy_(b[d : 2 * d])
        ours.w_v.bias.copy_(b[2 * d :])
        ours.w_o.bias.copy_(theirs.out_proj.bias)


@torch.no_grad()
def copy_torch_weights(block: EncoderBlock | DecoderBlock, layer: nn.Module) -> EncoderBlock | DecoderBlock:
    """Copy the weights of a `nn.TransformerEncoderLayer` into an `EncoderBlock`, or of a
    `nn.TransformerDecoderLayer` into a `DecoderBlock`.

    The block must have the same shape (d_model, d_ff, bias). Returns the block. Norm-first,
    activation and eps are not weights: build the block with the layer's settings.
    """
    kinds = {nn.TransformerEncoderLayer: EncoderBlock, nn.TransformerDecoderLayer: DecoderBlock}
    if type(layer) not in kinds:
        raise TypeError(
            f"expected nn.TransformerEncoderLayer or nn.TransformerDecoderLayer, got {type(layer).__name__}"
        )
    if not isinstance(block, kinds[type(layer)]):
        raise TypeError(
            f"the weights of nn.{type(layer).__name__} go into layers.{kinds[type(layer)].__name__}, "
            f"not into {type(block).__name__}"
        )
    decoder = isinstance(block, DecoderBlock)
    _copy_attention(block.self_attn, layer.self_attn)
    if decoder:
        _copy_attention(block.cross_attn, layer.multihead_attn)
    # (ours, torch's): the same names but for the feed-forward network, which is a module of its own here
    pairs = [("ff.linear1", "linear1"), ("ff.linear2", "linear2"), ("norm1", "norm1"), ("norm2", "norm2")]
    for ours_name, theirs_name in pairs + ([("norm3", "norm3")] if decoder else []):
        ours, theirs = block.get_submodule(ours_name), layer.get_submodule(theirs_name)
        ours.weight.copy_(theirs.weight)
        if theirs.bias is not None:
            ours.bias.copy_(theirs.bias)
    return block


@torch.no_grad()
def copy_llama_weights(block: ModernBlock, layer: nn.Module) -> ModernBlock:
    """Give a `ModernBlock` the weights of a Hugging Face ``LlamaDecoderLayer`` of the same sizes.

    Names map one to one (input_layernorm -> norm1, q/k/v/o_proj -> w_q/w_k/w_v/w_o,
    post_attention_layernorm -> norm2, gate/up/down_proj -> w1/w3/w2), except that the rows of
    q_proj and k_proj are permuted within each head by `positional.rotate_half_permutation`: Llama's
    rotary pairs feature i with i + head_dim/2, the course's pairs neighbours. Returns `block`.
    """
    attn, ref = block.self_attn, layer.self_attn
    perm = rotate_half_permutation(attn.head_dim)  # (head_dim,)

    def per_head(weight: torch.Tensor) -> torch.Tensor:  # (heads * head_dim, C): permute rows inside each head
        return weight.view(-1, attn.head_dim, weight.shape[-1])[:, perm].reshape(weight.shape)

    attn.w_q.weight.copy_(per_head(ref.q_proj.weight))
    attn.w_k.weight.copy_(per_head(ref.k_proj.weight))
    attn.w_v.weight.copy_(ref.v_proj.weight)
    attn.w_o.weight.copy_(ref.o_proj.weight)
    block.norm1.weight.copy_(layer.input_layernorm.weight)
    block.norm2.weight.copy_(layer.post_attention_layernorm.weight)
    block.ff.w1.weight.copy_(layer.mlp.gate_proj.weight)
    block.ff.w3.weight.copy_(layer.mlp.up_proj.weight)
    block.ff.w2.weight.copy_(layer.mlp.down_proj.weight)
    return block
