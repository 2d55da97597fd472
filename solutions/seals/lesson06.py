"""The plain values behind the seals of course_lib/checks/lesson06.py, the hand-worked answers of
solutions/06_*.ipynb and the values of the mistakes their hints name.

`course seal lesson06` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "weights_shape": (None, (2, 8, 5, 7), {
        "swapped the last two axes: the weights are (..., T_q, T_k), one row per query, one column per key":
            (2, 8, 7, 5),
        "kept d_k: it is summed away by the dot product; the last axis of the weights runs over the keys":
            (2, 8, 5, 16),
        "paired the queries with themselves: in cross-attention the keys come from the other (7-word) sentence":
            (2, 8, 5, 5),
        "gave the output's shape: the weights have one column per key": (2, 8, 5, 32),
    }),
    "output_shape": (None, (2, 8, 5, 32), {
        "gave one output row per key: there is one output row per QUERY, each a weighted average of the values":
            (2, 8, 7, 32),
        "used d_k for the width: the output is a mix of values, so it has the values' width d_v": (2, 8, 5, 16),
        "gave the weights' shape; the output is weights @ v": (2, 8, 5, 7),
    }),
    "n_scores": (None, 560, {
        "counted one sequence and one head only: every sequence (2) and every head (8) computes its own 5 x 7 scores":
            35,
        "counted multiplications inside the dot products; count dot products, one per query-key pair": 8960,
        "paired queries with queries (5 x 5); in cross-attention each of the 5 queries meets each of the 7 keys": 400,
        "paired keys with keys (7 x 7); each of the 5 queries meets each of the 7 keys": 784,
        "left out the batch: each of the 2 sequences has its own 8 heads": 280,
        "left out the heads: each of the 8 heads computes its own scores": 70,
    }),
    "scores_flying": (3, [0.707, -0.707], {
        "forgot to divide by sqrt(d_k) = sqrt(2)": [1.0, -1.0],
        "divided by d_k = 2 instead of sqrt(2)": [0.5, -0.5],
        "computed the scores of arrows' query (the second word) instead of flying's": [1.414, -0.707],
    }),
    "weights_flying": (2, [0.8, 0.2], {
        "forgot to divide the scores by sqrt(2) before the softmax": [0.88, 0.12],
        "did not normalise (these are exp(scores), not weights)": [2.03, 0.49],
        "put the weights in the wrong order: the first is flying's own (the larger score)": [0.2, 0.8],
    }),
    "output_flying": (2, [-0.2, 0.2], {
        "used flying's own value v_flying; the output is the weighted sum of both values, Σ_j α_j v_j": [0.0, 0.0],
        "used the unscaled weights": [-0.12, 0.12],
        "weighted the values in the wrong order (the larger weight belongs to flying's own value)": [-0.8, 0.8],
    }),
    "output_arrows": (2, [-0.11, 0.11], {
        "used the unscaled scores": [-0.05, 0.05],
        "used flying's weights": [-0.2, 0.2],
        "put the large weight on arrows' own value (arrows' query matches flying's key better)": [-0.89, 0.89],
    }),
    "late_row_sums": (3, [0.333, 0.667, 1.0], {
        "assumed the rows still sum to 1: zeroing weights after the softmax does not renormalise them": [1.0, 1.0, 1.0],
        "counted the rows from the bottom: row 0 keeps only one weight": [1.0, 0.667, 0.333],
        "counted the weights each row keeps instead of adding them up": [1.0, 2.0, 3.0],
    }),
    "correct_weights": (3, [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.333, 0.333, 0.333]], {
        "gave the late-masked weights; with -inf before the softmax the allowed weights are renormalised":
            [[0.333, 0.0, 0.0], [0.333, 0.333, 0.0], [0.333, 0.333, 0.333]],
        "used the upper triangle: word i may attend to words 0..i":
            [[0.333, 0.333, 0.333], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]],
        "gave the mask itself; the weights in each row must sum to 1":
            [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]],
        "left out the mask: word i may attend only to the words 0..i":
            [[0.333, 0.333, 0.333], [0.333, 0.333, 0.333], [0.333, 0.333, 0.333]],
    }),
    "std_unscaled": (3, 8.0, {
        "gave the variance (d_k); the standard deviation is its square root": 64.0,
        "assumed the score has the spread of one component; the 64 products add up their variances": 1.0,
        "took the square root twice: the variance is d_k, the standard deviation its square root": 2.828,
    }),
    "std_scaled": (3, 1.0, {
        "divided the standard deviation by d_k instead of sqrt(d_k)": 0.125,
        "forgot that the scaling divides the spread by sqrt(d_k)": 8.0,
        "gave the variance of the unscaled score": 64.0,
    }),
}
