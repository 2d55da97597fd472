"""course_lib.training: the learning-rate schedule, the optimizer groups, the loss, the loop itself
(seeded, evaluation, clipping, progress bar, modes) and DistributedDataParallel on two CPU processes."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

import ddp_worker
from course_lib.training import (
    History,
    TrainConfig,
    cross_entropy_loss,
    estimate_loss,
    lr_at,
    make_optimizer,
    train,
)

REPO = Path(__file__).resolve().parents[1]


# --- the schedule ---------------------------------------------------------------------------------


def test_lr_at_key_iterations():
    cfg = TrainConfig(max_iters=1000, lr=1e-3, min_lr=1e-4, warmup_iters=100, lr_decay_iters=2000)
    assert lr_at(0, cfg) == pytest.approx(1e-5)  # lr / warmup_iters
    assert lr_at(49, cfg) == pytest.approx(5e-4)  # half way up
    assert lr_at(99, cfg) == pytest.approx(1e-3)  # last warm-up step reaches the peak
    assert lr_at(100, cfg) == pytest.approx(1e-3)  # the cosine starts at the peak
    assert lr_at(1050, cfg) == pytest.approx(5.5e-4)  # half way down: (lr + min_lr) / 2
    # a quarter of the way: min + (lr - min) * (1 + cos(pi/4)) / 2
    assert lr_at(575, cfg) == pytest.approx(1e-4 + 9e-4 * (1 + math.cos(math.pi / 4)) / 2)
    assert lr_at(2000, cfg) == pytest.approx(1e-4)
    assert lr_at(5000, cfg) == pytest.approx(1e-4)


def test_lr_at_is_monotone_and_defaults_to_max_iters():
    cfg = TrainConfig(max_iters=200, lr=3e-3, min_lr=3e-4, warmup_iters=20)
    values = [lr_at(i, cfg) for i in range(250)]
    assert all(a < b for a, b in zip(values[:19], values[1:20])), "warm-up must rise strictly"
    assert all(a >= b for a, b in zip(values[20:], values[21:])), "decay must never rise"
    assert values[200] == pytest.approx(3e-4) and values[110] == pytest.approx(1.65e-3)


def test_lr_at_without_warmup_starts_at_peak():
    cfg = TrainConfig(max_iters=10, lr=1.0, min_lr=0.0, warmup_iters=0)
    assert lr_at(0, cfg) == 1.0
    assert lr_at(5, cfg) == pytest.approx(0.5)


def test_lr_at_rejects_bad_iteration():
    with pytest.raises(ValueError, match="non-negative int"):
        lr_at(-1, TrainConfig())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_iters": 0}, "max_iters must be a positive int, got 0"),
        ({"lr": 1e-3, "min_lr": 1e-2}, "0 <= min_lr <= lr"),
        ({"label_smoothing": 1.0}, r"label_smoothing must be in \[0, 1\)"),
        ({"grad_clip": 0.0}, "grad_clip must be positive or None"),
        ({"warmup_iters": 50, "lr_decay_iters": 10}, "must not come before the end of the warm-up"),
        ({"eval_iters": 0}, "eval_iters must be a positive int"),
    ],
)
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


# --- optimizer and loss --------------------------------------------------------------------------


def test_weight_decay_only_on_two_dimensional_weights():
    model = nn.Sequential(nn.Embedding(5, 4), nn.LayerNorm(4), nn.Linear(4, 3))
    opt = make_optimizer(model, TrainConfig(weight_decay=0.3))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.3 and no_decay["weight_decay"] == 0.0
    assert sorted(tuple(p.shape) for p in decay["params"]) == [(3, 4), (5, 4)]
    assert sorted(tuple(p.shape) for p in no_decay["params"]) == [(3,), (4,), (4,)]


def test_default_loss_matches_cross_entropy_with_smoothing_and_ignore_index():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(7, 5), nn.Linear(5, 7))
    x = torch.randint(0, 7, (3, 4))
    y = torch.randint(0, 7, (3, 4))
    y[0, 2:] = -100
    cfg = TrainConfig(label_smoothing=0.2)
    logits = model(x)
    expected = F.cross_entropy(logits.reshape(-1, 7), y.reshape(-1), label_smoothing=0.2, ignore_index=-100)
    assert_close(cross_entropy_loss(model, (x, y), cfg), expected)
    # and a tuple output (GPT's (logits, loss)) uses its first element
    tupled = lambda idx: (model(idx), None)  # noqa: E731
    assert_close(cross_entropy_loss(tupled, (x, y), cfg), expected)


def test_default_loss_says_when_shapes_disagree():
    model = nn.Linear(3, 4)
    with pytest.raises(ValueError, match=r"logits must be shaped \(\*targets.shape, V\).*\(2, 4\).*\(2, 5\)"):
        cross_entropy_loss(model, (torch.randn(2, 3), torch.zeros(2, 5, dtype=torch.long)), TrainConfig())


# --- the loop -----------------------------------------------------------------------------------


def _small_config(**overrides) -> TrainConfig:
    base = dict(max_iters=40, lr=1e-2, min_lr=1e-3, warmup_iters=4, eval_interval=10, eval_iters=2, progress=False)
    return TrainConfig(**{**base, **overrides})


def test_train_learns_and_records_history():
    model = ddp_worker.make_model()
    history = train(model, ddp_worker.get_batch, _small_config())
    assert isinstance(history, History)
    assert history.iters == list(range(40)) and len(history.train_loss) == len(history.lr) == 40
    assert history.eval_iters == [0, 10, 20, 30, 40]
    assert len(history.val_loss) == len(history.train_eval_loss) == 5
    assert history.val_loss[0] > 2.0, f"an untrained model should be near ln(11) = 2.4, got {history.val_loss[0]}"
    assert history.val_loss[-1] < 0.5 * history.val_loss[0], f"val loss did not halve: {history.val_loss}"
    assert history.lr == [lr_at(i, _small_config()) for i in range(40)]
    assert len(history.grad_norm) == 40
    assert history.as_dict() == {"train": history.train_eval_loss, "val": history.val_loss}
    assert (history.world_size, history.rank) == (1, 0)


def test_train_is_seeded():
    a = train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=15))
    b = train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=15))
    c = train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=15, seed=1))
    assert a.train_loss == b.train_loss and a.val_loss == b.val_loss
    assert a.train_loss != c.train_loss, "a different seed must draw different batches"


def test_evaluation_sees_the_same_batches_every_time():
    model = ddp_worker.make_model()
    cfg = _small_config()
    first, second = estimate_loss(model, ddp_worker.get_batch, cfg), estimate_loss(model, ddp_worker.get_batch, cfg)
    assert first == second and set(first) == {"train", "val"}


def test_no_evaluation_when_interval_is_zero():
    history = train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=5, eval_interval=0))
    assert history.eval_iters == [] and history.as_dict() == {"train": history.train_loss}


def test_gradient_is_clipped_before_the_step(monkeypatch):
    norms = []
    original_step = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    history = train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=5, grad_clip=0.05))
    assert max(history.grad_norm) > 0.05, "the test needs gradients larger than the clip to mean anything"
    assert max(norms) <= 0.05 * (1 + 1e-4), f"gradient norms after clipping: {norms}"
    norms.clear()
    unclipped = train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=5, grad_clip=None))
    assert unclipped.grad_norm == [] and max(norms) > 0.05


def test_label_smoothing_and_ignore_index_reach_the_loss():
    def get_batch(split, generator):
        x, y = ddp_worker.get_batch(split, generator)
        y = y.clone()
        y[:, -2:] = 7  # a pad label the loss must skip
        return x, y

    seen = {}
    plain = _small_config(max_iters=1, eval_interval=0, lr=1e-9, min_lr=0.0)
    for smoothing, ignore in [(0.0, -100), (0.3, -100), (0.3, 7)]:
        cfg = _small_config(max_iters=1, eval_interval=0, lr=1e-9, min_lr=0.0, label_smoothing=smoothing, ignore_index=ignore)
        seen[(smoothing, ignore)] = train(ddp_worker.make_model(), get_batch, cfg).train_loss[0]
        x, y = get_batch("train", torch.Generator().manual_seed(plain.seed))
        with torch.no_grad():
            logits = ddp_worker.make_model()(x)
        ref = F.cross_entropy(logits.reshape(-1, 11), y.reshape(-1), label_smoothing=smoothing, ignore_index=ignore)
        assert seen[(smoothing, ignore)] == pytest.approx(ref.item(), rel=1e-6)
    assert len(set(seen.values())) == 3


def test_model_mode_is_restored():
    model = nn.Sequential(nn.Embedding(11, 8), nn.Dropout(0.5), nn.Linear(8, 11))
    model.eval()
    train(model, ddp_worker.get_batch, _small_config(max_iters=2))
    assert not model.training
    model.train()
    train(model, ddp_worker.get_batch, _small_config(max_iters=2))
    assert model.training


def test_progress_bar_shows_unless_disabled(monkeypatch, capsys):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=3, progress=True))
    assert "training" in capsys.readouterr().err
    monkeypatch.setenv("TQDM_DISABLE", "1")
    train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=3, progress=True))
    assert "training" not in capsys.readouterr().err
    monkeypatch.delenv("TQDM_DISABLE")
    train(ddp_worker.make_model(), ddp_worker.get_batch, _small_config(max_iters=3, progress=False))
    assert "training" not in capsys.readouterr().err


def test_bad_get_batch_is_explained():
    with pytest.raises(TypeError, match=r"must return a tuple of tensors with the targets last.*got Tensor"):
        train(ddp_worker.make_model(), lambda split, g: torch.zeros(2, 3, dtype=torch.long), _small_config())
    with pytest.raises(TypeError, match="must return tensors, got a list"):
        train(ddp_worker.make_model(), lambda split, g: ([1, 2], torch.zeros(2)), _small_config())
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        train(ddp_worker.make_model(), ddp_worker.get_batch, {"max_iters": 3})


def test_batch_must_split_evenly_over_processes(monkeypatch):
    from course_lib import training

    x = torch.zeros(5, 3)
    with pytest.raises(ValueError, match=r"global batch size \(5\) must be divisible by the number of processes \(2\)"):
        training._shard((x, x), 0, 2)
    first, second = training._shard((torch.arange(8), torch.arange(8) * 10), 1, 2)
    assert first.tolist() == [4, 5, 6, 7] and second.tolist() == [40, 50, 60, 70]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_trains_on_cuda():
    model = ddp_worker.make_model().cuda()
    history = train(model, ddp_worker.get_batch, _small_config(max_iters=20))
    assert next(model.parameters()).device.type == "cuda"
    assert history.val_loss[-1] < history.val_loss[0]


def test_config_device_moves_the_model():
    model = ddp_worker.make_model()
    train(model, ddp_worker.get_batch, _small_config(max_iters=2, device="cpu"))
    assert next(model.parameters()).device.type == "cpu"


# --- several processes ------------------------------------------------------------------------------


def test_two_processes_match_one(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no torch.distributed with the gloo backend")
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2",
        str(Path(ddp_worker.__file__)), str(out),
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    ddp, other = (json.loads((tmp_path / f"ddp.{rank}").read_text()) for rank in (0, 1))
    single = ddp_worker.run()
    assert ddp["world_size"] == 2 and (ddp["rank"], other["rank"]) == (0, 1) and single["world_size"] == 1
    # each rank computed its loss on its own half of every global batch
    assert {rows for rows, _ in ddp["seen"] + other["seen"]} == {ddp_worker.GLOBAL_BATCH // 2}
    assert [a + b for (_, a), (_, b) in zip(ddp["seen"], other["seen"])] == [s for _, s in single["seen"]]
    assert [a for _, a in ddp["seen"]] != [b for _, b in other["seen"]], "the two ranks saw the same data"
    assert ddp["train_loss"] == other["train_loss"], "both ranks must log the loss averaged over ranks"
    assert ddp["eval_iters"] == single["eval_iters"] == [0, 10, 20, 30]
    assert single["train_loss"][-1] < 0.6 * single["train_loss"][0], "the run must learn for the match to mean anything"
    assert_close(torch.tensor(ddp["train_loss"]), torch.tensor(single["train_loss"]), rtol=1e-4, atol=1e-5)
    assert_close(torch.tensor(ddp["val_loss"]), torch.tensor(single["val_loss"]), rtol=1e-4, atol=1e-5)


def test_gradient_accumulation_takes_the_step_of_the_whole_batch():
    """grad_accum_steps=4 over batches of 2 rows takes the same optimizer steps as batches of the 8 rows."""
    big = [ddp_worker.get_batch("train", torch.Generator().manual_seed(i)) for i in range(6)]  # (8, T) each

    def whole(split, generator):
        return big.pop(0) if split == "train" else ddp_worker.get_batch(split, generator)

    quarters = [tuple(t[i : i + 2] for t in batch) for batch in big for i in range(0, 8, 2)]  # (2, T) each

    def micro(split, generator):
        return quarters.pop(0) if split == "train" else ddp_worker.get_batch(split, generator)

    cfg = dict(max_iters=6, eval_interval=0, progress=False)
    a, b = ddp_worker.make_model().double(), ddp_worker.make_model().double()
    ha = train(a, whole, _small_config(**cfg))
    hb = train(b, micro, _small_config(**cfg, grad_accum_steps=4))
    assert not big and not quarters, "each run must have used exactly its batches"
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert_close(pa, pb, rtol=1e-10, atol=1e-12, msg=lambda m, name=name: f"{name}: {m}")
    assert_close(torch.tensor(hb.train_loss), torch.tensor(ha.train_loss), rtol=1e-10, atol=1e-12)
    assert len(hb.train_loss) == len(hb.grad_norm) == 6, "one logged loss and one clipped norm per optimizer step"
    # Adam hardly notices a gradient 4x too large, so compare the gradients themselves (their norms before clipping)
    assert_close(torch.tensor(hb.grad_norm), torch.tensor(ha.grad_norm), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="grad_accum_steps must be a positive int"):
        TrainConfig(grad_accum_steps=0)
