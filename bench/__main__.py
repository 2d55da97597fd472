"""The course's benchmark table: `python -m bench` (or `make bench`) prints it and writes bench/RESULTS.md.

Every figure that compares is a ratio against a reference measured in the same run: the two are
timed alternately (A, B, A, B, ...) and the medians compared, so a machine that is busy or slow
affects both alike. Absolute seconds appear only where a budget is stated in seconds (a lesson must
run in under 60 s on two cores).

Sections (pick some with --only, e.g. `python -m bench --only kernels gpt`):
  notebooks  every lesson and solution notebook, top to bottom, fresh kernel (CPU; with a GPU also
             COURSE_DEVICE=cuda); `--notebooks 13_` times only those whose path contains "13_"
  kernels    attention and multi-head attention, forward + backward, course vs torch built-ins
  gpt        lesson 11: training throughput vs the same model from torch built-ins, the nanoGPT
             recipe's validation loss, KV-cache speed-up (bench/gpt.py)
  modern     lesson 12: ModernGPT's training step vs transformers' Llama, decoding with 8, 2 and 1
             key/value heads, tiled vs naive attention memory at 4k-16k tokens (bench/modern.py)
  word2vec   lesson 04: words per second and analogy accuracy vs gensim (bench/word2vec.py)
  bpe        lesson 05: BPE training time and compression vs the `tokenizers` library (bench/bpe.py)
  grading    `course grade`: submissions per minute at --jobs 2 (lessons 06 and 09), CPU per submission, and
             what one submission that hits every limit costs a batch (bench/grading.py)
  marking    `course mark` at 3,000 students: one saved mark, the question's page (size, load time), against
             the class-wide exports every save used to rewrite (bench/marking.py)
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"
BUDGET_S = 60.0  # per lesson, on 2 cores
TARGET_S = 30.0
SECTIONS = ["notebooks", "kernels", "gpt", "modern", "word2vec", "bpe", "grading", "marking"]


# --- timing helpers ---------------------------------------------------------------------------------


def _sync(device) -> Callable[[], None]:
    import torch

    # On a GPU a call only queues the work: wait for it, or we would time the queueing.
    return torch.cuda.synchronize if getattr(device, "type", "cpu") == "cuda" else (lambda: None)


def compare(ours: Callable[[], object], reference: Callable[[], object], repeat: int = 15, device=None) -> dict:
    """Time `ours` and `reference` alternately; return both medians (s) and their ratio (ours / reference)."""
    sync = _sync(device)
    ours(), reference()  # warm-up (first calls allocate, compile kernels, fill caches)
    a, b = [], []
    for _ in range(repeat):
        for fn, out in ((ours, a), (reference, b)):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            out.append(time.perf_counter() - start)
    ma, mb = statistics.median(a), statistics.median(b)
    return {"course_s": ma, "reference_s": mb, "ratio": ma / mb}


# --- 1. notebooks ------------------------------------------------------------------------------------


def _children_cpu() -> float | None:
    """CPU seconds (user + system) of this process's children that have ended, such as a kernel
    after its shutdown: a figure that a busy machine inflates far less than wall-clock time."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _verdict(status: str, seconds: float, cpu: float | None) -> str:
    """A notebook's status against the budget. On a machine busier than its cores, wall-clock time says
    more about the other jobs than about the notebook: there a run whose own CPU time is within the
    budget is ok, and the status says so."""
    if status != "ok" or seconds <= BUDGET_S:
        return status
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if cpu is not None and cpu <= BUDGET_S and load > (os.cpu_count() or 1):
        return f"ok by CPU time (wall time on a busy machine, load {load:.1f})"
    return "over budget"


def notebook_times(paths: list[Path], device: str = "cpu") -> list[dict]:
    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    rows = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        km = AsyncKernelManager(kernel_name="python3")
        if os.name == "posix":  # Unix sockets: no port to race for
            km.transport, km.ip = "ipc", os.path.join(tempfile.mkdtemp(prefix="bench-k-"), "k")
        client = NotebookClient(
            nb, km=km, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        )
        client.owns_km = True  # shut the kernel down after the run
        start, cpu_start = time.perf_counter(), _children_cpu()
        try:
            client.execute(env={**os.environ, "COURSE_DEVICE": device})
            status = "ok"
        except Exception as err:  # report and go on: the table should show every notebook
            status = f"error: {type(err).__name__}"
        seconds = time.perf_counter() - start
        cpu = _children_cpu()  # the kernel has been shut down and waited for: its CPU time is counted
        if os.name == "posix":
            shutil.rmtree(os.path.dirname(km.ip), ignore_errors=True)
        rows.append(
            {
                "notebook": str(path.relative_to(REPO)),
                "device": device,
                "seconds": round(seconds, 1),
                "cpu s": round(cpu - cpu_start, 1) if cpu is not None else "",
                "budget": f"{BUDGET_S:.0f} s (target {TARGET_S:.0f} s)",
                "status": _verdict(status, seconds, cpu - cpu_start if cpu is not None else None),
            }
        )
        print(f"  {rows[-1]['notebook']:<48} {device:<5} {seconds:6.1f} s  {rows[-1]['status']}", flush=True)
    return rows


