"""`course report`: Monday morning, from the gradebook: whom to look at, how the class did, what to teach again.

For every assignment:

- **who needs a look**, by name: not submitted (active students only), could not be graded
  (unreadable, the wrong notebook: with the reason), timed out, lost points to a cell they added
  (a helper the grader did not run), a big change of score when the work was regraded, marked late
  by the LMS, and written answers still to mark;
- **the score distribution** of the graded work: mean, median, lowest, highest, and a histogram;
- **each exercise**: how many students passed, earned part of the points, failed, did not attempt it
  or hit an error, the mean points, and the hints the class saw most often, quoted as one student saw
  them (numbers included), so that a teacher sees what to teach again.

Written as `report.md` and one figure per assignment, `report-<assignment>.png` (stacked bars,
colour-blind-safe colours), next to the gradebook. Only graded work counts in the tables: "not
submitted" and ungradable rows are counted apart, not as failures.
"""

from __future__ import annotations

import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.runner.feedback import MANUAL_STATUS, MARKED, NOT_GRADED, STATUSES, md_text, num
from course_lib.runner.notebook import write_atomic
from course_lib.runner.text import inert

from .gradebook import BIG_CHANGE, Gradebook, Row

OUTCOMES = tuple(s for s in STATUSES if s != "not submitted")  # passed, partial, failed, not attempted, error
# Okabe-Ito colours: distinguishable with every common colour-vision deficiency, and on dark backgrounds.
COLOURS = {
    "passed": "#009E73",
    "partial": "#56B4E9",
    "failed": "#E69F00",
    "not attempted": "#999999",
    "error": "#D55E00",
    MANUAL_STATUS: "#CC79A7",
}
HINT_CHARS = 200  # a hint longer than this is cut at a word, never inside one


@dataclass
class ExerciseSummary:
    assignment: str
    exercise: str  # the exercise's heading ("Exercise 3: A numerically stable softmax")
    max_points: float
    counts: Counter = field(default_factory=Counter)  # outcome -> students
    points: list[float] = field(default_factory=list)
    hints: Counter = field(default_factory=Counter)  # a mistake (its hint, numbers blanked) -> how often
    examples: dict[str, Counter] = field(default_factory=dict)  # that key -> the texts students saw -> how often
    manual: bool = False  # a written answer, marked by a person

    @property
    def submitted(self) -> int:
        return sum(self.counts[o] for o in (*OUTCOMES, MANUAL_STATUS))

    @property
    def pass_rate(self) -> float:
        return self.counts["passed"] / self.submitted if self.submitted else 0.0

    @property
    def mean_points(self) -> float:
        return sum(self.points) / len(self.points) if self.points else 0.0

    def hint_text(self, key: str) -> str:
        """The most common wording of a mistake as students saw it, with its numbers; "(numbers vary)"
        when students saw it with different ones."""
        seen = self.examples.get(key, Counter())
        if not seen:
            return key
        text, _ = seen.most_common(1)[0]
        return text + (" (numbers vary)" if len(seen) > 1 else "")


@dataclass
class Attention:
    """The students of one assignment who need the teacher's eye, by reason; each entry a readable line."""

    not_submitted: list[str] = field(default_factory=list)
    not_graded: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    added_cell: list[str] = field(default_factory=list)
    regraded: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    to_mark: list[str] = field(default_factory=list)

    TITLES = {
        "not_submitted": "Not submitted",
        "not_graded": "Could not be graded",
        "timed_out": "Timed out",
        "added_cell": "Lost points to a cell they added (the grader does not run it)",
        "regraded": "Big change of score when regraded",
        "late": "Marked late by the LMS",
        "to_mark": "Written answers still to mark (`course mark`)",
    }

    def lines(self) -> list[str]:
        found = []
        for key, title in self.TITLES.items():
            who = getattr(self, key)
            if who:
                found.append(f"- **{title}** ({len(who)}): " + "; ".join(md_text(w) for w in who))
        return found or ["- Nobody: every student handed in, and nothing needs a person."]


def _cell(text: str) -> str:
    """`text` (which may hold a learner's words) as the content of one Markdown table cell: see `md_text`."""
    return md_text(inert(text)).replace("|", "/")


