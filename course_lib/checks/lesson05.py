"""Checks for the lesson 05 exercises (tokens and byte-pair encoding): reference functions, mistake
tables and one check per exercise.

The references are written here from scratch (a full recount of the pairs for every merge), and the
tests check them against `course_lib.tokenizers.BPETokenizer`.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Mapping, Sequence

from .core import CheckFailed, NotAttempted, _short, call, check_all, check_sealed, passed

N_BYTES = 256  # ids 0..255 are the bytes; merge k (counting from 0) makes id 256 + k


# --- references --------------------------------------------------------------------------------------


def reference_merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Every occurrence of `pair` in `ids`, left to right, replaced by `new_id` (a new list)."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def reference_encode(text: str, merges: Mapping[tuple[int, int], int]) -> list[int]:
    """UTF-8 bytes, then repeatedly the pair present whose merge was learned first (smallest new id)."""
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        present = [p for p in set(zip(ids, ids[1:])) if p in merges]
        if not present:
            break
        pair = min(present, key=lambda p: merges[p])
        ids = reference_merge_pair(ids, pair, merges[pair])
    return ids


def reference_decode(ids: Sequence[int], vocab: Mapping[int, bytes]) -> str:
    """The bytes of all tokens joined, then read as UTF-8 (bad bytes become U+FFFD)."""
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


def buggy_decode(ids: Sequence[int], vocab: Mapping[int, bytes]) -> str:
    """The function of exercise 8: it reads each token's bytes as UTF-8 on their own."""
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)


def reference_train(text: str, n_merges: int, *, ties: str = "smallest", units: str = "bytes", min_count: int = 2,
                    recount: bool = True, first_id: int = N_BYTES) -> list[tuple[int, int]]:
    """BPE training with a full recount per merge; the keyword arguments switch on the usual slips.

    ties: "smallest" (right: the smallest (left, right) pair of ids), "first" (the pair seen first in
    the text, as Counter.most_common does) or "largest"; units: "bytes" (right) or "chars" (ord of each
    character); min_count: stop when the best pair occurs fewer times (2 is right); recount=False keeps
    the counts of the first step; first_id: the id of the first merge (256 is right).
    """
    ids = list(text.encode("utf-8")) if units == "bytes" else [ord(c) for c in text]
    first_counts = Counter(zip(ids, ids[1:]))
    merges: list[tuple[int, int]] = []
    for k in range(n_merges):
        counts = Counter(zip(ids, ids[1:])) if recount else Counter({p: c for p, c in first_counts.items() if p not in merges})
        if not counts:
            break
        if ties == "smallest":
            pair = min(counts, key=lambda p: (-counts[p], p))
        elif ties == "largest":
            pair = max(counts, key=lambda p: (counts[p], p))
        else:
            pair = counts.most_common(1)[0][0]  # ties: the pair counted first
        if counts[pair] < min_count:
            break
        merges.append(pair)
        ids = reference_merge_pair(ids, pair, first_id + k)
    return merges


# --- answers worked out by hand ----------------------------------------------------------------------
# The answers of exercises 1-3, 5 and 6, and the values of the mistakes their hints name, kept as seals
# (see core.seal): name -> (decimals, seal of the answer, {mistake: seal of its value}). Token lists
# are sealed as their tokens joined with "|".

