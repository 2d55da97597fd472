"""`course_grader.lms.unpack`: an LMS's submissions zip becomes submissions/<id>/NN_name.ipynb.

Every zip is built here with zipfile, named as Canvas, Moodle or a hand-made export names its
entries, with the awkward cases a real class brings (non-ASCII names, late and resubmitted work,
namesakes, macOS litter, files that are not notebooks) and the hostile ones an untrusted zip can
hold (zip-slip names, symbolic links, a zip bomb)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from course_grader.lms import UnpackError, safe_id, unpack
from course_grader.roster import parse_roster

A = "06_attention"
T1 = (2026, 11, 23, 14, 3, 6)  # zip times are even seconds
T2 = (2026, 11, 23, 15, 0, 0)
UTC = dt.timezone.utc


def notebook(tag: str) -> bytes:
    nb = {
        "cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": tag}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, ensure_ascii=False).encode()


def make_zip(path: Path, entries: list[tuple], compression=zipfile.ZIP_DEFLATED) -> Path:
    """entries: (name, data) or (name, data, date_time) or (name, data, date_time, mode)."""
    with zipfile.ZipFile(path, "w", compression) as zf:
        for e in entries:
            name, data = e[0], e[1]
            info = zipfile.ZipInfo(name, e[2] if len(e) > 2 else T1)
            info.compress_type = compression
            if len(e) > 3:
                info.external_attr = e[3] << 16
            zf.writestr(info, data)
    return path


def tag(path: Path) -> str:
    return json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"]


def written(dest: Path) -> dict[str, str]:
    return {p.parent.name: tag(p) for p in sorted(dest.glob(f"*/{A}.ipynb"))}


def warned(report, *needles: str) -> str:
    hits = [w for w in report.warnings if all(n in w for n in needles)]
    assert hits, f"no warning with {needles}; warnings were: {report.warnings}"
    return hits[0]


ROSTER = parse_roster(
    "student_id,name,email,ID\n"
    "jd1,Jane Doe,jane@example.org,12345\n"
    "zm42,Zoë Müller,zoe@example.org,22222\n"
    "ll7,李雷,li@example.org,33333\n"
    "js1,John Smith,js1@example.org,44444\n"
    "js2,John Smith,js2@example.org,55555\n",
    "roster.csv",
)


# --- Canvas -------------------------------------------------------------------------------------


@pytest.fixture
def canvas_zip(tmp_path):
    return make_zip(
        tmp_path / "canvas.zip",
        [
            ("doejane_12345_90001_06_attention.ipynb", notebook("jane first"), T1),
            ("doejane_12345_90007_06_attention-1.ipynb", notebook("jane resubmitted"), T1),
            ("müllerzoë_late_22222_90002_06_attention.ipynb", notebook("zoe"), T1),
            ("李雷_33333_90003_06_Attention.ipynb", notebook("li"), T1),
            ("李雷_33333_90004_notes.pdf", b"%PDF-1.4", T1),
            ("smithjohn_44444_90005_06_attention.ipynb", notebook("john 44444"), T1),
            ("smithjohn_55555_90006_06_attention.ipynb", notebook("john 55555"), T1),
            ("newstudent_LATE_77777_90008_06_attention.ipynb", notebook("new"), T1),
            ("absentee_88888_text.html", b"<p>I could not do it</p>", T1),
            ("__MACOSX/._doejane_12345_90001_06_attention.ipynb", b"\x00\x05", T1),
            (".DS_Store", b"\x00", T1),
        ],
    )


def test_canvas_with_a_roster(canvas_zip, tmp_path):
    dest = tmp_path / "submissions"
    report = unpack(canvas_zip, dest, assignment=A, roster=ROSTER, tz="UTC")
    assert report.layout == "canvas" and report.detected
    # the Canvas user id is the roster's ID column: namesakes are told apart, accents and scripts match
    assert written(dest) == {
        "jd1": "jane resubmitted",
        "zm42": "zoe",
        "ll7": "li",
        "js1": "john 44444",
        "js2": "john 55555",
        "newstudent_77777": "new",
    }
    assert report.students["jd1"] == "doejane_12345_90007_06_attention-1.ipynb"
    assert report.late == {"zm42", "newstudent_77777"}
    warned(
        report, "jd1", "kept the newest", "doejane_12345_90007_06_attention-1.ipynb", "not written: doejane_12345_90001"
    )
    warned(report, "ll7", "1 file(s) that are not notebooks", "李雷_33333_90004_notes.pdf")
    warned(report, "newstudent_LATE_77777_90008_06_attention.ipynb", "not in the roster", "'newstudent_77777'")
    warned(report, "absentee_88888", "no notebook", "absentee_88888_text.html")
    warned(report, "ignored 2 hidden or system file(s)", "__MACOSX/")
    warned(report, "Canvas writes the time it made the zip", "no submission time is recorded")
    assert not list(dest.glob("*/*timestamp.txt")), (
        "the download time is not a submission time: late penalties must not use it"
    )
    assert not (dest / "absentee_88888").exists() and not (dest / "__MACOSX").exists()
    assert "canvas download (detected)" in report.summary()
    assert "Marked late by Canvas: newstudent_77777, Zoë Müller (zm42)" in report.summary(), "names, not bare ids"
    assert report.decisions["jd1"] == [
        "You handed in 2 notebooks for 06_attention: the newest, `06_attention-1.ipynb`, "
        "was graded; not graded: `06_attention.ipynb`.",
        "Your file `06_attention-1.ipynb` was graded as 06_attention.ipynb.",
    ]
    assert report.decisions["ll7"][0] == "Not graded, not being notebooks: `notes.pdf`.", "told to the student too"


def test_canvas_without_a_roster_derives_ids_and_says_so(canvas_zip, tmp_path):
    dest = tmp_path / "submissions"
    report = unpack(canvas_zip, dest, assignment=A, tz="UTC")
    assert set(written(dest)) == {
        "doejane_12345",
        "mullerzoe_22222",
        "student_33333",
        "smithjohn_44444",
        "smithjohn_55555",
        "newstudent_77777",
    }
    warned(report, "李雷_33333_90003_06_Attention.ipynb", "no roster", "'student_33333'")
    assert report.late == {"mullerzoe_22222", "newstudent_77777"}


def test_namesakes_without_an_lms_id_column_are_not_guessed(tmp_path):
    roster = parse_roster("student_id,name\njs1,John Smith\njs2,John Smith\njd1,Jane Doe\n")
    z = make_zip(
        tmp_path / "c.zip",
        [
            ("smithjohn_44444_90005_06_attention.ipynb", notebook("a")),
            ("smithjohn_55555_90006_06_attention.ipynb", notebook("b")),
            ("doejane_12345_90001_06_attention.ipynb", notebook("jane")),
        ],
    )
    report = unpack(z, tmp_path / "s", assignment=A, roster=roster, tz="UTC")
    # the squashed Canvas login "doejane" matches the roster's "Jane Doe"
    assert written(tmp_path / "s") == {"jd1": "jane", "smithjohn_44444": "a", "smithjohn_55555": "b"}
    warned(report, "smithjohn_44444_90005", "ambiguous", "js1, js2")


def test_an_lms_id_that_is_another_students_number_is_not_believed(tmp_path):
    roster = parse_roster("student_id,name\n12345,Ada Byron\njd1,Jane Doe\n")
    z = make_zip(tmp_path / "c.zip", [("doejane_12345_90001_06_attention.ipynb", notebook("jane"))])
    report = unpack(z, tmp_path / "s", assignment=A, roster=roster, tz="UTC")
    assert written(tmp_path / "s") == {"doejane_12345": "jane"}
    warned(report, "its LMS id '12345' fits 12345 but its name 'doejane' fits jd1")


# --- Moodle -------------------------------------------------------------------------------------


def test_moodle_folder_per_participant(tmp_path):
    roster = parse_roster("student_id,name\nzm42,Müller Zoë\nll7,李雷\n")
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            ("Zoë Müller_501_assignsubmission_file_/06_attention.ipynb", notebook("zoe old"), T1),
            ("Zoë Müller_501_assignsubmission_file_/06_attention (1).ipynb", notebook("zoe new"), T2),
            ("Zoë Müller_501_assignsubmission_onlinetext_/onlinetext.html", b"<p>hi</p>", T1),
            ("李雷_502_assignsubmission_file_/work/06_attention.ipynb", notebook("li nested"), T2),
            ("李雷_502_assignsubmission_file_/scratch.ipynb", notebook("li scratch"), T2),
            ("Ada Byron_503_assignsubmission_file_/my homework.ipynb", notebook("ada"), T1),
            (
                "Ada Byron_503_assignsubmission_file_/.ipynb_checkpoints/06_attention-checkpoint.ipynb",
                notebook("x"),
                T2,
            ),
        ],
    )
    dest = tmp_path / "s"
    report = unpack(z, dest, assignment=A, roster=roster, tz="Europe/Berlin")
    assert report.layout == "moodle"
    assert written(dest) == {"zm42": "zoe new", "ll7": "li nested", "Ada_Byron_503": "ada"}
    warned(report, "zm42: 2 notebooks", "06_attention (1).ipynb", "not written", "/06_attention.ipynb")
    warned(report, "李雷_502_assignsubmission_file_/work/06_attention.ipynb", "subfolder")
    warned(report, "李雷_502_assignsubmission_file_/scratch.ipynb", "not named 06_attention.ipynb", "skipped")
    warned(report, "my homework.ipynb", "not named 06_attention.ipynb; written as Ada_Byron_503/06_attention.ipynb")
    warned(report, "Ada Byron_503", "not in the roster")
    assert not any("onlinetext" in w for w in report.warnings)
    # zip times are local: 15:00 in Berlin in November (CET, UTC+1) is 14:00 UTC
    assert (dest / "zm42" / f"{A}.timestamp.txt").read_text() == "2026-11-23 14:00:00.000000 UTC\n"
    want = dt.datetime(2026, 11, 23, 14, 0, 0, tzinfo=UTC).timestamp()
    assert (dest / "zm42" / f"{A}.ipynb").stat().st_mtime == want
    assert report.times["zm42"] == "2026-11-23 14:00:00.000000 UTC"


def test_moodle_flat_files(tmp_path):
    z = make_zip(
        tmp_path / "moodle.zip",
        [
            ("Zoë Müller_501_assignsubmission_file_06_attention.ipynb", notebook("zoe")),
            ("Zoë Müller_501_assignsubmission_onlinetext_onlinetext.html", b"<p>hi</p>"),
            ("John Smith_601_assignsubmission_file_06_attention.ipynb", notebook("john a")),
            ("John Smith_602_assignsubmission_file_06_attention.ipynb", notebook("john b")),
        ],
    )
    dest = tmp_path / "s"
    report = unpack(z, dest, assignment=A, tz="UTC")
    assert report.layout == "moodle"
    assert written(dest) == {"Zoe_Muller_501": "zoe", "John_Smith_601": "john a", "John_Smith_602": "john b"}
    assert (dest / "Zoe_Muller_501" / f"{A}.timestamp.txt").read_text() == "2026-11-23 14:03:06.000000 UTC\n"


# --- plain --------------------------------------------------------------------------------------


def test_plain_folders_inside_a_wrapper_folder(tmp_path):
    z = make_zip(
        tmp_path / "hub.zip",
        [
            ("submissions/ab123/06_attention.ipynb", notebook("ab")),
            ("submissions/ab123/07_transformer.ipynb", notebook("ab 07")),
            ("submissions/cd456/06_attention.ipynb", notebook("cd")),
            ("submissions/cd456/data.csv", b"1,2"),
            ("submissions/cd456/plot.png", b"\x89PNG"),
        ],
    )
    dest = tmp_path / "s"
    report = unpack(z, dest, assignment=A, tz="UTC")
    assert report.layout == "plain" and written(dest) == {"ab123": "ab", "cd456": "cd"}
    warned(report, "submissions/ab123/07_transformer.ipynb", "not named 06_attention.ipynb")
    warned(report, "cd456: 2 file(s) that are not notebooks", "submissions/cd456/data.csv")
    assert not any("no roster" in w for w in report.warnings), "plain folder names are already ids"


def test_the_newest_notebook_wins_by_zip_time(tmp_path):
    z = make_zip(
        tmp_path / "p.zip",
        [("ab/06_attention-2.ipynb", notebook("older")) + (T1,), ("ab/06_attention.ipynb", notebook("newer")) + (T2,)],
    )
    unpack(z, tmp_path / "s", assignment=A, layout="plain", tz="UTC")
    assert written(tmp_path / "s") == {"ab": "newer"}


def test_the_extended_timestamp_field_is_preferred(tmp_path):
    when = int(dt.datetime(2026, 11, 23, 9, 30, 15, tzinfo=UTC).timestamp())
    path = tmp_path / "p.zip"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("ab/06_attention.ipynb", T1)
        info.extra = struct.pack("<HHBI", 0x5455, 5, 1, when)
        zf.writestr(info, notebook("ab"))
    report = unpack(path, tmp_path / "s", assignment=A, tz="Asia/Tokyo")
    assert report.times["ab"] == "2026-11-23 09:30:15.000000 UTC"
    assert (tmp_path / "s" / "ab" / f"{A}.ipynb").stat().st_mtime == when


def test_utf8_names_without_the_utf8_flag_are_read_as_utf8(tmp_path):
    path = make_zip(tmp_path / "p.zip", [("Zoë Müller_501_assignsubmission_file_06_attention.ipynb", notebook("zoe"))])
    raw = bytearray(path.read_bytes())
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # clear bit 11 in both headers
        at = raw.index(sig) + flag_at
        raw[at : at + 2] = struct.pack("<H", struct.unpack("<H", raw[at : at + 2])[0] & ~0x800)
    path.write_bytes(bytes(raw))
    assert zipfile.ZipFile(path).namelist()[0] != "Zoë Müller_501_assignsubmission_file_06_attention.ipynb"
    report = unpack(path, tmp_path / "s", assignment=A, tz="UTC")
    assert report.students == {"Zoe_Muller_501": "Zoë Müller_501_assignsubmission_file_06_attention.ipynb"}


# --- existing files -----------------------------------------------------------------------------


def test_an_existing_notebook_is_kept_unless_overwrite(tmp_path):
    z = make_zip(
        tmp_path / "p.zip", [("ab/06_attention.ipynb", notebook("new")), ("cd/06_attention.ipynb", notebook("cd"))]
    )
    dest = tmp_path / "s"
    (dest / "ab").mkdir(parents=True)
    (dest / "ab" / f"{A}.ipynb").write_bytes(notebook("graded before"))
    report = unpack(z, dest, assignment=A, tz="UTC")
    assert written(dest) == {"ab": "graded before", "cd": "cd"}
    assert report.kept == {"ab": "ab/06_attention.ipynb"} and "ab" not in report.students
    assert not (dest / "ab" / f"{A}.timestamp.txt").exists()
    assert "Kept 1 existing notebook(s)" in report.summary()
    report = unpack(z, dest, assignment=A, tz="UTC", overwrite=True)
    assert written(dest) == {"ab": "new", "cd": "cd"} and report.kept == {}
    assert sorted(p.name for p in (dest / "ab").iterdir()) == [f"{A}.ipynb", f"{A}.timestamp.txt"], (
        "no temporary files left"
    )


# --- hostile zips -------------------------------------------------------------------------------


def test_zip_slip_and_symlink_entries_are_never_followed(tmp_path):
    dest = tmp_path / "inner" / "s"
    z = make_zip(
        tmp_path / "evil.zip",
        [
            ("../evil.ipynb", notebook("evil")),
            ("ab/../../evil2.ipynb", notebook("evil")),
            ("/abs/06_attention.ipynb", notebook("evil")),
            ("cd/06_attention.ipynb", b"/etc/passwd", T1, stat.S_IFLNK | 0o777),
            ("ab/06_attention.ipynb", notebook("ab")),
        ],
    )
    report = unpack(z, dest, assignment=A, tz="UTC")
    assert written(dest) == {"ab": "ab"}
    warned(report, "../evil.ipynb", "'..'")
    warned(report, "ab/../../evil2.ipynb", "'..'")
    warned(report, "/abs/06_attention.ipynb", "absolute")
    warned(report, "cd/06_attention.ipynb", "symbolic link")
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and dest not in p.parents and p.suffix != ".zip"]
    assert outside == [] and not (dest / "cd").exists()


def test_a_claimed_3_gb_notebook_is_one_students_row_not_the_end_of_the_class(tmp_path):
    path = make_zip(
        tmp_path / "bomb.zip", [("aa/06_attention.ipynb", notebook("aa")), ("ab/06_attention.ipynb", b"\x00" * 1000)]
    )
    raw = bytearray(path.read_bytes())
    central = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)  # the second entry's central header
    raw[central + 24 : central + 28] = struct.pack("<I", 3_000_000_000)
    path.write_bytes(bytes(raw))
    dest = tmp_path / "s"
    report = unpack(path, dest, assignment=A, tz="UTC")
    assert written(dest) == {"aa": "aa"} and not (dest / "ab").exists(), "nothing of it is read"
    assert "is 2861.0 MB, more than the 1024.0 MB the grader reads; it was not graded" in report.skipped["ab"]
    warned(report, "ab/06_attention.ipynb: 2861.0 MB, over the 1024.0 MB read at all; not written")
    assert "Not written (1; their rows will say why): ab: The notebook" in report.summary()


def test_a_real_run_of_zeros_over_the_caps(tmp_path):
    path = tmp_path / "zeros.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("aa/06_attention.ipynb", notebook("aa"))
        with zf.open("ab/06_attention.ipynb", "w") as out:
            for _ in range(4):
                out.write(bytes(1 << 20))  # 4 MB of zeros, a few kB compressed
    assert path.stat().st_size < 100_000
    report = unpack(path, tmp_path / "s", assignment=A, tz="UTC", max_bytes=1 << 20)
    assert written(tmp_path / "s") == {"aa": "aa"} and "over the limit of 1.0 MB" in report.skipped["ab"]
    assert not (tmp_path / "s" / "ab" / f"{A}.ipynb").exists() and not list((tmp_path / "s" / "ab").glob(".unpack-*"))
    shutil.rmtree(tmp_path / "s")
    with pytest.raises(UnpackError, match=r"unpack to 419\d+ bytes, over the limit of 2097152 bytes in all"):
        unpack(path, tmp_path / "s", assignment=A, tz="UTC", max_total_bytes=2 << 20)
    assert not (tmp_path / "s").exists()
    with pytest.raises(UnpackError, match=r"holds more than its zip header says|cannot be read from the zip"):
        _crafted(path, tmp_path)
    assert not list((tmp_path / "crafted").rglob("*.ipynb")), "a crafted zip writes nothing"
    report = unpack(path, tmp_path / "s", assignment=A, tz="UTC", max_bytes=8 << 20)
    assert (tmp_path / "s" / "ab" / f"{A}.ipynb").stat().st_size == 4 << 20 and set(report.students) == {"aa", "ab"}


def _crafted(path: Path, tmp_path: Path):
    """The zeros zip with the notebook's declared size turned down to 1 kB: it holds more than it says."""
    raw = bytearray(path.read_bytes())
    central = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)
    raw[central + 24 : central + 28] = struct.pack("<I", 1000)
    crafted = tmp_path / "crafted.zip"
    crafted.write_bytes(bytes(raw))
    unpack(crafted, tmp_path / "crafted", assignment=A, tz="UTC", read_limit=2 << 20)


