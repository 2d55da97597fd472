"""`course check exercises/NN_name.ipynb`: run a learner's notebook and say which exercises pass.

The notebook is read, never written. `course check` grades the same notebook as the grader does
(see the grader's `grade.merge`): only the code cells that carry nbgrader metadata run (the setup cell, given
code, the answer cells, and the test cells with any hidden tests stripped), top to bottom, in a
fresh kernel in the notebook's own folder, so relative paths work as in JupyterLab. A cell the
learner added has no such metadata: the grader never sees it, so neither does `course check`, and
the table lists it under "Not run", with why. A helper defined there and used in an answer would
pass in JupyterLab and fail in grading with a NameError; the row of that test says so.

A manually graded answer (nbgrader's `grade: true, solution: true`, a written answer) has no test:
its row says that a person marks it after the notebook is handed in, and whether it is still blank.

Only visible tests run, so the total says that a teacher's hidden tests may lower it. It is the
learner's own code on the learner's own machine, so there is no sandbox: the checks run in the
kernel next to the answers, exactly as in JupyterLab. The notebook is read through `assignment`'s models
(it is both the exercise set and the work handed in), scored by `feedback.score` as the grader scores it,
and the table and its words are `feedback`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .assignment import AddedCell, Assignment, Submission
from .feedback import MANUAL_NOTE, MANUAL_STATUS, TestResult, score
from .notebook import read_notebook
from .process import Limits
from .steps import run_cells


@dataclass
class Checked:
    """What `course check` found: one row per test and written answer (notebook order), the code cells it did
    not run, and notes (an answer cell that stopped after its test's names were defined)."""

    rows: list[TestResult]
    skipped: list[AddedCell]
    notes: list[str]


def check_notebook(path: Path, limits: Limits | None = None) -> Checked:
    """Run the cells the grader runs (the visible tests only) and score them as the grader does."""
    path = Path(path).resolve()
    nb = read_notebook(path)
    assignment = Assignment.from_notebook(nb, path.stem, path)
    submission = Submission.parse(nb, assignment)
    limits = limits or Limits(memory_mb=0).from_notebook(nb)
    planned = assignment.steps(strip_hidden=True)
    report = run_cells([step for step, _ in planned], limits=limits, cwd=path.parent)
    runs = {cell.index: report.results[i] for i, (_, cell) in enumerate(planned) if i in report.results}
    scored = score(assignment, submission, runs)
    written = [
        TestResult(
            c.grade_id,
            c.title,
            0.0,
            c.points,
            MANUAL_STATUS,
            MANUAL_NOTE + ("; you have not answered yet" if c.source.strip() in ("", c.stub.strip()) else "") + ".",
        )
        for c in assignment.written
    ]
    order = {c.grade_id: c.index for c in assignment.cells}
    rows = sorted([*scored.tests, *written], key=lambda r: order.get(r.grade_id, 0))
    return Checked(rows, submission.added, scored.notes + report.notes)
