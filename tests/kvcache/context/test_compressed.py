"""A compressed context (rcattr.kvcache.context.compressed): answers as the benchmark's protocol gives them, the context
unchanged by a question, saved and loaded in another process with the same answers and bytes, and every load
that does not fit refused in one line."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

from rcattr.eval.kv.protocol import greedy_answer
from rcattr.kvcache import CompressedContext, WindowScorer, compress_context, split_prompt
from rcattr.kvcache.policy import EvictionPolicy, Ratio
from rcattr.runtime.compat import cache_argument
from tests.helpers import KV_CONTEXT, KV_QUESTION, char_tokenizer, kv_model

pytestmark = pytest.mark.transformers_line


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen2"])
def test_an_answer_is_the_protocols_greedy_answer_and_leaves_the_context_as_it_was(arch) -> None:
    model, tokenizer = kv_model(arch), char_tokenizer()
    context = compress_context(model, tokenizer, KV_CONTEXT, ratio=0.5)
    held = context.nbytes()
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION)
    assert torch.equal(context.context_ids, prompt.context_ids)
    expected = greedy_answer(model, copy.deepcopy(context.cache), prompt, max_new_tokens=6)
    answer = context.generate(KV_QUESTION, max_new_tokens=6)
    assert answer == tokenizer.decode(expected, skip_special_tokens=True)
    assert context.generate(KV_QUESTION, max_new_tokens=6) == answer
    assert context.nbytes() == held and context.cache.get_seq_length() == context.n_tokens
    assert context.compression_ratio == pytest.approx(0.5, abs=0.02)
    assert context.nbytes() < context.full_nbytes()


def test_several_documents_a_system_prompt_and_chunks() -> None:
    model, tokenizer = kv_model("llama"), char_tokenizer()
    documents = [KV_CONTEXT[:60], KV_CONTEXT[60:]]
    joined = compress_context(model, tokenizer, "\n\n".join(documents), system="Be brief.")
    assert torch.equal(
        compress_context(model, tokenizer, documents, system="Be brief.").context_ids, joined.context_ids
    )
    assert tokenizer.decode(joined.context_ids[0]).startswith("<bos>system: Be brief.")
    chunked = compress_context(model, tokenizer, KV_CONTEXT, ratio=0.5, chunk_size=32)
    assert len(chunked.cache.states[0].evictions) == -(-chunked.n_tokens // 32)
    assert chunked.compression_ratio == pytest.approx(0.5, abs=0.05)


def test_what_does_not_fit_is_refused() -> None:
    model, tokenizer = kv_model("llama"), char_tokenizer()
    with pytest.raises(ValueError, match="empty"):
        compress_context(model, tokenizer, " ")
    with pytest.raises(ValueError, match="window is 256"):
        compress_context(model, tokenizer, "word " * 60)
    with pytest.raises(ValueError, match="max_new_tokens"):
        compress_context(model, tokenizer, KV_CONTEXT).generate(KV_QUESTION, max_new_tokens=200)
    with pytest.raises(TypeError, match="swapped"):
        compress_context(tokenizer, model, KV_CONTEXT)
    with pytest.raises(ValueError, match="one of c"):
        compress_context(model, tokenizer, KV_CONTEXT, ratio=0.5, c=1.0)


LOAD_AND_ANSWER = """
import json, sys
import torch
from rcattr.kvcache import CompressedContext
from rcattr.runtime.compat import cache_argument
from tests.helpers import char_tokenizer, kv_model
context = CompressedContext.load(sys.argv[1], kv_model(sys.argv[2]), char_tokenizer())
print(json.dumps([context.generate(sys.argv[3], max_new_tokens=6), context.nbytes(), context.compression_ratio]))
"""


@pytest.mark.parametrize(
    ("arch", "options"),
    [
        ("llama", {"ratio": 0.5}),
        ("gemma3", {"c": 1.0}),
        ("qwen2", {"policy": EvictionPolicy.of_sizes(budget=40, decode_every=4)}),
    ],
)
def test_a_saved_context_answers_alike_in_a_new_process(arch, options, tmp_path) -> None:
    model, tokenizer = kv_model(arch), char_tokenizer()
    context = compress_context(model, tokenizer, KV_CONTEXT, **options)
    expected = [context.generate(KV_QUESTION, max_new_tokens=6), context.nbytes(), context.compression_ratio]
    context.save(tmp_path / "saved")
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LOAD_AND_ANSWER), str(tmp_path / "saved"), arch, KV_QUESTION],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(run.stdout.strip().splitlines()[-1]) == expected


def test_a_loaded_context_holds_and_decides_what_the_saved_one_did(tmp_path) -> None:
    model, tokenizer = kv_model("gemma3"), char_tokenizer()
    context = compress_context(
        model, tokenizer, KV_CONTEXT, policy=EvictionPolicy.of_sizes(budget=40, decode_every=4)
    )
    loaded = CompressedContext.load(context.save(tmp_path / "saved"), model, tokenizer)
    for kept, restored in zip(context.cache.kept_indices, loaded.cache.kept_indices, strict=True):
        assert (kept is None) == (restored is None)
        if kept is not None:
            assert all(torch.equal(a, b) for a, b in zip(kept, restored, strict=True))
    for layer, restored in zip(context.cache.layers, loaded.cache.layers, strict=True):
        assert torch.equal(layer.keys, restored.keys) and torch.equal(layer.values, restored.values)
    torch.testing.assert_close(
        loaded.cache.head_compression_ratio, context.cache.head_compression_ratio, equal_nan=True
    )
    assert loaded.cache.policy == context.cache.policy and loaded.cache.window == context.cache.window
    ids = torch.cat([context.context_ids, torch.tensor([[72, 105]])], dim=1)
    generated = [
        model.generate(
            ids, **cache_argument(model, copy.deepcopy(c.cache)), max_new_tokens=12, do_sample=False
        ).tolist()
        for c in (context, loaded)
    ]  # decode-time eviction goes on alike
    assert generated[0] == generated[1]


def test_compressed_half_saves_in_little_more_than_half_the_room(tmp_path) -> None:
    model, tokenizer = kv_model("llama"), char_tokenizer()
    sizes = {}
    for ratio in (0.0, 0.5):
        folder = compress_context(model, tokenizer, KV_CONTEXT, ratio=ratio).save(tmp_path / str(ratio))
        sizes[ratio] = sum(path.stat().st_size for path in folder.iterdir())
    assert sizes[0.5] <= 0.6 * sizes[0.0]


def _edit_settings(folder, change) -> None:
    path = folder / "context.json"
    settings = json.loads(path.read_text())
    change(settings)
    path.write_text(json.dumps(settings))


def test_a_load_that_does_not_fit_is_refused_in_one_line(tmp_path) -> None:
    model, tokenizer = kv_model("llama"), char_tokenizer()
    saved = compress_context(model, tokenizer, KV_CONTEXT).save(tmp_path / "saved")

    def refused(folder, match, load_model=model, load_tokenizer=tokenizer) -> None:
        with pytest.raises(ValueError, match=match) as error:
            CompressedContext.load(folder, load_model, load_tokenizer)
        assert "\n" not in str(error.value)

    refused(saved, "another model: architecture 'llama'", load_model=kv_model("qwen3"))
    other_weights = kv_model("llama")
    with torch.no_grad():
        other_weights.get_input_embeddings().weight.add_(0.01)
    refused(saved, "another model: embedding_sha256", load_model=other_weights)
    refused(saved, "another model: dtype", load_model=kv_model("llama").to(torch.bfloat16))
    refused(saved, "another tokenizer", load_tokenizer=char_tokenizer(chat=False))
    refused(tmp_path / "nothing", "is not a saved context")

    edited = tmp_path / "edited"
    compress_context(model, tokenizer, KV_CONTEXT).save(edited)
    _edit_settings(edited, lambda settings: settings.update(window=8))
    refused(edited, "edited or damaged")

    newer = tmp_path / "newer"
    compress_context(model, tokenizer, KV_CONTEXT).save(newer)
    _edit_settings(newer, lambda settings: settings.update(format=2))
    refused(newer, "format 2; this rcattr .* reads format 1 and older: upgrade rcattr")

    truncated = tmp_path / "truncated"
    compress_context(model, tokenizer, KV_CONTEXT).save(truncated)
    data = (truncated / "cache.safetensors").read_bytes()
    (truncated / "cache.safetensors").write_bytes(data[: len(data) - 100])
    refused(truncated, "truncated or damaged")


def test_pickling_is_refused_naming_save() -> None:
    model, tokenizer = kv_model("llama"), char_tokenizer()
    context = compress_context(model, tokenizer, KV_CONTEXT)
    for value in (context, context.cache):
        with pytest.raises(TypeError, match=r"save\(path\)"):
            pickle.dumps(value)
        with pytest.raises(TypeError, match=r"save\(path\)"):
            torch.save(value, "/dev/null")


def test_a_scorer_of_ones_own_is_not_saved(tmp_path) -> None:
    class Mine(WindowScorer):
        pass

    model, tokenizer = kv_model("llama"), char_tokenizer()
    policy = EvictionPolicy(Ratio(0.5), Mine())
    with pytest.raises(ValueError, match="Mine"):
        compress_context(model, tokenizer, KV_CONTEXT, policy=policy).save(tmp_path / "mine")
