"""`course check exercises/NN_name.ipynb`: run a learner's notebook and say which exercises pass.

The notebook is read, never written: its code cells run top to bottom in a fresh kernel (in the
notebook's own folder, so relative paths work as in JupyterLab), and each test cell's outcome
becomes a row of the table. Only visible tests run; hidden tests (should a solution notebook be
checked) are stripped first.
"""
from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .grade import classify, exercise_titles
from .notebook import is_solution, is_test, points, read_notebook, source, strip_hidden_tests, grade_id
from .runner import Step, run_steps
from .sandbox import Limits


@dataclass
class CheckRow:
    exercise: str
    grade_id: str
    points: float
    status: str  # passed | failed | not attempted | error
    message: str


def check_notebook(path: Path, limits: Limits | None = None) -> list[CheckRow]:
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
    scratch = Path(tempfile.mkdtemp(prefix="course-check-"))
    try:
        report = run_steps(steps, scratch=scratch, kernels_root=scratch, limits=limits,
                           policy={}, guard=False, cwd=path.parent)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    titles = exercise_titles(nb)
    rows, answer_error = [], None
    for s, step in enumerate(steps):
        run = report.results.get(s)
        if step.kind == "answer":
            if run is not None and not run.ok and run.ename != "NotImplementedError":
                answer_error = classify(run)[1]
            continue
        if step.kind != "test":
            continue
        status, message = classify(run) if run is not None else ("error", "not run")
        if status != "passed" and answer_error:
            then = f"; then the test said: {message}" if message and status != "not attempted" else ""
            message = f"your answer cell stopped with {answer_error}{then}"
            status = "error"
        answer_error = None
        i = where[s]
        rows.append(CheckRow(titles[i], step.grade_id or f"cell {i}", points(nb["cells"][i]), status, message))
    return rows


def print_table(path: Path, rows: list[CheckRow]) -> int:
    if not rows:
        print(f"{path}: no exercise tests found (is this an exercise notebook from exercises/?)")
        return 1
    for r in rows:  # "Exercise 3: Title (★★☆, 3 points)" -> "Exercise 3: Title": points have a column
        r.exercise = re.sub(r"\s*\([^()]*\bpoints?\)\s*$", "", r.exercise)
    width = min(56, max(len(r.exercise or r.grade_id) for r in rows))
    print(f"{path}")
    print(f"  {'Exercise':<{width}}  {'Points':>6}  Result")
    for r in rows:
        label = (r.exercise or r.grade_id)[:width]
        pts = f"{r.points:g}" if r.status == "passed" else f"0/{r.points:g}"
        print(f"  {label:<{width}}  {pts:>6}  {r.status}")
        if r.status != "passed" and r.message:
            lines = r.message.strip().splitlines()
            for line in lines[:1] if r.status == "not attempted" else lines:
                print(f"  {'':<{width}}  {'':>6}    {line}")
    earned = sum(r.points for r in rows if r.status == "passed")
    total = sum(r.points for r in rows)
    print(f"  {'Total':<{width}}  {earned:g}/{total:g}")
    return 0 if all(r.status == "passed" for r in rows) else 1
