"""Tests of course_lib.positional against independent references.

- sinusoidal_encoding vs the paper's formula evaluated entry by entry with `math` (double loop);
- rotation_for_offset vs the table itself (PE[pos + k] = PE[pos] @ M_k at every pos);
- apply_rotary vs an independent complex-number implementation (torch.view_as_complex), forward and
  backward, plus its two defining properties (norms kept, scores depend on the offset only);
- LearnedPositionalEmbedding vs nn.Embedding (forward and gradients) and its errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_lib import positional as P


def formula_table(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """PE by the textbook formula, one entry at a time: column 2i -> sin, column 2i+1 -> cos."""
    pe = np.zeros((n, d))
    for pos in range(n):
        for col in range(d):
            i = col // 2
            angle = pos / base ** (2 * i / d)
            pe[pos, col] = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    return pe


# --- sinusoidal_encoding ------------------------------------------------------------------------


@pytest.mark.parametrize("n,d", [(1, 2), (50, 8), (37, 7), (20, 1), (64, 33), (10, 128)])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_sinusoidal_matches_formula(n, d, base):
    got = P.sinusoidal_encoding(n, d, base=base, dtype=torch.float64).numpy()
    want = formula_table(n, d, base)
    assert got.shape == (n, d), f"shape {got.shape}, expected {(n, d)}"
    np.testing.assert_allclose(got, want, atol=1e-12, rtol=0, err_msg=f"n={n}, d={d}, base={base}")


def test_sinusoidal_default_dtype_and_range():
    pe = P.sinusoidal_encoding(500, 64)
    assert pe.dtype == torch.float32, f"dtype {pe.dtype}, expected float32"
    assert pe.min() >= -1 and pe.max() <= 1, f"values in [{pe.min()}, {pe.max()}], expected within [-1, 1]"
    torch.testing.assert_close(pe.double(), torch.from_numpy(formula_table(500, 64)), atol=1e-6, rtol=0)


@pytest.mark.parametrize("d", [2, 6, 9])
def test_sinusoidal_row_zero(d):
    want = torch.tensor([0.0 if c % 2 == 0 else 1.0 for c in range(d)])
    got = P.sinusoidal_encoding(3, d)[0]
    assert torch.equal(got, want), f"PE(0) = {got.tolist()}, expected {want.tolist()}"


def test_sinusoidal_odd_last_column_is_an_unpartnered_sine():
    d = 7
    pe = P.sinusoidal_encoding(40, d, dtype=torch.float64)
    pos = torch.arange(40, dtype=torch.float64)
    want = torch.sin(pos / 10000.0 ** ((d - 1) / d))
    torch.testing.assert_close(pe[:, -1], want, atol=1e-12, rtol=0)
    # the first d-1 columns are NOT the d-1 table: the exponent divides by d, not d-1
    assert not torch.allclose(pe[:, :-1], P.sinusoidal_encoding(40, d - 1, dtype=torch.float64)), "odd d must use 2i/d"


def test_frequencies():
    w = P.frequencies(8)
    torch.testing.assert_close(w, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))
    assert P.frequencies(7).shape == (4,), f"got {P.frequencies(7).shape}, expected (4,)"


@pytest.mark.parametrize(
    "args,err,match",
    [
        ((0, 8), ValueError, "n_positions must be a positive int, got 0"),
        ((5, 0), ValueError, "d_model must be a positive int, got 0"),
        ((-3, 8), ValueError, "n_positions must be a positive int, got -3"),
        ((5.0, 8), TypeError, "n_positions must be a positive int, got float"),
        ((5, 8, -1.0), ValueError, "base must be a positive finite number, got -1.0"),
    ],
)
def test_sinusoidal_errors(args, err, match):
    with pytest.raises(err, match=match):
        P.sinusoidal_encoding(*args)


# --- rotations ----------------------------------------------------------------------------------


def test_rotation_2d_is_complex_multiplication():
    gen = torch.Generator().manual_seed(0)
    for angle in [0.0, 0.3, -1.2, math.pi, 5.0]:
        v = torch.randn(2, generator=gen, dtype=torch.float64)
        z = complex(v[0], v[1]) * complex(math.cos(angle), math.sin(angle))
        got = P.rotation_2d(angle) @ v
        torch.testing.assert_close(got, torch.tensor([z.real, z.imag], dtype=torch.float64))
    R = P.rotation_2d(torch.tensor([0.1, 0.2]))
    assert R.shape == (2, 2, 2), f"batched shape {R.shape}, expected (2, 2, 2)"


@pytest.mark.parametrize("k", [1, 3, 17, -5, 0, 2.5])
@pytest.mark.parametrize("d", [2, 8, 64])
def test_offset_is_a_rotation_independent_of_position(k, d):
    n = 300
    pe = P.sinusoidal_encoding(n + 40, d, dtype=torch.float64)
    M = P.rotation_for_offset(k, d, dtype=torch.float64)
    pos = torch.arange(20, n, dtype=torch.float64)
    # the shifted rows, computed from the formula at pos + k (works for fractional k too)
    want = torch.stack([torch.from_numpy(_formula_row(p + k, d)) for p in pos.tolist()])
    got = pe[20:n] @ M
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    # an orthogonal matrix, and M_{-k} undoes M_k
    torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(
        M @ P.rotation_for_offset(-k, d, dtype=torch.float64), torch.eye(d, dtype=torch.float64), atol=1e-12, rtol=0
    )


def _formula_row(pos: float, d: int, base: float = 10000.0) -> np.ndarray:
    return np.array([(math.sin if c % 2 == 0 else math.cos)(pos / base ** (2 * (c // 2) / d)) for c in range(d)])


def test_offset_map_composes():
    M2, M3, M5 = (P.rotation_for_offset(k, 16, dtype=torch.float64) for k in (2, 3, 5))
    torch.testing.assert_close(M2 @ M3, M5, atol=1e-12, rtol=0)


def test_rotation_for_offset_errors():
    with pytest.raises(ValueError, match="even d_model"):
        P.rotation_for_offset(1, 7)
    with pytest.raises(TypeError, match="k must be an int or float"):
        P.rotation_for_offset("1", 8)


# --- LearnedPositionalEmbedding ----------------------------------------------------------------


def test_learned_matches_nn_embedding_forward_and_backward():
    torch.manual_seed(0)
    table = P.LearnedPositionalEmbedding(12, 5)
    assert sum(p.numel() for p in table.parameters()) == 12 * 5, "a learned table has max_len × d_model parameters"
    ref = torch.nn.Embedding(12, 5)
    ref.weight.data.copy_(table.weight.data)
    positions = torch.tensor([[0, 3, 3, 11], [1, 2, 5, 7]])
    out, out_ref = table(positions), ref(positions)
    torch.testing.assert_close(out, out_ref)
    assert out.shape == (2, 4, 5), f"shape {out.shape}, expected (2, 4, 5)"
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (out_ref * g).sum().backward()
    torch.testing.assert_close(table.weight.grad, ref.weight.grad)
    unused = [r for r in range(12) if r not in positions.unique().tolist()]
    assert table.weight.grad[unused].abs().sum() == 0, "rows never looked up must get zero gradient"
    torch.testing.assert_close(table.for_length(4), table.weight[:4])


def test_learned_errors():
    table = P.LearnedPositionalEmbedding(256, 8)
    with pytest.raises(ValueError, match="sequence length 300 exceeds max_len 256 this table was built for"):
        table(torch.arange(300))
    with pytest.raises(ValueError, match="sequence length 300 exceeds max_len 256 this table was built for"):
        table.for_length(300)
    with pytest.raises(ValueError, match="positions must be >= 0, got -1"):
        table(torch.tensor([-1, 0]))
    with pytest.raises(TypeError, match="integer tensor"):
        table(torch.arange(4.0))
    with pytest.raises(TypeError, match="integer tensor"):
        table([0, 1])
    with pytest.raises(ValueError, match="max_len must be a positive int, got 0"):
        P.LearnedPositionalEmbedding(0, 8)
    assert table.for_length(256).shape == (256, 8), "the full table must be reachable"


# --- rotary embeddings ------------------------------------------------------------------------


def rope_complex(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Independent reference: view consecutive pairs as complex numbers and multiply by e^{i p w}."""
    d = x.shape[-1]
    w = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    phase = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions.double()[:, None] * w)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())  # (..., T, d/2)
    return torch.view_as_real(z * phase).reshape(x.shape)


