"""Multi-head attention (lesson 08) against independent references.

The reference is `torch.nn.MultiheadAttention` with our four projection matrices copied into it:
its `in_proj_weight` is our `w_q`, `w_k`, `w_v` weights stacked row-wise and its `out_proj` is our
`w_o`. Everything runs in float64 so the two agree to round-off, forward and backward.

Conventions to keep apart: our masks say True = "may attend"; `nn.MultiheadAttention`'s boolean
`attn_mask` says True = "may NOT attend", so the reference always gets the inverted mask.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib.attention import MultiHeadAttention, causal_mask

DTYPE = torch.float64

# (d_model, n_heads, bias): one head, several, an odd head size, and one feature per head
CONFIGS = [(8, 1, True), (8, 2, True), (12, 3, False), (16, 4, True), (16, 16, True), (20, 5, False)]


def make_pair(d_model: int, n_heads: int, bias: bool = True, seed: int = 0):
    """Our module and torch's, holding the same weights (float64, seeded)."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(d_model, n_heads, bias=bias).to(DTYPE)
    ref = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True).to(DTYPE)
    with torch.no_grad():
        # nn.Linear's default init gives biases too small to catch a missing one: make them bigger
        for lin in (ours.w_q, ours.w_k, ours.w_v, ours.w_o):
            if lin.bias is not None:
                lin.bias.normal_(0.0, 0.5)
        ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight], dim=0))
        ref.out_proj.weight.copy_(ours.w_o.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias], dim=0))
            ref.out_proj.bias.copy_(ours.w_o.bias)
    return ours, ref


def reference_grads(ref: nn.MultiheadAttention, d_model: int) -> dict[str, torch.Tensor]:
    """The reference's gradients, renamed and sliced to match our parameter names."""
    w = ref.in_proj_weight.grad
    grads = {
        "w_q.weight": w[:d_model],
        "w_k.weight": w[d_model : 2 * d_model],
        "w_v.weight": w[2 * d_model :],
        "w_o.weight": ref.out_proj.weight.grad,
    }
    if ref.in_proj_bias is not None:
        b = ref.in_proj_bias.grad
        grads |= {
            "w_q.bias": b[:d_model],
            "w_k.bias": b[d_model : 2 * d_model],
            "w_v.bias": b[2 * d_model :],
            "w_o.bias": ref.out_proj.bias.grad,
        }
    return grads


def assert_same_grads(ours: MultiHeadAttention, ref: nn.MultiheadAttention, d_model: int) -> None:
    expected = reference_grads(ref, d_model)
    got = {name: p.grad for name, p in ours.named_parameters()}
    assert set(got) == set(expected), f"parameters {sorted(got)}, expected {sorted(expected)}"
    for name, g in expected.items():
        assert got[name] is not None, f"{name} received no gradient"
        assert_close(got[name], g, msg=lambda m, name=name: f"gradient of {name} differs from torch's: {m}")


def inputs(*shape: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=DTYPE).requires_grad_(True)


def backward_both(out: torch.Tensor, ref_out: torch.Tensor, seed: int = 2) -> None:
    """Backpropagate the same random upstream gradient through both outputs."""
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(out.shape, generator=g, dtype=DTYPE)
    (out * upstream).sum().backward()
    (ref_out * upstream).sum().backward()


# --- forward and backward against nn.MultiheadAttention --------------------------------------------


@pytest.mark.parametrize("d_model, n_heads, bias", CONFIGS)
def test_self_attention_matches_torch(d_model, n_heads, bias):
    ours, ref = make_pair(d_model, n_heads, bias)
    x = inputs(3, 7, d_model)
    x_ref = x.detach().clone().requires_grad_(True)

    out = ours(x)
    ref_out, _ = ref(x_ref, x_ref, x_ref, need_weights=False)
    assert out.shape == (3, 7, d_model), f"output shape {tuple(out.shape)}, expected (3, 7, {d_model})"
    assert_close(out, ref_out)

    backward_both(out, ref_out)
    assert_close(x.grad, x_ref.grad, msg=lambda m: f"gradient of the input differs: {m}")
    assert_same_grads(ours, ref, d_model)