def test_a_notebook_heavy_with_figures_is_written_when_its_answers_fit(tmp_path):
    heavy = json.loads(notebook("figures"))
    heavy["cells"].append(
        {
            "cell_type": "code",
            "id": "b",
            "metadata": {},
            "execution_count": 1,
            "source": "plot()",
            "outputs": [{"output_type": "display_data", "metadata": {}, "data": {"image/png": "A" * (3 << 20)}}],
        }
    )
    z = make_zip(tmp_path / "p.zip", [("ab/06_attention.ipynb", json.dumps(heavy).encode())])
    report = unpack(z, tmp_path / "s", assignment=A, tz="UTC", max_bytes=1 << 20)
    assert written(tmp_path / "s") == {"ab": "figures"} and not report.skipped
    assert "3.0 MB of it outputs (figures, printed text); only the answer cells are graded" in report.decisions["ab"][0]


def test_ids_that_would_share_a_folder_are_refused(tmp_path):
    z = make_zip(
        tmp_path / "p.zip", [("Zoë/06_attention.ipynb", notebook("1")), ("Zoe/06_attention.ipynb", notebook("2"))]
    )
    with pytest.raises(
        UnpackError,
        match=r"Zo.?/06_attention.ipynb and Zo.?/06_attention.ipynb would both be written "
        r"to the folder 'Zoe'",
    ):
        unpack(z, tmp_path / "s", assignment=A, tz="UTC")
    z = make_zip(
        tmp_path / "q.zip", [("AB/06_attention.ipynb", notebook("1")), ("ab/06_attention.ipynb", notebook("2"))]
    )
    with pytest.raises(UnpackError, match="would both be written to the folder 'ab'"):
        unpack(z, tmp_path / "s", assignment=A, tz="UTC")
    assert not (tmp_path / "s").exists()


