"""A student's grade depends on their work alone: not on how busy the grading machine is, not on another
week's submissions, not on what a classmate hands in, and never on a failure of the grader.

- Load: a cell's limit is CPU time the submission's own processes use, with a wall-clock backstop that only
  a kernel that waits or sleeps meets; the same class graded idle and with every core busy gets the same
  scores, test by test.
- The grader's own failures: a checking process killed mid-check, or the server they are forked from, costs
  no correct student a point (the submission is checked again at the end of the batch); what still fails
  is a row that says so, named in the summary, never a silent zero.
- Learner text: a lone surrogate, control characters, bidirectional overrides or a megabyte of text in an
  exception message, a function that raises inside a check, the repr of a wrong answer, a written answer
  or a folder's name can neither stop the batch nor steer a terminal, a Markdown viewer or an export.
- Hidden inputs: with `--hide-hidden-inputs`, no value a hidden test passes to the learner's code reaches
  that learner's feedback through a later cell.

The classes are lesson 00's exercise set (quick to grade) and lesson 02's (whose sampler check calls the
learner's function thousands of times: once by one, now in one round trip).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest
from grading_helpers import SOLUTIONS, WELCOME, learner, require_sandbox, write

from course_grader.batch import GradeOptions, grade_all
from course_grader.build import build_exercise
from course_grader.export import write_exports, write_lms
from course_grader.gradebook import open_gradebook
from course_grader.report import write_report
from course_grader.sandbox import SandboxedKernel
from course_lib.runner.notebook import grade_id, is_solution, read_notebook, source
from course_lib.runner.process import Budget, Limits

MARKOV = SOLUTIONS / "02_markov_models.ipynb"
BIDI, ESC = "\u202e", "\x1b"


@contextmanager
def busy(n: int = 0):
    """n busy loops (default: two per core), one process each: every core saturated while the block runs."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n or 2 * (os.cpu_count() or 2))
    ]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def answers_of(path: Path) -> dict[str, str]:
    return {grade_id(c): source(c) for c in read_notebook(path)["cells"] if is_solution(c)}


def filled(path: Path, answers: dict[str, str]) -> dict:
    """The exercise notebook built from the solution at `path`, with the solution's answers except `answers`."""
    nb = build_exercise(read_notebook(path), path.name)
    mine = {**answers_of(path), **answers}
    for cell in nb["cells"]:
        if is_solution(cell):
            cell["source"] = mine[grade_id(cell)]
    return nb


def scores(results) -> dict:
    return {
        (r.student_id, r.assignment): (r.status, [(t.grade_id, t.points, t.status) for t in r.tests]) for r in results
    }


def quiet(line: str) -> None:
    pass


# --- load: CPU time, not the machine's ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_cell_limit_counts_cpu_time_and_a_backstop_catches_only_a_stalled_kernel():
    """A sleeping cell uses no CPU and passes a 2-second CPU limit; a busy loop is stopped at 2 CPU-seconds
    whether the machine is idle or every core is busy; a kernel that only sleeps meets the wall-clock backstop."""
    require_sandbox()
    limits = Limits(cell_cpu_s=2, total_cpu_s=60, memory_mb=512)
    kernel = SandboxedKernel(limits, sandbox=True)
    kernel.start()
    try:
        run, _ = kernel.run_cell("import time", "answer", budget=kernel.cell_budget())  # IPython's first-cell imports
        asleep = Budget(kernel.cpu_used, 2, time.monotonic() + 600)
        run, _ = kernel.run_cell("time.sleep(3)\nx = 1", "answer", budget=asleep)
        assert run.ok, f"3 s asleep use no CPU time: {run}"
        for hogs in (0, 2 * (os.cpu_count() or 2)):
            with busy(hogs) if hogs else nullcontext():
                before = kernel.cpu_used()
                run, _ = kernel.run_cell("while True:\n    pass\n", "answer", budget=kernel.cell_budget())
                used = kernel.cpu_used() - before
            assert run.status == "timeout" and "time limit: more than 2 s of CPU time" in run.evalue, (hogs, run)
            assert 2 <= used < 2 + 5 + 1, f"the loop was stopped after {used:.1f} CPU-seconds ({hogs} hogs)"
        assert kernel.alive(), "an interrupted loop leaves the kernel usable"
        backstop = Budget(kernel.cpu_used, 2, time.monotonic() + 3)  # 3 s of wall-clock time, whatever the load
        run, _ = kernel.run_cell("time.sleep(600)", "answer", budget=backstop)
        assert run.status == "timeout" and "waiting or sleeping" in run.evalue, run
    finally:
        kernel.shutdown()


