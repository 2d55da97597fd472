"""Train lesson 12's modern decoder on character-level Tiny Shakespeare with lesson 11's recipe, and
save the checkpoint that lesson 12 generates from.

    python -m course_lib.train_modern_gpt                            # 2,000 iterations, minutes on a CPU
    python -m course_lib.train_modern_gpt --iters 200 --out /tmp/m.pt   # a quick try

Everything but the block is lesson 11's checkpoint's (`course_lib.train_gpt`): the same data and
90/10 split, batches of 12 windows of 64 characters, AdamW (lr 1e-3, betas (0.9, 0.99), weight decay
0.1), 100 warm-up iterations then cosine decay to 1e-4 at iteration 2,000, clipping at 1.0, seed
1337. The model is `models.ModernGPT` of the same width and depth (4 layers, 4 query heads, 128
dimensions, context 64) with 2 key/value heads (grouped-query attention), RMSNorm, SwiGLU (d_ff =
344), rotary positions, no biases and tied embeddings: about 0.73 million parameters against the GPT's
0.80 (no position table, half the key/value weights).

The checkpoint (``course_lib/checkpoints/modern_gpt_shakespeare.pt``, about 3 MB) holds what
`train_gpt.save_checkpoint` saves; `load_checkpoint` turns it back into a model.

    python -m course_lib.train_modern_gpt --variants     # lesson 12's table, about 8 CPU minutes

trains lesson 11's block and five variants, one change at a time (RMSNorm, SwiGLU, rotary, no biases,
tied embeddings), then QK-norm, grouped- and multi-query attention, and grouped- and multi-query
attention again with the feed-forward network widened to the same parameter count (as Llama 2's
ablation did), each for the same steps on the same batches from the same seed, and writes their
validation losses (at the training length, and at twice it) to
``course_lib/checkpoints/modern_variants.json``. The variants are `VariantGPT`, built from the
library's pieces; the modern ones equal `ModernGPT` (lesson 12 checks that they compute the same
function). Step times are not recorded: a table trained on a shared machine would only time the
machine (``bench/modern.py`` times the model against Hugging Face's Llama).

Importing this module runs nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention, sliding_window_mask
from course_lib.device import get_device, seed_everything
from course_lib.layers import FeedForward, LayerNorm, RMSNorm, SwiGLU, swiglu_hidden
from course_lib.models import ModernGPT, ModernGPTConfig
from course_lib.tokenizers import Vocabulary
from course_lib.train_gpt import (
    BATCH_SIZE,
    SEED,
    load_model,
    make_get_batch,
    recipe_train_config,
    save_checkpoint,
    shakespeare_data,
    split_loss,
)
from course_lib.training import TrainConfig, estimate_loss, train

CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "modern_gpt_shakespeare.pt"  # lesson 12 loads it
VARIANTS = Path(__file__).resolve().parent / "checkpoints" / "modern_variants.json"  # lesson 12's table


# ------------------------------------------------------------------------------------------------
# Lesson 12's table: lesson 11's block, changed one piece at a time
# ------------------------------------------------------------------------------------------------


@dataclass
class Variant:
    """Which of the modern changes a `VariantGPT` has (all False/True defaults: lesson 11's GPT)."""

    rms_norm: bool = False  # RMSNorm instead of LayerNorm
    swiglu: bool = False  # SwiGLU (d_ff = 8/3 C) instead of a 4C GELU MLP
    rotary: bool = False  # rotary q and k inside attention instead of a learned position table
    bias: bool = True  # biases in the Linear layers and the LayerNorms
    tied: bool = False  # the de-embedding shares the token embedding's matrix
    n_kv_head: int | None = None  # key/value heads (None: as many as query heads)
    qk_norm: bool = False  # RMSNorm on each head's queries and keys
    d_ff: int | None = None  # SwiGLU's hidden width (None: 8/3 C rounded up to a multiple of 8)


class VariantBlock(nn.Module):
    """A pre-norm block with `Variant`'s choices: norm1, self_attn, norm2, ff (the course's names)."""

    def __init__(self, C: int, n_head: int, v: Variant):
        super().__init__()
        self.norm1, self.norm2 = (_norm(C, v) for _ in range(2))
        self.self_attn = MultiHeadAttention(
            C,
            n_head,
            bias=v.bias,
            keep_weights=False,
            n_kv_heads=v.n_kv_head,
            rope_base=10000.0 if v.rotary else None,
            qk_norm=v.qk_norm,
        )
        d_ff = swiglu_hidden(C) if v.d_ff is None else v.d_ff
        self.ff = SwiGLU(C, d_ff) if v.swiglu else FeedForward(C, 4 * C, activation="gelu", bias=v.bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.norm1(x), mask=mask)  # (B, T, C)
        return x + self.ff(self.norm2(x))  # (B, T, C)


def _norm(C: int, v: Variant) -> nn.Module:
    return RMSNorm(C, eps=1e-5, fused=True) if v.rms_norm else LayerNorm(C, bias=v.bias, fused=True)


class VariantGPT(nn.Module):
    """Lesson 11's GPT with some of lesson 12's changes (`Variant`); GPT-2's initialisation.
    ``forward(idx, targets=None, window=None) -> (logits, loss)``; ``window`` limits how far back a
    token attends (None: the whole causal past)."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int, v: Variant):
        super().__init__()
        self.variant = v
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = None if v.rotary else nn.Embedding(block_size, n_embd)  # rotary: no table
        self.blocks = nn.ModuleList(VariantBlock(n_embd, n_head, v) for _ in range(n_layer))
        self.ln_f = _norm(n_embd, v)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        if v.tied:
            self.lm_head.weight = self.tok_emb.weight
        with torch.no_grad():  # GPT-2's initialisation, as `models.GPT` and `models.ModernGPT` do it
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.normal_(0.0, 0.02)
                    if getattr(m, "bias", None) is not None:
                        m.bias.zero_()
            for b in self.blocks:
                b.self_attn.w_o.weight.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))
                (b.ff.w2 if v.swiglu else b.ff.linear2).weight.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, window: int | None = None):
        B, T = idx.shape
        x = self.tok_emb(idx)  # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(T, device=idx.device))  # fails past block_size: no rows there
        mask = sliding_window_mask(T, window or T, idx.device)  # (T, T): causal, at most window back
        for block in self.blocks:
            x = block(x, mask)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


VARIANT_SHAPE = dict(block_size=64, n_layer=2, n_head=8, n_embd=64)  # small: the table trains in minutes
VARIANT_STEPS, VARIANT_BATCH, VARIANT_SEED = 600, 16, 0
_MODERN = dict(rms_norm=True, swiglu=True, rotary=True, bias=False, tied=True)  # every change of rows 2-6
# Fewer key/value heads save 2 x 2 layers x (8 - n_kv) x 8 x 64 weights in W_K and W_V (12,288 with 2 heads,
# 14,336 with 1); a SwiGLU 32 (or 37) wider adds 3 x 64 x 2 layers per unit: the parameters of row 6 again.
TABLE = [  # (name, variant): each row adds one change to the row above; then variants of the modern row
    ("lesson 11's block", Variant()),
    ("+ RMSNorm", Variant(rms_norm=True)),
    ("+ SwiGLU", Variant(rms_norm=True, swiglu=True)),
    ("+ rotary", Variant(rms_norm=True, swiglu=True, rotary=True)),
    ("- biases", Variant(rms_norm=True, swiglu=True, rotary=True, bias=False)),
    ("+ tied embeddings", Variant(**_MODERN)),
    ("+ QK-norm", Variant(**_MODERN, qk_norm=True)),
    ("GQA, 2 kv heads", Variant(**_MODERN, n_kv_head=2)),
    ("MQA, 1 kv head", Variant(**_MODERN, n_kv_head=1)),
    ("GQA, 2 kv, wider FFN", Variant(**_MODERN, n_kv_head=2, d_ff=176 + 32)),
    ("MQA, 1 kv, wider FFN", Variant(**_MODERN, n_kv_head=1, d_ff=176 + 37)),
]


def variant_train_config(steps: int = VARIANT_STEPS, progress: bool = False) -> TrainConfig:
    """The table's optimiser: lesson 11's small-run settings (a higher learning rate for a short run)."""
    return TrainConfig(
        max_iters=steps,
        lr=3e-3,
        min_lr=3e-4,
        warmup_iters=30,
        eval_interval=steps,
        eval_iters=40,
        seed=VARIANT_SEED,
        progress=progress,
    )


def train_variants(steps: int = VARIANT_STEPS, progress: bool = False) -> list[dict]:
    """Train every row of `TABLE` on the same batches from the same seed; return one dict per row."""
    vocab, train_ids, val_ids = shakespeare_data()
    T = VARIANT_SHAPE["block_size"]
    get_batch = make_get_batch(train_ids, val_ids, T, VARIANT_BATCH)
    long_batch = make_get_batch(train_ids, val_ids, 2 * T, VARIANT_BATCH)  # windows of twice the length
    config = variant_train_config(steps, progress)
    rows = []
    for name, v in TABLE:
        seed_everything(VARIANT_SEED)
        model = VariantGPT(len(vocab), **VARIANT_SHAPE, v=v)
        history = train(model, get_batch, config)
        row = dict(
            name=name,
            variant=asdict(v),
            parameters=sum(p.numel() for p in model.parameters()),
            val_loss=round(history.val_loss[-1], 4),
        )
        if v.rotary:  # twice the training length: the whole causal past, and a window of the training length
            for key, window in (("val_loss_2x", None), ("val_loss_2x_window", T)):
                loss_fn = lambda m, batch, w=window: m(batch[0], batch[1], window=w)[1]
                row[key] = round(estimate_loss(model, long_batch, config, splits=("val",), loss_fn=loss_fn)["val"], 4)
        rows.append(row)
        print(row, flush=True)
    return rows


def recipe_model_config(vocab_size: int = 65) -> ModernGPTConfig:
    """Lesson 11's recipe model with the modern block: 4 layers, 4 query heads, 2 key/value heads, 128 wide."""
    return ModernGPTConfig(vocab_size=vocab_size, block_size=64, n_layer=4, n_head=4, n_kv_head=2, n_embd=128)


def load_checkpoint(
    path: str | os.PathLike = CHECKPOINT, map_location: str | torch.device = "cpu"
) -> tuple[ModernGPT, Vocabulary, dict]:
    """The model (in eval mode, on ``map_location``), its character vocabulary and the checkpoint's
    other entries (config, losses, the training settings)."""
    return load_model(path, map_location, _build, "course_lib.train_modern_gpt")


def _build(config: dict) -> ModernGPT:
    return ModernGPT(ModernGPTConfig(**config))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.train_modern_gpt", description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=2000, help="training iterations (the recipe: 2000)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=CHECKPOINT, help=f"where to save it (default {CHECKPOINT})")
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--variants", action="store_true", help=f"train lesson 12's table instead, write {VARIANTS}")
    args = parser.parse_args(argv)
    if args.variants:
        rows = train_variants(progress=not args.no_progress)
        setup = dict(
            shape=VARIANT_SHAPE,
            steps=VARIANT_STEPS,
            batch_size=VARIANT_BATCH,
            seed=VARIANT_SEED,
            eval_iters=variant_train_config().eval_iters,
            torch_version=str(torch.__version__),
        )
        VARIANTS.write_text(json.dumps(dict(setup=setup, rows=rows), indent=1) + "\n")
        print(f"saved {VARIANTS}")
        return 0

    vocab, train_ids, val_ids = shakespeare_data()
    seed_everything(args.seed)  # the initial weights
    device = args.device if args.device is not None else get_device()
    model = ModernGPT(recipe_model_config(len(vocab))).to(device)
    config = recipe_train_config(args.iters, args.seed, 250, not args.no_progress)
    history = train(model, make_get_batch(train_ids, val_ids, model.config.block_size, BATCH_SIZE), config)
    for step, tr, va in zip(history.eval_iters, history.train_eval_loss, history.val_loss, strict=True):
        print(f"iter {step:5d}  train loss {tr:.4f}  val loss {va:.4f}")
    print(f"{history.seconds:.0f} s, {model.num_parameters():,} parameters")
    full = split_loss(model, val_ids)
    print(f"validation loss over the whole validation split: {full:.4f}")
    save_checkpoint(args.out, model, vocab, history, config, BATCH_SIZE, full)
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
