"""Exports of the gradebook: grades.csv, grades.json, feedback/, and the LMS files.

Every file is made from the whole gradebook and replaces the previous one atomically (the feedback
folder as a whole), so regrading one student never loses another's row or feedback, and a crash
leaves the previous complete export.

- grades.csv: one row per student and assignment (the latest attempt), with the late penalty,
  manual points and the final score; UTF-8 with a byte-order mark so that Excel shows "Zoë Müller"
  and "李雷" as written.
- grades.json: the same with every test's result and message, the notes, the run warnings.
- feedback/<student>/<assignment>.md (laid out by `course_lib.feedback`), and feedback/index.csv
  mapping each student id to its folder (ids that are not plain ASCII, and ids that are the name of
  one of the export's own files, such as a student called "index.csv", get a folder name with a
  short hash: a student's folder never stands where the export's own files do).
- canvas.csv / moodle.csv (`course export --lms`): one row per student, one column per assignment,
  final scores, in the layouts the two LMSs import.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from course_lib.feedback import feedback_markdown, num
from course_lib.runner.notebook import write_atomic

from .gradebook import Gradebook, Row

BOM = "\ufeff"
RESERVED = {"index.csv"}  # the feedback folder's own files: never a student's folder name (in any case)


def safe_name(name: str) -> str:
    """A file name for a student id; ids that had to be changed get a short hash, so that
    "a b" and "a_b" never share a feedback file (feedback/index.csv maps them back), and so do ids
    that are the name of one of the feedback folder's own files."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "student"
    safe = "_" + safe[1:] if safe.startswith(".") else safe  # never a hidden folder
    if safe == name and safe.casefold() not in RESERVED:
        return safe
    return f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def csv_cell(text) -> str:
    """One CSV cell. A cell that a spreadsheet would run as a formula (it starts with = + - @, a tab
    or a carriage return) gets a leading apostrophe and quotes, so it stays text."""
    text = str(text)
    if re.fullmatch(r"-?\d+(\.\d+)?", text):  # a number (a negative adjustment) stays a number
        return text
    if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return '"' + ("'" + text).replace('"', '""') + '"'
    if any(c in text for c in ',"\n\r;'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(rows: list[list]) -> str:
    return BOM + "".join(",".join(csv_cell(c) for c in row) + "\r\n" for row in rows)


# --- feedback (its layout is course_lib.feedback's) ---------------------------------------------------


def _replace_folder(fresh: Path, target: Path) -> None:
    trash = target.parent / f".{target.name}-old-{os.getpid()}"
    if target.exists():
        os.replace(target, trash)
    os.replace(fresh, target)
    shutil.rmtree(trash, ignore_errors=True)


def _remove_stale_drafts(out: Path) -> None:
    """Drafts of the feedback folder that an interrupted export left (`.feedback-PID-*`, `.feedback-old-PID`)
    whose process is gone."""
    for entry in out.glob(".feedback-*"):
        found = re.match(r"^\.feedback-(?:old-)?(\d+)", entry.name)
        if found and entry.is_dir() and not entry.is_symlink() and not _alive(int(found.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def draft_feedback(rows: list[Row], out: Path) -> Path:
    """The whole feedback folder, written beside the current one (`.feedback-PID-*`); `_replace_folder` swaps it in."""
    _remove_stale_drafts(out)
    fresh = Path(tempfile.mkdtemp(prefix=f".feedback-{os.getpid()}-", dir=out))
    try:
        index = [["student_id", "name", "folder"]]
        folders: dict[str, str] = {}
        for r in rows:
            folder = folders.setdefault(r.student, safe_name(r.student))
            path = fresh / folder / f"{r.assignment}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(feedback_markdown(r), encoding="utf-8")
        for student, folder in folders.items():
            index.append([student, next((r.name for r in rows if r.student == student), ""), folder])
        (fresh / "index.csv").write_text(csv_text(index), encoding="utf-8")
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return fresh


def write_feedback(rows: list[Row], out: Path) -> None:
    _replace_folder(draft_feedback(rows, out), out / "feedback")


# --- grades.csv and grades.json ------------------------------------------------------------------------

CSV_COLUMNS = ["student_id", "name", "assignment", "status", "score", "late_penalty", "adjustment", "final", "max_score",
               "attempt", "submitted_at", "graded_at", "solutions_sha256", "feedback"]


def grades_rows(rows: list[Row]) -> list[list]:
    table = [CSV_COLUMNS]
    for r in rows:
        table.append([r.student, r.name, r.assignment, r.status, num(r.score), num(r.late_penalty), num(r.manual),
                      num(r.final), num(r.max_score), r.attempt, r.submitted_at or "", r.graded_at, r.solutions_sha256[:12],
                      f"feedback/{safe_name(r.student)}/{r.assignment}.md"])
    return table


def write_exports(book: Gradebook, out: Path) -> list[Row]:
    """grades.csv, grades.json and feedback/ from the whole gradebook. The feedback folder is written
    whole first, beside the old one; only then are the three replaced, each atomically, so that a
    failure part-way leaves the previous export as it was."""
    out.mkdir(parents=True, exist_ok=True)
    rows = book.rows()
    runs = book.runs()
    fresh = draft_feedback(rows, out)
    try:
        data = {
            "warnings": runs[-1]["warnings"] if runs else [],
            "deadlines": {a: {**asdict(d), "due": d.due.isoformat()} for a, d in book.deadlines().items()},
            "results": [{"student_id": r.student, **{k: v for k, v in asdict(r).items() if k != "student"}}
                        for r in rows],
            "runs": runs,
        }
        text_json = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        text_csv = csv_text(grades_rows(rows))
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    write_atomic(out / "grades.csv", text_csv)
    write_atomic(out / "grades.json", text_json)
    _replace_folder(fresh, out / "feedback")
    return rows


# --- LMS gradebooks ------------------------------------------------------------------------------------


def _extra(student, *names: str) -> str:
    if student is None:
        return ""
    lowered = {k.strip().casefold(): v for k, v in student.extra.items()}
    return next((lowered[n.casefold()] for n in names if lowered.get(n.casefold())), "")


def lms_table(book: Gradebook, layout: str, assignments: list[str] | None = None) -> list[list]:
    """One row per student (the roster's order, then any other graded student), one column per
    assignment with the final score; a student with no row for an assignment gets an empty cell."""
    rows = book.rows()
    roster = book.roster()
    names = sorted({r.assignment for r in rows}) if not assignments else list(assignments)
    finals = {(r.student, r.assignment): r.final for r in rows}
    max_scores = {r.assignment: r.max_score for r in rows}
    students = [s.id for s in roster.students] if roster else []
    students += sorted({r.student for r in rows} - set(students))
    by_id = roster.by_id if roster else {}
    if layout == "canvas":
        # Canvas matches rows on ID, SIS User ID or SIS Login ID; "Points Possible" is an optional second row.
        table = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *names],
                 ["    Points Possible", "", "", "", "", *(num(max_scores.get(a, 0)) for a in names)]]
        for sid in students:
            s = by_id.get(sid)
            table.append([s.name if s else sid, _extra(s, "ID", "canvas_id", "canvas id"), _extra(s, "SIS User ID"),
                          _extra(s, "SIS Login ID") or sid, _extra(s, "Section"),
                          *(num(finals[(sid, a)]) if (sid, a) in finals else "" for a in names)])
        return table
    if layout == "moodle":
        # Moodle's "Import grades from CSV" maps one identifier column (chosen on import) and grade items.
        table = [["Username", "ID number", "Email address", "Full name", *names]]
        for sid in students:
            s = by_id.get(sid)
            table.append([sid, _extra(s, "ID number", "idnumber", "moodle_id"), s.email if s else "", s.name if s else "",
                          *(num(finals[(sid, a)]) if (sid, a) in finals else "" for a in names)])
        return table
    if layout == "wide":
        table = [["student_id", "name", *names, "total"]]
        for sid in students:
            s = by_id.get(sid)
            got = [finals.get((sid, a)) for a in names]
            table.append([sid, s.name if s else "", *("" if g is None else num(g) for g in got),
                          num(sum(g for g in got if g is not None))])
        return table
    raise ValueError(f"unknown LMS layout {layout!r}: expected canvas, moodle or wide")


def write_lms(book: Gradebook, path: Path, layout: str, assignments: list[str] | None = None) -> Path:
    write_atomic(Path(path), csv_text(lms_table(book, layout, assignments)))
    return Path(path)
