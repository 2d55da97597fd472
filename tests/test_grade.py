"""`course grade`: every kind of submission gets a sane, explained result; none earns points its
answers did not earn; the batch always finishes; submission files are never modified.

The crafted submissions are generated from the lesson 00 solution notebook (see grading_helpers),
graded once by the real command (`python -m course_lib.cli grade`) in a module-scoped fixture,
and each test reads its student's rows from grades.json. Limits are tight so the suite stays fast.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grading_helpers import (
    REPO,
    SOLUTIONS,
    WELCOME,
    by_id,
    copy_nb,
    digest,
    exercise,
    learner,
    load_json,
    solution,
    write,
)

from course_lib.grading.build import build_exercise
from course_lib.grading.grade import SubmissionResult, grade_all, write_results
from course_lib.grading.grade import TestResult as Row
from course_lib.grading.notebook import read_notebook
from course_lib.grading.sandbox import Limits
from course_lib.checks import lesson00

WRONG_RF = "def receptive_field(num_layers, kernel_size):\n    return num_layers * (kernel_size - 1)\n"


def crafted(tmp: Path) -> dict:
    """student_id -> submission content (notebook dict, bytes, or None for "no file")."""
    outside = tmp / "outside"
    outside.mkdir()
    victim = write(outside / "victim.txt", "keep me")
    nb_dup = learner()
    dup = copy_nb(by_id(nb_dup, "ex3_answer"))
    dup["source"] = "def receptive_field(num_layers, kernel_size):\n    return 0\n"
    nb_dup["cells"].insert(nb_dup["cells"].index(by_id(nb_dup, "ex3_answer")) + 1, dup)
    for cell in nb_dup["cells"]:
        cell["id"] = "same-id"
    nb_renamed = learner()
    by_id(nb_renamed, "ex3_answer")["metadata"]["nbgrader"]["grade_id"] = "my_ex3"
    nb_edited = learner({"ex3_answer": "def receptive_field(num_layers, kernel_size):\n    return num_layers * kernel_size\n"})
    for cell in nb_edited["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade"):
            cell["source"] = "print('all tests pass')"
    nb_edited["cells"].remove(by_id(nb_edited, "ex6_test"))
    nb_edited["cells"].append({"cell_type": "code", "id": "extra", "metadata": {}, "outputs": [], "execution_count": None,
                               "source": "import course_lib.checks as c\nc.check_patch_count = lambda *a, **k: None"})
    other_lesson = exercise()
    for cell in other_lesson["cells"]:
        if "nbgrader" in cell["metadata"]:
            cell["metadata"]["nbgrader"]["grade_id"] = "l99_" + cell["metadata"]["nbgrader"]["grade_id"]
    built_elsewhere = learner()
    built_elsewhere["metadata"]["course_lib"]["built_from"] = "solutions/01_one_hot_and_dot_products.ipynb"
    return {
        "full": WELCOME.read_bytes(),  # the teacher's own notebook, hidden tests and all
        "blank": exercise(),
        "mistakes": learner({
            "ex3_answer": WRONG_RF,
            "ex5_answer": "n_patches = 14\nseq_len = 197\n",
            "ex7_answer": "class _Eq(int):\n    def __eq__(self, other):\n        return True\n"
                          "    __hash__ = int.__hash__\nattention_steps_1_20 = attention_steps_1_100 = _Eq(5)\n",
        }),
        "loops": learner({
            "ex3_answer": "while True:\n    pass\n",
            "ex4_answer": "def layers_needed(distance, kernel_size):\n    while True:\n        pass\n",
            "ex5_answer": "n_patches, seq_len = 196, 197\nwhile True:\n    pass\n",  # right, then stuck
            "ex7_answer": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
        }),
        "exits": learner({"ex1_answer": "import sys\nsys.exit(1)\n", "ex6_answer": "import os\nos._exit(0)\n"}),
        "crash": learner({
            "ex2_answer": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "ex7_answer": "import faulthandler\nfaulthandler._sigsegv()\n",
        }),
        "memory": learner({
            "ex3_answer": "big = bytearray(64 * 2**30)\n" + WRONG_RF,
            "ex4_answer": "def _hog():\n    hog = []\n    while True:\n        hog.append(bytearray(50 * 2**20))\n_hog()\n",
            "ex5_answer": "import torch\nt = torch.ones(2**34)\nn_patches, seq_len = 196, 197\n",
        }),
        "output": learner({
            "ex1_answer": "print('x' * 10**7)\n",
            "ex5_answer": "for i in range(10**7):\n    print(i)\n",
        }),
        "edited_tests": nb_edited,
        "patch_answers": learner({
            "ex1_answer": "import numpy as np\ntorch.equal = lambda *a, **k: True\ntorch.allclose = lambda *a, **k: True\n"
                          "np.allclose = lambda *a, **k: True\ndef reproducible_sample(seed):\n    return torch.zeros(5)\n",
            "ex2_answer": "import course_lib.checks as c\nc.check_count = lambda *a, **k: None\n"
                          "rnn_steps_keys_are = rnn_steps_1_20 = rnn_steps_1_100 = 0\n",
            "ex3_answer": "lesson00.check_receptive_field = lambda *a, **k: None\n"
                          "def receptive_field(num_layers, kernel_size):\n    return 0\n",
            "ex4_answer": "lesson00.check_layers_needed.__code__ = (lambda *a, **k: None).__code__\n"
                          "def layers_needed(distance, kernel_size):\n    return 0\n",
            "ex5_answer": "import numpy as np\nnp.testing.assert_allclose = lambda *a, **k: None\n"
                          "import builtins\nbuiltins.isinstance = lambda obj, kind, _real=isinstance: True if kind is int else _real(obj, kind)\n"
                          "n_patches = seq_len = 195.0\n",
            "ex7_answer": "class _Anything:\n    def __getattr__(self, name):\n        return lambda *a, **k: None\n"
                          "checks = _Anything()\nattention_steps_1_20 = attention_steps_1_100 = 99\n",
        }),
        "patch_during_test": learner({
            "ex1_answer": "def reproducible_sample(seed):\n    import numpy, torch\n"
                          "    numpy.allclose = lambda *a, **k: True\n    return torch.full((5,), float(seed))\n",
            # a pre_run_cell callback that forges the grader's "nothing changed" report
            "ex2_answer": "def _forge(info):\n    src = getattr(info, 'raw_cell', '') or ''\n"
                          "    if src.startswith('_course_guard'):\n        print(src.split('=', 1)[1].strip().strip(\"'\") + '[]')\n"
                          "get_ipython().events.register('pre_run_cell', _forge)\n"
                          "import course_lib.checks.lesson00 as c\nc.check_count = lambda *a, **k: None\n"
                          "rnn_steps_keys_are = rnn_steps_1_20 = rnn_steps_1_100 = 0\n",
            "ex3_answer": "def receptive_field(num_layers, kernel_size):\n    import sys\n"
                          "    sys.modules['course_lib.checks.lesson00'].check_count = lambda *a, **k: None\n    return 0\n",
            # a thread that would undo the patch before the grader looks
            "ex4_answer": "def layers_needed(distance, kernel_size):\n    import threading, time, course_lib.checks.lesson00 as c\n"
                          "    real = c.check_count\n    c.check_count = lambda *a, **k: None\n"
                          "    def undo():\n        time.sleep(0.05)\n        c.check_count = real\n"
                          "    threading.Thread(target=undo).start()\n    return 0\n",
            # a post_run_cell callback that undoes the patch right after the test cell
            "ex6_answer": "def patch_count(height, width, patch):\n    import course_lib.checks.lesson00 as c\n"
                          "    real = c.check_count\n    c.check_count = lambda *a, **k: None\n"
                          "    def undo(*args):\n        c.check_count = real\n"
                          "    get_ipython().events.register('post_run_cell', undo)\n    return 0\n",
        }),
        "late_cheats": learner({
            # patch, then have the kernel killed by a timer right after the test, before the grader's check
            "ex3_answer": "def receptive_field(num_layers, kernel_size):\n    import signal, course_lib.checks.lesson00 as c\n"
                          "    c.check_count = lambda *a, **k: None\n    signal.signal(signal.SIGALRM, signal.SIG_DFL)\n"
                          "    signal.setitimer(signal.ITIMER_REAL, 0.2)\n    return 0\n",
            # ask the grader's hook to re-take its snapshot after replacing `checks`
            "ex7_answer": "class _Anything:\n    def __getattr__(self, name):\n        return lambda *a, **k: None\n"
                          "checks = _Anything()\nexec('_forged = \"@@course-guard-forged@@:snapshot\"')\n"
                          "attention_steps_1_20 = attention_steps_1_100 = 99\n",
        }),
        "reads_solutions": learner({
            "ex2_answer": "import course_lib, os\nroot = os.path.dirname(os.path.dirname(course_lib.__file__))\n"
                          "open('/proc/self/root' + root + '/solutions/00_welcome.ipynb').read()\n",
            "ex3_answer": "import course_lib, pathlib\n"
                          "_src = (pathlib.Path(course_lib.__file__).resolve().parents[1] / 'solutions' / '00_welcome.ipynb').read_text()\n"
                          + WRONG_RF,
            "ex4_answer": "import os, course_lib\nos.listdir(os.path.join(os.path.dirname(os.path.dirname(course_lib.__file__)), 'solutions'))\n",
            "ex5_answer": "import os\nopen(f'/proc/{os.getppid()}/cmdline').read()\n",
        }),
        "writes_outside": learner({
            "ex1_answer": f"open({str(outside / 'pwned.txt')!r}, 'w').write('pwned')\n",
            "ex2_answer": f"import os\nos.remove({str(victim)!r})\n",
            "ex6_answer": "open('notes.txt', 'w').write('scratch is fine')\n"
                          "def patch_count(height, width, patch):\n    return (height // patch) * (width // patch)\n",
            "ex7_answer": f"import subprocess\nsubprocess.run(['touch', {str(outside / 'pwned2.txt')!r}])\n",
        }),
        "not_json": b"{ this is not a notebook",
        "empty": b"",
        "no_cells": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        "wrong_lesson": other_lesson,
        "built_elsewhere": built_elsewhere,
        "duplicates": nb_dup,
        "renamed": nb_renamed,
        "missing": None,
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grading")
    subs = tmp / "submissions"
    for student, content in crafted(tmp).items():
        (subs / student).mkdir(parents=True)
        if content is not None:
            write(subs / student / "00_welcome.ipynb", content)
    before = digest(subs)
    out = tmp / "out"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "grade", str(subs), "--solutions", str(SOLUTIONS), "--out", str(out),
         "--assignment", "00_welcome", "--jobs", "2", "--timeout", "6", "--total-timeout", "150", "--memory", "1024",
         "--max-output", "200000"],
        cwd=tmp, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = load_json(out / "grades.json")
    results = {r["student_id"]: r for r in data["results"]}
    return {"tmp": tmp, "subs": subs, "out": out, "before": before, "results": results, "stdout": proc.stdout, "seconds": seconds}


def results_of(graded, student) -> dict[str, dict]:
    return {t["grade_id"]: t for t in graded["results"][student]["tests"]}


def feedback(graded, student) -> str:
    return (graded["out"] / "feedback" / student / "00_welcome.md").read_text()


def test_every_student_has_exactly_one_row_and_a_feedback_file(graded):
    rows = (graded["out"] / "grades.csv").read_text().splitlines()
    assert rows[0].split(",")[:4] == ["student_id", "assignment", "score", "max_score"]
    students = sorted(p.name for p in graded["subs"].iterdir())
    assert [r.split(",")[0] for r in rows[1:]] == students, rows
    for student in students:
        assert (graded["out"] / "feedback" / student / "00_welcome.md").is_file(), student
        assert graded["results"][student]["max_score"] == 16


def test_submission_files_are_never_modified(graded):
    assert digest(graded["subs"]) == graded["before"]


def test_full_marks_for_the_solution_and_zero_for_the_blank_exercise(graded):
    assert graded["results"]["full"]["score"] == 16, graded["results"]["full"]
    assert all(t["status"] == "passed" for t in graded["results"]["full"]["tests"])
    assert graded["results"]["full"]["notes"] == [], "a clean run must not report tampering or restarts"
    blank = graded["results"]["blank"]
    assert blank["score"] == 0 and {t["status"] for t in blank["tests"]} == {"not attempted"}, blank


def test_hidden_tests_run_and_mistakes_are_named_in_feedback(graded):
    t = results_of(graded, "mistakes")
    assert graded["results"]["mistakes"]["score"] == 10
    assert t["ex3_test"]["status"] == "failed" and "+1 for the centre" in t["ex3_test"]["message"]
    assert t["ex5_test"]["status"] == "failed" and "one side only" in t["ex5_test"]["message"]
    assert t["ex7_test"]["status"] == "failed", "an int subclass that claims equality must not pass"
    assert "forgot the +1 for the centre position" in feedback(graded, "mistakes")


def test_infinite_loops_hit_the_cell_time_limit_and_the_rest_is_graded(graded):
    r, t = graded["results"]["loops"], results_of(graded, "loops")
    assert r["score"] == 9, r
    for gid in ("ex3_test", "ex4_test", "ex7_test"):
        assert t[gid]["status"] == "error" and "time limit" in t[gid]["message"], t[gid]
    assert any("stopped" in n for n in r["notes"]), "the SIGINT-ignoring loop needed a kill and a restart"
    assert t["ex5_test"]["status"] == "passed", t["ex5_test"]
    assert any(n.startswith("Exercise 5") and "time limit" in n and "defined before that" in n for n in r["notes"]), (
        f"a passing test after a stuck answer cell should still be explained: {r['notes']}")


def test_sys_exit_and_os_exit_cost_only_their_exercise(graded):
    r, t = graded["results"]["exits"], results_of(graded, "exits")
    assert r["score"] == 11, r
    assert t["ex1_test"]["status"] == "error" and "SystemExit" in t["ex1_test"]["message"]
    assert t["ex6_test"]["status"] == "error" and "kernel stopped" in t["ex6_test"]["message"]


def test_killing_or_crashing_the_kernel_costs_only_that_exercise(graded):
    r, t = graded["results"]["crash"], results_of(graded, "crash")
    assert r["score"] == 13, r
    assert t["ex2_test"]["status"] == "error" and "does not allow os.kill" in t["ex2_test"]["message"]
    assert t["ex7_test"]["status"] == "error" and "kernel stopped" in t["ex7_test"]["message"]


def test_memory_hogs_get_a_memory_error_not_the_machine(graded):
    r, t = graded["results"]["memory"], results_of(graded, "memory")
    assert r["score"] == 8, r
    assert "MemoryError" in t["ex3_test"]["message"] and "MemoryError" in t["ex4_test"]["message"], (t["ex3_test"], t["ex4_test"])
    assert "allocate" in t["ex5_test"]["message"], t["ex5_test"]


def test_floods_of_output_are_cut_off(graded):
    r, t = graded["results"]["output"], results_of(graded, "output")
    assert r["score"] == 12, r
    for gid in ("ex1_test", "ex5_test"):
        assert t[gid]["status"] == "error" and "output limit" in t[gid]["message"], t[gid]
    assert len(json.dumps(r)) < 50_000, "the recorded output must be capped"


def test_edited_or_deleted_test_cells_are_ignored(graded):
    r, t = graded["results"]["edited_tests"], results_of(graded, "edited_tests")
    assert r["score"] == 13, r
    assert t["ex3_test"]["status"] == "failed" and t["ex6_test"]["status"] == "passed"


def test_monkeypatching_in_answer_cells_is_undone_before_the_tests(graded):
    r, t = graded["results"]["patch_answers"], results_of(graded, "patch_answers")
    assert r["score"] == 3, r
    assert t["ex6_test"]["status"] == "passed"
    assert all(t[g]["points"] == 0 for g in ("ex1_test", "ex2_test", "ex3_test", "ex4_test", "ex5_test", "ex7_test")), t
    notes = " ".join(r["notes"])
    for patched in ("torch.equal", "numpy.allclose", "course_lib.checks.check_count", "check_receptive_field",
                    "builtins.isinstance", "'checks'"):
        assert patched in notes, f"{patched} not reported in {notes}"
    assert "does not allow replacing a function's __code__" in t["ex4_test"]["message"], t["ex4_test"]


def test_monkeypatching_while_a_test_runs_earns_nothing(graded):
    r, t = graded["results"]["patch_during_test"], results_of(graded, "patch_during_test")
    assert r["score"] == 3, r
    for gid in ("ex1_test", "ex3_test", "ex6_test"):
        assert t[gid]["status"] == "error" and "changed the checking tools" in t[gid]["message"], t[gid]
    assert "IPython post_run_cell callbacks" in t["ex6_test"]["message"], t["ex6_test"]
    assert t["ex2_test"]["points"] == 0 and t["ex4_test"]["points"] == 0, (t["ex2_test"], t["ex4_test"])
    assert "does not allow starting threads" in t["ex4_test"]["message"], t["ex4_test"]


def test_cheats_on_the_grader_itself_earn_nothing(graded):
    r, t = graded["results"]["late_cheats"], results_of(graded, "late_cheats")
    assert r["score"] == 12, r
    assert t["ex3_test"]["points"] == 0 and t["ex3_test"]["status"] == "error", t["ex3_test"]
    assert t["ex7_test"]["status"] == "failed" and "99 is not right" in t["ex7_test"]["message"], t["ex7_test"]


def test_reading_the_teachers_files_is_refused(graded):
    r, t = graded["results"]["reads_solutions"], results_of(graded, "reads_solutions")
    assert r["score"] == 6, r
    for gid in ("ex2_test", "ex3_test", "ex4_test", "ex5_test"):
        assert t[gid]["points"] == 0 and "does not allow" in t[gid]["message"], t[gid]


def test_writing_outside_the_scratch_folder_is_refused(graded):
    r, t = graded["results"]["writes_outside"], results_of(graded, "writes_outside")
    assert r["score"] == 11, r
    outside = graded["tmp"] / "outside"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"], "nothing may be written or deleted outside"
    assert "does not allow writing" in t["ex1_test"]["message"]
    assert "does not allow subprocess" in t["ex7_test"]["message"]
    assert t["ex6_test"]["status"] == "passed", "writing inside the scratch folder is allowed"


@pytest.mark.parametrize("student, status, words", [
    ("not_json", "unreadable", "not JSON"),
    ("empty", "unreadable", "empty"),
    ("no_cells", "wrong notebook", "none of its answer cells"),
    ("wrong_lesson", "wrong notebook", "none of its answer cells"),
    ("built_elsewhere", "wrong notebook", "01_one_hot_and_dot_products"),
    ("missing", "not submitted", "No 00_welcome.ipynb was submitted"),
])
def test_unusable_submissions_score_zero_with_a_clear_message(graded, student, status, words):
    r = graded["results"][student]
    assert r["score"] == 0 and r["status"] == status, r
    assert words in " ".join(r["notes"]), r["notes"]
    assert words in feedback(graded, student)


def test_duplicated_grade_ids_use_the_first_cell_and_say_so(graded):
    r = graded["results"]["duplicates"]
    assert r["score"] == 16, r
    assert any("share the id" in n and "ex3_answer" in n for n in r["notes"]), r["notes"]


def test_renamed_answer_cells_count_as_not_submitted(graded):
    r, t = graded["results"]["renamed"], results_of(graded, "renamed")
    assert r["score"] == 13 and t["ex3_test"]["status"] == "not submitted", r
    assert any("ex3_answer" in n for n in r["notes"])


def test_the_batch_runs_in_parallel_within_its_time_budget(graded):
    assert graded["seconds"] < 400, f"grading the crafted class took {graded['seconds']:.0f} s"
    for student in graded["results"]:
        assert graded["results"][student]["seconds"] < 150, (student, graded["results"][student]["seconds"])


def test_results_are_replaced_atomically_on_a_rerun(tmp_path):
    out = tmp_path / "out"
    one = SubmissionResult("ann", "00_welcome", 2, 16, "graded", [Row("ex1_test", "Exercise 1", 2, 2, "passed")])
    two = SubmissionResult("bob", "00_welcome", 0, 16, "graded", [Row("ex1_test", "Exercise 1", 0, 2, "failed", "✘ no")])
    write_results([one, two], out, [])
    write_results([two], out, [])
    assert (out / "grades.csv").read_text() == "student_id,assignment,score,max_score,status\nbob,00_welcome,0,16,graded\n"
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["bob"], "stale feedback must go"
    assert sorted(p.name for p in out.iterdir()) == ["feedback", "grades.csv", "grades.json"], "no temporary files left"
    assert "✘ no" in (out / "feedback" / "bob" / "00_welcome.md").read_text()


# --- every exercise set of the course ------------------------------------------------------------------


ALL_SOLUTIONS = sorted(SOLUTIONS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """Each solution notebook submitted as is, and its built blank exercise, graded in one batch."""
    tmp = tmp_path_factory.mktemp("course")
    subs = tmp / "submissions"
    for path in ALL_SOLUTIONS:
        write(subs / "solution" / path.name, path.read_bytes())
        write(subs / "blank" / path.name, build_exercise(read_notebook(path), path.name))
    results = grade_all(subs, SOLUTIONS, tmp / "out", jobs=2, limits=Limits(), progress=lambda line: None)
    return {(r.student_id, r.assignment): r for r in results}


@pytest.mark.parametrize("path", ALL_SOLUTIONS, ids=[p.stem for p in ALL_SOLUTIONS])
def test_solution_scores_full_marks_and_blank_exercise_scores_zero(graded_course, path):
    solved = graded_course[("solution", path.stem)]
    assert solved.max_score > 0, f"{path.name} has no graded test cells"
    wrong = [(t.grade_id, t.status, t.message) for t in solved.tests if t.status != "passed"]
    assert solved.score == solved.max_score and not wrong, f"{path.name}: the solutions lose points: {wrong}"
    assert not solved.notes, f"{path.name}: {solved.notes}"
    blank = graded_course[("blank", path.stem)]
    attempted = [(t.grade_id, t.status, t.message) for t in blank.tests if t.status != "not attempted"]
    assert blank.score == 0 and not attempted, f"{path.name}: the blank exercise is not 'not attempted' everywhere: {attempted}"


def test_grade_explains_a_submissions_folder_without_student_folders(tmp_path, capsys):
    from course_lib import cli

    write(tmp_path / "flat" / "00_welcome.ipynb", exercise())
    assert cli.main(["grade", str(tmp_path / "flat"), "--out", str(tmp_path / "out")]) == 2
    assert "no student folders" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_a_broken_solution_notebook_stops_before_anyone_is_graded(tmp_path, capsys):
    from course_lib import cli

    broken = solution()
    answer = next(c for c in broken["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    del answer["metadata"]["nbgrader"]["grade_id"]
    write(tmp_path / "solutions" / "00_welcome.ipynb", broken)
    write(tmp_path / "subs" / "ada" / "00_welcome.ipynb", exercise())
    assert cli.main(["grade", str(tmp_path / "subs"), "--solutions", str(tmp_path / "solutions"),
                     "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out
    assert "00_welcome.ipynb cannot be used for grading" in out and "without a grade_id" in out, out
    assert not (tmp_path / "out").exists()


def test_student_ids_that_differ_only_in_odd_characters_get_separate_feedback(tmp_path):
    from course_lib.grading.grade import _safe

    assert _safe("ada") == "ada"
    names = {_safe(s) for s in ("a b", "a_b", "a/b", "a\\b")}
    assert len(names) == 4 and all("/" not in n and "\\" not in n and " " not in n for n in names), names
