"""Checks for the lesson 03 exercises (from skips to attention): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .core import CheckFailed, NotAttempted, Seals, call, check_all, check_function, check_shape, passed
from .helpers import close, short, to_array


def reference_votes(pair_counts: Mapping, context: Sequence[str], *, distinct: bool = True, normalise: bool = True,
              include_latest: bool = False) -> dict[str, float]:
    """Reference vote count of lesson 03 (and its usual slips, switched by the flags).

    Each distinct word before the latest one forms the pair (earlier, latest); each pair seen in
    training (`pair_counts[(earlier, latest)]` = {next word: count}) spreads one vote over the next
    words in proportion to its counts. `distinct=False` lets a repeated earlier word vote once per
    occurrence, `normalise=False` adds raw counts, `include_latest=True` also pairs the latest word
    with itself (as if the loop ran over the whole context, last word included).
    """
    context = list(context)
    latest = context[-1]
    earlier = context if include_latest else context[:-1]
    if distinct:
        earlier = list(dict.fromkeys(earlier))
    totals: dict[str, float] = {}
    for word in earlier:
        row = pair_counts.get((word, latest), {})
        n = sum(row.values())
        for nxt, c in row.items():
            totals[nxt] = totals.get(nxt, 0.0) + (c / n if normalise else float(c))
    return totals


def _as_vote_dict(name: str, value: Any) -> dict[str, float]:
    if value is None:
        raise CheckFailed(name, "got None: did you forget to `return` the totals?")
    if not isinstance(value, Mapping):
        raise CheckFailed(name, f"expected a dict {{next word: total votes}}, got {type(value).__name__} "
                                f"({short(value)}).")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise CheckFailed(name, f"the keys must be the next words (str), got the key {short(k)}.")
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            raise CheckFailed(name, f"the value for {k!r} should be a number, got {short(v)}.") from None
    return out


def _compare_votes(name: str, got: dict, want: dict, mistakes: Mapping[str, dict], hint: str | None,
                       reveal: bool = True) -> None:
    keys = sorted(set(got) | set(want) | {k for m in mistakes.values() for k in m})
    vec = lambda d: np.array([d.get(k, 0.0) for k in keys])  # noqa: E731  (missing word = 0 votes)
    a = vec(got)
    if close(a, vec(want), 1e-6, 1e-6):
        return
    for description, wrong in mistakes.items():
        if wrong != want and close(a, vec(wrong), 1e-6, 1e-6):
            raise CheckFailed(name, f"got {_round_dict(got)}, which is not right.", f"it looks like you {description}.")
    if not reveal:  # worked out by hand: say it is wrong without printing the answer
        raise CheckFailed(name, f"got {_round_dict(got)}, which is not right.", hint)
    raise CheckFailed(name, f"expected {_round_dict(want)}, got {_round_dict(got)}.", hint)


def _round_dict(d: Mapping) -> dict:
    return {k: round(float(v), 3) for k, v in sorted(d.items()) if float(v) != 0}


_L03_VOTE_MISTAKES = {
    "let a word that occurs twice before the latest word vote twice (each distinct earlier word is ONE feature)":
        dict(distinct=False),
    "added the raw counts without normalising each pair's counts to one vote": dict(normalise=False),
    "paired the latest word with itself (loop over the words BEFORE the latest one only)": dict(include_latest=True),
    "let repeated words vote twice and forgot to normalise each pair's counts": dict(distinct=False, normalise=False),
}


def check_votes(name: str, value: Any, pair_counts: Mapping, context: Sequence[str],
                mistakes: Mapping[str, dict] | None = None, quiet: bool = False, reveal: bool = True) -> None:
    """Check a total-votes dict {next word: votes} for `context` against `reference_votes`, naming the usual
    slips (repeated words voting twice, raw counts, the latest word paired with itself) and any
    extra `mistakes` {description: wrong dict}. `reveal=False` is for votes counted by hand: a wrong
    answer is called wrong without printing the expected totals."""
    got = _as_vote_dict(name, value)
    want = reference_votes(pair_counts, context)
    wrong = {d: reference_votes(pair_counts, context, **flags) for d, flags in _L03_VOTE_MISTAKES.items()}
    wrong.update(mistakes or {})
    _compare_votes(name, got, want, wrong,
                       "each distinct earlier word forms one pair with the latest word; each pair seen in training "
                       "has one vote, split over the next words in proportion to its counts.", reveal=reveal)
    if not quiet:
        passed(name)


# The answers worked out by hand (exercises 1, 2 and 4, on the lamp commands of the exercise set) and the
# values of the mistakes their hints name, kept as seals (see core.Seals), written by `course seal lesson03`
# from solutions/seals/lesson03.py.
SEALS = Seals({
    "votes_blue": (3, "6cacf8257cda50ae96d4", {
        "let a word that occurs twice before the latest word vote twice ('the'): each distinct earlier word is ONE "
        "feature":
            "3013524f2597cd58f4c7",
        "added the raw counts without normalising each pair's counts to one vote": "c3a894217b6b6d1bad4a",
        "let 'the' vote twice and added raw counts instead of one vote per pair": "ec172a408053db2aa682",
        "counted the prefix of the RED lamp; this asks for the blue one": "3af2d38b51eeb51e43c9",
        "swapped on and off": "965706b99599379fb4f3",
        "counted only the informative pair (blue, is): without a mask every pair votes": "eb0a9cbc4c388fb4b8b1",
        "gave (blue, is) the same split as the other pairs, but it was only ever followed by 'off'":
            "151f83b226dbb9a15d7b",
    }),
    "winner_blue": (None, "87af28fc6a28189deaaf", {
        "named the word that follows the blue lamp in training; but add up the votes: without a mask the six "
        "uninformative pairs outvote the one that knows":
            "46f4cb074d17a4866721",
    }),
    "share_blue": (2, "a0240e36f8cb9a134eb7", {
        "gave the loser's share": "f4b52c0b3ad83fe61fa3",
        "divided the winner's total by the loser's instead of by the sum of both": "7dc5500ef97486a0ded7",
        "gave the share after masking (1.0): without a mask every pair votes": "5acb0f13149284b60de9",
        "gave the coin-flip share": "1704842d8634d979f873",
        "gave the share of the red lamp's prefix": "adbb39353b0afa825c8c",
    }),
    "mask_is": (None, "922d99b5fc86f169e29c", {
        "kept every pair (a mask of all ones masks nothing)": "e180e4afa73cdd74cde1",
        "kept every pair that is present in the blue command: the mask should drop the uninformative ones":
            "ebb313735040e2b23ca8",
        "kept 'is' itself: the mask is over the EARLIER words paired with 'is'": "bd0ce6f9b4ccd342c481",
        "kept only 'blue': after 'is' both blue and red are informative (one mask serves both commands)":
            "067ca74639b2d9c46686",
        "kept only 'red': after 'is' both blue and red are informative (one mask serves both commands)":
            "548ea801cd7018571839",
        "inverted the mask (1 = keep, 0 = drop)": "ae67c07040803c4f95de",
        "put the 1 at blue's position in the sentence instead of at its index in model.tokens": "1a74c3ab16981994648c",
        "kept the words after 'is' (on, off): the mask is over the earlier words paired with 'is'":
            "7b0d25b6f624552486d1",
    }),
    "shape_X": (None, "f3c7fcbbd4ae3397eb37", {
        "counted the prefix up to 'is' (9 words): the whole command is asked for": "b32d44d83cf65ba2472e",
        "left out a word: count every word of the whole command, 'off now' included": "bf94f402be11ea9b759e",
        "gave X one column per distinct word of the sentence: the columns run over the whole vocabulary, model.tokens":
            "dd6fc740d8ec111a5e84",
        "gave the shape transposed: one row per word, one column per vocabulary token": "08a28bed26cece14fcc3",
        "gave X one row per vocabulary token: X has one row per WORD of the command": "466387dfe2c5edab3107",
    }),
    "shape_XM": (None, "3b18f9bc09b7ed20fa5a", {
        "gave the shape of M itself: X @ M keeps X's rows (one per position)": "2e4e4dff2c5b729e5b15",
        "gave the shape transposed: X @ M keeps X's rows (one per position) and M's columns": "57db93b469cc54f41384",
        "went on to multiply by X.T: this asks for X @ M only": "bab0c8b95c1ebc1b40c5",
    }),
    "shape_S": (None, "7d983dc4ca54a12a471d", {
        "confused V and T: multiplying by X.T (V, T) leaves one column per POSITION": "2dc107ea2102d11b90c8",
        "stopped after X @ M: multiplying by X.T (V, T) turns the V columns into T": "edd9b1b42b1d6b12da8e",
        "gave the shape transposed": "24916cefefb1700c01a5",
    }),
    "shape_W1": (None, "2f38918ea6a048c3d8fa", {
        "left out the bias row: W has one row per token plus one for the input that is always 1":
            "244ab9ae918a7dd6cc90",
        "gave the shape transposed: rows are inputs (V + 1), columns are features": "08b377703e94f7df7470",
        "gave W one column for both pairs: each pair feature has its own column": "86b995eeb47c22c5d265",
        "gave W one column per word of the pairs: one column per pair feature": "e7611b0149a30fe50352",
    }),
})


def _vote_vector(name: str, value: Any, words: Sequence[str]) -> list[float]:
    """A votes dict as the list of its totals for `words` (a word left out has 0 votes)."""
    votes = _as_vote_dict(name, value)
    others = {k: v for k, v in votes.items() if k not in words and v != 0}
    if others:
        raise CheckFailed(name, f"got votes for {', '.join(map(repr, others))}.",
                          f"after this prefix the pairs only ever saw {' and '.join(map(repr, words))} next.")
    return [votes.get(w, 0.0) for w in words]


def check_votes_by_hand(votes_blue: Any, winner_blue: Any, share_blue: Any) -> None:
    """Exercise 1: the votes after "ask whether the blue lamp in the hall is", the winner and its share."""
    def votes() -> None:
        try:
            SEALS.check("votes_blue", _vote_vector("votes_blue", votes_blue, ("on", "off")), "numbers",
                        "each of the 7 distinct earlier words forms one pair with 'is'; each pair has one vote, split "
                        "over 'on' and 'off' in proportion to its counts.")
        except CheckFailed as err:
            if "is not right" not in err.problem:
                raise
            raise CheckFailed(err.name, f"got {_round_dict(votes_blue)}, which is not right.", err.hint) from None

    def winner() -> None:
        text = winner_blue.strip().strip("'\"").lower() if isinstance(winner_blue, str) else winner_blue
        SEALS.check("winner_blue", text, "text", "the winner is the word with the larger total in your votes_blue.")

    check_all(votes, winner, lambda: SEALS.check("share_blue", share_blue, "number",
                                                 "share = the winner's total / (on total + off total), from your "
                                                 "votes_blue."))


def check_mask_is(value: Any, tokens: Sequence[str]) -> None:
    """Exercise 2: the hand-made mask after "is", a 0/1 vector over `tokens` (model.tokens)."""
    name = "mask_is"
    if value is None:
        raise CheckFailed(name, "got None.")
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        raise CheckFailed(name, f"got a list of words {short(value)}.",
                          "the mask is a vector of numbers, one per vocabulary token (model.tokens): 1 = keep, 0 = "
                          "drop.")
    a = to_array(value)
    if a.dtype == object or not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        raise CheckFailed(name, f"expected a numeric vector, got {short(value)}.")
    a = a.astype(float)
    if a.shape != (len(tokens),):
        hint = (f"one entry per vocabulary token (len(model.tokens) = {len(tokens)}), in the order of model.tokens, "
                "not one per position of the sentence.") if a.ndim == 1 else "a 1-D vector over model.tokens."
        raise CheckFailed(name, f"expected shape ({len(tokens)},), got {a.shape}.", hint)
    SEALS.check(name, a, "numbers", "1 for each earlier word whose pair with 'is' always predicts the same next "
                                    "word, 0 for every other token.")


def check_shapes(shape_X: Any, shape_XM: Any, shape_S: Any, shape_W1: Any) -> None:
    """Exercise 4: the shapes of X, X @ M, (X @ M) @ X.T and the pair-feature weights W1 for the blue command."""
    check_all(
        lambda: SEALS.check("shape_X", shape_X, "shape",
                            "one row per word of the command, one column per vocabulary token."),
        lambda: SEALS.check("shape_XM", shape_XM, "shape", "(T, V) @ (V, V) keeps the outer sizes."),
        lambda: SEALS.check("shape_S", shape_S, "shape", "(T, V) @ (V, T) keeps the outer sizes."),
        lambda: SEALS.check("shape_W1", shape_W1, "shape",
                            "one row per input (the tokens, then the bias input), one column per feature."),
    )


def _is_nonzero(v: Any) -> bool:
    try:
        return float(v) != 0.0
    except (TypeError, ValueError):
        return True


def check_vote_counter(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check a learner's `count_votes(pair_counts, context)` on (pair_counts, context) cases."""
    for pair_counts, context in cases:
        got = call(name, fn, pair_counts, list(context))
        check_votes(f"{name}(..., {' '.join(context)!r})", got, pair_counts, context, quiet=True)
    # With no pair counts at all there is nothing to vote: a function that still finds votes ignores its argument.
    try:
        empty = fn({}, list(cases[0][1])) if cases else None
    except Exception:  # crashing on an empty table is not what this probe is about
        empty = None
    if isinstance(empty, Mapping) and any(_is_nonzero(v) for v in empty.values()):
        raise CheckFailed(name, f"with an empty pair_counts it still returned {short(dict(empty))}.",
                          "it looks like you ignored the pair_counts argument (calling the model's methods?): "
                          "count the votes from pair_counts only.")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def reference_select_mask(word: str, M: np.ndarray, tokens: Sequence[str]) -> np.ndarray:
    """Reference: one_hot(word) @ M, the row of M that belongs to `word`."""
    q = np.zeros(len(tokens))
    q[list(tokens).index(word)] = 1.0
    return q @ np.asarray(M, dtype=float)  # (V,) @ (V, V) -> (V,)


