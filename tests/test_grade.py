"""`course grade`: every kind of submission gets a sane, explained result; none earns points its
answers did not earn; the batch always finishes; one submission can never stop, starve or zero the
others; submission files are never modified; nothing the learners' code starts outlives the batch.

The crafted submissions are generated from the lesson 00 solution notebook (see grading_helpers)
and graded by the real command (`python -m course_lib.cli grade`) in one module-scoped fixture, and
each test reads its student's rows from grades.json. Besides honest mistakes and broken notebooks,
the class holds one submission per attack that a red team tried on the grader (the first pass's
twenty, and the second pass's findings, each described in its test). The fixture grades the class
twice, as a teacher would after an interruption: the first run is interrupted with Ctrl-C (SIGINT
to its process group) once three submissions are graded, and the same command then resumes it; during the second run the
process checking one submission is killed from outside, as a teacher would kill a stuck one. The
command runs under a small wrapper that adopts every orphaned process (a child subreaper), so a
process that outlived the grader is seen, and with a private temporary folder (seeded with what a
killed batch leaves), so a folder left behind is seen too. Limits are tight so the suite stays fast.

The crafted class needs the sandbox: where bubblewrap does not work these tests skip (with one
warning), and under CI they fail. The last tests (every solution notebook, the command's errors)
run either way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from grading_helpers import (
    IN_CI,
    SOLUTIONS,
    WELCOME,
    by_id,
    copy_nb,
    digest,
    exercise,
    learner,
    load_json,
    require_sandbox,
    sandbox_available,
    solution,
    write,
)

from course_grader.batch import GradeOptions, grade_all
from course_grader.build import build_exercise
from course_grader.export import safe_name
from course_lib.runner.notebook import exercise_filename, read_notebook
from course_lib.runner.process import Limits

WRONG_RF = "def receptive_field(num_layers, kernel_size):\n    return num_layers * (kernel_size - 1)\n"
RIGHT = {  # right answers, for crafted cells that do something else first
    "ex1": "def reproducible_sample(seed):\n    seed_everything(seed)\n    return torch.randn(5)\n",
    "ex2": "rnn_steps_keys_are, rnn_steps_1_20, rnn_steps_1_100 = 17, 19, 99\n",
    "ex3": "def receptive_field(num_layers, kernel_size):\n    return 1 + num_layers * (kernel_size - 1)\n",
    "ex4": "def layers_needed(distance, kernel_size):\n    return -(-distance // (kernel_size - 1))\n",
    "ex5": "n_patches, seq_len = 196, 197\n",
    "ex6": "def patch_count(height, width, patch):\n    return (height // patch) * (width // patch)\n",
}

# Runs the grader as its child and adopts every process the grader leaves behind (PR_SET_CHILD_SUBREAPER):
# whatever is still alive a second after the grader exits outlived the batch. With "interrupt_after": N and
# "interrupt_marker": M, Ctrl-C (SIGINT to the grader's process group) once N submissions are graded and a
# process whose command line holds M runs in a sandbox: a submission is then still being checked, so the
# Ctrl-C lands mid-batch on a fast machine and a slow one alike. With "kill_marker": M, a process of the
# grader's is killed (SIGKILL) once a process whose command line holds M runs in a sandbox: that process's
# ancestor whose grandparent is the grader. For a kernel forked from a zygote, that is the zygote's sandbox
# (and the kernel with it); for a kernel bubblewrap started, the process checking the submission (the
# grader forks checking processes from a server process of its own). Either is a failure of the grader.
WRAPPER = r"""
import ctypes, json, os, re, signal, subprocess, sys, threading, time
import psutil
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
options = json.loads(sys.argv[1])
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        start_new_session=True)
lines, killed = [], []
def graded():
    return sum(1 for ln in list(lines) if re.search(r" / \S+\s+graded$", ln.rstrip()))
def read_stdout():
    for line in proc.stdout:
        lines.append(line)
errors = []
reader = threading.Thread(target=read_stdout)
reader.start()
threading.Thread(target=lambda: errors.append(proc.stderr.read())).start()
marker = options.get("kill_marker") or options.get("interrupt_marker")
while marker and proc.poll() is None and not killed:
    try:
        family = psutil.Process(proc.pid).children(recursive=True)  # the grader's, not the whole machine's
    except psutil.Error:
        family = []
    for p in family:
        try:
            cmdline = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if marker in cmdline and options.get("interrupt_marker"):
            if graded() >= options["interrupt_after"]:
                killed.append("SIGINT")
                os.killpg(proc.pid, signal.SIGINT)
            break
        if marker in cmdline:
            for up in p.parents():
                try:
                    if up.parent() and up.parent().ppid() == proc.pid:
                        up.kill()
                        killed.append(up.pid)
                        break
                except psutil.Error:
                    pass
    time.sleep(0.25)
proc.wait()
reader.join()
time.sleep(1.0)
left = []
for p in psutil.Process().children(recursive=True):
    try:
        left.append(p.cmdline())
        p.kill()
    except psutil.Error:
        pass
print(json.dumps({"returncode": proc.returncode, "stdout": "".join(lines), "stderr": "".join(errors), "left": left,
                  "killed": killed}))