_SEALED = {
    'count_wo': (None, '7940447e22718a741861', {}),
    'count_ow': (None, '1ed83308ad7ce58547de', {}),
    'count_aa': (None, 'f394a93e8c6737fa1efb', {
        "counted non-overlapping occurrences (as str.count does): BPE counts every pair of neighbours, and 'aaaa' has one at positions 0-1, one at 1-2 and one at 2-3":
            'fa3f2af0fea793f33173',
        'counted the letters: count the pairs of neighbours':
            '949b8ce574d31de38e68',
    }),
    'first_merge': (None, '49fc4a9d1444ff7e3fbc', {
        "took the pair that comes first in the text: 'wo' and 'ow' both occur 3 times, and the tie goes to the pair with the smaller byte values ('o' is 111, 'w' is 119)":
            '1e6424300e9a063848f1',
    }),
    'after_merge': (None, 'd8e7e2fd66aff5c4095f', {
        "merged ('w', 'o'): the tie goes to ('o', 'w') (see first_merge)":
            '106f785d342dabf4f9f8',
        "dropped the first 'w': a symbol that is not part of a merged pair stays as a token of its own":
            '6104fe140ea64ec6db20',
    }),
    'compressed': (None, 'c82767ed0261bf292869', {
        "broke the tie between 'Zb' and 'bZ' by taking the pair that comes first in the text: among equally frequent pairs take the one whose first symbol is older, and b (an original letter) is older than Z (a new symbol)":
            '467fcc0ae97fcafa60c8',
        'stopped after one merge: after aa -> Z, a pair still occurs twice':
            'eacd2088a2501a5fd57d',
        'kept merging a pair that occurs only once: stop when no pair occurs at least twice':
            'de72e1cc91974eb5e813',
    }),
    'n_rules': (None, '6dda5e9bb6975717ad17', {
        'counted a merge of a pair that occurs only once: stop when no pair occurs at least twice':
            '9dbc6f0bf9b4ed5f7361',
        'stopped after one merge: after aa -> Z, a pair still occurs twice':
            '2a12202065298f2efffe',
    }),
    'decoded': (None, 'a309515174537574c4ed', {
        'undid the rules in the order they were made (Z first): the Y and Z that X expands into are then never replaced; undo the newest rule (X) first':
            '6addf496e4292cda8e5c',
        'stopped after undoing X: Y and Z still stand for pairs':
            '915f25911f8a707a96c4',
        'stopped after undoing X and Y: Z still stands for aa':
            'ab214fd0e7961bc6be3a',
    }),
    'tokens_lower': (None, '05ffb7669aa114ff784c', {
        'merged from left to right (or took the longest known token first): merges are applied in the order they were learned, and w + er (merge 2) comes before l + o (merge 3) and lo + w (merge 4)':
            'cf63e916fb126139474a',
        'stopped after the first merge: keep applying merges, in the order learned, while any of them applies':
            'c25474da4f9a333246a6',
    }),
    'tokens_lowest': (None, '9d110755970eebba1dda', {
        "stopped before the last merge: once s + t has made 'st', e + st (merge 6) applies":
            '990765eb1801c7f93af1',
    }),
    'gpt2_merges': (None, 'dac445b347db82cf5897', {
        'forgot the special token: 256 bytes + merges + 1 special token = 50,257':
            '3bd25dea20beb654843f',
        'gave the vocabulary size: subtract the 256 bytes and the one special token':
            'd3dbf4ee326010551ecb',
        'subtracted only the special token: the 256 byte tokens are not merges either':
            'e80ba89c5c1ff90b961b',
    }),
    'id_of_merge_10': (None, 'b325820167695f5ea766', {
        'counted the merges from 0: the first merge gets id 256 + 0 = 256, so the tenth gets 256 + 9':
            'af47683a1ab9ffa90e4b',
        'forgot that ids 0..255 are taken by the bytes':
            '495939afa1e1fc35abda',
        'forgot that ids 0..255 are taken by the bytes (and counted from 1)':
            '57028fd892509de08c4d',
    }),
    'naive_bytes': (None, '5b4049969d61421f6832', {
        "counted characters: a byte-level tokenizer with no merges makes one token per byte, and 'ï' takes two bytes in UTF-8":
            '16bf58d53ea19c6229a9',
    }),
}


def _sealed(name: str, value: Any, kind: str, hint: str | None = None) -> None:
    decimals, answer, mistakes = _SEALED[name]
    check_sealed(name, value, answer, decimals=decimals, mistakes=mistakes, hint=hint, kind=kind)


def _tokens_text(name: str, value: Any) -> str:
    """A list of token strings as one text, 'lo|wer', for sealing; a clear failure for anything else."""
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable?")
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise CheckFailed(name, f"expected a list of token strings such as ['lo', 'w'], got {_short(value)}.")
    if any(t == "" for t in value):
        raise CheckFailed(name, f"{_short(list(value))} holds an empty string: every token stands for at least one character.")
    return "|".join(value)


def _sealed_tokens(name: str, value: Any, hint: str) -> None:
    text = _tokens_text(name, value)
    try:
        _sealed(name, text, "text", hint)
    except CheckFailed as err:  # show the learner's list, not the joined text the seal is made of
        raise CheckFailed(name, f"{_short(list(value), 80)} is not right.", err.hint) from None


