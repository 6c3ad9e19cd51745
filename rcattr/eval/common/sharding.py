"""Data-parallel benchmark runs: each process takes a shard of the records, the report merges them all.

A runner's process runs the records `i` with `i % N == I` (`--shard I/N`, or its rank among the
processes of `accelerate launch` / `torchrun`, or both: `--shard` then splits the jobs and each
job's processes split its shard) and appends its rows to files of its own (`NAME.shard-I-of-N.jsonl`).
The report reads every file of the run folder ([`rcattr.eval.common.run_store.RunStore`][rcattr.eval.common.run_store.RunStore]) and orders rows by
the records' order, so it does not depend on how the work was split: a sharded run gives the same results
as a single one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: the records `i` with `i % count == index`."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"a shard is I/N with 0 <= I < N, got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`"I/N"` (0-based I) as a shard."""
        index, slash, count = text.partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"a shard is I/N with 0 <= I < N (e.g. 0/4), got {text!r}")
        return cls(int(index), int(count))

    @property
    def whole(self) -> bool:
        return self.count == 1

    def split(self, index: int, count: int) -> Shard:
        """Part `index` of `count` of this shard (a job's shard split among its processes): together the
        parts take exactly this shard's records, however many processes each job has."""
        return Shard(self.index + index * self.count, self.count * count)

    def take(self, items: Sequence[T]) -> list[T]:
        """This shard's items, in their order."""
        return list(items[self.index :: self.count])

    def path(self, folder: Path, stem: str) -> Path:
        """The JSON-lines file this shard appends `stem`'s rows to."""
        return folder / (
            f"{stem}.jsonl" if self.whole else f"{stem}.shard-{self.index}-of-{self.count}.jsonl"
        )

    @property
    def label(self) -> str:
        """What a progress bar adds for this shard (nothing for a whole run)."""
        return "" if self.whole else f" [shard {self}]"

    def overlaps(self, other: Shard) -> bool:
        """Whether a record belongs to both shards (`i % N == I` and `i % M == J` have a common solution
        exactly when `I - J` is a multiple of `gcd(N, M)`)."""
        return (self.index - other.index) % math.gcd(self.count, other.count) == 0

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class Processes:
    """This process among a run's: its shard, its device, and the barrier before the merge."""

    shard: Shard
    device: torch.device
    is_main: bool
    requested: Shard  # the job's own shard (`--shard`), before the split among its processes
    _state: Any = None  # accelerate's PartialState when several processes run

    @classmethod
    def start(cls, shard: Shard | None = None) -> Processes:
        """Join the processes `accelerate launch` / `torchrun` started (or be the only one)."""
        import torch
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
