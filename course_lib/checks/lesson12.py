"""Checks for the lesson 12 exercises (the modern decoder): sealed hand-worked answers, reference
functions, mistake tables and one check per exercise.

The learner's functions are treated as black boxes: they are called with plain tensors and only
what they return is looked at.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from course_lib.positional import apply_rotary, rotate_half_permutation

from .core import CheckFailed, Seals, call, check_all, check_tensor, passed

# --- sealed answers ---------------------------------------------------------------------------------
# Answers worked out by hand (exercises 1, 2 and 4) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson12` from solutions/seals/lesson12.py.
# The table as `course seal` writes it (solutions/seals/): the formatter leaves it alone.
# fmt: off
SEALS = Seals({
    "kv_bytes_per_token": (None, "4d0acd30c3d198e4c485", {
        "used the 28 query heads: only the 4 key/value heads are cached (GQA)": "1fa49e5cd3cc845ecfd2",
        "are off by a factor 2, too small: either you left out the 2 for a key AND a value, or you counted values, "
        "not bytes (2 bytes per bf16 value)":
            "cb5852115ac1a0a63f94",
        "counted 4 bytes per value: bf16 takes 2 bytes": "b01439aa0691266aab91",
        "counted one layer: every one of the 28 layers keeps its own cache": "5e527a4ffbf21608e314",
        "used the model width, 28 x 128 = 3,584, as the key width: a key/value head is 128 wide":
            "08760d688b847f1bea77",
    }),
    "kv_cache_gib": (2, "5209aa7b8a53d8ea36ba", {
        "divided by 10^9 (GB): a GiB is 2^30 = 1,073,741,824 bytes": "7a2616f8277a4489736a",
        "used the 28 query heads: only the 4 key/value heads are cached (GQA)": "dd6d4b6bbc2a44b78960",
        "left out the factor 2: every layer caches a key AND a value": "4841f4208f8bc7961b90",
        "counted 4 bytes per value: bf16 takes 2 bytes": "ed45da2cb715c4556691",
        "gave MiB: divide by 2^30 for GiB, not 2^20": "41a5ee1d5f6ecec8443e",
        "used 32,000 tokens: 32k here is 32,768 = 2^15": "d04e7f1d97e28effde10",
    }),
    "d_ff_equal": (None, "d671548ec8d7ed16c393", {
        "kept the GELU network's 4 x d_model (or counted two matrices for SwiGLU): w1, w3 and w2 make three, so the "
        "hidden width shrinks":
            "d6b4efdc3d2d517ac606",
        "gave the parameter count: the answer is the hidden width d_ff": "b4889358705a9607fa3d",
        "divided 4 x d_model by 2 instead of 2 x 4 x d_model by 3": "19e1caf6a6b8a479e2fd",
    }),
    "d_ff_llama": (None, "005d621014cd7601ba97", {
        "rounded down: Llama 2 rounds 8/3 x d_model UP to the next multiple of 256": "dedb8d9b022d36e32c37",
        "did not round: Llama 2's width is a multiple of 256": "83aa8e2f3ded648587ee",
        "rounded 8/3 x d_model to the nearest integer only: Llama 2 rounds up to a multiple of 256":
            "bfdbf67134c15237eaee",
        "used 4 x d_model, the GELU network's width": "631613717fa3dd828221",
        "gave Llama 3 8B's (and Mistral 7B's) width, 3.5 x d_model: that is a later, wider choice; the question asks "
        "for Llama 2's rule, 8/3 x d_model rounded up to a multiple of 256":
            "3c604fa79b452130eace",
    }),
    "m_new": (3, "6dfaf8684b43bf4fc1a2", {
        "kept the old maximum: the new maximum is the larger of the old one and this block's largest score":
            "669a98333a2eff78425c",
        "took this block's smallest score: the running maximum is the largest score seen so far":
            "709e61b91eb407e08f9e",
        "added the maxima: the new maximum is max(m_old, max(s_new))": "bafcf7e787b14d2aec2b",
    }),
    "l_new": (3, "66e3fbd399939281da9a", {
        "did not rescale the old sum: multiply l_old by exp(m_old - m_new) before adding the new block's terms":
            "b0b0aacaca050f7cf237",
        "rescaled by exp(m_new - m_old): the old terms were exp(s - m_old) and must become exp(s - m_new), so "
        "multiply by exp(m_old - m_new) (less than 1)":
            "12db1bb1d1e10c33b9f5",
        "added exp(s) without subtracting the new maximum: the new terms are exp(s - m_new)": "d97f9ff9634f689d1f91",
    }),
    "out_new": (3, "31def72d608a682a1f89", {
        "did not rescale the old weighted sum: acc_old must be multiplied by exp(m_old - m_new) too":
            "08c108d89ef707920fcd",
        "did not rescale the old sum l: both l_old and acc_old are multiplied by exp(m_old - m_new)":
            "69362627542a5e4e12fb",
        "gave the weighted sum acc without dividing by l: the output is acc / l": "712dd52c451a8484f23c",
        "rescaled by exp(m_new - m_old): the correction factor is exp(m_old - m_new)": "68550c53c7e91f200c19",
        "added exp(s) without subtracting the new maximum: the new terms are exp(s - m_new)": "cd37016472054724c533",
    }),
})
# fmt: on


# --- exercise 1: a KV cache by hand ---------------------------------------------------------------------


def check_kv_cache(kv_bytes_per_token: Any, kv_cache_gib: Any) -> None:
    """Exercise 1: bytes of KV cache per token, and the cache of a 32k-token sequence in GiB."""
    check_all(
        lambda: SEALS.check(
            "kv_bytes_per_token",
            kv_bytes_per_token,
            kind="count",
            hint="per token: 2 (key and value) x layers x key/value heads x head width x bytes per value",
        ),
        lambda: SEALS.check(
            "kv_cache_gib",
            kv_cache_gib,
            hint="multiply the bytes per token by the number of tokens, then divide by 2**30",
        ),
    )


# --- exercise 2: SwiGLU's width --------------------------------------------------------------------------


def check_d_ff(d_ff_equal: Any, d_ff_llama: Any) -> None:
    """Exercise 2: the SwiGLU width with a GELU network's parameters, and Llama 2's rounding of it."""
    check_all(
        lambda: SEALS.check(
            "d_ff_equal",
            d_ff_equal,
            kind="count",
            hint="a 4d GELU network has 2 x d x 4d weights; SwiGLU has 3 x d x d_ff: set them equal",
        ),
        lambda: SEALS.check(
            "d_ff_llama",
            d_ff_llama,
            kind="count",
            hint="Llama 2's rule: 8/3 x 4096 is not a whole number; round it up to the next multiple of 256",
        ),
    )


# --- exercise 4: one online-softmax step -------------------------------------------------------------------


def check_online_step(m_new: Any, l_new: Any, out_new: Any) -> None:
    """Exercise 4: the running maximum, the running sum and the output after one more block of keys."""
    check_all(
        lambda: SEALS.check("m_new", m_new, hint="the running maximum is the largest score seen so far"),
        lambda: SEALS.check(
            "l_new", l_new, hint="l_new = l_old * exp(m_old - m_new) + the sum of exp(s - m_new) over the new block"
        ),
        lambda: SEALS.check(
            "out_new",
            out_new,
            kind="numbers",
            hint="acc_new = acc_old * exp(m_old - m_new) + the sum of exp(s - m_new) * v over the new "
            "block; the output is acc_new / l_new, a vector of 2 numbers",
        ),
    )


# --- function checks: run every case, name a mistake only when it explains them all ------------------------


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool(torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-5))


def _function_check(
    name: str,
    fn: Callable,
    cases: Sequence[tuple],
    reference: Callable,
    mistakes: Callable,
    hint: str,
    describe: Callable[[tuple], str],
) -> None:
    """Call `fn(*case)` for every case; pass when it equals `reference(*case)` in all of them. Otherwise
    name the mistake whose output equals the learner's in every case where it differs from the right
    one (a mistake that explains one case only is not named), or give the general hint."""
    results = []
    for case in cases:
        shown = describe(case)
        got = call(name, fn, *[c.clone() if isinstance(c, torch.Tensor) else c for c in case])
        check_tensor(name, got, f"when called as {shown}")
        want = reference(*case)
        if tuple(got.shape) != tuple(want.shape):
            raise CheckFailed(
                name, f"expected shape {tuple(want.shape)}, got {tuple(got.shape)} when called as {shown}.", hint
            )
        results.append((shown, got.detach(), want, mistakes(*case)))
    failing = [r for r in results if not _close(r[1], r[2])]
    if not failing:
        passed(name, f"{len(cases)} cases")
        return
    shown = failing[0][0]
    for description in failing[0][3]:
        if all(_close(g, m[description]) or (_close(m[description], w) and _close(g, w)) for _, g, w, m in results):
            raise CheckFailed(
                name, f"the values are not right when called as {shown}.", f"it looks like you {description}."
            )
    raise CheckFailed(name, f"the values are not right when called as {shown}.", hint)


# --- exercise 3: one key/value head for each group of query heads --------------------------------------------


def reference_expand_kv(k: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, n_kv, T, d) -> (B, n_heads, T, d); query head h reads kv head h // (n_heads // n_kv)."""
    return k.repeat_interleave(n_heads // k.shape[1], dim=1)


def _expand_mistakes(k: torch.Tensor, n_heads: int) -> dict[str, torch.Tensor]:
    g = n_heads // k.shape[1]
    return {
        "tiled the heads (k.repeat(1, g, 1, 1) gives 0, 1, 0, 1, ...): neighbouring query heads share a key/value "
        "head, so each must be repeated in place (repeat_interleave along dim 1)": k.repeat(1, g, 1, 1),
        "used the kv head h % n_kv_heads for query head h: the groups are contiguous, query head h reads kv head "
        "h // (n_heads // n_kv_heads)": k[:, torch.arange(n_heads) % k.shape[1]],
    }


def _expand_cases(hidden: bool) -> list[tuple[torch.Tensor, int]]:
    g = torch.Generator().manual_seed(12 if hidden else 3)
    shapes = (
        [((2, 2, 3, 4), 6), ((1, 1, 5, 2), 4), ((1, 4, 2, 2), 4)]
        if hidden
        else [((1, 2, 3, 4), 4), ((2, 3, 2, 2), 6), ((1, 1, 4, 2), 3)]
    )
    return [(torch.randn(*shape, generator=g), n) for shape, n in shapes]


def check_expand_kv(fn: Callable, *, hidden: bool = False, name: str = "expand_kv") -> None:
    """Exercise 3: the learner's expand_kv(k, n_heads) against repeat_interleave on the head axis."""
    _function_check(
        name,
        fn,
        _expand_cases(hidden),
        reference_expand_kv,
        _expand_mistakes,
        "return (B, n_heads, T, d) in which query head h holds key/value head h // (n_heads // n_kv)",
        lambda case: f"{name}(k of shape {tuple(case[0].shape)}, n_heads={case[1]})",
    )


# --- exercise 5: a sliding-window mask -----------------------------------------------------------------------


def reference_window_mask(T: int, W: int) -> torch.Tensor:
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return (j <= i) & (i - j < W)  # (T, T)


def _window_mistakes(T: int, W: int) -> dict[str, torch.Tensor]:
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return {
        "let each token see W positions BEFORE it (W + 1 with itself): a window of W counts the token itself, "
        "so i - j < W": (j <= i) & (i - j <= W),
        "let each token see only W - 1 positions with itself: the window of W includes the token itself, "
        "so keep i - j < W (i - j = W - 1 is allowed)": (j <= i) & (i - j < W - 1),
        "forgot the causal part: a token must not see later positions (j <= i)": (i - j).abs() < W,
        "transposed the mask: row i is the query, and it may see the keys j <= i (below the diagonal)": (
            (j <= i) & (i - j < W)
        ).T,
        "kept only the causal mask: the window also hides keys W or more positions back": j <= i,
        "returned the blocked positions (True = blocked, the convention of torch.nn.MultiheadAttention's "
        "attn_mask): here True means MAY attend, as in F.scaled_dot_product_attention": ~((j <= i) & (i - j < W)),
    }


def check_window_mask(fn: Callable, *, hidden: bool = False, name: str = "window_mask") -> None:
    """Exercise 5: the learner's window_mask(T, W), a boolean (T, T) mask, True = may attend."""
    cases = [(7, 3), (5, 1), (6, 6), (9, 4)] if hidden else [(6, 2), (5, 3), (4, 10)]

    def reference(T, W):
        return reference_window_mask(T, W)

    def wrapped(T, W):
        got = call(name, fn, T, W)
        check_tensor(name, got, f"when called as {name}({T}, {W})")
        if got.dtype != torch.bool:
            raise CheckFailed(
                name,
                f"expected a boolean tensor (True = may attend), got dtype {got.dtype} when called "
                f"as {name}({T}, {W}).",
                "compare positions, e.g. (j <= i) & (i - j < W), which gives "
                "booleans; a float 0/1 mask would be added to the scores, not used to block them",
            )
        return got

    _function_check(
        name,
        wrapped,
        cases,
        reference,
        _window_mistakes,
        "row i (the query) may attend to key j when j <= i and i - j < W",
        lambda case: f"{name}({case[0]}, {case[1]})",
    )


# --- exercise 6: rotary positions in attention -----------------------------------------------------------------


def reference_rope_attention(x, W_q, W_k, W_v, n_heads: int) -> torch.Tensor:
    """Causal multi-head self-attention of x (T, d) with rotary q and k per head; returns (T, d)."""
    T, d = x.shape
    hd = d // n_heads

    def heads(t):  # (T, d) -> (n_heads, T, hd)
        return t.view(T, n_heads, hd).transpose(0, 1)

    q, k, v = heads(x @ W_q), heads(x @ W_k), heads(x @ W_v)
    q, k = apply_rotary(q), apply_rotary(k)
    return _attend(q, k, v).transpose(0, 1).reshape(T, d)


def _attend(q, k, v):
    T = q.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def _rope_mistakes(x, W_q, W_k, W_v, n_heads: int) -> dict[str, torch.Tensor]:
    T, d = x.shape
    hd = d // n_heads

    def heads(t):
        return t.view(T, n_heads, hd).transpose(0, 1)

    def merge(t):
        return t.transpose(0, 1).reshape(T, d)

    q, k, v = x @ W_q, x @ W_k, x @ W_v
    rq, rk = apply_rotary(heads(q)), apply_rotary(heads(k))
    perm = rotate_half_permutation(hd)
    inverse = torch.argsort(perm)

    def rotate_half(t):  # Hugging Face's pairing of feature i with i + head_dim/2, written with the course's
        return apply_rotary(t[..., perm])[..., inverse]

    return {
        "rotated the values too: rotary positions turn only q and k (the scores); the values carry content": merge(
            _attend(rq, rk, apply_rotary(heads(v)))
        ),
        "rotated q and k before splitting the heads, with d_model's frequencies: rotate each head's (T, head_dim) "
        "queries and keys, so every head gets the frequencies of head_dim": merge(
            _attend(heads(apply_rotary(q)), heads(apply_rotary(k)), heads(v))
        ),
        "rotated only the queries: the score depends on the offset only when both q and k are rotated": merge(
            _attend(rq, heads(k), heads(v))
        ),
        "rotated only the keys: the score depends on the offset only when both q and k are rotated": merge(
            _attend(heads(q), rk, heads(v))
        ),
        "kept both bugs of rope_attention_buggy (it rotates before splitting the heads, and it rotates v): "
        "split the heads first, then rotate q and k only": merge(
            _attend(heads(apply_rotary(q)), heads(apply_rotary(k)), heads(apply_rotary(v)))
        ),
        "left out the rotation, or rotated along the wrong axis: apply_rotary turns positions 0, 1, ... along "
        "the second-to-last axis, so give it each head's (n_heads, T, head_dim) queries and keys, after the "
        "transpose (on (T, n_heads, head_dim) it turns each head by its head number, which cancels in q . k)": merge(
            _attend(heads(q), heads(k), heads(v))
        ),
        'paired feature i with i + head_dim/2 (the "rotate half" layout of Hugging Face\'s Llama): apply_rotary '
        "pairs neighbours (2i, 2i + 1); call it as it is": merge(
            _attend(rotate_half(heads(q)), rotate_half(heads(k)), heads(v))
        ),
        "rotated the input x (like adding a position table): RoPE turns the queries and keys after their projections": (
            lambda xr: merge(_attend(heads(xr @ W_q), heads(xr @ W_k), heads(xr @ W_v)))
        )(apply_rotary(x)),
    }


def _rope_cases(hidden: bool) -> list[tuple]:
    g = torch.Generator().manual_seed(21 if hidden else 5)
    sizes = [(7, 12, 3), (5, 16, 2)] if hidden else [(6, 8, 2), (5, 12, 3)]
    cases = []
    for T, d, h in sizes:
        x = torch.randn(T, d, generator=g)
        W = [torch.randn(d, d, generator=g) / math.sqrt(d) for _ in range(3)]
        cases.append((x, *W, h))
    return cases


def check_rope_attention(fn: Callable, *, hidden: bool = False, name: str = "rope_attention") -> None:
    """Exercise 6: the learner's fixed rope_attention(x, W_q, W_k, W_v, n_heads)."""
    _function_check(
        name,
        fn,
        _rope_cases(hidden),
        reference_rope_attention,
        _rope_mistakes,
        "split q and k into heads (n_heads, T, head_dim), apply_rotary to each, attend causally, merge",
        lambda case: f"{name}(x of shape {tuple(case[0].shape)}, W_q, W_k, W_v, n_heads={case[4]})",
    )


__all__ = [
    "check_kv_cache",
    "check_d_ff",
    "check_online_step",
    "check_expand_kv",
    "check_window_mask",
    "check_rope_attention",
    "reference_expand_kv",
    "reference_window_mask",
    "reference_rope_attention",
]