def test_two_lms_entries_for_one_roster_student_are_refused(tmp_path):
    roster = parse_roster("student_id,name\nzm42,Zoë Müller\n")
    z = make_zip(
        tmp_path / "m.zip",
        [
            ("Zoë Müller_501_assignsubmission_file_06_attention.ipynb", notebook("1")),
            ("Zoe Muller_777_assignsubmission_file_06_attention.ipynb", notebook("2")),
        ],
    )
    with pytest.raises(
        UnpackError, match="would both be written to the folder 'zm42'; expected one folder per student"
    ):
        unpack(z, tmp_path / "s", assignment=A, roster=roster, tz="UTC")


# --- bad input ----------------------------------------------------------------------------------


def test_bad_input_says_what_was_expected(tmp_path):
    good = make_zip(tmp_path / "p.zip", [("ab/06_attention.ipynb", notebook("ab"))])
    not_zip = tmp_path / "grades.csv"
    not_zip.write_text("a,b\n")
    with pytest.raises(UnpackError, match=r"grades.csv is not a zip file \(expected the .zip that the LMS's"):
        unpack(not_zip, tmp_path / "s", assignment=A)
    with pytest.raises(UnpackError, match=r"no zip file at .*missing.zip"):
        unpack(tmp_path / "missing.zip", tmp_path / "s", assignment=A)
    empty = make_zip(tmp_path / "empty.zip", [])
    with pytest.raises(UnpackError, match=r"empty.zip is empty \(no files\); expected the submissions of the class"):
        unpack(empty, tmp_path / "s", assignment=A)
    only_litter = make_zip(tmp_path / "litter.zip", [("__MACOSX/._x", b""), (".DS_Store", b"")])
    with pytest.raises(UnpackError, match="has no usable files"):
        unpack(only_litter, tmp_path / "s", assignment=A)
    no_nb = make_zip(tmp_path / "nonb.zip", [("ab/report.pdf", b"%PDF")])
    with pytest.raises(UnpackError, match=r"holds no notebook \(.ipynb\) for 06_attention"):
        unpack(no_nb, tmp_path / "s", assignment=A)
    for bad in ("attention", "6_attention", "06 attention", "../06_x", ""):
        with pytest.raises(UnpackError, match=rf"must be named like 06_attention .*got '{bad}'"):
            unpack(good, tmp_path / "s", assignment=bad)
    a_file = tmp_path / "s.txt"
    a_file.write_text("")
    with pytest.raises(UnpackError, match=r"s.txt is a file; expected the submissions folder"):
        unpack(good, a_file, assignment=A)
    with pytest.raises(UnpackError, match="unknown layout 'blackboard'; expected one of auto, canvas, moodle, plain"):
        unpack(good, tmp_path / "s", assignment=A, layout="blackboard")
    with pytest.raises(UnpackError, match="unknown time zone 'Mars/Base'"):
        unpack(good, tmp_path / "s", assignment=A, tz="Mars/Base")
    flat = make_zip(tmp_path / "flat.zip", [("homework.ipynb", notebook("x"))])
    with pytest.raises(UnpackError, match="cannot tell which LMS made this zip: its files \\(homework.ipynb\\)"):
        unpack(flat, tmp_path / "s", assignment=A)
    bad_roster = parse_roster("student_id,name\n.hidden,Jane Doe\n")
    canvas = make_zip(tmp_path / "c.zip", [("doejane_12345_90001_06_attention.ipynb", notebook("j"))])
    with pytest.raises(UnpackError, match=r"gives the student id '.hidden', which cannot be a folder name"):
        unpack(canvas, tmp_path / "s", assignment=A, roster=bad_roster)
    assert not (tmp_path / "s").exists()
    assert unpack(good, tmp_path / "s", assignment=f"{A}.ipynb", tz="UTC").students == {"ab": "ab/06_attention.ipynb"}


