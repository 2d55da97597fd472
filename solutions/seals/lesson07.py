"""The plain values behind the seals of course_lib/checks/lesson07.py, the hand-worked answers of
solutions/07_*.ipynb and the values of the mistakes their hints name.

`course seal lesson07` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "pe_2_0": (3, 0.909, {
        "worked in degrees (or made the angle far too small): the angle pos / 10000^(2i/d) is in radians": 0.035,
        "took sin and cos the wrong way round: even columns (0, 2, ...) hold the sine, odd columns the cosine": -0.416,
    }),
    "pe_50_3": (3, 0.878, {
        "used the column number as i: i counts (sin, cos) pairs, so column 3 is pair i = 3 // 2 = 1 and the exponent "
        "is 2·1/4 (or else you worked in degrees (or made the angle far too small): the angle pos / 10000^(2i/d) is "
        "in radians)":
            1.0,
        "used the exponent i/d instead of 2i/d (i counts pairs, so column 3 has i = 1 and the exponent is 2·1/4)":
            0.284,
        "used the exponent column/d = 3/4: the exponent is 2i/d with i = column // 2 = 1": 0.999,
        "took sin and cos the wrong way round: even columns (0, 2, ...) hold the sine, odd columns the cosine": 0.479,
    }),
    "pe_row_0": (3, [0.0, 1.0, 0.0, 1.0], {
        "swapped sin and cos: sin 0 = 0 goes in the even columns, cos 0 = 1 in the odd ones": [1.0, 0.0, 1.0, 0.0],
        "put a sine in every column: the odd columns hold cosines": [0.0, 0.0, 0.0, 0.0],
        "put a cosine in every column: the even columns hold sines": [1.0, 1.0, 1.0, 1.0],
    }),
    "learned_table_params": (None, 786432, {
        "added max_len and d_model: the table holds one d_model-vector per position, max_len × d_model numbers": 1792,
        "counted one position vector: there is one for each of the max_len positions": 768,
        "counted one number per position: each position has a whole d_model-vector": 1024,
        "counted a sine and a cosine table: a learned table is a single max_len × d_model matrix": 1572864,
    }),
    "sinusoidal_params": (None, 0, {
        "counted the entries of the table: they come from a formula and are never trained": 786432,
        "counted the frequencies: they are fixed numbers, not parameters": 384,
    }),
    "rope_params": (None, 0, {
        "counted a d_model × d_model rotation matrix: RoPE's rotations are fixed by the position and the formula, "
        "nothing is trained":
            589824,
        "counted a table of angles: the angles come from a formula, nothing is trained": 393216,
        "counted a position table: RoPE adds no table, it rotates the queries and keys": 786432,
    }),
}
