"""`course grade`: grade a folder of submitted exercise notebooks against the solution notebooks.

    SUBMISSIONS_DIR/<student_id>/NN_name.ipynb   ->   OUT_DIR/gradebook.db   ->   grades.csv, grades.json, feedback/

Each run adds what it graded to the gradebook (see `gradebook`: attempts, the solutions' hash,
adjustments) and rewrites the exports from all of it (see `export`). Which folder is which student
and which notebook is which assignment follows the rules of `discover` and `resolve_notebooks`;
every file passed over is a warning recorded with the results.

The grader never trusts a submission. From each submitted notebook it takes only the learners'
answer cells, matched by `metadata.nbgrader.grade_id` to the teacher's answer cells; everything
else (test cells, extra cells, metadata, outputs) is ignored. The answers run in a fresh kernel
inside a bubblewrap sandbox (see `sandbox`); the teacher's tests, visible and hidden, run in this
process and reach the learner's values through that kernel as plain data (see `runner`). A test
cell earns its points only if the checks, here, ran to the end without an exception. What the
learner is told (status words, points, hints, the feedback file) is `course_lib.feedback`'s.

Every submission gets a row, whatever it contains; one broken submission never stops the batch.
Each is checked in a short-lived process of its own, killed from outside at its time limit plus a
margin whatever it is doing (see `worker`); a process that dies costs only its own submission. Each
result is committed to the gradebook as soon as its process and sandbox have gone, so an interrupted
batch keeps what it finished, and running the same command again resumes where it stopped.
Submission files are only ever read, and never through a symbolic link. A notebook's outputs
(figures, printed text) are left aside: only its answer cells are graded, so the size limit
(`--max-size`) applies to what is left.

Manually graded answers (nbgrader's `grade: true, solution: true`, usually a markdown cell for a
written answer) are collected, not graded: each becomes a "to be marked" entry with the learner's
text, which a person marks later (`course mark`); the marks join the score in the gradebook.

A run is visible: `grade_all(dry_run=True)` (`course grade --dry-run`) grades, in the same checking
processes, and shows whose scores would change, old -> new, per exercise, and writes nothing; a real
run prints and records the same summary of what it changed (`runs.changes`), with the teacher's
`--reason`, and the gradebook keeps every replaced version (see `gradebook`), each as its new result
is committed.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import unicodedata
from collections import Counter
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import timezone
from pathlib import Path

import course_lib
from course_lib.feedback import (
    MANUAL_STATUS,
    TestResult,
    added_cell_hint,
    added_cells_note,
    answer_owner,
    classify,
    exercise_titles,
    explain,
    num,
    score,
    stopped,
)
from course_lib.runner.notebook import (
    NotebookError,
    defined_names,
    exact_filenames,
    grade_id,
    is_manual,
    is_solution,
    is_test,
    parse_notebook,
    points,
    read_notebook,
    source,
    strip_solution,
    validate_solution_notebook,
)
from course_lib.runner.process import INTERRUPT_GRACE_S, CellRun, Limits
from course_lib.runner.steps import Step

from . import budgets
from .export import write_exports
from .gradebook import Gradebook, Row, open_gradebook, parse_time, text_sha256
from .roster import Roster, read_roster
from .runner import run_steps
from .sandbox import sandbox_status, seccomp_usable
from .worker import Ending, Task, run_batch

MAX_NOTEBOOK_BYTES = 20 * 2**20  # a notebook once its outputs are left aside (`course grade --max-size`, in MB)
MAX_SUBMISSION_BYTES = 1024 * 2**20  # the most of a file the grader reads at all, outputs included
STOP_MARGIN_S = 30.0  # after a submission's own limits (total time, a kernel start, an interrupt), before it is killed
HIDDEN_MARK = "\x1e course: the hidden tests start here \x1e"  # printed by a test cell where its hidden tests start
HIDDEN_FAILED = (
    "a hidden test failed: your answer passes the visible test but not the teacher's other cases "
    "(your teacher keeps their inputs private). Try your answer on other inputs: larger or smaller "
    "values, edge cases, other shapes."
)
COURSE_SOLUTIONS = Path(course_lib.__file__).resolve().parents[1] / "solutions"  # public: their hidden tests are too
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
class SubmissionResult:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str  # graded | not submitted | unreadable | wrong notebook | stopped | grader error
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    manual: list[ManualAnswer] = field(default_factory=list)  # answers a person marks (not in score or max_score)


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


# --- the teacher's notebook --------------------------------------------------------------------------


def test_cells(nb: dict) -> list[tuple[int, dict]]:
    return [(i, c) for i, c in enumerate(nb["cells"]) if is_test(c)]


def max_score(nb: dict) -> float:
    """The points the tests can give (manually graded answers come on top, when a person marks them)."""
    return sum(points(c) for _, c in test_cells(nb))


def manual_answers(solution: dict, submission: dict | None, why: str = "") -> list[ManualAnswer]:
    """The learner's answer to each of the solution's manually graded cells (`is_manual`). With no
    submission (`why` says what happened), each is "not submitted" or, for an unreadable one, "error"."""
    titles = exercise_titles(solution)
    found: dict[str, str] = {}
    for cell in (submission or {}).get("cells", []):
        gid = grade_id(cell)
        if gid is not None and gid not in found:
            found[gid] = source(cell)
    answers, last_test = [], None
    for i, cell in enumerate(solution["cells"]):
        if is_test(cell):
            last_test = grade_id(cell)
        if not is_manual(cell):
            continue
        gid = grade_id(cell) or f"cell {i}"
        text = found.get(gid)
        if submission is None:
            status, message = ("not submitted" if why.startswith("No ") else "error"), why
        elif text is None:
            status, message = "not submitted", "the answer cell for this question is missing from the submission"
        elif not text.strip() or text.strip() == strip_solution(cell).strip():
            status, message = "not attempted", "not answered yet"
        else:
            status, message = MANUAL_STATUS, ""
        answers.append(
            ManualAnswer(
                gid, titles[i], 0.0, points(cell), status, message, text or "", text_sha256(text or ""), last_test
            )
        )
    return answers


def strip_outputs(nb: dict) -> dict:
    """The notebook without what running it added (outputs, attachments): what grading reads."""
    for cell in nb.get("cells", []):
        if isinstance(cell, dict):
            cell.pop("outputs", None)
            cell.pop("attachments", None)
    return nb


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


def _teacher_checks(solution: dict, solution_path: Path) -> None:
    """A teacher's own exercise set names its checks module's file (`course new --checks DIR` writes
    `metadata.course.checks`, relative to the notebook): its folder goes first on this process's import
    path, so the tests run here import the teacher's module, never a copy a learner handed in."""
    meta = solution.get("metadata", {}).get("course", {})
    rel = meta.get("checks") if isinstance(meta, dict) else None
    if isinstance(rel, str) and rel:
        folder = str((solution_path.parent / rel).resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)


