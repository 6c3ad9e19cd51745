"""What the benchmark runners' command lines share: their common arguments and the model's placement (the
run folder itself is :class:`rcattr.eval.common.run_store.RunStore`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.eval.common.registry import check_methods
from rcattr.eval.common.sharding import Processes, Shard


def add_run_arguments(
    parser: argparse.ArgumentParser, methods: Sequence[str], optional: Sequence[str] = ()
) -> None:
    """``--out``, ``--limit`` and ``--methods`` (comma-separated, from ``methods``; by default all but
    the ``optional`` ones)."""
    parser.add_argument("--out", required=True, help="output folder (resumes a run already there)")
    parser.add_argument("--limit", type=int, help="first N records only")
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
        "--report-only",
        action="store_true",
        help="run nothing: write the report from the rows on disk (every shard's, the records every method "
        "has finished), e.g. while the shards of the run are still going",
    )
    parser.add_argument("--model", help="model name or path (default: the offline SmolLM2-135M-Instruct)")
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
    """The model of a run, on this process's device, or spread by ``device_map`` when one process runs."""
    from rcattr.models import load_model

    if device_map is None:
        return load_model(name, device=processes.device)
    if processes.count > 1:
        raise SystemExit(
            f"--device-map spreads one model over every device, but {processes.count} processes were launched: "
            "use one process with --device-map, or several (one per device) without it"
        )
    return load_model(name, device_map=device_map)


def parse_methods(text: str, known: Sequence[str]) -> tuple[str, ...]:
    """The names of a ``--methods`` value; unknown ones end the command with the list of known ones."""
    methods = tuple(name.strip() for name in text.split(",") if name.strip())
    try:
        check_methods(methods, known)
    except ValueError as error:
        raise SystemExit(str(error)) from error
    return methods
