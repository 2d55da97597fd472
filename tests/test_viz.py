"""The course's figures are readable for everyone: annotations legible on every cell, colour scales
that say what their middle means, colour-blind-safe colour maps, and labels that sit beside arrows.
The printing helpers write numbers identically on every machine, and the lessons use them instead of
helpers of their own."""
from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib import viz  # noqa: E402
from course_lib.data import load_sentences  # noqa: E402
from course_lib.markov import MarkovChain  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _cell_texts(ax) -> dict[tuple[int, int], str]:
    """The colour of the annotation written at each integer (column, row) of a heatmap axes."""
    return {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_color() for t in ax.texts}


@pytest.mark.parametrize(
    ("rgba", "expected"),
    [
        ((1.0, 1.0, 1.0, 1.0), "black"),  # white cell
        ((0.0, 0.0, 0.0, 1.0), "white"),  # black cell
        (plt.get_cmap("Blues")(1.0), "white"),  # navy
        (plt.get_cmap("Blues")(0.0), "black"),  # almost white
        (plt.get_cmap("viridis")(0.0), "white"),  # dark purple
        (plt.get_cmap("viridis")(1.0), "black"),  # yellow
        (plt.get_cmap("RdBu_r")(0.5), "black"),  # the white middle of a diverging map
        (plt.get_cmap("RdBu_r")(0.0), "white"),  # dark blue end
        (plt.get_cmap("RdBu_r")(1.0), "white"),  # dark red end
    ],
)
def test_text_colour_follows_the_cells_own_brightness(rgba, expected):
    assert viz.text_colour(rgba) == expected, f"text on {tuple(round(c, 2) for c in rgba)}: expected {expected}"


@pytest.mark.parametrize("cmap", ["Blues", "viridis", "cividis", "RdBu_r"])
def test_heatmap_annotations_read_on_light_and_dark_cells(cmap):
    # The bug this guards against: with Blues the 0s were written white on white, the 1s black on navy.
    m = np.array([[0.0, 1.0], [1.0, 0.0]])
    fig = viz.heatmap(m, ["a", "b"], ["c", "d"], fmt="{:.0f}", cmap=cmap, title="t", xlabel="x", ylabel="y")
    ax = fig.axes[0]
    image = ax.images[0]
    colours = _cell_texts(ax)
    assert len(colours) == 4, f"expected 4 annotations, got {len(colours)}"
    for (j, i), colour in colours.items():
        want = viz.text_colour(image.cmap(image.norm(m[i, j])))
        assert colour == want, f"{cmap}: cell ({i}, {j}) = {m[i, j]} is annotated in {colour}, expected {want}"
    if cmap == "Blues":
        assert colours[(0, 0)] == "black" and colours[(1, 0)] == "white", f"Blues: 0 -> black, 1 -> white, got {colours}"


def test_heatmap_symmetric_scale_puts_zero_in_the_middle():
    m = np.array([[-1.0, 3.0], [0.5, 2.0]])
    fig = viz.heatmap(m, cmap="RdBu_r", symmetric=True, title="t")
    assert fig.axes[0].images[0].get_clim() == (-3.0, 3.0), fig.axes[0].images[0].get_clim()
    fig = viz.heatmap(m, vmin=0.0, vmax=10.0, title="t")
    assert fig.axes[0].images[0].get_clim() == (0.0, 10.0)
    with pytest.raises(ValueError, match="symmetric=True or vmin/vmax"):
        viz.heatmap(m, symmetric=True, vmin=-1.0)
    with pytest.raises(ValueError, match="2-D matrix"):
        viz.heatmap(np.zeros(3))


