"""The grader's kernel, its sandbox and the plain-data protocol between the checks and the learner's code.

- `wire`: values cross between the two processes as plain data, and garbage is refused;
- `remote`: a learner's function, class or module, held by a check, behaves like the real one
  (errors keep their names, gradients flow, generators move on, parameters follow);
- the sandbox (bubblewrap): what the learner's code can see and do inside it, and that nothing
  it starts survives, for a kernel started by bubblewrap and for one forked from a zygote (as
  `course grade` starts them, see `course_grader.zygote`): the same tests, both ways. These tests
  skip, with one warning, where bubblewrap does not work, and fail under CI.

The protocol tests use one kernel for the module: in the sandbox where it works, else without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter, OrderedDict, defaultdict

import numpy as np
import psutil
import pytest
import torch
from grading_helpers import IN_CI, REPO, SOLUTIONS, require_sandbox, sandbox_available

from course_grader import budgets, seccomp
from course_grader.remote import Session
from course_grader.runner import Checker
from course_grader.sandbox import SandboxedKernel, bound_folders, seccomp_usable
from course_grader.zygote import Zygote, ZygoteDied, close_pool, start_pool
from course_lib import checks
from course_lib.runner import wire
from course_lib.runner.process import KernelStopped, Limits

# --- wire ---------------------------------------------------------------------------------------------


def roundtrip(value):
    enc = wire.Encoder()
    frame = wire.pack({"v": enc.encode(value)}, enc.buffers)
    n_header, _ = wire.unpack_prefix(frame[: wire.PREFIX.size])
    header, buffers = wire.unpack_body(frame[wire.PREFIX.size :], n_header)
    return wire.Decoder(buffers).decode(header["v"])


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2**80,
        1.5,
        float("inf"),
        "héllo",
        b"\x00\xff",
        3 + 4j,
        Ellipsis,
        [1, [2, (3, {"a": 4})]],
        (),
        {(1, 2): "tuple key", 3: None},
        {1, 2},
        frozenset({"x"}),
        range(2, 9, 3),
        slice(1, None, 2),
        Counter("abca"),
        OrderedDict(b=1, a=2),
        np.float32(1.25),
        np.int64(-3),
        np.bool_(True),
        torch.Size([2, 3]),
        torch.float64,
        torch.device("cpu"),
    ],
)
def test_plain_values_cross_unchanged(value):
    back = roundtrip(value)
    assert back == value and type(back) is type(value), (value, back)


def test_arrays_and_tensors_cross_with_dtype_shape_and_requires_grad():
    arrays = [
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.array([[1.5, np.nan]]),
        np.array(["ab", "c"]),
        np.zeros((0, 4)),
        np.array([True, False]),
        np.array([1, "x", None], dtype=object),
    ]
    for a in arrays:
        b = roundtrip(a)
        assert b.dtype == a.dtype and b.shape == a.shape, (a, b)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f") if a.dtype != object else list(a) == list(b)
    for t in [
        torch.arange(6).reshape(2, 3),
        torch.randn(3, 2, dtype=torch.float64).t(),
        torch.ones(2, dtype=torch.bfloat16),
        torch.tensor([True]),
        torch.zeros(0, 3),
        torch.tensor(2.5),
        torch.randn(2, requires_grad=True),
    ]:
        b = roundtrip(t)
        assert b.dtype == t.dtype and b.shape == t.shape and b.requires_grad == t.requires_grad, (t, b)
        assert torch.equal(b.detach(), t.detach())


def test_subclasses_of_plain_types_lose_their_methods():
    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    back = roundtrip([Liar(5)])
    assert type(back[0]) is int and back[0] == 5 and back[0] != 6
    dd = roundtrip(defaultdict(list, {"a": [1]}))
    assert dd["missing"] == [] and dd["a"] == [1]


def test_objects_that_are_not_plain_data_are_refused_not_pickled():
    with pytest.raises(wire.WireError, match="plain data"):
        wire.Encoder().encode(object())
    with pytest.raises(wire.WireError, match="plain data"):
        wire.Encoder().encode([lambda: 0])


@pytest.mark.parametrize(
    "frame, words",
    [
        (b"XXXX" + b"\0" * 16, "not a grader message"),
        (wire.PREFIX.pack(wire.MAGIC, 2**40, 0), "too large"),
    ],
)
def test_garbled_frames_are_refused(frame, words):
    with pytest.raises(wire.WireError, match=words):
        wire.unpack_prefix(frame[: wire.PREFIX.size])


@pytest.mark.parametrize(
    "item, buffers",
    [
        (["tensor", "float32", [2], 0, False], [b"\0" * 4]),  # 2 floats need 8 bytes
        (["tensor", "object", [1], 0, False], [b"\0" * 8]),
        (["nd", "|O8", [1], 0], [b"\0" * 8]),
        (["nd", "<V8", [1], 0], [b"\0" * 8]),
        (["nd", "<f8", [-1], 0], [b""]),
        (["ref", 1], []),  # a reference where none may be
        (["pickle", "cos\nsystem\n"], []),
        (["npgen", '{"bit_generator": "os.system", "state": {}}'], []),
        ({"a": 1}, []),
    ],
)
def test_garbled_values_are_refused(item, buffers):
    with pytest.raises(wire.WireError):
        wire.Decoder(buffers).decode(item)


def test_garbled_bodies_are_refused():
    with pytest.raises(wire.WireError):
        wire.unpack_body(b"{not json", 9)
    with pytest.raises(wire.WireError, match="do not add up"):
        wire.unpack_body(b'{"buffers":[5]}abc', len(b'{"buffers":[5]}'))


# --- wire: what a hostile kernel sends costs the grader little -------------------------------------------

P61 = 2**61 - 1  # k * P61 hashes to 0 for every k


@pytest.mark.parametrize(
    "item",
    [
        ["set", [k * P61 for k in range(1, 20_001)]],
        ["frozenset", [k * P61 for k in range(1, 20_001)]],
        ["dict", [[k * P61, 0] for k in range(1, 20_001)]],
        ["Counter", [[k * P61, 1] for k in range(1, 20_001)]],
        ["OrderedDict", [[["tuple", [k * P61]], 1] for k in range(1, 20_001)]],  # tuples of colliding ints collide too
        ["defaultdict", "int", [[k * P61, 1] for k in range(1, 20_001)]],
    ],
)
def test_containers_of_colliding_keys_are_refused_in_linear_time(item):
    """critical: building them took the grader quadratic time in C, past every time limit."""
    started = time.process_time()
    with pytest.raises(wire.WireError, match="keys collide: 20000 of its 20000 keys share one hash value"):
        wire.Decoder([]).decode(item)
    assert time.process_time() - started < 2.0, "refused before anything quadratic ran"


def test_ordinary_containers_still_cross():
    for value in [set(range(20_000)), {(i, -i): i for i in range(10_000)}, {-1, -2}, {float(i): i for i in range(10)}]:
        assert roundtrip(value) == value


def test_a_range_is_charged_for_the_array_it_becomes():
    """critical: range(4e7) crossed as four numbers and became a 2.2 GB array in the grader."""
    with pytest.raises(wire.WireError, match="a range of 40,000,000 numbers is too large"):
        wire.Decoder([], limit=64 * 2**20).decode(["range", 0, 40_000_000, 1])
    assert wire.Decoder([], limit=64 * 2**20).decode(["range", 0, 1000, 1]) == range(1000)
    with pytest.raises(wire.WireError):
        wire.Decoder([]).decode(["range", 0, 10**30, 1])


def test_arrays_tensors_and_items_are_charged_against_the_limit():
    enc = wire.Encoder()
    item = enc.encode([np.zeros(2**20), torch.zeros(2**20)])  # 16 MB
    assert wire.Decoder(enc.buffers, limit=17 * 2**20).decode(item)[0].shape == (2**20,)
    with pytest.raises(wire.WireError, match="too large"):
        wire.Decoder(enc.buffers, limit=12 * 2**20).decode(item)
    with pytest.raises(wire.WireError, match="too large"):
        wire.Decoder([], limit=2**20).decode(["list", list(range(20_000))])


def test_headers_that_would_explode_when_parsed_are_refused_unparsed():
    """medium: a 60 MB header of empty lists took a worker to 1.86 GB; low: a 200,000-deep
    header (RecursionError) and a 5,000-digit integer (ValueError) were the whole row's grader error."""
    bomb = b'{"buffers": [], "value": [' + b"[]," * 2_000_000 + b"[]]}"
    started = time.process_time()
    with pytest.raises(wire.WireError, match="too many items"):
        wire.unpack_body(bomb, len(bomb), limit=64 * 2**20)
    assert time.process_time() - started < 1.0, "refused without parsing"
    deep = b'{"buffers": [], "value": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with pytest.raises(wire.WireError, match="RecursionError"):
        wire.unpack_body(deep, len(deep))
    huge = b'{"buffers": [], "value": ' + b"1" * 5_000 + b"}"
    with pytest.raises(wire.WireError, match="ValueError"):
        wire.unpack_body(huge, len(huge))
    with pytest.raises(wire.WireError, match="an integer of"):
        wire.Decoder([]).decode(2**5000)
    nested = ["list", [2]]
    for _ in range(200):
        nested = ["list", [nested]]
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.Decoder([]).decode(nested)


