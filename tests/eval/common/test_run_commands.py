"""The benchmark runners' command lines on their run folders: a run killed mid-way resumes to the rows of an
uninterrupted one, a second run on a folder in use refuses at once (before its own start-up, even while the
first is still starting), and what stops a run (a file as --out, a count below 1, other settings, a damaged
file of rows) is said in one line before the model loads."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rcattr.eval.attribution.cli import main as attribution_main
from rcattr.eval.common.run_lock import lock_path
from rcattr.eval.common.run_store import read_rows
from rcattr.eval.common.sharding import Shard
from rcattr.eval.groundedness.cli import main as groundedness_main
from rcattr.eval.kv.cli import main as kv_main
from rcattr.eval.kv_long.cli import main as kv_long_main
from tests.helpers import QUOTESUM_RECORDS, data_folder, without_timings

METHODS = ("random", "bm25", "rc")
RUNNERS = {
    "attribution": (attribution_main, ["--dataset", "quotesum"]),
    "kv": (kv_main, ["--dataset", "squad", "--methods", "rc"]),
    "kv_long": (kv_long_main, ["--task", "needle", "--methods", "rc"]),
    "groundedness": (groundedness_main, []),
}
COMMANDS = {  # python -m rcattr.eval.NAME: the module its __main__ goes on to (torch and the rest), arguments
    "attribution": ("rcattr.eval.attribution.cli", ["--dataset", "quotesum"]),
    "kv": ("rcattr.eval.kv.cli", ["--dataset", "squad", "--methods", "rc"]),
    "kv_long": ("rcattr.eval.kv_long.cli", ["--task", "needle", "--methods", "rc"]),
    "citations": ("rcattr.eval.citations.benchmark", []),
    "groundedness": ("rcattr.eval.groundedness.benchmark", []),
}
# python -m PACKAGE ARGUMENTS, whose start-up (the import of MODULE: torch, transformers, ...) never ends
SLOW_START = """
import pathlib, runpy, sys, time

class SlowStart:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            pathlib.Path({started!r}).touch()
            time.sleep(600)

