"""Sequence models by counting: Markov chains of any order (lesson 02) and the second-order
model with skips, whose word-pair votes are the seed of attention (lesson 03)."""
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
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Sequence

import numpy as np

END = "<end>"  # the sentence boundary: appended after each sentence, padded before it
UNK = "<unk>"  # what `replace_unknown` puts in place of out-of-vocabulary words


def _check_order(order) -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
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
        if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float, np.integer, np.floating)):
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
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    return int(vocab_size) ** order * int(vocab_size)



# --- Second order with skips: voting features (lesson 03) -----------------------------------------
#
# To guess the word after position t, pair the latest word (the one at t) with every DISTINCT word
# before it: each pair (earlier, latest) is a feature. A word that occurs twice before t still
# makes one feature: a feature is either present or absent, like an entry of a multi-hot vector.
# Each feature has exactly one vote, spread over the next words in proportion to how often they
# followed that pair in training; that is its row of the pair transition table, which sums to 1.
# The prediction adds up the votes of the features present, optionally after a mask switches some
# features off (mask 0) or keeps them (mask 1).
#
# Everything is indexed by one sorted vocabulary of all training tokens (no boundary tokens:
# positions without a next word make no prediction), so presence vectors, masks and tables are
# all plain numpy arrays that a matrix product can combine.

def skip_pairs(context: Sequence[str]) -> list[tuple[str, str]]:
    """The pair features for guessing the word after `context[-1]`: (earlier, latest) for each distinct
    earlier word, in order of first appearance.

    >>> skip_pairs(["it", "ran", "it", "ran"])
    [('it', 'ran'), ('ran', 'ran')]
    """
    context = list(context)
    if not context:
        raise ValueError("context must hold at least one token (the latest word)")
    latest = context[-1]
    return [(w, latest) for w in dict.fromkeys(context[:-1])]  # dict keeps first-appearance order


@dataclass
class SkipPairVotes:
    """Second-order model with skips: every (earlier word, latest word) pair votes for the next word.

    After `fit`, with V = len(tokens):
      * `tokens`: the sorted vocabulary; `vocab` maps token -> index;
      * `counts[e, l, n]`: at how many positions the latest word was l, word e occurred earlier in the
        sentence, and the next word was n (a (V, V, V) array);
      * `transition[e, l, :]`: that count row divided by its sum, so each pair seen in training
        has one vote in total (rows of pairs never seen stay 0).

    >>> m = SkipPairVotes().fit([["a", "x", "b"], ["c", "x", "d"]])
    >>> m.votes_by_word(["a", "x"])
    {'b': 1.0}
    """

    tokens: list[str] = field(default_factory=list)  # sorted vocabulary of every training token
    vocab: dict[str, int] = field(default_factory=dict)  # token -> index into tokens
    counts: np.ndarray | None = None  # (V, V, V) counts [earlier, latest, next]
    transition: np.ndarray | None = None  # (V, V, V) counts normalised over next

    def fit(self, sequences) -> "SkipPairVotes":
        sequences = _check_sequences(sequences)
        self.tokens = sorted({tok for seq in sequences for tok in seq})
        self.vocab = {tok: i for i, tok in enumerate(self.tokens)}
        V = len(self.tokens)
        counts = np.zeros((V, V, V))
        for seq in sequences:
            ids = [self.vocab[tok] for tok in seq]
            for t in range(1, len(ids) - 1):  # t = the latest word; it needs an earlier word and a next word
                earlier = sorted(set(ids[:t]))  # distinct earlier words: one feature each
                counts[earlier, ids[t], ids[t + 1]] += 1
        totals = counts.sum(axis=-1, keepdims=True)  # (V, V, 1)
        self.counts = counts
        self.transition = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
        return self

    # -- reading the model -------------------------------------------------------------------------

    def _fitted(self) -> None:
        if self.transition is None:
            raise RuntimeError("this SkipPairVotes is not fitted yet: call .fit(sequences) first")

    def index(self, token: str) -> int:
        self._fitted()
        if token not in self.vocab:
            raise KeyError(f"token {token!r} was not seen in training; known tokens: {', '.join(self.tokens)}")
        return self.vocab[token]

    def presence(self, context: Sequence[str]) -> np.ndarray:
        """(V,) multi-hot vector of the distinct words before the latest one (the features present)."""
        pairs = skip_pairs(context)
        x = np.zeros(len(self.tokens))
        for earlier, _ in pairs:
            x[self.index(earlier)] = 1.0
        return x

    def vote_table(self, context: Sequence[str]) -> np.ndarray:
        """(V, V): row e holds the votes of feature (e, latest) over the next words (zero if e is absent)."""
        latest = self.index(list(context)[-1])
        return self.presence(context)[:, None] * self.transition[:, latest, :]  # (V, 1) * (V, V) -> (V, V)

    def votes(self, context: Sequence[str], mask: np.ndarray | None = None) -> np.ndarray:
        """(V,) total votes for each next word: (presence * mask) @ transition[:, latest, :]."""
        x = self.presence(context)  # (V,)
        if mask is not None:
            x = apply_mask(x, mask)
        latest = self.index(list(context)[-1])
        return x @ self.transition[:, latest, :]  # (V,) @ (V, V) -> (V,)

    def votes_by_word(self, context: Sequence[str], mask: np.ndarray | None = None) -> dict[str, float]:
        """The non-zero entries of `votes`, as {next word: total vote}, in vocabulary order."""
        v = self.votes(context, mask)
        return {tok: float(v[i]) for i, tok in enumerate(self.tokens) if v[i] != 0}

    def pair_counts(self) -> dict[tuple[str, str], Counter]:
        """{(earlier, latest): Counter(next word -> count)} for every pair seen in training."""
        self._fitted()
        out: dict[tuple[str, str], Counter] = {}
        for e, l, n in zip(*np.nonzero(self.counts)):
            out.setdefault((self.tokens[e], self.tokens[l]), Counter())[self.tokens[n]] = int(self.counts[e, l, n])
        return out


