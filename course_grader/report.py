"""`course report`: what the class got right and wrong, exercise by exercise, from the gradebook.

For every assignment and exercise: how many students passed, earned part of the points, failed,
did not attempt it or hit an error, the mean points, and the hints the class saw most often, so a
teacher sees what to teach again. Written as `report.md` (a table per assignment) and one figure per
assignment, `report-<assignment>.png` (stacked bars, colour-blind-safe colours), next to the gradebook.

Only submitted work counts: "not submitted" rows are counted separately, not as failures.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.feedback import STATUSES, num
from course_lib.runner.notebook import write_atomic

from .gradebook import Gradebook, Row

OUTCOMES = tuple(s for s in STATUSES if s != "not submitted")  # passed, partial, failed, not attempted, error
# Okabe-Ito colours: distinguishable with every common colour-vision deficiency, and on dark backgrounds.
COLOURS = {"passed": "#009E73", "partial": "#56B4E9", "failed": "#E69F00", "not attempted": "#999999", "error": "#D55E00"}


@dataclass
class ExerciseSummary:
    assignment: str
    exercise: str  # the exercise's heading ("Exercise 3: A numerically stable softmax")
    max_points: float
    counts: Counter = field(default_factory=Counter)  # outcome -> students
    points: list[float] = field(default_factory=list)
    hints: Counter = field(default_factory=Counter)  # the hint or problem a learner was shown -> how often

    @property
    def submitted(self) -> int:
        return sum(self.counts[o] for o in OUTCOMES)

    @property
    def pass_rate(self) -> float:
        return self.counts["passed"] / self.submitted if self.submitted else 0.0

    @property
    def mean_points(self) -> float:
        return sum(self.points) / len(self.points) if self.points else 0.0


def _hints(message: str) -> list[str]:
    """What a learner was told, reduced to the part that is the same for everyone who made the same
    mistake: the `Hint:` lines, else the problem after the check's name, numbers and values blanked."""
    hints = [line.split("Hint:", 1)[1].strip() for line in message.splitlines() if "Hint:" in line]
    if not hints:
        first = message.strip().splitlines()[0] if message.strip() else ""
        hints = [first.split(": ", 1)[-1].strip()] if first else []
    return [re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "…", h)[:160] for h in hints if h]


def summarize(rows: list[Row], assignments: list[str] | None = None) -> tuple[dict[str, list[ExerciseSummary]], Counter]:
    """assignment -> its exercises' summaries (in notebook order), and assignment -> students not submitted."""
    by_assignment: dict[str, dict[str, ExerciseSummary]] = {}
    missing: Counter = Counter()
    for r in rows:
        if assignments and r.assignment not in assignments:
            continue
        exercises = by_assignment.setdefault(r.assignment, {})
        if r.status != "graded":
            missing[r.assignment] += 1
            continue
        for t in r.tests:
            key = t.get("exercise") or t["grade_id"]
            summary = exercises.setdefault(key, ExerciseSummary(r.assignment, key, t["max_points"]))
            outcome = t["status"] if t["status"] in OUTCOMES else "error"
            summary.counts[outcome] += 1
            summary.points.append(t["points"])
            if outcome in ("partial", "failed", "error"):
                summary.hints.update(set(_hints(t.get("message", ""))))
    return {a: list(ex.values()) for a, ex in sorted(by_assignment.items())}, missing


def markdown(summaries: dict[str, list[ExerciseSummary]], missing: Counter, top: int = 3) -> str:
    lines = ["# Class report", ""]
    for assignment, exercises in summaries.items():
        graded = max((e.submitted for e in exercises), default=0)
        lines += [f"## {assignment}", "", f"{graded} submission(s) graded, {missing[assignment]} not submitted.", ""]
        if not exercises:
            continue
        lines += ["| Exercise | Passed | Partial | Failed | Not attempted | Error | Mean points | Most common hints |",
                  "|---|---|---|---|---|---|---|---|"]
        for e in exercises:
            hints = "<br>".join(f"{n}× {h.replace('|', '/')}" for h, n in e.hints.most_common(top)) or "–"
            lines.append(f"| {e.exercise.replace('|', '/')} | {e.counts['passed']} ({e.pass_rate:.0%}) | {e.counts['partial']} "
                         f"| {e.counts['failed']} | {e.counts['not attempted']} | {e.counts['error']} "
                         f"| {num(e.mean_points)} / {num(e.max_points)} | {hints} |")
        hardest = min(exercises, key=lambda e: (e.pass_rate, e.exercise))
        lines += ["", f"Lowest pass rate: **{hardest.exercise}** ({hardest.pass_rate:.0%}).", ""]
    return "\n".join(lines).rstrip() + "\n"


def figure(assignment: str, exercises: list[ExerciseSummary], path: Path) -> Path:
    """Stacked horizontal bars: for each exercise, the share of submissions by outcome."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    labels = [e.exercise if len(e.exercise) <= 48 else e.exercise[:47] + "…" for e in exercises]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(exercises) + 1.6))
    left = [0.0] * len(exercises)
    for outcome in OUTCOMES:
        shares = [e.counts[outcome] / e.submitted if e.submitted else 0.0 for e in exercises]
        ax.barh(labels, shares, left=left, color=COLOURS[outcome], label=outcome, edgecolor="white", linewidth=0.5)
        left = [a + b for a, b in zip(left, shares)]
    ax.invert_yaxis()  # the first exercise on top, as in the notebook
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of submitted notebooks")
    ax.set_title(f"{assignment}: outcome of each exercise")
    ax.legend(ncol=len(OUTCOMES), loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False, fontsize="small")
    fig.tight_layout()
    partial = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(partial, dpi=110)
    plt.close(fig)
    os.replace(partial, path)  # a reader never sees half a figure
    return path


def write_report(book: Gradebook, out: Path, assignments: list[str] | None = None) -> tuple[str, list[Path]]:
    """report.md and report-<assignment>.png in `out`; returns the Markdown and the figures' paths."""
    summaries, missing = summarize(book.rows(), assignments)
    if assignments:
        unknown = [a for a in assignments if a not in summaries]
        if unknown:
            raise ValueError(f"the gradebook has no results for {', '.join(unknown)} (it has: {', '.join(summaries) or 'none'})")
    if not summaries:
        raise ValueError(f"the gradebook {book.path} has no results yet: run `course grade` first")
    text = markdown(summaries, missing)
    write_atomic(out / "report.md", text)
    figures = [figure(a, ex, out / f"report-{a}.png") for a, ex in summaries.items() if ex]
    return text, figures
