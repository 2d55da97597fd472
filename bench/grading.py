"""Grading throughput, the heaviest exercise set, and what one hostile submission costs a batch.

    python -m bench.grading [--copies 20] [--jobs 2] [--cpus 2] [--repeat 2]

Three measurements, each with `course grade` run as a child process (as a teacher runs it), whose
whole process tree (the grader, the server it forks its checking processes from, those processes,
and every sandbox and kernel) is counted: this process is the children's subreaper, so every one of
them is reaped here, and their CPU time adds up in this process's RUSAGE_CHILDREN.

1. lesson 06's set: `copies` students who hand in the solution notebook and `copies` who hand in the
   blank exercise, at `--jobs`, in the bubblewrap sandbox and with `--no-sandbox`, alternating after
   a warm-up, each mode's best run kept. The course's target is 60 or more submissions per minute on
   2 cores at `--jobs 2`, at most 1.2 CPU-seconds a correct submission (2.5 for set 09), the sandbox
   costing at most 10 %. In the sandbox each kernel is forked from a zygote that imported torch once
   (see `course_grader.zygote`); without it each kernel imports torch itself, so there the sandbox
   costs less than nothing.
2. lesson 09's set, the heaviest (its checks train and compare transformer blocks), in the sandbox.
2b. where the CPU time of a correct submission of sets 06 and 09 goes (its kernel's start, its cells, its
   checking process) and what the batch costs as a whole, from the results `batch.grade_all` returns.
0. every exercise set's worked solution, graded in the sandbox: the CPU time of its costliest cell and in
   all, against the set's budgets (at most a quarter: `--write-budgets` sets them to four times this).
3. the same class of lesson 06 with one more submission that hits every limit (a loop that ignores
   interrupts, a memory hog, an output flood, a fork bomb beside 40 busy loops, memfd files, a kernel
   whose every reply is a set of colliding keys) against the class without it, alternating, with
   `--timeout 10 --total-timeout 60`: its extra wall-clock and CPU time, and whether every correct
   submission still got full marks.

Timings depend on the machine and on what else runs on it, so the load average and the CPUs used are
printed with them; `--cpus N` pins the run to N CPUs. CPU seconds, unlike wall-clock time, hardly
change with other work on the machine.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_lib.runner.assignment import Assignment

REPO = Path(__file__).resolve().parents[1]
HOSTILE_LIMITS = ["--timeout", "10", "--total-timeout", "60"]

# One attack per answer cell, in order (the cells after the last attack keep the right answer).
ATTACKS = [
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",  # cell time limit, a kill
    "hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))\n",  # memory limit
    "for i in range(10**8):\n    print(i)\n",  # output limit
    "import os, subprocess, time\nspin = [subprocess.Popen(['timeout', '8', 'sh', '-c', 'while :; do :; done'])\n"
    "        for _ in range(20)]\nwhile True:\n    os.fork()\n",  # 40 busy processes, then a fork bomb
    "import os\nheld = [os.memfd_create('hold') for _ in range(48)]\nfor fd in held:\n"
    "    os.posix_fallocate(fd, 0, 63 * 2**20)\n",  # memory outside RSS: refused or counted
    "import course_lib.runner.wire as wire\n"
    "wire.Encoder.encode = lambda self, value, depth=0: ['set', [k * (2**61 - 1) for k in range(1, 300_001)]]\n",
]


def _class(folder: Path, assignment: str, copies: int, hostile: bool = False) -> int:
    from course_grader.build import build_exercise
    from course_lib.runner.notebook import dumps_notebook, grade_id, is_solution, read_notebook, source

    solution = REPO / "solutions" / f"{assignment}.ipynb"
    blank = dumps_notebook(build_exercise(read_notebook(solution), solution.name))
    students = {}
    for i in range(copies):
        students[f"solved{i:02d}"] = solution.read_text()
        students[f"blank{i:02d}"] = blank
    if hostile:
        nb = build_exercise(read_notebook(solution), solution.name)
        answers = {grade_id(c): source(c) for c in read_notebook(solution)["cells"] if is_solution(c)}
        cells = [c for c in nb["cells"] if is_solution(c)]
        for cell in cells:
            cell["source"] = answers[grade_id(cell)]
        for cell, attack in zip(cells, ATTACKS, strict=False):
            cell["source"] = attack + cell["source"]
        students["zz_every_limit"] = json.dumps(nb)
    for who, text in students.items():
        (folder / who).mkdir(parents=True)
        (folder / who / solution.name).write_text(text)
    return len(students)


def _subreaper() -> None:
    """Orphans of our children (the grader's fork server) are reparented here, so their CPU is counted."""
    try:
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap() -> None:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _grade(folder: Path, assignment: str, jobs: int, sandbox: bool, extra: list[str] = ()) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the whole process tree, results) of `course grade` on the class."""
    out = Path(tempfile.mkdtemp(prefix="bench-grade-out-"))
    try:
        _reap()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        cmd = [
            sys.executable,
            "-m",
            "course_lib.cli",
            "grade",
            str(folder),
            "--solutions",
            str(REPO / "solutions"),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
            "--assignment",
            assignment,
            *extra,
        ]
        proc = subprocess.run(cmd + ([] if sandbox else ["--no-sandbox"]), capture_output=True, text=True)
        seconds = time.perf_counter() - start
        _reap()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"course grade failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
        results = {r["student_id"]: r for r in json.loads((out / "grades.json").read_text())["results"]}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, results


def _full_marks(r: dict) -> bool:
    """At the tests' full marks: written answers that a person marks count in max_score but wait for
    `course mark`, so they are left out here."""
    return r["score"] == Assignment.read(REPO / "solutions" / f"{r['assignment']}.ipynb").max_score


def _check(results: dict) -> None:
    """Every submission graded, and every solved one at full marks."""
    bad = [
        (s, r["status"], r["score"])
        for s, r in results.items()
        if s != "zz_every_limit" and (r["status"] != "graded" or (s.startswith("solved") and not _full_marks(r)))
    ]
    if bad:
        raise RuntimeError(f"grading went wrong: {bad[:3]}")


def throughput(
    assignment: str, copies: int, jobs: int, modes: list[bool], repeat: int, used: int, loads: list[float]
) -> list[tuple[str, float, str]]:
    folder = Path(tempfile.mkdtemp(prefix="bench-grade-"))
    try:
        n = _class(folder, assignment, copies)
        _check(_grade(folder, assignment, jobs, modes[0])[2])  # warm-up: the page cache
        wall = {mode: float("inf") for mode in modes}
        cpu = {mode: float("inf") for mode in modes}
        for i in range(repeat):
            for mode in modes if i % 2 == 0 else modes[::-1]:  # alternate which mode goes first
                loads.append(os.getloadavg()[0])
                seconds, used_cpu, results = _grade(folder, assignment, jobs, mode)
                _check(results)
                wall[mode], cpu[mode] = min(wall[mode], seconds), min(cpu[mode], used_cpu / n)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = []
    load = f"load average {min(loads):.1f}-{max(loads):.1f}"
    for mode in modes:
        label = "in the sandbox" if mode else "without the sandbox"
        rows.append(
            (
                f"{assignment}: submissions per minute, {n} submissions, --jobs {jobs}, {label}",
                60 * n / wall[mode],
                f"best of {repeat}: {wall[mode]:.1f} s on {used} CPU(s), {load}",
            )
        )
        rows.append(
            (
                f"{assignment}: CPU seconds per submission (the whole process tree), {label}",
                cpu[mode],
                f"so about {60 * used / cpu[mode]:.0f} submissions per minute on {used} otherwise idle CPU(s)",
            )
        )
    if len(modes) == 2:
        rows.append((f"{assignment}: sandbox cost in wall-clock time", 100 * (wall[True] / wall[False] - 1), "%"))
        rows.append((f"{assignment}: sandbox cost in CPU time", 100 * (cpu[True] / cpu[False] - 1), "%"))
    return rows


# Grades a folder with `batch.grade_all` and prints each result's CPU split (a child process, so that its
# fork server and every process that server forked are counted when it exits).
WHERE = r"""
import json, sys
from pathlib import Path
from course_grader.batch import GradeOptions, grade_all
folder, solutions, out, assignment, jobs = sys.argv[1:6]
results = grade_all(Path(folder), Path(solutions), Path(out), GradeOptions(jobs=int(jobs), assignments=[assignment]),
                    progress=lambda line: None)
