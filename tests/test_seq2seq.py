"""Lesson 10: the synthetic translation task (course_lib.translation), the encoder-decoder (course_lib.models)
against torch.nn.Transformer with the same weights, and greedy decoding and beam search
(course_lib.generation) against brute force."""
from __future__ import annotations

import itertools
import warnings
from collections import Counter
from dataclasses import replace

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

from course_lib import generation, models, translation

# --- the translation task ---------------------------------------------------------------------------


def test_translate_reorders_and_maps_words():
    assert translation.translate("the big dog sees a small cat near the tall man") == (
        "kano grun lo ka toma vel lo ap miru pim na mo vidat".split()
    )
    assert translation.translate(["a", "fish", "likes", "the", "horse"]) == "piska na ka hipa lo mo amat".split()


def test_every_target_word_translates_one_source_word():
    lex = {src: tgt for pos in translation.TRANSLATION_LEXICON.values() for src, tgt in pos.items()}
    task = translation.translation_task(300, 50, seed=4)
    for src, tgt in task.train + task.test:
        expected = Counter(lex[w] for w in src) + Counter({translation.SUBJECT_MARKER: 1, translation.OBJECT_MARKER: 1})
        assert Counter(tgt) == expected, (src, tgt)
        assert tgt[-1] == lex[src[src.index(next(w for w in src if w in translation.TRANSLATION_LEXICON["verb"]))]]


def test_the_task_needs_reordering():
    """A word-by-word (monotone) translation gets almost no sentence right: position matters."""
    lex = {src: tgt for pos in translation.TRANSLATION_LEXICON.values() for src, tgt in pos.items()}
    task = translation.translation_task(500, 10, seed=1)
    same_order = sum([lex[w] for w in src] == [w for w in tgt if w not in ("ka", "mo")] for src, tgt in task.train)
    assert same_order == 0, f"{same_order} sentences keep the source order"


@pytest.mark.parametrize(
    "sentence, where",
    [
        ("dog sees the cat", "expected an article"),
        ("the big sees the cat", "expected a noun at word 2"),
        ("the dog the cat", "expected a verb at word 2"),
        ("the dog sees the cat quickly", "expected a preposition or the end at word 5"),
        ("the dog sees the cat near the man the", "unexpected words after the sentence's end"),
    ],
)
def test_translate_rejects_sentences_outside_the_grammar(sentence, where):
    with pytest.raises(ValueError, match=where):
        translation.translate(sentence)


def test_translation_task_is_deterministic_and_held_out():
    a, b = translation.translation_task(400, 100, seed=7), translation.translation_task(400, 100, seed=7)
    assert a.train == b.train and a.test == b.test
    assert translation.translation_task(400, 100, seed=8).train != a.train
    train_sources = {tuple(s) for s, _ in a.train}
    assert len(train_sources) == 400 and not train_sources & {tuple(s) for s, _ in a.test}
    assert a.src_vocab[:3] == a.tgt_vocab[:3] == ["<pad>", "<bos>", "<eos>"]
    assert (a.pad_id, a.bos_id, a.eos_id) == (0, 1, 2)
    assert len(a.src_vocab) == 3 + 29 and len(a.tgt_vocab) == 3 + 31


def test_translation_task_default_sizes_and_lengths():
    task = translation.translation_task()
    assert (len(task.train), len(task.test)) == (20_000, 1_000)
    lengths = Counter(len(s) for s, _ in task.train)
    assert min(lengths) == 5 and max(lengths) == 11, lengths
    assert max(len(t) for _, t in task.train) == 13


