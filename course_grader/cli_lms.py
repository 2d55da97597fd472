"""`course unpack`, `course roster` and `course export`: the round trip with a learning management system, from
its download of the submissions and its class list to the files it takes back (grades, feedback). Each command's
options (`unpack_parser`, ...) and what it does (`unpack_cmd`, ...), which imports the step it drives when it runs
(`lms`, `roster`, `export`, `feedback_zip`).
"""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path

from .cli_common import OUT_HELP, add_max_size, existing_gradebook, explained


def unpack_parser(sub) -> None:
    """`course unpack ZIP --assignment A`: see course_grader.lms."""
    p = sub.add_parser("unpack", help="unpack an LMS download (Canvas, Moodle) into SUBMISSIONS/<student_id>/")
    p.add_argument("zip", type=Path)
    p.add_argument("--assignment", required=True, help="the assignment the zip holds, e.g. 06_attention")
    p.add_argument(
        "--to", type=Path, default=Path("submissions"), help="the submissions folder (default: submissions/)"
    )
    p.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="map LMS names and ids to your student ids (kept in the gradebook: later runs need not repeat it)",
    )
    p.add_argument("--id-column", default=None, help="the --roster column that holds the student ids")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("grading-output"),
        help="the gradebook's folder, where the roster is kept and the unpacking is recorded "
        "(default: grading-output/)",
    )
    p.add_argument(
        "--layout",
        choices=("auto", "canvas", "moodle", "plain"),
        default="auto",
        help="how the zip is laid out (default: detected)",
    )
    p.add_argument(
        "--output-layout",
        choices=("course", "nbgrader"),
        default="course",
        help="course: TO/<id>/A.ipynb (default); nbgrader: TO/<id>/A/A.ipynb with timestamp.txt, "
        "nbgrader's submitted/ layout",
    )
    add_max_size(p)
    p.add_argument(
        "--canvas-times",
        type=Path,
        default=None,
        metavar="JSON",
        help="submission times from Canvas's submissions API (saved as JSON), for late penalties",
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="LMS=ID",
        help="this download's student LMS (the id a warning said it was written as, e.g. Anh_Nguyen_731006, or the "
        "LMS's own number) is the roster's student ID; repeatable, kept in the gradebook for later unpackings",
    )
    p.add_argument("--overwrite", action="store_true", help="replace notebooks already unpacked")
    p.add_argument(
        "--tz", default=None, help="the time zone of the zip's times (e.g. Europe/Berlin; default: this machine's)"
    )
    p.set_defaults(func=explained(unpack_cmd))


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


def roster_parser(sub) -> None:
    """`course roster import FILE | list | drop ID | restore ID`."""
    p = sub.add_parser("roster", help="keep the class list in the gradebook: import an LMS export, drop a student")
    p.add_argument(
        "action", choices=("import", "list", "drop", "restore"), help="import FILE | list | drop ID | restore ID"
    )
    p.add_argument("what", nargs="?", help="the roster file (import) or the student's id (drop, restore)")
    p.add_argument("--id-column", default=None, help="the column that holds the student ids (import)")
    p.add_argument("--out", type=Path, default=Path("grading-output"), help=OUT_HELP)
    p.set_defaults(func=explained(roster_cmd))


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
    with closing(existing_gradebook(args.out)) as book:
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


def export_parser(sub) -> None:
    """`course export`: see course_grader.export and course_grader.feedback_zip."""
    p = sub.add_parser(
        "export",
        help="rewrite grades.csv, grades.json and feedback/ from the gradebook; "
        "--lms writes a gradebook file for Canvas or Moodle",
    )
    p.add_argument(
        "--lms",
        choices=("canvas", "moodle", "wide"),
        action="append",
        help="also write canvas.csv / moodle.csv / wide.csv (one column per assignment); repeatable",
    )
    p.add_argument("--assignment", action="append", help="the LMS file's columns, in this order (default: all)")
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="ASSIGNMENT=COLUMN",
        help="write an assignment into the LMS's existing column, e.g. "
        "'04_word_vectors=Word Vectors (12345)'; repeatable, remembered for later exports",
    )
    p.add_argument(
        "--columns",
        type=Path,
        default=None,
        metavar="FILE",
        help="a CSV file of assignment,column lines (the same as --column, for every assignment)",
    )
    p.add_argument(
        "--new-column",
        action="store_true",
        help="let an assignment that fits none of the LMS's columns (in the roster's LMS export) become a new "
        "assignment in the LMS (without it, the export stops and names the columns still unfilled)",
    )
    p.add_argument(
        "--feedback-zip",
        choices=("canvas", "moodle"),
        action="append",
        help="also write feedback-LMS-A.zip: every student's feedback on the --assignment, named as the LMS's "
        "download named their file, for Canvas's Re-Upload Submissions or Moodle's feedback files zip",
    )
    p.add_argument(
        "--missing",
        dest="missing_work",
        choices=("empty", "zero"),
        default="empty",
        help="work never handed in: an empty cell (default; the LMS keeps what it has) or 0",
    )
    p.add_argument("--out", type=Path, default=Path("grading-output"), help=OUT_HELP)
    p.set_defaults(func=explained(export_cmd))


def export_cmd(args: argparse.Namespace) -> int:
    """`course export [--lms canvas|moodle] [--feedback-zip canvas|moodle]`: see course_grader.export and
    course_grader.feedback_zip."""
    from .export import write_exports, write_lms

    columns = _columns(args)
    with closing(existing_gradebook(args.out)) as book:
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
