"""The lesson 03 exercise checks: the references agree with course_lib.skips, the right answers pass,
and each typical wrong answer is named in the hint."""
from __future__ import annotations

import numpy as np
import pytest

from course_lib import checks, skips
from course_lib.checks import lesson03
from course_lib.data import load_sentences
from grading_helpers import fails_with

PROGRAM = "check the program log and find out whether it ran".split()
BATTERY = "check the battery log and find out whether it ran".split()
REPEATED = "check the battery log and check the battery log and find out whether it ran".split()
TOY = [s.split() for s in ["a b a c d", "b b c e", "a c b b d", "c a b e"]]


@pytest.fixture(scope="module")
def model():
    return skips.SkipPairVotes().fit(load_sentences("commands_long"))


# --- references ---------------------------------------------------------------------------------


@pytest.mark.parametrize("context", [PROGRAM, BATTERY, REPEATED, ["check", "the", "check", "the"]])
def test_reference_votes_match_the_library(model, context):
    want = model.votes_by_word(context)
    got = lesson03.reference_votes(model.pair_counts(), context)
    assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-12 for k in want), (got, want)


def test_reference_votes_match_the_library_on_a_toy_corpus():
    toy = skips.SkipPairVotes().fit(TOY)
    for context in (["a", "b", "a", "c"], ["c", "a", "b"], ["b", "a", "b", "b"]):
        want, got = toy.votes_by_word(context), lesson03.reference_votes(toy.pair_counts(), context)
        assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-12 for k in want), (context, got, want)


def test_reference_select_mask_and_feature_layer_match_the_library(model):
    M = skips.confident_pair_mask(model)
    for word in ("ran", "it", "check"):
        np.testing.assert_array_equal(lesson03.reference_select_mask(word, M, model.tokens), skips.mask_lookup(model.index(word), M))
    W1 = skips.conjunction_weights(model.tokens, [("battery", "ran"), ("program", "ran")])
    x = (np.random.default_rng(0).random((4, len(model.tokens))) < 0.5).astype(float)
    np.testing.assert_array_equal(lesson03.reference_feature_layer(x, W1), skips.feature_layer(x, W1))


# --- exercise 1 and 6: votes --------------------------------------------------------------------


def test_check_votes_names_the_counting_slips(model):
    pc = model.pair_counts()
    lesson03.check_votes("v", {"down": 4.0, "please": 5.0}, pc, PROGRAM)
    lesson03.check_votes("v", {"down": 4, "please": 5, "and": 0}, pc, PROGRAM)  # zero entries are fine
    fails_with(lesson03.check_votes, "v", {"down": 40.0, "please": 45.0}, pc, PROGRAM, match="without normalising")
    fails_with(lesson03.check_votes, "v", {"down": 8.0, "please": 6.0}, pc, REPEATED, match="vote twice")
    fails_with(lesson03.check_votes, "v", {"down": 5.0, "please": 4.0}, pc, PROGRAM, mistakes={"swapped them": {"down": 5.0, "please": 4.0}},
               match="swapped them")
    fails_with(lesson03.check_votes, "v", [4.0, 5.0], pc, PROGRAM, match="expected a dict")
    fails_with(lesson03.check_votes, "v", {"down": 3.0, "please": 6.0}, pc, PROGRAM, match="expected {'down': 4.0, 'please': 5.0}")


def buggy_count_votes(pair_counts, context):  # the function printed in exercise 6
    latest = context[-1]
    totals = {}
    for earlier in context[:-1]:
        row = pair_counts.get((earlier, latest), {})
        n = sum(row.values())
        for word, c in row.items():
            totals[word] = totals.get(word, 0.0) + c / n
    return totals


def test_check_vote_counter_names_the_bug_and_other_slips(model):
    pc = model.pair_counts()
    cases = [(pc, PROGRAM), (pc, REPEATED)]
    lesson03.check_vote_counter("cv", lesson03.reference_votes, cases)
    fails_with(lesson03.check_vote_counter, "cv", buggy_count_votes, cases, match="vote twice")
    fails_with(lesson03.check_vote_counter, "cv", lambda p, c: lesson03.reference_votes(p, c, normalise=False), cases,
               match="without normalising")
    toy = skips.SkipPairVotes().fit(TOY).pair_counts()
    fails_with(lesson03.check_vote_counter, "cv", lambda p, c: lesson03.reference_votes(p, c, include_latest=True), [(toy, ["c", "a", "b"])],
               match="paired the latest word with itself")
    fails_with(lesson03.check_vote_counter, "cv", lambda p, c: None, cases, match="forget to `return`")

    def blank(p, c):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson03.check_vote_counter("cv", blank, cases)


