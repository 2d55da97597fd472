"""`course progress`: every exercise set of a folder in one table, from `course check`'s checks.

A fresh clone's exercises/ is listed without starting a kernel (every notebook is what `course build`
wrote); the solutions are every set complete, run once and then read from the cache; a learner's
half-done notebook gets its marks, and runs again only when it changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from grading_helpers import REPO

from course_lib import progress
from course_lib.runner import feedback
from course_lib.runner.feedback import MANUAL_STATUS
from course_lib.runner.notebook import assignment_of, read_notebook

SOLUTIONS = sorted((REPO / "solutions").glob("[0-9][0-9]_*.ipynb"))
EXERCISES = sorted((REPO / "exercises").glob("[0-9][0-9]_*.ipynb"))


def _no_kernels(monkeypatch) -> None:
    """Fail the test if anything would run a notebook's checks."""

    def refuse(path, *args, **kwargs):
        raise AssertionError(f"course progress ran the checks of {path}, which it should have known without running")

    monkeypatch.setattr("course_lib.runner.check.check_notebook", refuse)


def test_a_fresh_clone_lists_every_set_not_attempted_without_running_anything(tmp_path, monkeypatch):
    _no_kernels(monkeypatch)
    folder = tmp_path / "exercises"
    shutil.copytree(REPO / "exercises", folder)
    sets = progress.progress(folder, bar=False)
    names = [s.name for s in sets]
    assert names == [p.stem for p in SOLUTIONS], f"sets {names}, expected one per solution notebook"
    assert [s.notebook for s in sets] == [p.name for p in EXERCISES]
    wrong = [
        (s.name, s.status, s.source, s.points)
        for s in sets
        if (s.status, s.source, s.points) != ("not attempted", "unchanged", 0)
    ]
    assert not wrong, f"sets of a fresh clone that are not 'not attempted': {wrong}"
    for s in sets:
        nb = read_notebook(folder / s.notebook)
        tests = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"]
        assert s.max_points == sum(c["metadata"]["nbgrader"]["points"] for c in tests), s
        assert s.checked is None and all(e.status in ("not attempted", MANUAL_STATUS) for e in s.exercises), s
    assert not (folder / progress.CACHE_NAME).exists(), "nothing was run, so nothing needs keeping"


