"""Checks that exercise notebooks call.

A check either prints one line saying what passed, or raises `CheckFailed` (an `AssertionError`, so
the grader counts it as a failed test) whose message says what is wrong and, when the answer
matches a known mistake, which one. In a notebook the message is shown on its own, without a
traceback: IPython calls `_render_traceback_` on exceptions that define it.

An exercise that was not attempted (its answer cell still raises `NotImplementedError`, or the
variable it should define does not exist) raises `NotAttempted`, which says so plainly.

Typical test cells::

    checks.check_function("one_hot", one_hot, [([2, 0], 3)], reference=vectors.one_hot)
    checks.check_close("cos_ab", checks.answer("cos_ab"), 0.5)

The first part of this module is the general machinery; below it, one section per lesson holds
the checks that know that lesson's likely mistakes.
"""
from __future__ import annotations

import difflib
import math
import sys
from collections import Counter, OrderedDict, defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

PASS_MARK = "✔"
FAIL_MARK = "✘"


class CheckFailed(AssertionError):
    """A check failed; the message is written for the learner."""

    def __init__(self, name: str, problem: str, hint: str | None = None):
        self.name, self.problem, self.hint = name, problem, hint
        text = f"{FAIL_MARK} {name}: {problem}"
        if hint:
            text += f"\n  Hint: {hint}"
        super().__init__(text)

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        return str(self).splitlines()


class NotAttempted(CheckFailed):
    """The exercise still holds its `raise NotImplementedError()`."""

    def __init__(self, name: str, near: str | None = None):
        hint = "replace `raise NotImplementedError()` in the answer cell with your code, run that cell, then this one."
        if near is not None:  # the cell ran, but under another name: the likeliest reason it looks unanswered
            hint = f"nothing called `{name}` is defined yet; `{near}` is: if you meant this name, check the spelling."
        super().__init__(name, "not attempted yet.", hint)


def passed(name: str, detail: str = "") -> None:
    """Print the one line a learner sees when a check passes."""
    print(f"{PASS_MARK} {name}: passed" + (f" ({detail})" if detail else ""))


# --- getting at the learner's answer -------------------------------------------------------------

_MISSING = object()


def answer(variable: str) -> Any:
    """The value of `variable` in the notebook, or `NotAttempted` if the answer cell never defined it."""
    frame = sys._getframe(1)
    value = frame.f_locals.get(variable, frame.f_globals.get(variable, _MISSING))
    if value is _MISSING:
        main = sys.modules.get("__main__")
        value = getattr(main, variable, _MISSING)
    if value is _MISSING or value is Ellipsis:
        names = [n for n in {**frame.f_globals, **frame.f_locals} if not n.startswith("_")]
        near = difflib.get_close_matches(variable, names, n=1, cutoff=0.8) if value is _MISSING else []
        raise NotAttempted(variable, near[0] if near else None)
    return value


def call(name: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's `fn`, turning `NotImplementedError` and crashes into readable failures."""
    if not callable(fn):
        raise CheckFailed(name, f"expected a function, got {type(fn).__name__}.")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise NotAttempted(name) from None
    except CheckFailed:
        raise
    except Exception as err:  # the learner's code crashed: say where, not a traceback
        shown = ", ".join([_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()])
        raise CheckFailed(name, f"raised {type(err).__name__}: {err} when called as {name}({shown}).") from None


# --- comparing values ------------------------------------------------------------------------------


def _to_array(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().to(torch.float64).numpy() if value.is_floating_point() else value.detach().cpu().numpy()
    return np.asarray(value)


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)}"
    elif isinstance(value, np.ndarray):
        text = f"array of shape {value.shape}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _custom_equality(value: Any, depth: int = 0) -> bool:
    """True if `value`, or anything inside a list/tuple/dict/set it holds, has an `__eq__` written in
    Python: such an object decides for itself whether it "equals" the expected answer."""
    if depth > 20:
        return True
    kind = type(value)
    trusted = kind in (Counter, OrderedDict, defaultdict)  # standard containers with __eq__ in Python
    if not trusted and any(isinstance(getattr(kind, m, None), type(_custom_equality)) for m in ("__eq__", "__ne__")):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_custom_equality(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_custom_equality(k, depth + 1) or _custom_equality(v, depth + 1) for k, v in value.items())
    return False


def _close(actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> bool:
    try:
        return actual.shape == expected.shape and bool(np.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True))
    except (TypeError, ValueError):
        return False


def check_type(name: str, value: Any, expected: type | tuple[type, ...]) -> None:
    """Fail unless `value` is an instance of `expected`."""
    if not isinstance(value, expected):
        wanted = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        raise CheckFailed(name, f"expected a {wanted}, got {type(value).__name__} ({_short(value)}).")


def check_tensor(name: str, value: Any, where: str = "", hint: str | None = None) -> None:
    """Fail unless `value` is a torch.Tensor: the usual slip is a numpy array from .numpy() or np.*."""
    if not isinstance(value, torch.Tensor):
        raise CheckFailed(name, f"expected a torch.Tensor, got {type(value).__name__}" + (f" {where}" if where else "") + ".",
                          hint or "stay in torch from start to end (no .numpy(), no numpy functions): the result feeds "
                                  "the next torch layer, and gradients only flow through torch operations; "
                                  "convert a numpy result back with torch.as_tensor(...)")


def check_shape(name: str, value: Any, expected_shape: Sequence[int]) -> None:
    """Fail unless `value` (array, tensor or a shape tuple) has `expected_shape`."""
    shape = tuple(value) if isinstance(value, (tuple, list, torch.Size)) else tuple(np.shape(_to_array(value)))
    expected_shape = tuple(expected_shape)
    if shape != expected_shape:
        hint = None
        if sorted(shape) == sorted(expected_shape):
            hint = "the right sizes in the wrong order: is something transposed, or an axis swapped?"
        raise CheckFailed(name, f"expected shape {expected_shape}, got {shape}.", hint)


def check_shape_answer(name: str, value: Any, expected: Sequence[int], mistakes: Mapping[str, Sequence[int]] | None = None,
                       hint: str | None = None) -> None:
    """A shape predicted by hand (a tuple, list or torch.Size of ints), naming known wrong predictions."""
    if value is None:
        raise CheckFailed(name, "got None: write the shape as a tuple of ints, e.g. (2, 3).")
    if not isinstance(value, (tuple, list)) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in value):
        raise CheckFailed(name, f"expected a tuple of ints such as (2, 3), got {_short(value)}.")
    got, expected = tuple(int(d) for d in value), tuple(expected)
    if got == expected:
        passed(name)
        return
    for description, wrong in (mistakes or {}).items():
        if got == tuple(wrong):
            raise CheckFailed(name, f"{got} is not right.", f"it looks like you {description}.")
    if len(got) != len(expected):
        hint = f"the result has {len(expected)} axes here, your answer has {len(got)}. " + (hint or "")
    elif sorted(got) == sorted(expected):
        hint = "the right sizes in the wrong order: is something transposed, or an axis swapped?"
    raise CheckFailed(name, f"{got} is not right.", hint)


def check_close(
    name: str,
    actual: Any,
    expected: Any,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    mistakes: Mapping[str, Any] | None = None,
    hint: str | None = None,
    quiet: bool = False,
    reveal: bool = True,
) -> None:
    """Compare numbers, arrays or tensors; name a known mistake when the answer matches one.

    `mistakes` maps a description ("forgot to divide by sqrt(d_k)") to the value that mistake
    produces; the first that matches `actual` becomes the hint. `reveal=False` is for answers
    worked out by hand: a wrong one is called wrong without printing the expected value.
    """
    if actual is None:
        raise CheckFailed(name, "got None: did you forget to `return` the result (or to assign the variable)?")
    e = _to_array(expected)
    try:
        a = _to_array(actual)
    except (ValueError, TypeError):  # e.g. a ragged list of lists
        raise CheckFailed(name, f"expected {'a number' if e.size == 1 else 'numbers'}, got {_short(actual)}, which is not a regular array of numbers.") from None
    if a.dtype.kind not in "biuf":
        raise CheckFailed(name, f"expected {'a number' if e.size == 1 else 'numbers'}, got "
                          f"{type(actual).__name__} ({_short(actual)}).")
    if a.shape != e.shape:
        if a.size == e.size == 1:
            a = a.reshape(e.shape)
        else:
            check_shape(name, a, e.shape)
    if _close(a, e, atol, rtol):
        if not quiet:
            passed(name)
        return
    for description, wrong in (mistakes or {}).items():
        if _close(a, _to_array(wrong), atol, rtol):
            raise CheckFailed(name, "the values are not right.", f"it looks like you {description}.")
    if a.ndim == 2 and a.shape == e.T.shape and _close(a, e.T, atol, rtol):
        raise CheckFailed(name, "the values are not right.", "your result is the transpose of the expected one.")
    if e.size == 1:
        problem = f"expected {_fmt(e.item())}, got {_fmt(a.item())}." if reveal else f"{_fmt(a.item())} is not right."
    elif not reveal:
        problem = "the values are not right."
    else:
        with np.errstate(invalid="ignore"):
            diff = np.abs(a.astype(float) - e.astype(float))
        worst = np.unravel_index(int(np.nanargmax(diff)) if np.isfinite(diff).any() else 0, diff.shape)
        problem = (
            f"values differ from the expected ones (largest difference {_fmt(float(np.nanmax(diff)))} at index "
            f"{tuple(int(i) for i in worst)}: expected {_fmt(float(e[worst]))}, got {_fmt(float(a[worst]))})."
        )
        if np.isnan(a.astype(float)).any():
            problem += " Your result contains NaN."
    raise CheckFailed(name, problem, hint)


def check_equal(name: str, actual: Any, expected: Any, *, hint: str | None = None, quiet: bool = False) -> None:
    """Exact comparison (ints, strings, lists, dicts; arrays element-wise)."""
    if isinstance(expected, (np.ndarray, torch.Tensor)) or isinstance(actual, (np.ndarray, torch.Tensor)):
        a, e = _to_array(actual), _to_array(expected)
        check_shape(name, a, e.shape)
        ok = bool(np.array_equal(a, e))
    elif _custom_equality(actual):
        # An object whose own __eq__ decides the comparison could claim to equal anything.
        raise CheckFailed(name, f"expected {_short(expected, 120)}, got an object of type {type(actual).__name__} "
                          "that defines its own comparison.", hint)
    else:
        ok = actual == expected
    if not ok:
        raise CheckFailed(name, f"expected {_short(expected, 120)}, got {_short(actual, 120)}.", hint)
    if not quiet:
        passed(name)


def check_true(name: str, condition: bool, problem: str, hint: str | None = None) -> None:
    """Fail with `problem` unless `condition` holds (for properties such as 'rows sum to 1')."""
    if not condition:
        raise CheckFailed(name, problem, hint)


def check_count(name: str, value: Any, expected: int, mistakes: Mapping[str, int] | None = None, *,
                hint: str | None = None, quiet: bool = False, detail: str = "") -> None:
    """A whole-number answer (steps, layers, patches, parameters): say when it is not a number,
    not whole, or equal to a count that a known mistake gives (`mistakes`: description -> count)."""
    if value is None:
        raise CheckFailed(name, "got None: did you forget to `return` the result (or to assign the variable)?")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CheckFailed(name, f"expected a whole number (an int), got {type(value).__name__} ({_short(value)}).")
    if not float(value).is_integer():
        raise CheckFailed(name, f"expected a whole number, got {_fmt(float(value))}.",
                          "a count is a whole number: did a division leave a fraction?")
    value = int(value)
    if value == expected:
        if not quiet:
            passed(name, detail)
        return
    for description, wrong in (mistakes or {}).items():
        if value == wrong != expected:
            raise CheckFailed(name, f"{value:,} is not right.", f"it looks like you {description}.")
    raise CheckFailed(name, f"{value:,} is not right.", hint)


def check_function(
    name: str,
    fn: Callable,
    cases: Iterable[tuple[tuple, dict] | tuple],
    reference: Callable,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    mistakes: Mapping[str, Callable] | None = None,
    hint: str | None = None,
) -> None:
    """Call `fn` and `reference` on each case and compare the results with `check_close`.

    Each case is an args tuple, or an `(args, kwargs)` pair. `mistakes` maps a description to a
    function that makes that mistake, so a wrong answer that matches it is named.
    """
    n = 0
    for case in cases:
        args, kwargs = case if (len(case) == 2 and isinstance(case[0], tuple) and isinstance(case[1], dict)) else (case, {})
        got = call(name, fn, *args, **kwargs)
        want = reference(*args, **kwargs)
        wrong = {d: m(*args, **kwargs) for d, m in (mistakes or {}).items()}
        shown = ", ".join(_short(a, 30) for a in args)
        check_close(f"{name}({shown})", got, want, atol=atol, rtol=rtol, mistakes=wrong, hint=hint, quiet=True)
        n += 1
    passed(name, f"{n} case{'s' if n != 1 else ''}")


def _fmt(x: float) -> str:
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return f"{x:.6g}"


# === Lesson-specific checks ========================================================================
# One section per lesson. Each check takes the learner's function or value and knows the mistakes
# that lesson's exercises invite.

# --- Lesson 00: welcome -------------------------------------------------------


