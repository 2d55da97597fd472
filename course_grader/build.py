"""`course build`: write the learners' `exercises/` from the teacher's `solutions/`.

For every `solutions/NN_name.ipynb` the build writes `exercises/NN_name_exercises.ipynb` (the
suffix keeps a lesson's tab and its exercises' apart in JupyterLab; the assignment is still
`NN_name`) with answer regions replaced by `# YOUR CODE HERE` + `raise NotImplementedError()`, hidden
tests and outputs removed, and the nbgrader metadata kept (so graders, ours or nbgrader's, can match
cells).

Answer and test cells are tagged `raises-exception`: JupyterLab's *Run All Cells* then goes on past
an exercise that is still blank (its answer raises NotImplementedError, its test says "not attempted
yet") and runs and checks the answers below it. Only JupyterLab reads the tag: `course check`,
`course grade` and nbgrader score a blank exercise 0 as before.

The output is deterministic (nbformat's JSON layout, cell ids kept, a trailing newline), so
`course build --check` can compare byte for byte. The build never silently overwrites a learner's
work: each exercise notebook records a hash of the cells it was built with
(`metadata.course_lib.build_hash`); a file whose cells no longer match that hash was changed by
someone, and the build stops and says so unless `--force` is given.

Point labels come from the metadata: a prompt heading `## Exercise K: Title (★★☆, N points)` states
the sum of the `points` of the exercise's test cells (those after the heading, before the next
exercise heading), and the intro's `**Total: N points.**` the sum over the notebook. The build
writes both from the metadata (keeping the stars); a solution notebook whose own labels disagree
gets a warning from `course build` and fails `course build --check`, which says what to fix.

`course build --class --exercises DIR` writes a release for a graded class: the same notebooks
without the cells tagged `self-study` (the pointer to the worked answers in `solutions/`).
`course build --check --class --exercises DIR` checks such a release.

Manually graded answers (nbgrader's `grade: true, solution: true`, e.g. a markdown cell for a written
answer) are kept, their text replaced by `YOUR ANSWER HERE`; their points count in the exercise's
label and the total, and their rubric (`metadata.course.rubric`, for the people who mark) is left out.

A teacher's own set (`course new --checks DIR`) names its checks module in the notebook's metadata
(`metadata.course.checks`, relative to the notebook): the build copies that file beside the built
notebook, so that a release carries what a student needs to check their own work with `course check`.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.runner.notebook import (
    NotebookError,
    assignment_of,
    dumps_notebook,
    exercise_filename,
    is_locked,
    is_manual,
    is_solution,
    is_test,
    learner_hash,
    nbgrader_meta,
    points,
    read_notebook,
    source,
    strip_hidden_tests,
    strip_solution,
    validate_solution_notebook,
    write_atomic,
)

# Cell metadata that only describes one run or one view of the notebook.
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")
SELF_STUDY_TAG = "self-study"  # cells left out of a class release (`course build --class`)
# On answer and test cells: JupyterLab's Run All does not stop when they raise (a blank exercise).
RUN_ON_TAG = "raises-exception"

# "## Exercise 3: Title (★★☆, 3 points)": the heading of an exercise, and its label.
EXERCISE_HEADING = re.compile(r"^#+\s*Exercise\s+[^:\s]+\s*:")
POINT_LABEL = re.compile(r"\((?P<stars>[★☆]+),\s*(?P<points>\d+(?:\.\d+)?)\s+points?\)\s*$")
TOTAL_LABEL = re.compile(r"\*\*Total:\s*(?P<points>\d+(?:\.\d+)?)\s+points?\.?\*\*")


def _num(x: float) -> str:
    return f"{float(x):g}"


def _points_text(x: float) -> str:
    return f"{_num(x)} point" + ("" if float(x) == 1 else "s")


@dataclass
class ExerciseLabel:
    cell: int  # index of the markdown cell holding the heading
    line: int  # line of the heading in that cell
    heading: str  # the heading line as written
    stated: float | None  # the points the heading states (None: no "(★☆☆, N points)" label)
    points: float = 0.0  # the sum of the points of the exercise's test cells (the metadata)
    tests: list[str] = field(default_factory=list)  # "ex1_test: 2" for each test cell


def exercise_labels(nb: dict) -> list[ExerciseLabel]:
    """Every exercise heading of `nb`, with the points it states and the points its test cells carry."""
    found: list[ExerciseLabel] = []
    for i, cell in enumerate(nb["cells"]):
        if is_manual(cell):  # a written answer: its points, never its text (which may hold headings)
            if found:
                found[-1].points += points(cell)
                gid = nbgrader_meta(cell).get("grade_id")
                found[-1].tests.append(f"{gid}: {_num(points(cell))} (marked by a person)")
        elif cell["cell_type"] == "markdown":
            for j, line in enumerate(source(cell).split("\n")):
                if EXERCISE_HEADING.match(line):
                    label = POINT_LABEL.search(line)
                    found.append(ExerciseLabel(i, j, line.strip(), float(label["points"]) if label else None))
        elif is_test(cell) and found:
            found[-1].points += points(cell)
            found[-1].tests.append(f"{nbgrader_meta(cell).get('grade_id')}: {_num(points(cell))}")
    return found


def total_points(nb: dict) -> float:
    """The notebook's points: its tests' and its manually graded answers'."""
    return sum(points(c) for c in nb["cells"] if is_test(c) or is_manual(c))


