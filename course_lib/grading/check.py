"""`course check exercises/NN_name.ipynb`: run a learner's notebook and say which exercises pass.

The notebook is read, never written: its code cells run top to bottom in a fresh kernel (in the
notebook's own folder, so relative paths work as in JupyterLab), and each test cell's outcome
becomes a row of the table. Only visible tests run; hidden tests (should a solution notebook be
checked) are stripped first. It is the learner's own code on the learner's own machine, so there
is no sandbox: the checks run in the kernel next to the answers, exactly as in JupyterLab.
"""
from __future__ import annotations

from pathlib import Path

from .grade import TestResult, answer_owner, classify, exercise_titles, explain, score
from .notebook import grade_id, is_solution, is_test, points, read_notebook, source, strip_hidden_tests
from .runner import Step, run_steps
from .sandbox import Limits


def check_notebook(path: Path, limits: Limits | None = None) -> list[TestResult]:
    path = Path(path).resolve()
    limits = limits or Limits(memory_mb=0)
    nb = read_notebook(path)
    steps, where = [], {}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        text = source(cell)
        kind = "test" if is_test(cell) else "answer" if is_solution(cell) else "code"
        if kind == "test":
            text = strip_hidden_tests(text)
        where[len(steps)] = i
        steps.append(Step(kind, text, grade_id(cell)))
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
            status, message = explain(status, message, [report.results[step_of[a]] for a in owners.get(i, [])])
        pts = points(nb["cells"][i])
        status, earned = score(status, report.results[s], pts)
        rows.append(TestResult(step.grade_id or f"cell {i}", titles[i], earned, pts, status, message))
    return rows


def print_table(path: Path, rows: list[TestResult]) -> int:
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
    print(f"  {'Total':<{width}}  {earned:g}/{total:g}")
    return 0 if all(r.status == "passed" for r in rows) else 1
