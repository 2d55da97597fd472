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

The API (`__all__`), one function for each job:

    answer(variable)                            the learner's value, or NotAttempted
    call(name, fn, *args)                       call the learner's function; a crash becomes a message
    call_repeated(name, fn, n, *args)           n calls in a row (one round trip under the grader)
    passed(name, detail)                        print the line of a check that passed
    check_all(*parts)                           a multi-part answer: every wrong part reported, credit per part
    check_close(name, value, expected)          numbers, arrays or tensors, to a tolerance
    check_count(name, value, expected)          a whole number (17 and 17.0 alike; 17.5 is not a count)
    check_shape(name, value, expected)          a shape: an array's, or one written out by hand
    check_equal(name, value, expected)          anything else, compared exactly (text, lists, token ids)
    check_true(name, condition, problem)        a property (rows sum to 1, the gradient flows)
    check_type(name, value, type)               the type of a result
    check_tensor(name, value)                   a torch.Tensor, with the hint that keeps a learner in torch
    check_function(name, fn, cases, reference)  a learner's function against a reference, case by case
    Seals(table).check(name, value, kind)       an answer worked out by hand, against its seal
    seal(value, name=..., decimals=...)         what a checks module stores instead of such an answer
    CheckFailed, NotAttempted                   the two failures
    set_answer_source(source)                   where `answer` reads from: the grader's one hook

Every comparing check takes `mistakes` (a description that finishes "it looks like you ...", mapped to
what that mistake gives) and a `hint` for any other wrong answer. `check_count` and `check_shape`
also take seals as `expected` and as the mistakes' values, so that a count or a shape worked out by
hand is compared without being written down.

The lesson modules, and the functions here, also share a few small helpers, in `helpers.py`: how a
value is shown in a message (`short`, `fmt`, `function_name`) and how arrays are compared (`to_array`,
`close`).

Seals. A visible test cell must not show an answer that the learner works out by hand, and neither
should the checks module a learner might open next. So each checks module keeps one table, `SEALS =
Seals({...})`, holding for every such answer (and for the value of each mistake its hints name) a
seal: a salted SHA-256 of the value rounded to the precision the exercise asks for. The table is
written by the grader's `course seal lessonNN` from a values file, which holds the plain values. The
course keeps its values files in `solutions/seals/lessonNN.py`, beside the solution notebooks:
teacher-side files, like the solutions themselves never part of the course_lib a learner installs
nor of a class's release (`course build --class`).

A seal deters peeking; it is not a secret. A count or a shape has few plausible values, and a loop
over them with `seal(guess, name=..., decimals=None)` finds the one that matches in moments (a number
rounded to 3 places takes little longer). Seals keep an answer out of sight of a learner who reads
the notebook or this package; they do not keep it from one who sets out to find it. Graded work rests
on the hidden tests, which never enter the learner's process (`course grade`).
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
import sys
from collections import Counter, OrderedDict, defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

from .helpers import close, fmt, short, to_array

__all__ = [
    "CheckFailed",
    "NotAttempted",
    "Seals",
    "answer",
    "call",
    "call_repeated",
    "check_all",
    "check_close",
    "check_count",
    "check_equal",
    "check_function",
    "check_shape",
    "check_tensor",
    "check_true",
    "check_type",
    "passed",
    "seal",
    "set_answer_source",
]

PASS_MARK = "✔"
FAIL_MARK = "✘"
NONE_PROBLEM = "got None: did you forget to `return` the result (or to assign the variable)?"


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
            lines += textwrap.wrap(
                line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
            ) or [line]
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


# --- the learner's values ----------------------------------------------------------------------------

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
        shown = ", ".join([short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()])
        raise CheckFailed(name, f"raised {type(err).__name__}: {err} when called as {name}({shown}).") from None


