"""Run every benchmark: `python -m bench [--notebooks-only | --kernels-only] [--repeat N]`.

1. Notebook run times: each lesson and solution notebook executed top to bottom in a fresh kernel,
   on the CPU, against the course's budget of 60 s per lesson on two cores.
2. Kernel ratios: the course's from-scratch modules against the PyTorch built-ins they are
   tested against, forward + backward, timed in the same process (ratio > 1 means the course's
   version is slower). The course favours readability; these ratios say what that costs.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 60.0


def notebook_times(paths: list[Path]) -> list[tuple[str, float, str]]:
    import tempfile

    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    rows = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        km = AsyncKernelManager(kernel_name="python3")
        if os.name == "posix":  # Unix sockets: no port to race for, and no plain-TCP warning from the kernel
            km.transport, km.ip = "ipc", os.path.join(tempfile.mkdtemp(prefix="bench-k-"), "k")
        client = NotebookClient(nb, km=km, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
        client.owns_km = True  # shut the kernel down after the run, as for a manager nbclient made itself
        start = time.perf_counter()
        try:
            client.execute()
            status = "ok"
        except Exception as err:  # report and go on: a benchmark should show every notebook
            status = f"error: {type(err).__name__}"
        rows.append((str(path.relative_to(REPO)), time.perf_counter() - start, status))
        if os.name == "posix":
            shutil.rmtree(os.path.dirname(km.ip), ignore_errors=True)
        print(f"  {rows[-1][0]:<48} {rows[-1][1]:6.1f} s  {status}", flush=True)
    return rows


def _time(fn, repeat: int, device) -> float:
    import torch

    # On a GPU the call only queues the work: wait for it, or we would time the queueing.
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def kernel_ratios(repeat: int) -> list[tuple[str, float]]:
    import torch
    import torch.nn.functional as F

    from course_lib.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
    from course_lib.device import get_device, seed_everything

    seed_everything(0)
    device = get_device()
    rows = []

    B, H, T, D = 8, 4, 128, 32
    q, k, v = (torch.randn(B, H, T, D, device=device, requires_grad=True) for _ in range(3))
    mask = causal_mask(T, device=device)

    def ours():
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
        out.sum().backward()

    def theirs():
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()

    rows.append((f"scaled_dot_product_attention (B={B}, heads={H}, T={T}, d={D}, causal) vs F.scaled_dot_product_attention",
                 _time(ours, repeat, device) / _time(theirs, repeat, device)))

    d_model, n_heads = 128, 4
    mha = MultiHeadAttention(d_model, n_heads).to(device)
    ref = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    x = torch.randn(B, T, d_model, device=device, requires_grad=True)
    block = ~mask  # nn.MultiheadAttention's convention is the opposite: True = blocked

    def ours_mha():
        mha(x, mask=mask).sum().backward()

    def theirs_mha():
        ref(x, x, x, attn_mask=block, need_weights=False)[0].sum().backward()

    rows.append((f"MultiHeadAttention (B={B}, T={T}, d_model={d_model}, heads={n_heads}, causal) vs nn.MultiheadAttention",
                 _time(ours_mha, repeat, device) / _time(theirs_mha, repeat, device)))
    for name, ratio in rows:
        print(f"  {ratio:5.2f}x  {name}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks-only", action="store_true")
    parser.add_argument("--kernels-only", action="store_true")
    parser.add_argument("--repeat", type=int, default=20, help="timed repetitions per kernel (best is kept)")
    args = parser.parse_args(argv)
    over = []
    if not args.kernels_only:
        print(f"Notebook run times (budget {BUDGET_S:.0f} s each, kernel start included):")
        paths = sorted((REPO / "notebooks").glob("*.ipynb")) + sorted((REPO / "solutions").glob("*.ipynb"))
        rows = notebook_times(paths)
        over = [r for r in rows if r[1] > BUDGET_S or r[2] != "ok"]
        total = sum(r[1] for r in rows)
        print(f"  total {total:.0f} s for {len(rows)} notebooks; over budget or failing: {len(over)}")
    if not args.notebooks_only:
        print("Course implementation time / PyTorch built-in time (forward + backward, best of "
              f"{args.repeat}, same process):")
        kernel_ratios(args.repeat)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
