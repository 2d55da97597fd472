"""The checker's view of a learner's kernel: stand-ins for the learner's functions and objects.

Under `course grade` the checks run in the grader's own process and the learner's code in a
sandboxed kernel. A check still receives "the learner's function" and calls it: what it holds is
a stand-in that sends the arguments to the kernel (as plain data, see `wire`) and returns what the
learner's code returned, as plain data again. The stand-ins:

- `Remote` for any object of the learner's that is not plain data: its type name and repr, and
  its attributes on request (`obj.name` asks the kernel);
- `RemoteCallable` for functions, classes and callable objects: calling one calls the learner's;
  an exception the learner's code raised is raised here with the same class name, as a subclass
  of the same built-in exception (NotImplementedError stays NotImplementedError, so a check sees
  "not attempted");
- `RemoteModule` for an `nn.Module` instance: `model(x)`, `model.load_state_dict(...)`,
  `model.eval()`, `model.state_dict()` work as usual; `parameters()` / `named_parameters()` are
  local copies that follow the learner's module and receive its gradients.

Gradients: when a check calls a learner's function with tensors that require grad (and grad mode
is on), the call is one node of the check's autograd graph (`LearnerCall`): its forward asks the
kernel for the output, its backward asks the kernel for the gradients of the inputs (and of the
module's parameters). So `loss = f(x).sum(); loss.backward(); x.grad` works as in one process.

Random generators (numpy's, torch's, Python's `random.Random`) passed as arguments travel as
their state, and come back advanced. The global random state is not shared: the learner's code
draws from the kernel's own, so a check that needs reproducible draws passes a generator.
"""

from __future__ import annotations

import builtins
import contextlib
import time
from typing import Any

from course_lib.runner import wire
from course_lib.runner.process import Budget, KernelProcess, KernelStopped, submission_clock
from course_lib.runner.text import inert

# nn.Module methods that never give a differentiable result: calling them needs no autograd node.
BOOKKEEPING = {
    "load_state_dict",
    "state_dict",
    "train",
    "eval",
    "to",
    "cpu",
    "double",
    "float",
    "half",
    "type",
    "requires_grad_",
    "extra_repr",
    "named_buffers",
    "buffers",
    "children",
    "named_children",
    "modules",
    "named_modules",
    "apply",
}

# A stand-in's class is named like the learner's type (the checks' messages say "got MyModel"), and an
# error's class like the learner's exception. A learner can invent any number of names, so at most
# MAX_CLASSES of each are kept (the process grades one submission, then ends); past that, stand-ins
# share one class per kind, named after it, and error classes are made afresh each time (and freed).
MAX_CLASSES = 256
MAX_NAMES = 10_000  # names of the learner's a reply may list (to suggest one for a typo)
MAX_MESSAGE = 20_000  # characters of a learner's exception message kept
_classes: dict[tuple[type, str], type] = {}
_errors: dict[tuple[str, type], type] = {}


class LearnerError(Exception):
    """An exception raised by the learner's code in the kernel; its class name is the original one."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def learner_error(reply: dict) -> Exception:
    """The exception to raise in the checker for an error reply: a subclass of the nearest built-in."""
    ename = str(reply.get("ename") or "Exception")[:100]
    bases = reply.get("bases") if isinstance(reply.get("bases"), list) else []
    base: type = Exception
    for name in bases:
        candidate = getattr(builtins, str(name), None) if isinstance(name, str) else None
        if isinstance(candidate, type) and issubclass(candidate, Exception) and candidate is not Exception:
            base = candidate
            break
    cls = _errors.get((ename, base))
    if cls is None:
        name = ename if ename.isidentifier() else "LearnerError"
        try:
            cls = type(name, (LearnerError, base), {"__module__": "learner"})
        except TypeError:  # a built-in that cannot be subclassed together with LearnerError
            cls = type(name, (LearnerError,), {"__module__": "learner"})
        if len(_errors) < MAX_CLASSES:
            _errors[(ename, base)] = cls
    return cls(inert(reply.get("evalue", ""), MAX_MESSAGE))


def _proxy_class(base: type, type_name: str) -> type:
    """A subclass of `base` named like the learner's type, so messages say "got function" or "got MyModel"."""
    name = type_name[:100] if isinstance(type_name, str) and type_name[:100].isidentifier() else base.__name__
    cls = _classes.get((base, name))
    if cls is None:
        if len(_classes) >= MAX_CLASSES:  # enough names: one shared class for this kind of stand-in
            name = base.__name__
            cls = _classes.get((base, name))
        if cls is None:
            cls = _classes[(base, name)] = type(name, (base,), {"__module__": "learner"})
    return cls


