"""Grading throughput: submissions per minute at `--jobs 2`, with the sandbox and without it.

    python -m bench.grading [--copies 8] [--jobs 2] [--assignment 06_attention] [--cpus 2]

Grades a class made from one exercise set: `copies` students who hand in the solution notebook and
`copies` who hand in the blank exercise, once in the bubblewrap sandbox and once with
`--no-sandbox`, alternating (sandbox, plain, sandbox, plain) after a warm-up, and keeps each mode's
best run. The course's target is 30 or more submissions per minute on 2 cores at `--jobs 2`, the
sandbox costing at most 10 %. Timings depend on the machine and on what else runs on it, so the
load average and the CPUs used are printed with them; `--cpus N` pins the run to N CPUs.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _class(folder: Path, assignment: str, copies: int) -> int:
    from course_grader.build import build_exercise
    from course_lib.runner.notebook import dumps_notebook, read_notebook

    solution = REPO / "solutions" / f"{assignment}.ipynb"
    blank = dumps_notebook(build_exercise(read_notebook(solution), solution.name))
    for i in range(copies):
        for who, text in (("solved", solution.read_text()), ("blank", blank)):
            (folder / f"{who}{i:02d}").mkdir(parents=True)
            (folder / f"{who}{i:02d}" / solution.name).write_text(text)
    return 2 * copies


def _cpu_per_submission(assignment: str, sandbox: bool, repeat: int) -> float:
    """CPU seconds to grade the solution and the blank exercise `repeat` times each, averaged: the
    checker's (this process) plus the learner's kernel's, measured here with the grader's own runner."""
    import resource

    from course_grader.build import build_exercise
    from course_grader.grade import merge
    from course_grader.runner import run_steps
    from course_lib.runner.notebook import grade_id, is_solution, read_notebook, strip_solution
    from course_lib.runner.process import Limits

    solution = read_notebook(REPO / "solutions" / f"{assignment}.ipynb")
    blank = build_exercise(solution, f"{assignment}.ipynb")
    stubs = {grade_id(c): strip_solution(c) for c in solution["cells"] if is_solution(c)}
    total, n = 0.0, 0
    for _ in range(repeat):
        for submission in (solution, blank):
            steps = merge(solution, submission, stubs)[0]
            before = resource.getrusage(resource.RUSAGE_SELF)
            report = run_steps(steps, limits=Limits(), sandbox=sandbox, split=True)
            after = resource.getrusage(resource.RUSAGE_SELF)
            total += after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime + report.kernel_cpu
            n += 1
    return total / n


def _grade(folder: Path, assignment: str, jobs: int, sandbox: bool) -> float:
    """Wall-clock seconds to grade the class with `course grade`'s own function."""
    from course_grader.grade import grade_all

    out = Path(tempfile.mkdtemp(prefix="bench-grade-out-"))
    try:
        start = time.perf_counter()
        results = grade_all(folder, REPO / "solutions", out, jobs=jobs, assignments=[assignment], sandbox=sandbox,
                            progress=lambda line: None)
        seconds = time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)
    bad = [r for r in results if r.status != "graded" or (r.student_id.startswith("solved") and r.score != r.max_score)]
    if bad:
        raise RuntimeError(f"grading went wrong: {[(r.student_id, r.status, r.score) for r in bad][:3]}")
    return seconds


def run(copies: int = 8, jobs: int = 2, assignment: str = "06_attention", cpus: int | None = 2,
        repeat: int = 2) -> list[tuple[str, float, str]]:
    """Rows (what, value, details): submissions per minute in each mode (wall clock, `course grade`'s
    own function), the CPU seconds one submission costs in each mode (which, unlike wall-clock time,
    other work on the machine hardly changes), and the sandbox's cost in percent of each."""
    from course_grader.sandbox import sandbox_status

    if cpus and hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > cpus:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cpus])  # the workers and kernels inherit it
    used = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ok, why = sandbox_status()
    modes = [True, False] if ok else [False]
    folder = Path(tempfile.mkdtemp(prefix="bench-grade-"))
    loads = []
    try:
        n = _class(folder, assignment, copies)
        _grade(folder, assignment, jobs, modes[0])  # warm-up: imports and the page cache
        wall = {mode: float("inf") for mode in modes}
        for i in range(repeat):
            for mode in modes if i % 2 == 0 else modes[::-1]:  # alternate which mode goes first
                loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
                wall[mode] = min(wall[mode], _grade(folder, assignment, jobs, mode))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for mode in modes:  # warm-up of this process (the checker's imports), then alternate again
        _cpu_per_submission(assignment, mode, 1)
    cpu = {mode: float("inf") for mode in modes}
    for i in range(repeat):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            cpu[mode] = min(cpu[mode], _cpu_per_submission(assignment, mode, 1))
    load = f"load average {min(loads):.1f}-{max(loads):.1f}"
    rows = []
    for mode in modes:
        label = "in the sandbox" if mode else "without the sandbox"
        rows.append((f"{assignment}: submissions per minute, {n} submissions, --jobs {jobs}, {label}", 60 * n / wall[mode],
                     f"best of {repeat}: {wall[mode]:.1f} s on {used} CPU(s), {load}"))
        rows.append((f"{assignment}: CPU seconds per submission, {label}", cpu[mode],
                     f"so about {60 * used / cpu[mode]:.0f} submissions per minute on {used} otherwise idle CPU(s)"))
    if ok:
        rows.append(("sandbox cost in wall-clock time", 100 * (wall[True] / wall[False] - 1), "%"))
        rows.append(("sandbox cost in CPU time", 100 * (cpu[True] / cpu[False] - 1), "%"))
    else:
        rows.append(("sandbox cost", float("nan"), f"not measured: {why}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=8, help="students per kind (solved, blank)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--assignment", default="06_attention")
    parser.add_argument("--cpus", type=int, default=2, help="pin to this many CPUs (0: all)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"Grading throughput ({args.assignment}, submissions per minute; target >= 30 with the sandbox costing <= 10 %):")
    for what, value, detail in run(args.copies, args.jobs, args.assignment, args.cpus or None, args.repeat):
        print(f"  {value:7.1f}  {what} ({detail})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
