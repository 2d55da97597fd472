"""Checks for the lesson 06 exercises (attention): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from .core import (CheckFailed, NotAttempted, _short, call, check_close, check_function, check_shape, check_tensor, check_true, passed)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _softmax_mistakes() -> dict[str, Callable]:
    def naive(x):
        return x.exp() / x.exp().sum(-1, keepdim=True)

    def global_max(x):
        e = (x - x.max()).exp()
        return e / e.sum(-1, keepdim=True)

    def wrong_axis(x):
        e = (x - x.amax(0, keepdim=True)).exp()
        return e / e.sum(0, keepdim=True)

    def no_division(x):
        return (x - x.amax(-1, keepdim=True)).exp()

    return {
        "forgot to subtract the maximum: exp overflows to inf on large inputs and inf / inf gives NaN": naive,
        "subtracted the maximum of the whole tensor instead of each row's own maximum (a row far below it "
        "underflows to 0 / 0 = NaN); use x.max(dim=-1, keepdim=True)": global_max,
        "took the softmax over the wrong axis: each row (the last axis, dim=-1) must sum to 1": wrong_axis,
        "forgot to divide by the sum, so the result is exp(x - max), not a probability distribution": no_division,
    }


def check_softmax(fn: Callable, name: str = "stable_softmax", *, hidden: bool = False) -> None:
    """The learner's softmax over the last axis, against torch.softmax, naming the usual mistakes."""
    cases = [
        (torch.tensor([1.0, 2.0, 3.0]),),
        (torch.randn(3, 4, generator=_generator(0)),),
        (torch.tensor([1000.0, 1001.0, 1002.0]),),
    ]
    if hidden:
        cases += [
            (torch.tensor([[1000.0, 1001.0], [-1000.0, -999.0]]),),
            (torch.tensor([[-1000.0, 0.0, 1000.0], [5.0, 5.0, 5.0]]),),
            (torch.randn(2, 3, 5, generator=_generator(1)) * 10,),
        ]
    if not callable(fn):
        raise CheckFailed(name, f"expected a function, got {type(fn).__name__}.")
    try:
        check_function(name, _returns_tensor(name, fn), cases, reference=lambda x: torch.softmax(x, dim=-1),
                       mistakes=_softmax_mistakes(),
                       hint="subtract each row's maximum, exponentiate, divide by the row's sum (all along dim=-1)")
    except NotAttempted:
        raise
    except CheckFailed as err:
        hint = _softmax_crash_hint(err.problem)
        if hint is None:
            raise
        raise CheckFailed(err.name, err.problem, hint) from None


def _returns_tensor(name: str, fn: Callable) -> Callable:
    """`fn`, failing clearly when it returns something other than a torch.Tensor (e.g. a numpy array)."""
    def wrapped(*args):
        out = fn(*args)
        if out is not None:  # None is reported by check_close
            check_tensor(name, out, f"(for input {_short(args[0])})",
                         "build the result with torch operations (torch.exp, .sum, ...); "
                         "if you used numpy, convert back with torch.as_tensor")
        return out

    return wrapped


def _softmax_crash_hint(problem: str) -> str | None:
    """Name the two usual crashes of a hand-written softmax, from the error text that `call` reports."""
    if "return_types" in problem:
        return ("it looks like you subtracted the result of x.max(dim=...) itself: with a dim it returns a pair "
                "(values, indices); use x.max(dim=-1, keepdim=True).values, or x.amax(dim=-1, keepdim=True)")
    if "must match the size of tensor" in problem:
        return ("it looks like a max or sum over dim=-1 dropped that axis, so it no longer lines up with x: keep it with "
                "keepdim=True, i.e. x.max(dim=-1, keepdim=True).values (or x.amax(dim=-1, keepdim=True)) and "
                "e.sum(dim=-1, keepdim=True)")
    return None


def check_causal_mask(fn: Callable, name: str = "causal_mask", sizes: Sequence[int] = (4, 1)) -> None:
    """The learner's causal mask: (T, T), boolean, True on and below the diagonal.

    Put a size of at least 3 first: for T = 1 several mistakes look alike.
    """
    for T in sizes:
        got = call(name, fn, T)
        check_tensor(name, got, f"for T={T}")
        check_shape(f"{name}({T})", got, (T, T))
        ones = torch.ones(T, T)
        mistakes = {
            "used the upper triangle (triu): True must be on and BELOW the diagonal, so word i sees words 0..i": ones.triu(),
            "left out the diagonal: a word may attend to itself, so the diagonal must be True": ones.tril(-1),
            "inverted the mask (True on the future positions, the ones to block): in this course True means "
            "'may attend', so the past and the word itself are True": ones.triu(1),
        }
        check_close(f"{name}({T})", got.detach().cpu().to(torch.float64), ones.tril(), mistakes=mistakes, quiet=True)
        check_true(f"{name}({T})", got.dtype == torch.bool,
                   f"the pattern is right but the dtype is {got.dtype}; the mask must be boolean (torch.bool).",
                   "e.g. torch.ones(T, T, dtype=torch.bool).tril(), or add .bool()")
    passed(name, f"T in {list(sizes)}")


