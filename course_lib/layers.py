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
- `TransformerBlock` wires self-attention, optional cross-attention and the feed-forward network
  with residual connections, pre-norm (``x + f(norm(x))``) or post-norm (``norm(x + f(x))``). With
  the same weights it computes exactly what `torch.nn.TransformerEncoderLayer` (self-attention
  only) and `torch.nn.TransformerDecoderLayer` (``cross_attention=True``) compute with
  ``batch_first=True``; `copy_torch_weights` copies such a layer's weights into a block.

Masks follow the course's convention: boolean, **True = may attend** (torch's transformer layers
use the opposite, True = blocked).

Importing this module runs nothing.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention

__all__ = ["LayerNorm", "RMSNorm", "FeedForward", "TransformerBlock", "copy_torch_weights"]


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
    lesson 11's GPT uses; tests check the two agree, forward and backward). It is an attribute that
    can be flipped after construction.
    """

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True, fused: bool = False):
        super().__init__()
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int (the number of features to normalise), got {d!r}")
        self.d = d  # number of features normalised together
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
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int (the number of features to normalise), got {d!r}")
        self.d = d  # number of features normalised together
        self.eps = eps  # added to the mean square inside the square root
        self.weight = nn.Parameter(torch.ones(d))  # (d,) gain, starts at 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim("RMSNorm", x, self.d)
        rms = torch.sqrt((x**2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return x / rms * self.weight  # (..., d)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}"


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}  # GELU here is the exact (erf) one, as in torch


class FeedForward(nn.Module):
    """The position-wise feed-forward network: lin2(dropout(activation(lin1(x)))).

    Every position goes through the same two linear maps, d_model -> d_ff -> d_model, on its own:
    positions do not mix here (attention does that). The element-wise activation in the middle is
    the non-linearity that attention's value path lacks. d_ff defaults to 4 · d_model, as in the
    original transformer (512 -> 2048 -> 512).
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
        self.lin1 = nn.Linear(d_model, d_ff, bias=bias)
        self.lin2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)  # on the hidden activations, as in torch's layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim("FeedForward", x, self.d_model)
        h = _ACTIVATIONS[self.activation](self.lin1(x))  # (..., d_model) -> (..., d_ff)
        return self.lin2(self.dropout(h))  # (..., d_ff) -> (..., d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, activation={self.activation!r}"


