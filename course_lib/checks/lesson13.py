"""Checks for the final project (lesson 13): lesson 12's decoder trained on a text the learner chose.

Every milestone is checked on the learner's own objects: their text and its split, their tokenizer
and token ids, their two baseline functions, their trained model and their generation function.
Nothing is compared with a number written down in advance, so a learner who picks another text is
checked as fairly as one who keeps Tiny Shakespeare. What a milestone is held to is computed here,
from the learner's split: the tokenizer trained again on their training text, count tables of their
training tokens, and their model's loss on windows of their validation tokens.

Under `course grade` the learner's objects live in another process and the checks hold stand-ins
for them (see the grader's remote.py), so the checks only call them and read their attributes as
plain data: `type(x).__name__` rather than `isinstance`, `tokenizer.vocab_size` rather than
`len(tokenizer)`, and the learner's generation function is called with strings and ints only.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.tokenizers import BPETokenizer

from .core import CheckFailed, Seals, call, check_all, passed
from .helpers import fmt, function_name, short, to_array

# --- sealed answers ---------------------------------------------------------------------------------
# The one answer worked out by hand (exercise 5) and the values of the mistakes its hints name, kept as
# seals (see core.Seals), written by `course seal lesson13` from solutions/seals/lesson13.py. The
# milestones have none: they are checked against what the learner's own text gives.
# The table as `course seal` writes it (solutions/seals/): the formatter leaves it alone.
# fmt: off
SEALS = Seals({
    "a_bits_per_char": (3, "793106c356337aa0c918", {
        "gave nats: a bit is ln 2 nats, so divide the loss in nats by ln 2 (about 0.693)": "7f88f3dbbc5763b24b4b",
        "multiplied by ln 2: nats become bits by dividing by ln 2, since a bit is the larger unit":
            "ca6dec2e73b4c0c4d701",
        "divided by ln 10: bits are logarithms to base 2, so divide by ln 2": "2fab9b10dd33569ac095",
    }),
    "b_bits_per_char": (3, "22db4c87b46f1ca16996", {
        "gave nats per character: a bit is ln 2 nats, so divide by ln 2 as well": "69b463425ccb79048fa8",
        "left it per token: a token of B is 2.5 characters, so divide by 2.5 to spread its loss over them":
            "c93540c6fccc3b939475",
        "multiplied by the 2.5 characters per token: the loss of one token is shared by its 2.5 characters, so divide":
            "9bb01cd4113533a2b7fb",
        "multiplied by ln 2: nats become bits by dividing by ln 2, since a bit is the larger unit":
            "3286e1f85abbfe13846b",
        "divided by ln 10: bits are logarithms to base 2, so divide by ln 2": "f2c0308bb2bbfc058838",
    }),
    "better": (None, "2a244394e36c6ddec121", {
        "compared the losses per token: a token of B carries 2.5 characters, so its loss covers more text; compare "
        "per character":
            "f4a00d114fa163d10405",
    }),
})
# fmt: on

MIN_TEXT_CHARS = 100_000  # shorter than this, there is too little to learn from (a short novel is 300,000+)
VAL_SHARE = (0.05, 0.25)  # the held-out share of the text: the course keeps 10%
MIN_VAL_CHARS = 10_000  # a smaller validation part gives a loss that jumps from run to run
SMOOTHING = (0.01, 0.1, 1.0)  # the add-k constants the model's bar is the best of
WINDOWS = 64  # validation windows the model is scored on: 64 x block_size predictions
LEAK_MARGIN = 0.15  # nats: a model this much better on held-out text than on its training text saw it


def _type_name(value: Any) -> str:
    return type(value).__name__


# --- milestone 1: the split ------------------------------------------------------------------------------


def check_split(text: Any, train_text: Any, val_text: Any, *, hidden: bool = False) -> None:
    """Milestone 1: `train_text` and `val_text` are two contiguous pieces of `text` that do not
    overlap and together give it back, the held-out one 5-25% of it. `hidden=True` also wants at least
    MIN_VAL_CHARS held out."""
    for label, value in (("text", text), ("train_text", train_text), ("val_text", val_text)):
        if not isinstance(value, str):
            raise CheckFailed(
                label,
                f"expected a string, got {_type_name(value)} ({short(value)}).",
                "keep the text as one string (data.tiny_shakespeare(), or open(path, encoding='utf-8').read()) "
                "and cut it in two with data.train_val_split(text)",
            )
    name = "train_text, val_text" + (" (validation size)" if hidden else "")
    n, n_train, n_val = len(text), len(train_text), len(val_text)
    if n < MIN_TEXT_CHARS:
        raise CheckFailed(
            "text",
            f"{n:,} characters is too little to train a language model on.",
            f"choose a text of at least {MIN_TEXT_CHARS:,} characters (about 20,000 words): a short novel has "
            "300,000 or more, Tiny Shakespeare 1,115,394",
        )
    if not n_train or not n_val:
        empty = "train_text" if not n_train else "val_text"
        raise CheckFailed(name, f"{empty} is empty.", "cut the text once: data.train_val_split(text, val_fraction=0.1)")
    if val_text in train_text:
        raise CheckFailed(
            name,
            f"the {n_val:,} characters of val_text are all inside train_text too.",
            "it looks like train_text is the whole text: it must stop where val_text starts. Whatever has "
            "seen the validation text (the tokenizer, the count tables, the model) scores it too well",
        )
    where = {"train_text": text.find(train_text), "val_text": text.find(val_text)}
    broken = [label for label, at in where.items() if at < 0]
    if broken:
        raise CheckFailed(
            name,
            f"{' and '.join(broken)} {'is' if len(broken) == 1 else 'are'} not one unbroken piece of text.",
            "it looks like the lines were shuffled (or changed) before the split. Cut the text as it is: "
            "neighbouring lines are alike, so a shuffled split puts near-copies of training lines into the "
            "validation part and flatters every model scored on it",
        )
    start, end = max(where.values()), min(where["train_text"] + n_train, where["val_text"] + n_val)
    if end > start:
        raise CheckFailed(
            name,
            f"train_text and val_text overlap: {end - start:,} characters are in both.",
            "cut once, at one position: train_text = text[:cut] and val_text = text[cut:]",
        )
    if n_train + n_val != n:
        raise CheckFailed(
            name,
            f"the two parts leave out {n - n_train - n_val:,} characters of the text.",
            "train_text + val_text should give the whole text back: cut it at one position",
        )
    share = n_val / n
    if share > 0.5:
        raise CheckFailed(
            name,
            f"val_text is {share:.0%} of the text and train_text only {1 - share:.0%}.",
            "it looks like you swapped the two parts: the model learns from the larger one",
        )
    low, high = VAL_SHARE
    if not low <= share <= high:
        raise CheckFailed(
            name,
            f"val_text is {share:.1%} of the text.",
            f"hold out between {low:.0%} and {high:.0%} (the course keeps the last 10%): less gives a noisy "
            "validation loss, more leaves less to learn from",
        )
    if hidden and n_val < MIN_VAL_CHARS:
        raise CheckFailed(
            name,
            f"val_text has {n_val:,} characters.",
            f"hold out at least {MIN_VAL_CHARS:,} characters: a smaller validation part gives a loss that "
            "changes a lot from one model to the next",
        )
    passed(name, f"{n_train:,} characters to learn from, {n_val:,} ({share:.0%}) held out")


# --- milestone 2: the tokenizer and the token ids ----------------------------------------------------------


def _retrain(tokenizer: Any, text: str, vocab_size: int) -> list[tuple[int, int]]:
    """The merges that `BPETokenizer` learns from `text` with the learner's settings and vocabulary size."""
    specials = tuple(getattr(tokenizer, "special_tokens", ()) or ())
    pattern = getattr(tokenizer, "pattern", None)
    fresh = BPETokenizer(specials) if pattern is None else BPETokenizer(specials, pattern=pattern)
    return fresh.train(text, vocab_size).merges


