"""The Gradescope autograder (`course gradescope build | test | import`, course_grader/gradescope.py).

The slow test grades a correct, a partly correct and a blank notebook of lesson 06's set twice, with
`course grade` and with the autograder zip run as Gradescope runs it (`course gradescope test`), and
checks that the totals agree and that each results.json has Gradescope's published fields. The others
build zips, write results from results made by hand, and read Gradescope's score export back; no kernel.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import zipfile
from contextlib import closing
from pathlib import Path

import jsonschema
import pytest
from grading_helpers import REPO, SOLUTIONS, require_sandbox, write

from course_grader import gradescope
from course_grader.build import build_exercise
from course_grader.grade import ManualAnswer, SubmissionResult
from course_grader.gradebook import open_gradebook
from course_grader.gradescope import (
    PartialResults,
    build_autograder,
    find_submission,
    import_scores,
    results_json,
)
from course_grader.roster import parse_roster
from course_lib import cli
from course_lib.runner.feedback import TestResult as ExerciseResult
from course_lib.runner.notebook import grade_id, is_solution, is_test, read_notebook, source
from course_lib.runner.process import CellRun

ASSIGNMENT = "06_attention"


def course(argv: list, expect: int = 0) -> int:
    """`course ARGV` as a teacher types it; its exit status must be `expect`."""
    code = cli.main([str(a) for a in argv])
    assert code == expect, f"course {' '.join(map(str, argv))} exited with {code}, expected {expect}"
    return code


# Gradescope's results.json, field by field, as its autograder specification publishes it ("Output format",
# "Controlling Test Case Visibility", "Test case status", "Output String Formatting" of
# https://gradescope-autograders.readthedocs.io/en/latest/specs/, the page kept in the repository
# gradescope/autograder_samples as docs/specs.md; read November 2026). Nothing else is allowed.
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
TEXT_FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
NUMBER = {"type": "number"}
GRADESCOPE_RESULTS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": NUMBER,  # optional, but required if not on each test case
        "execution_time": NUMBER,  # seconds
        "output": {"type": "string"},
        "output_format": TEXT_FORMAT,
        "test_output_format": TEXT_FORMAT,
        "test_name_format": TEXT_FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "score": NUMBER,
                    "max_score": NUMBER,
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "name_format": TEXT_FORMAT,
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": TEXT_FORMAT,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": VISIBILITY,
                    "extra_data": {"type": "object"},
                },
            },
        },
        "leaderboard": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "properties": {"name": {"type": "string"}, "value": {}, "order": {"enum": ["asc", "desc"]}},
            },
        },
    },
    "anyOf": [
        {"required": ["score"]},
        {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}},
    ],
}
# What the course asks of every test on top of Gradescope's rules (one per exercise, with its hint).
OURS = {"required": ["score", "tests"], "properties": {"tests": {"items": {"required": [
    "name", "score", "max_score", "status", "output", "visibility"
]}}}}  # fmt: skip


def valid(results: dict) -> dict:
    jsonschema.validate(results, GRADESCOPE_RESULTS)
    jsonschema.validate(results, OURS)
    return results


def notebooks(folder: Path) -> dict[str, Path]:
    """Lesson 06's exercise notebook: answered as the solution does, half answered, and blank."""
    sol = read_notebook(SOLUTIONS / f"{ASSIGNMENT}.ipynb")
    blank = build_exercise(sol, f"{ASSIGNMENT}.ipynb")
    answers = {grade_id(c): source(c) for c in sol["cells"] if is_solution(c)}
    half = {g: a for i, (g, a) in enumerate(answers.items()) if i % 2 == 0}

    def filled(given: dict) -> dict:
        nb = json.loads(json.dumps(blank))
        for cell in nb["cells"]:
            if is_solution(cell) and grade_id(cell) in given:
                cell["source"] = given[grade_id(cell)]
        return nb

    return {
        kind: write(folder / kind / f"{ASSIGNMENT}.ipynb", nb)
        for kind, nb in (("correct", filled(answers)), ("partly", filled(half)), ("blank", blank))
    }


# --- the zip -------------------------------------------------------------------------------------------


