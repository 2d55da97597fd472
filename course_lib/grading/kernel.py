"""The kernel that runs a submission: an IPython kernel with limits, started by the grader.

    python -m course_lib.grading.kernel -f CONNECTION_FILE

reads its policy from the environment variable ``COURSE_GRADING_POLICY`` (JSON, written by
`course_lib.grading.sandbox`) and, BEFORE any student code runs:

1. imports numpy, torch and every `course_lib` module, and snapshots them (module attributes,
   the code of their functions, the attributes of their classes, `builtins`, `math`), so that
   `restore()` can undo monkeypatching before each test cell and `restore()` after a test cell
   can tell that the cell's student code patched something while it ran;
2. sets resource limits: address space (the memory already mapped by the imports plus the
   memory limit), the size of any file written, CPU seconds (a backstop behind the grader's
   wall-clock limits), no core dumps;
3. installs an audit hook (PEP 578; Python code cannot remove one) that refuses to read files in
   the teacher's and the other students' folders, refuses to write outside the scratch folder,
   and refuses to start processes, fork, send signals, load native libraries with ctypes or open
   network sockets.

This is an in-process barrier for honest mistakes and casual cheating, not a security boundary:
code running in the same interpreter can still, with effort, get around it. Run the grader in a
container for a class whose submissions you do not trust (see the README).
"""
from __future__ import annotations

import builtins
import importlib
import json
import os
import pkgutil
import resource
import sys
import types

GUARDED_MODULES = [
    "builtins", "math", "random", "operator", "functools", "json", "os", "types", "importlib",
    "numpy", "numpy.testing", "numpy.linalg", "numpy.random",
    "torch", "torch.testing", "torch.nn.functional",
]
# IPython manages these names in builtins itself while a cell runs.
IPYTHON_BUILTINS = {"exit", "quit", "input", "raw_input", "get_ipython", "display", "_", "__", "___", "__IPYTHON__", "help",
                    "copyright", "credits", "license", "dreload", "__builtins__", "runfile"}
GUARDED_CLASSES = ["torch.Tensor", "IPython.core.interactiveshell.InteractiveShell",
                   "ipykernel.zmqshell.ZMQInteractiveShell", "ipykernel.kernelbase.Kernel", "ipykernel.ipkernel.IPythonKernel"]

_state: dict = {"modules": {}, "functions": {}, "classes": {}, "user_ns": {}}


# --- the snapshot and the restore step --------------------------------------------------------------


def _guarded_modules() -> list[types.ModuleType]:
    names = list(GUARDED_MODULES)
    names += sorted(n for n in sys.modules if n == "course_lib" or (n.startswith("course_lib.") and not n.startswith("course_lib.grading")))
    return [sys.modules[n] for n in dict.fromkeys(names) if n in sys.modules]


def _function_state(fn):
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__)


_METHOD_TYPES = (types.FunctionType, staticmethod, classmethod, property, types.BuiltinFunctionType)


def _methods(cls: type) -> dict:
    """A class's methods and properties (not its other class attributes, which may change legitimately)."""
    return {k: v for k, v in vars(cls).items() if isinstance(v, _METHOD_TYPES)}


def snapshot() -> None:
    """Remember the pristine state of the guarded modules (called once, before student code)."""
    for module in _guarded_modules():
        items = dict(vars(module))
        if module is builtins:
            items = {k: v for k, v in items.items() if k not in IPYTHON_BUILTINS}
        _state["modules"][module.__name__] = (module, items)
        for value in items.values():
            if isinstance(value, types.FunctionType):
                _state["functions"][id(value)] = (value, _function_state(value))
            elif isinstance(value, type) and getattr(value, "__module__", "").startswith("course_lib"):
                _state["classes"][f"{value.__module__}.{value.__qualname__}"] = (value, _methods(value))
    for dotted in GUARDED_CLASSES:
        module_name, _, cls_name = dotted.rpartition(".")
        cls = getattr(sys.modules.get(module_name), cls_name, None)
        if isinstance(cls, type):
            _state["classes"][dotted] = (cls, _methods(cls))
    for _, (cls, items) in list(_state["classes"].items()):
        for value in items.values():
            if isinstance(value, types.FunctionType):
                _state["functions"][id(value)] = (value, _function_state(value))


