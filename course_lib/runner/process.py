"""Start a learner's kernel as a child process and talk to it within limits.

`KernelProcess(limits, cwd=...)`: `start()`, then `request(...)` / `run_cell(...)`, then `shutdown()`. The
kernel (`course_lib.runner.kernel`) runs in a session of its own, in `cwd`, with a fresh home
folder and an environment with nothing from the caller's shell but what Python and the course
need. This is how `course check` runs a learner's own notebook: the learner's code on the learner's
machine, so no sandbox. The grader starts the same kernel inside a bubblewrap sandbox
(`course_grader.sandbox.SandboxedKernel`, a subclass that starts the process another way).

The kernel's only link to its caller is one end of a socket pair passed in; its stdout and stderr
go to a pipe that is read, counted and capped here. Limits enforced here, outside the kernel, where
learner code cannot switch them off: wall-clock time per request (interrupt, then kill), output per
cell (every byte the kernel writes, however it writes it), memory of the kernel and its children
(kill past the limit). Memory is counted as PSS (each shared page divided among the processes that
share it), so a kernel that forks workers is not charged once per worker for the same pages; it
needs psutil, which the grader installs. The kernel sets its own limits before any learner code
runs (see `kernel.set_limits`).
"""

from __future__ import annotations

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
from dataclasses import dataclass, replace
from pathlib import Path

from . import wire
from .text import inert

try:  # the grader depends on psutil (memory limit, CPU time, stray children); `course check` does without
    import psutil
except ImportError:  # pragma: no cover - psutil comes with Jupyter's kernel
    psutil = None

KERNEL_MODULE = "course_lib.runner.kernel"  # what `python -m` runs inside the new process
INTERRUPT_GRACE_S = 5.0  # CPU seconds a kernel has after an interrupt to stop, before it is killed
CHECK_EVERY_S = 0.1  # how often a request in flight looks at the CPU used (one cgroup file, or the process tree)


@dataclass
class Limits:
    """What a submission may use. Time is CPU time: what the submission's own processes used (its kernel and
    everything that kernel started, and the checks run for it), which a busy machine does not change; a
    wall-clock backstop `wall_factor` times larger stops only a kernel that waits or sleeps."""

    cell_cpu_s: float = 60.0  # CPU seconds per cell
    total_cpu_s: float = 600.0  # CPU seconds for a whole submission (all cells, restarts included)
    wall_factor: float = 5.0  # wall-clock backstop: this many times a CPU budget, whatever was used
    wall_margin_s: float = 60.0  # and at least this much longer than the budget
    memory_mb: int = 2048  # memory a submission may allocate on top of the libraries
    output_bytes: int = 1_000_000  # output a single cell may produce (any stream, display updates included)
    file_mb: int = 64  # largest file the kernel may write
    startup_cpu_s: float = 60.0  # CPU seconds for the kernel to start (Python, numpy, torch)
    processes: int = 64  # processes and threads inside the sandbox
    open_files: int = 256  # open file descriptors of the kernel
    scratch_mb: int = 256  # size of the sandbox's private /tmp (its home and scratch folder) and of /dev/shm
    message_mb: int = 64  # largest value passed between the learner's code and the checks

    def wall(self, cpu_s: float) -> float:
        """The wall-clock backstop of a CPU budget: only a kernel that waits or sleeps gets there."""
        return max(cpu_s * self.wall_factor, cpu_s + self.wall_margin_s)

    def from_notebook(self, nb: dict) -> Limits:
        """These limits with the time budgets an exercise set declares (`metadata.course.limits`:
        `cell_cpu_s`, `total_cpu_s`, chosen so that its worked solution uses at most a quarter)."""
        meta = nb.get("metadata", {}).get("course", {}) if isinstance(nb.get("metadata"), dict) else {}
        declared = meta.get("limits", {}) if isinstance(meta, dict) else {}
        found = {
            k: float(v)
            for k, v in (declared if isinstance(declared, dict) else {}).items()
            if k in ("cell_cpu_s", "total_cpu_s") and type(v) in (int, float) and 0 < v < 1e6
        }
        return replace(self, **found)


