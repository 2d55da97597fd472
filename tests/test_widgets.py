"""The lessons' widgets: what a notebook stores for them (a friendly line, not a widget repr), their
labels, and that they still work as widgets."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from IPython.core.formatters import DisplayFormatter  # noqa: E402

from course_lib import widgets  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _explorers():
    q, k, v = torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 4)
    return {
        "temperature slider": widgets.softmax_temperature_explorer([2.0, 1.0, 0.0]),
        "query picker": widgets.attention_explorer(["x", "y", "z"], q, k, v),
        "position slider": widgets.clock_hands_explorer(d_model=8, max_position=20),
    }


def test_a_notebook_stores_a_friendly_line_for_each_explorer_not_its_repr():
    for what, explorer in _explorers().items():
        data, _ = DisplayFormatter().format(explorer)  # what the kernel sends, and a notebook stores
        assert data["text/plain"].startswith(f"Run this cell to get the {what}."), data["text/plain"]
        assert "VBox" not in data["text/plain"] and "Troubleshooting" in data["text/plain"], data["text/plain"]
        assert data[WIDGET_VIEW]["model_id"] == explorer.model_id, "the live widget must still be displayed"


def test_temperature_slider_shows_its_whole_label():
    explorer = widgets.softmax_temperature_explorer([2.0, 1.0, 0.0])
    slider = explorer.children[0]
    assert slider.description == "temperature"
    assert slider.style.description_width == "initial", "a fixed label width cuts 'temperature' to 'temperat…'"
    slider.value = 5.0  # still redraws


def test_attention_explorer_names_the_value_features():
    names = ["pron", "verb", "adj", "noun"]
    q, k, v = torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 4)
    explorer = widgets.attention_explorer(["x", "y", "z"], q, k, v, feature_names=names)
    fig = plt.gcf()  # the explorer's figure (plt.show() does not close it under Agg)
    table = fig.axes[1]
    assert [t.get_text() for t in table.get_xticklabels()] == names, "columns must carry the feature names"
    image = table.images[0]
    low, high = image.get_clim()
    assert low == -high, f"the diverging value map must be centred on 0, got limits {(low, high)}"
    explorer.children[0].value = 2  # picking another query redraws
    with pytest.raises(ValueError, match="3 feature names for values with 4 features"):
        widgets.attention_explorer(["x", "y", "z"], q, k, v, feature_names=names[:3])


def test_stored_widget_outputs_of_the_lessons_are_friendly_lines():
    found = 0
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if WIDGET_VIEW in data:
                    found += 1
                    text = "".join(data.get("text/plain", ""))
                    assert text.startswith("Run this cell"), f"{path.name} cell {i} stores the widget as {text[:60]!r}"
    assert found >= 3, f"expected the stored outputs of at least 3 widget cells, found {found}"
