"""Steps 2 and 3 of grading, for one submission: run its answers in the sandbox, beside the teacher's tests,
and score them.

    Job (student, assignment, file)   ->   SubmissionResult (status, score, every test, notes, written answers)

The grader never trusts a submission. From the notebook handed in it takes only the learner's answer
cells, matched by `metadata.nbgrader.grade_id` to the teacher's (`course_lib.runner.assignment`:
`Assignment`, read once per batch, and `Submission`, read here); everything else (test cells, added
cells, metadata, outputs) is ignored. The answers run in a fresh kernel inside a bubblewrap sandbox
(`sandbox`); the teacher's tests, visible and hidden, run in this process and reach the learner's
values through that kernel as plain data (`runner`, `remote`). A test earns its points only if the
checks, here, ran to the end without an exception; `course check` and `course grade` score a run with
the same `course_lib.runner.feedback.score`, and every sentence a learner reads about it is that module's.

Manually graded answers (nbgrader's `grade: true, solution: true`, usually a markdown cell for a written
answer) are collected, not graded: each becomes a "to be marked" entry with the learner's text, which a
person marks later (`course mark`); the marks join the score in the gradebook. Whatever a notebook
contains, this never raises: it returns a row that says what happened (`blank_result`).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.runner.assignment import Assignment, Submission
from course_lib.runner.feedback import (
    Status,
    TestResult,
    added_cells_note,
    answers_missing,
    cells_repeated,
    kernel_restarted,
    not_the_exercise,
    score,
)
from course_lib.runner.notebook import NotebookError, parse_notebook
from course_lib.runner.process import Limits
from course_lib.runner.text import without_surrogates

from . import budgets
from .discover import MAX_NOTEBOOK_BYTES, Job, read_submission
from .gradebook import text_sha256
from .runner import run_split
from .worker import Ending


@dataclass
class SubmissionResult:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str  # a Status: graded | not submitted | unreadable | wrong notebook | stopped | grader error
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    manual: list[ManualAnswer] = field(default_factory=list)  # answers a person marks (not in score or max_score)
    cpu_seconds: float = 0.0  # CPU time the submission used in all (its kernels and the checks run for it)
    max_cell_cpu: float = 0.0  # CPU time of its costliest cell (the budgets are set against these)
    cpu: dict[str, float] = field(default_factory=dict)  # where its CPU time went (for the benchmarks)


@dataclass
class ManualAnswer:
    """A manually graded answer as handed in: a person marks it (`course mark`), the gradebook adds the mark."""

    grade_id: str
    exercise: str
    points: float
    max_points: float
    status: str  # to be marked | not attempted | not submitted | error
    message: str = ""
    answer: str = ""  # the learner's text (a markdown cell's source, or a code cell's)
    answer_sha256: str = ""  # a mark holds for this answer only
    after: str | None = None  # the grade_id of the test before it in the notebook (feedback and report order)


def written_answers(assignment: Assignment, submission: Submission | None, why: str = "") -> list[ManualAnswer]:
    """The learner's answer to each of the assignment's written answers. With no submission (`why` says what
    happened), each is "not submitted" or, for an unreadable one, "error"."""
    answers, last_test = [], None
    for cell in assignment.cells:
        if cell.kind == "test":
            last_test = cell.grade_id
        if cell.kind != "written":
            continue
        text = submission.written.get(cell.grade_id) if submission is not None else None
        if submission is None:
            status, message = (Status.NOT_SUBMITTED if why.startswith("No ") else Status.ERROR), why
        elif text is None:
            status, message = Status.NOT_SUBMITTED, "the answer cell for this question is missing from the submission"
        elif not text.strip() or text.strip() == cell.stub.strip():
            status, message = Status.NOT_ATTEMPTED, "not answered yet"
        else:
            status, message = Status.TO_BE_MARKED, ""
        answer = ManualAnswer(cell.grade_id, cell.title, 0.0, cell.points, status, message, text or "")
        answer.answer_sha256, answer.after = text_sha256(text or ""), last_test
        answers.append(answer)
    return answers


def blank_result(student: str, assignment: Assignment, status: str, message: str) -> SubmissionResult:
    """The row of a submission nothing could be run for (not submitted, unreadable, the grader's failure)."""
    each = Status.NOT_SUBMITTED if status == Status.NOT_SUBMITTED else Status.ERROR
    tests = [TestResult(t.grade_id, t.title, 0.0, t.points, each, message) for t in assignment.tests]
    manual = written_answers(assignment, None, message if status != Status.NOT_SUBMITTED else "No answer.")
    return SubmissionResult(
        student, assignment.name, 0.0, assignment.max_score, status, tests, [message], manual=manual
    )


def strip_outputs(nb: dict) -> dict:
    """The notebook without what running it added (outputs, attachments): what grading reads."""
    for cell in nb.get("cells", []):
        if isinstance(cell, dict):
            cell.pop("outputs", None)
            cell.pop("attachments", None)
    return nb


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


def _teacher_checks(assignment: Assignment) -> None:
    """A teacher's own exercise set names its checks module's file (`course new --checks DIR` writes
    `metadata.course.checks`, relative to the notebook): its folder goes first on this process's import
    path, so the tests run here import the teacher's module, never a copy a learner handed in."""
    if assignment.checks and assignment.path is not None:
        folder = str((assignment.path.parent / assignment.checks).resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)


def handed_in(assignment: Assignment, path: Path, root: Path | None, max_bytes: int) -> tuple[dict | None, str, str]:
    """The notebook handed in at `path` (read through `root`, the submissions folder, when given), without
    its outputs and with every text valid UTF-8; or (None, the row's status, why not)."""
    raw, status, why = read_submission(path, root)
    if raw is None:
        return None, status, why
    try:
        nb = without_surrogates(strip_outputs(parse_notebook(raw, path.name)))
    except NotebookError as err:
        return None, Status.UNREADABLE, f"The submission could not be read: {str(err).split(': ', 1)[-1]}"
    metadata = nb.get("metadata", {})
    if not isinstance(metadata, dict):
        return (
            None,
            Status.UNREADABLE,
            f"The submission could not be read: its metadata is a {type(metadata).__name__}, not a JSON "
            "object, so it is not a valid notebook.",
        )
    kept = len(json.dumps(nb, ensure_ascii=False).encode("utf-8"))
    if kept > max_bytes:
        return (
            None,
            Status.UNREADABLE,
            f"The notebook is {_mb(kept)} even without its outputs, over the limit of {_mb(max_bytes)} "
            "(`course grade --max-size`); it was not graded.",
        )
    built_from = metadata.get("course_lib", {})
    built_from = str(built_from.get("built_from", "")) if isinstance(built_from, dict) else ""
    other = built_from and Path(built_from).stem != assignment.name
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb["cells"] if isinstance(c, dict)}
    if other or not ids.intersection(c.grade_id for c in assignment.answers):
        name = assignment.path.name if assignment.path else f"{assignment.name}.ipynb"
        return None, Status.WRONG_NOTEBOOK, not_the_exercise(name, built_from if other else "")
    return nb, "", ""


