"""Sequence models by counting: Markov chains of any order (lesson 02). Lesson 03's second-order
model with skips lives in `skips.py`."""
from __future__ import annotations

# --- Markov chains (lesson 02) -------------------------------------------------------------------
#
# A Markov chain of order n predicts the next token from the last n tokens only, with probabilities
# estimated by counting: P(w | c) = count(c followed by w) / count(c).
#
# Sentence boundaries use ONE token, END = "<end>", for both jobs:
#   * every sentence gets one "<end>" appended, so its last word ("please") has a successor and its
#     row of the transition matrix is not all zeros;
#   * every sentence is padded on the left with `order` copies of "<end>", as if it followed the end
#     of a previous sentence, so the first words have a context too ("<end>" -> "show" is "a
#     command starts with show").
# With a single boundary token the first-order transition matrix is square, (V, V), over the words
# plus "<end>", and EVERY row sums to 1: each token seen in training has at least one successor.
import math
from collections import Counter
from typing import Hashable, Iterable, Sequence

import numpy as np

from course_lib._validate import is_int, is_number

END = "<end>"  # the sentence boundary: appended after each sentence, padded before it
UNK = "<unk>"  # what `replace_unknown` puts in place of out-of-vocabulary words


def _check_order(order) -> int:
    if not is_int(order):
        raise TypeError(f"order must be an int (1 for a first-order chain), got {type(order).__name__} {order!r}")
    if order < 1:
        raise ValueError(f"order must be at least 1 (the number of previous tokens used), got {order}")
    return int(order)


def _check_sequences(sequences, what: str = "sequences") -> list[list]:
    """A list of token lists, or a clear error for the usual wrong shapes (a string, a list of strings)."""
    if isinstance(sequences, str):
        raise TypeError(
            f"{what} must be a list of token lists such as [['show', 'me', 'my', 'files', 'please'], ...], "
            f"got a single string {sequences[:40]!r}"
        )
    try:
        sequences = list(sequences)
    except TypeError:
        raise TypeError(f"{what} must be a list of token lists, got {type(sequences).__name__}") from None
    out = []
    for i, seq in enumerate(sequences):
        if isinstance(seq, str):
            raise TypeError(
                f"{what} must be a list of token lists, but item {i} is the string {seq[:40]!r}: "
                "split each sentence into words first, e.g. sentence.split()"
            )
        if not isinstance(seq, (list, tuple)):
            raise TypeError(f"{what} must be a list of token lists, but item {i} is a {type(seq).__name__}")
        out.append(list(seq))
    return out


