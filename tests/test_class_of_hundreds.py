"""What a teacher of hundreds needs beside grading, each through the `course` command as the guide shows
it: a student's own deadline (an extension, told in the feedback as one), every student's feedback back
through the LMS in the zip it takes (named as its download named each student's file, read back here by
the LMS's own rule), Moodle's namesakes mapped once and the mapping kept, and an export that refuses to
turn an assignment into a new LMS column without being asked. No kernel: grades are recorded directly."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from contextlib import closing
from pathlib import Path

import pytest
from test_gradebook import record, result
from test_lms import make_zip, notebook

from course_grader.gradebook import open_gradebook
from course_grader.roster import parse_roster
from course_lib import cli

A = "06_attention"


def run(capsys, *argv) -> tuple[int, str]:
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr().out


def grades(out: Path) -> dict[str, dict]:
    return {r["student_id"]: r for r in csv.DictReader(io.StringIO((out / "grades.csv").read_text("utf-8-sig")))}


def feedback(out: Path, sid: str, assignment: str = A) -> str:
    return (out / "feedback" / sid / f"{assignment}.md").read_text(encoding="utf-8")


# --- a student's own deadline ---------------------------------------------------------------------------


@pytest.fixture
def late_class(tmp_path):
    """Ada and Bob handed in 06 on 3 December, 08:00 UTC: 1 day 8 hours after its deadline."""
    out = tmp_path / "grades"
    with closing(open_gradebook(out)) as book:
        book.set_roster(parse_roster("student_id,name\nada,Ada Byron\nbob,Bob Smith\n"))
        record(book, result("ada", 4.0), when="2026-12-03T08:00:00+00:00")
        record(book, result("bob", 4.0), when="2026-12-03T08:00:00+00:00")
    return out


def test_an_extension_moves_one_students_deadline_and_the_feedback_says_so(late_class, capsys):
    out = late_class
    code, said = run(capsys, "deadline", A, "2026-12-04T00:00+00:00", "--student", "ada", "--out", out)
    assert code == 2 and "has no deadline yet: set it first" in said, said
    assert run(capsys, "deadline", A, "2026-12-02T00:00+00:00", "--penalty", "10", "--out", out)[0] == 0
    assert grades(out)["ada"]["late_penalty"] == "0.8", "2 started days late, -10% of 4 each"

    code, said = run(
        capsys, "deadline", A, "2026-12-04T00:00+00:00", "--student", "ada", "--grader", "Prof. Keller", "--out", out
    )
    assert code == 0 and "Ada Byron (ada): extension of 06_attention to 2026-12-04T00:00:00+00:00" in said, said
    assert "extension: Ada Byron (ada) to 2026-12-04T00:00:00+00:00 (given by Prof. Keller on" in said, said
    assert "remove: course deadline 06_attention --student ada --remove" in said, said
    rows = grades(out)
    assert (rows["ada"]["late_penalty"], rows["ada"]["final"]) == ("0", "4"), rows["ada"]
    assert (rows["bob"]["late_penalty"], rows["bob"]["final"]) == ("0.8", "3.2"), "nobody else's deadline moves"
    text = feedback(out, "ada")
    assert "- Extension to 2026-12-04 00:00 UTC (on time)" in text and "Late penalty" not in text, text
    assert "**Score: 4 / 4**" in text and "+0.8" not in text, "no penalty taken back by hand"

    # a shorter extension replaces it; the penalty counts from the student's own deadline
    run(capsys, "deadline", A, "2026-12-02T12:00+00:00", "--student", "ada", "--out", out)
    text = feedback(out, "ada")
    assert (
        "- Late penalty: -0.4 (submitted 20 hours after your extended deadline (2026-12-02 12:00 UTC), at "
        "2026-12-03 08:00 UTC: 1 started day, -10% each)"
    ) in text, text
    assert "- Extension to 2026-12-02 12:00 UTC\n" in text, text

    code, said = run(capsys, "deadline", A, "--student", "ada", "--remove", "--out", out)
    assert code == 0 and "removed the extension of Ada Byron (ada) for 06_attention" in said, said
    assert grades(out)["ada"]["late_penalty"] == "0.8" and "Extension" not in feedback(out, "ada")
    with closing(open_gradebook(out)) as book:
        kept = book.extensions(removed=True)
        assert [e.removed_at is not None for e in kept] == [True, True] and book.extensions() == [], kept
        assert kept[0].grader == "Prof. Keller" and kept[1].removed_by, kept


def test_an_extension_is_refused_when_it_cannot_be_one(late_class, capsys):
    out = late_class
    run(capsys, "deadline", A, "2026-12-02T00:00+00:00", "--out", out)
    for argv, message in [
        (("2026-12-01T00:00+00:00", "--student", "ada"), "an extension is later than the deadline"),
        (("2026-12-09T00:00+00:00", "--student", "ada", "--penalty", "5"), "the penalty stays the assignment's"),
        (("2026-12-09T00:00+00:00", "--student", "nobody"), "'nobody' is neither on the roster"),
        (("--student", "ada", "--remove"), "ada has no extension of 06_attention to remove"),
        (("--student", "ada"), "give the extended deadline"),
    ]:
        code, said = run(capsys, "deadline", A, *argv, "--out", out)
        assert code == 2 and message in said, (argv, said)


def test_a_later_deadline_for_everyone_outruns_an_extension(late_class, capsys):
    out = late_class
    run(capsys, "deadline", A, "2026-12-02T00:00+00:00", "--out", out)
    run(capsys, "deadline", A, "2026-12-03T00:00+00:00", "--student", "ada", "--out", out)
    assert grades(out)["ada"]["late_penalty"] == "0.4"
    run(capsys, "deadline", A, "2026-12-04T00:00+00:00", "--out", out)  # the class's deadline, moved past it
    assert grades(out)["ada"]["late_penalty"] == "0" and "Extension" not in feedback(out, "ada")
    with closing(open_gradebook(out)) as book:
        whole = {r.student: r for r in book.rows()}
        assert book.rows("ada", A) == [whole["ada"]], "one student's rows read alone are the same rows"


# --- feedback back through the LMS ------------------------------------------------------------------------


def canvas_rule(name: str) -> tuple[str, str]:
    """Canvas's Re-Upload Submissions: the first two numbers between underscores in a file's name are the
    student's user id and the id of the file they handed in."""
    numbers = [part for part in name.split("_") if part.isdigit()]
    return numbers[0], numbers[1]


