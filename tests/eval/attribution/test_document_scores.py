"""Ways of adding up a document's sentence scores, and the ``documents`` method on a tiny model."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from rcattr.eval.attribution.document_scores import AGGREGATIONS, DocumentScoresMethod, aggregated, top_mean
from rcattr.eval.attribution.methods import rc_attributor
from tests.helpers import COMMON, LENGTH_SQUAD, data_folder, run_attribution, save_tiny

SCORES = torch.tensor([0.30, 0.10, 0.12, 0.11, 0.12, 0.25])
SOURCES = [0, 1, 1, 1, 1, 2]  # document 1 is long: four middling sentences; document 3 has none


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sum", [0.30, 0.45, 0.25, 0.0]),
        ("max", [0.30, 0.12, 0.25, 0.0]),
        ("top-2 mean", [0.30, 0.12, 0.25, 0.0]),
        ("mean", [0.30, 0.1125, 0.25, 0.0]),
    ],
)
def test_aggregations_of_each_documents_span_scores(name, expected) -> None:
    assert aggregated(SCORES, SOURCES, 4, AGGREGATIONS[name]).tolist() == pytest.approx(expected)


def test_top_mean_takes_the_best_k_or_all_of_fewer() -> None:
    assert float(top_mean(3)(torch.tensor([0.1, 0.5, 0.3, 0.2]))) == pytest.approx(1 / 3)
    assert float(top_mean(3)(torch.tensor([0.4]))) == pytest.approx(0.4)


def test_table_scores_each_unit_by_its_top_document_per_aggregation() -> None:
    line = {"scores": [SCORES.tolist(), [0.1, 0.0, 0.0, 0.0, 0.0, 0.2]], "sources": SOURCES, "gold": [0, 2]}
    table = DocumentScoresMethod(rc_attributor).table({"r": {**line, "documents": 4}})
    assert table["documents · sum"]["r"]["source"] == [False, True]  # the long document wins unit 0's sum
    assert table["documents · max"]["r"]["source"] == [True, True]
    assert table["documents · mean"]["r"] == {"source": [True, True], "location": [None, None]}


@pytest.fixture(scope="module")
def saved_long_llama(tmp_path_factory):
    """The tiny Llama with a window that holds the length benchmark's paragraphs, character by character."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**{**COMMON, "max_position_embeddings": 2048}))
    return save_tiny(model.eval(), tmp_path_factory.mktemp("long-llama"))


def test_the_documents_method_runs_on_the_length_benchmark(saved_long_llama, tmp_path, monkeypatch) -> None:
    data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(LENGTH_SQUAD))
    out = tmp_path / "run"
    arguments = ("--dataset", "squad_short_gold", "--limit", "3", "--methods", "bm25,documents")
    methods = run_attribution(saved_long_llama, out, *arguments)["methods"]
    for name in AGGREGATIONS:
        row = methods[f"documents · {name}"]
        assert row["from"] == "documents" and row["n_spans"] == row["n_records"] == 3
    assert methods["bm25"]["n_spans"] == 3
    lines = [json.loads(line) for line in (out / "records" / "documents.jsonl").read_text().splitlines()]
    assert all(len(line["scores"][0]) == len(line["sources"]) > line["documents"] for line in lines)
