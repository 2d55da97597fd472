"""`course new`: a teacher's new exercise set from the template validates, builds, scores full marks
as written and zero blank, and names the mistakes its checks list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from course_grader.build import label_problems
from course_grader.grade import grade_submission
from course_lib import cli
from course_lib.runner.check import check_notebook
from course_lib.runner.notebook import grade_id, is_solution, read_notebook, source, validate_solution_notebook
from course_lib.runner.process import Limits

NAME = "93_softmax_shapes"


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A teacher's private folders: tmp/solutions (the new notebook), tmp/checks (its lesson93.py), tmp/exercises."""
    root = tmp_path_factory.mktemp("teacher")
    assert (
        cli.main(
            [
                "new",
                NAME,
                "--title",
                "Softmax and shapes",
                "--solutions",
                str(root / "solutions"),
                "--checks",
                str(root / "checks"),
            ]
        )
        == 0
    )
    assert cli.main(["build", "--solutions", str(root / "solutions"), "--exercises", str(root / "exercises")]) == 0
    return root


def _with_answers(root: Path, answers: dict[str, str], name: str) -> Path:
    """The built exercise with some answer cells filled in (grade_id -> source), written as `name`."""
    nb = read_notebook(root / "exercises" / f"{NAME}_exercises.ipynb")
    for cell in nb["cells"]:
        if grade_id(cell) in answers:
            cell["source"] = answers[grade_id(cell)]
    path = root / "exercises" / name
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def test_course_new_writes_a_valid_set_whose_labels_match_its_metadata(course):
    nb = read_notebook(course / "solutions" / f"{NAME}.ipynb")
    assert validate_solution_notebook(nb, NAME) == []
    assert label_problems(nb, NAME) == []
    assert "**Total: 8 points.**" in source(nb["cells"][0])
    assert "self-study" in nb["cells"][1]["metadata"]["tags"]
    setup = source(nb["cells"][2])
    assert 'sys.path += [d for d in (".", "../checks")' in setup and "import lesson93" in setup, setup
    assert str(course) not in json.dumps(nb), "no absolute path of the teacher's in the notebook"
    assert nb["metadata"]["course"] == {"checks": "../checks/lesson93.py"}
    module = (course / "checks" / "lesson93.py").read_text()
    assert "0.665" not in module and "(4, 10, 32)" not in module, "hand-worked answers are stored as seals"
    assert "THE NEXT EXERCISE" in module and "THE NEXT EXERCISE" in json.dumps(nb), (
        "the teacher is told where the next one goes"
    )
    assert [c.get("id") for c in nb["cells"] if is_solution(c)] == ["ex1_answer", "ex2_answer", "ex3_answer"]
    assert (
        cli.main(
            ["build", "--check", "--solutions", str(course / "solutions"), "--exercises", str(course / "exercises")]
        )
        == 0
    )
    built = (course / "exercises" / f"{NAME}_exercises.ipynb").read_text()
    assert "THE NEXT EXERCISE" not in built and "BEGIN HIDDEN" not in built


@pytest.mark.slow
def test_the_solution_scores_full_marks_and_the_blank_exercise_zero(course):
    rows = check_notebook(course / "solutions" / f"{NAME}.ipynb").rows
    assert [r.status for r in rows] == ["passed"] * 3 and sum(r.points for r in rows) == 8, rows
    rows = check_notebook(course / "exercises" / f"{NAME}_exercises.ipynb").rows
    assert [r.status for r in rows] == ["not attempted"] * 3 and sum(r.points for r in rows) == 0, rows


@pytest.mark.slow
def test_listed_mistakes_get_their_hints_and_a_multi_part_answer_earns_part_of_its_points(course):
    path = _with_answers(
        course,
        {
            "ex1_answer": "def softmax(scores):\n    return [s / sum(scores) for s in scores]\n",
            "ex2_answer": "p_third = math.exp(3)\n",
            "ex3_answer": "xw_shape = (4, 10, 32)\nscores_shape = (4, 16, 16)\npooled_shape = (4, 10)\n",
        },
        "wrong.ipynb",
    )
    rows = {r.grade_id: r for r in check_notebook(path).rows}
    assert "it looks like you divided each score by the sum of the scores" in rows["ex1_test"].message, rows["ex1_test"]
    assert "it looks like you stopped at exp(3)" in rows["ex2_test"].message, rows["ex2_test"]
    assert rows["ex3_test"].status == "partial" and rows["ex3_test"].points == 1, rows["ex3_test"]
    assert (
        "instead of the features" in rows["ex3_test"].message and "instead of the positions" in rows["ex3_test"].message
    )


@pytest.mark.slow
def test_the_grader_finds_the_private_checks_too(course, monkeypatch, tmp_path):
    """`course grade` runs the test cells in its own process, wherever it is started: it puts the checks
    folder named in the notebook's metadata on its import path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    path = _with_answers(
        course,
        {
            "ex1_answer": "def softmax(scores):\n    import torch\n    return torch.softmax(torch.tensor(scores), 0)\n",
            "ex2_answer": "p_third = 0.665\n",
            "ex3_answer": "xw_shape = [4, 10, 32]\nscores_shape = (4, 10, 10)\npooled_shape = (4, 16)\n",
        },
        "right.ipynb",
    )
    result = grade_submission(
        course / "solutions" / f"{NAME}.ipynb", path, "ada", limits=Limits(memory_mb=0), sandbox=False
    )
    assert result.status == "graded" and result.score == 8, result


@pytest.mark.slow
def test_course_new_refuses_to_overwrite_and_checks_the_name(course, tmp_path):
    before = (course / "checks" / "lesson93.py").read_bytes()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "course_lib.cli",
            "new",
            NAME,
            "--title",
            "Again",
            "--solutions",
            str(course / "solutions"),
            "--checks",
            str(course / "checks"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "nothing was written" in proc.stdout and "already exist" in proc.stdout, proc.stdout
    assert (course / "checks" / "lesson93.py").read_bytes() == before
    assert (
        cli.main(
            ["new", "93_other", "--title", "X", "--solutions", str(course / "solutions"), "--checks", str(tmp_path)]
        )
        == 2
    )
    assert not (tmp_path / "lesson93.py").exists(), "a second set numbered 93 is refused"
    assert cli.main(["new", "Softmax", "--title", "X", "--solutions", str(tmp_path), "--checks", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


def test_the_build_hands_out_the_checks_module_with_the_notebook(course):
    """A release carries what a student needs for `course check` (tests/test_class.py checks it on a
    student's machine): the sealed module beside the notebook, refreshed when it changes."""
    built = course / "exercises" / "lesson93.py"
    assert built.read_text() == (course / "checks" / "lesson93.py").read_text()
    built.write_text("# an older copy\n")
    assert (
        cli.main(
            ["build", "--check", "--solutions", str(course / "solutions"), "--exercises", str(course / "exercises")]
        )
        == 1
    )
    assert cli.main(["build", "--solutions", str(course / "solutions"), "--exercises", str(course / "exercises")]) == 0
    assert built.read_text() == (course / "checks" / "lesson93.py").read_text()


def test_the_template_says_to_update_the_notebooks_own_labels():
    from course_grader.new import TEMPLATES

    text = (TEMPLATES / "NN_template.ipynb").read_text()
    assert "leave the intro's total to" not in text.lower() and "this notebook keeps what you" in text
