"""The browser tests' judgements, on cell records shaped like those READ_CELLS_JS reads from the page
(no browser needed): each problem a learner would see is named, and a healthy cell passes."""

from __future__ import annotations

import pytest
from labdriver import BENIGN_CONSOLE, WIDGET, cell_problems, is_benign


def code(outputs=(), execution_count=1, tags=()):
    return {
        "index": 3,
        "total": 9,
        "id": "abc",
        "type": "code",
        "tags": list(tags),
        "first_line": "x = 1",
        "execution_count": execution_count,
        "outputs": list(outputs),
    }


def output(
    mimes=("text/plain",),
    text="",
    output_type="display_data",
    name=None,
    error=None,
    widget_view=False,
    images=(),
    shown=True,
    shown_as="text/plain",
):
    return {
        "output_type": output_type,
        "name": name,
        "mimes": list(mimes),
        "text": text,
        "error": error,
        "shown": shown,
        "shown_as": shown_as,
        "widget_view": widget_view,
        "shown_text": text,
        "images": list(images),
    }


DECODED = {"complete": True, "width": 640}


def markdown(text, rendered=True):
    return {
        "index": 1,
        "total": 9,
        "id": "md1",
        "type": "markdown",
        "tags": [],
        "first_line": "# Title",
        "rendered": rendered,
        "text": text,
        "math": 0,
    }


HEALTHY = [
    code(
        [
            output(
                ["image/png", "text/plain"], "<Figure size 640x480 with 1 Axes>", images=[DECODED], shown_as="image/png"
            )
        ]
    ),
    code([output([WIDGET, "text/plain"], "Run this cell to get the slider.", widget_view=True, images=[DECODED])]),
    code([output(text="loss 4.17", output_type="stream", name="stdout")]),
    code([output(error="ZeroDivisionError: division by zero", output_type="error")], tags=["raises-exception"]),
    markdown('the weights sum to 1, and  is typeset (MathJax removed the delimiters); a string "a:\\nb"'),
]

BROKEN = {
    "an error": (code([output(error="NameError: name 'x' is not defined", output_type="error")]), "shows an error"),
    "a traceback on stderr": (
        code([output(text="Traceback (most recent call last):", output_type="stream", name="stderr")]),
        "shows a traceback",
    ),
    "a warning on stderr": (code([output(text="UserWarning: careful", output_type="stream", name="stderr")]), "stderr"),
    "a cell that never ran": (code([], execution_count=None), "did not run"),
    "a figure as text": (code([output(text="<Figure size 640x480 with 1 Axes>")]), "figure is shown as text"),
    "a figure not decoded": (
        code([output(["image/png"], images=[{"complete": False, "width": 0}], shown_as="image/png")]),
        "did not render as an image",
    ),
    "a widget as its fallback text": (
        code([output([WIDGET, "text/plain"], "Run this cell to get the slider.")]),
        "widget is shown as text",
    ),
    "a widget repr": (code([output(text="IntSlider(value=3, max=10)")]), "widget is shown as text"),
    "an output missing from the page": (code([output(shown=False)]), "not on the page"),
    "raw $ in Markdown": (markdown("the scores $q \\cdot k$ are"), "raw LaTeX"),
    "a raw TeX command": (markdown("divide by \\sqrt{d_k} first"), "raw LaTeX"),
    "Markdown not rendered": (markdown("", rendered=False), "Markdown not rendered"),
}


def test_a_healthy_notebook_has_no_problems():
    problems = [p for cell in HEALTHY for p in cell_problems(cell)]
    assert problems == [], problems


@pytest.mark.parametrize("what", BROKEN)
def test_each_problem_is_named_with_its_cell(what):
    cell, phrase = BROKEN[what]
    problems = cell_problems(cell)
    assert len(problems) == 1 and phrase in problems[0], f"{what}: {problems}"
    assert problems[0].startswith(f"cell {cell['index'] + 1}/9 (id {cell['id']}, "), problems[0]


def test_console_errors_count_unless_known_benign():
    assert not is_benign("Uncaught TypeError: Cannot read properties of undefined (reading 'model')")
    assert not is_benign("Failed to load resource: the server responded with a status of 404 (Not Found)")
    assert all(reason for _, reason in BENIGN_CONSOLE), "every ignored console error says why"
