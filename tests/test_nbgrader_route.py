"""The nbgrader route of docs/nbgrader/README.md, run as written.

The README's hand-out and grade blocks (found by their `<!-- test_nbgrader_route: ... -->` markers)
run in bash from the course folder, with a temporary home so that `~/grading` is private to the
test: the hand-out block activates the virtual environment itself (PATH starts without .venv/bin),
the grade block runs with .venv/bin first on PATH, as activation leaves it. Three students hand in
lesson 00's exercises: the solution's answers, the blank exercise that `course build` writes, and
one with a wrong answer, a multi-part answer with one part wrong, an answer that fails only the
hidden tests, and a helper in a cell she added.
The scores must be what the solution's `points` imply, the feedback must hold no hidden test, the
student version no solution, and the checksum warnings must be the ones the README explains.
"""

from __future__ import annotations

import copy
import csv
import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from nbformat import from_dict

# nbgrader is imported by the tests, not here: it takes seconds, and every test worker imports every
# test file while collecting.

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "nbgrader" / "README.md"
CONFIG = REPO / "docs" / "nbgrader" / "nbgrader_config.py"
VENV_BIN = REPO / ".venv" / "bin"
ASSIGNMENT = "00_welcome"  # the quickest exercise set: the three submissions autograde in about 15 s
SOLUTION = REPO / "solutions" / f"{ASSIGNMENT}.ipynb"
EXERCISE = REPO / "exercises" / f"{ASSIGNMENT}_exercises.ipynb"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
TIMEOUT = 300  # seconds per command: generous for a busy machine (the whole file needs about 40 CPU-seconds)

pytestmark = [
    pytest.mark.slow,  # every test here runs nbgrader, which starts kernels
    pytest.mark.skipif(
        not (VENV_BIN / "activate").is_file(), reason=f"the guide activates {VENV_BIN / 'activate'}, which is absent"
    ),
]


def guide_block(name: str) -> str:
    """The bash block that follows `<!-- test_nbgrader_route: NAME -->` in the guide."""
    match = re.search(
        rf"<!-- test_nbgrader_route: {re.escape(name)} -->\s*```bash\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S
    )
    assert match, f"{GUIDE} has no bash block marked '<!-- test_nbgrader_route: {name} -->'"
    return match.group(1)


def path_without_venv() -> str:
    """PATH as a fresh terminal has it: without the course's .venv/bin."""
    return os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != VENV_BIN.resolve()
    )


