"""Word vectors with word2vec: skip-gram with negative sampling (SGNS), in torch (lesson 04).

Every word gets two vectors of `dim` numbers: `v_w` when it is the centre word and `u_w` when it is a
context word. Skip-gram asks the centre word to predict its neighbours:

    P(o | c) = exp(u_o · v_c) / Σ_w exp(u_w · v_c)        (a softmax over the whole vocabulary)

That denominator costs one dot product per vocabulary word for every single pair. Negative sampling
replaces it by a yes/no question that only needs 1 + K dot products: "is o a real neighbour of c?"
(yes) and, for K noise words n_1..n_K drawn from the unigram distribution raised to the power 0.75,
"is n_k a neighbour of c?" (no). The loss of one (centre, context) pair is

    loss = -log σ(u_o · v_c) - Σ_k log σ(-u_{n_k} · v_c)

Training slides a window over the corpus, collects the (centre, context) pairs, and lowers the
average loss with stochastic gradient descent. Words that appear in the same contexts get pushed
towards the same context vectors, so their centre vectors end up close: similar words are words
that are interchangeable in context. The centre vectors `v` are the word vectors we keep.

The details follow the original word2vec (and gensim, which the tests compare against):
- frequent words are subsampled: a word of frequency f is kept with probability
  (sqrt(f / t) + 1) · t / f, with t = `subsample` (1e-3): "the" is mostly skipped, rare words never;
- each centre word draws its own window size, uniformly from 1..window, so near neighbours count
  more than far ones;
- centre vectors start small and random (uniform in [-1/dim, 1/dim), as in gensim), context vectors at
  zero; the learning rate starts at word2vec's 0.025 and falls linearly to `lr / 10,000` over the run.
Unlike the original, which updates after every single pair, pairs are processed in shuffled
mini-batches of `batch_size`, one SGD step per batch, with the gradients worked out by hand
(`sgns_gradients`, checked against torch autograd in the tests): that is what makes it fast in Python.

Typical use::

    from course_lib.data import load_sentences
    from course_lib.word2vec import analogy_accuracy, train_word2vec
    wv = train_word2vec(load_sentences("english"), window=4, epochs=10)
    wv.most_similar("king")                 # [('prince', 0.88...), ('queen', 0.86...), ...]
    wv.analogy("man", "king", "woman")      # king - man + woman: [('queen', 0.98...), ...]
    analogy_accuracy(wv, questions)         # the share of (a, b, c, d) whose top answer is d
"""
from __future__ import annotations

import difflib
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from itertools import permutations
from typing import Sequence

import torch
import torch.nn.functional as F

from course_lib._validate import check_int

try:  # a progress bar in notebooks and terminals; training works without it
    from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
    tqdm = None


@dataclass
class Word2VecConfig:
    dim: int = 50  # length of every word vector
    window: int = 2  # the largest number of context words on each side of the centre word
    negatives: int = 5  # noise words per (centre, context) pair
    epochs: int = 5  # passes over the corpus
    seed: int = 0  # seeds every random choice: initial vectors, subsampling, windows, order, noise words
    min_count: int = 1  # words seen fewer times than this are left out of the vocabulary
    lr: float = 0.025  # starting learning rate of SGD, decaying linearly to lr * 1e-4: word2vec's and gensim's
    # value. Each pair's step is lr times its gradient, as in word2vec's one-pair-at-a-time SGD: a batch
    # only adds up its pairs' steps (a word used n times in a batch moves n steps, all computed from its
    # old vector, which is what makes too large an lr overshoot: lr 0.1 makes the loss jump)
    batch_size: int = 1024  # (centre, context) pairs per SGD step
    subsample: float = 1e-3  # t in the keep probability (sqrt(f / t) + 1) * t / f; 0 keeps every word
    noise_power: float = 0.75  # noise words are drawn with probability proportional to count ** noise_power
    history_points: int = 100  # how many points of the loss curve to record


class UnknownWordError(KeyError):
    """A word that is not in the vocabulary. A KeyError whose message is shown as written."""

    def __str__(self) -> str:  # KeyError would print repr(message), quotes and all
        return str(self.args[0]) if self.args else ""


