"""The distilled eviction score (rcattr.kvcache.distilled): a predictor file that refuses what it was not fitted
on, scores that are exactly the predictor's map of the attention input the layer read, and a cache that works
where RCKVCache works (one forward, chunks, sliding-window layers kept, copies) and refuses where it cannot."""

from __future__ import annotations

import copy
import json
import struct

import pytest
import torch
from transformers import DynamicCache

from rcattr.kvcache import EvictionPolicy, Ratio, RCKVCache, Threshold, chunked_prefill
from rcattr.kvcache.distilled import (
    DistilledScorer,
    ScorePredictor,
    attention_inputs,
)
from rcattr.kvcache.policy import DecodeEviction
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, random_predictor

pytestmark = pytest.mark.transformers_line


def distilled_cache(model, predictor, rule=None, **options) -> RCKVCache:
    scorer = DistilledScorer(predictor=predictor, **options)
    return RCKVCache(model, window=4, policy=EvictionPolicy(rule or Ratio(0.5), scorer))


def test_a_predictor_saves_and_loads_as_it_was(tmp_path) -> None:
    model = kv_model("llama")
    predictor = random_predictor(model)
    predictor.save(tmp_path / "p.safetensors")
    loaded = ScorePredictor.load(tmp_path / "p.safetensors", model)
    assert loaded.identity == predictor.identity and loaded.info == {"teacher": "test"}
    assert loaded.layers == predictor.layers
    for layer in predictor.layers:
        assert torch.equal(loaded.weights[layer], predictor.weights[layer])
        assert torch.equal(loaded.biases[layer], predictor.biases[layer])


def _rewrite_metadata(path, change) -> None:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    change(header["__metadata__"])
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data[8 + length :])


def test_a_predictor_file_refuses_another_model_a_newer_format_and_a_broken_file(tmp_path) -> None:
    model = kv_model("llama")
    path = tmp_path / "p.safetensors"
    random_predictor(model).save(path)
    with pytest.raises(ValueError, match="fitted on .* not on"):
        ScorePredictor.load(path, kv_model("qwen2"))
    with pytest.raises(ValueError, match="fitted on .* not on"):
        RCKVCache(
            kv_model("qwen2"),
            policy=EvictionPolicy(Ratio(0.5), DistilledScorer(predictor=ScorePredictor.load(path))),
        )
    newer = tmp_path / "newer.safetensors"
    newer.write_bytes(path.read_bytes())
    _rewrite_metadata(newer, lambda metadata: metadata.update(format="2"))
    with pytest.raises(ValueError, match="newer than this rcattr reads"):
        ScorePredictor.load(newer)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="not a score predictor file"):
        ScorePredictor.load(truncated)
    anonymous = tmp_path / "anonymous.safetensors"
    anonymous.write_bytes(path.read_bytes())
    _rewrite_metadata(anonymous, lambda metadata: metadata.pop("identity"))
    with pytest.raises(ValueError, match="names no model"):
        ScorePredictor.load(anonymous)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3", "gemma3"])
def test_the_scores_are_the_predictors_map_of_the_attention_input(arch) -> None:
    model = kv_model(arch)
    predictor = random_predictor(model)
    ids = torch.randint(3, 120, (1, 40))
    cache = distilled_cache(model, predictor, sinks=0)
    with attention_inputs(model, cache.rc_layers) as held:  # an independent capture of the same forward
        model(ids, **cache_argument(model, cache))
    assert cache.rc_layers, "some layer evicts"
    for layer in cache.rc_layers:
        eviction = cache.evictions[layer]
        assert eviction is not None
        plain = DynamicCache(config=model.config)
        model(ids, **cache_argument(model, plain))
        values = plain.layers[layer].values
        expected = predictor.predict(layer, held[layer][:, :36]).exp() * values[:, :, :36].norm(dim=-1)
        torch.testing.assert_close(eviction.scores[..., :36], expected, rtol=1e-5, atol=1e-7)
    assert cache.compression_ratio == pytest.approx(0.5, abs=0.05)
    assert all(layer.hidden is None for layer in cache.evicting_layers.values())  # nothing held after scoring


@torch.no_grad()
def test_the_prefill_output_is_the_plain_forwards_and_copies_answer_alike() -> None:
    model = kv_model("llama")
    predictor = random_predictor(model)
    ids, question = torch.randint(3, 120, (1, 40)), torch.randint(3, 120, (1, 5))
    cache = distilled_cache(model, predictor)
    logits = model(ids, **cache_argument(model, cache)).logits
    plain = DynamicCache(config=model.config)
    torch.testing.assert_close(logits, model(ids, **cache_argument(model, plain)).logits, rtol=0, atol=1e-5)
    positions = torch.arange(40, 45)[None]
    first = model(question, position_ids=positions, **cache_argument(model, copy.deepcopy(cache))).logits
    second = model(question, position_ids=positions, **cache_argument(model, copy.deepcopy(cache))).logits
    assert torch.equal(first, second)
    assert copy.deepcopy(cache).policy.scorer.predictor is predictor  # shared, not copied


def test_a_chunked_prefill_scores_every_chunk_from_its_own_inputs() -> None:
    model = kv_model("llama")
    ids = torch.randint(3, 120, (1, 64))
    cache = distilled_cache(model, random_predictor(model))
    chunked_prefill(model, cache, ids, chunk_size=16)
    assert all(len(state.evictions) == 4 for state in cache.states.values())
    assert cache.compression_ratio == pytest.approx(0.5, abs=0.05)


def test_only_the_evicting_layers_need_a_map_and_a_missing_one_is_named() -> None:
    model = kv_model("gemma3")  # sliding-window layers keep their own cache
    evicting = RCKVCache(model, ratio=0.5).rc_layers
    cache = distilled_cache(model, random_predictor(model, layers=evicting))
    model(torch.randint(3, 120, (1, 40)), **cache_argument(model, cache))
    assert cache.compression_ratio == pytest.approx(0.5, abs=0.05)
    with pytest.raises(ValueError, match=rf"no map for the evicting layers \[{evicting[0]}"):
        distilled_cache(model, random_predictor(model, layers=[]))


def test_what_it_cannot_do_is_refused() -> None:
    model = kv_model("llama")
    predictor = random_predictor(model)
    with pytest.raises(ValueError, match="decode-time eviction"):
        EvictionPolicy(Threshold(1.0), DistilledScorer(predictor=predictor), decode=DecodeEviction(8))
    with pytest.raises(ValueError, match="predictor must be a ScorePredictor"):
        DistilledScorer()
    with pytest.raises(ValueError, match="width"):
        predictor.predict(0, torch.zeros(1, 5, 3))


def test_a_predictor_ships_by_model_name_whatever_its_case(tmp_path) -> None:
    model = kv_model("llama")
    assert ScorePredictor.shipped(model) is None  # no predictor for an unnamed model
    predictor = random_predictor(model)
    renamed = ScorePredictor({**predictor.identity, "model": "SmolLM2"}, predictor.weights, predictor.biases)
    model.config.name_or_path = "/models/smollm2"
    renamed.check(model)  # a hub name and a folder of another case are the same model
    model.config.name_or_path = "/models/other"
    with pytest.raises(ValueError, match="fitted on SmolLM2"):
        renamed.check(model)
