"""Telling attention where each token sits.

Attention compares every query with every key, but nothing in q·k says *where* the two tokens
are: shuffle the sequence and the outputs shuffle with it. This module holds the three common
ways of putting position back in:

- `sinusoidal_encoding`: a fixed (n_positions, d_model) table of sines and cosines, added to the
  token embeddings (0 parameters). Each (sin, cos) column pair is a clock hand turning at its own
  speed, so moving k positions is a rotation (`rotation_for_offset`) that does not depend on where
  you start.
- `LearnedPositionalEmbedding`: a trained (max_len, d_model) table, one row per position
  (max_len × d_model parameters); it has no row for a position past max_len.
- `apply_rotary` (RoPE): rotate the queries and keys, pair by pair, by angles proportional to their
  positions, so the score q_m·k_n depends on the offset n − m only (0 parameters). Nothing is added
  to the input and the values are left alone.

Conventions. Vectors are rows (as in ``x @ W`` everywhere in the course). Frequencies are
``omega_i = base ** (-2i / d_model)`` for ``i = 0, 1, ...``; column ``2i`` holds the sine and
column ``2i + 1`` the cosine of ``pos * omega_i``. RoPE rotates *consecutive* pairs
``(x[..., 2i], x[..., 2i+1])`` (the interleaved layout of the RoFormer paper and of
``torch.view_as_complex``); some libraries pair dimension ``i`` with ``i + d/2`` instead ("rotate
half"), which is the same method with the feature dimensions permuted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from course_lib._validate import is_int, is_number

__all__ = [
    "frequencies",
    "sinusoidal_encoding",
    "rotation_2d",
    "rotation_for_offset",
    "LearnedPositionalEmbedding",
    "RopeScaling",
    "rope_frequencies",
    "rotary_angles",
    "apply_rotary",
    "rotate_half_permutation",
]


def _check_size(name: str, value) -> int:
    if not is_int(value):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} ({value!r})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return value


def _check_base(base) -> float:
    base = float(base)
    if not (math.isfinite(base) and base > 0):
        raise ValueError(f"base must be a positive finite number, got {base}")
    return base


def frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The angular speeds ``omega_i = base ** (-2i / d_model)``, one per column pair: shape (ceil(d/2),).

    omega_0 = 1 radian per position (a full turn every 2π ≈ 6.3 positions); the last one is close
    to 1/base (a full turn every ~2π·base positions). For odd d_model the last even column has a
    frequency of its own but no cosine partner, hence ceil(d/2) entries.
    """
    _check_size("d_model", d_model)
    base = _check_base(base)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 0, 2, 4, ... = 2i
    return base ** (-two_i / d_model)  # (ceil(d/2),) float64


def sinusoidal_encoding(
    n_positions: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The fixed position table of "Attention Is All You Need": shape (n_positions, d_model).

        PE[pos, 2i]     = sin(pos / base^(2i/d_model))
        PE[pos, 2i + 1] = cos(pos / base^(2i/d_model))      for i = 0 ... d_model/2 - 1

    Row 0 is [0, 1, 0, 1, ...]; every entry lies in [-1, 1]. For an odd d_model the last column
    (index d_model - 1 = 2i with i = (d_model - 1)/2) holds sin(pos / base^((d_model-1)/d_model))
    and has no cosine partner. Angles are computed in float64 and the result cast to `dtype`, so
    the table is the same on every device.
    """
    _check_size("n_positions", n_positions)
    omega = frequencies(d_model, base)  # (ceil(d/2),)
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    angles = pos * omega  # (n, ceil(d/2))
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)  # ceil(d/2) even columns
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # floor(d/2) odd columns
    return pe.to(dtype)


def rotation_2d(angle: float | torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The 2×2 matrix [[cos a, -sin a], [sin a, cos a]]: shape (2, 2), or (..., 2, 2) for a tensor of angles.

    Acting on a column vector (R @ v) it turns v by `angle` radians counter-clockwise, exactly like
    multiplying the complex number v[0] + i·v[1] by e^{i·angle}.
    """
    a = torch.as_tensor(angle, dtype=dtype)
    c, s = torch.cos(a), torch.sin(a)
    return torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)  # (..., 2, 2)


