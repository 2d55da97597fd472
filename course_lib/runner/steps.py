"""Run a notebook's cells, in order, in a fresh kernel; start it again when a cell ends it.

`course check` runs every cell of a learner's notebook in the kernel, as JupyterLab would. The
grader passes a `checker` too: then the test cells run in the grader's own process instead, and
the teacher's setup and given cells in both (see `course_grader.runner`, which builds the checker
and the sandboxed kernel and calls `run_cells` with them).

A cell that ends the kernel (os._exit, a crash, the memory limit, an ignored interrupt) is
remembered; the kernel is started again, the kernel's cells before it are run again without it,
and the run goes on, so one fatal cell costs only its own exercise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .process import Budget, CellRun, KernelProcess, Limits, submission_clock

MAX_RESTARTS = 3


class Checker(Protocol):
    """What `run_cells` needs of the grader's checker (`course_grader.runner.Checker`): the test cells run
    there, in the grader's process, and never in the learner's kernel."""

    def run(self, source: str, budget: Budget, where: str) -> CellRun:
        """Run a teacher's cell within `budget`; how it ended."""

    def uses_learner_names(self, source: str, learner: set[str]) -> bool:
        """Whether a teacher's cell uses a name the learner's answer cells bound (`learner`)."""


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
    start_cpu: float = 0.0  # of which, starting them (Python, numpy, torch: before any cell)
    cpu: dict[int, float] = field(default_factory=dict)  # step index -> CPU seconds it used (kernel and checks)
    total_cpu: float = 0.0  # CPU seconds the submission used in all, against `limits.total_cpu_s`


def run_cells(
    steps: list[Step],
    *,
    limits: Limits,
    cwd: Path | None = None,
    kernel: KernelProcess | None = None,
    checker: Checker | None = None,
    fresh_after_hidden: bool = False,
    on_cell=None,
) -> RunReport:
    """Run `steps` in `kernel` (default: a plain kernel in `cwd`), which is shut down at the end.

    With a `checker` (the grader's, see `Checker`), test cells run there and not in the kernel. Each cell
    gets `limits.cell_cpu_s` of CPU time, and the submission `limits.total_cpu_s` in all (see `Budget`):
    the kernel's processes and this process's.

    `fresh_after_hidden` (the grader's `--hide-hidden-inputs`): after a test cell with hidden tests, the
    next kernel cell runs in a fresh kernel that replays the kernel's cells before it but none of the
    tests, so nothing a hidden test passed to the learner's code (which a learner's function could have
    kept) reaches a later cell, and so that learner's feedback. The replays cost the submission nothing.
    `on_cell(i, run)`: each test cell's result as soon as it has one (a Gradescope autograder's partial results)."""
    run = _Run(steps, limits, kernel if kernel is not None else KernelProcess(limits, cwd=cwd), checker)
    try:
        if not run.start(0):
            for i in range(len(steps)):
                run.report.results[i] = CellRun("died", "KernelStartFailed", "the kernel could not start")
            return run.report
        tainted = False  # a hidden test has run since the kernel's last fresh start
        for i, step in enumerate(steps):
            if run.used_up():
                run.report.results[i] = CellRun(
                    "timeout",
                    "SubmissionTimeout",
                    f"not run: the submission used up its total CPU time ({limits.total_cpu_s:g} s)",
                )
                continue
            if tainted and run.in_kernel(step):
                tainted = False
                if not run.start(i, fresh=True):
                    run.report.results[i] = CellRun("died", "KernelDied", "not run: a fresh kernel could not start")
                    continue
            if not run.kernel.alive() and not run.start(i):
                run.report.results[i] = CellRun("died", "KernelDied", "not run: the kernel stopped too many times")
                continue
            if run.in_kernel(step):
                run.in_the_kernel(i, step)
            if run.in_the_checker(i, step):
                tainted = tainted or (fresh_after_hidden and step.hidden)
                if on_cell is not None and step.kind == "test":
                    on_cell(i, run.report.results[i])
    finally:
        run.report.total_cpu = run.clock() - run.started
        run.kernel.shutdown()
        run.report.kernel_cpu = run.kernel.cpu_seconds
    return run.report


