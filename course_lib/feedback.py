"""What a learner is told about an exercise notebook: one home for every word of it.

`course check` (a learner's own notebook) and the grader (`course grade`'s feedback files) both
speak through this module:

- the status words a test earns (`STATUSES`) and how a test cell's outcome becomes one of them and
  its points (`classify`, `explain`, `score`);
- which exercise a test belongs to (`exercise_titles`, `answer_owner`);
- the hints about cells the grader does not run: cells a learner added, copies of a cell
  (`ADDED_CELL`, `COPIED_CELL`, `explain_missing`, `added_cell_hint`, `added_cells_note`);
- `course check`'s table (`print_table`) and the Markdown feedback file (`feedback_markdown`), in
  which the learner's own text (exception messages, file names, the first lines of added cells) is
  quoted so that it can never close a code block, start a heading, or add HTML or links (`md_text`,
  `md_block`);
- how a score is written (`num`).

The check messages themselves (what is wrong, which mistake it looks like) are the checks' own
(`course_lib.checks`): they reach the learner unchanged as a test's message.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .runner.notebook import UNDEFINED_NAME, is_manual, is_solution, is_test, source

if TYPE_CHECKING:
    from .runner.process import CellRun

# A test's status: passed (all its points), partial (a multi-part check with some parts right),
# failed (a check said what is wrong), not attempted (the answer still raises NotImplementedError),
# not submitted (the grader found no answer cell for it), error (anything else went wrong).
STATUSES = ("passed", "partial", "failed", "not attempted", "not submitted", "error")
# A manually graded answer (nbgrader's `grade: true, solution: true`): a person marks it, not a test.
MANUAL_STATUS, MARKED = "to be marked", "marked"
MANUAL_NOTE = (
    "a person marks this answer (your teacher or a teaching assistant), not `course check`: "
    "it is marked after you hand the notebook in"
)
NOT_ATTEMPTED_NAMES = {"NotAttempted"}
LIMITS = ("timeout", "output-limit", "memory-limit", "died")  # how the grader, not a check, can stop a cell
FAILED_NAMES = {"CheckFailed", "AssertionError"}

ADDED_CELL = "added cell: not graded; move helpers into the answer cell that uses them"
COPIED_CELL = "a copy of another cell (same grade_id {gid!r}): only the first is graded"


@dataclass
class TestResult:
    grade_id: str
    exercise: str  # the heading of the exercise the test belongs to
    points: float
    max_points: float
    status: str  # one of STATUSES
    message: str = ""
    cause: str = ""  # a limit that stopped the test or its answer cell (one of LIMITS), never the learner's words


def num(x: float) -> str:
    """A score as it is shown: at most two decimals, no trailing zeros ("3", "2.5", "0.33")."""
    x = round(float(x), 2)
    return str(int(x)) if x.is_integer() else f"{x:g}"


# --- which exercise a test belongs to ----------------------------------------------------------------


def exercise_titles(nb: dict) -> dict[int, str]:
    """For each cell index, the first heading of the nearest markdown cell above it, without the
    points ("Exercise 3: Title (★★☆, 3 points)" -> "Exercise 3: Title"): tables give them a column."""
    titles, current = {}, ""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and not is_manual(cell):  # a written answer's headings are the learner's
            for line in source(cell).splitlines():
                if line.startswith("#"):
                    current = re.sub(r"\s*\([^()]*\bpoints?\)\s*$", "", line.lstrip("#").strip())
                    break
        titles[i] = current
    return titles


def answer_owner(nb: dict) -> dict[int, list[int]]:
    """Test cell index -> the answer cells it grades (those since the previous test cell)."""
    owners, pending = {}, []
    for i, cell in enumerate(nb["cells"]):
        if is_solution(cell) and cell["cell_type"] == "code":
            pending.append(i)
        elif is_test(cell):
            owners[i] = pending or (owners[max(owners)] if owners else [])
            pending = []
    return owners


# --- a test's status and points ---------------------------------------------------------------------------


def explain(status: str, message: str, answer_runs: list[CellRun]) -> tuple[str, str]:
    """A failing test's status and message, told through its answer cell when that cell broke:
    "your answer cell stopped with NameError: ..." explains more than the test's own complaint."""
    for arun in answer_runs:
        if not arun.ok and arun.ename != "NotImplementedError":
            cause = f"your answer cell {stopped(arun)}"
            if status == "not attempted":  # the answer never got defined: the cause is enough
                return "error", cause
            return "error", cause + (f"; then the test said: {message}" if message else "")
    return status, message


