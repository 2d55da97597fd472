"""The general machinery of the exercise checks.

A check either prints one line saying what passed, or raises `CheckFailed` (an `AssertionError`, so
the grader counts it as a failed test) whose message says what is wrong and, when the answer
matches a known mistake, which one. In a notebook the message is shown on its own, without a
traceback: IPython calls `_render_traceback_` on exceptions that define it.

An exercise that was not attempted (its answer cell still raises `NotImplementedError`, or the
variable it should define does not exist) raises `NotAttempted`, which says so plainly.

The checks that know one lesson's likely mistakes live in that lesson's module (`lesson06.py`, ...);
a test cell imports the general helpers from here and its own lesson's checks from there::

    from course_lib import checks
    from course_lib.checks import lesson01
    lesson01.check_one_hot(checks.answer("one_hot"))
    checks.check_close("cos_ab", checks.answer("cos_ab"), 0.5)
"""
from __future__ import annotations

import difflib
import hashlib
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
        self.credit: float | None = None  # the share of a multi-part answer that was right (see check_all)
        text = f"{FAIL_MARK} {name}: {problem}"
        if hint:
            text += f"\n  Hint: {hint}"
        super().__init__(text)

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        return CheckFailed.wrap(str(self))

    # JupyterLab's output column, at the layout `make lab` opens, shows about 107 characters of a
    # line and wraps longer ones wherever the edge falls, often mid-word ("exponential" / "s.")
    WIDTH = 96

    @staticmethod
    def wrap(text: str, width: int = WIDTH) -> list[str]:
        """`text`'s lines, each longer one broken between words into lines of at most `width`
        characters (a longer word stays whole), continued under its own text: under the name after
        a ✘ or ✔ mark, under the hint after "Hint: ". `str()` of a failure keeps one line per
        message, for the grader and `course check`; this is what a notebook shows."""
        import textwrap

        lines = []
        for line in text.splitlines():
            body = line.lstrip(" ")
            indent = line[: len(line) - len(body)]
            if body.startswith("Hint: "):
                indent += " " * len("Hint: ")
            elif body.startswith((FAIL_MARK, PASS_MARK)):
                indent += "  "
            lines += textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False) or [line]
        return lines


class NotAttempted(CheckFailed):
    """The exercise still holds its `raise NotImplementedError()`."""

    def __init__(self, name: str, near: str | None = None):
        hint = "replace `raise NotImplementedError()` in the answer cell with your code, run that cell, then this one."
        if near is not None:  # the cell ran, but under another name: the likeliest reason it looks unanswered
            hint = f"nothing called `{name}` is defined yet; `{near}` is: if you meant this name, check the spelling."
        super().__init__(name, "not attempted yet.", hint)


def passed(name: str, detail: str = "") -> None:
    """Print the one line a learner sees when a check passes."""
    line = f"{PASS_MARK} {name}: passed" + (f" ({detail})" if detail else "")
    print("\n".join(CheckFailed.wrap(line)))  # a long detail goes on, indented, on the next line


_MISSING = object()

_answer_source: Callable[[str], Any] | None = None  # see set_answer_source


def set_answer_source(source: Callable[[str], Any] | None) -> Callable[[str], Any] | None:
    """Where `answer(name)` reads the learner's values from; returns the source it replaces.

    This is the one contract between the checks and a grader. In a notebook (and in `course check`)
    the checks run next to the learner's code and `answer` reads the notebook's own names: the
    source is None. A grader that keeps the learner's code in another process (`course grade` runs
    it in a sandboxed kernel) sets a source for the time its test cells run, and puts the previous
    one back afterwards::

        previous = set_answer_source(fetch)
        try:
            ...  # run the test cells
        finally:
            set_answer_source(previous)

    `source(name)` returns the learner's value of `name` (a stand-in object is fine: the checks only
    call it and read it as plain data) or raises `NotAttempted(name, near)` when the learner never
    defined it; a value of `...` counts as not attempted too. Nothing else of the checks changes.
    """
    global _answer_source
    previous, _answer_source = _answer_source, source
    return previous