def test_learner_type_names_do_not_pile_up_in_the_grader(monkeypatch):
    """medium: one class per learner type name was kept for ever (100,000 names: 229 MB)."""
    from course_grader import remote

    class Fake:  # what make_proxy needs of a session
        kernel = type("K", (), {"generation": 1})()

    monkeypatch.setattr(remote, "_classes", {})  # a checking process of its own, as each submission has
    monkeypatch.setattr(remote, "_errors", {})
    before = 0
    session = Session.__new__(Session)
    session.kernel = Fake.kernel
    proxies = [session.make_proxy([i, "object", f"Type{i}", "<x>", None]) for i in range(5 * remote.MAX_CLASSES)]
    assert len(remote._classes) <= max(before, remote.MAX_CLASSES + 4), len(remote._classes)
    assert type(proxies[0]).__name__ in ("Type0", "Remote") and object.__getattribute__(proxies[-1], "_type_name") == (
        f"Type{5 * remote.MAX_CLASSES - 1}"
    )
    for i in range(5 * remote.MAX_CLASSES):
        remote.learner_error({"ename": f"Error{i}", "evalue": "x" * 50_000, "bases": ["ValueError"]})
    assert len(remote._errors) <= remote.MAX_CLASSES
    assert len(str(remote.learner_error({"ename": "E", "evalue": "x" * 50_000}))) <= remote.MAX_MESSAGE


# --- the learner's objects, held by a check ------------------------------------------------------------------

LEARNER = """
import numpy as np
import torch
from torch import nn

def square(x):
    return x * x

def not_yet(x):
    raise NotImplementedError()

def fails(x):
    return {"a": 1}[x]

def detached(x):
    return (x * 2).detach()

def pair(q, k):
    w = torch.softmax(q @ k.T, dim=-1)
    return w @ k, w

def draw(rng):
    return int(rng.integers(0, 1000))

def draw_torch(g):
    return torch.randint(0, 1000, (1,), generator=g).item()

def huge():
    return np.zeros(20 * 2**20)

class Affine(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)
        self.scale = nn.Parameter(torch.ones(d_out))

    def forward(self, x):
        return self.lin(x).relu() * self.scale

answer_value = 42
ellipsis_answer = ...
"""


@pytest.fixture(scope="module")
def session():
    sandbox = sandbox_available()[0]
    kernel = SandboxedKernel(Limits(cell_cpu_s=60, message_mb=16), sandbox=sandbox)
    kernel.start()
    run, learner = kernel.run_cell(LEARNER, "answer", budget=kernel.cell_budget(120))
    assert run.ok, run
    yield Session(kernel)
    kernel.shutdown()


def learner_value(session, name):
    found, owner, value, _ = session.get(name)
    assert found and owner == "learner", (name, found, owner)
    return value


@pytest.mark.slow
def test_a_learner_function_is_called_with_plain_data(session):
    square = learner_value(session, "square")
    assert type(square).__name__ == "function" and callable(square)
    assert square(3) == 9 and square(2.5) == 6.25
    out = square(torch.arange(3.0))
    assert isinstance(out, torch.Tensor) and out.tolist() == [0.0, 1.0, 4.0]
    assert np.array_equal(square(np.arange(3)), np.arange(3) ** 2)