# --- exercise 2: the mask after "ran" -----------------------------------------------------------


def test_check_mask_ran_names_the_wrong_masks(model):
    V = len(model.tokens)

    def ones(*words):
        m = np.zeros(V)
        m[[model.index(w) for w in words]] = 1.0
        return m

    lesson03.check_mask_ran("m", ones("battery", "program"), model.tokens, PROGRAM)
    lesson03.check_mask_ran("m", ones("battery", "program").astype(int).tolist(), model.tokens, PROGRAM)
    fails_with(lesson03.check_mask_ran, "m", np.ones(V), model.tokens, PROGRAM, match="kept every pair")
    fails_with(lesson03.check_mask_ran, "m", model.presence(PROGRAM), model.tokens, PROGRAM, match="present in the command")
    fails_with(lesson03.check_mask_ran, "m", ones("battery", "program", "ran"), model.tokens, PROGRAM, match="kept 'ran' itself")
    fails_with(lesson03.check_mask_ran, "m", ones("program"), model.tokens, PROGRAM, match="kept only 'program'")
    fails_with(lesson03.check_mask_ran, "m", ones("battery"), model.tokens, PROGRAM, match="kept only 'battery'")
    fails_with(lesson03.check_mask_ran, "m", 1 - ones("battery", "program"), model.tokens, PROGRAM, match="inverted")
    at_position = np.zeros(V)
    at_position[2] = 1.0
    fails_with(lesson03.check_mask_ran, "m", at_position, model.tokens, PROGRAM, match="positions in the sentence")
    fails_with(lesson03.check_mask_ran, "m", np.zeros(len(PROGRAM)), model.tokens, PROGRAM, match="one entry per vocabulary token")
    fails_with(lesson03.check_mask_ran, "m", ["battery", "program"], model.tokens, PROGRAM, match="list of words")


# --- exercise 3: select_mask --------------------------------------------------------------------


def test_check_select_mask_names_a_column_and_a_shifted_index(model):
    M = skips.confident_pair_mask(model)
    M_random = (np.random.default_rng(0).random((5, 5)) < 0.5).astype(float)
    cases = [("ran", M, model.tokens), ("b", M_random, ["a", "b", "c", "d", "e"])]
    lesson03.check_select_mask("s", lesson03.reference_select_mask, cases)

    def one_hot(word, tokens):
        q = np.zeros(len(tokens))
        q[list(tokens).index(word)] = 1.0
        return q

    fails_with(lesson03.check_select_mask, "s", lambda w, M, t: np.asarray(M) @ one_hot(w, t), cases, match="picked a column")
    fails_with(lesson03.check_select_mask, "s", lambda w, M, t: np.asarray(M)[list(t).index(w) + 1], cases,
               match="one below the word's index")
    fails_with(lesson03.check_select_mask, "s", lambda w, M, t: np.asarray(M)[list(t).index(w) - 1], cases,
               match="one above the word's index")


# --- exercise 4: shapes -------------------------------------------------------------------------


def test_check_shape_answer_names_known_shapes():
    checks.check_shape_answer("s", (12, 12), (12, 12))
    fails_with(checks.check_shape_answer, "s", (13, 13), (12, 12), mistakes={"confused V and T": (13, 13)}, match="confused V and T")
    fails_with(checks.check_shape_answer, "s", (13, 12), (12, 13), match="transposed")
    fails_with(checks.check_shape_answer, "s", "(12, 12)", (12, 12), match="tuple of ints")
    fails_with(checks.check_shape_answer, "s", (12.9, 12), (12, 12), match="tuple of ints")  # no silent int() truncation
    fails_with(checks.check_shape_answer, "s", ["12", "12"], (12, 12), match="tuple of ints")
    fails_with(checks.check_shape_answer, "s", (12, 12), (2, 12, 12), match="3 axes")
    fails_with(checks.check_shape_answer, "s", (3, 4), (12, 13), hint="one row per word", match="one row per word")