def section_notebooks(args) -> list[dict]:
    import torch

    paths = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "solutions").glob("*.ipynb"))
    chosen = getattr(args, "notebooks", None)
    if chosen:  # time these; the other notebooks keep their rows of the last table
        paths = [p for p in paths if any(text in p.relative_to(REPO).as_posix() for text in chosen)]
    rows = notebook_times(paths, "cpu")
    if chosen and RESULTS.is_file():
        fresh = {r["notebook"] for r in rows}
        kept = [
            r
            for r in _sections(RESULTS.read_text(encoding="utf-8")).get("notebooks", [])
            if r.get("device") == "cpu" and r.get("notebook") not in fresh | {"all of the above"}
        ]
        rows = sorted(kept + rows, key=lambda r: (not r["notebook"].startswith("notebooks/"), r["notebook"]))
    rows.append(
        {
            "notebook": "all of the above",
            "device": "cpu",
            "seconds": round(sum(float(r["seconds"]) for r in rows), 1),
            "budget": "",
            "status": f"{sum(not r['status'].startswith('ok') for r in rows)} over budget or failing",
        }
    )
    if torch.cuda.is_available():
        gpu = notebook_times(paths, "cuda")
        rows += gpu + [
            {
                "notebook": "all of the above",
                "device": "cuda",
                "seconds": round(sum(r["seconds"] for r in gpu), 1),
                "budget": "",
                "status": f"{sum(not r['status'].startswith('ok') for r in gpu)} failing",
            }
        ]
    return rows


# --- 2. attention kernels ----------------------------------------------------------------------------


def section_kernels(args) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from course_lib.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
    from course_lib.device import get_device, seed_everything

    seed_everything(0)
    device = get_device()
    rows = []
    for B, H, T, D in [(8, 4, 64, 32), (8, 4, 128, 32), (4, 8, 256, 64)]:
        q, k, v = (torch.randn(B, H, T, D, device=device, requires_grad=True) for _ in range(3))
        mask = causal_mask(T, device=device)
        # compare() calls both before the loop moves on, so the loop's variables are the ones meant.
        r = compare(
            lambda: scaled_dot_product_attention(q, k, v, mask=mask)[0].sum().backward(),  # noqa: B023
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward(),  # noqa: B023
            args.repeat,
            device,
        )
        rows.append(
            {
                "what": f"attention.scaled_dot_product_attention B={B} heads={H} T={T} d={D} causal",
                "reference": "F.scaled_dot_product_attention",
                **_fmt_times(r),
            }
        )
    for B, T, C, H in [(8, 64, 128, 4), (8, 128, 128, 4), (4, 256, 256, 8)]:
        x = torch.randn(B, T, C, device=device, requires_grad=True)
        mask = causal_mask(T, device=device)
        ref = torch.nn.MultiheadAttention(C, H, batch_first=True).to(device)
        for keep in (True, False):
            mha = MultiHeadAttention(C, H, keep_weights=keep).to(device)
            r = compare(
                lambda: mha(x, mask=mask).sum().backward(),  # noqa: B023 (called at once, as above)
                lambda: ref(x, x, x, attn_mask=~mask, need_weights=False)[0].sum().backward(),  # noqa: B023
                args.repeat,
                device,
            )
            path = "keeps weights (lessons 06-10)" if keep else "keep_weights=False, fused (lesson 11's GPT)"
            rows.append(
                {
                    "what": f"MultiHeadAttention B={B} T={T} d_model={C} heads={H}, {path}",
                    "reference": "nn.MultiheadAttention",
                    **_fmt_times(r),
                }
            )
    for row in rows:
        print(f"  {row['ratio']:>7}  {row['what']}", flush=True)
    return rows


def _fmt_times(r: dict) -> dict:
    return {
        "course": f"{r['course_s'] * 1e3:.2f} ms",
        "reference time": f"{r['reference_s'] * 1e3:.2f} ms",
        "ratio": f"{r['ratio']:.2f}x",
    }


# --- 3-5. the lesson and grading benchmarks live beside this file ------------------------------------


