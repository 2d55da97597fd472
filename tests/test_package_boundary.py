"""The learner's library and the teacher's grader are two packages, and only one leans on the other:
`course_grader` imports `course_lib`, `course_lib` never imports `course_grader`. A learner (on
Colab, say) installs `course_lib` alone; `course check` works without the grader, and the grader's
commands say how to get it."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "course_lib"
GRADER = "course_grader"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, `importlib.import_module("...")` and `__import__` included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def test_no_module_of_course_lib_imports_the_grader():
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted(LIBRARY.rglob("*.py"))
        for line, module in _imports(path)
        if module == GRADER or module.startswith(GRADER + ".")
    ]
    assert not offenders, "course_lib must not import the grader:\n" + "\n".join(offenders)


def test_the_static_check_sees_every_form_of_import(tmp_path):
    """The test above would catch each of these."""
    for text in (
        "import course_grader",
        "from course_grader.grade import grade_all",
        "import course_grader.cli as c",
        "importlib.import_module('course_grader.cli')",
        "__import__('course_grader')",
    ):
        (tmp_path / "m.py").write_text(f"def f():\n    {text}\n")
        assert any(m.split(".")[0] == GRADER for _, m in _imports(tmp_path / "m.py")), text


# Every module of course_lib, imported in a fresh interpreter: which of the grader's modules came along.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import course_lib
names = [m.name for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "grader": sorted(m for m in sys.modules if m.split(".")[0] == "course_grader")}))
"""


@pytest.mark.slow
def test_importing_every_course_lib_module_leaves_the_grader_out():
    proc = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    assert {"course_lib.cli", "course_lib.runner.feedback", "course_lib.runner.check", "course_lib.checks.core"} <= set(
        found["imported"]
    ), f"the walk missed modules: {found['imported']}"
    assert not found["grader"], f"importing course_lib loaded the grader's modules: {found['grader']}"


# What `course check` loads before it runs a notebook: the command line (with the grader's subcommands
# registered, when it is installed) and the check itself.
CHECK_COMMAND = """
import json, sys
from course_lib import cli
parser = cli.build_parser()
args = parser.parse_args(["check", "exercises/00_welcome_exercises.ipynb"])
assert args.func is cli.check_cmd
import course_lib.runner.check, course_lib.runner.feedback
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "course_grader")))
"""


def test_course_check_loads_no_gradebook_export_or_roster():
    proc = subprocess.run([sys.executable, "-c", CHECK_COMMAND], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    command_line = {"course_grader", "course_grader.cli"} | {
        f"course_grader.cli_{part}" for part in ("common", "grading", "lms", "marking")
    }  # each command imports the rest of the grader when it runs
    assert loaded <= command_line, (
        f"`course check` should load at most the grader's command-line modules, loaded {sorted(loaded)}"
    )


def test_the_root_project_packages_course_lib_alone():
    """Colab installs the repository's root project with --no-deps: course_lib, nothing of the grader."""
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert packages and all(p == "course_lib" or p.startswith("course_lib.") for p in packages), packages
    on_disk = {str(p.parent.relative_to(REPO)).replace("/", ".") for p in LIBRARY.rglob("__init__.py")}
    assert on_disk <= set(packages), f"packages missing from pyproject.toml: {sorted(on_disk - set(packages))}"


def test_without_the_grader_its_commands_say_how_to_install_it(monkeypatch, capsys):
    from course_lib import cli

    monkeypatch.setattr(cli.metadata, "entry_points", lambda group: [])
    help_text = " ".join(cli.build_parser().format_help().split())
    assert "teacher's commands (build, grade, mark, ...) come with the grader, which is not installed" in help_text
    assert "make install" in help_text, help_text
    status = cli.main(["grade", "submissions", "--out", "grades", "--jobs", "2"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "course_grader" in err and "make install" in err, err


def test_with_the_grader_course_offers_every_subcommand():
    from course_lib import cli

    choices = next(a for a in cli.build_parser()._actions if a.dest == "command").choices
    from course_grader.cli import register

    teacher = set(register(argparse.ArgumentParser().add_subparsers()))  # what the grader's entry point adds
    expected = {*cli.LEARNER_COMMANDS, *teacher}
    assert expected <= set(choices), f"missing subcommands: {sorted(expected - set(choices))}"
    assert choices["grade"].get_default("func") is not None, "the grader is installed here: `course grade` is its"


def test_the_grader_is_released_with_course_lib():
    import course_grader
    import course_lib

    project = tomllib.loads((REPO / GRADER / "pyproject.toml").read_text())["project"]
    assert project["version"] == course_lib.__version__ == course_grader.__version__, (
        f"course_lib {course_lib.__version__}, course_grader {course_grader.__version__}, "
        f"course_grader/pyproject.toml {project['version']}: released together, they share one version"
    )
    assert f"course-lib=={course_lib.__version__}" in project["dependencies"], project["dependencies"]


def test_a_grader_that_fails_to_load_leaves_course_check_working(monkeypatch, capsys):
    from course_lib import cli

    class Broken:
        def load(self):
            raise ImportError("No module named 'psutil'")

    monkeypatch.setattr(cli.metadata, "entry_points", lambda group: [Broken()])
    assert cli.build_parser().parse_args(["check", "nb.ipynb"]).func is cli.check_cmd
    assert cli.main(["report", "--out", "grades"]) == 2
    err = capsys.readouterr().err
    assert "failed to load (ImportError: No module named 'psutil')" in err and "make install" in err, err
