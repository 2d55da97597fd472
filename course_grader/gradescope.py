"""A Gradescope autograder from the same exercise source: `course gradescope build | test | import`.

Gradescope runs an autograder as a zip with two scripts at its root (its "autograder specifications",
https://gradescope-autograders.readthedocs.io/en/latest/specs/):

- `setup.sh` runs once, as root, when Gradescope builds the autograder's image (Ubuntu, with a network);
- `run_autograder` runs for every submission, as root, in `/autograder`: the zip's files are in
  `/autograder/source/`, the student's upload in `/autograder/submission/`, and what it writes to
  `/autograder/results/results.json` is the score and the feedback the student sees.

`build_autograder` writes that zip from one solution notebook (`course gradescope build`):

    setup.sh             installs Python 3.11+, bubblewrap, torch as PyTorch's CPU wheel, then the course
    run_autograder       `python -m course_grader.gradescope run --root /autograder`
    autograder.json      the assignment and the teacher's choices (visibility of hidden tests, time limit)
    constraints.txt      the versions the course is tested with
    course/              the course's two packages as source (course_lib, course_grader), from this checkout
    solutions/A.ipynb    the one solution notebook (its hidden tests included)
    checks/lessonNN.py   a teacher's own set: its checks module (`course new --checks DIR`)

and nothing else: no other set's solutions, no gradebook, no submissions.

`run_autograder` (`run`) grades the upload with `grade.grade_submission`, the function `course grade`
uses, so the score is the one `course grade` gives the same notebook: the same checks, limits (each
set's CPU budgets) and hints. The learner's code runs in the bubblewrap sandbox where the container lets
bubblewrap start; where it does not (Gradescope's containers usually refuse it the namespaces it needs),
the learner's kernel runs as the unprivileged user `nobody` while the checks run as root, with the
autograder's folders closed to that user (see `secure`). results.json has one test per exercise
(`results_json`) and one placeholder per written answer, which a person marks on Gradescope. It is
written before grading starts and again as each test finishes, and the autograder stops itself before
Gradescope's own time limit (which would give the student 0 and nothing to read), keeping what it checked.

`try_autograder` (`course gradescope test`) runs the zip's `run_autograder` in a folder laid out like
`/autograder`, with the zip's own copy of the course's packages, so that a teacher can try a zip before
uploading it. `import_scores` (`course gradescope import`) reads Gradescope's score export back into the
gradebook, so that `course report` and the LMS files keep working.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import course_lib
from course_lib.runner.assignment import Assignment
from course_lib.runner.feedback import MANUAL_STATUS, classify, earned, md_block, md_text, num
from course_lib.runner.notebook import read_notebook, validate_solution_notebook
from course_lib.runner.process import Limits
from course_lib.runner.text import inert

REPO = Path(course_lib.__file__).resolve().parents[1]  # the course's folder: its pyproject.toml and packages
CONFIG = "autograder.json"
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")  # Gradescope's, for tests and output
MARGIN_S = 60.0  # the autograder stops this long before Gradescope's time limit, to write its results
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
/opt/course-venv/bin/python -m course_grader.gradescope check --root /autograder
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this as root, in /autograder, for every submission. `course gradescope test` runs it in
# a folder laid out the same way: COURSE_AUTOGRADER_ROOT and COURSE_AUTOGRADER_PYTHON say where.
ROOT="${COURSE_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${COURSE_AUTOGRADER_PYTHON:-/opt/course-venv/bin/python}"
exec "$PYTHON" -m course_grader.gradescope run --root "$ROOT"
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
    if not solution.is_file():
        have = ", ".join(p.stem for p in sorted(Path(solutions).glob("*.ipynb"))) or "none"
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
    files[f"solutions/{name}.ipynb"] = raw
    constraints = (repo / "constraints.txt").read_text(encoding="utf-8")
    files["constraints.txt"] = constraints.encode("utf-8")
    files["course/pyproject.toml"] = (repo / "pyproject.toml").read_bytes()
    if (repo / "README.md").is_file():  # the package's long description (pyproject.toml names it)
        files["course/README.md"] = (repo / "README.md").read_bytes()
    files.update(_package_files(repo / "course_lib", "course/course_lib"))
    files.update(_package_files(repo / "course_grader", "course/course_grader"))
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
    files["setup.sh"] = SETUP_SH.replace("{torch}", _torch_version(constraints)).encode("utf-8")
    files["run_autograder"] = RUN_AUTOGRADER.encode("utf-8")
    zip_path = Path(zip_path)
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
    model = Assignment.from_notebook(nb, name)
    notes = [
        f"On Gradescope: a programming assignment worth {num(model.max_score)} autograded point(s)"
        + (" plus a manually graded question for each written answer" if model.written else "")
        + "; upload this zip under Configure Autograder.",
        f"Autograder settings: timeout {timeout_minutes:g} minutes (the autograder stops a minute earlier, keeping "
        "what it checked), memory 4 GB or more (the checks and the learner's kernel each load torch).",
        "Try it first: course gradescope test " + f"{zip_path} NOTEBOOK --out DIR",
    ]
    return BuildReport(zip_path, sorted(files), config, notes)


# --- results.json -----------------------------------------------------------------------------------------


def hidden_tests(solution: dict) -> set[str]:
    """The grade_ids of the test cells that hold hidden tests."""
    return {c.grade_id for c in Assignment.from_notebook(solution, "").tests if c.hidden}


def exercise_output(status: str, earned: float, max_points: float, message: str) -> str:
    """A test's `output`, in Markdown: the status and points as `course check` words them, then its hint."""
    text = f"**{status}**: {num(earned)} / {num(max_points)} point(s)"
    if status != "passed" and message.strip():
        text += "\n\n" + "\n".join(md_block(message.strip()))
    return text


