"""Run a notebook's cells: the learner's in a kernel, the teacher's tests in the checker.

Shared by `course check` (a learner's own notebook, no sandbox) and `course grade` (a learner's
answers inside the teacher's notebook, in the sandbox). With `split=True` (grading):

- the learner's answer cells run only in the kernel;
- the teacher's setup cells (before the first answer) run in both: the answers need their
  imports, and so do the tests;
- the teacher's other code cells (given code, "try it" cells) run in the kernel, and in the
  checker too unless they use a name that an answer cell defined;
- test cells run only in the checker: this process, in a namespace of their own, where
  `checks.answer(name)` and bare names the test uses reach the learner's values through the
  kernel (see `remote`). Hidden tests, expected values and verdicts never enter the kernel.

With `split=False` (`course check`) every cell runs in the kernel, as in JupyterLab.

A cell that ends the kernel (os._exit, a crash, the memory limit, an ignored interrupt) is
remembered; the kernel is started again, the kernel's cells before it are run again without it,
and grading goes on, so one fatal cell costs only its own exercise.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import difflib
import io
import signal
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

from .remote import CellTimeout, Session, on_alarm, reset_alarm
from .sandbox import CellRun, Kernel, KernelStopped, Limits

MAX_RESTARTS = 3
MAX_CAPTURED = 100_000  # characters of a test cell's printed text kept


@dataclass
class Step:
    kind: str  # "setup" (teacher code before the answers), "answer", "test" or "code"
    source: str
    grade_id: str | None = None


@dataclass
class RunReport:
    results: dict[int, CellRun] = field(default_factory=dict)  # step index -> what happened
    notes: list[str] = field(default_factory=list)  # things the teacher and learner should know
    restarts: int = 0
    kernel_cpu: float = 0.0  # CPU seconds the learner's kernels used (for benchmarks)


class _Capped(io.StringIO):
    def write(self, text: str) -> int:
        if self.tell() < MAX_CAPTURED:
            super().write(text[: MAX_CAPTURED - self.tell()])
        return len(text)


@contextlib.contextmanager
def _time_limit(deadline: float):
    """SIGALRM at `deadline` (main thread only: elsewhere only the kernel's requests are limited)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        on_alarm()

    reset_alarm()
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, deadline - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        reset_alarm()


def _names(code: types.CodeType) -> set[str]:
    """Every global or module-level name a compiled cell (and the functions in it) refers to."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _python(source: str) -> str:
    """A cell as plain Python (IPython's magics and shell escapes turned into calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # pragma: no cover - IPython comes with the course
        return source
    return TransformerManager().transform_cell(source)


def _compile(source: str, where: str) -> types.CodeType:
    return compile(_python(source), where, "exec")


def _assigned(source: str) -> set[str]:
    """Names a cell binds at its top level (assignments, imports, definitions)."""
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).split(".")[0])
    return found


class Checker:
    """The teacher's namespace in the grader's process, with the learner's values one request away."""

    def __init__(self, session: Session):
        self.session = session
        self.ns: dict = {"__name__": "__main__", "__builtins__": builtins}
        self.learner: set[str] = set()  # names the learner's answer cells bound (the kernel says which)
        self.remote: dict[str, object] = {}  # names in `ns` bound to the kernel's values (fetched again each time)

    def answer(self, name: str):
        """`checks.answer(name)` while grading: the learner's value if an answer cell bound `name`,
        else the teacher's (a name a given cell defined), else NotAttempted."""
        from course_lib.checks.core import NotAttempted

        found, owner, value, names = self.session.get(name)
        if found and owner == "learner":
            return value
        if name in self.ns and name not in self.remote:
            return self.ns[name]
        if found:
            return value
        visible = [n for n in {*names, *self.ns} if not n.startswith("_")]
        near = difflib.get_close_matches(name, visible, n=1, cutoff=0.8)
        raise NotAttempted(name, near[0] if near else None)

    def uses_learner_names(self, source: str) -> bool:
        try:
            return bool(_names(_compile(source, "<cell>")) & self.learner)
        except SyntaxError:
            return False

    def run(self, source: str, deadline: float, cut: bool, where: str = "<test cell>") -> CellRun:
        self.session.deadline, self.session.cut = deadline, cut
        self.session.kernel.begin_cell()
        try:
            code = _compile(source, where)
        except SyntaxError as err:
            return CellRun("error", "SyntaxError", f"{err.msg} ({where}, line {err.lineno})")
        out = _Capped()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), _time_limit(deadline):
                self._bind_learner_names(code, _assigned(source))
                exec(code, self.ns)  # noqa: S102 - the teacher's own cell
        except KernelStopped as err:
            return CellRun(err.status, err.status, err.message, out.getvalue())
        except CellTimeout:
            message = ("the submission used up its total time limit during this cell" if cut
                       else f"the cell ran longer than the time limit ({self.session.kernel.limits.cell_timeout:g} s)")
            return CellRun("timeout", "timeout", message, out.getvalue())
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # noqa: BLE001 - a failed check, or the learner's value broke the test
            from course_lib.checks.core import CheckFailed, NotAttempted

            credit = err.credit if isinstance(err, CheckFailed) and not isinstance(err, NotAttempted) else None
            credit = credit if type(credit) is float and 0.0 <= credit < 1.0 else None
            return CellRun("error", type(err).__name__, str(err), out.getvalue(), credit=credit)
        finally:
            self.session.deadline = None
            for name, value in list(self.remote.items()):  # rebound by the teacher's cell: the teacher's now
                if self.ns.get(name) is not value:
                    del self.remote[name]
        return CellRun("ok", stdout=out.getvalue())

    def _bind_learner_names(self, code: types.CodeType, assigned: set[str]) -> None:
        """Names the cell uses but neither it nor the teacher's earlier cells define (a test calling
        `receptive_field(...)` directly): bound to the learner's values. The teacher's names win."""
        for name in sorted(_names(code) - assigned):
            if (name in self.ns and name not in self.remote) or hasattr(builtins, name):
                continue
            found, _, value, _ = self.session.get(name)
            if found:
                self.ns[name] = self.remote[name] = value
            elif name in self.remote:
                del self.ns[name], self.remote[name]