def classify(run: CellRun) -> tuple[str, str]:
    """A test cell's outcome as (status, message for the learner)."""
    if run.ok:
        return "passed", ""
    if run.ename in NOT_ATTEMPTED_NAMES:
        return "not attempted", run.evalue
    if run.ename in FAILED_NAMES:
        return "failed", run.evalue or "a check failed"
    if run.status in LIMITS:
        return "error", run.evalue
    return "error", f"{run.ename}: {run.evalue}".strip(": ")


def stopped(run: CellRun) -> str:
    """How an answer cell ended, as the rest of a sentence: "stopped with NameError: ...", or for a
    limit, "was stopped: the cell ran longer than the time limit (60 s)"."""
    message = classify(run)[1]
    return f"was stopped: {message}" if run.status in LIMITS else f"stopped with {message}"


def limit_cause(run: CellRun, answer_runs: list[CellRun]) -> str:
    """The limit (one of LIMITS) that stopped a test, or the answer cell it grades; "" if none did. Taken from
    how the cells ended, never from what they said, so a learner's message cannot pass for a time limit."""
    for r in [*answer_runs, run]:
        if r.status in LIMITS:
            return r.status
    return ""


def score(status: str, run: CellRun, max_points: float) -> tuple[str, float]:
    """The points a test earns: all of them when it passed; for a multi-part check (`checks.check_all`)
    that failed, the share of parts that were right ("partial"); otherwise none."""
    if status == "passed":
        return "passed", float(max_points)
    if status == "failed" and run.credit:
        return "partial", round(max_points * run.credit, 2)
    return status, 0.0


# --- cells the grader does not run ---------------------------------------------------------------------------


def explain_missing(message: str, skipped: list) -> str:
    """Add to a NameError for a name that a skipped cell defines where the name is and what to do
    (`course check`: `skipped` are its `Skipped` cells, with `position` and `defines`)."""
    for name in dict.fromkeys(UNDEFINED_NAME.findall(message)):
        owner = next((s for s in skipped if name in s.defines), None)
        if owner is not None:
            message += (
                f"\n`{name}` is defined in cell {owner.position}, a cell you added: added cells are run "
                "neither by `course check` nor by the grader. Move it into the answer cell that uses it."
            )
    return message


def added_cell_hint(message: str, added: list[tuple[str, set[str]]]) -> str:
    """For "NameError: name 'x' is not defined" where a cell the learner added defines x (the grader:
    `added` are (first line, names defined) of the submission's added cells)."""
    hints = []
    for name in dict.fromkeys(UNDEFINED_NAME.findall(message)):
        first = next((first for first, names in added if name in names), None)
        if first is not None:
            hints.append(
                f"\n`{name}` is defined in a cell you added (`{first}`), which the grader does not run: "
                "only answer cells are graded. Move it into the answer cell that uses it."
            )
    return "".join(hints)


def added_cells_note(added: list[tuple[str, set[str]]]) -> str:
    """The feedback's note about the code cells a learner added (the grader runs none of them)."""
    shown = "; ".join(f"`{first}`" for first, _ in added[:5])
    shown += f" and {len(added) - 5} more" if len(added) > 5 else ""
    return (
        f"{len(added)} code cell(s) you added were not run: only the answer cells are graded ({shown}). "
        "Keep helper functions inside the answer cell that uses them."
    )


# --- `course check`'s table ---------------------------------------------------------------------------------


