"""The gradebook and what a teacher does with it: regrades that keep the class's results, attempts,
late penalties, manual points, the roster, exports (CSV with BOM, feedback, Canvas and Moodle), the
class report, and the rules that find a student's notebook. These tests need no kernel; the whole
route, graded in the sandbox, is tests/test_class.py.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from grading_helpers import REPO, exercise, learner, solution, write

from course_grader.discover import discover, loose_stem, resolve_notebooks
from course_grader.export import lms_export, lms_table, safe_name, write_exports, write_lms
from course_grader.feedback_file import feedback_markdown
from course_grader.grade import SubmissionResult
from course_grader.gradebook import Deadline, Gradebook, parse_time
from course_grader.record import check_provenance
from course_grader.report import summarize, write_report
from course_grader.roster import RosterError, parse_roster, read_roster
from course_lib.runner.assignment import HIDDEN_MARK, Assignment, Submission
from course_lib.runner.feedback import HIDDEN_FAILED, added_cell_hint, added_cells_note, score
from course_lib.runner.feedback import TestResult as Outcome
from course_lib.runner.process import CellRun
from course_lib.runner.text import inert

UTC = timezone.utc


def result(student, score=2.0, status="graded", assignment="06_attention", tests=None, notes=()):
    tests = (
        tests
        if tests is not None
        else [
            Outcome(
                "ex1_test",
                "Exercise 1: Shapes",
                min(score, 2.0),
                2.0,
                "passed" if score >= 2 else "failed",
                "" if score >= 2 else "✘ scores.shape: (4, 7) is not right.\n  Hint: it looks like you transposed K.",
            ),
            Outcome(
                "ex2_test",
                "Exercise 2: By hand",
                max(0.0, score - 2.0),
                2.0,
                "passed" if score >= 4 else "not attempted",
                ""
                if score >= 4
                else "✘ weights: not attempted yet.\n  Hint: nothing called `weights` is defined yet; "
                "`wieghts` is: if you meant this name, check the spelling.",
            ),
        ]
    )
    return SubmissionResult(student, assignment, score, 4.0, status, tests, list(notes))


def record(book, res, sha="a", when="2026-12-01T10:00:00+00:00", sol_sha="s1", run=None):
    return book.record(
        res,
        file=f"{res.assignment}.ipynb" if sha else None,
        submission_sha256=sha,
        submitted_at=when if sha else None,
        submitted_from="timestamp.txt" if sha else None,
        solutions_path="/private/solutions/06_attention.ipynb",
        solutions_sha256=sol_sha,
        run=run,
    )


@pytest.fixture
def book(tmp_path):
    with Gradebook(tmp_path / "out" / "gradebook.db") as b:
        yield b


# --- attempts and regrades -----------------------------------------------------------------------------


def test_a_regrade_of_one_student_keeps_every_other_row_and_feedback_file(book, tmp_path):
    """Regrading one student left a one-row grades.csv and deleted the other 13 feedback files."""
    out = tmp_path / "out"
    for i in range(14):
        record(book, result(f"s{i:02d}", score=4.0), sha=f"h{i}")
    write_exports(book, out)
    before = {d.name: (d / "06_attention.md").read_text() for d in (out / "feedback").iterdir() if d.is_dir()}
    assert len(before) == 14
    record(book, result("s03", score=2.0), sha="h3")  # the same file again: a regrade replaces its attempt
    write_exports(book, out)
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8-sig"))))
    assert len(rows) == 14 and {r["student_id"] for r in rows} == {f"s{i:02d}" for i in range(14)}
    assert next(r for r in rows if r["student_id"] == "s03")["score"] == "2"
    assert next(r for r in rows if r["student_id"] == "s03")["attempt"] == "1", "same file: the same attempt, replaced"
    after = {d.name: (d / "06_attention.md").read_text() for d in (out / "feedback").iterdir() if d.is_dir()}
    assert after.keys() == before.keys() and all(after[k] == before[k] for k in before if k != "s03"), (
        "others' feedback kept"
    )
    assert after["s03"] != before["s03"]
    assert sorted(p.name for p in out.iterdir()) == ["feedback", "gradebook.db", "grades.csv", "grades.json"], (
        "no temporary files"
    )


def test_a_new_file_is_a_new_attempt_and_the_latest_counts(book):
    assert record(book, result("ada", 2.0), sha="first") == 1
    assert record(book, result("ada", 4.0), sha="second") == 2
    assert record(book, result("ada", 4.0), sha="second") == 2, "regrading the same file replaces attempt 2"
    [row] = book.rows()
    assert (row.attempt, row.attempts, row.score) == (2, 2, 4.0)
    assert [a["score"] for a in book.attempts("ada", "06_attention")] == [2.0, 4.0], "attempt 1 stays on record"


def test_not_submitted_is_replaced_by_a_first_file_and_never_replaces_a_graded_one(book):
    assert record(book, result("bob", 0.0, status="not submitted"), sha=None) == 1
    assert record(book, result("bob", 4.0), sha="late") == 1, "the first file takes the place of 'not submitted'"
    assert record(book, result("bob", 0.0, status="not submitted"), sha=None) == 1
    [row] = book.rows()
    assert row.status == "graded" and row.score == 4.0, "a folder emptied later must not erase a grade"


# --- late penalties and manual points ------------------------------------------------------------------


@pytest.mark.parametrize(
    "late, percent, days",
    [
        (timedelta(minutes=-5), 0, 0),
        (timedelta(minutes=10), 0, 0),  # within the 15 minutes of grace
        (timedelta(hours=1), 10, 1),  # a started day counts as a day
        (timedelta(days=2, hours=1), 30, 3),
        (timedelta(days=9), 50, 9),  # capped at 50 %
    ],
)
def test_late_penalty_per_started_day_with_grace_and_cap(late, percent, days):
    due = datetime(2026, 12, 1, 23, 59, tzinfo=UTC)
    d = Deadline("06_attention", due, percent_per_day=10, max_percent=50, grace_minutes=15)
    assert d.penalty(due + late, 22.0) == (round(22.0 * percent / 100, 2), days)


def test_penalties_and_adjustments_are_applied_in_every_export(book, tmp_path):
    out = tmp_path / "out"
    record(book, result("ada", 4.0), when="2026-12-03T08:00:00+00:00")  # 1 day and 8 h late: 2 started days
    record(book, result("bob", 2.0), when="2026-12-01T08:00:00+00:00")  # on time
    book.set_deadline(Deadline("06_attention", parse_time("2026-12-02T00:00+00:00"), 10, 100, 0))
    with pytest.raises(ValueError, match="needs a reason"):
        book.add_adjustment("bob", "06_attention", 1, "  ")
    book.add_adjustment("bob", "06_attention", 1.5, "exercise 2 answered in a markdown cell; graded by hand")
    book.add_adjustment("ada", "06_attention", -10, "copied work")
    write_exports(book, out)
    rows = {
        r["student_id"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8-sig")))
    }
    assert (rows["ada"]["score"], rows["ada"]["late_penalty"], rows["ada"]["adjustment"], rows["ada"]["final"]) == (
        "4",
        "0.8",
        "-10",
        "0",
    )
    assert (rows["bob"]["late_penalty"], rows["bob"]["adjustment"], rows["bob"]["final"]) == ("0", "1.5", "3.5")
    fb = (out / "feedback" / "bob" / "06_attention.md").read_text()
    assert "**Score: 3.5 / 4**" in fb and "+1.5: exercise 2 answered in a markdown cell; graded by hand" in fb
    fb = (out / "feedback" / "ada" / "06_attention.md").read_text()
    assert (
        "Late penalty: -0.8 (submitted 1 day 8 hours after the deadline (2026-12-02 00:00 UTC), at 2026-12-03 08:00 "
        "UTC: 2 started days, -10% each)"
    ) in fb, fb
    data = json.loads((out / "grades.json").read_text())
    assert data["deadlines"]["06_attention"]["percent_per_day"] == 10
    canvas = lms_table(book, "canvas")
    assert canvas[2][-1] == "0" and canvas[3][-1] == "3.5", canvas


def test_times_are_read_in_the_formats_teachers_and_nbgrader_write():
    assert parse_time("2026-12-01 22:59:00.000000 UTC") == datetime(2026, 12, 1, 22, 59, tzinfo=UTC)
    assert parse_time("2026-12-01T23:59+01:00") == datetime(2026, 12, 1, 22, 59, tzinfo=UTC)
    assert parse_time("2026-12-01 23:59").tzinfo is not None, "a time without a zone is local time, made explicit"
    with pytest.raises(ValueError, match="expected e.g. 2026-12-01 23:59"):
        parse_time("next friday")


# --- the feedback ---------------------------------------------------------------------------------------


def test_feedback_names_exercises_not_internal_ids_and_shows_every_hint(book):
    record(book, result("ada", 2.0))
    text = feedback_markdown(book.rows()[0])
    assert "ex1_test" not in text and "ex2_test" not in text, text
    assert "| Exercise 2: By hand | 0 / 2 | not attempted |" in text
    assert "`wieghts` is: if you meant this name, check the spelling" in text, (
        "the misspelled-name hint reaches the feedback"
    )


def test_non_ascii_ids_get_safe_folders_and_an_index_that_maps_them_back(book, tmp_path):
    out = tmp_path / "out"
    book.set_roster(parse_roster("student_id,name\nzoë.müller,Zoë Müller\n李雷,李雷\n"))
    for sid in ("zoë.müller", "李雷"):
        record(book, result(sid, 4.0))
    write_exports(book, out)
    index = list(csv.DictReader(io.StringIO((out / "feedback" / "index.csv").read_text(encoding="utf-8-sig"))))
    assert {r["student_id"]: r["name"] for r in index} == {"zoë.müller": "Zoë Müller", "李雷": "李雷"}
    for r in index:
        assert (out / "feedback" / r["folder"] / "06_attention.md").is_file() and r["folder"].isascii()
    text = (out / "feedback" / safe_name("zoë.müller") / "06_attention.md").read_text()
    assert text.startswith("# Feedback on 06_attention\n\nFor Zoë Müller (zoë.müller)\n"), text


# --- spreadsheets and LMSs ------------------------------------------------------------------------------


def test_learner_text_in_feedback_cannot_close_a_block_start_a_heading_or_add_html(book):
    """medium: a ``` in an exception message closed the feedback's code block; a forged heading and
    score, <script>, <img onerror> and <!-- rendered."""
    markdown_it = pytest.importorskip("markdown_it")
    forged = "```\n# Score: 4 / 4\n<script>alert(1)</script>\n````` <img src=x onerror=alert(2)> <!--"
    tests = [
        Outcome("ex1_test", "Exercise 1: Shapes", 0.0, 2.0, "error", f"your answer cell stopped with {forged}"),
        Outcome("ex2_test", "Exercise 2: By hand", 2.0, 2.0, "passed", ""),
    ]
    notes = [
        f"Exercise 2: your answer cell stopped with ValueError: {forged}; the test passed.",
        "1 code cell(s) you added were not run (`# <b>x</b> ``` **Score: 4 / 4**`).",
        "# Score: 4 / 4 [x](http://e)",
    ]
    record(book, result("# <i>mallory</i>", score=2.0, tests=tests, notes=notes))
    text = feedback_markdown(book.rows()[0])
    html = markdown_it.MarkdownIt("commonmark").render(text)
    for tag in ("<script", "<img", "<!--", "<b>", "<i>", "<a "):
        assert tag not in html, f"{tag} rendered:\n{html}"
    headings = [t.tag for t in markdown_it.MarkdownIt("commonmark").parse(text) if t.type == "heading_open"]
    assert headings == ["h1", "h2", "h2", "h3"], (headings, text)
    assert html.count("<strong>") == 1, html
    assert "````` &lt;img" in html.split("<pre><code>")[1], "the message is shown whole, in one block"
    assert "# &lt;i&gt;mallory&lt;/i&gt;" in html, "the id is shown, as text"


