"""The lesson 04 exercise checks: right answers pass however they are written, each listed mistake
gets its hint, every wrong part of a multi-part answer is reported, no failure shows a hand-worked
answer, and the references agree with course_lib.word2vec and torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from grading_helpers import fails_with

from course_lib import checks, word2vec
from course_lib.checks import lesson04


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


E4 = [math.exp(s) for s in (3, 2, 1, -1)]
P_SAT = E4[0] / sum(E4)
LOSS = -math.log(sig(1)) - math.log(sig(-2)) - math.log(sig(-1))
GRAD = [sig(1) - 1 - sig(1), sig(2) + sig(1)]


def assert_hidden(text: str, *values: float, given=()) -> None:
    for g in given:  # the learner's own answer may be quoted back
        text = text.replace(repr(g), "").replace(str(g), "")
    for value in values:
        for shown in (f"{value:.3f}", f"{value:.2f}", f"{value:.4g}"):
            assert shown not in text, f"the message shows {shown}:\n{text}"


# --- exercise 1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores, p",
    [
        ([3, 2, 1, -1], P_SAT),
        ((3.0, 2.0, 1.0, -1.0), round(P_SAT, 4)),
        (torch.tensor([3.0, 2, 1, -1]), torch.tensor(P_SAT)),
        (np.array([3, 2, 1, -1]), np.float32(P_SAT)),
    ],
)
def test_softmax_by_hand_passes_right_answers_written_any_way(scores, p):
    lesson04.check_softmax_by_hand(scores, p)


@pytest.mark.parametrize(
    "scores, p, match",
    [
        ([3, 2, 1, 1], P_SAT, "dropped the minus sign of dog"),
        ([3, 2, 1, -1], 0.6, "divided the scores themselves"),
        ([3, 2, 1, -1], E4[0] / sum(E4[1:]), "left sat out of the denominator"),
        ([3, 2, 1, -1], E4[0] / sum(E4[:3]), "left dog out of the denominator"),
        ([3, 2, 1, -1], E4[1] / sum(E4), "P(the | cat)"),
        ([3, 2, 1, -1], E4[0] / (sum(E4[:3]) + math.e), "so its score came out +1"),
        ([3, 2, 1, -1], round(P_SAT, 2), "rounded to 2 decimals"),
        ([3, 2, 1, -1], 0.5, "exp(score of sat)"),
        ([3, 2, 1], P_SAT, "expected shape (4,), got (3,).\n  Hint: one score per context word"),
        ([3, 2, 1, -1], "0.66", "expected a number"),
    ],
)
def test_softmax_by_hand_names_the_mistakes_without_the_answer(scores, p, match):
    text = fails_with(lesson04.check_softmax_by_hand, scores, p, match=match)
    assert_hidden(text, P_SAT, given=(p,))


def test_softmax_by_hand_reports_both_wrong_parts():
    text = fails_with(lesson04.check_softmax_by_hand, [3, 2, 1, 1], 0.6, match="dropped the minus sign")
    assert "scores_cat: [3, 2, 1, 1] is not right" in text and "p_sat: 0.6 is not right" in text, text


# --- exercise 2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_pairs, contexts, n_cbow",
    [
        (22, ["fox", "jumps", "the", "lazy"], 7),
        (22.0, ("lazy", "the", "jumps", "fox"), np.int64(7)),
        (np.int64(22), {"fox", "jumps", "the", "lazy"}, 7.0),
        (22, ["Fox", " jumps", "the", "lazy"], 7),
    ],
)
def test_window_by_hand_passes_right_answers_written_any_way(n_pairs, contexts, n_cbow):
    lesson04.check_window_by_hand(n_pairs, contexts, n_cbow)


RIGHT_CONTEXTS = ["fox", "jumps", "the", "lazy"]


@pytest.mark.parametrize(
    "n_pairs, contexts, n_cbow, match",
    [
        (11, RIGHT_CONTEXTS, 7, "counted each pair once"),
        (28, RIGHT_CONTEXTS, 7, "near the ends of the sentence the window is cut off"),
        (29, RIGHT_CONTEXTS, 7, "paired each word with itself"),
        (30, RIGHT_CONTEXTS, 7, "window of 3"),
        (12, RIGHT_CONTEXTS, 7, "window of 1"),
        (23, RIGHT_CONTEXTS, 7, "for each word in turn"),
        (22.5, RIGHT_CONTEXTS, 7, "whole number"),
        (22, RIGHT_CONTEXTS + ["over"], 7, "included 'over' itself"),
        (22, ["jumps", "the"], 7, "window of 1"),
        (22, ["a", "fox", "jumps", "the", "lazy", "dog"], 7, "window of 3"),
        (22, ["the", "lazy"], 7, "right only"),
        (22, ["fox", "jumps"], 7, "left only"),
        (17, RIGHT_CONTEXTS, 7, "range(i - 2, i + 2)"),
        (22, ["fox", "jumps", "the"], 7, "range(i - 2, i + 2)"),
        (22, ["fox", "jumps", "the", "dog"], 7, "at most 2 positions away"),
        (22, "fox jumps the lazy", 7, "got the string"),
        (22, ["fox", "fox", "the", "lazy"], 7, "lists a word twice"),
        (22, [1, 2], 7, "list of words"),
        (22, RIGHT_CONTEXTS, 22, "counted the skip-gram pairs"),
        (22, RIGHT_CONTEXTS, 3, "full window"),
    ],
)
def test_window_by_hand_names_the_mistakes(n_pairs, contexts, n_cbow, match):
    text = fails_with(lesson04.check_window_by_hand, n_pairs, contexts, n_cbow, match=match)
    assert "22" not in text.replace(repr(n_pairs), "") or n_pairs == 22, text


def test_window_by_hand_reports_every_wrong_part():
    text = fails_with(lesson04.check_window_by_hand, 11, ["the", "lazy"], 22, match="n_pairs: 11 is not right")
    for part in ("contexts_over: ['the', 'lazy'] is not right", "right only", "n_cbow: 22 is not right"):
        assert part in text, text


# --- exercise 3 ---------------------------------------------------------------------------------

COUNTS = np.array([81.0, 16.0, 1.0])
P_NOISE = COUNTS**0.75 / (COUNTS**0.75).sum()


@pytest.mark.parametrize(
    "p", [P_NOISE.tolist(), [0.75, 0.222, 0.028], torch.tensor(P_NOISE), (27 / 36, 8 / 36, 1 / 36)]
)
def test_noise_by_hand_passes_right_answers_written_any_way(p):
    lesson04.check_noise_by_hand(p)


@pytest.mark.parametrize(
    "p, match",
    [
        ((COUNTS / COUNTS.sum()).tolist(), "forgot the power 0.75"),
        ((COUNTS**0.5 / (COUNTS**0.5).sum()).tolist(), "square root"),
        ([27, 8, 1], "did not normalise"),
        ((COUNTS ** (4 / 3) / (COUNTS ** (4 / 3)).sum()).tolist(), "4/3"),
        (((COUNTS / COUNTS.sum()) ** 0.75).tolist(), "raised the probabilities"),
        ([0.75, 0.22], "expected shape (3,), got (2,).\n  Hint: one probability per word"),
        ([0.7, 0.2, 0.1], "81 ** 0.75 = 27"),
    ],
)
def test_noise_by_hand_names_the_mistakes_without_the_answer(p, match):
    text = fails_with(lesson04.check_noise_by_hand, p, match=match)
    assert "0.222" not in text and "0.028" not in text, text


# --- exercise 4 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss, d, grad, move",
    [
        (LOSS, sig(1) - 1, GRAD, "down"),
        (round(LOSS, 3), torch.tensor(sig(1) - 1), torch.tensor(GRAD), " Down "),
        (np.float64(LOSS), -0.2689, (-1.0, 1.6119), "down"),
    ],
)
def test_sgns_by_hand_passes_right_answers_written_any_way(loss, d, grad, move):
    lesson04.check_sgns_by_hand(loss, d, grad, move)


@pytest.mark.parametrize(
    "loss, d, grad, move, match",
    [
        (-math.log(sig(1)) - math.log(sig(2)) - math.log(sig(1)), sig(1) - 1, GRAD, "down", "log σ(-s_k)"),
        (-LOSS, sig(1) - 1, GRAD, "down", "dropped the minus sign"),
        (-math.log(sig(1)), sig(1) - 1, GRAD, "down", "left out the noise words"),
        (LOSS / math.log(10), sig(1) - 1, GRAD, "down", "log base 10"),
        (LOSS, sig(1), GRAD, "down", "the derivative of -log σ(s) is σ(s) - 1"),
        (LOSS, 1 - sig(1), GRAD, "down", "derivative of +log σ(s)"),
        (LOSS, sig(2), GRAD, "down", "a noise word's score"),
        (LOSS, sig(1) - 1, [0.0, sig(2) - 1 + sig(1) - 1], "down", "σ(s_k) - 1 for the noise words"),
        (LOSS, sig(1) - 1, [-g for g in GRAD], "down", "every sign flipped"),
        (LOSS, sig(1) - 1, [sig(1) - 1, 0.0], "down", "left out the noise words' terms"),
        (LOSS, sig(1) - 1, [(sig(1) - 1 + sig(2) + sig(1)) * x for x in (1.0, 2.0)], "down", "centre vector v instead"),
        (LOSS, sig(1) - 1, GRAD, "up", "gradient descent steps against the gradient"),
        (LOSS, sig(1) - 1, GRAD, "decreases", "expected 'up' or 'down'"),
        (LOSS, sig(1) - 1, [1.0], "down", "expected shape (2,), got (1,).\n  Hint: the gradient with respect to v_c"),
        (3.5, sig(1) - 1, GRAD, "down", "natural logs"),
    ],
)
def test_sgns_by_hand_names_the_mistakes_without_the_answer(loss, d, grad, move, match):
    text = fails_with(lesson04.check_sgns_by_hand, loss, d, grad, move, match=match)
    assert_hidden(text, LOSS, sig(1) - 1, GRAD[1], given=(loss, d, *grad))


def test_sgns_by_hand_matches_the_library_and_autograd():
    v = torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True)
    u = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    n = torch.tensor([[[0.0, 1.0], [-1.0, 1.0]]], dtype=torch.float64)
    loss = word2vec.sgns_loss(v, u, n)
    loss.sum().backward()
    s = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)  # the real pair's score, [1, 0] · [1, 2]
    (-F.logsigmoid(s)).backward()  # the only term of the loss that depends on s
    lesson04.check_sgns_by_hand(loss.item(), s.grad.item(), v.grad[0].tolist(), "down")


# --- exercise 5 ---------------------------------------------------------------------------------


def softmax_loss(v, U, o):
    scores = v @ U.T
    return torch.logsumexp(scores, dim=-1) - scores[torch.arange(len(o)), o]


def test_softmax_loss_reference_is_the_library_view_of_the_softmax():
    g = torch.Generator().manual_seed(0)
    v, U, o = torch.randn(5, 4, generator=g), torch.randn(9, 4, generator=g), torch.tensor([0, 8, 3, 3, 1])
    want = -torch.log(torch.softmax(v @ U.T, dim=-1)[torch.arange(5), o])  # the lesson's formula, fine here
    torch.testing.assert_close(lesson04.reference_softmax_loss(v, U, o), want)


def test_softmax_loss_passes_right_implementations():
    lesson04.check_softmax_loss(softmax_loss, hidden=True)

    def with_max(v, U, o):
        s = v @ U.T
        m = s.max(dim=-1, keepdim=True).values
        return (m.squeeze(-1) + (s - m).exp().sum(-1).log()) - s.gather(1, o[:, None]).squeeze(1)

    lesson04.check_softmax_loss(with_max, hidden=True)
    # torch's own loss is allowed (the exercise says so; no check can tell who did the arithmetic)
    lesson04.check_softmax_loss(lambda v, U, o: F.cross_entropy(v @ U.T, o, reduction="none"), hidden=True)


def test_softmax_loss_statement_allows_the_builtin():
    """The statement used to forbid F.cross_entropy, which passed anyway: now it says it may be used."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "solutions" / "04_word_vectors.ipynb").read_text())
    prompt = next(
        "".join(c["source"]) for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex5_prompt"
    )
    assert "F.cross_entropy" in prompt and "Do not call" not in prompt and "may" in prompt, prompt


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda v, U, o: -softmax_loss(v, U, o), "returned log P(o | c) itself"),
        (lambda v, U, o: -torch.exp(-softmax_loss(v, U, o)), "forgot the log"),
        (lambda v, U, o: -torch.log_softmax(v @ U.T, dim=0)[torch.arange(len(o)), o], "wrong axis"),
        (lambda v, U, o: -(v @ U.T)[torch.arange(len(o)), o], "dropped the log-sum-exp"),
        (
            lambda v, U, o: torch.log((v @ U.T).exp().sum(-1)) - (v @ U.T)[torch.arange(len(o)), o],
            "subtract each row's maximum",
        ),
        (lambda v, U, o: softmax_loss(v, U, o).mean(), "averaged"),
        (lambda v, U, o: torch.logsumexp(v @ U.T, -1)[:, None] - (v @ U.T)[:, o], "scores[:, o]"),
        (lambda v, U, o: torch.logsumexp(v @ U, -1), "v @ U.T"),
        (lambda v, U, o: torch.as_tensor(softmax_loss(v, U, o).detach().numpy()), "no gradient"),
        (lambda v, U, o: softmax_loss(v, U, o).numpy(force=True), "expected a torch.Tensor"),
        (lambda v, U, o: None, "forget to `return`"),
    ],
)
def test_softmax_loss_names_the_mistakes(fn, match):
    fails_with(lesson04.check_softmax_loss, fn, match=match)


