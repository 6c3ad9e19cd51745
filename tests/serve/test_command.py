"""``rcattr serve`` as an operator starts it: a saved model on a free loopback port, answering, then stopped."""

from __future__ import annotations

import signal

import httpx
import pytest

import rcattr
from rcattr.serve.command import free_port, start_service

pytestmark = pytest.mark.slow  # a fresh interpreter loads torch and the model


def test_rcattr_serve_starts_answers_and_stops(saved_llama, tmp_path) -> None:
    log = (tmp_path / "serve.log").open("w+")
    server, url = start_service("--model", str(saved_llama), "--threads", "1", timeout=120, log=log)
    try:
        body = {
            "documents": ["The tower is 330 m tall.", "Fuji erupted in 1707."],
            "answer": "It is 330 m tall.",
        }
        cited = httpx.post(f"{url}/v1/cite", json=body, timeout=60).json()
        model = httpx.get(f"{url}/v1/model").json()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
    assert cited["answer"] == body["answer"] and len(cited["citations"]) == 1
    assert model["torch_threads"] == 1 and model["model"] == str(saved_llama)
    assert server.returncode in (0, -signal.SIGINT)
    log.seek(0)
    lines = log.read().splitlines()
    started = [line for line in lines if " serves " in line]
    assert started == [
        f"INFO:     rcattr {rcattr.__version__} serves {saved_llama} on cpu (a 256-token window, 1 torch thread) "
        f"at {url} (API pages at {url}/docs): batches of up to 16 requests and 8192 tokens, gathered for 10 ms; "
        "64 requests may wait; a request takes up to 64 documents and 2000000 bytes"
    ]
    assert any('"POST /v1/cite" 200 in ' in line and ": 2 documents, " in line for line in lines), lines
    assert not any(
        "Uvicorn running" in line for line in lines
    )  # uvicorn's own lines only at --log-level debug


def test_a_service_that_cannot_start_says_why(tmp_path) -> None:
    with pytest.raises(RuntimeError, match=r"did not start \(exit status 1\): .*cannot load model"):
        start_service("--model", str(tmp_path / "no-such-model"), timeout=120)


def test_free_ports_are_free() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", free_port()))  # nothing holds it
