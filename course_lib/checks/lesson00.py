"""Checks for the lesson 00 exercises (welcome): reference functions, mistake tables and one
check per exercise."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from .core import (call, check_close, check_count, check_shape, check_true, check_type, function_name, passed)


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
        check_shape(shown, first, (5,))
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


def check_rnn_steps(name: str, value: Any, first: int, last: int) -> None:
    """Sequential RNN steps for word `first`'s information to reach word `last`: last - first."""
    steps = last - first
    check_count(name, value, steps, {
        "counted the words from one to the other, both included, instead of the steps between them": steps + 1,
        "gave self-attention's answer (one step); an RNN must pass through every word in between": 1,
        "counted only the words strictly between them; the last hop into the final word is a step too": steps - 1,
    }, hint=f"the hidden state moves one word per step: word {first} -> word {first + 1} -> ... -> word {last}.")


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
        "forgot the +1 for the centre position (each layer adds k - 1 positions to ONE starting position)": layers * (k - 1),
        "multiplied the layers by the kernel size (neighbouring windows overlap: each layer adds only k - 1)": layers * k,
        "made it grow exponentially; stacked ordinary convolutions grow linearly (exponential growth needs dilation)": k**layers,
        "added k - 1 once too often (a single layer sees exactly k positions)": 1 + (layers + 1) * (k - 1),
    })


def _layers_needed(distance: int, kernel_size: int) -> int:
    return -(-distance // (kernel_size - 1))  # ceil(d / (k - 1)) without floats


def check_layers_needed(fn: Callable, cases: Sequence[tuple[int, int]] = ((2, 3), (10, 3), (9, 5)),
                        name: str = "layers_needed") -> None:
    """The learner's `layers_needed(distance, kernel_size)`: fewest layers with 1 + L (k - 1) >= d + 1."""
    _counting_function(name, fn, cases, _layers_needed, lambda d, k: {
        "rounded down: with that many layers the two words are still just out of each other's reach": d // (k - 1),
        "required the receptive field to span d positions instead of d + 1 (both words must be inside it)": -(-(d - 1) // (k - 1)),
        "divided by the kernel size k instead of the k - 1 new positions each layer adds": -(-d // k),
        "added one layer too many": _layers_needed(d, k) + 1,
    }, hint=lambda d, k: f"find the smallest L with 1 + L * ({k} - 1) >= {d} + 1.")


def check_patches(name: str, value: Any, image_size: int = 224, patch_size: int = 16, class_token: bool = False) -> None:
    """How many patch_size x patch_size patches tile a square image (+1 with a class token)."""
    per_side = image_size // patch_size
    want = per_side * per_side + (1 if class_token else 0)
    mistakes = {
        "counted the patches along one side only (the image is a grid: side x side)": per_side + (1 if class_token else 0),
        "divided the number of pixels by the patch side instead of the patch area (16 x 16 = 256 pixels)":
            image_size * image_size // patch_size + (1 if class_token else 0),
    }
    if class_token:
        mistakes["forgot the class token that is added in front of the patches"] = per_side * per_side
        mistakes["added the class token twice"] = per_side * per_side + 2
    else:
        mistakes["added the class token; this question asks for the patches alone"] = per_side * per_side + 1
    check_count(name, value, want, mistakes,
               hint=f"a {image_size} x {image_size} image is a grid of ({image_size} / {patch_size}) x ({image_size} / {patch_size}) patches.")


def _patch_count(height: int, width: int, patch: int) -> int:
    return (height // patch) * (width // patch)


def _patch_count_mistakes(h: int, w: int, p: int) -> dict[str, int]:
    mistakes = {
        "kept the bug: the pixel count was divided by the patch side, not by the patch area": (h * w) // p,
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


def check_patch_count(fn: Callable, cases: Sequence[tuple[int, int, int]] = ((224, 224, 16), (224, 320, 16), (250, 250, 16), (32, 32, 8)),
                      name: str = "patch_count") -> None:
    """The learner's fixed `patch_count(height, width, patch)` = (H // p) * (W // p)."""
    _counting_function(name, fn, cases, _patch_count, _patch_count_mistakes)


def check_attention_steps(name: str, value: Any, n_words: int) -> None:
    """Steps for word 1 and word n to interact in one self-attention layer: always 1."""
    check_count(name, value, 1, {
        "gave the RNN's count: in self-attention every word looks at every other word directly": n_words - 1,
        "counted the words: the distance between positions does not matter to attention": n_words,
        "answered 0; the two words interact in one step, through one attention weight": 0,
    })
