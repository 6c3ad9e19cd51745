"""What a method of the attribution benchmark is: [`AttributionMethod`][rcattr.eval.attribution.method.AttributionMethod], and the common kind,
[`SpanAttributorMethod`][rcattr.eval.attribution.method.SpanAttributorMethod], one [`SpanAttributor`][rcattr.attribution.base.SpanAttributor] run on each record.

A method builds what it runs once per run ([`AttributionMethod.build`][rcattr.eval.attribution.method.AttributionMethod.build]), turns each record into one
JSON line ([`AttributionMethod.row`][rcattr.eval.attribution.method.AttributionMethod.row]; a batch of records at once with `--batch-size`,
[`AttributionMethod.rows`][rcattr.eval.attribution.method.AttributionMethod.rows]), and says how its lines enter the results: the rows of the
table they give ([`AttributionMethod.table`][rcattr.eval.attribution.method.AttributionMethod.table]; one, under the method's name, unless the method scores
several recipes in one pass), the results of its own ([`AttributionMethod.results`][rcattr.eval.attribution.method.AttributionMethod.results]) and its figures.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import torch
from transformers import PreTrainedModel

from rcattr.attribution.base import SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.eval.common.datasets import BenchmarkRecord
from rcattr.eval.common.metrics import location_hits, source_hits
from rcattr.protocols import TokenizerLike
from rcattr.text.prompting import ContextInput
from rcattr.text.segmentation import TextSpan

if TYPE_CHECKING:
    from rcattr.eval.attribution.config import BenchmarkConfig

A = TypeVar("A")
Row = dict[str, Any]
MethodBuilder = Callable[[PreTrainedModel, TokenizerLike, "BenchmarkConfig"], SpanAttributor]


def context_input(record: BenchmarkRecord) -> ContextInput:
    """The record's sources and question, as the attributors take them."""
    return ContextInput(record.chunks, record.question)


def output_units(record: BenchmarkRecord) -> list[tuple[int, int]]:
    """The record's gold spans as the output units, `(start, end)` characters of the answer."""
    return [(span.start, span.end) for span in record.gold]


def scored_row(
    answer: torch.Tensor,
    units: torch.Tensor,
    spans: Sequence[TextSpan],
    record: BenchmarkRecord,
    granularity: str,
) -> Row:
    """A record's line: hits per gold span from `units [n_gold, n_spans]`, and the chunk scores
    `answer [n_spans]` when the context spans are chunks."""
    row: Row = {
        "source": source_hits(units, spans, record.gold),
        "location": location_hits(units, spans, record),
    }
    if granularity == "chunk":
        row["chunk_scores"] = answer.tolist()
    return row


class AttributionMethod(ABC, Generic[A]):
    """A method of the attribution benchmark; `A` is what [`build`][rcattr.eval.attribution.method.AttributionMethod.build] returns and [`row`][rcattr.eval.attribution.method.AttributionMethod.row] runs.

    Attributes
    ----------
    name : str
        The method's name on the command line, and the stem of its file of rows (`records/NAME.jsonl`).
    shared_pass : bool
        Whether the table rows of the method come from one pass per record: each carries `"from": name`,
        and the pass's time and memory.
    """

    name: str
    shared_pass: ClassVar[bool] = False

    @abstractmethod
    def build(self, model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig) -> A:
        """What the method runs on each record, built once per run."""

    @abstractmethod
    def row(self, built: A, record: BenchmarkRecord, config: BenchmarkConfig) -> Row:
        """The record's JSON line (without its `id` and `seconds`, which the runner adds)."""

    def rows(self, built: A, records: Sequence[BenchmarkRecord], config: BenchmarkConfig) -> list[Row]:
        """The lines of a batch of records (`config.batch_size` of them at most): [`row`][rcattr.eval.attribution.method.AttributionMethod.row] of each,
        unless the method attributes a batch at once."""
        return [self.row(built, record, config) for record in records]

    def table(self, done: dict[str, Row]) -> dict[str, dict[str, Row]]:
        """The rows of the results table the method's lines `done` (by record id) give, each by record id
        a line with `source` and `location` hits and, at chunk granularity, `chunk_scores`."""
        return {self.name: done}

    def results(self, done: dict[str, Row]) -> dict[str, Any]:
        """Entries of `results.json` of the method's own, from its lines `done` (none by default)."""
        return {}

    def figures(self, results: dict[str, Any], out: Path) -> None:
        """Write the method's figures into the run folder `out` (none by default)."""


@dataclass(frozen=True)
class SpanAttributorMethod(AttributionMethod[SpanAttributor]):
    """A [`SpanAttributor`][rcattr.attribution.base.SpanAttributor] run on each record: `builder(model, tokenizer, config)`
    returns it, and each gold span of the answer is one output unit.

    Parameters
    ----------
    name : str
        The method's name.
    builder : callable
        `(model, tokenizer, config) -> SpanAttributor`.
    """

    name: str
    builder: MethodBuilder

    def build(
        self, model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig
    ) -> SpanAttributor:
        return self.builder(model, tokenizer, config)

    def row(self, built: SpanAttributor, record: BenchmarkRecord, config: BenchmarkConfig) -> Row:
        result = built.attribute(
            context_input(record),
            record.answer,
            granularity=config.granularity,
            output_granularity=output_units(record),
        )
        return self._scored(result, record, config)

    def rows(
        self, built: SpanAttributor, records: Sequence[BenchmarkRecord], config: BenchmarkConfig
    ) -> list[Row]:
        """The records' lines from one [`attribute_many`][rcattr.attribution.base.SpanAttributor.attribute_many] call."""
        if len(records) == 1:  # attribute() itself: a run at batch size 1 is the run before batching
            return [self.row(built, records[0], config)]
        results = built.attribute_many(
            [context_input(record) for record in records],
            [record.answer for record in records],
            batch_size=len(records),
            granularity=config.granularity,
            output_granularity=[output_units(record) for record in records],
            progress=False,
        )
        return [self._scored(result, record, config) for result, record in zip(results, records, strict=True)]

    def _scored(self, result: RCAttributionResult, record: BenchmarkRecord, config: BenchmarkConfig) -> Row:
        if result.token_attr is None:
            raise ValueError(f"{self.name} gave no scores per output unit (token_attr) on record {record.id}")
        return scored_row(
            result.seq_attr, result.token_attr, result.context_spans, record, config.granularity
        )
