"""Matplotlib figures used across the lessons, and the helpers that print numbers in them.

Every figure function returns the `Figure` it drew, so a notebook cell can end with `plt.show()` and
tests can inspect the axes. `rounded`, `show_items` and `show_table` print numbers identically on every
machine (what the stored outputs of the notebooks need). Nothing is drawn at import time.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from course_lib._validate import is_int


def _array(x) -> np.ndarray:
    """A float numpy array from an array, a list, or a torch tensor (detached, moved to the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def _figure_and_axes(ax, figsize):
    """Draw into `ax` when the caller gives one (a panel of a larger figure), else on a new figure."""
    if ax is None:
        return plt.subplots(figsize=figsize)
    return ax.figure, ax


# Colour maps that stay readable with the common colour-vision deficiencies: perceptually uniform
# sequential maps (viridis, cividis), single-hue ramps (Blues) and ColorBrewer's colour-blind-safe
# diverging map (RdBu, red-blue, which a diverging figure should centre on zero: `symmetric=True`).
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"
COLOURBLIND_SAFE_CMAPS = ("viridis", "cividis", "Blues", "RdBu_r", "RdBu")


def text_colour(rgba) -> str:
    """"black" or "white": whichever contrasts more with a cell of colour `rgba` (WCAG contrast).

    The choice comes from the cell's own brightness (relative luminance), not from where its value
    sits on the scale, so it is right for every colour map: black on light cells, white on dark ones.
    """
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3])  # sRGB -> linear
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    # contrast with black (L + 0.05) / 0.05 beats contrast with white 1.05 / (L + 0.05) above L ≈ 0.18
    return "black" if (luminance + 0.05) ** 2 > 0.05 * 1.05 else "white"


def _annotate(ax, image, m: np.ndarray, fmt: str, fontsize: float, only_nonzero: bool = False) -> None:
    """Write each value of `m` into its cell of `image`, in the colour that reads best on that cell."""
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            value = m[i, j]
            if np.isnan(value) or (only_nonzero and value == 0):
                continue
            colour = text_colour(image.cmap(image.norm(value)))
            ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=fontsize, color=colour)


