"""What bounds a submission from outside: cgroups, and what a killed batch leaves behind.

Every sandbox (and every process that checks a submission) gets a budget that counts everything it
uses, where the host lets the grader set one:

- **cgroups**, found at run time, never assumed: for each of the memory, pids and cpu controllers,
  cgroup v2 where this process's own cgroup can have children with that controller, else the v1
  hierarchy of that controller (Debian hosts and CI runners often mount v1 controllers read-write
  next to an almost empty v2 tree), else none. The grader makes one group per batch under its own
  cgroup (`course-grade-<pid>`), one per submission in it (`job-N`), and in that a leaf for the
  checking process (`checker`) and one for each start of the learner's kernel (`kernel-N`):

  - memory: a limit on the kernel's leaf that counts what RSS and RLIMIT_AS miss (shared memory,
    memfd files, tmpfs pages, the page tables and caches of every process in it; no swap);
  - pids: the number of processes and threads in the sandbox, whoever owns them;
  - cpu: each submission is one group with the weight of one process, however many processes it
    starts (60 busy loops in one sandbox slow a neighbour as much as one would); the batch as a
    whole weighs as much as its parallel jobs.

- **a seccomp filter** for the sandbox: see `seccomp`.

- **stale leftovers**: a batch that was killed (or a machine that rebooted) leaves its work folder
  (`course-grade-<pid>-*`, with the sandboxes' mount points in it) and its cgroups; the next batch
  removes them. A work folder is known to be stale because no process holds its lock (an flock on
  the folder, held while the batch runs); a cgroup because its batch's process is gone.

`describe()` says which of these are in force (`course doctor`, `course grade`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .seccomp import _ARCHES, seccomp_refuses, seccomp_works

CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")  # cpuacct: v1's CPU time (v2 counts it in every group)
BATCH_PREFIX = "course-grade-"
STAGE_PREFIX = "course-sandbox-"
_OWNED = re.compile(r"^(course-grade|course-sandbox)-(\d+)-[A-Za-z0-9_]+$")  # folders this version makes
_BATCH_GROUP = re.compile(r"^course-grade-(\d+)$")


# --- cgroups: what this host lets us do -------------------------------------------------------------------


@dataclass(frozen=True)
class Controller:
    """One controller as this process can use it: its version and the folder of our own cgroup in it."""

    name: str
    version: int  # 1 or 2
    own: str  # our own cgroup's folder in that hierarchy; our groups are made under it


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root inside the hierarchy, file system type, super options) of cgroup mounts."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                    found.append((fields[4].replace("\\040", " "), fields[3], tail[0], tail[2]))
    except OSError:
        pass
    return found


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> our path in that hierarchy, from /proc/self/cgroup."""
    paths = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                _, names, path = parts
                if names == "":
                    paths[""] = path
                for name in names.split(","):
                    if name:
                        paths[name] = path
    except OSError:
        pass
    return paths


def _join(mount: str, root: str, path: str) -> str:
    rel = path[len(root) :] if root != "/" and path.startswith(root) else path
    return os.path.normpath(os.path.join(mount, rel.lstrip("/")))


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _v2_usable(own: str, name: str) -> bool:
    """Can a child of our v2 cgroup have controller `name`? Only if our cgroup hands it down already, or
    we may switch it on (a root cgroup); a cgroup with processes in it cannot, and we never move ours."""
    if name not in _read(os.path.join(own, "cgroup.controllers")).split():
        return False
    if name in _read(os.path.join(own, "cgroup.subtree_control")).split():
        return os.access(own, os.W_OK)
    try:
        _write(os.path.join(own, "cgroup.subtree_control"), f"+{name}")
        return True
    except OSError:
        return False


