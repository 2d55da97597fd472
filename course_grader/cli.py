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
subparsers. Each command imports what it needs when it runs, so that `course check` and
`course --help` load none of the grader's modules but this one.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import course_lib

REPO = Path(course_lib.__file__).resolve().parents[1]  # the course's folder (solutions/, exercises/)


def register(sub) -> list[str]:
    """Add the teacher's subcommands to `course`'s subparsers; the names added."""
    p_build = sub.add_parser("build", help="write exercises/ from solutions/")
    p_build.add_argument("notebooks", nargs="*", help="only these solution notebooks (names like 00_welcome.ipynb)")
    p_build.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if exercises/ is not what the build makes"
    )
    p_build.add_argument(
        "--force", action="store_true", help="replace exercise notebooks even if a learner changed them"
    )
    p_build.add_argument("--solutions", type=Path, default=None, help="solution notebooks (default: solutions/)")
    p_build.add_argument(
        "--exercises", type=Path, default=None, help="where to write (default: exercises/ next to solutions/)"
    )
    p_build.add_argument(
        "--class",
        dest="for_class",
        action="store_true",
        help="a release for a graded class: leave out the cells tagged self-study (the pointer to "
        "solutions/); needs --exercises DIR, so the committed exercises/ stay as they are",
    )

    p_new = sub.add_parser(
        "new", help="start a new exercise set from a template (a solution notebook and its checks module)"
    )
    p_new.add_argument(
        "name", help="NN_name, e.g. 12_my_topic: writes solutions/NN_name.ipynb and course_lib/checks/lessonNN.py"
    )
    p_new.add_argument("--title", required=True, help='the set\'s title, e.g. "My topic"')
    p_new.add_argument("--solutions", type=Path, default=None, help="where to write the notebook (default: solutions/)")
    p_new.add_argument(
        "--checks",
        type=Path,
        default=None,
        help="where to write lessonNN.py (default: course_lib/checks/; a folder of your own keeps them private)",
    )

    p_seal = sub.add_parser(
        "seal", help="write a checks module's table of seals from the plain values of its hand-worked answers"
    )
    p_seal.add_argument("module", help="the checks module, e.g. lesson06 (course_lib/checks/lesson06.py)")
    p_seal.add_argument(
        "--values",
        type=Path,
        default=None,
        help="the values file (default: solutions/seals/MODULE.py, next to the solutions)",
    )
    p_seal.add_argument(
        "--checks", type=Path, default=None, help="the folder of the checks module (default: course_lib/checks/)"
    )
    p_seal.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the module's seals are not what the values give"
    )

    p_grade = sub.add_parser("grade", help="grade SUBMISSIONS_DIR/<student_id>/NN_name.ipynb into the gradebook")
    p_grade.add_argument("submissions", type=Path)
    p_grade.add_argument("--solutions", type=Path, default=None, help="solution notebooks (default: solutions/)")
    p_grade.add_argument(
        "--out",
        type=Path,
        default=Path("grading-output"),
        help="the gradebook's folder: gradebook.db and its exports (default: grading-output/)",
    )
    p_grade.add_argument(
        "--assignment",
        action="append",
        help="grade only this assignment (e.g. 06_attention); repeatable. Students without it get a "
        "'not submitted' row only for assignments named here",
    )
    p_grade.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="CSV of the class (student_id,name,email,...); kept in the gradebook for later runs",
    )
    p_grade.add_argument("--student", action="append", help="grade only this student (regrade one); repeatable")
    p_grade.add_argument(
        "--new-solutions",
        action="store_true",
        help="accept solutions that differ from those that graded this assignment before",
    )
    p_grade.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel (default 2)")
    p_grade.add_argument(
        "--timeout",
        "--cpu-limit",
        dest="timeout",
        type=float,
        default=None,
        help="CPU seconds per cell, counted over the submission's own processes (default: each exercise set's "
        "own budget, 60 unless the set says otherwise; a wall-clock backstop 5 times longer stops a kernel "
        "that only waits)",
    )
    p_grade.add_argument(
        "--total-timeout",
        "--total-cpu-limit",
        dest="total_timeout",
        type=float,
        default=None,
        help="CPU seconds per submission (default: each exercise set's own, 600 unless the set says otherwise)",
    )
    p_grade.add_argument("--memory", type=int, default=2048, help="MB a submission may allocate (default 2048)")
    p_grade.add_argument("--max-output", type=int, default=1_000_000, help="bytes of output per cell (default 1000000)")
    p_grade.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade even where the bubblewrap sandbox is not available (UNSAFE for untrusted submissions)",
    )
    p_grade.add_argument(
        "--dry-run",
        action="store_true",
        help="grade, then show whose scores would change, old -> new, per exercise; write nothing",
    )
    p_grade.add_argument(
        "--reason",
        default="",
        help="why you grade again (e.g. 'a hidden test of exercise 5 was too strict'): kept with the "
        "run and shown to every student whose work it regrades",
    )
    p_grade.add_argument(
        "--max-size",
        type=float,
        default=20,
        metavar="MB",
        help="the most a notebook may weigh once its outputs are left aside (default 20)",
    )
    p_grade.add_argument(
        "--hide-hidden-inputs",
        action="store_true",
        help="a failed hidden test says so without the check's message, which may show its inputs "
        "(for hidden tests you reuse)",
    )
    p_grade.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="grade part K of N of the class (by a hash of the student id: the same on every machine), one "
        "part per job of a job array; `course merge` joins the parts' gradebooks",
    )
    p_grade.add_argument(
        "--id-column", default=None, help="the --roster column that holds the student ids (default: see the guide)"
    )

    out_help = "the gradebook's folder (default: grading-output/)"
    p_deadline = sub.add_parser(
        "deadline", help="set an assignment's deadline and late penalty (applied in every export)"
    )
    p_deadline.add_argument("assignment", nargs="?", help="e.g. 06_attention")
    p_deadline.add_argument("due", nargs="?", help="e.g. '2026-12-01 23:59' (local time) or 2026-12-01T23:59+01:00")
    p_deadline.add_argument(
        "--penalty",
        type=float,
        default=None,
        help="percent of the assignment's points lost per started day late (default 10)",
    )
    p_deadline.add_argument(
        "--max", type=float, default=None, help="the most a late submission loses, in percent (default 100)"
    )
    p_deadline.add_argument("--grace", type=float, default=None, help="minutes of lateness forgiven (default 0)")
    p_deadline.add_argument(
        "--student",
        metavar="ID",
        help="give this student their own deadline for the assignment (an extension): its late penalty counts "
        "from DUE, and the feedback says so",
    )
    p_deadline.add_argument(
        "--remove", action="store_true", help="with --student: take the student's extension away (kept on record)"
    )
    p_deadline.add_argument(
        "--grader", default="", help="with --student: who gives (or removes) the extension (default: your login name)"
    )
    p_deadline.add_argument("--list", action="store_true", help="show the deadlines and the extensions")
    p_deadline.add_argument("--out", type=Path, default=Path("grading-output"), help=out_help)

    p_adjust = sub.add_parser(
        "adjust", help="add points to (or take them from) one student's assignment, with a reason"
    )
    p_adjust.add_argument("student", nargs="?")
    p_adjust.add_argument("assignment", nargs="?")
    p_adjust.add_argument("points", nargs="?", type=float, help="e.g. 2 or -1.5")
    p_adjust.add_argument(
        "--reason", default="", help="shown to the student in the feedback (with --remove: why, kept on record)"
    )
    p_adjust.add_argument(
        "--grader", default="", help="who makes (or, with --remove, removes) the adjustment (default: your login name)"
    )
    p_adjust.add_argument(
        "--cap", action="store_true", help="the final score stays at most the assignment's maximum (no extra credit)"
    )
    p_adjust.add_argument("--list", action="store_true", help="show every adjustment that counts, numbered")
    p_adjust.add_argument(
        "--removed", action="store_true", help="with --list: the removed ones too, with who removed them and when"
    )
    p_adjust.add_argument(
        "--remove",
        type=int,
        metavar="N",
        help="stop counting adjustment N (it stays on record with who removed it, when and --reason)",
    )
    p_adjust.add_argument("--out", type=Path, default=Path("grading-output"), help=out_help)

    p_export = sub.add_parser(
        "export",
        help="rewrite grades.csv, grades.json and feedback/ from the gradebook; "
        "--lms writes a gradebook file for Canvas or Moodle",
    )
    p_export.add_argument(
        "--lms",
        choices=("canvas", "moodle", "wide"),
        action="append",
        help="also write canvas.csv / moodle.csv / wide.csv (one column per assignment); repeatable",
    )
    p_export.add_argument("--assignment", action="append", help="the LMS file's columns, in this order (default: all)")
    p_export.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="ASSIGNMENT=COLUMN",
        help="write an assignment into the LMS's existing column, e.g. "
        "'04_word_vectors=Word Vectors (12345)'; repeatable, remembered for later exports",
    )
    p_export.add_argument(
        "--columns",
        type=Path,
        default=None,
        metavar="FILE",
        help="a CSV file of assignment,column lines (the same as --column, for every assignment)",
    )
    p_export.add_argument(
        "--new-column",
        action="store_true",
        help="let an assignment that fits none of the LMS's columns (in the roster's LMS export) become a new "
        "assignment in the LMS (without it, the export stops and names the columns still unfilled)",
    )
    p_export.add_argument(
        "--feedback-zip",
        choices=("canvas", "moodle"),
        action="append",
        help="also write feedback-LMS-A.zip: every student's feedback on the --assignment, named as the LMS's "
        "download named their file, for Canvas's Re-Upload Submissions or Moodle's feedback files zip",
    )
    p_export.add_argument(
        "--missing",
        dest="missing_work",
        choices=("empty", "zero"),
        default="empty",
        help="work never handed in: an empty cell (default; the LMS keeps what it has) or 0",
    )
    p_export.add_argument("--out", type=Path, default=Path("grading-output"), help=out_help)

    p_report = sub.add_parser(
        "report", help="per-exercise pass rates and the most common hints, as a table and figures"
    )
    p_report.add_argument("--assignment", action="append", help="only this assignment; repeatable")
    p_report.add_argument("--out", type=Path, default=Path("grading-output"), help=out_help)

    p_unpack = sub.add_parser("unpack", help="unpack an LMS download (Canvas, Moodle) into SUBMISSIONS/<student_id>/")
    p_unpack.add_argument("zip", type=Path)
    p_unpack.add_argument("--assignment", required=True, help="the assignment the zip holds, e.g. 06_attention")
    p_unpack.add_argument(
        "--to", type=Path, default=Path("submissions"), help="the submissions folder (default: submissions/)"
    )
    p_unpack.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="map LMS names and ids to your student ids (kept in the gradebook: later runs need not repeat it)",
    )
    p_unpack.add_argument("--id-column", default=None, help="the --roster column that holds the student ids")
    p_unpack.add_argument(
        "--out",
        type=Path,
        default=Path("grading-output"),
        help="the gradebook's folder, where the roster is kept and the unpacking is recorded "
        "(default: grading-output/)",
    )
    p_unpack.add_argument(
        "--layout",
        choices=("auto", "canvas", "moodle", "plain"),
        default="auto",
        help="how the zip is laid out (default: detected)",
    )
    p_unpack.add_argument(
        "--output-layout",
        choices=("course", "nbgrader"),
        default="course",
        help="course: TO/<id>/A.ipynb (default); nbgrader: TO/<id>/A/A.ipynb with timestamp.txt, "
        "nbgrader's submitted/ layout",
    )
    p_unpack.add_argument(
        "--max-size",
        type=float,
        default=20,
        metavar="MB",
        help="the most a notebook may weigh once its outputs are left aside (default 20)",
    )
    p_unpack.add_argument(
        "--canvas-times",
        type=Path,
        default=None,
        metavar="JSON",
        help="submission times from Canvas's submissions API (saved as JSON), for late penalties",
    )
    p_unpack.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="LMS=ID",
        help="this download's student LMS (the id a warning said it was written as, e.g. Anh_Nguyen_731006, or the "
        "LMS's own number) is the roster's student ID; repeatable, kept in the gradebook for later unpackings",
    )
    p_unpack.add_argument("--overwrite", action="store_true", help="replace notebooks already unpacked")
    p_unpack.add_argument(
        "--tz", default=None, help="the time zone of the zip's times (e.g. Europe/Berlin; default: this machine's)"
    )
    p_roster = sub.add_parser(
        "roster", help="keep the class list in the gradebook: import an LMS export, drop a student"
    )
    p_roster.add_argument(
        "action", choices=("import", "list", "drop", "restore"), help="import FILE | list | drop ID | restore ID"
    )
    p_roster.add_argument("what", nargs="?", help="the roster file (import) or the student's id (drop, restore)")
    p_roster.add_argument("--id-column", default=None, help="the column that holds the student ids (import)")
    p_roster.add_argument("--out", type=Path, default=Path("grading-output"), help=out_help)

    p_mark = sub.add_parser("mark", help="mark written answers in your browser: one question, the whole class")
    p_mark.add_argument("--out", type=Path, default=Path("grading-output"), help=out_help)
    p_mark.add_argument(
        "--grader",
        action="append",
        default=[],
        metavar="NAME",
        help="a grader (repeat it for each teaching assistant): each gets an address of their own, and the marks "
        "saved from it are recorded under NAME (default: one address, under your login name)",
    )
    p_mark.add_argument(
        "--section",
        action=_GraderSection,
        default={},
        metavar="SECTION",
        help="after a --grader: the section whose answers they mark (repeatable); their address shows only its "
        "students, and a save for anyone else is refused (default: every section)",
    )
    p_mark.add_argument(
        "--section-column",
        default="Section",
        metavar="COLUMN",
        help="the roster's column that holds each student's section (default: Section, as Canvas exports it)",
    )
    p_mark.add_argument("--page-size", type=int, default=25, help="answers listed on a page (default 25)")
    p_mark.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    p_mark.add_argument("--list", action="store_true", help="print how many answers are marked, and stop")

    p_build.set_defaults(func=build_cmd)
    p_new.set_defaults(func=new_cmd)
    p_seal.set_defaults(func=seal_cmd)
    p_grade.set_defaults(func=grade_cmd)
    for parser, command in (
        (p_unpack, unpack_cmd),
        (p_deadline, deadline_cmd),
        (p_adjust, adjust_cmd),
        (p_export, export_cmd),
        (p_report, report_cmd),
        (p_roster, roster_cmd),
        (p_mark, mark_cmd),
    ):
        parser.set_defaults(func=_explained(command))
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


