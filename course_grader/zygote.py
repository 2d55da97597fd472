"""Sandboxed kernels forked from a pre-started one: a fresh kernel per submission without importing torch again.

A batch starts one `Zygote` per slot (`start_pool`): a sandbox like every kernel's (see `sandbox`), in
a cgroup of its own, running `course_lib.runner.zygote`, which imports numpy, torch, IPython and the
exercise sets' setup imports once. A checking process then gets its slot's `ZygoteLink` and, for each
start of a submission's kernel, asks for a fork (`ZygoteLink.fork`): the new kernel has namespaces, a
/proc, /tmp and /dev/shm of its own, no capabilities and the seccomp filter, as a kernel started by
bubblewrap has (the zygote module says how). The grader moves it into the submission's cgroup before
it runs anything, so its memory and CPU time are counted from there, and the 2-3 CPU-seconds of
imports are paid once per slot, not once per kernel.

A host where this does not work (no CAP_SYS_ADMIN in a user namespace, /proc not mountable there) or a
zygote that dies mid-batch costs nothing but time: the kernel is then started by bubblewrap as before.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from course_lib.runner.process import Limits, kernel_env

from .budgets import Group
from .sandbox import _Launch, _pipe_with, seccomp_usable
from .seccomp import seccomp_filter

ZYGOTE_MODULE = "course_lib.runner.zygote"
ZYGOTE_MEMORY_MB = 2048  # a zygote's cgroup: Python, numpy, torch and the setup imports
ZYGOTE_PIDS = 64  # its processes: itself, an intermediate per request (one alive at a time), bubblewrap's
READY_TIMEOUT_S = 300.0  # wall-clock seconds a zygote may take to import (a backstop: a loaded machine is slow)
FORK_TIMEOUT_S = 60.0  # wall-clock seconds for a fork's answer (it takes milliseconds)
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class ZygoteError(Exception):
    """The zygote did not give a kernel: the caller starts one the ordinary way."""


class ZygoteDied(BaseException):
    """A kernel ended because the zygote it was forked from ended (killed from outside): a failure of the
    grader, never the learner's. A BaseException, so that no check's `except Exception` keeps it: it ends the
    submission's checking process, and the batch checks that submission again (see `worker.run_batch`)."""


class ForkedProcess:
    """A forked kernel's init (PID 1 of its namespace) as `subprocess.Popen` would present it: `pid`, `stdout`,
    `poll`, `wait`, `kill`. It is not the grader's child, so it is watched through a pidfd; its exit status
    goes to its parent in the sandbox (`returncode` is -1 once it has ended)."""

    def __init__(self, pid: int, stdout_fd: int, go_fd: int):
        self.pid, self.returncode = pid, None
        self.stdout = os.fdopen(stdout_fd, "rb", buffering=0)
        self._go: int | None = go_fd
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            self._pidfd, self.returncode = None, -1

    def go(self) -> None:
        """Let it start the kernel (it has been moved into the submission's cgroup)."""
        if self._go is not None:
            try:
                os.write(self._go, b"g")
            finally:
                os.close(self._go)
                self._go = None

    def poll(self) -> int | None:
        if self.returncode is None and (self._pidfd is None or select.select([self._pidfd], [], [], 0)[0]):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.poll() is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("kernel", timeout)
            self.poll()
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        for fd in (self._pidfd, self._go):
            if fd is not None:
                os.close(fd)
        self._pidfd = self._go = None


@dataclass
class ZygoteLink:
    """What a checking process needs of its slot's zygote (picklable: the socket travels to the process)."""

    control: socket.socket

    def fork(self, env: dict, kernel_fd: int, *, scratch_bytes: int, probe: bool = False) -> ForkedProcess:
        """A new kernel's init, isolated and waiting for `go()`; `kernel_fd` becomes the kernel's end of its
        socket pair and `env` its environment. ZygoteError if the zygote does not give one."""
        nonce = os.urandom(8).hex()
        request = {"nonce": nonce, "env": env, "scratch_bytes": int(scratch_bytes), "probe": probe}
        out_r, out_w = os.pipe()
        go_r, go_w = os.pipe()
        try:
            socket.send_fds(self.control, [json.dumps(request).encode()], [kernel_fd, out_w, go_r])
            pid = self._answer(nonce)
        except BaseException as err:
            os.close(out_r)
            os.close(go_w)
            if isinstance(err, (OSError, ValueError)):
                raise ZygoteError(f"the zygote did not answer ({type(err).__name__}: {err})") from None
            raise
        finally:
            os.close(out_w)
            os.close(go_r)
        return ForkedProcess(pid, out_r, go_w)

    def ended(self, wait_s: float = 1.0) -> bool:
        """Whether the zygote has ended (its end of the socket closed), waiting up to `wait_s` for it: a kernel
        and its zygote killed together die within moments of each other."""
        poller = select.poll()
        poller.register(self.control, select.POLLHUP | select.POLLERR)
        end = time.monotonic() + wait_s
        while True:
            if any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0)):
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)

    def _answer(self, nonce: str) -> int:
        """The process id of the init that answered `nonce` (answers to earlier, abandoned requests are skipped)."""
        end = time.monotonic() + FORK_TIMEOUT_S
        while True:
            if not select.select([self.control], [], [], max(0.0, end - time.monotonic()))[0]:
                raise ZygoteError(f"the zygote did not answer within {FORK_TIMEOUT_S:g} s")
            message, ancillary, _, _ = self.control.recvmsg(65536, socket.CMSG_SPACE(_CREDENTIALS.size))
            if not message:
                raise ZygoteError("the zygote has ended")
            answer = json.loads(message)
            if answer.get("nonce") != nonce:
                continue
            if "error" in answer:
                raise ZygoteError(f"the zygote could not isolate a kernel: {answer['error']}")
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _CREDENTIALS.size:
                    return _CREDENTIALS.unpack(data[: _CREDENTIALS.size])[0]
            raise ZygoteError("the zygote's answer carried no process id")


