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

from course_lib.runner.text import inert

from .budgets import Group

PRELOAD_ENV = "COURSE_GRADER_PRELOAD"  # modules the server imports once (see `preload`), comma-separated
# torch's shape functions import sympy on their first call (torch.fx.experimental.symbolic_shapes): two
# CPU-seconds that every checking process would pay again, were the server not to import it once.
BASE_PRELOAD = (
    "numpy",
    "torch",
    "torch.fx.experimental.symbolic_shapes",
    "IPython.core.inputtransformer2",
    "course_lib.checks",
    "course_grader.grade",
)
CHECKER_ALLOWANCE_MB = 1024  # the checking process's memory on top of its budget: the teacher's references, decoding
GRADER_OOM_SCORE = -500  # the batch and its server: the OOM killer picks a learner's kernel long before them
CHECKER_OOM_SCORE = 300  # a checking process (its kernels raise theirs to the maximum, see `kernel.set_limits`)


@dataclass
class Task:
    key: Any  # the caller's name for it
    args: tuple  # target(*args, budget=group)
    deadline_s: float  # wall-clock seconds from its start after which its process is killed
    tries: list[str] = field(default_factory=list)  # how its earlier tries ended without a result


@dataclass
class Ending:
    """How a task's process ended without a result."""

    status: str  # "stopped" (killed at its deadline) or "grader error" (it died or failed)
    message: str
    seconds: float = 0.0
    server_died: bool = False  # the server it was forked from ended meanwhile: no fault of the task's


@dataclass
class _Running:
    task: Task
    process: Any
    conn: Any
    started: float
    group: Group | None
    server: int | None = None  # the process id of the server it was forked from
    slot: int = 0  # which of the batch's slots it holds (see `run_batch`'s `per_slot`)
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
    retries: int = 1,
    per_slot: list[dict] = (),
) -> None:
    """Run `target(*task.args, budget=job_group)` for every task in a process of its own, `slots` at a time.

    `group`: the batch's cgroup (see `budgets.batch_group`), under which each task gets `job-N` (and in it
    `checker`, for its process); `memory_mb`: the process's address-space allowance (and, with a memory
    cgroup, its limit). `preload`: modules the server imports, besides numpy, torch and the checks.
    `per_slot[i]`: keyword arguments `target` gets as well when its task holds slot i (of 0 .. slots-1):
    something that serves one task at a time, such as a zygote (see `batch`).

    A failure of the grader is never a result: a task whose process could not start, ended without a
    result (killed, crashed, its server gone), was stopped at its deadline, or whose result `on_result`
    could not take (it raised), is tried again, `retries` times, once every other task has had its first
    try; only then does `on_failure` get its `Ending`, which says how every try ended."""
    if preload:
        os.environ[PRELOAD_ENV] = ",".join(dict.fromkeys([*BASE_PRELOAD, *preload]))
    _protect_from_oom_killer()
    ctx = context()
    pending, running, again = deque(tasks), [], deque()

    def failed(task: Task, ending: Ending) -> None:
        if len(task.tries) < retries:
            task.tries.append(ending.message)
            again.append(task)
            return
        if task.tries:
            earlier = "; ".join(f"try {i}: {why}" for i, why in enumerate(task.tries, 1))
            ending.message += f" (it was tried {len(task.tries) + 1} times; {earlier})"
        on_failure(task, ending)

    try:
        while pending or running or again:
            if not pending and not running:  # every task has had its first try: now the second ones
                pending, again = again, deque()
            while pending and len(running) < max(1, slots):
                task = pending.popleft()
                slot = min(set(range(max(1, slots))) - {r.slot for r in running})
                extra = per_slot[slot] if slot < len(per_slot) else {}
                for attempt in (1, 2):  # a start that fails did not run the task: start it again at once, once
                    try:
                        running.append(_start(ctx, task, target, group, memory_mb, slot, extra))
                        break
                    except Exception as err:  # noqa: BLE001 - the server that forks the processes died, or fork failed
                        ending = _start_failure(err)  # a dead server is made sure of: the next start makes a new one
                        if attempt == 2:
                            failed(task, ending)
            waiting = [r.conn for r in running if r.conn is not None and r.result is None]
            waiting += [r.process.sentinel for r in running]
            wait(waiting, timeout=0.5)
            now = time.monotonic()
            for r in list(running):
                _collect(r)
                if r.process.exitcode is not None or not r.process.is_alive():
                    _collect(r)  # what it sent just before it ended
                    running.remove(r)
                    _finish(r, on_result, failed)
                elif now - r.started > r.task.deadline_s:
                    _kill(r)
                    running.remove(r)
                    seconds = time.monotonic() - r.started
                    failed(
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


def _start_failure(err: BaseException) -> Ending:
    """Why a checking process could not be started. A broken connection to the server means it has ended
    (or is ending): it is made sure of, so that the next start begins with a new one."""
    why = f"its checking process could not be started ({type(err).__name__}: {inert(' '.join(str(err).split()), 300)})"
    gone = isinstance(err, (EOFError, ConnectionError, FileNotFoundError)) or not _alive(_server_pid())
    if gone:
        _end_server(_server_pid())
        why += "; the grader's server process that starts them had ended (killed from outside, or for want of memory)"
    return Ending("grader error", why, server_died=gone)


def _server_pid() -> int | None:
    """The process id of the forkserver the checking processes come from (None before the first start)."""
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def _alive(pid: int | None) -> bool:
    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _end_server(pid: int | None) -> None:
    """Make sure the server `pid` is gone (killed if it lingers) and wait until it is, so that the next start
    finds it dead and starts a new one: multiprocessing restarts its forkserver only once it has exited."""
    if pid is None or pid != _server_pid():  # not the server in use (already replaced): nothing to do
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    end = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.02)