def test_softmax_loss_checks_the_gradient():
    class WrongGradient(torch.autograd.Function):  # right values, wrong gradient (as if the softmax were left out)
        @staticmethod
        def forward(ctx, v, U, o):
            ctx.save_for_backward(v, U, o)
            return softmax_loss(v, U, o)

        @staticmethod
        def backward(ctx, grad):
            v, U, o = ctx.saved_tensors
            return -grad[:, None] * U[o], None, None

    fails_with(lesson04.check_softmax_loss, lambda v, U, o: WrongGradient.apply(v, U, o), match="d loss / d v")


def test_softmax_loss_not_attempted():
    def blank(v, U, o):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson04.check_softmax_loss(blank)


# --- exercise 6 ---------------------------------------------------------------------------------


def test_analogy_reference_agrees_with_word_vectors():
    words = list(lesson04.ANALOGY_TABLE)
    wv = word2vec.WordVectors(words, torch.tensor([lesson04.ANALOGY_TABLE[w] for w in words]))
    for a, b, c in lesson04.ANALOGY_CASES + lesson04.HIDDEN_ANALOGY_CASES:
        assert wv.analogy(a, b, c, k=1)[0][0] == lesson04.reference_analogy(lesson04.ANALOGY_TABLE, a, b, c), (a, b, c)


