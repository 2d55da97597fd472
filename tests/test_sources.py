"""Every lesson from 01 on links the papers and posts it draws on where it uses them, and ends with
"Further reading": three to six items, each a link followed by a line on why to read it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted(p for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb") if p.name[:2] != "00")
LINK = re.compile(r"\[[^\]]+\]\((https?://[^)\s]+)\)")
ITEM = re.compile(r"^- .*?\[[^\]]+\]\(https?://[^)\s]+\).*?: \S")  # a link, then ": why"


def _markdown(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def _items(section: str) -> list[str]:
    """The list items of a Markdown section, each joined with its continuation lines into one."""
    items: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            items.append(line)
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    return items


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_lesson_ends_with_three_to_six_items_of_further_reading_each_with_why(path):
    cells = _markdown(path)
    assert cells[-1].startswith("## Further reading\n"), (
        f"{path.name}: the last Markdown cell should be '## Further reading', it starts {cells[-1][:40]!r}"
    )
    items = _items(cells[-1])
    assert 3 <= len(items) <= 6, f"{path.name}: {len(items)} items of further reading, expected 3 to 6"
    for item in items:
        assert ITEM.match(item), f"{path.name}: an item is not a link followed by ': why to read it':\n{item}"


@pytest.mark.parametrize("path", [p for p in LESSONS if p.name[:2] != "01"], ids=lambda p: p.stem)
def test_the_text_links_at_least_two_sources_where_it_uses_them(path):
    text = "\n".join(_markdown(path)[:-1])  # everything before "Further reading"
    links = LINK.findall(text)
    assert len(links) >= 2, f"{path.name}: {len(links)} links to sources in the text, expected at least 2: {links}"


def test_the_item_rule_catches_a_bare_title_and_a_link_without_why():
    assert ITEM.match("- [Layer Normalization](https://arxiv.org/abs/1607.06450) (Ba et al., 2016): the original.")
    assert ITEM.match("- [A](https://a.example) (B, 2020) and [C](https://c.example) (D, 2021): why.")
    assert ITEM.match("- The chapter on X of [*A book*](https://a.example) (B and C): why.")
    assert not ITEM.match("- Layer Normalization (Ba et al., 2016): no link.")
    assert not ITEM.match("- [Layer Normalization](https://arxiv.org/abs/1607.06450)")
    assert _items("## Further reading\n\n- [a](https://x): one\n  two\n- [b](https://y): three") == [
        "- [a](https://x): one two",
        "- [b](https://y): three",
    ]
