"""The course's website (`make site`, docs/site/), read in headless Chromium as a visitor reads it.

The site is built once for this module from the repository's stored outputs (a build already made
from the same sources is reused), served by Python's http.server on 127.0.0.1, and every page is
opened: it must load with no console error, no failed request and no request to another host;
every image must load; its maths must be typeset (no raw `$...$` or `\\frac` left); a lesson page
must have its previous/next links, its table of contents, an "Open in Colab" and a "Download the
notebook" link; a widget must show its figure or printout. The search must find "softmax", with
lessons first and a snippet that shows the word. At a laptop's 1280x800 the code of lessons 11 and
12 fits its column and the home page does not scroll sideways; on a phone the course map is one
card per lesson.

Like the lesson tests, these need Chromium (skipped with a reason without it, required under
CI=true), and the site's packages (the `site` extra: `make site` installs them; under CI=true the
module runs `make site` when they are missing). The build's failure modes (a broken link, a missing
image, a lesson stored without outputs) are tested on a tiny course in a temporary folder, without
a browser.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import importlib
import importlib.util
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from labdriver import RAW_TEX, REPO, new_shots_dir

BUILD = REPO / "docs" / "site" / "build.py"
SITE = REPO / "docs" / "site" / "_build" / "html"
CI = os.environ.get("CI", "").lower() == "true"
SITE_PACKAGES = ("sphinx", "myst_nb", "myst_parser", "sphinx_book_theme", "sphinx_copybutton", "mathjax")
LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXERCISES = sorted((REPO / "exercises").glob("[0-9][0-9]_*.ipynb"))
PAGES = (
    ["index.html"]
    + [f"notebooks/{p.stem}.html" for p in LESSONS]
    + [f"exercises/{p.stem}.html" for p in EXERCISES]
    + ["docs/teaching.html", "docs/nbgrader/README.html"]
)
# A page has loaded and rendered within this time (MathJax typesets the longest lesson in about a second).
PAGE_TIMEOUT_S = 60


def _packages_missing() -> list[str]:
    return [name for name in SITE_PACKAGES if importlib.util.find_spec(name) is None]


@pytest.fixture(scope="session")
def site_packages() -> None:
    """The `site` extra. Under CI a missing package is installed the way a contributor gets it
    (`make site`); elsewhere the tests are skipped with the command to run."""
    missing = _packages_missing()
    if not missing:
        return
    if not CI:
        pytest.skip(f"the site's packages are not installed ({', '.join(missing)}): run `make site` once")
    result = subprocess.run(["make", "-C", str(REPO), "site"], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(
            f"CI=true and the site is required, but `make site` failed:\n{result.stdout[-3000:]}"
            f"\n{result.stderr[-3000:]}",
            pytrace=False,
        )
    importlib.invalidate_caches()
    still = _packages_missing()
    if still:
        pytest.fail(f"`make site` ran, but {', '.join(still)} cannot be imported", pytrace=False)


def run_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILD), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(site_packages) -> Path:
    """The built site (a build from the same sources is reused)."""
    result = run_build("--reuse")
    assert result.returncode == 0, f"the site did not build:\n{result.stdout}\n{result.stderr}"
    print(result.stdout.strip())
    return SITE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def served(site):
    """http://127.0.0.1:PORT/ serving the site, as any static host would."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def shots():
    path = new_shots_dir("site")
    yield path
    if not os.environ.get("COURSE_BROWSER_SHOTS") and not any(path.iterdir()):
        shutil.rmtree(path, ignore_errors=True)


# --- one page in the browser --------------------------------------------------------------------------