def test_analogy_table_makes_every_mistake_visible():
    """Each listed mistake changes the answer of at least one visible case, so a learner who makes it is told."""
    table = lesson04.ANALOGY_TABLE
    for description, flags in lesson04._ANALOGY_MISTAKES.items():
        changed = [
            c
            for c in lesson04.ANALOGY_CASES
            if lesson04.reference_analogy(table, *c, **flags) != lesson04.reference_analogy(table, *c)
        ]
        assert changed, f"no visible case shows the mistake: {description}"


def test_analogy_passes_right_implementations():
    lesson04.check_analogy(lambda t, a, b, c: lesson04.reference_analogy(t, a, b, c), hidden=True)

    def normalised_first(table, a, b, c):  # the library's variant: unit vectors before the arithmetic
        vec = {w: F.normalize(torch.tensor(v), dim=0) for w, v in table.items()}
        target = vec[b] - vec[a] + vec[c]
        return max(
            (w for w in vec if w not in (a, b, c)), key=lambda w: float(F.cosine_similarity(target, vec[w], dim=0))
        )

    lesson04.check_analogy(normalised_first, hidden=True)

    def with_numpy(table, a, b, c):
        vec = {w: np.asarray(v) for w, v in table.items()}
        t = vec[b] - vec[a] + vec[c]
        scores = {w: t @ x / np.linalg.norm(t) / np.linalg.norm(x) for w, x in vec.items() if w not in {a, b, c}}
        return max(scores, key=scores.get)

    lesson04.check_analogy(with_numpy, hidden=True)