def test_batch_shifts_the_target_right_and_pads():
    task = translation.translation_task(50, 5, seed=0)
    pairs = [("the dog sees a cat".split(), translation.translate("the dog sees a cat")),
             ("a big man finds the fish with a red bird".split(),
              translation.translate("a big man finds the fish with a red bird"))]
    src, tgt_in, tgt_out = task.batch(pairs)
    assert src.shape == (2, 10) and tgt_in.shape == tgt_out.shape == (2, 13)
    assert src[0, 5:].tolist() == [0] * 5 and src[1].ne(0).all()
    assert tgt_in[:, 0].tolist() == [task.bos_id] * 2
    real = tgt_out[1] != 0  # the longer sentence has no padding: tgt_in is tgt_out shifted right by one
    assert real.all() and tgt_in[1, 1:].tolist() == tgt_out[1, :-1].tolist()
    assert tgt_out[0].tolist() == task.encode_tgt(pairs[0][1])[1:] + [0] * 5
    assert tgt_in[0].tolist() == task.encode_tgt(pairs[0][1])[:-1] + [0] * 5
    assert tgt_out[1, -1].item() == task.eos_id and task.eos_id not in tgt_in[1].tolist()
    assert task.decode_tgt(tgt_in[1]) == pairs[1][1] and task.decode_tgt(tgt_out[0].tolist()) == pairs[0][1]


def test_get_batch_is_seeded_and_checks_the_split():
    task = translation.translation_task(200, 20, seed=0)
    x1 = task.get_batch("train", torch.Generator().manual_seed(3), 8)
    x2 = task.get_batch("train", torch.Generator().manual_seed(3), 8)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2, strict=True)) and x1[0].shape[0] == 8
    val = task.get_batch("val", torch.Generator().manual_seed(3), 8)
    test_sources = {tuple(task.encode_src(s)) for s, _ in task.test}
    assert all(tuple(row[row != 0].tolist()) in test_sources for row in val[0])
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test', got 'dev'"):
        task.get_batch("dev", torch.Generator())


def test_unknown_words_and_bad_sizes_are_explained():
    task = translation.translation_task(20, 5, seed=0)
    with pytest.raises(KeyError, match="'zebra' is not in the source vocabulary"):
        task.encode_src(["the", "zebra"])
    with pytest.raises(KeyError, match="'dog' is not in the target vocabulary"):
        task.encode_tgt(["dog"])
    with pytest.raises(ValueError, match="n_test must be a positive int, got 0"):
        translation.translation_task(10, 0)
    with pytest.raises(ValueError, match="at least one"):
        task.batch([])


# --- the encoder-decoder -------------------------------------------------------------------------------

V_SRC, V_TGT = 9, 8


def _model(seed=0, **overrides) -> models.Seq2SeqTransformer:
    torch.manual_seed(seed)
    config = dict(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_model=16, n_heads=4, n_encoder_layers=2,
                  n_decoder_layers=2, d_ff=24, dropout=0.0, max_len=12)
    return models.Seq2SeqTransformer(models.Seq2SeqConfig(**{**config, **overrides}))