# --- one submission ------------------------------------------------------------------------------------


def _blank_result(student: str, assignment: str, solution: dict, status: str, message: str) -> SubmissionResult:
    titles = exercise_titles(solution)
    each = "not submitted" if status == "not submitted" else "error"
    tests = [
        TestResult(grade_id(c) or f"cell {i}", titles[i], 0.0, points(c), each, message)
        for i, c in test_cells(solution)
    ]
    manual = manual_answers(solution, None, message if status != "not submitted" else "No answer.")
    return SubmissionResult(student, assignment, 0.0, max_score(solution), status, tests, [message], manual=manual)


def added_cells(solution: dict, submission: dict) -> list[tuple[str, set[str]]]:
    """Non-empty code cells of the submission that are not the teacher's (no grade_id the solution
    knows): (first line, names it defines). The grader does not run them."""
    known = {grade_id(c) for c in solution["cells"]} - {None}
    added = []
    for cell in submission["cells"]:
        if cell.get("cell_type") != "code" or grade_id(cell) in known:
            continue
        text = source(cell)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if lines:
            added.append((lines[0].strip()[:60], defined_names(text)))
    return added


def merge(
    solution: dict, submission: dict, exercise_stub: dict[str, str], mark_hidden: bool = False
) -> tuple[list[Step], dict[int, int], list[str], set[str]]:
    """The teacher's code cells with the learner's answers in place of the solutions.

    Returns the steps, a map step -> teacher cell index, notes, and the answer grade_ids that were
    missing from the submission. `mark_hidden`: each test cell prints HIDDEN_MARK where its hidden
    tests start, so that a failure there can be told from one in the visible part.
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
    added = added_cells(solution, submission)
    if added:
        notes.append(added_cells_note(added))
    steps, where, missing = [], {}, set()
    first_answer = next(
        (i for i, c in enumerate(solution["cells"]) if is_solution(c) and c["cell_type"] == "code"),
        len(solution["cells"]),
    )
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
            text = source(cell)
            if mark_hidden:
                text = re.sub(
                    r"(?m)^([ \t]*)(### BEGIN HIDDEN TESTS)", lambda m: f"{m[1]}print({HIDDEN_MARK!r})  {m[2]}", text
                )
            steps.append(Step("test", text, gid))
        else:
            steps.append(Step("setup" if i < first_answer else "code", source(cell), gid))
        where[len(steps) - 1] = i
    return steps, where, notes, missing


def read_submission(path: Path, root: Path | None = None) -> tuple[bytes | None, str, str]:
    """The submitted file's bytes, or (None, status, why not). Reads only a regular file and never
    through a symbolic link: not the file, not its folder, and with `root` (the submissions folder)
    no folder between `root` and the file either."""
    parts = [path.name] if root is None else list(path.relative_to(root).parts)
    try:
        folder = os.open(path.parent if root is None else root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, "unreadable", f"The folder {path.parent.name} {LINK_NOTE}."
        return None, "not submitted", f"No {path.name} was submitted."
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    return None, "unreadable", f"The folder {part} {LINK_NOTE}."
                return None, "not submitted", f"No {path.name} was submitted."
            os.close(folder)
            folder = inner
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
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
                return (
                    None,
                    "unreadable",
                    (
                        f"The submitted file is {_mb(info.st_size)}, larger than the "
                        f"{_mb(MAX_SUBMISSION_BYTES)} the grader reads; it was not graded."
                    ),
                )
            return f.read(MAX_SUBMISSION_BYTES + 1), "", ""
    finally:
        os.close(folder)


def grade_submission(
    solution_path: Path,
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
) -> SubmissionResult:
    """Grade one submitted notebook (read through `root`, the submissions folder, when given); its
    kernels' cgroups go under `budget`. `max_bytes`: the most the notebook may weigh without its
    outputs; `hide_hidden`: a failure in a test cell's hidden part says so without the check's words
    (which may show the hidden inputs). Never raises for anything the submission contains."""
    started = time.monotonic()
    solution = read_notebook(solution_path)
    _teacher_checks(solution, solution_path)
    assignment = solution_path.stem
    raw, status, why = read_submission(submission_path, root)
    if raw is None:
        return _blank_result(student, assignment, solution, status, why)
    try:
        submission = strip_outputs(parse_notebook(raw, submission_path.name))
    except NotebookError as err:
        return _blank_result(
            student,
            assignment,
            solution,
            "unreadable",
            f"The submission could not be read: {str(err).split(': ', 1)[-1]}",
        )
    del raw
    metadata = submission.get("metadata", {})
    if not isinstance(metadata, dict):
        return _blank_result(
            student,
            assignment,
            solution,
            "unreadable",
            f"The submission could not be read: its metadata is a {type(metadata).__name__}, "
            "not a JSON object, so it is not a valid notebook.",
        )
    kept = len(json.dumps(submission, ensure_ascii=False).encode("utf-8"))
    if kept > max_bytes:
        return _blank_result(
            student,
            assignment,
            solution,
            "unreadable",
            f"The notebook is {_mb(kept)} even without its outputs, over the limit of "
            f"{_mb(max_bytes)} (`course grade --max-size`); it was not graded.",
        )
    answer_ids = [grade_id(c) for c in solution["cells"] if is_solution(c) and c["cell_type"] == "code"]
    submitted_ids = {grade_id(c) for c in submission["cells"]}
    built_from = metadata.get("course_lib", {})
    built_from = built_from.get("built_from", "") if isinstance(built_from, dict) else ""
    if not submitted_ids.intersection(answer_ids) or (built_from and Path(str(built_from)).name != solution_path.name):
        other = (
            f" (it was made from {built_from})"
            if built_from and Path(str(built_from)).name != solution_path.name
            else ""
        )
        return _blank_result(
            student,
            assignment,
            solution,
            "wrong notebook",
            f"This is not the exercise notebook {solution_path.name}{other}: none of its answer cells were found.",
        )
    stubs = {grade_id(c): strip_solution(c) for c in solution["cells"] if is_solution(c)}
    steps, where, notes, missing = merge(solution, submission, stubs, mark_hidden=hide_hidden)
    if missing:
        notes.append(
            "Answer cells missing from the submission (graded as not submitted): " + ", ".join(sorted(missing)) + "."
        )
    report = run_steps(
        steps, limits=limits, sandbox=sandbox, split=True, protect=list(protect), temp_root=work_root, budget=budget
    )
    notes += report.notes
    if report.restarts:
        notes.append(
            f"The kernel stopped {report.restarts} time(s) (see the exercises marked error); "
            "it was restarted and the other exercises were graded without the cell that stopped it."
        )
    titles = exercise_titles(solution)
    owners = answer_owner(solution)
    added = added_cells(solution, submission)
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
                    notes.append(
                        f"{titles[i]}: your answer cell {stopped(arun)}; "
                        "the test passed with what the cell had defined before that."
                    )
                    break
        if hide_hidden and status in ("failed", "partial", "error") and HIDDEN_MARK in (run.stdout or ""):
            status, message = ("failed" if status != "error" else status), HIDDEN_FAILED
        if status != "passed" and "is not defined" in message:
            message += added_cell_hint(message, added)
        status, earned = score(status, run, points(cell))
        total += earned
        tests.append(TestResult(grade_id(cell) or f"cell {i}", titles[i], earned, points(cell), status, message))
    return SubmissionResult(
        student,
        assignment,
        total,
        max_score(solution),
        "graded",
        tests,
        notes,
        round(time.monotonic() - started, 2),
        manual=manual_answers(solution, submission),
    )


def _grade_job(
    job: Job,
    limits: Limits,
    sandbox: bool,
    protect: list[Path],
    work_root: Path,
    root: Path,
    budget: budgets.Group | None = None,
) -> SubmissionResult:
    """One job, in its own process (see `worker`)."""
    solution_path, student = job.solution, job.student
    try:
        if job.submission is None:
            res = _blank_result(student, solution_path.stem, read_notebook(solution_path), job.status, job.why)
        else:
            res = grade_submission(
                solution_path,
                job.submission,
                student,
                limits=limits,
                sandbox=sandbox,
                protect=protect,
                work_root=work_root,
                root=root,
                budget=budget,
                max_bytes=job.max_bytes,
                hide_hidden=job.hide_hidden,
            )
    except Exception as err:  # noqa: BLE001 - a grader bug must not cost the rest of the class
        res = _blank_result(
            student,
            solution_path.stem,
            read_notebook(solution_path),
            "grader error",
            f"The grader failed on this submission: {type(err).__name__}: {str(err)[:500]}",
        )
    res.notes = job.notes + res.notes
    return res


def _ended_result(job: Job, ending: Ending) -> SubmissionResult:
    """The row of a submission whose checking process ended without a result (see `worker.Ending`)."""
    if ending.status == "stopped":
        message = (
            f"The grader stopped checking this submission: {ending.message}, past its time limit plus a "
            "margin, in code that no time limit inside the grader can interrupt. No other submission was "
            "affected."
        )
    else:
        message = f"The grader could not finish this submission: {ending.message}. No other submission was affected."
    message += f" To grade it again: course grade ... --student {job.student}"
    res = _blank_result(job.student, job.solution.stem, read_notebook(job.solution), ending.status, message)
    res.notes = job.notes + res.notes
    res.seconds = ending.seconds
    return res


# --- finding the submissions ----------------------------------------------------------------------------

IGNORED_FOLDERS = ("__MACOSX",)  # macOS's resource forks in a zip made on a Mac
NOT_STUDENTS = ("__MACOSX", ".ipynb_checkpoints", ".git", ".Trash", ".Trashes", ".Spotlight-V100", ".fseventsd")


@dataclass
class Job:
    """One (student, assignment) to grade: the file found for it, or why there is none."""

    student: str
    solution: Path
    submission: Path | None  # the notebook chosen (under the submissions folder), None if none
    status: str = "not submitted"  # the row's status when submission is None
    why: str = ""  # the row's message when submission is None
    notes: list[str] = field(default_factory=list)  # every decision about this student's files, told in the feedback
    max_bytes: int = MAX_NOTEBOOK_BYTES  # the most the notebook may weigh without its outputs (--max-size)
    hide_hidden: bool = False  # --hide-hidden-inputs: a failed hidden test is named, not quoted


def loose_stem(name: str) -> str:
    """A notebook name without what copies, downloads and resubmissions add ("06_Attention (1)",
    "Copy of 06_attention", "06_attention-Copy1", "06-attention", "06_attention_final", "06_attention v2")
    and the exercise notebook's suffix ("06_attention_exercises"), and without case and punctuation.
    `course unpack` and `course grade` both match names with it."""
    stem = name.casefold().strip()
    stem = re.sub(r"^(copy of |kopie von |copie de )", "", stem)
    previous = None
    while previous != stem:
        previous = stem
        stem = re.sub(
            r"(\s*\(\d+\)|[-_ ]copy\d*|[-_ ]checkpoint|[-_ ]\d+"
            r"|[-_ ](final|v\d+|new|fixed|corrected|revised|exercises?))$",
            "",
            stem,
        ).strip()
    return re.sub(r"[\W_]+", "", stem)


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in IGNORED_FOLDERS


def notebooks_in(folder: Path, depth: int = 3) -> tuple[list[Path], list[str]]:
    """The notebooks in a student's folder, up to `depth` folders down, never through a link; and
    what was passed over (hidden entries and __MACOSX holding notebooks, linked notebooks)."""
    found, passed = [], []
    stack = [(folder, 0)]
    while stack:
        here, level = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            rel = Path(e.path).relative_to(folder).as_posix()
            if _hidden(e.name):
                if e.is_dir(follow_symlinks=False) or e.name.endswith(".ipynb"):
                    inner = (
                        notebooks_in(Path(e.path), depth - level - 1)[0]
                        if e.is_dir(follow_symlinks=False) and level < depth
                        else []
                    )
                    if inner or e.name.endswith(".ipynb"):
                        passed.append(f"`{rel}` (hidden or macOS metadata: ignored)")
                continue
            if e.is_symlink():
                if e.name.endswith(".ipynb"):
                    passed.append(f"`{rel}` ({LINK_NOTE.removeprefix('is ')})")
                continue
            if e.is_dir(follow_symlinks=False):
                if level < depth:
                    stack.append((Path(e.path), level + 1))
            elif e.name.endswith(".ipynb") and e.is_file(follow_symlinks=False):
                found.append(Path(e.path))
    return sorted(found), passed


def _built_from(path: Path, root: Path) -> str | None:
    raw, _, _ = read_submission(path, root)
    try:
        meta = json.loads(raw).get("metadata", {}).get("course_lib", {}) if raw else {}
        return Path(str(meta.get("built_from", ""))).stem or None if isinstance(meta, dict) else None
    except (ValueError, AttributeError, TypeError):
        return None


def resolve_notebooks(
    folder: Path, known: list[str], root: Path
) -> tuple[dict[str, tuple[Path, list[str]]], list[str]]:
    """Which notebook in a student's folder is each assignment's, by one rule (`course unpack` follows
    the same one):

    1. the candidates are the notebooks named like the assignment once case, punctuation and what copies,
       downloads and resubmissions add are ignored, anywhere in the folder: `06_attention.ipynb`,
       `06_Attention (1).ipynb`, `Copy of 06_attention.ipynb`, `06_attention_final.ipynb`,
       `work/06_attention.ipynb`;
    2. if there are none, the notebooks whose metadata says they were built from that assignment
       (`course build` records it: a renamed file);
    3. of several candidates, the most recently changed counts (the exact name at the top of the
       folder on a tie); the others are named in the feedback.

    Hidden files and folders, `__MACOSX` and links are never graded. Returns assignment -> (file,
    notes), and notes about notebooks that matched nothing."""
    found, passed = notebooks_in(folder)
    chosen: dict[str, tuple[Path, list[str]]] = {}
    used: set[Path] = set()
    loose = {a: loose_stem(a) for a in known}

    def rel(p: Path) -> str:
        return p.relative_to(folder).as_posix()

    exact = {a: exact_filenames(a) for a in known}  # 06_attention.ipynb, 06_attention_exercises.ipynb
    for a in known:  # an exact name as a symbolic link: graded as what it is (a link, so unreadable), never followed
        top = next((folder / n for n in exact[a] if (folder / n).is_symlink()), None)
        if top is not None:
            chosen[a] = (top, [])
            used.add(top)
    for rule in ("name", "metadata"):
        for a in known:
            if a in chosen:
                continue
            if rule == "name":
                cands = [f for f in found if f not in used and loose_stem(f.stem) == loose[a]]
            else:
                cands = [
                    f
                    for f in found
                    if f not in used
                    and not any(loose_stem(f.stem) == v for v in loose.values())
                    and _built_from(f, root) == a
                ]
            if not cands:
                continue
            cands.sort(key=lambda f: (-f.stat().st_mtime, not (f.parent == folder and f.name in exact[a]), rel(f)))
            best = cands[0]
            why = (
                "its name differs"
                if rule == "name"
                else "its name differs, but it was made from this assignment's notebook"
            )
            if rule == "name" and best.name in exact[a] and best.parent != folder:
                why = "it is in a subfolder"
            plain = (best.parent == folder and best.name in exact[a]) or rel(best) in {
                f"{a}/{n}" for n in exact[a]
            }  # nbgrader: <student>/<a>/<a>.ipynb
            notes = (
                []
                if plain
                else [f"Graded `{rel(best)}` as {a} ({why}; expected `{a}.ipynb` at the top of your folder)."]
            )
            if len(cands) > 1:
                notes.append(
                    f"Several notebooks could be {a}: graded the most recently changed, `{rel(best)}`; "
                    "not graded: " + ", ".join(f"`{rel(f)}`" for f in cands[1:]) + "."
                )
            chosen[a] = (best, notes)
            used.update(cands)
    extra = [f"`{rel(f)}` matches no assignment; it was not graded." for f in found if f not in used]
    if passed:
        extra.append("Not graded: " + ", ".join(passed) + ".")
    return chosen, extra


def student_key(sid: str) -> str:
    """What makes two ids the same student: Unicode form (NFC/NFD "José") and case ("Ada"/"ada") do not count."""
    return unicodedata.normalize("NFC", sid).casefold()


def discover(
    submissions: Path,
    solutions: Path,
    assignments: list[str] | None,
    roster: Roster | None = None,
    students: list[str] | None = None,
    known_ids: list[str] = (),
) -> tuple[list[Job], list[str]]:
    """The jobs to grade, and warnings about everything passed over.

    Every folder in `submissions` is a student. Ids are matched ignoring case and Unicode form: a
    folder takes the spelling of an id the gradebook (`known_ids`) or the roster already has, else
    its own name in NFC form; two folders that are the same id this way are one student (the first
    graded, a warning and a note for the other). Without a roster, a hidden folder (a leading dot) is
    a student whose row says it was not graded and why (folders that are never students, such as
    `__MACOSX` and `.ipynb_checkpoints`, are passed over with a warning). With a roster, a folder is
    the student whose id it is; a folder named otherwise (a name, an email) is matched to the roster
    (see Roster.find) with a warning, and one that matches nobody is not graded, with a warning. Rows
    for "not submitted" are made only for the assignments named in `assignments`: then every student
    (every active roster student, with a roster) gets a row for each. A dropped student (`course
    roster drop`) is not graded; an LMS's test student is graded when it hands something in, and
    never "not submitted". Links are reported, never followed.
    """
    known = {p.stem: p for p in sorted(solutions.glob("*.ipynb"))}
    if assignments:
        unknown = [a for a in assignments if Path(a).stem not in known]
        if unknown:
            raise ValueError(
                f"no solution notebook for {', '.join(unknown)} in {solutions} (it has: {', '.join(known) or 'none'})"
            )
    warnings: list[str] = []
    spelling = {student_key(k): k for k in known_ids}
    if roster is not None:
        spelling.update({student_key(s.id): s.id for s in roster.students})

    def preferred(e: os.DirEntry) -> tuple:
        """Of folders that are one id, the one named as the id is known, else in NFC form, comes first."""
        nfc = unicodedata.normalize("NFC", e.name)
        return spelling.get(student_key(nfc), nfc) != e.name, nfc != e.name, e.name

    with os.scandir(submissions) as entries:
        listed = sorted(entries, key=preferred)
    folders: dict[str, os.DirEntry] = {}  # student id -> its folder
    links: dict[str, os.DirEntry] = {}
    hidden: dict[str, os.DirEntry] = {}
    same: dict[str, list[str]] = {}  # student id -> the other folders that are the same id
    for e in listed:
        if not e.is_symlink() and not e.is_dir(follow_symlinks=False):
            warnings.append(f"{e.name}: a file, not a student folder; not graded")
            continue
        if e.name in NOT_STUDENTS and roster is None:  # with a roster, a listed id is graded whatever its name
            warnings.append(
                f"{e.name}: a hidden folder or macOS metadata, not a student; not graded "
                "(with a roster, a listed id is graded whatever its name)"
            )
            continue
        name = unicodedata.normalize("NFC", e.name)
        sid = spelling.get(student_key(name), name)
        if roster is not None:
            student, how = roster.find(sid)
            if student is None:
                warnings.append(f"{e.name}: not on the roster{' (' + how + ')' if how else ''}; not graded")
                continue
            sid = student.id
            if how:
                warnings.append(f"{e.name}: taken as {sid} ({student.name or 'no name'}), matched by {how}")
            if student.status == "dropped":
                warnings.append(f"{e.name}: {student.label} has dropped the course (course roster drop); not graded")
                continue
        first = folders.get(sid) or links.get(sid) or hidden.get(sid)
        if first is not None:
            if roster is not None and how:  # matched to the roster by a name or an email, not by the id's spelling
                warnings.append(f"{e.name}: {sid} already has the folder {first.name}; not graded")
            else:
                warnings.append(
                    f"{e.name}: the same student as the folder {first.name} (ids are matched ignoring "
                    f"case and Unicode form: both are {sid}); only {first.name} was graded"
                )
            same.setdefault(sid, []).append(e.name)
            continue
        spelling.setdefault(student_key(sid), sid)
        if e.is_symlink():
            warnings.append(f"{e.name}: {LINK_NOTE}")
            links[sid] = e
        elif _hidden(e.name) and roster is None:
            warnings.append(
                f"{e.name}: a hidden folder (its name starts with a dot); it has a row, but was not "
                "graded (rename it, or give a roster that lists this id)"
            )
            hidden[sid] = e
        else:
            folders[sid] = e
    if students:
        everyone = {student_key(s) for s in set(folders) | set(links) | set(hidden)}
        everyone |= {student_key(s.id) for s in roster.students} if roster else set()
        missing = [s for s in students if student_key(s) not in everyone]
        if missing:
            raise ValueError(
                f"no folder in {submissions} for {', '.join(missing)}" + (" and not on the roster" if roster else "")
            )
        wanted = {student_key(s) for s in students}
    if not folders and not links and not hidden and roster is None:
        raise ValueError(f"no student folders in {submissions} (expected {submissions}/<student_id>/NN_name.ipynb)")
    resolved = {
        sid: resolve_notebooks(Path(e.path), list(known), submissions) for sid, e in [*folders.items(), *hidden.items()]
    }
    if assignments:
        chosen = [Path(a).stem for a in assignments]
    else:
        chosen = sorted(
            {a for sid, (found, _) in resolved.items() if sid in folders for a in found}
            | {a for sid, (found, _) in resolved.items() if sid in hidden for a in found}
        )
    jobs: list[Job] = []
    expected = {s.id for s in roster.active} if roster and assignments else set()
    everyone = sorted(set(folders) | set(links) | set(hidden) | expected)
    for sid in everyone:
        if students and student_key(sid) not in wanted:
            continue
        found, extra = resolved.get(sid, ({}, []))
        folder = folders.get(sid) or hidden.get(sid)
        for w in extra if sid in folders else []:
            warnings.append(f"{folder.name}: {w}")
        if sid in folders and not found:
            warnings.append(f"{folder.name}: no notebook for any assignment")
        others = [
            f"The folder `{n}` is the same student id as `{(folder or links[sid]).name}` (ids are matched "
            "ignoring case and Unicode form); it was not graded."
            for n in same.get(sid, [])
        ]
        for a in chosen:
            job = Job(sid, known[a], None, notes=others + list(extra if sid in folders else []))
            if sid in links:
                job.status, job.why = "unreadable", f"The folder {links[sid].name} {LINK_NOTE}."
            elif sid in hidden:
                if a not in found and not assignments:
                    continue
                job.status, job.why = (
                    "unreadable",
                    (
                        f"The folder {hidden[sid].name} is hidden (its name starts with "
                        "a dot), so it was not graded; rename it to grade it."
                    ),
                )
            elif a in found:
                job.submission, decisions = found[a]
                job.notes = decisions + job.notes
                for d in decisions:
                    warnings.append(f"{folder.name}: {d}")
            elif not assignments:
                continue  # not named: no "not submitted" row for an assignment this student never handed in
            else:
                job.why = (
                    f"No {a}.ipynb was submitted."
                    if sid in folders
                    else f"No folder for {sid} in the submissions; nothing was submitted."
                )
            jobs.append(job)
    return sorted(jobs, key=lambda j: (j.student, j.solution.stem)), warnings


# --- a whole class --------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _submitted_at(job: Job, root: Path) -> tuple[str | None, str | None, str | None]:
    """(time, where it came from, file content hash) of a job's file: the time from the student's
    `timestamp.txt` (nbgrader's format: its exchange and `course unpack` write it). A file's modification
    time is not used: copying a folder resets it, and every student would look late."""
    if job.submission is None:
        return None, None, None
    raw, _, _ = read_submission(job.submission, root)
    digest = hashlib.sha256(raw).hexdigest() if raw is not None else None
    stamp = None
    for folder in (job.submission.parent, root / job.submission.relative_to(root).parts[0]):  # beside it, else the top
        stamp = read_submission(folder / "timestamp.txt", root)[0]
        if stamp:
            break
    if stamp:
        try:
            when = parse_time(stamp.decode("utf-8", "replace").splitlines()[0], tz=timezone.utc)
            return when.astimezone(timezone.utc).isoformat(timespec="seconds"), "timestamp.txt", digest
        except (ValueError, IndexError):
            return None, "unreadable timestamp.txt", digest
    return None, None, digest


def _check_provenance(book: Gradebook, hashes: dict[str, tuple[Path, str]], allow_new: bool) -> list[str]:
    """Refuse to mix grades from two versions of an assignment's solutions unless the teacher says so.
    Returns lines for the log (what this run does); what the gradebook holds afterwards is said by
    `Gradebook.state_warnings`, once the run has finished."""
    said = []
    for assignment, (path, digest) in hashes.items():
        earlier = {h: p for p, h in book.solutions_used(assignment)}
        if not earlier or set(earlier) == {digest}:
            continue
        before = ", ".join(f"{p} (sha256 {h[:12]})" for h, p in earlier.items())
        if not allow_new:
            raise ValueError(
                f"{assignment} was graded before with {before}; this run would use {path} (sha256 {digest[:12]}).\n"
                f"If you forgot --solutions, pass the folder used before. If you changed the solutions on purpose, "
                f"see what would change with --dry-run, then add --new-solutions (with --reason, which the students "
                f"read) and regrade the whole class, so that every grade comes from the same version."
            )
        said.append(
            f"{assignment}: grading with new solutions {path} (sha256 {digest[:12]}); earlier grades came from {before}"
        )
    return said


@dataclass
class Change:
    """One student's score that a run changed (or, in a dry run, would change)."""

    student: str
    label: str  # "Zoë Müller (zm42)"
    assignment: str
    old: float  # the exercises' points before (tests and marks)
    new: float
    max_score: float
    kind: str  # "regrade" (the same file graded again) | "new attempt" (another file) | "first file"
    exercises: list[tuple[str, float, float]] = field(default_factory=list)  # (exercise, old, new) that moved

    def line(self) -> str:
        moved = "; ".join(f"{e}: {num(a)} → {num(b)}" for e, a, b in self.exercises)
        kind = "" if self.kind == "regrade" else f" [{self.kind}]"
        moved = f" ({moved})" if moved else ""
        return f"{self.label}, {self.assignment}: {num(self.old)} → {num(self.new)}{kind}{moved}"

    def as_dict(self) -> dict:
        return {
            "student": self.student,
            "assignment": self.assignment,
            "old": self.old,
            "new": self.new,
            "kind": self.kind,
            "exercises": [list(e) for e in self.exercises],
        }


def _points_by_test(tests: list) -> dict[str, tuple[str, float]]:
    found = {}
    for t in tests:
        t = t if isinstance(t, dict) else t.__dict__
        found[t["grade_id"]] = (t.get("exercise") or t["grade_id"], float(t["points"]))
    return found


def score_changes(
    before: dict[tuple[str, str], Row],
    results: list[SubmissionResult],
    digests: dict[tuple[str, str], str | None],
    labels: dict[str, str],
    hashes: dict[tuple[str, str], str | None],
) -> list[Change]:
    """The scores `results` change in the gradebook `before` (rows by (student, assignment)): old and new
    points of the tests (marks of written answers are kept across a regrade), per exercise that moved.
    `digests`: this run's file hash for each result; `hashes`: the file hash each old row graded."""
    changes = []
    for res in results:
        key = (res.student_id, res.assignment)
        old = before.get(key)
        if old is None or res.status == "not submitted" and old.status != "not submitted":
            continue  # a first grade, or a file gone (the earlier attempt is kept): nothing changes
        new_points = _points_by_test(res.tests)
        old_points = _points_by_test([t for t in old.tests if not t.get("manual")])
        new_score = round(float(res.score) + (old.score - old.auto_score), 2)
        if abs(new_score - old.score) < 1e-9:
            continue
        moved = [
            (new_points[g][0], old_points.get(g, ("", 0.0))[1], p)
            for g, (_, p) in new_points.items()
            if abs(old_points.get(g, ("", 0.0))[1] - p) > 1e-9
        ]
        same_file = digests.get(key) is not None and digests.get(key) == hashes.get(key)
        kind = "regrade" if same_file else "first file" if old.status == "not submitted" else "new attempt"
        changes.append(
            Change(
                res.student_id,
                labels.get(res.student_id, res.student_id),
                res.assignment,
                old.score,
                new_score,
                old.max_score,
                kind,
                moved,
            )
        )
    return changes


def summarize_changes(changes: list[Change], dry_run: bool = False, limit: int | None = 12) -> list[str]:
    """The lines a run prints about the scores it changed: "52 scores changed (regraded, same files):
    20 → 17 (50), 18 → 15 (2)", the exercises that moved, then one line per student."""
    if not changes:
        return ["No score " + ("would change." if dry_run else "changed.")]
    verb = "would change" if dry_run else "changed"
    lines = []
    for kind in ("regrade", "new attempt", "first file"):
        group = [c for c in changes if c.kind == kind]
        if not group:
            continue
        pairs = Counter((num(c.old), num(c.new)) for c in group)
        shown = ", ".join(f"{a} → {b} ({n})" for (a, b), n in pairs.most_common(6)) + (" ..." if len(pairs) > 6 else "")
        what = {
            "regrade": "the same files graded again",
            "new attempt": "new files handed in",
            "first file": "a first file after 'not submitted'",
        }[kind]
        lines.append(f"{len(group)} score(s) {verb} ({what}): {shown}")
    by_exercise: dict[str, list[float]] = {}
    for c in changes:
        for exercise, a, b in c.exercises:
            by_exercise.setdefault(f"{c.assignment}, {exercise}", []).append(b - a)
    for exercise, deltas in sorted(by_exercise.items()):
        lost = sum(d < 0 for d in deltas)
        gained = len(deltas) - lost
        lines.append(
            f"  {exercise}: "
            + ", ".join(
                x for x in (f"{lost} lost points" if lost else "", f"{gained} gained points" if gained else "") if x
            )
        )
    rows = [f"  {c.line()}" for c in changes]
    if limit is not None and len(rows) > limit:
        rows = rows[:limit] + [f"  ... and {len(rows) - limit} more (grades.json, runs: changes)"]
    return lines + rows


def _unpacked_notes(book: Gradebook, res: SubmissionResult, digest: str | None) -> None:
    """What `course unpack` decided about this file (renamed, skipped `_final`, late by the LMS), into
    the row's notes, when the file graded is the one it wrote."""
    found = book.unpacked(res.student_id, res.assignment)
    if found and found["sha256"] and found["sha256"] == digest:
        res.notes[:0] = [n for n in found["notes"] if n not in res.notes]


def grade_all(
    submissions: Path,
    solutions: Path,
    out: Path,
    *,
    jobs: int = 2,
    limits: Limits | None = None,
    assignments: list[str] | None = None,
    sandbox: bool = True,
    progress=None,
    roster: Path | None = None,
    students: list[str] | None = None,
    new_solutions: bool = False,
    command: str = "",
    dry_run: bool = False,
    reason: str = "",
    max_bytes: int = MAX_NOTEBOOK_BYTES,
    hide_hidden: bool = False,
    id_column: str | None = None,
) -> list[SubmissionResult]:
    """Grade the class's submissions into the gradebook `out/gradebook.db`, then rewrite its exports.

    Each result is committed as soon as it is known, the version it replaces going into the
    gradebook's history first. When the last run of the same command on this gradebook was
    interrupted, what it finished is kept and only the rest is graded. On Ctrl-C (or SIGTERM) the
    running submissions are stopped, the exports are rewritten from what was finished, and
    KeyboardInterrupt is raised. `sandbox=False` only when the caller has said so (see
    NO_SANDBOX_WARNING). `dry_run`: grade every submission (in the same checking processes), print
    whose scores would change, old -> new, and write nothing (the version guard does not refuse:
    nothing is mixed). `reason` is kept with the run and told to every student whose work it
    regrades. Returns this run's results (those kept from the interrupted run included); the exports
    hold every result in the gradebook.
    """
    limits = limits or Limits()
    progress = progress or _say
    submissions, solutions, out = submissions.resolve(), solutions.resolve(), out.resolve()
    command = command or "grade_all"
    warnings: list[str] = []
    the_roster, known_ids = None, []
    if roster is not None:
        the_roster, roster_warnings = read_roster(roster, id_column)
        warnings += roster_warnings
        progress(f"roster: {the_roster.describe()}")
    if (out / "gradebook.db").exists():
        with closing(open_gradebook(out)) as book:
            if the_roster is None:
                the_roster = book.roster()  # the roster given to an earlier run still holds
            known_ids = sorted({r.student for r in book.rows()})
    todo, found_warnings = discover(submissions, solutions, assignments, the_roster, students, known_ids)
    warnings += found_warnings
    if not todo:
        raise ValueError(f"nothing to grade in {submissions}" + (": " + "; ".join(warnings[:5]) if warnings else ""))
    # A broken solution notebook is the teacher's to fix: say so before grading anyone with it.
    hashes = {}
    for sol in sorted({job.solution for job in todo}):
        problems = validate_solution_notebook(read_notebook(sol), sol.name)
        if problems:
            raise ValueError(f"{sol} cannot be used for grading: " + "; ".join(problems[:5]))
        hashes[sol.stem] = (sol, sha256_file(sol))
    if solutions == COURSE_SOLUTIONS:
        warnings.append(
            f"graded with the course's own solutions ({solutions}), whose hidden tests are public; "
            "for graded work, pass --solutions with your private copy"
        )
    if sandbox:
        ok, why = sandbox_status()
        if not ok:
            raise ValueError(
                f"the grading sandbox is not available: {why}.\n"
                "Learners' code must not run unconfined on your machine: install bubblewrap (Linux), grade "
                "inside a throwaway container (see the README), or, knowing what that exposes, run again "
                "with --no-sandbox."
            )
    else:
        warnings.insert(0, "graded without the sandbox (--no-sandbox): " + NO_SANDBOX_WARNING.splitlines()[0])
    for job in todo:
        job.max_bytes, job.hide_hidden = max_bytes, hide_hidden
    scratch = None
    if dry_run and not (out / "gradebook.db").exists():  # a dry run writes nothing, not even an empty gradebook
        scratch = Path(tempfile.mkdtemp(prefix="course-dry-run-"))
    book = open_gradebook(scratch or out)
    try:
        said = _check_provenance(book, hashes, new_solutions or dry_run)
        for job in todo:  # a notebook `course unpack` could not write: the row says why
            found = book.unpacked(job.student, job.solution.stem) if job.submission is None else None
            if found and found["skipped"]:
                job.status, job.why = "unreadable", found["skipped"]
        if the_roster is not None and roster is not None and not dry_run:
            book.set_roster(the_roster)
        for path, digest in hashes.values():
            progress(f"solutions: {path} (sha256 {digest[:12]})")
        for line in said:
            progress(line)
        for w in warnings:
            progress(f"warning: {w}")
        before = {(r.student, r.assignment): r for r in book.rows()}
        old_files = dict(book.file_hashes())
        labels = {s.id: s.label for s in (the_roster.students if the_roster else [])}
        results: list[SubmissionResult] = []
        digests: dict[tuple[str, str], str | None] = {}
        if dry_run:  # every submission graded, nothing kept or written: what would change, from the gradebook as it is

            def collect(res: SubmissionResult, job: Job) -> None:
                digests[(res.student_id, res.assignment)] = _submitted_at(job, submissions)[2]
                results.append(res)

            with _terminate_as_interrupt():
                _run_jobs(todo, submissions, solutions, out, jobs, limits, sandbox, progress, collect)
            results.sort(key=lambda r: (r.student_id, r.assignment))
            changes = score_changes(before, results, digests, labels, old_files)
            progress("Dry run: nothing was written to the gradebook or its exports.")
            for line in summarize_changes(changes, dry_run=True, limit=None):
                progress(line)
            if said and not new_solutions:
                progress("To grade with these solutions for real, run again with --new-solutions (and --reason).")
            return results
        kept, interrupted = _resumable(book, command, str(solutions), todo, submissions, hashes)
        if kept:
            progress(f"resuming: {len(kept)} submission(s) graded by the interrupted run of this command are kept")
            _before_interrupted(book, before, kept, interrupted)
        run = book.start_run(command, str(solutions), reason)
        results += [_kept_result(book, key) for key in sorted(kept)]

        def commit(res: SubmissionResult, job: Job) -> None:
            """Record one result now (the version it replaces into the history first): an interrupted batch keeps it."""
            submitted_at, source_of_time, digest = _submitted_at(job, submissions)
            digests[(res.student_id, res.assignment)] = digest
            if source_of_time == "unreadable timestamp.txt":
                res.notes.append("Your folder's timestamp.txt could not be read; no submission time was recorded.")
                source_of_time = None
            if digest is None and book.has_file_graded(res.student_id, res.assignment):
                warnings.append(
                    f"{res.student_id}/{res.assignment}: nothing submitted now; the earlier graded attempt is kept"
                )
            _unpacked_notes(book, res, digest)
            path, sol_hash = hashes[res.assignment]
            book.record(
                res,
                file=job.submission.relative_to(submissions).as_posix() if job.submission else None,
                submission_sha256=digest,
                submitted_at=submitted_at,
                submitted_from=source_of_time,
                solutions_path=str(path),
                solutions_sha256=sol_hash,
                run=run,
            )
            results.append(res)

        try:
            with _terminate_as_interrupt():
                _run_jobs(
                    [j for j in todo if (j.student, j.solution.stem) not in kept],
                    submissions,
                    solutions,
                    out,
                    jobs,
                    limits,
                    sandbox,
                    progress,
                    commit,
                )
        except KeyboardInterrupt:
            write_exports(book, out)  # what was finished, so far
            raise
        results.sort(key=lambda r: (r.student_id, r.assignment))
        changes = score_changes(before, results, digests, labels, old_files)
        for line in summarize_changes(changes):
            progress(line)
        for w in book.state_warnings():  # the gradebook as it is now (grades.json says the same)
            progress(f"warning: {w}")
        book.finish_run(run, warnings, [c.as_dict() for c in changes])
        write_exports(book, out)
    finally:
        book.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return results


def _say(line: str) -> None:
    """A line of progress, at once (a teacher may follow it through a pipe or a log file)."""
    print(line, flush=True)


def _resumable(
    book: Gradebook,
    command: str,
    solutions: str,
    todo: list[Job],
    submissions: Path,
    hashes: dict[str, tuple[Path, str]],
) -> tuple[set[tuple[str, str]], list[int]]:
    """(student, assignment) of the jobs that an interrupted run of the same command already graded, from
    the same file with the same solutions (and not ended by a grader error): they are not graded again;
    and the ids of those interrupted runs."""
    runs = book.runs()
    unfinished = []
    for r in reversed(runs):  # the unfinished runs of this command since its last finished one
        if r["command"] != command:
            continue
        if r["finished_at"] is not None:
            break
        if r["solutions"] == solutions:
            unfinished.append(r["id"])
    if not unfinished:
        return set(), []
    done = book.results_of_runs(unfinished)
    kept = set()
    for job in todo:
        key = (job.student, job.solution.stem)
        if key not in done:
            continue
        status, file_sha, sol_sha = done[key]
        digest = _submitted_at(job, submissions)[2]
        if status not in ("grader error", "stopped") and file_sha == digest and sol_sha == hashes[key[1]][1]:
            kept.add(key)
    return kept, unfinished


def _before_interrupted(
    book: Gradebook, before: dict[tuple[str, str], Row], kept: set[tuple[str, str]], runs: list[int]
) -> None:
    """For each result kept from the interrupted `runs` that replaced a graded version, that version (from
    the history) becomes the score before, in place: this run's summary says what both runs changed."""
    for key in kept:
        old = before.get(key)
        replaced = [h for h in book.history(*key) if h["replaced_by_run"] in runs]
        if old is None or not replaced:
            continue
        h = replaced[0]
        marks = old.score - old.auto_score  # the marks of written answers stay as they are across a regrade
        before[key] = replace(
            old,
            status=h["status"],
            auto_score=h["score"],
            score=round(h["score"] + marks, 2),
            tests=[*h["tests"], *(t for t in old.tests if t.get("manual"))],
        )


def _kept_result(book: Gradebook, key: tuple[str, str]) -> SubmissionResult:
    """What an interrupted run recorded for `key`, as the result it was (manually graded answers included)."""
    row = book.latest(*key)
    test_keys = [f.name for f in fields(TestResult)]
    manual_keys = [f.name for f in fields(ManualAnswer)]
    tests = [TestResult(**{k: t.get(k, "") for k in test_keys}) for t in row["tests"]]
    manual = [ManualAnswer(**{k: t[k] for k in manual_keys if k in t}) for t in row["manual"]]
    return SubmissionResult(
        key[0],
        key[1],
        row["score"],
        row["max_score"],
        row["status"],
        tests,
        list(row["notes"]),
        row["seconds"],
        manual=manual,
    )


@contextmanager
def _terminate_as_interrupt():
    """SIGTERM (a `kill`, a scheduler's time limit) ends the batch as Ctrl-C does: what is finished is kept."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _setup_imports(solution: Path) -> list[str]:
    """The modules the teacher's setup cells import (the checking processes' server imports them once)."""
    names = []
    try:
        nb = read_notebook(solution)
    except NotebookError:
        return names
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code" or is_solution(cell) or is_test(cell):
            continue
        try:
            tree = ast.parse(source(cell))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _run_jobs(
    todo: list[Job],
    submissions: Path,
    solutions: Path,
    out: Path,
    jobs: int,
    limits: Limits,
    sandbox: bool,
    progress,
    commit,
) -> None:
    """Grade `todo`, each job in a process of its own (see `worker`), `jobs` at a time; `commit(result, job)`
    each result as soon as its process (and every sandbox it started) has gone."""
    for path in budgets.remove_stale():
        progress(f"removed what an interrupted batch left: {path}")
    work_root, lock = budgets.locked_folder(budgets.BATCH_PREFIX)
    controllers = budgets.detect()
    group = budgets.batch_group(controllers, jobs)
    if sandbox:
        progress(budgets.summary(controllers if group is not None else {}, seccomp_usable()))
    protect = [solutions, submissions, out, work_root]

    def done(job: Job, res: SubmissionResult) -> None:
        commit(res, job)  # first: a result that was printed is in the gradebook
        progress(
            f"{res.student_id:<20} {res.assignment:<24} {num(res.score):>6} / {num(res.max_score):<6} {res.status}"
        )

    try:
        for job in todo:  # nothing to run: no process needed
            if job.submission is None:
                done(job, _grade_job(job, limits, sandbox, protect, work_root, submissions))
        # Killed only once its own limits have all had their turn: the total time, a last kernel start, an interrupt.
        deadline = limits.total_timeout + limits.startup_timeout + INTERRUPT_GRACE_S + STOP_MARGIN_S
        tasks = [
            Task(i, (job, limits, sandbox, protect, work_root, submissions), deadline)
            for i, job in enumerate(todo)
            if job.submission is not None
        ]
        preload = [m for sol in sorted({j.solution for j in todo}) for m in _setup_imports(sol)]
        run_batch(
            tasks,
            _grade_job,
            slots=jobs,
            group=group,
            memory_mb=limits.memory_mb,
            preload=preload,
            on_result=lambda task, res: done(task.args[0], res),
            on_failure=lambda task, ending: done(task.args[0], _ended_result(task.args[0], ending)),
        )
    finally:
        if group is not None:
            group.remove()
        shutil.rmtree(work_root, ignore_errors=True)
        lock.release()
