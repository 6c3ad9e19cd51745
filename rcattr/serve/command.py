"""[`start_service`][rcattr.serve.command.start_service] starts `rcattr serve` ([`rcattr.cli.serve_command`][rcattr.cli.serve_command]) in a process of its own, on a
free loopback port (tutorials, benchmarks, tests)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from typing import IO


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_service(
    *options: str, timeout: float = 300.0, log: IO[str] | None = None
) -> tuple[subprocess.Popen, str]:
    """`rcattr serve` with `options` (`"--model", path`, ...) in a new process on a free 127.0.0.1 port,
    once `GET /healthz` answers: the process (stop it with `send_signal(signal.SIGINT)`) and its url. Its output
    (its log) goes to `log`, an open file, or else a temporary one, not a pipe nobody reads; RuntimeError with
    that output if it exits or does not answer within `timeout` seconds."""
    import httpx

    port = free_port()
    log = tempfile.TemporaryFile("w+") if log is None else log
    command = [sys.executable, "-m", "rcattr", "serve", "--port", str(port), *options]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
    while server.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return server, url
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    server.wait()
    log.seek(0)
    raise RuntimeError(f"rcattr serve did not start (exit status {server.returncode}): {log.read()[-2000:]}")
