"""The attribution benchmark's method registry (rcattr.eval.attribution.methods): a registered method runs
through the same protocol."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.eval.attribution import (
    AttributionBenchmark,
    BenchmarkConfig,
    SpanAttributorMethod,
    default_methods,
)
from rcattr.runtime.models import load_model


class FirstSource(SpanAttributor):
    """Every output unit to the first context span: right on half of the tiny file's gold spans."""

    name = "first_source"

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        scores = torch.zeros(len(example.output_spans), len(example.context_spans))
        scores[:, 0] = 1.0
        return example.result(scores[0], scores, self.name, inp)


def test_a_registered_method_runs_through_the_same_protocol(saved_llama, quotesum_data) -> None:
    methods = default_methods()
    methods.add(
        SpanAttributorMethod("first_source", lambda model, tokenizer, config: FirstSource(model, tokenizer))
    )
    for taken in ("rc", "sweep", "first_source", "faithfulness", "peak_memory"):
        with pytest.raises(ValueError, match="built-in or reserved"):
            methods.add(
                SpanAttributorMethod(taken, lambda model, tokenizer, config: FirstSource(model, tokenizer))
            )
    assert "first_source" not in default_methods()  # each registry is its own: no module state changed
    model, tokenizer = load_model(str(saved_llama))
    config = BenchmarkConfig("quotesum", methods=("first_source", "bm25"))
    results = AttributionBenchmark(config, model, tokenizer, quotesum_data / "own", methods=methods).run()
    assert results["methods"]["first_source"]["accuracy"] == 0.5
    assert results["methods"]["first_source"]["n_spans"] == 6
    assert "| first_source | 50.0% [" in (quotesum_data / "own" / "results.md").read_text()
    assert len((quotesum_data / "own" / "records" / "first_source.jsonl").read_text().splitlines()) == 3
    with pytest.raises(ValueError, match="unknown method"):  # the default registry has no first_source
        AttributionBenchmark(config, model, tokenizer, quotesum_data / "own")
    with pytest.raises(ValueError, match="unknown method"):
        AttributionBenchmark(
            BenchmarkConfig("quotesum", methods=("mine",)),
            model,
            tokenizer,
            quotesum_data / "x",
            methods=methods,
        )