def _check_trained_on(tokenizer: Any, train_text: str, val_text: str) -> None:
    name = "tokenizer"
    try:
        merges = [tuple(pair) for pair in tokenizer.merges]
        vocab_size = int(tokenizer.vocab_size)
    except (AttributeError, TypeError):
        raise CheckFailed(
            name,
            f"expected course_lib's BPETokenizer, got {_type_name(tokenizer)}.",
            "tokenizer = BPETokenizer().train(train_text, vocab_size=320) (from course_lib.tokenizers)",
        ) from None
    if not merges:
        raise CheckFailed(
            name,
            f"it has no merges (vocab_size {vocab_size}): only the 256 bytes.",
            "train it: BPETokenizer().train(train_text, vocab_size) with a vocab_size above 256",
        )
    if _retrain(tokenizer, train_text, vocab_size) == merges:
        passed(name, f"{len(merges)} merges, learned from train_text")
        return
    if _retrain(tokenizer, val_text, vocab_size) == merges:
        raise CheckFailed(
            name,
            "its merges are those BPE learns from val_text.",
            "it looks like you trained the tokenizer on the validation text: train it on train_text only",
        )
    if _retrain(tokenizer, train_text + val_text, vocab_size) == merges:
        raise CheckFailed(
            name,
            "its merges are those BPE learns from the whole text, val_text included.",
            "it looks like you trained the tokenizer before splitting: BPE picks its merges by counting the "
            "pairs of its training text, so counting val_text is looking at it. Train it on train_text only",
        )
    raise CheckFailed(
        name,
        f"its merges are not those that BPETokenizer().train(train_text, {vocab_size}) learns.",
        "train it on train_text, after the split, with train's default options",
    )


