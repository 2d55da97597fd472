"""What a learner is told about an exercise notebook, and how a run becomes points: one home for both.

`course check` (a learner's own notebook) and the grader (`course grade`) both score a run with `score`,
over one model of the exercise set and of the notebook handed in (`assignment`), and speak through
this module:

- the statuses a test or a submission can have (`Status`), and how a test cell's outcome becomes one of
  them and its points (`classify`, `explain`, `earned`);
- every sentence a learner reads about their run that is not a check's own: a hidden test failed, an
  answer cell stopped, a cell they added, a copy of a cell, the wrong notebook, a kernel that restarted;
- `course check`'s table (`print_table`), and how a learner's own text is quoted in Markdown so that it
  can never close a code block, start a heading, or add HTML or links (`md_text`, `md_block`; the
  grader's feedback file is written with them);
- how a score is written (`num`).

The check messages themselves (what is wrong, which mistake it looks like) are the checks' own
(`course_lib.checks`): they reach the learner unchanged as a test's message.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from .assignment import HIDDEN_MARK, AddedCell, Assignment, Submission
from .notebook import UNDEFINED_NAME
from .text import inert

if TYPE_CHECKING:
    from .process import CellRun


class Status(str, Enum):
    """What a test earned, or what became of a submission. A `str`, so it is stored and compared as its word."""

    # a test's (and a written answer's)
    PASSED = "passed"  # all its points
    PARTIAL = "partial"  # a multi-part check with some parts right: those parts' points
    FAILED = "failed"  # a check said what is wrong
    NOT_ATTEMPTED = "not attempted"  # the answer still raises NotImplementedError
    NOT_SUBMITTED = "not submitted"  # no answer cell for it (and a row for work never handed in)
    ERROR = "error"  # anything else went wrong (a limit, a crash, the answer cell broke)
    TO_BE_MARKED = "to be marked"  # a written answer, waiting for a person
    MARKED = "marked"  # a written answer a person marked
    # a submission's
    GRADED = "graded"
    UNREADABLE = "unreadable"  # not a notebook, too large, a link: nothing could be graded
    WRONG_NOTEBOOK = "wrong notebook"  # another exercise set's notebook
    STOPPED = "stopped"  # its checking process was killed from outside, past every limit: not a grade
    GRADER_ERROR = "grader error"  # the grader failed on it: not a grade

    __str__ = str.__str__
    __format__ = str.__format__


STATUSES = tuple(Status)[:6]  # a test's statuses, in the order tables show them
MANUAL_STATUS, MARKED = Status.TO_BE_MARKED, Status.MARKED
NOT_GRADED = (Status.UNREADABLE, Status.WRONG_NOTEBOOK, Status.GRADER_ERROR, Status.STOPPED)  # nothing was graded
NOT_CHECKED = (Status.GRADER_ERROR, Status.STOPPED)  # of those, the grader's failures: not a grade
LIMITS = ("timeout", "output-limit", "memory-limit", "died")  # how the grader, not a check, can stop a cell
NOT_ATTEMPTED_NAMES = {"NotAttempted"}
FAILED_NAMES = {"CheckFailed", "AssertionError"}

# --- the sentences ---------------------------------------------------------------------------------------

MANUAL_NOTE = (
    "a person marks this answer (your teacher or a teaching assistant), not `course check`: "
    "it is marked after you hand the notebook in"
)
ADDED_CELL = "added cell: not graded; move helpers into the answer cell that uses them"
COPIED_CELL = "a copy of another cell (same grade_id {gid!r}): only the first is graded"
HIDDEN_FAILED = (
    "a hidden test failed: your answer passes the visible test but not the teacher's other cases "
    "(your teacher keeps their inputs private). Try your answer on other inputs: larger or smaller "
    "values, edge cases, other shapes."
)
ANSWER_MISSING = "the answer cell for this exercise is missing from the submission"


def not_the_exercise(name: str, built_from: str = "") -> str:
    made = f" (it was made from {built_from})" if built_from else ""
    return f"This is not the exercise notebook {name}{made}: none of its answer cells were found."


def answers_missing(ids: list[str]) -> str:
    return "Answer cells missing from the submission (graded as not submitted): " + ", ".join(sorted(ids)) + "."


def cells_repeated(ids: list[str]) -> str:
    return "Several cells share the id(s) " + ", ".join(ids) + "; the first of each was graded."


def kernel_restarted(times: int) -> str:
    return (
        f"The kernel stopped {times} time(s) (see the exercises marked error); "
        "it was restarted and the other exercises were graded without the cell that stopped it."
    )


def passed_after_stop(title: str, run: CellRun) -> str:
    return f"{title}: your answer cell {stopped(run)}; the test passed with what the cell had defined before that."


def graded_as(file: str, assignment: str) -> str:
    return f"Your file `{file}` was graded as {assignment}."


def outputs_left_aside(size: str, outputs: str) -> str:
    return (
        f"Your notebook is {size}, {outputs} of it outputs (figures, printed text); "
        "only the answer cells are graded, so the outputs were left aside."
    )


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


# --- a test's status and points ---------------------------------------------------------------------------


def classify(run: CellRun) -> tuple[str, str]:
    """A test cell's outcome as (status, message for the learner)."""
    if run.ok:
        return Status.PASSED, ""
    if run.ename in NOT_ATTEMPTED_NAMES:
        return Status.NOT_ATTEMPTED, run.evalue
    if run.ename in FAILED_NAMES:
        return Status.FAILED, run.evalue or "a check failed"
    if run.status in LIMITS:
        return Status.ERROR, run.evalue
    return Status.ERROR, f"{run.ename}: {run.evalue}".strip(": ")


