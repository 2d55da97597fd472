"""Whole models assembled from the pieces in `layers`, in lesson order: the encoder-decoder
transformer of lesson 10, then the decoder-only GPT of lesson 11.

Sections:

- "Encoder-decoder": `Seq2SeqConfig`, `TransformerEncoder`, `TransformerDecoder`,
  `Seq2SeqTransformer` (lesson 10), and `copy_from_torch_transformer`, which gives it the weights of a
  `torch.nn.Transformer` (the reference for tests);
- "GPT": `GPTConfig`, `GPT`, the parameter and FLOP counts of a GPT (lesson 11), and `BuiltinGPT`, the
  same architecture from torch's own layers (the reference for tests and benchmarks);
- "The modern decoder": `ModernGPTConfig`, `ModernGPT` (lesson 12): RMSNorm, SwiGLU, rotary
  attention with shared key/value heads, no biases, a sliding window and a rolling KV cache.

Shapes use the vocabulary of `course_lib.attention`: ``B`` batch, ``T`` positions (``S`` for a
source), ``C`` = ``d_model`` (a GPT config calls it ``n_embd``) features per position, ``V``
vocabulary size.

Importing this module runs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import attention, layers, positional
from course_lib._validate import check_int, is_int, is_number


def _expect_config(model: nn.Module, config, kind: type):
    """`config` if it is a `kind`, else a TypeError that shows how a model is built."""
    if not isinstance(config, kind):
        name = type(model).__name__
        raise TypeError(
            f"{name} expects a {kind.__name__}, got {type(config).__name__}: build it as {name}({kind.__name__}(...))"
        )
    return config


def _check_config(config, sizes: tuple[str, ...], *, width: str, heads: str, switches: tuple[str, ...]) -> None:
    """The checks every model config needs: its `sizes` are positive ints, the `width` splits evenly
    into `heads`, ``dropout`` is a rate in [0, 1), and its `switches` are True or False."""
    owner = type(config).__name__
    for name in sizes:
        check_int(f"{owner}.{name}", getattr(config, name))
    if getattr(config, width) % getattr(config, heads) != 0:
        raise ValueError(
            f"{owner}.{width} must be a multiple of {heads} (each head gets {width} // {heads} features), "
            f"got {width}={getattr(config, width)} and {heads}={getattr(config, heads)}"
        )
    if not is_number(config.dropout) or not 0.0 <= config.dropout < 1.0:
        raise ValueError(f"{owner}.dropout must be a number in [0, 1), got {config.dropout!r}")
    for name in switches:
        if not isinstance(getattr(config, name), bool):
            raise TypeError(f"{owner}.{name} must be True or False, got {getattr(config, name)!r}")


# ================================================================================================
# Encoder-decoder
# ================================================================================================
#
# The transformer of "Attention Is All You Need", for translation (lesson 10):
#
#     src (B, S) source ids                          tgt_in (B, T) <bos> + target ids (shifted right)
#       -> embedding * sqrt(C) + sinusoids (B, S, C)   -> embedding * sqrt(C) + sinusoids   (B, T, C)
#       -> encoder: EncoderBlocks, NO causal mask      -> decoder: DecoderBlocks, causal self-attention,
#          (every source word sees every other)           cross-attention into the encoder's LAST
#       -> final LayerNorm: memory (B, S, C)  ------>     layer's output (memory), feed-forward
#                                                      -> final LayerNorm, linear to logits (B, T, V_tgt)
#
# Padding: source keys that are <pad> get no attention, in the encoder and in the cross-attention;
# target keys that are <pad> get none in the decoder's self-attention. Position t's logits are the
# distribution of target word t + 1 given the whole source and target words 0..t.


@dataclass
class Seq2SeqConfig:
    """The shape of a `Seq2SeqTransformer`. The defaults fit lesson 10's translation task."""

    src_vocab_size: int  # V_src: number of source tokens (specials included)
    tgt_vocab_size: int  # V_tgt: number of target tokens (specials included)
    d_model: int = 64  # C: width of every token's vector, in the encoder and the decoder
    n_heads: int = 4  # attention heads per attention layer; d_model must be a multiple of it
    n_encoder_layers: int = 2  # encoder blocks (self-attention + FFN)
    n_decoder_layers: int = 2  # decoder blocks (causal self-attention + cross-attention + FFN)
    d_ff: int | None = None  # hidden width of the FFNs (None = 4 * d_model)
    dropout: float = 0.1  # on embeddings, attention weights and sub-layer outputs (training only)
    max_len: int = 64  # longest source or target sequence (rows of the sinusoid table)
    norm_first: bool = True  # pre-norm blocks (False: the 2017 paper's post-norm Add & Norm)
    activation: str = "relu"  # the FFNs' non-linearity, "relu" (the paper) or "gelu"
    pad_id: int = 0  # padding id, in both vocabularies
    bos_id: int = 1  # the decoder's first input
    eos_id: int = 2  # the token that ends a target sentence
    tie_weights: bool = False  # one (V_tgt, C) matrix for the target embedding and the output layer
    keep_weights: bool = False  # keep every attention layer's weights for plots (False: torch's fused kernel)

    def __post_init__(self):
        sizes = (
            "src_vocab_size",
            "tgt_vocab_size",
            "d_model",
            "n_heads",
            "n_encoder_layers",
            "n_decoder_layers",
            "max_len",
        ) + (("d_ff",) if self.d_ff is not None else ())
        _check_config(self, sizes, width="d_model", heads="n_heads", switches=("tie_weights", "keep_weights"))
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            if not is_int(value) or not 0 <= value < self.tgt_vocab_size:
                raise ValueError(
                    f"Seq2SeqConfig.{name} must be a target id in [0, {self.tgt_vocab_size}), got {value!r}"
                )


