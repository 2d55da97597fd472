"""The PyTorch primer (docs/pytorch_primer.md) runs as written: its Python blocks are run in order in
one namespace, as a learner would run them, and the text block under a Python block must be exactly
what that block prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRIMER = REPO / "docs" / "pytorch_primer.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(text: str) -> list[tuple[str, str | None]]:
    """Each ```python block with the ```text block right after it (None if the next block is not one)."""
    found = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)]
    out = []
    for i, (lang, body, _, end) in enumerate(found):
        if lang != "python":
            continue
        following = found[i + 1] if i + 1 < len(found) else None
        printed = None
        if following and following[0] == "text" and not text[end : following[2]].strip():
            printed = following[1]
        out.append((body, printed))
    return out


def run(text: str) -> list[str]:
    """Run the blocks in order; return a problem for every block that fails or prints something else."""
    namespace: dict = {"__name__": "__primer__"}
    problems = []
    for number, (code, printed) in enumerate(blocks(text), 1):
        stdout = io.StringIO()
        try:
            with contextlib.redirect_stdout(stdout):
                exec(compile(code, f"<primer block {number}>", "exec"), namespace)
        except Exception as err:  # noqa: BLE001 - reported with the block that raised it
            problems.append(f"block {number} raised {type(err).__name__}: {err}\n{code}")
            break  # later blocks need this one's names
        if printed is not None and stdout.getvalue().rstrip() != printed.rstrip():
            problems.append(f"block {number} printed\n{stdout.getvalue()}but the page shows\n{printed}")
    return problems


def test_every_block_runs_and_prints_what_the_page_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = PRIMER.read_text(encoding="utf-8")
    assert len(blocks(text)) >= 8, "the primer should show its three topics in runnable code"
    problems = run(text)
    assert not problems, "\n\n".join(problems)


def test_the_primer_covers_tensors_autograd_and_modules():
    text = PRIMER.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    for topic in ("Tensors", "Autograd", "nn.Module"):
        assert any(topic in h for h in headings), f"no section on {topic}: {headings}"
    for name in ("requires_grad", ".backward()", ".grad", "no_grad", "parameters()", "forward", "optimizer.step()"):
        assert name in text, f"the primer never shows {name}"


@pytest.mark.parametrize(
    "page, problem",
    [
        ("```python\nprint(1 + 1)\n```\n\n```text\n3\n```\n", "block 1 printed"),
        ("```python\nx = 1\n```\n\n```python\nprint(y)\n```\n", "block 2 raised NameError"),
    ],
)
def test_a_wrong_output_or_a_failing_block_is_caught(page, problem):
    problems = run(page)
    assert problems and problem in problems[0], problems
    assert run("```python\nx = 2\n```\n\n```python\nprint(x * 2)\n```\n\n```text\n4\n```\n") == []
