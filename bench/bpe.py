"""Lesson 05: byte-pair encoding, the course's `BPETokenizer` against the `tokenizers` library.

Both are trained on the same 1 MB (the first 1,000,000 characters of Tiny Shakespeare) with the
same vocabulary (256 bytes + 1,000 merges), in this process, alternately; then both encode the
held-out rest (about 115 KB) and we count bytes per token (higher = better compression). The
course's trainer is plain Python with incremental pair counts; the library's is Rust, on all cores.

    python -c "from bench import bpe; print(bpe.run())"
"""
from __future__ import annotations

import statistics
import time

N_CHARS = 1_000_000  # the training text
N_MERGES = 1000


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(repeat: int = 3) -> list[dict]:
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
            course_times.append(_seconds(lambda: BPETokenizer(pattern=pattern).train(train_text, vocab_size)))
            hf_times.append(_seconds(lambda: train_hf_bpe(train_text, vocab_size, gpt2_split=pattern == GPT2_SPLIT)))
        ours = BPETokenizer(pattern=pattern).train(train_text, vocab_size)
        hf = train_hf_bpe(train_text, vocab_size, gpt2_split=pattern == GPT2_SPLIT)
        ours_ids, hf_ids = ours.encode(held_out), hf.encode(held_out).ids
        assert ours.decode(ours_ids) == held_out and hf.decode(hf_ids) == held_out, "a tokenizer lost text on the round trip"
        course_s, hf_s = statistics.median(course_times), statistics.median(hf_times)
        rows.append({
            "what": f"BPE training, {N_MERGES:,} merges on 1 MB of Tiny Shakespeare ({label})",
            "reference": "tokenizers (Rust, all cores)",
            "course": f"{course_s:.2f} s",
            "reference time": f"{hf_s:.2f} s",
            "ratio": f"{course_s / hf_s:.2f}x",
            "bytes/token held out (course / reference)": f"{n_bytes / len(ours_ids):.3f} / {n_bytes / len(hf_ids):.3f}",
        })
    return rows


if __name__ == "__main__":
    for row in run():
        print("  ".join(f"{k}: {v}" for k, v in row.items()))
