"""One model of an exercise set, and one of a notebook handed in: each read once, then every step reads them.

    Assignment.read(path)                the teacher's solution notebook (or, for `course check`, the
                                         learner's own notebook, read the same way)
        .cells                           its code cells and written answers, in order, as `Cell`s:
                                         setup, given code, answers, tests, written answers
        .tests, .answers, .written       the cells of each kind
        .owners[test.grade_id]           the answer cells a test grades (those since the test before)
        .max_score                       what the tests can give (written answers come on top)
        .steps(answers)                  what a kernel and the checks run, in order, with a learner's
                                         answers in place of the solutions
    Submission.parse(nb, assignment)     a notebook handed in: its answer cells by grade_id (the first of
                                         each), the cells it repeats, and the code cells it added

`course check` (`check.py`) and `course grade` (the grader's `grade.py`) read notebooks only through
these, and score a run with one function (`feedback.score`), so a test is classified, explained and
scored the same way wherever it runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .notebook import (
    BEGIN_HIDDEN,
    defined_names,
    grade_id,
    is_manual,
    is_solution,
    is_test,
    nbgrader_meta,
    points,
    read_notebook,
    source,
    strip_hidden_tests,
    strip_solution,
)
from .steps import Step

HIDDEN_MARK = "\x1e course: the hidden tests start here \x1e"  # printed by a test cell where its hidden tests start


@dataclass(frozen=True)
class Cell:
    """One cell that takes part in grading."""

    index: int  # its position in the notebook (0-based; JupyterLab shows index + 1)
    kind: str  # "setup" (teacher code before the first answer), "code" (teacher code after it), "answer",
    # "test", or "written" (a manually graded answer: a person marks it)
    grade_id: str | None
    source: str
    title: str  # the heading of the exercise it belongs to ("Exercise 3: A stable softmax")
    points: float = 0.0  # a test's or a written answer's
    stub: str = ""  # an answer's or written answer's blank version (what `course build` writes)
    hidden: bool = False  # a test cell with hidden tests in it
    code: bool = True  # a code cell (a written answer may be code: it runs, as an answer does, and is marked)


@dataclass
class Assignment:
    """An exercise set as its notebook defines it (see the module's docstring)."""

    name: str  # the notebook's stem: the assignment's id ("06_attention")
    cells: list[Cell]
    path: Path | None = None
    checks: str | None = None  # a teacher's own checks module, relative to the notebook (`course new --checks`)
    limits: dict = field(default_factory=dict)  # the set's time budgets (`metadata.course.limits`)
    owners: dict[str, list[Cell]] = field(default_factory=dict)  # test grade_id -> the answers it grades

    @classmethod
    def read(cls, path: Path) -> Assignment:
        return cls.from_notebook(read_notebook(path), Path(path).stem, Path(path))

    @classmethod
    def from_notebook(cls, nb: dict, name: str, path: Path | None = None) -> Assignment:
        cells, title, seen_answer, pending, graded, seen = [], "", False, [], [], set()
        owners: dict[str, list[Cell]] = {}
        for i, cell in enumerate(nb["cells"]):
            text = source(cell)
            if cell.get("cell_type") == "markdown" and not is_manual(cell):
                title = _heading(text) or title
                continue
            gid = grade_id(cell)
            if not nbgrader_meta(cell) or (gid is not None and gid in seen):
                continue  # not the teacher's (a learner's added cell), or a copy of one: see Submission
            seen.add(gid)
            if is_manual(cell):
                stub, code = strip_solution(cell), cell.get("cell_type") == "code"
                found = Cell(i, "written", gid or f"cell {i}", text, title, points(cell), stub, code=code)
            elif cell.get("cell_type") != "code":
                continue
            elif is_test(cell):
                found = Cell(i, "test", gid or f"cell {i}", text, title, points(cell), hidden=BEGIN_HIDDEN in text)
                graded = pending or graded  # a test right after another grades the same answers
                owners[found.grade_id], pending = graded, []
            elif is_solution(cell):
                found = Cell(i, "answer", gid, text, title, stub=strip_solution(cell))
                seen_answer = True
                pending.append(found)
            else:
                found = Cell(i, "code" if seen_answer else "setup", gid, text, title)
            cells.append(found)
        meta = nb.get("metadata", {}) if isinstance(nb.get("metadata"), dict) else {}
        course = meta.get("course") if isinstance(meta.get("course"), dict) else {}
        checks = course.get("checks") if isinstance(course.get("checks"), str) and course.get("checks") else None
        limits = course.get("limits") if isinstance(course.get("limits"), dict) else {}
        return cls(name, cells, path, checks, limits, owners)

    def of_kind(self, kind: str) -> list[Cell]:
        return [c for c in self.cells if c.kind == kind]

    @property
    def tests(self) -> list[Cell]:
        return self.of_kind("test")

    @property
    def answers(self) -> list[Cell]:
        return self.of_kind("answer")

    @property
    def written(self) -> list[Cell]:
        return self.of_kind("written")

    @property
    def max_score(self) -> float:
        """The points the tests can give (written answers come on top, when a person marks them)."""
        return sum(c.points for c in self.tests)

    def steps(
        self, submission: Submission | None = None, *, mark_hidden: bool = False, strip_hidden: bool = False
    ) -> list[tuple[Step, Cell]]:
        """What runs, in order, each with the cell it comes from: the teacher's code cells, with the
        `submission`'s answers in place of the solutions, an answer missing from it run as its blank stub
        (a written answer in a code cell runs too, as an answer). `mark_hidden`: each test prints
        HIDDEN_MARK where its hidden tests start (a failure there can be told from one in the visible
        part); `strip_hidden`: without them (`course check`: its own run shows no hidden test)."""
        found = []
        for cell in self.cells:
            text, kind = cell.source, cell.kind
            if kind == "written" and not cell.code:
                continue
            if kind in ("answer", "written") and submission is not None:
                given = submission.answers if kind == "answer" else submission.written
                text = given.get(cell.grade_id, cell.stub)
            elif kind == "test" and strip_hidden:
                text = strip_hidden_tests(text)
            elif kind == "test" and mark_hidden:
                text = re.sub(
                    r"(?m)^([ \t]*)(### BEGIN HIDDEN TESTS)", lambda m: f"{m[1]}print({HIDDEN_MARK!r})  {m[2]}", text
                )
            kind = "answer" if kind == "written" else kind
            found.append((Step(kind, text, cell.grade_id, hidden=kind == "test" and cell.hidden), cell))
        return found


def _heading(text: str) -> str:
    """A markdown cell's first heading, without its points ("Exercise 3: Title (3 points)" -> "Exercise 3: Title")."""
    for line in text.splitlines():
        if line.startswith("#"):
            return re.sub(r"\s*\([^()]*\bpoints?\)\s*$", "", line.lstrip("#").strip())
    return ""


@dataclass(frozen=True)
class AddedCell:
    """A code cell of a notebook handed in that neither `course check` nor the grader runs."""

    position: int  # 1-based, counting every cell, as JupyterLab shows them
    first_line: str
    defines: frozenset[str]  # the names it binds at its top level (to explain a NameError)
    why: str  # "added" (no grade_id the teacher's notebook knows) or "copy" (a grade_id seen above it)
    below: str  # the exercise heading above it
    grade_id: str | None = None  # a copy's


@dataclass
class Submission:
    """A notebook handed in, read once: what grading takes from it, and what it leaves out."""

    answers: dict[str, str]  # answer grade_id -> source: the first cell of each
    written: dict[str, str]  # written answer grade_id -> text: the first cell of each
    ids: set[str]  # every grade_id in it
    duplicates: list[str]  # grade_ids on more than one cell (the first is graded)
    added: list[AddedCell]  # code cells that are not run, in order
    missing: set[str]  # the assignment's answer cells it does not have

    @classmethod
    def parse(cls, nb: dict, assignment: Assignment) -> Submission:
        known = {c.grade_id for c in assignment.cells} - {None}
        answers, written, counts, added, title = {}, {}, {}, [], ""
        for i, cell in enumerate(nb.get("cells", [])):
            text = source(cell)
            if cell.get("cell_type") == "markdown" and not is_manual(cell):
                title = _heading(text) or title
            gid = grade_id(cell)
            if gid is not None:
                counts[gid] = counts.get(gid, 0) + 1
            if cell.get("cell_type") == "code" and (gid not in known or counts.get(gid, 0) > 1):
                lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
                if lines:
                    why = "copy" if gid in known else "added"
                    added.append(AddedCell(i + 1, lines[0][:60], frozenset(defined_names(text)), why, title, gid))
                continue
            if gid is None or counts[gid] > 1:
                continue
            if is_manual(cell):
                written[gid] = text
            elif cell.get("cell_type") == "code":
                answers[gid] = text
        missing = {c.grade_id for c in assignment.answers} - set(answers)
        duplicates = sorted(g for g, n in counts.items() if n > 1)
        return cls(answers, written, set(counts), duplicates, added, missing)
