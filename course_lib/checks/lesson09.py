"""Checks for the lesson 09 exercises (the transformer block): reference functions, mistake tables and
one check per exercise.

Hand-worked answers (shapes, the LayerNorm by hand, gradients through a stack, parameter counts) are
stored as seals (see `core.Seals`), never as values. Learner functions and classes are treated as
black boxes: called on plain tensors, their modules given weights with `load_state_dict`.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from .core import CheckFailed, NotAttempted, Seals, call, check_all, check_close, check_tensor, passed
from .helpers import short

# The answers worked out by hand (exercises 1, 2, 4 and 6) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson09` from solutions/seals/lesson09.py.
SEALS = Seals({
    "shape_y": (None, "1070bd1438a21d56139f", {
        "gave the context's length: a block returns one vector per position of x (its queries), whatever the length "
        "of the sequence it attends to":
            "bdef505ff49e2edb7f9e",
        "gave the FFN's hidden width as the last axis: lin2 maps it back to d_model": "e916384db809cff61986",
        "left out the batch axis: every tensor here keeps B = 3 in front": "14b12425f6dd937d3939",
    }),
    "shape_self_weights": (None, "4ebcafa3b4c71861d816", {
        "left out the head axis: the weights are kept per head, (B, n_heads, T_q, T_k)": "37765ffde8dca708a33f",
        "used the memory's length for the keys: in SELF-attention the keys come from x itself (10 positions); only "
        "the cross-attention's keys come from the memory":
            "0e926543f70a911f8fdb",
        "merged the batch and head axes into one (B · n_heads): the weights keep them apart, (B, n_heads, T_q, T_k)":
            "4834666d7024cd60afaf",
        "left out the batch axis: every tensor here keeps B = 3 in front": "594336cc8a9c70c2b232",
    }),
    "shape_cross_weights": (None, "3efbb95c8e73eb1a8e42", {
        "swapped queries and keys: rows are the queries (x, 10 positions), columns the keys (memory, 7)":
            "971ec32979199858c278",
        "left out the head axis: the weights are kept per head, (B, n_heads, T_q, T_k)": "200044001f8453dea9d3",
        "used x's length for the keys: in cross-attention the keys come from the context (memory)":
            "fcd71144427f58837b1a",
        "merged the batch and head axes into one (B · n_heads): the weights keep them apart, (B, n_heads, T_q, T_k)":
            "eab28a0763ed8c6fc5f5",
        "left out the batch axis: every tensor here keeps B = 3 in front": "6f80267304ec27d58733",
    }),
    "shape_ffn_hidden": (None, "aaffc13787751495bdbe", {
        "assumed d_ff = 4 · d_model = 192: this block was built with d_ff=160": "94c9092d38b56ded561d",
        "gave the FFN's output: the hidden layer (after lin1) has d_ff features": "e596dfca9aedbb9748d0",
        "flattened the batch and the positions into one axis (B · T = 30): the FFN works on (B, T, ...) as it is, "
        "position by position":
            "a054f604dcc77c7ecc63",
        "left out the batch axis: every tensor here keeps B = 3 in front": "86ab4a3214691ba25c77",
    }),
    "ln_mean": (3, "58338c335a3436170a31", {
        "gave the sum of the entries: the mean divides it by d = 4": "ae6e4ea0e601026181dc",
    }),
    "ln_var": (3, "ea31bf281ab956c17a78", {
        "summed the squared deviations without dividing by d = 4: the variance is their MEAN": "9106e651f1d44c478fe2",
        "divided by d - 1 = 3 (the unbiased variance): LayerNorm divides by d = 4": "0c3a3ba76e7ff693624d",
        "gave the standard deviation: the variance is the mean of the squared deviations, before the root":
            "f2987228e116fa1106fd",
    }),
    "ln_out": (3, "5e019e53677819ed2ffc", {
        "used the unbiased variance (divided by d - 1): LayerNorm divides by d": "e4f56b8b653e3e2b627e",
        "left out the gain and the bias: multiply by the gain, then add the bias": "8e135ef2ab4aa021ca37",
        "added the bias before multiplying by the gain: it is gain · x̂ + bias": "a466d6efa9c6c33ba866",
        "divided by the variance instead of its square root": "26ae0246ccd6b5417b2e",
        "multiplied x by the gain before normalising: normalise x first, then gain · x̂ + bias": "c9c06250008709cc6784",
        "did not subtract the mean (that is RMSNorm): LayerNorm centres x first, x - mean": "5a72122ecc3837efeb4d",
    }),
    "grad_plain": (5, "a617c0e8df174a37ccdc", {
        "gave one layer's derivative: the chain rule multiplies the derivatives of all 8 layers":
            "862dfee389df5cc1569f",
        "added the 8 derivatives: the chain rule multiplies them": "c131f6551b59f5e388c1",
        "rounded the answer to 4 decimal places: it is compared to 5, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            "82d5f9db2faf427a8785",
        "rounded the answer to 3 decimal places: it is compared to 5, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            "7cf53e734a96d67a54bd",
        "divided by 0.5 at each layer: the derivative of 0.5·x is 0.5, and the chain rule multiplies by it":
            "3837a825b357a8f2eacf",
    }),
    "grad_residual": (3, "67d26632de779dfeb9f1", {
        "added the identity once for the whole stack (1 + 0.5^8): every layer has its own identity path, so each "
        "layer's derivative is 1 + 0.5":
            "62a20e2fd1f998d34ec2",
        "added the layers' contributions (1 + 8 · 0.5): the chain rule multiplies the 8 factors (1 + 0.5)":
            "601844518900dbaa09f6",
        "used the plain stack's derivative 0.5 per layer: with the residual each layer's derivative is 1 + 0.5":
            "5f1b00807f9e7b3af3c1",
        "took each layer's derivative as 1 + 1 = 2: the sub-layer's derivative is f'(x) = 0.5, so each factor is 1 + "
        "0.5":
            "994de240d14b4fd0587f",
        "added 1 for each layer's identity path (8 · 1): the chain rule multiplies the 8 factors (1 + 0.5)":
            "5d79fb04a1c6eab9a46f",
        "gave one layer's factor 1 + 0.5: the chain rule multiplies the factors of all 8 layers":
            "8ae30d7e78ccefc864e7",
        "rounded the answer to 1 decimal place: it is compared to 3, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            "ea76bdedfe23fe5db3bb",
        "rounded the answer to 2 decimal places: it is compared to 3, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            "e21e2b4709a55056a8fa",
    }),
    "grad_dead": (3, "345730a2668b0b169445", {
        "answered 0: a constant sub-layer has derivative 0, but the identity path still has derivative 1":
            "9e2b0039e206f17061df",
        "added the 8 identity paths (8 · 1): the chain rule multiplies the 8 factors (1 + 0)": "754556bbd1da590df013",
    }),
    "n_decoder_block": (None, "244d109b462d13848648", {
        "forgot the cross-attention: a decoder block has two attention sub-layers": "d9514d637d89f8987b71",
        "forgot the LayerNorms (a gain and a bias per feature each, three of them in a decoder block)":
            "a3c348327e2cbf072d24",
        "counted two LayerNorms: a decoder block has three, one per sub-layer": "35e5b63b892e62bd4eda",
        "counted one number per feature for each LayerNorm: each has a gain AND a bias": "dfd42c43b8d4a6500a9b",
        "forgot the biases of the linear layers (d_model per attention projection, d_ff and d_model in the FFN)":
            "4a9c8fab44d3915a87e3",
        "multiplied the attention parameters by the number of heads: the heads share out d_model":
            "b4bbf69eee93675313d0",
        "counted only one of the FFN's two linear layers: d_model -> d_ff AND d_ff -> d_model": "0b5d0c2738579fdc547f",
        "forgot the FFN's biases (d_ff for lin1, d_model for lin2)": "14662a342c577cf53b73",
        "forgot the output projection W_O: each attention has four d_model x d_model layers": "544064e6a5ac0a715907",
        "multiplied the query, key and value projections by the number of heads: together the heads share out "
        "d_model, so W_q, W_k and W_v are d_model x d_model in all":
            "6a7c845b29c0858132b7",
    }),
    "n_encoder_block_no_bias": (None, "6d2a24bde603c447cf99", {
        "counted biases: with bias=False neither the linear layers nor the LayerNorms have one": "900fcf31f5bed4838a02",
        "left out the LayerNorms' gains: bias=False removes the bias, the gain (d_model numbers each) stays":
            "6584ce1ad41cc9a1263b",
        "counted three LayerNorms: an encoder block has two": "b9c168b1ff22c561d84b",
        "multiplied the attention parameters by the number of heads: the heads share out d_model":
            "a99f6a6fbeb5b171e420",
        "counted the LayerNorms' biases: bias=False removes those too": "0e3fa2b0c93ae5f4031b",
        "multiplied the query, key and value projections by the number of heads: together the heads share out "
        "d_model, so W_q, W_k and W_v are d_model x d_model in all":
            "f601a097e9a7ca1285b2",
    }),
})


# --- exercise 1: predict the shapes -------------------------------------------------------------------
# block = TransformerBlock(48, 6, d_ff=160, cross_attention=True); x (3, 10, 48); memory (3, 7, 48)

_SHAPES = ("shape_y", "shape_self_weights", "shape_cross_weights", "shape_ffn_hidden")


def check_shapes(answers: dict[str, Any]) -> None:
    """Exercise 1: four predicted shapes, every wrong one reported."""
    hint = ("follow the shapes: (B, T, d_model) in and out; attention weights (B, n_heads, T_q, T_k); the FFN's "
            "hidden layer (B, T, d_ff)")
    check_all(*(lambda name=name: SEALS.check(name, answers.get(name), "shape", hint) for name in _SHAPES))


# --- exercise 2: LayerNorm by hand --------------------------------------------------------------------
# x = [3, -1, 2, 0], gain [2, 1, 1, 0.5], bias [0, 0, 1, 1], eps = 1e-5

LN_BY_HAND = {"x": [3.0, -1.0, 2.0, 0.0], "weight": [2.0, 1.0, 1.0, 0.5], "bias": [0.0, 0.0, 1.0, 1.0], "eps": 1e-5}


def check_layer_norm_by_hand(ln_mean: Any, ln_var: Any, ln_out: Any) -> None:
    """Exercise 2: the mean, the variance and the output of one LayerNorm, worked by hand."""
    check_all(
        lambda: SEALS.check("ln_mean", ln_mean, "number", "the mean of the four entries of x"),
        lambda: SEALS.check("ln_var", ln_var, "number",
                            "subtract the mean from each entry, square, and average the four squares"),
        lambda: SEALS.check("ln_out", ln_out, "numbers",
                            "(x - mean) / sqrt(var + eps), then times the gain, plus the bias, entry by entry"),
    )


# --- exercise 3: layer_norm as a function -------------------------------------------------------------

def reference_layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _ln_mistakes() -> dict[str, Callable]:
    def finish(x_hat, w, b):
        y = x_hat * w
        return y if b is None else y + b

    def centred(x):
        return x - x.mean(-1, keepdim=True)

    def biased_var(x, dim=-1):
        return ((x - x.mean(dim, keepdim=True)) ** 2).mean(dim, keepdim=True)

    return {
        "put eps outside the square root: divide by sqrt(var + eps), not sqrt(var) + eps":
            lambda x, w, b, eps: finish(centred(x) / (biased_var(x).sqrt() + eps), w, b),
        "left out eps: divide by sqrt(var + eps), where eps keeps a vector with (almost) no spread "
        "from dividing by (almost) zero":
            lambda x, w, b, eps: finish(centred(x) / biased_var(x).sqrt(), w, b),
        "used eps = 1e-5 whatever the caller passed: use the function's eps argument":
            lambda x, w, b, eps: finish(centred(x) / torch.sqrt(biased_var(x) + 1e-5), w, b),
        "used the unbiased variance (torch.var divides by d - 1 by default): LayerNorm divides by d; "
        "use ((x - mean) ** 2).mean(-1) or x.var(-1, unbiased=False)":
            lambda x, w, b, eps: finish(centred(x) / torch.sqrt(x.var(-1, keepdim=True) + eps), w, b),
        "normalised over the wrong axis: LayerNorm takes the mean and variance of each position's features, "
        "the LAST axis (dim=-1), not across positions or the batch":
            lambda x, w, b, eps: finish((x - x.mean(0, keepdim=True)) / torch.sqrt(biased_var(x, 0) + eps), w, b),
        "took the mean and variance of the whole tensor: each position (each vector along the last axis) "
        "gets its own mean and variance, dim=-1 with keepdim=True":
            lambda x, w, b, eps: finish((x - x.mean()) / torch.sqrt(((x - x.mean()) ** 2).mean() + eps), w, b),
        "left out the gain (weight): multiply the normalised x by weight":
            lambda x, w, b, eps: finish(centred(x) / torch.sqrt(biased_var(x) + eps), 1.0, b),
        "left out the bias: add it after multiplying by the gain":
            lambda x, w, b, eps: finish(centred(x) / torch.sqrt(biased_var(x) + eps), w, None),
        "left out both the gain and the bias":
            lambda x, w, b, eps: centred(x) / torch.sqrt(biased_var(x) + eps),
        "added the bias before multiplying by the gain: it is weight * x_hat + bias":
            lambda x, w, b, eps: (centred(x) / torch.sqrt(biased_var(x) + eps) + (0.0 if b is None else b)) * w,
        "divided by the variance instead of by its square root":
            lambda x, w, b, eps: finish(centred(x) / (biased_var(x) + eps), w, b),
        "did not subtract the mean (that is RMSNorm): LayerNorm centres x first":
            lambda x, w, b, eps: finish(x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps), w, b),
    }


def _randn(*shape: int, seed: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale + shift


def _ln_cases(hidden: bool) -> list[tuple[str, tuple]]:
    """(description, (x, weight, bias, eps)); small d and a tiny spread make each slip visible."""
    cases = [
        ("5 positions of 4 features", (_randn(5, 4, seed=1, scale=2.0, shift=1.0), _randn(4, seed=2, shift=1.0),
                                       _randn(4, seed=3), 1e-5)),
        ("a batch (2, 3, 6) with a small spread and eps = 0.01",
         (_randn(2, 3, 6, seed=4, scale=0.1, shift=-2.0), _randn(6, seed=5, shift=1.0), _randn(6, seed=6), 1e-2)),
        ("bias None (no bias)", (_randn(3, 5, seed=7, scale=3.0), _randn(5, seed=8, shift=1.0), None, 1e-5)),
    ]
    if hidden:
        cases += [
            ("one vector of 8 features",
             (_randn(8, seed=9, scale=5.0, shift=3.0), _randn(8, seed=10), _randn(8, seed=11), 1e-5)),
            ("a constant vector (variance 0)", (torch.full((2, 4), 7.0), torch.ones(4), torch.zeros(4), 1e-5)),
            ("(4, 2, 16), large eps",
             (_randn(4, 2, 16, seed=12, scale=0.5), _randn(16, seed=13), _randn(16, seed=14), 0.5)),
        ]
    return cases


def _ln_crash_hint(problem: str) -> str | None:
    if "must match the size of tensor" in problem:
        return ("it looks like a mean or variance dropped the last axis, so it no longer lines up with x: "
                "keep it with keepdim=True, e.g. x.mean(dim=-1, keepdim=True)")
    if "NoneType" in problem:
        return "bias may be None (no bias): add it only when it is not None"
    return None


def check_layer_norm(fn: Callable, name: str = "layer_norm", *, hidden: bool = False) -> None:
    """`fn(x, weight, bias, eps=1e-5)` against `F.layer_norm`, forward and backward, naming the usual slips."""
    if not callable(fn):
        raise CheckFailed(name, f"expected a function, got {type(fn).__name__}.")
    mistakes = _ln_mistakes()
    n = 0
    for description, (x, w, b, eps) in _ln_cases(hidden):
        def fresh(x=x, w=w, b=b):  # this case's tensors, as fresh leaves that collect gradients
            return [None if t is None else t.clone().requires_grad_(True) for t in (x, w, b)]

        xs, ws, bs = fresh()
        try:
            got = call(name, fn, xs, ws, bs, eps=eps)
        except NotAttempted:
            raise
        except CheckFailed as err:
            raise CheckFailed(name, f"{err.problem} (case: {description})", _ln_crash_hint(err.problem)) from None
        if got is not None:
            check_tensor(name, got, f"(case: {description})",
                         "compute with torch operations (mean, sqrt, ...); gradients only flow through torch")
        with torch.no_grad():
            want = reference_layer_norm(x, w, b, eps)
            wrong = {}
            for d, m in mistakes.items():
                try:
                    wrong[d] = m(x, w, b, eps)
                except RuntimeError:  # this slip cannot run on these shapes, so it is not the learner's
                    continue
        check_close(f"{name} ({description})", got, want, mistakes=wrong, quiet=True,
                    hint="mean and biased variance over the last axis, (x - mean) / sqrt(var + eps), "
                         "then * weight + bias")
        # backward: the same loss through the learner's function and through the reference
        if not got.requires_grad:
            raise CheckFailed(name, f"the output carries no gradient (case: {description}).",
                              "stay in torch from start to end (no .numpy(), no .detach(), no torch.no_grad()), "
                              "so that gradients flow back to x, weight and bias")
        g = _randn(*want.shape, seed=99)
        try:
            (got * g).sum().backward()
        except RuntimeError as err:  # the forward values were right: the graph itself is broken
            in_place = "modified by an inplace operation" in str(err)
            raise CheckFailed(
                name, f"the values are right, but the backward pass fails (case: {description}): "
                      f"{str(err).splitlines()[0][:160]}",
                "an in-place update (y /= ..., y -= ...) overwrote a tensor that autograd still needs for the "
                "gradient: write y = y / ... instead" if in_place else None) from None
        xr, wr, br = fresh()
        (reference_layer_norm(xr, wr, br, eps) * g).sum().backward()
        for label, mine, ref in [("x", xs, xr), ("weight", ws, wr), ("bias", bs, br)]:
            if ref is None:
                continue
            if mine.grad is None:  # the values were right, so it was used, but its gradient was cut off
                raise CheckFailed(name, f"no gradient reached {label} (case: {description}).",
                                  f"the values are right, so {label} is used, but the path from it to the output is "
                                  f"cut: something it goes through is detached (.detach(), .data, .item(), "
                                  f".numpy(), torch.tensor(...) of it, or torch.no_grad()); stay in torch operations")
            check_close(f"{name} ({description}), gradient of {label}", mine.grad, ref.grad, quiet=True,
                        hint="the forward values are right but the gradient is not: is part of the "
                             "computation detached?")
        n += 1
    passed(name, f"{n} cases, values and gradients")


# --- exercise 4: the gradient through a stack, by hand --------------------------------------------------
# 8 scalar layers, each sub-layer f(x) = 0.5 x; plain y = f(f(...)), residual y = x + f(x); dead: f = constant

def check_stack_gradients(grad_plain: Any, grad_residual: Any, grad_dead: Any) -> None:
    """Exercise 4: dy/dx through 8 layers, plain and residual, and with dead sub-layers."""
    values = {"grad_plain": grad_plain, "grad_residual": grad_residual, "grad_dead": grad_dead}
    hints = {
        "grad_plain": "each layer multiplies the gradient by its derivative f'(x) = 0.5; there are 8 layers",
        "grad_residual": "d(x + f(x))/dx = 1 + f'(x) for each layer; multiply the 8 layers' factors",
        "grad_dead": "a constant sub-layer has f'(x) = 0; what is left of 1 + f'(x)?",
    }
    check_all(*(lambda name=name: SEALS.check(name, values[name], "number", hints[name]) for name in values))


# --- exercise 5 and 7: wiring a block ------------------------------------------------------------------

def _reference_block(d_model: int, n_heads: int, norm_first: bool, seed: int):
    """A course_lib EncoderBlock with random weights (LayerNorm gains and biases too), in eval mode."""
    from course_lib.layers import EncoderBlock

    torch.manual_seed(seed)
    block = EncoderBlock(d_model, n_heads, norm_first=norm_first).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in block.named_parameters():
            if name.startswith("norm"):  # gains near 1, biases near 0, but not exactly: a swapped norm shows
                p.add_(torch.randn(p.shape, generator=g) * 0.3)
    return block


def _wirings(ref) -> dict[str, Callable]:
    """Ways to wire the reference's four parts: the two right ones and the usual wrong ones."""
    attn = lambda h, mask: ref.self_attn(h, mask=mask)
    ff, n1, n2 = ref.ff, ref.norm1, ref.norm2

    def pre(x, m):
        x = x + attn(n1(x), m)
        return x + ff(n2(x))

    def post(x, m):
        x = n1(x + attn(x, m))
        return n2(x + ff(x))

    def no_residual_pre(x, m):
        return ff(n2(attn(n1(x), m)))

    def residual_from_normalised(x, m):
        h = n1(x)
        x = h + attn(h, m)
        h = n2(x)
        return h + ff(h)

    def norm_after_sublayer(x, m):
        x = x + n1(attn(x, m))
        return x + n2(ff(x))

    def swapped_norms_pre(x, m):
        x = x + attn(n2(x), m)
        return x + ff(n1(x))

    def ffn_first_pre(x, m):
        x = x + ff(n2(x))
        return x + attn(n1(x), m)

    def missing_attn_residual_pre(x, m):
        x = attn(n1(x), m)
        return x + ff(n2(x))

    def missing_ffn_residual_pre(x, m):
        x = x + attn(n1(x), m)
        return ff(n2(x))

    def buggy_post(x, m):  # the bug in exercise 7's BuggyPostNormBlock
        x = n1(x + attn(x, m))
        return x + n2(ff(x))

    def missing_ffn_residual_post(x, m):
        x = n1(x + attn(x, m))
        return n2(ff(x))

    def missing_attn_residual_post(x, m):
        x = n1(attn(x, m))
        return n2(x + ff(x))

    def post_norm_once(x, m):
        x = x + attn(x, m)
        return n2(x + ff(x))

    def mask_ignored_pre(x, m):
        return pre(x, None)

    def mask_ignored_post(x, m):
        return post(x, None)

    def norm1_twice_pre(x, m):
        x = x + attn(n1(x), m)
        return x + ff(n1(x))

    def final_norm1_pre(x, m):
        return n1(pre(x, m))

    def final_norm2_pre(x, m):
        return n2(pre(x, m))

    def attn_norm_after_post(x, m):  # the bug moved to the attention sub-layer
        x = x + n1(attn(x, m))
        return n2(x + ff(x))

    def added_x_twice_post(x, m):
        x = n1(x + attn(x, m))
        return x + n2(x + ff(x))

    def ffn_residual_from_normalised_post(x, m):
        h = n2(n1(x + attn(x, m)))
        return h + ff(h)

    return {"pre": pre, "post": post, "no_residual_pre": no_residual_pre,
            "residual_from_normalised": residual_from_normalised, "norm_after_sublayer": norm_after_sublayer,
            "swapped_norms_pre": swapped_norms_pre, "ffn_first_pre": ffn_first_pre,
            "missing_attn_residual_pre": missing_attn_residual_pre,
            "missing_ffn_residual_pre": missing_ffn_residual_pre,
            "buggy_post": buggy_post, "missing_ffn_residual_post": missing_ffn_residual_post,
            "missing_attn_residual_post": missing_attn_residual_post, "post_norm_once": post_norm_once,
            "mask_ignored_pre": mask_ignored_pre, "mask_ignored_post": mask_ignored_post,
            "norm1_twice_pre": norm1_twice_pre, "final_norm1_pre": final_norm1_pre, "final_norm2_pre": final_norm2_pre,
            "attn_norm_after_post": attn_norm_after_post, "added_x_twice_post": added_x_twice_post,
            "ffn_residual_from_normalised_post": ffn_residual_from_normalised_post}


