"""Build the course's website: every lesson with its stored outputs, every exercise set as a learner
gets it, the teacher's guides, a home page from the README, and a search box (`make site`).

    python docs/site/build.py [--repo DIR] [--out DIR] [--reuse]

Nothing is executed: the pages show the outputs stored in the notebooks. The build first stages a
source folder (docs/site/_build/src) that mirrors the repository's layout, so that the links
between notebooks, exercises and guides stay as they are written:

- index.md: the README's introduction and course map, and the site's table of contents;
- notebooks/NN_*.ipynb and exercises/NN_*.ipynb, found by glob, with each widget replaced by what
  it showed when the notebook was stored (its figure or printout at its default value, its
  controls' values, and a note to run the notebook to move them);
- docs/teaching.md and docs/nbgrader/README.md (and the files they link to);

then runs Sphinx (MyST-NB, sphinx-book-theme; configuration in conf.py beside this file) with
warnings as errors. It fails, with a message naming the file, on a lesson stored without its
outputs, a missing image, a link to a file that does not exist, or (Sphinx) a link to a page or a
heading that does not exist.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LESSON = "[0-9][0-9]_*.ipynb"  # notebooks/ and exercises/: a new lesson is picked up without editing anything
GUIDES = ["docs/teaching.md", "docs/nbgrader/README.md"]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}
COLAB = "https://colab.research.google.com/github"
# The home page's section that a lesson's "Open in Colab" link leads to when no repository address
# has been written into the notebooks (`course colab --repository URL`).
COLAB_HELP = "open-a-notebook-in-colab"


class SiteError(Exception):
    """A problem that stops the build; the message names the file and what to do."""


@dataclass
class Build:
    repo: Path
    out: Path  # the site: <work>/html
    work: Path  # <work>/src (staged sources), <work>/extra (files copied as they are), <work>/doctrees
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repository: str | None = None  # https://github.com/OWNER/REPO, from the notebooks' setup cell
    branch: str = "main"

    @property
    def src(self) -> Path:
        return self.work / "src"

    @property
    def extra(self) -> Path:
        return self.work / "extra"


# --- reading the repository ----------------------------------------------------------------------------


def lessons(repo: Path) -> list[Path]:
    return sorted((repo / "notebooks").glob(LESSON))


def exercise_sets(repo: Path) -> list[Path]:
    return sorted((repo / "exercises").glob(LESSON))


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _is_setup_cell(cell: dict) -> bool:
    return cell.get("id") == "colab-setup" or "colab-setup" in cell.get("metadata", {}).get("tags", [])


def assignment_of(stem: str) -> str:
    """The assignment a lesson or exercise notebook belongs to ("06_attention_exercises" -> "06_attention")."""
    sys.path.insert(0, str(REPO))  # course_lib.runner.notebook: the one place that knows the names
    try:
        from course_lib.runner.notebook import assignment_of as of
    finally:
        sys.path.pop(0)
    return of(stem)


def _address(nb: dict) -> str | None:
    """The repository address written into a notebook's Colab setup cell ('' when none is written)."""
    sys.path.insert(0, str(REPO))  # course_lib.colab: the one place that knows the cell's format
    try:
        from course_lib.colab import repository_of
    finally:
        sys.path.pop(0)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and _is_setup_cell(cell):
            return repository_of(_source(cell))
    return None


def github_repository(address: str) -> tuple[str, str] | None:
    """('https://github.com/OWNER/REPO', branch) for a GitHub address (pip's `URL@ref` names the
    branch or tag; without one, main), else None: Colab opens notebooks from GitHub only."""
    match = re.fullmatch(r"(?:git\+)?https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?(?:@([\w./-]+))?", address)
    if not match:
        return None
    owner, name, ref = match.groups()
    return f"https://github.com/{owner}/{name}", ref or "main"


