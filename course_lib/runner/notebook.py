"""Reading, validating and writing exercise notebooks in nbgrader's format.

A solution notebook (`solutions/NN_name.ipynb`) is the single source of an exercise set. Each
graded cell carries nbgrader's metadata in `cell.metadata.nbgrader`:

    {"schema_version": 3, "grade": bool, "solution": bool, "locked": bool, "grade_id": str, "points": n}

- answer cells (`solution: true`) hold a region between `### BEGIN SOLUTION` / `### END SOLUTION`;
- test cells (`grade: true`, with `points`) may hold a region between `### BEGIN HIDDEN TESTS` /
  `### END HIDDEN TESTS` that learners never see;
- manually graded answers (`grade: true` and `solution: true`, with `points`; a markdown cell for a
  written answer, or a code cell) have no test: a person marks them (`is_manual`).

Everything here works on plain dicts (the notebook's JSON), so that reading a notebook never
changes it (nbformat's reader would invent random cell ids for old notebooks) and writing is
byte-for-byte deterministic. `course check` reads notebooks through this module; the grader
(`course build`, `course new`, `course grade`) also validates and writes them.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

BEGIN_SOLUTION, END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
TEXT_STUB = "YOUR ANSWER HERE"


# A learner's copy of an exercise set is named after its assignment with this suffix, so that a lesson
# and its exercises never open as two identical tabs in JupyterLab (`notebooks/06_attention.ipynb`,
# `exercises/06_attention_exercises.ipynb`). The assignment itself keeps the solution notebook's name
# (`06_attention`, the id the gradebook and the LMS files use), and the grader takes a notebook handed
# in under either name as that assignment's.
EXERCISE_SUFFIX = "_exercises"


class NotebookError(ValueError):
    """A notebook that cannot be used: says which file and what is wrong."""


def exercise_filename(assignment: str) -> str:
    """The file name of an assignment's exercise notebook: "06_attention" -> "06_attention_exercises.ipynb"."""
    return f"{assignment}{EXERCISE_SUFFIX}.ipynb"


def assignment_of(stem: str) -> str:
    """The assignment an exercise notebook's name stands for, under its new or its old name:
    "06_attention_exercises" and "06_attention" -> "06_attention"."""
    return stem.removesuffix(EXERCISE_SUFFIX) if stem != EXERCISE_SUFFIX else stem


def exact_filenames(assignment: str) -> tuple[str, str]:
    """The two names under which a notebook is exactly an assignment's: the assignment's own (as the
    solution notebook and nbgrader's release are called) and the exercise notebook's."""
    return f"{assignment}.ipynb", exercise_filename(assignment)


# --- reading and writing -------------------------------------------------------------------------


def read_notebook(path: str | os.PathLike) -> dict:
    """The notebook at `path` as a dict; `NotebookError` if it is not a notebook at all."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise NotebookError(f"{path}: cannot be read ({err.strerror or err}).") from None
    return parse_notebook(raw, str(path))


def parse_notebook(raw: bytes, where: str) -> dict:
    """A notebook from its bytes (`where` names it in messages); `NotebookError` if it is not one."""
    if not raw.strip():
        raise NotebookError(f"{where}: the file is empty.")
    try:
        nb = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise NotebookError(f"{where}: not a valid notebook (not JSON: {err}).") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError(f"{where}: not a valid notebook (no list of cells).")
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise NotebookError(f"{where}: cell {i} is not a valid notebook cell.")
    return nb


def dumps_notebook(nb: dict) -> str:
    """The notebook as nbformat writes it (indent 1, sorted keys, lines split), ending in a newline."""
    import nbformat  # here: only the grader writes notebooks (`course build`)

    text = nbformat.writes(nbformat.from_dict(nb), version=nbformat.NO_CONVERT)
    return text if text.endswith("\n") else text + "\n"


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename, so readers never see half a file.

    The file keeps the mode of the one it replaces (a new one gets what `open` would give it): a
    temporary file is private (0600), and a checks module or notebook rewritten that way could no
    longer be read by the sandbox's unprivileged user."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- cells ---------------------------------------------------------------------------------------


def source(cell: dict) -> str:
    """A cell's source as one string (notebooks may store it as a list of lines)."""
    src = cell.get("source", "")
    return "".join(s if isinstance(s, str) else str(s) for s in src) if isinstance(src, list) else str(src)


def nbgrader_meta(cell: dict) -> dict:
    meta = cell.get("metadata", {})
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def grade_id(cell: dict) -> str | None:
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def is_solution(cell: dict) -> bool:
    return bool(nbgrader_meta(cell).get("solution", False))


def is_test(cell: dict) -> bool:
    """A test cell: graded code that is not also an answer (that is a manually graded answer, `is_manual`)."""
    nbg = nbgrader_meta(cell)
    return bool(nbg.get("grade", False)) and not nbg.get("solution", False) and cell.get("cell_type") == "code"


