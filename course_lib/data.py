"""The course's text data: bundled corpora, a train/validation split, batches for language models,
and tiny Shakespeare.

The bundled corpora live in ``course_lib/data/`` as plain text, one sentence per line. They were
written for this course (see ``course_lib/data/README.md``):

- ``commands``: the voice commands of lesson 02, counted so that a first-order model gives
  directories / files / photos = 20% / 30% / 50% after "my", and down / please = 40% / 60% after "ran";
- ``commands_long``: the two long commands of lesson 03, 50/50;
- ``english``: about 130,000 words of simple English sentences (made by ``data/make_english.py``) in
  which king/queen, man/woman, paris/france, rome/italy... appear in parallel contexts, so that
  counting models, word2vec, BPE and a small GPT all have something to learn.

Tiny Shakespeare (about 1 MB) is not bundled: ``tiny_shakespeare()`` downloads it once and then reads
it from a cache folder.

Typical use::

    from course_lib.data import load_sentences, train_val_split, get_batch
    sentences = load_sentences("english")             # [["the", "king", "ruled", ...], ...]
    train, val = train_val_split(sentences)            # the last 10% is validation
    x, y = get_batch(token_ids, block_size=8, batch_size=4)   # (4, 8) each, y is x shifted by one
"""
from __future__ import annotations

import os
import re
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import torch

DATA_DIR = Path(__file__).resolve().parent / "data"

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
    """The names of the bundled corpora (the .txt files in course_lib/data/), sorted."""
    return sorted(path.stem for path in DATA_DIR.glob("*.txt"))


def load_corpus(name: str) -> str:
    """The raw text of a bundled corpus: one sentence per line.

    >>> load_corpus("commands").splitlines()[0]
    'show me my photos please'
    """
    names = available_corpora()
    if name not in names:
        raise ValueError(f"unknown corpus {name!r}; available: {', '.join(names)}")
    return (DATA_DIR / f"{name}.txt").read_text(encoding="utf-8")


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
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not (
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
    for label, value in [("block_size", block_size), ("batch_size", batch_size)]:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
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


def _download(url: str, destination: Path, timeout: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Fetch `url` into `destination`. Written to a temporary file first and then renamed, so an
    interrupted download never leaves a truncated file that would be mistaken for the real one."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        payload = response.read()
    if not payload:
        raise OSError(f"the server sent an empty file for {url}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=destination.parent, prefix=destination.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(payload)
        os.replace(tmp_name, destination)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def tiny_shakespeare(cache_dir: str | os.PathLike | None = None, url: str = TINY_SHAKESPEARE_URL) -> str:
    """The tiny Shakespeare text (1,115,394 characters, 65 distinct ones).

    The first call downloads it from `url` into `cache_dir` (default: see `default_cache_dir`);
    later calls read the cached copy and never touch the network. Offline, it raises a RuntimeError
    that says where to put the file by hand.
    """
    path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path = path / TINY_SHAKESPEARE_FILE
    if not path.is_file():
        if os.environ.get("COURSE_NO_DOWNLOAD"):  # set by the test suite: never touch the network
            raise RuntimeError(f"tiny Shakespeare is not at {path}, and COURSE_NO_DOWNLOAD is set, so it is not downloaded")
        try:
            _download(url, path)
        except Exception as error:  # URLError, timeouts, invalid URLs, a read-only disk...
            raise RuntimeError(
                f"could not download tiny Shakespeare from {url} ({type(error).__name__}: {error}). "
                f"If you are offline, download that file on another machine and put it at {path} "
                "by hand; it is read from there from then on."
            ) from error
    return path.read_text(encoding="utf-8")
