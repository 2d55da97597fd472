"""A class roster: who is in the class, read from the CSV file a teacher already has.

    student_id,name,email
    ab123,Ada Byron,ada@example.org
    zm42,Zoë Müller,zoe@example.org

The id is the name of the student's folder under `submissions/` and the key of the gradebook.
Column names are matched loosely, so a spreadsheet or an LMS export works as it is: the id is the
first of `student_id`, `id`, `username`, `login`, `user`; the name is `name`, `full name`,
`student` or `student name` (or `first name` and `last name`); `email` or `email address`. Every
other column is kept (`extra`) for the LMS exports (Canvas's `SIS User ID`, Moodle's `ID number`, ...).

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
NAME_COLUMNS = ("name", "full name", "student", "student name")
EMAIL_COLUMNS = ("email", "email address", "e-mail")


class RosterError(ValueError):
    """The roster file cannot be used; the message says what was expected and what was found."""


@dataclass
class Student:
    id: str  # the folder name under submissions/ and the gradebook's key
    name: str = ""  # as the roster spells it (shown in exports and feedback)
    email: str = ""
    extra: dict[str, str] = field(default_factory=dict)  # every other column, by its header as written


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

    def __post_init__(self) -> None:
        self.by_id = {s.id: s for s in self.students}

    def __contains__(self, student_id: str) -> bool:
        return student_id in self.by_id

    def __len__(self) -> int:
        return len(self.students)

    def name(self, student_id: str) -> str:
        s = self.by_id.get(student_id)
        return s.name if s else ""

    def find(self, key: str) -> tuple[Student | None, str]:
        """The student a folder name or an LMS label `key` stands for, and how it was matched
        ("" for the exact id). Tried in order: the id, the id ignoring case, the email or its part
        before the @, the name (loosely, see `normalize`), any extra column's value (an LMS user id).
        A key that fits several students matches none of them."""
        if key in self.by_id:
            return self.by_id[key], ""
        tries = [
            ("id", lambda s: s.id.casefold() == key.casefold()),
            ("email", lambda s: bool(s.email) and key.casefold() in (s.email.casefold(), s.email.split("@")[0].casefold())),
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
        return raw.decode("cp1252", errors="replace"), f"{source} is not UTF-8; it was read as Windows-1252 (Excel's 'CSV')"


def _column(headers: dict[str, str], names: tuple[str, ...]) -> str | None:
    for n in names:
        if n in headers:
            return headers[n]
    return None


def parse_roster(text: str, source: str = "roster") -> Roster:
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise RosterError(f"{source} is empty; expected a CSV file whose first line names the columns, e.g. student_id,name,email")
    try:
        dialect = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    written = [h for h in (reader.fieldnames or []) if h is not None]
    headers = {h.strip().casefold(): h for h in written}
    id_col = _column(headers, ID_COLUMNS)
    if id_col is None:
        raise RosterError(f"{source} has the columns {written}; expected one of them to be the student id, "
                          f"named one of: {', '.join(ID_COLUMNS)}")
    name_col = _column({k: v for k, v in headers.items() if v != id_col}, NAME_COLUMNS)
    first, last = _column(headers, ("first name", "first", "given name")), _column(headers, ("last name", "surname", "family name"))
    email_col = _column(headers, EMAIL_COLUMNS)
    used = {id_col, name_col, email_col} - {None}
    students, seen, problems = [], {}, []
    for line, row in enumerate(reader, start=2):
        sid = (row.get(id_col) or "").strip()
        if not any((v or "").strip() for k, v in row.items() if k is not None):
            continue  # a blank line
        if not sid:
            problems.append(f"line {line} has no {id_col!r}")
            continue
        if sid in seen:
            problems.append(f"the id {sid!r} is on lines {seen[sid]} and {line}")
            continue
        seen[sid] = line
        if name_col:
            name = (row.get(name_col) or "").strip()
        else:
            name = " ".join(p for p in ((row.get(first) or "").strip() if first else "", (row.get(last) or "").strip() if last else "") if p)
        extra = {k: (v or "").strip() for k, v in row.items() if k is not None and k not in used and isinstance(v, str)}
        students.append(Student(sid, name, (row.get(email_col) or "").strip() if email_col else "", extra))
    if problems:
        raise RosterError(f"{source}: " + "; ".join(problems[:10]) + (" ..." if len(problems) > 10 else ""))
    if not students:
        raise RosterError(f"{source} names no students (only the header line {lines[0]!r})")
    return Roster(students, source)


def read_roster(path: Path) -> tuple[Roster, list[str]]:
    """The roster in `path`, and warnings about how it was read."""
    path = Path(path)
    if not path.is_file():
        raise RosterError(f"no roster file at {path} (expected a CSV file: student_id,name,email)")
    text, warning = _decode(path.read_bytes(), str(path))
    return parse_roster(text, str(path)), [warning] if warning else []