def rotation_for_offset(
    k: int | float, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The (d_model, d_model) matrix M_k with ``PE[pos + k] = PE[pos] @ M_k`` for every pos (rows as vectors).

    M_k is block-diagonal: block i is rotation_2d(k·omega_i) acting on the pair (sin, cos) of
    columns (2i, 2i+1). Written out for the row vector [s, c] = [sin(p·w), cos(p·w)]:

        [s, c] @ [[cos kw, -sin kw],   =  [s cos kw + c sin kw,  c cos kw - s sin kw]
                  [sin kw,  cos kw]]   =  [sin((p+k)w),          cos((p+k)w)]

    M_k does not depend on pos: moving k places is the same linear map wherever you start.
    k may be negative (look back) or fractional. d_model must be even (an unpartnered last sine
    column is not a linear function of itself).
    """
    _check_size("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"rotation_for_offset needs an even d_model (sin/cos pairs), got {d_model}")
    if not is_number(k):
        raise TypeError(f"k must be an int or float offset, got {type(k).__name__}")
    blocks = rotation_2d(float(k) * frequencies(d_model, base))  # (d/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)  # (d, d)


class LearnedPositionalEmbedding(nn.Module):
    """A trained position table: one d_model-vector per position 0 ... max_len - 1.

    It has max_len × d_model parameters and knows nothing about a position it was never given:
    asking for a position ≥ max_len raises an error, and rows that training never reached stay at
    their random initial values.

    `forward(positions)` takes an integer tensor of positions (any shape, e.g. ``torch.arange(T)``)
    and returns their rows, shape ``(*positions.shape, d_model)``; `for_length(T)` is the common
    case ``forward(torch.arange(T))``, shape (T, d_model).
    """

    def __init__(self, max_len: int, d_model: int, init_std: float = 0.02):
        super().__init__()
        self.max_len = _check_size("max_len", max_len)
        self.d_model = _check_size("d_model", d_model)
        # Small random rows, as in GPT-2: positions start out nearly indistinguishable and training
        # pulls them apart.
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * init_std)  # (max_len, d_model)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        if not isinstance(positions, torch.Tensor):
            raise TypeError(
                f"positions must be an integer tensor (e.g. torch.arange(T)), got {type(positions).__name__}"
            )
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be an integer tensor (e.g. torch.arange(T)), got dtype {positions.dtype}")
        if positions.numel():
            lo, hi = int(positions.min()), int(positions.max())
            if lo < 0:
                raise ValueError(f"positions must be >= 0, got {lo}")
            if hi >= self.max_len:
                raise ValueError(
                    f"sequence length {hi + 1} exceeds max_len {self.max_len} this table was built for "
                    f"(there is no row for position {hi}; rows run 0 ... {self.max_len - 1})"
                )
        return self.weight[positions]  # (*positions.shape, d_model)

    def for_length(self, seq_len: int) -> torch.Tensor:
        """Rows for positions 0 ... seq_len - 1: shape (seq_len, d_model)."""
        _check_size("seq_len", seq_len)
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_len {self.max_len} this table was built for")
        return self(torch.arange(seq_len, device=self.weight.device))  # (T, d_model)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


# ------------------------------------------------------------------------------------------------
# Running a rotary model past its training length
# ------------------------------------------------------------------------------------------------
#
# Rotary positions make scores depend on offsets only, but a model trained on sequences of length L
# has only seen offsets below L. Past L, the slow pairs (wavelength 2π/omega_i longer than L) turn
# to angles they never reached in training, and the loss climbs. What the field does instead of
# hoping: change the frequencies so that the new length's angles look like the old length's.
#
# - "linear", position interpolation (Chen et al. 2023): every omega_i / factor, so positions
#   0 ... factor·L turn exactly as far as 0 ... L did; but neighbouring tokens now differ by a
#   factor less, in the fast pairs too.
# - "ntk", NTK-aware scaling (bloc97, 2023): a larger base, base · factor^(d/(d-2)). The fastest
#   pair keeps omega_0 = 1 and the slowest is divided by exactly `factor`: fine offsets stay sharp,
#   long ones are interpolated.
# - "llama3" (Llama 3.1's rope_scaling): pairs whose wavelength is shorter than L / high_freq_factor
#   keep their frequency, those longer than L / low_freq_factor are divided by `factor`, and the
#   ones between are blended.
# - "yarn" (Peng et al. 2023): the same idea with the band set by how many turns a pair makes
#   within L (beta_slow to beta_fast), plus a temperature: q and k are each scaled by
#   0.1 · ln(factor) + 1, so the scores by its square.
#
# None of these is free without training: the published models fine-tune briefly at the new
# length (Llama 3.1, Qwen 2.5's long versions). Changing `rope_base` before training (Llama 3:
# 500,000; Mistral 7B v0.2: 1,000,000) is the other lever: slower pairs from the start.


@dataclass(frozen=True)
class RopeScaling:
    """How rotary frequencies are stretched to reach ``factor`` times the training length
    (`rope_frequencies`). ``kind``: "linear", "ntk", "llama3" or "yarn" (see the comment above)."""

    kind: str  # "linear" (position interpolation), "ntk" (NTK-aware), "llama3" (Llama 3.1) or "yarn"
    factor: float  # the new length over the training length (Llama 3.1: 8, from 8,192 to 131,072 tokens)
    original_length: int | None = None  # the training length L (llama3 and yarn sort the pairs by it)
    low_freq_factor: float = 1.0  # llama3: wavelengths above L / low_freq_factor are interpolated
    high_freq_factor: float = 4.0  # llama3: wavelengths below L / high_freq_factor are kept
    beta_fast: float = 32.0  # yarn: pairs making more turns than this within L are kept
    beta_slow: float = 1.0  # yarn: pairs making fewer turns than this within L are interpolated

    def __post_init__(self):
        kinds = ("linear", "ntk", "llama3", "yarn")
        if self.kind not in kinds:
            raise ValueError(f"RopeScaling.kind must be one of {kinds}, got {self.kind!r}")
        if not is_number(self.factor) or not self.factor >= 1:
            raise ValueError(
                f"RopeScaling.factor must be a number >= 1 (new length / training length), got {self.factor!r}"
            )
        if self.kind in ("llama3", "yarn") and not (is_int(self.original_length) and self.original_length > 0):
            raise ValueError(
                f"RopeScaling(kind={self.kind!r}) needs original_length, the training length, as a positive int; "
                f"got {self.original_length!r}"
            )
        if self.kind == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(
                f"RopeScaling: high_freq_factor must exceed low_freq_factor, got {self.high_freq_factor} "
                f"and {self.low_freq_factor}"
            )


def rope_frequencies(d: int, base: float = 10000.0, scaling: RopeScaling | None = None) -> tuple[torch.Tensor, float]:
    """RoPE's angular speeds for a head of width ``d`` (even), optionally stretched by ``scaling``:
    ``(omega, attention_factor)``, omega shaped (d/2,) in float64. ``attention_factor`` multiplies
    the rotated q and k (1.0 except for YaRN). Without scaling, omega is `frequencies(d, base)`."""
    _check_size("d", d)
    if d % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features, so d must be even, got {d}")
    base = _check_base(base)
    if scaling is None:
        return frequencies(d, base), 1.0
    if not isinstance(scaling, RopeScaling):
        raise TypeError(f"scaling must be a RopeScaling or None, got {type(scaling).__name__}")
    s = float(scaling.factor)
    if scaling.kind == "linear":
        return frequencies(d, base) / s, 1.0
    if scaling.kind == "ntk":  # the slowest pair, i = d/2 - 1, ends up exactly s times slower
        return frequencies(d, base * s ** (d / (d - 2))), 1.0
    omega = frequencies(d, base)  # (d/2,)
    L = float(scaling.original_length)
    if scaling.kind == "llama3":
        turns = L * omega / (2 * math.pi)  # (d/2,): how many full turns each pair makes within L
        lo, hi = scaling.low_freq_factor, scaling.high_freq_factor
        keep = ((turns - lo) / (hi - lo)).clamp(0.0, 1.0)  # 1: fast pair, kept; 0: slow pair, divided by s
        return keep * omega + (1 - keep) * omega / s, 1.0

    # yarn: the same blend, over a band of pair indices found from the turns made within L. The band's
    # ends are where a pair makes beta_fast and beta_slow turns, rounded outwards to whole pairs, as in
    # the paper's reference code.
    def pair_with_turns(turns: float) -> float:  # omega_i · L = 2π · turns, solved for i
        return d * math.log(L / (2 * math.pi * turns)) / (2 * math.log(base))

    first = max(math.floor(pair_with_turns(scaling.beta_fast)), 0)
    last = min(math.ceil(pair_with_turns(scaling.beta_slow)), d - 1)
    last = last if last > first else first + 1e-3
    i = torch.arange(d // 2, dtype=torch.float64)
    interpolate = ((i - first) / (last - first)).clamp(0.0, 1.0)  # 0: kept, 1: divided by s
    return (1 - interpolate) * omega + interpolate * omega / s, 0.1 * math.log(s) + 1.0


def rotary_angles(
    positions: torch.Tensor, d: int, base: float = 10000.0, scaling: RopeScaling | None = None
) -> torch.Tensor:
    """RoPE's angles ``positions[..., None] * omega_i``: shape (*positions.shape, d/2), on the
    positions' device, in float64 (float32 on MPS, which has no float64). ``scaling`` stretches the
    frequencies (`rope_frequencies`; its attention factor is not part of the angles)."""
    _check_size("d", d)
    if d % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features, so the last dimension must be even, got {d}")
    positions = torch.as_tensor(positions)
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be a real tensor, got dtype {positions.dtype}")
    dtype = torch.float32 if positions.device.type == "mps" else torch.float64
    # frequencies() is a tiny (d/2,) table; moving it is cheap, moving the positions back and forth is not.
    omega = rope_frequencies(d, base, scaling)[0].to(device=positions.device, dtype=dtype)  # (d/2,)
    return positions.to(dtype)[..., None] * omega  # (..., d/2)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (RoPE): rotate each consecutive pair of x's last dimension.

    x: queries or keys shaped (..., T, d) with d even. positions: the position of each of the T
    rows, shape (T,), x.shape[:-1], or (B, T) for x shaped (B, n_heads, T, d); default 0 ... T-1. The pair
    (x[..., 2i], x[..., 2i+1]) at position p is turned by the angle p·omega_i:

        (x0, x1) -> (x0 cos - x1 sin,  x0 sin + x1 cos)

    which is the complex product (x0 + i·x1)·e^{i·p·omega_i}. Rotations keep lengths, and
    <R(m) q, R(n) k> = <q, R(n - m) k>: the score depends only on the offset n - m. Apply it to
    the queries and keys (after their projections), never to the values; it adds no parameters.
    Differentiable; the result has x's dtype and device.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(
            f"x must be a floating-point tensor shaped (..., T, d), got {type(x).__name__}"
            + (f" of dtype {x.dtype}" if isinstance(x, torch.Tensor) else "")
        )
    if x.dim() < 2:
        raise ValueError(f"x must be shaped (..., T, d), got shape {tuple(x.shape)}")
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features, so the last dimension must be even, got {d}")
    if positions is None:
        positions = torch.arange(T, device=x.device)
    positions = torch.as_tensor(positions, device=x.device)
    if positions.shape[-1:] != (T,):
        raise ValueError(
            f"positions must have T = {T} entries in its last dimension, got shape {tuple(positions.shape)}"
        )
    if x.dim() == 4 and positions.shape == (x.shape[0], T):
        positions = positions[:, None, :]  # (B, T) for x (B, n_heads, T, d): the same positions for every head
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not fit x of shape {tuple(x.shape)}: expected (T,), "
            f"x.shape[:-1] = {tuple(x.shape[:-1])}, or (B, T) for x shaped (B, n_heads, T, d)"
        )
    angles = rotary_angles(positions, d, base)  # (..., T, d/2) in float64
    cos = torch.cos(angles).to(device=x.device, dtype=x.dtype)  # (..., T, d/2)
    sin = torch.sin(angles).to(device=x.device, dtype=x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    out0 = x0 * cos - x1 * sin
    out1 = x0 * sin + x1 * cos
    return torch.stack([out0, out1], dim=-1).flatten(-2)  # (..., T, d/2, 2) -> (..., T, d)


def rotate_half_permutation(d: int) -> torch.Tensor:
    """The order of features that turns the "rotate half" layout into the course's interleaved one:
    ``[0, d/2, 1, d/2 + 1, ..., d/2 - 1, d - 1]``, shape (d,).

    Hugging Face's Llama pairs feature i with i + d/2; `apply_rotary` pairs 2i with 2i + 1, at the same
    frequency omega_i. So ``x[..., perm]`` puts pair i of the first layout at positions (2i, 2i + 1):
    rotating then permuting equals permuting then rotating. A query/key projection copied from a
    Llama checkpoint has its rows permuted this way within each head (checkpoint converters do the
    inverse); the scores q·k are unchanged, since q and k are permuted alike.
    """
    _check_size("d", d)
    if d % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features, so d must be even, got {d}")
    half = torch.arange(d // 2)
    return torch.stack([half, half + d // 2], dim=-1).flatten()  # (d,)
