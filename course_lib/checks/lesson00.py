"""Checks for the lesson 00 exercises (welcome): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from .core import Seals, call, check_all, check_close, check_count, check_shape, check_true, check_type, passed
from .helpers import function_name


def _reference_sample(seed: int) -> torch.Tensor:
    from course_lib.device import seed_everything

    seed_everything(seed)
    return torch.randn(5)


def check_reproducible_sample(fn: Callable, seeds: Sequence[int] = (0, 7), name: str = "reproducible_sample") -> None:
    """The learner's `reproducible_sample(seed)`: seed everything, then return `torch.randn(5)`."""
    fn_name = function_name(name)
    for seed in seeds:
        first = call(fn_name, fn, seed)
        torch.randn(100)  # move the global generator on: a function that seeds itself does not care
        np.random.rand(100)
        second = call(fn_name, fn, seed)
        shown = f"{fn_name}({seed})"
        check_type(shown, first, torch.Tensor)
        check_shape(shown, first, (5,), quiet=True)
        check_true(shown, bool(torch.equal(first, second)),
                   "two calls with the same seed gave different numbers.",
                   "call seed_everything(seed) INSIDE the function, right before drawing the numbers.")
        want = _reference_sample(seed)
        mistakes = {"used torch.rand (uniform on [0, 1)) instead of torch.randn (normal)": _uniform(seed)}
        if seed != 0:
            mistakes["ignored the `seed` argument (always seeded with 0)"] = _reference_sample(0)
        check_close(shown, first, want, atol=1e-6, rtol=0, mistakes=mistakes, quiet=True,
                    hint="seed with seed_everything(seed), then draw exactly torch.randn(5) and return it.")
    a, b = call(fn_name, fn, seeds[0]), call(fn_name, fn, seeds[0] + 1)
    check_true(name, not torch.equal(a, b), "different seeds gave the same numbers.",
               "pass the `seed` argument on to seed_everything instead of a fixed number.")
    passed(name, f"{len(seeds)} seeds, repeatable")


def _uniform(seed: int) -> torch.Tensor:
    from course_lib.device import seed_everything

    seed_everything(seed)
    return torch.rand(5)


# The answers worked out by hand (exercises 2, 5 and 7) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson00` from solutions/seals/lesson00.py.
SEALS = Seals({
    "rnn_steps_keys_are": (None, "15705ce76b9e5bd686db", {
        "counted the words from one to the other, both included, instead of the steps between them":
            "b0b73653d3a3a51f136f",
        "gave self-attention's answer (one step); an RNN must pass through every word in between":
            "8b3aa47142846b1a7eab",
        "counted only the words strictly between them; the last hop into the final word is a step too":
            "7d444e0dfcd6bdb7b11d",
    }),
    "rnn_steps_1_20": (None, "2e7b8b901ef553bff4bd", {
        "counted the words from one to the other, both included, instead of the steps between them":
            "2240423bf49735bebb01",
        "gave self-attention's answer (one step); an RNN must pass through every word in between":
            "84e2aacff857adaf776c",
        "counted only the words strictly between them; the last hop into the final word is a step too":
            "96826195f4a8d1bec04d",
    }),
    "rnn_steps_1_100": (None, "01a663e28ee28801ddc7", {
        "counted the words from one to the other, both included, instead of the steps between them":
            "2a3e4c7d5bab68d33893",
        "gave self-attention's answer (one step); an RNN must pass through every word in between":
            "fe2bf0ae24d9b460d157",
        "counted only the words strictly between them; the last hop into the final word is a step too":
            "1de6eda5ea8258a59e46",
    }),
    "n_patches": (None, "0c5d04b65321ed181e4e", {
        "counted the patches along one side only (the image is a grid: side x side)": "6201950a313cfcee9b87",
        "added the patches of the two sides; a grid of patches has (patches per side) x (patches per side) of them":
            "df5c011ec5c7de6bafd4",
        "divided the number of pixels by the patch side instead of the patch area (16 x 16 = 256 pixels)":
            "88b31645b8886ce231f2",
        "added the class token; this question asks for the patches alone": "522519001e1a9d64adc4",
    }),
    "seq_len": (None, "133d7111b152ea654ed1", {
        "counted the patches along one side only (the image is a grid: side x side)": "51c7e403678df8ec78d8",
        "added the patches of the two sides; a grid of patches has (patches per side) x (patches per side) of them":
            "dfe07aa4656d1c419c53",
        "divided the number of pixels by the patch side instead of the patch area (16 x 16 = 256 pixels)":
            "070a65cc2a02ffcc6ce6",
        "forgot the class token that is added in front of the patches": "661b30f87a34bc8496d5",
        "added the class token twice": "a51f17f8d96b398bc7c7",
    }),
    "attention_steps_1_20": (None, "f66e5616048594eaf4ad", {
        "gave the RNN's count: in self-attention every word looks at every other word directly": "31e0372e78bbf49597e1",
        "counted the words: the distance between positions does not matter to attention": "1497a656dcecc0c4ba0f",
        "answered 0; the two words interact in one step, through one attention weight": "9ab66c2712d6dca5805a",
    }),
    "attention_steps_1_100": (None, "5eb22a0ee0be86f9639c", {
        "gave the RNN's count: in self-attention every word looks at every other word directly": "3a56b1bdb352a7d38b95",
        "counted the words: the distance between positions does not matter to attention": "d7c6e2ae1a14817bfd6c",
        "answered 0; the two words interact in one step, through one attention weight": "26679c4aa0ecf290ef1a",
    }),
})


