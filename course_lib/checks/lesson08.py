"""Checks for the lesson 08 exercises (multi-head attention): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from .core import CheckFailed, NotAttempted, Seals, call, check_all, check_close, check_count, check_tensor, passed

# The answers worked out by hand (exercises 1 and 3) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson08` from solutions/seals/lesson08.py.
SEALS = Seals({
    "head_dim": (None, "35080543e38e74113dff", {
        "used n_heads instead of d_model / n_heads": "55d452a4643943c966f2",
        "used d_model: each head gets only d_model / n_heads of the features": "f122644be479ede0cdbb",
    }),
    "shape_after_view": (None, "302b84d1756a47087059", {
        "split the features as (d_k, n_heads): view splits the last axis into (n_heads, d_k)": "86d4b758f18dd9c850ac",
        "gave the shape after the transpose: view only splits the last axis, (B, T, n_heads, d_k)":
            "67041833da0576424907",
    }),
    "shape_heads": (None, "956523f2002a6f73bf74", {
        "forgot what transpose(1, 2) does: it swaps T and the head axis": "6bdb1a06e8a2e30d5d5e",
        "swapped the wrong axes: transpose(1, 2) swaps axes 1 and 2 (T and the heads), not the last two":
            "5076f95a9e272a9b671d",
    }),
    "shape_scores": (None, "e032662fcddbf1fc4a9d", {
        "compared features instead of tokens: scores are (T x T) per head, one row per query token":
            "a2ffd2bcb18b406d275e",
        "left out the head axis: every head has its own scores": "96163033b0a63ef73f1c",
        "gave q's shape: q @ k.transpose(-2, -1) is (T, d_k) @ (d_k, T) in every head": "b5da505f10f89e161a54",
    }),
    "shape_merged": (None, "ab6bf53a70573f7abd06", {
        "stopped before the reshape: merging ends with (B, T, d_model)": "a695b998efbb95ef9123",
        "kept a per-head width: the heads are concatenated back to d_model features": "2e46d598b02673028c78",
        "kept the heads in front of T: merging transposes back before the reshape": "e2909617fa7b36835414",
    }),
    "shape_cross_scores": (None, "8bd631b857c86764c65a", {
        "swapped queries and keys: rows are the 10 queries, columns the 7 keys of the context": "f70fb89031997b3944a9",
        "used the query length for the keys: the keys come from the 7-token context": "d90b1c6c4e95b3b3aaf5",
        "used the context length for the queries too: the queries are still the 10 tokens": "b140131a1e5d0bd285f2",
    }),
    "n_params_bias": (None, "f7c2e7ca1ec704955ad9", {
        "forgot the output projection W_O (three matrices instead of four)": "a6b20478bddfb4c99329",
        "gave every head its own full d_model × d_model matrices: a head only gets d_model × d_k of each, so the "
        "heads together use d_model × d_model":
            "cb06f69586ed98456b34",
        "counted each head's projections as d_k × d_k: a head maps all d_model input features to d_k":
            "8a86780317117b16b3c8",
        "multiplied the count by the number of heads: the head count does not change the parameter count. The heads "
        "share out each d_model × d_model matrix, d_model × d_k each, and n_heads × d_k = d_model":
            "4997b564f8bbec5db5ee",
        "multiplied the weights by the number of heads: the head count does not change the parameter count; the heads "
        "share out each d_model × d_model matrix":
            "ceb55eb0bdf2659d6e77",
        "left out the biases (one per output feature of each of the four layers: 4 · d_model)": "5880966a7869ee58fcdb",
    }),
    "n_params_no_bias": (None, "083fe8f866cacfdfc3e1", {
        "forgot the output projection W_O (three matrices instead of four)": "549ec5c731f4b5670ada",
        "gave every head its own full d_model × d_model matrices: a head only gets d_model × d_k of each, so the "
        "heads together use d_model × d_model":
            "d36cdb18a24f2c03756d",
        "counted each head's projections as d_k × d_k: a head maps all d_model input features to d_k":
            "085f80af21ba1e238e29",
        "multiplied the count by the number of heads: the head count does not change the parameter count. The heads "
        "share out each d_model × d_model matrix, d_model × d_k each, and n_heads × d_k = d_model (or else you "
        "multiplied the weights by the number of heads: the head count does not change the parameter count; the heads "
        "share out each d_model × d_model matrix)":
            "6c69e457dfb83c615f6d",
        "counted biases, but these layers were built with bias=False": "2acd9edfc7d548724eaf",
    }),
    "head_q_weights": (None, "a094178bba498594cf9b", {
        "counted a d_k x d_k block: a head's W_q maps all d_model input features to its d_k features":
            "2f06c21ed4dd87d85752",
        "counted the whole W_q: the 4 heads share it out, each gets d_model x d_k": "4dd5009c411c27cf6b28",
        "added biases: the question asks for the weights only": "54f3e8253589adde4218",
    }),
})


def check_head_shapes(head_dim: Any, shape_after_view: Any, shape_heads: Any, shape_scores: Any, shape_merged: Any,
                      shape_cross_scores: Any) -> None:
    """Exercise 1: the shapes through the head split of MultiHeadAttention(96, 8) on 4 sequences of 10 tokens."""
    check_all(
        lambda: SEALS.check("head_dim", head_dim, "count",
                            "the heads share out the d_model features equally: d_k = d_model // n_heads"),
        lambda: SEALS.check("shape_after_view", shape_after_view, "shape",
                            "view splits the last axis: (B, T, d_model) -> (B, T, n_heads, d_k)"),
        lambda: SEALS.check("shape_heads", shape_heads, "shape", "transpose(1, 2) swaps axes 1 and 2"),
        lambda: SEALS.check("shape_scores", shape_scores, "shape",
                            "each head compares every query token with every key token"),
        lambda: SEALS.check("shape_merged", shape_merged, "shape", "merging undoes the split: back to (B, T, d_model)"),
        lambda: SEALS.check("shape_cross_scores", shape_cross_scores, "shape",
                            "in cross-attention the queries come from x, the keys from the context"),
    )


def check_param_counts(n_params_bias: Any, n_params_no_bias: Any, head_q_weights: Any) -> None:
    """Exercise 3: the parameters of MultiHeadAttention(256, 4), of (256, 16, bias=False), and one head's W_q block."""
    hint = ("count each nn.Linear(d_model, d_model): a weight matrix of d_model × d_model numbers, "
            "plus d_model biases if it has them.")
    check_all(
        lambda: SEALS.check("n_params_bias", n_params_bias, "count", hint),
        lambda: SEALS.check("n_params_no_bias", n_params_no_bias, "count", hint),
        lambda: SEALS.check("head_q_weights", head_q_weights, "count",
                            "one head's block of W_q maps the d_model inputs to its d_k outputs."),
    )


