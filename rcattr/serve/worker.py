"""The one thread that runs the model: jobs from a bounded queue, gathered into batches by a short wait, each
batch cited at once ([`cite_many`][rcattr.serve.citing.cite_many]) and every job answered through its own callback."""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.serve.citing import cite_many
from rcattr.serve.config import ServeConfig
from rcattr.serve.schema import CiteRequest, CiteResponse

Outcome = CiteResponse | Exception
# A forward's prompts are within this factor of its shortest: padding is the cost of a shared forward. On 2 CPU
# cores, 16 SQuAD requests (148 to 332 tokens) ran 0.85x the single calls' pace as one padded batch, and 32 ran
# 1.30x so grouped (one run each; a second run gave about 1.0x, docs/benchmarks/service.md).
MAX_PADDING = 1.5


def length_groups(jobs: list[Job]) -> list[list[Job]]:
    """`jobs` by their prompts' tokens, shortest first, cut wherever a prompt is over [`MAX_PADDING`][rcattr.serve.worker.MAX_PADDING]
    times its group's shortest: each group is one `attribute_many` whose forwards pad little."""
    groups: list[list[Job]] = []
    for job in sorted(jobs, key=lambda job: job.tokens):
        if groups and job.tokens <= MAX_PADDING * groups[-1][0].tokens:
            groups[-1].append(job)
        else:
            groups.append([job])
    return groups


@dataclass(eq=False)
class Job:
    """A checked request waiting for the model; `deliver` gets its response or error (from the worker's
    thread), unless its client went away first (`gone`)."""

    request: CiteRequest
    tokens: int  # its prompt's: a batch is ordered by them, so that its forwards pad little
    deliver: Callable[[Outcome], None]
    gone: threading.Event = field(default_factory=threading.Event)


class CitationWorker:
    """Runs `attributor` on batches of jobs in one thread (the library is not run from two at once).

    A batch is the first waiting job and those that arrive within `config.max_wait_ms`, at most
    `config.max_batch_size`; a job whose client went away before its batch starts is dropped unrun, and one
    whose client goes away during it is computed with its batch and its answer discarded: neither holds the
    others up. `counts` holds `served`, `failed`, `dropped` and `batches`."""

    def __init__(self, attributor: RCAttributor, config: ServeConfig) -> None:
        self.attributor = attributor
        self.config = config
        self.counts: Counter[str] = Counter()
        self.torch_threads = torch.get_num_threads()
        self.last_batch_seconds = 0.0
        self._queue: queue.Queue[Job] = queue.Queue(maxsize=config.queue_size)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rcattr-citation-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the batch in progress; jobs still queued are not run."""
        self._stop.set()
        self._thread.join(timeout)

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def submit(self, job: Job) -> None:
        """Queue `job`; [`queue.Full`][queue.Full] when `config.queue_size` jobs already wait."""
        self._queue.put_nowait(job)

    def retry_after(self) -> int:
        """Seconds a refused client should wait: the batches queued ahead of it, at the last batch's pace."""
        batches = -(-self.queued // self.config.max_batch_size)
        return max(1, round(batches * self.last_batch_seconds))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                first = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            self._run_batch(self._gather(first))

    def _gather(self, first: Job) -> list[Job]:
        """`first` and the jobs that arrive within the wait, up to the batch size."""
        jobs, deadline = [first], time.monotonic() + self.config.max_wait_ms / 1000
        while len(jobs) < self.config.max_batch_size:
            remaining = deadline - time.monotonic()
            try:
                jobs.append(self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return jobs

    def _run_batch(self, jobs: list[Job]) -> None:
        live = [job for job in jobs if not job.gone.is_set()]
        self.counts["dropped"] += len(jobs) - len(live)
        start = time.perf_counter()
        for group in length_groups(live):
            self._run_group(group)
        self.last_batch_seconds = time.perf_counter() - start
        self.torch_threads = torch.get_num_threads()  # as this thread sees it

    def _run_group(self, jobs: list[Job]) -> None:
        try:
            outcomes = cite_many(
                self.attributor,
                [job.request for job in jobs],
                max_batch_tokens=self.config.max_batch_tokens,
                max_new_tokens=self.config.max_new_tokens,
            )
        except Exception as error:  # the batch as a whole failed: every job hears why, the worker goes on
            outcomes = [error] * len(jobs)
        self.counts["batches"] += 1
        for job, outcome in zip(jobs, outcomes, strict=True):
            if job.gone.is_set():
                self.counts["dropped"] += 1
                continue
            self.counts["failed" if isinstance(outcome, Exception) else "served"] += 1
            job.deliver(outcome)
