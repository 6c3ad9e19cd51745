"""docs/extending.md's recipes run as written: a new eviction score, added to RCKVCache from the docs' code."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from rcattr.kvcache import DecodeEviction, EvictionPolicy, Ratio, RCKVCache
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt
from tests.reference.logits import float64_logits, record_eager_qk

RECIPES = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def recipe_code(heading: str) -> str:
    """The Python block of the recipe under ``## heading`` (its indentation removed)."""
    section = RECIPES.read_text().split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    lines = block.splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def test_the_eviction_score_recipe_decides_what_the_cache_keeps() -> None:
    namespace: dict[str, object] = {}
    exec(recipe_code("An eviction score"), namespace)  # noqa: S102 - the documentation's own code
    scorer = namespace["PeakLogitScorer"](value_norm=False, sinks=0)  # type: ignore[operator]
    model = kv_model("llama", "eager")
    ids, mask = prompt(batch=2, length=30, pad=5)
    window, n = 4, ids.shape[1]
    cache = RCKVCache(model, window=window, policy=EvictionPolicy(Ratio(0.5, scope="head"), scorer))
    with torch.no_grad(), record_eager_qk(model) as records:
        model(ids, attention_mask=mask)
        model(ids, attention_mask=mask, **cache_argument(model, cache))
    for layer, eviction in enumerate(cache.evictions):
        query, key = records[layer][0]  # the plain forward's
        logits = float64_logits(query[:, :, -window:], key)[..., : n - window]  # [B, H, w, m]
        want = logits.amax(2).view(2, 2, 2, n - window).mean(2)  # [B, Hkv, m]: loops would give the same
        want[1, :, :5] = float("nan")  # the padding of the second row
        got = eviction.scores[..., : n - window]
        torch.testing.assert_close(got.double(), want, equal_nan=True, rtol=1e-4, atol=1e-4)
        for row, real in ((0, n), (1, n - 5)):
            budget = int(real * 0.5) - window
            for head in range(2):
                ranked = want[row, head].nan_to_num(float("-inf")).argsort(descending=True)[:budget]
                assert set(eviction.kept[row, head, : n - window].nonzero().flatten().tolist()) == set(
                    ranked.tolist()
                )
    decoding = RCKVCache(model, window=window, policy=EvictionPolicy(Ratio(0.5), scorer, DecodeEviction(3)))
    out = model.generate(
        ids, attention_mask=mask, **cache_argument(model, decoding), max_new_tokens=7, do_sample=False
    )
    assert out.shape == (2, n + 7)
    assert all(len(state.decode_evictions) == 2 for state in decoding.states.values())
    assert decoding.compression_ratio > 0.3
