"""Data-parallel benchmark runs: each process takes a shard of the records, the report merges them all.

A runner's process runs the records ``i`` with ``i % N == I`` (``--shard I/N``, or its rank among the
processes of ``accelerate launch`` / ``torchrun``, or both: ``--shard`` then splits the jobs and each
job's processes split its shard) and appends its rows to files of its own (``NAME.shard-I-of-N.jsonl``).
The report reads every file of the run folder and orders rows by the records' order, so it does not
depend on how the work was split: a sharded run gives the same results as a single one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: the records ``i`` with ``i % count == index``."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"a shard is I/N with 0 <= I < N, got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` (0-based I) as a shard."""
        index, slash, count = text.partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"a shard is I/N with 0 <= I < N (e.g. 0/4), got {text!r}")
        return cls(int(index), int(count))

    @property
    def whole(self) -> bool:
        return self.count == 1

    def split(self, index: int, count: int) -> Shard:
        """Part ``index`` of ``count`` of this shard (a job's shard split among its processes): together the
        parts take exactly this shard's records, however many processes each job has."""
        return Shard(self.index + index * self.count, self.count * count)

    def take(self, items: Sequence[T]) -> list[T]:
        """This shard's items, in their order."""
        return list(items[self.index :: self.count])

    def path(self, folder: Path, stem: str) -> Path:
        """The JSON-lines file this shard appends ``stem``'s rows to."""
        return folder / (
            f"{stem}.jsonl" if self.whole else f"{stem}.shard-{self.index}-of-{self.count}.jsonl"
        )

    @property
    def label(self) -> str:
        """What a progress bar adds for this shard (nothing for a whole run)."""
        return "" if self.whole else f" [shard {self}]"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def read_rows(folder: Path, stem: str) -> Iterator[dict[str, Any]]:
    """The rows of every shard's ``stem`` file in ``folder`` (the whole run's first, then by name)."""
    paths = sorted(folder.glob(f"{stem}.shard-*-of-*.jsonl"))
    whole = folder / f"{stem}.jsonl"
    for path in ([whole] if whole.exists() else []) + paths:
        for line in path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` in one step, so a process reading it never sees half a file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as sink:
        sink.write(text)
    os.replace(temporary, path)


class ShardedRun(Protocol):
    """A benchmark whose work splits by record: :meth:`compute` one shard, :meth:`report` from disk."""

    def compute(self) -> None: ...

    def missing(self) -> int: ...

    def report(self) -> dict[str, Any]: ...


@dataclass
class Processes:
    """This process among a run's: its shard, its device, and the barrier before the merge."""

    shard: Shard
    device: torch.device
    is_main: bool
    requested: Shard  # the job's own shard (``--shard``), before the split among its processes
    _state: Any = None  # accelerate's PartialState when several processes run

    @classmethod
    def start(cls, shard: Shard | None = None) -> Processes:
        """Join the processes ``accelerate launch`` / ``torchrun`` started (or be the only one)."""
        from accelerate import PartialState

        accelerator = getattr(torch, "accelerator", None)
        has_accelerator = accelerator.is_available() if accelerator else torch.cuda.is_available()
        state = PartialState(cpu=not has_accelerator)  # CPU processes join through gloo
        requested = shard or Shard()
        return cls(
            shard=requested.split(state.process_index, state.num_processes),
            device=state.device,
            is_main=state.is_main_process,
            requested=requested,
            _state=state if state.num_processes > 1 else None,
        )

    @property
    def count(self) -> int:
        return 1 if self._state is None else self._state.num_processes

    def wait(self) -> None:
        """Return once every process got here."""
        if self._state is not None:
            self._state.wait_for_everyone()


def run_sharded(run: ShardedRun, processes: Processes, report_only: bool = False) -> dict[str, Any] | None:
    """Compute this process's shard; after every process has, the main one writes the report of a whole
    run (a job given ``--shard`` leaves the merge to a run without it). Returns the results, or None.

    ``report_only``: run nothing, and write the report of what is on disk now (every shard's rows; the
    records every method has finished), e.g. to look at a run that other processes are still writing."""
    if report_only:
        return run.report() if processes.is_main else None
    run.compute()
    processes.wait()
    if not processes.is_main:
        return None
    if processes.requested.whole:
        return run.report()
    missing = run.missing()
    print(
        f"shard {processes.requested} done; {missing} run(s) of the whole benchmark are not on disk yet. "
        "Once every shard is done, the same command without --shard writes the report (and runs what is missing)."
    )
    return None