def _test_entry(number: int, t, hidden: set[str], config: dict) -> dict:
    """One exercise's test as Gradescope reads it, from a `TestResult` (or a dict of one)."""
    t = t if isinstance(t, dict) else t.__dict__
    return {
        "name": t.get("exercise") or t["grade_id"],
        "number": str(number),
        "score": float(t["points"]),
        "max_score": float(t["max_points"]),
        "status": "passed" if t["status"] == "passed" else "failed",
        "output": exercise_output(t["status"], t["points"], t["max_points"], t.get("message") or ""),
        "output_format": "md",
        "visibility": config.get("hidden_visibility", "after_published") if t["grade_id"] in hidden else "visible",
        "tags": [t["status"]],
        "extra_data": {"grade_id": t["grade_id"], "status": t["status"], "cause": t.get("cause", "")},
    }


def _written_entry(m) -> dict:
    """A written answer's placeholder: a person marks it on Gradescope (a question of its own there)."""
    m = m if isinstance(m, dict) else m.__dict__
    given = m["status"] == MANUAL_STATUS
    said = {
        MANUAL_STATUS: "Received. A person marks this written answer on Gradescope",
        "not attempted": "Left blank. A person marks written answers on Gradescope",
        "not submitted": "Missing from the notebook. A person marks written answers on Gradescope",
    }.get(m["status"], f"Not read ({md_text(m.get('message') or m['status'])}). A person marks written answers")
    return {
        "name": f"{m.get('exercise') or m['grade_id']} (written answer)",
        "score": 0.0,
        "max_score": float(m["max_points"]),
        "status": "passed" if given else "failed",
        "output": f"{said}; its {num(m['max_points'])} point(s) are not in the autograder's score.",
        "output_format": "md",
        "visibility": "visible",
        "tags": ["written answer"],
        "extra_data": {"grade_id": m["grade_id"], "status": m["status"]},
    }


