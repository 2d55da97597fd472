"""The lesson 11 exercise checks: the references agree with course_lib, right answers written in other
ways pass, each typical wrong answer is named in the hint, and hand-worked answers are never shown."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_lib import checks
from course_lib.checks import lesson11
from course_lib.generation import top_k_filter, top_p_filter
from course_lib.models import GPTConfig, gpt_parameter_count
from grading_helpers import fails_with

NEG = float("-inf")


# --- references ----------------------------------------------------------------------------------------


def test_filter_references_match_the_library():
    g = torch.Generator().manual_seed(0)
    for shape, k, p in [((7,), 3, 0.6), ((4, 12), 5, 0.9), ((2, 3, 9), 1, 0.3)]:
        x = torch.randn(*shape, generator=g) * 2
        assert torch.equal(lesson11.reference_top_k(x, k), top_k_filter(x, k))
        assert torch.equal(lesson11.reference_top_p(x, p), top_p_filter(x, p))


def test_kv_step_reference_rebuilds_causal_attention():
    lesson11.check_kv_matches_causal_attention(lambda *a: lesson11.reference_kv_step(*a))


# --- exercise 1 ------------------------------------------------------------------------------------------


def test_init_loss_accepts_right_answers_in_any_form():
    lesson11.check_init_loss(math.log(50257), -math.log(1 / (math.exp(10) + 999)))
    lesson11.check_init_loss(np.float32(math.log(50257)), torch.tensor(10.0444))
    lesson11.check_init_loss(10.825, 10.044)


@pytest.mark.parametrize("gpt2,spiky,match", [
    (math.log10(50257), None, "log base 10"),
    (math.log2(50257), None, "log base 2"),
    (1 / 50257, None, "probability of the right token"),
    (-math.log(50257), None, "minus sign"),
    (None, math.log(1000), "left out the spike"),
    (None, 10.0, "kept only the spike"),
    (None, -math.log(math.exp(10) / (math.exp(10) + 999)), "spiked (wrong) token"),
    (None, math.log10(math.exp(10) + 999), "log base 10"),
])
def test_init_loss_names_the_mistakes_without_the_answer(gpt2, spiky, match):
    gpt2 = math.log(50257) if gpt2 is None else gpt2
    spiky = math.log(math.exp(10) + 999) if spiky is None else spiky
    text = fails_with(lesson11.check_init_loss, gpt2, spiky, match=match)
    if match != "minus sign":  # there the learner's own value is the answer with a minus sign
        assert "10.82" not in text and "10.04" not in text, f"the answer leaked: {text}"


def test_init_loss_reports_both_wrong_parts():
    text = fails_with(lesson11.check_init_loss, 1.0, 2.0, match="✘ loss_gpt2: 1.0 is not right")
    assert "✘ loss_spiky: 2.0 is not right" in text, text
    fails_with(lesson11.check_init_loss, "10.8", 10.044, match="expected a number")


# --- exercise 2: top-k -------------------------------------------------------------------------------------


def top_k_by_sorting(logits, k):  # right, written another way
    values, _ = torch.sort(logits, dim=-1, descending=True)
    kth = values[..., min(k, logits.shape[-1]) - 1 : min(k, logits.shape[-1])]
    return torch.where(logits >= kth, logits, torch.full_like(logits, NEG))


def _kth(logits, k):
    return torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]


@pytest.mark.parametrize("fn,match", [
    (lambda x, k: lesson11.reference_top_k(x, k + 1), "one too many"),
    (lambda x, k: x.masked_fill(x <= _kth(x, k), NEG), "k - 1"),
    (lambda x, k: x.masked_fill(x < _kth(x, k), 0.0), "set the removed logits to 0"),
    (lambda x, k: torch.softmax(lesson11.reference_top_k(x, k), -1), "returned probabilities"),
    (lambda x, k: torch.sort(lesson11.reference_top_k(x, k), -1, descending=True).values, "sorted"),
    (lambda x, k: torch.topk(x, min(k, x.shape[-1]), dim=-1).values, "not only the kept values"),
    (lambda x, k: x.masked_fill_(x < _kth(x, k), NEG), "were changed"),
    (lambda x, k: lesson11.reference_top_k(x, k).numpy(), "expected a torch.Tensor"),
])
def test_top_k_names_the_mistakes(fn, match):
    fails_with(lesson11.check_top_k, fn, match=match)


def test_top_k_right_answers_and_a_batch_wide_k():
    lesson11.check_top_k(lesson11.reference_top_k, hidden=True)
    lesson11.check_top_k(top_k_by_sorting, hidden=True)

    def global_k(x, k):
        kth = torch.topk(x.reshape(-1), min(k, x.numel())).values[-1]
        return x.masked_fill(x < kth, NEG)

    fails_with(lesson11.check_top_k, global_k, match="whole tensor")

    def blank(x, k):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson11.check_top_k(blank)


# --- exercise 3: top-p -------------------------------------------------------------------------------------


def top_p_by_loops(logits, p):  # right, written another way: row by row in plain Python
    flat = logits.reshape(-1, logits.shape[-1])
    out = torch.full_like(flat, NEG)
    for r, row in enumerate(flat):
        probs = torch.softmax(row.double(), -1).tolist()
        mass = 0.0
        for i in sorted(range(len(probs)), key=lambda i: -probs[i]):
            if mass >= p:
                break
            out[r, i] = row[i]
            mass += probs[i]
    return out.reshape(logits.shape)


def _sorted_parts(x):
    s, order = torch.sort(x, -1, descending=True)
    probs = torch.softmax(s, -1)
    return s, order, probs, probs.cumsum(-1)


def unsorted_cumsum(x, p):
    probs = torch.softmax(x, -1)
    return x.masked_fill(probs.cumsum(-1) - probs >= p, NEG)


def drops_the_crossing_token(x, p):
    s, order, probs, cum = _sorted_parts(x)
    drop = cum >= p
    return x.masked_fill(drop.scatter(-1, order, drop), NEG)


def forgets_to_scatter(x, p):
    s, order, probs, cum = _sorted_parts(x)
    return x.masked_fill(cum - probs >= p, NEG)


def cumsum_of_logits(x, p):
    s, order, probs, cum = _sorted_parts(x)
    drop = s.cumsum(-1) - s >= p
    return x.masked_fill(drop.scatter(-1, order, drop), NEG)


def zeros_not_inf(x, p):
    s, order, probs, cum = _sorted_parts(x)
    drop = cum - probs >= p
    return x.masked_fill(drop.scatter(-1, order, drop), 0.0)


@pytest.mark.parametrize("fn,match", [
    (unsorted_cumsum, "vocabulary order"),
    (drops_the_crossing_token, "dropped the token whose probability makes the total reach p"),
    (forgets_to_scatter, "mask made in sorted order"),
    (cumsum_of_logits, "added up the logits"),
    (zeros_not_inf, "instead of -inf"),
    (lambda x, p: torch.sort(lesson11.reference_top_p(x, p), -1, descending=True).values, "sorted"),
    (lambda x, p: torch.softmax(lesson11.reference_top_p(x, p), -1), "returned probabilities"),
])
def test_top_p_names_the_mistakes(fn, match):
    fails_with(lesson11.check_top_p, fn, match=match)


def test_top_p_right_answers():
    lesson11.check_top_p(lesson11.reference_top_p, hidden=True)
    lesson11.check_top_p(top_p_by_loops, hidden=True)
    lesson11.check_top_p(lambda x, p: top_p_filter(x.float(), float(p)), hidden=True)


# --- exercise 4: one KV-cache step ----------------------------------------------------------------------------


def _step_parts(x, W_q, W_k, W_v, K, V):
    return x @ W_q, x @ W_k, x @ W_v, x.shape[-1]


def unscaled(x, W_q, W_k, W_v, K, V):
    q, k, v, d = _step_parts(x, W_q, W_k, W_v, K, V)
    K, V = torch.cat([K, k[None]]), torch.cat([V, v[None]])
    return torch.softmax(K @ q, 0) @ V, K, V


def divided_by_d(x, W_q, W_k, W_v, K, V):
    q, k, v, d = _step_parts(x, W_q, W_k, W_v, K, V)
    K, V = torch.cat([K, k[None]]), torch.cat([V, v[None]])
    return torch.softmax(K @ q / d, 0) @ V, K, V


def attends_before_appending(x, W_q, W_k, W_v, K, V):
    q, k, v, d = _step_parts(x, W_q, W_k, W_v, K, V)
    out = torch.softmax(K @ q / math.sqrt(d), 0) @ V
    return out, torch.cat([K, k[None]]), torch.cat([V, v[None]])


def forgets_to_append(x, W_q, W_k, W_v, K, V):
    q, k, v, d = _step_parts(x, W_q, W_k, W_v, K, V)
    K2, V2 = torch.cat([K, k[None]]), torch.cat([V, v[None]])
    return torch.softmax(K2 @ q / math.sqrt(d), 0) @ V2, K, V


def appends_features(x, W_q, W_k, W_v, K, V):
    out, K2, V2 = lesson11.reference_kv_step(x, W_q, W_k, W_v, K, V)
    return out, torch.cat([K, torch.zeros(len(K), 1)], dim=1), V2


def prepends(x, W_q, W_k, W_v, K, V):
    q, k, v, d = _step_parts(x, W_q, W_k, W_v, K, V)
    K, V = torch.cat([k[None], K]), torch.cat([v[None], V])
    return torch.softmax(K @ q / math.sqrt(d), 0) @ V, K, V


def caches_x(x, W_q, W_k, W_v, K, V):
    out, K2, V2 = lesson11.reference_kv_step(x, W_q, W_k, W_v, K, V)
    q = x @ W_q
    Kx, Vx = torch.cat([K, x[None]]), torch.cat([V, x[None]])
    return torch.softmax(Kx @ q / math.sqrt(x.shape[-1]), 0) @ Vx, K2, V2


@pytest.mark.parametrize("fn,match", [
    (unscaled, "sqrt(d)"),
    (divided_by_d, "by d instead of sqrt(d)"),
    (attends_before_appending, "attended to the cache before adding"),
    (forgets_to_append, "still has"),
    (appends_features, "along dim 0"),
    (prepends, "at the start"),
    (caches_x, "stored x itself"),
    (lambda *a: lesson11.reference_kv_step(*a)[0], "expected a tuple"),
])
def test_kv_step_names_the_mistakes(fn, match):
    fails_with(lesson11.check_kv_step, fn, match=match)


def test_kv_step_right_answers_and_the_sequence_check():
    lesson11.check_kv_step(lesson11.reference_kv_step, hidden=True)
    lesson11.check_kv_step(lambda *a: list(lesson11.reference_kv_step(*[t.double() for t in a])), hidden=True)
    fails_with(lesson11.check_kv_matches_causal_attention, attends_before_appending, match="attend to positions 0..t")


# --- exercise 5: parameters ------------------------------------------------------------------------------------


def _counts():
    a = gpt_parameter_count(GPTConfig(1000, 128, 3, 4, 96, 0.0, bias=True, tie_weights=False))["total"]
    b = gpt_parameter_count(GPTConfig(1000, 128, 3, 4, 96, 0.0, bias=False, tie_weights=True))["total"]
    return a, b


def test_param_count_accepts_the_library_count_in_any_form():
    a, b = _counts()
    lesson11.check_param_count(a, b)
    lesson11.check_param_count(float(a), np.int64(b))


@pytest.mark.parametrize("delta_a,delta_b,match", [
    (-128 * 96, 0, "position table"),
    (-1000 * 96, 0, "left out the de-embedding"),
    (-(3 * 11 * 96 + 96), 0, "forgot the biases (4C"),
    (-3 * 9 * 96, 0, "biases of the Linear layers"),
    (-(3 * 4 * 96 + 2 * 96), 0, "forgot the LayerNorms"),
    (-3 * 4 * 96 * 96, 0, "one FFN matrix"),
    (3 * 4 * 96 * 96 * 3, 0, "its own C × C projections"),
    (-2 * (12 * 96 * 96 + 13 * 96), 0, "counted one block"),
    (0, 1000 * 96, "tied, it IS the token embedding"),
    (0, 3 * 11 * 96 + 96, "kept the biases"),
    (0, -(3 * 2 * 96 + 96), "dropped the LayerNorms"),
    (0, -128 * 96, "position table"),
])
def test_param_count_names_the_mistakes_without_the_answer(delta_a, delta_b, match):
    a, b = _counts()
    text = fails_with(lesson11.check_param_count, a + delta_a, b + delta_b, match=match)
    assert f"{a:,}" not in text and str(a) not in text and str(b) not in text and f"{b:,}" not in text, text


def test_param_count_rejects_fractions_and_strings():
    a, b = _counts()
    fails_with(lesson11.check_param_count, a + 0.5, b, match="not right")
    fails_with(lesson11.check_param_count, str(a), b, match="expected a number")


# --- exercise 6: the cheating model ------------------------------------------------------------------------------


def test_cheat_reason():
    for right in ("b", "B", " (b) "):
        lesson11.check_cheat_reason(right)
    fails_with(lesson11.check_cheat_reason, "a", match="chose (a)")
    fails_with(lesson11.check_cheat_reason, "c", match="chose (c)")
    fails_with(lesson11.check_cheat_reason, "d", match="chose (d)")
    fails_with(lesson11.check_cheat_reason, "e", match="which line lets position t see")
    fails_with(lesson11.check_cheat_reason, 2, match="expected a string")


def _parts(x, W_q, W_k, W_v):
    T, d = x.shape
    return (x @ W_q) @ (x @ W_k).T / math.sqrt(d), x @ W_v, torch.ones(T, T, dtype=torch.bool).tril()


@pytest.mark.parametrize("fn,match", [
    (lambda x, *W: torch.softmax(_parts(x, *W)[0], -1) @ _parts(x, *W)[1], "without a mask"),
    (lambda x, *W: torch.softmax(_parts(x, *W)[0], -1).masked_fill(~_parts(x, *W)[2], 0.0) @ _parts(x, *W)[1], "after the softmax"),
    (lambda x, *W: torch.softmax(_parts(x, *W)[0] * _parts(x, *W)[2], -1) @ _parts(x, *W)[1], "multiplying the scores by 0"),
    (lambda x, *W: torch.softmax(_parts(x, *W)[0].masked_fill(~_parts(x, *W)[2].T, NEG), -1) @ _parts(x, *W)[1], "upper triangle"),
    (lambda x, *W: torch.nan_to_num(torch.softmax(_parts(x, *W)[0].masked_fill(~_parts(x, *W)[2].tril(-1), NEG), -1)) @ _parts(x, *W)[1],
     "masked the diagonal"),
])
def test_self_attention_names_the_mistakes(fn, match):
    fails_with(lesson11.check_self_attention, fn, match=match)


def test_self_attention_right_answers():
    lesson11.check_self_attention(lesson11.reference_causal_attention, hidden=True)

    def with_library(x, W_q, W_k, W_v):
        from course_lib.attention import causal_mask, scaled_dot_product_attention

        return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, causal_mask(x.shape[0]))[0]

    lesson11.check_self_attention(with_library, hidden=True)


# --- exercise 7: temperature ----------------------------------------------------------------------------------------


def test_temperature_checks_by_effect():
    right = (2.0 - 0.5) / math.log(0.9184 / 0.0754)
    lesson11.check_temperature(right)
    lesson11.check_temperature(np.float64(right))
    lesson11.check_temperature(torch.tensor(0.6))
    fails_with(lesson11.check_temperature, 1 / 0.6, match="MULTIPLIED")
    fails_with(lesson11.check_temperature, 0.3, match="flatter")
    fails_with(lesson11.check_temperature, 2.0, match="sharper")
    fails_with(lesson11.check_temperature, -0.6, match="positive number")
    fails_with(lesson11.check_temperature, "0.6", match="single number")
    fails_with(lesson11.check_temperature, [0.6, 0.7], match="single number")


def test_half_temperature():
    lesson11.check_half_temperature(2 / math.log(3))
    lesson11.check_half_temperature(1.8205)
    text = fails_with(lesson11.check_half_temperature, math.log(3) / 2, match="gave 1/T")
    assert "1.82" not in text
    fails_with(lesson11.check_half_temperature, 2 / math.log10(3), match="log base 10")
    fails_with(lesson11.check_half_temperature, 1.0, match="raise the temperature")
    fails_with(lesson11.check_half_temperature, 3.0, match="lower the temperature")


def test_top_k_crash_on_k_larger_than_the_vocabulary_is_named():
    def no_min(logits, k):  # right but for k > V, where torch.topk raises
        v = torch.topk(logits, k).values[..., -1:]
        return torch.where(logits < v, torch.full_like(logits, -math.inf), logits)

    fails_with(lesson11.check_top_k, no_min, match="is at least the number of logits in a row")
