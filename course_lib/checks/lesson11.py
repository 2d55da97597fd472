"""Checks for the lesson 11 exercises (a GPT): reference functions, mistake tables and one check per
exercise.

The learner's functions are treated as black boxes: they are called with plain tensors and only
what they return is looked at.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .core import (CheckFailed, NotAttempted, _short, _to_array, call, check_all, check_close, check_sealed, check_shape,
                   check_tensor, check_true, passed)

NEG = float("-inf")


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- sealed answers ---------------------------------------------------------------------------------
# Answers worked out by hand (exercises 1, 5 and 6) and the values of the mistakes their hints name,
# kept as seals (see core.seal): name -> (decimals, seal of the answer, {mistake: seal of its value}).
_SEALED = {
    "loss_gpt2": (3, "c9fbe69233455144ab0d", {
        "used log base 10: the cross-entropy is measured in nats, with the natural log (math.log)": "5d47fbebdd42e9085cf9",
        "used log base 2 (bits): the loss in this course is in nats, with the natural log (math.log)": "7994d69297dc72bcbbd1",
        "gave the probability of the right token, 1/V: the loss is its negative log": "866678aa70f0f6386b3f",
        "forgot the minus sign: -log(1/V) = log(V) is positive": "dc3ba134c0d73fe2d27e",
    }),
    "loss_spiky": (3, "ea6748366a5d61a1cd7b", {
        "left out the spike: the denominator holds e^10 for the wrong token plus 999 terms e^0": "dcd6e4420f1c9b570ad3",
        "kept only the spike in the denominator: the 999 other tokens, the right one included, add e^0 = 1 each": "91b7337b09630bc1d18c",
        "computed the loss of the spiked (wrong) token: the loss is -log p of the RIGHT token, whose logit is 0": "dbdceaba6d806e1b6e23",
        "used log base 10: the cross-entropy is measured in nats, with the natural log": "4375f1fc652f0315a9b5",
    }),
    "n_params": (None, "239bc893dc99cb10b527", {
        "forgot the position table (block_size × C)": "1a26bf8aeed345a1a569",
        "left out the de-embedding: this model does not tie it, so it is a second V × C matrix": "6dd4a32a79dba1511894",
        "forgot the biases (4C in attention, 4C + C in the FFN, C in each LayerNorm)": "27ed246ec8a9c654a4aa",
        "forgot the biases of the Linear layers (4C in attention, 4C + C in the FFN)": "b30088e9908bf936bdc0",
        "forgot the LayerNorms (two per block and a final one, each a gain and a bias of C)": "13f449d6417859a5d4d6",
        "counted one FFN matrix: the FFN has two, C × 4C and 4C × C": "7ab47c31db7621dfc860",
        "gave every head its own C × C projections: the heads split C, so attention is 4C² whatever the heads": "c93c2117ac19c6b1aaba",
        "counted one block: there are n_layer = 3, each with its own weights": "7916379bf9ecfd0d2c64",
    }),
    "n_params_tied": (None, "5027030ac65a131447a4", {
        "counted the de-embedding: tied, it IS the token embedding, so it adds nothing": "aeccec53d4be2f955f69",
        "kept the biases: with bias=False no Linear and no LayerNorm has one": "d95eec58f62c9579b201",
        "dropped the LayerNorms: without a bias each still has its gain of C": "b696d5fc03409eee4cf1",
        "forgot the position table (block_size × C)": "2116e2608275e338dba0",
    }),
    "cheat_reason": (None, "35589688efc8c9e40afc", {
        "chose (a): a learning rate that is too high makes the loss jump or blow up, it does not make the model "
        "nearly certain of every next character": "8214ac41ff47cc17fdc8",
        "chose (c): 0.2 million parameters cannot memorise a million characters, and memorising would show as a "
        "validation loss far above the training loss, not both near zero": "b5df19eb337559d9b9dd",
        "chose (d): an overflow gives inf or NaN, not a small loss": "e4da3bff4ecb3c691b17",
    }),
}


def _sealed(name: str, value: Any, kind: str = "number", hint: str | None = None) -> None:
    decimals, answer, mistakes = _SEALED[name]
    check_sealed(name, value, answer, decimals=decimals, mistakes=mistakes, hint=hint, kind=kind)


# --- exercise 1: the loss at initialisation ---------------------------------------------------------


def check_init_loss(loss_gpt2: Any, loss_spiky: Any) -> None:
    """Exercise 1: the cross-entropy of a uniform guess over GPT-2's vocabulary, and of one spiked wrong logit."""
    check_all(
        lambda: _sealed("loss_gpt2", loss_gpt2,
                        hint="near-equal logits give every token probability 1/V; the loss is -log(1/V), natural log"),
        lambda: _sealed("loss_spiky", loss_spiky,
                        hint="p(right) = e^0 / (e^10 + 999 · e^0) with 1000 tokens in all; the loss is -log p(right)"),
    )