"""


def crafted(tmp: Path, subs: Path, out: Path, teacher: Path) -> dict:
    """student_id -> submission content (notebook dict, bytes, None for "no file", or a link to make).
    `teacher` is the solution notebook the class is graded with (a private copy of lesson 00's)."""
    outside = tmp / "outside"
    outside.mkdir()
    victim = write(outside / "victim.txt", "keep me")
    classmate = subs / "full" / "00_welcome.ipynb"
    nb_dup = learner()
    dup = copy_nb(by_id(nb_dup, "ex3_answer"))
    dup["source"] = "def receptive_field(num_layers, kernel_size):\n    return 0\n"
    nb_dup["cells"].insert(nb_dup["cells"].index(by_id(nb_dup, "ex3_answer")) + 1, dup)
    for cell in nb_dup["cells"]:
        cell["id"] = "same-id"
    nb_renamed = learner()
    by_id(nb_renamed, "ex3_answer")["metadata"]["nbgrader"]["grade_id"] = "my_ex3"
    nb_edited = learner(
        {"ex3_answer": "def receptive_field(num_layers, kernel_size):\n    return num_layers * kernel_size\n"}
    )
    for cell in nb_edited["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade"):
            cell["source"] = "print('all tests pass')"
    nb_edited["cells"].remove(by_id(nb_edited, "ex6_test"))
    nb_edited["cells"].append(
        {
            "cell_type": "code",
            "id": "extra",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "import course_lib.checks as c\nc.check_patch_count = lambda *a, **k: None",
        }
    )
    other_lesson = exercise()
    for cell in other_lesson["cells"]:
        if "nbgrader" in cell["metadata"]:
            cell["metadata"]["nbgrader"]["grade_id"] = "l99_" + cell["metadata"]["nbgrader"]["grade_id"]
    built_elsewhere = learner()
    built_elsewhere["metadata"]["course_lib"]["built_from"] = "solutions/01_one_hot_and_dot_products.ipynb"
    grades_csv = str(out / "grades.csv")
    return {
        # --- honest work, honest mistakes, broken notebooks -------------------------------------------
        "full": teacher.read_bytes(),  # the teacher's own notebook, hidden tests and all
        "blank": exercise(),
        ".dotted": learner(),  # a hidden folder: passed over, with a warning recorded (a roster would list it)
        "=1+1": learner(),  # ids a spreadsheet would run as formulas are quoted in grades.csv
        "@SUM(A1)": learner(),
        "mistakes": learner(
            {
                "ex3_answer": WRONG_RF,
                "ex5_answer": "n_patches = 14\nseq_len = 197\n",
                "ex7_answer": "class _Eq(int):\n    def __eq__(self, other):\n        return True\n"
                "    __hash__ = int.__hash__\nattention_steps_1_20 = attention_steps_1_100 = _Eq(5)\n",
            }
        ),
        "loops": learner(
            {
                "ex3_answer": "while True:\n    pass\n",
                "ex4_answer": "def layers_needed(distance, kernel_size):\n    while True:\n        pass\n",
                "ex5_answer": "n_patches, seq_len = 196, 197\nwhile True:\n    pass\n",  # right, then stuck
                "ex7_answer": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
            }
        ),
        "exits": learner({"ex1_answer": "import sys\nsys.exit(1)\n", "ex6_answer": "import os\nos._exit(0)\n"}),
        "crash": learner(
            {
                "ex2_answer": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
                "ex7_answer": "import faulthandler\nfaulthandler._sigsegv()\n",
            }
        ),
        "memory": learner(
            {
                "ex3_answer": "big = bytearray(64 * 2**30)\n" + WRONG_RF,
                "ex4_answer": (
                    "def _hog():\n    hog = []\n    while True:\n        hog.append(bytearray(50 * 2**20))\n_hog()\n"
                ),
                "ex5_answer": "import torch\nt = torch.ones(2**34)\nn_patches, seq_len = 196, 197\n",
            }
        ),
        "output": learner(
            {
                "ex1_answer": "print('x' * 10**7)\n",
                "ex5_answer": "for i in range(10**7):\n    print(i)\n",
                # low: update_display_data escaped the output limit (805 MB through a 1 MB cap)
                "ex7_answer": "h = display('x', display_id=True)\nfor _ in range(10**5):\n    h.update('y' * 10**4)\n",
            }
        ),
        "syntax": learner({"ex4_answer": "def layers_needed(distance, kernel_size):\n    return (distance\n"}),
        "edited_tests": nb_edited,
        "not_json": b"{ this is not a notebook",
        "empty": b"",
        "no_cells": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        "wrong_lesson": other_lesson,
        "built_elsewhere": built_elsewhere,
        "duplicates": nb_dup,
        "renamed": nb_renamed,
        "missing": None,
        # --- critical: the teacher's machine, other students, the results ---------------------------
        # Children that outlive grading and rewrite the results once the grader has written them.
        "escape": learner(
            {
                "ex1_answer": f"""
import multiprocessing, os, subprocess, sys, time
RESULTS = {grades_csv!r}
def _rewrite():
    while not os.path.exists(RESULTS):
        time.sleep(0.1)
    open(RESULTS, "w").write("escape,00_welcome,16,16,graded\\n")
multiprocessing.get_context("fork").Process(target=_rewrite).start()
subprocess.Popen([sys.executable, "-c",
                  "import os, time\\nwhile not os.path.exists(%r): time.sleep(0.1)\\n"
                  "open(%r, 'w').write('pwned')" % (RESULTS, RESULTS)], start_new_session=True)
if os.fork() == 0:  # a daemon: new session, parent gone
    os.setsid()
    if os.fork() == 0:
        _rewrite()
    os._exit(0)
"""
                + RIGHT["ex1"]
            }
        ),
        # Paths relative to a directory descriptor; the grader's command line through /proc.
        "dir_fd": learner(
            {
                "ex2_answer": f"""
import os
root = os.open("/", os.O_RDONLY)
fd = os.open({str(teacher.relative_to("/"))!r}, os.O_RDONLY, dir_fd=root)
solution = os.read(fd, 10**7).decode()
"""
                + RIGHT["ex2"],
                "ex3_answer": f"""
import os
root = os.open("/", os.O_RDONLY)
os.remove({str(classmate.relative_to("/"))!r}, dir_fd=root)
def receptive_field(num_layers, kernel_size):
    return 1 + num_layers * (kernel_size - 1)
""",
                "ex4_answer": f"""
import os
root = os.open("/", os.O_RDONLY)
fd = os.open({str(teacher.relative_to("/"))!r}, os.O_WRONLY | os.O_TRUNC, dir_fd=root)
os.write(fd, b"{{}}")
def layers_needed(distance, kernel_size):
    return -(-distance // (kernel_size - 1))
""",
                "ex5_answer": """
import glob, os
found = []
for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
    try:
        words = open(path, "rb").read().split(b"\\0")
    except OSError:
        continue
    found += [w.decode() for w in words if w.endswith(b".ipynb") or b"solutions" in w]
for candidate in found:
    if os.path.exists(candidate):
        n_patches, seq_len = 196, 197  # a solution notebook: would have copied the answers
if not found:
    raise RuntimeError("found no notebook path in any command line")
""",
            }
        ),
        # One line replacing the grader's own modules, and the checks, in the learner's process.
        "module_swap": learner(
            {
                "ex3_answer": """
import sys, types
sys.modules["course_lib.runner.kernel"] = types.ModuleType("nothing to see")
sys.modules["course_lib.checks.lesson00"].check_receptive_field = lambda *a, **k: None
sys.modules["course_lib.checks"] = types.ModuleType("checks")
"""
                + WRONG_RF
            }
        ),
        # C++ file I/O without any audit event.
        "torch_files": learner(
            {
                "ex1_answer": f"import torch\nstolen = torch.from_file({str(teacher)!r}, size=100, dtype=torch.uint8)\n"
                + RIGHT["ex1"],
                "ex5_answer": f"import torch\ntorch.save({{'pwned': 1}}, {str(classmate)!r})\n" + RIGHT["ex5"],
                "ex6_answer": f"import torch\ntorch.save({{'pwned': 1}}, {str(victim)!r})\n"
                "def patch_count(height, width, patch):\n    return (height // patch) * (width // patch)\n",
            }
        ),
        # Signals to the parent: a killed worker cost everyone in it their grades.
        "signals": learner(
            {
                "ex2_answer": """
import os, signal
fd = os.pidfd_open(os.getppid())
signal.pidfd_send_signal(fd, signal.SIGKILL)
visible = [int(p) for p in os.listdir("/proc") if p.isdigit()]
if len(visible) <= 4:  # inside the sandbox: everything it can see is the sandbox
    for pid in visible:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
"""
                + RIGHT["ex2"]
            }
        ),
        "linked_file": ("notebook link", teacher),  # a symlink to the solutions notebook
        "linked_dir": ("folder link", subs / "full"),  # a symlink to another student's folder
        # --- high: marks not earned, inside the kernel ---------------------------------------------
        "kernel_tricks": learner(
            {
                # patched numpy, torch and builtins, a descriptor on Tensor.numpy, a filtered stdout
                "ex1_answer": """
import builtins, sys
import numpy._core.numeric as numeric
import torch
numeric.isclose = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
torch.Tensor.numpy = property(lambda self: (lambda *a, **k: __import__("numpy").zeros(5)))
lenient = dict(vars(builtins), isinstance=lambda obj, kind: True)
get_ipython().user_ns["__builtins__"] = lenient
sys.stdout.write = lambda text: len(text)
def reproducible_sample(seed):
    return torch.zeros(5)
""",
                # expected values read from the checking code's frames, through __int__/__ne__/__array__
                "ex2_answer": """
import sys
class _Spy:
    def _expected(self):
        f = sys._getframe(1)
        while f is not None:
            for key in ("expected", "want", "answer"):
                if key in f.f_locals and isinstance(f.f_locals[key], int):
                    return f.f_locals[key]
            f = f.f_back
        return 0
    def __int__(self):
        return self._expected()
    __index__ = __int__
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __array__(self, *args, **kwargs):
        import numpy
        return numpy.array(self._expected())
    __hash__ = object.__hash__
rnn_steps_keys_are = rnn_steps_1_20 = rnn_steps_1_100 = _Spy()
""",
                # forged success: IPython's ExecutionResult and run_cell
                "ex3_answer": """
from IPython.core.interactiveshell import ExecutionResult
ExecutionResult.success = property(lambda self: True)
ExecutionResult.error_in_exec = property(lambda self: None)
"""
                + WRONG_RF,
                # sys.settrace writing actual = expected into a check's locals
                "ex4_answer": """
import sys
def _tracer(frame, event, arg):
    if "expected" in frame.f_locals and "value" in frame.f_locals:
        frame.f_locals["value"] = frame.f_locals["expected"]
    return _tracer
sys.settrace(_tracer)
def layers_needed(distance, kernel_size):
    return 0
""",
                # a value whose __array_interface__ points at memory (a check's bytecode, say)
                "ex5_answer": """
class _Pointer:
    @property
    def __array_interface__(self):
        return {"shape": (1,), "typestr": "<i8", "data": (id(self), False), "version": 3}
n_patches = seq_len = _Pointer()
""",
                # the checks module's __class__ swapped
                "ex6_answer": """
import types
import course_lib.checks as c
class _Lenient(types.ModuleType):
    def __getattr__(self, name):
        return lambda *a, **k: None
c.__class__ = _Lenient
def patch_count(height, width, patch):
    return 0
""",
                # objects made by the setup cell mutated
                "ex7_answer": """
lesson00.__dict__.clear()
checks.__dict__.clear()
torch.randn = lambda *a, **k: None
attention_steps_1_20 = attention_steps_1_100 = 99
""",
            }
        ),
        "writes_outside": learner(
            {
                "ex1_answer": f"open({str(outside / 'pwned.txt')!r}, 'w').write('pwned')\n",
                "ex2_answer": f"import os\nos.remove({str(victim)!r})\n",
                "ex6_answer": "open('notes.txt', 'w').write('scratch is fine')\n"
                "def patch_count(height, width, patch):\n    return (height // patch) * (width // patch)\n",
                "ex7_answer": (
                    f"import subprocess\nsubprocess.run(['touch', {str(outside / 'pwned2.txt')!r}], check=True)\n"
                ),
            }
        ),
        # --- a hostile class: one submission must never stop, starve or zero the others ---------------
        # keys that all hash alike (k * (2**61 - 1)), sent by a patched encoder: building the set in the
        # grader took O(n^2) in C (300,000 keys: stuck for good, no time limit could stop it). range(4e7)
        # crossed as four numbers and became a 2.2 GB array in the grader.
        "decode_bombs": learner(
            {
                "ex2_answer": COLLIDING + 'rnn_steps_keys_are = rnn_steps_1_20 = rnn_steps_1_100 = "SET"\n',
                "ex5_answer": COLLIDING + 'n_patches, seq_len = "DICT", 197\n',
                "ex6_answer": "def patch_count(height, width, patch):\n    return range(40_000_000)\n",
                "ex7_answer": COLLIDING + 'attention_steps_1_20 = attention_steps_1_100 = "COUNTER"\n',
            }
        ),
        # memory that no RSS or address-space limit sees: memfd files (48 x 63 MB), SysV shared memory.
        # 40 busy loops in one sandbox, forked (its neighbours must still finish, and the forks share the
        # kernel's pages); forked workers sharing 300 MB copy-on-write (summed RSS counted it 17 times: a false
        # memory-limit kill)
        "memory_and_cpu": learner(
            {
                "ex1_answer": "import os, time\n_start = time.monotonic() + 1\n_kids = []\n"
                "for _ in range(40):\n    _pid = os.fork()\n    if _pid == 0:\n"
                "        time.sleep(max(0, _start - time.monotonic()))\n"
                "        while time.monotonic() < _start + 2:\n            pass\n"
                "        os._exit(0)\n    _kids.append(_pid)\n"
                "for _pid in _kids:\n    os.waitpid(_pid, 0)\n" + RIGHT["ex1"],
                "ex3_answer": "import os\n_held = []\nfor _ in range(48):\n    _fd = os.memfd_create('hold')\n"
                "    os.posix_fallocate(_fd, 0, 63 * 2**20)\n    _held.append(_fd)\n" + RIGHT["ex3"],
                "ex4_answer": "import ctypes\n_libc = ctypes.CDLL(None, use_errno=True)\n"
                "_id = _libc.shmget(0, 512 * 2**20, 0o1000 | 0o600)\n"
                "if _id < 0:\n    raise OSError(ctypes.get_errno(), 'shmget refused')\n"
                "import ctypes.util\n_libc.shmat.restype = ctypes.c_void_p\n"
                "ctypes.memset(_libc.shmat(_id, None, 0), 1, 512 * 2**20)\n" + RIGHT["ex4"],
                "ex6_answer": "import os, time\n_block = bytearray(300 * 2**20)\n"
                "for _i in range(0, len(_block), 4096):\n    _block[_i] = 1\n_kids = []\n"
                "for _ in range(16):\n    _pid = os.fork()\n    if _pid == 0:\n"
                "        time.sleep(2)\n        os._exit(0)\n    _kids.append(_pid)\n"
                "time.sleep(1)\nfor _pid in _kids:\n    os.waitpid(_pid, 0)\n" + RIGHT["ex6"],
            }
        ),
        # TCP on the sandbox's own loopback, whose socket buffers a v1 memory cgroup does not count (1,000 MB were
        # held past a ~640 MB limit); io_uring, the kernel's usual attack surface. Harmless where they are allowed.
        "kernel_surface": learner(
            {
                "ex3_answer": "import socket\n_server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
                "_server.bind(('127.0.0.1', 0))\n_server.listen(4)\n_held = []\nfor _ in range(4):\n"
                "    _c = socket.create_connection(_server.getsockname())\n    _c.setblocking(False)\n"
                "    try:\n        while True:\n            _c.send(b'x' * 65536)\n"
                "    except BlockingIOError:\n        _held.append(_c)\n" + RIGHT["ex3"],
                "ex4_answer": "import ctypes, os\n_libc = ctypes.CDLL(None, use_errno=True)\n"
                "_params = ctypes.create_string_buffer(120)\n"
                f"_fd = _libc.syscall({IO_URING_SETUP}, 8, _params)\n"
                "if _fd < 0:\n    raise OSError(ctypes.get_errno(), 'io_uring_setup refused')\n"
                "os.close(_fd)\n" + RIGHT["ex4"],
            }
        ),
        # a 60 MB reply header of empty lists (31x its size once parsed)
        "listbomb": learner(
            {"ex7_answer": FORGED_REPLY + 'attention_steps_1_20 = "LISTBOMB"\nattention_steps_1_100 = 1\n'}
        ),
        # a 200,000-deep reply and a 5,000-digit integer: one cell each, not the whole row
        "deep_reply": learner(
            {
                "ex2_answer": FORGED_REPLY + 'rnn_steps_keys_are = rnn_steps_1_20 = rnn_steps_1_100 = "DEEP"\n',
                "ex5_answer": FORGED_REPLY + 'n_patches, seq_len = "HUGEINT", 197\n',
            }
        ),
        # Markdown and HTML in an exception message, in a note and in an added cell's first line
        "injector": injector(),
        # a student whose folder is named like the feedback index
        "index.csv": learner(),
        # 18: top-level metadata that is not an object
        "bad_metadata": {**learner(), "metadata": "x"},
        # 19: ids that differ only in case or Unicode form are one student (both folders hold good work)
        "Ada": learner(),
        "ada": learner(),
        "Jos\u00e9": learner(),
        "Jose\u0301": learner(),
        # the first run is interrupted while this one is checked (WRAPPER's interrupt_marker): the second grades it
        "zy_interrupted": learner(
            {
                "ex2_answer": "import subprocess, time\nsubprocess.Popen(['sleep', '978'])\n"
                "time.sleep(3)\n" + RIGHT["ex2"]
            }
        ),
        # the process checking this one is killed from outside mid-batch (WRAPPER's kill_marker)
        "zz_killed": learner(
            {
                "ex2_answer": "import subprocess, time\nsubprocess.Popen(['sleep', '977'])\n"
                "time.sleep(5)\n" + RIGHT["ex2"]
            }
        ),
        "zzz_honest": learner(),
    }


IO_URING_SETUP = 425  # the same number on x86-64 and arm64

# A kernel whose encoder sends sets and dicts of colliding keys for the marker strings (the learner's own code
# runs the kernel's side of the protocol, so it can send anything).
COLLIDING = """
import course_lib.runner.wire as _wire
_plain_encode = getattr(_wire.Encoder.encode, "plain", _wire.Encoder.encode)
def _colliding(self, value, depth=0):
    if type(value) is str and value in ("SET", "DICT", "COUNTER"):
        keys = [k * (2**61 - 1) for k in range(1, {"SET": 300_001}.get(value, 15_001))]
        return ["set", keys] if value == "SET" else [value.title() if value == "COUNTER" else "dict",
                                                     [[k, 1] for k in keys]]
    return _plain_encode(self, value, depth)
_colliding.plain = _plain_encode
_wire.Encoder.encode = _colliding
"""
# A kernel that answers a request for a marker string with a forged frame: a 60 MB header of empty lists,
# a value nested 200,000 deep, or a 5,000-digit integer.
FORGED_REPLY = """
import course_lib.runner.wire as _wire
_plain_pack = getattr(_wire.pack, "plain", _wire.pack)
def _forged(header, buffers=()):
    body = {"LISTBOMB": b'["list", [' + b"[]," * 20_000_000 + b'[]]]', "DEEP": b"[" * 200_000 + b"]" * 200_000,
            "HUGEINT": b"1" * 5_000}.get(header.get("value")) if type(header.get("value")) is str else None
    if body is None:
        return _plain_pack(header, buffers)
    text = b'{"ok": true, "found": true, "owner": "learner", "buffers": [], "id": %d, "value": %s}' % (
        header["id"], body)
    return _wire.PREFIX.pack(_wire.MAGIC, len(text), 0) + text
_forged.plain = _plain_pack
_wire.pack = _forged
"""
INJECTED = (
    "```\n# Feedback on 00_welcome for injector\n\n**Score: 16 / 16**\n\n<script>alert(1)</script>\n"
    "<img src=x onerror=alert(1)>\n[click](http://example.com) <!--"
)


def injector() -> dict:
    nb = learner(
        {
            "ex3_answer": f"raise ValueError({INJECTED!r})\n",
            # right values, then an error whose message lands in a note ("... the test passed with what ...")
            "ex5_answer": "n_patches, seq_len = 196, 197\n"
            "raise RuntimeError('<script>alert(3)</script>\\n# Score: 16 / 16 ``` <!--')\n",
        }
    )
    nb["cells"].append(
        {
            "cell_type": "code",
            "id": "added",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "# <img src=x onerror=alert(2)> ``` **Score: 16 / 16** <!--\nx = 1\n",
        }
    )
    return nb


def _stale_leftovers(private_tmp: Path) -> list[str]:
    """What a killed batch leaves (work folder with mount points, a sandbox's stage, cgroups); the next run
    must remove it. Returns the cgroup folders made."""
    from course_grader import budgets

    for name in ("course-grade-4242-deadbeef", "course-sandbox-4242-deadbeef"):
        (private_tmp / name / "0").mkdir(parents=True)
    dead = subprocess.Popen(["true"])  # a process id that is gone
    dead.wait()
    made = []
    for ctl in budgets.detect().values():
        folder = Path(ctl.own) / f"course-grade-{dead.pid}"
        (folder / "job-0" / "kernel-0").mkdir(parents=True, exist_ok=True)
        made.append(str(folder))
    return made


def _grade(cmd: list[str], cwd: Path, env: dict, **options) -> dict:
    wrapper = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps(options), *cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )
    assert wrapper.returncode == 0, wrapper.stdout + wrapper.stderr
    return json.loads(wrapper.stdout)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    require_sandbox()
    tmp = tmp_path_factory.mktemp("grading")
    subs, out, solutions = tmp / "submissions", tmp / "out", tmp / "solutions"
    teacher = write(solutions / WELCOME.name, WELCOME.read_bytes())  # the copy graded with: stable while it runs
    for student, content in crafted(tmp, subs, out, teacher).items():
        if isinstance(content, tuple) and content[0] == "folder link":
            os.symlink(content[1], subs / student)
            continue
        (subs / student).mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple):
            os.symlink(content[1], subs / student / "00_welcome.ipynb")
        elif content is not None:
            write(subs / student / "00_welcome.ipynb", content)
    before = digest(subs)
    solutions_before = digest(solutions)
    # A private temporary folder (searchable by others, as /tmp is): nothing may be left in it.
    private_tmp = Path(tempfile.mkdtemp(prefix="course-grade-test-"))
    os.chmod(private_tmp, 0o711)
    stale_groups = _stale_leftovers(private_tmp)
    cmd = [
        sys.executable,
        "-m",
        "course_lib.cli",
        "grade",
        str(subs),
        "--solutions",
        str(solutions),
        "--out",
        str(out),
        "--assignment",
        "00_welcome",
        "--jobs",
        "2",
        "--timeout",
        "6",
        "--total-timeout",
        "150",
        "--memory",
        "1024",
        "--max-output",
        "200000",
    ]
    env = dict(os.environ, TMPDIR=str(private_tmp))
    started = time.monotonic()
    first = _grade(cmd, tmp, env, interrupt_after=3, interrupt_marker="sleep 978")  # Ctrl-C while zy_ is checked
    first_seconds = time.monotonic() - started
    stale_left = [g for g in stale_groups if os.path.exists(g)]
    first_left_in_tmp = sorted(p.name for p in private_tmp.iterdir())
    first_book = load_json(out / "grades.json")
    started = time.monotonic()
    second = _grade(cmd, tmp, env, kill_marker="sleep 977")  # the same command: resumes, and one checker is killed
    seconds = time.monotonic() - started
    left_in_tmp = sorted(p.name for p in private_tmp.iterdir())
    shutil.rmtree(private_tmp, ignore_errors=True)
    assert second["returncode"] == 0, second["stdout"] + second["stderr"]
    data = load_json(out / "grades.json")
    results = {r["student_id"]: r for r in data["results"]}
    return {
        "tmp": tmp,
        "subs": subs,
        "out": out,
        "solutions": solutions,
        "before": before,
        "solutions_before": solutions_before,
        "results": results,
        "stdout": second["stdout"],
        "left": first["left"] + second["left"],
        "left_in_tmp": left_in_tmp,
        "first_left_in_tmp": first_left_in_tmp,
        "seconds": seconds,
        "first_seconds": first_seconds,
        "csv": (out / "grades.csv").read_text(),
        "first": first,
        "second": second,
        "first_book": first_book,
        "stale_groups_left": stale_left,
        "warnings": data["warnings"],
    }