def grade_submission(
    assignment: Assignment | Path,
    submission_path: Path,
    student: str,
    *,
    limits: Limits,
    sandbox: bool = True,
    protect: list[Path] = (),
    work_root: Path | None = None,
    root: Path | None = None,
    budget: budgets.Group | None = None,
    max_bytes: int = MAX_NOTEBOOK_BYTES,
    hide_hidden: bool = False,
    on_test=None,
    zygote=None,
) -> SubmissionResult:
    """Grade one submitted notebook against `assignment` (read once by the batch; a solution notebook's path
    is read here). Its kernels' cgroups go under `budget`; `max_bytes`: the most the notebook may weigh
    without its outputs; `hide_hidden`: a failure in a test's hidden part says so without the check's
    words, and the cells after it run in a kernel that never ran it (see `run_cells`); `on_test(grade_id,
    run)`: each test cell's raw result as soon as it has one (a Gradescope autograder's partial results);
    `zygote`: the slot's `zygote.ZygoteLink`, which its kernels are forked from. Never raises for anything
    the submission contains."""
    started = time.monotonic()
    assignment = assignment if isinstance(assignment, Assignment) else Assignment.read(Path(assignment))
    _teacher_checks(assignment)
    nb, status, why = handed_in(assignment, submission_path, root, max_bytes)
    if nb is None:
        return blank_result(student, assignment, status, why)
    submission = Submission.parse(nb, assignment)
    notes = [cells_repeated(submission.duplicates)] if submission.duplicates else []
    added = [a for a in submission.added if a.why == "added"]
    notes += [added_cells_note(added)] if added else []
    notes += [answers_missing(sorted(submission.missing))] if submission.missing else []
    planned = assignment.steps(submission, mark_hidden=hide_hidden)
    report = run_split(
        [step for step, _ in planned],
        limits=limits,
        sandbox=sandbox,
        protect=list(protect),
        temp_root=work_root,
        budget=budget,
        fresh_after_hidden=hide_hidden,
        on_cell=None if on_test is None else lambda i, run: on_test(planned[i][1].grade_id, run),
        zygote=zygote,
    )
    notes += report.notes + ([kernel_restarted(report.restarts)] if report.restarts else [])
    runs = {cell.index: report.results[i] for i, (_, cell) in enumerate(planned) if i in report.results}
    scored = score(assignment, submission, runs, hide_hidden=hide_hidden)
    return SubmissionResult(
        student,
        assignment.name,
        scored.score,
        assignment.max_score,
        Status.GRADED,
        scored.tests,
        notes + scored.notes,
        round(time.monotonic() - started, 2),
        manual=written_answers(assignment, submission),
        cpu_seconds=round(report.total_cpu, 2),
        max_cell_cpu=round(max(report.cpu.values(), default=0.0), 2),
        cpu={"kernel start": report.start_cpu, "kernel cells": report.kernel_cpu - report.start_cpu},
    )