def gradescope_parser(sub) -> None:
    """`course gradescope build | test | import`: see course_grader.gradescope, gradescope_run and gradescope_scores."""
    p = sub.add_parser(
        "gradescope", help="a Gradescope autograder from an exercise set: build the zip, try it here, import its scores"
    )
    actions = p.add_subparsers(dest="gradescope_action", required=True)
    build = actions.add_parser("build", help="write the autograder zip of one assignment (setup.sh, run_autograder)")
    build.add_argument("assignment", help="e.g. 06_attention")
    build.add_argument("--solutions", type=Path, default=None, help="solution notebooks (default: solutions/)")
    build.add_argument(
        "-o", "--output", type=Path, default=None, help="the zip to write (default: autograder-ASSIGNMENT.zip)"
    )
    build.add_argument(
        "--hidden-visibility",
        choices=("visible", "after_due_date", "after_published", "hidden"),
        default="after_published",
        help="when students see the exercises whose tests include hidden ones (Gradescope's visibility; default "
        "after_published: once you publish the grades)",
    )
    build.add_argument(
        "--timeout-minutes",
        type=float,
        default=10.0,
        help="the autograder timeout you set on Gradescope (default 10): the autograder stops a minute before it, "
        "keeping what it checked",
    )
    build.add_argument("--hide-hidden-inputs", action="store_true", help="as course grade --hide-hidden-inputs")
    build.add_argument("--timeout", type=float, default=None, help="CPU seconds per cell (default: the set's own)")
    build.add_argument(
        "--total-timeout", type=float, default=None, help="CPU seconds per submission (default: the set's own)"
    )
    build.add_argument("--memory", type=int, default=None, help="MB a submission may allocate (default 2048)")
    test = actions.add_parser(
        "test", help="run an autograder zip on a notebook here, in a folder laid out like Gradescope's /autograder"
    )
    test.add_argument("zip", type=Path)
    test.add_argument("notebook", type=Path, help="the notebook a student would upload")
    test.add_argument(
        "--out",
        type=Path,
        default=Path("gradescope-test"),
        help="where results.json and stdout go (default: gradescope-test/)",
    )
    test.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the folder standing for /autograder (default: a temporary one, removed)",
    )
    test.add_argument(
        "--no-sandbox", action="store_true", help="where bubblewrap does not run and you are not root (UNSAFE)"
    )
    imp = actions.add_parser("import", help="read Gradescope's score export (CSV) of one assignment into the gradebook")
    imp.add_argument("scores", type=Path, help="Review Grades > Download Grades > CSV")
    imp.add_argument("--assignment", required=True, help="the assignment the scores are for, e.g. 06_attention")
    imp.add_argument("--out", type=Path, default=Path("grading-output"), help="the gradebook's folder")
    imp.add_argument(
        "--solutions", type=Path, default=None, help="the solutions that built the autograder (recorded with the rows)"
    )
    p.set_defaults(func=_explained(gradescope_cmd))


