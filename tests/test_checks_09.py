"""The lesson 09 exercise checks: right answers pass (written in several ways), each typical wrong
answer is named in the hint, and the sealed answers agree with values measured independently
(the library's blocks, autograd, F.layer_norm). No hand-worked answer is written out here either:
every expected value is computed."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from grading_helpers import fails_with

from course_lib import checks
from course_lib.attention import MultiHeadAttention, causal_mask
from course_lib.checks import lesson09
from course_lib.layers import DecoderBlock, EncoderBlock, FeedForward, LayerNorm


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- exercise 1: shapes ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def measured_shapes() -> dict[str, tuple[int, ...]]:
    block = DecoderBlock(48, 6, d_ff=160).eval()
    x, memory = torch.randn(3, 10, 48), torch.randn(3, 7, 48)
    with torch.no_grad():
        y = block(x, memory, causal_mask(10))
        hidden = F.relu(block.ff.linear1(x))
    return {"shape_y": tuple(y.shape), "shape_self_weights": tuple(block.self_attn.last_weights.shape),
            "shape_cross_weights": tuple(block.cross_attn.last_weights.shape), "shape_ffn_hidden": tuple(hidden.shape)}


def test_shapes_pass_as_tuples_lists_and_sizes(measured_shapes, capsys):
    lesson09.check_shapes(measured_shapes)
    lesson09.check_shapes({k: list(v) for k, v in measured_shapes.items()})
    lesson09.check_shapes({k: torch.Size(v) for k, v in measured_shapes.items()})
    assert capsys.readouterr().out.count("passed") == 12


def test_shapes_name_each_mistake_and_every_wrong_part(measured_shapes):
    B, h, T, d = 3, 6, 10, 48
    S = measured_shapes["shape_cross_weights"][-1]
    d_ff = measured_shapes["shape_ffn_hidden"][-1]
    cases = {
        "shape_y": [((B, S, d), "context's length"), ((B, T, d_ff), "lin2 maps it back")],
        "shape_self_weights": [((B, T, T), "left out the head axis")],
        "shape_cross_weights": [((B, h, S, T), "swapped queries and keys"), ((B, T, S), "left out the head axis"),
                                ((B, h, T, T), "keys come from the context")],
        "shape_ffn_hidden": [((B, T, 4 * d), "d_ff=160"), ((B, T, d), "the hidden layer")],
    }
    for name, wrongs in cases.items():
        for wrong, hint in wrongs:
            fails_with(lesson09.check_shapes, {**measured_shapes, name: wrong}, match=hint)


def test_shapes_name_the_mistakes_that_got_the_generic_hint(measured_shapes):
    """Wrong shapes a learner tried that used to get only the general hint."""
    B, h, T, d = 3, 6, 10, 48
    S = measured_shapes["shape_cross_weights"][-1]
    d_ff = measured_shapes["shape_ffn_hidden"][-1]
    cases = {
        "shape_y": [((T, d), "left out the batch axis")],
        "shape_self_weights": [((B, h, T, S), "SELF-attention the keys come from x itself"),
                               ((B * h, T, T), "merged the batch and head axes"),
                               ((h, T, T), "left out the batch axis")],
        "shape_cross_weights": [((B * h, T, S), "merged the batch and head axes"), ((h, T, S), "left out the batch")],
        "shape_ffn_hidden": [((B * T, d_ff), "flattened the batch and the positions"),
                             ((T, d_ff), "left out the batch axis")],
    }
    for name, wrongs in cases.items():
        for wrong, hint in wrongs:
            fails_with(lesson09.check_shapes, {**measured_shapes, name: wrong}, match=hint)
    text = fails_with(lesson09.check_shapes, {**measured_shapes, "shape_y": (1, 2, 3), "shape_ffn_hidden": (3, 10, 48)},
                      match="shape_y: (1, 2, 3) is not right")
    assert "shape_ffn_hidden: (3, 10, 48) is not right" in text and "shape_cross_weights" not in text
    fails_with(lesson09.check_shapes, {**measured_shapes, "shape_y": "(3, 10, 48)"}, match="tuple of ints")
    fails_with(lesson09.check_shapes, {**measured_shapes, "shape_y": (3.0, 10, 48)}, match="tuple of ints")
    fails_with(lesson09.check_shapes, {**measured_shapes, "shape_y": None}, match="got None")


# --- exercise 2: LayerNorm by hand ---------------------------------------------------------------------


def by_hand_reference():
    p = lesson09.LN_BY_HAND
    x = torch.tensor(p["x"], dtype=torch.float64)
    w, b = torch.tensor(p["weight"], dtype=torch.float64), torch.tensor(p["bias"], dtype=torch.float64)
    mean = x.mean()
    var = x.var(unbiased=False)
    out = F.layer_norm(x, (4,), w, b, p["eps"])
    return x, w, b, mean, var, out


def test_layer_norm_by_hand_passes_in_several_forms(capsys):
    x, w, b, mean, var, out = by_hand_reference()
    lesson09.check_layer_norm_by_hand(mean.item(), var.item(), out.tolist())
    lesson09.check_layer_norm_by_hand(mean, var.float(), out.float())  # tensors, float32
    lesson09.check_layer_norm_by_hand(np.float64(mean), float(var), out.numpy())
    assert capsys.readouterr().out.count("passed") == 9


def test_layer_norm_by_hand_names_the_slips():
    x, w, b, mean, var, out = by_hand_reference()
    eps = lesson09.LN_BY_HAND["eps"]
    unbiased = x.var(unbiased=True)
    plain = lambda t: t.item() if torch.is_tensor(t) else t
    check = lambda m=mean, v=var, o=out: lesson09.check_layer_norm_by_hand(plain(m), plain(v), o.tolist())
    fails_with(check, v=unbiased, match="unbiased variance")
    fails_with(check, v=var.sqrt(), match="gave the standard deviation")
    fails_with(check, o=(x - mean) / torch.sqrt(unbiased + eps) * w + b, match="unbiased variance")
    fails_with(check, o=(x - mean) / torch.sqrt(var + eps), match="left out the gain and the bias")
    fails_with(check, o=((x - mean) / torch.sqrt(var + eps) + b) * w, match="added the bias before multiplying")
    fails_with(check, o=(x - mean) / (var + eps) * w + b, match="divided by the variance")
    fails_with(check, m=mean + 0.5, match="the mean of the four entries")
    fails_with(check, m=x.sum(), match="gave the sum of the entries")
    fails_with(check, v=((x - mean) ** 2).sum(), match="without dividing by d")
    gx = w * x  # the gain applied before the normalisation
    fails_with(check, o=(gx - gx.mean()) / torch.sqrt(gx.var(unbiased=False) + eps) + b,
               match="gain before normalising")
    fails_with(check, o=x / torch.sqrt((x**2).mean() + eps) * w + b, match="that is RMSNorm")
    text = fails_with(check, m=mean + 1, v=unbiased, match="ln_mean:")
    assert "ln_var:" in text and "unbiased" in text and "ln_out:" not in text
    # a wrong answer never shows the expected numbers
    text = fails_with(check, o=out + 1, match="is not right")
    assert f"{out[0].item():.3f}" not in text


# --- exercise 3: layer_norm as a function -----------------------------------------------------------------


def right_layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps) * weight
    return y if bias is None else y + bias


def another_right_layer_norm(x, weight, bias, eps=1e-5):  # float64 inside, rsqrt, var(unbiased=False), addcmul
    x64 = x.double()
    y = (x64 - x64.mean(-1, keepdim=True)) * torch.rsqrt(x64.var(-1, unbiased=False, keepdim=True) + eps)
    y = y * weight.double()
    return y + bias.double() if bias is not None else y


def std_layer_norm(x, weight, bias, eps=1e-5):  # x.std(unbiased=False), squared back into a variance
    std = x.std(-1, unbiased=False, keepdim=True)
    y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(std**2 + eps) * weight
    return y if bias is None else y + bias


def broadcast_layer_norm(x, weight, bias, eps=1e-5):  # no keepdim: the axis put back by hand, in-place updates
    y = x - x.mean(-1)[..., None]
    y = y / torch.sqrt((y**2).mean(-1).unsqueeze(-1) + eps)
    y *= weight
    if bias is not None:
        y += bias
    return y


@pytest.mark.parametrize("fn", [right_layer_norm, another_right_layer_norm, std_layer_norm, broadcast_layer_norm])
def test_layer_norm_function_right_answers_pass(fn, capsys):
    lesson09.check_layer_norm(fn)
    lesson09.check_layer_norm(fn, hidden=True)
    assert capsys.readouterr().out.count("passed") == 2


def test_layer_norm_function_names_every_listed_slip():
    for description, wrong in lesson09._ln_mistakes().items():
        fails_with(lesson09.check_layer_norm, wrong, match=description[:40])


def test_layer_norm_function_tells_a_missing_eps_from_a_hard_coded_one():
    def no_eps(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True)) * weight
        return y if bias is None else y + bias

    def eps_hard_coded(x, weight, bias, eps=1e-5):
        return right_layer_norm(x, weight, bias, 1e-5)

    text = fails_with(lesson09.check_layer_norm, no_eps, match="left out eps")
    assert "whatever the caller passed" not in text
    text = fails_with(lesson09.check_layer_norm, eps_hard_coded, match="used eps = 1e-5 whatever the caller passed")
    assert "left out eps" not in text


def test_layer_norm_function_names_crashes_and_broken_outputs():
    def no_keepdim(x, weight, bias, eps=1e-5):
        mean = x.mean(dim=-1)
        return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1) + eps) * weight + bias

    fails_with(lesson09.check_layer_norm, no_keepdim, match="keepdim=True")

    def bias_always_added(x, weight, bias, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps) * weight + bias

    fails_with(lesson09.check_layer_norm, bias_always_added, match="bias may be None")
    fails_with(lesson09.check_layer_norm, lambda x, w, b, eps=1e-5: right_layer_norm(x, w, b, eps).detach(),
               match="carries no gradient")
    fails_with(lesson09.check_layer_norm, lambda x, w, b, eps=1e-5: right_layer_norm(x, w, b, eps).detach().numpy(),
               match="expected a torch.Tensor")
    fails_with(lesson09.check_layer_norm, lambda x, w, b, eps=1e-5: None, match="forget to `return`")

    def half_detached(x, weight, bias, eps=1e-5):  # right values, but the variance is cut off from the graph
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True).detach()
        y = (x - mean) / torch.sqrt(var + eps) * weight
        return y if bias is None else y + bias

    fails_with(lesson09.check_layer_norm, half_detached, match="gradient of x")

    def normalised_part_detached(x, weight, bias, eps=1e-5):  # right values, x cut off from the graph
        x_hat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
        y = x_hat.detach() * weight
        return y if bias is None else y + bias

    text = fails_with(lesson09.check_layer_norm, normalised_part_detached, match="no gradient reached x")
    assert "is detached" in text and "use x in the computation" not in text

    def in_place_division(x, weight, bias, eps=1e-5):  # right values; the division overwrites what ** 2 saved
        y = x - x.mean(-1, keepdim=True)
        y /= torch.sqrt((y**2).mean(-1, keepdim=True) + eps)
        y = y * weight
        return y if bias is None else y + bias

    fails_with(lesson09.check_layer_norm, in_place_division, match="write y = y / ... instead")

    def blank(x, weight, bias, eps=1e-5):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson09.check_layer_norm(blank)
    fails_with(lesson09.check_layer_norm, 3, match="expected a function")


# --- exercise 4: gradients through a stack -----------------------------------------------------------


def autograd_stack_gradients() -> list[float]:
    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    plain, residual, dead = x, x, x
    for _ in range(8):
        plain = 0.5 * plain
        residual = residual + 0.5 * residual
        dead = dead + (0.0 * dead + 3.0)  # a sub-layer that outputs a constant
    return [torch.autograd.grad(t, x)[0].item() for t in (plain, residual, dead)]


def test_stack_gradients_pass(capsys):
    plain, residual, dead = autograd_stack_gradients()
    lesson09.check_stack_gradients(plain, residual, dead)
    lesson09.check_stack_gradients(np.float32(plain), torch.tensor(residual), int(dead))
    assert capsys.readouterr().out.count("passed") == 6


def test_stack_gradients_name_the_slips():
    plain, residual, dead = autograd_stack_gradients()
    one_layer = plain ** (1 / 8)
    fails_with(lesson09.check_stack_gradients, one_layer, residual, dead, match="one layer's derivative")
    fails_with(lesson09.check_stack_gradients, 8 * one_layer, residual, dead, match="added the 8 derivatives")
    fails_with(lesson09.check_stack_gradients, plain, 1 + plain, dead, match="identity once")
    fails_with(lesson09.check_stack_gradients, plain, 1 + 8 * one_layer, dead, match="multiplies the 8 factors")
    fails_with(lesson09.check_stack_gradients, plain, plain, dead, match="plain stack's derivative")
    fails_with(lesson09.check_stack_gradients, plain, residual, 0.0, match="identity path still has derivative 1")
    fails_with(lesson09.check_stack_gradients, plain, residual, 2.0, match="what is left of 1 + f'(x)")
    fails_with(lesson09.check_stack_gradients, 1 / plain, residual, dead, match="divided by 0.5 at each layer")
    fails_with(lesson09.check_stack_gradients, plain, 2.0**8, dead, match="1 + 1 = 2")
    fails_with(lesson09.check_stack_gradients, plain, 8.0, dead, match="added 1 for each layer's identity path")
    fails_with(lesson09.check_stack_gradients, plain, 1 + one_layer, dead, match="gave one layer's factor")
    fails_with(lesson09.check_stack_gradients, plain, residual, 8 * dead, match="added the 8 identity paths")
    text = fails_with(lesson09.check_stack_gradients, one_layer, plain, 0.0, match="grad_plain:")
    assert "grad_residual:" in text and "grad_dead:" in text


def test_stack_gradients_name_a_rounded_answer():
    """grad_plain rounded to 0.0039 or 0.004 (it is compared to 5 decimals), or grad_residual to 25.6 or 25.63:
    the hint names the rounding; the right values rounded to the compared precision still pass."""
    plain, residual, dead = autograd_stack_gradients()
    for decimals, to in [(4, "4 decimal places"), (3, "3 decimal places")]:
        text = fails_with(lesson09.check_stack_gradients, round(plain, decimals), residual, dead, match=f"rounded the "
                          f"answer to {to}: it is compared to 5")
        assert "grad_residual" not in text
    for decimals, to in [(1, "1 decimal place:"), (2, "2 decimal places")]:
        fails_with(lesson09.check_stack_gradients, plain, round(residual, decimals), dead, match=f"answer to {to}")
    lesson09.check_stack_gradients(round(plain, 5), round(residual, 3), dead)


# --- exercise 5 and 7: block wiring --------------------------------------------------------------------


class Parts(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.ff = FeedForward(d_model)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)


def block_class(forward):
    return type("LearnerBlock", (Parts,), {"forward": forward})


def a(self, h, mask):
    return self.self_attn(h, mask=mask)


PRE = {
    "right": lambda s, x, mask=None: (lambda x: x + s.ff(s.norm2(x)))(x + a(s, s.norm1(x), mask)),
    "post": lambda s, x, mask=None: (lambda x: s.norm2(x + s.ff(x)))(s.norm1(x + a(s, x, mask))),
    "no_residual": lambda s, x, mask=None: s.ff(s.norm2(a(s, s.norm1(x), mask))),
    "from_normalised": lambda s, x, mask=None: (lambda y: s.norm2(y) + s.ff(s.norm2(y)))(
        s.norm1(x) + a(s, s.norm1(x), mask)),
    "norm_after": lambda s, x, mask=None: (lambda y: y + s.norm2(s.ff(y)))(x + s.norm1(a(s, x, mask))),
    "swapped": lambda s, x, mask=None: (lambda y: y + s.ff(s.norm1(y)))(x + a(s, s.norm2(x), mask)),
    "ffn_first": lambda s, x, mask=None: (lambda y: y + a(s, s.norm1(y), mask))(x + s.ff(s.norm2(x))),
    "no_attn_residual": lambda s, x, mask=None: (lambda y: y + s.ff(s.norm2(y)))(a(s, s.norm1(x), mask)),
    "no_ffn_residual": lambda s, x, mask=None: s.ff(s.norm2(x + a(s, s.norm1(x), mask))),
    "mask_ignored": lambda s, x, mask=None: (lambda y: y + s.ff(s.norm2(y)))(x + a(s, s.norm1(x), None)),
    "mask_positional": lambda s, x, mask=None: (lambda y: y + s.ff(s.norm2(y)))(x + s.self_attn(s.norm1(x), mask)),
    "norm1_twice": lambda s, x, mask=None: (lambda y: y + s.ff(s.norm1(y)))(x + a(s, s.norm1(x), mask)),
    "final_norm2": lambda s, x, mask=None: s.norm2(PRE["right"](s, x, mask)),
    "final_norm1": lambda s, x, mask=None: s.norm1(PRE["right"](s, x, mask)),
}
PRE_HINTS = {
    "post": "wired it post-norm", "no_residual": "left out the residual connections",
    "from_normalised": "added the sub-layer's output to the normalised x",
    "norm_after": "normalised the sub-layer's output",
    "swapped": "swapped the norms", "ffn_first": "ran the FFN before the attention",
    "no_attn_residual": "residual around the attention", "no_ffn_residual": "residual around the feed-forward",
    "mask_ignored": "did not pass the mask",
    "mask_positional": "second positional argument is `context`", "norm1_twice": "used norm1 for both sub-layers",
    "final_norm2": "normalised the block's output", "final_norm1": "normalised the block's output",
}


def in_place(s, x, mask=None):  # x += ..., on the block's own copy of the input
    x = x.clone()
    x += s.self_attn(s.norm1(x), mask=mask)
    x += s.ff(s.norm2(x))
    return x


def context_by_name(s, x, mask=None):  # self-attention written out: context is x itself
    h = s.norm1(x)
    x = x + s.self_attn(h, h, mask)
    return x + s.ff(s.norm2(x))


@pytest.mark.parametrize("forward", [PRE["right"], in_place, context_by_name], ids=["right", "in_place", "context"])
def test_pre_norm_block_right_answers_pass(forward, capsys):
    lesson09.check_pre_norm_block(block_class(forward))
    lesson09.check_pre_norm_block(block_class(forward), hidden=True)
    assert capsys.readouterr().out.count("passed") == 2


def test_a_mask_passed_positionally_is_named_and_the_attention_still_works():
    text = fails_with(lesson09.check_pre_norm_block, block_class(PRE["mask_positional"]), match="as its `context`")
    assert "self_attn(h, mask=mask)" in text
    text = fails_with(lesson09.check_post_norm_block, block_class(
        lambda s, x, mask=None: (lambda y: s.norm2(y + s.ff(y)))(s.norm1(x + s.self_attn(x, mask)))),
        match="second positional argument is `context`")
    # the guard only stands in front of the check's own block: the library's attention is unchanged
    attn = MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="context"):
        attn(torch.randn(2, 5, 16), causal_mask(5))


@pytest.mark.parametrize("kind", sorted(PRE_HINTS))
def test_pre_norm_block_names_each_wiring_mistake(kind):
    fails_with(lesson09.check_pre_norm_block, block_class(PRE[kind]), match=PRE_HINTS[kind])


def test_pre_norm_block_broken_classes():
    class Renamed(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.attn = MultiHeadAttention(d_model, n_heads)
            self.ff = FeedForward(d_model)
            self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)

        def forward(self, x, mask=None):
            return x

    fails_with(lesson09.check_pre_norm_block, Renamed, match="keep the __init__ as given")
    fails_with(lesson09.check_pre_norm_block, block_class(PRE["right"])(16, 2), match="expected a class")
    fails_with(lesson09.check_pre_norm_block, block_class(PRE["right"]).forward, match="did not build a block")
    fails_with(lesson09.check_pre_norm_block, block_class(lambda s, x, mask=None: None),
               match="expected a torch.Tensor")

    def blank(self, x, mask=None):
        raise NotImplementedError()

    with pytest.raises(checks.NotAttempted):
        lesson09.check_pre_norm_block(block_class(blank))


POST = {
    "right": lambda s, x, mask=None: (lambda y: s.norm2(y + s.ff(y)))(s.norm1(x + a(s, x, mask))),
    "bug": lambda s, x, mask=None: (lambda y: y + s.norm2(s.ff(y)))(s.norm1(x + a(s, x, mask))),
    "pre": PRE["right"],
    "no_ffn_residual": lambda s, x, mask=None: s.norm2(s.ff(s.norm1(x + a(s, x, mask)))),
    "no_attn_residual": lambda s, x, mask=None: (lambda y: s.norm2(y + s.ff(y)))(s.norm1(a(s, x, mask))),
    "once": lambda s, x, mask=None: (lambda y: s.norm2(y + s.ff(y)))(x + a(s, x, mask)),
    "mask_ignored": lambda s, x, mask=None: (lambda y: s.norm2(y + s.ff(y)))(s.norm1(x + a(s, x, None))),
    "attn_norm_after": lambda s, x, mask=None: (lambda y: s.norm2(y + s.ff(y)))(x + s.norm1(a(s, x, mask))),
    "both_norm_after": lambda s, x, mask=None: (lambda y: y + s.norm2(s.ff(y)))(x + s.norm1(a(s, x, mask))),
    "added_x_twice": lambda s, x, mask=None: (lambda y: y + s.norm2(y + s.ff(y)))(s.norm1(x + a(s, x, mask))),
    "normalised_then_added": lambda s, x, mask=None: (lambda h: h + s.ff(h))(s.norm2(s.norm1(x + a(s, x, mask)))),
}
POST_HINTS = {"bug": "kept the bug", "pre": "wired it pre-norm", "no_ffn_residual": "residual around the feed-forward",
              "no_attn_residual": "residual around the attention", "once": "normalised only once",
              "mask_ignored": "did not pass the mask", "attn_norm_after": "x + norm1(self_attn(x))",
              "both_norm_after": "normalised each sub-layer's output", "added_x_twice": "added x once more",
              "normalised_then_added": "norm2(x) + ff(norm2(x))"}


def test_post_norm_block_right_answer_passes(capsys):
    lesson09.check_post_norm_block(block_class(POST["right"]))
    lesson09.check_post_norm_block(block_class(POST["right"]), hidden=True)
    assert capsys.readouterr().out.count("passed") == 2


@pytest.mark.parametrize("kind", sorted(POST_HINTS))
def test_post_norm_block_names_each_mistake(kind):
    fails_with(lesson09.check_post_norm_block, block_class(POST[kind]), match=POST_HINTS[kind])


def test_reference_wirings_are_the_library_block():
    """The checks' "right" wirings are the library's EncoderBlock itself, both ways."""
    for norm_first in (True, False):
        ref = lesson09._reference_block(16, 2, norm_first, seed=3)
        x = torch.randn(2, 5, 16)
        mask = causal_mask(5)
        with torch.no_grad():
            got = lesson09._wirings(ref)["pre" if norm_first else "post"](x, mask)
            torch.testing.assert_close(got, ref(x, mask))


# --- exercise 6: parameter counts -------------------------------------------------------------------


def test_block_parameter_counts_pass(capsys):
    dec = count(DecoderBlock(256, 4, 1024))
    enc = count(EncoderBlock(384, 6, 1536, bias=False))
    lesson09.check_block_parameters(dec, enc)
    lesson09.check_block_parameters(float(dec), np.int64(enc))
    assert capsys.readouterr().out.count("passed") == 4


def test_block_parameter_counts_name_the_miscounts():
    d, d_ff, h = 256, 1024, 4
    dec = count(DecoderBlock(d, h, d_ff))
    attn, ln = count(MultiHeadAttention(d, h)), count(LayerNorm(d))
    enc = count(EncoderBlock(384, 6, 1536, bias=False))
    attn_nb, ln_nb = count(MultiHeadAttention(384, 6, bias=False)), 384
    ffn_nb = count(FeedForward(384, 1536, bias=False))
    wrong_dec = {
        "forgot the cross-attention": dec - attn,
        "forgot the LayerNorms": dec - 3 * ln,
        "counted two LayerNorms": dec - ln,
        "one number per feature": dec - 3 * d,
        "forgot the biases of the linear layers": dec - 2 * 4 * d - d_ff - d,
        "multiplied the attention parameters by the number of heads": dec + (h - 1) * 2 * attn,
        "only one of the FFN's two linear layers": dec - (d_ff * d + d),
        "forgot the FFN's biases": dec - d_ff - d,
        "forgot the output projection": dec - 2 * (d * d + d),
        # each head given its own d x d query, key and value projections, one W_O
        "query, key and value projections by the number of heads": dec + 2 * (h - 1) * 3 * (d * d + d),
    }
    for hint, value in wrong_dec.items():
        fails_with(lesson09.check_block_parameters, value, enc, match=hint)
    wrong_enc = {
        "counted biases": enc + 4 * 384 + 1536 + 384 + 2 * 384,
        "left out the LayerNorms' gains": enc - 2 * ln_nb,
        "counted three LayerNorms": enc + ln_nb,
        "multiplied the attention parameters by the number of heads": enc + 5 * attn_nb,
        "counted the LayerNorms' biases": enc + 2 * 384,
        "query, key and value projections by the number of heads": enc + 5 * 3 * 384 * 384,
    }
    assert enc == attn_nb + ffn_nb + 2 * ln_nb
    for hint, value in wrong_enc.items():
        fails_with(lesson09.check_block_parameters, dec, value, match=hint)
    fails_with(lesson09.check_block_parameters, dec + 0.5, enc, match="whole number")
    fails_with(lesson09.check_block_parameters, dec, "1770240", match="expected a whole number")
    text = fails_with(lesson09.check_block_parameters, dec + 1, enc + 1, match="n_decoder_block:")
    assert "n_encoder_block_no_bias:" in text
    assert f"{dec:,}" not in text and str(dec) not in text.replace(f"{dec + 1:,}", "")
