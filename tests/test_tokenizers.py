"""course_lib.tokenizers.Vocabulary: ordering, round trips, unknown tokens, and errors.

The reference for the counts is `collections.Counter` over a plain split; for the ids, the
documented order (specials first, then sorted or by falling count).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
import torch

from course_lib.tokenizers import Vocabulary

TEXT = "the cat sat on the mat\nthe dog sat on the log\n"


def test_curriculum_example_sorted_ids():
    vocab = Vocabulary.from_text("find my files", specials=())
    assert vocab.tokens == ["files", "find", "my"], f"tokens {vocab.tokens}, expected sorted ['files', 'find', 'my']"
    assert vocab.encode("find my files") == [1, 2, 0], f"got {vocab.encode('find my files')}, expected [1, 2, 0]"
    assert len(vocab) == 3, f"len {len(vocab)}, expected 3"


def test_word_level_matches_counter_and_round_trips():
    vocab = Vocabulary.from_text(TEXT)
    words = Counter(TEXT.split())
    assert vocab.tokens == ["<unk>"] + sorted(words), f"tokens {vocab.tokens}"
    assert vocab.token_to_id("<unk>") == 0 and vocab.unk_id == 0, "the unknown token should come first"
    for tok in words:
        assert vocab.id_to_token(vocab.token_to_id(tok)) == tok, f"token {tok!r} does not map back to itself"
    line = "the dog sat on the mat"
    assert vocab.decode(vocab.encode(line)) == line, f"round trip gave {vocab.decode(vocab.encode(line))!r}"
    # whitespace runs collapse to one space, as documented
    assert vocab.decode(vocab.encode("the   cat\nsat")) == "the cat sat"


def test_char_level_round_trip_and_unknowns():
    vocab = Vocabulary.from_text(TEXT, level="char")
    assert vocab.tokens[1:] == sorted(set(TEXT)), f"tokens {vocab.tokens}"
    assert vocab.decode(vocab.encode(TEXT)) == TEXT, "character level must give the text back exactly"
    assert vocab.encode("caz") == [vocab.token_to_id("c"), vocab.token_to_id("a"), 0], "unseen 'z' should be <unk> (0)"
    assert vocab.decode(vocab.encode("z")) == "<unk>"


def test_frequency_order_and_min_freq_against_counter():
    words = TEXT.split()
    counts = Counter(words)
    vocab = Vocabulary.from_text(TEXT, order="frequency", min_freq=2)
    expected = ["<unk>"] + sorted([w for w, c in counts.items() if c >= 2], key=lambda w: (-counts[w], w))
    assert vocab.tokens == expected, f"tokens {vocab.tokens}, expected {expected}"
    assert vocab.encode("cat") == [0], "'cat' is seen once, below min_freq=2, so it should be <unk>"


def test_order_does_not_depend_on_input_order():
    lines = TEXT.splitlines()
    shuffled = lines[::-1]
    random.Random(0).shuffle(shuffled)
    a, b = Vocabulary.from_text(lines), Vocabulary.from_text(shuffled)
    assert a.tokens == b.tokens, f"{a.tokens} != {b.tokens}"


def test_from_counts_and_constructor_keep_given_order():
    sentences = [["show", "me", "my", "files"], ["show", "me", "my", "photos"]]
    vocab = Vocabulary.from_counts(Counter(w for s in sentences for w in s), specials=("<unk>", "<eos>"))
    assert vocab.tokens == ["<unk>", "<eos>", "files", "me", "my", "photos", "show"], vocab.tokens
    manual = Vocabulary(["b", "a", "b"], specials=())
    assert manual.tokens == ["b", "a"], f"repeated tokens keep their first id, got {manual.tokens}"
    assert manual.unk_id is None


def test_ids_from_numpy_and_torch():
    vocab = Vocabulary.from_text("find my files", specials=())
    assert vocab.decode(np.array([1, 2, 0])) == "find my files"
    assert vocab.decode(torch.tensor([1, 2, 0])) == "find my files"
    assert vocab.id_to_token(torch.tensor(2)) == "my" and vocab.id_to_token(np.int64(0)) == "files"


def test_errors():
    vocab = Vocabulary.from_text("find my files", specials=())
    with pytest.raises(KeyError, match=r"'photos' is not in the vocabulary .* no unknown token"):
        vocab.encode("find my photos")
    with pytest.raises(IndexError, match=r"id 3 is out of range: this vocabulary has ids 0\.\.2"):
        vocab.decode([0, 3])
    with pytest.raises(IndexError, match=r"id -1 is out of range"):
        vocab.id_to_token(-1)
    with pytest.raises(TypeError, match=r"ids must be integers, got float"):
        vocab.decode([1.0])
    with pytest.raises(TypeError, match=r"ids must be integers"):
        vocab.id_to_token(torch.tensor(1.0))
    with pytest.raises(TypeError, match=r"decode takes a sequence of integer ids, got the string"):
        vocab.decode("find")
    with pytest.raises(TypeError, match=r"encode takes a string or a list of tokens, got int"):
        vocab.encode(3)
    with pytest.raises(TypeError, match=r"token must be a string, got int"):
        vocab.token_to_id(1)
    with pytest.raises(ValueError, match=r"level must be one of \('word', 'char'\), got 'words'"):
        Vocabulary.from_text("a b", level="words")
    with pytest.raises(ValueError, match=r"min_freq must be an int >= 1, got 0"):
        Vocabulary.from_text("a b", min_freq=0)
    with pytest.raises(ValueError, match=r"order must be one of"):
        Vocabulary.from_text("a b", order="random")
    with pytest.raises(TypeError, match=r"item 1 is int"):
        Vocabulary.from_text(["a b", 3])
    with pytest.raises(ValueError, match=r"listed twice"):
        Vocabulary(["a"], specials=("<unk>", "<unk>"))
    with pytest.raises(TypeError, match=r"got the string '<unk>'"):
        Vocabulary(["a"], specials="<unk>")
    with pytest.raises(ValueError, match=r"single characters .* got 'ab'"):
        Vocabulary(["ab"], level="char")


def test_from_counts_checks_its_arguments_too():
    with pytest.raises(ValueError, match="min_freq must be an int >= 1, got 'x'"):
        Vocabulary.from_counts({"a": 2}, min_freq="x")
    with pytest.raises(ValueError, match="order must be one of"):
        Vocabulary.from_counts({"a": 2}, order="random")
