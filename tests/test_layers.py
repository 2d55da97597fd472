"""The transformer block's pieces (lesson 09) against torch's own layers.

- `LayerNorm` against `nn.LayerNorm`, `RMSNorm` against `nn.RMSNorm`, forward and backward
  (input and parameter gradients), with and without a bias.
- `EncoderBlock` against `nn.TransformerEncoderLayer` and `DecoderBlock` against
  `nn.TransformerDecoderLayer`, batch_first, with the same weights copied in, pre- and post-norm,
  ReLU and GELU, with masks, forward and backward, in eval mode; the fast paths (torch's fused
  attention and LayerNorm) give the same numbers.

Everything runs in float64 so the two agree to round-off. Conventions to keep apart: our masks say
True = "may attend"; torch's transformer layers say True = "may NOT attend", so the reference always
gets the inverted mask.
"""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from course_lib.attention import causal_mask, padding_mask
from course_lib.layers import DecoderBlock, EncoderBlock, FeedForward, LayerNorm, RMSNorm, copy_torch_weights

DTYPE = torch.float64


def inputs(*shape: int, seed: int = 1, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=DTYPE) * scale + shift).requires_grad_(True)


def randomise_(module: nn.Module, seed: int) -> None:
    """Give every parameter random values: ones/zeros (the default norm init) would hide a swapped or
    missing gain or bias."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


# ---------------------------------------------------------------- LayerNorm and RMSNorm


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_layernorm_matches_torch_forward_and_backward(bias, eps):
    d = 6
    ours = LayerNorm(d, eps=eps, bias=bias).to(DTYPE)
    ref = nn.LayerNorm(d, eps=eps, bias=bias).to(DTYPE)
    randomise_(ours, seed=3)
    ref.load_state_dict(ours.state_dict())
    # a large shift and a small spread: a wrong eps placement or unbiased variance shows clearly
    x1 = inputs(2, 5, d, seed=4, scale=0.2, shift=3.0)
    x2 = x1.detach().clone().requires_grad_(True)
    y1, y2 = ours(x1), ref(x2)
    assert_close(y1, y2)
    g = torch.randn(y1.shape, generator=torch.Generator().manual_seed(5), dtype=DTYPE)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    assert_close(x1.grad, x2.grad, msg=lambda m: f"input gradient differs from nn.LayerNorm's: {m}")
    for (name, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters(), strict=True):
        assert_close(p.grad, q.grad, msg=lambda m, name=name: f"gradient of {name} differs: {m}")
    assert [n for n, _ in ours.named_parameters()] == (["weight", "bias"] if bias else ["weight"])


def test_layernorm_statistics_and_constant_vector():
    ln = LayerNorm(4).to(DTYPE)
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=DTYPE)
    y = ln(x).detach()
    assert abs(float(y.mean())) < 1e-12, f"mean after LayerNorm should be 0, got {float(y.mean())}"
    # biased variance of y is var / (var + eps), just under 1
    var = float(((x - x.mean()) ** 2).mean())
    assert_close(float((y**2).mean()), var / (var + 1e-5))
    # a constant vector has zero variance: eps inside the root keeps the output finite (all zeros)
    z = ln(torch.full((1, 4), 7.0, dtype=DTYPE)).detach()
    assert torch.equal(z, torch.zeros(1, 4, dtype=DTYPE)), f"constant vector should normalise to zeros, got {z}"


def test_bias_free_layernorm_still_centres():
    ln = LayerNorm(3, bias=False).to(DTYPE)
    y = ln(torch.tensor([[10.0, 11.0, 12.0]], dtype=DTYPE)).detach()
    assert abs(float(y.sum())) < 1e-9, f"a bias-free LayerNorm still subtracts the mean, got {y.tolist()}"


@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_rmsnorm_matches_torch_forward_and_backward(eps):
    d = 6
    ours = RMSNorm(d, eps=eps).to(DTYPE)
    ref = nn.RMSNorm(d, eps=eps).to(DTYPE)
    randomise_(ours, seed=6)
    ref.load_state_dict(ours.state_dict())
    x1 = inputs(3, 4, d, seed=7, scale=0.3, shift=1.0)
    x2 = x1.detach().clone().requires_grad_(True)
    y1, y2 = ours(x1), ref(x2)
    assert_close(y1, y2)
    g = torch.randn(y1.shape, generator=torch.Generator().manual_seed(8), dtype=DTYPE)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    assert_close(x1.grad, x2.grad, msg=lambda m: f"input gradient differs from nn.RMSNorm's: {m}")
    assert_close(ours.weight.grad, ref.weight.grad, msg=lambda m: f"gradient of weight differs: {m}")
    assert [n for n, _ in ours.named_parameters()] == ["weight"]


def test_rmsnorm_does_not_centre():
    y = RMSNorm(3)(torch.tensor([[10.0, 11.0, 12.0]])).detach()
    assert float(y.min()) > 0, f"RMSNorm keeps the direction (all positive stays positive), got {y.tolist()}"
    assert_close(float((y**2).mean()), 1.0, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "make, x, match",
    [
        (lambda: LayerNorm(4), torch.zeros(2, 5), r"size 4.*shape \(2, 5\)"),
        (lambda: RMSNorm(4), torch.zeros(2, 3), r"size 4.*shape \(2, 3\)"),
        (lambda: LayerNorm(4), torch.zeros(2, 4, dtype=torch.long), r"floating-point.*int64"),
        (lambda: FeedForward(4), torch.zeros(2, 3), r"size 4.*shape \(2, 3\)"),
    ],
)
def test_norm_and_ffn_input_errors(make, x, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()(x)


def test_norm_constructor_errors():
    with pytest.raises(ValueError, match="positive int"):
        LayerNorm(0)
    with pytest.raises(ValueError, match="positive int"):
        RMSNorm(2.5)
    with pytest.raises(ValueError, match=r"activation must be one of \['gelu', 'relu'\], got 'tanh'"):
        FeedForward(4, activation="tanh")


def test_feedforward_shapes_and_default_width():
    ff = FeedForward(8)
    assert (ff.linear1.in_features, ff.linear1.out_features, ff.linear2.out_features) == (8, 32, 8)
    assert ff(torch.zeros(2, 3, 8)).shape == (2, 3, 8)
    assert FeedForward(8, d_ff=10).linear1.out_features == 10
    assert [n for n, _ in ff.named_parameters()] == ["linear1.weight", "linear1.bias", "linear2.weight",
                                                     "linear2.bias"], "torch's names, so weights map one to one"


# ---------------------------------------------------------------- EncoderBlock and DecoderBlock vs torch


def make_block_pair(d, h, d_ff, *, norm_first, activation, cross, bias=True, seed=0):
    """Torch's layer with random weights, and our block with those weights copied in (float64, eval mode)."""
    torch.manual_seed(seed)
    kw = dict(dim_feedforward=d_ff, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first,
              bias=bias)
    ref = (nn.TransformerDecoderLayer if cross else nn.TransformerEncoderLayer)(d, h, **kw).to(DTYPE)
    randomise_(ref, seed=seed + 1)  # biases and norm gains away from 0 and 1, so a missing one shows
    block = DecoderBlock if cross else EncoderBlock
    ours = block(d, h, d_ff, norm_first=norm_first, activation=activation, bias=bias)
    copy_torch_weights(ours.to(DTYPE), ref)
    return ours.eval(), ref.eval()


