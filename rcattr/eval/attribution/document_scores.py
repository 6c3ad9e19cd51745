"""How a document's sentences add up to its score: the `documents` method of the attribution
benchmark.

Citations and the per-document list give a document one score per output unit from the scores of its context
spans, usually sentences. Summed, a long document collects mass from sentences that say nothing of the
answer. [`DocumentScoresMethod`][rcattr.eval.attribution.document_scores.DocumentScoresMethod] attributes each record with the default RCAttributor at sentence
granularity, keeps each gold unit's span scores, and gives one table row per way of adding them up
([`AGGREGATIONS`][rcattr.eval.attribution.document_scores.AGGREGATIONS]): the top document of each against the gold source. Run it on the length benchmark
([`rcattr.eval.attribution.lengths`][rcattr.eval.attribution.lengths]), where the gold source is much shorter or longer than the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from transformers import PreTrainedModel

from rcattr.attribution.attributor import RCAttributor
from rcattr.eval.attribution.method import AttributionMethod, Row, context_input, output_units
from rcattr.eval.common.datasets import BenchmarkRecord
from rcattr.protocols import TokenizerLike

if TYPE_CHECKING:
    from rcattr.eval.attribution.config import BenchmarkConfig

Aggregation = Callable[[torch.Tensor], torch.Tensor]  # a document's span scores [n] -> its score []


def top_mean(k: int) -> Aggregation:
    """The mean of a document's `k` best span scores (of all of them when it has fewer)."""
    return lambda scores: scores.topk(min(k, len(scores))).values.mean()


AGGREGATIONS: dict[str, Aggregation] = {
    "sum": torch.sum,  # rcattr's per-document share before 0.1.0
    "max": torch.max,
    "top-2 mean": top_mean(2),
    "mean": torch.mean,
}


def aggregated(
    scores: torch.Tensor, sources: list[int], n_documents: int, aggregation: Aggregation
) -> torch.Tensor:
    """`[n_documents]`: each document's score from the `[n_spans]` scores of its spans (`sources`: each
    span's document); a document without spans scores 0."""
    where = torch.tensor(sources)
    return torch.stack(
        [
            aggregation(scores[where == d]) if bool((where == d).any()) else scores.new_zeros(())
            for d in range(n_documents)
        ]
    )


@dataclass(frozen=True)
class DocumentScoresMethod(AttributionMethod[RCAttributor]):
    """An RCAttributor at sentence granularity, its span scores added up per document in every way of
    [`AGGREGATIONS`][rcattr.eval.attribution.document_scores.AGGREGATIONS]: one table row each, `documents · NAME`. Its line per record holds each gold unit's
    `[n_spans]` scores and each span's document.

    Parameters
    ----------
    attributor : callable
        `(model, tokenizer, config) -> RCAttributor` (the benchmark's default).
    name : str, optional
        Default: `"documents"`.
    """

    attributor: Callable[[PreTrainedModel, TokenizerLike, BenchmarkConfig], RCAttributor]
    name: str = "documents"
    shared_pass: ClassVar[bool] = True

    def build(
        self, model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig
    ) -> RCAttributor:
        return self.attributor(model, tokenizer, config)

    def row(self, built: RCAttributor, record: BenchmarkRecord, config: BenchmarkConfig) -> Row:
        result = built.attribute(
            context_input(record),
            record.answer,
            granularity="sentence",
            output_granularity=output_units(record),
        )
        assert result.token_attr is not None  # always set by RCAttributionResult.__init__
        return {
            "scores": [[round(float(s), 7) for s in unit] for unit in result.token_attr],
            "sources": [span.source for span in result.context_spans],
            "gold": [span.source for span in record.gold],
            "documents": len(record.chunks),
        }

    def table(self, done: dict[str, Row]) -> dict[str, dict[str, Row]]:
        """One table row per aggregation: per gold unit, whether its top document is the gold one."""
        return {
            f"{self.name} · {name}": {key: _hits(row, aggregation) for key, row in done.items()}
            for name, aggregation in AGGREGATIONS.items()
        }


def _hits(row: Row, aggregation: Aggregation) -> Row:
    hits = [
        int(torch.argmax(aggregated(torch.tensor(unit), row["sources"], row["documents"], aggregation)))
        == gold
        for unit, gold in zip(row["scores"], row["gold"], strict=True)
    ]
    return {"source": hits, "location": [None] * len(hits)}
