"""Checks for the lesson 05 exercises (tokens and byte-pair encoding): reference functions, mistake
tables and one check per exercise.

The references are written here from scratch (a full recount of the pairs for every merge), and the
tests check them against `course_lib.tokenizers.BPETokenizer`.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Mapping, Sequence

from .core import CheckFailed, NotAttempted, Seals, call, check_all, passed
from .helpers import short

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
        present = [p for p in set(zip(ids, ids[1:], strict=False)) if p in merges]
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


def _count_pairs(ids: Sequence[int]) -> Counter:
    return Counter(zip(ids, ids[1:], strict=False))


def _count_pairs_without_overlaps(ids: Sequence[int]) -> Counter:
    """Pairs counted as str.count counts a substring: an occurrence that overlaps the previous one of the
    same pair is skipped (only equal neighbours can overlap: "aaaa" has (a, a) twice, not three times)."""
    counts: Counter = Counter()
    free_from: dict = {}  # pair -> the first position where its next occurrence may start
    for i, pair in enumerate(zip(ids, ids[1:], strict=False)):
        if i >= free_from.get(pair, 0):
            counts[pair] += 1
            free_from[pair] = i + 2
    return counts


def reference_train(text: str, n_merges: int, *, ties: str = "smallest", units: str = "bytes", min_count: int = 2,
                    recount: bool = True, overlaps: bool = True, first_id: int = N_BYTES) -> list[tuple[int, int]]:
    """BPE training with a full recount per merge; the keyword arguments switch on the usual slips.

    ties: "smallest" (right: the smallest (left, right) pair of ids), "first" (the pair seen first in
    the text, as Counter.most_common does) or "largest"; units: "bytes" (right) or "chars" (ord of each
    character); min_count: stop when the best pair occurs fewer times (2 is right); recount=False keeps
    the counts of the first step; overlaps=False counts a pair of equal neighbours as str.count would ("aaa" has one
    (a, a)); first_id: the id of the first merge (256 is right).
    """
    count = _count_pairs if overlaps else _count_pairs_without_overlaps
    ids = list(text.encode("utf-8")) if units == "bytes" else [ord(c) for c in text]
    first_counts = count(ids)
    merges: list[tuple[int, int]] = []
    for k in range(n_merges):
        counts = count(ids) if recount else Counter({p: c for p, c in first_counts.items() if p not in merges})
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
# The answers of exercises 1-3, 5, 6 and 10, and the values of the mistakes their hints name, kept as seals
# (see core.Seals), written by `course seal lesson05` from solutions/seals/lesson05.py. Token lists are
# sealed as their tokens joined with "|", GPT-2's chunks as the repr of their list.

SEALS = Seals({
    "count_wo": (None, "7940447e22718a741861", {}),
    "count_ow": (None, "1ed83308ad7ce58547de", {}),
    "count_aa": (None, "f394a93e8c6737fa1efb", {
        "counted non-overlapping occurrences (as str.count does): BPE counts every pair of neighbours, and 'aaaa' has "
        "one at positions 0-1, one at 1-2 and one at 2-3":
            "fa3f2af0fea793f33173",
        "counted the letters: count the pairs of neighbours": "949b8ce574d31de38e68",
    }),
    "first_merge": (None, "49fc4a9d1444ff7e3fbc", {
        "took the pair that comes first in the text: 'wo' and 'ow' both occur 3 times, and the tie goes to the pair "
        "with the smaller byte values ('o' is 111, 'w' is 119)":
            "1e6424300e9a063848f1",
    }),
    "after_merge": (None, "d8e7e2fd66aff5c4095f", {
        "merged ('w', 'o'): the tie goes to ('o', 'w') (see first_merge)": "106f785d342dabf4f9f8",
        "dropped the first 'w': a symbol that is not part of a merged pair stays as a token of its own":
            "6104fe140ea64ec6db20",
    }),
    "compressed": (None, "c82767ed0261bf292869", {
        "broke the tie between 'Zb' and 'bZ' by taking the pair that comes first in the text: among equally frequent "
        "pairs take the one whose first symbol is older, and b (an original letter) is older than Z (a new symbol)":
            "467fcc0ae97fcafa60c8",
        "stopped after one merge: after aa -> Z, a pair still occurs twice": "eacd2088a2501a5fd57d",
        "kept merging a pair that occurs only once: stop when no pair occurs at least twice": "de72e1cc91974eb5e813",
    }),
    "n_rules": (None, "6dda5e9bb6975717ad17", {
        "counted a merge of a pair that occurs only once: stop when no pair occurs at least twice":
            "9dbc6f0bf9b4ed5f7361",
        "stopped after one merge: after aa -> Z, a pair still occurs twice": "2a12202065298f2efffe",
    }),
    "decoded": (None, "a309515174537574c4ed", {
        "undid the rules in the order they were made (Z first): the Y and Z that X expands into are then never "
        "replaced; undo the newest rule (X) first":
            "6addf496e4292cda8e5c",
        "stopped after undoing X: Y and Z still stand for pairs": "915f25911f8a707a96c4",
        "stopped after undoing X and Y: Z still stands for aa": "ab214fd0e7961bc6be3a",
    }),
    "tokens_lower": (None, "05ffb7669aa114ff784c", {
        "merged from left to right (or took the longest known token first): merges are applied in the order they were "
        "learned, and w + er (merge 2) comes before l + o (merge 3) and lo + w (merge 4)":
            "cf63e916fb126139474a",
        "stopped after the first merge: keep applying merges, in the order learned, while any of them applies":
            "c25474da4f9a333246a6",
    }),
    "tokens_lowest": (None, "9d110755970eebba1dda", {
        "stopped before the last merge: once s + t has made 'st', e + st (merge 6) applies": "990765eb1801c7f93af1",
    }),
    "gpt2_merges": (None, "dac445b347db82cf5897", {
        "forgot the special token: 256 bytes + merges + 1 special token = 50,257": "3bd25dea20beb654843f",
        "gave the vocabulary size: subtract the 256 bytes and the one special token": "d3dbf4ee326010551ecb",
        "subtracted only the special token: the 256 byte tokens are not merges either": "e80ba89c5c1ff90b961b",
    }),
    "id_of_merge_10": (None, "b325820167695f5ea766", {
        "counted the merges from 0: the first merge gets id 256 + 0 = 256, so the tenth gets 256 + 9":
            "af47683a1ab9ffa90e4b",
        "forgot that ids 0..255 are taken by the bytes": "495939afa1e1fc35abda",
        "forgot that ids 0..255 are taken by the bytes (and counted from 1)": "57028fd892509de08c4d",
    }),
    "naive_bytes": (None, "5b4049969d61421f6832", {
        "counted characters: a byte-level tokenizer with no merges makes one token per byte, and 'ï' takes two bytes "
        "in UTF-8":
            "16bf58d53ea19c6229a9",
    }),
    "chunks": (None, "7ab5a15b97f2c9c747bb", {
        "split at the spaces only: the pattern also cuts letters, numbers and other symbols apart (' ?\\p{L}+', ' "
        "?\\p{N}+', ' ?[^\\s\\p{L}\\p{N}]+')":
            "28d699d6720c2c9bb578",
        "kept '12.50' together: '.' is not a number (\\p{N}), so it is a chunk between the two runs of digits":
            "605a17514d8a016fbe27",
        "gave the space before '$' a chunk of its own: every class may take one space in front (' ?'), whatever "
        "follows it":
            "b7708f9f5351f323e7ba",
        "left the contraction in the word: GPT-2 cuts 's 't 're 've 'm 'll 'd off as chunks of their own":
            "aac4c0df0e01f827403f",
        "split the contraction: \"'ll\" is one of GPT-2's contractions ('s 't 're 've 'm 'll 'd), one chunk":
            "7fd516e6e84d32b2e757",
        "put each space after a word: GPT-2 gives a space to the chunk that follows it (' pay', not 'pay ')":
            "538cb8a3723e7fd328bd",
        "kept '$' with the digits: '$' is neither a letter nor a number, so it goes in a chunk of symbols":
            "d5ef375950567be89554",
        "joined '50' and '!': digits and other symbols are different classes, each a chunk of its own":
            "520d573dc771f333767f",
    }),
    "stored": (None, "fd201bafdeca4b4ebc45", {
        "mapped only the space: 'è' is two bytes in UTF-8, and GPT-2's files write each byte as a character of its own":
            "d73bc15ba817789be100",
        "left the space as it is: byte 32 is not printable, so GPT-2 writes it as 'Ġ'": "ca2e641e44f499df6ddd",
    }),
    "eot_count": (None, "68ad4b58ab806aa46499", {
        "counted only the app's own marker: allowed_special='all' turns every '<|endoftext|>' in the text into the "
        "special id, the one the user typed as well":
            "093323011bc226cd85f7",
    }),
})


def _tokens_text(name: str, value: Any) -> str:
    """A list of token strings as one text, 'lo|wer', for sealing; a clear failure for anything else."""
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable?")
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise CheckFailed(name, f"expected a list of token strings such as ['lo', 'w'], got {short(value)}.")
    if any(t == "" for t in value):
        raise CheckFailed(name, f"{short(list(value))} holds an empty string: every token stands for at least one "
                                "character.")
    return "|".join(value)


def _check_tokens(name: str, value: Any, hint: str) -> None:
    # a wrong answer is quoted as the learner's list, not as the joined text the seal is made of
    SEALS.check(name, _tokens_text(name, value), "text", hint, shown=short(list(value), 80))


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
    raise CheckFailed(name, "expected the pair as a string such as 'ab' or a tuple such as ('a', 'b'), got "
                            f"{short(value)}.")


# --- exercises 1-3: counting, one merge, compression by hand ------------------------------------------


def check_pair_counts(count_wo: Any, count_ow: Any, count_aa: Any) -> None:
    """Exercise 1: pairs of neighbours counted by hand, overlaps included."""
    hint = "write the text out and count every pair of neighbours: positions 0-1, 1-2, 2-3, ..."
    check_all(
        lambda: SEALS.check("count_wo", count_wo, "count", hint),
        lambda: SEALS.check("count_ow", count_ow, "count", hint),
        lambda: SEALS.check("count_aa", count_aa, "count", hint),
    )


def check_one_merge(first_merge: Any, after_merge: Any) -> None:
    """Exercise 2: the first merge on "wowowow" (with the tie rule) and the tokens after it."""
    check_all(
        lambda: SEALS.check("first_merge", _pair_text("first_merge", first_merge), "text",
                            "the most frequent pair; among equally frequent pairs, the one with the smaller byte "
                            "values"),
        lambda: _check_tokens("after_merge", after_merge,
                              "replace the merged pair everywhere, left to right; every other letter stays a token"),
    )


def check_compression(compressed: Any, n_rules: Any, decoded: Any) -> None:
    """Exercise 3: aabaabaac compressed by hand until no pair occurs twice, and XYa decoded."""
    check_all(
        lambda: SEALS.check("compressed", compressed, "text",
                            "count the pairs, replace the most frequent by Z; count again, replace by Y; ... until no "
                            "pair occurs twice"),
        lambda: SEALS.check("n_rules", n_rules, "count", "one rule per replacement you made"),
        lambda: SEALS.check("decoded", decoded, "text", "undo the rules newest first: X, then Y, then Z"),
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
    "forgot to skip the second symbol of a merged pair: after a match, move on by two positions, not one":
        _merge_no_skip,
    "replaced only the first occurrence: replace every occurrence of the pair": _merge_first_only,
    "dropped the last symbol when it is not part of a pair: the loop must also copy the last element":
        _merge_drops_last,
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
        raise CheckFailed(name, f"expected a list of ints when called as {shown}, got {short(value)}.")
    return list(value)


def _compare_ids(name: str, got: list[int], want: list[int], wrong: Mapping[str, list[int]], shown: str,
                 hint: str) -> None:
    if got == want:
        return
    for description, ids in wrong.items():
        if ids != want and got == ids:
            raise CheckFailed(name, f"{shown} returned {short(got, 80)}, which is not right.",
                              f"it looks like you {description}.")
    raise CheckFailed(name, f"{shown} returned {short(got, 80)}, expected {short(want, 80)}.", hint)


def check_merge_pair(fn: Callable, name: str = "merge_pair", *, hidden: bool = False) -> None:
    """The learner's merge_pair(ids, pair, new_id) against the reference, naming the usual slips."""
    cases = _MERGE_HIDDEN_CASES if hidden else _MERGE_CASES
    for ids, pair, new_id in cases:
        given = list(ids)
        shown = f"{name}({ids}, {pair}, {new_id})"
        got = _as_ids(name, call(name, fn, given, pair, new_id), shown)
        wrong = {d: m(list(ids), pair, new_id) for d, m in _MERGE_MISTAKES.items()}
        _compare_ids(name, got, reference_merge_pair(ids, pair, new_id), wrong, shown,
                     "walk along the list: where the pair starts, append new_id and jump two places; otherwise copy "
                     "one element")
        if given != list(ids):
            raise CheckFailed(name, f"{shown} changed the list it was given (to {short(given)}).",
                              "build a new list (out = [] ... out.append(...)) and leave the input as it was")
    passed(name, f"{len(cases)} cases")


