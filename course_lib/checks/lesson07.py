"""Checks for the lesson 07 exercises (position): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from .core import (
    CheckFailed,
    NotAttempted,
    Seals,
    call,
    check_all,
    check_close,
    check_tensor,
    check_true,
    check_type,
    passed,
)
from .helpers import close, fmt, short, to_array


def _table(n: int, d: int, base: float = 10000.0, *, exponent: str = "2i/d", swap: bool = False,
               halves: bool = False) -> np.ndarray:
    """The sinusoidal table (float64), optionally with one classic mistake switched on.

    exponent: "2i/d" (right, i = column // 2), "i/d" (pair index without the 2), "2c/d" (the column
    number c in place of i), "c/d" (the column number c over d); swap: cosine in the even columns;
    halves: all sines in the first half, all cosines in the second.
    """
    pos = np.arange(n, dtype=np.float64)
    pe = np.zeros((n, d))
    n_sin = (d + 1) // 2
    for c in range(d):
        if halves:
            i, use_sin = (c, True) if c < n_sin else (c - n_sin, False)
        else:
            i, use_sin = c // 2, c % 2 == 0
        e = {"2i/d": 2 * i / d, "i/d": i / d, "2c/d": 2 * c / d, "c/d": c / d}[exponent]
        angle = pos / base ** e
        pe[:, c] = np.sin(angle) if use_sin != swap else np.cos(angle)
    return pe


def check_pe_entry(name: str, value: Any, pos: int, column: int, d_model: int, base: float = 10000.0,
                   atol: float = 1e-3) -> None:
    """A sinusoidal-table entry PE(pos, column) computed by hand, naming the usual slips."""
    i = column // 2
    right, other = (math.sin, math.cos) if column % 2 == 0 else (math.cos, math.sin)
    angle = pos / base ** (2 * i / d_model)
    check_type(name, value, (int, float, np.integer, np.floating, torch.Tensor, np.ndarray))
    # Most specific first: the column number used as i also makes the angle tiny, like degrees do.
    mistakes = {
        f"used the column number as i: i counts (sin, cos) pairs, so column {column} is pair "
        f"i = {column} // 2 = {i} and the exponent is 2·{i}/{d_model}": right(pos / base ** (2 * column / d_model)),
        f"used the exponent i/d instead of 2i/d (i counts pairs, so column {column} has i = {i} and the "
        f"exponent is 2·{i}/{d_model})": right(pos / base ** (i / d_model)),
        f"used the exponent column/d = {column}/{d_model}: the exponent is 2i/d with i = column // 2 = {i}":
            right(pos / base ** (column / d_model)),
        "worked in degrees (or made the angle far too small): the angle pos / 10000^(2i/d) is in radians":
            right(math.radians(angle)),
        "took sin and cos the wrong way round: even columns (0, 2, ...) hold the sine, odd columns the cosine":
            other(angle),
    }
    right_value = right(angle)
    try:
        got = float(to_array(value).reshape(-1)[0]) if to_array(value).size == 1 else None
    except (TypeError, ValueError):
        got = None
    if got is not None and not abs(got - right_value) <= atol:
        # Several slips can give (almost) the same number, e.g. cos of a tiny angle is 1 either way: name them all.
        matching = [d for d, wrong in mistakes.items() if abs(got - wrong) <= atol]
        if len(matching) > 1:
            raise CheckFailed(name, f"{fmt(got)} is not right.",
                              f"it looks like you {matching[0]}. (Or else you {'; or you '.join(matching[1:])}.)")
    check_close(name, value, right_value, atol=atol, rtol=0, mistakes=mistakes, reveal=False,
                hint=f"PE({pos}, {column}) = {'sin' if column % 2 == 0 else 'cos'}({pos} / {base:g}^(2·{i}/{d_model}))")


# The answers worked out by hand (exercises 1 and 3) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson07` from solutions/seals/lesson07.py.
SEALS = Seals({
    "pe_2_0": (3, "3b35c383e38d9bf09ce9", {
        "worked in degrees (or made the angle far too small): the angle pos / 10000^(2i/d) is in radians":
            "500761d800796139b5f6",
        "took sin and cos the wrong way round: even columns (0, 2, ...) hold the sine, odd columns the cosine":
            "ad7c0177ff8b21179da0",
    }),
    "pe_50_3": (3, "93cb3006ede000619b9a", {
        "used the column number as i: i counts (sin, cos) pairs, so column 3 is pair i = 3 // 2 = 1 and the exponent "
        "is 2·1/4 (or else you worked in degrees (or made the angle far too small): the angle pos / 10000^(2i/d) is "
        "in radians)":
            "5c39f4fbad2f1b37e76d",
        "used the exponent i/d instead of 2i/d (i counts pairs, so column 3 has i = 1 and the exponent is 2·1/4)":
            "d87702c43c1fc3e51a58",
        "used the exponent column/d = 3/4: the exponent is 2i/d with i = column // 2 = 1": "a452dbdebb56bf2afcde",
        "took sin and cos the wrong way round: even columns (0, 2, ...) hold the sine, odd columns the cosine":
            "bec8d9d94419f1de4d10",
    }),
    "pe_row_0": (3, "995dea3bbffefc7ab763", {
        "swapped sin and cos: sin 0 = 0 goes in the even columns, cos 0 = 1 in the odd ones": "c271ce4de87108b39296",
        "put a sine in every column: the odd columns hold cosines": "94424dde8be83d49e29b",
        "put a cosine in every column: the even columns hold sines": "bfa2d23d0588262504d3",
    }),
    "learned_table_params": (None, "5da770677f2105b0084e", {
        "added max_len and d_model: the table holds one d_model-vector per position, max_len × d_model numbers":
            "51a37197abb925a67245",
        "counted one position vector: there is one for each of the max_len positions": "a77ca48ca9e097241368",
        "counted one number per position: each position has a whole d_model-vector": "c741c2aed3fc6c6d163d",
        "counted a sine and a cosine table: a learned table is a single max_len × d_model matrix":
            "1c117d769aad1f05f5eb",
    }),
    "sinusoidal_params": (None, "e009d0ca387ad0baceac", {
        "counted the entries of the table: they come from a formula and are never trained": "f8fa7524d852224779de",
        "counted the frequencies: they are fixed numbers, not parameters": "2ca35cf1910df99b497c",
    }),
    "rope_params": (None, "c24aaf408c867d55f882", {
        "counted a d_model × d_model rotation matrix: RoPE's rotations are fixed by the position and the formula, "
        "nothing is trained":
            "835c90c0a74fafe89aa5",
        "counted a table of angles: the angles come from a formula, nothing is trained": "fc2bfc185abb169ba36a",
        "counted a position table: RoPE adds no table, it rotates the queries and keys": "0c2718a2b326f26d5738",
    }),
})


def check_pe_by_hand(pe_2_0: Any, pe_50_3: Any, pe_row_0: Any) -> None:
    """Exercise 1: three entries of the d = 4 sinusoidal table worked out by hand (three decimals)."""
    check_all(
        lambda: SEALS.check("pe_2_0", pe_2_0, "number", "PE(2, 0) = sin(2 / 10000^(2·0/4))"),
        lambda: SEALS.check("pe_50_3", pe_50_3, "number",
                            "PE(50, 3) = cos(50 / 10000^(2·1/4)): column 3 is the cosine of pair i = 1"),
        lambda: SEALS.check("pe_row_0", pe_row_0, "numbers",
                            "at position 0 every angle is 0 / 10000^(2i/d) = 0, whatever the column: so each entry is "
                            "sin 0 or cos 0"),
    )


def _function(name: str, fn: Callable, cases: Sequence[tuple], reference: Callable, *, label: str = "",
                  mistakes: Mapping[str, Callable] | None = None, hint: str | Callable[..., str] | None = None,
                  crash_hint: Callable[..., str | None] | None = None, dtype: torch.dtype | None = None,
                  atol: float = 1e-5) -> None:
    """Call the learner's `fn` on each args tuple in `cases` and compare with `reference`.

    The result must be a float torch tensor (of `dtype`, if given: checked after the values, so a
    wrong value is named first). `hint(*args)` may depend on the case; `crash_hint(problem, *args)`
    explains a crash (None: nothing to add). `label` only says which set of cases passed ("odd d_model").
    """
    for args in cases:
        shown = ", ".join(short(a, 30) for a in args)
        try:
            got = call(name, fn, *args)
        except NotAttempted:
            raise
        except CheckFailed as err:
            extra = crash_hint(err.problem, *args) if crash_hint is not None else None
            if extra is None:
                raise
            raise CheckFailed(name, err.problem, extra) from None
        check_tensor(name, got, f"when called as {name}({shown})",
                     "build the result with torch functions (torch.sin, torch.zeros, torch.tensor(..., "
                     "dtype=torch.float64)), or convert it at the end with torch.as_tensor(...)")
        if not got.is_floating_point():
            raise CheckFailed(name, f"expected a float tensor, got dtype {got.dtype} when called as {name}({shown}).",
                              "integer tensors cannot hold sines and cosines: create it with a float dtype")
        wrong = {d: w for d, m in (mistakes or {}).items() if (w := m(*args)) is not None}  # None: not for these args
        check_close(f"{name}({shown})", got, reference(*args), atol=atol, mistakes=wrong, quiet=True,
                    hint=hint(*args) if callable(hint) else hint)
        if dtype is not None and got.dtype != dtype:
            raise CheckFailed(name, f"the values are right, but the dtype is {got.dtype}, not {dtype} "
                              f"(when called as {name}({shown})).",
                              f"create the tensor with dtype={dtype}: torch.tensor and torch.zeros give float32 "
                              "unless told otherwise")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}" + (f", {label}" if label else ""))


def check_sinusoidal_encoding(fn: Callable, cases: Sequence[tuple[int, int]] = ((4, 6), (50, 16), (7, 5)),
                              name: str = "sinusoidal_encoding", label: str = "") -> None:
    """The learner's `sinusoidal_encoding(n_positions, d_model)` against course_lib.positional.

    Put even sizes first: the usual mistakes are named there, before an odd d_model can crash.
    """
    from course_lib import positional

    def last_column_zero(n, d):
        pe = _table(n, d)
        pe[:, -1] = 0.0
        return pe

    mistakes = {
        "used the exponent i/d instead of 2i/d (i counts the pairs: columns 2i and 2i+1 share one frequency)":
            lambda n, d: _table(n, d, exponent="i/d"),
        "let i run over all d columns (0 ... d-1) instead of over the d/2 pairs: columns 2i and 2i+1 share "
        "the exponent 2i/d": lambda n, d: _table(n, d, exponent="2c/d"),
        "used the column number c in the exponent c/d, so each cosine column (2i+1) gets its own "
        "frequency; it must share 2i/d with the sine before it": lambda n, d: _table(n, d, exponent="c/d"),
        "put the cosine in the even columns and the sine in the odd ones (even columns hold sin)":
            lambda n, d: _table(n, d, swap=True),
        "put all sines in the first half and all cosines in the second: the sines and cosines must "
        "alternate (column 2i sin, column 2i+1 cos)": lambda n, d: _table(n, d, halves=True),
    }
    odd = ("for odd d the last column is a sine with no cosine partner: an odd d_model has (d + 1) // 2 sine "
           "columns and d // 2 cosine columns, so the cosines take only the first d // 2 angles "
           "(e.g. pe[:, 1::2] = torch.cos(angle[:, : d_model // 2]))")
    odd_mistakes = {
        "left the last column at 0: " + odd: lambda n, d: last_column_zero(n, d) if d % 2 else None,
    }
    formula = ("PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(the same angle), "
               "for i = 0 ... d/2 - 1")
    _function(name, fn, list(cases), lambda n, d: positional.sinusoidal_encoding(n, d, dtype=torch.float64),
                  label=label, mistakes={**mistakes, **odd_mistakes},
                  hint=lambda n, d: formula + ("; " + odd if d % 2 else ""),
                  crash_hint=lambda problem, n, d: (
                      ("it crashed on an odd d_model = " + str(d) + ": " + odd) if d % 2 else None))


def check_position_params(learned: Any, sinusoidal: Any, rope: Any) -> None:
    """Exercise 3: the trainable parameters of a learned 1024 × 768 position table, of sinusoids and of RoPE."""
    hint = "count the numbers that training adjusts, and only those."
    check_all(lambda: SEALS.check("learned_table_params", learned, "count", hint),
              lambda: SEALS.check("sinusoidal_params", sinusoidal, "count", hint),
              lambda: SEALS.check("rope_params", rope, "count", hint))


def check_rotation(fn: Callable, angles: Sequence[float] = (0.5, -1.2), name: str = "rotation",
                   label: str = "") -> None:
    """The learner's 2×2 rotation matrix for an angle in radians (turning column vectors anticlockwise)."""
    from course_lib import positional

    def wrong(make):
        return lambda a: torch.tensor(make(math.cos(a), math.sin(a)), dtype=torch.float64)

    mistakes = {
        "put the minus sign on the bottom-left sine: that matrix turns the other way, by -angle; "
        "R(angle) = [[cos, -sin], [sin, cos]]": wrong(lambda c, s: [[c, s], [-s, c]]),
        "swapped sin and cos": wrong(lambda c, s: [[s, -c], [c, s]]),
        "forgot the minus sign: [[cos, sin], [sin, cos]] is not a rotation": wrong(lambda c, s: [[c, s], [s, c]]),
        "treated the angle as degrees: torch.cos and math.cos take radians":
            lambda a: positional.rotation_2d(math.radians(a)),
    }
    _function(name, fn, [(float(a),) for a in angles], lambda a: positional.rotation_2d(a), label=label,
                  mistakes=mistakes, dtype=torch.float64, hint="rotation(a) = [[cos a, -sin a], [sin a, cos a]]")


