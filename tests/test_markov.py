"""Tests of the lesson 02 Markov chains (course_lib.markov, first section).

The probabilities are checked against exact fractions of the command corpus and against an
independent count made with `collections.Counter`; the error messages are checked with `match=`.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from course_lib.markov import END, UNK, MarkovChain, count_predictions, replace_unknown, table_entries

# The lesson's command corpus written out by hand (10 + 10 sentences), independent of data.py.
SHOW = ["show me my directories please"] * 2 + ["show me my files please"] * 3 + ["show me my photos please"] * 5
CHECK = ["check whether the battery ran down please"] * 4 + ["check whether the program ran please"] * 6
COMMANDS = [s.split() for s in SHOW + CHECK]


def reference_bigram_log_likelihood(train, test, k=0.0):
    """log P(test) under a bigram model counted with Counter, sentences padded with <end> on both sides."""
    pairs, firsts, vocab = Counter(), Counter(), {END}
    for s in train:
        padded = [END] + s + [END]
        vocab.update(s)
        pairs.update(zip(padded[:-1], padded[1:]))
        firsts.update(padded[:-1])
    total = 0.0
    for s in test:
        padded = [END] + s + [END]
        for a, b in zip(padded[:-1], padded[1:]):
            total += math.log((pairs[(a, b)] + k) / (firsts[a] + k * len(vocab)))
    return total


# --- the command corpus: exact probabilities --------------------------------------------------


def test_first_order_probabilities_are_exact_fractions():
    m = MarkovChain(order=1).fit(COMMANDS)
    after_my = m.next_distribution(("my",))
    assert after_my == {"directories": 0.2, "files": 0.3, "photos": 0.5}, f"after 'my': {after_my}"
    after_ran = m.next_distribution(("ran",))
    assert after_ran == {"down": 0.4, "please": 0.6}, f"after 'ran': {after_ran}"
    assert m.next_distribution(("please",)) == {END: 1.0}, m.next_distribution(("please",))
    assert m.next_distribution((END,)) == {"show": 0.5, "check": 0.5}, m.next_distribution((END,))


def test_bundled_command_corpus_gives_the_same_numbers():
    data = pytest.importorskip("course_lib.data")
    m = MarkovChain(order=1).fit(data.load_sentences("commands"))
    after_my, after_ran = m.next_distribution(("my",)), m.next_distribution(("ran",))
    assert after_my == {"directories": 0.2, "files": 0.3, "photos": 0.5}, after_my
    assert after_ran == {"down": 0.4, "please": 0.6}, after_ran


def test_transition_matrix_is_square_and_row_stochastic():
    m = MarkovChain(order=1).fit(COMMANDS)
    T = m.transition_matrix
    V = len(m.vocab)
    assert T.shape == (V, V), f"shape {T.shape}, expected {(V, V)}"
    assert V == 15, f"14 words + <end> expected, got {V}: {list(m.vocab)}"
    assert m.vocab[END] == 0, f"<end> should be index 0, got {m.vocab[END]}"
    np.testing.assert_allclose(T.sum(axis=1), np.ones(V), err_msg="every row must sum to 1")
    # rows are contexts, columns next tokens
    assert T[m.vocab["my"], m.vocab["photos"]] == 0.5, T[m.vocab["my"]]
    assert T[m.vocab["photos"], m.vocab["my"]] == 0.0, T[m.vocab["photos"]]
    assert T[m.vocab["please"], m.vocab[END]] == 1.0, T[m.vocab["please"]]
    assert [c[0] for c in m.contexts] == list(m.vocab), m.contexts


def test_one_hot_times_matrix_is_next_distribution():
    m = MarkovChain(order=1).fit(COMMANDS)
    T = m.transition_matrix
    x = np.zeros(len(m.vocab))
    x[m.vocab["ran"]] = 1.0
    row = x @ T  # (V,) @ (V, V) -> (V,)
    expected = np.zeros(len(m.vocab))
    expected[m.vocab["down"]], expected[m.vocab["please"]] = 0.4, 0.6
    np.testing.assert_allclose(row, expected)


def test_second_order_resolves_ran():
    m1 = MarkovChain(order=1).fit(COMMANDS)
    m2 = MarkovChain(order=2).fit(COMMANDS)
    assert m2.next_distribution(("battery", "ran")) == {"down": 1.0}, m2.next_distribution(("battery", "ran"))
    assert m2.next_distribution(("program", "ran")) == {"please": 1.0}, m2.next_distribution(("program", "ran"))
    assert m2.next_distribution((END, END)) == {"show": 0.5, "check": 0.5}
    T2 = m2.transition_matrix
    assert T2.shape == (len(m2.contexts), len(m2.vocab)), T2.shape
    np.testing.assert_allclose(T2.sum(axis=1), 1.0)
    # first order can produce a command that never occurred, second order cannot
    mixed = {" ".join(m1.sample(seed=s)) for s in range(200)}
    assert "check whether the program ran down please" in mixed, sorted(mixed)
    clean = {" ".join(m2.sample(seed=s)) for s in range(200)}
    assert clean <= set(SHOW + CHECK), clean - set(SHOW + CHECK)
    assert m2.perplexity(COMMANDS) < m1.perplexity(COMMANDS), (m2.perplexity(COMMANDS), m1.perplexity(COMMANDS))


# --- likelihood and perplexity -----------------------------------------------------------------

TRAIN = [s.split() for s in ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "the cat ran"]]
TEST = [s.split() for s in ["the dog sat on the mat", "a cat sat on the log"]]


@pytest.mark.parametrize("k", [0.0, 0.5, 1.0])
def test_log_likelihood_matches_counter_reference(k):
    m = MarkovChain(order=1, smoothing=k).fit(TRAIN)
    got = m.log_likelihood(TEST)
    want = reference_bigram_log_likelihood(TRAIN, TEST, k)
    assert math.isclose(got, want, rel_tol=1e-12), f"log-likelihood {got}, expected {want}"
    n = count_predictions(TEST)
    assert n == 6 + 1 + 6 + 1, n
    assert math.isclose(m.perplexity(TEST), math.exp(-want / n), rel_tol=1e-12)


def test_trigram_log_likelihood_matches_counter_reference():
    tri, ctx = Counter(), Counter()
    for s in TRAIN:
        p = [END, END] + s + [END]
        tri.update(zip(p, p[1:], p[2:]))
        ctx.update(zip(p[:-2], p[1:-1]))
    want = 0.0
    for s in TRAIN[:2]:
        p = [END, END] + s + [END]
        want += sum(math.log(tri[(a, b, c)] / ctx[(a, b)]) for a, b, c in zip(p, p[1:], p[2:]))
    got = MarkovChain(order=2).fit(TRAIN).log_likelihood(TRAIN[:2])
    assert math.isclose(got, want, rel_tol=1e-12), f"{got} vs {want}"


def test_uniform_model_has_perplexity_equal_to_vocabulary_size():
    # with huge k every context is (almost exactly) uniform over the V tokens
    m = MarkovChain(order=1, smoothing=1e12).fit(TRAIN)
    V = len(m.vocab)
    assert math.isclose(m.perplexity(TEST), V, rel_tol=1e-6), f"{m.perplexity(TEST)} vs V={V}"
    # an unseen context with smoothing is exactly uniform
    m3 = MarkovChain(order=3, smoothing=1.0).fit(TRAIN)
    dist = m3.next_distribution(("mat", "mat", "mat"))
    assert len(dist) == V and all(math.isclose(p, 1 / V) for p in dist.values()), dist
    # "mat mat mat mat": after the first word every context is unseen, so 4 of 5 predictions are 1/V
    first = m3.next_distribution((END, END, END))["mat"]
    ll = m3.log_likelihood([["mat"] * 4])
    assert math.isclose(ll, math.log(first) + 4 * math.log(1 / V)), (ll, first, V)


def test_smoothing_formula_and_rows_sum_to_one():
    k = 0.1
    m = MarkovChain(order=1, smoothing=k).fit(COMMANDS)
    V = len(m.vocab)
    p = m.next_distribution(("my",))
    assert math.isclose(p["photos"], (5 + k) / (10 + k * V)), p["photos"]
    assert math.isclose(p["show"], k / (10 + k * V)), p["show"]
    assert math.isclose(sum(p.values()), 1.0), sum(p.values())
    np.testing.assert_allclose(m.transition_matrix.sum(axis=1), 1.0)


def test_unsmoothed_zero_probability_gives_infinite_perplexity():
    m = MarkovChain(order=1).fit(COMMANDS)
    held_out = [["show", "me", "my", "battery", "please"]]  # my -> battery never seen
    assert m.log_likelihood(held_out) == -math.inf
    assert m.perplexity(held_out) == math.inf


def test_perplexity_by_hand():
    m = MarkovChain(order=1).fit(COMMANDS)
    s = ["show", "me", "my", "files", "please"]
    probs = [0.5, 1.0, 1.0, 0.3, 1.0, 1.0]  # <end>->show, show->me, me->my, my->files, files->please, please-><end>
    want = math.exp(-sum(math.log(p) for p in probs) / len(probs))
    assert math.isclose(m.perplexity([s]), want, rel_tol=1e-12), (m.perplexity([s]), want)


# --- sampling ------------------------------------------------------------------------------------


def test_sampling_is_reproducible_and_follows_the_probabilities():
    m = MarkovChain(order=1).fit(COMMANDS)
    assert m.sample(seed=3) == m.sample(seed=3)
    assert len({tuple(m.sample(seed=s)) for s in range(20)}) > 1, "different seeds should give different samples"
    rng = np.random.default_rng(0)
    after_my = Counter()
    for _ in range(2000):
        s = m.sample(rng=rng, prompt=["show", "me", "my"])
        assert s[:3] == ["show", "me", "my"], s
        after_my[s[3]] += 1
    freq = {w: c / 2000 for w, c in after_my.items()}
    for w, p in {"directories": 0.2, "files": 0.3, "photos": 0.5}.items():
        assert abs(freq[w] - p) < 0.04, f"{w}: sampled {freq[w]:.3f}, expected about {p}"
    assert len(m.sample(seed=0, max_tokens=2)) <= 2


def test_parameter_counts():
    assert table_entries(50_000, 2) == 50_000**3 == 125_000_000_000_000
    assert table_entries(50_000, 2) > 10**14
    assert table_entries(50_000, 8) == 50_000**9
    assert table_entries(3, 1) == 9


def test_replace_unknown():
    out = replace_unknown([["the", "cat"], ["a", "dog"]], known={"the", "dog"})
    assert out == [["the", UNK], [UNK, "dog"]], out


# --- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "order, err, msg",
    [
        (0, ValueError, "order must be at least 1"),
        (-2, ValueError, "order must be at least 1"),
        (1.5, TypeError, "order must be an int.*float"),
        ("2", TypeError, "order must be an int.*str"),
        (True, TypeError, "order must be an int.*bool"),
    ],
)
def test_bad_order(order, err, msg):
    with pytest.raises(err, match=msg):
        MarkovChain(order=order)


def test_bad_smoothing():
    with pytest.raises(ValueError, match="smoothing must be a finite number k >= 0"):
        MarkovChain(smoothing=-1)
    with pytest.raises(TypeError, match="smoothing must be a number"):
        MarkovChain(smoothing="1")


def test_bad_training_data():
    with pytest.raises(TypeError, match="got a single string"):
        MarkovChain().fit("show me my files please")
    with pytest.raises(TypeError, match="item 0 is the string .*split each sentence"):
        MarkovChain().fit(["show me my files please"])
    with pytest.raises(ValueError, match="at least one sequence"):
        MarkovChain().fit([])
    with pytest.raises(ValueError, match="reserves for sentence boundaries"):
        MarkovChain().fit([["a", END, "b"]])


def test_not_fitted():
    with pytest.raises(RuntimeError, match="not been fitted"):
        MarkovChain().next_distribution(("a",))


def test_unseen_context_without_smoothing_names_it():
    m = MarkovChain(order=2).fit(COMMANDS)
    with pytest.raises(ValueError, match=r"\('my', 'ran'\) never occurred in training"):
        m.next_distribution(("my", "ran"))
    # in log_likelihood an unseen context always follows a zero-probability step, hence -inf
    assert m.log_likelihood([["show", "me", "my", "ran"]]) == -math.inf
    with pytest.raises(ValueError, match="never occurred in training"):
        m.sample(seed=0, prompt=["my", "ran"])


def test_unknown_tokens_and_bad_contexts():
    m = MarkovChain(order=1).fit(COMMANDS)
    with pytest.raises(ValueError, match="unknown token 'laptop'.*never occurred in training"):
        m.next_distribution(("laptop",))
    with pytest.raises(ValueError, match="unknown token 'laptop'"):
        m.log_likelihood([["show", "me", "my", "laptop"]])
    with pytest.raises(ValueError, match="unknown token 'laptop'"):
        m.sample(seed=0, prompt=["laptop"])
    with pytest.raises(TypeError, match="got the string 'my'"):
        m.next_distribution("my")
    with pytest.raises(ValueError, match="order 1 needs a context of exactly 1 token"):
        m.next_distribution(("me", "my"))
    with pytest.raises(ValueError, match="either seed or rng"):
        m.sample(seed=0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        table_entries(0, 2)


def test_shared_vocabulary_for_comparisons():
    full = MarkovChain(order=1).fit(COMMANDS)
    small = MarkovChain(order=1, smoothing=1.0).fit(COMMANDS[:2], vocab=full.vocab)
    assert list(small.vocab) == list(MarkovChain(order=1).fit(COMMANDS[:2]).vocab) + [
        t for t in full.vocab if t not in MarkovChain(order=1).fit(COMMANDS[:2]).vocab
    ], list(small.vocab)
    assert set(small.vocab) == set(full.vocab), set(full.vocab) ^ set(small.vocab)
    # words known only through vocab= have no counts: smoothed, their contexts are uniform
    V = len(full.vocab)
    dist = small.next_distribution(("battery",))
    assert all(math.isclose(p, 1 / V) for p in dist.values()) and len(dist) == V, dist
    assert math.isfinite(small.perplexity(COMMANDS)), small.perplexity(COMMANDS)
    with pytest.raises(TypeError, match="vocab must be a collection of tokens"):
        MarkovChain().fit(COMMANDS, vocab="abc")


def test_graph_figures_label_nodes_and_arrows():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import viz

    m = MarkovChain(order=1).fit(COMMANDS)
    fig = viz.markov_graph(m)
    texts = [t.get_text() for t in fig.axes[0].texts]
    for label in ["<start>", "<end>", "my", "0.20", "0.30", "0.50", "0.40", "0.60"]:
        assert label in texts, f"{label!r} missing from the graph's texts {sorted(set(texts))}"
    # one arrow per nonzero transition, with "<end>" split into a start and an end node
    n_arrows = sum(1 for t in fig.axes[0].texts if t.get_text() == "" and t.arrow_patch is not None)
    assert n_arrows == int((m.transition_matrix > 0).sum()), (n_arrows, int((m.transition_matrix > 0).sum()))
    plt.close(fig)
    with pytest.raises(ValueError, match="has a cycle"):
        viz.transition_graph(m.transition_matrix, m.tokens)  # without the split, <end> closes a loop
    with pytest.raises(ValueError, match="first-order chains only"):
        viz.markov_graph(MarkovChain(order=2).fit(COMMANDS))
    fig = viz.transition_graph(m.transition_matrix, m.tokens, layout="circle")
    plt.close(fig)
    with pytest.raises(ValueError, match="square matrix"):
        viz.transition_graph(np.zeros((2, 3)), ["a", "b"])


# --- the lesson 02 exercise checks name the usual mistakes -----------------------------------------


def test_exercise_checks_pass_the_reference_and_name_mistakes():
    from course_lib import checks
    from course_lib.checks import lesson02

    vocab = [END] + sorted({w for s in COMMANDS for w in s})
    lesson02.check_transition_matrix("tm", lesson02.reference_transition_matrix, [(COMMANDS, vocab)])
    counts = lesson02._counts(COMMANDS, vocab)
    wrong = {
        "normalised the columns": lambda s, v: counts / counts.sum(axis=0, keepdims=True).clip(min=1),
        "forgot to append the end token": lambda s, v: lesson02._rows(lesson02._counts(s, v, append=False)),
        "divided by the total count": lambda s, v: counts / counts.sum(),
    }
    for phrase, fn in wrong.items():
        with pytest.raises(checks.CheckFailed, match=phrase):
            lesson02.check_transition_matrix("tm", fn, [(COMMANDS, vocab)])

    c = {("my",): {"directories": 2, "files": 3, "photos": 5}}
    cases = [(c, ("my",), "files", 1.0, 15), (c, ("ran",), "down", 0.5, 15)]
    lesson02.check_add_k("ak", lesson02.reference_add_k, cases)
    with pytest.raises(checks.CheckFailed, match="instead of k \\* V"):
        lesson02.check_add_k(
            "ak", lambda c, x, w, k, V: (c.get(x, {}).get(w, 0) + k) / (sum(c.get(x, {}).values()) + k), cases
        )

    lesson02.check_table_entries("n", table_entries, [(50_000, 2), (50_000, 8)])
    with pytest.raises(checks.CheckFailed, match="only the rows"):
        lesson02.check_table_entries("n", lambda V, n: V**n, [(50_000, 2)])

    def good(dist, rng):
        return list(dist)[rng.choice(len(dist), p=list(dist.values()))]

    lesson02.check_sampler("s", good)
    with pytest.raises(checks.CheckFailed, match="argmax"):
        lesson02.check_sampler("s", lambda d, rng: max(d, key=d.get))
    with pytest.raises(checks.CheckFailed, match="same seed"):
        lesson02.check_sampler("s", lambda d, rng: list(d)[np.random.choice(len(d), p=list(d.values()))])
    with pytest.raises(checks.NotAttempted):
        lesson02.check_sampler("s", lambda d, rng: (_ for _ in ()).throw(NotImplementedError()))


def test_exercise_checks_name_the_walkthrough_mistakes():
    from course_lib import checks
    from course_lib.checks import lesson02

    vocab = [END] + sorted({w for s in COMMANDS for w in s}) + ["unused"]  # "unused" never occurs
    counts = lesson02._counts(COMMANDS, vocab)
    with np.errstate(invalid="ignore"):
        plain = counts / counts.sum(axis=1, keepdims=True)  # NaN in the row of "unused"
        transposed = counts.T / counts.T.sum(axis=1, keepdims=True)
    with pytest.raises(checks.CheckFailed, match="0/0 = NaN"):
        lesson02.check_transition_matrix("tm", lambda s, v: plain, [(COMMANDS, vocab)])
    with pytest.raises(checks.CheckFailed, match="wrong way round"):
        lesson02.check_transition_matrix("tm", lambda s, v: transposed, [(COMMANDS, vocab)])

    c = {("my",): {"directories": 2, "files": 3, "photos": 5}}
    cases = [(c, ("my",), "files", 1.0, 15), (c, ("ran",), "down", 0.5, 15)]

    def special_cased(counts, context, word, k, V):
        row = counts.get(context, {})
        return 0.0 if not row else (row.get(word, 0) + k) / (sum(row.values()) + k * V)

    with pytest.raises(checks.CheckFailed, match="1/V") as info:
        lesson02.check_add_k("ak", special_cased, cases)
    assert "forgot the smoothing" not in str(info.value), info.value
    with pytest.raises(checks.CheckFailed, match="forgot the smoothing"):  # no smoothing at all is still named as such
        lesson02.check_add_k(
            "ak", lambda c, x, w, k, V: c.get(x, {}).get(w, 0) / max(sum(c.get(x, {}).values()), 1e-300), cases
        )
    with pytest.raises(checks.CheckFailed, match="counts.get"):
        lesson02.check_add_k("ak", lambda c, x, w, k, V: (c[x].get(w, 0) + k) / (sum(c[x].values()) + k * V), cases)

    # a float is refused even where it happens to be exact
    with pytest.raises(checks.CheckFailed, match="not an exact int"):
        lesson02.check_table_entries("n", lambda V, n: float(V) ** n * V, [(50_000, 2)])


# --- bigram tables over a stream of ids (lesson 02's Tiny Shakespeare baseline) --------------------


def test_bigram_counts_match_a_python_loop_and_torch():
    import torch

    from course_lib.markov import bigram_counts

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, size=500)
    loop = np.zeros((7, 7))
    for a, b in zip(ids[:-1], ids[1:]):
        loop[a, b] += 1
    np.testing.assert_array_equal(bigram_counts(ids, 7), loop)
    np.testing.assert_array_equal(bigram_counts(torch.tensor(ids), 7), loop)  # a tensor works too
    assert bigram_counts(ids, 7).sum() == len(ids) - 1, "N ids make N - 1 pairs"
    with pytest.raises(ValueError, match=r"ids must lie in 0..6 for vocab_size=7"):
        bigram_counts([0, 7], 7)
    with pytest.raises(ValueError, match="1-D"):
        bigram_counts(np.zeros((2, 2), dtype=int), 7)
    with pytest.raises(TypeError, match="integers"):
        bigram_counts([0.5, 1.0], 7)


def test_add_k_probabilities_and_cross_entropy_agree_with_torch():
    import torch

    from course_lib.markov import add_k_probabilities, bigram_counts, bigram_cross_entropy

    rng = np.random.default_rng(1)
    ids = rng.integers(0, 5, size=300)
    counts = bigram_counts(ids, 5)
    for k in (0.0, 0.5, 2.0):
        probs = add_k_probabilities(counts, k)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0)
        np.testing.assert_allclose(probs, (counts + k) / (counts.sum(1, keepdims=True) + 5 * k))
        # the same number as torch's cross-entropy of log-probabilities looked up row by row
        logits = torch.log(torch.tensor(probs))[torch.tensor(ids[:-1])]  # (N - 1, V)
        want = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).item()
        assert abs(bigram_cross_entropy(probs, ids) - want) < 1e-12, (k, bigram_cross_entropy(probs, ids), want)
    # the count table (k = 0) is the maximum-likelihood estimate: no other table scores the
    # training ids better, e.g. any smoothing or a random perturbation of the rows
    best = bigram_cross_entropy(add_k_probabilities(counts, 0.0), ids)
    for k in (0.01, 1.0):
        assert bigram_cross_entropy(add_k_probabilities(counts, k), ids) > best
    noisy = add_k_probabilities(counts + rng.random(counts.shape), 0.0)
    assert bigram_cross_entropy(noisy, ids) > best
    unseen = np.array([0, 0, 0, 1])  # the pair (0, 1) never occurs in [0, 0, 0]
    assert bigram_cross_entropy(add_k_probabilities(bigram_counts([0, 0, 0, 0], 2) + np.eye(2), 0.0), unseen) == float(
        "inf"
    )
    with pytest.raises(ValueError, match="have no counts"):
        add_k_probabilities(np.zeros((2, 2)), 0.0)
    with pytest.raises(ValueError, match="k must be a number >= 0"):
        add_k_probabilities(counts, -1.0)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        bigram_cross_entropy(np.full((2, 2), 0.5), [1])
