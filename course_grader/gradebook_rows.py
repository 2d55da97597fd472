"""A row of the gradebook: one student's latest attempt at an assignment, as exports, feedback and reports read it,
with its marks, its late penalty and its adjustments applied (`make_row`).

    score = the tests' points + the marks;    final = max(0, score - late penalty + manual points)

`Gradebook.rows` reads what a row needs (`StoredResult`, `RowContext`) and makes the rows here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from .deadlines import Adjustment, Deadline, Extension, lateness


@dataclass
class Mark:
    """A person's mark for one manually graded answer."""

    id: int
    student: str
    assignment: str
    grade_id: str
    points: float
    rubric: str  # the rubric item chosen ("" for none)
    comment: str  # for the student
    grader: str
    answer_sha256: str  # the answer it was given for: a changed answer needs marking again
    created_at: str
    replaces: int | None = None  # the mark of this answer on record when it was given (None: the first)


@dataclass
class Row:
    """One (student, assignment): its latest attempt, with every adjustment applied."""

    student: str
    name: str
    assignment: str
    attempt: int
    attempts: int
    status: str
    score: float
    max_score: float
    late_penalty: float
    days_late: int
    manual: float
    final: float
    file: str | None
    submitted_at: str | None
    submitted_from: str | None
    graded_at: str
    seconds: float  # how long grading it took
    solutions_path: str
    solutions_sha256: str
    tests: list[dict]  # every test's result, and the manually graded answers (`manual: true`) in notebook order
    notes: list[str]
    adjustments: list[Adjustment] = field(default_factory=list)
    auto_score: float = 0.0  # the tests' points alone (score = auto_score + the marks)
    to_mark: int = 0  # manually graded answers still waiting for a person
    enrolment: str = "active"  # the roster's status: active | dropped | test
    email: str = ""
    lms_late: bool = False  # the LMS marked the submission late (Canvas's flag, from `course unpack`)
    late_text: str = ""  # how late, in words and in the deadline's zone ("" when on time)
    extension: str = ""  # the student's own deadline, in words: "Extension to 2026-12-05 23:59 +01:00 (on time)"
    regrades: list[dict] = field(default_factory=list)  # {at, old, new, reason}: this attempt graded again


class StoredResult(NamedTuple):
    """A student's latest attempt at an assignment, as `Gradebook.rows` reads it from `results`."""

    student: str
    assignment: str
    attempt: int
    status: str
    auto: float  # the tests' points
    max_score: float  # the tests' maximum
    file: str | None
    sha: str | None
    submitted_at: str | None
    submitted_from: str | None
    solutions_path: str
    solutions_sha256: str
    graded_at: str
    seconds: float
    tests: str  # JSON
    notes: str  # JSON
    manual: str  # JSON: the manually graded answers
    attempts: int


@dataclass
class RowContext:
    """What the rows of a gradebook (or of one student, one assignment) need besides their results."""

    people: dict[str, tuple]  # student -> (name, email, status, position) from the roster
    deadlines: dict[str, Deadline]
    extensions: dict[tuple[str, str], Extension]  # (student, assignment) -> the extension that counts
    adjustments: dict[tuple[str, str], list[Adjustment]]
    marks: dict[tuple[str, str, str], Mark]  # (student, assignment, grade_id) -> the latest mark
    late_flags: dict[tuple[str, str], tuple[str | None, bool]]  # (student, assignment) -> (file's sha256, LMS late)
    replaced: dict[tuple[str, str, int], list[dict]]  # (student, assignment, attempt) -> its replaced versions


def make_row(r: StoredResult, ctx: RowContext) -> Row:
    """A gradebook row from a result: its marks, late penalty and adjustments applied."""
    key = (r.student, r.assignment)
    tests, manual = json.loads(r.tests), json.loads(r.manual)
    marked, to_mark = apply_marks(manual, r.student, r.assignment, ctx.marks)
    score = round(r.auto + marked, 2)
    max_score = round(r.max_score + sum(t["max_points"] for t in manual), 2)
    late = lateness(ctx.deadlines.get(r.assignment), ctx.extensions.get(key), r.submitted_at, r.status, max_score)
    adjs = ctx.adjustments.get(key, [])
    extra = round(sum(a.points for a in adjs), 2)
    final = max(0.0, score - late.penalty + extra)
    if any(a.cap for a in adjs):
        final = min(final, max(max_score, score - late.penalty))  # --cap: no extra credit from adjustments
    name, email, enrolment, _ = ctx.people.get(r.student, ("", "", "active", 0))
    return Row(
        r.student,
        name,
        r.assignment,
        r.attempt,
        r.attempts,
        r.status,
        score,
        max_score,
        late.penalty,
        late.days,
        extra,
        round(final, 2),
        r.file,
        r.submitted_at,
        r.submitted_from,
        r.graded_at,
        r.seconds,
        r.solutions_path,
        r.solutions_sha256,
        _in_order(tests, manual),
        json.loads(r.notes),
        adjs,
        auto_score=r.auto,
        to_mark=to_mark,
        enrolment=enrolment,
        email=email,
        lms_late=ctx.late_flags.get(key) == (r.sha, True),
        late_text=late.text,
        extension=late.extension,
        regrades=_regrades(ctx.replaced.get((*key, r.attempt), []), r.auto),
    )


def apply_marks(manual: list[dict], student: str, assignment: str, marks: dict) -> tuple[float, int]:
    """Give each manually graded answer its latest mark (in place); (points marked, answers still to mark).
    A mark given to another answer (the student handed in again and changed it) no longer applies."""
    total, waiting = 0.0, 0
    for t in manual:
        t["manual"] = True
        if t["status"] not in ("to be marked", "marked"):
            continue  # not attempted, not submitted: nothing to mark
        m = marks.get((student, assignment, t["grade_id"]))
        if m is not None and m.answer_sha256 == t.get("answer_sha256"):
            t.update(
                points=m.points,
                status="marked",
                rubric=m.rubric,
                comment=m.comment,
                grader=m.grader,
                marked_at=m.created_at,
            )
            t["message"] = "\n".join(x for x in (m.rubric, m.comment) if x)
            total += m.points
        else:
            t.update(points=0.0, status="to be marked")
            if m is not None:
                t["message"] = "The answer changed since it was marked; it is to be marked again."
            waiting += 1
    return round(total, 2), waiting


def _in_order(tests: list[dict], manual: list[dict]) -> list[dict]:
    """The tests with each manually graded answer after the test it follows in the notebook (`after`)."""
    if not manual:
        return tests
    merged = list(tests)
    for t in manual:
        after = t.get("after")
        at = next((i + 1 for i, x in enumerate(merged) if x.get("grade_id") == after), 0 if not after else len(merged))
        while at < len(merged) and merged[at].get("manual"):  # after the answers already placed there
            at += 1
        merged.insert(at, t)
    return merged


def _regrades(versions: list[dict], current: float) -> list[dict]:
    """The times an attempt was graded again (not a first file replacing "not submitted"), with the
    score before and after and the reason the teacher gave."""
    found = []
    scores = [v["score"] for v in versions] + [current]
    for i, v in enumerate(versions):
        if v["status"] == "not submitted":
            continue
        old, new = scores[i], scores[i + 1]
        if old != new or v["reason"]:
            found.append(
                {
                    "at": v["replaced_at"],
                    "old": old,
                    "new": new,
                    "reason": v["reason"],
                    "solutions_sha256": v["solutions_sha256"],
                }
            )
    return found
