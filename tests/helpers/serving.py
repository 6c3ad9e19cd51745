"""The citation service on a free loopback port for the tests (uvicorn in a thread, always stopped), and an
attributor that holds its batches back or fails one request, for the load and fault tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rcattr import RCAttributor
from rcattr.serve.command import free_port

DOCUMENTS = [  # short: the tiny models' window is 256 characters
    "The tower is 330 m tall.",
    "Fuji erupted in 1707.",
    {"page_content": "The lake is 1642 m deep.", "metadata": {"title": "Baikal", "source": "wiki"}},
]
REQUESTS = [
    {"documents": DOCUMENTS, "question": "How tall?", "answer": "It is 330 m tall."},
    {"documents": DOCUMENTS, "question": "When?", "answer": "In 1707. It is 1642 m deep."},
    {"documents": DOCUMENTS[:2], "question": "Deep?", "answer": "It is 1642 m deep.", "sentences": 1},
    {"documents": DOCUMENTS, "question": "", "answer": "Built in 1889.", "granularity": "chunk"},
]


@contextmanager
def served(app: Any, announce: Callable[[str], str] | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port (logging ``announce(url)`` once it listens, as
    ``rcattr serve`` does, when given); yields its base url, and stops it on exit."""
    import uvicorn

    from rcattr.serve.logs import AnnouncedServer

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config) if announce is None else AnnouncedServer(config, announce)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)


class GatedAttributor(RCAttributor):
    """An RCAttributor whose batches wait for ``gate`` (set: they run at once) and say when one is held
    (``entered``), and which fails any batch holding an answer with ``FAIL`` in it (a failing request)."""

    def __init__(self, model: Any, tokenizer: Any, **options: Any) -> None:
        super().__init__(model, tokenizer, **options)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.batch_sizes: list[int] = []

    def explain_batch(self, examples: Sequence[Any], inputs: Sequence[Any]) -> list[Any]:
        self.batch_sizes.append(len(examples))
        self.entered.set()
        if not self.gate.wait(60):
            raise TimeoutError("the test never opened the gate")
        if any("FAIL" in example.answer for example in examples):
            raise RuntimeError("an answer set to fail")
        return super().explain_batch(examples, inputs)


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    """Wait until ``condition()`` is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def single_call(attributor: RCAttributor, body: dict[str, Any]) -> dict[str, Any]:
    """The response body the service gives ``body``, from one ``attribute()`` call of the library's."""
    from rcattr.serve.citing import context_input, response
    from rcattr.serve.schema import CiteRequest

    request = CiteRequest.model_validate(body)
    result = attributor.attribute(
        context_input(request),
        request.answer,
        granularity=request.granularity,
        output_granularity=request.output_granularity,
    )
    return response(request, result, []).model_dump(mode="json")


def assert_close(served: Any, expected: Any, tolerance: float = 1e-4, where: str = "") -> None:
    """``served`` equals ``expected`` (JSON values), numbers within ``tolerance``."""
    if isinstance(expected, dict):
        assert isinstance(served, dict) and served.keys() == expected.keys(), where
        for key in expected:
            assert_close(served[key], expected[key], tolerance, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(served, list) and len(served) == len(expected), where
        for index, (one, other) in enumerate(zip(served, expected, strict=True)):
            assert_close(one, other, tolerance, f"{where}[{index}]")
    elif isinstance(expected, float) and not isinstance(served, bool):
        assert abs(served - expected) <= tolerance, f"{where}: {served} vs {expected}"
    else:
        assert served == expected, f"{where}: {served!r} vs {expected!r}"


@contextmanager
def released(attributor: GatedAttributor) -> Iterator[None]:
    """Open ``attributor``'s gate on exit, even when the test fails (so that its server can stop)."""
    try:
        yield
    finally:
        attributor.gate.set()
