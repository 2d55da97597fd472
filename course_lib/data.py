"""The course's text data: bundled corpora, a train/validation split, batches for language models,
and real text downloaded once (Tiny Shakespeare, WikiText-2, GPT-2's vocabulary).

The bundled corpora live in ``course_lib/corpora/`` as plain text, one sentence per line. They were
written for this course (see ``course_lib/corpora/README.md``):

- ``commands``: the voice commands of lesson 02, counted so that a first-order model gives
  directories / files / photos = 20% / 30% / 50% after "my", and down / please = 40% / 60% after "ran";
- ``commands_long``: the two long commands of lesson 03, 50/50;
- ``english``: about 130,000 words of simple English sentences (made by ``corpora/make_english.py``) in
  which king/queen, man/woman, paris/france, rome/italy... appear in parallel contexts, so that
  counting models, word2vec, BPE and a small GPT all have something to learn.

Real text is not bundled: ``tiny_shakespeare()``, ``wikitext2()`` and GPT-2's vocabulary
(``gpt2_vocabulary()``) are downloaded once and then read from a cache folder (``$COURSE_DATA_DIR``
or ``~/.cache/one-hot-to-transformer``).

Typical use::

    from course_lib.data import load_sentences, train_val_split, get_batch
    sentences = load_sentences("english")             # [["the", "king", "ruled", ...], ...]
    train, val = train_val_split(sentences)            # the last 10% is validation
    x, y = get_batch(token_ids, block_size=8, batch_size=4)   # (4, 8) each, y is x shifted by one

Lesson 10's made-up translation task is generated, not read: it lives in `course_lib.translation`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import torch

from course_lib._validate import check_int, is_number

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"  # the bundled corpora (a data-only folder)

# The standard tiny Shakespeare file (40,000 lines of the plays, 1,115,394 characters, 65 distinct).
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINY_SHAKESPEARE_FILE = "tinyshakespeare.txt"
DOWNLOAD_TIMEOUT_S = 30  # seconds; a stalled connection should fail, not hang a lesson forever

# A word is a run of letters, digits and apostrophes ("don't" stays one word); everything else
# (spaces, punctuation) separates words and is dropped.
_WORD = re.compile(r"[a-z0-9']+", re.IGNORECASE)


# ------------------------------------------------------------------------------------------------
# Bundled corpora
# ------------------------------------------------------------------------------------------------

def available_corpora() -> list[str]:
    """The names of the bundled corpora (the .txt files in course_lib/corpora/), sorted."""
    return sorted(path.stem for path in CORPORA_DIR.glob("*.txt"))


def load_corpus(name: str) -> str:
    """The raw text of a bundled corpus: one sentence per line.

    >>> load_corpus("commands").splitlines()[0]
    'show me my photos please'
    """
    names = available_corpora()
    if name not in names:
        raise ValueError(f"unknown corpus {name!r}; available: {', '.join(names)}")
    return (CORPORA_DIR / f"{name}.txt").read_text(encoding="utf-8")


def tokenize(line: str, lowercase: bool = True) -> list[str]:
    """Split a line into words: runs of letters, digits and apostrophes; punctuation is dropped."""
    if lowercase:
        line = line.lower()
    return _WORD.findall(line)


def load_sentences(name: str, lowercase: bool = True) -> list[list[str]]:
    """A bundled corpus as a list of sentences, each a list of words (one per non-empty line).

    >>> load_sentences("commands")[0]
    ['show', 'me', 'my', 'photos', 'please']
    """
    sentences = [tokenize(line, lowercase) for line in load_corpus(name).splitlines()]
    return [words for words in sentences if words]


# ------------------------------------------------------------------------------------------------
# Splitting and batching
# ------------------------------------------------------------------------------------------------

def train_val_split(items, val_fraction: float = 0.1):
    """Split a str, list or 1-D tensor into (train, val) WITHOUT shuffling: the last `val_fraction`
    is the validation part.

    Text is not shuffled on purpose: neighbouring sentences are alike, so a shuffled split would put
    near-copies of the training text into validation and flatter the model.
    """
    if not is_number(val_fraction) or not (
        0.0 < float(val_fraction) < 1.0
    ):
        raise ValueError(f"val_fraction must be a number strictly between 0 and 1, got {val_fraction!r}")
    n_train = int(len(items) * (1.0 - val_fraction))  # same rounding as nanoGPT's int(0.9 * n)
    return items[:n_train], items[n_train:]


def get_batch(
    data: torch.Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random batch of training windows from a 1-D sequence of token ids (nanoGPT style).

    Each row of `x` is `block_size` consecutive tokens starting at a random offset; the same row of
    `y` is the window shifted one step to the right, i.e. the token that follows each position of
    `x`. So one row gives `block_size` training examples: predict y[b, t] from x[b, : t + 1].

    Returns `(x, y)`, two LongTensors of shape (batch_size, block_size) on `device` (default: the
    device of `data`). Pass a seeded `torch.Generator` (on the CPU) for reproducible batches.
    """
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if not isinstance(data, torch.Tensor):
        raise TypeError(
            f"data must be a 1-D torch tensor of token ids, got {type(data).__name__}; "
            "use torch.tensor(ids, dtype=torch.long)"
        )
    if data.dim() != 1:
        raise ValueError(f"data must be 1-D (a single sequence of token ids), got shape {tuple(data.shape)}")
    if data.dtype.is_floating_point or data.dtype.is_complex or data.dtype == torch.bool:
        raise ValueError(f"data must hold integer token ids, got dtype {data.dtype}")
    check_int("block_size", block_size)
    check_int("batch_size", batch_size)
    if len(data) < block_size + 1:
        # A window needs block_size inputs plus one more token for the last target.
        raise ValueError(
            f"data is too short for block_size={block_size}: it has {len(data)} tokens, "
            f"but a window needs at least block_size + 1 = {block_size + 1}"
        )

    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    index = (starts[:, None] + offsets[None, :]).to(data.device)  # (B, T)
    x = data[index].long()  # (B, T)
    y = data[index + 1].long()  # (B, T), the next token at every position
    if device is not None:
        x, y = x.to(device), y.to(device)
    return x, y


