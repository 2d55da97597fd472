"""Checks for the lesson 06 exercises (attention): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from .core import (
    CheckFailed,
    NotAttempted,
    Seals,
    call,
    check_all,
    check_close,
    check_function,
    check_shape,
    check_tensor,
    check_true,
    passed,
)
from .helpers import short


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

    def dim_one(x):
        if x.dim() < 2:
            return torch.full_like(x, -1.0)  # that code crashes on 1-D (the crash hint names it); no softmax is -1
        e = (x - x.amax(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)

    return {
        "forgot to subtract the maximum: exp overflows to inf on large inputs and inf / inf gives NaN": naive,
        "subtracted the maximum of the whole tensor instead of each row's own maximum (a row far below it "
        "underflows to 0 / 0 = NaN); use x.max(dim=-1, keepdim=True)": global_max,
        "took the softmax over the wrong axis: each row (the last axis, dim=-1) must sum to 1": wrong_axis,
        "forgot to divide by the sum, so the result is exp(x - max), not a probability distribution": no_division,
        "fixed the axis at dim=1: for a 3-D input that is not the last axis; use dim=-1 so that any shape works":
            dim_one,
    }


def check_softmax(fn: Callable, name: str = "stable_softmax", *, hidden: bool = False) -> None:
    """The learner's softmax over the last axis, against torch.softmax, naming the usual mistakes."""
    cases = [  # a 2-D case first: a hard-coded dim=1 passes it, then crashes on 1-D with a named cause
        (torch.randn(3, 4, generator=_generator(0)),),
        (torch.tensor([1.0, 2.0, 3.0]),),
        (torch.tensor([1000.0, 1001.0, 1002.0]),),
        (torch.tensor([[1000.0, 1001.0], [-1000.0, -999.0]]),),  # rows far apart: the whole tensor's max fails
        (torch.randn(2, 3, 5, generator=_generator(1)) * 10,),  # 3-D: the last axis is not dim=1
    ]
    if hidden:
        cases += [
            (torch.tensor([[-1000.0, 0.0, 1000.0], [5.0, 5.0, 5.0]]),),
            (torch.randn(2, 2, 3, 4, generator=_generator(2)) * 30,),
            (torch.tensor([[[50.0, -50.0], [700.0, 701.0]], [[-800.0, -799.0], [0.0, 0.0]]]),),
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
            check_tensor(name, out, f"(for input {short(args[0])})",
                         "build the result with torch operations (torch.exp, .sum, ...); "
                         "if you used numpy, convert back with torch.as_tensor")
        return out

    return wrapped


def _softmax_crash_hint(problem: str) -> str | None:
    """Name the usual crashes of a hand-written softmax, from the error text that `call` reports."""
    if "Dimension out of range" in problem:
        return ("it looks like you wrote a fixed axis (such as dim=1), which a 1-D input does not have: take the max "
                "and "
                "the sum over the last axis, dim=-1, so that every shape works")
    if "return_types" in problem:
        return ("it looks like you subtracted the result of x.max(dim=...) itself: with a dim it returns a pair "
                "(values, indices); use x.max(dim=-1, keepdim=True).values, or x.amax(dim=-1, keepdim=True)")
    if "must match the size of tensor" in problem:
        return ("it looks like a max or sum over dim=-1 dropped that axis, so it no longer lines up with x: keep it "
                "with "
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
        check_shape(f"{name}({T})", got, (T, T), quiet=True)
        ones = torch.ones(T, T)
        mistakes = {
            "used the upper triangle (triu): True must be on and BELOW the diagonal, so word i sees words 0..i":
                ones.triu(),
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
    cases.append(("a batch of 2 with a padding mask of shape (2, 1, 5), broadcast over the 3 queries",
                  2 * qb, 2 * kb, vb, pad))
    if hidden:
        qh, kh, vh = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
        cases.append(("batch 2 x 3 heads, 5 words, d_k = 8, causal mask", 3 * qh, 3 * kh, vh,
                      torch.ones(5, 5, dtype=torch.bool).tril()))
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
    variants["took the softmax over the wrong axis (over the queries, dim=-2): each row, over the keys (dim=-1), "
             "must sum to 1"] = (
        lambda: finish(q @ kt / math.sqrt(d_k), dim=-2))
    _, right_w = finish(q @ kt / math.sqrt(d_k))
    variants["used the values v itself as the output: output row i must be Σ_j α_ij v_j (weights @ v), not v_i"] = (
        lambda: (v.clone(), right_w))
    variants["multiplied the values by the transposed weights: use weights @ v"] = (
        lambda: (right_w.transpose(-2, -1) @ v, right_w))
    if mask is not None:
        s = q @ kt / math.sqrt(d_k)
        variants["applied the mask after the softmax: the masked weights are zero but the rows no longer sum to 1; "
                 "fill the scores with -inf before the softmax"] = (
            lambda: finish(s, after=lambda w: w.masked_fill(blocked, 0.0)))
        variants["applied the mask by multiplying the scores by 0: a score of 0 still gets weight exp(0) in the "
                 "softmax; fill the scores with -inf instead"] = lambda: finish(s * mask, after=lambda w: w)
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
            raise CheckFailed(name, f"expected a tuple (output, weights), got {short(got)}.",
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
                    hint="weights = softmax(q @ k.transpose(-2, -1) / sqrt(d_k)) over the last axis, masked before "
                         "the softmax")
        check_close(f"{label}, output", out, want_out, mistakes={d: o for d, (o, w) in wrong.items()}, quiet=True,
                    hint="the output is weights @ v")
        n += 1
    passed(name, f"{n} case{'s' if n != 1 else ''}")


# The answers worked out by hand (exercises 1, 2, 7 and 8) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson06` from solutions/seals/lesson06.py.
SEALS = Seals({
    "weights_shape": (None, "7ebcd4d384c803672248", {
        "swapped the last two axes: the weights are (..., T_q, T_k), one row per query, one column per key":
            "ecebb8523a39461d95d9",
        "kept d_k: it is summed away by the dot product; the last axis of the weights runs over the keys":
            "6a8f3748de5d32885423",
        "paired the queries with themselves: in cross-attention the keys come from the other (7-word) sentence":
            "387aee886417ee69d206",
        "gave the output's shape: the weights have one column per key": "0387b6f8dda7ec17558b",
    }),
    "output_shape": (None, "ddd03a02e7a4416df8f2", {
        "gave one output row per key: there is one output row per QUERY, each a weighted average of the values":
            "2f0b762eabbf67828470",
        "used d_k for the width: the output is a mix of values, so it has the values' width d_v":
            "a0e46f80c8a121917efd",
        "gave the weights' shape; the output is weights @ v": "4f50cab5524dec631aba",
    }),
    "n_scores": (None, "e91693b2331b8fcf0815", {
        "counted one sequence and one head only: every sequence (2) and every head (8) computes its own 5 x 7 scores":
            "99969664d1096f949a57",
        "counted multiplications inside the dot products; count dot products, one per query-key pair":
            "c87818df78dd5389e6fe",
        "paired queries with queries (5 x 5); in cross-attention each of the 5 queries meets each of the 7 keys":
            "743263d215f789ea407f",
        "paired keys with keys (7 x 7); each of the 5 queries meets each of the 7 keys": "d2198a923a2de12ab3fa",
        "left out the batch: each of the 2 sequences has its own 8 heads": "36ea4fea2b61e865a226",
        "left out the heads: each of the 8 heads computes its own scores": "c54d9ece0b5f84d57e44",
    }),
    "scores_flying": (3, "d74ff7452b0d1aa6c650", {
        "forgot to divide by sqrt(d_k) = sqrt(2)": "07bf015e2216193ea9e7",
        "divided by d_k = 2 instead of sqrt(2)": "75c5f2aabef1c397bbaa",
        "computed the scores of arrows' query (the second word) instead of flying's": "47648d0ce84d3f398bbc",
    }),
    "weights_flying": (2, "a3abab00bbce80fbe090", {
        "forgot to divide the scores by sqrt(2) before the softmax": "d683a73c3101e6160d6e",
        "did not normalise (these are exp(scores), not weights)": "4ead9c0355c5b8eccf0b",
        "put the weights in the wrong order: the first is flying's own (the larger score)": "d046cdbe6a167c8b1bd8",
    }),
    "output_flying": (2, "4267a88ef104c2f461a1", {
        "used flying's own value v_flying; the output is the weighted sum of both values, Σ_j α_j v_j":
            "05b14660134658dc8464",
        "used the unscaled weights": "1103c6bcf4892c5b4b0c",
        "weighted the values in the wrong order (the larger weight belongs to flying's own value)":
            "428328550f279a21b7cb",
    }),
    "output_arrows": (2, "3ea35ce1320718f8eadb", {
        "used the unscaled scores": "04e3377eea8c7d5408ed",
        "used flying's weights": "0c2502115eb90f8a8c4f",
        "put the large weight on arrows' own value (arrows' query matches flying's key better)": "c81d0c7225b2852373b9",
    }),
    "late_row_sums": (3, "7eda5c284c06fdd956c5", {
        "assumed the rows still sum to 1: zeroing weights after the softmax does not renormalise them":
            "d3c117cda62e9100e2c6",
        "counted the rows from the bottom: row 0 keeps only one weight": "546ff5b6fc202d859516",
        "counted the weights each row keeps instead of adding them up": "f0105398382f0a5072b9",
    }),
    "correct_weights": (3, "d3b69a76ada17507b707", {
        "gave the late-masked weights; with -inf before the softmax the allowed weights are renormalised":
            "e00a1b52e6b582ad22ce",
        "used the upper triangle: word i may attend to words 0..i": "8fcdbdcc4135d78ea745",
        "gave the mask itself; the weights in each row must sum to 1": "49a7dc1a92a61380bf0a",
        "left out the mask: word i may attend only to the words 0..i": "b5de1a22cb37d8846abb",
    }),
    "std_unscaled": (3, "ad46bf7cc7ad958f7aee", {
        "gave the variance (d_k); the standard deviation is its square root": "0bc523847a5e137fda4f",
        "assumed the score has the spread of one component; the 64 products add up their variances":
            "47bd4970b28861cf1663",
        "took the square root twice: the variance is d_k, the standard deviation its square root":
            "53428ce3030a57f88896",
    }),
    "std_scaled": (3, "84b4a23b7cf167e1bdbe", {
        "divided the standard deviation by d_k instead of sqrt(d_k)": "893912c678daa98fe8a4",
        "forgot that the scaling divides the spread by sqrt(d_k)": "8c9c03bd62b0fd49d727",
        "gave the variance of the unscaled score": "8ce808ed12f91828e33a",
    }),
})


def check_attention_shapes(weights_shape: Any, output_shape: Any, n_scores: Any) -> None:
    """Exercise 1: the shapes of cross-attention's weights and output, and the number of scores computed."""
    check_all(
        lambda: SEALS.check("weights_shape", weights_shape, "shape",
                            "the weights are (..., T_q, T_k): one row per query, one column per key."),
        lambda: SEALS.check("output_shape", output_shape, "shape",
                            "the output is weights @ v: (..., T_q, T_k) @ (..., T_k, d_v)."),
        lambda: SEALS.check("n_scores", n_scores, "count",
                            "one dot product per (sequence, head, query, key): multiply those four counts."),
    )


def check_flying_arrows(scores: Any, weights: Any, output: Any, output_arrows: Any = None) -> None:
    """Exercise 2: the two-word example flying = [0,1,1,1,0,0], arrows = [1,1,0,-1,-1,1]; q/k/v = dims 1-2 / 3-4 / 5-6.

    Worked out by hand, so the answers are sealed and a wrong one is never shown the expected numbers.
    """
    parts = [
        lambda: SEALS.check("scores_flying", scores, "numbers",
                            "q_flying = dims 1-2 of flying; dot it with each word's key (dims 3-4), then divide by "
                            "sqrt(d_k)"),
        lambda: SEALS.check("weights_flying", weights, "numbers",
                            "weights = exp(score_j) / (exp(score_0) + exp(score_1)); they are positive and add up "
                            "to 1"),
        lambda: SEALS.check("output_flying", output, "numbers",
                            "output = weight_flying * v_flying + weight_arrows * v_arrows, with the values from dims "
                            "5-6"),
    ]
    if output_arrows is not None:
        parts.append(lambda: SEALS.check("output_arrows", output_arrows, "numbers",
                                         "arrows asks with q = [1, 1] (its dims 1-2): score it against both keys, "
                                         "scale, softmax, then average the values"))
    check_all(*parts)


def check_late_mask(late_row_sums: Any, correct_weights: Any) -> None:
    """Exercise 7: the row sums of weights masked after the softmax, and the weights of correct masking."""
    check_all(
        lambda: SEALS.check("late_row_sums", late_row_sums, "numbers",
                            "equal scores give every weight 1/3 before masking; count how many of them the mask keeps "
                            "in each row", shape=(3,)),
        lambda: SEALS.check("correct_weights", correct_weights, "numbers",
                            "with -inf before the softmax, row i shares its weight equally among the keys 0..i it may "
                            "see", shape=(3, 3)),
    )


def check_score_spread(std_unscaled: Any, std_scaled: Any) -> None:
    """Exercise 8: the standard deviation of q · k for d_k = 64 unit-variance components, before and after scaling."""
    check_all(
        lambda: SEALS.check("std_unscaled", std_unscaled, "number",
                            "each product q_i k_i has variance 1 and the variances of the 64 independent terms add "
                            "up; the standard deviation is the square root of the variance"),
        lambda: SEALS.check("std_scaled", std_scaled, "number",
                            "dividing a quantity by a number c divides its standard deviation by c"),
    )
