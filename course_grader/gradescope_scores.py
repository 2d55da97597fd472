"""Gradescope's scores back into the gradebook: `course gradescope import`.

A class graded on Gradescope keeps `course report`, `course deadline` and the LMS files: `import_scores`
reads Gradescope's score export of one assignment (Review Grades > Download Grades > CSV) and records a
row per student, as `course grade` would have.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from contextlib import closing
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path

from course_lib.runner.text import inert


@dataclass
class ImportReport:
    rows: int = 0
    graded: int = 0
    missing: int = 0
    skipped: list[str] = field(default_factory=list)  # rows matched to no student, with why


def _question(header: str) -> tuple[str, float] | None:
    """A question column of Gradescope's export, "2: Exercise 2: Softmax (3.0 pts)" -> ("Exercise 2: Softmax", 3.0)."""
    found = re.fullmatch(r"\s*([\d.]+)\s*(?::\s*(.*?))?\s*\(([\d.]+)\s*pts?\)\s*", header)
    if not found:
        return None
    return (found.group(2) or f"Question {found.group(1)}").strip(), float(found.group(3))


def _number(text: str) -> float:
    try:
        return float(text.strip()) if text and text.strip() else 0.0
    except ValueError:
        return 0.0


def import_scores(csv_path: Path, assignment: str, out: Path, *, solutions: Path | None = None) -> ImportReport:
    """Read Gradescope's score export of one assignment (Review Grades > Download Grades > CSV) into the
    gradebook `out` as rows of `assignment`: each student's total, each question's points as a test, the
    submission time (for `course deadline`), and a note saying the row came from Gradescope. Students are
    matched to the kept roster by SID, then email, then name; without a roster the SID (else the email) is
    the id. The same export imported again replaces its rows (each Gradescope submission is one attempt).
    `solutions`: the folder whose notebook built the autograder, recorded as the rows' solutions."""
    from .export import write_exports
    from .gradebook import open_gradebook

    export = _Export.read(Path(csv_path))
    name = Path(assignment).stem
    if solutions is not None:
        sol = Path(solutions) / f"{name}.ipynb"
        if not sol.is_file():
            raise ValueError(f"no solution notebook {sol}")
        sol_path, sol_sha = str(sol.resolve()), hashlib.sha256(sol.read_bytes()).hexdigest()
    else:
        sol_path, sol_sha = f"Gradescope ({export.path.name})", hashlib.sha256(export.raw).hexdigest()
    report = ImportReport()
    with closing(open_gradebook(out)) as book:
        roster = book.roster()
        for row in export.rows:
            student_id, skipped = _student_of(export, row, roster, out)
            if student_id is None:
                report.skipped.append(skipped)
                continue
            result, submission_id, when = export.result(row, inert(student_id, 200), name)
            missing = result.status == "not submitted"
            book.record(
                result,
                file=None,
                submission_sha256=None if missing else f"gradescope:{submission_id}",
                submitted_at=when,
                submitted_from="Gradescope" if when else None,
                solutions_path=sol_path,
                solutions_sha256=sol_sha,
                run=None,
            )
            report.rows += 1
            report.missing += missing
            report.graded += not missing
        write_exports(book, Path(out))
    return report


@dataclass
class _Export:
    """Gradescope's score export, read: its rows and its question columns."""

    path: Path
    raw: bytes
    rows: list[dict]
    headers: dict[str, str]  # casefolded column name -> the column as written
    questions: list[tuple[str, tuple[str, float]]]  # (column, (exercise, points))

    @classmethod
    def read(cls, path: Path) -> _Export:
        raw = path.read_bytes()
        reader = csv.DictReader(io.StringIO(raw.decode("utf-8-sig", errors="replace")))
        headers = {h.strip().casefold(): h for h in (reader.fieldnames or []) if h}
        if "total score" not in headers or "status" not in headers:
            raise ValueError(
                f"{path} is not Gradescope's score export of an assignment (expected the columns Total Score and "
                f"Status; it has: {', '.join(reader.fieldnames or []) or 'none'})"
            )
        questions = [(h, q) for h in reader.fieldnames or [] if (q := _question(h)) is not None]
        return cls(path, raw, list(reader), headers, questions)

    def cell(self, row: dict, column: str) -> str:
        key = self.headers.get(column)
        return (row.get(key) or "").strip() if key else ""

    def result(self, row: dict, student_id: str, name: str):
        """(the row as a graded submission, Gradescope's submission id, the submission time in UTC or None)."""
        from course_lib.runner.feedback import TestResult

        from .grade import SubmissionResult
        from .gradebook import parse_time

        status_text = self.cell(row, "status").casefold()
        submission_id = self.cell(row, "submission id")
        total, max_points = _number(self.cell(row, "total score")), _number(self.cell(row, "max points"))
        missing = status_text == "missing" or not submission_id
        tests = []
        for header, (title, worth) in self.questions:
            got = _number(row.get(header) or "")
            state = "not submitted" if missing else "passed" if got >= worth > 0 else "partial" if got > 0 else "failed"
            tests.append(TestResult(f"gradescope: {title}", title, got, worth, state))
        where = f"Graded on Gradescope (submission {submission_id}), imported from {self.path.name}."
        notes = [where] if not missing else ["Nothing was submitted on Gradescope."]
        if status_text == "ungraded":
            notes.append("Some questions were not yet graded on Gradescope when its scores were exported.")
        result = SubmissionResult(
            student_id,
            name,
            0.0 if missing else total,
            max_points or sum(q[1] for _, q in self.questions),
            "not submitted" if missing else "graded",
            tests,
            notes,
        )
        when = None
        if self.cell(row, "submission time"):
            try:  # "2026-12-01 22:59:07 -0600": the offset joined to the time, as ISO 8601 writes it
                stamp = re.sub(r"\s+([+-]\d{2}):?(\d{2})$", r"\1:\2", self.cell(row, "submission time"))
                when = parse_time(stamp, tz=timezone.utc).astimezone(timezone.utc).isoformat(timespec="seconds")
            except ValueError:
                notes.append(f"Gradescope's submission time {self.cell(row, 'submission time')!r} could not be read.")
        return result, submission_id, when


def _student_of(export: _Export, row: dict, roster, out: Path) -> tuple[str | None, str]:
    """The student a row is, by SID, email, then name on the kept roster (else the SID or email);
    or None and why the row is skipped."""
    sid, email = export.cell(row, "sid"), export.cell(row, "email")
    full = export.cell(row, "name") or " ".join(
        x for x in (export.cell(row, "first name"), export.cell(row, "last name")) if x
    )
    if roster is None:
        return (sid or email, "") if sid or email else (None, f"{full or '?'}: no SID and no email")
    for key in (sid, email, full):
        if key:
            student, _ = roster.find(key)
            if student is not None:
                if student.status == "dropped":
                    return None, f"{student.label}: dropped the course"
                return student.id, ""
    return None, f"{full or email or sid or '?'}: not on the roster kept in {out}"
