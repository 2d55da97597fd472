"""`course check`: a learner's self-check of their exercise notebook (visible tests only)."""
from __future__ import annotations

import re
import subprocess
import sys

from grading_helpers import REPO, digest, learner, write

from course_lib.grading.check import check_notebook


def test_course_check_on_the_blank_exercise_says_not_attempted_and_leaves_the_file_alone():
    path = REPO / "exercises" / "00_welcome.ipynb"
    before = digest(path.parent)
    proc = subprocess.run([sys.executable, "-m", "course_lib.cli", "check", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\s*Exercise \d", line)]
    assert len(rows) == 7 and all(line.rstrip().endswith("not attempted") for line in rows), proc.stdout
    assert "Total" in proc.stdout and "0/16" in proc.stdout, proc.stdout
    assert proc.stdout.count("Hint: replace `raise NotImplementedError()`") == 7, "the whole message, hint included"
    assert "Traceback" not in proc.stdout + proc.stderr and "NameError" not in proc.stdout, proc.stdout
    assert digest(path.parent)["00_welcome.ipynb"] == before["00_welcome.ipynb"], "course check modified the notebook"


def test_course_check_reports_passed_failed_with_hint_error_and_not_attempted(tmp_path):
    nb = learner({
        # wrong: names the mistake
        "ex3_answer": "def receptive_field(num_layers, kernel_size):\n    return num_layers * (kernel_size - 1)\n",
        # the answer cell itself crashes
        "ex4_answer": "def layers_needed(distance, kernel_size):\n    return 1\n1 / 0\n",
        # right on the visible cases, wrong on a hidden one (0 layers): course check only runs visible tests
        "ex6_answer": "def patch_count(height, width, patch):\n    return (height // patch) * (width // patch) if height != 30 else 0\n",
    }, blank=("ex7_answer",))
    path = write(tmp_path / "00_welcome.ipynb", nb)
    before = path.read_bytes()
    rows = {r.grade_id: r for r in check_notebook(path)}
    assert path.read_bytes() == before
    assert rows["ex1_test"].status == "passed" and rows["ex2_test"].status == "passed", rows
    assert rows["ex3_test"].status == "failed" and "+1 for the centre" in rows["ex3_test"].message, rows["ex3_test"]
    assert rows["ex4_test"].status == "error" and "ZeroDivisionError" in rows["ex4_test"].message, rows["ex4_test"]
    assert rows["ex6_test"].status == "passed", rows["ex6_test"]
    assert rows["ex7_test"].status == "not attempted" and "not attempted yet" in rows["ex7_test"].message
    assert rows["ex5_test"].status == "passed"
    proc = subprocess.run([sys.executable, "-m", "course_lib.cli", "check", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "Exercise 3: The receptive field of stacked convolutions" in proc.stdout, proc.stdout
    assert "failed" in proc.stdout and "Hint: it looks like you forgot the +1" in proc.stdout, proc.stdout
    assert "9/16" in proc.stdout, proc.stdout


def test_course_check_of_a_complete_notebook_passes(tmp_path):
    path = write(tmp_path / "00_welcome.ipynb", learner())
    rows = check_notebook(path)
    assert [r.status for r in rows] == ["passed"] * 7, rows


def test_course_check_on_something_that_is_not_a_notebook(tmp_path):
    path = write(tmp_path / "00_welcome.ipynb", b"not json")
    proc = subprocess.run([sys.executable, "-m", "course_lib.cli", "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a valid notebook" in proc.stdout, proc.stdout + proc.stderr


def test_course_check_prints_the_whole_not_attempted_message_and_points_syntax_errors_at_the_answer_cell(tmp_path):
    nb = learner({
        # a misspelled name: the hint that names the near miss is on the message's second line
        "ex3_answer": "def recptive_field(num_layers, kernel_size):\n    return 1 + num_layers * (kernel_size - 1)\n",
        "ex4_answer": "def layers_needed(distance, kernel_size):\n    return distance +* 2\n",
    })
    path = write(tmp_path / "00_welcome.ipynb", nb)
    proc = subprocess.run([sys.executable, "-m", "course_lib.cli", "check", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nothing called `receptive_field` is defined yet; `recptive_field` is" in proc.stdout, proc.stdout
    assert "your answer cell stopped with SyntaxError: invalid syntax (your answer cell, line 2)" in proc.stdout, proc.stdout
    assert "ipykernel" not in proc.stdout and "ipython-input" not in proc.stdout, proc.stdout
