"""Test-wide setup: a private home for Jupyter, IPython and matplotlib, no progress bars, and
GPU-only notebook cells skipped when there is no GPU.

The environment variables are set at import time, before pytest-xdist workers or nbval start any
kernel, so every kernel inherits them and nothing is written into the user's home.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

_home = Path(tempfile.mkdtemp(prefix="course-tests-"))
for var, sub in [
    ("IPYTHONDIR", "ipython"),
    ("MPLCONFIGDIR", "matplotlib"),
    ("JUPYTER_CONFIG_DIR", "jupyter-config"),
    ("JUPYTER_DATA_DIR", "jupyter-data"),
    ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"),
]:
    (_home / sub).mkdir(parents=True, exist_ok=True)
    os.environ[var] = str(_home / sub)
os.environ["TQDM_DISABLE"] = "1"
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's frozen-modules warning on stderr
os.environ["PYTHONWARNINGS"] = "ignore::DeprecationWarning"


def pytest_collection_modifyitems(config, items):
    """Skip notebook cells tagged `gpu` unless CUDA is available."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="cell tagged 'gpu' and no CUDA device is available")
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and "gpu" in cell.get("metadata", {}).get("tags", []):
            item.add_marker(skip)


@pytest.fixture
def shared_data() -> Path:
    """The course's reference data folder (../shared/data); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data folder {SHARED_DATA} is not present")
    return SHARED_DATA
