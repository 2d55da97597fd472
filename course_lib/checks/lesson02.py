"""Checks for the lesson 02 exercises (Markov models): reference functions, mistake tables and one
check per exercise."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .core import CheckFailed, Seals, call, call_repeated, check_all, check_close, check_function, check_shape, passed
from .helpers import short

_L02_END = "<end>"


# The answers worked out by hand (exercises 1, 3 and 7) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson02` from solutions/seals/lesson02.py.
# The table as `course seal` writes it (solutions/seals/): the formatter leaves it alone.
# fmt: off
SEALS = Seals({
    "after_green": (3, "a1c6c4ceca78616375e7", {
        "took the column of 'green' (that is T @ x, the probabilities of arriving at green), not its row (x @ T)":
            "27e27ad4e09514de9a9f",
        "took the row of 'red', one above green's: count the rows from 0, with '<end>' as row 0":
            "787ba349a548d164f2b7",
        "took the row of 'blue', one below green's: count the rows from 0, with '<end>' as row 0":
            "b2544db3463ba3ba240a",
        "wrote down the one-hot vector of 'green' itself; multiplying it by T picks out a row of T":
            "6a1bfbc109d947da76f5",
    }),
    "shape_P": (None, "ccef017915303c66e771", {
        "gave the shape of T: X @ T keeps X's rows, one per word": "74f7e8c58b2e64aefd62",
        "gave X one column per word: X has one ROW per word and one column per vocabulary token":
            "3ed75f90f7db7e3d163b",
        "counted the distinct words: X has a row for each word of the sentence, repeats included":
            "388d5a434411276fd062",
        "gave the shape transposed: one row per word, one column per possible next token": "b2608f980af6099bb7b4",
    }),
    "ppl_by_hand": (3, "6514411521665e16bee2", {
        "forgot the minus sign (perplexity is never below 1)": "b44fcd721d1f6665c780",
        "forgot to average: exp(-sum) instead of exp(-sum / N)": "8c01c2163605109d293a",
        "used log10 with exp: the base of the log and of the power must match": "cac26fad00fa4dce7f14",
        "used log2 with exp: the base of the log and of the power must match": "be432b95f9199b3829e8",
        "used ln (np.log, math.log) with 2 ** (...): the base of the log and of the power must match":
            "d24fa91f7e8deac05983",
        "averaged the probabilities instead of their logs": "e666491f7a7091b96d7a",
        "left out one of the four predictions": "c0e578e9d543eb0d2131",
        "gave the cross-entropy (the average of -ln P); perplexity is exp of it": "ae4b1220c5856db8d301",
    }),
    "ppl_uniform": (3, "3ed1457b1d18bb603155", {
        "forgot the minus sign": "6717d6d3c756df64ad33",
        "forgot to average": "e15c784383e429885c88",
        "took the log-probability itself (the cross-entropy ln 600); perplexity undoes the log with exp":
            "b717eadf4428f85896e0",
    }),
    "p_off_first": (3, "b3a2d0fe87469028d649", {
        "gave P(on | light)": "841270b3b5f6cd7ce3e0",
        "gave the count instead of the probability: divide by how often 'light' was followed by anything":
            "756636406fe3e830fc70",
    }),
    "p_off_second": (3, "66cd5255f107c4b5d702", {
        "used the first-order probability: the pair (kitchen, light) has only ever been followed by 'off'":
            "6d114bc2523500a1f219",
        "gave P(off | garden, light), the other light": "24246e174ce51fe621da",
        "gave the count instead of the probability": "795fec9183cab970481b",
    }),
    "fraction_invented": (3, "e8aa0a4f91651a35e69f", {
        "counted only one of the two invented commands (kitchen light on, garden light off)": "d2d64e03b152373dfd17",
        "gave the fraction of commands that did occur": "e5740fa108113d98ab0a",
        "multiplied the probabilities of a path that did occur (kitchen and off)": "62274ea4b834aef299f9",
        "multiplied the probabilities of a path that did occur (garden and on)": "48101550a88dcc18f108",
        "answered 0: the first-order model does invent commands, because after 'light' it no longer knows which light":
            "80d00024ca9bee7876f4",
    }),
})
# fmt: on


def check_one_hot_lookup(after_green: Any, shape_P: Any) -> None:
    """Exercise 1: one_hot("green") @ T over ["<end>", "red", "green", "blue"], and the shape of X @ T."""
    check_all(
        lambda: SEALS.check(
            "after_green",
            after_green,
            "numbers",
            "one_hot('green') has a single 1, at green's index; x @ T keeps exactly that row of T.",
        ),
        lambda: SEALS.check(
            "shape_P",
            shape_P,
            "shape",
            "X has one row per word of the sentence and one column per vocabulary token; X @ T keeps "
            "X's rows and T's columns.",
        ),
    )


def check_perplexity(ppl_by_hand: Any, ppl_uniform: Any) -> None:
    """Exercise 3: the perplexity of four predictions worked out by hand, and that of a uniform model."""
    check_all(
        lambda: SEALS.check(
            "ppl_by_hand",
            ppl_by_hand,
            "number",
            "perplexity = exp(-(1/N) * sum of ln P) over all N = 4 predictions; keep at least 4 significant digits.",
        ),
        lambda: SEALS.check(
            "ppl_uniform",
            ppl_uniform,
            "number",
            "every prediction has ln P = ln(1/600): average the logs, negate, and undo the log with exp.",
        ),
    )


def check_context(p_off_first: Any, p_off_second: Any, fraction_invented: Any) -> None:
    """Exercise 7: what one word of context cannot know, on the kitchen and garden light commands."""
    check_all(
        lambda: SEALS.check(
            "p_off_first",
            p_off_first,
            "number",
            "of all the times 'light' was followed by something, how often was it 'off'?",
        ),
        lambda: SEALS.check(
            "p_off_second",
            p_off_second,
            "number",
            "look only at the commands in which 'kitchen light' occurs: what came next there?",
        ),
        lambda: SEALS.check(
            "fraction_invented",
            fraction_invented,
            "number",
            "an invented command pairs kitchen with on, or garden with off: add the probabilities of those two paths.",
        ),
    )


def _counts(sentences, vocab, prepend: bool = True, append: bool = True) -> np.ndarray:
    index = {w: i for i, w in enumerate(vocab)}
    counts = np.zeros((len(vocab), len(vocab)))  # (V, V): row = current token, column = next token
    for s in sentences:
        padded = ([_L02_END] if prepend else []) + list(s) + ([_L02_END] if append else [])
        for a, b in zip(padded[:-1], padded[1:], strict=True):
            counts[index[a], index[b]] += 1
    return counts


def _rows(counts: np.ndarray) -> np.ndarray:
    sums = counts.sum(axis=1, keepdims=True)  # (V, 1)
    return np.divide(counts, sums, out=np.zeros_like(counts), where=sums > 0)


def reference_transition_matrix(sentences, vocab) -> np.ndarray:
    """Reference for exercise 02: counts of (current, next) with "<end>" before and after each
    sentence, each row divided by its own total; rows with no successors stay zero."""
    return _rows(_counts(sentences, vocab))


def check_transition_matrix(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check a learner's `transition_matrix(sentences, vocab)` on each (sentences, vocab) case,
    naming the usual mistakes: columns normalised, the boundary token forgotten, divided by the
    grand total, 0/0 rows left as NaN."""
    for sentences, vocab in cases:
        got = call(name, fn, sentences, vocab)
        if got is None:
            raise CheckFailed(name, "got None: did you forget to `return` the matrix?")
        if isinstance(got, np.ndarray):  # anything else: check_close below says what is wrong with it
            check_shape(name, got, (len(vocab), len(vocab)), quiet=True)
        counts = _counts(sentences, vocab)
        col_sums = counts.sum(axis=0, keepdims=True)  # (1, V)
        with np.errstate(invalid="ignore", divide="ignore"):
            mistakes = {
                "normalised the columns instead of the rows (each ROW, one current word, must sum to 1)": np.divide(
                    counts, col_sums, out=np.zeros_like(counts), where=col_sums > 0
                ),
                "forgot to append the end token, so the last word of each sentence has an all-zero row": _rows(
                    _counts(sentences, vocab, append=False)
                ),
                "forgot to put the end token in front of each sentence, so the '<end>' row (how sentences start) is "
                "empty": _rows(_counts(sentences, vocab, prepend=False)),
                'left out the end token altogether ("please" then has no successor and an all-zero row)': _rows(
                    _counts(sentences, vocab, prepend=False, append=False)
                ),
                "divided by the total count of all pairs instead of by each row's count": counts / counts.sum(),
                "returned the counts without normalising them": counts,
                "divided rows with no successors by zero (0/0 = NaN): leave those rows at zero": counts
                / counts.sum(axis=1, keepdims=True),
                # counts[index[b], index[a]]: each row then holds the words that came BEFORE it
                "counted the pairs the wrong way round (counts[next, current]): your rows look like the NEXT word. "
                "Row = current word, column = next word: counts[index[a], index[b]] for a followed by b": _rows(
                    counts.T
                ),
                "counted the pairs the wrong way round (counts[next, current]), and left 0/0 = NaN in unused rows. "
                "Row = current word, column = next word: counts[index[a], index[b]] for a followed by b": counts.T
                / counts.T.sum(axis=1, keepdims=True),
            }
        shown = f"{name}({len(sentences)} sentences, vocab of {len(vocab)})"
        check_close(
            shown,
            got,
            reference_transition_matrix(sentences, vocab),
            mistakes=mistakes,
            quiet=True,
            hint="row i should hold count(i followed by j) / count(i followed by anything).",
        )
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def reference_add_k(counts, context, word, k, vocab_size) -> float:
    """Reference add-k probability: (count(context, word) + k) / (count(context) + k * V)."""
    row = counts.get(context, {})
    return (row.get(word, 0) + k) / (sum(row.values()) + k * vocab_size)


