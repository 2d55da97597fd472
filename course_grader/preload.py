"""Imported once by the server that forks the grader's checking processes (see `worker`): the modules
they all need, so that each fresh process has them without importing them again.

The list is `worker.BASE_PRELOAD` and the modules the solution notebooks' setup cells import (the
environment variable COURSE_GRADER_PRELOAD, set by `worker.run_batch`). A module that fails to import
is left for the checking process to import (and to fail on) itself.
"""

import gc
import importlib
import os
import sys

from course_grader.worker import BASE_PRELOAD, PRELOAD_ENV

for _name in dict.fromkeys([*BASE_PRELOAD, *filter(None, os.environ.get(PRELOAD_ENV, "").split(","))]):
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001, S112 - it will be imported (or fail) where it is used
        pass

# The checks compute on small tensors: one thread each, which a machine busy with other work does not
# make wait for the others.
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)

# Every checking process is forked from this one: what it imported stays shared with them, page for page,
# only as long as nobody writes to it, and the garbage collector would (a full collection visits, and so
# copies, every object). Frozen, those objects are never collected or visited again, here or there.
gc.collect()
gc.freeze()
