"""The lesson 01 exercise checks for answers worked out by hand, and the hints added for cosine_rows:
right answers pass however they are written, each listed mistake gets its hint, every wrong part
is reported, and no failure shows an answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from grading_helpers import fails_with

from course_lib.checks import lesson01

norm = np.linalg.norm


@pytest.mark.parametrize(
    "dot_ab, cos_ab",
    [
        (4, 4 / 9),
        (4.0, 0.444444),
        (np.int64(4), np.float32(4 / 9)),
        (torch.tensor(4.0), torch.tensor(4 / 9, dtype=torch.float64)),
    ],
)
def test_cosine_by_hand_passes_right_answers_written_any_way(dot_ab, cos_ab):
    lesson01.check_cosine_by_hand(dot_ab, cos_ab)


@pytest.mark.parametrize(
    "dot_ab, cos_ab, match",
    [
        (6, 4 / 9, "added the entries"),
        (8, 4 / 9, "dropped the minus sign"),
        (4, 4.0, "forgot to divide by the lengths"),
        (4, 4 / 3, "only one length"),
        (4, 4 / 81, "squared lengths"),
        (4, 4 / 6, "|a| + |b|"),
        (4, 8 / 9, "dropped the minus sign"),
        (4, 0.44, "rounded to 2 decimals"),
        (4, 0.444, "rounded to 3 decimals"),
        (4, 0.4444, "rounded to 4 decimals"),
        (4, 0.445, "rounded the last digit up"),
        (4, 0.5, "lies between -1 and 1"),
        (4, "4/9", "expected a number"),
        (4, [0.4, 0.4], "expected a single number"),
    ],
)
def test_cosine_by_hand_names_the_mistakes_without_the_answer(dot_ab, cos_ab, match):
    text = fails_with(lesson01.check_cosine_by_hand, dot_ab, cos_ab, match=match)
    assert "0.4444" not in text.replace(repr(cos_ab), "") and "expected 4" not in text, text


def test_cosine_by_hand_reports_both_wrong_parts():
    text = fails_with(lesson01.check_cosine_by_hand, 6, 0.444, match="dot_ab: 6 is not right")
    assert "cos_ab: 0.444 is not right" in text and "rounded to 3 decimals" in text, text


@pytest.mark.parametrize(
    "shapes",
    [
        ((4, 7, 50), (4, 7, 16), 22400),
        ([4, 7, 50], torch.Size([4, 7, 16]), 22400.0),
        (tuple(np.array([4, 7, 50])), (4, 7, 16), np.int64(22400)),
        (np.array([4, 7, 50]), torch.tensor([4, 7, 16]), torch.tensor(22400).item()),
    ],
)
def test_lookup_shapes_pass_right_answers_written_any_way(shapes):
    lesson01.check_lookup_shapes(*shapes)


@pytest.mark.parametrize(
    "shapes, match",
    [
        (((50, 4, 7), (4, 7, 16), 22400), "vocabulary axis first"),
        (((28, 50), (4, 7, 16), 22400), "flattened the batch"),
        (((4, 7, 16), (4, 7, 16), 22400), "asks for the one-hot array itself"),
        (((4, 7, 50), (4, 7, 50), 22400), "kept the vocabulary axis"),
        (((4, 7, 50), (16, 4, 7), 22400), "put E's columns first"),
        (((4, 7, 50), (4, 7, 16), 448), "counted the dot products"),
        (((4, 7, 50), (4, 7, 16), 1400), "entries of the one-hot array"),
        (((4, 7, 50), (4, 7, 16), 5600), "only one sentence"),
        (((4, 7, 50), (4, 7, 16), 44800), "multiplications and the additions separately"),
        (((4, 7, 50), (4, 7, 16), 22400.5), "whole number"),
        (((4, 7, 50), "4, 7, 16", 22400), "tuple of ints"),
        ((np.array([4.0, 7.0, 50.0]), (4, 7, 16), 22400), "tuple of ints"),
    ],
)
def test_lookup_shapes_name_the_mistakes(shapes, match):
    text = fails_with(lesson01.check_lookup_shapes, *shapes, match=match)
    assert "22400" not in text.replace(repr(shapes[2]), "") and "22,400" not in text, text


def test_lookup_shapes_report_every_wrong_part():
    text = fails_with(lesson01.check_lookup_shapes, (28, 50), (28, 16), 448, match="shape_one_hot")
    for part in ("shape_one_hot: (28, 50)", "shape_lookup: (28, 16)", "multiply_adds: 448"):
        assert part in text, text


@pytest.mark.parametrize(
    "fn, match",
    [
        (
            lambda a, b: (a * b).sum(1) / (norm(a, axis=1, keepdims=True) * norm(b, axis=1, keepdims=True)),
            "keepdims=True",
        ),
        (lambda a, b: (a * b).sum(1, keepdims=True) / (norm(a, axis=1) * norm(b, axis=1)), "keepdims=True"),
        (
            lambda a, b: (
                (a * b).sum(1, keepdims=True) / (norm(a, axis=1, keepdims=True) * norm(b, axis=1, keepdims=True))
            ),
            "keepdims=True everywhere",
        ),
        (lambda a, b: (a * b).sum(1) / norm(a, axis=1) ** 2, "divided by |a|²"),
        (lambda a, b: (a * b).sum(1) / norm(b, axis=1) ** 2, "divided by |b|²"),
        (lambda a, b: (a @ b.T) / np.outer(norm(a, axis=1), norm(b, axis=1)), r"a @ b.T"),
    ],
)
def test_cosine_rows_names_keepdims_and_squared_lengths(fn, match):
    text = fails_with(lesson01.check_cosine_rows, fn, match=match)
    if "keepdims" in match:
        assert "a @ b.T" not in text, text


def test_embed_by_matmul_catches_indexing_that_hides_its_grad_fn():
    # The grader sees only values (the learner's function runs in its own process), so the check must
    # recognise an index lookup by what it computes, not by the name of its autograd node.
    fails_with(lesson01.check_embed_by_matmul, lambda ids, E: E[ids] * 1.0, match="indexing E directly")
    fails_with(
        lesson01.check_embed_by_matmul,
        lambda ids, E: torch.index_select(E, 0, ids.flatten()).reshape(*ids.shape, -1) + 0.0,
        match="indexing E directly",
    )
    lesson01.check_embed_by_matmul(lambda ids, E: torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype) @ E)