def _l00_fn_name(name: str) -> str:
    """The function's own name from a check's label: "receptive_field (more cases)" -> "receptive_field",
    so that a failing call reads receptive_field(0, 3), not "receptive_field (more cases)(0, 3)"."""
    return name.split(" (")[0]


def _l00_reference_sample(seed: int) -> torch.Tensor:
    from course_lib.device import seed_everything

    seed_everything(seed)
    return torch.randn(5)


def check_reproducible_sample(fn: Callable, seeds: Sequence[int] = (0, 7), name: str = "reproducible_sample") -> None:
    """The learner's `reproducible_sample(seed)`: seed everything, then return `torch.randn(5)`."""
    fn_name = _l00_fn_name(name)
    for seed in seeds:
        first = call(fn_name, fn, seed)
        torch.randn(100)  # move the global generator on: a function that seeds itself does not care
        np.random.rand(100)
        second = call(fn_name, fn, seed)
        shown = f"{fn_name}({seed})"
        check_type(shown, first, torch.Tensor)
        check_shape(shown, first, (5,))
        check_true(shown, bool(torch.equal(first, second)),
                   "two calls with the same seed gave different numbers.",
                   "call seed_everything(seed) INSIDE the function, right before drawing the numbers.")
        want = _l00_reference_sample(seed)
        mistakes = {"used torch.rand (uniform on [0, 1)) instead of torch.randn (normal)": _l00_uniform(seed)}
        if seed != 0:
            mistakes["ignored the `seed` argument (always seeded with 0)"] = _l00_reference_sample(0)
        check_close(shown, first, want, atol=1e-6, rtol=0, mistakes=mistakes, quiet=True,
                    hint="seed with seed_everything(seed), then draw exactly torch.randn(5) and return it.")
    a, b = call(fn_name, fn, seeds[0]), call(fn_name, fn, seeds[0] + 1)
    check_true(name, not torch.equal(a, b), "different seeds gave the same numbers.",
               "pass the `seed` argument on to seed_everything instead of a fixed number.")
    passed(name, f"{len(seeds)} seeds, repeatable")


def _l00_uniform(seed: int) -> torch.Tensor:
    from course_lib.device import seed_everything

    seed_everything(seed)
    return torch.rand(5)


def check_rnn_steps(name: str, value: Any, first: int, last: int) -> None:
    """Sequential RNN steps for word `first`'s information to reach word `last`: last - first."""
    steps = last - first
    check_count(name, value, steps, {
        "counted the words from one to the other, both included, instead of the steps between them": steps + 1,
        "gave self-attention's answer (one step); an RNN must pass through every word in between": 1,
        "counted only the words strictly between them; the last hop into the final word is a step too": steps - 1,
    }, hint=f"the hidden state moves one word per step: word {first} -> word {first + 1} -> ... -> word {last}.")


def _l00_receptive_field(num_layers: int, kernel_size: int) -> int:
    return 1 + num_layers * (kernel_size - 1)


def _l00_counting_function(name: str, fn: Callable, cases: Sequence[tuple[int, ...]], reference: Callable,
                           mistakes: Callable[..., dict], hint: Callable[..., str] | None = None) -> None:
    """Call the learner's counting function on each case; name the mistake a wrong count matches."""
    for args in cases:
        shown = f"{_l00_fn_name(name)}({', '.join(str(a) for a in args)})"
        got = call(_l00_fn_name(name), fn, *args)
        check_count(shown, got, reference(*args), mistakes(*args), hint=hint(*args) if hint else None, quiet=True)
    passed(name, f"{len(cases)} cases")


def check_receptive_field(fn: Callable, cases: Sequence[tuple[int, int]] = ((1, 3), (2, 3), (4, 5)),
                          name: str = "receptive_field") -> None:
    """The learner's `receptive_field(num_layers, kernel_size)` = 1 + L (k - 1)."""
    _l00_counting_function(name, fn, cases, _l00_receptive_field, lambda layers, k: {
        "forgot the +1 for the centre position (each layer adds k - 1 positions to ONE starting position)": layers * (k - 1),
        "multiplied the layers by the kernel size (neighbouring windows overlap: each layer adds only k - 1)": layers * k,
        "made it grow exponentially; stacked ordinary convolutions grow linearly (exponential growth needs dilation)": k**layers,
        "added k - 1 once too often (a single layer sees exactly k positions)": 1 + (layers + 1) * (k - 1),
    })


