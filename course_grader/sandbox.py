"""Start a learner's kernel, inside a bubblewrap sandbox or not, and talk to it within limits.

`Kernel(limits, sandbox=True).start()` runs `course_lib.grading.kernel` under `bwrap` (Linux):

- new user, PID, network, IPC, UTS and cgroup namespaces; an unprivileged uid inside (and, when
  the grader runs as root, an unprivileged uid outside too: nobody), no capabilities, no nested
  user namespaces, a new terminal session;
- a root file system of its own: the system (/usr and the library folders), a few files from
  /etc, the Python installation, the virtual environment, the `course_lib` package and the course
  data folder, all read-only; a private tmpfs (limited in size) as home, scratch folder and /tmp;
  /proc of its own PID namespace only; a minimal /dev. The solutions, the submissions, the output
  folder and the rest of the teacher's files are not there at all;
- `--die-with-parent`, and the PID namespace dies with the kernel: whatever the learner's code
  started ends when the grader kills the sandbox;
- limits set by the kernel before any learner code runs: processes, open files, file size,
  address space, CPU seconds.

The kernel's only link to the grader is one end of a socket pair that the grader passes in; its
stdout and stderr go to a pipe that the grader reads, counts and caps. Without the sandbox
(`course check`, or `course grade --no-sandbox`) the same kernel runs as a plain child process,
with the same limits except the process count.

Limits enforced here, outside the kernel, where learner code cannot switch them off: wall-clock
time per request (interrupt, then kill), output per cell (every byte the kernel writes, however
it writes it), resident memory of everything in the sandbox (kill past the limit).
"""
from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import wire

INTERRUPT_GRACE_S = 5.0  # after an interrupt, how long a kernel has to stop before it is killed
SANDBOX_UID = 1000  # the learner's uid and gid inside the sandbox
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "fonts", "os-release",
             "mime.types", "nsswitch.conf")


@dataclass
class Limits:
    cell_timeout: float = 60.0  # seconds of wall-clock time per cell
    total_timeout: float = 600.0  # seconds for a whole submission (all cells, restarts included)
    memory_mb: int = 2048  # memory a submission may allocate on top of the libraries
    output_bytes: int = 1_000_000  # output a single cell may produce (any stream, display updates included)
    file_mb: int = 64  # largest file the kernel may write
    startup_timeout: float = 60.0  # seconds for the kernel to start
    processes: int = 64  # processes and threads inside the sandbox
    open_files: int = 256  # open file descriptors of the kernel
    scratch_mb: int = 256  # size of the sandbox's private /tmp (its home and scratch folder) and of /dev/shm
    message_mb: int = 64  # largest value passed between the learner's code and the checks


@dataclass
class CellRun:
    status: str  # ok | error | timeout | output-limit | memory-limit | died
    ename: str = ""  # exception class name when status is "error"
    evalue: str = ""  # its message
    stdout: str = ""  # text the cell printed (checker side only), capped
    credit: float | None = None  # a failed multi-part check: the share of parts that were right

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class KernelStopped(BaseException):
    """A request did not get a normal answer: time or output limit, memory limit, or the kernel died.

    A BaseException, so that a check's `except Exception` cannot swallow it. `alive` says whether
    the kernel is still usable (an interrupt that worked) or must be started again.
    """

    def __init__(self, status: str, message: str, alive: bool):
        super().__init__(message)
        self.status, self.message, self.alive = status, message, alive


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
    launch = _Launch(Limits(), [sys.executable, "-I", "-S", "-c", "print('sandbox ok')"], sandbox=True, protect=[])
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


def _package_dir() -> Path:
    import course_lib

    return Path(course_lib.__file__).resolve().parent


def _data_dir() -> Path | None:
    try:
        from course_lib.data import default_cache_dir

        path = default_cache_dir().resolve()
    except Exception:  # noqa: BLE001 - no data folder is fine
        return None
    return path if path.is_dir() else None


