"""Checks that exercise notebooks call: the general helpers in `core`, re-exported here, and one
module per lesson (`lesson06`, ...) with that lesson's references, mistake tables and checks."""
from .core import (
    FAIL_MARK,
    PASS_MARK,
    CheckFailed,
    NotAttempted,
    answer,
    call,
    check_all,
    check_choice,
    check_sealed,
    check_close,
    check_count,
    check_equal,
    check_function,
    check_shape,
    check_shape_answer,
    check_tensor,
    check_true,
    check_type,
    passed,
    seal,
)

__all__ = [
    "FAIL_MARK", "PASS_MARK", "CheckFailed", "NotAttempted", "answer", "call", "check_choice", "check_close", "check_sealed", "seal",
    "check_count", "check_equal", "check_function", "check_shape", "check_shape_answer", "check_tensor",
    "check_true", "check_type", "passed", "check_all",
]