def _cut(text: str, limit: int = HINT_CHARS) -> str:
    """`text` at most `limit` characters long, cut after a whole word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + " …"


def _hints(message: str) -> list[tuple[str, str]]:
    """What a learner was told, as (key, text): the `Hint:` lines, else the problem after the check's
    name. The key blanks the numbers, so the same mistake told with different values is one mistake;
    the text keeps them (cut at a word), as the student read it."""
    hints = [line.split("Hint:", 1)[1].strip() for line in message.splitlines() if "Hint:" in line]
    if not hints:
        first = message.strip().splitlines()[0] if message.strip() else ""
        hints = [first.split(": ", 1)[-1].strip()] if first else []
    return [(_cut(re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", h)), _cut(h)) for h in hints if h]


def summarize(
    rows: list[Row], assignments: list[str] | None = None
) -> tuple[dict[str, list[ExerciseSummary]], Counter]:
    """assignment -> its exercises' summaries (in notebook order), and assignment -> students not submitted."""
    by_assignment: dict[str, dict[str, ExerciseSummary]] = {}
    missing: Counter = Counter()
    for r in rows:
        if assignments and r.assignment not in assignments:
            continue
        exercises = by_assignment.setdefault(r.assignment, {})
        if r.enrolment != "active":
            continue  # a dropped student, an LMS's test student: not the class
        if r.status != "graded":
            if r.status == "not submitted":
                missing[r.assignment] += 1
            continue
        for t in r.tests:
            key = t.get("exercise") or t["grade_id"]
            summary = exercises.setdefault(
                key, ExerciseSummary(r.assignment, key, t["max_points"], manual=bool(t.get("manual")))
            )
            if t.get("manual"):
                if t["status"] == MARKED:
                    outcome = "passed" if t["points"] >= t["max_points"] else "partial" if t["points"] > 0 else "failed"
                else:
                    outcome = t["status"] if t["status"] in (*OUTCOMES, MANUAL_STATUS) else "error"
            else:
                outcome = t["status"] if t["status"] in OUTCOMES else "error"
            summary.counts[outcome] += 1
            if outcome != MANUAL_STATUS:
                summary.points.append(t["points"])
            if outcome in ("partial", "failed", "error") and not t.get("manual"):
                for key_, text in dict(_hints(t.get("message", ""))).items():
                    summary.hints[key_] += 1
                    summary.examples.setdefault(key_, Counter())[text] += 1
    return {a: list(ex.values()) for a, ex in sorted(by_assignment.items())}, missing


def attention(rows: list[Row], assignment: str, labels: dict[str, str]) -> Attention:
    """Who needs a look in `assignment`, and why (see the module's docstring)."""
    found = Attention()
    for r in rows:
        if r.assignment != assignment or r.enrolment != "active":
            continue
        who = labels.get(r.student) or (f"{r.name} ({r.student})" if r.name else r.student)
        if r.status == "not submitted":
            found.not_submitted.append(who)
            continue
        if r.status in NOT_GRADED:
            why = (r.notes[0] if r.notes else r.status).rstrip(".")
            found.not_graded.append(f"{who}: {r.status}: {_cut(why, 120)}")
            continue
        # From how the cells ended (`cause`), never from what the messages say, which a learner can write.
        timed = [t.get("exercise") or t["grade_id"] for t in r.tests if t.get("cause") == "timeout"]
        if timed:
            found.timed_out.append(f"{who} ({', '.join(timed)})")
        helper = [t for t in r.tests if t.get("cause") == "added-cell"]
        if helper:
            lost = sum(t["max_points"] - t["points"] for t in helper)
            found.added_cell.append(f"{who} (-{num(lost)})")
        if r.regrades:  # what the regrades did in all: a slip fixed again is no change
            first, now = r.regrades[0]["old"], r.regrades[-1]["new"]
            if abs(now - first) >= BIG_CHANGE * max(r.max_score, 1e-9):
                found.regraded.append(f"{who}: {num(first)} → {num(now)} (regraded {r.regrades[-1]['at'][:10]})")
        if r.lms_late:
            found.late.append(who)
        if r.to_mark:
            found.to_mark.append(who)
    if len(found.to_mark) > 12:
        found.to_mark = found.to_mark[:12] + [f"and {len(found.to_mark) - 12} more"]
    return found


def distribution(rows: list[Row], assignment: str) -> list[str]:
    """The graded work's final scores: mean, median, lowest, highest, and a histogram in tenths of the maximum."""
    graded = [r for r in rows if r.assignment == assignment and r.status == "graded" and r.enrolment == "active"]
    if not graded:
        return []
    top = max(r.max_score for r in graded)
    finals = [r.final for r in graded]
    lines = [
        f"Scores of the {len(finals)} graded submission(s), of {num(top)}: mean {num(statistics.mean(finals))}, "
        f"median {num(statistics.median(finals))}, lowest {num(min(finals))}, highest {num(max(finals))}.",
        "",
        "| Score | Students |",
        "|---|---|",
    ]
    bins = Counter()
    for f in finals:
        bins[min(9, int(10 * f / top)) if top and f < top else 10] += 1
    width = max(bins.values())
    for b in range(11):
        label = f"{num(top)} (full marks)" if b == 10 else f"{num(top * b / 10)} to under {num(top * (b + 1) / 10)}"
        bar = "█" * round(20 * bins[b] / width) if bins[b] else ""
        lines.append(f"| {label} | {bar} {bins[b]} |")
    return lines