# What the page shows, read once it has loaded, its images are decoded and MathJax has typeset it.
READ_PAGE_JS = r"""
async () => {
    const imgs = [...document.images];
    imgs.forEach(i => { i.loading = 'eager'; });
    await Promise.all(imgs.map(i => i.decode().catch(() => null)));
    const article = document.querySelector('article.bd-article') || document.body;
    const prose = article.cloneNode(true);
    // Code, outputs and typeset maths are not prose; the widgets' control readouts are values.
    prose.querySelectorAll('mjx-container, code, pre, script, style, .course-widget-controls, .headerlink')
         .forEach(e => e.remove());
    const link = sel => { const a = document.querySelector(sel); return a ? a.getAttribute('href') : null; };
    return {
        title: document.title,
        images: imgs.map(i => ({src: i.currentSrc.slice(0, 120), ok: i.complete && i.naturalWidth > 0})),
        text: prose.innerText,
        math: article.querySelectorAll('.math').length,
        typeset: article.querySelectorAll('mjx-container').length,
        mathErrors: [...article.querySelectorAll('mjx-merror')].map(e => e.innerText).slice(0, 3),
        prev: link('.prev-next-area a.left-prev'),
        next: link('.prev-next-area a.right-next'),
        toc: document.querySelectorAll('#pst-page-toc-nav a').length,
        colab: link('a.course-colab'),
        download: link('a.course-download'),
        widgets: [...article.querySelectorAll('.course-widget')].map(w => ({
            images: [...w.querySelectorAll('img')].map(i => i.complete && i.naturalWidth > 0),
            printout: [...w.querySelectorAll('pre')].map(p => p.innerText.trim()).join('\n'),
            note: (w.querySelector('.course-widget-note') || {}).innerText || '',
        })),
    };
}
"""


