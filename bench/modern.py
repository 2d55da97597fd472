"""Lesson 12: the modern decoder against the same model from Hugging Face's layers, decoding with
shared key/value heads, and tiled attention's memory.

1. Training throughput at lesson 12's checkpoint shape (4 layers, 4 query heads, 2 key/value heads,
   128 dimensions, block 64, batch 12): forward, backward and an AdamW step of
   `course_lib.models.ModernGPT` against `transformers`' `LlamaForCausalLM` built from a
   `LlamaConfig` (SDPA attention, nothing downloaded) with the same weights (q/k rows permuted,
   `models.copy_from_llama`). Timed alternately in this process; medians compared. Target: ModernGPT
   at least as fast (throughput ratio >= 1.0).
2. Decoding with the cache for n_kv_head = n_head, n_head/4 and 1 (8 query heads, 4 layers, 256
   dimensions, a 512-token prompt, 128 new tokens, greedy; untrained weights: neither the memory nor
   the time depends on them): tokens per second and the cache's size, against n_kv_head = n_head.
3. Peak memory of causal attention, one head of 64, forward, at T = 4k, 8k and 16k: the naive
   softmax(QKᵀ)V against `attention.tiled_attention` (blocks of 128), counted as the largest total
   of live tensors created during the call (a `TorchDispatchMode`, the lesson's `PeakMemory`). The
   times are taken separately, outside the meter (which slows every operation it watches): the
   best of 3 runs, in CPU seconds of this process.
4. Causal against full tiled attention at T = 1,024 and 4,096 (8 heads of 64, blocks of 128): the
   matrix-product FLOPs counted by `torch.utils.flop_counter.FlopCounterMode` and the median CPU
   time of 5 runs; causal skips the key blocks in a query block's future (target: FLOPs <= 0.6x).
5. bfloat16 inputs: the largest error of `tiled_attention` and of `F.scaled_dot_product_attention`
   against a float64 reference (target: tiled within 1.25x of SDPA's, as its float32 running
   statistics should give).

Everything runs on one CPU thread, as in `bench.gpt`.

    python -m bench --only modern
"""

from __future__ import annotations

import math
import statistics
import time
import weakref

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

BATCH, BLOCK = 12, 64


def training_throughput(repeat: int = 7, steps: int = 5) -> list[dict]:
    from transformers import LlamaConfig, LlamaForCausalLM

    from course_lib.device import seed_everything
    from course_lib.models import ModernGPT, copy_from_llama
    from course_lib.train_modern_gpt import recipe_model_config

    seed_everything(0)
    c = recipe_model_config()
    ours = ModernGPT(c)
    config = LlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.n_embd,
        intermediate_size=ours.blocks[0].ff.d_ff,
        num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head,
        num_key_value_heads=c.n_kv_head,
        rms_norm_eps=c.norm_eps,
        max_position_embeddings=c.block_size,
        tie_word_embeddings=True,
        attention_bias=False,
        mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
    )
    config._attn_implementation = "sdpa"
    ref = LlamaForCausalLM(config)
    copy_from_llama(ours, ref)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(c.vocab_size, (BATCH, BLOCK), generator=g)
    y = torch.randint(c.vocab_size, (BATCH, BLOCK), generator=g)
    with torch.no_grad():
        assert torch.allclose(ours(x)[0], ref(input_ids=x).logits, atol=1e-4), "ModernGPT and Llama disagree"

    def step_fn(model, logits_of):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.99), weight_decay=0.1)

        def step():
            logits = logits_of(model)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        return step

    steppers = {"ours": step_fn(ours, lambda m: m(x)[0]), "llama": step_fn(ref, lambda m: m(input_ids=x).logits)}
    for step in steppers.values():  # warm-up
        step()
    times: dict[str, list[float]] = {name: [] for name in steppers}
    for _ in range(repeat):
        for name, step in steppers.items():  # alternate, so that a busy moment hits both
            start = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append((time.perf_counter() - start) / steps)
    course, llama = statistics.median(times["ours"]), statistics.median(times["llama"])
    return [
        {
            "what": f"ModernGPT training step (lesson 12's checkpoint shape, batch {BATCH} x {BLOCK}, cpu)",
            "reference": "transformers LlamaForCausalLM (sdpa), same weights",
            "course": f"{course * 1e3:.1f} ms",
            "reference time": f"{llama * 1e3:.1f} ms",
            "ratio": f"{course / llama:.2f}x",
            "target": (
                f"throughput >= 1.0x the reference: {llama / course:.2f}x, {'met' if course <= llama else 'not met'}"
            ),
        }
    ]