class Session:
    """The checker's connection to one kernel: requests within the current cell's budget."""

    def __init__(self, kernel: KernelProcess):
        self.kernel = kernel
        self.budget: Budget | None = None  # what the cell now running may still use (set by the runner)
        self.version: str | None = None  # the parameter version of the module called last

    def request(self, header: dict, buffers: list[bytes] = ()) -> tuple[dict, list[bytes]]:
        budget = self.budget
        if budget is None:  # outside a cell (a stand-in released late): a cell's own budget
            limits = self.kernel.limits
            budget = Budget(
                submission_clock(self.kernel),
                limits.cell_cpu_s,
                time.monotonic() + limits.wall(limits.cell_cpu_s),
                limits=limits,
            )
        with _alarm_held():
            return self.kernel.request(header, buffers, budget=budget)

    def value(self, reply: dict, buffers: list[bytes], *, grad: bool = True) -> tuple[Any, wire.Decoder]:
        if not reply.get("ok"):
            raise learner_error(reply)
        dec = wire.Decoder(buffers, self.make_proxy, grad=grad, limit=self.kernel.limits.message_mb * 2**20)
        try:
            return dec.decode(reply.get("value")), dec
        except wire.WireError as err:
            raise KernelStopped(
                "died", f"the learner's kernel sent a value the grader cannot read ({err})", alive=True
            ) from None

    def make_proxy(self, item: list) -> Remote:
        if len(item) < 5 or type(item[0]) is not int:
            raise wire.WireError("a garbled reference")
        ref, kind, type_name, text = item[0], item[1], item[2], item[3]
        name = item[4] if len(item) > 4 else None
        base = {
            "module": RemoteModule,
            "class": RemoteCallable,
            "function": RemoteCallable,
            "callable": RemoteCallable,
        }.get(kind, Remote)
        obj = object.__new__(_proxy_class(base, type_name))
        object.__setattr__(obj, "_session", self)
        object.__setattr__(obj, "_ref", ref)
        object.__setattr__(obj, "_generation", self.kernel.generation)
        object.__setattr__(obj, "_text", inert(text, 300))
        object.__setattr__(obj, "_type_name", inert(type_name, 100))  # the learner's type, whatever the class
        if isinstance(name, str):
            object.__setattr__(obj, "__name__", name)
            object.__setattr__(obj, "__qualname__", name)
        return obj

    def check_alive(self, proxy: Remote) -> None:
        if object.__getattribute__(proxy, "_generation") != self.kernel.generation:
            raise KernelStopped(
                "died",
                "the learner's kernel stopped and was started again, so this object of theirs is gone",
                alive=True,
            )

    def release(self, ref: int, generation: int) -> None:
        if generation == self.kernel.generation:
            self.kernel.pending_release.append(ref)

    # --- what a stand-in asks for ------------------------------------------------------------------

    def get(self, name: str) -> tuple[bool, str, Any, list[str]]:
        reply, buffers = self.request({"op": "get", "name": name})
        if not reply.get("found"):
            names = reply.get("names") if isinstance(reply.get("names"), list) else []
            return False, "", None, [n for n in names[:MAX_NAMES] if isinstance(n, str) and n.isidentifier()]
        value, _ = self.value(reply, buffers)
        return True, str(reply.get("owner")), value, []

    def getattr(self, proxy: Remote, name: str) -> Any:
        self.check_alive(proxy)
        reply, buffers = self.request({"op": "getattr", "target": [_ref(proxy)], "name": name})
        return self.value(reply, buffers)[0]

    def call(
        self,
        proxy: Remote,
        args: tuple,
        kwargs: dict,
        *,
        attr: str | None = None,
        module: RemoteModule | None = None,
        repeat: int | None = None,
    ) -> Any:
        """Call the learner's object in the kernel; with `repeat`, that many times in one request (a list of
        results: thousands of calls cost one round trip, not thousands; never part of an autograd graph)."""
        import torch

        self.check_alive(proxy)
        enc = wire.Encoder(_encode_proxy, limit=self.kernel.limits.message_mb * 2**20)
        try:
            items = enc.encode(list(args)), enc.encode(dict(kwargs))
        except wire.WireError as err:
            raise TypeError(str(err)) from None
        header = {
            "op": "call",
            "target": [_ref(proxy)],
            "attr": attr,
            "args": items[0],
            "kwargs": items[1],
            "grad": torch.is_grad_enabled(),
        }
        mirrors = module._mirrors() if module is not None and attr not in BOOKKEEPING else []
        if module is not None:
            header["module"] = True
        if repeat is not None:
            header["repeat"], mirrors = int(repeat), []
        leaves = [t for t in enc.tensors if t.requires_grad] + [p for _, p in mirrors if p.requires_grad]
        if torch.is_grad_enabled() and leaves and repeat is None:
            header.update(track=True, params=[bool(p.requires_grad) for _, p in mirrors])
            job = _Job(self, header, enc)
            outputs = LearnerCall.apply(job, *leaves)
            value = _substitute(job.value, dict(zip(map(id, job.tensors), outputs, strict=False)))
        else:
            reply, buffers = self.request(header, enc.buffers)
            value, dec = self.value(reply, buffers)
            _write_back(enc.generators, reply, dec)
            self.version = reply.get("version")
        if module is not None:
            module._follow(self.version)
        return value

    def backward(self, call_id: int, grads: list) -> list:
        enc = wire.Encoder(limit=self.kernel.limits.message_mb * 2**20)
        reply, buffers = self.request({"op": "backward", "call": call_id, "grads": enc.encode(grads)}, enc.buffers)
        value, _ = self.value(reply, buffers, grad=False)
        if not isinstance(value, list):
            raise KernelStopped("died", "the kernel sent garbled gradients", alive=True)
        return value

    def params(self, proxy: Remote) -> tuple[list[tuple[str, Any]], str]:
        reply, buffers = self.request({"op": "params", "target": [_ref(proxy)]})
        value, _ = self.value(reply, buffers)
        if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
            raise KernelStopped("died", "the kernel sent garbled parameters", alive=True)
        return [(str(n), t) for n, t in value], str(reply.get("version"))