def _l00_layers_needed(distance: int, kernel_size: int) -> int:
    return -(-distance // (kernel_size - 1))  # ceil(d / (k - 1)) without floats


def check_layers_needed(fn: Callable, cases: Sequence[tuple[int, int]] = ((2, 3), (10, 3), (9, 5)),
                        name: str = "layers_needed") -> None:
    """The learner's `layers_needed(distance, kernel_size)`: fewest layers with 1 + L (k - 1) >= d + 1."""
    _l00_counting_function(name, fn, cases, _l00_layers_needed, lambda d, k: {
        "rounded down: with that many layers the two words are still just out of each other's reach": d // (k - 1),
        "required the receptive field to span d positions instead of d + 1 (both words must be inside it)": -(-(d - 1) // (k - 1)),
        "divided by the kernel size k instead of the k - 1 new positions each layer adds": -(-d // k),
        "added one layer too many": _l00_layers_needed(d, k) + 1,
    }, hint=lambda d, k: f"find the smallest L with 1 + L * ({k} - 1) >= {d} + 1.")


def check_patches(name: str, value: Any, image_size: int = 224, patch_size: int = 16, class_token: bool = False) -> None:
    """How many patch_size x patch_size patches tile a square image (+1 with a class token)."""
    per_side = image_size // patch_size
    want = per_side * per_side + (1 if class_token else 0)
    mistakes = {
        "counted the patches along one side only (the image is a grid: side x side)": per_side + (1 if class_token else 0),
        "divided the number of pixels by the patch side instead of the patch area (16 x 16 = 256 pixels)":
            image_size * image_size // patch_size + (1 if class_token else 0),
    }
    if class_token:
        mistakes["forgot the class token that is added in front of the patches"] = per_side * per_side
        mistakes["added the class token twice"] = per_side * per_side + 2
    else:
        mistakes["added the class token; this question asks for the patches alone"] = per_side * per_side + 1
    check_count(name, value, want, mistakes,
               hint=f"a {image_size} x {image_size} image is a grid of ({image_size} / {patch_size}) x ({image_size} / {patch_size}) patches.")


def _l00_patch_count(height: int, width: int, patch: int) -> int:
    return (height // patch) * (width // patch)


def _l00_patch_count_mistakes(h: int, w: int, p: int) -> dict[str, int]:
    mistakes = {
        "kept the bug: the pixel count was divided by the patch side, not by the patch area": (h * w) // p,
        "assumed a square image (used the height twice)": (h // p) ** 2,
        "assumed a square image (used the width twice)": (w // p) ** 2,
    }
    rounded, ceiled = round(h / p) * round(w / p), -(-h // p) * -(-w // p)
    if rounded == ceiled:  # e.g. 250 / 16 = 15.6: round() and ceil both give 16
        mistakes["counted partial patches at the border (rounded h / p up, with round() or math.ceil); "
                 "patches that do not fit are dropped, so round down with //"] = ceiled
    else:
        mistakes["rounded h / p to the nearest whole number with round(); a partial patch at the border "
                 "does not fit and is dropped, so round down with //"] = rounded
        mistakes["counted partial patches at the border; patches that do not fit are dropped"] = ceiled
    return mistakes


def check_patch_count(fn: Callable, cases: Sequence[tuple[int, int, int]] = ((224, 224, 16), (224, 320, 16), (250, 250, 16), (32, 32, 8)),
                      name: str = "patch_count") -> None:
    """The learner's fixed `patch_count(height, width, patch)` = (H // p) * (W // p)."""
    _l00_counting_function(name, fn, cases, _l00_patch_count, _l00_patch_count_mistakes)


def check_attention_steps(name: str, value: Any, n_words: int) -> None:
    """Steps for word 1 and word n to interact in one self-attention layer: always 1."""
    check_count(name, value, 1, {
        "gave the RNN's count: in self-attention every word looks at every other word directly": n_words - 1,
        "counted the words: the distance between positions does not matter to attention": n_words,
        "answered 0; the two words interact in one step, through one attention weight": 0,
    })


# --- Lesson 01: one-hot vectors and dot products ------------------------------


def _l01_one_hot(ids, num_classes: int) -> np.ndarray:
    """Reference one-hot rows, (N, V) float, written independently of course_lib.vectors."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.zeros((ids.size, num_classes))
    out[np.arange(ids.size), ids] = 1.0
    return out


def check_one_hot(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "one_hot") -> None:
    """The learner's `one_hot(ids, num_classes)` for a 1-D batch of 0-based ids -> (N, V) floats."""
    cases = cases or [([1, 2, 0], 3), ([0, 0, 4, 2], 5)]
    fn_name = _l00_fn_name(name)
    for ids, num_classes in cases:
        ids = np.asarray(ids)
        shown = f"{fn_name}(np.array({ids.tolist()}), {num_classes})"
        got = call(fn_name, fn, ids.copy(), num_classes)
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        if not isinstance(got, np.ndarray):
            where = ("this exercise asks for numpy: start from np.zeros((len(ids), num_classes)), not torch"
                     if isinstance(got, torch.Tensor) else
                     "start from out = np.zeros((len(ids), num_classes)), a float array, and set one 1 per row")
            raise CheckFailed(shown, f"expected a float numpy array, got {type(got).__name__} ({_short(got)}).", where + ".")
        want = _l01_one_hot(ids, num_classes)
        arr = _to_array(got)
        if arr.shape == (num_classes,) and len(ids) > 1:
            raise CheckFailed(shown, f"expected shape {want.shape} (one row per id), got {arr.shape}.",
                              "it looks like you added all the rows together into one vector; keep one row per id.")
        if arr.shape == want.T.shape and _close(arr, want.T, 1e-6, 0) and not _close(arr, want, 1e-6, 0):
            raise CheckFailed(shown, "the values are not right.",
                              "your result is the transpose of the expected one: one row per id, one column per vocabulary entry.")
        mistakes = {
            "treated the ids as 1-based (the 1 landed one column to the left, at id - 1)": _l01_one_hot((ids - 1) % num_classes, num_classes),
            "put the 1 one column too far to the right (at id + 1)": _l01_one_hot((ids + 1) % num_classes, num_classes),
            "made a matrix of ones with a 0 at each id (the complement)": 1.0 - want,
        }
        check_close(shown, got, want, mistakes=mistakes, quiet=True)
        kind = np.asarray(arr).dtype
        check_true(
            shown,
            np.issubdtype(kind, np.floating),
            f"the values are right but the dtype is {kind}.",
            "use a float array (np.zeros(..., dtype=float)): one-hot rows get multiplied by real-valued weights.",
        )
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def _l01_rows_cosine(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return (a * b).sum(axis=1) / (np.sqrt((a * a).sum(axis=1)) * np.sqrt((b * b).sum(axis=1)))


def check_cosine_rows(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "cosine_rows") -> None:
    """The learner's row-wise cosine similarity: (N, D), (N, D) -> (N,)."""
    if cases is None:
        cases = [
            (np.array([[3.0, 4.0], [1.0, 0.0]]), np.array([[6.0, 8.0], [0.0, 5.0]])),
            (np.array([[1.0, 2.0, 2.0], [2.0, 0.0, 0.0]]), np.array([[2.0, -2.0, 1.0], [4.0, 4.0, 2.0]])),
        ]
    fn_name = _l00_fn_name(name)
    axis_hint = ("it looks like you summed over axis 0 (down the columns): each row's dot product and each row's "
                 "length are sums along that row, axis=1.")
    for a, b in cases:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        shown = f"{fn_name}(a of shape {a.shape}, b of shape {b.shape})"
        try:
            got = fn(a.copy(), b.copy())
        except NotImplementedError:
            raise NotAttempted(fn_name) from None
        except CheckFailed:
            raise
        except Exception as err:  # name the likely cause instead of showing a traceback
            hint = axis_hint if "broadcast" in str(err) else None
            raise CheckFailed(shown, f"raised {type(err).__name__}: {err}.", hint) from None
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        if not isinstance(got, np.ndarray):
            raise CheckFailed(shown, f"expected a numpy array of shape ({len(a)},), got {type(got).__name__} ({_short(got)}).",
                              "work on whole arrays with numpy ((a * b).sum(axis=1), np.linalg.norm(..., axis=1)); "
                              "if you built a list, return np.array(your_list).")
        dots = (a * b).sum(axis=1)
        na, nb = np.sqrt((a * a).sum(axis=1)), np.sqrt((b * b).sum(axis=1))
        mistakes = {
            "divided by the length of a only (b is never normalised)": dots / na,
            "divided by the length of b only (a is never normalised)": dots / nb,
            "returned the plain dot products, without normalising either vector": dots,
            "divided by the squared lengths |a|²|b|² instead of |a||b|": dots / (na**2 * nb**2),
            "divided by |a|·|b|² (b's length squared) instead of |a|·|b|": dots / (na * nb**2),
            "divided by |a|²·|b| (a's length squared) instead of |a|·|b|": dots / (na**2 * nb),
            "divided by the sum |a| + |b| instead of the product |a|·|b|": dots / (na + nb),
            "divided by the length of the whole matrix (np.linalg.norm without axis=1) instead of each row's": dots / (np.linalg.norm(a) * np.linalg.norm(b)),
            "summed over axis 0 (down the columns) instead of along each row (axis=1)":
                (a * b).sum(axis=0) / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0)),
            "took the lengths over axis 0 (down the columns); each row's length is a sum along the row (axis=1)":
                dots / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0)) if a.shape[0] == a.shape[1] else np.full(len(a), np.nan),
        }
        got_arr = _to_array(got)
        if got_arr.shape == (len(a), len(b)) and len(a) > 1:
            raise CheckFailed(shown, f"expected one similarity per row, shape ({len(a)},), got {got_arr.shape}.",
                              "you compared every row of a with every row of b (a @ b.T); pair row i of a with row i of b.")
        if got_arr.shape == (a.shape[1],) and a.shape[0] != a.shape[1]:
            raise CheckFailed(shown, f"expected one similarity per row, shape ({len(a)},), got {got_arr.shape}.", axis_hint)
        check_close(shown, got, _l01_rows_cosine(a, b), mistakes=mistakes, quiet=True)
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")



def _l01_embed_error_hint(text: str, ids: torch.Tensor, E: torch.Tensor) -> str | None:
    """Name the usual cause of an error raised inside the learner's `embed_by_matmul`."""
    V = E.shape[0]
    if "shapes cannot be multiplied" in text or "size mismatch" in text:
        columns = int(ids.max()) + 1 if ids.numel() else 0
        if columns != V and f"x{columns} and {V}x" in text:
            return (f"it looks like you called F.one_hot(ids) without num_classes: it then makes only max(ids) + 1 = "
                    f"{columns} columns, but E has {V} rows. Pass num_classes=V (E.shape[0]).")
        return f"the one-hot rows need one column per row of E: (..., V) @ (V, D) with V = E.shape[0] = {V}."
    if "dtype" in text or "scalar type" in text:
        if "long" in text.lower():
            return "F.one_hot returns int64; convert with .to(E.dtype) before @."
        return (f"the one-hot rows and E have different float types (E is {str(E.dtype).replace('torch.', '')} here): "
                "convert the one-hot rows with .to(E.dtype), not .float().")
    return None


def check_embed_by_matmul(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "embed_by_matmul") -> None:
    """The learner's lookup `one_hot(ids) @ E` in torch: forward equal to `E[ids]`, gradients equal to
    `nn.Embedding`'s, and computed with a matrix product rather than by indexing."""
    if cases is None:
        gen = torch.Generator().manual_seed(1)
        cases = [
            (torch.tensor([1, 2, 0]), torch.arange(12.0).reshape(3, 4)),
            (torch.tensor([[3, 3, 0], [1, 4, 2]]), torch.randn(5, 2, generator=gen)),
            (torch.tensor([0, 1]), torch.randn(5, 3, generator=gen)),  # the last ids (2, 3, 4) never occur
            (torch.tensor([2, 0, 2]), torch.randn(3, 2, generator=gen, dtype=torch.float64)),  # E in float64
        ]
    fn_name = _l00_fn_name(name)
    for ids, E in cases:
        V = E.shape[0]
        E_learner = E.detach().clone().requires_grad_()
        shown_ids = f"ids=tensor({ids.tolist()})" if ids.numel() <= 8 else f"ids of shape {tuple(ids.shape)}"
        shown = f"{fn_name}({shown_ids}, E of shape {tuple(E.shape)}, {str(E.dtype).replace('torch.', '')})"
        try:
            got = fn(ids.clone(), E_learner)
        except NotImplementedError:
            raise NotAttempted(fn_name) from None
        except CheckFailed:
            raise
        except Exception as err:  # name the likely cause instead of showing a traceback
            raise CheckFailed(shown, f"raised {type(err).__name__}: {err}.", _l01_embed_error_hint(str(err), ids, E)) from None
        check_type(shown, got, torch.Tensor)
        mistakes = {"treated the ids as 1-based (every word got the row before its own)": E[(ids - 1) % V]}
        check_close(shown, got, E[ids], mistakes=mistakes, quiet=True)
        grad_fn = type(got.grad_fn).__name__ if got.grad_fn is not None else ""
        check_true(shown, got.grad_fn is not None,
                   "no gradient can flow from the result back to E.",
                   "keep everything in torch: no .detach(), .numpy() or torch.tensor(...) around E.")
        check_true(shown, "Index" not in grad_fn and "Embedding" not in grad_fn,
                   f"the values are right, but they came from indexing E directly ({grad_fn}).",
                   "this exercise asks for the matrix product: build the one-hot rows, then multiply by E.")
        check_true(shown, got.dtype == E.dtype,
                   f"the values are right, but the result is {str(got.dtype).replace('torch.', '')} while E is "
                   f"{str(E.dtype).replace('torch.', '')}.",
                   "convert the one-hot rows with .to(E.dtype) (not .float()) and leave E as it is.")
        upstream = torch.linspace(-1.0, 1.0, got.numel()).reshape(got.shape)
        (got * upstream).sum().backward()
        emb = torch.nn.Embedding(V, E.shape[1])
        with torch.no_grad():
            emb.weight.copy_(E)
        (emb(ids) * upstream).sum().backward()
        check_close(f"{shown}: gradient of E", E_learner.grad, emb.weight.grad, quiet=True,
                    hint="the gradient should match torch.nn.Embedding's: each looked-up row collects its positions' gradients.")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}, values and gradients")


# --- Lesson 02: Markov models -------------------------------------------------

_L02_END = "<end>"


def _l02_counts(sentences, vocab, prepend: bool = True, append: bool = True) -> np.ndarray:
    index = {w: i for i, w in enumerate(vocab)}
    counts = np.zeros((len(vocab), len(vocab)))  # (V, V): row = current token, column = next token
    for s in sentences:
        padded = ([_L02_END] if prepend else []) + list(s) + ([_L02_END] if append else [])
        for a, b in zip(padded[:-1], padded[1:]):
            counts[index[a], index[b]] += 1
    return counts


def _l02_rows(counts: np.ndarray) -> np.ndarray:
    sums = counts.sum(axis=1, keepdims=True)  # (V, 1)
    return np.divide(counts, sums, out=np.zeros_like(counts), where=sums > 0)


def l02_transition_matrix(sentences, vocab) -> np.ndarray:
    """Reference for exercise 02: counts of (current, next) with "<end>" before and after each
    sentence, each row divided by its own total; rows with no successors stay zero."""
    return _l02_rows(_l02_counts(sentences, vocab))


def check_transition_matrix(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check a learner's `transition_matrix(sentences, vocab)` on each (sentences, vocab) case,
    naming the usual mistakes: columns normalised, the boundary token forgotten, divided by the
    grand total, 0/0 rows left as NaN."""
    for sentences, vocab in cases:
        got = call(name, fn, sentences, vocab)
        if got is None:
            raise CheckFailed(name, "got None: did you forget to `return` the matrix?")
        check_shape(name, got, (len(vocab), len(vocab)))
        counts = _l02_counts(sentences, vocab)
        col_sums = counts.sum(axis=0, keepdims=True)  # (1, V)
        with np.errstate(invalid="ignore", divide="ignore"):
            mistakes = {
                "normalised the columns instead of the rows (each ROW, one current word, must sum to 1)":
                    np.divide(counts, col_sums, out=np.zeros_like(counts), where=col_sums > 0),
                "forgot to append the end token, so the last word of each sentence has an all-zero row":
                    _l02_rows(_l02_counts(sentences, vocab, append=False)),
                "forgot to put the end token in front of each sentence, so the '<end>' row (how sentences start) is empty":
                    _l02_rows(_l02_counts(sentences, vocab, prepend=False)),
                "left out the end token altogether (\"please\" then has no successor and an all-zero row)":
                    _l02_rows(_l02_counts(sentences, vocab, prepend=False, append=False)),
                "divided by the total count of all pairs instead of by each row's count": counts / counts.sum(),
                "returned the counts without normalising them": counts,
                "divided rows with no successors by zero (0/0 = NaN): leave those rows at zero":
                    counts / counts.sum(axis=1, keepdims=True),
                # counts[index[b], index[a]]: each row then holds the words that came BEFORE it
                "counted the pairs the wrong way round (counts[next, current]): your rows look like the NEXT word. "
                "Row = current word, column = next word: counts[index[a], index[b]] for a followed by b":
                    _l02_rows(counts.T),
                "counted the pairs the wrong way round (counts[next, current]), and left 0/0 = NaN in unused rows. "
                "Row = current word, column = next word: counts[index[a], index[b]] for a followed by b":
                    counts.T / counts.T.sum(axis=1, keepdims=True),
            }
        shown = f"{name}({len(sentences)} sentences, vocab of {len(vocab)})"
        check_close(shown, got, l02_transition_matrix(sentences, vocab), mistakes=mistakes, quiet=True,
                    hint="row i should hold count(i followed by j) / count(i followed by anything).")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def l02_add_k(counts, context, word, k, vocab_size) -> float:
    """Reference add-k probability: (count(context, word) + k) / (count(context) + k * V)."""
    row = counts.get(context, {})
    return (row.get(word, 0) + k) / (sum(row.values()) + k * vocab_size)


def check_add_k(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check a learner's add-k probability function on (counts, context, word, k, vocab_size) cases."""
    def right_on(case) -> bool:
        try:
            return abs(float(call(name, fn, *case)) - l02_add_k(*case)) < 1e-9
        except (CheckFailed, TypeError, ValueError):
            return False

    seen = [c for c in cases if c[0].get(c[1]) and c[3] > 0]
    for counts, context, word, k, V in cases:
        if counts.get(context) or k <= 0:
            continue
        # A context never seen: forgetting the smoothing altogether also gives 0 here, so name the
        # special-cased empty row only when the smoothing is right for the contexts that were seen.
        if seen and not all(right_on(c) for c in seen):
            break
        try:
            got = call(name, fn, counts, context, word, k, V)
        except CheckFailed as err:
            if "KeyError" not in err.problem:
                raise
            raise CheckFailed(err.name, err.problem, "a context never seen in training is not a key of `counts`: "
                              "use counts.get(context, {}), an empty row, and the same formula.") from None
        shown = f"{name}(..., {context!r}, {word!r}, k={k:g}, V={V})"
        try:
            value = float(got)
        except (TypeError, ValueError):
            continue  # check_function below says what is wrong with the type
        if value == 0.0:
            raise CheckFailed(shown, f"for the context {context!r}, never seen in training, you returned 0.",
                              "for a context never seen, every word should get k / (k·V) = 1/V; don't special-case "
                              "empty rows: the same formula (count + k) / (total + k·V) covers them, with count = total = 0.")
    check_function(
        name, fn, cases, reference=l02_add_k,
        mistakes={
            "added k to the denominator instead of k * V (the row then sums to more than 1)":
                lambda c, ctx, w, k, V: (c.get(ctx, {}).get(w, 0) + k) / (sum(c.get(ctx, {}).values()) + k),
            "added k to the numerator only; the denominator needs k * V too":
                lambda c, ctx, w, k, V: (c.get(ctx, {}).get(w, 0) + k) / max(sum(c.get(ctx, {}).values()), 1e-300),
            "added k * V to the numerator as well":
                lambda c, ctx, w, k, V: (c.get(ctx, {}).get(w, 0) + k * V) / (sum(c.get(ctx, {}).values()) + k * V),
            "forgot the smoothing (plain count / total)":
                lambda c, ctx, w, k, V: c.get(ctx, {}).get(w, 0) / max(sum(c.get(ctx, {}).values()), 1e-300),
        },
        hint="every one of the V possible next words gets k extra counts, so the row total grows by k * V.",
    )


def check_table_entries(name: str, fn: Callable, cases: Sequence[tuple[int, int]]) -> None:
    """Check `n_table_entries(V, order)` == V ** order * V exactly, naming the usual slips."""
    for V, order in cases:
        got = call(name, fn, V, order)
        want = V**order * V
        shown = f"{name}({V}, {order})"
        if isinstance(got, bool) or not isinstance(got, (int, np.integer, float, np.floating)):
            raise CheckFailed(shown, f"expected a whole number, got {_short(got)}.")
        is_float = isinstance(got, (float, np.floating))
        same = (lambda a, b: math.isclose(a, b, rel_tol=1e-12)) if is_float else (lambda a, b: a == b)
        if not same(got, want):
            wrong = {
                "counted only the rows (V ** order contexts), not the V columns of each row": V**order,
                "used the order as a multiplier instead of an exponent": V * order * V,
                "used one power too many (V ** (order + 2))": V ** (order + 2),
                "counted the rows as V ** (order - 1)": V ** (order - 1) * V,
            }
            hint = next((f"it looks like you {d}." for d, w in wrong.items() if same(got, w)), "a table of order n has V ** n rows of V columns.")
            raise CheckFailed(shown, f"expected {want}, got {got}.", hint)
        if is_float:
            # even when this float happens to be exact, a bigger table would not be: ask for an int every time
            raise CheckFailed(shown, f"the size is right, but it is the float {got!r}, not an exact int.",
                              "floats hold only about 16 digits, so 50,000⁸ · 50,000 would come out rounded: "
                              "compute with ints (V ** order * V, without float(), math.pow or /).")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def check_sampler(name: str, fn: Callable, dist: Mapping[Any, float] | None = None, n: int = 4000) -> None:
    """Check `sample_next(dist, rng)`: returns one of the tokens, draws with the generator it is
    given (same seed, same draws), and follows the probabilities (within a few percent over n draws)."""
    dist = dict(dist or {"directories": 0.2, "files": 0.3, "photos": 0.5})
    first = call(name, fn, dict(dist), np.random.default_rng(0))
    if first not in dist:
        raise CheckFailed(name, f"returned {_short(first)}, expected one of the tokens {list(dist)}.",
                          "return the token itself (a key of the dict), not its index or probability.")
    draws = [call(name, fn, dict(dist), rng) for rng in [np.random.default_rng(123)] for _ in range(40)]
    again = [call(name, fn, dict(dist), rng) for rng in [np.random.default_rng(123)] for _ in range(40)]
    if draws != again:
        raise CheckFailed(name, "two generators with the same seed gave different draws.",
                          "draw with the `rng` argument (rng.choice or rng.random), not np.random.* or the random module.")
    rng = np.random.default_rng(2024)
    counts = Counter(call(name, fn, dict(dist), rng) for _ in range(n))
    freq = {tok: counts.get(tok, 0) / n for tok in dist}
    best = max(dist, key=dist.get)
    if freq[best] == 1.0 and dist[best] < 0.999:
        raise CheckFailed(name, f"it always returned {best!r}.",
                          "it looks like you took the most likely token (argmax); sample in proportion to the probabilities.")
    if all(abs(f - 1 / len(dist)) < 0.03 for f in freq.values()) and any(abs(p - 1 / len(dist)) > 0.06 for p in dist.values()):
        raise CheckFailed(name, f"every token came up about equally often ({ {t: round(f, 2) for t, f in freq.items()} }).",
                          "it looks like you ignored the probabilities: pass them to rng.choice with p=.")
    for tok, p in dist.items():
        if abs(freq[tok] - p) > 0.03:
            raise CheckFailed(name, f"{tok!r} came up {freq[tok]:.3f} of the time in {n} draws, expected about {p}.")
    passed(name, f"{n} draws follow {dist}")


# --- Lesson 03: from skips to attention ---------------------------------------


def l03_votes(pair_counts: Mapping, context: Sequence[str], *, distinct: bool = True, normalise: bool = True,
              include_latest: bool = False) -> dict[str, float]:
    """Reference vote count of lesson 03 (and its usual slips, switched by the flags).

    Each distinct word before the latest one forms the pair (earlier, latest); each pair seen in
    training (`pair_counts[(earlier, latest)]` = {next word: count}) spreads one vote over the next
    words in proportion to its counts. `distinct=False` lets a repeated earlier word vote once per
    occurrence, `normalise=False` adds raw counts, `include_latest=True` also pairs the latest word
    with itself (as if the loop ran over the whole context, last word included).
    """
    context = list(context)
    latest = context[-1]
    earlier = context if include_latest else context[:-1]
    if distinct:
        earlier = list(dict.fromkeys(earlier))
    totals: dict[str, float] = {}
    for word in earlier:
        row = pair_counts.get((word, latest), {})
        n = sum(row.values())
        for nxt, c in row.items():
            totals[nxt] = totals.get(nxt, 0.0) + (c / n if normalise else float(c))
    return totals


def _l03_as_vote_dict(name: str, value: Any) -> dict[str, float]:
    if value is None:
        raise CheckFailed(name, "got None: did you forget to `return` the totals?")
    if not isinstance(value, Mapping):
        raise CheckFailed(name, f"expected a dict {{next word: total votes}}, got {type(value).__name__} ({_short(value)}).")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise CheckFailed(name, f"the keys must be the next words (str), got the key {_short(k)}.")
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            raise CheckFailed(name, f"the value for {k!r} should be a number, got {_short(v)}.") from None
    return out


def _l03_compare_votes(name: str, got: dict, want: dict, mistakes: Mapping[str, dict], hint: str | None,
                       reveal: bool = True) -> None:
    keys = sorted(set(got) | set(want) | {k for m in mistakes.values() for k in m})
    vec = lambda d: np.array([d.get(k, 0.0) for k in keys])  # noqa: E731  (missing word = 0 votes)
    a = vec(got)
    if _close(a, vec(want), 1e-6, 1e-6):
        return
    for description, wrong in mistakes.items():
        if wrong != want and _close(a, vec(wrong), 1e-6, 1e-6):
            raise CheckFailed(name, f"got {_round_dict(got)}, which is not right.", f"it looks like you {description}.")
    if not reveal:  # worked out by hand: say it is wrong without printing the answer
        raise CheckFailed(name, f"got {_round_dict(got)}, which is not right.", hint)
    raise CheckFailed(name, f"expected {_round_dict(want)}, got {_round_dict(got)}.", hint)


def _round_dict(d: Mapping) -> dict:
    return {k: round(float(v), 3) for k, v in sorted(d.items()) if float(v) != 0}


_L03_VOTE_MISTAKES = {
    "let a word that occurs twice before the latest word vote twice (each distinct earlier word is ONE feature)":
        dict(distinct=False),
    "added the raw counts without normalising each pair's counts to one vote": dict(normalise=False),
    "paired the latest word with itself (loop over the words BEFORE the latest one only)": dict(include_latest=True),
    "let repeated words vote twice and forgot to normalise each pair's counts": dict(distinct=False, normalise=False),
}


def check_votes(name: str, value: Any, pair_counts: Mapping, context: Sequence[str],
                mistakes: Mapping[str, dict] | None = None, quiet: bool = False, reveal: bool = True) -> None:
    """Check a total-votes dict {next word: votes} for `context` against `l03_votes`, naming the usual
    slips (repeated words voting twice, raw counts, the latest word paired with itself) and any
    extra `mistakes` {description: wrong dict}. `reveal=False` is for votes counted by hand: a wrong
    answer is called wrong without printing the expected totals."""
    got = _l03_as_vote_dict(name, value)
    want = l03_votes(pair_counts, context)
    wrong = {d: l03_votes(pair_counts, context, **flags) for d, flags in _L03_VOTE_MISTAKES.items()}
    wrong.update(mistakes or {})
    _l03_compare_votes(name, got, want, wrong,
                       "each distinct earlier word forms one pair with the latest word; each pair seen in training "
                       "has one vote, split over the next words in proportion to its counts.", reveal=reveal)
    if not quiet:
        passed(name)


def _is_nonzero(v: Any) -> bool:
    try:
        return float(v) != 0.0
    except (TypeError, ValueError):
        return True


def check_vote_counter(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check a learner's `count_votes(pair_counts, context)` on (pair_counts, context) cases."""
    for pair_counts, context in cases:
        got = call(name, fn, pair_counts, list(context))
        check_votes(f"{name}(..., {' '.join(context)!r})", got, pair_counts, context, quiet=True)
    # With no pair counts at all there is nothing to vote: a function that still finds votes ignores its argument.
    try:
        empty = fn({}, list(cases[0][1])) if cases else None
    except Exception:  # crashing on an empty table is not what this probe is about
        empty = None
    if isinstance(empty, Mapping) and any(_is_nonzero(v) for v in empty.values()):
        raise CheckFailed(name, f"with an empty pair_counts it still returned {_short(dict(empty))}.",
                          "it looks like you ignored the pair_counts argument (calling the model's methods?): "
                          "count the votes from pair_counts only.")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def check_mask_ran(name: str, value: Any, tokens: Sequence[str], context: Sequence[str]) -> None:
    """Check the hand-made mask after "ran": a 0/1 vector over `tokens` with 1 only at battery and program."""
    tokens, context = list(tokens), list(context)
    if value is None:
        raise CheckFailed(name, "got None.")
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        raise CheckFailed(name, f"got a list of words {_short(value)}.",
                          "the mask is a vector of numbers, one per vocabulary token (model.tokens): 1 = keep, 0 = drop.")
    a = _to_array(value)
    if a.dtype == object or not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        raise CheckFailed(name, f"expected a numeric vector, got {_short(value)}.")
    a = a.astype(float)
    if a.shape != (len(tokens),):
        hint = (f"one entry per vocabulary token (len(model.tokens) = {len(tokens)}), in the order of model.tokens, "
                "not one per position of the sentence.") if a.ndim == 1 else "a 1-D vector over model.tokens."
        raise CheckFailed(name, f"expected shape ({len(tokens)},), got {a.shape}.", hint)

    def ones(*words):
        m = np.zeros(len(tokens))
        for w in words:
            if w in tokens:
                m[tokens.index(w)] = 1.0
        return m

    present = ones(*dict.fromkeys(context[:-1]))
    want = ones("battery", "program")
    positions = np.zeros(len(tokens))
    for w in ("battery", "program"):
        if w in context and context.index(w) < len(tokens):
            positions[context.index(w)] = 1.0  # where the word sits in the sentence, not in model.tokens
    mistakes = {
        "kept every pair (a mask of all ones masks nothing)": np.ones(len(tokens)),
        "kept every pair that is present in the command: the mask should drop the uninformative ones": present,
        "kept 'ran' itself: the mask is over the EARLIER words paired with 'ran'": ones("battery", "program", "ran"),
        "kept only 'program': after 'ran' both battery and program are informative (one mask serves both commands)":
            ones("program"),
        "kept only 'battery': after 'ran' both battery and program are informative (one mask serves both commands)":
            ones("battery"),
        "inverted the mask (1 = keep, 0 = drop)": 1.0 - want,
        "put the 1s at the positions in the sentence instead of at the words' indices in model.tokens": positions,
    }
    check_close(name, a, want, mistakes=mistakes,
                hint="1 at model.index('battery') and model.index('program'), 0 everywhere else.")


def l03_select_mask(word: str, M: np.ndarray, tokens: Sequence[str]) -> np.ndarray:
    """Reference: one_hot(word) @ M, the row of M that belongs to `word`."""
    q = np.zeros(len(tokens))
    q[list(tokens).index(word)] = 1.0
    return q @ np.asarray(M, dtype=float)  # (V,) @ (V, V) -> (V,)


def check_select_mask(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check `select_mask(word, M, tokens)` on (word, M, tokens) cases, naming a column picked instead
    of a row and an index counted from 1."""

    def column(word, M, tokens):
        return np.asarray(M, dtype=float)[:, list(tokens).index(word)]

    def from_one(word, M, tokens):
        i = list(tokens).index(word)
        return np.asarray(M, dtype=float)[(i + 1) % len(tokens)]

    def from_one_back(word, M, tokens):
        i = list(tokens).index(word)
        return np.asarray(M, dtype=float)[i - 1]

    check_function(name, fn, cases, reference=l03_select_mask, atol=1e-9, mistakes={
        "picked a column of M (M @ one_hot, the transposed lookup) instead of the row of the latest word (one_hot @ M)": column,
        "used the wrong index: the row one below the word's index (counted from 1?)": from_one,
        "used the wrong index: the row one above the word's index": from_one_back,
    }, hint="row i of M belongs to tokens[i]; one_hot(i) @ M picks exactly that row.")


def l03_feature_layer(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Reference: relu([x, 1] @ W) for x of shape (..., V) and W of shape (V + 1, F)."""
    x = np.asarray(x, dtype=float)
    with_bias = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)  # (..., V + 1)
    return np.maximum(with_bias @ np.asarray(W, dtype=float), 0.0)  # (..., F)


def check_feature_layer(name: str, fn: Callable, cases: Sequence[tuple]) -> None:
    """Check `feature_layer(x, W)` = relu([x, 1] @ W) on (x, W) cases, naming a forgotten ReLU or bias,
    a bias put first, and the ReLU applied to the inputs instead of the sums."""

    def bias_first(x, W):
        x = np.asarray(x, dtype=float)
        return np.maximum(np.concatenate([np.ones(x.shape[:-1] + (1,)), x], axis=-1) @ W, 0.0)

    # A function that works for one vector (V,) but crashes on a stack (N, V): usually np.append(x, 1.0),
    # the lesson's one-vector code, which flattens the stack into one long vector of N * V + 1 numbers.
    for x, W in cases:
        x = np.asarray(x, dtype=float)
        if x.ndim < 2:
            continue
        try:
            call(name, fn, x.copy(), np.asarray(W).copy())
        except CheckFailed as err:
            if isinstance(err, NotAttempted):
                raise
            try:
                call(name, fn, x[0].copy(), np.asarray(W).copy())
            except CheckFailed:
                raise err from None  # it fails on one vector too: the general message says how
            n = x.size + 1  # what np.append makes of a stack: (N * V + 1,)
            flattened = any(s in err.problem for s in (f"different from {n})", f"size {n} ", f"({n},)"))
            raise CheckFailed(
                f"{name}(x of shape {x.shape}, W of shape {np.shape(W)})",
                f"it works for one vector (V,) but not for a stack (N, V): {err.problem}",
                ("it looks like you used np.append(x, 1.0): np.append flattens a stack into one long vector. "
                 if flattened else "")
                + "Add a column of ones along the last axis instead: np.concatenate with np.ones(x.shape[:-1] + (1,)), axis=-1.",
            ) from None

    check_function(name, fn, cases, reference=l03_feature_layer, mistakes={
        "forgot the ReLU: negative sums must become 0": lambda x, W: np.concatenate(
            [np.asarray(x, dtype=float), np.ones(np.shape(x)[:-1] + (1,))], axis=-1) @ W,
        "forgot the bias: the last row of W is the weight of an extra input that is always 1":
            lambda x, W: np.maximum(np.asarray(x, dtype=float) @ np.asarray(W)[:-1], 0.0),
        "put the bias input first: it is the LAST input ([x, 1]), matching the last row of W": bias_first,
        "subtracted the bias row instead of adding it (its weight already carries the sign)":
            lambda x, W: np.maximum(np.asarray(x, dtype=float) @ np.asarray(W)[:-1] - np.asarray(W)[-1], 0.0),
    }, hint="append a 1 to x, multiply by W, then take max(., 0) element by element.")


def check_and_gate(name: str, W: Any, tokens: Sequence[str], group: Sequence[str],
                   word_weight: float | None = 1.0) -> None:
    """Check hand-made weights W (V + 1, 1) whose feature relu([x, 1] @ W) is 1 exactly when every word of
    `group` is present in the multi-hot x (other words may be present too) and 0 otherwise. With
    `word_weight` (the exercise asks for +1), each group word must have that weight; None accepts any
    working gate."""
    from itertools import combinations

    tokens = list(tokens)
    V = len(tokens)
    if W is None:
        raise CheckFailed(name, "got None.")
    a = _to_array(W)
    if a.dtype == object or not np.issubdtype(a.dtype, np.number):
        raise CheckFailed(name, f"expected a numeric array, got {_short(W)}.")
    a = a.astype(float)
    if a.ndim == 1 and a.shape[0] == V + 1:
        a = a[:, None]
    if a.shape[0] == V and a.shape[-1:] == (1,) or a.shape == (V,):
        raise CheckFailed(name, f"expected shape ({V + 1}, 1), got {a.shape}.",
                          "it looks like you left out the bias row: W needs one row per token AND a last row for the input 1.")
    check_shape(name, a, (V + 1, 1))
    if word_weight is not None:
        weights = [float(a[tokens.index(w), 0]) for w in group]
        if any(abs(w - word_weight) > 1e-9 for w in weights):
            raise CheckFailed(name, f"the weights of {', '.join(group)} are {', '.join(f'{w:g}' for w in weights)}.",
                              f"the exercise asks for a weight of {word_weight:+g} for each word of the group; with those "
                              "weights, work out the bias that makes the feature exactly 1 when all of them are present.")
    others = [t for t in tokens if t not in group]
    rng = np.random.default_rng(3)
    wrong_counts: dict[int, int] = {}
    for r in range(len(group) + 1):
        for subset in combinations(group, r):
            for extra in ([], [others[i] for i in rng.choice(len(others), size=min(3, len(others)), replace=False)]):
                x = np.zeros(V)
                x[[tokens.index(w) for w in list(subset) + extra]] = 1.0
                out = float(l03_feature_layer(x, a)[0])
                want = 1.0 if r == len(group) else 0.0
                if abs(out - want) > 1e-6:
                    wrong_counts.setdefault(r, 0)
                    shown = "{" + ", ".join(list(subset) + extra) + "}"
                    bias = a[-1, 0]
                    k = len(group)
                    if r == len(group):
                        hint = (f"with +1 per word, all {k} words sum to {k}; the bias must bring that down to exactly 1 "
                                "(the lesson's rule for k words: bias -(k - 1)).")
                        if bias < -(k - 1) and out == 0:
                            hint = (f"it looks like the bias is too negative ({bias:g}): the feature never fires. "
                                    "W" + hint[1:])
                    elif bias > -(k - 1):
                        hint = (f"it looks like the bias ({bias:g}) is not negative enough: the feature fires when only "
                                f"{r} of the {k} words are present. Any {k - 1} of them sum to {k - 1}, and that must not "
                                f"be enough to fire; all {k} must give exactly 1.")
                    else:
                        hint = "the weights of words outside the group must be 0, each group word +1."
                    raise CheckFailed(name, f"for the input words {shown} the feature gives {out:g}, expected {want:g}.", hint)
    passed(name)


# --- Lesson 06: attention -----------------------------------------------------


def _l06_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _l06_softmax_mistakes() -> dict[str, Callable]:
    def naive(x):
        return x.exp() / x.exp().sum(-1, keepdim=True)

    def global_max(x):
        e = (x - x.max()).exp()
        return e / e.sum(-1, keepdim=True)

    def wrong_axis(x):
        e = (x - x.amax(0, keepdim=True)).exp()
        return e / e.sum(0, keepdim=True)

    def no_division(x):
        return (x - x.amax(-1, keepdim=True)).exp()

    return {
        "forgot to subtract the maximum: exp overflows to inf on large inputs and inf / inf gives NaN": naive,
        "subtracted the maximum of the whole tensor instead of each row's own maximum (a row far below it "
        "underflows to 0 / 0 = NaN); use x.max(dim=-1, keepdim=True)": global_max,
        "took the softmax over the wrong axis: each row (the last axis, dim=-1) must sum to 1": wrong_axis,
        "forgot to divide by the sum, so the result is exp(x - max), not a probability distribution": no_division,
    }


def check_softmax(fn: Callable, name: str = "stable_softmax", *, hidden: bool = False) -> None:
    """The learner's softmax over the last axis, against torch.softmax, naming the usual mistakes."""
    cases = [
        (torch.tensor([1.0, 2.0, 3.0]),),
        (torch.randn(3, 4, generator=_l06_generator(0)),),
        (torch.tensor([1000.0, 1001.0, 1002.0]),),
    ]
    if hidden:
        cases += [
            (torch.tensor([[1000.0, 1001.0], [-1000.0, -999.0]]),),
            (torch.tensor([[-1000.0, 0.0, 1000.0], [5.0, 5.0, 5.0]]),),
            (torch.randn(2, 3, 5, generator=_l06_generator(1)) * 10,),
        ]
    if not callable(fn):
        raise CheckFailed(name, f"expected a function, got {type(fn).__name__}.")
    try:
        check_function(name, _l06_returns_tensor(name, fn), cases, reference=lambda x: torch.softmax(x, dim=-1),
                       mistakes=_l06_softmax_mistakes(),
                       hint="subtract each row's maximum, exponentiate, divide by the row's sum (all along dim=-1)")
    except NotAttempted:
        raise
    except CheckFailed as err:
        hint = _l06_softmax_crash_hint(err.problem)
        if hint is None:
            raise
        raise CheckFailed(err.name, err.problem, hint) from None


def _l06_returns_tensor(name: str, fn: Callable) -> Callable:
    """`fn`, failing clearly when it returns something other than a torch.Tensor (e.g. a numpy array)."""
    def wrapped(*args):
        out = fn(*args)
        if out is not None:  # None is reported by check_close
            check_tensor(name, out, f"(for input {_short(args[0])})",
                         "build the result with torch operations (torch.exp, .sum, ...); "
                         "if you used numpy, convert back with torch.as_tensor")
        return out

    return wrapped


def _l06_softmax_crash_hint(problem: str) -> str | None:
    """Name the two usual crashes of a hand-written softmax, from the error text that `call` reports."""
    if "return_types" in problem:
        return ("it looks like you subtracted the result of x.max(dim=...) itself: with a dim it returns a pair "
                "(values, indices); use x.max(dim=-1, keepdim=True).values, or x.amax(dim=-1, keepdim=True)")
    if "must match the size of tensor" in problem:
        return ("it looks like a max or sum over dim=-1 dropped that axis, so it no longer lines up with x: keep it with "
                "keepdim=True, i.e. x.max(dim=-1, keepdim=True).values (or x.amax(dim=-1, keepdim=True)) and "
                "e.sum(dim=-1, keepdim=True)")
    return None


def check_causal_mask(fn: Callable, name: str = "causal_mask", sizes: Sequence[int] = (4, 1)) -> None:
    """The learner's causal mask: (T, T), boolean, True on and below the diagonal.

    Put a size of at least 3 first: for T = 1 several mistakes look alike.
    """
    for T in sizes:
        got = call(name, fn, T)
        check_tensor(name, got, f"for T={T}")
        check_shape(f"{name}({T})", got, (T, T))
        ones = torch.ones(T, T)
        mistakes = {
            "used the upper triangle (triu): True must be on and BELOW the diagonal, so word i sees words 0..i": ones.triu(),
            "left out the diagonal: a word may attend to itself, so the diagonal must be True": ones.tril(-1),
            "inverted the mask (True on the future positions, the ones to block): in this course True means "
            "'may attend', so the past and the word itself are True": ones.triu(1),
        }
        check_close(f"{name}({T})", got.detach().cpu().to(torch.float64), ones.tril(), mistakes=mistakes, quiet=True)
        check_true(f"{name}({T})", got.dtype == torch.bool,
                   f"the pattern is right but the dtype is {got.dtype}; the mask must be boolean (torch.bool).",
                   "e.g. torch.ones(T, T, dtype=torch.bool).tril(), or add .bool()")
    passed(name, f"T in {list(sizes)}")


def _l06_attention_cases(hidden: bool) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    g = _l06_generator(6)
    q, k, v = torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)
    cases = [("one sentence of 4 words, d_k = 4, no mask", 2 * q, 2 * k, v, None)]
    qb, kb, vb = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 2, generator=g)
    cases.append(("a batch of 2, T_q = 3, T_k = 5, d_v = 2, no mask", 2 * qb, 2 * kb, vb, None))
    cases.append(("4 words with a causal mask", 2 * q, 2 * k, v, torch.ones(4, 4, dtype=torch.bool).tril()))
    pad = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])[:, None, :]  # (2, 1, 5)
    cases.append(("a batch of 2 with a padding mask of shape (2, 1, 5), broadcast over the 3 queries", 2 * qb, 2 * kb, vb, pad))
    if hidden:
        qh, kh, vh = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
        cases.append(("batch 2 x 3 heads, 5 words, d_k = 8, causal mask", 3 * qh, 3 * kh, vh, torch.ones(5, 5, dtype=torch.bool).tril()))
        q64, k64, v64 = torch.randn(6, 64, generator=g), torch.randn(6, 64, generator=g), torch.randn(6, 3, generator=g)
        cases.append(("6 words with d_k = 64", q64, k64, v64, None))
    return cases


def _l06_attention_mistakes(q, k, v, mask) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(output, weights) for each classic mistake; a mistake that cannot run on these shapes is left out."""
    d_k = q.shape[-1]
    kt = k.transpose(-2, -1)
    blocked = None if mask is None else ~mask
    variants: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]] = {}

    def finish(scores, dim=-1, after=None):
        if blocked is not None and after is None:
            scores = scores.masked_fill(blocked, float("-inf"))
        w = torch.softmax(scores, dim=dim)
        if after is not None:
            w = after(w)
        return w @ v, w

    variants["forgot to divide the scores by sqrt(d_k)"] = lambda: finish(q @ kt)
    variants["divided the scores by d_k instead of sqrt(d_k)"] = lambda: finish(q @ kt / d_k)
    variants["multiplied q by k instead of by k transposed (q @ k rather than q @ k.transpose(-2, -1))"] = (
        lambda: finish(q @ k / math.sqrt(d_k)))
    variants["took the softmax over the wrong axis (over the queries, dim=-2): each row, over the keys (dim=-1), must sum to 1"] = (
        lambda: finish(q @ kt / math.sqrt(d_k), dim=-2))
    _, right_w = finish(q @ kt / math.sqrt(d_k))
    variants["used the values v itself as the output: output row i must be Σ_j α_ij v_j (weights @ v), not v_i"] = (
        lambda: (v.clone(), right_w))
    variants["multiplied the values by the transposed weights: use weights @ v"] = (
        lambda: (right_w.transpose(-2, -1) @ v, right_w))
    if mask is not None:
        s = q @ kt / math.sqrt(d_k)
        variants["applied the mask after the softmax: the masked weights are zero but the rows no longer sum to 1; "
                 "fill the scores with -inf before the softmax"] = lambda: finish(s, after=lambda w: w.masked_fill(blocked, 0.0))
        variants["applied the mask by multiplying the scores by 0: a score of 0 still gets weight exp(0) in the softmax; "
                 "fill the scores with -inf instead"] = lambda: finish(s * mask, after=lambda w: w)
        variants["inverted the mask: True means 'may attend', so fill with -inf where the mask is False (~mask)"] = (
            lambda: finish(s.masked_fill(mask, float("-inf")), after=lambda w: w))
    results = {}
    for description, make in variants.items():
        try:
            results[description] = make()
        except Exception:  # this mistake does not run on these shapes, so it cannot be the learner's
            continue
    return results


def _l06_attention_crash_hint(problem: str, q: torch.Tensor, mask: torch.Tensor | None) -> str | None:
    """Name the usual reason an attention function crashes, from the error text that `call` reports."""
    if mask is not None and ("shape of the mask" in problem or "IndexError" in problem):
        return ("it looks like you masked by boolean indexing (scores[~mask] = ...), which needs a mask of exactly the "
                "scores' shape; the mask must broadcast: use masked_fill (or torch.where), not boolean indexing")
    if mask is not None and "bool tensor is not supported" in problem:
        return "invert a boolean mask with ~mask (or mask == False); 1 - mask and -mask do not work on booleans"
    if q.dim() > 2 and ("t() expects" in problem or "must match the size of tensor" in problem):
        return ("it looks like you transposed k with k.T or k.t(), which reverses every axis of a batched tensor (or "
                "refuses one); swap only the last two axes: k.transpose(-2, -1)")
    return None


def check_attention(fn: Callable, name: str = "attention", *, hidden: bool = False, masked_only: bool = False) -> None:
    """The learner's `fn(q, k, v, mask=None) -> (output, weights)` against the library, naming the usual mistakes."""
    from course_lib.attention import scaled_dot_product_attention as reference

    n = 0
    for description, q, k, v, mask in _l06_attention_cases(hidden):
        if masked_only and mask is None:
            continue
        try:
            got = call(name, fn, q, k, v, mask)
        except NotAttempted:
            raise
        except CheckFailed as err:
            raise CheckFailed(name, f"{err.problem} (case: {description})",
                              _l06_attention_crash_hint(err.problem, q, mask)) from None
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(name, f"expected a tuple (output, weights), got {_short(got)}.",
                              "end the function with `return weights @ v, weights`")
        out, weights = got
        for part, value in (("output", out), ("weights", weights)):
            if value is not None:  # None is reported by check_close
                check_tensor(name, value, f"for the {part} (case: {description})",
                             "compute with torch operations (@, torch.softmax, masked_fill, ...); "
                             "if you used numpy, convert back with torch.as_tensor")
        want_out, want_w = reference(q, k, v, mask)
        wrong = _l06_attention_mistakes(q, k, v, mask)
        label = f"{name} ({description})"
        check_close(f"{label}, weights", weights, want_w, mistakes={d: w for d, (o, w) in wrong.items()}, quiet=True,
                    hint="weights = softmax(q @ k.transpose(-2, -1) / sqrt(d_k)) over the last axis, masked before the softmax")
        check_close(f"{label}, output", out, want_out, mistakes={d: o for d, (o, w) in wrong.items()}, quiet=True,
                    hint="the output is weights @ v")
        n += 1
    passed(name, f"{n} case{'s' if n != 1 else ''}")


def check_flying_arrows(scores: Any, weights: Any, output: Any, output_arrows: Any = None) -> None:
    """The two-word example: flying = [0,1,1,1,0,0], arrows = [1,1,0,-1,-1,1]; q/k/v = dims 1-2 / 3-4 / 5-6.

    Worked out by hand, so a wrong answer is not shown the expected numbers (reveal=False).
    """
    raw = torch.tensor([1.0, -1.0])  # q_flying · k_flying, q_flying · k_arrows
    scaled = raw / math.sqrt(2)
    w = torch.softmax(scaled, dim=0)
    v = torch.tensor([[0.0, 0.0], [-1.0, 1.0]])
    check_close("scores_flying", scores, scaled, atol=1e-3, rtol=0, reveal=False,
                mistakes={"forgot to divide by sqrt(d_k) = sqrt(2)": raw, "divided by d_k = 2 instead of sqrt(2)": raw / 2,
                          "computed the scores of arrows' query (the second word) instead of flying's": torch.tensor([2.0, -1.0]) / math.sqrt(2)},
                hint="q_flying = dims 1-2 of flying; dot it with each word's key (dims 3-4), then divide by sqrt(d_k)")
    unscaled_w = torch.softmax(raw, dim=0)
    check_close("weights_flying", weights, w, atol=5e-3, rtol=0, reveal=False,
                mistakes={"forgot to divide the scores by sqrt(2) before the softmax": unscaled_w,
                          "did not normalise (these are exp(scores), not weights)": scaled.exp(),
                          "put the weights in the wrong order: the first is flying's own (the larger score)": w.flip(0)},
                hint="weights = exp(score_j) / (exp(score_0) + exp(score_1)); they are positive and add up to 1")
    check_close("output_flying", output, w @ v, atol=5e-3, rtol=0, reveal=False,
                mistakes={"used flying's own value v_flying = [0, 0]; the output is Σ_j α_j v_j": v[0],
                          "used the unscaled weights": unscaled_w @ v,
                          "weighted the values in the wrong order (0.20 on flying, 0.80 on arrows)": w.flip(0) @ v},
                hint="output = weight_flying * v_flying + weight_arrows * v_arrows, with the values from dims 5-6")
    if output_arrows is None:
        return
    q_arrows_scores = torch.tensor([2.0, -1.0])  # q_arrows = [1, 1] against k_flying = [1, 1], k_arrows = [0, -1]
    w_arrows = torch.softmax(q_arrows_scores / math.sqrt(2), dim=0)
    check_close("output_arrows", output_arrows, w_arrows @ v, atol=5e-3, rtol=0, reveal=False, mistakes={
        "used the unscaled scores [2, -1]": torch.softmax(q_arrows_scores, dim=0) @ v,
        "used flying's weights [0.80, 0.20]": w @ v,
        "put the large weight on arrows' own value (arrows' query matches flying's key better)": w_arrows.flip(0) @ v,
    }, hint="arrows asks with q = [1, 1] (its dims 1-2): score it against both keys, scale, softmax, then average the values")


def check_choice(name: str, value: Any, expected: Any, explanations: Mapping[Any, str] | None = None) -> None:
    """A multiple-choice or shape answer: exact match, with an explanation for each known wrong answer."""
    if isinstance(expected, tuple) and isinstance(value, (list, torch.Size)):
        value = tuple(value)
    if isinstance(value, (torch.Tensor, np.ndarray)):
        value = value.tolist()
    if value != expected:
        try:
            why = (explanations or {}).get(value)
        except TypeError:  # an unhashable answer cannot be one of the known wrong ones
            why = None
        problem = f"{value!r} is not right."
        if type(value) is not type(expected):
            problem += f" Expected a {type(expected).__name__}, got a {type(value).__name__}."
        raise CheckFailed(name, problem, why)
    passed(name)


# --- Lesson 07: position ------------------------------------------------------


def _l07_table(n: int, d: int, base: float = 10000.0, *, exponent: str = "2i/d", swap: bool = False,
               halves: bool = False) -> np.ndarray:
    """The sinusoidal table (float64), optionally with one classic mistake switched on.

    exponent: "2i/d" (right, i = column // 2), "i/d" (pair index without the 2), "2c/d" (the column
    number c in place of i), "c/d" (the column number c over d); swap: cosine in the even columns;
    halves: all sines in the first half, all cosines in the second.
    """
    pos = np.arange(n, dtype=np.float64)
    pe = np.zeros((n, d))
    n_sin = (d + 1) // 2
    for c in range(d):
        if halves:
            i, use_sin = (c, True) if c < n_sin else (c - n_sin, False)
        else:
            i, use_sin = c // 2, c % 2 == 0
        e = {"2i/d": 2 * i / d, "i/d": i / d, "2c/d": 2 * c / d, "c/d": c / d}[exponent]
        angle = pos / base ** e
        pe[:, c] = np.sin(angle) if use_sin != swap else np.cos(angle)
    return pe


def check_pe_entry(name: str, value: Any, pos: int, column: int, d_model: int, base: float = 10000.0,
                   atol: float = 1e-3) -> None:
    """A sinusoidal-table entry PE(pos, column) computed by hand, naming the usual slips."""
    i = column // 2
    right, other = (math.sin, math.cos) if column % 2 == 0 else (math.cos, math.sin)
    angle = pos / base ** (2 * i / d_model)
    check_type(name, value, (int, float, np.integer, np.floating, torch.Tensor, np.ndarray))
    # Most specific first: the column number used as i also makes the angle tiny, like degrees do.
    mistakes = {
        f"used the column number as i: i counts (sin, cos) pairs, so column {column} is pair "
        f"i = {column} // 2 = {i} and the exponent is 2·{i}/{d_model}": right(pos / base ** (2 * column / d_model)),
        f"used the exponent i/d instead of 2i/d (i counts pairs, so column {column} has i = {i} and the "
        f"exponent is 2·{i}/{d_model})": right(pos / base ** (i / d_model)),
        f"used the exponent column/d = {column}/{d_model}: the exponent is 2i/d with i = column // 2 = {i}":
            right(pos / base ** (column / d_model)),
        "worked in degrees (or made the angle far too small): the angle pos / 10000^(2i/d) is in radians":
            right(math.radians(angle)),
        "took sin and cos the wrong way round: even columns (0, 2, ...) hold the sine, odd columns the cosine":
            other(angle),
    }
    right_value = right(angle)
    try:
        got = float(_to_array(value).reshape(-1)[0]) if _to_array(value).size == 1 else None
    except (TypeError, ValueError):
        got = None
    if got is not None and not abs(got - right_value) <= atol:
        # Several slips can give (almost) the same number, e.g. cos of a tiny angle is 1 either way: name them all.
        matching = [d for d, wrong in mistakes.items() if abs(got - wrong) <= atol]
        if len(matching) > 1:
            raise CheckFailed(name, f"{_fmt(got)} is not right.",
                              f"it looks like you {matching[0]}. (Or else you {'; or you '.join(matching[1:])}.)")
    check_close(name, value, right_value, atol=atol, rtol=0, mistakes=mistakes, reveal=False,
                hint=f"PE({pos}, {column}) = {'sin' if column % 2 == 0 else 'cos'}({pos} / {base:g}^(2·{i}/{d_model}))")


def _l07_function(name: str, fn: Callable, cases: Sequence[tuple], reference: Callable, *, label: str = "",
                  mistakes: Mapping[str, Callable] | None = None, hint: str | Callable[..., str] | None = None,
                  crash_hint: Callable[..., str | None] | None = None, dtype: torch.dtype | None = None,
                  atol: float = 1e-5) -> None:
    """Call the learner's `fn` on each args tuple in `cases` and compare with `reference`.

    The result must be a float torch tensor (of `dtype`, if given: checked after the values, so a
    wrong value is named first). `hint(*args)` may depend on the case; `crash_hint(problem, *args)`
    explains a crash (None: nothing to add). `label` only says which set of cases passed ("odd d_model").
    """
    for args in cases:
        shown = ", ".join(_short(a, 30) for a in args)
        try:
            got = call(name, fn, *args)
        except NotAttempted:
            raise
        except CheckFailed as err:
            extra = crash_hint(err.problem, *args) if crash_hint is not None else None
            if extra is None:
                raise
            raise CheckFailed(name, err.problem, extra) from None
        check_tensor(name, got, f"when called as {name}({shown})",
                     "build the result with torch functions (torch.sin, torch.zeros, torch.tensor(..., "
                     "dtype=torch.float64)), or convert it at the end with torch.as_tensor(...)")
        if not got.is_floating_point():
            raise CheckFailed(name, f"expected a float tensor, got dtype {got.dtype} when called as {name}({shown}).",
                              "integer tensors cannot hold sines and cosines: create it with a float dtype")
        wrong = {d: w for d, m in (mistakes or {}).items() if (w := m(*args)) is not None}  # None: not for these args
        check_close(f"{name}({shown})", got, reference(*args), atol=atol, mistakes=wrong, quiet=True,
                    hint=hint(*args) if callable(hint) else hint)
        if dtype is not None and got.dtype != dtype:
            raise CheckFailed(name, f"the values are right, but the dtype is {got.dtype}, not {dtype} "
                              f"(when called as {name}({shown})).",
                              f"create the tensor with dtype={dtype}: torch.tensor and torch.zeros give float32 "
                              "unless told otherwise")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}" + (f", {label}" if label else ""))


