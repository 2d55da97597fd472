"""A learner's first minutes in `course lab`: a clean JupyterLab on first start, an exercise done by
typing answers into the notebook, wrong first, then right, and Run All on an exercise notebook that is
still blank above a right answer."""

from __future__ import annotations

import os
import re
import shutil

from labdriver import Page, apply_test_settings, new_shots_dir, start_lab

WELCOME = "notebooks/00_welcome.ipynb"
EXERCISE = "exercises/06_attention_exercises.ipynb"  # exercise 4, the causal mask: a two-line answer
LESSON = "notebooks/06_attention.ipynb"  # its lesson, open beside it in the Run All test

# What nbgrader's lab extension adds, as the page shows it. All empty for a learner; all present for
# `course lab --teacher` (which is also how the test knows these probes can see nbgrader at all).
TEACHER_TOOLS_JS = r"""
async () => {
    const app = window.jupyterapp;
    await app.restored;
    const texts = sel => [...document.querySelectorAll(sel)]
        .map(e => (e.getAttribute('title') || e.innerText || '').trim());
    return {
        plugins: app.listPlugins().filter(id => /nbgrader/i.test(id)),
        menus: texts('.lm-MenuBar-item').filter(t => /nbgrader/i.test(t)),
        toolbar_buttons: texts('.jp-NotebookPanel-toolbar .jp-Toolbar-item').filter(t => /^Validate$/i.test(t)),
        side_panels: texts('.lm-TabBar-tab').filter(t => /nbgrader|create assignment|formgrader/i.test(t)),
    };
}
"""

NEWS_JS = r"""
() => ({
    toasts: [...document.querySelectorAll('.Toastify__toast')].map(e => e.innerText.trim()),
    news_prompt: document.body.innerText.includes('official Jupyter news'),
    notifications: (document.querySelector('.jp-Notification-Status') || {innerText: '?'}).innerText.trim(),
})
"""


def _open_first_time(browser, lab, shots):
    """A new browser profile (nothing remembered) opening the address `course lab` prints."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = Page(context.new_page(), lab, shots)
    page.record_console()
    page.page.goto(lab.url(f"?token={lab.token}"))  # the server's default page: the welcome lesson
    page.page.wait_for_function(
        """path => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                     return !!(w && w.context && w.context.path === path && w.context.isReady); }""",
        arg=WELCOME,
        timeout=120_000,
    )
    page.wait_kernel_idle(120)
    return context, page


def _finish(shots, failed: bool) -> None:
    if not failed and not os.environ.get("COURSE_BROWSER_SHOTS"):
        shutil.rmtree(shots, ignore_errors=True)


def test_first_start_is_clean(lab, browser):
    """No news pop-up, no notifications, none of nbgrader's menus, buttons or panels. (First in this
    module: the server's user settings are still empty.)"""
    shots = new_shots_dir("first-start")
    context, page = _open_first_time(browser, lab, shots)
    try:
        tools = page.page.evaluate(TEACHER_TOOLS_JS)
        news = page.page.evaluate(NEWS_JS)
        page.screenshot("first-start")
        problems = [f"nbgrader's {kind} in a learner's lab: {found}" for kind, found in tools.items() if found]
        if news["toasts"] or news["news_prompt"]:
            problems.append(f"a pop-up on first start: {news['toasts'] or 'the Jupyter news prompt'}")
        if news["notifications"] != "0":
            problems.append(f"the notification centre holds {news['notifications']} notification(s) on first start")
        problems += page.console_errors
    finally:
        context.close()
        lab.shutdown_kernels()
    _finish(shots, bool(problems))
    assert not problems, "\n".join(problems) + f"\nScreenshots: {shots}"


def test_teacher_lab_keeps_nbgrader(browser, chromium, tmp_path):
    """`course lab --teacher` shows nbgrader's tools, so the probes above can see them."""
    teacher = start_lab(tmp_path, teacher=True)
    shots = new_shots_dir("teacher")
    try:
        context, page = _open_first_time(browser, teacher, shots)
        try:
            tools = page.page.evaluate(TEACHER_TOOLS_JS)
            page.screenshot("teacher-start")
        finally:
            context.close()
    finally:
        teacher.stop()
    missing = [kind for kind, found in tools.items() if not found]
    _finish(shots, bool(missing))
    assert not missing, f"a teacher's lab should show nbgrader's {missing}; found {tools}\nScreenshots: {shots}"


# --- doing an exercise -----------------------------------------------------------------------------


def _cell_index(page: Page, grade_id: str) -> int:
    index = page.page.evaluate(
        """id => window.jupyterapp.shell.currentWidget.content.widgets.findIndex(
                    c => (c.model.getMetadata('nbgrader') || {}).grade_id === id)""",
        grade_id,
    )
    assert index >= 0, f"{EXERCISE} has no cell with grade_id {grade_id!r}"
    return index


