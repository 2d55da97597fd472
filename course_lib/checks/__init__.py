"""Checks that exercise notebooks call: the general helpers in `core` (its `__all__`, re-exported
here; its docstring lists them), and one module per lesson (`lesson06`, ...) with that lesson's
references, mistake tables, sealed answers and checks."""
from .core import (
    CheckFailed,
    NotAttempted,
    Seals,
    answer,
    call,
    check_all,
    check_close,
    check_count,
    check_equal,
    check_function,
    check_shape,
    check_tensor,
    check_true,
    check_type,
    passed,
    seal,
    set_answer_source,
)

__all__ = [
    "CheckFailed", "NotAttempted", "Seals", "answer", "call", "check_all", "check_close", "check_count",
    "check_equal", "check_function", "check_shape", "check_tensor", "check_true", "check_type", "passed", "seal",
    "set_answer_source",
]
