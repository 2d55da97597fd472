"""`course progress`: every exercise set of a folder in one table, what passes and when it was checked.

    course progress [FOLDER] [--json] [--jobs N]

FOLDER is the learner's own `exercises/` by default (the one in the current folder, else the
course's). Each notebook named `NN_name_exercises.ipynb` (or `NN_name.ipynb`, the old name and the
solutions') is one set, so a set added later (a final project) is listed without changing anything
here. A set's checks are `course check`'s (`course_lib.runner.check`): the visible tests, in a fresh
kernel, never the teacher's hidden ones.

Running every set's checks starts a kernel per set, which costs several CPU seconds each. Two things
keep it cheap:

- a notebook that is exactly what `course build` wrote (its cells match the build hash it records) has
  not been attempted: its exercises are "not attempted" without running anything;
- every result that was run is kept in `FOLDER/.course-progress.json` under a hash of what it depends
  on (the notebook's cells and the course's checking code); a set whose notebook has not changed since
  is not run again, and keeps the date of the check that produced its result.

The remaining sets run in parallel (`--jobs`, default 2), with a progress bar on stderr. Nothing is
sent anywhere: the checks, the cache and the table stay on this machine.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .runner.assignment import Assignment
from .runner.feedback import MANUAL_NOTE, MANUAL_STATUS, TestResult, num
from .runner.notebook import (
    NotebookError,
    assignment_of,
    learner_hash,
    nbgrader_meta,
    read_notebook,
    source,
    write_atomic,
)

CACHE_NAME = ".course-progress.json"
CACHE_VERSION = 1
SET_NAME = re.compile(r"\d\d_[\w-]+")  # 06_attention(_exercises): not a copy such as 06_attention.mine
NOT_ATTEMPTED_YET = "not attempted yet"
# One mark per exercise in the table, and what each means (the legend under it).
MARKS = {"passed": "✔", "partial": "◐", "failed": "✘", "error": "✘", "not attempted": "·", MANUAL_STATUS: "✎"}
LEGEND = "✔ passed  ◐ partly right  ✘ failed or an error  · not attempted  ✎ a written answer, marked by a person"


@dataclass
class Exercise:
    title: str  # "Exercise 3: A numerically stable softmax"
    status: str  # passed | partial | failed | error | not attempted | to be marked
    points: float
    max_points: float
    tests: list[dict] = field(default_factory=list)  # each test's grade_id, status, points, max_points, message


@dataclass
class SetProgress:
    name: str  # the assignment: "06_attention"
    notebook: str  # the file: "06_attention_exercises.ipynb"
    status: str  # complete | in progress | not attempted | unreadable
    points: float = 0.0  # earned in the visible tests (written answers are marked by a person, not here)
    max_points: float = 0.0
    written: int = 0  # written answers (marked by a person)
    checked: str | None = None  # when its checks last ran (ISO, local time); None: never (not attempted)
    source: str = "run"  # run (just now) | cache (an unchanged notebook) | unchanged (as `course build` wrote it)
    message: str = ""  # why a set is unreadable
    exercises: list[Exercise] = field(default_factory=list)


# --- which notebooks -----------------------------------------------------------------------------------


def default_folder(repo: Path) -> Path:
    """`exercises/` in the current folder when there is one, else the course's own."""
    here = Path("exercises")
    return here if here.is_dir() else repo / "exercises"


def find_sets(folder: Path) -> list[tuple[str, Path]]:
    """(assignment, notebook) for every set in `folder`, in lesson order. When a set has two notebooks
    (its old name and its new one), the one with the learner's work counts, else the newest."""
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        if SET_NAME.fullmatch(path.stem):
            found.setdefault(assignment_of(path.stem), []).append(path)

    def worked_on(path: Path) -> tuple[bool, float]:
        try:
            untouched = is_unchanged(read_notebook(path))
        except NotebookError:
            untouched = False
        return not untouched, path.stat().st_mtime

    return [(name, max(paths, key=worked_on)) for name, paths in sorted(found.items())]


def is_unchanged(nb: dict) -> bool:
    """True for a notebook exactly as `course build` wrote it (its cells match its recorded build hash)."""
    meta = nb.get("metadata", {}).get("course_lib", {})
    recorded = meta.get("build_hash") if isinstance(meta, dict) else None
    return recorded is not None and recorded == learner_hash(nb)