def results_json(res, solution: dict, config: dict, *, isolation: str, seconds: float, extra_notes=()) -> dict:
    """Gradescope's results.json for one graded submission (a `grade.SubmissionResult`): one test per
    exercise in the notebook's order, each written answer's placeholder after the test before it, and the
    score `course grade` gives (the tests' points; written answers are marked on Gradescope)."""
    hidden = hidden_tests(solution)
    entries, n = [], 0
    manual = list(res.manual)
    for m in [m for m in manual if not m.after]:
        entries.append(_written_entry(m))
    for t in res.tests:
        n += 1
        entries.append(_test_entry(n, t, hidden, config))
        entries += [_written_entry(m) for m in manual if m.after == t.grade_id]
    placed = {e["extra_data"]["grade_id"] for e in entries}
    entries += [_written_entry(m) for m in manual if m.grade_id not in placed]
    lines = [f"**Autograder score: {num(res.score)} / {num(res.max_score)}**"]
    if res.status != "graded":
        lines.append(f"This submission was not graded ({md_text(res.status)}).")
    lines += [f"- {md_text(note)}" for note in dict.fromkeys([*extra_notes, *res.notes])]
    written = sum(m.max_points for m in manual)
    if written:
        lines.append(f"Written answers ({num(written)} point(s)) are marked by a person on Gradescope.")
    later = {e["visibility"] for e in entries} - {"visible"}
    if later:
        when = {
            "after_published": "when your teacher publishes the grades",
            "after_due_date": "after the due date",
            "hidden": "to your teacher only",
        }[later.pop()]
        lines.append(f"The results of exercises with hidden tests are shown {when}.")
    return {
        "score": float(res.score),
        "execution_time": round(seconds),
        "output": "\n\n".join(lines),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "assignment": res.assignment,
            "status": res.status,
            "max_score": float(res.max_score),
            "solutions_sha256": config.get("solutions_sha256", ""),
            "cpu_seconds": float(getattr(res, "cpu_seconds", 0.0)),
            "isolation": isolation,
        },
        "tests": entries,
    }


def write_results(path: Path, results: dict) -> None:
    """results.json, replaced whole: Gradescope never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    draft.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(draft, path)


class PartialResults:
    """What the autograder knows so far, written to results.json before grading starts and again as each test
    finishes: if it is stopped (its time limit), the student keeps the exercises already checked."""

    def __init__(self, path: Path, solution: dict, config: dict, isolation: str):
        self.path, self.config, self.isolation = path, config, isolation
        self.started = time.monotonic()
        tests = Assignment.from_notebook(solution, "").tests
        self.hidden = {c.grade_id for c in tests if c.hidden}
        self.tests = {c.grade_id: (c.title, c.points) for c in tests}  # grade_id -> (exercise, points), in order
        self.done: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.final = False

    def test_done(self, gid: str | None, run) -> None:
        """`grade_submission`'s `on_test`: a test's provisional result (the final one adds hints about the
        answer cell, which the student reads once grading has finished)."""
        exercise, max_points = self.tests.get(gid, (gid or "", 0.0))
        status, message = classify(run)
        status, points = earned(status, run, max_points)
        self.done[gid] = {
            "grade_id": gid,
            "exercise": exercise,
            "points": points,
            "max_points": max_points,
            "status": status,
            "message": message,
        }
        self.write(f"Grading: {len(self.done)} of {len(self.tests)} exercises checked so far.")

    def write(self, why: str) -> dict:
        """results.json from the tests finished so far; every other test "not checked" (0 points), `why` on top."""
        with self.lock:
            if self.final:
                return {}
            tests = [
                self.done.get(gid)
                or {
                    "grade_id": gid,
                    "exercise": exercise,
                    "points": 0.0,
                    "max_points": max_points,
                    "status": "error",
                    "message": "not checked: the autograder stopped before it reached this exercise",
                }
                for gid, (exercise, max_points) in self.tests.items()
            ]
            entries = [_test_entry(n, t, self.hidden, self.config) for n, t in enumerate(tests, 1)]
            total = sum(t["points"] for t in tests)
            results = {
                "score": float(total),
                "execution_time": round(time.monotonic() - self.started),
                "output": f"**Autograder score so far: {num(total)} / {num(sum(m for _, m in self.tests.values()))}**"
                f"\n\n{why}",
                "output_format": "md",
                "visibility": "visible",
                "stdout_visibility": "hidden",
                "extra_data": {"partial": True, "isolation": self.isolation},
                "tests": entries,
            }
            write_results(self.path, results)
            return results

    def finish(self, results: dict) -> None:
        with self.lock:
            self.final = True
            write_results(self.path, results)


# --- run_autograder ---------------------------------------------------------------------------------------


def secure(root: Path) -> None:
    """As root: the autograder's own folders (the solutions and their hidden tests, the upload, the results,
    Gradescope's record of earlier submissions) closed to every other user, the learner's kernel's among them."""
    if os.geteuid() != 0:
        return
    for name, mode in (
        ("source", 0o700),
        ("submission", 0o700),
        ("results", 0o700),
        ("submission_metadata.json", 0o600),
    ):
        path = root / name
        if path.exists() and not path.is_symlink():
            os.chmod(path, mode)


