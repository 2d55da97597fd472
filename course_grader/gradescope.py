"""A Gradescope autograder from the same exercise source: `course gradescope build | test | import`.

Gradescope runs an autograder as a zip with two scripts at its root (its "autograder specifications",
https://gradescope-autograders.readthedocs.io/en/latest/specs/):

- `setup.sh` runs once, as root, when Gradescope builds the autograder's image (Ubuntu, with a network);
- `run_autograder` runs for every submission, as root, in `/autograder`: the zip's files are in
  `/autograder/source/`, the student's upload in `/autograder/submission/`, and what it writes to
  `/autograder/results/results.json` is the score and the feedback the student sees.

`build_autograder` writes that zip from one solution notebook (`course gradescope build`):

    setup.sh             installs Python 3.11+, bubblewrap, torch as PyTorch's CPU wheel, then the course
    run_autograder       `python -m course_grader.gradescope_run run --root /autograder`
    autograder.json      the assignment and the teacher's choices (visibility of hidden tests, time limit)
    constraints.txt      the versions the course is tested with
    course/              the course's two packages as source (course_lib, course_grader), from this checkout
    solutions/A.ipynb    the one solution notebook (its hidden tests included)
    checks/lessonNN.py   a teacher's own set: its checks module (`course new --checks DIR`)

and nothing else: no other set's solutions, no gradebook, no submissions.

`run_autograder` grades the upload with the function `course grade` uses, in the sandbox where the
container lets bubblewrap start, and writes results.json as it goes: see `gradescope_run`.

`try_autograder` (`course gradescope test`) runs the zip's `run_autograder` in a folder laid out like
`/autograder`, with the zip's own copy of the course's packages, so that a teacher can try a zip before
uploading it. `gradescope_scores.import_scores` (`course gradescope import`) reads Gradescope's score
export back into the gradebook, so that `course report` and the LMS files keep working.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import course_lib
from course_lib.runner.assignment import Assignment
from course_lib.runner.feedback import num
from course_lib.runner.notebook import read_notebook, validate_solution_notebook

REPO = Path(course_lib.__file__).resolve().parents[1]  # the course's folder: its pyproject.toml and packages
CONFIG = "autograder.json"
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")  # Gradescope's, for tests and output
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every file's date in the zip: the same zip from the same files
SKIPPED = ("__pycache__", ".ipynb_checkpoints", ".pytest_cache")

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu, with a network).
# Written by `course gradescope build`; the autograder's settings should give it 4 GB of memory or more.
set -euxo pipefail
SOURCE=/autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update
# bubblewrap: the grading sandbox, used wherever the container lets it start (run_autograder checks).
apt-get install -y --no-install-recommends bubblewrap ca-certificates python3 python3-venv
# The course needs Python 3.11 or later: the image's own, else Ubuntu's python3.11 package.
PY=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        PY="$(command -v "$candidate")"
        break
    fi
done
if [ -z "$PY" ]; then
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
    PY=/usr/bin/python3.11
fi
# A virtual environment outside /autograder, readable by the unprivileged user that runs learners' code.
"$PY" -m venv /opt/course-venv
/opt/course-venv/bin/python -m pip install --quiet --upgrade "pip>=24"
# torch as PyTorch's CPU wheel, from its own index (on Linux the default one is a multi-GB CUDA build),
# then the course's two packages with the versions it is tested with.
/opt/course-venv/bin/python -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu "torch=={torch}"
/opt/course-venv/bin/python -m pip install --quiet -c "$SOURCE/constraints.txt" \\
    "$SOURCE/course" "$SOURCE/course/course_grader"
chmod -R a+rX /opt/course-venv
/opt/course-venv/bin/python -m course_grader.gradescope_run check --root /autograder
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this as root, in /autograder, for every submission. `course gradescope test` runs it in
# a folder laid out the same way: COURSE_AUTOGRADER_ROOT and COURSE_AUTOGRADER_PYTHON say where.
ROOT="${COURSE_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${COURSE_AUTOGRADER_PYTHON:-/opt/course-venv/bin/python}"
exec "$PYTHON" -m course_grader.gradescope_run run --root "$ROOT"
"""


# --- the zip ----------------------------------------------------------------------------------------------


@dataclass
class BuildReport:
    path: Path
    files: list[str]
    config: dict
    notes: list[str] = field(default_factory=list)  # what to set on Gradescope's side


def _package_files(folder: Path, prefix: str) -> dict[str, bytes]:
    """Every file of a package folder (no caches, no hidden files, no build leftovers), by its name in the zip."""
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(p in SKIPPED or p.startswith(".") or p.endswith(".egg-info") for p in rel.parts):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix != ".pyc":
            found[f"{prefix}/{rel.as_posix()}"] = path.read_bytes()
    return found


