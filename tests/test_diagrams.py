"""The architecture diagrams (notebooks/diagrams/*.svg, written by notebooks/diagrams/draw.py) are
what the script draws, readable by everyone and shown by the lessons.

Each SVG must be well-formed XML with a viewBox and no fixed size wider than the site's 688-pixel
content column; carry a <title> and a <desc> for screen readers; use only the Okabe-Ito palette
(and white); set its text as SVG text in the generic sans-serif font, at 12 px or more; use the
code's own names where it names code (each is looked up in course_lib's source); and be shown by a
lesson as a Markdown image with alternative text. The browser tests (tests/browser/) check that
the images load in JupyterLab and on the site.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "notebooks" / "diagrams"
SVGS = sorted(FOLDER.glob("*.svg"))
NS = "{http://www.w3.org/2000/svg}"
SITE_COLUMN_PX = 688  # sphinx-book-theme's content column at 1280 x 800 (tests/browser/test_site.py's window)
MIN_FONT_PX = 12

OKABE_ITO = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
ALLOWED_PAINT = OKABE_ITO | {"#FFFFFF", "NONE"}
PAINT_ATTRIBUTES = ("fill", "stroke", "stop-color", "color", "flood-color", "lighting-color")

# A diagram drawn before its lesson shows it may wait here (and once one shows it, it must leave this set).
AWAITING_A_LESSON: set[str] = set()
# Names a lesson's rewrite adds to course_lib that a diagram may use before they are in the source.
COMING_NAMES: set[str] = set()

MARKDOWN_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?[^)]*\)")


@cache
def draw_module():
    spec = importlib.util.spec_from_file_location("course_diagrams", FOLDER / "draw.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def lesson_images() -> dict[str, list[tuple[str, str]]]:
    """For each lesson: the (alt text, path) of every image its Markdown cells show."""
    found = {}
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found[path.name] = [
            (alt, target)
            for cell in cells
            if cell["cell_type"] == "markdown"
            for alt, target in MARKDOWN_IMAGE.findall("".join(cell["source"]))
        ]
    return found


@cache
def library_words() -> frozenset[str]:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "course_lib").rglob("*.py")))
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def test_the_files_are_what_draw_py_writes():
    drawn = draw_module().render_all()
    on_disk = {p.name for p in SVGS}
    assert on_disk == set(drawn), (
        f"notebooks/diagrams/ holds {sorted(on_disk)}, draw.py writes {sorted(drawn)}: "
        "run python notebooks/diagrams/draw.py (and delete what it no longer draws)"
    )
    stale = [name for name, text in drawn.items() if (FOLDER / name).read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} differ from what draw.py draws: run python notebooks/diagrams/draw.py"


def test_there_is_a_diagram_for_every_architecture_lesson():
    names = {p.name for p in SVGS}
    for prefix, at_least in (("09_", 1), ("10_", 1), ("11_", 1), ("12_", 3)):
        count = sum(name.startswith(prefix) for name in names)
        assert count >= at_least, f"lesson {prefix[:2]} has {count} diagram(s), expected at least {at_least}"


def _parse(path: Path) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as err:
        pytest.fail(f"{path.name} is not well-formed XML: {err}")


@pytest.mark.parametrize("path", SVGS, ids=lambda p: p.stem)
def test_svg_has_a_viewbox_and_fits_the_site_column(path):
    root = _parse(path)
    assert root.tag == f"{NS}svg", f"{path.name}: the root element is {root.tag}, expected an SVG <svg>"
    box = root.get("viewBox", "").replace(",", " ").split()
    assert len(box) == 4, f"{path.name}: viewBox is {root.get('viewBox')!r}, expected four numbers"
    _, _, vw, vh = (float(v) for v in box)
    for name, expected in (("width", vw), ("height", vh)):
        value = root.get(name)
        if value is None:
            continue
        assert re.fullmatch(r"\d+(\.\d+)?(px)?", value), (
            f"{path.name}: {name}={value!r}; expected pixels (a percentage or another unit does not scale with "
            "the column)"
        )
        assert float(value.removesuffix("px")) == expected, (
            f"{path.name}: {name}={value} but the viewBox says {expected:g}: the picture would be stretched"
        )
    width = float(root.get("width", "0").removesuffix("px"))
    assert width <= SITE_COLUMN_PX, (
        f"{path.name} is {width:g} px wide, more than the site's {SITE_COLUMN_PX} px column: it would be shrunk"
    )


@pytest.mark.parametrize("path", SVGS, ids=lambda p: p.stem)
def test_svg_has_a_title_and_a_description_for_screen_readers(path):
    root = _parse(path)
    title, desc = root.find(f"{NS}title"), root.find(f"{NS}desc")
    assert title is not None and (title.text or "").strip(), f"{path.name}: no <title> (a screen reader's name for it)"
    assert desc is not None and len((desc.text or "").strip()) >= 100, (
        f"{path.name}: the <desc> is {len((desc.text or '').strip()) if desc is not None else 0} characters; "
        "say in words what the picture shows (100 characters at least)"
    )
    labelled = root.get("aria-labelledby", "").split()
    ids = {e.get("id") for e in (title, desc)}
    assert root.get("role") == "img" and set(labelled) == ids, (
        f"{path.name}: role={root.get('role')!r}, aria-labelledby={labelled}; expected role='img' and the ids of "
        f"<title> and <desc>, {sorted(ids, key=str)}"
    )


def paint_problems(root: ET.Element) -> list[str]:
    """Every colour in the picture that is not Okabe-Ito's (or white, none, or a pattern)."""
    problems = []
    for element in root.iter():
        tag = element.tag.removeprefix(NS)
        if tag in ("style", "image", "foreignObject"):
            problems.append(f"a <{tag}> element (colours and text must be plain SVG attributes)")
        if element.get("style"):
            problems.append(f"<{tag} style={element.get('style')!r}> (use attributes)")
        for name in PAINT_ATTRIBUTES:
            value = element.get(name)
            if value is None or value.startswith("url(#"):
                continue
            if value.upper() not in ALLOWED_PAINT:
                problems.append(f"<{tag} {name}={value!r}>")
    return problems


