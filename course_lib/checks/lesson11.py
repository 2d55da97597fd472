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

from .core import (
    CheckFailed,
    NotAttempted,
    Seals,
    call,
    check_all,
    check_close,
    check_shape,
    check_tensor,
    check_true,
    passed,
)
from .helpers import short, to_array

NEG = float("-inf")


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- sealed answers ---------------------------------------------------------------------------------
# Answers worked out by hand (exercises 1, 5 and 6) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson11` from solutions/seals/lesson11.py.
SEALS = Seals({
    "loss_gpt2": (3, "c9fbe69233455144ab0d", {
        "used log base 10: the cross-entropy is measured in nats, with the natural log (math.log)":
            "5d47fbebdd42e9085cf9",
        "used log base 2 (bits): the loss in this course is in nats, with the natural log (math.log)":
            "7994d69297dc72bcbbd1",
        "gave the probability of the right token, 1/V: the loss is its negative log": "866678aa70f0f6386b3f",
        "forgot the minus sign: -log(1/V) = log(V) is positive": "dc3ba134c0d73fe2d27e",
    }),
    "loss_spiky": (3, "dda62af57e91ff2d1a56", {
        "left out the spike: the denominator holds e^3 for the wrong token plus 9 terms e^0": "5f8b51d612a39b8b3906",
        "gave the loss of a uniform guess, ln 10: the spiked logit adds e^3, not e^0, to the denominator":
            "22e6bfda0e545b887acf",
        "kept only the spike in the denominator: the 9 other tokens, the right one included, add e^0 = 1 each":
            "12a09136bbc805c9872e",
        "counted 10 tokens with logit 0 besides the spiked one: the vocabulary has 10 tokens in all, so 9 of them "
        "have logit 0":
            "76ab7b01791c6cc4ed1d",
        "counted 8 tokens with logit 0: every token but the spiked one has logit 0, the right one included, so 9 do":
            "57c3c3ba7219c51f8561",
        "computed the loss of the spiked (wrong) token: the loss is -log p of the RIGHT token, whose logit is 0":
            "1510ee83534dd4e6dbd8",
        "gave the probability of the right token: the loss is its negative log": "f94ad47057a6807bfe57",
        "forgot the minus sign: -log p is positive": "7bfcbba981d614cb6098",
        "used log base 10: the cross-entropy is measured in nats, with the natural log": "57843fea82f974cb998f",
        "used log base 2 (bits): the loss in this course is in nats, with the natural log": "fa62adf2614d7e4c5a73",
    }),
    "n_params": (None, "239bc893dc99cb10b527", {
        "forgot the position table (block_size × C)": "1a26bf8aeed345a1a569",
        "left out the de-embedding: this model does not tie it, so it is a second V × C matrix": "6dd4a32a79dba1511894",
        "forgot the biases (4C in attention, 4C + C in the FFN, C in each LayerNorm)": "27ed246ec8a9c654a4aa",
        "forgot the biases of the Linear layers (4C in attention, 4C + C in the FFN)": "b30088e9908bf936bdc0",
        "forgot the LayerNorms (two per block and a final one, each a gain and a bias of C)": "13f449d6417859a5d4d6",
        "counted one FFN matrix: the FFN has two, C × 4C and 4C × C": "7ab47c31db7621dfc860",
        "gave every head its own C × C projections: the heads split C, so attention is 4C² whatever the heads":
            "c93c2117ac19c6b1aaba",
        "counted one block: there are n_layer = 3, each with its own weights": "7916379bf9ecfd0d2c64",
    }),
    "n_params_tied": (None, "5027030ac65a131447a4", {
        "counted the de-embedding: tied, it IS the token embedding, so it adds nothing": "aeccec53d4be2f955f69",
        "kept the biases: with bias=False no Linear and no LayerNorm has one": "d95eec58f62c9579b201",
        "dropped the LayerNorms: without a bias each still has its gain of C": "b696d5fc03409eee4cf1",
        "forgot the position table (block_size × C)": "2116e2608275e338dba0",
    }),
    "cheat_reason": (None, "e4da3bff4ecb3c691b17", {
        "chose (a): 0.2 million parameters cannot memorise a million characters, and memorising would show as a "
        "validation loss far above the training loss, not both near zero":
            "8214ac41ff47cc17fdc8",
        "chose (b): the code does divide the scores by sqrt(d) (the `scores = ...` line); and a softmax that is too "
        "sharp makes training harder, it does not make the loss on unseen text tiny":
            "35589688efc8c9e40afc",
        "chose (c): attending to itself is allowed, and needed; the target at t is x[t + 1], not x[t] (the targets "
        "are shifted by one), so seeing x[t] gives nothing away":
            "b5df19eb337559d9b9dd",
        "chose (e): softmax(..., dim=-1) normalises each row, one query's weights over all keys, which is right: "
        "every row sums to 1":
            "0036a584ca1a465457f0",
    }),
})