def apply_mask(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`x * mask`, element by element: a 0 in the mask switches that feature's votes off.

    A mask may also hold fractions (a soft mask, as attention weights will be); it must have
    exactly the shape of `x`.
    """
    x, mask = np.asarray(x, dtype=float), np.asarray(mask, dtype=float)
    if x.shape != mask.shape:
        raise ValueError(f"mask must have the same shape as the features, got mask {mask.shape} for features {x.shape}")
    return x * mask


def mask_lookup(latest, mask_matrix: np.ndarray) -> np.ndarray:
    """Row `latest` of `mask_matrix`, pulled out the lesson-01 way: one_hot(latest) @ mask_matrix.

    `latest` is an index, or a one-hot row (V,), or a stack of one-hot rows (T, V); `mask_matrix`
    is (V, V) with one mask per latest word (rows) over the earlier words (columns).
    """
    M = np.asarray(mask_matrix, dtype=float)
    if M.ndim != 2:
        raise ValueError(f"mask_matrix must be 2-D (one row per latest word), got shape {M.shape}")
    if isinstance(latest, (int, np.integer)) and not isinstance(latest, bool):
        if not 0 <= latest < M.shape[0]:
            raise ValueError(f"latest must be in 0..{M.shape[0] - 1}, got {latest}")
        q = np.zeros(M.shape[0])
        q[latest] = 1.0
    else:
        q = np.asarray(latest, dtype=float)
        if q.shape[-1] != M.shape[0]:
            raise ValueError(f"one-hot rows of length {q.shape[-1]} cannot select rows of a mask matrix with {M.shape[0]} rows")
    return q @ M  # (..., V) @ (V, V) -> (..., V)


def confident_pair_mask(model: SkipPairVotes, threshold: float = 1.0) -> np.ndarray:
    """(V, V) mask matrix [latest, earlier]: 1 where the pair (earlier, latest) was seen in training and
    its strongest vote is at least `threshold` (1.0: the pair always predicts the same next word)."""
    model._fitted()
    strongest = model.transition.max(axis=-1)  # (V earlier, V latest)
    return (strongest >= threshold).astype(float).T  # rows: latest word, columns: earlier word


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0) element by element."""
    return np.maximum(np.asarray(x, dtype=float), 0.0)


def conjunction_weights(tokens: Sequence[str], groups: Sequence[Sequence[str]]) -> np.ndarray:
    """Hand-made weights for features that fire only when ALL the words of a group are present.

    Returns `W` of shape (V + 1, F), F = len(groups): column f has +1 in the rows of group f's k words
    and -(k - 1) in the last row, the weight of a bias input that is always 1. Then
    relu([x, 1] @ W) is 1 for a multi-hot x that holds the whole group and 0 if any word is missing
    (for pairs: +1, +1 and -1, so relu(1 + 1 - 1) = 1 but relu(1 + 0 - 1) = 0).
    """
    index = {tok: i for i, tok in enumerate(tokens)}
    W = np.zeros((len(tokens) + 1, len(groups)))
    for f, group in enumerate(groups):
        if len(set(group)) != len(group) or not group:
            raise ValueError(f"group {f} must list distinct words, got {tuple(group)!r}")
        for tok in group:
            if tok not in index:
                raise KeyError(f"word {tok!r} of group {f} is not in tokens")
            W[index[tok], f] = 1.0
        W[-1, f] = -(len(group) - 1.0)
    return W


def feature_layer(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """relu([x, 1] @ W): the first half of a feed-forward block, with the bias as an extra input of 1.

    `x` is (..., V) and `W` is (V + 1, F); the result is (..., F).
    """
    x = np.asarray(x, dtype=float)
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] != x.shape[-1] + 1:
        raise ValueError(
            f"W must have shape (V + 1, F) = ({x.shape[-1] + 1}, F) for inputs of length {x.shape[-1]} "
            f"(the last row weights the bias input 1), got {W.shape}"
        )
    with_bias = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)  # (..., V) -> (..., V + 1)
    return relu(with_bias @ W)  # (..., V + 1) @ (V + 1, F) -> (..., F)