def _markdown_images(path: Path) -> list[str]:
    """The file names of the images a notebook's Markdown cells show (the lessons' diagrams)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return [posixpath.basename(target) for target in re.findall(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)", text)]


def _widget_outputs(path: Path) -> int:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        for c in nb["cells"]
        for o in c.get("outputs", [])
    )


@functools.cache
def _site_build():
    """docs/site/build.py as a module."""
    spec = importlib.util.spec_from_file_location("course_site_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@functools.cache
def _repository_address() -> str:
    """The address `course colab --repository URL` wrote into the lessons, read as the build reads it."""
    site_build = _site_build()
    for path in LESSONS:
        address = site_build._address(json.loads(path.read_text(encoding="utf-8")))
        if address:
            return address
    return ""


def page_problems(info: dict, page: str) -> list[str]:
    """What is wrong with one page as the browser shows it (`info` from READ_PAGE_JS)."""
    problems = [f"an image did not load: {i['src']}" for i in info["images"] if not i["ok"]]
    raw = RAW_TEX.search(info["text"])
    if raw:
        start = max(raw.start() - 40, 0)
        problems.append(f"raw LaTeX in the text: ...{info['text'][start : raw.end() + 40]!r}...")
    if info["typeset"] < info["math"]:
        problems.append(f"{info['math']} formulas, of which MathJax typeset {info['typeset']}")
    problems += [f"MathJax could not typeset: {e!r}" for e in info["mathErrors"]]
    if "Run this cell to get" in info["text"] or re.search(r"\binteractive\(children=", info["text"]):
        problems.append("a widget is shown as its text placeholder")
    if page.startswith(("notebooks/", "exercises/")):
        if not (info["prev"] and info["next"]):
            problems.append(f"no previous/next links (previous: {info['prev']}, next: {info['next']})")
        if not info["toc"]:
            problems.append("no table of contents for the page")
        if not info["download"] or not info["download"].endswith(f"{Path(page).stem}.ipynb"):
            problems.append(f"no 'Download the notebook' link to {Path(page).stem}.ipynb (found {info['download']})")
        address = _repository_address()
        colab = info["colab"] or ""
        if address.startswith("https://github.com/"):
            wanted = "https://colab.research.google.com/github/" + address[len("https://github.com/") :].split("@")[0]
            if not (colab.startswith(wanted.removesuffix(".git")) and colab.endswith(page.replace(".html", ".ipynb"))):
                problems.append(f"the 'Open in Colab' link is {colab!r}, not Colab's page for {page} in {address}")
        elif not colab.endswith("index.html#open-a-notebook-in-colab"):
            problems.append(
                f"the 'Open in Colab' link is {colab!r}; with no repository address written into the "
                "notebooks it should lead to the home page's instructions"
            )
    for k, widget in enumerate(info["widgets"], 1):
        if not (any(widget["images"]) or widget["printout"]):
            problems.append(f"widget {k} shows no figure and no printout")
        if not all(widget["images"]):
            problems.append(f"widget {k}: a figure did not load")
        if "Run the notebook to" not in widget["note"]:
            problems.append(f"widget {k} has no note that it moves only in a running notebook")
    return problems


class Tab:
    """One browser tab for every page of the site, recording what goes wrong while a page loads:
    console errors, uncaught exceptions, failed requests and requests to other hosts."""

    def __init__(self, browser, base: str):
        self.base = base
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.page = self.context.new_page()
        self.events: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.events.append(f"console.error: {m.text}"))
        self.page.on("pageerror", lambda err: self.events.append(f"uncaught exception: {err}"))
        self.page.on("requestfailed", lambda r: self.events.append(f"request failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.events.append(f"HTTP {r.status}: {r.url}"))
        self.page.on(
            "request",
            lambda r: (
                r.url.startswith(("http:", "https:"))
                and not r.url.startswith(base)
                and self.events.append(f"a request to another host: {r.url}")
            ),
        )

    def open(self, path: str) -> list[str]:
        """Open `path` and wait until its images are decoded and MathJax has typeset it; return what
        went wrong meanwhile."""
        self.events = []
        self.page.goto(self.base + path, wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
        if self.page.locator(".math").count():
            self.page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=PAGE_TIMEOUT_S * 1000
            )
            self.page.evaluate("() => MathJax.startup.promise.then(() => true)")
        return self.events

    def screenshot(self, path: Path) -> None:
        try:
            self.page.screenshot(path=str(path), full_page=True)
        except Exception as err:  # evidence only, never the reason a test fails
            path.with_suffix(".txt").write_text(f"screenshot failed: {err}")


@pytest.fixture(scope="module")
def tab(browser, served):
    opened = Tab(browser, served)
    yield opened
    opened.context.close()


def open_page(tab: Tab, page: str, shots: Path) -> tuple[dict, list[str]]:
    """Open `page` and return what it shows and its problems. A screenshot is kept on failure
    (always with COURSE_BROWSER_SHOTS)."""
    info: dict = {}
    problems: list[str] = []
    try:
        problems = tab.open(page)
        info = tab.page.evaluate(READ_PAGE_JS)
        problems = problems + page_problems(info, page)
    except Exception as err:  # a page that never loaded: say so, with the screenshot
        message = str(err).splitlines()[0] if str(err) else ""
        problems = tab.events + [f"the page did not render: {type(err).__name__}: {message}"]
    if problems or os.environ.get("COURSE_BROWSER_SHOTS"):
        tab.screenshot(shots / (page.replace("/", "_").removesuffix(".html") + ".png"))
    return info, problems


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline_with_its_figures_maths_and_links(page, tab, shots):
    info, problems = open_page(tab, page, shots)
    assert not problems, (
        f"{page} on the site: {len(problems)} problem(s):\n  - " + "\n  - ".join(problems) + (f"\nscreenshots: {shots}")
    )
    if page.startswith("notebooks/"):
        notebook = REPO / "notebooks" / (Path(page).stem + ".ipynb")
        expected = _widget_outputs(notebook)
        assert len(info["widgets"]) == expected, (
            f"{page}: the notebook stores {expected} widget(s), the page shows {len(info['widgets'])}"
        )
        shown = [posixpath.basename(urlsplit(i["src"]).path) for i in info["images"] if i["ok"]]
        missing = [name for name in _markdown_images(notebook) if name not in shown]
        assert not missing, f"{page}: the notebook's Markdown shows {missing}, the page does not (images: {shown})"


def test_search_finds_softmax(tab, shots):
    problems = tab.open("search.html?q=softmax")
    try:
        tab.page.locator("#search-results ul.search li").first.wait_for(timeout=PAGE_TIMEOUT_S * 1000)
        hits = tab.page.locator("#search-results ul.search li a").evaluate_all(
            "as => as.map(a => a.getAttribute('href'))"
        )
    except Exception as err:
        hits, problems = [], problems + [f"no search results: {type(err).__name__}"]
    lessons = [h for h in hits if h.startswith("notebooks/")]
    if not lessons or problems:
        tab.screenshot(shots / "search-softmax.png")
    assert lessons and not problems, (
        f"searching 'softmax' found {hits or 'nothing'}, no lesson among them; "
        f"problems: {problems}; screenshots: {shots}"
    )


# --- what fits the screen ------------------------------------------------------------------------------

# Code and output blocks of a page wider than their column: with the site's own CSS (a line that does
# not fit wraps), and with wrapping turned off (whether the lines themselves fit).
CODE_FITS_JS = r"""
() => {
    const blocks = [...document.querySelectorAll('article.bd-article div.highlight pre')];
    const over = () => blocks.filter(b => b.scrollWidth > b.clientWidth + 1)
        .map(b => `${b.scrollWidth - b.clientWidth} px too wide: ${b.textContent.split('\n')[0].slice(0, 60)}`);
    const styled = over();
    blocks.forEach(b => { b.style.whiteSpace = 'pre'; });
    const unwrapped = over();
    blocks.forEach(b => { b.style.whiteSpace = ''; });
    return {blocks: blocks.length, column: document.querySelector('article.bd-article').clientWidth,
            styled, unwrapped};
}
"""
# Sideways scrolling of the whole page, and of the course map inside its box.
PAGE_WIDTH_JS = r"""
() => {
    const map = document.querySelector('section#course-map table');
    const box = map && map.parentElement;
    const cells = map ? [...map.querySelectorAll('td')] : [];
    return {page: document.documentElement.scrollWidth, window: window.innerWidth,
            map: map ? map.scrollWidth : null, box: box ? box.clientWidth : null,
            cells_outside: cells.filter(td => td.getBoundingClientRect().right > window.innerWidth + 1).length,
            labels: cells.filter(td => td.dataset.label).length, cells: cells.length,
            title: document.title};
}
"""


@pytest.fixture
def laptop(browser, served):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("page", ["notebooks/11_gpt.html", "notebooks/12_modern_decoder.html"])
def test_code_fits_the_column_on_a_laptop(page, laptop, served, shots):
    laptop.goto(served + page, wait_until="load")
    found = laptop.evaluate(CODE_FITS_JS)
    if found["styled"] or found["unwrapped"]:
        laptop.screenshot(path=str(shots / f"fit-{Path(page).stem}.png"))
    assert found["blocks"] > 20, f"{page}: only {found['blocks']} code blocks found"
    assert not found["styled"], f"{page} at 1280x800: code blocks wider than the {found['column']} px column: {found}"
    assert not found["unwrapped"], (
        f"{page} at 1280x800: code lines that fit only by wrapping (the column is {found['column']} px): "
        f"{found['unwrapped'][:5]}"
    )
    cells, copy = laptop.locator("div.cell_input pre").count(), laptop.locator("div.cell_input button.copybtn").count()
    assert cells > 10 and copy == cells, f"{page}: {copy} copy buttons on its {cells} code cells"
    assert not laptop.locator("div.cell_output button.copybtn").count(), f"{page}: copy buttons on outputs"


def test_the_home_page_fits_a_laptop_and_its_course_map_reads_on_a_phone(browser, served, shots):
    problems = []
    for width, height in ((1280, 800), (390, 844)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.goto(served + "index.html", wait_until="load")
        found = page.evaluate(PAGE_WIDTH_JS)
        if found["page"] > found["window"]:
            problems.append(f"at {width} px the home page scrolls sideways ({found['page']} px wide)")
        if found["map"] is None:
            problems.append("the home page has no course map (section#course-map table)")
        elif found["map"] > found["box"] + 1:
            problems.append(f"at {width} px the course map is {found['map']} px wide in a {found['box']} px box")
        if found["cells_outside"]:
            problems.append(f"at {width} px {found['cells_outside']} cells of the course map are off the screen")
        if width < 768 and found["labels"] != found["cells"]:
            problems.append(f"on a phone {found['cells'] - found['labels']} cards' cells lack their column's name")
        if found["title"] != "From One-Hot to Transformer":
            problems.append(f"the home page's title is {found['title']!r}")
        if problems:
            page.screenshot(path=str(shots / f"home-{width}.png"))
        context.close()
    assert not problems, "\n".join(problems) + f"\nscreenshots: {shots}"


def test_search_shows_the_word_it_found_and_lessons_first(laptop, served, shots):
    """The snippet under each result starts where the page says "rotary", not at the theme's menu;
    the lessons that use the word come before the exercise sets."""
    laptop.goto(served + "search.html?q=rotary", wait_until="load")
    try:
        laptop.wait_for_function(
            "() => { const li = [...document.querySelectorAll('#search-results li')];"
            " return li.length > 2 && li.every(l => l.querySelector('p.context')); }",
            timeout=PAGE_TIMEOUT_S * 1000,
        )
    except Exception:
        laptop.screenshot(path=str(shots / "search-rotary.png"))
        raise
    results = laptop.evaluate(
        "() => [...document.querySelectorAll('#search-results li')].map(li => "
        "[li.querySelector('a').getAttribute('href'), li.querySelector('p.context').innerText])"
    )
    without = [(href, text[:80]) for href, text in results if "rotary" not in text.lower()]
    kinds = [href.split("/")[0] for href, _ in results]
    lessons_first = kinds.index("exercises") > max(i for i, k in enumerate(kinds) if k == "notebooks")
    if without or not lessons_first:
        laptop.screenshot(path=str(shots / "search-rotary.png"))
    assert not without, f"search results whose snippet does not show 'rotary': {without}"
    assert "notebooks" in kinds and lessons_first, f"the lessons should come first: {[h for h, _ in results]}"


# --- the links, read from the built files (no browser) -------------------------------------------------


class _Anchors(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def test_every_link_inside_the_site_leads_to_a_page_and_a_heading(site):
    """Sphinx checks the links it resolves; this checks the HTML it wrote, JupyterLab-style section
    links (#8.-A-KV-cache) and the pages' own links included."""
    pages = {p.relative_to(site).as_posix(): _Anchors() for p in site.rglob("*.html")}
    for rel, parsed in pages.items():
        parsed.feed((site / rel).read_text(encoding="utf-8"))
    problems = []
    for rel, parsed in pages.items():
        for href in parsed.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            target = rel
            if parts.path:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), unquote(parts.path)))
            if parts.path.endswith("/") or target == ".":
                target = posixpath.join(target, "index.html")
            if not (site / target).is_file():
                problems.append(f"{rel}: {href} leads to {target}, which is not on the site")
            elif parts.fragment and target in pages and unquote(parts.fragment) not in pages[target].ids:
                problems.append(f"{rel}: {href}: {target} has no element with id {unquote(parts.fragment)!r}")
    assert not problems, f"{len(problems)} broken link(s) on the site:\n" + "\n".join(problems[:40])