def _run_cell(page: Page, index: int) -> None:
    """Select cell `index` (click its prompt), press Shift+Enter, wait until it has run."""
    before = page.page.evaluate(
        (
            "() => Math.max(0, ...window.jupyterapp.shell.currentWidget.content.widgets.map(c "
            "=> c.model.executionCount || 0))"
        )
    )
    page.cell(index).locator(".jp-InputPrompt").click()
    page.page.keyboard.press("Shift+Enter")
    page.page.wait_for_function(
        (
            "([i, before]) => "
            "(window.jupyterapp.shell.currentWidget.content.widgets[i].model.executionCount || 0) > before"
        ),
        arg=[index, before],
        timeout=120_000,
    )
    page.wait_kernel_idle(60)


def _type_answer(page: Page, index: int, lines: list[str]) -> None:
    """Replace the answer cell's text by typing, as a learner does (the editor indents after the `:`)."""
    page.cell(index).locator(".cm-content").click()
    page.page.keyboard.press("Control+a")
    page.page.keyboard.press("Delete")
    for k, line in enumerate(lines):
        if k:
            page.page.keyboard.press("Enter")
        page.page.keyboard.type(line.strip())
    source = page.page.evaluate(
        "i => window.jupyterapp.shell.currentWidget.content.widgets[i].model.sharedModel.getSource()", index
    )
    assert [line.strip() for line in source.splitlines()] == [line.strip() for line in lines], (
        f"typing into the answer cell gave {source!r}"
    )
    page.page.keyboard.press("Escape")


def _shown_output(page: Page, index: int) -> str:
    """The cell's output as the learner reads it."""
    return page.cell(index).locator(".jp-Cell-outputArea").inner_text()


def test_learner_gets_a_hint_then_passes(lab, browser):
    """Exercise 4 of lesson 06: a wrong causal mask (the upper triangle) gets the ✘ line and the hint,
    with no traceback; the right one gets the ✔ passed line."""
    shots = new_shots_dir("exercise")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = Page(context.new_page(), lab, shots)
    page.record_console()
    problems = []
    try:
        apply_test_settings(lab)  # autosave off before anything is typed: the checkout's exercise stays blank
        page.open(EXERCISE)
        setup, answer, test = (_cell_index(page, g) for g in ("setup", "ex4_answer", "ex4_test"))
        _run_cell(page, setup)

        _type_answer(page, answer, ["def make_causal_mask(T):", "return torch.ones(T, T, dtype=torch.bool).triu()"])
        _run_cell(page, answer)
        _run_cell(page, test)
        wrong = _shown_output(page, test)
        page.screenshot("exercise-wrong-answer", test)
        if not re.search(r"^✘ make_causal_mask", wrong, re.M) or "Hint:" not in wrong or "triu" not in wrong:
            problems.append(
                f"a wrong answer (triu) should show the ✘ line and the hint that names triu; shown:\n{wrong}"
            )
        if re.search(r"Traceback|^-{20,}|File \"|line \d+", wrong, re.M):
            problems.append(f"a wrong answer should show the hint, not a traceback; shown:\n{wrong}")

        _type_answer(page, answer, ["def make_causal_mask(T):", "return torch.ones(T, T, dtype=torch.bool).tril()"])
        _run_cell(page, answer)
        _run_cell(page, test)
        right = _shown_output(page, test)
        page.screenshot("exercise-right-answer", test)
        if not re.search(r"^✔ make_causal_mask: passed", right, re.M) or "✘" in right:
            problems.append(f"the right answer should show '✔ make_causal_mask: passed'; shown:\n{right}")
        problems += page.console_errors
    finally:
        if problems:
            page.screenshot("exercise-window")
        context.close()
        lab.shutdown_kernels()
    _finish(shots, bool(problems))
    assert not problems, f"{EXERCISE}, exercise 4, in JupyterLab:\n" + "\n".join(problems) + f"\nScreenshots: {shots}"


def test_run_all_goes_past_blank_exercises_and_checks_the_answers_below(lab, browser):
    """Run → Run All Cells on the exercise notebook with only exercise 4 answered: exercises 1-3 say
    "not attempted" and the run goes on to the last cell, where exercise 4's test says passed. With
    the lesson open too, the two tabs have different names."""
    shots = new_shots_dir("run-all")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = Page(context.new_page(), lab, shots)
    page.record_console()
    problems = []
    try:
        apply_test_settings(lab)  # autosave off: the typed answer must not reach the checkout
        page.open(EXERCISE)
        answer, test, blank_test = (_cell_index(page, g) for g in ("ex4_answer", "ex4_test", "ex1_test"))
        _type_answer(page, answer, ["def make_causal_mask(T):", "return torch.ones(T, T, dtype=torch.bool).tril()"])
        page.run_all_from_menu()
        page.screenshot("run-all-window")
        last = page.page.evaluate(
            """() => { const cells = window.jupyterapp.shell.currentWidget.content.widgets;
                       const code = cells.filter(c => c.model.type === 'code');
                       return {index: cells.indexOf(code[code.length - 1]),
                               count: code[code.length - 1].model.executionCount,
                               unrun: code.filter(c => !c.model.executionCount).length}; }"""
        )
        if last["count"] is None or last["unrun"]:
            problems.append(f"Run All stopped early: {last['unrun']} code cell(s) did not run, the last one {last}")
        blank = _shown_output(page, blank_test)
        if "not attempted" not in blank:
            problems.append(f"exercise 1, left blank, should say 'not attempted'; shown:\n{blank}")
        right = _shown_output(page, test)
        page.screenshot("run-all-exercise4", test)
        if not re.search(r"^✔ make_causal_mask: passed", right, re.M):
            problems.append(f"exercise 4's right answer, below blank ones, should show passed; shown:\n{right}")
        page.page.evaluate("path => { window.jupyterapp.commands.execute('docmanager:open', {path}); }", LESSON)
        page.page.wait_for_function(
            "path => { const w = window.jupyterapp.shell.currentWidget;"
            " return !!(w && w.context && w.context.path === path && w.context.isReady); }",
            arg=LESSON,
            timeout=120_000,
        )
        tabs = page.page.evaluate(
            "() => [...document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tabLabel')].map(e => e.innerText)"
        )
        page.screenshot("run-all-two-tabs")
        if len(tabs) != 2 or len(set(tabs)) != 2:
            problems.append(f"the lesson's and the exercises' tabs should have two different names; tabs: {tabs}")
        problems += page.console_errors
    finally:
        context.close()
        lab.shutdown_kernels()
    _finish(shots, bool(problems))
    assert not problems, f"{EXERCISE}, Run All:\n" + "\n".join(problems) + f"\nScreenshots: {shots}"