class Budget:
    """One cell's allowance (or one kernel start's): `cpu_s` seconds on `clock` (CPU seconds the submission
    has used so far, see `KernelProcess.cpu_used`) from now, and a wall-clock end `wall_end` (time.monotonic())
    past which it stops whatever it used. `cut`: the allowance is what is left of the submission's total,
    not the cell's own."""

    def __init__(self, clock, cpu_s: float, wall_end: float, *, cut: bool = False, limits: Limits | None = None):
        self.clock, self.cpu_s, self.wall_end, self.cut, self.limits = clock, cpu_s, wall_end, cut, limits
        self.started, self.start = clock(), time.monotonic()

    def used(self) -> float:
        return self.clock() - self.started

    def over(self) -> str | None:
        """ "cpu" (the CPU budget is spent), "wall" (the backstop: it waited or slept), or None."""
        if self.used() > self.cpu_s:
            return "cpu"
        if time.monotonic() > self.wall_end:
            return "wall"
        return None

    def message(self, why: str) -> str:
        """What the learner is told when this budget stopped a cell."""
        if why == "wall":
            return (
                f"the cell ran for {time.monotonic() - self.start:.0f} s of wall-clock time without finishing while "
                f"using little CPU time ({self.used():.1f} s): it was waiting or sleeping"
            )
        if self.cut and self.limits is not None:
            return f"the submission used up its total CPU time ({self.limits.total_cpu_s:g} s) during this cell"
        return f"the cell went past its time limit: more than {self.cpu_s:g} s of CPU time"


def submission_clock(kernel: KernelProcess):
    """CPU seconds a submission has used: its kernels' (all starts) and this process's (the checks run for it)."""
    return lambda: kernel.cpu_used() + time.process_time()


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


def package_dir() -> Path:
    """The folder of the `course_lib` package that this process imports (the kernel imports the same one)."""
    import course_lib

    return Path(course_lib.__file__).resolve().parent


def data_dir() -> Path | None:
    """The course's data folder (`course_lib.data`'s cache), if there is one."""
    try:
        from course_lib.data import default_cache_dir

        path = default_cache_dir().resolve()
    except Exception:  # noqa: BLE001 - no data folder is fine
        return None
    return path if path.is_dir() else None


def kernel_env(*, home: str, config: dict, device: str | None = None) -> dict:
    """A minimal environment: nothing from the caller's shell but what Python and the course need.

    `device` is the COURSE_DEVICE the kernel gets (default: the caller's choice, else the CPU)."""
    package_parent = str(package_dir().parent)
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
        "PYTHONPATH": package_parent,  # the same course_lib as the caller's, whatever the current folder is
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONWARNINGS": "ignore",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TQDM_DISABLE": "1",
        "COURSE_GRADING": "1",
        "COURSE_NO_DOWNLOAD": "1",
        "COURSE_DEVICE": device or os.environ.get("COURSE_DEVICE", "cpu"),
        "COURSE_KERNEL_CONFIG": json.dumps(config),
    }
    data = data_dir()
    if data is not None:
        env["COURSE_DATA_DIR"] = str(data)
    return env