@pytest.mark.slow
def test_errors_keep_their_names_and_not_implemented_means_not_attempted(session):
    with pytest.raises(checks.NotAttempted):
        checks.call("not_yet", learner_value(session, "not_yet"), 1)
    with pytest.raises(checks.CheckFailed, match=r"raised KeyError: 'b' when called as fails\('b'\)"):
        checks.call("fails", learner_value(session, "fails"), "b")
    with pytest.raises(KeyError):
        learner_value(session, "fails")("b")


@pytest.mark.slow
def test_gradients_flow_through_a_learner_function(session):
    pair = learner_value(session, "pair")
    q = torch.randn(3, 4, requires_grad=True)
    k = torch.randn(5, 4, requires_grad=True)
    out, w = pair(q, k)
    (out.sum() + (w**2).sum()).backward()
    q2, k2 = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    w_ref = torch.softmax(q2 @ k2.T, dim=-1)
    ((w_ref @ k2).sum() + (w_ref**2).sum()).backward()
    torch.testing.assert_close(out, w_ref @ k2)
    torch.testing.assert_close(q.grad, q2.grad)
    torch.testing.assert_close(k.grad, k2.grad)
    x = torch.ones(2, requires_grad=True)
    assert learner_value(session, "detached")(x).grad_fn is None, "a detached output must not claim a gradient"
    with torch.no_grad():
        assert learner_value(session, "square")(x).requires_grad is False


@pytest.mark.slow
def test_a_learner_module_is_built_loaded_run_and_differentiated(session):
    Affine = learner_value(session, "Affine")
    model = Affine(4, 3)
    assert type(model).__name__ == "Affine"
    ref = torch.nn.Linear(4, 3)
    scale = torch.tensor([1.0, 2.0, -1.0])
    state = {"lin.weight": ref.weight.detach(), "lin.bias": ref.bias.detach(), "scale": scale}
    model.load_state_dict(state)
    assert sorted(model.state_dict()) == sorted(state)
    x = torch.randn(2, 4, requires_grad=True)
    out = model(x)
    x_ref = x.detach().clone().requires_grad_()
    scale_ref = scale.clone().requires_grad_()
    want = ref(x_ref).relu() * scale_ref
    torch.testing.assert_close(out, want)
    out.pow(2).sum().backward()
    want.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    grads = {name: p.grad for name, p in model.named_parameters()}
    torch.testing.assert_close(grads["lin.weight"], ref.weight.grad)
    torch.testing.assert_close(grads["scale"], scale_ref.grad)
    assert sum(p.numel() for p in model.parameters()) == 4 * 3 + 3 + 3
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x), want.detach())


@pytest.mark.slow
def test_generators_passed_to_the_learner_move_on(session):
    draw = learner_value(session, "draw")
    mine, ref = np.random.default_rng(7), np.random.default_rng(7)
    assert [draw(mine) for _ in range(5)] == [int(ref.integers(0, 1000)) for _ in range(5)]
    draw_torch = learner_value(session, "draw_torch")
    g, g_ref = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert [draw_torch(g) for _ in range(3)] == [torch.randint(0, 1000, (1,), generator=g_ref).item() for _ in range(3)]


@pytest.mark.slow
def test_a_result_too_large_to_pass_is_an_error_of_the_learners_function(session):
    with pytest.raises(checks.CheckFailed, match="too large"):
        checks.call("huge", learner_value(session, "huge"))


@pytest.mark.slow
def test_answer_reads_the_learners_names_and_explains_a_missing_one(session):
    checker = Checker(session)
    checker.ns["given"] = "the teacher's"
    from course_lib.checks import core

    previous = core.set_answer_source(checker.answer)
    try:
        assert checks.answer("answer_value") == 42
        assert checks.answer("given") == "the teacher's"
        with pytest.raises(checks.NotAttempted, match="`answer_valeu`.*`answer_value` is"):
            checks.answer("answer_valeu")
        with pytest.raises(checks.NotAttempted, match="not attempted"):
            checks.answer("ellipsis_answer")
    finally:
        core.set_answer_source(previous)


@pytest.mark.slow
def test_a_test_cell_can_call_learner_names_directly(session):
    checker = Checker(session)
    run = checker.run("assert square(4) == 16\nresult = square(2)", session.kernel.cell_budget(30))
    assert run.ok and checker.ns["result"] == 4, run
    run = checker.run("square = lambda x: 0\nassert square(4) == 0", session.kernel.cell_budget(30))
    assert run.ok, "a name the teacher's cell binds is the teacher's"
    run = checker.run("assert square(4) == 0", session.kernel.cell_budget(30))
    assert run.ok, "and stays the teacher's in the next cell"


@pytest.mark.slow
def test_copies_of_the_kernel_that_the_learners_code_forks_never_answer_the_checks(session):
    """A fork bomb's copies went back to the kernel's loop, read the checks' next requests and answered them
    (or took them and never answered, so a later test waited out its wall-clock backstop). A forked copy
    closes its link to the checks and ends once its cell is done: every request is the kernel's."""
    kernel = session.kernel
    code = "import os\nforked = [os.fork() for _ in range(3)]\nwhere = 'a copy' if 0 in forked else 'the kernel'\n"
    run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(60))
    assert run.ok, run
    answers = [learner_value(session, "where") for _ in range(20)]
    assert set(answers) == {"the kernel"}, answers
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        copies = [p for p in psutil.Process(kernel.kernel_pid).children() if p.status() != psutil.STATUS_ZOMBIE]
        if not copies:
            break
        time.sleep(0.05)
    assert not copies, f"the 7 copies end once their cell is done: {copies}"


@pytest.mark.slow
def test_a_learner_call_that_runs_too_long_is_interrupted(session):
    kernel = session.kernel
    run, _ = kernel.run_cell("def forever():\n    while True:\n        pass\n", "answer", budget=kernel.cell_budget(30))
    assert run.ok
    forever = learner_value(session, "forever")
    session.budget = kernel.cell_budget(1)  # one CPU-second
    try:
        with pytest.raises(KernelStopped) as info:
            forever()
    finally:
        session.budget = None
    assert info.value.status == "timeout" and info.value.alive and kernel.alive()
    assert learner_value(session, "square")(5) == 25, "the kernel still answers after the interrupt"


# --- the sandbox -----------------------------------------------------------------------------------------

