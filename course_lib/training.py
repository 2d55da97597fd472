"""One training loop for the course: lessons 04, 10 and 11 all train with `train`.

What it does, in order, every iteration:

1. sets the learning rate from the schedule `lr_at` (linear warm-up, then cosine decay to `min_lr`);
2. asks ``get_batch("train", generator)`` for a batch (a tuple of tensors, the targets last) and
   moves it to the model's device;
3. computes the loss (by default cross-entropy of ``model(*batch[:-1])`` against ``batch[-1]``, with
   optional label smoothing) and backpropagates; with ``grad_accum_steps = k`` it does this for k
   batches, each loss divided by k, so the gradients that add up are those of one batch k times as
   large (gradient accumulation: a large batch in the memory of a small one); then clips the gradient
   norm and takes one AdamW step;
4. every ``eval_interval`` iterations estimates the train and validation losses on ``eval_iters``
   batches each (the same batches every time, so the curve moves only because the model does).

Everything it measures goes into a `History`, ready for plotting (``viz.loss_curve(history.as_dict())``).
A tqdm progress bar shows the loss as it trains; it is off when ``TQDM_DISABLE`` is set (the tests
set it) or ``progress=False``.

Several processes (DistributedDataParallel). Started by ``torchrun --nproc_per_node=N script.py``,
the same call runs on N processes without a change: `train` joins the process group that torchrun
describes in its environment variables (gloo on the CPU, nccl on CUDA), wraps the model in
``DistributedDataParallel``, and gives rank r the r-th contiguous slice of every global batch. DDP
averages the gradients over the ranks during ``backward``, so each step is the step that one
process would take on the whole batch, and the logged losses are averaged over the ranks too. With
gradient accumulation the averaging waits for the last micro-batch of a step (``no_sync`` around the
others), so the gradients cross the wire once per step, not once per micro-batch. Only rank 0 shows
the progress bar.

Importing this module runs nothing.
"""
from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib._validate import check_int
from course_lib.device import seed_everything

__all__ = ["TrainConfig", "History", "lr_at", "train", "estimate_loss", "cross_entropy_loss", "make_optimizer",
           "process_group"]

Batch = Sequence[torch.Tensor]
GetBatch = Callable[[str, torch.Generator], Batch]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


@dataclass
class TrainConfig:
    max_iters: int = 1000  # optimizer steps to take
    lr: float = 1e-3  # peak learning rate, reached at the end of the warm-up
    min_lr: float = 1e-4  # learning rate at the end of the cosine decay (and after it)
    warmup_iters: int = 100  # iterations of linear warm-up from lr / warmup_iters to lr (0 = none)
    lr_decay_iters: int | None = None  # iteration at which the cosine reaches min_lr (None = max_iters)
    weight_decay: float = 0.1  # AdamW decay, applied to 2-D weights (matrices, embeddings) only
    betas: tuple[float, float] = (0.9, 0.99)  # AdamW's moving-average rates for gradient and its square
    grad_clip: float | None = 1.0  # rescale the whole gradient to at most this norm (None = no clipping)
    grad_accum_steps: int = 1  # batches whose gradients add up before each optimizer step (1 = no accumulation)
    eval_interval: int = 100  # evaluate every this many iterations, and at the end (0 = never)
    eval_iters: int = 20  # batches per split in each evaluation
    label_smoothing: float = 0.0  # passed to F.cross_entropy by the default loss
    ignore_index: int = -100  # target value that gets no loss (padding)
    seed: int = 0  # seeds torch/numpy/random and the batch generators
    progress: bool = True  # show a tqdm progress bar (never when TQDM_DISABLE is set, or off rank 0)
    device: str | torch.device | None = None  # where to train (None = where the model's parameters are)

    def __post_init__(self):
        for name, minimum in [("max_iters", 1), ("warmup_iters", 0), ("eval_interval", 0), ("eval_iters", 1),
                              ("grad_accum_steps", 1), ("seed", 0)]:
            check_int(f"TrainConfig.{name}", getattr(self, name), minimum)
        if self.lr_decay_iters is not None:
            check_int("TrainConfig.lr_decay_iters", self.lr_decay_iters)
            if self.lr_decay_iters < self.warmup_iters:
                raise ValueError(
                    f"TrainConfig.lr_decay_iters ({self.lr_decay_iters}) must not come before the end of "
                    f"the warm-up (warmup_iters={self.warmup_iters})"
                )
        if not (self.lr > 0 and 0 <= self.min_lr <= self.lr):
            raise ValueError(f"TrainConfig needs lr > 0 and 0 <= min_lr <= lr, got lr={self.lr}, min_lr={self.min_lr}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"TrainConfig.label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"TrainConfig.grad_clip must be positive or None, got {self.grad_clip}")
        if self.weight_decay < 0:
            raise ValueError(f"TrainConfig.weight_decay must be >= 0, got {self.weight_decay}")