def test_the_local_zone_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    import time

    time.tzset()
    try:
        z = make_zip(tmp_path / "p.zip", [("ab/06_attention.ipynb", notebook("ab"), T1)])
        report = unpack(z, tmp_path / "s", assignment=A)
        assert report.times["ab"] == "2026-11-23 19:03:06.000000 UTC"  # EST is UTC-5 in November
    finally:
        monkeypatch.undo()
        time.tzset()


def test_safe_id():
    assert safe_id("Zoë Müller", "501") == "Zoe_Muller_501"
    assert safe_id("李雷", "33333") == "student_33333"
    assert safe_id("../../etc", "1") == "etc_1"
    assert os.sep not in safe_id("a/b\\c")


# --- one rule for several files, nbgrader's layout, Canvas's times ----------------------------------


def test_a_newer_final_copy_is_the_one_graded_by_unpack_and_grade_alike(tmp_path):
    """X.ipynb next to a newer X_final.ipynb: the same rule in both (the newest of the notebooks named
    like the assignment), and the student is told which one counted."""
    from course_grader.discover import resolve_notebooks

    z = make_zip(
        tmp_path / "c.zip",
        [
            ("doejane_12345_90001_06_attention.ipynb", notebook("first")),
            ("doejane_12345_90002_06_attention_final.ipynb", notebook("final")),
        ],
    )
    report = unpack(z, tmp_path / "s", assignment=A, roster=ROSTER, tz="UTC")
    assert written(tmp_path / "s") == {"jd1": "final"}
    told = report.decisions["jd1"][0]
    assert "the newest, `06_attention_final.ipynb`, was graded; not graded: `06_attention.ipynb`" in told, told
    folder = tmp_path / "hand-collected" / "jd1"
    folder.mkdir(parents=True)
    (folder / f"{A}.ipynb").write_bytes(notebook("first"))
    (folder / f"{A}_final.ipynb").write_bytes(notebook("final"))
    os.utime(folder / f"{A}.ipynb", (1_700_000_000, 1_700_000_000))
    found, _ = resolve_notebooks(folder, [A], folder.parent)
    path, notes = found[A]
    assert path.name == f"{A}_final.ipynb" and "not graded: `06_attention.ipynb`" in notes[-1], notes