def check_sinusoidal_encoding(fn: Callable, cases: Sequence[tuple[int, int]] = ((4, 6), (50, 16), (7, 5)),
                              name: str = "sinusoidal_encoding", label: str = "") -> None:
    """The learner's `sinusoidal_encoding(n_positions, d_model)` against course_lib.positional.

    Put even sizes first: the usual mistakes are named there, before an odd d_model can crash.
    """
    from course_lib import positional

    def last_column_zero(n, d):
        pe = _l07_table(n, d)
        pe[:, -1] = 0.0
        return pe

    mistakes = {
        "used the exponent i/d instead of 2i/d (i counts the pairs: columns 2i and 2i+1 share one frequency)":
            lambda n, d: _l07_table(n, d, exponent="i/d"),
        "let i run over all d columns (0 ... d-1) instead of over the d/2 pairs: columns 2i and 2i+1 share "
        "the exponent 2i/d": lambda n, d: _l07_table(n, d, exponent="2c/d"),
        "used the column number c in the exponent c/d, so each cosine column (2i+1) gets its own "
        "frequency; it must share 2i/d with the sine before it": lambda n, d: _l07_table(n, d, exponent="c/d"),
        "put the cosine in the even columns and the sine in the odd ones (even columns hold sin)":
            lambda n, d: _l07_table(n, d, swap=True),
        "put all sines in the first half and all cosines in the second: the sines and cosines must "
        "alternate (column 2i sin, column 2i+1 cos)": lambda n, d: _l07_table(n, d, halves=True),
    }
    odd = ("for odd d the last column is a sine with no cosine partner: an odd d_model has (d + 1) // 2 sine "
           "columns and d // 2 cosine columns, so the cosines take only the first d // 2 angles "
           "(e.g. pe[:, 1::2] = torch.cos(angle[:, : d_model // 2]))")
    odd_mistakes = {
        "left the last column at 0: " + odd: lambda n, d: last_column_zero(n, d) if d % 2 else None,
    }
    formula = ("PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(the same angle), "
               "for i = 0 ... d/2 - 1")
    _l07_function(name, fn, list(cases), lambda n, d: positional.sinusoidal_encoding(n, d, dtype=torch.float64),
                  label=label, mistakes={**mistakes, **odd_mistakes},
                  hint=lambda n, d: formula + ("; " + odd if d % 2 else ""),
                  crash_hint=lambda problem, n, d: ("it crashed on an odd d_model = " + str(d) + ": " + odd) if d % 2 else None)


