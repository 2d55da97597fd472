"""`course grade`: a class's notebooks, graded into the gradebook, step by step.

    discover (`discover`)  ->  run and score each (`grade`, in `worker`'s checking processes)
        ->  record (`record`, as each finishes)  ->  tell what changed (`changes`)  ->  export (`export`)

`grade_all(submissions, solutions, out, GradeOptions(...))` reads each solution notebook once
(`Assignment`), finds every student's notebook for each assignment (`discover`), checks each submission
in a short-lived process of its own, killed from outside at its wall-clock backstop whatever it is doing
(`worker`), commits each result as soon as its process and sandbox have gone (`record`: an interrupted
batch keeps what it finished, and the same command resumes it), then says what changed, as the LMS gets
it (`changes`), and rewrites the exports from the whole gradebook (`export`). Every submission gets a
row, whatever it contains; one broken submission never stops the batch, and a failure of the grader is
never a score (`worker` tries it again; what fails twice is a row that says so).

A run is visible: a dry run (`GradeOptions(dry_run=True)`, `course grade --dry-run`) grades into a copy of
the gradebook, in the same checking processes, shows whose grades would change and writes nothing; a
real run prints and records the same summary (`runs.changes`), with the teacher's `--reason`, and the
gradebook keeps every replaced version.
"""

from __future__ import annotations

import ast
import shutil
import signal
import sqlite3
import tempfile
import threading
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import course_lib
from course_lib.runner.assignment import Assignment
from course_lib.runner.feedback import Status, TestResult, num
from course_lib.runner.notebook import read_notebook, validate_solution_notebook
from course_lib.runner.process import INTERRUPT_GRACE_S, Limits
from course_lib.runner.steps import MAX_RESTARTS
from course_lib.runner.text import inert

from . import budgets
from .changes import batch_trouble, grade_changes, summarize_changes
from .discover import MAX_NOTEBOOK_BYTES, Job, discover, in_shard, sha256_file, submission_time
from .export import write_exports
from .grade import ManualAnswer, SubmissionResult, blank_result, ended_result, grade_job
from .gradebook import Gradebook, Row, open_gradebook
from .record import check_provenance, record
from .roster import Roster, read_roster
from .sandbox import sandbox_status, seccomp_usable
from .worker import Task, run_batch
from .zygote import Zygote, close_pool, start_pool

STOP_MARGIN_S = (
    30.0  # after a submission's own limits (its backstop, its kernel's starts, an interrupt), before it is killed
)
COURSE_SOLUTIONS = Path(course_lib.__file__).resolve().parents[1] / "solutions"  # public: their hidden tests are too

# What `course grade --no-sandbox` prints (and grades.json records) before it grades anything.
NO_SANDBOX_WARNING = """\
WARNING: grading WITHOUT the sandbox. The learners' code runs as you, with your files and your network:
  - it can read anything you can read (the solutions and their hidden tests, other students' notebooks),
    and write or delete anything you can (submissions, grades.csv, feedback, your home folder);
  - processes it starts can outlive the grading and change the results after it ends;
  - it can signal or trace the grader's own processes and connect to the network.
The checks still run in the grader's process, out of the learners' reach, and the time, output, memory,
file-size and CPU limits still apply. Grade untrusted submissions only in the sandbox (install bubblewrap)
or in a throwaway container; there, as root, COURSE_GRADE_KERNEL_USER=nobody runs the learners' kernels as
that unprivileged user, away from the grader's files (what the Gradescope autograder does)."""


@dataclass
class GradeOptions:
    """How a batch is graded (`course grade`'s options)."""

    jobs: int = 2  # submissions checked at once
    limits: Limits = field(default_factory=Limits)  # memory, output, and the time budgets unless set_limits
    set_limits: bool = True  # each exercise set's own time budgets (`metadata.course.limits`) replace limits'
    assignments: list[str] | None = None  # only these; every student gets a row for each ("not submitted")
    sandbox: bool = True  # False only when the teacher has said so (see NO_SANDBOX_WARNING)
    roster: Path | None = None  # the class (kept in the gradebook for later runs)
    id_column: str | None = None  # the roster's column of ids
    students: list[str] | None = None  # only these students (a regrade of one)
    shard: tuple[int, int] | None = None  # (k, n): part k of n of the class (`in_shard`)
    new_solutions: bool = False  # accept solutions that differ from those that graded an assignment before
    dry_run: bool = False  # grade into a copy of the gradebook, say what would change, write nothing
    reason: str = ""  # kept with the run and told to every student it regrades
    command: str = "grade_all"  # the command line: an interrupted run of the same command is resumed
    max_bytes: int = MAX_NOTEBOOK_BYTES  # the most a notebook may weigh without its outputs
    hide_hidden: bool = False  # --hide-hidden-inputs