def test_rope_matches_complex_reference_forward_and_backward():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 16, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    positions = torch.arange(10)
    out, out_ref = P.apply_rotary(x), rope_complex(x_ref, positions)
    torch.testing.assert_close(out, out_ref)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (out_ref * g).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)


def test_rope_custom_positions_and_float32():
    torch.manual_seed(1)
    x = torch.randn(5, 8)
    pos = torch.tensor([7, 3, 100, 0, 42])
    got = P.apply_rotary(x, pos, base=500.0)
    assert got.dtype == torch.float32, f"dtype {got.dtype}, expected float32"
    torch.testing.assert_close(got.double(), rope_complex(x, pos, base=500.0), atol=1e-5, rtol=1e-5)
    # position 0 is the identity
    torch.testing.assert_close(P.apply_rotary(x, torch.zeros(5, dtype=torch.long)), x)


def test_rope_keeps_norms():
    torch.manual_seed(2)
    x = torch.randn(4, 50, 32, dtype=torch.float64)
    torch.testing.assert_close(P.apply_rotary(x).norm(dim=-1), x.norm(dim=-1))


def test_rope_scores_depend_only_on_offset():
    torch.manual_seed(3)
    d = 16
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)

    def score(m: int, n: int) -> float:
        qm = P.apply_rotary(q[None], torch.tensor([m]))[0]
        kn = P.apply_rotary(k[None], torch.tensor([n]))[0]
        return float(qm @ kn)

    for offset in [0, 1, -4, 9]:
        scores = [score(m, m + offset) for m in [0, 3, 11, 50, 200, 1000]]
        assert max(scores) - min(scores) < 1e-9, f"offset {offset}: scores {scores} should all be equal"
    assert abs(score(0, 1) - score(0, 5)) > 1e-3, "different offsets should give different scores"
    # and the score equals <q, R(n - m) k>
    assert abs(score(7, 12) - score(0, 5)) < 1e-9, "score(7, 12) must equal score(0, 5)"


