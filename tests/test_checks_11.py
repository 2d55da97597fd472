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


SPIKY = math.log(math.exp(3) + 9)  # vocabulary 10, one wrong token at logit 3, the other 9 (the right one too) at 0


def test_init_loss_accepts_right_answers_in_any_form():
    lesson11.check_init_loss(math.log(50257), -math.log(1 / (math.exp(3) + 9)))
    lesson11.check_init_loss(np.float32(math.log(50257)), torch.tensor(3.3702))
    lesson11.check_init_loss(10.825, 3.370)
    spiky = torch.zeros(1, 10)
    spiky[0, 4] = 3.0
    lesson11.check_init_loss(10.825, torch.nn.functional.cross_entropy(spiky, torch.tensor([0])))


@pytest.mark.parametrize("gpt2,spiky,match", [
    (math.log10(50257), None, "log base 10"),
    (math.log2(50257), None, "log base 2"),
    (1 / 50257, None, "probability of the right token"),
    (-math.log(50257), None, "minus sign"),
    (None, math.log(9), "left out the spike"),
    (None, math.log(10), "uniform guess"),
    (None, 3.0, "kept only the spike"),
    (None, -math.log(math.exp(3) / (math.exp(3) + 9)), "spiked (wrong) token"),
    (None, math.log10(math.exp(3) + 9), "log base 10"),
    (None, math.log2(math.exp(3) + 9), "log base 2"),
    (None, 1 / (math.exp(3) + 9), "gave the probability"),
    (None, -SPIKY, "minus sign"),
    # The review's off-by-one: one token too many or too few with logit 0 must now cost the point.
    (None, math.log(math.exp(3) + 10), "counted 10 tokens with logit 0"),
    (None, math.log(math.exp(3) + 8), "counted 8 tokens with logit 0"),
])
def test_init_loss_names_the_mistakes_without_the_answer(gpt2, spiky, match):
    gpt2 = math.log(50257) if gpt2 is None else gpt2
    spiky = SPIKY if spiky is None else spiky
    text = fails_with(lesson11.check_init_loss, gpt2, spiky, match=match)
    if match != "minus sign":  # there the learner's own value is the answer with a minus sign
        assert "10.82" not in text and "3.37" not in text, f"the answer leaked: {text}"


def test_init_loss_part_credit():
    with pytest.raises(checks.CheckFailed) as info:
        lesson11.check_init_loss(math.log(50257), math.log(math.exp(3) + 10))
    assert info.value.credit == 0.5, info.value.credit


def test_init_loss_reports_both_wrong_parts():
    text = fails_with(lesson11.check_init_loss, 1.0, 2.0, match="✘ loss_gpt2: 1.0 is not right")
    assert "✘ loss_spiky: 2.0 is not right" in text, text
    fails_with(lesson11.check_init_loss, "10.8", SPIKY, match="expected a number")


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


def test_top_k_a_probability_threshold_is_not_called_k_minus_1():
    """The review's misattribution: a rule on the probabilities removed the same logits as `<= kth` in one
    case and was told it kept k - 1 tokens. It now hears that its result ignores k."""
    def threshold(x, k):
        return x.masked_fill(torch.softmax(x, -1) <= 1 / x.shape[-1], NEG)

    text = fails_with(lesson11.check_top_k, threshold, match="the same for k = 2, 4 and 6")
    assert "k - 1" not in text, text


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


def unnormalised_exp(x, p):
    s, order, probs, cum = _sorted_parts(x)
    drop = s.exp().cumsum(-1) - s.exp() >= p
    return x.masked_fill(drop.scatter(-1, order, drop), NEG)


@pytest.mark.parametrize("fn,match", [
    (unnormalised_exp, "without dividing by their sum"),
    (unsorted_cumsum, "vocabulary order"),
    (drops_the_crossing_token, "dropped the token whose probability makes the total reach p"),
    (forgets_to_scatter, "mask made in sorted order"),
    (cumsum_of_logits, "added up the logits"),
    (zeros_not_inf, "instead of -inf"),
    (lambda x, p: torch.sort(lesson11.reference_top_p(x, p), -1, descending=True).values, "sorted"),
    (lambda x, p: torch.softmax(lesson11.reference_top_p(x, p), -1), "returned probabilities"),
])
def test_top_p_names_the_mistakes(fn, match):
    text = fails_with(lesson11.check_top_p, fn, match=match)
    if fn is unnormalised_exp:  # the review's misattribution: it was told it dropped the crossing token
        assert "makes the total reach p" not in text, text


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
    for right in ("d", "D", " (d) "):
        lesson11.check_cheat_reason(right)
    fails_with(lesson11.check_cheat_reason, "a", match="chose (a)")
    fails_with(lesson11.check_cheat_reason, "b", match="chose (b): the code does divide the scores by sqrt(d)")
    fails_with(lesson11.check_cheat_reason, "c", match="chose (c): attending to itself is allowed")
    fails_with(lesson11.check_cheat_reason, "e", match="chose (e)")
    fails_with(lesson11.check_cheat_reason, "f", match="which line lets it see that character")
    fails_with(lesson11.check_cheat_reason, 2, match="expected a string")