@dataclass
class Plan:
    """What a batch grades, before anything is graded: the jobs, and what to tell the teacher first."""

    todo: list[Job]
    warnings: list[str]
    roster: Roster | None
    hashes: dict[str, tuple[Path, str]]  # assignment -> (solution notebook, its sha256)


def grade_all(
    submissions: Path, solutions: Path, out: Path, options: GradeOptions | None = None, *, progress=None
) -> list[SubmissionResult]:
    """Grade the class's submissions into the gradebook `out/gradebook.db`, then rewrite its exports. Returns
    this run's results (those kept from an interrupted run included); the exports hold every result in the
    gradebook. On Ctrl-C (or SIGTERM) the running submissions are stopped, the exports are rewritten from
    what was finished, and KeyboardInterrupt is raised."""
    options = options or GradeOptions()
    given = progress or _say

    def say(line: str) -> None:  # whatever a line quotes (a folder's name, a file's), it steers no terminal
        given(inert(line, None))

    submissions, solutions, out = submissions.resolve(), solutions.resolve(), out.resolve()
    plan = plan_batch(submissions, solutions, out, options, say)
    if plan is None:
        return []
    scratch = Path(tempfile.mkdtemp(prefix="course-dry-run-")) if options.dry_run else None
    if scratch is not None and (out / "gradebook.db").exists():  # a dry run grades into a copy
        with closing(open_gradebook(out)) as real, closing(sqlite3.connect(scratch / "gradebook.db")) as copy:
            real.db.backup(copy)
    book = open_gradebook(scratch or out)
    try:
        return _grade_into(book, plan, submissions, solutions, out, options, say)
    finally:
        book.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def plan_batch(submissions: Path, solutions: Path, out: Path, options: GradeOptions, say) -> Plan | None:
    """The jobs of a batch, every solution notebook read and checked once; None for an empty shard."""
    warnings, the_roster, known_ids = [], None, []
    if options.roster is not None:
        the_roster, roster_warnings = read_roster(options.roster, options.id_column)
        warnings += roster_warnings
        say(f"roster: {the_roster.describe()}")
    if (out / "gradebook.db").exists():
        with closing(open_gradebook(out)) as book:
            the_roster = the_roster or book.roster()  # the roster given to an earlier run still holds
            known_ids = sorted({r.student for r in book.rows()})
    found = discover(submissions, solutions, options.assignments, the_roster, options.students, known_ids)
    todo, warnings = found[0], warnings + found[1]
    if options.shard is not None:
        everyone, todo = todo, [job for job in todo if in_shard(job.student, *options.shard)]
        if everyone and not todo:  # a small class, many parts: this one is empty, which is no error
            k, n = options.shard
            say(f"shard {k}/{n}: none of the {len({j.student for j in everyone})} students")
            if not options.dry_run:  # an empty gradebook for `course merge`
                open_gradebook(out).close()
            return None
    if not todo:
        raise ValueError(f"nothing to grade in {submissions}" + (": " + "; ".join(warnings[:5]) if warnings else ""))
    hashes, read = {}, {}
    for sol in sorted({job.solution for job in todo}):  # each read once; a broken one is the teacher's to fix
        nb = read_notebook(sol)
        problems = validate_solution_notebook(nb, sol.name)
        if problems:
            raise ValueError(f"{sol} cannot be used for grading: " + "; ".join(problems[:5]))
        read[sol], hashes[sol.stem] = Assignment.from_notebook(nb, sol.stem, sol), (sol, sha256_file(sol))
    if solutions == COURSE_SOLUTIONS:
        warnings.append(
            f"graded with the course's own solutions ({solutions}), whose hidden tests are public; "
            "for graded work, pass --solutions with your private copy"
        )
    warnings = _check_sandbox(options.sandbox) + warnings
    for job in todo:  # each set's own time budgets (its solution uses at most a quarter), unless the teacher's
        job.assignment = read[job.solution]
        job.limits = options.limits.from_notebook({"metadata": {"course": {"limits": job.assignment.limits}}})
        job.limits = job.limits if options.set_limits else options.limits
        job.max_bytes, job.hide_hidden = options.max_bytes, options.hide_hidden
    return Plan(todo, warnings, the_roster, hashes)


