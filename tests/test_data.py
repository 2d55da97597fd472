"""Tests of course_lib.data: the bundled corpora and their facts, the split, batching, and the tiny
Shakespeare cache (tested without any network)."""
from __future__ import annotations

import importlib.util
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib import data

SHAKESPEARE_CHARS = 1_115_394
SHAKESPEARE_VOCAB = 65


# ------------------------------------------------------------------------------------------------
# Corpora
# ------------------------------------------------------------------------------------------------

def test_available_corpora_lists_the_bundled_files():
    names = data.available_corpora()
    assert names == ["commands", "commands_long", "english"], f"got {names}"
    assert names == sorted(names), f"not sorted: {names}"


def test_data_folders_are_not_packages_and_no_folder_shadows_the_module():
    # Data-only folders, shipped as package data: no __init__.py, and no folder called data/ next to
    # course_lib/data.py, which `import course_lib.data` could find instead of the module.
    package = Path(data.__file__).parent
    assert data.CORPORA_DIR == package / "corpora"
    for folder in (package / "corpora", package / "checkpoints"):
        assert folder.is_dir() and not (folder / "__init__.py").exists(), f"{folder} must be a data-only folder"
    assert not (package / "data").exists(), "course_lib/data/ would share its name with course_lib/data.py"
    assert Path(data.__file__).name == "data.py", f"imported {data.__file__}"


def test_load_corpus_unknown_name_lists_available():
    with pytest.raises(ValueError, match=r"unknown corpus 'englsh'; available: commands, commands_long, english"):
        data.load_corpus("englsh")


def test_load_corpus_returns_raw_lines():
    text = data.load_corpus("commands")
    assert isinstance(text, str), f"expected str, got {type(text).__name__}"
    lines = text.splitlines()
    assert len(lines) == 20, f"expected 20 lines, got {len(lines)}"
    assert text == (data.CORPORA_DIR / "commands.txt").read_text(encoding="utf-8")


def test_load_sentences_tokenizes_and_drops_punctuation_and_blank_lines(monkeypatch):
    monkeypatch.setattr(data, "load_corpus", lambda name: "The King ruled.\n\n  \nDon't stop, 2 cats!\n")
    assert data.load_sentences("x") == [["the", "king", "ruled"], ["don't", "stop", "2", "cats"]]
    assert data.load_sentences("x", lowercase=False) == [["The", "King", "ruled"], ["Don't", "stop", "2", "cats"]]


def test_load_sentences_english_is_large_enough():
    sentences = data.load_sentences("english")
    n_words = sum(len(s) for s in sentences)
    assert n_words >= 100_000, f"english has {n_words} words, expected at least 100,000"
    assert len(sentences) == len(data.load_corpus("english").splitlines()), "one sentence per line expected"
    size = (data.CORPORA_DIR / "english.txt").stat().st_size
    assert size < 1_000_000, f"english.txt is {size} bytes, expected under 1 MB"


def _next_word_distribution(sentences, context):
    """P(next | context) counted independently of course_lib.markov (with collections.Counter)."""
    counts = defaultdict(Counter)
    k = len(context)
    for words in sentences:
        for i in range(len(words) - k):
            counts[tuple(words[i : i + k])][words[i + k]] += 1
    total = sum(counts[context].values())
    return {w: c / total for w, c in counts[context].items()}


def test_commands_counts_and_first_order_probabilities():
    lines = Counter(data.load_corpus("commands").splitlines())
    assert lines == {
        "show me my directories please": 2,
        "show me my files please": 3,
        "show me my photos please": 5,
        "check whether the battery ran down please": 4,
        "check whether the program ran please": 6,
    }, f"got {dict(lines)}"
    sentences = data.load_sentences("commands")
    assert _next_word_distribution(sentences, ("my",)) == {"directories": 0.2, "files": 0.3, "photos": 0.5}
    assert _next_word_distribution(sentences, ("ran",)) == {"down": 0.4, "please": 0.6}
    # Two words of context decide it.
    assert _next_word_distribution(sentences, ("battery", "ran")) == {"down": 1.0}
    assert _next_word_distribution(sentences, ("program", "ran")) == {"please": 1.0}


def test_commands_long_is_fifty_fifty():
    lines = Counter(data.load_corpus("commands_long").splitlines())
    assert lines == {
        "check the program log and find out whether it ran please": 5,
        "check the battery log and find out whether it ran down please": 5,
    }, f"got {dict(lines)}"
    sentences = data.load_sentences("commands_long")
    assert _next_word_distribution(sentences, ("it", "ran")) == {"please": 0.5, "down": 0.5}