def check_position_params(learned: Any, sinusoidal: Any, rope: Any, max_len: int = 1024, d_model: int = 768) -> None:
    """Parameter counts of a learned table (max_len × d_model), sinusoids (0) and RoPE (0)."""
    table = max_len * d_model
    hint = "count the numbers that training adjusts, and only those."
    check_count("learned_table_params", learned, table, {
        "added max_len and d_model: the table holds one d_model-vector per position, max_len × d_model numbers":
            max_len + d_model,
        "counted one position vector: there is one for each of the max_len positions": d_model,
        "counted one number per position: each position has a whole d_model-vector": max_len,
        "counted a sine and a cosine table: a learned table is a single max_len × d_model matrix": 2 * table,
       }, hint=hint)
    check_count("sinusoidal_params", sinusoidal, 0, {
        "counted the entries of the table: they come from a formula and are never trained, so 0 parameters": table,
        "counted the frequencies: they are fixed numbers, not parameters": d_model // 2,
       }, hint=hint)
    check_count("rope_params", rope, 0, {
        "counted a d_model × d_model rotation matrix: RoPE's rotations are fixed by the position and "
        "the formula, nothing is trained": d_model * d_model,
        "counted a table of angles: the angles come from a formula, nothing is trained": table // 2,
        "counted a position table: RoPE adds no table, it rotates the queries and keys": table,
       }, hint=hint)


