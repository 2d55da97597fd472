"""The gradebook: every grade a class has earned, kept in one SQLite file across runs.

    grading-output/gradebook.db      the record (this module)
    grading-output/grades.csv, grades.json, feedback/, canvas.csv, moodle.csv    exports of it

`course grade` adds what it graded and replaces nothing else: regrading one student (`--student`)
leaves the other rows, their feedback and every adjustment as they were. A row is keyed by
(student, assignment, attempt). A new file from a student is a new attempt; grading the same file
again (same content hash) replaces that attempt, as does a first submission after a "not submitted"
row; the latest attempt is the one that counts. Each row records the submitted file's hash and
time, the solution notebook (path and SHA-256) that graded it, and when.

Adjustments live here too and are applied in every export:
- a deadline per assignment, with a late penalty in percent of the assignment's points per started
  day late (after an optional grace period), capped. The submission time is the student's
  `timestamp.txt` (nbgrader's format: its exchange and `course unpack` write it); a file's
  modification time is not used (copying resets it), so a submission without one is never penalised,
  and `course deadline` says how many such rows there are;
- a student's own deadline for an assignment (`course deadline A DUE --student ID`, an extension): the
  assignment's late penalty counts from it instead, and the feedback says "Extension to ... (on time)"
  rather than a penalty taken back by hand. A replaced or removed extension stays on record;
- manual points (+ or -) with a reason, per student and assignment, and who gave them. Removing one
  (`course adjust --remove N`) keeps it on record, no longer counted, with who removed it, when and why.

    final = max(0, score - late penalty + manual points)

Nothing graded is ever lost. Grading the same file again (a regrade with changed hidden tests, say)
replaces its attempt, and the replaced version goes into `history` first: its score, every test,
the solutions' hash that graded it, when, and which run replaced it and why (`course grade
--reason`). Every run records the scores it changed (`runs.changes`), and a student's feedback says
when and why their work was regraded.

Also kept here: the roster (with each student's status: active, dropped, or an LMS's test student),
what `course unpack` decided about each student's files (`unpacked`: renamed, skipped, marked late
by the LMS, too large), the LMS ids the teacher mapped to students by hand (`lms_map`: Moodle's
namesakes, given once with `course unpack --map`), and the marks people gave to manually graded
answers (`marks`: points, a rubric item, a comment, the grader, and the mark the grader's page showed
when they gave it), which join the score. Marks are only ever added: a later mark of the same answer
counts, the earlier ones stay on record.

    score = the tests' points + the marks;    final = max(0, score - late penalty + manual points)

Changes to these tables are migrations (`ADDED_COLUMNS`): an older gradebook gets the new columns when
it is opened, and a gradebook written by a newer grader is refused rather than misread.

Exports are rewritten whole and atomically from the gradebook, never appended to, so a crash
halfway leaves the previous complete files. `rows(student, assignment)` reads only what one student's
rows need: a mark saved on the marking page rewrites that student's feedback file from it, without
reading the class.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import math
import sqlite3
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

from course_lib.runner.text import inert, inert_tree

from .roster import Roster, Student

SCHEMA_VERSION = 5  # 3: submission times per (student, assignment); 4: removed adjustments kept, marks.replaces;
# 5: per-student extensions, LMS ids mapped by the teacher
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    student TEXT NOT NULL, assignment TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, score REAL NOT NULL, max_score REAL NOT NULL,
    file TEXT, submission_sha256 TEXT, submitted_at TEXT, submitted_from TEXT,
    solutions_path TEXT NOT NULL, solutions_sha256 TEXT NOT NULL,
    graded_at TEXT NOT NULL, seconds REAL NOT NULL, run INTEGER,
    tests TEXT NOT NULL, notes TEXT NOT NULL,
    PRIMARY KEY (student, assignment, attempt));
CREATE TABLE IF NOT EXISTS deadlines (
    assignment TEXT PRIMARY KEY, due TEXT NOT NULL, percent_per_day REAL NOT NULL,
    max_percent REAL NOT NULL, grace_minutes REAL NOT NULL);
CREATE TABLE IF NOT EXISTS adjustments (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, assignment TEXT NOT NULL,
    points REAL NOT NULL, reason TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS roster (student TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
    extra TEXT NOT NULL, position INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
    command TEXT NOT NULL, solutions TEXT NOT NULL, warnings TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS history (
    student TEXT NOT NULL, assignment TEXT NOT NULL, attempt INTEGER NOT NULL,
    status TEXT NOT NULL, score REAL NOT NULL, max_score REAL NOT NULL,
    solutions_sha256 TEXT NOT NULL, graded_at TEXT NOT NULL, run INTEGER,
    tests TEXT NOT NULL, replaced_at TEXT NOT NULL, replaced_by_run INTEGER);
CREATE TABLE IF NOT EXISTS unpacked (
    student TEXT NOT NULL, assignment TEXT NOT NULL, entry TEXT NOT NULL, sha256 TEXT,
    late INTEGER NOT NULL, notes TEXT NOT NULL, skipped TEXT, unpacked_at TEXT NOT NULL,
    PRIMARY KEY (student, assignment));
CREATE TABLE IF NOT EXISTS marks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, assignment TEXT NOT NULL,
    grade_id TEXT NOT NULL, points REAL NOT NULL, rubric TEXT NOT NULL, comment TEXT NOT NULL,
    grader TEXT NOT NULL, answer_sha256 TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS extensions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, assignment TEXT NOT NULL, due TEXT NOT NULL,
    grader TEXT NOT NULL, created_at TEXT NOT NULL, removed_at TEXT, removed_by TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS lms_map (
    layout TEXT NOT NULL, lms_key TEXT NOT NULL, student TEXT NOT NULL, given_as TEXT NOT NULL,
    given_at TEXT NOT NULL, PRIMARY KEY (layout, lms_key));
"""
# Columns added since schema 1 (an older gradebook gets them on opening, with these defaults).
ADDED_COLUMNS = {
    "results": [("manual", "TEXT NOT NULL DEFAULT '[]'")],
    "adjustments": [
        ("grader", "TEXT NOT NULL DEFAULT ''"),
        ("cap", "INTEGER NOT NULL DEFAULT 0"),
        ("removed_at", "TEXT"),  # NULL while it counts (schema 4)
        ("removed_by", "TEXT NOT NULL DEFAULT ''"),
        ("removed_reason", "TEXT NOT NULL DEFAULT ''"),
    ],
    "marks": [("replaces", "INTEGER")],  # the mark on record that it replaced (schema 4)
    "roster": [("status", "TEXT NOT NULL DEFAULT 'active'")],
    "runs": [("reason", "TEXT NOT NULL DEFAULT ''"), ("changes", "TEXT NOT NULL DEFAULT '[]'")],
    "history": [("submitted_at", "TEXT")],  # the replaced version's submission time
    "unpacked": [("submitted_at", "TEXT")],  # the submission time the LMS gave for this (student, assignment)
}
MARK_COLUMNS = "id, student, assignment, grade_id, points, rubric, comment, grader, answer_sha256, created_at, replaces"
BIG_CHANGE = 0.1  # a regrade that moves a score by this share of its maximum or more is "big" (course report)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def whoami() -> str:
    """The grader's name when none is given: this machine's login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_time(text: str, tz=None) -> datetime:
    """An aware datetime from ISO 8601 ("2026-12-01 23:59", "2026-12-01T23:59:00+01:00") or nbgrader's
    timestamp format ("2026-12-01 22:59:00.000000 UTC"). A time without a zone is in `tz`, by
    default this machine's local zone."""
    raw = text.strip()
    cleaned = raw[:-4].strip() + "+00:00" if raw.upper().endswith(" UTC") else raw
    cleaned = cleaned[:-1] + "+00:00" if cleaned.endswith("Z") else cleaned
    try:
        when = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ValueError(
            f"cannot read the time {text!r}: expected e.g. 2026-12-01 23:59, 2026-12-01T23:59+01:00 "
            "or 2026-12-01 22:59:00 UTC"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz) if tz is not None else when.astimezone()
    return when