def moodle_rule(name: str) -> tuple[str, str, str, str]:
    """Moodle's feedback zip: the first path part that splits on '_' (at most 5 parts) into a name, a numeric
    participant id, a plugin type and a plugin; (participant, type, plugin, the file's name)."""
    info = name.split("/")[0].split("_", 4)
    assert len(info) >= 4 and info[1].isdigit(), name
    return info[1], info[2], info[3], "/".join([*(info[4:] or [""]), *name.split("/")[1:]]).strip("/")


def _graded_from(out: Path, unpacked: list[str], others: dict[str, str]) -> None:
    """Grades for the unpacked students' files, and for `others` (student -> status) that no LMS zip brought."""
    with closing(open_gradebook(out)) as book:
        for sid in unpacked:
            record(book, result(sid, 3.0), sha=book.unpacked(sid, A)["sha256"])
        for sid, status in others.items():
            missing = status == "not submitted"
            record(book, result(sid, 0.0 if missing else 4.0, status), sha=None if missing else sid)


def test_feedback_goes_back_to_canvas_named_as_its_download_named_each_file(tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student_id,name,ID\njd1,Jane Doe,12345\nzm42,Zoë Müller,22222\nhand,Hand Edwards,33333\nab,Al Absent,44444\n",
        encoding="utf-8",
    )
    entries = {"jd1": "doejane_12345_90001_06_attention.ipynb", "zm42": "müllerzoë_late_22222_90002_06_attention.ipynb"}
    z = make_zip(tmp_path / "canvas.zip", [(e, notebook(sid)) for sid, e in entries.items()])
    out = tmp_path / "grades"
    code, said = run(
        capsys, "unpack", z, "--assignment", A, "--to", tmp_path / "subs", "--roster", roster, "--out", out
    )
    assert code == 0, said
    _graded_from(out, ["jd1", "zm42"], {"hand": "graded", "ab": "not submitted"})

    code, said = run(capsys, "export", "--feedback-zip", "canvas", "--assignment", A, "--out", out)
    assert code == 0, said
    path = out / f"feedback-canvas-{A}.zip"
    assert f"wrote {path}: 2 student(s)' feedback, for Canvas's Re-Upload Submissions on {A}" in said, said
    assert "left out (not unpacked from an LMS download): 1: hand" in said and "(never handed in): 1: ab" in said
    with zipfile.ZipFile(path) as zf:
        names = sorted(zf.namelist())
        assert names == [
            "doejane_12345_90001_06_attention-feedback.ipynb",
            "müllerzoë_late_22222_90002_06_attention-feedback.ipynb",
        ], names
        for sid, entry in entries.items():
            ours = next(n for n in names if canvas_rule(n) == canvas_rule(entry))
            nb = json.loads(zf.read(ours))
            text = "".join(nb["cells"][0]["source"])
            assert nb["nbformat"] == 4 and nb["cells"][0]["cell_type"] == "markdown", nb
            assert text == feedback(out, sid), f"{ours}: the student's own feedback, as a notebook"

    code, said = run(capsys, "export", "--feedback-zip", "moodle", "--assignment", A, "--out", out)
    assert code == 0 and "0 student(s)' feedback" in said, said
    assert "left out (unpacked from a download that is not Moodle's): 2: jd1, zm42" in said, said
    with closing(open_gradebook(out)) as book:
        record(book, result("jd1", 2.0, assignment="07_position"), sha="p")
    code, said = run(capsys, "export", "--feedback-zip", "canvas", "--out", out)
    assert code == 2 and "a feedback zip goes back to one assignment in the LMS: name it with --assignment" in said


