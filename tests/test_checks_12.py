"""The lesson 12 exercise checks: the references agree with course_lib, right answers written in other
ways pass, each typical wrong answer is named in the hint, and hand-worked answers are never shown."""

from __future__ import annotations

import math

import pytest
import torch
from grading_helpers import fails_with

from course_lib import checks
from course_lib.attention import repeat_kv_heads, sliding_window_mask
from course_lib.checks import lesson12

# --- references against the library ----------------------------------------------------------------------


def test_references_match_the_library():
    k = torch.randn(2, 3, 4, 5)
    assert torch.equal(lesson12.reference_expand_kv(k, 6), repeat_kv_heads(k, 2))
    for T, W in [(6, 2), (5, 5), (4, 9)]:
        assert torch.equal(lesson12.reference_window_mask(T, W), sliding_window_mask(T, W))


def test_rope_reference_matches_multi_head_attention_with_rotary():
    from course_lib.attention import MultiHeadAttention, causal_mask

    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, bias=False, rope_base=10000.0)
    x = torch.randn(1, 6, 12)
    W_q, W_k, W_v = (w.weight.T.detach() for w in (mha.w_q, mha.w_k, mha.w_v))
    ours = lesson12.reference_rope_attention(x[0], W_q, W_k, W_v, 3)
    mha.w_o = torch.nn.Identity()  # compare the heads' output before the output projection
    with torch.no_grad():
        theirs = mha(x, mask=causal_mask(6))[0]
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


# --- exercise 1: the KV cache by hand ----------------------------------------------------------------------


def test_kv_cache_right_answers_pass_in_any_form():
    lesson12.check_kv_cache(2 * 28 * 4 * 128 * 2, 2 * 28 * 4 * 128 * 2 * 32768 / 2**30)
    lesson12.check_kv_cache(57344.0, 1.75)


@pytest.mark.parametrize(
    "per_token, gib, match",
    [
        (2 * 28 * 28 * 128 * 2, 1.75, "used the 28 query heads"),
        (28 * 4 * 128 * 2, 1.75, "left out the 2 for a key AND a value"),
        (2 * 28 * 4 * 128 * 4, 1.75, "counted 4 bytes per value"),
        (2 * 28 * 4 * 128, 1.75, "off by a factor 2, too small"),
        (57344, 57344 * 32768 / 1e9, "divided by 10^9"),
        (57344, 57344 * 32768 / 2**20, "gave MiB"),
        (57344, 57344 * 32000 / 2**30, "used 32,000 tokens"),
    ],
)
def test_kv_cache_mistakes_are_named(per_token, gib, match):
    text = fails_with(lesson12.check_kv_cache, per_token, gib, match=match)
    assert "57344" not in text.replace(str(per_token), "") and "1.75" not in text.replace(f"{gib}", "")


# --- exercise 2: SwiGLU's width ------------------------------------------------------------------------------


def test_d_ff_right_and_wrong():
    lesson12.check_d_ff(2048, 11008)
    lesson12.check_d_ff(2048.0, 43 * 256)
    fails_with(lesson12.check_d_ff, 3072, 11008, match="kept the GELU network's 4 x d_model")
    fails_with(lesson12.check_d_ff, 2048, 10752, match="rounded down")
    fails_with(lesson12.check_d_ff, 2048, 10922, match="did not round")
    fails_with(lesson12.check_d_ff, 2048, 10923, match="nearest integer only")
    fails_with(lesson12.check_d_ff, 2048.5, 11008, match="whole number")


# --- exercise 4: one online-softmax step ---------------------------------------------------------------------


L_NEW = 1.5 * math.exp(-1) + 1 + math.exp(-2)
ACC = [0.6 * math.exp(-1) + 1, -0.3 * math.exp(-1) + 2 * math.exp(-2)]


def test_online_step_right_answers_pass():
    lesson12.check_online_step(3, L_NEW, [a / L_NEW for a in ACC])
    lesson12.check_online_step(3.0, torch.tensor(L_NEW), torch.tensor([a / L_NEW for a in ACC]))


@pytest.mark.parametrize(
    "m, l, out, match",
    [
        (2.0, L_NEW, [a / L_NEW for a in ACC], "kept the old maximum"),
        (3.0, 1.5 + 1 + math.exp(-2), [a / L_NEW for a in ACC], "did not rescale the old sum"),
        (3.0, 1.5 * math.e + 1 + math.exp(-2), [a / L_NEW for a in ACC], "rescaled by exp(m_new - m_old)"),
        (3.0, L_NEW, [(0.6 + 1) / L_NEW, (-0.3 + 2 * math.exp(-2)) / L_NEW], "did not rescale the old weighted sum"),
        (3.0, L_NEW, ACC, "without dividing by l"),
    ],
)
def test_online_step_mistakes_are_named(m, l, out, match):  # noqa: E741
    text = fails_with(lesson12.check_online_step, m, l, out, match=match)
    assert "1.687" not in text and "0.724" not in text


