"""A class roster: who is in the class, read from the file a teacher already has.

Three kinds of file are read as they are, without edits:

- **Canvas's gradebook export** (*Grades › Export*), recognised by its `SIS User ID` and `SIS Login ID`
  columns: `Student, ID, SIS User ID, SIS Login ID, [Integration ID,] Section, <assignments>, ...`,
  names written "Last, First". Its `Points Possible` row (and a `Manual Posting` row, where Canvas
  writes one) are not students; "Student, Test" (Canvas's test student, what *Student View* adds)
  is kept with the status `test`: graded if it hands something in, never counted as missing work
  and never exported with a score. `SIS Login ID` is taken as the email when it is one.
- **Moodle's grade export** (*Grades › Export › Plain text file*), recognised by `ID number` next to
  `First name`/`Last name` or `Email address`: `First name, Last name, ID number, Institution,
  Department, Email address, <grade items>, Last downloaded from this course`.
- **Any other CSV**, e.g. a spreadsheet: `student_id,name,email`, one row per student.

Which column becomes the student id (the name of the student's folder under `submissions/`, the
gradebook's key), unless the teacher names one (`--id-column`):

- Canvas: `SIS User ID` when every student has one, else `SIS Login ID`, else Canvas's `ID`;
- Moodle: `ID number` when every student has one, else `Username` (when exported), else `Email address`;
- other CSV files: the first of `student_id`, `student id`, `id`, `username`, `login`, `user`.

The other identity columns are kept (`extra`): Canvas's `ID`, `SIS User ID`, `SIS Login ID`,
`Integration ID` and `Section`, Moodle's `ID number`, `Institution`, `Department`, ... They match the
LMS's own ids in a download (`course unpack`) and fill the LMS's columns in an export
(`course export --lms`). The LMS's grade columns (Canvas's `Word Vectors (12345)`, Moodle's
`Assignment: Word vectors (Real)`) are not students' data: their names are kept (`lms_columns`) so
that an export can fill the LMS's existing columns. Names and emails stay attached to every id.

A student's status is `active`, `dropped` (`course roster drop ID`: no "not submitted" row, no
score in the LMS files) or `test` (an LMS's test student).

The file may be UTF-8 (with or without the byte-order mark Excel writes) or, as Excel on Windows
saves "CSV", Windows-1252; commas, semicolons (Excel in many European locales) and tabs all work.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ID_COLUMNS = ("student_id", "student id", "id", "username", "login", "user")
CANVAS_ID_COLUMNS = ("sis user id", "sis login id", "id")
MOODLE_ID_COLUMNS = ("id number", "username", "email address")
NAME_COLUMNS = ("name", "full name", "student", "student name")
EMAIL_COLUMNS = ("email", "email address", "e-mail")
CANVAS_IDENTITY = ("student", "id", "sis user id", "sis login id", "integration id", "section", "root account")
MOODLE_IDENTITY = (
    "first name",
    "last name",
    "id number",
    "institution",
    "department",
    "email address",
    "username",
    "phone",
    "mobile phone",
    "city/town",
    "country",
)
# Canvas's computed columns ("Current Score", "Assignments Final Points", ...) and Moodle's "Last downloaded ..."
LMS_COMPUTED = re.compile(
    r"(?i)^(.*\b)?(current|final|unposted current|unposted final|override)\s+"
    r"(score|points|grade)$|^last downloaded from this course$|^course total\b.*"
)
LMS_GRADE_ITEM = re.compile(r".*\(\d+\)\s*$|.*\((real|percentage|letter)\)\s*$", re.I)
STATUSES = ("active", "dropped", "test")


class RosterError(ValueError):
    """The roster file cannot be used; the message says what was expected and what was found."""


@dataclass
class Student:
    id: str  # the folder name under submissions/ and the gradebook's key
    name: str = ""  # as the roster spells it (shown in exports and feedback)
    email: str = ""
    extra: dict[str, str] = field(default_factory=dict)  # the other identity columns, by their header as written
    status: str = "active"  # active | dropped | test (an LMS's test student)

    @property
    def label(self) -> str:
        """How messages name the student: "Zoë Müller (zm42)", or the id alone."""
        return f"{self.name} ({self.id})" if self.name and self.name != self.id else self.id


def normalize(text: str) -> str:
    """A loose key for matching names: accents, case, punctuation and word order do not matter
    ("Müller, Zoë" and "zoe  muller" are the same)."""
    plain = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in plain if not unicodedata.combining(c)).casefold()
    return " ".join(sorted(re.findall(r"[^\W_]+", plain)))


@dataclass
class Roster:
    students: list[Student]
    source: str = ""  # where it was read from (for messages)
    kind: str = "csv"  # canvas | moodle | csv: what the file was read as
    id_column: str = ""  # the column the ids came from, as written in the file
    lms_columns: list[str] = field(default_factory=list)  # the LMS's grade columns (for `course export --column`)

    def __post_init__(self) -> None:
        self.by_id = {s.id: s for s in self.students}

    def __contains__(self, student_id: str) -> bool:
        return student_id in self.by_id

    def __len__(self) -> int:
        return len(self.students)

    def name(self, student_id: str) -> str:
        s = self.by_id.get(student_id)
        return s.name if s else ""

    def label(self, student_id: str) -> str:
        """ "Zoë Müller (zm42)" for a roster student, the id for anyone else."""
        s = self.by_id.get(student_id)
        return s.label if s else student_id

    def status(self, student_id: str) -> str:
        s = self.by_id.get(student_id)
        return s.status if s else "active"

    @property
    def active(self) -> list[Student]:
        """The students whose missing work counts as missing: not dropped, not an LMS's test student."""
        return [s for s in self.students if s.status == "active"]

    def describe(self) -> str:
        """One line on how the file was read, for the teacher."""
        kinds = {"canvas": "a Canvas gradebook export", "moodle": "a Moodle grade export", "csv": "a CSV roster"}
        what = kinds[self.kind]
        others = [
            f"{sum(s.status == st for s in self.students)} {st}"
            for st in ("dropped", "test")
            if any(s.status == st for s in self.students)
        ]
        return (
            f"{self.source}: read as {what}: {len(self.active)} student(s)"
            + (f" ({', '.join(others)})" if others else "")
            + f", ids from the column {self.id_column!r}"
        )

    def find(self, key: str) -> tuple[Student | None, str]:
        """The student a folder name or an LMS label `key` stands for, and how it was matched
        ("" for the exact id). Tried in order: the id, the id ignoring case, the email or its part
        before the @, the name (loosely, see `normalize`), any identity column's value (an LMS user id).
        A key that fits several students matches none of them."""
        if key in self.by_id:
            return self.by_id[key], ""
        tries = [
            ("id", lambda s: s.id.casefold() == key.casefold()),
            (
                "email",
                lambda s: bool(s.email) and key.casefold() in (s.email.casefold(), s.email.split("@")[0].casefold()),
            ),
            ("name", lambda s: bool(s.name) and normalize(s.name) == normalize(key) != ""),
            ("LMS id", lambda s: key.strip() != "" and key.strip() in s.extra.values()),
        ]
        for how, test in tries:
            found = [s for s in self.students if test(s)]
            if len(found) == 1:
                return found[0], how
            if len(found) > 1:
                return None, f"ambiguous: {how} fits {', '.join(s.id for s in found)}"
        return None, ""


