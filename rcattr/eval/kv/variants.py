"""RCKVCache's scoring variants as the KV benchmark names them (`"paper"`, `"value_norm+sinks=4"`, ...),
importable without torch: the command line checks them before anything heavy loads."""

from __future__ import annotations

from typing import Any

# the words of an RCKVCache variant (joined by "+", e.g. "value_norm+sinks=4"): changes to the paper's recipe
PAPER_VARIANT = "paper"  # the paper's recipe: expected RC, a threshold per key head and layer, no sinks
PAPER_OPTIONS: dict[str, Any] = {
    "statistic": "expected",
    "value_norm": False,
    "sinks": 0,
    "scope": "head",
    "pooling": "mean",
    "probe": "window",
    "prefill_chunk": None,  # the context in one forward; chunk=N: N tokens per forward (rcattr.kvcache.prefill)
    "blend": 0.0,  # with the distilled probe, the window score's share (rcattr.eval.kv.scorers.BlendedScorer)
}
RC_VARIANT_WORDS: dict[str, dict[str, Any]] = {
    "value_norm": {"value_norm": True},
    "upper_bound": {"statistic": "upper_bound"},  # a measured loser: rcattr.eval.kv.scorers
    "model_budget": {"scope": "model"},
    "max_pool": {
        "pooling": "max"
    },  # the max over the probe's queries and query heads (rcattr.eval.kv.scorers)
    # the keys scored against a replay of the context (rcattr.kvcache.replay), each replay query its own
    # reference, max-pooled (rcattr.eval.kv.scorers.QueryMaxScorer)
    "replay": {"probe": "replay"},
    # the max attention weight instead of RC (KVzip's statistic: rcattr.eval.kv.scorers.SoftmaxMaxScorer)
    "softmax": {"statistic": "softmax", "pooling": "max"},
    # the replay's softmax score predicted from each layer's attention input (rcattr.kvcache.distilled, the
    # predictor shipped for the model): no window, no replay
    "distilled": {"probe": "distilled"},
    # the distilled score and the window's, each over its layer's mean, half and half (scorers.BlendedScorer)
    "blend": {"probe": "distilled", "blend": 0.5},
}
DEFAULT_RECIPE = "model_budget+value_norm+sinks=4"  # RCKVCache's defaults, spelled as a variant


def rc_options(variant: str) -> dict[str, Any]:
    """The settings of `variant` (the statistic, the value norm, the sinks, the threshold's scope, the pooling
    over the probe's queries, the probe: the window or a replay of the context, the prefill's chunk): "paper",
    or words of [`RC_VARIANT_WORDS`][rcattr.eval.kv.variants.RC_VARIANT_WORDS], `sinks=N` and `chunk=N` (a chunked prefill of N tokens per forward)
    joined by "+", each a change to the paper's recipe.
    Every setting is spelled out, so a variant means the same cache whatever RCKVCache's defaults are."""
    options = dict(PAPER_OPTIONS)
    if variant == PAPER_VARIANT:
        return options
    for word in variant.split("+"):
        name, _, value = word.partition("=")
        if name in ("sinks", "chunk") and value.isdigit():
            options["sinks" if name == "sinks" else "prefill_chunk"] = int(value)
        elif word in RC_VARIANT_WORDS:
            options.update(RC_VARIANT_WORDS[word])
        else:
            known = ", ".join([*RC_VARIANT_WORDS, "sinks=N", "chunk=N"])
            raise ValueError(f"unknown RCKVCache variant {word!r} in {variant!r}; choose from {known}")
    return options
