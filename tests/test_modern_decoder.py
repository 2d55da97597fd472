"""Lesson 12's library pieces against independent references, forward and backward:

- `layers.RMSNorm` (fused and not) against `torch.nn.RMSNorm`; `layers.SwiGLU` against the formula
  written with torch's functional ops;
- grouped-query `attention.MultiHeadAttention` against `F.scaled_dot_product_attention(...,
  enable_gqa=True)` fed the same projections; its KV cache stores only the key/value heads;
- `attention.tiled_attention` against `F.scaled_dot_product_attention` (causal, boolean and float
  masks, uneven query and key blocks, T_q != T_k, rows with nothing allowed); its causal call skips
  the key blocks above the diagonal (FLOPs counted by `torch.utils.flop_counter`); in bfloat16 and
  float16 its error against float64 stays within 1.25x of SDPA's; its causal mask is bottom-right
  aligned where PyTorch's `is_causal` is top-left;
- QK-norm against `F.rms_norm` + `F.scaled_dot_product_attention`; RoPE scaling (position
  interpolation, Llama 3.1, YaRN) against `transformers`' own frequency functions, NTK-aware
  scaling by its defining property; int8 quantisation against `torch.quantize_per_channel`;
- the rolling cache with attention sinks against a recomputation of the tokens it keeps;
- `layers.ModernBlock` against Hugging Face's `LlamaDecoderLayer` and `models.ModernGPT` against
  `LlamaForCausalLM`, both built from a `LlamaConfig` (nothing downloaded) with copied weights;
- `generation.generate` with the rolling cache gives the same tokens as without, past block_size.

`transformers` is imported inside the two tests that need it (it takes seconds to import).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    repeat_kv_heads,
    sliding_window_mask,
    tiled_attention,
)
from course_lib.generation import generate
from course_lib.layers import ModernBlock, RMSNorm, SwiGLU, copy_llama_weights, swiglu_hidden
from course_lib.models import ModernGPT, ModernGPTConfig, copy_from_llama
from course_lib.positional import apply_rotary, rotate_half_permutation

DTYPE = torch.float64
TOL = dict(atol=1e-10, rtol=1e-8)  # float64 everywhere: only rounding separates the two computations
# Llama computes its RMSNorm in float32 whatever the model's dtype (LlamaRMSNorm casts to float32 and
# back), and its rotary cos/sin tables too (inv_freq is a float32 buffer): about 1e-7 of rounding.
LLAMA_TOL = dict(atol=1e-5, rtol=1e-5)


def _grads(*tensors):
    return [t.grad.clone() for t in tensors]


# ---------------------------------------------------------------- RMSNorm, SwiGLU


@pytest.mark.parametrize("fused", [False, True])
def test_rmsnorm_matches_torch_forward_and_backward(fused):
    torch.manual_seed(0)
    ours, ref = RMSNorm(12, eps=1e-5, fused=fused).to(DTYPE), nn.RMSNorm(12, eps=1e-5).to(DTYPE)
    with torch.no_grad():
        ours.weight.normal_()
        ref.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 12, dtype=DTYPE)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), ref(xb)
    torch.testing.assert_close(ya, yb, **TOL)
    g = torch.randn_like(ya)
    ya.backward(g)
    yb.backward(g)
    torch.testing.assert_close(xa.grad, xb.grad, **TOL)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, **TOL)


def test_swiglu_is_w2_of_silu_gate_times_up():
    torch.manual_seed(0)
    ff = SwiGLU(16, 40).to(DTYPE)
    assert all(m.bias is None for m in (ff.w1, ff.w2, ff.w3))
    assert ff.w1.weight.shape == (40, 16) and ff.w3.weight.shape == (40, 16) and ff.w2.weight.shape == (16, 40)
    x = torch.randn(2, 7, 16, dtype=DTYPE, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    y = ff(x)
    h = F.silu(x2 @ ff.w1.weight.T) * (x2 @ ff.w3.weight.T)
    y_ref = h @ ff.w2.weight.T
    torch.testing.assert_close(y, y_ref, **TOL)
    y.sum().backward()
    y_ref.sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, **TOL)
    # 8/3 * d rounded up to a multiple of 8: about the weights of a 4d GELU MLP
    assert swiglu_hidden(128) == 344 and abs(3 * 128 * swiglu_hidden(128) - 8 * 128 * 128) / (8 * 128 * 128) < 0.01
    with pytest.raises(ValueError, match="last dimension, which must have size 16"):
        ff(torch.randn(2, 8))


# ---------------------------------------------------------------- grouped-query attention


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("keep_weights", [True, False])
def test_gqa_matches_torch_enable_gqa(n_kv_heads, keep_weights):
    torch.manual_seed(1)
    d, H, B, T = 32, 4, 2, 9
    mha = MultiHeadAttention(d, H, keep_weights=keep_weights, n_kv_heads=n_kv_heads).to(DTYPE)
    assert mha.w_k.weight.shape == (n_kv_heads * 8, d) and mha.w_v.weight.shape == (n_kv_heads * 8, d)
    x = torch.randn(B, T, d, dtype=DTYPE, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = mha(x, mask=causal_mask(T))
    # The reference: the same projections, torch's kernel doing the head sharing itself.
    q = mha.w_q(x2).view(B, T, H, 8).transpose(1, 2)
    k = mha.w_k(x2).view(B, T, n_kv_heads, 8).transpose(1, 2)
    v = mha.w_v(x2).view(B, T, n_kv_heads, 8).transpose(1, 2)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = mha.w_o(ref.transpose(1, 2).reshape(B, T, d))
    torch.testing.assert_close(out, ref, **TOL)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    grads = [p.grad.clone() for p in mha.parameters()]
    mha.zero_grad()
    (ref * g).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, **TOL)
    for a, b in zip(grads, [p.grad for p in mha.parameters()], strict=True):
        torch.testing.assert_close(a, b, **TOL)


def test_repeat_kv_heads_groups_neighbouring_query_heads():
    k = torch.arange(2.0)[None, :, None, None].expand(1, 2, 3, 4)  # kv head h holds the value h
    heads = repeat_kv_heads(k, 3)[0, :, 0, 0].tolist()
    assert heads == [0, 0, 0, 1, 1, 1], heads  # query head h uses kv head h // 3 (k.repeat would give 0,1,0,1,0,1)


def test_gqa_cache_stores_kv_heads_only_and_matches_no_cache():
    torch.manual_seed(2)
    mha = MultiHeadAttention(32, 8, keep_weights=False, n_kv_heads=2, rope_base=10000.0, bias=False).to(DTYPE)
    x = torch.randn(2, 10, 32, dtype=DTYPE)
    full = mha(x, mask=causal_mask(10))
    cache = KVCache()
    outs = [mha(x[:, :4], mask=causal_mask(4), cache=cache)]
    outs += [mha(x[:, t : t + 1], cache=cache) for t in range(4, 10)]
    torch.testing.assert_close(torch.cat(outs, dim=1), full, **TOL)
    assert cache.k.shape == (2, 2, 10, 4) and cache.nbytes() == 2 * 2 * 2 * 10 * 4 * 8


def test_rotary_inside_attention_rotates_q_and_k_not_v():
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 2, keep_weights=True, rope_base=100.0, bias=False).to(DTYPE)
    x = torch.randn(1, 6, 16, dtype=DTYPE)
    mha(x, mask=causal_mask(6))
    q = apply_rotary(mha._split_heads(mha.w_q(x)), base=100.0)
    k = apply_rotary(mha._split_heads(mha.w_k(x)), base=100.0)
    scores = (q @ k.transpose(-2, -1) / 8**0.5).masked_fill(~causal_mask(6), float("-inf"))
    torch.testing.assert_close(mha.last_weights, scores.softmax(-1), **TOL)


def test_bad_kv_heads_are_refused():
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        MultiHeadAttention(32, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="multiple of n_kv_head"):
        ModernGPTConfig(n_head=4, n_kv_head=3)


# ---------------------------------------------------------------- sliding windows and tiled attention


def test_sliding_window_mask_is_a_band():
    m = sliding_window_mask(6, 3)
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    assert torch.equal(m, (j <= i) & (i - j < 3))
    assert torch.equal(sliding_window_mask(4, 100, past=2), causal_mask(4, past=2))
    assert torch.equal(sliding_window_mask(2, 3, past=4), torch.tensor([[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]]).bool())


@pytest.mark.parametrize("T_q, T_k, block", [(16, 16, 4), (13, 29, 5), (29, 29, 64), (1, 17, 3)])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
def test_tiled_attention_matches_torch(T_q, T_k, block, kind):
    torch.manual_seed(4)
    q_block = None if kind != "causal" else 3  # query blocks of another size than the key blocks
    q = torch.randn(2, 3, T_q, 8, dtype=DTYPE, requires_grad=True)
    k = torch.randn(2, 3, T_k, 8, dtype=DTYPE, requires_grad=True)
    v = torch.randn(2, 3, T_k, 6, dtype=DTYPE, requires_grad=True)
    mask, ref_mask = None, None
    if kind == "causal":
        ref_mask = causal_mask(T_q, past=T_k - T_q)
    elif kind == "bool":
        mask = ref_mask = torch.rand(2, 1, T_q, T_k) > 0.3
        mask[..., 0] = True  # every row keeps a key (rows with none: see the next test)
    elif kind == "float":
        mask = ref_mask = torch.randn(2, 3, T_q, T_k, dtype=DTYPE)
    out = tiled_attention(q, k, v, mask=mask, causal=kind == "causal", block_size=block, query_block_size=q_block)
    qa, ka, va = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qa, ka, va, attn_mask=ref_mask)
    torch.testing.assert_close(out, ref, **TOL)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    for a, b in zip(_grads(q, k, v), _grads(qa, ka, va), strict=True):
        torch.testing.assert_close(a, b, **TOL)


def test_tiled_attention_empty_rows_are_zero_and_finite():
    q = torch.randn(1, 4, 8, dtype=DTYPE, requires_grad=True)
    k, v = torch.randn(1, 9, 8, dtype=DTYPE), torch.randn(1, 9, 5, dtype=DTYPE)
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[2] = False
    out = tiled_attention(q, k, v, mask=mask, block_size=4)
    assert torch.equal(out[0, 2], torch.zeros(5, dtype=DTYPE))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    with pytest.raises(ValueError, match="T_q <= T_k"):
        tiled_attention(torch.randn(5, 8), torch.randn(3, 8), torch.randn(3, 8), causal=True)
    with pytest.raises(ValueError, match="T_q=4 queries"):
        tiled_attention(q, k, v, mask=torch.ones(3, 9, dtype=torch.bool))


def _matmul_flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_causal_tiled_attention_skips_the_blocks_above_the_diagonal():
    T, d, heads, block = 1024, 64, 2, 128
    q, k, v = (torch.randn(1, heads, T, d) for _ in range(3))
    with torch.no_grad():
        full = _matmul_flops(lambda: tiled_attention(q, k, v, block_size=block))
        causal = _matmul_flops(lambda: tiled_attention(q, k, v, causal=True, block_size=block))
    # Full: QK^T and PV, 2 * T * T * d multiply-adds each, per head.
    assert full == 2 * 2 * T * T * d * heads, (
        f"full tiled attention counted {full:,} FLOPs, expected {4 * T * T * d * heads:,}"
    )
    # 8 query blocks see 1 + 2 + ... + 8 = 36 of the 64 tiles.
    assert causal == full * 36 // 64, f"causal counted {causal:,} FLOPs, expected 36/64 of {full:,}"
    assert causal <= 0.6 * full, f"causal/full = {causal / full:.3f}, expected <= 0.6"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tiled_attention_in_low_precision_keeps_float32_statistics(dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 512, 64, generator=g) for _ in range(3))
    q = q * 8  # large scores: where running sums rounded to 8 or 11 bits go wrong
    low = [t.to(dtype) for t in (q, k, v)]
    exact = F.scaled_dot_product_attention(*[t.double() for t in low], is_causal=True)  # the same rounded inputs
    out = tiled_attention(*low, causal=True, block_size=64)
    assert out.dtype == dtype, f"the output should keep the inputs' dtype {dtype}, got {out.dtype}"
    ours = (out.double() - exact).abs().max().item()
    theirs = (F.scaled_dot_product_attention(*low, is_causal=True).double() - exact).abs().max().item()
    assert ours <= 1.25 * theirs, f"tiled error {ours:.3e} against SDPA's {theirs:.3e} (expected <= 1.25x)"


def test_causal_alignment_is_bottom_right_where_torch_is_causal_is_top_left():
    torch.manual_seed(3)
    T_q, T_k = 5, 12  # 5 new tokens after 7 cached ones
    q, k, v = (
        torch.randn(1, 2, T_q, 8, dtype=DTYPE),
        torch.randn(1, 2, T_k, 8, dtype=DTYPE),
        torch.randn(1, 2, T_k, 8, dtype=DTYPE),
    )
    bottom_right = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)  # query i at position 7 + i
    top_left = torch.ones(T_q, T_k, dtype=torch.bool).tril()  # query i at position i
    ours = tiled_attention(q, k, v, causal=True, block_size=4)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right), **TOL)
    torch.testing.assert_close(
        ours, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T_q, past=T_k - T_q)), **TOL
    )
    torch_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(torch_causal, F.scaled_dot_product_attention(q, k, v, attn_mask=top_left), **TOL)
    gap = (ours - torch_causal).abs().max().item()
    assert gap > 0.1, f"bottom-right and top-left alignments should differ for T_q != T_k, max difference {gap}"


# ---------------------------------------------------------------- against Hugging Face's Llama


def _llama_config(**kw):
    from transformers import LlamaConfig

    cfg = LlamaConfig(
        vocab_size=kw.get("vocab_size", 23),
        hidden_size=32,
        intermediate_size=88,
        num_hidden_layers=kw.get("n_layer", 2),
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        attention_bias=False,
        mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
    )
    cfg._attn_implementation = "sdpa"
    return cfg


def test_rotate_half_permutation_links_the_two_rotary_layouts():
    d, T = 8, 5
    x = torch.randn(T, d, dtype=DTYPE)
    inv = 1.0 / 500.0 ** (torch.arange(0, d, 2, dtype=DTYPE) / d)
    ang = torch.arange(T, dtype=DTYPE)[:, None] * inv
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    rotated_half = x * cos + torch.cat([-x[:, d // 2 :], x[:, : d // 2]], -1) * sin  # Llama's rotate_half form
    perm = rotate_half_permutation(d)
    torch.testing.assert_close(rotated_half[:, perm], apply_rotary(x[:, perm], base=500.0), **TOL)


def test_modern_block_matches_llama_decoder_layer():
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    torch.manual_seed(5)
    cfg = _llama_config()
    layer = LlamaDecoderLayer(cfg, layer_idx=0).to(DTYPE)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
    block = copy_llama_weights(ModernBlock(32, 4, 2, 88, rope_base=500.0).to(DTYPE), layer)
    x = torch.randn(2, 11, 32, dtype=DTYPE, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    position_ids = torch.arange(11)[None].expand(2, 11)
    # Llama's rotary tables, in float64 (its own LlamaRotaryEmbedding would round them to float32)
    angles = torch.arange(11, dtype=DTYPE)[:, None] / 500.0 ** (torch.arange(0, 8, 2, dtype=DTYPE) / 8)  # (T, 4)
    emb = torch.cat([angles, angles], dim=-1)[None].expand(2, 11, 8)  # (B, T, head_dim): rotate-half layout
    cos_sin = (emb.cos(), emb.sin())
    ref = layer(x2, attention_mask=None, position_ids=position_ids, position_embeddings=cos_sin)
    ref = ref[0] if isinstance(ref, tuple) else ref
    out = block(x, causal_mask(11))
    torch.testing.assert_close(out, ref, **LLAMA_TOL)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, **LLAMA_TOL)
    torch.testing.assert_close(block.ff.w1.weight.grad, layer.mlp.gate_proj.weight.grad, **LLAMA_TOL)
    torch.testing.assert_close(block.self_attn.w_v.weight.grad, layer.self_attn.v_proj.weight.grad, **LLAMA_TOL)


def test_modern_gpt_matches_llama_for_causal_lm():
    from transformers import LlamaForCausalLM

    torch.manual_seed(6)
    llama = LlamaForCausalLM(_llama_config()).to(DTYPE)
    with torch.no_grad():
        for p in llama.parameters():
            p.normal_(0.0, 0.3)
    model = ModernGPT(
        ModernGPTConfig(
            vocab_size=23, block_size=64, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, d_ff=88, rope_base=500.0
        )
    ).to(DTYPE)
    copy_from_llama(model, llama)
    idx = torch.randint(0, 23, (2, 13))
    logits, loss = model(idx, idx)
    ref = llama(input_ids=idx, labels=idx)
    torch.testing.assert_close(logits, ref.logits, **LLAMA_TOL)
    loss.backward()
    # Llama's loss shifts the labels itself; ours takes targets as given: compare gradients of one loss.
    llama.zero_grad()
    F.cross_entropy(ref.logits.reshape(-1, 23), idx.reshape(-1)).backward()
    torch.testing.assert_close(model.tok_emb.weight.grad, llama.model.embed_tokens.weight.grad, **LLAMA_TOL)
    torch.testing.assert_close(
        model.blocks[1].ff.w2.weight.grad, llama.model.layers[1].mlp.down_proj.weight.grad, **LLAMA_TOL
    )
    perm = rotate_half_permutation(8)
    want = llama.model.layers[0].self_attn.k_proj.weight.grad.view(2, 8, 32)[:, perm].reshape(16, 32)
    torch.testing.assert_close(model.blocks[0].self_attn.w_k.weight.grad, want, **LLAMA_TOL)


# ---------------------------------------------------------------- the model and generation


@pytest.mark.parametrize("window", [None, 6])
def test_rolling_cache_generates_the_same_tokens_past_block_size(window):
    torch.manual_seed(7)
    model = ModernGPT(
        ModernGPTConfig(vocab_size=20, block_size=12, n_layer=2, n_head=4, n_kv_head=1, n_embd=32, window=window)
    )
    idx = torch.randint(0, 20, (2, 5))
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a = generate(model, idx, 40, temperature=1.0, generator=g1)
    b = generate(model, idx, 40, temperature=1.0, generator=g2, use_cache=True)
    assert torch.equal(a, b)
    cache = model.new_kv_cache()
    model(a, kv_cache=cache)
    span = window or 12
    assert len(cache[0]) == span - 1 and cache[0].seen == 45 and cache[0].k.shape[1] == 1


def test_modern_gpt_shape_and_no_bias_and_tied():
    model = ModernGPT(ModernGPTConfig())
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert model.lm_head.weight is model.tok_emb.weight
    logits, loss = model(torch.zeros(2, 100, dtype=torch.long))  # longer than block_size: a sliding window
    assert logits.shape == (2, 100, 65) and loss is None
    with pytest.raises(ValueError, match="token ids must be in 0..64"):
        model(torch.full((1, 3), 65))
    with pytest.raises(TypeError, match="expects a ModernGPTConfig"):
        ModernGPT(object())


# ---------------------------------------------------------------- QK-norm, RoPE scaling, sinks, int8 cache


def test_qk_norm_matches_rms_norm_then_attention():
    from course_lib.positional import apply_rotary as rotate

    torch.manual_seed(8)
    attn = MultiHeadAttention(32, 4, bias=False, keep_weights=False, n_kv_heads=2, rope_base=100.0, qk_norm=True)
    attn = attn.to(DTYPE)
    with torch.no_grad():
        attn.q_norm.weight.normal_(1.0, 0.3)
        attn.k_norm.weight.normal_(1.0, 0.3)
    x = torch.randn(2, 9, 32, dtype=DTYPE, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = attn(x, mask=causal_mask(9))
    q = x2 @ attn.w_q.weight.T
    k = x2 @ attn.w_k.weight.T
    v = x2 @ attn.w_v.weight.T
    q, k, v = (t.view(2, 9, -1, 8).transpose(1, 2) for t in (q, k, v))
    q = F.rms_norm(q, (8,), attn.q_norm.weight, eps=1e-5)
    k = F.rms_norm(k, (8,), attn.k_norm.weight, eps=1e-5)
    q, k = rotate(q, base=100.0), rotate(k, base=100.0)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = ref.transpose(1, 2).reshape(2, 9, 32) @ attn.w_o.weight.T
    torch.testing.assert_close(out, ref, **TOL)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, **TOL)
    # each head's queries are normalised: scaling w_q leaves the output unchanged (up to eps)
    with torch.no_grad():
        attn.w_q.weight.mul_(5.0)
        torch.testing.assert_close(attn(x, mask=causal_mask(9)), out, atol=1e-4, rtol=1e-4)


def test_modern_gpt_with_qk_norm_has_the_gains_and_a_cache():
    model = ModernGPT(
        ModernGPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, qk_norm=True)
    )
    names = {name for name, _ in model.named_parameters()}
    assert "blocks.0.self_attn.q_norm.weight" in names and "blocks.1.self_attn.k_norm.weight" in names, sorted(names)
    idx = torch.randint(0, 11, (1, 20))
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a = generate(model, idx[:, :3], 20, generator=g1)
    b = generate(model, idx[:, :3], 20, generator=g2, use_cache=True)
    assert torch.equal(a, b), "QK-norm: cached and uncached generation differ"


def _hf_rope(rope_type: str, head_dim: int, base: float, **params):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        max_position_embeddings=params.pop("max_position_embeddings", 64),
        rope_parameters={"rope_type": rope_type, "rope_theta": base, **params},
    )
    inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
    return inv_freq.double(), float(factor)


def test_rope_scaling_matches_transformers():
    from course_lib.positional import RopeScaling, rope_frequencies

    d, base = 32, 10000.0
    cases = [
        ("linear", RopeScaling("linear", 4.0), dict(factor=4.0)),
        (
            "llama3",
            RopeScaling("llama3", 8.0, original_length=64, low_freq_factor=1.0, high_freq_factor=4.0),
            dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64),
        ),
        (
            "yarn",
            RopeScaling("yarn", 4.0, original_length=64),
            dict(
                factor=4.0,
                original_max_position_embeddings=64,
                beta_fast=32.0,
                beta_slow=1.0,
                max_position_embeddings=256,
            ),
        ),
    ]
    for rope_type, ours, params in cases:
        omega, factor = rope_frequencies(d, base, ours)
        want, want_factor = _hf_rope(rope_type, d, base, **params)
        torch.testing.assert_close(omega, want, atol=1e-9, rtol=1e-5, msg=lambda m, t=rope_type: f"{t}: {m}")
        assert abs(factor - want_factor) < 1e-6, f"{rope_type}: attention factor {factor} against {want_factor}"


def test_ntk_scaling_keeps_the_fastest_pair_and_slows_the_slowest_by_the_factor():
    from course_lib.positional import RopeScaling, frequencies, rope_frequencies

    d, base, s = 32, 10000.0, 4.0
    plain = frequencies(d, base)
    omega, factor = rope_frequencies(d, base, RopeScaling("ntk", s))
    assert omega[0].item() == 1.0 and factor == 1.0, (omega[0].item(), factor)
    torch.testing.assert_close(omega[-1], plain[-1] / s, atol=0.0, rtol=1e-12)
    assert bool((omega[1:-1] < plain[1:-1]).all() and (omega[1:-1] > plain[1:-1] / s).all()), "middle pairs not between"
    with pytest.raises(ValueError, match="needs original_length"):
        RopeScaling("llama3", 8.0)
    with pytest.raises(ValueError, match="kind must be one of"):
        RopeScaling("dynamic", 2.0)


def test_modern_gpt_rope_scaling_rotates_with_the_scaled_angles():
    from course_lib.positional import RopeScaling

    torch.manual_seed(9)
    plain = ModernGPT(ModernGPTConfig(vocab_size=11, block_size=40, n_layer=1, n_head=2, n_kv_head=2, n_embd=16))
    linear = ModernGPT(
        ModernGPTConfig(
            vocab_size=11,
            block_size=40,
            n_layer=1,
            n_head=2,
            n_kv_head=2,
            n_embd=16,
            rope_scaling=RopeScaling("linear", 2.0),
        )
    )
    linear.load_state_dict(plain.state_dict())
    idx = torch.randint(0, 11, (1, 40))
    # Position interpolation by 2 at positions 0, 2, 4, ... equals the plain model's rotation at 0, 1, 2, ...:
    # check it on the attention scores of the first layer.
    attn_p, attn_l = plain.blocks[0].self_attn, linear.blocks[0].self_attn
    t = torch.randn(1, 2, 40, 8)
    torch.testing.assert_close(attn_l._rotate(t, 0)[:, :, ::2], apply_rotary(t[:, :, ::2], torch.arange(0, 20)))
    assert not torch.allclose(attn_p._rotate(t, 0), attn_l._rotate(t, 0)), "scaling changed nothing"
    assert plain(idx)[0].shape == linear(idx)[0].shape
    saved = dict(linear.config.__dict__, rope_scaling={"kind": "linear", "factor": 2.0})
    assert ModernGPTConfig(**saved).rope_scaling == RopeScaling("linear", 2.0), "a saved dict is not read back"


def test_kv_cache_with_sinks_keeps_the_first_positions():
    cache = KVCache(max_len=5, sinks=2)
    k = torch.arange(9.0).view(1, 1, 9, 1)
    cache.append(k[:, :, :3], k[:, :, :3])
    for t in range(3, 9):
        cache.append(k[:, :, t : t + 1], k[:, :, t : t + 1])
    assert cache.k.flatten().tolist() == [0.0, 1.0, 6.0, 7.0, 8.0], cache.k.flatten().tolist()
    assert cache.seen == 9 and len(cache) == 5, (cache.seen, len(cache))
    with pytest.raises(ValueError, match="0 < sinks < max_len"):
        KVCache(max_len=4, sinks=4)


def test_rolling_cache_with_sinks_equals_recomputing_the_kept_tokens():
    # With one layer a key depends on its own token only, so the step that sees the sinks and the last
    # W - sinks - 1 tokens equals the model run afresh on exactly those tokens (positions 0, 1, ...).
    torch.manual_seed(10)
    span, sinks = 8, 2
    model = ModernGPT(ModernGPTConfig(vocab_size=13, block_size=span, n_layer=1, n_head=2, n_kv_head=1, n_embd=16))
    idx = torch.randint(0, 13, (2, 30))
    cache = model.new_kv_cache(sinks=sinks)
    with torch.no_grad():
        logits, _ = model(idx, kv_cache=cache)
        for t in (span, 15, 29):
            kept = torch.cat([idx[:, :sinks], idx[:, t - (span - sinks) + 1 : t + 1]], dim=1)  # (B, span)
            fresh = model(kept)[0][:, -1]
            torch.testing.assert_close(logits[:, t], fresh, msg=lambda m, t=t: f"step {t}: {m}")
        plain = model(idx[:, :span])[0]  # within the span, sinks change nothing
        torch.testing.assert_close(logits[:, :span], plain)
        no_sinks = model(idx)[0]  # the sliding window: differs once the first tokens are evicted
        assert not torch.allclose(logits[:, 20], no_sinks[:, 20]), "the sinks made no difference"
    assert len(cache[0]) == span - 1 and cache[0].sinks == sinks


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")  # deprecated, still the reference
def test_quantize_int8_matches_torch_quantize_per_channel():
    from course_lib.attention import dequantize_int8, quantize_int8

    torch.manual_seed(11)
    k = torch.randn(2, 3, 10, 8)
    k[..., 5] *= 20  # an outlier channel
    for dim in (-2, -1):  # keys: one scale per channel (shared along the tokens); values: one per token
        q, scale = quantize_int8(k, dim)
        assert q.dtype == torch.int8 and scale.shape[dim] == 1, (q.dtype, scale.shape)
        err = (dequantize_int8(q, scale) - k).abs()
        assert bool((err <= scale / 2 + 1e-6).all()), f"dim {dim}: error {err.max():.3g} above half a step"
        assert int(q.abs().amax()) == 127, f"dim {dim}: the largest entry should map to 127, got {int(q.abs().amax())}"
    # torch's own per-channel quantisation on a 2-D (T, channels) slice: one scale per channel (axis 1)
    t = k[0, 0]  # (10, 8)
    q, scale = quantize_int8(t, dim=0)
    ref = torch.quantize_per_channel(t, scale.flatten().double(), torch.zeros(8, dtype=torch.long), 1, torch.qint8)
    assert torch.equal(q, ref.int_repr()), (q, ref.int_repr())
    q, scale = quantize_int8(t, dim=1)  # one scale per token (axis 0)
    ref = torch.quantize_per_channel(t, scale.flatten().double(), torch.zeros(10, dtype=torch.long), 0, torch.qint8)
    assert torch.equal(q, ref.int_repr()), (q, ref.int_repr())