@pytest.mark.parametrize("d_model, n_heads, bias", CONFIGS)
def test_cross_attention_matches_torch(d_model, n_heads, bias):
    ours, ref = make_pair(d_model, n_heads, bias)
    x, ctx = inputs(2, 5, d_model, seed=1), inputs(2, 9, d_model, seed=3)  # 5 queries, 9 keys/values
    x_ref = x.detach().clone().requires_grad_(True)
    ctx_ref = ctx.detach().clone().requires_grad_(True)

    out = ours(x, context=ctx)
    ref_out, ref_w = ref(x_ref, ctx_ref, ctx_ref, need_weights=True, average_attn_weights=False)
    assert out.shape == (2, 5, d_model), f"output shape {tuple(out.shape)}, expected (2, 5, {d_model})"
    assert_close(out, ref_out)
    assert ours.last_weights.shape == (2, n_heads, 5, 9), (
        f"last_weights shape {tuple(ours.last_weights.shape)}, expected (2, {n_heads}, 5, 9)"
    )
    assert_close(ours.last_weights.detach(), ref_w.detach())

    backward_both(out, ref_out)
    assert_close(x.grad, x_ref.grad, msg=lambda m: f"gradient of the queries' input differs: {m}")
    assert_close(ctx.grad, ctx_ref.grad, msg=lambda m: f"gradient of the context differs: {m}")
    assert_same_grads(ours, ref, d_model)


@pytest.mark.parametrize("d_model, n_heads, bias", CONFIGS)
def test_causal_mask_matches_torch(d_model, n_heads, bias):
    T = 6
    ours, ref = make_pair(d_model, n_heads, bias)
    x = inputs(2, T, d_model)
    x_ref = x.detach().clone().requires_grad_(True)
    mask = causal_mask(T)
    assert mask.dtype == torch.bool and mask.shape == (T, T), f"causal_mask gave {mask.dtype} {tuple(mask.shape)}"

    out = ours(x, mask=mask)
    # torch's boolean attn_mask means the opposite: True = NOT allowed to attend
    ref_out, ref_w = ref(x_ref, x_ref, x_ref, attn_mask=~mask, need_weights=True, average_attn_weights=False)
    assert_close(out, ref_out)
    assert_close(ours.last_weights.detach(), ref_w.detach())
    upper = ~mask
    assert ours.last_weights[..., upper].abs().max().item() == 0.0, "weights above the diagonal are not zero"

    backward_both(out, ref_out)
    assert_close(x.grad, x_ref.grad, msg=lambda m: f"gradient of the input differs: {m}")
    assert_same_grads(ours, ref, d_model)


def test_causal_outputs_ignore_future_tokens():
    """With a causal mask, changing the last token changes no earlier output."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).to(DTYPE)
    x = inputs(1, 6, 16).detach()
    y = x.clone()
    y[:, -1] += 10.0
    mask = causal_mask(6)
    a, b = mha(x, mask=mask), mha(y, mask=mask)
    assert_close(a[:, :-1], b[:, :-1])
    diff = (a[:, -1] - b[:, -1]).abs().max().item()
    assert diff > 1e-3, f"the last output did not change (max difference {diff}) although its token did"


@pytest.mark.parametrize("d_model, n_heads", [(8, 2), (16, 4)])
def test_last_weights_match_torch_per_head(d_model, n_heads):
    ours, ref = make_pair(d_model, n_heads)
    x = inputs(2, 5, d_model).detach()
    with torch.no_grad():
        ours(x)
        _, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
    w = ours.last_weights
    assert w.shape == (2, n_heads, 5, 5), f"last_weights shape {tuple(w.shape)}, expected (2, {n_heads}, 5, 5)"
    assert_close(w, ref_w)
    assert_close(w.sum(-1), torch.ones(2, n_heads, 5, dtype=DTYPE), msg=lambda m: f"rows do not sum to 1: {m}")
    # the heads really differ: an implementation that averaged or repeated one head would not
    spread = (w[:, 0] - w[:, 1]).abs().max().item()
    assert spread > 1e-3, f"heads 0 and 1 have identical weights (max difference {spread})"


# --- against a loop over heads, written out here ---------------------------------------------------


def looped_mha(mha: MultiHeadAttention, x: torch.Tensor, context: torch.Tensor | None = None, mask=None):
    """Multi-head attention one head at a time: slice each head's rows of W_q, W_k, W_v, attend, concat."""
    context = x if context is None else context
    d_model, h = mha.w_q.in_features, mha.n_heads
    d_k = d_model // h

    def project(lin: nn.Linear, inp: torch.Tensor, rows: slice) -> torch.Tensor:
        b = None if lin.bias is None else lin.bias[rows]
        return F.linear(inp, lin.weight[rows], b)  # (B, T, d_k): this head's slice of the projection

    heads = []
    for i in range(h):
        rows = slice(i * d_k, (i + 1) * d_k)
        q, k, v = project(mha.w_q, x, rows), project(mha.w_k, context, rows), project(mha.w_v, context, rows)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, T, T_ctx)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v)  # (B, T, d_k)
    return mha.w_o(torch.cat(heads, dim=-1))  # (B, T, d_model)