def test_feedback_goes_back_to_moodle_named_as_its_download_named_each_participant(tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\nzm42,Zoë Müller\nll7,Li Lei\n", encoding="utf-8")
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            ("Zoë Müller_501_assignsubmission_file_/06_attention.ipynb", notebook("zoe")),  # a folder each
            ("Li Lei_502_assignsubmission_file_06_attention.ipynb", notebook("li")),  # flat
        ],
    )
    out = tmp_path / "grades"
    argv = ("unpack", z, "--assignment", A, "--to", tmp_path / "subs", "--roster", roster, "--out", out, "--tz", "UTC")
    assert run(capsys, *argv)[0] == 0
    _graded_from(out, ["zm42", "ll7"], {})
    code, said = run(capsys, "export", "--feedback-zip", "moodle", "--assignment", A, "--out", out)
    assert code == 0 and "for Moodle's Upload multiple feedback files in a zip" in said, said
    with zipfile.ZipFile(out / f"feedback-moodle-{A}.zip") as zf:
        found = {moodle_rule(n): zf.read(n).decode("utf-8") for n in zf.namelist()}
    assert sorted(found) == [
        ("501", "assignfeedback", "file", "06_attention-feedback.md"),
        ("502", "assignfeedback", "file", "06_attention-feedback.md"),
    ], sorted(found)
    assert found[("501", "assignfeedback", "file", "06_attention-feedback.md")] == feedback(out, "zm42")


# --- Moodle's namesakes ----------------------------------------------------------------------------------


def test_moodles_namesakes_are_mapped_once_and_the_mapping_is_kept(tmp_path, capsys):
    a2 = "02_markov_models"
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "student_id,name,email\ns123,Anh Nguyễn,anh1@uni.example\ns124,Anh Nguyễn,anh2@uni.example\n"
        "zm42,Zoë Müller,zoe@uni.example\n",
        encoding="utf-8",
    )
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            (f"Anh Nguyễn_731006_assignsubmission_file_/{a2}.ipynb", notebook("anh one")),
            (f"Anh Nguyễn_731007_assignsubmission_file_/{a2}.ipynb", notebook("anh two")),
            (f"Zoë Müller_731008_assignsubmission_file_/{a2}.ipynb", notebook("zoe")),
        ],
    )
    out = tmp_path / "grades"

    def unpack(to: str, *more: str) -> tuple[int, str, list[str]]:
        code, said = run(capsys, "unpack", z, "--assignment", a2, "--to", tmp_path / to, "--out", out, *more)
        return code, said, sorted(p.name for p in (tmp_path / to).iterdir()) if (tmp_path / to).is_dir() else []

    code, said, folders = unpack("week2", "--roster", str(roster))
    assert code == 0 and folders == ["Anh_Nguyen_731006", "Anh_Nguyen_731007", "zm42"], folders
    assert "not matched to the roster ('Anh Nguyễn' is ambiguous" in said, said
    assert "unpack again with --map 'Anh_Nguyen_731006=ID'" in said and "kept in the gradebook" in said, said
    assert "grading worksheet lists each 'Participant N' with the student's email" in said, said

    code, said, folders = unpack("again", "--map", "Anh_Nguyen_731006=s123", "--map", "731007=s124")
    assert code == 0 and folders == ["s123", "s124", "zm42"], (folders, said)
    assert "mapped by hand (kept in" in said and "Anh_Nguyen_731006 = s123, 731007 = s124" in said, said
    with closing(open_gradebook(out)) as book:
        assert book.lms_map("moodle") == {"731006": "s123", "731007": "s124"}
        assert book.unpacked("s123", a2)["entry"].startswith("Anh Nguyễn_731006_")

    code, said, folders = unpack("third")  # a new download of the same assignment: no --map needed
    assert code == 0 and folders == ["s123", "s124", "zm42"] and "ambiguous" not in said, said

    code, said, _ = unpack("bad", "--map", "Anh_Nguyen_731006=s999")
    assert code == 2 and "--map gives" in said and "'s999', which is not on the roster" in said, said
    code, said, _ = unpack("none", "--map", "Somebody_1=s123")
    assert code == 0 and "--map Somebody_1=s123: no student of this zip is 'Somebody_1'" in said, said
    code, said, _ = unpack("form", "--map", "731006")
    assert code == 2 and "--map takes LMS=ID" in said, said


