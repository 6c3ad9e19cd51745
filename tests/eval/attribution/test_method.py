"""One benchmark record through a method (rcattr.eval.attribution.method): its input, units and row."""

from __future__ import annotations

import pytest
import torch

from rcattr.eval.attribution.method import context_input, output_units, scored_row
from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan
from rcattr.text.segmentation import whole_span

RECORD = BenchmarkRecord(
    "r1",
    "Who sat?",
    ["The cat sat.", "Dogs bark."],
    "The cat sat and dogs bark.",
    [GoldSpan(0, 11, "The cat sat", 0), GoldSpan(16, 25, "dogs bark", 1)],
)


def test_the_records_sources_question_and_gold_units() -> None:
    inp = context_input(RECORD)
    assert list(inp.chunks) == RECORD.chunks and inp.question == "Who sat?"
    assert output_units(RECORD) == [(0, 11), (16, 25)]


def test_a_scored_row_hits_each_gold_units_source() -> None:
    spans = [whole_span(chunk, index) for index, chunk in enumerate(RECORD.chunks)]
    units = torch.tensor([[0.9, 0.1], [0.3, 0.7]])
    row = scored_row(torch.tensor([0.6, 0.4]), units, spans, RECORD, "chunk")
    assert row["source"] == [True, True] and row["chunk_scores"] == pytest.approx([0.6, 0.4])
    assert "chunk_scores" not in scored_row(torch.tensor([0.6, 0.4]), units, spans, RECORD, "sentence")
