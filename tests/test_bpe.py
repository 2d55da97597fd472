"""course_lib.tokenizers.BPETokenizer: byte-pair encoding against two independent references.

- a naive BPE written here (recount every pair after every merge, merge with a plain loop), which
  must give exactly the same merges and encodings: this checks the incremental pair counts and the
  fast encoder;
- the `tokenizers` library's byte-level BPE trained on the same text with the same vocabulary size:
  the same first merges (until the first tie, which the two break in different byte orders) and the
  same compression on held-out text, within 2%;
- GPT-2's published vocabulary and merges loaded into it: exactly tiktoken's GPT-2 ids (tiktoken
  built from the same local files, nothing downloaded), on tricky strings and on real text; and
  GPT2_SPLIT / GPT4_SPLIT against the patterns tiktoken ships.

Plus round trips for any string (hypothesis), save/load, special tokens and error messages.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import numpy as np
import pytest
import regex
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.data import gpt2_files, gpt2_vocabulary, load_corpus, tiny_shakespeare, train_val_split, wikitext2
from course_lib.tokenizers import (
    GPT2_SPLIT,
    GPT4_SPLIT,
    LINES,
    N_BYTES,
    BPETokenizer,
    PairIndex,
    bytes_to_unicode,
    count_pairs,
    gpt2_tokenizer,
    hf_merges,
    split_chunks,
    train_hf_bpe,
    utf8,
)

EOT = "<|endoftext|>"


# --- a naive reference: recount everything, merge with a plain loop ------------------------------


def naive_merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def naive_train(text: str, n_merges: int, pattern: str = LINES, min_frequency: int = 1) -> list[tuple[int, int]]:
    seqs = [list(utf8(c)) for c in split_chunks(text, pattern)]
    merges = []
    for rank in range(n_merges):
        counts = Counter(p for s in seqs for p in zip(s, s[1:]))
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))  # most frequent, then the smallest pair of ids
        if counts[best] < min_frequency:
            break
        seqs = [naive_merge(s, best, N_BYTES + rank) for s in seqs]
        merges.append(best)
    return merges


def naive_encode(text: str, merges: list[tuple[int, int]], pattern: str = LINES) -> list[int]:
    """The textbook encoder: in each chunk, merge the pair learned earliest, until none is left."""
    ranks = {pair: r for r, pair in enumerate(merges)}
    out = []
    for chunk in split_chunks(text, pattern):
        ids = list(utf8(chunk))
        while len(ids) > 1:
            pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, float("inf")))
            if pair not in ranks:
                break
            ids = naive_merge(ids, pair, N_BYTES + ranks[pair])
        out.extend(ids)
    return out


# --- the lesson's examples -----------------------------------------------------------------------


def test_compression_example_aaabdaaabac_gives_XdXac_and_back():
    tok = BPETokenizer().train("aaabdaaabac", N_BYTES + 3, record=True)
    a, b = ord("a"), ord("b")
    Z, Y, X = 256, 257, 258
    assert tok.merges == [(a, a), (a, b), (Z, Y)], f"merges {tok.merges}, expected aa->Z, ab->Y, ZY->X"
    assert [s.count for s in tok.history] == [4, 2, 2], [s.count for s in tok.history]  # "aaa" counts (a, a) twice
    ids = tok.encode("aaabdaaabac")
    assert ids == [X, ord("d"), X, a, ord("c")], f"got {ids}, expected XdXac"
    assert tok.decode(ids) == "aaabdaaabac", tok.decode(ids)
    assert [s.n_tokens for s in tok.history] == [9, 7, 5], [s.n_tokens for s in tok.history]


def test_low_lower_lowest_and_the_stop_when_nothing_repeats():
    tok = BPETokenizer().train("low lower lowest", N_BYTES + 10, record=True)
    # After "lo" and "low", (" ", low) and (low, "e") both occur twice: the tie goes to (32, 257).
    assert [tok.token_text(i) for i in range(N_BYTES, tok.vocab_size)] == ["lo", "low", " low", " lowe"], tok.tokenize(
        "low lower lowest"
    )
    assert len(tok) == N_BYTES + 4, "training stops once no pair occurs min_frequency = 2 times"
    assert tok.tokenize("lower") == ["low", "e", "r"], tok.tokenize("lower")
    every_pair = BPETokenizer().train("low lower lowest", N_BYTES + 20, min_frequency=1)  # until one token is left
    assert every_pair.tokenize("low lower lowest") == ["low lower lowest"] and len(every_pair.merges) == 9, (
        every_pair.merges
    )


def test_ties_go_to_the_smallest_pair_of_ids_not_the_first_in_the_text():
    # (c, d), (d, a) and (a, b) all occur twice; (a, b) = (97, 98) is the smallest pair of ids.
    tok = BPETokenizer().train("cdab cdab", N_BYTES + 1)
    assert tok.merges == [(ord("a"), ord("b"))], f"first merge {tok.merges}, expected (97, 98) = 'ab'"
    assert naive_train("cdab cdab", 1) == tok.merges, (naive_train("cdab cdab", 1), tok.merges)


def test_merges_never_cross_a_line_or_a_gpt2_chunk():
    tok = BPETokenizer().train("ab\ncd\n" * 20, N_BYTES + 20, min_frequency=1)
    assert all(b"\n" not in t[:-1] for t in tok.vocab), [t for t in tok.vocab if b"\n" in t[:-1]]
    words = BPETokenizer(pattern=GPT2_SPLIT).train("the cat the cat the cat", N_BYTES + 20, min_frequency=1)
    assert b" the" in words.vocab and not any(b"e " in t or b"t " in t for t in words.vocab), words.tokenize("the cat")


def test_split_chunks_keeps_every_character():
    for text in ["", "a", "to be\nor not\n\n", "x\ny", "  héllo, wörld!! 42 \t\n🙂\n"]:
        for pattern in (LINES, GPT2_SPLIT, r"[a-z]+"):  # [a-z]+ skips most characters: the gaps are kept
            chunks = split_chunks(text, pattern)
            assert "".join(chunks) == text and all(chunks), (text, pattern, chunks)
    assert split_chunks("to be\nor not") == ["to be\n", "or not"], split_chunks("to be\nor not")
    pieces = split_chunks("I'm here, 42!", GPT2_SPLIT)
    assert pieces == ["I", "'m", " here", ",", " 42", "!"], pieces


# --- the incremental counts are exact: against a full recount and the naive trainer --------------


def test_incremental_counts_equal_a_full_recount_after_every_merge():
    text = "aaaa aaa abab\nbanana bandana\naaaa aaa\n" * 3 + "the cat sat on the mat\n"
    chunks = Counter(utf8(c) for c in split_chunks(text))
    index = PairIndex(chunks)
    assert index.counts == count_pairs(index.sequences()), "the initial counts are not a full count"
    rank = 0
    while (best := index.most_frequent()) is not None:
        pair, count = best
        recount = count_pairs(index.sequences())
        top = max(recount.values())
        assert count == top and pair == min(p for p, c in recount.items() if c == top), (rank, pair, count, top)
        before = index.n_tokens
        merged = index.merge(pair, N_BYTES + rank)
        after = count_pairs(index.sequences())
        assert index.counts == after, f"after merge {rank} of {pair}: incremental {index.counts} != recount {after}"
        assert all(c > 0 for c in index.counts.values()), index.counts
        total = sum(len(ids) * w for ids, w in index.sequences())
        assert index.n_tokens == before - merged == total, (index.n_tokens, before, merged, total)
        rank += 1
    assert rank > 10 and not index.counts, (rank, index.counts)


def test_pair_index_from_a_list_of_chunks_counts_repeats_as_weights():
    index = PairIndex([b"abab", b"abab", [97, 98]])
    assert index.counts == {(97, 98): 5, (98, 97): 2}, index.counts
    assert sorted(index.sequences()) == [([97, 98], 1), ([97, 98, 97, 98], 2)], index.sequences()
    assert index.merge((97, 98), 256) == 5 and index.counts == {(256, 256): 2}, index.counts


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet="ab \n", max_size=60), n_merges=st.integers(0, 12))
def test_training_equals_the_naive_recount_on_random_text(text, n_merges):
    tok = BPETokenizer().train(text, N_BYTES + n_merges, min_frequency=1, record=True)
    assert tok.merges == naive_train(text, n_merges), text
    if tok.history:  # training's segmentation is what encoding the training text gives
        assert tok.history[-1].n_tokens == len(tok.encode(text)), (text, tok.history[-1], tok.encode(text))


@settings(max_examples=60, deadline=None)
@given(train=st.text(alphabet="abc \n", max_size=80), text=st.text(alphabet="abcd \n", max_size=40))
def test_encode_equals_the_textbook_encoder(train, text):
    tok = BPETokenizer().train(train, N_BYTES + 15, min_frequency=1)
    assert tok.encode(text) == naive_encode(text, tok.merges), (train, text)


def test_larger_text_matches_the_naive_trainer_with_gpt2_split():
    text = load_corpus("english")[:20_000]
    tok = BPETokenizer(pattern=GPT2_SPLIT).train(text, N_BYTES + 60)
    naive = naive_train(text, 60, GPT2_SPLIT, min_frequency=2)
    assert tok.merges == naive, (
        f"first difference at {next(i for i, (a, b) in enumerate(zip(tok.merges, naive)) if a != b)}"
    )
    held_out = load_corpus("english")[-2_000:]
    assert tok.encode(held_out) == naive_encode(held_out, tok.merges, GPT2_SPLIT), (
        "the fast encoder differs from the textbook one"
    )


def test_truncated_equals_training_fewer_merges():
    text = load_corpus("english")[:30_000]
    full = BPETokenizer().train(text, N_BYTES + 80)
    short = BPETokenizer().train(text, N_BYTES + 30)
    assert full.truncated(30).merges == short.merges, (full.truncated(30).merges, short.merges)
    assert full.truncated(30).encode(text[:500]) == short.encode(text[:500]), "the truncated copy encodes differently"


# --- against the `tokenizers` library ----------------------------------------------------------


def _first_difference(ours: BPETokenizer, theirs: list[tuple[bytes, bytes]]) -> int:
    mine = [(ours.vocab[a], ours.vocab[b]) for a, b in ours.merges]
    return next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))


def _assert_matches_hf(train_text: str, held_out: str, vocab_size: int, pattern: str, min_agree: int):
    ours = BPETokenizer(pattern=pattern).train(train_text, vocab_size)
    hf = train_hf_bpe(train_text, vocab_size, gpt2_split=pattern == GPT2_SPLIT)
    theirs = hf_merges(hf)
    n_same = _first_difference(ours, theirs)
    assert n_same >= min_agree, (
        f"only the first {n_same} merges agree: ours {ours.tokenize('the')}, theirs {theirs[n_same]}"
    )
    if n_same < len(ours.merges):
        # The first difference must be a tie: replay our merges up to it and compare the two pairs' counts.
        chunks = Counter(utf8(c) for c in split_chunks(train_text, pattern))
        index = PairIndex(chunks)
        for rank, pair in enumerate(ours.merges[:n_same]):
            index.merge(pair, N_BYTES + rank)
        to_id = {t: i for i, t in enumerate(ours.vocab[: N_BYTES + n_same])}
        their_pair = (to_id[theirs[n_same][0]], to_id[theirs[n_same][1]])
        our_pair = ours.merges[n_same]
        assert index.counts[our_pair] == index.counts.get(their_pair), (
            f"merge {n_same}: ours {our_pair} ({index.counts[our_pair]} times), theirs {their_pair} "
            f"({index.counts.get(their_pair)} times): a difference that is not a tie"
        )
    mine = {(ours.vocab[a], ours.vocab[b]) for a, b in ours.merges}
    overlap = len(mine & set(theirs)) / len(theirs)
    assert len(ours.merges) == len(theirs) and overlap >= 0.95, (
        f"{len(ours.merges)} vs {len(theirs)} merges, overlap {overlap:.3f}"
    )
    ours_ids, hf_ids = ours.encode(held_out), hf.encode(held_out).ids
    assert ours.decode(ours_ids) == held_out and hf.decode(hf_ids) == held_out, (
        "a round trip of the held-out text failed"
    )
    n_bytes = len(utf8(held_out))
    ours_bpt, hf_bpt = n_bytes / len(ours_ids), n_bytes / len(hf_ids)
    assert abs(ours_bpt / hf_bpt - 1) <= 0.02, (
        f"bytes per token on held-out text: ours {ours_bpt:.4f}, tokenizers {hf_bpt:.4f}"
    )
    return ours, hf


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [LINES, GPT2_SPLIT], ids=["lines", "gpt2-split"])
def test_matches_the_tokenizers_library_on_tiny_shakespeare(shared_data, pattern):
    text = tiny_shakespeare()
    train_text, held_out = text[:400_000], text[1_000_000:]  # 400k characters keep the test to seconds
    _assert_matches_hf(train_text, held_out, N_BYTES + 1000, pattern, min_agree=150)


@pytest.mark.parametrize("pattern", [LINES, GPT2_SPLIT], ids=["lines", "gpt2-split"])
def test_matches_the_tokenizers_library_on_the_english_corpus(pattern):
    train_text, held_out = train_val_split(load_corpus("english"))
    _assert_matches_hf(train_text, held_out, N_BYTES + 500, pattern, min_agree=100)


def test_byte_to_unicode_map_is_gpt2s():
    from tokenizers import pre_tokenizers

    mapping = bytes_to_unicode()
    assert len(set(mapping.values())) == 256 and all(
        ch.isprintable() and not ch.isspace() for ch in mapping.values()
    ), mapping
    assert mapping[ord(" ")] == "Ġ" and mapping[ord("\n")] == "Ċ" and mapping[ord("a")] == "a", (
        mapping[32],
        mapping[10],
    )
    assert set(mapping.values()) == set(pre_tokenizers.ByteLevel.alphabet()), set(mapping.values()) ^ set(
        pre_tokenizers.ByteLevel.alphabet()
    )


# --- round trips -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained() -> dict[str, BPETokenizer]:
    text = load_corpus("english")[:60_000] + "naïve café — ünïcödé 🙂🙂 東京\n" * 5
    return {
        "lines": BPETokenizer().train(text, N_BYTES + 200),
        "gpt2": BPETokenizer(pattern=GPT2_SPLIT).train(text, N_BYTES + 200),
        "special": BPETokenizer([EOT, "<|pad|>"]).train(text.replace("\n", EOT), N_BYTES + 202),
    }


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_decode_encode_round_trips_any_string(trained, text):
    for name, tok in trained.items():
        ids = tok.encode(text)
        assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids), (name, ids)
        assert tok.decode(ids) == text, (name, text, ids)
        assert b"".join(tok.token_bytes(i) for i in ids) == utf8(text), name


@settings(max_examples=100, deadline=None)
@given(
    text=st.lists(
        st.characters(codec="utf-8") | st.sampled_from(["🙂", "東", "é", "\U0001f9ec", "\n", " ", EOT, "<|pad|>"]),
        max_size=40,
    ).map("".join)
)
def test_round_trip_with_emoji_unseen_scripts_and_special_tokens(trained, text):
    tok = trained["special"]
    ids = tok.encode(text, allowed_special="all")
    assert tok.decode(ids) == text, (text, ids)
    assert tok.decode(tok.encode_ordinary(text)) == text, (text, tok.encode_ordinary(text))
    assert tok.encode(text, disallowed_special=()) == tok.encode_ordinary(text), text


def test_round_trip_of_lone_surrogates_and_empty_text(trained):
    for tok in trained.values():
        for text in ["", "\ud800", "a\udfffb", "\x00\x7f\x80", "\r\n\t"]:
            assert tok.decode(tok.encode(text)) == text, repr(text)
    assert trained["lines"].encode("") == [], trained["lines"].encode("")


def test_unseen_characters_fall_back_to_bytes(trained):
    tok = trained["lines"]
    ids = tok.encode("Ω")  # never in the training text: two bytes, two tokens
    assert ids == list("Ω".encode()), ids
    assert tok.decode(ids) == "Ω", tok.decode(ids)


def test_decode_joins_bytes_before_reading_utf8(trained):
    tok = trained["lines"]
    ids = tok.encode("🙂")  # four bytes; the tokens split them
    assert tok.decode(ids) == "🙂", (ids, tok.decode(ids))
    one_at_a_time = "".join(tok.decode([i]) for i in list("🙂".encode()))
    assert one_at_a_time != "🙂", one_at_a_time  # one at a time breaks the character
    assert tok.decode([0xE2]) == "\ufffd", tok.decode(
        [0xE2]
    )  # an incomplete character becomes U+FFFD, not an exception
    assert tok.decode(np.array(ids)) == tok.decode(torch.tensor(ids)) == "🙂", (
        tok.decode(np.array(ids)),
        tok.decode(torch.tensor(ids)),
    )


def test_encode_accepts_tensors_and_numpy_ids_in_decode_and_token_bytes(trained):
    tok = trained["lines"]
    assert tok.token_bytes(np.int64(97)) == b"a" and tok.token_bytes(torch.tensor(97)) == b"a", (
        tok.token_bytes(np.int64(97)),
        tok.token_bytes(torch.tensor(97)),
    )


# --- special tokens ------------------------------------------------------------------------------


def test_special_tokens_are_single_ids_never_split_and_not_trained_on():
    text = ("hello world" + EOT) * 50
    tok = BPETokenizer([EOT]).train(text, N_BYTES + 1 + 40)
    eot = tok.special_ids[EOT]
    assert eot == tok.vocab_size - 1, "special tokens come after the merges"
    assert not any(b"<|" in t or b"|>" in t for t in tok.vocab), "the special token's text was trained on"
    ids = tok.encode("hi" + EOT + EOT + "world", allowed_special={EOT})
    assert ids.count(eot) == 2 and tok.decode(ids) == "hi" + EOT + EOT + "world", (ids, tok.decode(ids))
    whole = tok.encode(EOT, allowed_special="all")
    assert whole == [eot] and tok.token_text(eot) == EOT, whole
    plain = tok.encode_ordinary(EOT)
    assert eot not in plain and len(plain) > 1 and tok.decode(plain) == EOT, plain
    prefix = "x<|endoftex"  # a prefix of a special token is ordinary text
    assert tok.encode(prefix) == tok.encode_ordinary(prefix), tok.encode(prefix)


def test_typed_special_tokens_are_refused_by_default_as_tiktoken_does():
    """A user who types "<|endoftext|>" must not end the document: encode raises unless told what the text is."""
    tok = BPETokenizer([EOT, "<|pad|>"]).train("hello world " * 20, N_BYTES + 2 + 10)
    user_text = "summarise this: <|endoftext|> and more"
    message = r"contains the special token '<\|endoftext\|>'.*allowed_special.*encode_ordinary"
    with pytest.raises(ValueError, match=message):
        tok.encode(user_text)
    assert tok.special_ids[EOT] not in tok.encode_ordinary(user_text), tok.encode_ordinary(user_text)
    assert tok.encode(user_text, disallowed_special=()) == tok.encode_ordinary(user_text)
    assert tok.special_ids[EOT] in tok.encode(user_text, allowed_special={EOT}), "allowed: the special id"
    # only the allowed ones become ids; another special token in the text is still refused
    with pytest.raises(ValueError, match="<\\|pad\\|>"):
        tok.encode("<|pad|>" + EOT, allowed_special={EOT})
    mixed = tok.encode("<|pad|>" + EOT, allowed_special={EOT}, disallowed_special=())
    assert mixed[-1] == tok.special_ids[EOT] and tok.special_ids["<|pad|>"] not in mixed, mixed
    with pytest.raises(TypeError, match="a set of special tokens"):
        tok.encode("hi", allowed_special=EOT)
    with pytest.raises(ValueError, match="not a special token of this tokenizer"):
        tok.encode("hi", allowed_special={"<|im_start|>"})
    with pytest.raises(ValueError, match="contains the special token"):
        tok.tokenize(user_text)


def test_longest_special_token_wins():
    tok = BPETokenizer(["<|a|>", "<|a|>b"])
    got = tok.encode("<|a|>b<|a|>", allowed_special="all")
    assert got == [tok.special_ids["<|a|>b"], tok.special_ids["<|a|>"]], (got, tok.special_ids)


# --- GPT-2's published vocabulary, against tiktoken ---------------------------------------------

# Strings where tokenizers differ: contractions (GPT-2's are lower case, ASCII apostrophe only), digits
# and other numbers (\p{N}: "²", "½"), accents written as a combining mark, CJK, emoji with joiners,
# runs of spaces and newlines, punctuation runs, and a famous glitch token.
TRICKY = [
    "Hello world",
    " Hello",
    "HELLO hello Hello",
    "I'm sure you'll see they've done it, haven't they?",
    "I'M DON'T don’t rock'n'roll",
    "x² + y² = z²; ½ of 3.14159",
    "12345678 2024 1,000,000 007",
    "東京タワー、中文分词。",
    "🙂🙂 👩‍👩‍👧 🇫🇷",
    "a\u0301 café naïve ＡＢＣ",
    "  \n\n\t  spaces   \n",
    "   ",
    "foo_bar __init__() $42.50!!",
    "strawberry",
    " SolidGoldMagikarp",
    "tab\there\r\nCRLF",
    "",
    "\u00a0nbsp\u2009thin",
]


@pytest.fixture(scope="module")
def gpt2_pair():
    """The course's GPT-2 tokenizer and tiktoken's, both from ../shared/data/gpt2 (nothing downloaded)."""
    from course_pytest_plugin import SHARED_DATA

    if not (SHARED_DATA / "gpt2" / "vocab.bpe").is_file():
        pytest.skip(f"GPT-2's vocabulary is not in {SHARED_DATA / 'gpt2'}")
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str

    encoder_json, vocab_bpe = gpt2_files()
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files, write no cached copy of them
    try:
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(vocab_bpe), encoder_json_file=str(encoder_json)
        )
    finally:
        if saved is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved
    reference = tiktoken.Encoding(
        name="gpt2-local", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={EOT: 50256}
    )
    return gpt2_tokenizer(), reference


@pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
def test_gpt2_gives_exactly_tiktokens_ids(gpt2_pair, text):
    ours, reference = gpt2_pair
    ids = ours.encode(text)
    assert ids == reference.encode(text), f"{text!r}: ours {ours.tokenize(text)}, tiktoken {reference.encode(text)}"
    assert ours.decode(ids) == text == reference.decode(ids), (ours.decode(ids), reference.decode(ids))
    assert [ours.token_bytes(i) for i in ids] == [reference.decode_single_token_bytes(i) for i in ids]


def test_gpt2_gives_exactly_tiktokens_ids_on_real_text(gpt2_pair):
    ours, reference = gpt2_pair
    for text in [wikitext2("valid")[:200_000], tiny_shakespeare()[:100_000]]:
        ids = ours.encode(text)
        theirs = reference.encode(text)
        assert ids == theirs, next(i for i, (a, b) in enumerate(zip(ids, theirs, strict=False)) if a != b)


def test_gpt2_layout_special_token_and_glitch_token(gpt2_pair):
    ours, reference = gpt2_pair
    encoder, merges = gpt2_vocabulary()
    assert ours.vocab_size == len(encoder) == 50_257 == reference.n_vocab and len(ours.merges) == len(merges) == 50_000
    assert ours.special_ids == {EOT: 50256}, ours.special_ids
    assert ours.encode(EOT, allowed_special="all") == [50256] == reference.encode(EOT, allowed_special="all")
    assert ours.encode_ordinary(EOT) == reference.encode_ordinary(EOT), ours.tokenize(EOT, disallowed_special=())
    with pytest.raises(ValueError):
        reference.encode(EOT)  # tiktoken refuses it by default ...
    with pytest.raises(ValueError, match="special token"):
        ours.encode(EOT)  # ... and so does the course's tokenizer
    assert ours.encode(" SolidGoldMagikarp") == [43453], ours.encode(" SolidGoldMagikarp")
    assert ours.byte_order[0] == ord("!") and ours.byte_order[188] == 0, ours.byte_order[:3]  # printable bytes first


def test_gpt2_tokenizer_saves_and_loads_with_its_byte_order(gpt2_pair, tmp_path):
    ours = gpt2_pair[0].truncated(5_000)  # the byte order is what matters here; fewer merges save faster
    ours.save(tmp_path / "gpt2.json")
    back = BPETokenizer.load(tmp_path / "gpt2.json")
    text = "The café's 12 crêpes cost $42 🙂\n"
    assert back.byte_order == ours.byte_order and back.encode(text) == ours.encode(text), back.tokenize(text)
    assert back.truncated(100).encode(text) == ours.truncated(100).encode(text)


def test_from_gpt2_refuses_files_that_do_not_fit_the_layout():
    from course_lib.tokenizers import bytes_to_unicode

    b2u = bytes_to_unicode()
    encoder = {ch: i for i, ch in enumerate(b2u[b] for b in range(N_BYTES))}
    encoder.update({"Ġt": 256, "he": 257, EOT: 258})
    tok = BPETokenizer.from_gpt2(encoder, [("Ġ", "t"), ("h", "e")])
    assert tok.encode(" the", allowed_special="all") == [256, 257] and tok.special_ids == {EOT: 258}, tok.encode(" the")
    with pytest.raises(ValueError, match="makes id 257 in the encoder; expected 256"):
        BPETokenizer.from_gpt2(encoder, [("h", "e"), ("Ġ", "t")])
    with pytest.raises(ValueError, match="must all be in the encoder"):
        BPETokenizer.from_gpt2(encoder, [("Ġ", "q")])


def test_gpt2_split_is_gpt2s_pattern_and_differs_from_re_on_other_numbers():
    from tiktoken_ext.openai_public import r50k_pat_str

    for text in TRICKY:
        assert split_chunks(text, GPT2_SPLIT) == regex.findall(r50k_pat_str, text), text
    assert split_chunks(" x²", GPT2_SPLIT) == [" x", "²"], split_chunks(" x²", GPT2_SPLIT)  # ² is \p{N}, not a letter
    # the course's earlier version for Python's re, with \d for numbers and [^\W\d_] for letters
    approximation = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""
    assert re.findall(approximation, " x²") == [" x²"], "Python's re counts ² as a word character, not as a digit"


def test_gpt4_split_is_cl100ks_pattern(monkeypatch):
    import tiktoken_ext.openai_public as openai_public

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})  # the pattern, not the ranks
    assert GPT4_SPLIT == openai_public.cl100k_base()["pat_str"]
    chunks = split_chunks(" 1234567 I'M", GPT4_SPLIT)
    assert chunks == [" ", "123", "456", "7", " I", "'M"], chunks


def test_tokens_after_each_merge_equals_encoding_with_fewer_merges():
    text = load_corpus("english")[:20_000]
    held_out = load_corpus("english")[-2_000:] + "naïve 🙂 <|endoftext|>\n"
    for pattern in (LINES, GPT2_SPLIT):
        tok = BPETokenizer(pattern=pattern).train(text, N_BYTES + 80)
        counts = tok.tokens_after_each_merge(held_out)
        assert counts == [len(tok.truncated(k).encode_ordinary(held_out)) for k in range(81)], pattern
        assert counts[0] == len(utf8(held_out)), counts[0]


# --- save / load -------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path, trained):
    for name, tok in trained.items():
        path = tmp_path / f"{name}.json"
        tok.save(path)
        back = BPETokenizer.load(path)
        assert (
            back.merges == tok.merges and back.special_tokens == tok.special_tokens and back.pattern == tok.pattern
        ), name
        sample = "the transformer reads naïve 🙂 text" + EOT + "\n"
        assert back.encode(sample, allowed_special="all") == tok.encode(sample, allowed_special="all"), name
        assert back.vocab == tok.vocab, name
    data = json.loads((tmp_path / "special.json").read_text(encoding="utf-8"))
    assert data["special_tokens"] == [EOT, "<|pad|>"] and len(data["tokens"]) == len(data["merges"]), (
        data["special_tokens"],
        len(data["tokens"]),
    )


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "not valid JSON"),
        ('{"merges": []}', "not a saved BPETokenizer"),
        ('{"format": "course_lib.BPETokenizer", "version": 9, "merges": []}', "version 9"),
        ('{"format": "course_lib.BPETokenizer", "version": 1, "merges": [[97, 256]]}', r"merge 0 is \[97, 256\]"),
        ('{"format": "course_lib.BPETokenizer", "version": 1, "merges": [[97, 98], [97]]}', "merge 1"),
    ],
)
def test_load_rejects_broken_files_with_a_clear_message(tmp_path, content, message):
    path = tmp_path / "tok.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        BPETokenizer.load(path)


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: BPETokenizer().train("abc", 200), ValueError, r"at least 256 \(the 256 byte tokens\), got 200"),
        (
            lambda: BPETokenizer([EOT]).train("abc", 256),
            ValueError,
            r"at least 257 \(the 256 byte tokens and the 1 special token\)",
        ),
        (lambda: BPETokenizer().train(b"abc", 300), TypeError, "training text as a string, got bytes"),
        (lambda: BPETokenizer().train(["a", "b"], 300), TypeError, "got list"),
        (lambda: BPETokenizer().train("abc", 300.0), TypeError, "vocab_size must be an int, got float"),
        (lambda: BPETokenizer().train("abc", 300, min_frequency=0), ValueError, "min_frequency must be an int >= 1"),
        (lambda: BPETokenizer().encode(b"abc"), TypeError, "encode takes a string, got bytes"),
        (lambda: BPETokenizer().encode(None), TypeError, "encode takes a string, got NoneType"),
        (
            lambda: BPETokenizer().decode([97, 300]),
            IndexError,
            r"id 300 is out of range: this tokenizer has ids 0..255",
        ),
        (lambda: BPETokenizer().decode([-1]), IndexError, "id -1 is out of range"),
        (lambda: BPETokenizer().decode([97.0]), TypeError, "ids must be integers, got float"),
        (lambda: BPETokenizer().decode("abc"), TypeError, "sequence of integer ids, got str"),
        (lambda: BPETokenizer().decode(97), TypeError, r"single int 97; wrap it in a list: \[97\]"),
        (lambda: BPETokenizer(EOT), TypeError, "sequence of strings"),
        (lambda: BPETokenizer([EOT, EOT]), ValueError, "listed twice"),
        (lambda: BPETokenizer([""]), TypeError, "non-empty strings"),
        (lambda: BPETokenizer(pattern="(["), ValueError, "not a valid regular expression"),
        (lambda: BPETokenizer().truncated(1), ValueError, r"n_merges must be an int from 0 to 0"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_repr_names_the_vocabulary():
    tok = BPETokenizer([EOT], pattern=GPT2_SPLIT).train("ab ab ab", N_BYTES + 2)
    assert (
        repr(tok) == "BPETokenizer(vocab_size=258, merges=1, special_tokens=['<|endoftext|>'], pattern=GPT2_SPLIT)"
    ), repr(tok)
