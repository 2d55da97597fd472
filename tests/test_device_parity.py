"""Every course_lib module honours the device of its inputs.

1. On any machine: the modules run on PyTorch's "meta" device, which has shapes but no data. A
   silent round trip through the CPU (`.cpu()`, `.numpy()`, `.item()`, `if tensor.any():`) cannot
   read a meta tensor and fails here, and every result must come back on the input's device. On a
   GPU each of those round trips would be a host synchronisation. Two checks read values on
   purpose and are left out of this part: `padding_mask` and `LearnedPositionalEmbedding` check that
   lengths and positions are in range, so that a learner gets a sentence instead of a CUDA
   device-side assert.
2. Where CUDA (or Apple's MPS) is present: each module gives the same results, forward and
   backward, on the CPU and on that device, within float32 tolerance. Skipped cleanly elsewhere.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.testing import assert_close

from course_lib import attention, layers, positional

ACCELERATORS = [
    d
    for d, ok in [
        ("cuda", torch.cuda.is_available()),
        ("mps", getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()),
    ]
    if ok
]


def _modules():
    """(name, module factory, input factory) for every torch module of the library."""
    g = lambda *shape: torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))  # noqa: E731
    return [
        ("MultiHeadAttention", lambda: attention.MultiHeadAttention(16, 4), lambda: (g(2, 5, 16),)),
        (
            "MultiHeadAttention fused",
            lambda: attention.MultiHeadAttention(16, 4, keep_weights=False),
            lambda: (g(2, 5, 16),),
        ),
        ("LayerNorm", lambda: layers.LayerNorm(16), lambda: (g(2, 5, 16),)),
        ("RMSNorm", lambda: layers.RMSNorm(16), lambda: (g(2, 5, 16),)),
        ("FeedForward gelu", lambda: layers.FeedForward(16, activation="gelu"), lambda: (g(2, 5, 16),)),
        ("EncoderBlock pre-norm", lambda: layers.EncoderBlock(16, 4), lambda: (g(2, 5, 16),)),
        ("EncoderBlock post-norm", lambda: layers.EncoderBlock(16, 4, norm_first=False), lambda: (g(2, 5, 16),)),
        (
            "EncoderBlock fused",
            lambda: layers.EncoderBlock(16, 4, keep_weights=False, fused_norm=True),
            lambda: (g(2, 5, 16),),
        ),
        ("DecoderBlock", lambda: layers.DecoderBlock(16, 4), lambda: (g(2, 5, 16), g(2, 3, 16))),
        (
            "LearnedPositionalEmbedding",
            lambda: positional.LearnedPositionalEmbedding(8, 16),
            lambda: (torch.arange(5),),
        ),
    ]


MODULES = _modules()
VALIDATING = {"LearnedPositionalEmbedding"}  # reads positions to say "exceeds max_len" in words
META = [m for m in MODULES if m[0] not in VALIDATING]


@pytest.mark.parametrize("name, make, inputs", META, ids=[m[0] for m in META])
def test_modules_run_on_the_meta_device_without_touching_the_cpu(name, make, inputs):
    torch.manual_seed(0)
    module = make().to("meta").eval()
    args = [a.to("meta") for a in inputs()]
    out = module(*args)
    assert out.device.type == "meta", f"{name} returned a tensor on {out.device}, not on its input's device"


def test_functions_run_on_the_meta_device_without_touching_the_cpu():
    q, k, v = (torch.empty(2, 3, 5, 8, device="meta") for _ in range(3))
    mask = attention.causal_mask(5, device="meta")
    assert mask.device.type == "meta"
    out, w = attention.scaled_dot_product_attention(q, k, v, mask)
    assert out.device.type == w.device.type == "meta"
    assert positional.apply_rotary(q).device.type == "meta"
    assert positional.apply_rotary(q, torch.arange(5, device="meta")).device.type == "meta"
    assert positional.rotary_angles(torch.arange(5, device="meta"), 8).device.type == "meta"
    causal = attention.causal_mask(5, device="meta")
    mha = attention.MultiHeadAttention(8, 2).to("meta")
    cache = attention.KVCache()
    assert mha(torch.empty(2, 3, 8, device="meta"), mask=causal[:3, :3], cache=cache).device.type == "meta"
    assert mha(torch.empty(2, 1, 8, device="meta"), cache=cache).device.type == "meta" and len(cache) == 4


@pytest.mark.skipif(not ACCELERATORS, reason="no CUDA or MPS device: CPU/accelerator parity is checked on GPU machines")
@pytest.mark.parametrize("device", ACCELERATORS)
@pytest.mark.parametrize("name, make, inputs", MODULES, ids=[m[0] for m in MODULES])
def test_modules_agree_on_cpu_and_accelerator_forward_and_backward(device, name, make, inputs):
    torch.manual_seed(0)
    cpu_module = make().eval()
    dev_module = copy.deepcopy(cpu_module).to(device)
    results = []
    for module, dev in ((cpu_module, "cpu"), (dev_module, device)):
        args = [a.to(dev).requires_grad_(a.is_floating_point()) for a in inputs()]
        out = module(*args)
        out.square().sum().backward()
        grads = [a.grad for a in args if a.is_floating_point()] + [p.grad for p in module.parameters()]
        results.append((out, grads))
    (out_c, grads_c), (out_d, grads_d) = results
    assert_close(out_d.cpu(), out_c, atol=1e-4, rtol=1e-4)
    for gc, gd in zip(grads_c, grads_d):
        assert_close(gd.cpu(), gc, atol=1e-4, rtol=1e-3)


@pytest.mark.skipif(not ACCELERATORS, reason="no CUDA or MPS device: CPU/accelerator parity is checked on GPU machines")
@pytest.mark.parametrize("device", ACCELERATORS)
def test_functions_agree_on_cpu_and_accelerator(device):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    mask = attention.causal_mask(5)
    out_c, w_c = attention.scaled_dot_product_attention(q, k, v, mask)
    out_d, w_d = attention.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), mask.to(device))
    assert_close(out_d.cpu(), out_c, atol=1e-5, rtol=1e-4)
    assert_close(w_d.cpu(), w_c, atol=1e-5, rtol=1e-4)
    assert_close(positional.apply_rotary(q.to(device)).cpu(), positional.apply_rotary(q), atol=1e-5, rtol=1e-4)
    assert_close(positional.sinusoidal_encoding(50, 16).to(device).cpu(), positional.sinusoidal_encoding(50, 16))
