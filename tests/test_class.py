"""A term with a simulated class of 60, played the way the teacher's guide (docs/teaching.md) says,
through the `course` command, from the LMSs' own files:

- the roster is Canvas's gradebook export as Canvas writes it (byte-order mark, the `Points Possible`
  row, "Last, First" names with accents, Canvas's "Student, Test", a student who drops the course),
  kept in the gradebook by `course roster import`; the submissions are Canvas's "Download
  Submissions" zip (flat names, a late flag, a resubmission, `X.ipynb` next to a newer
  `X_final.ipynb`, a 30 MB notebook full of figures, a truncated upload), unpacked without
  `--roster` (the gradebook's is used);
- a first grading run; a manually graded question marked by two graders; a broken hidden test
  previewed with `--dry-run`, regraded with a reason, and fixed again (the warning about mixed
  versions comes and goes with the state of the gradebook, and every overwritten score stays in
  the history); adjustments with the grader's name; the Monday-morning report; Canvas's file;
- a smaller class on Moodle (its grade export as the roster, its zip, a deadline and late work);
- a teacher's own exercise set checked as a student would, on a machine without the teacher's files.

The assignment is small (numpy only), the cell time limit short, and most students share identical
files, so that the class grades in well under a minute; what is tested is everything around the
grading engine (tests/test_grade.py tests the engine itself).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
import zipfile
from contextlib import closing
from pathlib import Path

import pytest
from grading_helpers import IN_CI, sandbox_available, write

from course_grader.build import build_exercise
from course_grader.export import safe_name
from course_grader.gradebook import open_gradebook
from course_grader.marking import save_mark
from course_lib import cli

pytestmark = pytest.mark.slow

QUIZ = "21_class_quiz"
EARLY = "22_second_quiz"
RUBRIC = [
    {"points": 2, "text": "no cancelling: squares are never negative"},
    {"points": 1, "text": "only 'it is positive'"},
    {"points": 0, "text": "no reason given"},
]
WRITTEN = "Squares are never negative, so a +3 and a -3 cannot cancel out: the mean square measures size."


def _cell(kind, text, gid, **nbgrader):
    cell = {
        "cell_type": kind,
        "id": gid.replace("_", "-"),
        "metadata": {
            "nbgrader": {
                "schema_version": 3,
                "grade": False,
                "solution": False,
                "locked": False,
                "grade_id": gid,
                **nbgrader,
            }
        },
        "source": text,
    }
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def quiz_solution(hidden_answer: int = 42) -> dict:
    """A teacher's private exercise set: a function, a four-part answer, a value with a hidden test, and a
    written answer that a person marks."""
    written = _cell("markdown", WRITTEN, "ex4_answer", solution=True, grade=True, points=2)
    written["metadata"]["course"] = {"rubric": RUBRIC}
    cells = [
        _cell(
            "markdown",
            "# Class quiz\n\nOnly the code in answer cells is graded. **Total: 10 points.**",
            "intro",
            locked=True,
        ),
        _cell("code", "import numpy as np\n\nfrom course_lib import checks\n", "setup", locked=True),
        _cell(
            "markdown",
            "## Exercise 1: Mean square (★☆☆, 2 points)\n\nWrite `mean_square(xs)`.",
            "ex1_prompt",
            locked=True,
        ),
        _cell(
            "code",
            "def mean_square(xs):\n    ### BEGIN SOLUTION\n    return float(np.mean(np.square(xs)))\n"
            "    ### END SOLUTION\n",
            "ex1_answer",
            solution=True,
        ),
        _cell(
            "code",
            'checks.check_close("mean_square([1, 2, 3])", checks.call("mean_square", mean_square, [1, 2, 3]), 14 / 3,\n'
            '                   hint="square each number first, then take the mean")\n'
            "### BEGIN HIDDEN TESTS\n"
            'checks.check_close("mean_square([-2.0])", checks.call("mean_square", mean_square, [-2.0]), 4.0)\n'
            "### END HIDDEN TESTS\n",
            "ex1_test",
            grade=True,
            locked=True,
            points=2,
        ),
        _cell("markdown", "## Exercise 2: Four shapes (★★☆, 4 points)\n\nFill in `shapes`.", "ex2_prompt", locked=True),
        _cell(
            "code",
            "### BEGIN SOLUTION\nshapes = {'q': (2, 5, 8), 'k': (2, 7, 8), 'scores': (2, 5, 7), 'out': (2, 5, 8)}\n"
            "### END SOLUTION\n",
            "ex2_answer",
            solution=True,
        ),
        _cell(
            "code",
            "expected = {'q': (2, 5, 8), 'k': (2, 7, 8), 'scores': (2, 5, 7), 'out': (2, 5, 8)}\n"
            "given = checks.answer('shapes')\n"
            "checks.check_all(*(lambda k=k: checks.check_equal(f'shapes[{k!r}]', "
            "tuple(given.get(k, ())), expected[k],\n"
            "                                                   hint='scores are (B, T_q, T_k)') for k in expected))\n",
            "ex2_test",
            grade=True,
            locked=True,
            points=4,
        ),
        _cell("markdown", "## Exercise 3: The answer (★☆☆, 2 points)", "ex3_prompt", locked=True),
        _cell("code", "### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION\n", "ex3_answer", solution=True),
        _cell(
            "code",
            "checks.check_true('answer', isinstance(checks.answer('answer'), int), 'should be a whole number')\n"
            "### BEGIN HIDDEN TESTS\n"
            f"assert checks.answer('answer') == {hidden_answer}, "
            f"'not the answer: answer == {hidden_answer} failed'\n"
            "### END HIDDEN TESTS\n",
            "ex3_test",
            grade=True,
            locked=True,
            points=2,
        ),
        _cell(
            "markdown",
            "## Exercise 4: Why square? (★☆☆, 2 points)\n\nIn a sentence or two: why does `mean_square` "
            "square the numbers before averaging them?",
            "ex4_prompt",
            locked=True,
        ),
        written,
    ]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def submission(answers: dict[str, str] | None = None, extra_cell: str | None = None, name: str = QUIZ) -> dict:
    """The built exercise with the solution's answers, except `answers` (grade_id -> source)."""
    sol = quiz_solution()
    nb = build_exercise(sol, f"{name}.ipynb", for_class=True)
    right = {
        c["metadata"]["nbgrader"]["grade_id"]: "".join(
            line
            for line in c["source"].splitlines(keepends=True)
            if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
        )
        for c in sol["cells"]
        if c["metadata"]["nbgrader"].get("solution")
    }
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in right:
            cell["source"] = (answers or {}).get(gid, right[gid])
    if extra_cell:
        nb["cells"].insert(
            3,
            {
                "cell_type": "code",
                "id": "added",
                "metadata": {},
                "outputs": [],
                "execution_count": None,
                "source": extra_cell,
            },
        )
    return nb


