"""The gradebook: every grade a class has earned, kept in one SQLite file across runs.

    grading-output/gradebook.db      the record (this module)
    grading-output/grades.csv, grades.json, feedback/, canvas.csv, moodle.csv    exports of it

`course grade` adds what it graded and replaces nothing else: regrading one student (`--student`)
leaves the other rows, their feedback and every adjustment as they were. A row is keyed by
(student, assignment, attempt). A new file from a student is a new attempt; grading the same file
again (same content hash) replaces that attempt, as does a first submission after a "not submitted"
row; the latest attempt is the one that counts. Each row records the submitted file's hash and
time, the solution notebook (path and SHA-256) that graded it, and when.

Adjustments live here too and are applied in every export (`deadlines`): a deadline per assignment
with its late penalty, a student's own deadline (an extension), and manual points with a reason and
who gave them; a removed one stays on record.

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

The tables and their migrations are `gradebook_schema`; a row, as exports read it, is `gradebook_rows.Row`.

Exports are rewritten whole and atomically from the gradebook, never appended to, so a crash
halfway leaves the previous complete files. `rows(student, assignment)` reads only what one student's
rows need: a mark saved on the marking page rewrites that student's feedback file from it, without
reading the class.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from course_lib.runner.text import inert, inert_tree

from .deadlines import Adjustment, AdjustmentTables
from .deadlines import Deadline as Deadline  # the gradebook's public names, wherever they are defined
from .deadlines import parse_time as parse_time
from .gradebook_rows import Mark, Row, RowContext, StoredResult, apply_marks, make_row
from .gradebook_schema import MARK_COLUMNS, connect, now, whoami
from .gradebook_schema import SCHEMA_VERSION as SCHEMA_VERSION
from .roster import Roster, Student

BIG_CHANGE = 0.1  # a regrade that moves a score by this share of its maximum or more is "big" (course report)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


class Gradebook(AdjustmentTables):
    """A class's gradebook in the SQLite file `path` (created on first use). Its deadlines, extensions and
    adjustments are kept by the methods of `deadlines.AdjustmentTables`; its rows are made by `gradebook_rows`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = connect(self.path)

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
            apply_marks(manual, student, a, marks)
            found.append((student, a, path, manual))
        return found

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
        rows = [make_row(StoredResult(*r), ctx) for r in cur]
        last = len(ctx.people)
        rows.sort(key=lambda r: (ctx.people.get(r.student, ("", "", "", last))[3], r.student, r.assignment))
        return rows

    def _context(self, student: str | None, assignment: str | None) -> RowContext:
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
        return RowContext(people, self.deadlines(), extensions, adjustments, marks, late_flags, replaced)

    def attempts(self, student: str, assignment: str) -> list[dict]:
        cur = self.db.execute(
            "SELECT attempt, status, score, max_score, file, submitted_at, graded_at, "
            "solutions_sha256 FROM results WHERE student=? AND assignment=? ORDER BY attempt",
            (student, assignment),
        )
        keys = ("attempt", "status", "score", "max_score", "file", "submitted_at", "graded_at", "solutions_sha256")
        return [dict(zip(keys, r, strict=True)) for r in cur]


def open_gradebook(out: Path) -> Gradebook:
    return Gradebook(Path(out) / "gradebook.db")