def is_manual(cell: dict) -> bool:
    """nbgrader's manually graded answer: `grade: true, solution: true` on a markdown or code cell, worth
    its own `points`, with no test: a person (the teacher or a teaching assistant) marks it."""
    nbg = nbgrader_meta(cell)
    return (
        bool(nbg.get("grade", False))
        and bool(nbg.get("solution", False))
        and cell.get("cell_type") in ("markdown", "code")
    )


def is_locked(cell: dict) -> bool:
    return bool(nbgrader_meta(cell).get("locked", False))


def points(cell: dict) -> float:
    value = nbgrader_meta(cell).get("points", 0) or 0
    return float(value)


def _replace_region(text: str, begin: str, end: str, stub: list[str] | None, where: str) -> tuple[str, bool]:
    """Replace every region between lines containing `begin` and `end` (delimiters included) by
    `stub` indented like the `begin` line, or drop it when `stub` is None (nbgrader's rules)."""
    out, inside, found = [], False, False
    for line in text.split("\n"):
        if begin in line:
            if inside:
                raise NotebookError(f"{where}: nested '{begin}'.")
            inside = found = True
            indent = re.match(r"\s*", line).group(0)
            out.extend(indent + s for s in (stub or []))
        elif end in line:
            if not inside:
                raise NotebookError(f"{where}: '{end}' without a '{begin}' before it.")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise NotebookError(f"{where}: '{begin}' without a matching '{end}'.")
    return "\n".join(out), found


def strip_solution(cell: dict, where: str = "cell") -> str:
    """The learner's version of an answer cell's source."""
    text = source(cell)
    stub = CODE_STUB if cell.get("cell_type") == "code" else [TEXT_STUB]
    new, found = _replace_region(text, BEGIN_SOLUTION, END_SOLUTION, stub, where)
    if not found and is_solution(cell):  # a solution cell without a region is replaced whole
        new = "\n".join(stub)
    return new


def strip_hidden_tests(text: str, where: str = "cell") -> str:
    return _replace_region(text, BEGIN_HIDDEN, END_HIDDEN, None, where)[0]


def validate_solution_notebook(nb: dict, where: str) -> list[str]:
    """Problems that make `nb` unusable as an exercise source (empty list when it is fine)."""
    problems, seen, ids = [], {}, {}
    for i, cell in enumerate(nb["cells"]):
        nbg = nbgrader_meta(cell)
        label = f"{where}, cell {i}"
        if "id" not in cell:
            problems.append(f"{label}: has no cell id (save it with a current Jupyter, nbformat >= 4.5)")
        elif cell["id"] in ids:
            problems.append(f"{label}: cell id {cell['id']!r} is also used by cell {ids[cell['id']]}")
        else:
            ids[cell["id"]] = i
        if not nbg:
            if BEGIN_SOLUTION in source(cell) or BEGIN_HIDDEN in source(cell):
                problems.append(f"{label}: has a solution or hidden-test region but no nbgrader metadata")
            continue
        gid = nbg.get("grade_id")
        if not isinstance(gid, str) or not gid:
            problems.append(f"{label}: nbgrader metadata without a grade_id")
        elif gid in seen:
            problems.append(f"{label}: grade_id {gid!r} is also used by cell {seen[gid]}")
        else:
            seen[gid] = i
        if nbg.get("schema_version") != 3:
            problems.append(f"{label}: nbgrader schema_version should be 3, got {nbg.get('schema_version')!r}")
        if nbg.get("grade") and nbg.get("solution") and BEGIN_HIDDEN in source(cell):
            problems.append(
                f"{label}: a manually graded answer (grade and solution) cannot hold hidden tests; "
                "put tests in a separate locked cell"
            )
        if nbg.get("grade") and not isinstance(nbg.get("points"), (int, float)):
            problems.append(f"{label}: a graded cell needs numeric 'points'")
        try:
            if not nbg.get("solution") and BEGIN_SOLUTION in source(cell):
                problems.append(f"{label}: solution region in a cell not marked solution: true")
            if not nbg.get("grade") and BEGIN_HIDDEN in source(cell):
                problems.append(f"{label}: hidden tests in a cell not marked grade: true")
            strip_solution(cell, label)
            strip_hidden_tests(source(cell), label)
        except NotebookError as err:
            problems.append(str(err))
    return problems


def learner_hash(nb: dict) -> str:
    """A hash of what a learner can change: the cells' types and sources, in order.

    Outputs, execution counts and cell metadata are left out: running a notebook or a different
    Jupyter version re-saving it does not count as a change, editing or adding a cell does.
    """
    h = hashlib.sha256()
    for cell in nb.get("cells", []):
        h.update(json.dumps([cell.get("cell_type"), source(cell)], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


# --- names a cell defines (for explaining a NameError caused by a cell the grader does not run) ----

UNDEFINED_NAME = re.compile(r"name '(\w+)' is not defined")


def defined_names(text: str) -> set[str]:
    """Names a cell binds at its top level; nothing when it does not parse (IPython magics included)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        lines = [line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            return set()
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    found.add(sub.id)
    return found