def test_site_holds_every_lesson_and_exercise_set_and_no_solution(site):
    missing = [p for p in PAGES if not (site / p).is_file()]
    assert not missing, f"pages missing from the site: {missing}"
    for path in LESSONS + EXERCISES:
        copy = site / path.parent.name / path.name
        assert copy.is_file() and copy.read_bytes() == path.read_bytes(), f"{copy} is not the notebook {path} as it is"
    texts = {".html", ".ipynb", ".js"}
    leaked = [
        p.relative_to(site).as_posix()
        for p in site.rglob("*")
        if "solutions" in p.parts or (p.suffix in texts and "BEGIN HIDDEN TESTS" in p.read_text(errors="ignore"))
    ]
    assert not leaked, f"the site holds solutions or hidden tests: {leaked}"


# --- the build's failure modes, on a tiny course --------------------------------------------------------


def _notebook(cells: list[dict]) -> str:
    kernel = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": kernel, "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    for i, cell in enumerate(cells):
        cell.setdefault("id", f"cell-{i}")
        cell.setdefault("metadata", {})
        if cell["cell_type"] == "code":
            cell.setdefault("execution_count", 1 if cell.get("outputs") else None)
            cell.setdefault("outputs", [])
    return json.dumps(nb, indent=1)


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "source": text}


