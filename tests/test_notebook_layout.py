"""What a learner sees fits the screen that `make lab` opens.

`course lab` opens JupyterLab in a 1280-pixel-wide window with the file browser open. There, a
notebook's output column is 848 px wide and a code cell shows about 107 characters of a line. Things
wider than that are either scaled down (a figure) or cut off or wrapped mid-word (code and printed
text). This file keeps every lesson and exercise set readable at that layout:

- a stored figure is at most as wide as the column, or else its smallest text is still at least
  8 px high once scaled down to fit. The font sizes come from the cell's own `fontsize=`/`labelsize=`
  arguments and from the `course_lib.viz` functions the cell calls (read from viz.py's source);
- code lines stay within 100 characters, printed lines within 100, and the lines of a Markdown code
  block (an ASCII diagram, say) within 90, so that they neither run off the edge nor wrap;
- every "section N" a lesson's text mentions is a link to the heading numbered N, so a wrong number
  fails here instead of sending a learner to the wrong place.
"""

from __future__ import annotations

import ast
import base64
import json
import re
import struct
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "notebooks").glob("*.ipynb"))
NOTEBOOKS = LESSONS + sorted((REPO / "solutions").glob("*.ipynb"))

COLUMN_PX = 848  # the output column at 1280 px with the file browser open (measured in Chromium)
DPI = 100  # matplotlib's inline backend draws at figure.dpi = 100: figsize 8.48 in fills the column
MIN_TEXT_PX = 8  # smaller than this is unreadable on a laptop screen
DEFAULT_FONT_PT = 10  # matplotlib's font.size; titles, ticks and legends default to it or larger
NAMED_SIZES = {"xx-small": 5.79, "x-small": 6.94, "small": 8.33, "medium": 10.0}
CODE_CHARS = 100  # JupyterLab shows about 107 characters of a code line at that layout
PRINTED_CHARS = 100
DIAGRAM_CHARS = 90  # a Markdown code block wraps earlier (the prose column has its own margins)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


# --- figures ---------------------------------------------------------------------------------------------


def _font_size(node: ast.expr) -> float | None:
    """A font size given as a number (9, 7.5) or a name ("small"); None for anything computed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return NAMED_SIZES.get(node.value)
    return None


def _sizes_in(tree: ast.AST) -> list[float]:
    sizes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("fontsize", "labelsize", "size", "title_fontsize"):
            size = _font_size(node.value)
            # `size=` is also a tensor's or a sample's size: only small numbers and names are fonts
            if size is not None and (node.arg != "size" or size <= 30):
                sizes.append(size)
    return sizes


def _viz_font_sizes() -> dict[str, float]:
    """For each function of course_lib/viz.py: the smallest font size its body sets (or its helpers do)."""
    tree = ast.parse((REPO / "course_lib" / "viz.py").read_text(encoding="utf-8"))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    own = {name: min(_sizes_in(fn), default=DEFAULT_FONT_PT) for name, fn in functions.items()}
    calls = {
        name: {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        & functions.keys()
        for name, fn in functions.items()
    }
    smallest = dict(own)
    for _ in range(len(functions)):  # follow helpers of helpers
        for name in functions:
            smallest[name] = min([smallest[name]] + [smallest[c] for c in calls[name]])
    return smallest


def _smallest_font(code: str, viz_sizes: dict[str, float]) -> float:
    try:
        tree = ast.parse(code)
    except SyntaxError:  # IPython magics: measure what parses
        tree = ast.parse("\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))))
    sizes = _sizes_in(tree) + [DEFAULT_FONT_PT]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in viz_sizes:
                sizes.append(viz_sizes[name])
    return min(sizes)


def _png_size(data: str) -> tuple[int, int]:
    raw = base64.b64decode(data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", raw[16:24])


def figure_problems(path: Path, viz_sizes: dict[str, float]) -> list[str]:
    problems = []
    for index, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code":
            continue
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if not png:
                continue
            width, _ = _png_size(png)
            scale = min(1.0, COLUMN_PX / width)
            font_pt = _smallest_font(_source(cell), viz_sizes)
            text_px = font_pt * DPI / 72 * scale
            if text_px < MIN_TEXT_PX:
                first = _source(cell).splitlines()[0] if _source(cell) else ""
                problems.append(
                    f"cell {index} ({first[:50]!r}): a {width}px figure is shown at {scale:.0%}, so its "
                    f"{font_pt:g}pt text is {text_px:.1f}px high (needs >= {MIN_TEXT_PX}px): make the figure "
                    f"narrower (<= {COLUMN_PX / DPI:.2f} in wide) or its smallest text larger"
                )
    return problems


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_figures_are_readable_in_the_notebook_column(path):
    problems = figure_problems(path, _viz_font_sizes())
    assert not problems, f"{_name(path)}:\n" + "\n".join(problems)


def test_the_figure_rule_catches_a_wide_figure_with_small_legends():
    """The post-norm figure the layout review found: figsize (14, 3.6), legend(fontsize=8)."""
    cell = {
        "cell_type": "code",
        "source": "fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))\nax.legend(fontsize=8)",
        "outputs": [{"data": {"image/png": _fake_png(1390, 350)}}],
    }
    narrow = dict(cell, outputs=[{"data": {"image/png": _fake_png(840, 350)}}])
    assert _smallest_font(cell["source"], {}) == 8
    assert figure_problems(_write_notebook([cell]), {}), "a 1390px figure with 8pt legends must be flagged"
    assert not figure_problems(_write_notebook([narrow]), {}), "an 840px figure is shown at full size"
    assert _smallest_font("viz.plot_heads(w)", {"plot_heads": 6.0}) == 6.0, "viz functions' own sizes count"


def _fake_png(width: int, height: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return base64.b64encode(header + b"\x08\x06\x00\x00\x00").decode()


def _write_notebook(cells: list[dict]) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="layout-")) / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return path


# --- lines of code, printed text and diagrams ----------------------------------------------------------


def _too_long(text: str, limit: int) -> list[str]:
    return [line for line in text.splitlines() if len(line) > limit]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_code_lines_fit_the_cell(path):
    problems = [
        f"cell {i}: {len(line)} characters: {line[:60]}..."
        for i, cell in enumerate(_cells(path))
        if cell["cell_type"] == "code"
        for line in _too_long(_source(cell), CODE_CHARS)
    ]
    assert not problems, f"{_name(path)}: code lines over {CODE_CHARS} characters:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_printed_lines_do_not_wrap(path):
    problems = []
    for i, cell in enumerate(_cells(path)):
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain") or ""
            text = "".join(text) if isinstance(text, list) else text
            problems += [f"cell {i}: {len(line)} characters: {line[:60]}..." for line in _too_long(text, PRINTED_CHARS)]
    assert not problems, f"{_name(path)}: printed lines over {PRINTED_CHARS} characters:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_diagrams_in_markdown_do_not_wrap(path):
    problems = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        in_block = False
        for line in _source(cell).splitlines():
            if line.lstrip().startswith("```"):
                in_block = not in_block
            elif in_block and len(line) > DIAGRAM_CHARS:
                problems.append(f"cell {i}: {len(line)} characters: {line[:60]}...")
    assert not problems, f"{_name(path)}: code-block lines over {DIAGRAM_CHARS} characters:\n" + "\n".join(problems)


# --- "section N" references ------------------------------------------------------------------------------

HEADING = re.compile(r"^#{1,6}\s+(.*\S)\s*$")
NUMBERED = re.compile(r"^(\d+)\.\s")
MENTION = re.compile(r"\b[Ss]ections?\s+(\d+)((?:\s*(?:,|and|or)\s*\d+)*)")
LINK = re.compile(r"\[([^\]]*)\]\(#((?:[^()\s]|\([^()\s]*\))+)\)")  # an anchor may hold (balanced) brackets


def heading_id(text: str) -> str:
    """The id JupyterLab gives a heading: its text content with spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text
    text = re.sub(r"[`*]|(?<![\w$])_|_(?![\w$])", "", text)  # code and emphasis marks are not text; W_O's _ is
    return text.replace(" ", "-")


