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

import pytest

from course_grader import budgets, seccomp
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
        time.sleep(10)
    return x * 2


@pytest.mark.slow  # a batch of real checking processes, forked from a server that imports torch
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


@pytest.mark.slow  # a batch of real checking processes, forked from a server that imports torch
def test_the_server_killed_at_a_start_or_during_a_check_costs_no_task(monkeypatch):
    """medium: the forkserver all checking processes come from was a single point of failure. Killed while a
    process was being started, the batch died (an uncaught EOFError) with no results; killed while tasks
    ran, each of them was a failure. Here it is killed just as the second task is being started, while the
    first one runs: the start is made again at once with a new server, and the task the old server took
    with it is tried again at the end."""
    from multiprocessing import forkserver

    from course_grader import worker

    real_start, starts = worker._start, []

    def start(*args):
        starts.append(args[1].key)
        if len(starts) == 2:
            os.kill(forkserver._forkserver._forkserver_pid, signal.SIGKILL)
        return real_start(*args)

    monkeypatch.setattr(worker, "_start", start)
    tasks = [Task("slow", ("slow", 1), 60), Task("quick", ("ok", 2), 60), Task("after", ("ok", 3), 60)]
    results, endings = {}, {}
    run_batch(
        tasks,
        route,
        slots=2,
        on_result=lambda task, value: results.setdefault(task.key, value),
        on_failure=lambda task, ending: endings.setdefault(task.key, ending),
    )
    assert results == {"slow": 2, "quick": 4, "after": 6} and not endings, (results, endings)
    assert "server process" in tasks[0].tries[0], f"the slow task died with its server: {tasks[0].tries}"
    assert not tasks[1].tries, f"a start that failed is made again at once, not counted as a try: {tasks[1].tries}"


# --- budgets ----------------------------------------------------------------------------------------------------


