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

import torch
import torch.nn as nn


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
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int (how many of the most likely tokens to keep), got {top_k!r}")


def _check_top_p(top_p) -> None:
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be a number in (0, 1] (the probability mass to keep), got {top_p!r}")


def _check_temperature(temperature) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0.0:
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


def _block_size(model: nn.Module) -> int | None:
    """The longest context the model takes: ``model.config.block_size`` or ``model.block_size``."""
    size = getattr(getattr(model, "config", None), "block_size", None)
    if size is None:
        size = getattr(model, "block_size", None)
    return size


def _last_logits(out) -> torch.Tensor:
    logits = out[0] if isinstance(out, (tuple, list)) else out  # GPT returns (logits, loss)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        got = f"shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"the model must return logits shaped (B, T, V) (or a tuple that starts with them), got {got}")
    return logits[:, -1, :]  # (B, V): only the last position's distribution is used


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

    The model runs in eval mode (no dropout) and without gradients; afterwards every submodule is
    back in the train/eval mode it had.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(idx, torch.Tensor) or idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        got = f"dtype {idx.dtype}" if isinstance(idx, torch.Tensor) else type(idx).__name__
        raise TypeError(f"idx must be a tensor of integer token ids shaped (B, T), got {got}")
    if idx.ndim != 2 or idx.shape[1] == 0:
        hint = "; for a single prompt use idx[None]" if idx.ndim == 1 else ""
        raise ValueError(f"idx must be shaped (B, T) with at least one token per row, got shape {tuple(idx.shape)}{hint}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    _check_temperature(temperature)
    if top_k is not None:
        _check_top_k(top_k)
    if top_p is not None:
        _check_top_p(top_p)
    idx = idx.long()
    if max_new_tokens == 0:
        return idx.clone()

    block_size = _block_size(model)
    modes = [(module, module.training) for module in model.modules()]  # restored exactly at the end
    model.eval()
    try:
        def window(seq: torch.Tensor) -> torch.Tensor:
            return seq if block_size is None else seq[:, -block_size:]  # (B, <= block_size)

        cache = model.new_kv_cache() if use_cache and hasattr(model, "new_kv_cache") else None
        if cache is not None:
            logits = _last_logits(model(window(idx), kv_cache=cache))  # (B, V): the prompt fills the cache
        else:
            logits = _last_logits(model(window(idx)))  # (B, V)
        for step in range(max_new_tokens):
            nxt = sample_next_token(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)  # (B, 1)
            idx = torch.cat([idx, nxt.to(idx.device)], dim=1)  # (B, T + step + 1)
            if step == max_new_tokens - 1:
                break  # the last token needs no logits after it
            if cache is not None and (block_size is None or idx.shape[1] <= block_size):
                logits = _last_logits(model(nxt, kv_cache=cache))  # (B, V): one new token, the rest cached
            else:
                cache = None  # past block_size a cache of absolute positions is stale: recompute the window
                logits = _last_logits(model(window(idx)))  # (B, V)
    finally:
        for module, mode in modes:
            module.training = mode
    return idx