def results_of(graded, student) -> dict[str, dict]:
    return {t["grade_id"]: t for t in graded["results"][student]["tests"]}


def feedback(graded, student) -> str:
    return (graded["out"] / "feedback" / safe_name(student) / "00_welcome.md").read_text()


SAME_STUDENT = {"ada": "Ada", "Jose\u0301": "Jos\u00e9"}  # folders that are another folder's id (case, Unicode form)
FULL_MARKS = [
    "full",
    "=1+1",
    "@SUM(A1)",
    "duplicates",
    "escape",
    "signals",
    "index.csv",
    "Ada",
    "Jos\u00e9",
    "zy_interrupted",
    "zzz_honest",
]  # correct work, whatever sits next to it in the batch


@pytest.mark.slow
def test_every_student_has_exactly_one_row_and_a_feedback_file(graded):
    students = sorted({SAME_STUDENT.get(p.name, p.name) for p in graded["subs"].iterdir()})
    assert sorted(graded["results"]) == students
    assert len(graded["csv"].splitlines()) == len(students) + 1
    for student in students:
        assert (graded["out"] / "feedback" / safe_name(student) / "00_welcome.md").is_file(), student


@pytest.mark.slow
def test_every_correct_submission_gets_full_marks_whatever_runs_beside_it(graded):
    """A batch holding every attack next to correct submissions gives each of the correct ones
    full marks, within its time budget."""
    wrong = {
        s: (graded["results"][s]["score"], graded["results"][s]["status"])
        for s in FULL_MARKS
        if graded["results"][s]["score"] != 16
    }
    assert not wrong, wrong


