"""The checks exercises call: friendly passes, failures that name the likely mistake, no tracebacks."""

from __future__ import annotations

import re

import nbformat
import numpy as np
import pytest
import torch
from grading_helpers import fails_with
from nbclient import NotebookClient

from course_lib import checks
from course_lib.checks import lesson00
from course_lib.device import seed_everything

# --- general machinery ------------------------------------------------------------------------------


def test_not_attempted_for_missing_variable_and_not_implemented():
    fails_with(checks.answer, "surely_not_defined_anywhere", match="not attempted yet")

    def blank():
        raise NotImplementedError()

    text = fails_with(checks.call, "f", blank, match="not attempted yet")
    assert isinstance(pytest.raises(checks.NotAttempted, checks.call, "f", blank).value, checks.CheckFailed)
    assert "Traceback" not in text


def test_check_equal_rejects_objects_that_claim_to_equal_anything():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    fails_with(checks.check_equal, "x", AlwaysEqual(), 3, match="defines its own comparison")
    fails_with(checks.check_equal, "x", [1, AlwaysEqual()], [1, 2], match="defines its own comparison")
    fails_with(checks.check_equal, "x", {"a": AlwaysEqual()}, {"a": 1}, match="defines its own comparison")
    checks.check_equal("x", [1, (2, "a")], [1, (2, "a")], quiet=True)
    from collections import Counter

    checks.check_equal("c", Counter("abca"), Counter("aabc"), quiet=True)


@pytest.mark.slow
def test_failed_check_renders_without_a_traceback_in_a_live_kernel():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from course_lib import checks\n"
            "checks.check_close('weights', [0.5, 0.5], [0.8, 0.2], mistakes={'swapped them': [0.2, 0.8]})"
        ),
        nbformat.v4.new_code_cell("checks.answer('never_defined')"),
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute()
    for cell, expected in zip(nb.cells, ["✘ weights: values differ", "✘ never_defined: not attempted yet."]):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert len(errors) == 1, cell.outputs
        shown = "\n".join(errors[0].traceback)
        assert shown.startswith(expected), shown
        assert "Traceback" not in shown and "File " not in shown and "----" not in shown, shown