_PRE_MISTAKES = {
    "wired it post-norm, norm(x + sublayer(x)): pre-norm normalises what goes INTO each sub-layer, "
    "x + sublayer(norm(x)), and never the stream itself": "post",
    "left out the residual connections: each sub-layer's output is ADDED to its input, x + ...": "no_residual_pre",
    "added the sub-layer's output to the normalised x: the residual must carry the un-normalised x, "
    "h = norm1(x); x = x + self_attn(h)": "residual_from_normalised",
    "normalised the sub-layer's output, x + norm(sublayer(x)): the norm goes on the sub-layer's input":
        "norm_after_sublayer",
    "swapped the norms: norm1 belongs to the attention sub-layer, norm2 to the FFN": "swapped_norms_pre",
    "ran the FFN before the attention: attention first, then the feed-forward network": "ffn_first_pre",
    "left out the residual around the attention sub-layer": "missing_attn_residual_pre",
    "left out the residual around the feed-forward sub-layer": "missing_ffn_residual_pre",
    "did not pass the mask to the attention: self_attn(h, mask=mask)": "mask_ignored_pre",
    "used norm1 for both sub-layers: each sub-layer has its own LayerNorm, norm2 for the FFN": "norm1_twice_pre",
    "normalised the block's output: a pre-norm block returns the un-normalised stream (a pre-norm MODEL adds one "
    "final LayerNorm after its last block)": ("final_norm2_pre", "final_norm1_pre"),
}