def check_offset_map(fn: Callable, cases: Sequence[tuple[int, int]] = ((1, 4), (5, 16)), name: str = "offset_map",
                     label: str = "") -> None:
    """The learner's M_k with PE[pos + k] = PE[pos] @ M_k, against positional.rotation_for_offset."""
    from course_lib import positional

    def blocks(k, d, speed, transpose=False):
        mats = [positional.rotation_2d(k * speed(i, d)) for i in range(d // 2)]
        return torch.block_diag(*[m.T if transpose else m for m in mats])

    mistakes = {
        "built M_(-k), the map k places back: with rows as vectors (PE[pos] @ M) each block must be "
        "[[cos, -sin], [sin, cos]] of the angle +k·ω_i":
            lambda k, d: blocks(k, d, lambda i, d: 10000.0 ** (-2 * i / d), True),
        "turned every pair by the same angle k: pair i turns by k·ω_i with ω_i = 10000^(-2i/d)":
            lambda k, d: blocks(k, d, lambda i, d: 1.0),
        "used ω_i = 10000^(-i/d): the exponent is 2i/d": lambda k, d: blocks(k, d, lambda i, d: 10000.0 ** (-i / d)),
    }
    def crash_hint(problem, k, d):
        if "numpy" in problem or "ndarray" in problem:
            return ("torch.block_diag takes torch tensors, not numpy arrays: make rotation return a torch tensor "
                    "(exercise 4 checks that), or build each block with torch.tensor(..., dtype=torch.float64)")
        return None

    _function(name, fn, list(cases), lambda k, d: positional.rotation_for_offset(k, d, dtype=torch.float64),
                  label=label, mistakes=mistakes, dtype=torch.float64, crash_hint=crash_hint,
                  hint="block i (rows and columns 2i, 2i+1) is rotation(k · 10000^(-2i/d)); zeros elsewhere")
    # The property itself, on the learner's matrix: one map moves every position by k.
    for k, d in cases:
        M = torch.as_tensor(to_array(call(name, fn, k, d)), dtype=torch.float64)
        start = abs(int(k))
        pe = positional.sinusoidal_encoding(200 + 2 * start + 1, d, dtype=torch.float64)  # room for pos and pos + k
        moved = pe[start : start + 200] @ M
        check_true(name, torch.allclose(moved, pe[start + int(k) : start + int(k) + 200], atol=1e-6),
                   f"PE[pos] @ M is not PE[pos + {k}] for d = {d}.")


def _rotary_half(x: torch.Tensor) -> torch.Tensor:
    """RoPE with the "rotate-half" pairing of GPT-NeoX and Llama: feature i turns with feature i + d/2,
    by the angle p·omega_i at position p (the same angles as apply_rotary's adjacent pairs)."""
    T, d = x.shape[-2], x.shape[-1]
    half = d // 2
    omega = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / d)  # (d/2,)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * omega  # (T, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]  # (..., T, d/2) each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)  # (..., T, d)


def _rope_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rotate: str = "qk",
                        scale: str = "sqrt", pairing: str = "adjacent") -> torch.Tensor:
    from course_lib.positional import apply_rotary

    turn = apply_rotary if pairing == "adjacent" else _rotary_half
    q = turn(q) if "q" in rotate else q
    k = turn(k) if "k" in rotate else k
    v = turn(v) if "v" in rotate else v
    d = q.shape[-1]
    divide = {"sqrt": math.sqrt(d), "none": 1.0, "d": float(d)}[scale]
    weights = torch.softmax(q @ k.transpose(-2, -1) / divide, dim=-1)  # (T, T)
    return weights @ v  # (T, d)


