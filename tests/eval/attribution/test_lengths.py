"""The length benchmark's records: a short gold sentence among whole paragraphs, or the reverse, seeded."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.attribution.lengths import DOCUMENTS, length_ratio, length_records, load_records
from rcattr.text.segmentation import sentence_spans
from tests.helpers import LENGTH_SQUAD, data_folder

PARAGRAPHS = [paragraph for article in LENGTH_SQUAD["data"] for paragraph in article["paragraphs"]]


@pytest.fixture
def squad(tmp_path, monkeypatch):
    return data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(LENGTH_SQUAD))


def _paragraph(record):
    """The paragraph whose answerable question the record asks."""
    return next(p for p in PARAGRAPHS for qa in p["qas"] if record.id.endswith("-" + qa["id"]))


@pytest.mark.parametrize("setting", ["short_gold", "long_gold"])
def test_records_hold_the_gold_source_among_distractors_without_the_answer(squad, setting) -> None:
    records = length_records(setting)
    assert len(records) == len(PARAGRAPHS)  # one answerable question per paragraph, the unanswerable left out
    assert records == length_records(setting)  # seeded
    assert {_paragraph(r)["context"] for r in records} == {p["context"] for p in PARAGRAPHS}
    for record in records:
        paragraph = _paragraph(record)
        (gold,) = record.gold
        assert record.answer == gold.text and (gold.start, gold.end) == (0, len(record.answer))
        assert DOCUMENTS[0] <= len(record.chunks) <= DOCUMENTS[1]
        expected = (
            paragraph["context"] if setting == "long_gold" else paragraph["context"].split(". ")[1] + "."
        )
        assert record.chunks[gold.source] == expected and record.answer in expected
        distractors = [chunk for i, chunk in enumerate(record.chunks) if i != gold.source]
        assert len(set(distractors)) == len(distractors)
        assert all(record.answer not in chunk and chunk != paragraph["context"] for chunk in distractors)
        if setting == "short_gold":  # whole paragraphs
            assert set(distractors) <= {p["context"] for p in PARAGRAPHS} and length_ratio(record) < 1
        else:  # single sentences of the other paragraphs
            others = {s.text for p in PARAGRAPHS if p is not paragraph for s in sentence_spans(p["context"])}
            assert set(distractors) <= others and length_ratio(record) > 1
    assert len({r.gold[0].source for r in records}) > 1  # the gold source is not always in the same place


def test_length_ratio_is_the_gold_documents_characters_over_the_others_mean(squad) -> None:
    record = length_records("short_gold", limit=1)[0]
    gold = record.gold[0].source
    others = [len(c) for i, c in enumerate(record.chunks) if i != gold]
    assert length_ratio(record) == pytest.approx(len(record.chunks[gold]) * len(others) / sum(others))


def test_load_records_names_the_directions_and_refuses_other_splits(squad) -> None:
    assert load_records("squad_long_gold", limit=2) == length_records("long_gold", limit=2)
    assert length_records("short_gold", limit=2) == length_records("short_gold")[:2]
    with pytest.raises(ValueError, match="SQuAD v2 dev only"):
        load_records("squad_short_gold", "test")
    with pytest.raises(ValueError, match="setting must be one of short_gold, long_gold"):
        length_records("long")
    with pytest.raises(ValueError, match="unknown attribution benchmark"):
        load_records("squad")
