"""The lesson 06 exercise checks: answers worked out by hand are sealed (right answers pass however
they are written, each listed mistake gets its hint, every wrong part is reported), and the visible
softmax cases catch the maximum of the whole tensor and a hard-coded axis."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from grading_helpers import fails_with

from course_lib.checks import lesson06

THIRD = 1 / 3


# --- exercise 1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answers",
    [
        ((2, 8, 5, 7), (2, 8, 5, 32), 560),
        ([2, 8, 5, 7], torch.Size([2, 8, 5, 32]), 560.0),
        (tuple(np.array([2, 8, 5, 7])), (2, 8, 5, 32), np.int64(2 * 8 * 5 * 7)),
    ],
)
def test_attention_shapes_pass_right_answers_written_any_way(answers):
    lesson06.check_attention_shapes(*answers)


@pytest.mark.parametrize(
    "answers, match",
    [
        (((2, 8, 7, 5), (2, 8, 5, 32), 560), "swapped the last two axes"),
        (((2, 8, 5, 16), (2, 8, 5, 32), 560), "summed away"),
        (((2, 8, 5, 5), (2, 8, 5, 32), 560), "other (7-word) sentence"),
        (((2, 8, 5, 32), (2, 8, 5, 32), 560), "output's shape"),
        (((2, 8, 5, 7), (2, 8, 7, 32), 560), "one output row per QUERY"),
        (((2, 8, 5, 7), (2, 8, 5, 16), 560), "values' width d_v"),
        (((2, 8, 5, 7), (2, 8, 5, 7), 560), "weights' shape"),
        (((2, 8, 5, 7), (2, 8, 5, 32), 35), "one sequence and one head"),
        (((2, 8, 5, 7), (2, 8, 5, 32), 8960), "multiplications inside"),
        (((2, 8, 5, 7), (2, 8, 5, 32), 280), "left out the batch"),
        (((2, 8, 5, 7), (2, 8, 5, 32), 70), "left out the heads"),
        (((2, 8, 5, 7), (2, 8, 5, 32), 560.5), "whole number"),
        (("(2, 8, 5, 7)", (2, 8, 5, 32), 560), "tuple of ints"),
    ],
)
def test_attention_shapes_name_the_mistakes(answers, match):
    text = fails_with(lesson06.check_attention_shapes, *answers, match=match)
    assert "(2, 8, 5, 7) is" not in text.replace(f"{answers[0]} is", "") and "560 is" not in text.replace(
        f"{answers[2]} is", ""
    ), text


def test_attention_shapes_report_every_wrong_part():
    text = fails_with(
        lesson06.check_attention_shapes, (2, 8, 7, 5), (2, 8, 5, 7), 35, match="swapped the last two axes"
    )
    assert "output_shape" in text and "weights' shape" in text and "one sequence and one head" in text, text


# --- exercise 2 ---------------------------------------------------------------------------------

W = torch.softmax(torch.tensor([1.0, -1.0]) / math.sqrt(2), dim=0)
OUT = [-W[1].item(), W[1].item()]


@pytest.mark.parametrize(
    "answers",
    [
        ([0.7071, -0.7071], W, OUT, [-0.1069, 0.1069]),
        ((1 / math.sqrt(2), -1 / math.sqrt(2)), [0.80, 0.20], np.array([-0.2, 0.2]), torch.tensor([-0.11, 0.11])),
        (torch.tensor([0.707, -0.707], dtype=torch.float64), W.numpy(), (-0.196, 0.196), [-0.107, 0.107]),
    ],
)
def test_flying_arrows_pass_right_answers_written_any_way(answers):
    lesson06.check_flying_arrows(*answers)


@pytest.mark.parametrize(
    "part, value, match",
    [
        (0, [1.0, -1.0], "forgot to divide by sqrt(d_k)"),
        (0, [0.5, -0.5], "divided by d_k = 2"),
        (0, [2 / math.sqrt(2), -1 / math.sqrt(2)], "arrows' query"),
        (1, torch.softmax(torch.tensor([1.0, -1.0]), 0), "forgot to divide the scores by sqrt(2)"),
        (1, (torch.tensor([1.0, -1.0]) / math.sqrt(2)).exp(), "did not normalise"),
        (1, W.flip(0), "wrong order"),
        (2, [0.0, 0.0], "own value"),
        (2, [-0.12, 0.12], "unscaled weights"),
        (2, [-0.8, 0.8], "wrong order"),
        (3, [-0.05, 0.05], "unscaled scores"),
        (3, OUT, "flying's weights"),
        (3, [-0.89, 0.89], "large weight on arrows' own value"),
        (3, [-0.3, 0.3], "score it against both keys"),
        (3, "0.1", "expected numbers"),
    ],
)
def test_flying_arrows_name_the_mistakes_without_the_answer(part, value, match):
    answers = [[0.7071, -0.7071], W, OUT, [-0.107, 0.107]]
    answers[part] = value
    text = fails_with(lesson06.check_flying_arrows, *answers, match=match)
    assert "expected" not in text.replace("expected numbers", "") and "0.10" not in text.replace("0.107", ""), text


def test_flying_arrows_report_every_wrong_part():
    text = fails_with(
        lesson06.check_flying_arrows, [1.0, -1.0], W.flip(0), [0.0, 0.0], OUT, match="forgot to divide by sqrt(d_k)"
    )
    for part in ("weights_flying", "output_flying", "output_arrows", "own value", "flying's weights"):
        assert part in text, text


# --- exercises 7 and 8 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sums, weights",
    [
        ([THIRD, 2 * THIRD, 1.0], [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [THIRD] * 3]),
        ((0.333, 0.667, 1), np.array([[1, 0, 0], [0.5, 0.5, 0], [0.333, 0.333, 0.333]])),
        (torch.tensor([THIRD, 2 * THIRD, 1.0]), torch.ones(3, 3).tril() / torch.arange(1, 4)[:, None]),
    ],
)
def test_late_mask_passes_right_answers_written_any_way(sums, weights):
    lesson06.check_late_mask(sums, weights)


@pytest.mark.parametrize(
    "sums, weights, match",
    [
        ([1, 1, 1], None, "does not renormalise"),
        ([1.0, 2 * THIRD, THIRD], None, "from the bottom"),
        ([1, 2, 3], None, "counted the weights each row keeps"),
        ([0.33, 0.67, 1.0], None, "count how many of them the mask keeps"),
        (None, [[THIRD, 0, 0], [THIRD, THIRD, 0], [THIRD] * 3], "late-masked weights"),
        (None, [[THIRD] * 3, [0, 0.5, 0.5], [0, 0, 1.0]], "upper triangle"),
        (None, [[1, 0, 0], [1, 1, 0], [1, 1, 1]], "the mask itself"),
        (None, [[THIRD] * 3] * 3, "left out the mask"),
        (None, [[1, 0, 0], [0.5, 0.5, 0]], "expected shape"),
    ],
)
def test_late_mask_names_the_mistakes(sums, weights, match):
    right_sums, right_weights = [THIRD, 2 * THIRD, 1.0], [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [THIRD] * 3]
    fails_with(
        lesson06.check_late_mask,
        right_sums if sums is None else sums,
        right_weights if weights is None else weights,
        match=match,
    )


def test_late_mask_reports_both_wrong_parts():
    text = fails_with(lesson06.check_late_mask, [1, 1, 1], [[THIRD] * 3] * 3, match="does not renormalise")
    assert "correct_weights" in text and "left out the mask" in text, text


@pytest.mark.parametrize(
    "unscaled, scaled, match",
    [
        (8, 1, None),
        (8.0, 1.0, None),
        (math.sqrt(64), np.float32(1), None),
        (torch.tensor(8.0), torch.tensor(1.0), None),
        (64, 1, "gave the variance"),
        (1, 1, "spread of one component"),
        (math.sqrt(8), 1, "square root twice"),
        (8, 0.125, "by d_k instead of sqrt(d_k)"),
        (8, 8, "divides the spread by sqrt(d_k)"),
        (8, 64, "variance of the unscaled score"),
        (8, 2, "divides its standard deviation by c"),
    ],
)
def test_score_spread(unscaled, scaled, match):
    if match is None:
        lesson06.check_score_spread(unscaled, scaled)
    else:
        text = fails_with(lesson06.check_score_spread, unscaled, scaled, match=match)
        assert "expected" not in text, text


# --- exercise 3: the visible softmax cases --------------------------------------------------------


def _global_max(x):
    e = (x - x.max()).exp()
    return e / e.sum(-1, keepdim=True)


def _dim_one(x):
    e = (x - x.max(dim=1, keepdim=True).values).exp()
    return e / e.sum(dim=1, keepdim=True)


def _dim_one_guarded(x):  # works on 1-D, hard-codes dim=1 otherwise
    return torch.softmax(x, dim=1 if x.dim() > 1 else 0)


@pytest.mark.parametrize(
    "fn, match",
    [
        (_global_max, "whole tensor instead of each row"),
        (_dim_one, "wrote a fixed axis (such as dim=1)"),
        (_dim_one_guarded, "fixed the axis at dim=1"),
    ],
)
def test_visible_softmax_cases_catch_the_whole_tensors_max_and_a_fixed_axis(fn, match):
    fails_with(lesson06.check_softmax, fn, match=match)  # without hidden=True: the visible cases


def test_softmax_accepts_other_dtypes_and_ways_of_writing_it():
    lesson06.check_softmax(lambda x: torch.softmax(x.double(), dim=-1).to(x.dtype))
    lesson06.check_softmax(
        lambda x: (x - x.amax(-1, keepdim=True)).exp() / (x - x.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True)
    )
    lesson06.check_softmax(lambda x: torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True)), hidden=True)