def _can_make_children(folder: str) -> bool:
    probe = os.path.join(folder, f"course-probe-{os.getpid()}-{time.monotonic_ns() % 10**9}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        os.rmdir(probe)
    except OSError:
        pass
    return True


NO_CGROUPS_ENV = "COURSE_GRADE_NO_CGROUPS"  # set to 1: use no cgroups (to compare, or where they misbehave)


def detect() -> dict[str, Controller]:
    """The controllers this process can give its own child groups, v2 preferred, found by trying."""
    if not os.path.isdir("/sys/fs/cgroup") or os.environ.get(NO_CGROUPS_ENV, "") not in ("", "0"):
        return {}
    mounts, own = _mounts(), _own_paths()
    found: dict[str, Controller] = {}
    v2 = next(((m, r) for m, r, kind, _ in mounts if kind == "cgroup2"), None)
    if v2 is not None and "" in own:
        folder = _join(v2[0], v2[1], own[""])
        if _can_make_children(folder):
            for name in CONTROLLERS:
                if _v2_usable(folder, name):
                    found[name] = Controller(name, 2, folder)
    for name in CONTROLLERS:
        if name in found or name not in own:
            continue
        mount = next(((m, r) for m, r, kind, opts in mounts if kind == "cgroup" and name in opts.split(",")), None)
        if mount is None:
            continue
        folder = _join(mount[0], mount[1], own[name])
        if _can_make_children(folder):
            found[name] = Controller(name, 1, folder)
    return found


# --- groups ----------------------------------------------------------------------------------------------


@dataclass
class Group:
    """One group of processes across the controllers in force: controller name -> its folder.

    Picklable (plain paths), so a worker process can make its own leaves under a job's group."""

    folders: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)

    def child(
        self,
        name: str,
        *,
        memory_bytes: int | None = None,
        pids: int | None = None,
        cpu_weight: float | None = None,
        only: tuple[str, ...] = CONTROLLERS,
    ) -> Group:
        """A new child group (in the controllers named by `only`) with these limits; a controller whose
        folder cannot be made is left out (the caller says what is in force)."""
        child = Group()
        for ctl, parent in self.folders.items():
            if ctl not in only:
                continue
            folder = os.path.join(parent, name)
            try:
                os.mkdir(folder)
            except FileExistsError:
                pass
            except OSError:
                continue
            child.folders[ctl], child.versions[ctl] = folder, self.versions[ctl]
        child.set_limits(memory_bytes=memory_bytes, pids=pids, cpu_weight=cpu_weight)
        return child

    def set_limits(
        self, *, memory_bytes: int | None = None, pids: int | None = None, cpu_weight: float | None = None
    ) -> None:
        for ctl, folder in self.folders.items():
            v2 = self.versions[ctl] == 2
            try:
                if ctl == "memory" and memory_bytes is not None:
                    if v2:
                        _write(os.path.join(folder, "memory.max"), str(int(memory_bytes)))
                        if os.path.exists(os.path.join(folder, "memory.swap.max")):
                            _write(os.path.join(folder, "memory.swap.max"), "0")
                    else:
                        _v1_memory_limit(folder, int(memory_bytes))
                elif ctl == "pids" and pids is not None:
                    _write(os.path.join(folder, "pids.max"), str(int(pids)))
                elif ctl == "cpu" and cpu_weight is not None:  # relative to one ordinary process
                    if v2:
                        _write(os.path.join(folder, "cpu.weight"), str(max(1, min(10000, round(100 * cpu_weight)))))
                    else:
                        _write(os.path.join(folder, "cpu.shares"), str(max(2, round(1024 * cpu_weight))))
            except OSError:
                pass

    def procs_files(self) -> list[str]:
        """The files a process writes its id to, to join this group in every controller."""
        return [os.path.join(folder, "cgroup.procs") for folder in self.folders.values()]

    def join(self, pid: int = 0) -> None:
        for path in self.procs_files():
            try:
                _write(path, str(pid or os.getpid()))
            except OSError:
                pass

    def memory_usage(self) -> int | None:
        folder = self.folders.get("memory")
        if folder is None:
            return None
        name = "memory.current" if self.versions["memory"] == 2 else "memory.usage_in_bytes"
        text = _read(os.path.join(folder, name)).strip()
        return int(text) if text.isdigit() else None

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process that was ever in this group or below it (exited ones too), or
        None where no controller counts it (v1 without cpuacct)."""
        folder = self.folders.get("cpuacct")
        if folder is not None and self.versions["cpuacct"] == 1:
            text = _read(os.path.join(folder, "cpuacct.usage")).strip()
            if text.isdigit():
                return int(text) / 1e9
        for ctl, folder in self.folders.items():
            if self.versions[ctl] == 2:
                found = re.search(r"^usage_usec (\d+)$", _read(os.path.join(folder, "cpu.stat")), re.M)
                if found:
                    return int(found.group(1)) / 1e6
        return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for going over its memory limit."""
        folder = self.folders.get("memory")
        if folder is None:
            return 0
        text = _read(os.path.join(folder, "memory.events" if self.versions["memory"] == 2 else "memory.oom_control"))
        found = re.search(r"^oom_kill (\d+)$", text, re.M)
        if found:
            return int(found.group(1))
        failcnt = _read(os.path.join(folder, "memory.failcnt")).strip()  # v1 kernels older than 4.13
        return 1 if failcnt.isdigit() and int(failcnt) > 0 and "under_oom 1" in text else 0

    def pids(self) -> set[int]:
        """Every process in this group and the groups under it."""
        found: set[int] = set()
        for folder in self.folders.values():
            for here, _, _ in os.walk(folder):
                for line in _read(os.path.join(here, "cgroup.procs")).split():
                    if line.isdigit():
                        found.add(int(line))
        return found

    def kill(self, timeout: float = 5.0) -> None:
        """Kill every process in this group and below, and wait (a while) until they are gone."""
        for ctl, folder in self.folders.items():
            if self.versions[ctl] == 2 and os.path.exists(os.path.join(folder, "cgroup.kill")):
                try:
                    _write(os.path.join(folder, "cgroup.kill"), "1")
                except OSError:
                    pass
        end = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left or time.monotonic() > end:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and remove the group's folders, innermost first."""
        self.kill()
        for folder in self.folders.values():
            _remove_tree(folder)
        self.folders.clear()