def section_problems(cells: list[dict]) -> list[str]:
    headings: dict[str, str] = {}  # number -> id
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in _source(cell).splitlines():
                match = HEADING.match(line)
                if match and NUMBERED.match(match.group(1)):
                    headings[NUMBERED.match(match.group(1)).group(1)] = heading_id(match.group(1))
    problems = []
    for index, cell in enumerate(cells):
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            links = [(m.start(), m.end(), m.group(1), m.group(2)) for m in LINK.finditer(text)]
            for _start, _, label, anchor in links:
                numbers = re.findall(r"\d+", label) if MENTION.search(label) else []
                for number in numbers:
                    if headings.get(number) != anchor and not any(headings.get(n) == anchor for n in numbers):
                        problems.append(
                            f"cell {index}: [{label}](#{anchor}) does not lead to heading {number} "
                            f"(#{headings.get(number, '... none with that number')})"
                        )
            for mention in MENTION.finditer(text):
                inside = any(start <= mention.start() < end for start, end, _, _ in links)
                if not inside:
                    problems.append(
                        f"cell {index}: {mention.group(0)!r} is not a link to its heading; write "
                        f"[{mention.group(0)}](#{headings.get(mention.group(1), '<heading id>')})"
                    )
        else:
            for mention in MENTION.finditer(text):
                for number in re.findall(r"\d+", mention.group(0)):
                    if number not in headings:
                        problems.append(f"cell {index}: {mention.group(0)!r} names no heading numbered {number}")
    return problems


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_section_reference_leads_to_that_heading(path):
    problems = section_problems(_cells(path))
    assert not problems, f"{_name(path)}:\n" + "\n".join(problems)


def test_the_section_rule_catches_a_wrong_number_and_an_unlinked_mention():
    cells = [
        {"cell_type": "markdown", "source": "## 7. Temperature\n"},
        {"cell_type": "markdown", "source": "## 8. A KV cache\n"},
        {"cell_type": "markdown", "source": "the [KV cache of section 7](#8.-A-KV-cache)"},
        {"cell_type": "markdown", "source": "as section 8 shows"},
        {
            "cell_type": "markdown",
            "source": "the [cache (section 8)](#8.-A-KV-cache) and [sections 7 and 8](#7.-Temperature)",
        },
    ]
    problems = section_problems(cells)
    assert len(problems) == 2 and "cell 2" in problems[0] and "cell 3" in problems[1], problems
    assert heading_id("8. A `KV` cache") == "8.-A-KV-cache"
    assert heading_id("7. Combining the heads: $W_O$ and _why_") == "7.-Combining-the-heads:-$W_O$-and-why"
    assert (
        section_problems(
            [
                {"cell_type": "markdown", "source": "## 9. Rotary positions (RoPE)\n"},
                {"cell_type": "markdown", "source": "[section 9](#9.-Rotary-positions-(RoPE))"},
            ]
        )
        == []
    )