def gradescope_cmd(args: argparse.Namespace) -> int:
    """`course gradescope build | test | import`: see course_grader.gradescope, gradescope_run and gradescope_scores."""
    from course_lib.runner.feedback import num

    from . import gradescope, gradescope_scores

    if args.gradescope_action == "build":
        limits = {"cell_cpu_s": args.timeout, "total_cpu_s": args.total_timeout, "memory_mb": args.memory}
        report = gradescope.build_autograder(
            args.assignment,
            _default_dir(args.solutions, "solutions"),
            args.output or Path(f"autograder-{Path(args.assignment).stem}.zip"),
            hidden_visibility=args.hidden_visibility,
            timeout_minutes=args.timeout_minutes,
            hide_hidden=args.hide_hidden_inputs,
            limits=limits,
        )
        print(f"wrote {report.path} ({len(report.files)} files)")
        for note in report.notes:
            print(f"  {note}")
        return 0
    if args.gradescope_action == "test":
        results = gradescope.try_autograder(
            args.zip, args.notebook, args.out, root=args.root, no_sandbox=args.no_sandbox
        )
        tests = [t for t in results.get("tests", []) if "written answer" not in t.get("tags", [])]
        print(f"score: {num(results['score'])} / {num(sum(t['max_score'] for t in tests))}")
        for t in results.get("tests", []):
            print(
                f"  {t['name'][:56]:<56} {num(t['score']):>5} / {num(t['max_score']):<5} {t['status']:<6} "
                f"{t['visibility']}"
            )
        print(f"wrote {args.out / 'results.json'} (what Gradescope would get) and {args.out / 'stdout'}")
        return 0
    report = gradescope_scores.import_scores(args.scores, args.assignment, args.out, solutions=args.solutions)
    print(
        f"imported {report.rows} row(s) of {Path(args.assignment).stem} into {args.out / 'gradebook.db'} "
        f"({report.graded} graded, {report.missing} not submitted); rewrote its exports"
    )
    for why in report.skipped:
        print(f"  not imported: {why}")
    return 0