def explain(status: str, message: str, answer_runs: list[CellRun]) -> tuple[str, str]:
    """A failing test's status and message, told through its answer cell when that cell broke:
    "your answer cell stopped with NameError: ..." explains more than the test's own complaint."""
    for arun in answer_runs:
        if not arun.ok and arun.ename != "NotImplementedError":
            cause = f"your answer cell {stopped(arun)}"
            if status == Status.NOT_ATTEMPTED:  # the answer never got defined: the cause is enough
                return Status.ERROR, cause
            return Status.ERROR, cause + (f"; then the test said: {message}" if message else "")
    return status, message


def stopped(run: CellRun) -> str:
    """How an answer cell ended, as the rest of a sentence: "stopped with NameError: ...", or for a
    limit, "was stopped: the cell went past its time limit: more than 20 s of CPU time"."""
    message = classify(run)[1]
    return f"was stopped: {message}" if run.status in LIMITS else f"stopped with {message}"


def limit_cause(run: CellRun, answer_runs: list[CellRun]) -> str:
    """The limit (one of LIMITS) that stopped a test, or the answer cell it grades; "" if none did. Taken from
    how the cells ended, never from what they said, so a learner's message cannot pass for a time limit."""
    for r in [*answer_runs, run]:
        if r.status in LIMITS:
            return r.status
    return ""


def earned(status: str, run: CellRun, max_points: float) -> tuple[str, float]:
    """The points a test earns: all of them when it passed; for a multi-part check (`checks.check_all`)
    that failed, the share of parts that were right ("partial"); otherwise none."""
    if status == Status.PASSED:
        return Status.PASSED, float(max_points)
    if status == Status.FAILED and run.credit:
        return Status.PARTIAL, round(max_points * run.credit, 2)
    return status, 0.0


@dataclass
class Scored:
    """A run, scored: one TestResult per test cell (in notebook order), and notes for the learner."""

    tests: list[TestResult]
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)


