"""The teacher's `course` subcommands: build, new, seal, roster, unpack, grade, mark, deadline, adjust, export,
report, gradescope, merge.

    course build      write exercises/ from solutions/        (see `build`)
    course new NN_x   start a new exercise set from a template (--title "Title")
    course seal lessonNN  write a checks module's seals from its values file (solutions/seals/lessonNN.py)
    course roster     keep the class list in the gradebook (import an LMS export, drop a student)
    course unpack ZIP unpack an LMS download (Canvas, Moodle) into submissions/<student_id>/
    course grade DIR  grade a folder of submissions into the gradebook (--dry-run shows what would change)
    course mark       mark written answers in the browser, one question for the whole class (`marking`)
    course deadline   set a deadline and late penalty;  course adjust: manual points with a reason
    course export     rewrite grades.csv, grades.json, feedback/ (--lms canvas|moodle: one column per assignment)
    course report     who needs a look, the score distribution, per-exercise pass rates and hints
    course gradescope a Gradescope autograder zip of a set (build), tried here (test); its scores back (import)
    course merge      join gradebooks graded in parts (`course grade --shard K/N`, a job array) into one

They join the learner's `course` command (`course_lib.cli`): this package's metadata names
`register` in the entry point group `course_lib.commands`, and `course` calls it with its
subparsers. Each subcommand has a function that adds its options (`grade_parser`) and one that runs it
(`grade_cmd`), side by side: here the course author's commands (build, new, seal), in `cli_grading` grade,
report, gradescope and merge, in `cli_lms` the round trip with an LMS (unpack, roster, export), in
`cli_marking` what a teacher decides beside the tests (deadline, adjust, mark), and in `cli_common` what they
share. Each command imports what it needs when it runs, so that `course check` and `course --help` load
none of the grader's modules but these.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .cli_common import REPO, default_dir
from .cli_grading import grade_parser, gradescope_parser, merge_parser, report_parser
from .cli_lms import export_parser, roster_parser, unpack_parser
from .cli_marking import adjust_parser, deadline_parser, mark_parser


def register(sub) -> list[str]:
    """Add the teacher's subcommands to `course`'s subparsers (in the order `course --help` lists them); the
    names added."""
    build_parser(sub)
    new_parser(sub)
    seal_parser(sub)
    grade_parser(sub)
    deadline_parser(sub)
    adjust_parser(sub)
    export_parser(sub)
    report_parser(sub)
    unpack_parser(sub)
    roster_parser(sub)
    mark_parser(sub)
    gradescope_parser(sub)
    merge_parser(sub)
    return [
        "build",
        "new",
        "seal",
        "grade",
        "deadline",
        "adjust",
        "export",
        "report",
        "unpack",
        "roster",
        "mark",
        "gradescope",
        "merge",
    ]


def build_parser(sub) -> None:
    """`course build [--check] [--force] [--class --exercises DIR]`: see course_grader.build."""
    p = sub.add_parser("build", help="write exercises/ from solutions/")
    p.add_argument("notebooks", nargs="*", help="only these solution notebooks (names like 00_welcome.ipynb)")
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if exercises/ is not what the build makes"
    )
    p.add_argument("--force", action="store_true", help="replace exercise notebooks even if a learner changed them")
    p.add_argument("--solutions", type=Path, default=None, help="solution notebooks (default: solutions/)")
    p.add_argument(
        "--exercises", type=Path, default=None, help="where to write (default: exercises/ next to solutions/)"
    )
    p.add_argument(
        "--class",
        dest="for_class",
        action="store_true",
        help="a release for a graded class: leave out the cells tagged self-study (the pointer to "
        "solutions/); needs --exercises DIR, so the committed exercises/ stay as they are",
    )
    p.set_defaults(func=build_cmd)


def build_cmd(args: argparse.Namespace) -> int:
    """`course build [--check] [--force] [--class --exercises DIR]`: see course_grader.build."""
    from .build import build, print_report

    solutions = default_dir(args.solutions, "solutions")
    if args.for_class and args.exercises is None:
        print(
            "ERROR: `course build --class` writes a release for a class; pass --exercises DIR to say where "
            "(e.g. --exercises release/), so that the course's own exercises/ are not replaced."
        )
        return 2
    exercises = args.exercises or solutions.parent / "exercises"
    if not solutions.is_dir():
        print(f"ERROR: no solutions folder at {solutions}")
        return 2
    report = build(
        solutions, exercises, check=args.check, force=args.force, names=args.notebooks, for_class=args.for_class
    )
    return print_report(report)


def new_parser(sub) -> None:
    """`course new NN_name --title T`: see course_grader.new."""
    p = sub.add_parser(
        "new", help="start a new exercise set from a template (a solution notebook and its checks module)"
    )
    p.add_argument(
        "name", help="NN_name, e.g. 12_my_topic: writes solutions/NN_name.ipynb and course_lib/checks/lessonNN.py"
    )
    p.add_argument("--title", required=True, help='the set\'s title, e.g. "My topic"')
    p.add_argument("--solutions", type=Path, default=None, help="where to write the notebook (default: solutions/)")
    p.add_argument(
        "--checks",
        type=Path,
        default=None,
        help="where to write lessonNN.py (default: course_lib/checks/; a folder of your own keeps them private)",
    )
    p.set_defaults(func=new_cmd)


def new_cmd(args: argparse.Namespace) -> int:
    """`course new NN_name --title T`: see course_grader.new."""
    from .new import COURSE_CHECKS, NewSetError, new_set

    solutions = default_dir(args.solutions, "solutions")
    try:
        written = new_set(args.name, args.title, solutions, args.checks or COURSE_CHECKS)
    except NewSetError as err:
        print(f"ERROR: {err}")
        return 2
    for path in written:
        print(f"wrote {path}")
    print(
        "Next: write your exercises (the comments say where the next one goes), run the notebook top to bottom "
        "(jupyter nbconvert --to notebook --execute --inplace ...), then `course build` and `course check` it."
    )
    return 0


def seal_parser(sub) -> None:
    """`course seal lessonNN [--values FILE] [--check]`: see course_grader.seal."""
    p = sub.add_parser(
        "seal", help="write a checks module's table of seals from the plain values of its hand-worked answers"
    )
    p.add_argument("module", help="the checks module, e.g. lesson06 (course_lib/checks/lesson06.py)")
    p.add_argument(
        "--values",
        type=Path,
        default=None,
        help="the values file (default: solutions/seals/MODULE.py, next to the solutions)",
    )
    p.add_argument(
        "--checks", type=Path, default=None, help="the folder of the checks module (default: course_lib/checks/)"
    )
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the module's seals are not what the values give"
    )
    p.set_defaults(func=seal_cmd)


def seal_cmd(args: argparse.Namespace) -> int:
    """`course seal lessonNN [--values FILE] [--check]`: see course_grader.seal."""
    from .seal import SealError, seal_module

    checks = args.checks or REPO / "course_lib" / "checks"
    module = checks / f"{args.module.removesuffix('.py')}.py"
    values = args.values or default_dir(None, "solutions") / "seals" / module.name
    try:
        report = seal_module(module, values, check=args.check)
    except SealError as err:
        print(f"ERROR: {err}")
        return 2
    module, values = (p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p for p in (module, values))
    if args.check:
        state = f"out of date: run `course seal {args.module}`" if report.changed else "up to date"
        print(f"{module}: {report.seals} seals of {report.answers} answers, {state} (values: {values})")
        return 1 if report.changed else 0
    state = "rewrote its SEALS table" if report.changed else "its SEALS table was already up to date"
    print(f"{module}: {report.seals} seals of {report.answers} answers from {values}; {state}")
    return 0
