"""The plain values behind the seals of course_lib/checks/lesson10.py, the hand-worked answers of
solutions/10_*.ipynb and the values of the mistakes their hints name.

`course seal lesson10` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "memory_shape": (None, (4, 9, 32), {
        "gave one vector per sentence: the encoder keeps one vector per source token, which is what the decoder's "
        "cross-attention looks up":
            (4, 32),
        "used the target's length: the memory is the encoded SOURCE, one vector per source token": (4, 6, 32),
        "left out the batch axis": (9, 32),
        "put the source length first: (S, B, d_model) is torch's batch_first=False layout; this model is batch-first, "
        "(B, S, d_model)":
            (9, 4, 32),
    }),
    "cross_weights_shape": (None, (4, 4, 6, 9), {
        "swapped queries and keys: rows are the decoder's positions (queries), columns the source tokens (keys)":
            (4, 4, 9, 6),
        "left out the head axis: the weights are kept per head, (B, n_heads, T_q, T_k)": (4, 6, 9),
        "gave the decoder's self-attention shape: in cross-attention the keys are the source's 9 tokens": (4, 4, 6, 6),
        "used the source's length for the queries too: the queries come from the decoder (6 positions)": (4, 4, 9, 9),
        "merged the batch and head axes into one (B * n_heads): that is how some code computes them, but the weights "
        "kept on .last_weights keep both axes, (B, n_heads, T_q, T_k)":
            (16, 6, 9),
    }),
    "logits_shape": (None, (4, 6, 50), {
        "kept only the last position: in training (teacher forcing) every position predicts its next word in the same "
        "pass":
            (4, 50),
        "stopped before the output layer: the logits have one score per target word, V_tgt = 50": (4, 6, 32),
        "used the source's length: the decoder makes one prediction per target position": (4, 9, 50),
    }),
    "smoothed_target": (3, [0.05, 0.85, 0.05, 0.05], {
        "spread eps over the V - 1 wrong classes only: that is another convention; PyTorch's (and the lesson's) "
        "spreads eps / V over ALL V classes, the right one included":
            [0.067, 0.8, 0.067, 0.067],
        "gave the right class 1 - eps only: it also gets its share eps / V of the uniform part (the target must sum "
        "to 1)":
            [0.05, 0.8, 0.05, 0.05],
        "left the target one-hot: smoothing moves eps of the mass to the uniform distribution": [0.0, 1.0, 0.0, 0.0],
    }),
    "smoothed_loss": (3, 0.745, {
        "used the (V - 1) convention: spread eps / V over all V classes": 0.823,
        "gave the right class 1 - eps only: it also gets eps / V": 0.719,
        "computed the loss without smoothing, -ln p[right]": 0.511,
        "used log base 2: cross-entropy in PyTorch uses the natural log": 1.075,
        "computed KL(q || p): the loss asked for is the cross-entropy -sum_k q_k ln p_k = H(q) + KL(q || p), which is "
        "larger by H(q) (the two have the same gradients)":
            0.157,
        "computed KL(p || q), and the wrong way round: the loss is the cross-entropy -sum_k q_k ln p_k, with the "
        "target q as the weights":
            0.207,
        "gave H(q), the entropy of the target (the floor of the loss): the loss uses the model's p inside the log, "
        "-sum_k q_k ln p_k":
            0.588,
    }),
    "n_params": (None, 1825456, {
        "left out the decoder's cross-attention (and its LayerNorm): a decoder block has two attention layers": 1626544,
        "left out the biases of the Linear layers": 1815808,
        "multiplied the attention weights by the number of heads: the heads split d_model, they do not multiply it":
            5954224,
        "forgot the final LayerNorm of each stack": 1824944,
        "forgot the output layer (d_model -> V_tgt, with a bias)": 1670656,
        "tied the output layer to the target embedding: this model keeps its own (V_tgt, d_model) output matrix "
        "(tie_weights=False)":
            1671856,
        "counted learned position tables: the positions are sinusoids, computed, not learned": 1841840,
        "counted a learned position table: the positions are sinusoids, computed, not learned": 1833648,
    }),
    "n_cross": (None, 198144, {
        "counted only W_K and W_V: cross-attention also has W_Q (on the decoder side) and W_O": 99072,
        "counted one decoder layer: every one of the 3 has its own cross-attention": 66048,
        "left out the biases: each of the four Linear maps has d_model of them": 196608,
        "counted the LayerNorm before the cross-attention too: it belongs to the block, not to the attention's four "
        "Linear maps":
            198912,
    }),
    "first_sees": (None, 1, {
        "gave what a correct decoder allows (the whole source): BuggyDecoder also gives its cross-attention a mask; "
        "write that mask out and read the row of target position 0":
            6,
        "counted 0: check whether .tril() keeps the entries ON the diagonal": 0,
        "gave the number of target positions: the question asks how many SOURCE words target position 0 may attend to":
            4,
        "counted the blocked source words (False) instead of the ones position 0 may attend to (True)": 5,
    }),
}