def _pair_text(name: str, value: Any) -> str:
    """A pair given as 'ow', ('o', 'w') or (111, 119), as the text 'ow'."""
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable?")
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and len(value) == 2:
        if all(isinstance(s, str) for s in value):
            return value[0] + value[1]
        if all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < N_BYTES for i in value):
            return bytes(value).decode("utf-8", errors="replace")
    raise CheckFailed(name, f"expected the pair as a string such as 'ab' or a tuple such as ('a', 'b'), got {_short(value)}.")


# --- exercises 1-3: counting, one merge, compression by hand ------------------------------------------


def check_pair_counts(count_wo: Any, count_ow: Any, count_aa: Any) -> None:
    """Exercise 1: pairs of neighbours counted by hand, overlaps included."""
    hint = "write the text out and count every pair of neighbours: positions 0-1, 1-2, 2-3, ..."
    check_all(
        lambda: _sealed("count_wo", count_wo, "count", hint),
        lambda: _sealed("count_ow", count_ow, "count", hint),
        lambda: _sealed("count_aa", count_aa, "count", hint),
    )


def check_one_merge(first_merge: Any, after_merge: Any) -> None:
    """Exercise 2: the first merge on "wowowow" (with the tie rule) and the tokens after it."""
    check_all(
        lambda: _sealed("first_merge", _pair_text("first_merge", first_merge), "text",
                        "the most frequent pair; among equally frequent pairs, the one with the smaller byte values"),
        lambda: _sealed_tokens("after_merge", after_merge,
                               "replace the merged pair everywhere, left to right; every other letter stays a token"),
    )


def check_compression(compressed: Any, n_rules: Any, decoded: Any) -> None:
    """Exercise 3: aabaabaac compressed by hand until no pair occurs twice, and XYa decoded."""
    check_all(
        lambda: _sealed("compressed", compressed, "text",
                        "count the pairs, replace the most frequent by Z; count again, replace by Y; ... until no pair occurs twice"),
        lambda: _sealed("n_rules", n_rules, "count", "one rule per replacement you made"),
        lambda: _sealed("decoded", decoded, "text", "undo the rules newest first: X, then Y, then Z"),
    )


# --- exercise 4: merge_pair ----------------------------------------------------------------------------


