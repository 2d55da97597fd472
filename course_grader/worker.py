"""Check each submission in a short-lived process of its own, watched and bounded from outside.

`run_batch(tasks, target, slots=N, ...)` keeps N processes at work, each running `target` for one
task (one submission) and then ending:

- **fresh for each submission, cheaply**: the processes are forked from a server process that has
  imported numpy, torch, the checks and the grader once (multiprocessing's forkserver), so a fresh
  process costs a fork (about 0.1 s), not the two CPU-seconds of those imports;
- **bounded inside**: an address-space limit (what is mapped at the start plus `memory_mb`) and a
  CPU-time limit (the task's deadline); where the host allows it (see `budgets`), a cgroup of its
  own with a memory limit and a CPU share (`job-N/checker`), and its sandboxes' cgroups beside it;
- **bounded from outside**: killed, with everything it started, once it has run `deadline_s`
  seconds, whatever it is doing: building a set in C, in a system call, anywhere no alarm inside
  the process could stop it;
- **one death costs one submission**: a process that is killed (by the deadline, by the kernel's
  OOM killer, by someone's `kill`) or crashes gives its own task an `Ending` (`on_failure` turns
  it into a row that says what happened); the other tasks go on in their own processes;
- **results as they come**: `on_result` gets each task's result as soon as its process has ended
  and everything it started is gone, so the caller can commit it at once; Ctrl-C (or SIGTERM, see
  `grade`) ends the running processes and loses only what they were doing.

The processes ignore SIGINT (the batch decides when they end) and die with the server they were
forked from, which dies with the batch.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import resource
import signal
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Callable

import psutil

from .budgets import Group

PRELOAD_ENV = "COURSE_GRADER_PRELOAD"  # modules the server imports once (see `preload`), comma-separated
BASE_PRELOAD = ("numpy", "torch", "IPython.core.inputtransformer2", "course_lib.checks", "course_grader.grade")
CHECKER_ALLOWANCE_MB = 1024  # the checking process's memory on top of its budget: the teacher's references, decoding


@dataclass
class Task:
    key: Any  # the caller's name for it
    args: tuple  # target(*args, budget=group)
    deadline_s: float  # wall-clock seconds from its start after which its process is killed


@dataclass
class Ending:
    """How a task's process ended without a result."""

    status: str  # "stopped" (killed at its deadline) or "grader error" (it died or failed)
    message: str
    seconds: float = 0.0


@dataclass
class _Running:
    task: Task
    process: Any
    conn: Any
    started: float
    group: Group | None
    result: Any = None
    family: list = field(default_factory=list)  # its descendants, last seen (to end them if it dies)
    looked: float = 0.0


