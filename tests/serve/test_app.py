"""The service on a real loopback server driven by a real HTTP client: citations as single calls give them under
concurrent load, every bad input answered 4xx in one line before model work, overload 503, a client that goes
away, a request that fails inside a batch while its neighbours succeed, and torch's threads left alone."""

from __future__ import annotations

import json
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import httpx
import pytest
import torch

from rcattr.serve.app import create_app
from rcattr.serve.config import ServeConfig
from tests.helpers.serving import (
    REQUESTS,
    GatedAttributor,
    assert_close,
    released,
    served,
    single_call,
    wait_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:no selected head sees the context")


def _app(attributor: GatedAttributor, **limits):
    return create_app(attributor, ServeConfig(**{"max_wait_ms": 20.0, **limits}), model_name="tiny-llama")


def _post(url: str, body: dict, timeout: float = 60.0) -> httpx.Response:
    return httpx.post(f"{url}/v1/cite", json=body, timeout=timeout)


def test_concurrent_clients_get_the_single_call_citations(gated: GatedAttributor) -> None:
    bodies = [REQUESTS[index % len(REQUESTS)] for index in range(16)]
    gated.gate.clear()  # hold the first batch until every request waits: the rest share batches
    with served(_app(gated, max_batch_size=8)) as url, released(gated), ThreadPoolExecutor(16) as pool:
        pending = [pool.submit(_post, url, body) for body in bodies]
        wait_for(lambda: bool(gated.batch_sizes) and _queued(url) == 16 - gated.batch_sizes[0])
        gated.gate.set()
        responses = [future.result() for future in pending]
        health = httpx.get(f"{url}/healthz").json()
    assert [response.status_code for response in responses] == [200] * 16
    assert max(gated.batch_sizes) == 8 and sum(gated.batch_sizes) == 16
    for response, body in zip(responses, bodies, strict=True):
        assert_close(response.json(), single_call(gated, body))
    assert health["served"] == 16 and health["failed"] == 0


def _queued(url: str) -> int:
    return int(httpx.get(f"{url}/healthz").json()["queued"])


def _too_long() -> dict:
    return {"documents": ["word " * 60], "answer": "x"}  # 300 characters: past the window of 256


BAD = [
    (b'{"documents": ["a"', 400, "not valid JSON"),
    (b"", 400, "body is empty"),
    (json.dumps({"documents": [4]}).encode(), 422, "documents[0] is a int"),
    (json.dumps({"documents": [{"text": 4}]}).encode(), 422, "documents[0].text"),
    (json.dumps({"documents": [{"title": "no text"}]}).encode(), 422, "has no page_content, text or content"),
    (json.dumps({"documents": ["ok", " \n "]}).encode(), 422, "documents[1]: the document is empty"),
    (json.dumps({"documents": []}).encode(), 422, "documents:"),
    (json.dumps({"documents": ["ok"], "question": 3}).encode(), 422, "question:"),
    (json.dumps({"documents": ["ok"], "answer": "  "}).encode(), 422, "answer: the answer is empty"),
    (json.dumps({"documents": ["ok"], "granularity": "page"}).encode(), 422, "granularity:"),
    (json.dumps({"documents": ["ok"], "answr": "typo"}).encode(), 422, "answr: Extra inputs"),
    ('{"documents": ["caf\xe9"]}'.encode("latin-1"), 400, "the body is not UTF-8 text (byte 0xe9 at 19"),
    (b'{"documents": ["ok"], "answer": "ok", "min_share": NaN}', 422, "min_share: Input should be a finite"),
    (
        b'{"documents": ["ok"], "answer": "ok", "min_reliance": -Infinity}',
        422,
        "min_reliance: Input should be a fin",
    ),
    (
        json.dumps({"documents": ["ok"], "question": "a\x00b"}).encode(),
        422,
        "question: the question contains a NUL",
    ),
    (
        json.dumps({"documents": ["ok", {"text": "ok", "titel": "T"}]}).encode(),
        422,
        "documents[1] has an unknown field 'titel'",
    ),
    (json.dumps(_too_long()).encode(), 422, "documents: the prompt"),
    (json.dumps({"documents": ["ok"], "answer": "y" * 300}).encode(), 422, "answer: prompt"),
    (json.dumps({"documents": ["d"] * 5}).encode(), 413, "documents: 5 given"),
    (json.dumps({"documents": ["x" * 3000]}).encode(), 413, "over this service's limit of 2000 bytes"),
]


def test_every_bad_input_gets_its_4xx_before_model_work(gated: GatedAttributor) -> None:
    with served(_app(gated, max_documents=4, max_request_bytes=2000)) as url:
        for body, status, found in BAD:
            response = httpx.post(
                f"{url}/v1/cite", content=body, headers={"content-type": "application/json"}, timeout=30
            )
            assert response.status_code == status, (body[:60], response.text)
            detail = response.json()["detail"]
            assert found in detail and "\n" not in detail, detail
        form = httpx.post(
            f"{url}/v1/cite", content=b'{"documents": ["x"]}', headers={"content-type": "text/plain"}
        )
        assert form.status_code == 415 and "Content-Type: application/json" in form.json()["detail"]
        chunked = httpx.post(  # no Content-Length: counted as it arrives
            f"{url}/v1/cite", content=iter([b'{"documents": ["', b"x" * 3000, b'"]}']), timeout=30
        )
        assert chunked.status_code == 413
        assert httpx.get(f"{url}/healthz").json()["served"] == 0
    assert gated.batch_sizes == []  # none reached the model


def test_a_full_queue_answers_503_with_retry_after(gated: GatedAttributor) -> None:
    gated.gate.clear()
    with (
        served(_app(gated, queue_size=1, max_batch_size=1)) as url,
        released(gated),
        ThreadPoolExecutor(2) as pool,
    ):
        running = pool.submit(_post, url, REQUESTS[0])
        wait_for(gated.entered.is_set)
        waiting = pool.submit(_post, url, REQUESTS[1])
        wait_for(lambda: _queued(url) == 1)
        refused = _post(url, REQUESTS[2])
        gated.gate.set()
        assert running.result().status_code == 200 and waiting.result().status_code == 200
    assert refused.status_code == 503 and "busy" in refused.json()["detail"]
    assert int(refused.headers["Retry-After"]) >= 1


def _send_and_leave(url: str, body: dict) -> socket.socket:
    """A client that sends ``body`` and will close the connection without reading the answer."""
    address = urlparse(url)
    payload = json.dumps(body).encode()
    client = socket.create_connection((address.hostname, address.port))
    client.sendall(
        b"POST /v1/cite HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return client


def test_a_client_that_leaves_does_not_stall_its_batch(gated: GatedAttributor) -> None:
    gated.gate.clear()
    with served(_app(gated, max_wait_ms=2000.0)) as url, released(gated), ThreadPoolExecutor(1) as pool:
        staying = pool.submit(_post, url, REQUESTS[0])
        leaving = _send_and_leave(url, REQUESTS[1])  # both within the batch's wait of 2 s
        wait_for(lambda: gated.batch_sizes == [2])
        leaving.close()  # while its batch runs
        wait_for(lambda: gated.batch_sizes == [2])
        threading.Timer(0.3, gated.gate.set).start()
        assert staying.result(timeout=60).status_code == 200
        wait_for(lambda: httpx.get(f"{url}/healthz").json()["dropped"] == 1)
        later = _post(url, REQUESTS[2])  # the worker goes on
        assert later.status_code == 200
        health = httpx.get(f"{url}/healthz").json()
    assert (health["served"], health["dropped"]) == (2, 1)


def test_a_request_failing_in_a_batch_leaves_its_neighbours_answered(gated: GatedAttributor) -> None:
    bodies = [REQUESTS[0], {**REQUESTS[1], "answer": "It FAILS."}, REQUESTS[2]]
    gated.gate.clear()
    with served(_app(gated)) as url, released(gated), ThreadPoolExecutor(4) as pool:
        first = pool.submit(_post, url, REQUESTS[3])
        wait_for(gated.entered.is_set)
        pending = [pool.submit(_post, url, body) for body in bodies]
        wait_for(lambda: _queued(url) == 3)
        gated.gate.set()
        responses = [future.result() for future in pending]
        assert first.result().status_code == 200
    assert gated.batch_sizes[:2] == [1, 3]  # then each of the three alone, to find the failing one
    assert [response.status_code for response in responses] == [200, 500, 200]
    assert "RuntimeError: an answer set to fail" in responses[1].json()["detail"]
    assert_close(responses[0].json(), single_call(gated, bodies[0]))


def test_the_model_and_torch_threads_are_reported_as_the_operator_set(gated: GatedAttributor) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with served(_app(gated)) as url:
            assert _post(url, REQUESTS[0]).status_code == 200
            model = httpx.get(f"{url}/v1/model").json()
            schema = httpx.get(f"{url}/openapi.json").json()
    finally:
        torch.set_num_threads(before)
    assert model["torch_threads"] == 1 and model["window"] == 256 and model["model"] == "tiny-llama"
    assert "/v1/cite" in schema["paths"] and "CiteRequest" in schema["components"]["schemas"]


@pytest.fixture
def no_network(monkeypatch):
    """Any connection the process opens to an address other than the loopback fails, as on a closed network."""
    connect = socket.socket.connect

    def loopback_only(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1"):
            raise OSError(f"the network is unplugged in this test: {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)


REFERENCE = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)|url: *'([^']+)'""")


@pytest.mark.parametrize(("page", "assets"), [("/docs", 4), ("/redoc", 3)])
def test_the_api_pages_load_everything_from_the_service(
    gated: GatedAttributor, no_network, page, assets
) -> None:
    with served(_app(gated)) as url, httpx.Client(base_url=url) as client:
        html = client.get(page)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        assert not re.search(r"https?://", html.text)  # no CDN, no web font
        references = [first or second for first, second in REFERENCE.findall(html.text)]
        assert len(references) == assets and "/openapi.json" in references, references
        for reference in references:
            assert reference.startswith("/") and not reference.startswith("//"), reference
            asset = client.get(reference)
            assert asset.status_code == 200 and len(asset.content) > 100, reference
        schema = client.get("/openapi.json").json()
    assert {"/v1/cite", "/healthz", "/v1/model"} <= schema["paths"].keys()
    with pytest.raises(httpx.TransportError, match="unplugged"):  # the network was unplugged all along
        httpx.get("http://192.0.2.1/", timeout=2)