def grads_by_torch_name(ours: EncoderBlock | DecoderBlock, cross: bool) -> dict[str, torch.Tensor]:
    """Our gradients, stacked and renamed to torch's parameter names."""
    def attn(m, prefix):
        out = {f"{prefix}.in_proj_weight": torch.cat([m.w_q.weight.grad, m.w_k.weight.grad, m.w_v.weight.grad]),
               f"{prefix}.out_proj.weight": m.w_o.weight.grad}
        if m.w_q.bias is not None:
            out[f"{prefix}.in_proj_bias"] = torch.cat([m.w_q.bias.grad, m.w_k.bias.grad, m.w_v.bias.grad])
            out[f"{prefix}.out_proj.bias"] = m.w_o.bias.grad
        return out

    g = attn(ours.self_attn, "self_attn")
    if cross:
        g |= attn(ours.cross_attn, "multihead_attn")
    for ours_name, torch_name in [("ff.linear1", "linear1"), ("ff.linear2", "linear2")]:
        lin = ours.get_submodule(ours_name)
        g[f"{torch_name}.weight"] = lin.weight.grad
        if lin.bias is not None:
            g[f"{torch_name}.bias"] = lin.bias.grad
    for name in ["norm1", "norm2"] + (["norm3"] if cross else []):
        norm = getattr(ours, name)
        g[f"{name}.weight"] = norm.weight.grad
        if norm.bias is not None:
            g[f"{name}.bias"] = norm.bias.grad
    return g


