"""Checks for the lesson 04 exercises (word vectors and word2vec): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from .core import CheckFailed, NotAttempted, Seals, call, check_all, check_close, check_tensor, passed
from .helpers import short

# The answers worked out by hand (exercises 1 to 4) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson04` from solutions/seals/lesson04.py.
SEALS = Seals({
    "scores_cat": (3, "33f796031c36cee03ee2", {
        "dropped the minus sign of dog's vector [-1, 0]": "bf3e54121301abb0d782",
    }),
    "p_sat": (3, "3de53936ceb4fbcd6380", {
        "divided the scores themselves (3 / (3 + 2 + 1 - 1)) instead of their exponentials": "d37a11b4da5fb9820764",
        "left sat out of the denominator: the sum runs over every word, sat included": "ea6e3c53c93adf94f706",
        "left dog out of the denominator: the sum runs over every context word, dog included": "eb7ba61d36326071cbbd",
        "gave P(the | cat), the second word": "e029b4b11988b22c0da5",
        "dropped the minus sign of dog's vector, so its score came out +1": "b0c83e18b534aed5afed",
        "rounded to 2 decimals; keep the exact value (let Python do the arithmetic)": "47e6efc360d019fca71b",
    }),
    "n_pairs": (None, "e5684cecf681cfeb2f04", {
        "counted each pair once (or looked to one side only): every word is a centre in turn, so (fox, jumps) and "
        "(jumps, fox) are two pairs":
            "70faf7620f430ccf39f4",
        "gave every word 4 neighbours: near the ends of the sentence the window is cut off": "aa744c80d19d824e775e",
        "paired each word with itself too": "1d593ceab58ef56f8e47",
        "used a window of 3": "7637489d8ca762b59936",
        "used a window of 1": "c8c5b25b9f0dd1f48d6b",
        "stopped one word short on the right, as range(i - 2, i + 2) does: the window runs from i - 2 to i + 2 "
        "inclusive, range(i - 2, i + 3)":
            "3613fbf9b1162c25fe88",
    }),
    "contexts_over": (None, "2a910bca279cfe65f1ca", {
        "included 'over' itself; a word is not its own context": "0cd9533081e7b8393cd8",
        "used a window of 1 (one word on each side); the window is 2": "395b9285a015e2e5e8cb",
        "used a window of 3": "06d7905c556e1e910295",
        "looked to the right only; the window reaches 2 words to each side": "7c6dda5683fb5f1a7543",
        "looked to the left only; the window reaches 2 words to each side": "10b2a28720ee2dbfe644",
        "stopped one word short on the right, as range(i - 2, i + 2) does: 'lazy' is 2 words to the right of 'over'":
            "28b459ae1f9d33fe97bd",
    }),
    "n_cbow": (None, "efef19c93358384ac565", {
        "counted the skip-gram pairs; CBOW makes one example per centre word (its whole window predicts it)":
            "d47eb4fe104c6b92bf30",
        "counted only the centre words with a full window of 2 on each side; CBOW uses every position, with a shorter "
        "window at the ends":
            "3a7d571e441bd31cb6cb",
    }),
    "p_noise": (3, "17161aa93949fef4f7e7", {
        "forgot the power 0.75: that is the plain unigram distribution": "59aefafa905d0b2dbd6a",
        "used the square root (power 0.5) instead of the power 0.75": "c9ea1935349226309704",
        "did not normalise: the three probabilities must add up to 1": "1da09c2e93bc5529b86f",
        "raised the counts to the power 4/3 instead of 3/4": "8b0755b0340c610bfe6b",
        "raised the probabilities, not the counts, to 0.75 and did not normalise again": "7931eceb8cd96ef9945c",
    }),
    "loss_pair": (3, "665838dfff4144e4b982", {
        "used log σ(s_k) for the noise words; they need log σ(-s_k) (the answer for a noise word is 'no')":
            "a81c7adfa0f74ac19d40",
        "dropped the minus sign in front of the logs: a loss is a negative log-likelihood, always >= 0":
            "1b7a4e8374aa9132c454",
        "left out the noise words: the loss has one term for the real pair and one for each noise word":
            "7fce22cfdbe1b52e0933",
        "used log base 10; the course's logs are natural (math.log)": "1b0010fe263ce6fd4040",
    }),
    "dloss_ds": (3, "34284f29b80e4caf87f8", {
        "gave σ(s); the derivative of -log σ(s) is σ(s) - 1": "a767af69accb188f33d2",
        "gave 1 - σ(s), the derivative of +log σ(s); the loss has a minus sign in front": "3f946473ed1f3f23fe28",
        "differentiated with respect to a noise word's score": "02e7773110c2d946fcbc",
    }),
    "grad_centre": (3, "20f14a0dbef2269a90a0", {
        "used σ(s_k) - 1 for the noise words too; their derivative is σ(s_k)": "7dc672054d303071752d",
        "got every sign flipped: that is minus the gradient (the direction of the step, not the gradient)":
            "d9443dce912ff2efb600",
        "left out the noise words' terms σ(s_k) u_k": "6d781d64374bbf1b5e74",
        "used the centre vector v instead of the context vectors u in the chain rule": "8e8959abdf66dc282198",
    }),
    "noise_score_moves": (None, "cc0814a3c248c635f5eb", {
        "said 'up': the loss grows with s_1 (its derivative σ(s_1) is positive), and gradient descent steps against "
        "the gradient, so s_1 goes down":
            "04c99642f556fa378fb0",
    }),
})


# --- exercise 1: P(sat | cat) by hand -------------------------------------------------------------------


def check_softmax_by_hand(scores_cat: Any, p_sat: Any) -> None:
    """v_cat = [1, 2]; context vectors sat [1, 1], the [0, 1], mat [1, 0], dog [-1, 0]."""
    check_all(
        lambda: SEALS.check("scores_cat", scores_cat, "numbers",
                            "one dot product per context word, in the order sat, the, mat, dog: u_w · v_cat = "
                            "u_w[0] * 1 + u_w[1] * 2", shape=(4,),
                            shape_hint="one score per context word: four numbers, in the order sat, the, mat, dog"),
        lambda: SEALS.check("p_sat", p_sat, "number",
                            "P(sat | cat) = exp(score of sat) / (sum of exp(score) over all four words)"),
    )


# --- exercise 2: the pairs of a window, by hand ----------------------------------------------------------


def _as_words(name: str, value: Any) -> str:
    """A list (or tuple or set) of words as one text, sorted, so that any order passes."""
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable?")
    if isinstance(value, str):
        raise CheckFailed(name, f"expected a list of words such as ['the', 'fox'], got the string {value!r}.",
                          "split it into words, or write the list out: ['...', '...']")
    if not isinstance(value, (list, tuple, set)) or not all(isinstance(w, str) for w in value):
        raise CheckFailed(name, f"expected a list of words (strings), got {short(value)}.")
    words = [w.strip().lower() for w in value]
    if len(set(words)) != len(words):
        raise CheckFailed(name, f"{short(list(value))} lists a word twice.", "list each context word once.")
    return " ".join(sorted(words))


def _check_words(name: str, value: Any, hint: str) -> None:
    """A hand-written list of words, compared in any order; a failure shows the learner's own list."""
    SEALS.check(name, _as_words(name, value), "text", hint, shown=short(list(value)))


