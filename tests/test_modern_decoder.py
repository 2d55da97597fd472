"""Lesson 12's library pieces against independent references, forward and backward:

- `layers.RMSNorm` (fused and not) against `torch.nn.RMSNorm`; `layers.SwiGLU` against the formula
  written with torch's functional ops;
- grouped-query `attention.MultiHeadAttention` against `F.scaled_dot_product_attention(...,
  enable_gqa=True)` fed the same projections; its KV cache stores only the key/value heads;
- `attention.tiled_attention` against `F.scaled_dot_product_attention` (causal, boolean and float
  masks, uneven blocks, T_q != T_k, rows with nothing allowed);
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
    out = tiled_attention(q, k, v, mask=mask, causal=kind == "causal", block_size=block)
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