# ------------------------------------------------------------------------------------------------
# Tiny Shakespeare (downloaded once, then cached)
# ------------------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """Where downloaded data is kept: $COURSE_DATA_DIR if set, else ~/.cache/one-hot-to-transformer."""
    override = os.environ.get("COURSE_DATA_DIR")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "one-hot-to-transformer"


def _download(url: str, destination: Path, timeout: float = DOWNLOAD_TIMEOUT_S, sha256: str | None = None) -> None:
    """Fetch `url` into `destination`. Written to a temporary file first and then renamed, so an
    interrupted download never leaves a truncated file that would be mistaken for the real one; with
    `sha256`, a file whose hash differs (a proxy's error page, a changed upstream file) is refused."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        payload = response.read()
    if not payload:
        raise OSError(f"the server sent an empty file for {url}")
    if sha256 is not None and hashlib.sha256(payload).hexdigest() != sha256:
        raise OSError(
            f"the file from {url} has SHA-256 {hashlib.sha256(payload).hexdigest()}, expected {sha256}: "
            "it is not the file the course was tested with"
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=destination.parent, prefix=destination.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(payload)
        os.replace(tmp_name, destination)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def cached_file(name: str, url: str, cache_dir: str | os.PathLike | None = None, *, what: str | None = None,
                sha256: str | None = None) -> Path:
    """The path of the data file `name` (e.g. "wikitext-2/valid.txt") in the cache folder, downloaded
    from `url` the first time. Later calls never touch the network. Offline, or with COURSE_NO_DOWNLOAD
    set (the test suite), a missing file raises a RuntimeError that says where to put it by hand."""
    what = what or name
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path = base / name
    if path.is_file():
        return path
    if os.environ.get("COURSE_NO_DOWNLOAD"):  # set by the test suite: never touch the network
        raise RuntimeError(f"{what} is not at {path}, and COURSE_NO_DOWNLOAD is set, so it is not downloaded")
    try:
        _download(url, path, sha256=sha256)
    except Exception as error:  # URLError, timeouts, invalid URLs, a read-only disk, a wrong hash...
        raise RuntimeError(
            f"could not download {what} from {url} ({type(error).__name__}: {error}). "
            f"If you are offline, download that file on another machine and put it at {path} "
            "by hand; it is read from there from then on."
        ) from error
    return path


def tiny_shakespeare(cache_dir: str | os.PathLike | None = None, url: str = TINY_SHAKESPEARE_URL) -> str:
    """The tiny Shakespeare text (1,115,394 characters, 65 distinct ones).

    The first call downloads it from `url` into `cache_dir` (default: see `default_cache_dir`);
    later calls read the cached copy and never touch the network. Offline, it raises a RuntimeError
    that says where to put the file by hand.
    """
    path = cached_file(TINY_SHAKESPEARE_FILE, url, cache_dir, what="tiny Shakespeare")
    return path.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# Real text and a real vocabulary: WikiText-2 (lessons 04 and 05) and GPT-2's BPE files (lesson 05)
# ------------------------------------------------------------------------------------------------

# WikiText-2 (Merity et al. 2016; Wikipedia's Good and Featured articles, CC BY-SA 3.0), as PyTorch's
# word_language_model example ships it: already tokenised, one paragraph per line, rare words
# replaced by <unk>. Only the validation and test articles (455k words) are used: the training
# file (2.1M words) is more than a lesson needs.
WIKITEXT2_URL = "https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2/{split}.txt"
WIKITEXT2_SHA256 = {
    "valid": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
    "test": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
}

# GPT-2's byte-level BPE, as OpenAI publishes it (the same files and hashes tiktoken uses).
GPT2_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/{name}"
GPT2_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}


def wikitext2(split: str = "valid", cache_dir: str | os.PathLike | None = None) -> str:
    """The raw text of WikiText-2's "valid" (214k words) or "test" (241k words) articles.

    Downloaded once (about 1.2 MB each) like `tiny_shakespeare`. The text is tokenised already:
    words and punctuation are separated by spaces, headings look like " = Title = ", and rare words
    are "<unk>". `wikitext_sentences` turns it into token lists.
    """
    if split not in WIKITEXT2_SHA256:
        raise ValueError(f"WikiText-2 split must be one of {sorted(WIKITEXT2_SHA256)}, got {split!r}")
    path = cached_file(f"wikitext-2/{split}.txt", WIKITEXT2_URL.format(split=split), cache_dir,
                       what=f"WikiText-2's {split} split", sha256=WIKITEXT2_SHA256[split])
    return path.read_text(encoding="utf-8")


def wikitext_sentences(text: str, lowercase: bool = True) -> list[list[str]]:
    """WikiText-2 text as a list of token lists, one per paragraph line, headings dropped.

    Tokens are the file's own (it is tokenised already); `lowercase` folds case, as word2vec
    set-ups for small corpora usually do. "@-@" style joiners and punctuation are kept as tokens.
    """
    sentences = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("="):  # blank lines and " = Heading = " lines
            continue
        sentences.append((line.lower() if lowercase else line).split())
    return sentences


def gpt2_files(cache_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """The paths of GPT-2's `encoder.json` (50,257 tokens -> ids) and `vocab.bpe` (its 50,000 merges,
    in order), downloaded once (about 1.5 MB together)."""
    paths = []
    for name in ("encoder.json", "vocab.bpe"):
        paths.append(cached_file(f"gpt2/{name}", GPT2_URL.format(name=name), cache_dir,
                                 what=f"GPT-2's {name}", sha256=GPT2_SHA256[name]))
    return paths[0], paths[1]


def gpt2_vocabulary(cache_dir: str | os.PathLike | None = None) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """GPT-2's published vocabulary: (encoder, merges).

    `encoder` maps each token, written in GPT-2's byte-to-unicode alphabet (a space is "Ġ"), to its id;
    `merges` lists the 50,000 merges in the order they were learned, as pairs of such strings.
    """
    encoder_path, merges_path = gpt2_files(cache_dir)
    encoder = json.loads(encoder_path.read_text(encoding="utf-8"))
    lines = merges_path.read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]  # line 0 is a "#version" header
    return encoder, merges


def google_analogies(path: str | os.PathLike | None = None, lowercase: bool = True
                     ) -> dict[str, list[tuple[str, str, str, str]]]:
    """Mikolov et al.'s (2013) Google analogy set, by section: {section: [(a, b, c, d), ...]}.

    19,544 questions "a is to b as c is to d" (athens greece baghdad iraq) in 14 sections, in the
    file's order: 5 semantic ("capital-common-countries", "capital-world", "currency",
    "city-in-state", "family") and 9 syntactic ("gram1-adjective-to-adverb" ... "gram9-plural-verbs").
    Read from `path`, by default the copy of `questions-words.txt` that gensim ships in its test data
    (nothing is downloaded). `lowercase` folds case, for vectors trained on lowercased text.
    """
    if path is None:
        try:
            from gensim.test.utils import datapath
        except ImportError:
            raise ImportError("google_analogies() reads questions-words.txt from gensim's test data: install gensim "
                              "(pip install gensim), or pass the path of a copy of the file") from None
        path = datapath("questions-words.txt")
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    current = None
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith(":"):  # ": capital-common-countries" starts a section
            current = line[1:].strip()
            sections[current] = []
            continue
        words = (line.lower() if lowercase else line).split()
        if current is None or len(words) != 4:
            raise ValueError(f"{path}, line {number}: expected a ': section' line or four words, got {line!r}")
        sections[current].append(tuple(words))
    return sections