def decoding(prompt_len: int = 512, new: int = 128, repeat: int = 3) -> list[dict]:
    from course_lib.device import seed_everything
    from course_lib.generation import generate
    from course_lib.models import ModernGPT, ModernGPTConfig

    results = {}
    for n_kv in (8, 2, 1):
        seed_everything(0)
        model = ModernGPT(
            ModernGPTConfig(vocab_size=65, block_size=1024, n_layer=4, n_head=8, n_kv_head=n_kv, n_embd=256)
        ).eval()
        prompt = torch.randint(65, (1, prompt_len), generator=torch.Generator().manual_seed(0))
        generate(model, prompt, 4, temperature=0, use_cache=True)  # warm-up
        best = []
        for _ in range(repeat):
            start = time.perf_counter()
            generate(model, prompt, new, temperature=0, use_cache=True)
            best.append(time.perf_counter() - start)
        cache = model.new_kv_cache()
        with torch.no_grad():
            model(prompt, kv_cache=cache)
        results[n_kv] = (new / statistics.median(best), sum(layer.nbytes() for layer in cache))
    base_speed, base_bytes = results[8]
    rows = []
    for n_kv, (speed, nbytes) in results.items():
        rows.append(
            {
                "what": (
                    f"decode {new} tokens after {prompt_len}, greedy, cached, n_kv_head={n_kv} of 8 (4 layers, 256)"
                ),
                "reference": "n_kv_head = n_head = 8",
                "course": f"{speed:.0f} tokens/s, cache {nbytes / 2**20:.2f} MiB",
                "reference time": f"{base_speed:.0f} tokens/s, cache {base_bytes / 2**20:.2f} MiB",
                "ratio": f"{base_speed / speed:.2f}x",
                "target": f"cache {base_bytes / nbytes:.0f}x smaller; speed {speed / base_speed:.2f}x",
            }
        )
    return rows


class PeakMemory(TorchDispatchMode):
    """The largest total size of the tensors alive at once among those created inside the block."""

    def __init__(self, *inputs):
        super().__init__()
        self.known = {id(t.untyped_storage()) for t in inputs}
        self.live: dict[int, int] = {}
        self.now = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            storage = t.untyped_storage() if isinstance(t, torch.Tensor) else None
            key = id(storage)
            if storage is not None and key not in self.known and key not in self.live:
                self.live[key] = storage.nbytes()
                self.now += storage.nbytes()
                self.peak = max(self.peak, self.now)
                weakref.finalize(storage, self._free, key)
        return out

    def _free(self, key):
        self.now -= self.live.pop(key)