@pytest.mark.slow
def test_the_same_class_gets_the_same_scores_with_every_core_busy(tmp_path):
    """blocker: on a busy machine, correct set-02 notebooks lost exercise 6 to a wall-clock limit (its
    check called the learner's sampler 8,000 times through the sandbox). With the default limits the
    same class gets the same scores, test by test, graded idle and with every core busy."""
    require_sandbox()
    argmax = "def sample_next(dist, rng):\n    return max(dist, key=dist.get)\n"
    subs = tmp_path / "subs"
    write(subs / "right" / MARKOV.name, filled(MARKOV, {}))
    write(subs / "argmax" / MARKOV.name, filled(MARKOV, {"ex6_answer": argmax}))
    idle = grade_all(subs, SOLUTIONS, tmp_path / "idle", GradeOptions(jobs=2), progress=quiet)
    with busy():
        loaded = grade_all(subs, SOLUTIONS, tmp_path / "busy", GradeOptions(jobs=2), progress=quiet)
    assert scores(idle) == scores(loaded), "a busy machine changed a grade"
    right = {r.student_id: r for r in idle}["right"]
    assert right.score == right.max_score, [(t.grade_id, t.status, t.message) for t in right.tests]
    wrong = {t.grade_id: t for t in {r.student_id: r for r in idle}["argmax"].tests}
    assert wrong["ex6_test"].status == "failed" and "argmax" in wrong["ex6_test"].message, wrong["ex6_test"]


# --- the grader's own failures ------------------------------------------------------------------------------


@pytest.mark.slow
def test_killing_the_server_or_a_checking_process_mid_batch_costs_no_correct_student_a_point(tmp_path):
    """medium: the forkserver every checking process comes from was a single point of failure: killed
    mid-run, every submission in flight was 'grader error' 0/16 with a message saying no other submission
    was affected. Killed now (once the first result is in, with another submission being checked), the
    submissions it took with it are checked again at the end of the batch."""
    require_sandbox()
    subs = tmp_path / "subs"
    for i in range(4):
        write(subs / f"s{i}" / WELCOME.name, learner())
    killed = []

    def progress(line: str) -> None:
        if line.rstrip().endswith("graded") and not killed:
            from multiprocessing import forkserver

            pid = forkserver._forkserver._forkserver_pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    results = grade_all(subs, SOLUTIONS, tmp_path / "out", GradeOptions(jobs=2), progress=progress)
    assert killed, "the server was killed during the batch"
    assert [(r.student_id, r.status, r.score) for r in results] == [(f"s{i}", "graded", 16.0) for i in range(4)]


def test_a_failure_that_persists_is_a_row_that_says_so_never_a_silent_zero(tmp_path):
    """A submission whose checking process failed on both tries (see `worker.run_batch`) gets a 'grader
    error' row that names the cause, says it is not a grade and how to grade it again; the batch's summary
    names it; the LMS export leaves its cell empty and says why (and names a score a limit cut short)."""
    from course_grader.changes import batch_trouble
    from course_grader.discover import Job
    from course_grader.grade import SubmissionResult, ended_result
    from course_grader.worker import Ending
    from course_lib.runner.feedback import TestResult

    job = Job("ada", WELCOME, WELCOME)
    ending = Ending("grader error", "the grader's own server process (pid 7) ... ended", 3.0, server_died=True)
    res = ended_result(job, ending)
    assert res.status == "grader error" and res.score == 0, res
    assert "server process" in res.notes[0] and "This is not a grade" in res.notes[0], res.notes
    assert "--student ada" in res.notes[0] and "No other submission was affected" not in res.notes[0], res.notes
    timed = TestResult("ex1_test", "Exercise 1", 0.0, 2.0, "error", "the cell used more CPU time", "timeout")
    bob = SubmissionResult("bob", "00_welcome", 14.0, 16.0, "graded", [timed])
    lines = batch_trouble([res, bob], [])
    assert "1 submission(s) could not be checked, which is not a grade: ada (00_welcome, grader error)" in lines[0]
    assert "--student ada" in lines[0] and "bob (00_welcome: Exercise 1 timeout)" in lines[1], lines
    with open_gradebook(tmp_path / "out") as book:
        for r in (res, bob):
            book.record(
                r,
                file=None,
                submission_sha256="x" + r.student_id,
                submitted_at=None,
                submitted_from=None,
                solutions_path="s",
                solutions_sha256="s",
                run=None,
            )
        export = write_lms(book, tmp_path / "out" / "canvas.csv", "canvas")
    assert [row[-1] for row in export.table[2:]] == ["", "14"], "a grader error is not a grade: its cell stays empty"
    assert any("left empty for submissions the grader could not check" in n and "ada" in n for n in export.notes)
    assert any("stopped by a limit" in n and "bob (00_welcome: Exercise 1)" in n for n in export.notes), export.notes