def context():
    """The forkserver context, its server preloading the modules the checks need."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["course_grader.preload"])
    return ctx


def run_batch(
    tasks: list[Task],
    target: Callable,
    *,
    slots: int,
    on_result: Callable[[Task, Any], None],
    on_failure: Callable[[Task, Ending], None],
    group: Group | None = None,
    memory_mb: int | None = None,
    preload: list[str] = (),
) -> None:
    """Run `target(*task.args, budget=job_group)` for every task in a process of its own, `slots` at a time.

    `group`: the batch's cgroup (see `budgets.batch_group`), under which each task gets `job-N` (and in it
    `checker`, for its process); `memory_mb`: the process's address-space allowance (and, with a memory
    cgroup, its limit). `preload`: modules the server imports, besides numpy, torch and the checks."""
    if preload:
        os.environ[PRELOAD_ENV] = ",".join(dict.fromkeys([*BASE_PRELOAD, *preload]))
    ctx = context()
    pending, running = deque(tasks), []
    try:
        while pending or running:
            while pending and len(running) < max(1, slots):
                running.append(_start(ctx, pending.popleft(), target, group, memory_mb))
            waiting = [r.conn for r in running if r.conn is not None and r.result is None]
            waiting += [r.process.sentinel for r in running]
            wait(waiting, timeout=0.5)
            now = time.monotonic()
            for r in list(running):
                _collect(r)
                if r.process.exitcode is not None or not r.process.is_alive():
                    _collect(r)  # what it sent just before it ended
                    running.remove(r)
                    _finish(r, on_result, on_failure)
                elif now - r.started > r.task.deadline_s:
                    _kill(r)
                    running.remove(r)
                    seconds = time.monotonic() - r.started
                    on_failure(
                        r.task,
                        Ending(
                            "stopped",
                            f"it was still being checked after {seconds:.0f} s (its limit: {r.task.deadline_s:g} s)",
                            seconds,
                        ),
                    )
                elif now - r.looked > 1.0:
                    _look(r)
    finally:
        for r in running:  # interrupted: end what is running; its tasks are neither done nor failed
            _kill(r)


def _start(ctx, task: Task, target: Callable, group: Group | None, memory_mb: int | None) -> _Running:
    job = group.child(f"job-{task.key}") if group is not None else None
    checker = None
    if job is not None and job.folders:
        memory = (memory_mb + CHECKER_ALLOWANCE_MB) * 2**20 if memory_mb else None
        checker = job.child("checker", memory_bytes=memory, only=("memory", "cpu"))
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_work,
        args=(send, target, task.args, job, checker, memory_mb, task.deadline_s),
        name=f"course-grade-{task.key}",
        daemon=False,
    )
    process.start()
    send.close()
    return _Running(task, process, receive, time.monotonic(), job, looked=time.monotonic())


def _collect(r: _Running) -> None:
    """Take the result if it has arrived."""
    if r.conn is None or r.result is not None:
        return
    try:
        if r.conn.poll():
            r.result = r.conn.recv()
    except (EOFError, OSError):
        r.conn.close()
        r.conn = None
    except Exception as err:  # noqa: BLE001 - a result that does not unpickle: its task failed
        r.result = ("error", f"its result could not be read ({type(err).__name__}: {err})")


def _look(r: _Running) -> None:
    r.looked = time.monotonic()
    try:
        r.family = psutil.Process(r.process.pid).children(recursive=True)
    except psutil.Error:
        pass


def _finish(r: _Running, on_result, on_failure) -> None:
    r.process.join(timeout=5)
    seconds = time.monotonic() - r.started
    exitcode = r.process.exitcode
    _end_family(r)
    if r.conn is not None:
        r.conn.close()
    if r.result is not None and r.result[0] == "ok":
        on_result(r.task, r.result[1])
        return
    if r.result is not None:  # target raised: a bug in the grader, told with the last lines of its traceback
        lines = [ln for ln in str(r.result[1]).strip().splitlines() if ln.strip()]
        on_failure(
            r.task, Ending("grader error", f"the grader failed on it: {lines[-1] if lines else 'no message'}", seconds)
        )
        return
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        why = f"the process checking it was killed ({name})"
        if -exitcode == signal.SIGKILL:
            why += ": by someone's kill, or by the system for want of memory"
    else:
        why = f"the process checking it ended without a result (exit status {exitcode})"
    on_failure(r.task, Ending("grader error", why, seconds))


def _kill(r: _Running) -> None:
    """Kill the task's process and everything it started."""
    _look(r)
    try:
        r.process.kill()
    except (OSError, ValueError):
        pass
    r.process.join(timeout=5)
    _end_family(r)
    if r.conn is not None:
        r.conn.close()
        r.conn = None


def _end_family(r: _Running) -> None:
    for p in r.family:
        try:
            p.kill()
        except psutil.Error:
            pass
    if r.group is not None:
        r.group.remove()


# --- inside the task's process -------------------------------------------------------------------------------


def _work(
    conn, target: Callable, args: tuple, job: Group | None, checker: Group | None, memory_mb: int | None, cpu_s: float
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the batch's: it ends this process when it must
    _die_with_parent()
    if checker is not None:
        checker.join()
    _limit_self(memory_mb, cpu_s)
    try:
        result = ("ok", target(*args, budget=job))
    except BaseException:  # noqa: BLE001 - told to the batch, which records it for this task only
        result = ("error", traceback.format_exc(limit=6)[-4000:])
    try:
        conn.send(result)
    finally:
        conn.close()


def _die_with_parent() -> None:
    """SIGKILL when the server that forked this process ends (it ends with the batch)."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the call
        os._exit(1)


def _limit_self(memory_mb: int | None, cpu_s: float) -> None:
    """Soft limits only, so that the sandboxes this process starts can set their own (see `kernel.set_limits`)."""
    if memory_mb:
        try:
            with open("/proc/self/statm") as f:
                mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            soft = mapped + (memory_mb + CHECKER_ALLOWANCE_MB) * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        except (OSError, ValueError):
            pass
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(cpu_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    except (OSError, ValueError):
        pass