print(json.dumps([{"cpu": r.cpu, "full": r.score == r.max_score, "status": r.status} for r in results]))
"""


def _import_torch_cpu() -> float:
    """CPU seconds of a fresh Python importing torch (median of 3): the floor of a fresh kernel's start."""
    times = []
    for _ in range(3):
        _reap()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return sorted(times)[1]


def where_cpu_goes(assignment: str, copies: int, jobs: int) -> list[tuple[str, float, str]]:
    """A batch of `copies` correct submissions (`batch.grade_all`, in the sandbox): each submission's CPU
    seconds split by where they went (its kernel's start, its cells, its checking process: the checks, the
    wire, that process's own start), and what is left for the batch as a whole (the grader's start, the fork
    server and its imports, the bubblewrap processes, the gradebook and the exports)."""
    folder, out = Path(tempfile.mkdtemp(prefix="bench-grade-")), Path(tempfile.mkdtemp(prefix="bench-grade-out-"))
    try:
        for i in range(copies):
            (folder / f"solved{i:02d}").mkdir()
            name = f"{assignment}.ipynb"
            shutil.copyfile(REPO / "solutions" / name, folder / f"solved{i:02d}" / name)
        _reap()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        args = [str(folder), str(REPO / "solutions"), str(out), assignment, str(jobs)]
        proc = subprocess.run([sys.executable, "-c", WHERE, *args], capture_output=True, text=True)
        _reap()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"grading failed: {proc.stderr[-2000:]}")
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    if len(results) != copies or not all(r["full"] for r in results):
        raise RuntimeError(f"grading went wrong: {results[:3]}")
    total = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    parts = {
        k: sum(r["cpu"].get(k, 0.0) for r in results) / copies
        for k in ("kernel start", "kernel cells", "checking process")
    }
    per_submission = sum(parts.values())
    batch = total - copies * per_submission
    split = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
    torch_s = _import_torch_cpu()
    return [
        (
            f"{assignment}: CPU seconds of one correct submission, by where they went (in the sandbox)",
            per_submission,
            f"{split}; mean of {copies}, --jobs {jobs}",
        ),
        (
            f"{assignment}: one correct submission's CPU time over that of `python -c 'import torch'` in the same run",
            per_submission / torch_s,
            f"importing torch took {torch_s:.2f} CPU-s here (median of 3): each slot's zygote pays it once a "
            "batch, and a kernel forked from it does not",
        ),
        (
            f"{assignment}: CPU seconds of the batch as a whole (grader, fork server, zygotes and their imports, "
            "bubblewrap, gradebook, exports)",
            batch,
            f"{total:.1f} CPU-s for {copies} submissions in all, so {batch / copies:.2f} per submission at this size",
        ),
    ]


