"""RCPress: RCKVCache's scores as a kvpress ScorerPress (runs where kvpress is installed: make test-kvpress)."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import DynamicCache

from rcattr.eval.kv.scorers import AblationScorer
from rcattr.kvcache import EvictionPolicy, Ratio, RCKVCache, WindowScorer
from rcattr.runtime.compat import cache_argument
from tests.helpers import char_tokenizer, tiny_model

pytestmark = pytest.mark.transformers_line

WINDOW = 6


def _recorded_scores(monkeypatch, press, model, ids) -> tuple[dict[int, torch.Tensor], DynamicCache]:
    """Run ``model`` on ``ids`` under ``press``: the scores its ``score`` returned per layer, and the cache."""
    from rcattr.kvcache.press import RCPress

    recorded: dict[int, torch.Tensor] = {}
    original = RCPress.score

    def recording(self, module, *args):
        recorded[module.layer_idx] = scores = original(self, module, *args)
        return scores

    monkeypatch.setattr(RCPress, "score", recording)
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), press(model):
        model(ids, **cache_argument(model, cache))
    return recorded, cache


def _kept_positions(model, ids, cache: DynamicCache, layer: int) -> list[set[int]]:
    """Per key head, the prompt positions whose keys ``cache`` holds in ``layer`` (kvpress stores them
    in score order, so each is found among the full prompt's keys)."""
    full = DynamicCache(config=model.config)
    with torch.no_grad():
        model(ids, **cache_argument(model, full))
    everything, kept = full.layers[layer].keys[0], cache.layers[layer].keys[0]  # [Hkv, n | k, d]
    distance = (kept[:, :, None] - everything[:, None]).abs().amax(-1)  # [Hkv, k, n]
    assert bool((distance.amin(-1) == 0).all()), "a kept key is none of the prompt's"
    return [set(head.tolist()) for head in distance.argmin(-1)]


@pytest.mark.kvpress
@pytest.mark.parametrize("arch", ["llama", "qwen3", "phi3", "gemma3", "qwen2"])
@pytest.mark.parametrize(
    "scorer",
    [
        WindowScorer(),
        WindowScorer(value_norm=False, sinks=0),
        AblationScorer(statistic="upper_bound", group_reduce="max"),
    ],
)
def test_press_scores_are_rckvcaches_scores(monkeypatch, arch, scorer) -> None:
    """Before the window the press scores every key as RCKVCache does (queries rebuilt from the hidden
    states, q-norm and RoPE included); the window and the sinks get inf."""
    from rcattr.kvcache import RCPress

    model = tiny_model(arch)
    ids = torch.randint(3, 120, (1, 30))
    press = RCPress(compression_ratio=0.5, window=WINDOW, scorer=scorer)
    recorded, _ = _recorded_scores(monkeypatch, press, model, ids)
    with torch.no_grad(), RCKVCache(model, window=WINDOW, policy=EvictionPolicy(scorer=scorer)) as cache:
        model(ids, **cache_argument(model, cache))
    compared = [layer for layer, eviction in enumerate(cache.evictions) if eviction is not None]
    assert compared  # gemma3 and qwen2: the full-attention layers that RCKVCache evicts
    sinks = press.scorer.sinks
    for layer in compared:
        ours, theirs = recorded[layer], cache.evictions[layer].scores  # [1, Hkv, 30]
        assert ours.shape == theirs.shape == (1, 2, 30)
        torch.testing.assert_close(ours[..., sinks:-WINDOW], theirs[..., sinks:-WINDOW], rtol=1e-4, atol=1e-6)
        assert torch.isinf(ours[..., :sinks]).all() and torch.isinf(ours[..., -WINDOW:]).all()


@pytest.mark.kvpress
@pytest.mark.parametrize(("ratio", "sinks"), [(0.3, 4), (0.55, 3), (0.7, 0)])
def test_press_keeps_kvpress_share_with_window_and_sinks(monkeypatch, ratio, sinks) -> None:
    """Every key head keeps int(n (1 - ratio)) keys, the window and the sinks among them: the very keys
    RCKVCache keeps at the same fixed ratio with a budget per key head."""
    from rcattr.kvcache import RCPress

    model = tiny_model("llama")
    n = 41
    ids = torch.randint(3, 120, (1, n))
    scorer = WindowScorer(sinks=sinks)
    press = RCPress(compression_ratio=ratio, window=WINDOW, scorer=scorer)
    _, cache = _recorded_scores(monkeypatch, press, model, ids)
    policy = EvictionPolicy(Ratio(ratio, scope="head"), scorer)
    with torch.no_grad(), RCKVCache(model, window=WINDOW, policy=policy) as rc:
        model(ids, **cache_argument(model, rc))
    always = {*range(sinks), *range(n - WINDOW, n)}
    for layer in range(model.config.num_hidden_layers):
        assert cache.layers[layer].keys.shape[2] == int(n * (1 - ratio))
        kept = _kept_positions(model, ids, cache, layer)
        for head, positions in enumerate(kept):
            assert always <= positions
            assert positions == set(rc.kept_indices[layer][head][0].tolist())


@pytest.mark.kvpress
def test_press_at_ratio_zero_leaves_the_cache_whole() -> None:
    from rcattr.kvcache import RCPress

    model = tiny_model("llama")
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), RCPress(window=WINDOW)(model):
        model(torch.randint(3, 120, (1, 20)), **cache_argument(model, cache))
    assert [layer.keys.shape[2] for layer in cache.layers] == [20] * model.config.num_hidden_layers