# --- exercise 1: the loss at initialisation ---------------------------------------------------------


def check_init_loss(loss_gpt2: Any, loss_spiky: Any) -> None:
    """Exercise 1: the cross-entropy of a uniform guess over GPT-2's vocabulary, and of one spiked wrong logit."""
    check_all(
        lambda: SEALS.check("loss_gpt2", loss_gpt2, "number",
                            "near-equal logits give every token probability 1/V; the loss is -log(1/V), natural log"),
        lambda: SEALS.check("loss_spiky", loss_spiky, "number",
                            "p(right) = e^(its logit) / (the sum of e^logit over all 10 tokens); the loss is "
                            "-log p(right), natural log"),
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
        out["kept k + 1 tokens, one too many: the k-th largest logit itself is the smallest one kept"] = (
            reference_top_k(logits, k + 1))
    if k >= 2:
        kth = torch.topk(logits, min(k, V), dim=-1).values[..., -1:]
        out["kept only k - 1 tokens, as `logits <= kth` does (it removes the k-th largest too): keep every logit "
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


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape and values, -inf where the other has -inf (the filters' outputs)."""
    return tuple(a.shape) == tuple(b.shape) and bool(torch.allclose(a, b, atol=1e-6, rtol=1e-6, equal_nan=True))


def _filter_check(name: str, fn: Callable, cases: Sequence[tuple[torch.Tensor, Any]], reference: Callable,
                  mistakes: Callable, arg: str, hint: str) -> None:
    """Run every case, then name a mistake only if it explains them all.

    A mistake table matches by value, so one case alone can make two different bugs look alike (keeping
    k - 1 tokens and a probability threshold can remove the same logits of one row). A mistake is named
    only when the learner's output equals that mistake's output in every case where the two differ
    from the right answer; otherwise the failure is reported without a diagnosis."""
    results = []  # (shown, got, want, mistakes of this case)
    for logits, value in cases:
        given = logits.clone()
        shown = f"{name}({short(logits, 40)}, {arg}={value})"
        try:
            got = call(name, fn, given, value)
        except NotAttempted:
            raise
        except CheckFailed as err:
            crash_hint = hint
            if arg == "k" and value >= logits.shape[-1] and "out of range" in err.problem:
                crash_hint = (f"k = {value} is at least the number of logits in a row ({logits.shape[-1]}): then "
                              "nothing "
                              "is removed, as the prompt says; torch.topk needs k <= V, so use min(k, V)")
            raise CheckFailed(err.name, f"{err.problem}", crash_hint) from None
        check_tensor(name, got, f"when called as {shown}")
        if not torch.equal(given, logits):
            raise CheckFailed(name, f"the logits passed in were changed (when called as {shown}).",
                              "work on a copy: `logits.masked_fill(...)` returns a new tensor, `masked_fill_` (with "
                              "the "
                              "underscore) changes the input, which belongs to the caller")
        if got.shape[:-1] == logits.shape[:-1] and got.shape[-1] != logits.shape[-1]:
            raise CheckFailed(name, f"expected shape {tuple(logits.shape)} (like the logits), got {tuple(got.shape)} "
                              f"when called as {shown}.",
                              "return a tensor shaped like the logits, the removed entries set to -inf, not only the "
                              "kept "
                              "values (torch.topk(...).values are sorted and have lost their token ids)")
        want = reference(logits, value).to(torch.float64)
        results.append((shown, got.detach().to(torch.float64), want,
                        {k: v.detach().to(torch.float64) for k, v in mistakes(logits, value).items()}))
    failing = [r for r in results if not _same(r[1], r[2])]
    if not failing:
        passed(name, f"{len(cases)} cases")
        return
    shown, got, want, _ = failing[0]
    for description in failing[0][3]:
        explains = all(_same(g, m[description]) if description in m and not _same(m[description], w) else
                       (description not in m or _same(g, w))
                       for _, g, w, m in results)
        if explains:
            raise CheckFailed(shown, "the values are not right.", f"it looks like you {description}.")
    check_close(shown, got, want, atol=1e-6, rtol=1e-6, hint=hint, quiet=True)


def _ignores_k(fn: Callable) -> bool:
    """True when the learner's top-k gives one and the same result for k = 2, 4 and 6."""
    probe = torch.tensor([0.1, 2.0, -1.0, 1.2, 0.9, -0.4, 0.5, 1.6])
    try:
        outs = [fn(probe.clone(), k) for k in (2, 4, 6)]
    except Exception:  # noqa: BLE001 - the learner's code; its crash was reported already
        return False
    if not all(isinstance(o, torch.Tensor) and o.shape == probe.shape for o in outs):
        return False
    return all(torch.equal(outs[0], o) for o in outs[1:])


def check_top_k(fn: Callable, *, hidden: bool = False, name: str = "top_k_filter") -> None:
    """Exercise 2: the learner's top_k_filter(logits, k) against the reference, naming the usual mistakes."""
    try:
        _filter_check(name, fn, _top_k_cases(hidden), reference_top_k, _top_k_mistakes, "k",
                      "find each row's k-th largest logit (torch.topk(logits, k, dim=-1).values[..., -1:]) and set "
                      "every logit below it to -inf; keep the shape and the order of the logits")
    except NotAttempted:
        raise
    except CheckFailed as err:
        if callable(fn) and _ignores_k(fn):
            raise CheckFailed(err.name, "the values are not right, and your result is the same for k = 2, 4 and 6.",
                              "top-k keeps the k largest logits, however likely each is: find each row's k-th largest "
                              "(torch.topk) and remove the logits below it. A rule on the probabilities (keep those "
                              "above a threshold) ignores k; keeping a share of the probability is top-p's "
                              "idea") from None
        raise


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
        "(torch.sort(..., descending=True)) so that the most likely tokens are kept":
            logits.masked_fill(cum_unsorted - probs >= p, NEG),
        "added up e^logit without dividing by their sum: those are not probabilities until they are normalised "
        "(torch.softmax does both)": back(sorted_logits.exp().cumsum(-1) - sorted_logits.exp() >= p),
        "dropped the token whose probability makes the total reach p, so the kept tokens hold less than p: keep a "
        "token while the mass BEFORE it (cumsum minus its own probability) is below p": back(cum_sorted >= p),
        "applied a mask made in sorted order to the unsorted logits: send it back to the token ids first, e.g. "
        "`drop = drop_sorted.scatter(-1, order, drop_sorted)`":
            logits.masked_fill((cum_sorted - probs_sorted) >= p, NEG),
        "added up the logits instead of probabilities: apply the softmax first":
            back(sorted_logits.cumsum(-1) - sorted_logits >= p),
        "set the removed logits to 0 instead of -inf: a logit of 0 can still be sampled": logits.masked_fill(
            ((cum_sorted - probs_sorted) >= p).scatter(-1, order, (cum_sorted - probs_sorted) >= p), 0.0),
        "returned the logits sorted from the largest down: every logit must stay at its own index (its token id)":
            torch.sort(reference_top_p(logits, p), dim=-1, descending=True).values,
        "returned probabilities instead of logits: return the filtered logits":
            torch.softmax(reference_top_p(logits, p), dim=-1),
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
            raise CheckFailed(name, f"expected a tuple (out, K_cache, V_cache), got {short(got)} ({where}).",
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
                raise CheckFailed(name, f"the returned {part} has shape {tuple(value.shape)}, expected {(t + 1, d)} "
                                        f"({where}).",
                                  "a cache holds one row per position: add the new row along dim 0 (positions), "
                                  "not along the features")
            if t > 0 and torch.allclose(value.double(), torch.cat([want[-1:], want[:-1]]).double(), atol=1e-5):
                raise CheckFailed(name, f"the new row of {part} is at the start ({where}).",
                                  "put the newest position at the END of the cache, after the older ones")
            check_close(f"{name} {part} ({where})", value.detach().double(), want.double(), atol=1e-5, quiet=True,
                        hint=f"the new row of {part} is x @ W_{part[0].lower()}, appended after the cached rows")
        check_shape(f"{name} out ({where})", out, (d,), quiet=True)
        check_close(f"{name} out ({where})", out.detach().double(), want_out.double(), atol=1e-5, quiet=True,
                    mistakes={k: v.double() for k, v in _kv_mistakes(*args).items()},
                    hint="q = x @ W_q; weights = softmax(K_cache @ q / sqrt(d)) over all t + 1 cached positions, "
                         "the new one included; out = weights @ V_cache")
    passed(name, f"{len(cases)} cases")


def check_kv_matches_causal_attention(fn: Callable, name: str = "kv_step (a whole sequence)", T: int = 7,
                                      d: int = 6) -> None:
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
    check_close(name, torch.stack(outs).detach().double(), (torch.softmax(scores, -1) @ Vf).double(), atol=1e-5,
                quiet=True,
                hint="step t must attend to positions 0..t: the cached ones and itself")
    passed(name, f"{T} steps equal causal self-attention")


# --- exercise 5: counting parameters -------------------------------------------------------------------


def check_param_count(n_params: Any, n_params_tied: Any) -> None:
    """Exercise 5: the parameters of two configurations, counted by hand."""
    hint = ("add up: token embedding V·C, position table block_size·C, per block 4C² + 8C² weights (+ 4C + 5C biases) "
            "and two LayerNorms (gain C each, + bias C each), a final LayerNorm, and the de-embedding V·C unless tied")
    check_all(
        lambda: SEALS.check("n_params", n_params, "number", hint),
        lambda: SEALS.check("n_params_tied", n_params_tied, "number",
                            "without biases every Linear and LayerNorm loses its bias (a LayerNorm keeps its gain), "
                            "and a tied de-embedding adds nothing"),
    )


# --- exercise 6: the model that cheats ----------------------------------------------------------------


def check_cheat_reason(value: Any) -> None:
    """Exercise 6, part 1: why the loss is impossibly low (a letter)."""
    if isinstance(value, str):
        value = value.strip().strip("()").lower()
    SEALS.check("cheat_reason", value, "text",
                "ask what position t is asked to predict (y[t] = x[t + 1]) and which line lets it see that character")


def reference_causal_attention(x: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor,
                               W_v: torch.Tensor) -> torch.Tensor:
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
        check_shape(f"{name} (T = {T}, d = {d})", got, (T, d), quiet=True)
        check_close(f"{name} (T = {T}, d = {d})", got.detach().double(), reference_causal_attention(x, *W).double(),
                    atol=1e-5,
                    quiet=True, mistakes={k: v.double() for k, v in _causal_mistakes(x, *W).items()},
                    hint="fill the scores above the diagonal with -inf (a lower-triangular boolean mask) before the "
                         "softmax")
        if T > 2:  # the property itself: the future does not change the past
            changed = x.clone()
            changed[T // 2:] = torch.randn(T - T // 2, d, generator=g)
            again = call(name, fn, changed, *W)
            check_true(name, torch.allclose(again[: T // 2], got[: T // 2], atol=1e-6),
                       f"changing positions {T // 2}.. changed the outputs of earlier positions (T = {T}).",
                       "position t must not see positions after t")
    passed(name, f"{len(sizes)} sizes, and no position sees the future")


def check_cheat(cheat_reason: Any, self_attention: Callable, *, hidden: bool = False) -> None:
    """Exercise 6: the letter and the fixed function, each earning its part of the points."""
    check_all(
        lambda: check_cheat_reason(cheat_reason),
        lambda: check_self_attention(self_attention, hidden=hidden,
                                     name="self_attention (more sizes)" if hidden else "self_attention"),
    )


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
        a = to_array(value)
    except (TypeError, ValueError):
        a = np.asarray([])
    if isinstance(value, (str, bool)) or a.size != 1 or a.dtype.kind not in "biuf":
        raise CheckFailed(name, f"expected a single number, got {short(value)}.")
    T = float(a.reshape(()))
    if not math.isfinite(T) or T <= 0:
        raise CheckFailed(name, f"{short(value)} is not a temperature.",
                          "a temperature is a positive number: the logits are divided by it")
    return T


def check_temperature(temperature: Any) -> None:
    """Exercise 7, part 1: the temperature that turns TEMPERATURE_LOGITS into TEMPERATURE_TARGET (checked by its
    effect)."""
    name = "temperature"
    T = _temperature_value(name, temperature)
    got = _softmax_at(TEMPERATURE_LOGITS, T)
    target = np.asarray(TEMPERATURE_TARGET)
    if np.allclose(got, target, atol=6e-4):
        passed(name)
        return
    if np.allclose(_softmax_at(TEMPERATURE_LOGITS, 1 / T), target, atol=6e-4):
        raise CheckFailed(name, f"{short(temperature)} is not right.",
                          "it looks like you found the factor the logits are MULTIPLIED by; the temperature divides "
                          "them, so it is the reciprocal")
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
        raise CheckFailed(name, f"{short(value)} is not right.",
                          "it looks like you gave 1/T: the temperature divides the logits")
    if abs(_softmax_at(HALF_LOGITS, T / math.log(10))[0] - 0.5) < 2e-3:
        raise CheckFailed(name, f"{short(value)} is not right.",
                          "it looks like you used log base 10; use the natural log")
    raise CheckFailed(name, f"at T = {T:.4g} the top token gets {top:.3f}, not 0.5.",
                      f"{'lower' if top < 0.5 else 'raise'} the temperature (a lower one sharpens the distribution); "
                      "p_top = 1/2 means e^(3/T) equals the sum of the three other terms")


def check_temperatures(temperature: Any, temperature_half: Any) -> None:
    """Exercise 7: both temperatures, each earning its part of the points."""
    check_all(lambda: check_temperature(temperature), lambda: check_half_temperature(temperature_half))


# --- exercise 8: the generation loop ------------------------------------------------------------------


class ToyLM:
    """A small, fixed "language model" for checking a generation loop: ``model(idx)`` maps ``(B, T)`` ids to
    ``(B, T, V)`` logits, position t from tokens 0..t of the window only (a running mean of token vectors,
    plus a position vector), so the logits depend on every token in the window, on where the window starts
    and on the position. Like a GPT with learned positions it refuses more than ``block_size`` tokens."""

    def __init__(self, V: int = 7, block_size: int = 5, seed: int = 16):
        g = _generator(seed)
        self.V, self.block_size, self.calls = V, block_size, 0
        self.tokens = torch.randn(V, V, generator=g) * 2.0  # (V, V): one logit vector per input token
        self.positions = torch.randn(block_size, V, generator=g)  # (block_size, V)

    def __repr__(self) -> str:
        return "model"

    def __call__(self, idx: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        # Plain ValueErrors: under `course grade` this model runs in the learner's kernel, and the check reads
        # the message of what it raised.
        if not isinstance(idx, torch.Tensor) or idx.ndim != 2 or idx.dtype != torch.long:
            got = (f"shape {tuple(idx.shape)}, dtype {idx.dtype}" if isinstance(idx, torch.Tensor)
                   else type(idx).__name__)
            raise ValueError(f"the model takes a (B, T) tensor of token ids (torch.long), got {got}")
        T = idx.shape[1]
        if T > self.block_size:
            raise ValueError(f"the model was given {T} positions, but its block_size is {self.block_size}")
        if T == 0:
            raise ValueError("the model was given an empty context (0 positions)")
        h = self.tokens[idx].cumsum(dim=1) / torch.arange(1, T + 1)[:, None]  # (B, T, V): mean over 0..t
        return h + self.positions[:T]  # (B, T, V)


def reference_generate(model, idx, max_new_tokens, block_size, temperature, generator, *, crop=None, position=-1,
                       temp_mode="divide", pick="sample", axis=-1):
    """The loop of lesson 11: crop, last position, temperature, softmax, one draw, append. The keyword
    arguments make the classic mistakes (used to name them)."""
    crop = crop or (lambda seq: seq[:, -block_size:])
    for _ in range(max_new_tokens):
        logits = model(crop(idx))[:, position, :]  # (B, V)
        if temperature == 0 or pick == "argmax":
            nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            if temp_mode == "divide":
                probs = torch.softmax(logits / temperature, dim=axis)
            elif temp_mode == "multiply":
                probs = torch.softmax(logits * temperature, dim=axis)
            else:  # "after": the probabilities divided by the temperature, renormalised by the draw
                probs = torch.softmax(logits, dim=axis) / temperature
            nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        idx = torch.cat([idx, nxt], dim=1)  # (B, T + 1)
    return idx


def _generate_cases(hidden: bool) -> list[dict]:
    g = _generator(17)
    cases = [  # (B, T) prompts for a model with block_size 5; the new tokens go past it, so cropping matters
        dict(B=2, T=3, new=6, temperature=0.8, seed=1),
        dict(B=3, T=2, new=8, temperature=1.5, seed=2),
        dict(B=2, T=4, new=5, temperature=0, seed=3),
    ]
    if hidden:
        cases += [
            dict(B=1, T=1, new=12, temperature=1.0, seed=4),
            dict(B=2, T=9, new=4, temperature=0.5, seed=5),  # a prompt longer than block_size
            dict(B=4, T=5, new=7, temperature=2.0, seed=6),
        ]
    for case in cases:
        case["idx"] = torch.randint(7, (case["B"], case["T"]), generator=g)
        case["block"] = 5
    return cases


def _generate_mistakes(case: dict) -> dict[str, dict]:
    b = case["block"]
    return {
        "used the first position's logits: the next token's distribution is at the LAST position, logits[:, -1, :]":
            dict(position=0),
        "cropped to block_size - 1 tokens (an off-by-one slice): keep the last block_size, idx[:, -block_size:]":
            dict(crop=lambda seq: seq[:, -(b - 1):]),
        "kept the FIRST block_size tokens (idx[:, :block_size]): the window must follow the text, keep the last "
        "ones, idx[:, -block_size:]": dict(crop=lambda seq: seq[:, :b]),
        "multiplied the logits by the temperature: divide them, softmax(logits / temperature)":
            dict(temp_mode="multiply"),
        "applied the temperature after the softmax: probabilities divided by τ are the same distribution once "
        "renormalised, so it changed nothing; divide the logits before the softmax": dict(temp_mode="after"),
        "took the most likely token (argmax) instead of drawing one: sample with torch.multinomial(probs, 1, "
        "generator=generator)": dict(pick="argmax"),
        "took the softmax over the batch (dim=0): each row's distribution is over the vocabulary, dim=-1":
            dict(axis=0),
    }


def check_generate(fn: Callable, model: Any = None, *, hidden: bool = False, name: str = "generate") -> None:
    """Exercise 8: the learner's generate(model, idx, max_new_tokens, block_size, temperature, generator)
    against the lesson's loop with the same random generator, naming the classic mistakes.

    `model` is the one the learner's loop runs: ``ToyLM(block_size=5)``, given in the exercise's answer cell
    so that under `course grade` it lives in the learner's kernel beside their function (the grader passes
    only plain data, or the learner's own objects, to a learner's code). The reference runs its twin here."""
    model = ToyLM(block_size=5) if model is None else model
    cases = _generate_cases(hidden)
    for case in cases:
        idx, b, temp, n = case["idx"], case["block"], case["temperature"], case["new"]
        where = (f"a prompt of shape {tuple(idx.shape)}, {n} new tokens, block_size {b}, "
                 f"temperature {temp}")

        def run(seed=case["seed"], idx=idx, b=b, temp=temp, n=n, where=where):
            given = idx.clone()
            try:
                out = call(name, fn, model, given, n, b, temp, torch.Generator().manual_seed(seed))
            except NotAttempted:
                raise
            except CheckFailed as err:
                if "but its block_size is" in err.problem:
                    raise CheckFailed(name, f"the model was given more than block_size = {b} positions ({where}).",
                                      "crop the context to its last block_size tokens before each call: "
                                      "idx[:, -block_size:] (the position table has block_size rows)") from None
                if "empty context" in err.problem:
                    raise CheckFailed(name, f"the model was given an empty context ({where}).",
                                      "crop with idx[:, -block_size:], which keeps the LAST block_size "
                                      "tokens") from None
                if temp == 0 and "RuntimeError" in err.problem:
                    raise CheckFailed(name, err.problem, "temperature 0 means greedy decoding: take the argmax of the "
                                      "logits (logits / 0 is inf or nan, which no softmax can sample)") from None
                raise
            if not torch.equal(given, idx):
                raise CheckFailed(name, f"the prompt passed in was changed ({where}).",
                                  "build the result with torch.cat([idx, nxt], dim=1), which makes a new tensor")
            return out

        out = run()
        check_tensor(name, out, f"({where})")
        B, T = idx.shape
        if tuple(out.shape) == (B, n):
            raise CheckFailed(name, f"expected shape {(B, T + n)}, got {tuple(out.shape)} ({where}).",
                              "return the prompt followed by the new tokens, as the loop builds it: "
                              "(B, T + max_new_tokens)")
        if tuple(out.shape) != (B, T + n):
            raise CheckFailed(name, f"expected shape {(B, T + n)}, got {tuple(out.shape)} ({where}).",
                              "append one token per step to every row: nxt is (B, 1), torch.cat([idx, nxt], dim=1)")
        if not torch.equal(out[:, :T], idx):
            raise CheckFailed(name, f"the result does not start with the prompt ({where}).",
                              "append each new token at the END: torch.cat([idx, nxt], dim=1)")
        want = reference_generate(ToyLM(block_size=b), idx, n, b, temp, torch.Generator().manual_seed(case["seed"]))
        if torch.equal(out, want):
            continue
        if temp != 0:
            again = run()
            if not torch.equal(again, out):
                raise CheckFailed(name, f"two runs with generators of the same seed gave different tokens ({where}).",
                                  "draw with torch.multinomial(probs, num_samples=1, generator=generator), so that the "
                                  "seed decides the draws")
        for description, kwargs in _generate_mistakes(case).items():
            if temp == 0 and ("temperature" in description or "argmax" in description):
                continue
            wrong = reference_generate(ToyLM(block_size=b), idx, n, b, temp,
                                       torch.Generator().manual_seed(case["seed"]), **kwargs)
            if torch.equal(out, wrong):
                raise CheckFailed(name, f"the tokens are not right ({where}).", f"it looks like you {description}.")
        step = int((out[:, T:] != want[:, T:]).any(dim=0).nonzero()[0])
        raise CheckFailed(name, f"the tokens are not right from new token {step} on ({where}).",
                          "each step: logits = model(idx[:, -block_size:])[:, -1, :]; then the argmax if "
                          "temperature is 0, else torch.multinomial(softmax(logits / temperature, dim=-1), 1, "
                          "generator=generator); append it with torch.cat([idx, nxt], dim=1)")
    passed(name, f"{len(cases)} cases: the lesson's tokens for the same seed")


# --- exercise 9: targets and tying -------------------------------------------------------------------------


def reference_make_batch(ids: torch.Tensor, starts: Sequence[int],
                         block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.stack([ids[s : s + block_size] for s in starts])  # (B, T)
    y = torch.stack([ids[s + 1 : s + 1 + block_size] for s in starts])  # (B, T): x shifted by one
    return x, y


def _batch_mistakes(ids, starts, block_size) -> dict[str, torch.Tensor]:
    x, y = reference_make_batch(ids, starts, block_size)
    back = torch.stack([ids[s - 1 : s - 1 + block_size] if s > 0 else torch.cat([ids[-1:], ids[: block_size - 1]])
                        for s in starts])
    return {
        "used the inputs as the targets (y = x): the target at t is the NEXT token, ids[s + t + 1]": x,
        "shifted the targets the wrong way (the token before): y[t] must be the token after x[t], ids[s + t + 1]":
            back,
        "rolled x (x.roll(-1)): the last target wraps round to x[0]; it must be the token after the window, "
        "ids[s + block_size]": torch.roll(x, -1, dims=1),
    }


def check_make_batch(fn: Callable, *, hidden: bool = False, name: str = "make_batch") -> None:
    """Exercise 9, part 1: make_batch(ids, starts, block_size) -> (x, y), y shifted one to the right."""
    g = _generator(18)
    ids = torch.randint(50, (40,), generator=g)
    cases = [([0, 7, 30], 6), ([12], 4)] + ([([1, 2, 33], 6), ([0, 20], 19)] if hidden else [])
    for starts, block_size in cases:
        where = f"starts {starts}, block_size {block_size}"
        got = call(name, fn, ids.clone(), list(starts), block_size)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise CheckFailed(name, f"expected a tuple (x, y), got {short(got)} ({where}).", "end with `return x, y`")
        x, y = got
        check_tensor(name, x, f"for x ({where})", hint="stack the windows into one tensor: torch.stack([...])")
        check_tensor(name, y, f"for y ({where})", hint="stack the windows into one tensor: torch.stack([...])")
        want_x, want_y = reference_make_batch(ids, starts, block_size)
        for part, value, want in (("x", x, want_x), ("y", y, want_y)):
            if tuple(value.shape) != tuple(want.shape):
                hint = ("one row per start, block_size tokens in each: windows of block_size, not block_size + 1 "
                        "(ids[s : s + block_size] for x, ids[s + 1 : s + 1 + block_size] for y)")
                if value.ndim == 1:
                    hint = "stack one window per start into a (len(starts), block_size) tensor: torch.stack([...])"
                raise CheckFailed(name, f"{part} has shape {tuple(value.shape)}, expected {tuple(want.shape)} "
                                  f"({where}).", hint)
        if not torch.equal(x, want_x):
            raise CheckFailed(name, f"x is not right ({where}).",
                              "row i of x is the window ids[s : s + block_size] for the i-th start s")
        if not torch.equal(y, want_y):
            for description, wrong in _batch_mistakes(ids, starts, block_size).items():
                if torch.equal(y, wrong):
                    raise CheckFailed(name, f"y is not right ({where}).", f"it looks like you {description}.")
            raise CheckFailed(name, f"y is not right ({where}).",
                              "y is x shifted one to the right: ids[s + 1 : s + 1 + block_size], so y[:, t] is the "
                              "token that follows x[:, t]")
    passed(name, f"{len(cases)} cases")


def untied_gpt():
    """The small GPT that exercise 9's tie_weights is tried on: its de-embedding has a matrix of its own."""
    from course_lib.models import GPT, GPTConfig

    torch.manual_seed(19)
    return GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, tie_weights=False))


def check_tie_weights(fn: Callable, make_model: Callable | None = None, *, name: str = "tie_weights") -> None:
    """Exercise 9, part 2: tie_weights(model) makes a GPT's de-embedding the token embedding itself.

    make_model() gives the model to tie (`untied_gpt`; in the exercise a copy of it given in the answer cell, so
    that under `course grade` the model lives in the learner's kernel). Everything is judged from what the model
    reports: its parameter count (a shared Parameter is counted once) and the values and shapes of the two matrices."""
    model = (make_model or untied_gpt)()
    V, C = 11, 8
    before = int(model.num_parameters())
    embedding = model.tok_emb.weight.detach().clone()
    call(name, fn, model)  # it changes the model in place; what it returns does not matter
    after = int(model.num_parameters())
    head, tok = model.lm_head.weight.detach(), model.tok_emb.weight.detach()
    if tuple(tok.shape) != (V, C) or not torch.equal(tok, embedding):
        raise CheckFailed(name, "the token embedding was replaced.",
                          "keep the embedding's matrix and make the de-embedding use it: model.lm_head.weight = "
                          "model.tok_emb.weight")
    if tuple(head.shape) == (C, V):
        raise CheckFailed(name, f"lm_head.weight has shape {(C, V)}, the embedding's transpose.",
                          "no transpose is needed: nn.Linear(C, V) stores its weight as (V, C), the shape of the "
                          "embedding table; assign the embedding's Parameter itself")
    if after == before - V * C and tuple(head.shape) == (V, C) and torch.equal(head, embedding):
        passed(name, f"one ({V}, {C}) matrix, {V * C} fewer parameters")
        return
    if after == before and tuple(head.shape) == (V, C) and torch.equal(head, embedding):
        raise CheckFailed(name, "lm_head.weight holds the embedding's numbers, but as a second parameter "
                          f"(the model still counts {after:,} parameters).",
                          "a copy, or an assignment to `.data`, gives the same numbers in another Parameter: the "
                          "optimiser sees two matrices with two gradients and they drift apart with the first update; "
                          "assign the Parameter itself: model.lm_head.weight = model.tok_emb.weight")
    raise CheckFailed(name, "lm_head.weight is not the token embedding's matrix.",
                      "make the two one object: model.lm_head.weight = model.tok_emb.weight")


def check_targets_and_tying(make_batch: Callable, tie_weights: Callable, make_model: Callable | None = None, *,
                            hidden: bool = False) -> None:
    """Exercise 9: both parts, each earning its share of the points."""
    check_all(
        lambda: check_make_batch(make_batch, hidden=hidden, name="make_batch (more cases)" if hidden else "make_batch"),
        lambda: check_tie_weights(tie_weights, make_model),
    )
