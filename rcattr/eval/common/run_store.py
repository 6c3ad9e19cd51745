"""The run folder both benchmark runners keep their work in: its settings, its rows, its report.

A run folder holds `config.json` (the settings of the run, claimed by the first process and checked
by every later one), JSON-lines files of rows, one row per finished piece of work, written as it goes,
and the report files rewritten from every row on disk. A file of rows is named by a stem (the attribution
runner has one per method, `records/METHOD.jsonl`; the KV runner one for everything, `records.jsonl`)
and by the shard that wrote it (`STEM.shard-I-of-N.jsonl`, [`rcattr.eval.common.sharding`][rcattr.eval.common.sharding]); reading a stem
reads every shard's file, and `STEM.jsonl.gz` too, the form in which runs are committed under
`docs/records/`. A runner resumes by asking the store what is done and running the rest. Rows are
written so that a killed run loses at most the row it was writing ([`rcattr.eval.common.row_files`][rcattr.eval.common.row_files]), and
the command lines hold the folder's lock while they write ([`rcattr.eval.common.run_lock`][rcattr.eval.common.run_lock]).
"""

from __future__ import annotations

import json
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from rcattr.eval.common.row_files import Row, appending_rows, parse_rows
from rcattr.eval.common.run_lock import RunLock
from rcattr.eval.common.sharding import Processes, Shard

K = TypeVar("K", bound=Hashable)


class RunSettingsError(ValueError):
    """The run folder holds a run with other settings."""


def record_id(row: Row) -> str:
    """The key of a row of one record: its `id`."""
    return str(row["id"])