class TransformerBlock(nn.Module):
    """One transformer layer: self-attention, optional cross-attention, feed-forward network.

    Sub-layers run in torch's order, each wrapped in a residual connection and a LayerNorm:

    - pre-norm (``norm_first=True``, GPT-2 and most modern models): ``x = x + dropout(f(norm(x)))``;
    - post-norm (``norm_first=False``, the 2017 paper's "Add & Norm"): ``x = norm(x + dropout(f(x)))``.

    Submodule names follow torch's layers so weights map one to one:

    - self-attention only (like `nn.TransformerEncoderLayer`): ``self_attn`` with ``norm1`` and
      ``dropout1``; ``ff`` with ``norm2`` and ``dropout2``; ``cross_attn``, ``norm3`` and
      ``dropout3`` are None.
    - ``cross_attention=True`` (like `nn.TransformerDecoderLayer`): ``self_attn`` with ``norm1`` /
      ``dropout1``; ``cross_attn`` with ``norm2`` / ``dropout2``; ``ff`` with ``norm3`` / ``dropout3``.

    ``dropout`` is used on each sub-layer's output (before the residual add), on the attention
    weights and inside the feed-forward network, as torch does. It is active only in training mode.

    ``forward(x, mask=None, *, context=None, context_mask=None, cache=None, context_kv=None)``:
    x ``(B, T, d_model)``;
    ``mask`` (True = may attend) for the self-attention, e.g. ``causal_mask(T)``; ``context``
    ``(B, T_ctx, d_model)`` (e.g. the encoder's output) and ``context_mask`` for the
    cross-attention, required when ``cross_attention=True``; ``cache`` (an ``attention.KVCache``)
    is handed to the self-attention; ``context_kv``, the context's keys and values computed once by
    ``cross_attn.context_keys_values(context)``, is handed to the cross-attention (for decoding,
    where the context stays the same at every step). Returns ``(B, T, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        *,
        norm_first: bool = True,
        cross_attention: bool = False,
        activation: str = "relu",
        bias: bool = True,
        norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.d_model = d_model  # width of the residual stream, C
        self.norm_first = norm_first  # True: pre-norm, False: post-norm (Add & Norm)
        self.has_cross_attention = cross_attention  # whether the block also attends to a context
        self.self_attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout) if cross_attention else None
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation, bias=bias)
        self.norm1 = LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=norm_eps, bias=bias) if cross_attention else None
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout) if cross_attention else None

    def _self_attention(self, h: torch.Tensor, mask, cache) -> torch.Tensor:
        if cache is None:  # older MultiHeadAttention versions have no `cache` keyword
            return self.self_attn(h, mask=mask)  # (B, T, C)
        return self.self_attn(h, mask=mask, cache=cache)  # (B, T, C)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
        cache=None,
        context_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be shaped (B, T, d_model={self.d_model}), got {got}")
        if self.cross_attn is not None and context is None:
            raise ValueError(
                "this block has cross-attention (cross_attention=True): pass context=, the (B, T_ctx, d_model) "
                "sequence to attend to (e.g. the encoder's output)"
            )
        if self.cross_attn is None and (context is not None or context_mask is not None or context_kv is not None):
            raise ValueError(
                "this block has no cross-attention (cross_attention=False), so context= and context_mask= "
                "cannot be used; build it with cross_attention=True"
            )

        if self.norm_first:  # pre-norm: x + f(norm(x)), the residual stream itself is never normalised
            x = x + self.dropout1(self._self_attention(self.norm1(x), mask, cache))  # (B, T, C)
            if self.cross_attn is not None:
                x = x + self.dropout2(self.cross_attn(self.norm2(x), context=context, mask=context_mask,
                                                      context_kv=context_kv))  # (B, T, C)
                x = x + self.dropout3(self.ff(self.norm3(x)))  # (B, T, C)
            else:
                x = x + self.dropout2(self.ff(self.norm2(x)))  # (B, T, C)
        else:  # post-norm ("Add & Norm"): norm(x + f(x)), every residual sum is normalised
            x = self.norm1(x + self.dropout1(self._self_attention(x, mask, cache)))  # (B, T, C)
            if self.cross_attn is not None:
                x = self.norm2(x + self.dropout2(self.cross_attn(x, context=context, mask=context_mask,
                                                                 context_kv=context_kv)))  # (B, T, C)
                x = self.norm3(x + self.dropout3(self.ff(x)))  # (B, T, C)
            else:
                x = self.norm2(x + self.dropout2(self.ff(x)))  # (B, T, C)
        return x

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, cross_attention={self.has_cross_attention}"


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
def copy_torch_weights(block: TransformerBlock, layer: nn.Module) -> TransformerBlock:
    """Copy the weights of a `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` into `block`.

    The block must have the same shape (d_model, d_ff, bias) and, for a decoder layer,
    ``cross_attention=True``. Returns the block. Norm-first, activation and eps are not weights:
    build the block with the layer's settings.
    """
    is_decoder = isinstance(layer, nn.TransformerDecoderLayer)
    if not is_decoder and not isinstance(layer, nn.TransformerEncoderLayer):
        raise TypeError(f"expected nn.TransformerEncoderLayer or nn.TransformerDecoderLayer, got {type(layer).__name__}")
    if is_decoder != (block.cross_attn is not None):
        raise ValueError(
            f"a {type(layer).__name__} needs a block with cross_attention={is_decoder}, "
            f"got one with cross_attention={block.cross_attn is not None}"
        )
    _copy_attention(block.self_attn, layer.self_attn)
    if is_decoder:
        _copy_attention(block.cross_attn, layer.multihead_attn)
    for ours, theirs in [(block.ff.lin1, layer.linear1), (block.ff.lin2, layer.linear2)]:
        ours.weight.copy_(theirs.weight)
        if theirs.bias is not None:
            ours.bias.copy_(theirs.bias)
    norms = ["norm1", "norm2", "norm3"] if is_decoder else ["norm1", "norm2"]
    for name in norms:
        ours, theirs = getattr(block, name), getattr(layer, name)
        ours.weight.copy_(theirs.weight)
        if theirs.bias is not None:
            ours.bias.copy_(theirs.bias)
    return block
