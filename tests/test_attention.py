"""course_lib.attention against torch's own softmax and scaled_dot_product_attention, forward and backward."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
)

DTYPE = torch.float64  # double precision, so forward and gradient comparisons can be tight


def _qkv(batch, T_q, T_k, d_k, d_v, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, T_q, d_k, generator=g, dtype=DTYPE, requires_grad=True)
    k = torch.randn(*batch, T_k, d_k, generator=g, dtype=DTYPE, requires_grad=True)
    v = torch.randn(*batch, T_k, d_v, generator=g, dtype=DTYPE, requires_grad=True)
    return q, k, v


def _grads(out, inputs, seed=1):
    """Gradients of a fixed random projection of `out` (so every output element matters)."""
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(out.shape, generator=g, dtype=out.dtype)
    return torch.autograd.grad((out * upstream).sum(), inputs)


# --- softmax -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_matches_torch_forward_and_backward(dim):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0), dtype=DTYPE, requires_grad=True)
    ours, ref = softmax(x, dim=dim), torch.softmax(x, dim=dim)
    assert_close(ours, ref)
    assert_close(_grads(ours, [x])[0], _grads(ref, [x])[0])


def test_softmax_large_inputs_do_not_overflow():
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]])
    out = softmax(x)
    assert torch.isfinite(out).all(), f"softmax of large inputs gave non-finite values: {out}"
    assert_close(out, torch.softmax(x, dim=-1))
    # The naive formula overflows here, which is the reason for subtracting the max.
    naive = x.exp() / x.exp().sum(-1, keepdim=True)
    assert torch.isnan(naive).any(), "the naive softmax was expected to overflow on these inputs"


def test_softmax_minus_inf_gets_zero_weight():
    x = torch.tensor([0.0, float("-inf"), 0.0])
    assert_close(softmax(x), torch.tensor([0.5, 0.0, 0.5]))


def test_softmax_rejects_bad_input():
    with pytest.raises(TypeError, match="floating-point tensor, got dtype torch.int64"):
        softmax(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="expects a torch.Tensor, got list"):
        softmax([1.0, 2.0])
    with pytest.raises(ValueError, match="at least 1 dimension"):
        softmax(torch.tensor(1.0))


# --- scaled dot-product attention against torch ----------------------------------------------------


@pytest.mark.parametrize(
    "batch, T_q, T_k, d_k, d_v",
    [
        ((), 4, 4, 8, 8),  # a single sequence, 2-D
        ((2,), 5, 5, 8, 3),  # batched, d_v != d_k
        ((2, 3), 4, 6, 8, 5),  # batch and heads (4-D), T_q != T_k (cross-attention shapes)
    ],
)
def test_sdpa_matches_torch_without_mask(batch, T_q, T_k, d_k, d_v):
    q, k, v = _qkv(batch, T_q, T_k, d_k, d_v)
    out, weights = scaled_dot_product_attention(q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, T_q, d_v), f"output shape {tuple(out.shape)}, expected {(*batch, T_q, d_v)}"
    assert weights.shape == (*batch, T_q, T_k), f"weights shape {tuple(weights.shape)}, expected {(*batch, T_q, T_k)}"
    assert_close(out, ref)
    for ours_g, ref_g in zip(_grads(out, [q, k, v]), _grads(ref, [q, k, v])):
        assert_close(ours_g, ref_g)


def test_sdpa_weights_are_softmax_of_scaled_scores_rows_sum_to_one():
    q, k, v = _qkv((2, 3), 4, 6, 8, 5)
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    assert_close(weights, expected)
    row_sums = weights.sum(-1)
    assert_close(row_sums, torch.ones_like(row_sums))
    col_sums = weights.sum(-2)
    assert not torch.allclose(col_sums, torch.ones_like(col_sums)), "columns were not expected to sum to 1"


@pytest.mark.parametrize("mask_shape", [(4, 6), (2, 1, 4, 6), (2, 3, 4, 6), (6,)])
def test_sdpa_matches_torch_with_boolean_mask(mask_shape):
    q, k, v = _qkv((2, 3), 4, 6, 8, 5)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(3)) < 0.6
    mask[..., 0] = True  # every row keeps at least one key (torch gives NaN for an empty row)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    full = mask.expand(2, 3, 4, 6)  # torch wants at least 2-D masks; ours broadcasts any shape
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=full)  # torch: True = takes part, too
    assert_close(out, ref)
    assert (weights[~full] == 0).all(), "masked positions must get weight 0"
    for ours_g, ref_g in zip(_grads(out, [q, k, v]), _grads(ref, [q, k, v])):
        assert_close(ours_g, ref_g)


def test_sdpa_causal_matches_torch_is_causal():
    q, k, v = _qkv((2, 3), 5, 5, 8, 8)
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(5))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, ref)
    assert (weights.triu(diagonal=1) == 0).all(), "weights above the diagonal must be 0 under a causal mask"
    for ours_g, ref_g in zip(_grads(out, [q, k, v]), _grads(ref, [q, k, v])):
        assert_close(ours_g, ref_g)


def test_causal_output_does_not_depend_on_future_tokens():
    q, k, v = _qkv((1,), 6, 6, 4, 4)
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(6))
    k2, v2 = k.detach().clone(), v.detach().clone()
    k2[:, 4:] += 10.0  # change only the last two positions
    v2[:, 4:] -= 10.0
    out2, _ = scaled_dot_product_attention(q, k2, v2, causal_mask(6))
    assert_close(out[:, :4], out2[:, :4])


def test_fully_masked_row_gives_zero_weights_and_output_without_nan():
    q, k, v = _qkv((2,), 3, 4, 8, 5)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[0, 1] = False  # batch 0, query 1 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert_close(weights[0, 1], torch.zeros(4, dtype=DTYPE))
    assert_close(out[0, 1], torch.zeros(5, dtype=DTYPE))
    assert torch.isfinite(out).all() and torch.isfinite(weights).all(), "NaN or inf leaked from the empty row"
    # The other rows are untouched: they match an unmasked run.
    full, _ = scaled_dot_product_attention(q, k, v)
    assert_close(out[1], full[1])
    assert_close(out[0, [0, 2]], full[0, [0, 2]])
    grads = _grads(out, [q, k, v])
    assert all(torch.isfinite(g).all() for g in grads), "NaN in the gradients from a fully masked row"
    assert_close(grads[0][0, 1], torch.zeros(8, dtype=DTYPE))  # the empty row's query gets no gradient


def test_padding_mask_shape_values_and_use():
    m = padding_mask([2, 4, 0], 4)
    assert m.shape == (3, 1, 1, 4) and m.dtype == torch.bool, f"got shape {tuple(m.shape)} dtype {m.dtype}"
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(m[:, 0, 0], expected), f"got {m[:, 0, 0].int().tolist()}"
    q, k, v = _qkv((3, 2), 4, 4, 8, 8)
    out, weights = scaled_dot_product_attention(q, k, v, m)
    # Sequence 0 with length 2 is the same as attending over its first two keys only.
    short, _ = scaled_dot_product_attention(q[0], k[0, :, :2], v[0, :, :2])
    assert_close(out[0], short)
    assert_close(out[2], torch.zeros_like(out[2]))  # length 0: nothing to attend to
    assert padding_mask(torch.tensor([1, 3]), 3)[:, 0].shape == (2, 1, 3)


def test_padding_mask_errors():
    with pytest.raises(ValueError, match=r"between 0 and T=3, got \[1, 5\]"):
        padding_mask([1, 5], 3)
    with pytest.raises(ValueError, match="1-D sequence of ints"):
        padding_mask([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="positive int"):
        padding_mask([1, 2], 0)


def test_causal_mask_matches_tril():
    for T in [1, 2, 7]:
        m = causal_mask(T)
        assert m.dtype == torch.bool, f"causal_mask dtype {m.dtype}, expected torch.bool"
        assert torch.equal(m, torch.tril(torch.ones(T, T)).bool()), f"causal_mask({T}) = {m.int().tolist()}"
    assert causal_mask(3)[0, 1].item() is False and causal_mask(3)[1, 1].item() is True
    with pytest.raises(ValueError, match="positive int"):
        causal_mask(0)
    with pytest.raises(ValueError, match="positive int"):
        causal_mask(2.5)


# --- error messages ----------------------------------------------------------------------------------


def test_sdpa_error_messages():
    q, k, v = _qkv((2,), 3, 4, 8, 5)
    with pytest.raises(ValueError, match=r"same last dimension d_k.*\(d_k=8\).*\(d_k=6\)"):
        scaled_dot_product_attention(q, k[..., :6], v)
    with pytest.raises(ValueError, match=r"same number of positions T_k.*\(T_k=4\).*\(T_k=3\)"):
        scaled_dot_product_attention(q, k, v[:, :3])
    with pytest.raises(ValueError, match=r"q must have at least 2 dimensions .*got shape \(8,\)"):
        scaled_dot_product_attention(q[0, 0], k, v)
    with pytest.raises(TypeError, match="k must be a torch.Tensor"):
        scaled_dot_product_attention(q, k.tolist(), v)
    with pytest.raises(
        TypeError,
        match=(
            r"mask must be a boolean tensor \(True = may attend\) or a "
            r"floating-point one .*got dtype torch.int64.*mask.bool\(\)"
        ),
    ):
        scaled_dot_product_attention(q, k, v, torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 3\) cannot be broadcast .* \(2, 3, 4\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 3, dtype=torch.bool))
    # A mask with more batch axes than the scores would silently change the output shape: refused.
    with pytest.raises(ValueError, match="cannot be broadcast"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 2, 3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="leading .* dimensions .* must broadcast"):
        scaled_dot_product_attention(q, k[:1].expand(3, 4, 8), v)


# --- multi-head attention (smoke tests; equivalence with nn.MultiheadAttention is in test_multihead.py)


def test_mha_shapes_weights_and_gradients():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4)
    assert [n for n, m in mha.named_children() if isinstance(m, torch.nn.Linear)] == ["w_q", "w_k", "w_v", "w_o"]
    assert all(m.weight.shape == (16, 16) for m in [mha.w_q, mha.w_k, mha.w_v, mha.w_o])
    x = torch.randn(2, 5, 16, requires_grad=True)
    y = mha(x, mask=causal_mask(5))
    assert y.shape == (2, 5, 16), f"output shape {tuple(y.shape)}, expected (2, 5, 16)"
    assert mha.last_weights.shape == (2, 4, 5, 5) and not mha.last_weights.requires_grad
    assert (mha.last_weights.triu(1) == 0).all(), "causal mask ignored"
    y.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert all(p.grad is not None for p in mha.parameters())


def test_mha_matches_manual_per_head_computation():
    torch.manual_seed(0)
    B, T, T_ctx, C, H = 2, 3, 5, 8, 2
    mha = MultiHeadAttention(C, H).double()
    x, ctx = torch.randn(B, T, C, dtype=DTYPE), torch.randn(B, T_ctx, C, dtype=DTYPE)
    y = mha(x, context=ctx)
    assert mha.last_weights.shape == (B, H, T, T_ctx)
    heads = []
    for h in range(H):
        cols = slice(h * C // H, (h + 1) * C // H)
        q, k, v = mha.w_q(x)[..., cols], mha.w_k(ctx)[..., cols], mha.w_v(ctx)[..., cols]
        heads.append(F.scaled_dot_product_attention(q, k, v))
    assert_close(y, mha.w_o(torch.cat(heads, dim=-1)))


def test_mha_errors_and_no_bias():
    with pytest.raises(ValueError, match="d_model=10 and n_heads=4"):
        MultiHeadAttention(10, 4)
    mha = MultiHeadAttention(8, 2, bias=False)
    assert all(m.bias is None for m in [mha.w_q, mha.w_k, mha.w_v, mha.w_o])
    with pytest.raises(ValueError, match=r"x must be shaped \(B, T, d_model=8\), got shape \(3, 8\)"):
        mha(torch.randn(3, 8))
    with pytest.raises(ValueError, match="same batch size"):
        mha(torch.randn(2, 3, 8), context=torch.randn(1, 4, 8))


def test_mha_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(1, 6, 8)
    mha.eval()
    assert_close(mha(x), mha(x))
    mha.train()
    assert not torch.allclose(mha(x), mha(x)), "dropout on the weights had no effect in training mode"


# --- the lesson 06 exercise checks, figures and widgets ------------------------------------------------

from course_lib import checks  # noqa: E402
from course_lib.checks import lesson06  # noqa: E402


def _reference_attention(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, mask)


def _variant(*, scale=True, transpose=True, dim=-1, mask_mode="fill", output="weighted"):
    def fn(q, k, v, mask=None):
        kt = k.transpose(-2, -1) if transpose else k
        s = q @ kt / (math.sqrt(q.shape[-1]) if scale else 1.0)
        if mask is not None and mask_mode == "fill":
            s = s.masked_fill(~mask, float("-inf"))
        elif mask is not None and mask_mode == "multiply":
            s = s * mask
        elif mask is not None and mask_mode == "inverted":
            s = s.masked_fill(mask, float("-inf"))
        w = torch.softmax(s, dim=dim)
        if mask is not None and mask_mode == "after":
            w = w * mask
        return (w @ v if output == "weighted" else v.clone()), w

    return fn


def test_check_attention_passes_the_reference(capsys):
    lesson06.check_attention(_reference_attention, hidden=True)
    assert "✔ attention: passed (6 cases)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, named",
    [
        (_variant(scale=False), "forgot to divide the scores by sqrt(d_k)"),
        (_variant(transpose=False), "instead of by k transposed"),
        (_variant(dim=-2), "softmax over the wrong axis"),
        (_variant(mask_mode="after"), "applied the mask after the softmax"),
        (_variant(mask_mode="multiply"), "multiplying the scores by 0"),
        (_variant(mask_mode="inverted"), "inverted the mask"),
        (_variant(output="v"), "not v_i"),
    ],
)
def test_check_attention_names_each_mistake(wrong, named):
    with pytest.raises(checks.CheckFailed, match=re.escape(named)):
        lesson06.check_attention(wrong)


def test_check_attention_not_attempted_and_wrong_return():
    def blank(q, k, v, mask=None):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson06.check_attention(blank)
    with pytest.raises(checks.CheckFailed, match=r"expected a tuple \(output, weights\)"):
        lesson06.check_attention(lambda q, k, v, mask=None: _reference_attention(q, k, v, mask)[0])


def test_check_softmax_names_mistakes():
    lesson06.check_softmax(lambda x: softmax(x), hidden=True)
    with pytest.raises(checks.CheckFailed, match="forgot to subtract the maximum"):
        lesson06.check_softmax(lambda x: x.exp() / x.exp().sum(-1, keepdim=True))
    with pytest.raises(checks.CheckFailed, match="wrong axis"):
        lesson06.check_softmax(lambda x: softmax(x, dim=0))
    with pytest.raises(checks.CheckFailed, match="whole tensor instead of each row"):
        lesson06.check_softmax(lambda x: (x - x.max()).exp() / (x - x.max()).exp().sum(-1, keepdim=True), hidden=True)


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda T: torch.ones(T, T, dtype=torch.bool).triu(), "upper triangle"),
        (lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1), "left out the diagonal"),
        (lambda T: torch.ones(T, T, dtype=torch.bool).triu(1), "inverted the mask"),
        (lambda T: torch.ones(T, T).tril(), "dtype is torch.float32"),
    ],
)
def test_check_causal_mask_names_mistakes(wrong, named):
    lesson06.check_causal_mask(causal_mask)
    with pytest.raises(checks.CheckFailed, match=named):
        lesson06.check_causal_mask(wrong)


def test_check_flying_arrows():
    w = torch.softmax(torch.tensor([1.0, -1.0]) / math.sqrt(2), dim=0)
    lesson06.check_flying_arrows([0.7071, -0.7071], w, [-w[1].item(), w[1].item()])
    with pytest.raises(checks.CheckFailed, match=r"forgot to divide by sqrt\(d_k\)"):
        lesson06.check_flying_arrows([1.0, -1.0], w, [-0.2, 0.2])
    with pytest.raises(checks.CheckFailed, match="own value"):
        lesson06.check_flying_arrows([0.7071, -0.7071], w, [0.0, 0.0])


def test_attention_figures_and_widgets():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import viz, widgets

    fig = viz.attention_bars(["a", "b"], torch.tensor([0.25, 0.75]))
    assert [round(p.get_height(), 2) for p in fig.axes[0].patches] == [0.25, 0.75]
    with pytest.raises(ValueError, match="one weight per label"):
        viz.attention_bars(["a"], [0.5, 0.5])
    viz.attention_graph(["a", "b", "c"], torch.full((3, 3), 1 / 3))
    with pytest.raises(ValueError, match=r"\(N, N\) weight matrix for N=2"):
        viz.attention_graph(["a", "b"], torch.ones(3, 3))
    explorer = widgets.softmax_temperature_explorer([2.0, 1.0, 0.0])
    explorer.children[0].value = 5.0  # redraws without error
    box = widgets.attention_explorer(["x", "y", "z"], torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 4))
    box.children[0].value = 2
    with pytest.raises(ValueError, match="N=2 words"):
        widgets.attention_explorer(["x", "y"], torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 4))
    plt.close("all")


def _boolean_index_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s[~mask] = float("-inf")  # works only when the mask has the scores' exact shape
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def _k_dot_T_attention(q, k, v, mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])  # reverses every axis of a batched k
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_check_attention_names_crashes_without_unrelated_advice():
    with pytest.raises(checks.CheckFailed, match="the mask must broadcast: use masked_fill") as err:
        lesson06.check_attention(_boolean_index_attention)  # caught by a visible case, not only a hidden one
    assert "transpose" not in str(err.value)
    with pytest.raises(checks.CheckFailed, match=re.escape("k.transpose(-2, -1)")) as err:
        lesson06.check_attention(_k_dot_T_attention)
    assert "~mask" not in str(err.value) and "mask == False" not in str(err.value)
    with pytest.raises(checks.CheckFailed, match="the mask must broadcast"):
        lesson06.check_attention(_boolean_index_attention, masked_only=True)


def test_check_attention_and_softmax_reject_numpy_results():
    with pytest.raises(checks.CheckFailed, match="expected a torch.Tensor, got ndarray for the output"):
        lesson06.check_attention(
            lambda q, k, v, mask=None: tuple(t.numpy() for t in _reference_attention(q, k, v, mask))
        )
    with pytest.raises(checks.CheckFailed, match="expected a torch.Tensor, got ndarray"):
        lesson06.check_softmax(lambda x: torch.softmax(x, dim=-1).numpy())


def test_check_softmax_names_max_without_keepdim_or_values():
    def no_keepdim(x):
        e = (x - x.max(dim=-1).values).exp()
        return e / e.sum(-1, keepdim=True)

    def no_values(x):
        e = (x - x.max(dim=-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    with pytest.raises(checks.CheckFailed, match=re.escape("keepdim=True")):
        lesson06.check_softmax(no_keepdim)
    with pytest.raises(checks.CheckFailed, match=re.escape("x.max(dim=-1, keepdim=True).values")):
        lesson06.check_softmax(no_values)


def test_check_flying_arrows_output_arrows_and_no_reveal():
    w = torch.softmax(torch.tensor([1.0, -1.0]) / math.sqrt(2), dim=0)
    out = [-w[1].item(), w[1].item()]
    lesson06.check_flying_arrows([0.7071, -0.7071], w, out, [-0.1069, 0.1069])
    with pytest.raises(checks.CheckFailed, match="flying's weights") as err:
        lesson06.check_flying_arrows([0.7071, -0.7071], w, out, out)
    with pytest.raises(checks.CheckFailed) as err:
        lesson06.check_flying_arrows([0.7071, -0.7071], w, out, [-0.3, 0.3])
    assert "0.10" not in str(err.value) and "expected" not in str(err.value)


# --- float masks, the offset causal mask --------------------------------------------------------


def test_a_float_mask_is_added_and_matches_the_boolean_mask_and_torch():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 5, 8, generator=g) for _ in range(3))
    allowed = causal_mask(5) & torch.tensor([True, True, False, True, True])  # (5, 5), key 2 hidden from all
    additive = torch.zeros(5, 5).masked_fill(~allowed, float("-inf"))  # 0 = allowed, -inf = blocked
    out_bool, w_bool = scaled_dot_product_attention(q, k, v, allowed)
    out_float, w_float = scaled_dot_product_attention(q, k, v, additive)
    assert_close(w_float, w_bool)
    assert_close(out_float, out_bool)
    assert_close(out_float, F.scaled_dot_product_attention(q, k, v, attn_mask=additive))
    bias = torch.randn(5, 5, generator=g)  # any additive bias, as torch allows
    assert_close(
        scaled_dot_product_attention(q, k, v, bias)[0], F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    )


def test_a_float_mask_row_of_minus_infinity_gets_zero_weights_not_nan():
    q, k, v = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 2)
    additive = torch.zeros(3, 3)
    additive[1] = float("-inf")
    out, w = scaled_dot_product_attention(q, k, v, additive)
    assert not torch.isnan(out).any() and torch.equal(w[1], torch.zeros(3)), w


def test_causal_mask_with_past_positions_for_a_kv_cache():
    m = causal_mask(2, past=3)  # two new tokens at positions 3 and 4
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(m, expected), m
    assert torch.equal(causal_mask(4, past=0), causal_mask(4))
    assert torch.equal(causal_mask(5)[3:], causal_mask(2, past=3)), "the last rows of the full mask"
    with pytest.raises(ValueError, match="past must be a non-negative int.*got -1"):
        causal_mask(2, past=-1)