class RunStore:
    """The rows, settings and report of one run folder, as one shard of the run sees them.

    Parameters
    ----------
    out : str or Path
        The run folder; created if missing.
    rows : str, optional
        The folder of the row files, relative to `out`. Default: `"."` (`out` itself).
    shard : Shard, optional
        The share of the work this process writes. Default: the whole run.

    Examples
    --------
    >>> store = RunStore(tmp_path, rows="records")  # doctest: +SKIP
    >>> store.claim({"dataset": "quotesum"}, resumable=("methods",))  # doctest: +SKIP
    >>> with store.appending("rc") as write:  # doctest: +SKIP
    ...     write({"id": "a", "source": [True]})
    >>> store.done("rc", ["a", "b"], key=record_id)  # doctest: +SKIP
    {'a': {'id': 'a', 'source': [True]}}
    """

    def __init__(self, out: str | Path, rows: str = ".", shard: Shard | None = None) -> None:
        self.out = Path(out)
        self.folder = self.out / rows
        self.shard = shard or Shard()

    def claim(self, settings: dict[str, Any], resumable: Sequence[str] = ()) -> None:
        """Write `settings` to `config.json`; refuse a folder whose run has other settings, but for the
        keys in `resumable` (which a resumed run may change, e.g. adding methods).

        Raises
        ------
        RunSettingsError
            Naming the settings that differ from the run already in the folder.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.out / "config.json"
        if path.exists():
            previous = json.loads(path.read_text())
            changed = sorted(
                key for key in settings if key not in resumable and previous.get(key) != settings[key]
            )
            if changed:
                differences = "; ".join(
                    f"{key}: {previous.get(key)!r} there, {settings[key]!r} now" for key in changed
                )
                raise RunSettingsError(
                    f"{self.out} holds a run with other settings ({differences}); use a new --out, or the "
                    "settings of that run"
                )
        write_atomically(path, json.dumps(settings, indent=2))  # the processes of a sharded run all claim it

    def rows(self, stem: str) -> Iterator[Row]:
        """Every shard's rows of `stem`, in file order (the whole run's files first, then by name)."""
        return read_rows(self.folder, stem)

    def done(self, stem: str, order: Sequence[K], key: Callable[[Row], K]) -> dict[K, Row]:
        """The rows of `stem` on disk whose `key` is in `order`, by key in that order (every shard's;
        the last row of a key written twice), e.g. `key=record_id`."""
        rows = {key(row): row for row in self.rows(stem)}
        return {k: rows[k] for k in order if k in rows}

    def todo(self, stem: str, order: Sequence[K], key: Callable[[Row], K]) -> list[K]:
        """The keys of `order` without a row of `stem` on disk yet, in their order."""
        done = self.done(stem, order, key)
        return [k for k in order if k not in done]

    @contextmanager
    def appending(self, stem: str) -> Iterator[Callable[[Row], None]]:
        """A function that appends a row to this shard's file of `stem`, one whole line at a time, so that a
        run cut short keeps every row written ([`appending_rows`][rcattr.eval.common.row_files.appending_rows])."""
        with appending_rows(self.shard.path(self.folder, stem)) as write:
            yield write

    def write_report(self, results: dict[str, Any], markdown: str) -> None:
        """Write `results.json` and `results.md` (each in one step), and say where."""
        write_atomically(self.out / "results.json", json.dumps(results, indent=2))
        write_atomically(self.out / "results.md", markdown)
        print(f"report written to {self.out / 'results.md'} (and results.json)")


def read_rows(folder: Path, stem: str) -> Iterator[Row]:
    """The rows of every shard's `stem` file in `folder` (the whole run's first, then by name), the
    committed `stem.jsonl.gz` before them; a partial last line (a row being written, or a killed run's)
    is left out.

    Raises
    ------
    RowFileError
        Naming the file and line of a line that is not a row.
    """
    packed = folder / f"{stem}.jsonl.gz"
    whole = folder / f"{stem}.jsonl"
    paths = [path for path in (packed, whole) if path.exists()]
    for path in paths + sorted(folder.glob(f"{stem}.shard-*-of-*.jsonl")):
        yield from parse_rows(path)


def announce_resume(out: Path, done: int, total: int, unit: str) -> None:
    """Say that a run resumes, and how far it got, when some of its work is on disk already."""
    if done == total:
        print(f"{out}: all {total} {unit} are on disk already; nothing to run")
    elif done:
        print(f"resuming {done} of {total} {unit} from {out}; running the other {total - done}")


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` by `text` in one step, so a process reading it never sees half a file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as sink:
        sink.write(text)
    os.replace(temporary, path)


class StoredRun(ABC):
    """A benchmark run kept in a [`RunStore`][rcattr.eval.common.run_store.RunStore]: [`compute`][rcattr.eval.common.run_store.StoredRun.compute] runs this shard's work that is not on
    disk yet, [`report`][rcattr.eval.common.run_store.StoredRun.report] writes the report from every shard's rows.

    Parameters
    ----------
    out : str or Path
        The run folder; a run already there is resumed, if its settings are `settings`.
    settings : dict
        What the run measures, claimed as the folder's `config.json`.
    resumable : sequence of str
        The keys of `settings` a resumed run may change.
    rows : str, optional
        The folder of the row files, relative to `out`. Default: `"."`.
    shard : Shard, optional
        The share of the work this process runs. Default: all of it.
    """

    def __init__(
        self,
        out: str | Path,
        settings: dict[str, Any],
        resumable: Sequence[str],
        rows: str = ".",
        shard: Shard | None = None,
    ) -> None:
        self.store = RunStore(out, rows, shard)
        self.store.claim(settings, resumable)
        self.shard, self.out = self.store.shard, self.store.out

    @abstractmethod
    def compute(self) -> None:
        """Run this shard's work that is not on disk yet."""

    @abstractmethod
    def missing(self) -> int:
        """How many pieces of the whole run's work (every shard's) are not on disk yet."""

    @abstractmethod
    def size(self) -> int:
        """How many pieces of work the whole run has (every shard's)."""

    @abstractmethod
    def report(self) -> dict[str, Any]:
        """Write the report from every row on disk; returns the results."""

    def run(self) -> dict[str, Any]:
        """Run what is not on disk yet, holding the folder's lock for this shard (a second writer is refused:
        [`RunLock`][rcattr.eval.common.run_lock.RunLock]), then write the report; returns the results."""
        with RunLock(self.out, self.shard):
            self.compute()
            return self.report()


class MethodRecordRun(StoredRun):
    """A [`StoredRun`][rcattr.eval.common.run_store.StoredRun] of every method on every record, one row per (method label, record id) in the
    run's one file of rows, `OUT/records.jsonl`. Subclasses set `records` and `methods` (each with a
    `label`) and run one record's missing methods in [`run_record`][rcattr.eval.common.run_store.MethodRecordRun.run_record]."""

    ROWS = "records"
    records: Sequence[Any]
    methods: Sequence[Any]

    @property
    @abstractmethod
    def progress_label(self) -> str:
        """What the progress bar calls this run."""

    @abstractmethod
    def record_key(self, record: Any) -> str:
        """The id of `record` in the rows."""

    @abstractmethod
    def run_record(self, record: Any, methods: Sequence[Any], progress: Any) -> list[Row]:
        """The rows of `methods` on `record` (`progress`: the tqdm bar, one step per method)."""

    def done(self) -> dict[tuple[str, str], Row]:
        """Every result on disk (every shard's), by (method label, record id), in the order of the records
        and then of the methods."""
        keys = [(method.label, self.record_key(record)) for record in self.records for method in self.methods]
        return self.store.done(self.ROWS, keys, _method_and_record)

    def _todo(self, records: Sequence[Any]) -> list[list[Any]]:
        done = self.done()
        return [[m for m in self.methods if (m.label, self.record_key(r)) not in done] for r in records]

    def missing(self) -> int:
        """How many (method, record) runs are not on disk yet (all shards)."""
        return sum(map(len, self._todo(self.records)))

    def size(self) -> int:
        """How many (method, record) runs the whole run has."""
        return len(self.methods) * len(self.records)

    def compute(self) -> None:
        """Run this shard's records that are not on disk yet."""
        import torch
        from tqdm.auto import tqdm

        records = self.shard.take(self.records)
        todo = self._todo(records)
        if not any(todo):
            return
        bar = {
            "total": sum(map(len, todo)),
            "desc": f"{self.progress_label}{self.shard.label}",
            "unit": "run",
        }
        # entered in order: a partial row is set aside (and said so) before the bar shows
        with self.store.appending(self.ROWS) as write, torch.no_grad(), tqdm(**bar) as progress:
            for record, methods in zip(records, todo, strict=True):
                if methods:
                    for row in self.run_record(record, methods, progress):
                        write(row)


def _method_and_record(row: Row) -> tuple[str, str]:
    return row["method"], row["id"]


class ShardedRun(Protocol):
    """A benchmark whose work splits by record: [`compute`][rcattr.eval.common.run_store.StoredRun.compute] one shard, [`report`][rcattr.eval.common.run_store.StoredRun.report] from disk."""

    @property
    def out(self) -> Path: ...

    def compute(self) -> None: ...

    def missing(self) -> int: ...

    def size(self) -> int: ...

    def report(self) -> dict[str, Any]: ...


def run_sharded(run: ShardedRun, processes: Processes, report_only: bool = False) -> dict[str, Any] | None:
    """Compute this process's shard; after every process has, the main one writes the report of a whole
    run (a job given `--shard` leaves the merge to a run without it). Returns the results, or None.

    `report_only`: run nothing, and write the report of what is on disk now (every shard's rows; the
    records every method has finished), e.g. to look at a run that other processes are still writing."""
    if report_only:
        return run.report() if processes.is_main else None
    if processes.is_main:
        announce_resume(run.out, run.size() - run.missing(), run.size(), "(method, record) runs")
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
