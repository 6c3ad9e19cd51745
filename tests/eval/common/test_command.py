"""The benchmarks' command-line scaffold (rcattr.eval.common.command): the parser, settings refused in one line,
and the main of a stored run."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from rcattr.eval.common.command import benchmark_parser, checked_settings, run_settings, stored_main
from rcattr.eval.common.datasets import DATA_HELP


@dataclass(frozen=True)
class Settings:
    task: str
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.task not in ("a", "b"):
            raise ValueError(f"unknown task {self.task!r}")


def test_the_parser_names_the_module_and_where_the_data_comes_from() -> None:
    parser = benchmark_parser("kv", "line one\n  line two", as_written=True)
    assert parser.prog == "python -m rcattr.eval.kv" and parser.epilog == DATA_HELP
    assert "line one\n  line two" in parser.format_help()
    assert benchmark_parser("groundedness", "x", data_help=False).epilog is None


def test_settings_come_from_the_arguments_of_the_same_name_and_their_refusal_is_one_line() -> None:
    args = argparse.Namespace(task="a", limit=3, out="runs/x")  # out is no setting
    assert run_settings(Settings, args) == Settings("a", 3)
    assert run_settings(Settings, args, limit=None) == Settings("a")
    with pytest.raises(SystemExit, match="unknown task 'c'"):
        run_settings(Settings, argparse.Namespace(task="c"))
    with pytest.raises(SystemExit, match="bad"):
        checked_settings(lambda: (_ for _ in ()).throw(ValueError("bad")))


def test_a_stored_main_parses_then_builds_the_run_from_the_arguments(monkeypatch, tmp_path) -> None:
    built: list[argparse.Namespace] = []

    def parser() -> argparse.ArgumentParser:
        made = benchmark_parser("citations", "test")
        made.add_argument("--out")
        made.add_argument("--report-only", action="store_true")
        return made

    def run_stored(args, build):
        build()
        return 7

    monkeypatch.setattr("rcattr.eval.common.command.run_stored", run_stored)
    main = stored_main(parser, lambda args: built.append(args))  # type: ignore[arg-type,func-returns-value]
    assert main(["--out", str(tmp_path)]) == 7 and built[0].out == str(tmp_path)