@dataclass
class History:
    """What `train` measured. Lists that belong together have the same length."""

    iters: list[int] = field(default_factory=list)  # iteration number of each optimizer step
    train_loss: list[float] = field(default_factory=list)  # loss of that step's batch(es) (averaged over ranks)
    lr: list[float] = field(default_factory=list)  # learning rate used for that step
    grad_norm: list[float] = field(default_factory=list)  # gradient norm before clipping (only when clipping)
    eval_iters: list[int] = field(default_factory=list)  # steps taken before each evaluation (0 = before training)
    train_eval_loss: list[float] = field(default_factory=list)  # mean loss over eval batches of "train"
    val_loss: list[float] = field(default_factory=list)  # mean loss over eval batches of "val"
    seconds: float = 0.0  # wall-clock time of the whole run (varies from machine to machine)
    world_size: int = 1  # number of processes that trained together
    rank: int = 0  # this process's rank (0 in a single-process run)

    def record_step(self, it: int, loss: float, lr: float, grad_norm: float | None) -> None:
        """Add one optimizer step's numbers (the gradient norm only when there was clipping)."""
        self.iters.append(it)
        self.train_loss.append(loss)
        self.lr.append(lr)
        if grad_norm is not None:
            self.grad_norm.append(grad_norm)

    def as_dict(self) -> dict[str, list[float]]:
        """Curves for `viz.loss_curve`: the evaluated train and val losses (one point per evaluation),
        or the per-step training loss when there were no evaluations."""
        if self.eval_iters:
            return {"train": list(self.train_eval_loss), "val": list(self.val_loss)}
        return {"train": list(self.train_loss)}

    def plot(self, ax=None, title: str = "Loss"):
        """Per-step training loss (thin) and the evaluations (markers) against the iteration number."""
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(6, 3.5))
        else:
            fig = ax.figure
        ax.plot(self.iters, self.train_loss, lw=0.8, alpha=0.5, color="#0072B2", label="train (each batch)")
        if self.eval_iters:
            ax.plot(self.eval_iters, self.train_eval_loss, "o-", color="#0072B2", label="train (evaluated)")
            ax.plot(self.eval_iters, self.val_loss, "s-", color="#E69F00", label="val (evaluated)")
        ax.set_xlabel("iteration")
        ax.set_ylabel("loss")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        return fig