FACTS = f"""
import json, os, resource, socket
facts = {{}}
facts["uid"] = os.getuid()
facts["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
facts["root"] = sorted(os.listdir("/"))
facts["hidden"] = [p for p in ({str(SOLUTIONS)!r}, {str(REPO / ".git")!r}, {str(REPO / "tests")!r},
                             "/home", "/var", "/run")
                   if os.path.exists(p)]
facts["capabilities"] = {{line.split(":")[0]: line.split()[1] for line in open("/proc/self/status")
                          if line.startswith(("CapInh", "CapPrm", "CapEff", "CapAmb"))}}
facts["no_new_privs"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("NoNewPrivs")][0]
facts["interfaces"] = [line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]]
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    facts["tcp"] = "connected"
except OSError as err:
    facts["tcp"] = type(err).__name__
for path in ("/usr/lib/sandbox-test", {str(REPO / "course_lib" / "x.py")!r}):
    try:
        open(path, "w")
        facts.setdefault("written", []).append(path)
    except OSError:
        pass
with open(os.path.expanduser("~/notes.txt"), "w") as f:
    f.write("the home folder is writable")
facts["home"] = os.path.expanduser("~")
facts["limits"] = {{name: resource.getrlimit(getattr(resource, name))[1] for name in
                   ("RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_CORE")}}
st = os.statvfs("/tmp")
facts["tmp_mb"] = st.f_blocks * st.f_frsize / 2**20
facts["hostname"] = socket.gethostname()
facts["ppid_cmdline"] = open(f"/proc/{{os.getppid()}}/cmdline", "rb").read().decode(errors="replace")
facts["seccomp"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("Seccomp:")][0]
try:
    os.memfd_create("probe")
    facts["memfd"] = "created"
except OSError as err:
    facts["memfd"] = err.errno
"""


# A probe of every system call the sandbox refuses, and of TCP and UDP on the loopback, run where the learner's
# code runs: as a function of the answer cell (`probe_everywhere`) and as a program of its own (for execve).
SYSCALL_PROBE = r'''
import ctypes, json, os, socket, subprocess, sys, threading

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _raw(nr, *args):
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return result, ctypes.get_errno()


# Arguments that do nothing where a call is allowed (a NULL pointer, a bad descriptor, a key that does
# not exist, flags that only query), so that the probe harms nothing on a host without the filter.
_ARGS = {
    "memfd_create": (0, 0), "memfd_secret": (0,), "shmget": (0x5EC, 4096, 0),
    "io_uring_setup": (1, 0), "io_uring_enter": (-1, 0, 0, 0, 0, 0), "io_uring_register": (-1, 0, 0, 0),
    "userfaultfd": (0o2000001,), "perf_event_open": (0, 0, -1, -1, 0), "bpf": (0, 0, 0), "modify_ldt": (0, 0, 0),
    "ptrace": (2, 0, 0, 0), "process_vm_readv": (os.getpid(), 0, 0, 0, 0, 0),
    "process_vm_writev": (os.getpid(), 0, 0, 0, 0, 0), "pidfd_getfd": (-1, 0, 0),
    "keyctl": (-1, 0, 0, 0, 0), "add_key": (0, 0, 0, 0, 0), "request_key": (0, 0, 0, 0),
    "msgget": (0x5EC, 0), "msgsnd": (-1, 0, 0, 0), "msgrcv": (-1, 0, 0, 0, 0o4000), "msgctl": (-1, 2, 0),
    "mq_open": (0, 0, 0, 0), "mq_unlink": (0,), "mq_timedsend": (-1, 0, 0, 0, 0),
    "mq_timedreceive": (-1, 0, 0, 0, 0), "mq_notify": (-1, 0), "mq_getsetattr": (-1, 0, 0),
    "unshare": (0,), "setns": (-1, 0), "mount": (0, 0, 0, 0, 0), "umount2": (0, 0x100), "pivot_root": (0, 0),
    "chroot": (0,), "open_tree": (-1, 0, 0), "move_mount": (-1, 0, -1, 0, 0), "fsopen": (0, 0),
    "fsconfig": (-1, 0, 0, 0, 0), "fsmount": (-1, 0, 0), "fspick": (-1, 0, 0), "mount_setattr": (-1, 0, 0, 0, 0),
    "open_tree_attr": (-1, 0, 0, 0, 0), "init_module": (0, 0, 0), "finit_module": (-1, 0, 0),
    "delete_module": (0, 0), "kexec_load": (0, 0, 0, 0), "kexec_file_load": (-1, -1, 0, 0, 0),
    "acct": (0,), "swapon": (0, 0), "swapoff": (0,), "reboot": (0, 0, 0, 0), "sethostname": (0, 0),
    "setdomainname": (0, 0), "settimeofday": (0, 0), "clock_settime": (0, 0), "syslog": (10, 0, 0),
    "quotactl": (0, 0, 0, 0), "quotactl_fd": (-1, 0, 0, 0), "iopl": (0,), "ioperm": (0, 0, 0), "uselib": (0,),
    "open_by_handle_at": (-1, 0, 0), "fanotify_init": (0, 0), "vhangup": (),
}


def _errno_of(make):
    try:
        made = make()
    except OSError as err:
        return err.errno
    for thing in made if isinstance(made, tuple) else (made,):
        thing.close()
    return "ok"


def _tcp_on_loopback(host, family):
    with socket.socket(family, socket.SOCK_STREAM) as server:
        server.bind((host, 0))
        server.listen(1)
        with socket.create_connection(server.getsockname()[:2], timeout=2) as client:
            client.sendall(b"x" * 65536)
    return socket.socket(socket.AF_UNIX)  # something to close


def _udp_on_loopback(host, family):
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"x", (host, 9))
    return socket.socket(socket.AF_UNIX)


def probe(numbers):
    """name -> "ok" or the errno each probe got."""
    found = {}
    for name, args in _ARGS.items():
        if name not in numbers:
            continue
        result, err = _raw(numbers[name], *args)
        if result >= 0 and name in ("memfd_secret", "userfaultfd", "fanotify_init", "io_uring_setup"):
            os.close(result)
        found[name] = "ok" if result >= 0 else err
    for name, flags in (("clone_newuser", 0x10000000), ("clone_newnet", 0x40000000)):
        result, err = _raw(numbers["clone"], flags | 17, 0, 0, 0, 0)  # | SIGCHLD: a fork into a new namespace
        if result == 0:
            os._exit(0)
        if result > 0:
            os.waitpid(result, 0)
        found[name] = "ok" if result >= 0 else err
    found["clone3"] = _raw(numbers["clone3"], 0, 0)[1]
    found["personality_query"] = "ok" if _raw(numbers["personality"], 0xFFFFFFFF)[0] >= 0 else "refused"
    result, err = _raw(numbers["personality"], _raw(numbers["personality"], 0xFFFFFFFF)[0])  # set it as it is
    found["personality_set"] = "ok" if result >= 0 else err
    for family, fname, host in ((socket.AF_INET, "ipv4", "127.0.0.1"), (socket.AF_INET6, "ipv6", "::1")):
        found[f"tcp_{fname}"] = _errno_of(lambda: _tcp_on_loopback(host, family))
        found[f"udp_{fname}"] = _errno_of(lambda: _udp_on_loopback(host, family))
    result, err = _raw(numbers["socket"], 2 | (1 << 32), 1, 0)  # AF_INET, for the kernel reads an int
    if result >= 0:
        os.close(result)
    found["socket_inet_high_bits"] = "ok" if result >= 0 else err
    found["netlink"] = _errno_of(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
    found["packet"] = _errno_of(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
    found["socketpair_inet"] = _errno_of(lambda: socket.socketpair(socket.AF_INET))
    found["socketpair_unix"] = _errno_of(socket.socketpair)
    found["socket_unix"] = _errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
    return found


def probe_everywhere(numbers, source):
    """The probe in this thread, in another thread, in a forked child and in a new program (execve)."""
    seen = {"main": probe(numbers)}
    thread = threading.Thread(target=lambda: seen.__setitem__("thread", probe(numbers)))
    thread.start()
    thread.join()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write_end, json.dumps(probe(numbers)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        seen["fork"] = json.loads(f.read())
    os.waitpid(pid, 0)
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", source, json.dumps(numbers)], capture_output=True, text=True, timeout=60
    )
    seen["execve"] = json.loads(out.stdout) if out.returncode == 0 else out.stderr[-2000:]
    return seen


if __name__ == "__main__" and len(sys.argv) == 2 and sys.argv[1].startswith("{"):
    print(json.dumps(probe(json.loads(sys.argv[1]))))
'''


