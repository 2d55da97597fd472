"""Exports of the gradebook: grades.csv, grades.json, feedback/, and the LMS files.

Every file is made from the whole gradebook and replaces the previous one atomically (the feedback
folder as a whole), so regrading one student never loses another's row or feedback, and a crash
leaves the previous complete export.

- grades.csv: one row per student and assignment (the latest attempt), with the late penalty,
  manual points and the final score; UTF-8 with a byte-order mark so that Excel shows "Zoë Müller"
  and "李雷" as written.
- grades.json: the same with every test's result and message, the notes, the run warnings.
- feedback/<student>/<assignment>.md (laid out by `feedback_file`), and feedback/index.csv
  mapping each student id to its folder (ids that are not plain ASCII, and ids that are the name of
  one of the export's own files, such as a student called "index.csv", get a folder name with a
  short hash: a student's folder never stands where the export's own files do).
- canvas.csv / moodle.csv (`course export --lms`): one row per student, one column per assignment,
  final scores, in the layouts the two LMSs import (see `lms_export`): each student's LMS ids filled
  in from the roster, each assignment in the LMS's own column when it is known, and missing work
  left empty, never 0: work never handed in, a dropped student, an LMS's test student. A submission
  that could not be graded (unreadable, the wrong notebook) is a 0, and the export says whose.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_lib.runner.feedback import LIMITS, NOT_CHECKED, NOT_GRADED, num
from course_lib.runner.notebook import write_atomic

from .feedback_file import feedback_markdown
from .gradebook import Gradebook, Row
from .roster import Roster, Student, normalize

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


# --- feedback (its layout is feedback_file's) ---------------------------------------------------


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


def write_student_feedback(book: Gradebook, out: Path, student: str, assignment: str) -> Path | None:
    """Rewrite one student's feedback file on one assignment (atomically), from their rows alone: what a mark
    saved on the marking page changes. The class-wide files (grades.csv, grades.json, the index) are the
    next `write_exports`'s. The file written, or None when the gradebook has no such row."""
    rows = book.rows(student, assignment)
    if not rows:
        return None
    path = out / "feedback" / safe_name(student) / f"{assignment}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, feedback_markdown(rows[0]))
    return path


# --- grades.csv and grades.json ------------------------------------------------------------------------

CSV_COLUMNS = [
    "student_id",
    "name",
    "assignment",
    "status",
    "score",
    "late_penalty",
    "adjustment",
    "final",
    "max_score",
    "attempt",
    "submitted_at",
    "graded_at",
    "solutions_sha256",
    "feedback",
    "email",
    "to_mark",
    "enrolment",
]


def grades_rows(rows: list[Row]) -> list[list]:
    table = [CSV_COLUMNS]
    for r in rows:
        table.append(
            [
                r.student,
                r.name,
                r.assignment,
                r.status,
                num(r.score),
                num(r.late_penalty),
                num(r.manual),
                num(r.final),
                num(r.max_score),
                r.attempt,
                r.submitted_at or "",
                r.graded_at,
                r.solutions_sha256[:12],
                f"feedback/{safe_name(r.student)}/{r.assignment}.md",
                r.email,
                r.to_mark,
                r.enrolment,
            ]
        )
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
            # the last run's warnings, then what needs the teacher in the gradebook as it is now
            "warnings": (runs[-1]["warnings"] if runs else []) + book.state_warnings(),
            "deadlines": {a: {**asdict(d), "due": d.due.isoformat()} for a, d in book.deadlines().items()},
            "results": [
                {"student_id": r.student, **{k: v for k, v in asdict(r).items() if k != "student"}} for r in rows
            ],
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

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["Username", "ID number", "Email address", "Full name"]


def _extra(student: Student | None, *names: str) -> str:
    if student is None:
        return ""
    lowered = {k.strip().casefold(): v for k, v in student.extra.items()}
    return next((lowered[n.casefold()] for n in names if lowered.get(n.casefold())), "")