# --- exercise 2: top-k filtering ----------------------------------------------------------------------


def reference_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (last axis), the others -inf."""
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, NEG)


def _top_k_mistakes(logits: torch.Tensor, k: int) -> dict[str, torch.Tensor]:
    V = logits.shape[-1]
    out = {}
    if k + 1 <= V:
        out["kept k + 1 tokens, one too many: the k-th largest logit itself is the smallest one kept"] = reference_top_k(logits, k + 1)
    if k >= 2:
        kth = torch.topk(logits, min(k, V), dim=-1).values[..., -1:]
        out["kept only k - 1 tokens (for example `logits <= kth` removes the k-th largest too): keep every logit "
            ">= the k-th largest"] = logits.masked_fill(logits <= kth, NEG)
    kth = torch.topk(logits, min(k, V), dim=-1).values[..., -1:]
    out["set the removed logits to 0: a logit of 0 still gets probability e^0 / Σ after the softmax; set them to "
        "-inf (float('-inf'))"] = logits.masked_fill(logits < kth, 0.0)
    out["returned probabilities (a softmax) instead of logits: return the filtered logits, the sampler applies the "
        "softmax"] = torch.softmax(reference_top_k(logits, k), dim=-1)
    out["returned the logits sorted from the largest down: every logit must stay at its own index (its token id)"] = (
        torch.sort(reference_top_k(logits, k), dim=-1, descending=True).values)
    if logits.ndim > 1:
        flat = logits.reshape(-1)
        kth_all = torch.topk(flat, min(k, flat.numel())).values[-1]
        out["took the k largest of the whole tensor instead of each row's own k (work along dim=-1)"] = (
            logits.masked_fill(logits < kth_all, NEG))
    return out


def _top_k_cases(hidden: bool) -> list[tuple[torch.Tensor, int]]:
    g = _generator(11)
    cases = [
        (torch.tensor([0.3, 2.0, -1.0, 1.2, 0.9, -0.4]), 3),
        (torch.randn(4, 10, generator=g), 2),
        (torch.tensor([[1.5, -0.5, 0.25], [0.0, 3.0, -2.0]]), 5),  # k larger than V keeps everything
    ]
    if hidden:
        cases += [
            (torch.randn(2, 3, 17, generator=g) * 3, 4),
            (torch.randn(1, 50, generator=g), 1),
            (torch.tensor([-3.0, -1.0, -2.0, -0.5]), 4),
        ]
    return cases


def _filter_check(name: str, fn: Callable, cases: Sequence[tuple[torch.Tensor, Any]], reference: Callable,
                  mistakes: Callable, arg: str, hint: str) -> None:
    for logits, value in cases:
        given = logits.clone()
        shown = f"{name}({_short(logits, 40)}, {arg}={value})"
        try:
            got = call(name, fn, given, value)
        except NotAttempted:
            raise
        except CheckFailed as err:
            crash_hint = hint
            if arg == "k" and value >= logits.shape[-1] and "out of range" in err.problem:
                crash_hint = (f"k = {value} is at least the number of logits in a row ({logits.shape[-1]}): then nothing "
                              "is removed, as the prompt says; torch.topk needs k <= V, so use min(k, V)")
            raise CheckFailed(err.name, f"{err.problem}", crash_hint) from None
        check_tensor(name, got, f"when called as {shown}")
        if not torch.equal(given, logits):
            raise CheckFailed(name, f"the logits passed in were changed (when called as {shown}).",
                              "work on a copy: `logits.masked_fill(...)` returns a new tensor, `masked_fill_` (with the "
                              "underscore) changes the input, which belongs to the caller")
        if got.shape[:-1] == logits.shape[:-1] and got.shape[-1] != logits.shape[-1]:
            raise CheckFailed(name, f"expected shape {tuple(logits.shape)} (like the logits), got {tuple(got.shape)} "
                              f"when called as {shown}.",
                              "return a tensor shaped like the logits, the removed entries set to -inf, not only the kept "
                              "values (torch.topk(...).values are sorted and have lost their token ids)")
        want = reference(logits, value)
        check_close(shown, got.detach().to(torch.float64), want.to(torch.float64), atol=1e-6, rtol=1e-6,
                    mistakes=mistakes(logits, value), hint=hint, quiet=True)
    passed(name, f"{len(cases)} cases")


def check_top_k(fn: Callable, *, hidden: bool = False, name: str = "top_k_filter") -> None:
    """Exercise 2: the learner's top_k_filter(logits, k) against the reference, naming the usual mistakes."""
    _filter_check(name, fn, _top_k_cases(hidden), reference_top_k, _top_k_mistakes, "k",
                  "find each row's k-th largest logit (torch.topk(logits, k, dim=-1).values[..., -1:]) and set every "
                  "logit below it to -inf; keep the shape and the order of the logits")