def merge_parser(sub) -> None:
    """`course merge OUT1 OUT2 ... --out OUT`: see course_grader.merge."""
    p = sub.add_parser("merge", help="merge gradebooks graded in parts (course grade --shard K/N) into one")
    p.add_argument("parts", nargs="+", type=Path, help="the gradebooks' folders (each with a gradebook.db)")
    p.add_argument("--out", type=Path, required=True, help="the merged gradebook's folder (may be one of the parts)")
    p.set_defaults(func=_explained(merge_cmd))


def merge_cmd(args: argparse.Namespace) -> int:
    """`course merge OUT1 OUT2 ... --out OUT`: see course_grader.merge."""
    from .merge import merge_gradebooks

    report = merge_gradebooks(args.parts, args.out, command=" ".join(["course", *sys.argv[1:]]))
    print("\n".join(report.lines()))
    print(f"rewrote {args.out / 'grades.csv'}, {args.out / 'grades.json'} and {args.out / 'feedback'}/")
    return 0


class _GraderSection(argparse.Action):
    """`--section A` gives the --grader named just before it section A: {grader: [sections]}."""

    def __call__(self, parser, namespace, value, option_string=None):
        graders = getattr(namespace, "grader", None) or []
        if not graders:
            parser.error(f"--section {value} names no grader: put it after the --grader it is for")
        given = dict(getattr(namespace, self.dest) or {})
        given[graders[-1]] = [*given.get(graders[-1], []), value.strip()]
        setattr(namespace, self.dest, given)