def _torch_version(constraints: str) -> str:
    for line in constraints.splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep and name.strip().lower() == "torch":
            return version.strip()
    raise ValueError("constraints.txt pins no torch version (a line torch==X is expected)")


def build_autograder(
    assignment: str,
    solutions: Path,
    zip_path: Path,
    *,
    hidden_visibility: str = "after_published",
    timeout_minutes: float = 10.0,
    hide_hidden: bool = False,
    limits: dict | None = None,
    repo: Path = REPO,
) -> BuildReport:
    """Write the Gradescope autograder of `assignment` (its notebook in `solutions`) to `zip_path`.

    `hidden_visibility`: when students see the tests that hold hidden tests (Gradescope's visibility:
    after_published, the default, shows them once the teacher publishes the grades); `timeout_minutes`:
    the autograder timeout set on Gradescope (the autograder stops a minute before it); `hide_hidden`:
    as `course grade --hide-hidden-inputs`; `limits`: `cell_cpu_s`, `total_cpu_s`, `memory_mb` replacing
    the set's own (as `course grade --timeout`, `--total-timeout`, `--memory`)."""
    name = Path(assignment).stem
    solution = Path(solutions) / f"{name}.ipynb"
    nb = _solution_to_pack(solution, hidden_visibility, timeout_minutes, repo)
    files = _files_to_pack(solution, nb, repo)
    config = {
        "assignment": name,
        "solutions_sha256": hashlib.sha256(solution.read_bytes()).hexdigest(),
        "hidden_visibility": hidden_visibility,
        "timeout_s": round(timeout_minutes * 60),
        "hide_hidden_inputs": bool(hide_hidden),
        "limits": {k: v for k, v in (limits or {}).items() if v is not None},
        "course_version": getattr(course_lib, "__version__", ""),
    }
    files[CONFIG] = (json.dumps(config, indent=1) + "\n").encode("utf-8")
    _write_zip(Path(zip_path), files)
    model = Assignment.from_notebook(nb, name)
    notes = [
        f"On Gradescope: a programming assignment worth {num(model.max_score)} autograded point(s)"
        + (" plus a manually graded question for each written answer" if model.written else "")
        + "; upload this zip under Configure Autograder.",
        f"Autograder settings: timeout {timeout_minutes:g} minutes (the autograder stops a minute earlier, keeping "
        "what it checked), memory 4 GB or more (the checks and the learner's kernel each load torch).",
        "Try it first: course gradescope test " + f"{zip_path} NOTEBOOK --out DIR",
    ]
    return BuildReport(Path(zip_path), sorted(files), config, notes)


def _solution_to_pack(solution: Path, hidden_visibility: str, timeout_minutes: float, repo: Path) -> dict:
    """The solution notebook, once the teacher's choices and the course's folder are known to make a zip."""
    if not solution.is_file():
        have = ", ".join(p.stem for p in sorted(solution.parent.glob("*.ipynb"))) or "none"
        raise ValueError(f"no solution notebook {solution} (the folder has: {have})")
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"--hidden-visibility is one of {', '.join(VISIBILITIES)}; got {hidden_visibility!r}")
    if not timeout_minutes > 2:
        raise ValueError(f"--timeout-minutes is Gradescope's autograder timeout, more than 2; got {timeout_minutes:g}")
    nb = read_notebook(solution)
    problems = validate_solution_notebook(nb, solution.name)
    if problems:
        raise ValueError(f"{solution} cannot be used for grading: " + "; ".join(problems[:5]))
    for needed in ("pyproject.toml", "constraints.txt", "course_lib", "course_grader/pyproject.toml"):
        if not (repo / needed).exists():
            raise ValueError(
                f"`course gradescope build` packs the course's two packages from its folder, and {repo} has no "
                f"{needed}: run it from a checkout of the course (where `make install` ran)"
            )
    return nb


