"""Long-context runs and their table (rcattr.eval.attribution.context_length): records hidden among distractors."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.attribution.context_length import main as context_length_main
from tests.helpers import run_attribution


def test_a_long_context_run_hides_each_record_among_distractors(saved_llama, quotesum_data) -> None:
    paragraphs = [{"context": f"Rivers {i}.", "qas": []} for i in range(30)]
    squad = quotesum_data / "data" / "squad_v2" / "dev-v2.0.json"
    squad.parent.mkdir()
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}))
    out = quotesum_data / "long"
    results = run_attribution(
        saved_llama, out, "--methods", "bm25,random", "--context-tokens", "250", "--gold-position", "end"
    )
    short = run_attribution(saved_llama, quotesum_data / "short", "--methods", "bm25,random")
    assert results["n_records"] == short["n_records"] and results["prompt_tokens"]["max"] <= 250
    assert results["prompt_tokens"]["min"] > short["prompt_tokens"]["min"] + 40
    assert results["documents"]["min"] > short["documents"]["max"]
    assert json.loads((out / "config.json").read_text())["long_context"] == {
        "tokens": 250,
        "position": "end",
        "seed": 0,
    }
    assert (
        "Long context: each record's sources at the end of distractor passages"
        in (out / "results.md").read_text()
    )
    table = quotesum_data / "table"
    assert (
        context_length_main(
            ["--short", str(quotesum_data / "short"), "--runs", str(out), "--out", str(table)]
        )
        == 0
    )
    rows = (table / "context_length.md").read_text().splitlines()
    bm25_long = next(row for row in rows if row.startswith("| 250 · end |") and "| bm25 |" in row)
    assert bm25_long.split("|")[5].strip() == str(
        short["methods"]["bm25"]["n_spans"]
    )  # the same records' spans
    assert f"{results['methods']['bm25']['accuracy']:.1%}" in bm25_long
    assert (table / "context_length.png").stat().st_size > 0
    with pytest.raises(SystemExit, match="long_context"):  # a resumed run keeps its prompts
        run_attribution(saved_llama, out, "--methods", "bm25", "--context-tokens", "250")
    with pytest.raises(ValueError, match="exceeds the model's window of 256 tokens"):
        run_attribution(
            saved_llama, quotesum_data / "too_long", "--methods", "bm25", "--context-tokens", "300"
        )
