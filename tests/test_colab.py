"""Every notebook runs unchanged on Google Colab: its first code cell installs course_lib there (and
only there), without touching Colab's PyTorch, and no cell assumes a local checkout."""

from __future__ import annotations

import builtins
import json
import re
import sys
import types
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from course_lib import colab

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = (
    sorted((REPO / "notebooks").glob("*.ipynb"))
    + sorted((REPO / "solutions").glob("*.ipynb"))
    + sorted((REPO / "exercises").glob("*.ipynb"))
)


def _first_code_cell(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def _run_setup_cell(source: str, *, on_colab: bool, typed_address: str = "") -> tuple[list, list]:
    """Run the cell as IPython would, with Colab simulated or not; return (magics called, prompts shown)."""
    magics, prompts = [], []
    shell = types.SimpleNamespace(run_line_magic=lambda name, line, *a: magics.append((name, line)))
    code = TransformerManager().transform_cell(source)  # `%pip ...` -> get_ipython().run_line_magic(...)
    saved = sys.modules.get("google.colab")
    real_input = builtins.input
    try:
        if on_colab:
            sys.modules["google.colab"] = types.ModuleType("google.colab")
        else:
            sys.modules.pop("google.colab", None)
        builtins.input = lambda prompt="": prompts.append(prompt) or typed_address
        exec(compile(code, "<setup cell>", "exec"), {"get_ipython": lambda: shell})
    finally:
        builtins.input = real_input
        if saved is not None:
            sys.modules["google.colab"] = saved
        else:
            sys.modules.pop("google.colab", None)
    return magics, prompts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_first_code_cell_installs_course_lib_on_colab_only(path):
    cell = _first_code_cell(path)
    source = "".join(cell["source"])
    assert colab.repository_of(source) is not None, (
        f"{path.relative_to(REPO)}: the first code cell is not the Colab setup cell; run `course colab` "
        f"(and `course build`). It starts with: {source[:120]!r}"
    )
    magics, prompts = _run_setup_cell(source, on_colab=True, typed_address="https://example.org/course.git")
    assert len(magics) == 1 and magics[0][0] == "pip", magics
    line = magics[0][1]
    assert "--no-deps" in line and "course-lib @ git+{COURSE_REPOSITORY}" in line, line
    assert "torch" not in line, f"the Colab install must leave Colab's PyTorch alone: {line}"
    assert prompts == ([] if colab.repository_of(source) else ["Git address of the course (its Clone URL): "]), prompts
    off_colab = _run_setup_cell(source, on_colab=False)
    assert off_colab == ([], []), f"off Colab the cell must do nothing, it did {off_colab}"
    assert not cell.get("outputs"), "the setup cell stores no output"


def test_a_written_in_address_is_installed_without_asking(tmp_path):
    nb = tmp_path / "notebooks" / "x.ipynb"
    nb.parent.mkdir()
    nb.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "id": "t", "metadata": {}, "source": ["# X"]},
                    {
                        "cell_type": "code",
                        "id": "c",
                        "metadata": {},
                        "execution_count": None,
                        "outputs": [],
                        "source": ["print(1)"],
                    },
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    assert colab.set_setup_cell(nb, "https://example.org/course.git")
    assert not colab.set_setup_cell(nb), "a second run keeps the address and changes nothing"
    cells = json.loads(nb.read_text())["cells"]
    assert [c["id"] for c in cells] == ["t", colab.CELL_ID, "c"], "after the title, before the first code cell"
    source = "".join(cells[1]["source"])
    assert colab.repository_of(source) == "https://example.org/course.git"
    magics, prompts = _run_setup_cell(source, on_colab=True)
    assert prompts == [] and len(magics) == 1, (magics, prompts)
    with pytest.raises(ValueError, match="no quotes"):
        colab.cell_source('x"; import os')


LOCAL_PATHS = re.compile(r"""(?<![\w/])(\.\./|/work/|(?<!course_lib/)data/[\w.-]+\.txt|solutions/\w|\.ipynb['"])""")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_code_cell_reads_files_from_a_local_checkout(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        hit = LOCAL_PATHS.search(source)
        assert hit is None, (
            f"{path.relative_to(REPO)} cell {i} refers to {hit.group(0)!r}: on Colab there is no "
            "checkout; read data through course_lib.data"
        )