def _files_to_pack(solution: Path, nb: dict, repo: Path) -> dict[str, bytes]:
    """Every file of the zip but autograder.json, by its name in the zip."""
    raw = solution.read_bytes()
    files: dict[str, bytes] = {}
    meta = nb.get("metadata", {}).get("course", {})
    rel = meta.get("checks") if isinstance(meta, dict) else None
    if isinstance(rel, str) and rel:  # a teacher's own set: its checks module travels, found by a new relative path
        module = (solution.parent / rel).resolve()
        if not module.is_file():
            raise ValueError(f"{solution.name} names its checks module {rel}, which is not at {module}")
        files[f"checks/{module.name}"] = module.read_bytes()
        meta["checks"] = f"../checks/{module.name}"
        raw = (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    files[f"solutions/{solution.stem}.ipynb"] = raw
    constraints = (repo / "constraints.txt").read_text(encoding="utf-8")
    files["constraints.txt"] = constraints.encode("utf-8")
    files["course/pyproject.toml"] = (repo / "pyproject.toml").read_bytes()
    if (repo / "README.md").is_file():  # the package's long description (pyproject.toml names it)
        files["course/README.md"] = (repo / "README.md").read_bytes()
    files.update(_package_files(repo / "course_lib", "course/course_lib"))
    files.update(_package_files(repo / "course_grader", "course/course_grader"))
    files["setup.sh"] = SETUP_SH.replace("{torch}", _torch_version(constraints)).encode("utf-8")
    files["run_autograder"] = RUN_AUTOGRADER.encode("utf-8")
    return files


def _write_zip(zip_path: Path, files: dict[str, bytes]) -> None:
    """The zip, whole or not at all; the same bytes from the same files (fixed dates, sorted names)."""
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    draft = zip_path.with_name(f".{zip_path.name}.{os.getpid()}")
    try:
        with zipfile.ZipFile(draft, "w", zipfile.ZIP_DEFLATED) as z:
            for arcname in sorted(files):
                info = zipfile.ZipInfo(arcname, ZIP_TIME)
                info.external_attr = (0o100755 if arcname in ("setup.sh", "run_autograder") else 0o100644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, files[arcname])
        os.replace(draft, zip_path)
    finally:
        draft.unlink(missing_ok=True)


# --- trying a zip here -----------------------------------------------------------------------------------


def _unzip(zip_path: Path, into: Path) -> None:
    """Extract the zip, refusing names that would land outside `into`; keep the scripts executable."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            target = (into / info.filename).resolve()
            if not target.is_relative_to(into.resolve()):
                raise ValueError(f"{zip_path} holds {info.filename!r}, outside its own folder: not an autograder zip")
            z.extract(info, into)
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                os.chmod(target, mode)


def try_autograder(
    zip_path: Path, notebook: Path, out: Path, *, root: Path | None = None, no_sandbox: bool = False
) -> dict:
    """Run the zip's run_autograder on `notebook` in a folder laid out like Gradescope's /autograder (`root`, by
    default a temporary one, removed afterwards), with the zip's own copy of the course's packages; copy its
    results.json (what Gradescope would get) and its stdout to `out`. setup.sh is not run: the Python here
    stands in for the one it installs."""
    zip_path, notebook, out = Path(zip_path), Path(notebook), Path(out)
    if not zipfile.is_zipfile(zip_path):
        raise ValueError(f"{zip_path} is not a zip file (make one with `course gradescope build`)")
    if not notebook.is_file():
        raise ValueError(f"{notebook} is not a file (expected the notebook a student would upload)")
    tree = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="course-autograder-"))
    if root is not None and tree.exists() and any(tree.iterdir()):
        raise ValueError(f"{tree} is not empty: --root takes a new or empty folder, laid out like /autograder")
    try:
        _unzip(zip_path, tree / "source")
        for name in ("setup.sh", "run_autograder", CONFIG):
            if not (tree / "source" / name).is_file():
                raise ValueError(f"{zip_path} has no {name} at its root: not an autograder zip")
        # The packages where setup.sh would install them: outside source/ (which run_autograder closes to the
        # learner's user), readable by everyone.
        shutil.copytree(tree / "source" / "course", tree / "packages")
        os.chmod(tree, 0o711)
        shutil.copy2(tree / "source" / "run_autograder", tree / "run_autograder")
        (tree / "submission").mkdir()
        shutil.copyfile(notebook, tree / "submission" / notebook.name)
        (tree / "results").mkdir()
        metadata = {
            "id": 1,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "assignment": {"title": json.loads((tree / "source" / CONFIG).read_text())["assignment"]},
            "users": [{"name": "Test Student", "email": "", "sid": notebook.stem}],
            "previous_submissions": [],
        }
        (tree / "submission_metadata.json").write_text(json.dumps(metadata, indent=1), encoding="utf-8")
        env = {
            **os.environ,
            "COURSE_AUTOGRADER_ROOT": str(tree),
            "COURSE_AUTOGRADER_PYTHON": sys.executable,
            "PYTHONPATH": str(tree / "packages"),  # the zip's course_lib and course_grader, not this one's
        }
        if no_sandbox:
            env["COURSE_AUTOGRADER_SANDBOX"] = "never"
        timeout_s = json.loads((tree / "source" / CONFIG).read_text())["timeout_s"]
        with open(tree / "results" / "stdout", "wb") as log:
            try:
                subprocess.run(
                    [str(tree / "run_autograder")],
                    cwd=tree,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s + 30,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                log.write(f"\nGradescope would have stopped the autograder here, at {timeout_s} s.\n".encode())
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / "results" / "stdout", out / "stdout")
        if not (tree / "results" / "results.json").is_file():
            raise ValueError(f"run_autograder wrote no results.json; its output is in {out / 'stdout'}")
        shutil.copyfile(tree / "results" / "results.json", out / "results.json")
        return json.loads((out / "results.json").read_text(encoding="utf-8"))
    finally:
        if root is None:
            shutil.rmtree(tree, ignore_errors=True)
