"""The KV benchmark's question-after-context protocol (rcattr.eval.kv.protocol): greedy and teacher-forced answers
equal plain forwards."""

from __future__ import annotations

import pytest
import torch

from rcattr.eval.kv import protocol as kv_protocol
from rcattr.eval.kv.methods import FullCache
from rcattr.eval.kv.metrics import LastLayerHeadOutputs
from rcattr.eval.kv.protocol import greedy_answer, teacher_forced
from rcattr.kvcache.context.prompt import SplitPrompt, split_prompt
from tests.helpers import KV_CONTEXT, KV_QUESTION, char_tokenizer, tiny_model

pytestmark = pytest.mark.transformers_line


def _whole_prompt(prompt: SplitPrompt) -> torch.Tensor:
    return torch.cat([prompt.context_ids, prompt.question_ids], dim=1)


def test_greedy_answer_after_a_full_prefill_equals_generate() -> None:
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION)
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
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION)
    answer = torch.tensor([72, 101, 108, 108])
    forced = teacher_forced(model, FullCache().prefill(model, prompt.context_ids), prompt, answer)
    with LastLayerHeadOutputs(model) as outputs:
        logits = model(torch.cat([_whole_prompt(prompt), answer[None, :-1]], dim=1)).logits
    start = prompt.n_context + prompt.question_ids.shape[1] - 1
    torch.testing.assert_close(forced.heads, outputs.heads[0, start : start + 4], atol=1e-5, rtol=1e-4)
    expected = logits[0, start : start + 4].log_softmax(-1)
    torch.testing.assert_close(forced.log_probs, expected, atol=1e-5, rtol=1e-4)


def test_split_prompts_old_path_still_imports_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="rcattr.kvcache.split_prompt"):
        from rcattr.eval.kv.protocol import split_prompt as old
    assert old is split_prompt