def _explained(command):
    """`command`, with bad input (a ValueError, a broken roster) said in one line, without a traceback."""

    def run(args: argparse.Namespace) -> int:
        from .roster import RosterError

        try:
            return command(args)
        except (ValueError, RosterError, OSError) as err:
            print(f"ERROR: {err}")
            return 2

    return run


def _default_dir(given: Path | None, name: str) -> Path:
    """`given`, else ./name when it exists, else the repository's own folder."""
    if given is not None:
        return given
    here = Path.cwd() / name
    return here if here.is_dir() else REPO / name


def build_cmd(args: argparse.Namespace) -> int:
    """`course build [--check] [--force] [--class --exercises DIR]`: see course_grader.build."""
    from .build import build, print_report

    solutions = _default_dir(args.solutions, "solutions")
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


def new_cmd(args: argparse.Namespace) -> int:
    """`course new NN_name --title T`: see course_grader.new."""
    from .new import COURSE_CHECKS, NewSetError, new_set

    solutions = _default_dir(args.solutions, "solutions")
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


def seal_cmd(args: argparse.Namespace) -> int:
    """`course seal lessonNN [--values FILE] [--check]`: see course_grader.seal."""
    from .seal import SealError, seal_module

    checks = args.checks or REPO / "course_lib" / "checks"
    module = checks / f"{args.module.removesuffix('.py')}.py"
    values = args.values or _default_dir(None, "solutions") / "seals" / module.name
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


def grade_cmd(args: argparse.Namespace) -> int:
    """`course grade SUBMISSIONS_DIR`: see course_grader.grade."""
    from course_lib.runner.process import Limits

    from .batch import NO_SANDBOX_WARNING, GradeOptions, grade_all
    from .roster import RosterError

    solutions = _default_dir(args.solutions, "solutions")
    if not args.submissions.is_dir():
        print(f"ERROR: {args.submissions} is not a folder (expected SUBMISSIONS_DIR/<student_id>/NN_name.ipynb)")
        return 2
    if not solutions.is_dir():
        print(f"ERROR: no solutions folder at {solutions}")
        return 2
    shard = None
    if args.shard is not None:
        k, sep, n = args.shard.partition("/")
        if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            print(f"ERROR: --shard takes K/N with 1 <= K <= N, e.g. 2/8 (part 2 of 8); got {args.shard!r}")
            return 2
        shard = (int(k), int(n))
    limits = Limits(memory_mb=args.memory, output_bytes=args.max_output)
    given = {"cell_cpu_s": args.timeout, "total_cpu_s": args.total_timeout}
    limits = replace(limits, **{k: v for k, v in given.items() if v is not None})
    if args.no_sandbox:
        print(NO_SANDBOX_WARNING, file=sys.stderr)
    try:
        options = GradeOptions(
            jobs=args.jobs,
            limits=limits,
            set_limits=args.timeout is None and args.total_timeout is None,
            assignments=args.assignment,
            sandbox=not args.no_sandbox,
            roster=args.roster,
            id_column=args.id_column,
            students=args.student,
            shard=shard,
            new_solutions=args.new_solutions,
            dry_run=args.dry_run,
            reason=args.reason,
            command=" ".join(["course", *sys.argv[1:]]) if sys.argv else "course grade",
            max_bytes=int(args.max_size * 2**20),
            hide_hidden=args.hide_hidden_inputs,
        )
        results = grade_all(args.submissions, solutions, args.out, options)
    except (ValueError, RosterError) as err:
        print(f"ERROR: {err}")
        return 2
    except KeyboardInterrupt:
        if args.dry_run:
            print("Interrupted. A dry run writes nothing: the gradebook and its exports are as they were.")
        else:
            print(
                f"Interrupted. The submissions graded so far are kept in {args.out / 'gradebook.db'} (and in the "
                "rewritten grades.csv, grades.json and feedback/); run the same command again to grade the rest."
            )
        return 130
    if args.dry_run:
        print(f"Graded {len(results)} submission(s) for the dry run; nothing was written.")
        return 0
    print(
        f"Graded {len(results)} submission(s) into {args.out / 'gradebook.db'}; rewrote {args.out / 'grades.csv'}, "
        f"{args.out / 'grades.json'} and {args.out / 'feedback'}/"
    )
    return 0


def _gradebook(out: Path):
    """The gradebook in `out`, which must exist already (only `course grade` creates one)."""
    from .gradebook import open_gradebook

    if not (out / "gradebook.db").is_file():
        raise ValueError(f"no gradebook in {out} (run `course grade SUBMISSIONS --out {out}` first, or pass --out)")
    return open_gradebook(out)