def check_window_by_hand(n_pairs: Any, contexts_over: Any, n_cbow: Any) -> None:
    """ "a fox jumps over the lazy dog" with a window of 2: skip-gram pairs, the contexts of "over", CBOW examples."""
    check_all(
        lambda: SEALS.check("n_pairs", n_pairs, "count",
                            "count, for each word in turn, the neighbours at most 2 positions to its left and to its "
                            "right"),
        lambda: _check_words("contexts_over", contexts_over,
                             "the context of a centre word is every word at most 2 positions away from it, on "
                             "both sides"),
        lambda: SEALS.check("n_cbow", n_cbow, "count", "CBOW predicts each centre word once, from its whole window"),
    )


# --- exercise 3: the noise distribution ------------------------------------------------------------------


def check_noise_by_hand(p_noise: Any) -> None:
    """Counts the: 81, cat: 16, sat: 1; noise words are drawn with probability proportional to count ** 0.75."""
    SEALS.check("p_noise", p_noise, "numbers",
                "raise each count to the power 0.75 (81 ** 0.75 = 27), then divide by the sum of the three",
                shape=(3,), shape_hint="one probability per word of the corpus: [P(the), P(cat), P(sat)]")


# --- exercise 4: the negative-sampling loss of one pair, and its gradient --------------------------------