def _user_ns() -> dict:
    from IPython.core.getipython import get_ipython

    return get_ipython().user_ns


def _patched_instance_methods(obj, label: str) -> list[str]:
    """Undo instance attributes that shadow methods of the object's class (e.g. `shell.run_cell = ...`)."""
    changed = []
    for key, value in list(getattr(obj, "__dict__", {}).items()):
        if isinstance(getattr(type(obj), key, None), types.FunctionType) and not key.startswith("_"):
            del vars(obj)[key]
            changed.append(f"{label}.{key}")
    return changed


def snapshot_user_namespace(names: list[str] | None) -> None:
    """Remember what the teacher's setup cells bound (e.g. `checks`, `np`) so tests see those.

    `names=None` means every public name bound so far.
    """
    ns = _user_ns()
    if names is None:
        names = [n for n in ns if not n.startswith("_") and n not in ("In", "Out", "exit", "quit", "get_ipython")]
    _state["user_ns"] = {n: ns[n] for n in names if n in ns}


def restore() -> list[str]:
    """Put every guarded module, function, class and setup name back; return what had changed."""
    changed: list[str] = []
    for name, (module, items) in _state["modules"].items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
            changed.append(f"sys.modules[{name!r}]")
        current = vars(module)
        for key, value in items.items():
            if current.get(key, _MISSING) is not value:
                setattr(module, key, value)
                changed.append(f"{name}.{key}")
    for name, (cls, items) in _state["classes"].items():
        current = _methods(cls)
        for key, value in items.items():
            if current.get(key, _MISSING) is not value:
                setattr(cls, key, value)
                changed.append(f"{name}.{key}")
        for key in set(current) - set(items):
            delattr(cls, key)
            changed.append(f"{name}.{key}")
    for fn, saved in _state["functions"].values():
        if _function_state(fn) != saved:
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = saved
            changed.append(f"{fn.__module__}.{fn.__qualname__} (its code)")
    from IPython.core.getipython import get_ipython

    shell = get_ipython()
    changed += _patched_instance_methods(shell, "the IPython shell")
    if getattr(shell, "kernel", None) is not None:
        changed += _patched_instance_methods(shell.kernel, "the kernel")
    ns = shell.user_ns
    for key, value in _state["user_ns"].items():
        if ns.get(key, _MISSING) is not value:
            ns[key] = value
            changed.append(f"the name {key!r} bound by the setup cell")
    return sorted(set(changed))


def report_restore(marker: str) -> None:
    """Called by the grader: restore, then print the list of changes on one marked line."""
    changed = restore()
    sys.__stdout__.flush()
    print(marker + json.dumps(changed))


_MISSING = object()


# --- the audit hook -------------------------------------------------------------------------------