def deadline_cmd(args: argparse.Namespace) -> int:
    """`course deadline ASSIGNMENT DUE --penalty P`, `--student ID` (an extension), `--list`: see
    course_grader.gradebook."""
    from .export import write_exports

    with closing(_gradebook(args.out)) as book:
        if args.student is not None:
            _extension(book, args)
            write_exports(book, args.out)
        elif args.assignment:
            _deadline(book, args)
            write_exports(book, args.out)
        elif not args.list:
            raise ValueError("name an assignment and its deadline, or pass --list")
        for line in _deadline_lines(book):
            print(line)
    return 0


def _deadline(book, args: argparse.Namespace) -> None:
    """`course deadline A DUE --penalty P --max M --grace G`."""
    from .gradebook import Deadline, parse_time

    if args.remove:
        raise ValueError("--remove takes an extension away: course deadline A --student ID --remove")
    if not args.due:
        raise ValueError("give the deadline after the assignment, e.g. course deadline 06_attention '2026-12-01 23:59'")
    given = (args.penalty, args.max, args.grace)
    penalty, most, grace = (d if v is None else v for v, d in zip(given, (10.0, 100.0, 0.0), strict=True))
    book.set_deadline(Deadline(args.assignment, parse_time(args.due), penalty, most, grace))


def _extension(book, args: argparse.Namespace) -> None:
    """`course deadline A DUE --student ID` (an extension) or `course deadline A --student ID --remove`."""
    from .gradebook import parse_time

    if not args.assignment:
        raise ValueError("name the assignment: course deadline 06_attention '2026-12-08 23:59' --student ID")
    if any(v is not None for v in (args.penalty, args.max, args.grace)):
        raise ValueError(
            "an extension moves one student's deadline; the penalty stays the assignment's: set --penalty, "
            f"--max and --grace without --student (course deadline {args.assignment} DUE --penalty P)"
        )
    label = book.roster().label(args.student) if book.roster() else args.student
    if args.remove:
        gone = book.remove_extension(args.student, args.assignment, args.grader)
        print(f"removed the extension of {label} for {args.assignment} to {gone.due.isoformat()} (kept on record)")
        return
    if not args.due:
        raise ValueError(f"give the extended deadline: course deadline {args.assignment} DUE --student {args.student}")
    given = book.set_extension(args.student, args.assignment, parse_time(args.due), args.grader)
    print(f"{label}: extension of {args.assignment} to {given.due.isoformat()} (given by {given.grader})")


def _deadline_lines(book) -> list[str]:
    """Each deadline, its extensions, and the graded submissions without a time (never penalised)."""
    rows = book.rows()
    roster = book.roster()
    lines = []
    for d in book.deadlines().values():
        lines.append(
            f"{d.assignment}: due {d.due.isoformat()}, -{d.percent_per_day:g}% per started day late "
            f"(at most -{d.max_percent:g}%), grace {d.grace_minutes:g} min"
        )
        for e in book.extensions(assignment=d.assignment):
            who = roster.label(e.student) if roster else e.student
            lines.append(
                f"  extension: {who} to {e.due.isoformat()} (given by {e.grader} on {e.created_at[:10]}; "
                f"remove: course deadline {d.assignment} --student {e.student} --remove)"
            )
        untimed = [
            r.student for r in rows if r.assignment == d.assignment and r.status == "graded" and not r.submitted_at
        ]
        if untimed:
            lines.append(
                f"  warning: {len(untimed)} graded submission(s) have no submission time (no timestamp.txt "
                f"in the student's folder), so no late penalty applies to them: {', '.join(untimed[:10])}"
                + (" ..." if len(untimed) > 10 else "")
            )
    return lines


def adjust_cmd(args: argparse.Namespace) -> int:
    """`course adjust STUDENT ASSIGNMENT POINTS --reason TEXT`: see course_grader.gradebook."""
    from course_lib.runner.feedback import num

    from .export import write_exports

    args.list = args.list or args.removed
    with closing(_gradebook(args.out)) as book:
        if args.remove is not None:
            a = book.remove_adjustment(args.remove, args.grader, args.reason)
            sign = "+" if a.points >= 0 else ""
            row = next((r for r in book.rows() if (r.student, r.assignment) == (a.student, a.assignment)), None)
            print(
                f"removed adjustment {a.id}: {a.student} {a.assignment} {sign}{num(a.points)} ({a.reason}); "
                f"kept on record as removed by {a.removed_by} at {a.removed_at[:16].replace('T', ' ')} UTC"
                + (f"; final score now {num(row.final)} / {num(row.max_score)}" if row else "")
            )
        elif args.student is not None:
            if args.assignment is None or args.points is None:
                raise ValueError(
                    "give the student, the assignment and the points, "
                    "e.g. course adjust ada 06_attention 2 --reason '...'"
                )
            rows = {(r.student, r.assignment): r for r in book.rows()}
            if (args.student, args.assignment) not in rows:
                known = sorted({a for _, a in rows})
                raise ValueError(
                    f"the gradebook has no grade of {args.assignment} for {args.student}; grade it first "
                    f"(known assignments: {', '.join(known) or 'none'})"
                )
            number = book.add_adjustment(args.student, args.assignment, args.points, args.reason, args.grader, args.cap)
            sign = "+" if args.points >= 0 else ""
            row = next(r for r in book.rows() if (r.student, r.assignment) == (args.student, args.assignment))
            print(
                f"adjustment {number}: {args.student} {args.assignment} {sign}{num(args.points)} ({args.reason}); "
                f"final score now {num(row.final)} / {num(row.max_score)}"
            )
            if row.final > row.max_score:
                print(
                    f"  note: that is above the maximum (extra credit); to stop at {num(row.max_score)}, remove it "
                    f"(--remove {number}) and add it again with --cap"
                )
        elif not args.list:
            raise ValueError("give STUDENT ASSIGNMENT POINTS --reason TEXT, or --list, or --remove N")
        if args.list:
            for a in book.adjustments(removed=args.removed):
                sign = "+" if a.points >= 0 else ""
                cap = " (capped)" if a.cap else ""
                removed = (
                    f"  [removed {a.removed_at[:16].replace('T', ' ')} by {a.removed_by}"
                    + (f": {a.removed_reason}" if a.removed_reason else "")
                    + "]"
                    if a.removed_at
                    else ""
                )
                print(
                    f"{a.id:>4}  {a.created_at[:16].replace('T', ' ')}  {a.grader or '?':<12} {a.student:<20} "
                    f"{a.assignment:<24} {sign}{num(a.points):<6} {a.reason}{cap}{removed}"
                )
            hidden = len(book.adjustments(removed=True)) - len(book.adjustments())
            if hidden and not args.removed:
                print(f"({hidden} removed adjustment(s) not shown: --list --removed shows them, with who and when)")
        if args.remove is not None or args.student is not None:
            write_exports(book, args.out)
    return 0


