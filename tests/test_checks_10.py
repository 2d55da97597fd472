"""The lesson 10 exercise checks: the references agree with the course library, the right answers pass
(also written another way), and each typical wrong answer is named in the hint."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib import checks, models, translation
from course_lib.attention import causal_mask
from course_lib.checks import lesson10
from course_lib.layers import DecoderBlock
from grading_helpers import fails_with

# --- exercise 1: shapes -------------------------------------------------------------------------------

RIGHT_SHAPES = {"memory_shape": (4, 9, 32), "cross_weights_shape": (4, 4, 6, 9), "logits_shape": (4, 6, 50)}


def test_shapes_measured_on_the_model():
    m = models.Seq2SeqTransformer(models.Seq2SeqConfig(20, 50, d_model=32, n_heads=4, keep_weights=True))
    src, tgt = torch.randint(3, 20, (4, 9)), torch.randint(3, 50, (4, 6))
    logits = m(src, tgt)
    measured = {"memory_shape": tuple(m.encode(src).shape), "cross_weights_shape": tuple(m.cross_attention_weights()[0].shape),
                "logits_shape": tuple(logits.shape)}
    assert measured == RIGHT_SHAPES
    lesson10.check_shapes(measured)
    lesson10.check_shapes({k: list(v) for k, v in RIGHT_SHAPES.items()})  # lists are fine
    lesson10.check_shapes({k: torch.Size(v) for k, v in RIGHT_SHAPES.items()})


@pytest.mark.parametrize(
    "name, wrong, match",
    [
        ("memory_shape", (4, 32), "one vector per source token"),
        ("memory_shape", (4, 6, 32), "used the target's length"),
        ("cross_weights_shape", (4, 4, 9, 6), "swapped queries and keys"),
        ("cross_weights_shape", (4, 6, 9), "left out the head axis"),
        ("cross_weights_shape", (4, 4, 6, 6), "decoder's self-attention shape"),
        ("logits_shape", (4, 50), "kept only the last position"),
        ("logits_shape", (4, 6, 32), "stopped before the output layer"),
        ("logits_shape", (4, 9, 50), "one prediction per target position"),
        ("memory_shape", (9, 4, 32), "put the source length first"),
        ("cross_weights_shape", (16, 6, 9), "merged the batch and head axes"),
    ],
)
def test_shape_mistakes_are_named(name, wrong, match):
    fails_with(lesson10.check_shapes, {**RIGHT_SHAPES, name: wrong}, match=match)


def test_every_wrong_shape_is_reported_and_none_revealed():
    text = fails_with(lesson10.check_shapes, {"memory_shape": (4, 32), "cross_weights_shape": (1, 2, 3, 4),
                                              "logits_shape": (4, 50)}, match="one vector per source token")
    assert "cross_weights_shape: (1, 2, 3, 4) is not right" in text and "kept only the last position" in text
    assert "(4, 9, 32)" not in text and "(4, 4, 6, 9)" not in text and "(4, 6, 50)" not in text


# --- exercise 2: decoder_io --------------------------------------------------------------------------


def full_slice_decoder_io(targets, bos_id, eos_id, pad_id):
    """The other common right answer: pad <bos> + t + <eos>, then slice; tgt_in keeps <eos> before padding."""
    T = max(len(t) for t in targets) + 2
    full = torch.full((len(targets), T), pad_id)
    for b, t in enumerate(targets):
        full[b, : len(t) + 2] = torch.tensor([bos_id, *t, eos_id])
    return full[:, :-1], full[:, 1:]


def test_reference_decoder_io_matches_the_translation_module():
    task = translation.translation_task(30, 5, seed=1)
    pairs = task.train[:7]
    _, tgt_in, tgt_out = task.batch(pairs)
    ref_in, ref_out = lesson10.reference_decoder_io([[task.tgt_index[w] for w in t] for _, t in pairs], 1, 2, 0)
    assert torch.equal(ref_in, tgt_in) and torch.equal(ref_out, tgt_out)


def test_right_decoder_io_passes_in_several_forms(capsys):
    lesson10.check_decoder_io(lesson10.reference_decoder_io, hidden=True)
    lesson10.check_decoder_io(full_slice_decoder_io, hidden=True)
    lesson10.check_decoder_io(lambda *a: tuple(x.tolist() for x in lesson10.reference_decoder_io(*a)))  # lists
    lesson10.check_decoder_io(lambda *a: [x.float() for x in lesson10.reference_decoder_io(*a)])  # floats, a list
    assert "✔ decoder_io: passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, match",
    [
        (lambda t, b, e, p: lesson10.reference_decoder_io(t, b, e, p)[::-1], "swapped the two"),
        (lambda t, b, e, p: (lesson10.reference_decoder_io(t, b, e, p)[1],) * 2, "did not shift"),
        (lambda t, b, e, p: (torch.cat([lesson10.reference_decoder_io(t, b, e, p)[0][:, 1:],
                                        torch.full((len(t), 1), p)], 1), lesson10.reference_decoder_io(t, b, e, p)[1]),
         "left out <bos>"),
        (lambda t, b, e, p: (lesson10.reference_decoder_io(t, b, e, p)[0], lesson10.reference_decoder_io(t, b, p, p)[1]),
         "left <eos> out of the labels"),
        (lambda t, b, e, p: lesson10.reference_decoder_io(t, b, e, 0), "padded with 0 instead of pad_id"),
        (lambda t, b, e, p: (lesson10.reference_decoder_io(t, b, e, p)[0] + 1, lesson10.reference_decoder_io(t, b, e, p)[1]),
         "tgt_in is not right"),
    ],
)
def test_decoder_io_mistakes_are_named(wrong, match):
    fails_with(lesson10.check_decoder_io, wrong, match=match)


def test_decoder_io_shifted_the_wrong_way_and_eos_padding_are_named():
    def wrong_way(targets, bos, eos, pad):
        T = max(len(t) for t in targets) + 1
        tin = torch.tensor([list(t) + [pad] * (T - len(t)) for t in targets])
        tout = torch.tensor([list(t[1:]) + [eos] + [pad] * (T - len(t)) for t in targets])
        return tin, tout

    fails_with(lesson10.check_decoder_io, wrong_way, match="shifted the wrong way")

    def eos_padded(targets, bos, eos, pad):
        tin, tout = lesson10.reference_decoder_io(targets, bos, eos, pad)
        return tin, tout.masked_fill(tout == pad, eos)

    fails_with(lesson10.check_decoder_io, eos_padded, match="padded the labels with <eos>")


def test_left_padding_is_named():
    def left(targets, bos, eos, pad):
        tin, tout = lesson10.reference_decoder_io(targets, bos, eos, pad)
        for b, t in enumerate(targets):
            n = len(t) + 1
            tin[b] = torch.cat([torch.full((tin.shape[1] - n,), pad), tin[b, :n].clone()])
            tout[b] = torch.cat([torch.full((tout.shape[1] - n,), pad), tout[b, :n].clone()])
        return tin, tout

    fails_with(lesson10.check_decoder_io, left, match="padded on the left")


def test_decoder_io_form_errors_are_explained():
    fails_with(lesson10.check_decoder_io, lambda *a: None, match="did you forget to `return tgt_in, tgt_out`")
    fails_with(lesson10.check_decoder_io, lambda *a: lesson10.reference_decoder_io(*a)[0], match="expected a pair")
    fails_with(lesson10.check_decoder_io, lambda *a: tuple(x[:, :-1] for x in lesson10.reference_decoder_io(*a)),
               match="T = (longest target) + 1")
    fails_with(lesson10.check_decoder_io, lambda *a: [x + 0.5 for x in lesson10.reference_decoder_io(*a)], match="holds fractions")

    def crash(*a):
        raise IndexError("list index out of range")

    fails_with(lesson10.check_decoder_io, crash, match="raised IndexError")

    def blank(*a):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson10.check_decoder_io(blank)


# --- exercise 3: masks ---------------------------------------------------------------------------------


def test_reference_masks_match_the_model():
    m = models.Seq2SeqTransformer(models.Seq2SeqConfig(12, 12, d_model=8, n_heads=2, pad_id=3))
    src, tgt = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 3]]), torch.tensor([[1, 4, 5, 3, 3], [1, 6, 7, 8, 9]])
    s, t = lesson10.reference_masks(src, tgt, 3)
    assert torch.equal(s, m.source_mask(src)[:, 0, 0]) and torch.equal(t, m.target_mask(tgt)[:, 0])


def test_right_masks_pass_in_several_shapes():
    lesson10.check_masks(lesson10.reference_masks, hidden=True)
    lesson10.check_masks(lambda s, t, p: tuple(x[:, None] for x in lesson10.reference_masks(s, t, p)), hidden=True)
    lesson10.check_masks(lambda s, t, p: (lesson10.reference_masks(s, t, p)[0][:, None, None, :],
                                          lesson10.reference_masks(s, t, p)[1][:, None]), hidden=True)


def _with_tgt(fn):
    return lambda s, t, p: (lesson10.reference_masks(s, t, p)[0], fn(s, t, p))


def _tril(t):
    return torch.ones(t.shape[1], t.shape[1], dtype=torch.bool).tril()


@pytest.mark.parametrize(
    "wrong, match",
    [
        (lambda s, t, p: (s == p, lesson10.reference_masks(s, t, p)[1]), "inverted the source mask"),
        (_with_tgt(lambda s, t, p: _tril(t).expand(len(t), -1, -1)), "left out the target padding"),
        (_with_tgt(lambda s, t, p: (t != p)[:, None, :].expand(-1, t.shape[1], -1)), "left out the causal part"),
        (_with_tgt(lambda s, t, p: (t != p)[:, None, :] & _tril(t).T), "used the upper triangle"),
        (_with_tgt(lambda s, t, p: (t != p)[:, None, :] & _tril(t).tril(-1)), "left out the diagonal"),
        (_with_tgt(lambda s, t, p: (t != p)[:, None, :] & (t != p)[:, :, None] & _tril(t)),
         "masked the padded queries (rows) instead of the padded keys (columns)"),
        (_with_tgt(lambda s, t, p: (t != p)[:, :, None] & _tril(t)),
         "masked the padded queries (rows) instead of the padded keys (columns)"),
        (lambda s, t, p: (s != 0, (t != 0)[:, None, :] & _tril(t)), "compared with 0 instead of pad_id"),
    ],
)
def test_mask_mistakes_are_named(wrong, match):
    fails_with(lesson10.check_masks, wrong, match=match)


def _query_src_mask(layout):
    """A padding mask put on the query axis, (B, S, 1) or (B, 1, S, 1): it passed every test once."""
    def fn(s, t, p):
        real = s != p  # (B, S)
        src_mask = real[:, :, None] if layout == "BS1" else real[:, None, :, None]
        return src_mask, lesson10.reference_masks(s, t, p)[1]
    return fn


@pytest.mark.parametrize("layout", ["BS1", "B1S1"])
def test_a_source_mask_on_the_queries_fails_visible_hidden_and_model_tests(layout):
    for hidden in (False, True):
        fails_with(lesson10.check_masks, _query_src_mask(layout), hidden=hidden, match=lesson10.QUERY_MASK)
    fails_with(lesson10.check_masks_in_model, _query_src_mask(layout), match="a mask on the queries (rows)")


def test_a_target_mask_on_the_queries_is_named():
    fails_with(lesson10.check_masks, _with_tgt(lambda s, t, p: (t != p)[:, :, None]), match=lesson10.QUERY_MASK)


def test_right_masks_pass_in_the_model_and_its_hint_explains_left_out_padding():
    lesson10.check_masks_in_model(lesson10.reference_masks)
    lesson10.check_masks_in_model(lambda s, t, p: (lesson10.reference_masks(s, t, p)[0][:, None, None, :],
                                                   lesson10.reference_masks(s, t, p)[1][:, None]))
    # Without the target padding only the padded rows change: the model test cannot see it, the check can.
    no_tgt_padding = _with_tgt(lambda s, t, p: _tril(t).expand(len(t), -1, -1))
    lesson10.check_masks_in_model(no_tgt_padding)
    fails_with(lesson10.check_masks, no_tgt_padding, match="it matters with left padding or packed sequences")
    fails_with(lesson10.check_masks_in_model, lambda s, t, p: (s == s, lesson10.reference_masks(s, t, p)[1]),
               match="the model's real outputs change")


def test_both_wrong_masks_are_reported_and_form_errors_explained():
    fails_with(lesson10.check_masks, lambda s, t, p: (s == p, _tril(t).expand(len(t), -1, -1)),
               match="both masks are not right")
    fails_with(lesson10.check_masks, lambda s, t, p: tuple(x.int() for x in lesson10.reference_masks(s, t, p)),
               match="must be boolean")
    fails_with(lesson10.check_masks, lambda s, t, p: (s != p, _tril(t)), match="tgt_mask has shape (4, 4)")
    fails_with(lesson10.check_masks, lambda s, t, p: None, match="did you forget to `return src_mask, tgt_mask`")


# --- exercise 4: label smoothing ------------------------------------------------------------------------

P = [0.1, 0.6, 0.2, 0.1]


def _loss(q):
    return -sum(qk * math.log(pk) for qk, pk in zip(q, P))


def test_label_smoothing_right_answer_agrees_with_torch():
    q = [0.05, 0.85, 0.05, 0.05]
    torch_loss = F.cross_entropy(torch.tensor([P]).log(), torch.tensor([1]), label_smoothing=0.2).item()
    assert _loss(q) == pytest.approx(torch_loss, abs=1e-6)
    lesson10.check_label_smoothing(q, _loss(q))
    lesson10.check_label_smoothing(torch.tensor(q), round(_loss(q), 3))
    lesson10.check_label_smoothing((0.05, 0.85, 0.05, 0.05), torch.tensor(_loss(q)))


@pytest.mark.parametrize(
    "target, loss, match",
    [
        ([0.2 / 3, 0.8, 0.2 / 3, 0.2 / 3], None, "V - 1 wrong classes only"),
        ([0.05, 0.8, 0.05, 0.05], None, "gave the right class 1 - eps only"),
        ([0.0, 1.0, 0.0, 0.0], None, "left the target one-hot"),
        (None, _loss([0.2 / 3, 0.8, 0.2 / 3, 0.2 / 3]), "used the (V - 1) convention"),
        (None, _loss([0.05, 0.8, 0.05, 0.05]), "gave the right class 1 - eps only"),
        (None, -math.log(0.6), "without smoothing"),
        (None, _loss([0.05, 0.85, 0.05, 0.05]) / math.log(2), "log base 2"),
        (None, 0.157, "computed KL(q || p)"),
        (None, sum(pk * math.log(pk / qk) for pk, qk in zip(P, [0.05, 0.85, 0.05, 0.05])), "computed KL(p || q)"),
        (None, -sum(qk * math.log(qk) for qk in [0.05, 0.85, 0.05, 0.05]), "gave H(q)"),
    ],
)
def test_label_smoothing_mistakes_are_named(target, loss, match):
    right_q = [0.05, 0.85, 0.05, 0.05]
    text = fails_with(lesson10.check_label_smoothing, target or right_q, _loss(right_q) if loss is None else loss, match=match)
    assert "0.85" not in text and "0.745" not in text


def test_label_smoothing_form_errors():
    fails_with(lesson10.check_label_smoothing, "0.05, 0.85", 0.745, match="expected numbers")
    fails_with(lesson10.check_label_smoothing, [0.05, 0.85, 0.05, 0.05], [0.7, 0.7], match="expected a single number")


# --- exercise 5: beam step --------------------------------------------------------------------------------


def test_reference_beam_step_matches_the_library_beam_search_step():
    """One step of generation.beam_search on a toy model keeps the same (parent, token) pairs."""
    scores = torch.tensor([-0.3, -1.2, -2.0], dtype=torch.float64)
    lp = torch.log_softmax(torch.randn(3, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64), -1)
    s, parents, tokens = lesson10.reference_beam_step(scores, lp, 3)
    brute = sorted(((scores[i] + lp[i, j]).item(), i, j) for i in range(3) for j in range(6))[::-1][:3]
    assert [(round(a, 9), i, j) for a, i, j in brute] == [(round(a, 9), i, j) for a, i, j in
                                                            zip(s.tolist(), parents.tolist(), tokens.tolist())]


def test_right_beam_step_passes_in_several_forms():
    lesson10.check_beam_step(lesson10.reference_beam_step, hidden=True)
    lesson10.check_beam_step(lambda s, lp, k: [x.tolist() for x in lesson10.reference_beam_step(s, lp, k)], hidden=True)

    def by_sorting(scores, log_probs, k):  # no topk: sort everything
        K, V = log_probs.shape
        cands = sorted(((float(scores[i] + log_probs[i, j]), i, j) for i in range(K) for j in range(V)), reverse=True)[:k]
        return [c[0] for c in cands], [c[1] for c in cands], [c[2] for c in cands]

    lesson10.check_beam_step(by_sorting, hidden=True)


def _mistake(description_start):
    def fn(scores, log_probs, k):
        for description, value in lesson10._beam_mistakes(scores.tolist(), log_probs.tolist(), k).items():
            if description.startswith(description_start):
                return value
        return lesson10.reference_beam_step(scores, log_probs, k)  # a mistake that cannot happen on this case

    return fn


@pytest.mark.parametrize(
    "start, match",
    [
        ("ranked the new words", "add each hypothesis's score so far"),
        ("returned only the new words", "the new score is the total"),
        ("kept only each hypothesis's best word", "one strong hypothesis may take several places"),
        ("decoded the flat index with K", "parent = i // V"),
        ("kept the k LOWEST", "the best hypothesis has the largest"),
        ("returned the right k, but worst first", "sort them best first"),
    ],
)
def test_beam_step_mistakes_are_named(start, match):
    fails_with(lesson10.check_beam_step, _mistake(start), match=match)


def test_beam_step_mistakes_written_independently_are_named():
    def per_hypothesis_best(scores, log_probs, k):
        best = (scores[:, None] + log_probs).max(dim=1)
        s, parents = best.values.topk(k)
        return s, parents, best.indices[parents]

    fails_with(lesson10.check_beam_step, per_hypothesis_best, match="one strong hypothesis may take several places")

    def no_scores(scores, log_probs, k):
        V = log_probs.shape[1]
        _, flat = log_probs.flatten().topk(k)
        return scores[flat // V] + log_probs.flatten()[flat], flat // V, flat % V

    fails_with(lesson10.check_beam_step, no_scores, match="add each hypothesis's score so far")

    def probabilities(scores, log_probs, k):  # multiplied probabilities instead of adding logs
        V = log_probs.shape[1]
        best, flat = (scores.exp()[:, None] * log_probs.exp()).flatten().topk(k)
        return best, flat // V, flat % V

    fails_with(lesson10.check_beam_step, probabilities, match="returned probabilities")

    def product(scores, log_probs, k):
        V = log_probs.shape[1]
        best, flat = (scores[:, None] * log_probs).flatten().topk(k)
        return best, flat // V, flat % V

    fails_with(lesson10.check_beam_step, product, match="log-probabilities ADD")
    fails_with(lesson10.check_beam_step, lambda s, lp, k: [x / 2 if i == 0 else x for i, x in
                                                           enumerate(lesson10.reference_beam_step(s, lp, k))],
               match="divided the totals by 2")

    def unsorted(scores, log_probs, k):
        new, parents, tokens = lesson10.reference_beam_step(scores, log_probs, k)
        order = torch.tensor([1, 2, 0][:k] + list(range(3, k))) if k >= 3 else torch.arange(k)
        return new[order], parents[order], tokens[order]

    lesson10.check_beam_step(lambda s, lp, k: lesson10.reference_beam_step(s, lp, k))  # still right
    fails_with(lesson10.check_beam_step, lambda s, lp, k: unsorted(s, lp, k) if k >= 3 else
               lesson10.reference_beam_step(s, lp, k), match="not sorted best first")
    fails_with(lesson10.check_beam_step, lambda s, lp, k: lesson10.reference_beam_step(s, lp, k)[:2], match="expected three results")
    fails_with(lesson10.check_beam_step, lambda s, lp, k: lesson10.reference_beam_step(s, lp, 1), match="expected k = 2 entries")


# --- exercise 6: counts ---------------------------------------------------------------------------------


def test_parameter_counts_against_the_model():
    m = models.Seq2SeqTransformer(models.Seq2SeqConfig(1000, 1200, d_model=128, n_heads=8, n_encoder_layers=3,
                                                       n_decoder_layers=3, d_ff=512))
    n = m.num_parameters()
    cross = sum(p.numel() for b in m.decoder.layers for p in b.cross_attn.parameters())
    lesson10.check_parameter_counts(n, cross)
    lesson10.check_parameter_counts(float(n), torch.tensor(cross))
    d, attn = 128, 4 * (128 * 128 + 128)
    mistakes = [
        (n - 3 * attn - 3 * 2 * d, None, "left out the decoder's cross-attention"),
        (n - (3 * (4 * d + 512 + d) + 3 * (8 * d + 512 + d) + 1200), None, "left out the biases"),
        (n + 7 * (3 * 4 * d * d + 3 * 8 * d * d), None, "multiplied the attention weights by the number of heads"),
        (n - 4 * d, None, "forgot the final LayerNorm"),
        (n - (d * 1200 + 1200), None, "forgot the output layer"),
        (None, 3 * 2 * (d * d + d), "counted only W_K and W_V"),
        (None, attn, "counted one decoder layer"),
        (None, 3 * 4 * d * d, "left out the biases: each of the four"),
        (n - 1200 * d, None, "tied the output layer to the target embedding"),
        (n + 2 * 64 * d, None, "counted learned position tables"),
        (n + 64 * d, None, "counted a learned position table"),
        (None, cross + 3 * 2 * d, "counted the LayerNorm before the cross-attention"),
    ]
    for wrong_n, wrong_cross, match in mistakes:
        text = fails_with(lesson10.check_parameter_counts, wrong_n if wrong_n is not None else n,
                          wrong_cross if wrong_cross is not None else cross, match=match)
        assert f"{n:,}" not in text and str(n) not in text
    fails_with(lesson10.check_parameter_counts, n + 0.5, cross, match="expected a whole number")


# --- exercise 7: the decoder bug --------------------------------------------------------------------------


class FixedDecoder(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.block = DecoderBlock(d_model, n_heads)

    def forward(self, y, memory):
        return self.block(y, memory, causal_mask(y.shape[1]))


class FixedWithOnes(FixedDecoder):  # the same fix written another way
    def forward(self, y, memory):
        mask = torch.ones(y.shape[1], memory.shape[1], dtype=torch.bool)
        return self.block(y, memory, causal_mask(y.shape[1]), mask)


class StillBuggy(FixedDecoder):
    def forward(self, y, memory):
        mask = torch.ones(y.shape[1], memory.shape[1], dtype=torch.bool).tril()
        return self.block(y, memory, causal_mask(y.shape[1]), mask)


class OverFixed(FixedDecoder):
    def forward(self, y, memory):
        return self.block(y, memory, None)


class Renamed(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.layer = DecoderBlock(d_model, n_heads)

    def forward(self, y, memory):
        return self.layer(y, memory, causal_mask(y.shape[1]))


class UpperSelf(FixedDecoder):
    def forward(self, y, memory):
        return self.block(y, memory, causal_mask(y.shape[1]).T)


class UpperCross(FixedDecoder):
    def forward(self, y, memory):
        mask = torch.ones(y.shape[1], memory.shape[1], dtype=torch.bool).triu()
        return self.block(y, memory, causal_mask(y.shape[1]), mask)


class ShiftedCross(FixedDecoder):
    def forward(self, y, memory):
        T, S = y.shape[1], memory.shape[1]
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        return self.block(y, memory, causal_mask(T), mask)


def test_first_sees_hints_do_not_state_the_answer():
    """A hint names the mistake; it must not give the count away (position 0 sees ONE source word)."""
    for wrong in (6, 0, 4, 5, 3):
        text = fails_with(lesson10.check_fixed_decoder, wrong, FixedDecoder, match="first_sees")
        hint = text.split("Hint:", 1)[-1].lower()
        for giveaway in ("source position 0", "sees 1", "only one", "one source", "0..i", "a single"):
            assert giveaway not in hint, f"first_sees = {wrong}: the hint gives the answer away ({giveaway!r}):\n{text}"


def test_fixed_decoder_passes_written_either_way():
    lesson10.check_fixed_decoder(1, FixedDecoder)
    lesson10.check_fixed_decoder(1.0, FixedWithOnes)


@pytest.mark.parametrize(
    "first, cls, match",
    [
        (6, FixedDecoder, "gave what a correct decoder allows"),
        (0, FixedDecoder, "check whether .tril() keeps the entries ON the diagonal"),
        (4, FixedDecoder, "gave the number of target positions"),
        (5, FixedDecoder, "counted the blocked source words"),
        (1, UpperSelf, "gave the self-attention the upper triangle"),
        (1, UpperCross, "by the upper triangle"),
        (1, ShiftedCross, "by a shifted triangle"),
        (1, StillBuggy, "kept the causal mask on the cross-attention"),
        (1, OverFixed, "removed the causal mask from the self-attention as well"),
        (1, Renamed, "do not load from a BuggyDecoder's"),
        (1, FixedDecoder(16, 4), "give the class itself"),
    ],
)
def test_fixed_decoder_mistakes_are_named(first, cls, match):
    fails_with(lesson10.check_fixed_decoder, first, cls, match=match)


def test_both_parts_reported_together():
    text = fails_with(lesson10.check_fixed_decoder, 6, StillBuggy, match="gave what a correct decoder allows")
    assert "kept the causal mask on the cross-attention" in text
