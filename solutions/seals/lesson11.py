"""The plain values behind the seals of course_lib/checks/lesson11.py, the hand-worked answers of
solutions/11_*.ipynb and the values of the mistakes their hints name.

`course seal lesson11` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "loss_gpt2": (3, 10.825, {
        "used log base 10: the cross-entropy is measured in nats, with the natural log (math.log)": 4.701,
        "used log base 2 (bits): the loss in this course is in nats, with the natural log (math.log)": 15.617,
        "gave the probability of the right token, 1/V: the loss is its negative log": 0.0,
        "forgot the minus sign: -log(1/V) = log(V) is positive": -10.825,
    }),
    "loss_spiky": (3, 3.37, {
        "left out the spike: the denominator holds e^3 for the wrong token plus 9 terms e^0": 2.197,
        "gave the loss of a uniform guess, ln 10: the spiked logit adds e^3, not e^0, to the denominator": 2.303,
        "kept only the spike in the denominator: the 9 other tokens, the right one included, add e^0 = 1 each": 3.0,
        "counted 10 tokens with logit 0 besides the spiked one: the vocabulary has 10 tokens in all, so 9 of them "
        "have logit 0":
            3.404,
        "counted 8 tokens with logit 0: every token but the spiked one has logit 0, the right one included, so 9 do":
            3.335,
        "computed the loss of the spiked (wrong) token: the loss is -log p of the RIGHT token, whose logit is 0": 0.37,
        "gave the probability of the right token: the loss is its negative log": 0.034,
        "forgot the minus sign: -log p is positive": -3.37,
        "used log base 10: the cross-entropy is measured in nats, with the natural log": 1.464,
        "used log base 2 (bits): the loss in this course is in nats, with the natural log": 4.862,
    }),
    "n_params": (None, 540000, {
        "forgot the position table (block_size × C)": 527712,
        "left out the de-embedding: this model does not tie it, so it is a second V × C matrix": 444000,
        "forgot the biases (4C in attention, 4C + C in the FFN, C in each LayerNorm)": 536736,
        "forgot the biases of the Linear layers (4C in attention, 4C + C in the FFN)": 537408,
        "forgot the LayerNorms (two per block and a final one, each a gain and a bias of C)": 538656,
        "counted one FFN matrix: the FFN has two, C × 4C and 4C × C": 429408,
        "gave every head its own C × C projections: the heads split C, so attention is 4C² whatever the heads": 871776,
        "counted one block: there are n_layer = 3, each with its own weights": 316320,
    }),
    "n_params_tied": (None, 440736, {
        "counted the de-embedding: tied, it IS the token embedding, so it adds nothing": 536736,
        "kept the biases: with bias=False no Linear and no LayerNorm has one": 444000,
        "dropped the LayerNorms: without a bias each still has its gain of C": 440064,
        "forgot the position table (block_size × C)": 428448,
    }),
    "cheat_reason": (None, "d", {
        "chose (a): 0.2 million parameters cannot memorise a million characters, and memorising would show as a "
        "validation loss far above the training loss, not both near zero":
            "a",
        "chose (b): the code does divide the scores by sqrt(d) (the `scores = ...` line); and a softmax that is too "
        "sharp makes training harder, it does not make the loss on unseen text tiny":
            "b",
        "chose (c): attending to itself is allowed, and needed; the target at t is x[t + 1], not x[t] (the targets "
        "are shifted by one), so seeing x[t] gives nothing away":
            "c",
        "chose (e): softmax(..., dim=-1) normalises each row, one query's weights over all keys, which is right: "
        "every row sums to 1":
            "e",
    }),
}