def test_the_zip_holds_what_grading_needs_and_nothing_else(tmp_path):
    report = build_autograder(ASSIGNMENT, SOLUTIONS, tmp_path / "a.zip")
    with zipfile.ZipFile(report.path) as z:
        names = z.namelist()
        modes = {i.filename: (i.external_attr >> 16) for i in z.infolist()}
        setup = z.read("setup.sh").decode()
        config = json.loads(z.read("autograder.json"))
    for needed in ("setup.sh", "run_autograder", "autograder.json", "constraints.txt", "course/pyproject.toml",
                   "course/course_lib/checks/lesson06.py", "course/course_grader/pyproject.toml",
                   "course/course_grader/grade.py", f"solutions/{ASSIGNMENT}.ipynb"):  # fmt: skip
        assert needed in names, f"{needed} is missing from the zip: {sorted(names)[:20]} ..."
    for script in ("setup.sh", "run_autograder"):
        assert modes[script] & stat.S_IXUSR, f"{script} must be executable, mode {oct(modes[script])}"
    solutions = [n for n in names if n.startswith("solutions/")]
    assert solutions == [f"solutions/{ASSIGNMENT}.ipynb"], f"another set's solutions travel: {solutions}"
    stray = [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "egg-info" in n or "/." in n]
    assert not stray, f"caches or hidden files in the zip: {stray}"
    elsewhere = [n for n in names if n.split("/")[0] not in ("course", "solutions", "checks") and "/" in n]
    assert not elsewhere, f"files outside course/, solutions/ and checks/: {elsewhere}"
    torch = next(ln for ln in (REPO / "constraints.txt").read_text().splitlines() if ln.startswith("torch=="))
    assert f'"{torch}"' in setup and "--index-url https://download.pytorch.org/whl/cpu" in setup, (
        f"setup.sh must install {torch} from PyTorch's CPU index:\n{setup}"
    )
    assert config["assignment"] == ASSIGNMENT and config["hidden_visibility"] == "after_published", config
    again = build_autograder(ASSIGNMENT, SOLUTIONS, tmp_path / "b.zip")
    assert again.path.read_bytes() == report.path.read_bytes(), "the same files must make the same zip"


def test_a_teachers_own_set_carries_its_checks_module(tmp_path):
    from course_grader.new import new_set

    new_set("13_own_topic", "Own topic", tmp_path / "private" / "solutions", tmp_path / "private" / "checks")
    report = build_autograder("13_own_topic", tmp_path / "private" / "solutions", tmp_path / "own.zip")
    with zipfile.ZipFile(report.path) as z:
        assert "checks/lesson13.py" in z.namelist(), z.namelist()
        nb = json.loads(z.read("solutions/13_own_topic.ipynb"))
        assert z.read("checks/lesson13.py") == (tmp_path / "private" / "checks" / "lesson13.py").read_bytes(), (
            "the checks module travels as the teacher wrote it"
        )
    assert nb["metadata"]["course"]["checks"] == "../checks/lesson13.py", nb["metadata"]["course"]


def test_build_says_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="no solution notebook .*99_nothing.*the folder has: 00_welcome"):
        build_autograder("99_nothing", SOLUTIONS, tmp_path / "x.zip")
    with pytest.raises(ValueError, match="--hidden-visibility is one of visible, after_due_date"):
        build_autograder(ASSIGNMENT, SOLUTIONS, tmp_path / "x.zip", hidden_visibility="later")
    with pytest.raises(ValueError, match="is not a zip file"):
        gradescope.try_autograder(write(tmp_path / "not.zip", "text"), tmp_path / "not.zip", tmp_path / "out")


# --- results.json ------------------------------------------------------------------------------------


def _result(tests, manual=(), status="graded", notes=()):
    return SubmissionResult("ada", ASSIGNMENT, sum(t.points for t in tests), sum(t.max_points for t in tests),
                            status, list(tests), list(notes), manual=list(manual))  # fmt: skip


