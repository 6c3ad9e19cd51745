"""Accuracy against the length ratio, from a run folder of the length benchmark."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.attribution.length_ratio import bucket, bucket_name, main
from rcattr.eval.attribution.lengths import length_records
from tests.helpers import LENGTH_SQUAD, data_folder


@pytest.mark.parametrize(
    ("ratio", "index", "name"),
    [(0.1, 0, "< 1/8"), (0.125, 1, "1/8–1/4"), (0.3, 2, "1/4–1/2"), (5.0, 6, "4–8"), (8.0, 7, "≥ 8")],
)
def test_buckets_are_powers_of_two(ratio, index, name) -> None:
    assert bucket(ratio) == index and bucket_name(index) == name


def test_table_from_the_runs_rows(tmp_path, monkeypatch) -> None:
    data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(LENGTH_SQUAD))
    run = tmp_path / "run"
    (run / "records").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"dataset": "squad_long_gold", "split": "dev", "limit": 4}))
    records = length_records("long_gold", limit=4)

    def write(method: str, rows: list[dict]) -> None:
        (run / "records" / f"{method}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    longest = [max(range(len(r.chunks)), key=lambda i: len(r.chunks[i])) for r in records]
    write(  # BM25 picks the longest document (the gold paragraph) every time
        "bm25",
        [
            {
                "id": r.id,
                "source": [True],
                "location": [None],
                "chunk_scores": [float(i == top) for i in range(len(r.chunks))],
                "seconds": 0.0,
            }
            for r, top in zip(records, longest, strict=True)
        ],
    )
    write(  # the gold's sentences sum to the most, but a distractor sentence is the best one
        "documents",
        [
            {
                "id": r.id,
                "scores": [[0.25, 0.25, 0.3]],
                "sources": [r.gold[0].source, r.gold[0].source, (r.gold[0].source + 1) % 4],
                "gold": [r.gold[0].source],
                "documents": len(r.chunks),
                "seconds": 0.0,
            }
            for r in records
        ],
    )
    assert main(["--runs", str(run), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "length_ratio.md").read_text()
    assert "### squad_long_gold: 4 records" in text
    assert (
        "| bm25 | 100.0% [100.0%, 100.0%] |" in text and text.count("| 100.0% |") == 1
    )  # the longest, always
    assert "| documents · sum | 100.0% [100.0%, 100.0%] |" in text
    assert "| documents · max − documents · sum | -100.0% [-100.0%, -100.0%] |" in text