sys.meta_path.insert(0, SlowStart())
sys.argv = [{package!r}, *{arguments!r}]
runpy.run_module({package!r}, run_name="__main__", alter_sys=True)
"""


@pytest.fixture
def many_records(tmp_path, monkeypatch) -> Path:
    """A QuoteSum-format file of 60 records (the test file's three, repeated under new ids)."""
    records = [{**QUOTESUM_RECORDS[i % 3], "qid": f"r{i}", "unique_id": f"r{i}_0"} for i in range(60)]
    return data_folder(
        tmp_path, monkeypatch, "quotesum/dev.jsonl", "".join(json.dumps(r) + "\n" for r in records)
    )


def _command(model: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rcattr.eval.attribution",
        "--dataset",
        "quotesum",
        "--methods",
        ",".join(METHODS),
    ] + [
        "--model",
        str(model),
        "--out",
        str(out),
    ]


def _rows(out: Path, method: str) -> list[dict]:
    return without_timings(list(read_rows(out / "records", method)))


def _wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_run_killed_after_its_first_rows_resumes_to_the_rows_of_an_uninterrupted_run(
    saved_llama, many_records
) -> None:
    # Both runs in subprocesses with one thread: float sums depend on torch's thread count.
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    reference = many_records / "reference"
    subprocess.run(
        _command(saved_llama, reference), env=environment, capture_output=True, check=True, timeout=300
    )
    out = many_records / "killed"
    killed = subprocess.Popen(
        _command(saved_llama, out), env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    first = out / "records" / "random.jsonl"
    _wait_for(lambda: first.exists() and first.stat().st_size > 0)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    done_before = sum(len(_rows(out, method)) for method in METHODS)
    assert 0 < done_before < 3 * 60  # killed mid-way
    resumed = subprocess.run(
        _command(saved_llama, out), env=environment, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {done_before} of 180 (method, record) runs from {out}" in resumed.stdout
    assert f"report written to {out / 'results.md'}" in resumed.stdout
    for method in METHODS:
        rows = _rows(out, method)
        assert len({row["id"] for row in rows}) == len(rows) == 60  # every record exactly once
        assert rows == _rows(reference, method)


@pytest.mark.slow
def test_a_second_run_on_a_folder_in_use_refuses_at_once_and_rows_are_never_doubled(
    saved_llama, many_records
) -> None:
    out = many_records / "shared"
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(
        _command(saved_llama, out),
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    _wait_for(lambda: (out / ".lock").exists() and (out / ".lock").stat().st_size > 0)
    second = subprocess.run(
        _command(saved_llama, out), env=environment, capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 1
    assert f"{out} is being written by pid {first.pid} on " in second.stderr
    assert "Traceback" not in second.stderr
    first.wait(timeout=300)
    assert first.returncode == 0
    for method in METHODS:
        rows = _rows(out, method)
        assert len({row["id"] for row in rows}) == len(rows) == 60
    assert not (out / ".lock").exists()


def test_methods_added_on_resume_are_the_methods_of_results_json(saved_llama, quotesum_data, capsys) -> None:
    out = quotesum_data / "run"
    arguments = ["--dataset", "quotesum", "--model", str(saved_llama), "--out", str(out)]
    assert attribution_main([*arguments, "--methods", "random", "--limit", "2"]) == 0
    assert attribution_main([*arguments, "--methods", "bm25"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["methods"]) == {"random", "bm25"}
    assert results["config"]["methods"] == ["bm25", "random"]  # this command's first, then those on disk
    assert attribution_main([*arguments, "--methods", "random,bm25"]) == 0
    assert attribution_main([*arguments, "--methods", "random,bm25"]) == 0
    printed = capsys.readouterr().out
    assert f"resuming 5 of 6 (method, record) runs from {out}; running the other 1" in printed
    assert f"{out}: all 6 (method, record) runs are on disk already; nothing to run" in printed
    assert printed.count(f"report written to {out / 'results.md'} (and results.json)") == 4


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("limit", ["0", "-3", "x"])
def test_limit_is_a_count_of_at_least_one_in_every_runner(runner, limit, tmp_path, capsys) -> None:
    main, arguments = RUNNERS[runner]
    with pytest.raises(SystemExit) as stop:
        main([*arguments, "--limit", limit, "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert f"--limit: must be a whole number >= 1, got '{limit}'" in capsys.readouterr().err


@pytest.fixture
def no_model(monkeypatch):
    """Fails a test that loads a model (what it checks must come first)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("rcattr.runtime.models.load_model", refuse)


@pytest.mark.parametrize("runner", RUNNERS)
def test_out_on_a_file_or_a_locked_folder_is_refused_before_the_model_loads(
    runner, tmp_path, no_model
) -> None:
    from rcattr.eval.common.run_lock import RunLock

    main, arguments = RUNNERS[runner]
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match=r"--out .*file is a file; give a folder"):
        main([*arguments, "--out", str(tmp_path / "file")])
    with (
        RunLock(tmp_path / "busy"),
        pytest.raises(SystemExit, match=f"busy is being written by pid {os.getpid()}"),
    ):
        main([*arguments, "--out", str(tmp_path / "busy")])


def test_other_settings_and_a_damaged_row_file_end_the_command_in_one_line(
    saved_llama, quotesum_data
) -> None:
    out = quotesum_data / "run"
    arguments = _command(saved_llama, out)[3:]
    assert attribution_main(arguments) == 0
    with pytest.raises(
        SystemExit, match=r"other settings \(top_k: 'outliers' there, 3 now\); use a new --out"
    ):
        attribution_main([*arguments, "--top-k", "3"])
    rows = out / "records" / "rc.jsonl"
    rows.write_text('{"id": "q0_0"\n' + rows.read_text())
    with pytest.raises(SystemExit, match=rf"{rows}, line 1: not a JSON row"):
        attribution_main(arguments)


class ModelLoads(Exception):
    """The run got past its run folder to its model."""


@pytest.mark.parametrize("runner", COMMANDS)
def test_a_second_run_is_refused_before_its_start_up_while_the_first_is_still_starting(
    runner, tmp_path, monkeypatch
) -> None:
    module, arguments = COMMANDS[runner]
    package = f"rcattr.eval.{runner}"
    out = tmp_path / "run"
    arguments = [*arguments, "--out", str(out)]
    started = tmp_path / "first-started"
    script = SLOW_START.format(module=module, started=str(started), package=package, arguments=arguments)
    loaded = importlib.import_module(module)
    first = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.DEVNULL)
    imported = []

    class StartUp:  # fails the second run if it goes on to its command line's module
        def find_spec(self, name, path=None, target=None):
            if name == module:
                imported.append(name)
                raise AssertionError(f"the second run imported {name} (torch, its model, its data)")

    monkeypatch.setattr(sys, "argv", [package, *arguments])
    try:
        _wait_for(started.exists, 60)  # the first is still importing torch and the rest
        monkeypatch.delitem(sys.modules, module)
        monkeypatch.setattr(sys, "meta_path", [StartUp(), *sys.meta_path])
        with pytest.raises(SystemExit, match=f"{out} is being written by pid {first.pid} on "):
            runpy.run_module(package, run_name="__main__")
        assert imported == []
    finally:
        first.kill()
        first.wait()
    monkeypatch.setitem(sys.modules, module, loaded)
    monkeypatch.setattr(sys, "meta_path", sys.meta_path[1:])
    holders = []

    def load_model(*args, **kwargs):
        holders.append(json.loads(lock_path(out, Shard()).read_text())["pid"])
        raise ModelLoads

    # the first gone, the second goes on to its model with the lock it took at its start
    monkeypatch.setattr("rcattr.runtime.models.load_model", load_model)
    with pytest.raises(ModelLoads):
        runpy.run_module(package, run_name="__main__")
    assert holders == [os.getpid()]
    assert not lock_path(out, Shard()).exists()
