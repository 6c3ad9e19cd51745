"""``rcattr serve``: the citation service on one model, with uvicorn (the ``serve`` extra); and
:func:`start_service`, which starts it in a process of its own (tutorials, benchmarks, tests)."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO

from rcattr.cli.inputs import CommandError


def serve(args: argparse.Namespace) -> int:
    """Load the model, build the service with the operator's limits, and serve until interrupted."""
    try:
        import uvicorn

        from rcattr.serve.app import create_app
    except ImportError as error:
        raise CommandError(
            f"rcattr serve needs FastAPI and uvicorn ({error.name} is missing): pip install 'rcattr[serve]'"
        ) from None
    import torch

    from rcattr.cli.commands import attributor_of
    from rcattr.runtime.models import DEFAULT_MODEL
    from rcattr.serve.config import ServeConfig
    from rcattr.serve.logs import AnnouncedServer, log_config, startup_line

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    config = ServeConfig(
        max_documents=args.max_documents,
        max_request_bytes=args.max_request_bytes,
        queue_size=args.queue_size,
        max_batch_size=args.max_batch_size,
        max_batch_tokens=args.max_batch_tokens,
        max_wait_ms=args.max_wait_ms,
        max_new_tokens=args.max_new_tokens,
    )
    app = create_app(attributor_of(args), config, model_name=args.model or DEFAULT_MODEL)
    settings = log_config(args.log_level)
    uvicorn_level = settings["loggers"]["uvicorn"]["level"].lower()
    options = {"log_config": settings, "log_level": uvicorn_level, "access_log": False}
    server = AnnouncedServer(
        uvicorn.Config(app, host=args.host, port=args.port, **options),
        lambda url: startup_line(url, app.state.model_info(), config),
    )
    server.run()
    return 0


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_service(
    *options: str, timeout: float = 300.0, log: IO[str] | None = None
) -> tuple[subprocess.Popen, str]:
    """``rcattr serve`` with ``options`` (``"--model", path``, ...) in a new process on a free 127.0.0.1 port,
    once ``GET /healthz`` answers: the process (stop it with ``send_signal(signal.SIGINT)``) and its url. Its output
    (its log) goes to ``log``, an open file, or else a temporary one, not a pipe nobody reads; RuntimeError with
    that output if it exits or does not answer within ``timeout`` seconds."""
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