def export_cmd(args: argparse.Namespace) -> int:
    """`course export [--lms canvas|moodle] [--feedback-zip canvas|moodle]`: see course_grader.export and
    course_grader.feedback_zip."""
    from .export import write_exports, write_lms

    columns = _columns(args)
    with closing(_gradebook(args.out)) as book:
        rows = write_exports(book, args.out)
        print(
            f"wrote {args.out / 'grades.csv'}, {args.out / 'grades.json'} and {args.out / 'feedback'}/ "
            f"({len(rows)} rows)"
        )
        for layout in args.lms or []:
            path = args.out / f"{layout}.csv"
            export = write_lms(
                book,
                path,
                layout,
                args.assignment,
                columns=columns if layout != "wide" else None,
                missing=args.missing_work,
                new_column=args.new_column,
            )
            print(f"wrote {path}")
            for note in export.notes:
                print(f"  {note}")
        for layout in args.feedback_zip or []:
            _feedback_zip(book, args, layout, sorted({r.assignment for r in rows}))
    return 0


def _columns(args: argparse.Namespace) -> dict[str, str]:
    """The LMS columns `--columns FILE` and `--column A=COLUMN` give: assignment -> column."""
    columns = {}
    if args.columns is not None:
        import csv

        with open(args.columns, encoding="utf-8-sig", newline="") as f:
            for line in csv.reader(f):
                if len(line) >= 2 and line[0].strip() and line[0].strip().casefold() != "assignment":
                    columns[line[0].strip()] = line[1].strip()
    for given in args.column:
        name, sep, column = given.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise ValueError(
                f"--column takes ASSIGNMENT=COLUMN, e.g. '04_word_vectors=Word Vectors (12345)'; got {given!r}"
            )
        columns[name.strip()] = column.strip()
    return columns


def _feedback_zip(book, args: argparse.Namespace, layout: str, assignments: list[str]) -> None:
    """`--feedback-zip LAYOUT`: the zip of one assignment's feedback that the LMS takes back."""
    from .feedback_zip import write_feedback_zip

    chosen = args.assignment or (assignments if len(assignments) == 1 else [])
    if len(chosen) != 1:
        raise ValueError(
            "a feedback zip goes back to one assignment in the LMS: name it with --assignment "
            f"(the gradebook has {', '.join(assignments) or 'none'})"
        )
    path, made = write_feedback_zip(book, args.out, layout, chosen[0])
    lms = layout.capitalize()
    where = "Re-Upload Submissions" if layout == "canvas" else "Upload multiple feedback files in a zip"
    print(f"wrote {path}: {len(made.files)} student(s)' feedback, for {lms}'s {where} on {chosen[0]}")
    by_reason: dict[str, list[str]] = {}
    for student, why in made.left_out.items():
        by_reason.setdefault(why.split(" (")[0], []).append(student)
    for why, who in by_reason.items():
        print(f"  left out ({why}): {len(who)}: {', '.join(who[:10])}" + (" ..." if len(who) > 10 else ""))


def report_cmd(args: argparse.Namespace) -> int:
    """`course report`: see course_grader.report."""
    from course_lib.runner.text import inert

    from .report import write_report

    with closing(_gradebook(args.out)) as book:
        text, figures = write_report(book, args.out, args.assignment)
    print(inert(text, None))  # what a learner wrote (a hint quoted) never steers the terminal
    print(f"wrote {args.out / 'report.md'}" + "".join(f", {f}" for f in figures))
    return 0


