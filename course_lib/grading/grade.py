"""`course grade`: grade a folder of submitted exercise notebooks against the solution notebooks.

    SUBMISSIONS_DIR/<student_id>/NN_name.ipynb   ->   OUT_DIR/grades.csv, grades.json, feedback/

The grader never trusts a submission. From each submitted notebook it takes only the learners'
answer cells, matched by `metadata.nbgrader.grade_id` to the teacher's answer cells; everything
else (test cells, extra cells, metadata, outputs) is ignored. The answers are run inside the
teacher's own solution notebook, with its visible and hidden tests, in a fresh kernel in a scratch
folder (see `runner` and `kernel` for the limits and guards). A test cell earns its points only if
it ran to the end without an exception, with the checking tools untouched.

Every submission gets a row, whatever it contains; one broken submission never stops the batch,
and submission files are only ever read.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

from .notebook import (
    NotebookError,
    grade_id,
    is_solution,
    is_test,
    points,
    read_notebook,
    source,
    strip_solution,
    validate_solution_notebook,
    write_atomic,
)
from .runner import Step, run_steps
from .sandbox import CellRun, Limits

MAX_SUBMISSION_BYTES = 20 * 2**20
NOT_ATTEMPTED_NAMES = {"NotAttempted"}
FAILED_NAMES = {"CheckFailed", "AssertionError"}


@dataclass
class TestResult:
    grade_id: str
    exercise: str  # the heading of the exercise the test belongs to
    points: float
    max_points: float
    status: str  # passed | failed | not attempted | not submitted | error
    message: str = ""


@dataclass
class SubmissionResult:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str  # graded | not submitted | unreadable | wrong notebook | grader error
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --- the teacher's notebook --------------------------------------------------------------------------


def exercise_titles(nb: dict) -> dict[int, str]:
    """For each cell index, the first heading of the nearest markdown cell above it, without the
    points ("Exercise 3: Title (★★☆, 3 points)" -> "Exercise 3: Title"): tables give them a column."""
    titles, current = {}, ""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            for line in source(cell).splitlines():
                if line.startswith("#"):
                    current = re.sub(r"\s*\([^()]*\bpoints?\)\s*$", "", line.lstrip("#").strip())
                    break
        titles[i] = current
    return titles


def test_cells(nb: dict) -> list[tuple[int, dict]]:
    return [(i, c) for i, c in enumerate(nb["cells"]) if is_test(c)]


def max_score(nb: dict) -> float:
    return sum(points(c) for _, c in test_cells(nb))


def answer_owner(nb: dict) -> dict[int, list[int]]:
    """Test cell index -> the answer cells it grades (those since the previous test cell)."""
    owners, pending = {}, []
    for i, cell in enumerate(nb["cells"]):
        if is_solution(cell) and cell["cell_type"] == "code":
            pending.append(i)
        elif is_test(cell):
            owners[i] = pending or (owners[max(owners)] if owners else [])
            pending = []
    return owners


def explain(status: str, message: str, answer_runs: list[CellRun]) -> tuple[str, str]:
    """A failing test's status and message, told through its answer cell when that cell broke:
    "your answer cell stopped with NameError: ..." explains more than the test's own complaint."""
    for arun in answer_runs:
        if not arun.ok and arun.ename != "NotImplementedError":
            cause = f"your answer cell stopped with {classify(arun)[1]}"
            if status == "not attempted":  # the answer never got defined: the cause is enough
                return "error", cause
            return "error", cause + (f"; then the test said: {message}" if message else "")
    return status, message


def classify(run: CellRun) -> tuple[str, str]:
    """A test cell's outcome as (status, message for the learner)."""
    if run.ok:
        return "passed", ""
    if run.ename in NOT_ATTEMPTED_NAMES:
        return "not attempted", run.evalue
    if run.ename in FAILED_NAMES:
        return "failed", run.evalue or "a check failed"
    if run.status in ("timeout", "output-limit", "memory-limit", "died"):
        return "error", run.evalue
    return "error", f"{run.ename}: {run.evalue}".strip(": ")