# --- exercise 5: the feature layer --------------------------------------------------------------


def test_check_feature_layer_names_a_missing_relu_or_bias(model):
    W1 = skips.conjunction_weights(model.tokens, [("battery", "ran"), ("program", "ran")])
    x = np.zeros((3, len(model.tokens)))
    x[0, [model.index("battery"), model.index("ran")]] = 1.0
    x[1, model.index("battery")] = 1.0  # a single word: the sum is 0, or -1 with nothing present
    cases = [(x, W1), (x[0], W1)]
    lesson03.check_feature_layer("f", lesson03.reference_feature_layer, cases)
    lesson03.check_feature_layer("f", skips.feature_layer, cases)
    with_bias = lambda x: np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)  # noqa: E731
    fails_with(lesson03.check_feature_layer, "f", lambda x, W: with_bias(x) @ W, cases, match="forgot the ReLU")
    fails_with(lesson03.check_feature_layer, "f", lambda x, W: np.maximum(x @ W[:-1], 0), cases, match="forgot the bias")
    fails_with(lesson03.check_feature_layer, "f",
               lambda x, W: np.maximum(np.concatenate([np.ones(x.shape[:-1] + (1,)), x], axis=-1) @ W, 0), cases,
               match="put the bias input first")
    fails_with(lesson03.check_feature_layer, "f", lambda x, W: np.maximum(x @ W[:-1] - W[-1], 0), cases,
               match="subtracted the bias row")


# --- exercise 7: a three-word AND ---------------------------------------------------------------


def test_check_and_gate_names_a_wrong_bias(model):
    group = ["battery", "log", "ran"]
    W = skips.conjunction_weights(model.tokens, [group])
    lesson03.check_and_gate("w", W, model.tokens, group)
    for bias, phrase in [(-1.0, "not negative enough"), (0.0, "not negative enough"), (-3.0, "never fires")]:
        wrong = W.copy()
        wrong[-1, 0] = bias
        fails_with(lesson03.check_and_gate, "w", wrong, model.tokens, group, match=phrase)
    fails_with(lesson03.check_and_gate, "w", W[:-1], model.tokens, group, match="left out the bias row")
    extra = W.copy()
    extra[model.index("please"), 0] = 1.0  # another word must not switch the feature on
    fails_with(lesson03.check_and_gate, "w", extra, model.tokens, group, match="outside the group")


# --- messages a learner walkthrough asked for ---------------------------------------------------


def test_hand_counted_votes_do_not_reveal_the_answer(model):
    pc = model.pair_counts()
    text = fails_with(lesson03.check_votes, "v", {"down": 3.0, "please": 6.0}, pc, PROGRAM, reveal=False, match="not right")
    assert "4.0" not in text and "5.0" not in text, text


def test_vote_counter_that_ignores_pair_counts_is_named(model):
    pc = model.pair_counts()
    fails_with(lesson03.check_vote_counter, "cv", lambda p, c: model.votes_by_word(c), [(pc, PROGRAM)],
               match="ignored the pair_counts argument")


def test_feature_layer_with_np_append_is_named(model):
    W1 = skips.conjunction_weights(model.tokens, [("battery", "ran"), ("program", "ran")])
    x = np.zeros((4, len(model.tokens)))
    x[0, [model.index("battery"), model.index("ran")]] = 1.0
    fails_with(lesson03.check_feature_layer, "f", lambda x, W: np.maximum(np.append(x, 1.0) @ W, 0), [(x[0], W1), (x, W1)],
               match="np.append flattens")


def test_and_gate_asks_for_unit_weights_unless_told_otherwise(model):
    group = ["battery", "log", "ran"]
    W = skips.conjunction_weights(model.tokens, [group]) * 2
    W[-1, 0] = -5.0  # 2 + 2 + 2 - 5 = 1: a working gate, but not with the +1 weights the exercise asks for
    fails_with(lesson03.check_and_gate, "w", W, model.tokens, group, match="weight of +1")
    lesson03.check_and_gate("w", W, model.tokens, group, word_weight=None)