# The generator is a repository file, not package data: find it from here, not from CORPORA_DIR.
GENERATOR = Path(__file__).resolve().parents[1] / "course_lib" / "corpora" / "make_english.py"


def _load_generator():
    path = GENERATOR
    spec = importlib.util.spec_from_file_location("make_english", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_english_generator_reproduces_the_file_byte_for_byte():
    generator = _load_generator()
    rebuilt = generator.build_corpus().encode("utf-8")
    stored = (GENERATOR.parent / "english.txt").read_bytes()
    assert stored == (data.CORPORA_DIR / "english.txt").read_bytes(), "the installed english.txt is out of date"
    assert rebuilt == stored, (
        f"make_english.py builds {len(rebuilt)} bytes, english.txt has {len(stored)}: "
        "run `python course_lib/corpora/make_english.py` and commit the result"
    )
    assert generator.build_corpus(seed=1) != generator.build_corpus(), "the seed should change the corpus"


def test_english_is_gender_balanced_and_has_the_pairs():
    counts = Counter(w for s in data.load_sentences("english") for w in s)
    for male, female in [("king", "queen"), ("prince", "princess"), ("man", "woman"), ("boy", "girl"),
                         ("father", "mother"), ("son", "daughter"), ("he", "she")]:
        assert counts[male] == counts[female] > 100, f"{male}: {counts[male]}, {female}: {counts[female]}"
    for country, capital in [("france", "paris"), ("italy", "rome"), ("japan", "tokyo"), ("egypt", "cairo")]:
        assert counts[country] > 100 and counts[capital] > 100, f"{country}: {counts[country]}, {capital}: {counts[capital]}"
    assert counts["transformer"] >= 300, f"'transformer' occurs {counts['transformer']} times, expected >= 300"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_english_word2vec_analogies_hold(seed):
    """An independent word2vec (gensim) trained on the corpus solves the course's two analogies."""
    gensim = pytest.importorskip("gensim")
    sentences = data.load_sentences("english")
    model = gensim.models.Word2Vec(
        sentences, vector_size=50, window=4, min_count=5, sg=1, negative=5, epochs=10, seed=seed, workers=1
    )

    def best(positive, negative):
        return [w for w, _ in model.wv.most_similar(positive=positive, negative=negative, topn=3)]

    royal = best(["king", "woman"], ["man"])
    assert royal[0] == "queen", f"king - man + woman gave {royal}, expected 'queen' first"
    capital = best(["paris", "italy"], ["france"])
    assert capital[0] == "rome", f"paris - france + italy gave {capital}, expected 'rome' first"
    other = best(["tokyo", "egypt"], ["japan"])
    assert "cairo" in other, f"tokyo - japan + egypt gave {other}, expected 'cairo' in the top 3"


# ------------------------------------------------------------------------------------------------
# train_val_split
# ------------------------------------------------------------------------------------------------

def test_train_val_split_on_str_list_and_tensor():
    assert data.train_val_split("abcdefghij") == ("abcdefghi", "j")
    train, val = data.train_val_split(list(range(10)), val_fraction=0.3)
    assert (train, val) == (list(range(7)), [7, 8, 9]), f"got {train}, {val}"
    t = torch.arange(100)
    train, val = data.train_val_split(t, 0.25)
    torch.testing.assert_close(train, t[:75])
    torch.testing.assert_close(val, t[75:])


def test_train_val_split_matches_nanogpt_rounding_and_keeps_order():
    items = list(range(1003))
    train, val = data.train_val_split(items)
    assert len(train) == int(0.9 * 1003) == 902, f"train has {len(train)} items"
    assert train + val == items, "the split must keep every item in order"


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, 0.0, 1.0])
def test_train_val_split_rejects_fractions_outside_0_1(bad):
    with pytest.raises(ValueError, match=rf"val_fraction must be .*between 0 and 1, got {re.escape(repr(bad))}"):
        data.train_val_split("abc", val_fraction=bad)


def test_train_val_split_rejects_non_numbers():
    with pytest.raises(ValueError, match=r"got '0.1'"):
        data.train_val_split("abc", val_fraction="0.1")


# ------------------------------------------------------------------------------------------------
# get_batch
# ------------------------------------------------------------------------------------------------

def test_get_batch_shapes_and_shift_against_manual_slices():
    ids = torch.randint(0, 50, (200,), generator=torch.Generator().manual_seed(0))
    block_size, batch_size = 8, 5
    x, y = data.get_batch(ids, block_size, batch_size, generator=torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (batch_size, block_size), f"got {tuple(x.shape)}, {tuple(y.shape)}"
    assert x.dtype == y.dtype == torch.long, f"got {x.dtype}, {y.dtype}"
    # The same offsets as nanoGPT's get_batch draws from the same generator state.
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=torch.Generator().manual_seed(1))
    expected_x = torch.stack([ids[i : i + block_size] for i in starts])
    expected_y = torch.stack([ids[i + 1 : i + 1 + block_size] for i in starts])
    torch.testing.assert_close(x, expected_x)
    torch.testing.assert_close(y, expected_y)
    torch.testing.assert_close(x[:, 1:], y[:, :-1])