def with_figures(nb: dict, mb: int = 30) -> dict:
    """A notebook carrying `mb` MB of figure outputs (what a student's saved plots weigh)."""
    png = "iVBORw0KGgo" + "A" * (mb * 2**20)
    nb["cells"][1]["outputs"] = [{"output_type": "display_data", "data": {"image/png": png}, "metadata": {}}]
    return nb


WRONG_MEAN = {"ex1_answer": "def mean_square(xs):\n    return float(np.mean(xs)) ** 2\n"}
ONE_SHAPE_WRONG = {"ex2_answer": "shapes = {'q': (2, 5, 8), 'k': (2, 7, 8), 'scores': (2, 7, 5), 'out': (2, 5, 8)}\n"}
SYNTAX = {"ex1_answer": "def mean_square(xs)\n    return 0\n"}
ANOTHER_WAY = {
    "ex1_answer": "def mean_square(xs):\n    return sum(x * x for x in xs) / len(xs)\n",
    "ex2_answer": (
        "import numpy\nshapes = dict(q=[2, 5, 8], k=numpy.array([2, 7, 8]), scores=(2, 5, 7), out=(2, 5, 8))\n"
    ),
}
HELPER = {"ex1_answer": "def mean_square(xs):\n    return my_mean(np.square(xs))\n"}

# What the class hands in: (kind, how many students).
KINDS = [
    ("right", 24),
    ("another_way", 4),
    ("wrong_mean", 8),
    ("one_shape", 8),
    ("blank", 3),
    ("syntax", 2),
    ("helper", 2),
    ("renamed", 1),
    ("nested", 1),
    ("absent", 3),
    ("late", 1),
    ("final", 1),
    ("big", 1),
    ("truncated", 1),
]
ANSWERS = {
    "right": {},
    "another_way": ANOTHER_WAY,
    "wrong_mean": WRONG_MEAN,
    "one_shape": ONE_SHAPE_WRONG,
    "syntax": SYNTAX,
    "renamed": {},
    "nested": {},
    "late": {},
    "final": {},
    "big": {},
    "test": {},
    "dropped": {},
}


def expected_score(kind: str) -> float:
    """The tests' points (the written answer waits for a person)."""
    return {
        "right": 8,
        "another_way": 8,
        "wrong_mean": 6,
        "one_shape": 7,
        "blank": 0,
        "syntax": 6,
        "helper": 6,
        "renamed": 8,
        "nested": 8,
        "absent": 0,
        "late": 8,
        "final": 8,
        "big": 8,
        "truncated": 0,
        "test": 8,
    }[kind]


def class_list() -> list[dict]:
    """60 active students, then Canvas's test student and one who drops the course."""
    people, n = [], 0
    for kind, count in KINDS:
        for _ in range(count):
            people.append(
                {
                    "id": f"S1{n:03d}",
                    "canvas": 48100 + n,
                    "last": f"Lastname{n:02d}",
                    "first": "Sam",
                    "email": f"s{n:02d}@uni.example",
                    "kind": kind,
                }
            )
            n += 1
    people[0].update(last="Müller", first="Zoë", email="zoe.muller@uni.example")  # accents survive every file
    people[1].update(last="Łukasiewicz", first="Jan", email="jan.l@uni.example")
    assert len(people) == 60
    people.append({"id": "", "canvas": 49999, "last": "Student", "first": "Test", "email": "", "kind": "test"})
    people.append(
        {
            "id": "S1099",
            "canvas": 48199,
            "last": "Château",
            "first": "Renée",
            "email": "renee@uni.example",
            "kind": "dropped",
        }
    )
    return people