_POST_MISTAKES = {
    "kept the bug: the FFN sub-layer still normalises the FFN's output and adds it, x + norm2(ff(x)); "
    "post-norm normalises the SUM, norm2(x + ff(x))": "buggy_post",
    "wired it pre-norm, x + sublayer(norm(x)): this block is the original post-norm one, norm(x + sublayer(x))": "pre",
    "left out the residual around the feed-forward sub-layer: norm2(x + ff(x))": "missing_ffn_residual_post",
    "left out the residual around the attention sub-layer: norm1(x + self_attn(x))": "missing_attn_residual_post",
    "normalised only once, at the end: post-norm normalises after each sub-layer": "post_norm_once",
    "did not pass the mask to the attention: self_attn(x, mask=mask)": "mask_ignored_post",
    "normalised the attention's output and added it, x + norm1(self_attn(x)): Add & Norm normalises the SUM, "
    "norm1(x + self_attn(x))": "attn_norm_after_post",
    "normalised each sub-layer's output and added it, x + norm(sublayer(x)): Add & Norm normalises the SUM, "
    "norm(x + sublayer(x)), after each sub-layer": "norm_after_sublayer",
    "added x once more around the norm, x + norm2(x + ff(x)): the output of Add & Norm replaces x, "
    "x = norm2(x + ff(x))": "added_x_twice_post",
    "normalised x before the FFN and added its output to the normalised x, norm2(x) + ff(norm2(x)): post-norm "
    "adds first and normalises the sum, norm2(x + ff(x))": "ffn_residual_from_normalised_post",
}