def test_the_exercise_notebooks_name_and_the_assignments_are_both_exact(tmp_path):
    """A student hands in what `course build` gave them, 06_attention_exercises.ipynb, or the file
    under the assignment's own name: unpack and grade take either as the assignment's without a word;
    a copy of the new name is still matched loosely, with a note, as copies of the old one are."""
    from course_grader.discover import resolve_notebooks

    z = make_zip(
        tmp_path / "p.zip",
        [("ab/06_attention_exercises.ipynb", notebook("new"), T1), ("cd/06_attention.ipynb", notebook("old"), T1)],
    )
    report = unpack(z, tmp_path / "s", assignment=A, tz="UTC")
    assert written(tmp_path / "s") == {"ab": "new", "cd": "old"}
    named = [w for w in report.warnings if "named" in w or "graded as" in w]
    assert not named and not any(report.decisions.values()), (report.warnings, report.decisions)
    for name, note in (
        (f"{A}_exercises.ipynb", None),
        (f"{A}.ipynb", None),
        (f"{A}_exercises (1).ipynb", "its name differs"),
        (f"work/{A}_exercises.ipynb", "it is in a subfolder"),
    ):
        folder = tmp_path / "collected" / name.replace("/", "_").replace(" ", "_")
        (folder / name).parent.mkdir(parents=True)
        (folder / name).write_bytes(notebook("x"))
        found, extra = resolve_notebooks(folder, [A], folder.parent)
        path, notes = found[A]
        assert path == folder / name and not extra, (name, found, extra)
        assert (notes == []) if note is None else (note in notes[0]), f"{name}: notes {notes}, expected {note!r}"


