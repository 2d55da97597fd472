"""Small helpers that the checks share, in core and in the lesson modules: how a value is shown in a
learner's message, and how arrays are compared."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = ["close", "fmt", "function_name", "short", "to_array"]


def to_array(value: Any) -> np.ndarray:
    """`value` (a tensor, array, list or number) as a numpy array; a float tensor as float64."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.to(torch.float64).numpy() if value.is_floating_point() else value.numpy()
    return np.asarray(value)


def short(value: Any, limit: int = 60) -> str:
    """`value` in at most `limit` characters, for a message: a tensor or array by its shape."""
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)}"
    elif isinstance(value, np.ndarray):
        text = f"array of shape {value.shape}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt(x: float) -> str:
    """A number for a message: an int as it is, a float in 6 significant digits."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return f"{x:.6g}"


def close(actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> bool:
    """The same shape and `np.allclose` (NaN equal to NaN); False for values that cannot be compared."""
    try:
        return actual.shape == expected.shape and bool(
            np.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True))
    except (TypeError, ValueError):
        return False


def function_name(label: str) -> str:
    """The function's own name from a check's label: "receptive_field (more cases)" -> "receptive_field",
    so that a failing call reads receptive_field(0, 3), not "receptive_field (more cases)(0, 3)"."""
    return label.split(" (")[0]