# --- one submission ------------------------------------------------------------------------------------


def _blank_result(student: str, assignment: str, solution: dict, status: str, message: str) -> SubmissionResult:
    titles = exercise_titles(solution)
    tests = [TestResult(grade_id(c) or f"cell {i}", titles[i], 0.0, points(c), "not submitted" if status == "not submitted" else "error", message)
             for i, c in test_cells(solution)]
    return SubmissionResult(student, assignment, 0.0, max_score(solution), status, tests, [message])


def merge(solution: dict, submission: dict, exercise_stub: dict[str, str]) -> tuple[list[Step], dict[int, int], list[str], set[str]]:
    """The teacher's code cells with the learner's answers in place of the solutions.

    Returns the steps, a map step -> teacher cell index, notes, and the answer grade_ids that were
    missing from the submission.
    """
    notes: list[str] = []
    found: dict[str, str] = {}
    seen_ids: dict[str, int] = {}
    for cell in submission["cells"]:
        gid = grade_id(cell)
        if gid is None:
            continue
        seen_ids[gid] = seen_ids.get(gid, 0) + 1
        if gid not in found:
            found[gid] = source(cell) if cell.get("cell_type") == "code" else None
    dupes = sorted(g for g, n in seen_ids.items() if n > 1)
    if dupes:
        notes.append("Several cells share the id(s) " + ", ".join(dupes) + "; the first of each was graded.")
    steps, where, missing = [], {}, set()
    first_answer = next((i for i, c in enumerate(solution["cells"]) if is_solution(c)), len(solution["cells"]))
    for i, cell in enumerate(solution["cells"]):
        if cell["cell_type"] != "code":
            continue
        gid = grade_id(cell)
        if is_solution(cell):
            text = found.get(gid)
            if text is None:
                missing.add(gid)
                text = exercise_stub.get(gid, "raise NotImplementedError()")
            steps.append(Step("answer", text, gid))
        elif is_test(cell):
            steps.append(Step("test", source(cell), gid))
        else:
            steps.append(Step("setup" if i < first_answer else "code", source(cell), gid))
        where[len(steps) - 1] = i
    return steps, where, notes, missing


