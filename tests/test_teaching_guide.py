"""The teacher's guide (docs/teaching.md) and the README's teaching section: every `course` command
they show is one the command accepts, every teacher command is in the guide, and every file they
link to exists. tests/test_class.py runs the same commands on a simulated class.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from course_lib.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "teaching.md"
TEACHER_COMMANDS = {
    "build",
    "check",
    "new",
    "grade",
    "unpack",
    "deadline",
    "adjust",
    "export",
    "report",
    "roster",
    "mark",
    "gradescope",
    "merge",
}


def commands(path: Path) -> list[str]:
    """The `course ...` lines of the file's ```bash blocks."""
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("course ")]


GUIDE_COMMANDS = commands(GUIDE)


@pytest.mark.parametrize("line", GUIDE_COMMANDS + commands(REPO / "README.md"))
def test_every_command_in_the_guide_is_accepted_as_written(line):
    argv = shlex.split(line.split("#")[0])[1:]
    try:
        args, extra = build_parser().parse_known_args(argv)
    except SystemExit:
        pytest.fail(f"`{line}` is not a command `course` accepts")
    assert not extra or args.command == "lab", f"`{line}`: unknown options {extra}"


def test_the_guide_covers_every_teacher_command():
    used = {shlex.split(line)[1] for line in GUIDE_COMMANDS}
    assert TEACHER_COMMANDS <= used, f"not in docs/teaching.md: {sorted(TEACHER_COMMANDS - used)}"
    assert any("--student" in line for line in GUIDE_COMMANDS) and any(
        "--new-solutions" in line for line in GUIDE_COMMANDS
    )
    assert any(line.startswith("course deadline") and "--student" in line for line in GUIDE_COMMANDS), (
        "docs/teaching.md shows no extension (course deadline A DUE --student ID)"
    )
    for option in (
        "--dry-run",
        "--reason",
        "--check --class",
        "--output-layout nbgrader",
        "--canvas-times",
        "--column",
        "roster drop",
        "--grader",
        "--cap",
        "--section",
        "--feedback-zip",
        "--map",
        "--new-column",
        "--shard",
        "gradescope build",
        "gradescope test",
        "gradescope import",
    ):
        assert any(option in line for line in GUIDE_COMMANDS), f"docs/teaching.md shows no command with {option}"


@pytest.mark.parametrize("path", [GUIDE, REPO / "README.md", REPO / "docs" / "nbgrader" / "README.md"])
def test_links_between_the_guides_lead_somewhere(path):
    text = path.read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)  # a link written out as code is an example
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        assert (path.parent / target).exists(), f"{path.name} links to {target}, which does not exist"
    headings = {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }
    for anchor in re.findall(r"\]\(#([^)]+)\)", prose):
        assert anchor in headings, f"{path.name} links to #{anchor}, which is no heading of it"
