"""The KV benchmark's pieces: VER, head-output capture, the question-after-context protocol, ROUGE, data."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import DynamicCache

from rcattr.eval.common.datasets import data_dir
from rcattr.eval.kv import protocol as kv_protocol
from rcattr.eval.kv.data import load_qmsum, load_squad, meeting_excerpt, turn_ranges
from rcattr.eval.kv.methods import FullCache, RCMethod
from rcattr.eval.kv.metrics import LastLayerHeadOutputs, rouge, value_error_rate
from rcattr.eval.kv.protocol import greedy_answer, split_prompt, teacher_forced
from tests.helpers import char_tokenizer, tiny_model

CONTEXT = "The cat sat on the mat near the door, and the dog slept by the fire all night long. " * 2
QUESTION = "Where did the cat sit?"


def test_value_error_rate_on_a_hand_made_case() -> None:
    reference = torch.tensor([[[3.0, 4.0], [1.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]]])  # [tokens 2, heads 2, d 2]
    compressed = torch.tensor([[[3.0, 4.0], [1.0, 1.0]], [[0.0, -2.0], [0.0, 0.0]]])
    # per (token, head): 0/5, 1/1, 4/2, and 0/0 -> 0 (a zero reference counts as no error when equal)
    assert value_error_rate(reference, compressed) == pytest.approx((0 + 1 + 2 + 0) / 4)
    assert value_error_rate(reference, reference) == 0.0
    assert value_error_rate(reference, torch.zeros_like(reference)) == pytest.approx(3 / 4)


def test_value_error_rate_rejects_mismatched_or_empty_outputs() -> None:
    with pytest.raises(ValueError, match="shapes"):
        value_error_rate(torch.ones(2, 3, 4), torch.ones(2, 3, 5))
    with pytest.raises(ValueError, match="tokens >= 1"):
        value_error_rate(torch.ones(0, 3, 4), torch.ones(0, 3, 4))


def test_captured_head_outputs_are_what_the_output_projection_receives() -> None:
    model = tiny_model("llama")
    attention = model.model.layers[-1].self_attn
    seen = {}
    handle = attention.register_forward_hook(lambda module, args, output: seen.update(out=output[0]))
    with LastLayerHeadOutputs(model) as outputs:
        model(torch.randint(3, 120, (1, 7)))
    handle.remove()
    heads = outputs.heads
    assert heads.shape == (1, 7, 4, 16)
    torch.testing.assert_close(attention.o_proj(heads.flatten(-2)), seen["out"])


def test_head_capture_refuses_a_model_without_o_proj() -> None:
    model = tiny_model("llama")
    del model.model.layers[-1].self_attn.o_proj
    with pytest.raises(ValueError, match="o_proj"):
        LastLayerHeadOutputs(model)


def test_split_prompt_cuts_the_chat_template_between_context_and_question() -> None:
    tokenizer = char_tokenizer()
    prompt = split_prompt(tokenizer, CONTEXT, QUESTION)
    whole = tokenizer.apply_chat_template(
        [{"role": "user", "content": f"{CONTEXT}\n\n{QUESTION}"}], add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.decode(torch.cat([prompt.context_ids, prompt.question_ids], 1)[0]) == whole
    assert tokenizer.decode(prompt.context_ids[0]).endswith(CONTEXT)
    assert prompt.n_context == prompt.context_ids.shape[1]
    with pytest.raises(ValueError, match="empty"):
        split_prompt(tokenizer, "  ", QUESTION)


def _whole_prompt(prompt: kv_protocol.SplitPrompt) -> torch.Tensor:
    return torch.cat([prompt.context_ids, prompt.question_ids], dim=1)


def test_greedy_answer_after_a_full_prefill_equals_generate() -> None:
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    prompt = split_prompt(tokenizer, CONTEXT, QUESTION)
    cache = FullCache().prefill(model, prompt.context_ids)
    answer = greedy_answer(model, cache, prompt, max_new_tokens=6)
    whole = _whole_prompt(prompt)
    expected = model.generate(whole, max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert answer.tolist() == expected[0, whole.shape[1] :].tolist()


@pytest.mark.parametrize("stepped", [False, True])
def test_teacher_forced_outputs_equal_one_forward_over_the_whole_sequence(monkeypatch, stepped) -> None:
    model, tokenizer = tiny_model("qwen3"), char_tokenizer()
    if stepped:  # the path taken for caches whose layers differ in length (PyramidKV)
        monkeypatch.setattr(kv_protocol, "_uneven", lambda cache: True)
    prompt = split_prompt(tokenizer, CONTEXT, QUESTION)
    answer = torch.tensor([72, 101, 108, 108])
    forced = teacher_forced(model, FullCache().prefill(model, prompt.context_ids), prompt, answer)
    with LastLayerHeadOutputs(model) as outputs:
        logits = model(torch.cat([_whole_prompt(prompt), answer[None, :-1]], dim=1)).logits
    start = prompt.n_context + prompt.question_ids.shape[1] - 1
    torch.testing.assert_close(forced.heads, outputs.heads[0, start : start + 4], atol=1e-5, rtol=1e-4)
    expected = logits[0, start : start + 4].log_softmax(-1)
    torch.testing.assert_close(forced.log_probs, expected, atol=1e-5, rtol=1e-4)


def test_rc_method_measures_the_compression_of_its_cache() -> None:
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    prompt = split_prompt(tokenizer, CONTEXT, QUESTION)
    method = RCMethod(c=1.0, window=8)
    cache = method.prefill(model, prompt.context_ids)
    compression = method.compression(model, cache, prompt.n_context)
    assert 0.0 < compression.ratio == cache.compression_ratio < 1.0
    assert compression.bytes_ratio == pytest.approx(cache.nbytes() / cache.full_nbytes())
    full = FullCache()
    assert full.compression(model, full.prefill(model, prompt.context_ids), prompt.n_context).ratio == 0.0
    assert isinstance(full.prefill(model, prompt.context_ids), DynamicCache)


def test_rouge_takes_the_best_gold_answer() -> None:
    assert rouge("the cat sat", ["a dog", "the cat sat"]) == {"rouge1": 1.0, "rougeL": 1.0}
    scores = rouge("cats sitting on mats", ["the cat sat on the mat"])
    assert 0.0 < scores["rougeL"] <= scores["rouge1"] < 1.0  # stemming matches cat(s) and mat(s)
    with pytest.raises(ValueError, match="no reference"):
        rouge("x", [])


def _words(text: str) -> int:
    return len(text.split())


def test_meeting_excerpt_takes_the_gold_turns_then_their_neighbours() -> None:
    turns = [f"t{i} " + "w " * 3 for i in range(10)]  # 4 words each: 5 tokens with the newline
    excerpt = meeting_excerpt(turns, [(4, 5)], _words, budget=20)
    assert excerpt.split("\n") == [turns[3], turns[4], turns[5], turns[6]]
    assert meeting_excerpt(turns, [(4, 5)], _words, budget=24).split("\n") == turns[3:7]
    assert meeting_excerpt(turns, [(0, 0)], _words, budget=15).split("\n") == turns[0:3]
    # gold turns longer than the budget: the first ones that fit, then the beginning of one turn
    assert meeting_excerpt(turns, [(2, 8)], _words, budget=12).split("\n") == turns[2:4]
    assert meeting_excerpt(["a b c d e f"], [(0, 0)], _words, budget=4) == "a b c"
    with pytest.raises(ValueError, match="no turn"):
        meeting_excerpt(turns, [(20, 21)], _words, budget=10)
    with pytest.raises(ValueError, match="positive"):
        meeting_excerpt(turns, [(1, 1)], _words, budget=0)
    assert turn_ranges([["3", "7"], ["9", "9"]]) == [(3, 7), (9, 9)]


def test_squad_loader_takes_answerable_questions_with_their_paragraph() -> None:
    records = load_squad(limit=30)
    assert len(records) == 30 and len({r.id for r in records}) == 30
    for record in records:
        assert record.answers and all(answer for answer in record.answers)
        assert all(answer in record.context for answer in record.answers)
    assert records[0].question == "In what country is Normandy located?" and "France" in records[0].answers


def test_qmsum_loader_truncates_around_the_gold_turns() -> None:
    records = load_qmsum(_words, budget=400, limit=40)
    assert len(records) == 40
    assert len({r.id.rsplit("-", 1)[0] for r in records}) == 35  # round-robin: every meeting first
    meetings = [json.loads(line) for line in open(data_dir() / "qmsum" / "val.jsonl")]
    for record in records:
        assert sum(_words(line) + 1 for line in record.context.split("\n")) <= 400
        _, m, q = record.id.rsplit("-", 2)
        query = meetings[int(m)]["specific_query_list"][int(q)]
        first_gold = turn_ranges(query["relevant_text_span"])[0][0]
        turn = meetings[int(m)]["meeting_transcripts"][first_gold]
        assert f"{turn['speaker']}: {turn['content']}"[:40] in record.context or _words(turn["content"]) > 399
        assert record.answers == (query["answer"].strip(),)