class _Run:
    """One run of `run_cells`: the kernel, the checker, what the submission has used, what happened."""

    def __init__(self, steps: list[Step], limits: Limits, kernel: KernelProcess, checker: Checker | None):
        self.steps, self.limits, self.kernel, self.checker = steps, limits, kernel, checker
        self.report = RunReport()
        self.clock = submission_clock(kernel)
        self.started, self.wall_end = self.clock(), time.monotonic() + limits.wall(limits.total_cpu_s)
        self.fatal: dict[int, CellRun] = {}  # kernel cells that ended the kernel: skipped when it is started again
        self.learner: set[str] = set()  # the names the learner's answer cells bound, as the kernel last said
        self.first_answer = next((i for i, s in enumerate(steps) if s.kind == "answer"), len(steps))

    def budget(self) -> Budget:
        """The next cell's: its own CPU time, or what is left of the submission's if that is less."""
        limits = self.limits
        left = limits.total_cpu_s - (self.clock() - self.started)
        own_end = time.monotonic() + limits.wall(limits.cell_cpu_s)
        cut = left < limits.cell_cpu_s or self.wall_end < own_end
        return Budget(self.clock, min(left, limits.cell_cpu_s), min(own_end, self.wall_end), cut=cut, limits=limits)

    def used_up(self) -> bool:
        return self.clock() - self.started >= self.limits.total_cpu_s or time.monotonic() >= self.wall_end

    def in_kernel(self, step: Step) -> bool:
        return self.checker is None or step.kind != "test"

    def in_the_kernel(self, i: int, step: Step) -> CellRun:
        allowance = self.budget()
        run, names = self.kernel.run_cell(step.source, step.kind, budget=allowance)
        self.report.cpu[i] = allowance.used()
        self.report.results[i] = run
        self.learner = set(names) if run.status != "died" else self.learner
        if not self.kernel.alive():
            self.fatal[i] = run
        return run

    def in_the_checker(self, i: int, step: Step) -> bool:
        """Run a test cell (and the teacher's other cells but a "try it" one) in the checker; whether it ran."""
        checker = self.checker
        if checker is None or step.kind == "answer":
            return False
        if step.kind == "code" and i > self.first_answer and checker.uses_learner_names(step.source, self.learner):
            return False  # a "try it" cell: the learner's own business
        allowance = self.budget()
        run = checker.run(step.source, allowance, where="<test cell>" if step.kind == "test" else "<teacher's cell>")
        self.report.cpu[i] = self.report.cpu.get(i, 0.0) + allowance.used()
        if step.kind == "test":
            self.report.results[i] = run
        elif not run.ok and step.kind == "setup":
            self.report.notes.append(f"The teacher's setup cell failed in the checker: {run.ename}: {run.evalue}")
        return True

    def start(self, upto: int, fresh: bool = False) -> bool:
        """(Re)start the kernel and run its cells before step `upto` again; False if that is impossible.
        `fresh`: a new kernel on purpose (not because the old one stopped): not counted as a restart, and the
        CPU time of starting it and replaying is not the submission's."""
        before, since, on_purpose = self.clock(), time.monotonic(), fresh
        while True:
            if self.kernel.proc is not None:
                self.kernel.shutdown()
                if not fresh:  # it stopped: start it again, a limited number of times
                    if self.report.restarts >= MAX_RESTARTS:
                        return False
                    self.report.restarts += 1
            elif self.report.restarts >= MAX_RESTARTS:
                return False
            fresh = False  # if this start stops too, starting again is a restart
            try:
                at = self.kernel.cpu_used()
                self.kernel.start()
                self.report.start_cpu += self.kernel.cpu_used() - at
            except Exception as err:  # noqa: BLE001 - whatever broke, the batch must go on
                self.report.notes.append(f"The kernel could not start: {err}")
                return False
            if self._replay(upto):
                if on_purpose:
                    self.started += self.clock() - before
                    self.wall_end += time.monotonic() - since
                return True

    def _replay(self, upto: int) -> bool:
        """Run the kernel's cells before step `upto` again (but those that ended it); False if one ends it."""
        for j in range(upto):
            step = self.steps[j]
            if self.in_kernel(step) and j not in self.fatal:
                run, names = self.kernel.run_cell(step.source, step.kind, budget=self.budget())
                self.learner = set(names) if run.status != "died" else self.learner
                if not self.kernel.alive():
                    self.fatal[j] = run
                    return False
        return True