@pytest.mark.kvpress
def test_press_runs_in_kvpress_pipeline() -> None:
    import kvpress  # noqa: F401  (registers "kv-press-text-generation")
    from transformers import pipeline

    from rcattr.kvcache import RCPress

    model, tokenizer = tiny_model("llama"), char_tokenizer()
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer)
    context = "Paris is the capital of France. Berlin is the capital of Germany. " * 2
    held = {}  # after answering, kvpress's pipeline leaves the (compressed) context in the cache
    for press in (None, RCPress(compression_ratio=0.5, window=8)):
        cache = DynamicCache(config=model.config)
        answer = pipe(context, question="Where is Paris?", press=press, cache=cache, max_new_tokens=4)
        assert isinstance(answer["answer"], str)
        held[press is None] = {layer.keys.shape[2] for layer in cache.layers}
    (n,) = held[True]
    assert n > len(context) and held[False] == {int(n * 0.5)}
    hooks = [m for m in model.modules() if m._forward_hooks]
    assert not hooks, "the press left hooks on the model"


@pytest.mark.kvpress
def test_press_around_generate_and_inside_adakv() -> None:
    """``with press(model): model.generate(...)`` compresses the prompt once, then decodes; AdaKV (kvpress's
    head-wise budgets) takes RCPress as its scorer."""
    from kvpress import AdaKVPress

    from rcattr.kvcache import RCPress

    model = tiny_model("llama")
    ids = torch.randint(3, 120, (1, 40))
    for press in (RCPress(0.5, window=WINDOW), AdaKVPress(RCPress(0.5, window=WINDOW))):
        cache = DynamicCache(config=model.config)
        with torch.no_grad(), press(model):
            out = model.generate(
                ids,
                **cache_argument(model, cache),
                max_new_tokens=5,
                min_new_tokens=5,
                do_sample=False,
                pad_token_id=0,
            )
        assert out.shape == (1, 45)
        if isinstance(press, RCPress):  # the 20 kept prompt entries and 4 decoded tokens (the 5th is not fed)
            assert [layer.keys.shape[2] for layer in cache.layers] == [24] * model.config.num_hidden_layers


@pytest.mark.kvpress
@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"compression_ratio": 1.0}, "compression_ratio"),
        ({"compression_ratio": -0.1}, "compression_ratio"),
        ({"compression_ratio": True}, "compression_ratio"),
        ({"window": 0}, "window"),
        ({"window": 2.0}, "window"),
        ({"scorer": None}, "scorer"),
    ],
)
def test_bad_press_settings_are_named(options, named) -> None:
    from rcattr.kvcache import RCPress

    with pytest.raises(ValueError, match=named):
        RCPress(**options)


@pytest.mark.kvpress
@pytest.mark.parametrize(("n", "window"), [(20, 5000), (20, 16), (3, 16)])
def test_press_refuses_a_prompt_no_longer_than_window_and_sinks(n, window) -> None:
    """As kvpress's SnapKV refuses a prompt no longer than its window: nothing would be left to score,
    and kvpress would evict an arbitrary share of the window and the sinks."""
    from rcattr.kvcache import RCPress

    model = tiny_model("llama")
    cache = DynamicCache(config=model.config)
    message = (
        rf"RCPress\(window={window}\) with 4 sinks needs a context longer than {window + 4} tokens, got {n}"
    )
    with pytest.raises(ValueError, match=message), torch.no_grad(), RCPress(0.5, window=window)(model):
        model(torch.randint(3, 120, (1, n)), **cache_argument(model, cache))


@pytest.mark.kvpress
def test_press_refuses_to_compress_an_rckvcache() -> None:
    from rcattr.kvcache import RCPress

    model = tiny_model("llama")
    ids = torch.randint(3, 120, (1, 60))
    with pytest.raises(TypeError, match="RCPress cannot compress an RCKVCache.*use one or the other"):
        with torch.no_grad(), RCKVCache(model) as cache, RCPress(0.5, window=WINDOW)(model):
            model.generate(
                ids, **cache_argument(model, cache), max_new_tokens=2, do_sample=False, pad_token_id=0
            )
    assert not [m for m in model.modules() if m._forward_hooks], "the press left hooks on the model"


@pytest.mark.kvpress
def test_press_is_a_kvpress_scorer_dataclass() -> None:
    import dataclasses

    from kvpress import ScorerPress

    from rcattr.kvcache import RCPress

    press = RCPress()
    assert isinstance(press, ScorerPress) and dataclasses.is_dataclass(press)
    defaults = {f.name: getattr(press, f.name) for f in dataclasses.fields(press)}
    assert defaults == {
        "compression_ratio": 0.0,
        "window": 16,
        "scorer": WindowScorer(value_norm=True, sinks=4),
    }


def test_without_kvpress_the_press_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "kvpress", None)  # import kvpress now fails, installed or not
    monkeypatch.delitem(sys.modules, "rcattr.kvcache.press", raising=False)
    import rcattr.kvcache

    with pytest.raises(ImportError, match=r"RCPress needs kvpress: pip install"):
        rcattr.kvcache.RCPress  # noqa: B018
    with pytest.raises(ImportError, match=r"RCPress needs kvpress"):
        from rcattr.kvcache import RCPress  # noqa: F401
    namespace: dict[str, object] = {}
    exec("from rcattr.kvcache import *", namespace)  # the star import does not need kvpress
    assert "RCKVCache" in namespace and "RCPress" not in namespace
    assert "RCPress" in dir(rcattr.kvcache)
    with pytest.raises(AttributeError, match="no attribute 'RCPresss'"):
        rcattr.kvcache.RCPresss  # noqa: B018
