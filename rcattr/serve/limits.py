"""What the service refuses before it parses a request: a body over the size limit (413, an ASGI middleware
that counts the bytes as they arrive); and the one line that answers a body FastAPI could not validate."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuse a request body over `max_bytes` with 413: by its `Content-Length` before reading it, or, sent
    in chunks, as soon as the bytes read pass the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def detail(self) -> str:
        return f"the request body is over this service's limit of {self.max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            body = json.dumps({"detail": self.detail()}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 413, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # FastAPI passes an HTTPException raised while reading through
                    raise HTTPException(413, self.detail())
            return message

        await self.app(scope, counted, send)


def one_line_reason(errors: Sequence[dict[str, Any]]) -> tuple[int, str]:
    """The status and one line for FastAPI's validation `errors` of a request: 400 for a body that is not
    JSON or missing, else 422 naming the field of the most specific error (`documents[2].text: ...`)."""
    first = errors[0]
    if first["type"] == "json_invalid":
        return 400, f"the body is not valid JSON ({first.get('ctx', {}).get('error', first['msg'])})"
    if first["type"] == "missing" and tuple(first["loc"]) == ("body",):
        return 400, "the body is empty; send a JSON object with documents (and question, answer, ...)"
    error = max(errors, key=lambda item: len(item["loc"]))
    field = _field(error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return 422, message if message.startswith(field) else f"{field}: {message}"


def _field(loc: Sequence[str | int]) -> str:
    """`("body", "documents", 2, "DocumentIn", "text")` as `documents[2].text` (without union tags)."""
    text = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part != "str" and not part[:1].isupper():
            text += f".{part}" if text else part
    return text or "body"
