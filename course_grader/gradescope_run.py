"""Inside Gradescope, for every submission: `run_autograder` grades the upload and writes results.json.

`run` grades `/autograder/submission`'s notebook with `grade.grade_submission`, the function `course grade`
uses, so the score is the one `course grade` gives the same notebook: the same checks, limits (each set's
CPU budgets) and hints. The learner's code runs in the bubblewrap sandbox where the container lets
bubblewrap start; where it does not (Gradescope's containers usually refuse it the namespaces it needs),
the learner's kernel runs as the unprivileged user `nobody` while the checks run as root, with the
autograder's folders closed to that user (see `secure`). results.json has one test per exercise
(`results_json`) and one placeholder per written answer, which a person marks on Gradescope. It is
written before grading starts and again as each test finishes (`PartialResults`), and the autograder
stops itself before Gradescope's own time limit (which would give the student 0 and nothing to read),
keeping what it checked. The zip that holds this module is built by `gradescope.build_autograder`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from course_lib.runner.assignment import Assignment
from course_lib.runner.feedback import MANUAL_STATUS, classify, earned, md_block, md_text, num
from course_lib.runner.notebook import read_notebook
from course_lib.runner.process import Limits
from course_lib.runner.text import inert

from .gradescope import CONFIG

MARGIN_S = 60.0  # the autograder stops this long before Gradescope's time limit, to write its results


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
    """`python -m course_grader.gradescope_run run|check --root /autograder` (what run_autograder and setup.sh call)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_grader.gradescope_run")
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


if __name__ == "__main__":
    sys.exit(main())
