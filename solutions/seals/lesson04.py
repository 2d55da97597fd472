"""The plain values behind the seals of course_lib/checks/lesson04.py, the hand-worked answers of
solutions/04_*.ipynb and the values of the mistakes their hints name.

`course seal lesson04` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "scores_cat": (3, [3.0, 2.0, 1.0, -1.0], {
        "dropped the minus sign of dog's vector [-1, 0]": [3.0, 2.0, 1.0, 1.0],
    }),
    "p_sat": (3, 0.657, {
        "divided the scores themselves (3 / (3 + 2 + 1 - 1)) instead of their exponentials": 0.6,
        "left sat out of the denominator: the sum runs over every word, sat included": 1.917,
        "left dog out of the denominator: the sum runs over every context word, dog included": 0.665,
        "gave P(the | cat), the second word": 0.242,
        "dropped the minus sign of dog's vector, so its score came out +1": 0.61,
        "rounded to 2 decimals; keep the exact value (let Python do the arithmetic)": 0.66,
    }),
    "n_pairs": (None, 22, {
        "counted each pair once (or looked to one side only): every word is a centre in turn, so (fox, jumps) and "
        "(jumps, fox) are two pairs":
            11,
        "gave every word 4 neighbours: near the ends of the sentence the window is cut off": 28,
        "paired each word with itself too": 29,
        "used a window of 3": 30,
        "used a window of 1": 12,
        "stopped one word short on the right, as range(i - 2, i + 2) does: the window runs from i - 2 to i + 2 "
        "inclusive, range(i - 2, i + 3)":
            17,
    }),
    "contexts_over": (None, "fox jumps lazy the", {
        "included 'over' itself; a word is not its own context": "fox jumps lazy over the",
        "used a window of 1 (one word on each side); the window is 2": "jumps the",
        "used a window of 3": "a dog fox jumps lazy the",
        "looked to the right only; the window reaches 2 words to each side": "lazy the",
        "looked to the left only; the window reaches 2 words to each side": "fox jumps",
        "stopped one word short on the right, as range(i - 2, i + 2) does: 'lazy' is 2 words to the right of 'over'":
            "fox jumps the",
    }),
    "n_cbow": (None, 7, {
        "counted the skip-gram pairs; CBOW makes one example per centre word (its whole window predicts it)": 22,
        "counted only the centre words with a full window of 2 on each side; CBOW uses every position, with a shorter "
        "window at the ends":
            3,
    }),
    "p_noise": (3, [0.75, 0.222, 0.028], {
        "forgot the power 0.75: that is the plain unigram distribution": [0.827, 0.163, 0.01],
        "used the square root (power 0.5) instead of the power 0.75": [0.643, 0.286, 0.071],
        "did not normalise: the three probabilities must add up to 1": [27.0, 8.0, 1.0],
        "raised the counts to the power 4/3 instead of 3/4": [0.895, 0.103, 0.003],
        "raised the probabilities, not the counts, to 0.75 and did not normalise again": [0.867, 0.257, 0.032],
    }),
    "loss_pair": (3, 3.753, {
        "used log σ(s_k) for the noise words; they need log σ(-s_k) (the answer for a noise word is 'no')": 0.753,
        "dropped the minus sign in front of the logs: a loss is a negative log-likelihood, always >= 0": -3.753,
        "left out the noise words: the loss has one term for the real pair and one for each noise word": 0.313,
        "used log base 10; the course's logs are natural (math.log)": 1.63,
    }),
    "dloss_ds": (3, -0.269, {
        "gave σ(s); the derivative of -log σ(s) is σ(s) - 1": 0.731,
        "gave 1 - σ(s), the derivative of +log σ(s); the loss has a minus sign in front": 0.269,
        "differentiated with respect to a noise word's score": 0.881,
    }),
    "grad_centre": (3, [-1.0, 1.612], {
        "used σ(s_k) - 1 for the noise words too; their derivative is σ(s_k)": [0.0, -0.388],
        "got every sign flipped: that is minus the gradient (the direction of the step, not the gradient)":
            [1.0, -1.612],
        "left out the noise words' terms σ(s_k) u_k": [-0.269, 0.0],
        "used the centre vector v instead of the context vectors u in the chain rule": [1.343, 2.686],
    }),
    "noise_score_moves": (None, "down", {
        "said 'up': the loss grows with s_1 (its derivative σ(s_1) is positive), and gradient descent steps against "
        "the gradient, so s_1 goes down":
            "up",
    }),
}
