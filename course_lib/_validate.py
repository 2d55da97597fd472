"""The argument checks that every lesson module shares.

Python's ``bool`` is a subclass of ``int``: ``isinstance(True, int)`` holds and ``True + True == 2``.
So "is this a whole number?" must rule bools out by hand, or ``GPTConfig(n_layer=True)`` would build
a one-layer model without a word. `is_int` and `is_number` do that once for the whole library (numpy's
integer and floating scalars count, as they do everywhere else in numpy); `check_int` adds the usual
error message. A module that wants its own wording calls the predicates and raises its own error.

Importing this module runs nothing.
"""
from __future__ import annotations

import numpy as np

__all__ = ["is_int", "is_number", "check_int"]


def is_int(value) -> bool:
    """True for an int or a numpy integer, False for a bool (True is an int to Python, not a count)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_number(value) -> bool:
    """True for an int or a float (numpy's too), False for a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def check_int(name: str, value, minimum: int = 1, what: str = "") -> int:
    """`value` if it is an int >= `minimum`, else a ValueError that says so.

    The message reads "``name`` must be a positive int (``what``), got ``value``" for ``minimum=1``,
    "a non-negative int" for 0, and "an int >= ``minimum``" otherwise.
    """
    if is_int(value) and value >= minimum:
        return value
    kind = {1: "a positive int", 0: "a non-negative int"}.get(minimum, f"an int >= {minimum}")
    because = f" ({what})" if what else ""
    raise ValueError(f"{name} must be {kind}{because}, got {value!r}")
