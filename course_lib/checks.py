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

    def __init__(self, name: str):
        super().__init__(
            name,
            "not attempted yet.",
            "replace `raise NotImplementedError()` in the answer cell with your code, run that cell, then this one.",
        )


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
        raise NotAttempted(variable)
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


def check_shape(name: str, value: Any, expected_shape: Sequence[int]) -> None:
    """Fail unless `value` (array, tensor or a shape tuple) has `expected_shape`."""
    shape = tuple(value) if isinstance(value, (tuple, list, torch.Size)) else tuple(np.shape(_to_array(value)))
    expected_shape = tuple(expected_shape)
    if shape != expected_shape:
        hint = None
        if sorted(shape) == sorted(expected_shape):
            hint = "the right sizes in the wrong order: is something transposed, or an axis swapped?"
        raise CheckFailed(name, f"expected shape {expected_shape}, got {shape}.", hint)


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
) -> None:
    """Compare numbers, arrays or tensors; name a known mistake when the answer matches one.

    `mistakes` maps a description ("forgot to divide by sqrt(d_k)") to the value that mistake
    produces; the first that matches `actual` becomes the hint.
    """
    if actual is None:
        raise CheckFailed(name, "got None: did you forget to `return` the result?")
    a, e = _to_array(actual), _to_array(expected)
    if a.dtype == object:
        raise CheckFailed(name, f"expected numbers, got {_short(actual)}.")
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
        problem = f"expected {_fmt(e.item())}, got {_fmt(a.item())}."
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


def _l00_count(name: str, value: Any, expected: int, mistakes: Mapping[str, Any] | None = None, hint: str | None = None,
               quiet: bool = False) -> None:
    """A whole-number answer: say when it is not a number, not whole, or a known wrong count."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CheckFailed(name, f"expected a whole number (an int), got {type(value).__name__} ({_short(value)}).")
    if not float(value).is_integer():
        raise CheckFailed(name, f"expected a whole number, got {_fmt(float(value))}.",
                          "counts of steps, layers and patches are whole numbers: did a division leave a fraction?")
    if int(value) == expected:
        if not quiet:
            passed(name)
        return
    for description, wrong in (mistakes or {}).items():
        if int(value) == wrong:
            raise CheckFailed(name, f"{int(value)} is not right.", f"it looks like you {description}.")
    raise CheckFailed(name, f"{int(value)} is not right.", hint)


def _l00_reference_sample(seed: int) -> torch.Tensor:
    from course_lib.device import seed_everything

    seed_everything(seed)
    return torch.randn(5)


def check_reproducible_sample(fn: Callable, seeds: Sequence[int] = (0, 7), name: str = "reproducible_sample") -> None:
    """The learner's `reproducible_sample(seed)`: seed everything, then return `torch.randn(5)`."""
    for seed in seeds:
        first = call(name, fn, seed)
        torch.randn(100)  # move the global generator on: a function that seeds itself does not care
        np.random.rand(100)
        second = call(name, fn, seed)
        shown = f"{name}({seed})"
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
    a, b = call(name, fn, seeds[0]), call(name, fn, seeds[0] + 1)
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
    _l00_count(name, value, steps, {
        "counted the words from one to the other, both included, instead of the steps between them": steps + 1,
        "gave self-attention's answer (one step); an RNN must pass through every word in between": 1,
        "counted only the words strictly between them; the last hop into the final word is a step too": steps - 1,
    }, hint=f"the hidden state moves one word per step: word {first} -> word {first + 1} -> ... -> word {last}.")


def _l00_receptive_field(num_layers: int, kernel_size: int) -> int:
    return 1 + num_layers * (kernel_size - 1)


def check_receptive_field(fn: Callable, cases: Sequence[tuple[int, int]] = ((1, 3), (2, 3), (4, 5)),
                          name: str = "receptive_field") -> None:
    """The learner's `receptive_field(num_layers, kernel_size)` = 1 + L (k - 1)."""
    for layers, k in cases:
        shown = f"{name}({layers}, {k})"
        got = call(name, fn, layers, k)
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        _l00_count(shown, got, _l00_receptive_field(layers, k), {
            "forgot the +1 for the centre position (each layer adds k - 1 positions to ONE starting position)": layers * (k - 1),
            "multiplied the layers by the kernel size (neighbouring windows overlap: each layer adds only k - 1)": layers * k,
            "made it grow exponentially; stacked ordinary convolutions grow linearly (exponential growth needs dilation)": k**layers,
            "added k - 1 once too often (a single layer sees exactly k positions)": 1 + (layers + 1) * (k - 1),
        }, quiet=True)
    passed(name, f"{len(cases)} cases")


