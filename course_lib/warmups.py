"""Warm-ups: a few questions on earlier lessons at the top of a lesson, checked on the spot.

Each lesson from 02 on opens with a short "Warm-up" section: two or three questions that bring back
earlier lessons (at least one on the lesson just before, one from further back), to be worked out
from memory before the new lesson builds on them. Recalling something a few days after learning it
fixes it far better than reading it again (spaced retrieval practice), so the questions ask for a
number worked by hand, a shape, or a choice among options that are each a real misconception.

A learner writes the answers in one code cell and runs it:

    warmups.check(
        "02",
        q1=(3, 3),  # a shape
        q2=4 / 9,  # a number: an expression works too
        q3="a",  # one letter
    )

and reads, for each answer, whether it is right and why, with the mistake named when the answer is a
known wrong one. A blank (the ``...`` the cell starts with) only says how to answer, so the output a
notebook stores gives nothing away. Nothing is graded, recorded or sent anywhere.

Everything lives here: every lesson's questions, answers, the mistakes they name and the
explanations (`WARMUPS`), what a lesson's two cells say (`markdown`, `answer_cell`), and the check
(`check`, `verdicts`). To give another lesson a warm-up: add its questions to `WARMUPS`, run
``python -m course_lib.warmups notebooks/NN_name.ipynb`` (it writes or updates the two cells, before
the lesson's first numbered section), import ``warmups`` in the lesson's import cell, and re-run the
lesson with ``make run``; ``tests/test_warmups.py`` then checks the questions and the cells.

Importing this module runs nothing.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

__all__ = ["LESSONS", "WARMUPS", "Mistake", "Question", "Verdict", "answer_cell", "check", "markdown", "verdicts"]

WIDTH = 96  # printed lines stay within the notebook's column
KINDS = ("number", "shape", "choice")
HOW = {  # how to write an answer of each kind, for a blank or an answer of the wrong kind
    "number": "a number (3 / 7 works too)",
    "shape": "a shape, a tuple such as (4, 7)",
    "choice": "a letter in quotes: {letters}",
}
NOTHING_KEPT = "Nothing here is graded or recorded."

# The lessons a question can point back to: notebook file (in notebooks/) and title.
LESSONS = {
    "00": ("00_welcome", "Welcome"),
    "01": ("01_one_hot_and_dot_products", "One-hot vectors and dot products"),
    "02": ("02_markov_models", "Markov models"),
    "03": ("03_from_skips_to_attention", "From skips to attention"),
    "04": ("04_word_vectors", "Word embeddings and word2vec"),
    "05": ("05_tokens", "Tokens"),
    "06": ("06_attention", "Attention"),
    "07": ("07_position", "Position"),
    "08": ("08_multi_head_attention", "Multi-head attention"),
    "09": ("09_transformer_block", "The transformer block"),
    "10": ("10_encoder_decoder", "Encoder-decoder"),
    "11": ("11_gpt", "A GPT"),
    "12": ("12_modern_decoder", "The modern decoder"),
}


@dataclass(frozen=True)
class Mistake:
    answer: object  # a wrong answer that a learner would really give (a number, a shape or a letter)
    why: str  # the misconception behind it, named


@dataclass(frozen=True)
class Question:
    recalls: str  # the earlier lesson it brings back: "01"
    section: str  # where that lesson teaches it: its numbered heading, "7. Matrix multiplication as ..."
    prompt: str  # the question as the learner reads it (Markdown)
    answer: object  # a number, a shape (tuple of ints), or the letter of the right option
    explanation: str  # how the answer comes about, worked: shown after any answer
    kind: str = "number"  # "number", "shape" or "choice"
    options: tuple[str, ...] = ()  # for a choice: the options, lettered a, b, c, ...
    mistakes: tuple[Mistake, ...] = ()  # wrong answers a learner would give, each with its misconception
    tolerance: float | None = None  # for a number: how far from the answer still counts as right

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"a question's kind is one of {KINDS}, got {self.kind!r}")
        if self.recalls not in LESSONS:
            raise ValueError(f"recalls names a lesson, one of {sorted(LESSONS)}, got {self.recalls!r}")
        if (self.kind == "choice") != bool(self.options):
            raise ValueError("a choice question has options, and only a choice question has them")

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple("abcdefgh"[: len(self.options)])

    @property
    def tol(self) -> float:
        """How close to the answer (or to a mistake) a number must be to count as it."""
        if self.tolerance is not None:
            return self.tolerance
        if isinstance(self.answer, int):
            return 1e-9 * max(1.0, abs(self.answer))  # a whole number: exactly it (6.0 is 6)
        return 0.01 * abs(self.answer)  # a fraction: within 1%, so 0.44 is 4/9

    def how(self) -> str:
        return HOW[self.kind].format(letters=_or(f'"{x}"' for x in self.letters))


@dataclass(frozen=True)
class Verdict:
    number: int  # the question's number in the lesson, from 1
    status: str  # "right", "wrong", "blank" (not answered yet) or "unreadable" (an answer of the wrong kind)
    text: str  # what the learner reads, lines of at most WIDTH characters
    mistake: Mistake | None = field(default=None, repr=False)  # the known mistake a wrong answer matches


# --- reading an answer ----------------------------------------------------------------------------------


def _or(words) -> str:
    words = list(words)
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "".join(words)


def _plain(value):
    """A tensor or numpy value as plain Python numbers (lists for arrays); anything else as it is."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def _number(value) -> float | None:
    """`value` as a float if it is one number (a numeric string too), else None."""
    value = _plain(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, Fraction, np.integer, np.floating)):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def _shape(value) -> tuple[int, ...] | None:
    """`value` as a tuple of whole numbers (a tuple, list, torch.Size or array of them), else None."""
    value = _plain(value)
    if not isinstance(value, (tuple, list)) or not value:
        return None
    numbers = [_number(x) for x in value]
    if any(x is None or x != int(x) for x in numbers):
        return None
    return tuple(int(x) for x in numbers)


def _letter(value, letters: tuple[str, ...]) -> str | None:
    """`value` as one of `letters`: "b", "B", "(b)", "b)" and " b. " all read as "b"."""
    if not isinstance(value, str):
        return None
    letter = value.strip().strip("().").strip().lower()
    return letter if letter in letters else None


def _read(q: Question, value):
    """The learner's `value` in the question's kind (a float, a tuple or a letter), or None."""
    if q.kind == "number":
        return _number(value)
    if q.kind == "shape":
        return _shape(value)
    return _letter(value, q.letters)


