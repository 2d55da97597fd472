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
kernel next to the answers, exactly as in JupyterLab. The table and its words are `feedback`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..feedback import (
    ADDED_CELL,
    COPIED_CELL,
    MANUAL_NOTE,
    MANUAL_STATUS,
    TestResult,
    answer_owner,
    classify,
    exercise_titles,
    explain,
    explain_missing,
    score,
)
from .notebook import (
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
from .process import Limits
from .steps import Step, run_steps


@dataclass
class Skipped:
    position: int  # 1-based, counting every cell of the notebook (markdown too), as JupyterLab shows them
    first_line: str  # the cell's first non-blank line
    why: str
    defines: frozenset[str]  # top-level names the cell defines (functions, classes, variables, imports)
    below: str  # the exercise heading above it ("" before the first)


def plan(nb: dict) -> tuple[list[Step], dict[int, int], list[Skipped]]:
    """The steps the grader would run (step index -> cell index), and the code cells it would not."""
    steps, where, skipped, seen = [], {}, [], set()
    titles = exercise_titles(nb)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        text = source(cell)
        gid = grade_id(cell)
        why = None
        if not nbgrader_meta(cell):
            why = ADDED_CELL
        elif gid is not None and gid in seen:
            why = COPIED_CELL.format(gid=gid)
        if why is not None:
            if text.strip():
                first = next(line for line in text.splitlines() if line.strip()).strip()
                skipped.append(Skipped(i + 1, first, why, frozenset(defined_names(text)), titles.get(i, "")))
            continue
        seen.add(gid)
        kind = "test" if is_test(cell) else "answer" if is_solution(cell) else "code"
        if kind == "test":
            text = strip_hidden_tests(text)
        where[len(steps)] = i
        steps.append(Step(kind, text, gid))
    return steps, where, skipped


def check_notebook(path: Path, limits: Limits | None = None, skipped: list[Skipped] | None = None) -> list[TestResult]:
    """One row per test cell; `skipped`, if given, receives the code cells that were not run."""
    path = Path(path).resolve()
    nb = read_notebook(path)
    limits = limits or Limits(memory_mb=0).from_notebook(nb)
    steps, where, not_run = plan(nb)
    if skipped is not None:
        skipped[:] = not_run
    report = run_steps(steps, limits=limits, cwd=path.parent)
    titles, owners = exercise_titles(nb), answer_owner(nb)
    step_of = {cell: step for step, cell in where.items()}
    rows = []
    for i, cell in enumerate(nb["cells"]):  # written answers first, each then moved to its place below
        if is_manual(cell):
            blank = not source(cell).strip() or source(cell).strip() == strip_solution(cell).strip()
            rows.append(
                (
                    i,
                    TestResult(
                        grade_id(cell) or f"cell {i}",
                        titles[i],
                        0.0,
                        points(cell),
                        MANUAL_STATUS,
                        MANUAL_NOTE + ("; you have not answered yet" if blank else "") + ".",
                    ),
                )
            )
    for s, step in enumerate(steps):
        if step.kind != "test":
            continue
        i = where[s]
        status, message = classify(report.results[s])
        if status != "passed":
            runs = [report.results[step_of[a]] for a in owners.get(i, []) if a in step_of]
            status, message = explain(status, message, runs)
            message = explain_missing(message, not_run)
        pts = points(nb["cells"][i])
        status, earned = score(status, report.results[s], pts)
        rows.append((i, TestResult(step.grade_id or f"cell {i}", titles[i], earned, pts, status, message)))
    return [row for _, row in sorted(rows, key=lambda r: r[0])]