def find_repository(build: Build) -> None:
    """The address `course colab --repository URL` wrote into the lessons' setup cells, if any."""
    addresses = {}
    for path in lessons(build.repo):
        address = _address(json.loads(path.read_text(encoding="utf-8")))
        if address:
            addresses[address] = path
    if not addresses:
        build.notes.append(
            "no repository address in the notebooks' setup cells (`course colab --repository URL` "
            "writes it): the 'Open in Colab' links lead to the home page's instructions for "
            "uploading a downloaded notebook to Colab"
        )
        return
    if len(addresses) > 1:
        raise SiteError(
            "the notebooks' setup cells name different repositories: "
            + ", ".join(f"{a} ({p.relative_to(build.repo)})" for a, p in addresses.items())
            + "; run `course colab --repository URL` to write one address into all of them"
        )
    address = next(iter(addresses))
    found = github_repository(address)
    if found is None:
        build.notes.append(
            f"the repository address {address!r} is not on GitHub, and Colab opens notebooks from "
            "GitHub only: the 'Open in Colab' links lead to the home page's instructions instead"
        )
        build.repository = address
        return
    build.repository, build.branch = found


# --- checks --------------------------------------------------------------------------------------------


def check_outputs(path: Path, nb: dict, rel: str) -> None:
    """A lesson must be stored with its outputs: its page shows them, nothing is run to make them.
    The Colab setup cell is stored unrun on purpose; cells tagged `gpu` may be stored unrun."""
    code = [
        (i, c)
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and not _is_setup_cell(c) and "gpu" not in c.get("metadata", {}).get("tags", [])
    ]
    unrun = [(i, c) for i, c in code if c.get("execution_count") is None and not c.get("outputs")]
    if code and unrun:
        i, first = unrun[0]
        line = next((line for line in _source(first).splitlines() if line.strip()), "")[:60]
        what = (
            f"none of its {len(code)} code cells has stored outputs"
            if len(unrun) == len(code)
            else f"{len(unrun)} of its {len(code)} code cells have no stored outputs"
        )
        raise SiteError(
            f"{rel}: {what} (first: cell {i + 1}, {line!r}), so its page would show code without "
            f"results. Run it and save it with its outputs: make run NB={rel}"
        )


# --- links and images ----------------------------------------------------------------------------------

# Markdown links and images, and HTML images, outside code (code spans and fenced blocks are cut out
# before matching and put back unchanged).
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(\s+\"[^\"]*\")?\s*\)")
HTML_IMG = re.compile(r"<img\b[^>]*\bsrc=[\"']([^\"']+)[\"']", re.I)
FENCE = re.compile(r"(^|\n)(```|~~~)[^\n]*\n.*?\n\2[^\n]*(?=\n|$)", re.S)
CODE_SPAN = re.compile(r"(`+)[^`\n]+?\1")


def _outside_code(text: str, change) -> str:
    """`change(text)` applied to a Markdown text outside its fenced code blocks and code spans (which
    are masked, so a link whose label is code is still seen)."""
    out, last = [], 0
    for match in FENCE.finditer(text):
        out.append(_outside_spans(text[last : match.start()], change))
        out.append(match.group(0))
        last = match.end()
    out.append(_outside_spans(text[last:], change))
    return "".join(out)


def _outside_spans(text: str, change) -> str:
    spans = []

    def mask(match: re.Match) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    changed = change(CODE_SPAN.sub(mask, text))
    return re.sub("\x00(\\d+)\x00", lambda m: spans[int(m.group(1))], changed)


def github_slug(title: str) -> str:
    from myst_parser.slugs import github_slugify

    return github_slugify(title)


def readme_sections(text: str) -> dict[str, str]:
    """The README's level-2 sections by GitHub slug: slug -> the section's text (heading included)."""
    sections, current, lines = {}, None, []
    for line in text.splitlines(keepends=True):
        match = re.match(r"## (.+)", line)
        if match:
            if current:
                sections[current] = "".join(lines)
            current, lines = github_slug(match.group(1).strip()), []
        if current:
            lines.append(line)
    if current:
        sections[current] = "".join(lines)
    return sections