# --- exercise 5 and 6: by hand ------------------------------------------------------------------------


def check_encode_by_hand(tokens_lower: Any, tokens_lowest: Any) -> None:
    """Exercise 5: "lower" and "lowest" encoded by hand with six given merges."""
    hint = "start from single letters; apply merge 1 everywhere it fits, then merge 2, ... in the order given"
    check_all(
        lambda: _check_tokens("tokens_lower", tokens_lower, hint),
        lambda: _check_tokens("tokens_lowest", tokens_lowest, hint),
    )


def check_vocab_arithmetic(gpt2_merges: Any, id_of_merge_10: Any, naive_bytes: Any) -> None:
    """Exercise 6: how a byte-level vocabulary is laid out, and how many bytes a word takes."""
    check_all(
        lambda: SEALS.check("gpt2_merges", gpt2_merges, "count", "vocabulary = 256 bytes + merges + special tokens"),
        lambda: SEALS.check("id_of_merge_10", id_of_merge_10, "count", "merge k, counting from 0, makes id 256 + k"),
        lambda: SEALS.check("naive_bytes", naive_bytes, "count",
                            "write out the UTF-8 bytes of each character: list('naïve'.encode('utf-8'))"),
    )


# --- exercise 7: encode -------------------------------------------------------------------------------