def check_select_mask(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check `select_mask(word, M, tokens)` on (word, M, tokens) cases, naming a column picked instead
    of a row and an index counted from 1."""

    def column(word, M, tokens):
        return np.asarray(M, dtype=float)[:, list(tokens).index(word)]

    def from_one(word, M, tokens):
        i = list(tokens).index(word)
        return np.asarray(M, dtype=float)[(i + 1) % len(tokens)]

    def from_one_back(word, M, tokens):
        i = list(tokens).index(word)
        return np.asarray(M, dtype=float)[i - 1]

    check_function(name, fn, cases, reference=reference_select_mask, atol=1e-9, mistakes={
        "picked a column of M (M @ one_hot, the transposed lookup) instead of the row of the latest word (one_hot @ M)":
            column,
        "used the wrong index: the row one below the word's index (counted from 1?)": from_one,
        "used the wrong index: the row one above the word's index": from_one_back,
    }, hint="row i of M belongs to tokens[i]; one_hot(i) @ M picks exactly that row.")


def reference_feature_layer(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Reference: relu([x, 1] @ W) for x of shape (..., V) and W of shape (V + 1, F)."""
    x = np.asarray(x, dtype=float)
    with_bias = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)  # (..., V + 1)
    return np.maximum(with_bias @ np.asarray(W, dtype=float), 0.0)  # (..., F)