# --- exercise 3: top-p (nucleus) filtering --------------------------------------------------------------


def reference_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probabilities add up to at least p."""
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.to(torch.float64), dim=-1)
    before = probs.cumsum(-1) - probs  # mass of the more likely tokens
    drop_sorted = before >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, NEG)


def _top_p_mistakes(logits: torch.Tensor, p: float) -> dict[str, torch.Tensor]:
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs_sorted = torch.softmax(sorted_logits.to(torch.float64), dim=-1)
    cum_sorted = probs_sorted.cumsum(-1)

    def back(drop_sorted):
        return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), NEG)

    probs = torch.softmax(logits.to(torch.float64), dim=-1)
    cum_unsorted = probs.cumsum(-1)
    return {
        "added up the probabilities in vocabulary order: sort them from the largest down first "
        "(torch.sort(..., descending=True)) so that the most likely tokens are kept": logits.masked_fill(cum_unsorted - probs >= p, NEG),
        "dropped the token whose probability makes the total reach p, so the kept tokens hold less than p: keep a "
        "token while the mass BEFORE it (cumsum minus its own probability) is below p": back(cum_sorted >= p),
        "applied a mask made in sorted order to the unsorted logits: send it back to the token ids first, e.g. "
        "`drop = drop_sorted.scatter(-1, order, drop_sorted)`": logits.masked_fill((cum_sorted - probs_sorted) >= p, NEG),
        "added up the logits instead of probabilities: apply the softmax first": back(sorted_logits.cumsum(-1) - sorted_logits >= p),
        "set the removed logits to 0 instead of -inf: a logit of 0 can still be sampled": logits.masked_fill(
            ((cum_sorted - probs_sorted) >= p).scatter(-1, order, (cum_sorted - probs_sorted) >= p), 0.0),
        "returned the logits sorted from the largest down: every logit must stay at its own index (its token id)":
            torch.sort(reference_top_p(logits, p), dim=-1, descending=True).values,
        "returned probabilities instead of logits: return the filtered logits": torch.softmax(reference_top_p(logits, p), dim=-1),
    }


def _top_p_cases(hidden: bool) -> list[tuple[torch.Tensor, float]]:
    # Probabilities 0.05, 0.5, 0.15, 0.3 in vocabulary order (unsorted on purpose); no p sits on a partial sum.
    unsorted = torch.tensor([0.05, 0.5, 0.15, 0.3]).log() + 1.0
    g = _generator(12)
    cases = [
        (unsorted, 0.7),  # 0.5 + 0.3 = 0.8 >= 0.7: two tokens
        (unsorted, 0.85),  # 0.5 + 0.3 + 0.15: three tokens
        (torch.stack([unsorted, unsorted.flip(0)]), 0.4),  # each row keeps its own top token
        (torch.randn(3, 9, generator=g) * 2, 0.9),
    ]
    if hidden:
        cases += [
            (unsorted, 1.0),  # everything
            (torch.randn(2, 2, 30, generator=g) * 3, 0.6),
            (torch.randn(5, 12, generator=g), 0.95),
            (torch.tensor([4.0, -1.0, 0.0, 1.0, 2.5]), 0.05),
        ]
    return cases


def check_top_p(fn: Callable, *, hidden: bool = False, name: str = "top_p_filter") -> None:
    """Exercise 3: the learner's top_p_filter(logits, p) against the reference, naming the usual mistakes."""
    _filter_check(name, fn, _top_p_cases(hidden), reference_top_p, _top_p_mistakes, "p",
                  "sort the logits (descending), softmax, cumsum; a token is kept while the mass before it is below p; "
                  "send the mask back to the token order and set the dropped logits to -inf")


