"""Start a learner's kernel inside a bubblewrap sandbox (Linux).

`SandboxedKernel(limits, sandbox=True).start()` runs `course_lib.runner.kernel` under `bwrap`:

- new user, PID, network, IPC, UTS and cgroup namespaces; an unprivileged uid inside (and, when
  the grader runs as root, an unprivileged uid outside too: nobody), no capabilities, no nested
  user namespaces, a new terminal session;
- a root file system of its own: the system (/usr and the library folders), a few files from
  /etc, the Python installation, the virtual environment, the `course_lib` package and the course
  data folder, all read-only; a private tmpfs (limited in size) as home, scratch folder and /tmp;
  /proc of its own PID namespace only; a minimal /dev. The solutions, the submissions, the output
  folder, the grader's own package and the rest of the teacher's files are not there at all;
- `--die-with-parent`, and the PID namespace dies with the kernel: whatever the learner's code
  started ends when the grader kills the sandbox;
- limits set by the kernel before any learner code runs: processes, open files, file size,
  address space, CPU seconds;
- a seccomp filter (see `seccomp.seccomp_filter`): no sockets but Unix ones (no TCP or UDP, not even
  on the loopback that bwrap brings up), no memfd_create, memfd_secret or shmget (memory that no RSS
  or address-space limit sees), no io_uring, userfaultfd, perf, bpf, ptrace, process_vm_*, keyrings,
  message queues, new namespaces or mounts;
- where the host allows it, a cgroup of its own for each start of the kernel (see `budgets`): a
  memory limit that counts everything (shared memory and tmpfs too), a process count and a CPU
  share. The launcher joins it before bwrap starts, so the sandbox is counted from its first page.

Everything else (the socket pair that is the kernel's only link to the grader, the output pipe
that the grader reads, counts and caps, the time, output and memory limits) is the learner-side
kernel's (`course_lib.runner.process.KernelProcess`), which this class extends. With `sandbox=False`
(`course grade --no-sandbox`) it is that kernel as it is: a plain child process, with the same
limits except the process count and the seccomp filter (its cgroup, where there is one, too).

With `zygote` (a batch slot's, see `zygote`), a start is a fork of a kernel that has imported torch
already, not a new sandbox: the zygote's sandbox is the one above, with CAP_SYS_ADMIN and CAP_SETPCAP
in its own user namespace, and each fork gets new PID, mount, network, IPC and UTS namespaces, a /proc,
/tmp and /dev/shm of its own, no capabilities and the same seccomp filter before it runs anything.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from course_lib.runner import process
from course_lib.runner.process import Limits, data_dir, kernel_env, package_dir

from .budgets import STAGE_PREFIX, FolderLock, Group, describe, locked_folder
from .seccomp import seccomp_filter

LIBRARY_ALLOWANCE_MB = 1024  # a kernel's cgroup before it is ready: Python, numpy and torch on top of the limit
_STARTS = itertools.count(1)  # names each kernel start's cgroup in this process

SANDBOX_UID = 1000  # the learner's uid and gid inside the sandbox
ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "alternatives",
    "fonts",
    "os-release",
    "mime.types",
    "nsswitch.conf",
)


# --- is the sandbox available? ------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def sandbox_status() -> tuple[bool, str]:
    """(True, "bubblewrap X") if a sandboxed Python starts here, else (False, why not)."""
    ok, why = _try_sandbox(seccomp=True)
    if ok or not seccomp_filter():
        return ok, why
    ok, why = _try_sandbox(seccomp=False)
    return ok, why + (" (without the seccomp filter, which this host refused)" if ok else "")


def seccomp_usable() -> bool:
    """Whether sandboxes here start with the seccomp filter (see `seccomp.seccomp_filter`)."""
    return seccomp_filter() is not None and _try_sandbox(seccomp=True)[0]


@functools.lru_cache(maxsize=2)
def _try_sandbox(seccomp: bool) -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, f"bubblewrap needs Linux (this is {sys.platform})"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bwrap (bubblewrap) is not installed; on Debian or Ubuntu: apt-get install bubblewrap"
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return False, f"bwrap does not run: {err}"
    launch = _Launch(Limits(), [sys.executable, "-I", "-S", "-c", "print('sandbox ok')"], protect=[], seccomp=seccomp)
    try:
        proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = proc.communicate(timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return False, f"bwrap could not start a sandbox: {err}"
    finally:
        launch.cleanup()
    text = out.decode(errors="replace").strip()
    if proc.returncode != 0 or "sandbox ok" not in text:
        said = text.splitlines()[-1] if text else f"exit status {proc.returncode}"
        return False, f"bwrap could not start a sandbox here ({said})"
    return True, version or "bubblewrap"


# --- how a kernel process is started -------------------------------------------------------------------

# The launcher joins the sandbox's cgroups (if any) first, so that everything the sandbox does is counted.
# Run as root, it then makes a private mount namespace, binds the folders the sandbox needs onto empty
# folders that an unprivileged user can reach (the Python install may sit in /root), drops to that user,
# then runs bwrap. The learner's code then never runs with root's uid, even outside the user namespace,
# so it cannot read root's files and the process limit applies to it.
# Without binds (no sandbox, `COURSE_GRADE_KERNEL_USER`) it only drops to that user, first giving it the
# folder it starts in (the kernel's home), where a container's root may not mount anything.
#   launcher UID GID N_PAIRS N_GROUPS OWN_CWD [SRC DST]... [CGROUP_PROCS_FILE]... ARGV...   (UID -1: stay as is)
_LAUNCHER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        sys.exit(f"sandbox launcher: {what}: {os.strerror(err)}")
uid, gid, n, m, own = (int(a) for a in sys.argv[1:6])
pairs, groups, argv = sys.argv[6:6 + 2 * n], sys.argv[6 + 2 * n:6 + 2 * n + m], sys.argv[6 + 2 * n + m:]
for path in groups:
    try:
        with open(path, "w") as f:
            f.write(str(os.getpid()))
    except OSError as err:
        sys.exit(f"sandbox launcher: could not join the cgroup {path}: {err.strerror}")
if uid >= 0 and pairs:
    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, (1 << 14) | (1 << 18), None), "make / private")
    for src, dst in zip(pairs[0::2], pairs[1::2]):
        check(libc.mount(src.encode(), dst.encode(), None, 4096 | (1 << 14), None), "bind " + src)
if uid >= 0:
    if own:
        os.chown(".", uid, gid)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
os.execv(argv[0], argv)
"""


