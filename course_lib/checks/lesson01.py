"""Checks for the lesson 01 exercises (one-hot vectors and dot products): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from .core import CheckFailed, NotAttempted, Seals, call, check_all, check_close, check_true, check_type, passed
from .helpers import close, function_name, short, to_array


def _one_hot(ids, num_classes: int) -> np.ndarray:
    """Reference one-hot rows, (N, V) float, written independently of course_lib.vectors."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.zeros((ids.size, num_classes))
    out[np.arange(ids.size), ids] = 1.0
    return out


def check_one_hot(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "one_hot") -> None:
    """The learner's `one_hot(ids, num_classes)` for a 1-D batch of 0-based ids -> (N, V) floats."""
    cases = cases or [([1, 2, 0], 3), ([0, 0, 4, 2], 5)]
    fn_name = function_name(name)
    for ids, num_classes in cases:
        ids = np.asarray(ids)
        shown = f"{fn_name}(np.array({ids.tolist()}), {num_classes})"
        got = call(fn_name, fn, ids.copy(), num_classes)
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        if not isinstance(got, np.ndarray):
            where = ("this exercise asks for numpy: start from np.zeros((len(ids), num_classes)), not torch"
                     if isinstance(got, torch.Tensor) else
                     "start from out = np.zeros((len(ids), num_classes)), a float array, and set one 1 per row")
            raise CheckFailed(shown, f"expected a float numpy array, got {type(got).__name__} ({short(got)}).",
                              where + ".")
        want = _one_hot(ids, num_classes)
        arr = to_array(got)
        if arr.shape == (num_classes,) and len(ids) > 1:
            raise CheckFailed(shown, f"expected shape {want.shape} (one row per id), got {arr.shape}.",
                              "it looks like you added all the rows together into one vector; keep one row per id.")
        if arr.shape == want.T.shape and close(arr, want.T, 1e-6, 0) and not close(arr, want, 1e-6, 0):
            raise CheckFailed(shown, "the values are not right.",
                              "your result is the transpose of the expected one: one row per id, one column per "
                              "vocabulary entry.")
        mistakes = {
            "treated the ids as 1-based (the 1 landed one column to the left, at id - 1)":
                _one_hot((ids - 1) % num_classes, num_classes),
            "put the 1 one column too far to the right (at id + 1)": _one_hot((ids + 1) % num_classes, num_classes),
            "made a matrix of ones with a 0 at each id (the complement)": 1.0 - want,
        }
        check_close(shown, got, want, mistakes=mistakes, quiet=True)
        kind = np.asarray(arr).dtype
        check_true(
            shown,
            np.issubdtype(kind, np.floating),
            f"the values are right but the dtype is {kind}.",
            "use a float array (np.zeros(..., dtype=float)): one-hot rows get multiplied by real-valued weights.",
        )
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


# The answers worked out by hand (exercises 2 and 3) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson01` from solutions/seals/lesson01.py.
SEALS = Seals({
    "dot_ab": (6, "c5bf66c4d0fa64e99b50", {
        "added the entries instead of multiplying them pairwise": "473dd632985e5b19aa65",
        "dropped the minus sign of b's second entry": "8cfebdf03c2a8036b4e8",
        "multiplied the lengths |a| |b| instead of the matching entries": "2ed46e6016a3f3b7ab74",
    }),
    "cos_ab": (6, "642209b41775f26e068c", {
        "forgot to divide by the lengths (that is the plain dot product)": "1a4f3a0792d06e61a48d",
        "divided by only one length": "c88d0d6ff32c1b96bfa5",
        "divided by the squared lengths |a|²|b|² instead of |a||b| (a length is the square root of a · a)":
            "c37f4a2f1214632f6735",
        "divided by |a| + |b| instead of |a| × |b|": "a118eeb6063bdcc6e6b8",
        "dropped the minus sign of b's second entry in the dot product": "6bfed744ef59db3f190b",
        "rounded to 2 decimals; keep the exact value (write the division and let Python do it)": "d7cde89933930fce9759",
        "rounded to 3 decimals; keep the exact value (write the division and let Python do it)": "3297a029c2e24bb1ce40",
        "rounded to 4 decimals; keep the exact value (write the division and let Python do it)": "c44f71a6487c7a38a357",
        "rounded to 5 decimals; keep the exact value (write the division and let Python do it)": "edde51da6cc790dacd7c",
        "rounded the last digit up; keep the exact value (write the division and let Python do it)":
            "31c35c996bc837bec6bb",
    }),
    "shape_one_hot": (None, "94bfca4de519144b52cc", {
        "put the vocabulary axis first; the one-hot vectors go along the last axis": "883d09006ed28003fe7b",
        "flattened the batch; the one-hot array keeps the ids' shape (4, 7) and adds an axis": "ab2b1709051c727e279e",
        "wrote the shape of E instead": "a640cfa8b75b6763bad3",
        "gave the shape after the product with E; this asks for the one-hot array itself": "4d4a8f83dcfa21762fcc",
    }),
    "shape_lookup": (None, "e5681b0ec451260b2924", {
        "kept the vocabulary axis; the product replaces the inner size 50 with E's 16 columns": "928df4ca1ceef91ec085",
        "flattened the batch; the product keeps the leading axes (4, 7)": "70e1c377cf02646db7e9",
        "wrote the shape of E": "77d8c8e52e7deab90484",
        "put E's columns first; (..., V) @ (V, D) ends with D": "2adb730d34f8b8989b96",
    }),
    "multiply_adds": (None, "49b943177ae7f5db50f2", {
        "counted the dot products (28 × 16) rather than the multiply-adds inside them": "6480a9eb553c45aaada0",
        "counted the entries of the one-hot array (28 × 50)": "81acd68d5b356f971c39",
        "used only one sentence (7 × 50 × 16)": "5031374bbd8ce70893b5",
        "counted the entries of E (50 × 16)": "700ff8e26854afc052e4",
        "counted the multiplications and the additions separately; a multiply-add is one of each":
            "6d19551ed18e64e6ba4c",
    }),
})