@pytest.mark.slow
def test_ids_that_look_like_formulas_are_quoted_in_the_csv(graded):
    rows = graded["csv"].lstrip("\ufeff").splitlines()
    assert rows[0].startswith("student_id,name,assignment,status,score,")
    assert any(r.startswith('"\'=1+1",,00_welcome,graded,16,') for r in rows), rows
    assert any(r.startswith('"\'@SUM(A1)",,00_welcome,graded,16,') for r in rows), rows
    assert not any(cell.startswith(("=", "@", "+", "-")) for row in rows for cell in row.split(",")), rows
    assert graded["results"]["=1+1"]["score"] == 16, "the id itself is kept as it is in grades.json"


@pytest.mark.slow
def test_submission_and_solution_files_are_never_modified(graded):
    assert digest(graded["subs"]) == graded["before"], "a submission file was modified"
    assert digest(graded["solutions"]) == graded["solutions_before"], "the solution notebook was modified"


@pytest.mark.slow
def test_nothing_outlives_the_batch(graded):
    """critical: children started with fork, a spawn context or a new session ran on after the grader
    and rewrote grades.csv; a killed worker left temporary folders behind (an interrupted batch too)."""
    assert graded["left"] == [], f"processes outlived the grader: {graded['left']}"
    assert graded["left_in_tmp"] == [], f"left in the temporary folder: {graded['left_in_tmp']}"
    assert graded["first_left_in_tmp"] == [], f"the interrupted run left: {graded['first_left_in_tmp']}"
    time.sleep(1.0)
    assert "pwned" not in graded["csv"] and "\nescape,,00_welcome,graded,16," in graded["csv"]
    assert (graded["out"] / "grades.csv").read_text() == graded["csv"], "grades.csv changed after the grader finished"
    r = graded["results"]["escape"]
    assert r["score"] == 16 and r["status"] == "graded", r


