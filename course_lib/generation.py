"""Turning a model's next-token distributions into text.

Sections:

- "Decoder-only generation" (lesson 11): `generate` for GPT-style models, one token at a time,
  greedy or sampled (temperature, top-k, top-p), with an optional key/value cache; the filters
  `top_k_filter` and `top_p_filter`, and `next_token_probs` / `sample_next_token` for one step.
- "Sequence-to-sequence decoding" (lesson 10): greedy decoding and beam search for an
  encoder-decoder.

Shapes: ``B`` batch, ``T`` positions, ``V`` vocabulary size.

Importing this module runs nothing.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn as nn

from course_lib._validate import check_int, is_int, is_number

# ================================================================================================
# Decoder-only generation
# ================================================================================================
#
# A language model gives, at every position, a distribution over the next token. To generate we
# need only the LAST position's distribution: pick a token from it, append it, run again. The
# other positions' logits predict tokens we already have.


def _check_logits(name: str, logits) -> None:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{name} expects logits as a torch.Tensor shaped (..., V), got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise TypeError(f"{name} expects floating-point logits, got dtype {logits.dtype}")
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"{name} expects logits shaped (..., V) with V >= 1, got shape {tuple(logits.shape)}")


def _check_top_k(top_k) -> None:
    check_int("top_k", top_k, what="how many of the most likely tokens to keep")


def _check_top_p(top_p) -> None:
    if not is_number(top_p) or not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be a number in (0, 1] (the probability mass to keep), got {top_p!r}")


def _check_temperature(temperature) -> None:
    if not is_number(temperature) or not temperature >= 0.0:
        raise ValueError(f"temperature must be a number >= 0 (0 = greedy), got {temperature!r}")


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits along the last axis and set the others to -inf.

    After a softmax the removed tokens get probability 0 and the kept ones share all of it, in the
    same ratios as before. Tokens tied with the k-th largest are all kept. ``k >= V`` keeps everything.
    """
    _check_logits("top_k_filter", logits)
    _check_top_k(k)
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit of each row
    return logits.masked_fill(logits < kth, float("-inf"))  # (..., V)


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of most likely tokens whose probabilities add up to
    at least ``p``, and set the other logits to -inf.

    The probabilities are sorted from the largest down and added up; a token is kept if the tokens
    before it (strictly more likely, or earlier among ties) hold less than ``p``. So the most likely
    token is always kept, and ``p = 1`` keeps every token.
    """
    _check_logits("top_p_filter", logits)
    _check_top_p(p)
    if p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V), largest first
    probs = torch.softmax(sorted_logits.float(), dim=-1)  # (..., V)
    cum = probs.cumsum(dim=-1)  # (..., V): mass of this token and all more likely ones
    before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], dim=-1)  # (..., V): mass strictly before
    drop_sorted = before >= p  # (..., V): the tokens before already reach p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # (..., V): back in vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def next_token_probs(
    logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """The distribution a sampler draws from, shaped like ``logits`` ``(..., V)``.

    softmax(logits / temperature), after top-k and then top-p filtering. A temperature below 1
    sharpens the distribution (towards the most likely token), above 1 flattens it (towards uniform);
    ``temperature = 0`` is the limit: all the probability on the largest logit (greedy; the first
    one among ties, like ``argmax``), with top_k and top_p then irrelevant.
    """
    _check_logits("next_token_probs", logits)
    _check_temperature(temperature)
    if top_k is not None:
        _check_top_k(top_k)
    if top_p is not None:
        _check_top_p(top_p)
    if temperature == 0:
        best = logits.argmax(dim=-1, keepdim=True)  # (..., 1)
        return torch.zeros_like(logits, dtype=torch.float32).scatter(-1, best, 1.0)  # (..., V), one-hot
    logits = logits.float() / temperature  # (..., V)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.softmax(logits, dim=-1)  # (..., V)


def sample_next_token(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token id per row of ``logits`` ``(B, V)``: ``(B, 1)`` long, on the logits' device.

    Greedy (the argmax) for ``temperature = 0``, else one draw from `next_token_probs` with
    ``torch.multinomial``. A ``generator`` on another device than the logits (e.g. a CPU generator
    for a model on a GPU) is honoured by drawing on the generator's device, so one seed gives the
    same tokens everywhere.
    """
    _check_logits("sample_next_token", logits)
    if logits.ndim != 2:
        raise ValueError(f"sample_next_token expects logits shaped (B, V), got shape {tuple(logits.shape)}")
    if temperature == 0:
        _check_temperature(temperature)
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)  # (B, V)
    if generator is not None and probs.device != generator.device:
        probs = probs.to(generator.device)
    return torch.multinomial(probs, num_samples=1, generator=generator).to(logits.device)  # (B, 1)