def _letter_merges(pairs: Sequence[tuple[str, str]]) -> dict[tuple[int, int], int]:
    """A merge table written as letter pairs, in the order learned, as ids: [("e", "r"), ("w", "er")] -> ..."""
    ids = {chr(b): b for b in range(128)}
    merges = {}
    for k, (a, b) in enumerate(pairs):
        merges[(ids[a], ids[b])] = N_BYTES + k
        ids[a + b] = N_BYTES + k
    return merges


def _lower_merges() -> dict[tuple[int, int], int]:
    """The six merges of exercise 5 (e+r, w+er, l+o, lo+w, s+t, e+st) as ids."""
    return _letter_merges([("e", "r"), ("w", "er"), ("l", "o"), ("lo", "w"), ("s", "t"), ("e", "st")])


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


def _encode_most_frequent(text, merges):
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        counts = Counter(p for p in zip(ids, ids[1:], strict=False) if p in merges)  # the most frequent first
        if not counts:
            break
        pair = max(counts, key=counts.get)
        ids = reference_merge_pair(ids, pair, merges[pair])
    return ids


def _encode_latest_first(text, merges):
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        present = [p for p in zip(ids, ids[1:], strict=False) if p in merges]
        if not present:
            break
        pair = max(present, key=lambda p: merges[p])  # the largest new id: the merge learned last
        ids = reference_merge_pair(ids, pair, merges[pair])
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
    present = [p for p in zip(ids, ids[1:], strict=False) if p in merges]
    if present:
        pair = min(present, key=lambda p: merges[p])
        ids = reference_merge_pair(ids, pair, merges[pair])
    return ids