def _check_ids(label: str, ids: Any, tokenizer: Any, own: str, other: str, *, encode: bool) -> None:
    """`ids` is a 1-D tensor of token ids that the learner's tokenizer decodes to `own` (and, with
    `encode`, exactly what it encodes `own` to); `other` is the other part of the split."""
    example = f"torch.tensor(tokenizer.encode({label.replace('ids', 'text')}))"
    if not isinstance(ids, torch.Tensor):
        raise CheckFailed(
            label,
            f"expected a 1-D tensor of token ids, got {_type_name(ids)} ({short(ids)}).",
            f"make it a tensor: {label} = {example} (training and the checks draw windows from it)",
        )
    if ids.ndim != 1 or ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise CheckFailed(
            label,
            f"expected a 1-D tensor of integer ids, got dtype {ids.dtype} and shape {tuple(ids.shape)}.",
            f"{label} = {example}",
        )
    try:
        text = call(label, tokenizer.decode, ids)
    except CheckFailed as err:
        raise CheckFailed(
            label,
            f"your tokenizer cannot decode it ({err.problem})",
            "encode with the tokenizer you trained, the one called `tokenizer`",
        ) from None
    if text == other:
        raise CheckFailed(label, "it holds the other part of the split.", "it looks like you swapped train and val")
    if text == own + other or text == other + own:
        raise CheckFailed(
            label,
            "it holds the whole text.",
            f"encode only your part: {example}",
        )
    if text != own:
        raise CheckFailed(
            label,
            f"it does not decode to {label.replace('ids', 'text')} with your tokenizer.",
            f"encode with the tokenizer you trained: {example}",
        )
    if encode and [int(i) for i in ids.tolist()] != list(call(label, tokenizer.encode, own)):
        raise CheckFailed(
            label,
            "it decodes to the right text, but it is not how your tokenizer encodes that text.",
            f"use the tokenizer's own ids: {example}",
        )
    passed(label, f"{len(ids):,} tokens, {len(own) / max(len(ids), 1):.2f} characters per token")


def check_tokenizer(
    tokenizer: Any, train_text: str, val_text: str, train_ids: Any, val_ids: Any, *, hidden: bool = False
) -> None:
    """Milestone 2, in three parts: a BPE tokenizer trained on train_text only (the merges are those that
    training it again on train_text gives), and the two parts of the text encoded with it. `hidden=True`
    checks instead that the tokenizer gives back any text, characters it never saw included."""
    if hidden:
        probe = val_text[:200] + " naïve café, 東京, 🙂"
        out = call("tokenizer", tokenizer.decode, call("tokenizer", tokenizer.encode, probe))
        if out != probe:
            raise CheckFailed(
                "tokenizer (any text)",
                "decode(encode(text)) did not give the text back for text with characters it never saw.",
                "use course_lib's byte-level BPETokenizer: any character falls back to its UTF-8 bytes",
            )
        passed("tokenizer (any text)", "decode(encode(text)) gives the text back")
        return
    check_all(
        lambda: _check_trained_on(tokenizer, train_text, val_text),
        lambda: _check_ids("train_ids", train_ids, tokenizer, train_text, val_text, encode=False),
        lambda: _check_ids("val_ids", val_ids, tokenizer, val_text, train_text, encode=True),
    )


# --- milestone 3: the two baselines ------------------------------------------------------------------------