def test_transition_heatmap_and_lookup_product_annotate_by_brightness():
    T = np.array([[0.0, 1.0], [0.3, 0.7]])
    fig = viz.transition_heatmap(T, ["a", "b"], ["a", "b"], title="T")
    ax = fig.axes[0]
    colours = _cell_texts(ax)
    assert (0, 0) not in colours, "zero probabilities are left blank"
    assert colours[(1, 0)] == "black", "a probability of 1 is yellow in viridis: black text"
    assert colours[(0, 1)] == "white", "0.3 is a dark colour in viridis: white text"
    assert ax.images[0].get_clim() == (0.0, 1.0), "probabilities are drawn on a fixed 0..1 scale"

    fig = viz.lookup_product(np.eye(2), np.array([[0.0, 5.0], [5.0, 0.0]]))
    for ax in fig.axes:
        if ax.images:
            image = ax.images[0]
            data = np.asarray(image.get_array())
            for (j, i), colour in _cell_texts(ax).items():
                assert colour == viz.text_colour(image.cmap(image.norm(data[i, j]))), f"{ax.get_title()} cell ({i}, {j})"
            assert ax.get_xlabel() and ax.get_ylabel(), f"panel {ax.get_title()!r} needs axis labels"


def test_head_grid_annotations_and_labels():
    w = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])  # (1 head, 2, 2)
    fig = viz.head_grid(w, ["a", "b"], annotate=True, title="heads")
    ax = [a for a in fig.axes if a.images][0]
    colours = _cell_texts(ax)
    assert colours[(0, 0)] == "black" and colours[(1, 0)] == "white", f"1.0 is yellow, 0.0 dark purple: {colours}"
    assert fig.get_supxlabel() and fig.get_supylabel(), "the grid needs axis labels (key, query)"


def _stored_width_px(fig) -> int:
    """The width of the PNG a notebook stores for `fig` (the inline backend: 100 dpi, tight box)."""
    import io
    import struct

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return struct.unpack(">I", buffer.getvalue()[16:20])[0]


def test_multi_panel_figures_fit_the_notebook_column():
    """`make lab` leaves an 848 px output column: a wider figure is shrunk, its small text with it
    (lesson 08's head grids were 1077 px wide, their 7 pt tick labels 6.6 px high)."""
    assert _stored_width_px(viz.three_constraints(steps=3)) <= 848
    for n_heads, T in [(3, 11), (4, 16), (8, 6)]:  # lesson 08's grid, a wider one, two rows
        fig = viz.head_grid(torch.full((n_heads, T, T), 1 / T), [f"word{i}" for i in range(T)],
                            head_titles=[f"what head {h} looks for" for h in range(n_heads)], title="heads")
        assert _stored_width_px(fig) <= 848, f"{n_heads} heads of {T} words: {_stored_width_px(fig)} px"
        plt.close(fig)


def test_graph_labels_sit_beside_the_arrows_not_on_them():
    m = MarkovChain(order=1).fit(load_sentences("commands"))
    fig = viz.markov_graph(m, title="commands")
    fig.canvas.draw()
    ax = fig.axes[0]
    arrows = [t.arrow_patch for t in ax.texts if t.get_text() == "" and t.arrow_patch is not None]
    labels = [t for t in ax.texts if re.fullmatch(r"\d\.\d\d", t.get_text())]
    assert len(labels) == len(arrows), f"{len(labels)} probability labels for {len(arrows)} arrows"
    renderer = fig.canvas.get_renderer()
    for arrow in arrows:
        path = arrow.get_path()  # in display coordinates once drawn
        middle = path.vertices[len(path.vertices) // 2]
        for label in labels:
            box = label.get_window_extent(renderer)
            assert not box.contains(*middle), f"label {label.get_text()!r} covers the middle of an arrow"


def test_figures_have_titles_and_axis_labels():
    fig = viz.vote_totals({"all": {"down": 4, "please": 5}, "masked": {"down": 0, "please": 1}})
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    fig = viz.three_constraints(steps=3)
    for ax in fig.axes:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), f"panel {ax.get_title()!r}"
    fig = viz.attention_bars(["a", "b"], [0.3, 0.7], title="w")
    assert fig.axes[0].get_xlabel() == "key" and fig.axes[0].get_ylabel() == "attention weight"
    fig = viz.dot_product_geometry([1.0, 0.0], [1.0, 1.0])
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_ylabel()
    fig = viz.clock_hands([0, 1], d_model=4, title="clocks")
    assert fig.get_suptitle() == "clocks"


