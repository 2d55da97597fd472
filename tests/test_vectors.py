"""course_lib.vectors against torch's own one_hot, cosine_similarity, Embedding and matmul."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib import vectors
from course_lib.checks import lesson01


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --- one_hot ----------------------------------------------------------------------------------------


def test_one_hot_matches_torch_for_batches():
    ids = torch.randint(0, 7, (4, 5))
    got = vectors.one_hot(ids, 7)
    want = F.one_hot(ids, 7).float()
    assert got.shape == (4, 5, 7), f"shape {tuple(got.shape)}, expected (4, 5, 7)"
    assert got.dtype == torch.float32, f"dtype {got.dtype}, expected float32"
    torch.testing.assert_close(got, want)


def test_one_hot_numpy_and_list_inputs_give_numpy():
    ids = [1, 2, 0]  # "find my files" with the sorted vocabulary files=0, find=1, my=2
    got = vectors.one_hot(ids, 3)
    want = F.one_hot(torch.tensor(ids), 3).numpy().astype(float)
    assert isinstance(got, np.ndarray), f"expected a numpy array, got {type(got).__name__}"
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(vectors.one_hot(np.array(ids), 3), want)
    assert got.sum(axis=1).tolist() == [1.0, 1.0, 1.0], f"row sums {got.sum(axis=1)}, expected all 1"


def test_one_hot_empty_and_scalar():
    assert vectors.one_hot([], 4).shape == (0, 4), "an empty list of ids should give a (0, V) array"
    got = vectors.one_hot(2, 4)
    np.testing.assert_array_equal(got, [0.0, 0.0, 1.0, 0.0])


def test_one_hot_torch_dtype_and_device_are_kept():
    ids = torch.tensor([0, 3])
    got = vectors.one_hot(ids, 4, dtype=torch.float64)
    assert got.dtype == torch.float64 and got.device == ids.device, f"got {got.dtype} on {got.device}"


@pytest.mark.parametrize(
    "ids, pattern",
    [
        ([1, 2, 3], r"0\.\.2 .*got 3 at position \(2,\).*1-based"),
        ([-1, 0], r"0\.\.2 .*got -1 at position \(0,\)"),
        (torch.tensor([[0, 5]]), r"got 5 at position \(0, 1\)"),
    ],
)
def test_one_hot_out_of_range_names_value_and_range(ids, pattern):
    with pytest.raises(ValueError, match=pattern):
        vectors.one_hot(ids, 3)


@pytest.mark.parametrize(
    "ids, pattern",
    [
        ([0.5, 1], r"must be integers.*float64.*not a whole number is 0\.5"),
        (np.array([1.0, 2.0]), r"must be integers.*first value 1\.0"),
        (torch.tensor([1.0, 2.0]), r"must be integers.*float32"),
        (np.array([True, False]), r"must be integers.*bool"),
    ],
)
def test_one_hot_non_integer_ids(ids, pattern):
    with pytest.raises(TypeError, match=pattern):
        vectors.one_hot(ids, 3)


def test_one_hot_bad_num_classes():
    with pytest.raises(ValueError, match="at least 1, got 0"):
        vectors.one_hot([0], 0)
    with pytest.raises(TypeError, match="num_classes must be an int, got float"):
        vectors.one_hot([0], 3.0)


# --- dot products and cosine similarity --------------------------------------------------------------


def test_dot_is_the_sum_of_products():
    assert vectors.dot([1, 3, -5], [4, -2, -1]) == 3.0, "[1, 3, -5] . [4, -2, -1] should be 3"
    a, b = torch.randn(10, dtype=torch.float64), torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(torch.tensor(vectors.dot(a, b), dtype=torch.float64), a @ b)
    with pytest.raises(ValueError, match="same length, got lengths 2 and 3"):
        vectors.dot([1, 2], [1, 2, 3])


def test_dot_equals_lengths_times_cosine():
    a, b = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    geometric = vectors.norm(a) * vectors.norm(b) * vectors.cosine_similarity(a, b)
    torch.testing.assert_close(geometric, a @ b)


def test_cosine_similarity_matches_torch_rows_and_broadcast():
    a, b = torch.randn(6, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    torch.testing.assert_close(vectors.cosine_similarity(a, b), F.cosine_similarity(a, b, dim=-1))
    torch.testing.assert_close(vectors.cosine_similarity(a, b[0]), F.cosine_similarity(a, b[0:1], dim=-1))
    # numpy gives the same numbers
    np.testing.assert_allclose(vectors.cosine_similarity(a.numpy(), b.numpy()), F.cosine_similarity(a, b).numpy())
    # along another dim
    torch.testing.assert_close(vectors.cosine_similarity(a, b, dim=0), F.cosine_similarity(a, b, dim=0))


def test_cosine_similarity_gradients_match_torch():
    a = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    weights = torch.randn(3, dtype=torch.float64)
    (vectors.cosine_similarity(a, b) * weights).sum().backward()
    (F.cosine_similarity(a2, b2, dim=-1) * weights).sum().backward()
    torch.testing.assert_close(a.grad, a2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


def test_cosine_similarity_range_and_special_cases():
    assert vectors.cosine_similarity([1, 0], [3, 0]) == pytest.approx(1.0)
    assert vectors.cosine_similarity([1, 0], [0, 2]) == pytest.approx(0.0)
    assert vectors.cosine_similarity([1, 2], [-2, -4]) == pytest.approx(-1.0)
    values = vectors.cosine_similarity(torch.randn(200, 3), torch.randn(200, 3))
    assert values.abs().max() <= 1 + 1e-6, f"max |cos| = {values.abs().max().item()}, expected <= 1"
    # one-hot words: each is perfectly similar to itself and unlike every other word
    eye = vectors.one_hot([0, 1, 2, 3], 4)
    np.testing.assert_allclose(vectors.cosine_similarity_matrix(eye, eye), np.eye(4))


def test_cosine_similarity_zero_vector():
    with pytest.raises(ValueError, match=r"zero vector: b contains one"):
        vectors.cosine_similarity([1.0, 2.0], [0.0, 0.0])
    with pytest.raises(ValueError, match=r"zero vector: a contains one \(at index \(1,\)\)"):
        vectors.cosine_similarity(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([1.0, 1.0]))
    # with eps, torch's convention: a zero vector scores 0 (and tiny vectors are clamped the same way)
    a = torch.tensor([[0.0, 0.0], [1e-9, 0.0]])
    b = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    torch.testing.assert_close(vectors.cosine_similarity(a, b, eps=1e-8), F.cosine_similarity(a, b, dim=-1, eps=1e-8))
    np.testing.assert_allclose(vectors.cosine_similarity(a.numpy(), b.numpy(), eps=1e-8), [0.0, 0.1], rtol=1e-6)


def test_cosine_similarity_shape_mismatch():
    with pytest.raises(ValueError, match=r"same length along dim -1"):
        vectors.cosine_similarity([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"same length along dim -1"):
        vectors.cosine_similarity(torch.ones(2, 3), torch.ones(2, 4))


def test_cosine_similarity_matrix_matches_torch():
    a, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)
    want = F.cosine_similarity(a[:, None, :], b[None, :, :], dim=-1)  # (4, 5)
    torch.testing.assert_close(vectors.cosine_similarity_matrix(a, b), want)
    with pytest.raises(ValueError, match=r"same D, got \(4, 6\) and \(6,\)"):
        vectors.cosine_similarity_matrix(a, b[0])


# --- matrix multiplication ---------------------------------------------------------------------------


@pytest.mark.parametrize("n, k, m", [(1, 1, 1), (2, 3, 4), (5, 5, 5)])
def test_naive_matmul_matches_at_and_counts_cubic_work(n, k, m):
    A, B = torch.randn(n, k, dtype=torch.float64), torch.randn(k, m, dtype=torch.float64)
    C, count = vectors.naive_matmul(A, B)
    torch.testing.assert_close(torch.from_numpy(C), A @ B)
    assert count == n * k * m, f"counted {count} multiply-adds, expected n*k*m = {n * k * m}"


def test_naive_matmul_shape_error():
    with pytest.raises(ValueError, match=r"A has 3 columns but B has 2 rows"):
        vectors.naive_matmul(np.ones((2, 3)), np.ones((2, 2)))


# --- lookup and embedding ----------------------------------------------------------------------------


def test_one_hot_times_matrix_is_embedding_lookup_forward_and_backward():
    V, D = 6, 4
    emb = torch.nn.Embedding(V, D)
    E = emb.weight.detach().clone().requires_grad_()
    ids = torch.tensor([[2, 5, 2], [0, 1, 3]])  # (B=2, T=3), with a repeated id
    out_lookup = vectors.lookup(vectors.one_hot(ids, V), E)  # (2, 3, D)
    out_embed = vectors.embed(ids, E)
    out_torch = emb(ids)
    torch.testing.assert_close(out_lookup, out_torch)
    torch.testing.assert_close(out_embed, out_torch)
    # gradients: each row of the table collects the gradient of every position that used it
    upstream = torch.randn(2, 3, D)
    (out_lookup * upstream).sum().backward()
    (out_torch * upstream).sum().backward()
    torch.testing.assert_close(E.grad, emb.weight.grad)
    assert E.grad[4].abs().sum() == 0, "row 4 was never looked up, so its gradient must be zero"


def test_lookup_and_embed_in_numpy():
    E = np.arange(12.0).reshape(4, 3)
    ids = [3, 0, 3]
    np.testing.assert_array_equal(vectors.lookup(vectors.one_hot(ids, 4), E), E[ids])
    np.testing.assert_array_equal(vectors.embed(ids, E), E[ids])
    # a weighted mix of one-hot rows pulls out the same mix of rows
    mix = 0.25 * vectors.one_hot(0, 4) + 0.75 * vectors.one_hot(2, 4)
    np.testing.assert_allclose(vectors.lookup(mix, E), 0.25 * E[0] + 0.75 * E[2])


def test_lookup_and_embed_errors():
    E = np.zeros((4, 3))
    with pytest.raises(ValueError, match=r"one_hot_rows has 5 columns but matrix has 4 rows"):
        vectors.lookup(np.zeros((2, 5)), E)
    with pytest.raises(ValueError, match=r"matrix must be 2-D"):
        vectors.lookup(np.zeros((2, 4)), np.zeros(4))
    with pytest.raises(ValueError, match=r"0\.\.3 .*got 4"):
        vectors.embed([4], E)
    with pytest.raises(TypeError, match="must be integers"):
        vectors.embed(torch.tensor([1.0]), torch.zeros(4, 3))


# --- the lesson 01 exercise checks name the typical mistakes -----------------------------------------

from course_lib import checks  # noqa: E402


def _fails_with(check, *args, match: str, **kwargs):
    with pytest.raises(checks.CheckFailed, match=match):
        check(*args, **kwargs)


def test_check_one_hot_names_mistakes():
    def right(ids, V):
        return vectors.one_hot(ids, V)

    lesson01.check_one_hot(right)
    _fails_with(lesson01.check_one_hot, lambda ids, V: vectors.one_hot((ids - 1) % V, V), match="1-based")
    _fails_with(lesson01.check_one_hot, lambda ids, V: vectors.one_hot(ids, V).T, match="transpose|transposed")
    _fails_with(lesson01.check_one_hot, lambda ids, V: vectors.one_hot(ids, V).astype(int), match="dtype is int")
    _fails_with(lesson01.check_one_hot, lambda ids, V: vectors.one_hot(ids, V).sum(0), match="added all the rows")

    def unfinished(ids, V):
        raise NotImplementedError()

    _fails_with(lesson01.check_one_hot, unfinished, match="not attempted")


def test_check_cosine_rows_names_mistakes():
    lesson01.check_cosine_rows(lambda a, b: vectors.cosine_similarity(a, b))
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1), match="length of a only")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(1), match="plain dot products")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(1) / (np.linalg.norm(a) * np.linalg.norm(b)), match="whole matrix")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: vectors.cosine_similarity_matrix(a, b), match=r"a @ b.T")


def test_check_embed_by_matmul_names_mistakes():
    lesson01.check_embed_by_matmul(lambda ids, E: F.one_hot(ids, E.shape[0]).to(E.dtype) @ E)
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: E[ids], match="indexing E directly")
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: torch.tensor((F.one_hot(ids, E.shape[0]).to(E.dtype) @ E).tolist()),
                match="no gradient")
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: F.one_hot((ids - 1) % E.shape[0], E.shape[0]).to(E.dtype) @ E,
                match="1-based")
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: F.one_hot(ids, E.shape[0]).to(E.dtype) @ E.detach(),
                match="no gradient")
    # every visible case must catch these: ids without the last id, E in float64, int64 one-hot rows
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: F.one_hot(ids).to(E.dtype) @ E, match="pass num_classes|Pass num_classes")
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: F.one_hot(ids, E.shape[0]) @ E, match=r"F.one_hot returns int64")
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: F.one_hot(ids, E.shape[0]).float() @ E, match=r"not .float\(\)")
    _fails_with(lesson01.check_embed_by_matmul, lambda ids, E: F.one_hot(ids, E.shape[0]).float() @ E.float(), match="while E is float64")
    with pytest.raises(checks.CheckFailed) as info:  # a label such as "(more cases)" stays out of the call shown
        lesson01.check_embed_by_matmul(lambda ids, E: F.one_hot(ids).to(E.dtype) @ E, name="embed_by_matmul (more cases)")
    assert "embed_by_matmul(ids=" in str(info.value) and "cases)(" not in str(info.value), str(info.value)


def test_check_one_hot_and_cosine_rows_want_numpy_arrays_and_name_axis_mistakes():
    _fails_with(lesson01.check_one_hot, lambda ids, V: vectors.one_hot(ids, V).tolist(), match="expected a float numpy array, got list")
    _fails_with(lesson01.check_one_hot, lambda ids, V: torch.from_numpy(vectors.one_hot(ids, V)), match="not torch")
    norm = np.linalg.norm
    _fails_with(lesson01.check_cosine_rows, lambda a, b: list(vectors.cosine_similarity(a, b)), match="expected a numpy array")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(0) / (norm(a, axis=0) * norm(b, axis=0)), match="axis 0")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(1) / (norm(a, axis=0) * norm(b, axis=0)), match="axis 0")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(1) / (norm(a, axis=1) * norm(b, axis=1) ** 2), match=r"\|a\|·\|b\|²")
    _fails_with(lesson01.check_cosine_rows, lambda a, b: (a * b).sum(1) / (norm(a, axis=1) + norm(b, axis=1)), match=r"\|a\| \+ \|b\|")


def test_check_predicted_shape():
    checks.check_shape("s", (4, 7, 16), (4, 7, 16))
    _fails_with(checks.check_shape, "s", (28, 16), (4, 7, 16), {"flattened the batch": (28, 16)}, match="flattened")
    _fails_with(checks.check_shape, "s", "4, 7, 16", (4, 7, 16), match="tuple of ints")


def test_mixed_inputs_are_promoted_not_truncated_and_lists_are_accepted():
    # A float list against an int tensor: the list must not be cut down to [0, 0].
    got = vectors.cosine_similarity([0.5, 0.5], torch.tensor([1, 0]))
    assert torch.is_tensor(got) and torch.allclose(got, torch.tensor(0.5**0.5)), got
    assert vectors.cosine_similarity(torch.tensor([1.0, 1.0], dtype=torch.float64), [1, 0]).dtype == torch.float64
    # The module promises plain lists everywhere.
    np.testing.assert_allclose(vectors.cosine_similarity_matrix([[1, 0], [0, 1]], [[1, 1]]), [[0.5**0.5], [0.5**0.5]])
    np.testing.assert_array_equal(vectors.lookup([[0, 1, 0]], [[1, 2], [3, 4], [5, 6]]), [[3, 4]])
    np.testing.assert_array_equal(vectors.embed([2, 0], [[1, 2], [3, 4], [5, 6]]), [[5, 6], [1, 2]])