def lr_at(it: int, config: TrainConfig) -> float:
    """The learning rate for iteration `it` (counting from 0).

    - warm-up: ``lr * (it + 1) / warmup_iters`` for ``it < warmup_iters`` (reaches ``lr`` on the last
      warm-up step; Adam's early steps are large relative to the weights, so start small);
    - cosine decay: from ``lr`` at ``it = warmup_iters`` down to ``min_lr`` at ``it = lr_decay_iters``
      (half way it is exactly ``(lr + min_lr) / 2``);
    - ``min_lr`` after that.
    """
    check_int("it", it, minimum=0, what="the iteration number")
    decay_end = config.max_iters if config.lr_decay_iters is None else config.lr_decay_iters
    if it < config.warmup_iters:
        return config.lr * (it + 1) / config.warmup_iters
    if it >= decay_end:
        return config.min_lr
    progress = (it - config.warmup_iters) / (decay_end - config.warmup_iters)  # 0 -> 1 over the decay
    coeff = 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 -> 0
    return config.min_lr + coeff * (config.lr - config.min_lr)


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on parameters with 2 or more dimensions (weight matrices and embedding
    tables) and none on biases and norm gains: shrinking a bias or a gain towards 0 does not make the
    model simpler, it only fights the normalisation."""
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decay if param.dim() >= 2 else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas)


def cross_entropy_loss(model: nn.Module, batch: Batch, config: TrainConfig) -> torch.Tensor:
    """The default loss: cross-entropy of ``model(*batch[:-1])`` against ``batch[-1]``.

    A model that returns a tuple (like ``GPT``'s ``(logits, loss)``) has its first element used as the
    logits. Logits ``(..., V)`` and targets ``(...)`` are flattened over every axis but the last.
    """
    *inputs, targets = batch
    out = model(*inputs)
    logits = out[0] if isinstance(out, tuple) else out
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"the model's logits must be shaped (*targets.shape, V): got logits {tuple(logits.shape)} "
            f"and targets {tuple(targets.shape)}"
        )
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),  # (N, V)
        targets.reshape(-1),  # (N,)
        ignore_index=config.ignore_index,
        label_smoothing=config.label_smoothing,
    )


# --- processes ----------------------------------------------------------------------------------


def _world() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun's environment variables; (0, 0, 1) otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), world


@contextlib.contextmanager
def process_group(device: torch.device):
    """The processes that train together, for as long as the ``with`` block runs: yields
    ``(device, rank, world_size)``.

    A plain run is one process: ``(device, 0, 1)``, nothing to set up. Under torchrun
    (``WORLD_SIZE`` > 1) this process joins the group that torchrun's environment variables describe
    (gloo on the CPU, nccl on CUDA, where each process takes the GPU ``cuda:LOCAL_RANK``), and leaves
    it again at the end if it was the one that created it.
    """
    rank, local_rank, world = _world()
    if world == 1:
        yield device, rank, world
        return
    import torch.distributed as dist

    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)  # one GPU per process
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise RuntimeError(f"distributed training runs on CUDA (nccl) or the CPU (gloo), not on {device.type}")
    created = not dist.is_initialized()
    if created:
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        yield device, dist.get_rank(), dist.get_world_size()
    finally:
        if created:
            dist.destroy_process_group()


def _data_parallel(model: nn.Module, device: torch.device, world: int) -> nn.Module:
    """The model wrapped in DistributedDataParallel when several processes train it, else the model."""
    if world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    # DDP copies rank 0's weights to every rank here, and averages gradients in backward().
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def _shard(batch: Batch, rank: int, world: int) -> list[torch.Tensor]:
    """Rank `rank`'s contiguous slice of every tensor of a global batch (along the first axis)."""
    if world == 1:
        return list(batch)
    size = batch[0].shape[0]
    for t in batch:
        if t.shape[0] != size:
            raise ValueError(
                f"every tensor of a batch must have the same first (batch) dimension to be split over "
                f"processes, got shapes {[tuple(t.shape) for t in batch]}"
            )
    if size % world != 0:
        raise ValueError(
            f"the global batch size ({size}) must be divisible by the number of processes ({world}) so "
            f"that every rank gets the same share"
        )
    share = size // world
    return [t[rank * share : (rank + 1) * share] for t in batch]  # each (share, ...)


def _mean_over_ranks(value: float, device: torch.device, world: int) -> float:
    if world == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64 if device.type != "mps" else torch.float32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # gloo has no AVG, so sum and divide
    return float(t.item()) / world


def _to_batch(batch, device: torch.device) -> list[torch.Tensor]:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise TypeError(
            "get_batch(split, generator) must return a tuple of tensors with the targets last, e.g. (x, y); "
            f"got {type(batch).__name__}" + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else "")
        )
    for t in batch:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"get_batch must return tensors, got a {type(t).__name__} in the batch")
    return [t.to(device) for t in batch]


# --- evaluation and training ----------------------------------------------------------------------