def _as_ids(ids: Any) -> np.ndarray:
    return to_array(ids).astype(np.int64).ravel()


def reference_unigram_loss(train_ids, val_ids, vocab_size: int, k: float) -> float:
    """Mean -ln P(token) over the validation tokens, P from add-k counts of the training tokens."""
    counts = np.bincount(_as_ids(train_ids), minlength=vocab_size).astype(float)  # (V,)
    probs = (counts + k) / (counts.sum() + k * vocab_size)
    with np.errstate(divide="ignore"):
        return float(-np.log(probs[_as_ids(val_ids)]).mean())


def _bigram_table(train_ids, vocab_size: int, k: float, *, columns: bool = False, denominator_k: bool = True):
    ids = _as_ids(train_ids)
    counts = np.bincount(ids[:-1] * vocab_size + ids[1:], minlength=vocab_size * vocab_size)
    counts = counts.reshape(vocab_size, vocab_size).astype(float)  # (V, V): counts[a, b], b after a
    totals = counts.sum(axis=0 if columns else 1, keepdims=True) + (k * vocab_size if denominator_k else k)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (counts + k) / totals  # (V, V)


def reference_bigram_loss(train_ids, val_ids, vocab_size: int, k: float) -> float:
    """Mean -ln P(b | a) over the pairs (a, b) of neighbouring validation tokens, P from add-k counts
    of the pairs of neighbouring training tokens."""
    probs = _bigram_table(train_ids, vocab_size, k)
    val = _as_ids(val_ids)
    with np.errstate(divide="ignore"):
        return float(-np.log(probs[val[:-1], val[1:]]).mean())