def test_results_have_one_test_per_exercise_its_hint_and_the_written_answers_as_placeholders():
    solution = read_notebook(SOLUTIONS / f"{ASSIGNMENT}.ipynb")
    tests = [
        ExerciseResult("ex1_test", "Exercise 1: Scores", 2.0, 2.0, "passed"),
        ExerciseResult(
            "ex2_test", "Exercise 2: Softmax", 0.0, 3.0, "failed", "it looks like you forgot to divide by sqrt(d_k)"
        ),
        ExerciseResult("ex3_test", "Exercise 3: Masks", 1.5, 3.0, "partial", "2 of 4 parts right\n```\nx\n```"),
    ]
    manual = [
        ManualAnswer(
            "ex9_answer", "Exercise 9: Why divide?", 0.0, 2.0, "to be marked", answer="because", after="ex2_test"
        ),
        ManualAnswer(
            "ex10_answer", "Exercise 10: And?", 0.0, 1.0, "not attempted", "not answered yet", after="ex3_test"
        ),
    ]
    results = valid(
        results_json(
            _result(tests, manual), solution, {"hidden_visibility": "after_due_date"}, isolation="x", seconds=3
        )
    )
    assert results["score"] == 3.5, f"the score is the tests' points (3.5), not {results['score']}"
    names = [t["name"] for t in results["tests"]]
    assert names == ["Exercise 1: Scores", "Exercise 2: Softmax", "Exercise 9: Why divide? (written answer)",
                     "Exercise 3: Masks", "Exercise 10: And? (written answer)"], names  # fmt: skip
    softmax, written, masks, blank = results["tests"][1:]
    assert softmax["status"] == "failed" and "forgot to divide by sqrt(d_k)" in softmax["output"], softmax
    assert masks["score"] == 1.5 and "**partial**" in masks["output"] and "````" in masks["output"], (
        f"a hint holding a fence is quoted in a longer one: {masks['output']!r}"
    )
    assert (written["score"], written["max_score"], written["status"]) == (0.0, 2.0, "passed"), written
    assert "marks this written answer on Gradescope" in written["output"], written["output"]
    assert blank["status"] == "failed" and "Left blank" in blank["output"], blank
    hidden = {grade_id(c) for c in solution["cells"] if "### BEGIN HIDDEN TESTS" in source(c)}
    for t in results["tests"]:
        gid = t["extra_data"]["grade_id"]
        expected = "after_due_date" if gid in hidden else "visible"
        assert t["visibility"] == expected, f"{gid}: visibility {t['visibility']}, expected {expected}"


def test_partial_results_are_written_before_grading_and_as_each_test_finishes(tmp_path):
    solution = read_notebook(SOLUTIONS / f"{ASSIGNMENT}.ipynb")
    path = tmp_path / "results" / "results.json"
    partial = PartialResults(path, solution, {"hidden_visibility": "after_published"}, "test")
    partial.write("Grading has started.")
    first = valid(json.loads(path.read_text()))
    assert first["score"] == 0 and all("not checked" in t["output"] for t in first["tests"]), first
    tests = [grade_id(c) for c in solution["cells"] if is_test(c)]
    partial.test_done(tests[0], CellRun("ok"))
    partial.test_done(tests[1], CellRun("error", "CheckFailed", "the weights do not sum to 1"))
    now = valid(json.loads(path.read_text()))
    first_points = now["tests"][0]["max_score"]
    assert now["score"] == first_points, f"after one passed test the score is {first_points}, got {now['score']}"
    assert "the weights do not sum to 1" in now["tests"][1]["output"], now["tests"][1]
    assert "2 of" in now["output"], now["output"]
    partial.finish({"score": 1.0, "tests": []})
    partial.test_done(tests[2], CellRun("ok"))  # a late call changes nothing once the final results are written
    assert json.loads(path.read_text()) == {"score": 1.0, "tests": []}


STOP = """
import subprocess, sys, time
from pathlib import Path
from course_grader.gradescope import PartialResults, _stop_at
from course_lib.runner.notebook import read_notebook
from course_lib.runner.process import CellRun
partial = PartialResults(Path(sys.argv[2]), read_notebook(sys.argv[1]), {}, "test")
partial.test_done("ex1_test", CellRun("ok"))
child = subprocess.Popen(["sleep", "300"])  # stands for the learner's kernel
print(child.pid, flush=True)
_stop_at(time.monotonic() + 0.2, partial, 600)
print("not reached")
"""