@dataclass
class Deadline:
    assignment: str
    due: datetime  # aware
    percent_per_day: float  # of the assignment's points, per started day late
    max_percent: float = 100.0  # the most a late submission loses
    grace_minutes: float = 0.0  # lateness below this is not late

    def penalty(self, submitted_at: datetime | None, max_score: float) -> tuple[float, int]:
        """(points lost, days late) for a submission at `submitted_at`."""
        if submitted_at is None:
            return 0.0, 0
        late = submitted_at - self.due - timedelta(minutes=self.grace_minutes)
        if late <= timedelta(0):
            return 0.0, 0
        days = math.ceil(late / timedelta(days=1))
        percent = min(self.max_percent, self.percent_per_day * days)
        return round(max_score * percent / 100.0, 2), days

    def describe(self, submitted_at: datetime, days: int, label: str = "the deadline") -> str:
        """How late, in words, with the time in the deadline's own zone: "1 day 10 hours after the
        deadline (2026-12-01 23:59 +01:00), at 2026-12-03 10:12 +01:00: 2 started days, -10% each"
        (`label` names the deadline: "your extended deadline")."""
        zone = self.due.tzinfo
        late = submitted_at - self.due
        d, rest = divmod(int(late.total_seconds()) // 60, 24 * 60)
        h, m = divmod(rest, 60)
        parts = [f"{d} day{'s' if d != 1 else ''}"] if d else []
        parts += [f"{h} hour{'s' if h != 1 else ''}"] if h else []
        parts += [f"{m} minute{'s' if m != 1 else ''}"] if m and not d else []
        shown = " ".join(parts) or "less than a minute"
        started = f"{days} started day{'s' if days != 1 else ''}"
        cap = f" (at most -{self.max_percent:g}%)" if self.max_percent < 100 else ""
        return (
            f"{shown} after {label} ({_clock(self.due, zone)}), at {_clock(submitted_at, zone)}: {started}, "
            f"-{self.percent_per_day:g}% each{cap}"
        )


def _clock(when: datetime, zone) -> str:
    shown = when.astimezone(zone)
    return shown.strftime("%Y-%m-%d %H:%M ") + (
        shown.strftime("%z")[:3] + ":" + shown.strftime("%z")[3:] if shown.utcoffset() else "UTC"
    )


@dataclass
class Extension:
    """One student's own deadline for an assignment (`course deadline A DUE --student ID`): the assignment's late
    penalty counts from it. One counts at a time; a replaced or removed one stays on record."""

    id: int
    student: str
    assignment: str
    due: datetime  # aware
    grader: str  # who gave it
    created_at: str
    removed_at: str | None = None  # replaced by a newer one, or `--remove`d: no longer counts
    removed_by: str = ""


@dataclass
class Adjustment:
    id: int
    student: str
    assignment: str
    points: float
    reason: str
    created_at: str
    grader: str = ""  # who made it (`course adjust --grader`, by default the login name)
    cap: bool = False  # `--cap`: the final score stays at most the assignment's maximum
    removed_at: str | None = None  # `course adjust --remove`: kept on record, no longer counted
    removed_by: str = ""
    removed_reason: str = ""


@dataclass
class Mark:
    """A person's mark for one manually graded answer."""

    id: int
    student: str
    assignment: str
    grade_id: str
    points: float
    rubric: str  # the rubric item chosen ("" for none)
    comment: str  # for the student
    grader: str
    answer_sha256: str  # the answer it was given for: a changed answer needs marking again
    created_at: str
    replaces: int | None = None  # the mark of this answer on record when it was given (None: the first)


class StaleMark(ValueError):
    """A mark given from a page that showed another state of the answer's marks than the one on record
    (someone marked it since the page was loaded): it is refused, and `on_record` is the mark that counts."""

    def __init__(self, student: str, grade_id: str, on_record: Mark | None):
        self.on_record = on_record
        if on_record is None:
            said = "the mark your page showed is no longer on record"
        else:
            when = on_record.created_at[:16].replace("T", " ")
            said = f"{on_record.grader} marked it {on_record.points:g} since your page was loaded ({when} UTC)"
        super().__init__(f"{student}'s answer to {grade_id}: {said}; your mark was not saved")


@dataclass
class Row:
    """One (student, assignment): its latest attempt, with every adjustment applied."""

    student: str
    name: str
    assignment: str
    attempt: int
    attempts: int
    status: str
    score: float
    max_score: float
    late_penalty: float
    days_late: int
    manual: float
    final: float
    file: str | None
    submitted_at: str | None
    submitted_from: str | None
    graded_at: str
    seconds: float  # how long grading it took
    solutions_path: str
    solutions_sha256: str
    tests: list[dict]  # every test's result, and the manually graded answers (`manual: true`) in notebook order
    notes: list[str]
    adjustments: list[Adjustment] = field(default_factory=list)
    auto_score: float = 0.0  # the tests' points alone (score = auto_score + the marks)
    to_mark: int = 0  # manually graded answers still waiting for a person
    enrolment: str = "active"  # the roster's status: active | dropped | test
    email: str = ""
    lms_late: bool = False  # the LMS marked the submission late (Canvas's flag, from `course unpack`)
    late_text: str = ""  # how late, in words and in the deadline's zone ("" when on time)
    extension: str = ""  # the student's own deadline, in words: "Extension to 2026-12-05 23:59 +01:00 (on time)"
    regrades: list[dict] = field(default_factory=list)  # {at, old, new, reason}: this attempt graded again


class Gradebook:
    """A class's gradebook in the SQLite file `path` (created on first use)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30)  # a rollback journal: no -wal files left beside the exports
        with self.db:
            self.db.executescript(SCHEMA)
            found = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if found is not None and int(found[0]) > SCHEMA_VERSION:
                raise ValueError(
                    f"{self.path} was written by a newer course grader (gradebook schema {found[0]}, "
                    f"this one reads {SCHEMA_VERSION}): update the course (course_lib and course_grader)"
                )
            for table, columns in ADDED_COLUMNS.items():
                have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                for name, kind in columns:
                    if name not in have:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- runs and results --------------------------------------------------------------------------

    def start_run(self, command: str, solutions: str, reason: str = "") -> int:
        with self.db:
            return self.db.execute(
                "INSERT INTO runs (started_at, command, solutions, warnings, reason) VALUES (?, ?, ?, '[]', ?)",
                (now(), inert(command), inert(solutions), inert(reason)),
            ).lastrowid

    def finish_run(self, run: int, warnings: list[str], changes: list[dict] | None = None) -> None:
        with self.db:
            self.db.execute(
                "UPDATE runs SET finished_at=?, warnings=?, changes=? WHERE id=?",
                (
                    now(),
                    json.dumps(inert_tree(list(warnings)), ensure_ascii=False),
                    json.dumps(inert_tree(changes or []), ensure_ascii=False),
                    run,
                ),
            )

    def runs(self) -> list[dict]:
        cur = self.db.execute(
            "SELECT id, started_at, finished_at, command, solutions, warnings, reason, changes FROM runs ORDER BY id"
        )
        return [
            dict(
                id=r[0],
                started_at=r[1],
                finished_at=r[2],
                command=r[3],
                solutions=r[4],
                warnings=json.loads(r[5]),
                reason=r[6],
                changes=json.loads(r[7]),
            )
            for r in cur
        ]

    def history(self, student: str | None = None, assignment: str | None = None) -> list[dict]:
        """Every replaced version of a graded attempt (oldest first), with the run that replaced it and why."""
        reasons = {r["id"]: r["reason"] for r in self.runs()}
        cur = self.db.execute(
            "SELECT student, assignment, attempt, status, score, max_score, solutions_sha256, "
            "graded_at, run, tests, replaced_at, replaced_by_run, submitted_at FROM history "
            "WHERE (? IS NULL OR student=?) AND (? IS NULL OR assignment=?) ORDER BY rowid",
            (student, student, assignment, assignment),
        )
        keys = (
            "student",
            "assignment",
            "attempt",
            "status",
            "score",
            "max_score",
            "solutions_sha256",
            "graded_at",
            "run",
            "tests",
            "replaced_at",
            "replaced_by_run",
            "submitted_at",
        )
        found = []
        for r in cur:
            h = dict(zip(keys, r, strict=True))
            h["tests"] = json.loads(h["tests"])
            h["reason"] = reasons.get(h["replaced_by_run"], "")
            found.append(h)
        return found

    def record(
        self,
        result,
        *,
        file: str | None,
        submission_sha256: str | None,
        submitted_at: str | None,
        submitted_from: str | None,
        solutions_path: str,
        solutions_sha256: str,
        run: int | None,
    ) -> int:
        """Store one graded submission (a grade.SubmissionResult); returns its attempt number."""
        student, assignment = result.student_id, result.assignment
        with self.db:
            last = self.db.execute(
                "SELECT attempt, submission_sha256, status FROM results WHERE student=? "
                "AND assignment=? ORDER BY attempt DESC LIMIT 1",
                (student, assignment),
            ).fetchone()
            if last is None:
                attempt = 1
            elif submission_sha256 is None and last[1] is not None:
                return last[0]  # nothing found now, but a file was graded before: keep it (the caller warns)
            elif last[1] == submission_sha256 or last[2] == "not submitted":
                attempt = last[0]  # the same file again (a regrade), or a first file after "not submitted"
            else:
                attempt = last[0] + 1  # a new file: a new attempt; the earlier ones stay on record
            # Learner text is made inert once more here, whatever route it came by: a row can always be stored.
            tests = inert_tree([t if isinstance(t, dict) else dict(t.__dict__) for t in result.tests])
            manual = inert_tree([t if isinstance(t, dict) else dict(t.__dict__) for t in getattr(result, "manual", [])])
            notes = inert_tree(list(result.notes))
            # The version this replaces goes into the history first: an overwritten score is never lost.
            self.db.execute(
                "INSERT INTO history (student, assignment, attempt, status, score, max_score, solutions_sha256, "
                "graded_at, run, tests, replaced_at, replaced_by_run, submitted_at) "
                "SELECT student, assignment, attempt, status, score, max_score, "
                "solutions_sha256, graded_at, run, tests, ?, ?, submitted_at FROM results "
                "WHERE student=? AND assignment=? AND attempt=?",
                (now(), run, student, assignment, attempt),
            )
            self.db.execute(
                "INSERT OR REPLACE INTO results (student, assignment, attempt, status, score, max_score, "
                "file, submission_sha256, submitted_at, submitted_from, solutions_path, solutions_sha256, "
                "graded_at, seconds, run, tests, notes, manual) "
                "VALUES (?,?,?, ?,?,?, ?,?,?,?, ?,?, ?,?,?, ?,?,?)",
                (
                    student,
                    assignment,
                    attempt,
                    inert(result.status, 100),
                    float(result.score),
                    float(result.max_score),
                    None if file is None else inert(file, 1000),
                    submission_sha256,
                    submitted_at,
                    submitted_from,
                    solutions_path,
                    solutions_sha256,
                    now(),
                    float(result.seconds),
                    run,
                    json.dumps(tests, ensure_ascii=False),
                    json.dumps(notes, ensure_ascii=False),
                    json.dumps(manual, ensure_ascii=False),
                ),
            )
        return attempt

    def results_of_runs(self, runs: list[int]) -> dict[tuple[str, str], tuple[str, str | None, str]]:
        """(student, assignment) -> (status, submission sha256, solutions sha256) of what `runs` recorded
        (the latest attempt each), so that a run that was interrupted can be resumed."""
        if not runs:
            return {}
        marks = ",".join("?" * len(runs))
        cur = self.db.execute(
            f"SELECT student, assignment, status, submission_sha256, solutions_sha256 FROM results "
            f"WHERE run IN ({marks}) ORDER BY attempt",
            list(runs),
        )
        return {(r[0], r[1]): (r[2], r[3], r[4]) for r in cur}

    def latest(self, student: str, assignment: str) -> dict | None:
        """The latest attempt of (student, assignment) as it was recorded: its tests and its manually graded
        answers apart, no marks applied (a run that resumes an interrupted one returns it as this run's)."""
        r = self.db.execute(
            "SELECT status, score, max_score, seconds, tests, notes, manual FROM results "
            "WHERE student=? AND assignment=? ORDER BY attempt DESC LIMIT 1",
            (student, assignment),
        ).fetchone()
        if r is None:
            return None
        return dict(
            status=r[0],
            score=r[1],
            max_score=r[2],
            seconds=r[3],
            tests=json.loads(r[4]),
            notes=json.loads(r[5]),
            manual=json.loads(r[6]),
        )

    def file_hashes(self) -> dict[tuple[str, str], str | None]:
        """The submitted file's hash behind each (student, assignment)'s latest attempt."""
        cur = self.db.execute(
            "SELECT student, assignment, submission_sha256 FROM results r WHERE attempt = (SELECT "
            "MAX(attempt) FROM results y WHERE y.student=r.student AND y.assignment=r.assignment)"
        )
        return {(r[0], r[1]): r[2] for r in cur}

    def graded_time(self, student: str, assignment: str, sha256: str) -> tuple[str | None, str | None]:
        """(submitted_at, where it came from) recorded when this very file (by its hash) was graded before:
        a regrade keeps the file's time, whatever has been unpacked into the folder since."""
        r = self.db.execute(
            "SELECT submitted_at, submitted_from FROM results WHERE student=? AND assignment=? AND "
            "submission_sha256=? ORDER BY attempt DESC LIMIT 1",
            (student, assignment, sha256),
        ).fetchone()
        return (r[0], r[1]) if r is not None else (None, None)

    def unpacked_students(self) -> set[str]:
        """Every student `course unpack` wrote a folder for, whatever the assignment."""
        return {r[0] for r in self.db.execute("SELECT DISTINCT student FROM unpacked")}

    def has_file_graded(self, student: str, assignment: str) -> bool:
        return (
            self.db.execute(
                "SELECT 1 FROM results WHERE student=? AND assignment=? AND submission_sha256 IS NOT NULL",
                (student, assignment),
            ).fetchone()
            is not None
        )

    def solutions_used(self, assignment: str) -> set[tuple[str, str]]:
        """(path, sha256) of every solution notebook that graded the latest attempts of `assignment`
        (a "not submitted" row graded nothing, so it does not count)."""
        return {
            (r.solutions_path, r.solutions_sha256)
            for r in self.rows()
            if r.assignment == assignment and r.status != "not submitted"
        }

    def state_warnings(self) -> list[str]:
        """What needs the teacher in the gradebook as it is now (not as it was during some run): an
        assignment whose latest grades come from more than one version of its solutions."""
        warnings = []
        by_version: dict[str, dict[str, list[Row]]] = {}
        for r in self.rows():
            if r.status != "not submitted":
                by_version.setdefault(r.assignment, {}).setdefault(r.solutions_sha256, []).append(r)
        for assignment, versions in sorted(by_version.items()):
            if len(versions) > 1:
                newest = max(versions, key=lambda h: max(r.graded_at for r in versions[h]))
                older = sorted({r.student for h, rows in versions.items() if h != newest for r in rows})
                shown = ", ".join(f"{len(rows)} with sha256 {h[:12]}" for h, rows in versions.items())
                warnings.append(
                    f"{assignment}: the grades come from {len(versions)} versions of the solutions "
                    f"({shown}); regrade the {len(older)} student(s) graded with the older one(s) to "
                    "make them consistent: " + ", ".join(older[:10]) + (" ..." if len(older) > 10 else "")
                )
        return warnings

    # --- what `course unpack` decided -----------------------------------------------------------------

    def record_unpacked(
        self,
        student: str,
        assignment: str,
        entry: str,
        sha256: str | None,
        late: bool,
        notes: list[str],
        skipped: str | None = None,
        submitted_at: str | None = None,
    ) -> None:
        """What unpacking an LMS download did with one student's files (it reaches grades.json and the
        feedback when `course grade` grades the file it wrote, or gives the row a reason when it wrote none),
        and the submission time the LMS gave for that file (ISO 8601, UTC; None: it gave none, stored as ""
        where an older version's records have NULL, time unknown). Each assignment has its own record:
        unpacking another assignment never changes this one's time."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO unpacked (student, assignment, entry, sha256, late, notes, skipped, "
                "unpacked_at, submitted_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    student,
                    assignment,
                    inert(entry, 1000),
                    sha256,
                    int(late),
                    json.dumps(inert_tree(list(notes)), ensure_ascii=False),
                    None if skipped is None else inert(skipped),
                    now(),
                    submitted_at or "",
                ),
            )

    def unpacked(self, student: str, assignment: str) -> dict | None:
        r = self.db.execute(
            "SELECT entry, sha256, late, notes, skipped, unpacked_at, submitted_at FROM unpacked "
            "WHERE student=? AND assignment=?",
            (student, assignment),
        ).fetchone()
        if r is None:
            return None
        return {
            "entry": r[0],
            "sha256": r[1],
            "late": bool(r[2]),
            "notes": json.loads(r[3]),
            "skipped": r[4],
            "unpacked_at": r[5],
            "submitted_at": r[6],
        }

    # --- marks for manually graded answers --------------------------------------------------------------

    def add_mark(
        self,
        student: str,
        assignment: str,
        grade_id: str,
        points: float,
        *,
        rubric: str = "",
        comment: str = "",
        grader: str = "",
        answer_sha256: str,
        seen: int | None = None,
    ) -> int:
        """A person's mark for one manually graded answer (the latest mark for an answer counts); its id.

        `seen` is the id of the latest mark of this answer that the grader was shown (0: none). When it
        is given and another mark has been saved since (another grader's, or the same grader's in
        another tab), this one is refused with StaleMark: the grader decides again, knowing both."""
        if not math.isfinite(points) or points < 0:
            raise ValueError(f"a mark is a number of points, 0 or more; got {points}")
        entry = self.manual_answer(student, assignment, grade_id)
        if entry is None:
            raise ValueError(f"the gradebook has no answer to {grade_id} of {assignment} from {student}")
        if points > entry["max_points"]:
            raise ValueError(f"{grade_id} is worth at most {entry['max_points']:g} points; got {points:g}")
        with self.db:
            # Compare and add in one write transaction: two graders saving at once cannot both pass.
            self.db.execute("BEGIN IMMEDIATE")
            latest = self.latest_mark(student, assignment, grade_id)
            if seen is not None and (latest.id if latest else 0) != seen:
                raise StaleMark(student, grade_id, latest)
            return self.db.execute(
                "INSERT INTO marks (student, assignment, grade_id, points, rubric, comment, grader, "
                "answer_sha256, created_at, replaces) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    student,
                    assignment,
                    grade_id,
                    float(points),
                    rubric.strip(),
                    comment.strip(),
                    grader.strip() or whoami(),
                    answer_sha256,
                    now(),
                    latest.id if latest else None,
                ),
            ).lastrowid

    def marks(self, assignment: str | None = None, student: str | None = None) -> list[Mark]:
        """Every mark ever given (oldest first), the overwritten ones too (of `assignment`, of `student`)."""
        cur = self.db.execute(
            f"SELECT {MARK_COLUMNS} FROM marks WHERE (? IS NULL OR assignment=?) AND (? IS NULL OR student=?) "
            "ORDER BY id",
            (assignment, assignment, student, student),
        )
        return [Mark(*r) for r in cur]

    def latest_mark(self, student: str, assignment: str, grade_id: str) -> Mark | None:
        """The latest mark given to (student, assignment, grade_id), whichever answer it was for."""
        r = self.db.execute(
            f"SELECT {MARK_COLUMNS} FROM marks WHERE student=? AND assignment=? AND grade_id=? "
            "ORDER BY id DESC LIMIT 1",
            (student, assignment, grade_id),
        ).fetchone()
        return Mark(*r) if r else None

    def manual_answer(self, student: str, assignment: str, grade_id: str) -> dict | None:
        """The manually graded answer `grade_id` in the latest attempt, as the marking page shows it."""
        for r in self.rows(student, assignment):
            return next((t for t in r.tests if t.get("manual") and t["grade_id"] == grade_id), None)
        return None

    def answers(self, assignment: str | None = None) -> list[tuple[str, str, str, list[dict]]]:
        """(student, assignment, solutions path, its manually graded answers with their latest marks) for every
        latest attempt that has such answers (of `assignment`): what the marking pages list, read without the
        tests, the late penalties or the history that whole rows need."""
        marks = {(m.student, m.assignment, m.grade_id): m for m in self.marks(assignment)}
        cur = self.db.execute(
            "SELECT r.student, r.assignment, r.solutions_path, r.manual FROM results r "
            "WHERE r.manual != '[]' AND (? IS NULL OR r.assignment=?) AND r.attempt = "
            "(SELECT MAX(attempt) FROM results y WHERE y.student=r.student AND y.assignment=r.assignment)",
            (assignment, assignment),
        )
        found = []
        for student, a, path, manual in cur:
            manual = json.loads(manual)
            _apply_marks(manual, student, a, marks)
            found.append((student, a, path, manual))
        return found

    # --- adjustments --------------------------------------------------------------------------------

    def set_deadline(self, d: Deadline) -> None:
        if d.percent_per_day < 0 or not 0 <= d.max_percent <= 100 or d.grace_minutes < 0:
            raise ValueError(
                f"a late penalty needs percent_per_day >= 0, 0 <= max_percent <= 100 and grace >= 0; got "
                f"{d.percent_per_day}, {d.max_percent}, {d.grace_minutes}"
            )
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO deadlines VALUES (?,?,?,?,?)",
                (d.assignment, d.due.isoformat(), d.percent_per_day, d.max_percent, d.grace_minutes),
            )

    def deadlines(self) -> dict[str, Deadline]:
        cur = self.db.execute("SELECT assignment, due, percent_per_day, max_percent, grace_minutes FROM deadlines")
        return {r[0]: Deadline(r[0], datetime.fromisoformat(r[1]), r[2], r[3], r[4]) for r in cur}

    def add_adjustment(
        self, student: str, assignment: str, points: float, reason: str, grader: str = "", cap: bool = False
    ) -> int:
        if not reason.strip():
            raise ValueError("an adjustment needs a reason (it is shown to the student in the feedback)")
        if not math.isfinite(points):
            raise ValueError(f"an adjustment is a finite number of points, got {points}")
        with self.db:
            values = (student, assignment, float(points), reason.strip(), now(), grader.strip() or whoami(), int(cap))
            return self.db.execute(
                "INSERT INTO adjustments (student, assignment, points, reason, created_at, grader, "
                "cap) VALUES (?,?,?,?,?,?,?)",
                values,
            ).lastrowid

    def remove_adjustment(self, adjustment_id: int, grader: str = "", reason: str = "") -> Adjustment:
        """Stop counting adjustment `adjustment_id`. It stays on record with who removed it (`grader`, by
        default the login name), when and why; returns it as it is now."""
        with self.db:
            done = self.db.execute(
                "UPDATE adjustments SET removed_at=?, removed_by=?, removed_reason=? WHERE id=? AND removed_at IS NULL",
                (now(), grader.strip() or whoami(), reason.strip(), adjustment_id),
            ).rowcount
        found = next((a for a in self.adjustments(removed=True) if a.id == adjustment_id), None)
        if found is None:
            raise ValueError(f"there is no adjustment number {adjustment_id} (see `course adjust --list`)")
        if not done:
            raise ValueError(
                f"adjustment {adjustment_id} was already removed, by {found.removed_by} on "
                f"{found.removed_at[:16].replace('T', ' ')} UTC (see `course adjust --list --removed`)"
            )
        return found

    def adjustments(
        self, removed: bool = False, *, student: str | None = None, assignment: str | None = None
    ) -> list[Adjustment]:
        """The adjustments that count, oldest first (of `student`, of `assignment`); with `removed`, the removed
        ones too (they never count)."""
        cur = self.db.execute(
            "SELECT id, student, assignment, points, reason, created_at, grader, cap, removed_at, removed_by, "
            "removed_reason FROM adjustments WHERE (? OR removed_at IS NULL) AND (? IS NULL OR student=?) "
            "AND (? IS NULL OR assignment=?) ORDER BY id",
            (int(removed), student, student, assignment, assignment),
        )
        return [Adjustment(*r[:7], bool(r[7]), *r[8:]) for r in cur]

    # --- per-student extensions -----------------------------------------------------------------------

    def set_extension(self, student: str, assignment: str, due: datetime, grader: str = "") -> Extension:
        """Give `student` their own deadline for `assignment` (later than the assignment's): the late penalty counts
        from it. It replaces the student's earlier extension of that assignment (kept on record as removed)."""
        deadline = self.deadlines().get(assignment)
        if deadline is None:
            raise ValueError(
                f"{assignment} has no deadline yet: set it first (course deadline {assignment} DUE --penalty P); "
                "an extension moves one student's deadline, the penalty stays the assignment's"
            )
        if due <= deadline.due:
            raise ValueError(
                f"an extension is later than the deadline: {assignment} is due {deadline.due.isoformat()}, "
                f"the extension given is {due.isoformat()}"
            )
        self._known_student(student, assignment)
        who = grader.strip() or whoami()
        with self.db:
            self.db.execute(
                "UPDATE extensions SET removed_at=?, removed_by=? WHERE student=? AND assignment=? "
                "AND removed_at IS NULL",
                (now(), who, student, assignment),
            )
            self.db.execute(
                "INSERT INTO extensions (student, assignment, due, grader, created_at) VALUES (?,?,?,?,?)",
                (student, assignment, due.isoformat(), who, now()),
            )
        return self.extensions(student=student, assignment=assignment)[0]

    def remove_extension(self, student: str, assignment: str, grader: str = "") -> Extension:
        """Take `student`'s extension of `assignment` away (kept on record, with who removed it and when)."""
        with self.db:
            done = self.db.execute(
                "UPDATE extensions SET removed_at=?, removed_by=? WHERE student=? AND assignment=? "
                "AND removed_at IS NULL",
                (now(), grader.strip() or whoami(), student, assignment),
            ).rowcount
        if not done:
            given = sorted(f"{e.student} ({e.assignment})" for e in self.extensions())
            raise ValueError(
                f"{student} has no extension of {assignment} to remove (the extensions that count: "
                f"{', '.join(given) or 'none'}; course deadline --list shows them)"
            )
        return self.extensions(student=student, assignment=assignment, removed=True)[-1]

    def extensions(
        self, *, student: str | None = None, assignment: str | None = None, removed: bool = False
    ) -> list[Extension]:
        """The extensions that count (with `removed`, the replaced and removed ones too), oldest first."""
        cur = self.db.execute(
            "SELECT id, student, assignment, due, grader, created_at, removed_at, removed_by FROM extensions "
            "WHERE (? OR removed_at IS NULL) AND (? IS NULL OR student=?) AND (? IS NULL OR assignment=?) ORDER BY id",
            (int(removed), student, student, assignment, assignment),
        )
        return [Extension(r[0], r[1], r[2], datetime.fromisoformat(r[3]), *r[4:]) for r in cur]

    def _known_student(self, student: str, assignment: str) -> None:
        """Raise ValueError unless `student` is on the roster or has a grade of `assignment`."""
        known = self.db.execute(
            "SELECT 1 FROM roster WHERE student=? UNION SELECT 1 FROM results WHERE student=? AND assignment=?",
            (student, student, assignment),
        ).fetchone()
        if known is None:
            raise ValueError(
                f"{student!r} is neither on the roster kept in {self.path} nor graded for {assignment}: give the "
                "student's id, as `course roster list` shows it"
            )

    # --- LMS ids the teacher mapped -------------------------------------------------------------------

    def map_lms_id(self, layout: str, lms_key: str, student: str, given_as: str) -> None:
        """Record that the LMS's id `lms_key` (a Moodle participant number, a Canvas user id, a plain zip's folder)
        is `student` (`course unpack --map`): later unpackings use it before the roster's names."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO lms_map (layout, lms_key, student, given_as, given_at) VALUES (?,?,?,?,?)",
                (layout, lms_key, student, inert(given_as, 200), now()),
            )

    def lms_map(self, layout: str) -> dict[str, str]:
        """The LMS ids the teacher mapped for `layout`: LMS key -> student id."""
        return dict(self.db.execute("SELECT lms_key, student FROM lms_map WHERE layout=?", (layout,)))

    # --- the roster ---------------------------------------------------------------------------------

    def set_roster(self, roster: Roster) -> None:
        """Keep `roster` as the class (replacing the one kept before). A student dropped before stays
        dropped when a new export still lists them (an LMS lists inactive students on request)."""
        dropped = {r[0] for r in self.db.execute("SELECT student FROM roster WHERE status='dropped'")}
        with self.db:
            self.db.execute("DELETE FROM roster")
            self.db.executemany(
                "INSERT INTO roster (student, name, email, extra, position, status) VALUES (?,?,?,?,?,?)",
                [
                    (
                        s.id,
                        s.name,
                        s.email,
                        json.dumps(s.extra, ensure_ascii=False),
                        i,
                        "dropped" if s.id in dropped and s.status == "active" else s.status,
                    )
                    for i, s in enumerate(roster.students)
                ],
            )
            for key, value in (
                ("roster_source", roster.source),
                ("roster_kind", roster.kind),
                ("roster_id_column", roster.id_column),
                ("lms_columns", json.dumps(roster.lms_columns)),
            ):
                self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def set_status(self, student: str, status: str) -> None:
        """A roster student's status: active, dropped (no "not submitted" row, nothing in the LMS files) or test."""
        with self.db:
            if self.db.execute("UPDATE roster SET status=? WHERE student=?", (status, student)).rowcount == 0:
                known = [r[0] for r in self.db.execute("SELECT student FROM roster ORDER BY position")]
                none = "(it has none yet: `course roster import FILE` or `course grade --roster FILE`)"
                raise ValueError(
                    f"{student!r} is not on the roster kept in {self.path} "
                    + (f"(it has {len(known)} students: {', '.join(known[:5])} ...)" if known else none)
                )

    def meta(self, key: str, default: str = "") -> str:
        found = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return found[0] if found else default

    def set_meta(self, key: str, value: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def roster_student(self, student: str) -> Student | None:
        """One student as the kept roster has them (None: not on it), read alone."""
        r = self.db.execute(
            "SELECT student, name, email, extra, status FROM roster WHERE student=?", (student,)
        ).fetchone()
        return Student(r[0], r[1], r[2], json.loads(r[3]), r[4]) if r else None

    def roster(self) -> Roster | None:
        cur = self.db.execute("SELECT student, name, email, extra, status FROM roster ORDER BY position")
        students = [Student(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in cur]
        if not students:
            return None
        return Roster(
            students,
            self.meta("roster_source", f"{self.path} (roster)"),
            self.meta("roster_kind", "csv"),
            self.meta("roster_id_column"),
            json.loads(self.meta("lms_columns", "[]")),
        )

    # --- reading it back ----------------------------------------------------------------------------

    def rows(self, student: str | None = None, assignment: str | None = None) -> list[Row]:
        """The latest attempt of every (student, assignment), marks and adjustments applied, sorted. `student`
        and `assignment` narrow it to their rows, and then only what those rows need is read (a saved mark
        renders one student's feedback without reading the class)."""
        ctx = self._context(student, assignment)
        cur = self.db.execute(
            """
            SELECT r.student, r.assignment, r.attempt, r.status, r.score, r.max_score, r.file, r.submission_sha256,
                   r.submitted_at, r.submitted_from, r.solutions_path, r.solutions_sha256, r.graded_at, r.seconds,
                   r.tests, r.notes, r.manual,
                   (SELECT COUNT(*) FROM results x WHERE x.student=r.student AND x.assignment=r.assignment)
            FROM results r WHERE (? IS NULL OR r.student=?) AND (? IS NULL OR r.assignment=?)
                AND r.attempt = (SELECT MAX(attempt) FROM results y
                                 WHERE y.student=r.student AND y.assignment=r.assignment)""",
            (student, student, assignment, assignment),
        )
        rows = [_row(_Result(*r), ctx) for r in cur]
        last = len(ctx.people)
        rows.sort(key=lambda r: (ctx.people.get(r.student, ("", "", "", last))[3], r.student, r.assignment))
        return rows

    def _context(self, student: str | None, assignment: str | None) -> _Context:
        """What the rows of `student` and `assignment` (None: every one) need beside their results."""
        who = (student, student)
        people = {
            r[0]: tuple(r[1:])
            for r in self.db.execute(
                "SELECT student, name, email, status, position FROM roster WHERE (? IS NULL OR student=?)", who
            )
        }
        adjustments: dict[tuple[str, str], list[Adjustment]] = {}
        for adj in self.adjustments(student=student, assignment=assignment):
            adjustments.setdefault((adj.student, adj.assignment), []).append(adj)
        marks = {(m.student, m.assignment, m.grade_id): m for m in self.marks(assignment, student)}  # the latest counts
        late_flags = {
            (r[0], r[1]): (r[2], bool(r[3]))
            for r in self.db.execute(
                "SELECT student, assignment, sha256, late FROM unpacked WHERE (? IS NULL OR student=?) "
                "AND (? IS NULL OR assignment=?)",
                (*who, assignment, assignment),
            )
        }
        replaced: dict[tuple[str, str, int], list[dict]] = {}
        for h in self.history(student, assignment):
            replaced.setdefault((h["student"], h["assignment"], h["attempt"]), []).append(h)
        extensions = {(e.student, e.assignment): e for e in self.extensions(student=student, assignment=assignment)}
        return _Context(people, self.deadlines(), extensions, adjustments, marks, late_flags, replaced)

    def attempts(self, student: str, assignment: str) -> list[dict]:
        cur = self.db.execute(
            "SELECT attempt, status, score, max_score, file, submitted_at, graded_at, "
            "solutions_sha256 FROM results WHERE student=? AND assignment=? ORDER BY attempt",
            (student, assignment),
        )
        keys = ("attempt", "status", "score", "max_score", "file", "submitted_at", "graded_at", "solutions_sha256")
        return [dict(zip(keys, r, strict=True)) for r in cur]


class _Result(NamedTuple):
    """A student's latest attempt at an assignment, as `Gradebook.rows` reads it from `results`."""

    student: str
    assignment: str
    attempt: int
    status: str
    auto: float  # the tests' points
    max_score: float  # the tests' maximum
    file: str | None
    sha: str | None
    submitted_at: str | None
    submitted_from: str | None
    solutions_path: str
    solutions_sha256: str
    graded_at: str
    seconds: float
    tests: str  # JSON
    notes: str  # JSON
    manual: str  # JSON: the manually graded answers
    attempts: int


@dataclass
class _Context:
    """What the rows of a gradebook (or of one student, one assignment) need besides their results."""

    people: dict[str, tuple]  # student -> (name, email, status, position) from the roster
    deadlines: dict[str, Deadline]
    extensions: dict[tuple[str, str], Extension]  # (student, assignment) -> the extension that counts
    adjustments: dict[tuple[str, str], list[Adjustment]]
    marks: dict[tuple[str, str, str], Mark]  # (student, assignment, grade_id) -> the latest mark
    late_flags: dict[tuple[str, str], tuple[str | None, bool]]  # (student, assignment) -> (file's sha256, LMS late)
    replaced: dict[tuple[str, str, int], list[dict]]  # (student, assignment, attempt) -> its replaced versions


@dataclass
class _Late:
    penalty: float = 0.0
    days: int = 0
    text: str = ""  # how late, in words ("" when on time)
    extension: str = ""  # the student's own deadline, in words ("" without one)


def _lateness(deadline: Deadline | None, extension: Extension | None, r: _Result, max_score: float) -> _Late:
    """The late penalty of a result: counted from the student's extension when they have one (an extension never
    makes a deadline earlier), else from the assignment's deadline. A result without a submission time is never
    late, and only a graded submission loses points."""
    if deadline is None:
        return _Late()
    extended = extension is not None and extension.due > deadline.due
    due = replace(deadline, due=extension.due.astimezone(deadline.due.tzinfo)) if extended else deadline
    shown = f"Extension to {_clock(due.due, due.due.tzinfo)}" if extended else ""
    if not (r.submitted_at and r.status == "graded"):
        return _Late(extension=shown)
    when = datetime.fromisoformat(r.submitted_at)
    penalty, days = due.penalty(when, max_score)
    if not penalty:
        return _Late(extension=shown + " (on time)" if shown else "")
    label = "your extended deadline" if extended else "the deadline"
    return _Late(penalty, days, due.describe(when, days, label), shown)


def _row(r: _Result, ctx: _Context) -> Row:
    """A gradebook row from a result: its marks, late penalty and adjustments applied."""
    key = (r.student, r.assignment)
    tests, manual = json.loads(r.tests), json.loads(r.manual)
    marked, to_mark = _apply_marks(manual, r.student, r.assignment, ctx.marks)
    score = round(r.auto + marked, 2)
    max_score = round(r.max_score + sum(t["max_points"] for t in manual), 2)
    late = _lateness(ctx.deadlines.get(r.assignment), ctx.extensions.get(key), r, max_score)
    adjs = ctx.adjustments.get(key, [])
    extra = round(sum(a.points for a in adjs), 2)
    final = max(0.0, score - late.penalty + extra)
    if any(a.cap for a in adjs):
        final = min(final, max(max_score, score - late.penalty))  # --cap: no extra credit from adjustments
    name, email, enrolment, _ = ctx.people.get(r.student, ("", "", "active", 0))
    return Row(
        r.student,
        name,
        r.assignment,
        r.attempt,
        r.attempts,
        r.status,
        score,
        max_score,
        late.penalty,
        late.days,
        extra,
        round(final, 2),
        r.file,
        r.submitted_at,
        r.submitted_from,
        r.graded_at,
        r.seconds,
        r.solutions_path,
        r.solutions_sha256,
        _in_order(tests, manual),
        json.loads(r.notes),
        adjs,
        auto_score=r.auto,
        to_mark=to_mark,
        enrolment=enrolment,
        email=email,
        lms_late=ctx.late_flags.get(key) == (r.sha, True),
        late_text=late.text,
        extension=late.extension,
        regrades=_regrades(ctx.replaced.get((*key, r.attempt), []), r.auto),
    )


def _apply_marks(manual: list[dict], student: str, assignment: str, marks: dict) -> tuple[float, int]:
    """Give each manually graded answer its latest mark (in place); (points marked, answers still to mark).
    A mark given to another answer (the student handed in again and changed it) no longer applies."""
    total, waiting = 0.0, 0
    for t in manual:
        t["manual"] = True
        if t["status"] not in ("to be marked", "marked"):
            continue  # not attempted, not submitted: nothing to mark
        m = marks.get((student, assignment, t["grade_id"]))
        if m is not None and m.answer_sha256 == t.get("answer_sha256"):
            t.update(
                points=m.points,
                status="marked",
                rubric=m.rubric,
                comment=m.comment,
                grader=m.grader,
                marked_at=m.created_at,
            )
            t["message"] = "\n".join(x for x in (m.rubric, m.comment) if x)
            total += m.points
        else:
            t.update(points=0.0, status="to be marked")
            if m is not None:
                t["message"] = "The answer changed since it was marked; it is to be marked again."
            waiting += 1
    return round(total, 2), waiting


def _in_order(tests: list[dict], manual: list[dict]) -> list[dict]:
    """The tests with each manually graded answer after the test it follows in the notebook (`after`)."""
    if not manual:
        return tests
    merged = list(tests)
    for t in manual:
        after = t.get("after")
        at = next((i + 1 for i, x in enumerate(merged) if x.get("grade_id") == after), 0 if not after else len(merged))
        while at < len(merged) and merged[at].get("manual"):  # after the answers already placed there
            at += 1
        merged.insert(at, t)
    return merged


def _regrades(versions: list[dict], current: float) -> list[dict]:
    """The times an attempt was graded again (not a first file replacing "not submitted"), with the
    score before and after and the reason the teacher gave."""
    found = []
    scores = [v["score"] for v in versions] + [current]
    for i, v in enumerate(versions):
        if v["status"] == "not submitted":
            continue
        old, new = scores[i], scores[i + 1]
        if old != new or v["reason"]:
            found.append(
                {
                    "at": v["replaced_at"],
                    "old": old,
                    "new": new,
                    "reason": v["reason"],
                    "solutions_sha256": v["solutions_sha256"],
                }
            )
    return found


def open_gradebook(out: Path) -> Gradebook:
    return Gradebook(Path(out) / "gradebook.db")