def _check_ids(name: str, ids, vocab_size: int, max_len: int, past: int = 0) -> None:
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2:
        got = f"shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"{name} must be a (B, length) tensor of token ids, got {got}")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if past + ids.shape[1] > max_len:
        after = f" after {past} cached ones" if past else ""
        raise ValueError(
            f"{name} has {ids.shape[1]} positions{after}, more than max_len={max_len}: the sinusoid "
            f"table has max_len rows (a larger max_len builds a longer one, but a model trained on "
            f"shorter sentences has never used those positions)"
        )
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(
            f"{name} ids must be in [0, {vocab_size}), got values from {int(ids.min())} to {int(ids.max())}"
        )


class TransformerEncoder(nn.Module):
    """``n_layers`` `layers.EncoderBlock` without a causal mask, then a final LayerNorm.

    ``forward(x, mask=None)``: x ``(B, S, C)``; mask (True = may attend), e.g. a source key-padding
    mask ``(B, 1, 1, S)``. Returns ``(B, S, C)``: one vector per source token, each computed from
    the whole sentence. The final norm matches `torch.nn.Transformer`'s ``encoder_norm`` (needed
    after pre-norm blocks, whose stream is never normalised; torch keeps it for post-norm too).
    ``norm_first``, ``activation`` and ``keep_weights`` are every block's (see `layers.EncoderBlock`).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        *,
        norm_first: bool = True,
        activation: str = "relu",
        keep_weights: bool = True,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            layers.EncoderBlock(
                d_model, n_heads, d_ff, dropout, norm_first=norm_first, activation=activation, keep_weights=keep_weights
            )
            for _ in range(n_layers)
        )
        self.norm = layers.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.layers:
            x = block(x, mask)  # (B, S, C)
        return self.norm(x)  # (B, S, C)


class TransformerDecoder(nn.Module):
    """``n_layers`` `layers.DecoderBlock`, then a final LayerNorm.

    ``forward(y, memory, mask=None, memory_mask=None, *, memory_kv=None, cache=None)``: y
    ``(B, T, C)`` the target so far; memory ``(B, S, C)`` the encoder's output (its LAST layer, after
    the final norm: every decoder layer attends to the same memory); mask for the self-attention
    (causal, and target padding); memory_mask for the cross-attention (source padding); memory_kv,
    optionally, each layer's cross-attention keys and values of the memory, computed once for a
    whole decoding (see `Seq2SeqTransformer.memory_keys_values`); cache, optionally, one
    `attention.KVCache` per layer for the self-attention (y then holds only the new positions).
    Returns ``(B, T, C)``. ``norm_first``, ``activation`` and ``keep_weights`` are every block's.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        *,
        norm_first: bool = True,
        activation: str = "relu",
        keep_weights: bool = True,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            layers.DecoderBlock(
                d_model, n_heads, d_ff, dropout, norm_first=norm_first, activation=activation, keep_weights=keep_weights
            )
            for _ in range(n_layers)
        )
        self.norm = layers.LayerNorm(d_model)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        *,
        memory_kv: list | None = None,
        cache: list | None = None,
    ) -> torch.Tensor:
        for name, per_layer in (("memory_kv", memory_kv), ("cache", cache)):
            if per_layer is not None and len(per_layer) != len(self.layers):
                raise ValueError(
                    f"{name} must hold one entry per decoder layer ({len(self.layers)}), got {len(per_layer)}"
                )
        for i, block in enumerate(self.layers):
            kv = None if memory_kv is None else memory_kv[i]  # this layer's cross-attention keys and values
            layer_cache = None if cache is None else cache[i]  # this layer's own past keys and values
            y = block(y, memory, mask, memory_mask, memory_kv=kv, cache=layer_cache)  # (B, T, C)
        return self.norm(y)  # (B, T, C)