@pytest.mark.slow
def test_full_and_blank_notebooks(graded):
    assert graded["results"]["full"]["score"] == 16
    assert all(t["status"] == "passed" for t in graded["results"]["full"]["tests"])
    assert graded["results"]["full"]["notes"] == [], "a clean run must not report anything"
    blank = graded["results"]["blank"]
    assert blank["score"] == 0 and {t["status"] for t in blank["tests"]} == {"not attempted"}, blank


@pytest.mark.slow
def test_hidden_tests_run_and_mistakes_are_named_in_feedback(graded):
    t = results_of(graded, "mistakes")
    assert graded["results"]["mistakes"]["score"] == 11
    assert t["ex3_test"]["status"] == "failed" and "+1 for the centre" in t["ex3_test"]["message"]
    # two parts (n_patches wrong, seq_len right): half the points, and the wrong part named
    assert t["ex5_test"]["status"] == "partial" and t["ex5_test"]["points"] == 1 == t["ex5_test"]["max_points"] / 2, t[
        "ex5_test"
    ]
    assert "n_patches" in t["ex5_test"]["message"] and "seq_len" not in t["ex5_test"]["message"], t["ex5_test"][
        "message"
    ]
    assert t["ex7_test"]["status"] == "failed", "an int subclass that claims equality must not pass"
    assert "forgot the +1 for the centre position" in feedback(graded, "mistakes")


@pytest.mark.slow
def test_infinite_loops_hit_the_cell_time_limit_and_the_rest_is_graded(graded):
    r, t = graded["results"]["loops"], results_of(graded, "loops")
    assert r["score"] == 9, r
    for gid in ("ex3_test", "ex4_test", "ex7_test"):
        assert t[gid]["status"] == "error" and "time limit" in t[gid]["message"], t[gid]
    assert any("stopped" in n for n in r["notes"]), "the SIGINT-ignoring loop needed a kill and a restart"
    assert t["ex5_test"]["status"] == "passed", t["ex5_test"]
    assert any(n.startswith("Exercise 5") and "time limit" in n and "defined before that" in n for n in r["notes"]), (
        f"a passing test after a stuck answer cell should still be explained: {r['notes']}"
    )


@pytest.mark.slow
def test_sys_exit_and_os_exit_cost_only_their_exercise(graded):
    r, t = graded["results"]["exits"], results_of(graded, "exits")
    assert r["score"] == 11, r
    assert t["ex1_test"]["status"] == "error" and "SystemExit" in t["ex1_test"]["message"]
    assert t["ex6_test"]["status"] == "error" and "kernel stopped" in t["ex6_test"]["message"]


@pytest.mark.slow
def test_killing_or_crashing_the_kernel_costs_only_that_exercise(graded):
    r, t = graded["results"]["crash"], results_of(graded, "crash")
    assert r["score"] == 13, r
    assert t["ex2_test"]["status"] == "error" and "kernel stopped" in t["ex2_test"]["message"]
    assert t["ex7_test"]["status"] == "error" and "kernel stopped" in t["ex7_test"]["message"]