def check_cosine_by_hand(dot_ab: Any, cos_ab: Any) -> None:
    """Exercise 2: a · b and cos(a, b) for a = [2, 1, 2], b = [2, -2, 1], each checked and reported."""
    check_all(
        lambda: SEALS.check("dot_ab", dot_ab, "number",
                            "multiply matching entries (first with first, second with second, third with third) and "
                            "add the three products."),
        lambda: SEALS.check("cos_ab", cos_ab, "number",
                            "cos(a, b) = (a · b) / (|a| |b|), where |a| is the square root of a · a; it lies between "
                            "-1 and 1."),
    )


def check_lookup_shapes(shape_one_hot: Any, shape_lookup: Any, multiply_adds: Any) -> None:
    """Exercise 3: the shapes of one_hot(ids, 50) and of one_hot(ids, 50) @ E, and the multiply-adds spent."""
    shapes = "write the shapes of the two factors next to each other: (..., V) @ (V, D) keeps the outer sizes."
    check_all(
        lambda: SEALS.check("shape_one_hot", shape_one_hot, "shape",
                            "the one-hot array keeps the ids' shape and adds one axis of V entries."),
        lambda: SEALS.check("shape_lookup", shape_lookup, "shape", shapes),
        lambda: SEALS.check("multiply_adds", multiply_adds, "count",
                            "an (n, k) @ (k, m) product is n·m dot products of length k: n·k·m multiply-adds."),
    )


