"""Every lesson in notebooks/, run in JupyterLab as a learner runs it, and what the page shows checked.

The lessons are split into GROUPS test modules (test_lessons_1.py, ...), each with its own server,
so that pytest-xdist (`--dist loadfile` keeps a module on one worker) can run them side by side.
A lesson lands in group `position % GROUPS` of the sorted list: a new lesson is picked up without
editing anything.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from course_pytest_plugin import SHARED_DATA
from labdriver import (
    NOTEBOOKS,
    READ_CELLS_JS,
    REPO,
    Page,
    apply_test_settings,
    cell_problems,
    check_widgets_react,
    describe,
    new_shots_dir,
    wait_rendered,
)

GROUPS = 3


def lesson_group(group: int) -> list[Path]:
    """The lessons of test module `group` (1-based)."""
    return [path for i, path in enumerate(sorted(NOTEBOOKS.glob("*.ipynb"))) if i % GROUPS == group - 1]


def _missing_data(path: Path) -> list[str]:
    """Data files the notebook declares (`"course": {"data": [...]}`) that ../shared/data lacks."""
    needs = json.loads(path.read_text()).get("metadata", {}).get("course", {}).get("data", [])
    return [name for name in needs if not (SHARED_DATA / name).is_file()]


def _still_running(page) -> str:
    """After a timeout: the first cell that has not finished, if the page can still tell."""
    try:
        cells = page.page.evaluate(READ_CELLS_JS)
    except Exception:
        return ""
    for cell in cells:
        if cell["type"] == "code" and cell["execution_count"] is None:
            return f" (the first cell without a result: {describe(cell)})"
    return ""


def run_lesson(path: Path, lab, browser) -> list[str]:
    """Open the lesson, Run → Run All Cells, and check every cell, every widget and the console.

    Returns the problems found, each naming its cell, followed by where the screenshots and the
    server log are (an empty list when all is well)."""
    missing = _missing_data(path)
    if missing:
        pytest.skip(f"{path.name} needs {', '.join(missing)} in {SHARED_DATA} (absent)")
    shots = new_shots_dir(path.stem)
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = Page(context.new_page(), lab, shots)
    page.record_console()
    problems: list[str] = []
    bad_cells: set[int] = set()
    phase = "opening it"
    try:
        apply_test_settings(lab)  # before a notebook is opened: nothing may be autosaved into the checkout
        page.open(path.relative_to(REPO).as_posix())
        phase = "running Run → Run All Cells"
        page.run_all_from_menu()
        phase = "checking what the page shows"
        wait_rendered(page)
        cells = page.page.evaluate(READ_CELLS_JS)
        (shots / "cells.json").write_text(json.dumps(cells, indent=1, ensure_ascii=False))  # what the checks read
        for cell in cells:
            found = cell_problems(cell)
            if found:
                bad_cells.add(cell["index"])
                problems += found
        phase = "moving the widgets"
        widget_problems, _ = check_widgets_react(page, cells, path.stem)
        problems += widget_problems
        problems += page.console_errors
        (shots / "console-ignored.txt").write_text("\n".join(page.ignored_console))
    except Exception as err:  # a page that never got ready, a timeout: say where it stopped
        message = str(err).splitlines()[0] if str(err) else ""
        problems.append(f"the browser run stopped while {phase}: {type(err).__name__}: {message}{_still_running(page)}")
        problems += page.console_errors
    finally:
        if problems:
            for index in sorted(bad_cells):
                page.screenshot(f"{path.stem}-cell{index + 1:02d}", index)
            page.screenshot(f"{path.stem}-window")
        context.close()
        lab.shutdown_kernels()
    if problems:
        return [
            f"{path.name} in JupyterLab: {len(problems)} problem(s):",
            *problems,
            f"screenshots: {shots}",
            f"server log: {lab.log_path}",
        ]
    if not os.environ.get("COURSE_BROWSER_SHOTS"):
        shutil.rmtree(shots, ignore_errors=True)
    return []
