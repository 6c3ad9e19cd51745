"""Loaders for the QuoteSum and Veri-Gran attribution benchmarks (shipped files, no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rcattr.eval.common.datasets import (
    BenchmarkRecord,
    GoldSpan,
    SkippedSpanWarning,
    as_hf_dataset,
    data_dir,
    load_attribution,
    load_attribution_dataset,
    load_quotesum,
    load_verigran,
    record_from_row,
    strip_markers,
)


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def quotesum() -> list[BenchmarkRecord]:
    return load_quotesum()


@pytest.fixture(scope="module")
def verigran() -> list[BenchmarkRecord]:
    return load_verigran()


@pytest.mark.filterwarnings("error::rcattr.eval.common.datasets.SkippedSpanWarning")
def test_totals_match_the_shipped_files() -> None:
    qs, vg = load_quotesum(), load_verigran()
    assert (len(qs), sum(len(r.gold) for r in qs)) == (265, 1130)
    assert (len(vg), sum(len(r.gold) for r in vg)) == (170, 272)
    assert len({r.id for r in qs}) == 265 and len({r.id for r in vg}) == 170
    assert all(r.gold for r in qs)
    # two Veri-Gran statements carry no marker (unattributed statements): kept, with empty gold
    assert [r.id for r in vg if not r.gold] == ["verigran-dev-0002", "verigran-dev-0017"]


@pytest.mark.parametrize("name", ["quotesum", "verigran"])
def test_gold_spans_are_exact_and_clean(name: str, request: pytest.FixtureRequest) -> None:
    for r in request.getfixturevalue(name):
        assert r.answer == _norm(r.answer) and "[" not in r.answer and "]" not in r.answer
        for g in r.gold:
            assert r.answer[g.start : g.end] == g.text == g.text.strip() and g.text
            assert 0 <= g.source < len(r.chunks)


def test_quotesum_chunks_titles_and_verbatim_fraction(quotesum: list[BenchmarkRecord]) -> None:
    for r in quotesum:
        assert r.titles is not None and len(r.titles) == len(r.chunks) and all(r.chunks)
    verbatim = [g.text in r.chunks[g.source] for r in quotesum for g in r.gold]
    assert sum(verbatim) == 1045  # 1045 / 1130 = 92.5%; the rest are title-prefixed or reworded
    first = quotesum[0]
    assert first.id == "AMBIG_val_1170_0" and first.titles == ["Nitrogen cycle", "Denitrification"]
    assert first.answer.startswith("Denitrification is the process")
    assert first.gold == [GoldSpan(0, 15, "Denitrification", 1)]


def test_quotesum_marker_before_punctuation_is_tidied(quotesum: list[BenchmarkRecord]) -> None:
    # the file writes "[ 2 Denitrification ] ." (space-delimited markup); outside markers punctuation is tight
    third = quotesum[2]
    assert third.answer.endswith("is called Denitrification.")
    assert not any(f" {p}" in r.answer for r in quotesum for p in ".,;)")


def test_verigran_answer_contains_its_chunk_statement(verigran: list[BenchmarkRecord]) -> None:
    # ``chunk`` is the marked statement (one sentence), not the whole stripped summary: it equals the
    # answer for 3 records only, but it is contained in every answer and holds every gold span
    path = data_dir() / "veri_gran" / "dev.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    exact = contained = 0
    for r, row in zip(verigran, rows, strict=True):
        chunk = _norm(row["chunk"])
        exact += r.answer == chunk
        at = r.answer.find(chunk)
        if at >= 0 and all(at <= g.start and g.end <= at + len(chunk) for g in r.gold):
            contained += 1
        assert r.chunks == row["passages"]
    assert (exact, contained) == (3, 170)


def test_verigran_glued_and_word_splitting_markers(verigran: list[BenchmarkRecord]) -> None:
    filmed = verigran[0]
    assert "was filmed at **Oheka Castle** on **Long Island**, off" in filmed.answer
    assert filmed.gold[0].text.startswith("at **Oheka Castle**") and filmed.gold[0].source == 23
    # "gut ]ters are" and "U.S[ 62 . tax ] code" rejoin the words the markers cut
    assert any("gutters are" in r.answer for r in verigran)
    assert any("the U.S. tax code is" in r.answer for r in verigran)


@pytest.mark.parametrize(
    ("summary", "answer", "spans"),
    [
        ("was filmed[ 24  at the castle ] today", "was filmed at the castle today", [("at the castle", 23)]),
        ("is[ 2 a test ]", "is a test", [("a test", 1)]),
        ("  A  [ 1  b   c  ]  d  ", "A b c d", [("b c", 0)]),
        ("[ 1 foo ]. Then [ 2 bar ] , [ 3 baz ]", "foo. Then bar, baz", [("foo", 0), ("bar", 1), ("baz", 2)]),
        ("[ 1 Start ] of it", "Start of it", [("Start", 0)]),
        ("gut ]ters", None, None),
        ("the U.S[ 62 . tax ] code", "the U.S. tax code", [(". tax", 61)]),
        ("Assassin ]'s[ 7  Creed", None, None),
        ("titled[ 7  Assassin ]'s[ 7  Creed ]", "titled Assassin's Creed", [("Assassin", 6), ("Creed", 6)]),
        ("no markers  here\n", "no markers here", []),
    ],
)
def test_strip_markers(summary: str, answer: str | None, spans: list[tuple[str, int]] | None) -> None:
    if answer is None:
        with pytest.raises(ValueError, match="malformed marker"):
            strip_markers(summary)
        return
    got, gold = strip_markers(summary)
    assert got == answer
    assert [(g.text, g.source) for g in gold] == spans
    assert all(got[g.start : g.end] == g.text for g in gold)


def test_strip_markers_rejects_multi_index_markers() -> None:
    with pytest.raises(ValueError, match="malformed marker"):
        strip_markers("see [ 1, 2 both ] here")


def test_strip_markers_skips_out_of_range_sources() -> None:
    with pytest.warns(SkippedSpanWarning, match="cites source 3 of 2"):
        answer, gold = strip_markers("[ 1 a ] [ 3 b ] [ 2 c ]", n_sources=2)
    assert answer == "a b c"
    assert [(g.text, g.source) for g in gold] == [("a", 0), ("c", 1)]
    with pytest.warns(SkippedSpanWarning, match="cites source 0"):
        assert strip_markers("[ 0 x ]")[1] == []


def _write(root: Path, folder: str, rows: list[dict]) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_rcattr_data_override_and_quotesum_slot_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slots = {f"{k}{i}": "" for i in range(1, 9) for k in ("title", "source")}
    slots.update(title1="T1", source1="one", title3="T3", source3="three")  # slot 2 empty: a gap
    row = {"qid": "q", "unique_id": "q_0", "question": "Q?", "summary": "[ 3 three ] and [ 1 one ]", **slots}
    _write(tmp_path, "quotesum", [row, {**row, "unique_id": "q_1", "summary": "[ 2 none ] x"}])
    monkeypatch.setenv("RCATTR_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    with pytest.warns(SkippedSpanWarning, match="empty source slot 2 in q_1"):
        first, second = load_attribution("quotesum")
    assert first.chunks == ["one", "three"] and first.titles == ["T1", "T3"]
    assert [(g.text, g.source) for g in first.gold] == [("three", 1), ("one", 0)]
    assert second.answer == "none x" and second.gold == []
    assert len(load_quotesum(limit=1)) == 1


def test_missing_data_dir_and_split_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("RCATTR_DATA", str(missing))
    with pytest.raises(FileNotFoundError, match=r"nowhere.*RCATTR_DATA"):
        data_dir()
    monkeypatch.delenv("RCATTR_DATA")
    with pytest.raises(ValueError, match=r"no split 'test' for quotesum.*available: \['dev.jsonl'\]"):
        load_attribution("quotesum", split="test")
    with pytest.raises(ValueError, match="unknown attribution benchmark 'squad'"):
        load_attribution("squad")


def test_hf_dataset_round_trip(quotesum: list[BenchmarkRecord], verigran: list[BenchmarkRecord]) -> None:
    for records in (quotesum[:5], verigran[:5]):
        ds = as_hf_dataset(records)
        assert ds.column_names == ["id", "question", "chunks", "answer", "gold", "titles"]
        assert set(ds[0]["gold"][0]) == {"start", "end", "text", "source"}
        assert [record_from_row(row) for row in ds] == records
    ds = load_attribution_dataset("verigran", limit=3)
    assert len(ds) == 3 and ds[0]["titles"] is None and ds[0]["id"] == "verigran-dev-0000"


def test_an_installed_package_without_data_names_rcattr_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rcattr.eval.common.datasets as datasets

    monkeypatch.delenv("RCATTR_DATA", raising=False)
    fake = tmp_path / "site-packages" / "rcattr" / "eval" / "datasets.py"
    monkeypatch.setattr(datasets, "__file__", str(fake))
    with pytest.raises(
        FileNotFoundError, match=r"not part of the installed package: set RCATTR_DATA .*squad_v2"
    ):
        datasets.data_dir()


@pytest.mark.parametrize("runner", ["rcattr.eval.attribution", "rcattr.eval.kv"])
def test_runner_help_says_where_the_data_is(runner: str, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    with pytest.raises(SystemExit):
        importlib.import_module(runner).main(["--help"])
    assert "$RCATTR_DATA" in " ".join(capsys.readouterr().out.split())
