"""What the benchmark runners' command lines share: their common arguments and the model's placement (the
run folder itself is [`rcattr.eval.common.run_store.RunStore`][rcattr.eval.common.run_store.RunStore])."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcattr.eval.common.registry import check_methods
from rcattr.eval.common.row_files import RowFileError
from rcattr.eval.common.run_lock import RunLockedError, run_folder_lock
from rcattr.eval.common.run_store import RunSettingsError, ShardedRun, announce_resume, run_sharded
from rcattr.eval.common.sharding import Processes, Shard
from rcattr.options import positive_int

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from rcattr.protocols import TokenizerLike


def add_folder_arguments(parser: argparse.ArgumentParser, default_out: str | None = None) -> None:
    """What every benchmark's command line takes: `--out` (required without `default_out`), `--model` and
    `--report-only`."""
    parser.add_argument(
        "--out",
        required=default_out is None,
        default=default_out,
        help="output folder: a run already there is resumed; one run writes it at a time (OUT/.lock names it)"
        + ("" if default_out is None else f"; default {default_out}"),
    )
    parser.add_argument("--model", help="model name or path (default: the offline SmolLM2-135M-Instruct)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: write the report from the rows on disk (every shard's, the records every method "
        "has finished), e.g. while the run is still going; the model is not loaded",
    )


def add_run_arguments(
    parser: argparse.ArgumentParser, methods: Sequence[str], optional: Sequence[str] = ()
) -> None:
    """[`add_folder_arguments`][rcattr.eval.common.run_args.add_folder_arguments], `--limit`, `--methods` (comma-separated, from `methods`; by default all
    but the `optional` ones), `--shard` and `--device-map`."""
    add_folder_arguments(parser)
    parser.add_argument("--limit", type=positive_int, help="first N records only (N >= 1; default: all)")
    default = [name for name in methods if name not in optional]
    parser.add_argument(
        "--methods",
        default=",".join(default),
        help=f"comma-separated, from {', '.join(methods)} (default: "
        + (f"all but {', '.join(optional)}" if optional else "all")
        + ")",
    )
    parser.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="run only shard I of N (0-based: the records i with i %% N == I), e.g. one per machine; the same "
        "command without --shard then merges the shards' rows and writes the report. Under accelerate launch "
        "or torchrun the processes split the records (or this shard) among themselves and merge on their own",
    )
    parser.add_argument(
        "--device-map",
        help='spread one model over several devices (transformers\' device_map, e.g. "auto"); one process only. '
        "Without it the model goes to this process's device (its GPU under accelerate launch, else the CPU)",
    )


def _shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def load_run_model(
    name: str | None, device_map: str | None, processes: Processes
) -> tuple[PreTrainedModel, TokenizerLike]:
    """The model of a run, on this process's device, or spread by `device_map` when one process runs."""
    from rcattr.runtime.models import load_model

    if device_map is None:
        return load_model(name, device=processes.device)
    if processes.count > 1:
        raise SystemExit(
            f"--device-map spreads one model over every device, but {processes.count} processes were launched: "
            "use one process with --device-map, or several (one per device) without it"
        )
    return load_model(name, device_map=device_map)


def parse_methods(text: str, known: Sequence[str]) -> tuple[str, ...]:
    """The names of a `--methods` value; unknown ones end the command with the list of known ones."""
    methods = tuple(name.strip() for name in text.split(",") if name.strip())
    try:
        check_methods(methods, known)
    except ValueError as error:
        raise SystemExit(str(error)) from error
    return methods


@contextmanager
def run_folder(out: str | Path, shard: Shard, report_only: bool = False) -> Iterator[Path]:
    """The run folder of a command line, held for `shard`'s writes while the command runs (not with
    `--report-only`, which only reads), with the lock its `__main__` took before torch loaded
    ([`command_lock`][rcattr.eval.common.run_lock.command_lock]) when there is one. What stops a run ends the command
    with one line: an `--out` that is a file or cannot be made (checked first), a folder another live run
    writes, a folder holding a run with other settings, a file of rows with a damaged line."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise SystemExit(f"--out {out} is a file; give a folder (made if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SystemExit(f"--out {out}: cannot make the folder ({error.strerror or error})") from None
    try:
        with nullcontext() if report_only else run_folder_lock(folder, shard):
            yield folder
    except (RunLockedError, RunSettingsError, RowFileError) as error:
        raise SystemExit(str(error)) from None


def run_stored(args: argparse.Namespace, build: Callable[[], ShardedRun]) -> int:
    """What a benchmark command of one process does once its settings are checked: hold the run folder
    ([`run_folder`][rcattr.eval.common.run_args.run_folder]), `build()` the run (it claims the folder's settings; the model loads only when rows
    are missing), compute what is not on disk unless `--report-only`, and write the report; returns the exit
    status."""
    with run_folder(args.out, Shard(), args.report_only):
        run = build()
        if not args.report_only:
            announce_resume(run.out, run.size() - run.missing(), run.size(), "rows")
            run.compute()
        run.report()
    return 0


def run_command(
    args: argparse.Namespace,
    model_name: str | None,
    build: Callable[[PreTrainedModel, TokenizerLike, Shard], ShardedRun],
    table: Callable[[dict[str, Any]], str],
) -> int:
    """What a benchmark command does once its settings are checked: join the processes, hold the run folder
    ([`run_folder`][rcattr.eval.common.run_args.run_folder]), load the model, run this process's shard of `build(model, tokenizer, shard)` (or
    only report, with `--report-only`), and print `table` of the results; returns the exit status."""
    processes = Processes.start(args.shard)
    with run_folder(args.out, processes.shard, args.report_only):
        model, tokenizer = load_run_model(model_name, args.device_map, processes)
        results = run_sharded(build(model, tokenizer, processes.shard), processes, args.report_only)
    if results is not None:
        print(table(results))
    return 0