def test_rope_errors():
    with pytest.raises(ValueError, match="last dimension must be even, got 7"):
        P.apply_rotary(torch.randn(3, 7))
    with pytest.raises(ValueError, match=r"shaped \(\.\.\., T, d\)"):
        P.apply_rotary(torch.randn(8))
    with pytest.raises(TypeError, match="floating-point tensor"):
        P.apply_rotary(torch.arange(8).reshape(2, 4))
    with pytest.raises(ValueError, match="T = 3 entries"):
        P.apply_rotary(torch.randn(3, 4), torch.arange(4))


# --- the lesson's figure and widget -------------------------------------------------------------


def test_clock_hands_figure_points_hands_at_the_encoding():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import viz

    fig = viz.clock_hands([0, 3], d_model=8)
    axes = fig.get_axes()
    assert len(axes) == 2 * 4, f"{len(axes)} clocks, expected 2 positions × 4 pairs"
    pe = P.sinusoidal_encoding(4, 8, dtype=torch.float64)
    for clock, ax in enumerate(axes[4:]):  # the row for position 3
        hand = [line for line in ax.get_lines() if line.get_color() == "C3" and len(line.get_xdata()) == 2][0]
        tip = (hand.get_xdata()[1], hand.get_ydata()[1])
        want = (float(pe[3, 2 * clock]), float(pe[3, 2 * clock + 1]))
        assert np.allclose(tip, want), f"clock {clock}: hand tip {tip}, expected (sin, cos) = {want}"
    plt.close(fig)
    with pytest.raises(ValueError, match="even d_model"):
        viz.clock_hands([0], d_model=5)


def test_clock_hands_explorer_builds_without_display(capsys):
    import re

    from course_lib import widgets

    w = widgets.clock_hands_explorer(d_model=8, max_position=20)
    slider = w.children[0]
    assert (slider.min, slider.max, slider.value) == (0, 20, 0), f"slider {slider.min}..{slider.max} at {slider.value}"
    capsys.readouterr()  # forget the first drawing (position 0: only 0s and 1s)
    slider.value = 7  # the callback must run without error outside a kernel too
    printed = capsys.readouterr().out
    line = next((ln for ln in printed.splitlines() if "PE[pos] = [" in ln), None)
    assert line is not None, f"the widget should print PE[pos]; printed {printed!r}"
    values = re.findall(r"-?\d+\.\d+", line)
    assert len(values) == 8 and all(len(v.split(".")[1]) <= 3 for v in values), f"PE[7] should print rounded: {line}"
    with pytest.raises(ValueError, match="even d_model"):
        widgets.clock_hands_explorer(d_model=3)


