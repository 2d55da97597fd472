"""`course build`: write the learners' `exercises/` from the teacher's `solutions/`.

For every `solutions/NN_name.ipynb` the build writes `exercises/NN_name.ipynb` with answer
regions replaced by `# YOUR CODE HERE` + `raise NotImplementedError()`, hidden tests and outputs
removed, and the nbgrader metadata kept (so graders, ours or nbgrader's, can match cells).

The output is deterministic (nbformat's JSON layout, cell ids kept, a trailing newline), so
`course build --check` can compare byte for byte. The build never silently overwrites a learner's
work: each exercise notebook records a hash of the cells it was built with
(`metadata.course_lib.build_hash`); a file whose cells no longer match that hash was changed by
someone, and the build stops and says so unless `--force` is given.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from .notebook import (
    NotebookError,
    dumps_notebook,
    is_locked,
    is_solution,
    is_test,
    learner_hash,
    nbgrader_meta,
    read_notebook,
    source,
    strip_hidden_tests,
    strip_solution,
    validate_solution_notebook,
    write_atomic,
)

# Cell metadata that only describes one run or one view of the notebook.
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


def build_exercise(solution: dict, name: str) -> dict:
    """The learner's notebook for the solution notebook `solution` (not modified)."""
    problems = validate_solution_notebook(solution, name)
    if problems:
        raise NotebookError("\n".join(problems))
    cells = []
    for i, cell in enumerate(solution["cells"]):
        where = f"{name}, cell {i}"
        new = {"cell_type": cell["cell_type"], "id": cell["id"]}
        meta = {k: copy.deepcopy(v) for k, v in cell.get("metadata", {}).items() if k not in VOLATILE_CELL_METADATA}
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
        new["metadata"] = meta
        new["source"] = text
        if cell["cell_type"] == "code":
            new["execution_count"] = None
            new["outputs"] = []
        if "attachments" in cell:
            new["attachments"] = copy.deepcopy(cell["attachments"])
        cells.append(new)
    nb_meta = {k: copy.deepcopy(v) for k, v in solution.get("metadata", {}).items() if k in ("kernelspec", "language_info")}
    exercise = {"cells": cells, "metadata": nb_meta, "nbformat": 4, "nbformat_minor": max(5, solution.get("nbformat_minor", 5))}
    nb_meta["course_lib"] = {"built_from": f"solutions/{name}", "build_hash": learner_hash(exercise)}
    return exercise


def build_text(solution_path: Path) -> str:
    return dumps_notebook(build_exercise(read_notebook(solution_path), solution_path.name))


def changed_by_learner(path: Path) -> bool:
    """True when `path` is not what some build wrote (its cells differ from its recorded build hash)."""
    try:
        nb = read_notebook(path)
    except NotebookError:
        return True  # unreadable: someone did something to it; do not destroy it silently
    recorded = nb.get("metadata", {}).get("course_lib", {})
    recorded = recorded.get("build_hash") if isinstance(recorded, dict) else None
    return recorded != learner_hash(nb)


@dataclass
class BuildReport:
    written: list[Path] = field(default_factory=list)  # files (re)written
    unchanged: list[Path] = field(default_factory=list)  # already what the build makes
    stale: list[Path] = field(default_factory=list)  # --check: would be (re)written
    conflicts: list[Path] = field(default_factory=list)  # changed by a learner: not overwritten
    orphans: list[Path] = field(default_factory=list)  # built exercises whose solution is gone
    errors: list[str] = field(default_factory=list)  # broken solution notebooks

    @property
    def ok(self) -> bool:
        return not (self.stale or self.conflicts or self.errors or self.orphans)


def build(solutions: Path, exercises: Path, *, check: bool = False, force: bool = False, names: list[str] | None = None) -> BuildReport:
    """Build (or with `check`, only compare) every solution notebook in `solutions`."""
    report = BuildReport()
    sources = sorted(solutions.glob("*.ipynb"))
    if names:
        wanted = {Path(n).name for n in names}
        sources = [p for p in sources if p.name in wanted]
        missing = wanted - {p.name for p in sources}
        report.errors += [f"{solutions / n}: no such solution notebook" for n in sorted(missing)]
    planned: list[tuple[Path, str]] = []
    for src in sources:
        try:
            text = build_text(src)
        except NotebookError as err:
            report.errors.append(str(err))
            continue
        target = exercises / src.name
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
            if not (solutions / target.name).exists() and not changed_by_learner(target):
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
    if report.stale:
        print("These exercise notebooks differ from what `course build` would write:")
        for path in report.stale:
            print(f"  {path}")
        print("Run `course build` to regenerate them (exercises/ is generated: never edit it by hand).")
    if report.orphans:
        print("These exercise notebooks have no solution notebook any more (delete them):")
        for path in report.orphans:
            print(f"  {path}")
    if report.conflicts:
        print("Nothing was written: these exercise notebooks were changed after they were built")
        print("(probably your own answers), and the build would replace them:")
        for path in report.conflicts:
            print(f"  {path}")
        print("To keep your work, rename or copy them first (e.g. to NN_name.mine.ipynb), then run")
        print("`course build` again; to replace them with fresh blank copies, run `course build --force`.")
    if report.ok and not report.written:
        n = len(report.unchanged)
        print(f"exercises/ is up to date ({n} notebook{'s' if n != 1 else ''}).")
    return 0 if report.ok else 1