@torch.no_grad()
def generate(
    model: nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    use_cache: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend each row of ``idx`` ``(B, T)`` by ``max_new_tokens`` tokens; returns ``(B, T + max_new_tokens)``.

    Each step runs the model on the context, keeps only the last position's logits, and picks the
    next token: greedily for ``temperature = 0``, otherwise by sampling from
    softmax(logits / temperature) after optional top-k and top-p filtering (`next_token_probs`),
    drawing from ``generator`` when one is given.

    The model is any module called as ``model(idx)`` that returns ``(B, T, V)`` logits or a tuple
    starting with them (like `models.GPT`). If it has a ``config.block_size`` (or ``block_size``),
    the context is cropped to its last ``block_size`` tokens.

    ``use_cache=True`` (for models with ``new_kv_cache()`` and a ``kv_cache=`` argument, like GPT)
    runs the prompt once and then feeds only each new token, reusing the cached keys and values of
    the earlier ones. It computes the same logits (up to float rounding) and so gives the same
    tokens for the same generator. A model with learned absolute positions cannot slide a cache:
    once the sequence is longer than ``block_size``, every position of the cropped window moves,
    so every key changes; from there on each step recomputes the window (exactly what
    ``use_cache=False`` does). Models without a cache are simply run without one.

    A model with relative (rotary) positions and attention bounded by a window declares
    ``rolling_cache = True`` (like `models.ModernGPT`): it is never cropped, since it reads a long
    sequence with its sliding window, and its cache rolls (keeps the keys its window still needs)
    instead of being rebuilt: with or without the cache, the same tokens at any length.

    The model runs in eval mode (no dropout) and without gradients; afterwards every submodule is
    back in the train/eval mode it had.
    """
    _check_generate(model, idx, max_new_tokens, temperature, top_k, top_p)
    idx = idx.long()
    if max_new_tokens == 0:
        return idx.clone()
    # A model with relative positions and a bounded window (``rolling_cache = True``, like ModernGPT)
    # takes the whole sequence and rolls its cache; one with absolute positions is cropped to block_size.
    rolls = getattr(model, "rolling_cache", False) is True
    block_size = None if rolls else _block_size(model)
    cache = model.new_kv_cache() if use_cache and hasattr(model, "new_kv_cache") else None
    with _eval_mode(model):
        logits = _last_logits(model, _window(idx, block_size), cache)  # (B, V); the prompt fills the cache
        for step in range(max_new_tokens):
            nxt = sample_next_token(
                logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator
            )  # (B, 1)
            idx = torch.cat([idx, nxt.to(idx.device)], dim=1)  # (B, T + step + 1)
            if step == max_new_tokens - 1:
                break  # the last token needs no logits after it
            if cache is not None and block_size is not None and idx.shape[1] > block_size:
                cache = None  # past block_size a cache of absolute positions is stale: recompute the window
            # With a cache only the new token goes in (the rest is cached); without, the whole window.
            logits = _last_logits(model, nxt if cache is not None else _window(idx, block_size), cache)  # (B, V)
    return idx


@contextlib.contextmanager
def _eval_mode(model: nn.Module):
    """Run the block with `model` in eval mode (dropout off), then put every submodule back in the
    train/eval mode it had (even a model whose parts were in different modes)."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, mode in modes:
            module.training = mode


def _block_size(model: nn.Module) -> int | None:
    """The longest context the model takes: ``model.config.block_size`` or ``model.block_size``."""
    size = getattr(getattr(model, "config", None), "block_size", None)
    if size is None:
        size = getattr(model, "block_size", None)
    return size


def _window(idx: torch.Tensor, block_size: int | None) -> torch.Tensor:
    return idx if block_size is None else idx[:, -block_size:]  # (B, <= block_size): the context the model sees


def _last_logits(model: nn.Module, tokens: torch.Tensor, cache: list | None) -> torch.Tensor:
    """The model's logits for the token after the last of `tokens` (B, T): (B, V)."""
    out = model(tokens) if cache is None else model(tokens, kv_cache=cache)
    logits = out[0] if isinstance(out, (tuple, list)) else out  # GPT returns (logits, loss)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        got = f"shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"the model must return logits shaped (B, T, V) (or a tuple that starts with them), got {got}")
    return logits[:, -1, :]  # (B, V): only the last position's distribution is used


def _check_generate(model, idx, max_new_tokens, temperature, top_k, top_p) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if (
        not isinstance(idx, torch.Tensor)
        or idx.dtype.is_floating_point
        or idx.dtype.is_complex
        or idx.dtype == torch.bool
    ):
        got = f"dtype {idx.dtype}" if isinstance(idx, torch.Tensor) else type(idx).__name__
        raise TypeError(f"idx must be a tensor of integer token ids shaped (B, T), got {got}")
    if idx.ndim != 2 or idx.shape[1] == 0:
        hint = "; for a single prompt use idx[None]" if idx.ndim == 1 else ""
        raise ValueError(
            f"idx must be shaped (B, T) with at least one token per row, got shape {tuple(idx.shape)}{hint}"
        )
    check_int("max_new_tokens", max_new_tokens, minimum=0)
    _check_temperature(temperature)
    if top_k is not None:
        _check_top_k(top_k)
    if top_p is not None:
        _check_top_p(top_p)


# ================================================================================================
# Sequence-to-sequence decoding
# ================================================================================================
#
# An encoder-decoder (`models.Seq2SeqTransformer`) encodes the source ONCE, then writes the target
# one token at a time: the decoder sees <bos> plus everything written so far, and its last position's
# distribution gives the next token. Training never does this (teacher forcing feeds the true
# target); decoding must, because the true target is what we are trying to find.
#
# - greedy: take the most likely token at every step. Fast, but a choice that looks best now can
#   force worse words later.
# - beam search: keep the `beam_size` best partial translations by total log-probability, extend
#   each by every token, keep the best `beam_size` again; a finished hypothesis (<eos>) stays as it
#   is. With beam_size=1 it is greedy.
#
# The model must offer `encode(src) -> memory` and `decode(tgt_in, memory, src) -> logits` and a
# `config` with `bos_id`, `eos_id`, `pad_id` and `max_len` (as `Seq2SeqTransformer` does).
#
# Caching (`use_cache=True`, the default, for models that offer `memory_keys_values`,
# `new_decoder_cache` and `decode(..., memory_kv=, cache=)` as `Seq2SeqTransformer` does): the memory
# does not change while a target is written, so neither do the keys and values that cross-attention
# projects from it: they are computed once per source. And the decoder's own keys and values of
# the tokens already written never change either (causal attention), so they are kept in a KV cache
# (lesson 11) and each step runs the decoder on the one new token only. The same logits, less work.


def _seq2seq_ids(model: nn.Module, src) -> tuple[int, int, int, int]:
    config = getattr(model, "config", None)
    missing = [n for n in ("bos_id", "eos_id", "pad_id", "max_len") if not hasattr(config, n)]
    if missing or not hasattr(model, "encode") or not hasattr(model, "decode"):
        raise TypeError(
            "seq2seq decoding needs a model with encode(src), decode(tgt_in, memory, src) and a config with "
            f"bos_id, eos_id, pad_id, max_len (like models.Seq2SeqTransformer); got {type(model).__name__}"
        )
    if not isinstance(src, torch.Tensor) or src.ndim != 2 or src.is_floating_point():
        got = f"shape {tuple(src.shape)}, dtype {src.dtype}" if isinstance(src, torch.Tensor) else type(src).__name__
        raise ValueError(f"src must be a (B, S) tensor of source token ids, got {got}")
    return config.bos_id, config.eos_id, config.pad_id, config.max_len


def _check_max_len(max_len, limit: int) -> int:
    if max_len is None:
        return limit
    if not is_int(max_len) or not 1 <= max_len <= limit:
        raise ValueError(
            f"max_len must be an int from 1 to the model's max_len={limit} (tokens after <bos>), got {max_len!r}"
        )
    return max_len


def _caches(model: nn.Module, memory: torch.Tensor, use_cache: bool) -> tuple[list | None, list | None]:
    """(each decoder layer's cross-attention keys and values of the memory, an empty decoder KV cache),
    or (None, None) without caching: then every step recomputes both."""
    if not isinstance(use_cache, bool):
        raise TypeError(f"use_cache must be True or False, got {use_cache!r}")
    if not use_cache or not (hasattr(model, "memory_keys_values") and hasattr(model, "new_decoder_cache")):
        return None, None
    return model.memory_keys_values(memory), model.new_decoder_cache()


def _next_logits(
    model: nn.Module, tokens: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, memory_kv, cache
) -> torch.Tensor:
    """The last position's logits (B, V) for the prefixes `tokens` (B, t)."""
    if cache is None:
        return model.decode(tokens, memory, src)[:, -1]  # (B, V): the whole prefix, every step
    # Only the newest token: the earlier ones' keys and values are in the cache.
    return model.decode(tokens[:, len(cache[0]) :], memory, src, memory_kv=memory_kv, cache=cache)[:, -1]  # (B, V)


def _never_bos_or_pad(logp: torch.Tensor, bos: int, pad: int) -> torch.Tensor:
    """Rule out <bos> and <pad> as next tokens (they are never targets). The other tokens keep their
    log-probabilities under the full softmax, so scores agree with `sequence_log_prob`."""
    logp = logp.clone()
    logp[..., [bos, pad]] = float("-inf")
    return logp  # (..., V)


@torch.no_grad()
def greedy_decode(
    model: nn.Module, src: torch.Tensor, max_len: int | None = None, *, use_cache: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding of a batch of sources.

    Returns ``(tokens, log_prob)``: tokens ``(B, 1 + L)`` start with <bos>, hold each sentence's
    tokens up to and including its <eos>, then <pad>; ``L <= max_len`` (default: the model's
    max_len - 1, so that <bos> + tokens fit its position table). log_prob ``(B,)`` is the sum of the
    chosen tokens' log-probabilities (<eos> included). The source is encoded once; with
    ``use_cache`` the cross-attention keys and values of the memory are computed once too, and the
    decoder's own in a KV cache (the same result, faster). The model's train/eval mode is restored.
    """
    bos, eos, pad, limit = _seq2seq_ids(model, src)
    max_len = _check_max_len(max_len, limit - 1)
    with _eval_mode(model):
        memory = model.encode(src)  # (B, S, C): the source is encoded once
        memory_kv, cache = _caches(model, memory, use_cache)  # keys and values computed once, kept
        B = src.shape[0]
        tokens = torch.full((B, 1), bos, dtype=torch.long, device=src.device)  # (B, 1)
        log_prob = torch.zeros(B, device=src.device)  # (B,)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        for _ in range(max_len):
            logits = _next_logits(model, tokens, memory, src, memory_kv, cache)  # (B, V): the last position
            logp = torch.log_softmax(logits.float(), dim=-1)  # (B, V)
            best = _never_bos_or_pad(logp, bos, pad).argmax(dim=-1)  # (B,)
            log_prob += torch.where(done, 0.0, logp.gather(1, best[:, None])[:, 0])  # (B,)
            best = torch.where(done, pad, best)  # finished sentences only get padding
            tokens = torch.cat([tokens, best[:, None]], dim=1)  # (B, t + 1)
            done |= best == eos
            if bool(done.all()):
                break
    return tokens, log_prob


@torch.no_grad()
def beam_search(
    model: nn.Module,
    src: torch.Tensor,
    beam_size: int = 4,
    max_len: int | None = None,
    *,
    length_penalty: float = 0.0,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Beam search over a batch of sources; returns the best hypothesis of each, like `greedy_decode`.

    Every step extends each of the ``beam_size`` hypotheses of a source by every token and keeps the
    ``beam_size`` highest totals of log-probability. A finished hypothesis (one that has produced
    <eos>) stays IN the beam, carried along unchanged, where it keeps a slot from the unfinished
    ones; many implementations set finished hypotheses aside instead and keep ``beam_size``
    unfinished ones running. At the end the best finished hypothesis wins, ranked by
    ``log_prob / length ** length_penalty`` (0 = the raw sum, which favours short sentences; about
    0.6-1.0 is common for natural languages). Returns ``(tokens (B, 1 + L), log_prob (B,))`` with
    the raw log-probability of the returned tokens.

    Each source is encoded once and its memory repeated for its ``beam_size`` hypotheses; with
    ``use_cache`` the cross-attention keys and values are computed once per source as well, and the
    decoder's own are kept in a KV cache that follows each hypothesis's parent (the same result,
    faster). The model's train/eval mode is restored.
    """
    bos, eos, pad, limit = _seq2seq_ids(model, src)
    max_len = _check_max_len(max_len, limit - 1)
    check_int("beam_size", beam_size)
    if not is_number(length_penalty) or length_penalty < 0:
        raise ValueError(f"length_penalty must be a number >= 0, got {length_penalty!r}")
    with _eval_mode(model):
        B, K, device = src.shape[0], beam_size, src.device
        memory = model.encode(src)  # (B, S, C): once per source, not once per hypothesis
        memory_kv, cache = _caches(model, memory, use_cache)  # per layer (k, v), (B, n_heads, S, head_dim)
        # Every hypothesis carries its source: K copies of each row (copied, not computed again).
        src_k, memory = src.repeat_interleave(K, dim=0), memory.repeat_interleave(K, dim=0)  # (B*K, S), (B*K, S, C)
        if memory_kv is not None:
            memory_kv = [(k.repeat_interleave(K, dim=0), v.repeat_interleave(K, dim=0)) for k, v in memory_kv]
        tokens = torch.full((B * K, 1), bos, dtype=torch.long, device=device)  # (B*K, 1)
        scores = torch.full((B, K), float("-inf"), device=device)  # (B, K)
        scores[:, 0] = 0.0  # one live hypothesis per source at first (K copies would tie)
        done = torch.zeros(B, K, dtype=torch.bool, device=device)  # (B, K)
        lengths = torch.zeros(B, K, device=device)  # (B, K) tokens after <bos>, <eos> included
        for _ in range(max_len):
            logits = _next_logits(model, tokens, memory, src_k, memory_kv, cache)  # (B*K, V)
            V = logits.shape[-1]
            logp = _never_bos_or_pad(torch.log_softmax(logits.float(), dim=-1), bos, pad).view(B, K, V)  # (B, K, V)
            # A finished hypothesis may only be extended by <pad>, at no cost: it stays one candidate.
            finished = torch.full((V,), float("-inf"), device=device)
            finished[pad] = 0.0
            logp = torch.where(done[..., None], finished, logp)  # (B, K, V)
            candidates = (scores[..., None] + logp).view(B, K * V)  # (B, K*V)
            scores, flat = candidates.topk(K, dim=-1)  # (B, K) best totals and where they came from
            parent, token = flat // V, flat % V  # (B, K) which hypothesis, which new token
            rows = (parent + torch.arange(B, device=device)[:, None] * K).view(-1)  # (B*K,) rows of `tokens`
            tokens = torch.cat([tokens[rows], token.view(-1, 1)], dim=1)  # (B*K, t + 1)
            for layer_cache in cache or []:  # each new hypothesis continues its parent's cached keys and values
                layer_cache.k, layer_cache.v = layer_cache.k[rows], layer_cache.v[rows]
            was_done = done.gather(1, parent)  # (B, K)
            lengths = lengths.gather(1, parent) + (~was_done).float()
            done = was_done | (token == eos)
            if bool(done.all()):
                break
        # Rank: finished hypotheses first, then by the (optionally length-normalised) score.
        rank = scores / lengths.clamp(min=1) ** length_penalty if length_penalty else scores.clone()
        rank = torch.where(done, rank, rank - 1e9)  # (B, K): an unfinished one wins only if none finished
        best = rank.argmax(dim=-1)  # (B,)
        rows = best + torch.arange(B, device=device) * K  # (B,)
        return tokens[rows], scores.gather(1, best[:, None])[:, 0]


@torch.no_grad()
def sequence_log_prob(model: nn.Module, src: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The log-probability ``(B,)`` the model gives to whole target sequences, by teacher forcing.

    tokens ``(B, 1 + L)``: <bos>, the target ids, <eos>, then <pad> (as the decoders return them);
    the sum runs over every token after <bos> up to and including the first <eos> (padding adds nothing).
    """
    bos, eos, pad, _ = _seq2seq_ids(model, src)
    with _eval_mode(model):
        logits = model(src, tokens[:, :-1])  # (B, L, V): position t predicts tokens[:, t + 1]
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, tokens[:, 1:, None])[..., 0]  # (B, L)
        real = tokens[:, 1:] != pad  # (B, L)
        return (logp * real).sum(dim=1)  # (B,)
