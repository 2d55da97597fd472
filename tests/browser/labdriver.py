"""Drive the course's JupyterLab in headless Chromium, as a learner would: start `course lab`, open a
notebook, run it from the menu, and read back what the page shows.

The browser tests (test_lessons_*.py, test_learner.py) share this module; conftest.py holds their
fixtures. Nothing here sleeps for a fixed time: every wait is for a state of the page or the kernel.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"

CHROMIUM_ARGS = [  # see ../shared/TESTING-NOTES.md: no sandbox (root in CI), no GPU, nothing fetched from the network
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-dev-shm-usage",
]

# How long one notebook may take to run in the browser. A lesson must run in 60 s on two idle cores;
# `make test` runs two workers and the notebooks under nbval at the same time, hence the margin.
RUN_TIMEOUT_S = 420
# Opening a notebook: the page, JupyterLab's scripts and a fresh kernel.
OPEN_TIMEOUT_S = 120
# Rendering after the kernel is idle (images decoded, MathJax typeset, widget views built).
RENDER_TIMEOUT_S = 30

# JupyterLab settings the tests put in place through the settings API, on top of what `course lab`
# itself sets. Autosave off: running a notebook makes it dirty, and JupyterLab must never write the
# lessons' outputs (or a test's typed answers) back into the checkout. (Windowing is off in `course
# lab` itself, course_lib/labconfig/settings: every cell is in the page, which the checks read.)
TEST_SETTINGS = {
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
}


def chromium_executable() -> str | None:
    """Debian's chromium (the browser tests use it, never a downloaded one), or None."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running `course lab` server."""

    proc: subprocess.Popen
    base: str  # http://127.0.0.1:PORT
    token: str
    log_path: Path

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def api(self, method: str, path: str, body: dict | None = None) -> dict | None:
        """A JSON request to the server's REST API, authenticated with the token."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url(path),
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def shutdown_kernels(self) -> None:
        """Stop every kernel (one lesson's kernel must not hold memory while the next one runs)."""
        for session in self.api("GET", "api/sessions") or []:
            try:
                self.api("DELETE", f"api/sessions/{session['id']}")
            except urllib.error.HTTPError:
                pass  # already gone

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_lab(workdir: Path, teacher: bool = False) -> Lab:
    """`course lab` from this Python environment (the course's .venv under `make test`), on a free port
    of 127.0.0.1, with a token of our own (authentication stays on) and fresh user settings.

    `teacher=True` starts `course lab --teacher`. Extra options the test adds: `expose_app_in_browser`
    (window.jupyterapp, so the test can read cell outputs and kernel state from the notebook model,
    not only from the page), private folders for user settings and workspaces, and kernels over Unix
    sockets (no TCP port races with the other tests' kernels; see course_pytest_plugin).
    """
    port, token = _free_port(), secrets.token_hex(16)
    log_path = workdir / "lab.log"
    cmd = [
        sys.executable,
        "-m",
        "course_lib.cli",
        "lab",
        *(["--teacher"] if teacher else []),
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.user_settings_dir={workdir / 'user-settings'}",
        f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
    ]
    if os.name == "posix":
        cmd.append("--KernelManager.transport=ipc")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=dict(os.environ, JUPYTER_TOKEN=token),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    lab = Lab(proc, f"http://127.0.0.1:{port}", token, log_path)
    deadline, last = time.monotonic() + 90, None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"`course lab` exited with status {proc.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("GET", "api/status")
            break
        except OSError as err:
            last = err
            time.sleep(0.25)  # polling the server's start, not waiting for a fixed time
    else:
        lab.stop()
        raise RuntimeError(f"`course lab` did not answer within 90 s (last error: {last}):\n{lab.log_tail()}")
    return lab


def apply_test_settings(lab: Lab) -> None:
    """Put TEST_SETTINGS in place and read them back: a lab that could autosave into the checkout
    must not be used."""
    for plugin, values in TEST_SETTINGS.items():
        lab.api("PUT", f"lab/api/settings/{plugin}", {"raw": json.dumps(values)})
        composite = lab.api("GET", f"lab/api/settings/{plugin}")["settings"]
        for key, value in values.items():
            if composite.get(key) != value:
                raise RuntimeError(f"JupyterLab setting {plugin} {key} is {composite.get(key)!r}, expected {value!r}")


# --- the page --------------------------------------------------------------------------------------

# Console errors that are not the course's problem, each with why (a regex, the reason). None so far:
# JupyterLab 4.6 with this configuration logs no error on its own. Not even a 404 is benign in
# general: a lesson's Markdown image that is missing shows up as one.
BENIGN_CONSOLE: list[tuple[re.Pattern, str]] = []


def is_benign(text: str) -> bool:
    return any(pattern.search(text) for pattern, _ in BENIGN_CONSOLE)


@dataclass
class Page:
    """One browser page on the lab, with its JavaScript console errors recorded."""

    page: object  # playwright.sync_api.Page
    lab: Lab
    shots: Path  # where screenshots go
    console_errors: list[str] = field(default_factory=list)
    ignored_console: list[str] = field(default_factory=list)  # benign errors, kept for a look

    def record_console(self) -> None:
        def on_console(msg):
            if msg.type == "error":
                (self.ignored_console if is_benign(msg.text) else self.console_errors).append(
                    f"console.error: {msg.text}"
                )

        self.page.on("console", on_console)
        self.page.on("pageerror", lambda err: self.console_errors.append(f"uncaught exception: {err}"))

    def open(self, path: str) -> None:
        """Open `path` (relative to the repository) as the only document, and wait until its kernel
        is idle according to the status bar (the notebook's own indicator says idle too early)."""
        self.page.goto(self.lab.url(f"lab/tree/{path}?reset&token={self.lab.token}"))
        self.page.wait_for_function(
            """path => {
                const app = window.jupyterapp;
                const w = app && app.shell.currentWidget;
                return !!(w && w.context && w.context.path === path && w.context.isReady && w.content);
            }""",
            arg=path,
            timeout=OPEN_TIMEOUT_S * 1000,
        )
        self.wait_kernel_idle(OPEN_TIMEOUT_S)

    def wait_kernel_idle(self, timeout_s: float) -> None:
        self.page.locator("#jp-main-statusbar .jp-StatusBar-TextItem").filter(
            has_text=re.compile(r"\| Idle$")
        ).first.wait_for(timeout=timeout_s * 1000)

    def run_all_from_menu(self) -> None:
        """Run → Run All Cells, then wait until every cell has finished (or execution stopped at an
        error) and the kernel is idle. JupyterLab 4 has no default shortcut for it."""
        self.page.evaluate(
            """() => {
                window.__runAll = null;
                window.jupyterapp.commands.commandExecuted.connect((_, a) => {
                    if (a.id === 'notebook:run-all-cells') {
                        Promise.resolve(a.result).then(ok => { window.__runAll = {ok: ok}; },
                                                       e => { window.__runAll = {error: String(e)}; });
                    }
                });
            }"""
        )
        self.page.locator(".lm-MenuBar-item").filter(has_text=re.compile(r"^Run$")).click()
        self.page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^Run All Cells$")).click()
        self.page.wait_for_function("() => window.__runAll !== null", timeout=RUN_TIMEOUT_S * 1000, polling=500)
        self.wait_kernel_idle(60)

    def cell(self, index: int):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def screenshot(self, name: str, index: int | None = None) -> Path:
        """A screenshot of cell `index` (scrolled into view), or of the window."""
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{name}.png"
        try:
            if index is None:
                self.page.screenshot(path=str(path))
            else:
                self.cell(index).screenshot(path=str(path), timeout=15_000)
        except Exception as err:  # a screenshot is evidence, never the reason a test fails
            path = self.shots / f"{name}.txt"
            path.write_text(f"screenshot failed: {err}")
        return path


# A cell's own outputs in the page (not those nested in an Output widget), and among them the ones
# that hold a widget view (JupyterLab marks rendered outputs with data-mime-type, but not widget views).
OUTPUTS_CSS = ".jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output"
WIDGET_VIEW_CSS = OUTPUTS_CSS + ":has(> .jupyter-widgets)"

# What the page shows for every cell, read from the notebook model (outputs, tags, execution counts)
# and from the page (images, typeset maths, widget views), output by output.
READ_CELLS_JS = r"""
() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const WIDGET = 'application/vnd.jupyter.widget-view+json';
    const text = v => Array.isArray(v) ? v.join('') : (v || '');
    return panel.content.widgets.map((cell, index) => {
        const m = cell.model;
        const src = m.sharedModel.getSource();
        const info = {index, total: panel.content.widgets.length, id: m.id, type: m.type,
                      tags: m.getMetadata('tags') || [],
                      first_line: src.split('\n').find(l => l.trim()) || ''};
        if (m.type === 'code') {
            info.execution_count = m.executionCount;
            const shown = [...cell.node.querySelectorAll('OUTPUTS_CSS')];
            info.outputs = m.outputs.toJSON().map((o, k) => {
                const data = o.data || {};
                const node = shown[k];
                const out = {output_type: o.output_type, name: o.name || null, mimes: Object.keys(data),
                             text: text(o.text) || text(data['text/plain']),
                             error: o.output_type === 'error' ? `${o.ename}: ${o.evalue}` : null,
                             shown: !!node};
                if (node) {
                    out.shown_as = node.getAttribute('data-mime-type');
                    out.widget_view = !!node.querySelector(':scope > .jupyter-widgets');
                    out.shown_text = node.innerText.slice(0, 300);
                    out.images = [...node.querySelectorAll('img')].map(
                        i => ({complete: i.complete, width: i.naturalWidth}));
                }
                return out;
            });
        } else if (m.type === 'markdown') {
            const md = cell.node.querySelector('.jp-RenderedMarkdown');
            info.rendered = !!md;
            if (md) {
                const copy = md.cloneNode(true);
                // Typeset maths, code and the anchor links JupyterLab adds are not prose.
                copy.querySelectorAll('mjx-container, .MathJax, code, pre, .jp-InternalAnchorLink')
                    .forEach(e => e.remove());
                info.math = md.querySelectorAll('mjx-container').length;
                info.text = copy.textContent;
                info.images = [...md.querySelectorAll('img')].map(
                    i => ({src: (i.getAttribute('src') || '').slice(0, 120), complete: i.complete,
                           width: i.naturalWidth}));
            }
            // Markdown images the cell's source asks for: ![alt](path)
            info.image_refs = (src.match(/!\[[^\]]*\]\([^)]+\)/g) || []).length;
        }
        return info;
    });
}
""".replace("OUTPUTS_CSS", OUTPUTS_CSS)

WIDGET = "application/vnd.jupyter.widget-view+json"
# Raw LaTeX left in rendered Markdown: a `$` (MathJax removes every delimiter it typesets), `\(`, `\[`,
# or a TeX command outside code. Only the commands the lessons use: prose may quote a string such as
# "citizen:\nWe", which is not maths.
TEX_COMMANDS = (
    "begin end frac sqrt sum prod int mathrm mathbf mathcal mathbb operatorname text cdot times "
    "le ge leq geq neq approx sim to infty in top log exp max min softmax alpha beta gamma delta "
    "epsilon varepsilon theta lambda mu pi sigma tau phi omega Sigma partial nabla hat tilde bar "
    "dots ldots cdots left right quad underbrace overbrace"
).split()
RAW_TEX = re.compile(r"\$|\\\(|\\\[|\\(?:" + "|".join(TEX_COMMANDS) + r")(?![a-zA-Z])")
WIDGET_REPR = re.compile(
    r"^(?:[A-Z]\w*(?:Slider|Box|Dropdown|Output|Button|Text)\w*\(|interactive\(|Run this cell to get)"
)
FIGURE_TEXT = re.compile(r"^<Figure size [\d.]+x[\d.]+ with \d+ Axes>$")


def describe(cell: dict) -> str:
    line = cell["first_line"].strip()
    line = line if len(line) <= 60 else line[:57] + "..."
    # Numbered from 1, as JupyterLab's status bar counts them ("Cell 3/22"); the id is the cell's own.
    return f"cell {cell['index'] + 1}/{cell['total']} (id {cell['id']}, {cell['type']}: {line!r})"


def cell_problems(cell: dict, ran: bool = True) -> list[str]:
    """What is wrong with one cell as the page shows it, in words for the failure message (`ran`:
    the notebook was run in the page, so every code cell must have run)."""
    problems = []
    where = describe(cell)
    if cell["type"] == "code":
        outputs = cell["outputs"]
        errors = [o["error"] for o in outputs if o["error"]]
        if errors and "raises-exception" not in cell["tags"]:
            problems += [f"{where}: shows an error: {e}" for e in errors]
        for o in outputs:
            if o["output_type"] == "stream" and o["name"] == "stderr":
                kind = "a traceback" if "Traceback" in o["text"] else "output on stderr (a red box)"
                problems.append(f"{where}: shows {kind}: {o['text'].strip()[:300]!r}")
        if ran and cell["execution_count"] is None and not errors:
            problems.append(f"{where}: did not run (no execution count after Run All)")
        for o in outputs:
            if not o["shown"]:
                problems.append(f"{where}: an output ({', '.join(o['mimes']) or o['output_type']}) is not on the page")
                continue
            plain = o["text"].strip()
            if WIDGET in o["mimes"]:
                if not o["widget_view"]:
                    problems.append(f"{where}: a widget is shown as text, not as a control: {o['shown_text'][:100]!r}")
                elif not all(i["complete"] and i["width"] > 0 for i in o["images"]):
                    problems.append(f"{where}: a figure inside a widget did not render as an image")
            elif "image/png" in o["mimes"]:
                if not o["images"] or not all(i["complete"] and i["width"] > 0 for i in o["images"]):
                    problems.append(f"{where}: a figure did not render as an image (shown as {o['shown_as']})")
            elif FIGURE_TEXT.match(plain):
                problems.append(f"{where}: a figure is shown as text ({plain!r}), not as an image")
            elif WIDGET_REPR.match(plain):
                problems.append(f"{where}: a widget is shown as text ({plain[:80]!r})")
    elif cell["type"] == "markdown":
        if not cell.get("rendered"):
            problems.append(f"{where}: Markdown not rendered")
        else:
            images = cell.get("images", [])
            problems += [
                f"{where}: an image did not load: {i['src']!r}"
                for i in images
                if not (i["complete"] and i["width"] > 0)
            ]
            if len(images) < cell.get("image_refs", 0):
                problems.append(f"{where}: {cell['image_refs']} image(s) in its source, {len(images)} on the page")
            raw = RAW_TEX.search(cell["text"])
            if raw:
                start = max(raw.start() - 30, 0)
                problems.append(
                    f"{where}: raw LaTeX in the rendered text: ...{cell['text'][start : raw.end() + 30]!r}..."
                )
    return problems


def wait_rendered(page: Page) -> None:
    """Wait until images are decoded, MathJax has typeset every `$` and widget views are built; on
    timeout, go on: the checks then name what did not render."""
    try:
        page.page.wait_for_function(
            r"""() => {
                const nb = window.jupyterapp.shell.currentWidget.content.node;
                const imgs = [...nb.querySelectorAll('.jp-OutputArea-output img, .jp-RenderedMarkdown img')];
                imgs.forEach(i => { i.loading = 'eager'; });  // a lazy image far down the page never loads
                if (!imgs.every(i => i.complete && i.naturalWidth > 0)) return false;
                const mds = [...nb.querySelectorAll('.jp-RenderedMarkdown')].map(md => {
                    const c = md.cloneNode(true);
                    c.querySelectorAll('mjx-container, code, pre').forEach(e => e.remove());
                    return c.textContent;
                });
                if (mds.some(t => t.includes('$'))) return false;
                // A widget output still being built shows nothing yet; one that failed shows its text.
                const cells = window.jupyterapp.shell.currentWidget.content.widgets;
                return cells.every(c => c.model.type !== 'code' || c.model.outputs.toJSON().every((o, k) => {
                    if (!(o.data && o.data['application/vnd.jupyter.widget-view+json'])) return true;
                    const node = c.node.querySelectorAll('OUTPUTS_CSS')[k];
                    return node && node.querySelector(':scope > .jupyter-widgets');
                }));
            }""".replace("OUTPUTS_CSS", OUTPUTS_CSS),
            timeout=RENDER_TIMEOUT_S * 1000,
            polling=250,
        )
    except Exception:
        pass


# --- widgets -----------------------------------------------------------------------------------

# What a widget shows besides its controls: the images and text of its Output areas (a slider's own
# readout changes with every step, so it is not evidence that the figure reacted).
WIDGET_SIGNATURE_JS = r"""
([cellIndex, viewIndex]) => {
    const cell = window.jupyterapp.shell.currentWidget.content.widgets[cellIndex].node;
    const view = cell.querySelectorAll('WIDGET_VIEW_CSS')[viewIndex];
    const outs = [...view.querySelectorAll('.widget-output')];
    const parts = outs.length ? outs : [view];
    return parts.map(o => [...o.querySelectorAll('img')].map(i => i.src.length + ':' + i.src.slice(-200)).join('|')
                          + '#' + [...o.querySelectorAll('.jp-OutputArea-output:not([data-mime-type="image/png"])')]
                                     .map(t => t.innerText).join('|')).join('||');
}
""".replace("WIDGET_VIEW_CSS", WIDGET_VIEW_CSS)


def widget_controls(page: Page, cell_index: int) -> list[tuple[int, str, int]]:
    """(view index, kind, control index within the view) for every slider and dropdown of a cell."""
    return page.page.evaluate(
        r"""cellIndex => {
            const cell = window.jupyterapp.shell.currentWidget.content.widgets[cellIndex].node;
            const views = [...cell.querySelectorAll('WIDGET_VIEW_CSS')];
            const found = [];
            views.forEach((v, vi) => {
                v.querySelectorAll('.widget-slider .noUi-handle').forEach((_, k) => found.push([vi, 'slider', k]));
                v.querySelectorAll('.widget-dropdown select').forEach((_, k) => found.push([vi, 'dropdown', k]));
            });
            return found;
        }""".replace("WIDGET_VIEW_CSS", WIDGET_VIEW_CSS),
        cell_index,
    )


def move_control(page: Page, cell_index: int, view_index: int, kind: str, k: int) -> None:
    """Move a slider one step with the arrow keys, as a learner can (right, or left from its maximum),
    or pick a dropdown's next option."""
    view = page.cell(cell_index).locator(WIDGET_VIEW_CSS).nth(view_index)
    if kind == "slider":
        handle = view.locator(".widget-slider .noUi-handle").nth(k)
        handle.scroll_into_view_if_needed()
        handle.focus()
        at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        page.page.keyboard.press("ArrowLeft" if at_max else "ArrowRight")
    else:
        select = view.locator(".widget-dropdown select").nth(k)
        select.scroll_into_view_if_needed()
        options = select.locator("option")
        current = select.evaluate("s => s.selectedIndex")
        select.select_option(index=(current + 1) % options.count())


def check_widgets_react(page: Page, cells: list[dict], shot_prefix: str) -> tuple[list[str], list[Path]]:
    """Move every slider and dropdown; its figure or printout must change. Screenshots before and
    after each move are kept as evidence (returned)."""
    problems, shots = [], []
    for cell in cells:
        if cell["type"] != "code" or not any(o.get("widget_view") for o in cell["outputs"]):
            continue
        for view_index, kind, k in widget_controls(page, cell["index"]):
            label = f"{shot_prefix}-cell{cell['index'] + 1:02d}-{kind}{view_index + 1}.{k + 1}"
            before = page.page.evaluate(WIDGET_SIGNATURE_JS, [cell["index"], view_index])
            shots.append(page.screenshot(f"{label}-before", cell["index"]))
            move_control(page, cell["index"], view_index, kind, k)
            try:
                page.page.wait_for_function(
                    f"([c, v, before]) => ({WIDGET_SIGNATURE_JS})([c, v]) !== before",
                    arg=[cell["index"], view_index, before],
                    timeout=RENDER_TIMEOUT_S * 1000,
                    polling=200,
                )
                page.wait_kernel_idle(60)
                wait_rendered(page)
            except Exception:
                problems.append(
                    f"{describe(cell)}: moving its {kind} did not change the figure or printout "
                    f"within {RENDER_TIMEOUT_S} s"
                )
            shots.append(page.screenshot(f"{label}-after", cell["index"]))
    return problems, shots


def new_shots_dir(name: str) -> Path:
    """A folder for one test's screenshots: under $COURSE_BROWSER_SHOTS when set (kept), else a new
    temporary folder (kept only when the test fails)."""
    root = os.environ.get("COURSE_BROWSER_SHOTS")
    if root:
        path = Path(root) / name
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix=f"course-browser-{name}-"))