@pytest.mark.slow
def test_memory_hogs_get_a_memory_error_not_the_machine(graded):
    r, t = graded["results"]["memory"], results_of(graded, "memory")
    assert r["score"] == 8, r
    assert "MemoryError" in t["ex3_test"]["message"], t["ex3_test"]
    # A hog that grows 50 MB at a time reaches the memory limit within the 6 s cell limit on a quiet
    # machine; on a loaded one (CI's two cores shared with the browser tests) the time limit can stop it
    # first. Either way it is stopped, scores 0 and the batch goes on, which is what this test guards.
    assert t["ex4_test"]["points"] == 0 and any(
        why in t["ex4_test"]["message"] for why in ("MemoryError", "longer than the time limit")
    ), t["ex4_test"]
    assert "allocate" in t["ex5_test"]["message"], t["ex5_test"]


@pytest.mark.slow
def test_floods_of_output_are_cut_off_display_updates_included(graded):
    """low: update_display_data escaped the output limit."""
    r, t = graded["results"]["output"], results_of(graded, "output")
    assert r["score"] == 11, r
    for gid in ("ex1_test", "ex5_test", "ex7_test"):
        assert t[gid]["status"] == "error" and "output limit" in t[gid]["message"], t[gid]
    assert len(json.dumps(r)) < 50_000, "the recorded output must be capped"


@pytest.mark.slow
def test_a_syntax_error_points_at_the_answer_cell(graded):
    t = results_of(graded, "syntax")["ex4_test"]
    assert t["status"] == "error" and "SyntaxError" in t["message"] and "your answer cell, line 2" in t["message"], t
    assert "ipykernel" not in t["message"] and "ipython-input" not in t["message"], t


@pytest.mark.slow
def test_edited_or_deleted_test_cells_are_ignored(graded):
    r, t = graded["results"]["edited_tests"], results_of(graded, "edited_tests")
    assert r["score"] == 13, r
    assert t["ex3_test"]["status"] == "failed" and t["ex6_test"]["status"] == "passed"


@pytest.mark.slow
def test_paths_relative_to_a_directory_descriptor_reach_nothing(graded):
    """critical: os.open/os.remove with dir_fd bypassed the path policy; /proc/<ppid> showed the
    grader's command line. In the sandbox the teacher's and classmates' files are not there at all."""
    r, t = graded["results"]["dir_fd"], results_of(graded, "dir_fd")
    assert r["score"] == 6, r
    for gid in ("ex2_test", "ex3_test", "ex4_test"):
        assert t[gid]["status"] == "error" and "FileNotFoundError" in t[gid]["message"], t[gid]
    assert t["ex5_test"]["status"] == "error" and "found no notebook path" in t["ex5_test"]["message"], t["ex5_test"]


@pytest.mark.slow
def test_replacing_modules_in_the_kernel_changes_nothing(graded):
    """critical: one line replaced the path-policy helper in sys.modules; here the checks too."""
    r, t = graded["results"]["module_swap"], results_of(graded, "module_swap")
    assert r["score"] == 13, r
    assert t["ex3_test"]["status"] == "failed" and "+1 for the centre" in t["ex3_test"]["message"], t["ex3_test"]


@pytest.mark.slow
def test_torch_file_io_reaches_nothing(graded):
    """critical: torch.from_file / torch.save read and wrote anywhere."""
    r, t = graded["results"]["torch_files"], results_of(graded, "torch_files")
    assert r["score"] == 9, r
    assert t["ex1_test"]["status"] == "error" and "RuntimeError" in t["ex1_test"]["message"], t["ex1_test"]
    for gid in ("ex5_test", "ex6_test"):
        assert (
            t[gid]["status"] == "error"
            and "RuntimeError" in t[gid]["message"]
            and "Parent directory" in t[gid]["message"]
        ), t[gid]
    assert (graded["tmp"] / "outside" / "victim.txt").read_text() == "keep me"


@pytest.mark.slow
def test_signals_reach_only_the_sandbox(graded):
    """critical: pidfd_send_signal to the parent killed a worker (everyone in it got 0) or the grader."""
    r = graded["results"]["signals"]
    assert r["score"] == 16 and r["status"] == "graded", r
    died = [s for s, x in graded["results"].items() if x["status"] in ("grader error", "stopped")]
    assert died == [], f"no checking process may die (the one killed on purpose is checked again): {died}"


@pytest.mark.slow
def test_symbolic_links_in_the_submissions_folder_are_not_followed(graded):
    """critical: a symlink to the solutions notebook, or to another student's folder, was graded."""
    for student in ("linked_file", "linked_dir"):
        r = graded["results"][student]
        assert r["score"] == 0 and r["status"] == "unreadable", r
        assert "symbolic link" in " ".join(r["notes"]), r["notes"]
        assert "symbolic link" in feedback(graded, student)
    assert "linked_dir: is a symbolic link" in " ".join(load_json(graded["out"] / "grades.json")["warnings"])


@pytest.mark.slow
def test_tricks_inside_the_kernel_change_only_the_learners_own_values(graded):
    """high: forged results, frames read through __int__/__ne__/__array__, sys.settrace, a swapped
    module __class__, patched numpy/torch/builtins, a descriptor on Tensor.numpy, __array_interface__,
    a filtered stdout, mutated setup objects: the checks run elsewhere, so none earns a point."""
    r, t = graded["results"]["kernel_tricks"], results_of(graded, "kernel_tricks")
    assert r["score"] == 0, r
    # Tensor.numpy patched in the kernel spoils the learner's own tensors on the way out: refused, not trusted
    assert t["ex1_test"]["status"] == "error" and "cannot read" in t["ex1_test"]["message"], t["ex1_test"]
    assert all(x["status"] == "failed" for gid, x in t.items() if gid != "ex1_test"), t
    assert "expected" in t["ex2_test"]["message"] and "_Spy" in t["ex2_test"]["message"], t["ex2_test"]
    assert "+1 for the centre" in t["ex3_test"]["message"], t["ex3_test"]
    assert "_Pointer" in t["ex5_test"]["message"], t["ex5_test"]
    assert "99 is not right" in t["ex7_test"]["message"], t["ex7_test"]


@pytest.mark.slow
def test_writing_outside_the_sandbox_reaches_nothing(graded):
    r, t = graded["results"]["writes_outside"], results_of(graded, "writes_outside")
    assert r["score"] == 11, r
    outside = graded["tmp"] / "outside"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"], "nothing may be written or deleted outside"
    assert "FileNotFoundError" in t["ex1_test"]["message"] and "FileNotFoundError" in t["ex2_test"]["message"]
    assert "CalledProcessError" in t["ex7_test"]["message"], t["ex7_test"]
    assert t["ex6_test"]["status"] == "passed", "writing inside the sandbox's scratch folder is allowed"


@pytest.mark.parametrize(
    "student, status, words",
    [
        ("not_json", "unreadable", "not JSON"),
        ("empty", "unreadable", "empty"),
        ("no_cells", "wrong notebook", "none of its answer cells"),
        ("wrong_lesson", "wrong notebook", "none of its answer cells"),
        ("built_elsewhere", "wrong notebook", "01_one_hot_and_dot_products"),
        ("missing", "not submitted", "No 00_welcome.ipynb was submitted"),
    ],
)
@pytest.mark.slow
def test_unusable_submissions_score_zero_with_a_clear_message(graded, student, status, words):
    r = graded["results"][student]
    assert r["score"] == 0 and r["status"] == status, r
    assert words in " ".join(r["notes"]), r["notes"]
    assert words in feedback(graded, student)


