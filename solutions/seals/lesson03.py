"""The plain values behind the seals of course_lib/checks/lesson03.py, the hand-worked answers of
solutions/03_*.ipynb and the values of the mistakes their hints name.

`course seal lesson03` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "votes_blue": (3, [4.5, 2.5], {
        "let a word that occurs twice before the latest word vote twice ('the'): each distinct earlier word is ONE "
        "feature":
            [5.25, 2.75],
        "added the raw counts without normalising each pair's counts to one vote": [18.0, 7.0],
        "let 'the' vote twice and added raw counts instead of one vote per pair": [21.0, 8.0],
        "counted the prefix of the RED lamp; this asks for the blue one": [5.5, 1.5],
        "swapped on and off": [2.5, 4.5],
        "counted only the informative pair (blue, is): without a mask every pair votes": [0.0, 1.0],
        "gave (blue, is) the same split as the other pairs, but it was only ever followed by 'off'": [5.25, 1.75],
    }),
    "winner_blue": (None, "on", {
        "named the word that follows the blue lamp in training; but add up the votes: without a mask the six "
        "uninformative pairs outvote the one that knows":
            "off",
    }),
    "share_blue": (2, 0.64, {
        "gave the loser's share": 0.36,
        "divided the winner's total by the loser's instead of by the sum of both": 1.8,
        "gave the share after masking (1.0): without a mask every pair votes": 1.0,
        "gave the coin-flip share": 0.5,
        "gave the share of the red lamp's prefix": 0.79,
    }),
    "mask_is": (None, [0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0], {
        "kept every pair (a mask of all ones masks nothing)": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        "kept every pair that is present in the blue command: the mask should drop the uninformative ones":
            [1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1],
        "kept 'is' itself: the mask is over the EARLIER words paired with 'is'": [0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0],
        "kept only 'blue': after 'is' both blue and red are informative (one mask serves both commands)":
            [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        "kept only 'red': after 'is' both blue and red are informative (one mask serves both commands)":
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
        "inverted the mask (1 = keep, 0 = drop)": [1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1],
        "put the 1 at blue's position in the sentence instead of at its index in model.tokens":
            [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        "kept the words after 'is' (on, off): the mask is over the earlier words paired with 'is'":
            [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0],
    }),
    "shape_X": (None, (11, 12), {
        "counted the prefix up to 'is' (9 words): the whole command is asked for": (9, 12),
        "left out a word: count every word of the whole command, 'off now' included": (10, 12),
        "gave X one column per distinct word of the sentence: the columns run over the whole vocabulary, model.tokens":
            (11, 10),
        "gave the shape transposed: one row per word, one column per vocabulary token": (12, 11),
        "gave X one row per vocabulary token: X has one row per WORD of the command": (12, 12),
    }),
    "shape_XM": (None, (11, 12), {
        "gave the shape of M itself: X @ M keeps X's rows (one per position)": (12, 12),
        "gave the shape transposed: X @ M keeps X's rows (one per position) and M's columns": (12, 11),
        "went on to multiply by X.T: this asks for X @ M only": (11, 11),
    }),
    "shape_S": (None, (11, 11), {
        "confused V and T: multiplying by X.T (V, T) leaves one column per POSITION": (12, 12),
        "stopped after X @ M: multiplying by X.T (V, T) turns the V columns into T": (11, 12),
        "gave the shape transposed": (12, 11),
    }),
    "shape_W1": (None, (13, 2), {
        "left out the bias row: W has one row per token plus one for the input that is always 1": (12, 2),
        "gave the shape transposed: rows are inputs (V + 1), columns are features": (2, 13),
        "gave W one column for both pairs: each pair feature has its own column": (13, 1),
        "gave W one column per word of the pairs: one column per pair feature": (13, 4),
    }),
}
