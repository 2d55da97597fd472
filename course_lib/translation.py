"""Lesson 10's translation task: a made-up language, generated from a grammar and a seed.

English-like sentences, subject-verb-object with an optional place at the end, are translated into
a made-up language with its own words and another word order:

    source:  DET [ADJ] NOUN  VERB  DET [ADJ] NOUN  [PREP DET [ADJ] NOUN]
    target:  NOUN [ADJ] DET ka  [NOUN [ADJ] DET PREP]  NOUN [ADJ] DET mo  VERB

Inside a noun phrase the order is reversed (noun, adjective, article), the verb goes to the end,
the place phrase moves between subject and object with its preposition AFTER the noun phrase (a
postposition), and two words with no source counterpart mark the roles: "ka" after the subject,
"mo" after the object. So a model must learn a vocabulary (every word has its own translation)
and a reordering (what to say next depends on the sentence's structure, not on the word at the
same position); cross-attention plots show where each target word looks.

    the big dog sees a small cat near the tall man
 -> kano grun lo ka toma vel lo ap miru pim na mo vidat

`translation_task()` draws distinct sentences with their translations and pads them into batches
for `training.train`; `translate(sentence)` gives the reference translation of any sentence of the
grammar.

Importing this module runs nothing.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from course_lib._validate import check_int

TRANSLATION_LEXICON: dict[str, dict[str, str]] = {
    "det": {"the": "lo", "a": "na"},
    "adj": {"big": "grun", "small": "pim", "red": "rosk", "tall": "vel", "happy": "jol", "quiet": "sut"},
    "noun": {
        "dog": "kano", "cat": "miru", "bird": "pita", "man": "toma", "woman": "suna",
        "child": "bimi", "teacher": "doka", "farmer": "gelo", "horse": "hipa", "fish": "piska",
    },
    "verb": {
        "sees": "vidat", "likes": "amat", "follows": "sekat", "helps": "jutat",
        "finds": "trovat", "calls": "vokat", "feeds": "nutrat", "watches": "spekat",
    },
    "prep": {"near": "ap", "behind": "pos", "with": "kun"},
}
SUBJECT_MARKER, OBJECT_MARKER = "ka", "mo"  # target-only words after the subject and the object
TRANSLATION_SPECIALS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2 in both vocabularies


def _noun_phrase(words: list[str], start: int) -> tuple[list[str], int]:
    """Parse DET [ADJ] NOUN at words[start:]; return its translation (NOUN [ADJ] DET) and the next index."""
    lex = TRANSLATION_LEXICON
    i = start
    if i >= len(words) or words[i] not in lex["det"]:
        raise ValueError(f"expected an article ({'/'.join(lex['det'])}) at word {i} of {' '.join(words)!r}")
    det = lex["det"][words[i]]
    i += 1
    adj = None
    if i < len(words) and words[i] in lex["adj"]:
        adj = lex["adj"][words[i]]
        i += 1
    if i >= len(words) or words[i] not in lex["noun"]:
        raise ValueError(f"expected a noun at word {i} of {' '.join(words)!r}")
    noun = lex["noun"][words[i]]
    return [noun] + ([adj] if adj else []) + [det], i + 1


def translate(sentence: str | list[str]) -> list[str]:
    """The reference translation of one source sentence (a string or a list of words).

    >>> " ".join(translate("the big dog sees a small cat near the tall man"))
    'kano grun lo ka toma vel lo ap miru pim na mo vidat'

    A sentence outside the grammar raises ValueError saying where it stopped making sense.
    """
    words = sentence.split() if isinstance(sentence, str) else list(sentence)
    lex = TRANSLATION_LEXICON
    subject, i = _noun_phrase(words, 0)
    if i >= len(words) or words[i] not in lex["verb"]:
        raise ValueError(f"expected a verb at word {i} of {' '.join(words)!r}")
    verb = lex["verb"][words[i]]
    obj, i = _noun_phrase(words, i + 1)
    place: list[str] = []
    if i < len(words):
        if words[i] not in lex["prep"]:
            raise ValueError(f"expected a preposition or the end at word {i} of {' '.join(words)!r}")
        prep = lex["prep"][words[i]]
        phrase, i = _noun_phrase(words, i + 1)
        place = phrase + [prep]
        if i != len(words):
            raise ValueError(f"unexpected words after the sentence's end in {' '.join(words)!r}")
    return subject + [SUBJECT_MARKER] + place + obj + [OBJECT_MARKER, verb]


def random_source_sentence(rng, p_adjective: float = 0.5, p_place: float = 0.5) -> list[str]:
    """One random sentence of the source grammar, drawn with `rng` (a `random.Random`)."""
    lex = {pos: sorted(words) for pos, words in TRANSLATION_LEXICON.items()}

    def noun_phrase() -> list[str]:
        adj = [rng.choice(lex["adj"])] if rng.random() < p_adjective else []
        return [rng.choice(lex["det"])] + adj + [rng.choice(lex["noun"])]

    words = noun_phrase() + [rng.choice(lex["verb"])] + noun_phrase()
    if rng.random() < p_place:
        words += [rng.choice(lex["prep"])] + noun_phrase()
    return words


@dataclass
class TranslationTask:
    """Sentence pairs and the two vocabularies of the translation task (see `translation_task`).

    Ids: 0 ``<pad>``, 1 ``<bos>``, 2 ``<eos>`` in both vocabularies, then the words in sorted order.
    """

    src_vocab: list[str]  # source id -> word
    tgt_vocab: list[str]  # target id -> word
    train: list[tuple[list[str], list[str]]]  # (source words, target words) pairs to learn from
    test: list[tuple[list[str], list[str]]]  # held-out pairs: no source sentence of them is in train
    pad_id: int = 0  # padding, in both vocabularies
    bos_id: int = 1  # start of a target sentence (the decoder's first input)
    eos_id: int = 2  # end of a target sentence (the decoder's last prediction)

    def __post_init__(self):
        self.src_index = {w: i for i, w in enumerate(self.src_vocab)}
        self.tgt_index = {w: i for i, w in enumerate(self.tgt_vocab)}

    def encode_src(self, words: list[str]) -> list[int]:
        """Source word ids (no <bos>/<eos>: the encoder sees the whole sentence at once)."""
        return [self._lookup(self.src_index, w, "source") for w in words]

    def encode_tgt(self, words: list[str]) -> list[int]:
        """<bos>, the target word ids, <eos>."""
        return [self.bos_id] + [self._lookup(self.tgt_index, w, "target") for w in words] + [self.eos_id]

    def decode_tgt(self, ids) -> list[str]:
        """Target ids back to words, dropping <bos> and <pad> and stopping at the first <eos>."""
        words = []
        for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
            if i == self.eos_id:
                break
            if i not in (self.bos_id, self.pad_id):
                words.append(self.tgt_vocab[i])
        return words

    @staticmethod
    def _lookup(index: dict[str, int], word: str, side: str) -> int:
        if word not in index:
            raise KeyError(f"{word!r} is not in the {side} vocabulary")
        return index[word]

    def batch(self, pairs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Pad a list of pairs into ``(src, tgt_in, tgt_out)``, LongTensors padded with `pad_id`.

        src ``(B, S)``: source ids. tgt_in ``(B, T)``: <bos> + target ids, the decoder's input (the
        target shifted right: teacher forcing). tgt_out ``(B, T)``: target ids + <eos>, what each
        position must predict. Train with ``ignore_index=pad_id`` so padding costs nothing.
        """
        if len(pairs) == 0:
            raise ValueError("batch needs at least one (source, target) pair")
        src = [self.encode_src(s) for s, _ in pairs]
        tgt = [self.encode_tgt(t) for _, t in pairs]
        S, T = max(map(len, src)), max(map(len, tgt)) - 1
        src_t = torch.full((len(pairs), S), self.pad_id, dtype=torch.long)  # (B, S)
        tgt_in = torch.full((len(pairs), T), self.pad_id, dtype=torch.long)  # (B, T)
        tgt_out = torch.full((len(pairs), T), self.pad_id, dtype=torch.long)  # (B, T)
        for b, (s, t) in enumerate(zip(src, tgt, strict=True)):
            src_t[b, : len(s)] = torch.tensor(s)
            tgt_in[b, : len(t) - 1] = torch.tensor(t[:-1])  # drop <eos>: nothing comes after it
            tgt_out[b, : len(t) - 1] = torch.tensor(t[1:])  # drop <bos>: it is never predicted
        return src_t, tgt_in, tgt_out

    def get_batch(self, split: str, generator: torch.Generator, batch_size: int = 64):
        """A random batch of `split` ("train", or "val"/"test" for the held-out pairs), for `training.train`."""
        if split == "train":
            pairs = self.train
        elif split in ("val", "test"):
            pairs = self.test
        else:
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        index = torch.randint(len(pairs), (batch_size,), generator=generator)  # (B,)
        return self.batch([pairs[i] for i in index.tolist()])