# --- the exercise checks of lesson 07 name the usual mistakes --------------------------------------


def _check_message(check, *args, **kwargs) -> str:
    from course_lib import checks

    with pytest.raises(checks.CheckFailed) as info:
        check(*args, **kwargs)
    return str(info.value)


def _even_only_table(n, d):
    """The usual even-d code: crashes for an odd d (one more sine column than cosine columns)."""
    angle = torch.arange(n, dtype=torch.float64)[:, None] / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def test_sinusoidal_check_tries_an_odd_d_model_and_says_why_it_crashed():
    from course_lib.checks import lesson07

    message = _check_message(lesson07.check_sinusoidal_encoding, _even_only_table)
    assert "odd d_model = 5" in message and "no cosine partner" in message, message
    assert "sinusoidal_encoding(7, 5)" in message, message
    lesson07.check_sinusoidal_encoding(lambda n, d: P.sinusoidal_encoding(n, d), cases=[(3, 1)], label="odd d_model")


def test_position_checks_require_torch_tensors_of_the_asked_dtype():
    from course_lib.checks import lesson07

    message = _check_message(lesson07.check_sinusoidal_encoding, lambda n, d: P.sinusoidal_encoding(n, d).numpy())
    assert "expected a torch.Tensor, got ndarray" in message, message
    message = _check_message(lesson07.check_rotation, lambda a: P.rotation_2d(a).numpy())
    assert "expected a torch.Tensor, got ndarray" in message, message
    message = _check_message(lesson07.check_rotation, lambda a: P.rotation_2d(a, dtype=torch.float32))
    assert "dtype is torch.float32" in message, message


def test_pe_entry_check_names_the_column_used_as_i_and_hides_the_answer():
    from course_lib.checks import lesson07

    message = _check_message(
        lesson07.check_pe_entry, "pe_50_3", math.cos(50 / 10000 ** (2 * 3 / 4)), pos=50, column=3, d_model=4
    )
    assert "column 3 is pair i = 3 // 2 = 1" in message, message
    message = _check_message(lesson07.check_pe_entry, "pe_50_3", 0.3, pos=50, column=3, d_model=4)
    assert "0.877" not in message and "0.878" not in message, message


def test_rope_check_names_keys_only_and_a_missing_scale():
    from course_lib.checks import lesson07

    def keys_only(q, k, v):
        k = P.apply_rotary(k)
        return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v

    def unscaled(q, k, v):
        return torch.softmax(P.apply_rotary(q) @ P.apply_rotary(k).T, dim=-1) @ v

    assert "rotated only the keys" in _check_message(lesson07.check_rope_attention, keys_only)
    assert "division by sqrt(d)" in _check_message(lesson07.check_rope_attention, unscaled)


# --- rotary positions per sequence, on the input's device ---------------------------------------


def test_apply_rotary_takes_per_sequence_positions_for_multi_head_inputs():
    x = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(0))  # (B, n_heads, T, d), B != n_heads
    positions = torch.tensor([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])  # (B, T): the second sequence starts at 10
    out = P.apply_rotary(x, positions)
    for b in range(2):
        torch.testing.assert_close(out[b], P.apply_rotary(x[b], positions[b]))
    square = torch.randn(2, 2, 5, 8)  # B == n_heads: (B, T) positions must still follow the batch axis
    pos2 = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    torch.testing.assert_close(P.apply_rotary(square, pos2)[1, 0], P.apply_rotary(square[1, 0], pos2[1]))


def test_apply_rotary_refuses_positions_that_would_broadcast_wrongly():
    x = torch.randn(2, 3, 5, 8)
    with pytest.raises(ValueError, match=r"positions of shape \(4, 5\) do not fit x of shape \(2, 3, 5, 8\)"):
        P.apply_rotary(x, torch.arange(20).view(4, 5))  # neither (T,), (B, T) nor broadcastable
    with pytest.raises(ValueError, match="positions of shape"):
        P.apply_rotary(torch.randn(2, 5, 8), torch.arange(20).view(4, 5))


def test_rotary_angles_stay_on_the_positions_device_and_keep_float64():
    angles = P.rotary_angles(torch.arange(4), 8)
    assert angles.dtype == torch.float64 and angles.device.type == "cpu" and angles.shape == (4, 4)