def _check_sandbox(sandbox: bool) -> list[str]:
    """Refuse to grade where the sandbox does not work (unless the teacher said so): the warnings to give."""
    if not sandbox:
        return ["graded without the sandbox (--no-sandbox): " + NO_SANDBOX_WARNING.splitlines()[0]]
    ok, why = sandbox_status()
    if not ok:
        raise ValueError(
            f"the grading sandbox is not available: {why}.\n"
            "Learners' code must not run unconfined on your machine: install bubblewrap (Linux), grade "
            "inside a throwaway container (see the README), or, knowing what that exposes, run again "
            "with --no-sandbox."
        )
    return []


def _grade_into(
    book: Gradebook, plan: Plan, submissions: Path, solutions: Path, out: Path, options: GradeOptions, say
) -> list[SubmissionResult]:
    """Grade the plan into `book`: tell what it does, grade and record each job, then what changed."""
    said = check_provenance(book, plan.hashes, options.new_solutions or options.dry_run)
    for job in plan.todo:  # a notebook `course unpack` could not write: the row says why
        found = book.unpacked(job.student, job.solution.stem) if job.submission is None else None
        if found and found["skipped"]:
            job.status, job.why = Status.UNREADABLE, found["skipped"]
    if plan.roster is not None and options.roster is not None and not options.dry_run:
        book.set_roster(plan.roster)
    for path, digest in plan.hashes.values():
        say(f"solutions: {path} (sha256 {digest[:12]})")
    for line in said + [f"warning: {w}" for w in plan.warnings]:
        say(line)
    before = {(r.student, r.assignment): r for r in book.rows()}
    old_files = dict(book.file_hashes())
    kept, interrupted = set(), []  # what an interrupted run of this command finished (a dry run grades all)
    if not options.dry_run:
        kept, interrupted = _resumable(book, options.command, str(solutions), plan.todo, submissions, plan.hashes)
    if kept:
        say(f"resuming: {len(kept)} submission(s) graded by the interrupted run of this command are kept")
        _before_interrupted(book, before, kept, interrupted)
    run = book.start_run(options.command, str(solutions), options.reason)
    results = [_kept_result(book, key) for key in sorted(kept)]
    digests: dict[tuple[str, str], str | None] = {}
    unrecorded: list[str] = []  # results that could not be committed, not even as a "grader error" row

    def commit(res: SubmissionResult, job: Job) -> None:
        digests[(res.student_id, res.assignment)] = record(book, res, job, submissions, plan.hashes, run, plan.warnings)
        results.append(res)

    try:
        with _terminate_as_interrupt():
            todo = [j for j in plan.todo if (j.student, j.solution.stem) not in kept]
            _run_jobs(todo, submissions, solutions, out, options, say, commit, unrecorded)
    except KeyboardInterrupt:
        if not options.dry_run:
            write_exports(book, out)  # what was finished, so far
        raise
    results.sort(key=lambda r: (r.student_id, r.assignment))
    _tell(book, before, results, digests, old_files, plan, options, said, unrecorded, run, say)
    if not options.dry_run:
        write_exports(book, out)
    return results