@pytest.mark.parametrize("d_model, n_heads, bias", CONFIGS)
def test_batched_heads_equal_looped_heads(d_model, n_heads, bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model, n_heads, bias=bias).to(DTYPE)
    x, ctx = inputs(2, 6, d_model, seed=4), inputs(2, 4, d_model, seed=5)
    assert_close(mha(x), looped_mha(mha, x), msg=lambda m: f"self-attention: {m}")
    assert_close(mha(x, context=ctx), looped_mha(mha, x, ctx), msg=lambda m: f"cross-attention: {m}")
    mask = causal_mask(6)
    assert_close(mha(x, mask=mask), looped_mha(mha, x, mask=mask), msg=lambda m: f"causal: {m}")


def test_module_exposes_its_layers():
    mha = MultiHeadAttention(12, 3)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        lin = getattr(mha, name, None)
        assert isinstance(lin, nn.Linear), f"{name} should be an nn.Linear, got {type(lin).__name__}"
        assert (lin.in_features, lin.out_features) == (12, 12), (
            f"{name} maps {lin.in_features} -> {lin.out_features}, expected 12 -> 12"
        )
    assert mha.n_heads == 3, f"n_heads is {mha.n_heads}, expected 3"


# --- parameter count --------------------------------------------------------------------------------


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16])
def test_parameter_count_does_not_depend_on_heads(n_heads):
    d = 64
    with_bias = sum(p.numel() for p in MultiHeadAttention(d, n_heads).parameters())
    without = sum(p.numel() for p in MultiHeadAttention(d, n_heads, bias=False).parameters())
    assert with_bias == 4 * d * d + 4 * d, f"{with_bias} parameters, expected 4*d^2 + 4*d = {4 * d * d + 4 * d}"
    assert without == 4 * d * d, f"{without} parameters without bias, expected 4*d^2 = {4 * d * d}"
    torch_count = sum(p.numel() for p in nn.MultiheadAttention(d, n_heads, batch_first=True).parameters())
    assert with_bias == torch_count, f"{with_bias} parameters, nn.MultiheadAttention has {torch_count}"


def test_parameter_count_of_the_paper():
    """d_model = 512, h = 8, d_k = 64: 3*512*64*8 + 512^2 = 4*512^2 = 1,048,576 weights."""
    mha = MultiHeadAttention(512, 8, bias=False)
    n = sum(p.numel() for p in mha.parameters())
    assert n == 3 * 512 * 64 * 8 + 512 * 512 == 1_048_576, f"{n} weights, expected 1,048,576"


# --- errors for bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("d_model, n_heads", [(10, 3), (512, 7), (6, 4)])
def test_indivisible_d_model_names_both_numbers(d_model, n_heads):
    with pytest.raises(ValueError) as info:
        MultiHeadAttention(d_model, n_heads)
    text = str(info.value)
    assert str(d_model) in text and str(n_heads) in text, f"the message should name {d_model} and {n_heads}: {text!r}"


