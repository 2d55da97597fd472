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
- manual points (+ or -) with a reason, per student and assignment.

    final = max(0, score - late penalty + manual points)

Exports are rewritten whole and atomically from the gradebook, never appended to, so a crash
halfway leaves the previous complete files.
"""
from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from .roster import Roster, Student

SCHEMA_VERSION = 1
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
"""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        raise ValueError(f"cannot read the time {text!r}: expected e.g. 2026-12-01 23:59, 2026-12-01T23:59+01:00 "
                         "or 2026-12-01 22:59:00 UTC") from None
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


@dataclass
class Adjustment:
    id: int
    student: str
    assignment: str
    points: float
    reason: str
    created_at: str


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
    tests: list[dict]
    notes: list[str]
    adjustments: list[Adjustment] = field(default_factory=list)


class Gradebook:
    """A class's gradebook in the SQLite file `path` (created on first use)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30)  # a rollback journal: no -wal files left beside the exports
        with self.db:
            self.db.executescript(SCHEMA)
            found = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if found is None:
                self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(found[0]) > SCHEMA_VERSION:
                raise ValueError(f"{self.path} was written by a newer course grader (gradebook schema {found[0]}, "
                                 f"this one reads {SCHEMA_VERSION}): update the course (course_lib and course_grader)")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- runs and results --------------------------------------------------------------------------

    def start_run(self, command: str, solutions: str) -> int:
        with self.db:
            return self.db.execute("INSERT INTO runs (started_at, command, solutions, warnings) VALUES (?, ?, ?, '[]')",
                                   (now(), command, solutions)).lastrowid

    def finish_run(self, run: int, warnings: list[str]) -> None:
        with self.db:
            self.db.execute("UPDATE runs SET finished_at=?, warnings=? WHERE id=?", (now(), json.dumps(warnings), run))

    def runs(self) -> list[dict]:
        cur = self.db.execute("SELECT id, started_at, finished_at, command, solutions, warnings FROM runs ORDER BY id")
        return [dict(id=r[0], started_at=r[1], finished_at=r[2], command=r[3], solutions=r[4], warnings=json.loads(r[5]))
                for r in cur]

    def record(self, result, *, file: str | None, submission_sha256: str | None, submitted_at: str | None,
               submitted_from: str | None, solutions_path: str, solutions_sha256: str, run: int | None) -> int:
        """Store one graded submission (a grade.SubmissionResult); returns its attempt number."""
        student, assignment = result.student_id, result.assignment
        with self.db:
            last = self.db.execute("SELECT attempt, submission_sha256, status FROM results WHERE student=? AND assignment=? "
                                   "ORDER BY attempt DESC LIMIT 1", (student, assignment)).fetchone()
            if last is None:
                attempt = 1
            elif submission_sha256 is None and last[1] is not None:
                return last[0]  # nothing found now, but a file was graded before: keep it (the caller warns)
            elif last[1] == submission_sha256 or last[2] == "not submitted":
                attempt = last[0]  # the same file again (a regrade), or a first file after "not submitted"
            else:
                attempt = last[0] + 1  # a new file: a new attempt; the earlier ones stay on record
            tests = [t if isinstance(t, dict) else t.__dict__ for t in result.tests]
            self.db.execute("INSERT OR REPLACE INTO results VALUES (?,?,?, ?,?,?, ?,?,?,?, ?,?, ?,?,?, ?,?)", (
                student, assignment, attempt, result.status, float(result.score), float(result.max_score),
                file, submission_sha256, submitted_at, submitted_from, solutions_path, solutions_sha256,
                now(), float(result.seconds), run, json.dumps(tests, ensure_ascii=False),
                json.dumps(list(result.notes), ensure_ascii=False)))
        return attempt

    def results_of_runs(self, runs: list[int]) -> dict[tuple[str, str], tuple[str, str | None, str]]:
        """(student, assignment) -> (status, submission sha256, solutions sha256) of what `runs` recorded
        (the latest attempt each), so that a run that was interrupted can be resumed."""
        if not runs:
            return {}
        marks = ",".join("?" * len(runs))
        cur = self.db.execute(f"SELECT student, assignment, status, submission_sha256, solutions_sha256 FROM results "
                              f"WHERE run IN ({marks}) ORDER BY attempt", list(runs))
        return {(r[0], r[1]): (r[2], r[3], r[4]) for r in cur}

    def has_file_graded(self, student: str, assignment: str) -> bool:
        return self.db.execute("SELECT 1 FROM results WHERE student=? AND assignment=? AND submission_sha256 IS NOT NULL",
                               (student, assignment)).fetchone() is not None

    def solutions_used(self, assignment: str) -> set[tuple[str, str]]:
        """(path, sha256) of every solution notebook that graded the latest attempts of `assignment`."""
        return {(r.solutions_path, r.solutions_sha256) for r in self.rows() if r.assignment == assignment}

    # --- adjustments --------------------------------------------------------------------------------

    def set_deadline(self, d: Deadline) -> None:
        if d.percent_per_day < 0 or not 0 <= d.max_percent <= 100 or d.grace_minutes < 0:
            raise ValueError(f"a late penalty needs percent_per_day >= 0, 0 <= max_percent <= 100 and grace >= 0; got "
                             f"{d.percent_per_day}, {d.max_percent}, {d.grace_minutes}")
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO deadlines VALUES (?,?,?,?,?)",
                            (d.assignment, d.due.isoformat(), d.percent_per_day, d.max_percent, d.grace_minutes))

    def deadlines(self) -> dict[str, Deadline]:
        cur = self.db.execute("SELECT assignment, due, percent_per_day, max_percent, grace_minutes FROM deadlines")
        return {r[0]: Deadline(r[0], datetime.fromisoformat(r[1]), r[2], r[3], r[4]) for r in cur}

    def add_adjustment(self, student: str, assignment: str, points: float, reason: str) -> int:
        if not reason.strip():
            raise ValueError("an adjustment needs a reason (it is shown to the student in the feedback)")
        if not math.isfinite(points):
            raise ValueError(f"an adjustment is a finite number of points, got {points}")
        with self.db:
            return self.db.execute("INSERT INTO adjustments (student, assignment, points, reason, created_at) VALUES (?,?,?,?,?)",
                                   (student, assignment, float(points), reason.strip(), now())).lastrowid

    def remove_adjustment(self, adjustment_id: int) -> None:
        with self.db:
            if self.db.execute("DELETE FROM adjustments WHERE id=?", (adjustment_id,)).rowcount == 0:
                raise ValueError(f"there is no adjustment number {adjustment_id} (see `course adjust --list`)")

    def adjustments(self) -> list[Adjustment]:
        cur = self.db.execute("SELECT id, student, assignment, points, reason, created_at FROM adjustments ORDER BY id")
        return [Adjustment(*r) for r in cur]

    # --- the roster ---------------------------------------------------------------------------------

    def set_roster(self, roster: Roster) -> None:
        with self.db:
            self.db.execute("DELETE FROM roster")
            self.db.executemany("INSERT INTO roster VALUES (?,?,?,?,?)", [
                (s.id, s.name, s.email, json.dumps(s.extra, ensure_ascii=False), i) for i, s in enumerate(roster.students)])

    def roster(self) -> Roster | None:
        cur = self.db.execute("SELECT student, name, email, extra FROM roster ORDER BY position")
        students = [Student(r[0], r[1], r[2], json.loads(r[3])) for r in cur]
        return Roster(students, f"{self.path} (roster)") if students else None

    # --- reading it back ----------------------------------------------------------------------------

    def rows(self) -> list[Row]:
        """The latest attempt of every (student, assignment), adjustments applied, sorted."""
        roster = self.roster()
        deadlines = self.deadlines()
        by_key: dict[tuple[str, str], list[Adjustment]] = {}
        for adj in self.adjustments():
            by_key.setdefault((adj.student, adj.assignment), []).append(adj)
        cur = self.db.execute("""
            SELECT r.*, (SELECT COUNT(*) FROM results x WHERE x.student=r.student AND x.assignment=r.assignment)
            FROM results r WHERE r.attempt = (SELECT MAX(attempt) FROM results y
                                              WHERE y.student=r.student AND y.assignment=r.assignment)""")
        rows = []
        for (student, assignment, attempt, status, score, max_score, file, _sha, submitted_at, submitted_from,
             sol_path, sol_sha, graded_at, seconds, _run, tests, notes, attempts) in cur:
            deadline = deadlines.get(assignment)
            penalty, days = (0.0, 0)
            if deadline is not None and submitted_at and status == "graded":
                penalty, days = deadline.penalty(datetime.fromisoformat(submitted_at), max_score)
            adjs = by_key.get((student, assignment), [])
            manual = round(sum(a.points for a in adjs), 2)
            final = round(max(0.0, score - penalty + manual), 2)
            rows.append(Row(student, roster.name(student) if roster else "", assignment, attempt, attempts, status,
                            score, max_score, penalty, days, manual, final, file, submitted_at, submitted_from,
                            graded_at, seconds, sol_path, sol_sha, json.loads(tests), json.loads(notes), adjs))
        order = {s.id: i for i, s in enumerate(roster.students)} if roster else {}
        rows.sort(key=lambda r: (order.get(r.student, len(order)), r.student, r.assignment))
        return rows

    def attempts(self, student: str, assignment: str) -> list[dict]:
        cur = self.db.execute("SELECT attempt, status, score, max_score, file, submitted_at, graded_at, solutions_sha256 "
                              "FROM results WHERE student=? AND assignment=? ORDER BY attempt", (student, assignment))
        keys = ("attempt", "status", "score", "max_score", "file", "submitted_at", "graded_at", "solutions_sha256")
        return [dict(zip(keys, r)) for r in cur]


def open_gradebook(out: Path) -> Gradebook:
    return Gradebook(Path(out) / "gradebook.db")