def _merge_no_skip(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1
    return out


def _merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return list(ids[:i]) + [new_id] + list(ids[i + 2:])
    return list(ids)


def _merge_drops_last(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _merge_right_to_left(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i >= 1 and (ids[i - 1], ids[i]) == tuple(pair):
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


_MERGE_MISTAKES = {
    "forgot to skip the second symbol of a merged pair: after a match, move on by two positions, not one": _merge_no_skip,
    "replaced only the first occurrence: replace every occurrence of the pair": _merge_first_only,
    "dropped the last symbol when it is not part of a pair: the loop must also copy the last element": _merge_drops_last,
    "merged from right to left: in 'a a a' the first two a's form the pair, left to right": _merge_right_to_left,
}

_MERGE_CASES = [
    ([5, 6, 5, 6, 7], (5, 6), 256),
    ([1, 1, 1], (1, 1), 300),
    ([7, 8, 9], (8, 7), 256),  # the pair does not occur: nothing changes
    ([3, 4], (3, 4), 260),
]
_MERGE_HIDDEN_CASES = [
    ([1, 1, 1, 1], (1, 1), 256),
    ([], (1, 2), 256),
    ([9], (9, 9), 256),
    ([2, 3, 2, 3, 3, 2, 3], (2, 3), 999),
    ([4, 4, 4, 4, 4], (4, 4), 257),
]


def _as_ids(name: str, value: Any, shown: str) -> list[int]:
    if value is None:
        raise CheckFailed(name, f"got None when called as {shown}: did you forget to `return` the list?")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise CheckFailed(name, f"expected a list of ints when called as {shown}, got {_short(value)}.")
    return list(value)


def _compare_ids(name: str, got: list[int], want: list[int], wrong: Mapping[str, list[int]], shown: str, hint: str) -> None:
    if got == want:
        return
    for description, ids in wrong.items():
        if ids != want and got == ids:
            raise CheckFailed(name, f"{shown} returned {_short(got, 80)}, which is not right.", f"it looks like you {description}.")
    raise CheckFailed(name, f"{shown} returned {_short(got, 80)}, expected {_short(want, 80)}.", hint)


def check_merge_pair(fn: Callable, name: str = "merge_pair", *, hidden: bool = False) -> None:
    """The learner's merge_pair(ids, pair, new_id) against the reference, naming the usual slips."""
    cases = _MERGE_HIDDEN_CASES if hidden else _MERGE_CASES
    for ids, pair, new_id in cases:
        given = list(ids)
        shown = f"{name}({ids}, {pair}, {new_id})"
        got = _as_ids(name, call(name, fn, given, pair, new_id), shown)
        wrong = {d: m(list(ids), pair, new_id) for d, m in _MERGE_MISTAKES.items()}
        _compare_ids(name, got, reference_merge_pair(ids, pair, new_id), wrong, shown,
                     "walk along the list: where the pair starts, append new_id and jump two places; otherwise copy one element")
        if given != list(ids):
            raise CheckFailed(name, f"{shown} changed the list it was given (to {_short(given)}).",
                              "build a new list (out = [] ... out.append(...)) and leave the input as it was")
    passed(name, f"{len(cases)} cases")


# --- exercise 5 and 6: by hand ------------------------------------------------------------------------


def check_encode_by_hand(tokens_lower: Any, tokens_lowest: Any) -> None:
    """Exercise 5: "lower" and "lowest" encoded by hand with six given merges."""
    hint = "start from single letters; apply merge 1 everywhere it fits, then merge 2, ... in the order given"
    check_all(
        lambda: _sealed_tokens("tokens_lower", tokens_lower, hint),
        lambda: _sealed_tokens("tokens_lowest", tokens_lowest, hint),
    )


def check_vocab_arithmetic(gpt2_merges: Any, id_of_merge_10: Any, naive_bytes: Any) -> None:
    """Exercise 6: how a byte-level vocabulary is laid out, and how many bytes a word takes."""
    check_all(
        lambda: _sealed("gpt2_merges", gpt2_merges, "count", "vocabulary = 256 bytes + merges + special tokens"),
        lambda: _sealed("id_of_merge_10", id_of_merge_10, "count", "merge k, counting from 0, makes id 256 + k"),
        lambda: _sealed("naive_bytes", naive_bytes, "count", "write out the UTF-8 bytes of each character: list('naïve'.encode('utf-8'))"),
    )


# --- exercise 7: encode -------------------------------------------------------------------------------


def _lower_merges() -> dict[tuple[int, int], int]:
    """The six merges of exercise 5 (e+r, w+er, l+o, lo+w, s+t, e+st) as ids."""
    ids = {chr(b): b for b in range(128)}
    merges = {}
    for k, (a, b) in enumerate([("e", "r"), ("w", "er"), ("l", "o"), ("lo", "w"), ("s", "t"), ("e", "st")]):
        merges[(ids[a], ids[b])] = N_BYTES + k
        ids[a + b] = N_BYTES + k
    return merges


def _trained_merges(text: str, n_merges: int) -> dict[tuple[int, int], int]:
    return {pair: N_BYTES + k for k, pair in enumerate(reference_train(text, n_merges))}


def _encode_text_order(text, merges):
    ids = list(text.encode("utf-8"))
    changed = True
    while changed:
        changed = False
        for i in range(len(ids) - 1):  # the first known pair from the left, whatever its rank
            if (ids[i], ids[i + 1]) in merges:
                ids = ids[:i] + [merges[(ids[i], ids[i + 1])]] + ids[i + 2:]
                changed = True
                break
    return ids


def _encode_chars(text, merges):
    ids = [ord(c) for c in text]
    for pair, new_id in sorted(merges.items(), key=lambda kv: kv[1]):
        ids = reference_merge_pair(ids, pair, new_id)
    return ids


def _encode_first_occurrence(text, merges):
    ids = list(text.encode("utf-8"))
    for pair, new_id in sorted(merges.items(), key=lambda kv: kv[1]):
        ids = _merge_first_only(ids, pair, new_id)
    return ids


def _encode_one_merge(text, merges):
    ids = list(text.encode("utf-8"))
    present = [p for p in zip(ids, ids[1:]) if p in merges]
    if present:
        pair = min(present, key=lambda p: merges[p])
        ids = reference_merge_pair(ids, pair, merges[pair])
    return ids


_ENCODE_MISTAKES = {
    "merged the first known pair from the left each time: apply the merges in the order they were learned "
    "(the smallest new id first), whatever their place in the text": _encode_text_order,
    "used ord() of each character: start from the UTF-8 bytes, text.encode('utf-8'), so 'é' is two ids, 195 and 169": _encode_chars,
    "replaced only the first occurrence of each pair: a merge applies everywhere its pair occurs": _encode_first_occurrence,
    "stopped after one merge: keep going while any learned pair is present": _encode_one_merge,
}


def _encode_cases(hidden: bool) -> list[tuple[str, dict]]:
    lower = _lower_merges()
    rain = _trained_merges("the rain in spain stays mainly in the plain", 12)
    cases = [("lower", lower), ("lowest slower", lower), ("the rain in spain", rain), ("née", lower)]
    if hidden:
        cafe = _trained_merges("café, café, crème brûlée, café", 10)
        cases += [("", rain), ("a", rain), ("mainly plain rain 🙂", rain), ("café crème", cafe), ("lowerlowestlower", lower)]
    return cases


def check_encode(fn: Callable, name: str = "encode", *, hidden: bool = False) -> None:
    """The learner's encode(text, merges) against the reference, naming the usual mistakes."""
    cases = _encode_cases(hidden)
    for text, merges in cases:
        shown = f"{name}({text!r}, merges)"
        got = _as_ids(name, call(name, fn, text, dict(merges)), shown)
        wrong = {d: m(text, merges) for d, m in _ENCODE_MISTAKES.items()}
        _compare_ids(name, got, reference_encode(text, merges), wrong, shown,
                     "start from list(text.encode('utf-8')); then, while a learned pair is present, merge the one "
                     "with the smallest new id everywhere")
    passed(name, f"{len(cases)} cases")


# --- exercise 8: the decode bug -----------------------------------------------------------------------


def check_broken_example(value: Any, merges: Mapping[tuple[int, int], int], vocab: Mapping[int, bytes]) -> None:
    """Exercise 8a: a string that `buggy_decode` does not get back."""
    name = "broken_example"
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable?")
    if not isinstance(value, str):
        raise CheckFailed(name, f"expected a string, got {type(value).__name__} ({_short(value)}).")
    ids = reference_encode(value, merges)
    if buggy_decode(ids, vocab) == value:
        raise CheckFailed(name, f"buggy_decode gives {value!r} back correctly.",
                          "pick a string with a character that takes more than one byte in UTF-8 (é, 東, 🙂): its "
                          "bytes end up in separate tokens")
    passed(name, "buggy_decode garbles it")


def _decode_ignore(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="ignore")


def _decode_latin1(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("latin-1")


_DECODE_MISTAKES = {
    "still decoded token by token (the bug): join the bytes of all tokens first, then decode once": buggy_decode,
    "used errors='ignore', which silently drops bad bytes: use errors='replace', so that they show as '\ufffd'": _decode_ignore,
    "decoded as latin-1: the bytes are UTF-8": _decode_latin1,
}


def _decode_cases(merges, vocab, hidden: bool) -> list[tuple[str, list[int]]]:
    """(what the ids are, ids): the ids of some texts, and ids whose bytes are not valid UTF-8."""
    texts = ["the café", "crêpes 🙂", "東京"]
    if hidden:
        texts += ["", "café café", "naïve", "\U0001F9EC DNA"]
    cases = [(f"the ids of {t!r}", reference_encode(t, merges)) for t in texts]
    cases.append(("half of 'é', which is not valid UTF-8", [0xC3]))
    if hidden:
        cases.append(("half an emoji, then 'a'", [0xF0, 0x9F, ord("a")]))
    return cases


def check_fixed_decode(fn: Callable, merges: Mapping[tuple[int, int], int], vocab: Mapping[int, bytes],
                       name: str = "fixed_decode", *, hidden: bool = False) -> None:
    """Exercise 8b: the learner's fixed decode(ids, vocab) against the reference."""
    vocab = {int(i): bytes(b) for i, b in vocab.items()}
    cases = _decode_cases(merges, vocab, hidden)
    for label, ids in cases:
        shown = f"{name}({_short(ids, 40)}, vocab) ({label})"
        try:
            got = call(name, fn, list(ids), dict(vocab))
        except NotAttempted:
            raise
        except CheckFailed as err:
            hint = ("decode with errors='replace': ids from a model need not be valid UTF-8, and a decoder must not crash on them"
                    if "UnicodeDecodeError" in err.problem else None)
            raise CheckFailed(name, err.problem, hint) from None
        if not isinstance(got, str):
            raise CheckFailed(name, f"expected a string from {shown}, got {_short(got)}.",
                              "end with bytes.decode('utf-8', errors='replace'), which makes a str")
        want = reference_decode(ids, vocab)
        if got != want:
            for description, mistake in _DECODE_MISTAKES.items():
                if got == mistake(ids, vocab) != want:
                    raise CheckFailed(name, f"{shown} returned {got!r}, which is not right.", f"it looks like you {description}.")
            raise CheckFailed(name, f"{shown} returned {got!r}, expected {want!r}.",
                              "b''.join(vocab[i] for i in ids).decode('utf-8', errors='replace')")
    passed(name, f"{len(cases)} cases")


# --- exercise 9: training -----------------------------------------------------------------------------


_TRAIN_MISTAKES = {
    "broke ties by taking the pair seen first in the text (Counter.most_common does that): among equally frequent "
    "pairs take the smallest (left id, right id)": dict(ties="first"),
    "broke ties by taking the largest pair: among equally frequent pairs take the smallest (left id, right id)":
        dict(ties="largest"),
    "started from ord() of each character: start from the UTF-8 bytes, text.encode('utf-8')": dict(units="chars"),
    "kept merging pairs that occur only once: stop when the most frequent pair occurs fewer than 2 times": dict(min_count=1),
    "counted the pairs only once, before the first merge: count again after every merge, because each merge "
    "changes the pairs (and makes new ones with the new id)": dict(recount=False),
    "numbered the new tokens from 257: the first merge makes id 256": dict(first_id=N_BYTES + 1),
    "numbered the new tokens from 255: ids 0..255 are the bytes, so the first merge makes id 256": dict(first_id=N_BYTES - 1),
}

_TRAIN_CASES = [("bcab bcab", 3), ("a rose is a rose is a rose", 8), ("aaaaaa", 3), ("crème brûlée crème brûlée", 6)]
_TRAIN_HIDDEN_CASES = [("xyz", 4), ("", 3), ("hug pug hugs pun bun hugs", 10), ("zzzz yyyy zzzz", 5),
                       ("東京 東京 京都", 4), ("the rain in spain stays mainly in the plain", 15)]


def _as_merges(name: str, value: Any, shown: str) -> list[tuple[int, int]]:
    if value is None:
        raise CheckFailed(name, f"got None when called as {shown}: did you forget to `return` the merges?")
    if isinstance(value, dict):  # {pair: new id} in the order learned is fine too
        value = list(value)
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(i, int) and not isinstance(i, bool) for i in p)
        for p in value)
    if not ok:
        raise CheckFailed(name, f"expected a list of pairs of ints such as [(101, 32), (256, 116)] when called as {shown}, "
                          f"got {_short(value)}.")
    return [(int(a), int(b)) for a, b in value]


def check_train(fn: Callable, name: str = "train_bpe", *, hidden: bool = False) -> None:
    """The learner's train_bpe(text, n_merges) -> list of merged pairs, against the reference."""
    cases = _TRAIN_HIDDEN_CASES if hidden else _TRAIN_CASES
    for text, n in cases:
        shown = f"{name}({text!r}, {n})"
        got = _as_merges(name, call(name, fn, text, n), shown)
        want = reference_train(text, n)
        if got == want:
            continue
        for description, flags in _TRAIN_MISTAKES.items():
            if got == reference_train(text, n, **flags) != want:
                raise CheckFailed(name, f"{shown} returned {_short(got, 80)}, which is not right.", f"it looks like you {description}.")
        first = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise CheckFailed(name, f"{shown} returned {_short(got, 80)}, expected {_short(want, 80)} "
                          f"(the first {first} merges agree).",
                          "count all pairs, take the most frequent (ties: the smallest pair of ids), stop if it occurs "
                          "fewer than 2 times, merge it everywhere with the next id (256, 257, ...), repeat")
    passed(name, f"{len(cases)} cases")
