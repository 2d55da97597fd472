"""The plain values behind the seals of course_lib/checks/lesson08.py, the hand-worked answers of
solutions/08_*.ipynb and the values of the mistakes their hints name.

`course seal lesson08` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "head_dim": (None, 12, {
        "used n_heads instead of d_model / n_heads": 8,
        "used d_model: each head gets only d_model / n_heads of the features": 96,
    }),
    "shape_after_view": (None, (4, 10, 8, 12), {
        "split the features as (d_k, n_heads): view splits the last axis into (n_heads, d_k)": (4, 10, 12, 8),
        "gave the shape after the transpose: view only splits the last axis, (B, T, n_heads, d_k)": (4, 8, 10, 12),
    }),
    "shape_heads": (None, (4, 8, 10, 12), {
        "forgot what transpose(1, 2) does: it swaps T and the head axis": (4, 10, 8, 12),
        "swapped the wrong axes: transpose(1, 2) swaps axes 1 and 2 (T and the heads), not the last two":
            (4, 10, 12, 8),
    }),
    "shape_scores": (None, (4, 8, 10, 10), {
        "compared features instead of tokens: scores are (T x T) per head, one row per query token": (4, 8, 12, 12),
        "left out the head axis: every head has its own scores": (4, 10, 10),
        "gave q's shape: q @ k.transpose(-2, -1) is (T, d_k) @ (d_k, T) in every head": (4, 8, 10, 12),
    }),
    "shape_merged": (None, (4, 10, 96), {
        "stopped before the reshape: merging ends with (B, T, d_model)": (4, 10, 8, 12),
        "kept a per-head width: the heads are concatenated back to d_model features": (4, 10, 12),
        "kept the heads in front of T: merging transposes back before the reshape": (4, 8, 10, 12),
    }),
    "shape_cross_scores": (None, (4, 8, 10, 7), {
        "swapped queries and keys: rows are the 10 queries, columns the 7 keys of the context": (4, 8, 7, 10),
        "used the query length for the keys: the keys come from the 7-token context": (4, 8, 10, 10),
        "used the context length for the queries too: the queries are still the 10 tokens": (4, 8, 7, 7),
    }),
    "n_params_bias": (None, 263168, {
        "forgot the output projection W_O (three matrices instead of four)": 197376,
        "gave every head its own full d_model × d_model matrices: a head only gets d_model × d_k of each, so the "
        "heads together use d_model × d_model":
            855296,
        "counted each head's projections as d_k × d_k: a head maps all d_model input features to d_k": 115712,
        "multiplied the count by the number of heads: the head count does not change the parameter count. The heads "
        "share out each d_model × d_model matrix, d_model × d_k each, and n_heads × d_k = d_model":
            1052672,
        "multiplied the weights by the number of heads: the head count does not change the parameter count; the heads "
        "share out each d_model × d_model matrix":
            1049600,
        "left out the biases (one per output feature of each of the four layers: 4 · d_model)": 262144,
    }),
    "n_params_no_bias": (None, 262144, {
        "forgot the output projection W_O (three matrices instead of four)": 196608,
        "gave every head its own full d_model × d_model matrices: a head only gets d_model × d_k of each, so the "
        "heads together use d_model × d_model":
            3211264,
        "counted each head's projections as d_k × d_k: a head maps all d_model input features to d_k": 77824,
        "multiplied the count by the number of heads: the head count does not change the parameter count. The heads "
        "share out each d_model × d_model matrix, d_model × d_k each, and n_heads × d_k = d_model (or else you "
        "multiplied the weights by the number of heads: the head count does not change the parameter count; the heads "
        "share out each d_model × d_model matrix)":
            4194304,
        "counted biases, but these layers were built with bias=False": 263168,
    }),
    "head_q_weights": (None, 16384, {
        "counted a d_k x d_k block: a head's W_q maps all d_model input features to its d_k features": 4096,
        "counted the whole W_q: the 4 heads share it out, each gets d_model x d_k": 65536,
        "added biases: the question asks for the weights only": 16448,
    }),
}