def call_repeated(name: str, fn: Callable, n: int, *args: Any, **kwargs: Any) -> list:
    """`call(name, fn, *args, **kwargs)` n times in a row, with the same argument objects each time (a random
    generator passed in moves on from call to call): the n results. A check that samples a learner's
    function thousands of times uses this: under `course grade` the learner's code runs in another
    process, and all n calls cross to it at once instead of one by one (a stand-in for the learner's
    function that can do so has a `__course_call_repeated__` method)."""
    if not callable(fn):
        raise CheckFailed(name, f"expected a function, got {type(fn).__name__}.")
    batched = getattr(type(fn), "__course_call_repeated__", None)
    try:
        return list(batched(fn, n, *args, **kwargs)) if batched is not None else [fn(*args, **kwargs) for _ in range(n)]
    except NotImplementedError:
        raise NotAttempted(name) from None
    except CheckFailed:
        raise
    except Exception as err:  # the learner's code crashed: say where, not a traceback
        shown = ", ".join([short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()])
        raise CheckFailed(name, f"raised {type(err).__name__}: {err} when called as {name}({shown}).") from None


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


def _verdict(
    name: str,
    matches: Callable[[Any], bool],
    expected: Any,
    mistakes: Mapping[str, Any] | None,
    problem: str,
    hint: str | None,
    *,
    quiet: bool,
    detail: str = "",
    unexplained: str | None = None,
) -> None:
    """Pass if `matches(expected)`. Else fail with `problem` and, as the hint, the first mistake whose
    value matches; or, when none does, with `unexplained` (default: `problem`) and `hint`. The one
    verdict of the checks that compare an answer with a value or a seal."""
    if matches(expected):
        if not quiet:
            passed(name, detail)
        return
    for description, wrong in (mistakes or {}).items():
        if matches(wrong):
            raise CheckFailed(name, problem, f"it looks like you {description}.")
    raise CheckFailed(name, problem if unexplained is None else unexplained, hint)


# --- the checks --------------------------------------------------------------------------------------


def check_type(name: str, value: Any, expected: type | tuple[type, ...]) -> None:
    """Fail unless `value` is an instance of `expected`."""
    if not isinstance(value, expected):
        wanted = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        raise CheckFailed(name, f"expected a {wanted}, got {type(value).__name__} ({short(value)}).")


def check_tensor(name: str, value: Any, where: str = "", hint: str | None = None) -> None:
    """Fail unless `value` is a torch.Tensor: the usual slip is a numpy array from .numpy() or np.*."""
    if not isinstance(value, torch.Tensor):
        where = f" {where}" if where else ""
        raise CheckFailed(
            name,
            f"expected a torch.Tensor, got {type(value).__name__}{where}.",
            hint
            or "stay in torch from start to end (no .numpy(), no numpy functions): the result feeds "
            "the next torch layer, and gradients only flow through torch operations; "
            "convert a numpy result back with torch.as_tensor(...)",
        )


def check_true(name: str, condition: bool, problem: str, hint: str | None = None) -> None:
    """Fail with `problem` unless `condition` holds (for properties such as 'rows sum to 1')."""
    if not condition:
        raise CheckFailed(name, problem, hint)


def _written_shape(name: str, value: Any) -> tuple[int, ...]:
    """A shape written out by hand (a tuple, list or torch.Size of ints) as a tuple."""
    if value is None:
        raise CheckFailed(name, NONE_PROBLEM)
    if not isinstance(value, (tuple, list, torch.Size)) or not all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in value
    ):
        raise CheckFailed(name, f"expected a tuple of ints such as (2, 3), got {short(value)}.")
    return tuple(int(d) for d in value)