def _pss_bytes(pid: int) -> int | None:
    """A process's proportional set size, from /proc/PID/smaps_rollup (Linux 4.14+); None if unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# --- one kernel ---------------------------------------------------------------------------------------


class KernelProcess:
    """One learner kernel: `start()`, then `request(...)` / `run_cell(...)`, then `shutdown()`.

    `cwd` is where the kernel runs (default: its home, a fresh temporary folder under `temp_root`).
    A subclass starts the process another way by overriding `_popen` (and `_kernel_config`,
    `_find_kernel_pid`, `_kill_strays`, `_cleanup`): the grader's sandbox does.
    """

    def __init__(self, limits: Limits, *, cwd: Path | None = None, temp_root: Path | None = None):
        self.limits, self.cwd, self.temp_root = limits, cwd, temp_root
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.out_fd: int | None = None  # the kernel's stdout and stderr
        self.home: str | None = None
        self.kernel_pid: int | None = None
        self.output_count = 0  # bytes written since `begin_cell`
        self.output_tail = b""  # the last bytes written (to explain a failed start)
        self.pending_release: list[int] = []
        self.generation = 0  # counts starts: handles from an earlier start are dead
        self._base_mb = 0.0
        self._last_memory_check = 0.0
        self._last_cpu_check = 0.0
        self.request_id = 0  # replies carry the id of their request; a late reply to an abandoned one is dropped
        self.cpu_seconds = 0.0  # CPU time of the kernels started so far (measured when each one is shut down)
        self._received = bytearray()  # bytes of replies not yet used

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> None:
        self.generation += 1
        self.pending_release = []
        self._received = bytearray()
        parent, child = socket.socketpair()
        inner = [sys.executable, "-m", KERNEL_MODULE, str(child.fileno())]
        try:
            self.proc = self._popen(inner, self._kernel_config(), keep_fds=(child.fileno(),))
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
        budget = Budget(
            self.cpu_used, self.limits.startup_cpu_s, time.monotonic() + self.limits.wall(self.limits.startup_cpu_s)
        )
        try:
            reply, _ = self._exchange(None, [], budget=budget, stage="start")
        except KernelStopped as err:
            tail = self.output_tail.decode(errors="replace").strip().splitlines()[-3:]
            self.shutdown()
            said = f": {' | '.join(tail)}" if tail else ""
            raise RuntimeError(f"the kernel did not start ({err.message}){said}") from None
        if not reply.get("ready"):
            self.shutdown()
            raise RuntimeError("the kernel did not start (no greeting)")
        self.kernel_pid = self._find_kernel_pid()
        self._base_mb = self._memory_mb()
        self._started()

    def _started(self) -> None:
        """Called once the kernel has said it is ready, before any cell runs (a subclass sets limits)."""

    def _kernel_config(self) -> dict:
        """The limits the kernel sets on itself before any learner code runs (see `kernel.set_limits`).
        No process count: outside a sandbox it would count all of the user's processes."""
        return {
            "memory_mb": self.limits.memory_mb,
            "file_mb": self.limits.file_mb,
            "cpu_s": int(self.limits.total_cpu_s * 2 + 60),
            "open_files": self.limits.open_files,
            "processes": 0,
            "message_mb": self.limits.message_mb,
        }

    def _popen(self, inner: list[str], config: dict, keep_fds: tuple[int, ...]) -> subprocess.Popen:
        """Start the kernel process: a child in a session of its own, with a fresh home folder."""
        self.home = tempfile.mkdtemp(prefix="course-kernel-", dir=self.temp_root)
        env = kernel_env(home=self.home, config=config)
        return subprocess.Popen(
            inner,
            stdin=subprocess.DEVNULL,
            pass_fds=keep_fds,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(self.cwd or self.home),
        )

    def _find_kernel_pid(self) -> int:
        """The kernel's process id."""
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
        """End the kernel and everything it started."""
        if self.proc is None:
            return
        self._kill_strays()
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
        self._cleanup()
        self.proc, self.kernel_pid = None, None

    def _kill_strays(self) -> None:
        """Kill the kernel's session and the children that left it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the kernel and the children it did not move away
        except OSError:
            pass
        if psutil is None:
            return
        try:
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                p.kill()
        except psutil.Error:
            pass

    def _cleanup(self) -> None:
        """Remove what `_popen` made for the kernel (its home folder)."""
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def interrupt(self) -> None:
        if self.kernel_pid is not None:
            try:
                os.kill(self.kernel_pid, signal.SIGINT)
            except OSError:
                pass

    def cell_budget(self, cpu_s: float | None = None) -> Budget:
        """A budget for one cell run on its own: `cpu_s` (default: the cell limit) of this kernel's CPU time."""
        cpu_s = self.limits.cell_cpu_s if cpu_s is None else cpu_s
        return Budget(self.cpu_used, cpu_s, time.monotonic() + self.limits.wall(cpu_s), limits=self.limits)

    def cpu_used(self) -> float:
        """CPU seconds this kernel has used since its first start: every earlier start's, and the running one's."""
        return self.cpu_seconds + (self._cpu() if self.proc is not None else 0.0)

    def _cpu(self) -> float:
        """CPU seconds used so far by the running kernel and its children (without psutil: none counted)."""
        if psutil is None:
            return 0.0
        try:
            procs = [psutil.Process(self.proc.pid)]
            procs += procs[0].children(recursive=True)
            return sum(sum(p.cpu_times()[:4]) for p in procs)
        except (psutil.Error, AttributeError):
            return 0.0

    def _memory_mb(self) -> float:
        """The memory of the kernel and everything it started, as PSS (RSS where PSS cannot be read)."""
        if psutil is None:
            return 0.0
        try:
            proc = psutil.Process(self.proc.pid)
            family = [proc, *proc.children(recursive=True)]
        except (psutil.Error, AttributeError):
            return 0.0
        total = 0
        for p in family:
            pss = _pss_bytes(p.pid)
            if pss is None:
                try:
                    pss = p.memory_info().rss
                except psutil.Error:
                    pss = 0
            total += pss
        return total / 2**20

    def _over_memory_limit(self) -> bool:
        return self._memory_mb() > self._base_mb + self.limits.memory_mb + 512

    def _why_died(self) -> str:
        """The status of a kernel that ended by itself: "died" (a subclass may know it was the memory limit)."""
        return "died"

    # --- requests -----------------------------------------------------------------------------------

    def begin_cell(self) -> None:
        """Start counting a new cell's output."""
        self._drain_output()
        self.output_count = 0

    def request(self, header: dict, buffers: list[bytes] = (), *, budget: Budget) -> tuple[dict, list[bytes]]:
        """Send one request and wait for its reply within the cell's `budget`; `KernelStopped` if no normal
        reply comes."""
        if not self.alive():
            raise KernelStopped("died", "the kernel was not running", alive=False)
        self.request_id += 1
        header = dict(header, id=self.request_id)
        if self.pending_release:
            header["release"] = self.pending_release
            self.pending_release = []
        return self._exchange(header, list(buffers), budget=budget, stage="request")

    def _exchange(
        self, header: dict | None, buffers: list[bytes], *, budget: Budget, stage: str
    ) -> tuple[dict, list[bytes]]:
        data = memoryview(wire.pack(header, buffers) if header is not None else b"")
        want_id = header.get("id") if header is not None else None
        status = None  # why we interrupted
        interrupted_at = interrupted_cpu = None
        limit_bytes = self.limits.message_mb * 2**20 + 2**20
        timed_out = ""  # how the budget ran out: "cpu" or "wall"
        ignored = False  # an interrupt that the kernel ignored for its grace (in CPU time, with a wall backstop)
        while True:
            now = time.monotonic()
            if now > budget.wall_end or now - self._last_cpu_check > CHECK_EVERY_S:
                self._last_cpu_check = now
                if status is None:
                    timed_out = budget.over() or ""
                    status = "timeout" if timed_out else None
                elif interrupted_at is not None:
                    ignored = budget.used() - interrupted_cpu > INTERRUPT_GRACE_S
            if status is None and stage == "request" and self._over_output_limit():
                status = "output-limit"
            if status is not None and interrupted_at is None:
                interrupted_at, interrupted_cpu = now, budget.used()
                if stage == "start":
                    self.kill()
                    raise KernelStopped(status, f"it took too long to start: {budget.message(timed_out)}", alive=False)
                self.interrupt()
            if interrupted_at is not None and (ignored or now - interrupted_at > self.limits.wall(INTERRUPT_GRACE_S)):
                self.kill()  # it ignored the interrupt (a C loop, or SIGINT caught)
                raise KernelStopped(status, self._message(status, budget, timed_out), alive=False)
            if stage == "request" and self.limits.memory_mb and now - self._last_memory_check > 0.25:
                self._last_memory_check = now
                if self._over_memory_limit():
                    self.kill()
                    raise KernelStopped("memory-limit", self._message("memory-limit", budget), alive=False)
            try:
                readable, writable, _ = select.select(
                    [self.sock, self.out_fd], [self.sock] if len(data) else [], [], 0.05
                )
            except (OSError, ValueError):
                raise self._stopped(budget) from None
            if self.out_fd in readable:
                self._drain_output()
            if writable:
                try:
                    data = data[self.sock.send(data[: 1 << 20]) :]
                except BlockingIOError:
                    pass
                except OSError:
                    self.kill()
                    raise self._stopped(budget) from None
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
                    raise self._stopped(budget)
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
                raise self._stopped(budget)
        # Everything the kernel printed before it replied is in the pipe now: count it with this request.
        self._drain_output()
        if status is None and stage == "request" and self._over_output_limit():
            status = "output-limit"
        if status is not None:
            raise KernelStopped(status, self._message(status, budget, timed_out), alive=True)
        return reply, out

    def _stopped(self, budget: Budget) -> KernelStopped:
        status = self._why_died()
        return KernelStopped(status, self._message(status, budget), alive=False)

    def _over_output_limit(self) -> bool:
        return bool(self.limits.output_bytes) and self.output_count > self.limits.output_bytes

    def _next_reply(self, want_id, limit_bytes: int) -> tuple[dict, list[bytes]] | None:
        """The reply to request `want_id` if it has arrived whole; replies to earlier requests (abandoned
        when a time limit cut them short) are dropped."""
        while len(self._received) >= wire.PREFIX.size:
            n_header, n_buffers = wire.unpack_prefix(bytes(self._received[: wire.PREFIX.size]), limit_bytes)
            end = wire.PREFIX.size + n_header + n_buffers
            if len(self._received) < end:
                return None
            body = bytes(self._received[wire.PREFIX.size : end])
            del self._received[:end]
            reply, out = wire.unpack_body(body, n_header, limit_bytes)
            if reply.get("id") == want_id:
                return reply, out
        return None

    def _message(self, status: str, budget: Budget, timed_out: str = "cpu") -> str:
        return {
            "timeout": budget.message(timed_out or "cpu"),
            "output-limit": f"the cell printed more than the output limit ({self.limits.output_bytes} bytes)",
            "memory-limit": f"the cell used more memory than the limit ({self.limits.memory_mb} MB)",
            "died": "the kernel stopped (the code ended the Python process or crashed it)",
        }[status]

    def run_cell(self, code: str, kind: str, *, budget: Budget) -> tuple[CellRun, list[str]]:
        """Run one cell within `budget`; its outcome, and the names bound by answer cells so far.
        Never raises for what the code does."""
        self.begin_cell()
        try:
            reply, _ = self.request({"op": "run", "code": code, "kind": kind}, budget=budget)
        except KernelStopped as err:
            return CellRun(err.status, err.status, err.message), []
        learner = reply.get("learner", [])
        learner = learner[:10_000] if isinstance(learner, list) else []
        learner = [n for n in learner if isinstance(n, str) and n.isidentifier()]
        if reply.get("failed"):
            credit = reply.get("credit")
            credit = float(credit) if type(credit) is float and 0.0 <= credit < 1.0 else None
            ename, evalue = inert(reply.get("ename", ""), 200), inert(reply.get("evalue", ""))
            return CellRun("error", ename, evalue, credit=credit), learner
        return CellRun("ok"), learner
