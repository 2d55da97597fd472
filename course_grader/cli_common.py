"""What the teacher's subcommands share: where the course's folders are (`default_dir`), the gradebook a
command works on (`existing_gradebook`), the options two commands share (`add_max_size`), and bad input
said in one line (`explained`).

Like every `cli_*` module, it imports none of the grader's other modules until a command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import course_lib

REPO = Path(course_lib.__file__).resolve().parents[1]  # the course's folder (solutions/, exercises/)
OUT_HELP = "the gradebook's folder (default: grading-output/)"


def add_max_size(p: argparse.ArgumentParser) -> None:
    """--max-size, which `course grade` and `course unpack` apply alike (a notebook over it is a row with a reason)."""
    p.add_argument(
        "--max-size",
        type=float,
        default=20,
        metavar="MB",
        help="the most a notebook may weigh once its outputs are left aside (default 20)",
    )


def explained(command):
    """`command`, with bad input (a ValueError, a broken roster) said in one line, without a traceback."""

    def run(args: argparse.Namespace) -> int:
        from .roster import RosterError

        try:
            return command(args)
        except (ValueError, RosterError, OSError) as err:
            print(f"ERROR: {err}")
            return 2

    return run


def default_dir(given: Path | None, name: str) -> Path:
    """`given`, else ./name when it exists, else the repository's own folder."""
    if given is not None:
        return given
    here = Path.cwd() / name
    return here if here.is_dir() else REPO / name


def existing_gradebook(out: Path):
    """The gradebook in `out`, which must exist already (only `course grade` creates one)."""
    from .gradebook import open_gradebook

    if not (out / "gradebook.db").is_file():
        raise ValueError(f"no gradebook in {out} (run `course grade SUBMISSIONS --out {out}` first, or pass --out)")
    return open_gradebook(out)
