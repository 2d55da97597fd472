"""Second order with skips (lesson 03): every earlier word paired with the latest word votes for the
next word; masks switch uninformative pairs off, a one-hot lookup picks a mask, and a hand-made ReLU
layer builds word-pair features. These are the seeds of attention and of the feed-forward block."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from course_lib._validate import is_int, is_number

from .markov import _check_sequences

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
    if is_int(latest):
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


def conjunction_weights(tokens: Sequence[str], groups: Sequence[Sequence[str]], weight: float = 1.0) -> np.ndarray:
    """Hand-made weights for features that fire only when ALL the words of a group are present.

    Returns `W` of shape (V + 1, F), F = len(groups): column f has `weight` in the rows of group f's
    k words and -(weight·k - 1) in the last row, the weight of a bias input that is always 1. The
    pre-activation [x, 1] @ W is then exactly 1 for a multi-hot x that holds the whole group and at
    most 1 - weight if a word is missing, so relu([x, 1] @ W) is 1 or 0.
    With weight 1 (pairs: +1, +1 and a bias of -1) a missing word lands exactly on the ReLU's corner,
    relu(1 + 0 - 1) = relu(0); with weight 2 (pairs: +2, +2 and -3) it lands at -1, and the ReLU
    visibly cuts it off.
    """
    if not is_number(weight) or weight < 1:
        raise ValueError(f"weight must be a number >= 1 (below 1 a group with a missing word would still fire), got {weight!r}")
    index = {tok: i for i, tok in enumerate(tokens)}
    W = np.zeros((len(tokens) + 1, len(groups)))
    for f, group in enumerate(groups):
        if len(set(group)) != len(group) or not group:
            raise ValueError(f"group {f} must list distinct words, got {tuple(group)!r}")
        for tok in group:
            if tok not in index:
                raise KeyError(f"word {tok!r} of group {f} is not in tokens")
            W[index[tok], f] = float(weight)
        W[-1, f] = -(weight * len(group) - 1.0)
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