def _code(source: str, printed: str | None = "4\n") -> dict:
    outputs = [] if printed is None else [{"output_type": "stream", "name": "stdout", "text": printed}]
    return {"cell_type": "code", "source": source, "outputs": outputs}


def tiny_course(root: Path, lesson_cells: list[dict] | None = None) -> Path:
    """A course with one lesson, its exercise set and the two guides: what the build needs."""
    (root / "notebooks").mkdir(parents=True)
    (root / "exercises").mkdir()
    (root / "docs" / "nbgrader").mkdir(parents=True)
    (root / "README.md").write_text(
        "# A tiny course\n\nOne lesson.\n\n## Course map\n\n| lesson | exercises |\n|---|---|\n"
        "| [00 Sums](notebooks/00_sums.ipynb) | [exercises/00](exercises/00_sums_exercises.ipynb) |\n\n"
        "More in [Other](#other).\n\n## Other\n\nText.\n"
    )
    (root / "docs" / "teaching.md").write_text("# Teaching\n\nSee [the nbgrader guide](nbgrader/README.md).\n")
    (root / "docs" / "nbgrader" / "README.md").write_text("# Grading with nbgrader\n\nText.\n")
    cells = (
        lesson_cells
        if lesson_cells is not None
        else [
            _md("# Lesson 00: Sums\n\nThe sum $a + b = \\frac{4}{1}$, as [section 2](#2.-Adding-two-numbers) shows."),
            _md("## 1. Why sums"),
            _md("## 2. Adding `two` numbers"),
            _code("print(2 + 2)"),
        ]
    )
    (root / "notebooks" / "00_sums.ipynb").write_text(_notebook(cells))
    (root / "exercises" / "00_sums_exercises.ipynb").write_text(
        _notebook([_md("# Exercises 00: Sums"), _code("x = 1", None)])
    )
    return root


