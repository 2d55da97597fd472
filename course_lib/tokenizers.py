"""From text to token ids and back.

`Vocabulary` (lesson 01): a fixed table of word- or character-level tokens, with an optional
unknown token for anything the table has never seen.

`BPETokenizer` (lesson 05): byte-level byte-pair encoding. It starts from the 256 possible bytes,
so every string can be encoded (nothing is ever unknown), and learns merges of frequent adjacent
pairs from a training text. `PairIndex` is its training state: the text as token ids, with the
count and the positions of every adjacent pair, updated around each merge instead of recounted.
`BPETokenizer.from_gpt2` (or `gpt2_tokenizer()`) loads GPT-2's published 50,000 merges into it.

Ids are 0-based: in a vocabulary of V tokens they run from 0 to V - 1.
"""
from __future__ import annotations

import heapq
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np
import regex

from course_lib._validate import is_int

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
        if not is_int(min_freq) or min_freq < 1:
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
        if not is_int(idx):
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


# --- BPETokenizer (lesson 05) ---------------------------------------------------------------------

N_BYTES = 256  # ids 0..255 are the bytes themselves, so any text can be encoded

# Pre-tokenization: a regular expression cuts the text into chunks, and merges never cross a chunk
# boundary. The default keeps each line (with its newline) together; nothing else is split, so a
# token may hold several words ("of the "). GPT2_SPLIT is GPT-2's own pattern (encoder.py in OpenAI's
# gpt-2 repository): a contraction ('s 't 're 've 'm 'll 'd, lower case and ASCII apostrophe only),
# a run of letters or a run of numbers or a run of other symbols, each with at most one space in
# front, and whitespace on its own. It needs the `regex` module: \p{L} (any letter) and \p{N} (any
# number: 4, but also ² and ½) are Unicode classes that Python's `re` does not know. GPT4_SPLIT is
# the pattern of GPT-4's tokenizer (cl100k_base, as tiktoken ships it): contractions in any case, and
# numbers cut into groups of at most three digits.
LINES = r"[^\n]*\n|[^\n]+"
GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT4_SPLIT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$"""
              r"""|\s*[\r\n]|\s+(?!\S)|\s""")
PATTERN_NAMES = {LINES: "LINES", GPT2_SPLIT: "GPT2_SPLIT", GPT4_SPLIT: "GPT4_SPLIT"}


def utf8(text: str) -> bytes:
    """The UTF-8 bytes of `text`. Lone surrogates (which a Python string may hold but UTF-8 forbids)
    are kept with "surrogatepass", so that every string survives encode and decode."""
    return text.encode("utf-8", "surrogatepass")


def split_chunks(text: str, pattern: str | regex.Pattern = LINES) -> list[str]:
    """Cut `text` into the chunks that merges stay inside: the matches of `pattern` (read by the
    `regex` module, which also understands \\p{L} and \\p{N}), plus whatever lies between them, so
    that every character lands in exactly one chunk (nothing is dropped).

    >>> split_chunks("to be\\nor not")
    ['to be\\n', 'or not']
    """
    compiled = regex.compile(pattern) if isinstance(pattern, str) else pattern
    if compiled.groups == 0:  # the usual case, a pattern that matches every character: findall is faster
        found = [chunk for chunk in compiled.findall(text) if chunk]
        if sum(map(len, found)) == len(text):  # disjoint matches in order that add up to the text: no gaps
            return found
    chunks, end = [], 0
    for m in compiled.finditer(text):
        if m.start() > end:  # text the pattern skipped still has to be encoded
            chunks.append(text[end:m.start()])
        if m.end() > m.start():
            chunks.append(m.group())
        end = m.end()
    if end < len(text):
        chunks.append(text[end:])
    return chunks


@dataclass(frozen=True)
class MergeStep:
    """One merge of a training run, as recorded by `BPETokenizer.train(..., record=True)`."""

    rank: int  # 0 for the first merge learned
    pair: tuple[int, int]  # the two token ids that were merged
    new_id: int  # the id of the merged token: 256 + rank
    count: int  # how often the pair occurred in the training text when it was chosen
    n_tokens: int  # how many tokens the training text has after this merge


class PairIndex:
    """The training text as token ids, with the count and the positions of every adjacent pair.

    Counting every pair of a 1 MB text again after each merge costs a million steps per merge.
    But a merge of (a, b) into n only changes the pairs around each occurrence of (a, b):
    ``x a b y`` loses (x, a), (a, b) and (b, y) and gains (x, n) and (n, y). So the index keeps
    the counts, and the positions where each pair occurs, and updates only those: the work per
    merge is proportional to how often the merged pair occurs, not to the length of the text.

    The text is held as one flat array of positions, a linked list per chunk (`next_pos`,
    `prev_pos`, -1 at a chunk's ends); a merge writes the new id at the left position and unlinks
    the right one. Identical chunks are stored once, with a weight: their number of occurrences.
    """

    def __init__(self, chunks: Mapping[bytes, int] | Iterable[bytes | Sequence[int]]):
        """`chunks`: a mapping chunk -> how many times it occurs, or an iterable of chunks (each once).
        A chunk is a bytes object or a sequence of token ids."""
        if not isinstance(chunks, Mapping):
            chunks = Counter(tuple(c) for c in chunks)
        self.ids: list[int] = []  # the token at each position; -1 once merged into its left neighbour
        self.next_pos: list[int] = []  # the next position in the same chunk, -1 at the chunk's end
        self.prev_pos: list[int] = []  # the previous position in the same chunk, -1 at its start
        self.weight: list[int] = []  # how many times the chunk holding this position occurs
        self.starts: list[int] = []  # the first position of each chunk
        self.counts: dict[tuple[int, int], int] = {}  # (left id, right id) -> occurrences (pairs with count 0 are removed)
        # pair -> positions of its left token. Entries go stale when a neighbouring merge changes the
        # pair there; they are checked when used. A stale entry can never become valid again, because
        # every merge makes a brand-new id.
        self.where: dict[tuple[int, int], list[int]] = defaultdict(list)
        for chunk, w in chunks.items():
            start, n, w = len(self.ids), len(chunk), int(w)
            if n == 0:
                continue
            self.starts.append(start)
            self.ids.extend(chunk)
            self.next_pos.extend(range(start + 1, start + n))
            self.next_pos.append(-1)
            self.prev_pos.append(-1)
            self.prev_pos.extend(range(start, start + n - 1))
            self.weight.extend([w] * n)
            for p, pair in enumerate(zip(chunk, chunk[1:]), start):
                self.counts[pair] = self.counts.get(pair, 0) + w
                self.where[pair].append(p)
        self.n_tokens = sum(self.weight)  # tokens in the whole text (each chunk counted as often as it occurs)
        # A max-heap of (-count, pair): the most frequent pair first and, among equal counts, the
        # smallest (left id, right id). Counts of existing pairs only ever go down (a merge creates
        # pairs only with the new id), so a stale entry is re-pushed with its current count when it
        # reaches the top, as in the `tokenizers` library's trainer.
        self.heap = [(-count, pair) for pair, count in self.counts.items()]
        heapq.heapify(self.heap)

    def most_frequent(self) -> tuple[tuple[int, int], int] | None:
        """The most frequent pair and its count (ties: the smallest pair of ids), or None if no pair is left."""
        while self.heap:
            neg_count, pair = self.heap[0]
            count = self.counts.get(pair, 0)
            if count == -neg_count:
                return pair, count
            if count > 0:  # stale: its count went down since it was pushed
                heapq.heapreplace(self.heap, (-count, pair))
            else:
                heapq.heappop(self.heap)
        return None

    def merge(self, pair: tuple[int, int], new_id: int) -> int:
        """Replace every occurrence of `pair`, left to right, by `new_id`; return how many were merged.

        Left to right matters when the two halves are equal: "a a a" becomes "aa a" (one merge,
        not two, since the middle "a" can only be used once).
        """
        a, b = pair
        ids, next_pos, prev_pos, counts, where = self.ids, self.next_pos, self.prev_pos, self.counts, self.where

        def lose(old: tuple[int, int], w: int) -> None:  # a pair that is gone at one place
            left = counts[old] - w
            if left:
                counts[old] = left
            else:
                del counts[old]

        merged = 0
        new_pairs = set()
        for p in sorted(where.pop(pair, ())):  # sorted: left to right within each chunk
            q = next_pos[p]
            if ids[p] != a or q == -1 or ids[q] != b:
                continue  # stale, or used up by the occurrence just to its left ("a a a")
            w = self.weight[p]
            before, after = prev_pos[p], next_pos[q]
            if before != -1:  # x a b -> x n
                x = ids[before]
                lose((x, a), w)
                counts[x, new_id] = counts.get((x, new_id), 0) + w
                where[x, new_id].append(before)
                new_pairs.add((x, new_id))
            if after != -1:  # a b y -> n y
                y = ids[after]
                lose((b, y), w)
                counts[new_id, y] = counts.get((new_id, y), 0) + w
                where[new_id, y].append(p)
                new_pairs.add((new_id, y))
            lose(pair, w)
            ids[p], ids[q] = new_id, -1  # the merged token sits at the left position
            next_pos[p] = after
            if after != -1:
                prev_pos[after] = p
            merged += w
        self.n_tokens -= merged
        for new_pair in new_pairs:  # the only pairs whose counts went up: put them on the heap
            if new_pair in counts:  # ("a a a a" makes (aa, a) and then uses it up)
                heapq.heappush(self.heap, (-counts[new_pair], new_pair))
        return merged

    def sequences(self) -> list[tuple[list[int], int]]:
        """Each stored chunk as its current list of token ids, with its weight."""
        out = []
        for start in self.starts:
            ids, p = [], start
            while p != -1:
                ids.append(self.ids[p])
                p = self.next_pos[p]
            out.append((ids, self.weight[start]))
        return out


def count_pairs(sequences: Iterable[tuple[Sequence[int], int]]) -> dict[tuple[int, int], int]:
    """A full recount of adjacent pairs over (token ids, weight) sequences: what `PairIndex` avoids."""
    counts: Counter = Counter()
    for ids, w in sequences:
        for pair in zip(ids, ids[1:]):
            counts[pair] += w
    return dict(counts)


class BPETokenizer:
    """Byte-level byte-pair encoding (BPE), trained from scratch or loaded from GPT-2's files.

    The vocabulary starts as the 256 bytes (ids 0..255), so any string can be encoded: its UTF-8
    bytes are the fallback, and a character never seen in training simply stays in byte pieces.
    `train` then repeats: count the adjacent pairs of tokens in the training text, merge the most
    frequent pair into a new token, until the vocabulary is full. Merge number k (0-based) creates
    id 256 + k; `merges[k]` is the pair of ids it joined. The special tokens come last.

    Ids 0..255 are the 256 single bytes. In a tokenizer trained here byte b has id b; GPT-2 numbers
    them in another order (its printable bytes first: "!" is id 0), which `byte_order` records:
    `byte_order[i]` is the byte that id i stands for.

    Ties: when several pairs are equally frequent, the pair with the smallest (left id, right id)
    wins: pairs of older tokens first, and among bytes the lower id. (The `tokenizers` library
    breaks ties the same way, but numbers its bytes in another order.)

    Merges stay inside chunks cut by `pattern` (see `split_chunks`): by default each line, so no
    token crosses a line break. `GPT2_SPLIT` keeps tokens inside words as GPT-2 does.

    Special tokens (e.g. "<|endoftext|>") encode to one id each, are never split or merged, and are
    left out of training. Text may contain their strings too (a user can type "<|endoftext|>"), so
    `encode` refuses such text unless told what it is, as tiktoken does: `allowed_special={...}` (or
    "all") for text your own code assembled, where the string means the special token;
    `encode_ordinary` (or `disallowed_special=()`) for text from users, where it is ordinary text.

    `encode` applies the merges in the order they were learned (each one left to right wherever
    its pair occurs), which reproduces the segmentation training arrived at.

    >>> tok = BPETokenizer().train("low lower lowest", 258)
    >>> [tok.token_text(i) for i in tok.encode("lower")]
    ['low', 'e', 'r']
    >>> tok.decode(tok.encode("naïve 🙂")) == "naïve 🙂"
    True
    """

    def __init__(self, special_tokens: Sequence[str] = (), pattern: str = LINES):
        if isinstance(special_tokens, str):
            raise TypeError(f"special_tokens must be a sequence of strings such as ('<|endoftext|>',), got the string {special_tokens!r}")
        special_tokens = tuple(special_tokens)
        for tok in special_tokens:
            if not isinstance(tok, str) or tok == "":
                raise TypeError(f"special tokens must be non-empty strings, got {tok!r}")
        if len(set(special_tokens)) != len(special_tokens):
            raise ValueError(f"a special token is listed twice in {special_tokens!r}")
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a regular expression (a string), got {type(pattern).__name__}")
        try:
            self._compiled = regex.compile(pattern)
        except regex.error as err:
            raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {err}") from None
        self.special_tokens = special_tokens  # in id order, after the merges
        self.pattern = pattern
        self._special_res: dict[frozenset, regex.Pattern] = {}  # a set of special tokens -> a regex that finds them
        self.history: list[MergeStep] = []  # filled by train(..., record=True)
        self._set_merges([])

    def _set_merges(self, merges: Sequence[tuple[int, int]], byte_order: Sequence[int] | None = None) -> None:
        order = list(range(N_BYTES)) if byte_order is None else [int(b) for b in byte_order]
        if sorted(order) != list(range(N_BYTES)):
            raise ValueError(f"byte_order must list each of the 256 bytes exactly once, got {_short_repr(order)}")
        self.byte_order: list[int] = order  # the byte that each of the ids 0..255 stands for
        ids_of = [0] * N_BYTES
        for i, b in enumerate(order):
            ids_of[b] = i
        self._to_ids = bytes(ids_of)  # a bytes.translate table: byte -> its id
        self.merges: list[tuple[int, int]] = [(int(a), int(b)) for a, b in merges]  # merges[k] made id 256 + k
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}  # pair -> the order it was learned in
        self.vocab: list[bytes] = [bytes([b]) for b in order]  # id -> bytes, for every id but the specials
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.special_ids = {tok: len(self.vocab) + i for i, tok in enumerate(self.special_tokens)}
        self._special_bytes = {i: utf8(tok) for tok, i in self.special_ids.items()}

    # -- the table ---------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """256 bytes + one token per merge + the special tokens."""
        return len(self.vocab) + len(self.special_tokens)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        specials = f", special_tokens={list(self.special_tokens)}" if self.special_tokens else ""
        name = PATTERN_NAMES.get(self.pattern)
        split = "" if self.pattern == LINES else f", pattern={name or repr(self.pattern)}"
        return f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}{specials}{split})"

    def token_bytes(self, idx: int) -> bytes:
        """The bytes that id `idx` stands for."""
        if hasattr(idx, "ndim") and idx.ndim == 0 and hasattr(idx, "item") and _is_integer_scalar(idx):
            idx = idx.item()  # a 0-d array or tensor holding an int
        if not is_int(idx):
            raise TypeError(f"ids must be integers, got {type(idx).__name__} ({idx!r})")
        idx = int(idx)
        if 0 <= idx < len(self.vocab):
            return self.vocab[idx]
        if idx in self._special_bytes:
            return self._special_bytes[idx]
        raise IndexError(f"id {idx} is out of range: this tokenizer has ids 0..{self.vocab_size - 1}")

    def token_text(self, idx: int) -> str:
        """A token as text for display; bytes that are only part of a character show as escapes (\\xe2)."""
        return self.token_bytes(idx).decode("utf-8", "backslashreplace")

    def truncated(self, n_merges: int) -> "BPETokenizer":
        """A copy that keeps only the first `n_merges` merges (what training with fewer merges gives)."""
        if not is_int(n_merges) or not 0 <= n_merges <= len(self.merges):
            raise ValueError(f"n_merges must be an int from 0 to {len(self.merges)} (the merges learned), got {n_merges!r}")
        out = BPETokenizer(self.special_tokens, self.pattern)
        out._set_merges(self.merges[: int(n_merges)], self.byte_order)
        out.history = self.history[: int(n_merges)]
        return out

    # -- special tokens ----------------------------------------------------------------------------

    def _special_set(self, value, argument: str) -> frozenset:
        """`allowed_special` / `disallowed_special` as a set of this tokenizer's special tokens."""
        if value == "all":
            return frozenset(self.special_tokens)
        if isinstance(value, str):
            raise TypeError(f"{argument} takes a set of special tokens such as {{'<|endoftext|>'}} or 'all', "
                            f"got the string {value!r}")
        chosen = frozenset(value)
        unknown = sorted(chosen - set(self.special_tokens))
        if unknown:
            raise ValueError(f"{argument}: {unknown[0]!r} is not a special token of this tokenizer "
                             f"(it has {list(self.special_tokens)})")
        return chosen

    def _split_specials(self, text: str, specials: Collection[str]) -> list[tuple[str, bool]]:
        """`text` as (piece, is_special) parts, the given special tokens cut out whole."""
        key = frozenset(specials)
        if not key:
            return [(text, False)]
        if key not in self._special_res:  # longest first: a special token that contains another is matched whole
            ordered = sorted(key, key=len, reverse=True)
            self._special_res[key] = regex.compile("|".join(regex.escape(s) for s in ordered))
        parts, end = [], 0
        for m in self._special_res[key].finditer(text):
            if m.start() > end:
                parts.append((text[end:m.start()], False))
            parts.append((m.group(), True))
            end = m.end()
        if end < len(text):
            parts.append((text[end:], False))
        return parts

    # -- training ----------------------------------------------------------------------------------

    def train(self, text: str, vocab_size: int, *, min_frequency: int = 2, record: bool = False) -> "BPETokenizer":
        """Learn merges from `text` until the vocabulary holds `vocab_size` tokens (256 bytes + merges
        + special tokens), or earlier when no pair occurs at least `min_frequency` times.
        `record=True` keeps every merge step in `.history` (a list of `MergeStep`). Returns self."""
        if not isinstance(text, str):
            raise TypeError(f"train takes the training text as a string, got {type(text).__name__}")
        smallest = N_BYTES + len(self.special_tokens)
        if not is_int(vocab_size):
            raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__} ({vocab_size!r})")
        if vocab_size < smallest:
            specials = f" and the {len(self.special_tokens)} special token{'s' * (len(self.special_tokens) != 1)}" if self.special_tokens else ""
            raise ValueError(f"vocab_size must be at least {smallest} (the 256 byte tokens{specials}), got {vocab_size}")
        if not is_int(min_frequency) or min_frequency < 1:
            raise ValueError(f"min_frequency must be an int >= 1, got {min_frequency!r}")
        chunks = Counter(utf8(chunk).translate(self._to_ids)  # bytes as ids (the same values unless from GPT-2)
                         for piece, special in self._split_specials(text, self.special_tokens) if not special
                         for chunk in split_chunks(piece, self._compiled))
        index = PairIndex(chunks)
        merges, history = [], []
        for rank in range(int(vocab_size) - smallest):
            best = index.most_frequent()
            if best is None or best[1] < min_frequency:
                break  # nothing frequent enough is left to merge: a smaller vocabulary than asked for
            pair, count = best
            index.merge(pair, N_BYTES + rank)
            merges.append(pair)
            if record:
                history.append(MergeStep(rank, pair, N_BYTES + rank, count, index.n_tokens))
        self._set_merges(merges, self.byte_order)
        self.history = history
        return self

    # -- text <-> ids ------------------------------------------------------------------------------

    def encode(self, text: str, *, allowed_special: str | Collection[str] = (),
               disallowed_special: str | Collection[str] = "all") -> list[int]:
        """The token ids of `text`.

        Special tokens, as in tiktoken: those in `allowed_special` (a set, or "all") become their own
        id wherever their string occurs; any other special token's string raises a ValueError, unless
        `disallowed_special` leaves it out (`disallowed_special=()` encodes them all as ordinary text,
        as `encode_ordinary` does). So by default text that contains "<|endoftext|>" is refused
        rather than silently given the end-of-text id: a user must not be able to type a control token.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes a string, got {type(text).__name__} ({_short_repr(text)})")
        allowed = self._special_set(allowed_special, "allowed_special")
        if disallowed_special == "all":
            disallowed = frozenset(self.special_tokens) - allowed
        else:
            disallowed = self._special_set(disallowed_special, "disallowed_special")
        for piece, special in self._split_specials(text, disallowed):
            if special:
                raise ValueError(
                    f"the text contains the special token {piece!r}. If your own code put it there, pass "
                    f"allowed_special={{{piece!r}}} (or 'all') to encode it as that token; if the text comes from a "
                    "user, use encode_ordinary(text) (or disallowed_special=()) to encode it as ordinary text")
        if not allowed:
            return self._encode_ordinary(text)
        ids: list[int] = []
        for piece, special in self._split_specials(text, allowed):
            if special:
                ids.append(self.special_ids[piece])
            else:
                ids.extend(self._encode_ordinary(piece))
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """The token ids of `text`, special tokens' strings included as ordinary text (for text from users)."""
        if not isinstance(text, str):
            raise TypeError(f"encode_ordinary takes a string, got {type(text).__name__} ({_short_repr(text)})")
        return self._encode_ordinary(text)

    def _encode_ordinary(self, text: str) -> list[int]:
        """Each chunk on its own (a chunk that occurs again is looked up, not encoded again)."""
        ids: list[int] = []
        done: dict[str, list[int]] = {}
        for chunk in split_chunks(text, self._compiled):
            chunk_ids = done.get(chunk)
            if chunk_ids is None:
                chunk_ids = done[chunk] = self._encode_chunk(list(utf8(chunk).translate(self._to_ids)))
            ids.extend(chunk_ids)
        return ids

    def _encode_chunk(self, ids: list[int], applied: list[int] | None = None) -> list[int]:
        """Bytes (as ids), then the merges in the order they were learned, each wherever its pair occurs.
        The rank of every merge made is appended to `applied` when given (see `tokens_after_each_merge`)."""
        n = len(ids)
        if n < 2 or not self.merges:
            return ids
        next_pos = list(range(1, n)) + [-1]  # a linked list, so that a merge does not shift the rest
        prev_pos = list(range(-1, n - 1))
        where: dict[tuple[int, int], list[int]] = {}  # known merge -> positions where its pair may occur
        ranks: list[int] = []  # heap of the ranks of the merges present, lowest (learned first) on top

        def note(p: int) -> None:
            pair = (ids[p], ids[next_pos[p]])
            rank = self.ranks.get(pair)
            if rank is not None:
                if pair not in where:
                    where[pair] = []
                    heapq.heappush(ranks, rank)
                where[pair].append(p)

        for p in range(n - 1):
            note(p)
        while ranks:
            rank = heapq.heappop(ranks)  # a merge creates only pairs with its new id, all of a later rank
            a, b = pair = self.merges[rank]
            new_id = N_BYTES + rank
            for p in sorted(where.pop(pair)):
                q = next_pos[p]
                if ids[p] != a or q == -1 or ids[q] != b:
                    continue  # stale, or used up by the occurrence to its left
                ids[p], ids[q] = new_id, -1
                if applied is not None:
                    applied.append(rank)
                after = next_pos[q]
                next_pos[p] = after
                if after != -1:
                    prev_pos[after] = p
                    note(p)
                if prev_pos[p] != -1:
                    note(prev_pos[p])
        return [i for i in ids if i != -1]  # merged-away positions are marked -1; the rest keep their order

    def tokens_after_each_merge(self, text: str) -> list[int]:
        """How many tokens `text` becomes with only the first k merges, for every k from 0 to
        len(merges): `len(self.truncated(k).encode_ordinary(text))` for all k, at the cost of one encoding.

        Encoding applies the merges in the order they were learned, so once the merges of rank < k are
        done it holds exactly what the first k merges give; counting the merges of each rank as they
        happen gives every k at once (as `MergeStep.n_tokens` does for the training text)."""
        if not isinstance(text, str):
            raise TypeError(f"tokens_after_each_merge takes a string, got {type(text).__name__}")
        made = [0] * (len(self.merges) + 1)  # made[r + 1]: how many merges of rank r encoding makes
        tokens = 0
        for chunk, count in Counter(split_chunks(text, self._compiled)).items():
            data = utf8(chunk)
            tokens += len(data) * count
            applied: list[int] = []
            self._encode_chunk(list(data.translate(self._to_ids)), applied)
            for rank in applied:
                made[rank + 1] += count
        counts = []
        for k in range(len(self.merges) + 1):
            tokens -= made[k]
            counts.append(tokens)
        return counts

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`. The bytes of all tokens are joined first and then read as UTF-8, because
        one character may be split over several tokens. A sequence that is not valid UTF-8 (which
        `encode` never makes, but a model may) gets U+FFFD "�" where the bad bytes are."""
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"decode takes a sequence of integer ids, got {type(ids).__name__} {_short_repr(ids)}")
        if hasattr(ids, "tolist"):  # numpy array or torch tensor
            ids = ids.tolist()
        if isinstance(ids, int):
            raise TypeError(f"decode takes a sequence of integer ids, got the single int {ids}; wrap it in a list: [{ids}]")
        data = b"".join(self.token_bytes(i) for i in ids)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")

    def tokenize(self, text: str, **special) -> list[str]:
        """The tokens of `text` as text, for display (see `token_text`); `special` as for `encode`."""
        return [self.token_text(i) for i in self.encode(text, **special)]

    # -- GPT-2's published vocabulary --------------------------------------------------------------

    @classmethod
    def from_gpt2(cls, encoder: Mapping[str, int], merges: Sequence[tuple[str, str]]) -> "BPETokenizer":
        """GPT-2's tokenizer from its published files, as `course_lib.data.gpt2_vocabulary()` reads them:
        `encoder` (token -> id, 50,257 entries) and `merges` (50,000 pairs, in the order learned), both
        written in GPT-2's byte-to-unicode alphabet (see `bytes_to_unicode`: a space is "Ġ").

        The layout is this class's: ids 0..255 are the bytes (in GPT-2's order), merge k makes id
        256 + k, and "<|endoftext|>" comes last (50256); the pattern is GPT2_SPLIT. The files are
        checked against that layout, so a mismatch raises instead of giving wrong ids.
        """
        byte_of = {ch: b for b, ch in bytes_to_unicode().items()}
        byte_order = [-1] * N_BYTES
        for ch, b in byte_of.items():
            idx = encoder.get(ch)
            if idx is None or not 0 <= idx < N_BYTES:
                raise ValueError(f"the encoder should give the byte {b} (written {ch!r}) an id from 0 to 255, "
                                 f"got {idx!r}")
            byte_order[idx] = b
        pairs = []
        for rank, pair in enumerate(merges):
            if len(pair) != 2 or any(part not in encoder for part in pair) or pair[0] + pair[1] not in encoder:
                raise ValueError(f"merge {rank} is {pair!r}: its two parts and their join must all be in the encoder")
            made = encoder[pair[0] + pair[1]]
            if made != N_BYTES + rank:
                raise ValueError(f"merge {rank} ({pair[0]!r} + {pair[1]!r}) makes id {made} in the encoder; "
                                 f"expected {N_BYTES + rank} (256 + its rank)")
            pairs.append((encoder[pair[0]], encoder[pair[1]]))
        rest = sorted((idx, tok) for tok, idx in encoder.items() if idx >= N_BYTES + len(pairs))
        if [idx for idx, _ in rest] != list(range(N_BYTES + len(pairs), N_BYTES + len(pairs) + len(rest))):
            raise ValueError(f"the ids after the merges should be the special tokens, numbered on from "
                             f"{N_BYTES + len(pairs)}; got {rest[:3]}")
        tok = cls([t for _, t in rest], pattern=GPT2_SPLIT)
        tok._set_merges(pairs, byte_order)
        return tok

    # -- saving ------------------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the tokenizer to a JSON file (the merges as id pairs; the token texts for reading only)."""
        data = {
            "format": "course_lib.BPETokenizer",
            "version": 1,
            "pattern": self.pattern,
            "special_tokens": list(self.special_tokens),
            "merges": [list(pair) for pair in self.merges],
            "tokens": [self.token_text(i) for i in range(N_BYTES, len(self.vocab))],  # not read back
        }
        if self.byte_order != list(range(N_BYTES)):
            data["byte_order"] = self.byte_order
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "BPETokenizer":
        """Read a tokenizer written by `save`."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not a saved BPETokenizer: it is not valid JSON ({err})") from None
        if not isinstance(data, dict) or data.get("format") != "course_lib.BPETokenizer":
            raise ValueError(f"{path} is not a saved BPETokenizer (no \"format\": \"course_lib.BPETokenizer\" in it)")
        if data.get("version") != 1:
            raise ValueError(f"{path} is a BPETokenizer file of version {data.get('version')!r}; this code reads version 1")
        tok = cls(data.get("special_tokens", []), data.get("pattern", LINES))
        merges = data.get("merges", [])
        for rank, pair in enumerate(merges):
            ok = (isinstance(pair, list) and len(pair) == 2
                  and all(is_int(i) and 0 <= i < N_BYTES + rank for i in pair))
            if not ok:
                raise ValueError(f"{path}: merge {rank} is {pair!r}; expected two ids that exist before it (0..{N_BYTES + rank - 1})")
        byte_order = data.get("byte_order")
        if byte_order is not None and (not isinstance(byte_order, list) or sorted(byte_order) != list(range(N_BYTES))):
            raise ValueError(f"{path}: byte_order must list each of the 256 bytes exactly once")
        tok._set_merges([tuple(pair) for pair in merges], byte_order)
        return tok


def gpt2_tokenizer(cache_dir=None) -> BPETokenizer:
    """GPT-2's tokenizer (50,257 tokens) as a `BPETokenizer`, from the files `course_lib.data`
    downloads once (`gpt2_vocabulary`)."""
    from course_lib.data import gpt2_vocabulary

    encoder, merges = gpt2_vocabulary(cache_dir)
    return BPETokenizer.from_gpt2(encoder, merges)


def _short_repr(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- production byte-level BPE: GPT-2's byte map and the `tokenizers` library ---------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 bytes to 256 printable characters.

    Byte-level tokenizers store their vocabulary and merges as text, and a byte such as 32 (space)
    or 10 (newline) would print as nothing. So each byte gets a visible stand-in: the printable
    Latin-1 bytes stand for themselves ("a" is "a"), the other 68 are shifted to 256 + n
    (space -> "Ġ", newline -> "Ċ"). It is a display and storage trick: the model sees the same ids.
    """
    visible = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping, shift = {}, 0
    for b in range(N_BYTES):
        if b in visible:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(N_BYTES + shift)
            shift += 1
    return mapping


def train_hf_bpe(text: str, vocab_size: int, *, special_tokens: Sequence[str] = (), min_frequency: int = 2,
                 gpt2_split: bool = False):
    """The `tokenizers` library's byte-level BPE, trained on `text` with the setup of `BPETokenizer`:
    the 256 bytes as the initial alphabet, no prefix space, each line a separate sequence (merges
    never cross lines), and no regular-expression split unless `gpt2_split=True` (then GPT-2's).
    The independent reference that lesson 05, the tests and the benchmark compare against."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=gpt2_split)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=list(special_tokens))
    tok.train_from_iterator(split_chunks(text, LINES), trainer=trainer)
    return tok


def hf_merges(tok) -> list[tuple[bytes, bytes]]:
    """The merges of a `tokenizers` byte-level BPE as pairs of bytes, in the order they were learned
    (undoing the byte-to-unicode map), comparable with `[(t.vocab[a], t.vocab[b]) for a, b in t.merges]`."""
    back = {ch: b for b, ch in bytes_to_unicode().items()}
    merges = json.loads(tok.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]  # older versions store "a b"
    return [(bytes(back[c] for c in left), bytes(back[c] for c in right)) for left, right in pairs]
