"""The worker thread: jobs gathered into batches by a short wait, shorter prompts first, a job whose client left
dropped unrun, a full queue refused."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from rcattr.serve import worker as worker_module
from rcattr.serve.config import ServeConfig
from rcattr.serve.schema import CiteRequest, CiteResponse
from rcattr.serve.worker import MAX_PADDING, CitationWorker, Job, length_groups
from tests.helpers.serving import REQUESTS, GatedAttributor, wait_for


class Answers:
    """Each job's outcome as the worker delivers it."""

    def __init__(self) -> None:
        self.outcomes: dict[int, object] = {}
        self.lock = threading.Lock()

    def job(self, number: int, tokens: int = 10, body: dict | None = None) -> Job:
        def deliver(outcome: object) -> None:
            with self.lock:
                self.outcomes[number] = outcome

        return Job(CiteRequest.model_validate(body or REQUESTS[number % len(REQUESTS)]), tokens, deliver)


@contextmanager
def running(attributor: GatedAttributor, **limits) -> Iterator[CitationWorker]:
    worker = CitationWorker(attributor, ServeConfig(**{"max_wait_ms": 50.0, **limits}))
    worker.start()
    try:
        yield worker
    finally:
        attributor.gate.set()
        worker.stop()


def test_jobs_waiting_together_share_a_batch(gated: GatedAttributor) -> None:
    answers = Answers()
    gated.gate.clear()
    with running(gated) as worker:
        worker.submit(answers.job(0))
        wait_for(gated.entered.is_set)  # the first batch holds job 0 alone
        for number in (1, 2, 3):
            worker.submit(answers.job(number))
        gated.gate.set()
        wait_for(lambda: len(answers.outcomes) == 4)
    assert gated.batch_sizes == [1, 3]
    assert all(isinstance(outcome, CiteResponse) for outcome in answers.outcomes.values())
    assert (worker.counts["served"], worker.counts["batches"], worker.counts["dropped"]) == (4, 2, 0)


def test_a_job_whose_client_left_is_dropped_unrun(gated: GatedAttributor) -> None:
    answers = Answers()
    gated.gate.clear()
    with running(gated) as worker:
        worker.submit(answers.job(0))
        wait_for(gated.entered.is_set)
        left = answers.job(1)
        left.gone.set()
        worker.submit(left)
        worker.submit(answers.job(2))
        gated.gate.set()
        wait_for(lambda: len(answers.outcomes) == 2)
    assert sorted(answers.outcomes) == [0, 2] and gated.batch_sizes == [1, 1]
    assert worker.counts["dropped"] == 1


def test_a_full_queue_refuses_with_a_retry_time(gated: GatedAttributor) -> None:
    answers = Answers()
    gated.gate.clear()
    with running(gated, queue_size=1, max_batch_size=1) as worker:
        worker.submit(answers.job(0))
        wait_for(gated.entered.is_set)
        worker.submit(answers.job(1))
        with pytest.raises(queue.Full):
            worker.submit(answers.job(2))
        assert worker.retry_after() >= 1
        gated.gate.set()
        wait_for(lambda: len(answers.outcomes) == 2)


def test_a_batch_runs_shorter_prompts_first_in_groups_of_like_length(
    gated: GatedAttributor, monkeypatch
) -> None:
    seen: list[list[str]] = []

    def record(attributor, requests, **options):
        seen.append([request.answer for request in requests])
        return [RuntimeError("not run")] * len(requests)

    monkeypatch.setattr(worker_module, "cite_many", record)
    answers = Answers()
    gated.gate.clear()
    with running(gated, max_wait_ms=2000.0) as worker:
        for number, tokens in enumerate((30, 10, 12)):
            worker.submit(answers.job(number, tokens))
        wait_for(lambda: len(answers.outcomes) == 3)
    assert seen == [[REQUESTS[1]["answer"], REQUESTS[2]["answer"]], [REQUESTS[0]["answer"]]]
    assert worker.counts["failed"] == 3


def test_length_groups_keep_each_forward_s_padding_small() -> None:
    answers = Answers()
    jobs = [answers.job(number, tokens) for number, tokens in enumerate((300, 100, 140, 150, 151, 220))]
    groups = [[job.tokens for job in group] for group in length_groups(jobs)]
    assert groups == [[100, 140, 150], [151, 220], [300]]
    assert all(max(group) <= MAX_PADDING * min(group) for group in groups)
