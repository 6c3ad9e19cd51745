"""The run folder both benchmark runners share: settings claimed, rows appended and read back by key in the
records' order whatever shard wrote them, the committed gzipped form read too, and --report-only."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rcattr.eval.common.run_lock import RunLock, RunLockedError
from rcattr.eval.common.run_store import (
    RunSettingsError,
    RunStore,
    StoredRun,
    read_rows,
    record_id,
    run_sharded,
)
from rcattr.eval.common.sharding import Processes, Shard

IDS = ["a", "b", "c", "d", "e"]


def test_rows_are_appended_and_a_resumed_run_does_only_the_rest(tmp_path: Path) -> None:
    store = RunStore(tmp_path, rows="records")
    assert store.todo("rc", IDS, record_id) == IDS
    with store.appending("rc") as write:
        for key in ("a", "c"):
            write({"id": key, "value": key.upper()})
    assert (tmp_path / "records" / "rc.jsonl").read_text().splitlines()[0] == '{"id": "a", "value": "A"}'
    assert store.todo("rc", IDS, record_id) == ["b", "d", "e"]
    assert list(store.done("rc", IDS, record_id)) == ["a", "c"]
    assert store.done("rc", ["c"], record_id) == {"c": {"id": "c", "value": "C"}}  # only the keys asked for
    assert store.todo("bm25", IDS, record_id) == IDS  # one file per stem


def test_shards_write_their_own_files_and_are_merged_in_record_order(tmp_path: Path) -> None:
    for index in (1, 0):  # the second shard finishes first
        shard = RunStore(tmp_path, shard=Shard(index, 2))
        with shard.appending("records") as write:
            for key in shard.shard.take(IDS):
                write({"method": "full", "id": key})
    assert sorted(path.name for path in tmp_path.glob("*.jsonl")) == [
        "records.shard-0-of-2.jsonl",
        "records.shard-1-of-2.jsonl",
    ]
    whole = RunStore(tmp_path)
    keys = [("full", key) for key in IDS]
    done = whole.done("records", keys, lambda row: (row["method"], row["id"]))
    assert list(done) == keys  # the records' order, not the files'
    assert whole.todo("records", [*keys, ("rc", "a")], lambda row: (row["method"], row["id"])) == [
        ("rc", "a")
    ]


def test_committed_gzipped_rows_are_read_and_resumed(tmp_path: Path) -> None:
    rows = "".join(json.dumps({"id": key}) + "\n" for key in ("a", "b"))
    (tmp_path / "sweep.jsonl.gz").write_bytes(gzip.compress(rows.encode()))
    store = RunStore(tmp_path)
    assert store.todo("sweep", IDS, record_id) == ["c", "d", "e"]
    with store.appending("sweep") as write:
        write({"id": "c"})
    assert [row["id"] for row in read_rows(tmp_path, "sweep")] == ["a", "b", "c"]


def test_a_folder_is_claimed_by_one_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run", rows="records")
    store.claim({"dataset": "quotesum", "top_k": 5, "methods": ["rc"]}, resumable=("methods",))
    assert (tmp_path / "run" / "records").is_dir()
    store.claim({"dataset": "quotesum", "top_k": 5, "methods": ["rc", "bm25"]}, resumable=("methods",))
    assert json.loads((tmp_path / "run" / "config.json").read_text())["methods"] == ["rc", "bm25"]
    with pytest.raises(RunSettingsError, match=r"other settings \(top_k: 5 there, 3 now\)"):
        store.claim({"dataset": "quotesum", "top_k": 3, "methods": ["rc"]}, resumable=("methods",))


@dataclass
class CountingRun:
    """A run of three pieces of work, two of them done by shards before."""

    out: Path = Path("runs/counting")
    computed: int = 0
    reports: list[dict[str, Any]] = field(default_factory=list)

    def compute(self) -> None:
        self.computed += 1

    def missing(self) -> int:
        return 1

    def size(self) -> int:
        return 3

    def report(self) -> dict[str, Any]:
        self.reports.append({"n": len(self.reports)})
        return self.reports[-1]


def test_report_only_computes_nothing_and_a_shard_writes_no_report(capsys) -> None:
    alone = Processes.start()
    run = CountingRun()
    assert run_sharded(run, alone, report_only=True) == {"n": 0} and run.computed == 0
    assert run_sharded(run, alone) == {"n": 1} and run.computed == 1
    shard = Processes.start(Shard(0, 2))
    assert run_sharded(run, shard) is None and run.computed == 2 and len(run.reports) == 2
    printed = capsys.readouterr().out
    assert "shard 0/2 done; 1 run(s)" in printed
    assert "resuming 2 of 3 (method, record) runs from runs/counting; running the other 1" in printed


class OneRow(StoredRun):
    def compute(self) -> None:
        with self.store.appending("rows") as write:
            write({"id": "a"})

    def missing(self) -> int:
        return 0

    def size(self) -> int:
        return 1

    def report(self) -> dict[str, Any]:
        return {"rows": len(list(self.store.rows("rows")))}


def test_a_run_through_the_api_holds_the_folder_lock_too(tmp_path: Path) -> None:
    run = OneRow(tmp_path, {"dataset": "quotesum"}, resumable=())
    with RunLock(tmp_path), pytest.raises(RunLockedError, match="is being written by"):
        run.run()
    assert not (tmp_path / "rows.jsonl").exists()
    assert run.run() == {"rows": 1}
    assert not (tmp_path / ".lock").exists()