class Seq2SeqTransformer(nn.Module):
    """An encoder-decoder transformer (see the section comment above).

    ``forward(src, tgt_in) -> logits``: src ``(B, S)`` source ids, tgt_in ``(B, T)`` the decoder's
    input (<bos> + target ids, padded with ``pad_id``); returns logits ``(B, T, V_tgt)``. Training
    feeds the whole shifted target at once (teacher forcing: every position learns in parallel);
    decoding calls `encode` once and `decode` once per new token (see `generation.greedy_decode`).

    Submodules: ``src_emb`` (V_src x C), ``tgt_emb`` (V_tgt x C), ``encoder``, ``decoder``,
    ``lm_head`` (C -> V_tgt; with ``tie_weights`` its weight *is* ``tgt_emb.weight``); the sinusoid
    table ``positions`` (max_len x C) is a buffer, not a parameter.

    The model is pre-norm (``norm_first=True``) with a final LayerNorm after each stack, as most
    transformers are today; ``norm_first=False`` gives the 2017 paper's post-norm "Add & Norm".
    By default the attention layers run torch's fused kernel and keep no weights (``.last_weights``
    is None); a model built with ``keep_weights=True`` in its config keeps them for plots (see
    `cross_attention_weights`), with the same numbers.
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = _expect_config(self, config, Seq2SeqConfig)
        C = config.d_model
        self.src_emb = nn.Embedding(config.src_vocab_size, C)  # (V_src, C)
        self.tgt_emb = nn.Embedding(config.tgt_vocab_size, C)  # (V_tgt, C)
        self.register_buffer("positions", positional.sinusoidal_encoding(config.max_len, C), persistent=False)
        self.drop = nn.Dropout(config.dropout)
        blocks = dict(
            d_ff=config.d_ff,
            dropout=config.dropout,
            norm_first=config.norm_first,
            activation=config.activation,
            keep_weights=config.keep_weights,
        )
        self.encoder = TransformerEncoder(C, config.n_heads, config.n_encoder_layers, **blocks)
        self.decoder = TransformerDecoder(C, config.n_heads, config.n_decoder_layers, **blocks)
        self.lm_head = nn.Linear(C, config.tgt_vocab_size)  # the de-embedding, C -> V_tgt
        with torch.no_grad():
            # Embedding entries of size 1 / sqrt(C), times sqrt(C) in `_embed`: token vectors of the
            # same size as the sinusoids they are added to (torch's default N(0, 1) would drown them).
            for table in (self.src_emb, self.tgt_emb):
                table.weight.normal_(0.0, C**-0.5)
        if config.tie_weights:
            # The paper's tying: the row that embeds a target word also scores it at the output
            # (saves V_tgt x C parameters; the output layer keeps its own bias).
            self.lm_head.weight = self.tgt_emb.weight

    def _embed(self, ids: torch.Tensor, table: nn.Embedding, start: int = 0) -> torch.Tensor:
        # Entries initialised N(0, 1/C) give token vectors of length about 1; times sqrt(C) they are as
        # long as a sinusoid row (about sqrt(C/2)), so neither the word nor its position drowns the other.
        x = table(ids) * math.sqrt(self.config.d_model)  # (B, L, C)
        return self.drop(x + self.positions[start : start + ids.shape[1]])  # (B, L, C)

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        """``(B, 1, 1, S)``, True where the source token is real: any query may attend to it."""
        return (src != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)

    def target_mask(self, tgt_in: torch.Tensor) -> torch.Tensor:
        """``(B, 1, T, T)``: target query t may attend to key j when j <= t (causal) and j is not padding."""
        T = tgt_in.shape[1]
        keys = (tgt_in != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, T)
        return keys & attention.causal_mask(T, device=tgt_in.device)  # (B, 1, T, T)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """The memory ``(B, S, C)``: one vector per source token from the encoder's last layer."""
        _check_ids("src", src, self.config.src_vocab_size, self.config.max_len)
        return self.encoder(self._embed(src, self.src_emb), self.source_mask(src))  # (B, S, C)

    def memory_keys_values(self, memory: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every decoder layer's cross-attention keys and values of ``memory`` ``(B, S, C)``: one pair
        of ``(B, n_heads, S, head_dim)`` per layer.

        They depend on the source only, so a decoder that writes a target token by token computes
        them once and passes them to every step (``decode(..., memory_kv=...)``) instead of
        projecting the same memory again at each step.
        """
        return [block.cross_attn.context_keys_values(memory) for block in self.decoder.layers]

    def new_decoder_cache(self) -> list:
        """An empty key/value cache for the decoder's self-attention: one `attention.KVCache` per layer."""
        return [attention.KVCache() for _ in self.decoder.layers]

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        src: torch.Tensor,
        *,
        memory_kv: list | None = None,
        cache: list | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, V_tgt)`` for the target prefix ``tgt_in`` given the encoded source.

        For decoding token by token (the same logits, less work): ``memory_kv``, the result of
        `memory_keys_values(memory)`, computed once; ``cache``, from `new_decoder_cache`, keeps the
        decoder's own past keys and values, and then ``tgt_in`` holds only the NEW tokens, placed at
        the positions after the cached ones (cached positions count as real tokens).
        """
        past = 0 if cache is None else len(cache[0])  # target positions already in the cache
        _check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size, self.config.max_len, past)
        if memory.shape[:2] != src.shape or tgt_in.shape[0] != src.shape[0]:
            raise ValueError(
                f"memory must be (B, S, C) for src (B, S) and tgt_in (B, T), got memory {tuple(memory.shape)}, "
                f"src {tuple(src.shape)}, tgt_in {tuple(tgt_in.shape)}"
            )
        if cache is None:
            mask = self.target_mask(tgt_in)  # (B, 1, T, T)
        else:
            B, T = tgt_in.shape
            keys = torch.cat(
                [torch.ones(B, past, dtype=torch.bool, device=tgt_in.device), tgt_in != self.config.pad_id], dim=1
            )  # (B, past + T): cached keys are real
            causal = attention.causal_mask(T, past=past, device=tgt_in.device)  # (T, past + T)
            mask = keys[:, None, None, :] & causal  # (B, 1, T, past + T)
        y = self.decoder(
            self._embed(tgt_in, self.tgt_emb, past),
            memory,
            mask,
            self.source_mask(src),
            memory_kv=memory_kv,
            cache=cache,
        )  # (B, T, C)
        return self.lm_head(y)  # (B, T, V_tgt)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        if (
            isinstance(src, torch.Tensor)
            and isinstance(tgt_in, torch.Tensor)
            and src.ndim == 2
            and tgt_in.ndim == 2
            and src.shape[0] != tgt_in.shape[0]
        ):
            raise ValueError(
                f"src and tgt_in must have the same batch size, got {tuple(src.shape)} and {tuple(tgt_in.shape)}"
            )
        return self.decode(tgt_in, self.encode(src), src)  # (B, T, V_tgt)

    def cross_attention_weights(self) -> list[torch.Tensor]:
        """The last forward pass's cross-attention weights, one ``(B, n_heads, T, S)`` per decoder layer
        (for a model built with ``keep_weights=True`` in its config)."""
        weights = [block.cross_attn.last_weights for block in self.decoder.layers]
        if any(w is None for w in weights):
            raise RuntimeError(
                "no attention weights were kept: build the model with Seq2SeqConfig(..., "
                "keep_weights=True) (and load the trained weights into it) to keep them"
            )
        return weights

    def num_parameters(self) -> int:
        """The number of distinct parameters (a tied matrix counts once)."""
        return sum(p.numel() for p in self.parameters())


@torch.no_grad()
def copy_from_torch_transformer(model: Seq2SeqTransformer, reference: nn.Transformer) -> Seq2SeqTransformer:
    """Copy the weights of a ``torch.nn.Transformer`` (``batch_first=True``, the same sizes, norm_first
    and activation) into `model`'s encoder and decoder. Embeddings, positions and ``lm_head`` are not
    part of ``nn.Transformer`` and are left alone. Returns `model`."""
    if not isinstance(reference, nn.Transformer):
        raise TypeError(f"expected a torch.nn.Transformer, got {type(reference).__name__}")
    pairs = [(model.encoder, reference.encoder), (model.decoder, reference.decoder)]
    for ours, theirs in pairs:
        if len(ours.layers) != len(theirs.layers):
            raise ValueError(f"layer counts differ: ours {len(ours.layers)}, torch's {len(theirs.layers)}")
        for block, layer in zip(ours.layers, theirs.layers, strict=True):
            layers.copy_torch_weights(block, layer)
        ours.norm.weight.copy_(theirs.norm.weight)
        ours.norm.bias.copy_(theirs.norm.bias)
    return model


# ================================================================================================
# GPT
# ================================================================================================
#
# A decoder-only language model (GPT-2's layout, as in nanoGPT and minGPT):
#
#     idx (B, T) token ids
#       -> token embedding + position embedding            (B, T, C)
#       -> n_layer pre-norm EncoderBlocks, causal mask     (B, T, C)
#       -> final LayerNorm                                  (B, T, C)
#       -> lm_head, the "de-embedding" C -> V               (B, T, V) logits
#
# Its block is an encoder's (self-attention and a feed-forward network, no cross-attention) made
# causal by its mask. Position t's logits are the model's distribution for token t + 1, computed
# from tokens 0..t only.


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
    keep_weights: bool = False  # keep each attention layer's weights (plots; plain matrix products) instead of
    #                             torch's fused kernel, which computes the same numbers faster and keeps none

    def __post_init__(self):
        _check_config(
            self,
            ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"),
            width="n_embd",
            heads="n_head",
            switches=("bias", "tie_weights", "keep_weights"),
        )


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
    pre-norm `layers.EncoderBlock` with GELU), ``ln_f`` (the final LayerNorm), ``lm_head``
    (C -> V, no bias; with ``tie_weights`` its weight *is* ``tok_emb.weight``). Every LayerNorm runs
    torch's one-kernel ``F.layer_norm``, and the attention torch's fused kernel unless the config
    says ``keep_weights=True``: the same numbers as the course's from-scratch code, faster.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = _expect_config(self, config, GPTConfig)
        C = config.n_embd
        self.tok_emb = nn.Embedding(config.vocab_size, C)  # token id -> vector, (V, C)
        self.pos_emb = nn.Embedding(config.block_size, C)  # position -> vector, (block_size, C): learned, absolute
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            layers.EncoderBlock(
                C,
                config.n_head,
                4 * C,
                config.dropout,
                norm_first=True,
                activation="gelu",
                bias=config.bias,
                keep_weights=config.keep_weights,
                fused_norm=True,
            )
            for _ in range(config.n_layer)
        )
        # pre-norm blocks leave the stream unnormalised: do it once at the end
        self.ln_f = layers.LayerNorm(C, bias=config.bias, fused=True)
        # The de-embedding: one score per vocabulary entry, a dot product of the final vector with
        # that token's row of a (V, C) matrix, the same shape as the token embedding.
        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)
        if config.tie_weights:
            # One matrix both ways: a token's input vector is also the direction that predicts it.
            # Saves V x C parameters (most of a small-vocabulary model's embedding cost is elsewhere,
            # but for GPT-2's 50,257 tokens it is 38 million).
            self.lm_head.weight = self.tok_emb.weight
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """GPT-2's initialisation: every weight matrix and embedding N(0, 0.02), biases 0, LayerNorms
        (1, 0). The projections that write into the residual stream (attention's w_o and the FFN's
        linear2) get std 0.02 / sqrt(2 * n_layer): 2 * n_layer of them add up along the stream, so the
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
            block.ff.linear2.weight.normal_(0.0, residual_std)

    def new_kv_cache(self) -> list:
        """An empty key/value cache for generation: one `attention.KVCache` per block."""
        return [attention.KVCache() for _ in self.blocks]

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, kv_cache: list | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        past = self._check_forward(idx, targets, kv_cache)  # positions already in the cache (0 without one)
        B, T = idx.shape
        positions = torch.arange(past, past + T, device=idx.device)  # (T,): 0..T-1, or after the cached ones
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, C) + (T, C) -> (B, T, C)
        x = self.drop(x)
        # New token i (at position past + i) may attend to every cached position and to new tokens 0..i.
        # One new token may attend to everything, so it needs no mask (and the fast path is faster without).
        mask = attention.causal_mask(T, past=past, device=idx.device) if T > 1 else None  # (T, past + T)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, cache=None if kv_cache is None else kv_cache[i])  # (B, T, C)
        x = self.ln_f(x)  # (B, T, C)
        logits = self.lm_head(x)  # (B, T, C) -> (B, T, V)

        loss = None
        if targets is not None:  # the mean over positions; -100 marks a position without a target
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T).long(), ignore_index=-100)
        return logits, loss

    # --- argument checks: what `forward` expects, said in words -----------------------------------

    def _check_forward(self, idx, targets, kv_cache) -> int:
        """Check forward's arguments; return the number of positions already in the cache."""
        past = self._check_kv_cache(kv_cache)
        self._check_idx(idx, past)
        if targets is not None and (not isinstance(targets, torch.Tensor) or targets.shape != idx.shape):
            got = f"shape {tuple(targets.shape)}" if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise ValueError(f"targets must be a tensor of token ids shaped like idx, {tuple(idx.shape)}, got {got}")
        return past

    def _check_kv_cache(self, kv_cache) -> int:
        if kv_cache is None:
            return 0
        if not isinstance(kv_cache, (list, tuple)) or len(kv_cache) != len(self.blocks):
            got = (
                f"a {type(kv_cache).__name__} of length {len(kv_cache)}"
                if isinstance(kv_cache, (list, tuple))
                else type(kv_cache).__name__
            )
            raise ValueError(
                f"kv_cache must be a list of {len(self.blocks)} KVCache (one per block, from new_kv_cache()), got {got}"
            )
        return len(kv_cache[0])

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

    def num_parameters(self) -> int:
        """The number of distinct parameters (a tied matrix counts once)."""
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"n_layer={c.n_layer}, n_head={c.n_head}, n_embd={c.n_embd}, block_size={c.block_size}, "
            f"vocab_size={c.vocab_size}"
        )


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
    check_int("T", T, what="the number of tokens")
    V, C, L = config.vocab_size, config.n_embd, config.n_layer
    matmul_weights = L * (4 * C * C + 8 * C * C) + V * C
    return 2 * matmul_weights * T + L * 4 * T * T * C