def run_steps(steps: list[Step], *, limits: Limits, sandbox: bool, split: bool, cwd: Path | None = None,
              protect: list[Path] = (), temp_root: Path | None = None) -> RunReport:
    report = RunReport()
    deadline = time.monotonic() + limits.total_timeout
    kernel = Kernel(limits, sandbox=sandbox, cwd=cwd, protect=list(protect), temp_root=temp_root)
    session = Session(kernel)
    checker = Checker(session) if split else None
    fatal: dict[int, CellRun] = {}  # kernel cells that ended the kernel: skipped when it is started again

    def in_kernel(step: Step) -> bool:
        return not split or step.kind != "test"

    def start(upto: int) -> bool:
        """(Re)start the kernel and run its cells before step `upto` again; False if that is impossible."""
        while True:
            if kernel.proc is not None:  # it stopped: start it again, a limited number of times
                kernel.shutdown()
                if report.restarts >= MAX_RESTARTS:
                    return False
                report.restarts += 1
            elif report.restarts >= MAX_RESTARTS:
                return False
            try:
                kernel.start()
            except Exception as err:  # noqa: BLE001 - whatever broke, the batch must go on
                report.notes.append(f"The kernel could not start: {err}")
                return False
            for j in range(upto):
                if in_kernel(steps[j]) and j not in fatal:
                    run, learner = kernel.run_cell(steps[j].source, steps[j].kind, deadline=deadline)
                    if checker is not None and run.status != "died":
                        checker.learner = set(learner)
                    if not kernel.alive():
                        fatal[j] = run
                        break
            else:
                return True

    from course_lib.checks import core

    saved_hook = getattr(core, "_answer_hook", None)
    if checker is not None:
        core._answer_hook = checker.answer
    try:
        if not start(0):
            for i in range(len(steps)):
                report.results[i] = CellRun("died", "KernelStartFailed", "the kernel could not start")
            return report
        first_answer = next((i for i, s in enumerate(steps) if s.kind == "answer"), len(steps))
        for i, step in enumerate(steps):
            if time.monotonic() >= deadline:
                report.results[i] = CellRun("timeout", "SubmissionTimeout",
                                            f"not run: the submission used up its total time limit ({limits.total_timeout:g} s)")
                continue
            if not kernel.alive() and not start(i):
                report.results[i] = CellRun("died", "KernelDied", "not run: the kernel stopped too many times")
                continue
            if in_kernel(step):
                run, learner = kernel.run_cell(step.source, step.kind, deadline=deadline)
                report.results[i] = run
                if checker is not None and run.status != "died":
                    checker.learner = set(learner)
                if not kernel.alive():
                    fatal[i] = run
            if checker is None or step.kind == "answer":
                continue
            if step.kind == "code" and i > first_answer and checker.uses_learner_names(step.source):
                continue  # a "try it" cell: the learner's own business
            if step.kind == "test" or (split and step.kind in ("setup", "code")):
                own_end = time.monotonic() + limits.cell_timeout
                run = checker.run(step.source, min(deadline, own_end), deadline < own_end,
                                  where="<test cell>" if step.kind == "test" else "<teacher's cell>")
                if step.kind == "test":
                    report.results[i] = run
                elif not run.ok and step.kind == "setup":
                    report.notes.append(f"The teacher's setup cell failed in the checker: {run.ename}: {run.evalue}")
    finally:
        core._answer_hook = saved_hook
        kernel.shutdown()
        report.kernel_cpu = kernel.cpu_seconds
    return report
