"""The second-order model with skips (course_lib.markov, lesson 03 section) against a brute-force
count with collections.Counter, plus masks, mask lookup and the hand-made ReLU feature layer."""

from __future__ import annotations

import itertools
import random
from collections import Counter, defaultdict

import numpy as np
import pytest
import torch

from course_lib import skips
from course_lib.data import load_sentences

PROGRAM = "check the program log and find out whether it ran please".split()
BATTERY = "check the battery log and find out whether it ran down please".split()


def brute_force_votes(sequences, context):
    """Count (earlier, latest) -> next with Counters, position by position, then add normalised votes."""
    pair_next: dict[tuple, Counter] = defaultdict(Counter)
    for seq in sequences:
        for t in range(len(seq) - 1):
            for earlier in set(seq[:t]):  # each distinct earlier word once
                pair_next[(earlier, seq[t])][seq[t + 1]] += 1
    totals: Counter = Counter()
    for earlier in set(context[:-1]):
        row = pair_next.get((earlier, context[-1]), Counter())
        n = sum(row.values())
        for word, c in row.items():
            totals[word] += c / n
    return dict(totals), pair_next


@pytest.fixture
def corpus():
    return load_sentences("commands_long")


def test_curriculum_numbers(corpus):
    model = skips.SkipPairVotes().fit(corpus)
    assert model.votes_by_word(PROGRAM[:10]) == {"down": 4.0, "please": 5.0}, model.votes_by_word(PROGRAM[:10])
    assert model.votes_by_word(BATTERY[:10]) == {"down": 5.0, "please": 4.0}, model.votes_by_word(BATTERY[:10])
    mask = skips.mask_lookup(model.index("ran"), skips.confident_pair_mask(model))
    kept = [model.tokens[i] for i in np.flatnonzero(mask)]
    assert kept == ["battery", "program"], f"the mask for 'ran' keeps {kept}, expected ['battery', 'program']"
    assert model.votes_by_word(PROGRAM[:10], mask) == {"please": 1.0}
    assert model.votes_by_word(BATTERY[:10], mask) == {"down": 1.0}


def test_counts_match_brute_force_on_random_corpora():
    rng = random.Random(0)
    words = list("abcdefg")
    for _ in range(5):
        sequences = [[rng.choice(words) for _ in range(rng.randint(1, 9))] for _ in range(12)]
        model = skips.SkipPairVotes().fit(sequences)
        _, pair_next = brute_force_votes(sequences, ["a"])
        got = model.pair_counts()
        want = {k: v for k, v in pair_next.items() if v}
        assert got == want, f"pair counts differ:\n got  {got}\n want {want}"
        for seq in sequences:
            for t in range(1, len(seq)):
                context = seq[: t + 1]
                want_votes, _ = brute_force_votes(sequences, context)
                got_votes = model.votes_by_word(context)
                assert got_votes.keys() == {k for k, v in want_votes.items() if v}, (
                    f"{context}: {got_votes} vs {want_votes}"
                )
                for k, v in got_votes.items():
                    assert v == pytest.approx(want_votes[k]), (
                        f"{context}: vote for {k} is {v}, expected {want_votes[k]}"
                    )


def test_each_seen_pair_has_one_vote(corpus):
    model = skips.SkipPairVotes().fit(corpus)
    sums = model.transition.sum(axis=-1)
    seen = model.counts.sum(axis=-1) > 0
    np.testing.assert_allclose(sums[seen], 1.0, err_msg="rows of seen pairs must sum to 1")
    assert (sums[~seen] == 0).all(), "rows of unseen pairs must stay 0"


def test_repeated_earlier_word_is_one_feature():
    model = skips.SkipPairVotes().fit([["a", "a", "x", "b"]])
    assert model.presence(["a", "a", "x"]).sum() == 1.0, "a word seen twice before is one feature"
    assert model.votes_by_word(["a", "a", "x"]) == {"b": 1.0}
    assert skips.skip_pairs(["it", "ran", "it", "ran"]) == [("it", "ran"), ("ran", "ran")]


def test_vote_table_rows_add_up_to_votes(corpus):
    model = skips.SkipPairVotes().fit(corpus)
    table = model.vote_table(BATTERY[:10])
    np.testing.assert_allclose(table.sum(axis=0), model.votes(BATTERY[:10]))
    assert (table.sum(axis=1) > 0).sum() == 9, "nine distinct earlier words should vote"


def test_mask_lookup_is_one_hot_times_matrix():
    M = np.arange(16.0).reshape(4, 4)
    np.testing.assert_array_equal(skips.mask_lookup(2, M), M[2])
    rows = np.eye(4)[[3, 0]]
    np.testing.assert_array_equal(skips.mask_lookup(rows, M), M[[3, 0]])
    # the same numbers through torch, as the future attention code will compute them
    torch.testing.assert_close(
        torch.nn.functional.one_hot(torch.tensor([3, 0]), 4).double() @ torch.from_numpy(M),
        torch.from_numpy(skips.mask_lookup(rows, M)),
    )


