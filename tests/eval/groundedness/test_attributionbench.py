"""AttributionBench claims (rcattr.eval.groundedness.attributionbench): the file, the content words, a row."""

from __future__ import annotations

import math

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_statistics
from rcattr.eval.groundedness.attributionbench import (
    ClaimRecord,
    claim_row,
    content_words,
    heads_row,
    load_claims,
)
from rcattr.text.prompting import ContextInput
from tests.helpers.data import attributionbench_lines


@pytest.fixture
def claims_file(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text(attributionbench_lines())
    return path


def test_load_claims_reads_labels_and_draws_a_seeded_sample_in_file_order(claims_file) -> None:
    claims = load_claims(claims_file)
    assert len(claims) == 25 and claims[0].attributable and not claims[1].attributable
    assert claims[0].references == ("The cat sat in the mat.",) and claims[0].source == "ExpertQA"
    drawn = load_claims(claims_file, limit=6, seed=3)
    assert drawn == load_claims(claims_file, limit=6, seed=3) != load_claims(claims_file, limit=6, seed=4)
    assert [claims.index(c) for c in drawn] == sorted(claims.index(c) for c in drawn)


def test_a_missing_file_names_its_path_and_the_option(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="--claims-file"):
        load_claims(tmp_path / "nowhere.jsonl")


def test_content_words_leave_out_stop_words_and_markers_and_say_which_the_references_hold() -> None:
    text = "The tower is 330 metres tall [4]."
    words = content_words(text, ("A tower of 330 m.",))
    assert [(text[a:b], held) for a, b, held in words] == [
        ("tower", True),
        ("330", True),
        ("metres", False),
        ("tall", False),
    ]


def test_a_row_holds_the_librarys_support_and_the_token_support_it_is_made_of(llama, tokenizer) -> None:
    attributor = RCAttributor(llama, tokenizer)
    record = ClaimRecord(
        "c", "What did the cat do?", "The cat sat [1].", ("The cat sat on the mat.",), True, "X"
    )
    row, _ = claim_row(attributor, record)
    result = attributor.attribute(ContextInput(list(record.references), record.question), target=record.claim)
    citations = result.citations()
    assert row["support"] == min(c.support for c in citations)
    assert row["status"] == citations[0].status and row["label"] == 1
    assert row["question"] == record.question  # the report folds by question
    # exactness: the row's log-odds are the result's token support, from a second pass over every head
    support = torch.sigmoid(torch.tensor(row["log_odds"], dtype=torch.float64))
    assert torch.allclose(support, result.token_support.double(), atol=1e-3)
    marker = record.claim.index("[")
    assert all(result.answer_tokens[t].start < marker for _, tokens in row["words"] for t in tokens)
    assert len(row["words"]) == 2  # cat, sat
    assert math.isfinite(row["judge"]) and set(row["seconds"]) >= {"forward", "attribute", "judge"}


def test_a_claim_beyond_the_window_is_skipped_with_the_reason(llama, tokenizer) -> None:
    record = ClaimRecord("c", "Q?", "The cat sat.", ("The cat sat. " * 40,), True, "X")
    attributor = RCAttributor(llama, tokenizer)
    row, heads = claim_row(attributor, record)
    assert row["skipped"].startswith("the prompt") and "window" in row["skipped"]
    assert row["label"] == 1 and "support" not in row
    assert heads == heads_row(attributor, record) == {"id": "c", "skipped": row["skipped"]}


def test_the_heads_row_is_each_heads_mean_over_the_claims_tokens_without_its_markers(
    llama, tokenizer
) -> None:
    attributor = RCAttributor(llama, tokenizer)
    record = ClaimRecord(
        "c", "What did the cat do?", "The cat sat [1].", ("The cat sat on the mat.",), False, "X"
    )
    _, heads = claim_row(attributor, record)
    assert heads == heads_row(attributor, record)  # the backfill gives what a whole row gives
    example = attributor.prepare(
        ContextInput(list(record.references), record.question), record.claim, "sentence"
    )
    statistics = token_statistics(llama, example)
    layers, per_layer = statistics.lookback.shape[:2]
    assert heads["head_shape"] == [layers, per_layer]
    start, end = record.claim.index("["), record.claim.index("]") + 1
    said = [
        i
        for i, t in enumerate(example.answer_tokens)
        if (t.end <= start or t.start >= end) and t.text.strip()
    ]
    assert len(said) < len(example.answer_tokens)
    for name, table in (("head_lookback", statistics.lookback), ("head_peak", statistics.peak)):
        brute = [
            float(table[layer, head, said].double().mean())
            for layer in range(layers)
            for head in range(per_layer)
        ]
        assert heads[name] == pytest.approx(brute, abs=1e-4)