def test_nbgraders_layout_from_an_lms_download(tmp_path):
    z = make_zip(
        tmp_path / "m.zip", [("Zoë Müller_501_assignsubmission_file_/06_attention.ipynb", notebook("zoe"), T2)]
    )
    report = unpack(z, tmp_path / "submitted", assignment=A, roster=ROSTER, tz="UTC", output_layout="nbgrader")
    home = tmp_path / "submitted" / "zm42" / A
    assert tag(home / f"{A}.ipynb") == "zoe"
    assert (home / "timestamp.txt").read_text() == "2026-11-23 15:00:00.000000 UTC\n"
    assert "(nbgrader's layout)" in report.summary()


def test_canvas_submission_times_from_its_api(tmp_path):
    from course_grader.lms import read_canvas_times

    api = tmp_path / "submissions.json"  # GET /api/v1/courses/:id/assignments/:id/submissions, saved
    api.write_text(
        json.dumps(
            [
                {"id": 1, "user_id": 12345, "submitted_at": "2026-11-23T21:15:00Z", "late": True},
                {"id": 2, "user_id": 88888, "submitted_at": None, "workflow_state": "unsubmitted"},
            ]
        )
    )
    times = read_canvas_times(api)
    assert times == {"12345": dt.datetime(2026, 11, 23, 21, 15, tzinfo=UTC)}
    z = make_zip(tmp_path / "c.zip", [("doejane_12345_90001_06_attention.ipynb", notebook("jane"))])
    report = unpack(z, tmp_path / "s", assignment=A, roster=ROSTER, canvas_times=times)
    assert (tmp_path / "s" / "jd1" / f"{A}.timestamp.txt").read_text() == "2026-11-23 21:15:00.000000 UTC\n"
    assert not any("Canvas writes the time it made the zip" in w for w in report.warnings)
    api.write_text('{"errors": [{"message": "Invalid access token."}]}')
    with pytest.raises(UnpackError, match="expected the list of submissions"):
        read_canvas_times(api)