_ENCODE_MISTAKES = {
    "merged the first known pair from the left each time: apply the merges in the order they were learned "
    "(the smallest new id first), whatever their place in the text": _encode_text_order,
    "merged the known pair that occurs most often first: that is how training chooses a merge, but encoding "
    "applies the learned merges in the order they were learned (the smallest new id first)": _encode_most_frequent,
    "merged the pair learned last (the largest new id) first: apply the merges in the order they were learned, "
    "the smallest new id first": _encode_latest_first,
    "used ord() of each character: start from the UTF-8 bytes, text.encode('utf-8'), so 'é' is two ids, 195 and 169":
        _encode_chars,
    "replaced only the first occurrence of each pair: a merge applies everywhere its pair occurs":
        _encode_first_occurrence,
    "stopped after one merge: keep going while any learned pair is present": _encode_one_merge,
}

# Hand-made merge tables in which the order of the merges matters (in a table learned from a text, the
# order rarely changes the result, so these catch encoders that ignore it). Not exercise 5's table.
_BANANA = [("b", "a"), ("ba", "n"), ("n", "a"), ("a", "na")]
_TOKENS = [("e", "n"), ("k", "en"), ("t", "o"), ("to", "k"), ("en", "s")]


def _encode_cases(hidden: bool) -> list[tuple[str, dict]]:
    rain = _trained_merges("the rain in spain stays mainly in the plain", 12)
    banana, tokens = _letter_merges(_BANANA), _letter_merges(_TOKENS)
    cases = [("the rain in spain", rain), ("banana", banana), ("tokens", tokens), ("née", tokens)]
    if hidden:
        lower = _lower_merges()
        cafe = _trained_merges("café, café, crème brûlée, café", 10)
        cases += [("", rain), ("a", rain), ("mainly plain rain 🙂", rain), ("café crème", cafe),
                  ("lowerlowestlower", lower), ("bananas and tokens", banana), ("tokens, token", tokens)]
    return cases