class BuiltinGPT(nn.Module):
    """The same architecture as `GPT`, assembled from torch's own layers (nn.Embedding,
    nn.TransformerEncoderLayer with a causal mask, pre-norm and GELU, nn.LayerNorm, nn.Linear): the
    independent reference that the tests compare `GPT` with and the benchmarks time it against."""

    def __init__(self, c: GPTConfig):
        super().__init__()
        self.tok = nn.Embedding(c.vocab_size, c.n_embd)
        self.pos = nn.Embedding(c.block_size, c.n_embd)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                c.n_embd,
                c.n_head,
                4 * c.n_embd,
                dropout=0.0,
                activation="gelu",
                batch_first=True,
                norm_first=True,
                bias=c.bias,
            )
            for _ in range(c.n_layer)
        )
        self.ln = nn.LayerNorm(c.n_embd, bias=c.bias)
        self.head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        if c.tie_weights:
            self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))  # (B, T, C)
        blocked = torch.ones(T, T, dtype=torch.bool, device=idx.device).triu(1)  # torch's convention: True = blocked
        for layer in self.layers:
            x = layer(x, src_mask=blocked, is_causal=True)  # (B, T, C)
        return self.head(self.ln(x))  # (B, T, V)


@torch.no_grad()
def copy_builtin_gpt_weights(ours: GPT, ref: BuiltinGPT) -> GPT:
    """Give the course's GPT the weights of a `BuiltinGPT`, so that both compute the same function."""
    ours.tok_emb.weight.copy_(ref.tok.weight)
    ours.pos_emb.weight.copy_(ref.pos.weight)
    for block, layer in zip(ours.blocks, ref.layers, strict=True):
        layers.copy_torch_weights(block, layer)
    ours.ln_f.weight.copy_(ref.ln.weight)
    if ref.ln.bias is not None:
        ours.ln_f.bias.copy_(ref.ln.bias)
    ours.lm_head.weight.copy_(ref.head.weight)
    return ours