def _block_cases(hidden: bool) -> list[tuple[int, int, int, bool]]:
    """(d_model, n_heads, T, causal) for each case."""
    cases = [(16, 2, 5, False), (16, 2, 5, True)]
    if hidden:
        cases += [(24, 3, 7, True), (8, 1, 4, False), (32, 4, 6, True)]
    return cases


_POSITIONAL_MASK_HINT = ("self_attn's second positional argument is `context` (the sequence to attend to, for "
                         "cross-attention), not the mask: pass the mask by name, self_attn(h, mask=mask)")


def _guard_positional_mask(block: torch.nn.Module, name: str) -> None:
    """Make `self_attn(h, mask)` fail with a hint: the mask would land in `context`, and the attention's own
    error ("context must be shaped (B, T, d_model)") does not say why."""
    attn = getattr(block, "self_attn", None)
    if not isinstance(attn, torch.nn.Module):
        return
    forward = attn.forward

    def guarded(x, context=None, *args, **kwargs):
        if isinstance(context, torch.Tensor) and context.dtype == torch.bool:
            raise CheckFailed(name, "self_attn was given the mask as its `context` (its second positional "
                                    "argument).", _POSITIONAL_MASK_HINT)
        return forward(x, context, *args, **kwargs)

    attn.forward = guarded  # an instance attribute: only this block, built for the check, is changed


