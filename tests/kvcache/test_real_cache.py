"""RCKVCache on the offline default model (SmolLM2-135M-Instruct) and a SQuAD v2 context, and a context compressed
on it, saved and loaded in a new process; marked, run in CI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from rcattr.eval.kv.data import load_squad
from rcattr.kvcache import RCKVCache, compress_context
from rcattr.runtime.compat import cache_argument
from tests.reference import evicted_reference_logits, next_logits

pytestmark = pytest.mark.real_model

NEW_TOKENS = 16


@pytest.fixture(scope="module")
def squad_prompt(smollm2) -> tuple[dict[str, torch.Tensor], str]:
    """The first answerable question of SQuAD v2 dev with its paragraph, chat-formatted; and its gold answer."""
    tokenizer = smollm2[1]
    record = load_squad(limit=1)[0]
    content = f"{record.context}\n\nAnswer in a few words. Question: {record.question}"
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    return dict(inputs), record.answers[0]


def test_c_zero_generates_like_the_default_cache(smollm2, squad_prompt) -> None:
    model, _ = smollm2
    inputs, _ = squad_prompt
    default = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
    kept_all = model.generate(
        **inputs, max_new_tokens=NEW_TOKENS, do_sample=False, **cache_argument(model, RCKVCache(model, c=0.0))
    )
    assert torch.equal(default, kept_all)


@pytest.mark.transformers_line  # the 5.2 leg's smoke test of the cache in generate()
def test_c_one_evicts_most_of_the_context_and_still_answers(smollm2, squad_prompt) -> None:
    model, tokenizer = smollm2
    inputs, gold = squad_prompt
    cache = RCKVCache(model, c=1.0, window=16)
    out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, **cache_argument(model, cache))
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert cache.compression_ratio > 0.4
    assert cache.nbytes() < 0.7 * cache.full_nbytes()
    assert gold.lower() in answer.lower()


def test_logits_after_eviction_equal_the_masked_reference(smollm2, squad_prompt) -> None:
    model, _ = smollm2
    inputs, _ = squad_prompt
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    chunks = [torch.tensor([[504, 3575]]), torch.tensor([[314]])]
    cache = RCKVCache(model, c=1.0, window=16)
    got = next_logits(model, cache, ids, mask, chunks)
    want = evicted_reference_logits(model, cache, ids, mask, chunks)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)


def test_gemma3_global_layers_are_compressed_exactly(gemma3) -> None:
    """Gemma-3-270m: sliding layers keep their window cache, the global ones evict; q/k norms, one key head."""
    model, tokenizer = gemma3
    record = next(r for r in load_squad() if r.context.startswith("Computational complexity theory"))
    inputs = tokenizer(record.context + "\nQuestion: " + record.question, return_tensors="pt")
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    default = model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False)
    kept_all = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=8,
        do_sample=False,
        **cache_argument(model, RCKVCache(model, c=0.0)),
    )
    assert torch.equal(default, kept_all)

    chunks = [torch.tensor([[506, 236743]]), torch.tensor([[563]])]
    cache = RCKVCache(model, c=1.0, window=16)
    got = next_logits(model, cache, ids, mask, chunks)
    assert cache.rc_layers == [
        i for i, kind in enumerate(model.config.layer_types) if kind == "full_attention"
    ]
    assert cache.compression_ratio > 0.3
    want = evicted_reference_logits(model, cache, ids, mask, chunks)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)


LOAD_AND_ANSWER = """
import json, sys
from rcattr import load_model
from rcattr.kvcache import CompressedContext
context = CompressedContext.load(sys.argv[1], *load_model())
print(json.dumps([context.generate(sys.argv[2], max_new_tokens=16), context.nbytes()]))
"""


def test_a_saved_context_answers_alike_in_a_new_process(smollm2, tmp_path) -> None:
    record = load_squad(limit=1)[0]
    question = f"Answer in a few words. Question: {record.question}"
    context = compress_context(*smollm2, record.context)
    expected = [context.generate(question, max_new_tokens=16), context.nbytes()]
    context.save(tmp_path / "saved")
    run = subprocess.run(
        [sys.executable, "-c", LOAD_AND_ANSWER, str(tmp_path / "saved"), question],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(run.stdout.strip().splitlines()[-1]) == expected