# What the filter must refuse, named here rather than taken from budgets, and the numbers of a few calls that
# every program makes, which it must allow: (x86-64, arm64).
MUST_REFUSE = (
    "memfd_create memfd_secret shmget io_uring_setup io_uring_enter io_uring_register userfaultfd perf_event_open "
    "bpf ptrace process_vm_readv process_vm_writev keyctl add_key request_key msgget msgsnd msgrcv msgctl mq_open "
    "mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr kexec_load kexec_file_load init_module "
    "finit_module delete_module mount umount2 open_tree move_mount fsopen fsconfig fsmount fspick pivot_root "
    "unshare setns"
).split()
MUST_ALLOW = {
    "read": (0, 63),
    "write": (1, 64),
    "mmap": (9, 222),
    "openat": (257, 56),
    "ioctl": (16, 29),
    "futex": (202, 98),
    "sendmsg": (46, 211),
    "recvmsg": (47, 212),
    "wait4": (61, 260),
    "execve": (59, 221),
    "exit_group": (231, 94),
    "getrandom": (318, 278),
    "pidfd_open": (434, 434),
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
CLONE_NEW = {"time": 0x80, "mnt": 0x20000, "cgroup": 0x2000000, "uts": 0x4000000, "ipc": 0x8000000}
CLONE_NEW.update(user=0x10000000, pid=0x20000000, net=0x40000000)
CLONE_THREAD = 0x3D0F00  # VM | FS | FILES | SIGHAND | THREAD | SYSVSEM | SETTLS | PARENT_SETTID | CHILD_CLEARTID


def run_filter(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the kernel would do with a system call (`nr`, first argument `arg0`) under this BPF program:
    a small interpreter of the instructions the filter uses, over a little-endian struct seccomp_data."""
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    data = struct.pack("<IIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    pc, acc = 0, 0
    for _ in ops:  # classic BPF jumps only forward: no instruction runs twice
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        elif code in (0x15, 0x35, 0x45):  # BPF_JMP | BPF_JEQ, BPF_JGE, BPF_JSET (| BPF_K)
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        else:
            raise AssertionError(f"instruction {pc}: opcode {code:#x} is not one this interpreter knows")
        pc += 1
    raise AssertionError("the program ran past its end without returning")


def test_the_seccomp_program_refuses_what_no_exercise_needs():
    """critical: memfd and SysV memory are in nobody's RSS nor address space. medium: loopback TCP buffers
    escaped a v1 memory cgroup. low: io_uring, userfaultfd, msgget, mq_open, personality, process_vm_readv
    and ptrace reached the kernel. The filter is a small BPF program; its jumps are checked here by
    interpreting it, for both architectures it is written for, whichever this machine is."""
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    for index, machine in enumerate(("x86_64", "aarch64")):
        program, numbers, arch = seccomp.seccomp_filter(machine), seccomp.seccomp_numbers(machine), AUDIT_ARCH[machine]
        assert program is not None and len(program) // 8 < 256, machine

        def verdict(name_or_nr, arg0=0, *, arch=arch, program=program, numbers=numbers):
            nr = numbers[name_or_nr] if isinstance(name_or_nr, str) else name_or_nr
            return run_filter(program, arch, nr, arg0)

        missing = [name for name in MUST_REFUSE if name not in numbers]
        assert not missing, f"{machine}: the filter does not know {missing}"
        for name in [*MUST_REFUSE, *seccomp.REFUSED_CALLS]:
            if name in numbers:
                assert verdict(name) == eperm, (
                    f"{machine}: {name} ({numbers[name]}) gives {verdict(name):#x}, not EPERM"
                )
        for name, nrs in MUST_ALLOW.items():
            assert verdict(nrs[index]) == allow, f"{machine}: {name} ({nrs[index]}) gives {verdict(nrs[index]):#x}"
        for call in ("socket", "socketpair"):
            assert verdict(call, 1) == allow, f"{machine}: {call}(AF_UNIX) must stay allowed"
            # INET, INET6, NETLINK, PACKET, VSOCK, and INET with high bits (the kernel reads an int)
            for family in (2, 10, 16, 17, 40, 2 | 1 << 32):
                assert verdict(call, family) == eperm, (
                    f"{machine}: {call}({family:#x}) gives {verdict(call, family):#x}"
                )
        assert verdict("personality", 0xFFFFFFFF) == allow, f"{machine}: the personality query must stay allowed"
        for persona in (0, 8, 0x0040000):  # PER_LINUX, PER_LINUX32, ADDR_NO_RANDOMIZE
            assert verdict("personality", persona) == eperm, f"{machine}: personality({persona:#x}) is allowed"
        assert verdict("clone", 17) == allow and verdict("clone", CLONE_THREAD) == allow, f"{machine}: fork, threads"
        for ns, flag in CLONE_NEW.items():
            assert verdict("clone", flag | 17) == eperm, f"{machine}: clone into a new {ns} namespace is allowed"
        assert verdict("clone3") == enosys, (
            f"{machine}: clone3 gives {verdict('clone3'):#x}, not ENOSYS (C library: use clone)"
        )
        for foreign in (0x40000003, 0x40000028, 0xC000003E if machine == "aarch64" else 0xC00000B7):
            assert run_filter(program, foreign, 0) == eperm, f"{machine}: the foreign architecture {foreign:#x}"
        if machine == "x86_64":
            assert verdict(0x40000000 + 1) == eperm, "x32 system calls are refused"
    said = dict(budgets.describe({}, seccomp=True))["seccomp filter"]  # what `course doctor` prints
    for words in ("in force", "no TCP or UDP", "io_uring", "ptrace", "message queues", "namespaces", "foreign ABIs"):
        assert words in said, f"`course doctor` does not say {words!r}: {said}"
    assert dict(budgets.describe({}, seccomp=False))["seccomp filter"].startswith("NOT in force")


def test_the_seccomp_filters_numbers_are_the_kernels():
    """The numbers the filter refuses are those of the kernel's own headers, where they are installed
    (linux-libc-dev): a wrong number would refuse some other call and leave this one open."""
    import re

    import pytest

    headers = {
        "x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
        "aarch64": "/usr/include/asm-generic/unistd.h",
    }
    compared = 0
    for machine, header in headers.items():
        if not os.path.exists(header):
            continue
        text = open(header).read()
        known = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", text)}
        for name, nr in seccomp.seccomp_numbers(machine).items():
            if name in known:
                assert nr == known[name], f"{machine}: {name} is {known[name]} in {header}, the filter uses {nr}"
                compared += 1
    if compared == 0:
        pytest.skip("no kernel headers here to compare the numbers with")


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