def bound_folders(protect=()) -> list[Path]:
    """The host folders the sandbox sees, read-only, besides the system: Python, the course library, the data.

    The data folder is left out when it holds (or sits inside) a protected folder."""
    binds = _python_roots() + [_package_dir()]
    data = _data_dir()
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
    """The command line (and its file descriptors) that starts `inner` in the sandbox or without it."""

    def __init__(self, limits: Limits, inner: list[str], *, sandbox: bool, protect: list[Path],
                 temp_root: Path | None = None, keep_fds: tuple[int, ...] = ()):
        self.limits, self.inner, self.sandbox = limits, inner, sandbox
        self.protect = [Path(os.path.realpath(p)) for p in protect]
        self.temp_root, self.keep_fds = temp_root, keep_fds
        self.stage: str | None = None  # (as root) the empty folders the launcher binds the sandbox's folders onto

    def popen(self, **kwargs) -> subprocess.Popen:
        if not self.sandbox:
            return subprocess.Popen(self.inner, stdin=subprocess.DEVNULL, pass_fds=self.keep_fds,
                                    start_new_session=True, **kwargs)
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


def kernel_env(*, sandbox: bool, home: Path | None, config: dict) -> dict:
    """A minimal environment: nothing from the teacher's shell but what Python and the course need."""
    package_parent = str(_package_dir().parent)
    home = "/tmp" if sandbox else str(home)
    env = {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "USER": "learner",
        "LOGNAME": "learner",
        "TMPDIR": home,
        "IPYTHONDIR": os.path.join(home, ".ipython"),
        "MPLCONFIGDIR": os.path.join(home, ".matplotlib"),
        "MPLBACKEND": "Agg",
        "PYTHONPATH": package_parent,  # the same course_lib as the grader's, whatever the current folder is
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONWARNINGS": "ignore",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TQDM_DISABLE": "1",
        "COURSE_GRADING": "1",
        "COURSE_NO_DOWNLOAD": "1",
        # In the sandbox there is no GPU device file, so the CPU; outside, what the teacher chose.
        "COURSE_DEVICE": "cpu" if sandbox else os.environ.get("COURSE_DEVICE", "cpu"),
        "COURSE_KERNEL_CONFIG": json.dumps(config),
    }
    data = _data_dir()
    if data is not None:
        env["COURSE_DATA_DIR"] = str(data)
    return env


# --- one kernel ---------------------------------------------------------------------------------------


