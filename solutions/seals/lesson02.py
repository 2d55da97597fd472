"""The plain values behind the seals of course_lib/checks/lesson02.py, the hand-worked answers of
solutions/02_*.ipynb and the values of the mistakes their hints name.

`course seal lesson02` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

import math

VALUES = {
    "after_green": (3, [0.5, 0.2, 0.0, 0.3], {
        "took the column of 'green' (that is T @ x, the probabilities of arriving at green), not its row (x @ T)":
            [0.25, 0.6, 0.0, 0.0],
        "took the row of 'red', one above green's: count the rows from 0, with '<end>' as row 0": [0.1, 0.0, 0.6, 0.3],
        "took the row of 'blue', one below green's: count the rows from 0, with '<end>' as row 0": [1.0, 0.0, 0.0, 0.0],
        "wrote down the one-hot vector of 'green' itself; multiplying it by T picks out a row of T":
            [0.0, 0.0, 1.0, 0.0],
    }),
    "shape_P": (None, (5, 4), {
        "gave the shape of T: X @ T keeps X's rows, one per word": (4, 4),
        "gave X one column per word: X has one ROW per word and one column per vocabulary token": (5, 5),
        "counted the distinct words: X has a row for each word of the sentence, repeats included": (3, 4),
        "gave the shape transposed: one row per word, one column per possible next token": (4, 5),
    }),
    "ppl_by_hand": (3, 3.364, {
        "forgot the minus sign (perplexity is never below 1)": 0.297,
        "forgot to average: exp(-sum) instead of exp(-sum / N)": 128.0,
        "used log10 with exp: the base of the log and of the power must match": 1.694,
        "used log2 with exp: the base of the log and of the power must match": 5.755,
        "used ln (np.log, math.log) with 2 ** (...): the base of the log and of the power must match": 2.318,
        "averaged the probabilities instead of their logs": 2.909,
        "left out one of the four predictions": 2.52,
        "gave the cross-entropy (the average of -ln P); perplexity is exp of it": 1.213,
    }),
    "ppl_uniform": (3, 600.0, {
        "forgot the minus sign": 0.002,
        "forgot to average": math.inf,
        "took the log-probability itself (the cross-entropy ln 600); perplexity undoes the log with exp": 6.397,
    }),
    "p_off_first": (3, 0.3, {
        "gave P(on | light)": 0.7,
        "gave the count instead of the probability: divide by how often 'light' was followed by anything": 3.0,
    }),
    "p_off_second": (3, 1.0, {
        "used the first-order probability: the pair (kitchen, light) has only ever been followed by 'off'": 0.3,
        "gave P(off | garden, light), the other light": 0.0,
        "gave the count instead of the probability": 3.0,
    }),
    "fraction_invented": (3, 0.42, {
        "counted only one of the two invented commands (kitchen light on, garden light off)": 0.21,
        "gave the fraction of commands that did occur": 0.58,
        "multiplied the probabilities of a path that did occur (kitchen and off)": 0.09,
        "multiplied the probabilities of a path that did occur (garden and on)": 0.49,
        "answered 0: the first-order model does invent commands, because after 'light' it no longer knows which light":
            0.0,
    }),
}