# ================================================================================================
# The modern decoder (lesson 12)
# ================================================================================================
#
# GPT's layout with the block of Llama 2 and 3 and Mistral (Qwen 2 adds q/k/v biases; Qwen3 and Gemma 3
# QK-norm, `qk_norm=True` here):
#
#     idx (B, T) token ids
#       -> token embedding (no position table: positions enter inside attention)   (B, T, C)
#       -> n_layer ModernBlocks: x + attn(rmsnorm(x)), x + swiglu(rmsnorm(x));
#          rotary q and k, n_kv_head key/value heads, causal mask limited to a window  (B, T, C)
#       -> final RMSNorm                                                              (B, T, C)
#       -> lm_head (tied to the token embedding by default)                           (B, T, V)
#
# Every token attends to at most `span` = window (or block_size) positions, itself included. The
# scores depend on offsets only, so the model runs on sequences of any length: a sequence longer
# than the span is read with a sliding window, and a KV cache can roll (keep the last span - 1
# keys) instead of being rebuilt when generation passes block_size. Reading further back with the
# whole past needs block_size raised, and rope_scaling to keep the offsets in the trained range.


@dataclass
class ModernGPTConfig:
    """The shape of a `ModernGPT`. The defaults are lesson 11's GPT size (4 layers, 4 heads, 128
    dimensions, context 64, 65 characters)."""

    vocab_size: int = 65  # V: number of distinct tokens
    block_size: int = 64  # the training length; with window=None also how far back a token may attend
    n_layer: int = 4  # number of blocks
    n_head: int = 4  # query heads per block; n_embd must be a multiple of it
    n_kv_head: int = 4  # key/value heads per block (n_head: multi-head, 1: multi-query, between: grouped-query)
    n_embd: int = 128  # C = d_model: width of the residual stream
    d_ff: int | None = None  # SwiGLU hidden width (None: 8/3 * n_embd rounded up to a multiple of 8)
    rope_base: float = 10000.0  # rotary positions' base: frequencies base ** (-2i / head_dim)
    window: int | None = None  # sliding window: each token sees itself and window - 1 before it (None: block_size)
    norm_eps: float = 1e-5  # added inside every RMSNorm's square root
    tie_weights: bool = True  # one (V, C) matrix for the token embedding and the de-embedding
    dropout: float = 0.0  # not used (the model has no dropout); here so the shared config checks apply
    rope_scaling: positional.RopeScaling | None = None  # stretched rotary frequencies (None: RoPE's own)
    qk_norm: bool = False  # RMSNorm on each head's queries and keys (Qwen3, Gemma 3)

    def __post_init__(self):
        if isinstance(self.rope_scaling, dict):  # as a saved checkpoint's config holds it
            self.rope_scaling = positional.RopeScaling(**self.rope_scaling)
        sizes = ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd")
        sizes += ("d_ff",) if self.d_ff is not None else ()
        sizes += ("window",) if self.window is not None else ()
        _check_config(self, sizes, width="n_embd", heads="n_head", switches=("tie_weights", "qk_norm"))
        if self.n_head % self.n_kv_head != 0:
            raise ValueError(
                f"ModernGPTConfig.n_head must be a multiple of n_kv_head (query heads share key/value "
                f"heads in equal groups), got n_head={self.n_head} and n_kv_head={self.n_kv_head}"
            )
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"ModernGPTConfig: rotary positions turn pairs of features, so n_embd // n_head must be "
                f"even, got {self.n_embd} // {self.n_head} = {self.n_embd // self.n_head}"
            )
        if not is_number(self.rope_base) or not self.rope_base > 1:
            raise ValueError(f"ModernGPTConfig.rope_base must be a number > 1, got {self.rope_base!r}")

    @property
    def span(self) -> int:
        """How many positions a token attends to at most, itself included: window, or block_size."""
        return self.block_size if self.window is None else self.window