def test_a_student_named_like_the_exports_own_files_gets_another_folder(book, tmp_path):
    """medium: a folder named index.csv crashed every export of the gradebook."""
    assert safe_name("index.csv") != "index.csv" and safe_name("INDEX.CSV").startswith("INDEX.CSV-")
    out = tmp_path / "out"
    for sid in ("index.csv", "ada"):
        record(book, result(sid, 4.0), sha=sid)
    write_exports(book, out)
    index = (out / "feedback" / "index.csv").read_text(encoding="utf-8-sig")
    assert f"index.csv,,{safe_name('index.csv')}" in index and (out / "feedback" / safe_name("index.csv")).is_dir()


def test_an_export_that_fails_leaves_the_previous_one_whole(book, tmp_path, monkeypatch):
    """The feedback folder is written whole before grades.csv, grades.json and feedback/ are replaced; a
    draft that a killed export left is removed by the next one."""
    from course_grader import export

    out = tmp_path / "out"
    record(book, result("ada", 4.0), sha="a")
    write_exports(book, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "gradebook.db"}
    (out / ".feedback-999999999-stale").mkdir()  # a draft whose process is gone
    record(book, result("bob", 2.0), sha="b")

    def broken(row):
        raise OSError("disk full")

    monkeypatch.setattr(export, "feedback_markdown", broken)
    with pytest.raises(OSError, match="disk full"):
        write_exports(book, out)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "gradebook.db"}
    assert after == before, "grades.csv, grades.json and feedback/ are as they were"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".feedback")], "no draft is left"