def score(
    assignment: Assignment, submission: Submission, runs: dict[int, CellRun], *, hide_hidden: bool = False
) -> Scored:
    """Every test of `assignment`, scored from `runs` (cell index -> how that cell's run ended), with the
    learner's `submission` to explain it: an answer missing from it, a helper defined in a cell it added.
    `hide_hidden`: a failure in a test's hidden part says so without the check's words, which may show the
    hidden inputs. The one scoring of `course check` and `course grade`."""
    scored = Scored([])
    for test in assignment.tests:
        run = runs.get(test.index)
        run = run if run is not None else _not_run()
        answers = assignment.owners.get(test.grade_id, [])
        answer_runs = [runs[a.index] for a in answers if a.index in runs]
        status, message = classify(run)
        if status == Status.PASSED:  # passed with what the answer cell defined before it stopped: still worth telling
            broke = next((r for r in answer_runs if not r.ok), None)
            if broke is not None:
                scored.notes.append(passed_after_stop(test.title, broke))
        elif answers and all(a.grade_id in submission.missing for a in answers):
            status, message = Status.NOT_SUBMITTED, ANSWER_MISSING
        else:
            status, message = explain(status, message, answer_runs)
        if hide_hidden and status in (Status.FAILED, Status.PARTIAL, Status.ERROR) and _past_hidden_mark(run):
            status, message = (Status.FAILED if status != Status.ERROR else status), HIDDEN_FAILED
        hint = added_cell_hint(message, submission.added) if status != Status.PASSED else ""
        status, points = earned(status, run, test.points)
        cause = "" if status == Status.PASSED else "added-cell" if hint else limit_cause(run, answer_runs)
        scored.tests.append(TestResult(test.grade_id, test.title, points, test.points, status, message + hint, cause))
    return scored


def _past_hidden_mark(run: CellRun) -> bool:
    """Whether a test cell printed HIDDEN_MARK before it failed: in its hidden part. The grader stores a
    failed cell's output made inert (`text.inert`), which writes the mark's control characters out."""
    return HIDDEN_MARK in run.stdout or _INERT_MARK in run.stdout


_INERT_MARK = inert(HIDDEN_MARK, None)


def _not_run() -> CellRun:
    from .process import CellRun

    return CellRun("error", "NotRun", "not run")


# --- cells that are not run ---------------------------------------------------------------------------------


def added_cell_hint(message: str, added: list[AddedCell]) -> str:
    """For "NameError: name 'x' is not defined" where a cell the learner added (or a copy of a cell) defines
    x: where it is and what to do. Added cells are run neither by `course check` nor by the grader."""
    hints = []
    for name in dict.fromkeys(UNDEFINED_NAME.findall(message)):
        cell = next((a for a in added if name in a.defines), None)
        if cell is not None:
            hints.append(
                f"\n`{name}` is defined in a cell you added (cell {cell.position}: `{cell.first_line}`), which "
                "neither `course check` nor the grader runs: only answer cells are graded. Move it into the "
                "answer cell that uses it."
            )
    return "".join(hints)


def added_cells_note(added: list[AddedCell]) -> str:
    """The feedback's note about the code cells a learner added (the grader runs none of them)."""
    shown = "; ".join(f"`{a.first_line}`" for a in added[:5])
    shown += f" and {len(added) - 5} more" if len(added) > 5 else ""
    return (
        f"{len(added)} code cell(s) you added were not run: only the answer cells are graded ({shown}). "
        "Keep helper functions inside the answer cell that uses them."
    )


# --- `course check`'s table ---------------------------------------------------------------------------------


def print_table(path: Path, rows: list[TestResult], skipped: list[AddedCell] = (), notes: list[str] = ()) -> int:
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
    for note in notes:
        print(f"  Note: {note}")
    if skipped:
        print()
        print("Not run (the grader does not run these cells either):")
        for s in skipped:
            first = s.first_line if len(s.first_line) <= 60 else s.first_line[:57] + "..."
            below = f", below {s.below}" if s.below else ""
            print(f"  cell {s.position}{below}: {first}")
            print(f"    {ADDED_CELL if s.why == 'added' else COPIED_CELL.format(gid=s.grade_id)}")
    return 0 if all(r.status in ("passed", MANUAL_STATUS) for r in rows) else 1


# --- quoting a learner's text in Markdown -----------------------------------------------------------------------

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