class MarkovChain:
    """A Markov chain of any order over tokens, estimated by counting (with optional add-k smoothing).

    >>> m = MarkovChain(order=1).fit([["show", "me", "my", "files", "please"]])
    >>> m.next_distribution(("my",))
    {'files': 1.0}

    Args:
        order: how many previous tokens the prediction looks at (1 = first order, a bigram model).
        smoothing: k of add-k smoothing. 0 (the default) is the plain count estimate. With k > 0,
            P(w | c) = (count(c, w) + k) / (count(c) + k * V), where V = len(vocab) is the number of
            tokens that can come next (the words plus "<end>"). A context never seen in training
            then gets k / (k * V) = 1 / V for every token: the model falls back to the uniform
            distribution over the vocabulary.

    Conventions:
        * Boundaries: one token, "<end>" (`END`), is appended to every sentence and `order` copies
          of it are padded in front (see the comment above the class). It is part of `vocab`
          (index 0) and can be predicted; it is never in a sentence that `sample` returns.
        * `vocab` maps each token to its column (and, for order 1, its row) in `transition_matrix`:
          "<end>" first, then the words in order of first appearance in training.
        * `contexts` lists the contexts (tuples of `order` tokens) in the row order of
          `transition_matrix`: for order 1, every token; for higher orders, the contexts seen in
          training, in order of first appearance (a full table would have V ** order rows).
        * Errors: unknown tokens (not in `vocab`) always raise `ValueError`; map rare or unseen words
          to "<unk>" first with `replace_unknown`. An unseen context raises `ValueError` without
          smoothing and gets the uniform distribution with smoothing.
        * Logarithms are natural logs; `perplexity` is exp(-log-likelihood / number of predictions),
          where each sentence of n words makes n + 1 predictions (its words and its "<end>").
    """

    def __init__(self, order: int = 1, smoothing: float = 0.0):
        self.order = _check_order(order)
        if not is_number(smoothing):
            raise TypeError(f"smoothing must be a number k >= 0, got {type(smoothing).__name__} {smoothing!r}")
        if not (smoothing >= 0 and math.isfinite(smoothing)):
            raise ValueError(f"smoothing must be a finite number k >= 0, got {smoothing}")
        self.smoothing = float(smoothing)
        self.vocab: dict[Hashable, int] = {}
        self.tokens: list[Hashable] = []  # index -> token, the inverse of vocab
        self.counts: dict[tuple, Counter] = {}  # context -> Counter(next token -> count)
        self.context_totals: dict[tuple, int] = {}  # context -> how often it occurred
        self._matrix: np.ndarray | None = None

    def __repr__(self) -> str:
        state = f"{len(self.vocab)} tokens, {len(self.counts)} contexts seen" if self.vocab else "not fitted"
        return f"MarkovChain(order={self.order}, smoothing={self.smoothing:g}; {state})"

    # --- fitting --------------------------------------------------------------------------------

    def _padded(self, seq: Sequence) -> list:
        return [END] * self.order + list(seq) + [END]

    def fit(self, sequences: Iterable[Sequence[Hashable]], vocab: Iterable[Hashable] | None = None) -> "MarkovChain":
        """Count every (context, next token) pair in `sequences` (a list of token lists); returns self.

        `vocab` (optional): more tokens to know, added after those seen in `sequences`. Models that
        are compared by perplexity must share one vocabulary (with smoothing, V is in the formula),
        so a model trained on a small slice can be given the vocabulary of the full training set.
        """
        sequences = _check_sequences(sequences)
        if not sequences:
            raise ValueError("fit needs at least one sequence, got an empty list")
        if isinstance(vocab, str):
            raise TypeError(f"vocab must be a collection of tokens, got the string {vocab!r}")
        self.vocab, self.tokens = {END: 0}, [END]
        self.counts, self.context_totals, self._matrix = {}, {}, None

        def add(tok, where: str) -> None:
            if tok == END:
                raise ValueError(f"{where} contains {END!r}, which the model reserves for sentence boundaries")
            if tok not in self.vocab:
                self.vocab[tok] = len(self.tokens)
                self.tokens.append(tok)

        for i, seq in enumerate(sequences):
            for tok in seq:
                add(tok, f"sequence {i}")
        for tok in vocab if vocab is not None else ():
            if tok != END:  # passing another model's vocab (which holds "<end>") is fine
                add(tok, "vocab")
        pairs = Counter()  # (context, next token) -> count; a dict keeps first-seen order
        for seq in sequences:
            padded = self._padded(seq)
            contexts = [tuple(padded[t - self.order : t]) for t in range(self.order, len(padded))]
            pairs.update(zip(contexts, padded[self.order :]))
        for (context, tok), n in pairs.items():
            self.counts.setdefault(context, Counter())[tok] = n
            self.context_totals[context] = self.context_totals.get(context, 0) + n
        return self

    def _require_fitted(self) -> None:
        if not self.vocab:
            raise RuntimeError("this MarkovChain has not been fitted yet: call .fit(list_of_token_lists) first")

    def _check_token(self, tok) -> None:
        if tok not in self.vocab:
            raise ValueError(
                f"unknown token {tok!r}: it never occurred in training (the vocabulary has {len(self.vocab)} tokens). "
                f"Replace out-of-vocabulary words with {UNK!r} first, e.g. with replace_unknown()."
            )

    def _check_context(self, context) -> tuple:
        if isinstance(context, str):
            raise TypeError(
                f"context must be a tuple of the last {self.order} token(s), e.g. {('my',) * self.order!r}; "
                f"got the string {context!r}"
            )
        if not isinstance(context, (tuple, list)):
            raise TypeError(f"context must be a tuple of the last {self.order} token(s), got {type(context).__name__}")
        context = tuple(context)
        if len(context) != self.order:
            raise ValueError(
                f"a model of order {self.order} needs a context of exactly {self.order} token(s), "
                f"got {len(context)}: {context!r}"
            )
        for tok in context:
            self._check_token(tok)
        return context

    # --- probabilities --------------------------------------------------------------------------

    def _unseen(self, context: tuple) -> ValueError:
        return ValueError(
            f"the context {context!r} never occurred in training, so an unsmoothed model has no "
            "next-token distribution for it; use smoothing > 0 (it then falls back to uniform)"
        )

    def _probability(self, context: tuple, tok) -> float:
        """P(tok | context) for checked inputs (the inner loop of log_likelihood)."""
        total = self.context_totals.get(context, 0)
        k = self.smoothing
        if total == 0:
            if k == 0:
                raise self._unseen(context)
            return 1.0 / len(self.vocab)
        count = self.counts[context].get(tok, 0)
        if k == 0:
            return count / total  # plain division so 2/10 is exactly 0.2
        return (count + k) / (total + k * len(self.vocab))

    def next_distribution(self, context: Sequence[Hashable]) -> dict[Hashable, float]:
        """P(next token | context) as a dict token -> probability, in vocabulary order.

        `context` is a tuple of the last `order` tokens; use "<end>" for positions before the start
        of a sentence (e.g. ("<end>",) gives the distribution of first words). Tokens with
        probability 0 are left out, so an unsmoothed model lists only successors it has seen.
        """
        self._require_fitted()
        row = self._row(self._check_context(context))  # (V,), in the order of self.tokens
        return {tok: float(p) for tok, p in zip(self.tokens, row) if p > 0}

    def _row(self, context: tuple) -> np.ndarray:
        """The next-token probabilities for a checked context as a (V,) array in vocabulary order."""
        total = self.context_totals.get(context, 0)
        V, k = len(self.vocab), self.smoothing
        if total == 0:
            if k == 0:
                raise self._unseen(context)
            return np.full(V, 1.0 / V)
        row = np.zeros(V)
        for tok, c in self.counts[context].items():
            row[self.vocab[tok]] = c
        return row / total if k == 0 else (row + k) / (total + k * V)

    @property
    def contexts(self) -> list[tuple]:
        """The contexts labelling the rows of `transition_matrix`, in row order."""
        self._require_fitted()
        if self.order == 1:
            return [(tok,) for tok in self.tokens]
        return list(self.counts)

    @property
    def transition_matrix(self) -> np.ndarray:
        """The transition probabilities as a dense numpy array; row = context, column = next token.

        Order 1: shape (V, V), T[i, j] = P(token j | token i), rows and columns in `vocab` order;
        every row sums to 1. Higher orders: shape (number of contexts seen, V), rows in the order of
        `contexts`. Dense: fine for the small corpora of the lessons, V * V floats in general.
        """
        self._require_fitted()
        if self._matrix is None:
            self._matrix = np.stack([self._row(c) for c in self.contexts])  # (rows, V)
        return self._matrix.copy()

    def log_likelihood(self, sequences: Iterable[Sequence[Hashable]]) -> float:
        """The natural-log probability of `sequences` under the model, summed over every prediction.

        Each sentence contributes one term per word plus one for its final "<end>". A token the model
        gives probability 0 (possible without smoothing) makes the result -inf.
        """
        self._require_fitted()
        sequences = _check_sequences(sequences)
        for seq in sequences:  # all unknown-token errors before any arithmetic
            for tok in seq:
                self._check_token(tok)
        total, prob, n = 0.0, self._probability, self.order
        for seq in sequences:
            padded = self._padded(seq)
            for t in range(n, len(padded)):
                p = prob(tuple(padded[t - n : t]), padded[t])
                if p == 0.0:
                    return -math.inf
                total += math.log(p)
        return total

    def perplexity(self, sequences: Iterable[Sequence[Hashable]]) -> float:
        """exp(-average log-likelihood per prediction): the size of a uniform choice that is as surprised.

        A uniform model over V tokens has perplexity exactly V; lower is better; inf when some
        held-out token has probability 0.
        """
        sequences = _check_sequences(sequences)
        n = count_predictions(sequences)
        if n == 0:
            raise ValueError("perplexity needs at least one sequence, got an empty list")
        return math.exp(-self.log_likelihood(sequences) / n)

    # --- sampling -------------------------------------------------------------------------------

    def sample(
        self,
        seed: int | None = None,
        *,
        prompt: Sequence[Hashable] = (),
        max_tokens: int = 50,
        rng: np.random.Generator | None = None,
    ) -> list:
        """Generate one sentence: start after "<end>" (and `prompt`), draw tokens until "<end>".

        Returns the tokens without the boundary, the prompt included. `seed` makes the result
        reproducible; pass `rng` (a numpy Generator) instead to draw several samples from one stream.
        Stops after `max_tokens` tokens if "<end>" has not come.
        """
        self._require_fitted()
        if rng is None:
            rng = np.random.default_rng(seed)
        elif seed is not None:
            raise ValueError("pass either seed or rng to sample(), not both")
        if isinstance(prompt, str):
            raise TypeError(f"prompt must be a sequence of tokens, e.g. ['show', 'me'], got the string {prompt!r}")
        tokens = list(prompt)
        for tok in tokens:
            self._check_token(tok)
        history = [END] * self.order + tokens
        while len(tokens) < max_tokens:
            row = self._row(tuple(history[-self.order :]))  # (V,)
            nxt = self.tokens[int(rng.choice(len(row), p=row))]
            if nxt == END:
                break
            tokens.append(nxt)
            history.append(nxt)
        return tokens