def test_csv_exports_have_a_bom_so_excel_reads_utf8(book, tmp_path):
    out = tmp_path / "out"
    book.set_roster(parse_roster("student_id,name\nzm,Zoë Müller\nll,李雷\n"))
    record(book, result("zm", 4.0))
    write_exports(book, out)
    raw = (out / "grades.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and "Zoë Müller".encode() in raw
    write_lms(book, out / "moodle.csv", "moodle")
    assert (out / "moodle.csv").read_bytes().startswith(b"\xef\xbb\xbf")


def test_lms_layouts_have_one_column_per_assignment_in_roster_order(book):
    book.set_roster(
        parse_roster(
            "student_id,name,email,ID,SIS User ID,Section,ID number\n"
            "zm,Zoë Müller,zm@uni.edu,101,S-1,A,M-1\nll,李雷,ll@uni.edu,102,S-2,B,M-2\n"
            "ab,Absent Student,ab@uni.edu,103,S-3,A,M-3\n"
        )
    )
    record(book, result("ll", 4.0, assignment="06_attention"))
    record(book, result("zm", 2.0, assignment="06_attention"))
    record(book, result("zm", 3.0, assignment="07_position"))
    canvas = lms_table(book, "canvas")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "06_attention", "07_position"]
    assert canvas[1][0].strip() == "Points Possible" and canvas[1][5:] == ["4", "4"]
    assert canvas[2] == ["Zoë Müller", "101", "S-1", "zm", "A", "2", "3"]
    assert canvas[3] == ["李雷", "102", "S-2", "ll", "B", "4", ""], "no grade: an empty cell, not a zero"
    assert canvas[4][0] == "Absent Student" and canvas[4][5:] == ["", ""]
    moodle = lms_table(book, "moodle")
    assert moodle[0] == ["Username", "ID number", "Email address", "Full name", "06_attention", "07_position"]
    assert moodle[1] == ["zm", "M-1", "zm@uni.edu", "Zoë Müller", "2", "3"]
    assert lms_table(book, "wide", ["07_position"])[1] == ["zm", "Zoë Müller", "3", "3"]
    with pytest.raises(ValueError, match="expected canvas, moodle or wide"):
        lms_table(book, "blackboard")


# --- the roster -----------------------------------------------------------------------------------------