def launcher(
    uid: int, gid: int, pairs: list[str], group_files: list[str], argv: list[str], own_cwd: bool = False
) -> list[str]:
    """The command that runs `argv` after joining the cgroups (and, with uid >= 0, as that user with the binds;
    `own_cwd`: the folder it starts in becomes that user's)."""
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _LAUNCHER,
        str(uid),
        str(gid),
        str(len(pairs) // 2),
        str(len(group_files)),
        str(int(own_cwd)),
        *pairs,
        *group_files,
        *argv,
    ]


def _unprivileged_ids(name: str = "nobody") -> tuple[int, int]:
    try:
        import pwd

        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid
    except (ImportError, KeyError):
        return 65534, 65534


def plain_kernel_user() -> tuple[int, int] | None:
    """Without the sandbox, the user a root grader runs the learner's kernel as: `COURSE_GRADE_KERNEL_USER`
    (a Gradescope container, where bubblewrap cannot start), else None (the grader's own user)."""
    name = os.environ.get("COURSE_GRADE_KERNEL_USER", "")
    return _unprivileged_ids(name) if name and os.geteuid() == 0 else None


def _python_roots() -> list[Path]:
    """The folders the kernel's Python needs: the installation, the virtual environment, user site-packages."""
    import site

    roots = [Path(p) for p in {sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix}]
    roots.append(Path(os.path.realpath(sys.executable)).parent)
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        roots.append(Path(site.getusersitepackages()))
    return _outermost(p for p in roots if p.is_dir() and not _inside(p, Path("/usr")))