def check_sgns_by_hand(loss_pair: Any, dloss_ds: Any, grad_centre: Any, noise_score_moves: Any) -> None:
    """v_c = [1, 2]; true context u_o = [1, 0]; noise words u_1 = [0, 1], u_2 = [-1, 1]."""

    def direction() -> None:
        if not isinstance(noise_score_moves, str) or noise_score_moves.strip().lower() not in ("up", "down"):
            raise CheckFailed("noise_score_moves", f"expected 'up' or 'down', got {short(noise_score_moves)}.")
        SEALS.check("noise_score_moves", noise_score_moves.strip().lower(), "text",
                    "look at the sign of d loss / d s_1 and remember that gradient descent steps against the gradient")

    check_all(
        lambda: SEALS.check("loss_pair", loss_pair, "number",
                            "loss = -log σ(s) - log σ(-s_1) - log σ(-s_2), with s = u_o · v_c, s_k = u_k · v_c and "
                            "natural logs"),
        lambda: SEALS.check("dloss_ds", dloss_ds, "number",
                            "differentiate -log σ(s) with respect to s: d/ds log σ(s) = 1 - σ(s)"),
        lambda: SEALS.check("grad_centre", grad_centre, "numbers",
                            "d loss / d v_c = (σ(s) - 1) u_o + σ(s_1) u_1 + σ(s_2) u_2", shape=(2,),
                            shape_hint="the gradient with respect to v_c has one entry per entry of v_c = [1, 2]: "
                                       "two numbers"),
        direction,
    )


# --- exercise 5: the full-softmax loss -------------------------------------------------------------------