def _diagnose(name: str, results: Sequence[tuple[str, Any, Any, Mapping[str, Any]]], hint: str,
              detail: Callable[[Any, Any], str] | None = None) -> None:
    """Name the mistake behind a learner's wrong results, never printing an expected value.

    `results` holds, for every case, (how the call looked, the learner's result, the right result,
    {mistake: that mistake's result}). A mistake is named only if it gives the learner's results on
    every case, so that two mistakes that agree on one case are told apart by the others."""
    wrong = [(shown, got, want) for shown, got, want, _ in results if got != want]
    if not wrong:
        return
    shown, got, want = wrong[0]
    for description in results[0][3]:
        if all(outs[description] == got_i for _, got_i, _, outs in results):
            raise CheckFailed(name, f"{shown} returned {short(got, 80)}, which is not right.",
                              f"it looks like you {description}.")
    extra = f" {detail(got, want)}" if detail else ""
    raise CheckFailed(name, f"{shown} returned {short(got, 80)}, which is not right{extra}.", hint)


def check_encode(fn: Callable, name: str = "encode", *, hidden: bool = False) -> None:
    """The learner's encode(text, merges) against the reference, naming the usual mistakes."""
    cases = _encode_cases(hidden)
    results = []
    for text, merges in cases:
        shown = f"{name}({text!r}, merges)"
        got = _as_ids(name, call(name, fn, text, dict(merges)), shown)
        mistakes = {d: m(text, merges) for d, m in _ENCODE_MISTAKES.items()}
        results.append((shown, got, reference_encode(text, merges), mistakes))
    _diagnose(name, results, "start from list(text.encode('utf-8')); then, while a learned pair is present, merge the "
                             "one with the smallest new id everywhere")
    passed(name, f"{len(cases)} cases")