def test_the_command_lists_every_set_from_the_exercises_folder_and_as_json(tmp_path):
    """`course progress` in a course folder reads ./exercises; --json says the same for a program."""
    shutil.copytree(REPO / "exercises", tmp_path / "exercises")
    cmd = [sys.executable, "-m", "course_lib.cli", "progress"]
    table = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stdout + table.stderr
    rows = [line.split()[0] for line in table.stdout.splitlines()[2:] if line.startswith("  ") and line[2:4].isdigit()]
    assert rows == [p.stem for p in SOLUTIONS], table.stdout
    assert f"0 of {len(SOLUTIONS)} sets complete" in table.stdout, table.stdout
    data = json.loads(
        subprocess.run([*cmd, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
    )
    assert [s["name"] for s in data["sets"]] == [p.stem for p in SOLUTIONS], data
    assert data["complete"] == 0 and data["points"] == 0 and data["max_points"] > 0, data
    assert {s["status"] for s in data["sets"]} == {"not attempted"}, data


def test_an_unknown_folder_is_an_error_that_says_what_to_give(tmp_path, capsys):
    from course_lib import cli

    assert cli.main(["progress", str(tmp_path / "nowhere")]) == 2
    out = capsys.readouterr().out
    assert "nowhere: no such folder" in out and "exercise notebooks" in out, out


def test_a_set_under_its_old_name_and_its_new_one_counts_once_and_the_learners_work_wins(tmp_path):
    folder = tmp_path / "exercises"
    folder.mkdir()
    built = REPO / "exercises" / "00_welcome_exercises.ipynb"
    shutil.copy(built, folder / "00_welcome_exercises.ipynb")
    worked = read_notebook(built)
    worked["cells"][-1]["source"] = "# mine\n"
    (folder / "00_welcome.ipynb").write_text(json.dumps(worked), encoding="utf-8")
    shutil.copy(built, folder / "00_welcome_exercises.mine.ipynb")  # a learner's copy: not a set
    assert progress.find_sets(folder) == [("00_welcome", folder / "00_welcome.ipynb")]
    assert assignment_of("00_welcome_exercises") == assignment_of("00_welcome") == "00_welcome"


def _result(status: str, points: float, exercise: str = "Exercise 1: A", max_points: float = 2) -> feedback.TestResult:
    return feedback.TestResult("ex_test", exercise, points, max_points, status, "")


@pytest.mark.parametrize(
    "statuses, expected",
    [
        ([("passed", 2)], "passed"),
        ([("passed", 2), ("failed", 0)], "partial"),
        ([("partial", 1)], "partial"),
        ([("failed", 0)], "failed"),
        ([("error", 0)], "error"),
        ([("not attempted", 0)], "not attempted"),
        ([("not attempted", 0), ("passed", 2)], "partial"),
        ([(MANUAL_STATUS, 0)], MANUAL_STATUS),
    ],
)
def test_an_exercise_passes_only_when_all_its_tests_do(statuses, expected, tmp_path):
    rows = [_result(status, pts) for status, pts in statuses]
    (ex,) = progress.summarise("06_attention", tmp_path / "x.ipynb", rows, None, "run").exercises
    assert ex.status == expected, f"tests {statuses}: the exercise is {ex.status!r}, expected {expected!r}"


def test_a_set_is_complete_when_every_test_passes_and_every_written_answer_is_written(tmp_path):
    done = [_result("passed", 2), feedback.TestResult("w", "Exercise 2: W", 0, 2, MANUAL_STATUS, "a person marks it.")]
    blank = [
        _result("passed", 2),
        feedback.TestResult("w", "Exercise 2: W", 0, 2, MANUAL_STATUS, "...; not answered yet."),
    ]
    path = tmp_path / "x.ipynb"
    assert progress.summarise("x", path, done, None, "run").status == "complete"
    assert progress.summarise("x", path, blank, None, "run").status == "in progress"
    assert progress.summarise("x", path, [_result("not attempted", 0)], None, "run").status == "not attempted"
    s = progress.summarise("x", path, [_result("passed", 2), _result("failed", 0, "Exercise 2: B", 3)], None, "run")
    assert (s.status, s.points, s.max_points) == ("in progress", 2, 5), s


@pytest.mark.slow  # runs the visible checks of every solution notebook: about 45 CPU-seconds on two cores
def test_the_solutions_are_every_set_complete_and_a_second_look_runs_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "progress.json"  # the repository's solutions/ stays as it is
    sets = progress.progress(REPO / "solutions", bar=False, cache_file=cache)
    assert [s.name for s in sets] == [p.stem for p in SOLUTIONS]
    lost = [
        (
            s.name,
            s.status,
            [
                (t["grade_id"], t["status"], t["message"][:200])
                for e in s.exercises
                for t in e.tests
                if t["status"] not in ("passed", MANUAL_STATUS)
            ],
        )
        for s in sets
        if s.status != "complete" or s.points != s.max_points
    ]
    assert not lost, f"solution sets that course progress does not show complete: {lost}"
    assert all(s.source == "run" and s.checked for s in sets), [(s.name, s.source) for s in sets]
    _no_kernels(monkeypatch)
    again = progress.progress(REPO / "solutions", bar=False, cache_file=cache)
    assert [(s.name, s.status, s.points, s.checked, s.source) for s in again] == [
        (s.name, s.status, s.points, s.checked, "cache") for s in sets
    ]


@pytest.mark.slow  # starts one kernel for lesson 00's exercises
def test_a_half_done_notebook_gets_its_marks_and_runs_again_only_when_it_changes(tmp_path, monkeypatch):
    folder = tmp_path / "exercises"
    folder.mkdir()
    solution = read_notebook(REPO / "solutions" / "00_welcome.ipynb")
    answers = {
        c["metadata"]["nbgrader"]["grade_id"]: c["source"]
        for c in solution["cells"]
        if c["metadata"].get("nbgrader", {}).get("solution")
    }
    nb = read_notebook(REPO / "exercises" / "00_welcome_exercises.ipynb")
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == "ex1_answer":
            cell["source"] = answers[gid]  # right
        elif gid == "ex3_answer":
            cell["source"] = "def receptive_field(num_layers, kernel_size):\n    return num_layers * kernel_size\n"
    path = folder / "00_welcome_exercises.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    (first,) = progress.progress(folder, bar=False)
    marks = "".join(progress.MARKS[e.status] for e in first.exercises)
    assert marks == "✔·✘····", f"exercise 1 right, 3 wrong, the rest blank: {marks} ({first.exercises})"
    assert (first.status, first.points, first.source) == ("in progress", 2, "run"), first
    assert (folder / progress.CACHE_NAME).is_file()

    monkeypatch.setattr(progress, "_now", lambda: "2030-01-01T00:00:00")  # a later day
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"], code["execution_count"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"}], 1
    path.write_text(json.dumps(nb), encoding="utf-8")  # run, not changed: the kept result still holds
    (again,) = progress.progress(folder, bar=False)
    assert (again.source, again.checked, again.points) == ("cache", first.checked, 2), again
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "ex3_answer":
            cell["source"] = answers["ex3_answer"]
    path.write_text(json.dumps(nb), encoding="utf-8")
    (changed,) = progress.progress(folder, bar=False)
    assert (changed.source, changed.checked, changed.points) == ("run", "2030-01-01T00:00:00", 5), changed
