"""The `course` command.

    course lab        start JupyterLab on the welcome lesson
    course doctor     report Python, torch, numpy, the device the course will use, and widget support
    course check NB   run your exercise notebook and show which exercises pass
    course progress   every exercise set at once: what passes, points, the last check (--json)
    course colab      write the Colab setup cell into every notebook (--repository URL: where Colab installs from)

and the teacher's commands, from the grader (`course_grader`, a second package installed by teachers):
build, new, seal, roster, unpack, grade, merge, gradescope, mark, deadline, adjust, export, report. The grader
registers them through the entry point group `course_lib.commands` (a function that adds its subparsers, each
with a `func` default); without the grader, `course --help` and any command but a learner's say how to
install it.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LABCONFIG = Path(__file__).resolve().parent / "labconfig"  # JupyterLab settings for `course lab` (see its README)
COMMANDS_GROUP = "course_lib.commands"  # where the grader's package names its `register(subparsers)`
DOCTOR_GROUP = "course_lib.doctor"  # functions that return more (name, state) lines for `course doctor`
INSTALL_GRADER = (
    "the teacher's commands (build, grade, mark, ...) come with the grader, which {state}: "
    "run `make install` in the course's folder, or `pip install -e ./course_grader` there "
    "(see docs/teaching.md)"
)
LEARNER_COMMANDS = ("lab", "doctor", "check", "colab")


def _widgets_status() -> tuple[bool, str]:
    """Whether ipywidgets will render in JupyterLab: the Python package and the lab extension."""
    try:
        ipywidgets_version = metadata.version("ipywidgets")
    except metadata.PackageNotFoundError:
        return False, "ipywidgets is not installed (pip install ipywidgets)"
    try:
        lab_widgets = metadata.version("jupyterlab_widgets")
    except metadata.PackageNotFoundError:
        return False, f"ipywidgets {ipywidgets_version} is installed but jupyterlab_widgets (the lab extension) is not"
    found = []
    try:
        from jupyter_core.paths import jupyter_path

        for root in jupyter_path("labextensions"):
            pkg = Path(root) / "@jupyter-widgets" / "jupyterlab-manager" / "package.json"
            if pkg.is_file():
                found.append(json.loads(pkg.read_text())["version"])
    except Exception as err:  # a broken Jupyter install should not crash the doctor
        return False, f"could not look for JupyterLab extensions: {err}"
    if not found:
        return False, f"ipywidgets {ipywidgets_version}: JupyterLab's widget manager extension was not found"
    major = int(ipywidgets_version.split(".")[0])
    if major < 8:
        return False, f"ipywidgets {ipywidgets_version} is too old for JupyterLab 4 (need 8 or newer)"
    return True, (
        f"ipywidgets {ipywidgets_version}, lab extension jupyterlab-manager {found[0]} "
        f"(jupyterlab_widgets {lab_widgets})"
    )


def doctor() -> int:
    """Print a short environment report; exit status 1 if something the course needs is missing."""
    from course_lib.device import environment_report

    report = environment_report()
    try:
        report["jupyterlab"] = metadata.version("jupyterlab")
    except metadata.PackageNotFoundError:
        report["jupyterlab"] = "not installed"
    ok_widgets, widgets = _widgets_status()
    report["widgets"] = ("ok: " if ok_widgets else "PROBLEM: ") + widgets
    # Installed packages add lines of their own (the grader: its sandbox and the budgets in force).
    for entry in metadata.entry_points(group=DOCTOR_GROUP):
        try:
            report.update(dict(entry.load()()))
        except Exception as err:  # noqa: BLE001 - a broken grader must not take the learner's report with it
            report[entry.name] = f"could not report ({type(err).__name__}: {err})"
    width = max(len(k) for k in report)
    print("From One-Hot to Transformer: environment report")
    for key, value in report.items():
        print(f"  {key:<{width}}  {value}")
    healthy = ok_widgets and report["course device"] != "none" and report["jupyterlab"] != "not installed"
    print("All set." if healthy else "Something needs attention (see above).")
    return 0 if healthy else 1


def lab(extra: list[str], teacher: bool = False) -> int:
    """Replace this process with JupyterLab, rooted at the repository, the welcome lesson open.

    A learner's JupyterLab starts clean: no news pop-up and no update check (course_lib/labconfig/settings),
    and without nbgrader's menus, "Validate" button, assignment toolbar and formgrader, which are
    teacher tools (the Jupyter config folder course_lib/labconfig/learner turns them off for this
    JupyterLab only). `teacher=True` (`course lab --teacher`) keeps nbgrader. Token authentication is
    JupyterLab's default and stays on.

    `exec` rather than a child process, so Ctrl-C and signals reach Jupyter itself.
    """
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={REPO}",  # the whole course: notebooks/, exercises/, solutions/
        "--LabApp.default_url=/lab/tree/notebooks/00_welcome.ipynb",
        f"--LabApp.app_settings_dir={LABCONFIG / 'settings'}",
        *extra,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        cmd.append("--allow-root")  # containers and Colab-like machines run as root; Jupyter refuses otherwise
    if not teacher:
        # Before the environment's own config (where nbgrader enables itself), after the user's ~/.jupyter.
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
            [str(LABCONFIG / "learner"), *filter(None, os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
        )
    os.chdir(REPO)
    os.execv(sys.executable, cmd)
    return 1  # not reached


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description="From One-Hot to Transformer: course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="report the environment the course runs in").set_defaults(func=lambda args: doctor())
    p_lab = sub.add_parser("lab", help="start JupyterLab on the welcome lesson (other options go to jupyter lab)")
    p_lab.add_argument(
        "--teacher",
        action="store_true",
        help="keep nbgrader's teacher tools (menus, Validate, Create Assignment, Formgrader)",
    )

    p_check = sub.add_parser("check", help="run your exercise notebook and show which exercises pass")
    p_check.add_argument("notebook", type=Path)
    p_check.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="CPU seconds per cell (default: the exercise set's own, 60 unless it says otherwise)",
    )
    p_check.set_defaults(func=check_cmd)

    p_progress = sub.add_parser(
        "progress", help="every exercise set in one table: which exercises pass, points, the last check"
    )
    p_progress.add_argument(
        "folder", type=Path, nargs="?", default=None, help="your exercise notebooks (default: exercises/)"
    )
    p_progress.add_argument("--json", action="store_true", help="print the table as JSON")
    p_progress.add_argument("--jobs", type=int, default=2, help="sets checked at the same time (default 2)")
    p_progress.set_defaults(func=progress_cmd)

    p_colab = sub.add_parser(
        "colab", help="write the Colab setup cell (first code cell) into every lesson and solution notebook"
    )
    p_colab.add_argument(
        "--repository",
        default=None,
        help="the course's git address that Colab installs course_lib from (default: keep the one written in)",
    )
    p_colab.set_defaults(func=colab_cmd)

    added, state = _grader_commands(sub)  # the teacher's commands, as the grader's entry point names them
    if not added:
        parser.epilog = INSTALL_GRADER.format(state=state)
    return parser


def _grader_commands(sub) -> tuple[set[str], str]:
    """Let each installed package of the `course_lib.commands` group add its subcommands (the grader's);
    the names added, and the grader's state when it added none ("is not installed", or why it failed)."""
    added, state = set(), "is not installed"
    for entry in metadata.entry_points(group=COMMANDS_GROUP):
        try:
            added.update(entry.load()(sub))
        except Exception as err:  # noqa: BLE001 - a broken grader must not take `course check` with it
            state = f"is installed but failed to load ({type(err).__name__}: {err})"
    return added, state


def check_cmd(args: argparse.Namespace) -> int:
    """`course check NB`: see course_lib.runner.check."""
    from course_lib.runner.check import check_notebook
    from course_lib.runner.feedback import print_table
    from course_lib.runner.notebook import NotebookError
    from course_lib.runner.process import Limits

    limits = None  # the set's own budgets
    if args.timeout is not None:
        limits = Limits(cell_cpu_s=args.timeout, total_cpu_s=max(600, 20 * args.timeout), memory_mb=0)
    try:
        checked = check_notebook(args.notebook, limits)
    except NotebookError as err:
        print(f"ERROR: {err}")
        return 2
    return print_table(args.notebook, checked.rows, checked.skipped, checked.notes)


def progress_cmd(args: argparse.Namespace) -> int:
    """`course progress [FOLDER] [--json]`: see course_lib.progress."""
    from course_lib import progress
    from course_lib.runner.notebook import NotebookError

    folder = args.folder or progress.default_folder(REPO)
    try:
        sets = progress.progress(folder, jobs=args.jobs, bar=not args.json or sys.stderr.isatty())
    except NotebookError as err:
        print(f"ERROR: {err}")
        return 2
    if args.json:
        print(progress.as_json(folder, sets))
    else:
        progress.print_progress(folder, sets)
    return 0


def colab_cmd(args: argparse.Namespace) -> int:
    """`course colab [--repository URL]`: see course_lib.colab."""
    from course_lib import colab

    changed = [p for p in colab.notebooks(REPO) if colab.set_setup_cell(p, args.repository)]
    for path in changed:
        print(f"updated {path.relative_to(REPO)}")
    print(f"{len(changed)} notebook(s) updated; run `course build` to carry the cell into exercises/.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    words = [a for a in argv if not a.startswith("-")]
    if parser.epilog and words and words[0] not in LEARNER_COMMANDS:  # no grader: a teacher's command, say how
        print(f"`course {words[0]}`: not a learner's command; {parser.epilog}", file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":  # everything we do not know is for jupyter lab (--port, --no-browser, ...)
        return lab(extra, teacher=args.teacher)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