def test_a_tiny_course_builds_and_section_links_use_jupyterlab_ids(tmp_path, site_packages):
    course = tiny_course(tmp_path / "course")
    out = tmp_path / "site" / "html"
    result = run_build("--repo", str(course), "--out", str(out))
    assert result.returncode == 0, f"the tiny course did not build:\n{result.stdout}\n{result.stderr}"
    page = (out / "notebooks" / "00_sums.html").read_text(encoding="utf-8")
    assert 'id="2.-Adding-two-numbers"' in page, "the heading has no JupyterLab id"
    assert 'href="#2.-Adding-two-numbers"' in page or re.search(r'href="#[^"]*adding-two-numbers"', page), (
        "the section link does not lead to its heading"
    )
    assert "index.html#open-a-notebook-in-colab" in page and 'class="course-download" href="00_sums.ipynb"' in page


def test_a_broken_section_link_fails_the_build(tmp_path, site_packages):
    course = tiny_course(
        tmp_path / "course",
        [_md("# Lesson 00: Sums\n\nAs [section 9](#9.-Nowhere) shows."), _md("## 1. Why sums"), _code("print(2 + 2)")],
    )
    result = run_build("--repo", str(course), "--out", str(tmp_path / "site" / "html"))
    assert result.returncode != 0, "a link to a heading that does not exist built"
    assert "9.-Nowhere" in result.stderr and "notebooks/00_sums.ipynb" in result.stderr, result.stderr


def test_a_link_to_a_missing_page_fails_the_build(tmp_path, site_packages):
    course = tiny_course(
        tmp_path / "course", [_md("# Lesson 00: Sums\n\nNext: [lesson 01](01_products.ipynb)."), _code("print(2 + 2)")]
    )
    result = run_build("--repo", str(course), "--out", str(tmp_path / "site" / "html"))
    assert result.returncode != 0, "a link to a lesson that does not exist built"
    assert "01_products.ipynb" in result.stderr and "does not exist" in result.stderr, result.stderr


def test_a_missing_image_fails_the_build(tmp_path, site_packages):
    course = tiny_course(
        tmp_path / "course", [_md("# Lesson 00: Sums\n\n![the diagram](images/sums.png)"), _code("print(2 + 2)")]
    )
    result = run_build("--repo", str(course), "--out", str(tmp_path / "site" / "html"))
    assert result.returncode != 0, "a lesson whose image is missing built"
    assert "notebooks/00_sums.ipynb, cell 1" in result.stderr and "images/sums.png" in result.stderr, result.stderr


