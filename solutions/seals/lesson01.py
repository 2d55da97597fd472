"""The plain values behind the seals of course_lib/checks/lesson01.py, the hand-worked answers of
solutions/01_*.ipynb and the values of the mistakes their hints name.

`course seal lesson01` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "dot_ab": (6, 4.0, {
        "added the entries instead of multiplying them pairwise": 6.0,
        "dropped the minus sign of b's second entry": 8.0,
        "multiplied the lengths |a| |b| instead of the matching entries": 9.0,
    }),
    "cos_ab": (6, 0.444444, {
        "forgot to divide by the lengths (that is the plain dot product)": 4.0,
        "divided by only one length": 1.333333,
        "divided by the squared lengths |a|²|b|² instead of |a||b| (a length is the square root of a · a)": 0.049383,
        "divided by |a| + |b| instead of |a| × |b|": 0.666667,
        "dropped the minus sign of b's second entry in the dot product": 0.888889,
        "rounded to 2 decimals; keep the exact value (write the division and let Python do it)": 0.44,
        "rounded to 3 decimals; keep the exact value (write the division and let Python do it)": 0.444,
        "rounded to 4 decimals; keep the exact value (write the division and let Python do it)": 0.4444,
        "rounded to 5 decimals; keep the exact value (write the division and let Python do it)": 0.44444,
        "rounded the last digit up; keep the exact value (write the division and let Python do it)": 0.445,
    }),
    "shape_one_hot": (None, (4, 7, 50), {
        "put the vocabulary axis first; the one-hot vectors go along the last axis": (50, 4, 7),
        "flattened the batch; the one-hot array keeps the ids' shape (4, 7) and adds an axis": (28, 50),
        "wrote the shape of E instead": (50, 16),
        "gave the shape after the product with E; this asks for the one-hot array itself": (4, 7, 16),
    }),
    "shape_lookup": (None, (4, 7, 16), {
        "kept the vocabulary axis; the product replaces the inner size 50 with E's 16 columns": (4, 7, 50),
        "flattened the batch; the product keeps the leading axes (4, 7)": (28, 16),
        "wrote the shape of E": (50, 16),
        "put E's columns first; (..., V) @ (V, D) ends with D": (16, 4, 7),
    }),
    "multiply_adds": (None, 22400, {
        "counted the dot products (28 × 16) rather than the multiply-adds inside them": 448,
        "counted the entries of the one-hot array (28 × 50)": 1400,
        "used only one sentence (7 × 50 × 16)": 5600,
        "counted the entries of E (50 × 16)": 800,
        "counted the multiplications and the additions separately; a multiply-add is one of each": 44800,
    }),
}