def _intro_index(nb: dict) -> int | None:
    """The cell that states the total: the one with grade_id "intro", else the first that says "**Total:"."""
    for i, cell in enumerate(nb["cells"]):
        if nbgrader_meta(cell).get("grade_id") == "intro":
            return i
    return next(
        (i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown" and TOTAL_LABEL.search(source(c))), None
    )


def label_problems(nb: dict, where: str) -> list[str]:
    """Where the notebook's point labels disagree with its metadata, each with how to fix it."""
    problems = []
    fix = (
        "fix the heading (or the test cells' `points` in their nbgrader metadata, if those are what is wrong); "
        "`course build` writes the exercises' labels from the metadata"
    )
    for ex in exercise_labels(nb):
        title = POINT_LABEL.sub("", EXERCISE_HEADING.sub("", ex.heading)).strip(" #")
        name = re.match(r"#+\s*(Exercise\s+[^:\s]+)", ex.heading).group(1)
        if ex.stated is None:
            problems.append(
                f"{where}, {name} ({title}): the heading has no point label; end it with "
                f'"(★☆☆, {_points_text(ex.points)})" (its test cells carry {_points_text(ex.points)}).'
            )
        else:
            label = POINT_LABEL.search(ex.heading)
            if label[0].rstrip() != f"({label['stars']}, {_points_text(ex.points)})":
                tests = ", ".join(ex.tests) or "no test cell"
                problems.append(
                    f'{where}, {name} ({title}): the heading says "{label[0].strip()}" but the metadata gives '
                    f"{_points_text(ex.points)} ({tests}); {fix}."
                )
    intro = _intro_index(nb)
    total = total_points(nb)
    stated = TOTAL_LABEL.search(source(nb["cells"][intro])) if intro is not None else None
    if stated is None:
        problems.append(f'{where}: the intro does not state the total; add "**Total: {_points_text(total)}.**" to it.')
    elif float(stated["points"]) != total or stated[0] != f"**Total: {_points_text(total)}.**":
        problems.append(
            f'{where}, intro: it says "{stated[0]}" but the test cells\' points add up to '
            f'{_points_text(total)}; write "**Total: {_points_text(total)}.**" in the intro (or fix the test '
            "cells' `points`, if those are what is wrong); `course build` writes the total from the metadata."
        )
    return problems


def relabel(nb: dict) -> None:
    """Write every exercise heading's points and the intro's total from the metadata (in place)."""
    for ex in exercise_labels(nb):
        if ex.stated is None:
            continue
        cell = nb["cells"][ex.cell]
        lines = source(cell).split("\n")
        points = _points_text(ex.points)
        lines[ex.line] = POINT_LABEL.sub(lambda m, points=points: f"({m['stars']}, {points})", lines[ex.line])
        cell["source"] = "\n".join(lines)
    intro = _intro_index(nb)
    if intro is not None:
        cell = nb["cells"][intro]
        cell["source"] = TOTAL_LABEL.sub(f"**Total: {_points_text(total_points(nb))}.**", source(cell), count=1)


def is_self_study(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and SELF_STUDY_TAG in tags


def build_exercise(solution: dict, name: str, *, for_class: bool = False) -> dict:
    """The learner's notebook for the solution notebook `solution` (not modified); `for_class`: a
    class release, without the cells tagged `self-study`."""
    problems = validate_solution_notebook(solution, name)
    if problems:
        raise NotebookError("\n".join(problems))
    solution = copy.deepcopy(solution)
    relabel(solution)
    cells = []
    for i, cell in enumerate(solution["cells"]):
        if for_class and is_self_study(cell):
            continue
        where = f"{name}, cell {i}"
        new = {"cell_type": cell["cell_type"], "id": cell["id"]}
        meta = {k: copy.deepcopy(v) for k, v in cell.get("metadata", {}).items() if k not in VOLATILE_CELL_METADATA}
        if isinstance(meta.get("course"), dict):  # the rubric is for the people who mark, not for learners
            meta["course"].pop("rubric", None)
            if not meta["course"]:
                del meta["course"]
        text = source(cell)
        if is_solution(cell):
            text = strip_solution(cell, where)
        if is_test(cell):
            text = strip_hidden_tests(text, where)
        # Lock cells the way nbgrader's LockCells does, so JupyterLab keeps learners out of them.
        if nbgrader_meta(cell):
            if is_solution(cell):
                meta["deletable"] = False
            elif is_test(cell) or is_locked(cell):
                meta["deletable"] = False
                meta["editable"] = False
        if cell["cell_type"] == "code" and (is_test(cell) or is_solution(cell)):
            tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
            meta["tags"] = tags + [RUN_ON_TAG] if RUN_ON_TAG not in tags else tags
        new["metadata"] = meta
        new["source"] = text
        if cell["cell_type"] == "code":
            new["execution_count"] = None
            new["outputs"] = []
        if "attachments" in cell:
            new["attachments"] = copy.deepcopy(cell["attachments"])
        cells.append(new)
    nb_meta = {
        k: copy.deepcopy(v) for k, v in solution.get("metadata", {}).items() if k in ("kernelspec", "language_info")
    }
    course = solution.get("metadata", {}).get("course")
    limits = course.get("limits") if isinstance(course, dict) else None
    if isinstance(limits, dict):  # the set's time budgets: `course check` on the learner's copy uses them too
        nb_meta["course"] = {"limits": copy.deepcopy(limits)}
    exercise = {
        "cells": cells,
        "metadata": nb_meta,
        "nbformat": 4,
        "nbformat_minor": max(5, solution.get("nbformat_minor", 5)),
    }
    # The grader reads only the file name (a submission made from another set is "wrong notebook");
    # a class release does not name the solutions folder at all.
    nb_meta["course_lib"] = {
        "built_from": name if for_class else f"solutions/{name}",
        "build_hash": learner_hash(exercise),
    }
    return exercise


def build_text(solution_path: Path, *, for_class: bool = False) -> str:
    return dumps_notebook(build_exercise(read_notebook(solution_path), solution_path.name, for_class=for_class))


def changed_by_learner(path: Path) -> bool:
    """True when `path` is not what some build wrote (its cells differ from its recorded build hash)."""
    try:
        nb = read_notebook(path)
    except NotebookError:
        return True  # unreadable: someone did something to it; do not destroy it silently
    recorded = nb.get("metadata", {}).get("course_lib", {})
    recorded = recorded.get("build_hash") if isinstance(recorded, dict) else None
    return recorded != learner_hash(nb)


def checks_module(solution_path: Path) -> Path | None:
    """The checks module a teacher's own set names (`metadata.course.checks`), or None (the course's own
    sets import theirs from course_lib)."""
    meta = read_notebook(solution_path).get("metadata", {}).get("course", {})
    rel = meta.get("checks") if isinstance(meta, dict) else None
    return (solution_path.parent / rel).resolve() if isinstance(rel, str) and rel else None


@dataclass
class BuildReport:
    written: list[Path] = field(default_factory=list)  # files (re)written
    unchanged: list[Path] = field(default_factory=list)  # already what the build makes
    stale: list[Path] = field(default_factory=list)  # --check: would be (re)written
    conflicts: list[Path] = field(default_factory=list)  # changed by a learner: not overwritten
    orphans: list[Path] = field(default_factory=list)  # built exercises whose solution is gone
    errors: list[str] = field(default_factory=list)  # broken solution notebooks
    labels: list[str] = field(default_factory=list)  # point labels that disagree with the metadata
    check: bool = False  # --check: label problems fail the build (otherwise they are warnings)
    folder: Path | None = None  # where the exercises go

    @property
    def ok(self) -> bool:
        return not (self.stale or self.conflicts or self.errors or self.orphans or (self.check and self.labels))


def build(
    solutions: Path,
    exercises: Path,
    *,
    check: bool = False,
    force: bool = False,
    names: list[str] | None = None,
    for_class: bool = False,
) -> BuildReport:
    """Build (or with `check`, only compare) every solution notebook in `solutions`; `for_class`:
    a class release (no `self-study` cells)."""
    report = BuildReport(check=check, folder=exercises)
    sources = sorted(solutions.glob("*.ipynb"))
    if names:
        wanted = {Path(n).name for n in names}
        sources = [p for p in sources if p.name in wanted]
        missing = wanted - {p.name for p in sources}
        report.errors += [f"{solutions / n}: no such solution notebook" for n in sorted(missing)]
    planned: list[tuple[Path, str]] = []
    for src in sources:
        try:
            text = build_text(src, for_class=for_class)
        except NotebookError as err:
            report.errors.append(str(err))
            continue
        report.labels += label_problems(read_notebook(src), str(src))
        module = checks_module(src)
        if module is not None:  # a teacher's own set: its checks travel with the notebook
            if not module.is_file():
                report.errors.append(f"{src}: its checks module {module} (metadata.course.checks) does not exist")
                continue
            copied, wanted = exercises / module.name, module.read_text(encoding="utf-8")
            if copied.is_file() and copied.read_text(encoding="utf-8") == wanted:
                report.unchanged.append(copied)
            elif check:
                report.stale.append(copied)
            else:
                planned.append((copied, wanted))
        target = exercises / exercise_filename(src.stem)
        existing = target.read_text(encoding="utf-8") if target.is_file() else None
        if existing == text:
            report.unchanged.append(target)
        elif check:
            report.stale.append(target)
        elif existing is not None and not force and changed_by_learner(target):
            report.conflicts.append(target)
        else:
            planned.append((target, text))
    if check and not names:
        for target in sorted(exercises.glob("*.ipynb")):
            assignment = assignment_of(target.stem)
            built = (solutions / f"{assignment}.ipynb").exists() and target.name == exercise_filename(assignment)
            if not built and not changed_by_learner(target):  # no solution any more, or an old name
                report.orphans.append(target)
    if check or report.conflicts or report.errors:
        return report  # write nothing when anything needs a person's decision
    for target, text in planned:
        write_atomic(target, text)
        report.written.append(target)
    return report


def print_report(report: BuildReport) -> int:
    for path in report.written:
        print(f"wrote {path}")
    for err in report.errors:
        print(f"ERROR: {err}")
    if report.labels:
        print(
            ("ERROR" if report.check else "WARNING")
            + ": point labels in the solution notebooks disagree with their metadata"
            + ("" if report.check else " (the exercises were written with the metadata's points)")
            + ":"
        )
        for problem in report.labels:
            print(f"  {problem}")
    if report.stale:
        print("These files differ from what `course build` would write:")
        for path in report.stale:
            print(f"  {path}")
        print(
            "Run `course build` to regenerate them (exercises/ is generated: never edit it by hand); "
            "for a class release, check it with the options that built it: `course build --check --class "
            "--solutions DIR --exercises DIR`."
        )
    if report.orphans:
        print("These exercise notebooks have no solution notebook any more, or an old name (delete them):")
        for path in report.orphans:
            print(f"  {path}")
    if report.conflicts:
        print("Nothing was written: these exercise notebooks were changed after they were built")
        print("(probably your own answers), and the build would replace them:")
        for path in report.conflicts:
            print(f"  {path}")
        print("To keep your work, rename or copy them first (e.g. to NN_name_exercises.mine.ipynb), then run")
        print("`course build` again; to replace them with fresh blank copies, run `course build --force`.")
    if report.ok and not report.written and not report.labels:
        n = len(report.unchanged)
        where = f"{report.folder}/" if report.folder is not None else "exercises/"
        print(f"{where} is up to date ({n} file{'s' if n != 1 else ''}).")
    return 0 if report.ok else 1
