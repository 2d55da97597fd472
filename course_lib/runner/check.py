"""`course check exercises/NN_name.ipynb`: run a learner's notebook and say which exercises pass.

The notebook is read, never written. `course check` grades the same notebook as the grader does
(see `grade.merge`): only the code cells that carry nbgrader metadata run (the setup cell, given
code, the answer cells, and the test cells with any hidden tests stripped), top to bottom, in a
fresh kernel in the notebook's own folder, so relative paths work as in JupyterLab. A cell the
learner added has no such metadata: the grader never sees it, so neither does `course check`, and
the table lists it under "Not run", with why. A helper defined there and used in an answer would
pass in JupyterLab and fail in grading with a NameError; the row of that test says so.

Only visible tests run, so the total says that a teacher's hidden tests may lower it. It is the
learner's own code on the learner's own machine, so there is no sandbox: the checks run in the
kernel next to the answers, exactly as in JupyterLab.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .grade import TestResult, answer_owner, classify, exercise_titles, explain, score
from .notebook import (UNDEFINED_NAME, defined_names, grade_id, is_solution, is_test, nbgrader_meta, points, read_notebook,
                       source, strip_hidden_tests)
from .runner import Step, run_steps
from .sandbox import Limits

ADDED_CELL = "added cell: not graded; move helpers into the answer cell that uses them"
COPIED_CELL = "a copy of another cell (same grade_id {gid!r}): only the first is graded"


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


def explain_missing(message: str, skipped: list[Skipped]) -> str:
    """Add to a NameError for a name that a skipped cell defines where the name is and what to do."""
    for name in dict.fromkeys(UNDEFINED_NAME.findall(message)):
        owner = next((s for s in skipped if name in s.defines), None)
        if owner is not None:
            message += (f"\n`{name}` is defined in cell {owner.position}, a cell you added: added cells are run neither "
                        "by `course check` nor by the grader. Move it into the answer cell that uses it.")
    return message


def check_notebook(path: Path, limits: Limits | None = None, skipped: list[Skipped] | None = None) -> list[TestResult]:
    """One row per test cell; `skipped`, if given, receives the code cells that were not run."""
    path = Path(path).resolve()
    limits = limits or Limits(memory_mb=0)
    nb = read_notebook(path)
    steps, where, not_run = plan(nb)
    if skipped is not None:
        skipped[:] = not_run
    report = run_steps(steps, limits=limits, sandbox=False, split=False, cwd=path.parent)
    titles, owners = exercise_titles(nb), answer_owner(nb)
    step_of = {cell: step for step, cell in where.items()}
    rows = []
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
        rows.append(TestResult(step.grade_id or f"cell {i}", titles[i], earned, pts, status, message))
    return rows


def print_table(path: Path, rows: list[TestResult], skipped: list[Skipped] = ()) -> int:
    if not rows:
        print(f"{path}: no exercise tests found (is this an exercise notebook from exercises/?)")
        return 1
    width = min(56, max(len(r.exercise or r.grade_id) for r in rows))
    print(f"{path}")
    print(f"  {'Exercise':<{width}}  {'Points':>6}  Result")
    for r in rows:
        label = (r.exercise or r.grade_id)[:width]
        pts = f"{r.max_points:g}" if r.status == "passed" else f"{r.points:g}/{r.max_points:g}"
        print(f"  {label:<{width}}  {pts:>6}  {r.status}")
        if r.status != "passed" and r.message:
            for line in r.message.strip().splitlines():  # all of it: a hint may be on the next line
                print(f"  {'':<{width}}  {'':>6}    {line}")
    earned = sum(r.points for r in rows)
    total = sum(r.max_points for r in rows)
    print(f"  {'Total':<{width}}  {earned:g}/{total:g}  (visible tests only: your teacher's hidden tests may lower it)")
    if skipped:
        print()
        print("Not run (the grader does not run these cells either):")
        for s in skipped:
            first = s.first_line if len(s.first_line) <= 60 else s.first_line[:57] + "..."
            below = f", below {s.below}" if s.below else ""
            print(f"  cell {s.position}{below}: {first}")
            print(f"    {s.why}")
    return 0 if all(r.status == "passed" for r in rows) else 1
