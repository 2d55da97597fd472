"""`course deadline`, `course adjust` and `course mark`: what a teacher decides beside the tests (deadlines and
extensions, points added or taken with a reason, the marks of written answers). Each command's options
(`deadline_parser`, ...) and what it does (`deadline_cmd`, ...), which imports the step it drives when it runs
(`gradebook`, `deadlines`, `marking`).
"""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path

from .cli_common import OUT_HELP, existing_gradebook, explained


def deadline_parser(sub) -> None:
    """`course deadline ASSIGNMENT DUE`, `--student ID` (an extension), `--list`."""
    p = sub.add_parser("deadline", help="set an assignment's deadline and late penalty (applied in every export)")
    p.add_argument("assignment", nargs="?", help="e.g. 06_attention")
    p.add_argument("due", nargs="?", help="e.g. '2026-12-01 23:59' (local time) or 2026-12-01T23:59+01:00")
    p.add_argument(
        "--penalty",
        type=float,
        default=None,
        help="percent of the assignment's points lost per started day late (default 10)",
    )
    p.add_argument("--max", type=float, default=None, help="the most a late submission loses, in percent (default 100)")
    p.add_argument("--grace", type=float, default=None, help="minutes of lateness forgiven (default 0)")
    p.add_argument(
        "--student",
        metavar="ID",
        help="give this student their own deadline for the assignment (an extension): its late penalty counts "
        "from DUE, and the feedback says so",
    )
    p.add_argument(
        "--remove", action="store_true", help="with --student: take the student's extension away (kept on record)"
    )
    p.add_argument(
        "--grader", default="", help="with --student: who gives (or removes) the extension (default: your login name)"
    )
    p.add_argument("--list", action="store_true", help="show the deadlines and the extensions")
    p.add_argument("--out", type=Path, default=Path("grading-output"), help=OUT_HELP)
    p.set_defaults(func=explained(deadline_cmd))


def deadline_cmd(args: argparse.Namespace) -> int:
    """`course deadline ASSIGNMENT DUE --penalty P`, `--student ID` (an extension), `--list`: see
    course_grader.gradebook."""
    from .export import write_exports

    with closing(existing_gradebook(args.out)) as book:
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


def adjust_parser(sub) -> None:
    """`course adjust STUDENT ASSIGNMENT POINTS --reason TEXT`, `--list`, `--remove N`."""
    p = sub.add_parser("adjust", help="add points to (or take them from) one student's assignment, with a reason")
    p.add_argument("student", nargs="?")
    p.add_argument("assignment", nargs="?")
    p.add_argument("points", nargs="?", type=float, help="e.g. 2 or -1.5")
    p.add_argument(
        "--reason", default="", help="shown to the student in the feedback (with --remove: why, kept on record)"
    )
    p.add_argument(
        "--grader", default="", help="who makes (or, with --remove, removes) the adjustment (default: your login name)"
    )
    p.add_argument(
        "--cap", action="store_true", help="the final score stays at most the assignment's maximum (no extra credit)"
    )
    p.add_argument("--list", action="store_true", help="show every adjustment that counts, numbered")
    p.add_argument(
        "--removed", action="store_true", help="with --list: the removed ones too, with who removed them and when"
    )
    p.add_argument(
        "--remove",
        type=int,
        metavar="N",
        help="stop counting adjustment N (it stays on record with who removed it, when and --reason)",
    )
    p.add_argument("--out", type=Path, default=Path("grading-output"), help=OUT_HELP)
    p.set_defaults(func=explained(adjust_cmd))


def adjust_cmd(args: argparse.Namespace) -> int:
    """`course adjust STUDENT ASSIGNMENT POINTS --reason TEXT`: see course_grader.gradebook."""
    from course_lib.runner.feedback import num

    from .export import write_exports

    args.list = args.list or args.removed
    with closing(existing_gradebook(args.out)) as book:
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


def mark_parser(sub) -> None:
    """`course mark`: see course_grader.marking."""
    p = sub.add_parser("mark", help="mark written answers in your browser: one question, the whole class")
    p.add_argument("--out", type=Path, default=Path("grading-output"), help=OUT_HELP)
    p.add_argument(
        "--grader",
        action="append",
        default=[],
        metavar="NAME",
        help="a grader (repeat it for each teaching assistant): each gets an address of their own, and the marks "
        "saved from it are recorded under NAME (default: one address, under your login name)",
    )
    p.add_argument(
        "--section",
        action=_GraderSection,
        default={},
        metavar="SECTION",
        help="after a --grader: the section whose answers they mark (repeatable); their address shows only its "
        "students, and a save for anyone else is refused (default: every section)",
    )
    p.add_argument(
        "--section-column",
        default="Section",
        metavar="COLUMN",
        help="the roster's column that holds each student's section (default: Section, as Canvas exports it)",
    )
    p.add_argument("--page-size", type=int, default=25, help="answers listed on a page (default 25)")
    p.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    p.add_argument("--list", action="store_true", help="print how many answers are marked, and stop")
    p.set_defaults(func=explained(mark_cmd))


def mark_cmd(args: argparse.Namespace) -> int:
    """`course mark`: see course_grader.marking."""
    from .marking import progress_lines, serve

    with closing(existing_gradebook(args.out)) as book:
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


class _GraderSection(argparse.Action):
    """`--section A` gives the --grader named just before it section A: {grader: [sections]}."""

    def __call__(self, parser, namespace, value, option_string=None):
        graders = getattr(namespace, "grader", None) or []
        if not graders:
            parser.error(f"--section {value} names no grader: put it after the --grader it is for")
        given = dict(getattr(namespace, self.dest) or {})
        given[graders[-1]] = [*given.get(graders[-1], []), value.strip()]
        setattr(namespace, self.dest, given)