def _check_block_class(cls: Any, name: str, norm_first: bool, mistakes: dict[str, str | tuple[str, ...]], hint: str,
                       hidden: bool, seed: int) -> None:
    if not callable(cls) or isinstance(cls, torch.nn.Module):
        raise CheckFailed(name, f"expected a class, got {short(cls)}.",
                          f"define `class {name}(...)` and pass the class itself ({name}), not an instance "
                          f"({name}(16, 2))")
    n = 0
    for i, (d, h, T, causal) in enumerate(_block_cases(hidden)):
        ref = _reference_block(d, h, norm_first, seed=seed + 17 * i)
        try:
            block = call(name, cls, d, h)
        except NotAttempted:
            raise
        except CheckFailed as err:
            raise CheckFailed(name, f"{name}({d}, {h}) did not build a block: {err.problem}",
                              "keep the __init__ as given, and pass the class itself, not an instance") from None
        try:
            block.load_state_dict({k: v.clone() for k, v in ref.state_dict().items()})
        except Exception as err:
            raise CheckFailed(name, f"could not load a block's weights into {name}({d}, {h}): "
                                    f"{str(err).splitlines()[0]}",
                              "keep the __init__ as given: the parts must be called self_attn, ff, norm1 and norm2"
                              ) from None
        block.eval()
        _guard_positional_mask(block, name)
        x = _randn(2, T, d, seed=seed + 100 + i, scale=2.0, shift=0.5)
        mask = torch.ones(T, T, dtype=torch.bool).tril() if causal else None
        args = (x.clone(), mask.clone()) if causal else (x.clone(),)
        shown = f"x of shape {(2, T, d)}" + (", a causal mask" if causal else "")
        got = call(name, block, *args)
        check_tensor(name, got, f"when called on {shown}",
                     "forward must return the new x, a tensor of shape (B, T, d_model)")
        with torch.no_grad():
            wirings = _wirings(ref)
            want = wirings["pre" if norm_first else "post"](x, mask)
            wrong = {}
            for description, keys in mistakes.items():
                keys = (keys,) if isinstance(keys, str) else keys  # several wirings that are the same mistake
                if any("mask" in key for key in keys) and not causal:
                    continue
                outs = [wirings[key](x, mask) for key in keys]
                near = [o for o in outs
                        if o.shape == got.shape and torch.allclose(got.detach(), o, atol=1e-5, rtol=1e-4)]
                wrong[description] = (near or outs)[0]
        check_close(f"{name} ({shown})", got.detach(), want, mistakes=wrong, quiet=True, hint=hint)
        n += 1
    passed(name, f"{n} cases, as EncoderBlock(norm_first={norm_first})")