def print_table(path: Path, rows: list[TestResult], skipped: list = ()) -> int:
    """One row per exercise, its hint below it, the total, then the cells that were not run; the exit status."""
    if not rows:
        print(f"{path}: no exercise tests found (is this an exercise notebook from exercises/?)")
        return 1
    width = min(56, max(len(r.exercise or r.grade_id) for r in rows))
    print(f"{path}")
    print(f"  {'Exercise':<{width}}  {'Points':>6}  Result")
    for r in rows:
        label = (r.exercise or r.grade_id)[:width]
        pts = (
            f"{r.max_points:g}"
            if r.status == "passed"
            else "-"
            if r.status == MANUAL_STATUS
            else f"{r.points:g}/{r.max_points:g}"
        )
        print(f"  {label:<{width}}  {pts:>6}  {r.status}")
        if r.status != "passed" and r.message:
            for line in r.message.strip().splitlines():  # all of it: a hint may be on the next line
                print(f"  {'':<{width}}  {'':>6}    {line}")
    tested = [r for r in rows if r.status != MANUAL_STATUS]
    earned = sum(r.points for r in tested)
    total = sum(r.max_points for r in tested)
    manual = sum(r.max_points for r in rows if r.status == MANUAL_STATUS)
    print(
        f"  {'Total':<{width}}  {earned:g}/{total:g}  (visible tests only: your teacher's hidden tests may lower it"
        + (f"; {manual:g} more point(s) for written answers, marked by a person)" if manual else ")")
    )
    if skipped:
        print()
        print("Not run (the grader does not run these cells either):")
        for s in skipped:
            first = s.first_line if len(s.first_line) <= 60 else s.first_line[:57] + "..."
            below = f", below {s.below}" if s.below else ""
            print(f"  cell {s.position}{below}: {first}")
            print(f"    {s.why}")
    return 0 if all(r.status in ("passed", MANUAL_STATUS) for r in rows) else 1


# --- the feedback file -----------------------------------------------------------------------------------------

_MARKUP = str.maketrans({"\\": "\\\\", "*": "\\*", "[": "\\[", "]": "\\]", "<": "&lt;", ">": "&gt;"})
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # one that could start or end emphasis (not inside a word)
_LINE_START = re.compile(r"^(\s*)([#+=|-]|\d+[.)])")


def md_text(text: str) -> str:
    """`text` (which may hold a learner's words) as one line of Markdown that renders as those words:
    line breaks become spaces; outside code spans (`...`, found as CommonMark finds them) backslashes,
    `* [ ]` and `_` (but inside a word) are escaped and `< >` written as entities, so no emphasis,
    link, image or HTML; and the line cannot start a heading or a list. Code spans are left as they
    are: their content is literal."""
    flat = " ".join(str(text).split("\n")).replace("\r", " ")
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", flat)]
    same_length: dict[int, list[int]] = {}
    for k, (a, b) in enumerate(runs):
        same_length.setdefault(b - a, []).append(k)
    out, pos, k = [], 0, 0
    while k < len(runs):
        a, b = runs[k]
        out.append(_UNDERSCORE.sub(r"\\_", flat[pos:a].translate(_MARKUP)))
        later = same_length[b - a]
        after = bisect.bisect_right(later, k)
        if after < len(later):  # the next backtick string of the same length closes the span
            close = runs[later[after]][1]
            out.append(flat[a:close])
            pos, k = close, later[after] + 1
        else:  # none: the backticks are plain text
            out.append("\\`" * (b - a))
            pos, k = b, k + 1
    out.append(_UNDERSCORE.sub(r"\\_", flat[pos:].translate(_MARKUP)))
    line = "".join(out)
    # "\\#" is a literal #; an ordered list's marker is undone by escaping its dot: "1\\."
    return _LINE_START.sub(
        lambda m: (
            m.group(1) + (m.group(2)[:-1] + "\\" + m.group(2)[-1] if m.group(2)[0].isdigit() else "\\" + m.group(2))
        ),
        line,
        count=1,
    )