@pytest.mark.parametrize("path", SVGS, ids=lambda p: p.stem)
def test_svg_uses_only_the_okabe_ito_palette(path):
    problems = paint_problems(_parse(path))
    assert not problems, (
        f"{path.name} uses colours outside the Okabe-Ito palette {sorted(OKABE_ITO)} (and white):\n"
        + "\n".join(problems[:10])
    )


def test_the_palette_rule_catches_another_colour():
    root = ET.fromstring(
        '<svg xmlns="http://www.w3.org/2000/svg"><rect fill="#ff0000"/><line stroke="#e69f00"/>'
        '<rect fill="url(#hatch)"/><text style="fill: red">x</text></svg>'
    )
    problems = paint_problems(root)
    assert len(problems) == 2 and "#ff0000" in problems[0] and "style" in problems[1], problems


@pytest.mark.parametrize("path", SVGS, ids=lambda p: p.stem)
def test_svg_text_is_sans_serif_svg_text_at_12_px_or_more(path):
    root = _parse(path)
    assert root.get("font-family") == "sans-serif", (
        f"{path.name}: font-family={root.get('font-family')!r} on <svg>, expected the generic 'sans-serif'"
    )
    others = {e.get("font-family") for e in root.iter() if e is not root and e.get("font-family")}
    assert not others, f"{path.name}: other fonts {others}: use the generic sans-serif everywhere"
    texts = list(root.iter(f"{NS}text"))
    assert len(texts) >= 10, f"{path.name} has {len(texts)} <text> elements: labels must be SVG text, not outlines"
    small = [(t.text, t.get("font-size")) for t in texts if float(t.get("font-size", "16")) < MIN_FONT_PX]
    assert not small, f"{path.name}: text smaller than {MIN_FONT_PX} px: {small[:5]}"


def code_names(root: ET.Element) -> set[str]:
    """The identifiers in the picture's text marked as code: a <text> or <tspan> with class="code"."""
    return {
        word
        for t in root.iter()
        if t.tag in (f"{NS}text", f"{NS}tspan") and "code" in (t.get("class") or "").split()
        for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "".join(t.itertext()))
    }


@pytest.mark.parametrize("path", SVGS, ids=lambda p: p.stem)
def test_svg_names_code_by_the_code_own_names(path):
    names = code_names(_parse(path))
    assert len(names) >= 5, f"{path.name}: only {sorted(names)} marked as code; label modules by their names"
    unknown = sorted(names - library_words() - COMING_NAMES)
    assert not unknown, (
        f"{path.name} labels {unknown} as code, but course_lib's source has no such name: "
        "use the code's names (or fix the label in notebooks/diagrams/draw.py)"
    )


def test_the_code_name_rule_catches_a_renamed_module():
    root = ET.fromstring(
        '<svg xmlns="http://www.w3.org/2000/svg"><text class="code">ln_1: LayerNorm</text>'
        '<text>prose is not checked, <tspan class="code">tok_embedding</tspan> is</text></svg>'
    )
    names = code_names(root)
    assert names == {"ln_1", "LayerNorm", "tok_embedding"}, names
    assert sorted(names - library_words()) == ["ln_1", "tok_embedding"], (
        "GPT's modules are ln_f and tok_emb: the rule must catch other names"
    )


@pytest.mark.parametrize("path", SVGS, ids=lambda p: p.stem)
def test_svg_is_shown_by_a_lesson(path):
    shown_by = sorted(
        nb for nb, images in lesson_images().items() if any(t == f"diagrams/{path.name}" for _, t in images)
    )
    if path.name in AWAITING_A_LESSON:
        assert not shown_by, (
            f"{path.name} is shown by {shown_by}: remove it from AWAITING_A_LESSON in tests/test_diagrams.py"
        )
        return
    assert shown_by, (
        f"no lesson shows {path.name}: add ![what it shows](diagrams/{path.name}) to a Markdown cell of the "
        "lesson it belongs to"
    )
    lesson = path.name[:3]
    assert any(nb.startswith(lesson) for nb in shown_by), f"{path.name} is shown by {shown_by}, not by lesson {lesson}"


@pytest.mark.parametrize("notebook", sorted(lesson_images()), ids=lambda n: n.removesuffix(".ipynb"))
def test_every_image_of_a_lesson_exists_and_has_alternative_text(notebook):
    problems = []
    for alt, target in lesson_images()[notebook]:
        if re.match(r"[a-z]+:", target):
            problems.append(f"{target}: an image from elsewhere (the site and the tests work offline)")
        elif not (REPO / "notebooks" / target).is_file():
            problems.append(f"{target} does not exist (relative to notebooks/)")
        if len(" ".join(alt.split())) < 40:
            problems.append(f"{target}: its alternative text {alt!r} is too short to stand in for the picture")
    assert not problems, f"notebooks/{notebook}:\n" + "\n".join(problems)


def test_lessons_09_to_11_show_their_architecture():
    images = lesson_images()
    for lesson in ("09_", "10_", "11_"):
        notebook = next(nb for nb in images if nb.startswith(lesson))
        diagrams = [t for _, t in images[notebook] if t.startswith("diagrams/")]
        assert diagrams, f"notebooks/{notebook} shows no diagram from notebooks/diagrams/"
