"""The glossary (docs/glossary.md): at least 40 of the course's terms in alphabetical order, each
defined in one line, and each linked to the heading of the lesson that teaches it. A link names the
notebook and the heading's id as JupyterLab (and the course's website) make it, so a heading that is
renamed or renumbered fails here instead of leaving a learner at the top of the wrong page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_notebook_layout import HEADING, heading_id

REPO = Path(__file__).resolve().parents[1]
GLOSSARY = REPO / "docs" / "glossary.md"
ENTRY = re.compile(r"^- \*\*(?P<term>[^*]+)\*\*: (?P<definition>.+?) \((?P<links>(?:\[[^\]]+\]\([^)\s]+\)(?:, )?)+)\)$")
LINK = re.compile(r"\[(?P<label>[^\]]+)\]\((?P<target>[^)#\s]+)#(?P<anchor>[^)\s]+)\)")
LESSON_LABEL = re.compile(r"^lesson (?P<number>\d\d)(?:, (?:section (?P<section>\d+)|[^,]+))?$")
MIN_TERMS = 40
MAX_DEFINITION = 200  # characters: one line of prose, not a paragraph


def heading_ids(notebook: Path) -> dict[str, str]:
    """Every heading of the notebook's Markdown cells: its id (JupyterLab's) -> its text."""
    ids = {}
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        in_code = False
        for line in source.splitlines():
            if line.lstrip().startswith("```"):
                in_code = not in_code
            match = None if in_code else HEADING.match(line)
            if match:
                ids[heading_id(match.group(1))] = match.group(1)
    return ids


def entries(text: str) -> list[re.Match | str]:
    """The glossary's entries: a match for each well-formed one, the line itself for any other."""
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    return [ENTRY.match(line) or line for line in lines]


def link_problems(label: str, target: str, anchor: str, base: Path = GLOSSARY.parent) -> list[str]:
    """What is wrong with one link of an entry: a missing notebook, a heading that is not there, a
    label whose lesson or section number is not the heading's."""
    notebook = (base / target).resolve()
    if not notebook.is_file() or notebook.parent.name != "notebooks" or notebook.suffix != ".ipynb":
        return [f"[{label}]({target}#{anchor}): {target} is not a lesson in notebooks/"]
    ids = heading_ids(notebook)
    if anchor not in ids:
        near = [i for i in ids if i.split("-")[0] == anchor.split("-")[0]][:3]
        return [f"[{label}]({target}#{anchor}): {notebook.name} has no heading with that id (nearby: {near})"]
    problems = []
    match = LESSON_LABEL.match(label)
    if not match:
        problems.append(f"[{label}]: a label reads 'lesson NN', 'lesson NN, section N' or 'lesson NN, <heading>'")
    else:
        if not notebook.name.startswith(match["number"] + "_"):
            problems.append(f"[{label}] leads to {notebook.name}, another lesson")
        if match["section"] and not ids[anchor].startswith(f"{match['section']}. "):
            problems.append(f"[{label}] leads to the heading {ids[anchor]!r}, not to section {match['section']}")
    return problems


TEXT = GLOSSARY.read_text(encoding="utf-8")
ENTRIES = entries(TEXT)


def test_the_glossary_has_enough_terms_in_order_each_in_one_line():
    malformed = [e for e in ENTRIES if isinstance(e, str)]
    assert not malformed, "entries not of the form '- **Term**: definition. ([lesson NN, ...](link))':\n" + "\n".join(
        malformed
    )
    terms = [e["term"] for e in ENTRIES]
    assert len(terms) >= MIN_TERMS, f"{len(terms)} terms, expected at least {MIN_TERMS}"
    assert len(set(t.lower() for t in terms)) == len(terms), f"a term is defined twice: {sorted(terms)}"
    assert terms == sorted(terms, key=str.lower), f"not in alphabetical order: {terms}"
    long = [f"{e['term']}: {len(e['definition'])} characters" for e in ENTRIES if len(e["definition"]) > MAX_DEFINITION]
    assert not long, f"definitions over {MAX_DEFINITION} characters (one line each):\n" + "\n".join(long)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not isinstance(e, str)], ids=lambda e: e["term"])
def test_every_link_leads_to_the_heading_that_teaches_the_term(entry):
    links = list(LINK.finditer(entry["links"]))
    assert links, f"{entry['term']}: no link to the lesson that teaches it"
    problems = [p for link in links for p in link_problems(link["label"], link["target"], link["anchor"])]
    assert not problems, f"{entry['term']}:\n" + "\n".join(problems)


def test_the_link_rule_catches_a_renamed_heading_a_wrong_number_and_a_wrong_lesson():
    kv = "../notebooks/11_gpt.ipynb"
    assert link_problems("lesson 11, section 8", kv, "8.-A-KV-cache") == []
    assert "no heading with that id" in link_problems("lesson 11, section 8", kv, "8.-The-KV-cache")[0]
    assert "not to section 7" in link_problems("lesson 11, section 7", kv, "8.-A-KV-cache")[0]
    assert "another lesson" in link_problems("lesson 12, section 8", kv, "8.-A-KV-cache")[0]
    assert "is not a lesson" in link_problems("lesson 11", "../notebooks/99_none.ipynb", "x")[0]
    assert isinstance(entries("- **KV cache** keys and values kept ([lesson 11](x.ipynb#y))")[0], str), "no colon"