def unpack_cmd(args: argparse.Namespace) -> int:
    """`course unpack ZIP --assignment A`: see course_grader.lms. The roster is the one given (then kept in
    the gradebook at --out), else the one the gradebook keeps; so are the LMS ids mapped with --map, and
    every decision is recorded there."""
    from .gradebook import open_gradebook
    from .lms import read_canvas_times, unpack

    roster, recorded = _unpack_roster(args)
    given = _lms_map(args.map)
    times = read_canvas_times(args.canvas_times) if args.canvas_times is not None else None
    report = unpack(
        args.zip,
        args.to,
        assignment=args.assignment,
        roster=roster,
        layout=args.layout,
        overwrite=args.overwrite,
        tz=args.tz,
        max_bytes=int(args.max_size * 2**20),
        output_layout=args.output_layout,
        canvas_times=times,
        lms_map={**recorded, "": given},
    )
    book_path = args.out / "gradebook.db"
    with closing(open_gradebook(args.out)) as book:
        if args.roster is not None:
            book.set_roster(roster)
        for key, (student, named) in report.mapped.items():
            book.map_lms_id(report.layout, key, student, named)
        for sid, entry in report.entries.items():
            book.record_unpacked(
                sid,
                report.assignment,
                entry,
                report.sha256.get(sid),
                sid in report.late,
                report.decisions.get(sid, []),
                report.skipped.get(sid),
                report.when.get(sid),
            )
    print(report.summary())
    used = {named for _, named in report.mapped.values()}
    for name in given:
        if name not in used:
            print(f"warning: --map {name}={given[name]}: no student of this zip is {name!r}; nothing recorded for it")
    if report.mapped:
        shown = ", ".join(f"{named} = {student}" for student, named in report.mapped.values())
        print(f"mapped by hand (kept in {book_path}, used at every later unpacking): {shown}")
    print(f"recorded in {book_path}: what was decided for each student reaches their feedback when you grade")
    return 0


def _unpack_roster(args: argparse.Namespace):
    """(The roster to match the zip's students to, the LMS ids mapped before: layout -> {LMS key: student}):
    --roster, else the gradebook's."""
    from .gradebook import open_gradebook
    from .roster import read_roster

    roster, recorded, book_path = None, {}, args.out / "gradebook.db"
    if args.roster is not None:
        roster, warnings = read_roster(args.roster, args.id_column)
        for w in warnings:
            print(f"warning: {w}")
        print(f"roster: {roster.describe()}")
    if book_path.is_file():
        with closing(open_gradebook(args.out)) as book:
            recorded = {layout: book.lms_map(layout) for layout in ("canvas", "moodle", "plain")}
            if roster is None:
                roster = book.roster()
                if roster is not None:
                    print(f"roster: the one kept in {book_path} ({len(roster.active)} students)")
    if roster is None:
        print(
            f"warning: no roster (none given with --roster, none kept in {book_path}): each student's folder is "
            "named from the LMS's name and id. Pass --roster FILE once (your LMS's export works as it is); "
            "it is kept."
        )
    return roster, recorded


def _lms_map(given: list[str]) -> dict[str, str]:
    """`--map LMS=ID` items: LMS key (or the id a student would be written as) -> the roster's student id."""
    found = {}
    for item in given:
        left, sep, right = item.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise ValueError(f"--map takes LMS=ID, e.g. --map 'Anh_Nguyen_731006=s123'; got {item!r}")
        found[left.strip()] = right.strip()
    return found


def roster_cmd(args: argparse.Namespace) -> int:
    """`course roster import FILE | list | drop ID | restore ID`: the class list kept in the gradebook."""
    from .export import write_exports
    from .gradebook import open_gradebook
    from .roster import read_roster

    if args.action == "import":
        if not args.what:
            raise ValueError("name the roster file: course roster import roster.csv --out grades")
        roster, warnings = read_roster(Path(args.what), args.id_column)
        for w in warnings:
            print(f"warning: {w}")
        with closing(open_gradebook(args.out)) as book:
            book.set_roster(roster)
            roster = book.roster()
        print(roster.describe())
        for s in roster.students:
            if s.status != "active":
                print(f"  {s.label}: {s.status}")
        print(f"kept in {args.out / 'gradebook.db'}; `course unpack` and `course grade` use it from now on")
        return 0
    with closing(_gradebook(args.out)) as book:
        roster = book.roster()
        if roster is None:
            raise ValueError(
                f"no roster is kept in {args.out / 'gradebook.db'}: course roster import FILE --out {args.out}"
            )
        if args.action == "list":
            print(roster.describe())
            for s in roster.students:
                print(f"  {s.id:<24} {s.name:<32} {s.email:<32} {s.status}")
            return 0
        if not args.what:
            raise ValueError(f"name the student: course roster {args.action} ID --out {args.out}")
        book.set_status(args.what, "dropped" if args.action == "drop" else "active")
        label = roster.label(args.what)
        now = "dropped (no missing-work rows, nothing in the LMS files)" if args.action == "drop" else "active"
        print(f"{label}: {now}")
        if book.rows():
            write_exports(book, args.out)
    return 0


def mark_cmd(args: argparse.Namespace) -> int:
    """`course mark`: see course_grader.marking."""
    from .marking import progress_lines, serve

    with closing(_gradebook(args.out)) as book:
        lines = progress_lines(book)
    if args.list:
        print("\n".join(lines) or "No manually graded answers in the gradebook.")
        return 0
    return serve(
        args.out,
        graders=args.grader,
        port=args.port,
        sections=args.section,
        column=args.section_column,
        page_size=args.page_size,
    )