def check_rope_attention(fn: Callable, *, hidden: bool = False, name: str = "rope_attention", label: str = "") -> None:
    """The learner's fixed RoPE self-attention, naming which of q, k, v were (not) rotated.

    Either pairing of the features is right: apply_rotary's neighbours (2i, 2i + 1), or the
    "rotate-half" pairing (i, i + d/2) of GPT-NeoX and Llama; the mistakes are named for both.
    """
    g = torch.Generator().manual_seed(70)
    sizes = [(5, 4), (8, 16)] + ([(1, 2), (12, 32), (6, 64)] if hidden else [])
    mistakes = {
        "rotated the queries and the values (the bug in the given code): RoPE turns the queries and the KEYS, "
        "so that q_m · k_n depends on n - m; the values must not be rotated": dict(rotate="qv"),
        "rotated only the queries: the keys must be rotated too, or the score depends on the query's "
        "absolute position": dict(rotate="q"),
        "rotated only the keys: the queries must be rotated too, or the score depends on the key's "
        "absolute position; RoPE turns both, so that only the offset n - m remains": dict(rotate="k"),
        "rotated the values as well: only the queries and keys are rotated": dict(rotate="qkv"),
        "left the rotation out: the queries and keys must be rotated": dict(rotate=""),
        "rotated the keys and the values, not the queries and keys": dict(rotate="kv"),
        "rotated the right tensors but left out the division by sqrt(d): the scores are q_m · k_n / sqrt(d), "
        "as in the given code": dict(scale="none"),
        "divided the scores by d instead of sqrt(d)": dict(scale="d"),
    }
    hint = ("rotate q and k with positional.apply_rotary, then ordinary scaled dot-product attention "
            "(divide by sqrt(d)) with the untouched v")
    pairings = {"": "adjacent", " (with the rotate-half pairing)": "half"}
    for T, d in sizes:
        q, k, v = (torch.randn(T, d, generator=g, dtype=torch.float64) * 2 for _ in range(3))
        shown = f"{name}({short(q, 30)}, {short(k, 30)}, {short(v, 30)})"
        got = call(name, fn, q.clone(), k.clone(), v.clone())
        check_tensor(name, got, f"when called as {shown}",
                     "compute with torch operations (positional.apply_rotary, @, torch.softmax), or convert the result "
                     "with torch.as_tensor(...)")
        if not got.is_floating_point():
            raise CheckFailed(name, f"expected a float tensor, got dtype {got.dtype} when called as {shown}.")
        got_array = to_array(got)
        if got_array.shape == (T, d) and close(got_array, to_array(_rope_attention(q, k, v, pairing="half")),
                                               1e-5, 1e-4):
            continue  # the rotate-half pairing: just as right
        wrong = {description + suffix: _rope_attention(q, k, v, **{"rotate": "qk", **kw}, pairing=pairing)
                 for suffix, pairing in pairings.items() for description, kw in mistakes.items()}
        check_close(shown, got, _rope_attention(q, k, v), atol=1e-5, mistakes=wrong, quiet=True, hint=hint)
    passed(name, f"{len(sizes)} case{'s' if len(sizes) != 1 else ''}" + (f", {label}" if label else ""))


def _shuffle_example() -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The exercise's five word vectors, their self-attention outputs and the permutation."""
    from course_lib.attention import scaled_dot_product_attention

    g = torch.Generator().manual_seed(7)
    X = torch.randn(5, 4, generator=g)  # (5, 4)
    W_q, W_k, W_v = (torch.randn(4, 4, generator=g) / 2 for _ in range(3))
    perm = [3, 0, 4, 1, 2]

    def attend(x):
        return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)[0]  # (5, 4)

    return attend(X), attend(X[perm]), perm


def check_shuffled_output(value: Any, name: str = "Y_shuffled") -> None:
    """The predicted output of unmasked self-attention on shuffled words: the outputs shuffled the same way."""
    Y, expected, perm = _shuffle_example()
    inverse = [perm.index(j) for j in range(len(perm))]
    check_close(name, value, expected, atol=1e-4, mistakes={
        "kept the original order: self-attention without a mask is permutation-EQUIVARIANT, not invariant; "
        "every output row moves with its word": Y,
        "applied the inverse permutation: the new row j belongs to word perm[j], so the new output is Y[perm]":
            Y[inverse],
        "reversed the rows": Y.flip(0),
    }, hint="the new input is X[perm]; each word keeps its own output vector")