@pytest.fixture(scope="module", params=["bubblewrap", "zygote"])
def started_by(request, tmp_path_factory):
    """How a test's sandboxed kernels start: each in a bubblewrap sandbox of its own, or forked from a zygote
    as `course grade` starts them. `started_by(protect, seccomp)`: the zygote's link to give the kernel, or None."""
    require_sandbox()
    made: list[Zygote] = []

    def link(protect=(SOLUTIONS,), seccomp=True):
        if request.param == "bubblewrap":
            return None
        zygote = Zygote(protect=list(protect), temp_root=tmp_path_factory.mktemp("zygote"), group=None, seccomp=seccomp)
        zygote.start()
        made.append(zygote)
        return zygote.link

    yield link
    close_pool(made)


@pytest.fixture(scope="module")
def sandboxed(started_by):
    kernel = SandboxedKernel(
        Limits(cell_cpu_s=30, memory_mb=1024, processes=32, scratch_mb=48, file_mb=16),
        sandbox=True,
        protect=[SOLUTIONS],
        zygote=started_by(),
    )
    kernel.start()
    yield kernel, Session(kernel)
    kernel.shutdown()


@pytest.mark.slow
def test_the_sandbox_is_available_under_ci():
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        ok, why = sandbox_available()
        assert ok, f"CI must grade in the sandbox, but: {why}"


@pytest.mark.slow
def test_inside_the_sandbox_the_learner_sees_only_its_own_world(sandboxed):
    kernel, session = sandboxed
    run, _ = kernel.run_cell(FACTS, "answer", budget=kernel.cell_budget(60))
    assert run.ok, run
    facts = learner_value(session, "facts")
    assert facts["uid"] == 1000 and set(facts["capabilities"].values()) == {"0000000000000000"}, facts
    assert facts["no_new_privs"] == "1", facts
    assert len(facts["pids"]) <= 3, f"only the sandbox's own processes are visible: {facts['pids']}"
    assert facts["hidden"] == [], f"the teacher's files must not be visible: {facts['hidden']}"
    # The system's folders, plus the top folder of each bound one (the venv and the course may live anywhere:
    # /work, /opt, /check, ...). Nothing else of the host's root may show.
    bound_tops = {folder.parts[1] for folder in bound_folders([SOLUTIONS])}
    system = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev", "tmp"}
    assert set(facts["root"]) <= system | bound_tops, f"{facts['root']} shows more than {sorted(system | bound_tops)}"
    assert facts["interfaces"] == ["lo"] and facts["tcp"] != "connected", "no network"
    assert "written" not in facts, f"the system and the course library are read-only: {facts.get('written')}"
    assert facts["home"] == "/tmp" and facts["tmp_mb"] <= 48, facts
    limits = facts["limits"]
    assert limits["RLIMIT_NPROC"] == 32 and limits["RLIMIT_NOFILE"] == 256 and limits["RLIMIT_FSIZE"] == 16 * 2**20, (
        limits
    )
    assert limits["RLIMIT_CORE"] == 0 and limits["RLIMIT_CPU"] > 0 and limits["RLIMIT_AS"] > 0, limits
    assert facts["hostname"] == "sandbox"
    assert "solutions" not in facts["ppid_cmdline"] and "--ro-bind" not in facts["ppid_cmdline"], facts["ppid_cmdline"]
    if seccomp_usable():  # info: "Seccomp 0 (no filter)"; critical: memfd memory outside every limit
        assert facts["seccomp"] == "2" and facts["memfd"] == 1, facts  # a filter; EPERM


# What each probe must get inside the sandbox: EPERM (1), except these.
PROBE_EXPECTED = {"clone3": 38, "personality_query": "ok", "socketpair_unix": "ok", "socket_unix": "ok"}
PROBED_CALLS = (
    "io_uring_setup io_uring_enter io_uring_register userfaultfd perf_event_open bpf ptrace process_vm_readv "
    "process_vm_writev keyctl add_key request_key msgget msgsnd msgrcv msgctl mq_open mq_unlink mq_timedsend "
    "mq_timedreceive mq_notify mq_getsetattr personality_set kexec_load kexec_file_load init_module finit_module "
    "delete_module mount umount2 open_tree move_mount fsopen fsconfig fsmount fspick pivot_root unshare setns "
    "clone_newuser clone_newnet clone3 memfd_create memfd_secret shmget tcp_ipv4 udp_ipv4 tcp_ipv6 udp_ipv6 "
    "socket_inet_high_bits netlink packet socketpair_inet socketpair_unix socket_unix personality_query"
).split()