def _lms_key(name: str) -> str:
    """An assignment's name as LMSs decorate it, reduced to its words: "04 Word Vectors (12345)",
    "Assignment: Word vectors (Real)" and "04_word_vectors" are all "vectors word" (a leading number,
    the LMS's id in brackets, case, order and punctuation do not count)."""
    name = re.sub(r"\s*\((\d+|real|percentage|letter)\)\s*$", "", name.strip(), flags=re.I)
    name = re.sub(r"^(assignment|quiz|assign)\s*:\s*", "", name, flags=re.I)
    name = re.sub(r"^\s*\d+[\s_.-]*", "", name.replace("_", " "))
    return normalize(name)


@dataclass
class LmsExport:
    table: list[list]
    columns: dict[str, str]  # assignment -> the LMS column it was written to
    notes: list[str] = field(default_factory=list)  # what the teacher should know before importing


def lms_columns(book: Gradebook, layout: str, names: list[str], given: dict[str, str] | None = None) -> dict[str, str]:
    """The LMS column each assignment goes to: given now (`--column A=COLUMN`, remembered in the gradebook
    for the next export), given before, else the LMS's own column found in the roster's export when exactly
    one fits the assignment's name (Canvas's "04 Word Vectors (12345)"), else the assignment's name."""
    remembered = json.loads(book.meta(f"lms_columns_{layout}", "{}"))
    if given:
        remembered.update(given)
        book.set_meta(f"lms_columns_{layout}", json.dumps(remembered, ensure_ascii=False))
    roster = book.roster()
    theirs = roster.lms_columns if roster and roster.kind == layout else []
    found = {}
    for a in names:
        fits = [c for c in theirs if _lms_key(c) == _lms_key(a)]
        found[a] = remembered.get(a) or (fits[0] if len(fits) == 1 else a)
    return found


def new_columns(book: Gradebook, layout: str, mapped: dict[str, str], allowed: bool = False) -> list[str]:
    """What to say about assignments written to no column the LMS already has (the LMS imports such a column as
    a new assignment). With the roster exported from that LMS, its grade columns are known: an assignment that
    fits none and was never mapped with --column is refused (ValueError naming the LMS's columns still
    unfilled and how to map it), unless `allowed` (`--new-column`). Otherwise, a note."""
    roster = book.roster()
    theirs = roster.lms_columns if roster is not None and roster.kind == layout else []
    given = json.loads(book.meta(f"lms_columns_{layout}", "{}"))
    lms = {"canvas": "Canvas", "moodle": "Moodle"}[layout]
    if not theirs:
        return [
            f"the kept roster is not {lms}'s own gradebook export, so its columns are unknown: "
            + ", ".join(repr(c) for c in mapped.values())
            + f" become new assignments in {lms} unless it has columns of those names (--column A=COLUMN "
            "writes an assignment into an existing one)"
        ]
    notes = [
        f"{a} goes into {c!r}, which the roster's {lms} export does not have (an assignment made in {lms} since "
        "the roster was exported?)"
        for a, c in mapped.items()
        if a in given and c not in theirs
    ]
    unmatched = [a for a, c in mapped.items() if a not in given and c not in theirs]
    if not unmatched:
        return notes
    unfilled = [c for c in theirs if c not in mapped.values()]
    said = (
        f"{', '.join(unmatched)} fit{'s' if len(unmatched) == 1 else ''} no column of the roster's {lms} export, "
        f"so {lms} would import {'it' if len(unmatched) == 1 else 'each'} as a new assignment; its grade columns "
        f"still unfilled: {', '.join(repr(c) for c in unfilled) or 'none'}. Name the column with "
        f'--column "{unmatched[0]}={unfilled[0] if unfilled else "COLUMN"}" (remembered for later exports)'
    )
    if not allowed:
        raise ValueError(said + f", or pass --new-column to make a new assignment in {lms}")
    return [*notes, f"written as new column(s) (--new-column): {said}"]


