"""Test-wide setup, loaded for every pytest run by `-p course_pytest_plugin` in pyproject.toml
(a conftest.py in tests/ would not apply when only a notebook is tested): a private home for
Jupyter, IPython and matplotlib, no progress bars, nbval kernels over Unix sockets, and GPU-only
notebook cells skipped when there is no GPU.

The environment variables are set at import time, before pytest-xdist workers or nbval start any
kernel, so every kernel inherits them and nothing is written into the user's home.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

_home = Path(tempfile.mkdtemp(prefix="course-tests-"))
atexit.register(shutil.rmtree, _home, ignore_errors=True)
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
# pytest-xdist already runs one worker per core (make test: -n 2 on two cores). Torch's own thread pool
# on top of that oversubscribes the cores, and its tiny matrix products then spend most of their time
# waiting for each other (a GPT training step: 0.8 s with one thread each, 13-20 s with two).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Tests never download: Tiny Shakespeare is read from ../shared/data when it is there, and a
# notebook that needs it is skipped (with the reason) when it is not.
os.environ["COURSE_DATA_DIR"] = str(SHARED_DATA if SHARED_DATA.is_dir() else _home / "no-data")
os.environ["COURSE_NO_DOWNLOAD"] = "1"
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's frozen-modules warning on stderr
os.environ["PYTHONWARNINGS"] = "ignore::DeprecationWarning"


def _nbval_kernels_over_unix_sockets() -> None:
    """Start nbval's kernels with IPC transport instead of TCP (POSIX only).

    With TCP, jupyter_client picks a free port and the kernel binds it a second later; with two
    pytest-xdist workers and the grader's tests all starting kernels, another kernel can take the
    port first ("Address already in use") and a notebook fails for no reason of its own.
    """
    if os.name != "posix":
        return
    import nbval.kernel
    from jupyter_client.manager import KernelManager

    class IPCKernelManager(KernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            # Socket paths are limited to about 100 characters: keep them short.
            self.ip = os.path.join(tempfile.mkdtemp(prefix="k-", dir=_home), "k")

    nbval.kernel.KernelManager = IPCKernelManager


_nbval_kernels_over_unix_sockets()


def _missing_data(item) -> list[str]:
    """The data files a notebook declares in its metadata (`"course": {"data": ["tinyshakespeare.txt"]}`)
    that ../shared/data does not hold."""
    nb = getattr(item.parent, "nb", None)
    needs = (nb or {}).get("metadata", {}).get("course", {}).get("data", [])
    return [name for name in needs if not (SHARED_DATA / name).is_file()]


BROWSER_TESTS = REPO / "tests" / "browser"

# The files that take longest run first: pytest-xdist (`--dist loadfile`) hands out whole files in
# the order they were collected, and one long file started last would run alone at the end while the
# other workers wait. Then the notebooks; the many quick files fill the gaps at the end.
LONGEST_FIRST = (
    "tests/test_grade.py",
    "tests/test_class.py",
    "tests/browser/test_lessons_",
    "tests/browser/test_site.py",
    "tests/test_nbgrader_route.py",
    "tests/browser/test_learner.py",
    "tests/test_check_command.py",
    "tests/test_exercise_leaks.py",
    "notebooks/",
    "solutions/",
)


def _running_order(item) -> int:
    path = Path(item.path).resolve()
    where = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()
    return next((i for i, start in enumerate(LONGEST_FIRST) if where.startswith(start)), len(LONGEST_FIRST))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: starts a kernel, the sandbox or a browser")


def pytest_collection_modifyitems(config, items):
    """Put the longest files first (see LONGEST_FIRST); mark every notebook cell (nbval starts a
    kernel) and every browser test `slow`, so that `pytest -m "not slow"` is the quick loop; skip
    notebook cells tagged `gpu` unless CUDA is available, and every cell of a notebook whose data
    files are absent from ../shared/data."""
    import torch

    items.sort(key=_running_order)  # stable: each file keeps its own order
    gpu_skip = pytest.mark.skip(reason="cell tagged 'gpu' and no CUDA device is available")
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None or BROWSER_TESTS in Path(item.path).parents:
            item.add_marker(pytest.mark.slow)
        if cell is None:
            continue
        missing = _missing_data(item)
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)} in {SHARED_DATA} (absent)"))
        elif "gpu" in cell.get("metadata", {}).get("tags", []) and not torch.cuda.is_available():
            item.add_marker(gpu_skip)


@pytest.fixture
def shared_data() -> Path:
    """The course's reference data folder (../shared/data); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data folder {SHARED_DATA} is not present")
    return SHARED_DATA