def answer(variable: str) -> Any:
    """The value of `variable` in the notebook, or `NotAttempted` if the answer cell never defined it."""
    if _answer_source is not None:
        value = _answer_source(variable)
        if value is Ellipsis:
            raise NotAttempted(variable)
        return value
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
        af, ef = a.astype(float), e.astype(float)
        with np.errstate(invalid="ignore"):
            diff = np.abs(af - ef)
        # -inf - -inf is NaN, yet the two agree; NaN against a number (or a NaN the other side lacks) is
        # as wrong as can be. So: entries that agree (equal, infinities of one sign, NaN on both sides)
        # differ by 0, every other NaN difference by inf, and the worst entry is one where they disagree.
        agree = (af == ef) | (np.isnan(af) & np.isnan(ef))
        diff = np.where(agree, 0.0, np.where(np.isnan(diff), np.inf, diff))
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
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


def function_name(name: str) -> str:
    """The function's own name from a check's label: "receptive_field (more cases)" -> "receptive_field",
    so that a failing call reads receptive_field(0, 3), not "receptive_field (more cases)(0, 3)"."""
    return name.split(" (")[0]


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


# --- answers worked out by hand stay sealed ---------------------------------------------------------
# A visible test cell must not show the answer a learner is asked to work out, and neither should the
# check module they might open next. Such answers (and the values of the mistakes a hint names) are
# stored as seals: a salted SHA-256 of the value rounded to the precision the prompt asks for. A
# reader cannot copy a seal into an answer; `check_sealed` rounds the learner's value the same way and
# compares seals. Make a seal with `seal(value, name=..., decimals=...)`, e.g. in a terminal:
#     python -c "from course_lib.checks import seal; print(seal(128 ** 0.25, name='ppl_by_hand', decimals=3))"

_SALT = "one-hot-to-transformer/v1"


def _rounded(x: float, decimals: int | None) -> str:
    if decimals is None:
        return repr(int(x)) if float(x).is_integer() else repr(float(x))
    text = f"{float(x):.{decimals}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text  # -0.000 -> 0.000


def _canonical(value: Any, decimals: int | None, nudge: float = 0.0) -> str | None:
    """One text for a value: numbers rounded (after adding `nudge` steps), shapes and ints exact,
    strings stripped; None when the value is none of these."""
    step = 10.0 ** -decimals if decimals is not None else 0.0
    if isinstance(value, str):
        return "str:" + value.strip()
    if isinstance(value, torch.Size):
        value = tuple(value)
    if isinstance(value, bool):
        return f"bool:{value}"
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
        if math.isnan(v) or math.isinf(v):
            return f"num:{v}"
        return "num:" + _rounded(v + nudge * step, decimals)
    try:
        a = _to_array(value)
    except (TypeError, ValueError):
        return None
    if a.dtype.kind not in "biuf":
        return None
    if a.ndim == 0:
        return _canonical(a.item(), decimals, nudge)
    items = ",".join(_rounded(float(x) + nudge * step, decimals) for x in a.astype(float).ravel())
    return f"arr{tuple(a.shape)}:{items}"


def seal(value: Any, *, name: str, decimals: int | None = 3) -> str:
    """The seal of an answer: what a check module stores instead of the answer itself.

    Numbers (and arrays, lists and tensors of them) are rounded to `decimals` places first;
    `decimals=None` keeps ints and shapes exact. `name` (the answer's variable) salts the hash, so one
    value gets different seals in different exercises.
    """
    text = _canonical(value, decimals)
    if text is None:
        raise TypeError(f"seal() takes numbers, arrays, tensors, shapes or strings, got {type(value).__name__}")
    return hashlib.sha256(f"{_SALT}|{name}|{text}".encode()).hexdigest()[:20]


def _matches(value: Any, sealed: str, name: str, decimals: int | None) -> bool:
    # A value a hair from a rounding boundary (3.3635 vs 3.3645) still matches: try it nudged both ways.
    nudges = (0.0, -0.4, 0.4) if decimals is not None else (0.0,)
    for nudge in nudges:
        text = _canonical(value, decimals, nudge)
        if text is not None and hashlib.sha256(f"{_SALT}|{name}|{text}".encode()).hexdigest()[:20] == sealed:
            return True
    return False


