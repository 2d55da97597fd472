"""Late penalties and the teacher's other adjustments to a score, the rules and the tables that keep them.

Kept in the gradebook and applied to every row it gives (`lateness`, `gradebook_rows`), so in every export:
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

`AdjustmentTables` is the part of `Gradebook` that keeps them (`set_deadline`, `add_adjustment`,
`set_extension` and the rest), in the gradebook's tables.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from .gradebook_schema import now, whoami


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
class Late:
    """A result's late penalty, and how late it was in words."""

    penalty: float = 0.0
    days: int = 0
    text: str = ""  # how late, in words ("" when on time)
    extension: str = ""  # the student's own deadline, in words ("" without one)


def lateness(
    deadline: Deadline | None, extension: Extension | None, submitted_at: str | None, status: str, max_score: float
) -> Late:
    """The late penalty of a result submitted at `submitted_at` (ISO 8601; None: the time is unknown): counted
    from the student's extension when they have one (an extension never makes a deadline earlier), else from
    the assignment's deadline. A result without a submission time is never late, and only a graded submission
    loses points."""
    if deadline is None:
        return Late()
    extended = extension is not None and extension.due > deadline.due
    due = replace(deadline, due=extension.due.astimezone(deadline.due.tzinfo)) if extended else deadline
    shown = f"Extension to {_clock(due.due, due.due.tzinfo)}" if extended else ""
    if not (submitted_at and status == "graded"):
        return Late(extension=shown)
    when = datetime.fromisoformat(submitted_at)
    penalty, days = due.penalty(when, max_score)
    if not penalty:
        return Late(extension=shown + " (on time)" if shown else "")
    label = "your extended deadline" if extended else "the deadline"
    return Late(penalty, days, due.describe(when, days, label), shown)


class AdjustmentTables:
    """`Gradebook`'s methods for its deadlines, adjustments and extensions (it is a part of `Gradebook` only)."""

    db: sqlite3.Connection
    path: Path

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