def hostile_batch(assignment: str, copies: int, jobs: int, repeat: int, sandbox: bool) -> list[tuple[str, float, str]]:
    """The class with and without one submission that hits every limit, alternating."""
    plain, hostile = Path(tempfile.mkdtemp(prefix="bench-grade-")), Path(tempfile.mkdtemp(prefix="bench-grade-"))
    try:
        n = _class(plain, assignment, copies)
        _class(hostile, assignment, copies, hostile=True)
        runs = {False: [], True: []}
        for i in range(repeat):
            for with_it in (True, False) if i % 2 == 0 else (False, True):
                seconds, cpu, results = _grade(hostile if with_it else plain, assignment, jobs, sandbox, HOSTILE_LIMITS)
                _check(results)
                runs[with_it].append((seconds, cpu, results))
    finally:
        shutil.rmtree(plain, ignore_errors=True)
        shutil.rmtree(hostile, ignore_errors=True)
    best = {k: min(v, key=lambda run: run[0]) for k, v in runs.items()}
    attacker = best[True][2]["zz_every_limit"]
    full = sum(1 for s, r in best[True][2].items() if s.startswith("solved") and _full_marks(r))
    limits = " ".join(HOSTILE_LIMITS)
    return [
        (
            f"{assignment}: {n} submissions and one that hits every limit ({limits}), --jobs {jobs}: extra wall-clock "
            "seconds",
            best[True][0] - best[False][0],
            f"{best[True][0]:.1f} s against {best[False][0]:.1f} s without it (best of {repeat}); it scored "
            f"{attacker['score']:g} / {attacker['max_score']:g} ({attacker['status']}) in {attacker['seconds']:.0f} s; "
            f"{full} of {copies} correct submissions at full marks",
        ),
        (
            f"{assignment}: the same, extra CPU seconds",
            best[True][1] - best[False][1],
            f"{best[True][1]:.1f} against {best[False][1]:.1f} CPU seconds for the whole batch",
        ),
    ]