def lms_export(
    book: Gradebook,
    layout: str,
    assignments: list[str] | None = None,
    *,
    columns: dict[str, str] | None = None,
    missing: str = "empty",
    new_column: bool = False,
) -> LmsExport:
    """One row per student (the roster's order, then any other graded student), one column per
    assignment with the final score. Empty, never 0: no row (never graded), "not submitted" (unless
    `missing="zero"`), a dropped student, an LMS's test student, and a submission the grader failed to
    check ("grader error", "stopped": not a grade). A submission that could not be graded for what it
    is (unreadable, the wrong notebook) is exported as 0. `notes` says whose and why, for each of these,
    and names the scores with an exercise a limit stopped (CPU time, memory, output). An assignment that
    would become a new column in the LMS is refused unless `new_column` (see `new_columns`)."""
    if missing not in ("empty", "zero"):
        raise ValueError(f"missing work is exported as 'empty' or 'zero', not {missing!r}")
    rows = book.rows()
    roster = book.roster()
    names = _exported(rows, assignments)
    mapped = lms_columns(book, layout, names, columns) if layout in ("canvas", "moodle") else {a: a for a in names}
    created = new_columns(book, layout, mapped, new_column) if layout in ("canvas", "moodle") else []
    students = [s.id for s in roster.students] if roster else []
    students += sorted({r.student for r in rows} - set(students))
    cells = _Cells({(r.student, r.assignment): r for r in rows}, roster.by_id if roster else {}, missing)
    if layout == "canvas":
        max_scores = {r.assignment: r.max_score for r in rows}
        table = _canvas_table(cells, roster, students, names, mapped, max_scores)
    elif layout == "moodle":
        table = _moodle_table(cells, roster, students, names, mapped)
    elif layout == "wide":
        table = _wide_table(cells, students, names)
    else:
        raise ValueError(f"unknown LMS layout {layout!r}: expected canvas, moodle or wide")
    notes = cells.notes()
    renamed = [f"{a} -> {c!r}" for a, c in mapped.items() if a != c]
    if renamed:
        notes.append("written to the LMS's own columns: " + ", ".join(renamed))
    return LmsExport(table, mapped, notes + created)


def _exported(rows: list[Row], assignments: list[str] | None) -> list[str]:
    """The assignments an LMS file has a column for: those asked for (each must have grades), else every one."""
    names = sorted({r.assignment for r in rows}) if not assignments else list(assignments)
    unknown = [a for a in names if a not in {r.assignment for r in rows}]
    if unknown:
        raise ValueError(
            f"the gradebook has no grades for {', '.join(unknown)} "
            f"(it has: {', '.join(sorted({r.assignment for r in rows})) or 'none'})"
        )
    return names


@dataclass
class _Cells:
    """The score cells of an LMS file, and whose cells the teacher should hear about (`notes`)."""

    rows: dict[tuple[str, str], Row]  # (student, assignment) -> its row
    by_id: dict[str, Student]  # the roster's students
    missing: str  # work never handed in: "empty" or "zero"
    zeros: list[str] = field(default_factory=list)  # could not be graded for what it is: exported as 0
    unmarked: list[str] = field(default_factory=list)  # written answers still to mark
    limited: list[str] = field(default_factory=list)  # an exercise a limit stopped
    left_empty: dict[str, list[str]] = field(
        default_factory=lambda: {"dropped": [], "test": [], "not submitted": [], "not checked": []}
    )

    def cell(self, sid: str, a: str) -> str:
        """The cell of student `sid`'s assignment `a`: the final score, or "" (or "0") with a note kept."""
        r = self.rows.get((sid, a))
        s = self.by_id.get(sid)
        status = s.status if s else "active"
        if status in ("dropped", "test"):
            if r is not None:
                self.left_empty[status].append(f"{s.label} ({a})")
            return ""
        if r is None:
            return ""
        if r.status == "not submitted":
            self.left_empty["not submitted"].append(f"{s.label if s else sid} ({a})")
            return "0" if self.missing == "zero" else ""
        if r.status in NOT_CHECKED:
            self.left_empty["not checked"].append(f"{s.label if s else sid} ({a}, {r.status})")
            return ""
        if r.status in NOT_GRADED:
            why = (r.notes[0] if r.notes else r.status).rstrip(".")
            self.zeros.append(f"{s.label if s else sid} ({a}): {r.status}: {why}")
        stopped = [t.get("exercise") or t["grade_id"] for t in r.tests if t.get("cause") in LIMITS]
        if stopped:
            self.limited.append(f"{s.label if s else sid} ({a}: {', '.join(stopped)})")
        if r.to_mark:
            self.unmarked.append(f"{s.label if s else sid} ({a})")
        return num(r.final)

    def notes(self) -> list[str]:
        """What the teacher should know about the cells written so far, before importing the file."""
        notes = []
        zeros, limited, unmarked = self.zeros, self.limited, self.unmarked
        if zeros:
            notes.append(f"{len(zeros)} submission(s) that could not be graded were exported as 0: " + "; ".join(zeros))
        if limited:
            notes.append(
                f"{len(limited)} score(s) include exercises stopped by a limit (CPU time, memory, output, a crash): "
                + "; ".join(limited[:10])
                + (" ..." if len(limited) > 10 else "")
            )
        if unmarked:
            notes.append(
                f"{len(unmarked)} score(s) have written answers still to mark (`course mark`), exported with "
                "the points so far: " + ", ".join(unmarked[:10]) + (" ..." if len(unmarked) > 10 else "")
            )
        for status, who in self.left_empty.items():
            if who:
                what = {
                    "dropped": "dropped students",
                    "test": "the LMS's test student",
                    "not submitted": "work never handed in",
                    "not checked": "submissions the grader could not check (not a grade: grade them again with "
                    "`course grade ... --student ID`)",
                }[status]
                how = "0" if status == "not submitted" and self.missing == "zero" else "empty"
                more = " ..." if len(who) > 8 else ""
                notes.append(f"{len(who)} cell(s) left {how} for {what}: " + ", ".join(who[:8]) + more)
        return notes


