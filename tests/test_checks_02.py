"""The lesson 02 exercise checks: answers worked out by hand are sealed (right answers pass however
they are written, each listed mistake gets its hint, every wrong part is reported, no failure shows
an answer), the new transition-matrix data catches the usual slips, and add-k names k·(V−1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from grading_helpers import fails_with

from course_lib.checks import lesson02
from course_lib.markov import END

T = np.array([[0.0, 0.5, 0.25, 0.25], [0.1, 0.0, 0.6, 0.3], [0.5, 0.2, 0.0, 0.3], [1.0, 0.0, 0.0, 0.0]])
LIGHTS = [s.split() for s in ["turn the light on", "turn the radio on", "turn the light off", "dim the light"]]
LIGHTS_VOCAB = [END, "turn", "the", "light", "on", "radio", "off", "dim"]


# --- exercise 1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "after_green, shape_P",
    [
        ([0.5, 0.2, 0.0, 0.3], (5, 4)),
        ((0.5, 0.2, 0, 0.3), [5, 4]),
        (np.array([0.5, 0.2, 0.0, 0.3]), torch.Size([5, 4])),
        (torch.tensor([0.5, 0.2, 0.0, 0.3]), (np.int64(5), 4)),
        (T[2], (5, 4)),
    ],
)
def test_one_hot_lookup_passes_right_answers_written_any_way(after_green, shape_P):
    lesson02.check_one_hot_lookup(after_green, shape_P)


@pytest.mark.parametrize(
    "after_green, shape_P, match",
    [
        (T[:, 2], (5, 4), "took the column"),
        (T[1], (5, 4), "row of 'red'"),
        (T[3], (5, 4), "row of 'blue'"),
        ([0, 0, 1, 0], (5, 4), "one-hot vector of 'green' itself"),
        ([0.5, 0.2, 0.3, 0.0], (5, 4), "keeps exactly that row"),
        ({"<end>": 0.5}, (5, 4), "expected numbers"),
        (T[2], (4, 4), "shape of T"),
        (T[2], (5, 5), "one ROW per word"),
        (T[2], (3, 4), "distinct words"),
        (T[2], (4, 5), "transposed"),
        (T[2], (5, 4.0), "tuple of ints"),
    ],
)
def test_one_hot_lookup_names_the_mistakes(after_green, shape_P, match):
    text = fails_with(lesson02.check_one_hot_lookup, after_green, shape_P, match=match)
    assert "0.2, 0.0, 0.3" not in text and "(5, 4) is" not in text, text


def test_one_hot_lookup_reports_both_wrong_parts():
    text = fails_with(lesson02.check_one_hot_lookup, T[:, 2], (4, 4), match="took the column")
    assert "shape_P: (4, 4) is not right" in text and "shape of T" in text, text


# --- exercise 3 ---------------------------------------------------------------------------------

P = np.array([0.5, 0.25, 0.5, 0.125])


@pytest.mark.parametrize(
    "ppl, uniform",
    [
        (128**0.25, 600),
        (3.3636, 600.0),
        (np.float32(math.exp(-np.log(P).mean())), np.int64(600)),
        (torch.tensor(128**0.25), torch.tensor(600.0)),
    ],
)
def test_perplexity_passes_right_answers_written_any_way(ppl, uniform):
    lesson02.check_perplexity(ppl, uniform)


@pytest.mark.parametrize(
    "ppl, uniform, match",
    [
        (np.exp(np.mean(np.log(P))), 600, "forgot the minus sign"),
        (np.exp(-np.sum(np.log(P))), 600, "forgot to average"),
        (np.exp(-np.mean(np.log10(P))), 600, "used log10 with exp"),
        (np.exp(-np.mean(np.log2(P))), 600, "used log2 with exp"),
        (2 ** (-np.mean(np.log(P))), 600, "with 2 ** (...)"),
        (1 / np.mean(P), 600, "averaged the probabilities"),
        (np.exp(-np.mean(np.log(P[:3]))), 600, "left out one of the four"),
        (-np.mean(np.log(P)), 600, "gave the cross-entropy"),
        (3.36, 600, "at least 4 significant digits"),
        (128**0.25, 1 / 600, "forgot the minus sign"),
        (128**0.25, math.inf, "forgot to average"),
        (128**0.25, math.log(600), "took the log-probability itself"),
        (128**0.25, "600", "expected a number"),
    ],
)
def test_perplexity_names_the_mistakes_without_the_answer(ppl, uniform, match):
    text = fails_with(lesson02.check_perplexity, ppl, uniform, match=match)
    assert "3.36" not in text.replace("3.36 is", "") and "600 is" not in text.replace(f"{uniform} is", ""), text


def test_perplexity_reports_both_wrong_parts():
    text = fails_with(lesson02.check_perplexity, 1 / np.mean(P), 1 / 600, match="averaged the probabilities")
    assert "ppl_uniform" in text and "forgot the minus sign" in text, text


# --- exercise 7 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answers",
    [(0.3, 1.0, 0.42), (3 / 10, 1, 0.3 * 0.7 + 0.7 * 0.3), (np.float32(0.3), torch.tensor(1.0), np.float64(0.42))],
)
def test_context_passes_right_answers_written_any_way(answers):
    lesson02.check_context(*answers)


@pytest.mark.parametrize(
    "answers, match",
    [
        ((0.7, 1.0, 0.42), "P(on | light)"),
        ((3, 1.0, 0.42), "count instead of the probability"),
        ((0.3, 0.3, 0.42), "used the first-order probability"),
        ((0.3, 0.0, 0.42), "the other light"),
        ((0.3, 1.0, 0.21), "only one of the two invented"),
        ((0.3, 1.0, 0.58), "did occur"),
        ((0.3, 1.0, 0.09), "kitchen and off"),
        ((0.3, 1.0, 0.49), "garden and on"),
        ((0.3, 1.0, 0.0), "no longer knows which light"),
        ((0.3, 1.0, 0.5), "add the probabilities of those two paths"),
    ],
)
def test_context_names_the_mistakes(answers, match):
    fails_with(lesson02.check_context, *answers, match=match)


def test_context_reports_every_wrong_part():
    text = fails_with(lesson02.check_context, 0.7, 0.3, 0.21, match="P(on | light)")
    assert "used the first-order probability" in text and "only one of the two invented" in text, text


# --- exercises 2 and 4 --------------------------------------------------------------------------


def test_transition_matrix_on_the_new_commands_names_the_usual_slips():
    cases = [(LIGHTS, LIGHTS_VOCAB), (LIGHTS, LIGHTS_VOCAB + ["unused"])]
    lesson02.check_transition_matrix("tm", lesson02.reference_transition_matrix, cases)
    T = lesson02.reference_transition_matrix(LIGHTS, LIGHTS_VOCAB)
    assert T[2, 3] == 0.75 and T[2, 5] == 0.25 and np.allclose(T[3, [0, 4, 6]], 1 / 3), "the prompt's example numbers"
    counts = lesson02._counts
    wrong = {
        "normalised the columns": lambda s, v: (
            lambda c: np.divide(c, c.sum(0, keepdims=True), out=np.zeros_like(c), where=c.sum(0, keepdims=True) > 0)
        )(counts(s, v)),
        "forgot to append the end token": lambda s, v: lesson02._rows(counts(s, v, append=False)),
        "forgot to put the end token in front": lambda s, v: lesson02._rows(counts(s, v, prepend=False)),
        "left out the end token altogether": lambda s, v: lesson02._rows(counts(s, v, prepend=False, append=False)),
        "divided by the total count": lambda s, v: counts(s, v) / counts(s, v).sum(),
        "without normalising": lambda s, v: counts(s, v),
        "0/0 = NaN": lambda s, v: counts(s, v) / counts(s, v).sum(axis=1, keepdims=True),
        "wrong way round": lambda s, v: lesson02._rows(counts(s, v).T),
    }
    for phrase, fn in wrong.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            fails_with(lesson02.check_transition_matrix, "tm", fn, cases, match=phrase)


def test_add_k_names_k_times_v_minus_one():
    counts = {("my",): {"directories": 2, "files": 3, "photos": 5}, ("ran",): {"down": 4, "please": 6}}
    cases = [
        (counts, ("my",), "files", 1.0, 15),
        (counts, ("ran",), "down", 0.1, 15),
        (counts, ("my",), "show", 0.5, 15),
        (counts, ("battery", "ran"), "down", 1.0, 15),
    ]
    lesson02.check_add_k("ak", lesson02.reference_add_k, cases)
    lesson02.check_add_k("ak", lambda c, x, w, k, V: np.float32(lesson02.reference_add_k(c, x, w, k, V)), cases)

    def k_times_v_minus_one(c, ctx, w, k, V):
        row = c.get(ctx, {})
        return (row.get(w, 0) + k) / (sum(row.values()) + k * (V - 1))

    fails_with(lesson02.check_add_k, "ak", k_times_v_minus_one, cases, match="k * (V - 1)")
