"""Checks for the lesson 10 exercises (the encoder-decoder): reference functions, mistake tables and one
check per exercise.

Hand-worked answers (shapes, the smoothed target and loss, parameter counts, what the buggy decoder
lets a position see) are stored as seals (see `core.Seals`), never as values. Learner functions and
classes are treated as black boxes: called on plain tensors and lists, a module given its weights
with `load_state_dict`.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
import torch.nn as nn

from .core import CheckFailed, Seals, call, check_all, check_close, passed
from .helpers import short

# The answers worked out by hand (exercises 1, 4, 6 and 7) and the values of the mistakes their hints name,
# kept as seals (see core.Seals), written by `course seal lesson10` from solutions/seals/lesson10.py.
SEALS = Seals({
    "memory_shape": (None, "04ade29087ab0d5fbfcf", {
        "gave one vector per sentence: the encoder keeps one vector per source token, which is what the decoder's "
        "cross-attention looks up":
            "36b5f491aa95e26aa34d",
        "used the target's length: the memory is the encoded SOURCE, one vector per source token":
            "a7f65e8299d93ea0d1d6",
        "left out the batch axis": "875cd8e416c039f85025",
        "put the source length first: (S, B, d_model) is torch's batch_first=False layout; this model is batch-first, "
        "(B, S, d_model)":
            "2b9e082c74e08e17e8d8",
    }),
    "cross_weights_shape": (None, "78f5731ca367a87f1bc8", {
        "swapped queries and keys: rows are the decoder's positions (queries), columns the source tokens (keys)":
            "82fd7b695db15827169b",
        "left out the head axis: the weights are kept per head, (B, n_heads, T_q, T_k)": "6ca88f58430a52a02a4b",
        "gave the decoder's self-attention shape: in cross-attention the keys are the source's 9 tokens":
            "0bfeb81ea4984918fe29",
        "used the source's length for the queries too: the queries come from the decoder (6 positions)":
            "5626e619a1b2b8467492",
        "merged the batch and head axes into one (B * n_heads): that is how some code computes them, but the weights "
        "kept on .last_weights keep both axes, (B, n_heads, T_q, T_k)":
            "90ff2adae12085bf67f8",
    }),
    "logits_shape": (None, "275e99959882c2f7e757", {
        "kept only the last position: in training (teacher forcing) every position predicts its next word in the same "
        "pass":
            "2f5678175be30439eeec",
        "stopped before the output layer: the logits have one score per target word, V_tgt = 50":
            "270e90bd0a074bdff0be",
        "used the source's length: the decoder makes one prediction per target position": "f0195c00a6321707e7a1",
    }),
    "smoothed_target": (3, "d92dcea969d7b6385014", {
        "spread eps over the V - 1 wrong classes only: that is another convention; PyTorch's (and the lesson's) "
        "spreads eps / V over ALL V classes, the right one included":
            "a1514e00f14bc607b13e",
        "gave the right class 1 - eps only: it also gets its share eps / V of the uniform part (the target must sum "
        "to 1)":
            "b0a9ee169b0d51e409c7",
        "left the target one-hot: smoothing moves eps of the mass to the uniform distribution": "f74d3f01b0efa9460e2c",
    }),
    "smoothed_loss": (3, "545054d8fb2b8702b3af", {
        "used the (V - 1) convention: spread eps / V over all V classes": "928cf8a6f63ffee05841",
        "gave the right class 1 - eps only: it also gets eps / V": "2d4aa145c351df5828d7",
        "computed the loss without smoothing, -ln p[right]": "2913d4cf46ef49684e38",
        "used log base 2: cross-entropy in PyTorch uses the natural log": "43ef1c055ea7d920ec2f",
        "computed KL(q || p): the loss asked for is the cross-entropy -sum_k q_k ln p_k = H(q) + KL(q || p), which is "
        "larger by H(q) (the two have the same gradients)":
            "84d44a95ca7643ab7682",
        "computed KL(p || q), and the wrong way round: the loss is the cross-entropy -sum_k q_k ln p_k, with the "
        "target q as the weights":
            "ab63226872baafcd1bbf",
        "gave H(q), the entropy of the target (the floor of the loss): the loss uses the model's p inside the log, "
        "-sum_k q_k ln p_k":
            "67d60280e996266276f0",
    }),
    "n_params": (None, "73a2b34422eb0dff3c34", {
        "left out the decoder's cross-attention (and its LayerNorm): a decoder block has two attention layers":
            "e5f6d3aa762600f3890b",
        "left out the biases of the Linear layers": "58a72a727e23db59c573",
        "multiplied the attention weights by the number of heads: the heads split d_model, they do not multiply it":
            "d350b7922211abad54a9",
        "forgot the final LayerNorm of each stack": "13ec2197eb82073b0392",
        "forgot the output layer (d_model -> V_tgt, with a bias)": "ad6b08977c8d1bf95037",
        "tied the output layer to the target embedding: this model keeps its own (V_tgt, d_model) output matrix "
        "(tie_weights=False)":
            "cf35db096c90519dd03d",
        "counted learned position tables: the positions are sinusoids, computed, not learned": "bd4fcb369d3cea925dda",
        "counted a learned position table: the positions are sinusoids, computed, not learned": "ebca9a7bfb49ed35f3db",
    }),
    "n_cross": (None, "5643f01891d3805afdf4", {
        "counted only W_K and W_V: cross-attention also has W_Q (on the decoder side) and W_O": "bbaadf84cf1a460db80b",
        "counted one decoder layer: every one of the 3 has its own cross-attention": "4a555f546202d8d310f7",
        "left out the biases: each of the four Linear maps has d_model of them": "2b0f2766fb4ec1b4d562",
        "counted the LayerNorm before the cross-attention too: it belongs to the block, not to the attention's four "
        "Linear maps":
            "96c4a52adea74f4306d2",
    }),
    "first_sees": (None, "eef30eb37f9af6779e5c", {
        "gave what a correct decoder allows (the whole source): BuggyDecoder also gives its cross-attention a mask; "
        "write that mask out and read the row of target position 0":
            "9e6ae39a895f1eda2624",
        "counted 0: check whether .tril() keeps the entries ON the diagonal": "8cefedfd955c09066849",
        "gave the number of target positions: the question asks how many SOURCE words target position 0 may attend to":
            "342b869feb91a5f570e8",
        "counted the blocked source words (False) instead of the ones position 0 may attend to (True)":
            "9e57a5b55d7f601291b6",
    }),
})


# --- exercise 1: predict the shapes -------------------------------------------------------------------
# A Seq2SeqTransformer with d_model 32, 4 heads, V_tgt 50; src (4, 9), tgt_in (4, 6).

_SHAPES = ("memory_shape", "cross_weights_shape", "logits_shape")


def check_shapes(answers: dict[str, Any]) -> None:
    """Exercise 1: three predicted shapes, every wrong one reported."""
    hint = ("follow the shapes: the encoder keeps (B, S, d_model); attention weights are (B, n_heads, T_q, T_k); "
            "the decoder ends in one row of V_tgt scores per target position")
    check_all(*(lambda name=name: SEALS.check(name, answers.get(name), "shape", hint) for name in _SHAPES))


# --- exercise 2: the shifted decoder input ------------------------------------------------------------


def reference_decoder_io(targets, bos_id: int, eos_id: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """tgt_in = <bos> + target (padded), tgt_out = target + <eos> (padded); (B, max_len + 1) each."""
    T = max(len(t) for t in targets) + 1
    tgt_in = torch.full((len(targets), T), pad_id, dtype=torch.long)
    tgt_out = torch.full((len(targets), T), pad_id, dtype=torch.long)
    for b, t in enumerate(targets):
        t = [int(x) for x in t]
        tgt_in[b, : len(t) + 1] = torch.tensor([bos_id] + t)
        tgt_out[b, : len(t) + 1] = torch.tensor(t + [eos_id])
    return tgt_in, tgt_out


def _io_mistakes(targets, bos_id, eos_id, pad_id) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    right_in, right_out = reference_decoder_io(targets, bos_id, eos_id, pad_id)
    no_bos_in, _ = reference_decoder_io(targets, pad_id, eos_id, pad_id)
    no_bos_in = torch.cat([no_bos_in[:, 1:], torch.full((len(targets), 1), pad_id)], dim=1)  # target, padded
    _, no_eos_out = reference_decoder_io(targets, bos_id, pad_id, pad_id)
    zero_in, zero_out = reference_decoder_io(targets, bos_id, eos_id, 0)
    wrong_way_in, wrong_way_out = right_in.clone(), right_out.clone()
    eos_padded_out = right_out.clone()
    for b, t in enumerate(targets):
        t = [int(x) for x in t]
        wrong_way_in[b] = torch.tensor(t + [pad_id] * (right_in.shape[1] - len(t)))  # the target, no <bos>
        wrong_way_out[b] = torch.tensor(t[1:] + [eos_id] + [pad_id] * (right_in.shape[1] - len(t)))  # one ahead
        eos_padded_out[b, len(t) + 1:] = eos_id
    left_in, left_out = right_in.clone(), right_out.clone()
    for b, t in enumerate(targets):  # the same tokens, padding in front
        n = len(t) + 1
        left_in[b] = torch.cat([torch.full((left_in.shape[1] - n,), pad_id), right_in[b, :n]])
        left_out[b] = torch.cat([torch.full((left_out.shape[1] - n,), pad_id), right_out[b, :n]])
    return {
        "swapped the two: the decoder's INPUT starts with <bos> (nothing written yet), the LABELS end with <eos>":
            (right_out, right_in),
        "did not shift: tgt_in must be the target moved one place to the right, with <bos> in front, so that "
        "position t predicts word t from words before it": (right_out, right_out),
        "left out <bos>: the first position needs an input that says 'start' before any word is written":
            (no_bos_in, right_out),
        "left <eos> out of the labels: then the model never learns to stop": (right_in, no_eos_out),
        "padded with 0 instead of pad_id": (zero_in, zero_out),
        "shifted the wrong way: the input starts with <bos> and the LABELS are the input moved one place to the "
        "left, so tgt_out[b, t] == tgt_in[b, t + 1]": (wrong_way_in, wrong_way_out),
        "padded the labels with <eos>: after the one <eos>, pad with pad_id, so that the loss ignores those positions":
            (right_in, eos_padded_out),
        "padded on the left: keep each sentence at positions 0, 1, ... and put the padding after it":
            (left_in, left_out),
    }


def _as_long(name: str, value: Any, what: str) -> torch.Tensor:
    try:
        t = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailed(name, f"{what} should be a (B, T) tensor of token ids, got {short(value)}.") from None
    if t.is_floating_point():
        if not bool((t == t.round()).all()):
            raise CheckFailed(name, f"{what} holds fractions; token ids are whole numbers.")
    elif t.dtype == torch.bool:
        raise CheckFailed(name, f"{what} is boolean; it should hold token ids.")
    return t.long()


def _io_matches(got_in: torch.Tensor, got_out: torch.Tensor, want_in: torch.Tensor, want_out: torch.Tensor,
                pad_id) -> bool:
    if got_in.shape != want_in.shape or got_out.shape != want_out.shape:
        return False
    labelled = want_out != pad_id  # what tgt_in holds where the label is padding does not matter
    return bool(torch.equal(got_out, want_out) and torch.equal(got_in[labelled], want_in[labelled]))


def _decoder_io_cases(hidden: bool) -> list[tuple[list[list[int]], int, int, int]]:
    cases = [
        ([[7, 4, 9], [5, 6]], 1, 2, 0),
        ([[12, 11, 10, 13], [8], [9, 9, 9]], 1, 2, 0),
        ([[5, 6, 7], [8, 9]], 2, 3, 4),  # other special ids: pad_id is not 0
    ]
    if hidden:
        cases += [([[3]], 1, 2, 0), ([[10, 11], [12, 13]], 0, 1, 5), ([[4, 5, 6, 7, 8, 9], [4], [6, 6]], 1, 2, 3)]
    return cases


def check_decoder_io(fn: Callable, name: str = "decoder_io", *, hidden: bool = False) -> None:
    """Exercise 2: the learner's decoder_io(targets, bos_id, eos_id, pad_id) -> (tgt_in, tgt_out)."""
    for targets, bos, eos, pad in _decoder_io_cases(hidden):
        label = f"{name}({targets}, bos_id={bos}, eos_id={eos}, pad_id={pad})"
        out = call(name, fn, [list(t) for t in targets], bos, eos, pad)
        if out is None:
            raise CheckFailed(label, "got None: did you forget to `return tgt_in, tgt_out`?")
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise CheckFailed(label, f"expected a pair (tgt_in, tgt_out), got {short(out)}.")
        got_in, got_out = _as_long(label, out[0], "tgt_in"), _as_long(label, out[1], "tgt_out")
        want_in, want_out = reference_decoder_io(targets, bos, eos, pad)
        if got_in.shape != want_in.shape or got_out.shape != want_out.shape:
            raise CheckFailed(label, f"expected two tensors of shape {tuple(want_in.shape)}, got {tuple(got_in.shape)} "
                                     f"and {tuple(got_out.shape)}.",
                              "B rows, and T = (longest target) + 1 columns: one more than the longest target, for "
                              "<bos> in the input and <eos> in the labels")
        if _io_matches(got_in, got_out, want_in, want_out, pad):
            continue
        real = want_out != pad  # what tgt_in holds where the RIGHT label is padding does not matter
        for description, (m_in, m_out) in _io_mistakes(targets, bos, eos, pad).items():
            if m_out.shape == got_out.shape and torch.equal(got_out, m_out) and torch.equal(got_in[real], m_in[real]):
                raise CheckFailed(label, "the values are not right.", f"it looks like you {description}.")
        wrong = [n for n, ok in [("tgt_in", torch.equal(got_in[want_out != pad], want_in[want_out != pad])),
                                 ("tgt_out", torch.equal(got_out, want_out))] if not ok]
        raise CheckFailed(label, f"{' and '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not right.",
                          "tgt_in[b] = <bos>, then the target's ids, then pad_id; tgt_out[b] = the target's ids, "
                          "<eos>, then pad_id")
    passed(name, f"{len(_decoder_io_cases(hidden))} batches")