def section_module(name: str) -> Callable:
    def run(args) -> list[dict]:
        module = importlib.import_module(f"bench.{name}")
        rows = [row if isinstance(row, dict) else dict(zip(("what", "value", "details"), row)) for row in module.run()]
        for row in rows:
            print("  " + "  ".join(f"{k}: {v}" for k, v in row.items()), flush=True)
        return rows

    return run


def section_grading(args) -> list[dict]:
    """`course grade` at --jobs 2: 40 submissions of lesson 06's set (20 solved, 20 blank) in and out of the
    sandbox, lesson 09's (the heaviest), and lesson 06's with one submission that hits every limit."""
    from bench import grading

    rows = []
    for what, value, details in grading.run(copies=20, jobs=2):
        rows.append({"what": what, "value": value, "details": details})
        print(f"  {value:8.2f}  {what} ({details})", flush=True)
    return rows


# --- the table -----------------------------------------------------------------------------------------


def machine() -> str:
    import torch

    cores = os.cpu_count()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    load = f"; load average {os.getloadavg()[0]:.1f} when the table was written" if hasattr(os, "getloadavg") else ""
    return f"{cpu}, {cores} cores available, {gpu}; Python {platform.python_version()}, torch {torch.__version__}{load}"


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def markdown(results: dict[str, list[dict]]) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Written by `make bench` on {time.strftime('%Y-%m-%d')}.",
        "",
        f"Machine: {machine()}.",
        "",
        "Ratios are the course's time over the reference's, both measured in the same run, alternately "
        "(median of several repeats): above 1 the course is slower. Notebook times are wall-clock seconds "
        "against the 60 s budget per lesson on two cores; `cpu s` is the kernel's own CPU time.",
        "",
    ]
    for section, rows in results.items():
        lines += [f"## {section}", ""]
        if not rows:
            lines += ["(no rows)", ""]
            continue
        keys = list(dict.fromkeys(k for row in rows for k in row))
        lines.append("| " + " | ".join(keys) + " |")
        lines.append("|" + "---|" * len(keys))
        for row in rows:
            lines.append("| " + " | ".join(_cell(row.get(k, "")).replace("|", "\\|") for k in keys) + " |")
        lines.append("")
    return "\n".join(lines)


def _sections(text: str) -> dict[str, list[dict]]:
    """The sections of an earlier RESULTS.md, read back into rows (so that --only can refresh some)."""
    out: dict[str, list[dict]] = {}
    name, keys = None, None
    for line in text.splitlines():
        if line.startswith("## "):
            name, keys = line[3:].strip(), None
            out[name] = []
        elif name and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")]
            if keys is None:
                keys = cells
            else:
                out[name].append(dict(zip(keys, cells)))
    return {k: v for k, v in out.items() if k in SECTIONS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument(
        "--repeat", type=int, default=15, help="timed repetitions per comparison (medians are compared)"
    )
    parser.add_argument(
        "--notebooks",
        nargs="+",
        metavar="TEXT",
        help="time only the notebooks whose path contains one of these (e.g. 13_); the others keep the rows "
        "of the last table",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="print the table but do not write bench/RESULTS.md (with --only, the other sections are kept)",
    )
    args = parser.parse_args(argv)
    shared = REPO.parent / "shared" / "data"  # the course's reference data, where a checkout has it beside it
    if (shared / "tinyshakespeare.txt").is_file():
        os.environ.setdefault("COURSE_DATA_DIR", str(shared))
    runners = {
        "notebooks": section_notebooks,
        "kernels": section_kernels,
        "gpt": section_module("gpt"),
        "modern": section_module("modern"),
        "word2vec": section_module("word2vec"),
        "bpe": section_module("bpe"),
        "grading": section_grading,
        "marking": section_module("marking"),
    }
    results, failed = {}, []
    for name in args.only or SECTIONS:
        print(f"[{name}]", flush=True)
        try:
            results[name] = runners[name](args)
        except Exception as err:  # one broken section must not hide the others
            failed.append(name)
            results[name] = [{"error": f"{type(err).__name__}: {err}"}]
            print(f"  failed: {type(err).__name__}: {err}", flush=True)
    if not args.no_write:
        if args.only and RESULTS.is_file():  # refresh these sections, keep the others as they were
            results = {**_sections(RESULTS.read_text(encoding="utf-8")), **results}
            results = {name: results[name] for name in SECTIONS if name in results}
        RESULTS.write_text(markdown(results) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS.relative_to(REPO)}")
    over = [
        r
        for r in results.get("notebooks", [])
        if not str(r.get("status") or "ok").startswith("ok") and r.get("notebook") != "all of the above"
    ]
    return 1 if failed or over else 0


if __name__ == "__main__":
    sys.exit(main())