def _same(q: Question, given, target, tol: float | None = None) -> bool:
    if q.kind == "number":
        return abs(given - float(target)) <= (q.tol if tol is None else tol)
    return given == (tuple(target) if q.kind == "shape" else target)


def _matches(q: Question, given, mistake: Mistake) -> bool:
    """Whether `given` is `mistake`'s answer: a whole number exactly, a fraction within 3% of it (0.015
    is 1/65), whatever the question's own tolerance."""
    wrong = _read(q, mistake.answer)
    if wrong is None:
        return False
    tol = None if q.kind != "number" else 0.0 if isinstance(mistake.answer, int) else 0.03 * abs(wrong)
    return _same(q, given, wrong, tol)


def _thousands(value) -> int | None:
    """The whole number a learner meant by 16,640, which Python reads as the tuple (16, 640); else None."""
    if not isinstance(value, tuple) or len(value) < 2:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return None
    # only groups that a literal can have: 1 to 999 first, then 000 or 100 to 999 (Python refuses 050)
    if not 0 < value[0] < 1000 or not all(x == 0 or 100 <= x < 1000 for x in value[1:]):
        return None
    return int(str(value[0]) + "".join(f"{x:03d}" for x in value[1:]))


def _show(q: Question, value) -> str:
    if q.kind == "number":
        if float(value).is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"  # a whole number in full, 16,640 (not 1.664e+04)
        return f"{value:.4g}"
    if q.kind == "shape":
        return str(tuple(value))
    return f'"{value}"'


# --- the verdict on one answer -------------------------------------------------------------------------


def _block(first: str, *paragraphs: str) -> str:
    """`first` as the verdict's line, then each paragraph wrapped and indented under it."""
    lines = textwrap.wrap(first, WIDTH, subsequent_indent="   ")
    for text in paragraphs:
        lines += textwrap.wrap(text, WIDTH, initial_indent="   ", subsequent_indent="   ")
    return "\n".join(lines)


def _right_answer(q: Question) -> str:
    if q.kind == "choice":
        return f'"{q.answer}" ({q.options[q.letters.index(q.answer)]})'
    return _show(q, q.answer)


def _see(q: Question) -> str:
    """Where to read it again: "See lesson 01, section 7: Matrix multiplication as a table lookup." """
    number, _, title = q.section.partition(". ")
    if number.isdigit():
        return f"See lesson {q.recalls}, section {number}: {title}."
    return f"See lesson {q.recalls}, “{q.section}”."


def verdict(q: Question, number: int, value) -> Verdict:
    """What the learner is told about `value` as the answer to question `number`, `q`."""
    name = f"q{number}"
    if value is Ellipsis or value is None:
        return Verdict(
            number, "blank", _block(f"○ {number}. Not answered yet: replace the ... after {name}= with {q.how()}.")
        )
    given = _read(q, value)
    if given is None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        meant = _thousands(value) if q.kind == "number" else None
        comma = f" In Python a comma makes a tuple: write {meant} or {meant:_}." if meant is not None else ""
        return Verdict(
            number,
            "unreadable",
            _block(f"○ {number}. {name} should be {q.how()}; it is {shown} (a {type(value).__name__}).{comma}"),
        )
    if _same(q, given, q.answer):
        return Verdict(number, "right", _block(f"✔ {number}. Right: {_show(q, given)}.", q.explanation, _see(q)))
    mistake = next((m for m in q.mistakes if _matches(q, given, m)), None)
    why = f" {mistake.why}" if mistake else ""
    return Verdict(
        number,
        "wrong",
        _block(
            f"✘ {number}. Not {_show(q, given)}.{why}", f"The answer is {_right_answer(q)}. {q.explanation}", _see(q)
        ),
        mistake,
    )


def _lesson_key(lesson) -> str:
    key = f"{int(lesson):02d}" if isinstance(lesson, int) and not isinstance(lesson, bool) else str(lesson)
    if key not in WARMUPS:
        raise ValueError(f"lessons with a warm-up: {', '.join(sorted(WARMUPS))}; got {lesson!r}")
    return key


def verdicts(lesson, **answers) -> list[Verdict]:
    """One `Verdict` per question of `lesson`'s warm-up ("02" or 2), for the answers q1=..., q2=..."""
    key = _lesson_key(lesson)
    questions = WARMUPS[key]
    names = [f"q{i}" for i in range(1, len(questions) + 1)]
    unknown = sorted(set(answers) - set(names))
    if unknown:
        raise TypeError(f"lesson {key}'s warm-up has the answers {', '.join(names)}; got also {', '.join(unknown)}")
    return [verdict(q, i, answers.get(f"q{i}", ...)) for i, q in enumerate(questions, 1)]


def check(lesson, **answers) -> None:
    """Print, for each answer q1=..., q2=..., ... to `lesson`'s warm-up, whether it is right and why.

    ``...`` (or no answer) means "not answered yet". Returns nothing: nothing is recorded."""
    results = verdicts(lesson, **answers)
    for v in results:
        print(v.text)
    answered = [v for v in results if v.status in ("right", "wrong")]
    if answered:
        right = sum(v.status == "right" for v in answered)
        print(f"{right} of {len(answered)} answered right. {NOTHING_KEPT}")
    else:
        print(NOTHING_KEPT)


# --- the two cells of a lesson's warm-up ---------------------------------------------------------------

INTRO = (
    "Before this lesson builds on them, bring back a few ideas from earlier lessons. Work each answer "
    "out from memory (on paper if you like), write it in the cell below and run the cell: it says at "
    "once whether the answer is right, and why. It takes two or three minutes, and nothing here is "
    "graded or recorded."
)