def check_shape(
    name: str,
    value: Any,
    expected: Sequence[int] | str,
    mistakes: Mapping[str, Any] | None = None,
    *,
    hint: str | None = None,
    quiet: bool = False,
) -> None:
    """A shape: that of an array or tensor, or one written out by hand (a tuple, list or torch.Size of ints).

    An array's wrong shape is shown next to the expected one. A shape written by hand is a prediction:
    a wrong one is called wrong without showing the right one, with a hint at a wrong number of axes
    or at sizes in the wrong order. `expected`, and the values of `mistakes` (description -> shape),
    may be seals (`seal(shape, name=name, decimals=None)`).
    """
    sealed = isinstance(expected, str)
    written = sealed or not isinstance(value, (np.ndarray, torch.Tensor))
    got = _written_shape(name, value) if written else tuple(value.shape)
    if sealed:
        problem = f"{got} is not right."
    else:
        expected = tuple(expected)
        problem = f"{got} is not right." if written else f"expected shape {expected}, got {got}."
        if got != expected and sorted(got) == sorted(expected):
            hint = "the right sizes in the wrong order: is something transposed, or an axis swapped?"
        elif written and len(got) != len(expected):
            hint = f"the result has {len(expected)} axes here, your answer has {len(got)}. " + (hint or "")

    def matches(shape: Sequence[int] | str) -> bool:
        return _matches(got, shape, name, None) if sealed else got == tuple(shape)

    _verdict(name, matches, expected, mistakes, problem, hint, quiet=quiet)


def _whole_number(name: str, value: Any) -> int:
    """A count given as an int or a whole float, as an int; a clear failure for anything else."""
    if value is None:
        raise CheckFailed(name, NONE_PROBLEM)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CheckFailed(name, f"expected a whole number (an int), got {type(value).__name__} ({short(value)}).")
    if not float(value).is_integer():
        raise CheckFailed(
            name,
            f"expected a whole number, got {fmt(float(value))}.",
            "a count is a whole number: did a division leave a fraction?",
        )
    return int(value)


def check_count(
    name: str,
    value: Any,
    expected: int | str,
    mistakes: Mapping[str, Any] | None = None,
    *,
    hint: str | None = None,
    quiet: bool = False,
    detail: str = "",
) -> None:
    """A whole-number answer (steps, layers, patches, parameters): 17 and 17.0 are the same answer,
    17.5 or "17" is not a count. A wrong count is called wrong without showing the right one, and named
    when it equals what a known mistake gives (`mistakes`: description -> count). `expected`, and the
    mistakes' counts, may be seals (`seal(count, name=name, decimals=None)`)."""
    got = _whole_number(name, value)

    def matches(count: int | str) -> bool:
        return _matches(got, count, name, None) if isinstance(count, str) else got == count

    _verdict(name, matches, expected, mistakes, f"{got} is not right.", hint, quiet=quiet, detail=detail)


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
        raise CheckFailed(name, NONE_PROBLEM)
    e = to_array(expected)
    numbers = "a number" if e.size == 1 else "numbers"
    try:
        a = to_array(actual)
    except (ValueError, TypeError):  # e.g. a ragged list of lists
        raise CheckFailed(
            name, f"expected {numbers}, got {short(actual)}, which is not a regular array of numbers."
        ) from None
    if a.dtype.kind not in "biuf":
        raise CheckFailed(name, f"expected {numbers}, got {type(actual).__name__} ({short(actual)}).")
    if a.shape != e.shape:
        if a.size == e.size == 1:
            a = a.reshape(e.shape)
        else:
            check_shape(name, a, e.shape, quiet=True)
    if close(a, e, atol, rtol):
        if not quiet:
            passed(name)
        return
    for description, wrong in (mistakes or {}).items():
        if close(a, to_array(wrong), atol, rtol):
            raise CheckFailed(name, "the values are not right.", f"it looks like you {description}.")
    if a.ndim == 2 and a.shape == e.T.shape and close(a, e.T, atol, rtol):
        raise CheckFailed(name, "the values are not right.", "your result is the transpose of the expected one.")
    if e.size == 1:
        problem = f"expected {fmt(e.item())}, got {fmt(a.item())}." if reveal else f"{fmt(a.item())} is not right."
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
            f"values differ from the expected ones (largest difference {fmt(float(np.nanmax(diff)))} at index "
            f"{tuple(int(i) for i in worst)}: expected {fmt(float(e[worst]))}, got {fmt(float(a[worst]))})."
        )
        if np.isnan(a.astype(float)).any():
            problem += " Your result contains NaN."
    raise CheckFailed(name, problem, hint)


