"""The final project's checks (lesson 13): the references agree with course_lib's count models, a
right milestone passes however it is written, and each mistake a learner would really make is named.

The learner's objects are made here from the course's bundled English corpus (no download): its
split, a BPE tokenizer trained on it, small count-based models dressed as a `ModernGPT` (the check
looks only at the type's name, the config and the logits, so a model that needs no training can
stand for a trained one), and generation functions built on `generation.generate`.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn as nn
from grading_helpers import fails_with

from course_lib import data, models
from course_lib.checks import lesson13
from course_lib.generation import generate
from course_lib.markov import add_k_probabilities, bigram_counts, bigram_cross_entropy
from course_lib.models import GPT, GPTConfig, ModernGPTConfig
from course_lib.tokenizers import BPETokenizer, Vocabulary

V = 300  # 44 merges: quick to train, and enough to tell a tokenizer's training text by its merges


@pytest.fixture(scope="module")
def project():
    """A learner's milestones 1 and 2, done right, on 200,000 characters of the course's English corpus."""
    text = data.load_corpus("english")[:200_000]
    train_text, val_text = data.train_val_split(text, val_fraction=0.1)
    tokenizer = BPETokenizer().train(train_text, V)
    train_ids = torch.tensor(tokenizer.encode(train_text))
    val_ids = torch.tensor(tokenizer.encode(val_text))
    return dict(
        text=text,
        train_text=train_text,
        val_text=val_text,
        tokenizer=tokenizer,
        train_ids=train_ids,
        val_ids=val_ids,
    )


# --- milestone 1: the split ---------------------------------------------------------------------------------


def test_a_split_at_one_position_passes_either_way_round(project, capsys):
    text, train, val = project["text"], project["train_text"], project["val_text"]
    lesson13.check_split(text, train, val)
    lesson13.check_split(text, train, val, hidden=True)
    cut = len(text) // 8
    lesson13.check_split(text, text[cut:], text[:cut])  # the first part held out is as good
    assert "characters to learn from" in capsys.readouterr().out


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda t: (t, t[int(0.9 * len(t)) :]), "train_text is the whole text"),
        (lambda t: (t[: int(0.95 * len(t))], t[int(0.9 * len(t)) :]), "overlap"),
        (lambda t: _shuffled_split(t), "shuffled"),
        (lambda t: (t[: int(0.8 * len(t))], t[int(0.9 * len(t)) :]), "leave out"),
        (lambda t: (t[int(0.9 * len(t)) :], t[: int(0.9 * len(t))]), "swapped"),
        (lambda t: (t[: int(0.99 * len(t))], t[int(0.99 * len(t)) :]), "hold out between 5% and 25%"),
        (lambda t: (t[: int(0.6 * len(t))], t[int(0.6 * len(t)) :]), "hold out between 5% and 25%"),
        (lambda t: (t.splitlines()[:10], t), "expected a string"),
        (lambda t: (t, ""), "val_text is empty"),
    ],
)
def test_split_mistakes_are_named(project, make, match):
    train, val = make(project["text"])
    fails_with(lesson13.check_split, project["text"], train, val, match=match)


def _shuffled_split(text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    random.Random(0).shuffle(lines)
    shuffled = "".join(lines)
    return data.train_val_split(shuffled)


def test_a_short_text_and_a_small_validation_part_are_named():
    short_text = "to be or not to be. " * 1000
    fails_with(lesson13.check_split, short_text, short_text[:18000], short_text[18000:], match="too little")
    text = data.load_corpus("english")[:150_000]
    lesson13.check_split(text, text[:142_000], text[142_000:])
    fails_with(lesson13.check_split, text, text[:142_000], text[142_000:], hidden=True, match="at least 10,000")


# --- milestone 2: the tokenizer and the ids ---------------------------------------------------------------


def test_a_tokenizer_trained_on_the_training_part_passes(project, capsys):
    p = project
    lesson13.check_tokenizer(p["tokenizer"], p["train_text"], p["val_text"], p["train_ids"], p["val_ids"])
    lesson13.check_tokenizer(p["tokenizer"], p["train_text"], p["val_text"], None, None, hidden=True)
    out = capsys.readouterr().out
    assert "44 merges, learned from train_text" in out and "characters per token" in out, out
    # int32 ids are ids too
    lesson13.check_tokenizer(
        p["tokenizer"], p["train_text"], p["val_text"], p["train_ids"].int(), p["val_ids"].to(torch.int32)
    )


@pytest.mark.parametrize(
    "trained_on, match",
    [
        ("val", "trained the tokenizer on the validation text"),
        ("whole", "trained the tokenizer before splitting"),
        ("other", "not those that BPETokenizer().train(train_text, 300) learns"),
    ],
)
def test_a_tokenizer_that_saw_the_validation_text_is_named(project, trained_on, match, capsys):
    p = project
    texts = {"val": p["val_text"], "whole": p["text"], "other": p["train_text"][: len(p["train_text"]) // 3]}
    tok = BPETokenizer().train(texts[trained_on], V)
    train_ids, val_ids = torch.tensor(tok.encode(p["train_text"])), torch.tensor(tok.encode(p["val_text"]))
    fails_with(lesson13.check_tokenizer, tok, p["train_text"], p["val_text"], train_ids, val_ids, match=match)
    out = capsys.readouterr().out
    assert "train_ids: passed" in out and "val_ids: passed" in out, out  # its ids are right: 2 of 3 parts


def test_an_untrained_tokenizer_and_another_kind_are_named(project):
    p = project
    bare = BPETokenizer()
    ids = torch.tensor(bare.encode(p["train_text"])), torch.tensor(bare.encode(p["val_text"]))
    fails_with(lesson13.check_tokenizer, bare, p["train_text"], p["val_text"], *ids, match="has no merges")
    chars = Vocabulary.from_text(p["text"], level="char", specials=())
    ids = torch.tensor(chars.encode(p["train_text"])), torch.tensor(chars.encode(p["val_text"]))
    fails_with(lesson13.check_tokenizer, chars, p["train_text"], p["val_text"], *ids, match="expected course_lib's BPE")


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda p: (p["tokenizer"].encode(p["train_text"]), p["val_ids"]), "make it a tensor"),
        (lambda p: (p["val_ids"], p["val_ids"]), "swapped train and val"),
        (lambda p: (torch.tensor(p["tokenizer"].encode(p["text"])), p["val_ids"]), "holds the whole text"),
        (lambda p: (p["train_ids"].float(), p["val_ids"]), "integer ids"),
        (lambda p: (p["train_ids"], torch.tensor(list(p["val_text"].encode()))), "not how your tokenizer encodes"),
        (lambda p: (p["train_ids"], p["val_ids"][:-5]), "does not decode to val_text"),
        (lambda p: (p["train_ids"], p["val_ids"] + 400), "cannot decode"),
    ],
)
def test_id_mistakes_are_named_and_the_other_parts_still_checked(project, change, match, capsys):
    p = project
    train_ids, val_ids = change(p)
    fails_with(
        lesson13.check_tokenizer, p["tokenizer"], p["train_text"], p["val_text"], train_ids, val_ids, match=match
    )
    assert "tokenizer: passed" in capsys.readouterr().out


# --- milestone 3: the baselines -------------------------------------------------------------------------------


def test_references_agree_with_the_count_models_of_lesson_02(project):
    train, val = project["train_ids"], project["val_ids"]
    for k in (0.1, 1.0):
        ours = lesson13.reference_bigram_loss(train, val, V, k)
        theirs = bigram_cross_entropy(add_k_probabilities(bigram_counts(train, V), k), val)
        assert math.isclose(ours, theirs, rel_tol=1e-12), (ours, theirs)
        counts = torch.bincount(train, minlength=V).double() + k
        by_torch = -(counts / counts.sum()).log()[val].mean().item()
        assert math.isclose(lesson13.reference_unigram_loss(train, val, V, k), by_torch, rel_tol=1e-9), by_torch


def unigram_torch(train_ids, val_ids, vocab_size, k=1.0):
    counts = torch.bincount(torch.as_tensor(train_ids), minlength=vocab_size).float() + k
    return -(counts / counts.sum()).log()[torch.as_tensor(val_ids)].mean()  # a 0-d float32 tensor


def unigram_counter(train_ids, val_ids, vocab_size, k=1.0):
    counts = Counter(int(t) for t in train_ids)
    n = sum(counts.values())
    total = sum(math.log((counts[int(t)] + k) / (n + k * vocab_size)) for t in val_ids[1:])
    return -total / (len(val_ids) - 1)  # averaged over the bigram's predictions: also right


def bigram_numpy(train_ids, val_ids, vocab_size, k=1.0):
    probs = add_k_probabilities(bigram_counts(train_ids, vocab_size), k)
    return bigram_cross_entropy(probs, val_ids)


def bigram_loops(train_ids, val_ids, vocab_size, k=1.0):
    pairs = Counter(zip(train_ids.tolist()[:-1], train_ids.tolist()[1:]))
    firsts = Counter(train_ids.tolist()[:-1])
    v = val_ids.tolist()
    return float(np.mean([-math.log((pairs[a, b] + k) / (firsts[a] + k * vocab_size)) for a, b in zip(v, v[1:])]))


def test_right_baselines_pass_however_they_are_written(project, capsys):
    p = project
    for uni, bi in [(unigram_torch, bigram_numpy), (unigram_counter, bigram_loops)]:
        lesson13.check_baselines(uni, bi, p["train_ids"], p["val_ids"], V)
        lesson13.check_baselines(uni, bi, p["train_ids"], p["val_ids"], V, hidden=True)
    assert "on your text" in capsys.readouterr().out


def _unigram_variant(mistake):
    def fn(train_ids, val_ids, vocab_size, k=1.0):
        train, val = torch.as_tensor(train_ids), torch.as_tensor(val_ids)
        if mistake == "train":
            val = train
        if mistake == "fit_val":
            train = val
        if mistake == "no_k":
            k = 0.0
        counts = torch.bincount(train, minlength=vocab_size).double()
        total = counts.sum() + (0 if mistake == "no_kV" else k * vocab_size)
        logp = ((counts + k) / total).log()[val]
        loss = -logp.sum() if mistake == "sum" else -logp.mean()
        return {"bits": loss / math.log(2), "log10": loss / math.log(10), "sign": -loss}.get(mistake, loss).item()

    return fn


def _bigram_variant(mistake):
    def fn(train_ids, val_ids, vocab_size, k=1.0):
        train, val = np.asarray(train_ids), np.asarray(val_ids)
        if mistake == "train":
            val = train
        if mistake == "fit_val":
            train = val
        if mistake == "no_k":
            k = 0.0
        counts = bigram_counts(train, vocab_size)
        with np.errstate(invalid="ignore"):  # k = 0: a row without counts is 0 / 0
            if mistake == "columns":
                probs = (counts + k) / (counts.sum(axis=0, keepdims=True) + k * vocab_size)
            elif mistake == "one_k":
                probs = (counts + k) / (counts.sum(axis=1, keepdims=True) + k)
            else:
                probs = (counts + k) / (counts.sum(axis=1, keepdims=True) + k * vocab_size)
        prev, nxt = val[:-1], val[1:]
        if mistake == "reversed":
            prev, nxt = nxt, prev
        if mistake == "boundary":
            prev, nxt = np.r_[train[-1:], val[:-1]], val
        with np.errstate(divide="ignore"):
            logp = np.log(probs[prev, nxt])
        loss = -logp.sum() if mistake == "sum" else -logp.mean()
        if mistake == "unigram":
            return _unigram_variant("right")(train_ids, val_ids, vocab_size, k)
        return {"bits": loss / math.log(2), "log10": loss / math.log(10), "sign": -loss}.get(mistake, loss)

    return fn


@pytest.mark.parametrize(
    "mistake, match",
    [
        ("bits", "gave bits"),
        ("log10", "log base 10"),
        ("train", "scored it on the training tokens"),
        ("fit_val", "counted the validation tokens"),
        ("no_k", "left out the smoothing"),
        ("no_kV", "N + k·V"),
        ("sum", "added up the losses"),
        ("sign", "forgot the minus sign"),
    ],
)
def test_unigram_mistakes_are_named(project, mistake, match, capsys):
    p = project
    fails_with(
        lesson13.check_baselines,
        _unigram_variant(mistake),
        bigram_numpy,
        p["train_ids"],
        p["val_ids"],
        V,
        match=match,
    )
    assert "bigram_loss: passed" in capsys.readouterr().out  # the other part earns its share


@pytest.mark.parametrize(
    "mistake, match",
    [
        ("bits", "gave bits"),
        ("log10", "log base 10"),
        ("train", "scored it on the training tokens"),
        ("fit_val", "counted the pairs of the validation tokens"),
        ("no_k", "left out the smoothing"),
        ("reversed", "wrong way round"),
        ("columns", "column sums"),
        ("one_k", "count(a) + k·V"),
        ("boundary", "crosses the split"),
        ("unigram", "returned the unigram's loss"),
        ("sum", "added up the losses"),
        ("sign", "forgot the minus sign"),
    ],
)
def test_bigram_mistakes_are_named(project, mistake, match):
    p = project
    fails_with(
        lesson13.check_baselines,
        unigram_torch,
        _bigram_variant(mistake),
        p["train_ids"],
        p["val_ids"],
        V,
        match=match,
    )


def test_a_baseline_that_returns_no_number_or_crashes_is_explained(project):
    p = project
    fails_with(
        lesson13.check_baselines, lambda *a: [1.0, 2.0], bigram_numpy, p["train_ids"], p["val_ids"], V, match="a number"
    )
    fails_with(
        lesson13.check_baselines, unigram_torch, lambda *a: 1 / 0, p["train_ids"], p["val_ids"], V, match="ZeroDivision"
    )


# --- milestone 4: the model -----------------------------------------------------------------------------------


class ModernGPT(nn.Module):
    """A count model dressed as a ModernGPT (the check reads the type's name): its logits at position t
    are log P(next | up to `order` - 1 tokens before it), add-k counts of `ids` (order 1: the unigram,
    2: the bigram, 3: a trigram). Nothing to train, and better than the bigram when order is 3."""

    def __init__(self, ids: torch.Tensor, order: int, vocab_size: int = V, block_size: int = 32, k: float = 0.1):
        super().__init__()
        self.config = ModernGPTConfig(
            vocab_size=vocab_size, block_size=block_size, n_layer=1, n_head=2, n_kv_head=2, n_embd=8
        )
        self.order, self.k, self.V = order, k, vocab_size
        ids = ids.tolist()
        # grams[m]: how often each run of m tokens occurs (grams[0][()] is the number of tokens)
        self.grams = [Counter(zip(*(ids[i:] for i in range(m)))) for m in range(order + 1)]
        self.grams[0] = Counter({(): len(ids)})
        self.rows: dict[tuple, torch.Tensor] = {}

    def _row(self, context: tuple) -> torch.Tensor:
        if context not in self.rows:
            nxt = self.grams[len(context) + 1]
            counts = torch.tensor([nxt[(*context, v)] for v in range(self.V)], dtype=torch.float64)
            self.rows[context] = ((counts + self.k) / (self.grams[len(context)][context] + self.k * self.V)).log()
        return self.rows[context]

    def forward(self, idx: torch.Tensor, targets=None):
        B, T = idx.shape
        logits = torch.zeros(B, T, self.V)
        for b, row in enumerate(idx.tolist()):
            for t in range(T):
                logits[b, t] = self._row(tuple(row[max(0, t + 2 - self.order) : t + 1]) if self.order > 1 else ())
        return logits, None


def test_a_model_better_than_both_baselines_passes(project, capsys):
    p = project
    trigram = ModernGPT(p["train_ids"], order=3)
    lesson13.check_model(trigram, p["tokenizer"], p["train_ids"], p["val_ids"])
    lesson13.check_model(trigram, p["tokenizer"], p["train_ids"], p["val_ids"], hidden=True)
    out = capsys.readouterr().out
    assert "nats per token on 2,048 validation predictions: below the bigram's" in out, out


def test_the_bar_is_the_best_bigram_on_the_same_predictions(project):
    p = project
    x, y = lesson13._windows(p["val_ids"], 32, lesson13.WINDOWS, 0)
    bars = lesson13.best_baselines(p["train_ids"], x, y, V)
    best = min(
        -np.log(add_k_probabilities(bigram_counts(p["train_ids"], V), k)[x.reshape(-1), y.reshape(-1)]).mean()
        for k in lesson13.SMOOTHING
    )
    assert math.isclose(bars["bigram"], best, rel_tol=1e-12) and bars["unigram"] > bars["bigram"], (bars, best)


def test_model_mistakes_are_named(project):
    p = project
    args = (p["tokenizer"], p["train_ids"], p["val_ids"])
    fails_with(lesson13.check_model, ModernGPT(p["train_ids"], order=2, k=0.01), *args, match="not the bigram's")
    fails_with(lesson13.check_model, _library_model(V), *args, match="no better than the unigram's")  # untrained
    fails_with(lesson13.check_model, ModernGPT(p["val_ids"], order=3), *args, match="trained on the validation tokens")
    fails_with(lesson13.check_model, _library_model(V + 1), *args, match="your tokenizer has 300 tokens")
    gpt = GPT(GPTConfig(vocab_size=V, block_size=32, n_layer=1, n_head=2, n_embd=8))
    fails_with(lesson13.check_model, gpt, *args, match="expected a ModernGPT, got GPT")


def _library_model(vocab_size: int) -> nn.Module:
    torch.manual_seed(0)
    return models.ModernGPT(
        ModernGPTConfig(vocab_size=vocab_size, block_size=32, n_layer=1, n_head=2, n_kv_head=2, n_embd=16)
    )


# --- exercise 5: per token and per character -----------------------------------------------------------------


def test_per_character_right_answers_pass_in_any_form():
    lesson13.check_per_character(2.10 / math.log(2), 4.80 / 2.5 / math.log(2), "B")
    lesson13.check_per_character(3.03, torch.tensor(2.77), " b ")
    lesson13.check_per_character(2.10 * math.log2(math.e), 4.8 / (2.5 * math.log(2)), "B")


@pytest.mark.parametrize(
    "a, b, better, match",
    [
        (2.10, 2.770, "B", "gave nats"),
        (2.10 * math.log(2), 2.770, "B", "multiplied by ln 2"),
        (3.030, 1.92, "B", "gave nats per character"),
        (3.030, 4.80 / math.log(2), "B", "left it per token"),
        (3.030, 4.80 * 2.5 / math.log(2), "B", "multiplied by the 2.5 characters"),
        (3.030, 1.92 / math.log(10), "B", "divided by ln 10"),
        (3.030, 2.770, "A", "compared the losses per token"),
        (3.030, 2.9, "B", "b_bits_per_char: 2.9 is not right"),
    ],
)
def test_per_character_mistakes_are_named_without_the_answer(a, b, better, match):
    text = fails_with(lesson13.check_per_character, a, b, better, match=match)
    assert "3.03" not in text.replace(str(a), "") and "2.77" not in text.replace(str(b), "")


# --- milestones 6 and 7: sampling and the cache ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small_model():
    torch.manual_seed(0)
    return models.ModernGPT(ModernGPTConfig(vocab_size=V, block_size=8, n_layer=1, n_head=2, n_kv_head=1, n_embd=16))


def _complete(model, tokenizer, mistake=None):
    shared = torch.Generator().manual_seed(0)

    def complete(prompt, max_new_tokens, *, seed=0, use_cache=False):
        idx = torch.tensor([tokenizer.encode(prompt)])
        g = shared if mistake == "shared" else torch.Generator().manual_seed(seed)
        temperature = 0.0 if mistake == "greedy" else 1.0
        top_k = 20 if (mistake == "cache_changes" and use_cache) else None
        n = 8 if mistake == "fixed_n" else max_new_tokens
        out = generate(model, idx, n, temperature=temperature, top_k=top_k, use_cache=use_cache, generator=g)
        if mistake == "ids":
            return out[0].tolist()
        if mistake == "no_prompt":
            return tokenizer.decode(out[0, idx.shape[1] :].tolist())
        return tokenizer.decode(out[0].tolist())

    return complete


def test_sampling_and_the_cache_pass_when_right(project, small_model, capsys):
    complete = _complete(small_model, project["tokenizer"])
    text = complete(project["val_text"][:30], 20, seed=5, use_cache=True)
    own = (project["tokenizer"], project["val_text"], text, complete(project["val_text"][:30], 20, seed=5))
    for hidden in (False, True):
        lesson13.check_sampling(complete, project["val_text"], hidden=hidden)
        lesson13.check_cache(complete, small_model, *own, hidden=hidden)
    out = capsys.readouterr().out
    assert "past the 8-token window" in out, out


@pytest.mark.parametrize(
    "mistake, match",
    [
        ("ids", "decode the ids"),
        ("no_prompt", "return the prompt followed by the new text"),
        ("shared", "a generator made once outside has moved on"),
        ("greedy", "decoded greedily"),
        ("fixed_n", "pass max_new_tokens on"),
    ],
)
def test_sampling_mistakes_are_named(project, small_model, mistake, match):
    complete = _complete(small_model, project["tokenizer"], mistake)
    fails_with(lesson13.check_sampling, complete, project["val_text"], match=match)


def test_a_cache_that_changes_the_text_is_named(project, small_model):
    tok, val = project["tokenizer"], project["val_text"]
    right = _complete(small_model, tok)
    a, b = right(val[:30], 20, seed=5, use_cache=True), right(val[:30], 20, seed=5)
    changes = _complete(small_model, tok, "cache_changes")
    fails_with(lesson13.check_cache, changes, small_model, tok, val, a, b, match="differs from use_cache=False")
    shared = _complete(small_model, tok, "shared")
    fails_with(lesson13.check_cache, shared, small_model, tok, val, a, b, match="two calls without the cache differ")

    def no_flag(prompt, max_new_tokens, *, seed=0):
        return prompt + "x"

    fails_with(lesson13.check_cache, no_flag, small_model, tok, val, a, b, match="use_cache")


@pytest.mark.parametrize(
    "texts, match",
    [
        (lambda c, v: (c(v[:30], 20, seed=5, use_cache=True), c(v[:30], 20, seed=6)), "your two texts differ"),
        (lambda c, v: (c(v[:5], 2, seed=5, use_cache=True), c(v[:5], 2, seed=5)), "within the model's window of 8"),
        (lambda c, v: (torch.tensor([1, 2]), c(v[:30], 20, seed=5)), "expected the generated text"),
    ],
)
def test_the_learners_own_comparison_is_checked(project, small_model, texts, match):
    complete = _complete(small_model, project["tokenizer"])
    a, b = texts(complete, project["val_text"])
    fails_with(
        lesson13.check_cache, complete, small_model, project["tokenizer"], project["val_text"], a, b, match=match
    )