# --- exercise 8: the decode bug -----------------------------------------------------------------------

# The small tokenizer of exercises 7 and 8: the 30 merges BPE learns from this text.
CAFE = ("the café near the station serves crêpes and coffee. the café opens early. "
        "we met at the café, ordered two crêpes, and stayed at the café until noon.")
CAFE_MERGES = 30


def cafe_merges() -> dict[tuple[int, int], int]:
    """The 30 merges BPE learns from CAFE: {(left id, right id): new id}, in the order learned."""
    return _trained_merges(CAFE, CAFE_MERGES)


def cafe_vocab() -> dict[int, bytes]:
    """Every id of the CAFE tokenizer (the 256 bytes and the 30 merges) -> the bytes it stands for."""
    vocab = {i: bytes([i]) for i in range(N_BYTES)}
    for (a, b), new_id in cafe_merges().items():
        vocab[new_id] = vocab[a] + vocab[b]
    return vocab


def cafe_encode(text: str) -> list[int]:
    """The ids of `text` with the CAFE tokenizer's merges (to try strings in exercise 8)."""
    return reference_encode(text, cafe_merges())


def check_broken_example(value: Any, merges: Mapping[tuple[int, int], int], vocab: Mapping[int, bytes]) -> None:
    """Exercise 8a: a string that `buggy_decode` does not get back."""
    name = "broken_example"
    if value is None:
        raise CheckFailed(name, "got None: did you forget to assign the variable?")
    if not isinstance(value, str):
        raise CheckFailed(name, f"expected a string, got {type(value).__name__} ({short(value)}).")
    ids = reference_encode(value, merges)
    if buggy_decode(ids, vocab) == value:
        multibyte = sorted({ch for ch in value if len(ch.encode("utf-8", "surrogatepass")) > 1})
        if multibyte:
            named = " and ".join(repr(ch) for ch in multibyte[:3])
            one = len(multibyte) == 1
            hint = (f"{named} take{'s' if one else ''} more than one byte, but this tokenizer keeps "
                    f"{'it' if one else 'each'} whole inside one token (it learned those bytes together from CAFE), "
                    "so decoding token by token still works. Pick a character whose bytes end up in different "
                    "tokens: print([vocab[i] for i in cafe_encode(s)]) shows the pieces")
        else:
            hint = ("buggy_decode only goes wrong when the bytes of one character are split over two or more "
                    "tokens, so the string needs a character that takes more than one byte in UTF-8 (an ASCII "
                    "letter takes one)")
        raise CheckFailed(name, f"buggy_decode gives {short(value)} back correctly.", hint)
    passed(name, "buggy_decode garbles it")


def _decode_ignore(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="ignore")


def _decode_latin1(ids, vocab):
    return b"".join(vocab[i] for i in ids).decode("latin-1")


def _decode_one_replacement(ids, vocab):
    try:
        return b"".join(vocab[i] for i in ids).decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd"  # one replacement character for the whole text


_DECODE_MISTAKES = {
    "still decoded token by token (the bug): join the bytes of all tokens first, then decode once": buggy_decode,
    "used errors='ignore', which silently drops bad bytes: use errors='replace', so that they show as '\ufffd'":
        _decode_ignore,
    "decoded as latin-1: the bytes are UTF-8": _decode_latin1,
    "returned a single '\ufffd' for the whole text when its bytes are not valid UTF-8: errors='replace' puts "
    "'\ufffd' only where the bad bytes are and keeps the valid text around them": _decode_one_replacement,
}