@pytest.mark.parametrize("n_heads", [0, -2])
def test_non_positive_heads_rejected(n_heads):
    with pytest.raises(ValueError, match=str(n_heads)):
        MultiHeadAttention(8, n_heads)


def test_wrong_feature_size_rejected():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="8"):
        mha(torch.randn(2, 5, 6))  # 6 features instead of d_model = 8


def test_wrong_context_feature_size_rejected():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="8"):
        mha(torch.randn(2, 5, 8), context=torch.randn(2, 4, 6))


def test_non_batched_input_rejected():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(B, T"):
        mha(torch.randn(5, 8))  # no batch axis


# --- the per-head figure ----------------------------------------------------------------------------


def test_head_grid_draws_one_panel_per_head():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib.viz import head_grid

    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3)
    words = "the animal was too tired".split()
    mha(torch.randn(1, 5, 12))
    fig = head_grid(mha.last_weights, words, title="heads")  # (1, 3, 5, 5) as stored by the module
    images = [ax for ax in fig.axes if ax.images]
    assert len(images) == 3, f"{len(images)} heatmaps drawn, expected one per head (3)"
    for h, ax in enumerate(images):
        drawn = np.asarray(ax.images[0].get_array())
        np.testing.assert_allclose(drawn, mha.last_weights[0, h].numpy(), err_msg=f"panel {h} shows other weights")
        assert ax.images[0].get_clim() == (0.0, 1.0), f"panel {h} colour scale {ax.images[0].get_clim()}, expected (0, 1)"
    plt.close(fig)


def test_head_grid_rejects_mismatched_words():
    from course_lib.viz import head_grid

    with pytest.raises(ValueError, match="3 query words"):
        head_grid(torch.full((2, 4, 4), 0.25), ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"\(n_heads, T, T_ctx\)"):
        head_grid(torch.full((4, 4), 0.25), ["a", "b", "c", "d"])


# --- the exercise checks of lesson 08 name the usual mistakes --------------------------------------


def _check_message(check, *args, **kwargs) -> str:
    from course_lib import checks
    from course_lib.checks import lesson08

    with pytest.raises(checks.CheckFailed) as info:
        check(*args, **kwargs)
    return str(info.value)


