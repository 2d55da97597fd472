"""Run a list of notebook cells in a sandboxed kernel, surviving whatever the cells do.

Shared by `course check` (a learner's own notebook, visible tests) and `course grade` (a
learner's answers inside the teacher's notebook, with hidden tests). A cell that kills the kernel
(os._exit, a crash, the memory watchdog, an ignored interrupt) is remembered; the kernel is
started again and the cells are run again from the top without it, so one fatal cell costs only
the exercise it belongs to.

With `guard=True` (grading), the kernel's pristine library state is restored before each test
cell, and checked again after it: a test cell during which something was patched earns nothing.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from .kernel import GUARD_PREFIX
from .sandbox import CellRun, Limits, Sandbox

MAX_RESTARTS = 3


@dataclass
class Step:
    kind: str  # "setup" (teacher code before the answers), "answer", "test" or "code"
    source: str
    grade_id: str | None = None


@dataclass
class RunReport:
    results: dict[int, CellRun] = field(default_factory=dict)  # step index -> what happened
    restored_before: dict[int, list[str]] = field(default_factory=dict)  # test index -> undone patches
    notes: list[str] = field(default_factory=list)  # things the teacher and learner should know
    restarts: int = 0


def _guard_call(sandbox: Sandbox, marker: str, action: str) -> list[str] | None:
    """Ask the kernel's audit hook to arm, snapshot or restore; the list of changes it reports, or
    None if it did not report exactly once (something interfered)."""
    tag = f"{marker}:{action}"
    run = sandbox.run(f"_course_guard = {tag!r}", timeout=30)
    if not run.ok:
        return None
    reports = [line[len(tag):] for line in run.stdout.splitlines() if line.startswith(tag)]
    if len(reports) != 1:
        return None
    try:
        value = json.loads(reports[0])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def run_steps(steps: list[Step], *, scratch: Path, kernels_root: Path, limits: Limits, policy: dict,
              guard: bool, cwd: Path | None = None) -> RunReport:
    report = RunReport()
    deadline = time.monotonic() + limits.total_timeout
    fatal: dict[int, CellRun] = {}  # cells that ended the kernel: skipped on the next attempt
    last_setup = max((i for i, s in enumerate(steps) if s.kind == "setup"), default=-1)
    marker = f"{GUARD_PREFIX}{secrets.token_hex(16)}@@"
    policy = dict(policy, guard=guard)  # the kernel arms its audit hook only when we will use it
    for attempt in range(MAX_RESTARTS + 1):
        report.results, report.restored_before = {}, {}
        killed = False
        sandbox = Sandbox(scratch, limits, policy, kernels_root, cwd=cwd)
        try:
            sandbox.start()
        except Exception as err:  # noqa: BLE001 - whatever broke, the batch must go on
            for i in range(len(steps)):
                report.results[i] = CellRun("died", "KernelStartFailed", f"the kernel could not start ({err})")
            report.notes.append(f"The kernel could not start: {err}")
            return report
        try:
            if guard:
                note = "The grader could not arm its guard in the kernel."
                if _guard_call(sandbox, marker, "arm") is None and note not in report.notes:  # once, not per restart
                    report.notes.append(note)
                if last_setup < 0:
                    _guard_call(sandbox, marker, "snapshot")
            for i, step in enumerate(steps):
                if i in fatal:
                    report.results[i] = fatal[i]
                    continue
                if time.monotonic() >= deadline:
                    report.results[i] = CellRun("timeout", "SubmissionTimeout",
                                                f"not run: the submission used up its total time limit ({limits.total_timeout:g} s)")
                    continue
                undone: list[str] | None = []
                if guard and step.kind == "test":
                    undone = _guard_call(sandbox, marker, "restore")
                    report.restored_before[i] = undone or []
                result = sandbox.run(step.source, deadline=deadline)
                if guard and step.kind == "test":
                    # No check possible (the kernel stopped right after the test) counts as a failed check.
                    changed = _guard_call(sandbox, marker, "restore") if sandbox.alive() else None
                    if result.ok and (changed is None or undone is None):
                        result = CellRun("error", "Tampering", "the grader could not verify this test (its check of the "
                                         "test environment failed), so it earns no points", stdout=result.stdout)
                    elif result.ok and changed:
                        result = CellRun("error", "Tampering", "code run by this test changed the checking tools ("
                                         + ", ".join(changed[:5]) + "), so it earns no points", stdout=result.stdout)
                report.results[i] = result
                if not sandbox.alive():
                    fatal[i] = result
                    killed = True
                    break
                if guard and i == last_setup:
                    _guard_call(sandbox, marker, "snapshot")
        finally:
            sandbox.shutdown()
        if not killed:
            break
        report.restarts += 1
    else:
        for i in range(len(steps)):
            report.results.setdefault(i, CellRun("died", "KernelDied", "not run: the kernel stopped too many times"))
    return report