def _decode(raw: bytes, source: str) -> tuple[str, str]:
    try:
        return raw.decode("utf-8-sig"), ""
    except UnicodeDecodeError:
        return (
            raw.decode("cp1252", errors="replace"),
            f"{source} is not UTF-8; it was read as Windows-1252 (Excel's 'CSV')",
        )


def _column(headers: dict[str, str], names: tuple[str, ...]) -> str | None:
    for n in names:
        if n in headers:
            return headers[n]
    return None


def _kind(headers: dict[str, str]) -> str:
    if "sis login id" in headers or {"student", "id", "section"} <= set(headers):  # a TA's export lacks SIS User ID
        return "canvas"
    if "id number" in headers and ({"first name", "last name", "email address"} & set(headers)):
        return "moodle"
    return "csv"


def _canvas_meta_row(row: dict, student_col: str | None, id_cols: list[str]) -> bool:
    """Canvas's rows under the header that are not students: `Points Possible`, `Manual Posting`."""
    who = (row.get(student_col) or "").strip().casefold() if student_col else ""
    if who in ("points possible", "manual posting"):
        return True
    return not who and not any((row.get(c) or "").strip() for c in id_cols)


def _is_test_student(name: str) -> bool:
    return normalize(name) == normalize("Test Student")  # Canvas: "Student, Test"


def parse_roster(text: str, source: str = "roster", id_column: str | None = None) -> Roster:
    """The roster in `text` (see the module's docstring for the kinds of file and the id rule);
    `id_column` names the column the ids come from, overriding the rule."""
    text = text.lstrip("\ufeff")  # Excel's and Canvas's byte-order mark is not part of the first column's name
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise RosterError(
            f"{source} is empty; expected a CSV file whose first line names the columns, e.g. student_id,name,email"
        )
    try:
        dialect = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    written = [h for h in (reader.fieldnames or []) if h is not None]
    rows = [
        row for row in reader if any((v or "").strip() for k, v in row.items() if k is not None and isinstance(v, str))
    ]
    cols = _Columns.of(written)
    if cols.kind == "canvas":
        rows = [r for r in rows if not _canvas_meta_row(r, cols.name, cols.canvas_ids)]
    cols.id = cols.id_column(rows, id_column, source)
    if cols.name == cols.id:
        cols.name = None
    students, problems = cols.students(rows)
    if problems:
        hint = "" if id_column else " (choose the id column with --id-column)"
        raise RosterError(f"{source}: " + "; ".join(problems[:10]) + (" ..." if len(problems) > 10 else "") + hint)
    if not students:
        raise RosterError(f"{source} names no students (only the header line {lines[0]!r})")
    return Roster(students, source, cols.kind, cols.id, cols.lms_columns())


