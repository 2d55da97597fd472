"""course_lib: the small helper library behind "From One-Hot to Transformer".

One flat module per topic (`device`, `data`, `vectors`, `markov`, `attention`, ...), each readable
top to bottom, plus the exercises' `checks`, `course check` (`runner`, `feedback`) and the `course`
command (`cli`). Importing the package runs and imports nothing: import the module you need, e.g.
``from course_lib.attention import scaled_dot_product_attention``.

The teacher's tools (build, grade, gradebook) are a second package, `course_grader`, released with
this one: it imports course_lib, never the reverse.
"""

__version__ = "0.1.0"  # course_grader has the same version: the two are released together
