"""Lessons in JupyterLab, group 3 of lessons.GROUPS (see lessons.py)."""

import pytest
from lessons import lesson_group, run_lesson


@pytest.mark.parametrize("notebook", lesson_group(3), ids=lambda path: path.stem)
def test_lesson_runs_cleanly_in_jupyterlab(notebook, lab, browser):
    problems = run_lesson(notebook, lab, browser)
    assert not problems, "\n  - ".join(problems)