@pytest.mark.slow
def test_the_sandbox_refuses_what_no_exercise_needs_in_every_thread_child_and_program(sandboxed):
    """medium: loopback TCP buffers (1,000 MB) escaped the kernel's v1 memory cgroup. low: io_uring,
    userfaultfd, SysV and POSIX message queues, personality, process_vm_readv and ptrace reached the kernel.
    Each fails with EPERM in the kernel's process, in a thread, in a forked child and in a program it
    starts; Unix sockets, threads, processes and multiprocessing still work, and the kernel still answers."""
    if not seccomp_usable():
        if IN_CI:
            pytest.fail("CI must grade with the seccomp filter, but this host refuses it")
        pytest.skip("the seccomp filter cannot be used here")
    kernel, session = sandboxed
    code = (
        SYSCALL_PROBE
        + f"syscall_probe = probe_everywhere({seccomp.seccomp_numbers()!r}, {SYSCALL_PROBE!r})\n"
        + "import multiprocessing, threading, torch\n"
        + "with multiprocessing.get_context('fork').Pool(2) as _pool:\n"
        + "    pool_result = _pool.map(abs, [-1, -2, -3])\n"
        + "_a, _b = multiprocessing.Pipe()\n_a.send('through a Unix socket pair')\npipe_result = _b.recv()\n"
        + "torch.set_num_threads(2)\nmatmul_result = float((torch.ones(256, 256) @ torch.ones(256, 256)).sum())\n"
    )
    run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(120))
    assert run.ok, run
    seen = learner_value(session, "syscall_probe")
    main = seen["main"]
    assert set(PROBED_CALLS) <= set(main), f"not probed: {sorted(set(PROBED_CALLS) - set(main))}"
    wrong = {name: got for name, got in main.items() if got != PROBE_EXPECTED.get(name, 1)}
    assert not wrong, f"these probes did not get EPERM (1) or what PROBE_EXPECTED says: {wrong}"
    for where in ("thread", "fork", "execve"):
        assert seen[where] == main, f"the filter does not hold the same way in a {where}: {seen[where]} != {main}"
    assert learner_value(session, "pool_result") == [1, 2, 3], "multiprocessing works"
    assert learner_value(session, "pipe_result") == "through a Unix socket pair"
    assert learner_value(session, "matmul_result") == 256.0**3, "torch runs on two threads"
    after, _ = kernel.run_cell("after_probe = sum(pool_result)", "answer", budget=kernel.cell_budget(30))
    assert after.ok and kernel.alive() and learner_value(session, "after_probe") == 6, f"the kernel still runs: {after}"


@pytest.mark.slow
def test_the_sandbox_limits_processes_and_scratch_space(sandboxed):
    kernel, session = sandboxed
    code = """
import subprocess, os
started = []
try:
    for _ in range(100):
        started.append(subprocess.Popen(["sleep", "30"]))
except OSError as err:
    spawn_error = err.errno
for p in started:
    p.kill(); p.wait()
n_started = len(started)
written = 0
try:
    for i in range(10):
        with open(f"/tmp/big{i}", "wb") as f:
            f.write(b"x" * 15 * 2**20)
        written += 1
except OSError as err:
    write_error = err.errno
for i in range(written + 1):
    if os.path.exists(f"/tmp/big{i}"):
        os.remove(f"/tmp/big{i}")
"""
    run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(60))
    assert run.ok, run
    assert learner_value(session, "n_started") < 32, "the process limit must stop a flood of processes"
    assert learner_value(session, "spawn_error") == 11  # EAGAIN
    assert learner_value(session, "written") < 4, "the scratch space is limited"
    assert learner_value(session, "write_error") == 28  # ENOSPC


@pytest.fixture
def budget():
    """A batch's cgroup (see budgets), where this host lets the grader make one; removed afterwards."""
    group = budgets.batch_group(budgets.detect(), 1)
    job = group.child("job-test") if group is not None else None
    yield job
    if group is not None:
        group.remove()


MEMFD_HOG = (
    "import os\n_held = []\nfor _ in range(20):\n    _fd = os.memfd_create('hold')\n"
    "    os.posix_fallocate(_fd, 0, 63 * 2**20)\n    _held.append(_fd)\n"
)


@pytest.mark.slow
def test_the_memory_cgroup_counts_memory_that_no_process_maps(budget, started_by):
    """critical: without the seccomp filter, memfd pages (in nobody's RSS or address space) are still
    charged to the sandbox's cgroup, which stops the sandbox at its limit."""
    require_sandbox()
    if budget is None or "memory" not in budget.folders:
        pytest.skip("no memory cgroup can be made here")
    kernel = SandboxedKernel(
        Limits(cell_cpu_s=30, memory_mb=256),
        sandbox=True,
        budget=budget,
        seccomp=False,
        zygote=started_by(seccomp=False),
    )
    kernel.start()
    try:
        run, _ = kernel.run_cell(MEMFD_HOG, "answer", budget=kernel.cell_budget(60))
    finally:
        kernel.shutdown()
    assert run.status == "memory-limit" and "more memory than the limit" in run.evalue, run