def _rows_cosine(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return (a * b).sum(axis=1) / (np.sqrt((a * a).sum(axis=1)) * np.sqrt((b * b).sum(axis=1)))


def check_cosine_rows(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "cosine_rows") -> None:
    """The learner's row-wise cosine similarity: (N, D), (N, D) -> (N,)."""
    if cases is None:
        cases = [
            (np.array([[3.0, 4.0], [1.0, 0.0]]), np.array([[6.0, 8.0], [0.0, 5.0]])),
            (np.array([[1.0, 2.0, 2.0], [2.0, 0.0, 0.0]]), np.array([[2.0, -2.0, 1.0], [4.0, 4.0, 2.0]])),
        ]
    fn_name = function_name(name)
    axis_hint = ("it looks like you summed over axis 0 (down the columns): each row's dot product and each row's "
                 "length are sums along that row, axis=1.")
    for a, b in cases:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        shown = f"{fn_name}(a of shape {a.shape}, b of shape {b.shape})"
        try:
            got = fn(a.copy(), b.copy())
        except NotImplementedError:
            raise NotAttempted(fn_name) from None
        except CheckFailed:
            raise
        except Exception as err:  # name the likely cause instead of showing a traceback
            hint = axis_hint if "broadcast" in str(err) else None
            raise CheckFailed(shown, f"raised {type(err).__name__}: {err}.", hint) from None
        if got is None:
            raise CheckFailed(shown, "got None: did you forget to `return` the result?")
        if not isinstance(got, np.ndarray):
            raise CheckFailed(shown, f"expected a numpy array of shape ({len(a)},), got {type(got).__name__} "
                                     f"({short(got)}).",
                              "work on whole arrays with numpy ((a * b).sum(axis=1), np.linalg.norm(..., axis=1)); "
                              "if you built a list, return np.array(your_list).")
        dots = (a * b).sum(axis=1)
        na, nb = np.sqrt((a * a).sum(axis=1)), np.sqrt((b * b).sum(axis=1))
        mistakes = {
            "divided by the length of a only (b is never normalised)": dots / na,
            "divided by the length of b only (a is never normalised)": dots / nb,
            "returned the plain dot products, without normalising either vector": dots,
            "divided by the squared lengths |a|²|b|² instead of |a||b|": dots / (na**2 * nb**2),
            "divided by |a|·|b|² (b's length squared) instead of |a|·|b|": dots / (na * nb**2),
            "divided by |a|²·|b| (a's length squared) instead of |a|·|b|": dots / (na**2 * nb),
            "divided by |a|² (a's length squared) instead of |a|·|b|: the dot product is divided by both lengths, "
            "once each": dots / na**2,
            "divided by |b|² (b's length squared) instead of |a|·|b|: the dot product is divided by both lengths, "
            "once each": dots / nb**2,
            "divided by the sum |a| + |b| instead of the product |a|·|b|": dots / (na + nb),
            "divided by the length of the whole matrix (np.linalg.norm without axis=1) instead of each row's":
                dots / (np.linalg.norm(a) * np.linalg.norm(b)),
            "summed over axis 0 (down the columns) instead of along each row (axis=1)":
                (a * b).sum(axis=0) / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0)),
            "took the lengths over axis 0 (down the columns); each row's length is a sum along the row (axis=1)":
                dots / (np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0)) if a.shape[0] == a.shape[1]
                else np.full(len(a), np.nan),
        }
        got_arr = to_array(got)
        keepdims = ("it looks like a sum or a norm kept its axis (keepdims=True): dividing an (N,) array by an (N, 1) "
                    "one broadcasts to (N, N). Leave keepdims out here, so that the dot products and the lengths are "
                    "all (N,).")
        if got_arr.shape == (len(a), len(b)) and len(a) > 1:
            every_pair = (a @ b.T) / np.outer(na, nb)  # (N, N): row i of a against every row of b
            if close(got_arr.astype(float), every_pair, 1e-5, 1e-4):
                raise CheckFailed(shown, f"expected one similarity per row, shape ({len(a)},), got {got_arr.shape}.",
                                  "you compared every row of a with every row of b (a @ b.T); pair row i of a with "
                                  "row i of b.")
            raise CheckFailed(shown, f"expected one similarity per row, shape ({len(a)},), got "
                                     f"{got_arr.shape}.", keepdims)
        if got_arr.shape == (len(a), 1) and close(got_arr.astype(float).ravel(), _rows_cosine(a, b), 1e-5, 1e-4):
            raise CheckFailed(shown, f"the values are right, but the shape is {got_arr.shape}, not ({len(a)},).",
                              "it looks like you used keepdims=True everywhere, which leaves a column of similarities: "
                              "leave keepdims out (or flatten the result with .ravel()).")
        if got_arr.shape == (a.shape[1],) and a.shape[0] != a.shape[1]:
            raise CheckFailed(shown, f"expected one similarity per row, shape ({len(a)},), got "
                                     f"{got_arr.shape}.", axis_hint)
        check_close(shown, got, _rows_cosine(a, b), mistakes=mistakes, quiet=True)
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}")


def _embed_error_hint(text: str, ids: torch.Tensor, E: torch.Tensor) -> str | None:
    """Name the usual cause of an error raised inside the learner's `embed_by_matmul`."""
    V = E.shape[0]
    if "shapes cannot be multiplied" in text or "size mismatch" in text:
        columns = int(ids.max()) + 1 if ids.numel() else 0
        if columns != V and f"x{columns} and {V}x" in text:
            return (f"it looks like you called F.one_hot(ids) without num_classes: it then makes only max(ids) + 1 = "
                    f"{columns} columns, but E has {V} rows. Pass num_classes=V (E.shape[0]).")
        return f"the one-hot rows need one column per row of E: (..., V) @ (V, D) with V = E.shape[0] = {V}."
    if "dtype" in text or "scalar type" in text:
        if "long" in text.lower():
            return "F.one_hot returns int64; convert with .to(E.dtype) before @."
        return (f"the one-hot rows and E have different float types (E is {str(E.dtype).replace('torch.', '')} here): "
                "convert the one-hot rows with .to(E.dtype), not .float().")
    return None