def test_roster_reads_what_spreadsheets_write(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_bytes("Username;First name;Last name;Email address\r\nzm;Zoë;Müller;zm@uni.edu\r\n\r\n".encode("cp1252"))
    roster, warnings = read_roster(path)
    assert [(s.id, s.name, s.email) for s in roster.students] == [("zm", "Zoë Müller", "zm@uni.edu")]
    assert warnings and "Windows-1252" in warnings[0]
    path.write_bytes("\ufeffstudent_id,name\nab,Ada\n".encode())
    assert read_roster(path)[0].students[0].id == "ab", "Excel's byte-order mark is not part of the first column's name"


@pytest.mark.parametrize(
    "text, message",
    [
        ("name,email\nAda,a@x\n", "expected one of them to be the student id"),
        ("student_id,name\nab,Ada\nab,Bea\n", "the id 'ab' is on lines 2 and 3"),
        ("student_id,name\n,Ada\n", "the student Ada \\(line 2\\) has no 'student_id'"),
        ("student_id,name\n", "names no students"),
        ("", "is empty"),
    ],
)
def test_a_roster_that_cannot_be_used_says_why(text, message):
    with pytest.raises(RosterError, match=message):
        parse_roster(text)


def test_a_missing_roster_file_is_named(tmp_path):
    with pytest.raises(RosterError, match="no roster file at .*nope.csv"):
        read_roster(tmp_path / "nope.csv")


# --- finding each student's notebook --------------------------------------------------------------------


def _class(tmp_path, files: dict[str, object]) -> Path:
    subs = tmp_path / "subs"
    for name, content in files.items():
        if content is None:
            (subs / name).mkdir(parents=True, exist_ok=True)
        else:
            write(subs / name, content)
    return subs


def _solutions(tmp_path, *names) -> Path:
    for n in names:
        write(tmp_path / "solutions" / f"{n}.ipynb", solution())
    return tmp_path / "solutions"


@pytest.mark.parametrize(
    "name",
    [
        "06_attention (1).ipynb",
        "06_Attention.ipynb",
        "Copy of 06_attention.ipynb",
        "06_attention-Copy1.ipynb",
        "06-attention.ipynb",
        "work/06_attention.ipynb",
    ],
)
def test_renamed_and_nested_notebooks_are_graded_with_a_recorded_note(tmp_path, name):
    subs = _class(tmp_path, {f"ada/{name}": exercise()})
    [job], warnings = discover(subs, _solutions(tmp_path, "06_attention"), ["06_attention"])
    assert job.submission == subs / "ada" / name
    assert any(f"Graded `{name}` as 06_attention" in n for n in job.notes), job.notes
    assert any(w.startswith("ada: Graded") for w in warnings)


def test_loose_names_ignore_only_what_copies_add():
    assert (
        loose_stem("06_Attention (1)")
        == loose_stem("copy of 06_attention")
        == loose_stem("06_attention")
        == "06attention"
    )
    assert (
        loose_stem("06_attention_v2")
        == loose_stem("06_attention_final")
        == loose_stem("06_attention-1")
        == "06attention"
    )
    assert loose_stem("06_attention_notes") != loose_stem("06_attention")
    assert loose_stem("07_position") != loose_stem("06_attention")


def test_of_several_candidates_the_newest_is_graded_and_the_others_named(tmp_path):
    subs = _class(tmp_path, {"ada/06_attention (1).ipynb": exercise(), "ada/06_attention (2).ipynb": exercise()})
    os.utime(subs / "ada" / "06_attention (1).ipynb", (time.time(), time.time() + 60))
    found, _ = resolve_notebooks(subs / "ada", ["06_attention"], subs)
    path, notes = found["06_attention"]
    assert path.name == "06_attention (1).ipynb" and "not graded: `06_attention (2).ipynb`" in " ".join(notes)


def test_a_notebook_renamed_beyond_recognition_is_found_by_what_it_was_built_from(tmp_path):
    nb = exercise()
    nb["metadata"]["course_lib"]["built_from"] = "solutions/06_attention.ipynb"
    subs = _class(
        tmp_path,
        {
            "ada/homework final.ipynb": nb,
            "ada/scratch.ipynb": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        },
    )
    [job], warnings = discover(subs, _solutions(tmp_path, "06_attention"), ["06_attention"])
    assert job.submission.name == "homework final.ipynb"
    assert any("made from this assignment's notebook" in n for n in job.notes)
    assert any("`scratch.ipynb` matches no assignment" in n for n in job.notes), (
        "the other notebook is named, not silently dropped"
    )


def test_macos_metadata_hidden_folders_and_loose_files_are_not_students(tmp_path):
    subs = _class(
        tmp_path,
        {
            "ada/06_attention.ipynb": exercise(),
            "__MACOSX/ada/._06_attention.ipynb": b"\0\5\26\7",
            ".ipynb_checkpoints/x.ipynb": exercise(),
            "notes.txt": "hi",
            "bob/.ipynb_checkpoints/06_attention-checkpoint.ipynb": exercise(),
        },
    )
    jobs, warnings = discover(subs, _solutions(tmp_path, "06_attention"), ["06_attention"])
    assert [j.student for j in jobs] == ["ada", "bob"]
    bob = jobs[1]
    assert bob.submission is None and bob.why == "No 06_attention.ipynb was submitted."
    assert any("hidden or macOS metadata: ignored" in n for n in bob.notes), (
        "a checkpoint is not graded, and bob is told"
    )
    assert any(w.startswith("__MACOSX: a hidden folder or macOS metadata") for w in warnings)
    assert any(w.startswith("notes.txt: a file, not a student folder") for w in warnings)


def test_ids_are_one_student_whatever_their_case_or_unicode_form(tmp_path):
    """low (19): Ada/ada and NFC/NFD "José" were two students each. A folder takes the id the gradebook
    already has; two folders that are one id are graded once, with a warning and a note."""
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    subs = _class(
        tmp_path,
        {
            "Ada/06_attention.ipynb": exercise(),
            "ada/06_attention.ipynb": exercise(),
            f"{nfd}/06_attention.ipynb": exercise(),
            f"{nfc}/06_attention.ipynb": exercise(),
        },
    )
    sols = _solutions(tmp_path, "06_attention")
    jobs, warnings = discover(subs, sols, ["06_attention"], known_ids=["ada"])
    assert [j.student for j in jobs] == [nfc, "ada"], "NFC, and the gradebook's spelling"
    assert jobs[0].submission.parent.name == nfc and jobs[1].submission.parent.name == "ada"
    assert (
        "Ada: the same student as the folder ada (ids are matched ignoring case and Unicode form: both are "
        "ada); only ada was graded" in warnings
    ), warnings
    assert any(f"`{nfd}` is the same student id as `{nfc}`" in n for n in jobs[0].notes), jobs[0].notes
    jobs, _ = discover(subs, sols, None, students=["ADA"], known_ids=["ada"])
    assert [j.student for j in jobs] == ["ada"], "--student matches the same way"


def test_a_hidden_folder_is_a_row_that_says_why_it_was_not_graded(tmp_path):
    """low (19): a .hidden folder got no row at all."""
    subs = _class(tmp_path, {".ada/06_attention.ipynb": exercise(), "bob/06_attention.ipynb": exercise()})
    jobs, warnings = discover(subs, _solutions(tmp_path, "06_attention"), None)
    assert [(j.student, j.status, j.submission) for j in jobs] == [
        (".ada", "unreadable", None),
        ("bob", "not submitted", jobs[1].submission),
    ]
    assert "hidden (its name starts with a dot)" in jobs[0].why and any(
        w.startswith(".ada: a hidden folder") for w in warnings
    )


def test_not_submitted_rows_only_for_assignments_the_teacher_names(tmp_path):
    """One student handing in 07 early gave all the others a '0/17 not submitted' row for 07."""
    files = {f"s{i}/06_attention.ipynb": exercise() for i in range(5)}
    files["s0/07_position.ipynb"] = exercise()
    subs = _class(tmp_path, files)
    sols = _solutions(tmp_path, "06_attention", "07_position")
    jobs, _ = discover(subs, sols, None)
    assert sorted((j.student, j.solution.stem) for j in jobs) == sorted(
        [(f"s{i}", "06_attention") for i in range(5)] + [("s0", "07_position")]
    )
    jobs, _ = discover(subs, sols, ["07_position"])
    assert [(j.student, j.submission is not None) for j in jobs] == [("s0", True)] + [
        (f"s{i}", False) for i in range(1, 5)
    ]


def test_with_a_roster_absent_students_get_rows_and_strangers_do_not(tmp_path):
    subs = _class(
        tmp_path,
        {
            "ab1/06_attention.ipynb": exercise(),
            "Zoe Muller/06_attention.ipynb": exercise(),
            "visitor/06_attention.ipynb": exercise(),
        },
    )
    roster = parse_roster("student_id,name\nab1,Ada Byron\nzm42,Zoë Müller\nabs,Absent Student\n")
    jobs, warnings = discover(subs, _solutions(tmp_path, "06_attention"), ["06_attention"], roster)
    assert [(j.student, j.submission is not None) for j in jobs] == [("ab1", True), ("abs", False), ("zm42", True)]
    assert "No folder for abs" in jobs[1].why
    assert "Zoe Muller: taken as zm42 (Zoë Müller), matched by name" in warnings
    assert "visitor: not on the roster; not graded" in warnings
    jobs, _ = discover(subs, _solutions(tmp_path, "06_attention"), None, roster)
    assert [j.student for j in jobs] == ["ab1", "zm42"], "no assignment named: no 'not submitted' rows"


def test_one_student_can_be_regraded_alone(tmp_path):
    subs = _class(tmp_path, {f"s{i}/06_attention.ipynb": exercise() for i in range(4)})
    jobs, _ = discover(subs, _solutions(tmp_path, "06_attention"), None, students=["s2"])
    assert [j.student for j in jobs] == ["s2"]
    with pytest.raises(ValueError, match="no folder in .* for s9"):
        discover(subs, _solutions(tmp_path, "06_attention"), None, students=["s9"])


# --- provenance -----------------------------------------------------------------------------------------


def test_grading_with_other_solutions_than_before_is_refused_unless_asked(book, tmp_path):
    """Forgetting --solutions silently graded with the public tests."""
    record(book, result("ada", 4.0), sol_sha="private-sha")
    public = {"06_attention": (REPO / "solutions" / "06_attention.ipynb", "public-sha")}
    with pytest.raises(
        ValueError,
        match=r"(?s)06_attention was graded before with /private/solutions/06_attention.ipynb.*"
        r"If you forgot --solutions, pass the folder used before",
    ):
        check_provenance(book, public, allow_new=False)
    said = check_provenance(book, public, allow_new=True)
    assert said and "grading with new solutions" in said[0]
    assert check_provenance(book, {"06_attention": (Path("/x"), "private-sha")}, allow_new=False) == []


def test_each_row_records_the_solutions_that_graded_it(book, tmp_path):
    record(book, result("ada", 4.0), sol_sha="abc123")
    write_exports(book, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "grades.json").read_text())
    row = data["results"][0]
    assert row["solutions_path"] == "/private/solutions/06_attention.ipynb" and row["solutions_sha256"] == "abc123"
    assert row["graded_at"] and row["submitted_at"] == "2026-12-01T10:00:00+00:00"