# --- learner text ----------------------------------------------------------------------------------------------

S = "\\ud800"  # written into a cell's source: the kernel makes the lone surrogate itself
EVIL = {
    # an exception message (after the answer is defined)
    "ex1_answer": (
        "def reproducible_sample(seed):\n    seed_everything(seed)\n    return torch.randn(5)\n"
        f"raise ValueError('bad {S} \\x1b]0;pwned\\x07\\x1b[2K {BIDI} <img src=x onerror=alert(1)> "
        "**all clear** [regrade](https://evil.example/r)' + 'x' * 2_000_000)\n"
    ),
    # a function that raises inside a check: its message becomes the report's hint
    "ex3_answer": (
        "def receptive_field(num_layers, kernel_size):\n"
        f"    raise ValueError('inside {S} \\x1b[1A\\x00 <img src=x onerror=alert(1)> **all clear** "
        "[regrade](https://evil.example/r)')\n"
    ),
    # the repr of a wrong answer, and printed text
    "ex5_answer": (
        f"class _Shape:\n    def __repr__(self):\n        return 'shape {S}\\x1b[2J{BIDI}'\n"
        f"n_patches = _Shape()\nseq_len = 197\nprint('{S}')\n"
    ),
    # a name of the learner's own (suggested for a typo) with a surrogate in it
    "ex6_answer": (
        f"globals()['patch_coun{S}'] = 1\n"
        "def patch_count(height, width, patch):\n    return (height // patch) * (width // patch)\n"
    ),
}
LEAKER = {  # records what the checks pass to its function, and tells it in a later cell's error
    "ex3_answer": (
        "SEEN = []\n"
        "def receptive_field(num_layers, kernel_size):\n"
        "    SEEN.append((num_layers, kernel_size))\n"
        "    return 1 + num_layers * (kernel_size - 1)\n"
    ),
    "ex4_answer": (
        "def layers_needed(distance, kernel_size):\n    return -(-distance // (kernel_size - 1))\n"
        "raise ValueError(f'LEAK {SEEN}')\n"
    ),
}


def _teacher_with_a_written_answer(path: Path) -> Path:
    """Lesson 00's solutions with a written answer at the end (a person marks it), as the teacher's copy."""
    nb = read_notebook(WELCOME)
    nb["cells"].append(
        {
            "cell_type": "markdown",
            "id": "written",
            "metadata": {
                "nbgrader": {
                    "grade": True,
                    "solution": True,
                    "locked": False,
                    "grade_id": "ex8_written",
                    "points": 1,
                    "schema_version": 3,
                }
            },
            "source": "### BEGIN SOLUTION\nAttention connects any two words in one step.\n### END SOLUTION",
        }
    )
    return write(path / WELCOME.name, nb)


