"""RCPress: RCKVCache's scores as a kvpress ScorerPress (runs where kvpress is installed: make test-kvpress)."""

from __future__ import annotations

import sys

import pytest
import torch

from rcattr.kvcache import RCKVCache
from tests.helpers import char_tokenizer, tiny_model


def _recorded_scores(monkeypatch, press, model, ids) -> dict[int, torch.Tensor]:
    """Run ``model`` on ``ids`` under ``press``; the scores its ``score`` returned, per layer."""
    from rcattr.kvcache.press import RCPress

    recorded: dict[int, torch.Tensor] = {}
    original = RCPress.score

    def recording(self, module, *args):
        recorded[module.layer_idx] = scores = original(self, module, *args)
        return scores

    monkeypatch.setattr(RCPress, "score", recording)
    with torch.no_grad(), press(model):
        model(ids)
    return recorded


@pytest.mark.kvpress
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
@pytest.mark.parametrize("options", [{}, {"value_norm": False, "sinks": 0}, {"statistic": "upper_bound"}])
def test_press_scores_are_rckvcaches_scores(monkeypatch, arch, options) -> None:
    from rcattr.kvcache import RCPress

    model = tiny_model(arch)
    ids = torch.randint(3, 120, (1, 30))
    press = RCPress(compression_ratio=0.5, window=6, **options)
    recorded = _recorded_scores(monkeypatch, press, model, ids)
    cache = RCKVCache(model, window=6, **options)
    with torch.no_grad():
        model(ids, past_key_values=cache)
    sinks = press.sinks
    for layer, eviction in enumerate(cache.evictions):
        theirs = recorded[layer]
        torch.testing.assert_close(
            theirs[..., sinks:-6], eviction.scores[..., sinks:-6], rtol=1e-4, atol=1e-5
        )
        assert torch.isinf(theirs[..., :sinks]).all() and torch.isinf(theirs[..., -6:]).all()


@pytest.mark.kvpress
def test_press_keeps_kvpress_share_with_window_and_sinks(monkeypatch) -> None:
    from transformers import DynamicCache

    from rcattr.kvcache import RCPress

    model = tiny_model("llama")
    ids = torch.randint(3, 120, (1, 40))
    press = RCPress(compression_ratio=0.6, window=8, sinks=3)
    recorded = _recorded_scores(monkeypatch, press, model, ids)
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), press(model):
        model(ids, past_key_values=cache)
    for layer, scores in recorded.items():
        kept = cache.layers[layer].keys.shape[2]
        assert kept == int(40 * (1 - 0.6))
        best = scores.topk(kept, dim=-1).indices
        for head in range(scores.shape[1]):  # the window and the sinks are among the kept
            assert {0, 1, 2, *range(32, 40)} <= set(best[0, head].tolist())


@pytest.mark.kvpress
def test_press_runs_in_kvpress_pipeline() -> None:
    from kvpress import KVPressTextGenerationPipeline

    from rcattr.kvcache import RCPress

    model, tokenizer = tiny_model("llama"), char_tokenizer()
    pipeline = KVPressTextGenerationPipeline(model=model, tokenizer=tokenizer)
    context = "Paris is the capital of France. Berlin is the capital of Germany. " * 2
    answer = pipeline(context, question="Where is Paris?", press=RCPress(0.5, window=8), max_new_tokens=4)
    assert isinstance(answer["answer"], str)


def test_bad_press_settings_are_named() -> None:
    pytest.importorskip("kvpress")
    from rcattr.kvcache import RCPress

    for options, message in [
        ({"compression_ratio": 1.0}, "compression_ratio"),
        ({"window": 0}, "window"),
        ({"sinks": -1}, "sinks"),
        ({"statistic": "median"}, "statistic"),
    ]:
        with pytest.raises(ValueError, match=message):
            RCPress(**options)


def test_without_kvpress_the_press_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "kvpress", None)  # import kvpress now fails
    monkeypatch.delitem(sys.modules, "rcattr.kvcache.press", raising=False)
    import rcattr.kvcache

    with pytest.raises(ImportError, match="RCPress is a kvpress press and needs kvpress"):
        rcattr.kvcache.RCPress  # noqa: B018