# --- "section N" links ------------------------------------------------------------------------------

FAR_LESSON = "notebooks/12_modern_decoder.ipynb"  # its first "section 3" link is thousands of pixels above it

# From the notebook's model (JupyterLab may not have rendered far cells yet): the "section N" link
# whose heading is the most cells below it, as (cell of the link, cell of the heading, the heading's id).
FARTHEST_LINK_JS = r"""
() => {
    const cells = window.jupyterapp.shell.currentWidget.content.widgets.map(c => c.model);
    const headings = {};
    cells.forEach((m, i) => {
        if (m.type !== 'markdown') return;
        for (const line of m.sharedModel.getSource().split('\n')) {
            const h = line.match(/^#{1,4}\s+(.*\S)\s*$/);
            if (h) headings[h[1].replace(/[`*]/g, '').replace(/ /g, '-')] = i;
        }
    });
    let best = null;
    cells.forEach((m, i) => {
        if (m.type !== 'markdown') return;
        for (const l of m.sharedModel.getSource().matchAll(/\[(section[^\]]*)\]\(#([^)\s]+)\)/gi)) {
            const target = headings[l[2]];
            if (target !== undefined && (!best || target - i > best[1] - best[0])) best = [i, target, l[2]];
        }
    });
    return best;
}
"""
HEADING_TOP_JS = """
id => {
    const h = [...document.querySelectorAll('.jp-Notebook h1, .jp-Notebook h2, .jp-Notebook h3')]
        .find(e => e.getAttribute('data-jupyter-id') === id);  // JupyterLab's heading ids
    return h ? Math.round(h.getBoundingClientRect().top) : null;
}
"""


def test_a_far_section_link_scrolls_its_heading_into_view(lab, browser):
    """In the lab as `course lab` sets it up, clicking a "section N" link far above its heading brings the
    heading into view. JupyterLab's default windowing lays out cells far from the viewport only when
    they come near it, so a heading far below may not be where the scroll ends (a learner saw lesson
    12's "section 3" link change the URL and not scroll, twice); `course lab` attaches every cell."""
    shots = new_shots_dir("section-link")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = Page(context.new_page(), lab, shots)
    page.record_console()
    problems = []
    try:
        page.open(FAR_LESSON)
        mode = page.page.evaluate("() => window.jupyterapp.shell.currentWidget.content.notebookConfig.windowingMode")
        if mode != "none":
            problems.append(
                f"`course lab` should lay out every cell of a notebook (windowingMode 'none'), not {mode!r}"
            )
        found = page.page.evaluate(FARTHEST_LINK_JS)
        assert found and found[1] - found[0] > 5, f"{FAR_LESSON}: no section link far above its heading: {found}"
        link_cell, heading_cell, anchor = found
        page.cell(link_cell).scroll_into_view_if_needed()
        link = page.cell(link_cell).locator(f'a[href="#{anchor}"]').first
        link.click()
        try:
            page.page.wait_for_function(
                f"id => {{ const top = ({HEADING_TOP_JS})(id); return top !== null && top >= 0 && top < 700; }}",
                arg=anchor,
                timeout=10_000,
                polling=200,
            )
        except Exception:
            top = page.page.evaluate(HEADING_TOP_JS, anchor)
            problems.append(
                f"{FAR_LESSON}: the link in cell {link_cell + 1} to #{anchor} (cell {heading_cell + 1}) did not bring "
                f"its heading into view within 10 s (the heading's top: {top} px; the window is 800 px high)"
            )
        page.screenshot("after-click")
        problems += page.console_errors
    finally:
        context.close()
        lab.shutdown_kernels()
    _finish(shots, bool(problems))
    assert not problems, "\n".join(problems) + f"\nScreenshots: {shots}"