def assert_same_grads(ours, ref, cross):
    got = grads_by_torch_name(ours, cross)
    expected = {n: p.grad for n, p in ref.named_parameters()}
    assert set(got) == set(expected), f"parameters {sorted(got)}, expected {sorted(expected)}"
    for name, g in expected.items():
        assert got[name] is not None, f"{name} received no gradient"
        assert_close(got[name], g, msg=lambda m, name=name: f"gradient of {name} differs from torch's: {m}")


ENCODER_CASES = list(itertools.product([True, False], ["relu", "gelu"], ["none", "causal", "padding"]))


@pytest.mark.parametrize("norm_first, activation, mask_kind", ENCODER_CASES)
def test_encoder_block_matches_transformer_encoder_layer(norm_first, activation, mask_kind):
    B, T, d, h, d_ff = 3, 5, 8, 2, 12
    ours, ref = make_block_pair(d, h, d_ff, norm_first=norm_first, activation=activation, cross=False)
    x1 = inputs(B, T, d, seed=2)
    x2 = x1.detach().clone().requires_grad_(True)
    lengths = [5, 3, 1]
    if mask_kind == "none":
        y1, y2 = ours(x1), ref(x2)
    elif mask_kind == "causal":
        m = causal_mask(T)  # (T, T), True = may attend
        y1, y2 = ours(x1, m), ref(x2, src_mask=~m)  # torch: True = blocked
    else:
        m = padding_mask(lengths, T)  # (B, 1, 1, T)
        y1 = ours(x1, m)
        y2 = ref(x2, src_key_padding_mask=~m[:, 0, 0])  # (B, T), True = padding
    assert y1.shape == (B, T, d)
    assert_close(y1, y2)
    g = torch.randn(y1.shape, generator=torch.Generator().manual_seed(9), dtype=DTYPE)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    assert_close(x1.grad, x2.grad, msg=lambda m: f"input gradient differs from torch's: {m}")
    assert_same_grads(ours, ref, cross=False)


@pytest.mark.parametrize("norm_first, activation", list(itertools.product([True, False], ["relu", "gelu"])))
def test_decoder_block_matches_transformer_decoder_layer(norm_first, activation):
    B, T, S, d, h, d_ff = 2, 4, 6, 8, 4, 16
    ours, ref = make_block_pair(d, h, d_ff, norm_first=norm_first, activation=activation, cross=True, seed=10)
    x1, ctx1 = inputs(B, T, d, seed=11), inputs(B, S, d, seed=12)
    x2 = x1.detach().clone().requires_grad_(True)
    ctx2 = ctx1.detach().clone().requires_grad_(True)
    self_mask = causal_mask(T)  # (T, T)
    ctx_mask = padding_mask([6, 2], S)  # (B, 1, 1, S)
    y1 = ours(x1, ctx1, self_mask, ctx_mask)
    y2 = ref(x2, ctx2, tgt_mask=~self_mask, memory_key_padding_mask=~ctx_mask[:, 0, 0])
    assert y1.shape == (B, T, d)
    assert_close(y1, y2)
    g = torch.randn(y1.shape, generator=torch.Generator().manual_seed(13), dtype=DTYPE)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    assert_close(x1.grad, x2.grad, msg=lambda m: f"input gradient differs from torch's: {m}")
    assert_close(ctx1.grad, ctx2.grad, msg=lambda m: f"context gradient differs from torch's: {m}")
    assert_same_grads(ours, ref, cross=True)


