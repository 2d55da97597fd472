"""A pre-started kernel that forks a fresh, isolated kernel for each submission (Linux, inside the sandbox).

    python -m course_lib.runner.zygote CONTROL_FD FILTER_FD [MODULE,...]

Every learner's kernel imports torch before its first cell: 2 to 3 CPU-seconds, most of what grading a
short exercise set costs. The grader (`course_grader.zygote`) therefore starts this process once per
batch slot, inside a bubblewrap sandbox like any kernel's but with one capability (CAP_SYS_ADMIN, in
the sandbox's own user namespace only). It imports numpy, torch, IPython and the modules named, says
it is ready, and then, for each request on CONTROL_FD, forks a kernel that owns nothing of the
zygote's but its memory pages (copy-on-write):

    zygote                      (the sandbox's user, PID and mount namespaces; runs no learner code)
     └─ intermediate            new mount, PID, network, IPC and UTS namespaces
         └─ init (PID 1)        a fresh /proc, /tmp and /dev/shm; every capability dropped; the seccomp
             │                  filter (FILTER_FD) loaded; then waits for the grader's "go" (once it
             │                  has moved this process into the submission's cgroup)
             └─ kernel (PID 2)  `kernel.main`, its output on the pipe the grader passed

The kernel thus sees what a kernel started by bubblewrap sees: its own processes only, an empty
private /tmp, no network, no capabilities, the same read-only files and the same seccomp filter. When
init ends (the kernel ended, or the grader killed it) every process of that PID namespace ends with
it. Before each fork the zygote kills the previous request's processes, so one zygote never has two
learners' kernels alive at once.

A request is one SOCK_SEQPACKET message: JSON {"nonce", "env", "scratch_bytes", "probe"} with three
file descriptors (the kernel's end of its socket pair, its output pipe, the read end of the "go"
pipe). Init answers on CONTROL_FD itself, {"nonce", "ok"}: the grader has SO_PASSCRED on its end, so
the answer carries init's process id as the grader sees it. A failure is answered {"nonce", "error"}.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_CAP_AMBIENT = 1, 38, 22, 24, 47
SECCOMP_MODE_FILTER, PR_CAP_AMBIENT_CLEAR_ALL = 2, 4
CAPABILITY_VERSION_3 = 0x20080522
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")  # as bubblewrap leaves them: read-only
MAX_REQUEST = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of isolating a new kernel failed: the kernel is not started."""


def _call(result: int, what: str) -> None:
    if result != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(source, target: str, fstype, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _call(_libc.mount(enc(source), target.encode(), enc(fstype), flags, enc(data)), f"mount {target}")


# --- isolating one kernel ------------------------------------------------------------------------------


def fresh_mounts(scratch_bytes: int) -> None:
    """In a new mount and PID namespace: this namespace's /proc, and an empty /tmp and /dev/shm of their own."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READ_ONLY:
        path = "/proc/" + name
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    scratch = f"size={int(scratch_bytes)},mode=0755"
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    # The new /tmp is built aside and moved into place, with the read-only folders that the sandbox binds
    # inside /tmp (a course checked out there, as CI does) bound again at their places in it: each keeps its
    # read-only flag, and what is mounted inside it comes along.
    stage = "/dev/shm/.tmp"
    os.mkdir(stage)
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    for point in _outermost_under("/tmp/"):
        target = os.path.join(stage, point[len("/tmp/") :])
        if os.path.isdir(point):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount(point, target, None, MS_BIND | MS_REC)
    _mount(stage, "/tmp", None, MS_MOVE)
    os.rmdir(stage)


def _outermost_under(prefix: str) -> list[str]:
    """The mount points below `prefix` that no other one below it contains (from /proc/self/mountinfo)."""
    points = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            field = line.split()[4].decode()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)  # \040 is a space
            if point.startswith(prefix):
                points.append(point)
    points = list(dict.fromkeys(points))
    return [p for p in points if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in points)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capability left, in any set (bounding and ambient included), and none to be gained by exec."""
    _call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: past the last
            raise SetupError(f"drop capability {cap} from the bounding set: {os.strerror(ctypes.get_errno())}")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    data = (_CapData * 2)()
    _call(_libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), data), "capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(program: bytes) -> None:
    """Load a BPF program (the one bubblewrap gets as `--seccomp`) for this thread and all it starts."""
    if len(program) % 8 or not program:
        raise SetupError(f"a seccomp program is whole 8-byte instructions; got {len(program)} bytes")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _call(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "load the seccomp filter")