@torch.no_grad()
def estimate_loss(
    model: nn.Module,
    get_batch: GetBatch,
    config: TrainConfig,
    *,
    loss_fn: LossFn | None = None,
    splits: Sequence[str] = ("train", "val"),
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Mean loss over ``config.eval_iters`` batches of each split, in eval mode (dropout off).

    The batches come from a generator seeded with ``config.seed + 1`` afresh for every call, so two
    calls see the same batches. The model's train/eval mode is restored afterwards.
    """
    device = torch.device(device) if device is not None else _model_device(model)
    rank, _, world = _world() if _distributed_ready() else (0, 0, 1)
    loss_fn = loss_fn or (lambda m, b: cross_entropy_loss(m, b, config))
    was_training = model.training
    model.eval()
    out = {}
    try:
        for split in splits:
            generator = torch.Generator().manual_seed(config.seed + 1)
            total = 0.0
            for _ in range(config.eval_iters):
                batch = _shard(_to_batch(get_batch(split, generator), device), rank, world)
                total += float(loss_fn(model, batch).item())
            out[split] = _mean_over_ranks(total / config.eval_iters, device, world)
    finally:
        model.train(was_training)
    return out


def _distributed_ready() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def train(model: nn.Module, get_batch: GetBatch, config: TrainConfig, *, loss_fn: LossFn | None = None) -> History:
    """Train `model` in place for ``config.max_iters`` AdamW steps and return the `History`.

    get_batch(split, generator): returns a tuple of tensors whose last element is the targets, for
        split "train" or "val", drawing its randomness from `generator` (a seeded ``torch.Generator``)
        so that runs repeat exactly. Under torchrun every rank draws the same global batch and keeps
        its own slice of it.
    loss_fn(model, batch): optional; returns the scalar loss of a batch (already on the device).
        The default is `cross_entropy_loss` with the config's label smoothing and ignore_index.

    The model ends in the train/eval mode it started in.
    """
    _check_train(model, get_batch, config)
    device = torch.device(config.device) if config.device is not None else _model_device(model)
    was_training, start = model.training, time.perf_counter()
    with process_group(device) as (device, rank, world):  # one process, or the ones torchrun started
        seed_everything(config.seed)
        net = _data_parallel(model.to(device), device, world)  # the model itself when there is one process
        optimizer = make_optimizer(model, config)
        generator = torch.Generator().manual_seed(config.seed)  # the training batches (the same on every rank)
        next_batch = lambda: _shard(_to_batch(get_batch("train", generator), device), rank, world)  # noqa: E731
        history, postfix = History(world_size=world, rank=rank), {}
        bar = _progress_bar(config.max_iters, config.progress and rank == 0)
        try:
            for it in range(config.max_iters):
                if config.eval_interval and it % config.eval_interval == 0:
                    postfix["val"] = _evaluate(model, get_batch, config, loss_fn, device, history, it)
                lr = lr_at(it, config)
                loss, grad_norm = _optimizer_step(net, optimizer, lr, next_batch, loss_fn, config, world)
                history.record_step(it, _mean_over_ranks(loss, device, world), lr, grad_norm)
                bar.set_postfix({**postfix, "loss": f"{history.train_loss[-1]:.3f}", "lr": f"{lr:.2e}"}, refresh=False)
                bar.update(1)
            if config.eval_interval:
                postfix["val"] = _evaluate(model, get_batch, config, loss_fn, device, history, config.max_iters)
                bar.set_postfix({**postfix, "loss": f"{history.train_loss[-1]:.3f}"})
        finally:
            bar.close()
            model.train(was_training)
            history.seconds = time.perf_counter() - start
    return history


def _optimizer_step(net: nn.Module, optimizer: torch.optim.Optimizer, lr: float, next_batch: Callable[[], Batch],
                    loss_fn: LossFn | None, config: TrainConfig, world: int) -> tuple[float, float | None]:
    """One AdamW step at learning rate `lr` on the summed gradients of ``grad_accum_steps`` batches
    from `next_batch`; returns the step's loss and the gradient norm before clipping (None without
    clipping)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    net.train()
    optimizer.zero_grad(set_to_none=True)
    steps, step_loss = config.grad_accum_steps, 0.0
    for micro in range(steps):
        batch = next_batch()
        # Under DDP, all-reduce the gradients only after the last micro-batch of the step.
        sync = world == 1 or micro == steps - 1
        with contextlib.nullcontext() if sync else net.no_sync():
            loss = loss_fn(net, batch) if loss_fn is not None else cross_entropy_loss(net, batch, config)
            if loss.ndim != 0:
                raise ValueError(f"the loss must be a scalar tensor, got shape {tuple(loss.shape)}")
            # Each micro-batch's loss is a mean over its own examples: dividing by the number of
            # micro-batches makes the summed gradients those of the mean over all of them.
            (loss / steps).backward()  # under DDP the last one averages over ranks
        step_loss += float(loss.item()) / steps
    grad_norm = None
    if config.grad_clip is not None:
        grad_norm = float(torch.nn.utils.clip_grad_norm_(net.parameters(), config.grad_clip))
    optimizer.step()
    return step_loss, grad_norm


def _evaluate(model: nn.Module, get_batch: GetBatch, config: TrainConfig, loss_fn: LossFn | None,
              device: torch.device, history: History, it: int) -> str:
    """Estimate both losses after `it` steps and record them in `history`; returns the validation
    loss as the progress bar shows it."""
    losses = estimate_loss(model, get_batch, config, loss_fn=loss_fn, device=device)
    history.eval_iters.append(it)
    history.train_eval_loss.append(losses["train"])
    history.val_loss.append(losses["val"])
    return f"{losses['val']:.3f}"


def _check_train(model, get_batch, config) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not callable(get_batch):
        raise TypeError("get_batch must be a function get_batch(split, generator) -> (inputs..., targets)")


def _model_device(model: nn.Module) -> torch.device:
    param = next(model.parameters(), None)
    if param is None:
        raise ValueError("the model has no parameters, so there is nothing to train")
    return param.device


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled or bool(os.environ.get("TQDM_DISABLE")), desc="training",
                dynamic_ncols=True)