def _randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def _split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, C = x.shape
    return x.reshape(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, h, T, d_k)


def _merge(x: torch.Tensor) -> torch.Tensor:
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)  # (B, T, h*d_k)


_SPLIT_MISTAKES = {
    "reshaped straight to (B, n_heads, T, d_k) without the transpose: each 'head' then holds pieces of "
    "several tokens. Split the last axis with view(B, T, n_heads, d_k), then transpose(1, 2)":
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
    "split the features as (d_k, n_heads) instead of (n_heads, d_k): head i then gets every n_heads-th "
    "feature instead of a block of d_k neighbouring features":
        lambda x, h: x.reshape(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2),
}


_MERGE_MISTAKES = {
    "reshaped (B, n_heads, T, d_k) straight to (B, T, d_model) without transposing back first: that "
    "glues together rows of different tokens. Use transpose(1, 2) then reshape":
        lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
    "put the features in (d_k, n_heads) order instead of (n_heads, d_k): concatenate whole heads, "
    "head 0's d_k features first":
        lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
}


def check_split_heads(fn: Callable, cases: Sequence[tuple[int, int, int, int]] = ((2, 5, 12, 3),),
                      seed: int = 0) -> None:
    """`fn(x, n_heads)`: (B, T, d_model) -> (B, n_heads, T, d_model // n_heads). Cases are (B, T, d_model, n_heads)."""
    for i, (B, T, C, h) in enumerate(cases):
        x = _randn(B, T, C, seed=seed + i)
        got = call("split_heads", fn, x.clone(), h)
        check_tensor("split_heads", got, f"when called with x of shape {(B, T, C)}, n_heads={h}")
        if isinstance(got, torch.Tensor) and T != h and tuple(got.shape) == (B, T, h, C // h):
            raise CheckFailed(
                "split_heads", f"got shape (B, T, n_heads, d_k) = {tuple(got.shape)}, expected (B, n_heads, T, d_k) = "
                f"{(B, h, T, C // h)}.",
                "it looks like you forgot transpose(1, 2): the heads must come before T, so they act like a batch "
                "axis.",
            )
        wrong = {d: m(x, h) for d, m in _SPLIT_MISTAKES.items()}
        check_close(f"split_heads(x of shape {(B, T, C)}, n_heads={h})", got, _split(x, h), mistakes=wrong, quiet=True)
    passed("split_heads", f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def check_merge_heads(fn: Callable, cases: Sequence[tuple[int, int, int, int]] = ((2, 3, 5, 4),), seed: int = 0,
                      split_fn: Callable | None = None) -> None:
    """`fn(x)`: (B, n_heads, T, d_k) -> (B, T, n_heads * d_k). Cases are (B, n_heads, T, d_k).

    With `split_fn` (the learner's split_heads) it also checks that merging undoes splitting.
    """
    for i, (B, h, T, d_k) in enumerate(cases):
        x = _randn(B, h, T, d_k, seed=seed + 100 + i)
        got = call("merge_heads", fn, x.clone())
        check_tensor("merge_heads", got, f"when called with x of shape {(B, h, T, d_k)}")
        wrong = {d: m(x) for d, m in _MERGE_MISTAKES.items()}
        check_close(f"merge_heads(x of shape {(B, h, T, d_k)})", got, _merge(x), mistakes=wrong, quiet=True)
        if split_fn is not None:
            y = _randn(B, T, h * d_k, seed=seed + 200 + i)
            back = call("merge_heads", fn, call("split_heads", split_fn, y.clone(), h))
            check_close("merge_heads(split_heads(y))", back, y, quiet=True,
                        hint="merging should undo splitting exactly: the same token's features, in the same order.")
    passed("merge_heads", f"{len(cases)} case{'s' if len(cases) != 1 else ''}"
           + (", and it undoes split_heads" if split_fn is not None else ""))


def check_split_merge(split_fn: Callable, merge_fn: Callable) -> None:
    """Exercise 2: split_heads and merge_heads, each checked and both reported."""
    check_all(lambda: check_split_heads(split_fn), lambda: check_merge_heads(merge_fn, split_fn=split_fn))


def check_mha_param_count(name: str, value: Any, d_model: int, n_heads: int, bias: bool = True) -> None:
    """The number of parameters of MultiHeadAttention(d_model, n_heads, bias), naming the usual miscounts."""
    d, h = d_model, n_heads
    d_k = d // h
    b = 1 if bias else 0
    expected = 4 * d * d + 4 * d * b
    mistakes = {
        "forgot the output projection W_O (three matrices instead of four)": 3 * d * d + 3 * d * b,
        "gave every head its own full d_model × d_model matrices: a head only gets d_model × d_k of each, "
        "so the heads together use d_model × d_model": h * (3 * d * d + 3 * d * b) + d * d + d * b,
        "counted each head's projections as d_k × d_k: a head maps all d_model input features to d_k":
            3 * h * d_k * d_k + d * d + (4 * d) * b,
        f"multiplied the count by the number of heads ({h}): the head count does not change the parameter count. "
        f"The {h} heads share out each d_model × d_model matrix, d_model × d_k each, and {h} × d_k = d_model":
            h * (4 * d * d + 4 * d * b),
        f"multiplied the weights by the number of heads ({h}): the head count does not change the parameter count; "
        f"the {h} heads share out each d_model × d_model matrix": h * 4 * d * d + 4 * d * b,
    }
    if bias:
        mistakes["left out the biases (one per output feature of each of the four layers: 4 · d_model)"] = 4 * d * d
    else:
        mistakes["counted biases, but these layers were built with bias=False"] = 4 * d * d + 4 * d
    check_count(name, value, expected, mistakes, detail=f"{expected:,}",
                hint="count each nn.Linear(d_model, d_model): a weight matrix of d_model × d_model numbers, "
                     "plus d_model biases if it has them.")


def _combine_mistakes(heads: torch.Tensor, w_o: torch.Tensor, b_o: torch.Tensor | None) -> dict[str, torch.Tensor]:
    B, h, T, d_k = heads.shape
    bias = 0.0 if b_o is None else b_o
    per_head = [heads[:, i] @ w_o[:, i * d_k:(i + 1) * d_k].T for i in range(h)]  # each (B, T, d_model)
    wrong = {
        "averaged the per-head projections instead of summing them: the heads are combined by W_O, "
        "a learned linear map, and its blocks simply add up": sum(per_head) / h + bias,
        "used W_O's rows (math's x·W convention): nn.Linear stores the weight as (out, in), so head i "
        "meets the columns w_o[:, i*d_k:(i+1)*d_k], multiplied as head @ block.T":
            sum(heads[:, i] @ w_o[i * d_k:(i + 1) * d_k, :] for i in range(h)) + bias,
    }
    if b_o is not None:
        wrong["added the bias once per head: W_O has one bias, added once after the sum"] = sum(per_head) + h * b_o
        wrong["forgot the bias b_o"] = sum(per_head)
    return wrong


def check_combine_by_sum(fn: Callable,
                         cases: Sequence[tuple[int, int, int, int, bool]] = ((2, 3, 4, 2, True), (1, 2, 3, 4, False)),
                         seed: int = 0) -> None:
    """`fn(heads, w_o, b_o)`: heads (B, h, T, d_k), w_o (d_model, d_model), b_o (d_model,) or None -> (B, T, d_model).

    The reference is concatenate-then-project: merge the heads and apply nn.Linear's map. Cases are
    (B, h, T, d_k, with_bias).
    """
    for i, (B, h, T, d_k, with_bias) in enumerate(cases):
        d = h * d_k
        heads = _randn(B, h, T, d_k, seed=seed + 300 + i)
        w_o = _randn(d, d, seed=seed + 400 + i, scale=d ** -0.5)
        b_o = _randn(d, seed=seed + 500 + i) if with_bias else None
        bias = f"of shape {(d,)}" if with_bias else "None"
        shown = f"heads of shape {(B, h, T, d_k)}, w_o of shape {(d, d)}, b_o {bias}"
        try:
            got = call("combine_by_sum", fn, heads.clone(), w_o.clone(), None if b_o is None else b_o.clone())
        except NotAttempted:
            raise
        except CheckFailed as err:
            error = err.problem.split(" when called as ")[0]  # the error itself, without the shapes of the call
            if b_o is None and "NoneType" in error:
                raise CheckFailed("combine_by_sum", err.problem,
                                  "b_o may be None (a layer built with bias=False): add the bias only when there is "
                                  "one, "
                                  "e.g. `if b_o is not None: out = out + b_o`") from None
            shape_errors = ("cannot be multiplied", "must match the size", "size mismatch", "Expected size",
                            "shape mismatch")
            if not any(words in error for words in shape_errors):
                raise
            raise CheckFailed("combine_by_sum", err.problem,
                              f"mind the shapes: heads[:, i] is (B, T, d_k) = {(B, T, d_k)}, and head i's block of w_o "
                              "is "
                              f"the columns w_o[:, i*d_k:(i+1)*d_k], shape (d_model, d_k) = {(d, d_k)}. nn.Linear "
                              "computes "
                              "x @ W.T, so multiply heads[:, i] @ block.T to get (B, T, d_model); without the .T the "
                              "shapes do not fit") from None
        check_tensor("combine_by_sum", got, f"when called with {shown}")
        want = torch.nn.functional.linear(_merge(heads), w_o, b_o)  # concatenate, then W_O
        check_close(f"combine_by_sum(heads of shape {(B, h, T, d_k)}, bias={'yes' if with_bias else 'None'})",
                    got, want, mistakes=_combine_mistakes(heads, w_o, b_o), quiet=True)
    passed("combine_by_sum", f"{len(cases)} case{'s' if len(cases) != 1 else ''}: equal to concatenate-then-W_O")


_MHA_KEYS = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")


def _params(d: int, seed: int, bias: bool = True) -> dict[str, torch.Tensor | None]:
    p: dict[str, torch.Tensor | None] = {}
    for j, name in enumerate(("q", "k", "v", "o")):
        # scores large enough that scaling matters
        p[f"w_{name}"] = _randn(d, d, seed=seed + 10 * j, scale=1.5 * d ** -0.5)
        p[f"b_{name}"] = _randn(d, seed=seed + 10 * j + 1, scale=0.5) if bias else None
    return p


def _mha(x, p, n_heads, mask=None, *, scale="d_k", values="v", split="ok", merge="ok", project_out=True, mask_mode="ok",
         softmax_dim=-1):
    """A configurable multi-head attention: the defaults are right, each keyword makes one known mistake."""
    F = torch.nn.functional
    B, T, d = x.shape
    d_k = d // n_heads
    q, k, v = (F.linear(x, p[f"w_{n}"], p[f"b_{n}"]) for n in "qkv")  # (B, T, d) each
    if values == "q":
        v = q
    if split == "no_transpose":
        q, k, v = (t.reshape(B, n_heads, T, d_k) for t in (q, k, v))
    else:
        q, k, v = (_split(t, n_heads) for t in (q, k, v))  # (B, h, T, d_k)
    scores = q @ k.transpose(-2, -1)  # (B, h, T, T)
    if scale == "d_k":
        scores = scores / math.sqrt(d_k)
    elif scale == "d_model":
        scores = scores / math.sqrt(d)
    if mask is not None and mask_mode == "ok":
        scores = scores.masked_fill(~mask, float("-inf"))
    if mask is not None and mask_mode == "inverted":
        scores = scores.masked_fill(mask, float("-inf"))
    if mask is not None and mask_mode == "zero":
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights * mask
    out = weights @ v  # (B, h, T, d_k)
    out = out.reshape(B, T, d) if "no_transpose" in (split, merge) else _merge(out)  # (B, T, d)
    return F.linear(out, p["w_o"], p["b_o"]) if project_out else out


def _reference_mha(x, p, n_heads, mask=None):
    """torch.nn.MultiheadAttention with the same weights (an independent reference)."""
    d = x.shape[-1]
    bias = p["b_q"] is not None
    ref = torch.nn.MultiheadAttention(d, n_heads, bias=bias, batch_first=True).to(x.dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([p["w_q"], p["w_k"], p["w_v"]]))
        ref.out_proj.weight.copy_(p["w_o"])
        if bias:
            ref.in_proj_bias.copy_(torch.cat([p["b_q"], p["b_k"], p["b_v"]]))
            ref.out_proj.bias.copy_(p["b_o"])
        attn_mask = None if mask is None else ~mask  # torch's boolean mask means True = blocked
        out, _ = ref(x, x, x, attn_mask=attn_mask, need_weights=False)
    return out


_MHA_MISTAKES = {
    "scaled the scores by sqrt(d_model) instead of sqrt(d_k): each head's dot products run over d_k = "
    "d_model / n_heads features, so their variance is d_k": dict(scale="d_model"),
    "forgot to divide the scores by sqrt(d_k)": dict(scale="none"),
    "used the queries as the values: each head's values come from V = x W_v": dict(values="q"),
    "reshaped to (B, n_heads, T, d_k) without the transpose, so heads mix features of different tokens":
        dict(split="no_transpose"),
    "forgot the output projection W_O after concatenating the heads": dict(project_out=False),
    "split the heads correctly but merged them by reshaping (B, n_heads, T, d_k) straight to (B, T, d_model): "
    "that glues together rows of different tokens. Transpose back first: out.transpose(1, 2).reshape(B, T, d_model)":
        dict(merge="no_transpose"),
    "used the mask the wrong way round (True means 'may attend')": dict(mask_mode="inverted"),
    "applied the mask after the softmax: masked scores must be set to -inf before it, so that the "
    "remaining weights still sum to 1": dict(mask_mode="after_softmax"),
    "filled the masked scores with 0 instead of -inf: a score of 0 still gets the weight exp(0) in the softmax, "
    "so the future tokens still count; use masked_fill(~mask, float('-inf'))": dict(mask_mode="zero"),
    "took the softmax over the wrong axis (over the queries, dim=-2): each row of scores, over the keys "
    "(dim=-1), must sum to 1": dict(softmax_dim=-2),
    "took the softmax over the heads (dim=1): each head's rows of scores, over the keys (dim=-1), must sum to 1":
        dict(softmax_dim=1),
}


def check_mha_forward(fn: Callable, cases: Sequence[tuple[int, int, int, int, str | None]] = ((2, 5, 12, 3, None),),
                      seed: int = 0) -> None:
    """`fn(x, params, n_heads, mask=None)` against nn.MultiheadAttention with the same weights.

    `params` holds `w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o` in nn.Linear's layout. Cases are
    (B, T, d_model, n_heads, mask) with mask None or "causal".
    """
    for i, (B, T, d, h, mask_kind) in enumerate(cases):
        x = _randn(B, T, d, seed=seed + 600 + i)
        p = _params(d, seed=seed + 700 + 37 * i)
        mask = torch.ones(T, T, dtype=torch.bool).tril() if mask_kind == "causal" else None
        args = (x.clone(), {k: (None if t is None else t.clone()) for k, t in p.items()}, h)
        got = call("mha_forward", fn, *args, **({"mask": mask.clone()} if mask is not None else {}))
        shown = f"x of shape {(B, T, d)}, n_heads={h}" + (", causal mask" if mask is not None else "")
        check_tensor("mha_forward", got, f"when called with {shown}")
        want = _reference_mha(x, p, h, mask)
        wrong = {}
        for description, kw in _MHA_MISTAKES.items():
            if "mask_mode" in kw and mask is None:
                continue
            if kw.get("softmax_dim") == 1 and h == 1:
                continue  # one head: a softmax over the head axis is all ones, not a mistake worth naming here
            if "no_transpose" in (kw.get("split"), kw.get("merge")) and h == 1:
                continue  # with one head the transpose changes nothing
            wrong[description] = _mha(x, p, h, mask, **kw)
        check_close(f"mha_forward({shown})", got, want, atol=1e-4, rtol=1e-4, mistakes=wrong, quiet=True,
                    hint="project x with W_q, W_k, W_v; split into heads (view, then transpose(1, 2)); in each head "
                         "softmax(q @ k.transpose(-2, -1) / sqrt(d_k)) over the keys (dim=-1), with masked scores set "
                         "to "
                         "-inf before it; multiply by v, merge the heads (transpose back, then reshape) and apply W_O")
    passed("mha_forward", f"{len(cases)} case{'s' if len(cases) != 1 else ''}, equal to torch.nn.MultiheadAttention")


def check_fused_mha(fn: Callable, buggy: Callable | None = None,
                    cases: Sequence[tuple[int, int, int, int]] = ((2, 5, 12, 3),), seed: int = 0) -> None:
    """`fn(x, w_qkv, b_qkv, w_o, b_o, n_heads)` (one fused (3·d_model, d_model) projection) against
    nn.MultiheadAttention, whose `in_proj_weight` has exactly this layout. Cases are (B, T, d_model, n_heads).

    `buggy` is the given broken version: returning its output unchanged is named as such.
    """
    for i, (B, T, d, h) in enumerate(cases):
        x = _randn(B, T, d, seed=seed + 800 + i)
        p = _params(d, seed=seed + 900 + 37 * i)
        w_qkv = torch.cat([p["w_q"], p["w_k"], p["w_v"]])  # (3d, d)
        b_qkv = torch.cat([p["b_q"], p["b_k"], p["b_v"]])  # (3d,)
        got = call("fused_mha", fn, x.clone(), w_qkv.clone(), b_qkv.clone(), p["w_o"].clone(), p["b_o"].clone(), h)
        check_tensor("fused_mha", got, f"when called with x of shape {(B, T, d)}, n_heads={h}")
        want = _reference_mha(x, p, h)
        wrong = {}
        if buggy is not None:
            with torch.no_grad():
                wrong["returned the given implementation unchanged: both of its bugs are still there"] = buggy(
                    x.clone(), w_qkv.clone(), b_qkv.clone(), p["w_o"].clone(), p["b_o"].clone(), h)
        wrong |= {
            "fixed the scaling but not the head split: reshape to (B, T, n_heads, d_k), then transpose(1, 2)":
                _mha(x, p, h, split="no_transpose"),
            "fixed the head split but not the scaling: divide by sqrt(d_k), the per-head width":
                _mha(x, p, h, scale="d_model"),
            "fixed the split into heads but not the merge: (B, n_heads, T, d_k) needs transpose(1, 2) "
            "before the reshape to (B, T, d_model)": _mha(x, p, h, merge="no_transpose"),
            "fixed the split but neither the merge nor the scaling":
                _mha(x, p, h, merge="no_transpose", scale="d_model"),
            "used the queries as the values": _mha(x, p, h, values="q"),
        }
        check_close(f"fused_mha(x of shape {(B, T, d)}, n_heads={h})", got, want, atol=1e-4, rtol=1e-4, mistakes=wrong,
                    quiet=True)
    passed("fused_mha", f"{len(cases)} case{'s' if len(cases) != 1 else ''}, equal to torch.nn.MultiheadAttention")
