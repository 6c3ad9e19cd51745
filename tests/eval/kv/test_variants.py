"""RCKVCache's variants as the KV benchmark names them."""

from __future__ import annotations

import pytest

from rcattr.eval.kv.variants import DEFAULT_RECIPE, PAPER_OPTIONS, PAPER_VARIANT, rc_options


def test_each_word_changes_the_paper_s_recipe_and_every_setting_is_spelled_out() -> None:
    assert rc_options(PAPER_VARIANT) == PAPER_OPTIONS
    assert rc_options("value_norm+sinks=4") == {**PAPER_OPTIONS, "value_norm": True, "sinks": 4}
    assert rc_options(DEFAULT_RECIPE) == {
        "statistic": "expected",
        "value_norm": True,
        "sinks": 4,
        "scope": "model",
        "pooling": "mean",
        "probe": "window",
        "prefill_chunk": None,
        "blend": 0.0,
    }
    assert rc_options("upper_bound")["statistic"] == "upper_bound"
    assert rc_options(f"{DEFAULT_RECIPE}+chunk=512") == {**rc_options(DEFAULT_RECIPE), "prefill_chunk": 512}
    assert rc_options("blend") == {**PAPER_OPTIONS, "probe": "distilled", "blend": 0.5}


@pytest.mark.parametrize("variant", ["bogus", "sinks=x", "chunk=", "value_norm+paper"])
def test_an_unknown_word_is_refused_with_the_known_ones(variant: str) -> None:
    with pytest.raises(ValueError, match="unknown RCKVCache variant .*choose from value_norm, upper_bound"):
        rc_options(variant)