def _wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    """Markdown lines of at most 100 characters, as the lessons' own prose is wrapped."""
    return textwrap.wrap(text, 100, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def markdown(lesson) -> str:
    """The Markdown cell that asks `lesson`'s warm-up questions."""
    key = _lesson_key(lesson)
    lines = ["## Warm-up", ""] + _wrap(INTRO) + [""]
    for i, q in enumerate(WARMUPS[key], 1):
        stem, _title = LESSONS[q.recalls]
        lines += _wrap(f"*From [lesson {q.recalls}]({stem}.ipynb).* {q.prompt}", f"{i}. ", "   ")
        for letter, option in zip(q.letters, q.options):
            lines += _wrap(option, f"   - {letter}) ", "     ")
    return "\n".join(lines)


def answer_cell(lesson) -> str:
    """The code cell in which a learner answers `lesson`'s warm-up (every answer blank)."""
    key = _lesson_key(lesson)
    lines = ["# Replace each ... with your answer, then run this cell.", "warmups.check(", f'    "{key}",']
    for i, q in enumerate(WARMUPS[key], 1):
        hint = "one letter" if q.kind == "choice" else "a shape" if q.kind == "shape" else "a number"
        lines.append(f"    q{i}=...,  # {hint}")
    lines.append(")")
    return "\n".join(lines)


# --- writing the cells into a lesson -------------------------------------------------------------------

MARKDOWN_ID, CODE_ID = "warm-up", "warm-up-check"


def write_cells(path: Path) -> bool:
    """Put the warm-up's two cells into lesson notebook `path`, just before its first numbered section
    ("## 1. ..."), or update them where they are. Returns True if the file changed. The answer cell is
    written without output: re-run the lesson (``make run``) to store it."""
    path = Path(path)
    key = path.name[:2]
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    cells = nb["cells"]
    wanted = {
        MARKDOWN_ID: {"cell_type": "markdown", "id": MARKDOWN_ID, "metadata": {}, "source": markdown(key)},
        CODE_ID: {
            "cell_type": "code",
            "execution_count": None,
            "id": CODE_ID,
            "metadata": {},
            "outputs": [],
            "source": answer_cell(key),
        },
    }
    for cell in wanted.values():
        cell["source"] = cell["source"].splitlines(keepends=True)
    found = {c.get("id"): i for i, c in enumerate(cells) if c.get("id") in wanted}
    if found:
        for cell_id, i in found.items():
            if "".join(cells[i]["source"]) != "".join(wanted[cell_id]["source"]):
                cells[i] = wanted[cell_id]
    else:
        first = next(
            (
                i
                for i, c in enumerate(cells)
                if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## 1.")
            ),
            None,
        )
        if first is None:
            raise ValueError(f"{path}: no Markdown cell starts with '## 1.', so there is no place for the warm-up")
        cells[first:first] = [wanted[MARKDOWN_ID], wanted[CODE_ID]]
    new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


# --- the questions ---------------------------------------------------------------------------------------
# Each lesson: one question or more on the lesson just before, one or more from further back. A mistake
# is a wrong answer a learner would really give; its `why` names the misconception behind it.

WARMUPS: dict[str, tuple[Question, ...]] = {
    "02": (
        Question(
            recalls="01",
            section="7. Matrix multiplication as a table lookup",
            prompt=(
                "E is a (5, 3) matrix: one row of 3 numbers for each word of a 5-word vocabulary. "
                "`X = one_hot([4, 0, 4], 5)` stacks three one-hot rows. What is the shape of `X @ E`?"
            ),
            kind="shape",
            answer=(3, 3),
            explanation=(
                "X is (3, 5) and E is (5, 3); in a product the inner size 5 disappears, so (3, 5) @ (5, 3) "
                "is (3, 3). Row t of the product is row ids[t] of E: the rows E[4], E[0], E[4]. That is "
                "what an embedding layer does."
            ),
            mistakes=(
                Mistake(
                    (5, 3), "That is E's own shape; the product has one row per id, not one per word of the vocabulary."
                ),
                Mistake((3, 5), "That is the shape of X itself; the product keeps X's rows and E's columns."),
                Mistake((5, 5), "That would be a (V, V) table; the 5 is the inner size, and it disappears."),
            ),
        ),
        Question(
            recalls="01",
            section="4. Cosine similarity",
            prompt="What is the cosine similarity of a = [2, −1, 2] and b = [1, 2, 2]?",
            answer=4 / 9,
            tolerance=0.006,
            explanation=(
                "a · b = 2·1 + (−1)·2 + 2·2 = 2 − 2 + 4 = 4, and both vectors have length "
                "√(4 + 1 + 4) = 3, so cos = 4 / (3 · 3) = 4/9 ≈ 0.444: the dot product of the two "
                "vectors scaled to length 1."
            ),
            mistakes=(
                Mistake(4, "That is the dot product; the cosine divides it by both lengths, |a| |b| = 9."),
                Mistake(4 / 3, "That divides by one length only; the cosine divides by |a| |b| = 3 · 3."),
                Mistake(4 / 81, "That divides by the squared lengths; the cosine divides by |a| |b|, not |a|² |b|²."),
                Mistake(8 / 9, "(−1)·2 is −2, not +2: the dot product keeps the signs, 2 − 2 + 4 = 4."),
            ),
        ),
        Question(
            recalls="00",
            section="Convolutional networks: a local window",
            prompt=(
                "A stack of convolution layers with kernel size 5: each output sees 5 neighbouring "
                "positions of the layer below. How many layers does it take before one output can see "
                "two words that are 12 positions apart?"
            ),
            answer=3,
            explanation=(
                "Each layer widens the view by k − 1 = 4 positions: after L layers an output sees "
                "1 + 4L positions. Two words 12 apart span 13 positions, so L = ⌈12 / 4⌉ = 3 layers. "
                "Self-attention connects them in one step, whatever the distance."
            ),
            mistakes=(
                Mistake(
                    12,
                    (
                        "That is a recurrent network's path: one step per position. A convolution layer widens the "
                        "view by k − 1 = 4 at once."
                    ),
                ),
                Mistake(2, "Two layers see 1 + 2 · 4 = 9 positions, not 13: each layer adds k − 1 = 4, not k = 5."),
                Mistake(1, "One layer sees only its own window of 5 positions."),
            ),
        ),
    ),
    "03": (
        Question(
            recalls="02",
            section="6. A bigram / trigram language model of the course's English corpus",
            prompt=(
                'In a training text "ran" is followed by "down" 3 times and by "please" 9 times. With '
                "add-1 smoothing (k = 1) over a vocabulary of 10 tokens, what is P(down | ran)?"
            ),
            answer=4 / 22,
            tolerance=0.003,
            explanation=(
                "Add-k adds k to every count and k · V to the total: (3 + 1) / (12 + 1 · 10) = 4/22 ≈ 0.182. "
                "The k · V keeps the row summing to 1, because each of the V tokens got k extra counts."
            ),
            mistakes=(
                Mistake(3 / 12, "That is the count table without smoothing (k = 0)."),
                Mistake(
                    4 / 13, "The classic bug: 1 was added to the total, not k · V = 10, so the row sums to more than 1."
                ),
                Mistake(4 / 12, "The total needs the extra counts too: k · V = 10 of them, one for each token."),
                Mistake(0.1, "1/V is what smoothing gives a context never seen at all; 'ran' was seen 12 times."),
            ),
        ),
        Question(
            recalls="02",
            section="6. A bigram / trigram language model of the course's English corpus",
            prompt="A model gives each of the 5 predictions in a text probability 0.2. What is its perplexity?",
            answer=5,
            explanation=(
                "Perplexity = exp(−mean ln P) = exp(−ln 0.2) = 1 / 0.2 = 5: as unsure as a fair 5-sided "
                "die. A uniform guess over V words always has perplexity V."
            ),
            mistakes=(
                Mistake(
                    math.log(5), "That is the cross-entropy, −mean ln P = ln 5 ≈ 1.61 nats; perplexity is exp of it."
                ),
                Mistake(
                    math.log2(5),
                    "That is the cross-entropy in bits (log base 2); perplexity undoes the log: 2 ** 2.32 = 5.",
                ),
                Mistake(0.2, "That is the average probability; perplexity is exp(−mean ln P), here 1 / 0.2."),
                Mistake(
                    5**5,
                    (
                        "That is 1 / (0.2 ** 5), the inverse probability of the whole text; perplexity averages over "
                        "the N = 5 predictions first."
                    ),
                ),
            ),
        ),
        Question(
            recalls="01",
            section="7. Matrix multiplication as a table lookup",
            prompt="`v = one_hot(2, 4)` is a row vector and M is a 4 × 4 matrix. What is `v @ M`?",
            kind="choice",
            options=(
                "row 2 of M",
                "column 2 of M",
                "the sum of the four entries of row 2",
                "the single entry M[2, 2]",
            ),
            answer="a",
            explanation=(
                "Entry j of v @ M is v · (column j of M); v is 0 everywhere but position 2, so that dot "
                "product is M[2, j]. All four entries together are row 2 of M: a one-hot row picks a row "
                "out of the matrix, which is how this lesson picks a mask."
            ),
            mistakes=(
                Mistake(
                    "b", "That is M @ v, with v as a column on the right: multiplying on the other side picks a column."
                ),
                Mistake(
                    "c",
                    (
                        "Nothing is added up: each entry of v @ M is one dot product, and v's single 1 copies one "
                        "number into it."
                    ),
                ),
                Mistake("d", "That is v @ M @ vᵀ, one entry; v @ M is still a vector of 4 numbers."),
            ),
        ),
    ),
    "04": (
        Question(
            recalls="03",
            section="2. Second order with skips: every earlier word casts a vote",
            prompt=(
                'After "ran", six pair features split their vote 0.5 / 0.5 between "down" and "please", '
                'and one more pair, which was always followed by "down", puts its whole vote there. '
                "What share of all the votes goes to the winner?"
            ),
            answer=4 / 7,
            tolerance=0.006,
            explanation=(
                "down gets 6 × 0.5 + 1 = 4 votes, please 6 × 0.5 = 3: the winner has 4 of the 7 votes, "
                "about 0.57. Right, but hardly confident: the uninformative pairs drown the one that knows."
            ),
            mistakes=(
                Mistake(1.0, "That is the share with the mask, when only the informative pair votes."),
                Mistake(4, "That is the winner's total; its share divides it by all 7 votes."),
                Mistake(0.5, "The six split votes are not all: the seventh pair tips the balance."),
                Mistake(5 / 9, "That is 5 of 9, with eight split pairs; here there are six."),
            ),
        ),
        Question(
            recalls="03",
            section="5. Word-pair features: weights, a bias and a ReLU",
            prompt=(
                'A feature has weight +2 from "battery", +2 from "ran" and a bias weight of −3 (on an input '
                'that is always 1), followed by a ReLU. The input has "ran" but not "battery". What does '
                "the feature output?"
            ),
            answer=0,
            explanation=(
                "Before the ReLU: 2 · 0 + 2 · 1 − 3 = −1; the ReLU turns it into 0. Only with both words "
                "does it fire (2 + 2 − 3 = +1): an AND gate."
            ),
            mistakes=(
                Mistake(-1, "That is the value before the ReLU, which turns every negative number into 0."),
                Mistake(1, 'That is what it gives with both words: 2 + 2 − 3 = 1. Here "battery" is missing.'),
                Mistake(2, "The bias counts too: its input is always 1, so −3 is always added."),
            ),
        ),
        Question(
            recalls="02",
            section="7. Real text: a character-level bigram model of Tiny Shakespeare",
            prompt=(
                "An untrained model spreads its probability evenly over 65 characters. What is its "
                "loss, the average negative log-likelihood per character, in nats?"
            ),
            answer=math.log(65),
            tolerance=0.03,
            explanation=(
                "Every character gets P = 1/65, so the loss is −ln(1/65) = ln 65 ≈ 4.17 nats, where a "
                "character model's training starts (its perplexity, exp(4.17), is 65)."
            ),
            mistakes=(
                Mistake(65, "That is its perplexity, exp(loss); the loss is ln 65."),
                Mistake(math.log2(65), "That is log base 2, the loss in bits; nats use the natural log."),
                Mistake(1 / 65, "That is the probability of each character; the loss is −ln of it."),
                Mistake(
                    -math.log(65), "A loss is −ln P, which is positive: ln P of a probability below 1 is negative."
                ),
            ),
        ),
    ),
    "05": (
        Question(
            recalls="04",
            section="3. The surrogate task: predict the neighbours (skip-gram)",
            prompt=(
                'Skip-gram with a window of 1 on the sentence "the cat sat down" (4 words): how many '
                "(centre, context) pairs does it make?"
            ),
            answer=6,
            explanation=(
                "Each word pairs with its neighbours at distance 1: the → cat; cat → the, sat; "
                "sat → cat, down; down → sat. That is 1 + 2 + 2 + 1 = 6 pairs, each neighbouring "
                "pair in both directions."
            ),
            mistakes=(
                Mistake(
                    3,
                    (
                        "Those are the neighbouring pairs counted once; skip-gram makes each in both directions, "
                        "(cat, sat) and (sat, cat)."
                    ),
                ),
                Mistake(8, "Two neighbours per word is too many: the first and the last word have one each."),
                Mistake(
                    4,
                    (
                        "That is CBOW's count, one example per centre word; skip-gram makes one per (centre, "
                        "context) pair."
                    ),
                ),
            ),
        ),
        Question(
            recalls="04",
            section="4. Negative sampling",
            prompt=(
                "Skip-gram with negative sampling, K = 3 noise words per pair. All context vectors start "
                "at zero. What is the loss of one (centre, context) pair at the start?"
            ),
            answer=4 * math.log(2),
            tolerance=0.01,
            explanation=(
                "Every score is u · v = 0 and σ(0) = 0.5, so each of the 1 + K terms, −log σ(s) for the "
                "real pair and −log σ(−s_k) for each noise word, is ln 2: (1 + 3) ln 2 ≈ 2.77."
            ),
            mistakes=(
                Mistake(3 * math.log(2), "That counts the noise words only; the real pair's −log σ(s) is ln 2 too."),
                Mistake(
                    math.log(2),
                    "That is one term; there is one for the real pair and one for each of the K = 3 noise words.",
                ),
                Mistake(4, "Each term is −log σ(0) = −log 0.5 = ln 2 ≈ 0.69, not 1."),
            ),
        ),
        Question(
            recalls="02",
            section="8. The bridge: counting is maximum likelihood, and gradient descent finds the same table",
            prompt=(
                "Train the W of `softmax(one_hot(x) @ W)` by gradient descent on the cross-entropy of a "
                "text's character pairs, with no regulariser, for long enough. Which table does "
                "softmax(W) come to?"
            ),
            kind="choice",
            options=(
                "the count table: each row's counts divided by that row's total",
                "the add-1 smoothed count table",
                "a uniform table, every entry 1/V",
                "each column's counts divided by that column's total",
            ),
            answer="a",
            explanation=(
                "The gradient for row a vanishes exactly when softmax(W_a) equals row a of the counts "
                "divided by its total: the maximum-likelihood table, the one counting gives."
            ),
            mistakes=(
                Mistake(
                    "b",
                    (
                        "Add-1 is what training gives with one made-up count of every pair added to the loss, a "
                        "regulariser; there is none here."
                    ),
                ),
                Mistake("c", "Uniform is where W = 0 starts, not where training ends."),
                Mistake(
                    "d",
                    (
                        "A row is the distribution of the next character, so it is each row that sums to 1, not each "
                        "column."
                    ),
                ),
            ),
        ),
    ),
    "06": (
        Question(
            recalls="05",
            section="3. Training BPE on text, one merge at a time",
            prompt=(
                "A byte-level BPE tokenizer is trained with 500 merges and then given one special token, "
                "`<|endoftext|>`. How many tokens does its vocabulary hold?"
            ),
            answer=757,
            explanation=(
                "The 256 bytes come first, each merge adds one token and the special token one more: "
                "256 + 500 + 1 = 757. (GPT-2: 256 + 50,000 + 1 = 50,257.)"
            ),
            mistakes=(
                Mistake(501, "A byte-level vocabulary starts with all 256 bytes; the merges add to them."),
                Mistake(756, "The special token gets an id of its own too."),
                Mistake(500, "The merges add to the 256 bytes, and the special token adds one more."),
            ),
        ),
        Question(
            recalls="05",
            section="2. Byte-pair encoding as compression",
            prompt=(
                'BPE replaces the pair "aa" by a new symbol Z, left to right, in "aaaaa" (five a\'s). How '
                "many symbols are left?"
            ),
            answer=3,
            explanation=(
                'Left to right, "aa" + "aa" + "a" becomes Z Z a: 3 symbols. The pair occurs 4 times if '
                "overlaps are counted, but a symbol can belong to only one replacement."
            ),
            mistakes=(
                Mistake(
                    1,
                    "The pair is counted 4 times, overlaps included, but the middle a's cannot be used twice: aa|aa|a.",
                ),
                Mistake(2, 'The fifth "a" has no partner left, so it stays: Z Z a.'),
            ),
        ),
        Question(
            recalls="04",
            section="2. From dot products to probabilities",
            prompt=(
                "Three candidate neighbours of a word have scores u · v of 2, 0 and 0. What probability "
                "does the softmax give the first?"
            ),
            answer=math.exp(2) / (math.exp(2) + 2),
            tolerance=0.01,
            explanation=(
                "softmax exponentiates first: e² / (e² + e⁰ + e⁰) = 7.39 / 9.39 ≈ 0.79. A score of 0 is "
                "not 'no chance': e⁰ = 1. This lesson's attention weights are the same softmax of "
                "dot products."
            ),
            mistakes=(
                Mistake(
                    1.0,
                    (
                        "That is 2 / (2 + 0 + 0), the scores divided by their sum; the softmax exponentiates first, "
                        "and e⁰ = 1."
                    ),
                ),
                Mistake(
                    math.exp(2) / (math.exp(2) + 1),
                    "There are two other candidates, each with e⁰ = 1: the denominator is e² + 2.",
                ),
                Mistake(1 / 3, "Equal shares would need equal scores."),
            ),
        ),
    ),
    "07": (
        Question(
            recalls="06",
            section="3. Scores, softmax and weights",
            prompt=(
                "One query q = [1, 0] and two keys k₁ = [2, 0] and k₂ = [0, 2] (so d_k = 2). What weight "
                "does scaled dot-product attention give k₁?"
            ),
            answer=math.exp(math.sqrt(2)) / (math.exp(math.sqrt(2)) + 1),
            tolerance=0.006,
            explanation=(
                "The scores are q · k / √d_k: 2 / √2 ≈ 1.41 and 0. The softmax gives "
                "e^1.41 / (e^1.41 + 1) ≈ 4.11 / 5.11 ≈ 0.80."
            ),
            mistakes=(
                Mistake(
                    math.exp(2) / (math.exp(2) + 1),
                    "That is the weight without the scaling: the scores are divided by √d_k = √2 first.",
                ),
                Mistake(
                    1.0,
                    "The softmax never gives all the weight to a finite score; the other key's e⁰ = 1 still counts.",
                ),
                Mistake(0.5, "The two scores differ (√2 against 0), so the weights differ."),
            ),
        ),
        Question(
            recalls="06",
            section="7. Masking",
            prompt="How do you stop query i from attending to a later key j?",
            kind="choice",
            options=(
                "set score (i, j) to −∞ before the softmax",
                "multiply score (i, j) by 0 before the softmax",
                "set weight (i, j) to 0 after the softmax",
                "multiply value j by 0",
            ),
            answer="a",
            explanation=(
                "e^−∞ = 0: key j gets exactly no weight, and the softmax shares the weight among the "
                "allowed keys, so each row still sums to 1. masked_fill with −∞, or adding a matrix of "
                "0 and −∞, does it."
            ),
            mistakes=(
                Mistake("b", "A score of 0 is an ordinary score: e⁰ = 1 gives key j a full share of the weight."),
                Mistake("c", "Then the row no longer sums to 1: the other weights are not shared out again."),
                Mistake(
                    "d",
                    (
                        "That takes value j away from every query, also those allowed to see it, and key j still "
                        "takes its share of query i's weight."
                    ),
                ),
            ),
        ),
        Question(
            recalls="05",
            section="3. Training BPE on text, one merge at a time",
            prompt=(
                'A byte-level BPE tokenizer trained only on English text without accents meets "é" on its '
                "own. How many tokens does it make of it?"
            ),
            answer=2,
            explanation=(
                '"é" is two bytes in UTF-8, 0xC3 0xA9, and a tokenizer that never saw them side by side '
                "has no merge for them: two byte tokens. Nothing is ever unknown, but unseen characters "
                "cost several tokens."
            ),
            mistakes=(
                Mistake(1, "A character is not a byte: é takes two bytes in UTF-8, and no merge joins them."),
                Mistake(3, "Three bytes is a Chinese character such as 東; é takes two."),
                Mistake(0, "Byte-level BPE never drops a character: it falls back to its bytes."),
            ),
        ),
    ),
    "08": (
        Question(
            recalls="07",
            section="2. Sinusoidal position encodings",
            prompt="With d = 4, what is the sinusoidal position encoding PE(pos = 2, column 2)?",
            answer=math.sin(2 / 10000 ** (2 / 4)),
            tolerance=0.0005,
            explanation=(
                "Column 2 is the sine of pair i = 1, so the angle is pos / 10000^(2i/d) = "
                "2 / 10000^(2/4) = 2 / 100 = 0.02 radians, and sin 0.02 ≈ 0.02: a slow hand, hardly "
                "moved."
            ),
            mistakes=(
                Mistake(math.cos(0.02), "Column 2 is even, so it holds a sine; the cosines are in the odd columns."),
                Mistake(
                    math.sin(2 / 10000),
                    (
                        "i counts pairs, so column 2 has i = 1 and the exponent 2i/d is 2/4; taking the column "
                        "number as i gives 2 · 2/4 = 1 and an angle 100 times too small."
                    ),
                ),
                Mistake(math.sin(2), "That is column 0, pair i = 0, the fastest hand; column 2 belongs to pair 1."),
                Mistake(math.sin(math.radians(0.02)), "The angles are in radians, not degrees."),
            ),
        ),
        Question(
            recalls="07",
            section="9. Rotary position embeddings: RoPE",
            prompt="What does RoPE rotate?",
            kind="choice",
            options=(
                "the queries and the keys, pair by pair, by angles that grow with the position",
                "the word embeddings, once before the first layer, as sinusoids are added there",
                "the queries, the keys and the values",
                "the attention weights, after the softmax",
            ),
            answer="a",
            explanation=(
                "RoPE turns each pair of a query or key at position m by m · ω_i, in every attention "
                "layer, so that their dot product depends only on the offset. Nothing is added to the "
                "input, and the values are left alone."
            ),
            mistakes=(
                Mistake(
                    "b",
                    (
                        "That is where sinusoidal encodings go; RoPE adds nothing to the input and acts inside every "
                        "attention layer."
                    ),
                ),
                Mistake("c", "The values are left alone: only the scores, q · k, need the offset."),
                Mistake(
                    "d",
                    (
                        "Weights are single numbers after the softmax; rotations act on the query and key vectors "
                        "before their dot product."
                    ),
                ),
            ),
        ),
        Question(
            recalls="06",
            section="5. Self-attention in matrix form",
            prompt=(
                "A sequence grows from 512 to 2,048 tokens. By what factor does the memory of one head's "
                "attention weight matrix grow?"
            ),
            answer=16,
            explanation=(
                "The weights are an N × N matrix: (2048 / 512)² = 4² = 16. Time grows the same way, "
                "while the number of parameters does not change at all."
            ),
            mistakes=(
                Mistake(4, "The length grew 4 times, but the weight matrix is N × N: 4² = 16."),
                Mistake(64, "N² grows with the square of the length, 4², not its cube."),
                Mistake(
                    1,
                    (
                        "That is true of the parameters (W_Q, W_K, W_V), not of the weights, which are computed for "
                        "every pair of tokens."
                    ),
                ),
            ),
        ),
    ),
    "09": (
        Question(
            recalls="08",
            section="3. Splitting `d_model` into heads: reshape, then transpose",
            prompt=(
                "The queries of a batch have shape (B, T, d_model) = (2, 10, 48), and there are 4 heads. "
                "What is their shape after `.view(B, T, h, d_k)` and then `.transpose(1, 2)`?"
            ),
            kind="shape",
            answer=(2, 4, 10, 12),
            explanation=(
                "Each head gets d_k = 48 / 4 = 12 features. view cuts the last axis into 4 blocks of 12, "
                "(2, 10, 4, 12); transpose(1, 2) swaps the token axis and the head axis, (2, 4, 10, 12): "
                "for each example and each head, a (T, d_k) matrix of queries, as single-head attention "
                "expects."
            ),
            mistakes=(
                Mistake(
                    (2, 10, 4, 12),
                    (
                        "That is the shape after view, before the transpose: the heads must come before the "
                        "tokens, so that each head is a batch of (T, d_k) matrices."
                    ),
                ),
                Mistake(
                    (2, 4, 10, 48),
                    "A head does not see all 48 features: each gets its own slice of d_k = 48 / 4 = 12.",
                ),
                Mistake(
                    (2, 10, 12, 4),
                    "transpose(1, 2) swaps axes 1 and 2, the tokens and the heads, not the last two axes.",
                ),
            ),
        ),
        Question(
            recalls="08",
            section="9. Counting parameters: the number of heads is free",
            prompt=("How many parameters does `MultiHeadAttention(d_model=64, n_heads=4)` have, biases included?"),
            answer=4 * 64**2 + 4 * 64,
            explanation=(
                "Four d_model × d_model projections (W_Q, W_K, W_V, W_O) and d_model biases each: "
                "4 · 64² + 4 · 64 = 16,384 + 256 = 16,640. The heads are slices of these matrices, so "
                "their number changes nothing."
            ),
            mistakes=(
                Mistake(
                    4 * (4 * 64**2 + 4 * 64),
                    (
                        "The heads do not each get full-size projections: they share the four d_model × d_model "
                        "matrices, each head reading its own slice."
                    ),
                ),
                Mistake(4 * 64**2, "Each of the four layers also has d_model = 64 biases: + 256."),
                Mistake(
                    3 * 64**2 + 3 * 64,
                    (
                        "That counts W_Q, W_K and W_V only; the output projection W_O, which combines the heads, "
                        "is the fourth."
                    ),
                ),
                Mistake(
                    4 * 64 * 16 + 4 * 16,
                    ("d_k = 16 is one head's slice; all heads together use the whole d_model × d_model matrices."),
                ),
            ),
        ),
        Question(
            recalls="06",
            section="3. Scores, softmax and weights",
            prompt=(
                "Every query and every key is multiplied by 3. By what factor do the attention scores "
                "q · k / √d_k grow?"
            ),
            answer=9,
            explanation=(
                "Each score is a sum of products q_i k_i, and each product grows by 3 · 3 = 9; √d_k depends "
                "on the dimension only. Scores 9 times larger make the softmax far sharper: a stream that "
                "grows with depth would saturate attention, which is what this lesson's normalisation "
                "prevents."
            ),
            mistakes=(
                Mistake(3, "Both the query and the key grow by 3, so their dot product grows by 3 · 3 = 9."),
                Mistake(1, "Dividing by √d_k does not undo it: d_k is the dimension, which stays the same."),
                Mistake(6, "The two factors multiply, they do not add: each product q_i k_i grows by 3 · 3 = 9."),
            ),
        ),
    ),
    "10": (
        Question(
            recalls="09",
            section="3. LayerNorm from scratch",
            prompt=(
                "What is the last entry of LayerNorm(x) for x = (0, 0, 3, 5), with gain 1, bias 0 and ε "
                "small enough to ignore?"
            ),
            answer=math.sqrt(2),
            tolerance=0.01,
            explanation=(
                "The mean is 2 and the deviations are (−2, −2, 1, 3); the variance divides their squares by "
                "d: (4 + 4 + 1 + 9) / 4 = 4.5. The last entry is 3 / √4.5 = 3 / 2.12 ≈ 1.41 (exactly √2)."
            ),
            mistakes=(
                Mistake(3 / math.sqrt(6), "LayerNorm's variance divides by d = 4, not by d − 1 = 3: 18 / 4 = 4.5."),
                Mistake(
                    5 / math.sqrt(8.5),
                    "That is RMSNorm, which does not subtract the mean; LayerNorm centres first: 5 − 2 = 3.",
                ),
                Mistake(3 / 4.5, "LayerNorm divides by the standard deviation √4.5, not by the variance 4.5."),
                Mistake(3, "The deviation 3 must still be divided by the standard deviation √4.5 ≈ 2.12."),
                Mistake(5 / math.sqrt(4.5), "Subtract the mean 2 first: the last entry's deviation is 3, not 5."),
            ),
        ),
        Question(
            recalls="09",
            section="1. The block at a glance",
            prompt="Which line is one pre-norm sub-layer, as in GPT-2 and most models since?",
            kind="choice",
            options=(
                "x ← x + f(LayerNorm(x))",
                "x ← LayerNorm(x + f(x))",
                "x ← LayerNorm(x) + f(LayerNorm(x))",
                "x ← x + LayerNorm(f(x))",
            ),
            answer="a",
            explanation=(
                "Pre-norm normalises only what goes into the sub-layer. The stream x itself is only ever "
                "added to, so the identity path runs unbroken from the bottom to the top, and one final "
                "LayerNorm after the last block normalises what the output layer reads."
            ),
            mistakes=(
                Mistake(
                    "b",
                    "That is post-norm, the 2017 paper's Add & Norm: it normalises the stream itself after every sum.",
                ),
                Mistake(
                    "c",
                    (
                        "That replaces the stream by its normalised copy at every sub-layer, so the identity path "
                        "no longer carries x through unchanged."
                    ),
                ),
                Mistake(
                    "d",
                    (
                        "That normalises the sub-layer's output; pre-norm normalises its input, and leaves what it "
                        "adds to the stream as it is."
                    ),
                ),
            ),
        ),
        Question(
            recalls="07",
            section="2. Sinusoidal position encodings",
            prompt="What is the length (the Euclidean norm) of one row of the sinusoidal position table with d = 64?",
            answer=math.sqrt(32),
            tolerance=0.03,
            explanation=(
                "The 64 columns are 32 pairs, a sine and a cosine of the same angle, and each pair adds "
                "sin² + cos² = 1 to the squared length: √32 ≈ 5.66, the same for every position. This "
                "lesson multiplies its word embeddings by √C so that the word is heard next to it."
            ),
            mistakes=(
                Mistake(8, "The entries are not all ±1: each sine and cosine pair adds sin² + cos² = 1, not 2."),
                Mistake(32, "32 is the squared length; the length is its square root, √32 ≈ 5.66."),
                Mistake(
                    1, "The rows are not normalised: each of the 32 sine and cosine pairs adds 1 to the squared length."
                ),
            ),
        ),
    ),
    "11": (
        Question(
            recalls="10",
            section="4. Label smoothing, by hand",
            prompt=(
                "Label smoothing with ε = 0.1 over V = 10 classes, as PyTorch defines it "
                "(`F.cross_entropy(..., label_smoothing=0.1)`). What target probability does the right "
                "class get?"
            ),
            answer=0.91,
            tolerance=0.004,
            explanation=(
                "The target is (1 − ε) · one-hot + ε / V: the right class gets 1 − 0.1 + 0.1 / 10 = 0.91 and "
                "each of the 9 others 0.01, so the target still sums to 1."
            ),
            mistakes=(
                Mistake(
                    0.9,
                    (
                        "That is the other convention, 1 − ε exactly; PyTorch spreads ε / V over all V classes, the "
                        "right one included: 0.9 + 0.01."
                    ),
                ),
                Mistake(0.01, "0.01 = ε / V is what each wrong class gets; the right class keeps 1 − ε on top of it."),
                Mistake(1.0, "Label smoothing takes ε away from the right class and spreads it over all the classes."),
            ),
        ),
        Question(
            recalls="10",
            section="2. Encoder and decoder",
            prompt="Where do the keys and values of a decoder layer's cross-attention come from?",
            kind="choice",
            options=(
                "from the encoder's last-layer output, projected by that decoder layer's own W_K and W_V",
                "from the encoder layer at the same depth as the decoder layer",
                "from the decoder's own earlier positions",
                "from the source embeddings, before the encoder",
            ),
            answer="a",
            explanation=(
                "The encoder's last layer gives one vector per source token, the memory; every decoder "
                "layer projects it into keys and values with its own W_K and W_V, while its queries come "
                "from the decoder's stream. A decoder-only GPT, this lesson's model, has no memory and no "
                "cross-attention."
            ),
            mistakes=(
                Mistake(
                    "b",
                    (
                        "Every decoder layer reads the same memory, the output of the encoder's last layer, "
                        "whatever its own depth."
                    ),
                ),
                Mistake(
                    "c",
                    (
                        "That is the decoder's self-attention; in cross-attention only the queries come from the "
                        "decoder."
                    ),
                ),
                Mistake(
                    "d",
                    (
                        "The keys and values come from what the encoder made of the source, after all its layers, "
                        "not from the raw embeddings."
                    ),
                ),
            ),
        ),
        Question(
            recalls="02",
            section="7. Real text: a character-level bigram model of Tiny Shakespeare",
            prompt=(
                "A model gives each of 65 characters the same probability, 1/65, at every position. What is "
                "its cross-entropy loss, in nats per character?"
            ),
            answer=math.log(65),
            tolerance=0.01,
            explanation=(
                "The loss is the mean of −ln p(next character) = −ln(1/65) = ln 65 ≈ 4.17 nats: a uniform "
                "guess, the number any model must beat, and where an untrained model's loss should start."
            ),
            mistakes=(
                Mistake(math.log2(65), "That is in bits (log base 2); nats use the natural logarithm: ln 65 ≈ 4.17."),
                Mistake(65, "65 is the perplexity, e^loss: as unsure as a fair choice among 65. The loss is ln 65."),
                Mistake(1 / 65, "That is the probability itself; the loss is its negative logarithm, −ln(1/65)."),
                Mistake(math.log10(65), "That is log base 10; nats use the natural logarithm: ln 65 ≈ 4.17."),
            ),
        ),
    ),
    "12": (
        Question(
            recalls="11",
            section="8. A KV cache",
            prompt=(
                "A GPT with 4 layers and n_embd = 128 generates with a KV cache. How many numbers does the "
                "cache hold for one sequence of 64 tokens?"
            ),
            answer=2 * 4 * 64 * 128,
            explanation=(
                "Every layer keeps a key and a value of 128 numbers for every token: 2 · 4 · 64 · 128 = "
                "65,536. The heads split the 128 numbers among them and add nothing. This lesson makes "
                "the cache smaller by sharing keys and values among heads."
            ),
            mistakes=(
                Mistake(4 * 64 * 128, "Both the keys and the values are cached: a factor 2."),
                Mistake(2 * 64 * 128, "Every one of the 4 layers keeps its own keys and values: a factor 4."),
                Mistake(
                    2 * 4 * 64 * 128 * 4,
                    "The heads split n_embd = 128 among them (n_head · d_head = 128); they do not multiply it.",
                ),
                Mistake(
                    2 * 4 * 64 * 64 * 128,
                    "A cache grows with the number of tokens, not its square: each token adds one key and one value.",
                ),
            ),
        ),
        Question(
            recalls="07",
            section="9. Rotary position embeddings: RoPE",
            prompt=(
                "With rotary positions, a query at position 5 and a key at position 3 have the score s. What "
                "score do the same two vectors get at positions 105 and 103?"
            ),
            kind="choice",
            options=(
                "s, the same score",
                "another score, because both absolute positions changed",
                "a smaller score, because positions far from the start are damped",
                "it depends on rows 103 and 105 of a learned position table",
            ),
            answer="a",
            explanation=(
                "RoPE turns the query by 105 · θ and the key by 103 · θ in each pair; the dot product of two "
                "rotated vectors depends only on the difference, (105 − 103) · θ = (5 − 3) · θ. So a key "
                "computed once keeps its meaning as the text moves on, which lets this lesson's cache roll."
            ),
            mistakes=(
                Mistake(
                    "b",
                    (
                        "Both vectors turn by their own positions, but a dot product sees only the difference of "
                        "the two rotations: 105 − 103 = 5 − 3."
                    ),
                ),
                Mistake(
                    "c",
                    (
                        "Nothing in RoPE depends on the distance from the start; only the offset between query "
                        "and key matters, 2 in both cases."
                    ),
                ),
                Mistake("d", "RoPE has no table: the angle of pair i is computed, m · θ_i, for any position m."),
            ),
        ),
        Question(
            recalls="08",
            section="9. Counting parameters: the number of heads is free",
            prompt="What is the shape of `w_k.weight` in `MultiHeadAttention(d_model=256, n_heads=8)`?",
            kind="shape",
            answer=(256, 256),
            explanation=(
                "w_k is one nn.Linear(d_model, d_model), whatever the number of heads: a (256, 256) weight, "
                "and head h reads its own 32 rows of it. Grouped-query attention, in this lesson, shrinks "
                "exactly this matrix, to (n_kv_head · d_head, d_model)."
            ),
            mistakes=(
                Mistake((32, 256), "32 is one head's slice; one d_model × d_model matrix serves all 8 heads."),
                Mistake((256, 32), "32 is one head's slice; one d_model × d_model matrix serves all 8 heads."),
                Mistake(
                    (8, 256, 32),
                    "The heads are slices of one (256, 256) matrix, not a stack of 8 separate ones.",
                ),
                Mistake((2048, 256), "The heads do not multiply the projection: 8 heads of 32 make 256 rows in all."),
            ),
        ),
    ),
}


def main(argv: list[str] | None = None) -> int:
    """``python -m course_lib.warmups notebooks/NN_name.ipynb ...``: write or update each lesson's cells."""
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("name the lesson notebooks: python -m course_lib.warmups notebooks/02_markov_models.ipynb ...")
        return 2
    for path in paths:
        if path.name[:2] not in WARMUPS:
            print(f"{path}: lesson {path.name[:2]} has no warm-up questions in course_lib/warmups.py")
            return 1
        changed = write_cells(path)
        print(f"{path}: {'written; re-run it (make run) to store the answer cell' if changed else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
