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

from .process import CellRun, Kernel, Limits

MAX_RESTARTS = 3


@dataclass
class Step:
    kind: str  # "setup" (teacher code before the answers), "answer", "test" or "code"
    source: str
    grade_id: str | None = None


@dataclass
class RunReport:
    results: dict[int, CellRun] = field(default_factory=dict)  # step index -> what happened
    notes: list[str] = field(default_factory=list)  # things the teacher and learner should know
    restarts: int = 0
    kernel_cpu: float = 0.0  # CPU seconds the learner's kernels used (for benchmarks)


def run_steps(
    steps: list[Step], *, limits: Limits, cwd: Path | None = None, kernel: Kernel | None = None, checker=None
) -> RunReport:
    """Run `steps` in `kernel` (default: a plain kernel in `cwd`), which is shut down at the end.

    With a `checker` (the grader's: `learner`, `uses_learner_names(source)`, `run(source, deadline,
    cut, where)`), test cells run there and not in the kernel."""
    report = RunReport()
    deadline = time.monotonic() + limits.total_timeout
    kernel = kernel if kernel is not None else Kernel(limits, cwd=cwd)
    split = checker is not None
    fatal: dict[int, CellRun] = {}  # kernel cells that ended the kernel: skipped when it is started again

    def in_kernel(step: Step) -> bool:
        return not split or step.kind != "test"

    def start(upto: int) -> bool:
        """(Re)start the kernel and run its cells before step `upto` again; False if that is impossible."""
        while True:
            if kernel.proc is not None:  # it stopped: start it again, a limited number of times
                kernel.shutdown()
                if report.restarts >= MAX_RESTARTS:
                    return False
                report.restarts += 1
            elif report.restarts >= MAX_RESTARTS:
                return False
            try:
                kernel.start()
            except Exception as err:  # noqa: BLE001 - whatever broke, the batch must go on
                report.notes.append(f"The kernel could not start: {err}")
                return False
            for j in range(upto):
                if in_kernel(steps[j]) and j not in fatal:
                    run, learner = kernel.run_cell(steps[j].source, steps[j].kind, deadline=deadline)
                    if checker is not None and run.status != "died":
                        checker.learner = set(learner)
                    if not kernel.alive():
                        fatal[j] = run
                        break
            else:
                return True

    try:
        if not start(0):
            for i in range(len(steps)):
                report.results[i] = CellRun("died", "KernelStartFailed", "the kernel could not start")
            return report
        first_answer = next((i for i, s in enumerate(steps) if s.kind == "answer"), len(steps))
        for i, step in enumerate(steps):
            if time.monotonic() >= deadline:
                report.results[i] = CellRun(
                    "timeout",
                    "SubmissionTimeout",
                    f"not run: the submission used up its total time limit ({limits.total_timeout:g} s)",
                )
                continue
            if not kernel.alive() and not start(i):
                report.results[i] = CellRun("died", "KernelDied", "not run: the kernel stopped too many times")
                continue
            if in_kernel(step):
                run, learner = kernel.run_cell(step.source, step.kind, deadline=deadline)
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
                own_end = time.monotonic() + limits.cell_timeout
                run = checker.run(
                    step.source,
                    min(deadline, own_end),
                    deadline < own_end,
                    where="<test cell>" if step.kind == "test" else "<teacher's cell>",
                )
                if step.kind == "test":
                    report.results[i] = run
                elif not run.ok and step.kind == "setup":
                    report.notes.append(f"The teacher's setup cell failed in the checker: {run.ename}: {run.evalue}")
    finally:
        kernel.shutdown()
        report.kernel_cpu = kernel.cpu_seconds
    return report