@pytest.mark.parametrize(
    "flags, match",
    [
        (dict(exclude_inputs=False), "did not leave out the three input words"),
        (dict(score="dot"), "plain dot product"),
        (dict(score="euclidean"), "nearest to the point b - a + c (Euclidean distance)"),
        (dict(swapped=True), "a - b + c"),
    ],
)
@pytest.mark.parametrize("hidden", [False, True])
def test_analogy_names_the_mistakes(flags, match, hidden):
    fails_with(
        lesson04.check_analogy,
        lambda t, a, b, c: lesson04.reference_analogy(t, a, b, c, **flags),
        match=match,
        hidden=hidden,
    )


def euclidean_nearest(table, a, b, c):
    """The mistake as a learner writes it: the nearest point to b - a + c."""
    vec = {w: np.asarray(v, dtype=float) for w, v in table.items()}
    t = vec[b] - vec[a] + vec[c]
    return min((w for w in vec if w not in (a, b, c)), key=lambda w: np.linalg.norm(t - vec[w]))


def test_euclidean_nearest_fails_visible_and_hidden_with_its_hint():
    match = "Euclidean distance"
    fails_with(lesson04.check_analogy, euclidean_nearest, match=match)
    # the hidden tests catch it in cases of their own too (not only the visible ones)
    table = lesson04.ANALOGY_TABLE
    hidden_only = [
        c
        for c in lesson04.HIDDEN_ANALOGY_CASES
        if euclidean_nearest(table, *c) != lesson04.reference_analogy(table, *c)
    ]
    assert hidden_only, "no hidden analogy separates Euclidean distance from cosine"
    rotated = lesson04._rotated_table(lesson04.ANALOGY_TABLE, 0)
    assert any(
        euclidean_nearest(rotated, *c) != lesson04.reference_analogy(rotated, *c)
        for c in lesson04.ANALOGY_CASES + lesson04.HIDDEN_ANALOGY_CASES
    )