def test_apply_mask_and_errors():
    np.testing.assert_array_equal(skips.apply_mask([1, 1, 0, 1], [0, 1, 1, 0.5]), [0, 1, 0, 0.5])
    with pytest.raises(ValueError, match=r"same shape as the features, got mask \(3,\) for features \(4,\)"):
        skips.apply_mask(np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match=r"latest must be in 0\.\.3, got 4"):
        skips.mask_lookup(4, np.eye(4))
    with pytest.raises(ValueError, match=r"length 3 cannot select rows of a mask matrix with 4 rows"):
        skips.mask_lookup(np.ones(3), np.eye(4))
    model = skips.SkipPairVotes()
    with pytest.raises(RuntimeError, match="not fitted yet"):
        model.votes(["a", "b"])
    model.fit([PROGRAM])
    with pytest.raises(KeyError, match="'battery' was not seen in training"):
        model.votes(["battery", "ran"])
    with pytest.raises(TypeError, match="item 0 is the string"):
        skips.SkipPairVotes().fit(["check the log"])
    with pytest.raises(ValueError, match="at least one token"):
        skips.skip_pairs([])


def test_conjunction_features_fire_only_for_complete_groups():
    tokens = ["battery", "log", "program", "ran"]
    groups = [("battery", "ran"), ("program", "ran"), ("battery", "log", "ran")]
    W = skips.conjunction_weights(tokens, groups)
    assert W.shape == (5, 3), f"W shape {W.shape}, expected (V + 1, F) = (5, 3)"
    assert W[-1].tolist() == [-1.0, -1.0, -2.0], f"bias weights {W[-1].tolist()}, expected [-1, -1, -2]"
    for r in range(len(tokens) + 1):
        for present in itertools.combinations(range(len(tokens)), r):
            x = np.zeros(len(tokens))
            x[list(present)] = 1.0
            got = skips.feature_layer(x, W)
            words = {tokens[i] for i in present}
            want = [float(set(g) <= words) for g in groups]
            assert got.tolist() == want, f"present {sorted(words)}: features {got.tolist()}, expected {want}"


def test_feature_layer_matches_torch_linear_relu():
    torch.manual_seed(0)
    x = torch.randn(6, 4, dtype=torch.float64)
    linear = torch.nn.Linear(4, 3).double()
    W = torch.cat([linear.weight.T, linear.bias[None, :]]).detach().numpy()  # (V + 1, F): bias as the last row
    np.testing.assert_allclose(skips.feature_layer(x.numpy(), W), torch.relu(linear(x)).detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match=r"W must have shape \(V \+ 1, F\) = \(5, F\)"):
        skips.feature_layer(x.numpy(), W[:-1])
    with pytest.raises(ValueError, match="distinct words"):
        skips.conjunction_weights(["a"], [("a", "a")])
    with pytest.raises(KeyError, match="'z' of group 0"):
        skips.conjunction_weights(["a"], [("a", "z")])


def test_conjunction_weights_with_a_margin_put_a_missing_word_at_minus_one():
    tokens = ["battery", "log", "program", "ran"]
    groups = [("battery", "ran"), ("battery", "log", "ran")]
    W = skips.conjunction_weights(tokens, groups, weight=2.0)
    assert W[-1].tolist() == [-3.0, -5.0], f"bias weights {W[-1].tolist()}, expected -(2k - 1) = [-3, -5]"
    with_bias = lambda words: np.append([float(t in words) for t in tokens], 1.0)  # noqa: E731
    z_full = with_bias({"battery", "log", "ran"}) @ W  # every group complete
    z_missing = with_bias({"program", "ran"}) @ W  # battery missing from both groups
    assert z_full.tolist() == [1.0, 1.0], f"complete groups should give pre-activation 1, got {z_full.tolist()}"
    assert z_missing[0] == -1.0, f"a pair missing one word should give -1 before the ReLU, got {z_missing[0]}"
    assert skips.feature_layer(with_bias({"program", "ran"})[:-1], W).tolist() == [0.0, 0.0]
    for r in range(len(tokens) + 1):  # the same AND gates as with weight 1
        for present in itertools.combinations(tokens, r):
            got = skips.feature_layer(with_bias(set(present))[:-1], W).tolist()
            assert got == [float(set(g) <= set(present)) for g in groups], (present, got)
    with pytest.raises(ValueError, match="weight must be a number >= 1"):
        skips.conjunction_weights(tokens, groups, weight=0.5)