# --- cells a learner added ------------------------------------------------------------------------------


def test_added_cells_are_named_and_a_name_error_they_explain_says_so():
    """A helper from an added cell passed in `course check` and cost 5 points in grading with only
    `NameError: my_scale` to go on."""
    nb = learner()
    nb["cells"].insert(
        5,
        {
            "cell_type": "code",
            "id": "mine",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "def my_scale(x):\n    return x / 2\n",
        },
    )
    added = Submission.parse(nb, Assignment.from_notebook(solution(), "00_welcome")).added
    assert [(a.position, a.first_line, a.defines, a.why) for a in added] == [
        (6, "def my_scale(x):", frozenset({"my_scale"}), "added")
    ]
    assert "1 code cell(s) you added were not run" in added_cells_note(
        added
    ) and "`def my_scale(x):`" in added_cells_note(added)
    hint = added_cell_hint("NameError: name 'my_scale' is not defined", added)
    assert (
        "`my_scale` is defined in a cell you added (cell 6: `def my_scale(x):`)" in hint
        and "Move it into the answer cell" in hint
    ), hint
    assert added_cell_hint("NameError: name 'other' is not defined", added) == ""


def test_a_failure_past_the_hidden_mark_is_told_without_the_checks_words_even_once_made_inert():
    """With --hide-hidden-inputs a test cell prints HIDDEN_MARK where its hidden part starts; the grader
    stores a failed cell's output made inert, which writes the mark's control characters out. Either
    way the failure is told as "a hidden test failed", without the check's words (its inputs)."""
    assignment = Assignment.from_notebook(solution(), "00_welcome")
    submission = Submission.parse(learner(), assignment)
    test = assignment.tests[0]
    ok = {c.index: CellRun("ok") for c in assignment.cells}
    for stdout in (HIDDEN_MARK, inert(f"checking...\n{HIDDEN_MARK}\n")):
        runs = {**ok, test.index: CellRun("error", "AssertionError", "answer == 43 failed", stdout)}
        told = score(assignment, submission, runs, hide_hidden=True).tests[0]
        assert told.status == "failed" and told.message == HIDDEN_FAILED, (repr(stdout), told)
        shown = score(assignment, submission, runs).tests[0]  # without the option: the check's own words
        assert "answer == 43" in shown.message, shown
    visible = {**ok, test.index: CellRun("error", "AssertionError", "answer == 43 failed", "checking...\n")}
    assert "answer == 43" in score(assignment, submission, visible, hide_hidden=True).tests[0].message, (
        "a failure before the mark is in the visible part: the learner sees it"
    )


# --- the class report -----------------------------------------------------------------------------------


def test_the_report_counts_outcomes_per_exercise_and_the_common_hints(book, tmp_path):
    for i in range(6):
        record(book, result(f"s{i}", 4.0 if i < 2 else 2.0))
    record(book, result("gone", 0.0, status="not submitted"), sha=None)
    summaries, missing = summarize(book.rows())
    ex1, ex2 = summaries["06_attention"]
    assert (ex1.counts["passed"], ex1.submitted) == (6, 6) and ex1.pass_rate == 1.0
    assert (ex2.counts["passed"], ex2.counts["not attempted"], ex2.submitted) == (2, 4, 6), (
        "not submitted is not a failure"
    )
    assert missing["06_attention"] == 1
    text, figures = write_report(book, tmp_path / "out")
    assert "| Exercise 2: By hand | 2 (33%) | 0 | 0 | 4 | 0 | 0.67 / 2 |" in text, text
    assert "Lowest pass rate: **Exercise 2: By hand** (33%)" in text
    assert [f.name for f in figures] == ["report-06_attention.png"] and figures[0].read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="has no results for 99_nothing"):
        write_report(book, tmp_path / "out", ["99_nothing"])


def test_the_report_groups_the_same_mistake_told_with_different_numbers(book):
    msg = "✘ scores.shape: ({}, 7) is not right.\n  Hint: it looks like you transposed K."
    for i in range(3):
        t = [Outcome("ex1_test", "Exercise 1: Shapes", 0.0, 2.0, "failed", msg.format(i + 3))]
        record(book, result(f"s{i}", 0.0, tests=t))
    [ex1] = summarize(book.rows())[0]["06_attention"]
    assert ex1.hints.most_common(1) == [("it looks like you transposed K.", 3)]