def test_long_feedback_wraps_between_words_in_the_notebook(capsys):
    """JupyterLab's output column shows about 107 characters of a line and wraps the rest mid-word:
    a notebook shows a failure (and a pass) on lines of at most 96, continued under its own text."""
    hint = (
        "it looks like you divided the scores themselves instead of their exponentials; softmax "
        "exponentiates every score, then divides by the sum of all the exponentials, dog included."
    )
    err = checks.CheckFailed("p_sat", "0.6 is not right.", hint)
    shown = err._render_traceback_()
    assert shown[0] == "✘ p_sat: 0.6 is not right." and len(shown) == 4, shown
    assert all(len(line) <= 96 for line in shown), [len(line) for line in shown]
    assert shown[1].startswith("  Hint: it looks") and shown[2].startswith(" " * 8) and shown[2][8] != " ", shown
    words = lambda lines: " ".join(line.strip() for line in lines).split()  # noqa: E731
    assert words(shown) == words([str(err)]), "wrapping breaks lines between words, it loses and splits none"
    assert str(err).splitlines()[1] == f"  Hint: {hint}", "str() keeps one line per message for the grader"

    long_word = "x" * 120  # a word longer than the line stays whole rather than being cut
    assert long_word in [line.strip() for line in checks.CheckFailed("n", long_word)._render_traceback_()]

    checks.passed(
        "attention",
        "against torch.nn.functional.scaled_dot_product_attention, with and without "
        "a causal mask, batched over 3 heads",
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✔ attention: passed (against") and len(out) == 2 and out[1].startswith("  a"), out
    assert all(len(line) <= 96 for line in out), out


def test_check_all_reports_every_failed_part_in_one_check_failed(capsys):
    right = checks.seal(17, name="a", decimals=None)
    checks.check_all(lambda: checks.check_count("a", 17, right), lambda: checks.passed("b"))
    assert capsys.readouterr().out.splitlines() == ["✔ a: passed", "✔ b: passed"]
    with pytest.raises(checks.CheckFailed) as info:
        checks.check_all(
            lambda: checks.check_count("a", 16, right, hint="count again"),
            lambda: checks.passed("b"),
            lambda: checks.check_count("c", "x", right),
        )
    assert type(info.value) is checks.CheckFailed, "the grader counts a CheckFailed as a failed test"
    text = str(info.value)
    assert text.splitlines()[0] == "✘ a: 16 is not right." and "Hint: count again" in text, text
    assert "✘ c: expected a whole number (an int), got str" in text and "✔" not in text, text
    assert info.value._render_traceback_() == text.splitlines()
    with pytest.raises(checks.NotAttempted):  # an unattempted part is not a wrong one
        checks.check_all(lambda: checks.check_count("a", 16, right), lambda: checks.answer("never_defined_here"))


@pytest.mark.parametrize(
    "value, match",
    [
        (17, None),
        (17.0, None),
        (np.int64(17), None),
        (np.float32(17), None),
        (17.5, "did a division leave a fraction"),
        ("17", "expected a whole number (an int), got str"),
        (True, "expected a whole number"),
        (None, "got None"),
        (18, "looks like you added one"),
    ],
)
def test_sealed_counts(value, match):
    right, wrong = checks.seal(17, name="n", decimals=None), checks.seal(18, name="n", decimals=None)
    if match is None:
        checks.check_count("n", value, right, mistakes={"added one": wrong})
    else:
        text = fails_with(checks.check_count, "n", value, right, mistakes={"added one": wrong}, match=match)
        assert "17 " not in text.replace("17.5", "").replace("'17'", ""), text


# --- lesson 00 ---------------------------------------------------------------------------------------


def good_sample(seed):
    seed_everything(seed)
    return torch.randn(5)


def test_reproducible_sample_passes_and_names_mistakes(capsys):
    lesson00.check_reproducible_sample(good_sample)
    assert "✔ reproducible_sample: passed" in capsys.readouterr().out

    def seeded_outside(seed):
        return torch.randn(5)

    fails_with(lesson00.check_reproducible_sample, seeded_outside, match="INSIDE the function")

    def uniform(seed):
        seed_everything(seed)
        return torch.rand(5)

    fails_with(lesson00.check_reproducible_sample, uniform, match="torch.rand (uniform")

    def ignores_seed(seed):
        return good_sample(0)

    fails_with(lesson00.check_reproducible_sample, ignores_seed, match="ignored the `seed` argument")
    fails_with(lesson00.check_reproducible_sample, lambda s: good_sample(s).numpy(), match="expected a Tensor")
    fails_with(lesson00.check_reproducible_sample, lambda s: good_sample(s)[:3], match="expected shape (5,)")


@pytest.mark.parametrize(
    "value, match",
    [
        (17, None),
        (17.0, None),
        (np.int64(17), None),
        (18, "both included"),
        (1, "self-attention's answer"),
        (16, "strictly between"),
        (17.5, "whole number"),
        ("17", "expected a whole number"),
        (True, "expected a whole number"),
        (40, "is not right"),
        (None, "got None"),
    ],
)
def test_rnn_steps(value, match):
    if match is None:
        lesson00.check_rnn_steps(value, 19, 99)
    else:
        text = fails_with(lesson00.check_rnn_steps, value, 19, 99, match=match)
        assert "17" not in text.replace(repr(value), ""), text  # the answer is never shown


def test_rnn_steps_reports_every_wrong_part_and_never_the_answers():
    text = fails_with(lesson00.check_rnn_steps, 18, 1, 98, match="rnn_steps_keys_are: 18 is not right")
    assert "rnn_steps_1_20: 1 is not right" in text and "self-attention's answer" in text, text
    assert "rnn_steps_1_100: 98 is not right" in text and "strictly between" in text, text
    assert "19" not in text.replace("word 19", "") and "99" not in text, text


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda L, k: 1 + L * (k - 1), None),
        (lambda L, k: L * (k - 1), "forgot the +1 for the centre position"),
        (lambda L, k: L * k, "multiplied the layers by the kernel size"),
        (lambda L, k: k**L, "exponentially"),
        (lambda L, k: 1 + L * k, "added k new positions per layer"),
        (lambda L, k: (1 + L * (k - 1)) / 1, None),  # a float that is a whole number is fine
        (lambda L, k: None, "forget to `return`"),
    ],
)
def test_receptive_field(fn, match):
    if match is None:
        lesson00.check_receptive_field(fn)
    else:
        fails_with(lesson00.check_receptive_field, fn, match=match)


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda d, k: -(-d // (k - 1)), None),
        (lambda d, k: d // (k - 1), "rounded down"),
        (lambda d, k: -(-d // k), "divided by the kernel size"),
        (lambda d, k: d / (k - 1), "whole number"),
    ],
)
def test_layers_needed(fn, match):
    if match is None:
        lesson00.check_layers_needed(fn, cases=[(2, 3), (10, 3), (9, 5), (17, 3), (1, 3)])
    else:
        fails_with(lesson00.check_layers_needed, fn, match=match)


@pytest.mark.parametrize(
    "n_patches, seq_len, match",
    [
        (196, 197, None),
        (196.0, 197.0, None),
        (14, 197, "one side only"),
        (3136, 197, "patch area"),
        (28, 197, "added the patches of the two sides"),
        (196, 196, "forgot the class token"),
        (197, 197, "asks for the patches alone"),
        (196, 198, "class token twice"),
        (196, 15, "one side only"),
        (195, 197, "is not right"),
    ],
)
def test_patches(n_patches, seq_len, match):
    if match is None:
        lesson00.check_patches(n_patches, seq_len)
    else:
        fails_with(lesson00.check_patches, n_patches, seq_len, match=match)


def test_patches_reports_both_wrong_parts():
    text = fails_with(lesson00.check_patches, 14, 196, match="n_patches: 14 is not right")
    assert "seq_len: 196 is not right" in text and "forgot the class token" in text, text


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda h, w, p: (h // p) * (w // p), None),
        (lambda h, w, p: (h * w) // p, "kept the bug"),
        (lambda h, w, p: (h // p) ** 2, "square image"),
        (lambda h, w, p: -(-h // p) * -(-w // p), "partial patches"),
        (lambda h, w, p: (h * w) // (p * p), "divided the pixel count by the patch area"),
    ],
)
def test_patch_count(fn, match):
    cases = [(224, 224, 16), (224, 320, 16), (230, 230, 16)]
    if match is None:
        lesson00.check_patch_count(fn, cases=cases)
    else:
        fails_with(lesson00.check_patch_count, fn, cases=cases, match=match)


@pytest.mark.parametrize(
    "value, match", [(1, None), (1.0, None), (19, "RNN's count"), (20, "counted the words"), (0, "answered 0")]
)
def test_attention_steps(value, match):
    if match is None:
        lesson00.check_attention_steps(value, 1)
    else:
        fails_with(lesson00.check_attention_steps, value, 1, match=match)
    text = fails_with(lesson00.check_attention_steps, 19, 100, match="RNN's count")
    assert "counted the words" in text, "both wrong parts are reported"


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda h, w, p: (h // p) * (w // p), None),
        (lambda h, w, p: round(h / p) * round(w / p), "round() or math.ceil"),  # 250 / 16 rounds to 16, not 15
        (lambda h, w, p: (h // p) ** 2, "used the height twice"),  # 224 x 320 is among the default cases
        (
            lambda h, w, p: 0 if h == 30 else (h // p) * (w // p),
            None,
        ),  # the default (visible) cases leave 30 x 45 to the hidden ones
        (lambda h, w, p: (h * w) // (p * p), "patch area"),  # 250 x 250 is among the default cases
    ],
)
def test_patch_count_default_cases_catch_rounding_and_square_images(fn, match):
    if match is None:
        lesson00.check_patch_count(fn)
    else:
        fails_with(lesson00.check_patch_count, fn, match=match)


def test_counts_accept_whole_floats_and_labels_stay_out_of_the_call():
    lesson00.check_patches(196.0, 197)
    text = fails_with(
        lesson00.check_receptive_field,
        lambda L, k: 1 / 0,
        cases=[(0, 3)],
        name="receptive_field (more cases)",
        match="when called as receptive_field(0, 3)",
    )
    assert "cases)(" not in text, text


def test_a_misspelled_answer_is_pointed_out():
    transition_matrx = object()  # noqa: F841 - the learner's cell ran, under another name
    with pytest.raises(checks.NotAttempted) as info:
        checks.answer("transition_matrix")
    assert "`transition_matrx` is: if you meant this name, check the spelling" in str(info.value), str(info.value)
    with pytest.raises(checks.NotAttempted) as info:
        checks.answer("nothing_like_it")
    assert "replace `raise NotImplementedError()`" in str(info.value)


def test_check_close_names_an_entry_where_the_two_disagree_never_two_equal_infinities():
    inf = float("inf")
    # Every entry either agrees as -inf (whose difference is NaN) or disagrees by an infinite amount.
    expected = torch.tensor([[-inf, 0.5, -inf], [1.0, -inf, -inf]])
    got = torch.tensor([[-inf, -inf, -inf], [-inf, -inf, 2.0]])
    text = fails_with(checks.check_close, "x", got, expected, match="largest difference inf at index (0, 1)")
    assert "expected 0.5, got -inf" in text and "expected -inf, got -inf" not in text, text
    # A NaN where a number was expected is named too; NaN on both sides agrees.
    nan = float("nan")
    text = fails_with(checks.check_close, "y", [nan, 1.0, 3.0], [nan, nan, 3.5], match="at index (1,)")
    assert "expected nan, got 1" in text and "Your result contains NaN" in text, text
    # The largest finite difference is still found when there are no infinities.
    fails_with(checks.check_close, "z", [1.0, 2.0, 3.0], [1.0, 2.5, 3.1], match="largest difference 0.5 at index (1,)")


# --- the core API: one way for each job ---------------------------------------------------------------


def test_the_api_is_short_documented_and_the_near_twins_are_gone():
    from course_lib.checks import core

    assert checks.__all__ == core.__all__ and len(core.__all__) <= 18, core.__all__
    undocumented = [name for name in core.__all__ if not re.search(rf"\b{name}\b", core.__doc__)]
    assert not undocumented, f"core's docstring lists the API; it leaves out {undocumented}"
    for gone in ("check_choice", "check_sealed", "check_sealed_shapes", "check_shape_answer", "_short", "_close"):
        assert not hasattr(core, gone), f"{gone} is replaced (see core's docstring)"


def test_every_lesson_module_keeps_its_sealed_answers_in_one_table_and_imports_only_public_names():
    import ast
    from pathlib import Path

    from course_lib.checks import core

    for path in sorted(Path(core.__file__).parent.glob("lesson*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [
            a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "core"
            for a in node.names
        ]
        assert imported and not [n for n in imported if n.startswith("_")], (path.name, imported)
        tables = [
            node for node in tree.body if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SEALS"
        ]
        assert len(tables) == 1, f"{path.name}: one SEALS = Seals({{...}}) table, written by `course seal`"
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert "_sealed" not in defined, f"{path.name}: SEALS.check replaces the module's own _sealed"


def test_check_shape_shows_an_arrays_shape_and_hides_a_predicted_one():
    fails_with(
        checks.check_shape,
        "out",
        np.zeros((3, 2)),
        (2, 3),
        match="expected shape (2, 3), got (3, 2).\n  Hint: the right sizes in the wrong order",
    )
    text = fails_with(checks.check_shape, "shape", [3, 2], (2, 3), match="shape: (3, 2) is not right.")
    assert "(2, 3)" not in text, text
    sealed, wrong = (checks.seal(s, name="shape", decimals=None) for s in ((2, 3), (3, 2)))
    checks.check_shape("shape", torch.Size([2, 3]), sealed, quiet=True)
    fails_with(checks.check_shape, "shape", (3, 2), sealed, {"swapped the axes": wrong}, match="swapped the axes")
    fails_with(checks.check_shape, "shape", np.zeros((2, 3)), sealed, match="expected a tuple of ints")
    table = checks.Seals({"shape": (None, sealed, {"swapped the axes": wrong})})
    table.check("shape", np.array([2, 3]), "shape")  # a shape written as an array of ints is still a shape
    fails_with(table.check, "shape", np.array([2.0, 3.0]), "shape", match="expected a tuple of ints")


def test_a_seals_table_holds_seals_only():
    with pytest.raises(ValueError, match="seals from seal()"):
        checks.Seals({"p": (3, 0.5, {})})  # a value pasted where its seal belongs
    with pytest.raises(ValueError, match="seals from seal()"):
        checks.Seals({"p": (3, checks.seal(0.5, name="p"), {"a slip": "0.25"})})
    with pytest.raises(ValueError, match="kind must be one of"):
        checks.Seals({"p": (3, checks.seal(0.5, name="p"), {})}).check("p", 0.5, "probability")


def test_a_sealed_count_deters_peeking_but_is_no_secret():
    """What core's docstring says: a loop over plausible counts finds the one whose seal matches."""
    decimals, sealed, _ = lesson00.SEALS.table["n_patches"]
    found = [n for n in range(10_000) if checks.seal(n, name="n_patches", decimals=decimals) == sealed]
    assert len(found) == 1, found
