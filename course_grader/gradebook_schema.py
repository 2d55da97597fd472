"""How the gradebook is stored: its tables in one SQLite file (`SCHEMA`), and `connect`, which creates them or
brings an older gradebook up to date.

Changes to these tables are migrations (`ADDED_COLUMNS`): an older gradebook gets the new columns when
it is opened, and a gradebook written by a newer grader is refused rather than misread. Every record says
when it was made (`now`: ISO 8601, in UTC) and, where a person made it, who (`whoami` when no name is given).
"""

from __future__ import annotations

import getpass
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

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


def connect(path: Path) -> sqlite3.Connection:
    """The gradebook's database at `path`, its tables made or brought up to date (ValueError when a newer grader
    wrote it)."""
    db = sqlite3.connect(path, timeout=30)  # a rollback journal: no -wal files left beside the exports
    with db:
        db.executescript(SCHEMA)
        found = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if found is not None and int(found[0]) > SCHEMA_VERSION:
            raise ValueError(
                f"{path} was written by a newer course grader (gradebook schema {found[0]}, "
                f"this one reads {SCHEMA_VERSION}): update the course (course_lib and course_grader)"
            )
        for table, columns in ADDED_COLUMNS.items():
            have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns:
                if name not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    return db


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def whoami() -> str:
    """The grader's name when none is given: this machine's login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
