"""`course grade`: grade a folder of submitted exercise notebooks against the solution notebooks.

    SUBMISSIONS_DIR/<student_id>/NN_name.ipynb   ->   OUT_DIR/grades.csv, grades.json, feedback/

The grader never trusts a submission. From each submitted notebook it takes only the learners'
answer cells, matched by `metadata.nbgrader.grade_id` to the teacher's answer cells; everything
else (test cells, extra cells, metadata, outputs) is ignored. The answers run in a fresh kernel
inside a bubblewrap sandbox (see `sandbox`); the teacher's tests, visible and hidden, run in this
process and reach the learner's values through that kernel as plain data (see `runner`). A test
cell earns its points only if the checks, here, ran to the end without an exception.

Every submission gets a row, whatever it contains; one broken submission never stops the batch.
Submission files are only ever read, and never through a symbolic link; results are written
after every sandbox has gone.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
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
    parse_notebook,
    points,
    read_notebook,
    source,
    strip_solution,
    validate_solution_notebook,
    write_atomic,
)
from .runner import Step, run_steps
from .sandbox import CellRun, Limits, sandbox_status

MAX_SUBMISSION_BYTES = 20 * 2**20
NOT_ATTEMPTED_NAMES = {"NotAttempted"}
FAILED_NAMES = {"CheckFailed", "AssertionError"}
LINK_NOTE = "is a symbolic link; the grader does not follow links, so it was not graded"

# What `course grade --no-sandbox` prints (and grades.json records) before it grades anything.
NO_SANDBOX_WARNING = """\
WARNING: grading WITHOUT the sandbox. The learners' code runs as you, with your files and your network:
  - it can read anything you can read (the solutions and their hidden tests, other students' notebooks),
    and write or delete anything you can (submissions, grades.csv, feedback, your home folder);
  - processes it starts can outlive the grading and change the results after it ends;
  - it can signal or trace the grader's own processes and connect to the network.
The checks still run in the grader's process, out of the learners' reach, and the time, output, memory,
file-size and CPU limits still apply. Grade untrusted submissions only in the sandbox (install bubblewrap)
or in a throwaway container."""


@dataclass
class TestResult:
    grade_id: str
    exercise: str  # the heading of the exercise the test belongs to
    points: float
    max_points: float
    status: str  # passed | partial | failed | not attempted | not submitted | error
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


def score(status: str, run: CellRun, max_points: float) -> tuple[str, float]:
    """The points a test earns: all of them when it passed; for a multi-part check (`checks.check_all`)
    that failed, the share of parts that were right ("partial"); otherwise none."""
    if status == "passed":
        return "passed", float(max_points)
    if status == "failed" and run.credit:
        return "partial", round(max_points * run.credit, 2)
    return status, 0.0


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


def read_submission(path: Path) -> tuple[bytes | None, str, str]:
    """The submitted file's bytes, or (None, status, why not). Never follows a symbolic link, not
    even for the student's folder, and reads only regular files."""
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, "unreadable", f"The folder {path.parent.name} {LINK_NOTE}."
        return None, "not submitted", f"No {path.name} was submitted."
    try:
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except OSError as err:
            if err.errno == errno.ENOENT:
                return None, "not submitted", f"No {path.name} was submitted."
            if err.errno == errno.ELOOP:
                return None, "unreadable", f"The submitted {path.name} {LINK_NOTE}."
            return None, "unreadable", f"The submission could not be read ({err.strerror})."
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None, "unreadable", f"The submitted {path.name} is not a regular file; it was not graded."
            if info.st_size > MAX_SUBMISSION_BYTES:
                return None, "unreadable", f"The submitted file is larger than {MAX_SUBMISSION_BYTES // 2**20} MB; it was not graded."
            return f.read(MAX_SUBMISSION_BYTES + 1), "", ""
    finally:
        os.close(folder)


def grade_submission(solution_path: Path, submission_path: Path, student: str, *, limits: Limits,
                     sandbox: bool = True, protect: list[Path] = (), work_root: Path | None = None) -> SubmissionResult:
    """Grade one submitted notebook. Never raises for anything the submission contains."""
    started = time.monotonic()
    solution = read_notebook(solution_path)
    assignment = solution_path.stem
    raw, status, why = read_submission(submission_path)
    if raw is None:
        return _blank_result(student, assignment, solution, status, why)
    try:
        submission = parse_notebook(raw, submission_path.name)
    except NotebookError as err:
        return _blank_result(student, assignment, solution, "unreadable",
                             f"The submission could not be read: {str(err).split(': ', 1)[-1]}")
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
    report = run_steps(steps, limits=limits, sandbox=sandbox, split=True, protect=list(protect), temp_root=work_root)
    notes += report.notes
    if report.restarts:
        notes.append(f"The kernel stopped {report.restarts} time(s) (see the exercises marked error); "
                     "it was restarted and the other exercises were graded without the cell that stopped it.")
    titles = exercise_titles(solution)
    owners = answer_owner(solution)
    step_of = {cell: step for step, cell in where.items()}
    tests, total = [], 0.0
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
        status, earned = score(status, run, points(cell))
        total += earned
        tests.append(TestResult(grade_id(cell) or f"cell {i}", titles[i], earned, points(cell), status, message))
    return SubmissionResult(student, assignment, total, max_score(solution), "graded", tests, notes,
                            round(time.monotonic() - started, 2))


def _safe(name: str) -> str:
    """A file name for a student id; ids that had to be changed get a short hash, so that
    "a b" and "a_b" never share a feedback file."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "student"
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _grade_job(args: tuple) -> SubmissionResult:
    solution_path, submission_path, student, limits, sandbox, protect, work_root = args
    try:
        if submission_path is None:  # a student "folder" that is a symbolic link
            return _blank_result(student, solution_path.stem, read_notebook(solution_path), "unreadable",
                                 f"The folder {student} {LINK_NOTE}.")
        return grade_submission(solution_path, submission_path, student, limits=limits, sandbox=sandbox,
                                protect=protect, work_root=work_root)
    except Exception as err:  # noqa: BLE001 - a grader bug must not cost the rest of the class
        solution = read_notebook(solution_path)
        return _blank_result(student, solution_path.stem, solution, "grader error", f"The grader failed on this submission: {err!r}")


# --- a whole class --------------------------------------------------------------------------------------


def discover(submissions: Path, solutions: Path, assignments: list[str] | None) -> tuple[list[tuple[str, Path, Path | None]], list[str]]:
    """(student, solution, submission) jobs, and warnings about files that match no assignment.

    Every folder in `submissions` is a student (ids starting with "." included). A student entry
    that is a symbolic link gets rows too, with submission None: it is reported, not followed.
    """
    known = {p.stem: p for p in sorted(solutions.glob("*.ipynb"))}
    with os.scandir(submissions) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    students = [e for e in listed if e.is_dir(follow_symlinks=False)]
    links = [e for e in listed if e.is_symlink()]
    if not students and not links:
        raise ValueError(f"no student folders in {submissions} (expected {submissions}/<student_id>/NN_name.ipynb)")
    notebooks = {}
    for d in students:
        with os.scandir(d.path) as files:
            notebooks[d.name] = sorted(f.name for f in files if f.name.endswith(".ipynb") and not f.is_dir(follow_symlinks=False))
    warnings = []
    if assignments:
        unknown = [a for a in assignments if Path(a).stem not in known]
        if unknown:
            raise ValueError(f"no solution notebook for {', '.join(unknown)} in {solutions}")
        chosen = [Path(a).stem for a in assignments]
    else:
        chosen = sorted({Path(n).stem for names in notebooks.values() for n in names if Path(n).stem in known})
    for d in students:
        for name in notebooks[d.name]:
            if Path(name).stem not in known:
                warnings.append(f"{d.name}/{name}: no solution notebook of that name; not graded")
    for link in links:
        warnings.append(f"{link.name}: {LINK_NOTE}")
    jobs = [(d.name, known[a], submissions / d.name / f"{a}.ipynb") for d in students for a in chosen]
    jobs += [(link.name, known[a], None) for link in links for a in chosen]
    return sorted(jobs, key=lambda j: (j[0], j[1].stem)), warnings


def grade_all(submissions: Path, solutions: Path, out: Path, *, jobs: int = 2, limits: Limits | None = None,
              assignments: list[str] | None = None, sandbox: bool = True, progress=print) -> list[SubmissionResult]:
    """Grade every submission; `sandbox=False` only when the caller has said so (see NO_SANDBOX_WARNING)."""
    limits = limits or Limits()
    submissions, solutions, out = submissions.resolve(), solutions.resolve(), out.resolve()
    todo, warnings = discover(submissions, solutions, assignments)
    # A broken solution notebook is the teacher's to fix: say so before grading anyone with it.
    for sol in sorted({sol for _, sol, _ in todo}):
        problems = validate_solution_notebook(read_notebook(sol), sol.name)
        if problems:
            raise ValueError(f"{sol} cannot be used for grading: " + "; ".join(problems[:5]))
    if sandbox:
        ok, why = sandbox_status()
        if not ok:
            raise ValueError(f"the grading sandbox is not available: {why}.\n"
                             "Learners' code must not run unconfined on your machine: install bubblewrap (Linux), grade "
                             "inside a throwaway container (see the README), or, knowing what that exposes, run again "
                             "with --no-sandbox.")
    if not sandbox:
        warnings.insert(0, "graded without the sandbox (--no-sandbox): " + NO_SANDBOX_WARNING.splitlines()[0])
    for w in warnings:
        progress(f"warning: {w}")
    work_root = Path(tempfile.mkdtemp(prefix="course-grade-"))
    protect = [solutions, submissions, out, work_root]
    results: list[SubmissionResult] = []
    try:
        args = [(sol, sub, student, limits, sandbox, protect, work_root) for student, sol, sub in todo]
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
    # Every worker (and so every sandbox) is gone: only now are the results written.
    results.sort(key=lambda r: (r.student_id, r.assignment))
    write_results(results, out, warnings)
    return results


# --- writing the gradebook -----------------------------------------------------------------------------------


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _csv_cell(text: str) -> str:
    """One CSV cell. A cell that a spreadsheet would run as a formula (it starts with = + - @, a tab
    or a carriage return) gets a leading apostrophe and quotes, so it stays text."""
    text = str(text)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return '"' + ("'" + text).replace('"', '""') + '"'
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def feedback_markdown(r: SubmissionResult) -> str:
    lines = [f"# Feedback on {r.assignment} for {r.student_id}", "",
             f"**Score: {_num(r.score)} / {_num(r.max_score)}**" + ("" if r.status == "graded" else f" ({r.status})"), ""]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    lines += ["| Exercise | Test | Points | Result |", "|---|---|---|---|"]
    for t in r.tests:
        lines.append(f"| {t.exercise.replace('|', '/')} | {t.grade_id} | {_num(t.points)} / {_num(t.max_points)} | {t.status} |")
    details = [t for t in r.tests if t.status in ("partial", "failed", "error") and t.message]
    if details:
        lines += ["", "## What to look at", ""]
        for t in details:
            lines += [f"### {t.exercise or t.grade_id} ({t.status})", "", "```", t.message.strip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_results(results: list[SubmissionResult], out: Path, warnings: list[str]) -> None:
    """grades.csv, grades.json and feedback/<student>/<assignment>.md, each written atomically;
    the feedback folder is replaced as a whole, so no stale file from an earlier run survives."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [["student_id", "assignment", "score", "max_score", "status"]]
    rows += [[r.student_id, r.assignment, _num(r.score), _num(r.max_score), r.status] for r in results]
    write_atomic(out / "grades.csv", "".join(",".join(_csv_cell(c) for c in row) + "\n" for row in rows))
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