def translation_task(n_train: int = 20_000, n_test: int = 1_000, seed: int = 0, *, p_adjective: float = 0.5,
                     p_place: float = 0.5) -> TranslationTask:
    """The translation task: `n_train` + `n_test` distinct random sentences with their translations.

    Deterministic for a given seed (Python's `random.Random(seed)`, independent of torch). The test
    sentences are distinct from every training sentence, so test accuracy measures generalisation to
    new combinations of known words, not memory.
    """
    check_int("n_train", n_train)
    check_int("n_test", n_test)
    rng = random.Random(seed)
    seen: set[tuple[str, ...]] = set()
    sentences: list[list[str]] = []
    while len(sentences) < n_train + n_test:
        words = random_source_sentence(rng, p_adjective, p_place)
        if tuple(words) not in seen:
            seen.add(tuple(words))
            sentences.append(words)
    pairs = [(words, translate(words)) for words in sentences]
    lex = TRANSLATION_LEXICON
    src_words = sorted(w for pos in lex.values() for w in pos)
    tgt_words = sorted({t for pos in lex.values() for t in pos.values()} | {SUBJECT_MARKER, OBJECT_MARKER})
    return TranslationTask(
        src_vocab=list(TRANSLATION_SPECIALS) + src_words,
        tgt_vocab=list(TRANSLATION_SPECIALS) + tgt_words,
        train=pairs[:n_train],
        test=pairs[n_train:],
    )
