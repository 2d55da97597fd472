"""Run code cells in a fresh kernel, one at a time, with limits, and report what happened.

`Sandbox` starts `course_lib.grading.kernel` (an IPython kernel with resource limits and an
audit hook, see that module) through jupyter_client in a scratch folder with a scrubbed
environment, then `run(code)` executes one cell and returns a `CellRun`: the status ("ok",
"error", "timeout", "output-limit", "memory-limit", "died"), the exception's name and message
as the kernel reported them, and the text the cell printed (capped).

Limits enforced here, outside the kernel, where student code cannot switch them off:
- wall-clock time per cell (interrupt, then kill) and per submission (the caller's deadline);
- output per cell (bytes of text and data; beyond it the cell is interrupted);
- resident memory (a watchdog kills the kernel past the limit; the kernel also has an address
  space limit so most runaway allocations fail with a MemoryError first).
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from .notebook import write_atomic

KERNEL_NAME = "course-grader"


@dataclass
class Limits:
    cell_timeout: float = 60.0  # seconds of wall-clock time per cell
    total_timeout: float = 600.0  # seconds for a whole submission (all cells, restarts included)
    memory_mb: int = 2048  # memory a submission may allocate on top of the libraries
    output_bytes: int = 1_000_000  # output a single cell may produce
    file_mb: int = 64  # largest file the kernel may write
    startup_timeout: float = 60.0  # seconds for the kernel to start


@dataclass
class CellRun:
    status: str  # ok | error | timeout | output-limit | memory-limit | died
    ename: str = ""  # exception class name when status is "error"
    evalue: str = ""  # its message
    stdout: str = ""  # all stream text, capped

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _kernelspec_dir(root: Path) -> Path:
    """A kernelspec that starts our bootstrap module with the grader's own Python."""
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "course_lib.grading.kernel", "-f", "{connection_file}"]
    # Atomically: parallel graders share `root`, and one must never read another's half-written file.
    write_atomic(spec / "kernel.json", json.dumps({"argv": argv, "display_name": "course grader", "language": "python"}))
    return root / "kernels"


