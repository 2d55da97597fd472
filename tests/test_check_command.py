"""`course check`: a learner's self-check of their exercise notebook (visible tests only)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from grading_helpers import REPO, digest, learner, write

from course_lib.runner.check import check_notebook

pytestmark = pytest.mark.slow  # every test here starts a kernel


def test_course_check_on_the_blank_exercise_says_not_attempted_and_leaves_the_file_alone():
    path = REPO / "exercises" / "00_welcome_exercises.ipynb"
    before = digest(path.parent)
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "check", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\s*Exercise \d", line)]
    assert len(rows) == 7 and all(line.rstrip().endswith("not attempted") for line in rows), proc.stdout
    assert "Total" in proc.stdout and "0/16" in proc.stdout, proc.stdout
    assert proc.stdout.count("Hint: replace `raise NotImplementedError()`") == 7, "the whole message, hint included"
    assert "Traceback" not in proc.stdout + proc.stderr and "NameError" not in proc.stdout, proc.stdout
    assert digest(path.parent)[path.name] == before[path.name], "course check modified the notebook"


def test_course_check_reports_passed_failed_with_hint_error_and_not_attempted(tmp_path):
    nb = learner(
        {
            # wrong: names the mistake
            "ex3_answer": "def receptive_field(num_layers, kernel_size):\n    return num_layers * (kernel_size - 1)\n",
            # the answer cell itself crashes
            "ex4_answer": "def layers_needed(distance, kernel_size):\n    return 1\n1 / 0\n",
            # right on the visible cases, wrong on a hidden one (0 layers): course check only runs visible tests
            "ex6_answer": (
                "def patch_count(height, width, patch):\n    return (height "
                "// patch) * (width // patch) if height != 30 else 0\n"
            ),
        },
        blank=("ex7_answer",),
    )
    path = write(tmp_path / "00_welcome.ipynb", nb)
    before = path.read_bytes()
    rows = {r.grade_id: r for r in check_notebook(path).rows}
    assert path.read_bytes() == before
    assert rows["ex1_test"].status == "passed" and rows["ex2_test"].status == "passed", rows
    assert rows["ex3_test"].status == "failed" and "+1 for the centre" in rows["ex3_test"].message, rows["ex3_test"]
    assert rows["ex4_test"].status == "error" and "ZeroDivisionError" in rows["ex4_test"].message, rows["ex4_test"]
    assert rows["ex6_test"].status == "passed", rows["ex6_test"]
    assert rows["ex7_test"].status == "not attempted" and "not attempted yet" in rows["ex7_test"].message
    assert rows["ex5_test"].status == "passed"
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "check", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "Exercise 3: The receptive field of stacked convolutions" in proc.stdout, proc.stdout
    assert "failed" in proc.stdout and "Hint: it looks like you forgot the +1" in proc.stdout, proc.stdout
    assert "9/16" in proc.stdout, proc.stdout


def test_course_check_of_a_complete_notebook_passes(tmp_path):
    path = write(tmp_path / "00_welcome.ipynb", learner())
    rows = check_notebook(path).rows
    assert [r.status for r in rows] == ["passed"] * 7, rows


def test_course_check_on_something_that_is_not_a_notebook(tmp_path):
    path = write(tmp_path / "00_welcome.ipynb", b"not json")
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "check", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "not a valid notebook" in proc.stdout, proc.stdout + proc.stderr


def test_course_check_prints_the_whole_not_attempted_message_and_points_syntax_errors_at_the_answer_cell(tmp_path):
    nb = learner(
        {
            # a misspelled name: the hint that names the near miss is on the message's second line
            "ex3_answer": (
                "def recptive_field(num_layers, kernel_size):\n    return 1 + num_layers * (kernel_size - 1)\n"
            ),
            "ex4_answer": "def layers_needed(distance, kernel_size):\n    return distance +* 2\n",
        }
    )
    path = write(tmp_path / "00_welcome.ipynb", nb)
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "check", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nothing called `receptive_field` is defined yet; `recptive_field` is" in proc.stdout, proc.stdout
    assert "your answer cell stopped with SyntaxError: invalid syntax (your answer cell, line 2)" in proc.stdout, (
        proc.stdout
    )
    assert "ipykernel" not in proc.stdout and "ipython-input" not in proc.stdout, proc.stdout


# --- course check runs what the grader runs --------------------------------------------------------


def _added(text: str, cid: str) -> dict:
    """A code cell a learner added (JupyterLab's "+"): no nbgrader metadata."""
    return {"cell_type": "code", "id": cid, "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def _insert_after(nb: dict, gid: str, *cells: dict) -> int:
    """Insert `cells` after the cell with grade_id `gid`; the 1-based position of the first one."""
    at = next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == gid) + 1
    nb["cells"][at:at] = list(cells)
    return at + 1


def _run_check(path):
    return subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "check", str(path)],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_helper_in_an_added_cell_is_not_run_and_the_name_error_says_where_it_is(tmp_path):
    """The issue's student: a helper `my_scale` in a cell of their own passed in JupyterLab and in the old
    `course check` (every cell ran) but failed in grading with a bare NameError."""
    nb = learner(
        {"ex3_answer": "def receptive_field(num_layers, kernel_size):\n    return my_scale(num_layers, kernel_size)\n"}
    )
    position = _insert_after(
        nb,
        "ex3_answer",
        _added(
            "# my helper\ndef my_scale(num_layers, kernel_size):\n    return 1 + num_layers * (kernel_size - 1)\n",
            "mine-1",
        ),
        _added("  \n", "mine-empty"),
    )
    nb["cells"].append({"cell_type": "markdown", "id": "mine-notes", "metadata": {}, "source": "my notes"})
    path = write(tmp_path / "00_welcome.ipynb", nb)
    proc = _run_check(path)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert re.search(r"Exercise 3: The receptive field of stacked convolutions\s+0/3\s+failed", out), out
    assert "NameError: name 'my_scale' is not defined" in out, out
    assert (
        f"`my_scale` is defined in a cell you added (cell {position}: `# my helper`), which neither `course check` "
        "nor the grader runs: only answer cells are graded. Move it into the answer cell that uses it."
    ) in out, out
    listed = out.split("Not run (the grader does not run these cells either):", 1)
    assert len(listed) == 2, out
    assert (
        f"cell {position}, below Exercise 3: The receptive field of stacked convolutions: # my helper" in listed[1]
    ), out
    assert "added cell: not graded; move helpers into the answer cell that uses them" in listed[1], out
    assert listed[1].count("\n  cell ") == 1, "an empty added cell (and a markdown cell) is not listed"
    assert re.search(r"Total\s+13/16\s+\(visible tests only: your teacher's hidden tests may lower it\)", out), out