DENIED_EVENTS = {
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "os.kill", "os.killpg", "signal.pthread_kill", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym",
    "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.call_function",
    "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto", "socket.sendmsg", "os.startfile",
    "sys.addaudithook", "cpython.remote_debugger_script",
    "os.chroot", "os.setuid", "resource.setrlimit", "resource.prlimit", "shutil.chown",
}
WRITE_EVENTS = {  # event -> positions of the path arguments
    "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1), "os.replace": (0, 1), "os.mkdir": (0,),
    "os.chmod": (0,), "os.chown": (0,), "os.link": (0, 1), "os.symlink": (0, 1), "os.truncate": (0,),
    "os.utime": (0,), "os.chflags": (0,), "os.lchflags": (0,), "os.setxattr": (0,), "os.removexattr": (0,),
    "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (1,),
    "shutil.make_archive": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class GradingPolicyError(PermissionError):
    """Raised by the audit hook: the grader does not allow this."""


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def install_audit_hook(policy: dict) -> None:
    deny_read = [os.path.realpath(p) for p in policy.get("deny_read", [])]
    allow_read = [os.path.realpath(p) for p in policy.get("allow_read", [])]
    allow_write = [os.path.realpath(p) for p in policy.get("allow_write", [])] + ["/dev/null"]
    own_pid = str(os.getpid())
    realpath, fspath, getcwd = os.path.realpath, os.fspath, os.getcwd
    denied, write_events, write_flags = frozenset(DENIED_EVENTS), dict(WRITE_EVENTS), _WRITE_FLAGS
    error = GradingPolicyError

    def resolve(p):
        if isinstance(p, int):
            return None  # a file descriptor that is already open
        try:
            p = fspath(p)
            if isinstance(p, bytes):
                p = p.decode("utf-8", "surrogateescape")
            return realpath(p)
        except Exception:
            return None

    def check_write(path):
        if path is not None and not _inside(path, allow_write):
            raise error(f"the grader does not allow writing to {path} (only inside the scratch folder)")

    def hook(event, args):
        if event == "open":
            path = resolve(args[0])
            if path is None:
                return
            mode, flags = args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags)
            if writing:
                check_write(path)
            if _inside(path, deny_read) and not _inside(path, allow_read):
                raise error(f"the grader does not allow reading {path}")
            if path.startswith("/proc/"):
                part = path.split("/")[2]
                if part.isdigit() and part != own_pid:
                    raise error(f"the grader does not allow reading {path}")
        elif event in denied or event.startswith("os.exec") or event.startswith("os.spawn"):
            raise error(f"the grader does not allow {event} while grading")
        elif event in write_events:
            for i in write_events[event]:
                if i < len(args):
                    check_write(resolve(args[i]))
        elif event in ("os.listdir", "os.scandir", "glob.glob", "os.walk"):
            path = resolve(args[0]) if args and args[0] is not None else getcwd()
            if path and _inside(path, deny_read) and not _inside(path, allow_read):
                raise error(f"the grader does not allow listing {path}")

    sys.addaudithook(hook)


# --- resource limits --------------------------------------------------------------------------------


def set_limits(policy: dict) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if policy.get("memory_mb"):
        import psutil

        # torch and numpy map a lot of address space up front; the limit is what is mapped now
        # plus the allowance, so allocations beyond the allowance fail with a MemoryError.
        mapped = psutil.Process().memory_info().vms
        limit = mapped + int(policy["memory_mb"]) * 2**20 + 512 * 2**20  # + thread stacks
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if policy.get("file_mb"):
        size = int(policy["file_mb"]) * 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    if policy.get("cpu_s"):
        cpu = int(policy["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def preload() -> None:
    """Import what tests rely on, so it is snapshotted in its pristine state."""
    import IPython.core.interactiveshell  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.zmqshell  # noqa: F401
    import numpy  # noqa: F401
    import numpy.testing  # noqa: F401
    import torch  # noqa: F401
    import torch.nn.functional  # noqa: F401
    import torch.testing  # noqa: F401

    import course_lib

    for info in pkgutil.iter_modules(course_lib.__path__):
        if info.name in ("grading", "cli", "viz", "widgets"):  # not checking tools; slow to import
            continue
        try:
            importlib.import_module(f"course_lib.{info.name}")
        except Exception:  # a module being written may not import; tests will say so themselves
            pass


def main() -> None:
    # Run as `python -m`, this module is __main__; make `import course_lib.grading.kernel` find it.
    sys.modules.setdefault("course_lib.grading.kernel", sys.modules[__name__])
    policy = json.loads(os.environ.get("COURSE_GRADING_POLICY", "{}"))
    if policy.get("guard", True):
        preload()
        snapshot()
        set_limits(policy)
        install_audit_hook(policy)
    else:
        set_limits(policy)
    # Hide the policy: student code has no business knowing the teacher's paths.
    os.environ.pop("COURSE_GRADING_POLICY", None)
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=sys.argv[1:])


if __name__ == "__main__":
    main()