# --- keeping a class's work private ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "submissions/ada/06_attention.ipynb",
        "grades/grades.csv",
        "grading-output/gradebook.db",
        "grading-output/feedback/ada/06_attention.md",
    ],
)
def test_a_classes_work_and_grades_are_ignored_by_git(path):
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
    assert done.returncode == 0, f"{path} would be committed: add it to .gitignore"


def test_nbgraders_submitted_folder_is_graded_as_it_is(tmp_path):
    """nbgrader's exchange collects into submitted/<student>/<assignment>/<notebook> with a timestamp.txt beside it."""
    from course_grader.discover import submission_time

    subs = _class(
        tmp_path,
        {
            "ada/06_attention/06_attention.ipynb": exercise(),
            "ada/06_attention/timestamp.txt": "2026-12-01 22:59:00.123456 UTC\n",
        },
    )
    [job], warnings = discover(subs, _solutions(tmp_path, "06_attention"), ["06_attention"])
    assert job.submission == subs / "ada" / "06_attention" / "06_attention.ipynb" and job.notes == [], job.notes
    when, source, digest = submission_time(job, subs)
    assert (when, source) == ("2026-12-01T22:59:00+00:00", "timestamp.txt") and len(digest) == 64


# --- regrades are visible ----------------------------------------------------------------------------


def test_an_overwritten_score_goes_into_the_history_and_the_feedback_says_why(book, tmp_path):
    record(book, result("ada", 4.0), sha="f", sol_sha="v1")
    run = book.start_run("course grade ...", "/private", reason="the hidden test of exercise 2 was too strict")
    record(book, result("ada", 2.0), sha="f", sol_sha="v2", run=run)  # the same file: the same attempt, graded again
    book.finish_run(run, [])
    [h] = book.history("ada", "06_attention")
    assert (h["score"], h["solutions_sha256"]) == (4.0, "v1")
    assert h["reason"] == "the hidden test of exercise 2 was too strict"
    [row] = book.rows()
    assert row.regrades[0]["old"] == 4 and row.regrades[0]["new"] == 2
    text = feedback_markdown(row)
    assert "(the hidden test of exercise 2 was too strict): your score for the exercises went from 4 to 2." in text, (
        text
    )
    write_exports(book, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "grades.json").read_text())
    assert data["results"][0]["regrades"][0]["reason"].startswith("the hidden test")


def test_warnings_describe_the_gradebook_as_it_is_now(book, tmp_path):
    record(book, result("ada", 4.0), sha="a", sol_sha="v1")
    record(book, result("bob", 4.0), sha="b", sol_sha="v1")
    record(book, result("cy", 0.0, status="not submitted"), sha=None, sol_sha="v0")  # graded nothing: not counted
    assert book.state_warnings() == []
    record(book, result("ada", 2.0), sha="a", sol_sha="v2")  # a partial regrade with new solutions
    [w] = book.state_warnings()
    assert "2 versions of the solutions" in w and "bob" in w
    assert "regrade the 1 student(s) graded with the older one(s)" in w
    write_exports(book, tmp_path / "out")
    assert any("2 versions" in x for x in json.loads((tmp_path / "out" / "grades.json").read_text())["warnings"])
    record(book, result("bob", 4.0), sha="b", sol_sha="v2")  # the rest of the class regraded
    assert book.state_warnings() == []
    write_exports(book, tmp_path / "out")
    assert not json.loads((tmp_path / "out" / "grades.json").read_text())["warnings"], "gone once consistent again"


def test_grade_changes_compare_what_the_lms_gets_per_exercise_and_part(book):
    """A regrade's summary compares the finals the LMS gets: exercises, marks, the late penalty, adjustments."""
    from course_grader.changes import grade_changes, summarize_changes

    book.set_deadline(Deadline("06_attention", datetime(2026, 12, 1, 12, tzinfo=UTC), 25.0, 50.0, 0.0))
    for sid in ("ada", "bob", "cy", "dee"):
        record(book, result(sid, 4.0), sha=sid)  # at 10:00 on the day: on time
    before = {(r.student, r.assignment): r for r in book.rows()}
    hashes = book.file_hashes()
    record(book, result("ada", 2.0), sha="ada")
    record(book, result("bob", 2.0), sha="other")
    record(book, result("cy", 4.0), sha="cy")
    record(book, result("dee", 4.0), sha="dee", when="2026-12-02T10:00:00+00:00")  # a day late: -25% of 4
    after = {(r.student, r.assignment): r for r in book.rows()}
    keys = [(s, "06_attention") for s in ("ada", "bob", "cy", "dee")]
    digests = {("ada", "06_attention"): "ada", ("bob", "06_attention"): "other", ("cy", "06_attention"): "cy"}
    digests[("dee", "06_attention")] = "dee"
    changes = grade_changes(before, after, keys, digests, {"ada": "Ada Byron (ada)"}, hashes)
    assert [(c.student, c.old, c.new, c.kind) for c in changes] == [
        ("ada", 4, 2, "regrade"),
        ("bob", 4, 2, "new attempt"),
        ("dee", 4, 3, "regrade"),
    ], "cy's final did not move; dee's did, through the late penalty alone"
    assert changes[0].exercises == [("Exercise 2: By hand", 2.0, 0.0)]
    assert changes[2].parts == [("late penalty", 0.0, 1.0)] and changes[2].exercises == []
    lines = summarize_changes(changes, dry_run=True)
    assert lines[0] == "2 grade(s) would change (the same files graded again): final 4 → 2 (1), 4 → 3 (1)", lines
    assert "  06_attention, Exercise 2: By hand: 2 student(s) down" in lines
    assert "  06_attention, late penalty: 1 student(s) up" in lines
    assert "  Ada Byron (ada), 06_attention: final 4 → 2 (Exercise 2: By hand: 2 → 0)" in lines
    assert "  dee, 06_attention: final 4 → 3 (late penalty: 0 → 1)" in lines
    assert summarize_changes([]) == ["No earlier grade changed."]


# --- rosters as the LMSs export them -------------------------------------------------------------------

CANVAS = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Integration ID,Section,04 Word Vectors (12345),Current Score\r\n"
    "    Points Possible,,,,,,18.00,(read only)\r\n"
    ",,,,,,Manual Posting,\r\n"
    '"Müller, Zoë",48100,S1,zoe@uni.example,,A,,0.00\r\n'
    '"Student, Test",49999,,c4ca4238a0b923820dcc509a6f75849b,,A,,\r\n'
    '"Nguyễn, Văn An",48101,S2,an@uni.example,,B,,\r\n'
)
MOODLE = (
    "First name,Last name,ID number,Institution,Department,Email address,Assignment: Word vectors (Real),"
    "Last downloaded from this course\r\nZoë,Müller,M1,Uni,Phys,zoe@uni.example,-,1764000000\r\n"
    "An,Nguyễn,M2,Uni,Phys,an@uni.example,-,1764000000\r\n"
)