def _headings(text: str) -> set[str]:
    """GitHub slugs of every heading of a Markdown file (links into the README by section)."""
    return {github_slug(m.group(1).strip()) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


class Linker:
    """Rewrites the links of one staged document. The staged tree mirrors the repository, so a link to
    another page of the site stays as written; a link to the README goes to the home page when the
    section it names is there; a link to a file of the repository that is not a page goes to that
    file in the repository (when its address is known); an image is copied along. A link to
    nothing is a problem."""

    def __init__(self, build: Build, pages: set[str], home_sections: set[str]):
        self.build, self.pages, self.home_sections = build, pages, home_sections
        self.readme_headings = _headings((build.repo / "README.md").read_text(encoding="utf-8"))

    def repository_link(self, rel: str, fragment: str = "") -> str | None:
        if self.build.repository and self.build.repository.startswith("https://github.com/"):
            kind = "tree" if (self.build.repo / rel).is_dir() else "blob"
            return f"{self.build.repository}/{kind}/{self.build.branch}/{rel}{fragment}"
        return None

    def target(self, origin: str, staged_as: str, target: str, image: bool, where: str) -> str | None:
        """The link to write for `target` in repository file `origin` (staged as `staged_as`), or None
        to keep the link text without a link. Problems are recorded on the build."""
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, data:
            return target
        path, hash_sign, fragment = target.partition("#")
        fragment = hash_sign + fragment
        if not path:  # within the page: Sphinx checks the heading exists
            if origin == "README.md" and fragment[1:] not in self.home_sections:
                if fragment[1:] not in self.readme_headings:
                    self.build.problems.append(f"{where}: a link to {target!r}: the README has no such section")
                    return target
                return self._outside("README.md", fragment, where, target)
            return target
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(origin), path))
        if rel.startswith("../") or not (self.build.repo / rel).exists():
            what = "an image" if image else "a link to"
            self.build.problems.append(f"{where}: {what} {target!r}: {rel} does not exist")
            return target
        if rel == "README.md":
            if fragment and fragment[1:] not in self.home_sections:
                if fragment[1:] not in self.readme_headings:
                    self.build.problems.append(f"{where}: a link to {target!r}: the README has no such section")
                    return target
                return self._outside(rel, fragment, where, target)
            rel = "index.md"
        elif rel in self.pages:
            pass
        elif (
            image
            or Path(rel).suffix.lower() in IMAGE_SUFFIXES
            or (rel.startswith("docs/") and (self.build.repo / rel).is_file())
        ):
            # Images, and files the guides hand out (nbgrader_config.py), travel with the page.
            _write(self.build.src / rel, (self.build.repo / rel).read_bytes())
        else:
            return self._outside(rel, fragment, where, target)
        return posixpath.relpath(rel, posixpath.dirname(staged_as) or ".") + fragment

    def _outside(self, rel: str, fragment: str, where: str, target: str) -> str | None:
        link = self.repository_link(rel, fragment)
        if link is None:
            self.build.notes.append(
                f"{where}: {target!r} is not part of the site and the repository's address is unknown: shown as text"
            )
        return link

    def rewrite(self, text: str, origin: str, staged_as: str, where: str) -> str:
        def link(match: re.Match) -> str:
            bang, label, target, title = match.groups()
            new = self.target(origin, staged_as, target, bool(bang), where)
            if new is None:
                return label
            return f"{bang}[{label}]({new}{title or ''})"

        def img(match: re.Match) -> str:
            new = self.target(origin, staged_as, match.group(1), True, where)
            return match.group(0).replace(match.group(1), new or match.group(1))

        return _outside_code(text, lambda piece: HTML_IMG.sub(img, LINK.sub(link, piece)))


# --- widgets -------------------------------------------------------------------------------------------