def scrubbed_env(scratch: Path, policy: dict) -> dict:
    """A minimal environment: nothing from the teacher's shell but what Python needs."""
    import course_lib

    home = scratch / ".home"
    for sub in ("", "tmp", "ipython", "mpl", "jupyter"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "IPYTHONDIR": str(home / "ipython"),
        "MPLCONFIGDIR": str(home / "mpl"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "JUPYTER_CONFIG_DIR": str(home / "jupyter"),
        "JUPYTER_DATA_DIR": str(home / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / "jupyter"),
        # the same course_lib as the grader's, whatever the current folder is
        "PYTHONPATH": str(Path(course_lib.__file__).resolve().parents[1]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONWARNINGS": "ignore",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TQDM_DISABLE": "1",
        "COURSE_GRADING": "1",
        "COURSE_DEVICE": os.environ.get("COURSE_DEVICE", "cpu"),
        "COURSE_GRADING_POLICY": json.dumps(policy),
    }
    return env


class Sandbox:
    """One kernel in one scratch folder: `start()`, `run(code)` cell by cell, `shutdown()`."""

    def __init__(self, scratch: Path, limits: Limits, policy: dict, kernels_root: Path, cwd: Path | None = None):
        self.scratch, self.limits, self.policy = Path(scratch), limits, policy
        self.cwd = Path(cwd) if cwd is not None else self.scratch
        self.kernel_dirs = _kernelspec_dir(Path(kernels_root))
        self.km: KernelManager | None = None
        self.kc = None
        self._socket_dir: str | None = None

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        ksm = KernelSpecManager(kernel_dirs=[str(self.kernel_dirs)], ensure_native_kernel=False)
        self.km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)
        # The connection file lives in the scratch folder's private home, not the teacher's runtime dir.
        self.km.connection_file = str(self.scratch / ".home" / "jupyter" / "kernel-grader.json")
        if os.name == "posix":
            # Unix sockets instead of TCP ports: with TCP, jupyter_client picks a free port and the
            # kernel binds it a second later, and a kernel starting in parallel can take it first
            # ("Address already in use"). Socket paths are limited to about 100 characters, hence
            # a short private folder rather than the scratch folder.
            self._socket_dir = tempfile.mkdtemp(prefix="ck-")
            self.km.transport = "ipc"
            self.km.ip = os.path.join(self._socket_dir, "k")
        # The kernel applies these itself (see kernel.py); the caller adds what it denies.
        policy = dict(self.policy)
        policy.setdefault("allow_write", [str(self.scratch)])
        policy.setdefault("allow_read", [str(self.scratch)])
        policy.setdefault("memory_mb", self.limits.memory_mb)
        policy.setdefault("file_mb", self.limits.file_mb)
        policy.setdefault("cpu_s", int(self.limits.total_timeout * 2 + 60))
        # The kernel's own stderr (not the cells' output, which travels over the iopub channel) goes
        # to a log in the scratch folder, so a failed start can say why.
        log_path = self.scratch / ".home" / "kernel.log"
        env = scrubbed_env(self.scratch, policy)
        with open(log_path, "ab") as log:
            self.km.start_kernel(cwd=str(self.cwd), env=env, stdout=log, stderr=log)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=self.limits.startup_timeout)
        except RuntimeError as err:
            self.shutdown()
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:] if log_path.exists() else []
            raise RuntimeError(f"{err}: {' | '.join(tail)}") from None
        self._base_mb = self._rss_mb()

    def shutdown(self) -> None:
        if self.kc is not None:
            try:
                self.kc.stop_channels()
            except Exception:
                pass
        if self.km is not None:
            try:
                self.km.shutdown_kernel(now=True)
            except Exception:
                pass
            try:
                self.km.cleanup_resources()
            except Exception:
                pass
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        self.km = self.kc = None

    def alive(self) -> bool:
        return self.km is not None and self.km.is_alive()

    def _rss_mb(self) -> float:
        try:
            pid = self.km.provisioner.process.pid
            proc = psutil.Process(pid)
            return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20
        except Exception:
            return 0.0

    def _kill(self) -> None:
        try:
            self.km.shutdown_kernel(now=True)
        except Exception:
            pass

    # --- running one cell -------------------------------------------------------------------------

    def run(self, code: str, timeout: float | None = None, deadline: float | None = None) -> CellRun:
        """Execute `code`; never raises for anything the code does."""
        if not self.alive():
            return CellRun("died", "KernelDied", "the kernel was not running")
        timeout = self.limits.cell_timeout if timeout is None else timeout
        end = time.monotonic() + timeout
        cut_by_deadline = deadline is not None and deadline < end
        if cut_by_deadline:
            end = deadline
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        stdout_parts, size = [], 0
        reply, idle, status = None, False, None
        interrupted_at = None
        garbled = 0
        last_mem_check = 0.0
        while not (idle and reply is not None):
            now = time.monotonic()
            if status is None and now > end:
                status = "timeout"
            if status in ("timeout", "output-limit") and interrupted_at is None:
                interrupted_at = now
                try:
                    self.km.interrupt_kernel()
                except Exception:
                    pass
            if interrupted_at is not None and now - interrupted_at > 5.0:
                self._kill()  # it ignored the interrupt (a C loop, or SIGINT caught)
                break
            if now - last_mem_check > 0.2:
                last_mem_check = now
                if self.limits.memory_mb and self._rss_mb() > self._base_mb + self.limits.memory_mb + 512:
                    status = "memory-limit"
                    self._kill()
                    break
            if not self.alive():
                status = status or "died"
                break
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            except Exception:  # a garbled message (e.g. cut by an interrupt mid-send): skip it
                msg = None
                garbled += 1
                if garbled > 1000:
                    status = status or "died"
                    self._kill()
                    break
            if msg is not None and msg.get("parent_header", {}).get("msg_id") == msg_id:
                kind, content = msg["msg_type"], msg["content"]
                if kind == "status" and content.get("execution_state") == "idle":
                    idle = True
                elif kind in ("stream", "error", "display_data", "execute_result") and status != "output-limit":
                    piece = json.dumps(content, ensure_ascii=False)
                    size += len(piece)
                    if size > self.limits.output_bytes:
                        status = "output-limit"
                    elif kind == "stream":
                        stdout_parts.append(content.get("text", ""))
            if reply is None:
                try:
                    shell = self.kc.get_shell_msg(timeout=0.0 if msg is not None else 0.01)
                    if shell.get("parent_header", {}).get("msg_id") == msg_id:
                        reply = shell["content"]
                except queue.Empty:
                    pass
                except Exception:
                    garbled += 1
        if garbled and status is None:
            status = "output-limit"  # output we could not read: too large, or cut in the middle
        result = CellRun(status or "ok", stdout="".join(stdout_parts))
        if reply is not None and status is None:
            if reply.get("status") == "error":
                result.status, result.ename, result.evalue = "error", reply.get("ename", ""), reply.get("evalue", "")
            elif reply.get("status") != "ok":
                result.status, result.ename, result.evalue = "error", "Aborted", "the kernel did not run the cell"
        elif result.status == "ok":  # no reply but idle: should not happen
            result.status, result.ename, result.evalue = "died", "KernelDied", "no reply from the kernel"
        if result.status in ("timeout", "output-limit", "memory-limit", "died"):
            result.ename = result.ename or result.status
            result.evalue = result.evalue or {
                "timeout": "the submission used up its total time limit during this cell" if cut_by_deadline
                           else f"the cell ran longer than the time limit ({timeout:g} s)",
                "output-limit": f"the cell printed more than the output limit ({self.limits.output_bytes} bytes)"
                                + (" or output that could not be read" if garbled else ""),
                "memory-limit": f"the cell used more memory than the limit ({self.limits.memory_mb} MB)",
                "died": "the kernel stopped (the code ended the Python process or crashed it)",
            }[result.status]
        return result

