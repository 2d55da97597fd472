"""ipywidgets explorers for the lessons.

Each function builds and returns a widget (it does not display it), so the notebook cell can
end with the call and JupyterLab renders it; under nbval a widget's text output is just its repr.
Importing this module creates no widgets.
"""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

# === Lesson-specific widgets =======================================================================
# One section per lesson, added as lessons land.

# --- Lesson 06: attention -----------------------------------------------------


# --- Lesson 07: position ------------------------------------------------------
