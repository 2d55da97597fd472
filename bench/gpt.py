"""Lesson 11: the course's GPT against the same architecture built from torch's own layers, the
recipe's validation loss against nanoGPT's, and the speed-up of the KV cache.

1. Training throughput at nanoGPT's CPU recipe (4 layers, 4 heads, 128 dimensions, block 64, batch 12):
   forward, backward and an AdamW step of `course_lib.models.GPT` (fused attention, and the
   from-scratch attention that keeps its weights) against a model assembled from `nn.Embedding`,
   `nn.TransformerEncoderLayer` (pre-norm, GELU, causal mask), `nn.LayerNorm` and `nn.Linear`, with
   the same weights. Timed alternately in this process; medians compared. Target: the course's GPT
   at least as fast (throughput ratio >= 1.0).
2. The recipe's validation loss: the committed checkpoint (`python -m course_lib.train_gpt`), scored
   again here on its 20 validation batches and on the whole validation split, against nanoGPT's
   published 1.88. Needs Tiny Shakespeare (skipped with the reason otherwise).
3. The KV cache: `generate` with and without `use_cache`, greedy, for 64 to 512 new tokens, on a
   model of the recipe's width whose block_size covers the prompt and every new token. Target: at
   least 2x at 256 new tokens.

    python -c "from bench import gpt; print(gpt.run())"
"""
from __future__ import annotations

import statistics
import time

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
        ours = GPT(config).to(device)
        copy_builtin_gpt_weights(ours, ref)
        for block in ours.blocks:
            block.self_attn.keep_weights = keep
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
        rows.append({
            "what": f"GPT training step (nanoGPT CPU recipe, batch {BATCH} x {BLOCK}, {device.type}), attention {name}",
            "reference": "nn.TransformerEncoderLayer stack, causal mask, same weights",
            "course": f"{course * 1e3:.1f} ms",
            "reference time": f"{builtin * 1e3:.1f} ms",
            "ratio": f"{course / builtin:.2f}x",
            "target": f"throughput >= 1.0x the built-in: {builtin / course:.2f}x, {'met' if course <= builtin else 'not met'}",
        })
    return rows


def recipe_loss() -> list[dict]:
    from course_lib.train_gpt import NANOGPT_VAL_LOSS, load_checkpoint, make_get_batch, shakespeare_data, split_loss
    from course_lib.training import TrainConfig, estimate_loss

    model, _, info = load_checkpoint()
    row = {"what": "nanoGPT CPU recipe, 2,000 iterations: validation loss (nats/char)",
           "reference": f"nanoGPT's published {NANOGPT_VAL_LOSS}",
           "course": f"{info['val_loss']:.3f} (20 batches, at training time)"}
    try:
        _, train_ids, val_ids = shakespeare_data()
    except RuntimeError as err:
        row["target"] = f"not re-scored: {err}"
        return [row]
    again = estimate_loss(model, make_get_batch(train_ids, val_ids, model.config.block_size), TrainConfig(eval_iters=20, seed=info["seed"]),
                          splits=("val",))["val"]
    full = split_loss(model, val_ids)
    row["course"] = f"{again:.3f} (20 batches), {full:.3f} (whole validation split)"
    row["target"] = f"<= {NANOGPT_VAL_LOSS}: {'met' if again <= NANOGPT_VAL_LOSS else f'not met (+{again - NANOGPT_VAL_LOSS:.3f})'}"
    return [row]


def kv_cache_speedup(repeat: int = 3, prompt_len: int = 16) -> list[dict]:
    from course_lib.device import get_device, seed_everything
    from course_lib.generation import generate
    from course_lib.models import GPT, GPTConfig

    device = get_device()
    sync = _sync(device)
    seed_everything(0)
    config = GPTConfig(vocab_size=65, block_size=prompt_len + max(NEW_TOKENS), n_layer=4, n_head=4, n_embd=128)
    model = GPT(config).to(device).eval()
    prompt = torch.randint(65, (1, prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    rows = []
    for n in NEW_TOKENS:
        times = {True: [], False: []}
        outputs = {}
        for _ in range(repeat):
            for use_cache in (False, True):
                sync()
                start = time.perf_counter()
                outputs[use_cache] = generate(model, prompt, n, temperature=0, use_cache=use_cache)
                sync()
                times[use_cache].append(time.perf_counter() - start)
        assert torch.equal(outputs[True], outputs[False]), f"the cached generation differs at {n} new tokens"
        uncached, cached = statistics.median(times[False]), statistics.median(times[True])
        row = {
            "what": f"generate {n} new tokens after {prompt_len}, greedy (4 layers, 128 dims, block {config.block_size}, {device.type})",
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


def run() -> list[dict]:
    rows = training_throughput()
    rows += recipe_loss()
    rows += kv_cache_speedup()
    return rows


if __name__ == "__main__":
    for row in run():
        print("  ".join(f"{k}: {v}" for k, v in row.items()))
