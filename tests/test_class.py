"""A simulated class of 60, graded the way the teacher's guide (docs/teaching.md) says, through the
`course` command: a Moodle download unpacked against the roster, a private solutions folder, a
first grading run, a deadline with a late penalty, one student's regrade, changed solutions refused,
a manual adjustment, Canvas and Moodle exports, the class report, and a second assignment handed in
early by one student.

The assignment is small (numpy only) so that 60 submissions grade in well under a minute; what is
tested is everything around the grading engine (tests/test_grade.py tests the engine itself).
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from grading_helpers import IN_CI, sandbox_available, write

from course_grader.build import build_exercise
from course_grader.export import safe_name
from course_lib import cli

QUIZ = "21_class_quiz"
EARLY = "22_second_quiz"


def _cell(kind, text, gid, **nbgrader):
    cell = {"cell_type": kind, "id": gid.replace("_", "-"), "metadata": {"nbgrader": {
        "schema_version": 3, "grade": False, "solution": False, "locked": False, "grade_id": gid, **nbgrader}}, "source": text}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def quiz_solution(hidden_answer: int = 42) -> dict:
    """A teacher's private exercise set: a function, a four-part answer, a value with a hidden test."""
    cells = [
        _cell("markdown", "# Class quiz\n\nOnly the code in answer cells is graded. **Total: 8 points.**", "intro", locked=True),
        _cell("code", "import numpy as np\n\nfrom course_lib import checks\n", "setup", locked=True),
        _cell("markdown", "## Exercise 1: Mean square (★☆☆, 2 points)\n\nWrite `mean_square(xs)`.", "ex1_prompt", locked=True),
        _cell("code", "def mean_square(xs):\n    ### BEGIN SOLUTION\n    return float(np.mean(np.square(xs)))\n"
                      "    ### END SOLUTION\n", "ex1_answer", solution=True),
        _cell("code", 'checks.check_close("mean_square([1, 2, 3])", checks.call("mean_square", mean_square, [1, 2, 3]), 14 / 3,\n'
                      '                   hint="square each number first, then take the mean")\n'
                      "### BEGIN HIDDEN TESTS\n"
                      'checks.check_close("mean_square([-2.0])", checks.call("mean_square", mean_square, [-2.0]), 4.0)\n'
                      "### END HIDDEN TESTS\n", "ex1_test", grade=True, locked=True, points=2),
        _cell("markdown", "## Exercise 2: Four shapes (★★☆, 4 points)\n\nFill in `shapes`.", "ex2_prompt", locked=True),
        _cell("code", "### BEGIN SOLUTION\nshapes = {'q': (2, 5, 8), 'k': (2, 7, 8), 'scores': (2, 5, 7), 'out': (2, 5, 8)}\n"
                      "### END SOLUTION\n", "ex2_answer", solution=True),
        _cell("code", "expected = {'q': (2, 5, 8), 'k': (2, 7, 8), 'scores': (2, 5, 7), 'out': (2, 5, 8)}\n"
                      "given = checks.answer('shapes')\n"
                      "checks.check_all(*(lambda k=k: checks.check_equal(f'shapes[{k!r}]', tuple(given.get(k, ())), expected[k],\n"
                      "                                                   hint='scores are (B, T_q, T_k)') for k in expected))\n",
              "ex2_test", grade=True, locked=True, points=4),
        _cell("markdown", "## Exercise 3: The answer (★☆☆, 2 points)", "ex3_prompt", locked=True),
        _cell("code", f"### BEGIN SOLUTION\nanswer = {hidden_answer}\n### END SOLUTION\n", "ex3_answer", solution=True),
        _cell("code", "checks.check_true('answer', isinstance(checks.answer('answer'), int), 'should be a whole number')\n"
                      "### BEGIN HIDDEN TESTS\n"
                      f"assert checks.answer('answer') == {hidden_answer}, 'not the answer'\n"
                      "### END HIDDEN TESTS\n", "ex3_test", grade=True, locked=True, points=2),
    ]
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def submission(answers: dict[str, str] | None = None, extra_cell: str | None = None, name: str = QUIZ) -> dict:
    """The built exercise with the solution's answers, except `answers` (grade_id -> source)."""
    sol = quiz_solution()
    nb = build_exercise(sol, f"{name}.ipynb")
    right = {c["metadata"]["nbgrader"]["grade_id"]: "".join(line for line in c["source"].splitlines(keepends=True)
                                                          if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
             for c in sol["cells"] if c["metadata"]["nbgrader"].get("solution")}
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in right:
            cell["source"] = (answers or {}).get(gid, right[gid])
    if extra_cell:
        nb["cells"].insert(3, {"cell_type": "code", "id": "added", "metadata": {}, "outputs": [], "execution_count": None,
                               "source": extra_cell})
    return nb


WRONG_MEAN = {"ex1_answer": "def mean_square(xs):\n    return float(np.mean(xs)) ** 2\n"}
ONE_SHAPE_WRONG = {"ex2_answer": "shapes = {'q': (2, 5, 8), 'k': (2, 7, 8), 'scores': (2, 7, 5), 'out': (2, 5, 8)}\n"}
SYNTAX = {"ex1_answer": "def mean_square(xs)\n    return 0\n"}
ANOTHER_WAY = {"ex1_answer": "def mean_square(xs):\n    return sum(x * x for x in xs) / len(xs)\n",
               "ex2_answer": "import numpy\nshapes = dict(q=[2, 5, 8], k=numpy.array([2, 7, 8]), scores=(2, 5, 7), out=(2, 5, 8))\n"}
HELPER = {"ex1_answer": "def mean_square(xs):\n    return my_mean(np.square(xs))\n"}

# What the class hands in: (kind, how many students).
KINDS = [("right", 26), ("another_way", 4), ("wrong_mean", 8), ("one_shape", 8), ("blank", 3), ("syntax", 2), ("helper", 2),
         ("renamed", 1), ("nested", 1), ("absent", 4), ("late_1", 1)]


def class_list() -> list[tuple[str, str, str]]:
    people, n = [], 0
    for kind, count in KINDS:
        for _ in range(count):
            people.append((f"s{n:02d}", f"Student {n:02d}", kind))
            n += 1
    people[0] = ("zoë", "Zoë Müller", "right")  # non-ASCII ids and names survive every export
    people[1] = ("lilei", "李雷", "right")
    assert len(people) == 60
    return people


ANSWERS = {"right": {}, "another_way": ANOTHER_WAY, "wrong_mean": WRONG_MEAN, "one_shape": ONE_SHAPE_WRONG, "syntax": SYNTAX,
           "renamed": {}, "nested": {}, "late_1": {}}


def expected_score(kind: str) -> float:
    return {"right": 8, "another_way": 8, "wrong_mean": 6, "one_shape": 7, "blank": 0, "syntax": 6, "helper": 6,
            "renamed": 8, "nested": 8, "absent": 0, "late_1": 8}[kind]


def run(capsys, *argv) -> tuple[int, str]:
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def read_csv(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf"), f"{path.name} must start with a byte-order mark for Excel"
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """The teacher's folder after unpacking the Moodle download and the first grading run."""
    tmp = tmp_path_factory.mktemp("class")
    private = tmp / "private-solutions"
    write(private / f"{QUIZ}.ipynb", quiz_solution())
    write(private / f"{EARLY}.ipynb", quiz_solution())
    people = class_list()
    roster = tmp / "roster.csv"
    roster.write_text("student_id,name,email\n" + "".join(f"{sid},{name},{sid}@uni.example\n" for sid, name, _ in people),
                      encoding="utf-8")
    # Moodle's "download all submissions": a folder per participant, the upload time as the entry's time.
    with zipfile.ZipFile(tmp / "moodle.zip", "w") as z:
        for i, (sid, name, kind) in enumerate(people):
            if kind == "absent":
                continue
            if kind == "blank":
                nb = build_exercise(quiz_solution(), f"{QUIZ}.ipynb")
            elif kind == "helper":
                nb = submission(HELPER, extra_cell="def my_mean(a):\n    return float(np.mean(a))\n")
            else:
                nb = submission(ANSWERS[kind])
            when = (2026, 11, 21, 9, 30, 0) if kind == "late_1" else (2026, 11, 20, 11, i % 60, 0)
            info = zipfile.ZipInfo(f"{name}_{1000 + i}_assignsubmission_file_/{QUIZ}.ipynb", date_time=when)
            z.writestr(info, json.dumps(nb))
    subs = tmp / "submissions"
    code, text = run_capsys(["unpack", tmp / "moodle.zip", "--assignment", QUIZ, "--to", subs, "--roster", roster, "--tz", "UTC"])
    assert code == 0, text
    # What hand-collected work adds: a renamed file, a nested one, macOS's folder, a visitor.
    by_kind = {kind: sid for sid, _, kind in people}
    renamed, nested = by_kind["renamed"], by_kind["nested"]
    (subs / renamed / f"{QUIZ}.ipynb").rename(subs / renamed / f"{QUIZ} (1).ipynb")
    (subs / nested / "work").mkdir()
    (subs / nested / f"{QUIZ}.ipynb").rename(subs / nested / "work" / f"{QUIZ}.ipynb")
    write(subs / "__MACOSX" / renamed / f"._{QUIZ}.ipynb", b"\0\5\26\7")
    write(subs / "visitor" / f"{QUIZ}.ipynb", submission())
    out = tmp / "grades"
    sandbox = [] if sandbox_available()[0] else ["--no-sandbox"]
    if sandbox and IN_CI:
        pytest.fail("CI grades in the sandbox: install bubblewrap")
    code, text = run_capsys(["grade", subs, "--solutions", private, "--roster", roster, "--assignment", QUIZ,
                             "--out", out, "--jobs", "2", *sandbox])
    assert code == 0, text
    return {"tmp": tmp, "subs": subs, "out": out, "private": private, "roster": roster, "people": people,
            "sandbox": sandbox, "grade_log": text, "by_kind": by_kind}


def run_capsys(argv) -> tuple[int, str]:
    """cli.main with its printing captured (a module fixture cannot use capsys)."""
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = cli.main([str(a) for a in argv])
    return code, buf.getvalue()


def rows_of(out: Path) -> dict[str, dict]:
    return {(r["student_id"], r["assignment"]): r for r in read_csv(out / "grades.csv")}


# --- the first run -----------------------------------------------------------------------------------


def test_every_student_on_the_roster_has_one_row_with_the_expected_score(classroom):
    rows = rows_of(classroom["out"])
    assert len(rows) == 60, f"{len(rows)} rows: one per roster student, absent ones included"
    wrong = [(sid, kind, rows[(sid, QUIZ)]["score"]) for sid, _, kind in classroom["people"]
             if float(rows[(sid, QUIZ)]["score"]) != expected_score(kind)]
    assert not wrong, wrong
    absent = [r for (sid, _), r in rows.items() if r["status"] == "not submitted"]
    assert len(absent) == 4
    assert rows[("zoë", QUIZ)]["name"] == "Zoë Müller" and rows[("lilei", QUIZ)]["name"] == "李雷"


def test_every_decision_about_a_file_is_a_recorded_warning(classroom):
    data = json.loads((classroom["out"] / "grades.json").read_text())
    warnings = " | ".join(data["warnings"])
    assert "__MACOSX: a hidden folder or macOS metadata" in warnings or "__MACOSX: not on the roster" in warnings, warnings
    assert "visitor: not on the roster; not graded" in warnings
    results = {r["student_id"]: r for r in data["results"]}
    renamed, nested = classroom["by_kind"]["renamed"], classroom["by_kind"]["nested"]
    assert any(f"Graded `{QUIZ} (1).ipynb`" in n for n in results[renamed]["notes"]), results[renamed]["notes"]
    assert any(f"Graded `work/{QUIZ}.ipynb`" in n and "subfolder" in n for n in results[nested]["notes"])
    assert "solutions: " in classroom["grade_log"] and "sha256" in classroom["grade_log"]
    assert all(r["solutions_path"].endswith(f"private-solutions/{QUIZ}.ipynb") for r in results.values())


def test_partial_credit_and_every_wrong_part_reach_the_feedback(classroom):
    sid = classroom["by_kind"]["one_shape"]
    text = (classroom["out"] / "feedback" / safe_name(sid) / f"{QUIZ}.md").read_text()
    assert "| Exercise 2: Four shapes | 3 / 4 | partial |" in text, text
    assert "shapes['scores']" in text and "ex2_test" not in text


def test_a_helper_in_an_added_cell_is_explained_in_the_feedback(classroom):
    sid = classroom["by_kind"]["helper"]
    text = (classroom["out"] / "feedback" / safe_name(sid) / f"{QUIZ}.md").read_text()
    assert "code cell(s) you added were not run" in text and "`my_mean` is defined in a cell you added" in text, text


def test_the_feedback_index_maps_every_folder_back_to_its_student(classroom):
    index = read_csv(classroom["out"] / "feedback" / "index.csv")
    assert len(index) == 60
    for r in index:
        assert (classroom["out"] / "feedback" / r["folder"] / f"{QUIZ}.md").is_file(), r


# --- a week of teaching ------------------------------------------------------------------------------


def test_deadline_regrade_adjustment_exports_and_report(classroom, capsys):
    out, subs, private = classroom["out"], classroom["subs"], classroom["private"]
    late = classroom["by_kind"]["late_1"]
    # The deadline: late_1 handed in 21 h 30 after it: one started day, 10 %.
    code, text = run(capsys, "deadline", QUIZ, "2026-11-20T12:00+00:00", "--penalty", "10", "--max", "50", "--out", out)
    assert code == 0 and f"{QUIZ}: due 2026-11-20T12:00:00+00:00" in text, text
    rows = rows_of(out)
    assert (rows[(late, QUIZ)]["late_penalty"], rows[(late, QUIZ)]["final"]) == ("0.8", "7.2"), rows[(late, QUIZ)]
    on_time = classroom["by_kind"]["right"]
    assert rows[(on_time, QUIZ)]["late_penalty"] == "0"
    before = {p.name: (p / f"{QUIZ}.md").read_text() for p in (out / "feedback").iterdir() if p.is_dir()}

    # One student fixes exercise 1 and hands in again: regrade only them.
    fixer = classroom["by_kind"]["wrong_mean"]
    write(subs / fixer / f"{QUIZ}.ipynb", submission())
    code, text = run(capsys, "grade", subs, "--solutions", private, "--student", fixer, "--assignment", QUIZ, "--out", out,
                     *classroom["sandbox"])
    assert code == 0, text
    after_rows = rows_of(out)
    assert len(after_rows) == 60, "a regrade of one student keeps the class"
    assert (after_rows[(fixer, QUIZ)]["score"], after_rows[(fixer, QUIZ)]["attempt"]) == ("8", "2")
    changed = [k for k in rows if rows[k] != after_rows[k]]
    assert changed == [(fixer, QUIZ)], changed
    after = {p.name: (p / f"{QUIZ}.md").read_text() for p in (out / "feedback").iterdir() if p.is_dir()}
    assert [k for k in before if before[k] != after[k]] == [safe_name(fixer)]

    # Grading again with other solutions (a forgotten --solutions, or a changed hidden test) is refused.
    changed_solutions = classroom["tmp"] / "changed"
    write(changed_solutions / f"{QUIZ}.ipynb", quiz_solution(hidden_answer=43))
    code, text = run(capsys, "grade", subs, "--solutions", changed_solutions, "--student", fixer, "--assignment", QUIZ,
                     "--out", out, *classroom["sandbox"])
    assert code == 2 and "was graded before with" in text and "--new-solutions" in text, text
    assert rows_of(out) == after_rows, "a refused run changes nothing"

    # A manual adjustment, with its reason, in every export.
    helper = classroom["by_kind"]["helper"]
    code, text = run(capsys, "adjust", helper, QUIZ, "2", "--reason", "helper in an added cell: accepted this once", "--out", out)
    assert code == 0 and "adjustment 1" in text, text
    assert rows_of(out)[(helper, QUIZ)]["final"] == "8"
    assert "+2: helper in an added cell: accepted this once" in (out / "feedback" / safe_name(helper) / f"{QUIZ}.md").read_text()
    code, text = run(capsys, "adjust", "nobody", QUIZ, "1", "--reason", "x", "--out", out)
    assert code == 2 and "no grade of" in text, text

    # The LMS files: one column per assignment, UTF-8 with a BOM, every roster student.
    code, text = run(capsys, "export", "--lms", "canvas", "--lms", "moodle", "--out", out)
    assert code == 0, text
    canvas = read_csv(out / "canvas.csv")
    assert list(canvas[0])[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and list(canvas[0])[5:] == [QUIZ]
    assert len(canvas) == 61 and canvas[0]["Student"].strip() == "Points Possible" and canvas[0][QUIZ] == "8"
    assert {r["Student"]: r[QUIZ] for r in canvas[1:]}["Zoë Müller"] == "8"
    moodle = {r["Username"]: r for r in read_csv(out / "moodle.csv")}
    assert len(moodle) == 60 and moodle[late][QUIZ] == "7.2" and moodle[helper][QUIZ] == "8"
    assert moodle["lilei"]["Full name"] == "李雷" and moodle["lilei"]["Email address"] == "lilei@uni.example"

    # The report: what to teach again.
    code, text = run(capsys, "report", "--out", out)
    assert code == 0, text
    assert "56 submission(s) graded, 4 not submitted." in text, text
    # Of 56 submitted: 8 got three shapes of four, 3 left it blank, the other 45 passed.
    assert "| Exercise 2: Four shapes | 45 (80%) | 8 | 0 | 3 | 0 | 3.64 / 4 |" in text, text
    assert "scores are (B, T_q, T_k)" in text, "the most common hint is listed"
    assert (out / f"report-{QUIZ}.png").read_bytes()[:4] == b"\x89PNG"


def test_a_second_assignment_handed_in_early_adds_rows_only_for_who_handed_it_in(classroom, capsys):
    out, subs = classroom["tmp"] / "grades-early", classroom["tmp"] / "subs-early"
    shutil.copytree(classroom["subs"], subs, symlinks=True)
    write(subs / "zoë" / f"{EARLY}.ipynb", submission(name=EARLY))
    code, text = run(capsys, "grade", subs, "--solutions", classroom["private"], "--roster", classroom["roster"],
                     "--student", "zoë", "--student", "lilei", "--out", out, *classroom["sandbox"])
    assert code == 0, text
    rows = rows_of(out)
    assert sorted(rows) == [("lilei", QUIZ), ("zoë", QUIZ), ("zoë", EARLY)], sorted(rows)