def check_rotation(fn: Callable, angles: Sequence[float] = (0.5, -1.2), name: str = "rotation", label: str = "") -> None:
    """The learner's 2×2 rotation matrix for an angle in radians (turning column vectors anticlockwise)."""
    from course_lib import positional

    def wrong(make):
        return lambda a: torch.tensor(make(math.cos(a), math.sin(a)), dtype=torch.float64)

    mistakes = {
        "put the minus sign on the bottom-left sine: that matrix turns the other way, by -angle; "
        "R(angle) = [[cos, -sin], [sin, cos]]": wrong(lambda c, s: [[c, s], [-s, c]]),
        "swapped sin and cos": wrong(lambda c, s: [[s, -c], [c, s]]),
        "forgot the minus sign: [[cos, sin], [sin, cos]] is not a rotation": wrong(lambda c, s: [[c, s], [s, c]]),
        "treated the angle as degrees: torch.cos and math.cos take radians":
            lambda a: positional.rotation_2d(math.radians(a)),
    }
    _l07_function(name, fn, [(float(a),) for a in angles], lambda a: positional.rotation_2d(a), label=label,
                  mistakes=mistakes, dtype=torch.float64, hint="rotation(a) = [[cos a, -sin a], [sin a, cos a]]")


def check_offset_map(fn: Callable, cases: Sequence[tuple[int, int]] = ((1, 4), (5, 16)), name: str = "offset_map",
                     label: str = "") -> None:
    """The learner's M_k with PE[pos + k] = PE[pos] @ M_k, against positional.rotation_for_offset."""
    from course_lib import positional

    def blocks(k, d, speed, transpose=False):
        mats = [positional.rotation_2d(k * speed(i, d)) for i in range(d // 2)]
        return torch.block_diag(*[m.T if transpose else m for m in mats])

    mistakes = {
        "built M_(-k), the map k places back: with rows as vectors (PE[pos] @ M) each block must be "
        "[[cos, -sin], [sin, cos]] of the angle +k·ω_i": lambda k, d: blocks(k, d, lambda i, d: 10000.0 ** (-2 * i / d), True),
        "turned every pair by the same angle k: pair i turns by k·ω_i with ω_i = 10000^(-2i/d)":
            lambda k, d: blocks(k, d, lambda i, d: 1.0),
        "used ω_i = 10000^(-i/d): the exponent is 2i/d": lambda k, d: blocks(k, d, lambda i, d: 10000.0 ** (-i / d)),
    }
    def crash_hint(problem, k, d):
        if "numpy" in problem or "ndarray" in problem:
            return ("torch.block_diag takes torch tensors, not numpy arrays: make rotation return a torch tensor "
                    "(exercise 4 checks that), or build each block with torch.tensor(..., dtype=torch.float64)")
        return None

    _l07_function(name, fn, list(cases), lambda k, d: positional.rotation_for_offset(k, d, dtype=torch.float64),
                  label=label, mistakes=mistakes, dtype=torch.float64, crash_hint=crash_hint,
                  hint="block i (rows and columns 2i, 2i+1) is rotation(k · 10000^(-2i/d)); zeros elsewhere")
    # The property itself, on the learner's matrix: one map moves every position by k.
    for k, d in cases:
        M = torch.as_tensor(_to_array(call(name, fn, k, d)), dtype=torch.float64)
        start = abs(int(k))
        pe = positional.sinusoidal_encoding(200 + 2 * start + 1, d, dtype=torch.float64)  # room for pos and pos + k
        moved = pe[start : start + 200] @ M
        check_true(name, torch.allclose(moved, pe[start + int(k) : start + int(k) + 200], atol=1e-6),
                   f"PE[pos] @ M is not PE[pos + {k}] for d = {d}.")


def _l07_rope_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rotate: str = "qk",
                        scale: str = "sqrt") -> torch.Tensor:
    from course_lib.positional import apply_rotary

    q = apply_rotary(q) if "q" in rotate else q
    k = apply_rotary(k) if "k" in rotate else k
    v = apply_rotary(v) if "v" in rotate else v
    d = q.shape[-1]
    divide = {"sqrt": math.sqrt(d), "none": 1.0, "d": float(d)}[scale]
    weights = torch.softmax(q @ k.transpose(-2, -1) / divide, dim=-1)  # (T, T)
    return weights @ v  # (T, d)


def check_rope_attention(fn: Callable, *, hidden: bool = False, name: str = "rope_attention", label: str = "") -> None:
    """The learner's fixed RoPE self-attention, naming which of q, k, v were (not) rotated."""
    g = torch.Generator().manual_seed(70)
    sizes = [(5, 4), (8, 16)] + ([(1, 2), (12, 32), (6, 64)] if hidden else [])
    cases = []
    for T, d in sizes:
        q, k, v = (torch.randn(T, d, generator=g, dtype=torch.float64) * 2 for _ in range(3))
        cases.append((q, k, v))
    mistakes = {
        "rotated the queries and the values (the bug in the given code): RoPE turns the queries and the KEYS, "
        "so that q_m · k_n depends on n - m; the values must not be rotated": lambda q, k, v: _l07_rope_attention(q, k, v, "qv"),
        "rotated only the queries: the keys must be rotated too, or the score depends on the query's "
        "absolute position": lambda q, k, v: _l07_rope_attention(q, k, v, "q"),
        "rotated only the keys: the queries must be rotated too, or the score depends on the key's "
        "absolute position; RoPE turns both, so that only the offset n - m remains":
            lambda q, k, v: _l07_rope_attention(q, k, v, "k"),
        "rotated the values as well: only the queries and keys are rotated": lambda q, k, v: _l07_rope_attention(q, k, v, "qkv"),
        "left the rotation out: the queries and keys must be rotated": lambda q, k, v: _l07_rope_attention(q, k, v, ""),
        "rotated the keys and the values, not the queries and keys": lambda q, k, v: _l07_rope_attention(q, k, v, "kv"),
        "rotated the right tensors but left out the division by sqrt(d): the scores are q_m · k_n / sqrt(d), "
        "as in the given code": lambda q, k, v: _l07_rope_attention(q, k, v, "qk", scale="none"),
        "divided the scores by d instead of sqrt(d)": lambda q, k, v: _l07_rope_attention(q, k, v, "qk", scale="d"),
    }
    _l07_function(name, fn, cases, _l07_rope_attention, label=label, mistakes=mistakes,
                  hint="rotate q and k with positional.apply_rotary, then ordinary scaled dot-product attention "
                       "(divide by sqrt(d)) with the untouched v")


def _l07_shuffle_example() -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The exercise's five word vectors, their self-attention outputs and the permutation."""
    from course_lib.attention import scaled_dot_product_attention

    g = torch.Generator().manual_seed(7)
    X = torch.randn(5, 4, generator=g)  # (5, 4)
    W_q, W_k, W_v = (torch.randn(4, 4, generator=g) / 2 for _ in range(3))
    perm = [3, 0, 4, 1, 2]

    def attend(x):
        return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)[0]  # (5, 4)

    return attend(X), attend(X[perm]), perm