def test_a_lesson_without_its_outputs_fails_the_build(tmp_path, site_packages):
    course = tiny_course(
        tmp_path / "course", [_md("# Lesson 00: Sums"), _code("x = 2 + 2", None), _code("print(x)", None)]
    )
    result = run_build("--repo", str(course), "--out", str(tmp_path / "site" / "html"))
    assert result.returncode != 0, "a lesson stored without its outputs built"
    assert "notebooks/00_sums.ipynb: none of its 2 code cells has stored outputs" in result.stderr, result.stderr
    assert "make run NB=notebooks/00_sums.ipynb" in result.stderr, result.stderr


@pytest.mark.parametrize(
    "address, colab, readme_link",
    [
        (
            "https://github.com/example/course",
            "https://colab.research.google.com/github/example/course/blob/main/notebooks/00_sums.ipynb",
            "https://github.com/example/course/blob/main/README.md#other",
        ),
        (
            "https://github.com/example/course.git@v2",
            "https://colab.research.google.com/github/example/course/blob/v2/notebooks/00_sums.ipynb",
            "https://github.com/example/course/blob/v2/README.md#other",
        ),
        ("https://gitlab.com/example/course", None, None),  # Colab opens notebooks from GitHub only
        ("", None, None),  # no address written yet
    ],
)
def test_colab_links_follow_the_address_course_colab_writes(tmp_path, site_packages, address, colab, readme_link):
    from course_lib.colab import set_setup_cell

    course = tiny_course(tmp_path / "course")
    for path in [course / "notebooks" / "00_sums.ipynb", course / "exercises" / "00_sums_exercises.ipynb"]:
        set_setup_cell(path, address)
    site_build = _site_build()
    build = site_build.Build(repo=course, out=tmp_path / "site" / "html", work=tmp_path / "site")
    pages = site_build.stage(build)
    assert pages["notebooks/00_sums"]["colab"] == colab
    assert pages["exercises/00_sums_exercises"]["colab"] == (
        colab and colab.replace("/notebooks/00_sums.ipynb", "/exercises/00_sums_exercises.ipynb")
    )
    home = (build.src / "index.md").read_text()
    if readme_link:
        assert f"[Other]({readme_link})" in home, home
    else:
        assert "More in Other." in home, home  # the README's other sections are not on the site
        assert any("Open in Colab" in note for note in build.notes), build.notes
    staged = json.loads((build.src / "notebooks" / "00_sums.ipynb").read_text())
    setup = [c for c in staged["cells"] if c.get("id") == "colab-setup"]
    assert setup and "remove-cell" in setup[0]["metadata"]["tags"], "the setup cell shows on the page"


def test_a_lesson_added_later_is_on_the_site_with_its_exercises_without_editing_the_build(tmp_path, site_packages):
    """A new lesson and its exercise set (a final project, say) are found by their file names, and each
    page links the other; so is an exercise set under its old name (NN_name.ipynb)."""
    course = tiny_course(tmp_path / "course")
    (course / "notebooks" / "13_project.ipynb").write_text(_notebook([_md("# Lesson 13: A project"), _code("1")]))
    (course / "exercises" / "13_project_exercises.ipynb").write_text(_notebook([_md("# Exercises 13: A project")]))
    (course / "notebooks" / "14_more.ipynb").write_text(_notebook([_md("# Lesson 14: More"), _code("1")]))
    (course / "exercises" / "14_more.ipynb").write_text(_notebook([_md("# Exercises 14: More")]))
    site_build = _site_build()
    build = site_build.Build(repo=course, out=tmp_path / "site" / "html", work=tmp_path / "site")
    pages = site_build.stage(build)
    partners = {doc: page.get("partner") for doc, page in pages.items()}
    assert partners == {
        "notebooks/00_sums": "exercises/00_sums_exercises",
        "exercises/00_sums_exercises": "notebooks/00_sums",
        "notebooks/13_project": "exercises/13_project_exercises",
        "exercises/13_project_exercises": "notebooks/13_project",
        "notebooks/14_more": "exercises/14_more",
        "exercises/14_more": "notebooks/14_more",
    }, partners
    home = (build.src / "index.md").read_text()
    assert "notebooks/13_project" in home and "exercises/13_project_exercises" in home, home
