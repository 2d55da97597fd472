"""Matplotlib figures used across the lessons.

Every function returns the `Figure` it drew, so a notebook cell can end with `plt.show()` and
tests can inspect the axes. Nothing is drawn at import time.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


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
    cmap: str = "viridis",
    ax=None,
) -> Figure:
    """A labelled heatmap of a 2-D array or tensor (annotated with its values when it is small)."""
    if hasattr(matrix, "detach"):
        matrix = matrix.detach().cpu().numpy()
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix, got shape {m.shape}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(min(1.0 + 0.6 * m.shape[1], 12), min(1.0 + 0.5 * m.shape[0], 10)))
    else:
        fig = ax.figure
    im = ax.imshow(m, cmap=cmap, aspect="auto")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    if row_labels is not None:
        ax.set_yticks(range(m.shape[0]), labels=[str(r) for r in row_labels])
    if col_labels is not None:
        ax.set_xticks(range(m.shape[1]), labels=[str(c) for c in col_labels], rotation=45, ha="right")
    if annotate is None:
        annotate = m.size <= 144
    if annotate:
        mid = (np.nanmax(m) + np.nanmin(m)) / 2 if m.size else 0
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, fmt.format(m[i, j]), ha="center", va="center", fontsize=8,
                        color="black" if m[i, j] > mid else "white")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.tight_layout()
    return fig


def loss_curve(history: dict, *, title: str = "Loss", ax=None) -> Figure:
    """Plot every list in `history` (e.g. {'train': [...], 'val': [...]}) against its step."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
    else:
        fig = ax.figure
    for name, values in history.items():
        ax.plot(range(len(values)), values, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


# === Lesson-specific figures =======================================================================
# One section per lesson, added as lessons land.

# --- Lesson 01: one-hot vectors and dot products ------------------------------


# --- Lesson 02: Markov models -------------------------------------------------


# --- Lesson 03: from skips to attention ---------------------------------------


# --- Lesson 06: attention -----------------------------------------------------


# --- Lesson 07: position ------------------------------------------------------


# --- Lesson 08: multi-head attention ------------------------------------------