def _canvas_table(
    cells: _Cells,
    roster: Roster | None,
    students: list[str],
    names: list[str],
    mapped: dict[str, str],
    max_scores: dict[str, float],
) -> list[list]:
    """Canvas's gradebook import: Canvas matches a row by ID, SIS User ID or SIS Login ID; "Points Possible" is
    its second row. From Canvas's own export, its identity columns as they were; from a teacher's file, what it
    has, and the student id as the login (the usual meaning of a teacher's ids)."""
    own = roster is None or roster.kind != "canvas"
    table = [
        [*CANVAS_COLUMNS, *(mapped[a] for a in names)],
        ["    Points Possible", "", "", "", "", *(num(max_scores.get(a, 0)) for a in names)],
    ]
    for sid in students:
        s = cells.by_id.get(sid)
        table.append(
            [
                s.name if s and s.name else sid,
                _extra(s, "ID", "canvas_id", "canvas id"),
                _extra(s, "SIS User ID"),
                _extra(s, "SIS Login ID") or (sid if own else ""),
                _extra(s, "Section"),
                *(cells.cell(sid, a) for a in names),
            ]
        )
    return table


def _moodle_table(
    cells: _Cells, roster: Roster | None, students: list[str], names: list[str], mapped: dict[str, str]
) -> list[list]:
    """Moodle's "Import grades from CSV": it maps one identifier column (chosen on import) and grade items."""
    id_column = (roster.id_column if roster else "").casefold()
    for_username = id_column in ("username", "login", "user", "student_id", "student id", "id") or roster is None
    table = [[*MOODLE_COLUMNS, *(mapped[a] for a in names)]]
    for sid in students:
        s = cells.by_id.get(sid)
        table.append(
            [
                _extra(s, "Username") or (sid if for_username else ""),
                _extra(s, "ID number", "idnumber", "moodle_id") or (sid if id_column == "id number" else ""),
                s.email if s else "",
                s.name if s else "",
                *(cells.cell(sid, a) for a in names),
            ]
        )
    return table


def _wide_table(cells: _Cells, students: list[str], names: list[str]) -> list[list]:
    """One row per student, one column per assignment, and the total."""
    table = [["student_id", "name", *names, "total"]]
    for sid in students:
        s = cells.by_id.get(sid)
        got = [cells.cell(sid, a) for a in names]
        table.append([sid, s.name if s else "", *got, num(sum(float(g) for g in got if g))])
    return table


def lms_table(book: Gradebook, layout: str, assignments: list[str] | None = None) -> list[list]:
    """The table of `lms_export` alone."""
    return lms_export(book, layout, assignments).table


def write_lms(
    book: Gradebook,
    path: Path,
    layout: str,
    assignments: list[str] | None = None,
    *,
    columns: dict[str, str] | None = None,
    missing: str = "empty",
    new_column: bool = False,
) -> LmsExport:
    export = lms_export(book, layout, assignments, columns=columns, missing=missing, new_column=new_column)
    write_atomic(Path(path), csv_text(export.table))
    return export
