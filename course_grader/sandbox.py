"""Start a learner's kernel inside a bubblewrap sandbox (Linux).

`Kernel(limits, sandbox=True).start()` runs `course_lib.runner.kernel` under `bwrap`:

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
  address space, CPU seconds.

Everything else (the socket pair that is the kernel's only link to the grader, the output pipe
that the grader reads, counts and caps, the time, output and memory limits) is the learner-side
kernel's (`course_lib.runner.process.Kernel`), which this class extends. With `sandbox=False`
(`course grade --no-sandbox`) it is that kernel as it is: a plain child process, with the same
limits except the process count.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from course_lib.runner import process
from course_lib.runner.process import Limits, data_dir, kernel_env, package_dir

SANDBOX_UID = 1000  # the learner's uid and gid inside the sandbox
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "fonts", "os-release",
             "mime.types", "nsswitch.conf")


# --- is the sandbox available? ------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def sandbox_status() -> tuple[bool, str]:
    """(True, "bubblewrap X") if a sandboxed Python starts here, else (False, why not)."""
    if not sys.platform.startswith("linux"):
        return False, f"bubblewrap needs Linux (this is {sys.platform})"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bwrap (bubblewrap) is not installed; on Debian or Ubuntu: apt-get install bubblewrap"
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return False, f"bwrap does not run: {err}"
    launch = _Launch(Limits(), [sys.executable, "-I", "-S", "-c", "print('sandbox ok')"], protect=[])
    try:
        proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = proc.communicate(timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return False, f"bwrap could not start a sandbox: {err}"
    finally:
        launch.cleanup()
    text = out.decode(errors="replace").strip()
    if proc.returncode != 0 or "sandbox ok" not in text:
        return False, f"bwrap could not start a sandbox here ({text.splitlines()[-1] if text else f'exit status {proc.returncode}'})"
    return True, version or "bubblewrap"


# --- how a kernel process is started -------------------------------------------------------------------

# Run as root, the launcher makes a private mount namespace, binds the folders the sandbox needs onto
# empty folders that an unprivileged user can reach (the Python install may sit in /root), drops to
# that user, then runs bwrap. The learner's code then never runs with root's uid, even outside the
# user namespace, so it cannot read root's files and the process limit applies to it.
_LAUNCHER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        sys.exit(f"sandbox launcher: {what}: {os.strerror(err)}")
uid, gid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
pairs, argv = sys.argv[4:4 + 2 * n], sys.argv[4 + 2 * n:]
check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
check(libc.mount(b"none", b"/", None, (1 << 14) | (1 << 18), None), "make / private")
for src, dst in zip(pairs[0::2], pairs[1::2]):
    check(libc.mount(src.encode(), dst.encode(), None, 4096 | (1 << 14), None), "bind " + src)
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
os.execv(argv[0], argv)
"""


def _unprivileged_ids() -> tuple[int, int]:
    try:
        import pwd

        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except (ImportError, KeyError):
        return 65534, 65534


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

    def __init__(self, limits: Limits, inner: list[str], *, protect: list[Path],
                 temp_root: Path | None = None, keep_fds: tuple[int, ...] = ()):
        self.limits, self.inner = limits, inner
        self.protect = [Path(os.path.realpath(p)) for p in protect]
        self.temp_root, self.keep_fds = temp_root, keep_fds
        self.stage: str | None = None  # (as root) the empty folders the launcher binds the sandbox's folders onto

    def popen(self, **kwargs) -> subprocess.Popen:
        argv, user = self._bwrap_argv()
        read_end, write_end = os.pipe()
        os.write(write_end, b"\0".join(a.encode() for a in argv) + b"\0")
        os.close(write_end)
        # The options travel through a pipe, so the sandbox's /proc/1/cmdline does not list the mounts.
        command = [shutil.which("bwrap"), "--args", str(read_end), "--", *self.inner]
        if user is not None:
            uid, gid, pairs = user
            command = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(uid), str(gid), str(len(pairs) // 2), *pairs, *command]
        try:
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, pass_fds=(*self.keep_fds, read_end), **kwargs)
        finally:
            os.close(read_end)

    def _bwrap_argv(self) -> tuple[list[str], tuple | None]:
        lim = self.limits
        binds = bound_folders(self.protect)
        user = None
        sources = {str(b): str(b) for b in binds}
        if os.geteuid() == 0:
            # Stage every bound folder where an unprivileged user can reach it (see _LAUNCHER).
            uid, gid = _unprivileged_ids()
            self.stage = tempfile.mkdtemp(prefix="course-sandbox-", dir=_reachable_folder(self.temp_root))
            os.chmod(self.stage, 0o755)
            pairs = []
            for i, b in enumerate(binds):
                target = os.path.join(self.stage, str(i))
                os.mkdir(target, 0o755)
                sources[str(b)] = target
                pairs += [str(b), target]
            user = (uid, gid, pairs)
        argv = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr"]
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
        argv += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm",
                 "--size", size, "--tmpfs", "/tmp"]
        for b in binds:
            argv += ["--ro-bind", sources[str(b)], str(b)]
        for p in self.protect:  # a protected folder inside a bound one is covered by an empty one
            if any(_inside(p, b) for b in binds):
                argv += ["--tmpfs", str(p)]
        argv += ["--chdir", "/tmp"]
        return argv, user

    def cleanup(self) -> None:
        if self.stage is not None:
            shutil.rmtree(self.stage, ignore_errors=True)
            self.stage = None


# --- one kernel ---------------------------------------------------------------------------------------


class Kernel(process.Kernel):
    """One learner kernel, in the sandbox (`sandbox=True`) or not: see `course_lib.runner.process.Kernel`.

    `protect` lists folders that must not be visible in the sandbox even if they sit inside one
    that is bound (the solutions, the submissions, the output folder). `cwd` (without the sandbox)
    is where the kernel runs; with the sandbox it runs in its private /tmp.
    """

    def __init__(self, limits: Limits, *, sandbox: bool, cwd: Path | None = None, protect: list[Path] = (),
                 temp_root: Path | None = None):
        super().__init__(limits, cwd=cwd, temp_root=temp_root)
        self.sandbox, self.protect = sandbox, list(protect)
        self.launch: _Launch | None = None

    def _kernel_config(self) -> dict:
        config = super()._kernel_config()
        if self.sandbox:  # in the sandbox the count covers only the sandbox's own processes
            config["processes"] = self.limits.processes
        return config

    def _popen(self, inner: list[str], config: dict, keep_fds: tuple[int, ...]) -> subprocess.Popen:
        if not self.sandbox:
            return super()._popen(inner, config, keep_fds)
        # In the sandbox there is no GPU device file, so the CPU.
        env = kernel_env(home="/tmp", config=config, device="cpu")
        self.launch = _Launch(self.limits, inner, protect=self.protect, temp_root=self.temp_root, keep_fds=keep_fds)
        return self.launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd="/")

    def _find_kernel_pid(self) -> int:
        """The kernel's process id as the grader sees it (in the sandbox it is the launcher's grandchild)."""
        if not self.sandbox:
            return self.proc.pid
        try:
            family = psutil.Process(self.proc.pid).children(recursive=True)
            deeper = [p for p in family if p.ppid() != self.proc.pid]
            return (deeper or family)[0].pid
        except (psutil.Error, IndexError):
            return self.proc.pid

    def _kill_strays(self) -> None:
        if not self.sandbox:  # in the sandbox the whole PID namespace goes with the kernel
            super()._kill_strays()

    def _cleanup(self) -> None:
        if self.launch is not None:
            self.launch.cleanup()
            self.launch = None
        super()._cleanup()