def test_get_batch_is_reproducible_with_a_generator_and_covers_the_last_token():
    ids = torch.arange(6)
    x1, y1 = data.get_batch(ids, 5, 3, generator=torch.Generator().manual_seed(0))
    x2, y2 = data.get_batch(ids, 5, 3, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(x1, x2)
    torch.testing.assert_close(y1, y2)
    # With 6 tokens and block_size 5 there is exactly one window.
    torch.testing.assert_close(x1, torch.arange(5).repeat(3, 1))
    torch.testing.assert_close(y1, torch.arange(1, 6).repeat(3, 1))


def test_get_batch_accepts_int32_and_numpy_and_moves_to_device():
    x, y = data.get_batch(np.arange(20, dtype=np.int32), 4, 2, device="cpu")
    assert x.dtype == torch.long and x.device.type == "cpu", f"got {x.dtype} on {x.device}"
    torch.testing.assert_close(y - x, torch.ones(2, 4, dtype=torch.long))


def test_get_batch_errors():
    with pytest.raises(ValueError, match=r"too short for block_size=8: it has 8 tokens.*at least block_size \+ 1 = 9"):
        data.get_batch(torch.arange(8), 8, 2)
    with pytest.raises(ValueError, match=r"must be 1-D.*got shape \(2, 10\)"):
        data.get_batch(torch.zeros(2, 10, dtype=torch.long), 4, 2)
    with pytest.raises(ValueError, match=r"integer token ids, got dtype torch.float32"):
        data.get_batch(torch.zeros(10), 4, 2)
    with pytest.raises(TypeError, match=r"1-D torch tensor of token ids, got list"):
        data.get_batch([1, 2, 3, 4, 5], 2, 2)
    with pytest.raises(ValueError, match=r"block_size must be a positive int, got 0"):
        data.get_batch(torch.arange(10), 0, 2)
    with pytest.raises(ValueError, match=r"batch_size must be a positive int, got 2.5"):
        data.get_batch(torch.arange(10), 4, 2.5)


# ------------------------------------------------------------------------------------------------
# tiny_shakespeare: cache and offline behaviour (never touches the network)
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def no_download(monkeypatch):
    """Make any download attempt fail the test."""
    def refuse(url, destination, timeout=None):
        raise AssertionError(f"tiny_shakespeare tried to download {url}")
    monkeypatch.setattr(data, "_download", refuse)


def test_tiny_shakespeare_reads_the_cached_file(tmp_path, shared_data, no_download):
    shutil.copy(shared_data / "tinyshakespeare.txt", tmp_path / data.TINY_SHAKESPEARE_FILE)
    text = data.tiny_shakespeare(cache_dir=tmp_path)
    assert len(text) == SHAKESPEARE_CHARS, f"got {len(text)} characters, expected {SHAKESPEARE_CHARS}"
    assert len(set(text)) == SHAKESPEARE_VOCAB, f"got {len(set(text))} distinct characters"
    assert text.startswith("First Citizen:"), f"starts with {text[:20]!r}"


def test_tiny_shakespeare_uses_course_data_dir(tmp_path, monkeypatch, no_download):
    (tmp_path / data.TINY_SHAKESPEARE_FILE).write_text("To be.\n", encoding="utf-8")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert data.default_cache_dir() == tmp_path
    assert data.tiny_shakespeare() == "To be.\n"


def test_default_cache_dir_without_override(monkeypatch):
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    assert data.default_cache_dir() == Path.home() / ".cache" / "one-hot-to-transformer"


@pytest.fixture
def downloads_allowed(monkeypatch):
    """The suite sets COURSE_NO_DOWNLOAD; these tests fake or serve the download locally, so lift it."""
    monkeypatch.delenv("COURSE_NO_DOWNLOAD", raising=False)


def test_no_download_setting_refuses_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_NO_DOWNLOAD", "1")
    monkeypatch.setattr(data, "_download", lambda *a, **k: pytest.fail("tried to download"))
    with pytest.raises(RuntimeError, match="COURSE_NO_DOWNLOAD is set"):
        data.tiny_shakespeare(cache_dir=tmp_path)


@pytest.mark.usefixtures("downloads_allowed")
def test_tiny_shakespeare_downloads_once_then_reads_the_cache(tmp_path, monkeypatch):
    calls = []

    def fake_download(url, destination, timeout=None, sha256=None):
        calls.append(url)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text("First Citizen:\nSpeak.\n", encoding="utf-8")

    monkeypatch.setattr(data, "_download", fake_download)
    cache = tmp_path / "new" / "cache"
    assert data.tiny_shakespeare(cache_dir=cache) == "First Citizen:\nSpeak.\n"
    assert data.tiny_shakespeare(cache_dir=cache) == "First Citizen:\nSpeak.\n"
    assert calls == [data.TINY_SHAKESPEARE_URL], f"expected one download, got {calls}"


@pytest.mark.usefixtures("downloads_allowed")
def test_download_writes_the_file_from_a_local_url(tmp_path):
    # A file:// URL exercises the real urllib code path without any network.
    source = tmp_path / "source.txt"
    source.write_text("Before we proceed any further, hear me speak.\n", encoding="utf-8")
    text = data.tiny_shakespeare(cache_dir=tmp_path / "cache", url=source.as_uri())
    assert text == "Before we proceed any further, hear me speak.\n"
    assert (tmp_path / "cache" / data.TINY_SHAKESPEARE_FILE).is_file()
    assert not list((tmp_path / "cache").glob("*.part")), "temporary download files left behind"


@pytest.mark.usefixtures("downloads_allowed")
def test_tiny_shakespeare_offline_error_says_what_to_do(tmp_path):
    missing = (tmp_path / "no-such-file.txt").as_uri()
    with pytest.raises(RuntimeError, match=r"could not download tiny Shakespeare from file://") as info:
        data.tiny_shakespeare(cache_dir=tmp_path / "cache", url=missing)
    message = str(info.value)
    assert missing in message, message
    assert str(tmp_path / "cache" / data.TINY_SHAKESPEARE_FILE) in message and "by hand" in message, message
    assert not (tmp_path / "cache" / data.TINY_SHAKESPEARE_FILE).exists(), "a failed download left a file"


@pytest.mark.usefixtures("downloads_allowed")
def test_tiny_shakespeare_invalid_url_is_a_runtime_error(tmp_path):
    with pytest.raises(RuntimeError, match=r"could not download tiny Shakespeare from not-a-url"):
        data.tiny_shakespeare(cache_dir=tmp_path, url="not-a-url")


@pytest.mark.usefixtures("downloads_allowed")
def test_tiny_shakespeare_network_failure_is_a_runtime_error(tmp_path, monkeypatch):
    import urllib.error

    def unreachable(url, timeout=None):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(data.urllib.request, "urlopen", unreachable)
    with pytest.raises(RuntimeError, match=r"could not download .*URLError.*name resolution.*by hand"):
        data.tiny_shakespeare(cache_dir=tmp_path)


# ------------------------------------------------------------------------------------------------
# WikiText-2 and GPT-2's vocabulary: read from the cache, refused when the download is not the file
# ------------------------------------------------------------------------------------------------

def test_wikitext2_reads_both_splits_from_the_reference_data(shared_data, no_download):
    sizes = {}
    for split in ("valid", "test"):
        sentences = data.wikitext_sentences(data.wikitext2(split))
        sizes[split] = sum(len(s) for s in sentences)
        assert all(s and not s[0].startswith("=") for s in sentences), "headings and blank lines are dropped"
    # 455k words in the two files, less the heading lines
    assert 200_000 < sizes["valid"] < 214_000 and 230_000 < sizes["test"] < 242_000, sizes


def test_wikitext2_names_the_splits_it_knows(tmp_path):
    with pytest.raises(ValueError, match=r"one of \['test', 'valid'\], got 'train'"):
        data.wikitext2("train", cache_dir=tmp_path)


def test_gpt2_vocabulary_has_50257_tokens_and_50000_merges_in_order(shared_data, no_download):
    encoder, merges = data.gpt2_vocabulary()
    assert len(encoder) == 50_257 and len(merges) == 50_000, (len(encoder), len(merges))
    assert merges[0] == ("Ġ", "t") and encoder["<|endoftext|>"] == 50_256 and encoder["Ġthe"] == 262


@pytest.mark.usefixtures("downloads_allowed")
def test_a_download_with_the_wrong_hash_is_refused_and_not_cached(tmp_path):
    source = tmp_path / "evil.txt"
    source.write_text("<html>proxy error</html>", encoding="utf-8")
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="SHA-256") as err:
        data.cached_file("wikitext-2/valid.txt", source.as_uri(), cache, sha256=data.WIKITEXT2_SHA256["valid"])
    assert "by hand" in str(err.value), str(err.value)
    assert not (cache / "wikitext-2" / "valid.txt").exists(), "a refused download must not be cached"