def _decode_cases(merges, vocab, hidden: bool) -> list[tuple[str, list[int]]]:
    """(what the ids are, ids): the ids of some texts, and ids whose bytes are not valid UTF-8. The labels
    never spell a text out, so that a failure message does not hand over a string for broken_example."""
    texts = [("a short sentence", "the café"), ("a word with an accent and an emoji", "crêpes 🙂"),
             ("two Chinese characters", "東京")]
    if hidden:
        texts += [("no ids at all", ""), ("two words", "café café"), ("a word with a diaeresis", "naïve"),
                  ("a rare emoji and a word", "\U0001F9EC DNA")]
    cases = [(f"the ids of {label}", reference_encode(t, merges)) for label, t in texts]
    cases.append(("a lone first byte of a two-byte character: not valid UTF-8", [0xC3]))
    cases.append(("a sentence with one stray byte in the middle", reference_encode("the ", merges) + [0xE6]
                  + reference_encode(" station", merges)))
    if hidden:
        cases.append(("half an emoji, then 'a'", [0xF0, 0x9F, ord("a")]))
        cases.append(("two stray bytes between words", reference_encode("we met", merges) + [0xA9, 0xFF]
                      + reference_encode(" at noon", merges)))
    return cases


def check_fixed_decode(fn: Callable, merges: Mapping[tuple[int, int], int], vocab: Mapping[int, bytes],
                       name: str = "fixed_decode", *, hidden: bool = False) -> None:
    """Exercise 8b: the learner's fixed decode(ids, vocab) against the reference."""
    vocab = {int(i): bytes(b) for i, b in vocab.items()}
    cases = _decode_cases(merges, vocab, hidden)
    results = []
    for label, ids in cases:
        shown = f"{name}({short(ids, 40)}, vocab) ({label})"
        try:
            got = call(name, fn, list(ids), dict(vocab))
        except NotAttempted:
            raise
        except CheckFailed as err:
            hint = ("decode with errors='replace': ids from a model need not be valid UTF-8, and a decoder must not "
                    "crash on them"
                    if "UnicodeDecodeError" in err.problem else None)
            raise CheckFailed(name, err.problem, hint) from None
        if not isinstance(got, str):
            raise CheckFailed(name, f"expected a string from {shown}, got {short(got)}.",
                              "end with bytes.decode('utf-8', errors='replace'), which makes a str")
        mistakes = {d: m(ids, vocab) for d, m in _DECODE_MISTAKES.items()}
        results.append((shown, got, reference_decode(ids, vocab), mistakes))
    _diagnose(name, results, "b''.join(vocab[i] for i in ids).decode('utf-8', errors='replace')",
              detail=lambda got, want: "(not the text these ids spell)")
    passed(name, f"{len(cases)} cases")


def check_decode_bug(broken_example: Any, fixed_decode: Callable, merges: Mapping[tuple[int, int], int],
                     vocab: Mapping[int, bytes]) -> None:
    """Exercise 8, both parts: each earns its share, and the decoder is checked even when the example is wrong."""
    check_all(
        lambda: check_broken_example(broken_example, merges, vocab),
        lambda: check_fixed_decode(fixed_decode, merges, vocab),
    )


# --- exercise 9: training -----------------------------------------------------------------------------


_TRAIN_MISTAKES = {
    "broke ties by taking the pair seen first in the text (Counter.most_common does that): among equally frequent "
    "pairs take the smallest (left id, right id)": dict(ties="first"),
    "broke ties by taking the largest pair: among equally frequent pairs take the smallest (left id, right id)":
        dict(ties="largest"),
    "started from ord() of each character: start from the UTF-8 bytes, text.encode('utf-8')": dict(units="chars"),
    "kept merging pairs that occur only once: stop when the most frequent pair occurs fewer than 2 times":
        dict(min_count=1),
    "counted the pairs only once, before the first merge: count again after every merge, because each merge "
    "changes the pairs (and makes new ones with the new id)": dict(recount=False),
    "counted a pair of equal neighbours without overlaps (as str.count does, 'aaa' as one (97, 97)): BPE counts "
    "every pair of neighbours, so 'aaa' has (97, 97) twice, at 0-1 and at 1-2": dict(overlaps=False),
    "numbered the new tokens from 257: the first merge makes id 256": dict(first_id=N_BYTES + 1),
    "numbered the new tokens from 255: ids 0..255 are the bytes, so the first merge makes id 256":
        dict(first_id=N_BYTES - 1),
}