@pytest.mark.parametrize("cross", [False, True])
def test_bias_free_block_matches_torch(cross):
    B, T, d = 2, 3, 8
    ours, ref = make_block_pair(d, 2, 16, norm_first=True, activation="gelu", cross=cross, bias=False, seed=20)
    assert all(p.ndim == 2 or n.endswith("weight") for n, p in ours.named_parameters()), "bias=False left a bias"
    x = inputs(B, T, d, seed=21)
    if cross:
        ctx = inputs(B, 4, d, seed=22)
        assert_close(ours(x, ctx), ref(x, ctx))
    else:
        assert_close(ours(x), ref(x))


def test_block_structure_follows_the_interface():
    enc = EncoderBlock(8, 2)
    assert [name for name, _ in enc.named_children()] == ["self_attn", "ff", "norm1", "norm2", "dropout1", "dropout2"]
    assert enc.ff.linear1.out_features == 32, "d_ff defaults to 4 * d_model"
    dec = DecoderBlock(8, 2, 20, 0.1, norm_first=False, norm_eps=1e-3)
    assert [name for name, _ in dec.named_children()] == [
        "self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3", "dropout1", "dropout2", "dropout3"]
    assert dec.dropout3.p == 0.1 and dec.norm1.eps == 1e-3 and dec.ff.linear1.out_features == 20


@pytest.mark.parametrize("cross", [False, True])
def test_fast_paths_are_chosen_when_the_block_is_built_and_give_the_same_numbers(cross):
    kind = DecoderBlock if cross else EncoderBlock
    torch.manual_seed(0)
    plain = kind(8, 2, dropout=0.0).eval()
    fast = kind(8, 2, dropout=0.0, keep_weights=False, fused_norm=True).eval()
    fast.load_state_dict(plain.state_dict())
    attentions = [m for m in fast.modules() if m.__class__.__name__ == "MultiHeadAttention"]
    assert attentions and not any(m.keep_weights for m in attentions)
    assert all(m.fused for m in fast.modules() if isinstance(m, LayerNorm))
    assert not any(m.fused for m in plain.modules() if isinstance(m, LayerNorm))
    x, memory = torch.randn(2, 5, 8), torch.randn(2, 3, 8)
    args = (x, memory) if cross else (x,)
    y_plain, y_fast = plain(*args, causal_mask(5)), fast(*args, causal_mask(5))
    assert_close(y_fast, y_plain, atol=1e-5, rtol=1e-5)
    assert plain.self_attn.last_weights is not None and fast.self_attn.last_weights is None


def test_pre_norm_leaves_the_residual_stream_unnormalised_and_post_norm_normalises_it():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8) * 5 + 3
    post = EncoderBlock(8, 2, norm_first=False).eval()(x).detach()
    assert_close(post.mean(-1), torch.zeros(2, 4), atol=1e-5, rtol=0)  # last op is a LayerNorm (gain 1, bias 0)
    pre = EncoderBlock(8, 2, norm_first=True).eval()(x).detach()
    assert float(pre.mean(-1).abs().mean()) > 1.0, "pre-norm output should keep the stream's large mean"


def test_block_dropout_is_active_only_in_training():
    torch.manual_seed(0)
    block = EncoderBlock(8, 2, dropout=0.5)
    x = torch.randn(2, 4, 8)
    block.eval()
    assert torch.equal(block(x), block(x)), "eval mode must be deterministic"
    block.train()
    assert not torch.equal(block(x), block(x)), "training mode with dropout=0.5 should differ between calls"


def test_block_causal_mask_stops_future_tokens():
    torch.manual_seed(0)
    block = EncoderBlock(8, 2).eval()
    x = torch.randn(1, 5, 8)
    y = block(x, causal_mask(5))
    x2 = x.clone()
    x2[0, 3:] += 10.0
    y2 = block(x2, causal_mask(5))
    assert_close(y[0, :3], y2[0, :3])  # positions 0..2 cannot see 3..4
    assert not torch.allclose(y[0, 3:], y2[0, 3:])