def tiled_memory(lengths=(4096, 8192, 16384), d: int = 64, block: int = 128) -> list[dict]:
    from course_lib.attention import causal_mask, tiled_attention

    def naive(q, k, v):
        T = q.shape[-2]
        s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~causal_mask(T), float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    rows = []
    for T in lengths:
        q, k, v = (torch.randn(1, T, d, generator=torch.Generator().manual_seed(i)) for i in range(3))
        peaks, secs = {}, {}
        for name, fn in (
            ("naive", naive),
            ("tiled", lambda q, k, v: tiled_attention(q, k, v, causal=True, block_size=block)),
        ):
            with torch.no_grad(), PeakMemory(q, k, v) as meter:
                out = fn(q, k, v)
            peaks[name] = meter.peak
            del out
            with torch.no_grad():  # timed outside the meter: best of 3, CPU seconds
                secs[name] = min(_cpu_seconds(lambda f=fn, a=(q, k, v): f(*a)) for _ in range(3))
        rows.append(
            {
                "what": f"causal attention forward, one head of {d}, T = {T:,} (cpu)",
                "reference": "naive softmax(QKᵀ)V",
                "course": f"tiled (blocks of {block}): peak {peaks['tiled'] / 2**20:.0f} MiB, {secs['tiled']:.2f} s",
                "reference time": f"peak {peaks['naive'] / 2**20:.0f} MiB, {secs['naive']:.2f} s",
                "ratio": f"{peaks['tiled'] / peaks['naive']:.3f}x memory",
                "target": f"memory {peaks['naive'] / peaks['tiled']:.0f}x smaller",
            }
        )
    return rows


def _cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def causal_skipping(lengths=(1024, 4096), heads: int = 8, d: int = 64, block: int = 128, repeat: int = 5) -> list[dict]:
    from torch.utils.flop_counter import FlopCounterMode

    from course_lib.attention import tiled_attention

    rows = []
    for T in lengths:
        g = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(1, heads, T, d, generator=g) for _ in range(3))
        flops, secs = {}, {}
        for causal in (False, True):
            fn = lambda c=causal, a=(q, k, v): tiled_attention(*a, causal=c, block_size=block)  # noqa: E731
            with torch.no_grad():
                with FlopCounterMode(display=False) as counter:
                    fn()
                flops[causal] = counter.get_total_flops()
                fn()  # warm-up
                secs[causal] = statistics.median(_cpu_seconds(fn) for _ in range(repeat))
        rows.append(
            {
                "what": f"tiled attention, causal vs full, {heads} heads of {d}, T = {T:,}, blocks of {block} (cpu)",
                "reference": "the same call with causal=False",
                "course": f"causal: {flops[True] / 1e9:.2f} GFLOP, {secs[True] * 1e3:.0f} ms",
                "reference time": f"full: {flops[False] / 1e9:.2f} GFLOP, {secs[False] * 1e3:.0f} ms",
                "ratio": f"{secs[True] / secs[False]:.2f}x time",
                "target": (
                    f"FLOPs {flops[True] / flops[False]:.3f}x of full (<= 0.6x: "
                    f"{'met' if flops[True] <= 0.6 * flops[False] else 'not met'})"
                ),
            }
        )
    return rows


def low_precision_error(T: int = 1024, heads: int = 4, d: int = 64, scale: float = 8.0) -> list[dict]:
    from course_lib.attention import tiled_attention

    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, heads, T, d, generator=g) for _ in range(3))
        q = q * scale  # large scores: where low-precision running sums go wrong
        low = [t.to(dtype) for t in (q, k, v)]
        exact = F.scaled_dot_product_attention(*[t.double() for t in low], is_causal=True)  # same rounded inputs
        with torch.no_grad():
            ours = (tiled_attention(*low, causal=True, block_size=128).double() - exact).abs().max().item()
            sdpa = (F.scaled_dot_product_attention(*low, is_causal=True).double() - exact).abs().max().item()
        rows.append(
            {
                "what": (
                    f"causal attention in {str(dtype)[6:]}, {heads} heads of {d}, T = {T:,}, scores x{scale:g} (cpu)"
                ),
                "reference": (
                    "F.scaled_dot_product_attention in the same dtype; both against float64 on the same inputs"
                ),
                "course": f"tiled: max error {ours:.2e}",
                "reference time": f"sdpa: max error {sdpa:.2e}",
                "ratio": f"{ours / sdpa:.2f}x error",
                "target": f"<= 1.25x of SDPA's error: {'met' if ours <= 1.25 * sdpa else 'not met'}",
            }
        )
    return rows


def run() -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return training_throughput() + decoding() + tiled_memory() + causal_skipping() + low_precision_error()
    finally:
        torch.set_num_threads(threads)