@pytest.mark.slow
def test_duplicated_grade_ids_use_the_first_cell_and_say_so(graded):
    r = graded["results"]["duplicates"]
    assert r["score"] == 16, r
    assert any("share the id" in n and "ex3_answer" in n for n in r["notes"]), r["notes"]


@pytest.mark.slow
def test_renamed_answer_cells_count_as_not_submitted(graded):
    r, t = graded["results"]["renamed"], results_of(graded, "renamed")
    assert r["score"] == 13 and t["ex3_test"]["status"] == "not submitted", r
    assert any("ex3_answer" in n for n in r["notes"])


@pytest.mark.slow
def test_the_batch_runs_in_parallel_within_its_time_budget(graded):
    assert graded["seconds"] < 600, f"grading the crafted class took {graded['seconds']:.0f} s"
    for student in graded["results"]:
        assert graded["results"][student]["seconds"] < 150, (student, graded["results"][student]["seconds"])


# --- a hostile class: one submission can never stop, starve or zero the others -------------------------


@pytest.mark.slow
def test_an_interrupted_batch_keeps_what_it_finished_and_the_same_command_resumes(graded):
    """critical: interrupting a stuck batch lost every grade of the run. Results are committed as each
    submission finishes; the same command resumes, grading only what the interrupted run had not."""
    first, second = graded["first"], graded["second"]
    assert first["killed"] == ["SIGINT"] and first["returncode"] == 130, (first["killed"], first["returncode"])
    assert "Interrupted" in first["stdout"] and "run the same command again" in first["stdout"], first["stdout"]
    finished = {r["student_id"] for r in graded["first_book"]["results"] if r["status"] == "graded"}
    assert len(finished) >= 3, f"the interrupted run's graded results were not kept: {finished}"
    assert graded["first_book"]["runs"][-1]["finished_at"] is None
    assert f"resuming: {len(graded['first_book']['results'])} submission(s)" in second["stdout"], second["stdout"]
    regraded = {line.split()[0] for line in second["stdout"].splitlines() if line.rstrip().endswith("graded")}
    assert not finished & regraded, f"graded again after the resume: {finished & regraded}"
    for student in finished:
        assert graded["results"][student]["attempt"] == 1 and graded["results"][student]["attempts"] == 1


@pytest.mark.slow
def test_killing_one_checking_process_costs_nobody_a_point(graded):
    """critical: a dead worker broke the process pool; every submission still queued got 0 as a
    'grader error'. Each submission is checked in a process of its own, and a process that dies without a
    result (killed here, as a teacher kills a stuck one) is not a grade: the submission is checked again at
    the end of the batch and gets what its work earns; nobody else loses a point."""
    assert len(graded["second"]["killed"]) == 1, graded["second"]["killed"]
    r = graded["results"]["zz_killed"]
    assert r["status"] == "graded" and r["score"] == 16, r
    assert graded["results"]["zzz_honest"]["score"] == 16


@pytest.mark.slow
def test_keys_that_collide_are_refused_in_linear_time_and_a_range_is_charged_for_its_array(graded):
    """critical: a set of 300,000 ints (and a dict, a Counter of 15,000) whose hashes all collide
    took the grader's worker quadratic time in C, beyond any time limit. critical: range(4e7)
    crossed as four numbers and took the grader to 2.2 GB when checked. Now one cell each fails, at once."""
    r, t = graded["results"]["decode_bombs"], results_of(graded, "decode_bombs")
    assert r["score"] == 8 and r["status"] == "graded", r
    for gid, kind in (("ex2_test", "set"), ("ex5_test", "dict"), ("ex7_test", "Counter")):
        assert t[gid]["status"] == "error" and f"a {kind} whose keys collide" in t[gid]["message"], t[gid]
        assert "share one hash value" in t[gid]["message"], t[gid]
    assert t["ex6_test"]["status"] == "error", t["ex6_test"]
    assert "a range of 40,000,000 numbers is too large" in t["ex6_test"]["message"], t["ex6_test"]
    assert r["seconds"] < 60, r["seconds"]


@pytest.mark.slow
def test_memory_that_no_process_maps_is_refused_or_counted(graded):
    """critical: 48 memfd files of 63 MB held 3 GB outside every limit (RSS 311 MB), and scored 22/22.
    The seccomp filter refuses memfd_create and shmget; where it cannot be used, the sandbox's memory
    cgroup counts those pages."""
    from course_grader.budgets import detect
    from course_grader.sandbox import seccomp_usable

    t = results_of(graded, "memory_and_cpu")
    if seccomp_usable():
        assert t["ex3_test"]["status"] == "error" and "PermissionError" in t["ex3_test"]["message"], t["ex3_test"]
        assert "[Errno 1] shmget refused" in t["ex4_test"]["message"], t["ex4_test"]
        assert graded["results"]["memory_and_cpu"]["score"] == 10
    elif "memory" in detect():
        assert "more memory than the limit" in t["ex3_test"]["message"], t["ex3_test"]
    else:
        pytest.skip("neither the seccomp filter nor a memory cgroup works here: memfd memory is not counted")


@pytest.mark.slow
def test_sockets_and_the_kernels_attack_surface_are_refused(graded):
    """medium: TCP on the sandbox's loopback held 1,000 MB of socket buffers outside the kernel's v1 memory
    cgroup, never killed. low: io_uring_setup gave a descriptor. The seccomp filter refuses both (EPERM);
    that costs the submission its two exercises, nobody else anything."""
    from course_grader.sandbox import seccomp_usable

    if not seccomp_usable():
        pytest.skip("the seccomp filter cannot be used here")
    r, t = graded["results"]["kernel_surface"], results_of(graded, "kernel_surface")
    assert t["ex3_test"]["status"] == "error" and "PermissionError" in t["ex3_test"]["message"], t["ex3_test"]
    assert "[Errno 1] io_uring_setup refused" in t["ex4_test"]["message"], t["ex4_test"]
    assert r["status"] == "graded" and r["score"] == 10, r


@pytest.mark.slow
def test_reply_bombs_cost_one_cell_not_the_row(graded):
    """medium and low: a 60 MB header of empty lists (1.86 GB once parsed), a reply nested
    200,000 deep (RecursionError) and a 5,000-digit integer (ValueError) were the whole row's 'grader
    error'. They are refused before they are parsed or built, one cell each."""
    r, t = graded["results"]["listbomb"], results_of(graded, "listbomb")
    assert r["score"] == 15 and r["status"] == "graded", r
    assert "too many items" in t["ex7_test"]["message"], t["ex7_test"]
    r, t = graded["results"]["deep_reply"], results_of(graded, "deep_reply")
    assert r["score"] == 12 and r["status"] == "graded", r
    assert "RecursionError" in t["ex2_test"]["message"], t["ex2_test"]
    assert "ValueError" in t["ex5_test"]["message"] and "4300" in t["ex5_test"]["message"], t["ex5_test"]


