"""A tiny training run shared by tests/test_training.py: in-process (one process) and under
``python -m torch.distributed.run --nproc_per_node=2 tests/ddp_worker.py OUT`` (two processes, gloo;
rank r writes its results to ``OUT.r``).

Both runs train the same model from the same seed on the same global batches, so their loss curves
must agree: DistributedDataParallel averages the two halves' gradients into the full batch's gradient.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn as nn

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from course_lib.training import TrainConfig, cross_entropy_loss, train  # noqa: E402

V, T, GLOBAL_BATCH = 11, 6, 8  # vocabulary, sequence length, global batch (4 per rank with 2 ranks)


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(V, 16), nn.Tanh(), nn.Linear(16, V))  # (B, T) -> (B, T, V)


def get_batch(split: str, generator: torch.Generator):
    """Random tokens and a fixed rule to learn: the target of token x is (3x + 1) mod V."""
    offset = 0 if split == "train" else 5
    x = (torch.randint(0, V, (GLOBAL_BATCH, T), generator=generator) + offset) % V  # (B, T)
    return x, (3 * x + 1) % V  # (B, T), (B, T)


def config() -> TrainConfig:
    return TrainConfig(
        max_iters=30,
        lr=1e-2,
        min_lr=1e-3,
        warmup_iters=5,
        weight_decay=0.1,
        grad_clip=1.0,
        eval_interval=10,
        eval_iters=2,
        label_smoothing=0.1,
        seed=3,
        progress=False,
    )


def run() -> dict:
    cfg = config()
    seen = []  # (rows, sum of the tokens) of every training batch this process computed a loss on

    def loss_fn(model, batch):
        if model.training:
            seen.append((batch[0].shape[0], int(batch[0].sum())))
        return cross_entropy_loss(model, batch, cfg)

    history = train(make_model(), get_batch, cfg, loss_fn=loss_fn)
    return {
        "seen": seen,
        "train_loss": history.train_loss,
        "val_loss": history.val_loss,
        "eval_iters": history.eval_iters,
        "world_size": history.world_size,
        "rank": history.rank,
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    result = run()
    Path(f"{sys.argv[1]}.{result['rank']}").write_text(json.dumps(result))
