"""The grader's batch (`course_grader.worker.run_batch`): each submission is checked in a process of its
own, bounded and watched from outside, so one that never ends, dies or eats memory costs only itself.

The tasks here are plain functions (no kernel, no sandbox): one stuck in C code that no signal inside
its process can interrupt, one that kills its own process, one that raises, one that allocates past
its address-space limit, and ordinary ones beside them. The budgets module's pieces that need no
batch (the seccomp program, stale folders, the cgroup tree) are tested here too.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from course_grader import budgets
from course_grader.worker import Task, run_batch

# --- tasks (module-level: the checking processes import them by name) ----------------------------------------


def route(kind: str, x: int, budget=None):
    """The target of every task: `kind` says what it does."""
    if kind == "stuck":  # a C loop with no signal check (a sum of Python ints): no alarm could stop it
        signal.signal(signal.SIGALRM, lambda *a: None)
        return sum(range(10**13))
    if kind == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "raises":
        raise ValueError("a bug in the checks")
    if kind == "hog":
        try:
            bytearray(64 * 2**30)  # 64 GB: past the process's address-space limit
        except MemoryError:
            return "MemoryError"
        return "allocated"
    if kind == "cgroup":  # which cgroups the checking process is in
        return open("/proc/self/cgroup").read()
    if kind.startswith("once:"):  # killed on its first try only (the marker file remembers the try)
        marker = Path(kind.removeprefix("once:"))
        if not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
    if kind == "slow":
        time.sleep(2)
    return x * 2


def test_one_stuck_dead_or_failing_task_costs_only_itself():
    """critical: a worker stuck in C code could not be stopped, and one that died broke the
    pool for everyone after it."""
    kinds = ["stuck", "ok", "killed", "ok", "raises", "hog", "ok", "cgroup"]
    tasks = [Task(f"{i}-{kind}", (kind, i), deadline_s=3 if kind == "stuck" else 120) for i, kind in enumerate(kinds)]
    results, endings = {}, {}
    started = time.monotonic()
    group = budgets.batch_group(budgets.detect(), 2)
    folders = list(group.folders.values()) if group is not None else []
    try:
        run_batch(
            tasks,
            route,
            slots=2,
            memory_mb=512,
            group=group,
            on_result=lambda task, value: results.setdefault(task.key, value),
            on_failure=lambda task, ending: endings.setdefault(task.key, ending),
        )
    finally:
        if group is not None:
            group.remove()
    seconds = time.monotonic() - started
    in_groups = results.pop("7-cgroup")
    assert results == {"1-ok": 2, "3-ok": 6, "6-ok": 12, "5-hog": "MemoryError"}, (results, endings)
    assert set(endings) == {"0-stuck", "2-killed", "4-raises"}, endings
    assert endings["0-stuck"].status == "stopped" and "its limit: 3 s" in endings["0-stuck"].message, endings
    assert endings["2-killed"].status == "grader error" and "killed (SIGKILL)" in endings["2-killed"].message
    raised = endings["4-raises"]
    assert raised.status == "grader error" and "ValueError: a bug in the checks" in raised.message, raised
    for ending in endings.values():  # tried again at the end of the batch before a failure is final
        assert "(it was tried 2 times; try 1: " in ending.message, ending.message
    assert seconds < 120, f"the batch took {seconds:.0f} s"
    if group is not None:  # the checking process is in its job's own group
        assert f"course-grade-{os.getpid()}/job-7-cgroup/checker" in in_groups, in_groups
        assert not any(os.path.exists(f) for f in folders), "the batch's groups are removed"


def test_a_task_whose_process_dies_once_is_tried_again_and_gets_its_result(tmp_path):
    """A checking process that dies without a verdict (killed, the OOM killer) is not a result: the task is
    tried again once the others have had their turn, and a second try that works is what counts."""
    tasks = [Task("once", (f"once:{tmp_path / 'tried'}", 1), 60), Task("ok", ("ok", 2), 60)]
    results, endings = {}, {}
    run_batch(
        tasks,
        route,
        slots=2,
        on_result=lambda task, value: results.setdefault(task.key, value),
        on_failure=lambda task, ending: endings.setdefault(task.key, ending),
    )
    assert results == {"once": 2, "ok": 4} and not endings, (results, endings)
    assert tasks[0].tries and "killed (SIGKILL)" in tasks[0].tries[0], tasks[0].tries


def test_the_server_killed_at_a_start_or_during_a_check_costs_no_task(monkeypatch):
    """medium: the forkserver all checking processes come from was a single point of failure. Killed while a
    process was being started, the batch died (an uncaught EOFError) with no results; killed while tasks
    ran, each of them was a failure. Now a start that fails, and every task the server took with it, are
    tried again, with a new server."""
    from multiprocessing import forkserver

    from course_grader import worker

    real_start, starts = worker._start, []

    def start(*args):
        starts.append(1)
        if len(starts) == 3:  # the server dies just as this task's process is being started
            os.kill(forkserver._forkserver._forkserver_pid, signal.SIGKILL)
            time.sleep(0.2)
        return real_start(*args)

    monkeypatch.setattr(worker, "_start", start)
    killed = []

    def on_result(task, value):
        results[task.key] = value
        if not killed:  # the first result is in, and another task is being checked: the server dies again
            killed.append(forkserver._forkserver._forkserver_pid)
            os.kill(killed[0], signal.SIGKILL)

    tasks = [Task(f"t{i}", ("slow", i), 60) for i in range(5)]
    results, endings = {}, {}
    run_batch(
        tasks, route, slots=2, on_result=on_result, on_failure=lambda task, ending: endings.setdefault(task.key, ending)
    )
    assert results == {f"t{i}": 2 * i for i in range(5)} and not endings, (results, endings)
    assert any("server" in why for t in tasks for why in t.tries), [t.tries for t in tasks]


# --- budgets ----------------------------------------------------------------------------------------------------


def test_the_seccomp_program_refuses_memfd_shmget_and_foreign_abis():
    """critical: memfd and SysV memory are in nobody's RSS nor address space. The filter is a
    small BPF program; its jumps are checked here by interpreting it."""
    program = budgets.seccomp_filter()
    if program is None:
        return  # an architecture the filter is not written for: nothing to check
    audit, x32, numbers = budgets._ARCHES[os.uname().machine]
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]

    def run(arch: int, nr: int) -> int:
        pc, acc = 0, 0
        while True:
            code, jt, jf, k = ops[pc]
            if code == budgets._LD_W_ABS:
                acc = arch if k == 4 else nr
            elif code == budgets._RET_K:
                return k
            elif code in (budgets._JEQ_K, budgets._JGE_K):
                hit = acc == k if code == budgets._JEQ_K else acc >= k
                pc += jt if hit else jf
            pc += 1

    deny = budgets._ERRNO | 1
    for nr in numbers:
        assert run(audit, nr) == deny, nr
    for nr in (0, 1, 2, 9, 56, 57, 59, 231):  # read, write, open, mmap, clone, fork, execve, exit_group
        assert run(audit, nr) == budgets._ALLOW, nr
    assert run(0x40000003, 1) == deny, "a foreign architecture is refused"
    if x32:
        assert run(audit, x32 + 1) == deny, "x32 system calls are refused"


def test_stale_work_folders_are_removed_and_live_ones_kept():
    """low (20): a killed batch left its folders; the next start removes the ones nobody holds."""
    parent = Path(tempfile.mkdtemp(prefix="course-stale-test-"))
    try:
        live, lock = budgets.locked_folder(budgets.BATCH_PREFIX, str(parent))
        stale = parent / "course-grade-12345-abcdefgh"
        (stale / "0").mkdir(parents=True)
        foreign = parent / "course-grade-x1y2z3w4"  # not named by this version: never touched
        foreign.mkdir()
        removed = budgets.remove_stale((str(parent),))
        assert str(stale) in removed and not stale.exists(), removed
        assert live.exists() and foreign.exists()
        lock.release()
        assert str(live) in budgets.remove_stale((str(parent),)), "once its lock is released it is stale"
    finally:
        subprocess.run(["rm", "-rf", str(parent)], check=False)


def test_cgroups_in_force_are_reported_and_groups_clean_up():
    controllers = budgets.detect()
    lines = dict(budgets.describe(controllers, seccomp=True))
    for name, key in (("memory", "sandbox memory"), ("pids", "sandbox processes"), ("cpu", "sandbox CPU share")):
        assert lines[key].startswith("in force" if name in controllers else "NOT in force"), lines
    if not controllers:
        return
    group = budgets.batch_group(controllers, 2)
    folders = list(group.folders.values())
    try:
        leaf = group.child("job-0").child("kernel-0", memory_bytes=300 * 2**20, pids=20)
        proc = subprocess.Popen(["sleep", "30"])
        leaf.join(proc.pid)
        assert proc.pid in leaf.pids()
        if "memory" in leaf.folders:
            assert leaf.memory_usage() is not None and leaf.oom_kills() == 0
    finally:
        group.remove()
    assert proc.wait(timeout=10) == -signal.SIGKILL, "removing a group kills what is in it"
    assert folders and not any(os.path.exists(f) for f in folders)
