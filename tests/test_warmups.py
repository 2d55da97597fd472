"""The warm-ups at the top of lessons 02 on (`course_lib.warmups`): every question takes its right answer,
also written another way; every wrong answer a learner would give is told why it is wrong; a blank says
how to answer and gives nothing away; and each lesson's two cells are the ones the module writes, with
the stored output of a blank run."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import warmups
from course_lib.warmups import HOW, LESSONS, WARMUPS, WIDTH, Mistake, Question

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
QUESTIONS = [(lesson, i, q) for lesson, qs in WARMUPS.items() for i, q in enumerate(qs, 1)]
IDS = [f"{lesson}-q{i}" for lesson, i, _ in QUESTIONS]


def _cells(lesson: str) -> list[dict]:
    path = NOTEBOOKS / f"{LESSONS[lesson][0]}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _printed(lesson: str, **answers) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = warmups.check(lesson, **answers)
    assert result is None, f"check() must return nothing (a value would be echoed in the notebook), got {result!r}"
    return out.getvalue()


def _other_ways(q: Question) -> list:
    """The right answer as a learner might also write it."""
    if q.kind == "shape":
        return [list(q.answer), torch.Size(q.answer), np.array(q.answer)]
    if q.kind == "choice":
        return [q.answer.upper(), f"({q.answer})", f" {q.answer}) "]
    x = float(q.answer)
    # a whole number is written whole (16640); a fraction to three significant digits, as on paper
    rounded = x if isinstance(q.answer, int) else float(f"{x:.3g}")
    return [rounded, str(rounded), np.float32(x), torch.tensor(x), Fraction(x).limit_denominator(1000)]


# --- the questions -----------------------------------------------------------------------------------------


def test_lessons_02_to_12_each_have_two_or_three_spaced_questions():
    for n in range(2, 13):
        lesson = f"{n:02d}"
        assert lesson in WARMUPS, f"lesson {lesson} has no warm-up; lessons with one: {sorted(WARMUPS)}"
        recalls = [int(q.recalls) for q in WARMUPS[lesson]]
        assert 2 <= len(recalls) <= 3, f"lesson {lesson}: {len(recalls)} questions, expected 2 or 3"
        assert n - 1 in recalls, f"lesson {lesson}: no question on lesson {n - 1:02d} (it recalls {recalls})"
        assert min(recalls) < n - 1, f"lesson {lesson}: no question from further back than {n - 1:02d} ({recalls})"
        assert max(recalls) < n, f"lesson {lesson} asks about lesson {max(recalls)}, which comes later"


@pytest.mark.parametrize(("lesson", "i", "q"), QUESTIONS, ids=IDS)
def test_the_right_answer_and_the_same_answer_written_another_way_are_right(lesson, i, q):
    for answer in [q.answer, *_other_ways(q)]:
        v = warmups.verdict(q, i, answer)
        assert v.status == "right", f"lesson {lesson} q{i}: {answer!r} should be right; the learner read:\n{v.text}"
        assert " ".join(q.explanation.split()[:6]) in " ".join(v.text.split()), (
            f"lesson {lesson} q{i}: a right answer is explained too; the learner read:\n{v.text}"
        )


@pytest.mark.parametrize(("lesson", "i", "q"), QUESTIONS, ids=IDS)
def test_every_known_mistake_is_told_why_and_shown_the_answer(lesson, i, q):
    assert q.mistakes, f"lesson {lesson} q{i} names no wrong answer a learner would give"
    for m in q.mistakes:
        v = warmups.verdict(q, i, m.answer)
        flat = " ".join(v.text.split())
        assert v.status == "wrong" and v.mistake == m, (
            f"lesson {lesson} q{i}: {m.answer!r} should be the mistake {m.why!r}; the learner read:\n{v.text}"
        )
        assert " ".join(m.why.split()) in flat, f"lesson {lesson} q{i}: the misconception is not named:\n{v.text}"
        assert "The answer is" in flat and " ".join(q.explanation.split()[:6]) in flat, (
            f"lesson {lesson} q{i}: a wrong answer must also be shown the right one, explained:\n{v.text}"
        )


@pytest.mark.parametrize(("lesson", "i", "q"), QUESTIONS, ids=IDS)
def test_an_unforeseen_wrong_answer_is_wrong_and_gets_the_explanation(lesson, i, q):
    odd = {"number": 12345.6, "shape": (9, 9, 9), "choice": "d" if q.answer != "d" else "c"}[q.kind]
    v = warmups.verdict(q, i, odd)
    assert v.status == "wrong", f"lesson {lesson} q{i}: {odd!r} was judged {v.status}:\n{v.text}"
    assert "The answer is" in v.text, v.text


def test_each_wrong_option_of_a_choice_names_its_misconception():
    for lesson, i, q in QUESTIONS:
        if q.kind != "choice":
            continue
        named = sorted(m.answer for m in q.mistakes)
        wrong = sorted(set(q.letters) - {q.answer})
        assert named == wrong, f"lesson {lesson} q{i}: wrong options {wrong}, mistakes named for {named}"
        assert q.answer in q.letters, f"lesson {lesson} q{i}: the answer {q.answer!r} is not an option letter"


def test_no_mistake_lies_within_reach_of_the_answer():
    for lesson, i, q in QUESTIONS:
        for m in q.mistakes:
            assert warmups.verdict(q, i, m.answer).status == "wrong", (
                f"lesson {lesson} q{i}: the mistake {m.answer!r} is within the tolerance of the answer {q.answer!r}"
            )


@pytest.mark.parametrize(("lesson", "i", "q"), QUESTIONS, ids=IDS)
def test_a_blank_says_how_to_answer_and_gives_nothing_away(lesson, i, q):
    for blank in (..., None):
        v = warmups.verdict(q, i, blank)
        assert v.status == "blank", f"lesson {lesson} q{i}: {blank!r} should read as not answered yet"
        assert f"replace the ... after q{i}=" in v.text and q.how() in " ".join(v.text.split()), v.text
        assert q.explanation[:30] not in v.text and "answer is" not in v.text, (
            f"a blank gives the answer away:\n{v.text}"
        )


@pytest.mark.parametrize(("lesson", "i", "q"), QUESTIONS, ids=IDS)
def test_an_answer_of_the_wrong_kind_says_what_was_expected_and_what_was_given(lesson, i, q):
    given = {"number": "four", "shape": 12, "choice": 2}[q.kind]
    v = warmups.verdict(q, i, given)
    flat = " ".join(v.text.split())
    assert v.status == "unreadable", f"lesson {lesson} q{i}: {given!r} was judged {v.status}"
    assert q.how() in flat and repr(given) in flat and type(given).__name__ in flat, v.text
    assert "answer is" not in flat, f"an unreadable answer gives the answer away:\n{v.text}"


def test_a_bool_is_not_a_number_and_a_fraction_of_a_shape_is_not_a_shape():
    q = WARMUPS["06"][0]  # 757
    v = warmups.verdict(q, 1, True)
    assert v.status == "unreadable", f"True is not a number here, but it was judged {v.status}:\n{v.text}"
    shape = next(q for _, _, q in QUESTIONS if q.kind == "shape")
    v = warmups.verdict(shape, 1, (3.5, 3))
    assert v.status == "unreadable", f"(3.5, 3) is not a shape, but it was judged {v.status}:\n{v.text}"


def test_a_number_written_with_thousands_commas_is_told_how_python_reads_it():
    q = WARMUPS["09"][1]  # 16,640 parameters
    assert q.answer == 16_640, f"the question's answer changed: {q.answer}"
    v = warmups.verdict(q, 2, (16, 640))  # what q2=16,640 gives in Python
    flat = " ".join(v.text.split())
    assert v.status == "unreadable" and "a comma makes a tuple: write 16640 or 16_640" in flat, v.text
    assert "answer is" not in flat, f"the hint must not give the answer away:\n{v.text}"
    assert warmups.verdict(q, 2, 16_640).text.startswith("✔ 2. Right: 16,640."), "whole numbers shown in full"
    for not_grouped in [(16, 64), (1, 50, 624), (16.0, 640), (True, 640)]:
        text = warmups.verdict(q, 2, not_grouped).text
        assert "comma makes a tuple" not in text, f"{not_grouped!r} is not a number with commas:\n{text}"
    shape = WARMUPS["12"][2]  # a shape: (16, 640) is a shape there, read as one
    assert shape.kind == "shape" and warmups.verdict(shape, 3, (16, 640)).status == "wrong"


def test_every_printed_line_fits_the_notebook_column():
    for lesson, i, q in QUESTIONS:
        for answer in [q.answer, ..., "?", *(m.answer for m in q.mistakes)]:
            for line in warmups.verdict(q, i, answer).text.splitlines():
                assert len(line) <= WIDTH, f"lesson {lesson} q{i}: {len(line)} characters: {line}"


def test_the_examples_in_the_how_to_answer_line_are_never_an_answer():
    for lesson, i, q in QUESTIONS:
        assert not (q.kind == "shape" and tuple(q.answer) == (4, 7)), f"lesson {lesson} q{i}: the example is the answer"
        assert not (q.kind == "number" and abs(float(q.answer) - 3 / 7) <= q.tol), f"lesson {lesson} q{i}"
    assert "(4, 7)" in HOW["shape"] and "3 / 7" in HOW["number"], "the examples checked above changed"


def test_check_answers_the_whole_warm_up_and_counts_what_was_answered():
    first, second, third = WARMUPS["03"]
    text = _printed("03", q1=first.answer, q2=second.mistakes[0].answer)
    assert "✔ 1." in text and "✘ 2." in text and "○ 3. Not answered yet" in text, text
    assert text.rstrip().endswith("1 of 2 answered right. Nothing here is graded or recorded."), text
    assert _printed(3).rstrip() == _printed("03").rstrip(), "a lesson can be named 3 or '03'"


def test_bad_lessons_and_answer_names_say_what_is_expected():
    with pytest.raises(ValueError, match=r"lessons with a warm-up: 02, 03.*got '01'"):
        warmups.check("01")
    with pytest.raises(TypeError, match=r"q1, q2, q3; got also q4"):
        warmups.check("02", q4=1)
    with pytest.raises(ValueError, match="kind is one of"):
        Question(recalls="01", section="1. x", prompt="?", answer=1, explanation=".", kind="text")
    with pytest.raises(ValueError, match="choice question has options"):
        Question(recalls="01", section="1. x", prompt="?", answer="a", explanation=".", kind="choice")
    with pytest.raises(ValueError, match="recalls names a lesson"):
        Question(recalls="13", section="1. x", prompt="?", answer=1, explanation=".", mistakes=(Mistake(2, "."),))


# --- the lessons' cells ----------------------------------------------------------------------------------


def _heading_titles(lesson: str) -> list[str]:
    titles = []
    for cell in _cells(lesson):
        if cell["cell_type"] == "markdown":
            titles += [m.group(1).strip() for m in re.finditer(r"^#{2,4}\s+(.*)$", _source(cell), re.M)]
    return titles


def test_every_question_points_to_a_heading_of_the_lesson_it_recalls():
    for lesson, i, q in QUESTIONS:
        assert (NOTEBOOKS / f"{LESSONS[q.recalls][0]}.ipynb").is_file(), f"no notebook for lesson {q.recalls}"
        titles = _heading_titles(q.recalls)
        assert q.section in titles, f"lesson {lesson} q{i}: lesson {q.recalls} has no heading {q.section!r}"


@pytest.mark.parametrize("lesson", sorted(WARMUPS))
def test_the_lesson_asks_its_warm_up_before_its_first_section(lesson):
    cells = _cells(lesson)
    sources = [_source(c) for c in cells]
    at = sources.index(warmups.markdown(lesson)) if warmups.markdown(lesson) in sources else None
    assert at is not None, (
        f"lesson {lesson} lacks its warm-up cell as course_lib/warmups.py writes it: run "
        f"python -m course_lib.warmups notebooks/{LESSONS[lesson][0]}.ipynb, then make run"
    )
    assert sources[at + 1] == warmups.answer_cell(lesson), f"lesson {lesson}: the answer cell does not follow"
    first_section = next(i for i, s in enumerate(sources) if s.startswith("## 1."))
    assert at + 2 == first_section, f"lesson {lesson}: the warm-up is not right before section 1"
    imports = [s for c, s in zip(cells[:at], sources[:at]) if c["cell_type"] == "code"]
    assert any(re.search(r"^from course_lib import .*\bwarmups\b", s, re.M) for s in imports), (
        f"lesson {lesson} does not import warmups before its warm-up"
    )


@pytest.mark.parametrize("lesson", sorted(WARMUPS))
def test_the_stored_answer_cell_shows_a_blank_run(lesson):
    cells = _cells(lesson)
    cell = next(c for c in cells if _source(c) == warmups.answer_cell(lesson))
    assert "nbval-ignore-output" not in cell["metadata"].get("tags", []), "nbval must compare this output"
    stored = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o.get("output_type") == "stream")
    assert stored == _printed(lesson), f"lesson {lesson}: re-run the lesson (make run) to store the blank run"


def test_the_markdown_reads_as_one_numbered_list_within_the_line_width():
    for lesson in WARMUPS:
        lines = warmups.markdown(lesson).splitlines()
        assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
        for line in lines:
            stripped = line.lstrip()
            starts_block = re.match(r"(\d+\.|[-*+>#])\s", stripped)
            # a wrapped line must not start a list item or a heading of its own
            assert not starts_block or re.match(r"(\d\. \*From |   - [a-h]\) |## Warm-up$)", line), (
                f"lesson {lesson}: a wrapped line starts a Markdown block: {line!r}"
            )


def test_writing_the_cells_inserts_them_once_and_updates_them(tmp_path):
    path = tmp_path / "02_markov_models.ipynb"
    shutil.copy(NOTEBOOKS / "02_markov_models.ipynb", path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"] if c.get("id") not in (warmups.MARKDOWN_ID, warmups.CODE_ID)]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert warmups.write_cells(path) is True, "a lesson without its warm-up cells must get them"
    assert warmups.write_cells(path) is False, "writing twice must change nothing"
    sources = [_source(c) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    at = sources.index(warmups.markdown("02"))
    assert sources[at + 1] == warmups.answer_cell("02") and sources[at + 2].startswith("## 1."), (
        f"the cells were written at {at}, not just before section 1: {[s[:20] for s in sources[at : at + 3]]}"
    )
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][at]["source"] = ["## Warm-up\n", "an old question\n"]
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert warmups.write_cells(path) is True, "an edited warm-up cell must be written back"
    assert [_source(c) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]].count(
        warmups.markdown("02")
    ) == 1