def find_submission(folder: Path, assignment: str) -> tuple[Path | None, list[str]]:
    """The uploaded notebook to grade as `assignment`, by `course grade`'s rules (`discover.resolve_notebooks`), else
    the only notebook uploaded; and what was decided, for the student."""
    from course_lib.runner.notebook import exercise_filename

    from .discover import notebooks_in, resolve_notebooks

    if not folder.is_dir():
        return None, ["Nothing was uploaded."]
    chosen, extra = resolve_notebooks(folder, [assignment], folder)
    if assignment in chosen:
        path, notes = chosen[assignment]
        return path, notes + extra
    found, _ = notebooks_in(folder)
    if len(found) == 1:
        rel = found[0].relative_to(folder).as_posix()
        return found[0], [f"Graded `{rel}` as {assignment} (the only notebook uploaded)."]
    if not found:
        return None, [f"No notebook was uploaded (expected {exercise_filename(assignment)})."]
    return None, extra + [f"None of the notebooks uploaded is {exercise_filename(assignment)}; upload that one."]


def _student(root: Path) -> str:
    """Who submitted, from Gradescope's submission_metadata.json (only a label: the score does not depend on it)."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8")).get("users") or []
        user = users[0] if users and isinstance(users[0], dict) else {}
        return inert(str(user.get("sid") or user.get("email") or user.get("id") or "student"), 200)
    except (OSError, ValueError, AttributeError):
        return "student"


def isolation_mode(requested: str) -> tuple[bool, str]:
    """(use the sandbox, what isolates the learner's code): bubblewrap where it starts; else, as root, the
    unprivileged user nobody (`COURSE_GRADE_KERNEL_USER`); else refused unless `requested` is "never"."""
    from .sandbox import sandbox_status

    if requested != "never":
        ok, why = sandbox_status()
        if ok:
            return True, f"the bubblewrap sandbox ({why})"
        if os.geteuid() == 0:
            os.environ["COURSE_GRADE_KERNEL_USER"] = "nobody"
            return False, f"the unprivileged user nobody, in the autograder's container (no bubblewrap: {why})"
        raise ValueError(
            f"the grading sandbox is not available here ({why}), and this is not root, so the learner's code would "
            "run as you: pass --no-sandbox to try the autograder anyway (on Gradescope it runs as root)"
        )
    if os.geteuid() == 0:
        os.environ["COURSE_GRADE_KERNEL_USER"] = "nobody"
        return False, "the unprivileged user nobody (the sandbox was not asked for)"
    return False, "none: the learner's code ran as the grader's user (--no-sandbox)"


def _stop_at(deadline: float, partial: PartialResults, timeout_s: float) -> None:
    """At `deadline` (time.monotonic()), keep what was checked and end the autograder (and the kernel)."""
    while time.monotonic() < deadline:
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    partial.write(
        f"The autograder stopped at its time limit ({num(timeout_s / 60)} minutes) before it had checked every "
        "exercise: those it checked keep their points, the others are marked not checked. Tell your teacher."
    )
    print("stopped at the time limit; results.json holds the exercises checked so far", flush=True)
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            child.kill()
    except Exception:  # noqa: BLE001 - ending is what matters
        pass
    os._exit(0)


def run(root: Path, *, sandbox: str = "auto") -> dict:
    """Grade `root/submission`'s notebook as Gradescope's run_autograder does; write and return results.json."""
    from .grade import grade_submission

    started = time.monotonic()
    root = Path(root)
    config = json.loads((root / "source" / CONFIG).read_text(encoding="utf-8"))
    assignment = config["assignment"]
    solution_path = root / "source" / "solutions" / f"{assignment}.ipynb"
    solution = read_notebook(solution_path)
    results_path = root / "results" / "results.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    secure(root)
    use_sandbox, isolation = isolation_mode(os.environ.get("COURSE_AUTOGRADER_SANDBOX", sandbox))
    partial = PartialResults(results_path, solution, config, isolation)
    partial.write("Grading has started. If you read this, the autograder stopped before it checked anything.")
    timeout_s = float(config.get("timeout_s", 600))
    deadline = started + max(60.0, timeout_s - MARGIN_S)
    threading.Thread(target=_stop_at, args=(deadline, partial, timeout_s), daemon=True).start()
    submission, notes = find_submission(root / "submission", assignment)
    given = config.get("limits", {})
    limits = Limits().from_notebook(solution)
    limits = replace(limits, **{k: given[k] for k in ("cell_cpu_s", "total_cpu_s", "memory_mb") if k in given})
    print(f"grading {submission or 'nothing'} as {assignment}; learner's code isolated by {isolation}", flush=True)
    res = grade_submission(
        solution_path,
        submission or (root / "submission" / f"{assignment}.ipynb"),
        _student(root),
        limits=limits,
        sandbox=use_sandbox,
        protect=[root / "source", root / "submission", root / "results"],
        root=(root / "submission") if submission else None,
        hide_hidden=bool(config.get("hide_hidden_inputs")),
        on_test=partial.test_done,
    )
    results = results_json(
        res, solution, config, isolation=isolation, seconds=time.monotonic() - started, extra_notes=notes
    )
    partial.finish(results)
    print(f"{res.status}: {num(res.score)} / {num(res.max_score)}", flush=True)
    for t in res.tests:
        print(f"  {(t.exercise or t.grade_id)[:56]:<56} {num(t.points):>5} / {num(t.max_points):<5} {t.status}")
    return results


def check(root: Path) -> int:
    """setup.sh's last step: the packages import, and whether the sandbox starts in this image."""
    import torch

    from .sandbox import sandbox_status

    config = json.loads((Path(root) / "source" / CONFIG).read_text(encoding="utf-8"))
    ok, why = sandbox_status()
    print(f"course_grader ready for {config['assignment']}; torch {torch.__version__}")
    print(
        f"sandbox: {why}"
        if ok
        else f"sandbox: not available at build time ({why}); run_autograder checks again for each submission and "
        "otherwise runs the learner's code as the unprivileged user nobody"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m course_grader.gradescope run|check --root /autograder` (what run_autograder and setup.sh call)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_grader.gradescope")
    parser.add_argument("action", choices=("run", "check"))
    parser.add_argument("--root", type=Path, default=Path("/autograder"))
    parser.add_argument("--sandbox", choices=("auto", "never"), default="auto")
    args = parser.parse_args(argv)
    if args.action == "check":
        return check(args.root)
    try:
        run(args.root, sandbox=args.sandbox)
    except Exception as err:  # noqa: BLE001 - a results.json that says so, never Gradescope's bare failure
        why = f"{type(err).__name__}: {inert(err, 500)}"
        print(f"the autograder failed: {why}", flush=True)
        write_results(
            args.root / "results" / "results.json",
            {
                "score": 0.0,
                "output": "The autograder failed on this submission; this is not a grade. Tell your teacher, "
                "who can read why in the autograder's output.\n\n" + "\n".join(md_block(why)),
                "output_format": "md",
                "stdout_visibility": "hidden",
                "extra_data": {"error": why},
                "tests": [],
            },
        )
        return 1
    return 0


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


# --- Gradescope's scores back into the gradebook -----------------------------------------------------------


@dataclass
class ImportReport:
    rows: int = 0
    graded: int = 0
    missing: int = 0
    skipped: list[str] = field(default_factory=list)  # rows matched to no student, with why


def _question(header: str) -> tuple[str, float] | None:
    """A question column of Gradescope's export, "2: Exercise 2: Softmax (3.0 pts)" -> ("Exercise 2: Softmax", 3.0)."""
    found = re.fullmatch(r"\s*([\d.]+)\s*(?::\s*(.*?))?\s*\(([\d.]+)\s*pts?\)\s*", header)
    if not found:
        return None
    return (found.group(2) or f"Question {found.group(1)}").strip(), float(found.group(3))


def _number(text: str) -> float:
    try:
        return float(text.strip()) if text and text.strip() else 0.0
    except ValueError:
        return 0.0


def import_scores(csv_path: Path, assignment: str, out: Path, *, solutions: Path | None = None) -> ImportReport:
    """Read Gradescope's score export of one assignment (Review Grades > Download Grades > CSV) into the
    gradebook `out` as rows of `assignment`: each student's total, each question's points as a test, the
    submission time (for `course deadline`), and a note saying the row came from Gradescope. Students are
    matched to the kept roster by SID, then email, then name; without a roster the SID (else the email) is
    the id. The same export imported again replaces its rows (each Gradescope submission is one attempt).
    `solutions`: the folder whose notebook built the autograder, recorded as the rows' solutions."""
    from course_lib.runner.feedback import TestResult

    from .export import write_exports
    from .grade import SubmissionResult
    from .gradebook import open_gradebook, parse_time

    raw = Path(csv_path).read_bytes()
    text = raw.decode("utf-8-sig", errors="replace")
    reader = csv.DictReader(io.StringIO(text))
    headers = {h.strip().casefold(): h for h in (reader.fieldnames or []) if h}
    if "total score" not in headers or "status" not in headers:
        raise ValueError(
            f"{csv_path} is not Gradescope's score export of an assignment (expected the columns Total Score and "
            f"Status; it has: {', '.join(reader.fieldnames or []) or 'none'})"
        )
    questions = [(h, q) for h in reader.fieldnames or [] if (q := _question(h)) is not None]
    name = Path(assignment).stem
    if solutions is not None:
        sol = Path(solutions) / f"{name}.ipynb"
        if not sol.is_file():
            raise ValueError(f"no solution notebook {sol}")
        sol_path, sol_sha = str(sol.resolve()), hashlib.sha256(sol.read_bytes()).hexdigest()
    else:
        sol_path, sol_sha = f"Gradescope ({Path(csv_path).name})", hashlib.sha256(raw).hexdigest()

    def cell(row: dict, column: str) -> str:
        key = headers.get(column)
        return (row.get(key) or "").strip() if key else ""

    report = ImportReport()
    with closing(open_gradebook(out)) as book:
        roster = book.roster()
        for row in reader:
            sid, email = cell(row, "sid"), cell(row, "email")
            full = cell(row, "name") or " ".join(x for x in (cell(row, "first name"), cell(row, "last name")) if x)
            if roster is not None:
                student = None
                for key in (sid, email, full):
                    if key:
                        student, _ = roster.find(key)
                        if student is not None:
                            break
                if student is None:
                    report.skipped.append(f"{full or email or sid or '?'}: not on the roster kept in {out}")
                    continue
                if student.status == "dropped":
                    report.skipped.append(f"{student.label}: dropped the course")
                    continue
                student_id = student.id
            else:
                student_id = sid or email
                if not student_id:
                    report.skipped.append(f"{full or '?'}: no SID and no email")
                    continue
            status_text = cell(row, "status").casefold()
            submission_id = cell(row, "submission id")
            total, max_points = _number(cell(row, "total score")), _number(cell(row, "max points"))
            missing = status_text == "missing" or not submission_id
            tests = []
            for header, (title, worth) in questions:
                got = _number(row.get(header) or "")
                state = (
                    "not submitted" if missing else "passed" if got >= worth > 0 else "partial" if got > 0 else "failed"
                )
                tests.append(TestResult(f"gradescope: {title}", title, got, worth, state))
            where = f"Graded on Gradescope (submission {submission_id}), imported from {Path(csv_path).name}."
            notes = [where] if not missing else ["Nothing was submitted on Gradescope."]
            if status_text == "ungraded":
                notes.append("Some questions were not yet graded on Gradescope when its scores were exported.")
            result = SubmissionResult(
                inert(student_id, 200),
                name,
                0.0 if missing else total,
                max_points or sum(q[1] for _, q in questions),
                "not submitted" if missing else "graded",
                tests,
                notes,
            )
            when = None
            if cell(row, "submission time"):
                try:  # "2026-12-01 22:59:07 -0600": the offset joined to the time, as ISO 8601 writes it
                    stamp = re.sub(r"\s+([+-]\d{2}):?(\d{2})$", r"\1:\2", cell(row, "submission time"))
                    when = parse_time(stamp, tz=timezone.utc)
                    when = when.astimezone(timezone.utc).isoformat(timespec="seconds")
                except ValueError:
                    notes.append(f"Gradescope's submission time {cell(row, 'submission time')!r} could not be read.")
            book.record(
                result,
                file=None,
                submission_sha256=None if missing else f"gradescope:{submission_id}",
                submitted_at=when,
                submitted_from="Gradescope" if when else None,
                solutions_path=sol_path,
                solutions_sha256=sol_sha,
                run=None,
            )
            report.rows += 1
            report.missing += missing
            report.graded += not missing
        write_exports(book, Path(out))
    return report


if __name__ == "__main__":
    sys.exit(main())