def canvas_export(people: list[dict]) -> bytes:
    """Canvas's Grades › Export, as Canvas writes it."""
    rows = [
        [
            "Student",
            "ID",
            "SIS User ID",
            "SIS Login ID",
            "Integration ID",
            "Section",
            "21 Class Quiz (12345)",
            "22 Second Quiz (12346)",
            "Current Points",
            "Final Points",
            "Current Score",
            "Unposted Current Score",
            "Final Score",
            "Unposted Final Score",
        ],
        ["    Points Possible", "", "", "", "", "", "10.00", "10.00", *["(read only)"] * 6],
    ]
    for p in people:
        login = p["email"] or "c4ca4238a0b923820dcc509a6f75849b"
        rows.append(
            [
                f"{p['last']}, {p['first']}",
                str(p["canvas"]),
                p["id"],
                login,
                "",
                "Section A",
                "",
                "",
                "0.00",
                "0.00",
                "",
                "",
                "0.00",
                "0.00",
            ]
        )
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    return ("\ufeff" + buf.getvalue()).encode("utf-8")


def canvas_login(p: dict) -> str:
    """Canvas's name part of a download: the sortable name's letters and digits, lower case."""
    return "".join(c for c in f"{p['last']}{p['first']}".casefold() if c.isalnum())