def test_euclidean_distance_between_unit_vectors_is_a_right_answer():
    """Normalising every vector first and then taking the nearest point ranks as cosine does (on unit
    vectors |t - x|^2 = |t|^2 + 1 - 2 t.x): a right answer written another way."""

    def unit_euclidean(table, a, b, c):
        vec = {w: F.normalize(torch.tensor(v, dtype=torch.float64), dim=0) for w, v in table.items()}
        t = vec[b] - vec[a] + vec[c]
        return min((w for w in vec if w not in (a, b, c)), key=lambda w: float((t - vec[w]).norm()))

    lesson04.check_analogy(unit_euclidean, hidden=True)


def test_analogy_other_failures():
    fails_with(lesson04.check_analogy, lambda t, a, b, c: ("queen", 0.9), match="return only the best word")
    fails_with(lesson04.check_analogy, lambda t, a, b, c: 3, match="expected a word (a str)")
    fails_with(lesson04.check_analogy, lambda t, a, b, c: "unicorn", match="form b - a + c")
    text = fails_with(lesson04.check_analogy, lambda t, a, b, c: t["nope"], match="raised KeyError")
    assert "Traceback" not in text, text


def test_analogy_hidden_table_defeats_hard_coded_answers():
    answers = {
        c: lesson04.reference_analogy(lesson04.ANALOGY_TABLE, *c)
        for c in lesson04.ANALOGY_CASES + lesson04.HIDDEN_ANALOGY_CASES
    }
    lesson04.check_analogy(lambda t, a, b, c: answers[(a, b, c)])  # visible: passes by memory
    rotated = lesson04._rotated_table(lesson04.ANALOGY_TABLE, 0)
    assert all(lesson04.reference_analogy(rotated, *c) == answers[c] for c in answers), (
        "rotation must not change the answers"
    )
    assert rotated["king"] != lesson04.ANALOGY_TABLE["king"]


# --- exercise 7 ---------------------------------------------------------------------------------


def buggy_sgd_update(E, ids, grads, lr):  # the function printed in exercise 7
    E = E.clone()
    E[ids] -= lr * grads
    return E