@dataclass
class _Columns:
    """Which column of a roster file holds what."""

    kind: str  # "canvas", "moodle" or "csv" (a teacher's own file)
    written: list[str]  # the columns as the file names them
    headers: dict[str, str]  # casefolded name -> as written
    name: str | None  # the full name's column (Canvas: Student)
    first: str | None  # else first and last name
    last: str | None
    email: str | None
    canvas_ids: list[str]
    identity: set[str] | None  # an LMS export's columns about the student (the others are grade items)
    id: str | None = None

    @classmethod
    def of(cls, written: list[str]) -> _Columns:
        headers = {h.strip().casefold(): h for h in written}
        kind = _kind(headers)
        canvas = kind == "canvas"
        identity = {"canvas": CANVAS_IDENTITY, "moodle": MOODLE_IDENTITY}.get(kind)
        return cls(
            kind,
            written,
            headers,
            headers.get("student") if canvas else _column(headers, NAME_COLUMNS),
            None if canvas else _column(headers, ("first name", "first", "given name")),
            None if canvas else _column(headers, ("last name", "surname", "family name")),
            _column(headers, EMAIL_COLUMNS),
            [headers[c] for c in CANVAS_ID_COLUMNS if c in headers],
            None if identity is None else {headers[c] for c in identity if c in headers},
        )

    def name_of(self, row: dict) -> str:
        if self.name:
            return (row.get(self.name) or "").strip()
        parts = [(row.get(c) or "").strip() if c else "" for c in (self.first, self.last)]
        return " ".join(p for p in parts if p)

    def is_test(self, row: dict) -> bool:
        return self.kind == "canvas" and _is_test_student(self.name_of(row))

    def id_column(self, rows: list[dict], asked: str | None, source: str) -> str:
        """The column the ids come from: the one asked for, else the first of the kind's id columns that
        every real student has filled in (else the first there is)."""
        if asked is not None:
            found = self.headers.get(asked.strip().casefold())
            if found is None:
                raise RosterError(f"{source} has no column {asked!r} (--id-column); its columns are {self.written}")
            return found
        candidates = {"canvas": CANVAS_ID_COLUMNS, "moodle": MOODLE_ID_COLUMNS, "csv": ID_COLUMNS}[self.kind]
        present = [self.headers[c] for c in candidates if c in self.headers]
        if not present:
            raise RosterError(
                f"{source} has the columns {self.written}; expected one of them to be the student id, "
                f"named one of: {', '.join(ID_COLUMNS)} (or name it with --id-column)"
            )
        real = [r for r in rows if not self.is_test(r)]
        full = [c for c in present if all((r.get(c) or "").strip() for r in real)]
        return full[0] if full else present[0]

    def lms_columns(self) -> list[str]:
        """An LMS export's grade items (the columns a grade could go to), not its computed totals."""
        if self.kind == "csv":
            return []
        return [
            h
            for h in self.written
            if h not in self.identity and LMS_GRADE_ITEM.fullmatch(h.strip()) and not LMS_COMPUTED.match(h.strip())
        ]

    def students(self, rows: list[dict]) -> tuple[list[Student], list[str]]:
        """Every row as a student, and what is wrong with the rows that are not one (line numbers counted
        from the header, line 1)."""
        used = {self.id, self.name, self.email, self.first, self.last} - {None}
        students, seen, problems = [], {}, []
        for line, row in enumerate(rows, start=2):
            name, test = self.name_of(row), self.is_test(row)
            sid = (row.get(self.id) or "").strip()
            if not sid and test:  # Canvas's test student has no SIS ids: its Canvas id keeps it apart
                sid = next((v for c in self.canvas_ids if (v := (row.get(c) or "").strip())), "test_student")
            if not sid:
                problems.append(f"the student {name or '(no name)'} (line {line}) has no {self.id!r}")
                continue
            if sid in seen:
                problems.append(f"the id {sid!r} is on lines {seen[sid]} and {line}")
                continue
            seen[sid] = line
            email = (row.get(self.email) or "").strip() if self.email else ""
            if not email and self.kind == "canvas":
                login = (row.get(self.headers.get("sis login id", "")) or "").strip()
                email = login if "@" in login else ""
            extra = {
                k: (v or "").strip()
                for k, v in row.items()
                if k is not None
                and isinstance(v, str)
                and (k not in used or k == self.id and self.kind != "csv")
                and (self.identity is None or k in self.identity)
            }
            students.append(Student(sid, name, email, extra, "test" if test else "active"))
        return students, problems


def read_roster(path: Path, id_column: str | None = None) -> tuple[Roster, list[str]]:
    """The roster in `path`, and warnings about how it was read."""
    path = Path(path)
    if not path.is_file():
        raise RosterError(
            f"no roster file at {path} (expected a CSV file: student_id,name,email, or your LMS's gradebook export)"
        )
    text, warning = _decode(path.read_bytes(), str(path))
    return parse_roster(text, str(path), id_column), [warning] if warning else []
