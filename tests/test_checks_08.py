"""The lesson 08 exercise checks: shapes and parameter counts worked out by hand are sealed (right
answers pass however they are written, each listed mistake gets its hint, every wrong part is
reported); combine_by_sum is tried without a bias and its hints fire only for their own causes;
mha_forward names a fill with 0, a softmax over the wrong axis, and has a default hint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from grading_helpers import fails_with

from course_lib.checks import lesson08

SHAPES = (12, (4, 10, 8, 12), (4, 8, 10, 12), (4, 8, 10, 10), (4, 10, 96), (4, 8, 10, 7))


@pytest.mark.parametrize(
    "answers",
    [
        SHAPES,
        (12.0, [4, 10, 8, 12], torch.Size([4, 8, 10, 12]), tuple(np.array([4, 8, 10, 10])), (4, 10, 96), (4, 8, 10, 7)),
        (np.int64(96 // 8), *SHAPES[1:]),
    ],
)
def test_head_shapes_pass_right_answers_written_any_way(answers):
    lesson08.check_head_shapes(*answers)


@pytest.mark.parametrize(
    "part, value, match",
    [
        (0, 8, "n_heads instead of d_model / n_heads"),
        (0, 96, "used d_model"),
        (0, 12.5, "whole number"),
        (1, (4, 10, 12, 8), "(d_k, n_heads)"),
        (1, (4, 8, 10, 12), "after the transpose"),
        (2, (4, 10, 8, 12), "transpose(1, 2) does"),
        (2, (4, 10, 12, 8), "swapped the wrong axes"),
        (3, (4, 8, 12, 12), "compared features"),
        (3, (4, 10, 10), "left out the head axis"),
        (3, (4, 8, 10, 12), "gave q's shape"),
        (4, (4, 10, 8, 12), "stopped before the reshape"),
        (4, (4, 10, 12), "per-head width"),
        (4, (4, 8, 10, 12), "heads in front of T"),
        (5, (4, 8, 7, 10), "swapped queries and keys"),
        (5, (4, 8, 10, 10), "query length for the keys"),
        (5, (4, 8, 7, 7), "context length"),
        (5, "(4, 8, 10, 7)", "tuple of ints"),
    ],
)
def test_head_shapes_name_the_mistakes(part, value, match):
    answers = list(SHAPES)
    answers[part] = value
    text = fails_with(lesson08.check_head_shapes, *answers, match=match)
    assert str(SHAPES[part]) + " is" not in text, text


def test_head_shapes_report_every_wrong_part():
    text = fails_with(
        lesson08.check_head_shapes,
        8,
        (4, 10, 12, 8),
        (4, 10, 8, 12),
        (4, 10, 10),
        (4, 10, 12),
        (4, 8, 7, 10),
        match="head_dim",
    )
    assert text.count("✘") == 6, text


@pytest.mark.parametrize(
    "answers, match",
    [
        ((263168, 262144, 16384), None),
        ((263168.0, np.int64(262144), 256 * 64), None),
        ((4 * 256 * 256 + 4 * 256, 4 * 256 * 256, torch.tensor(16384).item()), None),
        ((3 * 256 * 256 + 3 * 256, 262144, 16384), "forgot the output projection"),
        ((262144, 262144, 16384), "left out the biases"),
        ((4 * 263168, 262144, 16384), "multiplied the count by the number of heads"),
        ((263168, 16 * 262144, 16384), "the head count does not change the parameter count"),
        ((263168, 263168, 16384), "bias=False"),
        ((263168, 262144, 4096), "d_k x d_k block"),
        ((263168, 262144, 65536), "the whole W_q"),
        ((263168, 262144, 16448), "weights only"),
        ((263168, 262144, 1000), "maps the d_model inputs"),
    ],
)
def test_param_counts(answers, match):
    if match is None:
        lesson08.check_param_counts(*answers)
    else:
        text = fails_with(lesson08.check_param_counts, *answers, match=match)
        assert "263,168 is" not in text.replace(f"{int(answers[0]):,} is", ""), text


def test_param_counts_report_every_wrong_part():
    text = fails_with(lesson08.check_param_counts, 262144, 263168, 4096, match="left out the biases")
    assert "bias=False" in text and "d_k x d_k block" in text, text


def _split(x, h):
    B, T, d = x.shape
    return x.view(B, T, h, d // h).transpose(1, 2)


def _merge(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def test_split_merge_reports_both_functions():
    lesson08.check_split_merge(_split, _merge)
    text = fails_with(
        lesson08.check_split_merge,
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1),
        lambda x: x.reshape(x.shape[0], x.shape[2], -1),
        match="without the transpose",
    )
    assert "merge_heads" in text and "glues together rows" in text, text


def _combine(heads, w_o, b_o, *, transpose=True, bias_check=True):
    d_k = heads.shape[-1]
    out = sum(
        heads[:, i] @ (w_o[:, i * d_k : (i + 1) * d_k].T if transpose else w_o[:, i * d_k : (i + 1) * d_k])
        for i in range(heads.shape[1])
    )
    return out if (bias_check and b_o is None) else out + b_o


def test_combine_by_sum_tries_no_bias_and_names_the_crash_it_causes():
    lesson08.check_combine_by_sum(_combine)
    text = fails_with(
        lesson08.check_combine_by_sum, lambda h, w, b: _combine(h, w, b, bias_check=False), match="b_o may be None"
    )
    assert "mind the shapes" not in text, text
    text = fails_with(
        lesson08.check_combine_by_sum, lambda h, w, b: _combine(h, w, b, transpose=False), match="mind the shapes"
    )


def test_combine_by_sum_crash_hint_fires_only_for_shape_errors():
    def crashes(heads, w_o, b_o):
        raise KeyError("nothing to do with shapes")

    text = fails_with(lesson08.check_combine_by_sum, crashes, match="raised KeyError")
    assert "Hint" not in text, text


def _mha(x, p, n, mask=None, *, fill=float("-inf"), dim=-1):
    B, T, d = x.shape
    q, k, v = (F.linear(x, p[f"w_{c}"], p[f"b_{c}"]).view(B, T, n, d // n).transpose(1, 2) for c in "qkv")
    s = q @ k.transpose(-2, -1) / math.sqrt(d // n)
    if mask is not None:
        s = s.masked_fill(~mask, fill)
    out = (torch.softmax(s, dim=dim) @ v).transpose(1, 2).reshape(B, T, d)
    return F.linear(out, p["w_o"], p["b_o"])


VISIBLE = [(2, 5, 12, 3, None), (1, 4, 8, 2, "causal")]  # the exercise's visible cases


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(), None),
        (dict(fill=-1e9), None),
        (dict(fill=0.0), "filled the masked scores with 0 instead of -inf"),
        (dict(dim=-2), "over the queries, dim=-2"),
        (dict(dim=1), "over the heads (dim=1)"),
    ],
)
def test_mha_forward_names_fill_zero_and_the_wrong_axis(kwargs, match):
    fn = lambda *a, **k: _mha(*a, **k, **kwargs)  # noqa: E731
    if match is None:
        lesson08.check_mha_forward(fn, cases=VISIBLE)
    else:
        fails_with(lesson08.check_mha_forward, fn, cases=VISIBLE, match=match)


def test_mha_forward_has_a_default_hint():
    def sigmoid_instead(x, p, n, mask=None):
        B, T, d = x.shape
        q, k, v = (F.linear(x, p[f"w_{c}"], p[f"b_{c}"]).view(B, T, n, d // n).transpose(1, 2) for c in "qkv")
        out = (torch.sigmoid(q @ k.transpose(-2, -1)) @ v).transpose(1, 2).reshape(B, T, d)
        return F.linear(out, p["w_o"], p["b_o"])

    fails_with(lesson08.check_mha_forward, sigmoid_instead, cases=VISIBLE, match="Hint: project x with W_q")