@dataclass
class WordVectors:
    """Trained word vectors: `vocab[i]` is the word of row `vectors[i]`.

    `vocab` is sorted by count, most frequent first (ties in order of first appearance). `context_vectors` are the
    second set of vectors (u) that SGNS trains; `counts[i]` is how often `vocab[i]` occurs in the
    corpus; `loss_history` is the mean loss per pair over each stretch of training, at the pair counts
    in `loss_pairs`.
    """

    vocab: list[str]
    vectors: torch.Tensor  # (V, dim), the centre-word vectors v: the word vectors
    context_vectors: torch.Tensor | None = None  # (V, dim), the context-word vectors u
    counts: list[int] | None = None
    loss_history: list[float] = field(default_factory=list)
    loss_pairs: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.vocab = list(self.vocab)
        self.vectors = torch.as_tensor(self.vectors, dtype=torch.float32)
        if self.vectors.dim() != 2 or self.vectors.shape[0] != len(self.vocab):
            raise ValueError(f"vectors must have shape (len(vocab), dim) = ({len(self.vocab)}, dim), "
                             f"got {tuple(self.vectors.shape)}")
        self.index = {w: i for i, w in enumerate(self.vocab)}
        if len(self.index) != len(self.vocab):
            repeated = [w for w, n in Counter(self.vocab).items() if n > 1]
            raise ValueError(f"vocab must not repeat a word, got {repeated[:5]} more than once")
        # Unit-length rows: cosine similarity with every word is then one matrix-vector product.
        self.unit = F.normalize(self.vectors, dim=1)  # (V, dim)

    def __len__(self) -> int:
        return len(self.vocab)

    def __contains__(self, word: object) -> bool:
        return word in self.index

    def id(self, word: str) -> int:
        """The row of `word`, or an UnknownWordError that names it and suggests close spellings."""
        if not isinstance(word, str):
            raise TypeError(f"a word must be a str, got {type(word).__name__} {word!r}")
        if word not in self.index:
            close = difflib.get_close_matches(word, self.vocab, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(w) for w in close)}?" if close else ""
            raise UnknownWordError(f"{word!r} is not in the vocabulary ({len(self.vocab)} words){hint}")
        return self.index[word]

    def __getitem__(self, word: str) -> torch.Tensor:
        """The vector of `word`, shape (dim,)."""
        return self.vectors[self.id(word)]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words' vectors, in [-1, 1]."""
        return float(self.unit[self.id(a)] @ self.unit[self.id(b)])

    def nearest(self, vector: torch.Tensor, k: int = 5, exclude: Sequence[str] = ()) -> list[tuple[str, float]]:
        """The k words whose vectors have the highest cosine similarity with `vector`, best first,
        leaving out the words in `exclude`."""
        k = _check_k(k)
        vector = torch.as_tensor(vector, dtype=torch.float32)
        if vector.shape != (self.vectors.shape[1],):
            raise ValueError(f"vector must have shape ({self.vectors.shape[1]},), got {tuple(vector.shape)}")
        scores = self.unit @ F.normalize(vector, dim=0)  # (V,) cosine with every word
        banned = [self.id(w) for w in exclude]
        scores[banned] = float("-inf")
        k = min(k, len(self.vocab) - len(set(banned)))
        top = torch.topk(scores, k)  # sorted, best first
        return [(self.vocab[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist(), strict=True)]

    def most_similar(self, word: str, k: int = 5) -> list[tuple[str, float]]:
        """The k nearest words to `word` by cosine similarity, best first (the word itself left out)."""
        return self.nearest(self.vectors[self.id(word)], k, exclude=[word])

    def analogy(self, a: str, b: str, c: str, k: int = 5, *, exclude_inputs: bool = True) -> list[tuple[str, float]]:
        """a is to b as c is to ...? The words nearest to b - a + c, best first, a, b and c left out.

        The three vectors are normalised to length 1 first (as gensim and the word2vec papers do), so
        a frequent word with a long vector does not swamp the others. `analogy("man", "king", "woman")`
        is king - man + woman. With `exclude_inputs=False` a, b and c may be answers too: on real
        vectors b or c itself then often comes first.
        """
        ia, ib, ic = self.id(a), self.id(b), self.id(c)
        target = self.unit[ib] - self.unit[ia] + self.unit[ic]  # (dim,)
        return self.nearest(target, k, exclude=[a, b, c] if exclude_inputs else [])


def _check_k(k) -> int:
    return check_int("k", k, what="how many words to return")


# --- the loss -------------------------------------------------------------------------------------


def _check_sgns_shapes(centre: torch.Tensor, context: torch.Tensor, noise: torch.Tensor) -> None:
    if centre.dim() != 2 or context.shape != centre.shape:
        raise ValueError(f"centre and context must both be (B, dim), got {tuple(centre.shape)} and "
                         f"{tuple(context.shape)}")
    if noise.dim() != 3 or noise.shape[0] != centre.shape[0] or noise.shape[2] != centre.shape[1]:
        raise ValueError(f"noise must be (B, K, dim) = ({centre.shape[0]}, K, {centre.shape[1]}), "
                         f"got {tuple(noise.shape)}")


def sgns_loss(centre: torch.Tensor, context: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The negative-sampling loss of each (centre, context) pair.

    centre: (B, dim) centre vectors v_c; context: (B, dim) context vectors u_o of the true
    neighbours; noise: (B, K, dim) context vectors u_n of K noise words per pair.
    Returns (B,): -log σ(u_o · v_c) - Σ_k log σ(-u_{n_k} · v_c).
    """
    _check_sgns_shapes(centre, context, noise)
    positive = (centre * context).sum(-1)  # (B,) score of the true neighbour
    negative = (noise * centre.unsqueeze(1)).sum(-1)  # (B, K) scores of the noise words
    # logsigmoid is the numerically safe log σ(x): no log(0) for large negative x.
    return -(F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1))  # (B,)


def sgns_gradients(centre: torch.Tensor, context: torch.Tensor, noise: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The loss of each pair and its gradients, worked out by hand (what training uses).

    With s = u_o · v_c and s_k = u_{n_k} · v_c, the derivatives of the loss are
        d loss / d s   = σ(s) - 1      (negative: raising the true pair's score lowers the loss)
        d loss / d s_k = σ(s_k)        (positive: raising a noise word's score raises the loss)
    and the chain rule through the dot products gives the gradients below. Returns (loss (B,),
    grad_centre (B, dim), grad_context (B, dim), grad_noise (B, K, dim)); torch autograd on
    `sgns_loss` gives the same (the tests check it).
    """
    _check_sgns_shapes(centre, context, noise)
    positive = (centre * context).sum(-1)  # (B,)
    negative = (noise * centre.unsqueeze(1)).sum(-1)  # (B, K)
    loss = -(F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1))  # (B,)
    g_pos = torch.sigmoid(positive) - 1  # (B,) d loss / d s, in (-1, 0)
    g_neg = torch.sigmoid(negative)  # (B, K) d loss / d s_k, in (0, 1)
    grad_centre = g_pos.unsqueeze(-1) * context + (g_neg.unsqueeze(-1) * noise).sum(1)  # (B, dim)
    grad_context = g_pos.unsqueeze(-1) * centre  # (B, dim)
    grad_noise = g_neg.unsqueeze(-1) * centre.unsqueeze(1)  # (B, K, dim)
    return loss, grad_centre, grad_context, grad_noise


# --- the corpus as pairs --------------------------------------------------------------------------


def _check_sentences(sentences) -> list[list[str]]:
    """A list of token lists, or an error that says what was expected and what was given."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of sentences, each a list of words, such as "
                        f"[['the', 'king', 'ruled'], ...]; got a single string {sentences[:40]!r}")
    try:
        sentences = list(sentences)
    except TypeError:
        raise TypeError(f"sentences must be a list of token lists, got {type(sentences).__name__}") from None
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise TypeError(f"sentences must be a list of token lists, but item {i} is the string {sentence[:40]!r}: "
                            "split each sentence into words first (sentence.split()), or wrap one sentence in a list")
        if not isinstance(sentence, (list, tuple)):
            raise TypeError(f"sentences must be a list of token lists, but item {i} is a {type(sentence).__name__}")
        for word in sentence:
            if not isinstance(word, str):
                raise TypeError(f"every word must be a str, but sentence {i} holds {type(word).__name__} {word!r}")
    if not any(sentences):
        raise ValueError("sentences holds no words: word2vec needs a corpus to learn from")
    return sentences


def build_vocab(sentences: Sequence[Sequence[str]], min_count: int = 1) -> tuple[list[str], list[int]]:
    """The words seen at least `min_count` times, most frequent first, and their counts. Ties keep the
    order in which the words first appear (as gensim does), so the vocabulary is the same every run."""
    counts = Counter(w for s in sentences for w in s)  # remembers the order of first appearance
    kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: -counts[w])  # a stable sort
    return kept, [counts[w] for w in kept]


def window_pairs(ids: torch.Tensor, sentence_ids: torch.Tensor, windows: torch.Tensor | int) -> torch.Tensor:
    """All (centre, context) pairs of a corpus, as a (P, 2) tensor of word ids.

    ids: (N,) word ids of the whole corpus in order; sentence_ids: (N,) the sentence each word belongs
    to (windows never cross a sentence boundary); windows: the window size of each centre word (N,), or
    one int for all. A context word at distance d from its centre is paired with it when d <= the
    centre's window. Pairs come offset by offset (d = 1 to the right, d = 1 to the left, d = 2, ...).
    """
    n = ids.shape[0]
    windows = torch.full((n,), windows) if isinstance(windows, int) else windows  # (N,)
    largest = int(windows.max()) if n else 0
    pairs = []
    for d in range(1, largest + 1):
        same = sentence_ids[d:] == sentence_ids[:-d]  # (N - d,) word i and word i + d share a sentence
        right = same & (windows[:-d] >= d)  # centre i sees its right neighbour i + d
        left = same & (windows[d:] >= d)  # centre i + d sees its left neighbour i
        pairs.append(torch.stack([ids[:-d][right], ids[d:][right]], 1))  # (n_right, 2)
        pairs.append(torch.stack([ids[d:][left], ids[:-d][left]], 1))  # (n_left, 2)
    return torch.cat(pairs) if pairs else torch.empty(0, 2, dtype=torch.long)  # (P, 2)


def keep_probabilities(counts: Sequence[int], subsample: float) -> torch.Tensor:
    """word2vec's subsampling: the probability of keeping each occurrence of each word, (V,)."""
    counts_t = torch.tensor(counts, dtype=torch.float64)  # (V,)
    if subsample <= 0:
        return torch.ones_like(counts_t)
    threshold = subsample * counts_t.sum()
    return ((counts_t / threshold).sqrt() + 1) * threshold / counts_t  # (V,), > 1 means "always keep"


def noise_distribution(counts: Sequence[int], power: float = 0.75) -> torch.Tensor:
    """The distribution noise words are drawn from: count ** power, normalised, (V,).

    The power 0.75 flattens the unigram distribution: rare words are drawn more often than their
    share of the text, frequent words less.
    """
    weights = torch.tensor(counts, dtype=torch.float64) ** power  # (V,)
    return weights / weights.sum()


# --- training -------------------------------------------------------------------------------------


def train_word2vec(
    sentences: Sequence[Sequence[str]],
    dim: int = 50,
    window: int = 2,
    negatives: int = 5,
    epochs: int = 5,
    seed: int = 0,
    min_count: int = 1,
    *,
    lr: float = Word2VecConfig.lr,
    batch_size: int = Word2VecConfig.batch_size,
    subsample: float = Word2VecConfig.subsample,
    progress: bool = True,
) -> WordVectors:
    """Train skip-gram with negative sampling on `sentences` (a list of token lists).

    Returns WordVectors with the centre vectors, the context vectors and the loss curve. The same
    arguments and seed give the same vectors. A progress bar shows the epochs (off when `progress`
    is False or the environment variable TQDM_DISABLE is set).
    """
    config = Word2VecConfig(dim=dim, window=window, negatives=negatives, epochs=epochs, seed=seed,
                            min_count=min_count, lr=lr, batch_size=batch_size, subsample=subsample)
    sentences = _check_sentences(sentences)
    # One CPU thread: the tensors of one step are tiny, so more threads only add waiting (on a busy
    # machine a lot of it), and one thread makes the result independent of the machine's core count.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(sentences, config, progress)
    finally:
        torch.set_num_threads(threads)


def _train(sentences: list[list[str]], config: Word2VecConfig, progress: bool) -> WordVectors:
    for name in ("dim", "window", "negatives", "epochs", "min_count", "batch_size"):
        check_int(name, getattr(config, name))
    check_int("seed", config.seed, minimum=0)
    if not (isinstance(config.lr, (int, float)) and config.lr > 0):
        raise ValueError(f"lr must be a positive number, got {config.lr!r}")
    if not (isinstance(config.subsample, (int, float)) and config.subsample >= 0):
        raise ValueError(f"subsample must be a number >= 0 (0 keeps every word), got {config.subsample!r}")

    vocab, counts = build_vocab(sentences, config.min_count)
    if len(vocab) < 2:
        raise ValueError(f"min_count={config.min_count} leaves {len(vocab)} word(s) in the vocabulary; "
                         "word2vec needs at least 2: lower min_count or give a larger corpus")
    index = {w: i for i, w in enumerate(vocab)}
    # The corpus as one long tensor of ids, with the sentence of each word (unknown words dropped).
    kept = [[index[w] for w in s if w in index] for s in sentences]
    ids = torch.tensor([i for s in kept for i in s], dtype=torch.long)  # (N,)
    sentence_ids = torch.repeat_interleave(torch.arange(len(kept)), torch.tensor([len(s) for s in kept]))  # (N,)

    g = torch.Generator().manual_seed(config.seed)
    V, D, K, B = len(vocab), config.dim, config.negatives, config.batch_size
    # Centre vectors start small and random, uniform in [-1/D, 1/D) as in gensim (the original C code
    # draws from half that range), context vectors at zero: every score starts at 0, every
    # probability at σ(0) = 0.5, so the first loss is (1 + K) · ln 2.
    centre = (torch.rand(V, D, generator=g) * 2 - 1) / D  # (V, D)
    context = torch.zeros(V, D)  # (V, D)
    keep = keep_probabilities(counts, config.subsample)[ids].float()  # (N,)
    noise = noise_distribution(counts, config.noise_power).float()  # (V,)

    min_lr = config.lr * 1e-4  # the learning rate falls linearly from lr to min_lr over the whole run
    log_every = None  # steps per point of the loss curve, set from the size of the first epoch

    disable = (not progress) or os.environ.get("TQDM_DISABLE", "").lower() not in ("", "0", "false") or tqdm is None
    # disable=False explicitly: tqdm reads TQDM_DISABLE once, when it is imported; we read it on every call.
    # The bar stays when training is done (leave=True), showing the epochs and the last loss.
    bar = None if disable else tqdm(total=config.epochs, desc="word2vec", unit="epoch", disable=False)
    step, pairs_seen, running, running_pairs = 0, 0, 0.0, 0
    history, history_pairs = [], []
    for epoch in range(config.epochs):
        # This epoch's corpus: subsample frequent words, draw a window size for each centre word.
        mask = torch.rand(ids.shape[0], generator=g) < keep  # (N,)
        epoch_ids, epoch_sentences = ids[mask], sentence_ids[mask]  # (N',)
        windows = torch.randint(1, config.window + 1, epoch_ids.shape, generator=g)  # (N',)
        pairs = window_pairs(epoch_ids, epoch_sentences, windows)  # (P, 2)
        pairs = pairs[torch.randperm(pairs.shape[0], generator=g)]  # (P, 2) shuffled
        if pairs.shape[0] == 0:  # a tiny corpus can lose every pair to subsampling
            continue
        noise_ids = torch.multinomial(noise, pairs.shape[0] * K, replacement=True, generator=g).view(-1, K)  # (P, K)
        steps = math.ceil(pairs.shape[0] / B)
        if log_every is None:
            log_every = max(1, config.epochs * steps // config.history_points)
        for i, start in enumerate(range(0, pairs.shape[0], B)):
            c, o = pairs[start:start + B, 0], pairs[start:start + B, 1]  # (b,), (b,)
            n = noise_ids[start:start + B].reshape(-1)  # (b * K,)
            noise_rows = context.index_select(0, n).view(c.shape[0], K, D)  # (b, K, D)
            loss, g_centre, g_context, g_noise = sgns_gradients(centre[c], context[o], noise_rows)
            if step == 0:  # the curve starts with the untrained model: (1 + K) ln 2 per pair
                history.append(float(loss.mean()))
                history_pairs.append(0)
            lr = config.lr - (config.lr - min_lr) * (epoch + i / steps) / config.epochs
            # SGD on the rows that took part; index_add_ sums the steps of a word used several times.
            # (The steps are scaled first: index_add_'s own `alpha` takes a much slower path on the CPU.)
            centre.index_add_(0, c, g_centre * -lr)
            context.index_add_(0, o, g_context * -lr)
            context.index_add_(0, n, g_noise.reshape(-1, D) * -lr)
            step += 1
            total = float(loss.sum())
            if not math.isfinite(total):  # summed steps of a word repeated many times in one batch overshot
                raise FloatingPointError(
                    f"word2vec diverged at step {step} (the loss became {total}): lower lr (now {config.lr}) or "
                    f"batch_size (now {B}); on a small corpus, or with subsample=0, a frequent word repeats many "
                    "times in one batch and its summed update overshoots")
            running += total
            running_pairs += c.shape[0]
            pairs_seen += c.shape[0]
            if step % log_every == 0:
                history.append(running / running_pairs)
                history_pairs.append(pairs_seen)
                running, running_pairs = 0.0, 0
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{history[-1]:.3f}" if history else "-")
    if bar is not None:
        bar.close()
    return WordVectors(vocab, centre, context, counts, history, history_pairs)


# --- evaluation -----------------------------------------------------------------------------------


def analogy_questions(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """Every analogy a : b :: c : d that a list of word pairs (a, b) with one relation gives:
    each ordered choice of two different pairs, e.g. [("man", "woman"), ("king", "queen")] gives
    ("man", "woman", "king", "queen") and ("king", "queen", "man", "woman")."""
    return [(a, b, c, d) for (a, b), (c, d) in permutations(pairs, 2)]


def analogy_answers(wv: WordVectors, questions: Sequence[Sequence[str]], *, exclude_inputs: bool = True,
                    chunk: int = 1024) -> list[str]:
    """The top answer of wv.analogy(a, b, c) for every question (a, b, c) or (a, b, c, d), computed
    `chunk` questions at a time: one matrix product per chunk instead of one per question."""
    ids = torch.tensor([[wv.id(q[0]), wv.id(q[1]), wv.id(q[2])] for q in questions], dtype=torch.long)  # (Q, 3)
    answers = []
    for part in ids.split(chunk):
        target = wv.unit[part[:, 1]] - wv.unit[part[:, 0]] + wv.unit[part[:, 2]]  # (q, dim): b - a + c
        scores = F.normalize(target, dim=1) @ wv.unit.T  # (q, V) cosine of each target with every word
        if exclude_inputs:
            scores.scatter_(1, part, float("-inf"))  # a, b and c are not allowed as answers
        answers += [wv.vocab[i] for i in scores.argmax(dim=1).tolist()]
    return answers


def analogy_accuracy(wv: WordVectors, questions: Sequence[tuple[str, str, str, str]], *,
                     exclude_inputs: bool = True) -> float:
    """The fraction of questions a : b :: c : d whose top answer to wv.analogy(a, b, c) is d.

    This is the "3CosAdd" test of the word2vec papers: a question counts as solved only when d is the
    single nearest word to b - a + c (a, b and c excluded; with `exclude_inputs=False` they may win).
    """
    if not questions:
        raise ValueError("analogy_accuracy needs at least one question (a, b, c, d)")
    answers = analogy_answers(wv, questions, exclude_inputs=exclude_inputs)
    return sum(answer == q[3] for answer, q in zip(answers, questions, strict=True)) / len(questions)