def check_pre_norm_block(cls: Any, name: str = "PreNormBlock", *, hidden: bool = False) -> None:
    """Exercise 5: the learner's pre-norm forward against EncoderBlock(norm_first=True)."""
    _check_block_class(cls, name, True, _PRE_MISTAKES, hidden=hidden, seed=500,
                       hint="x = x + self_attn(norm1(x), mask=mask), then x = x + ff(norm2(x))")


def check_post_norm_block(cls: Any, name: str = "FixedPostNormBlock", *, hidden: bool = False) -> None:
    """Exercise 7: the fixed post-norm forward against EncoderBlock(norm_first=False)."""
    _check_block_class(cls, name, False, _POST_MISTAKES, hidden=hidden, seed=700,
                       hint="post-norm ('Add & Norm'): x = norm1(x + self_attn(x, mask=mask)), "
                            "then x = norm2(x + ff(x))")


# --- exercise 6: count a block's parameters --------------------------------------------------------------
# n_decoder_block: TransformerBlock(256, 4, d_ff=1024, cross_attention=True), biases on
# n_encoder_block_no_bias: TransformerBlock(384, 6, d_ff=1536, bias=False)

def check_block_parameters(n_decoder_block: Any, n_encoder_block_no_bias: Any) -> None:
    """Exercise 6: parameter counts of two blocks, by hand."""
    check_all(
        lambda: SEALS.check("n_decoder_block", n_decoder_block, "count",
                            "add up: each attention 4·d² + 4·d; the FFN d·d_ff + d_ff + d_ff·d + d; each LayerNorm "
                            "2·d; a decoder block has 2 attentions, 1 FFN, 3 LayerNorms"),
        lambda: SEALS.check("n_encoder_block_no_bias", n_encoder_block_no_bias, "count",
                            "without biases: attention 4·d², FFN 2·d·d_ff, each LayerNorm d (its gain); an encoder "
                            "block has 1 attention, 1 FFN, 2 LayerNorms"),
    )