def check_add_k(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check a learner's add-k probability function on (counts, context, word, k, vocab_size) cases."""

    def right_on(case) -> bool:
        try:
            return abs(float(call(name, fn, *case)) - reference_add_k(*case)) < 1e-9
        except (CheckFailed, TypeError, ValueError):
            return False

    seen = [c for c in cases if c[0].get(c[1]) and c[3] > 0]
    for counts, context, word, k, V in cases:
        if counts.get(context) or k <= 0:
            continue
        # A context never seen: forgetting the smoothing altogether also gives 0 here, so name the
        # special-cased empty row only when the smoothing is right for the contexts that were seen.
        if seen and not all(right_on(c) for c in seen):
            break
        try:
            got = call(name, fn, counts, context, word, k, V)
        except CheckFailed as err:
            if "KeyError" not in err.problem:
                raise
            raise CheckFailed(
                err.name,
                err.problem,
                "a context never seen in training is not a key of `counts`: "
                "use counts.get(context, {}), an empty row, and the same formula.",
            ) from None
        shown = f"{name}(..., {context!r}, {word!r}, k={k:g}, V={V})"
        try:
            value = float(got)
        except (TypeError, ValueError):
            continue  # check_function below says what is wrong with the type
        if value == 0.0:
            raise CheckFailed(
                shown,
                f"for the context {context!r}, never seen in training, you returned 0.",
                "for a context never seen, every word should get k / (k·V) = 1/V; don't special-case "
                "empty rows: the same formula (count + k) / (total + k·V) covers them, with count = "
                "total = 0.",
            )
    check_function(
        name,
        fn,
        cases,
        reference=reference_add_k,
        mistakes={
            "added k to the denominator instead of k * V (the row then sums to more than 1)": lambda c, ctx, w, k, V: (
                (c.get(ctx, {}).get(w, 0) + k) / (sum(c.get(ctx, {}).values()) + k)
            ),
            "added k * (V - 1) to the denominator: each of the V possible next words gets k extra counts, the word "
            "itself included, so the total grows by k * V": lambda c, ctx, w, k, V: (
                (c.get(ctx, {}).get(w, 0) + k) / (sum(c.get(ctx, {}).values()) + k * (V - 1))
            ),
            "added k to the numerator only; the denominator needs k * V too": lambda c, ctx, w, k, V: (
                (c.get(ctx, {}).get(w, 0) + k) / max(sum(c.get(ctx, {}).values()), 1e-300)
            ),
            "added k * V to the numerator as well": lambda c, ctx, w, k, V: (
                (c.get(ctx, {}).get(w, 0) + k * V) / (sum(c.get(ctx, {}).values()) + k * V)
            ),
            "forgot the smoothing (plain count / total)": lambda c, ctx, w, k, V: (
                c.get(ctx, {}).get(w, 0) / max(sum(c.get(ctx, {}).values()), 1e-300)
            ),
        },
        hint="every one of the V possible next words gets k extra counts, so the row total grows by k * V.",
    )


def check_table_entries(name: str, fn: Callable, cases: Sequence[tuple[int, int]]) -> None:
    """Check `n_table_entries(V, order)` == V ** order * V exactly, naming the usual slips."""
    for V, order in cases:
        got = call(name, fn, V, order)
        want = V**order * V
        shown = f"{name}({V}, {order})"
        if isinstance(got, bool) or not isinstance(got, (int, np.integer, float, np.floating)):
            raise CheckFailed(shown, f"expected a whole number, got {short(got)}.")
        is_float = isinstance(got, (float, np.floating))
        same = (lambda a, b: math.isclose(a, b, rel_tol=1e-12)) if is_float else (lambda a, b: a == b)
        if not same(got, want):
            wrong = {
                "counted only the rows (V ** order contexts), not the V columns of each row": V**order,
                "used the order as a multiplier instead of an exponent": V * order * V,
                "used one power too many (V ** (order + 2))": V ** (order + 2),
                "counted the rows as V ** (order - 1)": V ** (order - 1) * V,
            }
            hint = next(
                (f"it looks like you {d}." for d, w in wrong.items() if same(got, w)),
                "a table of order n has V ** n rows of V columns.",
            )
            raise CheckFailed(shown, f"expected {want}, got {got}.", hint)
        if is_float:
            # even when this float happens to be exact, a bigger table would not be: ask for an int every time
            raise CheckFailed(
                shown,
                f"the size is right, but it is the float {got!r}, not an exact int.",
                "floats hold only about 16 digits, so 50,000⁸ · 50,000 would come out rounded: "
                "compute with ints (V ** order * V, without float(), math.pow or /).",
            )
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def check_sampler(name: str, fn: Callable, dist: Mapping[Any, float] | None = None, n: int = 4000) -> None:
    """Check `sample_next(dist, rng)`: returns one of the tokens, draws with the generator it is
    given (same seed, same draws), and follows the probabilities (within a few percent over n draws)."""
    dist = dict(dist or {"directories": 0.2, "files": 0.3, "photos": 0.5})
    first = call(name, fn, dict(dist), np.random.default_rng(0))
    if first not in dist:
        raise CheckFailed(
            name,
            f"returned {short(first)}, expected one of the tokens {list(dist)}.",
            "return the token itself (a key of the dict), not its index or probability.",
        )
    # Each batch of draws is one call_repeated: one round trip to the learner's kernel under the grader.
    draws = call_repeated(name, fn, 40, dict(dist), np.random.default_rng(123))
    again = call_repeated(name, fn, 40, dict(dist), np.random.default_rng(123))
    if draws != again:
        raise CheckFailed(
            name,
            "two generators with the same seed gave different draws.",
            "draw with the `rng` argument (rng.choice or rng.random), not np.random.* or the random module.",
        )
    rng = np.random.default_rng(2024)
    counts = Counter(call_repeated(name, fn, n, dict(dist), rng))
    freq = {tok: counts.get(tok, 0) / n for tok in dist}
    best = max(dist, key=dist.get)
    if freq[best] == 1.0 and dist[best] < 0.999:
        raise CheckFailed(
            name,
            f"it always returned {best!r}.",
            "it looks like you took the most likely token (argmax); sample in proportion to the probabilities.",
        )
    uniform = 1 / len(dist)
    if all(abs(f - uniform) < 0.03 for f in freq.values()) and any(abs(p - uniform) > 0.06 for p in dist.values()):
        raise CheckFailed(
            name,
            f"every token came up about equally often ({ {t: round(f, 2) for t, f in freq.items()} }).",
            "it looks like you ignored the probabilities: pass them to rng.choice with p=.",
        )
    for tok, p in dist.items():
        if abs(freq[tok] - p) > 0.03:
            raise CheckFailed(name, f"{tok!r} came up {freq[tok]:.3f} of the time in {n} draws, expected about {p}.")
    passed(name, f"{n} draws follow {dist}")
