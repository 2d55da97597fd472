"""Lesson 04's word2vec against gensim's, in the same process: speed and quality.

Both train skip-gram with negative sampling with the settings of the lesson, one worker thread:
- on the course's English corpus (50 dimensions, window 4, 5 noise words, 10 epochs). Speed is corpus
  words times epochs over the training time; quality is the share of the analogies the corpus
  generator builds in (all male/female pairs of people, and each pair of columns of the country
  table) whose top answer is right, and how many of the 10 nearest neighbours of the same words the
  two models share;
- on real English, WikiText-2's validation and test articles (the lesson's section 9: 445k tokens,
  window 4, words seen at least 5 times, 3 epochs), when ../shared/data or the cache holds them.
  Quality is the Google analogy set restricted to the vocabulary, and the share of the 10 nearest
  neighbours of the 100 most frequent words that the course shares with gensim, next to what two
  gensim runs (other seeds, their own shuffled paragraph orders) share with each other.
gensim's inner loop is compiled C; the course's is Python and torch, one batch of pairs at a time.

`run()` returns the rows; `python -m bench.word2vec` prints them.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

GENERATOR = Path(__file__).resolve().parents[1] / "course_lib" / "corpora" / "make_english.py"
SETTINGS = dict(dim=50, window=4, negatives=5, epochs=10, seed=0)
REAL_SETTINGS = dict(dim=50, window=4, negatives=5, epochs=3, min_count=5)  # lesson 04, section 9


def guaranteed_analogies() -> list[tuple[str, str, str, str]]:
    """Every analogy a : b :: c : d built into the corpus, from the generator's own word lists."""
    from course_lib.word2vec import analogy_questions

    spec = importlib.util.spec_from_file_location("make_english", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    relations = [gen.ADULTS + gen.YOUNG + gen.NAMES]  # male -> female
    for i in range(4):  # country, capital, language, dish: each pair of columns
        for j in range(i + 1, 4):
            relations.append([(row[i], row[j]) for row in gen.COUNTRIES])
    return [q for pairs in relations for q in analogy_questions(pairs)]


def _overlap(a, b, words: list[str], k: int = 10) -> float:
    shared = [len({w for w, _ in a.most_similar(x, k)} & {w for w, _ in b.most_similar(x, k)}) for x in words]
    return sum(shared) / (k * len(words))


def _real_text_rows() -> list[dict]:
    """The rows for WikiText-2 (none when the text is not available offline)."""
    import random

    import torch
    from gensim.models import Word2Vec

    from course_lib.data import google_analogies, wikitext2, wikitext_sentences
    from course_lib.word2vec import WordVectors, analogy_accuracy, train_word2vec

    try:
        wiki = wikitext_sentences(wikitext2("valid")) + wikitext_sentences(wikitext2("test"))
    except (OSError, RuntimeError) as err:
        return [{"what": "real text (WikiText-2)", "course": "skipped", "gensim": "", "ratio": f"{err}"[:80]}]
    s = dict(REAL_SETTINGS)
    words = sum(map(len, wiki)) * s["epochs"]

    def gensim_run(sentences, seed):
        start = time.perf_counter()
        model = Word2Vec(
            sentences,
            vector_size=s["dim"],
            window=s["window"],
            negative=s["negatives"],
            epochs=s["epochs"],
            min_count=s["min_count"],
            seed=seed,
            sg=1,
            hs=0,
            workers=1,
        )
        return WordVectors(list(model.wv.index_to_key), torch.tensor(model.wv.vectors)), time.perf_counter() - start

    start = time.perf_counter()
    ours = train_word2vec(wiki, **s, seed=0, progress=False)
    ours_s = time.perf_counter() - start
    theirs, gensim_s = gensim_run(wiki, 0)
    others = []
    for seed in (1, 2):
        shuffled = list(wiki)
        random.Random(seed).shuffle(shuffled)
        others.append(gensim_run(shuffled, seed)[0])
    questions = [q for qs in google_analogies().values() for q in qs if all(w in ours for w in q)]
    probes = [w for w in theirs.vocab if w.isalpha()][:100]
    acc_ours, acc_theirs = analogy_accuracy(ours, questions), analogy_accuracy(theirs, questions)
    shared = sum(_overlap(ours, g, probes) for g in others) / 2
    baseline = _overlap(others[0], others[1], probes)
    setting = f"WikiText-2 valid + test, dim {s['dim']}, window {s['window']}, {s['epochs']} epochs"
    return [
        {
            "what": f"word2vec training speed ({setting})",
            "course": f"{words / ours_s:,.0f} words/s",
            "gensim": f"{words / gensim_s:,.0f} words/s",
            "ratio": f"{ours_s / gensim_s:.1f}x",
        },
        {
            "what": f"Google analogy accuracy, the {len(questions):,} questions in the vocabulary ({setting})",
            "course": f"{acc_ours:.4f}",
            "gensim": f"{acc_theirs:.4f}",
            "ratio": f"{acc_ours - acc_theirs:+.4f} (difference)",
        },
        {
            "what": (
                "top-10 neighbours of the 100 most frequent words shared with gensim (two gensim seeds: each other)"
            ),
            "course": f"{shared:.3f}",
            "gensim": f"{baseline:.3f}",
            "ratio": f"{shared / baseline:.2f} (tests need >= 0.8)",
        },
    ]


def run() -> list[dict]:
    import torch
    from gensim.models import Word2Vec

    from course_lib.data import load_sentences
    from course_lib.word2vec import WordVectors, analogy_accuracy, train_word2vec

    sentences = load_sentences("english")
    words = sum(len(s) for s in sentences) * SETTINGS["epochs"]
    questions = guaranteed_analogies()
    probes = sorted({w for q in questions for w in q})
    s = SETTINGS

    start = time.perf_counter()
    ours = train_word2vec(sentences, **s, progress=False)
    ours_s = time.perf_counter() - start

    start = time.perf_counter()
    model = Word2Vec(
        sentences,
        vector_size=s["dim"],
        window=s["window"],
        negative=s["negatives"],
        epochs=s["epochs"],
        seed=s["seed"],
        sg=1,
        hs=0,
        min_count=1,
        workers=1,
    )
    gensim_s = time.perf_counter() - start
    theirs = WordVectors(list(model.wv.index_to_key), torch.tensor(model.wv.vectors))

    acc_ours, acc_theirs = analogy_accuracy(ours, questions), analogy_accuracy(theirs, questions)
    setting = f"dim {s['dim']}, window {s['window']}, {s['negatives']} negatives, {s['epochs']} epochs"
    return [
        {
            "what": f"word2vec training speed ({setting})",
            "course": f"{words / ours_s:,.0f} words/s",
            "gensim": f"{words / gensim_s:,.0f} words/s",
            "ratio": f"{ours_s / gensim_s:.1f}x",
        },
        {
            "what": f"analogy accuracy, {len(questions)} questions built into the corpus",
            "course": f"{acc_ours:.3f}",
            "gensim": f"{acc_theirs:.3f}",
            "ratio": f"{acc_ours / acc_theirs:.3f} (tests need >= 0.9)",
        },
        {
            "what": f"top-10 neighbours shared with gensim, {len(probes)} words",
            "course": f"{_overlap(ours, theirs, probes):.3f}",
            "gensim": "1.000",
            "ratio": "",
        },
    ] + _real_text_rows()


if __name__ == "__main__":
    for row in run():
        print("  ".join(f"{k}: {v}" for k, v in row.items()))
