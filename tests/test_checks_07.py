"""The lesson 07 exercise checks: table entries and parameter counts worked out by hand are sealed
(right answers pass however they are written, each listed mistake gets its hint, every wrong part is
reported), and the RoPE check accepts the rotate-half pairing that the prompt allows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from grading_helpers import fails_with

from course_lib import positional as P
from course_lib.checks import lesson07

RIGHT = (math.sin(2), math.cos(0.5), [0.0, 1.0, 0.0, 1.0])


@pytest.mark.parametrize(
    "answers",
    [
        RIGHT,
        (0.909, 0.878, (0, 1, 0, 1)),
        (np.float32(math.sin(2)), torch.tensor(math.cos(0.5)), np.array([0.0, 1.0, 0.0, 1.0])),
        (
            P.sinusoidal_encoding(3, 4)[2, 0],
            P.sinusoidal_encoding(51, 4, dtype=torch.float64)[50, 3],
            P.sinusoidal_encoding(1, 4)[0],
        ),
    ],
)
def test_pe_by_hand_passes_right_answers_written_any_way(answers):
    lesson07.check_pe_by_hand(*answers)


@pytest.mark.parametrize(
    "part, value, match",
    [
        (0, math.sin(math.radians(2)), "degrees"),
        (0, math.cos(2), "sin and cos the wrong way round"),
        (1, math.cos(50 / 10000 ** (2 * 3 / 4)), "column number as i"),
        (1, math.cos(50 / 10000 ** (2 * 3 / 4)), "or else you worked in degrees"),
        (1, math.cos(50 / 10000 ** (1 / 4)), "exponent i/d"),
        (1, math.cos(50 / 10000 ** (3 / 4)), "exponent column/d"),
        (1, math.sin(0.5), "sin and cos the wrong way round"),
        (1, 0.3, "column 3 is the cosine of pair i = 1"),
        (2, [1.0, 0.0, 1.0, 0.0], "swapped sin and cos"),
        (2, [0, 0, 0, 0], "sine in every column"),
        (2, [1, 1, 1, 1], "cosine in every column"),
        (2, [0, 1, 0], "not right"),
        (0, "0.909", "expected a number"),
    ],
)
def test_pe_by_hand_names_the_mistakes_without_the_answer(part, value, match):
    answers = list(RIGHT)
    answers[part] = value
    text = fails_with(lesson07.check_pe_by_hand, *answers, match=match)
    assert "0.877" not in text and "0.878" not in text and "0.909" not in text.replace("'0.909'", ""), text


def test_pe_by_hand_reports_every_wrong_part():
    text = fails_with(lesson07.check_pe_by_hand, math.cos(2), math.sin(0.5), [1, 0, 1, 0], match="pe_2_0")
    assert text.count("wrong way round") == 2 and "swapped sin and cos" in text, text


@pytest.mark.parametrize(
    "answers, match",
    [
        ((786432, 0, 0), None),
        ((1024 * 768.0, 0.0, 0), None),
        ((np.int64(786432), torch.tensor(0).item(), 0), None),
        ((1792, 0, 0), "added max_len and d_model"),
        ((768, 0, 0), "one position vector"),
        ((1024, 0, 0), "one number per position"),
        ((2 * 786432, 0, 0), "sine and a cosine table"),
        ((786432, 786432, 0), "never trained"),
        ((786432, 384, 0), "frequencies"),
        ((786432, 0, 768 * 768), "rotation matrix"),
        ((786432, 0, 393216), "table of angles"),
        ((786432, 0, 786432), "RoPE adds no table"),
        ((786432, 0, 1), "numbers that training adjusts"),
        ((786432, 0.5, 0), "whole number"),
    ],
)
def test_position_params(answers, match):
    if match is None:
        lesson07.check_position_params(*answers)
    else:
        text = fails_with(lesson07.check_position_params, *answers, match=match)
        assert "786,432 is" not in text.replace(f"{answers[0]:,} is", ""), text


def test_position_params_reports_every_wrong_part():
    text = fails_with(lesson07.check_position_params, 1792, 786432, 786432, match="added max_len and d_model")
    assert "never trained" in text and "RoPE adds no table" in text, text


def _rotate_half(x):
    half = x.shape[-1] // 2
    angle = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * P.frequencies(x.shape[-1]).to(
        torch.float64
    )  # (T, d/2)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()], dim=-1)


def _attend(q, k, v, scale=True):
    return torch.softmax(q @ k.T / (math.sqrt(q.shape[-1]) if scale else 1.0), dim=-1) @ v


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda q, k, v: _attend(P.apply_rotary(q), P.apply_rotary(k), v), None),
        (lambda q, k, v: _attend(_rotate_half(q), _rotate_half(k), v), None),  # GPT-NeoX / Llama pairing: accepted
        (lambda q, k, v: _attend(P.apply_rotary(q.float()), P.apply_rotary(k.float()), v.float()).double(), None),
        (
            lambda q, k, v: _attend(_rotate_half(q), k, _rotate_half(v)),
            "queries and the values (the bug in the given code): RoPE turns ",
        ),
        (lambda q, k, v: _attend(q, _rotate_half(k), v), "rotated only the keys"),
        (lambda q, k, v: _attend(_rotate_half(q), _rotate_half(k), v, scale=False), "division by sqrt(d)"),
        (lambda q, k, v: _attend(_rotate_half(q), _rotate_half(k), _rotate_half(v)), "values as well"),
        (lambda q, k, v: _attend(P.apply_rotary(q), _rotate_half(k), v), "rotate q and k with positional.apply_rotary"),
    ],
)
def test_rope_attention_accepts_either_pairing_and_names_mistakes_in_both(fn, match):
    if match is None:
        lesson07.check_rope_attention(fn, hidden=True)
    else:
        fails_with(lesson07.check_rope_attention, fn, match=match)


def test_rope_attention_says_which_pairing_a_mistake_used():
    text = fails_with(
        lesson07.check_rope_attention,
        lambda q, k, v: _attend(_rotate_half(q), k, _rotate_half(v)),
        match="bug in the given code",
    )
    assert "(with the rotate-half pairing)" in text, text
    text = fails_with(
        lesson07.check_rope_attention,
        lambda q, k, v: _attend(P.apply_rotary(q), k, P.apply_rotary(v)),
        match="bug in the given code",
    )
    assert "rotate-half" not in text, text