@pytest.fixture(scope="module")
def odd_class(tmp_path_factory):
    """Correct neighbours, a submission whose every text holds a lone surrogate (and control characters, a
    bidirectional override, two megabytes), a folder whose name is not UTF-8 and holds an escape sequence,
    and one that collects the hidden tests' inputs; graded, then the two odd ones graded again over their own rows
    with --hide-hidden-inputs."""
    require_sandbox()
    tmp = tmp_path_factory.mktemp("odd")
    teacher = _teacher_with_a_written_answer(tmp / "solutions")
    subs, out = tmp / "subs", tmp / "out"

    def notebook(answers: dict[str, str], written: str = "Attention links any two words directly.") -> dict:
        nb = filled(teacher, answers)
        for cell in nb["cells"]:
            if grade_id(cell) == "ex8_written":
                cell["source"] = written
        return nb

    write(subs / "a_ok" / WELCOME.name, notebook({}))
    write(subs / "evil" / WELCOME.name, notebook(EVIL, written=f"# {S} \x1b]0;x\x07 {BIDI} ```` <b>marked 1/1</b>"))
    write(subs / "leaker" / WELCOME.name, notebook(LEAKER))
    write(subs / "z_ok" / WELCOME.name, notebook({}))
    odd = os.fsencode(str(subs)) + b"/odd\xff\x1b[2Jname"
    os.makedirs(odd)
    with open(odd + b"/" + WELCOME.name.encode(), "w") as f:
        json.dump(notebook({}), f)
    lines: list[str] = []
    runs = [grade_all(subs, teacher.parent, out, GradeOptions(jobs=2), progress=lines.append)]
    # Again, the rows of the two that matter committed over their own: the one whose every text is odd, and
    # the one that collects hidden inputs, now with --hide-hidden-inputs (which starts a fresh kernel after
    # every test with hidden parts: the neighbours need not pay for it twice).
    again = GradeOptions(jobs=2, hide_hidden=True, students=["evil", "leaker"])
    runs.append(grade_all(subs, teacher.parent, out, again, progress=lines.append))
    with open_gradebook(out) as book:
        lms = [write_lms(book, out / f"{layout}.csv", layout) for layout in ("canvas", "moodle", "wide")]
        report, _ = write_report(book, out)
        write_exports(book, out)
    return {"runs": runs, "out": out, "lines": lines, "lms": lms, "report": report}


@pytest.mark.slow
def test_learner_text_never_stops_the_batch_and_every_export_is_written_twice(odd_class):
    """critical: a lone surrogate in any learner text that reached a row crashed the batch while committing
    it: no grades.csv, no feedback, for anyone, and every re-run crashed at the same row."""
    first, again = ({r.student_id: (r.status, r.score) for r in run} for run in odd_class["runs"])
    assert first["a_ok"] == first["z_ok"] == ("graded", 16.0), first
    assert first["odd\\xff\\x1b[2Jname"] == ("graded", 16.0), first
    assert first["evil"][0] == again["evil"][0] == "graded", (first, again)
    assert sorted(again) == ["evil", "leaker"], f"the second run grades only the two it names: {again}"
    out = odd_class["out"]
    for name in ("grades.csv", "grades.json", "canvas.csv", "moodle.csv", "wide.csv", "report.md"):
        (out / name).read_bytes().decode("utf-8")  # valid UTF-8, every one written
    feedback = (out / "feedback" / "evil" / "00_welcome.md").read_text(encoding="utf-8")
    assert "bad \ufffd" in feedback, "the message is kept, its surrogate replaced"
    assert len(feedback) < 100_000, f"two megabytes of message were not cut: {len(feedback)} characters"


@pytest.mark.slow
def test_learner_text_steers_no_terminal_markdown_or_export(odd_class):
    """medium: a learner's hint went raw into report.md's table (an HTML tag, bold text, a link) and to the
    teacher's terminal (a window title, cursor-up, erase-line); bidirectional overrides went everywhere."""
    out = odd_class["out"]
    texts = {p.name: p.read_text(encoding="utf-8") for p in out.rglob("*") if p.suffix in (".md", ".csv", ".json")}
    texts["terminal"] = "\n".join(odd_class["lines"]) + odd_class["report"]
    for name, text in texts.items():
        for bad in (ESC, "\x07", "\x00", BIDI, "\ud800"):
            assert bad not in text, f"{bad!r} reached {name}"
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "<img" not in report and "&lt;img" in report, "a hint's HTML is shown as text"
    assert "**all clear**" not in report and "[regrade](" not in report, "a hint's bold and link are escaped"


@pytest.mark.slow
def test_hidden_inputs_never_reach_a_later_cell_with_hide_hidden_inputs(odd_class):
    """medium: a learner's function recorded the hidden tests' calls and a later answer cell raised them:
    full marks, and the feedback quoted every hidden input. With --hide-hidden-inputs, the cells after a
    test with hidden parts run in a kernel that never ran it: what the function saw is gone."""
    leaker = {r.student_id: r for r in odd_class["runs"][-1]}["leaker"]
    notes = " ".join(leaker.notes)
    assert "LEAK []" in notes, f"the hidden calls reached a later cell: {notes}"
    assert leaker.score == 16.0, [(t.grade_id, t.status) for t in leaker.tests]