def test_lessons_use_colour_blind_safe_colour_maps():
    used = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                for name in re.findall(r"cmap\s*=\s*[\"']([\w_]+)[\"']", "".join(cell["source"])):
                    used.setdefault(name, []).append(path.name)
    unsafe = {name: files for name, files in used.items() if name not in viz.COLOURBLIND_SAFE_CMAPS}
    assert not unsafe, f"colour maps that are not colour-blind safe: {unsafe}; use one of {viz.COLOURBLIND_SAFE_CMAPS}"


# --- printing numbers -------------------------------------------------------------------------------


def test_rounded_gives_plain_floats_rounded_alike_from_any_container():
    assert viz.rounded(torch.tensor([0.12345, -0.00001, 2.0])) == [0.123, 0.0, 2.0]
    assert str(viz.rounded(torch.tensor([-0.0001]))) == "[0.0]", "a rounded -0.0 must print as 0.0"
    assert viz.rounded(np.array([[1 / 3, 2 / 3]]), 2) == [[0.33, 0.67]]
    assert viz.rounded([0.5, 0.25], 1) == [0.5, 0.2], "numpy rounds halves to even, as round() does"
    assert viz.rounded(torch.tensor(0.98765, dtype=torch.float64), 2) == 0.99
    assert isinstance(viz.rounded(np.float32(1.5)), float)
    # float32 values are rounded from their exact float64 value, as the lessons' helpers did
    assert viz.rounded(torch.tensor([0.1], dtype=torch.float32), 9) == [0.100000001]


def test_show_items_wraps_between_items_only_and_formats_pairs(capsys):
    viz.show_items("neighbours:", [("queen", 0.98123), ("prince", np.float32(0.8)), ("count", np.int64(3)),
                                   ("zero", -0.0001), "as is"])
    assert capsys.readouterr().out == "neighbours: queen 0.98, prince 0.80, count 3, zero 0.00, as is\n"
    viz.show_items("x:", [("p", torch.tensor(0.5))], digits=3)
    assert capsys.readouterr().out == "x: p 0.500\n"
    words = [f"word{i}" for i in range(30)]
    viz.show_items("label:", words, width=40)
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 40 for line in lines), lines
    assert all(line.startswith("    word") for line in lines[1:]), lines
    items = " ".join(lines).replace("    ", " ").split()[1:]
    assert [item.rstrip(",") for item in items] == words, "every item once, in order, none split"


def test_show_table_labels_rows_and_columns_and_dots_the_zeros(capsys):
    viz.show_table([[0.0, 1.5], [2.25, 0.0]], ["r", "row2"], ["a", "column"], fmt="{:.1f}", title="T")
    assert capsys.readouterr().out == ("T\n"
                                       "        a  column\n"
                                       "   r    .     1.5\n"
                                       "row2  2.2       .\n")
    viz.show_table(torch.tensor([[-0.0, 3.0]]), ["w"], ["x", "y"], fmt="{:+.0f}")
    assert capsys.readouterr().out == "   x   y\nw  .  +3\n"


def test_lessons_print_with_the_library_helpers_not_their_own():
    """Lessons 02-07 each had a printing helper of their own (two of them called `show`, doing different
    things); the library's `rounded`, `show_items` and `show_table` replace them."""
    own = re.compile(r"^def (show|rounded|listing|print_items|show_table|show_items)\(", re.MULTILINE)
    found = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code" and own.search("".join(cell["source"])):
                found.append(f"{path.name}: {own.search(''.join(cell['source'])).group(0)}")
    assert not found, f"printing helpers defined in lessons, use course_lib.viz's instead: {found}"
