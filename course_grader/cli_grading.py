"""`course grade`, `course report`, `course gradescope` and `course merge`: a class graded here, in parts, or on
Gradescope, and summed up. Each command's options (`grade_parser`, ...) and what it does (`grade_cmd`, ...),
which imports the step it drives when it runs (`batch`, `report`, `gradescope`, `merge`).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path

from .cli_common import OUT_HELP, add_max_size, default_dir, existing_gradebook, explained


def grade_parser(sub) -> None:
    """`course grade SUBMISSIONS_DIR`: see course_grader.batch."""
    p = sub.add_parser("grade", help="grade SUBMISSIONS_DIR/<student_id>/NN_name.ipynb into the gradebook")
    p.add_argument("submissions", type=Path)
    p.add_argument("--solutions", type=Path, default=None, help="solution notebooks (default: solutions/)")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("grading-output"),
        help="the gradebook's folder: gradebook.db and its exports (default: grading-output/)",
    )
    p.add_argument(
        "--assignment",
        action="append",
        help="grade only this assignment (e.g. 06_attention); repeatable. Students without it get a "
        "'not submitted' row only for assignments named here",
    )
    p.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="CSV of the class (student_id,name,email,...); kept in the gradebook for later runs",
    )
    p.add_argument("--student", action="append", help="grade only this student (regrade one); repeatable")
    p.add_argument(
        "--new-solutions",
        action="store_true",
        help="accept solutions that differ from those that graded this assignment before",
    )
    _run_options(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="grade, then show whose scores would change, old -> new, per exercise; write nothing",
    )
    p.add_argument(
        "--reason",
        default="",
        help="why you grade again (e.g. 'a hidden test of exercise 5 was too strict'): kept with the "
        "run and shown to every student whose work it regrades",
    )
    add_max_size(p)
    p.add_argument(
        "--hide-hidden-inputs",
        action="store_true",
        help="a failed hidden test says so without the check's message, which may show its inputs "
        "(for hidden tests you reuse)",
    )
    p.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="grade part K of N of the class (by a hash of the student id: the same on every machine), one "
        "part per job of a job array; `course merge` joins the parts' gradebooks",
    )
    p.add_argument(
        "--id-column", default=None, help="the --roster column that holds the student ids (default: see the guide)"
    )
    p.set_defaults(func=grade_cmd)


def _run_options(p: argparse.ArgumentParser) -> None:
    """`course grade`'s options for how each submission runs: in parallel, its limits, its sandbox."""
    p.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel (default 2)")
    p.add_argument(
        "--timeout",
        "--cpu-limit",
        dest="timeout",
        type=float,
        default=None,
        help="CPU seconds per cell, counted over the submission's own processes (default: each exercise set's "
        "own budget, 60 unless the set says otherwise; a wall-clock backstop 5 times longer stops a kernel "
        "that only waits)",
    )
    p.add_argument(
        "--total-timeout",
        "--total-cpu-limit",
        dest="total_timeout",
        type=float,
        default=None,
        help="CPU seconds per submission (default: each exercise set's own, 600 unless the set says otherwise)",
    )
    p.add_argument("--memory", type=int, default=2048, help="MB a submission may allocate (default 2048)")
    p.add_argument("--max-output", type=int, default=1_000_000, help="bytes of output per cell (default 1000000)")
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade even where the bubblewrap sandbox is not available (UNSAFE for untrusted submissions)",
    )


def grade_cmd(args: argparse.Namespace) -> int:
    """`course grade SUBMISSIONS_DIR`: see course_grader.grade."""
    from course_lib.runner.process import Limits

    from .batch import NO_SANDBOX_WARNING, GradeOptions, grade_all
    from .roster import RosterError

    solutions = default_dir(args.solutions, "solutions")
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


def report_parser(sub) -> None:
    """`course report`: see course_grader.report."""
    p = sub.add_parser("report", help="per-exercise pass rates and the most common hints, as a table and figures")
    p.add_argument("--assignment", action="append", help="only this assignment; repeatable")
    p.add_argument("--out", type=Path, default=Path("grading-output"), help=OUT_HELP)
    p.set_defaults(func=explained(report_cmd))


def report_cmd(args: argparse.Namespace) -> int:
    """`course report`: see course_grader.report."""
    from course_lib.runner.text import inert

    from .report import write_report

    with closing(existing_gradebook(args.out)) as book:
        text, figures = write_report(book, args.out, args.assignment)
    print(inert(text, None))  # what a learner wrote (a hint quoted) never steers the terminal
    print(f"wrote {args.out / 'report.md'}" + "".join(f", {f}" for f in figures))
    return 0


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
    p.set_defaults(func=explained(gradescope_cmd))


def gradescope_cmd(args: argparse.Namespace) -> int:
    """`course gradescope build | test | import`: see course_grader.gradescope, gradescope_run and gradescope_scores."""
    from course_lib.runner.feedback import num

    from . import gradescope, gradescope_scores

    if args.gradescope_action == "build":
        limits = {"cell_cpu_s": args.timeout, "total_cpu_s": args.total_timeout, "memory_mb": args.memory}
        report = gradescope.build_autograder(
            args.assignment,
            default_dir(args.solutions, "solutions"),
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
    p.set_defaults(func=explained(merge_cmd))


def merge_cmd(args: argparse.Namespace) -> int:
    """`course merge OUT1 OUT2 ... --out OUT`: see course_grader.merge."""
    from .merge import merge_gradebooks

    report = merge_gradebooks(args.parts, args.out, command=" ".join(["course", *sys.argv[1:]]))
    print("\n".join(report.lines()))
    print(f"rewrote {args.out / 'grades.csv'}, {args.out / 'grades.json'} and {args.out / 'feedback'}/")
    return 0