class _Job:
    """One tracked call: run by `LearnerCall.forward`, differentiated by its backward."""

    def __init__(self, session: Session, header: dict, enc: wire.Encoder):
        self.session, self.header, self.enc = session, header, enc
        self.call_id: int | None = None
        self.generation = session.kernel.generation
        self.value: Any = None
        self.tensors: list = []
        self.differentiable: list[bool] = []

    def run(self) -> list:
        reply, buffers = self.session.request(self.header, self.enc.buffers)
        value, dec = self.session.value(reply, buffers, grad=False)
        _write_back(self.enc.generators, reply, dec)
        self.session.version = reply.get("version")
        self.value, self.tensors = value, dec.tensors
        flags = reply.get("differentiable")
        if not isinstance(flags, list) or len(flags) != len(dec.tensors):
            raise KernelStopped("died", "the kernel sent a garbled reply to a call", alive=True)
        self.differentiable = [
            bool(f) and (t.is_floating_point() or t.is_complex()) for f, t in zip(flags, dec.tensors, strict=False)
        ]
        self.call_id = reply.get("call")
        return self.tensors

    def backward(self, grads: tuple) -> list:
        if self.generation != self.session.kernel.generation:
            raise KernelStopped(
                "died",
                "the learner's kernel stopped and was started again, so the graph of this call is gone",
                alive=True,
            )
        wanted = [g for g, d in zip(grads, self.differentiable, strict=False) if d]
        found = self.session.backward(self.call_id, wanted)
        n_inputs = len([t for t in self.enc.tensors if t.requires_grad]) + sum(self.header.get("params") or [])
        if len(found) != n_inputs:
            raise KernelStopped("died", "the kernel sent the wrong number of gradients", alive=True)
        return found

    def __del__(self):
        if self.call_id is not None:
            self.session.release(self.call_id, self.generation)


def _make_learner_call():
    import torch
    from torch.autograd.function import once_differentiable

    class LearnerCall(torch.autograd.Function):
        """A call of the learner's function as one node of the check's autograd graph."""

        @staticmethod
        def forward(ctx, job, *leaves):
            tensors = job.run()
            ctx.job = job
            ctx.mark_non_differentiable(*[t for t, d in zip(tensors, job.differentiable, strict=False) if not d])
            return tuple(tensors) if tensors else (torch.empty(0),)

        @staticmethod
        @once_differentiable
        def backward(ctx, *grads):
            return (None, *ctx.job.backward(grads))

    return LearnerCall


class _LazyCall:
    """`LearnerCall`, made on first use (so that importing this module does not import torch)."""

    _cls = None

    def apply(self, *args):
        if _LazyCall._cls is None:
            _LazyCall._cls = _make_learner_call()
        return _LazyCall._cls.apply(*args)


LearnerCall = _LazyCall()


def _write_back(generators: list, reply: dict, dec: wire.Decoder) -> None:
    """Move the check's generators on to where the learner's code left them."""
    states = reply.get("generators")
    if not generators or not isinstance(states, list) or len(states) != len(generators):
        return
    for target, item in zip(generators, states, strict=False):
        try:
            wire.set_generator_state(target, dec.decode(item))
        except (wire.WireError, ValueError, TypeError):
            pass


