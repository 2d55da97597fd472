"""The plain values behind the seals of course_lib/checks/lesson13.py: the one answer of
solutions/13_*.ipynb worked out by hand (exercise 5, losses per token and per character) and the
values of the mistakes its hints name. The project's milestones have none: they are checked against
what the learner's own text, tokenizer and model give.

`course seal lesson13` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "a_bits_per_char": (3, 3.030, {
        "gave nats: a bit is ln 2 nats, so divide the loss in nats by ln 2 (about 0.693)": 2.100,
        "multiplied by ln 2: nats become bits by dividing by ln 2, since a bit is the larger unit": 1.456,
        "divided by ln 10: bits are logarithms to base 2, so divide by ln 2": 0.912,
    }),
    "b_bits_per_char": (3, 2.770, {
        "gave nats per character: a bit is ln 2 nats, so divide by ln 2 as well": 1.920,
        "left it per token: a token of B is 2.5 characters, so divide by 2.5 to spread its loss over them": 6.925,
        "multiplied by the 2.5 characters per token: the loss of one token is shared by its 2.5 characters, "
        "so divide": 17.312,
        "multiplied by ln 2: nats become bits by dividing by ln 2, since a bit is the larger unit": 1.331,
        "divided by ln 10: bits are logarithms to base 2, so divide by ln 2": 0.834,
    }),
    "better": (None, "B", {
        "compared the losses per token: a token of B carries 2.5 characters, so its loss covers more text; "
        "compare per character": "A",
    }),
}