def check_equal(name: str, actual: Any, expected: Any, *, hint: str | None = None, quiet: bool = False) -> None:
    """Exact comparison of anything that is not a count, a shape or a measured number: text, lists,
    dicts, token ids (arrays and tensors element-wise)."""
    if isinstance(expected, (np.ndarray, torch.Tensor)) or isinstance(actual, (np.ndarray, torch.Tensor)):
        a, e = to_array(actual), to_array(expected)
        check_shape(name, a, e.shape, quiet=True)
        ok = bool(np.array_equal(a, e))
    elif _custom_equality(actual):
        # An object whose own __eq__ decides the comparison could claim to equal anything.
        raise CheckFailed(
            name,
            f"expected {short(expected, 120)}, got an object of type {type(actual).__name__} "
            "that defines its own comparison.",
            hint,
        )
    else:
        ok = actual == expected
    if not ok:
        raise CheckFailed(name, f"expected {short(expected, 120)}, got {short(actual, 120)}.", hint)
    if not quiet:
        passed(name)


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
        pair = len(case) == 2 and isinstance(case[0], tuple) and isinstance(case[1], dict)
        args, kwargs = case if pair else (case, {})
        got = call(name, fn, *args, **kwargs)
        want = reference(*args, **kwargs)
        wrong = {d: m(*args, **kwargs) for d, m in (mistakes or {}).items()}
        shown = ", ".join(short(a, 30) for a in args)
        check_close(f"{name}({shown})", got, want, atol=atol, rtol=rtol, mistakes=wrong, hint=hint, quiet=True)
        n += 1
    passed(name, f"{n} case{'s' if n != 1 else ''}")