def check_sealed(name: str, value: Any, sealed: str, *, decimals: int | None = 3, mistakes: Mapping[str, str] | None = None,
                 hint: str | None = None, kind: str = "number", shape: Sequence[int] | None = None) -> None:
    """Check an answer worked out by hand against its seal, never printing the expected value.

    `mistakes` maps a description ("forgot the minus sign") to the seal of the value that mistake
    gives. `kind` says what a well-formed answer is: "number", "numbers" (a list/array), "count" (a
    whole number; compared exactly), "shape" (a tuple of ints; compared exactly) or "text". `shape`
    (with "numbers"): an array of another shape is called that, which gives nothing away.
    """
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable (or to `return` the result)?")
    if kind == "shape":
        if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 1:
            value = value.tolist()  # a shape written as an array of ints is still a shape
        if not isinstance(value, (tuple, list, torch.Size)) or not all(
                isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in value):
            raise CheckFailed(name, f"expected a tuple of ints such as (2, 3), got {_short(value)}.")
        value, decimals = tuple(int(d) for d in value), None
    elif kind == "text":
        if not isinstance(value, str):
            raise CheckFailed(name, f"expected a string, got {type(value).__name__} ({_short(value)}).")
    elif kind == "count":  # a whole number: 17 and 17.0 are the same answer, 17.5 is not a count
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise CheckFailed(name, f"expected a whole number (an int), got {type(value).__name__} ({_short(value)}).")
        if not float(value).is_integer():
            raise CheckFailed(name, f"expected a whole number, got {_fmt(float(value))}.",
                              "a count is a whole number: did a division leave a fraction?")
        value, decimals = int(value), None
    elif kind in ("number", "numbers"):
        if isinstance(value, (str, bool)) or _canonical(value, decimals) is None:
            raise CheckFailed(name, f"expected {'a number' if kind == 'number' else 'numbers'}, got "
                              f"{type(value).__name__} ({_short(value)}).")
        if kind == "number" and np.size(_to_array(value)) != 1:
            raise CheckFailed(name, f"expected a single number, got {_short(value)}.")
        if shape is not None:
            check_shape(name, _to_array(value), shape)
    else:
        raise ValueError(f"kind must be 'number', 'numbers', 'count', 'shape' or 'text', got {kind!r}")
    if _matches(value, sealed, name, decimals):
        passed(name)
        return
    for description, wrong in (mistakes or {}).items():
        if _matches(value, wrong, name, decimals):
            raise CheckFailed(name, f"{_short(value)} is not right.", f"it looks like you {description}.")
    precision = f" (compared to {decimals} decimal places)" if decimals is not None and kind in ("number", "numbers") else ""
    raise CheckFailed(name, f"{_short(value)} is not right{precision}.", hint)


def check_all(*parts: Callable[[], None]) -> None:
    """Run the check of every part of a multi-part answer, then report all the wrong parts at once.

    Each part is a function without arguments that runs one check (`lambda: check_sealed(...)`). The
    parts that pass print their line; if any fail, one `CheckFailed` lists every failure, so a
    learner does not fix part 1 only to hear about part 3 afterwards. An unattempted part stops at once.

    The failure carries `credit`, the share of parts that were right: `course grade` and `course check`
    give a multi-part exercise its points part by part (3 of 4 parts right earns 3/4 of the points).
    """
    failures: list[CheckFailed] = []
    for part in parts:
        try:
            part()
        except NotAttempted:
            raise
        except CheckFailed as err:
            failures.append(err)
    if not failures:
        return
    credit = (len(parts) - len(failures)) / len(parts)
    if len(failures) == 1:
        failures[0].credit = credit
        raise failures[0]
    combined = CheckFailed(", ".join(f.name for f in failures), f"{len(failures)} of {len(parts)} parts are not right.")
    combined.args = ("\n".join(str(f) for f in failures),)  # each failure with its own hint
    combined.parts = failures
    combined.credit = credit
    raise combined


def check_sealed_shapes(answers: Mapping[str, Any], seals: Mapping[str, str],
                        mistakes: Mapping[str, Mapping[str, str]] | None = None, hint: str | None = None) -> None:
    """Several shapes predicted by hand (`answers`: name -> shape), each against its seal, every wrong
    one reported at once; `mistakes` maps a name to that answer's known wrong shapes (description -> seal)."""
    check_all(*(lambda name=name, sealed=sealed: check_sealed(
        name, answers.get(name), sealed, kind="shape", mistakes=(mistakes or {}).get(name), hint=hint)
        for name, sealed in seals.items()))
