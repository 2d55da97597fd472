"""From text to token ids and back.

`Vocabulary` (lesson 01): a fixed table of word- or character-level tokens, with an optional
unknown token for anything the table has never seen.

Ids are 0-based: in a vocabulary of V tokens they run from 0 to V - 1.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import numpy as np

LEVELS = ("word", "char")
ORDERS = ("sorted", "frequency")


# --- Vocabulary (lesson 01) -----------------------------------------------------------------------


class Vocabulary:
    """A two-way table between tokens and ids.

    Id order, so that the same text always gives the same ids:
    the special tokens first, in the order given, then the other tokens either sorted
    (``order="sorted"``, the default: Python's string order, so "files" < "find" < "my") or by
    falling count with ties sorted (``order="frequency"``).

    Word level splits on whitespace and `decode` joins with single spaces; character level keeps
    every character (spaces included) and `decode` joins with nothing. So for text whose tokens are
    all known, `decode(encode(text))` gives the text back (at word level, with its runs of
    whitespace collapsed to one space).

    A token that is not in the table encodes to the unknown token's id when the vocabulary has
    one (`unk_token`, by default ``"<unk>"`` if it is among the specials) and raises KeyError otherwise.

    >>> vocab = Vocabulary.from_text("find my files", specials=())
    >>> vocab.tokens
    ['files', 'find', 'my']
    >>> vocab.encode("find my files")
    [1, 2, 0]
    """

    def __init__(
        self,
        tokens: Iterable[str],
        *,
        level: str = "word",
        specials: Sequence[str] = (),
        unk_token: str | None = "<unk>",
    ):
        """Build a vocabulary whose ids follow `specials` then `tokens` in the order given.

        `unk_token` names the special used for unknown tokens; it is ignored (no unknown token)
        when it is not among `specials`. Most code wants `Vocabulary.from_text` instead.
        """
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        if isinstance(specials, str):
            raise TypeError(f"specials must be a sequence of strings such as ('<unk>',), got the string {specials!r}")
        self.level = level
        self._id_to_token: list[str] = []
        self._token_to_id: dict[str, int] = {}
        for tok in specials:
            if tok in self._token_to_id:
                raise ValueError(f"special token {tok!r} is listed twice in specials={tuple(specials)!r}")
            self._add(tok)
        self.specials = tuple(specials)
        for tok in tokens:
            if level == "char" and isinstance(tok, str) and len(tok) != 1:
                raise ValueError(f"a character-level vocabulary holds single characters (and specials), got {tok!r}")
            if tok not in self._token_to_id:  # repeated tokens keep their first id
                self._add(tok)
        self.unk_token = unk_token if unk_token in self.specials else None
        self.unk_id = self._token_to_id[self.unk_token] if self.unk_token is not None else None

    def _add(self, tok: str) -> None:
        if not isinstance(tok, str) or tok == "":
            raise TypeError(f"tokens must be non-empty strings, got {tok!r}")
        self._token_to_id[tok] = len(self._id_to_token)
        self._id_to_token.append(tok)

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def from_text(
        cls,
        text: str | Iterable[str],
        *,
        level: str = "word",
        min_freq: int = 1,
        specials: Sequence[str] = ("<unk>",),
        unk_token: str | None = "<unk>",
        order: str = "sorted",
    ) -> "Vocabulary":
        """Collect the tokens of `text` (a string, or an iterable of strings such as lines).

        Tokens seen fewer than `min_freq` times are left out (they will encode as the unknown token).
        """
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        texts = [text] if isinstance(text, str) else list(text)
        counts: Counter[str] = Counter()
        for i, piece in enumerate(texts):
            if not isinstance(piece, str):
                raise TypeError(f"text must be a string or an iterable of strings; item {i} is {type(piece).__name__} ({piece!r})")
            counts.update(_split(piece, level))
        return cls.from_counts(counts, level=level, min_freq=min_freq, specials=specials, unk_token=unk_token, order=order)

    @classmethod
    def from_counts(
        cls,
        counts: Counter | dict,
        *,
        level: str = "word",
        min_freq: int = 1,
        specials: Sequence[str] = ("<unk>",),
        unk_token: str | None = "<unk>",
        order: str = "sorted",
    ) -> "Vocabulary":
        """A vocabulary from token counts, e.g. a `Counter` over already tokenised sentences."""
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"min_freq must be an int >= 1, got {min_freq!r}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        kept = [tok for tok, c in counts.items() if c >= min_freq and tok not in specials]
        if order == "sorted":
            kept.sort()
        else:
            kept.sort(key=lambda tok: (-counts[tok], tok))  # most frequent first, ties alphabetical
        return cls(kept, level=level, specials=specials, unk_token=unk_token)

    # -- the table ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._id_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self._token_to_id

    def __iter__(self):
        return iter(self._id_to_token)

    def __repr__(self) -> str:
        shown = ", ".join(repr(t) for t in self._id_to_token[:8]) + (", ..." if len(self) > 8 else "")
        return f"Vocabulary(level={self.level!r}, size={len(self)}, tokens=[{shown}])"

    @property
    def tokens(self) -> list[str]:
        """All tokens, in id order (a copy)."""
        return list(self._id_to_token)

    def token_to_id(self, token: str) -> int:
        """The id of `token`; the unknown token's id if it is not in the table (KeyError without one)."""
        if not isinstance(token, str):
            raise TypeError(f"token must be a string, got {type(token).__name__} ({token!r})")
        idx = self._token_to_id.get(token)
        if idx is not None:
            return idx
        if self.unk_id is not None:
            return self.unk_id
        raise KeyError(
            f"token {token!r} is not in the vocabulary ({len(self)} tokens) and it has no unknown token; "
            "build it with specials=('<unk>',) to map unseen tokens to <unk>"
        )

    def id_to_token(self, idx: int) -> str:
        """The token with id `idx` (0-based)."""
        if hasattr(idx, "ndim") and idx.ndim == 0 and hasattr(idx, "item"):
            idx = idx.item() if _is_integer_scalar(idx) else idx  # a 0-d array or tensor holding an int
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
            raise TypeError(f"ids must be integers, got {type(idx).__name__} ({idx!r})")
        if not 0 <= idx < len(self):
            raise IndexError(f"id {int(idx)} is out of range: this vocabulary has ids 0..{len(self) - 1}")
        return self._id_to_token[int(idx)]

    # -- text <-> ids ------------------------------------------------------------------------------

    def encode(self, text: str | Sequence[str]) -> list[int]:
        """Token ids for `text`: a string (split at this vocabulary's level) or a list of tokens."""
        if isinstance(text, str):
            tokens = _split(text, self.level)
        elif isinstance(text, (list, tuple)):
            tokens = list(text)
        else:
            raise TypeError(f"encode takes a string or a list of tokens, got {type(text).__name__}")
        return [self.token_to_id(tok) for tok in tokens]

    def decode(self, ids: Iterable[int]) -> str:
        """The text for `ids`: tokens joined by a space (word level) or by nothing (character level)."""
        if isinstance(ids, str):
            raise TypeError(f"decode takes a sequence of integer ids, got the string {ids!r}")
        if hasattr(ids, "tolist"):  # numpy array or torch tensor
            ids = ids.tolist()
        tokens = [self.id_to_token(i) for i in ids]
        return (" " if self.level == "word" else "").join(tokens)


def _is_integer_scalar(x) -> bool:
    dtype = getattr(x, "dtype", None)
    if hasattr(x, "is_floating_point"):  # a torch tensor
        import torch

        return not x.is_floating_point() and not x.is_complex() and dtype is not torch.bool
    return dtype is not None and np.issubdtype(dtype, np.integer)


def _split(text: str, level: str) -> list[str]:
    """Word level: whitespace-separated words; character level: every character."""
    return text.split() if level == "word" else list(text)