def _model_refs(value) -> list[str]:
    refs = value if isinstance(value, list) else [value]
    return [r[len("IPY_MODEL_") :] for r in refs if isinstance(r, str) and r.startswith("IPY_MODEL_")]


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _control_text(name: str, state: dict) -> str | None:
    """'merges = 675 (from 0 to 1351)' for a control, None for a container or an output."""
    label = html.escape(str(state.get("description") or name.replace("Model", "")))
    value = state.get("value")
    if "Slider" in name:
        low, high = state.get("min"), state.get("max")
        if name == "FloatLogSliderModel":  # min and max are exponents of the base
            base = state.get("base", 10.0)
            low, high = base**low, base**high
        shown = " to ".join(map(_number, value)) if isinstance(value, list) else _number(value)  # a range slider
        return f"{label} = {html.escape(shown)} (from {_number(low)} to {_number(high)})"
    if any(kind in name for kind in ("Dropdown", "Select", "ToggleButtons", "RadioButtons")):
        labels = state.get("_options_labels") or []
        index = state.get("index")
        chosen = labels[index] if isinstance(index, int) and index < len(labels) else value
        return f"{label} = {html.escape(str(chosen))}"
    if name in {"TextModel", "TextareaModel"}:
        return f"{label} = “{html.escape(str(value))}”"
    if name in {
        "CheckboxModel",
        "ToggleButtonModel",
        "IntTextModel",
        "FloatTextModel",
        "BoundedIntTextModel",
        "BoundedFloatTextModel",
    }:
        return f"{label} = {html.escape(_number(value))}"
    return None


def widget_html(model_id: str, state: dict) -> tuple[str, int] | None:
    """What a widget showed when its notebook was stored, as static HTML: its controls' values, then
    the figures and printouts of its Output widgets, then a note that it moves only in a running
    notebook. Returns (html, number of figures), or None when the state does not hold the widget."""
    if model_id not in state:
        return None
    controls, shown, figures, seen = [], [], 0, set()

    def walk(mid: str) -> None:
        nonlocal figures
        if mid in seen or mid not in state:
            return
        seen.add(mid)
        model = state[mid]
        name, st = model.get("model_name", ""), model.get("state", {})
        text = _control_text(name, st)
        if text:
            controls.append(text)
        if name == "OutputModel":
            for out in st.get("outputs", []):
                data = out.get("data", {})
                if "image/png" in data:
                    png = "".join(data["image/png"]) if isinstance(data["image/png"], list) else data["image/png"]
                    alt = html.escape(_source({"source": data.get("text/plain", "figure")}))
                    shown.append(f'<img src="data:image/png;base64,{png.strip()}" alt="{alt}">')
                    figures += 1
                elif out.get("output_type") == "stream" or "text/plain" in data:
                    text = _source({"source": out.get("text", data.get("text/plain", ""))})
                    shown.append(f"<pre>{html.escape(text.rstrip())}</pre>")
        for child in _model_refs(st.get("children", [])):
            walk(child)

    walk(model_id)
    sliders = sum("(from" in c for c in controls)
    moves = "the slider" if sliders == 1 else "the sliders" if sliders else "choose another value"
    moves = moves if not sliders else f"move {moves}"
    parts = ['<div class="course-widget">']
    if controls:
        parts.append('<p class="course-widget-controls">' + " · ".join(controls) + "</p>")
    parts += shown
    parts.append(
        f'<p class="course-widget-note">An interactive widget: this is what it shows at its default '
        f"value. Run the notebook to {moves}.</p>"
    )
    parts.append("</div>")
    return "\n".join(parts), figures


def replace_widgets(nb: dict, rel: str, build: Build) -> None:
    """Each widget view becomes static HTML of what the stored widget state shows; the widget state
    leaves the metadata (a page would otherwise load the widget manager from the network)."""
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for i, cell in enumerate(nb["cells"]):
        for k, out in enumerate(cell.get("outputs", [])):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if not view:
                continue
            found = widget_html(view.get("model_id", ""), state)
            if found is None or (found[1] == 0 and "<pre>" not in found[0]):
                build.problems.append(
                    f"{rel}, cell {i + 1}: a widget whose stored state holds no figure or printout (the page would "
                    f"show an empty box). Run the notebook in JupyterLab or with make run NB={rel}, and save it "
                    "with its widget state"
                )
                continue
            plain = "Interactive widget: run the notebook to move it."
            cell["outputs"][k] = {
                "output_type": "display_data",
                "metadata": {},
                "data": {"text/html": found[0], "text/plain": plain},
            }
    nb.get("metadata", {}).pop("widgets", None)


