"""ipywidgets explorers for the lessons.

Each function builds and returns a widget (it does not display it), so the notebook cell can
end with the call and JupyterLab renders it. Importing this module creates no widgets.

A notebook stores, next to the live widget, a plain-text form of it, and that is what a reader sees
before running the notebook (JupyterLab renders stored widgets only in a trusted notebook with a
live kernel). For an ordinary widget that text is its repr, `VBox(children=(FloatLogSlider(...`,
which looks like a broken install. The explorers here are `Explorer` boxes, whose plain-text form
is a friendly line instead ("Run this cell to get the slider."), written into the notebook every
time it is executed, with no post-processing.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np


class Explorer(widgets.VBox):
    """A VBox whose plain-text form, stored in the notebook, is a hint for a reader, not a repr.

    In a live notebook it is an ordinary VBox (the widget view is unchanged); `hint` only replaces
    the `text/plain` entry of its display data.
    """

    def __init__(self, children, what: str, **kwargs):
        super().__init__(children, **kwargs)
        # what the notebook shows for this widget before it is run (and, if widgets do not work, after)
        self.hint = (
            f"Run this cell to get the {what}.\n"  # two lines: each fits the notebook column
            "(Still this line after running it? See Troubleshooting in the README.)"
        )

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:  # None once the widget is closed
            bundle["text/plain"] = self.hint
        return bundle


# === Lesson-specific widgets =======================================================================
# One section per lesson, added as lessons land.

# --- Lesson 06: attention -----------------------------------------------------


def softmax_temperature_explorer(scores, labels=None, *, min_temperature: float = 0.05, max_temperature: float = 20.0):
    """A temperature slider over softmax(scores / temperature), drawn as a bar chart.

    Low temperature: the largest score takes (almost) all the weight; high: the weights flatten
    towards uniform. Dividing scores by √d_k is the same as a temperature of √d_k.
    """
    import torch

    from course_lib.attention import softmax
    from course_lib.viz import attention_bars

    s = torch.as_tensor(scores, dtype=torch.float64).flatten()  # (N,)
    if s.numel() < 2:
        raise ValueError(f"softmax_temperature_explorer needs at least 2 scores, got {s.numel()}")
    labels = list(labels) if labels is not None else [f"{x:.1f}" for x in s.tolist()]
    if len(labels) != s.numel():
        raise ValueError(f"got {len(labels)} labels for {s.numel()} scores")
    slider = widgets.FloatLogSlider(
        value=1.0,
        base=10,
        min=np.log10(min_temperature),
        max=np.log10(max_temperature),
        step=0.02,
        description="temperature",
        readout_format=".2f",
        style={"description_width": "initial"},  # the whole label, not "temperat…"
        continuous_update=True,
        layout=widgets.Layout(width="480px"),
    )
    out = widgets.Output()

    def draw(change=None):
        w = softmax(s / slider.value)  # (N,)
        with out:
            out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(6, 3))
            attention_bars(labels, w, ax=ax)
            ax.set_title(f"$\\mathrm{{softmax}}(s / {slider.value:.2f})$: largest weight {float(w.max()):.2f}")
            ax.set_xlabel("score $s$")
            plt.show()

    slider.observe(draw, names="value")
    draw()
    return Explorer([slider, out], what="temperature slider")


def attention_explorer(words, q, k, v, *, feature_names=None, scale: bool = True):
    """Pick a query word: see its attention weights over the sentence and the weighted average of the values.

    `q`, `k` are (N, d_k), `v` is (N, d_v) for the N `words`. The right panel shows every value
    vector and, in the last row, the output Σ_j α_j v_j for the chosen query; its columns are
    labelled with `feature_names` (one per value feature; default "dim 0", "dim 1", ...).
    """
    import torch

    from course_lib.attention import scaled_dot_product_attention
    from course_lib.viz import attention_bars, heatmap

    q, k, v = (torch.as_tensor(t, dtype=torch.float64) for t in (q, k, v))
    n = len(words)
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2 or not (q.shape[0] == k.shape[0] == v.shape[0] == n):
        raise ValueError(
            f"attention_explorer expects q, k, v shaped (N, d) with N={n} words, got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if feature_names is None:
        feature_names = [f"dim {c}" for c in range(v.shape[1])]
    feature_names = [str(f) for f in feature_names]
    if len(feature_names) != v.shape[1]:
        raise ValueError(f"got {len(feature_names)} feature names for values with {v.shape[1]} features")
    if not scale:  # undo the library's 1/√d_k by pre-multiplying q
        q = q * q.shape[-1] ** 0.5
    out_vectors, weights = scaled_dot_product_attention(q, k, v)  # (N, d_v), (N, N)
    choice = widgets.Dropdown(options=[(f"{i}: {w}", i) for i, w in enumerate(words)], value=0, description="query")
    out = widgets.Output()

    def draw(change=None):
        i = choice.value
        with out:
            out.clear_output(wait=True)
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw={"width_ratios": [3, 2]})
            attention_bars(words, weights[i], ax=ax1, title=f"weights of query '{words[i]}' (sum = 1)")
            table = torch.cat([v, out_vectors[i : i + 1]], dim=0)  # (N + 1, d_v)
            heatmap(
                table,
                row_labels=[f"v[{w}]" for w in words] + ["output"],
                col_labels=feature_names,
                cmap="RdBu_r",
                symmetric=True,
                ax=ax2,
                xlabel="feature",
                title=r"values $v_j$ and the output $\Sigma_j\, \alpha_j v_j$",
            )
            plt.show()

    choice.observe(draw, names="value")
    draw()
    return Explorer([choice, out], what="query picker")


# --- Lesson 07: position ------------------------------------------------------


def clock_hands_explorer(d_model: int = 16, max_position: int = 200, base: float = 10000.0) -> Explorer:
    """A position slider and one clock per sin/cos pair of the sinusoidal encoding.

    Moving the slider by one step turns hand i clockwise by base^(-2i/d_model) radians: the left
    clocks spin like a seconds hand, the right ones barely move. The numbers under the clocks are
    the encoding PE[pos] itself, two per clock: (sin, cos) = the hand's (x, y).
    """
    from course_lib import viz  # local import: widgets stays importable on its own
    from course_lib.positional import sinusoidal_encoding

    if d_model < 2 or d_model % 2:
        raise ValueError(f"clock_hands_explorer needs an even d_model >= 2, got {d_model}")
    slider = widgets.IntSlider(
        value=0,
        min=0,
        max=max_position,
        step=1,
        description="position",
        continuous_update=True,
        layout=widgets.Layout(width="420px"),
    )
    out = widgets.Output()
    table = sinusoidal_encoding(max_position + 1, d_model, base).numpy()

    def redraw(change=None) -> None:
        pos = slider.value
        with out:
            out.clear_output(wait=True)
            fig = plt.figure(figsize=(min(1.0 * d_model // 2 + 0.6, 12), 1.8))
            viz.clock_hands([pos], d_model, base, fig=fig, title=f"the clock hands of PE[{pos}]")
            plt.show()
            print(
                "PE[pos] =", [round(float(v), 3) + 0.0 for v in table[pos]]
            )  # float32 -> Python floats first: no 0.95899999

    slider.observe(redraw, names="value")
    redraw()
    return Explorer([slider, out], what="position slider")