def test_course_unpack_keeps_the_roster_and_records_its_decisions(tmp_path, capsys):
    from contextlib import closing

    from course_grader.gradebook import open_gradebook
    from course_lib import cli

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email,ID\njd1,Jane Doe,jane@example.org,12345\nzm42,Zoë Müller,z@x.org,22222\n")
    z = make_zip(
        tmp_path / "c.zip",
        [
            ("doejane_12345_90001_06_attention.ipynb", notebook("jane")),
            ("müllerzoë_late_22222_90002_Copy of 06_attention.ipynb", notebook("zoe")),
        ],
    )
    out, dest = tmp_path / "grades", tmp_path / "s"
    assert (
        cli.main(["unpack", str(z), "--assignment", A, "--to", str(dest), "--roster", str(roster), "--out", str(out)])
        == 0
    )
    capsys.readouterr()
    assert cli.main(["unpack", str(z), "--assignment", A, "--to", str(tmp_path / "again"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "roster: the one kept in" in text
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == ["jd1", "zm42"]
    with closing(open_gradebook(out)) as book:
        zoe = book.unpacked("zm42", A)
    assert (
        zoe["late"]
        and zoe["sha256"]
        and zoe["notes"] == ["Your file `Copy of 06_attention.ipynb` was graded as 06_attention.ipynb."]
    ), zoe
    assert (
        cli.main(
            ["unpack", str(z), "--assignment", A, "--to", str(tmp_path / "lost"), "--out", str(tmp_path / "elsewhere")]
        )
        == 0
    )
    assert "warning: no roster (none given with --roster, none kept in" in capsys.readouterr().out
