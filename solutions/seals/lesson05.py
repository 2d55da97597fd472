"""The plain values behind the seals of course_lib/checks/lesson05.py, the hand-worked answers of
solutions/05_*.ipynb and the values of the mistakes their hints name.

`course seal lesson05` seals them into that module's SEALS table: edit a value here, then run it;
never edit the table by hand. These are answers: this file stays with the solutions, out of the
course_lib package a learner installs (see course_lib/checks/core.py and course_grader/seal.py).

VALUES = {name: (decimals, answer, {mistake: the value it gives})}; decimals None: compared exactly.
"""

VALUES = {
    "count_wo": (None, 3, {}),
    "count_ow": (None, 3, {}),
    "count_aa": (None, 3, {
        "counted non-overlapping occurrences (as str.count does): BPE counts every pair of neighbours, and 'aaaa' has "
        "one at positions 0-1, one at 1-2 and one at 2-3":
            2,
        "counted the letters: count the pairs of neighbours": 4,
    }),
    "first_merge": (None, "ow", {
        "took the pair that comes first in the text: 'wo' and 'ow' both occur 3 times, and the tie goes to the pair "
        "with the smaller byte values ('o' is 111, 'w' is 119)":
            "wo",
    }),
    "after_merge": (None, "w|ow|ow|ow", {
        "merged ('w', 'o'): the tie goes to ('o', 'w') (see first_merge)": "wo|wo|wo|w",
        "dropped the first 'w': a symbol that is not part of a merged pair stays as a token of its own": "ow|ow|ow",
    }),
    "compressed": (None, "ZYYc", {
        "broke the tie between 'Zb' and 'bZ' by taking the pair that comes first in the text: among equally frequent "
        "pairs take the one whose first symbol is older, and b (an original letter) is older than Z (a new symbol)":
            "YYZc",
        "stopped after one merge: after aa -> Z, a pair still occurs twice": "ZbZbZc",
        "kept merging a pair that occurs only once: stop when no pair occurs at least twice": "XYc",
    }),
    "n_rules": (None, 2, {
        "counted a merge of a pair that occurs only once: stop when no pair occurs at least twice": 3,
        "stopped after one merge: after aa -> Z, a pair still occurs twice": 1,
    }),
    "decoded": (None, "aabaaaaba", {
        "undid the rules in the order they were made (Z first): the Y and Z that X expands into are then never "
        "replaced; undo the newest rule (X) first":
            "YZZba",
        "stopped after undoing X: Y and Z still stand for pairs": "YZYa",
        "stopped after undoing X and Y: Z still stands for aa": "ZbZZba",
    }),
    "tokens_lower": (None, "lo|wer", {
        "merged from left to right (or took the longest known token first): merges are applied in the order they were "
        "learned, and w + er (merge 2) comes before l + o (merge 3) and lo + w (merge 4)":
            "low|er",
        "stopped after the first merge: keep applying merges, in the order learned, while any of them applies":
            "l|o|w|er",
    }),
    "tokens_lowest": (None, "low|est", {
        "stopped before the last merge: once s + t has made 'st', e + st (merge 6) applies": "low|e|st",
    }),
    "gpt2_merges": (None, 50000, {
        "forgot the special token: 256 bytes + merges + 1 special token = 50,257": 50001,
        "gave the vocabulary size: subtract the 256 bytes and the one special token": 50257,
        "subtracted only the special token: the 256 byte tokens are not merges either": 50256,
    }),
    "id_of_merge_10": (None, 265, {
        "counted the merges from 0: the first merge gets id 256 + 0 = 256, so the tenth gets 256 + 9": 266,
        "forgot that ids 0..255 are taken by the bytes": 9,
        "forgot that ids 0..255 are taken by the bytes (and counted from 1)": 10,
    }),
    "naive_bytes": (None, 6, {
        "counted characters: a byte-level tokenizer with no merges makes one token per byte, and 'ï' takes two bytes "
        "in UTF-8":
            5,
    }),
    "chunks": (None, "['She', \"'ll\", ' pay', ' $', '12', '.', '50', '!']", {
        "split at the spaces only: the pattern also cuts letters, numbers and other symbols apart (' ?\\p{L}+', ' "
        "?\\p{N}+', ' ?[^\\s\\p{L}\\p{N}]+')":
            "[\"She'll\", ' pay', ' $12.50!']",
        "kept '12.50' together: '.' is not a number (\\p{N}), so it is a chunk between the two runs of digits":
            "['She', \"'ll\", ' pay', ' $', '12.50', '!']",
        "gave the space before '$' a chunk of its own: every class may take one space in front (' ?'), whatever "
        "follows it":
            "['She', \"'ll\", ' pay', ' ', '$', '12', '.', '50', '!']",
        "left the contraction in the word: GPT-2 cuts 's 't 're 've 'm 'll 'd off as chunks of their own":
            "[\"She'll\", ' pay', ' $', '12', '.', '50', '!']",
        "split the contraction: \"'ll\" is one of GPT-2's contractions ('s 't 're 've 'm 'll 'd), one chunk":
            "['She', \"'\", 'll', ' pay', ' $', '12', '.', '50', '!']",
        "put each space after a word: GPT-2 gives a space to the chunk that follows it (' pay', not 'pay ')":
            "['She', \"'ll \", 'pay ', '$', '12', '.', '50', '!']",
        "kept '$' with the digits: '$' is neither a letter nor a number, so it goes in a chunk of symbols":
            "['She', \"'ll\", ' pay', ' $12', '.', '50', '!']",
        "joined '50' and '!': digits and other symbols are different classes, each a chunk of its own":
            "['She', \"'ll\", ' pay', ' $', '12', '.', '50!']",
    }),
    "stored": (None, "ĠcrÃ¨me", {
        "mapped only the space: 'è' is two bytes in UTF-8, and GPT-2's files write each byte as a character of its own":
            "Ġcrème",
        "left the space as it is: byte 32 is not printable, so GPT-2 writes it as 'Ġ'": "crÃ¨me",
    }),
    "eot_count": (None, 2, {
        "counted only the app's own marker: allowed_special='all' turns every '<|endoftext|>' in the text into the "
        "special id, the one the user typed as well":
            1,
    }),
}