def grade_submission(solution_path: Path, submission_path: Path, student: str, *, limits: Limits,
                     work_root: Path, policy: dict) -> SubmissionResult:
    """Grade one submitted notebook. Never raises for anything the submission contains."""
    started = time.monotonic()
    solution = read_notebook(solution_path)
    assignment = solution_path.stem
    if not submission_path.is_file():
        return _blank_result(student, assignment, solution, "not submitted", f"No {solution_path.name} was submitted.")
    if submission_path.stat().st_size > MAX_SUBMISSION_BYTES:
        return _blank_result(student, assignment, solution, "unreadable",
                             f"The submitted file is larger than {MAX_SUBMISSION_BYTES // 2**20} MB; it was not graded.")
    try:
        submission = read_notebook(submission_path)
    except NotebookError as err:
        message = str(err).replace(str(submission_path), submission_path.name)
        return _blank_result(student, assignment, solution, "unreadable", f"The submission could not be read: {message.split(': ', 1)[-1]}")
    answer_ids = [grade_id(c) for c in solution["cells"] if is_solution(c) and c["cell_type"] == "code"]
    submitted_ids = {grade_id(c) for c in submission["cells"]}
    built_from = submission.get("metadata", {}).get("course_lib", {})
    built_from = built_from.get("built_from", "") if isinstance(built_from, dict) else ""
    if not submitted_ids.intersection(answer_ids) or (built_from and Path(str(built_from)).name != solution_path.name):
        other = f" (it was made from {built_from})" if built_from and Path(str(built_from)).name != solution_path.name else ""
        return _blank_result(student, assignment, solution, "wrong notebook",
                             f"This is not the exercise notebook {solution_path.name}{other}: none of its answer cells were found.")
    stubs = {grade_id(c): strip_solution(c) for c in solution["cells"] if is_solution(c)}
    steps, where, notes, missing = merge(solution, submission, stubs)
    if missing:
        notes.append("Answer cells missing from the submission (graded as not submitted): " + ", ".join(sorted(missing)) + ".")
    scratch = Path(tempfile.mkdtemp(prefix=f"{_safe(student)}-{assignment}-", dir=work_root))
    try:
        report = run_steps(steps, scratch=scratch, kernels_root=work_root, limits=limits, policy=policy, guard=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    notes += report.notes
    if report.restarts:
        notes.append(f"The kernel stopped {report.restarts} time(s) (see the exercises marked error); "
                     "it was restarted and the other exercises were graded without the cell that stopped it.")
    titles = exercise_titles(solution)
    owners = answer_owner(solution)
    step_of = {cell: step for step, cell in where.items()}
    restored = sorted({x for undone in report.restored_before.values() for x in undone})
    if restored:
        notes.append("Your answer cells changed the checking tools (" + ", ".join(restored[:20]) +
                     "); they were put back before the tests ran.")
    tests, score = [], 0.0
    for i, cell in test_cells(solution):
        run = report.results.get(step_of[i], CellRun("error", "NotRun", "not run"))
        status, message = classify(run)
        answers = [step_of[a] for a in owners.get(i, [])]
        if status != "passed":
            if answers and all(steps[a].grade_id in missing for a in answers):
                status, message = "not submitted", "the answer cell for this exercise is missing from the submission"
            else:
                status, message = explain(status, message, [report.results[a] for a in answers if a in report.results])
        else:  # passed with what the answer cell defined before it stopped: still worth telling
            for a in answers:
                arun = report.results.get(a)
                if arun is not None and not arun.ok:
                    notes.append(f"{titles[i]}: your answer cell stopped with {classify(arun)[1]}; "
                                 "the test passed with what the cell had defined before that.")
                    break
        earned = points(cell) if status == "passed" else 0.0
        score += earned
        tests.append(TestResult(grade_id(cell) or f"cell {i}", titles[i], earned, points(cell), status, message))
    return SubmissionResult(student, assignment, score, max_score(solution), "graded", tests, notes,
                            round(time.monotonic() - started, 2))


def _safe(name: str) -> str:
    """A file name for a student id; ids that had to be changed get a short hash, so that
    "a b" and "a_b" never share a feedback file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "student"
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _grade_job(args: tuple) -> SubmissionResult:
    solution_path, submission_path, student, limits, work_root, policy = args
    try:
        return grade_submission(solution_path, submission_path, student, limits=limits, work_root=work_root, policy=policy)
    except Exception as err:  # noqa: BLE001 - a grader bug must not cost the rest of the class
        solution = read_notebook(solution_path)
        return _blank_result(student, solution_path.stem, solution, "grader error", f"The grader failed on this submission: {err!r}")


# --- a whole class --------------------------------------------------------------------------------------


def discover(submissions: Path, solutions: Path, assignments: list[str] | None) -> tuple[list[tuple[str, Path, Path]], list[str]]:
    """(student, solution, submission) jobs, and warnings about files that match no assignment."""
    known = {p.stem: p for p in sorted(solutions.glob("*.ipynb"))}
    students = sorted(d for d in submissions.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not students:
        raise ValueError(f"no student folders in {submissions} (expected {submissions}/<student_id>/NN_name.ipynb)")
    warnings = []
    if assignments:
        unknown = [a for a in assignments if Path(a).stem not in known]
        if unknown:
            raise ValueError(f"no solution notebook for {', '.join(unknown)} in {solutions}")
        chosen = [Path(a).stem for a in assignments]
    else:
        chosen = sorted({f.stem for d in students for f in d.glob("*.ipynb") if f.stem in known})
    for d in students:
        for f in sorted(d.iterdir()):
            if f.suffix == ".ipynb" and f.stem not in known:
                warnings.append(f"{d.name}/{f.name}: no solution notebook of that name; not graded")
    jobs = [(d.name, known[a], d / f"{a}.ipynb") for d in students for a in chosen]
    return jobs, warnings


def grade_all(submissions: Path, solutions: Path, out: Path, *, jobs: int = 2, limits: Limits | None = None,
              assignments: list[str] | None = None, progress=print) -> list[SubmissionResult]:
    limits = limits or Limits()
    submissions, solutions, out = submissions.resolve(), solutions.resolve(), out.resolve()
    todo, warnings = discover(submissions, solutions, assignments)
    # A broken solution notebook is the teacher's to fix: say so before grading anyone with it.
    for sol in sorted({sol for _, sol, _ in todo}):
        problems = validate_solution_notebook(read_notebook(sol), sol.name)
        if problems:
            raise ValueError(f"{sol} cannot be used for grading: " + "; ".join(problems[:5]))
    for w in warnings:
        progress(f"warning: {w}")
    work_root = Path(tempfile.mkdtemp(prefix="course-grade-"))
    repo = Path(__file__).resolve().parents[2]
    # The sandbox adds the scratch folder as the one place to read and write, and the limits.
    policy = {"deny_read": [str(solutions), str(submissions), str(out), str(work_root), str(repo / ".git"), str(repo / "solutions")]}
    results: list[SubmissionResult] = []
    try:
        args = [(sol, sub, student, limits, work_root, policy) for student, sol, sub in todo]
        with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_grade_job, a): a for a in args}
            for fut in as_completed(futures):
                sol, sub, student = futures[fut][:3]
                try:
                    res = fut.result()
                except Exception as err:  # noqa: BLE001 - e.g. the worker process itself died
                    res = _blank_result(student, sol.stem, read_notebook(sol), "grader error", f"The grader failed on this submission: {err!r}")
                results.append(res)
                progress(f"{res.student_id:<20} {res.assignment:<24} {_num(res.score):>6} / {_num(res.max_score):<6} {res.status}")
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    results.sort(key=lambda r: (r.student_id, r.assignment))
    write_results(results, out, warnings)
    return results


# --- writing the gradebook -----------------------------------------------------------------------------------


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def feedback_markdown(r: SubmissionResult) -> str:
    lines = [f"# Feedback on {r.assignment} for {r.student_id}", "",
             f"**Score: {_num(r.score)} / {_num(r.max_score)}**" + ("" if r.status == "graded" else f" ({r.status})"), ""]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    lines += ["| Exercise | Test | Points | Result |", "|---|---|---|---|"]
    for t in r.tests:
        lines.append(f"| {t.exercise.replace('|', '/')} | {t.grade_id} | {_num(t.points)} / {_num(t.max_points)} | {t.status} |")
    details = [t for t in r.tests if t.status in ("failed", "error") and t.message]
    if details:
        lines += ["", "## What to look at", ""]
        for t in details:
            lines += [f"### {t.exercise or t.grade_id} ({t.status})", "", "```", t.message.strip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_results(results: list[SubmissionResult], out: Path, warnings: list[str]) -> None:
    """grades.csv, grades.json and feedback/<student>/<assignment>.md, each written atomically;
    the feedback folder is replaced as a whole, so no stale file from an earlier run survives."""
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student_id", "assignment", "score", "max_score", "status"])
    for r in results:
        writer.writerow([r.student_id, r.assignment, _num(r.score), _num(r.max_score), r.status])
    write_atomic(out / "grades.csv", buf.getvalue())
    data = {"warnings": warnings, "results": [asdict(r) for r in results]}
    write_atomic(out / "grades.json", json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    fresh = Path(tempfile.mkdtemp(prefix=".feedback-", dir=out))
    for r in results:
        path = fresh / _safe(r.student_id) / f"{r.assignment}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(feedback_markdown(r), encoding="utf-8")
    old = out / "feedback"
    trash = out / f".feedback-old-{os.getpid()}"
    if old.exists():
        os.replace(old, trash)
    os.replace(fresh, old)
    shutil.rmtree(trash, ignore_errors=True)