# --- exercise 3: the padding masks --------------------------------------------------------------------


def reference_masks(src: torch.Tensor, tgt_in: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """src_mask (B, S): True where the source token is real; tgt_mask (B, T, T): key j is real and j <= i."""
    src_mask = src != pad_id  # (B, S)
    T = tgt_in.shape[1]
    tgt_mask = (tgt_in != pad_id)[:, None, :] & torch.ones(T, T, dtype=torch.bool).tril()  # (B, T, T)
    return src_mask, tgt_mask


def _mask_cases(hidden: bool) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    cases = [
        (torch.tensor([[5, 6, 7, 0, 0], [8, 9, 5, 6, 7]]), torch.tensor([[1, 4, 5, 0], [1, 6, 7, 8]]), 0),
        (torch.tensor([[4, 4, 3, 3], [5, 3, 3, 3], [6, 7, 8, 9]]),
         torch.tensor([[1, 9, 3, 3, 3], [1, 8, 7, 6, 5], [1, 5, 3, 3, 3]]), 3),
    ]
    if hidden:
        cases += [
            (torch.tensor([[5]]), torch.tensor([[1]]), 0),
            (torch.tensor([[9, 9, 0, 0, 0, 0]]), torch.tensor([[1, 4, 4, 4, 0, 0, 0]]), 0),
        ]
    return cases


QUERY_MASK = "this is a mask on the queries (rows); padding must hide keys (columns)"


def _normalise_mask(label: str, value: Any, B: int, rows: int | None, cols: int, what: str) -> torch.Tensor:
    """The learner's mask as (B, S) or (B, T, T). Only key-shaped layouts are accepted: the size-1 axes
    must come BEFORE the key axis, so (B, 1, S) broadcasts over the queries, while (B, S, 1) would
    broadcast over the keys and hide query rows instead."""
    try:
        m = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailed(label, f"{what} should be a boolean tensor, got {short(value)}.") from None
    want = (B, cols) if rows is None else (B, rows, cols)
    accepted = [want, (B, 1, cols), (B, 1, 1, cols)] if rows is None else [want, (B, 1, rows, cols)]
    shape = tuple(m.shape)
    if shape not in accepted:
        shapes = "(B, S), (B, 1, S) or (B, 1, 1, S)" if rows is None else "(B, T, T) or (B, 1, T, T)"
        if cols > 1 and len(shape) >= 2 and shape[-1] == 1 and cols in shape[1:]:
            # (B, S, 1), (B, 1, S, 1), (B, T, 1): the positions sit on a query axis
            raise CheckFailed(label, f"{what} has shape {shape}: {QUERY_MASK}.",
                              f"put the key positions on the LAST axis, {shapes}: then the mask broadcasts over "
                              f"the queries and hides the padded keys from every one of them")
        raise CheckFailed(label, f"{what} has shape {shape}; expected {shapes} "
                                 f"with B={B}, {'S' if rows is None else 'T'}={cols}.")
    m = m.reshape(want)
    if m.dtype != torch.bool:
        raise CheckFailed(label, f"{what} has dtype {m.dtype}; a mask must be boolean (True = may attend).",
                          "compare with ==, != or <=, which give booleans, or add .bool()")
    return m


def _mask_mistakes(src, tgt_in, pad_id) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    T = tgt_in.shape[1]
    real_src, real_tgt = src != pad_id, tgt_in != pad_id
    tril = torch.ones(T, T, dtype=torch.bool).tril()
    src_mistakes = {
        "inverted the source mask: True must mark the REAL tokens, the ones that may be attended to": ~real_src,
    }
    tgt_mistakes = {
        "left out the target padding: a padded target key must not be attended to either. (With the padding at "
        "the end, as here, that changes only the padded rows, which nobody reads; it matters with left padding "
        "or packed sequences, so the mask includes it)": tril.expand(len(src), T, T),
        "left out the causal part: position i must not see target words after it":
            real_tgt[:, None, :].expand(-1, T, -1),
        "used the upper triangle: True must be on and BELOW the diagonal (word i sees words 0..i)":
            real_tgt[:, None, :] & torch.ones(T, T, dtype=torch.bool).triu(),
        "left out the diagonal: a position may attend to itself":
            real_tgt[:, None, :] & torch.ones(T, T, dtype=torch.bool).tril(-1),
        "masked the padded queries (rows) instead of the padded keys (columns): a row with nothing allowed has no "
        "softmax (NaN in torch); mask the keys (columns) only": real_tgt[:, None, :] & real_tgt[:, :, None] & tril,
        "inverted the target mask: True must mean 'may attend'": ~(real_tgt[:, None, :] & tril),
    }
    if pad_id != 0:  # put first: with no 0 in the batch, "!= 0" also looks like a mask without padding
        src_mistakes = {"compared with 0 instead of pad_id: the padding id is an argument": src != 0, **src_mistakes}
        tgt_mistakes = {"compared with 0 instead of pad_id: the padding id is an argument":
                        (tgt_in != 0)[:, None, :] & tril,
                        **tgt_mistakes}
    return src_mistakes, tgt_mistakes


def check_masks(fn: Callable, name: str = "seq2seq_masks", *, hidden: bool = False) -> None:
    """Exercise 3: the learner's seq2seq_masks(src, tgt_in, pad_id) -> (src_mask, tgt_mask)."""
    for src, tgt_in, pad in _mask_cases(hidden):
        label = f"{name}(src of shape {tuple(src.shape)}, tgt_in of shape {tuple(tgt_in.shape)}, pad_id={pad})"
        out = call(name, fn, src.clone(), tgt_in.clone(), pad)
        if out is None:
            raise CheckFailed(label, "got None: did you forget to `return src_mask, tgt_mask`?")
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise CheckFailed(label, f"expected a pair (src_mask, tgt_mask), got {short(out)}.")
        B, S, T = src.shape[0], src.shape[1], tgt_in.shape[1]
        got_src = _normalise_mask(label, out[0], B, None, S, "src_mask")
        got_tgt = _normalise_mask(label, out[1], B, T, T, "tgt_mask")
        want_src, want_tgt = reference_masks(src, tgt_in, pad)
        src_wrong, tgt_wrong = _mask_mistakes(src, tgt_in, pad)
        problems = []
        for part, got, want, mistakes in [("src_mask", got_src, want_src, src_wrong),
                                          ("tgt_mask", got_tgt, want_tgt, tgt_wrong)]:
            if torch.equal(got, want):
                continue
            hint = next((d for d, m in mistakes.items() if torch.equal(got, m)), None)
            problems.append(CheckFailed(f"{label}: {part}", "the values are not right.",
                                        f"it looks like you {hint}." if hint else
                                        ("True where src is not pad_id" if part == "src_mask" else
                                         "tgt_mask[b, i, j] is True when j <= i AND tgt_in[b, j] is not pad_id")))
        if len(problems) == 1:
            raise problems[0]
        if problems:
            raise CheckFailed(label, "both masks are not right.", " | ".join(str(p.hint) for p in problems))
    passed(name, f"{len(_mask_cases(hidden))} batches")


def check_masks_in_model(fn: Callable, name: str = "seq2seq_masks (in the model)") -> None:
    """Exercise 3, by behaviour: the learner's masks used inside a `Seq2SeqTransformer` (its own blocks and
    `MultiHeadAttention`) give the model's logits at every real target position."""
    from course_lib.models import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(12, 12, d_model=8, n_heads=2, pad_id=0, dropout=0.0)).eval()
    # B = 2 differs from S = 4 and T = 5, so no 2-D mask can be read two ways
    src, tgt = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]]), torch.tensor([[1, 4, 5, 0, 0], [1, 6, 7, 8, 9]])
    out = call(name, fn, src.clone(), tgt.clone(), 0)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise CheckFailed(name, f"expected a pair (src_mask, tgt_mask), got {short(out)}.")
    try:
        src_mask, tgt_mask = torch.as_tensor(out[0]), torch.as_tensor(out[1])
        with torch.no_grad():
            memory = model.encoder(model._embed(src, model.src_emb), src_mask)  # (B, S, C)
            got = model.lm_head(model.decoder(model._embed(tgt, model.tgt_emb), memory, tgt_mask, src_mask))
    except (TypeError, ValueError, RuntimeError) as err:
        raise CheckFailed(name, f"the model's attention refuses these masks: {type(err).__name__}: "
                                f"{str(err).splitlines()[0][:300]}") from None
    with torch.no_grad():
        want = model(src, tgt)  # (B, T, V): the model's own masks
    real = tgt != 0  # padded target positions are read by nobody
    check_close(name, got[real], want[real], atol=1e-5, rtol=1e-4, quiet=True, reveal=False,
                hint="with your masks the model's real outputs change: no query may see a padded key "
                     "(src_mask on the source's columns) or a later target word")
    passed(name, "the model's outputs are unchanged")


