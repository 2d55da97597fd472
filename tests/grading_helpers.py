"""Helpers for the grader and check tests: learner notebooks made from the lesson 00 solution
notebook, and `fails_with` for asserting a check's message.

Submissions are generated from `solutions/00_welcome.ipynb` (rather than stored) so they stay in
step with it: `learner({"ex3_answer": "..."})` is the built exercise notebook with every answer
filled in correctly except the ones given.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import warnings
from pathlib import Path

import pytest

from course_lib import checks
from course_lib.runner.notebook import grade_id, is_solution, read_notebook, source

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
WELCOME = SOLUTIONS / "00_welcome.ipynb"


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@functools.lru_cache(maxsize=1)
def sandbox_available() -> tuple[bool, str]:
    from course_grader.sandbox import sandbox_status

    return sandbox_status()


def require_sandbox() -> None:
    """Skip (with one warning naming what is skipped) where bubblewrap does not work; under CI fail."""
    ok, why = sandbox_available()
    if ok:
        return
    message = f"the grader's sandbox is not available here ({why})"
    if IN_CI:
        pytest.fail(message + "; CI must run the grader's tests in the sandbox (install bubblewrap)", pytrace=False)
    if not getattr(require_sandbox, "warned", False):
        require_sandbox.warned = True
        warnings.warn(
            message + ": skipping the sandbox tests of tests/test_sandbox.py and the crafted submissions "
            "of tests/test_grade.py; the other grader tests run without the sandbox",
            stacklevel=2,
        )
    pytest.skip(message)


def fails_with(fn, *args, match: str, **kwargs) -> str:
    """Call a check that must fail; assert its learner-facing message contains `match`."""
    with pytest.raises(checks.CheckFailed) as info:
        fn(*args, **kwargs)
    text = str(info.value)
    assert match in text, f"expected {match!r} in the message, got:\n{text}"
    return text


def solution() -> dict:
    return read_notebook(WELCOME)


def exercise() -> dict:
    from course_grader.build import build_exercise  # here: the lessons' check tests need no grader

    return build_exercise(solution(), WELCOME.name)


def correct_answers() -> dict[str, str]:
    return {grade_id(c): source(c) for c in solution()["cells"] if is_solution(c)}


def learner(answers: dict[str, str] | None = None, blank: tuple[str, ...] = ()) -> dict:
    """The exercise notebook with correct answers, except `answers` (grade_id -> source) and `blank`."""
    nb = exercise()
    filled = {**correct_answers(), **(answers or {})}
    for cell in nb["cells"]:
        gid = grade_id(cell)
        if is_solution(cell) and gid not in blank:
            cell["source"] = filled[gid]
    return nb


def write(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:  # plain JSON: nbformat would "repair" deliberately broken notebooks (duplicate ids)
        path.write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n")
    return path


def digest(folder: Path) -> dict[str, str]:
    """sha256 and mtime of every file under `folder`, to prove nothing was modified."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() + f"@{p.stat().st_mtime_ns}"
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def by_id(nb: dict, gid: str) -> dict:
    return next(c for c in nb["cells"] if grade_id(c) == gid)


def copy_nb(nb: dict) -> dict:
    return copy.deepcopy(nb)


def load_json(path: Path):
    return json.loads(path.read_text())