def check_all(*parts: Callable[[], None]) -> None:
    """Run the check of every part of a multi-part answer, then report all the wrong parts at once.

    Each part is a function without arguments that runs one check (`lambda: SEALS.check(...)`). The
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


# --- answers worked out by hand stay sealed (see the module's docstring) --------------------------------

_SALT = "one-hot-to-transformer/v1"
_SEAL = re.compile(r"[0-9a-f]{20}")


def _rounded(x: float, decimals: int | None) -> str:
    if decimals is None:
        return repr(int(x)) if float(x).is_integer() else repr(float(x))
    text = f"{float(x):.{decimals}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text  # -0.000 -> 0.000


def _canonical(value: Any, decimals: int | None, nudge: float = 0.0) -> str | None:
    """One text for a value: numbers rounded (after adding `nudge` steps), shapes and ints exact,
    strings stripped; None when the value is none of these."""
    step = 10.0**-decimals if decimals is not None else 0.0
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
        a = to_array(value)
    except (TypeError, ValueError):
        return None
    if a.dtype.kind not in "biuf":
        return None
    if a.ndim == 0:
        return _canonical(a.item(), decimals, nudge)
    items = ",".join(_rounded(float(x) + nudge * step, decimals) for x in a.astype(float).ravel())
    return f"arr{tuple(a.shape)}:{items}"


def _hash(name: str, text: str) -> str:
    return hashlib.sha256(f"{_SALT}|{name}|{text}".encode()).hexdigest()[:20]


def seal(value: Any, *, name: str, decimals: int | None = 3) -> str:
    """The seal of an answer: what a check module stores instead of the answer itself.

    Numbers (and arrays, lists and tensors of them) are rounded to `decimals` places first;
    `decimals=None` keeps ints and shapes exact. `name` (the answer's variable) salts the hash, so one
    value gets different seals in different exercises.
    """
    text = _canonical(value, decimals)
    if text is None:
        raise TypeError(f"seal() takes numbers, arrays, tensors, shapes or strings, got {type(value).__name__}")
    return _hash(name, text)


def _matches(value: Any, sealed: str, name: str, decimals: int | None) -> bool:
    # A value a hair from a rounding boundary (3.3635 vs 3.3645) still matches: try it nudged both ways.
    nudges = (0.0, -0.4, 0.4) if decimals is not None else (0.0,)
    for nudge in nudges:
        text = _canonical(value, decimals, nudge)
        if text is not None and _hash(name, text) == sealed:
            return True
    return False


_KINDS = ("number", "numbers", "count", "shape", "text")


class Seals:
    """The answers a checks module's exercises work out by hand, each stored as its seal::

        SEALS = Seals({
            "cos_ab": (6, "642209b41775f26e068c", {  # name -> (decimals, seal of the answer,
                "forgot to divide by the lengths": "1a4f3a0792d06e61a48d",  # {mistake: seal of its value})
            }),
        })
        SEALS.check("cos_ab", cos_ab, "number", hint="cos(a, b) = (a · b) / (|a| |b|)")

    `decimals` is the precision an answer is compared at (None: exactly, for counts, shapes and text);
    a mistake's description finishes the sentence "it looks like you ...". The table is written by
    `course seal` from the plain values (see the module's docstring), never by hand.
    """

    def __init__(self, table: Mapping[str, tuple[int | None, str, Mapping[str, str]]]):
        self.table = {}
        for name, (decimals, sealed, mistakes) in table.items():
            bad = [s for s in (sealed, *mistakes.values()) if not (isinstance(s, str) and _SEAL.fullmatch(s))]
            if bad or not (decimals is None or isinstance(decimals, int)):
                raise ValueError(
                    f"Seals: {name!r} needs (decimals, seal, {{mistake: seal}}) with seals from "
                    f"seal(); got {bad or decimals!r}"
                )
            self.table[name] = (decimals, sealed, dict(mistakes))

    def check(
        self,
        name: str,
        value: Any,
        kind: str = "number",
        hint: str | None = None,
        *,
        shape: Sequence[int] | None = None,
        shape_hint: str | None = None,
        shown: str | None = None,
    ) -> None:
        """Check the answer `name` against its seal, never printing the expected value.

        `kind` says what a well-formed answer is: "number", "numbers" (a list, array or tensor of
        them), "count" (a whole number, see `check_count`), "shape" (see `check_shape`) or "text".
        `hint` is for a wrong answer that no listed mistake explains. For "numbers", `shape` is the
        expected shape (a wrong one is named, with `shape_hint`: that gives nothing away). `shown` is
        how a wrong answer is quoted (default: `short(value)`): the learner's own list, say, where
        `value` is the canonical text that was sealed (its words sorted and joined).
        """
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, _KINDS))}, got {kind!r}")
        decimals, sealed, mistakes = self.table[name]
        if kind == "count":
            return check_count(name, value, sealed, mistakes, hint=hint)
        if kind == "shape":
            if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 1:
                value = value.tolist()  # a shape written as an array of ints is still a shape
            return check_shape(name, value, sealed, mistakes, hint=hint)
        if value is None:
            raise CheckFailed(name, NONE_PROBLEM)
        if kind == "text":
            if not isinstance(value, str):
                raise CheckFailed(name, f"expected a string, got {type(value).__name__} ({short(value)}).")
        else:  # "number" or "numbers"
            if isinstance(value, (str, bool)) or _canonical(value, decimals) is None:
                raise CheckFailed(
                    name,
                    f"expected {'a number' if kind == 'number' else 'numbers'}, got "
                    f"{type(value).__name__} ({short(value)}).",
                )
            if kind == "number" and np.size(to_array(value)) != 1:
                raise CheckFailed(name, f"expected a single number, got {short(value)}.")
            if shape is not None:
                check_shape(name, to_array(value), shape, hint=shape_hint, quiet=True)
        shown = short(value) if shown is None else shown
        precision = f" (compared to {decimals} decimal places)" if decimals is not None and kind != "text" else ""
        _verdict(
            name,
            lambda s: _matches(value, s, name, decimals),
            sealed,
            mistakes,
            f"{shown} is not right.",
            hint,
            quiet=False,
            unexplained=f"{shown} is not right{precision}.",
        )