def _v1_memory_limit(folder: str, limit: int) -> None:
    """memory.limit_in_bytes, and with swap accounting memory.memsw.limit_in_bytes as well (no swap
    beyond the limit). The kernel wants memsw >= limit at every step, so the order depends on the direction."""
    memsw = os.path.join(folder, "memory.memsw.limit_in_bytes")
    plain = os.path.join(folder, "memory.limit_in_bytes")
    if not os.path.exists(memsw):
        _write(plain, str(limit))
        return
    current = _read(plain).strip()
    if current.isdigit() and int(current) > limit:
        _write(plain, str(limit))
        _write(memsw, str(limit))
    else:
        _write(memsw, str(limit))
        _write(plain, str(limit))


def _remove_tree(folder: str) -> None:
    for here, _, _ in sorted(os.walk(folder), key=lambda entry: -entry[0].count(os.sep)):
        for _ in range(50):
            try:
                os.rmdir(here)
                break
            except FileNotFoundError:
                break
            except OSError as err:
                if err.errno != errno.EBUSY:
                    break
                time.sleep(0.02)  # its last process is still exiting


def batch_group(controllers: dict[str, Controller], jobs: int) -> Group | None:
    """The batch's own group under ours (`course-grade-<pid>`), weighing as much as `jobs` processes."""
    if not controllers:
        return None
    top = Group({c.name: c.own for c in controllers.values()}, {c.name: c.version for c in controllers.values()})
    group = top.child(f"{BATCH_PREFIX}{os.getpid()}", cpu_weight=max(1, jobs))
    return group if group.folders else None


# --- what a killed batch left behind ----------------------------------------------------------------------


class FolderLock:
    """An flock held on a folder while its owner lives: a folder nobody holds is stale."""

    def __init__(self, folder: str | os.PathLike):
        self.fd: int | None = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def locked_folder(prefix: str, parent: str | None = None) -> tuple[Path, FolderLock]:
    """A new folder `<prefix><pid>-XXXXXXXX` (searchable by others: the sandbox's mount points live in it)
    and the lock that says it is in use."""
    folder = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent)
    os.chmod(folder, 0o711)
    return Path(folder), FolderLock(folder)


def _stale(folder: str) -> bool:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_stale(extra_folders: tuple[str, ...] = ()) -> list[str]:
    """Remove the work folders, sandbox mount-point folders and cgroups that killed batches left; what was removed.

    Only what this version of the grader names (`course-grade-<pid>-...`, `course-sandbox-<pid>-...`) and
    nobody holds the lock of; a cgroup `course-grade-<pid>` only once that process is gone."""
    removed = []
    for parent in dict.fromkeys([tempfile.gettempdir(), "/tmp", *extra_folders]):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            if _OWNED.match(name) and os.path.isdir(path) and not os.path.islink(path) and _stale(path):
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.exists(path):
                    removed.append(path)
    for ctl in detect().values():
        try:
            names = os.listdir(ctl.own)
        except OSError:
            continue
        for name in names:
            found = _BATCH_GROUP.match(name)
            if found and not _alive(int(found.group(1))):
                group = Group({ctl.name: os.path.join(ctl.own, name)}, {ctl.name: ctl.version})
                group.remove()
                removed.append(os.path.join(ctl.own, name))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


# --- what is in force ------------------------------------------------------------------------------------------


def describe(controllers: dict[str, Controller] | None = None, seccomp: bool | None = None) -> list[tuple[str, str]]:
    """(what, state) lines for `course doctor`: the budgets a sandbox gets on this host (`seccomp`: whether
    a sandbox starts with the filter here, which `sandbox.seccomp_usable` finds by starting one)."""
    controllers = detect() if controllers is None else controllers
    seccomp = seccomp_works() if seccomp is None else seccomp

    def state(name: str, what: str) -> str:
        c = controllers.get(name)
        return (
            f"in force ({what}; cgroup v{c.version} under {c.own})"
            if c is not None
            else f"NOT in force (no writable {name} cgroup here)"
        )

    lines = [
        ("sandbox memory", state("memory", "counts shared memory, memfd and tmpfs")),
        ("sandbox processes", state("pids", "counts every process and thread")),
        ("sandbox CPU share", state("cpu", "one submission weighs one process")),
    ]
    counted = controllers.get("cpuacct") or next((c for c in controllers.values() if c.version == 2), None)
    lines.append(
        (
            "sandbox CPU time",
            f"counted by the cgroup (v{counted.version}), exited processes included: the time limits"
            if counted is not None
            else "counted from the kernel's process tree (no cpuacct cgroup here): the time limits",
        )
    )
    lines.append(
        (
            "seccomp filter",
            f"in force (refuses {seccomp_refuses()})"
            if seccomp
            else f"NOT in force (written for {' and '.join(_ARCHES)} Linux with seccomp)",
        )
    )
    return lines


def summary(controllers: dict[str, Controller], seccomp: bool) -> str:
    """One line for `course grade`: which budgets its sandboxes get."""
    cgroups = ", ".join(f"{c.name} (v{c.version})" for c in controllers.values()) or "none (RLIMITs and PSS only)"
    return f"budgets: cgroups {cgroups}; seccomp filter {'on' if seccomp else 'off'}"
