"""Sentences appended from other records (rcattr.eval.citations.foreign): their AUROC and the shares marked."""

from __future__ import annotations

from rcattr.eval.citations.foreign import foreign_markdown, foreign_tables
from tests.helpers.citation_lines import LINES, vouched_lines


def test_appended_sentences_get_their_auroc_and_marked_shares() -> None:
    tables = foreign_tables({"quotesum": vouched_lines()}, seed=0)
    table = tables["quotesum"]  # the record with an appended sentence: two answer sentences, one appended
    assert table["appended"] == {"partial": 0.0, "weak": 0.0, "unsupported": 1.0, "sentences": 1}
    assert table["answers"] == {"partial": 0.0, "weak": 0.5, "unsupported": 0.0, "sentences": 2}
    assert table["auroc"]["vouch"]["auroc"] == 1.0 and table["auroc"]["logprob"]["auroc"] == 0.5
    assert "100.0% marked of 1" in foreign_markdown(tables)
    assert foreign_tables({"quotesum": LINES}) == {}  # rows from before vouching


def test_a_partly_held_appended_sentence_counts_as_marked() -> None:
    """Issue 59: a sentence that mixes held and unheld claims keeps its citation, marked "partial"."""
    lines = [
        {**line, "foreign": [{**sentence, "status": "partial"} for sentence in line["foreign"]]}
        for line in vouched_lines()
    ]
    tables = foreign_tables({"quotesum": lines}, seed=0)
    assert tables["quotesum"]["appended"]["partial"] == 1.0
    assert "100.0% partial, 0.0% weak, 0.0% unsupported, 100.0% marked of 1" in foreign_markdown(tables)