def notebook_bytes(p: dict) -> list[tuple[str, bytes]]:
    """The files a student hands in: (file name, content)."""
    kind = p["kind"]
    if kind == "blank":
        blank = build_exercise(quiz_solution(), f"{QUIZ}.ipynb", for_class=True)
        return [(f"{QUIZ}.ipynb", json.dumps(blank).encode())]
    if kind == "helper":
        helper = submission(HELPER, extra_cell="def my_mean(a):\n    return float(np.mean(a))\n")
        return [(f"{QUIZ}.ipynb", json.dumps(helper).encode())]
    if kind == "final":  # a first try with a mistake, then the right one under another name
        return [
            (f"{QUIZ}.ipynb", json.dumps(submission(WRONG_MEAN)).encode()),
            (f"{QUIZ}_final.ipynb", json.dumps(submission()).encode()),
        ]
    if kind == "big":
        return [(f"{QUIZ}.ipynb", json.dumps(with_figures(submission())).encode())]
    if kind == "truncated":
        whole = json.dumps(submission()).encode()
        return [(f"{QUIZ}.ipynb", whole[: len(whole) // 2])]  # an upload cut off halfway
    return [(f"{QUIZ}.ipynb", json.dumps(submission(ANSWERS[kind])).encode())]


def canvas_zip(path: Path, people: list[dict]) -> Path:
    """Canvas's "Download Submissions": flat `<login>[_late]_<user id>_<attachment id>_<file>`."""
    attachment = 90000
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for p in people:
            if p["kind"] == "absent":
                continue
            for file, data in notebook_bytes(p):
                attachment += 1
                late = "_late" if p["kind"] == "late" else ""
                z.writestr(f"{canvas_login(p)}{late}_{p['canvas']}_{attachment}_{file}", data)
    return path


def run_capsys(argv) -> tuple[int, str]:
    """cli.main with its printing captured (a module fixture cannot use capsys)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = cli.main([str(a) for a in argv])
    return code, buf.getvalue()


def run(capsys, *argv) -> tuple[int, str]:
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def read_csv(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf"), f"{path.name} must start with a byte-order mark for Excel"
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))


def rows_of(out: Path) -> dict[tuple[str, str], dict]:
    return {(r["student_id"], r["assignment"]): r for r in read_csv(out / "grades.csv")}


def feedback(out: Path, sid: str, assignment: str = QUIZ) -> str:
    return (out / "feedback" / safe_name(sid) / f"{assignment}.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """The teacher's folder after `course roster import`, `course unpack` of the Canvas download and
    the first grading run."""
    tmp = tmp_path_factory.mktemp("class")
    private = tmp / "private-solutions"
    write(private / f"{QUIZ}.ipynb", quiz_solution())
    write(private / f"{EARLY}.ipynb", quiz_solution())
    people = class_list()
    (tmp / "canvas-export.csv").write_bytes(canvas_export(people))
    out, subs = tmp / "grades", tmp / "submissions"
    code, roster_log = run_capsys(["roster", "import", tmp / "canvas-export.csv", "--out", out])
    assert code == 0, roster_log
    dropped = next(p for p in people if p["kind"] == "dropped")
    code, text = run_capsys(["roster", "drop", dropped["id"], "--out", out])
    assert code == 0 and "Château, Renée (S1099): dropped" in text, text
    code, unpack_log = run_capsys(
        ["unpack", canvas_zip(tmp / "canvas.zip", people), "--assignment", QUIZ, "--to", subs, "--out", out]
    )
    assert code == 0, unpack_log
    # What hand-collected work adds: a renamed file, a nested one, macOS's folder, a visitor.
    by_kind = {p["kind"]: p["id"] for p in people if p["kind"] != "test"}
    renamed, nested = by_kind["renamed"], by_kind["nested"]
    (subs / renamed / f"{QUIZ}.ipynb").rename(subs / renamed / f"{QUIZ} (1).ipynb")
    (subs / nested / "work").mkdir()
    (subs / nested / f"{QUIZ}.ipynb").rename(subs / nested / "work" / f"{QUIZ}.ipynb")
    write(subs / "__MACOSX" / renamed / f"._{QUIZ}.ipynb", b"\0\5\26\7")
    write(subs / "visitor" / f"{QUIZ}.ipynb", submission())
    sandbox = [] if sandbox_available()[0] else ["--no-sandbox"]
    if sandbox and IN_CI:
        pytest.fail("CI grades in the sandbox: install bubblewrap")
    code, text = run_capsys(
        [
            "grade",
            subs,
            "--solutions",
            private,
            "--assignment",
            QUIZ,
            "--out",
            out,
            "--jobs",
            "2",
            "--timeout",
            "30",
            *sandbox,
        ]
    )
    assert code == 0, text
    test_student = next(p for p in people if p["kind"] == "test")
    with closing(open_gradebook(out)) as book:
        test_id = next(s.id for s in book.roster().students if s.status == "test")
    test_student["id"] = test_id
    return {
        "tmp": tmp,
        "subs": subs,
        "out": out,
        "private": private,
        "people": people,
        "sandbox": sandbox,
        "grade_log": text,
        "unpack_log": unpack_log,
        "roster_log": roster_log,
        "by_kind": by_kind,
        "active": [p for p in people if p["kind"] not in ("test", "dropped")],
        "test": test_id,
        "dropped": dropped["id"],
    }


# --- the roster and the download, as the LMS gives them ----------------------------------------------


def test_canvas_export_is_read_as_it_is(classroom):
    log = classroom["roster_log"]
    assert "read as a Canvas gradebook export: 61 student(s) (1 test), ids from the column 'SIS User ID'" in log, log
    assert "Test Student" in log or "Student, Test" in log, log
    with closing(open_gradebook(classroom["out"])) as book:
        roster = book.roster()
    zoe = roster.by_id["S1000"]
    assert (zoe.name, zoe.email, zoe.extra["ID"]) == ("Müller, Zoë", "zoe.muller@uni.example", "48100"), zoe
    assert roster.by_id[classroom["dropped"]].status == "dropped"
    assert "21 Class Quiz (12345)" in roster.lms_columns and "Current Score" not in roster.lms_columns


def test_unpack_uses_the_kept_roster_and_records_its_decisions(classroom):
    log, subs = classroom["unpack_log"], classroom["subs"]
    assert "roster: the one kept in" in log and "no roster" not in log, log
    folders = {p.name for p in subs.iterdir() if p.is_dir()}
    active = {p["id"] for p in classroom["active"] if p["kind"] != "absent"}
    assert active <= folders and classroom["test"] in folders, sorted(folders - active)
    assert not any("_" in f and f[0].islower() for f in folders if f not in ("__MACOSX", "visitor")), folders
    late = classroom["by_kind"]["late"]
    assert f"Marked late by Canvas: Lastname{int(late[2:]):02d}, Sam ({late})" in log, log
    data = json.loads((classroom["out"] / "grades.json").read_text())
    results = {r["student_id"]: r for r in data["results"]}
    final = results[classroom["by_kind"]["final"]]
    told = f"the newest, `{QUIZ}_final.ipynb`, was graded; not graded: `{QUIZ}.ipynb`"
    assert any(told in n for n in final["notes"]), final
    assert final["score"] == 8, "the newer `_final` notebook is the one graded"
    assert "the newest" in feedback(classroom["out"], classroom["by_kind"]["final"])
    assert results[late]["lms_late"] and "Your LMS marked this submission late." in feedback(classroom["out"], late)


def test_a_30_mb_notebook_is_graded_without_its_outputs(classroom):
    big = classroom["by_kind"]["big"]
    rows = rows_of(classroom["out"])
    assert (rows[(big, QUIZ)]["status"], rows[(big, QUIZ)]["score"]) == ("graded", "8"), rows[(big, QUIZ)]
    assert "only the answer cells are graded, so the outputs were left aside" in feedback(classroom["out"], big)


# --- the first run -----------------------------------------------------------------------------------


def test_every_active_student_has_one_row_with_the_expected_score(classroom):
    rows = rows_of(classroom["out"])
    active = classroom["active"]
    assert {sid for sid, _ in rows} == {p["id"] for p in active} | {classroom["test"]}, "dropped: no row"
    wrong = [
        (p["id"], p["kind"], rows[(p["id"], QUIZ)]["score"])
        for p in active
        if float(rows[(p["id"], QUIZ)]["score"]) != expected_score(p["kind"])
    ]
    assert not wrong, wrong
    assert all(r["max_score"] == "10" for r in rows.values()), "8 points of tests and 2 for the written answer"
    absent = [sid for (sid, _), r in rows.items() if r["status"] == "not submitted"]
    assert len(absent) == 3
    assert rows[(classroom["test"], QUIZ)]["enrolment"] == "test" and rows[(classroom["test"], QUIZ)]["score"] == "8"
    assert rows[("S1000", QUIZ)]["name"] == "Müller, Zoë" and rows[("S1000", QUIZ)]["email"] == "zoe.muller@uni.example"
    assert rows[("S1000", QUIZ)]["to_mark"] == "1"


def test_every_decision_about_a_file_is_a_recorded_warning(classroom):
    data = json.loads((classroom["out"] / "grades.json").read_text())
    warnings = " | ".join(data["warnings"])
    assert "__MACOSX: not on the roster" in warnings, warnings
    assert "visitor: not on the roster; not graded" in warnings
    results = {r["student_id"]: r for r in data["results"]}
    renamed, nested = classroom["by_kind"]["renamed"], classroom["by_kind"]["nested"]
    assert any(f"Graded `{QUIZ} (1).ipynb`" in n for n in results[renamed]["notes"]), results[renamed]["notes"]
    assert any(f"Graded `work/{QUIZ}.ipynb`" in n and "subfolder" in n for n in results[nested]["notes"])
    assert "has dropped the course" in classroom["grade_log"]
    assert all(r["solutions_path"].endswith(f"private-solutions/{QUIZ}.ipynb") for r in results.values())


def test_an_unreadable_upload_has_one_reason_said_once(classroom):
    sid = classroom["by_kind"]["truncated"]
    text = feedback(classroom["out"], sid)
    assert "(unreadable)" in text and text.count("not JSON") == 1, text


def test_partial_credit_and_a_helper_in_an_added_cell_reach_the_feedback(classroom):
    text = feedback(classroom["out"], classroom["by_kind"]["one_shape"])
    assert "| Exercise 2: Four shapes | 3 / 4 | partial |" in text and "shapes['scores']" in text, text
    assert "| Exercise 4: Why square? | – / 2 | to be marked |" in text
    text = feedback(classroom["out"], classroom["by_kind"]["helper"])
    assert "code cell(s) you added were not run" in text and "`my_mean` is defined in a cell you added" in text, text


# --- a week of teaching ------------------------------------------------------------------------------


def test_two_graders_mark_the_written_answers(classroom, capsys):
    out = classroom["out"]
    right = [p["id"] for p in classroom["active"] if p["kind"] == "right"]
    with closing(open_gradebook(out)) as book:
        save_mark(
            book,
            out,
            {
                "a": QUIZ,
                "q": "ex4_answer",
                "student": right[0],
                "points": "",
                "rubric": "0",
                "comment": "Exactly: cancelling.",
                "seen": "0",
            },
            grader="Ana Ruiz (TA)",
        )
        save_mark(
            book,
            out,
            {
                "a": QUIZ,
                "q": "ex4_answer",
                "student": right[1],
                "points": "1.5",
                "rubric": "1",
                "comment": "Say what the squares stop.",
                "seen": "0",
            },
            grader="Ben Okafor",
        )
        with pytest.raises(ValueError, match="did not answer"):
            save_mark(
                book,
                out,
                {
                    "a": QUIZ,
                    "q": "ex4_answer",
                    "student": classroom["by_kind"]["blank"],
                    "points": "1",
                    "seen": "0",
                },
                grader="Ana",
            )
        with pytest.raises(ValueError, match="at most 2"):
            form = {"a": QUIZ, "q": "ex4_answer", "student": right[2], "points": "3", "seen": "0"}
            save_mark(book, out, form, grader="Ana")
        marks = book.marks(QUIZ)
    assert [(m.student, m.points, m.grader) for m in marks] == [
        (right[0], 2.0, "Ana Ruiz (TA)"),
        (right[1], 1.5, "Ben Okafor"),
    ]
    assert "> Say what the squares stop." in feedback(out, right[1]), "a saved mark rewrites its student's feedback"
    code, text = run(capsys, "export", "--out", out)  # the class-wide files: as the marking page does when it stops
    assert code == 0, text
    rows = rows_of(out)
    assert (rows[(right[0], QUIZ)]["score"], rows[(right[0], QUIZ)]["to_mark"]) == ("10", "0")
    assert rows[(right[1], QUIZ)]["final"] == "9.5"
    text = feedback(out, right[1])
    assert "| Exercise 4: Why square? | 1.5 / 2 | marked |" in text and "> Say what the squares stop." in text, text
    code, text = run(capsys, "mark", "--list", "--out", out)
    assert code == 0 and "2 marked (Ana Ruiz (TA) 1, Ben Okafor 1)" in text, text


def test_a_broken_hidden_test_is_previewed_regraded_with_a_reason_and_fixed(classroom, capsys):
    out, subs, private, sandbox = classroom["out"], classroom["subs"], classroom["private"], classroom["sandbox"]
    few = [p["id"] for p in classroom["active"] if p["kind"] == "right"][2:5]
    students = [arg for sid in few for arg in ("--student", sid)]
    broken = classroom["tmp"] / "broken"
    write(broken / f"{QUIZ}.ipynb", quiz_solution(hidden_answer=43))  # a slip in the hidden test: nobody passes it
    before = rows_of(out)
    code, text = run(
        capsys,
        "grade",
        subs,
        "--solutions",
        broken,
        *students,
        "--assignment",
        QUIZ,
        "--out",
        out,
        "--dry-run",
        "--timeout",
        "30",
        "--jobs",
        "1",
        *sandbox,
    )
    assert code == 0, text
    assert "Dry run: nothing was written" in text, text
    assert "3 grade(s) would change (the same files graded again): final 8 → 6 (3)" in text, text
    assert f"Lastname02, Sam ({few[0]}), {QUIZ}: final 8 → 6 (Exercise 3: The answer: 2 → 0)" in text, text
    assert "--new-solutions" in text and rows_of(out) == before, "a dry run writes nothing"

    code, text = run(
        capsys,
        "grade",
        subs,
        "--solutions",
        broken,
        *students,
        "--assignment",
        QUIZ,
        "--out",
        out,
        "--new-solutions",
        "--reason",
        "exercise 3's hidden test was changed",
        "--hide-hidden-inputs",
        "--timeout",
        "30",
        "--jobs",
        "1",
        *sandbox,
    )
    assert code == 0 and "3 grade(s) changed (the same files graded again): final 8 → 6 (3)" in text, text
    assert "the grades come from 2 versions of the solutions" in text, text
    data = json.loads((out / "grades.json").read_text())
    assert any("2 versions of the solutions" in w for w in data["warnings"]), data["warnings"]
    assert data["runs"][-1]["reason"] == "exercise 3's hidden test was changed"
    assert len(data["runs"][-1]["changes"]) == 3
    fb = feedback(out, few[0])
    assert "(exercise 3's hidden test was changed): your score for the exercises went from 8 to 6." in fb, fb
    assert "a hidden test failed" in fb and "answer == 43" not in fb, "--hide-hidden-inputs keeps the inputs out"

    code, text = run(
        capsys,
        "grade",
        subs,
        "--solutions",
        private,
        *students,
        "--assignment",
        QUIZ,
        "--out",
        out,
        "--new-solutions",
        "--reason",
        "exercise 3's hidden test fixed",
        "--timeout",
        "30",
        "--jobs",
        "1",
        *sandbox,
    )
    assert code == 0 and "3 grade(s) changed (the same files graded again): final 6 → 8 (3)" in text, text
    assert "versions of the solutions" not in text, "the class is consistent again: no warning"
    data = json.loads((out / "grades.json").read_text())
    assert not any("versions of the solutions" in w for w in data["warnings"]), data["warnings"]
    assert all(rows_of(out)[k]["score"] == before[k]["score"] for k in before), "the scores are back"
    with closing(open_gradebook(out)) as book:
        history = book.history(few[0], QUIZ)
    assert [h["score"] for h in history] == [8.0, 6.0], "every overwritten score is kept, with its solutions' hash"
    assert history[1]["solutions_sha256"] != history[0]["solutions_sha256"] and history[1]["reason"]
    fb = feedback(out, few[0])
    assert "from 8 to 6" in fb and "from 6 to 8" in fb and "fixed" in fb, fb


def test_regrade_one_student_adjust_with_a_grader_and_the_report(classroom, capsys):
    out, subs, private = classroom["out"], classroom["subs"], classroom["private"]
    rows = rows_of(out)
    fixer = classroom["by_kind"]["wrong_mean"]
    write(subs / fixer / f"{QUIZ}.ipynb", submission())
    code, text = run(
        capsys,
        "grade",
        subs,
        "--solutions",
        private,
        "--student",
        fixer,
        "--assignment",
        QUIZ,
        "--out",
        out,
        "--timeout",
        "30",
        "--jobs",
        "1",
        *classroom["sandbox"],
    )
    assert code == 0 and "1 grade(s) changed (new files handed in): final 6 → 8 (1)" in text, text
    after = rows_of(out)
    assert (after[(fixer, QUIZ)]["score"], after[(fixer, QUIZ)]["attempt"]) == ("8", "2")
    assert [k for k in rows if rows[k] != after[k]] == [(fixer, QUIZ)]

    helper = classroom["by_kind"]["helper"]
    code, text = run(
        capsys,
        "adjust",
        helper,
        QUIZ,
        "2",
        "--reason",
        "helper in an added cell: accepted this once",
        "--grader",
        "Ana Ruiz",
        "--out",
        out,
    )
    assert code == 0 and "adjustment 1" in text and "final score now 8 / 10" in text, text
    code, text = run(capsys, "adjust", helper, QUIZ, "5", "--reason", "extra credit", "--cap", "--out", out)
    assert code == 0 and "final score now 10 / 10" in text, "--cap stops at the maximum"
    code, text = run(capsys, "adjust", "--list", "--out", out)
    assert "Ana Ruiz" in text and "(capped)" in text and "20" in text.split("\n")[0][:12], text

    code, text = run(capsys, "report", "--out", out)
    assert code == 0, text
    assert "56 submission(s) graded, 1 could not be graded, 3 not submitted." in text, text
    assert "**Not submitted** (3): Lastname" in text
    assert "**Could not be graded** (1):" in text and "unreadable" in text
    assert "**Lost points to a cell they added" in text and f"({helper})" in text
    assert "**Written answers still to mark" in text
    assert "Big change" not in text, "the broken hidden test was fixed again: in all, no score moved"
    assert "Scores of the 56 graded submission(s), of 10: mean" in text and "| 10 (full marks) |" in text
    assert "| Exercise 2: Four shapes | " in text and "scores are (B, T_q, T_k)" in text, "the most common hint"
    assert "…" not in text.replace(" …", ""), "hints keep their numbers and are cut only between words"
    assert (out / f"report-{QUIZ}.png").read_bytes()[:4] == b"\x89PNG"


def test_canvas_file_imports_without_edits(classroom, capsys):
    """Canvas's Grades › Import: `Student, ID, SIS User ID, SIS Login ID, Section`, then the assignments
    under their own Canvas names, the `Points Possible` row, and an empty cell where there is no grade."""
    out = classroom["out"]
    code, text = run(capsys, "export", "--lms", "canvas", "--out", out)
    assert code == 0, text
    assert "1 submission(s) that could not be graded were exported as 0" in text and "unreadable" in text, text
    assert "written to the LMS's own columns: 21_class_quiz -> '21 Class Quiz (12345)'" in text, text
    raw = (out / "canvas.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw
    table = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"))))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "21 Class Quiz (12345)"], table[0]
    assert table[1][0].strip() == "Points Possible" and table[1][5] == "10"
    assert len({len(r) for r in table}) == 1 and len(table) == 2 + 62, "every roster student, one column count"
    by_id = {r[1]: r for r in table[2:]}
    assert all(r[1] for r in table[2:]), "Canvas's ID filled for every student, the test student included"
    people = {p["canvas"]: p for p in classroom["people"]}
    for canvas_id, r in by_id.items():
        p = people[int(canvas_id)]
        if p["kind"] in ("absent", "test", "dropped"):
            assert r[5] == "", f"{p['kind']}: an empty cell, not 0"
        else:
            assert float(r[5]) >= 0
    assert by_id["48100"][:5] == ["Müller, Zoë", "48100", "S1000", "zoe.muller@uni.example", "Section A"]
    code, text = run(capsys, "export", "--lms", "canvas", "--column", f"{QUIZ}=Quiz One (777)", "--out", out)
    assert code == 0 and read_csv(out / "canvas.csv")[0].get("Quiz One (777)") is not None
    code, text = run(capsys, "export", "--lms", "canvas", "--out", out)  # the mapping is remembered
    assert "Quiz One (777)" in next(csv.reader(io.StringIO((out / "canvas.csv").read_text(encoding="utf-8-sig"))))


# --- a class on Moodle, with a deadline -------------------------------------------------------------


def test_a_moodle_class_from_its_own_files(classroom, capsys):
    tmp, private = classroom["tmp"], classroom["private"]
    export = (
        "\ufeffFirst name,Last name,ID number,Institution,Department,Email address,"
        "Assignment: Class quiz (Real),Last downloaded from this course\r\n"
        "Zoë,Müller,M-1,Uni,Physics,zoe@uni.example,-,1764000000\r\n"
        "Li,Lei,M-2,Uni,Physics,li@uni.example,-,1764000000\r\n"
        "Ada,Absent,M-3,Uni,Physics,ada@uni.example,-,1764000000\r\n"
        "Renée,Château,M-4,Uni,Physics,renee@uni.example,-,1764000000\r\n"
    )
    (tmp / "moodle-export.csv").write_text(export, encoding="utf-8")
    with zipfile.ZipFile(tmp / "moodle.zip", "w") as z:
        for who, pid, when in (
            ("Zoë Müller", 501, (2026, 11, 20, 11, 0, 0)),
            ("Li Lei", 502, (2026, 11, 21, 22, 0, 0)),
            ("Renée Château", 504, (2026, 11, 19, 9, 0, 0)),
        ):
            z.writestr(
                zipfile.ZipInfo(f"{who}_{pid}_assignsubmission_file_/{QUIZ}.ipynb", date_time=when),
                json.dumps(submission()),
            )
    out, subs = tmp / "moodle-grades", tmp / "moodle-subs"
    code, text = run(
        capsys,
        "unpack",
        tmp / "moodle.zip",
        "--assignment",
        QUIZ,
        "--to",
        subs,
        "--roster",
        tmp / "moodle-export.csv",
        "--tz",
        "Europe/Berlin",
        "--out",
        out,
    )
    assert code == 0 and "read as a Moodle grade export: 4 student(s), ids from the column 'ID number'" in text, text
    assert sorted(p.name for p in subs.iterdir()) == ["M-1", "M-2", "M-4"]
    assert run(capsys, "roster", "drop", "M-4", "--out", out)[0] == 0
    code, text = run(
        capsys,
        "grade",
        subs,
        "--solutions",
        private,
        "--assignment",
        QUIZ,
        "--out",
        out,
        "--timeout",
        "30",
        "--jobs",
        "1",
        *classroom["sandbox"],
    )
    assert code == 0, text
    code, text = run(capsys, "deadline", QUIZ, "2026-11-20T12:00+01:00", "--penalty", "10", "--max", "50", "--out", out)
    assert code == 0, text
    fb = feedback(out, "M-2")
    assert (
        "Late penalty: -2 (submitted 1 day 10 hours after the deadline (2026-11-20 12:00 +01:00), at "
        "2026-11-21 22:00 +01:00: 2 started days, -10% each (at most -50%))"
    ) in fb, fb
    code, text = run(capsys, "export", "--lms", "moodle", "--out", out)
    assert code == 0, text
    assert "written to the LMS's own columns: 21_class_quiz -> 'Assignment: Class quiz (Real)'" in text, text
    table = list(csv.reader(io.StringIO((out / "moodle.csv").read_text(encoding="utf-8-sig"))))
    assert table[0] == ["Username", "ID number", "Email address", "Full name", "Assignment: Class quiz (Real)"]
    assert [r[1:] for r in table[1:]] == [
        ["M-1", "zoe@uni.example", "Zoë Müller", "8"],
        ["M-2", "li@uni.example", "Li Lei", "6"],
        ["M-3", "ada@uni.example", "Ada Absent", ""],
        ["M-4", "renee@uni.example", "Renée Château", ""],
    ], table


def test_a_second_assignment_handed_in_early_adds_rows_only_for_who_handed_it_in(classroom, capsys):
    out, subs = classroom["tmp"] / "grades-early", classroom["tmp"] / "subs-early"
    shutil.copytree(classroom["subs"], subs, symlinks=True)
    write(subs / "S1000" / f"{EARLY}.ipynb", submission(name=EARLY))
    code, text = run(
        capsys,
        "grade",
        subs,
        "--solutions",
        classroom["private"],
        "--roster",
        classroom["tmp"] / "canvas-export.csv",
        "--student",
        "S1000",
        "--student",
        "S1001",
        "--out",
        out,
        "--timeout",
        "30",
        "--jobs",
        "1",
        *classroom["sandbox"],
    )
    assert code == 0, text
    rows = rows_of(out)
    assert sorted(rows) == [("S1000", QUIZ), ("S1000", EARLY), ("S1001", QUIZ)], sorted(rows)


# --- a teacher's own exercise set, checked on a student's machine ------------------------------------


def test_a_teachers_own_set_checks_on_a_students_machine(tmp_path):
    from course_lib.runner.check import check_notebook
    from course_lib.runner.notebook import grade_id, is_solution, read_notebook, source

    teacher = tmp_path / "teaching" / "private"
    assert (
        cli.main(
            [
                "new",
                "93_my_topic",
                "--title",
                "My topic",
                "--solutions",
                str(teacher / "solutions"),
                "--checks",
                str(teacher / "checks"),
            ]
        )
        == 0
    )
    release = tmp_path / "teaching" / "release"
    assert run_capsys(["build", "--class", "--solutions", teacher / "solutions", "--exercises", release])[0] == 0
    code, text = run_capsys(
        ["build", "--check", "--class", "--solutions", teacher / "solutions", "--exercises", release]
    )
    assert code == 0 and f"{release}/ is up to date (2 files)." in text, text
    handed_out = (release / "93_my_topic_exercises.ipynb").read_text() + (release / "lesson93.py").read_text()
    assert str(tmp_path) not in handed_out and "/teaching/" not in handed_out, "no teacher's path is handed out"
    student = tmp_path / "student-laptop" / "Downloads"  # the two files a student downloads, nothing else
    student.mkdir(parents=True)
    nb = read_notebook(release / "93_my_topic_exercises.ipynb")
    answers = {
        grade_id(c): source(c)
        for c in read_notebook(teacher / "solutions" / "93_my_topic.ipynb")["cells"]
        if is_solution(c)
    }
    for cell in nb["cells"]:
        if is_solution(cell):
            cell["source"] = answers[grade_id(cell)]
    write(student / "93_my_topic_exercises.ipynb", nb)
    shutil.copy(release / "lesson93.py", student / "lesson93.py")
    shutil.rmtree(teacher)  # nothing of the teacher's is reachable on the student's machine
    rows = check_notebook(student / "93_my_topic_exercises.ipynb").rows
    assert [r.status for r in rows] == ["passed"] * 3 and sum(r.points for r in rows) == 8, rows
