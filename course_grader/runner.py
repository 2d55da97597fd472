"""Grade a notebook's cells split in two: the learner's in a sandboxed kernel, the teacher's tests here.

`run_split(...)` is `course_lib.runner.steps.run_cells` with the grader's kernel (in the sandbox, see
`sandbox`) and a `Checker` (the `steps.Checker` protocol):

- the learner's answer cells run only in the kernel;
- the teacher's setup cells (before the first answer) run in both: the answers need their
  imports, and so do the tests;
- the teacher's other code cells (given code, "try it" cells) run in the kernel, and in the
  checker too unless they use a name that an answer cell defined;
- test cells run only in the checker: this process, in a namespace of their own, where
  `checks.answer(name)` (through `checks.core.set_answer_source`, the one hook between the checks
  and the grader) and bare names the test uses reach the learner's values through the kernel (see
  `remote`). Hidden tests, expected values and verdicts never enter the kernel.
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
from pathlib import Path

from course_lib.runner.process import CHECK_EVERY_S, Budget, CellRun, KernelStopped, Limits
from course_lib.runner.steps import RunReport, Step, run_cells
from course_lib.runner.text import inert

from .remote import CellTimeout, Session, on_alarm, reset_alarm
from .sandbox import SandboxedKernel
from .zygote import ZygoteDied

MAX_CAPTURED = 100_000  # characters of a test cell's printed text kept


class _Capped(io.StringIO):
    def write(self, text: str) -> int:
        if self.tell() < MAX_CAPTURED:
            super().write(text[: MAX_CAPTURED - self.tell()])
        return len(text)


@contextlib.contextmanager
def _time_limit(budget: Budget):
    """Stop the cell once `budget` is spent (main thread only: elsewhere only the kernel's requests are
    limited). The checks' own CPU time is looked at every CHECK_EVERY_S of it (SIGPROF, which counts this
    process's CPU time only); the kernel's while a request is in flight, by the request itself; the
    wall-clock backstop by SIGALRM."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def look(signum, frame):
        if signum == signal.SIGALRM or budget.over():
            on_alarm()

    reset_alarm()
    old = signal.signal(signal.SIGALRM, look), signal.signal(signal.SIGPROF, look)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, budget.wall_end - time.monotonic()))
    signal.setitimer(signal.ITIMER_PROF, CHECK_EVERY_S, CHECK_EVERY_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, old[0])
        signal.signal(signal.SIGPROF, old[1])
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
        self.remote: dict[str, object] = {}  # names in `ns` bound to the kernel's values (fetched again each time)

    def answer(self, name: str):
        """`checks.answer(name)` while grading (the answer source, see `checks.core.set_answer_source`):
        the learner's value if an answer cell bound `name`, else the teacher's (a name a given cell
        defined), else NotAttempted."""
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

    def uses_learner_names(self, source: str, learner: set[str]) -> bool:
        try:
            return bool(_names(_compile(source, "<cell>")) & learner)
        except SyntaxError:
            return False

    def run(self, source: str, budget: Budget, where: str = "<test cell>") -> CellRun:
        self.session.budget = budget
        self.session.kernel.begin_cell()
        try:
            code = _compile(source, where)
        except SyntaxError as err:
            return CellRun("error", "SyntaxError", f"{err.msg} ({where}, line {err.lineno})")
        out = _Capped()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), _time_limit(budget):
                self._bind_learner_names(code, _assigned(source))
                exec(code, self.ns)  # noqa: S102 - the teacher's own cell
        except KernelStopped as err:
            return CellRun(err.status, err.status, err.message, out.getvalue())
        except CellTimeout:
            message = budget.message(budget.over() or "cpu")
            return CellRun("timeout", "timeout", message, inert(out.getvalue()))
        except (KeyboardInterrupt, ZygoteDied):
            raise
        except BaseException as err:  # noqa: BLE001 - a failed check, or the learner's value broke the test
            from course_lib.checks.core import CheckFailed, NotAttempted

            credit = err.credit if isinstance(err, CheckFailed) and not isinstance(err, NotAttempted) else None
            credit = credit if type(credit) is float and 0.0 <= credit < 1.0 else None
            return CellRun("error", type(err).__name__, inert(err), inert(out.getvalue()), credit=credit)
        finally:
            self.session.budget = None
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


def run_split(
    steps: list[Step],
    *,
    limits: Limits,
    sandbox: bool,
    cwd: Path | None = None,
    protect: list[Path] = (),
    temp_root: Path | None = None,
    budget=None,
    fresh_after_hidden: bool = False,
    on_cell=None,
    zygote=None,
) -> RunReport:
    """Run `steps` in a fresh kernel (in the sandbox unless `sandbox=False`), the test cells in a `Checker`
    here, with `checks.answer` reading the learner's values from the kernel. `budget`: the cgroup under
    which each start of the kernel gets its own (see `budgets`); `zygote`: the `zygote.ZygoteLink` each start forks
    from (None: bubblewrap starts each); `fresh_after_hidden`, `on_cell`: see `run_cells`."""
    from course_lib.checks import core  # here, not above: it imports torch, which only grading needs

    kernel = SandboxedKernel(
        limits, sandbox=sandbox, cwd=cwd, protect=list(protect), temp_root=temp_root, budget=budget, zygote=zygote
    )
    checker = Checker(Session(kernel))
    previous = core.set_answer_source(checker.answer)
    try:
        return run_cells(
            steps,
            limits=limits,
            kernel=kernel,
            checker=checker,
            fresh_after_hidden=fresh_after_hidden,
            on_cell=on_cell,
        )
    finally:
        core.set_answer_source(previous)