def reference_softmax_loss(v: torch.Tensor, U: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """-log P(o | c) with P = softmax over the whole vocabulary: v (B, d), U (V, d), o (B,) -> (B,)."""
    return F.cross_entropy(v @ U.T, o, reduction="none")  # (B,)


def _softmax_loss_mistakes(v: torch.Tensor, U: torch.Tensor, o: torch.Tensor) -> dict[str, torch.Tensor]:
    scores = v @ U.T  # (B, V)
    rows = torch.arange(len(o))
    log_p = torch.log_softmax(scores, dim=-1)[rows, o]  # (B,)
    return {
        "returned log P(o | c) itself; the loss is its negative, -log P (positive, and 0 for a perfect "
        "prediction)": log_p,
        "forgot the log: returned -P(o | c) instead of -log P(o | c)": -log_p.exp(),
        "took the softmax over the wrong axis (over the batch, dim=0); each row of scores (one centre word) "
        "must be normalised over the vocabulary, dim=-1": -torch.log_softmax(scores, dim=0)[rows, o],
        "dropped the log-sum-exp: the loss is -score_o + log Σ_w exp(score_w), not just -score_o": -scores[rows, o],
    }


def _softmax_loss_cases(hidden: bool) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(4)
    cases = [
        ("4 centre words, d = 3, V = 6", torch.randn(4, 3, generator=g), torch.randn(6, 3, generator=g),
         torch.tensor([0, 5, 2, 2])),
        ("large scores (up to about 1,000): exp overflows unless the maximum is subtracted",
         50 * torch.randn(3, 3, generator=g), 10 * torch.randn(6, 3, generator=g), torch.tensor([1, 4, 0])),
    ]
    if hidden:
        cases += [
            ("8 centre words, d = 16, V = 50", torch.randn(8, 16, generator=g), torch.randn(50, 16, generator=g),
             torch.randint(0, 50, (8,), generator=g)),
            ("one centre word", torch.randn(1, 5, generator=g), torch.randn(7, 5, generator=g), torch.tensor([6])),
        ]
    return cases


def check_softmax_loss(fn: Callable, name: str = "softmax_loss", *, hidden: bool = False) -> None:
    """The learner's `softmax_loss(v, U, o) -> (B,)` against F.cross_entropy, forward and gradients."""
    n = 0
    for description, v, U, o in _softmax_loss_cases(hidden):
        label = f"{name} ({description})"
        try:
            out = call(name, fn, v.clone(), U.clone(), o.clone())
        except NotAttempted:
            raise
        except CheckFailed as err:
            hint = None
            if "cannot be multiplied" in err.problem:
                hint = "v is (B, d) and U is (V, d): the scores are v @ U.T, of shape (B, V)"
            raise CheckFailed(name, f"{err.problem} (case: {description})", hint) from None
        if out is None:
            raise CheckFailed(label, "got None: did you forget to `return` the losses?")
        check_tensor(label, out, "", "compute with torch operations (@, torch.logsumexp, ...); if you used numpy, "
                                     "convert back with torch.as_tensor")
        want = reference_softmax_loss(v, U, o)
        if out.dim() == 0:
            raise CheckFailed(label, f"expected one loss per centre word, shape {tuple(want.shape)}, got a single "
                                     "number.",
                              "it looks like you averaged (or summed) over the batch: return the (B,) losses, one "
                              "per pair")
        if tuple(out.shape) == (len(o), len(o)):
            raise CheckFailed(label, f"expected shape {tuple(want.shape)}, got {tuple(out.shape)}.",
                              "scores[:, o] takes the columns o for EVERY row; each row needs only its own column: "
                              "scores[torch.arange(B), o] (or scores.gather(1, o[:, None]))")
        if not torch.isfinite(out).all() and torch.isfinite(want).all():
            raise CheckFailed(label, "the result contains inf or NaN.",
                              "exp of a large score overflows: subtract each row's maximum before exp (log Σ exp(s) = "
                              "m + log Σ exp(s - m)), or use torch.logsumexp(scores, dim=-1)")
        check_close(label, out, want, atol=1e-4, rtol=1e-4, mistakes=_softmax_loss_mistakes(v, U, o), quiet=True,
                    hint="loss = -scores[b, o_b] + log Σ_w exp(scores[b, w]), with scores = v @ U.T")
        # Gradients: backpropagate through the learner's own output.
        v_, U_ = v.clone().requires_grad_(), U.clone().requires_grad_()
        out = call(name, fn, v_, U_, o.clone())
        if not (isinstance(out, torch.Tensor) and out.requires_grad):
            raise CheckFailed(label, "the output does not depend on v and U through torch operations, so it has no "
                                     "gradient.",
                              "stay in torch from start to end: no .item(), .numpy(), .detach() or Python floats")
        weights = torch.linspace(0.5, 1.5, len(o))  # a weighted sum checks every row's gradient
        (out * weights).sum().backward()
        v_r, U_r = v.clone().requires_grad_(), U.clone().requires_grad_()
        (reference_softmax_loss(v_r, U_r, o) * weights).sum().backward()
        for part, got, ref in (("d loss / d v", v_.grad, v_r.grad), ("d loss / d U", U_.grad, U_r.grad)):
            if got is None:
                raise CheckFailed(label, f"{part}: no gradient reached it.",
                                  "use v and U themselves, not copies made with .detach()")
            check_close(f"{label}, {part}", got, ref, atol=1e-4, rtol=1e-4, quiet=True)
        n += 1
    passed(name, f"{n} cases, values and gradients")


# --- exercise 6: an analogy by vector arithmetic -------------------------------------------------------

# A made-up table of 4-dimensional word vectors (roughly [royal, female, adult, noise]). "castle" has a long
# vector: it wins every ranking by plain dot product, none by cosine. "princess" has a long vector too, so
# ranking by Euclidean distance to b - a + c (a point, not a direction) misses it in girl - boy + prince.
ANALOGY_TABLE = {
    "king": [0.7, 0.3, 1.1, 0.3], "queen": [0.9, 0.8, 1.0, 0.1], "man": [0.4, 0.2, 1.0, 0.3],
    "woman": [0.1, 1.0, 0.9, 0.1], "prince": [1.0, 0.2, 0.2, 0.3], "princess": [2.4, 1.2, 0.4, 0.8],
    "boy": [0.2, 0.0, 0.4, 0.5], "girl": [0.3, 1.1, 0.1, 0.2], "castle": [2.9, 1.8, 1.5, 1.0],
}
ANALOGY_CASES = [("man", "king", "woman"), ("boy", "girl", "prince")]
HIDDEN_ANALOGY_CASES = [("king", "prince", "queen"), ("man", "boy", "woman"), ("girl", "princess", "boy"),
                        ("woman", "man", "queen")]


def reference_analogy(table: Mapping[str, Sequence[float]], a: str, b: str, c: str, *, exclude_inputs: bool = True,
                      score: str = "cosine", swapped: bool = False) -> str:
    """The word nearest to b - a + c by cosine similarity, a, b and c left out (and the usual slips, by flag:
    score="dot" ranks by the plain dot product, score="euclidean" by the distance to the point b - a + c)."""
    vec = {w: torch.tensor(v, dtype=torch.float64) for w, v in table.items()}
    target = (vec[a] - vec[b] + vec[c]) if swapped else (vec[b] - vec[a] + vec[c])
    best, best_score = None, -math.inf
    for word, x in vec.items():  # the table's order breaks ties
        if exclude_inputs and word in (a, b, c):
            continue
        if score == "cosine":
            s = float(F.cosine_similarity(target, x, dim=0))
        elif score == "dot":
            s = float(target @ x)
        else:  # "euclidean": the nearest point is the one with the smallest distance
            s = -float((target - x).norm())
        if s > best_score:
            best, best_score = word, s
    return best


_ANALOGY_MISTAKES = {
    "did not leave out the three input words: b - a + c is often nearest to b or c itself": dict(exclude_inputs=False),
    "ranked by the plain dot product, which favours long vectors (castle); rank by cosine similarity":
        dict(score="dot"),
    "took the word nearest to the point b - a + c (Euclidean distance), which penalises a long vector such as "
    "princess's; rank by cosine similarity, the angle between the directions": dict(score="euclidean"),
    "computed a - b + c; the analogy 'a is to b as c is to ?' is b - a + c": dict(swapped=True),
}


def _rotated_table(table: Mapping[str, Sequence[float]], seed: int) -> dict[str, list[float]]:
    """The same table turned by a random rotation and scaled: cosines, and so the answers, do not change."""
    q, _ = torch.linalg.qr(torch.randn(4, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return {w: (3.0 * torch.tensor(v, dtype=torch.float64) @ q).tolist() for w, v in table.items()}


def check_analogy(fn: Callable, name: str = "solve_analogy", *, hidden: bool = False) -> None:
    """The learner's `solve_analogy(table, a, b, c) -> word` against `reference_analogy`."""
    tables = [("the table above", ANALOGY_TABLE)]
    cases = list(ANALOGY_CASES)
    if hidden:
        cases += HIDDEN_ANALOGY_CASES
        tables.append(("the table above, rotated and scaled", _rotated_table(ANALOGY_TABLE, 0)))
    n = 0
    for table_name, table in tables:
        for a, b, c in cases:
            shown = f"{name}(table, {a!r}, {b!r}, {c!r}) with {table_name}"
            got = call(name, fn, copy.deepcopy(table), a, b, c)
            if isinstance(got, (tuple, list)) and got and isinstance(got[0], str):
                raise CheckFailed(shown, f"expected one word (a str), got {short(got)}.",
                                  "return only the best word, e.g. return best")
            if not isinstance(got, str):
                raise CheckFailed(shown, f"expected a word (a str), got {short(got)}.")
            want = reference_analogy(table, a, b, c)
            if got == want:
                n += 1
                continue
            hint = ("form b - a + c, compute its cosine similarity with every other word's vector, and return the "
                    "word with the largest")
            for description, flags in _ANALOGY_MISTAKES.items():
                if got == reference_analogy(table, a, b, c, **flags) != want:
                    hint = f"it looks like you {description}."
                    break
            raise CheckFailed(shown, f"returned {got!r}, which is not the nearest word to b - a + c.", hint)
    passed(name, f"{n} analogies")


# --- exercise 7: the SGD step that loses updates -------------------------------------------------------


def reference_sgd_update(E: torch.Tensor, ids: torch.Tensor, grads: torch.Tensor, lr: float) -> torch.Tensor:
    """Row ids[i] of E moves by -lr * grads[i]; a row used twice moves twice."""
    return E.clone().index_add_(0, ids, grads, alpha=-lr)  # (V, d)


def _sgd_update_mistakes(E: torch.Tensor, ids: torch.Tensor, grads: torch.Tensor, lr: float) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        E = E.detach()
        lost = E.clone()
        lost[ids] -= lr * grads  # one of the steps of a repeated row is lost
        both = lost.clone().index_add_(0, ids, grads, alpha=-lr)  # the buggy line kept, index_add_ added after it
        counts = torch.bincount(ids, minlength=E.shape[0]).clamp(min=1).to(E.dtype)  # (V,)
        mean = E - lr * torch.zeros_like(E).index_add_(0, ids, grads) / counts[:, None]
        mistakes = {
            "kept the bug: E[ids] -= ... writes each row once, so a word used twice in the batch gets only one of its "
            "steps; add every step with E.index_add_(0, ids, -lr * grads)": lost,
            "kept the buggy line E[ids] -= lr * grads and added index_add_ as well: every step is then taken twice "
            "(or more); keep only the index_add_": both,
            "moved up the gradient: gradient descent subtracts lr * grads": reference_sgd_update(E, ids, -grads, lr),
            "averaged the steps of a repeated row: each occurrence is a pair of its own, so its steps add up": mean,
        }
        if lr != 1.0:  # with lr = 1 leaving it out changes nothing
            mistakes["forgot the learning rate: each row moves by -lr * grads[i]"] = reference_sgd_update(
                E, ids, grads, 1.0)
    return mistakes


def _sgd_cases(hidden: bool) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    # Learning rates other than 0.5: there, twice the step (2 lr) and no learning rate (1) would look alike.
    g = torch.Generator().manual_seed(7)
    cases = [("5 words, a batch of 4 that uses row 1 twice", torch.randn(5, 3, generator=g), torch.tensor([1, 3, 1, 4]),
              torch.randn(4, 3, generator=g), 0.3)]
    if hidden:
        cases += [
            ("row 2 three times", torch.randn(6, 2, generator=g), torch.tensor([2, 2, 0, 2]),
             torch.randn(4, 2, generator=g), 0.1),
            ("no repeats", torch.randn(4, 5, generator=g), torch.tensor([3, 0]), torch.randn(2, 5, generator=g), 0.7),
        ]
    return cases


_IN_PLACE_HINT = ("return a new matrix and leave the caller's E as it was: start from a copy, E = E.clone() (as "
                  "buggy_sgd_update does), or use the out-of-place torch.index_add(E, 0, ids, grads, alpha=-lr)")


def _changes_its_input(name: str, fn: Callable, E: torch.Tensor, ids: torch.Tensor, grads: torch.Tensor,
                       lr: float) -> bool:
    """Whether fn updates the E it is given instead of a copy. Two probes: E compared before and after the
    call (which sees every in-place change when fn runs in this process), and a call with an E that
    requires grad, on which torch refuses an in-place change (which works also when `course grade` runs
    fn in the learner's own kernel and so never sees that kernel's copy of E change)."""
    given = E.clone()
    call(name, fn, given, ids.clone(), grads.clone(), lr)
    if not torch.equal(given, E):
        return True
    try:
        with torch.enable_grad():
            call(name, fn, E.clone().requires_grad_(), ids.clone(), grads.clone(), lr)
    except CheckFailed as err:  # any other failure (a numpy round trip, say) is not this probe's business
        text = err.problem.lower()
        return "leaf variable" in text and "in-place" in text
    return False


def check_sgd_update(fn: Callable, name: str = "sgd_update", *, hidden: bool = False) -> None:
    """The learner's `sgd_update(E, ids, grads, lr) -> E'` against `reference_sgd_update`, and E left unchanged."""
    for description, E, ids, grads, lr in _sgd_cases(hidden):
        label = f"{name} ({description})"
        got = call(name, fn, E.clone(), ids.clone(), grads.clone(), lr)
        if got is None:
            raise CheckFailed(label, "got None: did you forget to `return` the updated matrix?")
        check_tensor(label, got)
        check_close(label, got.detach(), reference_sgd_update(E, ids, grads, lr),
                    mistakes=_sgd_update_mistakes(E, ids, grads, lr), quiet=True,
                    hint="start from a copy of E and add -lr * grads[i] to row ids[i] for every i")
        if _changes_its_input(name, fn, E, ids, grads, lr):
            raise CheckFailed(label, "the values are right, but it changed the E it was given: the caller's matrix "
                                     "must stay as it was.", _IN_PLACE_HINT)
    passed(name)
