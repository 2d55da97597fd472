"""The `course` command.

    course lab        start JupyterLab on the welcome lesson
    course doctor     report Python, torch, numpy, the device the course will use, and widget support
    course build      write exercises/ from solutions/        (see course_lib.grading)
    course check NB   run your exercise notebook and show which exercises pass
    course grade DIR  grade a folder of submissions
"""
from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
    return True, f"ipywidgets {ipywidgets_version}, lab extension jupyterlab-manager {found[0]} (jupyterlab_widgets {lab_widgets})"


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
    width = max(len(k) for k in report)
    print("From One-Hot to Transformer: environment report")
    for key, value in report.items():
        print(f"  {key:<{width}}  {value}")
    healthy = ok_widgets and report["course device"] != "none" and report["jupyterlab"] != "not installed"
    print("All set." if healthy else "Something needs attention (see above).")
    return 0 if healthy else 1


def lab(extra: list[str]) -> int:
    """Start JupyterLab at the repository root with the welcome lesson open."""
    cmd = [sys.executable, "-m", "jupyterlab", "notebooks/00_welcome.ipynb", *extra]
    return subprocess.call(cmd, cwd=REPO)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description="From One-Hot to Transformer: course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="report the environment the course runs in")
    p_lab = sub.add_parser("lab", help="start JupyterLab on the welcome lesson")
    p_lab.add_argument("extra", nargs=argparse.REMAINDER, help="extra arguments for jupyter lab")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "doctor":
        return doctor()
    if args.command == "lab":
        return lab(args.extra)
    raise AssertionError(f"unhandled command {args.command!r}")


if __name__ == "__main__":
    sys.exit(main())