def _nll(values: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(-np.log(values).mean())


def _baseline_mistakes(reference, train, val, V: int, k: float, *, counted: str, unseen: str) -> dict[str, float]:
    """The mistakes a count baseline shares, unigram or bigram: the unit, the split, the smoothing.
    `reference` is the right loss function; `counted` says what the counts must come from, `unseen` what
    smoothing protects (the unigram's and the bigram's own words)."""
    right = reference(train, val, V, k)
    return {
        "gave bits: the course measures losses in nats, with the natural log (divide by ln 2 only to quote bits)": (
            right / math.log(2)
        ),
        "used log base 10: the loss is in nats, with the natural log": right / math.log(10),
        "scored it on the training tokens: a baseline is scored on val_ids, the tokens nothing was fitted to": (
            reference(train, train, V, k)
        ),
        f"counted {counted} from train_ids only": reference(val, val, V, k),
        f"left out the smoothing (k): {unseen} the training part never had gets probability 0 and an infinite loss": (
            reference(train, val, V, 0.0)
        ),
    }


def _unigram_mistakes(train, val, V: int, k: float) -> dict[str, float]:
    right = reference_unigram_loss(train, val, V, k)
    counts = np.bincount(_as_ids(train), minlength=V).astype(float)
    v = _as_ids(val)
    return {
        **_baseline_mistakes(
            reference_unigram_loss,
            train,
            val,
            V,
            k,
            counted="the validation tokens: the probabilities come",
            unseen="a token",
        ),
        "added k to each count but only the number of tokens below: divide by N + k·V so the probabilities sum to 1": (
            _nll(((counts + k) / counts.sum())[v])
        ),
        "added up the losses: the baseline is the MEAN over the validation tokens": right * len(v),
        "forgot the minus sign: -ln p is positive": -right,
    }


def _bigram_mistakes(train, val, V: int, k: float) -> dict[str, float]:
    right = reference_bigram_loss(train, val, V, k)
    v, t = _as_ids(val), _as_ids(train)
    table = _bigram_table(train, V, k)
    return {
        **_baseline_mistakes(
            reference_bigram_loss,
            train,
            val,
            V,
            k,
            counted="the pairs of the validation tokens: the table comes",
            unseen="a pair",
        ),
        "looked the pairs up the wrong way round, P[next, previous]: row a of the table is what follows a": _nll(
            table[v[1:], v[:-1]]
        ),
        "divided by the column sums: each ROW (the token before) must sum to 1": _nll(
            _bigram_table(train, V, k, columns=True)[v[:-1], v[1:]]
        ),
        "added k to each count but only one k to the row's total: divide by count(a) + k·V so each row sums to 1": (
            _nll(_bigram_table(train, V, k, denominator_k=False)[v[:-1], v[1:]])
        ),
        "scored the pair that crosses the split (the last training token, then the first validation token): "
        "score only the pairs inside val_ids": _nll(table[np.r_[t[-1:], v[:-1]], v]),
        "returned the unigram's loss: the bigram predicts each token from the one before it": (
            reference_unigram_loss(train, val, V, k)
        ),
        "added up the losses: the baseline is the MEAN over the pairs": right * (len(v) - 1),
        "forgot the minus sign: -ln p is positive": -right,
    }


def _same(a: float, b: float) -> bool:
    """Equal to the checks' tolerance; infinities and NaNs (0 / 0 from a row without counts) equal only
    themselves."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-3 + 1e-4 * abs(b)


def _baseline_cases(hidden: bool) -> list[tuple]:
    """(train, val, V, k) for the small cases: every one has a validation token and pair the training
    part never had, so that leaving out the smoothing shows."""
    g = torch.Generator().manual_seed(1313 if hidden else 13)
    cases = [
        (torch.tensor([0, 1, 2, 1, 0, 1, 2, 2, 3, 1]), torch.tensor([1, 2, 4, 0, 1, 3]), 5, 1.0),
        (torch.randint(0, 6, (300,), generator=g), torch.randint(0, 7, (60,), generator=g), 7, 0.5),
    ]
    if hidden:
        cases += [
            (torch.randint(0, 9, (500,), generator=g), torch.randint(0, 11, (40,), generator=g), 11, 0.1),
            (torch.tensor([3, 3, 1, 0, 2, 3]), torch.tensor([0, 4, 3]), 5, 2.0),
        ]
    return cases


def _baseline_part(
    name: str, fn: Callable, reference: Callable, mistakes: Callable, cases: list[tuple], own: tuple | None, hint: str
) -> None:
    """Call the learner's `fn(train_ids, val_ids, vocab_size, k)` on every case (and on their own ids);
    pass when it equals the reference in all of them, else name the mistake that explains every
    failing case, or give the hint. The unigram may also be averaged over val_ids[1:] (the bigram's
    predictions): both are right."""
    results = []
    for train, val, V, k in cases + ([own] if own is not None else []):
        shown = (
            f"{function_name(name)}(train_ids, val_ids, {V}, k={k}) on your text"
            if own is not None and train is own[0]
            else f"{function_name(name)}({short(train.tolist(), 30)}, {short(val.tolist(), 30)}, {V}, k={k})"
        )
        got = call(function_name(name), fn, train, val, V, k)
        try:
            value = float(np.asarray(to_array(got), dtype=float).reshape(()))
        except (TypeError, ValueError):
            raise CheckFailed(name, f"expected a number, got {_type_name(got)} ({short(got)}) from {shown}.") from None
        right = [reference(train, val, V, k)]
        if name.startswith("unigram_loss"):
            right.append(reference(train, val[1:], V, k))
        results.append((shown, value, right, train, val, V, k))
    failing = [r for r in results if not any(_same(r[1], w) for w in r[2])]
    if not failing:
        detail = f"{len(cases)} cases"
        if own is not None:
            detail += f"; on your text {results[-1][1]:.3f} nats per token"
        passed(name, detail)
        return
    shown, value = failing[0][0], failing[0][1]
    wrong = [(r[1], mistakes(*r[3:])) for r in failing]  # what each mistake gives in every failing case
    for description in wrong[0][1]:
        if all(_same(got, made[description]) for got, made in wrong):
            raise CheckFailed(name, f"{fmt(value)} is not right for {shown}.", f"it looks like you {description}.")
    raise CheckFailed(name, f"{fmt(value)} is not right for {shown}.", hint)


def check_baselines(
    unigram_loss: Callable,
    bigram_loss: Callable,
    train_ids: Any,
    val_ids: Any,
    vocab_size: int,
    *,
    hidden: bool = False,
) -> None:
    """Milestone 3, in two parts: the learner's unigram_loss and bigram_loss(train_ids, val_ids,
    vocab_size, k) on small cases and (visible tests) on their own token ids, against the references."""
    own = None
    if not hidden:
        if not isinstance(train_ids, torch.Tensor) or not isinstance(val_ids, torch.Tensor):
            raise CheckFailed(
                "train_ids, val_ids", "expected the token ids of milestone 2 as tensors.", "finish it first"
            )
        own = (train_ids, val_ids, int(vocab_size), 1.0)
    cases = _baseline_cases(hidden)
    check_all(
        lambda: _baseline_part(
            "unigram_loss" + (" (more cases)" if hidden else ""),
            unigram_loss,
            reference_unigram_loss,
            _unigram_mistakes,
            cases,
            own,
            "P(t) = (count of t in train_ids + k) / (number of training tokens + k·V); the loss is the mean "
            "of -ln P(t) over val_ids",
        ),
        lambda: _baseline_part(
            "bigram_loss" + (" (more cases)" if hidden else ""),
            bigram_loss,
            reference_bigram_loss,
            _bigram_mistakes,
            cases,
            own,
            "P(b | a) = (count of the pair a, b in train_ids + k) / (count of pairs starting with a + k·V); the "
            "loss is the mean of -ln P(b | a) over the neighbouring pairs of val_ids",
        ),
    )


# --- milestone 4: the model beats both baselines -------------------------------------------------------------


def _windows(ids: torch.Tensor, block_size: int, n: int, shift: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` windows of block_size + 1 tokens spread evenly over `ids` (each start moved by `shift`):
    inputs (n, T) and targets (n, T), the inputs shifted by one."""
    last = len(ids) - block_size - 1
    n = max(1, min(n, last + 1))
    starts = torch.linspace(0, last, n).long()
    starts = torch.clamp(starts + shift, 0, last)
    rows = torch.stack([ids[s : s + block_size + 1] for s in starts.tolist()])  # (n, T + 1)
    return rows[:, :-1], rows[:, 1:]