def bound_folders(protect=()) -> list[Path]:
    """The host folders the sandbox sees, read-only, besides the system: Python, the course library, the data.

    The data folder is left out when it holds (or sits inside) a protected folder."""
    binds = _python_roots() + [package_dir()]
    data = data_dir()
    if data is not None and not any(_inside(data, p) or _inside(p, data) for p in protect):
        binds.append(data)
    return _outermost(binds)


def _reachable_folder(preferred: Path | None) -> str:
    """A folder for the launcher's empty mount points that an unprivileged user can reach (every
    folder above it searchable by others): `preferred` if possible, else the temporary folder, else /tmp."""
    for candidate in (preferred, tempfile.gettempdir(), "/tmp"):
        if candidate is None:
            continue
        path = Path(os.path.realpath(candidate))
        if path.is_dir() and all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents]):
            return str(path)
    return "/tmp"


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _outermost(paths) -> list[Path]:
    unique = sorted({Path(os.path.realpath(p)) for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for p in unique:
        if not any(_inside(p, k) for k in kept):
            kept.append(p)
    return kept


class _Launch:
    """The command line (and its file descriptors) that starts `inner` in the sandbox."""

    def __init__(
        self,
        limits: Limits,
        inner: list[str],
        *,
        protect: list[Path],
        temp_root: Path | None = None,
        keep_fds: tuple[int, ...] = (),
        group: Group | None = None,
        seccomp: bool = True,
        zygote: bool = False,
    ):
        self.limits, self.inner = limits, inner
        self.zygote = zygote  # a zygote's sandbox (see `zygote`): CAP_SYS_ADMIN and CAP_SETPCAP in its user namespace
        self.protect = [Path(os.path.realpath(p)) for p in protect]
        self.temp_root, self.keep_fds = temp_root, keep_fds
        self.group = group  # the cgroups the sandbox joins (see budgets), or None
        self.seccomp = seccomp_filter() if seccomp else None
        self.stage: str | None = None  # (as root) the empty folders the launcher binds the sandbox's folders onto
        self.stage_lock: FolderLock | None = None  # held while the stage is in use: stale once nobody holds it

    def popen(self, **kwargs) -> subprocess.Popen:
        fds = []
        try:
            seccomp_fd = None
            if self.seccomp is not None:
                seccomp_fd = _pipe_with(self.seccomp)
                fds.append(seccomp_fd)
            argv, user = self._bwrap_argv(seccomp_fd)
            # The options travel through a pipe, so the sandbox's /proc/1/cmdline does not list the mounts.
            args_fd = _pipe_with(b"\0".join(a.encode() for a in argv) + b"\0")
            fds.append(args_fd)
            command = [shutil.which("bwrap"), "--args", str(args_fd), "--", *self.inner]
            group_files = self.group.procs_files() if self.group is not None else []
            if user is not None or group_files:
                uid, gid, pairs = user if user is not None else (-1, -1, [])
                command = launcher(uid, gid, pairs, group_files, command)
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, pass_fds=(*self.keep_fds, *fds), **kwargs)
        finally:
            for fd in fds:
                os.close(fd)

    def _bwrap_argv(self, seccomp_fd: int | None = None) -> tuple[list[str], tuple | None]:
        lim = self.limits
        binds = bound_folders(self.protect)
        user = None
        sources = {str(b): str(b) for b in binds}
        if os.geteuid() == 0:
            # Stage every bound folder where an unprivileged user can reach it (see _LAUNCHER).
            uid, gid = _unprivileged_ids()
            stage, self.stage_lock = locked_folder(STAGE_PREFIX, _reachable_folder(self.temp_root))
            self.stage = str(stage)
            os.chmod(self.stage, 0o755)
            pairs = []
            for i, b in enumerate(binds):
                target = os.path.join(self.stage, str(i))
                os.mkdir(target, 0o755)
                sources[str(b)] = target
                pairs += [str(b), target]
            user = (uid, gid, pairs)
        argv = [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            *(["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"] if self.zygote else []),
            "--die-with-parent",
            "--new-session",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / name
            if path.is_symlink():
                argv += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                argv += ["--ro-bind", str(path), str(path)]
        for name in ETC_FILES:
            argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        # The private /tmp comes before the binds: bwrap mounts in order, and a course checked out under
        # /tmp (CI clones there) must stay visible on top of the empty /tmp, not be hidden by it.
        size = str(lim.scratch_mb * 2**20)
        argv += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            size,
            "--tmpfs",
            "/dev/shm",
            "--size",
            size,
            "--tmpfs",
            "/tmp",
        ]
        for b in binds:
            argv += ["--ro-bind", sources[str(b)], str(b)]
        for p in self.protect:  # a protected folder inside a bound one is covered by an empty one, read-only and
            if any(_inside(p, b) for b in binds):  # tiny, so that it is no scratch space outside the limits
                argv += ["--perms", "0555", "--size", "4096", "--tmpfs", str(p)]
        argv += ["--chdir", "/tmp"]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        return argv, user

    def cleanup(self) -> None:
        if self.stage is not None:
            shutil.rmtree(self.stage, ignore_errors=True)
            self.stage = None
        if self.stage_lock is not None:
            self.stage_lock.release()
            self.stage_lock = None


def _pipe_with(data: bytes) -> int:
    """The read end of a pipe that holds `data` and then ends (for bwrap's --args and --seccomp)."""
    read_end, write_end = os.pipe()
    try:
        if len(data) > 60_000:  # a pipe holds 64 KB: more would block this process
            raise ValueError(f"{len(data)} bytes are too many for bwrap's pipe")
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end


# --- one kernel ---------------------------------------------------------------------------------------


class SandboxedKernel(process.KernelProcess):
    """One learner kernel, in the sandbox (`sandbox=True`) or not: see `course_lib.runner.process.KernelProcess`.

    `protect` lists folders that must not be visible in the sandbox even if they sit inside one
    that is bound (the solutions, the submissions, the output folder). `cwd` (without the sandbox)
    is where the kernel runs; with the sandbox it runs in its private /tmp. `budget` is the group
    (see `budgets`) under which each start of the kernel gets a cgroup of its own: memory, process
    count and CPU share, counting everything. `seccomp=False` leaves out the seccomp filter (tests).
    `zygote` (a `zygote.ZygoteLink`): each start is a fork of that pre-started kernel, isolated as bubblewrap
    isolates one, instead of a new bubblewrap sandbox (and a new torch import); where it fails, the latter.
    """

    def __init__(
        self,
        limits: Limits,
        *,
        sandbox: bool,
        cwd: Path | None = None,
        protect: list[Path] = (),
        temp_root: Path | None = None,
        budget: Group | None = None,
        seccomp: bool = True,
        zygote=None,
    ):
        super().__init__(limits, cwd=cwd, temp_root=temp_root)
        self.zygote = zygote if sandbox else None
        self.forked_from = None  # the zygote the running kernel was forked from
        self.sandbox, self.protect = sandbox, list(protect)
        self.launch: _Launch | None = None
        self.budget, self.seccomp = budget, seccomp and seccomp_usable()
        self.group: Group | None = None  # this start's cgroup

    def _kernel_config(self) -> dict:
        config = super()._kernel_config()
        if self.sandbox:  # in the sandbox the count covers only the sandbox's own processes
            config["processes"] = self.limits.processes
        return config

    def _new_group(self) -> Group | None:
        if self.budget is None or not self.budget.folders:
            return None
        memory = None
        if self.limits.memory_mb:  # until the kernel is ready: the libraries' allowance on top (see _started)
            memory = (self.limits.memory_mb + 512 + LIBRARY_ALLOWANCE_MB) * 2**20
        # The pids count includes the launcher, bwrap's two processes and the kernel's own threads.
        group = self.budget.child(
            f"kernel-{os.getpid()}-{next(_STARTS)}",
            memory_bytes=memory,
            pids=self.limits.processes + 16 if self.sandbox else None,
        )
        return group if group.folders else None

    def _popen(self, inner: list[str], config: dict, keep_fds: tuple[int, ...]) -> subprocess.Popen:
        self.group, self.forked_from = self._new_group(), None
        files = self.group.procs_files() if self.group is not None else []
        if not self.sandbox:
            user = plain_kernel_user()
            if files or user:  # the plain kernel joins its cgroup too (and drops to `user`), through the launcher
                inner = launcher(*(user or (-1, -1)), [], files, inner, own_cwd=user is not None)
            return super()._popen(inner, config, keep_fds)
        # In the sandbox there is no GPU device file, so the CPU.
        env = kernel_env(home="/tmp", config=config, device="cpu")
        if self.zygote is not None:
            forked = self._fork(env, keep_fds[0])
            if forked is not None:
                return forked
        self.launch = _Launch(
            self.limits,
            inner,
            protect=self.protect,
            temp_root=self.temp_root,
            keep_fds=keep_fds,
            group=self.group,
            seccomp=self.seccomp,
        )
        return self.launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd="/")

    def _fork(self, env: dict, kernel_fd: int):
        """A kernel forked from the zygote, in this start's cgroup before it runs anything; None if the zygote
        gave none (it is not asked again: the kernel is started by bubblewrap)."""
        from .zygote import ZygoteError

        try:
            forked = self.zygote.fork(env, kernel_fd, scratch_bytes=self.limits.scratch_mb * 2**20)
        except ZygoteError:
            self.zygote = None
            return None
        if self.group is not None:
            self.group.join(forked.pid)
            if forked.pid not in self.group.pids():  # its CPU time and memory would count nowhere: not this way
                forked.kill()
                forked.stdout.close()
                forked.close()
                self.zygote = None
                return None
        forked.go()
        self.forked_from = self.zygote
        return forked

    def _started(self) -> None:
        """Ready, and no learner code has run: its memory limit is now what it uses plus the allowance."""
        if self.group is not None and self.limits.memory_mb:
            used = self.group.memory_usage()
            if used is not None:
                self.group.set_limits(memory_bytes=used + (self.limits.memory_mb + 512) * 2**20)

    def _cpu(self) -> float:
        """The running kernel's CPU time: from its cgroup where one counts it (every process that was ever in
        the sandbox, exited ones included), else from its process tree."""
        counted = self.group.cpu_seconds() if self.group is not None else None
        return counted if counted is not None else super()._cpu()

    def _over_memory_limit(self) -> bool:
        if self.group is not None and "memory" in self.group.folders and self.limits.memory_mb:
            return False  # the kernel enforces the cgroup's limit itself, counting what PSS cannot see
        return super()._over_memory_limit()

    def _why_died(self) -> str:
        if self.group is not None and self.group.oom_kills():
            return "memory-limit"
        if self.launch is None and self.forked_from is not None and self.forked_from.ended():
            from .zygote import ZygoteDied

            raise ZygoteDied("the zygote this submission's kernel was forked from ended, and the kernel with it")
        return super()._why_died()

    def _find_kernel_pid(self) -> int:
        """The kernel's process id as the grader sees it (in the sandbox it is the launcher's grandchild)."""
        if not self.sandbox:
            return self.proc.pid
        try:
            if self.launch is None:  # forked from a zygote: the kernel is its init's child
                return psutil.Process(self.proc.pid).children()[0].pid
            family = psutil.Process(self.proc.pid).children(recursive=True)
            deeper = [p for p in family if p.ppid() != self.proc.pid]
            return (deeper or family)[0].pid
        except (psutil.Error, IndexError):
            return self.proc.pid

    def _kill_strays(self) -> None:
        if self.group is not None:
            self.group.kill(timeout=2.0)
        if not self.sandbox:  # in the sandbox the whole PID namespace goes with the kernel
            super()._kill_strays()

    def _cleanup(self) -> None:
        if hasattr(self.proc, "close"):  # forked from a zygote: its pidfd and "go" pipe
            self.proc.close()
        if self.launch is not None:
            self.launch.cleanup()
            self.launch = None
        if self.group is not None:
            self.group.remove()
            self.group = None
        super()._cleanup()


def doctor_lines() -> list[tuple[str, str]]:
    """`course doctor`'s lines about grading: the sandbox, and each budget a sandbox gets here."""
    ok, why = sandbox_status()
    lines = [("grading sandbox", ("ok: " if ok else "NOT available: ") + why)]
    return lines + describe(seccomp=ok and seccomp_usable())