class ModernGPT(nn.Module):
    """A decoder-only language model with Llama's block (see the section comment above).

    ``forward(idx, targets=None, *, kv_cache=None) -> (logits, loss)``, as `GPT`'s: idx ``(B, T)``
    token ids of ANY length T (no position table: a sequence longer than ``config.span`` is read
    with a sliding window); targets ``(B, T)`` or None; kv_cache from `new_kv_cache`, one rolling
    `attention.KVCache` per block that keeps the last ``span - 1`` keys and values of its
    ``n_kv_head`` heads. Returns logits ``(B, T, V)`` and the mean cross-entropy (or None).

    Submodules: ``tok_emb`` (V x C), ``blocks`` (n_layer `layers.ModernBlock`), ``ln_f`` (the final
    RMSNorm), ``lm_head`` (C -> V, no bias; tied to ``tok_emb.weight`` by default).
    """

    rolling_cache = True  # positions are relative: `generation.generate` rolls the cache, never crops

    def __init__(self, config: ModernGPTConfig):
        super().__init__()
        self.config = _expect_config(self, config, ModernGPTConfig)
        C = config.n_embd
        self.tok_emb = nn.Embedding(config.vocab_size, C)  # (V, C): the only embedding
        self.blocks = nn.ModuleList(
            layers.ModernBlock(
                C,
                config.n_head,
                config.n_kv_head,
                config.d_ff,
                rope_base=config.rope_base,
                norm_eps=config.norm_eps,
                rope_scaling=config.rope_scaling,
                qk_norm=config.qk_norm,
            )
            for _ in range(config.n_layer)
        )
        self.ln_f = layers.RMSNorm(C, eps=config.norm_eps, fused=True)
        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """GPT's initialisation (N(0, 0.02), the projections into the residual stream, attention's
        w_o and SwiGLU's w2, scaled by 1 / sqrt(2 * n_layer)); RMSNorm gains start at 1."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, 0.02)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for block in self.blocks:
            block.self_attn.w_o.weight.normal_(0.0, residual_std)
            block.ff.w2.weight.normal_(0.0, residual_std)

    def new_kv_cache(self, sinks: int = 0) -> list:
        """An empty rolling cache: one `attention.KVCache(max_len=span - 1)` per block. The next token
        sees those span - 1 keys and its own: its whole window, and never more memory than that.

        ``sinks`` > 0 keeps the first ``sinks`` positions for ever, and the most recent span - 1 -
        sinks (StreamingLLM's attention sinks): keys are then rotated by their place in the cache."""
        return [attention.KVCache(max_len=self.config.span - 1, sinks=sinks) for _ in self.blocks]

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, kv_cache: list | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        cached = self._check_forward(idx, targets, kv_cache)  # keys already in the cache (0 without one)
        B, T = idx.shape
        span = self.config.span
        sinks = 0 if kv_cache is None else kv_cache[0].sinks
        if sinks and T > 1 and cached + T > span:
            # Past the span, a cache with sinks renumbers the positions at every step: feed one token at a time.
            logits = torch.cat([self(idx[:, t : t + 1], kv_cache=kv_cache)[0] for t in range(T)], dim=1)  # (B, T, V)
            return logits, self._loss(logits, targets)
        x = self.tok_emb(idx)  # (B, T, C): no positions added, the attention rotates q and k instead
        # Causal and at most span - 1 back; one new token after fewer than span cached keys sees them all.
        needs_mask = T > 1 or cached >= span
        mask = attention.sliding_window_mask(T, span, idx.device, past=cached) if needs_mask else None  # (T, past+T)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, cache=None if kv_cache is None else kv_cache[i])  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, V)
        return logits, self._loss(logits, targets)

    @staticmethod
    def _loss(logits: torch.Tensor, targets: torch.Tensor | None) -> torch.Tensor | None:
        if targets is None:
            return None
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten().long(), ignore_index=-100)

    def _check_forward(self, idx, targets, kv_cache) -> int:
        """Check forward's arguments (as `GPT` does, without a length limit); return the cached keys."""
        if kv_cache is not None and (not isinstance(kv_cache, (list, tuple)) or len(kv_cache) != len(self.blocks)):
            raise ValueError(
                f"kv_cache must be a list of {len(self.blocks)} KVCache (one per block, from "
                f"new_kv_cache()), got {type(kv_cache).__name__}"
            )
        cached = 0 if kv_cache is None else len(kv_cache[0])
        if (
            not isinstance(idx, torch.Tensor)
            or idx.dtype.is_floating_point
            or idx.dtype.is_complex
            or idx.dtype == torch.bool
            or idx.ndim != 2
            or idx.shape[1] == 0
        ):
            got = (
                f"dtype {idx.dtype}, shape {tuple(idx.shape)}" if isinstance(idx, torch.Tensor) else type(idx).__name__
            )
            raise ValueError(f"idx must be a (B, T) tensor of integer token ids with T >= 1, got {got}")
        V = self.config.vocab_size
        if idx.device.type != "meta" and (int(idx.min()) < 0 or int(idx.max()) >= V):
            raise ValueError(
                f"token ids must be in 0..{V - 1} (vocab_size={V}), got ids from {int(idx.min())} to {int(idx.max())}"
            )
        if targets is not None and (not isinstance(targets, torch.Tensor) or targets.shape != idx.shape):
            got = f"shape {tuple(targets.shape)}" if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise ValueError(f"targets must be a tensor of token ids shaped like idx, {tuple(idx.shape)}, got {got}")
        return cached

    def num_parameters(self) -> int:
        """The number of distinct parameters (a tied matrix counts once)."""
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"n_layer={c.n_layer}, n_head={c.n_head}, n_kv_head={c.n_kv_head}, n_embd={c.n_embd}, "
            f"block_size={c.block_size}, window={c.window}, vocab_size={c.vocab_size}"
            + (f", rope_scaling={c.rope_scaling}" if c.rope_scaling is not None else "")
            + (", qk_norm=True" if c.qk_norm else "")
        )


@torch.no_grad()
def copy_from_llama(model: ModernGPT, llama: nn.Module) -> ModernGPT:
    """Give a `ModernGPT` the weights of a Hugging Face ``LlamaForCausalLM`` of the same sizes (built
    from a ``LlamaConfig``; nothing is downloaded), so that both compute the same function: the
    embedding, every block by `layers.copy_llama_weights` (q/k rows permuted per head), the final
    norm and the de-embedding. Returns `model`."""
    if len(model.blocks) != len(llama.model.layers):
        raise ValueError(f"layer counts differ: ours {len(model.blocks)}, Llama's {len(llama.model.layers)}")
    model.tok_emb.weight.copy_(llama.model.embed_tokens.weight)
    for block, layer in zip(model.blocks, llama.model.layers, strict=True):
        layers.copy_llama_weights(block, layer)
    model.ln_f.weight.copy_(llama.model.norm.weight)
    model.lm_head.weight.copy_(llama.lm_head.weight)
    return model
