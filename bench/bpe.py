"""Lesson 05: byte-pair encoding, the course's `BPETokenizer` against the `tokenizers` library and tiktoken.

Training: both are trained on the same 1 MB (the first 1,000,000 characters of Tiny Shakespeare) with
the same vocabulary (256 bytes + 1,000 merges), in this process, alternately; then both encode the
held-out rest (about 115 KB) and we count bytes per token (higher = better compression). The
course's trainer is plain Python with incremental pair counts; the library's is Rust, on all cores.

Encoding with GPT-2's published vocabulary: the course's tokenizer loaded with GPT-2's 50,000 merges
against OpenAI's tiktoken built from the same two files, on WikiText-2's validation articles
(1.1 MB), timed alternately; the ids must be identical.

    python -c "from bench import bpe; print(bpe.run())"
"""

from __future__ import annotations

import os
import statistics
import time

N_CHARS = 1_000_000  # the training text
N_MERGES = 1000


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _training_rows(repeat: int) -> list[dict]:
    from course_lib.data import tiny_shakespeare
    from course_lib.tokenizers import GPT2_SPLIT, LINES, N_BYTES, BPETokenizer, train_hf_bpe, utf8

    text = tiny_shakespeare()
    train_text, held_out = text[:N_CHARS], text[N_CHARS:]
    n_bytes = len(utf8(held_out))
    vocab_size = N_BYTES + N_MERGES
    rows = []
    for pattern, label in ((LINES, "each line a chunk, no regex split"), (GPT2_SPLIT, "GPT-2's regex split")):
        course_times, hf_times = [], []
        for _ in range(repeat):  # alternate, so that a busy moment on the machine hits both
            course_times.append(_seconds(lambda p=pattern: BPETokenizer(pattern=p).train(train_text, vocab_size)))
            hf_times.append(
                _seconds(lambda split=pattern == GPT2_SPLIT: train_hf_bpe(train_text, vocab_size, gpt2_split=split))
            )
        ours = BPETokenizer(pattern=pattern).train(train_text, vocab_size)
        hf = train_hf_bpe(train_text, vocab_size, gpt2_split=pattern == GPT2_SPLIT)
        ours_ids, hf_ids = ours.encode(held_out), hf.encode(held_out).ids
        assert ours.decode(ours_ids) == held_out and hf.decode(hf_ids) == held_out, "a tokenizer lost text"
        course_s, hf_s = statistics.median(course_times), statistics.median(hf_times)
        rows.append(
            {
                "what": f"BPE training, {N_MERGES:,} merges on 1 MB of Tiny Shakespeare ({label})",
                "reference": "tokenizers (Rust, all cores)",
                "course": f"{course_s:.2f} s",
                "reference time": f"{hf_s:.2f} s",
                "ratio": f"{course_s / hf_s:.2f}x",
                "bytes/token held out (course / reference)": (
                    f"{n_bytes / len(ours_ids):.3f} / {n_bytes / len(hf_ids):.3f}"
                ),
            }
        )
    return rows


def _gpt2_row(repeat: int) -> dict:
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str

    from course_lib.data import gpt2_files, wikitext2
    from course_lib.tokenizers import gpt2_tokenizer, utf8

    encoder_json, vocab_bpe = gpt2_files()
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files; write no cached copy
    try:
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(vocab_bpe), encoder_json_file=str(encoder_json)
        )
    finally:
        if cache is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = cache
    reference = tiktoken.Encoding(
        name="gpt2-local", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256}
    )
    ours = gpt2_tokenizer()
    text = wikitext2("valid")
    course_times, reference_times = [], []
    for _ in range(repeat):
        course_times.append(_seconds(lambda: ours.encode(text)))
        reference_times.append(_seconds(lambda: reference.encode_ordinary(text)))
    ids = ours.encode(text)
    assert ids == reference.encode_ordinary(text), "the course's GPT-2 ids differ from tiktoken's"
    course_s, reference_s = statistics.median(course_times), statistics.median(reference_times)
    bpt = len(utf8(text)) / len(ids)
    return {
        "what": f"encoding 1.1 MB of WikiText-2 with GPT-2's 50,000 merges ({len(ids):,} tokens, the same ids)",
        "reference": "tiktoken (Rust, one thread)",
        "course": f"{course_s:.2f} s",
        "reference time": f"{reference_s:.2f} s",
        "ratio": f"{course_s / reference_s:.2f}x",
        "bytes/token held out (course / reference)": f"{bpt:.3f} / {bpt:.3f}",
    }


def run(repeat: int = 3) -> list[dict]:
    return _training_rows(repeat) + [_gpt2_row(repeat)]


if __name__ == "__main__":
    for row in run():
        print("  ".join(f"{k}: {v}" for k, v in row.items()))