# --- exercise 3: expanding key/value heads -------------------------------------------------------------------


def test_expand_kv_right_ways_pass():
    lesson12.check_expand_kv(lambda k, n: k.repeat_interleave(n // k.shape[1], dim=1))
    lesson12.check_expand_kv(lambda k, n: k[:, :, None].expand(-1, -1, n // k.shape[1], -1, -1).flatten(1, 2))
    lesson12.check_expand_kv(lambda k, n: k.repeat_interleave(n // k.shape[1], dim=1), hidden=True)


def test_expand_kv_mistakes_are_named():
    fails_with(lesson12.check_expand_kv, lambda k, n: k.repeat(1, n // k.shape[1], 1, 1), match="tiled the heads")
    fails_with(
        lesson12.check_expand_kv, lambda k, n: k.repeat_interleave(n // k.shape[1], dim=2), match="expected shape"
    )
    with pytest.raises(checks.NotAttempted):
        lesson12.check_expand_kv(lambda k, n: (_ for _ in ()).throw(NotImplementedError()))


# --- exercise 5: the sliding-window mask ---------------------------------------------------------------------


def _mask(rule):
    def fn(T, W):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        return rule(i, j, W)

    return fn


def test_window_mask_right_ways_pass():
    lesson12.check_window_mask(_mask(lambda i, j, W: (j <= i) & (j > i - W)))
    lesson12.check_window_mask(
        lambda T, W: torch.ones(T, T, dtype=torch.bool).tril() & ~torch.ones(T, T, dtype=torch.bool).tril(-W),
        hidden=True,
    )


@pytest.mark.parametrize(
    "rule, match",
    [
        (lambda i, j, W: (j <= i) & (i - j <= W), "W positions BEFORE it"),
        (lambda i, j, W: (j <= i) & (i - j < W - 1), "only W - 1 positions"),
        (lambda i, j, W: (i - j).abs() < W, "forgot the causal part"),
        (lambda i, j, W: (j >= i) & (j - i < W), "transposed the mask"),
        (lambda i, j, W: j <= i, "kept only the causal mask"),
        (lambda i, j, W: ((j <= i) & (i - j < W)).float(), "expected a boolean tensor"),
    ],
)
def test_window_mask_mistakes_are_named(rule, match):
    fails_with(lesson12.check_window_mask, _mask(rule), match=match)


# --- exercise 6: the rotary bug ------------------------------------------------------------------------------


def _rope_variant(rotate_v=False, merged=False, only="qk"):
    from course_lib.positional import apply_rotary

    def fn(x, W_q, W_k, W_v, n_heads):
        T, d = x.shape
        heads = lambda t: t.view(T, n_heads, d // n_heads).transpose(0, 1)
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        if merged:
            q, k = apply_rotary(q), apply_rotary(k)
        q, k, v = heads(q), heads(k), heads(v)
        if not merged:
            q = apply_rotary(q) if "q" in only else q
            k = apply_rotary(k) if "k" in only else k
        if rotate_v:
            v = apply_rotary(v) if not merged else heads(apply_rotary(x @ W_v))
        s = (q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)).masked_fill(
            ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")
        )
        return (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, d)

    return fn


def test_rope_attention_right_passes_and_bugs_are_named():
    lesson12.check_rope_attention(_rope_variant())
    lesson12.check_rope_attention(_rope_variant(), hidden=True)
    fails_with(lesson12.check_rope_attention, _rope_variant(rotate_v=True), match="rotated the values too")
    fails_with(lesson12.check_rope_attention, _rope_variant(merged=True), match="before splitting the heads")
    fails_with(lesson12.check_rope_attention, _rope_variant(only="q"), match="rotated only the queries")
    fails_with(lesson12.check_rope_attention, _rope_variant(only=""), match="left out the rotation")
    fails_with(lesson12.check_rope_attention, _rope_variant(merged=True, rotate_v=True), match="kept both bugs")


# --- more answers a learner writes (the right ones in other forms, and the wrong ones named) -------------------


def test_kv_cache_other_wrong_forms_fail():
    fails_with(lesson12.check_kv_cache, 57344, 57344 * 32768 / 2**30 / 1024, match="")  # KiB per token, GiB fine
    fails_with(lesson12.check_kv_cache, 57344, 1.8, match="2 decimal places")
    fails_with(lesson12.check_kv_cache, 57344, "1.75 GiB", match="expected a number")


def test_d_ff_llama_3_width_is_named_as_a_later_choice():
    text = fails_with(lesson12.check_d_ff, 2048, 14336, match="Llama 3 8B")
    assert "Llama 2's rule" in text and "11008" not in text and "11,008" not in text, text
    lesson12.check_d_ff(8 * 768 / 3, 256 * ((int(8 * 4096 / 3) + 255) // 256))
    fails_with(lesson12.check_d_ff, 1024, 11008, match="")  # forgot that the GELU network has 2 matrices


def test_expand_kv_other_forms():
    lesson12.check_expand_kv(lambda k, n: k[:, torch.arange(n) // (n // k.shape[1])])
    fails_with(
        lesson12.check_expand_kv, lambda k, n: torch.cat([k] * (n // k.shape[1]), dim=1), match="tiled the heads"
    )
    fails_with(
        lesson12.check_expand_kv,
        lambda k, n: k[:, None].expand(k.shape[0], n // k.shape[1], *k.shape[1:]).reshape(k.shape[0], n, *k.shape[2:]),
        match="tiled the heads",
    )
    fails_with(lesson12.check_expand_kv, lambda k, n: k.repeat_interleave(2, dim=1), match="expected shape")


def test_online_step_other_wrong_forms():
    fails_with(lesson12.check_online_step, 3, 1.69, [0.72, 0.10], match="3 decimal places")
    fails_with(lesson12.check_online_step, 3, L_NEW, 0.41, match="")


def test_window_mask_other_forms_and_the_inverted_convention():
    lesson12.check_window_mask(lambda T, W: torch.ones(T, T).tril().triu(-(W - 1)).bool())
    fails_with(lesson12.check_window_mask, _mask(lambda i, j, W: ~((j <= i) & (i - j < W))), match="True = blocked")


def test_rope_attention_axis_and_layout_mistakes_are_named():
    from course_lib.positional import apply_rotary, rotate_half_permutation

    def wrong_axis(x, W_q, W_k, W_v, n_heads):  # apply_rotary on (T, n_heads, head_dim): positions run over heads
        T, d = x.shape
        q, k, v = (t.view(T, n_heads, d // n_heads) for t in (x @ W_q, x @ W_k, x @ W_v))
        q, k = apply_rotary(q), apply_rotary(k)
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)).masked_fill(
            ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")
        )
        return (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, d)

    text = fails_with(lesson12.check_rope_attention, wrong_axis, match="wrong axis")
    assert "second-to-last axis" in text, text

    def rotate_half(x, W_q, W_k, W_v, n_heads):  # Hugging Face's pairing, written out
        T, d = x.shape
        hd = d // n_heads
        q, k, v = (t.view(T, n_heads, hd).transpose(0, 1) for t in (x @ W_q, x @ W_k, x @ W_v))
        omega = 10000.0 ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * omega
        cos, sin = (torch.cat([f(ang)] * 2, -1).float() for f in (torch.cos, torch.sin))
        turn = lambda t: t * cos + torch.cat([-t[..., hd // 2 :], t[..., : hd // 2]], -1) * sin  # noqa: E731
        q, k = turn(q), turn(k)
        s = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(
            ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")
        )
        return (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, d)

    fails_with(lesson12.check_rope_attention, rotate_half, match="rotate half")
    assert rotate_half_permutation(4).tolist() == [0, 2, 1, 3]

    def complex_rotation(x, W_q, W_k, W_v, n_heads):  # a right answer written another way
        import torch.nn.functional as F

        T, d = x.shape
        hd = d // n_heads
        q, k, v = (t.view(T, n_heads, hd).transpose(0, 1) for t in (x @ W_q, x @ W_k, x @ W_v))
        omega = 10000.0 ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        turns = torch.polar(torch.ones(T, hd // 2, dtype=torch.float64), torch.arange(T)[:, None] * omega)
        rot = lambda t: torch.view_as_real(torch.view_as_complex(t.double().reshape(*t.shape[:-1], -1, 2)) * turns)  # noqa: E731
        q, k = (rot(t).flatten(-2).float() for t in (q, k))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(0, 1).reshape(T, d)

    lesson12.check_rope_attention(complex_rotation)