def check_shuffled_output(value: Any, name: str = "Y_shuffled") -> None:
    """The predicted output of unmasked self-attention on shuffled words: the outputs shuffled the same way."""
    Y, expected, perm = _l07_shuffle_example()
    inverse = [perm.index(j) for j in range(len(perm))]
    check_close(name, value, expected, atol=1e-4, mistakes={
        "kept the original order: self-attention without a mask is permutation-EQUIVARIANT, not invariant; "
        "every output row moves with its word": Y,
        "applied the inverse permutation: the new row j belongs to word perm[j], so the new output is Y[perm]": Y[inverse],
        "reversed the rows": Y.flip(0),
    }, hint="the new input is X[perm]; each word keeps its own output vector")


# --- Lesson 08: multi-head attention ------------------------------------------
# Inputs are drawn from a seeded CPU generator, so every learner sees the same cases. Weights follow
# nn.Linear's layout: a weight is (out_features, in_features) and a layer computes x @ W.T + b.


def _l08_randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def _l08_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, C = x.shape
    return x.reshape(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, h, T, d_k)


def _l08_merge(x: torch.Tensor) -> torch.Tensor:
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)  # (B, T, h*d_k)


_SPLIT_MISTAKES = {
    "reshaped straight to (B, n_heads, T, d_k) without the transpose: each 'head' then holds pieces of "
    "several tokens. Split the last axis with view(B, T, n_heads, d_k), then transpose(1, 2)":
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
    "split the features as (d_k, n_heads) instead of (n_heads, d_k): head i then gets every n_heads-th "
    "feature instead of a block of d_k neighbouring features":
        lambda x, h: x.reshape(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2),
}

_MERGE_MISTAKES = {
    "reshaped (B, n_heads, T, d_k) straight to (B, T, d_model) without transposing back first: that "
    "glues together rows of different tokens. Use transpose(1, 2) then reshape":
        lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]),
    "put the features in (d_k, n_heads) order instead of (n_heads, d_k): concatenate whole heads, "
    "head 0's d_k features first":
        lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
}