class Zygote:
    """One pre-started sandbox that forks kernels (see `course_lib.runner.zygote`); `start()`, `link`, `close()`."""

    def __init__(
        self,
        *,
        protect: list[Path],
        temp_root: Path | None,
        group: Group | None,
        preload: list[str] = (),
        seccomp: bool = True,
        log: Path | None = None,
    ):
        self.protect, self.temp_root, self.group, self.log = list(protect), temp_root, group, log
        self.preload, self.seccomp = list(preload), seccomp
        self.link: ZygoteLink | None = None
        self.proc: subprocess.Popen | None = None
        self.launch: _Launch | None = None

    def start(self) -> None:
        """Start it and wait until it has imported everything; then fork one probe. ZygoteError if either fails."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        program = seccomp_filter() if self.seccomp else None
        filter_fd = _pipe_with(program) if program else -1
        inner = [sys.executable, "-m", ZYGOTE_MODULE, str(theirs.fileno()), str(filter_fd), ",".join(self.preload)]
        keep = (theirs.fileno(),) + ((filter_fd,) if filter_fd >= 0 else ())
        self.launch = _Launch(
            Limits(), inner, protect=self.protect, temp_root=self.temp_root, keep_fds=keep, group=self.group,
            seccomp=False, zygote=True,
        )  # fmt: skip
        log = open(self.log, "wb") if self.log is not None else subprocess.DEVNULL
        try:
            env = kernel_env(home="/tmp", config={}, device="cpu")
            self.proc = self.launch.popen(stdout=log, stderr=subprocess.STDOUT, env=env, cwd="/")
        finally:
            theirs.close()
            if filter_fd >= 0:
                os.close(filter_fd)
            if log is not subprocess.DEVNULL:
                log.close()
        self.link = ZygoteLink(ours)
        try:
            self._ready()
            self._probe()
        except BaseException:
            self.close()
            raise

    def _ready(self) -> None:
        if not select.select([self.link.control], [], [], READY_TIMEOUT_S)[0]:
            raise ZygoteError(f"the zygote was not ready after {READY_TIMEOUT_S:g} s")
        message = self.link.control.recv(65536)
        if not message or not json.loads(message).get("ready"):
            said = self._said()
            raise ZygoteError("the zygote did not start" + (f": {said}" if said else ""))

    def _probe(self) -> None:
        """Fork once, without a kernel: the host lets the zygote make namespaces, mounts and the filter."""
        kernel, theirs = socket.socketpair()
        try:
            forked = self.link.fork({}, theirs.fileno(), scratch_bytes=2**20, probe=True)
        finally:
            kernel.close()
            theirs.close()
        try:
            forked.wait(timeout=FORK_TIMEOUT_S)
        finally:
            forked.kill()
            forked.stdout.close()
            forked.close()

    def _said(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines() if self.log else []
        except OSError:
            lines = []
        return lines[-1][:300] if lines else ""

    def close(self) -> None:
        """End it (its kernels end with it) and remove what it used."""
        if self.link is not None:
            self.link.control.close()
            self.link = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None
        if self.launch is not None:
            self.launch.cleanup()
            self.launch = None
        if self.group is not None:
            self.group.remove()


def start_pool(
    slots: int, *, protect: list[Path], temp_root: Path, group: Group | None, preload: list[str] = ()
) -> tuple[list[Zygote], str]:
    """One zygote per slot, or none and why not (the kernels are then started one by one, by bubblewrap)."""
    pool: list[Zygote] = []
    try:
        for i in range(max(1, slots)):
            child = (
                group.child(f"zygote-{i}", memory_bytes=ZYGOTE_MEMORY_MB * 2**20, pids=ZYGOTE_PIDS) if group else None
            )
            zygote = Zygote(
                protect=protect,
                temp_root=temp_root,
                group=child if child is not None and child.folders else None,
                preload=list(preload),
                seccomp=seccomp_usable(),
                log=temp_root / f"zygote-{i}.log",
            )
            zygote.start()
            pool.append(zygote)
    except (ZygoteError, OSError, ValueError) as err:
        close_pool(pool)
        return [], f"{type(err).__name__}: {err}" if not isinstance(err, ZygoteError) else str(err)
    return pool, ""


def close_pool(pool: list[Zygote]) -> None:
    for zygote in pool:
        zygote.close()