# --- one set ---------------------------------------------------------------------------------------------


def blank_results(nb: dict) -> list[TestResult]:
    """The rows `course check` gives a notebook nobody has answered in, without running it: every test
    "not attempted", every written answer still to be written."""
    rows = []
    for cell in Assignment.from_notebook(nb, "").cells:
        if cell.kind == "written":
            rows.append(
                TestResult(
                    cell.grade_id, cell.title, 0.0, cell.points, MANUAL_STATUS, MANUAL_NOTE + "; not answered yet."
                )
            )
        elif cell.kind == "test":
            rows.append(TestResult(cell.grade_id, cell.title, 0.0, cell.points, "not attempted", NOT_ATTEMPTED_YET))
    return rows


def summarise(name: str, path: Path, rows: list[TestResult], checked: str | None, how: str) -> SetProgress:
    """A set's row from its tests' results: exercises in notebook order, each passed only when all its
    tests are."""
    exercises: dict[str, Exercise] = {}
    for r in rows:
        ex = exercises.setdefault(r.exercise or r.grade_id, Exercise(r.exercise or r.grade_id, "", 0.0, 0.0))
        ex.tests.append(asdict(r))
        if r.status != MANUAL_STATUS:
            ex.points += r.points
            ex.max_points += r.max_points
    for ex in exercises.values():
        statuses = {t["status"] for t in ex.tests}
        auto = statuses - {MANUAL_STATUS}
        if not auto:
            ex.status = MANUAL_STATUS
        elif auto == {"passed"}:
            ex.status = "passed"
        elif auto == {"not attempted"}:
            ex.status = "not attempted"
        elif ex.points > 0:
            ex.status = "partial"
        else:
            ex.status = "error" if "error" in auto and "failed" not in auto else "failed"
    written = [r for r in rows if r.status == MANUAL_STATUS]
    unanswered = [r for r in written if "not answered yet" in r.message]
    auto = [r for r in rows if r.status != MANUAL_STATUS]
    if auto and all(r.status == "passed" for r in auto) and not unanswered:
        status = "complete"
    elif all(r.status == "not attempted" for r in auto) and len(unanswered) == len(written):
        status = "not attempted"
    else:
        status = "in progress"
    return SetProgress(
        name,
        path.name,
        status,
        points=sum(r.points for r in auto),
        max_points=sum(r.max_points for r in auto),
        written=len(written),
        checked=checked,
        source=how,
        exercises=list(exercises.values()),
    )


def cache_key(nb: dict, folder: Path) -> str:
    """What a set's result depends on: its cells (sources and nbgrader metadata, not outputs), the
    course's checking code, and a teacher's own checks module beside the notebook."""
    h = hashlib.sha256(f"course-progress {CACHE_VERSION}\0".encode())
    for cell in nb.get("cells", []):
        h.update(json.dumps([cell.get("cell_type"), source(cell), nbgrader_meta(cell)], sort_keys=True).encode())
    for path in sorted(Path(__file__).resolve().parent.rglob("*.py")) + sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _rows_from(data: list[dict]) -> list[TestResult]:
    return [TestResult(**row) for row in data]


def _now() -> str:
    return dt.datetime.now().replace(microsecond=0).isoformat()


# --- the whole folder ---------------------------------------------------------------------------------


def read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("sets", {}) if isinstance(data, dict) and data.get("version") == CACHE_VERSION else {}


def write_cache(path: Path, entries: dict) -> bool:
    """Keep the results for next time; False when the file cannot be written (then nothing is kept)."""
    text = json.dumps({"version": CACHE_VERSION, "sets": entries}, indent=1, ensure_ascii=False, sort_keys=True)
    try:
        write_atomic(path, text + "\n")
    except OSError:
        return False
    return True