def check_split_heads(fn: Callable, cases: Sequence[tuple[int, int, int, int]] = ((2, 5, 12, 3),), seed: int = 0) -> None:
    """`fn(x, n_heads)`: (B, T, d_model) -> (B, n_heads, T, d_model // n_heads). Cases are (B, T, d_model, n_heads)."""
    for i, (B, T, C, h) in enumerate(cases):
        x = _l08_randn(B, T, C, seed=seed + i)
        got = call("split_heads", fn, x.clone(), h)
        check_tensor("split_heads", got, f"when called with x of shape {(B, T, C)}, n_heads={h}")
        if isinstance(got, torch.Tensor) and T != h and tuple(got.shape) == (B, T, h, C // h):
            raise CheckFailed(
                "split_heads", f"got shape (B, T, n_heads, d_k) = {tuple(got.shape)}, expected (B, n_heads, T, d_k) = {(B, h, T, C // h)}.",
                "it looks like you forgot transpose(1, 2): the heads must come before T, so they act like a batch axis.",
            )
        wrong = {d: m(x, h) for d, m in _SPLIT_MISTAKES.items()}
        check_close(f"split_heads(x of shape {(B, T, C)}, n_heads={h})", got, _l08_split(x, h), mistakes=wrong, quiet=True)
    passed("split_heads", f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def check_merge_heads(fn: Callable, cases: Sequence[tuple[int, int, int, int]] = ((2, 3, 5, 4),), seed: int = 0,
                      split_fn: Callable | None = None) -> None:
    """`fn(x)`: (B, n_heads, T, d_k) -> (B, T, n_heads * d_k). Cases are (B, n_heads, T, d_k).

    With `split_fn` (the learner's split_heads) it also checks that merging undoes splitting.
    """
    for i, (B, h, T, d_k) in enumerate(cases):
        x = _l08_randn(B, h, T, d_k, seed=seed + 100 + i)
        got = call("merge_heads", fn, x.clone())
        check_tensor("merge_heads", got, f"when called with x of shape {(B, h, T, d_k)}")
        wrong = {d: m(x) for d, m in _MERGE_MISTAKES.items()}
        check_close(f"merge_heads(x of shape {(B, h, T, d_k)})", got, _l08_merge(x), mistakes=wrong, quiet=True)
        if split_fn is not None:
            y = _l08_randn(B, T, h * d_k, seed=seed + 200 + i)
            back = call("merge_heads", fn, call("split_heads", split_fn, y.clone(), h))
            check_close("merge_heads(split_heads(y))", back, y, quiet=True,
                        hint="merging should undo splitting exactly: the same token's features, in the same order.")
    passed("merge_heads", f"{len(cases)} case{'s' if len(cases) != 1 else ''}"
           + (", and it undoes split_heads" if split_fn is not None else ""))


def check_mha_param_count(name: str, value: Any, d_model: int, n_heads: int, bias: bool = True) -> None:
    """The number of parameters of MultiHeadAttention(d_model, n_heads, bias), naming the usual miscounts."""
    d, h = d_model, n_heads
    d_k = d // h
    b = 1 if bias else 0
    expected = 4 * d * d + 4 * d * b
    mistakes = {
        "forgot the output projection W_O (three matrices instead of four)": 3 * d * d + 3 * d * b,
        "gave every head its own full d_model × d_model matrices: a head only gets d_model × d_k of each, "
        "so the heads together use d_model × d_model": h * (3 * d * d + 3 * d * b) + d * d + d * b,
        "counted each head's projections as d_k × d_k: a head maps all d_model input features to d_k": 3 * h * d_k * d_k + d * d + (4 * d) * b,
        f"multiplied the count by the number of heads ({h}): the head count does not change the parameter count. "
        f"The {h} heads share out each d_model × d_model matrix, d_model × d_k each, and {h} × d_k = d_model":
            h * (4 * d * d + 4 * d * b),
        f"multiplied the weights by the number of heads ({h}): the head count does not change the parameter count; "
        f"the {h} heads share out each d_model × d_model matrix": h * 4 * d * d + 4 * d * b,
    }
    if bias:
        mistakes["left out the biases (one per output feature of each of the four layers: 4 · d_model)"] = 4 * d * d
    else:
        mistakes["counted biases, but these layers were built with bias=False"] = 4 * d * d + 4 * d
    check_count(name, value, expected, mistakes, detail=f"{expected:,}",
                hint="count each nn.Linear(d_model, d_model): a weight matrix of d_model × d_model numbers, "
                     "plus d_model biases if it has them.")


def _l08_combine_mistakes(heads: torch.Tensor, w_o: torch.Tensor, b_o: torch.Tensor | None) -> dict[str, torch.Tensor]:
    B, h, T, d_k = heads.shape
    bias = 0.0 if b_o is None else b_o
    per_head = [heads[:, i] @ w_o[:, i * d_k:(i + 1) * d_k].T for i in range(h)]  # each (B, T, d_model)
    wrong = {
        "averaged the per-head projections instead of summing them: the heads are combined by W_O, "
        "a learned linear map, and its blocks simply add up": sum(per_head) / h + bias,
        "used W_O's rows (math's x·W convention): nn.Linear stores the weight as (out, in), so head i "
        "meets the columns w_o[:, i*d_k:(i+1)*d_k], multiplied as head @ block.T":
            sum(heads[:, i] @ w_o[i * d_k:(i + 1) * d_k, :] for i in range(h)) + bias,
    }
    if b_o is not None:
        wrong["added the bias once per head: W_O has one bias, added once after the sum"] = sum(per_head) + h * b_o
        wrong["forgot the bias b_o"] = sum(per_head)
    return wrong


def check_combine_by_sum(fn: Callable, cases: Sequence[tuple[int, int, int, int, bool]] = ((2, 3, 4, 2, True),), seed: int = 0) -> None:
    """`fn(heads, w_o, b_o)`: heads (B, h, T, d_k), w_o (d_model, d_model), b_o (d_model,) or None -> (B, T, d_model).

    The reference is concatenate-then-project: merge the heads and apply nn.Linear's map. Cases are
    (B, h, T, d_k, with_bias).
    """
    for i, (B, h, T, d_k, with_bias) in enumerate(cases):
        d = h * d_k
        heads = _l08_randn(B, h, T, d_k, seed=seed + 300 + i)
        w_o = _l08_randn(d, d, seed=seed + 400 + i, scale=d ** -0.5)
        b_o = _l08_randn(d, seed=seed + 500 + i) if with_bias else None
        shown = f"heads of shape {(B, h, T, d_k)}, w_o of shape {(d, d)}, b_o {'of shape ' + str((d,)) if with_bias else 'None'}"
        try:
            got = call("combine_by_sum", fn, heads.clone(), w_o.clone(), None if b_o is None else b_o.clone())
        except NotAttempted:
            raise
        except CheckFailed as err:
            if not any(word in err.problem for word in ("shape", "size", "multiplied", "dimension")):
                raise
            raise CheckFailed("combine_by_sum", err.problem,
                              f"mind the shapes: heads[:, i] is (B, T, d_k) = {(B, T, d_k)}, and head i's block of w_o is "
                              f"the columns w_o[:, i*d_k:(i+1)*d_k], shape (d_model, d_k) = {(d, d_k)}. nn.Linear computes "
                              "x @ W.T, so multiply heads[:, i] @ block.T to get (B, T, d_model); without the .T the "
                              "shapes do not fit") from None
        check_tensor("combine_by_sum", got, f"when called with {shown}")
        want = torch.nn.functional.linear(_l08_merge(heads), w_o, b_o)  # concatenate, then W_O
        check_close(f"combine_by_sum(heads of shape {(B, h, T, d_k)}, bias={'yes' if with_bias else 'None'})",
                    got, want, mistakes=_l08_combine_mistakes(heads, w_o, b_o), quiet=True)
    passed("combine_by_sum", f"{len(cases)} case{'s' if len(cases) != 1 else ''}: equal to concatenate-then-W_O")


_MHA_KEYS = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")


def _l08_params(d: int, seed: int, bias: bool = True) -> dict[str, torch.Tensor | None]:
    p: dict[str, torch.Tensor | None] = {}
    for j, name in enumerate(("q", "k", "v", "o")):
        p[f"w_{name}"] = _l08_randn(d, d, seed=seed + 10 * j, scale=1.5 * d ** -0.5)  # scores large enough that scaling matters
        p[f"b_{name}"] = _l08_randn(d, seed=seed + 10 * j + 1, scale=0.5) if bias else None
    return p


def _l08_mha(x, p, n_heads, mask=None, *, scale="d_k", values="v", split="ok", merge="ok", project_out=True, mask_mode="ok"):
    """A configurable multi-head attention: the defaults are right, each keyword makes one known mistake."""
    F = torch.nn.functional
    B, T, d = x.shape
    d_k = d // n_heads
    q, k, v = (F.linear(x, p[f"w_{n}"], p[f"b_{n}"]) for n in "qkv")  # (B, T, d) each
    if values == "q":
        v = q
    if split == "no_transpose":
        q, k, v = (t.reshape(B, n_heads, T, d_k) for t in (q, k, v))
    else:
        q, k, v = (_l08_split(t, n_heads) for t in (q, k, v))  # (B, h, T, d_k)
    scores = q @ k.transpose(-2, -1)  # (B, h, T, T)
    if scale == "d_k":
        scores = scores / math.sqrt(d_k)
    elif scale == "d_model":
        scores = scores / math.sqrt(d)
    if mask is not None and mask_mode == "ok":
        scores = scores.masked_fill(~mask, float("-inf"))
    if mask is not None and mask_mode == "inverted":
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights * mask
    out = weights @ v  # (B, h, T, d_k)
    out = out.reshape(B, T, d) if "no_transpose" in (split, merge) else _l08_merge(out)  # (B, T, d)
    return F.linear(out, p["w_o"], p["b_o"]) if project_out else out


def _l08_reference_mha(x, p, n_heads, mask=None):
    """torch.nn.MultiheadAttention with the same weights (an independent reference)."""
    d = x.shape[-1]
    bias = p["b_q"] is not None
    ref = torch.nn.MultiheadAttention(d, n_heads, bias=bias, batch_first=True).to(x.dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([p["w_q"], p["w_k"], p["w_v"]]))
        ref.out_proj.weight.copy_(p["w_o"])
        if bias:
            ref.in_proj_bias.copy_(torch.cat([p["b_q"], p["b_k"], p["b_v"]]))
            ref.out_proj.bias.copy_(p["b_o"])
        attn_mask = None if mask is None else ~mask  # torch's boolean mask means True = blocked
        out, _ = ref(x, x, x, attn_mask=attn_mask, need_weights=False)
    return out


_MHA_MISTAKES = {
    "scaled the scores by sqrt(d_model) instead of sqrt(d_k): each head's dot products run over d_k = "
    "d_model / n_heads features, so their variance is d_k": dict(scale="d_model"),
    "forgot to divide the scores by sqrt(d_k)": dict(scale="none"),
    "used the queries as the values: each head's values come from V = x W_v": dict(values="q"),
    "reshaped to (B, n_heads, T, d_k) without the transpose, so heads mix features of different tokens":
        dict(split="no_transpose"),
    "forgot the output projection W_O after concatenating the heads": dict(project_out=False),
    "split the heads correctly but merged them by reshaping (B, n_heads, T, d_k) straight to (B, T, d_model): "
    "that glues together rows of different tokens. Transpose back first: out.transpose(1, 2).reshape(B, T, d_model)":
        dict(merge="no_transpose"),
    "used the mask the wrong way round (True means 'may attend')": dict(mask_mode="inverted"),
    "applied the mask after the softmax: masked scores must be set to -inf before it, so that the "
    "remaining weights still sum to 1": dict(mask_mode="after_softmax"),
}


def check_mha_forward(fn: Callable, cases: Sequence[tuple[int, int, int, int, str | None]] = ((2, 5, 12, 3, None),), seed: int = 0) -> None:
    """`fn(x, params, n_heads, mask=None)` against nn.MultiheadAttention with the same weights.

    `params` holds `w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o` in nn.Linear's layout. Cases are
    (B, T, d_model, n_heads, mask) with mask None or "causal".
    """
    for i, (B, T, d, h, mask_kind) in enumerate(cases):
        x = _l08_randn(B, T, d, seed=seed + 600 + i)
        p = _l08_params(d, seed=seed + 700 + 37 * i)
        mask = torch.ones(T, T, dtype=torch.bool).tril() if mask_kind == "causal" else None
        args = (x.clone(), {k: (None if t is None else t.clone()) for k, t in p.items()}, h)
        got = call("mha_forward", fn, *args, **({"mask": mask.clone()} if mask is not None else {}))
        shown = f"x of shape {(B, T, d)}, n_heads={h}" + (", causal mask" if mask is not None else "")
        check_tensor("mha_forward", got, f"when called with {shown}")
        want = _l08_reference_mha(x, p, h, mask)
        wrong = {}
        for description, kw in _MHA_MISTAKES.items():
            if "mask_mode" in kw and mask is None:
                continue
            if "no_transpose" in (kw.get("split"), kw.get("merge")) and h == 1:
                continue  # with one head the transpose changes nothing
            wrong[description] = _l08_mha(x, p, h, mask, **kw)
        check_close(f"mha_forward({shown})", got, want, atol=1e-4, rtol=1e-4, mistakes=wrong, quiet=True)
    passed("mha_forward", f"{len(cases)} case{'s' if len(cases) != 1 else ''}, equal to torch.nn.MultiheadAttention")


def check_fused_mha(fn: Callable, buggy: Callable | None = None,
                    cases: Sequence[tuple[int, int, int, int]] = ((2, 5, 12, 3),), seed: int = 0) -> None:
    """`fn(x, w_qkv, b_qkv, w_o, b_o, n_heads)` (one fused (3·d_model, d_model) projection) against
    nn.MultiheadAttention, whose `in_proj_weight` has exactly this layout. Cases are (B, T, d_model, n_heads).

    `buggy` is the given broken version: returning its output unchanged is named as such.
    """
    for i, (B, T, d, h) in enumerate(cases):
        x = _l08_randn(B, T, d, seed=seed + 800 + i)
        p = _l08_params(d, seed=seed + 900 + 37 * i)
        w_qkv = torch.cat([p["w_q"], p["w_k"], p["w_v"]])  # (3d, d)
        b_qkv = torch.cat([p["b_q"], p["b_k"], p["b_v"]])  # (3d,)
        got = call("fused_mha", fn, x.clone(), w_qkv.clone(), b_qkv.clone(), p["w_o"].clone(), p["b_o"].clone(), h)
        check_tensor("fused_mha", got, f"when called with x of shape {(B, T, d)}, n_heads={h}")
        want = _l08_reference_mha(x, p, h)
        wrong = {}
        if buggy is not None:
            with torch.no_grad():
                wrong["returned the given implementation unchanged: both of its bugs are still there"] = buggy(
                    x.clone(), w_qkv.clone(), b_qkv.clone(), p["w_o"].clone(), p["b_o"].clone(), h)
        wrong |= {
            "fixed the scaling but not the head split: reshape to (B, T, n_heads, d_k), then transpose(1, 2)":
                _l08_mha(x, p, h, split="no_transpose"),
            "fixed the head split but not the scaling: divide by sqrt(d_k), the per-head width":
                _l08_mha(x, p, h, scale="d_model"),
            "fixed the split into heads but not the merge: (B, n_heads, T, d_k) needs transpose(1, 2) "
            "before the reshape to (B, T, d_model)": _l08_mha(x, p, h, merge="no_transpose"),
            "fixed the split but neither the merge nor the scaling":
                _l08_mha(x, p, h, merge="no_transpose", scale="d_model"),
            "used the queries as the values": _l08_mha(x, p, h, values="q"),
        }
        check_close(f"fused_mha(x of shape {(B, T, d)}, n_heads={h})", got, want, atol=1e-4, rtol=1e-4, mistakes=wrong, quiet=True)
    passed("fused_mha", f"{len(cases)} case{'s' if len(cases) != 1 else ''}, equal to torch.nn.MultiheadAttention")
