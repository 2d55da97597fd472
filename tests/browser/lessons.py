"""Every lesson in notebooks/ opened in JupyterLab as a learner opens it, and what the page shows checked.

A lesson with widgets (they need a live kernel) and lesson 00 (the learner's first run, with its
check of the environment) are run with Run → Run All Cells; the others are shown with the outputs
they are stored with, which nbval has already checked against a fresh run of every cell. Running
those again in the browser would only repeat nbval's work, at about half the time of `make test`.

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


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def runs_in_the_browser(path: Path) -> bool:
    """Lesson 00, and every lesson whose stored outputs hold a widget: see the module docstring."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    widgets = any(WIDGET_MIME in out.get("data", {}) for c in cells for out in c.get("outputs", []))
    mentions = any(
        "course_lib.widgets" in "".join(c["source"]) or "from course_lib import widgets" in "".join(c["source"])
        for c in cells
        if c["cell_type"] == "code"
    )
    return path.stem.startswith("00_") or widgets or mentions


def run_lesson(path: Path, lab, browser) -> list[str]:
    """Open the lesson, Run → Run All Cells where it runs in the browser (`runs_in_the_browser`),
    and check every cell, every widget and the console.

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
        ran = runs_in_the_browser(path)
        if ran:
            phase = "running Run → Run All Cells"
            page.run_all_from_menu()
        phase = "checking what the page shows"
        wait_rendered(page)
        cells = page.page.evaluate(READ_CELLS_JS)
        (shots / "cells.json").write_text(json.dumps(cells, indent=1, ensure_ascii=False))  # what the checks read
        for cell in cells:
            found = cell_problems(cell, ran)
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