def grade_job(
    job: Job,
    limits: Limits,
    sandbox: bool,
    protect: list[Path],
    work_root: Path,
    root: Path,
    budget: budgets.Group | None = None,
    zygote=None,
) -> SubmissionResult:
    """One job, in its own checking process (see `worker`): a grader bug becomes this row's, never the batch's.
    `zygote`: the `zygote.ZygoteLink` of the slot it runs in (see `batch`)."""
    assignment = job.assignment or Assignment.read(job.solution)
    try:
        if job.submission is None:
            res = blank_result(job.student, assignment, job.status, job.why)
        else:
            res = grade_submission(
                assignment,
                job.submission,
                job.student,
                limits=limits,
                sandbox=sandbox,
                protect=protect,
                work_root=work_root,
                root=root,
                budget=budget,
                max_bytes=job.max_bytes,
                hide_hidden=job.hide_hidden,
                zygote=zygote,
            )
    except Exception as err:  # noqa: BLE001 - a grader bug must not cost the rest of the class
        message = f"The grader failed on this submission: {type(err).__name__}: {str(err)[:500]}"
        res = blank_result(job.student, assignment, Status.GRADER_ERROR, message)
    res.notes = job.notes + res.notes
    used = resource.getrusage(resource.RUSAGE_SELF)  # this checking process's own, since it was forked
    res.cpu["checking process"] = used.ru_utime + used.ru_stime
    return res


def ended_result(job: Job, ending: Ending) -> SubmissionResult:
    """The row of a submission whose checking process ended without a result (see `worker.Ending`)."""
    if ending.status == Status.STOPPED:
        message = (
            f"The grader stopped checking this submission: {ending.message}, past its time limit plus a "
            "margin, in code that no time limit inside the grader can interrupt."
        )
    elif ending.server_died:
        message = (
            f"The grader could not finish this submission: {ending.message}. This is not a grade: the work "
            "was not checked."
        )
    else:
        message = (
            f"The grader could not finish this submission: {ending.message}. This is not a grade: the work was "
            "not checked. No other submission was affected."
        )
    message += f" To grade it again: course grade ... --student {job.student}"
    res = blank_result(job.student, job.assignment or Assignment.read(job.solution), ending.status, message)
    res.notes = job.notes + res.notes
    res.seconds = ending.seconds
    return res