def test_a_canvas_gradebook_export_is_a_roster_as_it_is():
    roster = parse_roster(CANVAS.lstrip("\ufeff"), "canvas.csv")
    assert (roster.kind, roster.id_column) == ("canvas", "SIS User ID")
    assert [(s.id, s.name, s.email, s.status) for s in roster.students] == [
        ("S1", "Müller, Zoë", "zoe@uni.example", "active"),
        ("c4ca4238a0b923820dcc509a6f75849b", "Student, Test", "", "test"),
        ("S2", "Nguyễn, Văn An", "an@uni.example", "active"),
    ]
    assert roster.by_id["S1"].extra == {
        "ID": "48100",
        "SIS User ID": "S1",
        "SIS Login ID": "zoe@uni.example",
        "Integration ID": "",
        "Section": "A",
    }, "identity columns only, no grades"
    assert roster.lms_columns == ["04 Word Vectors (12345)"]
    assert roster.find("48100")[0].id == "S1", "a download's Canvas user id finds the student"
    assert (
        "read as a Canvas gradebook export: 2 student(s) (1 test), ids from the column 'SIS User ID'"
        in roster.describe()
    )
    assert parse_roster(CANVAS, id_column="SIS Login ID").students[0].id == "zoe@uni.example"
    without_sis = CANVAS.replace("S1,", ",")  # one student without an SIS id: the next column holds for everyone
    assert parse_roster(without_sis).id_column == "SIS Login ID"
    with pytest.raises(RosterError, match="has no column 'Matrikel'"):
        parse_roster(CANVAS, id_column="Matrikel")


def test_a_moodle_grade_export_is_a_roster_as_it_is():
    roster = parse_roster(MOODLE, "moodle.csv")
    assert (roster.kind, roster.id_column) == ("moodle", "ID number")
    assert roster.lms_columns == ["Assignment: Word vectors (Real)"]
    assert [(s.id, s.name, s.email) for s in roster.students] == [
        ("M1", "Zoë Müller", "zoe@uni.example"),
        ("M2", "An Nguyễn", "an@uni.example"),
    ]
    no_numbers = MOODLE.replace(",M1,", ",,").replace(",M2,", ",,")  # a site that does not use ID numbers
    assert parse_roster(no_numbers).id_column == "Email address"


def test_a_dropped_student_stays_dropped_when_the_roster_is_imported_again(book):
    book.set_roster(parse_roster(CANVAS))
    book.set_status("S2", "dropped")
    book.set_roster(parse_roster(CANVAS))
    assert book.roster().by_id["S2"].status == "dropped" and book.roster().by_id["S1"].status == "active"
    with pytest.raises(ValueError, match="'nobody' is not on the roster"):
        book.set_status("nobody", "dropped")


def test_dropped_and_test_students_get_no_missing_work_rows(tmp_path, book):
    roster = parse_roster("student_id,name\nada,Ada\nbob,Bob\ncy,Cy\n")
    roster.by_id["bob"].status, roster.by_id["cy"].status = "dropped", "test"
    subs = _class(tmp_path, {"bob/06_attention.ipynb": exercise(), "cy/06_attention.ipynb": exercise()})
    jobs, warnings = discover(subs, _solutions(tmp_path, "06_attention"), ["06_attention"], roster)
    assert [(j.student, j.submission is not None) for j in jobs] == [("ada", False), ("cy", True)], jobs
    assert any("bob: Bob (bob) has dropped the course" in w for w in warnings), warnings


# --- exports an LMS imports without edits ---------------------------------------------------------------


def test_lms_files_leave_missing_work_empty_and_say_what_is_zero(book):
    book.set_roster(parse_roster(CANVAS))
    book.set_status("S2", "dropped")
    record(book, result("S1", 0.0, status="unreadable", notes=["The submission could not be read: not JSON."]), sha="x")
    record(book, result("c4ca4238a0b923820dcc509a6f75849b", 4.0), sha="t")
    record(book, result("S2", 4.0), sha="d")
    with pytest.raises(ValueError, match="06_attention fits no column of the roster's Canvas export"):
        lms_export(book, "canvas")
    export = lms_export(book, "canvas", new_column=True)
    assert export.table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "06_attention"], (
        "no Canvas column fits 06_attention: a new one, when asked for"
    )
    assert export.table[1][0].strip() == "Points Possible" and export.table[1][5] == "4"
    assert export.table[2] == ["Müller, Zoë", "48100", "S1", "zoe@uni.example", "A", "0"]
    assert export.table[3] == ["Student, Test", "49999", "", "c4ca4238a0b923820dcc509a6f75849b", "A", ""], "ID filled"
    assert export.table[4][1] == "48101" and export.table[4][5] == "", "dropped: empty"
    assert (
        "1 submission(s) that could not be graded were exported as 0: Müller, Zoë (S1) (06_attention): "
        "unreadable: The submission could not be read: not JSON"
    ) in export.notes[0]
    assert any("left empty for dropped students" in n for n in export.notes)
    mapped = lms_export(book, "canvas", columns={"06_attention": "Attention (999)"})
    assert mapped.table[0][5] == "Attention (999)" and lms_export(book, "canvas").table[0][5] == "Attention (999)", (
        "a mapping given once is remembered"
    )
    record(book, result("S1", 0.0, status="not submitted"), sha=None)
    with pytest.raises(ValueError, match="no grades for 99_x"):
        lms_export(book, "canvas", ["99_x"])


def test_an_assignment_finds_its_lms_column_by_name(book):
    book.set_roster(parse_roster(CANVAS.replace("04 Word Vectors (12345)", "06 Attention (12345)")))
    record(book, result("S1", 4.0, status="not submitted"), sha=None)
    export = lms_export(book, "canvas")
    assert export.table[0][5] == "06 Attention (12345)" and export.table[2][5] == "", "not submitted: empty"
    assert lms_export(book, "canvas", missing="zero").table[2][5] == "0"
    moodle_book = book
    moodle_book.set_roster(parse_roster(MOODLE.replace("Word vectors", "Attention")))
    export = lms_export(moodle_book, "moodle")
    assert export.table[0] == ["Username", "ID number", "Email address", "Full name", "Assignment: Attention (Real)"]


