"""What the citation service tells its operator, through [`logging`][logging] (logger `rcattr.serve`): one start-up
line (where it listens, the model, its device and window, the batch settings) and one line per request (status,
time, documents and prompt tokens, or the one-line reason of a refusal or failure). `rcattr serve --log-level
warning` keeps only the failures (5xx)."""

from __future__ import annotations

import copy
import json
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import LOGGING_CONFIG

from rcattr.serve.config import ServeConfig
from rcattr.serve.schema import ModelInfo

logger = logging.getLogger("rcattr.serve")


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging configuration with `rcattr.serve` at `level` on its stderr handler; uvicorn's own
    lines (its start-up chatter, its access log) only from `warning` up, unless `level` is `debug`."""
    config = copy.deepcopy(LOGGING_CONFIG)
    uvicorn_level = "DEBUG" if level == "debug" else max(level.upper(), "WARNING", key=logging.getLevelName)
    config["loggers"]["uvicorn"]["level"] = uvicorn_level
    config["loggers"]["uvicorn.error"]["level"] = uvicorn_level
    config["loggers"]["rcattr.serve"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


def startup_line(url: str, info: ModelInfo, config: ServeConfig) -> str:
    """The line the service logs once it listens at `url`."""
    window = "no window" if info.window is None else f"a {info.window}-token window"
    tokens = "" if config.max_batch_tokens is None else f" and {config.max_batch_tokens} tokens"
    threads = f"{info.torch_threads} torch thread{'' if info.torch_threads == 1 else 's'}"
    return (
        f"rcattr {info.version} serves {info.model} on {info.device} ({window}, {threads}) at {url} (API pages "
        f"at {url}/docs): batches of up to {config.max_batch_size} requests{tokens}, gathered for "
        f"{config.max_wait_ms:g} ms; {config.queue_size} requests may wait; a request takes up to "
        f"{config.max_documents} documents and {config.max_request_bytes} bytes"
    )


class AnnouncedServer(uvicorn.Server):
    """uvicorn's server that logs `announce(url)` once it listens, `url` the address it bound."""

    def __init__(self, config: uvicorn.Config, announce: Callable[[str], str]) -> None:
        super().__init__(config)
        self.announce = announce

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.servers:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            logger.info(self.announce(f"http://{f'[{host}]' if ':' in host else host}:{port}"))


class AccessLog:
    """One log line per HTTP request: `"POST /v1/cite" 200 in 812 ms: 3 documents, 412 tokens`, or the
    `detail` of an error response. The endpoint puts `documents` and `tokens` in `request.state`. 5xx are
    logged as errors, the rest as info."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        status, body = 500, b""

        async def observed(message: Message) -> None:
            nonlocal status, body
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400 and len(body) < 4096:
                body += message.get("body", b"")
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            elapsed_ms = (time.perf_counter() - started) * 1000
            client = scope.get("client")
            where = f"{client[0]}:{client[1]} " if client else ""
            line = f'{where}"{scope["method"]} {scope["path"]}" {status} in {elapsed_ms:.0f} ms'
            about = _about(status, body, state)
            logger.log(
                logging.ERROR if status >= 500 else logging.INFO, f"{line}: {about}" if about else line
            )


def _about(status: int, body: bytes, state: dict[str, Any]) -> str:
    """What a request's line says after its status: the error's detail, or its documents and tokens."""
    if status == 499:
        return "the client went away before its answer"
    if status >= 400:
        try:
            return str(json.loads(body)["detail"])
        except (ValueError, KeyError, TypeError):
            return body.decode("utf-8", "replace")[:200]
    counts = [f"{state[key]} {key}" for key in ("documents", "tokens") if key in state]
    return ", ".join(counts)