_TRAIN_CASES = [("bcab bcab", 3), ("a rose is a rose is a rose", 8), ("aaaaaa", 3), ("crème brûlée crème brûlée", 6)]
_TRAIN_HIDDEN_CASES = [("xyz", 4), ("", 3), ("hug pug hugs pun bun hugs", 10), ("zzzz yyyy zzzz", 5),
                       ("東京 東京 京都", 4), ("the rain in spain stays mainly in the plain", 15),
                       ("hmmm mmm hm hm", 3)]  # the last: counting without overlaps learns other merges


def _as_merges(name: str, value: Any, shown: str) -> list[tuple[int, int]]:
    if value is None:
        raise CheckFailed(name, f"got None when called as {shown}: did you forget to `return` the merges?")
    if isinstance(value, dict):  # {pair: new id} in the order learned is fine too
        value = list(value)
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(i, int) and not isinstance(i, bool) for i in p)
        for p in value)
    if not ok:
        raise CheckFailed(name, "expected a list of pairs of ints such as [(101, 32), (256, 116)] when called as "
                                f"{shown}, "
                          f"got {short(value)}.")
    return [(int(a), int(b)) for a, b in value]


def _merges_agree(got: list, want: list) -> str:
    first = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    return f"(the first difference is at merge {first + 1})"


def check_train(fn: Callable, name: str = "train_bpe", *, hidden: bool = False) -> None:
    """The learner's train_bpe(text, n_merges) -> list of merged pairs, against the reference."""
    cases = _TRAIN_HIDDEN_CASES if hidden else _TRAIN_CASES
    results = []
    for text, n in cases:
        shown = f"{name}({text!r}, {n})"
        got = _as_merges(name, call(name, fn, text, n), shown)
        results.append((shown, got, reference_train(text, n),
                        {d: reference_train(text, n, **flags) for d, flags in _TRAIN_MISTAKES.items()}))
    _diagnose(name, results, "count all pairs, take the most frequent (ties: the smallest pair of ids), stop if it "
                             "occurs fewer than 2 times, merge it everywhere with the next id (256, 257, ...), repeat",
              detail=_merges_agree)
    passed(name, f"{len(cases)} cases")


# --- exercise 10: what GPT-2 adds around BPE --------------------------------------------------------------


def check_gpt2_additions(chunks: Any, stored: Any, eot_count: Any) -> None:
    """Exercise 10: GPT-2's pre-tokenization chunks, its byte-to-unicode file format, and a typed special token."""

    def check_chunks() -> None:
        if chunks is None:
            raise CheckFailed("chunks", "got None: did you forget to assign the variable?")
        listed = isinstance(chunks, (list, tuple)) and all(isinstance(c, str) for c in chunks)
        if not listed:
            raise CheckFailed("chunks", f"expected a list of strings such as ['She', ' pay'], got {short(chunks)}.")
        if "".join(chunks) != "She'll pay $12.50!":
            raise CheckFailed("chunks", f"{short(list(chunks), 80)} does not spell the text: the chunks, joined, "
                              "must give back \"She'll pay $12.50!\" exactly, spaces included.")
        SEALS.check("chunks", repr(list(chunks)), "text",
                    "go left to right: a contraction, or a run of letters, of numbers or of other symbols, each "
                    "taking at most one space in front of it", shown=short(list(chunks), 80))

    def check_stored() -> None:
        SEALS.check("stored", stored, "text",
                    "write out the UTF-8 bytes of ' crème' and map each byte with bytes_to_unicode's rule")

    def check_eot() -> None:
        SEALS.check("eot_count", eot_count, "count",
                    "look for '<|endoftext|>' in the whole prompt, the user's text included")

    check_all(check_chunks, check_stored, check_eot)
