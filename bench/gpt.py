"""Lesson 11: the course's GPT against the same architecture built from torch's own layers, the
recipe's validation loss against nanoGPT's (scored alike), and where the KV cache helps.

1. Training throughput at nanoGPT's CPU recipe (4 layers, 4 heads, 128 dimensions, block 64, batch 12):
   forward, backward and an AdamW step of `course_lib.models.GPT` (fused attention, and the
   from-scratch attention that keeps its weights) against a model assembled from `nn.Embedding`,
   `nn.TransformerEncoderLayer` (pre-norm, GELU, causal mask), `nn.LayerNorm` and `nn.Linear`, with
   the same weights. Timed alternately in this process; medians compared. Target: the course's GPT
   at least as fast (throughput ratio >= 1.0).
2. The recipe's validation loss, compared like with like. nanoGPT's README gives 1.88, one estimate
   from 20 random batches of its own run; such an estimate has a standard deviation of about 0.015
   (measured here on 2,400 random validation windows). So both programs are scored the same way: on
   every character of the validation split (`train_gpt.split_loss`), over three seeds each. The
   committed checkpoint (seed 1337) is scored here; the other seeds' values are
   `train_gpt.RECIPE_WHOLE_SPLIT_LOSS` (nanoGPT's measured once with its own train.py, as nanoGPT is
   not a dependency), and `python -m bench.gpt --seeds 1 2` trains and scores the course's again
   (minutes each). Target: the two means differ by less than two standard errors. Needs Tiny
   Shakespeare (skipped with the reason otherwise).
3. The KV cache: `generate` with and without `use_cache`, greedy, on the committed checkpoint
   (block_size 64: the cache serves only the first 57 new tokens after a 7-token prompt, then the
   window slides and is recomputed) and on a model of the same width whose block_size covers the
   prompt and every new token. Target: at least 2x at 256 new tokens on the long block.

Everything runs on one CPU thread: on a shared two-core machine, two threads spin-waiting for each other
made single timings scatter by an order of magnitude, and the ratios are what this section reports.

    python -c "from bench import gpt; print(gpt.run())"
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

BATCH, BLOCK = 12, 64
NEW_TOKENS = (64, 128, 256, 512)


def _sync(device):
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def training_throughput(repeat: int = 7, steps: int = 5) -> list[dict]:
    from course_lib.device import get_device, seed_everything
    from course_lib.models import GPT, BuiltinGPT, copy_builtin_gpt_weights
    from course_lib.train_gpt import recipe_model_config

    device = get_device()
    sync = _sync(device)
    seed_everything(0)
    config = recipe_model_config()
    ref = BuiltinGPT(config).to(device)
    models = {"builtin": ref}
    for keep in (False, True):
        ours = GPT(replace(config, keep_weights=keep)).to(device)
        copy_builtin_gpt_weights(ours, ref)
        models["fused" if not keep else "from scratch"] = ours
    g = torch.Generator().manual_seed(0)
    x = torch.randint(config.vocab_size, (BATCH, BLOCK), generator=g).to(device)
    y = torch.randint(config.vocab_size, (BATCH, BLOCK), generator=g).to(device)
    with torch.no_grad():  # same weights, same function: the comparison is fair
        want = ref(x)
        for name in ("fused", "from scratch"):
            got = models[name](x)[0]
            assert torch.allclose(got, want, atol=1e-4), f"the course's GPT ({name}) and the built-in model disagree"

    def step_fn(model):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.99), weight_decay=0.1)

        def step():
            out = model(x)
            logits = out[0] if isinstance(out, tuple) else out
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        return step

    steppers = {name: step_fn(m) for name, m in models.items()}
    for step in steppers.values():  # warm-up
        step()
    times: dict[str, list[float]] = {name: [] for name in steppers}
    for _ in range(repeat):
        for name, step in steppers.items():  # alternate, so that a busy moment hits all of them
            sync()
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync()
            times[name].append((time.perf_counter() - start) / steps)
    builtin = statistics.median(times["builtin"])
    rows = []
    for name in ("fused", "from scratch"):
        course = statistics.median(times[name])
        rows.append(
            {
                "what": (
                    f"GPT training step (nanoGPT CPU recipe, batch {BATCH} x {BLOCK}, {device.type}), attention {name}"
                ),
                "reference": "nn.TransformerEncoderLayer stack, causal mask, same weights",
                "course": f"{course * 1e3:.1f} ms",
                "reference time": f"{builtin * 1e3:.1f} ms",
                "ratio": f"{course / builtin:.2f}x",
                "target": (
                    f"throughput >= 1.0x the built-in: {builtin / course:.2f}x, "
                    f"{'met' if course <= builtin else 'not met'}"
                ),
            }
        )
    return rows


def _mean_sd(values) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values)


def recipe_loss(seeds: tuple[int, ...] = ()) -> list[dict]:
    from course_lib.train_gpt import (
        NANOGPT_VAL_LOSS,
        RECIPE_WHOLE_SPLIT_LOSS,
        load_checkpoint,
        make_get_batch,
        shakespeare_data,
        split_loss,
        train_recipe,
    )
    from course_lib.training import TrainConfig, estimate_loss

    nanogpt = RECIPE_WHOLE_SPLIT_LOSS["nanoGPT's train.py"]
    course = dict(RECIPE_WHOLE_SPLIT_LOSS["python -m course_lib.train_gpt"])
    model, _, info = load_checkpoint()
    try:
        _, train_ids, val_ids = shakespeare_data()
    except RuntimeError as err:
        return [{"what": "nanoGPT CPU recipe: validation loss", "target": f"not scored: {err}"}]
    block = model.config.block_size
    again = estimate_loss(
        model, make_get_batch(train_ids, val_ids, block), TrainConfig(eval_iters=20, seed=info["seed"]), splits=("val",)
    )["val"]
    full = split_loss(model, val_ids)
    assert abs(full - course[info["seed"]]) < 1e-3, f"the checkpoint scores {full:.4f}, not {course[info['seed']]}"
    course[info["seed"]] = full
    # How much one 20-batch x 12-window estimate moves: the spread of 2,400 random windows' losses / sqrt(240).
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(len(val_ids) - block, (2400,), generator=g)
    rows = torch.stack([val_ids[s : s + block + 1] for s in starts.tolist()])  # (2400, block + 1)
    with torch.no_grad():
        per_window = torch.cat(
            [
                F.cross_entropy(model(r[:, :-1])[0].transpose(1, 2), r[:, 1:], reduction="none").mean(1)
                for r in rows.split(200)
            ]
        )
    sd_estimate = per_window.std().item() / 240**0.5
    for seed in seeds:
        trained, _, _, _ = train_recipe(2000, seed=seed, progress=False, device="cpu")
        course[seed] = split_loss(trained, val_ids)
    n_mean, n_sd = _mean_sd(list(nanogpt.values()))
    c_mean, c_sd = _mean_sd([course[s] for s in nanogpt])
    se = (n_sd**2 / len(nanogpt) + c_sd**2 / len(nanogpt)) ** 0.5
    retrained = f"; seeds {', '.join(map(str, seeds))} retrained here" if seeds else ""
    return [
        {
            "what": f"nanoGPT CPU recipe, the committed checkpoint (seed {info['seed']}): validation loss (nats/char)",
            "reference": f"nanoGPT's README: {NANOGPT_VAL_LOSS} (one 20-batch estimate of its own run)",
            "course": f"{again:.4f} (its 20 batches), {full:.4f} (whole validation split)",
            "target": f"a 20-batch estimate has sd {sd_estimate:.4f} (2,400 windows): compare whole splits, over seeds",
        },
        {
            "what": "nanoGPT CPU recipe, whole validation split, seeds " + ", ".join(map(str, nanogpt)),
            "reference": f"nanoGPT's train.py: {n_mean:.4f} +- {n_sd:.4f} ("
            + ", ".join(f"{v:.4f}" for v in nanogpt.values())
            + ")",
            "course": f"{c_mean:.4f} +- {c_sd:.4f} ("
            + ", ".join(f"{course[s]:.4f}" for s in nanogpt)
            + f"{retrained})",
            "ratio": f"{c_mean / n_mean:.4f}x",
            "target": f"difference {c_mean - n_mean:+.4f} within 2 standard errors ({2 * se:.4f}): "
            f"{'met' if abs(c_mean - n_mean) < 2 * se else 'not met'}",
        },
    ]


def _time_generate(model, prompt, n, repeat, sync) -> dict[bool, float]:
    from course_lib.generation import generate

    times: dict[bool, list[float]] = {True: [], False: []}
    outputs = {}
    for _ in range(repeat):
        for use_cache in (False, True):  # alternate, so that a busy moment hits both
            sync()
            start = time.perf_counter()
            outputs[use_cache] = generate(model, prompt, n, temperature=0, use_cache=use_cache)
            sync()
            times[use_cache].append(time.perf_counter() - start)
    assert torch.equal(outputs[True], outputs[False]), f"the cached generation differs at {n} new tokens"
    return {k: statistics.median(v) for k, v in times.items()}


def kv_cache_speedup(repeat: int = 3, prompt_len: int = 16) -> list[dict]:
    from course_lib.device import get_device, seed_everything
    from course_lib.models import GPT, GPTConfig
    from course_lib.train_gpt import load_checkpoint

    device = get_device()
    sync = _sync(device)
    rows = []
    checkpoint, vocab, _ = load_checkpoint(map_location=device)
    prompt = torch.tensor([vocab.encode("ROMEO:\n")], device=device)  # 7 tokens: the cache serves 57 new ones
    for n in (57, 256, 512):
        t = _time_generate(checkpoint, prompt, n, repeat, sync)
        rows.append(
            {
                "what": f"generate {n} new tokens after 7, greedy, the committed checkpoint (block 64, {device.type})",
                "reference": "the same without a cache",
                "course": f"{t[True] * 1e3:.0f} ms with the cache",
                "reference time": f"{t[False] * 1e3:.0f} ms",
                "ratio": f"{t[True] / t[False]:.2f}x",
                "target": f"speed-up {t[False] / t[True]:.2f}x "
                + (
                    "(every step within block_size: cached throughout)"
                    if n <= 57
                    else "(cached for the first 57 steps only; then the window slides and is recomputed)"
                ),
            }
        )
    seed_everything(0)
    config = GPTConfig(vocab_size=65, block_size=prompt_len + max(NEW_TOKENS), n_layer=4, n_head=4, n_embd=128)
    model = GPT(config).to(device).eval()
    prompt = torch.randint(65, (1, prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    for n in NEW_TOKENS:
        t = _time_generate(model, prompt, n, repeat, sync)
        uncached, cached = t[False], t[True]
        row = {
            "what": f"generate {n} new tokens after {prompt_len}, greedy (4 layers, 128 dims, "
            f"block {config.block_size}, {device.type})",
            "reference": "the same without a cache",
            "course": f"{cached * 1e3:.0f} ms with the cache",
            "reference time": f"{uncached * 1e3:.0f} ms",
            "ratio": f"{cached / uncached:.2f}x",
            "target": f"speed-up {uncached / cached:.1f}x",
        }
        if n == 256:
            row["target"] += f" (target >= 2x at 256: {'met' if uncached >= 2 * cached else 'not met'})"
        rows.append(row)
    return rows


def run(seeds: tuple[int, ...] = ()) -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = training_throughput()
        rows += recipe_loss(seeds)
        rows += kv_cache_speedup()
    finally:
        torch.set_num_threads(threads)
    return rows


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m bench.gpt", description="lesson 11's benchmarks (printed, not written)"
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="*",
        default=[],
        help="also train the recipe with these seeds and score them on the whole validation split",
    )
    args = parser.parse_args()
    for row in run(tuple(args.seeds)):
        print("  ".join(f"{k}: {v}" for k, v in row.items()))
