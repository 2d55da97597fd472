"""`course seal lessonNN`: every checks module's SEALS table is exactly what its values file in
solutions/seals/ gives; changing a value there and running the command rewrites that table, and
nothing else of the module, so that the check then wants the new answer; values that cannot be
told apart or sealed are refused with a one-line reason."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from grading_helpers import fails_with

from course_grader.seal import render, sealed_table
from course_lib import checks, cli

REPO = Path(__file__).resolve().parents[1]
CHECKS = REPO / "course_lib" / "checks"
VALUES = REPO / "solutions" / "seals"
MODULES = sorted(p.stem for p in CHECKS.glob("lesson*.py"))


def test_every_checks_module_is_sealed_from_its_values_file(capsys):
    assert MODULES == sorted(p.stem for p in VALUES.glob("lesson*.py")), "one values file per checks module"
    for module in MODULES:
        assert cli.main(["seal", module, "--check"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert out.count("up to date") == len(MODULES), out


def _module_from(path: Path, name: str):
    """The checks module at `path`, imported as a module of course_lib.checks (its imports are relative)."""
    spec = importlib.util.spec_from_file_location(f"course_lib.checks.{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_changed_value_is_sealed_into_the_table_and_nothing_else_changes(tmp_path, capsys):
    folder = tmp_path / "checks"
    folder.mkdir()
    shutil.copy(CHECKS / "lesson00.py", folder / "lesson00.py")
    values = tmp_path / "lesson00_values.py"
    text = (VALUES / "lesson00.py").read_text(encoding="utf-8")
    assert '"n_patches": (None, 196, {' in text
    values.write_text(text.replace('"n_patches": (None, 196, {', '"n_patches": (None, 100, {'), encoding="utf-8")
    before = (folder / "lesson00.py").read_text(encoding="utf-8").splitlines()

    argv = ["seal", "lesson00", "--checks", str(folder), "--values", str(values)]
    assert cli.main([*argv, "--check"]) == 1 and "out of date" in capsys.readouterr().out
    assert cli.main(argv) == 0 and "rewrote its SEALS table" in capsys.readouterr().out
    after = (folder / "lesson00.py").read_text(encoding="utf-8").splitlines()
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(changed) == 1 and '"n_patches": (None, ' in after[changed[0]], changed
    assert cli.main([*argv, "--check"]) == 0 and cli.main(argv) == 0
    assert "already up to date" in capsys.readouterr().out

    resealed = _module_from(folder / "lesson00.py", "lesson00_resealed")
    resealed.check_patches(100, 197)
    text = fails_with(resealed.check_patches, 196, 197, match="n_patches: 196 is not right")
    assert "100" not in text, "the check still never shows the answer"
    fails_with(resealed.check_patches, 14, 197, match="one side only")  # the mistakes keep their seals


def test_the_rendered_table_fits_the_line_length_and_reads_back_as_the_same_seals():
    values = {
        "a_count": (None, 17, {"counted " + "a very long mistake description " * 6: 18}),
        "a_number": (3, 0.5, {}),
        "a_shape": (None, (4, 7), {"transposed it": (7, 4)}),
    }
    table = sealed_table(values)
    source = render(table)
    assert all(len(line) <= 120 for line in source.splitlines()), source
    namespace = {"Seals": checks.Seals}
    exec(source, namespace)
    assert namespace["SEALS"].table == table
    namespace["SEALS"].check("a_shape", [4, 7], "shape")
    fails_with(namespace["SEALS"].check, "a_shape", (7, 4), "shape", match="transposed it")


@pytest.mark.parametrize(
    "values, match",
    [
        ("X = 1\n", "defines no VALUES table"),
        ("VALUES = {'n': (None, 17)}\n", "should be (decimals, answer, {mistake: value})"),
        ("VALUES = {'n': (None, 17, {'added one': 17})}\n", "gives the same value as the answer"),
        (
            "VALUES = {'p': (2, 0.5, {'a': 0.25, 'b': 0.251})}\n",
            "the mistake 'b' gives the same value as the mistake 'a'",
        ),
        ("VALUES = {'n': (None, object(), {})}\n", "n: the answer: seal() takes numbers"),
        ("raise RuntimeError('broken')\n", "could not be run: RuntimeError: broken"),
    ],
    ids=["no table", "no mistakes", "mistake is the answer", "two mistakes alike", "not a value", "broken file"],
)
def test_values_that_cannot_be_sealed_are_refused_in_one_line(tmp_path, capsys, values, match):
    shutil.copy(CHECKS / "lesson00.py", tmp_path / "lesson00.py")
    (tmp_path / "values.py").write_text(values)
    before = (tmp_path / "lesson00.py").read_bytes()
    assert cli.main(["seal", "lesson00", "--checks", str(tmp_path), "--values", str(tmp_path / "values.py")]) == 2
    out = capsys.readouterr().out
    assert out.startswith("ERROR: ") and match in out and len(out.strip().splitlines()) == 1, out
    assert (tmp_path / "lesson00.py").read_bytes() == before, "nothing is written"


def test_a_module_without_one_seals_table_is_refused(tmp_path, capsys):
    (tmp_path / "lesson99.py").write_text("SEALS = {}\n")
    (tmp_path / "values.py").write_text("VALUES = {'n': (None, 1, {})}\n")
    assert cli.main(["seal", "lesson99", "--checks", str(tmp_path), "--values", str(tmp_path / "values.py")]) == 2
    assert "should hold one table `SEALS = Seals({...})`" in capsys.readouterr().out
    assert cli.main(["seal", "lesson98", "--checks", str(tmp_path)]) == 2
    assert "no checks module at" in capsys.readouterr().out


def test_a_rewritten_file_keeps_its_mode_so_the_sandbox_can_still_read_it(tmp_path):
    """`course seal` (and every rewrite of a notebook) goes through a temporary file, which is private
    (0600); the sandbox's unprivileged user could then no longer import the checks module."""
    from course_lib.runner.notebook import write_atomic

    module = tmp_path / "lesson99.py"
    module.write_text("SEALS = {}\n")
    module.chmod(0o644)
    write_atomic(module, "SEALS = {1: 2}\n")
    assert module.stat().st_mode & 0o777 == 0o644, oct(module.stat().st_mode & 0o777)
    assert module.read_text() == "SEALS = {1: 2}\n"
    fresh = tmp_path / "new.py"
    write_atomic(fresh, "x = 1\n")
    assert fresh.stat().st_mode & 0o044 == 0o044, (
        f"a new file should be readable by others: {oct(fresh.stat().st_mode)}"
    )