def _looked_up_by_index(fn: Callable, ids: torch.Tensor, E: torch.Tensor) -> bool:
    """True if `fn` picks rows of E by indexing rather than by a one-hot matrix product.

    A black-box test (the grader runs the learner's function in another process, so the result's
    grad_fn is not theirs): put inf in a row of E that no id looks up. A product with one-hot rows
    then meets 0 * inf = nan in every output row; indexing never touches that row.
    """
    unused = sorted(set(range(E.shape[0])) - set(ids.flatten().tolist()))
    if not unused or not E.is_floating_point():
        return False
    probe = E.detach().clone()
    probe[unused[0]] = float("inf")
    try:
        out = fn(ids.clone(), probe)
    except Exception:  # a crash here is not this check's business: the value checks already passed
        return False
    return isinstance(out, torch.Tensor) and bool(torch.isfinite(out).all())


def check_embed_by_matmul(fn: Callable, cases: Sequence[tuple] | None = None, name: str = "embed_by_matmul") -> None:
    """The learner's lookup `one_hot(ids) @ E` in torch: forward equal to `E[ids]`, gradients equal to
    `nn.Embedding`'s, and computed with a matrix product rather than by indexing."""
    if cases is None:
        gen = torch.Generator().manual_seed(1)
        cases = [
            (torch.tensor([1, 2, 0]), torch.arange(12.0).reshape(3, 4)),
            (torch.tensor([[3, 3, 0], [1, 4, 2]]), torch.randn(5, 2, generator=gen)),
            (torch.tensor([0, 1]), torch.randn(5, 3, generator=gen)),  # the last ids (2, 3, 4) never occur
            (torch.tensor([2, 0, 2]), torch.randn(3, 2, generator=gen, dtype=torch.float64)),  # E in float64
        ]
    fn_name = function_name(name)
    for ids, E in cases:
        V = E.shape[0]
        E_learner = E.detach().clone().requires_grad_()
        shown_ids = f"ids=tensor({ids.tolist()})" if ids.numel() <= 8 else f"ids of shape {tuple(ids.shape)}"
        shown = f"{fn_name}({shown_ids}, E of shape {tuple(E.shape)}, {str(E.dtype).replace('torch.', '')})"
        try:
            got = fn(ids.clone(), E_learner)
        except NotImplementedError:
            raise NotAttempted(fn_name) from None
        except CheckFailed:
            raise
        except Exception as err:  # name the likely cause instead of showing a traceback
            raise CheckFailed(shown, f"raised {type(err).__name__}: {err}.",
                              _embed_error_hint(str(err), ids, E)) from None
        check_type(shown, got, torch.Tensor)
        mistakes = {"treated the ids as 1-based (every word got the row before its own)": E[(ids - 1) % V]}
        check_close(shown, got, E[ids], mistakes=mistakes, quiet=True)
        grad_fn = type(got.grad_fn).__name__ if got.grad_fn is not None else ""
        check_true(shown, got.grad_fn is not None,
                   "no gradient can flow from the result back to E.",
                   "keep everything in torch: no .detach(), .numpy() or torch.tensor(...) around E.")
        check_true(shown, "Index" not in grad_fn and "Embedding" not in grad_fn and not _looked_up_by_index(fn, ids, E),
                   "the values are right, but they came from indexing E directly.",
                   "this exercise asks for the matrix product: build the one-hot rows, then multiply by E.")
        check_true(shown, got.dtype == E.dtype,
                   f"the values are right, but the result is {str(got.dtype).replace('torch.', '')} while E is "
                   f"{str(E.dtype).replace('torch.', '')}.",
                   "convert the one-hot rows with .to(E.dtype) (not .float()) and leave E as it is.")
        upstream = torch.linspace(-1.0, 1.0, got.numel()).reshape(got.shape)
        (got * upstream).sum().backward()
        emb = torch.nn.Embedding(V, E.shape[1])
        with torch.no_grad():
            emb.weight.copy_(E)
        (emb(ids) * upstream).sum().backward()
        check_close(f"{shown}: gradient of E", E_learner.grad, emb.weight.grad, quiet=True,
                    hint="the gradient should match torch.nn.Embedding's: each looked-up row collects its positions' "
                         "gradients.")
    passed(name, f"{len(cases)} case{'s' if len(cases) != 1 else ''}, values and gradients")
