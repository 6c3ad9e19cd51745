"""``rcattr serve`` as an operator starts it: a saved model on a free loopback port, answering, then stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from rcattr.cli import main
from tests.helpers.serving import free_port

pytestmark = pytest.mark.slow  # a fresh interpreter loads torch and the model


def test_rcattr_serve_starts_answers_and_stops(saved_llama) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rcattr",
            "serve",
            "--model",
            str(saved_llama),
            "--port",
            str(port),
            "--threads",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "rcattr serve did not start"
            time.sleep(0.2)
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