def md_block(text: str) -> list[str]:
    """`text` as a fenced code block whose fence is longer than any run of backticks in it, so that
    nothing in it can close the block (everything in it is shown as it is, HTML included)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text, fence]


def feedback_markdown(r) -> str:
    """One learner's feedback on one assignment, as Markdown, from a gradebook row (the grader's
    `gradebook.Row`: student, name, assignment, status, scores, late penalty, adjustments, notes, tests).
    Headings hold only the teacher's words (the assignment, the exercises' titles); everything that
    may come from a learner is quoted with `md_text` or `md_block`."""
    who = f"{r.name} ({r.student})" if r.name else r.student
    lines = [f"# Feedback on {r.assignment}", "", f"For {md_text(who)}", ""]
    to_mark = getattr(r, "to_mark", 0)
    if r.status != "graded":
        lines += [f"**Score: {num(r.final)} / {num(r.max_score)}** ({r.status})", ""]
    else:
        lines += [
            f"**Score: {num(r.final)} / {num(r.max_score)}**"
            + (f" (so far: {to_mark} written answer(s) still to be marked)" if to_mark else ""),
            "",
        ]
        extension = getattr(r, "extension", "")  # "Extension to 2026-12-05 23:59 +01:00 (on time)"
        if r.late_penalty or r.adjustments or extension:
            lines += [f"- Exercises: {num(r.score)} / {num(r.max_score)}"]
            if extension:
                lines += [f"- {extension}"]
            if r.late_penalty:
                when = getattr(r, "late_text", "") or f"at {r.submitted_at}"
                lines += [f"- Late penalty: -{num(r.late_penalty)} (submitted {when})"]
            for a in r.adjustments:
                lines += [f"- {'+' if a.points >= 0 else ''}{num(a.points)}: {a.reason}"]
            lines += [""]
    if getattr(r, "lms_late", False):
        lines += ["Your LMS marked this submission late.", ""]
    for g in getattr(r, "regrades", []):
        why = f" ({g['reason']})" if g.get("reason") else ""
        change = (
            f"your score for the exercises went from {num(g['old'])} to {num(g['new'])}"
            if g["old"] != g["new"]
            else "your score did not change"
        )
        lines += [f"Regraded on {g['at'][:10]}{why}: {change}.", ""]
    if r.attempts > 1:
        lines += [
            f"This is your attempt {r.attempt} (the latest of {r.attempts} submissions); it is the one that counts.",
            "",
        ]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {md_text(n)}" for n in dict.fromkeys(r.notes)] + [""]
    if r.tests:
        lines += ["| Exercise | Points | Result |", "|---|---|---|"]
        for t in r.tests:
            label = md_text(t.get("exercise") or t.get("grade_id") or "").replace("|", "/")
            pts = "–" if t["status"] == MANUAL_STATUS else num(t["points"])
            lines.append(f"| {label} | {pts} / {num(t['max_points'])} | {md_text(t['status'])} |")
    # A row that was not graded (unreadable, not submitted) has one reason, said once above.
    details = [
        t
        for t in r.tests
        if t["status"] not in ("passed", "not submitted", MANUAL_STATUS, MARKED)
        and t.get("message")
        and r.status == "graded"
    ]
    marked = [t for t in r.tests if t["status"] == MARKED and t.get("message")]
    if marked:
        lines += ["", "## Your written answers", ""]
        for t in marked:
            title = md_text(t.get("exercise") or t["grade_id"])
            lines += [f"### {title} ({num(t['points'])} / {num(t['max_points'])})", ""]
            lines += [f"> {md_text(line)}" if line.strip() else ">" for line in str(t["message"]).strip().splitlines()]
            lines += [""]
    if details:
        lines += ["", "## What to look at", ""]
        for t in details:
            heading = f"### {md_text(t.get('exercise') or t['grade_id'])} ({md_text(t['status'])})"
            lines += [heading, "", *md_block(str(t["message"]).strip()), ""]
    return "\n".join(lines).rstrip() + "\n"
