"""The lesson 03 exercise checks: the references agree with course_lib.skips, the right answers pass,
and each typical wrong answer is named in the hint."""
from __future__ import annotations

import numpy as np
import pytest
import torch

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


# --- the exercise set's lamp commands: answers worked out by hand are sealed ---------------------

LAMPS = [s.split() for s in ["ask whether the red lamp in the hall is on now"] * 3 + ["ask whether the blue lamp in the hall is off now"]]
RED = "ask whether the red lamp in the hall is".split()
BLUE = "ask whether the blue lamp in the hall is".split()


@pytest.fixture(scope="module")
def lamps():
    return skips.SkipPairVotes().fit(LAMPS)


def test_the_sealed_lamp_answers_are_the_models_own(lamps):
    votes = lamps.votes_by_word(BLUE)
    lesson03.check_votes_by_hand(votes, max(votes, key=votes.get), max(votes.values()) / sum(votes.values()))
    lesson03.check_mask_is(skips.confident_pair_mask(lamps)[lamps.index("is")], lamps.tokens)
    X = np.eye(len(lamps.tokens))[[lamps.index(w) for w in BLUE + ["off", "now"]]]
    M = skips.confident_pair_mask(lamps)
    W1 = skips.conjunction_weights(lamps.tokens, [("red", "is"), ("blue", "is")])
    lesson03.check_shapes(X.shape, (X @ M).shape, ((X @ M) @ X.T).shape, W1.shape)


@pytest.mark.parametrize("votes, winner, share", [
    ({"on": 4.5, "off": 2.5}, "on", 0.64), ({"off": 2.5, "on": 4.5}, " 'On' ", 4.5 / 7), ({"on": 4.5, "off": 2.5, "now": 0}, "on", np.float32(0.643)),
    ({"on": np.float64(4.5), "off": 5 / 2}, "on", 0.6428),
])
def test_votes_by_hand_pass_right_answers_written_any_way(votes, winner, share):
    lesson03.check_votes_by_hand(votes, winner, share)


@pytest.mark.parametrize("votes, winner, share, match", [
    ({"on": 5.25, "off": 2.75}, "on", 0.64, "vote twice ('the')"),
    ({"on": 18, "off": 7}, "on", 0.64, "raw counts"),
    ({"on": 5.5, "off": 1.5}, "on", 0.64, "prefix of the RED lamp"),
    ({"on": 2.5, "off": 4.5}, "on", 0.64, "swapped on and off"),
    ({"off": 1.0}, "on", 0.64, "only the informative pair"),
    ({"on": 5.25, "off": 1.75}, "on", 0.64, "same split as the other pairs"),
    ({"on": 4.0, "off": 3.0}, "on", 0.64, "each of the 7 distinct earlier words"),
    ({"on": 4.5, "off": 2.5, "hall": 1.0}, "on", 0.64, "only ever saw 'on' and 'off'"),
    ([4.5, 2.5], "on", 0.64, "expected a dict"),
    ({"on": 4.5, "off": 2.5}, "off", 0.64, "outvote the one that knows"),
    ({"on": 4.5, "off": 2.5}, 1, 0.64, "expected a string"),
    ({"on": 4.5, "off": 2.5}, "on", 2.5 / 7, "loser's share"),
    ({"on": 4.5, "off": 2.5}, "on", 4.5 / 2.5, "by the loser's"),
    ({"on": 4.5, "off": 2.5}, "on", 1.0, "after masking"),
    ({"on": 4.5, "off": 2.5}, "on", 0.5, "coin-flip"),
    ({"on": 4.5, "off": 2.5}, "on", 5.5 / 7, "red lamp's prefix"),
])
def test_votes_by_hand_name_the_mistakes_without_the_answer(votes, winner, share, match):
    fails_with(lesson03.check_votes_by_hand, votes, winner, share, match=match)


def test_votes_by_hand_report_every_wrong_part_and_never_the_answers():
    text = fails_with(lesson03.check_votes_by_hand, {"on": 5.25, "off": 2.75}, "off", 0.5, match="vote twice")
    assert "winner_blue" in text and "share_blue" in text and "coin-flip" in text, text
    assert "votes_blue: got {'off': 2.75, 'on': 5.25}" in text, "the learner's own dict is shown"
    text = fails_with(lesson03.check_votes_by_hand, {"on": 4.0, "off": 3.0}, "on", 0.57, match="not right")
    assert "4.5" not in text and "2.5" not in text and "0.64" not in text, text