def _attention_cases(hidden: bool) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    g = _generator(6)
    q, k, v = torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)
    cases = [("one sentence of 4 words, d_k = 4, no mask", 2 * q, 2 * k, v, None)]
    qb, kb, vb = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 2, generator=g)
    cases.append(("a batch of 2, T_q = 3, T_k = 5, d_v = 2, no mask", 2 * qb, 2 * kb, vb, None))
    cases.append(("4 words with a causal mask", 2 * q, 2 * k, v, torch.ones(4, 4, dtype=torch.bool).tril()))
    pad = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])[:, None, :]  # (2, 1, 5)
    cases.append(("a batch of 2 with a padding mask of shape (2, 1, 5), broadcast over the 3 queries", 2 * qb, 2 * kb, vb, pad))
    if hidden:
        qh, kh, vh = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
        cases.append(("batch 2 x 3 heads, 5 words, d_k = 8, causal mask", 3 * qh, 3 * kh, vh, torch.ones(5, 5, dtype=torch.bool).tril()))
        q64, k64, v64 = torch.randn(6, 64, generator=g), torch.randn(6, 64, generator=g), torch.randn(6, 3, generator=g)
        cases.append(("6 words with d_k = 64", q64, k64, v64, None))
    return cases


def _attention_mistakes(q, k, v, mask) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(output, weights) for each classic mistake; a mistake that cannot run on these shapes is left out."""
    d_k = q.shape[-1]
    kt = k.transpose(-2, -1)
    blocked = None if mask is None else ~mask
    variants: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]] = {}

    def finish(scores, dim=-1, after=None):
        if blocked is not None and after is None:
            scores = scores.masked_fill(blocked, float("-inf"))
        w = torch.softmax(scores, dim=dim)
        if after is not None:
            w = after(w)
        return w @ v, w

    variants["forgot to divide the scores by sqrt(d_k)"] = lambda: finish(q @ kt)
    variants["divided the scores by d_k instead of sqrt(d_k)"] = lambda: finish(q @ kt / d_k)
    variants["multiplied q by k instead of by k transposed (q @ k rather than q @ k.transpose(-2, -1))"] = (
        lambda: finish(q @ k / math.sqrt(d_k)))
    variants["took the softmax over the wrong axis (over the queries, dim=-2): each row, over the keys (dim=-1), must sum to 1"] = (
        lambda: finish(q @ kt / math.sqrt(d_k), dim=-2))
    _, right_w = finish(q @ kt / math.sqrt(d_k))
    variants["used the values v itself as the output: output row i must be Σ_j α_ij v_j (weights @ v), not v_i"] = (
        lambda: (v.clone(), right_w))
    variants["multiplied the values by the transposed weights: use weights @ v"] = (
        lambda: (right_w.transpose(-2, -1) @ v, right_w))
    if mask is not None:
        s = q @ kt / math.sqrt(d_k)
        variants["applied the mask after the softmax: the masked weights are zero but the rows no longer sum to 1; "
                 "fill the scores with -inf before the softmax"] = lambda: finish(s, after=lambda w: w.masked_fill(blocked, 0.0))
        variants["applied the mask by multiplying the scores by 0: a score of 0 still gets weight exp(0) in the softmax; "
                 "fill the scores with -inf instead"] = lambda: finish(s * mask, after=lambda w: w)
        variants["inverted the mask: True means 'may attend', so fill with -inf where the mask is False (~mask)"] = (
            lambda: finish(s.masked_fill(mask, float("-inf")), after=lambda w: w))
    results = {}
    for description, make in variants.items():
        try:
            results[description] = make()
        except Exception:  # this mistake does not run on these shapes, so it cannot be the learner's
            continue
    return results


def _attention_crash_hint(problem: str, q: torch.Tensor, mask: torch.Tensor | None) -> str | None:
    """Name the usual reason an attention function crashes, from the error text that `call` reports."""
    if mask is not None and ("shape of the mask" in problem or "IndexError" in problem):
        return ("it looks like you masked by boolean indexing (scores[~mask] = ...), which needs a mask of exactly the "
                "scores' shape; the mask must broadcast: use masked_fill (or torch.where), not boolean indexing")
    if mask is not None and "bool tensor is not supported" in problem:
        return "invert a boolean mask with ~mask (or mask == False); 1 - mask and -mask do not work on booleans"
    if q.dim() > 2 and ("t() expects" in problem or "must match the size of tensor" in problem):
        return ("it looks like you transposed k with k.T or k.t(), which reverses every axis of a batched tensor (or "
                "refuses one); swap only the last two axes: k.transpose(-2, -1)")
    return None


def check_attention(fn: Callable, name: str = "attention", *, hidden: bool = False, masked_only: bool = False) -> None:
    """The learner's `fn(q, k, v, mask=None) -> (output, weights)` against the library, naming the usual mistakes."""
    from course_lib.attention import scaled_dot_product_attention as reference

    n = 0
    for description, q, k, v, mask in _attention_cases(hidden):
        if masked_only and mask is None:
            continue
        try:
            got = call(name, fn, q, k, v, mask)
        except NotAttempted:
            raise
        except CheckFailed as err:
            raise CheckFailed(name, f"{err.problem} (case: {description})",
                              _attention_crash_hint(err.problem, q, mask)) from None
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(name, f"expected a tuple (output, weights), got {_short(got)}.",
                              "end the function with `return weights @ v, weights`")
        out, weights = got
        for part, value in (("output", out), ("weights", weights)):
            if value is not None:  # None is reported by check_close
                check_tensor(name, value, f"for the {part} (case: {description})",
                             "compute with torch operations (@, torch.softmax, masked_fill, ...); "
                             "if you used numpy, convert back with torch.as_tensor")
        want_out, want_w = reference(q, k, v, mask)
        wrong = _attention_mistakes(q, k, v, mask)
        label = f"{name} ({description})"
        check_close(f"{label}, weights", weights, want_w, mistakes={d: w for d, (o, w) in wrong.items()}, quiet=True,
                    hint="weights = softmax(q @ k.transpose(-2, -1) / sqrt(d_k)) over the last axis, masked before the softmax")
        check_close(f"{label}, output", out, want_out, mistakes={d: o for d, (o, w) in wrong.items()}, quiet=True,
                    hint="the output is weights @ v")
        n += 1
    passed(name, f"{n} case{'s' if n != 1 else ''}")


