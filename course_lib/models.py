"""Whole models assembled from the pieces in `layers`: the encoder-decoder transformer of lesson 10
and the decoder-only GPT of lesson 11.

Sections:

- "Encoder-decoder": `TransformerEncoder`, `TransformerDecoder`, `Seq2SeqTransformer` (lesson 10);
- "GPT": `GPTConfig`, `GPT`, and the parameter and FLOP counts of a GPT (lesson 11).

Shapes use the vocabulary of `course_lib.attention`: ``B`` batch, ``T`` positions, ``C`` = ``n_embd``
= ``d_model`` features per position, ``V`` vocabulary size.

Importing this module runs nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import attention, layers


# ================================================================================================
# GPT
# ================================================================================================
#
# A decoder-only language model (GPT-2's layout, as in nanoGPT and minGPT):
#
#     idx (B, T) token ids
#       -> token embedding + position embedding            (B, T, C)
#       -> n_layer pre-norm TransformerBlocks, causal mask  (B, T, C)
#       -> final LayerNorm                                  (B, T, C)
#       -> lm_head, the "de-embedding" C -> V               (B, T, V) logits
#
# Position t's logits are the model's distribution for token t + 1, computed from tokens 0..t only.


def _positive_int(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}.{name} must be a positive int, got {value!r}")


@dataclass
class GPTConfig:
    """The shape of a GPT. The defaults are nanoGPT's small CPU recipe for character-level Tiny
    Shakespeare (about 0.8 million parameters)."""

    vocab_size: int = 65  # V: number of distinct tokens (Tiny Shakespeare has 65 characters)
    block_size: int = 64  # longest context in tokens; the learned position table has this many rows
    n_layer: int = 4  # number of transformer blocks, each with its own weights
    n_head: int = 4  # attention heads per block; n_embd must be a multiple of it
    n_embd: int = 128  # C = d_model: width of every token's vector in the residual stream
    dropout: float = 0.0  # dropout on embeddings, attention weights and sub-layer outputs (training only)
    bias: bool = True  # biases in the Linear layers and LayerNorms (GPT-2 has them; nanoGPT's recipe does not)
    tie_weights: bool = False  # use the token embedding matrix as the de-embedding too (one V x C matrix)

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            _positive_int("GPTConfig", name, getattr(self, name))
        if self.n_embd % self.n_head != 0:
            raise ValueError(
                f"GPTConfig.n_embd must be a multiple of n_head (each head gets n_embd // n_head features), "
                f"got n_embd={self.n_embd} and n_head={self.n_head}"
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig.dropout must be a number in [0, 1), got {self.dropout!r}")
        for name in ("bias", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"GPTConfig.{name} must be True or False, got {getattr(self, name)!r}")


class GPT(nn.Module):
    """A decoder-only transformer language model.

    ``forward(idx, targets=None, *, kv_cache=None) -> (logits, loss)``:

    - idx: ``(B, T)`` integer token ids, ``T <= block_size``;
    - targets: optional ``(B, T)`` token ids, the token that follows each position (``-100`` = no
      loss there); ``loss`` is the mean cross-entropy over the positions, or None without targets;
    - kv_cache: optional list of `attention.KVCache`, one per block, from `new_kv_cache`. The
      keys and values of ``idx`` are appended to it and ``idx`` is placed at the positions after
      the cached ones, so a sequence can be fed one token at a time (see `generation.generate`).

    Returns logits ``(B, T, V)``: row t is the (unnormalised) distribution of the token after
    position t, computed from tokens 0..t only (a causal mask; a later token never changes it).

    Submodules: ``tok_emb`` (V x C), ``pos_emb`` (block_size x C), ``drop``, ``blocks`` (n_layer
    pre-norm `layers.TransformerBlock` with GELU), ``ln_f`` (the final LayerNorm), ``lm_head``
    (C -> V, no bias; with ``tie_weights`` its weight *is* ``tok_emb.weight``).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT expects a GPTConfig, got {type(config).__name__}; e.g. GPT(GPTConfig(vocab_size=65))")
        self.config = config
        C = config.n_embd
        self.tok_emb = nn.Embedding(config.vocab_size, C)  # token id -> vector, (V, C)
        self.pos_emb = nn.Embedding(config.block_size, C)  # position -> vector, (block_size, C): learned, absolute
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            layers.TransformerBlock(
                C, config.n_head, 4 * C, config.dropout, norm_first=True, activation="gelu", bias=config.bias
            )
            for _ in range(config.n_layer)
        )
        self.ln_f = layers.LayerNorm(C, bias=config.bias)  # pre-norm blocks leave the stream unnormalised: do it once at the end
        # The de-embedding: one score per vocabulary entry, a dot product of the final vector with
        # that token's row of a (V, C) matrix, the same shape as the token embedding.
        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)
        if config.tie_weights:
            # One matrix both ways: a token's input vector is also the direction that predicts it.
            # Saves V x C parameters (most of a small-vocabulary model's embedding cost is elsewhere,
            # but for GPT-2's 50,257 tokens it is 38 million).
            self.lm_head.weight = self.tok_emb.weight
        self._init_weights()
        for block in self.blocks:
            # Fast path: F.scaled_dot_product_attention (same numbers, no (T, T) weights kept).
            # Set `block.self_attn.keep_weights = True` to keep the weights for plotting.
            block.self_attn.keep_weights = False

    @torch.no_grad()
    def _init_weights(self) -> None:
        """GPT-2's initialisation: every weight matrix and embedding N(0, 0.02), biases 0, LayerNorms
        (1, 0). The projections that write into the residual stream (attention's w_o and the FFN's
        lin2) get std 0.02 / sqrt(2 * n_layer): 2 * n_layer of them add up along the stream, so the
        stream's variance does not grow with depth. Small weights also make the first logits nearly
        equal, so the loss starts near ln(V)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, 0.02)
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for block in self.blocks:
            block.self_attn.w_o.weight.normal_(0.0, residual_std)
            block.ff.lin2.weight.normal_(0.0, residual_std)

    def new_kv_cache(self) -> list:
        """An empty key/value cache for generation: one `attention.KVCache` per block."""
        return [attention.KVCache() for _ in self.blocks]

    def _check_idx(self, idx, past: int) -> None:
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"idx must be a torch.Tensor of token ids shaped (B, T), got {type(idx).__name__}")
        if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
            raise TypeError(f"idx must hold integer token ids (torch.long), got dtype {idx.dtype}")
        if idx.ndim != 2 or idx.shape[1] == 0:
            hint = "; for a single sequence use idx[None]" if idx.ndim == 1 else ""
            raise ValueError(f"idx must be shaped (B, T) with T >= 1, got shape {tuple(idx.shape)}{hint}")
        T, block_size = idx.shape[1], self.config.block_size
        if past + T > block_size:
            where = f" after {past} cached positions" if past else ""
            raise ValueError(
                f"cannot run a sequence of {T} tokens{where}: that makes {past + T} positions, but block_size "
                f"is {block_size} (the position table has {block_size} rows); crop the context to its last "
                f"{block_size - past} tokens (generation.generate does this)"
            )
        # Reading the ids costs a host synchronisation on a GPU, but an out-of-range id there would
        # otherwise end in a device-side assert instead of a sentence. (The meta device has no values.)
        if idx.device.type != "meta" and (int(idx.min()) < 0 or int(idx.max()) >= self.config.vocab_size):
            raise ValueError(
                f"token ids must be in 0..{self.config.vocab_size - 1} (vocab_size={self.config.vocab_size}), "
                f"got ids from {int(idx.min())} to {int(idx.max())}"
            )

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, kv_cache: list | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        past = 0
        if kv_cache is not None:
            if not isinstance(kv_cache, (list, tuple)) or len(kv_cache) != len(self.blocks):
                got = f"a {type(kv_cache).__name__} of length {len(kv_cache)}" if isinstance(kv_cache, (list, tuple)) else type(kv_cache).__name__
                raise ValueError(f"kv_cache must be a list of {len(self.blocks)} KVCache (one per block, from new_kv_cache()), got {got}")
            past = len(kv_cache[0])  # positions already cached
        self._check_idx(idx, past)
        B, T = idx.shape
        if targets is not None and (not isinstance(targets, torch.Tensor) or targets.shape != idx.shape):
            got = f"shape {tuple(targets.shape)}" if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise ValueError(f"targets must be a tensor of token ids shaped like idx, {tuple(idx.shape)}, got {got}")

        positions = torch.arange(past, past + T, device=idx.device)  # (T,): 0..T-1, or after the cached ones
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, C) + (T, C) -> (B, T, C)
        x = self.drop(x)
        # New token i (at position past + i) may attend to every cached position and to new tokens 0..i.
        # One new token may attend to everything, so it needs no mask (and the fast path is faster without).
        mask = attention.causal_mask(T, past=past, device=idx.device) if T > 1 else None  # (T, past + T)
        for i, block in enumerate(self.blocks):
            x = block(x, mask=mask, cache=None if kv_cache is None else kv_cache[i])  # (B, T, C)
        x = self.ln_f(x)  # (B, T, C)
        logits = self.lm_head(x)  # (B, T, C) -> (B, T, V)

        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T).long(), ignore_index=-100)  # mean over positions
        return logits, loss

    def num_parameters(self) -> int:
        """The number of distinct parameters (a tied matrix counts once)."""
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self) -> str:
        c = self.config
        return f"n_layer={c.n_layer}, n_head={c.n_head}, n_embd={c.n_embd}, block_size={c.block_size}, vocab_size={c.vocab_size}"


def gpt_parameter_count(config: GPTConfig) -> dict[str, int]:
    """The parameters of ``GPT(config)`` by part, worked out from the shapes (``"total"`` is the sum).

    Per block: attention 4·C² weights (+ 4·C biases), the FFN 2·4C·C (+ 4C + C biases), two
    LayerNorms 2·C gains (+ 2·C biases). None of it depends on the sequence length T.
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"expected a GPTConfig, got {type(config).__name__}")
    V, C, L, b = config.vocab_size, config.n_embd, config.n_layer, int(config.bias)
    counts = {
        "token embedding": V * C,
        "position embedding": config.block_size * C,
        "attention": L * (4 * C * C + b * 4 * C),
        "feed-forward": L * (2 * 4 * C * C + b * (4 * C + C)),
        "layer norms": L * 2 * (C + b * C) + (C + b * C),
        "de-embedding": 0 if config.tie_weights else V * C,
    }
    counts["total"] = sum(counts.values())
    return counts


def gpt_forward_flops(config: GPTConfig, T: int) -> int:
    """Floating-point operations of the matrix products in one forward pass over ``T`` tokens.

    A product of an (m, k) by a (k, n) matrix costs 2·m·k·n (a multiply and an add each). Per
    token: 2 FLOPs for every weight of a matrix (attention 4·C², FFN 8·C², de-embedding V·C), so
    2·N_matmul per token, growing linearly in T; plus attention's two products q·kᵀ and weights·v,
    each 2·T·C per token and layer, so 4·L·T²·C in all: the one term that grows as T². Embedding
    lookups, LayerNorms, softmax and biases are not matrix products and are left out (they are
    small). The causal mask saves nothing here: the masked scores are computed and then discarded.
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"expected a GPTConfig, got {type(config).__name__}")
    _positive_int("gpt_forward_flops", "T", T)
    V, C, L = config.vocab_size, config.n_embd, config.n_layer
    matmul_weights = L * (4 * C * C + 8 * C * C) + V * C
    return 2 * matmul_weights * T + L * 4 * T * T * C