def _device_of(model: Any) -> torch.device:
    """Where the model's weights are (the windows go there), the CPU for a model without any."""
    try:
        return next(iter(model.parameters())).device
    except (StopIteration, AttributeError, TypeError):
        return torch.device("cpu")


def _model_loss(model: Any, x: torch.Tensor, y: torch.Tensor, vocab_size: int) -> float:
    with torch.no_grad():
        out = call("model", model, x.to(_device_of(model)))
    logits = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != (*x.shape, vocab_size):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else _type_name(logits)
        raise CheckFailed(
            "model",
            f"model(idx) should give logits shaped {(*x.shape, vocab_size)}, got {got}.",
            "use course_lib.models.ModernGPT",
        )
    return float(F.cross_entropy(logits.detach().cpu().double().reshape(-1, vocab_size), y.reshape(-1)))


def best_baselines(train_ids: torch.Tensor, x: torch.Tensor, y: torch.Tensor, vocab_size: int) -> dict:
    """The unigram's and the bigram's loss on the predictions (x -> y), each with the best add-k constant
    of SMOOTHING, the counts from `train_ids`."""
    counts = np.bincount(_as_ids(train_ids), minlength=vocab_size).astype(float)
    xs, ys = _as_ids(x), _as_ids(y)
    unigram = min(_nll(((counts + k) / (counts.sum() + k * vocab_size))[ys]) for k in SMOOTHING)
    bigram = min(_nll(_bigram_table(train_ids, vocab_size, k)[xs, ys]) for k in SMOOTHING)
    return {"unigram": unigram, "bigram": bigram}