def budgets(write: bool = False) -> list[tuple[str, float, str]]:
    """For every exercise set: the CPU time its worked solution uses when graded in the sandbox (its costliest
    cell, and in all) against the set's budgets (`metadata.course.limits`), as the share of the budget it
    uses; the target is at most a quarter. `write`: set each set's budgets to four times what it used
    (rounded up: cells to 5 s, at least 20; submissions to 30 s, at least 120), in its solution notebook."""
    import math

    from course_grader.grade import grade_submission
    from course_lib.runner.notebook import read_notebook, write_atomic
    from course_lib.runner.process import Limits

    rows = []
    for path in sorted((REPO / "solutions").glob("*.ipynb")):
        nb = read_notebook(path)
        limits = Limits().from_notebook(nb)
        res = grade_submission(path, path, "solution", limits=limits, sandbox=True)
        if res.score != res.max_score:
            raise RuntimeError(f"{path.name}: the solution scored {res.score} / {res.max_score}")
        if write:
            cell = max(20, 5 * math.ceil(4 * res.max_cell_cpu / 5))
            total = max(120, 30 * math.ceil(4 * res.cpu_seconds / 30))
            nb.setdefault("metadata", {}).setdefault("course", {})["limits"] = {
                "cell_cpu_s": cell,
                "total_cpu_s": total,
            }
            write_atomic(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")  # the file's own key order
            limits = Limits().from_notebook(nb)
        share = max(res.max_cell_cpu / limits.cell_cpu_s, res.cpu_seconds / limits.total_cpu_s)
        rows.append(
            (
                f"{path.stem}: a correct submission's CPU time against its budget",
                share,
                f"costliest cell {res.max_cell_cpu:.1f} of {limits.cell_cpu_s:g} CPU-s, in all {res.cpu_seconds:.1f} "
                f"of {limits.total_cpu_s:g} (the share is the larger; target at most 0.25)",
            )
        )
    return rows


# What the same rows said before the grader became one pipeline (bench/RESULTS.md at 584cf70), kept beside
# today's so that the two can be read together; they were measured then, not in this run.
BEFORE = [
    (
        "06_attention: CPU seconds per submission (the whole process tree), in the sandbox, before the pipeline",
        3.1,
        "recorded at 584cf70: 10 submissions, --jobs 2, load average 5.1-5.3",
    ),
    (
        "09_transformer_block: CPU seconds per submission (the whole process tree), in the sandbox, "
        "before the pipeline",
        3.9,
        "recorded at 584cf70: 4 submissions, --jobs 2, load average 5.1-5.3",
    ),
    (
        "06_attention: CPU seconds per submission (the whole process tree), in the sandbox, before the zygotes",
        3.06,
        "recorded at 2104099, each kernel started by bubblewrap and importing torch (kernel start 2.32 CPU-s): "
        "40 submissions, --jobs 2, 36.2 a minute, load average 1.7-2.1",
    ),
    (
        "09_transformer_block: CPU seconds per submission (the whole process tree), in the sandbox, before the zygotes",
        3.94,
        "recorded at 2104099 (kernel start 1.88 CPU-s): 20 submissions, --jobs 2, 26.6 a minute, load average 1.7-2.1",
    ),
]


def run(copies: int = 20, jobs: int = 2, cpus: int | None = 2, repeat: int = 2) -> list[tuple[str, float, str]]:
    """Rows (what, value, details); see the module's notes."""
    from course_grader import budgets as cgroups
    from course_grader.sandbox import sandbox_status, seccomp_usable

    _subreaper()
    if cpus and hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > cpus:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cpus])  # the grader and its children inherit it
    used = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ok, why = sandbox_status()
    modes = [True, False] if ok else [False]
    loads: list[float] = []
    rows = budgets() if ok else []
    rows += throughput("06_attention", copies, jobs, modes, repeat, used, loads)
    rows += throughput("09_transformer_block", max(2, copies // 2), jobs, modes[:1], 1, used, loads)
    rows += BEFORE
    if ok:
        rows += where_cpu_goes("06_attention", 8, jobs) + where_cpu_goes("09_transformer_block", 4, jobs)
    if ok:  # never without the sandbox: its fork bomb would meet no process limit
        rows += hostile_batch("06_attention", max(2, copies // 2), jobs, repeat, ok)
    controllers = cgroups.detect()
    rows.append(
        (
            "budgets in force",
            float("nan"),
            cgroups.summary(controllers, ok and seccomp_usable()) + ("" if ok else f"; no sandbox: {why}"),
        )
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.grading", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--copies", type=int, default=20, help="students per kind (solved, blank) for lesson 06")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2, help="pin to this many CPUs (0: all)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--write-budgets",
        action="store_true",
        help="measure each exercise set's correct submission and write its CPU budgets (4x) into its solution notebook",
    )
    parser.add_argument(
        "--where", action="store_true", help="only where a correct submission's CPU time goes (sets 06 and 09)"
    )
    args = parser.parse_args(argv)
    if args.where:
        _subreaper()
        for what, value, detail in where_cpu_goes("06_attention", 8, args.jobs) + where_cpu_goes(
            "09_transformer_block", 4, args.jobs
        ):
            print(f"  {value:7.2f}  {what} ({detail})", flush=True)
        return 0
    if args.write_budgets:
        for what, value, detail in budgets(write=True):
            print(f"  {value:7.2f}  {what} ({detail})", flush=True)
        return 0
    print("Grading (target: >= 60 submissions a minute, <= 1.2 CPU-s each, at --jobs 2 on 2 cores):")
    for what, value, detail in run(args.copies, args.jobs, args.cpus or None, args.repeat):
        print(f"  {value:7.1f}  {what} ({detail})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
