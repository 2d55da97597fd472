"""Symbols as vectors (lesson 01): one-hot encoding, dot products, cosine similarity, and the
matrix product that, fed one-hot rows, is nothing but a table lookup.

Every function takes numpy arrays or torch tensors (and plain lists, read as numpy) and returns
the same kind it was given, so a notebook can stay in numpy while a model stays in torch.

Ids are 0-based everywhere in code: in a vocabulary of V tokens the ids run from 0 to V - 1.
(Prose and slides often count from 1; the lesson says so where it matters.)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from course_lib._validate import is_int

ArrayLike = Any  # numpy array, torch tensor, or a (nested) list of numbers


def _is_torch(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def _numpy(x: ArrayLike, dtype=None) -> np.ndarray:
    """A numpy array from an array, a list, or a torch tensor (detached, moved to the CPU)."""
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def _check_ids(ids: ArrayLike, num_classes: int, name: str = "ids") -> None:
    """Raise a readable error unless `ids` are integers in 0..num_classes-1."""
    if not is_int(num_classes):
        raise TypeError(f"num_classes must be an int, got {type(num_classes).__name__} ({num_classes!r})")
    if num_classes < 1:
        raise ValueError(f"num_classes must be at least 1, got {num_classes}")
    values = _numpy(ids)
    if values.size == 0:
        return
    if values.dtype == bool or not np.issubdtype(values.dtype, np.integer):
        flat = values.reshape(-1).tolist()
        fractional = [v for v in flat if not (isinstance(v, (int, float)) and np.isfinite(v) and v == round(v))]
        if fractional:
            example = f"; the first value that is not a whole number is {fractional[0]!r}"
        else:
            example = f" (first value {flat[0]!r}); convert with .astype(int) or .long()"
        raise TypeError(f"{name} must be integers (token ids), got dtype {values.dtype}{example}")
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= num_classes:
        bad_value = low if low < 0 else high
        position = tuple(int(i) for i in np.argwhere(values == bad_value)[0])
        hint = ""
        if low >= 1 and high == num_classes:
            hint = " They look 1-based: in code the first token has id 0, so subtract 1."
        raise ValueError(
            f"{name} must lie in 0..{num_classes - 1} (num_classes={num_classes}); "
            f"got {bad_value} at position {position}.{hint}"
        )


def one_hot(ids: ArrayLike, num_classes: int, dtype=None) -> np.ndarray | torch.Tensor:
    """One-hot vectors for integer `ids`: shape `ids.shape + (num_classes,)`.

    Row k of the result is all zeros except a 1 in column `ids[k]`. A torch tensor in gives a
    torch tensor out (float32 by default, on the same device); anything else gives a numpy array
    (float64 by default). Floats, not ints, because the rows are meant to be multiplied by weights.
    """
    _check_ids(ids, num_classes)
    if _is_torch(ids):
        ids_t = ids.long()
        out = torch.zeros(*ids_t.shape, num_classes, dtype=dtype or torch.float32, device=ids.device)
        out.scatter_(-1, ids_t.unsqueeze(-1), 1.0)  # put a 1 at column ids[k] of row k
        return out
    ids_np = np.asarray(ids)
    if ids_np.size == 0:
        ids_np = ids_np.astype(np.int64)  # an empty list reads as float; it holds no ids either way
    out = np.zeros(ids_np.shape + (num_classes,), dtype=dtype or np.float64)  # (..., V)
    # a 1 at column ids[k] of row k (np.eye(V)[ids] would too, but builds a V x V matrix first)
    np.put_along_axis(out, ids_np.astype(np.int64)[..., None], 1, axis=-1)
    return out


def dot(a: ArrayLike, b: ArrayLike) -> float:
    """The dot product of two 1-D vectors, written as the sum of products it is.

    Deliberately a plain loop: `a @ b` computes the same number much faster.
    """
    a_np, b_np = _as_vector(a, "a"), _as_vector(b, "b")
    if a_np.shape != b_np.shape:
        raise ValueError(f"dot needs two vectors of the same length, got lengths {a_np.shape[0]} and {b_np.shape[0]}")
    total = 0.0
    for x, y in zip(a_np.tolist(), b_np.tolist()):
        total += x * y
    return total


def _as_vector(x: ArrayLike, name: str) -> np.ndarray:
    arr = _numpy(x, float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector, got shape {arr.shape}")
    return arr


def norm(x: ArrayLike, dim: int = -1):
    """The Euclidean length of each vector along `dim`: sqrt(x . x)."""
    if _is_torch(x):
        return torch.linalg.vector_norm(x, dim=dim)
    return np.sqrt((np.asarray(x, dtype=float) ** 2).sum(axis=dim))


def cosine_similarity(a: ArrayLike, b: ArrayLike, dim: int = -1, eps: float | None = None):
    """cos(angle) between `a` and `b` along `dim`: the dot product of the two *normalised* vectors.

    `a` and `b` broadcast against each other, so two vectors give a number, two (N, D) stacks give
    N row-by-row similarities, and an (N, D) stack with one (D,) vector gives N similarities.
    The result lies in [-1, 1]: 1 for the same direction, 0 for perpendicular, -1 for opposite.

    A zero vector has no direction, so its cosine similarity is undefined: by default that raises
    a ValueError. Pass `eps` (e.g. 1e-8) to get torch's convention instead: each length is clamped to
    at least `eps`, so a zero vector has similarity 0 with everything (and training never crashes).
    """
    if _is_torch(a) or _is_torch(b):
        device = a.device if _is_torch(a) else b.device
        a_t, b_t = torch.as_tensor(a, device=device), torch.as_tensor(b, device=device)
        # One floating dtype for both: [0.5, 0.5] against an int tensor must not be cut to ints.
        dtype = torch.promote_types(a_t.dtype, b_t.dtype)
        dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()
        a_t, b_t = a_t.to(dtype), b_t.to(dtype)
        if a_t.shape[dim] != b_t.shape[dim]:
            raise ValueError(f"a and b must have the same length along dim {dim}, got {tuple(a_t.shape)} and {tuple(b_t.shape)}")
        na, nb = norm(a_t, dim), norm(b_t, dim)
        if eps is None:
            _refuse_zero_vectors(_numpy(na), _numpy(nb))
            return (a_t * b_t).sum(dim) / (na * nb)
        return (a_t * b_t).sum(dim) / (na.clamp_min(eps) * nb.clamp_min(eps))
    a_np, b_np = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_np.ndim == 0 or b_np.ndim == 0 or a_np.shape[dim] != b_np.shape[dim]:
        raise ValueError(f"a and b must be vectors of the same length along dim {dim}, got shapes {a_np.shape} and {b_np.shape}")
    na, nb = norm(a_np, dim), norm(b_np, dim)
    if eps is None:
        _refuse_zero_vectors(na, nb)
        return (a_np * b_np).sum(axis=dim) / (na * nb)
    return (a_np * b_np).sum(axis=dim) / (np.maximum(na, eps) * np.maximum(nb, eps))


def _refuse_zero_vectors(na: np.ndarray, nb: np.ndarray) -> None:
    for name, lengths in (("a", na), ("b", nb)):
        zero = np.argwhere(np.atleast_1d(lengths) == 0)
        if zero.size:
            where = "" if np.ndim(lengths) == 0 else f" (at index {tuple(int(i) for i in zero[0])})"
            raise ValueError(
                f"cosine similarity is undefined for a zero vector: {name} contains one{where}. "
                "Pass eps=1e-8 to treat it as similarity 0, as torch does."
            )


def cosine_similarity_matrix(a: ArrayLike, b: ArrayLike):
    """All pairwise cosine similarities: (N, D) and (M, D) give (N, M), entry [i, j] = cos(a_i, b_j).

    Normalise every row to length 1, then one matrix product does all N*M dot products at once.
    """
    a, b = (x if _is_torch(x) else _numpy(x, float) for x in (a, b))
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected a (N, D) and b (M, D) with the same D, got {tuple(a.shape)} and {tuple(b.shape)}")
    na, nb = norm(a), norm(b)
    _refuse_zero_vectors(_numpy(na), _numpy(nb))
    a_unit = a / na[:, None]  # (N, D), every row of length 1
    b_unit = b / nb[:, None]  # (M, D)
    return a_unit @ b_unit.T  # (N, M)


def naive_matmul(A: ArrayLike, B: ArrayLike) -> tuple[np.ndarray, int]:
    """A @ B computed as one dot product per (row of A, column of B), with the work it took.

    Returns `(C, multiply_adds)`. For (n, k) @ (k, m) that is n*m dot products of length k,
    n*k*m multiply-adds: cubic, n**3, for square matrices. Pure Python on purpose; use `@`.
    """
    A_np = _numpy(A, float)
    B_np = _numpy(B, float)
    if A_np.ndim != 2 or B_np.ndim != 2:
        raise ValueError(f"naive_matmul takes two matrices, got shapes {A_np.shape} and {B_np.shape}")
    n, k = A_np.shape
    k2, m = B_np.shape
    if k != k2:
        raise ValueError(f"cannot multiply ({n}, {k}) by ({k2}, {m}): A has {k} columns but B has {k2} rows")
    C = np.zeros((n, m))
    count = 0
    for i in range(n):
        for j in range(m):
            total = 0.0
            for t in range(k):  # the dot product of row i of A with column j of B
                total += A_np[i, t] * B_np[t, j]
                count += 1
            C[i, j] = total
    return C, count


def lookup(one_hot_rows: ArrayLike, matrix: ArrayLike):
    """`one_hot_rows @ matrix`: with one-hot rows, this pulls out the matching rows of `matrix`.

    `one_hot_rows` is (..., V) and `matrix` is (V, D); the result is (..., D). Row k of the result
    is row `ids[k]` of `matrix` when row k of `one_hot_rows` is one-hot for `ids[k]`. A row that is
    a weighted mix of one-hot vectors gives the same weighted mix of rows: nothing checks for
    one-hotness, because that blend is exactly what later lessons (attention) exploit.
    """
    one_hot_rows, matrix = (x if _is_torch(x) else _numpy(x, float) for x in (one_hot_rows, matrix))
    if matrix.ndim != 2:
        raise ValueError(f"matrix must be 2-D (V, D), got shape {tuple(matrix.shape)}")
    if one_hot_rows.shape[-1] != matrix.shape[0]:
        raise ValueError(
            f"one_hot_rows has {one_hot_rows.shape[-1]} columns but matrix has {matrix.shape[0]} rows; "
            "they must match (one column per vocabulary entry)"
        )
    return one_hot_rows @ matrix  # (..., V) @ (V, D) -> (..., D)


def embed(ids: ArrayLike, matrix: ArrayLike):
    """Rows `ids` of `matrix`: (...) ids and a (V, D) matrix give (..., D).

    Equal to `lookup(one_hot(ids, V), matrix)` and to `torch.nn.Embedding` with `matrix` as its
    weight, but without building the one-hot rows: indexing is what an embedding layer really does.
    """
    matrix = matrix if _is_torch(matrix) else _numpy(matrix)
    if matrix.ndim != 2:
        raise ValueError(f"matrix must be 2-D (V, D), got shape {tuple(matrix.shape)}")
    _check_ids(ids, int(matrix.shape[0]))
    if _is_torch(matrix):
        idx = ids.long().to(matrix.device) if _is_torch(ids) else torch.as_tensor(np.asarray(ids), device=matrix.device)
        return matrix[idx]  # (...) -> (..., D)
    idx = _numpy(ids)
    return np.asarray(matrix)[idx]  # (...) -> (..., D)
