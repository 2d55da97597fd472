"""`course new NN_name --title "Title"`: start a new exercise set from a template.

It writes two files, and never overwrites either:

- `solutions/NN_name.ipynb`: the set's single source, in the course's nbgrader format: the intro
  (its total written from the metadata), the self-study cell, the setup cell, and three small but
  real exercises of different kinds, each a prompt, an answer cell and a test cell:
  1. implement a function, checked against a reference with a mistake table (`check_function`);
  2. a value worked out by hand, checked against its seal (`SEALS.check`), never a literal;
  3. a prediction in several parts, each part checked and reported (`check_all`), earning its
     points part by part;
- `course_lib/checks/lessonNN.py` (or `--checks DIR/lessonNN.py`): the references, the seals and
  the mistake tables behind those test cells, commented for the teacher who writes the next one.

Both come from template files, `templates/NN_template.ipynb` and `templates/lessonNN.py.tmpl`, with
placeholders in double braces: `{{NN}}`, `{{NAME}}`, `{{TITLE}}`, `{{MODULE}}`, the setup cell's
import `{{SETUP_IMPORT}}`, and in the checks module the seals `{{SEAL_...}}`, computed here.

How the notebook finds its checks. In the course's own folder the setup cell imports
`from course_lib.checks import lessonNN`, like every lesson. A teacher's own folder (`--checks DIR`)
is not a package the course knows, and its path is the teacher's business: no absolute path is
written anywhere a student sees. The notebook's metadata names the module relative to the notebook
(`metadata.course.checks = "../checks/lessonNN.py"`), and the setup cell looks, by relative paths
only, beside the notebook and in that folder:

- `course build` copies the module beside each built notebook, so a class release carries it: a
  student with the notebook and `lessonNN.py` in one folder runs `course check` with full marks for
  right answers;
- the teacher's own runs of the solution notebook find it in the checks folder;
- `course grade` puts the checks folder (from the metadata) first on its own import path before the
  tests run in its process, so a copy a student hands in is never used; the sandboxed kernel that runs
  the answers cannot see the folder and does not need it;
- nbgrader runs the notebook in its own folders: put the checks folder on `PYTHONPATH` for
  `nbgrader autograde` (docs/nbgrader/README.md).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from course_lib import checks
from course_lib.checks import seal
from course_lib.runner.notebook import validate_solution_notebook, write_atomic

from .build import relabel

NAME = re.compile(r"^(?P<nn>\d{2})_[a-z0-9]+(?:_[a-z0-9]+)*$")
COURSE_CHECKS = Path(checks.__file__).resolve().parent  # where `from course_lib.checks import ...` looks
TEMPLATES = Path(__file__).resolve().parent / "templates"
PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")


class NewSetError(ValueError):
    """`course new` cannot write the set: says why and what to do."""


def fill(template: str, values: dict[str, str]) -> str:
    """`template` with every `{{KEY}}` replaced by `values[KEY]` (a KeyError names a placeholder without a value)."""
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _lines(text: str) -> list[str]:
    """A source as notebooks store it: a list of lines, each but the last ending in a newline."""
    parts = text.strip("\n").split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def _relative(folder: Path, start: Path) -> str:
    """`folder` relative to `start`, with forward slashes ("../checks"); "." when there is no relative
    path (another drive): the module is then found beside the notebook, or on PYTHONPATH."""
    try:
        return Path(os.path.relpath(folder.resolve(), start.resolve())).as_posix()
    except ValueError:
        return "."


def _setup_import(module: str, checks_dir: Path, solutions: Path) -> str:
    if checks_dir.resolve() == COURSE_CHECKS:
        return f"from course_lib.checks import {module}"
    rel = _relative(checks_dir, solutions)
    folders = '(".",)' if rel == "." else f'(".", "{rel}")'
    return (
        f"# This set's checks, {module}.py, travel with the notebook: `course build` puts a copy\n"
        f"# beside it (keep the two together); the teacher's copy is in {rel}/. Last in the cell:\n"
        f"# the grader's sandbox, where the answers run, does not need them.\n"
        f"import os\n"
        f"\n"
        f'sys.path += [d for d in {folders} if os.path.isfile(os.path.join(d, "{module}.py"))]\n'
        f"import {module}"
    )


def solution_notebook(name: str, title: str, module: str, checks_dir: Path, solutions: Path | None = None) -> dict:
    """The new set's solution notebook, from templates/NN_template.ipynb."""
    solutions = solutions if solutions is not None else checks_dir
    values = {
        "NN": NAME.match(name)["nn"],
        "NAME": name,
        "TITLE": title,
        "MODULE": module,
        "SETUP_IMPORT": _setup_import(module, checks_dir, solutions),
    }
    nb = json.loads((TEMPLATES / "NN_template.ipynb").read_text(encoding="utf-8"))
    if checks_dir.resolve() != COURSE_CHECKS:  # `course build` copies it, `course grade` imports it from there
        nb["metadata"]["course"] = {"checks": f"{_relative(checks_dir, solutions)}/{module}.py"}
    for cell in nb["cells"]:
        cell["source"] = fill("".join(cell["source"]), values)
    relabel(nb)  # the headings' points and the intro's total, from the metadata
    for cell in nb["cells"]:
        cell["source"] = _lines("".join(cell["source"]))
    return nb


