"""Files of rows that survive a killed writer: a partial last line is left out by readers and set aside (kept)
by the next writer, which says so; any other damaged line is an error naming file and line."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rcattr.eval.common.row_files import RowFileError, appending_rows, parse_rows, set_aside_partial_line
from rcattr.eval.common.run_store import RunStore, record_id

ROWS = [{"id": "a", "text": 'é\n"x"'}, {"id": "b", "values": [1.5, None]}, {"id": "c"}]


def _write(path: Path, rows: list[dict]) -> bytes:
    with appending_rows(path) as write:
        for row in rows:
            write(row)
    return path.read_bytes()


@given(cut=st.integers(0, 10**6))
def test_a_file_cut_at_any_byte_reads_its_whole_rows_and_the_next_writer_repairs_it(
    cut, tmp_path_factory
) -> None:
    folder = tmp_path_factory.mktemp("rows")
    whole = _write(folder / "whole.jsonl", ROWS)
    kept = whole[: cut % (len(whole) + 1)]
    path = folder / "cut.jsonl"
    path.write_bytes(kept)
    complete, _, partial = kept.rpartition(b"\n")  # the rows written whole before the cut, and the rest
    rows = ROWS[: kept.count(b"\n")]
    assert list(parse_rows(path)) == rows
    _write(path, [{"id": "next"}])
    assert list(parse_rows(path)) == [*rows, {"id": "next"}]
    aside = folder / "cut.jsonl.partial"
    assert (aside.read_bytes() if aside.exists() else b"") == (partial + b"\n" if partial else b"")


def test_a_partial_last_line_is_set_aside_with_a_warning_and_its_record_runs_again(tmp_path, caplog) -> None:
    store = RunStore(tmp_path)
    with store.appending("rc") as write:
        write({"id": "a"})
    path = tmp_path / "rc.jsonl"
    with open(path, "a") as file:
        file.write('{"id": "b", "source": [tr')  # a writer killed mid-line
    assert store.todo("rc", ["a", "b"], record_id) == ["b"]
    with caplog.at_level(logging.WARNING), store.appending("rc") as write:
        write({"id": "b", "source": [True]})
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} ended with a partial row (a run killed while writing it): moved it to rc.jsonl.partial; "
        "its record runs again"
    ]
    assert store.todo("rc", ["a", "b"], record_id) == []
    assert path.read_text().splitlines() == ['{"id": "a"}', '{"id": "b", "source": [true]}']
    assert (tmp_path / "rc.jsonl.partial").read_text() == '{"id": "b", "source": [tr\n'  # kept, not deleted
    assert set_aside_partial_line(path) == b""  # a whole file is left as it is


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a"}\n{"id": "b", oops}\n{"id": "c"}\n', r"bad\.jsonl, line 2: not a JSON row"),
        ('{"id": "a"}\n\n[1, 2]\n', r"bad\.jsonl, line 3: a row is a JSON object, got list"),
        ('{"id": "a"}\n\xff\n', r"bad\.jsonl, line 2: not a JSON row"),
    ],
)
def test_a_damaged_line_before_the_last_is_an_error_naming_file_and_line(tmp_path, text, message) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(RowFileError, match=message):
        list(parse_rows(path))


def test_committed_gzipped_rows_follow_the_same_rules(tmp_path) -> None:
    path = tmp_path / "rc.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "a"}\n{"id": "b"}\n{"id": "c'))
    assert [row["id"] for row in parse_rows(path)] == ["a", "b"]
    path.write_bytes(gzip.compress(b'{"id": "a"}\n{"id\n'))
    with pytest.raises(RowFileError, match="line 2"):
        list(parse_rows(path))


def test_each_row_is_one_line_whatever_its_text(tmp_path) -> None:
    row = {"id": "long", "text": "line\nbreak " * 20000}  # far more than a write buffer
    lines = _write(tmp_path / "rows.jsonl", [row]).split(b"\n")
    assert lines[1:] == [b""] and json.loads(lines[0]) == row