@pytest.mark.slow
def test_each_sandbox_is_one_cpu_group_and_its_processes_are_counted(budget, started_by):
    """medium: 60 busy loops in one sandbox slowed every neighbour 2-4x: each start of a kernel is a
    cgroup of its own, which weighs as much as one process, and whose process count covers everything."""
    require_sandbox()
    if budget is None or "cpu" not in budget.folders:
        pytest.skip("no cpu cgroup can be made here")
    kernel = SandboxedKernel(Limits(cell_cpu_s=30, processes=32), sandbox=True, budget=budget, zygote=started_by())
    kernel.start()
    try:
        run, _ = kernel.run_cell(
            "import subprocess\n_p = [subprocess.Popen(['sleep', '30']) for _ in range(3)]",
            "answer",
            budget=kernel.cell_budget(60),
        )
        assert run.ok, run
        sleepers = [p for p in psutil.Process(kernel.proc.pid).children(recursive=True) if p.name() == "sleep"]
        assert len(sleepers) == 3
        leaf = os.path.basename(kernel.group.folders["cpu"])  # kernel-PID-N, in job-test, in course-grade-PID
        for p in sleepers:
            cpu_path = [
                line.split(":", 2)[2].strip()
                for line in open(f"/proc/{p.pid}/cgroup")
                if "cpu" in line.split(":")[1].split(",") or line.startswith("0::")
            ][0]
            assert cpu_path.endswith(f"/job-test/{leaf}"), cpu_path
        weight = "cpu.weight" if budget.versions["cpu"] == 2 else "cpu.shares"
        assert open(os.path.join(budget.folders["cpu"], weight)).read().strip() in ("100", "1024")
        if "pids" in kernel.group.folders:
            assert int(open(os.path.join(kernel.group.folders["pids"], "pids.max")).read()) == 32 + 16
    finally:
        kernel.shutdown()


@pytest.mark.slow
def test_forked_children_that_share_pages_are_counted_once(started_by):
    """medium: the RSS watchdog counted shared copy-on-write pages once per process, a false
    memory-limit for legitimate multiprocessing; it now counts PSS (here without any cgroup)."""
    kernel = SandboxedKernel(Limits(cell_cpu_s=30, memory_mb=256), sandbox=True, zygote=started_by())
    kernel.start()
    code = (
        "import os, time\nb = bytearray(200 * 2**20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nkids = []\n"
        "for _ in range(10):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n"
        "    kids.append(pid)\ntime.sleep(2)\nfor pid in kids:\n    os.waitpid(pid, 0)\n"
    )
    try:
        run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(60))
        hog, _ = kernel.run_cell(
            "b2 = bytearray(900 * 2**20)\nfor i in range(0, len(b2), 4096):\n    b2[i] = 1\n",
            "answer",
            budget=kernel.cell_budget(60),
        )
    finally:
        kernel.shutdown()
    assert run.ok, f"11 processes sharing 200 MB are not 2.2 GB: {run}"
    assert hog.status in ("memory-limit", "error"), f"but 900 MB more is over the 256 MB limit: {hog}"


@pytest.mark.slow
def test_a_protected_folder_inside_a_bound_one_is_empty_and_no_scratch_space(tmp_path, started_by):
    """The empty folder that hides a protected folder inside a bound one (the solutions in the virtual
    environment's tree, say) is read-only: no scratch space outside the sandbox's sized tmpfs."""
    require_sandbox()
    hidden = REPO / ".venv" / f"course-protect-test-{os.getpid()}"
    (hidden / "secret").mkdir(parents=True)
    kernel = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, protect=[hidden], zygote=started_by([hidden]))
    try:
        kernel.start()
        code = (
            f"import os\nassert os.listdir({str(hidden)!r}) == [], os.listdir({str(hidden)!r})\n"
            f"try:\n    open({str(hidden / 'x')!r}, 'w').write('x' * 10**6)\nexcept OSError:\n    pass\n"
            "else:\n    raise AssertionError('written')\n"
        )
        run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(60))
    finally:
        kernel.shutdown()
        shutil.rmtree(hidden, ignore_errors=True)
    assert run.ok, run


@pytest.mark.slow
def test_nothing_the_learner_started_survives_the_sandbox(started_by):
    marker = f"{os.getpid()}.{time.monotonic_ns() % 10**6}"
    kernel = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, zygote=started_by())
    kernel.start()
    code = f'''
import os, subprocess
subprocess.Popen(["sleep", "{marker}1"])
if os.fork() == 0:  # a daemon: new session, parent gone
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}2"])
    os._exit(0)
'''
    run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(60))
    assert run.ok, run
    time.sleep(0.5)
    mine = lambda: [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if any(marker in a for a in (p.info["cmdline"] or []))
    ]
    assert len(mine()) == 2, "both children should be running inside the sandbox"
    kernel.shutdown()
    deadline = time.monotonic() + 10
    while mine() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mine() == [], f"processes outlived the sandbox: {mine()}"


# --- kernels forked from a zygote -------------------------------------------------------------------------

# What one learner's kernel may try to leave for the next kernel forked from the same zygote.
LEAVE_TRACES = """
import os, socket
open("/tmp/left.txt", "w").write("for the next learner")
open("/dev/shm/left", "w").write("x")
_listener = socket.socket(socket.AF_UNIX)
_listener.bind("\\0course-left-{marker}")
_listener.listen(1)
if os.fork() == 0:  # a daemon: new session, parent gone
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{marker}"])
    os._exit(0)
"""
FIND_TRACES = """
import os, socket
traces = {{"tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")), "pids": sorted(
    int(p) for p in os.listdir("/proc") if p.isdigit())}}
traces["cmdlines"] = [open(f"/proc/{{p}}/cmdline", "rb").read().decode(errors="replace") for p in traces["pids"]]
try:
    socket.socket(socket.AF_UNIX).connect("\\0course-left-{marker}")
    traces["socket"] = "connected"
except OSError as err:
    traces["socket"] = err.errno
"""


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    require_sandbox()
    made = Zygote(protect=[SOLUTIONS], temp_root=tmp_path_factory.mktemp("zygote"), group=None)
    made.start()
    yield made
    made.close()