def _l00_layers_needed(distance: int, kernel_size: int) -> int:
    return -(-distance // (kernel_size - 1))  # ceil(d / (k - 1)) without floats


def check_layers_needed(fn: Callable, cases: Sequence[tuple[int, int]] = ((2, 3), (10, 3), (9, 5)),
                        name: str = "layers_needed") -> None:
    """The learner's `layers_needed(distance, kernel_size)`: fewest layers with 1 + L (k - 1) >= d + 1."""
    for d, k in cases:
        shown = f"{name}({d}, {k})"
        got = call(name, fn, d, k)
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        want = _l00_layers_needed(d, k)
        _l00_count(shown, got, want, {
            "rounded down: with that many layers the two words are still just out of each other's reach": d // (k - 1),
            "required the receptive field to span d positions instead of d + 1 (both words must be inside it)": -(-(d - 1) // (k - 1)),
            "divided by the kernel size k instead of the k - 1 new positions each layer adds": -(-d // k),
            "added one layer too many": want + 1,
        }, hint=f"find the smallest L with 1 + L * ({k} - 1) >= {d} + 1.", quiet=True)
    passed(name, f"{len(cases)} cases")


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
    _l00_count(name, value, want, mistakes,
               hint=f"a {image_size} x {image_size} image is a grid of ({image_size} / {patch_size}) x ({image_size} / {patch_size}) patches.")


def _l00_patch_count(height: int, width: int, patch: int) -> int:
    return (height // patch) * (width // patch)


def check_patch_count(fn: Callable, cases: Sequence[tuple[int, int, int]] = ((224, 224, 16), (32, 32, 8)),
                      name: str = "patch_count") -> None:
    """The learner's fixed `patch_count(height, width, patch)` = (H // p) * (W // p)."""
    for h, w, p in cases:
        shown = f"{name}({h}, {w}, {p})"
        got = call(name, fn, h, w, p)
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        _l00_count(shown, got, _l00_patch_count(h, w, p), {
            "kept the bug: the pixel count was divided by the patch side, not by the patch area": (h * w) // p,
            "assumed a square image (used the height twice)": (h // p) ** 2,
            "assumed a square image (used the width twice)": (w // p) ** 2,
            "counted partial patches at the border; patches that do not fit are dropped": -(-h // p) * -(-w // p),
        }, quiet=True)
    passed(name, f"{len(cases)} cases")


def check_attention_steps(name: str, value: Any, n_words: int) -> None:
    """Steps for word 1 and word n to interact in one self-attention layer: always 1."""
    _l00_count(name, value, 1, {
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
    for ids, num_classes in cases:
        ids = np.asarray(ids)
        got = call(name, fn, ids.copy(), num_classes)
        if got is None:
            raise CheckFailed(name, "got None: did you forget to `return` the result?")
        shown = f"{name}({ids.tolist()}, {num_classes})"
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
    for a, b in cases:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        got = call(name, fn, a.copy(), b.copy())
        dots = (a * b).sum(axis=1)
        na, nb = np.sqrt((a * a).sum(axis=1)), np.sqrt((b * b).sum(axis=1))
        mistakes = {
            "divided by the length of a only (b is never normalised)": dots / na,
            "divided by the length of b only (a is never normalised)": dots / nb,
            "returned the plain dot products, without normalising either vector": dots,
            "divided by the squared lengths |a|²|b|² instead of |a||b|": dots / (na**2 * nb**2),
            "divided by the length of the whole matrix (np.linalg.norm without axis=1) instead of each row's": dots / (np.linalg.norm(a) * np.linalg.norm(b)),
        }
        got_arr = _to_array(got) if got is not None else None
        if got_arr is not None and got_arr.shape == (len(a), len(b)) and len(a) > 1:
            raise CheckFailed(name, f"expected one similarity per row, shape ({len(a)},), got {got_arr.shape}.",
                              "you compared every row of a with every row of b (a @ b.T); pair row i of a with row i of b.")
        check_close(f"{name}(a of shape {a.shape}, b of shape {b.shape})", got, _l01_rows_cosine(a, b), mistakes=mistakes, quiet=True)
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def check_predicted_shape(name: str, value: Any, expected: tuple, mistakes: Mapping[str, tuple] | None = None) -> None:
    """A shape written by hand, as a tuple of ints; names the likely confusion if it matches one."""
    if isinstance(value, (list, torch.Size)):
        value = tuple(value)
    if not isinstance(value, tuple) or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        raise CheckFailed(name, f"expected a tuple of ints such as (2, 3), got {_short(value)}.")
    value = tuple(int(v) for v in value)
    if value != tuple(expected):
        for description, wrong in (mistakes or {}).items():
            if value == tuple(wrong):
                raise CheckFailed(name, f"{value} is not right.", f"it looks like you {description}.")
        raise CheckFailed(name, f"{value} is not right.",
                          "write the shapes of the two factors next to each other: (..., V) @ (V, D) keeps the outer sizes.")
    passed(name)


def check_embed_by_matmul(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "embed_by_matmul") -> None:
    """The learner's lookup `one_hot(ids) @ E` in torch: forward equal to `E[ids]`, gradients equal to
    `nn.Embedding`'s, and computed with a matrix product rather than by indexing."""
    if cases is None:
        gen = torch.Generator().manual_seed(1)
        cases = [
            (torch.tensor([1, 2, 0]), torch.arange(12.0).reshape(3, 4)),
            (torch.tensor([[3, 3, 0], [1, 4, 2]]), torch.randn(5, 2, generator=gen)),
        ]
    for ids, E in cases:
        V = E.shape[0]
        E_learner = E.detach().clone().requires_grad_()
        shown = f"{name}(ids of shape {tuple(ids.shape)}, E of shape {tuple(E.shape)})"
        got = call(name, fn, ids.clone(), E_learner)
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


# --- Lesson 03: from skips to attention ---------------------------------------


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
    check_function(name, fn, cases, reference=lambda x: torch.softmax(x, dim=-1), mistakes=_l06_softmax_mistakes(),
                   hint="subtract each row's maximum, exponentiate, divide by the row's sum (all along dim=-1)")


def check_causal_mask(fn: Callable, name: str = "causal_mask", sizes: Sequence[int] = (4, 1)) -> None:
    """The learner's causal mask: (T, T), boolean, True on and below the diagonal.

    Put a size of at least 3 first: for T = 1 several mistakes look alike.
    """
    for T in sizes:
        got = call(name, fn, T)
        if not isinstance(got, torch.Tensor):
            raise CheckFailed(name, f"expected a torch.Tensor, got {type(got).__name__} for T={T}.")
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
    if hidden:
        qh, kh, vh = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
        cases.append(("batch 2 x 3 heads, 5 words, d_k = 8, causal mask", 3 * qh, 3 * kh, vh, torch.ones(5, 5, dtype=torch.bool).tril()))
        pad = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])[:, None, :]  # (2, 1, 5)
        cases.append(("a padding mask of shape (2, 1, 5)", 2 * qb, 2 * kb, vb, pad))
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
                              "to transpose k, swap only its last two axes: k.transpose(-2, -1) (k.T reverses every axis "
                              "of a batched tensor); and compare with mask == False or ~mask for a boolean mask") from None
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(name, f"expected a tuple (output, weights), got {_short(got)}.",
                              "end the function with `return weights @ v, weights`")
        out, weights = got
        want_out, want_w = reference(q, k, v, mask)
        wrong = _l06_attention_mistakes(q, k, v, mask)
        label = f"{name} ({description})"
        check_close(f"{label}, weights", weights, want_w, mistakes={d: w for d, (o, w) in wrong.items()}, quiet=True,
                    hint="weights = softmax(q @ k.transpose(-2, -1) / sqrt(d_k)) over the last axis, masked before the softmax")
        check_close(f"{label}, output", out, want_out, mistakes={d: o for d, (o, w) in wrong.items()}, quiet=True,
                    hint="the output is weights @ v")
        n += 1
    passed(name, f"{n} cases")


def check_flying_arrows(scores: Any, weights: Any, output: Any) -> None:
    """The two-word example: flying = [0,1,1,1,0,0], arrows = [1,1,0,-1,-1,1]; q/k/v = dims 1-2 / 3-4 / 5-6."""
    raw = torch.tensor([1.0, -1.0])  # q_flying · k_flying, q_flying · k_arrows
    scaled = raw / math.sqrt(2)
    w = torch.softmax(scaled, dim=0)
    v = torch.tensor([[0.0, 0.0], [-1.0, 1.0]])
    check_close("scores_flying", scores, scaled, atol=1e-3, rtol=0,
                mistakes={"forgot to divide by sqrt(d_k) = sqrt(2)": raw, "divided by d_k = 2 instead of sqrt(2)": raw / 2,
                          "computed the scores of arrows' query (the second word) instead of flying's": torch.tensor([2.0, -1.0]) / math.sqrt(2)})
    unscaled_w = torch.softmax(raw, dim=0)
    check_close("weights_flying", weights, w, atol=5e-3, rtol=0,
                mistakes={"forgot to divide the scores by sqrt(2) before the softmax": unscaled_w,
                          "did not normalise (these are exp(scores), not weights)": scaled.exp()})
    check_close("output_flying", output, w @ v, atol=5e-3, rtol=0,
                mistakes={"used flying's own value v_flying = [0, 0]; the output is Σ_j α_j v_j": v[0],
                          "used the unscaled weights": unscaled_w @ v,
                          "weighted the values in the wrong order (0.20 on flying, 0.80 on arrows)": w.flip(0) @ v})


def check_choice(name: str, value: Any, expected: Any, explanations: Mapping[Any, str] | None = None) -> None:
    """A multiple-choice or shape answer: exact match, with an explanation for each known wrong answer."""
    if isinstance(expected, tuple) and isinstance(value, (list, torch.Size)):
        value = tuple(value)
    if value != expected:
        why = (explanations or {}).get(value)
        raise CheckFailed(name, f"{value!r} is not right.", why)
    passed(name)


# --- Lesson 07: position ------------------------------------------------------


# --- Lesson 08: multi-head attention ------------------------------------------
