"""The plain values behind the seals of course_lib/checks/lesson00.py, the hand-worked answers of
solutions/00_*.ipynb and the values of the mistakes their hints name.

`course seal lesson00` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "rnn_steps_keys_are": (None, 17, {
        "counted the words from one to the other, both included, instead of the steps between them": 18,
        "gave self-attention's answer (one step); an RNN must pass through every word in between": 1,
        "counted only the words strictly between them; the last hop into the final word is a step too": 16,
    }),
    "rnn_steps_1_20": (None, 19, {
        "counted the words from one to the other, both included, instead of the steps between them": 20,
        "gave self-attention's answer (one step); an RNN must pass through every word in between": 1,
        "counted only the words strictly between them; the last hop into the final word is a step too": 18,
    }),
    "rnn_steps_1_100": (None, 99, {
        "counted the words from one to the other, both included, instead of the steps between them": 100,
        "gave self-attention's answer (one step); an RNN must pass through every word in between": 1,
        "counted only the words strictly between them; the last hop into the final word is a step too": 98,
    }),
    "n_patches": (None, 196, {
        "counted the patches along one side only (the image is a grid: side x side)": 14,
        "added the patches of the two sides; a grid of patches has (patches per side) x (patches per side) of them": 28,
        "divided the number of pixels by the patch side instead of the patch area (16 x 16 = 256 pixels)": 3136,
        "added the class token; this question asks for the patches alone": 197,
    }),
    "seq_len": (None, 197, {
        "counted the patches along one side only (the image is a grid: side x side)": 15,
        "added the patches of the two sides; a grid of patches has (patches per side) x (patches per side) of them": 29,
        "divided the number of pixels by the patch side instead of the patch area (16 x 16 = 256 pixels)": 3137,
        "forgot the class token that is added in front of the patches": 196,
        "added the class token twice": 198,
    }),
    "attention_steps_1_20": (None, 1, {
        "gave the RNN's count: in self-attention every word looks at every other word directly": 19,
        "counted the words: the distance between positions does not matter to attention": 20,
        "answered 0; the two words interact in one step, through one attention weight": 0,
    }),
    "attention_steps_1_100": (None, 1, {
        "gave the RNN's count: in self-attention every word looks at every other word directly": 99,
        "counted the words: the distance between positions does not matter to attention": 100,
        "answered 0; the two words interact in one step, through one attention weight": 0,
    }),
}