def count_predictions(sequences: Iterable[Sequence]) -> int:
    """How many next-token predictions a model makes on `sequences`: each sentence's words plus its "<end>"."""
    return sum(len(seq) + 1 for seq in _check_sequences(sequences))


def replace_unknown(sequences: Iterable[Sequence], known: Iterable[Hashable], unk: str = UNK) -> list[list]:
    """Copy `sequences` with every token that is not in `known` replaced by `unk` ("<unk>").

    The usual recipe: keep the words seen at least twice in the training set, map the rest to
    "<unk>" in both the training and the held-out text, so the model has learned something about
    rare words and held-out text has no unknown tokens.
    """
    known = set(known)
    return [[tok if tok in known else unk for tok in seq] for seq in _check_sequences(sequences)]


def table_entries(vocab_size: int, order: int) -> int:
    """Entries of a full transition table of the given order: V ** order rows (contexts) of V columns.

    >>> table_entries(50_000, 2)   # 2.5 billion rows of 50,000 columns
    125000000000000
    """
    order = _check_order(order)
    if not is_int(vocab_size) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    return int(vocab_size) ** order * int(vocab_size)


# --- Bigram tables over a stream of token ids (lesson 02's Tiny Shakespeare baseline) -------------
#
# A long text encoded as ids (the characters of Tiny Shakespeare, say) is one stream rather than a
# list of sentences, so it needs no boundary token: the model predicts ids[t + 1] from ids[t]. The
# whole model is a (V, V) table; its average negative log-likelihood on held-out ids is the number
# a neural language model trained on the same split has to beat.