def test_cheat_exercise_gives_part_credit():
    """The review's finding: the right function with the wrong letter (or the reverse) scored 0/3."""
    right = lesson11.reference_causal_attention
    lesson11.check_cheat("d", right)
    with pytest.raises(checks.CheckFailed) as info:
        lesson11.check_cheat("c", right)
    assert info.value.credit == 0.5 and "chose (c)" in str(info.value), str(info.value)

    def no_mask(x, W_q, W_k, W_v):
        return torch.softmax((x @ W_q) @ (x @ W_k).T / math.sqrt(x.shape[1]), -1) @ (x @ W_v)

    with pytest.raises(checks.CheckFailed) as info:
        lesson11.check_cheat("d", no_mask, hidden=True)
    assert info.value.credit == 0.5 and "without a mask" in str(info.value), str(info.value)


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


def test_temperature_exercise_gives_part_credit():
    """The review's finding: the right temperature with a wrong temperature_half scored 0/3."""
    right, half = (2.0 - 0.5) / math.log(0.9184 / 0.0754), 2 / math.log(3)
    lesson11.check_temperatures(right, half)
    with pytest.raises(checks.CheckFailed) as info:
        lesson11.check_temperatures(right, 1.0)
    assert info.value.credit == 0.5 and "raise the temperature" in str(info.value), str(info.value)
    with pytest.raises(checks.CheckFailed) as info:
        lesson11.check_temperatures(1 / right, half)
    assert info.value.credit == 0.5 and "MULTIPLIED" in str(info.value), str(info.value)


def test_top_k_crash_on_k_larger_than_the_vocabulary_is_named():
    def no_min(logits, k):  # right but for k > V, where torch.topk raises
        v = torch.topk(logits, k).values[..., -1:]
        return torch.where(logits < v, torch.full_like(logits, -math.inf), logits)

    fails_with(lesson11.check_top_k, no_min, match="is at least the number of logits in a row")


# --- exercise 8: the generation loop ------------------------------------------------------------------------------


def loop(model, idx, n, block_size, temperature, generator, *, crop=lambda s, b: s[:, -b:],
         last=lambda lg: lg[:, -1, :], scale=lambda lg, t: lg / t, draw=None, greedy_at_zero=True,
         append=lambda i, n: torch.cat([i, n], 1)):
    """The generation loop, with each step replaceable to make a learner's mistake."""
    for _ in range(n):
        logits = last(model(crop(idx, block_size)))  # (B, V)
        if temperature == 0 and greedy_at_zero:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            probs = torch.softmax(scale(logits, temperature), dim=-1)
            nxt = draw(probs, generator) if draw else torch.multinomial(probs, 1, generator=generator)
        idx = append(idx, nxt)
    return idx


def generate_right_another_way(model, idx, n, block_size, temperature, generator):
    out = idx
    for _ in range(n):
        window = out[:, max(0, out.shape[1] - block_size):]
        logits = model(window)[:, window.shape[1] - 1]
        if temperature == 0:
            nxt = torch.max(logits, dim=1).indices[:, None]
        else:
            z = logits / temperature
            probs = torch.exp(z - z.max(-1, keepdim=True).values)
            nxt = torch.multinomial(probs / probs.sum(-1, keepdim=True), num_samples=1, generator=generator)
        out = torch.cat((out, nxt), dim=-1)
    return out


def test_generate_accepts_the_loop_written_two_ways():
    lesson11.check_generate(loop, hidden=True)
    lesson11.check_generate(generate_right_another_way, hidden=True)
    lesson11.check_generate(lambda m, i, n, b, t, g: lesson11.reference_generate(m, i, n, b, t, g), hidden=True)


