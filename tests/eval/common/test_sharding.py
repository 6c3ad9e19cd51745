"""Sharded benchmark runs: the shards partition the records, and a sharded run (separate jobs merged by
a run without ``--shard``, or two processes under ``accelerate launch``) equals a single run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rcattr.eval.attribution.cli import main
from rcattr.eval.common.run_store import read_rows
from rcattr.eval.common.sharding import Shard
from tests.helpers import without_timings

ARGUMENTS = ["--dataset", "quotesum", "--methods", "rc,sweep,attention,bm25,random"]


ARGUMENTS += ["--faithfulness", "3", "--lds-samples", "4"]


@given(st.integers(0, 40), st.integers(1, 5), st.integers(1, 4))
def test_shards_and_their_splits_partition_the_records(n_items: int, jobs: int, processes: int) -> None:
    items = list(range(n_items))
    parts = [
        Shard(job, jobs).split(rank, processes).take(items)
        for job in range(jobs)
        for rank in range(processes)
    ]
    assert sorted(item for part in parts for item in part) == items
    assert all(part == sorted(part) for part in parts)
    for job in range(jobs):  # a job's processes take exactly its shard, whatever their number
        shard = Shard(job, jobs)
        split = [item for rank in range(processes) for item in shard.split(rank, processes).take(items)]
        assert sorted(split) == shard.take(items)


def test_shard_parse_and_files(tmp_path: Path) -> None:
    assert Shard.parse("1/4") == Shard(1, 4)
    for bad in ("4/4", "1", "a/2", "-1/2", "0/0"):
        with pytest.raises(ValueError, match="I/N"):
            Shard.parse(bad)
    assert Shard().path(tmp_path, "rc").name == "rc.jsonl"
    assert Shard(1, 2).path(tmp_path, "rc").name == "rc.shard-1-of-2.jsonl"
    (tmp_path / "rc.shard-1-of-2.jsonl").write_text('{"id": "b"}\n')
    (tmp_path / "rc.jsonl").write_text('{"id": "a"}\n\n')
    (tmp_path / "rcx.jsonl").write_text('{"id": "other method"}\n')
    assert [row["id"] for row in read_rows(tmp_path, "rc")] == ["a", "b"]


def _results(out: Path) -> dict:
    return without_timings(json.loads((out / "results.json").read_text()))


def _rows(out: Path, method: str) -> list[dict]:
    return without_timings(sorted(read_rows(out / "records", method), key=lambda row: row["id"]))


def _single_run(saved_llama, out: Path) -> dict:
    assert main([*ARGUMENTS, "--model", str(saved_llama), "--out", str(out)]) == 0
    return _results(out)


def test_separate_shards_merged_equal_a_single_run(saved_llama, quotesum_data, capsys) -> None:
    single = _single_run(saved_llama, quotesum_data / "single")
    out = quotesum_data / "sharded"
    for shard in ("1/2", "0/2"):
        assert main([*ARGUMENTS, "--model", str(saved_llama), "--out", str(out), "--shard", shard]) == 0
        assert not (out / "results.json").exists()  # a shard alone writes no report
    assert "shard 0/2 done; 0 run(s)" in capsys.readouterr().out
    assert sorted(path.name for path in (out / "records").glob("rc.*")) == [
        "rc.shard-0-of-2.jsonl",
        "rc.shard-1-of-2.jsonl",
    ]
    assert main([*ARGUMENTS, "--model", str(saved_llama), "--out", str(out)]) == 0  # the merge: runs nothing
    assert not (out / "records" / "rc.jsonl").exists()
    assert _results(out) == single
    for method in ("rc", "sweep", "random", "faithfulness"):
        assert _rows(out, method) == _rows(quotesum_data / "single", method)


def test_a_shard_of_another_run_is_refused(saved_llama, quotesum_data) -> None:
    out = quotesum_data / "refused"
    arguments = [
        "--dataset",
        "quotesum",
        "--methods",
        "random",
        "--model",
        str(saved_llama),
        "--out",
        str(out),
    ]
    main([*arguments, "--shard", "0/2"])
    with pytest.raises(SystemExit, match="top_k"):
        main([*arguments, "--shard", "1/2", "--top-k", "3"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_processes_under_accelerate_launch_equal_a_single_run(saved_llama, quotesum_data) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the launched processes' budget (OMP_NUM_THREADS=1): float sums depend on it
    try:
        single = _single_run(saved_llama, quotesum_data / "single")
    finally:
        torch.set_num_threads(threads)
    out = quotesum_data / "accelerate"
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    launch += ["--main_process_port", str(_free_port())]  # --multi_gpu: spawn; on CPU they join via gloo
    command = [
        *launch,
        "-m",
        "rcattr.eval.attribution",
        *ARGUMENTS,
        "--model",
        str(saved_llama),
        "--out",
        str(out),
    ]
    environment = {**os.environ, "RCATTR_DATA": str(quotesum_data / "data"), "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert {path.name for path in (out / "records").glob("sweep.*")} == {
        "sweep.shard-0-of-2.jsonl",
        "sweep.shard-1-of-2.jsonl",
    }
    assert _results(out) == single
    assert finished.stdout.count("chunk-level attribution accuracy") == 1  # one report, from the main process