def test_the_total_line_says_hidden_tests_may_lower_it_and_nothing_is_listed_when_nothing_was_skipped(tmp_path):
    proc = _run_check(write(tmp_path / "00_welcome.ipynb", learner()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(
        r"Total\s+16/16\s+\(visible tests only: your teacher's hidden tests may lower it\)", proc.stdout
    ), proc.stdout
    assert "Not run" not in proc.stdout, proc.stdout


def test_a_partly_right_multi_part_answer_earns_its_points_part_by_part(tmp_path):
    nb = learner(
        {
            "ex5_answer": "n_patches = 196\nseq_len = 196\n",  # one of two parts right: 1 of 2 points
            "ex2_answer": "rnn_steps_keys_are = 17\nrnn_steps_1_20 = 20\nrnn_steps_1_100 = 100\n",  # one of three right
        }
    )
    path = write(tmp_path / "00_welcome.ipynb", nb)
    rows = {r.grade_id: r for r in check_notebook(path).rows}
    assert rows["ex5_test"].status == "partial" and rows["ex5_test"].points == 1, rows["ex5_test"]
    assert rows["ex2_test"].status == "partial" and rows["ex2_test"].points == 0.67, rows["ex2_test"]
    proc = _run_check(path)
    assert re.search(r"Exercise 5: An image as a sequence of patches\s+1/2\s+partial", proc.stdout), proc.stdout
    assert re.search(r"0\.67/2\s+partial", proc.stdout), proc.stdout
    assert "rnn_steps_1_20" in proc.stdout and "rnn_steps_1_100" in proc.stdout, "every wrong part is reported"
    assert re.search(r"Total\s+13\.67/16", proc.stdout), proc.stdout


def test_a_copied_answer_cell_is_not_run_like_the_grader_which_takes_the_first(tmp_path):
    nb = learner()
    answer = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex7_answer")
    copy = {**answer, "id": "copied", "metadata": {**answer["metadata"]}, "source": "raise RuntimeError('boom')\n"}
    position = _insert_after(nb, "ex7_answer", copy)
    path = write(tmp_path / "00_welcome.ipynb", nb)
    proc = _run_check(path)
    assert proc.returncode == 0, proc.stdout
    assert f"cell {position}" in proc.stdout and "same grade_id 'ex7_answer'" in proc.stdout, proc.stdout