def run(command: list[str], cwd: Path, home: Path, path: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(home), PATH=path)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def run_block(name: str, home: Path, path: str) -> subprocess.CompletedProcess:
    result = run(["bash", "-euo", "pipefail", "-c", guide_block(name)], REPO, home, path)
    assert result.returncode == 0, (
        f"the guide's '{name}' block failed (exit {result.returncode}):\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    )
    return result


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def region(text: str, begin: str, end: str) -> list[str]:
    """The non-blank lines between the markers `begin` and `end`, stripped."""
    lines, inside = [], False
    for line in text.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside and line.strip():
            lines.append(line.strip())
    return lines


def without_region(text: str, begin: str, end: str) -> str:
    """`text` with the marker lines and everything between them removed."""
    kept, inside = [], False
    for line in text.split("\n"):
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def page_text(path: Path) -> str:
    """The text a reader sees on an HTML page: tags removed (syntax highlighting splits code into
    spans), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def code_cell(text: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": text}


def with_answers(nb: dict, answers: dict[str, str]) -> dict:
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if grade_id(cell) in answers:
            cell["source"] = answers[grade_id(cell)]
    return nb


@pytest.fixture(scope="module")
def solution() -> dict:
    return json.loads(SOLUTION.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def points(solution) -> dict[str, float]:
    """Points of each test cell, from the solution's nbgrader metadata."""
    return {
        grade_id(c): float(c["metadata"]["nbgrader"]["points"])
        for c in solution["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
    }


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory, solution):
    pytest.importorskip("nbgrader", reason="nbgrader is not installed, so its route cannot be run")
    """Hand out, collect three submissions, grade, feed back and export, with the guide's commands."""
    home = tmp_path_factory.mktemp("home")
    course = home / "grading"
    handed_out = run_block("hand-out", home, path_without_venv())
    release = json.loads((course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text(encoding="utf-8"))

    # ada: the solution's answers, as a student would type them (without the markers).
    answers = {
        grade_id(c): "\n".join(
            line for line in source(c).split("\n") if BEGIN_SOLUTION not in line and END_SOLUTION not in line
        )
        for c in solution["cells"]
        if c["metadata"].get("nbgrader", {}).get("solution")
    }
    ada = with_answers(release, answers)
    # bob: hands in the exercise notebook `course build` wrote, unanswered (not nbgrader's release).
    bob = json.loads(EXERCISE.read_text(encoding="utf-8"))
    # cleo: right answers, except: ex3 wrong; ex2 one part of three wrong; ex4 a table of the visible
    # examples' answers, so only the hidden tests fail (their feedback must not show their code either);
    # ex6 uses a helper from a cell she added above it (nbgrader runs added cells; `course grade` does not).
    cleo = with_answers(
        ada,
        {
            "ex2_answer": "rnn_steps_keys_are = 17\nrnn_steps_1_20 = 19\nrnn_steps_1_100 = 100  # off by one\n",
            "ex3_answer": "def receptive_field(num_layers, kernel_size):\n    return num_layers * kernel_size\n",
            "ex4_answer": "def layers_needed(distance, kernel_size):\n"
            "    return {(2, 3): 1, (10, 3): 5, (9, 5): 3}[(distance, kernel_size)]\n",
            "ex6_answer": (
                "def patch_count(height, width, patch):\n    return grid(height, patch) * grid(width, patch)\n"
            ),
        },
    )
    at = next(i for i, c in enumerate(cleo["cells"]) if grade_id(c) == "ex6_answer")
    cleo["cells"].insert(at, code_cell("def grid(size, patch):\n    return size // patch\n"))
    for student, nb in {"ada": ada, "bob": bob, "cleo": cleo}.items():
        folder = course / "submitted" / student / ASSIGNMENT  # the guide's collecting step
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")

    graded = run_block("grade", home, os.pathsep.join([str(VENV_BIN), path_without_venv()]))
    return {"home": home, "course": course, "release": release, "handed_out": handed_out, "graded": graded}


def test_scores_are_what_the_points_in_the_solution_imply(round_trip, points):
    total = sum(points.values())
    expected = {"ada": total, "bob": 0.0, "cleo": total - points["ex2_test"] - points["ex3_test"] - points["ex4_test"]}
    with open(round_trip["course"] / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    got = {student: float(row["score"]) for student, row in rows.items()}
    assert got == expected, f"nbgrader export: scores {got}, expected {expected} (total {total})"
    assert {float(row["max_score"]) for row in rows.values()} == {total}, f"max_score in {rows}"

    # Per test cell, from the gradebook: nbgrader gives no partial credit for a multi-part exercise
    # and runs the cell cleo added, so her ex6 scores. The README's comparison table says so.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{round_trip['course'] / 'gradebook.db'}") as gb:
        cells = {g.name: g.score for g in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "cleo").grades}
    assert cells == {**points, "ex2_test": 0.0, "ex3_test": 0.0, "ex4_test": 0.0}, (
        f"cleo's scores per test cell: {cells}"
    )


def test_feedback_holds_no_hidden_test_code(round_trip, solution):
    hidden = [line for c in solution["cells"] for line in region(source(c), BEGIN_HIDDEN, END_HIDDEN)]
    assert len(hidden) >= 7, f"expected hidden tests in {SOLUTION.name}, found {hidden}"
    for student in ("ada", "bob", "cleo"):
        page = round_trip["course"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"
        text = page_text(page)
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page} shows {len(leaked)} lines of hidden tests, e.g. {leaked[:3]}"


def test_without_clear_hidden_tests_the_feedback_would_show_them(round_trip, solution):
    """The control for the test above: nbgrader's default feedback preprocessors print the hidden
    tests into the page, which is why the guide's configuration adds ClearHiddenTests."""
    course = round_trip["course"]
    result = run(
        [
            str(VENV_BIN / "nbgrader"),
            "generate_feedback",
            ASSIGNMENT,
            "--student",
            "ada",
            "--CourseDirectory.feedback_directory=feedback_default",
            "--GenerateFeedback.preprocessors=nbgrader.preprocessors.GetGrades",
        ],
        course,
        round_trip["home"],
        os.pathsep.join([str(VENV_BIN), path_without_venv()]),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    text = page_text(course / "feedback_default" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html")
    hidden = [line for c in solution["cells"] for line in region(source(c), BEGIN_HIDDEN, END_HIDDEN)]
    shown = [line for line in hidden if line in text]
    assert len(shown) == len(hidden), f"default feedback shows {len(shown)} of {len(hidden)} hidden lines"


def test_release_has_no_solutions_and_no_hidden_tests(round_trip, solution):
    text = "\n".join(source(c) for c in round_trip["release"]["cells"])
    secret = [line for c in solution["cells"] for line in region(source(c), BEGIN_SOLUTION, END_SOLUTION)]
    secret += [line for c in solution["cells"] for line in region(source(c), BEGIN_HIDDEN, END_HIDDEN)]
    assert len(secret) >= 14, f"expected solutions and hidden tests in {SOLUTION.name}"
    leaked = [line for line in secret if line in text]
    assert not leaked, f"the release notebook holds solution or hidden-test lines: {leaked}"
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"the release notebook still holds '{marker}'"
    stubs = [
        grade_id(c)
        for c in round_trip["release"]["cells"]
        if c["cell_type"] == "code" and "raise NotImplementedError()" in source(c)
    ]
    answers = [grade_id(c) for c in solution["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    assert stubs == answers, f"answer cells with a stub: {stubs}, expected {answers}"


def test_checksum_warnings_are_the_hidden_tests_put_back(round_trip, solution):
    """Every student gets one 'checksum has changed' warning per test cell with hidden tests, and no
    other: the gradebook's checksum is that of the cell with its hidden tests, the student's copy
    (release or `course build`) is the cell without them, as the guide explains."""
    from nbgrader.utils import compute_checksum

    log = round_trip["graded"].stdout + round_trip["graded"].stderr
    warnings = re.findall(r"Attribute 'checksum' for cell (\S+) has changed! \(should be: (\w+), got: (\w+)\)", log)
    with_hidden = {grade_id(c): c for c in solution["cells"] if BEGIN_HIDDEN in source(c)}
    assert sorted(w[0] for w in warnings) == sorted(list(with_hidden) * 3), (
        f"checksum warnings for {sorted(w[0] for w in warnings)}; expected each of {sorted(with_hidden)} "
        "once per student (ada, bob, cleo)"
    )
    for cell_id, should_be, got in set(warnings):
        cell = from_dict(copy.deepcopy(with_hidden[cell_id]))
        cell.source = source(cell)  # nbformat's reader joins the lines; json.loads leaves a list
        assert should_be == compute_checksum(cell), f"{cell_id}: the gradebook's checksum is not the full cell's"
        cell.source = without_region(source(cell), BEGIN_HIDDEN, END_HIDDEN)
        assert got == compute_checksum(cell), f"{cell_id}: the student's checksum is not the cell without hidden tests"


def test_generate_assignment_needs_the_venv_on_path(tmp_path):
    """`.venv/bin/nbgrader generate_assignment` without activation: nbgrader starts `alembic` by name."""
    pytest.importorskip("nbgrader", reason="nbgrader is not installed, so its route cannot be run")
    clean = path_without_venv()
    if shutil.which("alembic", path=clean):
        pytest.skip(f"an alembic outside the virtual environment is on PATH ({shutil.which('alembic', path=clean)})")
    assert f"/.venv/bin/nbgrader generate_assignment {ASSIGNMENT}`" in GUIDE.read_text(encoding="utf-8"), (
        "the guide no longer shows the call that fails"
    )
    course = tmp_path / "grading"
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(CONFIG, course)
    shutil.copy(SOLUTION, course / "source" / ASSIGNMENT)
    result = run([str(VENV_BIN / "nbgrader"), "generate_assignment", ASSIGNMENT], course, tmp_path, clean)
    assert result.returncode != 0, "generate_assignment worked without .venv/bin on PATH: update the guide"
    assert "No such file or directory: 'alembic'" in result.stdout + result.stderr, result.stderr[-3000:]
    assert not (course / "release").exists(), "nothing should have been released"
    # The guide says to delete the gradebook this leaves behind: it lacks nbgrader's schema version.
    with sqlite3.connect(course / "gradebook.db") as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master where type = 'table'")}
    assert "assignment" in tables and "alembic_version" not in tables, f"gradebook tables: {sorted(tables)}"
