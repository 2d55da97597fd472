"""Imported once by the server that forks the grader's checking processes (see `worker`): the modules
they all need, so that each fresh process has them without importing them again.

The list is `worker.BASE_PRELOAD` and the modules the solution notebooks' setup cells import (the
environment variable COURSE_GRADER_PRELOAD, set by `worker.run_batch`). A module that fails to import
is left for the checking process to import (and to fail on) itself.
"""

import importlib
import os

from course_grader.worker import BASE_PRELOAD, PRELOAD_ENV

for _name in dict.fromkeys([*BASE_PRELOAD, *filter(None, os.environ.get(PRELOAD_ENV, "").split(","))]):
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001, S112 - it will be imported (or fail) where it is used
        pass