class Kernel:
    """One learner kernel: `start()`, then `request(...)` / `run_cell(...)`, then `shutdown()`.

    `protect` lists folders that must not be visible in the sandbox even if they sit inside one
    that is bound (the solutions, the submissions, the output folder). `cwd` (without the sandbox)
    is where the kernel runs; with the sandbox it runs in its private /tmp.
    """

    def __init__(self, limits: Limits, *, sandbox: bool, cwd: Path | None = None, protect: list[Path] = (),
                 temp_root: Path | None = None):
        self.limits, self.sandbox, self.cwd = limits, sandbox, cwd
        self.protect, self.temp_root = list(protect), temp_root
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.out_fd: int | None = None  # the kernel's stdout and stderr
        self.launch: _Launch | None = None
        self.home: str | None = None
        self.kernel_pid: int | None = None
        self.output_count = 0  # bytes written since `begin_cell`
        self.output_tail = b""  # the last bytes written (to explain a failed start)
        self.pending_release: list[int] = []
        self.generation = 0  # counts starts: handles from an earlier start are dead
        self._base_mb = 0.0
        self._last_memory_check = 0.0
        self.request_id = 0  # replies carry the id of their request; a late reply to an abandoned one is dropped
        self.cpu_seconds = 0.0  # CPU time of the kernels started so far (measured when each one is shut down)
        self._received = bytearray()  # bytes of replies not yet used

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        self.generation += 1
        self.pending_release = []
        self._received = bytearray()
        parent, child = socket.socketpair()
        config = {"memory_mb": self.limits.memory_mb, "file_mb": self.limits.file_mb,
                  "cpu_s": int(self.limits.total_timeout * 2 + 60), "open_files": self.limits.open_files,
                  "processes": self.limits.processes if self.sandbox else 0, "message_mb": self.limits.message_mb}
        if not self.sandbox:
            self.home = tempfile.mkdtemp(prefix="course-kernel-", dir=self.temp_root)
        env = kernel_env(sandbox=self.sandbox, home=Path(self.home) if self.home else None, config=config)
        inner = [sys.executable, "-m", "course_lib.grading.kernel", str(child.fileno())]
        self.launch = _Launch(self.limits, inner, sandbox=self.sandbox, protect=self.protect,
                              temp_root=self.temp_root, keep_fds=(child.fileno(),))
        try:
            self.proc = self.launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                          cwd="/" if self.sandbox else str(self.cwd or self.home))
        except BaseException:
            parent.close()
            child.close()
            self.shutdown()
            raise
        child.close()
        self.sock = parent
        self.sock.setblocking(False)
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)
        try:
            reply, _ = self._exchange(None, [], deadline=time.monotonic() + self.limits.startup_timeout, stage="start")
        except KernelStopped as err:
            tail = self.output_tail.decode(errors="replace").strip().splitlines()[-3:]
            self.shutdown()
            raise RuntimeError(f"the kernel did not start ({err.message})" + (f": {' | '.join(tail)}" if tail else "")) from None
        if not reply.get("ready"):
            self.shutdown()
            raise RuntimeError("the kernel did not start (no greeting)")
        self.kernel_pid = self._find_kernel_pid()
        self._base_mb = self._rss_mb()

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

    def _drain_output(self) -> None:
        """Count (and drop) what the kernel wrote; keep the last few KB to explain a failed start."""
        while self.out_fd is not None:
            try:
                chunk = os.read(self.out_fd, 1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if not chunk:
                return
            self.output_count += len(chunk)
            self.output_tail = (self.output_tail + chunk)[-4096:]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.sock is not None

    def kill(self) -> None:
        """End the kernel and everything it started (in the sandbox, the whole PID namespace goes)."""
        if self.proc is None:
            return
        if not self.sandbox:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the kernel and the children it did not move away
            except OSError:
                pass
            try:
                for p in psutil.Process(self.proc.pid).children(recursive=True):
                    p.kill()
            except psutil.Error:
                pass
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def shutdown(self) -> None:
        """Close the connection (the kernel then exits by itself), then kill whatever is left."""
        self.cpu_seconds += self._cpu()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
        self.kill()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.out_fd = None
        if self.launch is not None:
            self.launch.cleanup()
            self.launch = None
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
        self.proc, self.kernel_pid = None, None

    def interrupt(self) -> None:
        if self.kernel_pid is not None:
            try:
                os.kill(self.kernel_pid, signal.SIGINT)
            except OSError:
                pass

    def _cpu(self) -> float:
        """CPU seconds used so far by everything in the sandbox (for benchmarks)."""
        try:
            procs = [psutil.Process(self.proc.pid)]
            procs += procs[0].children(recursive=True)
            return sum(sum(p.cpu_times()[:4]) for p in procs)
        except (psutil.Error, AttributeError):
            return 0.0

    def _rss_mb(self) -> float:
        try:
            proc = psutil.Process(self.proc.pid)
            return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20
        except (psutil.Error, AttributeError):
            return 0.0

    # --- requests -----------------------------------------------------------------------------------

    def begin_cell(self) -> None:
        """Start counting a new cell's output."""
        self._drain_output()
        self.output_count = 0

    def request(self, header: dict, buffers: list[bytes] = (), *, deadline: float, cut: bool = False) -> tuple[dict, list[bytes]]:
        """Send one request and wait for its reply until `deadline` (`cut`: which is the submission's
        total time limit, not the cell's); `KernelStopped` if no normal reply comes."""
        if not self.alive():
            raise KernelStopped("died", "the kernel was not running", alive=False)
        self.request_id += 1
        header = dict(header, id=self.request_id)
        if self.pending_release:
            header["release"] = self.pending_release
            self.pending_release = []
        return self._exchange(header, list(buffers), deadline=deadline, stage="request", cut=cut)

    def _exchange(self, header: dict | None, buffers: list[bytes], *, deadline: float, stage: str,
                  cut: bool = False) -> tuple[dict, list[bytes]]:
        data = memoryview(wire.pack(header, buffers) if header is not None else b"")
        want_id = header.get("id") if header is not None else None
        status = None  # why we interrupted
        interrupted_at = None
        limit_bytes = self.limits.message_mb * 2**20 + 2**20
        while True:
            now = time.monotonic()
            if status is None and now > deadline:
                status = "timeout"
            if status is None and stage == "request" and self.limits.output_bytes and self.output_count > self.limits.output_bytes:
                status = "output-limit"
            if status is not None and interrupted_at is None:
                interrupted_at = now
                if stage == "start":
                    self.kill()
                    raise KernelStopped(status, "it took too long to start", alive=False)
                self.interrupt()
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_S:
                self.kill()  # it ignored the interrupt (a C loop, or SIGINT caught)
                raise KernelStopped(status, self._message(status, cut), alive=False)
            if stage == "request" and self.limits.memory_mb and now - self._last_memory_check > 0.25:
                self._last_memory_check = now
                if self._rss_mb() > self._base_mb + self.limits.memory_mb + 512:
                    self.kill()
                    raise KernelStopped("memory-limit", self._message("memory-limit", cut), alive=False)
            try:
                readable, writable, _ = select.select([self.sock, self.out_fd], [self.sock] if len(data) else [], [], 0.05)
            except (OSError, ValueError):
                raise KernelStopped("died", self._message("died", cut), alive=False) from None
            if self.out_fd in readable:
                self._drain_output()
            if writable:
                try:
                    data = data[self.sock.send(data[:1 << 20]):]
                except BlockingIOError:
                    pass
                except OSError:
                    self.kill()
                    raise KernelStopped("died", self._message("died", cut), alive=False) from None
            if self.sock in readable:
                try:
                    chunk = self.sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self.kill()
                    self._drain_output()
                    raise KernelStopped("died", self._message("died", cut), alive=False)
                self._received += chunk
                try:
                    found = self._next_reply(want_id, limit_bytes)
                except wire.WireError as err:
                    self.kill()  # a kernel that speaks nonsense cannot be trusted with the next request
                    raise KernelStopped("died", f"the kernel sent a garbled reply ({err})", alive=False) from None
                if found is not None:
                    reply, out = found
                    break
            elif self.proc.poll() is not None:
                self._drain_output()
                raise KernelStopped("died", self._message("died", cut), alive=False)
        # Everything the kernel printed before it replied is in the pipe now: count it with this request.
        self._drain_output()
        if status is None and stage == "request" and self.limits.output_bytes and self.output_count > self.limits.output_bytes:
            status = "output-limit"
        if status is not None:
            raise KernelStopped(status, self._message(status, cut), alive=True)
        return reply, out

    def _next_reply(self, want_id, limit_bytes: int) -> tuple[dict, list[bytes]] | None:
        """The reply to request `want_id` if it has arrived whole; replies to earlier requests (abandoned
        when a time limit cut them short) are dropped."""
        while len(self._received) >= wire.PREFIX.size:
            n_header, n_buffers = wire.unpack_prefix(bytes(self._received[:wire.PREFIX.size]), limit_bytes)
            end = wire.PREFIX.size + n_header + n_buffers
            if len(self._received) < end:
                return None
            body = bytes(self._received[wire.PREFIX.size:end])
            del self._received[:end]
            reply, out = wire.unpack_body(body, n_header)
            if reply.get("id") == want_id:
                return reply, out
        return None

    def _message(self, status: str, cut: bool) -> str:
        return {
            "timeout": "the submission used up its total time limit during this cell" if cut
                       else f"the cell ran longer than the time limit ({self.limits.cell_timeout:g} s)",
            "output-limit": f"the cell printed more than the output limit ({self.limits.output_bytes} bytes)",
            "memory-limit": f"the cell used more memory than the limit ({self.limits.memory_mb} MB)",
            "died": "the kernel stopped (the code ended the Python process or crashed it)",
        }[status]

    def run_cell(self, code: str, kind: str, *, deadline: float) -> tuple[CellRun, list[str]]:
        """Run one cell; its outcome, and the names bound by answer cells so far. Never raises for what the code does."""
        self.begin_cell()
        own_end = time.monotonic() + self.limits.cell_timeout
        try:
            reply, _ = self.request({"op": "run", "code": code, "kind": kind}, deadline=min(deadline, own_end),
                                    cut=deadline < own_end)
        except KernelStopped as err:
            return CellRun(err.status, err.status, err.message), []
        learner = reply.get("learner", [])
        learner = [n for n in learner if isinstance(n, str)] if isinstance(learner, list) else []
        if reply.get("failed"):
            credit = reply.get("credit")
            credit = float(credit) if type(credit) is float and 0.0 <= credit < 1.0 else None
            return CellRun("error", str(reply.get("ename", "")), str(reply.get("evalue", "")), credit=credit), learner
        return CellRun("ok"), learner