def check_feature_layer(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check `feature_layer(x, W)` = relu([x, 1] @ W) on (x, W) cases, naming a forgotten ReLU or bias,
    a bias put first, and the ReLU applied to the inputs instead of the sums."""

    def bias_first(x, W):
        x = np.asarray(x, dtype=float)
        return np.maximum(np.concatenate([np.ones(x.shape[:-1] + (1,)), x], axis=-1) @ W, 0.0)

    # A function that works for one vector (V,) but crashes on a stack (N, V): usually np.append(x, 1.0),
    # the lesson's one-vector code, which flattens the stack into one long vector of N * V + 1 numbers.
    for x, W in cases:
        x = np.asarray(x, dtype=float)
        if x.ndim < 2:
            continue
        try:
            call(name, fn, x.copy(), np.asarray(W).copy())
        except CheckFailed as err:
            if isinstance(err, NotAttempted):
                raise
            try:
                call(name, fn, x[0].copy(), np.asarray(W).copy())
            except CheckFailed:
                raise err from None  # it fails on one vector too: the general message says how
            n = x.size + 1  # what np.append makes of a stack: (N * V + 1,)
            flattened = any(s in err.problem for s in (f"different from {n})", f"size {n} ", f"({n},)"))
            raise CheckFailed(
                f"{name}(x of shape {x.shape}, W of shape {np.shape(W)})",
                f"it works for one vector (V,) but not for a stack (N, V): {err.problem}",
                ("it looks like you used np.append(x, 1.0): np.append flattens a stack into one long vector. "
                 if flattened else "")
                + "Add a column of ones along the last axis instead: np.concatenate with np.ones(x.shape[:-1] + "
                  "(1,)), axis=-1.",
            ) from None

    check_function(name, fn, cases, reference=reference_feature_layer, mistakes={
        "forgot the ReLU: negative sums must become 0": lambda x, W: np.concatenate(
            [np.asarray(x, dtype=float), np.ones(np.shape(x)[:-1] + (1,))], axis=-1) @ W,
        "forgot the bias: the last row of W is the weight of an extra input that is always 1":
            lambda x, W: np.maximum(np.asarray(x, dtype=float) @ np.asarray(W)[:-1], 0.0),
        "put the bias input first: it is the LAST input ([x, 1]), matching the last row of W": bias_first,
        "subtracted the bias row instead of adding it (its weight already carries the sign)":
            lambda x, W: np.maximum(np.asarray(x, dtype=float) @ np.asarray(W)[:-1] - np.asarray(W)[-1], 0.0),
        "used abs instead of the ReLU: relu(z) = max(z, 0) turns a negative sum into 0, abs would make it positive":
            lambda x, W: np.abs(
                np.concatenate([np.asarray(x, dtype=float), np.ones(np.shape(x)[:-1] + (1,))], axis=-1) @ W),
    }, hint="append a 1 to x, multiply by W, then take max(., 0) element by element.")


def check_and_gate(name: str, W: Any, tokens: Sequence[str], group: Sequence[str],
                   word_weight: float | None = 1.0) -> None:
    """Check hand-made weights W (V + 1, 1) whose feature relu([x, 1] @ W) is 1 exactly when every word of
    `group` is present in the multi-hot x (other words may be present too) and 0 otherwise. With
    `word_weight` (the exercise asks for +2, the lesson's margin), each group word must have that weight;
    None accepts any working gate."""
    from itertools import combinations

    tokens = list(tokens)
    V = len(tokens)
    if W is None:
        raise CheckFailed(name, "got None.")
    a = to_array(W)
    if a.dtype == object or not np.issubdtype(a.dtype, np.number):
        raise CheckFailed(name, f"expected a numeric array, got {short(W)}.")
    a = a.astype(float)
    if a.ndim == 1 and a.shape[0] == V + 1:
        a = a[:, None]
    if a.shape[0] == V and a.shape[-1:] == (1,) or a.shape == (V,):
        raise CheckFailed(name, f"expected shape ({V + 1}, 1), got {a.shape}.",
                          "it looks like you left out the bias row: W needs one row per token AND a last row for the "
                          "input 1.")
    check_shape(name, a, (V + 1, 1), quiet=True)
    if word_weight is not None:
        weights = [float(a[tokens.index(w), 0]) for w in group]
        if any(abs(w - word_weight) > 1e-9 for w in weights):
            raise CheckFailed(name, f"the weights of {', '.join(group)} are {', '.join(f'{w:g}' for w in weights)}.",
                              f"the exercise asks for a weight of {word_weight:+g} for each word of the group; with "
                              "those "
                              "weights, work out the bias that makes the feature exactly 1 when all of them are "
                              "present.")
    others = [t for t in tokens if t not in group]
    rng = np.random.default_rng(3)
    wrong_counts: dict[int, int] = {}
    for r in range(len(group) + 1):
        for subset in combinations(group, r):
            for extra in ([], [others[i] for i in rng.choice(len(others), size=min(3, len(others)), replace=False)]):
                x = np.zeros(V)
                x[[tokens.index(w) for w in list(subset) + extra]] = 1.0
                out = float(reference_feature_layer(x, a)[0])
                want = 1.0 if r == len(group) else 0.0
                if abs(out - want) > 1e-6:
                    wrong_counts.setdefault(r, 0)
                    shown = "{" + ", ".join(list(subset) + extra) + "}"
                    bias = a[-1, 0]
                    k = len(group)
                    word_weights = [float(a[tokens.index(w), 0]) for w in group]
                    total = sum(word_weights)  # what the whole group adds before the bias
                    if r == len(group):
                        hint = (f"with these weights all {k} words sum to {total:g}; the bias must bring that down to "
                                "exactly 1 (the lesson's rule for k words of weight w each: bias -(w·k - 1)).")
                        if bias < 1 - total and out == 0:
                            hint = (f"it looks like the bias is too negative ({bias:g}): the feature never fires. "
                                    "W" + hint[1:])
                    elif bias > 1 - total:
                        most = total - min(word_weights)
                        hint = (f"it looks like the bias ({bias:g}) is not negative enough: the feature fires when "
                                "only "
                                f"{r} of the {k} words are present. Any {k - 1} of them sum to at most {most:g}, and "
                                "that "
                                f"must not be enough to fire; all {k} must give exactly 1.")
                    else:
                        hint = ("the weights of words outside the group must be 0"
                                + (f", each group word {word_weight:+g}." if word_weight is not None else "."))
                    raise CheckFailed(name, f"for the input words {shown} the feature gives {out:g}, expected "
                                            f"{want:g}.", hint)
    passed(name)
