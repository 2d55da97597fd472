"""Lesson 10: the synthetic translation task (course_lib.data), the encoder-decoder (course_lib.models)
against torch.nn.Transformer with the same weights, and greedy decoding and beam search
(course_lib.generation) against brute force."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from course_lib import data

# --- the translation task ---------------------------------------------------------------------------


def test_translate_reorders_and_maps_words():
    assert data.translate("the big dog sees a small cat near the old man") == (
        "kano grun lo ka toma vel lo ap miru pim na mo vidat".split()
    )
    assert data.translate(["a", "fish", "likes", "the", "horse"]) == "piska na ka hipa lo mo amat".split()


def test_every_target_word_translates_one_source_word():
    lex = {src: tgt for pos in data.TRANSLATION_LEXICON.values() for src, tgt in pos.items()}
    task = data.translation_task(300, 50, seed=4)
    for src, tgt in task.train + task.test:
        expected = Counter(lex[w] for w in src) + Counter({data.SUBJECT_MARKER: 1, data.OBJECT_MARKER: 1})
        assert Counter(tgt) == expected, (src, tgt)
        assert tgt[-1] == lex[src[src.index(next(w for w in src if w in data.TRANSLATION_LEXICON["verb"]))]]


def test_the_task_needs_reordering():
    """A word-by-word (monotone) translation gets almost no sentence right: position matters."""
    lex = {src: tgt for pos in data.TRANSLATION_LEXICON.values() for src, tgt in pos.items()}
    task = data.translation_task(500, 10, seed=1)
    same_order = sum([lex[w] for w in src] == [w for w in tgt if w not in ("ka", "mo")] for src, tgt in task.train)
    assert same_order == 0, f"{same_order} sentences keep the source order"


@pytest.mark.parametrize(
    "sentence, where",
    [
        ("dog sees the cat", "expected an article"),
        ("the big sees the cat", "expected a noun at word 2"),
        ("the dog the cat", "expected a verb at word 2"),
        ("the dog sees the cat quickly", "expected a preposition or the end at word 5"),
        ("the dog sees the cat near the man the", "unexpected words after the sentence's end"),
    ],
)
def test_translate_rejects_sentences_outside_the_grammar(sentence, where):
    with pytest.raises(ValueError, match=where):
        data.translate(sentence)


def test_translation_task_is_deterministic_and_held_out():
    a, b = data.translation_task(400, 100, seed=7), data.translation_task(400, 100, seed=7)
    assert a.train == b.train and a.test == b.test
    assert data.translation_task(400, 100, seed=8).train != a.train
    train_sources = {tuple(s) for s, _ in a.train}
    assert len(train_sources) == 400 and not train_sources & {tuple(s) for s, _ in a.test}
    assert a.src_vocab[:3] == a.tgt_vocab[:3] == ["<pad>", "<bos>", "<eos>"]
    assert (a.pad_id, a.bos_id, a.eos_id) == (0, 1, 2)
    assert len(a.src_vocab) == 3 + 29 and len(a.tgt_vocab) == 3 + 31


def test_translation_task_default_sizes_and_lengths():
    task = data.translation_task()
    assert (len(task.train), len(task.test)) == (20_000, 1_000)
    lengths = Counter(len(s) for s, _ in task.train)
    assert min(lengths) == 5 and max(lengths) == 11, lengths
    assert max(len(t) for _, t in task.train) == 13


def test_batch_shifts_the_target_right_and_pads():
    task = data.translation_task(50, 5, seed=0)
    pairs = [("the dog sees a cat".split(), data.translate("the dog sees a cat")),
             ("a big man finds the fish with a red bird".split(), data.translate("a big man finds the fish with a red bird"))]
    src, tgt_in, tgt_out = task.batch(pairs)
    assert src.shape == (2, 10) and tgt_in.shape == tgt_out.shape == (2, 13)
    assert src[0, 5:].tolist() == [0] * 5 and src[1].ne(0).all()
    assert tgt_in[:, 0].tolist() == [task.bos_id] * 2
    real = tgt_out[1] != 0  # the longer sentence has no padding: tgt_in is tgt_out shifted right by one
    assert real.all() and tgt_in[1, 1:].tolist() == tgt_out[1, :-1].tolist()
    assert tgt_out[0].tolist() == task.encode_tgt(pairs[0][1])[1:] + [0] * 5
    assert tgt_in[0].tolist() == task.encode_tgt(pairs[0][1])[:-1] + [0] * 5
    assert tgt_out[1, -1].item() == task.eos_id and task.eos_id not in tgt_in[1].tolist()
    assert task.decode_tgt(tgt_in[1]) == pairs[1][1] and task.decode_tgt(tgt_out[0].tolist()) == pairs[0][1]


def test_get_batch_is_seeded_and_checks_the_split():
    task = data.translation_task(200, 20, seed=0)
    x1 = task.get_batch("train", torch.Generator().manual_seed(3), 8)
    x2 = task.get_batch("train", torch.Generator().manual_seed(3), 8)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2)) and x1[0].shape[0] == 8
    val = task.get_batch("val", torch.Generator().manual_seed(3), 8)
    test_sources = {tuple(task.encode_src(s)) for s, _ in task.test}
    assert all(tuple(row[row != 0].tolist()) in test_sources for row in val[0])
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test', got 'dev'"):
        task.get_batch("dev", torch.Generator())


def test_unknown_words_and_bad_sizes_are_explained():
    task = data.translation_task(20, 5, seed=0)
    with pytest.raises(KeyError, match="'zebra' is not in the source vocabulary"):
        task.encode_src(["the", "zebra"])
    with pytest.raises(KeyError, match="'dog' is not in the target vocabulary"):
        task.encode_tgt(["dog"])
    with pytest.raises(ValueError, match="n_test must be a positive int, got 0"):
        data.translation_task(10, 0)
    with pytest.raises(ValueError, match="at least one"):
        task.batch([])