# --- exercise 4: one KV-cache step ----------------------------------------------------------------------


def reference_kv_step(x, W_q, W_k, W_v, K_cache, V_cache):
    """One decoding step of single-head attention with a cache: (out (d,), K (t+1, d), V (t+1, d))."""
    d = x.shape[-1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v  # (d,) each
    K = torch.cat([K_cache, k[None]], dim=0)  # (t + 1, d)
    V = torch.cat([V_cache, v[None]], dim=0)
    w = torch.softmax(K @ q / math.sqrt(d), dim=0)  # (t + 1,)
    return w @ V, K, V


def _kv_mistakes(x, W_q, W_k, W_v, K_cache, V_cache) -> dict[str, torch.Tensor]:
    """The output each classic mistake gives (those that run on these shapes)."""
    d = x.shape[-1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    K, V = torch.cat([K_cache, k[None]]), torch.cat([V_cache, v[None]])
    out = {
        "forgot to divide the scores by sqrt(d)": torch.softmax(K @ q, 0) @ V,
        "divided the scores by d instead of sqrt(d)": torch.softmax(K @ q / d, 0) @ V,
        "stored x itself in the cache instead of its key and value (x @ W_k and x @ W_v)": (
            torch.softmax(torch.cat([K_cache, x[None]]) @ q / math.sqrt(d), 0) @ torch.cat([V_cache, x[None]])),
        "used the new token's key and value only: the query must meet every cached key too": v,
    }
    if len(K_cache) > 0:
        out["attended to the cache before adding the new token's key and value: the new token may also attend to "
            "itself"] = torch.softmax(K_cache @ q / math.sqrt(d), 0) @ V_cache
    return out


def _kv_cases(hidden: bool) -> list[tuple[torch.Tensor, ...]]:
    g = _generator(13)
    cases = []
    for t, d in [(3, 4), (1, 8)] + ([(6, 5), (10, 16), (0, 4)] if hidden else [(0, 4)]):
        x = torch.randn(d, generator=g)
        W = [torch.randn(d, d, generator=g) / math.sqrt(d) for _ in range(3)]
        cases.append((x, *W, torch.randn(t, d, generator=g), torch.randn(t, d, generator=g)))
    return cases


def check_kv_step(fn: Callable, *, hidden: bool = False, name: str = "kv_step") -> None:
    """Exercise 4: the learner's kv_step(x, W_q, W_k, W_v, K_cache, V_cache) -> (out, K_cache, V_cache)."""
    cases = _kv_cases(hidden)
    for args in cases:
        t, d = args[4].shape
        where = f"with a cache of {t} position{'s' if t != 1 else ''}, d = {d}"
        got = call(name, fn, *[a.clone() for a in args])
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise CheckFailed(name, f"expected a tuple (out, K_cache, V_cache), got {_short(got)} ({where}).",
                              "end with `return out, K_cache, V_cache`, the caches with the new row added")
        out, K, V = got
        for part, value in (("out", out), ("K_cache", K), ("V_cache", V)):
            check_tensor(name, value, f"for {part} ({where})")
        want_out, want_K, want_V = reference_kv_step(*args)
        for part, value, want in (("K_cache", K, want_K), ("V_cache", V, want_V)):
            if tuple(value.shape) == (t, d):
                raise CheckFailed(name, f"the returned {part} still has {t} rows ({where}).",
                                  "append the new token's row: torch.cat([cache, new[None]], dim=0) has t + 1 rows")
            if tuple(value.shape) != (t + 1, d):
                raise CheckFailed(name, f"the returned {part} has shape {tuple(value.shape)}, expected {(t + 1, d)} ({where}).",
                                  "a cache holds one row per position: add the new row along dim 0 (positions), "
                                  "not along the features")
            if t > 0 and torch.allclose(value.double(), torch.cat([want[-1:], want[:-1]]).double(), atol=1e-5):
                raise CheckFailed(name, f"the new row of {part} is at the start ({where}).",
                                  "put the newest position at the END of the cache, after the older ones")
            check_close(f"{name} {part} ({where})", value.detach().double(), want.double(), atol=1e-5, quiet=True,
                        hint=f"the new row of {part} is x @ W_{part[0].lower()}, appended after the cached rows")
        check_shape(f"{name} out ({where})", out, (d,))
        check_close(f"{name} out ({where})", out.detach().double(), want_out.double(), atol=1e-5, quiet=True,
                    mistakes={k: v.double() for k, v in _kv_mistakes(*args).items()},
                    hint="q = x @ W_q; weights = softmax(K_cache @ q / sqrt(d)) over all t + 1 cached positions, "
                         "the new one included; out = weights @ V_cache")
    passed(name, f"{len(cases)} cases")


def check_kv_matches_causal_attention(fn: Callable, name: str = "kv_step (a whole sequence)", T: int = 7, d: int = 6) -> None:
    """Feeding a sequence one token at a time through the learner's kv_step, from empty caches, must give
    exactly causal self-attention over the whole sequence."""
    g = _generator(14)
    X = torch.randn(T, d, generator=g)
    W_q, W_k, W_v = (torch.randn(d, d, generator=g) / math.sqrt(d) for _ in range(3))
    K, V = torch.zeros(0, d), torch.zeros(0, d)
    outs = []
    for t in range(T):
        got = call(name, fn, X[t].clone(), W_q, W_k, W_v, K, V)
        check_true(name, isinstance(got, (tuple, list)) and len(got) == 3, "expected a tuple (out, K_cache, V_cache).")
        out, K, V = got
        outs.append(out)
    Q, Kf, Vf = X @ W_q, X @ W_k, X @ W_v
    scores = (Q @ Kf.T / math.sqrt(d)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), NEG)
    check_close(name, torch.stack(outs).detach().double(), (torch.softmax(scores, -1) @ Vf).double(), atol=1e-5, quiet=True,
                hint="step t must attend to positions 0..t: the cached ones and itself")
    passed(name, f"{T} steps equal causal self-attention")


# --- exercise 5: counting parameters -------------------------------------------------------------------


def check_param_count(n_params: Any, n_params_tied: Any) -> None:
    """Exercise 5: the parameters of two configurations, counted by hand."""
    hint = ("add up: token embedding V·C, position table block_size·C, per block 4C² + 8C² weights (+ 4C + 5C biases) "
            "and two LayerNorms (gain C each, + bias C each), a final LayerNorm, and the de-embedding V·C unless tied")
    check_all(
        lambda: _sealed("n_params", n_params, hint=hint),
        lambda: _sealed("n_params_tied", n_params_tied,
                        hint="without biases every Linear and LayerNorm loses its bias (a LayerNorm keeps its gain), "
                             "and a tied de-embedding adds nothing"),
    )


# --- exercise 6: the model that cheats ----------------------------------------------------------------


def check_cheat_reason(value: Any) -> None:
    """Exercise 6, part 1: why the loss is impossibly low (a letter)."""
    if isinstance(value, str):
        value = value.strip().strip("()").lower()
    _sealed("cheat_reason", value, kind="text",
            hint="ask which line lets position t see the character it is asked to predict")


def reference_causal_attention(x: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, W_v: torch.Tensor) -> torch.Tensor:
    T, d = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = (q @ k.T / math.sqrt(d)).masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), NEG)
    return torch.softmax(scores, dim=-1) @ v


