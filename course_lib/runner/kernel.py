"""The learner's kernel: runs notebook cells and, on request, calls what they defined.

    python -m course_lib.runner.kernel FD

FD is one end of a socket pair; the other end belongs to the caller (`process.KernelProcess`). The kernel
answers one request at a time (see `wire` for the format):

    run      {code, kind}            run a cell with IPython (magics, display, top-level await)
    get      {name}                  the value of a name the cells defined (plain data or a handle)
    call     {target, attr, args, kwargs, grad, track, params, repeat}
                                     call a function, class, module or method the learner defined
                                     (with `repeat`: that many times in a row, the same arguments each
                                     time, so a generator passed in moves on; the list of results)
    getattr  {target, name}          an attribute of one of the learner's objects
    params   {target}                an nn.Module's named parameters (copies)
    backward {call, grads}           gradients of a tracked call's outputs w.r.t. its inputs
    apply    {fn, target, args}      len / list / getitem / str on one of the learner's objects

It knows nothing about checks, expected values or verdicts: under `course grade` it runs inside
the sandbox, and everything it sends back is only the learner's own data. Its text output goes to
its stdout and stderr, which the grader counts and caps from outside.

Before any cell runs it imports numpy and torch and sets its resource limits (from the environment
variable COURSE_KERNEL_CONFIG, removed afterwards): address space, file size, CPU seconds, open
files, processes (in the sandbox, where the count covers only the sandbox), no core dumps.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
from collections import OrderedDict

from . import wire

try:  # POSIX only
    import resource
except ImportError:  # pragma: no cover
    resource = None

MAX_TRACKED_CALLS = 512  # calls whose graph is kept for a later backward (the oldest are dropped)
MAX_REPEAT = 100_000  # calls one repeated request may make
HIDDEN_NAME = re.compile(r"^(_+|_i+\d*|_\d+|_[oid]h|__\w+__)$")  # IPython's own output-caching names
_MISSING = object()


class KernelServer:
    def __init__(self, shell, sock: socket.socket, message_limit: int):
        self.shell, self.sock, self.message_limit = shell, sock, message_limit
        self.objects: dict[int, object] = {}  # handles given to the checker
        self.next_id = 1
        self.calls: OrderedDict[int, tuple[list, list]] = OrderedDict()  # tracked call -> (inputs, outputs)
        self.owner: dict[str, str] = {}  # name -> "learner" (bound by an answer cell) or "teacher"
        self.busy = False  # an interrupt only stops a request, never the kernel's sending and receiving

    # --- the loop ----------------------------------------------------------------------------------

    def on_sigint(self, signum, frame):
        if self.busy:
            raise KeyboardInterrupt

    def in_forked_child(self) -> None:
        """A process the learner's code forked (a fork bomb's copies, a `multiprocessing` worker) is not the
        kernel: it must not read the grader's next request or answer it. It closes its copy of the link, and
        ends once it is back in this loop."""
        self.sock.close()

    def serve(self) -> None:
        wire.send(self.sock, {"ok": True, "ready": True})
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.in_forked_child)
        while True:
            signal.signal(signal.SIGINT, self.on_sigint)  # put back whatever a cell did with it
            try:
                header, buffers = wire.recv_blocking(self.sock)
            except (EOFError, OSError):
                return
            for ref in header.get("release", ()):  # handles and graphs the checker no longer needs
                self.objects.pop(ref, None)
                self.calls.pop(ref, None)
            try:
                self.busy = True  # from here on learner code may run (a call, a repr, an __int__)
                reply, out = getattr(self, "op_" + str(header.get("op")))(header, buffers)
            except KeyboardInterrupt:
                reply, out = self.error(KeyboardInterrupt("interrupted")), []
            except BaseException as err:  # noqa: BLE001 - whatever the learner's code raised
                reply, out = self.error(err), []
            finally:
                self.busy = False
            reply["id"] = header.get("id")  # the grader matches replies to requests by this
            try:
                frame = wire.pack(reply, out)
            except (wire.WireError, TypeError, ValueError) as err:
                frame = wire.pack(
                    dict(
                        self.error(ValueError(f"the result could not be passed to the checks: {err}")),
                        id=header.get("id"),
                    )
                )
            try:
                self.sock.sendall(frame)
            except OSError:  # the grader has gone, or this is a forked copy (see `in_forked_child`)
                return

    def error(self, err: BaseException, syntax_where: str | None = None) -> dict:
        kind = type(err)
        if isinstance(err, SyntaxError) and syntax_where is not None:
            message = f"{err.msg} ({syntax_where}, line {err.lineno})"
        else:
            try:
                message = str(err)
            except BaseException:  # noqa: BLE001 - an exception whose __str__ itself fails
                message = "(no message)"
        bases = [c.__name__ for c in kind.__mro__ if isinstance(c, type)]
        reply = {"ok": False, "ename": kind.__name__, "evalue": message[:20000], "bases": bases[:20]}
        credit = getattr(err, "credit", None) if "CheckFailed" in bases else None
        if type(credit) is float and 0.0 <= credit < 1.0:  # part of a multi-part answer was right (checks.check_all)
            reply["credit"] = credit
        return reply

    # --- encoding ----------------------------------------------------------------------------------

    def make_ref(self, obj) -> list:
        """A handle for an object that is not plain data: the checker sees its kind, type name and repr."""
        torch = sys.modules.get("torch")
        ref = self.next_id
        self.next_id += 1
        self.objects[ref] = obj
        if isinstance(obj, type):
            kind = "class"
        elif torch is not None and isinstance(obj, torch.nn.Module):
            kind = "module"
        elif callable(obj):
            kind = (
                "function" if type(obj).__name__ in ("function", "builtin_function_or_method", "method") else "callable"
            )
        else:
            kind = "object"
        try:
            text = object.__repr__(obj) if kind == "object" and type(obj).__repr__ is object.__repr__ else repr(obj)
        except BaseException:  # noqa: BLE001
            text = f"<{type(obj).__name__} object>"
        name = getattr(obj, "__name__", None) if kind in ("class", "function") else None
        return ["ref", ref, kind, type(obj).__name__, text[:300], name if isinstance(name, str) else None]

    def resolve_ref(self, item: list):
        if not item or item[0] not in self.objects:
            raise wire.WireError("that object is gone (the kernel was restarted, or it was released)")
        return self.objects[item[0]]

    def encode(self, value) -> tuple[object, list]:
        enc = wire.Encoder(self.make_ref, limit=self.message_limit)
        return enc.encode(value), enc.buffers

    def decode(self, item, buffers):
        return wire.Decoder(buffers, self.resolve_ref).decode(item)

    # --- cells -------------------------------------------------------------------------------------

    def user_names(self) -> dict[str, object]:
        hidden = self.shell.user_ns_hidden
        return {k: v for k, v in self.shell.user_ns.items() if k not in hidden and not HIDDEN_NAME.match(k)}

    def op_run(self, header, buffers):
        kind = header.get("kind")
        before = self.user_names()
        result = self.shell.run_cell(str(header.get("code", "")), store_history=True)
        after = self.user_names()
        for name, value in after.items():
            if before.get(name, _MISSING) is not value:
                self.owner[name] = "learner" if kind == "answer" else "teacher"
        for name in set(before) - set(after):
            self.owner.pop(name, None)
        reply = {"ok": True, "learner": sorted(n for n, o in self.owner.items() if o == "learner" and n in after)}
        if result.error_before_exec is not None:
            where = "your answer cell" if kind == "answer" else "cell"
            reply.update(self.error(result.error_before_exec, syntax_where=where), ok=True, failed=True)
        elif result.error_in_exec is not None:
            reply.update(self.error(result.error_in_exec), ok=True, failed=True)
        return reply, []

    def op_get(self, header, buffers):
        name = header.get("name")
        names = self.user_names()
        if not isinstance(name, str) or name not in names:
            return {"ok": True, "found": False, "names": sorted(names)}, []
        item, out = self.encode(names[name])
        return {"ok": True, "found": True, "owner": self.owner.get(name, "teacher"), "value": item}, out

    # --- calls -------------------------------------------------------------------------------------

    def op_call(self, header, buffers):
        torch = sys.modules.get("torch")
        target = self.resolve_ref(header.get("target") or [None])
        fn = getattr(target, header["attr"]) if header.get("attr") else target
        dec = wire.Decoder(buffers, self.resolve_ref)
        args, kwargs = dec.decode(header.get("args", ["list", []])), dec.decode(header.get("kwargs", ["dict", []]))
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise wire.WireError("a garbled call")
        track = bool(header.get("track")) and torch is not None
        inputs = [t for t in dec.tensors if t.requires_grad] if track else []
        module = target if header.get("module") else None  # an nn.Module whose parameters the checker mirrors
        if track and module is not None:  # its parameters that the checker tracks, in named_parameters() order
            params = [p for _, p in module.named_parameters()]
            inputs += [p for p, want in zip(params, header.get("params") or []) if want]
        repeat = header.get("repeat")
        if repeat is not None and (type(repeat) is not int or not 0 < repeat <= MAX_REPEAT or track):
            raise wire.WireError("a garbled repeated call")
        calls = repeat or 1
        if torch is not None:
            with torch.set_grad_enabled(bool(header.get("grad", False))):
                values = [fn(*args, **kwargs) for _ in range(calls)]
        else:
            values = [fn(*args, **kwargs) for _ in range(calls)]
        value = values if repeat is not None else values[0]
        enc = wire.Encoder(self.make_ref, limit=self.message_limit)
        reply = {"ok": True, "value": enc.encode(value)}
        if track:
            differentiable = [bool(t.requires_grad) for t in enc.tensors]
            call_id = self.next_id
            self.next_id += 1
            self.calls[call_id] = (inputs, [t for t, d in zip(enc.tensors, differentiable) if d])
            while len(self.calls) > MAX_TRACKED_CALLS:
                self.calls.popitem(last=False)
            reply.update(call=call_id, differentiable=differentiable)
        if module is not None:
            reply["version"] = _param_version(list(module.named_parameters()))
        if dec.generators:  # where the generators the checker passed have got to
            reply["generators"] = [enc.encode(g) for g in dec.generators]
        return reply, enc.buffers

    def op_backward(self, header, buffers):
        torch = sys.modules["torch"]
        if header.get("call") not in self.calls:
            raise RuntimeError("the graph of this call is gone (too many calls since, or the kernel was restarted)")
        inputs, outputs = self.calls[header["call"]]
        grads = self.decode(header.get("grads", ["list", []]), buffers)
        pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None]
        result = [None] * len(inputs)
        if pairs and inputs:
            found = torch.autograd.grad(
                [o for o, _ in pairs], inputs, [g.to(o.dtype) for o, g in pairs], allow_unused=True, retain_graph=True
            )
            result = [None if g is None else g.detach() for g in found]
        item, out = self.encode(result)
        return {"ok": True, "value": item}, out

    def op_getattr(self, header, buffers):
        target = self.resolve_ref(header.get("target") or [None])
        value = getattr(target, str(header.get("name")))
        item, out = self.encode(value)
        return {"ok": True, "value": item}, out

    def op_params(self, header, buffers):
        module = self.resolve_ref(header.get("target") or [None])
        named = list(module.named_parameters())
        item, out = self.encode([[n, p.detach().clone().requires_grad_(p.requires_grad)] for n, p in named])
        return {"ok": True, "value": item, "version": _param_version(named)}, out

    def op_apply(self, header, buffers):
        target = self.resolve_ref(header.get("target") or [None])
        args = self.decode(header.get("args", ["list", []]), buffers)
        fn = {"len": len, "list": list, "getitem": lambda obj, key: obj[key], "str": str, "bool": bool}[
            header.get("fn")
        ]
        value = fn(target, *args)
        item, out = self.encode(value)
        return {"ok": True, "value": item}, out


def _param_version(named: list) -> str:
    """Changes whenever a parameter is replaced, changes shape or dtype, or is modified in place."""
    return json.dumps([[n, id(p), p._version, str(p.dtype), list(p.shape)] for n, p in named])


# --- start-up ------------------------------------------------------------------------------------------


def set_limits(config: dict) -> None:
    try:  # when memory runs out, the system's OOM killer takes a learner's kernel before anything else
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    if resource is None:
        return

    def cap(which, value):
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))

    cap(resource.RLIMIT_CORE, 0)
    if config.get("memory_mb") and os.environ.get("COURSE_DEVICE", "cpu") != "cuda":
        # torch and numpy map a lot of address space up front: the limit is what is mapped now plus
        # the allowance, so allocations beyond the allowance fail with a MemoryError.
        mapped = _mapped_bytes()
        cap(resource.RLIMIT_AS, mapped + int(config["memory_mb"]) * 2**20 + 512 * 2**20)
    if config.get("file_mb"):
        cap(resource.RLIMIT_FSIZE, int(config["file_mb"]) * 2**20)
    if config.get("cpu_s"):
        cap(resource.RLIMIT_CPU, int(config["cpu_s"]))
    if config.get("open_files"):
        cap(resource.RLIMIT_NOFILE, int(config["open_files"]))
    if config.get("processes"):  # only in the sandbox: elsewhere the count covers all the user's processes
        cap(resource.RLIMIT_NPROC, int(config["processes"]))


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        import psutil

        return psutil.Process().memory_info().vms


def make_shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False  # no sqlite file, no history thread
    config.InteractiveShell.colors = "NoColor"
    shell = InteractiveShell.instance(config=config)
    # Tracebacks go to the grader as the exception's name and message, not as text to count.
    shell.showtraceback = lambda *args, **kwargs: None
    shell.showsyntaxerror = lambda *args, **kwargs: None
    shell.enable_gui = lambda gui=None: None  # `%matplotlib inline` in a notebook: there is no GUI loop to start
    return shell


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    config = json.loads(os.environ.pop("COURSE_KERNEL_CONFIG", "{}"))
    for name in ("numpy", "torch"):  # before the address-space limit, which is counted from what is mapped
        try:
            __import__(name)
        except ImportError:
            pass
    shell = make_shell()
    set_limits(config)
    kernel = KernelServer(shell, sock, int(config.get("message_mb", 64)) * 2**20)
    signal.signal(signal.SIGINT, kernel.on_sigint)
    kernel.serve()
    os._exit(0)  # no interpreter shutdown: whatever the cells left running ends with the process


if __name__ == "__main__":
    main()