# --- staging -------------------------------------------------------------------------------------------


def _write(path: Path, data: bytes | str) -> None:
    """Write only what changed (unchanged files keep their times)."""
    data = data.encode("utf-8") if isinstance(data, str) else data
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def stage_notebook(build: Build, linker: Linker, path: Path, lesson: bool) -> dict:
    rel = path.relative_to(build.repo).as_posix()
    nb = json.loads(path.read_text(encoding="utf-8"))
    if lesson:
        check_outputs(path, nb, rel)
        replace_widgets(nb, rel, build)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and _is_setup_cell(cell):
            # Installs the course on Colab: the page's "Open in Colab" link and the home page say so.
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags.append("remove-cell")
        if cell["cell_type"] == "markdown":
            new = linker.rewrite(_source(cell), rel, rel, f"{rel}, cell {i + 1}")
            if new != _source(cell):
                cell["source"] = new
    _write(build.src / rel, json.dumps(nb, ensure_ascii=False, indent=1))
    _write(build.extra / rel, path.read_bytes())  # "download the notebook": the notebook as it is
    colab = None
    if build.repository and build.repository.startswith("https://github.com/"):
        colab = f"{COLAB}/{build.repository[len('https://github.com/') :]}/blob/{build.branch}/{rel}"
    return {"colab": colab, "download": path.name}


def home_page(build: Build, lesson_paths: list[Path], exercise_paths: list[Path], guides: list[str]) -> str:
    """index.md: the README's title and introduction, its course map, how to read and run the
    lessons, and the table of contents (the sidebar and the previous/next links follow it)."""
    readme = (build.repo / "README.md").read_text(encoding="utf-8")
    sections = readme_sections(readme)
    intro = readme.split("\n## ", 1)[0].rstrip() + "\n"
    if "course-map" not in sections:
        raise SiteError("README.md has no '## Course map' section for the home page")
    if build.repository and build.repository.startswith("https://github.com/"):
        where = (
            f"Colab opens it from the course's repository, [{build.repository}]({build.repository}); its "
            "first code cell installs the course's helper library there."
        )
    else:
        where = (
            "Download the notebook (the link beside *Open in Colab*), then in Colab choose *File → Upload "
            "notebook*. Its first code cell installs the course's helper library and asks for the "
            "course's git address."
        )
    reading = f"""
## Reading the course here

Every lesson is shown with the figures and results it printed when it was last run, and every
exercise set as you get it (without the answers). To run the lessons, move the sliders and check
your exercises, get the course and run `make lab` (see the repository's README), or open a notebook
in Google Colab.

(open-a-notebook-in-colab)=
### Open a notebook in Colab

Each lesson and exercise page has an *Open in Colab* link. {where} Run the cells from the top
(*Runtime → Run all*).
"""
    toc = []
    for caption, paths in (("Lessons", lesson_paths), ("Exercise sets", exercise_paths)):
        entries = "\n".join(p.relative_to(build.repo).with_suffix("").as_posix() for p in paths)
        toc.append(f"```{{toctree}}\n:caption: {caption}\n:hidden:\n\n{entries}\n```\n")
    toc.append("```{toctree}\n:caption: Teaching\n:hidden:\n\n" + "\n".join(g[:-3] for g in guides) + "\n```\n")
    return intro + "\n" + sections["course-map"].rstrip() + "\n" + reading + "\n" + "\n".join(toc)