@pytest.mark.parametrize("fn,match", [
    (lambda *a: loop(*a, crop=lambda s, b: s), "crop the context to its last block_size tokens"),
    (lambda *a: loop(*a, crop=lambda s, b: s[:, :b]), "kept the FIRST block_size tokens"),
    (lambda *a: loop(*a, crop=lambda s, b: s[:, -(b - 1):]), "block_size - 1 tokens"),
    (lambda *a: loop(*a, last=lambda lg: lg[:, 0, :]), "LAST position"),
    (lambda *a: loop(*a, scale=lambda lg, t: lg * t), "multiplied the logits by the temperature"),
    (lambda *a: loop(*a, scale=lambda lg, t: lg), "applied the temperature after the softmax"),
    (lambda *a: loop(*a, draw=lambda p, g: p.argmax(-1, keepdim=True)), "argmax"),
    (lambda *a: loop(*a, draw=lambda p, g: torch.multinomial(p, 1)), "generator=generator"),
    (lambda *a: loop(*a, greedy_at_zero=False), "temperature 0 means greedy"),
    (lambda *a: loop(*a, append=lambda i, n: torch.cat([n, i], 1)), "at the END"),
    (lambda *a: loop(*a)[:, a[1].shape[1]:], "the prompt followed by the new tokens"),
    (lambda m, idx, *a: idx, "append one token per step"),
])
def test_generate_names_the_mistakes(fn, match):
    fails_with(lesson11.check_generate, fn, match=match)


def test_generate_temperature_after_softmax_is_caught_in_every_case():
    def after(model, idx, n, b, t, g):  # softmax, then divide the probabilities by t: no effect once renormalised
        for _ in range(n):
            logits = model(idx[:, -b:])[:, -1, :]
            probs = torch.softmax(logits, -1) / t if t else None
            nxt = logits.argmax(-1, keepdim=True) if t == 0 else torch.multinomial(probs, 1, generator=g)
            idx = torch.cat([idx, nxt], 1)
        return idx

    fails_with(lesson11.check_generate, after, match="applied the temperature after the softmax")


# --- exercise 9: targets shifted by one, and tying in code -----------------------------------------------------


def make_batch(ids, starts, block_size):
    x = torch.stack([ids[s : s + block_size] for s in starts])
    return x, torch.stack([ids[s + 1 : s + block_size + 1] for s in starts])


def make_batch_another_way(ids, starts, block_size):
    rows = torch.stack([ids[s : s + block_size + 1] for s in starts])
    return rows[:, :-1], rows[:, 1:]


def tie(model):
    model.lm_head.weight = model.tok_emb.weight


def test_targets_and_tying_accept_right_answers():
    lesson11.check_targets_and_tying(make_batch, tie)
    lesson11.check_targets_and_tying(make_batch_another_way,
                                     lambda m: setattr(m.lm_head, "weight", m.tok_emb.weight) or m, hidden=True)


@pytest.mark.parametrize("fn,match", [
    (lambda ids, st, b: (make_batch(ids, st, b)[0],) * 2, "used the inputs as the targets"),
    (lambda ids, st, b: (make_batch(ids, st, b)[0], torch.stack([ids[s - 1 : s - 1 + b] if s else
                                                                  torch.cat([ids[-1:], ids[: b - 1]]) for s in st])),
     "shifted the targets the wrong way"),
    (lambda ids, st, b: (make_batch(ids, st, b)[0], make_batch(ids, st, b)[0].roll(-1, 1)), "rolled x"),
    (lambda ids, st, b: (torch.stack([ids[s : s + b + 1] for s in st]),) * 2, "not block_size + 1"),
    (lambda ids, st, b: ([ids[s : s + b] for s in st], make_batch(ids, st, b)[1]), "torch.stack"),
    (lambda ids, st, b: make_batch(ids, st, b)[1], "expected a tuple (x, y)"),
])
def test_make_batch_names_the_mistakes(fn, match):
    fails_with(lesson11.check_make_batch, fn, match=match)


def _assign_data(m):
    m.lm_head.weight.data = m.tok_emb.weight.data


@pytest.mark.parametrize("fn,match", [
    (_assign_data, "as a second parameter"),
    (lambda m: m.lm_head.weight.data.copy_(m.tok_emb.weight.data), "as a second parameter"),
    (lambda m: setattr(m.lm_head, "weight", torch.nn.Parameter(m.tok_emb.weight.detach().clone())),
     "as a second parameter"),
    (lambda m: setattr(m.lm_head, "weight", torch.nn.Parameter(m.tok_emb.weight.T)), "no transpose is needed"),
    (lambda m: setattr(m.tok_emb, "weight", m.lm_head.weight), "the token embedding was replaced"),
])
def test_tie_weights_names_the_mistakes(fn, match):
    fails_with(lesson11.check_tie_weights, fn, match=match)


def test_targets_and_tying_part_credit():
    with pytest.raises(checks.CheckFailed) as info:
        lesson11.check_targets_and_tying(make_batch, _assign_data)
    assert info.value.credit == 0.5, info.value.credit