# --- exercise 4: label smoothing by hand ----------------------------------------------------------------
# V = 4, eps = 0.2, right class 1, p = [0.1, 0.6, 0.2, 0.1]

def check_label_smoothing(target: Any, loss: Any) -> None:
    """Exercise 4: the smoothed target (4 numbers) and the smoothed loss, both worked out by hand."""
    check_all(
        lambda: SEALS.check("smoothed_target", target, "numbers",
                            "q_k = (1 - eps) * [k is the right class] + eps / V; give 4 numbers"),
        lambda: SEALS.check("smoothed_loss", loss, "number", "loss = -sum_k q_k ln p_k, with the natural log"),
    )


# --- exercise 5: one beam-search step ---------------------------------------------------------------------


def reference_beam_step(scores, log_probs, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The k best extensions: (new scores, parent hypothesis, new token), best first."""
    scores = torch.as_tensor(scores, dtype=torch.float64)
    log_probs = torch.as_tensor(log_probs, dtype=torch.float64)
    V = log_probs.shape[1]
    best, flat = (scores[:, None] + log_probs).flatten().topk(k)
    return best, flat // V, flat % V


def _beam_mistakes(scores, log_probs, k) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    scores = torch.as_tensor(scores, dtype=torch.float64)
    log_probs = torch.as_tensor(log_probs, dtype=torch.float64)
    K, V = log_probs.shape
    out = {}
    best, flat = log_probs.flatten().topk(k)
    out["ranked the new words by their own log-probability: add each hypothesis's score so far (the total is what "
        "beam search ranks)"] = (best + scores[flat // V], flat // V, flat % V)
    right_scores, right_parents, right_tokens = reference_beam_step(scores, log_probs, k)
    out["returned only the new words' log-probabilities as the scores: the new score is the total, old score + new "
        "log-probability"] = (right_scores - scores[right_parents], right_parents, right_tokens)
    out["returned probabilities (exp of the totals, or products of probabilities): keep the scores as "
        "log-probabilities, which add up along a sentence"] = (right_scores.exp(), right_parents, right_tokens)
    out["divided the totals by 2 (an average of old and new): the new score is the sum, old score + new "
        "log-probability"] = (right_scores / 2, right_parents, right_tokens)
    product, flat = (scores[:, None] * log_probs).flatten().topk(k)
    out["multiplied the scores by the log-probabilities: log-probabilities ADD (the log of a product of "
        "probabilities is the sum of their logs)"] = (product, flat // V, flat % V)
    if k <= K:
        top1 = (scores[:, None] + log_probs).max(dim=1)  # each hypothesis's best extension
        s, parents = top1.values.topk(k)
        out["kept only each hypothesis's best word: all K * V extensions compete, so one strong hypothesis may take "
            "several places"] = (s, parents, top1.indices[parents])
    if K > 1 and K != V:
        best, flat = (scores[:, None] + log_probs).flatten().topk(k)
        out["decoded the flat index with K instead of V: in a (K, V) table flattened row by row, parent = i // V and "
            "token = i % V"] = (best, flat // K, flat % K)
    worst, flat = (scores[:, None] + log_probs).flatten().topk(k, largest=False)
    out["kept the k LOWEST totals: log-probabilities are negative, and the best hypothesis has the largest (closest "
        "to 0) total"] = (worst, flat // V, flat % V)
    best, flat = (scores[:, None] + log_probs).flatten().topk(k)
    out["returned the right k, but worst first: sort them best first"] = (
        best.flip(0), (flat // V).flip(0), (flat % V).flip(0))
    return out


def _beam_cases(hidden: bool) -> list[tuple[list[float], list[list[float]], int]]:
    g = torch.Generator().manual_seed(10)
    def random_case(K, V, k):
        lp = torch.log_softmax(torch.randn(K, V, generator=g, dtype=torch.float64) * 2, dim=-1)
        sc = -torch.rand(K, generator=g, dtype=torch.float64) * 3
        return sc.tolist(), lp.tolist(), k
    cases = [
        # hypothesis 0 is strong enough to take both places; hypothesis 1's best word is the likeliest new word
        ([-1.0, -2.0],
         torch.log(torch.tensor([[0.5, 0.4, 0.05, 0.05], [0.7, 0.25, 0.03, 0.02]], dtype=torch.float64)).tolist(), 2),
        random_case(3, 5, 3),
        # the first step: one hypothesis
        ([0.0], torch.log(torch.tensor([[0.1, 0.2, 0.4, 0.3]], dtype=torch.float64)).tolist(), 3),
    ]
    if hidden:
        cases += [random_case(4, 7, 4), random_case(2, 9, 5), random_case(5, 3, 2)]
    return cases


def check_beam_step(fn: Callable, name: str = "beam_step", *, hidden: bool = False) -> None:
    """Exercise 5: the learner's beam_step(scores, log_probs, k) -> (new_scores, parents, tokens)."""
    for scores, log_probs, k in _beam_cases(hidden):
        K, V = len(log_probs), len(log_probs[0])
        label = f"{name}(scores of {K} hypotheses, log_probs of shape ({K}, {V}), k={k})"
        out = call(name, fn, torch.tensor(scores), torch.tensor(log_probs), k)
        if out is None:
            raise CheckFailed(label, "got None: did you forget to `return new_scores, parents, tokens`?")
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise CheckFailed(label, f"expected three results (new_scores, parents, tokens), got {short(out)}.")
        try:
            got = [torch.as_tensor(x, dtype=torch.float64).flatten() for x in out]
        except (TypeError, ValueError, RuntimeError):
            raise CheckFailed(label, f"expected three tensors or lists of numbers, got {short(out)}.") from None
        if any(len(x) != k for x in got):
            raise CheckFailed(label, f"expected k = {k} entries in each result, got {[len(x) for x in got]}.",
                              "keep the k best of all K * V extensions")
        want = reference_beam_step(scores, log_probs, k)

        def same(a, b):
            return bool(torch.allclose(a[0], b[0], atol=1e-4) and torch.equal(a[1].long(), b[1].long())
                        and torch.equal(a[2].long(), b[2].long()))

        if same(got, want):
            continue
        for description, wrong in _beam_mistakes(scores, log_probs, k).items():
            if same(got, wrong):
                raise CheckFailed(label, "the result is not right.", f"it looks like you {description}.")
        order = got[0].argsort(descending=True)
        if same([x[order] for x in got], want):
            raise CheckFailed(label, "the result is not right.",
                              "it looks like you returned the right k, but not sorted best first (topk sorts them "
                              "unless it is given sorted=False)")
        wrong_parts = [n for n, a, b in zip(("new_scores", "parents", "tokens"), got, want, strict=False)
                       if not (torch.allclose(a, b, atol=1e-4) if n == "new_scores"
                               else torch.equal(a.long(), b.long()))]
        raise CheckFailed(label, f"{', '.join(wrong_parts)} not right.",
                          "add each hypothesis's score to its row of log_probs, flatten the (K, V) table, take the k "
                          "largest; entry i of the flat table is hypothesis i // V extended by token i % V")
    passed(name, f"{len(_beam_cases(hidden))} steps")


# --- exercise 6: count the parameters ---------------------------------------------------------------------
# Seq2SeqTransformer(V_src 1000, V_tgt 1200, d_model 128, 8 heads, 3 + 3 layers, d_ff 512)

def _number(value: Any) -> Any:
    """A one-element tensor or array as a plain number (a count written as torch.tensor(17) is fine)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, np.ndarray) and value.size == 1:
        return value.item()
    return value


def check_parameter_counts(n_params: Any, n_cross: Any) -> None:
    """Exercise 6: the model's parameter count and its cross-attention's share, by hand."""
    n_params, n_cross = _number(n_params), _number(n_cross)
    check_all(
        lambda: SEALS.check("n_params", n_params, "count",
                            "add up: two embedding tables; per encoder block one attention layer (4 Linear d -> d "
                            "with biases), the FFN and 2 LayerNorms; per decoder block two attention layers, the FFN "
                            "and 3 LayerNorms; a final LayerNorm per stack; the output layer"),
        lambda: SEALS.check("n_cross", n_cross, "count",
                            "one cross-attention per decoder block, each 4 Linear maps d_model -> d_model with biases"),
    )


# --- exercise 7: the decoder that masks its cross-attention ------------------------------------------------

def _reference_decoder(d_model: int, n_heads: int) -> nn.Module:
    from course_lib.attention import causal_mask
    from course_lib.layers import DecoderBlock

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = DecoderBlock(d_model, n_heads)

        def forward(self, y, memory, cross="none", self_mask="causal"):
            T, S = y.shape[1], memory.shape[1]
            ones = torch.ones(T, S, dtype=torch.bool)
            cross_mask = {"none": None, "causal": ones.tril(), "upper": ones.triu(), "shifted": ones.tril(S - T)}[cross]
            self_masks = {"causal": causal_mask(T), "none": None, "upper": causal_mask(T).T}
            return self.block(y, memory, self_masks[self_mask], cross_mask)

    return Decoder()


def check_fixed_decoder(first_sees: Any, cls: Any, name: str = "FixedDecoder") -> None:
    """Exercise 7: how many source words the buggy decoder lets position 0 see, and the fixed class."""
    first_sees = _number(first_sees)

    def part_b() -> None:
        if not callable(cls) or isinstance(cls, nn.Module):
            raise CheckFailed(name, f"expected a class, got {short(cls)}.",
                              f"define `class {name}(nn.Module)` and give the class itself ({name}), not an instance "
                              f"({name}(16, 4))")
        torch.manual_seed(0)
        reference = _reference_decoder(16, 4).eval()
        state = {k: v.detach().clone() for k, v in reference.state_dict().items()}  # a plain dict of tensors
        module = call(name, cls, 16, 4)
        try:
            module.load_state_dict(state)
        except Exception as err:  # wrong or missing parameter names
            raise CheckFailed(name, f"its weights do not load from a BuggyDecoder's: {type(err).__name__}: "
                                    f"{str(err).splitlines()[0][:200]}",
                              "copy BuggyDecoder (self.block = DecoderBlock(d_model, n_heads)) "
                              "and change only the line with the bug") from None
        module.eval()
        g = torch.Generator().manual_seed(1)
        for T, S in [(5, 7), (6, 3), (1, 4)]:
            y, memory = torch.randn(2, T, 16, generator=g), torch.randn(2, S, 16, generator=g)
            with torch.no_grad():
                got = call(name, module, y.clone(), memory.clone())
                want = reference(y, memory)
                wrong = {
                    "kept the causal mask on the cross-attention: target position i must see the WHOLE source, "
                    "which the encoder has read in full": reference(y, memory, cross="causal"),
                    "removed the causal mask from the self-attention as well: the decoder must not see the target "
                    "words it is about to predict": reference(y, memory, self_mask="none"),
                    "gave the self-attention the upper triangle: a causal mask lets query i see keys j <= i, the "
                    "lower triangle (causal_mask(T))": reference(y, memory, self_mask="upper"),
                }
                for cross, triangle in (("upper", "the upper triangle"), ("shifted", "a shifted triangle")):
                    wrong[f"replaced the cross-attention's causal mask by {triangle}: it needs no mask at all (the "
                          f"whole source is known; there is no padding here)"] = reference(y, memory, cross=cross)
            if not isinstance(got, torch.Tensor):
                raise CheckFailed(name, f"forward should return a tensor, got {short(got)}.")
            check_close(f"{name} on a target of {T} and a source of {S} positions", got, want, atol=1e-5, rtol=1e-4,
                        mistakes=wrong, quiet=True, reveal=False,
                        hint="the self-attention needs the causal mask; the cross-attention needs none (no padding "
                             "here)")
        passed(name, "3 shapes")

    check_all(
        lambda: SEALS.check("first_sees", first_sees, "count",
                            "write out the mask torch.ones(T, S, dtype=torch.bool).tril() for T = 4, S = 6 and read "
                            "its first row"),
        part_b,
    )
