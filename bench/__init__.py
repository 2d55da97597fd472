"""Benchmarks for the course: `python -m bench` (or `make bench`).

They print ratios against a reference run in the same process, never absolute times in tests.
"""