def stage(build: Build) -> dict:
    """Write the Sphinx source folder and the files copied as they are; return the pages' links."""
    if not (build.repo / "README.md").is_file():
        raise SiteError(f"{build.repo}/README.md does not exist")
    lesson_paths, exercise_paths = lessons(build.repo), exercise_sets(build.repo)
    if not lesson_paths:
        raise SiteError(f"no lessons in {build.repo / 'notebooks'} (files named {LESSON})")
    guides = [g for g in GUIDES if (build.repo / g).is_file()]
    missing = sorted(set(GUIDES) - set(guides))
    if missing:
        raise SiteError(f"the guides {', '.join(missing)} do not exist")
    find_repository(build)
    # What an earlier build staged: a lesson renamed or removed since must not stay on the site.
    before = {p for d in (build.src, build.extra) if d.exists() for p in d.rglob("*") if p.is_file()}

    pages = {p.relative_to(build.repo).as_posix() for p in lesson_paths + exercise_paths} | set(guides)
    home = home_page(build, lesson_paths, exercise_paths, guides)
    home_sections = {"course-map", "reading-the-course-here", COLAB_HELP}
    linker = Linker(build, pages, home_sections)
    _write(build.src / "index.md", linker.rewrite(home, "README.md", "index.md", "README.md"))
    for guide in guides:
        text = (build.repo / guide).read_text(encoding="utf-8")
        _write(build.src / guide, linker.rewrite(text, guide, guide, guide))

    links = {}
    # A lesson and its exercise set share the assignment's name: 06_attention, 06_attention_exercises.
    exercises_by_name = {assignment_of(p.stem): p for p in exercise_paths}
    lessons_by_name = {p.stem: p for p in lesson_paths}
    for path in lesson_paths + exercise_paths:
        lesson = path.parent.name == "notebooks"
        doc = path.relative_to(build.repo).with_suffix("").as_posix()
        entry = stage_notebook(build, linker, path, lesson)
        partner = (exercises_by_name if lesson else lessons_by_name).get(assignment_of(path.stem))
        if partner is not None:
            entry["partner"] = partner.relative_to(build.repo).with_suffix("").as_posix()
            entry["partner_label"] = "The exercises for this lesson" if lesson else "The lesson"
        entry["colab_help"] = f"index.html#{COLAB_HELP}"
        links[doc] = entry
    _write(build.src / "_course_pages.json", json.dumps(links, indent=1, sort_keys=True))

    written = {build.src / "index.md", build.src / "_course_pages.json"}
    written |= {build.src / g for g in guides}
    for path in lesson_paths + exercise_paths:
        rel = path.relative_to(build.repo)
        written |= {build.src / rel, build.extra / rel}
    for stale in before - written:
        if not _copied_along(stale, build):
            stale.unlink()
    if build.problems:
        raise SiteError("\n".join(build.problems))
    return links


def _copied_along(path: Path, build: Build) -> bool:
    """Images and files that a page links to (copied by the Linker) stay while their source exists."""
    try:
        rel = path.relative_to(build.src)
    except ValueError:
        return False
    return (build.repo / rel).is_file() and path.suffix != ".ipynb"


# --- MathJax -------------------------------------------------------------------------------------------

# What the pages load of MathJax 3 (the django-static-mathjax package ships it): the combined TeX-to-HTML
# component with every TeX extension, and its fonts. Its menu is off (conf.py), so nothing else is loaded.
MATHJAX_FILES = ["tex-chtml-full.js", "output/chtml/fonts/woff-v2"]


def stage_mathjax(build: Build) -> None:
    try:
        import mathjax
    except ImportError:
        raise SiteError("MathJax is not installed: make site installs it (pip install -e '.[site]')") from None
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = build.work / "mathjax-static" / "mathjax"
    for name in MATHJAX_FILES:
        source = es5 / name
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        if not files:
            raise SiteError(f"MathJax's {name} is missing from {es5}")
        for path in files:
            _write(target / path.relative_to(es5), path.read_bytes())


# --- Sphinx --------------------------------------------------------------------------------------------