def check_model(model: Any, tokenizer: Any, train_ids: Any, val_ids: Any, *, hidden: bool = False) -> None:
    """Milestone 4: a ModernGPT over the tokenizer's vocabulary whose loss on WINDOWS windows of the
    learner's validation tokens is below the best unigram and bigram (fitted on their training tokens)
    on the very same predictions, and which was not trained on the validation tokens. `hidden=True`
    scores it on other windows."""
    name = "model" + (" (other windows)" if hidden else "")
    if _type_name(model) != "ModernGPT":
        raise CheckFailed(
            name,
            f"expected a ModernGPT, got {_type_name(model)}.",
            "the project trains lesson 12's decoder: model = ModernGPT(ModernGPTConfig(...)) (course_lib.models)",
        )
    config = model.config
    V, T = int(config.vocab_size), int(config.block_size)
    if V != int(tokenizer.vocab_size):
        raise CheckFailed(
            name,
            f"its vocab_size is {V}, your tokenizer has {int(tokenizer.vocab_size)} tokens.",
            "ModernGPTConfig(vocab_size=tokenizer.vocab_size, ...): one row of logits per token of the tokenizer",
        )
    for label, ids in (("train_ids", train_ids), ("val_ids", val_ids)):
        if not isinstance(ids, torch.Tensor) or ids.ndim != 1 or len(ids) < T + 2:
            raise CheckFailed(
                name, f"{label} is not a 1-D tensor of more than {T + 1} token ids.", "finish milestone 2"
            )
    shift = T // 2 if hidden else 0
    x, y = _windows(val_ids, T, WINDOWS, shift)
    val_loss = _model_loss(model, x, y, V)
    xt, yt = _windows(train_ids, T, WINDOWS, shift)
    train_loss = _model_loss(model, xt, yt, V)
    bars = best_baselines(train_ids, x, y, V)
    scored = f"on {x.numel():,} validation predictions"
    if train_loss - val_loss > LEAK_MARGIN:
        raise CheckFailed(
            name,
            f"it does better on the validation tokens ({val_loss:.3f} nats) than on the training tokens "
            f"({train_loss:.3f}).",
            "it looks like it was trained on the validation tokens: the batches of the 'train' split must come "
            "from train_ids only (make_get_batch(train_ids, val_ids, ...))",
        )
    if val_loss >= bars["unigram"]:
        raise CheckFailed(
            name,
            f"its validation loss, {val_loss:.3f} nats per token {scored}, is no better than the unigram's "
            f"{bars['unigram']:.3f}.",
            f"did it train? An untrained model scores about ln {V} = {math.log(V):.2f}; train it with "
            "training.train on batches of train_ids (lesson 11, section 5)",
        )
    if val_loss >= bars["bigram"]:
        raise CheckFailed(
            name,
            f"its validation loss, {val_loss:.3f} nats per token {scored}, beats the unigram's "
            f"{bars['unigram']:.3f} but not the bigram's {bars['bigram']:.3f}.",
            "train it longer, or with a higher learning rate; in a short run a separate de-embedding "
            "(tie_weights=False) learns the bigram's statistics faster than a tied one",
        )
    passed(
        name,
        f"{val_loss:.3f} nats per token {scored}: below the bigram's {bars['bigram']:.3f} and the "
        f"unigram's {bars['unigram']:.3f}",
    )


# --- exercise 5: losses per token and per character -------------------------------------------------------


def check_per_character(a_bits_per_char: Any, b_bits_per_char: Any, better: Any) -> None:
    """Exercise 5: two models' losses per token turned into bits per character, and which is better."""
    check_all(
        lambda: SEALS.check(
            "a_bits_per_char",
            a_bits_per_char,
            hint="model A reads one character per token: its loss per character is its loss per token; "
            "then nats / ln 2 = bits",
        ),
        lambda: SEALS.check(
            "b_bits_per_char",
            b_bits_per_char,
            hint="one token of B covers 2.5 characters: divide its loss per token by 2.5, then by ln 2 for bits",
        ),
        lambda: SEALS.check(
            "better",
            better.strip().upper() if isinstance(better, str) else better,
            "text",
            hint='answer "A" or "B": the one with the lower loss per character',
        ),
    )


# --- milestones 6 and 7: sampling, and a cache that changes no token --------------------------------------


def _prompt(val_text: str, hidden: bool) -> str:
    """A prompt from the learner's own held-out text: 24 characters of it."""
    start = len(val_text) // 2 if hidden else 0
    piece = val_text[start : start + 24]
    return piece if piece.strip() else "The "


def _complete(fn: Callable, prompt: str, n: int, **kwargs) -> str:
    out = call("complete", fn, prompt, n, **kwargs)
    if not isinstance(out, str):
        raise CheckFailed(
            "complete",
            f"expected the text (a str), got {_type_name(out)} ({short(out)}).",
            "decode the ids that generate returns: tokenizer.decode(out[0].tolist())",
        )
    return out