def test_mask_is_names_the_wrong_masks(lamps):
    tokens = lamps.tokens
    V = len(tokens)

    def ones(*words):
        m = np.zeros(V)
        m[[lamps.index(w) for w in words]] = 1.0
        return m

    for right in (ones("blue", "red"), ones("blue", "red").astype(int).tolist(), ones("blue", "red").astype(bool),
                  tuple(ones("blue", "red")), torch.tensor(ones("blue", "red"))):
        lesson03.check_mask_is(right, tokens)
    fails_with(lesson03.check_mask_is, np.ones(V), tokens, match="kept every pair")
    fails_with(lesson03.check_mask_is, lamps.presence(BLUE), tokens, match="present in the blue command")
    fails_with(lesson03.check_mask_is, ones("blue", "red", "is"), tokens, match="kept 'is' itself")
    fails_with(lesson03.check_mask_is, ones("blue"), tokens, match="kept only 'blue'")
    fails_with(lesson03.check_mask_is, ones("red"), tokens, match="kept only 'red'")
    fails_with(lesson03.check_mask_is, 1 - ones("blue", "red"), tokens, match="inverted")
    fails_with(lesson03.check_mask_is, ones("on", "off"), tokens, match="words after 'is'")
    at_position = np.zeros(V)
    at_position[BLUE.index("blue")] = 1.0
    fails_with(lesson03.check_mask_is, at_position, tokens, match="position in the sentence")
    fails_with(lesson03.check_mask_is, np.zeros(len(BLUE)), tokens, match="one entry per vocabulary token")
    fails_with(lesson03.check_mask_is, ["blue", "red"], tokens, match="list of words")
    text = fails_with(lesson03.check_mask_is, ones("blue", "hall"), tokens, match="always predicts the same next word")
    assert "blue" not in text and " red" not in text, text


@pytest.mark.parametrize("shapes, match", [
    (((9, 12), (11, 12), (11, 11), (13, 2)), "prefix up to 'is'"),
    (((10, 12), (11, 12), (11, 11), (13, 2)), "left out a word"),
    (((11, 10), (11, 12), (11, 11), (13, 2)), "distinct word"),
    (((12, 11), (11, 12), (11, 11), (13, 2)), "transposed"),
    (((11, 12), (12, 12), (11, 11), (13, 2)), "shape of M itself"),
    (((11, 12), (11, 11), (11, 11), (13, 2)), "X @ M only"),
    (((11, 12), (11, 12), (12, 12), (13, 2)), "confused V and T"),
    (((11, 12), (11, 12), (11, 12), (13, 2)), "stopped after X @ M"),
    (((11, 12), (11, 12), (11, 11), (12, 2)), "left out the bias row"),
    (((11, 12), (11, 12), (11, 11), (2, 13)), "transposed"),
    (((11, 12), (11, 12), (11, 11), (13, 1)), "its own column"),
    (((11, 12), (11, 12), (11, 11), "(13, 2)"), "tuple of ints"),
])
def test_shapes_name_the_mistakes(shapes, match):
    fails_with(lesson03.check_shapes, *shapes, match=match)
    lesson03.check_shapes([11, 12], torch.Size([11, 12]), (np.int64(11), 11), np.array([13, 2]).tolist())


def test_shapes_report_every_wrong_part():
    text = fails_with(lesson03.check_shapes, (9, 12), (12, 12), (12, 12), (12, 2), match="shape_X")
    for part in ("shape_XM", "shape_S", "shape_W1", "left out the bias row"):
        assert part in text, text


