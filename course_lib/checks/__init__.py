"""Checks that exercise notebooks call: the general helpers in `core` (its `__all__`, re-exported
here; its docstring lists them), and one module per lesson (`lesson06`, ...) with that lesson's
references, mistake tables, sealed answers and checks."""

from . import core
from .core import *  # noqa: F403 (core.__all__ is the public API, listed once, there)

__all__ = list(core.__all__)