def _ends(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` (a `sleep 300`) is gone, or a zombie, within `within_s` (a kill is asynchronous)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                ours = f.read().startswith(b"sleep\0300")
        except OSError:
            return True
        if state in ("Z", "X") or not ours:  # dead, or the id is another process's by now
            return True
        time.sleep(0.1)
    return False


def test_at_its_time_limit_the_autograder_keeps_what_it_checked_and_ends_the_kernel(tmp_path):
    results = tmp_path / "results.json"
    ran = subprocess.run(
        [sys.executable, "-c", STOP, str(SOLUTIONS / f"{ASSIGNMENT}.ipynb"), str(results)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0 and "not reached" not in ran.stdout, (ran.stdout, ran.stderr)
    assert "stopped at the time limit" in ran.stdout, ran.stdout
    child = int(ran.stdout.split()[0])
    assert _ends(child), f"the kernel (process {child}, `sleep 300`) must not outlive the autograder"
    got = valid(json.loads(results.read_text()))
    first = got["tests"][0]
    assert got["score"] == first["max_score"] > 0 and first["status"] == "passed", got["tests"][:2]
    assert "time limit (10 minutes)" in got["output"] and "not checked" in got["tests"][1]["output"], got["output"]


def test_the_uploaded_notebook_is_found_by_course_grades_rules(tmp_path):
    up = tmp_path / "submission"
    write(up / "Copy of 06_attention (2).ipynb", {"cells": []})
    path, notes = find_submission(up, ASSIGNMENT)
    assert path == up / "Copy of 06_attention (2).ipynb" and "its name differs" in notes[0], (path, notes)
    write(up / "other.ipynb", {"cells": []})
    assert find_submission(up, ASSIGNMENT)[0].name.startswith("Copy of"), "a notebook named otherwise is not it"
    only = tmp_path / "only"
    write(only / "homework.ipynb", {"cells": []})
    path, notes = find_submission(only, ASSIGNMENT)
    assert path.name == "homework.ipynb" and "the only notebook uploaded" in notes[0], notes
    assert find_submission(tmp_path / "empty", ASSIGNMENT) == (None, ["Nothing was uploaded."])


def test_without_the_sandbox_a_root_grader_runs_the_learners_kernel_as_the_user_it_names(tmp_path, monkeypatch):
    """Gradescope's container (no bubblewrap): the launcher gives the kernel's home to `nobody` and drops to it,
    without the mount namespace it cannot make there."""
    if os.geteuid() != 0:
        pytest.skip("the grader drops to another user only as root (as Gradescope runs its autograder)")
    from course_grader.sandbox import launcher, plain_kernel_user

    monkeypatch.delenv("COURSE_GRADE_KERNEL_USER", raising=False)
    assert plain_kernel_user() is None, "without the setting, the kernel runs as the grader"
    monkeypatch.setenv("COURSE_GRADE_KERNEL_USER", "nobody")
    uid, gid = plain_kernel_user()
    home = tmp_path / "home"
    home.mkdir()
    argv = launcher(uid, gid, [], [], ["/bin/sh", "-c", "id -u; id -G; touch made-by-the-kernel"], own_cwd=True)
    ran = subprocess.run(argv, cwd=home, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.split() == [str(uid), str(gid)], (ran.stdout, ran.stderr)
    assert home.stat().st_uid == uid and (home / "made-by-the-kernel").stat().st_uid == uid, (
        f"the home and what the kernel made there belong to {uid}: {home.stat().st_uid}"
    )


# --- Gradescope's scores back into the gradebook --------------------------------------------------------

SCORES = """\ufeffFirst Name,Last Name,SID,Email,Sections,Total Score,Max Points,Status,Submission ID,\
Submission Time,Lateness (H:M:S),View Count,Submission Count,1: Autograder (22.0 pts),2: Why divide by √d_k? (2.0 pts)
Ada,Lovelace,00042,ada@example.edu,,23.5,24.0,Graded,128746829,2026-12-01 23:10:00 +0100,00:00:00,3,2,22.0,1.5
Zoë,Müller,,zm@example.edu,,12.0,24.0,Ungraded,128746830,2026-12-02 10:00:00 +0100,10:01:00,1,1,12.0,
Bob,Smith,00044,bob@example.edu,,,24.0,Missing,,,,0,0,,
Eve,Nobody,99999,eve@example.edu,,20.0,24.0,Graded,128746831,2026-12-01 20:00:00 +0100,00:00:00,1,1,20.0,0.0
"""


def test_gradescopes_scores_become_rows_of_the_assignment(tmp_path, capsys):
    out = tmp_path / "grades"
    with closing(open_gradebook(out)) as book:
        book.set_roster(parse_roster(
            "student_id,name,email\n00042,Ada Lovelace,ada@example.edu\nzm,Zoë Müller,zm@example.edu\n"
            "00044,Bob Smith,bob@example.edu\n"
        ))  # fmt: skip
    scores = write(tmp_path / "06_scores.csv", SCORES)
    course(["gradescope", "import", str(scores), "--assignment", ASSIGNMENT, "--out", str(out)])
    said = capsys.readouterr().out
    assert "imported 3 row(s)" in said and "2 graded, 1 not submitted" in said and "Eve Nobody" in said, said
    with closing(open_gradebook(out)) as book:
        rows = {r.student: r for r in book.rows()}
        assert (rows["00042"].score, rows["00042"].max_score, rows["00042"].status) == (23.5, 24.0, "graded"), rows
        assert rows["00042"].submitted_at == "2026-12-01T22:10:00+00:00", rows["00042"].submitted_at
        tests = [(t["exercise"], t["points"], t["status"]) for t in rows["00042"].tests]
        assert tests == [("Autograder", 22.0, "passed"), ("Why divide by √d_k?", 1.5, "partial")], tests
        assert "Graded on Gradescope (submission 128746829)" in rows["00042"].notes[0], rows["00042"].notes
        assert rows["zm"].score == 12.0 and any("not yet graded" in n for n in rows["zm"].notes), rows["zm"].notes
        assert rows["00044"].status == "not submitted", rows["00044"]
    feedback = (out / "feedback" / "00042" / f"{ASSIGNMENT}.md").read_text()
    assert "**Score: 23.5 / 24**" in feedback, feedback
    # The same export again replaces its rows; a later submission on Gradescope is a new attempt.
    course(["gradescope", "import", str(scores), "--assignment", ASSIGNMENT, "--out", str(out)])
    later = write(tmp_path / "later.csv", SCORES.replace("128746829", "128799999").replace(",23.5,", ",24.0,"))
    course(["gradescope", "import", str(later), "--assignment", ASSIGNMENT, "--out", str(out)])
    with closing(open_gradebook(out)) as book:
        assert [a["score"] for a in book.attempts("00042", ASSIGNMENT)] == [23.5, 24.0], book.attempts(
            "00042", ASSIGNMENT
        )
        assert len(book.history("00042", ASSIGNMENT)) == 1, "importing the same export again keeps the old version"
    course(["report", "--out", str(out)])
    assert "06_attention" in (out / "report.md").read_text(), "course report reads the imported rows"
    course(["export", "--lms", "canvas", "--out", str(out)])
    canvas = (out / "canvas.csv").read_text(encoding="utf-8-sig").splitlines()
    assert any(line.startswith("Ada Lovelace,") and line.endswith(",24") for line in canvas), canvas


def test_a_file_that_is_not_gradescopes_export_is_refused(tmp_path):
    bad = write(tmp_path / "roster.csv", "student_id,name\nada,Ada\n")
    with pytest.raises(ValueError, match="not Gradescope's score export .* Total Score and Status"):
        import_scores(bad, ASSIGNMENT, tmp_path / "grades")


# --- the same totals as `course grade` ----------------------------------------------------------------


@pytest.mark.slow
def test_the_autograder_gives_the_totals_course_grade_gives(tmp_path, capsys):
    require_sandbox()
    from course_grader.batch import GradeOptions, grade_all

    made = notebooks(tmp_path / "nbs")
    subs = tmp_path / "submissions"
    for kind, path in made.items():
        write(subs / kind / path.name, path.read_bytes())
    graded = {
        r.student_id: r for r in grade_all(subs, SOLUTIONS, tmp_path / "grades", GradeOptions(assignments=[ASSIGNMENT]))
    }
    zip_path = tmp_path / "autograder.zip"
    course(["gradescope", "build", ASSIGNMENT, "--solutions", str(SOLUTIONS), "-o", str(zip_path)])
    for kind, path in made.items():
        out = tmp_path / "gs" / kind
        course(["gradescope", "test", str(zip_path), str(path), "--out", str(out)])
        results = valid(json.loads((out / "results.json").read_text()))
        expected = graded[kind]
        assert results["score"] == expected.score, (
            f"{kind}: Gradescope gets {results['score']}, course grade gives {expected.score}\n"
            + (out / "stdout").read_text()[-3000:]
        )
        by_id = {t["extra_data"]["grade_id"]: t for t in results["tests"]}
        for t in expected.tests:
            got = by_id[t.grade_id]
            assert (got["score"], got["max_score"]) == (t.points, t.max_points), f"{kind} {t.grade_id}: {got} vs {t}"
            if t.message and t.status != "passed":
                assert t.message.strip().splitlines()[0] in got["output"], f"{kind} {t.grade_id}: the hint is lost"
        assert results["extra_data"]["isolation"].startswith("the bubblewrap sandbox"), results["extra_data"]
        written = [t for t in results["tests"] if "written answer" in t["tags"]]
        assert written and all(t["score"] == 0 for t in written), written
    assert (
        graded["blank"].score == 0
        and graded["correct"].score == graded["correct"].max_score > graded["partly"].score > 0
    )