def heatmap(
    matrix,
    row_labels=None,
    col_labels=None,
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    annotate: bool | None = None,
    fmt: str = "{:.2f}",
    cmap: str = SEQUENTIAL_CMAP,
    vmin: float | None = None,
    vmax: float | None = None,
    symmetric: bool = False,
    colorbar_label: str = "",
    ax=None,
) -> Figure:
    """A labelled heatmap of a 2-D array or tensor (annotated with its values when it is small).

    `vmin`/`vmax` fix the colour scale (several panels on one scale); `symmetric=True` centres it on
    zero (limits ±max|value|), so that the middle colour of a diverging map such as "RdBu_r" means 0.
    Each annotation is black or white, whichever reads better on its own cell (`text_colour`).
    """
    m = _array(matrix)
    if m.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix, got shape {m.shape}")
    if symmetric:
        if vmin is not None or vmax is not None:
            raise ValueError("give either symmetric=True or vmin/vmax, not both")
        limit = float(np.nanmax(np.abs(m))) if m.size else 1.0
        vmin, vmax = -(limit or 1.0), (limit or 1.0)
    fig, ax = _figure_and_axes(ax, (min(1.0 + 0.6 * m.shape[1], 12), min(1.0 + 0.5 * m.shape[0], 10)))
    im = ax.imshow(m, cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label)
    if row_labels is not None:
        ax.set_yticks(range(m.shape[0]), labels=[str(r) for r in row_labels])
    if col_labels is not None:
        ax.set_xticks(range(m.shape[1]), labels=[str(c) for c in col_labels], rotation=45, ha="right")
    if annotate is None:
        annotate = m.size <= 144
    if annotate:
        _annotate(ax, im, m, fmt, fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.tight_layout()
    return fig


def loss_curve(history: dict, *, title: str = "Loss", ax=None) -> Figure:
    """Plot every list in `history` (e.g. {'train': [...], 'val': [...]}) against its step."""
    fig, ax = _figure_and_axes(ax, (6, 3.5))
    for name, values in history.items():
        ax.plot(range(len(values)), values, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


# === Printing numbers that are the same on every machine ============================================
# A lesson's printed numbers are stored in the notebook and compared at every run (nbval), on any
# machine and device. Float results can differ in their last digits from one machine to the next, so
# these helpers round before they print, and write -0.0 as 0.0.


def rounded(x, digits: int = 3):
    """`x` (a number, a tensor, an array or a list) as Python floats rounded to `digits` decimals: a
    float for a single number, else a list nested like `x`. -0.0 comes out as 0.0.

    >>> rounded(torch.tensor([0.12345, -0.00001]))
    [0.123, 0.0]
    """
    return (np.round(_array(x), digits) + 0.0).tolist()  # + 0.0 turns -0.0 into 0.0


def _item_text(item, digits: int) -> str:
    """A string as it is; a (label, number) pair as "label number", a float with `digits` decimals."""
    if isinstance(item, str):
        return item
    label, value = item
    value = value.item() if hasattr(value, "item") else value  # a 0-d tensor or numpy scalar
    if is_int(value):
        return f"{label} {value}"
    return f"{label} {round(float(value), digits) + 0.0:.{digits}f}"  # never "-0.00"


def show_items(label: str, items, *, digits: int = 2, width: int = 96) -> None:
    """Print `label`, then the `items` separated by commas, on lines at most `width` characters wide;
    a line breaks only between two items, and the next one starts indented.

    An item is a string, or a (label, number) pair such as word2vec's ``("queen", 0.98)``, written
    "queen 0.98" (a float with `digits` decimals, an int as it is).
    """
    texts = [_item_text(item, digits) for item in items]
    line = label
    for i, text in enumerate(texts):
        text += "," if i < len(texts) - 1 else ""
        if len(line) + 1 + len(text) > width:
            print(line)
            line = "   "
        line += " " + text
    print(line)


def show_table(values, row_labels, col_labels, *, fmt: str = "{:.2f}", title: str | None = None) -> None:
    """Print a small matrix with its row and column labels, each entry formatted with `fmt` and zeros
    shown as "." (so that the pattern of the non-zero entries stands out). Each column is as wide as
    its label or its widest entry, so the table stays narrow."""
    cells = [["." if v == 0 else fmt.format(v + 0.0).strip() for v in row] for row in _array(values)]
    widths = [max([len(str(c))] + [len(row[j]) for row in cells]) + 2 for j, c in enumerate(col_labels)]
    left = max(len(str(r)) for r in row_labels)
    if title:
        print(title)
    print(" " * left + "".join(f"{str(c):>{w}}" for c, w in zip(col_labels, widths, strict=True)))
    for r, row in zip(row_labels, cells, strict=True):
        print(f"{str(r):>{left}}" + "".join(f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))


# === Lesson-specific figures =======================================================================
# One section per lesson, added as lessons land.

# --- Lesson 01: one-hot vectors and dot products ------------------------------


def dot_product_geometry(a, b, *, labels: tuple[str, str] = ("a", "b"), ax=None) -> Figure:
    """Two 2-D vectors from the origin, the angle between them, and the projection of b onto a.

    The dashed drop from the tip of b meets the line through a at distance |b| cos(theta) from the
    origin, so a . b = |a| * (that signed distance): the picture of the geometric dot product.
    """
    a = _array(a)
    b = _array(b)
    if a.shape != (2,) or b.shape != (2,):
        raise ValueError(f"dot_product_geometry draws 2-D vectors, got shapes {a.shape} and {b.shape}")
    if not np.any(a) or not np.any(b):
        raise ValueError("dot_product_geometry needs two non-zero vectors (a zero vector has no angle)")
    fig, ax = _figure_and_axes(ax, (5, 5))
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    cos = float(a @ b / (na * nb))
    theta = float(np.arccos(np.clip(cos, -1.0, 1.0)))
    foot = (a @ b) / (na * na) * a  # projection of b onto the line through a
    for vec, name, color in ((a, labels[0], "tab:blue"), (b, labels[1], "tab:orange")):
        ax.annotate("", xy=vec, xytext=(0, 0), arrowprops=dict(arrowstyle="-|>", color=color, lw=2))
        ax.text(*(vec * 1.06), name, color=color, fontsize=12, ha="center", va="center")
    t = (a @ b) / (na * na)  # foot = t * a
    line = np.stack([min(0.0, t) * a, max(1.0, t) * a])  # the line through a, as far as the foot
    ax.plot(line[:, 0], line[:, 1], color="tab:blue", lw=0.8, alpha=0.4)
    ax.plot([b[0], foot[0]], [b[1], foot[1]], "k--", lw=1)
    ax.plot([0, foot[0]], [0, foot[1]], color="tab:green", lw=4, alpha=0.6, label=f"|{labels[1]}| cos θ = {nb * cos:.2f}")
    # the angle as an arc
    start = np.arctan2(a[1], a[0])
    sweep = np.arctan2(a[0] * b[1] - a[1] * b[0], a @ b)  # signed angle from a to b
    arc = np.linspace(start, start + sweep, 40)
    r = 0.25 * min(na, nb)
    ax.plot(r * np.cos(arc), r * np.sin(arc), color="gray")
    mid = start + sweep / 2
    ax.text(1.6 * r * np.cos(mid), 1.6 * r * np.sin(mid), f"θ = {np.degrees(theta):.0f}°", ha="center", va="center")
    pts = np.stack([a, b, foot, np.zeros(2)])
    lo, hi = pts.min() - 0.5, pts.max() + 0.5
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.axhline(0, color="lightgray", lw=0.8, zorder=0)
    ax.axvline(0, color="lightgray", lw=0.8, zorder=0)
    ax.legend(loc="lower right", fontsize=9)
    ax.set_xlabel("first coordinate")
    ax.set_ylabel("second coordinate")
    ax.set_title(f"{labels[0]}·{labels[1]} = {a @ b:.2f} = |{labels[0]}| |{labels[1]}| cos θ = {na:.2f} × {nb:.2f} × {cos:.2f}", fontsize=10)
    fig.tight_layout()
    return fig


def lookup_product(one_hot_rows, matrix, *, row_labels=None, vocab_labels=None, col_labels=None) -> Figure:
    """Three panels, one-hot rows @ matrix = the picked rows, each a small annotated heatmap."""
    oh = _array(one_hot_rows)
    m = _array(matrix)
    if oh.ndim != 2 or m.ndim != 2 or oh.shape[1] != m.shape[0]:
        raise ValueError(f"expected (T, V) one-hot rows and a (V, D) matrix, got {oh.shape} and {m.shape}")
    out = oh @ m  # (T, V) @ (V, D) -> (T, D)
    T, V = oh.shape
    D = m.shape[1]
    fig, all_axes = plt.subplots(1, 5, figsize=(10, 3.2), gridspec_kw={"width_ratios": [V, 0.5, D, 0.5, D]})
    axes = all_axes[0::2]
    for spacer, symbol in zip(all_axes[1::2], ("@", "=")):  # narrow axes that only hold the operator
        spacer.axis("off")
        spacer.text(0.5, 0.5, symbol, fontsize=18, ha="center", va="center", transform=spacer.transAxes)
    panels = [
        (oh, row_labels, vocab_labels, f"one-hot rows ({T}×{V})", "{:.0f}"),
        (m, vocab_labels, col_labels, f"matrix ({V}×{D})", "{:.1f}"),
        (out, row_labels, col_labels, f"product ({T}×{D})", "{:.1f}"),
    ]
    axis_names = [("vocabulary entry", "word"), ("dimension", "vocabulary entry"), ("dimension", "word")]
    for ax, (mat, rl, cl, title, fmt), (xlabel, ylabel) in zip(axes, panels, axis_names):
        im = ax.imshow(mat, cmap=SEQUENTIAL_CMAP, aspect="auto")
        ax.set_yticks(range(mat.shape[0]), labels=[str(x) for x in rl] if rl is not None else range(mat.shape[0]))
        ax.set_xticks(range(mat.shape[1]), labels=[str(x) for x in cl] if cl is not None else range(mat.shape[1]),
                      rotation=45 if cl is not None else 0, ha="right" if cl is not None else "center")
        _annotate(ax, im, mat, fmt, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
    fig.tight_layout()
    return fig


# --- Lesson 02: Markov models -------------------------------------------------


def _layers(edges: dict[int, list[int]], n: int) -> list[int]:
    """A layer for each node of a directed acyclic graph: as far right as its longest path to a sink
    allows, so that every chain ends in the last layer (where sentences end)."""
    outdegree = {i: len(edges.get(i, [])) for i in range(n)}
    parents = {j: [i for i in range(n) if j in edges.get(i, [])] for j in range(n)}
    to_sink = [0] * n
    ready, done = [i for i in range(n) if outdegree[i] == 0], 0
    while ready:
        j = ready.pop(0)
        done += 1
        for i in parents[j]:
            to_sink[i] = max(to_sink[i], to_sink[j] + 1)
            outdegree[i] -= 1
            if outdegree[i] == 0:
                ready.append(i)
    if done < n:
        raise ValueError("the graph has a cycle, so it has no layers: use layout='circle'")
    longest = max(to_sink)
    return [longest - d for d in to_sink]


def _label_beside_arrow(ax, start, end, rad: float, text: str, offset_points: float = 7.0) -> None:
    """Write `text` next to the middle of the arrow start -> end (an arc3 curve bent by `rad`), moved
    sideways off the line so that it never covers the arrow: to the side the curve bulges to, and
    above (or, for a vertical arrow, to the right of) a straight one."""
    a, b = ax.transData.transform(start), ax.transData.transform(end)  # display coordinates
    d = b - a
    length = float(np.hypot(*d)) or 1.0
    bulge = np.array([d[1], -d[0]]) / length  # matplotlib's arc3 pushes its control point this way for rad > 0
    middle = (a + b) / 2 + rad / 2 * length * bulge  # the midpoint of the quadratic curve
    if rad != 0:
        side = np.sign(rad) * bulge
    else:
        side = -bulge if (-bulge[1], -bulge[0]) > (bulge[1], bulge[0]) else bulge  # up, or right if vertical
    anchor = ax.transData.inverted().transform(middle)
    ax.annotate(text, xy=anchor, xytext=tuple(offset_points * side), textcoords="offset points",
                ha="center", va="center", fontsize=7, zorder=2, color="#8a1c1c",
                bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.8))


def transition_graph(
    matrix,
    labels,
    *,
    layout: str = "layers",
    min_prob: float = 0.0,
    title: str = "",
    figsize: tuple[float, float] = (9, 4),
    ax=None,
) -> Figure:
    """Draw a transition matrix as a graph: one node per label, an arrow i -> j labelled T[i, j].

    Rows are "from", columns "to" (the Markov convention). `layout="layers"` puts each node at the
    depth of its longest path from a source (left to right; needs an acyclic graph); `"circle"`
    puts the nodes on a circle and bends the arrows so that i -> j and j -> i do not overlap.
    Arrows with probability <= `min_prob` are left out. Matplotlib only.
    """
    T = _array(matrix)
    labels = [str(x) for x in labels]
    if T.ndim != 2 or T.shape[0] != T.shape[1]:
        raise ValueError(f"transition_graph expects a square matrix, got shape {T.shape}")
    if len(labels) != T.shape[0]:
        raise ValueError(f"got {len(labels)} labels for a {T.shape[0]} x {T.shape[0]} matrix")
    if layout not in ("layers", "circle"):
        raise ValueError(f"layout must be 'layers' or 'circle', got {layout!r}")
    n = T.shape[0]
    edges = {i: [j for j in range(n) if T[i, j] > max(min_prob, 0.0) and j != i] for i in range(n)}

    if layout == "circle":
        angles = np.pi / 2 - 2 * np.pi * np.arange(n) / n
        pos = {i: (np.cos(a), np.sin(a)) for i, a in enumerate(angles)}
        rad = 0.15
    else:
        depth = _layers(edges, n)
        pos, rad = {}, 0.0
        parents = {j: [i for i in range(n) if j in edges[i]] for j in range(n)}
        for d in range(max(depth) + 1):  # left to right, so the parents of a layer are placed
            nodes = [i for i in range(n) if depth[i] == d]
            # order each layer by the mean height of its parents, so arrows cross less
            key = {i: np.mean([pos[p][1] for p in parents[i]]) if parents[i] else 0.0 for i in nodes}
            nodes.sort(key=lambda i: (-key[i], i))
            ys = np.linspace(1, -1, len(nodes)) * (len(nodes) - 1) / 2 if len(nodes) > 1 else [0.0]
            for i, y in zip(nodes, ys):
                pos[i] = (float(d), float(y))

    fig, ax = _figure_and_axes(ax, figsize)
    xs, ys = zip(*pos.values())
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    boxes = {}
    for i, label in enumerate(labels):
        boxes[i] = ax.text(*pos[i], label, ha="center", va="center", fontsize=9, zorder=3,
                           bbox=dict(boxstyle="round,pad=0.3", fc="#dde8f6", ec="#34609a"))
    for i in range(n):
        for j in edges[i]:
            if layout == "layers":  # bend arrows that skip a layer, away from the nodes they pass
                span = abs(pos[j][0] - pos[i][0])
                rad = 0.0 if span <= 1 else (0.25 if pos[j][1] <= pos[i][1] else -0.25)
            ax.annotate("", xy=pos[j], xytext=pos[i], zorder=1,
                        arrowprops=dict(arrowstyle="-|>", color="0.35", lw=0.6 + 2.0 * T[i, j],
                                        shrinkA=2, shrinkB=2, patchA=boxes[i].get_bbox_patch(),
                                        patchB=boxes[j].get_bbox_patch(), connectionstyle=f"arc3,rad={rad}"))
            _label_beside_arrow(ax, pos[i], pos[j], rad, f"{T[i, j]:.2f}")
        if T[i, i] > max(min_prob, 0.0):  # a self-loop: say it next to the node
            ax.text(pos[i][0], pos[i][1] + 0.25, f"↻ {T[i, i]:.2f}", ha="center", fontsize=7, color="#8a1c1c")
    ax.set_axis_off()
    ax.set_title(title)
    fig.tight_layout()
    return fig


def transition_heatmap(matrix, row_labels, col_labels, *, title: str = "", figsize=(7.5, 6), fmt: str = "{:.2f}",
                       ylabel: str = "current word", ax=None) -> Figure:
    """A transition matrix as a heatmap (rows: context, columns: next token), with only the
    nonzero probabilities written in, so that sparse matrices stay readable."""
    m = _array(matrix)
    fig, ax = _figure_and_axes(ax, figsize)
    heatmap(m, row_labels, col_labels, title=title, xlabel="next token", ylabel=ylabel, annotate=False,
            vmin=0.0, vmax=1.0, colorbar_label="probability", ax=ax)
    _annotate(ax, ax.images[-1], m, fmt, fontsize=7, only_nonzero=True)
    return fig


def markov_graph(model, *, title: str = "", min_prob: float = 0.0, figsize=(9, 4), ax=None) -> Figure:
    """Draw a first-order `course_lib.markov.MarkovChain` as a left-to-right graph.

    The boundary token "<end>" plays two parts (the context before a sentence and the token after
    it), so the graph draws it twice: as "<start>" on the left, with the first-word probabilities,
    and as "<end>" on the right, where every sentence stops.
    """
    if getattr(model, "order", None) != 1:
        raise ValueError(f"markov_graph draws first-order chains only, got order {getattr(model, 'order', None)!r}")
    T = model.transition_matrix  # (V, V)
    V = T.shape[0]
    end = model.vocab["<end>"]
    G = np.zeros((V + 1, V + 1))  # the V tokens, then a separate start node
    G[:V, :V] = T
    G[V, :V] = T[end]  # the start node takes over the "<end>" row
    G[end, :] = 0.0  # and "<end>" itself is where chains stop
    labels = list(model.tokens) + ["<start>"]
    return transition_graph(G, labels, layout="layers", min_prob=min_prob, title=title, figsize=figsize, ax=ax)


# --- Lesson 03: from skips to attention ---------------------------------------


def vote_totals(totals: dict, *, titles=None, title: str = "Vote totals for the next word", ax=None) -> Figure:
    """Side-by-side bars of vote totals, e.g. {"all pairs": {"down": 4, "please": 5}, "masked": {...}}.

    `titles` names the groups under their bars; `title` is the figure's title."""
    fig, ax = _figure_and_axes(ax, (6, 3))
    groups = list(totals)
    words = sorted({w for g in groups for w in totals[g]})
    width = 0.8 / max(len(words), 1)
    for k, word in enumerate(words):
        heights = [totals[g].get(word, 0.0) for g in groups]
        xs = np.arange(len(groups)) + (k - (len(words) - 1) / 2) * width
        ax.bar(xs, heights, width=width, label=word)
        for x, h in zip(xs, heights):
            ax.text(x, h, f"{h:g}", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(groups)), labels=titles or groups)
    ax.set_xlabel("command, and which pairs vote")
    ax.set_ylabel("total vote")
    ax.set_title(title)
    ax.legend(title="next word", fontsize=9)
    ax.margins(y=0.15)
    fig.tight_layout()
    return fig


def three_constraints(*, step_fraction: float = 0.45, steps: int = 15) -> Figure:
    """Why the toy must become smooth: a hard 0/1 choice has no useful gradient (left); gradient
    descent reaches the bottom of a round bowl in a few steps (middle) but crawls along a narrow
    canyon (right), whose steep walls only allow a small step (learning rate = step_fraction /
    the steepest curvature, the same rule in both panels)."""
    fig, axes = plt.subplots(1, 3, figsize=(8.4, 3.4))  # fits the notebook column (8.48 in) unscaled
    s = np.linspace(-4, 4, 400)
    hard = (s > 0).astype(float)
    soft = 1 / (1 + np.exp(-2 * s))
    ax = axes[0]
    ax.plot(s, hard, lw=2, label="hard: 1 if score > 0")
    ax.plot(s, soft, lw=2, label="smooth: sigmoid(2·score)")
    ax.plot(s, 2 * soft * (1 - soft), "--", color="tab:orange", lw=1, label="slope of the smooth mask")
    ax.set_xlabel("score")
    ax.set_ylabel("mask value")
    ax.set_title("differentiable: a slope to follow", fontsize=9)
    ax.set_ylim(-0.05, 1.7)  # room above the curves for the legend
    ax.set_yticks([0, 0.5, 1])
    ax.legend(fontsize=8, loc="upper left")
    for ax, (a, b), title in ((axes[1], (1.0, 1.0), "well-conditioned: a round bowl"),
                              (axes[2], (1.0, 25.0), "ill-conditioned: a narrow canyon")):
        x, y = np.meshgrid(np.linspace(-3, 3, 200), np.linspace(-3, 3, 200))
        ax.contour(x, y, a * x**2 + b * y**2, levels=12, cmap="viridis", linewidths=0.8)
        p = np.array([-2.8, 1.2])
        path = [p.copy()]
        learning_rate = step_fraction / max(a, b)  # larger steps would bounce off the steepest walls
        for _ in range(steps):
            p = p - learning_rate * np.array([2 * a * p[0], 2 * b * p[1]])  # one gradient-descent step
            path.append(p.copy())
        path = np.array(path)
        ax.plot(path[:, 0], path[:, 1], "o-", color="tab:red", ms=2.5, lw=1)
        ax.plot(0, 0, "k*", ms=8)
        ax.set_aspect("equal")
        ax.set_title(f"{title}\n{steps} gradient steps", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("parameter 1")
        ax.set_ylabel("parameter 2")
    fig.suptitle("Three constraints: differentiable, and well-conditioned (contours of the loss)", fontsize=11)
    fig.tight_layout()
    return fig


# --- Lesson 06: attention -----------------------------------------------------


def attention_bars(labels, weights, *, title: str = "", xlabel: str = "key", ylabel: str = "attention weight",
                   ax=None) -> Figure:
    """Bar chart of one query's attention weights over `labels` (one bar per key), values written on the bars."""
    w = _array(weights)
    if w.ndim != 1 or len(w) != len(labels):
        raise ValueError(f"attention_bars expects one weight per label: got {len(labels)} labels and weights of shape {w.shape}")
    fig, ax = _figure_and_axes(ax, (6, 3))
    bars = ax.bar(range(len(w)), w, color="tab:blue")
    ax.set_xticks(range(len(w)), labels=[str(x) for x in labels], rotation=30 if len(w) > 6 else 0)
    for bar, value in zip(bars, w):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{value:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(1.0, float(w.max()) * 1.15) if len(w) else 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def attention_graph(words, weights, *, query: int | None = None, title: str = "", ax=None) -> Figure:
    """A sentence as a fully connected graph: words on a circle, arrow j -> i as thick as weight[i, j].

    With `query` set, only the edges into that word are drawn (the messages it receives).
    """
    W = _array(weights)
    n = len(words)
    if W.shape != (n, n):
        raise ValueError(f"attention_graph expects an (N, N) weight matrix for N={n} words, got shape {W.shape}")
    fig, ax = _figure_and_axes(ax, (4.5, 4.5))
    angles = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # (N, 2) positions on the unit circle
    receivers = [query] if query is not None else range(n)
    for i in receivers:
        for j in range(n):
            if i == j or W[i, j] < 0.02:
                continue
            ax.annotate("", xy=xy[i] * 0.85, xytext=xy[j] * 0.85,
                        arrowprops=dict(arrowstyle="-|>", lw=0.5 + 6 * W[i, j], alpha=0.3 + 0.7 * W[i, j],
                                        color="tab:blue", shrinkA=12, shrinkB=12, connectionstyle="arc3,rad=0.08"))
    for (x, y), word in zip(xy, words):
        ax.text(x * 0.85, y * 0.85, word, ha="center", va="center", fontsize=10,
                bbox=dict(boxstyle="round", fc="white", ec="gray"))
    ax.set_xlim(-1.2, 1.2)
    ax.set_ylim(-1.2, 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)
    fig.tight_layout()
    return fig


# --- Lesson 07: position ------------------------------------------------------


def positional_heatmap(pe, *, title: str = "Sinusoidal position encodings", ax=None) -> Figure:
    """An (n_positions, d_model) table as an image: positions down, dimensions across, -1 blue to +1 red."""
    pe = _array(pe)
    if pe.ndim != 2:
        raise ValueError(f"positional_heatmap expects an (n_positions, d_model) table, got shape {pe.shape}")
    fig, ax = _figure_and_axes(ax, (6, 4))
    im = ax.imshow(pe, cmap=DIVERGING_CMAP, vmin=-1, vmax=1, aspect="auto", interpolation="nearest")  # white = 0
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="PE value")
    ax.set_xlabel("dimension (even = sin, odd = cos)")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def clock_hands(positions, d_model: int, base: float = 10000.0, *, title: str = "", fig=None) -> Figure:
    """One clock per (sin, cos) column pair of the sinusoidal table; one row of clocks per position.

    The hand of clock i points to (x, y) = (PE[pos, 2i], PE[pos, 2i+1]) = (sin, cos) of pos·omega_i:
    at position 0 every hand points to 12 o'clock, and each step turns hand i clockwise by
    omega_i = base^(-2i/d) radians, fast on the left, slow on the right.
    """
    positions = [int(p) for p in np.atleast_1d(positions)]
    if d_model < 2 or d_model % 2:
        raise ValueError(f"clock_hands needs an even d_model >= 2 (one clock per sin/cos pair), got {d_model}")
    n_clocks = d_model // 2
    from course_lib.positional import frequencies  # the same omegas as the table under the clocks

    omega = frequencies(d_model, base).numpy()  # (n_clocks,)
    rows = len(positions)
    if fig is None:
        fig = plt.figure(figsize=(min(0.85 * n_clocks + 0.6, 12), 0.9 * rows + 0.5))
    axes = fig.subplots(rows, n_clocks, squeeze=False)
    t = np.linspace(0, 2 * np.pi, 100)
    for r, pos in enumerate(positions):
        for i in range(n_clocks):
            ax = axes[r, i]
            angle = pos * omega[i]
            ax.plot(np.cos(t), np.sin(t), color="0.6", lw=1)
            for h in range(4):  # 12, 3, 6 and 9 o'clock
                a = np.pi * h / 2
                ax.plot([0.88 * np.sin(a), np.sin(a)], [0.88 * np.cos(a), np.cos(a)], color="0.6", lw=0.8)
            ax.plot([0, np.sin(angle)], [0, np.cos(angle)], color="C3", lw=2.5, solid_capstyle="round")
            ax.plot(0, 0, "o", color="C3", ms=3)
            ax.set_xlim(-1.15, 1.15)
            ax.set_ylim(-1.15, 1.15)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ax.spines.values():
                side.set_visible(False)
            if r == 0:
                ax.set_title(f"pair {i}\n1 turn / {2 * np.pi / omega[i]:.3g}", fontsize=7)
            if i == 0:
                ax.set_ylabel(f"pos {pos}", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# --- Lesson 08: multi-head attention ------------------------------------------


def head_grid(
    weights,
    words,
    *,
    key_words=None,
    title: str = "",
    head_titles=None,
    ncols: int | None = None,
    annotate: bool = False,
    cmap: str = SEQUENTIAL_CMAP,
    xlabel: str = "key (attended to)",
    ylabel: str = "query (attending)",
) -> Figure:
    """One small attention heatmap per head, side by side, on a shared 0-to-1 colour scale.

    `weights` is `(n_heads, T, T_ctx)`, or `(1, n_heads, T, T_ctx)` as `MultiHeadAttention.last_weights`
    holds it for a batch of one. Rows are the queries (`words`), columns the keys (`key_words`, which
    default to `words`: self-attention). Returns the figure; end the cell with `plt.show()`.
    """
    w = _array(weights)
    if w.ndim == 4:
        if w.shape[0] != 1:
            raise ValueError(
                f"head_grid draws one example: expected weights of shape (n_heads, T, T_ctx) or "
                f"(1, n_heads, T, T_ctx), got {w.shape}; pick one example with weights[i]"
            )
        w = w[0]
    if w.ndim != 3:
        raise ValueError(f"head_grid expects weights of shape (n_heads, T, T_ctx), got shape {w.shape}")
    n_heads, T, S = w.shape
    words = [str(t) for t in words]
    key_words = words if key_words is None else [str(t) for t in key_words]
    if len(words) != T or len(key_words) != S:
        raise ValueError(
            f"head_grid got {len(words)} query words and {len(key_words)} key words for weights "
            f"of shape {w.shape} (expected {T} and {S})"
        )
    if head_titles is None:
        head_titles = [f"head {h}" for h in range(n_heads)]
    if len(head_titles) != n_heads:
        raise ValueError(f"head_grid got {len(head_titles)} head titles for {n_heads} heads")
    ncols = min(n_heads, 4) if ncols is None else max(1, int(ncols))
    nrows = -(-n_heads // ncols)  # ceiling division
    # inches per heatmap: big enough for the tick labels, and the row of heatmaps (with its labels and
    # colour bar) no wider than the notebook's column, 8.48 in at 100 dpi, so it is shown unscaled
    cell = min(0.8 + 0.22 * max(T, S), (8.3 - 1.0) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(cell * ncols + 1.0, min(cell * nrows + 0.6, 12)),
                             squeeze=False, layout="constrained")
    for h, ax in enumerate(axes.flat):
        if h >= n_heads:
            ax.axis("off")
            continue
        im = ax.imshow(w[h], cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")  # weights are probabilities
        ax.set_title(head_titles[h], fontsize=9)
        row, col = divmod(h, ncols)
        ax.set_xticks(range(S), labels=key_words if row == nrows - 1 or h + ncols >= n_heads else [""] * S,
                      rotation=90, fontsize=7)
        ax.set_yticks(range(T), labels=words if col == 0 else [""] * T, fontsize=7)
        if annotate:
            _annotate(ax, im, w[h], "{:.2f}", fontsize=7)
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.025, pad=0.02, label="attention weight")
    fig.supxlabel(xlabel, fontsize=9)
    fig.supylabel(ylabel, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