# --- the week: times belong to (student, assignment) -------------------------------------------------------------

ONE_HOT = SOLUTIONS / "01_one_hot_and_dot_products.ipynb"


def _zip(path: Path, entries: list[tuple[str, dict, tuple]]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, nb, when in entries:
            zf.writestr(zipfile.ZipInfo(name, when), json.dumps(nb))
    return path


@pytest.mark.slow
def test_unpacking_a_later_week_keeps_an_earlier_weeks_times_through_a_regrade(tmp_path, capsys):
    """blocker: `course unpack` wrote one timestamp.txt per student folder, so unpacking week 13 re-dated
    week 2, and a regrade of week 2 took half the points from students who were on time, silently. A
    Canvas zip without times picked up another week's time. Times now belong to (student, assignment): the
    regrade keeps week 2's penalties, dry run and real run alike, and a time the LMS never gave is none."""
    require_sandbox()
    from course_lib import cli

    roster = write(tmp_path / "roster.csv", "student_id,name,ID\nzm42,Zoë Müller,48100\nsk7,Sam Kim,48101\n")
    subs, out = tmp_path / "subs", tmp_path / "out"
    base = ["--to", str(subs), "--out", str(out), "--tz", "Europe/Berlin"]
    week2 = _zip(  # Moodle, folder per participant: entry times are upload times (Berlin), on time
        tmp_path / "week2.zip",
        [("Zoë Müller_501_assignsubmission_file_/00_welcome.ipynb", learner(), (2026, 11, 24, 22, 0, 0))],
    )
    assert cli.main(["unpack", str(week2), "--assignment", "00_welcome", "--roster", str(roster), *base]) == 0
    assert (
        cli.main(
            ["deadline", "00_welcome", "2026-11-24T23:59+01:00", "--penalty", "10", "--max", "50", "--out", str(out)]
        )
        == 0
    )
    grade = ["grade", str(subs), "--solutions", str(SOLUTIONS), "--out", str(out)]
    assert cli.main([*grade, "--assignment", "00_welcome"]) == 0
    week13 = _zip(  # the same student folders, another assignment, two weeks later
        tmp_path / "week13.zip",
        [
            (
                "Zoë Müller_601_assignsubmission_file_/01_one_hot_and_dot_products.ipynb",
                filled(ONE_HOT, {}),
                (2026, 12, 10, 12, 0, 0),
            ),
            (
                "Sam Kim_602_assignsubmission_file_/01_one_hot_and_dot_products.ipynb",
                filled(ONE_HOT, {}),
                (2026, 12, 10, 12, 0, 0),
            ),
        ],
    )
    assert cli.main(["unpack", str(week13), "--assignment", ONE_HOT.stem, *base]) == 0
    canvas = _zip(  # a Canvas download: its entry times are the download's, not a submission time
        tmp_path / "canvas.zip", [("kimsam_48101_90001_00_welcome.ipynb", learner(), (2026, 12, 20, 9, 0, 0))]
    )
    assert cli.main(["unpack", str(canvas), "--assignment", "00_welcome", *base]) == 0
    capsys.readouterr()
    for dry in (["--dry-run"], ["--reason", "a hidden test fixed"]):
        assert cli.main([*grade, "--assignment", "00_welcome", *dry]) == 0
        said = capsys.readouterr().out
        assert "Sam Kim (sk7), 00_welcome: final 0 → 16 [first file]" in said, said  # finals, as the LMS gets them
        assert "zm42" not in said.split("graded\n")[-1], f"Zoë's grade must not move: {said}"
    with open_gradebook(out) as book:
        rows = {r.student: r for r in book.rows() if r.assignment == "00_welcome"}
        history = book.history("zm42", "00_welcome")
    zoe, sam = rows["zm42"], rows["sk7"]
    assert zoe.submitted_at == "2026-11-24T21:00:00+00:00" and zoe.late_penalty == 0 and zoe.final == 16, zoe
    assert history and history[-1]["submitted_at"] == "2026-11-24T21:00:00+00:00", "the history keeps the time"
    assert sam.submitted_at is None and sam.late_penalty == 0 and sam.final == 16, "no time given: never late"
    assert (subs / "zm42" / "00_welcome.timestamp.txt").exists() and not (subs / "zm42" / "timestamp.txt").exists()