def _mha_forward(x, p, n_heads, mask=None, *, merge_transpose=True, as_numpy=False):
    B, T, d = x.shape
    q, k, v = (F.linear(x, p[f"w_{n}"], p[f"b_{n}"]).view(B, T, n_heads, d // n_heads).transpose(1, 2) for n in "qkv")
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)  # (B, h, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_k)
    out = out.transpose(1, 2).reshape(B, T, d) if merge_transpose else out.reshape(B, T, d)
    out = F.linear(out, p["w_o"], p["b_o"])
    return out.numpy() if as_numpy else out


def test_mha_forward_check_names_a_merge_without_transpose_and_wants_a_tensor():
    from course_lib import checks
    from course_lib.checks import lesson08

    lesson08.check_mha_forward(_mha_forward)
    message = _check_message(lesson08.check_mha_forward, lambda *a, **k: _mha_forward(*a, merge_transpose=False, **k))
    assert "merged them by reshaping" in message, message
    message = _check_message(lesson08.check_mha_forward, lambda *a, **k: _mha_forward(*a, as_numpy=True, **k))
    assert "expected a torch.Tensor, got ndarray" in message, message


def test_combine_check_explains_a_missing_transpose():
    from course_lib import checks
    from course_lib.checks import lesson08

    def no_transpose(heads, w_o, b_o):
        d_k = heads.shape[-1]
        out = sum(heads[:, i] @ w_o[:, i * d_k:(i + 1) * d_k] for i in range(heads.shape[1]))
        return out if b_o is None else out + b_o

    message = _check_message(lesson08.check_combine_by_sum, no_transpose)
    assert "block.T" in message, message


def test_param_count_check_names_multiplying_by_the_heads():
    from course_lib import checks
    from course_lib.checks import lesson08

    message = _check_message(lesson08.check_mha_param_count, "n", 16 * 4 * 256**2, d_model=256, n_heads=16, bias=False)
    assert "the head count does not change the parameter count" in message, message


# --- mask shapes, the fused fast path, the KV cache ---------------------------------------------

from course_lib.attention import KVCache, padding_mask  # noqa: E402


def _mha(seed=0, d=16, h=4, **kwargs):
    torch.manual_seed(seed)
    return MultiHeadAttention(d, h, **kwargs).eval()


def test_per_sequence_masks_get_a_head_axis_instead_of_broadcasting_the_batch_onto_the_heads():
    # B == n_heads is the dangerous case: a (B, 1, T) mask would otherwise give head b sequence b's mask.
    m = _mha(h=4)
    x = torch.randn(4, 6, 16, generator=torch.Generator().manual_seed(1))
    lengths = [6, 4, 2, 5]
    full = padding_mask(lengths, 6)  # (B, 1, 1, T): unambiguous
    want = m(x, mask=full)
    for form in (full[:, 0], full[:, 0, 0], full[:, 0].expand(4, 6, 6)):  # (B, 1, T), (B, T), (B, T, T)
        assert_close(m(x, mask=form), want)
    per_sequence = full[:, 0].expand(4, 6, 6) & causal_mask(6)  # (B, T, T): padding and causal together
    assert_close(m(x, mask=per_sequence), m(x, mask=full & causal_mask(6)))


@pytest.mark.parametrize("shape", [(3, 6), (4, 2, 6), (2, 4, 6, 6), (6,)])
def test_masks_that_would_broadcast_wrongly_are_refused(shape):
    m = _mha()
    x = torch.randn(4, 6, 16)
    with pytest.raises(ValueError, match=r"mask of shape .* does not fit this attention; expected \(T, T_ctx\) = \(6, 6\)"):
        m(x, mask=torch.ones(shape, dtype=torch.bool))


def test_a_float_mask_gives_the_same_output_as_the_boolean_one():
    m = _mha()
    x = torch.randn(2, 5, 16)
    additive = torch.zeros(5, 5).masked_fill(~causal_mask(5), float("-inf"))
    assert_close(m(x, mask=additive), m(x, mask=causal_mask(5)))


@pytest.mark.parametrize("masking", ["none", "causal", "padding_with_empty_rows", "float"])
def test_fused_fast_path_equals_the_course_path_forward_and_backward(masking):
    x = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(2))
    mask = {"none": None, "causal": causal_mask(5),
            "padding_with_empty_rows": padding_mask([5, 2, 0], 5) & causal_mask(5),  # the last sequence is all padding
            "float": torch.zeros(5, 5).masked_fill(~causal_mask(5), float("-inf"))}[masking]
    results = []
    for keep in (True, False):
        m = _mha(keep_weights=keep)
        xi = x.clone().requires_grad_(True)
        out = m(xi, mask=mask)
        out.square().sum().backward()
        results.append((out, xi.grad, m.w_q.weight.grad, m.last_weights))
    (o1, gx1, gw1, w1), (o2, gx2, gw2, w2) = results
    assert_close(o2, o1, atol=1e-5, rtol=1e-4)
    assert_close(gx2, gx1, atol=1e-5, rtol=1e-4)
    assert_close(gw2, gw1, atol=1e-5, rtol=1e-4)
    assert not torch.isnan(o2).any() and not torch.isnan(gx2).any()
    assert w1 is not None and w2 is None, "the fast path keeps no weights"


def test_kv_cache_gives_the_same_outputs_as_full_causal_attention():
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(4))
    full = _mha()(x, mask=causal_mask(7))
    for keep in (True, False):
        m = _mha(keep_weights=keep)  # the same weights (the same seed), the course's path or torch's fused one
        cache = KVCache()
        steps = [m(x[:, :3], mask=causal_mask(3), cache=cache)]  # the prompt at once
        steps.append(m(x[:, 3:5], mask=causal_mask(2, past=3), cache=cache))  # two tokens
        steps += [m(x[:, t:t + 1], cache=cache) for t in (5, 6)]  # then one at a time, no mask needed
        assert len(cache) == 7, cache
        assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)
    cache.reset()
    assert len(cache) == 0


