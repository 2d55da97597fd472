"""The plain values behind the seals of course_lib/checks/lesson09.py, the hand-worked answers of
solutions/09_*.ipynb and the values of the mistakes their hints name.

`course seal lesson09` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "shape_y": (None, (3, 10, 48), {
        "gave the context's length: a block returns one vector per position of x (its queries), whatever the length "
        "of the sequence it attends to":
            (3, 7, 48),
        "gave the FFN's hidden width as the last axis: lin2 maps it back to d_model": (3, 10, 160),
        "left out the batch axis: every tensor here keeps B = 3 in front": (10, 48),
    }),
    "shape_self_weights": (None, (3, 6, 10, 10), {
        "left out the head axis: the weights are kept per head, (B, n_heads, T_q, T_k)": (3, 10, 10),
        "used the memory's length for the keys: in SELF-attention the keys come from x itself (10 positions); only "
        "the cross-attention's keys come from the memory":
            (3, 6, 10, 7),
        "merged the batch and head axes into one (B · n_heads): the weights keep them apart, (B, n_heads, T_q, T_k)":
            (18, 10, 10),
        "left out the batch axis: every tensor here keeps B = 3 in front": (6, 10, 10),
    }),
    "shape_cross_weights": (None, (3, 6, 10, 7), {
        "swapped queries and keys: rows are the queries (x, 10 positions), columns the keys (memory, 7)": (3, 6, 7, 10),
        "left out the head axis: the weights are kept per head, (B, n_heads, T_q, T_k)": (3, 10, 7),
        "used x's length for the keys: in cross-attention the keys come from the context (memory)": (3, 6, 10, 10),
        "merged the batch and head axes into one (B · n_heads): the weights keep them apart, (B, n_heads, T_q, T_k)":
            (18, 10, 7),
        "left out the batch axis: every tensor here keeps B = 3 in front": (6, 10, 7),
    }),
    "shape_ffn_hidden": (None, (3, 10, 160), {
        "assumed d_ff = 4 · d_model = 192: this block was built with d_ff=160": (3, 10, 192),
        "gave the FFN's output: the hidden layer (after lin1) has d_ff features": (3, 10, 48),
        "flattened the batch and the positions into one axis (B · T = 30): the FFN works on (B, T, ...) as it is, "
        "position by position":
            (30, 160),
        "left out the batch axis: every tensor here keeps B = 3 in front": (10, 160),
    }),
    "ln_mean": (3, 1.0, {
        "gave the sum of the entries: the mean divides it by d = 4": 4.0,
    }),
    "ln_var": (3, 2.5, {
        "summed the squared deviations without dividing by d = 4: the variance is their MEAN": 10.0,
        "divided by d - 1 = 3 (the unbiased variance): LayerNorm divides by d = 4": 3.333,
        "gave the standard deviation: the variance is the mean of the squared deviations, before the root": 1.581,
    }),
    "ln_out": (3, [2.53, -1.265, 1.632, 0.684], {
        "used the unbiased variance (divided by d - 1): LayerNorm divides by d": [2.191, -1.095, 1.548, 0.726],
        "left out the gain and the bias: multiply by the gain, then add the bias": [1.265, -1.265, 0.632, -0.632],
        "added the bias before multiplying by the gain: it is gain · x̂ + bias": [2.53, -1.265, 1.632, 0.184],
        "divided by the variance instead of its square root": [1.6, -0.8, 1.4, 0.8],
        "multiplied x by the gain before normalising: normalise x first, then gain · x̂ + bias":
            [1.585, -1.026, 1.093, 0.347],
        "did not subtract the mean (that is RMSNorm): LayerNorm centres x first, x - mean": [3.207, -0.535, 2.069, 1.0],
    }),
    "grad_plain": (5, 0.00391, {
        "gave one layer's derivative: the chain rule multiplies the derivatives of all 8 layers": 0.5,
        "added the 8 derivatives: the chain rule multiplies them": 4.0,
        "rounded the answer to 4 decimal places: it is compared to 5, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            0.0039,
        "rounded the answer to 3 decimal places: it is compared to 5, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            0.004,
        "divided by 0.5 at each layer: the derivative of 0.5·x is 0.5, and the chain rule multiplies by it": 256.0,
    }),
    "grad_residual": (3, 25.629, {
        "added the identity once for the whole stack (1 + 0.5^8): every layer has its own identity path, so each "
        "layer's derivative is 1 + 0.5":
            1.004,
        "added the layers' contributions (1 + 8 · 0.5): the chain rule multiplies the 8 factors (1 + 0.5)": 5.0,
        "used the plain stack's derivative 0.5 per layer: with the residual each layer's derivative is 1 + 0.5": 0.004,
        "took each layer's derivative as 1 + 1 = 2: the sub-layer's derivative is f'(x) = 0.5, so each factor is 1 + "
        "0.5":
            256.0,
        "added 1 for each layer's identity path (8 · 1): the chain rule multiplies the 8 factors (1 + 0.5)": 8.0,
        "gave one layer's factor 1 + 0.5: the chain rule multiplies the factors of all 8 layers": 1.5,
        "rounded the answer to 1 decimal place: it is compared to 3, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            25.6,
        "rounded the answer to 2 decimal places: it is compared to 3, so give it unrounded (write the expression "
        "itself and let Python work it out)":
            25.63,
    }),
    "grad_dead": (3, 1.0, {
        "answered 0: a constant sub-layer has derivative 0, but the identity path still has derivative 1": 0.0,
        "added the 8 identity paths (8 · 1): the chain rule multiplies the 8 factors (1 + 0)": 8.0,
    }),
    "n_decoder_block": (None, 1053440, {
        "forgot the cross-attention: a decoder block has two attention sub-layers": 790272,
        "forgot the LayerNorms (a gain and a bias per feature each, three of them in a decoder block)": 1051904,
        "counted two LayerNorms: a decoder block has three, one per sub-layer": 1052928,
        "counted one number per feature for each LayerNorm: each has a gain AND a bias": 1052672,
        "forgot the biases of the linear layers (d_model per attention projection, d_ff and d_model in the FFN)":
            1050112,
        "multiplied the attention parameters by the number of heads: the heads share out d_model": 2632448,
        "counted only one of the FFN's two linear layers: d_model -> d_ff AND d_ff -> d_model": 791040,
        "forgot the FFN's biases (d_ff for lin1, d_model for lin2)": 1052160,
        "forgot the output projection W_O: each attention has four d_model x d_model layers": 921856,
        "multiplied the query, key and value projections by the number of heads: together the heads share out "
        "d_model, so W_q, W_k and W_v are d_model x d_model in all":
            2237696,
    }),
    "n_encoder_block_no_bias": (None, 1770240, {
        "counted biases: with bias=False neither the linear layers nor the LayerNorms have one": 1774464,
        "left out the LayerNorms' gains: bias=False removes the bias, the gain (d_model numbers each) stays": 1769472,
        "counted three LayerNorms: an encoder block has two": 1770624,
        "multiplied the attention parameters by the number of heads: the heads share out d_model": 4719360,
        "counted the LayerNorms' biases: bias=False removes those too": 1771008,
        "multiplied the query, key and value projections by the number of heads: together the heads share out "
        "d_model, so W_q, W_k and W_v are d_model x d_model in all":
            3982080,
    }),
}
