"""course_lib.models.GPT: the same numbers as the architecture assembled from torch's built-in layers
(forward and gradients), causality, the KV-cache forward, parameter and FLOP counts, error
messages, and the committed Tiny Shakespeare checkpoint."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib.attention import KVCache
from course_lib.models import (GPT, BuiltinGPT, GPTConfig, copy_builtin_gpt_weights, gpt_forward_flops,
                               gpt_parameter_count)

SMALL = dict(vocab_size=11, block_size=12, n_layer=2, n_head=2, n_embd=16)


def _model(seed: int = 0, **overrides) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**SMALL, **overrides}))


def _idx(B: int, T: int, V: int = SMALL["vocab_size"], seed: int = 1) -> torch.Tensor:
    return torch.randint(V, (B, T), generator=torch.Generator().manual_seed(seed))


# --- the same architecture from torch built-ins -----------------------------------------------------


def _pairs(ours: GPT, ref: BuiltinGPT):
    """(our gradient, the built-in's gradient, name) for every weight; q/k/v are stacked like in_proj."""
    yield ours.tok_emb.weight.grad, ref.tok.weight.grad, "token embedding"
    yield ours.pos_emb.weight.grad, ref.pos.weight.grad, "position embedding"
    for i, (block, layer) in enumerate(zip(ours.blocks, ref.layers)):
        a = block.self_attn
        yield torch.cat([a.w_q.weight.grad, a.w_k.weight.grad, a.w_v.weight.grad]), layer.self_attn.in_proj_weight.grad, f"block {i} qkv"
        yield a.w_o.weight.grad, layer.self_attn.out_proj.weight.grad, f"block {i} w_o"
        yield block.ff.linear1.weight.grad, layer.linear1.weight.grad, f"block {i} linear1"
        yield block.ff.linear2.weight.grad, layer.linear2.weight.grad, f"block {i} linear2"
        yield block.norm1.weight.grad, layer.norm1.weight.grad, f"block {i} norm1"
        yield block.norm2.weight.grad, layer.norm2.weight.grad, f"block {i} norm2"
        if layer.linear1.bias is not None:
            yield torch.cat([a.w_q.bias.grad, a.w_k.bias.grad, a.w_v.bias.grad]), layer.self_attn.in_proj_bias.grad, f"block {i} qkv bias"
            yield block.ff.linear2.bias.grad, layer.linear2.bias.grad, f"block {i} linear2 bias"
            yield block.norm1.bias.grad, layer.norm1.bias.grad, f"block {i} norm1 bias"
    yield ours.ln_f.weight.grad, ref.ln.weight.grad, "final norm"
    yield ours.lm_head.weight.grad, ref.head.weight.grad, "de-embedding"


@pytest.mark.parametrize("bias,tie", [(True, False), (False, True)])
@pytest.mark.parametrize("keep_weights", [False, True], ids=["fused", "from-scratch"])
def test_gpt_matches_the_architecture_built_from_torch_layers(bias, tie, keep_weights):
    config = GPTConfig(**SMALL, bias=bias, tie_weights=tie, keep_weights=keep_weights)
    torch.manual_seed(0)
    ref = BuiltinGPT(config).double()
    ours = GPT(config).double()
    copy_builtin_gpt_weights(ours, ref)
    assert all(block.self_attn.keep_weights == keep_weights for block in ours.blocks)
    idx, targets = _idx(3, 10), _idx(3, 10, seed=2)

    logits, loss = ours(idx, targets)
    ref_logits = ref(idx)
    ref_loss = F.cross_entropy(ref_logits.reshape(-1, config.vocab_size), targets.reshape(-1))
    assert_close(logits, ref_logits, msg=lambda m: f"logits differ from the built-in model: {m}")
    assert_close(loss, ref_loss)
    loss.backward()
    ref_loss.backward()
    n = 0
    for got, want, name in _pairs(ours, ref):
        assert got is not None and want is not None, f"no gradient for {name}"
        assert_close(got, want, msg=lambda m, name=name: f"gradient of {name} differs: {m}")
        n += 1
    assert n >= 12, f"only {n} gradients were compared"


def test_keep_weights_is_chosen_in_the_config_and_keeps_every_layers_weights():
    idx = _idx(2, 7)
    fast, kept = _model(0), _model(0, keep_weights=True)
    assert_close(kept(idx)[0], fast(idx)[0], atol=1e-5, rtol=1e-5)
    assert all(block.self_attn.last_weights is None for block in fast.blocks)
    weights = [block.self_attn.last_weights for block in kept.blocks]
    assert all(w is not None and w.shape == (2, SMALL["n_head"], 7, 7) for w in weights), [
        None if w is None else tuple(w.shape) for w in weights]
    assert all(torch.equal(w.triu(1), torch.zeros_like(w)) for w in weights), "a causal model attends to no later token"


def test_weight_tying_shares_one_matrix():
    tied, untied = _model(tie_weights=True), _model(tie_weights=False)
    assert tied.lm_head.weight is tied.tok_emb.weight, "with tie_weights the de-embedding must BE the token embedding"
    assert untied.lm_head.weight is not untied.tok_emb.weight
    V, C = SMALL["vocab_size"], SMALL["n_embd"]
    assert untied.num_parameters() - tied.num_parameters() == V * C, (untied.num_parameters(), tied.num_parameters())
    # a step through the head changes the embedding too
    logits, loss = tied(_idx(2, 5), _idx(2, 5, seed=3))
    loss.backward()
    assert tied.tok_emb.weight.grad is tied.lm_head.weight.grad


# --- behaviour ---------------------------------------------------------------------------------------


def test_shapes_and_loss():
    model = _model()
    idx, targets = _idx(4, 12), _idx(4, 12, seed=5)
    logits, loss = model(idx)
    assert logits.shape == (4, 12, SMALL["vocab_size"]), logits.shape
    assert loss is None, "without targets the loss must be None"
    logits, loss = model(idx, targets)
    want = F.cross_entropy(logits.reshape(-1, SMALL["vocab_size"]), targets.reshape(-1))
    assert_close(loss, want)
    masked = targets.clone()
    masked[:, :6] = -100
    _, loss_masked = model(idx, masked)
    assert_close(loss_masked, F.cross_entropy(logits[:, 6:].reshape(-1, SMALL["vocab_size"]), targets[:, 6:].reshape(-1)))


def test_initial_loss_is_near_ln_vocab_size():
    model = _model(0, vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
    idx = _idx(8, 64, V=65)
    _, loss = model(idx, _idx(8, 64, V=65, seed=9))
    assert abs(loss.item() - math.log(65)) < 0.1, f"initial loss {loss.item():.3f}, expected about ln(65) = {math.log(65):.3f}"


@pytest.mark.parametrize("keep_weights", [False, True], ids=["fused", "from-scratch"])
def test_a_future_token_never_changes_earlier_logits(keep_weights):
    model = _model(0, dropout=0.0, keep_weights=keep_weights)
    idx = _idx(2, 12)
    base, _ = model(idx)
    for t in (0, 5, 11):
        changed = idx.clone()
        changed[:, t:] = (changed[:, t:] + 1 + torch.arange(12 - t)) % SMALL["vocab_size"]  # every token from t on differs
        out, _ = model(changed)
        assert torch.equal(out[:, :t], base[:, :t]) or torch.allclose(out[:, :t], base[:, :t], atol=1e-6, rtol=0), (
            f"changing tokens {t}.. changed the logits of positions before {t}"
        )
        assert not torch.allclose(out[:, t], base[:, t]), f"changing token {t} did not change position {t}'s logits"


def test_causality_of_gradients():
    model = _model()
    emb = model.tok_emb
    idx = _idx(1, 8)
    x = emb(idx).detach().requires_grad_(True)
    emb_forward = emb.forward
    emb.forward = lambda _: x  # feed the embeddings we hold, to take gradients with respect to them
    try:
        logits, _ = model(idx)
    finally:
        emb.forward = emb_forward
    grad = torch.autograd.grad(logits[0, 3].sum(), x)[0]  # (1, 8, C)
    assert grad[0, 4:].abs().max() == 0, "position 3's logits depend on later positions"
    assert grad[0, :4].abs().max() > 0


def test_kv_cache_forward_matches_the_full_forward():
    model = _model().double()
    idx = _idx(3, 12)
    full, _ = model(idx)
    cache = model.new_kv_cache()
    assert len(cache) == SMALL["n_layer"] and all(isinstance(c, KVCache) for c in cache)
    pieces, start = [], 0
    for size in (5, 1, 1, 3, 2):  # a prompt, then single tokens, then a few at once
        out, _ = model(idx[:, start : start + size], kv_cache=cache)
        pieces.append(out)
        start += size
        assert len(cache[0]) == start, f"the cache should hold {start} positions, holds {len(cache[0])}"
    assert_close(torch.cat(pieces, dim=1), full)


def test_dropout_is_off_in_eval_and_on_in_training():
    model = _model(dropout=0.5)
    idx = _idx(2, 8)
    model.eval()
    assert torch.equal(model(idx)[0], model(idx)[0])
    model.train()
    assert not torch.equal(model(idx)[0], model(idx)[0]), "dropout=0.5 in training mode should make two passes differ"


# --- counts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [{}, {"bias": False}, {"tie_weights": True}, {"bias": False, "tie_weights": True, "n_layer": 3, "n_embd": 24, "n_head": 3}])
def test_parameter_count_formula_matches_the_model(overrides):
    config = GPTConfig(**{**SMALL, **overrides})
    counts = gpt_parameter_count(config)
    model = GPT(config)
    assert counts["total"] == model.num_parameters() == sum(p.numel() for p in model.parameters()), (counts, model.num_parameters())
    assert counts["token embedding"] == model.tok_emb.weight.numel()
    assert counts["attention"] == sum(p.numel() for b in model.blocks for p in b.self_attn.parameters())
    assert counts["feed-forward"] == sum(p.numel() for b in model.blocks for p in b.ff.parameters())


def test_recipe_parameter_count():
    config = GPTConfig(65, 64, 4, 4, 128, 0.0, bias=False, tie_weights=True)
    # 65*128 + 64*128 + 4 * (12 * 128^2 + 2 * 128) + 128
    assert gpt_parameter_count(config)["total"] == 804_096


@pytest.mark.parametrize("T", [1, 7, 12])
def test_flops_formula_matches_torch_flop_counter(T):
    from torch.utils.flop_counter import FlopCounterMode

    config = GPTConfig(**SMALL, keep_weights=True)  # the course's attention: plain matmuls, which the counter sees
    model = GPT(config)
    with FlopCounterMode(display=False) as counter:
        model(_idx(1, T))
    assert counter.get_total_flops() == gpt_forward_flops(config, T), (counter.get_total_flops(), gpt_forward_flops(config, T))


def test_attention_flops_grow_quadratically_with_the_context():
    config = GPTConfig(**SMALL)
    L, C = config.n_layer, config.n_embd
    per_token = gpt_forward_flops(config, 1) - 4 * L * C  # 2 FLOPs per matmul weight
    quadratic = lambda T: gpt_forward_flops(config, T) - T * per_token  # noqa: E731
    assert quadratic(4) == 4 * L * C * 16 and quadratic(8) == 4 * quadratic(4), (quadratic(4), quadratic(8))


# --- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,match", [
    ({"n_embd": 10, "n_head": 3}, "multiple of n_head"),
    ({"vocab_size": 0}, "vocab_size must be a positive int"),
    ({"block_size": 2.5}, "block_size must be a positive int"),
    ({"dropout": 1.0}, r"dropout must be a number in \[0, 1\)"),
    ({"bias": 1}, "bias must be True or False"),
    ({"keep_weights": "yes"}, "keep_weights must be True or False"),
])
def test_config_errors(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        GPTConfig(**{**SMALL, **kwargs})


def test_forward_errors():
    model = _model()
    with pytest.raises(TypeError, match="expects a GPTConfig"):
        GPT({"vocab_size": 11})
    with pytest.raises(TypeError, match="integer token ids"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"shaped \(B, T\).*idx\[None\]"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="13 tokens.*block_size is 12.*crop the context"):
        model(torch.zeros(1, 13, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token ids must be in 0..10 \(vocab_size=11\), got ids from 0 to 11"):
        model(torch.tensor([[0, 11]]))
    with pytest.raises(ValueError, match="targets must be a tensor of token ids shaped like idx"):
        model(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="kv_cache must be a list of 2 KVCache"):
        model(torch.zeros(1, 3, dtype=torch.long), kv_cache=[KVCache()])
    cache = model.new_kv_cache()
    model(torch.zeros(1, 10, dtype=torch.long), kv_cache=cache)
    with pytest.raises(ValueError, match="3 tokens after 10 cached positions.*13 positions"):
        model(torch.zeros(1, 3, dtype=torch.long), kv_cache=cache)


# --- the training script and the committed checkpoint --------------------------------------------------


def _shakespeare_or_skip():
    from course_lib.data import tiny_shakespeare

    try:
        return tiny_shakespeare()
    except RuntimeError as err:
        pytest.skip(f"Tiny Shakespeare is not available: {err}")


def test_committed_checkpoint_is_the_recipe_and_reaches_its_loss():
    from course_lib.train_gpt import (CHECKPOINT, RECIPE_WHOLE_SPLIT_LOSS, load_checkpoint, make_get_batch,
                                      recipe_model_config, shakespeare_data)
    from course_lib.training import TrainConfig, estimate_loss

    model, vocab, info = load_checkpoint()
    assert CHECKPOINT.stat().st_size < 5_000_000, f"the checkpoint should stay small, it is {CHECKPOINT.stat().st_size:,} bytes"
    assert model.config == recipe_model_config(65), model.config
    assert info["iters"] == 2000 and info["train_config"]["lr"] == 1e-3 and info["train_config"]["eval_iters"] == 20, info["train_config"]
    assert info["val_loss"] < 2.0, f"the checkpoint's validation loss is {info['val_loss']}"
    # the whole-split loss stored with it is the one lesson 11 and the benchmark compare with nanoGPT's
    quoted = RECIPE_WHOLE_SPLIT_LOSS["python -m course_lib.train_gpt"][info["seed"]]
    assert abs(info["val_loss_full"] - quoted) < 5e-4, (info["val_loss_full"], quoted)
    assert not model.training
    text = _shakespeare_or_skip()
    data_vocab, train_ids, val_ids = shakespeare_data(text)
    assert vocab.tokens == data_vocab.tokens, "the checkpoint's vocabulary is not Tiny Shakespeare's sorted characters"
    # the stored loss is what the model scores on the same 20 validation batches
    config = TrainConfig(eval_iters=20, seed=info["seed"])
    losses = estimate_loss(model, make_get_batch(train_ids, val_ids, 64), config, splits=("val",))
    assert abs(losses["val"] - info["val_loss"]) < 2e-3, (losses, info["val_loss"])


def test_train_script_runs_and_saves_a_loadable_checkpoint(tmp_path, capsys):
    _shakespeare_or_skip()
    from course_lib import train_gpt

    out = tmp_path / "gpt.pt"
    assert train_gpt.main(["--iters", "2", "--eval-interval", "2", "--out", str(out), "--no-progress", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "final validation loss" in printed and f"saved {out}" in printed, printed
    model, vocab, info = train_gpt.load_checkpoint(out)
    assert len(vocab) == 65 and info["iters"] == 2 and len(info["history"]["val"]) == 2, info
    assert abs(info["history"]["val"][0] - math.log(65)) < 0.1, f"the untrained loss should be near ln(65): {info['history']}"
    with pytest.raises(FileNotFoundError, match="python -m course_lib.train_gpt"):
        train_gpt.load_checkpoint(tmp_path / "missing.pt")