def check_sampling(complete: Callable, val_text: str, *, hidden: bool = False) -> None:
    """Milestone 5: complete(prompt, max_new_tokens, seed=...) returns the prompt and a sampled
    continuation, the same for the same seed and different for another seed; with 0 new tokens, the
    prompt alone."""
    name = "complete" + (" (another prompt)" if hidden else "")
    prompt = _prompt(val_text, hidden)
    n = 40 if hidden else 30
    first = _complete(complete, prompt, n, seed=0)
    if not first.startswith(prompt):
        hint = (
            "return the prompt followed by the new text: generate gives back the prompt's ids and the new ones"
            if prompt not in first
            else "the text should START with the prompt: decode all of generate's output, prompt included"
        )
        raise CheckFailed(name, f"complete({prompt!r}, {n}, seed=0) does not start with the prompt.", hint)
    if len(first) == len(prompt):
        raise CheckFailed(name, f"complete({prompt!r}, {n}, seed=0) added no text.", "generate max_new_tokens tokens")
    if _complete(complete, prompt, 0, seed=0) != prompt:
        raise CheckFailed(
            name,
            f"complete({prompt!r}, 0, seed=0) should give the prompt alone.",
            "pass max_new_tokens on to generate",
        )
    if _complete(complete, prompt, n, seed=0) != first:
        raise CheckFailed(
            name,
            "two calls with seed=0 gave different text.",
            "make a generator from the seed inside complete, torch.Generator().manual_seed(seed), and pass it "
            "to generate(..., generator=...): a generator made once outside has moved on after the first call",
        )
    if _complete(complete, prompt, n, seed=1) == first:
        raise CheckFailed(
            name,
            "seed=0 and seed=1 gave the same text.",
            "sample (temperature > 0) with a generator seeded from `seed`: it looks like you decoded greedily "
            "(temperature=0) or ignored the seed",
        )
    passed(
        name, f"{len(first) - len(prompt)} characters after a prompt from your validation text, the same for one seed"
    )


def check_cache(
    complete: Callable,
    model: Any,
    tokenizer: Any,
    val_text: str,
    cached_text: Any,
    plain_text: Any,
    *,
    hidden: bool = False,
) -> None:
    """Milestone 7: the learner's two texts, generated with and without the cache past the model's
    attention window, are the same; and so are those the check asks `complete` for (use_cache=True
    against use_cache=False, the same seed, past the window, so that the cache has to roll)."""
    name = "complete" + (" (longer, other seeds)" if hidden else "")
    config = model.config
    window = config.window
    span = int(window) if window is not None else int(config.block_size)
    if not hidden:
        for label, value in (("cached_text", cached_text), ("plain_text", plain_text)):
            if not isinstance(value, str):
                raise CheckFailed(
                    label,
                    f"expected the generated text (a str), got {_type_name(value)} ({short(value)}).",
                    "keep what complete(prompt, n, seed=..., use_cache=...) returns",
                )
        if cached_text != plain_text:
            at = _first_difference(cached_text, plain_text)
            raise CheckFailed(
                "cached_text, plain_text",
                f"your two texts differ from character {at} on.",
                "generate both from the same prompt, with the same number of tokens and the same seed, one "
                "with use_cache=True and one with use_cache=False",
            )
        n_tokens = len(call("tokenizer", tokenizer.encode, cached_text))
        if n_tokens <= span:
            raise CheckFailed(
                "cached_text, plain_text",
                f"your texts are {n_tokens} tokens long, within the model's window of {span}.",
                f"generate past the window (more than {span} tokens in all), where the cache has to drop its "
                "oldest keys and values as it goes (lesson 12, section 3)",
            )
    n = span + (40 if hidden else 16)
    prompt = _prompt(val_text, hidden)
    seeds = (2, 3) if hidden else (0, 1)
    for seed in seeds:
        with_cache = _complete(complete, prompt, n, seed=seed, use_cache=True)
        without = _complete(complete, prompt, n, seed=seed, use_cache=False)
        if with_cache != without:
            at = _first_difference(with_cache, without)
            again = _complete(complete, prompt, n, seed=seed, use_cache=False)
            hint = (
                "two calls without the cache differ too: make the generator from the seed inside complete"
                if again != without
                else "pass use_cache on to generate(..., use_cache=use_cache) and change nothing else: the same "
                "model, prompt, settings and seed must give the same tokens with the cache as without"
            )
            raise CheckFailed(
                name,
                f"with seed={seed} the text with use_cache=True differs from use_cache=False from character {at} on.",
                hint,
            )
    new = len(with_cache) - len(prompt)
    passed(name, f"the same {new} characters with and without the cache, past the {span}-token window")


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


__all__ = [
    "best_baselines",
    "check_per_character",
    "check_baselines",
    "check_cache",
    "check_model",
    "check_sampling",
    "check_split",
    "check_tokenizer",
    "reference_bigram_loss",
    "reference_unigram_loss",
]
