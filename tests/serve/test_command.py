"""``rcattr serve`` as an operator starts it: a saved model on a free loopback port, answering, then stopped."""

from __future__ import annotations

import os
import signal
import sys

import httpx
import pytest

from rcattr.cli import main
from rcattr.serve.command import free_port, start_service

pytestmark = pytest.mark.slow  # a fresh interpreter loads torch and the model


def test_rcattr_serve_starts_answers_and_stops(saved_llama) -> None:
    server, url = start_service("--model", str(saved_llama), "--threads", "1", timeout=120)
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


def test_bad_limits_are_usage_errors(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--queue-size", "0"])
    assert exit_info.value.code == 2 and "--queue-size" in capsys.readouterr().err


def test_without_fastapi_the_command_says_what_to_install(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    assert main(["serve"]) == 2
    assert "pip install 'rcattr[serve]'" in capsys.readouterr().err
    assert os.environ.get("RCATTR_TRACEBACK") is None


def test_a_service_that_cannot_start_says_why(tmp_path) -> None:
    with pytest.raises(RuntimeError, match=r"did not start \(exit status 1\): .*cannot load model"):
        start_service("--model", str(tmp_path / "no-such-model"), timeout=120)


def test_free_ports_are_free() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", free_port()))  # nothing holds it