def _protect_from_oom_killer() -> None:
    """Make the batch and its server the last processes the kernel's OOM killer picks (where this user
    may lower the score: root); the checking processes and kernels raise theirs again (see `_work`)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(GRADER_OOM_SCORE))
    except OSError:
        pass


def _start(
    ctx,
    task: Task,
    target: Callable,
    group: Group | None,
    memory_mb: int | None,
    slot: int = 0,
    extra: dict | None = None,
) -> _Running:
    job = group.child(f"job-{task.key}") if group is not None else None
    checker = None
    if job is not None and job.folders:
        memory = (memory_mb + CHECKER_ALLOWANCE_MB) * 2**20 if memory_mb else None
        checker = job.child("checker", memory_bytes=memory, only=("memory", "cpu"))
    from multiprocessing import forkserver

    forkserver.ensure_running()  # (a new one, if the last one ended): the process knows which server is its parent
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_work,
        args=(send, target, task.args, job, checker, memory_mb, task.deadline_s, _server_pid(), extra or {}),
        name=f"course-grade-{task.key}",
        daemon=False,
    )
    try:
        process.start()
    except BaseException:
        receive.close()
        if job is not None:
            job.remove()
        raise
    finally:
        send.close()
    return _Running(
        task, process, receive, time.monotonic(), job, server=_server_pid(), slot=slot, looked=time.monotonic()
    )


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


def _finish(r: _Running, on_result, failed) -> None:
    r.process.join(timeout=5)
    seconds = time.monotonic() - r.started
    exitcode = r.process.exitcode
    _end_family(r)
    if r.conn is not None:
        r.conn.close()
    if r.result is not None and r.result[0] == "ok":
        try:
            on_result(r.task, r.result[1])
        except Exception as err:  # noqa: BLE001 - a result that cannot be recorded is the grader's failure
            failed(
                r.task,
                Ending(
                    "grader error",
                    f"its result could not be recorded ({type(err).__name__}: {inert(err, 300)})",
                    seconds,
                ),
            )
        return
    if r.result is not None:  # target raised: a bug in the grader, told with the last lines of its traceback
        lines = [ln for ln in str(r.result[1]).strip().splitlines() if ln.strip()]
        failed(
            r.task,
            Ending(
                "grader error", f"the grader failed on it: {inert(lines[-1] if lines else 'no message', 300)}", seconds
            ),
        )
        return
    if not _alive(r.server):  # its server ended (a kill, the OOM killer): it took this process with it
        _end_server(r.server)  # gone for good before the next start, which then begins a new one
        why = (
            f"the grader's own server process (pid {r.server}), from which the checking processes are started, "
            "ended while this submission was being checked, and took its checking process with it: a failure "
            "of the grader, not of this submission"
        )
        failed(r.task, Ending("grader error", why, seconds, server_died=True))
        return
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        why = f"the process checking it was killed ({name})"
        if -exitcode == signal.SIGKILL:
            why += ": by someone's kill, or by the system for want of memory"
    else:
        why = f"the process checking it ended without a result (exit status {exitcode})"
    failed(r.task, Ending("grader error", why, seconds))


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
    conn,
    target: Callable,
    args: tuple,
    job: Group | None,
    checker: Group | None,
    memory_mb: int | None,
    cpu_s: float,
    server: int | None,
    extra: dict,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the batch's: it ends this process when it must
    _die_with_parent(server)
    try:  # the server's low score is not for this process: it goes before the batch when memory runs out
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(CHECKER_OOM_SCORE))
    except OSError:
        pass
    if checker is not None:
        checker.join()
    _limit_self(memory_mb, cpu_s)
    try:
        result = ("ok", target(*args, budget=job, **extra))
    except BaseException:  # noqa: BLE001 - told to the batch, which records it for this task only
        result = ("error", traceback.format_exc(limit=6)[-4000:])
    try:
        conn.send(result)
    finally:
        conn.close()


def _die_with_parent(server: int | None) -> None:
    """SIGKILL when the server that forked this process ends (it ends with the batch); at once if it has
    ended already (this process's parent is then another one: init, or a subreaper)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if server is not None and os.getppid() != server:
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