# --- an assignment the LMS has no column for -----------------------------------------------------------------

CANVAS = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Attention (20102),Softmax and temperature (20104),"
    "Current Score\r\n    Points Possible,,,,,24,8,\r\n"
    '"Müller, Zoë",48100,S1,zoe@uni.example,A,,,\r\n"Nguyễn, An",48101,S2,an@uni.example,B,,,\r\n'
)


def test_an_assignment_without_an_lms_column_is_refused_and_the_unfilled_columns_named(tmp_path, capsys):
    (tmp_path / "canvas.csv").write_text(CANVAS, encoding="utf-8")
    out = tmp_path / "grades"
    assert run(capsys, "roster", "import", tmp_path / "canvas.csv", "--out", out)[0] == 0
    with closing(open_gradebook(out)) as book:
        for a in (A, "13_softmax_temperature"):
            record(book, result("S1", 4.0, assignment=a), sha=f"{a}-S1")
    code, said = run(capsys, "export", "--lms", "canvas", "--out", out)
    assert code == 2, said
    assert "13_softmax_temperature fits no column of the roster's Canvas export" in said, said
    assert "its grade columns still unfilled: 'Softmax and temperature (20104)'" in said, said
    assert '--column "13_softmax_temperature=Softmax and temperature (20104)"' in said and "--new-column" in said
    assert not (out / "canvas.csv").exists(), "no file an LMS would misread"

    code, said = run(capsys, "export", "--lms", "canvas", "--new-column", "--out", out)
    assert code == 0 and "written as new column(s) (--new-column): 13_softmax_temperature" in said, said
    header = next(csv.reader(io.StringIO((out / "canvas.csv").read_text("utf-8-sig"))))
    assert header[5:] == ["Attention (20102)", "13_softmax_temperature"], header

    mapping = "13_softmax_temperature=Softmax and temperature (20104)"
    code, said = run(capsys, "export", "--lms", "canvas", "--column", mapping, "--out", out)
    assert code == 0 and "new column" not in said, said
    header = next(csv.reader(io.StringIO((out / "canvas.csv").read_text("utf-8-sig"))))
    assert header[5:] == ["Attention (20102)", "Softmax and temperature (20104)"], header
    assert run(capsys, "export", "--lms", "canvas", "--out", out)[0] == 0, "the mapping is remembered"


# --- graded in parts -------------------------------------------------------------------------------------


def test_extensions_and_mapped_lms_ids_survive_course_merge(late_class, tmp_path, capsys):
    """A class graded in parts (a job array) and merged keeps each part's extensions and mapped LMS ids; two
    parts that map one LMS id to two students are a conflict."""
    import shutil

    from course_grader.merge import MergeConflict, merge_gradebooks

    run(capsys, "deadline", A, "2026-12-02T00:00+00:00", "--out", late_class)
    one, two = tmp_path / "part-1", tmp_path / "part-2"
    shutil.copytree(late_class, one)
    shutil.copytree(late_class, two)
    run(capsys, "deadline", A, "2026-12-04T00:00+00:00", "--student", "ada", "--out", one)
    with closing(open_gradebook(two)) as book:
        book.map_lms_id("moodle", "731006", "bob", "Bob_Smith_731006")
    merge_gradebooks([one, two], tmp_path / "merged")
    with closing(open_gradebook(tmp_path / "merged")) as book:
        assert [(e.student, e.due.isoformat()) for e in book.extensions()] == [("ada", "2026-12-04T00:00:00+00:00")]
        assert book.lms_map("moodle") == {"731006": "bob"}
        assert {r.student: r.late_penalty for r in book.rows()} == {"ada": 0.0, "bob": 0.8}
    with closing(open_gradebook(one)) as book:
        book.map_lms_id("moodle", "731006", "ada", "Ada_Byron_731006")
    with pytest.raises(MergeConflict, match="the moodle id 731006 is mapped to ada in .*part-1 and to bob in"):
        merge_gradebooks([one, two], tmp_path / "again")