def check_rnn_steps(keys_are: Any, one_to_20: Any, one_to_100: Any) -> None:
    """Exercise 2: the sequential steps an RNN needs between two words, each part checked and reported."""
    def hint(first: int, last: int) -> str:
        return f"the hidden state moves one word per step: word {first} -> word {first + 1} -> ... -> word {last}."

    check_all(lambda: SEALS.check("rnn_steps_keys_are", keys_are, "count", hint(2, 19)),
              lambda: SEALS.check("rnn_steps_1_20", one_to_20, "count", hint(1, 20)),
              lambda: SEALS.check("rnn_steps_1_100", one_to_100, "count", hint(1, 100)))


def _receptive_field(num_layers: int, kernel_size: int) -> int:
    return 1 + num_layers * (kernel_size - 1)


def _counting_function(name: str, fn: Callable, cases: Sequence[tuple[int, ...]], reference: Callable,
                           mistakes: Callable[..., dict], hint: Callable[..., str] | None = None) -> None:
    """Call the learner's counting function on each case; name the mistake a wrong count matches."""
    for args in cases:
        shown = f"{function_name(name)}({', '.join(str(a) for a in args)})"
        got = call(function_name(name), fn, *args)
        check_count(shown, got, reference(*args), mistakes(*args), hint=hint(*args) if hint else None, quiet=True)
    passed(name, f"{len(cases)} cases")


def check_receptive_field(fn: Callable, cases: Sequence[tuple[int, int]] = ((1, 3), (2, 3), (4, 5)),
                          name: str = "receptive_field") -> None:
    """The learner's `receptive_field(num_layers, kernel_size)` = 1 + L (k - 1)."""
    _counting_function(name, fn, cases, _receptive_field, lambda layers, k: {
        "forgot the +1 for the centre position (each layer adds k - 1 positions to ONE starting position)":
            layers * (k - 1),
        "multiplied the layers by the kernel size (neighbouring windows overlap: each layer adds only k - 1)":
            layers * k,
        "added k new positions per layer: each layer's window overlaps the positions already covered, so it adds "
        "only k - 1 new ones": 1 + layers * k,
        "made it grow exponentially; stacked ordinary convolutions grow linearly (exponential growth needs dilation)":
            k**layers,
        "added k - 1 once too often (a single layer sees exactly k positions)": 1 + (layers + 1) * (k - 1),
    })


def _layers_needed(distance: int, kernel_size: int) -> int:
    return -(-distance // (kernel_size - 1))  # ceil(d / (k - 1)) without floats


def check_layers_needed(fn: Callable, cases: Sequence[tuple[int, int]] = ((2, 3), (10, 3), (9, 5)),
                        name: str = "layers_needed") -> None:
    """The learner's `layers_needed(distance, kernel_size)`: fewest layers with 1 + L (k - 1) >= d + 1."""
    _counting_function(name, fn, cases, _layers_needed, lambda d, k: {
        "rounded down: with that many layers the two words are still just out of each other's reach": d // (k - 1),
        "required the receptive field to span d positions instead of d + 1 (both words must be inside it)":
            -(-(d - 1) // (k - 1)),
        "divided by the kernel size k instead of the k - 1 new positions each layer adds": -(-d // k),
        "added one layer too many": _layers_needed(d, k) + 1,
    }, hint=lambda d, k: f"find the smallest L with 1 + L * ({k} - 1) >= {d} + 1.")


def check_patches(n_patches: Any, seq_len: Any) -> None:
    """Exercise 5: the patches of a 224 x 224 image cut into 16 x 16 squares, and the sequence the ViT reads."""
    hint = "a 224 x 224 image is a grid of (224 / 16) x (224 / 16) patches."
    check_all(lambda: SEALS.check("n_patches", n_patches, "count", hint),
              lambda: SEALS.check("seq_len", seq_len, "count", hint + " The class token comes on top of them."))


def _patch_count(height: int, width: int, patch: int) -> int:
    return (height // patch) * (width // patch)


def _patch_count_mistakes(h: int, w: int, p: int) -> dict[str, int]:
    mistakes = {
        "kept the bug: the pixel count was divided by the patch side, not by the patch area": (h * w) // p,
        "divided the pixel count by the patch area, (h * w) // (p * p): that also counts the pixels of the rows and "
        "columns that do not fill a whole patch. Count whole patches per side first: (h // p) * (w // p)":
            (h * w) // (p * p),
        "assumed a square image (used the height twice)": (h // p) ** 2,
        "assumed a square image (used the width twice)": (w // p) ** 2,
    }
    rounded, ceiled = round(h / p) * round(w / p), -(-h // p) * -(-w // p)
    if rounded == ceiled:  # e.g. 250 / 16 = 15.6: round() and ceil both give 16
        mistakes["counted partial patches at the border (rounded h / p up, with round() or math.ceil); "
                 "patches that do not fit are dropped, so round down with //"] = ceiled
    else:
        mistakes["rounded h / p to the nearest whole number with round(); a partial patch at the border "
                 "does not fit and is dropped, so round down with //"] = rounded
        mistakes["counted partial patches at the border; patches that do not fit are dropped"] = ceiled
    return mistakes


def check_patch_count(fn: Callable,
                      cases: Sequence[tuple[int, int, int]] = ((224, 224, 16), (224, 320, 16), (250, 250, 16),
                                                               (32, 32, 8)),
                      name: str = "patch_count") -> None:
    """The learner's fixed `patch_count(height, width, patch)` = (H // p) * (W // p)."""
    _counting_function(name, fn, cases, _patch_count, _patch_count_mistakes)


def check_attention_steps(one_to_20: Any, one_to_100: Any) -> None:
    """Exercise 7: the steps between word 1 and word n in one self-attention layer."""
    hint = "in one attention layer every word reads every other word through its own attention weight."
    check_all(lambda: SEALS.check("attention_steps_1_20", one_to_20, "count", hint),
              lambda: SEALS.check("attention_steps_1_100", one_to_100, "count", hint))