def markdown(
    summaries: dict[str, list[ExerciseSummary]],
    missing: Counter,
    top: int = 3,
    rows: list[Row] | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    rows = rows or []
    lines = ["# Class report", ""]
    for assignment, exercises in summaries.items():
        mine = [r for r in rows if r.assignment == assignment and r.enrolment == "active"]
        graded = sum(1 for r in mine if r.status == "graded") or max((e.submitted for e in exercises), default=0)
        broken = sum(1 for r in mine if r.status in NOT_GRADED)
        head = f"{graded} submission(s) graded" + (f", {broken} could not be graded" if broken else "")
        lines += [f"## {assignment}", "", f"{head}, {missing[assignment]} not submitted.", ""]
        if rows:
            lines += ["### Who needs a look", "", *attention(rows, assignment, labels or {}).lines(), ""]
            dist = distribution(rows, assignment)
            if dist:
                lines += ["### Scores", "", *dist, ""]
        if not exercises:
            continue
        manual = any(e.manual for e in exercises)
        lines += ["### Exercises", ""] if rows else []
        lines += [
            "| Exercise | Passed | Partial | Failed | Not attempted | Error | "
            + ("To mark | " if manual else "")
            + "Mean points | Most common hints |",
            "|---|---|---|---|---|---|---|" + ("---|" if manual else "") + "---|",
        ]
        for e in exercises:
            # A hint is quoted as the feedback quotes it: a learner's words in it are text, not Markdown or HTML.
            hints = "<br>".join(f"{n}× {_cell(e.hint_text(h))}" for h, n in e.hints.most_common(top)) or "–"
            title = _cell(e.exercise) + (" (written)" if e.manual else "")
            lines.append(
                f"| {title} | {e.counts['passed']} ({e.pass_rate:.0%}) | {e.counts['partial']} "
                f"| {e.counts['failed']} | {e.counts['not attempted']} | {e.counts['error']} "
                + (f"| {e.counts[MANUAL_STATUS]} " if manual else "")
                + f"| {num(e.mean_points)} / {num(e.max_points)} | {hints} |"
            )
        scored = [e for e in exercises if not e.manual] or exercises
        hardest = min(scored, key=lambda e: (e.pass_rate, e.exercise))
        lines += ["", f"Lowest pass rate: **{hardest.exercise}** ({hardest.pass_rate:.0%}).", ""]
    return "\n".join(lines).rstrip() + "\n"


def figure(assignment: str, exercises: list[ExerciseSummary], path: Path) -> Path:
    """Stacked horizontal bars: for each exercise, the share of submissions by outcome."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    labels = [e.exercise if len(e.exercise) <= 48 else e.exercise[:47] + "…" for e in exercises]
    outcomes = OUTCOMES + ((MANUAL_STATUS,) if any(e.counts[MANUAL_STATUS] for e in exercises) else ())
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(exercises) + 1.6))
    left = [0.0] * len(exercises)
    for outcome in outcomes:
        shares = [e.counts[outcome] / e.submitted if e.submitted else 0.0 for e in exercises]
        ax.barh(labels, shares, left=left, color=COLOURS[outcome], label=outcome, edgecolor="white", linewidth=0.5)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.invert_yaxis()  # the first exercise on top, as in the notebook
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of submitted notebooks")
    ax.set_title(f"{assignment}: outcome of each exercise")
    ax.legend(ncol=len(outcomes), loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False, fontsize="small")
    fig.tight_layout()
    partial = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(partial, dpi=110)
    plt.close(fig)
    os.replace(partial, path)  # a reader never sees half a figure
    return path


def write_report(book: Gradebook, out: Path, assignments: list[str] | None = None) -> tuple[str, list[Path]]:
    """report.md and report-<assignment>.png in `out`; returns the Markdown and the figures' paths."""
    rows = book.rows()
    summaries, missing = summarize(rows, assignments)
    if assignments:
        unknown = [a for a in assignments if a not in summaries]
        if unknown:
            raise ValueError(
                f"the gradebook has no results for {', '.join(unknown)} (it has: {', '.join(summaries) or 'none'})"
            )
    if not summaries:
        raise ValueError(f"the gradebook {book.path} has no results yet: run `course grade` first")
    roster = book.roster()
    labels = {s.id: s.label for s in roster.students} if roster else {}
    text = markdown(summaries, missing, rows=rows, labels=labels)
    write_atomic(out / "report.md", text)
    figures = [figure(a, ex, out / f"report-{a}.png") for a, ex in summaries.items() if ex]
    return text, figures