def test_block_input_errors():
    block = EncoderBlock(8, 2)
    with pytest.raises(ValueError, match=r"x must be shaped \(B, T, d_model=8\), got shape \(2, 3, 6\)"):
        block(torch.zeros(2, 3, 6))
    with pytest.raises(ValueError, match=r"got shape \(3, 8\)"):
        block(torch.zeros(3, 8))
    dec = DecoderBlock(8, 2)
    with pytest.raises(ValueError, match=r"x must be shaped \(B, T, d_model=8\), got shape \(1, 3, 5\)"):
        dec(torch.zeros(1, 3, 5), torch.zeros(1, 2, 8))
    with pytest.raises(ValueError, match=r"context must be shaped \(B, T, d_model=8\)"):
        dec(torch.zeros(1, 3, 8), torch.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="multiple of n_heads"):
        EncoderBlock(10, 3)


def test_copy_torch_weights_errors():
    with pytest.raises(TypeError, match="TransformerDecoderLayer go into layers.DecoderBlock, not into EncoderBlock"):
        copy_torch_weights(EncoderBlock(8, 2), nn.TransformerDecoderLayer(8, 2, 32, batch_first=True))
    with pytest.raises(TypeError, match="TransformerEncoderLayer go into layers.EncoderBlock, not into DecoderBlock"):
        copy_torch_weights(DecoderBlock(8, 2), nn.TransformerEncoderLayer(8, 2, 32, batch_first=True))
    with pytest.raises(TypeError, match="nn.TransformerEncoderLayer"):
        copy_torch_weights(EncoderBlock(8, 2), nn.Linear(8, 8))


def test_block_regression_value():
    """A seeded block's output, so an accidental change (norm or residual placement) is caught."""
    torch.manual_seed(0)
    block = EncoderBlock(8, 2, 16).eval()
    x = torch.randn(1, 3, 8)
    with torch.no_grad():
        y = block(x, causal_mask(3))
    got = [round(float(v), 4) for v in y[0, :, 0]]
    assert_close(torch.tensor(got), torch.tensor(EXPECTED_FIRST_FEATURE), atol=2e-4, rtol=0,
                 msg=lambda m: f"first feature of each position is {got}, expected {EXPECTED_FIRST_FEATURE}: {m}")


EXPECTED_FIRST_FEATURE = [-1.6649, -0.4703, -0.8304]  # torch.manual_seed(0), default init, CPU


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_with_kv_cache_matches_the_full_causal_pass(norm_first):
    """Token by token with a KV cache gives the same outputs as one causal pass (what generation relies on)."""
    from course_lib import attention

    torch.manual_seed(0)
    block = EncoderBlock(8, 2, norm_first=norm_first).to(DTYPE).eval()
    x = torch.randn(2, 6, 8, dtype=DTYPE)
    with torch.no_grad():
        full = block(x, causal_mask(6))
        cache = attention.KVCache()
        first = block(x[:, :2], causal_mask(2), cache=cache)  # a prompt of 2 tokens
        steps = [first] + [block(x[:, t : t + 1], causal_mask(1, past=t), cache=cache) for t in range(2, 6)]
    assert len(cache) == 6, f"the cache should hold 6 positions, holds {len(cache)}"
    assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_layernorm_equals_the_from_scratch_one_forward_and_backward(bias):
    torch.manual_seed(0)
    plain, fused = LayerNorm(12, bias=bias), LayerNorm(12, bias=bias, fused=True)
    with torch.no_grad():
        plain.weight.uniform_(0.5, 1.5)
        if bias:
            plain.bias.uniform_(-0.5, 0.5)
    fused.load_state_dict(plain.state_dict())
    x = torch.randn(3, 5, 12) * 4 + 2
    results = []
    for ours in (plain, fused):
        xi = x.clone().requires_grad_(True)
        y = ours(xi)
        (y * torch.linspace(-1, 1, 12)).sum().backward()
        results.append((y, xi.grad, ours.weight.grad))
    (y0, gx0, gw0), (y1, gx1, gw1) = results
    torch.testing.assert_close(y1, y0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gx1, gx0, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(gw1, gw0, atol=1e-5, rtol=1e-4)