def test_sgd_update_reference_applies_every_step():
    E, ids, grads = torch.zeros(3, 2), torch.tensor([1, 1]), torch.ones(2, 2)
    torch.testing.assert_close(lesson04.reference_sgd_update(E, ids, grads, 1.0)[1], torch.tensor([-2.0, -2.0]))
    torch.testing.assert_close(buggy_sgd_update(E, ids, grads, 1.0)[1], torch.tensor([-1.0, -1.0]))  # the bug is real


def test_sgd_update_passes_right_implementations():
    lesson04.check_sgd_update(lesson04.reference_sgd_update, hidden=True)

    def loop(E, ids, grads, lr):
        E = E.clone()
        for i, g in zip(ids.tolist(), grads, strict=True):
            E[i] -= lr * g
        return E

    def out_of_place(E, ids, grads, lr):
        return torch.index_add(E, 0, ids, grads, alpha=-lr)

    def through_numpy(E, ids, grads, lr):  # fine too: the probe with an E that requires grad must not object
        out = E.detach().numpy().copy()
        np.add.at(out, ids.numpy(), -lr * grads.numpy())
        return torch.from_numpy(out)

    for fn in (loop, out_of_place, through_numpy):
        lesson04.check_sgd_update(fn, hidden=True)


def in_place(E, ids, grads, lr):
    E.index_add_(0, ids, -lr * grads)
    return E


def in_place_no_grad(E, ids, grads, lr):
    with torch.no_grad():
        E.index_add_(0, ids, -lr * grads)
    return E


def as_in_the_grader(fn):
    """fn as `course grade` calls it: in the learner's own kernel, on copies of the arguments (a tensor
    keeps its requires_grad), so the checker never sees the kernel's E change."""

    def remote(E, ids, grads, lr):
        return fn(E.detach().clone().requires_grad_(E.requires_grad), ids.clone(), grads.clone(), lr)

    return remote


@pytest.mark.parametrize(
    "fn",
    [in_place, in_place_no_grad, as_in_the_grader(in_place)],
    ids=["in place", "in place under no_grad", "in place, run as the grader runs it"],
)
@pytest.mark.parametrize("hidden", [False, True])
def test_sgd_update_that_changes_the_callers_matrix_fails_with_its_own_hint(fn, hidden):
    text = fails_with(lesson04.check_sgd_update, fn, match="it changed the E it was given", hidden=hidden)
    assert "E = E.clone()" in text, text


def test_sgd_update_twice_the_learning_rate_is_not_called_a_forgotten_one():
    """At lr 0.5 twice the step and no learning rate give the same numbers: the cases avoid it."""
    for *_, lr in lesson04._sgd_cases(hidden=True):
        assert lr not in (0.5, 1.0), lr
    text = fails_with(
        lesson04.check_sgd_update,
        lambda E, ids, grads, lr: lesson04.reference_sgd_update(E, ids, grads, 2 * lr),
        match="add -lr * grads[i] to row ids[i]",
    )
    assert "forgot the learning rate" not in text, text


def both_lines(E, ids, grads, lr):
    E = E.clone()
    E[ids] -= lr * grads
    return E.index_add_(0, ids, grads, alpha=-lr)


@pytest.mark.parametrize(
    "fn, match",
    [
        (buggy_sgd_update, "writes each row once"),
        (lambda E, ids, grads, lr: lesson04.reference_sgd_update(E, ids, -grads, lr), "moved up the gradient"),
        (lambda E, ids, grads, lr: lesson04.reference_sgd_update(E, ids, grads, 1.0), "forgot the learning rate"),
        (
            lambda E, ids, grads, lr: (
                E
                - lr
                * torch.zeros_like(E).index_add_(0, ids, grads)
                / torch.bincount(ids, minlength=len(E)).clamp(min=1)[:, None]
            ),
            "averaged the steps",
        ),
        (both_lines, "kept the buggy line E[ids] -= lr * grads and added index_add_ as well"),
        (lambda E, ids, grads, lr: None, "forget to `return`"),
        (lambda E, ids, grads, lr: E.numpy(), "expected a torch.Tensor"),
    ],
)
@pytest.mark.parametrize("hidden", [False, True])
def test_sgd_update_names_the_mistakes(fn, match, hidden):
    fails_with(lesson04.check_sgd_update, fn, match=match, hidden=hidden)
