"""Step 6 of grading, told: what a run changed, as the LMS gets it, and what the teacher must look at.

`grade_changes` compares the gradebook's rows before and after a run (or, for a dry run, a copy of it):
the finals the LMS gets, with the exercises and the parts (late penalty, marks, adjustments) that moved;
`summarize_changes` words it for the terminal and `runs.changes`; `batch_trouble` names the submissions
the grader could not check and the exercises a limit stopped, which are never silent zeros.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from course_lib.runner.feedback import LIMITS, NOT_CHECKED, num

from .gradebook import Row


@dataclass
class Change:
    """One student's grade that a run changed (or, in a dry run, would change): what the LMS gets, the final."""

    student: str
    label: str  # "Zoë Müller (zm42)"
    assignment: str
    old: float  # the final before: exercises and marks, less the late penalty, plus adjustments
    new: float
    max_score: float
    kind: str  # "regrade" (the same file graded again) | "new attempt" (another file) | "first file"
    exercises: list[tuple[str, float, float]] = field(default_factory=list)  # (exercise, old, new) that moved
    parts: list[tuple[str, float, float]] = field(
        default_factory=list
    )  # (late penalty | marks | adjustments, old, new)

    def line(self) -> str:
        moved = [f"{what}: {num(a)} → {num(b)}" for what, a, b in self.parts]
        moved += [f"{e}: {num(a)} → {num(b)}" for e, a, b in self.exercises]
        kind = "" if self.kind == "regrade" else f" [{self.kind}]"
        shown = f" ({'; '.join(moved)})" if moved else ""
        return f"{self.label}, {self.assignment}: final {num(self.old)} → {num(self.new)}{kind}{shown}"

    def as_dict(self) -> dict:
        return {
            "student": self.student,
            "assignment": self.assignment,
            "old": self.old,
            "new": self.new,
            "kind": self.kind,
            "exercises": [list(e) for e in self.exercises],
            "parts": [list(p) for p in self.parts],
        }


def _points_by_test(tests: list) -> dict[str, tuple[str, float]]:
    found = {}
    for t in tests:
        t = t if isinstance(t, dict) else t.__dict__
        if not t.get("manual"):
            found[t["grade_id"]] = (t.get("exercise") or t["grade_id"], float(t["points"]))
    return found


def grade_changes(
    before: dict[tuple[str, str], Row],
    after: dict[tuple[str, str], Row],
    keys: list[tuple[str, str]],
    digests: dict[tuple[str, str], str | None],
    labels: dict[str, str],
    hashes: dict[tuple[str, str], str | None],
) -> list[Change]:
    """The grades a run changed: for each (student, assignment) in `keys` that had a row `before`, the final
    score as the LMS gets it (exercises, marks, late penalty, adjustments) in the gradebook `after` the run,
    when it moved; with the parts that moved and the exercises whose points moved. `digests`: this run's file
    hash for each key; `hashes`: the file hash each old row graded."""
    changes = []
    for key in keys:
        old, new = before.get(key), after.get(key)
        if old is None or new is None or abs(new.final - old.final) < 1e-9:
            continue  # a first grade, or nothing the LMS would see moved
        old_points, new_points = _points_by_test(old.tests), _points_by_test(new.tests)
        moved = [
            (new_points[g][0], old_points.get(g, ("", 0.0))[1], p)
            for g, (_, p) in new_points.items()
            if abs(old_points.get(g, ("", 0.0))[1] - p) > 1e-9
        ]
        parts = [
            (what, a, b)
            for what, a, b in (
                ("late penalty", old.late_penalty, new.late_penalty),
                ("marks", old.score - old.auto_score, new.score - new.auto_score),
                ("adjustments", old.manual, new.manual),
            )
            if abs(a - b) > 1e-9
        ]
        same_file = digests.get(key) is not None and digests.get(key) == hashes.get(key)
        kind = "regrade" if same_file else "first file" if old.status == "not submitted" else "new attempt"
        changes.append(
            Change(key[0], labels.get(key[0], key[0]), key[1], old.final, new.final, new.max_score, kind, moved, parts)
        )
    return changes


def summarize_changes(changes: list[Change], dry_run: bool = False, limit: int | None = 12) -> list[str]:
    """The lines a run prints about the grades it changed, as the LMS gets them (finals): "52 grade(s)
    changed (the same files graded again): final 20 → 17 (50), 18 → 15 (2)", how many students each
    exercise and each part (late penalty, marks, adjustments) moved for, then one line per student."""
    if not changes:
        return ["No earlier grade " + ("would change." if dry_run else "changed.")]
    verb = "would change" if dry_run else "changed"
    lines = []
    for kind in ("regrade", "new attempt", "first file"):
        group = [c for c in changes if c.kind == kind]
        if not group:
            continue
        pairs = Counter((num(c.old), num(c.new)) for c in group)
        shown = ", ".join(f"{a} → {b} ({n})" for (a, b), n in pairs.most_common(6)) + (" ..." if len(pairs) > 6 else "")
        what = {
            "regrade": "the same files graded again",
            "new attempt": "new files handed in",
            "first file": "a first file after 'not submitted'",
        }[kind]
        lines.append(f"{len(group)} grade(s) {verb} ({what}): final {shown}")
    by_part: dict[str, list[float]] = {}
    for c in changes:
        for exercise, a, b in c.exercises:
            by_part.setdefault(f"{c.assignment}, {exercise}", []).append(b - a)
        for part, a, b in c.parts:
            by_part.setdefault(f"{c.assignment}, {part}", []).append(b - a)
    for what, deltas in sorted(by_part.items()):
        up, down = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)
        told = [f"{down} student(s) down" if down else "", f"{up} student(s) up" if up else ""]
        lines.append(f"  {what}: " + ", ".join(x for x in told if x))
    rows = [f"  {c.line()}" for c in changes]
    if limit is not None and len(rows) > limit:
        rows = rows[:limit] + [f"  ... and {len(rows) - limit} more (grades.json, runs: changes)"]
    return lines + rows


def batch_trouble(results: list, unrecorded: list[str]) -> list[str]:
    """What the teacher must look at after a batch, named: rows the grader could not check (a grader error or
    a process stopped from outside: not grades), exercises a limit stopped, results that could not be recorded."""
    lines = []
    failed = [r for r in results if r.status in NOT_CHECKED]
    if failed:
        who = ", ".join(f"{r.student_id} ({r.assignment}, {r.status})" for r in failed)
        ids = " ".join(f"--student {r.student_id}" for r in failed[:10])
        lines.append(
            f"{len(failed)} submission(s) could not be checked, which is not a grade: {who}; grade them again "
            f"with: course grade ... {ids}"
        )
    limited = [
        f"{r.student_id} ({r.assignment}: " + ", ".join(f"{t.exercise or t.grade_id} {t.cause}" for t in hit) + ")"
        for r in results
        if (hit := [t for t in r.tests if t.cause in LIMITS])
    ]
    if limited:
        lines.append(
            f"{len(limited)} submission(s) had exercises stopped by a limit (CPU time, memory, output, a crash): "
            + "; ".join(limited)
        )
    if unrecorded:
        lines.append(f"{len(unrecorded)} result(s) could not be recorded at all: " + "; ".join(unrecorded))
    return lines