@pytest.mark.slow
def test_busy_loops_share_one_cpu_and_forked_workers_are_not_counted_twice(graded):
    """medium: 60 busy loops in one sandbox slowed every neighbour 2-4x (each sandbox is now one CPU
    group where cgroups can be used, and the correct submissions beside it keep full marks); forked
    workers sharing copy-on-write pages were killed by an RSS watchdog that counted the pages once per
    process (memory is now the cgroup's, or PSS)."""
    r, t = graded["results"]["memory_and_cpu"], results_of(graded, "memory_and_cpu")
    assert t["ex1_test"]["status"] == "passed" and t["ex6_test"]["status"] == "passed", t
    assert not any("memory" in n for n in r["notes"]), r["notes"]


@pytest.mark.slow
def test_feedback_cannot_be_forged(graded):
    """medium: an exception's ``` closed the feedback's code block, and a forged heading and score,
    <script>, <img onerror> and <!-- rendered. Rendered as CommonMark, the feedback shows them as text."""
    markdown_it = pytest.importorskip("markdown_it")
    text = feedback(graded, "injector")
    html = markdown_it.MarkdownIt("commonmark").render(text)
    for tag in ("<script", "<img", "<!--", "<a "):
        assert tag not in html, f"{tag} rendered as HTML:\n{html}"
    headings = [tok for tok in markdown_it.MarkdownIt("commonmark").parse(text) if tok.type == "heading_open"]
    assert len(headings) == 4, f"only the feedback's own headings: {html}"
    assert html.count("<strong>") == 1 and "<strong>Score: 13 / 16</strong>" in html, html
    assert "alert(1)" in html and "alert(2)" in html and "alert(3)" in html, "the learner's words are shown, as text"
    assert graded["results"]["injector"]["score"] == 13


@pytest.mark.slow
def test_a_student_named_like_the_feedback_index(graded):
    """medium: a folder named index.csv crashed the feedback export for the whole class, and every
    later export of the gradebook."""
    r = graded["results"]["index.csv"]
    assert r["score"] == 16, r
    index = (graded["out"] / "feedback" / "index.csv").read_text(encoding="utf-8-sig")
    assert index.startswith("student_id,name,folder") and "index.csv,,index.csv-" in index, index
    assert not [p.name for p in graded["out"].iterdir() if p.name.startswith(".feedback")]


@pytest.mark.slow
def test_bad_top_level_metadata_is_an_unreadable_row(graded):
    """low (18): metadata: "x" gave a bare AttributeError 'grader error' row."""
    r = graded["results"]["bad_metadata"]
    assert r["status"] == "unreadable" and r["score"] == 0, r
    assert "metadata is a str, not a JSON object" in " ".join(r["notes"]), r["notes"]


@pytest.mark.slow
def test_ids_that_differ_in_case_or_unicode_form_are_one_student(graded):
    """low (19): Ada/ada and NFC/NFD "José" were two students each."""
    for other, kept in SAME_STUDENT.items():
        assert other not in graded["results"] and graded["results"][kept]["score"] == 16
        assert any(w.startswith(f"{other}: the same student as the folder {kept}") for w in graded["warnings"]), graded[
            "warnings"
        ]
        assert any(f"`{other}` is the same student id" in n for n in graded["results"][kept]["notes"])


@pytest.mark.slow
def test_a_hidden_folder_is_a_row_with_a_reason(graded):
    """low (19): a .hidden folder got no row, only a warning."""
    r = graded["results"][".dotted"]
    assert r["status"] == "unreadable" and r["score"] == 0, r
    assert "is hidden (its name starts with a dot)" in " ".join(r["notes"]), r["notes"]


@pytest.mark.slow
def test_what_a_killed_batch_left_is_removed_at_the_next_start(graded):
    """low (20): a killed worker or an interrupted batch left course-sandbox-* and course-grade-* folders
    (and now cgroups) behind; the next batch removes them."""
    assert graded["stale_groups_left"] == [], graded["stale_groups_left"]
    assert "removed what an interrupted batch left" in graded["first"]["stdout"], graded["first"]["stdout"]


# --- every exercise set of the course ------------------------------------------------------------------


ALL_SOLUTIONS = sorted(SOLUTIONS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """Each solution notebook submitted as is, and its built blank exercise under the name `course build`
    gives it (NN_name_exercises.ipynb), graded in one batch."""
    tmp = tmp_path_factory.mktemp("course")
    subs = tmp / "submissions"
    for path in ALL_SOLUTIONS:
        write(subs / "solution" / path.name, path.read_bytes())
        write(subs / "blank" / exercise_filename(path.stem), build_exercise(read_notebook(path), path.name))
    in_sandbox = sandbox_available()[0]
    if not in_sandbox and IN_CI:
        require_sandbox()  # fails: CI grades in the sandbox
    options = GradeOptions(jobs=2, limits=Limits(), sandbox=in_sandbox)
    results = grade_all(subs, SOLUTIONS, tmp / "out", options, progress=lambda line: None)
    return {(r.student_id, r.assignment): r for r in results}


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_SOLUTIONS, ids=[p.stem for p in ALL_SOLUTIONS])
def test_solution_scores_full_marks_and_blank_exercise_scores_zero(graded_course, path):
    solved = graded_course[("solution", path.stem)]
    assert solved.max_score > 0, f"{path.name} has no graded test cells"
    wrong = [(t.grade_id, t.status, t.message) for t in solved.tests if t.status != "passed"]
    assert solved.score == solved.max_score and not wrong, f"{path.name}: the solutions lose points: {wrong}"
    assert not solved.notes, f"{path.name}: {solved.notes}"
    blank = graded_course[("blank", path.stem)]
    attempted = [(t.grade_id, t.status, t.message) for t in blank.tests if t.status != "not attempted"]
    assert blank.score == 0 and not attempted, (
        f"{path.name}: the blank exercise is not 'not attempted' everywhere: {attempted}"
    )
    assert not blank.notes, f"{exercise_filename(path.stem)}: {blank.notes}"


def test_grade_explains_a_submissions_folder_without_student_folders(tmp_path, capsys):
    from course_lib import cli

    write(tmp_path / "flat" / "00_welcome.ipynb", exercise())
    assert cli.main(["grade", str(tmp_path / "flat"), "--out", str(tmp_path / "out")]) == 2
    assert "no student folders" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_a_broken_solution_notebook_stops_before_anyone_is_graded(tmp_path, capsys):
    from course_lib import cli

    broken = solution()
    answer = next(c for c in broken["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    del answer["metadata"]["nbgrader"]["grade_id"]
    write(tmp_path / "solutions" / "00_welcome.ipynb", broken)
    write(tmp_path / "subs" / "ada" / "00_welcome.ipynb", exercise())
    assert (
        cli.main(
            [
                "grade",
                str(tmp_path / "subs"),
                "--solutions",
                str(tmp_path / "solutions"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    out = capsys.readouterr().out
    assert "00_welcome.ipynb cannot be used for grading" in out and "without a grade_id" in out, out
    assert not (tmp_path / "out").exists()


def test_student_ids_that_differ_only_in_odd_characters_get_separate_feedback(tmp_path):
    assert safe_name("ada") == "ada"
    names = {safe_name(s) for s in ("a b", "a_b", "a/b", "a\\b", ".a")}
    assert len(names) == 5 and all(
        "/" not in n and "\\" not in n and " " not in n and not n.startswith(".") for n in names
    ), names