def _substitute(value: Any, mapping: dict[int, Any], depth: int = 0) -> Any:
    """`value` with its tensors replaced by the graph-connected ones (by identity)."""
    if id(value) in mapping:
        return mapping[id(value)]
    if depth > wire.MAX_DEPTH + 2:
        return value
    kind = type(value)
    if kind in (list, tuple):
        return kind(_substitute(v, mapping, depth + 1) for v in value)
    if isinstance(value, dict):
        out = kind() if kind is not dict else {}
        if hasattr(value, "default_factory"):
            out.default_factory = value.default_factory
        for k, v in value.items():
            out[k] = _substitute(v, mapping, depth + 1)
        return out
    return value


def _encode_proxy(obj: Any) -> list:
    """A stand-in passed back to the learner's code is the learner's own object again."""
    if isinstance(obj, Remote):
        session = object.__getattribute__(obj, "_session")
        session.check_alive(obj)
        return ["ref", _ref(obj)]
    raise wire.WireError(
        f"the grader can only pass plain data (numbers, strings, lists, tuples, dicts, numpy arrays, "
        f"tensors, random generators) to a learner's code, not {type(obj).__name__}"
    )


def _ref(proxy: Remote) -> int:
    return object.__getattribute__(proxy, "_ref")


class CellTimeout(BaseException):
    """A checker cell ran past its time limit (not catchable as an Exception, so a check cannot swallow it)."""


class _Requests:
    """Whether a request to the kernel is in flight, and whether the cell's time ran out meanwhile.

    The cell's time limit is a SIGALRM (see `runner`); cutting a request in the middle would leave
    its reply to be read as the answer to the next one, so while a request is in flight the alarm
    only takes note, and the cell stops as soon as the request is over (a request has its own limit)."""

    depth = 0
    expired = False


def on_alarm() -> None:
    """What the cell's time limit does: stop now, or right after the request in flight."""
    if _Requests.depth:
        _Requests.expired = True
    else:
        raise CellTimeout()


@contextlib.contextmanager
def _alarm_held():
    _Requests.depth += 1
    try:
        yield
    finally:
        _Requests.depth -= 1
        if _Requests.depth == 0 and _Requests.expired:
            _Requests.expired = False
            raise CellTimeout()


def reset_alarm() -> None:
    _Requests.depth, _Requests.expired = 0, False


# --- the stand-ins ----------------------------------------------------------------------------------------


class Remote:
    """One of the learner's objects that is not plain data."""

    def __repr__(self) -> str:
        return object.__getattribute__(self, "_text")

    __str__ = __repr__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            # numpy, copy, pickle and friends probe for these: the learner's object does not offer them
            raise AttributeError(name)
        return object.__getattribute__(self, "_session").getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot set {name!r} on a learner's object from the checks")

    def __del__(self):
        try:
            session = object.__getattribute__(self, "_session")
            session.release(object.__getattribute__(self, "_ref"), object.__getattribute__(self, "_generation"))
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class RemoteCallable(Remote):
    """A learner's function, class or callable object."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return object.__getattribute__(self, "_session").call(self, args, kwargs)

    def __course_call_repeated__(self, n: int, *args: Any, **kwargs: Any) -> list:
        """`checks.call_repeated`'s hook: n calls in one round trip to the kernel."""
        return object.__getattribute__(self, "_session").call(self, args, kwargs, repeat=n)


class _ModuleMethod:
    """A method of a learner's module: called in the kernel, then the local parameters follow."""

    def __init__(self, module: RemoteModule, name: str):
        self.module, self.name = module, name
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = object.__getattribute__(self.module, "_session")
        return session.call(self.module, args, kwargs, attr=self.name, module=self.module)

    def __repr__(self) -> str:
        return f"<method {self.name} of {self.module!r}>"


class RemoteModule(RemoteCallable):
    """A learner's nn.Module instance. Its parameters are mirrored by local tensors (`parameters()`):
    a check reads them, and backpropagating through the module's output fills their `.grad`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return object.__getattribute__(self, "_session").call(self, args, kwargs, module=self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = object.__getattribute__(self, "_session").getattr(self, name)
        if isinstance(value, RemoteCallable) and type(value).__name__ == "method":
            return _ModuleMethod(self, name)
        return value

    def _mirrors(self) -> list[tuple[str, Any]]:
        try:
            return object.__getattribute__(self, "_params")
        except AttributeError:
            self._follow(None)
            return object.__getattribute__(self, "_params")

    def _follow(self, version: str | None) -> None:
        """Fetch the parameters again if they changed (or were never fetched)."""
        try:
            known = object.__getattribute__(self, "_version")
        except AttributeError:
            known = None
        if known is not None and version == known:
            return
        session = object.__getattribute__(self, "_session")
        params, version = session.params(self)
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_version", version)

    def parameters(self, recurse: bool = True):
        return iter([p for _, p in self._mirrors()])

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return iter([(prefix + ("." if prefix else "") + n, p) for n, p in self._mirrors()])

    def zero_grad(self, set_to_none: bool = True) -> None:
        for _, p in self._mirrors():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()