def _ids(ids, vocab_size: int | None = None) -> np.ndarray:
    """`ids` as a 1-D int64 numpy array (from a list, a numpy array or a torch tensor), checked."""
    if hasattr(ids, "detach"):
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"ids must be a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if vocab_size is not None and arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise ValueError(f"ids must lie in 0..{vocab_size - 1} for vocab_size={vocab_size}, "
                         f"got values from {arr.min()} to {arr.max()}")
    return arr


def bigram_counts(ids, vocab_size: int) -> np.ndarray:
    """(V, V) table: counts[a, b] = how often id b directly follows id a in the 1-D sequence `ids`.

    One `np.bincount` over the pair codes a·V + b, so a million ids take a few milliseconds.

    >>> bigram_counts([0, 1, 1, 0], 2).tolist()
    [[0.0, 1.0], [1.0, 1.0]]
    """
    if not is_int(vocab_size) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    arr = _ids(ids, vocab_size)
    V = int(vocab_size)
    codes = arr[:-1] * V + arr[1:]  # (N - 1,): one code per consecutive pair
    return np.bincount(codes, minlength=V * V).reshape(V, V).astype(float)  # (V, V)


def add_k_probabilities(counts, k: float = 0.0) -> np.ndarray:
    """Row-normalised add-k estimate: P[a, b] = (counts[a, b] + k) / (counts[a].sum() + k·V).

    k = 0 is the maximum-likelihood estimate (the plain count ratios). A row without counts has no
    estimate then; it raises rather than dividing 0 by 0.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"counts must be a square (V, V) table, got shape {c.shape}")
    if not is_number(k) or k < 0:
        raise ValueError(f"k must be a number >= 0, got {k!r}")
    totals = c.sum(axis=1, keepdims=True) + k * c.shape[1]  # (V, 1)
    if np.any(totals == 0):
        empty = np.flatnonzero(totals[:, 0] == 0).tolist()
        raise ValueError(f"rows {empty[:5]} have no counts: with k = 0 they have no estimate; use k > 0")
    return (c + k) / totals  # (V, V), every row sums to 1


def bigram_cross_entropy(probs, ids) -> float:
    """Average negative log-likelihood of `ids` under the (V, V) table `probs`, in nats:
    mean over t of -ln probs[ids[t], ids[t + 1]]. exp() of it is the perplexity. Infinite when a
    pair of `ids` has probability 0 (an unsmoothed table meeting a pair it never counted)."""
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"probs must be a square (V, V) table, got shape {p.shape}")
    arr = _ids(ids, p.shape[0])
    if arr.size < 2:
        raise ValueError(f"ids must hold at least 2 tokens (one prediction), got {arr.size}")
    with np.errstate(divide="ignore"):
        log_p = np.log(p[arr[:-1], arr[1:]])  # (N - 1,)
    return float(-log_p.mean())
