"""course_lib: the small helper library behind "From One-Hot to Transformer".

One flat module per topic (`device`, `data`, `vectors`, `markov`, `attention`, ...), each readable
top to bottom. Importing the package runs nothing: import the module you need, e.g.
``from course_lib.attention import scaled_dot_product_attention``.
"""
__version__ = "0.1.0"