def inputs_digest(repo: Path) -> str:
    """What the site is made of: the pages' sources, the build's own files, the pinned versions."""
    digest = hashlib.sha256()
    files = [repo / "README.md", repo / "constraints.txt", *lessons(repo), *exercise_sets(repo)]
    files += [repo / g for g in GUIDES] + sorted((repo / "docs").rglob("*"))
    files += sorted(p for p in (repo / "notebooks").rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)  # diagrams
    for path in files:
        if path.is_file() and "_build" not in path.relative_to(repo).parts:
            digest.update(path.relative_to(repo).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def sphinx(build: Build) -> None:
    if (build.out / ".buildinfo").is_file():  # a site built before: pages of removed lessons must go too
        shutil.rmtree(build.out)
    warnings = build.work / "warnings.txt"
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-q",
        "-E",
        "-W",
        "--keep-going",
        "-w",
        str(warnings),
        "-c",
        str(HERE),
        "-d",
        str(build.work / "doctrees"),
        str(build.src),
        str(build.out),
    ]
    env = dict(
        os.environ,
        COURSE_SITE_EXTRA=str(build.extra),
        COURSE_SITE_REPOSITORY=build.repository or "",
        COURSE_SITE_BRANCH=build.branch,
        COURSE_SITE_WORK=str(build.work),
    )
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        text = warnings.read_text(errors="replace") if warnings.is_file() else ""
        text = text or result.stderr or result.stdout
        # Name the repository's files, not the staged copies.
        text = text.replace(str(build.src) + os.sep, "")
        # MyST-NB numbers a notebook's lines (cell + 1) * 10000 + ..., cells counted from 0: name the cell
        # as JupyterLab's status bar counts it, from 1.
        text = re.sub(r"(\S+\.ipynb):(\d+):", lambda m: f"{m.group(1)}, cell {int(m.group(2)) // 10000}:", text)
        raise SiteError(
            "Sphinx found problems (a link to a page or heading that does not exist, a missing "
            f"image, ...):\n{text.strip()}"
        )


def site_size(out: Path) -> tuple[int, int]:
    files = [p for p in out.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def build_site(repo: Path = REPO, out: Path | None = None, reuse: bool = False) -> Path:
    out = (out or repo / "docs" / "site" / "_build" / "html").resolve()
    work = out.parent
    stamp = work / "inputs.sha256"
    digest = inputs_digest(repo)
    if reuse and stamp.is_file() and stamp.read_text() == digest and (out / "index.html").is_file():
        print(f"the site in {out} is up to date with its sources")
        return out
    stamp.unlink(missing_ok=True)
    build = Build(repo=repo.resolve(), out=out, work=work)
    start = time.perf_counter()
    links = stage(build)
    stage_mathjax(build)
    for note in build.notes:
        print(f"note: {note}")
    sphinx(build)
    stamp.write_text(digest)
    files, size = site_size(out)
    n_lessons = sum(1 for doc in links if doc.startswith("notebooks/"))
    print(
        f"site: {n_lessons} lessons, {len(links) - n_lessons} exercise sets, {len(GUIDES)} guides; "
        f"{files} files, {size / 1e6:.1f} MB in {out} ({time.perf_counter() - start:.0f} s)"
    )
    return out


def site_requirements(repo: Path) -> list[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pip's own copy of tomli
        from pip._vendor import tomli as tomllib
    with open(repo / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]["site"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the course's folder (default: this repository)")
    parser.add_argument("--out", type=Path, default=None, help="where the site goes (default docs/site/_build/html)")
    parser.add_argument("--reuse", action="store_true", help="keep a site already built from the same sources")
    parser.add_argument(
        "--requirements",
        action="store_true",
        help="print the packages the build needs (pyproject.toml's `site` extra) and stop",
    )
    args = parser.parse_args(argv)
    if args.requirements:
        print("\n".join(site_requirements(args.repo)))
        return 0
    try:
        build_site(args.repo, args.out, args.reuse)
    except SiteError as err:
        print(f"make site: the site was not built:\n{err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