def test_kv_cache_refuses_cross_attention_and_a_new_batch_without_reset():
    m = _mha()
    cache = KVCache()
    m(torch.randn(2, 3, 16), cache=cache)
    with pytest.raises(ValueError, match="reset\\(\\) the cache"):
        m(torch.randn(3, 1, 16), cache=cache)
    with pytest.raises(ValueError, match="either context or cache"):
        m(torch.randn(2, 1, 16), context=torch.randn(2, 4, 16), cache=cache)


@pytest.mark.parametrize("shape", ["B,T,1", "B,1,T,1", "T,1"])
def test_a_padding_mask_on_the_query_axis_is_refused(shape):
    """(B, T, 1) broadcasts over the keys: it would hide whole query rows and let real queries attend to <pad>."""
    m = _mha()
    x = torch.randn(2, 6, 16)
    real = padding_mask([6, 4], 6)[:, 0, 0]  # (B, T)
    mask = {"B,T,1": real[:, :, None], "B,1,T,1": real[:, None, :, None], "T,1": real[0][:, None]}[shape]
    with pytest.raises(ValueError, match=r"is a mask on the queries \(rows\).*expected \(B, T_ctx\) = \(2, 6\), "
                                         r"\(B, 1, T_ctx\) or \(B, 1, 1, T_ctx\)") as info:
        m(x, mask=mask)
    assert str(tuple(mask.shape)) in str(info.value), "the message must say what was given"
    # the same padding as keys is accepted, in each key layout
    want = m(x, mask=real[:, None, None, :])
    for keys in (real, real[:, None, :]):
        assert_close(m(x, mask=keys), want)


def test_a_query_mask_is_refused_in_cross_attention_too_and_a_one_key_context_still_works():
    m = _mha()
    x, context = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    src_real = padding_mask([5, 2], 5)[:, 0, 0]  # (B, S)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 5, 1\) is a mask on the queries"):
        m(x, context=context, mask=src_real[:, :, None])
    # with a single key, a (B, T, 1) mask is an ordinary (B, T, T_ctx) mask
    one = torch.randn(2, 1, 16)
    out = m(x, context=one, mask=torch.ones(2, 3, 1, dtype=torch.bool))
    assert_close(out, m(x, context=one))


@pytest.mark.parametrize("keep", [True, False])
def test_precomputed_context_keys_and_values_give_the_same_output(keep):
    m = _mha(keep_weights=keep)
    g = torch.Generator().manual_seed(6)
    x, context = torch.randn(3, 4, 16, generator=g), torch.randn(3, 7, 16, generator=g)
    mask = padding_mask([7, 3, 5], 7)
    kv = m.context_keys_values(context)
    assert [tuple(t.shape) for t in kv] == [(3, 4, 7, 4)] * 2, "(B, n_heads, T_ctx, head_dim)"
    want = m(x, context=context, mask=mask)
    w_k_calls = []
    hook = m.w_k.register_forward_hook(lambda *a: w_k_calls.append(1))
    try:
        got = m(x, context=context, mask=mask, context_kv=kv)
    finally:
        hook.remove()
    assert not w_k_calls, "with context_kv the keys must not be projected again"
    assert_close(got, want)


def test_bad_context_kv_is_explained():
    m = _mha()
    x, context = torch.randn(2, 4, 16), torch.randn(2, 5, 16)
    k, v = m.context_keys_values(context)
    with pytest.raises(ValueError, match=r"context_kv must be the pair \(k, v\).*\(2, 4, 5, 4\), got \[\(2, 4, 3, 4\)"):
        m(x, context=context, context_kv=(k[:, :, :3], v))
    with pytest.raises(ValueError, match="context_kv is for cross-attention: pass the context too"):
        m(x, context_kv=(k, v))