def progress(
    folder: Path, *, jobs: int = 2, limits=None, bar: bool = True, cache_file: Path | None = None
) -> list[SetProgress]:
    """Every set of `folder`: the unchanged ones from their notebooks alone, the others from the cache
    (`cache_file`, default FOLDER/.course-progress.json) when their notebook has not changed, the rest
    by running their checks, `jobs` at a time."""
    from .runner.check import check_notebook
    from .runner.process import Limits

    folder = Path(folder)
    if not folder.is_dir():
        raise NotebookError(f"{folder}: no such folder (give the folder that holds your exercise notebooks)")
    limits = limits or Limits(cell_timeout=120, total_timeout=2400, memory_mb=0)
    cache_file = cache_file or folder / CACHE_NAME
    cache = read_cache(cache_file)
    results: dict[str, SetProgress] = {}
    to_run: list[tuple[str, Path, str]] = []
    for name, path in find_sets(folder):
        try:
            nb = read_notebook(path)
        except NotebookError as err:
            results[name] = SetProgress(name, path.name, "unreadable", message=str(err))
            continue
        if is_unchanged(nb):
            results[name] = summarise(name, path, blank_results(nb), None, "unchanged")
            continue
        key = cache_key(nb, folder)
        kept = cache.get(path.name)
        if isinstance(kept, dict) and kept.get("key") == key:
            try:
                results[name] = summarise(name, path, _rows_from(kept["rows"]), kept.get("checked"), "cache")
                continue
            except (KeyError, TypeError):
                pass  # a cache from elsewhere: run the set again
        to_run.append((name, path, key))

    if to_run:
        from tqdm.auto import tqdm

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # each check waits on a kernel of its own
            futures = {pool.submit(check_notebook, path, limits): (name, path, key) for name, path, key in to_run}
            done = tqdm(
                as_completed(futures),
                total=len(futures),
                desc="checking",
                unit="set",
                file=sys.stderr,
                disable=None if bar else True,  # None: shown on a terminal only
            )
            for future in done:
                name, path, key = futures[future]
                try:
                    rows = future.result().rows
                except NotebookError as err:
                    results[name] = SetProgress(name, path.name, "unreadable", message=str(err))
                    continue
                checked = _now()
                cache[path.name] = {"key": key, "checked": checked, "rows": [asdict(r) for r in rows]}
                results[name] = summarise(name, path, rows, checked, "run")
        write_cache(cache_file, cache)
    return [results[name] for name in sorted(results)]


# --- what is shown ----------------------------------------------------------------------------------------


def _when(iso: str | None) -> str:
    return iso.replace("T", " ")[:16] if iso else "never"


def print_progress(folder: Path, sets: list[SetProgress]) -> None:
    if not sets:
        print(f"{folder}: no exercise notebooks (files named NN_name_exercises.ipynb)")
        return
    name_width = max(len(s.name) for s in sets)
    marks = ["".join(MARKS.get(e.status, "?") for e in s.exercises) for s in sets]
    mark_width = max(len("exercises"), *(len(m) for m in marks))
    print(f"{folder}: your exercise sets (visible tests only: a teacher's hidden tests may lower a score)")
    print(f"  {'set':<{name_width}}  {'exercises':<{mark_width}}  {'points':>7}  {'status':<13}  last check")
    for s, mark in zip(sets, marks):
        if s.status == "unreadable":
            print(f"  {s.name:<{name_width}}  {'':<{mark_width}}  {'':>7}  {'unreadable':<13}  {s.message}")
            continue
        pts = f"{num(s.points)}/{num(s.max_points)}"
        when = _when(s.checked) + (" (unchanged since)" if s.source == "cache" else "")
        print(f"  {s.name:<{name_width}}  {mark:<{mark_width}}  {pts:>7}  {s.status:<13}  {when}")
    counted = [s for s in sets if s.status != "unreadable"]
    done = sum(s.status == "complete" for s in counted)
    earned, total = sum(s.points for s in counted), sum(s.max_points for s in counted)
    written = sum(s.written for s in counted)
    print(
        f"  {done} of {len(counted)} sets complete; {num(earned)}/{num(total)} points"
        + (f" (and {written} written answer(s), marked by a person)" if written else "")
    )
    print(f"  {LEGEND}")
    todo = next((s for s in counted if s.status == "in progress"), None)
    if todo is not None:
        print(f"  One set in detail, with hints: course check {folder / todo.notebook}")


def as_json(folder: Path, sets: list[SetProgress]) -> str:
    counted = [s for s in sets if s.status != "unreadable"]
    return json.dumps(
        {
            "folder": str(folder),
            "sets": [asdict(s) for s in sets],
            "complete": sum(s.status == "complete" for s in counted),
            "points": sum(s.points for s in counted),
            "max_points": sum(s.max_points for s in counted),
        },
        indent=1,
        ensure_ascii=False,
    )