def _batch(seed=1):
    """Two sources and two decoder inputs with padding (id 0) at the end of the shorter ones."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V_SRC, (3, 7), generator=g)  # (3, 7)
    src[0, 5:] = 0
    src[2, 3:] = 0
    tgt = torch.randint(3, V_TGT, (3, 6), generator=g)  # (3, 6)
    tgt[:, 0] = 1
    tgt[1, 4:] = 0
    tgt[2, 2:] = 0
    return src, tgt


def _torch_reference(model: models.Seq2SeqTransformer) -> nn.Transformer:
    c = model.config
    with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True"
        warnings.simplefilter("ignore", UserWarning)
        ref = _build_torch_transformer(c)
    for p in ref.parameters():  # random norms and biases too, so that every weight is really compared
        nn.init.normal_(p, std=0.3)
    models.copy_from_torch_transformer(model, ref)
    return ref


def _build_torch_transformer(c: models.Seq2SeqConfig) -> nn.Transformer:
    return nn.Transformer(
        d_model=c.d_model, nhead=c.n_heads, num_encoder_layers=c.n_encoder_layers,
        num_decoder_layers=c.n_decoder_layers, dim_feedforward=c.d_ff, dropout=0.0,
        activation=c.activation, batch_first=True, norm_first=c.norm_first,
    )


def _reference_logits(model, ref, src, tgt):
    T = tgt.shape[1]
    y = ref(
        model._embed(src, model.src_emb), model._embed(tgt, model.tgt_emb),
        tgt_mask=torch.ones(T, T, dtype=torch.bool).triu(1),  # torch: True = blocked
        src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0,
    )
    return model.lm_head(y)  # (B, T, V_tgt)


@pytest.mark.parametrize("norm_first, activation", [(True, "relu"), (False, "relu"), (True, "gelu")])
def test_same_outputs_and_gradients_as_torch_transformer(norm_first, activation):
    model = _model(norm_first=norm_first, activation=activation).double()
    ref = _torch_reference(model).double()
    src, tgt = _batch()
    ours = model(src, tgt)
    theirs = _reference_logits(model, ref, src, tgt)
    assert ours.shape == (3, 6, V_TGT)
    assert_close(ours, theirs)
    upstream = torch.randn(ours.shape, generator=torch.Generator().manual_seed(5), dtype=ours.dtype)
    ours_grads = torch.autograd.grad((ours * upstream).sum(), [model.encoder.layers[0].self_attn.w_q.weight,
                                                               model.decoder.layers[1].cross_attn.w_k.weight,
                                                               model.decoder.layers[0].ff.linear1.weight,
                                                               model.src_emb.weight])
    theirs_grads = torch.autograd.grad((theirs * upstream).sum(), [ref.encoder.layers[0].self_attn.in_proj_weight,
                                                                   ref.decoder.layers[1].multihead_attn.in_proj_weight,
                                                                   ref.decoder.layers[0].linear1.weight,
                                                                   model.src_emb.weight])
    d = model.config.d_model
    assert_close(ours_grads[0], theirs_grads[0][:d])  # w_q is the first third of in_proj
    assert_close(ours_grads[1], theirs_grads[1][d : 2 * d])  # w_k the second
    assert_close(ours_grads[2], theirs_grads[2])
    assert_close(ours_grads[3], theirs_grads[3])


def test_same_outputs_as_torch_in_eval_mode():
    model = _model().eval()
    ref = _torch_reference(model).eval()
    src, tgt = _batch(seed=2)
    with torch.no_grad():
        ours, theirs = model(src, tgt), _reference_logits(model, ref, src, tgt)
    real = tgt != 0  # torch's fast path may leave padded query rows at zero; compare the real ones
    assert_close(ours[real], theirs[real], atol=1e-5, rtol=1e-4)


def test_padding_changes_nothing_for_real_tokens():
    model = _model()
    src, tgt = _batch()
    logits = model(src, tgt)
    more_src = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)  # (3, 11)
    more_tgt = torch.cat([tgt, torch.zeros(3, 3, dtype=torch.long)], dim=1)  # (3, 9)
    padded = model(more_src, more_tgt)
    real = tgt != 0
    assert_close(padded[:, :6][real], logits[real], atol=1e-5, rtol=1e-5)
    # and a sentence alone gives the same logits as in a batch with longer ones
    alone = model(src[2:, :3], tgt[2:, :2])
    assert_close(alone[0], logits[2, :2], atol=1e-5, rtol=1e-5)


def test_decoder_is_causal_and_encoder_sees_everything():
    model = _model()
    src, tgt = _batch()
    base = model(src, tgt)
    changed_tgt = tgt.clone()
    changed_tgt[0, 4] = 3 if tgt[0, 4] != 3 else 4
    out = model(src, changed_tgt)
    assert_close(out[0, :4], base[0, :4])  # earlier positions never see a later target token
    assert not torch.allclose(out[0, 4], base[0, 4])
    changed_src = src.clone()
    changed_src[1, -1] = 3 if src[1, -1] != 3 else 4  # the LAST source word
    out = model(changed_src, tgt)
    assert not torch.allclose(out[1, 0], base[1, 0]), "the first target position must depend on the whole source"


def test_cross_attention_weights_are_kept_on_request():
    model = _model()
    src, tgt = _batch()
    model(src, tgt)
    with pytest.raises(RuntimeError, match=r"Seq2SeqConfig\(\.\.\., keep_weights=True\)"):
        model.cross_attention_weights()
    fast = model(src, tgt)
    kept = models.Seq2SeqTransformer(replace(model.config, keep_weights=True))
    kept.load_state_dict(model.state_dict())
    slow = kept(src, tgt)
    model = kept
    assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    weights = model.cross_attention_weights()
    assert len(weights) == 2 and weights[0].shape == (3, 4, 6, 7)
    assert_close(weights[1].sum(-1), torch.ones(3, 4, 6))
    assert weights[1][0, :, :, 5:].abs().max() == 0, "padded source positions must get no attention"


def test_parameter_count_from_the_shapes():
    model = _model()
    C, F_, L = 16, 24, 2
    attn = 4 * (C * C + C)
    ffn = C * F_ + F_ + F_ * C + C
    norm = 2 * C
    expected = (V_SRC * C + V_TGT * C) + L * (attn + ffn + 2 * norm) + norm + L * (2 * attn + ffn + 3 * norm) + norm \
        + (C * V_TGT + V_TGT)
    assert model.num_parameters() == expected


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"d_model": 10, "n_heads": 4}, "d_model must be a multiple of n_heads"),
        ({"dropout": 1.0}, r"dropout must be a number in \[0, 1\)"),
        ({"eos_id": 8}, r"eos_id must be a target id in \[0, 8\)"),
        ({"n_decoder_layers": 0}, "n_decoder_layers must be a positive int"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        _model(**overrides)


def test_bad_inputs_are_explained():
    model = _model()
    src, tgt = _batch()
    with pytest.raises(ValueError, match=r"src must be a \(B, length\) tensor of token ids, got shape \(7,\)"):
        model(src[0], tgt)
    with pytest.raises(ValueError, match=r"tgt_in ids must be in \[0, 8\), got values from 0 to 8"):
        model(src, tgt.clamp(max=8) + (tgt == 7).long())
    with pytest.raises(ValueError, match="src and tgt_in must have the same batch size"):
        model(src[:2], tgt)
    with pytest.raises(ValueError, match="more than max_len=12"):
        model(torch.ones(1, 13, dtype=torch.long), tgt[:1])
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), tgt)
    with pytest.raises(TypeError, match="expects a Seq2SeqConfig"):
        models.Seq2SeqTransformer({"src_vocab_size": 3})


# --- decoding --------------------------------------------------------------------------------------


def _brute_force_greedy(model, src, steps):
    """One sentence at a time, the whole prefix re-run through model(src, prefix) at every step."""
    out = []
    for b in range(src.shape[0]):
        s = src[b : b + 1]
        s = s[:, : int((s != 0).sum())]  # this sentence alone, without its padding
        prefix, total = [1], 0.0
        for _ in range(steps):
            with torch.no_grad():
                logp = torch.log_softmax(model(s, torch.tensor([prefix]))[0, -1], dim=-1)
            choice = max(range(3, V_TGT + 0), key=lambda t: logp[t]) if logp[2] < logp[3:].max() else 2
            total += float(logp[choice])
            prefix.append(choice)
            if choice == 2:
                break
        out.append((prefix, total))
    return out


def test_greedy_decode_matches_brute_force_and_sequence_log_prob():
    model = _model(seed=3).eval()
    src, _ = _batch(seed=4)
    tokens, log_prob = generation.greedy_decode(model, src, max_len=6)
    for b, (prefix, total) in enumerate(_brute_force_greedy(model, src, 6)):
        row = tokens[b].tolist()
        assert row[: len(prefix)] == prefix and all(t == 0 for t in row[len(prefix):]), (row, prefix)
        assert log_prob[b].item() == pytest.approx(total, abs=1e-4)
    assert_close(generation.sequence_log_prob(model, src, tokens), log_prob, atol=1e-4, rtol=1e-5)


def _all_hypotheses(model, src_row, length):
    """Log-probabilities of every finished target of up to `length` tokens and of every unfinished one
    of exactly `length`, for one source sentence (words 3..V-1, then <eos>)."""
    words = range(3, model.config.tgt_vocab_size)
    best = {}
    for n in range(length + 1):
        for seq in itertools.product(words, repeat=n):
            finished = n < length
            toks = [1, *seq] + ([2] if finished else [])
            if len(toks) - 1 > length:
                continue
            t = torch.tensor([toks])
            best[tuple(toks)] = (finished, generation.sequence_log_prob(model, src_row, t).item())
    return best


def test_beam_search_with_a_wide_beam_finds_the_best_sequence():
    model = _model(seed=5, tgt_vocab_size=5, max_len=4)  # 2 words: every hypothesis fits in the beam
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 3]])
    tokens, scores = generation.beam_search(model, src, beam_size=25, max_len=3)
    for b in range(2):
        hyps = _all_hypotheses(model, src[b : b + 1], 3)
        finished = {k: v for k, (done, v) in hyps.items() if done}
        best = max(finished, key=finished.get)
        assert tuple(t for t in tokens[b].tolist() if t != 0) == best
        assert scores[b].item() == pytest.approx(finished[best], abs=1e-4)


def test_beam_of_one_is_greedy_and_wider_beams_are_never_worse():
    model = _model(seed=6).eval()
    src, _ = _batch(seed=7)
    greedy, g_lp = generation.greedy_decode(model, src, max_len=8)
    one, one_lp = generation.beam_search(model, src, beam_size=1, max_len=8)
    assert torch.equal(one, greedy) and torch.allclose(one_lp, g_lp, atol=1e-5)
    for k in (2, 4, 8):
        tokens, lp = generation.beam_search(model, src, beam_size=k, max_len=8)
        assert (lp >= g_lp - 1e-5).all(), (k, lp, g_lp)
        assert_close(generation.sequence_log_prob(model, src, tokens), lp, atol=1e-4, rtol=1e-5)


def test_decoding_a_batch_equals_decoding_each_sentence():
    model = _model(seed=8)
    src, _ = _batch(seed=9)
    for decode in (lambda s: generation.greedy_decode(model, s, max_len=6),
                   lambda s: generation.beam_search(model, s, beam_size=3, max_len=6)):
        tokens, lp = decode(src)
        for b in range(3):
            alone = src[b : b + 1, : int((src[b] != 0).sum())]
            t1, lp1 = decode(alone)
            n = t1.shape[1]
            assert tokens[b, :n].tolist() == t1[0].tolist() and not tokens[b, n:].any()
            assert lp[b].item() == pytest.approx(lp1.item(), abs=1e-4)


def test_decoding_restores_the_mode_and_checks_its_input():
    model = _model()
    model.train()
    generation.greedy_decode(model, torch.tensor([[3, 4]]), max_len=2)
    generation.beam_search(model, torch.tensor([[3, 4]]), beam_size=2, max_len=2)
    assert model.training
    with pytest.raises(ValueError, match=r"src must be a \(B, S\) tensor of source token ids"):
        generation.greedy_decode(model, torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="max_len must be an int from 1 to the model's max_len=11"):
        generation.greedy_decode(model, torch.tensor([[3, 4]]), max_len=12)
    with pytest.raises(ValueError, match="beam_size must be a positive int, got 0"):
        generation.beam_search(model, torch.tensor([[3, 4]]), beam_size=0)
    with pytest.raises(TypeError, match="needs a model with encode"):
        generation.greedy_decode(nn.Linear(2, 2), torch.tensor([[3, 4]]))


# --- caching at decode time, tying ---------------------------------------------------------------------


def test_cached_decoding_gives_the_logits_of_recomputing_the_whole_prefix():
    model = _model(seed=10).double().eval()
    src, tgt = _batch(seed=11)
    tgt = tgt.masked_fill(tgt == 0, 5)  # a full prefix in every row (cached positions count as real tokens)
    with torch.no_grad():
        memory = model.encode(src)
        memory_kv, cache = model.memory_keys_values(memory), model.new_decoder_cache()
        assert len(memory_kv) == 2 and memory_kv[0][0].shape == (3, 4, 7, 4), "(B, n_heads, S, head_dim) per layer"
        steps = [model.decode(tgt[:, :2], memory, src, memory_kv=memory_kv, cache=cache)]  # two tokens at once
        steps += [model.decode(tgt[:, t : t + 1], memory, src, memory_kv=memory_kv, cache=cache) for t in range(2, 6)]
        full = model.decode(tgt, memory, src)
    assert len(cache[0]) == 6
    assert_close(torch.cat(steps, dim=1), full)
    with pytest.raises(ValueError, match="1 positions after 6 cached ones, more than max_len=6"):
        models.Seq2SeqTransformer(models.Seq2SeqConfig(V_SRC, V_TGT, d_model=16, n_heads=4, max_len=6)).decode(
            tgt[:, :1], memory.float(), src, cache=[_filled_cache(6)] * 2)


def _filled_cache(n):
    from course_lib.attention import KVCache

    cache = KVCache()
    cache.append(torch.zeros(3, 4, n, 4), torch.zeros(3, 4, n, 4))
    return cache


def test_caching_changes_no_decoded_token():
    model = _model(seed=12).double().eval()
    src, _ = _batch(seed=13)
    for decode in (lambda **kw: generation.greedy_decode(model, src, max_len=8, **kw),
                   lambda **kw: generation.beam_search(model, src, beam_size=3, max_len=8, **kw),
                   lambda **kw: generation.beam_search(model, src, beam_size=4, max_len=8, length_penalty=1.0, **kw)):
        (t1, lp1), (t2, lp2) = decode(use_cache=True), decode(use_cache=False)
        assert torch.equal(t1, t2)
        assert_close(lp1, lp2, atol=1e-5, rtol=1e-5)


def test_beam_search_encodes_each_source_once_and_projects_its_memory_once():
    model = _model(seed=14).eval()
    src, _ = _batch(seed=15)  # B = 3
    encoded, projected = [], []
    original_encode = model.encode
    model.encode = lambda s: encoded.append(tuple(s.shape)) or original_encode(s)
    hooks = [block.cross_attn.w_k.register_forward_hook(lambda mod, inp, out: projected.append(tuple(inp[0].shape)))
             for block in model.decoder.layers]
    try:
        generation.beam_search(model, src, beam_size=4, max_len=6)
        assert encoded == [(3, 7)], f"the encoder must run once on the B = 3 sources, not on B * K copies: {encoded}"
        assert projected == [(3, 7, 16)] * 2, f"each layer's memory keys once per source: {projected}"
        encoded.clear(), projected.clear()
        generation.beam_search(model, src, beam_size=4, max_len=6, use_cache=False)
        assert encoded == [(3, 7)] and len(projected) > 2 and projected[0] == (12, 7, 16), "uncached: every step"
    finally:
        for hook in hooks:
            hook.remove()


def test_tied_weights_share_one_matrix_and_save_its_parameters():
    untied, tied = _model(seed=16), _model(seed=16, tie_weights=True)
    assert tied.lm_head.weight is tied.tgt_emb.weight
    assert untied.num_parameters() - tied.num_parameters() == V_TGT * 16
    src, tgt = _batch()
    tied(src, tgt).square().sum().backward()
    assert tied.tgt_emb.weight.grad is not None and tied.tgt_emb.weight.grad.abs().sum() > 0
    with pytest.raises(TypeError, match="tie_weights must be True or False"):
        _model(tie_weights=1)
