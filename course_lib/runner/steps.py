"""Run a notebook's cells, in order, in a fresh kernel; start it again when a cell ends it.

`course check` runs every cell of a learner's notebook in the kernel, as JupyterLab would. The
grader passes a `checker` too: then the test cells run in the grader's own process instead, and
the teacher's setup and given cells in both (see `course_grader.runner`, which builds the checker
and the sandboxed kernel and calls `run_steps` with them).

A cell that ends the kernel (os._exit, a crash, the memory limit, an ignored interrupt) is
remembered; the kernel is started again, the kernel's cells before it are run again without it,
and the run goes on, so one fatal cell costs only its own exercise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .process import Budget, CellRun, Kernel, Limits, submission_clock

MAX_RESTARTS = 3


@dataclass
class Step:
    kind: str  # "setup" (teacher code before the answers), "answer", "test" or "code"
    source: str
    grade_id: str | None = None
    hidden: bool = False  # a test cell with hidden tests in it


@dataclass
class RunReport:
    results: dict[int, CellRun] = field(default_factory=dict)  # step index -> what happened
    notes: list[str] = field(default_factory=list)  # things the teacher and learner should know
    restarts: int = 0
    kernel_cpu: float = 0.0  # CPU seconds the learner's kernels used (for benchmarks)
    cpu: dict[int, float] = field(default_factory=dict)  # step index -> CPU seconds it used (kernel and checks)
    total_cpu: float = 0.0  # CPU seconds the submission used in all, against `limits.total_cpu_s`


def run_steps(
    steps: list[Step],
    *,
    limits: Limits,
    cwd: Path | None = None,
    kernel: Kernel | None = None,
    checker=None,
    fresh_after_hidden: bool = False,
    on_cell=None,
) -> RunReport:
    """Run `steps` in `kernel` (default: a plain kernel in `cwd`), which is shut down at the end.

    With a `checker` (the grader's: `learner`, `uses_learner_names(source)`, `run(source, budget, where)`),
    test cells run there and not in the kernel. Each cell gets `limits.cell_cpu_s` of CPU time, and the
    submission `limits.total_cpu_s` in all (see `Budget`): the kernel's processes and this process's.

    `fresh_after_hidden` (the grader's `--hide-hidden-inputs`): after a test cell with hidden tests, the
    next kernel cell runs in a fresh kernel that replays the kernel's cells before it but none of the
    tests, so nothing a hidden test passed to the learner's code (which a learner's function could have
    kept) reaches a later cell, and so that learner's feedback. The replays cost the submission nothing.
    `on_cell(i, run)`: each test cell's result as soon as it has one (Gradescope's partial results)."""
    report = RunReport()
    kernel = kernel if kernel is not None else Kernel(limits, cwd=cwd)
    clock = submission_clock(kernel)
    started, wall_end = clock(), time.monotonic() + limits.wall(limits.total_cpu_s)
    split = checker is not None
    fatal: dict[int, CellRun] = {}  # kernel cells that ended the kernel: skipped when it is started again

    def budget() -> Budget:
        """The next cell's: its own CPU time, or what is left of the submission's if that is less."""
        left = limits.total_cpu_s - (clock() - started)
        own_end = time.monotonic() + limits.wall(limits.cell_cpu_s)
        cut = left < limits.cell_cpu_s or wall_end < own_end
        return Budget(clock, min(left, limits.cell_cpu_s), min(own_end, wall_end), cut=cut, limits=limits)

    def used_up() -> bool:
        return clock() - started >= limits.total_cpu_s or time.monotonic() >= wall_end

    def in_kernel(step: Step) -> bool:
        return not split or step.kind != "test"

    def start(upto: int, fresh: bool = False) -> bool:
        """(Re)start the kernel and run its cells before step `upto` again; False if that is impossible.
        `fresh`: a new kernel on purpose (not because the old one stopped): not counted as a restart, and the
        CPU time of starting it and replaying is not the submission's."""
        nonlocal started, wall_end
        before, since, on_purpose = clock(), time.monotonic(), fresh
        while True:
            if kernel.proc is not None and fresh:
                kernel.shutdown()
            elif kernel.proc is not None:  # it stopped: start it again, a limited number of times
                kernel.shutdown()
                if report.restarts >= MAX_RESTARTS:
                    return False
                report.restarts += 1
            elif report.restarts >= MAX_RESTARTS:
                return False
            fresh = False  # if this start stops too, starting again is a restart
            try:
                kernel.start()
            except Exception as err:  # noqa: BLE001 - whatever broke, the batch must go on
                report.notes.append(f"The kernel could not start: {err}")
                return False
            for j in range(upto):
                if in_kernel(steps[j]) and j not in fatal:
                    run, learner = kernel.run_cell(steps[j].source, steps[j].kind, budget=budget())
                    if checker is not None and run.status != "died":
                        checker.learner = set(learner)
                    if not kernel.alive():
                        fatal[j] = run
                        break
            else:
                if on_purpose:
                    started += clock() - before
                    wall_end += time.monotonic() - since
                return True

    try:
        if not start(0):
            for i in range(len(steps)):
                report.results[i] = CellRun("died", "KernelStartFailed", "the kernel could not start")
            return report
        first_answer = next((i for i, s in enumerate(steps) if s.kind == "answer"), len(steps))
        tainted = False  # a hidden test has run since the kernel's last fresh start
        for i, step in enumerate(steps):
            if used_up():
                report.results[i] = CellRun(
                    "timeout",
                    "SubmissionTimeout",
                    f"not run: the submission used up its total CPU time ({limits.total_cpu_s:g} s)",
                )
                continue
            if tainted and in_kernel(step):
                tainted = False
                if not start(i, fresh=True):
                    report.results[i] = CellRun("died", "KernelDied", "not run: a fresh kernel could not start")
                    continue
            if not kernel.alive() and not start(i):
                report.results[i] = CellRun("died", "KernelDied", "not run: the kernel stopped too many times")
                continue
            if in_kernel(step):
                allowance = budget()
                run, learner = kernel.run_cell(step.source, step.kind, budget=allowance)
                report.cpu[i] = allowance.used()
                report.results[i] = run
                if checker is not None and run.status != "died":
                    checker.learner = set(learner)
                if not kernel.alive():
                    fatal[i] = run
            if checker is None or step.kind == "answer":
                continue
            if step.kind == "code" and i > first_answer and checker.uses_learner_names(step.source):
                continue  # a "try it" cell: the learner's own business
            if step.kind == "test" or (split and step.kind in ("setup", "code")):
                where = "<test cell>" if step.kind == "test" else "<teacher's cell>"
                allowance = budget()
                run = checker.run(step.source, allowance, where=where)
                report.cpu[i] = report.cpu.get(i, 0.0) + allowance.used()
                if step.kind == "test":
                    report.results[i] = run
                    tainted = tainted or (fresh_after_hidden and step.hidden)
                    if on_cell is not None:
                        on_cell(i, run)
                elif not run.ok and step.kind == "setup":
                    report.notes.append(f"The teacher's setup cell failed in the checker: {run.ename}: {run.evalue}")
    finally:
        report.total_cpu = clock() - started
        kernel.shutdown()
        report.kernel_cpu = kernel.cpu_seconds
    return report