def checks_module(name: str, title: str, module: str) -> str:
    """The new set's checks module, from templates/lessonNN.py.tmpl, with the seals of the answers
    and of the values the mistakes give (see core.seal)."""
    p_third = math.exp(3) / (math.exp(1) + math.exp(2) + math.exp(3))
    seals = {
        "P_THIRD": seal(p_third, name="p_third", decimals=3),
        "RATIO": seal(3 / 6, name="p_third", decimals=3),
        "UNNORMALISED": seal(math.exp(3), name="p_third", decimals=3),
        "FIRST": seal(math.exp(1) / (math.exp(1) + math.exp(2) + math.exp(3)), name="p_third", decimals=3),
        "XW": seal((4, 10, 32), name="xw_shape", decimals=None),
        "XW_SAME": seal((4, 10, 16), name="xw_shape", decimals=None),
        "SCORES": seal((4, 10, 10), name="scores_shape", decimals=None),
        "SCORES_CC": seal((4, 16, 16), name="scores_shape", decimals=None),
        "POOLED": seal((4, 16), name="pooled_shape", decimals=None),
        "POOLED_C": seal((4, 10), name="pooled_shape", decimals=None),
        "POOLED_KEEP": seal((4, 1, 16), name="pooled_shape", decimals=None),
    }
    values = {
        "NN": NAME.match(name)["nn"],
        "NAME": name,
        "TITLE": title,
        "MODULE": module,
        **{f"SEAL_{key}": repr(value) for key, value in seals.items()},
    }
    return fill((TEMPLATES / "lessonNN.py.tmpl").read_text(encoding="utf-8"), values)


def new_set(name: str, title: str, solutions: Path, checks_dir: Path) -> list[Path]:
    """Write the new set's solution notebook and checks module; the paths written."""
    match = NAME.match(name)
    if not match:
        raise NewSetError(
            f"the name must look like NN_name (two digits, then lowercase words joined by _), e.g. "
            f"12_my_topic; got {name!r}"
        )
    if not title.strip():
        raise NewSetError("--title must not be empty")
    module = f"lesson{match['nn']}"
    notebook, checks_file = solutions / f"{name}.ipynb", checks_dir / f"{module}.py"
    taken = [p for p in (notebook, checks_file) if p.exists()]
    taken += [p for p in solutions.glob(f"{match['nn']}_*.ipynb") if p != notebook]
    if taken:
        raise NewSetError(
            "nothing was written: " + ", ".join(map(str, taken)) + " already exist(s); "
            "choose another number, or move the existing files away first."
        )
    nb = solution_notebook(name, title.strip(), module, checks_dir, solutions)
    problems = validate_solution_notebook(nb, notebook.name)
    assert not problems, problems  # the template itself is broken: a bug here, not the teacher's
    write_atomic(checks_file, checks_module(name, title.strip(), module))
    write_atomic(notebook, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return [notebook, checks_file]