# --- the three processes of a request ------------------------------------------------------------------------


def _answer(control: socket.socket, nonce: str, **fields) -> None:
    try:
        control.send(json.dumps({"nonce": nonce, **fields}).encode())
    except OSError:
        pass


def _intermediate(control: socket.socket, request: dict, fds: list[int], program: bytes | None) -> None:
    """Enter new namespaces and start their init; then wait for it (the zygote kills this process to end
    the request's whole PID namespace: init dies with it)."""
    nonce = str(request.get("nonce", ""))
    try:
        _call(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        init = os.fork()
    except (SetupError, OSError) as err:
        _answer(control, nonce, error=str(err))
        os._exit(1)
    if init == 0:
        _init(control, request, fds, program)
    for fd in fds:
        os.close(fd)
    control.close()
    _, status = os.waitpid(init, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _init(control: socket.socket, request: dict, fds: list[int], program: bytes | None) -> None:
    """PID 1 of the kernel's namespace: isolate, answer, wait for "go", start the kernel, reap until it ends."""
    nonce = str(request.get("nonce", ""))
    try:
        _call(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
        fresh_mounts(int(request["scratch_bytes"]))
        drop_capabilities()
        if program is not None:
            load_seccomp(program)
    except (SetupError, OSError, KeyError, ValueError) as err:
        _answer(control, nonce, error=str(err))
        os._exit(1)
    _answer(control, nonce, ok=True)
    control.close()
    kernel_fd, out_fd, go_fd = fds
    if request.get("probe") or os.read(go_fd, 1) != b"g":  # a probe ends here; no "go": the grader gave up
        os._exit(0)
    os.close(go_fd)
    kernel = os.fork()
    if kernel == 0:
        _kernel(request, kernel_fd, out_fd)
    os.close(kernel_fd)
    os.close(out_fd)
    while True:  # reap whatever ends here (orphans come to PID 1); the namespace ends with the kernel
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _kernel(request: dict, kernel_fd: int, out_fd: int) -> None:
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in request.get("env", {}).items()})
    os.chdir("/tmp")
    try:
        from . import kernel

        kernel.main([str(kernel_fd)])
    finally:
        os._exit(1)


# --- the zygote ------------------------------------------------------------------------------------------------


def preload(modules: list[str]) -> None:
    """Import what every kernel would import: numpy, torch, IPython's shell, the exercise sets' setup imports."""
    for name in ["numpy", "torch", "IPython.core.interactiveshell", "traitlets.config", *modules]:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module that does not import here is imported (and fails) in the kernel
            pass


def _end(intermediate: int | None) -> None:
    """End a request's processes (its init dies with the intermediate, and its whole namespace with init)."""
    if intermediate is not None:
        try:
            os.kill(intermediate, signal.SIGKILL)
            os.waitpid(intermediate, 0)
        except OSError:
            pass


def serve(control: socket.socket, program: bytes | None) -> None:
    previous: int | None = None
    control.send(json.dumps({"ready": True}).encode())
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, 3)
        except OSError:
            message, fds = b"", []
        _end(previous)  # the last request's kernel, if the grader left it running
        previous = None
        if not message:
            return  # the grader closed its end: the batch is over
        request = None
        try:
            request = json.loads(message)
            if len(fds) != 3 or not isinstance(request, dict):
                raise ValueError(f"a request is a JSON object and 3 file descriptors; got {len(fds)}")
            previous = os.fork()
        except (ValueError, OSError) as err:
            _answer(control, str(request.get("nonce", "")) if isinstance(request, dict) else "", error=str(err))
        else:
            if previous == 0:
                _intermediate(control, request, fds, program)
        for fd in fds:
            os.close(fd)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    control = socket.socket(fileno=int(argv[0]))
    program = None
    if int(argv[1]) >= 0:
        with os.fdopen(int(argv[1]), "rb") as f:
            program = f.read()
    preload([m for m in (argv[2] if len(argv) > 2 else "").split(",") if m])
    serve(control, program)
    os._exit(0)


if __name__ == "__main__":
    main()