def _tell(book, before, results, digests, old_files, plan, options, said, unrecorded, run, say) -> None:
    """After the batch: what changed, as the LMS gets it, and what needs the teacher; a real run records it."""
    labels = {s.id: s.label for s in (plan.roster.students if plan.roster else [])}
    after = {(r.student, r.assignment): r for r in book.rows()}
    keys = [(r.student_id, r.assignment) for r in results]
    changes = grade_changes(before, after, keys, digests, labels, old_files)
    if options.dry_run:
        say("Dry run: nothing was written to the gradebook or its exports.")
    for line in summarize_changes(changes, dry_run=options.dry_run, limit=None if options.dry_run else 12):
        say(line)
    trouble = batch_trouble(results, unrecorded)
    for line in trouble:
        say(line)
    if options.dry_run:
        if said and not options.new_solutions:
            say("To grade with these solutions for real, run again with --new-solutions (and --reason).")
        return
    for w in book.state_warnings():  # the gradebook as it is now (grades.json says the same)
        say(f"warning: {w}")
    book.finish_run(run, plan.warnings + trouble, [c.as_dict() for c in changes])


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
        digest = submission_time(job, submissions)[2]
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
        score = round(h["score"] + marks, 2)
        before[key] = replace(
            old,
            status=h["status"],
            auto_score=h["score"],
            score=score,
            final=round(max(0.0, score - old.late_penalty + old.manual), 2),
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


def _setup_imports(assignment: Assignment) -> list[str]:
    """The modules the teacher's setup cells import (the checking processes' server imports them once)."""
    names = []
    for cell in assignment.cells:
        if cell.kind not in ("setup", "code"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _outer_limit(limits: Limits) -> float:
    """Wall-clock seconds after which a submission's checking process is killed from outside: only once
    every limit inside has had its turn (the submission's backstop, each start of its kernel, an interrupt)."""
    starts = (MAX_RESTARTS + 1) * limits.wall(limits.startup_cpu_s)
    return limits.wall(limits.total_cpu_s) + starts + limits.wall(INTERRUPT_GRACE_S) + STOP_MARGIN_S


def _run_jobs(
    todo: list[Job],
    submissions: Path,
    solutions: Path,
    out: Path,
    options: GradeOptions,
    say,
    commit,
    unrecorded: list[str],
) -> None:
    """Grade `todo`, each job in a process of its own (see `worker`), `options.jobs` at a time; `commit(result,
    job)` each result as soon as its process (and every sandbox it started) has gone. A result that cannot
    be committed even as a "grader error" row is named in `unrecorded`."""
    for path in budgets.remove_stale():
        say(f"removed what an interrupted batch left: {path}")
    work_root, lock = budgets.locked_folder(budgets.BATCH_PREFIX)
    controllers = budgets.detect()
    group = budgets.batch_group(controllers, options.jobs)
    if options.sandbox:
        say(budgets.summary(controllers if group is not None else {}, seccomp_usable()))
    protect = [solutions, submissions, out, work_root]

    def done(job: Job, res: SubmissionResult) -> None:
        """Commit, then print: a result that was printed is in the gradebook. Raises if it cannot be committed
        (the batch tries the submission again at its end, see `worker.run_batch`)."""
        commit(res, job)
        say(f"{res.student_id:<20} {res.assignment:<24} {num(res.score):>6} / {num(res.max_score):<6} {res.status}")

    def done_anyway(job: Job, res: SubmissionResult) -> None:
        """A row that must be written whatever happens: see `_record_anyway`."""
        _record_anyway(done, job, res, unrecorded)

    def args(job: Job) -> tuple:
        return (job, job.limits or options.limits, options.sandbox, protect, work_root, submissions)

    pool: list[Zygote] = []
    try:
        for job in todo:  # nothing to run: no process needed
            if job.submission is None:
                done_anyway(job, grade_job(*args(job)))
        ran = [job for job in todo if job.submission is not None]
        tasks = [Task(i, args(job), _outer_limit(job.limits or options.limits)) for i, job in enumerate(ran)]
        preload = [m for a in {id(j.assignment): j.assignment for j in ran}.values() for m in _setup_imports(a)]
        if options.sandbox and ran:
            pool = _zygotes(min(options.jobs, len(ran)), protect, work_root, group, preload, say)
        run_batch(
            tasks,
            grade_job,
            slots=options.jobs,
            group=group,
            memory_mb=options.limits.memory_mb,
            preload=preload,
            per_slot=[{"zygote": z.link} for z in pool],
            on_result=lambda task, res: done(task.args[0], res),
            on_failure=lambda task, ending: done_anyway(task.args[0], ended_result(task.args[0], ending)),
        )
    finally:
        close_pool(pool)
        if group is not None:
            group.remove()
        shutil.rmtree(work_root, ignore_errors=True)
        lock.release()


def _zygotes(slots: int, protect: list[Path], work_root: Path, group, preload: list[str], say) -> list[Zygote]:
    """A zygote per slot, from which each submission's kernel is forked (see `zygote`); none, said once, where
    this host does not allow it: each kernel is then started by bubblewrap, at the cost of its imports."""
    pool, why = start_pool(slots, protect=protect, temp_root=work_root, group=group, preload=preload)
    if not pool:
        say(f"each kernel is started on its own (the pre-started kernel is not available here: {inert(why, 300)})")
    return pool


def _record_anyway(done, job: Job, res: SubmissionResult, unrecorded: list[str]) -> None:
    """`done(job, res)`, whatever happens: if it cannot be recorded, a row that says why; if not even that,
    the batch goes on and names the student in its summary (`unrecorded`)."""
    try:
        done(job, res)
        return
    except Exception as err:  # noqa: BLE001 - a failure of the grader must not stop the class
        why = f"{type(err).__name__}: {inert(err, 300)}"
    message = (
        f"The grader could not record this submission's result ({why}). This is not a grade: the work "
        f"was not checked. To grade it again: course grade ... --student {job.student}"
    )
    try:
        done(
            job,
            blank_result(job.student, job.assignment or Assignment.read(job.solution), Status.GRADER_ERROR, message),
        )
    except Exception as err:  # noqa: BLE001
        unrecorded.append(f"{job.student} ({job.solution.stem}): {why}; then {type(err).__name__}: {inert(err, 300)}")
