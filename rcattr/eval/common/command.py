"""One scaffold for the benchmarks' command lines (`python -m rcattr.eval.NAME`): the parser each starts from,
settings checked into one line, and the `main` of a benchmark whose run is stored in one process. The arguments
they share are [`rcattr.eval.common.run_args`][rcattr.eval.common.run_args]'s; each benchmark's `cli.py` adds its own and builds its run."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from rcattr.eval.common.datasets import DATA_HELP
from rcattr.eval.common.run_args import run_stored
from rcattr.eval.common.run_store import ShardedRun
from rcattr.options import settings_of

__all__ = ["benchmark_parser", "checked_settings", "run_settings", "stored_main"]

Settings = TypeVar("Settings")


class BenchmarkMain(Protocol):
    """A benchmark's `main`: run as the command line `argv` says (default `sys.argv`); the exit status."""

    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def benchmark_parser(
    name: str, description: str, *, data_help: bool = True, as_written: bool = False
) -> argparse.ArgumentParser:
    """The parser of `python -m rcattr.eval.NAME`: its `description` (`as_written`: a module docstring,
    its lines kept) and, with `data_help`, where the benchmark files come from."""
    return argparse.ArgumentParser(
        prog=f"python -m rcattr.eval.{name}",
        description=description,
        epilog=DATA_HELP if data_help else None,
        formatter_class=argparse.RawDescriptionHelpFormatter if as_written else argparse.HelpFormatter,
    )


def checked_settings(make: Callable[[], Settings]) -> Settings:
    """The run's settings from `make()`; what they refuse (a ValueError) ends the command with its one line."""
    try:
        return make()
    except ValueError as error:
        raise SystemExit(str(error)) from error


def run_settings(kind: type[Settings], args: argparse.Namespace, **given: Any) -> Settings:
    """The run's settings from its command line ([`settings_of`][rcattr.options.settings_of]); what they refuse ends the
    command with its one line."""
    return checked_settings(lambda: settings_of(kind, args, **given))


def stored_main(
    parser: Callable[[], argparse.ArgumentParser], build: Callable[[argparse.Namespace], ShardedRun]
) -> BenchmarkMain:
    """The `main` of a benchmark run in one process: parse `argv` with `parser()`, then hold the folder, build
    the run from the arguments (`build` imports torch, after parsing), compute and report
    ([`run_stored`][rcattr.eval.common.run_args.run_stored]); it returns the exit status."""

    def main(argv: Sequence[str] | None = None) -> int:
        """Run the benchmark as the command line `argv` says; returns the exit status."""
        args = parser().parse_args(argv)
        return run_stored(args, lambda: build(args))

    return main