def check_flying_arrows(scores: Any, weights: Any, output: Any, output_arrows: Any = None) -> None:
    """The two-word example: flying = [0,1,1,1,0,0], arrows = [1,1,0,-1,-1,1]; q/k/v = dims 1-2 / 3-4 / 5-6.

    Worked out by hand, so a wrong answer is not shown the expected numbers (reveal=False).
    """
    raw = torch.tensor([1.0, -1.0])  # q_flying · k_flying, q_flying · k_arrows
    scaled = raw / math.sqrt(2)
    w = torch.softmax(scaled, dim=0)
    v = torch.tensor([[0.0, 0.0], [-1.0, 1.0]])
    check_close("scores_flying", scores, scaled, atol=1e-3, rtol=0, reveal=False,
                mistakes={"forgot to divide by sqrt(d_k) = sqrt(2)": raw, "divided by d_k = 2 instead of sqrt(2)": raw / 2,
                          "computed the scores of arrows' query (the second word) instead of flying's": torch.tensor([2.0, -1.0]) / math.sqrt(2)},
                hint="q_flying = dims 1-2 of flying; dot it with each word's key (dims 3-4), then divide by sqrt(d_k)")
    unscaled_w = torch.softmax(raw, dim=0)
    check_close("weights_flying", weights, w, atol=5e-3, rtol=0, reveal=False,
                mistakes={"forgot to divide the scores by sqrt(2) before the softmax": unscaled_w,
                          "did not normalise (these are exp(scores), not weights)": scaled.exp(),
                          "put the weights in the wrong order: the first is flying's own (the larger score)": w.flip(0)},
                hint="weights = exp(score_j) / (exp(score_0) + exp(score_1)); they are positive and add up to 1")
    check_close("output_flying", output, w @ v, atol=5e-3, rtol=0, reveal=False,
                mistakes={"used flying's own value v_flying = [0, 0]; the output is Σ_j α_j v_j": v[0],
                          "used the unscaled weights": unscaled_w @ v,
                          "weighted the values in the wrong order (0.20 on flying, 0.80 on arrows)": w.flip(0) @ v},
                hint="output = weight_flying * v_flying + weight_arrows * v_arrows, with the values from dims 5-6")
    if output_arrows is None:
        return
    q_arrows_scores = torch.tensor([2.0, -1.0])  # q_arrows = [1, 1] against k_flying = [1, 1], k_arrows = [0, -1]
    w_arrows = torch.softmax(q_arrows_scores / math.sqrt(2), dim=0)
    check_close("output_arrows", output_arrows, w_arrows @ v, atol=5e-3, rtol=0, reveal=False, mistakes={
        "used the unscaled scores [2, -1]": torch.softmax(q_arrows_scores, dim=0) @ v,
        "used flying's weights [0.80, 0.20]": w @ v,
        "put the large weight on arrows' own value (arrows' query matches flying's key better)": w_arrows.flip(0) @ v,
    }, hint="arrows asks with q = [1, 1] (its dims 1-2): score it against both keys, scale, softmax, then average the values")