@pytest.mark.slow
def test_a_kernel_forked_from_a_zygote_finds_nothing_of_the_kernel_before_it(zygote):
    """The kernels a zygote forks share its memory pages, never a file, a process or a socket: the next
    learner's kernel sees an empty /tmp and /dev/shm and only its own processes, even when the kernel before
    it was left running (its checking process killed): forking the next one ends it and all it started."""
    marker = f"{os.getpid()}.{time.monotonic_ns() % 10**6}"
    first = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, zygote=zygote.link)
    second = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, zygote=zygote.link)
    try:
        first.start()
        run, _ = first.run_cell(LEAVE_TRACES.format(marker=marker), "answer", budget=first.cell_budget(60))
        assert run.ok, run
        assert first.launch is None, "the first kernel was forked from the zygote"
        second.start()  # the first is not shut down
        run, _ = second.run_cell(FIND_TRACES.format(marker=marker), "answer", budget=second.cell_budget(60))
        assert run.ok, run
        traces = learner_value(Session(second), "traces")
        assert "left.txt" not in traces["tmp"] and traces["shm"] == [], traces
        assert traces["pids"] == [1, 2] and not any(marker in c for c in traces["cmdlines"]), traces
        assert traces["socket"] == 111, f"the abstract socket of the kernel before is gone: {traces['socket']}"
        deadline = time.monotonic() + 10
        while first.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not first.alive(), "forking the next kernel ends the one before"
        left = [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
        assert left == [], f"the daemon of the kernel before outlived it: {left}"
    finally:
        first.shutdown()
        second.shutdown()


@pytest.mark.slow
def test_a_forked_kernel_sees_the_folders_the_sandbox_binds_inside_tmp_read_only(tmp_path, monkeypatch):
    """CI checks the course out under /tmp, so the virtual environment and the course library are bound
    inside /tmp: a forked kernel's fresh /tmp must show them again at their places, read-only (here, a data
    folder under /tmp), beside the kernel's own scratch files."""
    require_sandbox()
    data = tmp_path / "data"
    if not str(data.resolve()).startswith("/tmp/"):
        pytest.skip(f"the test's folder is not under /tmp here ({data})")
    data.mkdir()
    (data / "corpus.txt").write_text("to be or not to be")
    monkeypatch.setenv("COURSE_DATA_DIR", str(data))
    zygote = Zygote(protect=[SOLUTIONS], temp_root=tmp_path, group=None)
    zygote.start()
    kernel = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, zygote=zygote.link)
    code = (
        f"import os\ntext = open({str(data / 'corpus.txt')!r}).read()\ntry:\n"
        f"    open({str(data / 'mine.txt')!r}, 'w')\n    refused = None\n"
        "except OSError as err:\n    refused = err.errno\n"
        "open('/tmp/scratch.txt', 'w').write('the kernel writes its own /tmp')\n"
    )
    try:
        kernel.start()
        run, _ = kernel.run_cell(code, "answer", budget=kernel.cell_budget(60))
        assert run.ok, run
        assert kernel.launch is None, "the kernel was forked from the zygote"
        session = Session(kernel)
        assert learner_value(session, "text") == "to be or not to be"
        assert learner_value(session, "refused") == 30, "the bound folder stays read-only (EROFS)"
    finally:
        kernel.shutdown()
        zygote.close()
    assert not (data / "mine.txt").exists() and not (tmp_path / "scratch.txt").exists()


@pytest.mark.slow
def test_a_kernel_is_started_by_bubblewrap_when_its_zygote_has_died(tmp_path):
    """A zygote killed mid-batch costs time, not a grade: its next kernel starts in a sandbox of its own."""
    require_sandbox()
    dead = Zygote(protect=[SOLUTIONS], temp_root=tmp_path, group=None)
    dead.start()
    link = dead.link
    for p in [psutil.Process(dead.proc.pid), *psutil.Process(dead.proc.pid).children(recursive=True)]:
        p.kill()
    kernel = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, zygote=link)
    try:
        kernel.start()
        run, _ = kernel.run_cell("value = 6 * 7", "answer", budget=kernel.cell_budget(60))
        assert run.ok and learner_value(Session(kernel), "value") == 42, run
        assert kernel.zygote is None and kernel.launch is not None, "started by bubblewrap instead"
    finally:
        kernel.shutdown()
        dead.close()


@pytest.mark.slow
def test_a_kernel_that_dies_with_its_zygote_is_the_graders_failure_not_the_learners(tmp_path):
    """A learner's kernel that ends itself has died, the learner's doing; one that ends because its zygote was
    killed from outside raises ZygoteDied, which no check keeps and the batch turns into a second try."""
    require_sandbox()
    zygote = Zygote(protect=[SOLUTIONS], temp_root=tmp_path, group=None)
    zygote.start()
    kernel = SandboxedKernel(Limits(cell_cpu_s=30), sandbox=True, zygote=zygote.link)
    try:
        kernel.start()
        run, _ = kernel.run_cell("import os\nos._exit(3)", "answer", budget=kernel.cell_budget(60))
        assert run.status == "died", run
        kernel.start()
        for p in [psutil.Process(zygote.proc.pid), *psutil.Process(zygote.proc.pid).children(recursive=True)]:
            try:  # the zygote's whole sandbox, as a teacher's kill -9 of the wrong process would
                p.kill()
            except psutil.Error:
                pass
        with pytest.raises(ZygoteDied):
            kernel.run_cell("value = 1", "answer", budget=kernel.cell_budget(60))
    finally:
        kernel.shutdown()
        zygote.close()


@pytest.mark.slow
def test_course_grade_forks_its_kernels_from_zygotes_under_ci(tmp_path):
    """Where the sandbox works, so do zygotes (CAP_SYS_ADMIN in the sandbox's own user namespace, a fresh
    /proc there): under CI each batch must fork its kernels, not start each in a sandbox of its own."""
    require_sandbox()
    pool, why = start_pool(2, protect=[SOLUTIONS], temp_root=tmp_path, group=None)
    close_pool(pool)
    if not pool and not IN_CI:
        pytest.skip(f"zygotes do not start here: {why}")
    assert len(pool) == 2, f"CI must fork kernels from zygotes, but: {why}"


@pytest.mark.slow
def test_course_grade_refuses_without_the_sandbox_unless_told(tmp_path):
    """Where bwrap cannot start (here: simulated with an empty PATH for bwrap), grading needs --no-sandbox."""
    from grading_helpers import exercise, write

    write(tmp_path / "subs" / "ada" / "00_welcome.ipynb", exercise())
    env = dict(os.environ, PATH=str(tmp_path / "empty-bin"))
    base = [
        sys.executable,
        "-m",
        "course_lib.cli",
        "grade",
        str(tmp_path / "subs"),
        "--solutions",
        str(SOLUTIONS),
        "--out",
        str(tmp_path / "out"),
        "--jobs",
        "1",
    ]
    proc = subprocess.run(base, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "sandbox is not available" in proc.stdout and "--no-sandbox" in proc.stdout, (
        proc.stdout
    )
    assert not (tmp_path / "out").exists()
    proc = subprocess.run(base + ["--no-sandbox"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WITHOUT the sandbox" in proc.stderr and "hidden tests" in proc.stderr, proc.stderr
    assert "without the sandbox" in (tmp_path / "out" / "grades.json").read_text()