def test_the_visible_vote_counter_cases_catch_the_latest_word_paired_with_itself(lamps):
    pc = lamps.pair_counts()
    repeated = "ask whether the blue lamp in the hall ask whether the blue lamp in the hall is".split()
    cases = [(pc, RED), (pc, repeated), (pc, ["ask", "whether", "the"])]  # the exercise's visible cases
    lesson03.check_vote_counter("cv", lesson03.reference_votes, cases)

    def with_set(pair_counts, context):  # `for earlier in set(context)`: the latest word pairs with itself
        totals = {}
        for earlier in set(context):
            row = pair_counts.get((earlier, context[-1]), {})
            for word, c in row.items():
                totals[word] = totals.get(word, 0.0) + c / sum(row.values())
        return totals

    fails_with(lesson03.check_vote_counter, "cv", with_set, cases, match="paired the latest word with itself")
    fails_with(lesson03.check_vote_counter, "cv", buggy_count_votes, cases, match="vote twice")
    assert buggy_count_votes(pc, RED) == {"on": 6.25, "off": 1.75}, "the numbers the prompt quotes"


def test_feature_layer_names_abs_instead_of_relu(lamps):
    W1 = skips.conjunction_weights(lamps.tokens, [("red", "is"), ("blue", "is")])

    def multi_hot(*words):
        x = np.zeros(len(lamps.tokens))
        x[[lamps.index(w) for w in words]] = 1.0
        return x

    inputs = np.stack([multi_hot("red", "is"), multi_hot("blue", "is"), multi_hot("red"), multi_hot("is"), multi_hot("hall")])
    cases = [(multi_hot("red", "is"), W1), (inputs, W1)]  # the exercise's visible cases
    W2 = skips.conjunction_weights(lamps.tokens, [("red", "is"), ("blue", "is")], weight=2)
    cases += [(multi_hot("red", "is"), W2), (inputs, W2)]
    lesson03.check_feature_layer("f", lesson03.reference_feature_layer, cases)
    lesson03.check_feature_layer("f", lambda x, W: torch.relu(torch.as_tensor(np.concatenate([x, np.ones(x.shape[:-1] + (1,))], -1) @ W)).numpy(), cases)
    with_bias = lambda x: np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)  # noqa: E731
    fails_with(lesson03.check_feature_layer, "f", lambda x, W: np.abs(with_bias(x) @ W), cases, match="used abs instead of the ReLU")
    fails_with(lesson03.check_feature_layer, "f", lambda x, W: with_bias(x) @ W, cases, match="forgot the ReLU")


def test_and_gate_of_four_words_with_the_lessons_margin(lamps):
    group = ["blue", "lamp", "hall", "off"]
    W = skips.conjunction_weights(lamps.tokens, [group], weight=2)
    lesson03.check_and_gate("W_four", W, lamps.tokens, group, word_weight=2)
    lesson03.check_and_gate("W_four", W.ravel().tolist(), lamps.tokens, group, word_weight=2.0)
    lesson03.check_and_gate("W_four", W.astype(int), lamps.tokens, group, word_weight=2)
    for bias, phrase in [(-3.0, "not negative enough"), (-5.0, "not negative enough"), (-8.0, "never fires"),
                         (-6.0, "the bias must bring that down to exactly 1")]:
        wrong = W.copy()
        wrong[-1, 0] = bias
        text = fails_with(lesson03.check_and_gate, "W_four", wrong, lamps.tokens, group, word_weight=2, match=phrase)
        assert "-7" not in text, text
    fails_with(lesson03.check_and_gate, "W_four", skips.conjunction_weights(lamps.tokens, [group]), lamps.tokens, group, word_weight=2,
               match="weight of +2")
    extra = W.copy()
    extra[lamps.index("now"), 0] = 2.0
    fails_with(lesson03.check_and_gate, "W_four", extra, lamps.tokens, group, word_weight=2, match="each group word +2")


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


def test_check_shape_names_known_shapes():
    checks.check_shape("s", (12, 12), (12, 12))
    fails_with(checks.check_shape, "s", (13, 13), (12, 12), mistakes={"confused V and T": (13, 13)},
               match="confused V and T")
    fails_with(checks.check_shape, "s", (13, 12), (12, 13), match="transposed")
    fails_with(checks.check_shape, "s", "(12, 12)", (12, 12), match="tuple of ints")
    fails_with(checks.check_shape, "s", (12.9, 12), (12, 12), match="tuple of ints")  # no silent int() truncation
    fails_with(checks.check_shape, "s", ["12", "12"], (12, 12), match="tuple of ints")
    fails_with(checks.check_shape, "s", (12, 12), (2, 12, 12), match="3 axes")
    fails_with(checks.check_shape, "s", (3, 4), (12, 13), hint="one row per word", match="one row per word")


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