def _causal_mistakes(x, W_q, W_k, W_v) -> dict[str, torch.Tensor]:
    T, d = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.T / math.sqrt(d)
    lower = torch.ones(T, T, dtype=torch.bool).tril()
    w = torch.softmax(s, -1)
    out = {
        "left the attention without a mask: that is the bug": w @ v,
        "masked after the softmax: the kept weights no longer sum to 1; fill the scores with -inf before the softmax":
            w.masked_fill(~lower, 0.0) @ v,
        "masked by multiplying the scores by 0: a score of 0 still gets weight e^0; fill with -inf":
            torch.softmax(s * lower, -1) @ v,
        "kept the upper triangle (triu): position t must see 0..t, the past, not the future":
            torch.softmax(s.masked_fill(~torch.ones(T, T, dtype=torch.bool).triu(), NEG), -1) @ v,
    }
    if T > 1:
        strict = torch.ones(T, T, dtype=torch.bool).tril(-1)
        ws = torch.softmax(s.masked_fill(~strict, NEG), -1)
        out["masked the diagonal too: a position may attend to itself (without it the first row has nothing to attend "
            "to)"] = torch.nan_to_num(ws) @ v
    return out


def check_self_attention(fn: Callable, *, hidden: bool = False, name: str = "self_attention") -> None:
    """Exercise 6, part 2: the fixed, causal self-attention."""
    g = _generator(15)
    sizes = [(5, 4), (8, 6)] + ([(1, 3), (12, 8), (20, 4)] if hidden else [])
    for T, d in sizes:
        x = torch.randn(T, d, generator=g)
        W = [torch.randn(d, d, generator=g) for _ in range(3)]
        got = call(name, fn, x.clone(), *W)
        check_tensor(name, got, f"for T = {T}, d = {d}")
        check_shape(f"{name} (T = {T}, d = {d})", got, (T, d))
        check_close(f"{name} (T = {T}, d = {d})", got.detach().double(), reference_causal_attention(x, *W).double(), atol=1e-5,
                    quiet=True, mistakes={k: v.double() for k, v in _causal_mistakes(x, *W).items()},
                    hint="fill the scores above the diagonal with -inf (a lower-triangular boolean mask) before the softmax")
        if T > 2:  # the property itself: the future does not change the past
            changed = x.clone()
            changed[T // 2:] = torch.randn(T - T // 2, d, generator=g)
            again = call(name, fn, changed, *W)
            check_true(name, torch.allclose(again[: T // 2], got[: T // 2], atol=1e-6),
                       f"changing positions {T // 2}.. changed the outputs of earlier positions (T = {T}).",
                       "position t must not see positions after t")
    passed(name, f"{len(sizes)} sizes, and no position sees the future")


# --- exercise 7: which temperature? -------------------------------------------------------------------

TEMPERATURE_LOGITS = (2.0, 0.5, -1.0)
TEMPERATURE_TARGET = (0.9184, 0.0754, 0.0062)  # the distribution shown in the prompt (4 decimals)
HALF_LOGITS = (3.0, 1.0, 1.0, 1.0)


def _softmax_at(logits: Sequence[float], T: float) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) / T
    e = np.exp(z - z.max())
    return e / e.sum()


def _temperature_value(name: str, value: Any) -> float:
    try:
        a = _to_array(value)
    except (TypeError, ValueError):
        a = np.asarray([])
    if isinstance(value, (str, bool)) or a.size != 1 or a.dtype.kind not in "biuf":
        raise CheckFailed(name, f"expected a single number, got {_short(value)}.")
    T = float(a.reshape(()))
    if not math.isfinite(T) or T <= 0:
        raise CheckFailed(name, f"{_short(value)} is not a temperature.", "a temperature is a positive number: the logits are divided by it")
    return T


def check_temperature(temperature: Any) -> None:
    """Exercise 7, part 1: the temperature that turns TEMPERATURE_LOGITS into TEMPERATURE_TARGET (checked by its effect)."""
    name = "temperature"
    T = _temperature_value(name, temperature)
    got = _softmax_at(TEMPERATURE_LOGITS, T)
    target = np.asarray(TEMPERATURE_TARGET)
    if np.allclose(got, target, atol=6e-4):
        passed(name)
        return
    if np.allclose(_softmax_at(TEMPERATURE_LOGITS, 1 / T), target, atol=6e-4):
        raise CheckFailed(name, f"{_short(temperature)} is not right.",
                          "it looks like you found the factor the logits are MULTIPLIED by; the temperature divides them, so it is the reciprocal")
    sharper = got[0] < target[0]
    raise CheckFailed(name, f"softmax(logits / {T:.4g}) = {np.round(got, 4).tolist()}, not the target.",
                      f"the target is {'sharper' if sharper else 'flatter'} than that, so the temperature must be "
                      f"{'lower' if sharper else 'higher'}; p0 / p1 = exp((l0 - l1) / T) gives T in one line")


def check_half_temperature(value: Any) -> None:
    """Exercise 7, part 2: the temperature at which the top token of HALF_LOGITS gets probability 1/2."""
    name = "temperature_half"
    T = _temperature_value(name, value)
    top = _softmax_at(HALF_LOGITS, T)[0]
    if abs(top - 0.5) < 2e-3:
        passed(name)
        return
    if abs(_softmax_at(HALF_LOGITS, 1 / T)[0] - 0.5) < 2e-3:
        raise CheckFailed(name, f"{_short(value)} is not right.",
                          "it looks like you gave 1/T: the temperature divides the logits")
    if abs(_softmax_at(HALF_LOGITS, T / math.log(10))[0] - 0.5) < 2e-3:
        raise CheckFailed(name, f"{_short(value)} is not right.", "it looks like you used log base 10; use the natural log")
    raise CheckFailed(name, f"at T = {T:.4g} the top token gets {top:.3f}, not 0.5.",
                      f"{'lower' if top < 0.5 else 'raise'} the temperature (a lower one sharpens the distribution); "
                      "p_top = 1/2 means e^(3/T) equals the sum of the three other terms")