# --- marks for written answers, adjustments with a grader ------------------------------------------------


def _with_written_answer(book, sid="ada", answer="Squares cannot cancel.", sha="f"):
    res = result(sid, 4.0)
    res.manual = [
        {
            "grade_id": "ex3_answer",
            "exercise": "Exercise 3: In words",
            "points": 0.0,
            "max_points": 2.0,
            "status": "to be marked",
            "message": "",
            "answer": answer,
            "answer_sha256": hashlib.sha256(answer.encode()).hexdigest(),
            "after": "ex2_test",
        }
    ]
    record(book, res, sha=sha)


def test_a_mark_joins_the_score_until_the_answer_changes(book):
    _with_written_answer(book)
    [row] = book.rows()
    assert (row.score, row.max_score, row.to_mark) == (4.0, 6.0, 1)
    assert [t["grade_id"] for t in row.tests] == ["ex1_test", "ex2_test", "ex3_answer"], "in notebook order"
    sha = row.tests[2]["answer_sha256"]
    book.add_mark(
        "ada",
        "06_attention",
        "ex3_answer",
        1,
        rubric="half",
        comment="Why can they not?",
        grader="Ana",
        answer_sha256=sha,
    )
    book.add_mark(
        "ada", "06_attention", "ex3_answer", 1.5, comment="Better on second reading.", grader="Ben", answer_sha256=sha
    )
    [row] = book.rows()
    assert (row.score, row.to_mark, row.tests[2]["status"], row.tests[2]["grader"]) == (5.5, 0, "marked", "Ben")
    text = feedback_markdown(row)
    assert "| Exercise 3: In words | 1.5 / 2 | marked |" in text and "> Better on second reading." in text, text
    with pytest.raises(ValueError, match="worth at most 2"):
        book.add_mark("ada", "06_attention", "ex3_answer", 3, grader="Ana", answer_sha256=sha)
    _with_written_answer(book, answer="Another answer, handed in again.", sha="g")
    [row] = book.rows()
    assert (row.score, row.to_mark, row.tests[2]["status"]) == (4.0, 1, "to be marked")
    assert "marked again" in row.tests[2]["message"]


def test_adjustments_record_their_grader_and_can_be_capped(book):
    record(book, result("ada", 4.0))
    book.add_adjustment("ada", "06_attention", 3, "extra credit", grader="Ana")
    [row] = book.rows()
    assert row.final == 7.0 and book.adjustments()[0].grader == "Ana", "extra credit above the maximum is allowed"
    book.add_adjustment("ada", "06_attention", 1, "and a bit more", cap=True)
    [row] = book.rows()
    assert row.final == 4.0, "--cap: never above the maximum"
    assert book.adjustments()[1].grader, "the login name when none is given"


# --- Monday morning ----------------------------------------------------------------------------------------


def test_the_report_names_who_needs_a_look_and_shows_the_distribution(book, tmp_path):
    from course_grader.report import attention

    book.set_roster(parse_roster("student_id,name\nada,Ada\nbob,Bob\ncy,Cy\ndi,Di\nel,El\n"))
    record(book, result("ada", 4.0))
    timed = [
        Outcome(
            "ex1_test",
            "Exercise 1: Shapes",
            0.0,
            2.0,
            "error",
            "the cell went past its time limit: more than 20 s of CPU time",
            "timeout",
        ),
        Outcome("ex2_test", "Exercise 2: By hand", 2.0, 2.0, "passed", ""),
    ]
    record(book, result("bob", 2.0, tests=timed))
    helper = [
        Outcome(
            "ex1_test",
            "Exercise 1: Shapes",
            0.0,
            2.0,
            "error",
            "NameError: name 'f' is not defined\n`f` is "
            "defined in a cell you added (`def f`), which the grader does not run",
            "added-cell",
        ),
        # a learner's own message that reads like a limit or an added cell: named by nothing but its words
        Outcome(
            "ex2_test",
            "Exercise 2: By hand",
            0.0,
            2.0,
            "failed",
            "raised ValueError: the time limit; in a cell you added",
        ),
    ]
    record(book, result("cy", 0.0, tests=helper))
    record(book, result("di", 0.0, status="unreadable", notes=["The submission could not be read: not JSON."]), sha="d")
    record(book, result("el", 0.0, status="not submitted"), sha=None)
    run = book.start_run("course grade", "/p", reason="fixed a test")
    record(book, result("ada", 2.0), sol_sha="s2", run=run)
    book.finish_run(run, [])
    rows = book.rows()
    found = attention(rows, "06_attention", {})
    assert found.not_submitted == ["El (el)"] and found.not_graded[0].startswith("Di (di): unreadable: The submission")
    assert found.timed_out == ["Bob (bob) (Exercise 1: Shapes)"] and found.added_cell == ["Cy (cy) (-2)"]
    assert found.regraded[0].startswith("Ada (ada): 4 → 2 (regraded ")
    text, _ = write_report(book, tmp_path / "out")
    assert "3 submission(s) graded, 1 could not be graded, 1 not submitted." in text, text
    assert "Scores of the 3 graded submission(s), of 4: mean 1.33, median 2, lowest 0, highest 2." in text, text


def test_report_hints_keep_their_numbers_and_are_cut_between_words(book):
    from course_grader.report import _cut

    long = "it looks like you answered 0.33: " + "a constant sub-layer has derivative 0, " * 8 + "E.index_add_ in place"
    for i, value in enumerate(("0.33", "0.5", "0.33")):
        hint = f"✘ x\n  Hint: it looks like you answered {value}: a constant has derivative 0"
        t = [Outcome("ex1_test", "Exercise 1: Shapes", 0.0, 2.0, "failed", hint)]
        record(book, result(f"s{i}", 0.0, tests=t))
    [ex1] = summarize(book.rows())[0]["06_attention"]
    [(key, n)] = ex1.hints.most_common(1)
    assert n == 3
    assert ex1.hint_text(key) == "it looks like you answered 0.33: a constant has derivative 0 (numbers vary)"
    cut = _cut(long)
    assert len(cut) <= 202 and cut.endswith(" …") and cut[:-2] in long and long[len(cut) - 2] == " "
