"""Learner text made inert: what a learner's code or notebook says, safe to store, print and show.

A learner's words reach the teacher's tools by many routes: an exception's message, the repr of a
wrong answer, a function that raises inside a check, a written answer, a file or folder name. Any
of them can hold what a Python `str` allows and nothing downstream expects: a lone surrogate
(`"\\ud800"`, valid in JSON, not encodable as UTF-8, so a database or a file write fails on it), NUL
and other control characters (a terminal escape sequence that retitles the window or erases the line
above), bidirectional overrides (U+202E, which reorders what follows on the line) or a megabyte of text.

`inert(text)` is the one place that fixes all of them, where such text enters the grader (the
kernel's replies, the submitted notebook, the names of folders) and once more where it leaves (the
gradebook's rows): lone surrogates become U+FFFD, control characters other than newline and tab and
every bidirectional control are written out as escapes (`\\x1b`, `\\u202e`), visible and harmless,
and a text longer than `limit` characters is cut, saying how much was left out. A value a check
compares is never changed: only text that is shown.
"""

from __future__ import annotations

import re

MAX_TEXT = 20_000  # characters of one learner text kept (an exception message, a written answer's excerpt)

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls but \t and \n
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # marks, embeddings, overrides, isolates
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: object, limit: int | None = MAX_TEXT) -> str:
    """`text` as valid UTF-8 with nothing that steers a terminal, a Markdown viewer's layout or a line's
    direction, at most `limit` characters (None: no cut). Idempotent: inert(inert(s)) == inert(s)."""
    s = text if isinstance(text, str) else str(text)
    if not s.isascii():
        s = _BIDI.sub(_escape, _SURROGATE.sub("\ufffd", s))  # two lone halves of a pair are no character either
    if _CONTROL.search(s):
        s = _CONTROL.sub(_escape, s)
    if limit is not None and len(s) > limit:  # the cut text, with the note, fits `limit` (so inert is idempotent)
        kept = max(0, limit - 50)  # the note is shorter than 50 characters
        s = s[:kept] + f" ... ({len(s) - kept:,} more characters left out)"
    return s


def inert_tree(value: object, limit: int | None = MAX_TEXT) -> object:
    """`value` (nested lists, tuples and dicts of plain data, as stored in a row) with every string made inert."""
    if isinstance(value, str):
        return inert(value, limit)
    if isinstance(value, dict):
        return {inert_tree(k, limit): inert_tree(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(inert_tree(v, limit) for v in value)
    return value


def without_surrogates(value: object) -> object:
    """`value` (a parsed notebook: dicts, lists, strings) with lone surrogates replaced by U+FFFD and
    nothing else changed: code keeps its characters, and every string can be written as UTF-8."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    return value
